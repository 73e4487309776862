//! RAPL through perf_event (`rapl-perf`).
//!
//! The kernel's RAPL perf driver registers a `power` PMU:
//!
//! ```text
//! /sys/bus/event_source/devices/power/
//!   type                       dynamic PMU type number, e.g. 12
//!   cpumask                    one CPU per package (die), e.g. 0,18
//!   format/event               config:0-7
//!   events/energy-pkg          event=0x02
//!   events/energy-pkg.scale    2.3283064365386962890625e-10   (J per count: 2^-32)
//!   events/energy-pkg.unit     Joules
//!   events/energy-ram, -cores, -gpu, -psys  (as the CPU has them)
//! ```
//!
//! Each event is opened system-wide (`pid = -1`) on the cpumask's CPU of each package, which
//! needs CAP_PERFMON (or CAP_SYS_ADMIN) or `perf_event_paranoid <= 0`. Unlike powercap's
//! `energy_uj`, this path is not restricted to root by CVE-2020-8694's fix, which is why it is
//! tried first. The kernel accumulates the hardware counter into a 64-bit count, so there is no
//! wrap range.
//!
//! A CPU's package comes from `cpu/cpuN/topology/physical_package_id` (the same id the
//! runtime's workers carry); where that file is missing, the cpumask's order is used.

use std::path::{Path, PathBuf};

use serde::Serialize;
use taskwatt_traces::{Domain, SensorKind};

#[cfg(target_os = "linux")]
use crate::meter::RawReading;
use crate::meter::{Coverage, DomainRead, DomainSpec, Meter, MeterDescription};
use crate::powercap::RAPL_UPDATE_NS;
use crate::EnergyError;

/// Where the kernel puts the RAPL perf PMU.
pub const DEFAULT_PERF_PMU_DIR: &str = "/sys/bus/event_source/devices/power";
/// Where the kernel describes CPUs (for `topology/physical_package_id`).
pub const DEFAULT_CPU_SYSFS: &str = "/sys/devices/system/cpu";

/// One `energy-*` event the `power` PMU advertises.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerfEventDesc {
    /// Event name, e.g. `energy-pkg`.
    pub name: String,
    /// The event file's contents, e.g. `event=0x02`.
    pub config: String,
    /// Multiplier from counts to `unit` (2^-32 on Intel and AMD).
    pub scale: f64,
    /// Unit after scaling, normally `Joules`.
    pub unit: String,
}

/// The parsed `power` PMU directory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PowerPmu {
    /// The PMU directory.
    pub dir: PathBuf,
    /// Its dynamic perf type number.
    pub pmu_type: u32,
    /// One CPU per package (die) to open events on.
    pub cpumask: Vec<u32>,
    /// Its `energy-*` events, sorted by name.
    pub events: Vec<PerfEventDesc>,
}

impl PowerPmu {
    /// Parses the PMU directory `dir` (real or fake).
    pub fn parse(dir: &Path) -> Result<PowerPmu, EnergyError> {
        if !dir.is_dir() {
            return Err(EnergyError::NoPerfPmu {
                path: dir.to_path_buf(),
            });
        }
        let type_path = dir.join("type");
        let text = read_text(&type_path, "type")?;
        let pmu_type = text
            .trim()
            .parse()
            .map_err(|_| EnergyError::parse(type_path, "type", &text, "the PMU type number"))?;
        let mask_path = dir.join("cpumask");
        let text = read_text(&mask_path, "cpumask")?;
        let cpumask = parse_cpu_list(&text).ok_or_else(|| {
            EnergyError::parse(
                mask_path.clone(),
                "cpumask",
                &text,
                "a CPU list like 0,18 or 0-1",
            )
        })?;
        if cpumask.is_empty() {
            return Err(EnergyError::parse(
                mask_path,
                "cpumask",
                &text,
                "at least one CPU",
            ));
        }
        let events_dir = dir.join("events");
        let entries = std::fs::read_dir(&events_dir)
            .map_err(|e| EnergyError::from_io(events_dir.clone(), "events", e))?;
        let mut events = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| EnergyError::from_io(events_dir.clone(), "events", e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with("energy-") || name.contains('.') {
                continue;
            }
            let config = read_text(&entry.path(), "event")?.trim().to_owned();
            let scale_path = events_dir.join(format!("{name}.scale"));
            let scale = match std::fs::read_to_string(&scale_path) {
                Ok(s) => s
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| *v > 0.0)
                    .ok_or_else(|| {
                        EnergyError::parse(
                            scale_path,
                            "scale",
                            &s,
                            "a positive number (J per count)",
                        )
                    })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1.0,
                Err(e) => return Err(EnergyError::from_io(scale_path, "scale", e)),
            };
            let unit_path = events_dir.join(format!("{name}.unit"));
            let unit = match std::fs::read_to_string(&unit_path) {
                Ok(s) => s.trim().to_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => "Joules".to_owned(),
                Err(e) => return Err(EnergyError::from_io(unit_path, "unit", e)),
            };
            events.push(PerfEventDesc {
                name,
                config,
                scale,
                unit,
            });
        }
        events.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(PowerPmu {
            dir: dir.to_path_buf(),
            pmu_type,
            cpumask,
            events,
        })
    }

    /// The (domain, event, CPU) triples to open: each mapped event on each package's CPU,
    /// `energy-psys` only once. `cpu_root` gives each CPU's package.
    pub fn plan(&self, cpu_root: &Path) -> Vec<(Domain, PerfEventDesc, u32)> {
        let mut plan = Vec::new();
        for (i, &cpu) in self.cpumask.iter().enumerate() {
            let package = package_of_cpu(cpu_root, cpu).unwrap_or(i as u32);
            for ev in &self.events {
                let domain = match ev.name.as_str() {
                    "energy-pkg" => Domain::CpuPackage { id: package },
                    "energy-ram" => Domain::Dram { id: package },
                    "energy-cores" => Domain::Core { id: package },
                    "energy-gpu" => Domain::Uncore { id: package },
                    "energy-psys" if i == 0 => Domain::Psys,
                    _ => continue,
                };
                plan.push((domain, ev.clone(), cpu));
            }
        }
        plan
    }
}

