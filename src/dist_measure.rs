//! Energy of your own distributed task graph: [`DistMeasure`] is [`crate::Measure`] for a
//! [`DistRuntime`]. Each rank records its own trace (`t.rank3.twt` for `t.twt`), the first
//! rank of each node meters the node, and [`DistMeasured::finish`] ends every rank's trace,
//! then rank 0 merges them into `t.twt` on its clock and attributes the energy of the whole
//! job, as `taskwatt run --mpi`, `taskwatt merge` and `taskwatt report` do for the built-in
//! applications.
//!
//! ```
//! use taskwatt::{Codelet, DistMeasure, Runtime};
//! use taskwatt::mpi::{DistTask, ThreadNet};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let trace = dir.path().join("job.twt");
//! // Two ranks as threads of this process (under mpirun: `MpiTransport::init()`).
//! let ranks: Vec<_> = ThreadNet::new(2)
//!     .into_iter()
//!     .map(|net| {
//!         let trace = trace.clone();
//!         std::thread::spawn(move || {
//!             let mut m = DistMeasure::new(&trace)
//!                 .start(Box::new(net), |share| Runtime::builder().workers(1).cpus(share.cpus.clone()))
//!                 .unwrap();
//!             let d = m.runtime();
//!             let scale = Codelet::new("scale").cpu(|ctx| {
//!                 ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x *= 1.000_001)
//!             });
//!             // Every rank registers the same data and submits the same tasks.
//!             let blocks: Vec<_> = (0..4)
//!                 .map(|i| d.register(i % 2, vec![1.0f64; 1 << 14]).unwrap())
//!                 .collect();
//!             for _ in 0..50 {
//!                 for b in &blocks {
//!                     d.submit(DistTask::new(&scale).rw(b)).unwrap();
//!                 }
//!             }
//!             m.finish().unwrap()
//!         })
//!     })
//!     .collect();
//! let reports: Vec<_> = ranks.into_iter().map(|r| r.join().unwrap()).collect();
//! // Rank 0 merged the ranks' traces into job.twt and attributed the job's energy.
//! let report = reports[0].energy.as_ref().unwrap();
//! assert!(report.simulated);
//! println!("{}", report.text());
//! assert!(reports[1].energy.is_none());
//! ```
//!
//! What [`DistMeasure::start`] does, on every rank (it is a rendezvous of all of them):
//! gathers the ranks' node names and rank 0's job identity (which `merge` checks), gives
//! the builder function the rank's share of its node's CPUs ([`NodeShare`]), starts the
//! rank's recording (the node's first rank with the meter: RAPL and NVML sampled for the
//! node, or the simulated meter's configuration left in the trace for the merge, which
//! simulates the node's energy over every rank's tasks), wraps the runtime in a
//! [`DistRuntime`] that streams its messages into the trace, and takes the first clock
//! estimate. [`DistMeasured::finish`] waits for the graph, takes the second, shuts the
//! rank down, finishes its trace, and waits for every rank to have done so; then rank 0
//! reads the ranks' traces, merges and attributes them.
//!
//! Limits: rank 0 must see every rank's trace at the path the rank wrote it (a shared file
//! system, or one node); when it cannot, [`DistReport::not_merged`] says which trace it
//! missed, and `taskwatt merge` does the rest after the traces are copied to one place. An
//! error on one rank leaves the others waiting in the next rendezvous: under MPI, end the
//! job on an error (`taskwatt::mpi::abort_job`), as `taskwatt run --mpi` does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use taskwatt_energy::attribution::{attribute_trace, AttributionError, AttributionOptions};
use taskwatt_energy::{DetectOptions, EnergyError, MeterChoice};
use taskwatt_mpi::merge::JOB_PARAM;
use taskwatt_mpi::{DistError, DistRuntime, DistStats, Transport};
use taskwatt_runtime::RuntimeBuilder;
use taskwatt_traces::{
    read_trace, Chunk, Clock, ClockSample, CommChunk, CommRecord, Timestamp, TraceError, TraceSink,
};

use crate::measure::EnergyReport;
use crate::recording::{Metering, Recording, RecordingError, WriterSlot, GRAPH};

/// How to measure a distributed run (see the module docs).
#[derive(Clone, Debug)]
pub struct DistMeasure {
    trace: PathBuf,
    meter: MeterChoice,
    period: Duration,
    detect: DetectOptions,
    energy: bool,
    merge: bool,
    accesses: bool,
    attribution: AttributionOptions,
}

