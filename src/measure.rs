//! Energy of your own task graph, in one call: [`Measure`] builds the runtime with tracing,
//! the meter's observer and the sampler wired in; [`Measured::finish`] shuts it down and
//! returns the per-task-type energy report, headed by your graph (the `application`
//! region) and split by the regions you open.
//!
//! ```
//! use taskwatt::{Codelet, Measure, Runtime, Task};
//!
//! let m = Measure::new().start(Runtime::builder().workers(2)).unwrap();
//! let rt = m.runtime();
//! let work = Codelet::new("work").cpu(|ctx| {
//!     let v = ctx.rw::<Vec<f64>>(0);
//!     for x in v.iter_mut() {
//!         *x = x.sqrt() + 1.0;
//!     }
//! });
//! let data: Vec<_> = (0..8).map(|_| rt.register(vec![2.0f64; 1 << 12])).collect();
//! for _ in 0..20 {
//!     for d in &data {
//!         rt.submit(Task::new(&work).rw(d)).unwrap();
//!     }
//! }
//! rt.wait_all().unwrap();
//! let report = m.finish().unwrap();
//! assert!(report.simulated); // no RAPL or NVML here: the simulated meter, labelled so
//! println!("{}", report.text());
//! ```
//!
//! What it does, in order: creates the trace (a temporary file unless
//! [`Measure::trace`] names one), detects the meters for the builder's workers
//! ([`Measure::meter`]: RAPL, NVML, or the simulated meter, whose observer it hands to the
//! runtime), starts the sampler ([`Measure::period`]), parks every worker for
//! [`Measure::idle_calibration`] if asked (it pins the base power), and opens the
//! `application` region. [`Measured::finish`] closes it, parks again for the idle
//! calibration, shuts the runtime down, stops the sampler, finishes the trace, and
//! attributes it. Every domain that saw no task is named in the report's warnings (a meter
//! covering the wrong workers, or a graph shorter than one sampling period).

use std::path::PathBuf;
use std::time::Duration;

use taskwatt_energy::attribution::{
    attribute_trace, render_report, Attribution, AttributionError, AttributionOptions,
    RenderOptions,
};
use taskwatt_energy::{DetectOptions, EnergyError, MeterChoice};
use taskwatt_runtime::{Runtime, RuntimeBuilder, RuntimeError, Task};
use taskwatt_traces::{read_trace, Clock, Region, Timestamp, TraceError};

use crate::recording::{Metering, Recording, RecordingError, GRAPH};
use crate::session::{AutoCalibrationReport, TypeCalibration};

/// How to measure (see the module docs). `Measure::new()` samples the best available
/// meter every 10 ms, without idle calibration, into a temporary trace.
#[derive(Clone, Debug)]
pub struct Measure {
    meter: MeterChoice,
    period: Duration,
    idle_calibration: Option<Duration>,
    trace: Option<PathBuf>,
    detect: DetectOptions,
    attribution: AttributionOptions,
    type_calibration: TypeCalibration,
    accesses: bool,
}

impl Default for Measure {
    fn default() -> Self {
        Measure::new()
    }
}

impl Measure {
    /// The defaults: `MeterChoice::Auto`, 10 ms, no idle calibration, a temporary trace.
    pub fn new() -> Measure {
        Measure {
            meter: MeterChoice::Auto,
            period: Duration::from_millis(10),
            idle_calibration: None,
            trace: None,
            detect: DetectOptions::default(),
            attribution: AttributionOptions::default(),
            type_calibration: TypeCalibration::auto(),
            accesses: true,
        }
    }

    /// Which meter (`MeterChoice::Auto` falls back to the simulated one, labelled so).
    pub fn meter(mut self, meter: MeterChoice) -> Measure {
        self.meter = meter;
        self
    }

    /// Sampling period (1 ms to 1 s).
    pub fn period(mut self, period: Duration) -> Measure {
        self.period = period;
        self
    }

