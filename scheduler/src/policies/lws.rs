//! `lws`: locality work stealing (after StarPU's `lws`).
//!
//! Like `ws`, plus two things that keep data on the core that produced it:
//!
//! - **Hand-off slot.** The first task a worker releases while its slot is empty goes into a
//!   one-task slot that only that worker reads, and it runs next, without passing through a
//!   deque where a thief could take it. A chain of dependent tasks thus stays on one core and
//!   never touches shared memory between links. Further released tasks go to the worker's
//!   deque, where others can steal them.
//! - **Near victims first.** A thief tries the workers of its own package (socket) first,
//!   then the others, so that stolen work stays in the same L3 and RAPL package domain where
//!   possible.
//!
//! With workers of several architectures, as `ws`: a worker keeps (in its slot and deque)
//! only the tasks it can run, the others go to the shared queue of their architectures,
//! thieves steal from workers of their own architecture, and an idle accelerator worker
//! then steals, from the CPU workers' deques, tasks it can run too.

use crossbeam_deque::Worker;

use super::steal::{steal_from, Deques, Routing, XorShift};
use crate::{Local, Origin, Policy, SchedTask, WorkerDesc};

/// Locality work stealing: hand-off slot, local LIFO, near-first FIFO steals.
pub struct Lws<T> {
    routing: Routing<T>,
    deques: Deques<T>,
    /// Per worker: the other workers, own package first, then by package distance.
    victims: Vec<Vec<usize>>,
    /// Per worker: how many of `victims` share its package.
    near: Vec<usize>,
}

struct LwsLocal<T> {
    next: Option<T>,
    deque: Worker<T>,
    rng: XorShift,
}

impl<T: SchedTask> Lws<T> {
    /// Deques and victim orders for `workers`.
    pub fn new(workers: &[WorkerDesc]) -> Self {
        let victims = workers
            .iter()
            .map(|me| {
                let mut others: Vec<&WorkerDesc> = workers
                    .iter()
                    .filter(|w| w.id != me.id && w.arch == me.arch)
                    .collect();
                others.sort_by_key(|w| {
                    (
                        w.package != me.package,
                        w.package.abs_diff(me.package),
                        w.id,
                    )
                });
                others.into_iter().map(|w| w.id).collect()
            })
            .collect();
        let near = workers
            .iter()
            .map(|me| {
                workers
                    .iter()
                    .filter(|w| w.id != me.id && w.package == me.package && w.arch == me.arch)
                    .count()
            })
            .collect();
        Lws {
            routing: Routing::new(workers),
            deques: Deques::lifo(workers.len()),
            victims,
            near,
        }
    }
}

impl<T: SchedTask> Policy<T> for Lws<T> {
    fn name(&self) -> &str {
        "lws"
    }

    fn local(&self, worker: usize) -> Local {
        Local::new(LwsLocal {
            next: None,
            deque: self.deques.claim(worker),
            rng: XorShift::new(worker as u64 + 1),
        })
    }

    fn push(&self, task: T, origin: Origin<'_>) {
        match origin {
            Origin::Worker { id, local } if self.routing.runs(id, &task) => {
                let l = local.expect_mut::<LwsLocal<T>>();
                if l.next.is_none() {
                    l.next = Some(task);
                } else {
                    l.deque.push(task);
                }
            }
            _ => self.routing.inject(task),
        }
    }

    fn pop(&self, worker: usize, local: &mut Local) -> Option<T> {
        let l = local.expect_mut::<LwsLocal<T>>();
        if let Some(t) = l.next.take() {
            return Some(t);
        }
        if let Some(t) = l.deque.pop() {
            return Some(t);
        }
        let victims = &self.victims[worker];
        // Rotate within the near group only: the order across groups is the point.
        let near = self.near[worker];
        let start = if near > 0 { l.rng.next_below(near) } else { 0 };
        let order = (0..victims.len()).map(move |i| {
            if i < near {
                victims[(start + i) % near]
            } else {
                victims[i]
            }
        });
        steal_from(
            worker,
            &l.deque,
            self.routing.injectors_for(worker),
            &self.deques.stealers,
            order,
        )
        .or_else(|| {
            self.routing
                .steal_across(worker, &self.deques.stealers, start)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T(u32);
    impl SchedTask for T {
        fn priority(&self) -> i32 {
            0
        }
    }

    #[test]
    fn victims_put_own_package_first() {
        let ws: Vec<WorkerDesc> = (0..4)
            .map(|id| WorkerDesc::new(id, (id % 2) as u32, None))
            .collect();
        let p = Lws::<T>::new(&ws);
        assert_eq!(p.victims[0], vec![2, 1, 3]);
        assert_eq!(p.victims[1], vec![3, 0, 2]);
    }

    #[test]
    fn released_task_is_handed_to_the_releasing_worker() {
        let p = Lws::<T>::new(&WorkerDesc::flat(2));
        let mut l0 = p.local(0);
        let mut l1 = p.local(1);
        p.push(
            T(7),
            Origin::Worker {
                id: 0,
                local: &mut l0,
            },
        );
        // Worker 1 cannot see the hand-off slot.
        assert!(p.pop(1, &mut l1).is_none());
        assert_eq!(p.pop(0, &mut l0).map(|t| t.0), Some(7));
    }
}
