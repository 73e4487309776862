//! Waits that could never end are refused with [`RuntimeError::Deadlock`] (StarPU answers
//! `-EDEADLK`):
//! - any wait (`wait_all`, `wait`, `acquire`, `acquire_mut`, `unregister`) from inside a
//!   task of the same runtime: the tasks waited for may need the caller's worker, or be the
//!   caller itself;
//! - a wait, from a thread holding an acquisition guard, for something that waits for that
//!   guard: `wait_all` while a submitted task waits for it, `wait` on such a task,
//!   `acquire`/`acquire_mut`/`unregister` of data behind it.
//!
//! Each thread keeps the guards it holds (with their runtime); the check walks the graph
//! from those guards only when the thread holds one, so a wait without a guard costs one
//! thread-local read.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::{Arc, Weak};

use crate::error::RuntimeError;
use crate::task::{Kind, TaskNode};

thread_local! {
    /// The epoch of the runtime this thread is a worker of (0: none).
    static WORKER_OF: Cell<u32> = const { Cell::new(0) };
    /// Guards held by this thread: (runtime epoch, handle id, acquisition node).
    static HELD: RefCell<Vec<(u32, String, Weak<TaskNode>)>> = const { RefCell::new(Vec::new()) };
}

/// Nodes visited at most by one check: past this, the wait goes ahead unchecked.
const WALK_LIMIT: usize = 1 << 20;

/// Marks this thread as a worker of runtime `epoch`.
pub(crate) fn set_worker(epoch: u32) {
    WORKER_OF.with(|w| w.set(epoch));
}

/// Marks this thread as one of runtime `epoch`'s workers until dropped, then restores
/// its mark: the helper (the submitting thread running tasks while it waits, helper.rs)
/// carries it while it runs tasks, so that a task waiting on its own runtime is refused
/// there as it is on a worker thread.
pub(crate) struct WorkerMark(u32);

impl WorkerMark {
    pub(crate) fn enter(epoch: u32) -> WorkerMark {
        WorkerMark(WORKER_OF.with(|w| w.replace(epoch)))
    }
}

impl Drop for WorkerMark {
    fn drop(&mut self) {
        let _ = WORKER_OF.try_with(|w| w.set(self.0));
    }
}

fn not_in_task(operation: &'static str, epoch: u32) -> Result<(), RuntimeError> {
    if WORKER_OF.try_with(Cell::get).unwrap_or(0) == epoch {
        return Err(RuntimeError::Deadlock {
            operation,
            reason: "called from inside a task of this runtime, whose worker it would block \
                     (the tasks waited for may need that worker, or be this task); express \
                     the wait as a dependency instead: submit the work that needs the result \
                     as a task that accesses the data"
                .into(),
        });
    }
    Ok(())
}

/// The unfinished guards this thread holds on runtime `epoch`.
fn held(epoch: u32) -> Vec<(String, Arc<TaskNode>)> {
    HELD.try_with(|h| {
        let mut h = h.borrow_mut();
        h.retain(|(_, _, n)| n.upgrade().is_some_and(|n| !n.is_finished()));
        h.iter()
            .filter(|(e, _, _)| *e == epoch)
            .filter_map(|(_, id, n)| Some((id.clone(), n.upgrade()?)))
            .collect()
    })
    .unwrap_or_default()
}

/// The first node reachable from `from` (itself included) for which `hit` holds.
fn reach(from: &Arc<TaskNode>, hit: &dyn Fn(&TaskNode) -> bool) -> Option<Arc<TaskNode>> {
    let mut seen: HashSet<*const TaskNode> = HashSet::new();
    let mut stack = vec![from.clone()];
    while let Some(n) = stack.pop() {
        if !seen.insert(Arc::as_ptr(&n)) || seen.len() > WALK_LIMIT {
            continue;
        }
        if hit(&n) {
            return Some(n);
        }
        stack.extend(n.successors());
    }
    None
}

