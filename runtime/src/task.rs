//! Tasks: the builder users fill in, and the node the runtime tracks.
//!
//! # A node's life
//!
//! 1. **Submitted.** `pending` starts at 1 (the submission guard) and gains one per
//!    unfinished predecessor found by dependency inference or listed explicitly.
//! 2. **Ready.** When `pending` drops to 0 the node goes to the scheduling policy (a
//!    codelet task; staged first if this happens at its submission, see
//!    `RuntimeBuilder::staging`) or wakes its acquirer (an acquisition). The submission
//!    guard makes sure this cannot happen before every dependency of the node has been
//!    recorded. A node that gained no predecessor has its guard dropped with a plain
//!    store: no other thread can reach its counter.
//! 3. **Running.** A worker takes the body out of the node ([`TaskNode::take_body`]): from
//!    here on the node holds no data handle, which breaks the handle → last writer → handle
//!    reference cycle.
//! 4. **Finished.** Under the node's lock `finished` is set and the successor list taken;
//!    successors are then released outside the lock. A predecessor that finishes after a
//!    successor looked at it is impossible: `add_successor` and `finish` take the same lock.
//!    The status is stored first, under that lock: `add_successor` that finds it set
//!    needs no lock, since the list will not be read again.
//!
//! A failed or cancelled node passes the cancellation on to the successors it releases.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;
use taskwatt_scheduler::SchedTask;
use taskwatt_traces::{TaskId, Timestamp, WorkerId};

use crate::codelet::{Codelet, CodeletInner};
use crate::context::MAX_ACCESSES;
use crate::handle::{Access, Handle, HandleCore};
use crate::inline::Arg;
// loom's primitives under `--cfg loom` (see loom_shim.rs and its models).
use crate::loom_shim::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, UnsafeCell};
// A node's successor list: the runtime's spin lock, or under loom loom's own mutex, so that
// the models check the protocol around it (see sync.rs, `SpinLock`).
#[cfg(loom)]
use crate::loom_shim::Mutex as SpinLock;
#[cfg(not(loom))]
use crate::sync::SpinLock;

/// A task's data accesses, in declaration order: the handles, inline up to 4 (no
/// allocation), and their modes packed three bits each beside them. A list of (handle, mode)
/// pairs took 16 bytes per access for 9 bytes of content: packing the modes brings the task
/// node from 256 to 240 bytes, 256 with the `Arc`'s counts, so that it fills four cache
/// lines instead of straddling five or six.
pub(crate) struct Accesses {
    handles: SmallVec<[Arc<HandleCore>; 4]>,
    /// Bits `3k..3k+3` of word `i / 21`, `k = i % 21`: the mode of access `i`, for the first
    /// [`MAX_ACCESSES`] accesses (a task with more is refused at submission, so later modes
    /// are never read).
    modes: [u64; 2],
}

/// Modes per word of [`Accesses::modes`].
const MODES_PER_WORD: usize = 21;
/// Bit 0 of every mode field.
const FIELD_LOW: u64 = 0o111_111_111_111_111_111_111;

const fn mode_code(mode: Access) -> u64 {
    match mode {
        Access::R => 0,
        Access::W => 1,
        Access::RW => 2,
        Access::Commute => 3,
        Access::Redux => 4,
    }
}

impl Accesses {
    /// No access.
    #[inline]
    pub(crate) fn new() -> Accesses {
        Accesses {
            handles: SmallVec::new(),
            modes: [0; 2],
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, core: Arc<HandleCore>, mode: Access) {
        let i = self.handles.len();
        if i < MAX_ACCESSES {
            self.modes[i / MODES_PER_WORD] |= mode_code(mode) << (3 * (i % MODES_PER_WORD));
        }
        self.handles.push(core);
    }

    /// Whether some access is COMMUTE or REDUX (a code of 3 or more: bits 0 and 1, or bit
    /// 2, of its field).
    #[inline]
    pub(crate) fn has_grouping(&self) -> bool {
        self.modes
            .iter()
            .any(|&w| (w & (w >> 1) & FIELD_LOW) | ((w >> 2) & FIELD_LOW) != 0)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// The handles, in declaration order.
    #[inline]
    pub(crate) fn handles(&self) -> &[Arc<HandleCore>] {
        &self.handles
    }

    #[inline]
    fn mode(&self, i: usize) -> Access {
        match (self.modes[i / MODES_PER_WORD] >> (3 * (i % MODES_PER_WORD))) & 7 {
            0 => Access::R,
            1 => Access::W,
            2 => Access::RW,
            3 => Access::Commute,
            _ => Access::Redux,
        }
    }

    /// Access `i`, if there is one (among the first [`MAX_ACCESSES`]).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<(&HandleCore, Access)> {
        if i >= MAX_ACCESSES {
            return None;
        }
        self.handles.get(i).map(|h| (&**h, self.mode(i)))
    }

    /// The accesses, in declaration order (the first [`MAX_ACCESSES`]).
    #[inline]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<HandleCore>, Access)> + Clone + '_ {
        self.handles
            .iter()
            .take(MAX_ACCESSES)
            .enumerate()
            .map(|(i, h)| (h, self.mode(i)))
    }
}

