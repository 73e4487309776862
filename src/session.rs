//! A measured run: a built-in app on the runtime, with the energy sampler on the best
//! available meter, all recorded into one trace.
//!
//! # Order of a measured run
//!
//! Steps 2, 3 and 7 are the recording's lifecycle ([`crate::recording`]), which
//! [`crate::Measure`] and the distributed ranks share.
//!
//! 1. Configure the builder: the app's parameters, type calibration's reserved workers on
//!    the cores the workers leave free.
//! 2. Start the recording: the trace writer, the worker plan, the meters detected for it
//!    (`--meter`), the simulated meter's observer, if any, handed to the runtime; the
//!    runtime built (writes the run metadata).
//! 3. The sampler started (writes the meter metadata and, for the simulator, its truth).
//! 4. Idle calibration, if asked: every worker parked for the given time, marked
//!    `idle-calibration` in the trace; then type calibration, if asked: each codelet of the
//!    app alone on every worker (see `apps/src/calibrate.rs`).
//! 5. Run the app (marked `graph`).
//! 6. Idle calibration again, after the graph.
//! 7. Shut the runtime down (flushes the workers' trace buffers), then finish the
//!    recording: stop the sampler (last reading), finish the writer (End chunk, whose
//!    outcome says whether the run completed, was interrupted or failed).
//!
//! # Interruption
//! A [`StopSignal`] (the CLI triggers it on SIGINT or SIGTERM) ends the run early without
//! losing what ran: calibration sleeps are cut short, the runtime is interrupted (workers
//! finish the task they run, start no other, and hand their trace buffers over), and step
//! 7 runs as usual with the End chunk marked `interrupted`. The trace then holds every task
//! that finished before the signal, and `taskwatt report` reads it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taskwatt_energy::{BackendStatus, DetectOptions, EnergyError, MeterChoice, SamplerStats};
use taskwatt_runtime::{InterruptHandle, Runtime, RuntimeBuilder, RuntimeError, RuntimeStats};
use taskwatt_traces::{Clock, TraceError, WorkerInfo, WriteSummary};

use crate::apps::{run_app, App, AppConfig, AppError, AppRun};
use crate::recording::{Metering, Recording, RecordingError};

pub use crate::recording::{GRAPH, IDLE_CALIBRATION};

/// Ends a measured run early (see the module docs, "Interruption"). Cloneable and
/// `Send + Sync`: the CLI keeps one clone in its signal-handling thread.
#[derive(Clone, Debug, Default)]
pub struct StopSignal(Arc<StopInner>);

#[derive(Debug, Default)]
struct StopInner {
    stopped: AtomicBool,
    /// The runtime of the run in progress, if any.
    runtime: Mutex<Option<InterruptHandle>>,
}

impl StopSignal {
    /// A signal that has not been triggered.
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Ends the run in progress (and any run started after this call) early.
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        if let Some(h) = lock(&self.0.runtime).as_ref() {
            h.interrupt();
        }
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    /// Interrupts `rt` when the signal comes (at once if it came already).
    fn attach(&self, h: InterruptHandle) {
        let mut slot = lock(&self.0.runtime);
        // Checked under the lock that `stop` takes, so a stop between the two cannot be
        // missed.
        if self.is_stopped() {
            h.interrupt();
        }
        *slot = Some(h);
    }

    fn detach(&self) {
        lock(&self.0.runtime).take();
    }

    /// Sleeps for `d`, or less if the signal comes first.
    fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.is_stopped() {
            let now = Instant::now();
            if now >= until {
                break;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(10)));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

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
    /// GPUs beside the CPU workers (see `RuntimeBuilder::gpus`).
    pub gpus: usize,
    /// Their backend.
    pub gpu_backend: taskwatt_runtime::GpuBackend,
    /// The most each GPU holds, bytes (see `RuntimeBuilder::gpu_memory_limit`).
    pub gpu_memory_limit: Option<u64>,
    /// Extra power per (codelet, architecture), W, from an energy model: what `dmdae`
    /// weighs (see [`task_powers_of`]).
    pub task_powers: TaskPowers,
    /// The policies' knobs (dmdae's weights), passed to the policy typed.
    pub policy_options: taskwatt_scheduler::PolicyOptions,
    /// Where to record the performance models (see `RuntimeBuilder::perf_models`).
    pub perf_models: Option<PathBuf>,
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
    /// Type calibration: each codelet alone for a fixed time before the graph, or only
    /// the types the fit could not pin down, after it ([`TypeCalibration::Auto`]).
    pub type_calibration: Option<TypeCalibration>,
    /// Ends the run early when triggered (default: never triggered).
    pub stop: StopSignal,
}

