//! The simulated meter's configuration: its ground truth and its sensor behaviour.
//!
//! The built-in default is `default.toml` beside this file ([`SimConfig::DEFAULT_TOML`]),
//! documented line by line; `--sim-config` loads a TOML (or JSON, by extension) file with
//! the same fields. Unknown fields are errors, so a typo cannot silently leave a default.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use taskwatt_traces::Arch;

use crate::EnergyError;

/// The simulated meter's whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Seed of the power noise.
    pub seed: u64,
    /// RAPL-like counter behaviour of the package and DRAM domains.
    pub rapl: RaplSimConfig,
    /// Package domains' base power and noise.
    pub package: DomainPower,
    /// DRAM domains' base power and noise.
    pub dram: DomainPower,
    /// NVML-like GPU domains.
    pub gpu: GpuSimConfig,
    /// Extra power of codelets not listed in `codelets`.
    pub default_task: ArchPowers,
    /// Extra power per codelet name.
    #[serde(default)]
    pub codelets: BTreeMap<String, ArchPowers>,
}

/// RAPL-like counter behaviour.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaplSimConfig {
    /// The energy unit is 2^-energy_unit_exp J (14: 61 µJ).
    pub energy_unit_exp: u32,
    /// The counter changes only at multiples of this interval on the trace clock, in µs.
    pub update_interval_us: u64,
    /// Width of the raw counter in bits (it wraps modulo 2^counter_bits).
    pub counter_bits: u32,
    /// Raw counter value at start, in energy units (must be below 2^counter_bits).
    #[serde(default)]
    pub start_offset: u64,
}

/// A domain's idle power and noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainPower {
    /// Power drawn whatever runs, in W.
    pub base_w: f64,
    /// Standard deviation of the white power noise at 1 ms resolution, in W.
    pub noise_sigma_w: f64,
}

/// What a simulated GPU domain reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuSensor {
    /// A total-energy counter in mJ (NVML, Volta and later).
    Energy,
    /// Power readings averaged over `power_window_ms` (NVML power_usage, Ampere and later).
    Power,
    /// Both, as NVML gives on Volta and later: two domains of the same GPU, the energy
    /// counter first (its primary reading) and the averaged power readings second, which
    /// attribution fits together.
    Both,
}

/// NVML-like GPU domains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSimConfig {
    /// Whether GPU workers get a simulated GPU domain.
    pub enabled: bool,
    /// Idle power of a GPU, in W.
    pub base_w: f64,
    /// Standard deviation of its white power noise at 1 ms resolution, in W.
    pub noise_sigma_w: f64,
    /// Refresh interval of the reading, in ms (NVML: 20-100).
    pub update_interval_ms: u64,
    /// What it reports.
    pub sensor: GpuSensor,
    /// Averaging window of power readings, in ms.
    pub power_window_ms: u64,
    /// The energy counter sees only the last `sampled_ms` of each update interval and
    /// counts the whole interval at that part's average power (A100/H100: about 25 of
    /// 100 ms); 0: it sees everything. It must divide `update_interval_ms`. Energy sensor
    /// only.
    #[serde(default)]
    pub sampled_ms: u64,
}

/// Extra power of one task, per domain kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskPower {
    /// On the worker's package domain, in W.
    pub package_w: f64,
    /// On the worker's DRAM domain, in W.
    pub dram_w: f64,
    /// On the worker's GPU domain (GPU workers only), in W.
    #[serde(default)]
    pub gpu_w: f64,
}

impl TaskPower {
    /// No extra power.
    pub const ZERO: TaskPower = TaskPower {
        package_w: 0.0,
        dram_w: 0.0,
        gpu_w: 0.0,
    };

    /// As a channel vector (package, DRAM, GPU).
    pub(crate) fn channels(self) -> [f64; 3] {
        [self.package_w, self.dram_w, self.gpu_w]
    }
}

/// Extra powers of a codelet per architecture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchPowers {
    /// When a CPU implementation runs.
    pub cpu: Option<TaskPower>,
    /// When a GPU implementation runs.
    pub gpu: Option<TaskPower>,
}

impl ArchPowers {
    /// The powers for `arch`, if given.
    pub fn get(&self, arch: Arch) -> Option<TaskPower> {
        match arch {
            Arch::Cpu => self.cpu,
            Arch::Gpu => self.gpu,
        }
    }
}

