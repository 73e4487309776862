//! The runtime: building it, submitting tasks, waiting, and shutting down.
//!
//! # Shutdown (what `Drop` does)
//!
//! Dropping a [`Runtime`] with tasks pending is defined: it finishes them.
//!
//! 1. Wait until every submitted task has finished, failed or been cancelled. (No
//!    acquisition guard can be alive: guards borrow the runtime.) Failures not yet reported
//!    by a `wait_all` are printed to stderr, since `Drop` cannot return them; call
//!    [`Runtime::shutdown`] to get them as an error instead.
//! 2. Raise the shutdown flag and wake every worker.
//! 3. Each worker, finding no task, flushes its trace buffer and exits.
//! 4. Join the worker threads, then the trace flusher.
//!
//! # Interruption
//!
//! [`Runtime::interrupt`] (or an [`InterruptHandle`] from another thread, a signal handler's
//! thread say) makes the workers finish the task each is running and start no other: every
//! task not yet started is counted as not run and finished at once, its successors with it,
//! so that `wait_all` returns [`RuntimeError::Interrupted`] within one task's duration. Later
//! submissions are refused with the same error. The trace keeps every task that ran.
//!
//! # Trace flushing
//!
//! Each worker records into its own buffer, sent to the trace sink when full, when the
//! worker parks and when it exits. So that a killed process loses little, a flusher thread
//! also sends every buffer whose oldest record is [`RuntimeBuilder::trace_flush`] old (25 ms
//! by default), looking twice per period: a record reaches the sink at most 1.5 periods
//! after its task ended, even while its worker runs a long task. (The buffer is behind an
//! uncontended lock for this: one lock per recorded task.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use taskwatt_scheduler::{
    create_policy_with, policy_from_env, ArchMask, Local, Origin, Policy, PolicyOptions,
    WorkerDesc, DEFAULT_POLICY,
};
use taskwatt_traces::{
    AccessMode, Arch, Chunk, Clock, CodeletInfo, ExecutionObserver, RunMeta, TaskAccess, TaskChunk,
    TaskId, Timestamp, TraceSink, Transfer, WorkerId, WorkerInfo,
};

use crate::codelet::CodeletInner;
use crate::context::MAX_ACCESSES;
use crate::device::{Backend, GpuBackend, WorkerState};
use crate::error::{RuntimeError, TaskFailure};
use crate::handle::MAX_DEVICES;
use crate::handle::{Access, Handle, HandleCore, READERS_PRUNE_MIN};
use crate::pool::NodePool;
use crate::sync::{Sleep, TaskCount, Waiters};
use crate::task::{
    Body, Kind, Preds, ReadyTask, Task, TaskHandle, TaskNode, DONE_CANCELLED, DONE_FAILED, DONE_OK,
};
use crate::topology::Topology;
use crate::worker::{self, IdlePolicy, WorkerCtx};

/// Makes a custom scheduling policy for the given workers.
pub type PolicyFactory = Box<dyn FnOnce(&[WorkerDesc]) -> Box<dyn Policy<ReadyTask>> + Send>;

enum PolicyChoice {
    Default,
    Named(String),
    Custom(PolicyFactory),
}

/// Configures and builds a [`Runtime`].
pub struct RuntimeBuilder {
    workers: Option<usize>,
    policy: PolicyChoice,
    pin: bool,
    /// CPUs the workers may be placed on, instead of the process's allowed set.
    cpus: Option<Vec<u32>>,
    /// Run no implementation (the graph only).
    dry_run: bool,
    sink: TraceSink,
    observer: Option<Arc<dyn ExecutionObserver>>,
    app: Option<String>,
    params: Vec<(String, String)>,
    trace_chunk: usize,
    /// `None`: the defaults, or `TASKWATT_IDLE_US` (read by `build`).
    idle: Option<IdlePolicy>,
    /// `None`: the default, or `TASKWATT_STAGING_US` (read by `build`).
    staging: Option<std::time::Duration>,
    trace_flush: Duration,
    /// GPUs: one driving worker and one memory node each.
    gpus: usize,
    gpu_backend: GpuBackend,
    /// Where to keep performance models (none: not recorded).
    perf_models: Option<std::path::PathBuf>,
    /// Whether tasks' data accesses go to the trace.
    trace_accesses: bool,
    /// Extra power per (codelet name, architecture), W, for dmdae.
    task_powers: Vec<(String, Arch, f64)>,
    /// The built-in policies' knobs (dmdae's weights).
    policy_options: PolicyOptions,
}

/// The performance models of a runtime that records them.
pub(crate) struct PerfState {
    dir: std::path::PathBuf,
    /// The models saved before this run.
    pub(crate) loaded: crate::perfmodel::PerfModels,
    /// Per worker: what it measured (locked by its worker per task, and at shutdown).
    pub(crate) workers: Vec<CachePadded<Mutex<crate::perfmodel::WorkerHistory>>>,
}

/// Transfers sent to the trace in one chunk.
const TRANSFERS_PER_CHUNK: usize = 512;

/// Task accesses sent to the trace in one chunk.
const ACCESSES_PER_CHUNK: usize = 8192;

/// The most workers a runtime starts (StarPU's `STARPU_NMAXWORKERS` is 80 by default):
/// more is refused by [`RuntimeBuilder::build`], not attempted.
pub const MAX_WORKERS: usize = 4096;

/// The largest trace chunk, in records ([`RuntimeBuilder::trace_chunk`]).
pub const MAX_TRACE_CHUNK: usize = 1 << 20;

/// The longest handle name [`Runtime::set_name`] keeps, in bytes.
pub const MAX_HANDLE_NAME: usize = 256;

/// The default bound on how long a finished task's record waits in its worker's buffer
/// ([`RuntimeBuilder::trace_flush`]).
pub const DEFAULT_TRACE_FLUSH: Duration = Duration::from_millis(25);

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            workers: None,
            policy: PolicyChoice::Default,
            pin: true,
            cpus: None,
            dry_run: false,
            sink: TraceSink::null(),
            observer: None,
            app: None,
            params: Vec::new(),
            policy_options: PolicyOptions::default(),
            trace_chunk: 4096,
            idle: None,
            staging: None,
            trace_flush: DEFAULT_TRACE_FLUSH,
            gpus: 0,
            gpu_backend: GpuBackend::Emulated,
            perf_models: None,
            trace_accesses: false,
            task_powers: Vec::new(),
        }
    }
}

impl RuntimeBuilder {
    /// Number of CPU workers (default: one per PU the process may run on).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Adds `n` emulated GPUs (at most [`MAX_DEVICES`]): each is driven by a worker of
    /// architecture [`Arch::Gpu`] (`device: Some(i)`, after the CPU workers, not pinned)
    /// and has a memory node of its own, `1 + i`, whose copies of the data are separate
    /// allocations, so that every transfer really copies and a coherence bug gives a wrong
    /// result. A GPU worker runs a codelet's GPU implementation, or else its CPU one, on
    /// its node's copies. Only handles registered with
    /// [`Runtime::register_replicated`] can be copied: a task on any other handle runs
    /// on CPU workers.
    ///
    /// The emulated device exists to test everything above a GPU driver (scheduling
    /// across architectures, data coherence, transfers, the GPU energy domain) on machines
    /// without one; its timings are CPU timings.
    pub fn emulated_gpus(self, n: usize) -> Self {
        self.gpus(n, GpuBackend::Emulated)
    }

    /// Adds `n` GPUs (at most [`MAX_DEVICES`]) driven by `backend`: each gets a worker of
    /// its own (after the CPU workers, `arch: Gpu`, `device: Some(i)`) and memory node
    /// `1 + i`. With [`GpuBackend::Cuda`] (cargo feature `cuda`), `build` opens CUDA
    /// devices `0..n` and fails, saying what is missing, where the driver, a device or
    /// cuBLAS is not there; their workers run codelets' GPU implementations only, on data
    /// registered with [`Runtime::register_device`].
    pub fn gpus(mut self, n: usize, backend: GpuBackend) -> Self {
        self.gpus = n;
        self.gpu_backend = backend;
        self
    }

    /// Records every successful task's duration per (codelet, architecture, footprint),
    /// and merges them into the performance models kept in `dir` at shutdown (see
    /// [`PerfModels`](crate::PerfModels); [`PerfModels::default_dir`](crate::PerfModels::default_dir)
    /// is the usual place). The models already there are loaded by `build`: a model file
    /// that cannot be read is an error then, not at shutdown.
    pub fn perf_models(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.perf_models = Some(dir.into());
        self
    }

    /// The scheduling policy by name (`eager`, `ws`, `lws`, `prio`, `dmda`, `dmdas`). Without this,
    /// `TASKWATT_SCHED` is read, then the default `lws` is used.
    pub fn policy(mut self, name: impl Into<String>) -> Self {
        self.policy = PolicyChoice::Named(name.into());
        self
    }

    /// The built-in policies' knobs, typed (dmdae's [`EnergyWeights`](taskwatt_scheduler::EnergyWeights)):
    /// a knob given here is used whatever the environment says; one left `None` takes the
    /// policy's defaults and its environment variables (`TASKWATT_SCHED_GAMMA`...). A bad
    /// value is an error of `build` naming the knob. The values used go to the trace's
    /// parameters as `sched.<knob>`.
    pub fn policy_options(mut self, options: PolicyOptions) -> Self {
        self.policy_options = options;
        self
    }

    /// A custom policy (see examples/custom_policy.rs).
    pub fn custom_policy<F>(mut self, make: F) -> Self
    where
        F: FnOnce(&[WorkerDesc]) -> Box<dyn Policy<ReadyTask>> + Send + 'static,
    {
        self.policy = PolicyChoice::Custom(Box::new(make));
        self
    }

