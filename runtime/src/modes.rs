//! COMMUTE and REDUX accesses: groups of tasks that do not depend on one another.
//!
//! # Dependencies
//!
//! Consecutive accesses of one grouping mode to a handle (see [`Access::groups`]) form a
//! group. Each member waits for what a writer in its place would wait for (the readers
//! of the current version, or else its writers), and for nothing inside the group. The
//! first access of another mode closes the group:
//!
//! - a write (W, RW, or the first member of a group of the other mode) waits for every
//!   member, and the protocol is back to one last writer;
//! - a read waits for every member, and the members stay the writers of the version that
//!   later readers wait for, until the next write.
//!
//! A REDUX group is never closed by a user's access directly: the runtime first submits
//! the handle's reduction task (an RW access), which closes it, and the access then waits
//! for that task as for any writer. A handle that never sees a grouping access keeps the
//! plain protocol of handle.rs and pays nothing for this: the group state lives in a
//! [`HandleExt`] that is made on the handle's first grouping access or reduction.
//!
//! # At run time
//!
//! - COMMUTE members are exclusive: a worker takes the commute locks of a task's COMMUTE
//!   handles, in handle-id order (so two tasks cannot each hold one the other waits for),
//!   before the task's start time is taken, and gives them back when it ends. A worker
//!   that finds a lock taken waits for it; the holder is a running task, which needs
//!   nothing to finish. (StarPU instead puts such a task back in the queue.)
//! - REDUX members write into their worker's private copy ([`Reduction`]), made by the
//!   reduction's `init` on the worker's first contribution of a group; the reduction task
//!   folds the copies into the data with `combine` and empties them. A contributor that
//!   fails leaves its copy as the failure left it, as a failed RW task leaves its data.

use std::any::Any;
use std::cell::UnsafeCell;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::lock_api::RawMutex as _;
use smallvec::SmallVec;

use crate::codelet::Codelet;
use crate::handle::{Access, HandleCore, HandleDeps, READERS_PRUNE_MIN};
use crate::task::{Preds, TaskNode};

/// What a handle needs once it sees a grouping access, a reduction or a partitioning.
#[derive(Default)]
pub(crate) struct HandleExt {
    /// Taken only under the handle's dependency lock, after it.
    pub(crate) groups: parking_lot::Mutex<Groups>,
    pub(crate) reduction: std::sync::OnceLock<Arc<Reduction>>,
    /// Held by the running COMMUTE task.
    commute: CommuteLock,
    /// The handle is partitioned: its children are the data until it is unpartitioned.
    pub(crate) partitioned: AtomicBool,
    /// The handle is a part of a partitioned handle: its data is a view into the parent's,
    /// which only [`crate::Runtime::unpartition`] retires (an unregistration would hand
    /// out a view that outlives the partitioning).
    pub(crate) part: AtomicBool,
    /// The copies on device memory nodes 1.. (emulated devices: separate allocations).
    pub(crate) replicas: [std::cell::UnsafeCell<Option<crate::handle::Replica>>;
        crate::handle::MAX_MEMORY_NODES - 1],
    /// Held while a copy between nodes is made.
    pub(crate) transfer: parking_lot::Mutex<()>,
    /// The name [`crate::Runtime::set_name`] gave it (its parts are named after it).
    pub(crate) name: parking_lot::Mutex<Option<String>>,
}

struct CommuteLock(parking_lot::RawMutex);

impl Default for CommuteLock {
    fn default() -> Self {
        CommuteLock(parking_lot::RawMutex::INIT)
    }
}

/// The group state of one handle.
#[derive(Default)]
pub(crate) struct Groups {
    /// The mode of the open group, if the last accesses formed one.
    pub(crate) open: Option<Access>,
    /// The open group's members; once a read closed it, the writers of the current
    /// version (the handle's `last_writer` is then none).
    members: Vec<Arc<TaskNode>>,
    /// What each member of the open group waits for.
    before: Vec<Arc<TaskNode>>,
}

fn edge(from: &Arc<TaskNode>, node: &Arc<TaskNode>, preds: &mut Preds) -> bool {
    !Arc::ptr_eq(from, node) && from.add_successor(node, preds)
}

/// [`crate::submit::link`] for a handle with group state: the same protocol, with the
/// groups above. Out of line, so that the plain protocol's path stays as it was.
#[cold]
#[inline(never)]
pub(crate) fn link_grouped(
    deps: &mut HandleDeps,
    g: &mut Groups,
    mode: Access,
    node: &Arc<TaskNode>,
    preds: &mut Preds,
) -> bool {
    let mut waits = false;
    match mode {
        Access::R => {
            if g.open.is_some() {
                // Closed by a read: the members are the version's writers.
                g.open = None;
                g.before.clear();
            }
            if g.members.is_empty() {
                if let Some(w) = &deps.last_writer {
                    waits |= edge(w, node, preds);
                }
            } else {
                for m in &g.members {
                    waits |= edge(m, node, preds);
                }
            }
            if deps.readers.len() >= deps.prune_at {
                deps.readers.retain(|r| !r.is_finished());
                deps.prune_at = (2 * deps.readers.len()).max(READERS_PRUNE_MIN);
            }
            deps.readers.push(node.clone());
        }
        Access::Commute | Access::Redux if g.open == Some(mode) => {
            for b in &g.before {
                waits |= edge(b, node, preds);
            }
            g.members.push(node.clone());
        }
        _ => {
            // A write, or the first member of a group: it waits for the readers of the
            // current version, or else its writers.
            let before: Vec<Arc<TaskNode>> = if !deps.readers.is_empty() {
                deps.prune_at = READERS_PRUNE_MIN;
                deps.readers.drain(..).collect()
            } else if !g.members.is_empty() {
                std::mem::take(&mut g.members)
            } else {
                deps.last_writer.take().into_iter().collect()
            };
            for b in &before {
                waits |= edge(b, node, preds);
            }
            g.members.clear();
            if mode.groups() {
                g.open = Some(mode);
                g.members.push(node.clone());
                g.before = before;
                deps.last_writer = None;
            } else {
                g.open = None;
                g.before.clear();
                deps.last_writer = Some(node.clone());
            }
        }
    }
    waits
}