    /// Park every worker this long before and after the graph, to pin the base power.
    pub fn idle_calibration(mut self, d: Duration) -> Measure {
        self.idle_calibration = Some(d);
        self
    }

    /// Whether the trace records each task's data accesses (on by default, as `taskwatt
    /// run` records them): `taskwatt simulate` needs them to simulate the copies to and
    /// from GPUs, and `taskwatt export --format csv` writes them beside the tasks. They
    /// cost the submitting thread a lock and a copy per task (`RuntimeBuilder::
    /// trace_accesses`, which this overrides): turn them off for graphs of tasks of a few
    /// microseconds that no replay will read.
    pub fn trace_accesses(mut self, on: bool) -> Measure {
        self.accesses = on;
        self
    }

    /// Keep the trace at `path` (default: a temporary file, removed with the report).
    pub fn trace(mut self, path: impl Into<PathBuf>) -> Measure {
        self.trace = Some(path.into());
        self
    }

    /// Where the meters live, and the simulator's configuration.
    pub fn detect_options(mut self, d: DetectOptions) -> Measure {
        self.detect = d;
        self
    }

    /// How [`Measured::finish_calibrating`] calibrates the task types: `TypeCalibration::auto()`
    /// (the default: only the types the fit could not pin down, until they are or 10 s are
    /// spent, as `taskwatt run --type-calibration auto`), or `Fixed(d)`: every type the
    /// graph ran, alone for `d` each.
    pub fn type_calibration(mut self, t: TypeCalibration) -> Measure {
        self.type_calibration = t;
        self
    }

    /// The attribution options it uses.
    pub fn attribution_options(&self) -> AttributionOptions {
        self.attribution.clone()
    }

    /// How to attribute (key kind, solver, precision threshold...).
    pub fn attribution(mut self, o: AttributionOptions) -> Measure {
        self.attribution = o;
        self
    }

    /// Builds the runtime from `builder` with tracing, the meter's observer and the
    /// sampler wired in, and opens the `application` region.
    ///
    /// # Errors
    /// [`MeasureError`]: the trace cannot be created, no meter can be opened (a named one
    /// that is missing says what is missing), the runtime cannot start.
    pub fn start(self, builder: RuntimeBuilder) -> Result<Measured, MeasureError> {
        // Checked before anything is created: a week-long park would look like a hang.
        if let Some(d) = self.idle_calibration.filter(|d| *d > MAX_IDLE_CALIBRATION) {
            return Err(MeasureError::IdleCalibrationTooLong { got: d });
        }
        let (path, temp) = match &self.trace {
            Some(p) => (p.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("taskwatt-")
                    .suffix(".twt")
                    .tempfile()
                    .map_err(|source| TraceError::Io {
                        path: std::env::temp_dir(),
                        source,
                    })?
                    .into_temp_path();
                (t.to_path_buf(), Some(t))
            }
        };
        let metering = Metering {
            meter: self.meter,
            detect: self.detect.clone(),
            period: self.period,
            live_simulation: true,
        };
        // The data accesses too, as `taskwatt run` records them: what `taskwatt simulate`
        // needs to replay the graph with its copies.
        let builder = builder.trace_accesses(self.accesses);
        let (recording, rt) = Recording::start(&path, builder, Some(&metering))?;
        let mut m = Measured {
            rt: Some(rt),
            simulated: recording.is_simulated(),
            path: recording.path().to_path_buf(),
            recording: Some(recording),
            _temp: temp,
            app_start: Clock::now(),
            app_end: std::sync::Mutex::new(None),
            measure: self,
            failed: (0, 0),
            regions: Default::default(),
            closed_at_finish: Vec::new(),
        };
        m.idle();
        m.app_start = Clock::now();
        Ok(m)
    }
}

