//! Which meters to sample: detection of every backend, and the choice.
//!
//! `auto` takes the first CPU backend that works, in this order:
//! 1. `rapl-perf` (perf_event; not restricted to root since CVE-2020-8694),
//! 2. `rapl-powercap` (sysfs),
//!
//! adds `nvml` for the GPUs when it works, and falls back to `sim` when no CPU domain could be
//! read (the sim then simulates no GPU if NVML measures real ones). A named backend is used
//! alone, and its failure is an error.
//!
//! Every backend is probed whatever the choice, so that `taskwatt meters` can show, for each,
//! whether it is available, its domains (resolution, wrap range, update interval) or the exact
//! reason it is not.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use serde::Serialize;
use taskwatt_traces::{Domain, SensorKind, WorkerInfo};

use crate::meter::{Coverage, DomainRead, Meter, RawReading};
use crate::nvml::NvmlMeter;
use crate::powercap::{PowercapMeter, DEFAULT_POWERCAP_ROOT};
use crate::rapl_perf::{PerfMeter, DEFAULT_CPU_SYSFS, DEFAULT_PERF_PMU_DIR};
use crate::sim::{SimConfig, SimMeter, SimObserver};
use crate::EnergyError;

/// The `--meter` choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MeterChoice {
    /// perf_event, else powercap; plus NVML; else the simulator.
    #[default]
    Auto,
    /// RAPL through perf_event only.
    RaplPerf,
    /// RAPL through the powercap sysfs only.
    RaplPowercap,
    /// NVIDIA GPUs only.
    Nvml,
    /// The simulated meter only.
    Sim,
}

impl MeterChoice {
    /// Every choice, in the order of the docs.
    pub const ALL: [MeterChoice; 5] = [
        MeterChoice::Auto,
        MeterChoice::RaplPerf,
        MeterChoice::RaplPowercap,
        MeterChoice::Nvml,
        MeterChoice::Sim,
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            MeterChoice::Auto => "auto",
            MeterChoice::RaplPerf => "rapl-perf",
            MeterChoice::RaplPowercap => "rapl-powercap",
            MeterChoice::Nvml => "nvml",
            MeterChoice::Sim => "sim",
        }
    }
}

impl std::fmt::Display for MeterChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MeterChoice {
    type Err = EnergyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MeterChoice::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| EnergyError::UnknownMeter {
                given: s.to_owned(),
            })
    }
}

/// Where detection looks; the defaults are the real system paths, tests point them at fakes.
#[derive(Clone, Debug)]
pub struct DetectOptions {
    /// The powercap tree (default `/sys/class/powercap`).
    pub powercap_root: PathBuf,
    /// The perf `power` PMU directory (default `/sys/bus/event_source/devices/power`).
    pub perf_pmu_dir: PathBuf,
    /// The CPU sysfs directory, for CPU-to-package mapping and cpufreq (default
    /// `/sys/devices/system/cpu`).
    pub cpu_sysfs_root: PathBuf,
    /// The perf `msr` PMU directory, for APERF/MPERF (default
    /// `/sys/bus/event_source/devices/msr`).
    pub msr_pmu_dir: PathBuf,
    /// NVML library to load instead of the system's `libnvidia-ml.so.1`.
    pub nvml_library: Option<PathBuf>,
    /// The simulated meter's configuration.
    pub sim: SimConfig,
    /// The run's GPU workers are emulated (they run on CPU cores): under `auto`, a real
    /// GPU's NVML counter is not theirs and is not used.
    pub emulated_gpus: bool,
    /// The UUIDs of the CUDA devices the run drives, in CUDA's order (the GPU workers'
    /// `device`): NVML's GPUs are matched to them (see `NvmlMeter::from_devices_matched`).
    /// `None`: NVML's order is taken as CUDA's.
    pub cuda_uuids: Option<Vec<String>>,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            powercap_root: DEFAULT_POWERCAP_ROOT.into(),
            perf_pmu_dir: DEFAULT_PERF_PMU_DIR.into(),
            cpu_sysfs_root: DEFAULT_CPU_SYSFS.into(),
            msr_pmu_dir: crate::freq::DEFAULT_MSR_PMU_DIR.into(),
            nvml_library: None,
            sim: SimConfig::default(),
            emulated_gpus: false,
            cuda_uuids: None,
        }
    }
}

