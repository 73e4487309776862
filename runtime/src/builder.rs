//! Configuring and building a runtime: [`RuntimeBuilder`] plans the workers on the
//! topology, opens the devices, creates the policy, starts and pins the workers, and
//! writes the run's metadata to the trace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use taskwatt_scheduler::{
    create_policy_with, policy_from_env, ArchMask, Policy, PolicyOptions, WorkerDesc,
    DEFAULT_POLICY,
};
use taskwatt_traces::{
    Arch, Chunk, Clock, ExecutionObserver, RunMeta, TaskChunk, TraceSink, WorkerId,
};

use crate::device::{GpuBackend, WorkerState};
use crate::error::RuntimeError;
use crate::helper::Helper;
use crate::pool::NodePool;
use crate::runtime::Runtime;
use crate::shared::{CodeletRegistry, PerfState, Report, Shared};
use crate::sync::StartLatch;
use crate::sync::{Sleep, TaskCount, Waiters};
use crate::task::ReadyTask;
use crate::tracelog::Flusher;
use crate::worker::{self, IdlePolicy, Me, WorkerCtx};

/// Makes a custom scheduling policy for the given workers.
pub type PolicyFactory = Box<dyn FnOnce(&[WorkerDesc]) -> Box<dyn Policy<ReadyTask>> + Send>;

enum PolicyChoice {
    Default,
    Named(String),
    Custom(PolicyFactory),
}

/// Configures and builds a [`Runtime`].
pub struct RuntimeBuilder {
    pub(crate) workers: Option<usize>,
    policy: PolicyChoice,
    pub(crate) pin: bool,
    /// CPUs the workers may be placed on, instead of the process's allowed set.
    pub(crate) cpus: Option<Vec<u32>>,
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
    pub(crate) gpus: usize,
    pub(crate) gpu_backend: GpuBackend,
    /// Every device's memory limit, bytes (`None`: `TASKWATT_GPU_MEMORY_LIMIT`, else the
    /// device's own).
    gpu_memory_limit: Option<u64>,
    /// Tasks a GPU worker takes ahead for its prefetcher (`None`: the default).
    gpu_pipeline: Option<usize>,
    /// Where to keep performance models (none: not recorded).
    perf_models: Option<std::path::PathBuf>,
    /// Whether tasks' data accesses go to the trace.
    trace_accesses: bool,
    /// Extra power per (codelet name, architecture), W, for dmdae.
    task_powers: Vec<(String, Arch, f64)>,
    /// The built-in policies' knobs (dmdae's weights).
    policy_options: PolicyOptions,
    /// Whether the submitting thread is the last CPU worker (`None`: the default, or
    /// `TASKWATT_SUBMITTER_WORKS`).
    submitter_works: Option<bool>,
    pub(crate) reserved: usize,
}

/// The most workers a runtime starts (StarPU's `STARPU_NMAXWORKERS` is 80 by default):
/// more is refused by [`RuntimeBuilder::build`], not attempted.
pub const MAX_WORKERS: usize = 4096;

/// The largest trace chunk, in records ([`RuntimeBuilder::trace_chunk`]).
pub const MAX_TRACE_CHUNK: usize = 1 << 20;

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
            gpu_memory_limit: None,
            gpu_pipeline: None,
            perf_models: None,
            trace_accesses: false,
            task_powers: Vec::new(),
            submitter_works: None,
            reserved: 0,
        }
    }
}

