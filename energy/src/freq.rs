//! CPU frequency, sampled beside the energy.
//!
//! A task's power depends on the frequency its core runs at: turbo bins that fall as cores
//! fill, a power or thermal cap that lowers every core for part of a run. The attribution
//! (docs/attribution.md, "Frequency") uses the sampled frequency as a regressor, so a cap
//! for part of the run is corrected instead of only warned about. Two sources, tried in
//! this order by [`open_frequency`]:
//!
//! 1. **APERF/MPERF** through the perf `msr` PMU (`/sys/bus/event_source/devices/msr`,
//!    events `aperf`, `mperf`, `tsc`). APERF counts the cycles a core ran at its actual
//!    frequency while not halted, MPERF the same time at the TSC's rate, so over a span
//!    `Δaperf/Δmperf · tsc_hz` is the mean frequency *while the core ran* (what a task's power
//!    depends on; an idle core does not dilute it). The TSC's rate comes from the `tsc` event
//!    over the span's wall time. Summed over a package's CPUs, it is the busy-weighted mean of
//!    the package. Needs CAP_PERFMON or `perf_event_paranoid <= 0`, like RAPL's perf path;
//!    many VMs expose the PMU without `aperf`/`mperf`.
//! 2. **cpufreq** (`/sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq`, kHz): the
//!    kernel's current frequency of each CPU (on x86 itself an APERF/MPERF average over the
//!    last tick), averaged over the package's CPUs that run workers. Coarser: an idle CPU's
//!    value counts too.
//!
//! A reader gives one value per package per read: the mean frequency over the span since
//! its previous read, or `None` where the package's cores did not run (no C0 time) or the
//! read failed. The sampler stamps it and writes it to the trace (`Chunk::Frequencies`)
//! against the package's energy domain.

use std::path::{Path, PathBuf};

use crate::EnergyError;

/// Where the kernel puts the perf `msr` PMU.
pub const DEFAULT_MSR_PMU_DIR: &str = "/sys/bus/event_source/devices/msr";

/// Reads the mean frequency of each of its packages since its previous read.
pub trait FrequencyReader: Send {
    /// What it reads, for the trace and `taskwatt meters`.
    fn describe(&self) -> String;

    /// The packages it reads, in the order of [`FrequencyReader::read`]'s output.
    fn packages(&self) -> &[u32];

    /// Writes each package's mean frequency (MHz) since the previous call into `out`
    /// (`out.len() == packages().len()`): `None` where the cores did not run or the read
    /// failed. The first call after opening gives the span since the open.
    fn read(&mut self, out: &mut [Option<f64>]);

    /// When the last read's values end, on the trace clock, where the reader knows it (the
    /// simulator's, at its update tick); otherwise the sampler stamps the read's time.
    fn value_time(&self) -> Option<taskwatt_traces::Timestamp> {
        None
    }
}

/// The CPUs of each package that run workers: `(package, cpus)`, packages in order.
pub fn cpus_by_package(workers: &[taskwatt_traces::WorkerInfo]) -> Vec<(u32, Vec<u32>)> {
    let mut map: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for w in workers {
        if let (taskwatt_traces::Arch::Cpu, Some(cpu)) = (w.arch, w.cpu) {
            let v = map.entry(w.package).or_default();
            if !v.contains(&cpu) {
                v.push(cpu);
            }
        }
    }
    map.into_iter().collect()
}

/// Each of `packages`' energy domain among `domains` (its `cpu_package` domain), where it
/// has one: what a frequency sample is written against.
fn package_domains(
    packages: &[u32],
    domains: &[taskwatt_traces::DomainInfo],
) -> Vec<Option<taskwatt_traces::DomainId>> {
    packages
        .iter()
        .map(|&p| {
            domains
                .iter()
                .find(|d| d.domain == taskwatt_traces::Domain::CpuPackage { id: p })
                .map(|d| d.id)
        })
        .collect()
}