/// A task's predecessor ids: inline up to 4.
pub(crate) type Preds = SmallVec<[TaskId; 4]>;

/// A task to submit: a codelet, its data accesses in order, and options.
///
/// ```
/// # use taskwatt_runtime::{Codelet, Runtime, Task};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let add = Codelet::new("add").cpu(|ctx| {
///     let x = *ctx.r::<u64>(0);
///     *ctx.rw::<u64>(1) += x;
/// });
/// let (a, b) = (rt.register(2u64), rt.register(40u64));
/// rt.submit(Task::new(&add).r(&a).rw(&b).priority(1)).unwrap();
/// assert_eq!(rt.unregister(b).unwrap(), 42);
/// ```
///
/// A task borrows its codelet until it is submitted: building one changes no reference
/// count (see [`Runtime::submit`](crate::Runtime::submit)).
pub struct Task<'a> {
    pub(crate) codelet: &'a Codelet,
    pub(crate) accesses: Accesses,
    /// Explicit predecessors, with the epoch of the runtime they were submitted to.
    pub(crate) after: Vec<(Arc<TaskNode>, u32)>,
    pub(crate) arg: Arg,
    pub(crate) priority: i32,
    /// The reserved worker it must run on, if any.
    pub(crate) worker: Option<WorkerId>,
    /// Its footprint, when [`Task::footprint`] sets it rather than its data's sizes.
    pub(crate) footprint: Option<u64>,
}

impl<'a> Task<'a> {
    /// A task of `codelet`.
    #[inline]
    pub fn new(codelet: &'a Codelet) -> Task<'a> {
        Task {
            codelet,
            accesses: Accesses::new(),
            after: Vec::new(),
            arg: Arg::NONE,
            priority: 0,
            worker: None,
            footprint: None,
        }
    }

    /// Adds an access to `handle`. Its buffer index in [`TaskCtx`](crate::TaskCtx) is the
    /// number of accesses added before it.
    #[inline]
    pub fn access<T>(mut self, handle: &Handle<T>, mode: Access) -> Task<'a> {
        self.accesses.push(Arc::clone(&handle.core), mode);
        self
    }