    /// Whether to pin each worker to its PU (default true).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Runs no implementation: each task completes as soon as a worker takes it, so that a
    /// program's task graph, dependencies and data accesses are recorded (in the trace)
    /// without computing anything; what `taskwatt run --platform --no-exec` simulates. The
    /// data are left as they were registered.
    pub fn dry_run(mut self, dry: bool) -> Self {
        self.dry_run = dry;
        self
    }

    /// Places the workers on these CPUs (OS ids) instead of all the process may use: the
    /// share of one of several processes on a node (taskwatt-mpi's ranks). Ids the process
    /// may not use are left out; none left falls back to the process's set.
    pub fn cpus(mut self, cpus: Vec<u32>) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Where task records go (default: nowhere).
    pub fn trace(mut self, sink: TraceSink) -> Self {
        self.sink = sink;
        self
    }

    /// Receives every task start and end as it happens (e.g. a simulated energy meter).
    pub fn observer(mut self, observer: Arc<dyn ExecutionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The application name recorded in the trace.
    pub fn app(mut self, app: impl Into<String>) -> Self {
        self.app = Some(app.into());
        self
    }

    /// A parameter recorded in the trace's run metadata.
    pub fn param(mut self, key: impl Into<String>, value: impl ToString) -> Self {
        self.params.push((key.into(), value.to_string()));
        self
    }

    /// The staging window (default 2 µs). A task ready as soon as it is submitted is
    /// staged: it reaches the scheduling policy once the oldest staged task is this old
    /// and a worker looks (after each task it runs, and while it polls for work),
    /// together with the tasks staged after it. A worker that just ran out of work then
    /// does not take each new task as the submitting thread writes it, which made the
    /// two cores pass the same cache lines back and forth for every task. Tasks released
    /// by finishing predecessors are not staged.
    ///
    /// Waiting (`wait_all`, `wait`, `acquire`, `unregister`) and a parked worker's
    /// wake-up take the staged tasks at once, and so does a worker about to park. While
    /// every worker runs a task, a staged task waits for the window or the first of
    /// those tasks to end, whichever is later. Zero gives every task to the policy at
    /// submission. `TASKWATT_STAGING_US=<µs>` (decimals allowed) sets the default. See
    /// docs/runtime.md, "Staging".
    pub fn staging(mut self, window: std::time::Duration) -> Self {
        self.staging = Some(window);
        self
    }

    /// How long an idle worker keeps looking for work before it parks: `spin` of busy
    /// polling (a released task is picked up within ~0.2 µs), then `then_yield` of polling
    /// with `sched_yield` in between (a thread sharing the core runs meanwhile). Defaults:
    /// 50 µs and 100 µs, or `TASKWATT_IDLE_US=<spin>,<yield>` from the environment. Longer
    /// keeps fine-grained graphs off the futex wake-up path; zero parks at once (least
    /// CPU, and least energy, burnt while idle).
    pub fn idle(mut self, spin: std::time::Duration, then_yield: std::time::Duration) -> Self {
        self.idle = Some(IdlePolicy {
            spin,
            yield_: then_yield,
        });
        self
    }

    /// The extra power, W, that a task of codelet `name` draws on architecture `arch`,
    /// summed over the energy domains: what `dmdae` weighs (with the expected duration)
    /// as the task's energy. taskwatt's CLI fills it from a fitted energy model.
    pub fn task_powers(mut self, powers: Vec<(String, Arch, f64)>) -> Self {
        self.task_powers = powers;
        self
    }

    /// Also writes each task's data accesses (handle, mode, bytes) to the trace (format
    /// 1.3 Accesses chunks): what a replay of the graph needs. Off by default: with a
    /// trace, it costs the submitting thread a lock and a copy per task, and the trace
    /// writer their encoding (traced empty tasks 15 to 37 % slower on 2 cores,
    /// BENCHMARKS.md); `taskwatt run` turns it on.
    pub fn trace_accesses(mut self, on: bool) -> Self {
        self.trace_accesses = on;
        self
    }

    /// Records per trace chunk (default 4096; at most [`MAX_TRACE_CHUNK`], checked by
    /// `build`).
    pub fn trace_chunk(mut self, records: usize) -> Self {
        self.trace_chunk = records.max(1);
        self
    }

    /// Sends a worker's trace records to the sink once the oldest is `every` old, even
    /// while the worker runs a long task (default [`DEFAULT_TRACE_FLUSH`], 25 ms): a
    /// process killed without warning loses at most the records of tasks that ended in
    /// the last 1.5 × `every`, plus what the trace writer had not written yet (see
    /// docs/trace-format.md, "What a crash loses"). Zero turns the flusher off: records
    /// then go out when a buffer fills, when its worker parks, and at shutdown.
    pub fn trace_flush(mut self, every: Duration) -> Self {
        self.trace_flush = every;
        self
    }

    /// The workers `build` will start (ids, pinned CPUs, cores, packages), without
    /// starting anything: an energy meter needs them before the runtime exists.
    pub fn worker_plan(&self) -> Result<Vec<WorkerInfo>, RuntimeError> {
        self.plan().map(|(_, w)| w)
    }

    fn plan(&self) -> Result<(Topology, Vec<WorkerInfo>), RuntimeError> {
        let topology = Topology::discover();
        let mut allowed: Vec<u32> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id as u32)
            .collect();
        if let Some(share) = &self.cpus {
            let mine: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|c| share.contains(c))
                .collect();
            if !mine.is_empty() {
                allowed = mine;
            }
        }
        let n = match self.workers {
            Some(0) => {
                return Err(RuntimeError::Workers(
                    "0 workers: ask for at least 1".into(),
                ))
            }
            Some(n) if n > MAX_WORKERS => {
                return Err(RuntimeError::Workers(format!(
                    "{n} workers: at most {MAX_WORKERS} are supported"
                )))
            }
            Some(n) => n,
            None => allowed.len().clamp(1, MAX_WORKERS),
        };
        if self.gpus > MAX_DEVICES {
            return Err(RuntimeError::Workers(format!(
                "{} {} GPUs: at most {MAX_DEVICES} are supported (one memory node each)",
                self.gpus, self.gpu_backend
            )));
        }
        let placement = topology.placement(n, &allowed);
        let workers = (0..n)
            .map(|i| {
                let pu = placement.get(i);
                WorkerInfo {
                    id: i as u32,
                    arch: Arch::Cpu,
                    cpu: if self.pin {
                        pu.map(|p| p.os_index)
                    } else {
                        None
                    },
                    core: pu.and_then(|p| p.core),
                    package: pu.map_or(0, |p| p.package),
                    numa: pu.and_then(|p| p.numa),
                    device: None,
                }
            })
            .collect::<Vec<_>>();
        let mut workers = workers;
        for i in 0..self.gpus {
            let near = workers.first().map(|w| (w.package, w.numa));
            workers.push(WorkerInfo {
                id: (n + i) as u32,
                arch: Arch::Gpu,
                cpu: None,
                core: None,
                package: near.map_or(0, |(p, _)| p),
                numa: near.and_then(|(_, m)| m),
                device: Some(i as u32),
            });
        }
        Ok((topology, workers))
    }

    /// Discovers the topology, creates the policy, starts and pins the workers, and
    /// writes the run metadata to the trace.
    pub fn build(mut self) -> Result<Runtime, RuntimeError> {
        let (topology, workers) = self.plan()?;
        if self.trace_chunk > MAX_TRACE_CHUNK {
            return Err(RuntimeError::TraceChunk {
                records: self.trace_chunk,
                max: MAX_TRACE_CHUNK,
            });
        }
        let idle = match self.idle {
            Some(idle) => idle,
            None => IdlePolicy::from_env()?,
        };
        let backends = crate::device::open(self.gpu_backend, self.gpus).map_err(|message| {
            RuntimeError::Device {
                backend: self.gpu_backend.name(),
                message,
            }
        })?;
        for b in &backends {
            log::info!("{}", b.describe());
        }
        // The models of runs on real GPUs are kept apart from those of emulated ones, whose
        // "GPU" durations are CPU durations.
        let perf_dir = self.perf_models.clone().map(|d| {
            if self.gpu_backend == GpuBackend::Emulated || self.gpus == 0 {
                d
            } else {
                d.join(self.gpu_backend.name())
            }
        });
        let mut device_states: Vec<Option<WorkerState>> = Vec::with_capacity(workers.len());
        for w in &workers {
            device_states.push(match w.device {
                Some(d) => {
                    backends[d as usize]
                        .worker()
                        .map_err(|message| RuntimeError::Device {
                            backend: self.gpu_backend.name(),
                            message,
                        })?
                }
                None => None,
            });
        }
        let staging = match self.staging {
            Some(window) => window,
            None => staging_from_env()?,
        };
        // How fast data reaches each device and comes back, for dmda: measured once per
        // machine and kept beside the performance models (not measured without them).
        let buses: Vec<Option<crate::device::BusMeasure>> = match &perf_dir {
            Some(dir) => backends
                .iter()
                .map(|b| {
                    crate::device::bus_of(&**b, dir)
                        .map_err(|e| {
                            log::warn!("the bus of {} was not measured: {e}", b.describe())
                        })
                        .ok()
                })
                .collect(),
            None => vec![None; backends.len()],
        };
        let descs: Vec<WorkerDesc> = workers
            .iter()
            .map(|w| {
                let (node, bus) = match w.device {
                    Some(d) => (
                        1 + d as usize,
                        buses[d as usize].map(|m| m.towards_device()),
                    ),
                    None => (
                        0,
                        buses.first().copied().flatten().map(|m| m.towards_host()),
                    ),
                };
                WorkerDesc::new(w.id as usize, w.package, w.numa)
                    .with_arch(ArchMask::of_index(w.arch.index()))
                    .with_memory_node(node, bus)
            })
            .collect();
        let policy: Box<dyn Policy<ReadyTask>> = match self.policy {
            PolicyChoice::Custom(make) => make(&descs),
            PolicyChoice::Named(name) => {
                create_policy_with(&name, &descs, None, &self.policy_options)?
            }
            PolicyChoice::Default => create_policy_with(
                policy_from_env()?.unwrap_or(DEFAULT_POLICY),
                &descs,
                None,
                &self.policy_options,
            )?,
        };
        let policy_name = policy.name().to_string();
        for (knob, value) in policy.knobs() {
            self.params.push((format!("sched.{knob}"), value));
        }

        let meta = RunMeta {
            taskwatt_version: env!("CARGO_PKG_VERSION").to_string(),
            policy: policy_name.clone(),
            host: hostname(),
            wall_start_unix_ns: Clock::unix_now_ns(),
            clock_origin_unix_ns: Clock::origin_unix_ns(),
            command_line: std::env::args().collect(),
            app: self.app,
            params: self.params.into_iter().collect(),
            workers: workers.clone(),
            topology: topology.info(),
        };
        self.sink.send(Chunk::Meta(meta.clone()));

        let mut archs = [false; Arch::COUNT];
        for w in &workers {
            archs[w.arch.index()] = true;
        }
        let devices = workers.iter().any(|w| w.device.is_some());
        let perf = match &perf_dir {
            Some(dir) => Some(PerfState {
                loaded: crate::perfmodel::PerfModels::load(dir)?,
                dir: dir.clone(),
                workers: (0..workers.len())
                    .map(|_| CachePadded::new(Mutex::new(Default::default())))
                    .collect(),
            }),
            None => None,
        };
        let timing = self.sink.is_enabled() || self.observer.is_some() || perf.is_some();
        let predictions = perf.is_some() && policy.uses_expected_durations();
        let any_worker_takes_a_push = policy.any_worker_takes_a_push();
        let trace_bufs = if self.sink.is_enabled() {
            (0..workers.len())
                .map(|_| {
                    let mut b = TaskChunk::with_capacity(self.trace_chunk, self.trace_chunk * 2);
                    b.prefault();
                    CachePadded::new(Mutex::new(b))
                })
                .collect()
        } else {
            Vec::new()
        };
        crate::panics::install_quiet_hook();
        let trace_accesses = self.trace_accesses && self.sink.is_enabled();
        let shared = Arc::new(Shared {
            policy,
            // A woken worker must be able to take what was pushed: with several
            // architectures it may not run it, and with a policy that gives each task to
            // one worker it may not be that one; then every sleeper is woken.
            sleep: CachePadded::new(Sleep::with_wake_all(
                archs.iter().filter(|a| **a).count() > 1 || !any_worker_takes_a_push,
            )),
            waiters: CachePadded::new(Waiters::new()),
            count: TaskCount::new(),
            executed: CachePadded::new(AtomicU64::new(0)),
            spinners: CachePadded::new(AtomicUsize::new(0)),
            max_spinners: (workers.len() / 2).max(1),
            nodes: Arc::new(NodePool::new()),
            graph_start: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            report: Mutex::new(Report::default()),
            codelets: Mutex::new(CodeletRegistry::default()),
            epoch: next_epoch(),
            sink: self.sink,
            observer: self.observer,
            workers: workers.clone(),
            archs,
            devices,
            dry_run: self.dry_run,
            backends,
            gpu_backend: self.gpu_backend,
            transfers: AtomicU64::new(0),
            transferred_bytes: AtomicU64::new(0),
            transfer_log: Mutex::new(Vec::new()),
            name_log: Mutex::new(Vec::new()),
            access_log: Mutex::new(Vec::new()),
            trace_accesses,
            task_powers: {
                let mut m: HashMap<String, [Option<f64>; Arch::COUNT]> = HashMap::new();
                for (name, arch, w) in &self.task_powers {
                    m.entry(name.clone()).or_default()[arch.index()] = Some(*w);
                }
                m
            },
            predictions,
            perf,
            policy_name,
            timing,
            staged: CachePadded::new(Mutex::new(Vec::new())),
            staged_since: CachePadded::new(AtomicU64::new(0)),
            staging,
            interrupted: AtomicBool::new(false),
            not_run: AtomicU64::new(0),
            trace_bufs,
        });
        let flusher = if shared.sink.is_enabled() && !self.trace_flush.is_zero() {
            Some(Flusher::start(&shared, self.trace_flush).map_err(|source| {
                RuntimeError::Spawn {
                    worker: usize::MAX,
                    source,
                }
            })?)
        } else {
            None
        };
        let mut threads = Vec::with_capacity(workers.len());
        let started = Arc::new(StartLatch::default());
        for (w, device) in workers.iter().zip(device_states) {
            let ctx = WorkerCtx {
                device,
                started: started.clone(),
                idle,
                shared: shared.clone(),
                id: w.id,
                arch: w.arch,
                cpu: w.cpu,
                memory_node: w.device.map_or(0, |d| 1 + d as usize),
            };
            let t = std::thread::Builder::new()
                .name(format!("taskwatt-worker-{}", w.id))
                .spawn(move || worker::run(ctx))
                .map_err(|source| RuntimeError::Spawn {
                    worker: w.id as usize,
                    source,
                });
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    shared.sleep.shutdown();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
            }
        }
        // Return only once every worker runs on its own core, ready to pop: a new thread
        // starts on its parent's CPU and, behind a busy submitting thread, may wait there
        // for a whole scheduler slice (milliseconds) before it even pins itself.
        let failed = started.wait_for(threads.len());
        // A worker that could not be pinned runs anyway: the trace must not claim its
        // placement. The meta is sent again, corrected (a reader keeps the last one).
        let unpinned =
            std::mem::take(&mut *started.unpinned.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(corrected) = unpin_in_meta(&meta, &unpinned) {
            shared.sink.send(Chunk::Meta(corrected));
        }
        if failed > 0 {
            shared.sleep.shutdown();
            for t in threads {
                let _ = t.join();
            }
            return Err(RuntimeError::Workers(format!(
                "{failed} worker(s) panicked while starting, before their first task (a \
                 custom scheduling policy's `local`?): see the panic message above"
            )));
        }
        Ok(Runtime {
            shared,
            threads,
            flusher,
        })
    }
}