/// A runtime being measured: submit to [`Measured::runtime`], open regions with
/// [`Measured::region`], and call [`Measured::finish`] for the report.
pub struct Measured {
    rt: Option<Runtime>,
    /// Until `finish`.
    recording: Option<Recording>,
    simulated: bool,
    path: PathBuf,
    _temp: Option<tempfile::TempPath>,
    app_start: Timestamp,
    /// Where [`Measured::end_application`] ended the `application` region.
    app_end: std::sync::Mutex<Option<Timestamp>>,
    measure: Measure,
    /// Tasks failed and cancelled, read when the graph is done.
    failed: (u64, u64),
    /// The regions opened with [`Measured::region`] and not closed yet.
    regions: taskwatt_traces::OpenRegions,
    /// Those still open when `finish` began, closed there.
    closed_at_finish: Vec<String>,
}

impl std::fmt::Debug for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measured")
            .field("trace", &self.path)
            .field("simulated", &self.simulated)
            .finish_non_exhaustive()
    }
}

impl Drop for Measured {
    /// Dropped before [`Measured::finish`] (an early return on an error, a panic in the
    /// application): shuts the runtime down, waiting for the tasks submitted, then stops
    /// the sampler and finishes the trace with outcome `failed`, so that it is complete on
    /// disk (`taskwatt report` reads it and says the run failed) instead of ending without
    /// its End chunk.
    fn drop(&mut self) {
        let Some(recording) = self.recording.take() else {
            return;
        };
        if let Some(rt) = self.rt.take() {
            if let Err(e) = rt.shutdown() {
                log::warn!("the measured run was dropped before finish: {e}");
            }
        }
        if let Err(e) = recording.finish(false, true).trace {
            log::warn!(
                "the measured run was dropped before finish, and its trace {} could not be \
                 finished: {e}",
                self.path.display()
            );
        }
    }
}

impl Measured {
    /// The runtime to submit to.
    pub fn runtime(&self) -> &Runtime {
        self.rt.as_ref().expect("the runtime lives until finish")
    }

    /// Waits for the tasks submitted so far and ends the `application` region now, so that
    /// what the program does before [`Measured::finish`] (checking its result on the main
    /// thread, say) is not counted as the application's idle energy. Tasks submitted later
    /// still run and are measured, outside that region; a second call moves the end.
    ///
    /// # Errors
    /// A task that failed, as [`Runtime::wait_all`] (the region ends all the same).
    pub fn end_application(&self) -> Result<(), RuntimeError> {
        let waited = self.runtime().wait_all();
        // Through a lock, so that `&self` does: `let rt = m.runtime();` then
        // `m.end_application()?` then `rt.unregister(h)` did not compile with `&mut self`.
        *self.app_end.lock().unwrap_or_else(|p| p.into_inner()) = Some(Clock::now());
        waited
    }

    /// Opens a named region (closed when the guard drops): the report gives its energy per
    /// domain, split into task types and base. A region still open when
    /// [`Measured::finish`] begins is closed there (the report's warning names it), so
    /// that a guard kept to the end of its scope, past `finish`, loses nothing.
    pub fn region(&self, name: &str) -> Region {
        self.regions.open(self.recording().sink(), name)
    }

    /// Whether the energies come from the simulated meter.
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    fn recording(&self) -> &Recording {
        self.recording
            .as_ref()
            .expect("the recording lives until finish")
    }

    fn idle(&self) {
        if let Some(d) = self.measure.idle_calibration {
            self.recording().idle(d, std::thread::sleep);
        }
    }

    /// Waits for every task, closes the `application` region, shuts the runtime down, stops
    /// the sampler, finishes the trace and attributes it.
    ///
    /// # Errors
    /// A failed task or runtime error, a sampler or trace error, or an attribution error
    /// (for instance no energy sample at all: a graph shorter than one period).
    pub fn finish(mut self) -> Result<EnergyReport, MeasureError> {
        match self.record(None) {
            Ok(calibration) => self.report(calibration),
            Err(e) => Err(self.with_report(e)),
        }
    }

