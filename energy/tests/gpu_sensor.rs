//! GPU attribution through NVML-like sensors, in virtual time (issue 19's bench): one
//! GPU worker runs three codelets of 100 µs to 10 ms; the simulated GPU domain reports
//! (a) an energy counter refreshed every 50 ms, (b) a counter refreshed every 100 ms that
//! sees only the last quarter of each update, (c) power readings averaged over 1 s. The meter is read every
//! 10 ms, as the sampler does, and each type's power is attributed with the sensor-aware
//! model and with plain clipping.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use taskwatt_energy::attribution::{attribute, AttributionOptions, SensorModel, TraceParts};
use taskwatt_energy::{Accumulator, ManualClock, Meter, RawReading, SimConfig, SimMeter};
use taskwatt_traces::{
    Arch, CodeletInfo, DomainInfo, EnergySample, ExecutionObserver, TaskRecord, TaskStatus,
    Timestamp, WorkerInfo,
};

const MS: u64 = 1_000_000;
const T0: u64 = 1_000 * MS;
/// Extra GPU power of the three codelets, W.
const POWERS: [(&str, f64); 3] = [("small", 90.0), ("medium", 150.0), ("large", 240.0)];

fn gpu_worker() -> WorkerInfo {
    WorkerInfo {
        id: 0,
        arch: Arch::Gpu,
        cpu: None,
        core: None,
        package: 0,
        numa: None,
        device: Some(0),
    }
}

fn config(sensor: &str, update_ms: u64, sampled_ms: u64) -> SimConfig {
    let mut c = SimConfig::default();
    c.gpu.enabled = true;
    c.gpu.base_w = 70.0;
    c.gpu.noise_sigma_w = 3.0;
    c.gpu.update_interval_ms = update_ms;
    c.gpu.power_window_ms = 1000;
    c.gpu.sampled_ms = sampled_ms;
    c.gpu.sensor = serde_json::from_value(serde_json::json!(sensor)).unwrap();
    let mut text = String::new();
    for (name, w) in POWERS {
        text.push_str(&format!(
            "{name} = {{ gpu = {{ package_w = 0.0, dram_w = 0.0, gpu_w = {w} }} }}\n"
        ));
    }
    c.codelets = toml::from_str(&text).unwrap();
    c
}

