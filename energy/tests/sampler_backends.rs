//! Scenarios: the sampler over real backends on fakes (a powercap tree that wraps and loses a
//! zone mid-run, scripted NVML GPUs) and over a scripted meter that fails and stalls.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use taskwatt_energy::{
    Coverage, DomainRead, DomainSpec, EnergyError, GpuArchitecture, Meter, MeterDescription,
    NvmlMeter, PowercapMeter, RawReading, Sampler, SamplerConfig, ScriptedGpu,
};
use taskwatt_traces::{
    Arch, Chunk, Domain, DomainInfo, EnergySample, MemoryTrace, SensorKind, TraceSink, WorkerInfo,
};

fn worker(id: u32, arch: Arch, package: u32, device: Option<u32>) -> WorkerInfo {
    WorkerInfo {
        id,
        arch,
        cpu: Some(id),
        core: Some(id),
        package,
        numa: Some(package),
        device,
    }
}

fn zone(dir: &Path, name: &str, energy: u64, max: u64) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("name"), format!("{name}\n")).unwrap();
    fs::write(dir.join("energy_uj"), format!("{energy}\n")).unwrap();
    fs::write(dir.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
}

fn domains(trace: &MemoryTrace) -> Vec<DomainInfo> {
    match &trace.chunks()[0] {
        Chunk::Meters { domains, .. } => domains.clone(),
        other => panic!("first chunk: {other:?}"),
    }
}

fn period(ms: u64) -> SamplerConfig {
    SamplerConfig::with_period(Duration::from_millis(ms)).unwrap()
}

/// A fake 2-package powercap tree: package-0 wraps during the run and package-1's zone
/// vanishes; the trace keeps package-0's energy right and stop() reports the vanished file.
#[test]
fn powercap_wrap_and_vanishing_zone_through_the_sampler() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let max = 1_000_000u64; // a small range, to wrap quickly
    zone(&r.join("intel-rapl:0"), "package-0", 900_000, max);
    zone(&r.join("intel-rapl:0/intel-rapl:0:0"), "dram", 0, max);
    zone(&r.join("intel-rapl:1"), "package-1", 0, max);
    let meter = PowercapMeter::open(r).unwrap();
    let workers = [
        worker(0, Arch::Cpu, 0, None),
        worker(1, Arch::Cpu, 1, None),
        worker(2, Arch::Cpu, 0, None),
    ];
    let (sink, trace) = TraceSink::memory();
    let sampler = Sampler::start(vec![Box::new(meter)], &workers, sink, period(2)).unwrap();

    let d = domains(&trace);
    assert_eq!(d[0].domain, Domain::CpuPackage { id: 0 });
    assert_eq!(d[0].workers, vec![0, 2]);
    assert_eq!(d[1].domain, Domain::Dram { id: 0 });
    assert_eq!(d[1].workers, vec![0, 2]);
    assert_eq!(d[2].workers, vec![1]);
    assert_eq!(d[0].wrap_range_j, Some((max + 1) as f64 * 1e-6));

    // Package 0 climbs by 50 mJ steps, across the wrap at 1 J: 900000 -> ... -> 250000.
    let mut v = 900_000u64;
    for _ in 0..7 {
        std::thread::sleep(Duration::from_millis(6));
        v = (v + 50_000) % (max + 1);
        // Write-and-rename, so that a concurrent read never sees a half-written file.
        let tmp = r.join("intel-rapl:0/energy_uj.tmp");
        fs::write(&tmp, format!("{v}\n")).unwrap();
        fs::rename(&tmp, r.join("intel-rapl:0/energy_uj")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(6));
    fs::remove_dir_all(r.join("intel-rapl:1")).unwrap();
    std::thread::sleep(Duration::from_millis(10));
    let stats = sampler.stop().unwrap();

    let s = trace.samples();
    let pkg0: Vec<&EnergySample> = s.iter().filter(|x| x.domain == d[0].id).collect();
    let last = pkg0.last().unwrap();
    // 7 steps of 50 mJ = 0.35 J; the file holds 0..=max, so it wraps modulo max + 1.
    assert!((last.energy_j - 0.35).abs() < 1e-9, "{}", last.energy_j);
    assert_eq!(last.raw, 249_999.0);
    assert_eq!(stats.wraps, 1);
    assert!(pkg0.windows(2).all(|w| w[1].energy_j >= w[0].energy_j));

    // The vanished zone: reported with its file, and its samples stop.
    assert!(stats.read_errors > 0);
    assert_eq!(stats.failures.len(), 1);
    let f = &stats.failures[0];
    assert_eq!(f.domain, Domain::CpuPackage { id: 1 });
    assert_eq!(f.backend, "rapl-powercap");
    assert!(
        f.first_error.contains("intel-rapl:1/energy_uj"),
        "{}",
        f.first_error
    );
    assert_eq!(f.count, stats.read_errors);
    // package-0 went on being sampled after the failure.
    let pkg1_last = s
        .iter()
        .filter(|x| x.domain == d[2].id)
        .map(|x| x.t)
        .max()
        .unwrap();
    assert!(last.t > pkg1_last);
}