    /// A failed graph's error, with the report of what ran where the trace attributes.
    fn with_report(self, e: MeasureError) -> MeasureError {
        match e {
            MeasureError::TasksFailed {
                source,
                trace,
                report: None,
            } => MeasureError::TasksFailed {
                source,
                trace,
                report: self.report(None).ok().map(Box::new),
            },
            e => e,
        }
    }

    /// As [`Measured::finish`] without the attribution: the trace is complete on disk
    /// ([`Measure::trace`]) for a caller that reads it itself (a comparison of runs).
    pub(crate) fn finish_trace(mut self) -> Result<(), MeasureError> {
        self.record(None).map(drop)
    }

    /// As [`Measured::finish`], calibrating the task types after the graph (and after the
    /// idle calibration), as `taskwatt run --type-calibration` does for its apps.
    ///
    /// In a graph, task types often run in nearly fixed proportions (a halo exchange
    /// beside each sweep), so the graph's intervals pin their sum and not their split.
    /// Calibration runs a type alone (one task at a time, then `calibration_slots()` at
    /// once), which separates it. `make(codelet, slot)` gives one task of the codelet,
    /// on data of its own (scratch handles you registered for this; `slot` is in
    /// `0..calibration_slots()`, so that tasks run at once use distinct data), or `None`
    /// for a type it cannot make. The parts of a partitioned handle borrow the runtime,
    /// and so this `Measured`: unpartition them before finishing (`rt.unpartition(parts)`)
    /// and give the calibration scratch handles of its own, as below; a closure that
    /// borrows the parts does not compile. A codelet whose implementation takes the parts'
    /// own types (`MatrixPart`, `VectorPart`) cannot be given scratch data this way: return
    /// `None` for it, and the report lists it as not run (a limit of this API today). With [`TypeCalibration::auto`] (the default) only the
    /// types whose power the fit of the trace so far does not show within a share of the
    /// precision threshold are calibrated, round after round, within the budget;
    /// [`EnergyReport::calibration`] says what was done.
    ///
    /// On fewer workers than the package has cores, build the runtime with
    /// `.reserved_workers(builder.spare_cores()?)`, as `taskwatt run` does: calibration
    /// then also runs each type on the free cores (pinned to the reserved workers, which
    /// run nothing else), so that the fit sees it beside others and can separate its power
    /// alone from the package's contention (docs/runtime.md, "Reserved workers").
    ///
    /// ```
    /// use std::time::Duration;
    /// use taskwatt::{Codelet, Measure, Runtime, Task, TypeCalibration};
    ///
    /// // At most 2 s of calibration (the default, `TypeCalibration::auto()`, allows 10 s).
    /// let calibration = TypeCalibration::Auto {
    ///     budget: Duration::from_secs(2),
    ///     step: Duration::from_millis(250),
    ///     precision_pct: 5.0,
    /// };
    /// let m = Measure::new()
    ///     .type_calibration(calibration)
    ///     .start(Runtime::builder().workers(2))
    ///     .unwrap();
    /// let rt = m.runtime();
    /// let sweep = Codelet::new("sweep").cpu(|ctx| {
    ///     ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x = x.sqrt() + 1.0)
    /// });
    /// let data = rt.register(vec![2.0f64; 1 << 12]);
    /// for _ in 0..50 {
    ///     rt.submit(Task::new(&sweep).rw(&data)).unwrap();
    /// }
    /// let scratch: Vec<_> = (0..m.calibration_slots())
    ///     .map(|_| rt.register(vec![2.0f64; 1 << 12]))
    ///     .collect();
    /// let report = m
    ///     .finish_calibrating(|codelet, slot| match codelet {
    ///         "sweep" => Some(Task::new(&sweep).rw(&scratch[slot])),
    ///         _ => None,
    ///     })
    ///     .unwrap();
    /// println!("{}", report.text());
    /// ```
    ///
    /// # Errors
    /// As [`Measured::finish`]. A calibration that cannot run is not an error: the types
    /// `make` gives no task of are in [`AutoCalibrationReport::not_run`] (and
    /// [`EnergyReport::text`] names them), and what stopped it (a fit of the partial trace
    /// that failed, no type at all to run) in [`AutoCalibrationReport::error`].
    pub fn finish_calibrating<'a>(
        self,
        make: impl Fn(&str, usize) -> Option<Task<'a>>,
    ) -> Result<EnergyReport, MeasureError> {
        let mut this = self;
        match this.record(Some(&make)) {
            Ok(calibration) => this.report(calibration),
            Err(e) => Err(this.with_report(e)),
        }
    }

    /// How many tasks of one type a calibration runs at once (two per worker): the
    /// `slot`s `finish_calibrating`'s closure gets are `0..calibration_slots()`.
    pub fn calibration_slots(&self) -> usize {
        calibration_slots_of(self.runtime())
    }

    /// Waits for the graph, marks it, calibrates if asked, shuts the runtime and the
    /// sampler down and finishes the trace.
    fn record<'a>(
        &mut self,
        make: Option<&dyn Fn(&str, usize) -> Option<Task<'a>>>,
    ) -> Result<Option<AutoCalibrationReport>, MeasureError> {
        let rt = self.rt.take().expect("finish runs once");
        let waited = rt.wait_all();
        self.closed_at_finish = self.regions.close_all(self.recording().sink());
        let end = self
            .app_end
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(Clock::now);
        self.recording().mark(GRAPH, &[(self.app_start, end)]);
        self.idle();
        let calibration = match make {
            Some(make) if waited.is_ok() => Some(self.calibrate(&rt, make)),
            _ => None,
        };
        // Failures the application already saw in its own `wait_all` count too: the
        // trace's outcome and the report say the run failed.
        let counts = rt.stats();
        self.failed = (counts.failed, counts.cancelled);
        let stats = rt.shutdown();
        let recording = self.recording.take().expect("finish runs once");
        let finished = recording.finish(
            false,
            waited.is_err() || stats.is_err() || counts.failed > 0,
        );
        let kept = || {
            finished
                .trace
                .is_ok()
                .then(|| self.measure.trace.clone())
                .flatten()
        };
        waited.map_err(|source| MeasureError::TasksFailed {
            source: Box::new(source),
            trace: kept(),
            report: None,
        })?;
        stats.map_err(|source| MeasureError::TasksFailed {
            source: Box::new(source),
            trace: kept(),
            report: None,
        })?;
        finished.sampler.transpose()?;
        finished.trace?;
        Ok(calibration)
    }

    /// Attributes the finished trace.
    fn report(
        mut self,
        calibration: Option<AutoCalibrationReport>,
    ) -> Result<EnergyReport, MeasureError> {
        let trace = read_trace(&self.path)?;
        // The attribution warns of a domain that saw no task.
        let attribution = attribute_trace(&trace, &self.measure.attribution)?;
        Ok(EnergyReport {
            attribution,
            calibration,
            failed_tasks: self.failed.0,
            cancelled_tasks: self.failed.1,
            closed_at_finish: std::mem::take(&mut self.closed_at_finish),
            simulated: self.simulated,
            trace: self.measure.trace.clone(),
            job: None,
            transfers: (!trace.transfers.is_empty()).then(|| trace.transfer_summary()),
            _temp: self._temp.take(),
        })
    }
}