/// One domain of a backend, for display.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainStatus {
    /// What it measures.
    pub domain: Domain,
    /// The sensor's name.
    pub name: String,
    /// Raw unit.
    pub unit: String,
    /// Smallest energy step, J.
    pub resolution_j: f64,
    /// Wrap range, J, if it wraps.
    pub wrap_range_j: Option<f64>,
    /// What the sensor reports.
    pub sensor: SensorKind,
    /// Update interval, ns, if known.
    pub update_interval_ns: Option<u64>,
    /// What it covers.
    pub covers: Coverage,
}

/// What detection found for one backend.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackendStatus {
    /// `rapl-perf`, `rapl-powercap`, `nvml` or `sim`.
    pub backend: String,
    /// Whether it can be read on this machine.
    pub available: bool,
    /// Whether it was chosen for sampling.
    pub used: bool,
    /// Whether its readings are simulated.
    pub simulated: bool,
    /// Its description, when available.
    pub description: Option<String>,
    /// Its domains, when available.
    pub domains: Vec<DomainStatus>,
    /// Why it is unavailable, or why it is not used.
    pub reason: Option<String>,
}

/// The outcome of detection.
pub struct Detected {
    /// The meters to sample (hand them to [`crate::Sampler::start`]).
    pub meters: Vec<Box<dyn Meter>>,
    /// The simulated meter's observer, when the simulator was chosen: hand it to the runtime.
    pub observer: Option<Arc<SimObserver>>,
    /// The CPU packages' frequency reader, where one could be opened (hand it to
    /// [`crate::Sampler::start_with_frequency`]): the simulator's when it stands for the CPU,
    /// else APERF/MPERF or cpufreq beside a RAPL meter.
    pub frequency: Option<Box<dyn crate::freq::FrequencyReader>>,
    /// A status for every backend, in the order rapl-perf, rapl-powercap, nvml, sim, then
    /// `cpu-frequency` (the frequency source, or why there is none).
    pub statuses: Vec<BackendStatus>,
}

impl std::fmt::Debug for Detected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detected")
            .field("statuses", &self.statuses)
            .finish_non_exhaustive()
    }
}

fn status_of(backend: &str, probe: &Result<Box<dyn Meter>, EnergyError>) -> BackendStatus {
    match probe {
        Ok(m) => {
            let d = m.describe();
            BackendStatus {
                backend: backend.into(),
                available: true,
                used: false,
                simulated: d.simulated,
                description: Some(d.description),
                domains: m
                    .domains()
                    .iter()
                    .map(|s| DomainStatus {
                        domain: s.domain,
                        name: s.name.clone(),
                        unit: s.unit.clone(),
                        resolution_j: s.resolution_j,
                        wrap_range_j: s.wrap_range_j(),
                        sensor: s.sensor,
                        update_interval_ns: s.update_interval_ns,
                        covers: s.covers,
                    })
                    .collect(),
                reason: None,
            }
        }
        Err(e) => BackendStatus {
            backend: backend.into(),
            available: false,
            used: false,
            simulated: backend == "sim",
            description: None,
            domains: Vec::new(),
            reason: Some(e.to_string()),
        },
    }
}

/// How long [`cpu_usability`] watches the counters.
const ADVANCE_PROBE: std::time::Duration = std::time::Duration::from_millis(30);

