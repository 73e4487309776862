//! A measured run: a built-in app on the runtime, with the energy sampler on the best
//! available meter, all recorded into one trace.
//!
//! # Order of a measured run
//!
//! 1. Create the trace writer (the file the run streams into).
//! 2. Plan the workers, detect the meters for them (`--meter`), and hand the simulated
//!    meter's observer, if any, to the runtime; build the runtime (writes the run metadata).
//! 3. Start the sampler (writes the meter metadata and, for the simulator, its truth).
//! 4. Idle calibration, if asked: every worker parked for the given time, marked
//!    `idle-calibration` in the trace; then type calibration, if asked: each codelet of the
//!    app alone on every worker (see `apps/calibrate.rs`).
//! 5. Run the app (marked `graph`).
//! 6. Idle calibration again, after the graph.
//! 7. Shut the runtime down (flushes the workers' trace buffers), stop the sampler (last
//!    reading), finish the writer (End chunk).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use taskwatt_energy::{
    detect, BackendStatus, DetectOptions, EnergyError, MeterChoice, Sampler, SamplerConfig,
    SamplerStats,
};
use taskwatt_runtime::{Runtime, RuntimeBuilder, RuntimeError, RuntimeStats};
use taskwatt_traces::{
    Chunk, Clock, ExecutionObserver, Marker, TraceError, TraceWriter, WorkerInfo, WriteSummary,
};

use crate::apps::{run_app, App, AppConfig, AppError, AppRun};

/// Name of the markers around idle-calibration windows.
pub const IDLE_CALIBRATION: &str = "idle-calibration";
/// Name of the marker around the task graph.
pub const GRAPH: &str = "graph";

/// What to run and how to measure it.
#[derive(Clone, Debug)]
pub struct MeasuredRunOptions {
    /// The app.
    pub app: App,
    /// Its parameters.
    pub config: AppConfig,
    /// Scheduling policy (None: `TASKWATT_SCHED`, then the default).
    pub policy: Option<String>,
    /// Worker count (None: one per usable core).
    pub workers: Option<usize>,
    /// The trace file to write.
    pub trace: PathBuf,
    /// Which meter to sample.
    pub meter: MeterChoice,
    /// Where the meters live, and the simulator's configuration.
    pub detect: DetectOptions,
    /// Sampling period (None: no sampling at all).
    pub period: Option<Duration>,
    /// Idle calibration before and after the graph.
    pub idle_calibration: Option<Duration>,
    /// Type calibration before the graph: each codelet alone for this long.
    pub type_calibration: Option<Duration>,
}

/// What a measured run produced.
#[derive(Debug)]
pub struct MeasuredRun {
    /// The app's own result (makespan, GFlop/s, check).
    pub app: AppRun,
    /// The policy that ran it.
    pub policy: String,
    /// The workers.
    pub workers: Vec<WorkerInfo>,
    /// Runtime counters.
    pub stats: RuntimeStats,
    /// The trace written.
    pub trace: WriteSummary,
    /// The sampler's counters, if it ran.
    pub sampler: Option<SamplerStats>,
    /// Every meter backend and why it was or was not used.
    pub meters: Vec<BackendStatus>,
    /// Whether the energy came from the simulated meter.
    pub simulated: bool,
}

/// Errors of a measured run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The runtime could not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The app failed.
    #[error(transparent)]
    App(#[from] AppError),
    /// A meter could not be opened or read.
    #[error(transparent)]
    Energy(#[from] EnergyError),
    /// The trace could not be written.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Runs `opts.app` with the sampler on, following the module's numbered steps.
/// `builder` may configure the runtime further; `progress` is called with the runtime
/// once it exists, and what it returns is dropped when the graph is done (a progress bar).
pub fn measured_run<P>(
    opts: &MeasuredRunOptions,
    builder: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    progress: impl FnOnce(&Runtime) -> P,
) -> Result<MeasuredRun, SessionError> {
    // 1.
    let writer = TraceWriter::create(&opts.trace)?;
    let sink = writer.sink();
    // 2.
    let mut b = builder(Runtime::builder())
        .trace(sink.clone())
        .app(opts.app.name())
        .param("n", opts.config.n)
        .param("tile", opts.config.tile)
        .param("seed", opts.config.seed)
        .param("iterations", opts.config.iterations)
        .param("precision", opts.config.precision)
        .param("kernels", taskwatt_kernels::backend());
    if opts.app == App::Stencil {
        b = b.param("steps", opts.config.steps);
    }
    if let Some(w) = opts.workers {
        b = b.workers(w);
    }
    if let Some(p) = &opts.policy {
        b = b.policy(p.clone());
    }
    if let Some(p) = opts.period {
        b = b.param("period_ms", p.as_secs_f64() * 1e3);
    }
    if let Some(d) = opts.idle_calibration {
        b = b.param("idle_calibration_s", d.as_secs_f64());
    }
    if let Some(d) = opts.type_calibration {
        b = b.param("type_calibration_s", d.as_secs_f64());
    }
    let workers = b.worker_plan()?;
    let (detected, sampler_meters) = match opts.period {
        Some(_) => {
            let mut d = detect(opts.meter, &workers, &opts.detect)?;
            let meters = std::mem::take(&mut d.meters);
            (Some(d), meters)
        }
        None => (None, Vec::new()),
    };
    let simulated = detected.as_ref().is_some_and(|d| d.observer.is_some());
    if let Some(obs) = detected.as_ref().and_then(|d| d.observer.clone()) {
        b = b.observer(obs as Arc<dyn ExecutionObserver>);
    }
    let rt = b.build()?;
    let policy = rt.policy_name().to_string();
    // 3.
    let sampler = match opts.period {
        Some(period) => Some(Sampler::start(
            sampler_meters,
            &workers,
            sink.clone(),
            SamplerConfig::with_period(period)?,
        )?),
        None => None,
    };
    let calibrate = |sink: &taskwatt_traces::TraceSink| {
        if let Some(d) = opts.idle_calibration {
            let start = Clock::now();
            std::thread::sleep(d);
            sink.send(Chunk::Markers(vec![Marker {
                name: IDLE_CALIBRATION.into(),
                start,
                end: Clock::now(),
            }]));
        }
    };
    // 4.
    calibrate(&sink);
    if let Some(each) = opts.type_calibration {
        crate::apps::calibrate_types(opts.app, &rt, &opts.config, &sink, each)?;
    }
    // 5.
    let graph_start = Clock::now();
    let result = {
        let _p = progress(&rt);
        run_app(opts.app, &rt, &opts.config)
    };
    sink.send(Chunk::Markers(vec![Marker {
        name: GRAPH.into(),
        start: graph_start,
        end: Clock::now(),
    }]));
    // 6.
    if result.is_ok() {
        calibrate(&sink);
    }
    // 7.
    let stats = rt.shutdown();
    let sampler_stats = match sampler {
        Some(s) => Some(s.stop()?),
        None => None,
    };
    drop(sink);
    let trace = writer.finish()?;
    let app = result?;
    let stats = stats?;
    Ok(MeasuredRun {
        app,
        policy,
        workers,
        stats,
        trace,
        sampler: sampler_stats,
        meters: detected.map(|d| d.statuses).unwrap_or_default(),
        simulated,
    })
}