    /// Adds a read access.
    #[inline]
    pub fn r<T>(self, handle: &Handle<T>) -> Task<'a> {
        self.access(handle, Access::R)
    }

    /// Adds a write access (the old value is not read).
    #[inline]
    pub fn w<T>(self, handle: &Handle<T>) -> Task<'a> {
        self.access(handle, Access::W)
    }

    /// Adds a read-write access.
    #[inline]
    pub fn rw<T>(self, handle: &Handle<T>) -> Task<'a> {
        self.access(handle, Access::RW)
    }

    /// Adds a COMMUTE access: read and write, in any order among the consecutive COMMUTE
    /// accesses to the handle, one at a time (see [`Access::Commute`]).
    #[inline]
    pub fn commute<T>(self, handle: &Handle<T>) -> Task<'a> {
        self.access(handle, Access::Commute)
    }

    /// Adds a REDUX access: the task's contribution to the handle's reduction (see
    /// [`Access::Redux`]; the handle needs [`Runtime::set_reduction`](crate::Runtime::set_reduction)).
    #[inline]
    pub fn redux<T>(self, handle: &Handle<T>) -> Task<'a> {
        self.access(handle, Access::Redux)
    }

    /// Runs only after `pred` finished: an explicit dependency, for graphs without data.
    #[inline]
    pub fn after(mut self, pred: &TaskHandle) -> Task<'a> {
        self.after.push((pred.node.clone(), pred.runtime));
        self
    }

    /// A value the implementation reads with [`TaskCtx::arg`](crate::TaskCtx::arg)
    /// (StarPU's `cl_arg`). Values of up to 16 bytes and pointer alignment are stored in
    /// the task itself; larger ones are boxed.
    #[inline]
    pub fn arg<A: Any + Send + Sync>(mut self, arg: A) -> Task<'a> {
        self.arg = Arg::new(arg);
        self
    }

    /// Scheduling priority: higher runs first under `prio` (default 0).
    #[inline]
    pub fn priority(mut self, priority: i32) -> Task<'a> {
        self.priority = priority;
        self
    }

    /// Sets the task's footprint, in bytes, instead of the sum of its data's sizes
    /// (StarPU's `footprint` function of a performance model): the size its performance
    /// model and a `codelet-footprint` attribution file it under. For a task that reads
    /// data its kind does not (a calibration task's pristine copy of its input), so that
    /// it counts as the tasks of the graph it stands for.
    #[inline]
    pub fn footprint(mut self, bytes: u64) -> Task<'a> {
        self.footprint = Some(bytes);
        self
    }

    /// Runs the task on `worker`, one of the runtime's reserved workers
    /// ([`RuntimeBuilder::reserved_workers`](crate::RuntimeBuilder::reserved_workers),
    /// [`Runtime::reserved_workers`](crate::Runtime::reserved_workers)), which the policy
    /// never sees. The submission of a task pinned to any other worker is an error
    /// ([`RuntimeError::NotReserved`](crate::RuntimeError::NotReserved)).
    #[inline]
    pub fn on_worker(mut self, worker: WorkerId) -> Task<'a> {
        self.worker = Some(worker);
        self
    }
}

/// What a node carries until a worker runs it.
pub(crate) struct Body {
    pub(crate) accesses: Accesses,
    /// Predecessor ids, for the trace (StarPU's DependsOn). Built by the submitter without
    /// a lock and published with the body.
    pub(crate) preds: Preds,
    pub(crate) arg: Arg,
}

/// Most reserved workers: a pinned task keeps its worker's index in the node's `archs`
/// byte, as `PINNED | index`, below `u8::MAX` (which means "its codelet's architectures").
pub const MAX_RESERVED: usize = 127;

/// The bit of `TaskNode::archs` that marks a pinned task (architecture masks use the low
/// bits only).
pub(crate) const PINNED: u8 = 0x80;

/// The index among the reserved workers `archs` names, if it names one.
#[inline]
pub(crate) fn reserved_of(archs: u8) -> Option<u8> {
    (archs != u8::MAX && archs & PINNED != 0).then_some(archs & !PINNED)
}

pub(crate) enum Kind {
    /// A codelet task.
    Codelet,
    /// An acquisition by a thread outside the runtime (see `acquire.rs`).
    Acquire,
}

/// Status values of `TaskNode::status`.
pub(crate) const PENDING: u8 = 0;
pub(crate) const DONE_OK: u8 = 1;
pub(crate) const DONE_FAILED: u8 = 2;
pub(crate) const DONE_CANCELLED: u8 = 3;

/// Successors of a node: inline up to 4.
pub(crate) type Successors = SmallVec<[Arc<TaskNode>; 4]>;

struct Links {
    finished: bool,
    successors: Successors,
}

