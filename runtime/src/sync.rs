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
//! # Counting tasks for `wait_all` (`TaskCount`)
//!
//! `wait_all` waits until every submitted codelet task is done for good. The submitting
//! thread counts submissions and the workers count finished tasks, on two counters in
//! separate cache lines, rather than in one in-flight count that both write: a submission
//! then never waits for the line a worker has just written (with one shared counter,
//! half of `submit`'s time went to that increment). `wait_all` holds when `finished`,
//! read first, equals `submitted`, read second: a task is counted submitted before it can
//! run, so `finished` never exceeds `submitted`, and equality means every task submitted
//! before the first read had finished. A finisher that sees a waiter reads `submitted`
//! and wakes it when its own increment made the counts meet.
//!
//! # Checking
//!
//! Both protocols are model-checked with loom on this very code: see `loom_shim.rs` and
//! the models in `loom_shim/models.rs`.

use std::sync::atomic::Ordering;

use crossbeam_utils::CachePadded;
use taskwatt_traces::WorkerId;

// loom's primitives under `--cfg loom` (see loom_shim.rs and its models).
use crate::loom_shim::{fence, spin_until, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex};

pub(crate) struct Sleep {
    sleepers: AtomicUsize,
    epoch: Mutex<u64>,
    cv: Condvar,
    shutdown: AtomicBool,
    /// Workers of several architectures: a woken worker may not be able to run what was
    /// pushed, and the worker that pushed may not run it either, so every notification
    /// wakes every sleeper.
    wake_all: bool,
}