/// Reads `cpu_root/cpuN/topology/physical_package_id`.
fn package_of_cpu(cpu_root: &Path, cpu: u32) -> Option<u32> {
    let p = cpu_root.join(format!("cpu{cpu}/topology/physical_package_id"));
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Parses a kernel CPU list: `0`, `0,18`, `0-3,8-11`.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Some(out);
    }
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

fn read_text(path: &Path, field: &'static str) -> Result<String, EnergyError> {
    std::fs::read_to_string(path).map_err(|e| EnergyError::from_io(path.to_path_buf(), field, e))
}

/// The fix to print when `perf_event_open` fails with `err`.
pub(crate) fn perf_open_fix(err: &std::io::Error) -> &'static str {
    match err.raw_os_error() {
        Some(1) | Some(13) => {
            "system-wide perf events need CAP_PERFMON (or CAP_SYS_ADMIN), e.g. `sudo setcap \
             cap_perfmon+ep <binary>`, or `sudo sysctl kernel.perf_event_paranoid=0`"
        }
        Some(2) | Some(19) | Some(22) => {
            "the kernel rejected the event: this CPU's `power` PMU does not support it"
        }
        Some(24) => "too many open files: raise `ulimit -n`",
        _ => "see perf_event_open(2) for this error",
    }
}

/// Opens and enables event `event` of the dynamic PMU at `pmu_dir` system-wide on `cpu`
/// (any process, no user/kernel/hypervisor exclusion: package-wide counters such as RAPL's
/// reject the exclusion bits on older kernels). Errors name `label` and the CPU, with the fix.
#[cfg(target_os = "linux")]
pub(crate) fn open_system_counter(
    pmu_dir: &Path,
    event: &str,
    label: &str,
    cpu: u32,
) -> Result<perf_event::Counter, EnergyError> {
    use perf_event::events::Dynamic;
    let open_err = |source: std::io::Error| EnergyError::PerfOpen {
        event: label.to_owned(),
        cpu,
        fix: perf_open_fix(&source),
        source,
    };
    let mut builder = Dynamic::builder(pmu_dir).map_err(open_err)?;
    builder.event(event).map_err(open_err)?;
    let built = builder.build().map_err(|e| {
        open_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.to_string(),
        ))
    })?;
    let mut b = perf_event::Builder::new(built);
    b.any_pid()
        .one_cpu(cpu as usize)
        .exclude_kernel(false)
        .exclude_hv(false);
    let mut counter = b.build().map_err(open_err)?;
    counter.enable().map_err(open_err)?;
    Ok(counter)
}

/// A RAPL meter reading perf_event counters.
pub struct PerfMeter {
    pmu: PowerPmu,
    specs: Vec<DomainSpec>,
    #[cfg(target_os = "linux")]
    counters: Vec<(perf_event::Counter, String, u32)>,
}

impl std::fmt::Debug for PerfMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfMeter")
            .field("pmu", &self.pmu)
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

impl PerfMeter {
    /// Opens the RAPL events of the PMU at [`DEFAULT_PERF_PMU_DIR`].
    pub fn open_default() -> Result<PerfMeter, EnergyError> {
        Self::open(
            Path::new(DEFAULT_PERF_PMU_DIR),
            Path::new(DEFAULT_CPU_SYSFS),
        )
    }