/// How to calibrate task types (see `apps/src/calibrate.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TypeCalibration {
    /// Each of the app's codelets alone on every worker for this long, before the graph.
    Fixed(Duration),
    /// After the graph: fit what the trace holds so far, calibrate the types whose power
    /// is not shown as a measurement, for `step` each (every type that ran, in the first
    /// round: the what-if's contention laws need each type alone and beside others), and
    /// repeat until every type is precise or `budget` is spent (`--type-calibration
    /// auto`).
    Auto {
        /// Time it may spend calibrating, in all.
        budget: Duration,
        /// Calibration of each flagged type per round.
        step: Duration,
        /// The precision threshold the types must reach, % (as `--measured-within`).
        precision_pct: f64,
    },
}

impl TypeCalibration {
    /// `auto` with its defaults: a 10 s budget, 250 ms steps, the report's 5% threshold
    /// (calibrating to a share of it, [`CALIBRATION_TARGET`]).
    pub fn auto() -> TypeCalibration {
        TypeCalibration::Auto {
            budget: Duration::from_secs(10),
            step: Duration::from_millis(250),
            precision_pct: taskwatt_energy::attribution::DEFAULT_PRECISION_PCT,
        }
    }
}

/// What adaptive type calibration did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct AutoCalibrationReport {
    /// One entry per round: the types calibrated and the time it took, s.
    pub rounds: Vec<(Vec<String>, f64)>,
    /// Time spent, fits included, s.
    pub spent_s: f64,
    /// Types not yet within the calibration's target after the last fit
    /// ([`CALIBRATION_TARGET`] times the report's threshold: the report may still show them
    /// as measurements), the budget spent or the app unable to run them alone.
    pub still_flagged: Vec<String>,
    /// Why it stopped early, if a fit failed.
    pub error: Option<String>,
    /// Types the calibration could not run: `finish_calibrating`'s closure gave no task
    /// of them (`name`), or none from some slot on (`name (from slot k of 0..n)`: it needs
    /// scratch data for every slot), so their powers are what the graph alone shows.
    pub not_run: Vec<String>,
}