/// The thread that sends stale trace buffers (see the module docs, "Trace flushing").
struct Flusher {
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: JoinHandle<()>,
}

impl Flusher {
    fn start(shared: &Arc<Shared>, every: Duration) -> std::io::Result<Flusher> {
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (sh, st) = (Arc::downgrade(shared), stop.clone());
        let thread = std::thread::Builder::new()
            .name("taskwatt-trace-flush".into())
            .spawn(move || {
                let (lock, cv) = &*st;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    stopped = cv
                        .wait_timeout(stopped, every / 2)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if *stopped {
                        return;
                    }
                    let Some(sh) = sh.upgrade() else { return };
                    sh.flush_stale_traces(every);
                }
            })?;
        Ok(Flusher { stop, thread })
    }

    fn stop(self) {
        *self.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

/// Interrupts a runtime from any thread (see [`Runtime::interrupt`]). Holds no reference
/// that keeps the runtime alive: once it is gone, `interrupt` does nothing.
#[derive(Clone, Debug)]
pub struct InterruptHandle {
    shared: Weak<Shared>,
}

impl InterruptHandle {
    /// Interrupts the runtime, if it still exists. Returns at once.
    pub fn interrupt(&self) {
        if let Some(sh) = self.shared.upgrade() {
            sh.interrupt();
        }
    }

    /// Whether the runtime was interrupted (false once it is gone).
    pub fn is_interrupted(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|sh| sh.interrupted.load(Ordering::SeqCst))
    }
}

/// Counts workers that have started (pinned, policy state made) or failed to.
#[derive(Default)]
pub(crate) struct StartLatch {
    /// (started, failed).
    count: std::sync::Mutex<(usize, usize)>,
    cv: std::sync::Condvar,
    /// Workers whose pinning failed (they run unpinned).
    unpinned: std::sync::Mutex<Vec<WorkerId>>,
}

impl StartLatch {
    /// Worker `id` could not be pinned to its CPU.
    pub(crate) fn unpinned(&self, id: WorkerId) {
        self.unpinned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
    }

    /// One more worker started.
    pub(crate) fn arrive(&self) {
        self.count.lock().unwrap_or_else(|p| p.into_inner()).0 += 1;
        self.cv.notify_all();
    }

    /// One more worker panicked before it could start.
    pub(crate) fn fail(&self) {
        self.count.lock().unwrap_or_else(|p| p.into_inner()).1 += 1;
        self.cv.notify_all();
    }