    /// Parses the `power` PMU at `pmu_dir`, maps its CPUs to packages with `cpu_root`, and
    /// opens and enables one counter per (event, package).
    pub fn open(pmu_dir: &Path, cpu_root: &Path) -> Result<PerfMeter, EnergyError> {
        let pmu = PowerPmu::parse(pmu_dir)?;
        let plan = pmu.plan(cpu_root);
        if plan.is_empty() {
            return Err(EnergyError::parse(
                pmu_dir.join("events"),
                "events",
                "<no energy-pkg/ram/cores/gpu/psys>",
                "at least one RAPL energy event",
            ));
        }
        let specs = plan
            .iter()
            .map(|(domain, ev, cpu)| DomainSpec {
                domain: *domain,
                name: format!("power/{}/ on CPU {cpu}", ev.name),
                unit: format!("{:e} {}", ev.scale, ev.unit),
                joules_per_unit: ev.scale,
                resolution_j: ev.scale,
                wrap_range_raw: None,
                sensor: SensorKind::EnergyCounter,
                update_interval_ns: Some(RAPL_UPDATE_NS),
                covers: match *domain {
                    Domain::Psys => Coverage::Platform,
                    Domain::Gpu { index } => Coverage::Gpu { index },
                    Domain::CpuPackage { id }
                    | Domain::Dram { id }
                    | Domain::Core { id }
                    | Domain::Uncore { id } => Coverage::Package { id },
                },
            })
            .collect();
        Self::open_counters(pmu, specs, &plan)
    }

