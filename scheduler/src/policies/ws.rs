//! `ws`: work stealing with crossbeam-deque.
//!
//! Each worker owns a Chase-Lev deque (Chase and Lev, SPAA 2005; crossbeam's is the
//! weak-memory version of Lê et al., PPoPP 2013). A worker pushes the tasks it releases onto
//! its own deque and pops LIFO (the newest task's data is hot in cache); thieves steal FIFO
//! from the other end (the oldest task, usually the root of the most work). Tasks released by
//! a non-worker thread go to a shared injector. An idle worker first drains a batch from the
//! injector, then steals from victims starting at a random one.

use crossbeam_deque::Worker;

use super::steal::{steal_from, Deques, XorShift};
use crate::{Local, Origin, Policy, SchedTask, WorkerDesc};

/// Work stealing: local LIFO, FIFO steal from random victims, an injector.
pub struct Ws<T> {
    injector: crossbeam_deque::Injector<T>,
    deques: Deques<T>,
}

struct WsLocal<T> {
    deque: Worker<T>,
    rng: XorShift,
}

impl<T: SchedTask> Ws<T> {
    /// Deques for `workers`.
    pub fn new(workers: &[WorkerDesc]) -> Self {
        Ws {
            injector: crossbeam_deque::Injector::new(),
            deques: Deques::lifo(workers.len()),
        }
    }
}

impl<T: SchedTask> Policy<T> for Ws<T> {
    fn name(&self) -> &str {
        "ws"
    }

    fn local(&self, worker: usize) -> Local {
        Local::new(WsLocal {
            deque: self.deques.claim(worker),
            rng: XorShift::new(worker as u64 + 1),
        })
    }

    fn push(&self, task: T, origin: Origin<'_>) {
        match origin {
            Origin::Worker { local, .. } => local.expect_mut::<WsLocal<T>>().deque.push(task),
            Origin::External => self.injector.push(task),
        }
    }

    fn pop(&self, worker: usize, local: &mut Local) -> Option<T> {
        let l = local.expect_mut::<WsLocal<T>>();
        if let Some(t) = l.deque.pop() {
            return Some(t);
        }
        let n = self.deques.stealers.len();
        let start = l.rng.next_below(n.max(1));
        steal_from(
            worker,
            &l.deque,
            &self.injector,
            &self.deques.stealers,
            (0..n).map(move |i| (start + i) % n),
        )
    }
}
