//! Parking for idle workers and for threads that wait on tasks.
//!
//! # Idle workers (`Sleep`)
//!
//! An idle worker polls for a while (see `worker.rs`, `find_task`), then parks, so
//! that an empty graph costs no CPU. The protocol avoids lost wake-ups without a lock on the
//! push path when nobody sleeps:
//!
//! 1. The worker announces itself: `sleepers += 1` (SeqCst), then a SeqCst fence.
//! 2. It reads the epoch (under the lock), then tries `pop` once more.
//! 3. If that finds nothing, it waits on the condition variable while the epoch is unchanged.
//!
//! A pusher makes the task visible in the policy, issues a SeqCst fence and reads
//! `sleepers`. If it reads 0, the worker's announcement comes later in the SeqCst order, so
//! the worker's step-2 `pop` sees the task. If not, it bumps the epoch under the lock and
//! notifies: a worker that read the epoch before the bump sees it changed and does not wait,
//! one that reads it after the bump also pops after the push. The fence and load cost a few
//! ns per push; the lock is taken only when someone sleeps.
//!
//! # Waiting threads (`Waiters`)
//!
//! `wait_all`, `TaskHandle` waits and data acquisition park on one condition variable. A
//! waiter increments `waiting` (SeqCst), issues a SeqCst fence and checks its condition
//! under the lock; a completer changes the state (SeqCst), issues a SeqCst fence and then
//! notifies only if `waiting > 0`. The same Dekker argument as above shows no wake-up is
//! lost.
//!
//! # Checking
//!
//! Both protocols are model-checked with loom on this very code: see `loom_shim.rs` and
//! the models in `loom_shim/models.rs`.

use std::sync::atomic::Ordering;

// loom's primitives under `--cfg loom` (see loom_shim.rs and its models).
use crate::loom_shim::{fence, spin_until, AtomicBool, AtomicUsize, Condvar, Mutex};

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    epoch: Mutex<u64>,
    cv: Condvar,
    shutdown: AtomicBool,
}

impl Sleep {
    pub(crate) fn new() -> Sleep {
        Sleep {
            sleepers: AtomicUsize::new(0),
            epoch: Mutex::new(0),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Wakes up to `n` sleeping workers, after the caller made `n` tasks visible.
    #[inline]
    pub(crate) fn notify(&self, n: usize) {
        if n == 0 {
            return;
        }
        fence(Ordering::SeqCst);
        let sleepers = self.sleepers.load(Ordering::SeqCst);
        if sleepers == 0 {
            return;
        }
        let mut e = self.epoch.lock();
        *e = e.wrapping_add(1);
        drop(e);
        if n >= sleepers {
            self.cv.notify_all();
        } else {
            for _ in 0..n {
                self.cv.notify_one();
            }
        }
    }

    /// Step 1 and the epoch read of step 2. The caller then tries once more to find work
    /// and calls [`Sleep::sleep`] or [`Sleep::cancel`].
    pub(crate) fn prepare(&self) -> u64 {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        *self.epoch.lock()
    }

    /// Step 3: waits until notified (or shut down).
    pub(crate) fn sleep(&self, epoch: u64) {
        let mut e = self.epoch.lock();
        while *e == epoch && !self.shutdown.load(Ordering::SeqCst) {
            self.cv.wait(&mut e);
        }
        drop(e);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// The worker found work after `prepare`.
    pub(crate) fn cancel(&self) {
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Wakes every worker for good.
    pub(crate) fn shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        let mut e = self.epoch.lock();
        *e = e.wrapping_add(1);
        drop(e);
        self.cv.notify_all();
    }
}

pub(crate) struct Waiters {
    waiting: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Waiters {
    pub(crate) fn new() -> Waiters {
        Waiters {
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Blocks until `done()` holds. `done` must read state that the completer changes with
    /// SeqCst (or stronger-than-relaxed, followed by [`Waiters::notify_all`]).
    pub(crate) fn wait_until(&self, done: impl Fn() -> bool) {
        if spin_until(&done) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        // Pairs with the fence in `notify_all`, as in `Sleep::prepare`. After a SeqCst
        // read-modify-write it adds nothing in the C++ model, but loom checks the Dekker
        // pattern only through fences (it treats SeqCst accesses as AcqRel), and this is
        // the slow path: the thread is about to park.
        fence(Ordering::SeqCst);
        let mut g = self.lock.lock();
        while !done() {
            self.cv.wait(&mut g);
        }
        drop(g);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every waiter so it re-checks its condition.
    #[inline]
    pub(crate) fn notify_all(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        let _g = self.lock.lock();
        self.cv.notify_all();
    }
}
