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
//!    where single-owner structures (a crossbeam `Worker` deque) live.
//! 3. **`push(task, origin)`**, exactly once per task, once its last dependency is
//!    satisfied. Ownership of the task moves into the policy. `origin` says how it became
//!    ready: a worker that just finished its last predecessor ([`Origin::Worker`], with that
//!    worker's [`Local`], pushed at once), or not through a worker's task
//!    ([`Origin::External`], from any thread). Tasks ready at their submission are staged
//!    by the runtime and pushed in batches, in submission order, by whichever thread takes
//!    the batch: a worker, once the oldest has waited the staging window (taskwatt-runtime's
//!    `RuntimeBuilder::staging`) and the worker looks, or a thread about to wait.
//! 4. **`pop(w, local)`**, called by worker `w` whenever it is free. Returning `Some(task)`
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
}

/// One worker, as the policy sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerDesc {
    /// Worker id: dense, from 0.
    pub id: usize,
    /// CPU package (socket) of the core it is pinned to.
    pub package: u32,
    /// NUMA node, where known.
    pub numa: Option<u32>,
}

impl WorkerDesc {
    /// `n` workers on package 0: for tests and examples.
    pub fn flat(n: usize) -> Vec<WorkerDesc> {
        (0..n)
            .map(|id| WorkerDesc {
                id,
                package: 0,
                numa: None,
            })
            .collect()
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

    /// Per-worker state for worker `worker`, called once on that worker's thread.
    fn local(&self, worker: usize) -> Local;

    /// Takes ownership of a ready task.
    fn push(&self, task: T, origin: Origin<'_>);

    /// Gives worker `worker` a task to run, if any.
    fn pop(&self, worker: usize, local: &mut Local) -> Option<T>;

    /// Worker `worker` finished the task it last popped and pushed what it released.
    fn done(&self, worker: usize, local: &mut Local) {
        let _ = (worker, local);
    }
}