impl AutoCalibrationReport {
    /// The rounds, `potrf+trsm (0.52 s), gemm (0.25 s)`; `None` without any.
    pub fn rounds_text(&self) -> Option<String> {
        (!self.rounds.is_empty()).then(|| {
            self.rounds
                .iter()
                .map(|(types, s)| format!("{} ({s:.2} s)", types.join("+")))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// What the calibration did, in a few lines: its rounds, the types it could not run,
    /// those still beyond its target, and why it stopped early.
    pub fn text(&self) -> String {
        let mut out = format!(
            "type calibration: {:.2} s: {}\n",
            self.spent_s,
            self.rounds_text()
                .unwrap_or_else(|| "no type ran alone".to_owned())
        );
        if !self.not_run.is_empty() {
            out += &format!(
                "  not run: {} (finish_calibrating's closure gave no task of them: their \
                 powers are what the graph alone shows)\n",
                self.not_run.join(", ")
            );
        }
        if !self.still_flagged.is_empty() {
            out += &format!(
                "  beyond the calibration's target ({CALIBRATION_TARGET} times the report's \
                 threshold) at its last fit: {}\n",
                self.still_flagged.join(", ")
            );
        }
        if let Some(e) = &self.error {
            out += &format!("  stopped: {e}\n");
        }
        out
    }
}

/// What a measured run produced.
#[derive(Debug)]
pub struct MeasuredRun {
    /// The app's own result (makespan, GFlop/s, check).
    pub app: AppRun,
    /// The policy that ran it.
    pub policy: String,
    /// The workers, the reserved ones last.
    pub workers: Vec<WorkerInfo>,
    /// The ids of the workers reserved for type calibration (`RuntimeBuilder::reserved_workers`:
    /// the cores the workers left free), which ran no task of the graph.
    pub reserved_workers: Vec<taskwatt_traces::WorkerId>,
    /// Runtime counters.
    pub stats: RuntimeStats,
    /// The trace written, or why it could not be (a full disk, say): the run's results
    /// stand either way.
    pub trace: Result<WriteSummary, TraceError>,
    /// The sampler's counters, if it ran.
    pub sampler: Option<SamplerStats>,
    /// Every meter backend and why it was or was not used.
    pub meters: Vec<BackendStatus>,
    /// Whether the energy came from the simulated meter.
    pub simulated: bool,
    /// What `--type-calibration auto` did, if asked.
    pub auto_calibration: Option<AutoCalibrationReport>,
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
    /// The run was stopped by its [`StopSignal`]; the trace keeps what ran.
    #[error("the run was interrupted after {} tasks ran; {}", .executed.map_or_else(|| "?".to_string(), |n| n.to_string()), match .trace {
        Ok(t) => format!("the trace {} keeps {} tasks and {} energy samples (its End chunk says `interrupted`)", t.path.display(), t.tasks, t.samples),
        Err(e) => format!("the trace could not be finished: {e}"),
    })]
    Interrupted {
        /// Tasks the runtime ran (executed or failed) before it stopped, if its shutdown
        /// could count them.
        executed: Option<u64>,
        /// The trace as finished after the interruption.
        trace: Result<WriteSummary, TraceError>,
    },
}

impl From<RecordingError> for SessionError {
    fn from(e: RecordingError) -> Self {
        match e {
            RecordingError::Runtime(e) => SessionError::Runtime(e),
            RecordingError::Energy(e) => SessionError::Energy(e),
            RecordingError::Trace(e) => SessionError::Trace(e),
        }
    }
}

