//! The synchronisation primitives of the lock-free protocols, swappable for loom's.
//!
//! `sync.rs` (worker parking, waiting threads) and `task.rs` (successor lists, dependency
//! counters) take their locks and atomics from here. In a normal build these are plain
//! re-exports of `parking_lot` and `std` (no wrapper, so no cost). Built with
//! `RUSTFLAGS="--cfg loom"`, they are [loom](https://docs.rs/loom)'s model-checked
//! primitives behind parking_lot's API (`lock()` returns the guard, `Condvar::wait` takes
//! `&mut guard`), so that the models in `loom_shim/models.rs` drive the real `Sleep`,
//! `Waiters` and `TaskNode` through every interleaving loom can reach:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p taskwatt-runtime --release --lib loom
//! ```
//!
//! Only those models may run under `--cfg loom`: every loom primitive must be created
//! inside `loom::model`, so a real `Runtime` (or any other test) panics there.

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(loom)]
pub(crate) use self::checked::{Condvar, Mutex};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize};

/// `std`'s `UnsafeCell` behind loom's API (`with_mut` hands out the raw pointer), so that
/// under loom every access to the cell is checked for a race.
#[cfg(not(loom))]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
}

/// Spins with exponential backoff for a few µs until `done()` holds; returns whether it
/// did. The caller parks if not.
#[cfg(not(loom))]
#[inline]
pub(crate) fn spin_until(done: impl Fn() -> bool) -> bool {
    let backoff = crossbeam_utils::Backoff::new();
    while !backoff.is_completed() {
        if done() {
            return true;
        }
        backoff.snooze();
    }
    false
}

/// Under loom: one check. A spin would only multiply the interleavings to explore, and
/// the parking path after it is what the models check.
/// Gives the core away (under loom: lets the model switch threads, which a spin loop
/// needs so that its state space stays finite).
#[cfg(not(loom))]
#[inline]
pub(crate) fn yield_now() {
    std::thread::yield_now();
}

#[cfg(loom)]
pub(crate) fn yield_now() {
    loom::thread::yield_now();
}

#[cfg(loom)]
pub(crate) fn spin_until(done: impl Fn() -> bool) -> bool {
    done()
}

/// loom's `Mutex` and `Condvar` (std's API, with poisoning) behind parking_lot's.
#[cfg(loom)]
mod checked {
    use std::ops::{Deref, DerefMut};

    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// Holds the loom guard; `None` only while [`Condvar::wait`] has lent it out.
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Mutex<T> {
            Mutex(loom::sync::Mutex::new(value))
        }

        /// Poisoning cannot happen in a model that passes (a panic ends the model).
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().expect("loom mutex poisoned")))
        }
    }

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().expect("guard lent to Condvar::wait")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().expect("guard lent to Condvar::wait")
        }
    }

    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Condvar {
            Condvar(loom::sync::Condvar::new())
        }

        pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let g = guard.0.take().expect("guard lent to Condvar::wait");
            guard.0 = Some(self.0.wait(g).expect("loom mutex poisoned"));
        }

        pub(crate) fn notify_one(&self) {
            self.0.notify_one();
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}

#[cfg(all(test, loom))]
mod models;