pub(crate) struct TaskNode {
    pub(crate) id: TaskId,
    pub(crate) kind: Kind,
    pub(crate) codelet_id: u32,
    pub(crate) priority: i32,
    pub(crate) footprint: u64,
    pub(crate) submit: Timestamp,
    pub(crate) ready: AtomicU64,
    pub(crate) pending: AtomicUsize,
    pub(crate) cancelled: AtomicBool,
    pub(crate) status: AtomicU8,
    /// A thread waits on this node (see `Waiters`).
    pub(crate) has_waiter: AtomicBool,
    /// For acquisitions: the acquirer may go on.
    pub(crate) granted: AtomicBool,
    /// For deferred acquisitions: released before their grant; whoever takes this flag
    /// back (the grant, or the release that sees the grant) completes the node.
    pub(crate) abandoned: AtomicBool,
    /// A failed or cancelled node whose failure `wait_all` has reported: it no longer
    /// cancels tasks submitted after that report.
    pub(crate) reported: AtomicBool,
    /// Written once before the submission guard is released, taken once by the thread
    /// that got the ready node (see [`TaskNode::set_body`] and [`TaskNode::take_body`]).
    /// No lock: the dependency counter already orders the two, and a lock cost two
    /// read-modify-writes on each side per task, each a full barrier on x86.
    body: UnsafeCell<Option<Body>>,
    links: SpinLock<Links>,
    /// The codelet: its name and implementations. The node holds the only reference a
    /// task takes, so that workers do not bounce the codelet's reference count between
    /// cores; a recycled node keeps it for the next task of the same codelet (see
    /// [`TaskNode::renew`]), so that a submission into a pooled node changes no count.
    pub(crate) codelet: Arc<CodeletInner>,
    /// The architectures the task can run on, set at submission with devices
    /// (`u8::MAX`: those of its codelet); for a task pinned to a reserved worker, which no
    /// policy sees, that worker's index (`reserved::encode`: the node's four cache lines
    /// have no room for another field).
    pub(crate) archs: AtomicU8,
}

