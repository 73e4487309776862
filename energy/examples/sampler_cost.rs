//! What the energy sampler costs: the simulated meter read at 1 kHz while two workers are busy.
//!
//! ```text
//! worker 0  ──[t]─[t]─[t]─[t]─ ...  50 us tasks back to back, each start/end reported
//! worker 1  ──[t]─[t]─[t]─[t]─ ...  to the SimObserver, as the runtime does
//! sampler   ──r──r──r──r──r── ...   reads the sim meter every 1 ms into a memory sink
//! ```
//!
//! Prints the sampling's CPU time in % of one core (target: at most 1 %): the sampler
//! thread's and, with `tap` (the default, as `taskwatt run` samples), the time the workers
//! spent taking readings between their tasks through a [`SamplerTap`]; its reads and
//! overruns, and the observer's cost per task (start + end) measured against the same loop
//! without observer calls, in the same process. `thread` keeps every reading on the
//! sampler's thread (as before the tap, and as for NVML).
//!
//! `cargo run --release -p taskwatt-energy --example sampler_cost [seconds] [busy workers]
//! [period ms] [tap|thread]` (defaults: 5 s, 2 workers, 1 ms, tap).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use taskwatt_energy::{
    Meter, Sampler, SamplerConfig, SamplerTap, SimConfig, SimMeter, SimObserver,
};
use taskwatt_traces::{Arch, Chunk, Clock, CodeletInfo, ExecutionObserver, TraceSink, WorkerInfo};

fn worker(id: u32) -> WorkerInfo {
    WorkerInfo::cpu(id, 0)
}

/// Spins for about `ns` nanoseconds of trace-clock time.
fn spin(ns: u64) {
    let end = Clock::now().as_ns() + ns;
    while Clock::now().as_ns() < end {
        std::hint::spin_loop();
    }
}

/// Runs tasks of `task_ns` back to back until `stop`; returns the tasks run.
fn busy_worker(
    id: u32,
    obs: Option<Arc<dyn ExecutionObserver>>,
    stop: Arc<AtomicBool>,
    task_ns: u64,
) -> u64 {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let c = (n % 4) as u32;
        if let Some(o) = &obs {
            o.task_started(id, c, Arch::Cpu, Clock::now());
        }
        spin(task_ns);
        if let Some(o) = &obs {
            o.task_ended(id, c, Arch::Cpu, Clock::now());
        }
        n += 1;
    }
    n
}