fn guard_reason(handle: &str, blocked: &TaskNode) -> String {
    let what = match blocked.kind {
        Kind::Codelet => format!("task {} (codelet `{}`)", blocked.id, blocked.codelet_name()),
        Kind::Acquire => "the acquisition asked for".to_string(),
    };
    format!(
        "this thread holds an acquisition guard (or a deferred acquisition) on data handle \
         {handle}, and {what} waits for it to be dropped or released; drop or release it \
         (or hand a deferred one to the thread that will release it) before waiting"
    )
}

/// Before `wait_all` on runtime `epoch`.
pub(crate) fn check_wait_all(epoch: u32) -> Result<(), RuntimeError> {
    not_in_task("wait_all", epoch)?;
    for (handle, g) in held(epoch) {
        let blocked = reach(&g, &|n| {
            !std::ptr::eq(n, &*g) && matches!(n.kind, Kind::Codelet) && !n.is_finished()
        });
        if let Some(b) = blocked {
            return Err(RuntimeError::Deadlock {
                operation: "wait_all",
                reason: guard_reason(&handle, &b),
            });
        }
    }
    Ok(())
}

/// Before `wait` for `target` on runtime `epoch`.
pub(crate) fn check_wait(epoch: u32, target: &Arc<TaskNode>) -> Result<(), RuntimeError> {
    not_in_task("wait", epoch)?;
    if target.is_finished() {
        return Ok(());
    }
    for (handle, g) in held(epoch) {
        if reach(&g, &|n| std::ptr::eq(n, &**target)).is_some() {
            return Err(RuntimeError::Deadlock {
                operation: "wait",
                reason: guard_reason(&handle, target),
            });
        }
    }
    Ok(())
}

/// Before an acquisition on runtime `epoch` that will wait for `preds` (the handle's
/// last writer, or its readers).
pub(crate) fn check_acquire(
    operation: &'static str,
    epoch: u32,
    preds: &[Arc<TaskNode>],
) -> Result<(), RuntimeError> {
    not_in_task(operation, epoch)?;
    let guards = held(epoch);
    if guards.is_empty() {
        return Ok(());
    }
    for (handle, g) in guards {
        let hit = reach(&g, &|n| preds.iter().any(|p| std::ptr::eq(n, &**p)));
        if let Some(b) = hit {
            let reason = if Arc::ptr_eq(&b, &g) {
                format!(
                    "this thread already holds an acquisition guard (or a deferred \
                     acquisition) on this data (handle {handle}) that conflicts with the one \
                     asked for; drop or release it first, or use it (a write guard reads \
                     too)"
                )
            } else {
                guard_reason(&handle, &b)
            };
            return Err(RuntimeError::Deadlock { operation, reason });
        }
    }
    Ok(())
}

/// Whether this thread holds any guard on runtime `epoch` (the acquisition path collects
/// its predecessors only then).
pub(crate) fn holds_guard(epoch: u32) -> bool {
    HELD.try_with(|h| h.borrow().iter().any(|(e, _, _)| *e == epoch))
        .unwrap_or(false)
}

/// This thread now holds the guard of acquisition `node` on `handle`, named in the
/// errors by its id and the name `Runtime::set_name` gave it.
pub(crate) fn hold(epoch: u32, handle: &crate::handle::HandleCore, node: &Arc<TaskNode>) {
    let label = handle.label();
    let _ = HELD.try_with(|h| h.borrow_mut().push((epoch, label, Arc::downgrade(node))));
}

/// The guard of `node` is dropped (on whatever thread holds its entry: a guard moved to
/// another thread leaves a finished entry behind, pruned later).
pub(crate) fn release(node: &Arc<TaskNode>) {
    let _ = HELD.try_with(|h| {
        h.borrow_mut()
            .retain(|(_, _, n)| !std::ptr::eq(n.as_ptr(), Arc::as_ptr(node)))
    });
}