/// Tasks of one type a calibration runs at once on `rt`: two per worker.
fn calibration_slots_of(rt: &Runtime) -> usize {
    2 * rt.workers().len()
}

impl Measured {
    /// Type calibration after the graph (see [`Measured::finish_calibrating`]).
    fn calibrate<'a>(
        &self,
        rt: &Runtime,
        make: &dyn Fn(&str, usize) -> Option<Task<'a>>,
    ) -> AutoCalibrationReport {
        let stop = crate::session::StopSignal::new();
        let mut run = |plan: &[(String, Duration)]| -> Result<Vec<String>, String> {
            let mut missing = Vec::new();
            let mut ran = 0;
            let slots = calibration_slots_of(rt);
            for (name, d) in plan {
                // Every slot must give a task: a closure over fewer scratch handles than
                // `calibration_slots()` gives `None` past them.
                if let Some(slot) = (0..slots).find(|&s| make(name, s).is_none()) {
                    missing.push(if slot == 0 {
                        name.clone()
                    } else {
                        format!("{name} (from slot {slot} of 0..{slots})")
                    });
                    continue;
                }
                let one = |slot: usize| {
                    make(name, slot).expect("every slot gave a task of this codelet above")
                };
                crate::apps::calibrate::phase(rt, self.recording().sink(), name, *d, &one)
                    .map_err(|e| e.to_string())?;
                ran += 1;
            }
            if ran == 0 && !missing.is_empty() {
                return Err(format!(
                    "no calibration task for {}: finish_calibrating's closure returned None \
                     for it",
                    missing.join(", ")
                ));
            }
            Ok(missing)
        };
        match self.measure.type_calibration {
            TypeCalibration::Auto {
                budget,
                step,
                precision_pct,
            } => crate::session::auto_calibrate(
                &self.path,
                &stop,
                budget,
                step,
                precision_pct,
                &mut run,
            ),
            TypeCalibration::Fixed(each) => {
                let t0 = std::time::Instant::now();
                let names = rt.codelet_names();
                let plan: Vec<(String, Duration)> = names.into_iter().map(|n| (n, each)).collect();
                let mut report = AutoCalibrationReport::default();
                match run(&plan) {
                    Ok(not_run) => report.not_run = not_run,
                    Err(e) => report.error = Some(e),
                }
                report.rounds.push((
                    plan.into_iter()
                        .map(|(n, _)| n)
                        .filter(|n| !crate::session::listed(&report.not_run, n))
                        .collect(),
                    t0.elapsed().as_secs_f64(),
                ));
                report.spent_s = t0.elapsed().as_secs_f64();
                report
            }
        }
    }
}

