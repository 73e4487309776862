//! The scheduling-policy trait and the contract between a policy and the runtime.
//!
//! # Call order and ownership
//!
//! For one run, the runtime drives a policy in this order:
//!
//! 1. **Construction** (`Registry::create` or the policy's own constructor) with the
//!    [`WorkerDesc`]s of every worker. No task exists yet.
//! 2. **`local(w)`**, once per worker `w`, *on that worker's thread*, before the worker's
//!    first `pop`. The returned [`Local`] is owned by the worker thread for the rest of the
//!    run and is handed back to the policy in every later call from that thread. This is
//!    where single-owner structures (a crossbeam `Worker` deque) live. A helper worker
//!    ([`WorkerDesc::helper`], the submitting thread) has no thread of its own: its
//!    `Local` is made on the first thread that helps and moves, one thread at a time, to
//!    whichever thread helps next.
//! 3. **`push(task, origin)`**, exactly once per task, once its last dependency is
//!    satisfied. Ownership of the task moves into the policy. `origin` says how it became
//!    ready: a worker that just finished its last predecessor ([`Origin::Worker`], with that
//!    worker's [`Local`], pushed at once), or not through a worker's task
//!    ([`Origin::External`], from any thread). Tasks ready at their submission are staged
//!    by the runtime and pushed in batches, in submission order, by whichever thread takes
//!    the batch: a worker, once the oldest has waited the staging window (taskwatt-runtime's
//!    `RuntimeBuilder::staging`) and the worker looks, or a thread about to wait.
//! 4. **`pop(w, local)`**, called by worker `w` whenever it is free (a helper: whenever
//!    its thread waits on the runtime and is free). Returning `Some(task)`
//!    moves ownership of the task to that worker, which runs it. Every pushed task must be
//!    returned by exactly one `pop`, to a worker that can run it. A policy may return `None`
//!    spuriously (for example when a steal races); the runtime retries, then parks the worker
//!    and wakes it on the next `push`.
//! 5. **`done(w, local)`**, after worker `w` ran the task it popped and pushed the successors
//!    that task released. It is a notification: no task changes hands.
//!
//! `push` and `pop` are called concurrently from any number of threads; a policy is
//! `Send + Sync` and does its own synchronisation. The runtime never holds a lock while
//! calling a policy.

use std::any::Any;

/// What a policy needs to know about a task.
pub trait SchedTask: Send + 'static {
    /// Scheduling priority: higher first (StarPU's convention). Default 0.
    fn priority(&self) -> i32;

    /// The architectures the task can run on (those its codelet implements, and its data
    /// can be on). A policy gives a task only to a worker whose [`WorkerDesc::arch`] is in
    /// this set. Default: any.
    #[inline]
    fn archs(&self) -> ArchMask {
        ArchMask::ALL
    }

    /// The expected duration of the task on a worker of architecture `arch` (one bit), in
    /// ns, from performance models; `None` when not known (not calibrated). Default: none.
    /// Read by the model-aware policies (`dmda`, `dmdas`).
    #[inline]
    fn expected_ns(&self, arch: ArchMask) -> Option<f64> {
        let _ = arch;
        None
    }

    /// The extra power, W, that a task of this type draws on a worker of architecture
    /// `arch` (one bit), summed over the energy domains, from a fitted energy model; `None`
    /// when not known. Read by `dmdae`.
    #[inline]
    fn expected_power_w(&self, arch: ArchMask) -> Option<f64> {
        let _ = arch;
        None
    }

    /// The copies the task needs before it can run on a worker of memory node `node` (0:
    /// main memory; a device's own node otherwise): their number and bytes, from where
    /// its data is valid now. Default: none. Read by `dmda` and `dmdas` with the worker's
    /// [`Bus`], before the task is queued.
    #[inline]
    fn transfer_bytes(&self, node: usize) -> (u32, u64) {
        let _ = node;
        (0, 0)
    }
}

/// Where a policy that reasons about time (dmda and its kin) reads "now", in ns from any
/// fixed origin. The runtime leaves it to the policy's own monotonic clock; a simulator in
/// virtual time passes its own (the same policy code then decides in virtual time).
pub trait PolicyClock: Send + Sync {
    /// Now, ns.
    fn now_ns(&self) -> f64;
}

/// How fast data reaches a worker's memory node (from main memory for a GPU worker, from
/// the devices for a CPU worker), measured once per machine: the time of `c` copies of
/// `b` bytes in all is `c * latency_ns + b / bytes_per_s`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bus {
    /// Bandwidth, bytes per second.
    pub bytes_per_s: u64,
    /// The fixed cost of one copy, ns.
    pub latency_ns: u64,
}

impl Bus {
    /// The expected time of `copies` copies of `bytes` bytes in all, ns.
    pub fn time_ns(&self, copies: u32, bytes: u64) -> f64 {
        if copies == 0 {
            return 0.0;
        }
        f64::from(copies) * self.latency_ns as f64
            + bytes as f64 * 1e9 / self.bytes_per_s.max(1) as f64
    }
}

