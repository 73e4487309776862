//! `eager`: one central FIFO queue that every worker pops from (StarPU's `eager`).
//!
//! The simplest policy and the reference for the others: no locality, no per-worker
//! state. The queue is a crossbeam `Injector`, so neither push nor pop takes a lock.

use crossbeam_deque::{Injector, Steal};

use crate::{Local, Origin, Policy, SchedTask, WorkerDesc};

/// One central FIFO queue.
pub struct Eager<T> {
    queue: Injector<T>,
}

impl<T: SchedTask> Eager<T> {
    /// A central queue for `workers` (the count does not matter).
    pub fn new(workers: &[WorkerDesc]) -> Self {
        let _ = workers;
        Eager {
            queue: Injector::new(),
        }
    }
}

impl<T: SchedTask> Policy<T> for Eager<T> {
    fn name(&self) -> &str {
        "eager"
    }

    fn local(&self, _worker: usize) -> Local {
        Local::none()
    }

    fn push(&self, task: T, _origin: Origin<'_>) {
        self.queue.push(task);
    }

    fn pop(&self, _worker: usize, _local: &mut Local) -> Option<T> {
        loop {
            match self.queue.steal() {
                Steal::Success(t) => return Some(t),
                Steal::Empty => return None,
                Steal::Retry => std::hint::spin_loop(),
            }
        }
    }
}