/// What [`Measured::finish`] returns.
#[derive(Debug)]
pub struct EnergyReport {
    /// The attribution (report, fits, systems).
    pub attribution: Attribution,
    /// What type calibration did ([`Measured::finish_calibrating`]; `None` without it).
    pub calibration: Option<AutoCalibrationReport>,
    /// Tasks that failed (their implementation panicked), and tasks cancelled because a
    /// predecessor failed, whether or not the application's own `wait_all` reported them
    /// first: the report covers what ran, and [`EnergyReport::text`] says so.
    pub failed_tasks: u64,
    /// See [`EnergyReport::failed_tasks`].
    pub cancelled_tasks: u64,
    /// Regions ([`Measured::region`]) still open when `finish` began, closed there: their
    /// guards lived past the graph (the end of a scope after `finish`, say), so the
    /// regions end where `finish` began.
    pub closed_at_finish: Vec<String>,
    /// Whether the energies come from the simulated meter (every rendering says so).
    pub simulated: bool,
    /// The trace, when [`Measure::trace`] asked to keep it.
    pub trace: Option<PathBuf>,
    /// A distributed run's energy per node and per type over the nodes
    /// ([`crate::DistMeasure`]); [`EnergyReport::text`] ends with it.
    pub job: Option<crate::job::Job>,
    /// The copies between memory nodes (runs with GPUs), as `taskwatt report` prints
    /// them: the text and the JSON had them from the CLI only.
    pub transfers: Option<taskwatt_traces::TransferSummary>,
    _temp: Option<tempfile::TempPath>,
}

impl EnergyReport {
    /// The report of a trace kept at `trace` (a distributed run's merged trace).
    pub(crate) fn of_trace(
        attribution: Attribution,
        simulated: bool,
        trace: PathBuf,
        job: Option<crate::job::Job>,
        transfers: Option<taskwatt_traces::TransferSummary>,
    ) -> Self {
        EnergyReport {
            job,
            transfers,
            attribution,
            calibration: None,
            failed_tasks: 0,
            cancelled_tasks: 0,
            closed_at_finish: Vec::new(),
            simulated,
            trace: Some(trace),
            _temp: None,
        }
    }