impl TaskNode {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: TaskId,
        kind: Kind,
        codelet: Arc<CodeletInner>,
        codelet_id: u32,
        priority: i32,
        footprint: u64,
        submit: Timestamp,
        body: Option<Body>,
    ) -> TaskNode {
        TaskNode {
            id,
            kind,
            codelet_id,
            priority,
            footprint,
            submit,
            ready: AtomicU64::new(0),
            pending: AtomicUsize::new(1),
            cancelled: AtomicBool::new(false),
            status: AtomicU8::new(PENDING),
            has_waiter: AtomicBool::new(false),
            granted: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            reported: AtomicBool::new(false),
            body: UnsafeCell::new(body),
            links: SpinLock::new(Links {
                finished: false,
                successors: Successors::new(),
            }),
            codelet,
            archs: AtomicU8::new(u8::MAX),
        }
    }

    /// Makes `self`, a finished node nobody else holds (a pooled one), what
    /// [`TaskNode::new`] makes with a clone of `codelet` and no body. The codelet reference
    /// is kept when it is the same codelet, as it is for most tasks of a graph: neither
    /// count changes (two locked instructions per submission saved, with the borrowed
    /// codelet of [`Task`]). Every field is named, so that a field added to the node
    /// cannot be forgotten here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn renew(
        &mut self,
        id: TaskId,
        kind: Kind,
        codelet: &Arc<CodeletInner>,
        codelet_id: u32,
        priority: i32,
        footprint: u64,
        submit: Timestamp,
    ) {
        let TaskNode {
            id: id_,
            kind: kind_,
            codelet_id: codelet_id_,
            priority: priority_,
            footprint: footprint_,
            submit: submit_,
            ready,
            pending,
            cancelled,
            status,
            has_waiter,
            granted,
            abandoned,
            reported,
            body,
            links,
            codelet: codelet_,
            archs,
        } = self;
        *archs = AtomicU8::new(u8::MAX);
        *id_ = id;
        *kind_ = kind;
        *codelet_id_ = codelet_id;
        *priority_ = priority;
        *footprint_ = footprint;
        *submit_ = submit;
        *ready = AtomicU64::new(0);
        *pending = AtomicUsize::new(1);
        *cancelled = AtomicBool::new(false);
        *status = AtomicU8::new(PENDING);
        *has_waiter = AtomicBool::new(false);
        *granted = AtomicBool::new(false);
        *abandoned = AtomicBool::new(false);
        *reported = AtomicBool::new(false);
        *body = UnsafeCell::new(None);
        *links = SpinLock::new(Links {
            finished: false,
            successors: Successors::new(),
        });
        if !Arc::ptr_eq(codelet_, codelet) {
            *codelet_ = codelet.clone();
        }
    }

    /// The codelet's name.
    pub(crate) fn codelet_name(&self) -> &str {
        &self.codelet.name
    }

    /// Makes `succ` wait for `self`, and records `self` in `preds`, the predecessor ids of
    /// `succ` being built by its submitter. Returns whether an edge was added (false when
    /// `self` already finished; then a failed or cancelled `self` whose failure was not
    /// reported yet cancels `succ` right away).
    pub(crate) fn add_successor(self: &Arc<Self>, succ: &Arc<TaskNode>, preds: &mut Preds) -> bool {
        if Arc::ptr_eq(self, succ) {
            return false;
        }
        // A finished predecessor is seen without its lock: `finish` publishes the status
        // before it takes the successors, so a node whose status is set will never look
        // at its list again. (In the fan-out/fan-in, most predecessors have finished by
        // the time their successors are submitted; this saves their lock.)
        let finished = self.status.load(Ordering::Acquire) != PENDING || {
            let mut links = self.links.lock();
            if !links.finished {
                // Count the edge before publishing it: the release in `finish`
                // decrements only what it finds in the list.
                succ.pending.fetch_add(1, Ordering::Relaxed);
                links.successors.push(succ.clone());
            }
            links.finished
        };
        if finished {
            if self.status.load(Ordering::Acquire) != DONE_OK
                && !self.reported.load(Ordering::Acquire)
            {
                succ.cancelled.store(true, Ordering::Relaxed);
            }
            // Still a predecessor in the recorded graph: it ran before `succ`.
            self.record_as_pred(preds);
            return false;
        }
        self.record_as_pred(preds);
        true
    }

    /// Records `self` among a successor's predecessors for the trace. Acquisitions are not
    /// tasks and have no id in the trace: the edges through them are implied by the data.
    fn record_as_pred(&self, preds: &mut Preds) {
        if matches!(self.kind, Kind::Codelet) {
            preds.push(self.id);
        }
    }

    /// Gives the node its body.
    ///
    /// # Safety
    /// Called once per node, by its submitter, before the submission guard is released
    /// (the release on `pending` publishes the body), and with no other access to the
    /// body meanwhile: nobody may take it before the node is ready, which needs that
    /// release.
    pub(crate) unsafe fn set_body(&self, body: Body) {
        // SAFETY: by the contract, this is the only access to the cell at this time.
        self.body.with_mut(|b| unsafe { *b = Some(body) });
    }

    /// The index among the reserved workers of the one the task is pinned to, if any
    /// (reserved.rs): kept in `archs`, which only a policy reads, and a pinned task never
    /// reaches the policy.
    #[inline]
    pub(crate) fn reserved_index(&self) -> Option<u8> {
        reserved_of(self.archs.load(Ordering::Relaxed))
    }

    /// The body, read in place.
    ///
    /// # Safety
    /// As [`TaskNode::take_body`]: called by the holder of the node's ready task, before
    /// it is taken.
    pub(crate) unsafe fn body_ref(&self) -> Option<&Body> {
        // SAFETY: by the contract, nobody writes the cell while the reference lives.
        self.body.with(|b| unsafe { (*b).as_ref() })
    }

    /// Takes the body (`None` if the node never had one, or if it was taken).
    ///
    /// # Safety
    /// Called only by the one thread that got the node once it was ready: the worker the
    /// policy gave it to, or the thread that cancels it. The last decrement of `pending`
    /// (AcqRel) and the policy's push and pop order this after [`TaskNode::set_body`].
    #[inline]
    pub(crate) unsafe fn take_body(&self) -> Option<Body> {
        // SAFETY: by the contract, no other thread accesses the cell now or later.
        self.body.with_mut(|b| unsafe { (*b).take() })
    }

    /// The task's accesses whose data may be copied ahead of it (not REDUX or COMMUTE,
    /// whose rights come when it runs), for a GPU worker's prefetcher.
    ///
    /// # Safety
    /// As [`TaskNode::take_body`]: called by the worker the policy gave this ready node
    /// to, before it takes the body.
    pub(crate) unsafe fn accesses_ahead(&self) -> SmallVec<[(Arc<HandleCore>, Access); 4]> {
        // SAFETY: by the contract, no other thread accesses the cell now.
        self.body.with(|b| unsafe {
            (*b).as_ref()
                .map(|b| {
                    b.accesses
                        .iter()
                        .filter(|(_, m)| !m.groups())
                        .map(|(c, m)| (Arc::clone(c), m))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Asks for all the lines of `self`'s allocation (the `Arc`'s counts included) in
    /// this core's cache, ready to be written. Their transfers from the core that wrote
    /// them last then overlap, instead of following one another as the fields are
    /// touched.
    #[inline]
    pub(crate) fn prefetch_for_write(self: &Arc<Self>) {
        // The counts sit just before the value in the `Arc`'s allocation.
        let first = (Arc::as_ptr(self) as usize).saturating_sub(2 * std::mem::size_of::<usize>());
        let end = Arc::as_ptr(self) as usize + std::mem::size_of::<TaskNode>();
        let mut line = first & !63;
        while line < end {
            crate::prefetch::for_write(line as *const u8);
            line += 64;
        }
    }

    /// Asks for the line of the dependency counter, ready to be written: the other
    /// predecessors decremented it last. Releasing several successors asks for all their
    /// counters first, so that their transfers overlap instead of following each other
    /// (each decrement is a locked instruction, which waits for its line).
    #[inline]
    pub(crate) fn prefetch_pending(&self) {
        crate::prefetch::for_write(&self.pending);
    }

    /// Marks the node finished with `status` and returns its successors.
    pub(crate) fn finish(&self, status: u8) -> Successors {
        let mut links = self.links.lock();
        // Publish the status before `finished`: `add_successor` reads it after seeing
        // `finished` under the same lock.
        self.status.store(status, Ordering::SeqCst);
        links.finished = true;
        std::mem::take(&mut links.successors)
    }

    /// Its successors now (none once it finished).
    pub(crate) fn successors(&self) -> Successors {
        self.links.lock().successors.clone()
    }

    /// Whether the node finished (in any way).
    #[inline]
    pub(crate) fn is_finished(&self) -> bool {
        self.status.load(Ordering::SeqCst) != PENDING
    }
}

// SAFETY: every field but `body` is Sync (atomics, locks, immutable data). `body` is
// accessed through `set_body` and `take_body` only, whose contracts give it one writer
// and then one taker, ordered by the dependency counter (a happens-before edge). `Body`
// is Send (its data references and argument are Send + Sync).
unsafe impl Sync for TaskNode {}

/// The ready-task type the scheduling policies see.
pub struct ReadyTask(pub(crate) Arc<TaskNode>);

impl ReadyTask {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.0.id
    }

    /// Its codelet's name.
    pub fn codelet_name(&self) -> &str {
        self.0.codelet_name()
    }

    /// Bytes of data it accesses.
    pub fn footprint(&self) -> u64 {
        self.0.footprint
    }
}

impl SchedTask for ReadyTask {
    #[inline]
    fn priority(&self) -> i32 {
        self.0.priority
    }

    /// Its expected duration on `arch` (CPU or GPU), from the performance models loaded
    /// when the runtime was built: the runtime notes it with the codelet at submission,
    /// for policies that read it (the node has no room left in its four cache lines).
    #[inline]
    fn expected_ns(&self, arch: taskwatt_scheduler::ArchMask) -> Option<f64> {
        let arch = if arch == taskwatt_scheduler::ArchMask::GPU {
            taskwatt_traces::Arch::Gpu
        } else {
            taskwatt_traces::Arch::Cpu
        };
        self.0.codelet.expected_ns(arch, self.0.footprint)
    }

    /// Its codelet's extra power on `arch`, from the energy model the runtime was given.
    fn expected_power_w(&self, arch: taskwatt_scheduler::ArchMask) -> Option<f64> {
        let arch = if arch == taskwatt_scheduler::ArchMask::GPU {
            taskwatt_traces::Arch::Gpu
        } else {
            taskwatt_traces::Arch::Cpu
        };
        self.0.codelet.power_w.read()[arch.index()]
    }

    /// The copies it would need on memory node `node`: those of its handles (REDUX ones
    /// aside) with no valid copy there.
    fn transfer_bytes(&self, node: usize) -> (u32, u64) {
        // SAFETY: the body is taken only by the thread that owns this ready task (the
        // worker it was given to, which takes it by value) or cancels it before any push;
        // `&self` here means neither has happened, and the body was published before the
        // node became ready.
        let Some(body) = (unsafe { self.0.body_ref() }) else {
            return (0, 0);
        };
        let node = node.min(crate::handle::MAX_MEMORY_NODES - 1);
        let mut need = (0u32, 0u64);
        for (core, mode) in body.accesses.iter() {
            if mode != crate::handle::Access::Redux
                && core.replica(node) == crate::handle::ReplicaState::Invalid
                && core.copier.is_some()
            {
                need.0 += 1;
                need.1 += core.bytes;
            }
        }
        need
    }

    /// The architectures it can run on: with devices, as set at submission; else those
    /// its codelet implements.
    #[inline]
    fn archs(&self) -> taskwatt_scheduler::ArchMask {
        match self.0.archs.load(Ordering::Relaxed) {
            u8::MAX => self.0.codelet.arch_mask(),
            m => taskwatt_scheduler::ArchMask::from_bits(m),
        }
    }
}

impl std::fmt::Debug for ReadyTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadyTask")
            .field("id", &self.0.id)
            .field("codelet", &self.0.codelet_name())
            .finish()
    }
}