    /// Waits until `n` workers started or failed; returns how many failed.
    fn wait_for(&self, n: usize) -> usize {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while c.0 + c.1 < n {
            c = self.cv.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        c.1
    }
}

/// `meta` with the workers of `unpinned` placed on no CPU and named in its parameters
/// (`unpinned_workers`); `None` when every worker was pinned.
pub(crate) fn unpin_in_meta(meta: &RunMeta, unpinned: &[WorkerId]) -> Option<RunMeta> {
    if unpinned.is_empty() {
        return None;
    }
    let mut m = meta.clone();
    for w in &mut m.workers {
        if unpinned.contains(&w.id) {
            w.cpu = None;
        }
    }
    let mut ids: Vec<WorkerId> = unpinned.to_vec();
    ids.sort_unstable();
    m.params.insert(
        "unpinned_workers".into(),
        ids.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    Some(m)
}

const DEFAULT_STAGING: std::time::Duration = std::time::Duration::from_micros(2);
const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);
const DEFAULT_YIELD: std::time::Duration = std::time::Duration::from_micros(100);

/// The environment variable that overrides the default idle policy.
pub const IDLE_ENV: &str = "TASKWATT_IDLE_US";

impl IdlePolicy {
    /// `TASKWATT_IDLE_US=<spin>,<yield>` (µs) if set, else the defaults.
    fn from_env() -> Result<IdlePolicy, RuntimeError> {
        let Ok(value) = std::env::var(IDLE_ENV) else {
            return Ok(IdlePolicy {
                spin: DEFAULT_SPIN,
                yield_: DEFAULT_YIELD,
            });
        };
        let parsed = value.split_once(',').and_then(|(a, b)| {
            Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
        });
        match parsed {
            Some((a, b)) => Ok(IdlePolicy {
                spin: std::time::Duration::from_micros(a),
                yield_: std::time::Duration::from_micros(b),
            }),
            None => Err(RuntimeError::IdleEnv { value }),
        }
    }
}

/// The environment variable that overrides the default staging window.
pub const STAGING_ENV: &str = "TASKWATT_STAGING_US";

/// `TASKWATT_STAGING_US=<µs>` if set, else the default.
fn staging_from_env() -> Result<std::time::Duration, RuntimeError> {
    let Ok(value) = std::env::var(STAGING_ENV) else {
        return Ok(DEFAULT_STAGING);
    };
    match value.trim().parse::<f64>() {
        Ok(us) if us.is_finite() && (0.0..=1e9).contains(&us) => {
            Ok(std::time::Duration::from_secs_f64(us * 1e-6))
        }
        _ => Err(RuntimeError::StagingEnv { value }),
    }
}

fn next_epoch() -> u32 {
    static EPOCH: AtomicU64 = AtomicU64::new(1);
    EPOCH.fetch_add(1, Ordering::Relaxed) as u32
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

#[derive(Default)]
struct CodeletRegistry {
    by_ptr: HashMap<usize, u32>,
    /// Keeps registered codelets alive so that their addresses stay unique.
    kept: Vec<Arc<CodeletInner>>,
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) failures: Vec<TaskFailure>,
    pub(crate) cancelled: u64,
    /// The failed and cancelled nodes, marked `reported` when `wait_all` reports them.
    pub(crate) nodes: Vec<Arc<TaskNode>>,
}

/// Counters of a runtime since it started. Exact once `wait_all` returned; while tasks
/// run, workers report `executed` in batches, so it may lag by a few dozen tasks per
/// worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Tasks submitted.
    pub submitted: u64,
    /// Tasks whose implementation returned.
    pub executed: u64,
    /// Tasks whose implementation panicked.
    pub failed: u64,
    /// Tasks cancelled because a predecessor failed.
    pub cancelled: u64,
    /// Tasks not run because the runtime was interrupted.
    pub not_run: u64,
    /// Copies of data between memory nodes (with devices only).
    pub transfers: u64,
    /// Bytes those copies moved (the handles' registered sizes).
    pub transferred_bytes: u64,
}

pub(crate) struct Shared {
    pub(crate) policy: Box<dyn Policy<ReadyTask>>,
    // The lines written on the hot paths are padded apart: `sleep` is read for every push
    // and written when a worker parks, `count` holds the submitters' and the workers'
    // counters, and `executed` is written by workers with their batches.
    pub(crate) sleep: CachePadded<Sleep>,
    pub(crate) waiters: CachePadded<Waiters>,
    count: TaskCount,
    pub(crate) executed: CachePadded<AtomicU64>,
    /// Idle workers polling busily now, and how many may (see worker.rs, `find_task`).
    pub(crate) spinners: CachePadded<AtomicUsize>,
    pub(crate) max_spinners: usize,
    /// Finished nodes, recycled for new tasks (shared with the handles registered here,
    /// which give back the nodes they hold when they are dropped).
    pub(crate) nodes: Arc<NodePool>,
    /// Tasks submitted when `wait_all` last returned: the next one sizes the node pool
    /// for the graph in between (see [`NodePool::fit`]).
    graph_start: AtomicU64,
    pub(crate) failed: AtomicU64,
    cancelled: AtomicU64,
    pub(crate) report: Mutex<Report>,
    codelets: Mutex<CodeletRegistry>,
    pub(crate) epoch: u32,
    pub(crate) sink: TraceSink,
    pub(crate) observer: Option<Arc<dyn ExecutionObserver>>,
    workers: Vec<WorkerInfo>,
    archs: [bool; Arch::COUNT],
    /// Some worker drives a device (a memory node other than 0): data is made valid on
    /// the worker's node before each task, and on node 0 before each acquisition.
    pub(crate) devices: bool,
    /// Run no implementation ([`RuntimeBuilder::dry_run`]).
    pub(crate) dry_run: bool,
    /// The devices' backends, by memory node (node `1 + i` is `backends[i]`).
    pub(crate) backends: Vec<Arc<dyn Backend>>,
    pub(crate) gpu_backend: GpuBackend,
    transfers: AtomicU64,
    transferred_bytes: AtomicU64,
    /// Transfers not yet sent to the trace.
    transfer_log: Mutex<Vec<Transfer>>,
    /// Handle names not yet in the trace.
    name_log: Mutex<Vec<taskwatt_traces::HandleInfo>>,
    /// Task accesses not yet sent to the trace.
    access_log: Mutex<Vec<TaskAccess>>,
    /// Tasks' accesses go to the trace (asked for, and a trace is written).
    trace_accesses: bool,
    /// Extra power per (codelet, architecture), W (see `RuntimeBuilder::task_powers`).
    task_powers: HashMap<String, [Option<f64>; Arch::COUNT]>,
    /// Performance models: those loaded, and what each worker measured.
    pub(crate) perf: Option<PerfState>,
    /// The policy reads expected durations, and performance models were loaded: each
    /// submission notes them with its codelet (see `CodeletInner::note_expected`).
    predictions: bool,
    policy_name: String,
    /// Whether anyone reads task timestamps (a trace or an observer): without, the hot
    /// path reads no clock.
    pub(crate) timing: bool,
    /// Codelet tasks ready at submission, in submission order, not yet given to the
    /// policy (see [`RuntimeBuilder::staging`] and docs/runtime.md, "Staging").
    staged: CachePadded<Mutex<Vec<Arc<TaskNode>>>>,
    /// When the oldest staged task was staged, on the trace clock in ns (at least 1); 0
    /// when none is. Written under `staged`'s lock, read without it by the workers after
    /// each task (a line written once per batch of staged tasks).
    staged_since: CachePadded<AtomicU64>,
    /// The staging window; zero: no staging.
    pub(crate) staging: std::time::Duration,
    /// Set by [`Runtime::interrupt`]: tasks not started are not run.
    pub(crate) interrupted: AtomicBool,
    not_run: AtomicU64,
    /// Each worker's trace buffer (empty without a trace): the worker pushes under the
    /// lock, the flusher thread takes stale ones (see the module docs).
    pub(crate) trace_bufs: Vec<CachePadded<Mutex<TaskChunk>>>,
}

impl Shared {
    /// Stages `node`, a codelet task ready at its submission, and wakes a parked worker
    /// if there is one, as a push to the policy would: it takes the staged tasks at once.
    /// (Waking one only for the first task of a batch, to save wake-ups, made Task
    /// Bench's stencil at 2^6 iterations take 1.3 to 1.5 times as long in most runs.)
    fn stage(&self, node: Arc<TaskNode>) {
        let mut staged = self.staged.lock();
        let first = staged.is_empty();
        if first {
            let since = if self.timing {
                node.submit
            } else {
                Clock::now()
            };
            self.staged_since
                .store(since.as_ns().max(1), Ordering::Relaxed);
        }
        if self.timing {
            node.ready.store(node.submit.as_ns(), Ordering::Relaxed);
        }
        staged.push(node);
        drop(staged);
        self.sleep.notify(1);
    }

    /// Whether a task has been staged for the window or longer at `now` (the trace
    /// clock; read only when something is staged, so never without staging).
    #[inline]
    pub(crate) fn staged_due(&self, now: impl FnOnce() -> Timestamp) -> bool {
        let since = self.staged_since.load(Ordering::Relaxed);
        since != 0 && now().as_ns().saturating_sub(since) >= self.staging.as_nanos() as u64
    }

    /// Gives the staged tasks to the policy, in submission order, as the submitting
    /// thread would have: `buf` is the caller's empty vector, swapped with the staged one
    /// so that neither side allocates. Returns how many; wakes parked workers for all
    /// but one (the caller, a worker, goes on to pop; `wake_all` when the caller is not
    /// a worker). Without staging, nothing is ever staged: no lock is taken.
    pub(crate) fn take_staged(&self, buf: &mut Vec<Arc<TaskNode>>, wake_all: bool) -> usize {
        if self.staging.is_zero() {
            return 0;
        }
        debug_assert!(buf.is_empty());
        let mut staged = self.staged.lock();
        std::mem::swap(&mut *staged, buf);
        self.staged_since.store(0, Ordering::Relaxed);
        drop(staged);
        let n = buf.len();
        for node in buf.drain(..) {
            self.policy.push(ReadyTask(node), Origin::External);
        }
        self.sleep
            .notify(if wake_all { n } else { n.saturating_sub(1) });
        n
    }

    /// Gives the staged tasks to the policy before a thread outside the workers waits.
    pub(crate) fn flush_staged(&self) {
        self.take_staged(&mut Vec::new(), true);
    }

    /// The trace clock, or zero when no one reads task timestamps.
    #[inline]
    pub(crate) fn now(&self) -> Timestamp {
        if self.timing {
            Clock::now()
        } else {
            Timestamp::ZERO
        }
    }

    fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            // Ids are taken only by submitted tasks (acquisitions have none).
            submitted: self.count.submitted(),
            executed: self.executed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            not_run: self.not_run.load(Ordering::Relaxed),
            transfers: self.transfers.load(Ordering::Relaxed),
            transferred_bytes: self.transferred_bytes.load(Ordering::Relaxed),
        }
    }

    /// Makes every handle of `accesses` valid on memory node `node`, counting the
    /// copies and recording them in the trace (for task `task`, by worker `worker`; none
    /// for the application's thread). Stops at the first copy that fails, and says why.
    ///
    /// # Safety
    /// The caller holds the access rights the accesses declare (a released task, a granted
    /// acquisition).
    pub(crate) unsafe fn make_valid<'a>(
        &self,
        node: usize,
        accesses: impl Iterator<Item = (&'a HandleCore, Access)>,
        worker: Option<WorkerId>,
        task: Option<TaskId>,
    ) -> Result<(), String> {
        for (core, mode) in accesses {
            // REDUX contributions go to per-worker slots in main memory; a valid copy needs
            // neither a copy nor a clock read.
            if mode == Access::Redux || core.is_valid_for(node, mode) {
                continue;
            }
            let start = self.now();
            // SAFETY: the caller's contract.
            let copied = unsafe { core.make_valid(node, mode, &self.backends) }.map_err(|e| {
                format!(
                    "handle {} could not be made valid on memory node {node}: {e}",
                    core.id
                )
            })?;
            if let Some((src, bytes)) = copied {
                self.transfers.fetch_add(1, Ordering::Relaxed);
                self.transferred_bytes.fetch_add(bytes, Ordering::Relaxed);
                if self.sink.is_enabled() {
                    let t = Transfer {
                        handle: core.id,
                        src: src as u32,
                        dst: node as u32,
                        bytes,
                        worker,
                        task,
                        start,
                        end: self.now(),
                    };
                    let mut log = self.transfer_log.lock();
                    log.push(t);
                    if log.len() >= TRANSFERS_PER_CHUNK {
                        self.sink.send(Chunk::Transfers(std::mem::take(&mut *log)));
                    }
                }
            }
        }
        Ok(())
    }

    /// Notes with `codelet` its expected durations at `footprint` from the loaded models,
    /// for the policy (once per codelet and footprint).
    #[cold]
    fn note_expected_slow(&self, codelet: &CodeletInner, footprint: u64) {
        let Some(perf) = self.perf.as_ref() else {
            return;
        };
        for arch in Arch::ALL {
            let p = perf.loaded.predict(&codelet.name, arch, footprint);
            codelet.note_expected(arch, footprint, p.map(|p| p.mean_ns));
        }
    }

    /// As `note_expected_slow`, after a look that finds most footprints noted already.
    #[inline]
    fn note_expected(&self, codelet: &CodeletInner, footprint: u64) {
        if !codelet.has_expected(footprint) {
            self.note_expected_slow(codelet, footprint);
        }
    }

    /// This run's measurements, as performance models (none if not recorded).
    pub(crate) fn measured_models(&self) -> Option<crate::perfmodel::PerfModels> {
        let perf = self.perf.as_ref()?;
        let names: Vec<String> = self
            .codelets
            .lock()
            .kept
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let mut m = crate::perfmodel::PerfModels::new();
        for w in &perf.workers {
            for (&(cid, arch, footprint), (_, h)) in &w.lock().0 {
                if h.count == 0 {
                    continue;
                }
                let (Some(name), Some(&arch)) =
                    (names.get(cid as usize), Arch::ALL.get(arch as usize))
                else {
                    continue;
                };
                m.entry(name, arch, footprint).merge(h);
            }
        }
        Some(m)
    }

    /// Merges this run's measurements into the models' directory (once: the tables are
    /// emptied); a failure is logged, since shutdown cannot return it.
    fn save_perf_models(&self) {
        let Some(m) = self.measured_models() else {
            return;
        };
        let perf = self.perf.as_ref().expect("measured_models returned some");
        for w in &perf.workers {
            w.lock().0.clear();
        }
        if m.codelets.is_empty() {
            return;
        }
        if let Err(e) = m.save_merged(&perf.dir) {
            log::warn!("{e}");
        }
    }

    /// Sends the handle names, transfers and accesses not yet in the trace.
    pub(crate) fn flush_transfers(&self) {
        self.flush_names();
        let mut log = self.transfer_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Transfers(std::mem::take(&mut *log)));
        }
        drop(log);
        let mut log = self.access_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Accesses(std::mem::take(&mut *log)));
        }
    }

    /// Sends the handle names not yet in the trace.
    fn flush_names(&self) {
        let mut log = self.name_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Handles(std::mem::take(&mut *log)));
        }
    }

    /// Notes task `task`'s data accesses for the trace (sent in chunks of
    /// `ACCESSES_PER_CHUNK`, and by the flusher).
    fn note_accesses(&self, task: TaskId, accesses: &crate::task::Accesses) {
        let mut log = self.access_log.lock();
        for (core, mode) in accesses.iter() {
            log.push(TaskAccess {
                task,
                handle: core.id,
                mode: match mode {
                    Access::R => AccessMode::R,
                    Access::W => AccessMode::W,
                    Access::RW => AccessMode::RW,
                    Access::Commute => AccessMode::Commute,
                    Access::Redux => AccessMode::Redux,
                },
                bytes: core.bytes,
            });
        }
        if log.len() >= ACCESSES_PER_CHUNK {
            let full = std::mem::replace(&mut *log, Vec::with_capacity(ACCESSES_PER_CHUNK));
            drop(log);
            self.sink.send(Chunk::Accesses(full));
        }
    }

    /// The architectures a task of `codelet` on `accesses` can run on, with devices: a
    /// GPU worker (emulated or not) runs only a codelet's GPU implementation, on data
    /// registered for devices; a codelet with a CPU implementation only never runs there.
    fn task_archs(
        &self,
        codelet: &CodeletInner,
        accesses: &crate::task::Accesses,
    ) -> Result<ArchMask, RuntimeError> {
        let mut m = codelet.arch_mask();
        let held = |c: &HandleCore| {
            c.copier
                .is_some_and(|cp| self.backends.first().is_none_or(|b| b.holds(cp)))
        };
        if let Some(core) = accesses.handles().iter().find(|c| !held(c)) {
            if codelet.impls[Arch::Cpu.index()].is_none() {
                return Err(RuntimeError::NotReplicated {
                    codelet: codelet.name.clone(),
                    handle: core.id,
                });
            }
            m = m.and(ArchMask::CPU);
        }
        Ok(m)
    }

    fn interrupt(&self) {
        if !self.interrupted.swap(true, Ordering::SeqCst) {
            // Every parked worker: each drains what is ready without running it.
            self.sleep.notify(usize::MAX);
        }
    }

    /// The error every call returns once interrupted.
    pub(crate) fn interrupted_error(&self) -> RuntimeError {
        RuntimeError::Interrupted {
            finished: self.executed.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed),
            not_run: self.not_run.load(Ordering::Relaxed),
        }
    }

    /// Counts one task not run because of an interruption.
    pub(crate) fn note_not_run(&self) {
        self.not_run.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends the trace buffers whose oldest record ended `age` ago or earlier; a buffer
    /// its worker is writing to is left for the next look.
    fn flush_stale_traces(&self, age: Duration) {
        if self.devices || self.trace_accesses {
            self.flush_transfers();
        } else {
            self.flush_names();
        }
        let now = Clock::now().as_ns();
        for slot in &self.trace_bufs {
            if let Some(mut buf) = slot.try_lock() {
                let stale = buf
                    .records
                    .first()
                    .is_some_and(|r| now.saturating_sub(r.end.as_ns()) >= age.as_nanos() as u64);
                if stale {
                    self.sink.swap_tasks(&mut buf);
                }
            }
        }
    }

    /// Marks `node` finished with `status` at `now` and releases its successors (their
    /// ready time is `now`: a worker passes the end time it just recorded, so that
    /// releasing costs no clock read). Ready codelet tasks go to the policy with `origin`;
    /// the return value is how many, so that the caller can wake workers. Cancelled
    /// successors are finished here too, iteratively.
    pub(crate) fn complete(
        &self,
        node: &TaskNode,
        status: u8,
        mut local: Option<(usize, &mut Local)>,
        now: Timestamp,
    ) -> usize {
        let mut pushed = 0;
        let mut cancelled: Vec<Arc<TaskNode>> = Vec::new();
        let mut released: Vec<Arc<TaskNode>> = Vec::new();
        self.release(
            node,
            status,
            &mut local,
            &mut pushed,
            (&mut cancelled, &mut released),
            now,
        );
        loop {
            if let Some(c) = cancelled.pop() {
                self.note_cancelled(&c);
                self.release(
                    &c,
                    DONE_CANCELLED,
                    &mut local,
                    &mut pushed,
                    (&mut cancelled, &mut released),
                    now,
                );
                self.task_finished();
            } else if let Some(r) = released.pop() {
                // A deferred acquisition released before its grant ends at its grant.
                self.release(
                    &r,
                    DONE_OK,
                    &mut local,
                    &mut pushed,
                    (&mut cancelled, &mut released),
                    now,
                );
            } else {
                break;
            }
        }
        pushed
    }

    fn release(
        &self,
        node: &TaskNode,
        status: u8,
        local: &mut Option<(usize, &mut Local)>,
        pushed: &mut usize,
        (cancelled, released): (&mut Vec<Arc<TaskNode>>, &mut Vec<Arc<TaskNode>>),
        now: Timestamp,
    ) {
        let successors = node.finish(status);
        if node.has_waiter.load(Ordering::SeqCst) {
            self.waiters.notify_all();
        }
        if successors.len() > 1 {
            for s in &successors {
                s.prefetch_pending();
            }
        }
        for s in successors {
            if status != DONE_OK {
                s.cancelled.store(true, Ordering::Relaxed);
            }
            // AcqRel: the last decrement must see every predecessor's writes (Acquire)
            // and publish this one's (Release) to whoever runs the successor.
            if s.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                match self.ready(s, local, now) {
                    Readied::Pushed => *pushed += 1,
                    Readied::Cancelled(c) => cancelled.push(c),
                    Readied::Released(r) => released.push(r),
                    Readied::Granted => {}
                }
            }
        }
    }

    /// `node` has no pending dependency left since `now`.
    fn ready(
        &self,
        node: Arc<TaskNode>,
        local: &mut Option<(usize, &mut Local)>,
        now: Timestamp,
    ) -> Readied {
        if self.timing {
            // A predecessor may have ended (and stamped `now`) while this node was being
            // submitted: it was ready no earlier than its submission.
            node.ready
                .store(now.max(node.submit).as_ns(), Ordering::Relaxed);
        }
        match node.kind {
            Kind::Acquire => {
                node.granted.store(true, Ordering::SeqCst);
                if node.abandoned.swap(false, Ordering::SeqCst) {
                    return Readied::Released(node);
                }
                if node.has_waiter.load(Ordering::SeqCst) {
                    self.waiters.notify_all();
                }
                Readied::Granted
            }
            Kind::Codelet if node.cancelled.load(Ordering::Relaxed) => Readied::Cancelled(node),
            Kind::Codelet => {
                let origin = match local {
                    Some((id, l)) => Origin::Worker { id: *id, local: l },
                    None => Origin::External,
                };
                self.policy.push(ReadyTask(node), origin);
                Readied::Pushed
            }
        }
    }

    /// One codelet task is done for good (ran, failed or was cancelled).
    pub(crate) fn task_finished(&self) {
        self.tasks_finished(1);
    }

    /// `n` codelet tasks are done for good. Workers count their own tasks and report them
    /// in batches (see worker.rs), so that the shared counter is not written by every core
    /// for every task.
    pub(crate) fn tasks_finished(&self, n: usize) {
        self.count.finish(n as u64, &self.waiters);
    }

    pub(crate) fn record_failure(&self, node: &Arc<TaskNode>, failure: TaskFailure) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut r = self.report.lock();
        r.failures.push(failure);
        r.nodes.push(node.clone());
    }

    fn note_cancelled(&self, node: &Arc<TaskNode>) {
        // SAFETY: `node` was ready (its dependency count reached zero) and this thread is
        // the one cancelling it: nobody else takes its body.
        let body = unsafe { node.take_body() };
        // The argument's or a handle's drop may panic: not on this thread's watch.
        crate::panics::drop_quietly(body, Some(node.id));
        if self.interrupted.load(Ordering::Relaxed) {
            // Not run because of the interruption, not because of a failure.
            self.note_not_run();
            self.report.lock().nodes.push(node.clone());
            return;
        }
        self.cancelled.fetch_add(1, Ordering::Relaxed);
        let mut r = self.report.lock();
        r.cancelled += 1;
        r.nodes.push(node.clone());
    }

    fn codelet_id(&self, codelet: &Arc<CodeletInner>) -> Result<u32, RuntimeError> {
        if let Some(id) = codelet.cached_id(self.epoch) {
            return Ok(id);
        }
        let runnable = Arch::ALL
            .iter()
            .any(|a| self.archs[a.index()] && codelet.impls[a.index()].is_some());
        if !runnable {
            let list = |f: &dyn Fn(Arch) -> bool| {
                let v: Vec<&str> = Arch::ALL
                    .iter()
                    .filter(|a| f(**a))
                    .map(|a| a.name())
                    .collect();
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            return Err(RuntimeError::NoImplementation {
                codelet: codelet.name.clone(),
                implemented: list(&|a| codelet.impls[a.index()].is_some()),
                present: list(&|a| self.archs[a.index()]),
            });
        }
        let mut reg = self.codelets.lock();
        let key = Arc::as_ptr(codelet) as usize;
        let id = match reg.by_ptr.get(&key) {
            Some(&id) => id,
            None => {
                let id = reg.kept.len() as u32;
                reg.by_ptr.insert(key, id);
                reg.kept.push(codelet.clone());
                if !self.task_powers.is_empty() {
                    *codelet.power_w.write() = self
                        .task_powers
                        .get(&codelet.name)
                        .copied()
                        .unwrap_or_default();
                }
                let info = CodeletInfo {
                    id,
                    name: codelet.name.clone(),
                    archs: Arch::ALL
                        .into_iter()
                        .filter(|a| codelet.impls[a.index()].is_some())
                        .collect(),
                };
                if let Some(o) = &self.observer {
                    o.codelet_registered(&info);
                }
                self.sink.send(Chunk::Codelets(vec![info]));
                id
            }
        };
        codelet.cache_id(self.epoch, id);
        Ok(id)
    }
}