/// Runs `opts.app` with the sampler on, following the module's numbered steps.
/// `builder` may configure the runtime further; `progress` is called with the runtime
/// once it exists, and what it returns is dropped when the graph is done (a progress bar).
pub fn measured_run<P>(
    opts: &MeasuredRunOptions,
    builder: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
    progress: impl FnOnce(&Runtime) -> P,
) -> Result<MeasuredRun, SessionError> {
    // 1.-3. (see `crate::recording`)
    let mut b = builder(Runtime::builder())
        .trace_accesses(true)
        .task_powers(opts.task_powers.clone())
        .policy_options(opts.policy_options)
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
    if let Some(d) = &opts.perf_models {
        b = b.perf_models(d.clone());
    }
    if opts.gpus > 0 {
        b = b
            .gpus(opts.gpus, opts.gpu_backend)
            .param("gpus", format!("{} {}", opts.gpus, opts.gpu_backend));
        if let Some(l) = opts.gpu_memory_limit {
            b = b.gpu_memory_limit(l).param("gpu_memory_limit", l);
        }
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
    match opts.type_calibration {
        Some(TypeCalibration::Fixed(d)) => b = b.param("type_calibration_s", d.as_secs_f64()),
        Some(TypeCalibration::Auto { budget, .. }) => {
            b = b.param("type_calibration_auto_budget_s", budget.as_secs_f64())
        }
        None => {}
    }
    // Type calibration runs each type on every core of the package as well as alone: the
    // cores the workers leave free get reserved workers, which only calibration uses, so
    // that a run on fewer workers still shows the fit a type's power beside others
    // (apps/src/calibrate.rs; runtime/src/reserved.rs).
    let mut spare = 0;
    if opts.type_calibration.is_some() && opts.app.calibrates() {
        spare = b.spare_cores()?.min(taskwatt_runtime::MAX_RESERVED);
        if spare > 0 {
            b = b.reserved_workers(spare);
        }
    }
    let metering = opts.period.map(|period| {
        let mut detect = opts.detect.clone();
        detect.emulated_gpus =
            opts.gpus > 0 && opts.gpu_backend == taskwatt_runtime::GpuBackend::Emulated;
        if opts.gpus > 0 && opts.gpu_backend == taskwatt_runtime::GpuBackend::Cuda {
            detect.cuda_uuids = cuda_uuids(opts.gpus);
        }
        Metering {
            meter: opts.meter,
            detect,
            period,
            live_simulation: true,
        }
    });
    let (recording, rt) = Recording::start(&opts.trace, b, metering.as_ref())?;
    let workers = recording.workers().to_vec();
    let reserved_workers = workers[workers.len() - spare..]
        .iter()
        .map(|w| w.id)
        .collect();
    opts.stop.attach(rt.interrupt_handle());
    let policy = rt.policy_name().to_string();
    let sink = recording.sink().clone();
    let calibrate = || {
        if let Some(d) = opts.idle_calibration {
            recording.idle(d, |d| opts.stop.sleep(d));
        }
    };
    // 4.
    calibrate();
    let calibrated = match opts.type_calibration {
        Some(TypeCalibration::Fixed(each)) if !opts.stop.is_stopped() => {
            crate::apps::calibrate_types(opts.app, &rt, &opts.config, &sink, each)
        }
        _ => Ok(()),
    };
    // 5.
    let result = calibrated.and_then(|()| {
        if opts.stop.is_stopped() {
            return Err(AppError::Runtime(RuntimeError::Interrupted {
                finished: 0,
                not_run: 0,
            }));
        }
        let app_start = Clock::now();
        let result = {
            let _p = progress(&rt);
            run_app(opts.app, &rt, &opts.config)
        };
        // The application region is the task graph, from its first submission to the end
        // of its wait (per iteration): the makespan's window, not the input's generation
        // or the check. A run that failed or was interrupted has no such windows: its
        // region is the whole attempt.
        let spans = match &result {
            Ok(run) => run.graph.clone(),
            Err(_) => vec![(app_start, Clock::now())],
        };
        recording.mark(GRAPH, &spans);
        result
    });
    // 6.
    let mut auto_calibration = None;
    if result.is_ok() {
        calibrate();
        if let Some(TypeCalibration::Auto {
            budget,
            step,
            precision_pct,
        }) = opts.type_calibration
        {
            let auto = auto_calibrate(
                &opts.trace,
                &opts.stop,
                budget,
                step,
                precision_pct,
                &mut |plan| {
                    crate::apps::calibrate_some_types(
                        opts.app,
                        &rt,
                        &opts.config,
                        &sink,
                        step,
                        Some(plan),
                    )
                    .map(|()| Vec::new())
                    .map_err(|e| e.to_string())
                },
            );
            auto_calibration = Some(auto);
        }
    }
    // 7.
    let interrupted = opts.stop.is_stopped()
        || matches!(
            result,
            Err(AppError::Runtime(RuntimeError::Interrupted { .. }))
        );
    opts.stop.detach();
    let stats = rt.shutdown();
    drop(sink);
    let meters = recording.meters().to_vec();
    let simulated = recording.is_simulated();
    let finished = recording.finish(interrupted, result.is_err() || stats.is_err());
    let trace = finished.trace;
    if interrupted {
        let executed = match &stats {
            Ok(s) => Some(s.executed + s.failed),
            Err(RuntimeError::Interrupted { finished, .. }) => Some(*finished),
            Err(_) => None,
        };
        return Err(SessionError::Interrupted { executed, trace });
    }
    let app = result?;
    let stats = stats?;
    let sampler_stats = finished.sampler.transpose()?;
    Ok(MeasuredRun {
        app,
        policy,
        workers,
        reserved_workers,
        stats,
        trace,
        sampler: sampler_stats,
        meters,
        simulated,
        auto_calibration,
    })
}

/// Whether `entries` (types a calibration could not run, each `name` or `name (from slot
/// k of 0..n)`) lists the type `name`.
pub(crate) fn listed(entries: &[String], name: &str) -> bool {
    entries
        .iter()
        .any(|e| e == name || e.strip_prefix(name).is_some_and(|r| r.starts_with(" (")))
}

/// Runs a calibration plan: each type alone for its time; returns the types it could not
/// run (no calibration task for them: `name`, or `name (from slot k of 0..n)`).
pub(crate) type CalibrationPlanRunner<'a> =
    dyn FnMut(&[(String, Duration)]) -> Result<Vec<String>, String> + 'a;

/// The share of the report's precision threshold adaptive type calibration aims for.
pub const CALIBRATION_TARGET: f64 = 0.4;

/// Adaptive type calibration: fit what the trace file at `trace` holds so far (the runtime
/// and the writer put everything in it within `DEFAULT_TRACE_FLUSH + 2·WRITER_FLUSH`, 75
/// ms), calibrate the types whose power is not shown as a measurement (`calibrate` runs a
/// plan: each type alone for its time), repeat within `budget`; the first round also runs
/// every other type that ran for one `step`. Shared by `taskwatt run` and
/// [`crate::Measure`].
pub(crate) fn auto_calibrate(
    trace: &std::path::Path,
    stop: &StopSignal,
    budget: Duration,
    step: Duration,
    precision_pct: f64,
    calibrate: &mut CalibrationPlanRunner<'_>,
) -> AutoCalibrationReport {
    let t0 = Instant::now();
    let mut report = AutoCalibrationReport::default();
    loop {
        // The runtime's flusher and the writer each flush within 50 ms.
        stop.sleep(taskwatt_runtime::DEFAULT_TRACE_FLUSH + taskwatt_traces::WRITER_FLUSH * 2);
        if stop.is_stopped() {
            break;
        }
        // Calibrate to a share of the report's threshold: a power shown within +-5 % is
        // then good to about +-2 %, which is what comparisons between runs need.
        let (flagged, seen) = match flagged_types(trace, precision_pct * CALIBRATION_TARGET) {
            Ok(f) => f,
            Err(e) => {
                report.error = Some(e);
                break;
            }
        };
        report.still_flagged = flagged.iter().map(|(n, _)| n.clone()).collect();
        // Each type for as long as it needs: the interval narrows as the square root of
        // the time, so a type twice as far from the target gets up to four steps.
        let mut plan: Vec<(String, Duration)> = flagged
            .iter()
            .map(|(n, need)| (n.clone(), step.mul_f64(need.clamp(1.0, 4.0))))
            .collect();
        // The first round also runs every other type for one step: the graph may pin a
        // type's power and still never show it alone or beside others (a one-type app on
        // one worker, or on every worker throughout), which is what the what-if's
        // contention law needs to predict other worker counts.
        if report.rounds.is_empty() {
            for n in seen {
                if !plan.iter().any(|(p, _)| *p == n) {
                    plan.push((n, step));
                }
            }
        }
        // What is left of the budget: the plan shrinks to it, each type keeping at least
        // one step, the neediest first when not all of them fit.
        let left = budget.saturating_sub(t0.elapsed());
        let planned: Duration = plan.iter().map(|(_, d)| *d).sum();
        if planned > left {
            plan.sort_by_key(|p| std::cmp::Reverse(p.1));
            plan.truncate((left.as_nanos() / step.as_nanos().max(1)) as usize);
            let planned: Duration = plan.iter().map(|(_, d)| *d).sum();
            let scale = left.as_secs_f64() / planned.as_secs_f64().max(1e-9);
            for (_, d) in &mut plan {
                *d = d.mul_f64(scale.min(1.0)).max(step);
            }
        }
        // A type the app cannot make a calibration task of is asked for once.
        plan.retain(|(n, _)| !listed(&report.not_run, n));
        if plan.is_empty() {
            break;
        }
        let start = Instant::now();
        let not_run = match calibrate(&plan) {
            Ok(n) => n,
            Err(e) => {
                report.error = Some(e);
                break;
            }
        };
        // The round lists what it ran (it listed every flagged type, run or not).
        let ran: Vec<String> = plan
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !listed(&not_run, n))
            .collect();
        for n in not_run {
            if !report.not_run.contains(&n) {
                report.not_run.push(n);
            }
        }
        if ran.is_empty() {
            break;
        }
        report.rounds.push((ran, start.elapsed().as_secs_f64()));
    }
    report.spent_s = t0.elapsed().as_secs_f64();
    report
}