/// A set of architectures, one bit each (bit `i` for taskwatt's `Arch` of index `i`:
/// CPU cores are bit 0, GPUs bit 1). A worker's own set has one bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArchMask(u8);

impl ArchMask {
    /// CPU cores.
    pub const CPU: ArchMask = ArchMask(1);
    /// GPUs.
    pub const GPU: ArchMask = ArchMask(1 << 1);
    /// Every architecture.
    pub const ALL: ArchMask = ArchMask(u8::MAX);
    /// No architecture.
    pub const NONE: ArchMask = ArchMask(0);

    /// The set with only the architecture of index `index` (below 8).
    #[inline]
    pub const fn of_index(index: usize) -> ArchMask {
        assert!(index < 8, "at most 8 architectures");
        ArchMask(1 << index)
    }

    /// The set of these bits.
    #[inline]
    pub const fn from_bits(bits: u8) -> ArchMask {
        ArchMask(bits)
    }

    /// The bits.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether every architecture of `other` is in `self`.
    #[inline]
    pub const fn contains(self, other: ArchMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the two sets share an architecture.
    #[inline]
    pub const fn intersects(self, other: ArchMask) -> bool {
        self.0 & other.0 != 0
    }

    /// The architectures in both.
    #[inline]
    #[must_use]
    pub const fn and(self, other: ArchMask) -> ArchMask {
        ArchMask(self.0 & other.0)
    }

    /// The architectures in either.
    #[inline]
    #[must_use]
    pub const fn or(self, other: ArchMask) -> ArchMask {
        ArchMask(self.0 | other.0)
    }

    /// Whether the set is empty.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl std::fmt::Debug for ArchMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == ArchMask::ALL {
            return f.write_str("ArchMask(ALL)");
        }
        let names: Vec<String> = (0..8)
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| match i {
                0 => "CPU".to_string(),
                1 => "GPU".to_string(),
                i => format!("arch{i}"),
            })
            .collect();
        write!(f, "ArchMask({})", names.join("|"))
    }
}

/// One worker, as the policy sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerDesc {
    /// Worker id: dense, from 0.
    pub id: usize,
    /// CPU package (socket) of the core it is pinned to (for a GPU worker: of the core
    /// its driving thread is pinned to).
    pub package: u32,
    /// NUMA node, where known.
    pub numa: Option<u32>,
    /// Its architecture (one bit).
    pub arch: ArchMask,
    /// The memory node it computes on (0: main memory).
    pub memory_node: usize,
    /// How fast data reaches that node, where measured.
    pub bus: Option<Bus>,
    /// A helper: the submitting thread, which runs tasks only while it waits on the
    /// runtime (`wait_all`, a task's wait, an acquisition), and leaves when its wait ends.
    /// A policy never gives a task to a helper alone (a task queued for it might wait
    /// until its thread waits again): it lets a helper take tasks that any other worker
    /// could take, and a helper's releases reach it as [`Origin::External`].
    pub helper: bool,
}

impl WorkerDesc {
    /// A CPU worker.
    pub fn new(id: usize, package: u32, numa: Option<u32>) -> WorkerDesc {
        WorkerDesc {
            id,
            package,
            numa,
            arch: ArchMask::CPU,
            memory_node: 0,
            bus: None,
            helper: false,
        }
    }

    /// The same worker, as a helper (see [`WorkerDesc::helper`]).
    #[must_use]
    pub fn as_helper(mut self) -> WorkerDesc {
        self.helper = true;
        self
    }

    /// The same worker, computing on memory node `node`, reached through `bus`.
    #[must_use]
    pub fn with_memory_node(mut self, node: usize, bus: Option<Bus>) -> WorkerDesc {
        self.memory_node = node;
        self.bus = bus;
        self
    }

    /// The same worker, of architecture `arch` (one bit).
    #[must_use]
    pub fn with_arch(mut self, arch: ArchMask) -> WorkerDesc {
        self.arch = arch;
        self
    }

    /// `n` CPU workers on package 0: for tests and examples.
    pub fn flat(n: usize) -> Vec<WorkerDesc> {
        (0..n).map(|id| WorkerDesc::new(id, 0, None)).collect()
    }
}

/// How a policy routes tasks on a machine with more than one architecture: one queue per
/// set of architectures a task can run on, among those present.
///
/// Built-in policies check [`Archs::mixed`] once: with one architecture, every task that
/// the runtime accepted runs on every worker, and they keep their single-architecture
/// code paths, which pay nothing for this.
#[derive(Clone, Debug)]
pub struct Archs {
    /// The architectures of the workers.
    pub present: ArchMask,
    /// Each worker's architecture.
    pub of_worker: Vec<ArchMask>,
}