/// Whether a RAPL meter can stand for the CPU: it has a package-level domain (package,
/// cores, uncore or DRAM; psys covers the whole platform and cannot be split per package)
/// whose counter advances within [`ADVANCE_PROBE`].
fn cpu_usability(m: &mut dyn Meter) -> Result<(), String> {
    let cpu: Vec<usize> = m
        .domains()
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            matches!(
                d.domain,
                Domain::CpuPackage { .. }
                    | Domain::Core { .. }
                    | Domain::Uncore { .. }
                    | Domain::Dram { .. }
            )
        })
        .map(|(i, _)| i)
        .collect();
    if cpu.is_empty() {
        let names: Vec<String> = m.domains().iter().map(|d| d.name.clone()).collect();
        return Err(format!(
            "it has no CPU package domain (only {}); psys covers the whole platform",
            names.join(", ")
        ));
    }
    let n = m.domains().len();
    let mut first: Vec<DomainRead> = (0..n).map(|_| Ok(RawReading::Counter(0))).collect();
    let mut second: Vec<DomainRead> = (0..n).map(|_| Ok(RawReading::Counter(0))).collect();
    m.read(&mut first);
    std::thread::sleep(ADVANCE_PROBE);
    m.read(&mut second);
    let moved = cpu.iter().any(|&i| match (&first[i], &second[i]) {
        (Ok(RawReading::Counter(a)), Ok(RawReading::Counter(b))) => a != b,
        (Ok(RawReading::Power(p)), _) => *p > 0.0,
        _ => false,
    });
    if moved {
        Ok(())
    } else {
        Err(format!(
            "its package counters did not advance in {} ms (a VM exposing the PMU without RAPL \
             passthrough, or a read error); use `--meter rapl-perf`/`rapl-powercap` to force it",
            ADVANCE_PROBE.as_millis()
        ))
    }
}

/// The rows of [`Detected::statuses`]: the backends, then the frequency reader's.
const RAPL_PERF: usize = 0;
const RAPL_POWERCAP: usize = 1;
const NVML: usize = 2;
const SIM: usize = 3;
#[cfg(test)]
const FREQUENCY: usize = 4;