/// A rank's place on its node, given to [`DistMeasure::start`]'s builder function.
#[derive(Clone, Debug)]
pub struct NodeShare {
    /// This rank.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// This rank's node (the host name under MPI).
    pub node: String,
    /// This rank's place among the ranks of its node (0 meters the node).
    pub local: usize,
    /// Ranks on this node.
    pub ranks_on_node: usize,
    /// This rank's share of the CPUs the process may use: the `local`-th contiguous share
    /// of the node's (`taskwatt_mpi::cpu_share`). Give the builder at most this many
    /// workers, on these CPUs; empty where the CPUs cannot be read.
    pub cpus: Vec<u32>,
}

impl NodeShare {
    /// This rank's place on its node: a rendezvous of every rank, which exchange their
    /// node names.
    ///
    /// # Errors
    /// The rendezvous failed.
    pub fn gather(net: &mut dyn Transport) -> Result<NodeShare, DistMeasureError> {
        let (rank, size) = (net.rank(), net.size());
        let names =
            net.gather_names(&net.node_name())
                .map_err(|message| DistMeasureError::Rendezvous {
                    rank,
                    what: "the node names".into(),
                    message,
                })?;
        let node = names.get(rank).cloned().unwrap_or_default();
        let on_node: Vec<usize> = (0..size).filter(|&r| names[r] == node).collect();
        let local = on_node.iter().position(|&r| r == rank).unwrap_or(0);
        Ok(NodeShare {
            rank,
            size,
            node,
            local,
            ranks_on_node: on_node.len(),
            cpus: taskwatt_mpi::cpu_share(local, on_node.len()),
        })
    }
}

/// The job's identity: rank 0's draw, which every rank records (a rendezvous), so that
/// `merge` refuses the traces of two jobs.
fn job_of(net: &mut dyn Transport) -> Result<String, DistMeasureError> {
    let rank = net.rank();
    Ok(net
        .gather_names(&job_draw())
        .map_err(|message| DistMeasureError::Rendezvous {
            rank,
            what: "the job's identity".into(),
            message,
        })?
        .swap_remove(0))
}

impl DistMeasure {
    /// Measures into `trace`: each rank writes `STEM.rankN.EXT` beside it, and rank 0 the
    /// merged trace at `trace` itself. The meter is `MeterChoice::Auto` sampled every
    /// 10 ms, the data accesses are traced, and rank 0 merges and attributes.
    pub fn new(trace: impl AsRef<Path>) -> DistMeasure {
        DistMeasure {
            trace: trace.as_ref().to_path_buf(),
            meter: MeterChoice::Auto,
            period: Duration::from_millis(10),
            detect: DetectOptions::default(),
            energy: true,
            merge: true,
            accesses: true,
            attribution: AttributionOptions::default(),
        }
    }

    /// Which meter the first rank of each node samples (`Auto` falls back to the simulated
    /// one, labelled so).
    pub fn meter(mut self, meter: MeterChoice) -> DistMeasure {
        self.meter = meter;
        self
    }

    /// Sampling period (1 ms to 1 s).
    pub fn period(mut self, period: Duration) -> DistMeasure {
        self.period = period;
        self
    }

    /// Where the meters live, and the simulator's configuration.
    pub fn detect_options(mut self, d: DetectOptions) -> DistMeasure {
        self.detect = d;
        self
    }

    /// Whether to meter at all (on by default): without, the ranks' traces hold their
    /// tasks and messages only, and no energy is attributed.
    pub fn energy(mut self, on: bool) -> DistMeasure {
        self.energy = on;
        self
    }

    /// Whether rank 0 merges the ranks' traces and attributes the job's energy in
    /// [`DistMeasured::finish`] (on by default). Off, each rank only finishes its own
    /// trace (`taskwatt merge` then merges them), and no rank waits for the others.
    pub fn merge(mut self, on: bool) -> DistMeasure {
        self.merge = on;
        self
    }

    /// Whether the traces record each task's data accesses (on by default; see
    /// [`crate::Measure::trace_accesses`]).
    pub fn trace_accesses(mut self, on: bool) -> DistMeasure {
        self.accesses = on;
        self
    }

    /// How rank 0 attributes the merged trace.
    pub fn attribution(mut self, o: AttributionOptions) -> DistMeasure {
        self.attribution = o;
        self
    }

    /// This rank's trace: `STEM.rankN.EXT` beside the merged one.
    pub fn rank_trace(&self, rank: usize) -> PathBuf {
        rank_path(&self.trace, rank)
    }