    #[cfg(target_os = "linux")]
    fn open_counters(
        pmu: PowerPmu,
        specs: Vec<DomainSpec>,
        plan: &[(Domain, PerfEventDesc, u32)],
    ) -> Result<PerfMeter, EnergyError> {
        let mut counters = Vec::with_capacity(plan.len());
        for (_, ev, cpu) in plan {
            let counter = open_system_counter(&pmu.dir, &ev.name, &ev.name, *cpu)?;
            counters.push((counter, ev.name.clone(), *cpu));
        }
        Ok(PerfMeter {
            pmu,
            specs,
            counters,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open_counters(
        _pmu: PowerPmu,
        _specs: Vec<DomainSpec>,
        _plan: &[(Domain, PerfEventDesc, u32)],
    ) -> Result<PerfMeter, EnergyError> {
        Err(EnergyError::PerfUnsupported)
    }

    /// The parsed PMU.
    pub fn pmu(&self) -> &PowerPmu {
        &self.pmu
    }
}

impl Meter for PerfMeter {
    fn describe(&self) -> MeterDescription {
        let names: Vec<&str> = self.pmu.events.iter().map(|e| e.name.as_str()).collect();
        MeterDescription {
            backend: "rapl-perf".into(),
            simulated: false,
            description: format!(
                "RAPL via perf_event PMU {} (type {}) on CPUs {:?}: {}",
                self.pmu.dir.display(),
                self.pmu.pmu_type,
                self.pmu.cpumask,
                names.join(", ")
            ),
        }
    }

    fn domains(&self) -> &[DomainSpec] {
        &self.specs
    }

    #[cfg(target_os = "linux")]
    fn read(&mut self, out: &mut [DomainRead]) {
        for (slot, (counter, event, cpu)) in out.iter_mut().zip(self.counters.iter_mut()) {
            *slot =
                counter
                    .read()
                    .map(RawReading::Counter)
                    .map_err(|source| EnergyError::PerfRead {
                        event: event.clone(),
                        cpu: *cpu,
                        source,
                    });
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&mut self, out: &mut [DomainRead]) {
        for slot in out {
            *slot = Err(EnergyError::PerfUnsupported);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake `power` PMU like an Intel 2-socket server's, with a fake CPU tree.
    fn fake_pmu(pmu_type: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let pmu = t.path().join("power");
        fs::create_dir_all(pmu.join("events")).unwrap();
        fs::create_dir_all(pmu.join("format")).unwrap();
        fs::write(pmu.join("type"), format!("{pmu_type}\n")).unwrap();
        fs::write(pmu.join("cpumask"), "0,18\n").unwrap();
        fs::write(pmu.join("format/event"), "config:0-7\n").unwrap();
        for (name, code) in [("energy-pkg", 2), ("energy-ram", 3), ("energy-psys", 5)] {
            fs::write(
                pmu.join(format!("events/{name}")),
                format!("event=0x{code:02x}\n"),
            )
            .unwrap();
            fs::write(
                pmu.join(format!("events/{name}.scale")),
                "2.3283064365386962890625e-10\n",
            )
            .unwrap();
            fs::write(pmu.join(format!("events/{name}.unit")), "Joules\n").unwrap();
        }
        // An event taskwatt does not map.
        fs::write(pmu.join("events/energy-weird"), "event=0x09\n").unwrap();
        let cpus = t.path().join("cpu");
        for (cpu, pkg) in [(0, 0), (18, 1)] {
            let d = cpus.join(format!("cpu{cpu}/topology"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("physical_package_id"), format!("{pkg}\n")).unwrap();
        }
        (t, pmu, cpus)
    }

    #[test]
    fn parses_the_pmu_directory() {
        let (_t, dir, cpus) = fake_pmu("12");
        let pmu = PowerPmu::parse(&dir).unwrap();
        assert_eq!(pmu.pmu_type, 12);
        assert_eq!(pmu.cpumask, vec![0, 18]);
        let names: Vec<&str> = pmu.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["energy-pkg", "energy-psys", "energy-ram", "energy-weird"]
        );
        let pkg = &pmu.events[0];
        assert_eq!(pkg.config, "event=0x02");
        assert_eq!(pkg.scale, 2f64.powi(-32));
        assert_eq!(pkg.unit, "Joules");
        // Missing .scale/.unit default to 1 J.
        assert_eq!(pmu.events[3].scale, 1.0);

        let plan: Vec<(Domain, String, u32)> = pmu
            .plan(&cpus)
            .into_iter()
            .map(|(d, e, c)| (d, e.name, c))
            .collect();
        assert_eq!(
            plan,
            vec![
                (Domain::CpuPackage { id: 0 }, "energy-pkg".into(), 0),
                (Domain::Psys, "energy-psys".into(), 0),
                (Domain::Dram { id: 0 }, "energy-ram".into(), 0),
                (Domain::CpuPackage { id: 1 }, "energy-pkg".into(), 18),
                (Domain::Dram { id: 1 }, "energy-ram".into(), 18),
            ]
        );
        // Without a CPU tree, packages follow the cpumask order.
        let plan = pmu.plan(Path::new("/nonexistent"));
        assert_eq!(plan[3].0, Domain::CpuPackage { id: 1 });
    }

    #[test]
    fn absent_pmu_says_so() {
        let t = tempfile::tempdir().unwrap();
        let e = PerfMeter::open(&t.path().join("power"), t.path()).unwrap_err();
        assert!(e.is_unavailable());
        let m = e.to_string();
        assert!(
            m.contains("no perf `power` PMU") && m.contains("power"),
            "{m}"
        );
    }

    #[test]
    fn garbage_type_and_cpumask_name_the_file() {
        let (_t, dir, _) = fake_pmu("twelve");
        let m = PowerPmu::parse(&dir).unwrap_err().to_string();
        assert!(m.contains("power/type") && m.contains("\"twelve\""), "{m}");
        let (_t, dir, _) = fake_pmu("12");
        fs::write(dir.join("cpumask"), "0-x\n").unwrap();
        let m = PowerPmu::parse(&dir).unwrap_err().to_string();
        assert!(m.contains("cpumask"), "{m}");
        let (_t, dir, _) = fake_pmu("12");
        fs::write(dir.join("events/energy-pkg.scale"), "-1\n").unwrap();
        let m = PowerPmu::parse(&dir).unwrap_err().to_string();
        assert!(m.contains("energy-pkg.scale"), "{m}");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0\n"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0,18"), Some(vec![0, 18]));
        assert_eq!(parse_cpu_list("0-2,8"), Some(vec![0, 1, 2, 8]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    /// The real open path runs on the fake tree: the PMU type does not exist in this kernel
    /// (or perf_event_open is not permitted here), so the open fails with an error naming the
    /// event and the CPU. On a machine with the real PMU this path opens real counters.
    #[cfg(target_os = "linux")]
    #[test]
    fn opening_a_fake_pmu_fails_naming_event_and_cpu() {
        let (_t, dir, cpus) = fake_pmu("999999");
        let e = PerfMeter::open(&dir, &cpus).unwrap_err();
        match &e {
            EnergyError::PerfOpen { event, cpu, .. } => {
                assert_eq!(event, "energy-pkg");
                assert_eq!(*cpu, 0);
            }
            other => panic!("expected PerfOpen, got {other}"),
        }
        assert!(!e.is_unavailable());
    }

    #[test]
    fn open_fix_names_capabilities_for_permission_errors() {
        let fix = perf_open_fix(&std::io::Error::from_raw_os_error(13));
        assert!(fix.contains("CAP_PERFMON") && fix.contains("perf_event_paranoid"));
        let fix = perf_open_fix(&std::io::Error::from_raw_os_error(2));
        assert!(fix.contains("does not support"));
    }
}
