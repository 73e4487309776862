//! `eager`: one central FIFO queue that every worker pops from (StarPU's `eager`).
//!
//! The simplest policy and the reference for the others: no locality, no per-worker
//! state. The queue is a crossbeam `Injector`, so neither push nor pop takes a lock.
//!
//! With workers of several architectures (CPU cores and GPUs), there is one such queue per
//! set of architectures a task can run on, and a worker pops first from the queue of the
//! tasks only its architecture can run, then from the shared ones.

use crossbeam_deque::{Injector, Steal};

use crate::{Archs, Local, Origin, Policy, SchedTask, WorkerDesc};

/// One central queue (one per set of architectures, with several).
pub struct Eager<T> {
    queue: Injector<T>,
    /// With several architectures: the queues by class, the classes, and the classes
    /// each worker reads in order.
    mixed: Option<Mixed<T>>,
}

struct Mixed<T> {
    archs: Archs,
    classes: Vec<crate::ArchMask>,
    queues: Vec<Injector<T>>,
    order: Vec<Vec<usize>>,
}

impl<T: SchedTask> Eager<T> {
    /// A central queue for `workers`.
    pub fn new(workers: &[WorkerDesc]) -> Self {
        let archs = Archs::of(workers);
        let mixed = archs.mixed().then(|| {
            let classes = archs.classes();
            Mixed {
                queues: classes.iter().map(|_| Injector::new()).collect(),
                order: (0..workers.len())
                    .map(|w| archs.classes_for(&classes, w))
                    .collect(),
                classes,
                archs,
            }
        });
        Eager {
            queue: Injector::new(),
            mixed,
        }
    }
}

fn take<T>(q: &Injector<T>) -> Option<T> {
    loop {
        match q.steal() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
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
        match &self.mixed {
            None => self.queue.push(task),
            Some(m) => {
                let c = m.archs.class(&m.classes, task.archs());
                m.queues[c].push(task);
            }
        }
    }

    fn pop(&self, worker: usize, _local: &mut Local) -> Option<T> {
        match &self.mixed {
            None => take(&self.queue),
            Some(m) => m.order[worker].iter().find_map(|&c| take(&m.queues[c])),
        }
    }
}