impl Default for SimConfig {
    /// The built-in configuration ([`SimConfig::DEFAULT_TOML`]).
    fn default() -> Self {
        SimConfig::from_toml_str(Self::DEFAULT_TOML, "built-in default")
            .expect("the built-in default.toml is valid (tested)")
    }
}

impl SimConfig {
    /// The built-in configuration, documented.
    pub const DEFAULT_TOML: &'static str = include_str!("default.toml");

    /// Parses and validates a TOML configuration; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<SimConfig, EnergyError> {
        let config: SimConfig = toml::from_str(text).map_err(|e| EnergyError::SimConfig {
            origin: origin.to_owned(),
            message: format!(
                "{e} (the documented default is energy/src/sim/default.toml; see docs/energy.md)"
            ),
        })?;
        config.validate(origin)?;
        Ok(config)
    }

    /// Parses and validates a JSON configuration; `origin` names it in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<SimConfig, EnergyError> {
        let config: SimConfig = serde_json::from_str(text).map_err(|e| EnergyError::SimConfig {
            origin: origin.to_owned(),
            message: e.to_string(),
        })?;
        config.validate(origin)?;
        Ok(config)
    }

    /// Loads a configuration file: JSON if its name ends in `.json`, TOML otherwise.
    pub fn from_file(path: &Path) -> Result<SimConfig, EnergyError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| EnergyError::SimConfig {
            origin: origin.clone(),
            message: format!("cannot read it: {e}"),
        })?;
        if path.extension().is_some_and(|e| e == "json") {
            Self::from_json_str(&text, &origin)
        } else {
            Self::from_toml_str(&text, &origin)
        }
    }

    /// The extra power of a task of codelet `name` running on `arch`: the codelet's entry,
    /// else the default task's, else none.
    pub fn task_power(&self, name: &str, arch: Arch) -> TaskPower {
        self.codelets
            .get(name)
            .and_then(|p| p.get(arch))
            .or_else(|| self.default_task.get(arch))
            .unwrap_or(TaskPower::ZERO)
    }

    /// The default task's power on `arch` (codelets without an entry).
    pub fn default_power(&self, arch: Arch) -> TaskPower {
        self.default_task.get(arch).unwrap_or(TaskPower::ZERO)
    }

    /// The energy unit in J.
    pub fn energy_unit_j(&self) -> f64 {
        2f64.powi(-(self.rapl.energy_unit_exp as i32))
    }

    /// Checks every field; the message names the field and the allowed range.
    pub fn validate(&self, origin: &str) -> Result<(), EnergyError> {
        let fail = |message: String| {
            Err(EnergyError::SimConfig {
                origin: origin.to_owned(),
                message,
            })
        };
        let r = &self.rapl;
        if !(1..=32).contains(&r.energy_unit_exp) {
            return fail(format!(
                "rapl.energy_unit_exp = {} is outside 1..=32",
                r.energy_unit_exp
            ));
        }
        if !(1..=1_000_000).contains(&r.update_interval_us) {
            return fail(format!(
                "rapl.update_interval_us = {} is outside 1..=1000000",
                r.update_interval_us
            ));
        }
        if !(8..=64).contains(&r.counter_bits) {
            return fail(format!(
                "rapl.counter_bits = {} is outside 8..=64",
                r.counter_bits
            ));
        }
        if r.counter_bits < 64 && r.start_offset >> r.counter_bits != 0 {
            return fail(format!(
                "rapl.start_offset = {} does not fit in {} bits",
                r.start_offset, r.counter_bits
            ));
        }
        let g = &self.gpu;
        if !(1..=10_000).contains(&g.update_interval_ms) {
            return fail(format!(
                "gpu.update_interval_ms = {} is outside 1..=10000",
                g.update_interval_ms
            ));
        }
        if g.sampled_ms > 0 && !g.update_interval_ms.is_multiple_of(g.sampled_ms) {
            return fail(format!(
                "gpu.sampled_ms = {} must divide gpu.update_interval_ms ({}), e.g. 25 of 100; \
                 0 samples everything",
                g.sampled_ms, g.update_interval_ms
            ));
        }
        if g.power_window_ms < g.update_interval_ms || g.power_window_ms > 60_000 {
            return fail(format!(
                "gpu.power_window_ms = {} must be between gpu.update_interval_ms and 60000",
                g.power_window_ms
            ));
        }
        let watts = |field: String, w: f64| {
            if w.is_finite() && w >= 0.0 {
                Ok(())
            } else {
                Err(EnergyError::SimConfig {
                    origin: origin.to_owned(),
                    message: format!("{field} = {w} must be a finite, non-negative power in W"),
                })
            }
        };
        for (name, d) in [("package", &self.package), ("dram", &self.dram)] {
            watts(format!("{name}.base_w"), d.base_w)?;
            watts(format!("{name}.noise_sigma_w"), d.noise_sigma_w)?;
        }
        watts("gpu.base_w".into(), g.base_w)?;
        watts("gpu.noise_sigma_w".into(), g.noise_sigma_w)?;
        let tasks = std::iter::once(("default_task", &self.default_task))
            .chain(self.codelets.iter().map(|(k, v)| (k.as_str(), v)));
        for (name, powers) in tasks {
            for arch in Arch::ALL {
                if let Some(p) = powers.get(arch) {
                    watts(format!("{name}.{arch}.package_w"), p.package_w)?;
                    watts(format!("{name}.{arch}.dram_w"), p.dram_w)?;
                    watts(format!("{name}.{arch}.gpu_w"), p.gpu_w)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_parses_and_separates_the_built_in_codelets() {
        let c = SimConfig::default();
        assert_eq!(c.rapl.energy_unit_exp, 14);
        assert_eq!(c.rapl.update_interval_us, 1000);
        assert_eq!(c.rapl.counter_bits, 32);
        assert_eq!(c.package.noise_sigma_w, 5.0);
        assert!(c.dram.noise_sigma_w < c.package.noise_sigma_w);
        let names = [
            "potrf",
            "trsm",
            "syrk",
            "gemm",
            "gemm_nn",
            "heat_step",
            "tb_empty",
            "tb_compute",
            "tb_memory",
            "hello",
        ];
        let mut pkg: Vec<f64> = Vec::new();
        for n in names {
            let p = c
                .codelets
                .get(n)
                .and_then(|p| p.cpu)
                .unwrap_or_else(|| panic!("{n}"));
            assert!(
                p.dram_w < p.package_w || n == "tb_memory",
                "{n}: DRAM smaller"
            );
            pkg.push(p.package_w);
        }
        // Clearly different: every pair at least 1 W apart on the package.
        for (i, a) in pkg.iter().enumerate() {
            for b in &pkg[i + 1..] {
                assert!((a - b).abs() >= 1.0, "{pkg:?}");
            }
        }
        // Unknown codelets get the default; GPU gemm has a GPU power.
        assert_eq!(c.task_power("nope", Arch::Cpu), c.default_power(Arch::Cpu));
        assert!(c.task_power("gemm", Arch::Gpu).gpu_w > 100.0);
        assert_eq!(c.task_power("potrf", Arch::Gpu), c.default_power(Arch::Gpu));
    }

    #[test]
    fn unknown_fields_and_bad_values_are_named() {
        let bad = SimConfig::DEFAULT_TOML.replace("base_w = 30.0", "base_watts = 30.0");
        let m = SimConfig::from_toml_str(&bad, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(m.contains("x.toml") && m.contains("base_watts"), "{m}");
        let bad = SimConfig::DEFAULT_TOML.replace("base_w = 4.0", "base_w = -4.0");
        let m = SimConfig::from_toml_str(&bad, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(m.contains("dram.base_w"), "{m}");
        let bad = SimConfig::DEFAULT_TOML.replace("start_offset = 0", "start_offset = 4294967296");
        let m = SimConfig::from_toml_str(&bad, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(m.contains("start_offset"), "{m}");
        let bad = SimConfig::DEFAULT_TOML.replace(
            "tb_empty = { cpu = { package_w = 0.5",
            "tb_empty = { cpu = { package_w = nan",
        );
        let m = SimConfig::from_toml_str(&bad, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(m.contains("tb_empty.cpu.package_w"), "{m}");
    }

    #[test]
    fn json_and_files_round_trip() {
        let c = SimConfig::default();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(SimConfig::from_json_str(&json, "j").unwrap(), c);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sim.json");
        std::fs::write(&p, &json).unwrap();
        assert_eq!(SimConfig::from_file(&p).unwrap(), c);
        let p = dir.path().join("sim.toml");
        std::fs::write(&p, SimConfig::DEFAULT_TOML).unwrap();
        assert_eq!(SimConfig::from_file(&p).unwrap(), c);
        let m = SimConfig::from_file(&dir.path().join("none.toml"))
            .unwrap_err()
            .to_string();
        assert!(m.contains("none.toml") && m.contains("cannot read"), "{m}");
    }
}