    /// Starts this rank (every rank calls it: a rendezvous): the runtime built by
    /// `builder` from this rank's [`NodeShare`], recorded into this rank's trace, with
    /// the node's meter on the node's first rank, in a [`DistRuntime`] over `net`.
    ///
    /// # Errors
    /// [`DistMeasureError`]: the rendezvous failed, the trace cannot be created, a meter
    /// named cannot be opened, the runtime cannot start.
    pub fn start(
        self,
        mut net: Box<dyn Transport>,
        builder: impl FnOnce(&NodeShare) -> RuntimeBuilder,
    ) -> Result<DistMeasured, DistMeasureError> {
        let share = NodeShare::gather(&mut *net)?;
        let (rank, size, local) = (share.rank, share.size, share.local);
        let job = job_of(&mut *net)?;
        let node = share.node.clone();
        let b = builder(&share)
            .param("mpi_rank", rank)
            .param(JOB_PARAM, &job)
            .param("mpi_size", size)
            .trace_accesses(self.accesses);
        // The node's first rank meters it; the simulated meter cannot see the other
        // ranks' tasks live, so it is run by the merge over all of them.
        let metering = (local == 0 && self.energy).then(|| Metering {
            meter: self.meter,
            detect: self.detect.clone(),
            period: self.period,
            live_simulation: false,
        });
        let path = self.rank_trace(rank);
        let (recording, rt) = Recording::start(&path, b, metering.as_ref())?;
        let sink = recording.sink().clone();
        let sim_meter =
            match recording.simulated_config() {
                Some(d) => Some(serde_json::to_value(&d.sim).map_err(|e| {
                    DistMeasureError::Rendezvous {
                        rank,
                        what: "the simulated meter's configuration".into(),
                        message: e.to_string(),
                    }
                })?),
                None => None,
            };
        let simulated = sim_meter.is_some();
        let mut d = DistRuntime::with_trace(rt, net, sink.clone())?;
        // The time of the rendezvous, not of the call (rank 0 may arrive seconds later).
        let first = d.clock_sample()?;
        // What `merge --recover` needs of a rank that dies before its end, written now;
        // the chunk at the end, with both clock estimates and every message, supersedes it.
        let start_chunk = CommChunk {
            rank: rank as u32,
            size: size as u32,
            clock: vec![first],
            workers: d.runtime().workers().iter().map(|w| w.id).collect(),
            node,
            sim_meter,
            sim_period_ns: self.period.as_nanos() as u64,
            events: Vec::new(),
            partial: false,
        };
        sink.send(Chunk::Comms(start_chunk.clone()));
        Ok(DistMeasured {
            d: Some(d),
            recording: Some(recording),
            sink: Some(sink),
            start_chunk,
            first,
            share,
            simulated,
            app_start: Clock::now(),
            app_end: None,
            app_failed: false,
            measure: self,
        })
    }
}

/// A rank being measured: submit to [`DistMeasured::runtime`], then
/// [`DistMeasured::finish`] on every rank.
pub struct DistMeasured {
    d: Option<DistRuntime>,
    recording: Option<Recording>,
    /// Dropped before the trace is finished.
    sink: Option<TraceSink>,
    start_chunk: CommChunk,
    first: ClockSample,
    share: NodeShare,
    simulated: bool,
    app_start: Timestamp,
    /// Where [`DistMeasured::end_application`] ended the graph.
    app_end: Option<Timestamp>,
    /// Set by [`DistMeasured::mark_failed`].
    app_failed: bool,
    measure: DistMeasure,
}

impl std::fmt::Debug for DistMeasured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistMeasured")
            .field("rank", &self.share.rank)
            .field("trace", &self.measure.rank_trace(self.share.rank))
            .finish_non_exhaustive()
    }
}

/// What [`DistMeasured::finish`] returns on each rank.
#[derive(Debug)]
pub struct DistReport {
    /// This rank, and the job's size.
    pub rank: usize,
    /// Ranks in the job.
    pub size: usize,
    /// This rank's counts (tasks run and skipped, messages, cache hits).
    pub stats: DistStats,
    /// This rank's messages.
    pub messages: Vec<CommRecord>,
    /// This rank's clock against rank 0's, at the start.
    pub clock: ClockSample,
    /// This rank's trace.
    pub trace: PathBuf,
    /// Rank 0: the merged trace, once written.
    pub merged: Option<PathBuf>,
    /// Rank 0: the job's energy, attributed over the merged trace (`None` without energy,
    /// on the other ranks, or when the merge could not be done).
    pub energy: Option<EnergyReport>,
    /// Rank 0: why the traces were not merged (`merge(false)`, a rank's trace not visible
    /// from rank 0), and how to merge them by hand.
    pub not_merged: Option<String>,
}

