//! A recording: a runtime whose tasks stream into a trace file, with the energy meters
//! sampled into the same trace. The one lifecycle that `taskwatt run`
//! ([`crate::session`]), [`crate::Measure`] and a distributed run's ranks (`taskwatt run
//! --mpi`) share; each adds its own work between [`Recording::start`] and
//! [`Recording::finish`].
//!
//! # The lifecycle
//!
//! 1. [`Recording::start`] creates the trace writer, plans the builder's workers, detects
//!    the meters covering them ([`Metering`]), hands the simulated meter's observer to the
//!    runtime (when it is sampled live), builds the runtime (which writes the run's
//!    metadata) and starts the sampler (which writes the meters' metadata and, for the
//!    simulator, its ground truth).
//! 2. The caller runs its work: [`Recording::idle`] parks every worker and marks the
//!    window `idle-calibration`; [`Recording::mark`] marks the task graph's spans `graph`.
//! 3. The caller shuts its runtime down (which flushes the workers' trace buffers), then
//!    [`Recording::finish`] stops the sampler (its last reading), and finishes the writer
//!    with an End chunk whose outcome says whether the run completed, was interrupted or
//!    failed (a sampler that failed makes it `failed`).
//!
//! The writer sits in a shared slot ([`Recording::writer_slot`]): a signal handler that
//! must end the process at once (a distributed rank) takes it from there and finishes the
//! trace itself; [`Recording::finish`] then finds the slot empty and says so.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwatt_energy::{
    detect, BackendStatus, DetectOptions, EnergyError, MeterChoice, Sampler, SamplerConfig,
    SamplerStats, SamplerTap,
};
use taskwatt_runtime::{Runtime, RuntimeBuilder, RuntimeError};
use taskwatt_traces::{
    Chunk, Clock, ExecutionObserver, Marker, RunOutcome, Timestamp, TraceError, TraceSink,
    TraceWriter, WorkerInfo, WriteSummary,
};

/// Name of the markers around idle-calibration windows.
pub use taskwatt_energy::attribution::IDLE_CALIBRATION;
/// Name of the markers around the task graph.
pub const GRAPH: &str = "graph";

/// Which meters to sample, and how.
#[derive(Clone, Debug)]
pub struct Metering {
    /// Which meter (`MeterChoice::Auto`: the best available, falling back to the simulated
    /// one, labelled so).
    pub meter: MeterChoice,
    /// Where the meters live, and the simulator's configuration.
    pub detect: DetectOptions,
    /// The sampling period.
    pub period: Duration,
    /// Whether the simulated meter is run live, over this runtime's own executions (its
    /// observer). A distributed rank says no: the simulator cannot see the other ranks'
    /// tasks on its node, so its configuration goes into the trace instead
    /// ([`Recording::simulated_config`]) and `taskwatt merge` runs it over all of them.
    pub live_simulation: bool,
}

/// The shared slot of the trace writer (see the module docs).
pub type WriterSlot = Arc<Mutex<Option<TraceWriter>>>;

/// A runtime being recorded (see the module docs).
#[derive(Debug)]
pub struct Recording {
    writer: WriterSlot,
    path: PathBuf,
    sink: TraceSink,
    sampler: Option<Sampler>,
    workers: Vec<WorkerInfo>,
    meters: Vec<BackendStatus>,
    simulated: bool,
    simulated_config: Option<DetectOptions>,
}

