//! Reserved workers: CPU workers the scheduling policy never sees, which run only the
//! tasks pinned to them ([`Task::on_worker`](crate::Task::on_worker)), as StarPU's
//! `execute_on_a_specific_worker` does for a worker outside the scheduling context.
//!
//! They exist for measurement: type calibration runs each task type alone and then on
//! every core of the package at once, so that the energy fit sees a type's power alone and
//! beside others (docs/attribution.md, "Contention"). A run on fewer workers than the
//! package has cores has no such contrast of its own; with reserved workers on the other
//! cores, calibration gets it, and the graph still runs on the workers asked for.
//!
//! A reserved worker is a worker of the trace (pinned, its tasks recorded, its package's
//! occupancy counted), listed in the run's parameters as `reserved_workers` so that the
//! what-if simulator leaves it out of the recorded platform. It waits on its own queue
//! (a mutex and a condition variable: these tasks are few and long), never on the
//! policy's, and what its tasks release goes to the policy as `Origin::External`. Its
//! thread's loop is `worker::run_reserved`; a pinned task keeps its worker's index in the
//! node (`task.rs`, `PINNED`).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

use crate::task::{ReadyTask, TaskNode, PINNED};

/// The queues of the reserved workers, by worker id from `first`.
#[derive(Default)]
pub(crate) struct Reserved {
    first: u32,
    queues: Vec<Queue>,
}

#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    cv: Condvar,
}

#[derive(Default)]
struct QueueState {
    tasks: VecDeque<ReadyTask>,
    shutdown: bool,
}

impl Reserved {
    /// `count` reserved workers, with ids from `first`.
    pub(crate) fn new(first: u32, count: usize) -> Reserved {
        Reserved {
            first,
            queues: (0..count).map(|_| Queue::default()).collect(),
        }
    }

    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.queues.len()
    }

    /// Whether `worker` is a reserved worker.
    pub(crate) fn holds(&self, worker: u32) -> bool {
        worker >= self.first && ((worker - self.first) as usize) < self.queues.len()
    }

    /// The reserved workers' ids.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.queues.len() as u32).map(|i| self.first + i)
    }

    /// The `archs` byte of a task pinned to reserved worker `worker` (checked by `holds`).
    pub(crate) fn encode(&self, worker: u32) -> u8 {
        debug_assert!(self.holds(worker));
        PINNED | (worker - self.first) as u8
    }

    /// Gives `node`, ready, to the reserved worker of index `index`, the one it is pinned
    /// to.
    pub(crate) fn push(&self, index: u8, node: Arc<TaskNode>) {
        let q = &self.queues[usize::from(index)];
        q.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .tasks
            .push_back(ReadyTask(node));
        q.cv.notify_one();
    }

    /// Tells every reserved worker to exit once its queue is empty.
    pub(crate) fn shutdown(&self) {
        for q in &self.queues {
            q.state.lock().unwrap_or_else(|p| p.into_inner()).shutdown = true;
            q.cv.notify_all();
        }
    }

    /// The next task of reserved worker `worker`, waiting for one; `None` at shutdown.
    pub(crate) fn next(&self, worker: u32) -> Option<ReadyTask> {
        let q = &self.queues[(worker - self.first) as usize];
        let mut s = q.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(t) = s.tasks.pop_front() {
                return Some(t);
            }
            if s.shutdown {
                return None;
            }
            s = q.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}