impl Sleep {
    /// A `Sleep` whose notifications all wake every sleeper (see `wake_all`).
    pub(crate) fn with_wake_all(wake_all: bool) -> Sleep {
        Sleep {
            wake_all,
            sleepers: AtomicUsize::new(0),
            epoch: Mutex::new(0),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Wakes up to `n` sleeping workers, after the caller made `n` tasks visible.
    #[inline]
    pub(crate) fn notify(&self, n: usize) {
        let n = if self.wake_all { usize::MAX } else { n };
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

    /// Workers parked or about to park.
    pub(crate) fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::SeqCst)
    }

    /// The worker found work after `prepare`.
    pub(crate) fn cancel(&self) {
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Wakes every parked worker (and the helper), which then look again: for a helper
    /// whose own condition may now hold (see [`Waiters::helper_parked`]).
    pub(crate) fn wake_all(&self) {
        let mut e = self.epoch.lock();
        *e = e.wrapping_add(1);
        drop(e);
        self.cv.notify_all();
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
    /// The helper (the submitting thread as a worker, see helper.rs) is parked in
    /// [`Sleep`], where a push wakes it, and waits for a condition of its own too: a
    /// completer that sees this tells its caller to wake it there
    /// ([`Waiters::notify_all_if`]'s answer), with the same Dekker pattern as `waiting`.
    pub(crate) helper_parked: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Waiters {
    pub(crate) fn new() -> Waiters {
        Waiters {
            waiting: AtomicUsize::new(0),
            helper_parked: AtomicBool::new(false),
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

    /// Wakes every waiter so it re-checks its condition. Returns whether the helper,
    /// parked in [`Sleep`], must be woken there too ([`Sleep::wake_all`]).
    #[inline]
    #[must_use = "a parked helper is woken by the caller, in `Sleep`"]
    pub(crate) fn notify_all(&self) -> bool {
        self.notify_all_if(|| true)
    }

    /// Wakes every waiter if `worth_it()` holds, which is asked only when someone waits.
    /// Returns whether the helper must be woken in [`Sleep`] (it is parked, and
    /// `worth_it()` held).
    #[inline]
    #[must_use = "a parked helper is woken by the caller, in `Sleep`"]
    pub(crate) fn notify_all_if(&self, worth_it: impl FnOnce() -> bool) -> bool {
        fence(Ordering::SeqCst);
        let waiting = self.waiting.load(Ordering::SeqCst) > 0;
        let helper = self.helper_parked.load(Ordering::SeqCst);
        if !(waiting || helper) || !worth_it() {
            return false;
        }
        if waiting {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
        helper
    }
}

/// Submitted and finished codelet tasks (see "Counting tasks for `wait_all`" above).
pub(crate) struct TaskCount {
    /// Written by submitting threads; also the next task id.
    submitted: CachePadded<AtomicU64>,
    /// Written by workers, a batch at a time.
    finished: CachePadded<AtomicU64>,
}

impl TaskCount {
    pub(crate) fn new() -> TaskCount {
        TaskCount {
            submitted: CachePadded::new(AtomicU64::new(0)),
            finished: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Counts one more submitted task and returns its id.
    #[inline]
    pub(crate) fn submit(&self) -> u64 {
        // Relaxed suffices: the task reaches a worker, and its finish reaches `wait_all`,
        // through release/acquire chains that carry this increment along.
        self.submitted.fetch_add(1, Ordering::Relaxed)
    }

    /// Tasks submitted so far (the next id).
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed)
    }

    /// `n` more tasks are done for good; wakes `waiters` if that finished everything.
    /// Returns whether the parked helper must be woken (see [`Waiters::notify_all_if`]).
    #[must_use = "a parked helper is woken by the caller, in `Sleep`"]
    pub(crate) fn finish(&self, n: u64, waiters: &Waiters) -> bool {
        if n == 0 {
            return false;
        }
        let finished = self.finished.fetch_add(n, Ordering::SeqCst) + n;
        // The read of `submitted` sees at least every finished task's submission (each
        // happened before its finish, which this read-modify-write acquired): equality
        // means no task was left.
        waiters.notify_all_if(|| finished == self.submitted.load(Ordering::SeqCst))
    }

    /// Whether every task submitted so far is done (for [`Waiters::wait_until`]).
    pub(crate) fn all_done(&self) -> bool {
        // `finished` first: it can only lag `submitted`, so seeing them equal means the
        // tasks submitted before the first read had all finished.
        let finished = self.finished.load(Ordering::SeqCst);
        finished == self.submitted.load(Ordering::SeqCst)
    }
}

/// A lock for the runtime's short critical sections on the submission path: a handle's
/// dependency state, a node's successor list and the node pool (see [`SpinLock`]).
///
/// Taking it is one compare-and-swap and giving it back one plain store. `parking_lot`'s
/// mutex gives it back with a second compare-and-swap (it must see whether a thread parked
/// meanwhile), and each locked instruction costs 13 ns or more here: a stencil task's
/// submission takes six such locks, so the second compare-and-swap cost about 80 ns of
/// its 400 to 500. A thread that finds it
/// taken spins briefly, then yields its core until it is free: the sections it guards are a
/// few dozen instructions long (the longest, a writer after many readers, links each of
/// them), so a holder is waited for only when it was preempted, and yielding is what lets
/// it run again when it shares the core.
pub(crate) struct RawSpin(AtomicBool);

impl RawSpin {
    /// An unlocked lock (under loom, whose atomics have no `const` constructor).
    #[cfg(loom)]
    pub(crate) fn new() -> RawSpin {
        RawSpin(AtomicBool::new(false))
    }

    #[inline]
    pub(crate) fn acquire(&self) {
        if !self.try_acquire() {
            self.acquire_contended();
        }
    }

    #[inline]
    pub(crate) fn try_acquire(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// # Safety
    /// Called by the thread that holds the lock.
    #[inline]
    pub(crate) unsafe fn release(&self) {
        self.0.store(false, Ordering::Release);
    }

    #[cold]
    fn acquire_contended(&self) {
        let mut spins = 0u32;
        loop {
            // Wait reading, not writing, so that the holder keeps the line.
            while self.0.load(Ordering::Relaxed) {
                if cfg!(loom) || spins >= 100 {
                    crate::loom_shim::yield_now();
                } else {
                    spins += 1;
                    std::hint::spin_loop();
                }
            }
            if self.try_acquire() {
                return;
            }
        }
    }
}

// SAFETY: `lock` returns only after this thread changed the flag from false to true
// (Acquire), and `unlock` (Release) is called only by the holder, so at most one thread
// holds the lock at a time and each holder sees the previous one's writes. loom checks
// this on the same code: `loom_spin_lock_orders_its_sections` in loom_shim/models.rs.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutex for RawSpin {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSpin = RawSpin(AtomicBool::new(false));
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.acquire();
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.try_acquire()
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: lock_api calls this for the holder only.
        unsafe { self.release() }
    }
}

/// A mutex on [`RawSpin`]. Under loom, `RawSpin` has its own model, and the locks built
/// on it are stand-ins: `parking_lot`'s here (a handle's dependency state and the node
/// pool, which the models do not check), loom's for a node's successor list (see
/// `task.rs`).
#[cfg(not(loom))]
pub(crate) type SpinLock<T> = lock_api::Mutex<RawSpin, T>;
#[cfg(loom)]
pub(crate) type SpinLock<T> = parking_lot::Mutex<T>;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::SpinLock;

    /// More threads than cores, so that holders are preempted and waiters reach the
    /// yielding phase: no increment is lost, and each section sees the previous ones.
    #[test]
    fn spin_lock_sections_exclude_each_other_under_oversubscription() {
        let threads = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
        let per = 20_000;
        let lock = SpinLock::new((0u64, 0u64));
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for _ in 0..per {
                        let mut g = lock.lock();
                        // Two fields written apart: a section that overlapped another
                        // would leave them unequal.
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        g.1 += 1;
                        assert_eq!(g.0, g.1);
                    }
                });
            }
        });
        let g = lock.lock();
        assert_eq!(g.0, (threads * per) as u64);
        assert!(lock.try_lock().is_none(), "held by the guard above");
    }
}

/// Counts workers that have started (pinned, policy state made) or failed to.
#[derive(Default)]
pub(crate) struct StartLatch {
    /// (started, failed).
    count: std::sync::Mutex<(usize, usize)>,
    cv: std::sync::Condvar,
    /// Workers whose pinning failed (they run unpinned).
    unpinned: std::sync::Mutex<Vec<WorkerId>>,
}

impl StartLatch {
    /// Worker `id` could not be pinned to its CPU.
    pub(crate) fn unpinned(&self, id: WorkerId) {
        self.unpinned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
    }

    /// One more worker started.
    pub(crate) fn arrive(&self) {
        self.count.lock().unwrap_or_else(|p| p.into_inner()).0 += 1;
        self.cv.notify_all();
    }

    /// One more worker panicked before it could start.
    pub(crate) fn fail(&self) {
        self.count.lock().unwrap_or_else(|p| p.into_inner()).1 += 1;
        self.cv.notify_all();
    }

    /// The workers whose pinning failed, taken (once every worker has started).
    pub(crate) fn take_unpinned(&self) -> Vec<WorkerId> {
        std::mem::take(&mut *self.unpinned.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits until `n` workers started or failed; returns how many failed.
    pub(crate) fn wait_for(&self, n: usize) -> usize {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while c.0 + c.1 < n {
            c = self.cv.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        c.1
    }
}