#[test]
fn nvml_counter_and_power_fallback_through_the_sampler() {
    let counter = ScriptedGpu::with_energy(
        0,
        "NVIDIA H100",
        GpuArchitecture::Hopper,
        &[1_000, 1_000, 1_500, 2_000, 2_000, 9_000],
    );
    let power = ScriptedGpu::power_only(1, "Tesla P100", GpuArchitecture::Pascal, &[100_000]);
    let meter = NvmlMeter::from_devices(vec![Box::new(counter), Box::new(power)]).unwrap();
    let workers = [
        worker(0, Arch::Cpu, 0, None),
        worker(1, Arch::Gpu, 0, Some(0)),
        worker(2, Arch::Gpu, 0, Some(1)),
    ];
    let (sink, trace) = TraceSink::memory();
    let sampler = Sampler::start(vec![Box::new(meter)], &workers, sink, period(2)).unwrap();
    std::thread::sleep(Duration::from_millis(40));
    let stats = sampler.stop().unwrap();
    assert_eq!(stats.read_errors, 0);

    let d = domains(&trace);
    // GPU 0: its counter, then its power readings (the scripted H100 answers both); GPU 1:
    // its power readings.
    assert_eq!(d.len(), 3, "{d:?}");
    assert_eq!(d[0].workers, vec![1]);
    assert_eq!(d[1].workers, vec![1]);
    assert_eq!(d[0].domain, d[1].domain);
    assert_eq!(d[2].workers, vec![2]);
    let d = [d[0].clone(), d[2].clone()];
    assert_eq!(
        d[1].sensor,
        SensorKind::IntegratedPower {
            window_ns: 25_000_000
        }
    );
    let s = trace.samples();
    let gpu0: Vec<&EnergySample> = s.iter().filter(|x| x.domain == d[0].id).collect();
    // The first script value is the probe's; the readings follow the script (as far as a
    // loaded machine let the sampler read), cumulative from the first reading.
    let script = [1_000.0, 1_500.0, 2_000.0, 2_000.0, 9_000.0];
    for (i, x) in gpu0.iter().enumerate() {
        assert_eq!(x.raw, script[i.min(script.len() - 1)]);
        assert!((x.energy_j - (x.raw - 1_000.0) * 1e-3).abs() < 1e-12);
    }
    let gpu1: Vec<&EnergySample> = s.iter().filter(|x| x.domain == d[1].id).collect();
    let (a, b) = (gpu1[0], gpu1.last().unwrap());
    let want = 100.0 * (b.t.as_ns() - a.t.as_ns()) as f64 * 1e-9;
    assert!((b.energy_j - want).abs() < 1e-9, "{} vs {want}", b.energy_j);
    assert!(b.raw.is_nan());
}

/// A scripted meter: two domains; domain 1 fails from its third read on; some reads stall
/// longer than the period.
struct Flaky {
    specs: Vec<DomainSpec>,
    reads: u64,
    stall: Arc<AtomicBool>,
}

impl Meter for Flaky {
    fn describe(&self) -> MeterDescription {
        MeterDescription {
            backend: "flaky".into(),
            simulated: false,
            description: "a scripted test meter".into(),
        }
    }
    fn domains(&self) -> &[DomainSpec] {
        &self.specs
    }
    fn read(&mut self, out: &mut [DomainRead]) {
        self.reads += 1;
        if self.stall.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(12));
        }
        out[0] = Ok(RawReading::Counter(self.reads * 10));
        out[1] = if self.reads >= 3 {
            Err(EnergyError::Nvml {
                device: "GPU 3".into(),
                call: "nvmlDeviceGetTotalEnergyConsumption",
                message: "GPU is lost".into(),
            })
        } else {
            Ok(RawReading::Counter(self.reads))
        };
    }
}

#[test]
fn read_failures_and_overruns_are_reported_not_hidden() {
    let spec = |domain, covers| DomainSpec {
        domain,
        name: format!("{domain}"),
        unit: "mJ".into(),
        joules_per_unit: 1e-3,
        resolution_j: 1e-3,
        wrap_range_raw: None,
        sensor: SensorKind::EnergyCounter,
        update_interval_ns: None,
        covers,
    };
    let stall = Arc::new(AtomicBool::new(false));
    let meter = Flaky {
        specs: vec![
            spec(Domain::Psys, Coverage::Platform),
            spec(Domain::Gpu { index: 3 }, Coverage::Gpu { index: 3 }),
        ],
        reads: 0,
        stall: stall.clone(),
    };
    let workers = [
        worker(0, Arch::Cpu, 0, None),
        worker(1, Arch::Gpu, 0, Some(3)),
    ];
    let (sink, trace) = TraceSink::memory();
    let sampler = Sampler::start(vec![Box::new(meter)], &workers, sink, period(2)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    stall.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(40));
    let stats = sampler.stop().unwrap();

    let d = domains(&trace);
    assert_eq!(d[0].workers, vec![0, 1]);
    assert_eq!(d[1].workers, vec![1]);
    assert!(stats.overruns >= 2, "{stats:?}");
    assert_eq!(stats.failures.len(), 1);
    assert!(stats.failures[0].first_error.contains("GPU is lost"));
    assert_eq!(stats.read_errors, stats.reads - 2);
    let s = trace.samples();
    let psys: Vec<&EnergySample> = s.iter().filter(|x| x.domain == d[0].id).collect();
    assert_eq!(psys.len() as u64, stats.reads);
    // Readings are stamped when taken: the stalled ones are further apart than the period.
    let max_gap = psys
        .windows(2)
        .map(|w| w[1].t.as_ns() - w[0].t.as_ns())
        .max()
        .unwrap();
    assert!(max_gap >= 12_000_000, "{max_gap}");
}

#[test]
fn out_of_range_periods_are_refused() {
    let (sink, _trace) = TraceSink::memory();
    let config = SamplerConfig {
        period: Duration::from_micros(100),
        ..SamplerConfig::default()
    };
    let e = Sampler::start(Vec::new(), &[], sink, config).unwrap_err();
    assert!(matches!(e, EnergyError::InvalidPeriod { .. }), "{e}");
}