/// A reader with, per package it reads, the package's energy domain: what the sampler (and
/// the simulator's replay) read at each reading.
pub(crate) struct PackageFrequency {
    reader: Box<dyn FrequencyReader>,
    ids: Vec<Option<taskwatt_traces::DomainId>>,
    out: Vec<Option<f64>>,
}

impl PackageFrequency {
    /// `reader` over `domains`; `None` when none of its packages has an energy domain.
    pub(crate) fn new(
        reader: Box<dyn FrequencyReader>,
        domains: &[taskwatt_traces::DomainInfo],
    ) -> Option<PackageFrequency> {
        let ids = package_domains(reader.packages(), domains);
        ids.iter().any(Option::is_some).then(|| PackageFrequency {
            out: vec![None; ids.len()],
            ids,
            reader,
        })
    }

    /// Reads once and appends a sample per package whose cores ran, stamped with the
    /// reader's value time or else the middle of the read; returns how many.
    pub(crate) fn read_into(&mut self, into: &mut Vec<taskwatt_traces::FrequencySample>) -> u64 {
        use taskwatt_traces::{Clock, Timestamp};
        let before = Clock::now();
        self.reader.read(&mut self.out);
        let after = Clock::now();
        let t = self
            .reader
            .value_time()
            .unwrap_or(Timestamp(before.as_ns() + after.saturating_sub(before) / 2));
        let mut n = 0;
        for (v, id) in self.out.iter().zip(&self.ids) {
            if let (Some(mhz), Some(domain)) = (*v, *id) {
                if mhz.is_finite() && mhz > 0.0 {
                    into.push(taskwatt_traces::FrequencySample { domain, t, mhz });
                    n += 1;
                }
            }
        }
        n
    }
}

/// Opens the best frequency source for `groups` (see the module docs): APERF/MPERF under
/// `msr_dir`, else cpufreq under `cpu_root`. The error names what each lacked and how to
/// get it.
pub fn open_frequency(
    msr_dir: &Path,
    cpu_root: &Path,
    groups: &[(u32, Vec<u32>)],
) -> Result<Box<dyn FrequencyReader>, EnergyError> {
    if groups.iter().all(|(_, cpus)| cpus.is_empty()) {
        return Err(EnergyError::NoFrequency {
            tried: "no worker is pinned to a CPU, so there is no core whose frequency matters"
                .into(),
        });
    }
    let aperf = match AperfMperf::open(msr_dir, groups) {
        Ok(r) => return Ok(Box::new(r)),
        Err(e) => e,
    };
    let cpufreq = match Cpufreq::open(cpu_root, groups) {
        Ok(r) => return Ok(Box::new(r)),
        Err(e) => e,
    };
    Err(EnergyError::NoFrequency {
        tried: format!("APERF/MPERF: {aperf}; cpufreq: {cpufreq}"),
    })
}

/// cpufreq's `scaling_cur_freq`, averaged over each package's CPUs.
#[derive(Debug)]
pub struct Cpufreq {
    packages: Vec<u32>,
    files: Vec<Vec<PathBuf>>,
    root: PathBuf,
}

impl Cpufreq {
    /// Opens `cpu_root/cpuN/cpufreq/scaling_cur_freq` for every CPU of `groups`, and reads
    /// each once: a file missing or unreadable is an error naming it.
    pub fn open(cpu_root: &Path, groups: &[(u32, Vec<u32>)]) -> Result<Cpufreq, EnergyError> {
        let mut files = Vec::with_capacity(groups.len());
        for (_, cpus) in groups {
            let mut g = Vec::with_capacity(cpus.len());
            for cpu in cpus {
                let path = cpu_root.join(format!("cpu{cpu}/cpufreq/scaling_cur_freq"));
                read_khz(&path)?;
                g.push(path);
            }
            files.push(g);
        }
        Ok(Cpufreq {
            packages: groups.iter().map(|g| g.0).collect(),
            files,
            root: cpu_root.to_path_buf(),
        })
    }
}