/// Codelets with a power alone, on any domain, that the fit of the trace so far does not
/// show within `precision_pct`, each with how much more it needs: the square of its
/// interval's half-width over the threshold (1 for a flag other than imprecision); and
/// every codelet that ran in the fit's windows.
fn flagged_types(
    path: &std::path::Path,
    precision_pct: f64,
) -> Result<(Vec<(String, f64)>, Vec<String>), String> {
    use taskwatt_energy::attribution::{attribute_trace, AttributionOptions, Flag};
    let rec = taskwatt_traces::recover_trace(path).map_err(|e| e.to_string())?;
    let opts = AttributionOptions {
        precision_pct,
        ..AttributionOptions::default()
    };
    let att = attribute_trace(&rec.trace, &opts).map_err(|e| e.to_string())?;
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for d in &att.report.domains {
        for t in &d.types {
            let e = &t.power;
            if e.flags.contains(&Flag::NoTimeInWindow) {
                continue;
            }
            if !seen.contains(&t.key.codelet) {
                seen.push(t.key.codelet.clone());
            }
            if e.reliable {
                continue;
            }
            let need = e
                .relative_half_width_pct()
                .filter(|h| h.is_finite())
                .map_or(1.0, |h| (h / precision_pct).powi(2));
            match out.iter_mut().find(|(n, _)| *n == t.key.codelet) {
                Some((_, n)) => *n = n.max(need),
                None => out.push((t.key.codelet.clone(), need)),
            }
        }
    }
    Ok((out, seen))
}

