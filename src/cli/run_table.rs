//! What `taskwatt run` prints: its figures as JSON and as the terminal table, and the
//! helpers `run --platform` and `compare` share with it.

use std::path::PathBuf;

use serde::Serialize;
use taskwatt::apps::{App, AppRun};
use taskwatt::energy::SamplerStats;
use taskwatt::session::{MeasuredRun, SessionError};
use taskwatt::traces::WorkerInfo;

use super::args::RunArgs;
use super::signals::{Interrupted, SignalWatch};

#[derive(Serialize)]
pub(crate) struct RunOutput<'a> {
    app: &'a AppRun,
    gflops: f64,
    makespan_s: f64,
    policy: &'a str,
    workers: &'a [WorkerInfo],
    /// The workers reserved for type calibration (last in `workers`): no graph task ran
    /// on them.
    reserved_workers: &'a [u32],
    /// What drives the GPU workers (`emulated` or `cuda`; null when there are none).
    gpu_backend: Option<taskwatt::runtime::GpuBackend>,
    kernels: &'static str,
    stats: StatsJson,
    pub(crate) trace: TraceOut,
    pub(crate) energy: Option<EnergyOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    type_calibration_auto: Option<&'a taskwatt::session::AutoCalibrationReport>,
}

#[derive(Serialize)]
struct StatsJson {
    submitted: u64,
    executed: u64,
    failed: u64,
    cancelled: u64,
    /// Copies of data between memory nodes (with GPUs).
    transfers: u64,
    transferred_bytes: u64,
    /// Of those, copies made ahead of their task by a GPU's prefetcher.
    prefetches: u64,
    /// Device copies dropped under a GPU's memory limit, and those written back first.
    evictions: u64,
    written_back: u64,
    /// The most bytes of copies one GPU held at once.
    device_peak_bytes: u64,
}

#[derive(Serialize)]
pub(crate) struct TraceOut {
    pub(crate) path: Option<PathBuf>,
    bytes: u64,
    tasks: u64,
    samples: u64,
}

#[derive(Serialize)]
pub(crate) struct EnergyOut<'a> {
    meter: String,
    /// The CPU frequency's source (`cpu-frequency`'s description), or why there is none.
    frequency: String,
    simulated: bool,
    period_ms: f64,
    sampler: SamplerJson,
    backends: &'a [taskwatt::energy::BackendStatus],
}

#[derive(Serialize)]
struct SamplerJson {
    samples: u64,
    reads: u64,
    overruns: u64,
    read_errors: u64,
    /// Readings the workers took between their tasks (energy/src/sampler.rs).
    worker_readings: u64,
    /// Deadlines left unread while no task ran (the thread then reads every 8 ms).
    idle_skipped: u64,
    /// The sampling's CPU time in % of one core: the thread's and the workers' readings.
    cpu_percent: Option<f64>,
}

impl From<&SamplerStats> for SamplerJson {
    fn from(s: &SamplerStats) -> Self {
        SamplerJson {
            samples: s.samples,
            reads: s.reads,
            overruns: s.overruns,
            read_errors: s.read_errors,
            worker_readings: s.worker_readings,
            idle_skipped: s.idle_skipped,
            cpu_percent: s.cpu_percent_of_one_core(),
        }
    }
}

pub(crate) fn one_gamma(g: &[f64]) -> Result<Option<f64>, String> {
    match g {
        [] => Ok(None),
        [x] => Ok(Some(*x)),
        _ => Err("run takes one --gamma; `taskwatt compare --gamma a,b,c` sweeps several".into()),
    }
}

/// The error of a run stopped by a signal, naming what the trace keeps.
pub(crate) fn interrupted(watch: &SignalWatch, e: &SessionError, kept: bool) -> Interrupted {
    let signal = watch.received().unwrap_or(signal_hook::consts::SIGINT);
    let message = if kept {
        format!("{e}; `taskwatt report` reads it")
    } else {
        "the run was interrupted (no --trace was given, so nothing was kept)".to_string()
    };
    Interrupted { signal, message }
}

