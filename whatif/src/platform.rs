//! Platform files: the machine a graph is simulated on.
//!
//! A platform is a TOML file (documented examples in `whatif/platforms/`, reference in
//! docs/whatif.md):
//!
//! ```toml
//! name = "2 CPU cores + 2 GPUs"
//! description = "free text"
//! [cpu]
//! packages = 1
//! cores_per_package = 2       # one CPU worker per core
//! [gpu]
//! count = 2                   # one GPU worker per GPU, memory nodes 1..=count
//! bandwidth_gb_s = 12.0       # host <-> device bus, each way
//! latency_us = 10.0
//! [speed]
//! durations = "recorded"      # a task keeps its own recorded duration where it ran; or "mean"
//! [speed.factors]             # times faster than the trace's CPU duration of the codelet
//! gemm = { gpu = 8.0 }
//! "*" = { cpu = 1.0 }         # every other codelet
//! [runtime]
//! overhead_us = 3.0           # per task; omitted: measured from the trace
//! [meter]                     # the simulated meters' truth: --sim-config's format, over
//! period_ms = 10              # the built-in defaults; period_ms: the sampling period
//! [meter.gpu]
//! sensor = "both"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use taskwatt_energy::SimConfig;
use taskwatt_scheduler::{ArchMask, Bus, WorkerDesc};
use taskwatt_traces::{Arch, WorkerInfo};

use crate::WhatIfError;

/// The slowest bus a platform may have, GB/s (1 MB/s).
pub const MIN_BANDWIDTH_GB_S: f64 = 1e-3;
/// The fastest, GB/s.
pub const MAX_BANDWIDTH_GB_S: f64 = 1e6;
/// The shortest copy latency, us (1 ns: virtual time counts whole ns).
pub const MIN_LATENCY_US: f64 = 1e-3;
/// The longest, us (1 s).
pub const MAX_LATENCY_US: f64 = 1e6;
/// The largest runtime overhead per task a platform may give, us (10 ms).
pub const MAX_OVERHEAD_US: f64 = 1e4;

/// The platforms shipped with taskwatt, by name: `--platform NAME` finds them.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "this-machine",
        include_str!("../platforms/this-machine.toml"),
    ),
    ("2x16", include_str!("../platforms/2x16.toml")),
    ("1s-4gpu", include_str!("../platforms/1s-4gpu.toml")),
    ("2cpu-2gpu", include_str!("../platforms/2cpu-2gpu.toml")),
];

/// How a task's duration is taken on the architecture it ran on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durations {
    /// Its own recorded duration (scaled by a factor where one is given): replays the
    /// variation of the recorded run.
    #[default]
    Recorded,
    /// The mean of its codelet and footprint on that architecture in the trace.
    Mean,
}

/// Speed factors of one codelet, against the trace's CPU duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Factors {
    /// On a CPU core.
    pub cpu: Option<f64>,
    /// On a GPU.
    pub gpu: Option<f64>,
}