/// A `scaling_cur_freq` file's value, kHz.
fn read_khz(path: &Path) -> Result<f64, EnergyError> {
    let text = std::fs::read_to_string(path).map_err(|source| EnergyError::Read {
        path: path.to_path_buf(),
        field: "scaling_cur_freq",
        fix: if source.kind() == std::io::ErrorKind::NotFound {
            "no cpufreq driver exposes this CPU (a VM usually has none; on bare metal load \
             acpi-cpufreq or intel_pstate)"
        } else {
            "check the file's permissions"
        },
        source,
    })?;
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(EnergyError::parse(
            path.to_path_buf(),
            "scaling_cur_freq",
            &text,
            "a frequency in kHz",
        )),
    }
}

impl FrequencyReader for Cpufreq {
    fn describe(&self) -> String {
        format!(
            "cpufreq scaling_cur_freq under {} (mean of the workers' CPUs)",
            self.root.display()
        )
    }

    fn packages(&self) -> &[u32] {
        &self.packages
    }

    fn read(&mut self, out: &mut [Option<f64>]) {
        for (slot, files) in out.iter_mut().zip(&self.files) {
            let (mut sum, mut n) = (0.0, 0u32);
            for f in files {
                if let Ok(khz) = read_khz(f) {
                    sum += khz;
                    n += 1;
                }
            }
            *slot = (n > 0).then(|| sum / f64::from(n) / 1000.0);
        }
    }
}

/// The perf `msr` PMU's directory, checked for the three events APERF/MPERF needs.
#[derive(Clone, Debug, PartialEq)]
pub struct MsrPmu {
    /// The PMU directory.
    pub dir: PathBuf,
    /// Its dynamic perf type number.
    pub pmu_type: u32,
}

impl MsrPmu {
    /// Parses `dir` (real or fake): it must exist and advertise `aperf`, `mperf` and `tsc`.
    pub fn parse(dir: &Path) -> Result<MsrPmu, EnergyError> {
        if !dir.is_dir() {
            return Err(EnergyError::NoMsrPmu {
                path: dir.to_path_buf(),
                missing: "the PMU itself".into(),
            });
        }
        let type_path = dir.join("type");
        let text = std::fs::read_to_string(&type_path).map_err(|source| EnergyError::Read {
            path: type_path.clone(),
            field: "type",
            fix: "the perf msr PMU's directory is incomplete",
            source,
        })?;
        let pmu_type = text
            .trim()
            .parse()
            .map_err(|_| EnergyError::parse(type_path, "type", &text, "the PMU type number"))?;
        let missing: Vec<&str> = ["aperf", "mperf", "tsc"]
            .into_iter()
            .filter(|e| !dir.join("events").join(e).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(EnergyError::NoMsrPmu {
                path: dir.to_path_buf(),
                missing: format!("the events {}", missing.join(", ")),
            });
        }
        Ok(MsrPmu {
            dir: dir.to_path_buf(),
            pmu_type,
        })
    }
}

/// APERF/MPERF per CPU through perf, summed per package.
pub struct AperfMperf {
    pmu: MsrPmu,
    packages: Vec<u32>,
    #[cfg(target_os = "linux")]
    groups: Vec<Vec<CpuCounters>>,
    #[cfg(target_os = "linux")]
    last_wall: std::time::Instant,
}

impl std::fmt::Debug for AperfMperf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AperfMperf")
            .field("pmu", &self.pmu)
            .field("packages", &self.packages)
            .finish_non_exhaustive()
    }
}

#[cfg(target_os = "linux")]
struct CpuCounters {
    aperf: perf_event::Counter,
    mperf: perf_event::Counter,
    tsc: perf_event::Counter,
    last: [u64; 3],
}

/// What APERF/MPERF give for one package over one span: `(Σ Δaperf, Σ Δmperf, Σ Δtsc, CPUs)`
/// and the span's wall time, s: the busy-weighted mean frequency, MHz, or `None` when no core
/// ran.
pub fn aperf_mperf_mhz(aperf: u64, mperf: u64, tsc: u64, cpus: u32, wall_s: f64) -> Option<f64> {
    if mperf == 0 || cpus == 0 || wall_s <= 0.0 || tsc == 0 {
        return None;
    }
    let tsc_hz = tsc as f64 / f64::from(cpus) / wall_s;
    let mhz = aperf as f64 / mperf as f64 * tsc_hz / 1e6;
    mhz.is_finite().then_some(mhz)
}

