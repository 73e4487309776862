//! Submission: a task's accesses are checked, linked after the data's earlier accesses
//! (the dependency inference, `link`), and the task is staged or pushed once its last
//! predecessor is done; REDUX groups get their reduction task.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::codelet::CodeletInner;
use crate::completion::Readied;
use crate::context::MAX_ACCESSES;
use crate::error::RuntimeError;
use crate::handle::{Access, Handle, HandleCore, READERS_PRUNE_MIN};
use crate::runtime::Runtime;
use crate::task::{Body, Kind, Preds, Task, TaskHandle, TaskNode, DONE_CANCELLED, DONE_OK};

impl Runtime {
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
        let footprint = task.footprint.unwrap_or(footprint);
        if let Some((pred, _)) = task.after.iter().find(|(_, rt)| *rt != sh.epoch) {
            return Err(RuntimeError::ForeignTask {
                operation: format!("submit of codelet `{}`", codelet.name),
                task: pred.id,
            });
        }
        if let Some(w) = task.worker {
            let why = if !sh.reserved.holds(w) {
                Some("which is not a reserved worker (the policy schedules it)".to_string())
            } else if codelet.impls[taskwatt_traces::Arch::Cpu.index()].is_none() {
                Some("but its codelet has no CPU implementation".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                return Err(RuntimeError::NotReserved {
                    codelet: codelet.name.clone(),
                    worker: w,
                    why,
                    reserved: sh.reserved.ids().collect(),
                });
            }
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
        if let Some(w) = task.worker {
            node.archs.store(sh.reserved.encode(w), Ordering::Relaxed);
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
            worker: None,
            footprint: None,
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
                // A pinned task goes to its reserved worker's queue, not to staging.
                && node.reserved_index().is_none()
                && !node.cancelled.load(Ordering::Relaxed)
            {
                sh.stage(node.clone());
                return;
            }
            let mut none = None;
            // Ready as soon as submitted: its predecessors had all finished by then.
            match sh.ready(node.clone(), &mut none, node.submit) {
                Readied::Pushed => sh.sleep.notify(1),
                Readied::Granted | Readied::Reserved => {}
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
}

/// Refuses a handle listed twice by one task unless both accesses read it (two buffer
/// indices on one value written would let the implementation alias a `&mut`; StarPU
/// accepts a handle read twice: both buffers see the same value). Returns the accesses
/// that repeat an earlier one's handle, bit `i` for access `i` (there are at most
/// [`MAX_ACCESSES`]).
pub(crate) fn check_distinct(
    codelet: &str,
    accesses: &crate::task::Accesses,
) -> Result<u64, RuntimeError> {
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