impl RuntimeBuilder {
    /// Number of CPU workers (default: one per PU the process may run on).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = Some(n);
        self
    }

    /// Adds `n` emulated GPUs (at most [`MAX_DEVICES`](crate::MAX_DEVICES)): each is driven by a worker of
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

    /// Adds `n` GPUs (at most [`MAX_DEVICES`](crate::MAX_DEVICES)) driven by `backend`: each gets a worker of
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

    /// Limits the copies each device holds to `bytes` (default: the environment variable
    /// `TASKWATT_GPU_MEMORY_LIMIT`, e.g. `64MiB`, else 90 % of a CUDA device's memory;
    /// an emulated device has no limit of its own). Past the limit, copies are evicted,
    /// least recently used first, the only valid ones written back to main memory (see
    /// docs/accelerators.md). A task whose own data does not fit fails, naming the limit.
    pub fn gpu_memory_limit(mut self, bytes: u64) -> Self {
        self.gpu_memory_limit = Some(bytes);
        self
    }

    /// How many tasks a GPU worker takes ahead of the one it runs, so that a prefetcher
    /// thread of its device copies their data meanwhile (default 2, StarPU's
    /// `STARPU_CUDA_PIPELINE`, or the environment variable `TASKWATT_GPU_PIPELINE`; 0
    /// copies each task's data when it starts, on the worker).
    pub fn gpu_pipeline(mut self, tasks: usize) -> Self {
        self.gpu_pipeline = Some(tasks);
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
    /// `TASKWATT_SCHED` is read, then the default `lws` is used. `dmda`, `dmdas` and
    /// `dmdae` place tasks by their expected durations, from the performance models: give
    /// them [`perf_models`](Self::perf_models) (`PerfModels::default_dir()`, where
    /// `taskwatt run` keeps them); without models every task is a calibration and goes to
    /// the least loaded worker (a warning is logged).
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

    /// Whether the thread that waits on the runtime (`wait_all`, a task's wait, an
    /// acquisition) runs tasks meanwhile, as the last of the CPU workers: `n` CPU workers
    /// are then `n - 1` threads and the waiting thread, and the submitting thread's core
    /// is not left idle while it waits. That worker is in the trace as any other, not
    /// pinned (it is the application's thread); the policies never give a task to it
    /// alone. Default off, or `TASKWATT_SUBMITTER_WORKS=1` from the environment. See
    /// docs/runtime.md, "The submitting thread as a worker".
    pub fn submitter_works(mut self, on: bool) -> Self {
        self.submitter_works = Some(on);
        self
    }

    /// `k` more CPU workers, pinned to the cores after the workers' (wrapping as the
    /// workers do), which the scheduling policy never sees: they run only the tasks pinned
    /// to them with [`Task::on_worker`](crate::Task::on_worker). They come last among the
    /// workers, after the GPU workers, and the trace names them (`reserved_workers`).
    /// Type calibration uses them to run each type on every core of the package when the
    /// run itself has fewer workers (see runtime/src/reserved.rs). Default 0; at most
    /// [`MAX_RESERVED`](crate::MAX_RESERVED).
    pub fn reserved_workers(mut self, k: usize) -> Self {
        self.reserved = k;
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

    /// Discovers the topology, creates the policy, starts and pins the workers, and
    /// writes the run metadata to the trace.
    pub fn build(mut self) -> Result<Runtime, RuntimeError> {
        let (topology, workers) = self.plan()?;
        let policy_workers = workers.len() - self.reserved;
        let helper = self.helper_id(
            workers[..policy_workers]
                .iter()
                .filter(|w| w.arch == Arch::Cpu)
                .count(),
        )?;
        if let Some(h) = helper {
            self.params.push(("submitter_worker".into(), h.to_string()));
        }
        if self.reserved > 0 {
            self.params.push((
                "reserved_workers".into(),
                (policy_workers..workers.len())
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ));
        }
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
        let (memories, pipeline) = crate::device::memory::configured_limit(self.gpu_memory_limit)
            .map(|limit| crate::device::memory::accounts(&backends, limit))
            .and_then(|m| Ok((m, crate::pipeline::depth(self.gpu_pipeline)?)))
            .map_err(|message| RuntimeError::Device {
                backend: self.gpu_backend.name(),
                message,
            })?;
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
            None => crate::staging::from_env()?,
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
        let descs: Vec<WorkerDesc> = workers[..policy_workers]
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
                let d = WorkerDesc::new(w.id as usize, w.package, w.numa)
                    .with_arch(ArchMask::of_index(w.arch.index()))
                    .with_memory_node(node, bus);
                if helper == Some(w.id as usize) {
                    d.as_helper()
                } else {
                    d
                }
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
        // What drives the GPU workers (`1 emulated`: threads on the CPUs' cores, which a
        // what-if of the trace on another machine must know), as `taskwatt run` says it.
        if self.gpus > 0 && !self.params.iter().any(|(k, _)| k == "gpus") {
            self.params
                .push(("gpus".into(), format!("{} {}", self.gpus, self.gpu_backend)));
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
        if perf.is_none() && policy.uses_expected_durations() {
            // dmda from the library ran as a least-loaded placement, without a word.
            log::warn!(
                "policy {} places tasks by their expected durations, but the runtime has no \
                 performance models: every task is a calibration and goes to the least loaded \
                 worker; give RuntimeBuilder::perf_models(PerfModels::default_dir()?)",
                policy.name()
            );
        }
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
            handles_mark: AtomicU64::new(crate::handle::handles_made()),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            report: Mutex::new(Report::default()),
            first_failure: std::sync::OnceLock::new(),
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
            prefetches: AtomicU64::new(0),
            memories,
            eviction_log: Mutex::new(Vec::new()),
            pipeline,
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
            reserved: crate::reserved::Reserved::new(policy_workers as u32, self.reserved),
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
            if helper == Some(w.id as usize) {
                continue;
            }
            let reserved = w.id as usize >= policy_workers;
            let ctx = WorkerCtx {
                started: started.clone(),
                idle,
                shared: shared.clone(),
                cpu: w.cpu,
                me: Me {
                    device,
                    id: w.id,
                    arch: w.arch,
                    memory_node: w.device.map_or(0, |d| 1 + d as usize),
                    helper: false,
                    reserved,
                },
            };
            let t = std::thread::Builder::new()
                .name(format!("taskwatt-worker-{}", w.id))
                .spawn(move || {
                    if reserved {
                        worker::run_reserved(ctx)
                    } else {
                        worker::run(ctx)
                    }
                })
                .map_err(|source| RuntimeError::Spawn {
                    worker: w.id as usize,
                    source,
                });
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    shared.sleep.shutdown();
                    shared.reserved.shutdown();
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
        let unpinned = started.take_unpinned();
        if let Some(corrected) = unpin_in_meta(&meta, &unpinned) {
            shared.sink.send(Chunk::Meta(corrected));
        }
        if failed > 0 {
            shared.sleep.shutdown();
            shared.reserved.shutdown();
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
            helper: helper.map(|h| Helper::new(h as u32, idle)),
        })
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

const DEFAULT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);
const DEFAULT_YIELD: std::time::Duration = std::time::Duration::from_micros(100);

/// The environment variable that overrides the default idle policy.
pub const IDLE_ENV: &str = "TASKWATT_IDLE_US";

impl IdlePolicy {
    /// `TASKWATT_IDLE_US=<spin>,<yield>` (µs) if set, else the defaults.
    pub(crate) fn from_env() -> Result<IdlePolicy, RuntimeError> {
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

impl RuntimeBuilder {
    /// The helper's worker id among `cpus` CPU workers: the last one, when the
    /// submitting thread works (see [`RuntimeBuilder::submitter_works`]).
    pub(crate) fn helper_id(&self, cpus: usize) -> Result<Option<usize>, RuntimeError> {
        let on = match self.submitter_works {
            Some(on) => on,
            None => crate::helper::from_env()?,
        };
        Ok((on && cpus > 0).then(|| cpus - 1))
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

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_traces::WorkerInfo;

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