impl AperfMperf {
    /// Opens `aperf`, `mperf` and `tsc` on every CPU of `groups`.
    pub fn open(msr_dir: &Path, groups: &[(u32, Vec<u32>)]) -> Result<AperfMperf, EnergyError> {
        let pmu = MsrPmu::parse(msr_dir)?;
        Self::open_counters(pmu, groups)
    }

    #[cfg(target_os = "linux")]
    fn open_counters(pmu: MsrPmu, groups: &[(u32, Vec<u32>)]) -> Result<AperfMperf, EnergyError> {
        let open = |name: &str, cpu: u32| {
            crate::rapl_perf::open_system_counter(&pmu.dir, name, &format!("msr/{name}"), cpu)
        };
        let mut out = Vec::with_capacity(groups.len());
        for (_, cpus) in groups {
            let mut g = Vec::with_capacity(cpus.len());
            for &cpu in cpus {
                let mut c = CpuCounters {
                    aperf: open("aperf", cpu)?,
                    mperf: open("mperf", cpu)?,
                    tsc: open("tsc", cpu)?,
                    last: [0; 3],
                };
                c.last = [
                    c.aperf.read().unwrap_or(0),
                    c.mperf.read().unwrap_or(0),
                    c.tsc.read().unwrap_or(0),
                ];
                g.push(c);
            }
            out.push(g);
        }
        Ok(AperfMperf {
            pmu,
            packages: groups.iter().map(|g| g.0).collect(),
            groups: out,
            last_wall: std::time::Instant::now(),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open_counters(_pmu: MsrPmu, _groups: &[(u32, Vec<u32>)]) -> Result<AperfMperf, EnergyError> {
        Err(EnergyError::PerfUnsupported)
    }
}

impl FrequencyReader for AperfMperf {
    fn describe(&self) -> String {
        format!(
            "APERF/MPERF via perf PMU {} (type {}), busy-weighted per package",
            self.pmu.dir.display(),
            self.pmu.pmu_type
        )
    }

    fn packages(&self) -> &[u32] {
        &self.packages
    }

    #[cfg(target_os = "linux")]
    fn read(&mut self, out: &mut [Option<f64>]) {
        let now = std::time::Instant::now();
        let wall_s = now.duration_since(self.last_wall).as_secs_f64();
        self.last_wall = now;
        for (slot, group) in out.iter_mut().zip(&mut self.groups) {
            let (mut sum, mut ok) = ([0u64; 3], 0u32);
            for c in group.iter_mut() {
                let (Ok(a), Ok(m), Ok(t)) = (c.aperf.read(), c.mperf.read(), c.tsc.read()) else {
                    continue;
                };
                let now = [a, m, t];
                for k in 0..3 {
                    sum[k] += now[k].wrapping_sub(c.last[k]);
                }
                c.last = now;
                ok += 1;
            }
            *slot = aperf_mperf_mhz(sum[0], sum[1], sum[2], ok, wall_s);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&mut self, out: &mut [Option<f64>]) {
        out.fill(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_cpufreq(root: &Path, cpus: &[(u32, &str)]) {
        for (cpu, khz) in cpus {
            let d = root.join(format!("cpu{cpu}/cpufreq"));
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("scaling_cur_freq"), khz).unwrap();
        }
    }

    #[test]
    fn cpufreq_averages_each_package_and_follows_the_files() {
        let dir = tempfile::tempdir().unwrap();
        fake_cpufreq(
            dir.path(),
            &[(0, "3600000\n"), (1, "3000000\n"), (2, "2000000\n")],
        );
        let groups = vec![(0, vec![0, 1]), (1, vec![2])];
        let mut r = Cpufreq::open(dir.path(), &groups).unwrap();
        assert_eq!(r.packages(), &[0, 1]);
        let mut out = [None; 2];
        r.read(&mut out);
        assert_eq!(out, [Some(3300.0), Some(2000.0)]);
        // A cap: the files change, the next read follows.
        fs::write(dir.path().join("cpu2/cpufreq/scaling_cur_freq"), "1600000").unwrap();
        r.read(&mut out);
        assert_eq!(out[1], Some(1600.0));
        // A file that vanishes leaves its package without a value, not a stale one.
        fs::remove_file(dir.path().join("cpu2/cpufreq/scaling_cur_freq")).unwrap();
        r.read(&mut out);
        assert_eq!(out, [Some(3300.0), None]);
    }

    #[test]
    fn cpufreq_errors_name_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let e = Cpufreq::open(dir.path(), &[(0, vec![3])]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("cpu3/cpufreq/scaling_cur_freq"), "{m}");
        assert!(m.contains("no cpufreq driver"), "{m}");
        fake_cpufreq(dir.path(), &[(3, "fast")]);
        let m = Cpufreq::open(dir.path(), &[(0, vec![3])])
            .unwrap_err()
            .to_string();
        assert!(m.contains("scaling_cur_freq") && m.contains("kHz"), "{m}");
    }

    #[test]
    fn the_msr_pmu_must_advertise_aperf_mperf_and_tsc() {
        let dir = tempfile::tempdir().unwrap();
        let pmu = dir.path().join("msr");
        let m = MsrPmu::parse(&pmu).unwrap_err().to_string();
        assert!(m.contains("msr") && m.contains("CAP_PERFMON"), "{m}");
        fs::create_dir_all(pmu.join("events")).unwrap();
        fs::write(pmu.join("type"), "10\n").unwrap();
        // What a VM shows: the TSC and SMI counts, no APERF/MPERF.
        fs::write(pmu.join("events/tsc"), "event=0x00").unwrap();
        fs::write(pmu.join("events/smi"), "event=0x04").unwrap();
        let m = MsrPmu::parse(&pmu).unwrap_err().to_string();
        assert!(m.contains("aperf, mperf") && m.contains("VM"), "{m}");
        fs::write(pmu.join("events/aperf"), "event=0x01").unwrap();
        fs::write(pmu.join("events/mperf"), "event=0x02").unwrap();
        assert_eq!(MsrPmu::parse(&pmu).unwrap().pmu_type, 10);
    }

    #[test]
    fn aperf_mperf_give_the_busy_weighted_frequency() {
        // Two CPUs on a 2.0 GHz TSC over 10 ms: one ran 5 ms at 3.0 GHz, the other 10 ms at
        // 2.4 GHz. MPERF 1e7 + 2e7 cycles at TSC rate, APERF 1.5e7 + 2.4e7.
        let mhz = aperf_mperf_mhz(39_000_000, 30_000_000, 40_000_000, 2, 0.010).unwrap();
        // Busy-weighted: (5 ms·3.0 + 10 ms·2.4) / 15 ms = 2.6 GHz.
        assert!((mhz - 2600.0).abs() < 1e-6, "{mhz}");
        assert_eq!(aperf_mperf_mhz(5, 0, 40, 2, 0.01), None, "no core ran");
    }

    #[test]
    fn without_any_source_the_error_names_both_and_their_fixes() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_frequency(&dir.path().join("msr"), dir.path(), &[(0, vec![0])])
            .err()
            .unwrap();
        let m = e.to_string();
        assert!(m.contains("APERF/MPERF") && m.contains("cpufreq"), "{m}");
        assert!(m.contains("scaling_cur_freq"), "{m}");
        // A fake cpufreq tree is enough for the fallback.
        fake_cpufreq(dir.path(), &[(0, "2400000")]);
        let r = open_frequency(&dir.path().join("msr"), dir.path(), &[(0, vec![0])]).unwrap();
        assert!(r.describe().contains("cpufreq"));
    }
}