enum Readied {
    Pushed,
    Granted,
    Cancelled(Arc<TaskNode>),
    /// A deferred acquisition released before its grant: it ends now.
    Released(Arc<TaskNode>),
}

/// A task runtime: workers pinned to cores, a scheduling policy, dependency inference on
/// registered data, and a trace of every execution.
///
/// ```
/// use taskwatt_runtime::{Codelet, Runtime, Task};
///
/// let rt = Runtime::builder().workers(2).policy("ws").build().unwrap();
/// let inc = Codelet::new("inc").cpu(|ctx| *ctx.rw::<u64>(0) += 1);
/// let x = rt.register(0u64);
/// for _ in 0..100 {
///     rt.submit(Task::new(&inc).rw(&x)).unwrap();
/// }
/// rt.wait_all().unwrap();
/// assert_eq!(*rt.acquire(&x).unwrap(), 100);
/// ```
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    flusher: Option<Flusher>,
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The workers, with their core and package.
    pub fn workers(&self) -> &[WorkerInfo] {
        &self.shared.workers
    }

    /// The name of the scheduling policy in use.
    pub fn policy_name(&self) -> &str {
        &self.shared.policy_name
    }

    /// Registers `value` as data that tasks access through the returned handle. It counts
    /// the bytes of its data ([`DataSize`]: a `Vec<f64>` of `n` elements counts `8n`) in
    /// task footprints, copies and the trace; see [`Runtime::register_bytes`] for a size
    /// given by hand.
    ///
    /// [`DataSize`]: crate::DataSize
    pub fn register<T: crate::DataSize + Send + Sync + 'static>(&self, value: T) -> Handle<T> {
        let bytes = value.data_bytes();
        self.register_bytes(value, bytes)
    }

    /// Registers `value`, counting `bytes` in task footprints (for a type that does not
    /// implement [`DataSize`](crate::DataSize), or a size other than its data's).
    pub fn register_bytes<T: Send + Sync + 'static>(&self, value: T, bytes: u64) -> Handle<T> {
        Handle::new(value, bytes, Some(&self.shared.nodes))
    }

    /// Registers `value` as data that can have copies on the memory nodes of devices
    /// (see [`RuntimeBuilder::emulated_gpus`]): tasks on it may run on GPU workers. It
    /// counts the bytes of its data ([`DataSize`](crate::DataSize)) in footprints and in
    /// each copy; see [`Runtime::register_replicated_bytes`].
    pub fn register_replicated<T: crate::DataSize + Clone + Send + Sync + 'static>(
        &self,
        value: T,
    ) -> Handle<T> {
        let bytes = value.data_bytes();
        self.register_replicated_bytes(value, bytes)
    }

    /// As [`Runtime::register_replicated`], counting `bytes` in task footprints and in
    /// the bytes each copy between memory nodes moves.
    pub fn register_replicated_bytes<T: Clone + Send + Sync + 'static>(
        &self,
        value: T,
        bytes: u64,
    ) -> Handle<T> {
        Handle::new_replicated(value, bytes, Some(&self.shared.nodes))
    }

    /// Registers `value` as data that any device can hold, an emulated GPU (as a clone)
    /// or a CUDA GPU (as a copy of its bytes, see [`DeviceData`]): tasks on it may run on
    /// GPU workers of either backend. It counts `size_of_val` of its bytes in task
    /// footprints; see [`Runtime::register_device_bytes`].
    ///
    /// [`DeviceData`]: crate::DeviceData
    pub fn register_device<T: crate::DeviceData>(&self, value: T) -> Handle<T> {
        let bytes = value.device_bytes().len() as u64;
        self.register_device_bytes(value, bytes)
    }

    /// As [`Runtime::register_device`], counting `bytes` in task footprints and in
    /// transfers.
    pub fn register_device_bytes<T: crate::DeviceData>(&self, value: T, bytes: u64) -> Handle<T> {
        Handle::new_device(value, bytes, Some(&self.shared.nodes))
    }

    /// The names of the codelets submitted so far, in the order they were first
    /// submitted (each once, even when two codelets share a name).
    pub fn codelet_names(&self) -> Vec<String> {
        let reg = self.shared.codelets.lock();
        let mut out: Vec<String> = Vec::with_capacity(reg.kept.len());
        for c in &reg.kept {
            if !out.contains(&c.name) {
                out.push(c.name.clone());
            }
        }
        out
    }

    /// Names `handle` (StarPU's `starpu_data_set_name`): the trace records the name, and
    /// every export shows it where it would show `h<id>` (copies in Perfetto and Paje,
    /// the transfers and accesses CSVs). A later name replaces an earlier one; a name
    /// longer than [`MAX_HANDLE_NAME`] bytes is cut there.
    pub fn set_name<T>(&self, handle: &Handle<T>, name: impl Into<String>) {
        if !self.shared.sink.is_enabled() {
            return;
        }
        let mut name = name.into();
        if name.len() > MAX_HANDLE_NAME {
            let mut end = MAX_HANDLE_NAME;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            log::warn!(
                "the name of handle {} is {} bytes long: cut at {MAX_HANDLE_NAME}",
                handle.id(),
                name.len()
            );
            name.truncate(end);
        }
        self.shared
            .name_log
            .lock()
            .push(taskwatt_traces::HandleInfo {
                handle: handle.id(),
                name,
                bytes: handle.core.bytes,
            });
    }

    /// The backend that drives this runtime's GPU workers (emulated when it has none).
    pub fn gpu_backend(&self) -> GpuBackend {
        self.shared.gpu_backend
    }

    /// Submits a task. Returns at once; the task runs when its dependencies are satisfied.
    ///
    /// Refused once the runtime was interrupted, and for handles or task handles of
    /// another runtime.
    pub fn submit(&self, task: Task<'_>) -> Result<TaskHandle, RuntimeError> {
        let sh = &*self.shared;
        if sh.interrupted.load(Ordering::Relaxed) {
            return Err(sh.interrupted_error());
        }
        let codelet = &task.codelet.inner;
        let codelet_id = sh.codelet_id(codelet)?;
        let accesses = task.accesses;
        if accesses.len() > MAX_ACCESSES {
            return Err(RuntimeError::TooManyAccesses {
                codelet: codelet.name.clone(),
                count: accesses.len(),
                max: MAX_ACCESSES,
            });
        }
        // Bit i: access i repeats a handle an earlier access read (counted, linked once).
        let repeats = check_distinct(&codelet.name, &accesses)?;
        let mut footprint = 0;
        let grouping = accesses.has_grouping();
        for (i, core) in accesses.handles().iter().enumerate() {
            if !core.belongs_to(&sh.nodes) {
                return Err(RuntimeError::ForeignHandle {
                    operation: format!("submit of codelet `{}`", codelet.name),
                    handle: core.id,
                });
            }
            if core.unregistered.load(Ordering::Acquire) {
                return Err(RuntimeError::Unregistered {
                    codelet: codelet.name.clone(),
                    handle: core.id,
                });
            }
            if grouping || core.ext().is_some() {
                let mode = accesses.get(i).map_or(Access::R, |(_, m)| m);
                self.check_grouped(core, mode, codelet)?;
            }
            if repeats & (1 << i) == 0 {
                footprint += core.bytes;
            }
        }
        if let Some((pred, _)) = task.after.iter().find(|(_, rt)| *rt != sh.epoch) {
            return Err(RuntimeError::ForeignTask {
                operation: format!("submit of codelet `{}`", codelet.name),
                task: pred.id,
            });
        }
        let archs = if sh.devices {
            Some(sh.task_archs(codelet, &accesses)?)
        } else {
            None
        };
        let id = sh.count.submit();
        let submit = sh.now();
        let node = sh.nodes.node(
            || {
                TaskNode::new(
                    id,
                    Kind::Codelet,
                    codelet.clone(),
                    codelet_id,
                    task.priority,
                    footprint,
                    submit,
                    None,
                )
            },
            |n| {
                n.renew(
                    id,
                    Kind::Codelet,
                    codelet,
                    codelet_id,
                    task.priority,
                    footprint,
                    submit,
                )
            },
        );
        if let Some(m) = archs {
            node.archs.store(m.bits(), Ordering::Relaxed);
        }
        if sh.predictions {
            sh.note_expected(codelet, footprint);
        }
        let mut preds = Preds::new();
        let mut waits = false;
        for (i, (core, mode)) in accesses.iter().enumerate() {
            if repeats & (1 << i) != 0 {
                continue;
            }
            waits |= link(core, mode, &node, &mut preds);
        }
        for (pred, _) in &task.after {
            waits |= pred.add_successor(&node, &mut preds);
        }
        if sh.trace_accesses && accesses.len() > 0 {
            sh.note_accesses(id, &accesses);
        }
        // SAFETY: the guard is still held (released just below), so nobody can take the
        // body yet; the release on `pending` publishes it to the thread that will.
        unsafe {
            node.set_body(Body {
                accesses,
                preds,
                arg: task.arg,
            })
        };
        self.release_guard(&node, waits);
        Ok(TaskHandle {
            node,
            runtime: sh.epoch,
        })
    }

    /// The checks of an access to a handle with an extension (modes.rs), or in REDUX
    /// mode; before an access other than REDUX, submits the reduction of a pending REDUX
    /// group. Out of line: plain handles never come here.
    #[cold]
    #[inline(never)]
    fn check_grouped(
        &self,
        core: &Arc<HandleCore>,
        mode: Access,
        codelet: &Arc<CodeletInner>,
    ) -> Result<(), RuntimeError> {
        let ext = core.ext();
        let codelet_ptr = codelet;
        let codelet = &codelet.name;
        if ext.is_some_and(|e| e.partitioned.load(Ordering::Acquire)) {
            return Err(RuntimeError::Partitioned {
                operation: format!("submit of codelet `{codelet}`"),
                handle: core.id,
            });
        }
        if mode == Access::Redux {
            if ext.and_then(|e| e.reduction.get()).is_none() {
                return Err(RuntimeError::NoReduction {
                    codelet: codelet.to_string(),
                    handle: core.id,
                });
            }
            return Ok(());
        }
        let red = ext.and_then(|e| e.reduction.get());
        if red.is_some_and(|r| Arc::ptr_eq(&r.codelet.inner, codelet_ptr)) {
            // The reduction task itself, which closes the group.
            return Ok(());
        }
        self.reduce_pending(core)
    }

    /// Submits the reduction task of `core` if a REDUX group waits for it.
    pub(crate) fn reduce_pending(&self, core: &Arc<HandleCore>) -> Result<(), RuntimeError> {
        if !crate::modes::reduction_pending(core) {
            return Ok(());
        }
        let red = core
            .ext()
            .and_then(|e| e.reduction.get())
            .expect("a REDUX access is accepted only on a handle with a reduction")
            .clone();
        let mut accesses = crate::task::Accesses::new();
        accesses.push(core.clone(), Access::RW);
        self.submit(Task {
            codelet: &red.codelet,
            accesses,
            after: Vec::new(),
            arg: crate::inline::Arg::new(red.clone()),
            priority: 0,
        })?;
        Ok(())
    }

    /// Gives `handle` a reduction, for REDUX accesses (StarPU's
    /// `starpu_data_set_reduction_methods`): `init` makes a worker's empty contribution
    /// (the neutral element), `combine(acc, x)` folds contribution `x` into `acc`. The
    /// reduction tasks that fold the contributions into the data are tasks of a codelet
    /// named `name`, recorded in the trace as any other.
    ///
    /// ```
    /// # use taskwatt_runtime::{Codelet, Runtime, Task};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let sum = rt.register(0u64);
    /// rt.set_reduction(&sum, "sum", || 0u64, |acc, x| *acc += x).unwrap();
    /// let add = Codelet::new("add").cpu(|ctx| *ctx.w::<u64>(0) += *ctx.arg::<u64>());
    /// for i in 1..=100u64 {
    ///     rt.submit(Task::new(&add).redux(&sum).arg(i)).unwrap();
    /// }
    /// assert_eq!(rt.unregister(sum).unwrap(), 5050);
    /// ```
    pub fn set_reduction<T: Send + Sync + 'static>(
        &self,
        handle: &Handle<T>,
        name: &str,
        init: impl Fn() -> T + Send + Sync + 'static,
        combine: impl Fn(&mut T, T) + Send + Sync + 'static,
    ) -> Result<(), RuntimeError> {
        let core = &handle.core;
        if !core.belongs_to(&self.shared.nodes) {
            return Err(RuntimeError::ForeignHandle {
                operation: "set_reduction".into(),
                handle: core.id,
            });
        }
        let red = Arc::new(crate::modes::Reduction::new(
            name,
            self.workers().len(),
            init,
            combine,
        ));
        core.ext_or_init()
            .reduction
            .set(red)
            .map_err(|_| RuntimeError::ReductionAlreadySet { handle: core.id })
    }

    /// Drops the submission guard of `node` (see task.rs, step 2). `waits`: whether an
    /// edge to `node` was added. Without one, no other thread knows the node yet, so the
    /// guard is dropped without a locked instruction (the predecessors it depends on had
    /// finished, and their ends were seen with acquire loads when linking).
    pub(crate) fn release_guard(&self, node: &Arc<TaskNode>, waits: bool) {
        let sh = &*self.shared;
        let ready = if waits {
            node.pending.fetch_sub(1, Ordering::AcqRel) == 1
        } else {
            node.pending.store(0, Ordering::Relaxed);
            true
        };
        if ready {
            if !sh.staging.is_zero()
                && matches!(node.kind, Kind::Codelet)
                && !node.cancelled.load(Ordering::Relaxed)
            {
                sh.stage(node.clone());
                return;
            }
            let mut none = None;
            // Ready as soon as submitted: its predecessors had all finished by then.
            match sh.ready(node.clone(), &mut none, node.submit) {
                Readied::Pushed => sh.sleep.notify(1),
                Readied::Granted => {}
                Readied::Released(r) => {
                    let pushed = sh.complete(&r, DONE_OK, None, sh.now());
                    sh.sleep.notify(pushed);
                }
                Readied::Cancelled(c) => {
                    // A predecessor failed before this task was even submitted.
                    sh.note_cancelled(&c);
                    let pushed = sh.complete(&c, DONE_CANCELLED, None, sh.now());
                    sh.task_finished();
                    sh.sleep.notify(pushed);
                }
            }
        }
    }

    /// Waits for every submitted task. Returns the failures since the last `wait_all`
    /// (tasks that panicked, and how many dependents were cancelled); the runtime stays
    /// usable either way. Must not be called from inside a task.
    ///
    /// Cancellation reaches every task that depends, through data or explicitly, on a
    /// failed task, up to the `wait_all` that reports the failure: tasks submitted after
    /// it run normally, on the data as the failure left it.
    ///
    /// Returns [`RuntimeError::Deadlock`] instead of waiting forever when called from
    /// inside one of this runtime's tasks, or while this thread holds an acquisition guard
    /// that a submitted task waits for; [`RuntimeError::Interrupted`] once the runtime
    /// was interrupted (after the tasks that were running have ended).
    pub fn wait_all(&self) -> Result<(), RuntimeError> {
        let sh = &*self.shared;
        crate::deadlock::check_wait_all(sh.epoch)?;
        sh.flush_staged();
        sh.waiters.wait_until(|| sh.count.all_done());
        let submitted = sh.count.submitted();
        let graph = submitted.saturating_sub(sh.graph_start.swap(submitted, Ordering::Relaxed));
        sh.nodes.fit(graph);
        let report = std::mem::take(&mut *sh.report.lock());
        for n in &report.nodes {
            n.reported.store(true, Ordering::Release);
        }
        if sh.interrupted.load(Ordering::SeqCst) {
            return Err(sh.interrupted_error());
        }
        if report.failures.is_empty() && report.cancelled == 0 {
            Ok(())
        } else {
            Err(RuntimeError::TasksFailed {
                failures: report.failures,
                cancelled: report.cancelled,
            })
        }
    }

    /// Waits for one task. Errors if it panicked or was cancelled (the failure stays
    /// reported by the next `wait_all` too).
    pub fn wait(&self, task: &TaskHandle) -> Result<(), RuntimeError> {
        let node = &task.node;
        if task.runtime != self.shared.epoch {
            return Err(RuntimeError::ForeignTask {
                operation: "wait".into(),
                task: node.id,
            });
        }
        crate::deadlock::check_wait(self.shared.epoch, node)?;
        node.has_waiter.store(true, Ordering::SeqCst);
        self.shared.flush_staged();
        self.shared.waiters.wait_until(|| node.is_finished());
        match node.status.load(Ordering::SeqCst) {
            DONE_OK => Ok(()),
            _ if self.shared.interrupted.load(Ordering::SeqCst) && !node_ran(node) => {
                Err(self.shared.interrupted_error())
            }
            DONE_FAILED => {
                let failures = self
                    .shared
                    .report
                    .lock()
                    .failures
                    .iter()
                    .filter(|f| f.task == node.id)
                    .cloned()
                    .collect();
                Err(RuntimeError::TasksFailed {
                    failures,
                    cancelled: 0,
                })
            }
            _ => Err(RuntimeError::Cancelled {
                task: node.id,
                codelet: node.codelet_name().to_string(),
            }),
        }
    }

    /// Wakes the parked workers and returns once none is parked (or after 10 ms), so
    /// that the next tasks are picked up by polling workers instead of waiting for a
    /// wake-up: call it before a timed region that follows a pause, such as registering
    /// a graph's data. Workers park after their idle polling (see
    /// [`RuntimeBuilder::idle`]), and waking one takes tens of µs to a few hundred on a
    /// VM: the first task of Task Bench's stencil started 31 to 147 µs after its
    /// submission. A woken worker polls for its idle budget again, then parks.
    pub fn warm_up(&self) {
        let sh = &*self.shared;
        sh.sleep.notify(usize::MAX);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(10);
        while sh.sleep.sleepers() > 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    /// Interrupts the runtime: each worker finishes the task it runs and starts no other;
    /// tasks not started are not run (their count is in [`RuntimeStats::not_run`]), later
    /// submissions are refused, and waits return [`RuntimeError::Interrupted`] once the
    /// running tasks have ended. Shut down or drop the runtime as usual afterwards: the
    /// trace keeps every task that ran. Returns at once.
    pub fn interrupt(&self) {
        self.shared.interrupt();
    }

    /// A handle that interrupts this runtime from another thread.
    pub fn interrupt_handle(&self) -> InterruptHandle {
        InterruptHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Whether the runtime was interrupted.
    pub fn is_interrupted(&self) -> bool {
        self.shared.interrupted.load(Ordering::SeqCst)
    }

    /// Counters since the runtime started.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.stats()
    }

    /// The performance models: those saved before this run merged with what this run
    /// measured so far; `None` unless built with [`RuntimeBuilder::perf_models`].
    pub fn perf_models(&self) -> Option<crate::perfmodel::PerfModels> {
        let perf = self.shared.perf.as_ref()?;
        let mut m = perf.loaded.clone();
        m.merge(&self.shared.measured_models()?);
        Some(m)
    }

    /// A function that reads the counters, for a progress display on another thread.
    pub fn stats_probe(&self) -> impl Fn() -> RuntimeStats + Send + 'static {
        let sh = self.shared.clone();
        move || sh.stats()
    }

    /// Id the next submitted task will get.
    pub fn next_task_id(&self) -> TaskId {
        self.shared.count.submitted()
    }

    /// Waits for every task, stops the workers and flushes their trace buffers. Returns the
    /// failures not yet reported, as `wait_all` does.
    pub fn shutdown(mut self) -> Result<RuntimeStats, RuntimeError> {
        let res = self.wait_all();
        if let Err(e @ RuntimeError::Deadlock { .. }) = res {
            // Inside one of its own tasks: joining the workers would join this thread.
            return Err(e);
        }
        self.stop_workers();
        let stats = self.stats();
        res.map(|()| stats)
    }

    fn stop_workers(&mut self) {
        self.shared.sleep.shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(f) = self.flusher.take() {
            f.stop();
        }
        self.shared.flush_transfers();
        self.shared.save_perf_models();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        /// Closes the pool when dropped, even by a panic below: the nodes and data handles
        /// it keeps may hold the pool itself (see `NodePool::close`).
        struct Close(Arc<NodePool>);
        impl Drop for Close {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        let _close = Close(self.shared.nodes.clone());
        if !self.threads.is_empty() {
            match self.wait_all() {
                Ok(()) | Err(RuntimeError::Interrupted { .. }) => {}
                Err(RuntimeError::Deadlock { .. }) => {
                    // Dropped inside one of its own tasks (moved into one): waiting would
                    // never end. The workers are left to exit with the process.
                    log::error!(
                        "a runtime was dropped where waiting for its tasks would never end \
                         (inside one of its own tasks, or while this thread's guard or \
                         deferred acquisition holds back a task); its workers are left \
                         running"
                    );
                    return;
                }
                Err(e) => log::error!("runtime dropped with unreported failures: {e}"),
            }
            self.stop_workers();
        } else if let Some(f) = self.flusher.take() {
            f.stop();
        }
    }
}