pub(crate) fn output<'a>(a: &RunArgs, run: &'a MeasuredRun) -> RunOutput<'a> {
    RunOutput {
        app: &run.app,
        gflops: run.app.gflops(),
        makespan_s: run.app.makespan.as_secs_f64(),
        policy: &run.policy,
        workers: &run.workers,
        reserved_workers: &run.reserved_workers,
        gpu_backend: run
            .workers
            .iter()
            .any(|w| w.device.is_some())
            .then(|| a.app.gpu_backend.into()),
        kernels: taskwatt::kernels::backend(),
        type_calibration_auto: run.auto_calibration.as_ref(),
        stats: StatsJson {
            submitted: run.stats.submitted,
            executed: run.stats.executed,
            failed: run.stats.failed,
            cancelled: run.stats.cancelled,
            transfers: run.stats.transfers,
            transferred_bytes: run.stats.transferred_bytes,
            prefetches: run.stats.prefetches,
            evictions: run.stats.evictions,
            written_back: run.stats.written_back,
            device_peak_bytes: run.stats.device_peak_bytes,
        },
        trace: match &run.trace {
            Ok(t) => TraceOut {
                path: a.trace.clone(),
                bytes: t.bytes,
                tasks: t.tasks,
                samples: t.samples,
            },
            Err(_) => TraceOut {
                path: None,
                bytes: 0,
                tasks: 0,
                samples: 0,
            },
        },
        energy: run.sampler.as_ref().map(|s| EnergyOut {
            meter: run
                .meters
                .iter()
                .filter(|b| b.used && b.backend != FREQUENCY_STATUS)
                .map(|b| b.backend.clone())
                .collect::<Vec<_>>()
                .join("+"),
            frequency: run
                .meters
                .iter()
                .find(|b| b.backend == FREQUENCY_STATUS)
                .map_or_else(String::new, |b| {
                    if b.used {
                        b.description.clone().unwrap_or_default()
                    } else {
                        format!("not sampled: {}", b.reason.clone().unwrap_or_default())
                    }
                }),
            simulated: run.simulated,
            period_ms: a.energy.period.as_secs_f64() * 1e3,
            sampler: s.into(),
            backends: &run.meters,
        }),
    }
}

/// The status row `detect` gives the CPU frequency's source (not a meter).
const FREQUENCY_STATUS: &str = "cpu-frequency";