impl DistMeasured {
    /// The distributed runtime to register data with and submit to.
    pub fn runtime(&mut self) -> &mut DistRuntime {
        self.d.as_mut().expect("the runtime lives until finish")
    }

    /// This rank's place on its node.
    pub fn share(&self) -> &NodeShare {
        &self.share
    }

    /// This rank's clock against rank 0's, taken at the start.
    pub fn first_clock(&self) -> ClockSample {
        self.first
    }

    /// Whether the node's energy comes from the simulated meter (run by the merge).
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    /// Waits for this rank's tasks and messages and ends its `graph` span (the report's
    /// `application` region) now, so that what the rank does before
    /// [`DistMeasured::finish`] (rank 0 checking the gathered result, say) is not counted
    /// as the application's idle energy. A second call moves the end.
    ///
    /// # Errors
    /// A failed task or message, as [`DistRuntime::wait_all`] (the span ends all the same).
    pub fn end_application(&mut self) -> Result<(), DistError> {
        let waited = self.runtime().wait_all();
        self.app_end = Some(Clock::now());
        waited
    }

    /// Marks the run failed by the application's own account (an error of its own, a
    /// wrong result): [`DistMeasured::finish`] ends this rank's trace with outcome
    /// `failed`, which the merged trace and its report then say.
    pub fn mark_failed(&mut self) {
        self.app_failed = true;
    }

    /// The trace writer's slot, for a signal handler that ends the process at once and
    /// finishes the trace itself (`taskwatt run --mpi` does).
    pub fn writer_slot(&self) -> WriterSlot {
        self.recording
            .as_ref()
            .expect("the recording lives until finish")
            .writer_slot()
    }

    /// Waits for this rank's tasks and messages, shuts the rank down and finishes its
    /// trace; then, unless [`DistMeasure::merge`] turned it off, waits for every rank to
    /// have done so, and rank 0 merges the traces and attributes the job's energy. Every
    /// rank calls it.
    ///
    /// # Errors
    /// A failed task or message on this rank (its trace is finished with outcome
    /// `failed` all the same), the trace cannot be finished, the final rendezvous fails;
    /// on rank 0, a merged trace that cannot be written or attributed. A rank's trace
    /// rank 0 cannot read is not an error: [`DistReport::not_merged`] says so.
    pub fn finish(mut self) -> Result<DistReport, DistMeasureError> {
        let mut d = self.d.take().expect("finish runs once");
        let recording = self.recording.take().expect("finish runs once");
        let waited = d.wait_all();
        let end = self.app_end.unwrap_or_else(Clock::now);
        recording.mark(GRAPH, &[(self.app_start, end)]);
        let last = d.clock_sample();
        let shut = d.end();
        let failed = self.app_failed || waited.is_err() || last.is_err() || shut.is_err();
        // Without the shutdown's list of messages, the ones streamed as they completed
        // stand (the start chunk is not superseded).
        let sink = self.sink.take().expect("finish runs once");
        if let (Ok(last), Ok(ended)) = (&last, &shut) {
            sink.send(Chunk::Comms(CommChunk {
                clock: vec![self.first, *last],
                events: ended.messages.clone(),
                ..self.start_chunk.clone()
            }));
        }
        drop(sink);
        let finished = recording.finish(false, failed);
        waited?;
        last?;
        let ended = shut?;
        let (stats, messages, mut net) = (ended.stats, ended.messages, ended.transport);
        finished.sampler.transpose()?;
        finished.trace?;
        let (rank, size) = (self.share.rank, self.share.size);
        let mut report = DistReport {
            rank,
            size,
            stats,
            messages,
            clock: self.first,
            trace: self.measure.rank_trace(rank),
            merged: None,
            energy: None,
            not_merged: None,
        };
        if !self.measure.merge {
            if rank == 0 {
                // Nothing says what to do with the ranks' traces otherwise.
                report.not_merged = Some(format!(
                    "merge(false): merge the ranks' traces with `taskwatt merge {} -o {}`, \
                     then `taskwatt report {}`",
                    rank_path(&self.measure.trace, 0)
                        .display()
                        .to_string()
                        .replace(".rank0.", ".rank*."),
                    self.measure.trace.display(),
                    self.measure.trace.display()
                ));
            }
            return Ok(report);
        }
        // Every rank's trace is complete past this point.
        net.barrier()
            .map_err(|message| DistMeasureError::Rendezvous {
                rank,
                what: "the end of every rank's trace".into(),
                message,
            })?;
        if rank != 0 {
            return Ok(report);
        }
        let paths: Vec<PathBuf> = (0..size).map(|r| self.measure.rank_trace(r)).collect();
        let mut traces = Vec::with_capacity(size);
        for p in &paths {
            match read_trace(p) {
                Ok(t) => traces.push((p.display().to_string(), t)),
                Err(e) => {
                    report.not_merged = Some(format!(
                        "rank 0 cannot read {} ({e}): on a cluster without a shared file \
                         system, copy the ranks' traces to one place and run `taskwatt merge \
                         {} -o {}`, then `taskwatt report {}`",
                        p.display(),
                        paths
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(" "),
                        self.measure.trace.display(),
                        self.measure.trace.display()
                    ));
                    return Ok(report);
                }
            }
        }
        let (merged, _) = taskwatt_mpi::merge::merge(traces).map_err(DistMeasureError::Merge)?;
        taskwatt_traces::refuse_output_over_input(
            &self.measure.trace,
            &paths.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        )?;
        merged.save(&self.measure.trace)?;
        report.merged = Some(self.measure.trace.clone());
        if self.measure.energy {
            let simulated = merged.is_simulated();
            let attribution = attribute_trace(&merged, &self.measure.attribution)?;
            let job = crate::job::job_of(&merged, &attribution);
            let transfers = (!merged.transfers.is_empty()).then(|| merged.transfer_summary());
            report.energy = Some(EnergyReport::of_trace(
                attribution,
                simulated,
                self.measure.trace.clone(),
                job,
                transfers,
            ));
        }
        Ok(report)
    }
}