/// Whether `node` ran (completed or failed), as opposed to being cancelled or not run.
fn node_ran(node: &TaskNode) -> bool {
    matches!(node.status.load(Ordering::SeqCst), DONE_OK | DONE_FAILED)
}

/// Refuses a handle listed twice by one task unless both accesses read it (two buffer
/// indices on one value written would let the implementation alias a `&mut`; StarPU
/// accepts a handle read twice: both buffers see the same value). Returns the accesses
/// that repeat an earlier one's handle, bit `i` for access `i` (there are at most
/// [`MAX_ACCESSES`]).
fn check_distinct(codelet: &str, accesses: &crate::task::Accesses) -> Result<u64, RuntimeError> {
    let handles = accesses.handles();
    let mut repeats = 0u64;
    for (i, a) in handles.iter().enumerate() {
        for (j, b) in handles.iter().enumerate().skip(i + 1) {
            if !Arc::ptr_eq(a, b) {
                continue;
            }
            let reads = |k: usize| accesses.get(k).is_some_and(|(_, m)| m == Access::R);
            if !(reads(i) && reads(j)) {
                return Err(RuntimeError::DuplicateAccess {
                    codelet: codelet.to_string(),
                    handle: a.id,
                    first: i,
                    second: j,
                });
            }
            repeats |= 1 << j;
        }
    }
    Ok(repeats)
}