impl Archs {
    /// The architectures of `workers`.
    pub fn of(workers: &[WorkerDesc]) -> Archs {
        Archs {
            present: workers.iter().fold(ArchMask::NONE, |m, w| m.or(w.arch)),
            of_worker: workers.iter().map(|w| w.arch).collect(),
        }
    }

    /// Whether workers of more than one architecture are present.
    pub fn mixed(&self) -> bool {
        self.present.bits().count_ones() > 1
    }

    /// Every non-empty set of present architectures, as a queue index is assigned by
    /// [`Archs::class`] (at most 255 with 8 architectures; 3 for CPUs and GPUs).
    pub fn classes(&self) -> Vec<ArchMask> {
        (1..=u8::MAX)
            .map(ArchMask::from_bits)
            .filter(|m| self.present.contains(*m))
            .collect()
    }

    /// The index, in [`Archs::classes`], of the set of present architectures a task of
    /// `archs` can run on. A task that no present worker can run (the runtime refuses
    /// those at submission) is put with the tasks any worker can run.
    pub fn class(&self, classes: &[ArchMask], archs: ArchMask) -> usize {
        let m = archs.and(self.present);
        let m = if m.is_empty() { self.present } else { m };
        classes
            .iter()
            .position(|c| *c == m)
            .expect("classes() lists every non-empty subset of the present architectures")
    }

    /// The classes worker `w` can take tasks from: first the tasks only its architecture
    /// can run, then the others that include it, fewest architectures first.
    pub fn classes_for(&self, classes: &[ArchMask], w: usize) -> Vec<usize> {
        let mine = self.of_worker[w];
        let mut v: Vec<usize> = (0..classes.len())
            .filter(|&i| classes[i].contains(mine))
            .collect();
        v.sort_by_key(|&i| classes[i].bits().count_ones());
        v
    }
}

/// Per-worker policy state, owned by the worker thread (see step 2 of the call order).
pub struct Local(Box<dyn Any + Send>);

impl Local {
    /// Wraps a policy's per-worker state.
    pub fn new<S: Any + Send>(state: S) -> Local {
        Local(Box::new(state))
    }

    /// A `Local` for policies that keep no per-worker state.
    pub fn none() -> Local {
        Local::new(())
    }

    /// The state, if it is an `S`.
    #[inline]
    pub fn get_mut<S: Any + Send>(&mut self) -> Option<&mut S> {
        self.0.downcast_mut::<S>()
    }

    /// The state as an `S`.
    ///
    /// # Panics
    /// If the state is not an `S`: the runtime passed one policy's `Local` to another
    /// policy, which is a bug in the caller.
    #[inline]
    pub fn expect_mut<S: Any + Send>(&mut self) -> &mut S {
        match self.0.downcast_mut::<S>() {
            Some(s) => s,
            None => panic!(
                "scheduler Local holds another policy's state (expected {})",
                std::any::type_name::<S>()
            ),
        }
    }
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Local(..)")
    }
}

/// Who released a task.
#[derive(Debug)]
pub enum Origin<'a> {
    /// Not a worker's finished predecessor: a task ready at its submission, pushed by the
    /// submitting thread, a waiting thread or a worker taking the staged tasks (see the
    /// module docs, step 3), or a task released by a thread outside the workers (a
    /// waiter releasing an acquired handle, pushed at once).
    External,
    /// Worker `id`, which just finished a predecessor; `local` is its state.
    Worker {
        /// The worker's id.
        id: usize,
        /// The worker's policy state.
        local: &'a mut Local,
    },
}

/// A scheduling policy. See the module docs for the call order and who owns a task when.
pub trait Policy<T: SchedTask>: Send + Sync {
    /// The policy's registry name (`ws`, `lws`...).
    fn name(&self) -> &str;

    /// The settings the policy runs with, as `(knob, value)` (dmdae's weights): the
    /// runtime records them in the trace's parameters as `sched.<knob>`. Default none.
    fn knobs(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Per-worker state for worker `worker`, called once on that worker's thread.
    fn local(&self, worker: usize) -> Local;

    /// Takes ownership of a ready task.
    fn push(&self, task: T, origin: Origin<'_>);

    /// Gives worker `worker` a task to run, if any.
    fn pop(&self, worker: usize, local: &mut Local) -> Option<T>;

    /// Whether any idle worker can take a task just pushed (true for the built-in
    /// policies with a shared queue or stealing). A policy that gives each task to one
    /// worker (dmda) says false, and the runtime then wakes every parked worker at each
    /// push, since the one that got the task may be among them. Default true.
    fn any_worker_takes_a_push(&self) -> bool {
        true
    }

    /// Whether the policy reads [`SchedTask::expected_ns`]: the runtime then looks the
    /// durations up in its performance models at each submission (a cost the others do
    /// not pay). Default false.
    fn uses_expected_durations(&self) -> bool {
        false
    }

    /// Worker `worker` finished the task it last popped and pushed what it released.
    fn done(&self, worker: usize, local: &mut Local) {
        let _ = (worker, local);
    }
}