/// Runs the tasks in virtual time, reading the meter every 10 ms; returns the GPU
/// domain, its samples and the task records.
fn run(c: SimConfig, seed: u64) -> (DomainInfo, Vec<EnergySample>, Vec<TaskRecord>) {
    let clock = Arc::new(ManualClock::new(Timestamp(T0)));
    let mut meter = SimMeter::with_clock(c, &[gpu_worker()], clock.clone()).unwrap();
    let obs = meter.observer();
    for (id, (name, _)) in POWERS.iter().enumerate() {
        obs.codelet_registered(&CodeletInfo {
            id: id as u32,
            name: (*name).into(),
            archs: vec![Arch::Gpu],
        });
    }
    let gpu = meter
        .domains()
        .iter()
        .position(|d| matches!(d.domain, taskwatt_traces::Domain::Gpu { .. }))
        .unwrap();
    let spec = meter.domains()[gpu].clone();
    let info = DomainInfo {
        id: 0,
        meter: 0,
        domain: spec.domain,
        name: spec.name.clone(),
        unit: spec.unit.clone(),
        resolution_j: spec.resolution_j,
        wrap_range_j: None,
        update_interval_ns: spec.update_interval_ns,
        sensor: spec.sensor,
        workers: vec![0],
    };
    let mut acc = Accumulator::for_domain(&spec);
    let mut reads: Vec<taskwatt_energy::DomainRead> = (0..meter.domains().len())
        .map(|_| Ok(RawReading::Counter(0)))
        .collect();
    let mut samples = Vec::new();
    let mut next_read = T0;
    let mut read_until = |t: u64, meter: &mut SimMeter, samples: &mut Vec<EnergySample>| {
        while next_read <= t {
            clock.set(Timestamp(next_read));
            meter.read(&mut reads);
            let at = meter.value_time(gpu).unwrap_or(Timestamp(next_read));
            let r = std::mem::replace(&mut reads[gpu], Ok(RawReading::Counter(0))).unwrap();
            let e = acc.update(at, r);
            samples.push(EnergySample {
                domain: 0,
                t: at,
                wall_unix_ns: 0,
                energy_j: e,
                raw: f64::NAN,
            });
            next_read += 10 * MS;
        }
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tasks = Vec::new();
    let mut t = T0 + 2_000 * MS; // 2 s idle first: the base
    let end = t + 120_000 * MS;
    while t < end {
        // Phases of one type, mixed with idle gaps, so that the types vary apart.
        let c = rng.random_range(0..3usize);
        let phase_end = t + rng.random_range(200..1500) * MS;
        while t < phase_end {
            let dur = match c {
                0 => rng.random_range(100_000..1_000_000),
                1 => rng.random_range(1_000_000..4_000_000),
                _ => rng.random_range(3_000_000..10_000_000),
            };
            let gap = rng.random_range(0..dur);
            let (s, e) = (t + gap, t + gap + dur);
            read_until(s, &mut meter, &mut samples);
            clock.set(Timestamp(s));
            obs.task_started(0, c as u32, Arch::Gpu, Timestamp(s));
            read_until(e, &mut meter, &mut samples);
            clock.set(Timestamp(e));
            obs.task_ended(0, c as u32, Arch::Gpu, Timestamp(e));
            tasks.push(TaskRecord {
                id: tasks.len() as u64,
                codelet: c as u32,
                arch: Arch::Gpu,
                worker: 0,
                status: TaskStatus::Ok,
                priority: 0,
                footprint: 0,
                submit: Timestamp(s),
                ready: Timestamp(s),
                start: Timestamp(s),
                end: Timestamp(e),
                preds_start: 0,
                preds_len: 0,
            });
            t = e;
        }
        t += rng.random_range(0..800) * MS;
    }
    read_until(t + 3_000 * MS, &mut meter, &mut samples);
    (info, samples, tasks)
}

/// Worst relative error of the three types' powers, %, under `model`.
fn worst_error(
    info: &DomainInfo,
    samples: &[EnergySample],
    tasks: &[TaskRecord],
    model: SensorModel,
) -> f64 {
    let codelets: Vec<CodeletInfo> = POWERS
        .iter()
        .enumerate()
        .map(|(id, (name, _))| CodeletInfo {
            id: id as u32,
            name: (*name).into(),
            archs: vec![Arch::Gpu],
        })
        .collect();
    let domains = [info.clone()];
    let parts = TraceParts::new(&domains, samples, &codelets);
    let opts = AttributionOptions {
        sensor_model: model,
        ..AttributionOptions::default()
    };
    let a = attribute(&parts, tasks.iter(), &opts).unwrap();
    // Tasks of 0.1-10 ms fit inside 50-100 ms intervals, whatever the sensor: no warning
    // that they are longer than the intervals.
    let text = serde_json::to_string(&a.report).unwrap();
    assert!(
        !text.contains("longer than the intervals"),
        "{model:?}: {text}"
    );
    let fit = &a.fits[0];
    let mut worst: f64 = 0.0;
    for (key, est) in fit.keys.iter().zip(&fit.types) {
        let name = key.to_string();
        let truth = POWERS
            .iter()
            .find(|(n, _)| name.starts_with(n))
            .map(|(_, w)| *w)
            .unwrap();
        let err = (est.value_w - truth).abs() / truth * 100.0;
        eprintln!(
            "  {model:?} {name}: {:.1} W (truth {truth} W, {err:.1} %)",
            est.value_w
        );
        worst = worst.max(err);
    }
    worst
}

fn check(sensor: &str, update_ms: u64, sampled_ms: u64, bar_pct: f64) {
    let (info, samples, tasks) = run(config(sensor, update_ms, sampled_ms), 7);
    eprintln!(
        "{sensor}, sampled {sampled_ms} ms: {:?}, {} tasks",
        info.sensor,
        tasks.len()
    );
    let aware = worst_error(&info, &samples, &tasks, SensorModel::Aware);
    let clip = worst_error(&info, &samples, &tasks, SensorModel::Clip);
    eprintln!("  worst error: sensor-aware {aware:.2} %, clipping {clip:.2} %");
    assert!(aware <= bar_pct, "sensor-aware {aware:.2} % > {bar_pct} %");
    assert!(
        clip > aware,
        "clipping {clip:.2} % <= sensor-aware {aware:.2} %"
    );
}

#[test]
fn an_energy_counter_refreshed_every_50_ms() {
    let (info, samples, tasks) = run(config("energy", 50, 0), 7);
    let aware = worst_error(&info, &samples, &tasks, SensorModel::Aware);
    assert!(aware <= 5.0, "{aware}");
}

#[test]
fn a_counter_that_sees_a_quarter_of_the_time() {
    check("energy", 100, 25, 10.0);
}

#[test]
fn power_readings_averaged_over_one_second() {
    check("power", 50, 0, 5.0);
}
