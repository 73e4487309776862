//! `prio`: one central queue ordered by priority (StarPU's `prio`), FIFO among equals.
//!
//! A binary heap under a mutex. Idle workers poll `pop` often, so an atomic length lets
//! them see an empty queue without taking the lock.
//!
//! With workers of several architectures, there is one heap per set of architectures a
//! task can run on (under the same lock), and a worker takes the highest-priority task of
//! the heaps whose tasks it can run.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::{ArchMask, Archs, Local, Origin, Policy, SchedTask, WorkerDesc};

/// Central priority queue.
pub struct Prio<T> {
    heap: Mutex<Heap<T>>,
    archs: Archs,
    classes: Vec<ArchMask>,
    /// Per worker: the heaps it takes from.
    order: Vec<Vec<usize>>,
    /// Number of queued tasks. Updated under the lock, read without it: a stale zero only
    /// delays a pop until the worker polls again (the runtime wakes it after every push).
    len: AtomicUsize,
}

struct Heap<T> {
    /// One heap per class of `Prio::classes` (one with a single architecture).
    entries: Vec<BinaryHeap<Entry<T>>>,
    /// Tasks in all heaps.
    len: usize,
    seq: u64,
}

struct Entry<T> {
    priority: i32,
    seq: u64,
    task: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Max-heap: higher priority first, then the earlier push (smaller seq) first.
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl<T: SchedTask> Prio<T> {
    /// An empty queue.
    pub fn new(workers: &[WorkerDesc]) -> Self {
        let archs = Archs::of(workers);
        let (classes, order) = if archs.mixed() {
            let classes = archs.classes();
            let order = (0..workers.len())
                .map(|w| archs.classes_for(&classes, w))
                .collect();
            (classes, order)
        } else {
            (vec![archs.present], vec![vec![0]; workers.len()])
        };
        Prio {
            heap: Mutex::new(Heap {
                entries: classes.iter().map(|_| BinaryHeap::new()).collect(),
                len: 0,
                seq: 0,
            }),
            archs,
            classes,
            order,
            len: AtomicUsize::new(0),
        }
    }
}

impl<T: SchedTask> Policy<T> for Prio<T> {
    fn name(&self) -> &str {
        "prio"
    }

    fn local(&self, _worker: usize) -> Local {
        Local::none()
    }

    fn push(&self, task: T, _origin: Origin<'_>) {
        let priority = task.priority();
        let class = if self.classes.len() == 1 {
            0
        } else {
            self.archs.class(&self.classes, task.archs())
        };
        let mut h = self.heap.lock();
        let seq = h.seq;
        h.seq += 1;
        h.entries[class].push(Entry {
            priority,
            seq,
            task,
        });
        h.len += 1;
        self.len.store(h.len, Ordering::Release);
    }

    fn pop(&self, worker: usize, _local: &mut Local) -> Option<T> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let order = self.order.get(worker).map_or(&[0][..], Vec::as_slice);
        let mut h = self.heap.lock();
        // The heap whose top comes first (higher priority, then earlier push).
        let best = order
            .iter()
            .copied()
            .filter(|&c| !h.entries[c].is_empty())
            .max_by(|&a, &b| h.entries[a].peek().cmp(&h.entries[b].peek()))?;
        let e = h.entries[best].pop();
        h.len -= 1;
        self.len.store(h.len, Ordering::Release);
        e.map(|e| e.task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T(i32, u32);
    impl SchedTask for T {
        fn priority(&self) -> i32 {
            self.0
        }
    }

    #[test]
    fn pops_by_priority_then_fifo() {
        let p = Prio::new(&WorkerDesc::flat(1));
        let mut l = p.local(0);
        for (prio, id) in [(0, 1), (5, 2), (0, 3), (5, 4), (-1, 5)] {
            p.push(T(prio, id), Origin::External);
        }
        let order: Vec<u32> = std::iter::from_fn(|| p.pop(0, &mut l).map(|t| t.1)).collect();
        assert_eq!(order, vec![2, 4, 1, 3, 5]);
    }
}