/// Probes every backend and picks the meters for `choice`. `workers` sizes the simulator (its
/// domains follow the workers' packages and GPUs).
pub fn detect(
    choice: MeterChoice,
    workers: &[WorkerInfo],
    options: &DetectOptions,
) -> Result<Detected, EnergyError> {
    let boxed = |m: Box<dyn Meter>| m;
    let perf =
        PerfMeter::open(&options.perf_pmu_dir, &options.cpu_sysfs_root).map(|m| boxed(Box::new(m)));
    let powercap = PowercapMeter::open(&options.powercap_root).map(|m| boxed(Box::new(m)));
    let nvml = NvmlMeter::open_matched(
        options.nvml_library.as_deref(),
        options.cuda_uuids.as_deref(),
    )
    .map(|m| boxed(Box::new(m)));
    // Under auto, a RAPL backend stands for the CPU only if it has a package-level domain
    // whose counter moves: a VM may expose the perf `power` PMU with psys alone, reading 0.
    let mut perf = perf;
    let mut powercap = powercap;
    let mut rejected: [Option<String>; 2] = [None, None];
    if choice == MeterChoice::Auto {
        for (slot, probe) in [&mut perf, &mut powercap].into_iter().enumerate() {
            if let Ok(m) = probe {
                rejected[slot] = cpu_usability(m.as_mut()).err();
            }
        }
    }
    let perf_cpu = perf.is_ok() && rejected[RAPL_PERF].is_none();
    let powercap_cpu = powercap.is_ok() && rejected[RAPL_POWERCAP].is_none();
    let cpu_measured = perf_cpu || powercap_cpu;
    // Under auto, the simulator stands in for the CPU only; it simulates GPUs only where NVML
    // measures none.
    let nvml_for_gpus = nvml.is_ok() && !options.emulated_gpus;
    let mut sim_config = options.sim.clone();
    if choice == MeterChoice::Auto && nvml_for_gpus {
        sim_config.gpu.enabled = false;
    }
    let sim = SimMeter::new(sim_config, workers);
    let sim_observer = sim.as_ref().ok().map(|m| m.observer());
    let sim_frequency = sim.as_ref().ok().map(|m| m.frequency_reader());
    let sim = sim.map(|m| boxed(Box::new(m)));

    // In the order of the rows' constants.
    let mut statuses = vec![
        status_of("rapl-perf", &perf),
        status_of("rapl-powercap", &powercap),
        status_of("nvml", &nvml),
        status_of("sim", &sim),
    ];
    let mut meters: Vec<Box<dyn Meter>> = Vec::new();
    let mut observer = None;
    let mut use_meter = |i: usize, m: Box<dyn Meter>, meters: &mut Vec<Box<dyn Meter>>| {
        statuses[i].used = true;
        meters.push(m);
    };
    match choice {
        MeterChoice::Auto => {
            match (perf, powercap) {
                (Ok(p), _) if perf_cpu => use_meter(RAPL_PERF, p, &mut meters),
                (_, Ok(p)) if powercap_cpu => use_meter(RAPL_POWERCAP, p, &mut meters),
                _ => {}
            }
            match nvml {
                Ok(n) if nvml_for_gpus => use_meter(NVML, n, &mut meters),
                Ok(_) | Err(_) => {}
            }
            if !cpu_measured {
                use_meter(SIM, sim?, &mut meters);
                observer = sim_observer;
            }
        }
        MeterChoice::RaplPerf => use_meter(RAPL_PERF, perf?, &mut meters),
        MeterChoice::RaplPowercap => use_meter(RAPL_POWERCAP, powercap?, &mut meters),
        MeterChoice::Nvml => use_meter(NVML, nvml?, &mut meters),
        MeterChoice::Sim => {
            use_meter(SIM, sim?, &mut meters);
            observer = sim_observer;
        }
    }
    let chosen: Vec<String> = statuses
        .iter()
        .filter(|s| s.used)
        .map(|s| s.backend.clone())
        .collect();
    if choice == MeterChoice::Auto && statuses[NVML].available && !nvml_for_gpus {
        statuses[NVML].reason = Some(
            "not used by `--meter auto`: the run's GPU workers are emulated (they run on CPU \
             cores, whose energy the CPU meter counts), so this GPU's energy is not theirs \
             (`--meter nvml` samples it anyway)"
                .into(),
        );
    }
    for (i, why) in rejected.iter().enumerate() {
        if let Some(why) = why {
            statuses[i].reason = Some(format!("not used by `--meter auto`: {why}"));
        }
    }
    for s in &mut statuses {
        if s.available && !s.used && s.reason.is_none() {
            s.reason = Some(format!(
                "available, not used: `--meter {choice}` chose {}",
                chosen.join(" + ")
            ));
        }
    }
    let (frequency, status) = frequency_for(
        observer.is_some(),
        statuses[RAPL_PERF].used || statuses[RAPL_POWERCAP].used,
        sim_frequency,
        workers,
        options,
    );
    statuses.push(status);
    Ok(Detected {
        meters,
        observer,
        frequency,
        statuses,
    })
}

/// The frequency reader to sample beside the chosen meters, and its status row.
fn frequency_for(
    sim_used: bool,
    rapl_used: bool,
    sim: Option<crate::sim::SimFrequency>,
    workers: &[WorkerInfo],
    options: &DetectOptions,
) -> (Option<Box<dyn crate::freq::FrequencyReader>>, BackendStatus) {
    let mut status = BackendStatus {
        backend: "cpu-frequency".into(),
        available: false,
        used: false,
        simulated: false,
        description: None,
        domains: Vec::new(),
        reason: None,
    };
    let reader: Result<Box<dyn crate::freq::FrequencyReader>, String> = if sim_used {
        status.simulated = true;
        sim.map(|r| Box::new(r) as Box<dyn crate::freq::FrequencyReader>)
            .ok_or_else(|| "the simulator could not be built".to_owned())
    } else if rapl_used {
        crate::freq::open_frequency(
            &options.msr_pmu_dir,
            &options.cpu_sysfs_root,
            &crate::freq::cpus_by_package(workers),
        )
        .map_err(|e| e.to_string())
    } else {
        Err("no CPU package is measured".to_owned())
    };
    match reader {
        Ok(r) => {
            status.available = true;
            status.used = true;
            status.description = Some(r.describe());
            (Some(r), status)
        }
        Err(why) => {
            status.reason = Some(why);
            (None, status)
        }
    }
}