/// The extra power of each (codelet, architecture) in a model fitted with types by
/// `codelet-arch`, summed over its domains: what `RuntimeBuilder::task_powers` takes.
/// Types of other keys are left out.
pub fn task_powers_of(model: &taskwatt_energy::attribution::EnergyModel) -> TaskPowers {
    let mut sum: std::collections::BTreeMap<(String, taskwatt_traces::Arch), f64> =
        std::collections::BTreeMap::new();
    for d in &model.domains {
        for t in &d.types {
            let key = t.key.to_string();
            let Some((name, arch)) = key.rsplit_once('@') else {
                continue;
            };
            let Some(arch) = taskwatt_traces::Arch::ALL
                .into_iter()
                .find(|a| a.name() == arch)
            else {
                continue;
            };
            *sum.entry((name.to_string(), arch)).or_default() += t.power.value_w;
        }
    }
    sum.into_iter().map(|((n, a), w)| (n, a, w)).collect()
}

/// Extra power per (codelet, architecture), W.
pub type TaskPowers = Vec<(String, taskwatt_traces::Arch, f64)>;

/// The file, in the performance models' directory, where a measured run of `app` keeps
/// its fitted energy model (`energy-model-<app>.json`): `dmdae` uses the one of the app it
/// runs when no `--energy-model` is given.
pub fn run_energy_model(app: App) -> String {
    format!("energy-model-{}.json", app.name())
}

/// The UUIDs of the CUDA devices a run drives (`0..gpus`), for NVML to tell which GPU is
/// which; `None` (NVML's order taken as CUDA's, said in a warning) where CUDA cannot say.
pub fn cuda_uuids(gpus: usize) -> Option<Vec<String>> {
    match taskwatt_runtime::cuda_device_uuids() {
        Ok(mut u) => {
            u.truncate(gpus);
            Some(u)
        }
        Err(e) => {
            log::warn!(
                "the CUDA devices' UUIDs could not be read ({e}): NVML's order is taken as \
                 CUDA's"
            );
            None
        }
    }
}
