//! The workers take the sampler's readings between their tasks (`SamplerTap`): on a fake
//! powercap tree, a thread that ends a "task" every 100 µs stands for a worker. The readings
//! move to it, the sampler's thread wakes less, an idle spell is still sampled, nothing
//! is read after the stop, and a meter that must stay on the thread (NVML) stays there.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use taskwatt_energy::{
    GpuArchitecture, Meter, NvmlMeter, PowercapMeter, Sampler, SamplerConfig, SamplerTap,
    ScriptedGpu, TAP_STREAK,
};
use taskwatt_traces::{
    Arch, Clock, CodeletId, ExecutionObserver, Timestamp, TraceSink, WorkerId, WorkerInfo,
};

fn zone(dir: &Path, name: &str, energy: u64) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("name"), format!("{name}\n")).unwrap();
    fs::write(dir.join("energy_uj"), format!("{energy}\n")).unwrap();
    fs::write(dir.join("max_energy_range_uj"), "262143328850\n").unwrap();
}

/// One test at a time: each spins a core, and a worker kept from its core misses the
/// readings it stands for.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Counts the events handed on by the tap.
#[derive(Default)]
struct Counting {
    started: AtomicU64,
    ended: AtomicU64,
}

impl ExecutionObserver for Counting {
    fn task_started(&self, _: WorkerId, _: CodeletId, _: Arch, _: Timestamp) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }
    fn task_ended(&self, _: WorkerId, _: CodeletId, _: Arch, _: Timestamp) {
        self.ended.fetch_add(1, Ordering::Relaxed);
    }
}

/// Ends a task every `every` for `for_`, as a worker would report it.
fn tasks(tap: &SamplerTap, every: Duration, for_: Duration) -> u64 {
    let until = Instant::now() + for_;
    let mut n = 0;
    while Instant::now() < until {
        tap.task_started(0, 0, Arch::Cpu, Clock::now());
        let end = Instant::now() + every;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        tap.task_ended(0, 0, Arch::Cpu, Clock::now());
        n += 1;
    }
    n
}

/// A sampler at 1 ms on a fake powercap package in `dir`, tapped by a tap of its own.
fn powercap_at_1ms(
    dir: &Path,
    workers: &[WorkerInfo],
) -> (Sampler, Arc<SamplerTap>, taskwatt_traces::MemoryTrace) {
    zone(&dir.join("intel-rapl:0"), "package-0", 1_000);
    let meter = PowercapMeter::open(dir).unwrap();
    let (sink, trace) = TraceSink::memory();
    let tap = SamplerTap::new(None);
    let sampler = Sampler::start_tapped(
        vec![Box::new(meter) as Box<dyn Meter>],
        Vec::new(),
        workers,
        sink,
        SamplerConfig::with_period(Duration::from_millis(1)).unwrap(),
        Some(&tap),
    )
    .unwrap();
    (sampler, tap, trace)
}

#[test]
fn workers_take_the_readings_and_an_idle_spell_is_still_sampled() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    zone(&t.path().join("intel-rapl:0"), "package-0", 1_000);
    let meter = PowercapMeter::open(t.path()).unwrap();
    let workers = [WorkerInfo::cpu(0, 0)];
    let (sink, trace) = TraceSink::memory();
    let inner = Arc::new(Counting::default());
    let tap = SamplerTap::new(Some(inner.clone() as Arc<dyn ExecutionObserver>));
    let period = Duration::from_millis(2);
    let sampler = Sampler::start_tapped(
        vec![Box::new(meter) as Box<dyn Meter>],
        Vec::new(),
        &workers,
        sink,
        SamplerConfig::with_period(period).unwrap(),
        Some(&tap),
    )
    .unwrap();
    assert!(tap.is_attached());
    let ran = tasks(&tap, Duration::from_micros(100), Duration::from_millis(300));
    let idle_from = Clock::now();
    std::thread::sleep(Duration::from_millis(150));
    let stats = sampler.stop().unwrap();

    // Every event reached the observer behind the tap.
    assert_eq!(inner.started.load(Ordering::Relaxed), ran);
    assert_eq!(inner.ended.load(Ordering::Relaxed), ran);
    // The "worker" took readings; it can miss some on a loaded machine, never all.
    assert!(stats.worker_readings >= 20, "{stats:?}");
    assert!(stats.worker_read_ns > 0, "{stats:?}");
    // Each deadline was read or counted as skipped (first and last readings are extra).
    let deadlines = stats.wall_ns / period.as_nanos() as u64;
    let consumed = stats.reads - 2 + stats.overruns + stats.idle_skipped;
    assert!(
        consumed.abs_diff(deadlines) <= 3,
        "{deadlines} deadlines, {stats:?}"
    );
    // While the worker took them on time the thread slept longer than a period (unless this
    // machine kept the worker from a streak of TAP_STREAK on-time readings).
    if stats.worker_readings > 4 * TAP_STREAK {
        assert!(stats.thread_wakeups < stats.reads, "{stats:?}");
    }
    let s = trace.samples();
    assert_eq!(s.len() as u64, stats.samples);
    assert!(
        s.windows(2).all(|w| w[0].t < w[1].t),
        "readings out of order"
    );
    // The idle spell (150 ms, no task ending) was sampled by the thread: at least one
    // reading per 8 ms (TAP_SLEEP_MAX) once it noticed, then every period.
    let idle = s.iter().filter(|x| x.t > idle_from).count();
    assert!(idle >= 10, "{idle} readings in the idle spell, {stats:?}");
    let gaps: Vec<u64> = s
        .windows(2)
        .filter(|w| w[0].t > idle_from)
        .map(|w| w[1].t.as_ns() - w[0].t.as_ns())
        .collect();
    assert!(
        gaps.iter().all(|&g| g < 40_000_000),
        "an idle gap of 40 ms or more (the thread sleeps 8 ms at most): {gaps:?}"
    );
}