/// A human-readable table of backend statuses (what `taskwatt meters` prints).
pub fn format_statuses(statuses: &[BackendStatus]) -> String {
    let mut out = String::new();
    for s in statuses {
        let state = match (s.available, s.used) {
            (true, true) => "used",
            (true, false) => "available",
            (false, _) => "unavailable",
        };
        let sim = if s.simulated { " (simulated)" } else { "" };
        let _ = writeln!(out, "{:<14} {state}{sim}", s.backend);
        if let Some(d) = &s.description {
            let _ = writeln!(out, "    {d}");
        }
        for d in &s.domains {
            let wrap = match d.wrap_range_j {
                Some(w) => format!("wraps at {w:.0} J"),
                None => "no wrap".into(),
            };
            let update = match d.update_interval_ns {
                Some(ns) => format!("updates every {} us", ns / 1_000),
                None => "update interval unknown".into(),
            };
            let sensor = match d.sensor {
                SensorKind::EnergyCounter => "energy counter".to_owned(),
                SensorKind::SampledCounter { sampled_ns } => format!(
                    "energy counter that sees the last {} ms of each update",
                    sampled_ns as f64 / 1e6
                ),
                SensorKind::IntegratedPower { window_ns } => {
                    format!(
                        "power averaged over {} ms, integrated",
                        window_ns / 1_000_000
                    )
                }
            };
            let _ = writeln!(
                out,
                "    {:<10} {} [{}]: {sensor}, resolution {:.3e} J, {wrap}, {update}",
                d.domain.to_string(),
                d.name,
                d.unit,
                d.resolution_j
            );
        }
        if let Some(r) = &s.reason {
            let _ = writeln!(out, "    {r}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(id: u32, package: u32) -> WorkerInfo {
        WorkerInfo::cpu(id, package)
    }

    /// Options pointing at an empty temp dir: nothing real can be found.
    fn nothing(dir: &std::path::Path) -> DetectOptions {
        DetectOptions {
            powercap_root: dir.join("powercap"),
            perf_pmu_dir: dir.join("power"),
            cpu_sysfs_root: dir.join("cpu"),
            msr_pmu_dir: dir.join("msr"),
            nvml_library: Some(dir.join("libnvidia-ml.so.1")),
            sim: SimConfig::default(),
            emulated_gpus: false,
            cuda_uuids: None,
        }
    }

    fn powercap_tree(root: &std::path::Path) {
        powercap_zone(root, "package-0");
    }

    fn powercap_zone(root: &std::path::Path, name: &str) -> std::path::PathBuf {
        let z = root.join("intel-rapl:0");
        std::fs::create_dir_all(&z).unwrap();
        std::fs::write(z.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(z.join("energy_uj"), "5\n").unwrap();
        std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
        z.join("energy_uj")
    }

    /// A live counter: rewrites `energy_uj` every millisecond, as the kernel's would move,
    /// until the returned guard drops.
    struct Ticking(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        Option<std::thread::JoinHandle<()>>,
    );

    fn ticking(file: std::path::PathBuf) -> Ticking {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let t = std::thread::spawn(move || {
            let mut uj = 5u64;
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                uj += 20_000;
                let tmp = file.with_extension("tmp");
                std::fs::write(&tmp, format!("{uj}\n")).unwrap();
                std::fs::rename(&tmp, &file).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        Ticking(stop, Some(t))
    }

    impl Drop for Ticking {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(t) = self.1.take() {
                t.join().unwrap();
            }
        }
    }

    #[test]
    fn auto_skips_rapl_that_cannot_stand_for_the_cpu() {
        // A powercap tree with psys alone (as some VMs expose): no package domain.
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        let f = powercap_zone(&o.powercap_root, "psys");
        let _live = ticking(f);
        let d = detect(MeterChoice::Auto, &[cpu(0, 0)], &o).unwrap();
        assert!(d.statuses[SIM].used, "the simulator stands in");
        let why = d.statuses[RAPL_POWERCAP].reason.as_ref().unwrap();
        assert!(d.statuses[RAPL_POWERCAP].available && !d.statuses[RAPL_POWERCAP].used);
        assert!(why.contains("no CPU package domain"), "{why}");

        // A package counter frozen at one value (a PMU without RAPL passthrough).
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        powercap_tree(&o.powercap_root);
        let d = detect(MeterChoice::Auto, &[cpu(0, 0)], &o).unwrap();
        assert!(d.statuses[SIM].used);
        let why = d.statuses[RAPL_POWERCAP].reason.as_ref().unwrap();
        assert!(why.contains("did not advance"), "{why}");
        // Named explicitly, it is used anyway.
        let d = detect(MeterChoice::RaplPowercap, &[cpu(0, 0)], &o).unwrap();
        assert_eq!(d.meters[0].describe().backend, "rapl-powercap");
    }

    #[test]
    fn a_real_meter_gets_the_real_frequency_or_says_why_not() {
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        powercap_tree(&o.powercap_root);
        // No msr PMU, no cpufreq: the status names both, and the run goes on without.
        let d = detect(MeterChoice::RaplPowercap, &[cpu(0, 0)], &o).unwrap();
        assert!(d.frequency.is_none());
        let f = &d.statuses[FREQUENCY];
        assert!(!f.available && !f.used && !f.simulated);
        let why = f.reason.as_ref().unwrap();
        assert!(
            why.contains("APERF/MPERF") && why.contains("scaling_cur_freq"),
            "{why}"
        );
        // A cpufreq tree for the worker's CPU: it is used.
        let dir = o.cpu_sysfs_root.join("cpu0/cpufreq");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("scaling_cur_freq"), "3100000\n").unwrap();
        let mut d = detect(MeterChoice::RaplPowercap, &[cpu(0, 0)], &o).unwrap();
        assert!(d.statuses[FREQUENCY].used, "{:?}", d.statuses[FREQUENCY]);
        let mut r = d.frequency.take().unwrap();
        let mut out = [None];
        r.read(&mut out);
        assert_eq!(out, [Some(3100.0)]);
    }

    #[test]
    fn choices_parse_and_unknown_ones_list_the_valid() {
        for c in MeterChoice::ALL {
            assert_eq!(c.name().parse::<MeterChoice>().unwrap(), c);
        }
        let m = "rapl".parse::<MeterChoice>().unwrap_err().to_string();
        for c in MeterChoice::ALL {
            assert!(m.contains(c.name()), "{m}");
        }
    }

    #[test]
    fn auto_falls_back_to_the_simulator_with_every_reason() {
        let t = tempfile::tempdir().unwrap();
        let d = detect(MeterChoice::Auto, &[cpu(0, 0)], &nothing(t.path())).unwrap();
        assert_eq!(d.meters.len(), 1);
        assert!(d.meters[0].describe().simulated);
        assert!(d.observer.is_some());
        let names: Vec<&str> = d.statuses.iter().map(|s| s.backend.as_str()).collect();
        assert_eq!(
            names,
            ["rapl-perf", "rapl-powercap", "nvml", "sim", "cpu-frequency"]
        );
        // The simulator stands for the CPU, so its cores' frequency is sampled.
        assert!(d.statuses[FREQUENCY].used && d.statuses[FREQUENCY].simulated);
        assert!(d.frequency.is_some());
        assert!(d.statuses[RAPL_PERF]
            .reason
            .as_ref()
            .unwrap()
            .contains("no perf `power` PMU"));
        assert!(d.statuses[RAPL_POWERCAP]
            .reason
            .as_ref()
            .unwrap()
            .contains("CONFIG_POWERCAP"));
        assert!(d.statuses[NVML]
            .reason
            .as_ref()
            .unwrap()
            .contains("no NVIDIA driver"));
        assert!(d.statuses[SIM].used && d.statuses[SIM].available && d.statuses[SIM].simulated);
        assert_eq!(d.statuses[SIM].domains.len(), 2);
        let text = format_statuses(&d.statuses);
        assert!(text.contains("sim            used (simulated)"), "{text}");
        assert!(text.contains("wraps at 262144 J"), "{text}");
        let json = serde_json::to_string(&d.statuses).unwrap();
        assert!(json.contains("\"backend\":\"sim\""), "{json}");
    }

    #[test]
    fn auto_prefers_a_readable_powercap_over_the_simulator() {
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        powercap_tree(&o.powercap_root);
        let _live = ticking(o.powercap_root.join("intel-rapl:0/energy_uj"));
        let d = detect(MeterChoice::Auto, &[cpu(0, 0)], &o).unwrap();
        assert_eq!(d.meters.len(), 1);
        assert_eq!(d.meters[0].describe().backend, "rapl-powercap");
        assert!(d.observer.is_none());
        assert!(d.statuses[RAPL_POWERCAP].used);
        let sim = &d.statuses[SIM];
        assert!(sim.available && !sim.used);
        assert!(sim.reason.as_ref().unwrap().contains("rapl-powercap"));
    }

    /// A `power` PMU that exists but cannot be opened (here: a fake type the kernel does not
    /// know) is reported with the open error, and auto moves on.
    #[cfg(target_os = "linux")]
    #[test]
    fn auto_moves_past_a_perf_pmu_that_cannot_be_opened() {
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        let pmu = &o.perf_pmu_dir;
        std::fs::create_dir_all(pmu.join("events")).unwrap();
        std::fs::create_dir_all(pmu.join("format")).unwrap();
        std::fs::write(pmu.join("type"), "999999\n").unwrap();
        std::fs::write(pmu.join("cpumask"), "0\n").unwrap();
        std::fs::write(pmu.join("format/event"), "config:0-7\n").unwrap();
        std::fs::write(pmu.join("events/energy-pkg"), "event=0x02\n").unwrap();
        powercap_tree(&o.powercap_root);
        let _live = ticking(o.powercap_root.join("intel-rapl:0/energy_uj"));
        let d = detect(MeterChoice::Auto, &[cpu(0, 0)], &o).unwrap();
        let perf = &d.statuses[RAPL_PERF];
        assert!(!perf.available);
        let reason = perf.reason.as_ref().unwrap();
        assert!(
            reason.contains("cannot open perf event power/energy-pkg/ on CPU 0"),
            "{reason}"
        );
        assert_eq!(d.meters[0].describe().backend, "rapl-powercap");
    }

    #[test]
    fn a_named_backend_that_is_missing_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let o = nothing(t.path());
        let e = detect(MeterChoice::RaplPowercap, &[], &o).unwrap_err();
        assert!(e.to_string().contains("CONFIG_POWERCAP"));
        let e = detect(MeterChoice::RaplPerf, &[], &o).unwrap_err();
        assert!(e.to_string().contains("perf `power` PMU"));
        let e = detect(MeterChoice::Nvml, &[], &o).unwrap_err();
        assert!(e.to_string().contains("no NVIDIA driver"));
        let d = detect(MeterChoice::Sim, &[], &o).unwrap();
        assert_eq!(d.meters.len(), 1);
        assert!(d.observer.is_some());
    }
}