/// Errors of [`Recording::start`].
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The runtime could not start.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A meter could not be opened, or the sampler could not start.
    #[error(transparent)]
    Energy(#[from] EnergyError),
    /// The trace could not be created.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// What [`Recording::finish`] returns.
#[derive(Debug)]
pub struct Finished {
    /// The sampler's counters, or why it failed; `None` without metering.
    pub sampler: Option<Result<SamplerStats, EnergyError>>,
    /// The trace as finished, or why it could not be.
    pub trace: Result<WriteSummary, TraceError>,
    /// The outcome its End chunk records.
    pub outcome: RunOutcome,
}

impl Recording {
    /// Step 1 of the lifecycle: the trace at `path`, the runtime built from `builder` with
    /// the trace (and the simulated meter's observer) wired in, and the sampler started
    /// when `metering` is given.
    ///
    /// # Errors
    /// The trace cannot be created, the workers cannot be planned, a named meter is
    /// missing (the error says what is missing), the runtime or the sampler cannot start.
    pub fn start(
        path: &Path,
        builder: RuntimeBuilder,
        metering: Option<&Metering>,
    ) -> Result<(Recording, Runtime), RecordingError> {
        let writer = TraceWriter::create(path)?;
        // A run that could not start (an unknown policy, a meter missing) leaves no trace
        // of 16 bytes that `taskwatt report` would take for a crashed run: the writer is
        // dropped within `start_with`, then its file removed.
        Self::start_with(writer, path, builder, metering).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }

    fn start_with(
        writer: TraceWriter,
        path: &Path,
        builder: RuntimeBuilder,
        metering: Option<&Metering>,
    ) -> Result<(Recording, Runtime), RecordingError> {
        let sink = writer.sink();
        let mut b = builder.trace(sink.clone());
        let workers = b.worker_plan()?;
        let mut detected = match metering {
            Some(m) => Some(detect(m.meter, &workers, &m.detect)?),
            None => None,
        };
        let mut simulated = false;
        let mut simulated_config = None;
        let mut inner = None;
        if let (Some(d), Some(m)) = (detected.as_mut(), metering) {
            if let Some(obs) = d.observer.take() {
                if m.live_simulation {
                    simulated = true;
                    inner = Some(obs as Arc<dyn ExecutionObserver>);
                } else {
                    // Replayed later: no meter to sample live.
                    simulated_config = Some(m.detect.clone());
                    d.meters.clear();
                    d.frequency = None;
                }
            }
        }
        // The workers take the readings between their tasks (energy/src/sampler.rs, "Readings
        // taken by the workers"), handing the events on to the simulated meter.
        let sampling = detected.is_some() && simulated_config.is_none();
        let tap = sampling.then(|| SamplerTap::new(inner.clone()));
        if let Some(t) = &tap {
            b = b.observer(t.clone() as Arc<dyn ExecutionObserver>);
        } else if let Some(obs) = inner {
            b = b.observer(obs);
        }
        let rt = b.build()?;
        let sampler = match (detected.as_mut(), metering) {
            (Some(d), Some(m)) if simulated_config.is_none() => Some(Sampler::start_tapped(
                std::mem::take(&mut d.meters),
                d.frequency.take().into_iter().collect(),
                &workers,
                sink.clone(),
                SamplerConfig::with_period(m.period)?,
                tap.as_deref(),
            )?),
            _ => None,
        };
        let recording = Recording {
            writer: Arc::new(Mutex::new(Some(writer))),
            path: path.to_path_buf(),
            sink,
            sampler,
            workers,
            meters: detected.map(|d| d.statuses).unwrap_or_default(),
            simulated,
            simulated_config,
        };
        Ok((recording, rt))
    }

    /// The sink the runtime, the sampler and the markers write to.
    pub fn sink(&self) -> &TraceSink {
        &self.sink
    }

    /// The trace file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The workers as planned (the reserved ones last).
    pub fn workers(&self) -> &[WorkerInfo] {
        &self.workers
    }

    /// Every meter backend and why it was or was not used (empty without metering).
    pub fn meters(&self) -> &[BackendStatus] {
        &self.meters
    }

    /// Whether the energy comes from the simulated meter, run live.
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    /// The simulated meter's configuration when it was detected but not run live
    /// ([`Metering::live_simulation`] false).
    pub fn simulated_config(&self) -> Option<&DetectOptions> {
        self.simulated_config.as_ref()
    }

    /// The writer's slot, for a signal handler that ends the process at once.
    pub fn writer_slot(&self) -> WriterSlot {
        self.writer.clone()
    }

    /// Parks the caller for `d` (every worker idles when nothing is submitted) through
    /// `sleep`, then marks the window `idle-calibration`.
    pub fn idle(&self, d: Duration, sleep: impl FnOnce(Duration)) {
        // None asked (a duration of 0): no region of no length in the report.
        if d.is_zero() {
            return;
        }
        let start = Clock::now();
        sleep(d);
        self.mark(IDLE_CALIBRATION, &[(start, Clock::now())]);
    }

    /// Marks `spans` with `name` (`graph` for the task graph's).
    pub fn mark(&self, name: &str, spans: &[(Timestamp, Timestamp)]) {
        self.sink.send(Chunk::Markers(
            spans
                .iter()
                .map(|&(start, end)| Marker {
                    name: name.into(),
                    start,
                    end,
                })
                .collect(),
        ));
    }

    /// Step 3 of the lifecycle, after the caller shut its runtime down: stops the sampler
    /// and finishes the trace, `interrupted` or `failed` (by the caller's account, or by
    /// the sampler's failure) or complete.
    pub fn finish(self, interrupted: bool, failed: bool) -> Finished {
        let sampler = self.sampler.map(Sampler::stop);
        drop(self.sink);
        let outcome = if interrupted {
            RunOutcome::Interrupted
        } else if failed || matches!(sampler, Some(Err(_))) {
            RunOutcome::Failed
        } else {
            RunOutcome::Complete
        };
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let trace = match writer {
            Some(w) => w.finish_with_outcome(outcome),
            None => Err(TraceError::Io {
                path: self.path.clone(),
                source: std::io::Error::other(
                    "the trace was already finished (by the signal handler)",
                ),
            }),
        };
        Finished {
            sampler,
            trace,
            outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_runtime::{Codelet, Task};
    use taskwatt_traces::read_trace;

    fn sim(live: bool) -> Metering {
        Metering {
            meter: MeterChoice::Sim,
            detect: DetectOptions::default(),
            period: Duration::from_millis(2),
            live_simulation: live,
        }
    }

    /// Runs 40 tasks of 1 ms on a recording of two workers, marks the graph, and finishes.
    fn record(
        path: &Path,
        metering: Option<&Metering>,
        interrupted: bool,
        failed: bool,
    ) -> (bool, Option<DetectOptions>, Finished) {
        let (r, rt) = Recording::start(path, Runtime::builder().workers(2), metering).unwrap();
        let spin = Codelet::new("spin").cpu(|_| {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_millis(1) {}
        });
        r.idle(Duration::from_millis(20), std::thread::sleep);
        let start = Clock::now();
        for _ in 0..40 {
            rt.submit(Task::new(&spin)).unwrap();
        }
        rt.wait_all().unwrap();
        r.mark(GRAPH, &[(start, Clock::now())]);
        rt.shutdown().unwrap();
        let (sim, config) = (r.is_simulated(), r.simulated_config().cloned());
        (sim, config, r.finish(interrupted, failed))
    }

    #[test]
    fn a_live_simulated_meter_is_sampled_into_the_trace_with_the_tasks_and_markers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        let (simulated, config, f) = record(&path, Some(&sim(true)), false, false);
        assert!(simulated && config.is_none());
        let stats = f.sampler.unwrap().unwrap();
        // The workers took readings between their tasks (a task ends every ~0.5 ms, the
        // period is 2 ms), through the tap that also feeds the simulator its tasks.
        assert!(stats.worker_readings > 0, "{stats:?}");
        assert_eq!(f.outcome, RunOutcome::Complete);
        let summary = f.trace.unwrap();
        assert_eq!(summary.tasks, 40);
        let t = read_trace(&path).unwrap();
        assert!(t.samples.len() > 2, "{} samples", t.samples.len());
        assert!(t.truth.is_some(), "the simulator records its truth");
        let names: Vec<&str> = t.markers.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [IDLE_CALIBRATION, GRAPH]);
        assert_eq!(t.end.unwrap().outcome, RunOutcome::Complete);
    }

    #[test]
    fn a_recording_that_cannot_start_leaves_no_trace_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        let b = Runtime::builder().workers(1).policy("fifo");
        let Err(e) = Recording::start(&path, b, Some(&sim(true))) else {
            panic!("an unknown policy started");
        };
        assert!(e.to_string().contains("fifo"), "{e}");
        assert!(!path.exists(), "a stub trace was left");
    }

    #[test]
    fn a_simulator_not_run_live_leaves_its_configuration_and_samples_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        let (simulated, config, f) = record(&path, Some(&sim(false)), false, false);
        assert!(!simulated);
        assert!(config.is_some());
        assert!(f.sampler.is_none());
        let t = read_trace(&path).unwrap();
        assert!(t.samples.is_empty() && t.truth.is_none());
        assert_eq!(t.task_count(), 40);
    }

    #[test]
    fn the_end_chunk_says_interrupted_or_failed() {
        let dir = tempfile::tempdir().unwrap();
        for (interrupted, failed, want) in [
            (true, false, RunOutcome::Interrupted),
            (true, true, RunOutcome::Interrupted),
            (false, true, RunOutcome::Failed),
        ] {
            let path = dir.path().join(format!("{interrupted}-{failed}.twt"));
            let (_, _, f) = record(&path, None, interrupted, failed);
            assert_eq!(f.outcome, want);
            assert!(f.sampler.is_none());
            assert_eq!(read_trace(&path).unwrap().end.unwrap().outcome, want);
        }
    }

    #[test]
    fn a_writer_taken_from_its_slot_is_not_finished_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        let (r, rt) = Recording::start(&path, Runtime::builder().workers(1), None).unwrap();
        let taken = r.writer_slot().lock().unwrap().take().unwrap();
        taken.finish_with_outcome(RunOutcome::Interrupted).unwrap();
        rt.shutdown().unwrap();
        let f = r.finish(false, false);
        let e = f.trace.unwrap_err().to_string();
        assert!(e.contains("already finished") && e.contains("t.twt"), "{e}");
        assert_eq!(
            read_trace(&path).unwrap().end.unwrap().outcome,
            RunOutcome::Interrupted
        );
    }
}