impl Drop for DistMeasured {
    /// Dropped before [`DistMeasured::finish`] (a panic, an early return on an error):
    /// this rank will submit no more, and the others would wait for its messages until
    /// the stall limit (300 s, a user's job hung there), so it finishes its trace with
    /// outcome `failed` (tasks not yet flushed by the workers are lost) and ends the job,
    /// as a rank that dies does (`MPI_Abort` under MPI; with `ThreadNet` the other ranks'
    /// waits fail).
    fn drop(&mut self) {
        let Some(recording) = self.recording.take() else {
            return;
        };
        drop(self.sink.take());
        if let Err(e) = recording.finish(false, true).trace {
            log::warn!(
                "the measured rank was dropped before finish, and its trace could not be \
                 finished: {e}"
            );
        }
        if let Some(d) = self.d.take() {
            let why = if std::thread::panicking() {
                "its application thread panicked before DistMeasured::finish"
            } else {
                "DistMeasured was dropped before finish (an early return?)"
            };
            eprintln!("taskwatt: rank {}: {why}: ending the job", self.share.rank);
            d.abort_job(why);
        }
    }
}

/// Errors of a measured distributed run.
#[derive(thiserror::Error)]
pub enum DistMeasureError {
    /// A rendezvous of the ranks failed.
    #[error("rank {rank}: the rendezvous for {what} failed: {message}")]
    Rendezvous {
        /// This rank.
        rank: usize,
        /// What the ranks were exchanging.
        what: String,
        /// What the transport said.
        message: String,
    },
    /// The rank's recording could not start.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// The distributed runtime failed (a task, a message).
    #[error(transparent)]
    Dist(#[from] DistError),
    /// A meter could not be read.
    #[error(transparent)]
    Energy(#[from] EnergyError),
    /// A trace could not be written or read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The ranks' traces could not be merged.
    #[error("merging the ranks' traces: {0}")]
    Merge(String),
    /// The merged trace could not be attributed.
    #[error(transparent)]
    Attribution(#[from] AttributionError),
}

/// `out.twt` for rank 3 of a job: `out.rank3.twt`.
pub fn rank_path(path: &Path, rank: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned());
    let ext = path
        .extension()
        .map_or_else(|| "twt".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.rank{rank}.{ext}"))
}

/// A job identity: the wall clock in ns and the process id, in hex (two `mpirun`s started
/// in the same nanosecond by the same process id do not happen).
fn job_draw() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("{ns:016x}-{:x}", std::process::id())
}

taskwatt_traces::debug_as_display!(DistMeasureError);