pub(crate) fn print_table(o: &RunOutput<'_>) {
    let c = &o.app.config;
    let shape = match o.app.app {
        App::Stencil => format!("n={} tile={} steps={}", c.n, c.tile, c.steps),
        _ if c.tile > 0 && !c.n.is_multiple_of(c.tile) => format!(
            "n={} tile={} (padded to {}: its work is in the makespan, not in the GFlop/s)",
            c.n,
            c.tile,
            c.n.div_ceil(c.tile) * c.tile
        ),
        _ => format!("n={} tile={}", c.n, c.tile),
    };
    let gpus = o.workers.iter().filter(|w| w.device.is_some()).count();
    let reserved = o.reserved_workers.len();
    let cpus = o.workers.len() - gpus - reserved;
    let mut workers = if gpus == 0 {
        format!("{cpus} worker{}", if cpus == 1 { "" } else { "s" })
    } else {
        format!(
            "{cpus} CPU workers + {gpus} {}",
            match o.gpu_backend {
                Some(taskwatt::runtime::GpuBackend::Cuda) => "CUDA GPU(s)",
                _ => "emulated GPU(s) (CPU kernels on copies of the data)",
            }
        )
    };
    if reserved > 0 {
        workers += &format!(
            " (+{reserved} reserved on the free cores for type calibration: no graph task \
             ran there)"
        );
    }
    println!(
        "{} {shape}: {workers}, policy {}, kernels {}",
        o.app.app.name(),
        o.policy,
        o.kernels
    );
    // Milliseconds below a second: a small run's "0.000 s" said nothing.
    if o.makespan_s < 1.0 {
        println!("  {:<10} {:.3} ms", "makespan", o.makespan_s * 1e3);
    } else {
        println!("  {:<10} {:.3} s", "makespan", o.makespan_s);
    }
    println!("  {:<10} {}", "tasks", o.app.tasks);
    if gpus > 0 {
        println!(
            "  {:<10} {} copies between memory nodes, {:.1} MiB",
            "transfers",
            o.stats.transfers,
            o.stats.transferred_bytes as f64 / (1u64 << 20) as f64
        );
        println!(
            "  {:<10} {} copies made ahead of their task; {} evictions, {} written back",
            "", o.stats.prefetches, o.stats.evictions, o.stats.written_back
        );
    }
    println!("  {:<10} {:.2}", "GFlop/s", o.gflops);
    match &o.app.check {
        Some(ch) => println!(
            "  {:<10} {} = {:.2e} <= {:.2e}: {}",
            "check",
            ch.what,
            ch.value,
            ch.tolerance,
            if ch.passed { "ok" } else { "FAILED" }
        ),
        None => println!("  {:<10} skipped", "check"),
    }
    if let Some(e) = &o.energy {
        let idle = if e.sampler.idle_skipped > 0 {
            format!(
                "; {} deadline(s) left unread while no task ran",
                e.sampler.idle_skipped
            )
        } else {
            String::new()
        };
        let cost = e
            .sampler
            .cpu_percent
            .map_or(String::new(), |p| format!(", {p:.2} % of a core"));
        println!(
            "  {:<10} {}{} every {} ms: {} samples ({} of {} readings taken by the workers \
             between tasks{idle}), {} read errors{cost}",
            "energy",
            e.meter,
            if e.simulated { " (SIMULATED)" } else { "" },
            e.period_ms,
            e.sampler.samples,
            e.sampler.worker_readings,
            e.sampler.reads,
            e.sampler.read_errors
        );
        // A few are expected where the workers take the readings: an idle spell's first
        // deadlines (energy/src/sampler.rs). Worth a line from 1 % of the deadlines on.
        if e.sampler.overruns * 100 > e.sampler.reads + e.sampler.overruns {
            println!(
                "  {:<10} {} reading(s) skipped: none was taken at their deadline (the sampler \
                 thread woke late on a loaded machine or with a period too short for it, or \
                 the workers that were taking the readings went idle); each reading keeps its \
                 own time, so the attribution is not biased, only given fewer intervals",
                "", e.sampler.overruns
            );
        }
        if !e.frequency.is_empty() {
            println!("  {:<10} {}", "frequency", e.frequency);
        }
        let real: Vec<&str> = e
            .backends
            .iter()
            .filter(|b| b.used && !b.simulated && b.backend != FREQUENCY_STATUS)
            .map(|b| b.backend.as_str())
            .collect();
        if e.simulated && real.is_empty() {
            println!(
                "  {:<10} no real energy sensor was used: `taskwatt meters` says why",
                ""
            );
        } else if e.simulated {
            println!(
                "  {:<10} measured by {}; the other domains are simulated (`taskwatt meters` \
                 says why)",
                "",
                real.join(" and ")
            );
        }
    } else {
        println!("  {:<10} not sampled", "energy");
    }
    if let Some(auto) = o.type_calibration_auto {
        println!(
            "  {:<10} auto, {:.2} s: {}; {}",
            "calibrated",
            auto.spent_s,
            auto.rounds_text()
                .unwrap_or_else(|| "nothing needed".to_owned()),
            if auto.still_flagged.is_empty() {
                "every type precise".to_owned()
            } else {
                // Not "imprecise": the report may show them as measurements, within its
                // threshold; calibration aims tighter.
                format!(
                    "not within the calibration's target ({} times the report's threshold) \
                     at its last fit, of the trace up to then: {} (the report, on the whole \
                     trace, may show it within)",
                    taskwatt::session::CALIBRATION_TARGET,
                    auto.still_flagged.join(", ")
                )
            }
        );
        if let Some(e) = &auto.error {
            println!("  {:<10} stopped: {e}", "");
        }
    }
    if let Some(p) = &o.trace.path {
        println!(
            "  {:<10} {} ({} tasks, {} energy samples, {:.1} KiB)",
            "trace",
            p.display(),
            o.trace.tasks,
            o.trace.samples,
            o.trace.bytes as f64 / 1024.0
        );
    }
}