    /// The 80-column text report.
    pub fn text(&self) -> String {
        let report = render_report(
            &self.attribution.report,
            &RenderOptions {
                simulated: self.simulated,
            },
        );
        let mut head = String::new();
        if !self.closed_at_finish.is_empty() {
            head += &format!(
                "note: region(s) {} were still open when finish began: they end there (drop \
                 a region's guard where its phase ends)\n",
                self.closed_at_finish
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if let Some(c) = &self.calibration {
            head += &c.text();
        }
        if self.failed_tasks + self.cancelled_tasks > 0 {
            head += &format!(
                "warning: {} task(s) failed and {} were cancelled in this run: the report \
                 covers the tasks that ran (a failed task's time and energy up to its panic)\n",
                self.failed_tasks, self.cancelled_tasks
            );
        }
        let job = self
            .job
            .as_ref()
            .map_or_else(String::new, crate::job::Job::text);
        let transfers = self
            .transfers
            .as_ref()
            .map_or_else(String::new, |t| format!("transfers: {t}\n"));
        format!("{head}{report}{transfers}{job}")
    }

    /// The report as JSON (with `simulated`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "simulated": self.simulated,
            "failed_tasks": self.failed_tasks,
            "cancelled_tasks": self.cancelled_tasks,
            "closed_at_finish": self.closed_at_finish,
            "job": self.job,
            "transfers": self.transfers,
            "report": self.attribution.report,
        })
    }
}

/// Errors of a measured run.
#[derive(thiserror::Error)]
pub enum MeasureError {
    /// The runtime failed to start, or failed otherwise.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Tasks failed (or the runtime failed) while [`Measured::finish`] waited for them:
    /// the graph's results are wrong. The trace is finished all the same (outcome
    /// `failed`), and `taskwatt report` attributes what ran.
    #[error("{source}\n  {}", match trace {
        Some(p) => format!(
            "the trace {} is complete (outcome failed): `taskwatt report {}` attributes the \
             energy of what ran",
            p.display(),
            p.display()
        ),
        None => "the trace was temporary and is removed: keep it with Measure::trace(path) to \
                 attribute the energy of what ran"
            .to_owned(),
    })]
    TasksFailed {
        /// What the runtime reported.
        source: Box<RuntimeError>,
        /// The trace, when [`Measure::trace`] kept it.
        trace: Option<PathBuf>,
        /// The energy report of what ran (its warning names the failed and cancelled
        /// tasks), when the trace could be attributed: the graph's results are wrong, its
        /// energy is still measured.
        report: Option<Box<EnergyReport>>,
    },
    /// A meter could not be opened or read.
    #[error(transparent)]
    Energy(#[from] EnergyError),
    /// The trace could not be written or read back.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The attribution failed (no energy sample, for instance).
    #[error(transparent)]
    Attribution(#[from] AttributionError),
    /// [`Measure::idle_calibration`] asked for more than [`MAX_IDLE_CALIBRATION`].
    #[error(
        "Measure::idle_calibration({got:?}) is longer than one week (the runtime parks that \
         long before the graph and again after it); give at most {MAX_IDLE_CALIBRATION:?} \
         (a second or two pins the base power)"
    )]
    IdleCalibrationTooLong {
        /// What was asked for.
        got: Duration,
    },
}

impl From<RecordingError> for MeasureError {
    fn from(e: RecordingError) -> Self {
        match e {
            RecordingError::Runtime(e) => MeasureError::Runtime(e),
            RecordingError::Energy(e) => MeasureError::Energy(e),
            RecordingError::Trace(e) => MeasureError::Trace(e),
        }
    }
}

/// The longest idle calibration [`Measure`] accepts: one week, as the CLI's durations.
pub const MAX_IDLE_CALIBRATION: Duration = Duration::from_secs(7 * 24 * 3600);

taskwatt_traces::debug_as_display!(MeasureError);