/// Implicit dependencies of `node` on `core` (see handle.rs); the ids of the codelet tasks
/// `node` now waits for are added to `preds`. Returns whether `node` now waits for one
/// (false when those tasks have all finished).
pub(crate) fn link(
    core: &HandleCore,
    mode: Access,
    node: &Arc<TaskNode>,
    preds: &mut Preds,
) -> bool {
    let mut deps = core.deps.lock();
    if mode.groups() || core.ext().is_some() {
        let ext = core.ext_or_init();
        return crate::modes::link_grouped(&mut deps, &mut ext.groups.lock(), mode, node, preds);
    }
    let mut waits = false;
    if mode.writes() {
        if deps.readers.is_empty() {
            if let Some(w) = &deps.last_writer {
                waits |= w.add_successor(node, preds);
            }
        } else {
            for r in deps.readers.drain(..) {
                waits |= r.add_successor(node, preds);
            }
            deps.prune_at = READERS_PRUNE_MIN;
        }
        deps.last_writer = Some(node.clone());
    } else {
        if let Some(w) = &deps.last_writer {
            if !Arc::ptr_eq(w, node) {
                waits |= w.add_successor(node, preds);
            }
        }
        // Readers that already finished need no edge from a later writer: drop them
        // when the list grows, so that a handle only ever read does not grow forever.
        // (A task lists a handle once, so `node` is not in the list yet.)
        if deps.readers.len() >= deps.prune_at {
            deps.readers.retain(|r| !r.is_finished());
            deps.prune_at = (2 * deps.readers.len()).max(READERS_PRUNE_MIN);
        }
        deps.readers.push(node.clone());
    }
    waits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_that_could_not_be_pinned_is_placed_nowhere_in_the_trace() {
        // Issue 29: a failed pinning was silent, and the trace claimed the placement.
        let w = |id: WorkerId, cpu: u32| WorkerInfo {
            id,
            arch: Arch::Cpu,
            cpu: Some(cpu),
            core: Some(cpu),
            package: 0,
            numa: None,
            device: None,
        };
        let meta = RunMeta {
            workers: vec![w(0, 2), w(1, 3)],
            ..RunMeta::default()
        };
        assert!(unpin_in_meta(&meta, &[]).is_none());
        let m = unpin_in_meta(&meta, &[1]).unwrap();
        assert_eq!((m.workers[0].cpu, m.workers[1].cpu), (Some(2), None));
        assert_eq!(m.params["unpinned_workers"], "1");
        // A reader keeps the last meta it meets: the corrected one, sent after the first.
        let (sink, mem) = taskwatt_traces::TraceSink::memory();
        sink.send(Chunk::Meta(meta));
        sink.send(Chunk::Meta(m));
        drop(sink);
        let t = mem.into_trace().unwrap();
        assert_eq!(t.meta.workers[1].cpu, None);
    }
}