impl Factors {
    /// The factor for `arch`.
    pub fn get(&self, arch: Arch) -> Option<f64> {
        match arch {
            Arch::Cpu => self.cpu,
            Arch::Gpu => self.gpu,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    cpu: CpuSection,
    #[serde(default)]
    gpu: GpuSection,
    #[serde(default)]
    speed: SpeedSection,
    #[serde(default)]
    runtime: RuntimeSection,
    #[serde(default)]
    meter: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuSection {
    #[serde(default = "one")]
    packages: u32,
    cores_per_package: u32,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuSection {
    #[serde(default)]
    count: u32,
    #[serde(default = "default_bandwidth")]
    bandwidth_gb_s: f64,
    #[serde(default = "default_latency")]
    latency_us: f64,
}

impl Default for GpuSection {
    fn default() -> Self {
        GpuSection {
            count: 0,
            bandwidth_gb_s: default_bandwidth(),
            latency_us: default_latency(),
        }
    }
}

fn default_bandwidth() -> f64 {
    12.0
}

fn default_latency() -> f64 {
    10.0
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeedSection {
    #[serde(default)]
    durations: Durations,
    #[serde(default)]
    factors: BTreeMap<String, Factors>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeSection {
    overhead_us: Option<f64>,
}

/// A platform: workers, buses, speeds and the simulated meters' truth.
#[derive(Clone, Debug)]
pub struct Platform {
    /// Its name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Where it came from (a path, or `built-in NAME`).
    pub origin: String,
    /// CPU packages.
    pub packages: u32,
    /// CPU workers per package.
    pub cores_per_package: u32,
    /// GPUs (one worker each).
    pub gpus: u32,
    /// The bus between the host and each GPU.
    pub bus: Bus,
    /// How task durations are taken.
    pub durations: Durations,
    /// Speed factors per codelet (`*`: the others).
    pub factors: BTreeMap<String, Factors>,
    /// Runtime overhead per task, ns; `None`: measured from the trace.
    pub overhead_ns: Option<u64>,
    /// The simulated meters' truth.
    pub meter: SimConfig,
    /// The sampling period of the simulated meters, ns.
    pub period_ns: u64,
}

impl Platform {
    /// Reads a platform file, or a built-in platform by name ([`BUILTIN`]) when no such
    /// file exists.
    pub fn load(path: impl AsRef<Path>) -> Result<Platform, WhatIfError> {
        let path = path.as_ref();
        if !path.exists() {
            if let Some(p) = Self::builtin(&path.to_string_lossy()) {
                return p;
            }
            return Err(WhatIfError::Platform {
                origin: path.display().to_string(),
                message: format!(
                    "no such file, and not a built-in platform ({})",
                    BUILTIN
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| WhatIfError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// A built-in platform ([`BUILTIN`]), if `name` is one.
    pub fn builtin(name: &str) -> Option<Result<Platform, WhatIfError>> {
        BUILTIN
            .iter()
            // In any case, as policy names are (`--sched Eager`).
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(n, text)| Self::from_toml_str(text, &format!("built-in {n}")))
    }

    /// Parses a platform; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Platform, WhatIfError> {
        let bad = |message: String| WhatIfError::Platform {
            origin: origin.to_owned(),
            message,
        };
        let f: File = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if f.cpu.packages == 0 {
            return Err(bad(
                "cpu.packages = 0: a platform has at least one package".into()
            ));
        }
        let workers =
            u64::from(f.cpu.packages) * u64::from(f.cpu.cores_per_package) + u64::from(f.gpu.count);
        if f.gpu.count > 31 {
            return Err(bad(format!(
                "gpu.count = {}: at most 31 GPUs (memory nodes 1 to 31)",
                f.gpu.count
            )));
        }
        if workers == 0 {
            return Err(bad(
                "no worker: set cpu.cores_per_package or gpu.count above 0".into(),
            ));
        }
        if workers > 1024 {
            return Err(bad(format!("{workers} workers: at most 1024")));
        }
        // Bounds that keep every copy's virtual time finite and the simulated meter's
        // samples over it countable: a bandwidth of 1e-310 GB/s (0 B/s once in bytes) made
        // one copy last days of virtual time, sampled every period, and the run never
        // ended.
        if !(MIN_BANDWIDTH_GB_S..=MAX_BANDWIDTH_GB_S).contains(&f.gpu.bandwidth_gb_s) {
            return Err(bad(format!(
                "gpu.bandwidth_gb_s = {:?}: a number of GB/s from {MIN_BANDWIDTH_GB_S} (1 MB/s) \
                 to {MAX_BANDWIDTH_GB_S} (a PCIe 4.0 x16 link is about 25)",
                f.gpu.bandwidth_gb_s
            )));
        }
        if !(MIN_LATENCY_US..=MAX_LATENCY_US).contains(&f.gpu.latency_us) {
            return Err(bad(format!(
                "gpu.latency_us = {:?}: a number of us from {MIN_LATENCY_US} (1 ns, the clock's \
                 resolution) to {MAX_LATENCY_US} (1 s); PCIe copies take about 10",
                f.gpu.latency_us
            )));
        }
        for (name, fs) in &f.speed.factors {
            for (arch, v) in [("cpu", fs.cpu), ("gpu", fs.gpu)] {
                if let Some(v) = v {
                    if !(1e-6..=1e6).contains(&v) {
                        return Err(bad(format!(
                            "speed.factors.{name}.{arch} = {v:?}: a factor from 1e-6 to 1e6 (2.0: \
                             twice as fast as the trace's CPU duration)"
                        )));
                    }
                }
            }
        }
        let overhead_ns = match f.runtime.overhead_us {
            None => None,
            // A runtime's own time per task is microseconds; past 10 ms per task the
            // simulated meters' samples over the virtual time made a replay run for minutes.
            Some(v) if (0.0..=MAX_OVERHEAD_US).contains(&v) => Some((v * 1e3).round() as u64),
            Some(v) => {
                return Err(bad(format!(
                    "runtime.overhead_us = {v:?}: a number of us from 0 to {MAX_OVERHEAD_US} (10 \
                     ms); a runtime takes a few us per task"
                )))
            }
        };
        let (meter, period_ns) = meter_config(f.meter, origin)?;
        Ok(Platform {
            name: f.name,
            description: f.description,
            origin: origin.to_owned(),
            packages: f.cpu.packages,
            cores_per_package: f.cpu.cores_per_package,
            gpus: f.gpu.count,
            bus: Bus {
                bytes_per_s: (f.gpu.bandwidth_gb_s * 1e9) as u64,
                latency_ns: (f.gpu.latency_us * 1e3) as u64,
            },
            durations: f.speed.durations,
            factors: f.speed.factors,
            overhead_ns,
            meter,
            period_ns,
        })
    }

    /// CPU workers.
    pub fn cpu_workers(&self) -> usize {
        (self.packages * self.cores_per_package) as usize
    }

    /// The workers, CPU cores first (package by package), then one per GPU.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        let mut out = Vec::new();
        for p in 0..self.packages {
            for c in 0..self.cores_per_package {
                let id = out.len() as u32;
                out.push(WorkerInfo {
                    id,
                    arch: Arch::Cpu,
                    cpu: Some(id),
                    core: Some(p * self.cores_per_package + c),
                    package: p,
                    numa: Some(p),
                    device: None,
                });
            }
        }
        for g in 0..self.gpus {
            out.push(WorkerInfo {
                id: out.len() as u32,
                arch: Arch::Gpu,
                cpu: None,
                core: None,
                package: 0,
                numa: Some(0),
                device: Some(g),
            });
        }
        out
    }

    /// The workers as the scheduler sees them (GPU i on memory node i + 1 behind the bus).
    pub fn worker_descs(&self) -> Vec<WorkerDesc> {
        self.workers()
            .iter()
            .map(|w| {
                let d = WorkerDesc::new(w.id as usize, w.package, w.numa);
                match w.device {
                    Some(g) => d
                        .with_arch(ArchMask::GPU)
                        .with_memory_node(g as usize + 1, Some(self.bus)),
                    // With GPUs, a CPU worker's copies back to the host cross the bus too
                    // (as the runtime tells dmda).
                    None if self.gpus > 0 => d.with_memory_node(0, Some(self.bus)),
                    None => d,
                }
            })
            .collect()
    }

    /// The speed factor of `codelet` on `arch` (its own entry, else `*`'s).
    pub fn factor(&self, codelet: &str, arch: Arch) -> Option<f64> {
        self.factors_of(codelet)
            .and_then(|f| f.get(arch))
            .or_else(|| self.factors.get("*").and_then(|f| f.get(arch)))
    }

    /// The `[speed.factors]` entry of `codelet`: its own name's, else the one entry whose
    /// name differs from it in ASCII case only (an imported StarPU trace names its
    /// codelets `GEMM`, the built-in platforms `gemm`); `*` is not included.
    pub fn factors_of(&self, codelet: &str) -> Option<&Factors> {
        self.factors.get(codelet).or_else(|| {
            let mut same = self
                .factors
                .iter()
                .filter(|(k, _)| *k != "*" && k.eq_ignore_ascii_case(codelet));
            match (same.next(), same.next()) {
                (Some((_, f)), None) => Some(f),
                _ => None,
            }
        })
    }

    /// What a user should know of how the platform's `[speed.factors]` meet `codelets`
    /// (the trace's, by name, with whether each lists a GPU implementation or ran on a
    /// GPU): entries matched ignoring case, entries that match no codelet, and, on a
    /// platform with GPUs, the codelets that cannot run on them. One line each.
    pub fn name_notes(&self, codelets: &[(&str, bool)]) -> Vec<String> {
        let mut out = Vec::new();
        for key in self.factors.keys() {
            if key == "*" {
                continue;
            }
            if codelets.iter().any(|(c, _)| c == key) {
                continue;
            }
            let by_case: Vec<&str> = codelets
                .iter()
                .map(|(c, _)| *c)
                .filter(|c| c.eq_ignore_ascii_case(key) && self.factors_of(c).is_some())
                .collect();
            // Codelets two or more entries match ignoring case: neither is guessed.
            let ambiguous: Vec<&str> = codelets
                .iter()
                .map(|(c, _)| *c)
                .filter(|c| c.eq_ignore_ascii_case(key) && self.factors_of(c).is_none())
                .collect();
            if !ambiguous.is_empty() {
                let mut keys: Vec<&str> = self
                    .factors
                    .keys()
                    .map(String::as_str)
                    .filter(|k| k.eq_ignore_ascii_case(key))
                    .collect();
                keys.sort_unstable();
                // Said once, by the first of them.
                if keys.first() == Some(&key.as_str()) {
                    out.push(format!(
                        "platform {}: {} all match codelet {} ignoring case, so none of them \
                         applies to it: keep one, or name it exactly",
                        self.origin,
                        keys.iter()
                            .map(|k| format!("speed.factors.{k}"))
                            .collect::<Vec<_>>()
                            .join(" and "),
                        ambiguous.join(", ")
                    ));
                }
            } else if by_case.is_empty() {
                // The built-in platforms name the codelets of every built-in app.
                if self.origin.starts_with("built-in ") {
                    continue;
                }
                out.push(format!(
                    "platform {}: speed.factors.{key} matches no codelet of the trace (its \
                     codelets: {})",
                    self.origin,
                    codelets
                        .iter()
                        .map(|(c, _)| *c)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else {
                out.push(format!(
                    "platform {}: speed.factors.{key} applies to {} (names that differ in case \
                     only)",
                    self.origin,
                    by_case.join(", ")
                ));
            }
        }
        // A built-in platform names the built-in apps' codelets, and says nothing of those
        // that match none of a trace's: said once when none matches (a user's `tgemm` ran
        // at the CPU's speed on its GPUs, and the docs spoke of 8x).
        if self.origin.starts_with("built-in ")
            && self.gpus > 0
            && !codelets.is_empty()
            && !codelets
                .iter()
                .any(|(c, _)| self.factors.keys().any(|k| k.eq_ignore_ascii_case(c)))
        {
            let mut keys: Vec<&str> = self
                .factors
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "*")
                .collect();
            keys.sort_unstable();
            out.push(format!(
                "platform {}: its speed factors name the built-in apps' codelets ({}), none \
                 of this trace's ({}): their GPU tasks run at the recorded speed; give a \
                 platform file with [speed.factors] for them (docs/whatif.md)",
                self.origin,
                keys.join(", "),
                codelets
                    .iter()
                    .map(|(c, _)| *c)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if self.gpus == 0 {
            // A gpu factor on a platform without GPUs was applied to nothing, silently.
            let unused: Vec<String> = self
                .factors
                .iter()
                .filter(|(_, f)| f.gpu.is_some())
                .map(|(k, _)| format!("speed.factors.{k}"))
                .collect();
            if !unused.is_empty() {
                out.push(format!(
                    "platform {}: {} give(s) a gpu factor, but the platform has no GPU \
                     ([gpu] count = 0): unused; give it GPUs, or drop the factor",
                    self.origin,
                    unused.join(", ")
                ));
            }
        }
        if self.gpus > 0 {
            let cannot: Vec<&str> = codelets
                .iter()
                .filter(|(c, gpu)| !gpu && self.factor(c, Arch::Gpu).is_none())
                .map(|(c, _)| *c)
                .collect();
            if !cannot.is_empty() {
                out.push(format!(
                    "platform {}: {} run(s) on its CPUs only: the trace has no GPU \
                     implementation or duration for {}, and [speed.factors] no gpu factor. \
                     Nothing to do for a CPU-only codelet; one with a GPU implementation the \
                     trace did not show takes e.g. `{} = {{ gpu = 4.0 }}` (times its CPU speed)",
                    self.origin,
                    cannot.join(", "),
                    if cannot.len() == 1 { "it" } else { "them" },
                    cannot[0]
                ));
            }
        }
        out
    }

    /// Whether the platform has workers of `arch`.
    pub fn has(&self, arch: Arch) -> bool {
        match arch {
            Arch::Cpu => self.cpu_workers() > 0,
            Arch::Gpu => self.gpus > 0,
        }
    }
}

/// The `[meter]` table over the built-in simulated meter's defaults, and the period. A
/// simulation is deterministic: without a `seed`, the meter's noise uses seed 42.
fn meter_config(table: Option<toml::Table>, origin: &str) -> Result<(SimConfig, u64), WhatIfError> {
    let mut period_ms = 10.0;
    let mut t = table.unwrap_or_default();
    if let Some(v) = t.remove("period_ms") {
        period_ms = v
            .as_float()
            .or_else(|| v.as_integer().map(|i| i as f64))
            .filter(|p| *p >= 1.0 && *p <= 1000.0)
            .ok_or_else(|| WhatIfError::Platform {
                origin: origin.to_owned(),
                message: format!("meter.period_ms = {v}: a number of ms in 1..=1000"),
            })?;
    }
    let text = toml::to_string(&t).map_err(|e| WhatIfError::Platform {
        origin: origin.to_owned(),
        message: format!("[meter]: {e}"),
    })?;
    let mut config =
        SimConfig::from_toml_str(&text, &format!("{origin} [meter]")).map_err(|source| {
            WhatIfError::Meter {
                origin: origin.to_owned(),
                source,
            }
        })?;
    config.seed.get_or_insert(42);
    Ok((config, (period_ms * 1e6) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_platform_parses() {
        for (name, _) in BUILTIN {
            let p = Platform::builtin(name).unwrap().unwrap();
            assert!(!p.workers().is_empty(), "{name}");
            assert_eq!(p.worker_descs().len(), p.workers().len());
        }
    }

    #[test]
    fn meter_overrides_merge_over_the_defaults() {
        let p = Platform::from_toml_str(
            "name = \"x\"\n[cpu]\ncores_per_package = 2\n[meter]\nperiod_ms = 5\n[meter.package]\nbase_w = 50.0\n",
            "test",
        )
        .unwrap();
        assert_eq!(p.meter.package.base_w, 50.0);
        assert_eq!(p.meter.dram, SimConfig::default().dram);
        assert_eq!(p.period_ns, 5_000_000);
    }

    #[test]
    fn bad_fields_are_named() {
        let e = Platform::from_toml_str(
            "name = \"x\"\n[cpu]\ncores_per_package = 2\n[speed.factors]\ngemm = { gpu = -1.0 }\n",
            "p.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("speed.factors.gemm.gpu") && e.contains("p.toml"),
            "{e}"
        );
        let e = Platform::from_toml_str("name = \"x\"\n[cpu]\ncores = 2\n", "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cores"), "{e}");
        let e = Platform::from_toml_str(
            "name = \"x\"\n[cpu]\ncores_per_package = 2\n[meter.gpu]\nsensor = \"psychic\"\n",
            "p.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("psychic") || e.contains("sensor"), "{e}");
        // Zero, denormal, negative, infinite and NaN buses, and speeds: errors naming the
        // field (a denormal bandwidth was 0 B/s, and the simulation never ended).
        let gpu = |field: &str, v: &str| {
            format!("name = \"x\"\n[cpu]\ncores_per_package = 2\n[gpu]\ncount = 1\n{field} = {v}\n")
        };
        for field in ["bandwidth_gb_s", "latency_us"] {
            for v in ["0.0", "1e-310", "-1.0", "inf", "nan", "1e300"] {
                let e = Platform::from_toml_str(&gpu(field, v), "p.toml")
                    .unwrap_err()
                    .to_string();
                assert!(e.contains(&format!("gpu.{field}")), "{field} = {v}: {e}");
            }
        }
        for v in ["0.0", "1e-310", "1e-7"] {
            let e = Platform::from_toml_str(
                &format!(
                    "name = \"x\"\n[cpu]\ncores_per_package = 2\n[speed.factors]\ngemm = {{ cpu = {v} }}\n"
                ),
                "p.toml",
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("speed.factors.gemm.cpu"), "{v}: {e}");
        }
    }

    #[test]
    fn factors_match_names_that_differ_in_case_and_say_so() {
        let p = Platform::from_toml_str(
            "name = \"x\"\n[cpu]\ncores_per_package = 2\n[gpu]\ncount = 1\n\
             [speed.factors]\ngemm = { gpu = 8.0 }\nsyrk = { gpu = 2.0 }\nSYRK = { gpu = 3.0 }\n\
             trsn = { gpu = 4.0 }\n",
            "p.toml",
        )
        .unwrap();
        // A StarPU trace's GEMM takes gemm's factor; its own name wins over a case match.
        assert_eq!(p.factor("GEMM", Arch::Gpu), Some(8.0));
        assert_eq!(p.factor("SYRK", Arch::Gpu), Some(3.0));
        // Two entries that match ignoring case: neither is guessed, and that is said.
        assert_eq!(p.factor("Syrk", Arch::Gpu), None);
        let notes = p.name_notes(&[("Syrk", false)]).join("\n");
        assert!(
            notes.contains("speed.factors.SYRK and speed.factors.syrk all match codelet Syrk"),
            "{notes}"
        );
        assert_eq!(notes.matches("all match").count(), 1, "{notes}");
        assert!(!notes.contains("syrk matches no codelet"), "{notes}");
        let notes = p.name_notes(&[("GEMM", false), ("TRSM", false), ("POTRF", true)]);
        let all = notes.join("\n");
        assert!(all.contains("speed.factors.gemm applies to GEMM"), "{all}");
        assert!(
            all.contains("speed.factors.trsn matches no codelet"),
            "{all}"
        );
        assert!(all.contains("TRSM run(s) on its CPUs only"), "{all}");
        assert!(!all.contains("POTRF run(s)"), "{all}");
        // A built-in platform does not list the other apps' codelets it names.
        let b = Platform::builtin("1s-4gpu").unwrap().unwrap();
        let all = b.name_notes(&[("potrf", false), ("gemm", true)]).join("\n");
        assert!(!all.contains("matches no codelet"), "{all}");
        assert!(!all.contains("none of this trace's"), "{all}");
        // ... but says so once when none of them names a codelet of the trace.
        let all = b
            .name_notes(&[("tgemm", true), ("halve", false)])
            .join("\n");
        assert_eq!(
            all.matches("none of this trace's (tgemm, halve)").count(),
            1,
            "{all}"
        );
        // A gpu factor on a platform without GPUs is applied to nothing: said.
        let p = Platform::from_toml_str(
            "name = \"x\"\n[cpu]\ncores_per_package = 2\n[gpu]\ncount = 0\n\
             [speed.factors]\ngemm = { gpu = 8.0 }\n",
            "p.toml",
        )
        .unwrap();
        let all = p.name_notes(&[("gemm", false)]).join("\n");
        assert!(
            all.contains("speed.factors.gemm give(s) a gpu factor"),
            "{all}"
        );
    }

    #[test]
    fn gpus_get_their_own_memory_nodes_behind_the_bus() {
        let p = Platform::builtin("2cpu-2gpu").unwrap().unwrap();
        let d = p.worker_descs();
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].memory_node, 0);
        assert_eq!(d[2].memory_node, 1);
        assert_eq!(d[3].memory_node, 2);
        assert!(d[3].bus.is_some());
        assert_eq!(p.factor("gemm", Arch::Gpu), Some(8.0));
        // Named in any case, as policies are.
        assert!(Platform::builtin("2CPU-2GPU").is_some_and(|p| p.is_ok()));
        assert!(Platform::builtin("This-Machine").is_some());
    }
}
