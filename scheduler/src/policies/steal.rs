//! Pieces shared by the work-stealing policies.

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

/// A small xorshift generator for picking victims: no shared state, no allocation.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // Zero is a fixed point of xorshift; mix the seed so that worker 0 gets a valid one.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    #[inline]
    pub(crate) fn next_below(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x % n as u64) as usize
    }
}

/// Takes from the injectors (in `injectors` order) into `local`, then steals from the
/// stealers in `order` (skipping `me`). Returns `None` only after a full round found
/// everything empty without a `Retry`; a round with a `Retry` is repeated, since a `Retry`
/// means a task was there.
pub(crate) fn steal_from<'a, T: 'a>(
    me: usize,
    local: &Worker<T>,
    injectors: impl Iterator<Item = &'a Injector<T>> + Clone,
    stealers: &[Stealer<T>],
    order: impl Iterator<Item = usize> + Clone,
) -> Option<T> {
    loop {
        let mut retry = false;
        for injector in injectors.clone() {
            match injector.steal_batch_and_pop(local) {
                Steal::Success(t) => return Some(t),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
        for v in order.clone() {
            if v == me {
                continue;
            }
            match stealers[v].steal() {
                Steal::Success(t) => return Some(t),
                Steal::Retry => retry = true,
                Steal::Empty => {}
            }
        }
        if !retry {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// How a stealing policy shares work among workers of several architectures: a worker
/// keeps on its deque only the tasks its architecture can run, and pushes the others into
/// the injector of their class; thieves steal only from workers of their own
/// architecture, whose deques hold only tasks they can run.
pub(crate) struct Routing<T> {
    pub(crate) archs: crate::Archs,
    pub(crate) classes: Vec<crate::ArchMask>,
    /// One injector per class (one, with a single architecture).
    pub(crate) injectors: Vec<Injector<T>>,
    /// Per worker: the injectors it takes from, in order.
    pub(crate) order: Vec<Vec<usize>>,
    /// Per worker: the workers of its architecture (itself included).
    pub(crate) peers: Vec<Vec<usize>>,
    /// Per worker of an accelerator (not a CPU core): the CPU workers, whose deques it may
    /// steal from when it finds nothing of its own ([`Routing::steal_across`]); empty for
    /// CPU workers.
    pub(crate) across: Vec<Vec<usize>>,
    pub(crate) mixed: bool,
}

impl<T: crate::SchedTask> Routing<T> {
    pub(crate) fn new(workers: &[crate::WorkerDesc]) -> Self {
        let archs = crate::Archs::of(workers);
        let mixed = archs.mixed();
        let classes = if mixed {
            archs.classes()
        } else {
            vec![archs.present]
        };
        let order = (0..workers.len())
            .map(|w| {
                if mixed {
                    archs.classes_for(&classes, w)
                } else {
                    vec![0]
                }
            })
            .collect();
        let peers = workers
            .iter()
            .map(|me| {
                workers
                    .iter()
                    .filter(|w| w.arch == me.arch)
                    .map(|w| w.id)
                    .collect()
            })
            .collect();
        let across = workers
            .iter()
            .map(|me| {
                if !mixed || me.arch == crate::ArchMask::CPU {
                    return Vec::new();
                }
                workers
                    .iter()
                    .filter(|w| w.arch == crate::ArchMask::CPU)
                    .map(|w| w.id)
                    .collect()
            })
            .collect();
        Routing {
            injectors: classes.iter().map(|_| Injector::new()).collect(),
            classes,
            archs,
            order,
            peers,
            across,
            mixed,
        }
    }

    /// Heterogeneous stealing: an idle accelerator worker `me` that found nothing of its
    /// own takes, from the CPU workers' deques (starting at `start`), a task it can run
    /// too, so that no device idles while tasks it could run wait behind a core. A task
    /// it took and cannot run (a CPU-only codelet) goes to the shared queue of its class,
    /// where CPU workers look first; nothing is lost, and a CPU-only codelet never runs on
    /// the accelerator. At most a few tasks per victim are looked at, per call.
    pub(crate) fn steal_across(
        &self,
        me: usize,
        stealers: &[Stealer<T>],
        start: usize,
    ) -> Option<T> {
        const LOOKS: usize = 4;
        let victims = &self.across[me];
        let n = victims.len();
        for i in 0..n {
            let v = victims[(start + i) % n];
            for _ in 0..LOOKS {
                match stealers[v].steal() {
                    Steal::Success(t) if self.runs(me, &t) => return Some(t),
                    Steal::Success(t) => self.inject(t),
                    Steal::Retry => continue,
                    Steal::Empty => break,
                }
            }
        }
        None
    }

    /// Whether worker `w` can run `task` (always, with one architecture).
    #[inline]
    pub(crate) fn runs(&self, w: usize, task: &T) -> bool {
        !self.mixed || task.archs().contains(self.archs.of_worker[w])
    }

    /// Puts `task` on the injector of its class.
    #[inline]
    pub(crate) fn inject(&self, task: T) {
        let c = if self.mixed {
            self.archs.class(&self.classes, task.archs())
        } else {
            0
        };
        self.injectors[c].push(task);
    }

    /// Worker `w`'s injectors, in order.
    #[inline]
    pub(crate) fn injectors_for(&self, w: usize) -> impl Iterator<Item = &Injector<T>> + Clone {
        self.order[w].iter().map(move |&c| &self.injectors[c])
    }
}

/// The per-worker deques of a stealing policy, handed out once each by `local()`.
pub(crate) struct Deques<T> {
    pub(crate) stealers: Vec<Stealer<T>>,
    unclaimed: parking_lot::Mutex<Vec<Option<Worker<T>>>>,
}

impl<T> Deques<T> {
    pub(crate) fn lifo(n: usize) -> Self {
        let workers: Vec<Worker<T>> = (0..n).map(|_| Worker::new_lifo()).collect();
        Deques {
            stealers: workers.iter().map(Worker::stealer).collect(),
            unclaimed: parking_lot::Mutex::new(workers.into_iter().map(Some).collect()),
        }
    }

    /// Worker `w`'s deque. Called once per worker (the policy contract's step 2).
    pub(crate) fn claim(&self, w: usize) -> Worker<T> {
        self.unclaimed
            .lock()
            .get_mut(w)
            .and_then(Option::take)
            .unwrap_or_else(|| panic!("worker {w}'s deque was claimed twice or never existed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_stays_in_range_and_moves() {
        let mut r = XorShift::new(0);
        let draws: Vec<usize> = (0..64).map(|_| r.next_below(5)).collect();
        assert!(draws.iter().all(|&d| d < 5));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }
}