/// A submitted task: wait on it, or make later tasks depend on it.
#[derive(Clone)]
pub struct TaskHandle {
    pub(crate) node: Arc<TaskNode>,
    /// The epoch of the runtime it was submitted to: another runtime refuses it.
    pub(crate) runtime: u32,
}

impl TaskHandle {
    /// The task's id (submission order, from 0).
    pub fn id(&self) -> TaskId {
        self.node.id
    }

    /// Whether it finished (ran, failed, or was cancelled).
    pub fn is_finished(&self) -> bool {
        self.node.is_finished()
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle")
            .field("id", &self.node.id)
            .field("codelet", &self.node.codelet_name())
            .field("finished", &self.is_finished())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_are_packed_and_read_back_in_order() {
        let cores: Vec<Arc<HandleCore>> = (0..MAX_ACCESSES + 2)
            .map(|i| Arc::new(HandleCore::new(i as u64, 8, None)))
            .collect();
        let all = [
            Access::R,
            Access::W,
            Access::RW,
            Access::Commute,
            Access::Redux,
        ];
        let mode = |i: usize| all[(i * 7 + i / 5) % 5];
        let mut a = Accesses::new();
        for (i, c) in cores.iter().enumerate() {
            a.push(c.clone(), mode(i));
        }
        assert_eq!(a.len(), MAX_ACCESSES + 2);
        // Across the two words of modes, and at both ends of each.
        for i in [0, 1, 19, 20, 21, 22, 40, 41] {
            let (core, m) = a.get(i).expect("declared");
            assert_eq!(core.id, cores[i].id);
            assert_eq!(m, mode(i), "access {i}");
        }
        assert!(
            a.get(MAX_ACCESSES).is_none(),
            "past the limit nothing is read"
        );
        let listed: Vec<Access> = a.iter().map(|(_, m)| m).collect();
        assert_eq!(listed, (0..MAX_ACCESSES).map(mode).collect::<Vec<_>>());
        assert!(a.has_grouping());
    }

    #[test]
    fn a_grouping_mode_is_seen_in_any_field() {
        let core = Arc::new(HandleCore::new(0u64, 8, None));
        for plain in [Access::R, Access::W, Access::RW] {
            for special in [Access::Commute, Access::Redux] {
                for at in 0..MAX_ACCESSES {
                    let mut a = Accesses::new();
                    for i in 0..MAX_ACCESSES {
                        a.push(core.clone(), if i == at { special } else { plain });
                    }
                    assert!(a.has_grouping(), "{special:?} at {at} among {plain:?}");
                }
                let mut a = Accesses::new();
                for _ in 0..MAX_ACCESSES {
                    a.push(core.clone(), plain);
                }
                assert!(!a.has_grouping(), "only {plain:?}");
            }
        }
    }

    #[test]
    #[cfg(not(loom))] // loom's atomics are larger
    fn a_node_fills_four_cache_lines_with_its_counts() {
        assert_eq!(std::mem::size_of::<TaskNode>(), 240);
        // `Arc`'s allocation: two counts and the node.
        assert!(2 * std::mem::size_of::<usize>() + std::mem::size_of::<TaskNode>() <= 256);
    }
}