#[test]
fn while_no_task_runs_the_thread_wakes_less_and_the_first_task_to_start_reads() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The worker reads only if no other thread is reading (it never waits): on a loaded
    // machine the sampler's thread can be mid-reading, descheduled, when the task starts
    // (seen once in a full test run beside two builds). The property must hold in one of
    // three tries; the figures that do not race are checked in every one.
    let mut missed = Vec::new();
    for _ in 0..3 {
        match idle_spell_then_one_task() {
            Ok(()) => return,
            Err(e) => missed.push(e),
        }
    }
    panic!("in none of three tries: {missed:#?}");
}

/// 200 ms with no task, then one task: the thread's wake-ups and the task's reading.
fn idle_spell_then_one_task() -> Result<(), String> {
    let t = tempfile::tempdir().unwrap();
    let (sampler, tap, trace) =
        powercap_at_1ms(t.path(), &[WorkerInfo::cpu(0, 0), WorkerInfo::cpu(1, 1)]);
    // 200 ms with no task: 200 deadlines.
    std::thread::sleep(Duration::from_millis(200));
    // Then one task on worker 1, started between two of the thread's wake-ups.
    let start = Clock::now();
    tap.task_started(1, 0, Arch::Cpu, start);
    let busy_until = Instant::now() + Duration::from_micros(300);
    while Instant::now() < busy_until {
        std::hint::spin_loop();
    }
    let end = Clock::now();
    tap.task_ended(1, 0, Arch::Cpu, end);
    let stats = sampler.stop().unwrap();

    // The thread woke about once per TAP_SLEEP_MAX (8 ms), not every period: 25 to 30
    // times on a quiet machine; a loaded one wakes it late, so fewer.
    assert!(stats.thread_wakeups <= 60, "{stats:?}");
    // The deadlines it slept through are counted apart from overruns.
    assert!(stats.idle_skipped >= 120, "{stats:?}");
    assert!(stats.overruns <= 10, "{stats:?}");
    // No interval of the idle spell is longer than the thread's longest sleep and a late
    // wake-up.
    let s = trace.samples();
    let gaps: Vec<u64> = s
        .windows(2)
        .map(|w| w[1].t.as_ns() - w[0].t.as_ns())
        .collect();
    assert!(gaps.iter().all(|&g| g < 40_000_000), "{gaps:?}");
    // The task's start read the meters: the idle spell's interval ends where the task
    // begins, not up to 8 ms later.
    if stats.worker_readings == 0 {
        return Err(format!("the task read nothing: {stats:?}"));
    }
    if !s.iter().any(|x| x.t >= start && x.t <= end) {
        return Err(format!(
            "no reading at the task's start ({start:?} to {end:?})"
        ));
    }
    Ok(())
}

#[test]
fn nothing_is_read_through_the_tap_after_the_stop() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t = tempfile::tempdir().unwrap();
    let (sampler, tap, trace) = powercap_at_1ms(t.path(), &[WorkerInfo::cpu(0, 0)]);
    let stats = sampler.stop().unwrap();
    let before = trace.samples().len();
    assert_eq!(before as u64, stats.samples);
    // A worker still running after the stop: its task ends far past every deadline.
    std::thread::sleep(Duration::from_millis(5));
    tap.task_ended(0, 0, Arch::Cpu, Clock::now());
    assert_eq!(trace.samples().len(), before);
}

#[test]
fn a_meter_that_must_stay_on_the_thread_is_never_read_by_workers() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = ScriptedGpu::with_energy(0, "NVIDIA H100", GpuArchitecture::Hopper, &[1_000]);
    let meter = NvmlMeter::from_devices(vec![Box::new(gpu)]).unwrap();
    assert!(!meter.readable_from_workers());
    let (sink, _trace) = TraceSink::memory();
    let tap = SamplerTap::new(None);
    let sampler = Sampler::start_tapped(
        vec![Box::new(meter) as Box<dyn Meter>],
        Vec::new(),
        &[WorkerInfo::gpu(0, 0)],
        sink,
        SamplerConfig::with_period(Duration::from_millis(1)).unwrap(),
        Some(&tap),
    )
    .unwrap();
    assert!(!tap.is_attached());
    tasks(&tap, Duration::from_micros(100), Duration::from_millis(30));
    let stats = sampler.stop().unwrap();
    assert_eq!(stats.worker_readings, 0, "{stats:?}");
    assert!(stats.reads >= 5, "{stats:?}");
}