/// The nodes an access of `mode` to `core` would wait for now (for the deadlock check of
/// acquisitions).
pub(crate) fn waited_for(core: &HandleCore, mode: Access) -> Vec<Arc<TaskNode>> {
    let deps = core.deps.lock();
    let members: Vec<Arc<TaskNode>> = match core.ext() {
        Some(ext) => ext.groups.lock().members.clone(),
        None => Vec::new(),
    };
    if mode.writes() && !deps.readers.is_empty() {
        deps.readers.iter().cloned().collect()
    } else if !members.is_empty() {
        members
    } else {
        deps.last_writer.iter().cloned().collect()
    }
}

/// Whether a REDUX group of `core` waits for its reduction.
pub(crate) fn reduction_pending(core: &HandleCore) -> bool {
    match core.ext() {
        Some(ext) => {
            let _deps = core.deps.lock();
            let open = ext.groups.lock().open == Some(Access::Redux);
            open
        }
        None => false,
    }
}

/// A handle's reduction: how to start a contribution and how to fold one into the data,
/// with the contributions of the current REDUX group, one per worker.
pub(crate) struct Reduction {
    /// The codelet of the reduction tasks (its argument is this reduction).
    pub(crate) codelet: Codelet,
    slots: Box<[UnsafeCell<Option<Contribution>>]>,
    init: Box<dyn Fn() -> Contribution + Send + Sync>,
    combine: Box<Combine>,
}

/// One worker's contribution to a reduction.
type Contribution = Box<dyn Any + Send>;
/// Folds a contribution into the data.
type Combine = dyn Fn(&mut dyn Any, Contribution) + Send + Sync;

// SAFETY: slot `w` is touched only by the REDUX task running on worker `w` (one task at a
// time per worker) and by the reduction task, which the dependencies order after every
// member of the group and before every member of the next one.
unsafe impl Sync for Reduction {}

impl Reduction {
    pub(crate) fn new<T: Send + Sync + 'static>(
        name: &str,
        workers: usize,
        init: impl Fn() -> T + Send + Sync + 'static,
        combine: impl Fn(&mut T, T) + Send + Sync + 'static,
    ) -> Reduction {
        let codelet = Codelet::new(name).cpu(|ctx| {
            let red: &Arc<Reduction> = ctx.arg();
            let data: &mut T = ctx.w::<T>(0);
            red.fold_into(data);
        });
        Reduction {
            codelet,
            slots: (0..workers).map(|_| UnsafeCell::new(None)).collect(),
            init: Box::new(move || Box::new(init())),
            combine: Box::new(move |acc, x| {
                let acc = acc
                    .downcast_mut::<T>()
                    .expect("a reduction folds into the type it was set for");
                let x = *x
                    .downcast::<T>()
                    .expect("contributions have the reduction's type");
                combine(acc, x)
            }),
        }
    }

    /// The contribution of worker `worker`, made by `init` if it has none yet.
    ///
    /// # Safety
    /// The caller is the REDUX task running on `worker`, and takes one reference at a time.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slot(&self, worker: usize) -> &mut (dyn Any + Send) {
        // SAFETY: by the caller's contract nothing else touches this slot meanwhile.
        let slot = unsafe { &mut *self.slots[worker].get() };
        &mut **slot.get_or_insert_with(|| (self.init)())
    }

    /// Folds every contribution into `data`, in worker order, and empties the slots. Run by
    /// the reduction task, after every member of the group.
    fn fold_into(&self, data: &mut dyn Any) {
        for slot in self.slots.iter() {
            // SAFETY: the reduction task runs alone on the group's slots (see above).
            if let Some(x) = unsafe { &mut *slot.get() }.take() {
                (self.combine)(data, x);
            }
        }
    }
}

/// The commute locks of a running task, released when dropped.
pub(crate) struct CommuteGuard(SmallVec<[Arc<HandleCore>; 2]>);

impl CommuteGuard {
    /// No lock.
    #[inline]
    pub(crate) fn none() -> CommuteGuard {
        CommuteGuard(SmallVec::new())
    }

    /// Takes the commute locks of the COMMUTE handles in `accesses`, in id order.
    #[cold]
    #[inline(never)]
    pub(crate) fn take<'a>(
        accesses: impl Iterator<Item = (&'a Arc<HandleCore>, Access)>,
    ) -> CommuteGuard {
        let mut cores: SmallVec<[Arc<HandleCore>; 2]> = accesses
            .filter(|(_, m)| *m == Access::Commute)
            .map(|(c, _)| c.clone())
            .collect();
        cores.sort_by_key(|c| c.id);
        for c in &cores {
            c.ext()
                .expect("a COMMUTE access makes the handle's extension")
                .commute
                .0
                .lock();
        }
        CommuteGuard(cores)
    }
}

impl Drop for CommuteGuard {
    fn drop(&mut self) {
        for c in self.0.iter().rev() {
            let ext = c.ext().expect("locked above");
            // SAFETY: this guard took the lock in `take` and releases it once.
            unsafe { ext.commute.0.unlock() };
        }
    }
}