/// ns per (start + end) observer pair, against the same loop without observer.
fn observer_cost(obs: &Arc<SimObserver>) -> (f64, f64) {
    let n = 2_000_000u64;
    let time = |with: bool| {
        let t = Instant::now();
        for k in 0..n {
            let now = Clock::now();
            if with {
                obs.task_started(0, (k % 4) as u32, Arch::Cpu, now);
                obs.task_ended(0, (k % 4) as u32, Arch::Cpu, Clock::now());
            } else {
                std::hint::black_box(now);
                std::hint::black_box(Clock::now());
            }
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let base = time(false);
    let with = time(true);
    (base, with)
}

/// CPU time of the calling thread (Linux), in ns.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Baseline: a thread that only sleeps to 1 kHz deadlines the way the sampler does
/// (parked until the deadline, a stop flag beside it) and reads nothing. Returns
/// (CPU ns per wake-up, wake-ups).
fn wakeup_baseline(secs: f64) -> (Option<f64>, u64) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let h = std::thread::spawn(move || {
        let cpu0 = thread_cpu_ns();
        let period = Duration::from_millis(1);
        let mut next = Instant::now() + period;
        let mut n = 0u64;
        while !stopping.load(Ordering::Acquire) {
            let now = Instant::now();
            if now < next {
                std::thread::park_timeout(next - now);
                continue;
            }
            n += 1;
            next += period;
            while next <= now {
                next += period;
            }
        }
        let cpu = match (cpu0, thread_cpu_ns()) {
            (Some(a), Some(b)) => Some((b - a) as f64 / n.max(1) as f64),
            _ => None,
        };
        (cpu, n)
    });
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Release);
    h.thread().unpark();
    h.join().unwrap()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(5.0);
    let busy: u32 = std::env::args()
        .nth(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(2);
    let period_ms: u64 = std::env::args()
        .nth(3)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1);
    let tapped = match std::env::args().nth(4).as_deref() {
        None | Some("tap") => true,
        Some("thread") => false,
        Some(other) => return Err(format!("mode `{other}`: use tap or thread").into()),
    };
    let workers = [worker(0), worker(1)];
    let meter = SimMeter::new(SimConfig::default(), &workers)?;
    let obs = meter.observer();
    for (id, name) in ["gemm", "potrf", "trsm", "syrk"].iter().enumerate() {
        obs.codelet_registered(&CodeletInfo {
            id: id as u32,
            name: (*name).into(),
            archs: vec![Arch::Cpu],
        });
    }

    let (sink, trace) = TraceSink::memory();
    let config = SamplerConfig::with_period(Duration::from_millis(period_ms))?;
    let sim: Arc<dyn ExecutionObserver> = obs.clone();
    let tap = SamplerTap::new(Some(sim.clone()));
    let sampler = Sampler::start_tapped(
        vec![Box::new(meter) as Box<dyn Meter>],
        Vec::new(),
        &workers,
        sink,
        config,
        tapped.then_some(&*tap),
    )?;
    let seen: Arc<dyn ExecutionObserver> = if tapped { tap.clone() } else { sim };
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..busy)
        .map(|id| {
            let (obs, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || busy_worker(id, Some(obs), stop, 50_000))
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let tasks: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let stats = sampler.stop()?;
    let samples: usize = trace
        .chunks()
        .iter()
        .map(|c| match c {
            Chunk::Samples(s) => s.len(),
            _ => 0,
        })
        .sum();

    println!(
        "sampler_cost: sim meter every {period_ms} ms, {busy} busy workers, {secs} s ({}), \
         readings by {}",
        std::env::consts::ARCH,
        if tapped {
            "the workers between tasks (SamplerTap), else the thread"
        } else {
            "the sampler's thread only"
        }
    );
    println!(
        "  reads {}  samples {} (in trace: {samples})  overruns {}  left unread while idle {}  read errors {}",
        stats.reads, stats.samples, stats.overruns, stats.idle_skipped, stats.read_errors
    );
    println!("  tasks run by the workers: {tasks}");
    println!(
        "  readings by the workers: {} ({:.1} us each); sampler thread wake-ups: {}",
        stats.worker_readings,
        stats.worker_read_ns as f64 * 1e-3 / stats.worker_readings.max(1) as f64,
        stats.thread_wakeups
    );
    match stats.cpu_percent_of_one_core() {
        Some(p) => println!(
            "  sampling CPU: {:.1} ms (thread) + {:.1} ms (workers' readings) over {:.2} s \
             = {p:.3} % of one core (target <= 1 %)",
            stats.thread_cpu_ns.unwrap_or(0) as f64 * 1e-6,
            stats.worker_read_ns as f64 * 1e-6,
            stats.wall_ns as f64 * 1e-9
        ),
        None => println!("  sampler thread CPU: not measurable on this OS"),
    }
    if let Some(cpu) = stats.thread_cpu_ns {
        println!(
            "  per read: {:.1} us of sampler CPU (wake-up, read, unwrap, batch)",
            cpu as f64 * 1e-3 / stats.reads.max(1) as f64
        );
    }
    let (wake_ns, wakes) = wakeup_baseline(secs.min(2.0));
    if let (Some(w), Some(cpu)) = (wake_ns, stats.thread_cpu_ns) {
        let per_read = cpu as f64 / stats.reads.max(1) as f64;
        println!(
            "  baseline: a thread that only wakes at 1 kHz uses {:.1} us of CPU per wake-up \
             ({wakes} wake-ups): the sampler's own work is about {:.1} us per read",
            w * 1e-3,
            (per_read - w).max(0.0) * 1e-3
        );
    }
    let (base, with) = observer_cost(&obs);
    println!(
        "  observer: {:.1} ns per task (start + end) = {with:.1} ns with, {base:.1} ns without",
        with - base
    );
    Ok(())
}
