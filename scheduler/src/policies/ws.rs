//! `ws`: work stealing with crossbeam-deque.
//!
//! Each worker owns a Chase-Lev deque (Chase and Lev, SPAA 2005; crossbeam's is the
//! weak-memory version of Lê et al., PPoPP 2013). A worker pushes the tasks it releases onto
//! its own deque and pops LIFO (the newest task's data is hot in cache); thieves steal FIFO
//! from the other end (the oldest task, usually the root of the most work). Tasks released by
//! a non-worker thread go to a shared injector. An idle worker first drains a batch from the
//! injector, then steals from victims starting at a random one.
//!
//! With workers of several architectures, a worker keeps on its deque only the tasks it
//! can run and puts the others on the shared queue of their architectures; thieves steal
//! from workers of their own architecture, and an accelerator worker that finds nothing
//! there steals, from the CPU workers, tasks it can run too (`Routing::steal_across`).

use crossbeam_deque::Worker;

use super::steal::{steal_from, Deques, Routing, XorShift};
use crate::{Local, Origin, Policy, SchedTask, WorkerDesc};

/// Work stealing: local LIFO, FIFO steal from random victims, an injector.
pub struct Ws<T> {
    routing: Routing<T>,
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
            routing: Routing::new(workers),
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
            Origin::Worker { id, local } if self.routing.runs(id, &task) => {
                local.expect_mut::<WsLocal<T>>().deque.push(task)
            }
            _ => self.routing.inject(task),
        }
    }

    fn pop(&self, worker: usize, local: &mut Local) -> Option<T> {
        let l = local.expect_mut::<WsLocal<T>>();
        if let Some(t) = l.deque.pop() {
            return Some(t);
        }
        let r = &self.routing;
        if r.mixed {
            let peers = &r.peers[worker];
            let n = peers.len();
            let start = l.rng.next_below(n.max(1));
            return steal_from(
                worker,
                &l.deque,
                r.injectors_for(worker),
                &self.deques.stealers,
                (0..n).map(move |i| peers[(start + i) % n]),
            )
            .or_else(|| r.steal_across(worker, &self.deques.stealers, start));
        }
        let n = self.deques.stealers.len();
        let start = l.rng.next_below(n.max(1));
        steal_from(
            worker,
            &l.deque,
            std::iter::once(&r.injectors[0]),
            &self.deques.stealers,
            (0..n).map(move |i| (start + i) % n),
        )
    }
}
