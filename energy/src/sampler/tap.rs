//! The state the sampler's thread shares with the runtime's workers, and the
//! [`SamplerTap`] through which the workers take readings between their tasks (the parent
//! module's docs, "Readings taken by the workers").

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use taskwatt_traces::{
    Arch, Clock, CodeletId, CodeletInfo, ExecutionObserver, Timestamp, WorkerId,
};

use super::{Worker, TAP_SLEEP_MAX, TAP_SLEEP_PERIODS, TAP_STREAK};

/// What the sampler's thread and the workers' tap share.
pub(super) struct Core {
    pub(super) worker: parking_lot::Mutex<Worker>,
    /// The next deadline on the trace clock, ns: `start + k·period`.
    pub(super) next_ns: AtomicU64,
    pub(super) period_ns: u64,
    /// Readings in a row the workers took within [`Core::grace_ns`] of their deadline: from
    /// [`TAP_STREAK`] on, the thread sleeps longer.
    pub(super) streak: AtomicU64,
    /// Set to stop the thread (which is then unparked); no reading is taken after it.
    pub(super) stop: AtomicBool,
    /// Whether workers may read every meter (see [`Meter::readable_from_workers`]).
    pub(super) tap: bool,
    /// Per worker id: the tasks it started plus those it ended (odd while one runs). Each
    /// is written by its worker only, on a cache line of its own.
    pub(super) activity: Box<[Activity]>,
    /// A task ran on a worker whose id is past `activity`: idle spells are not detected.
    pub(super) untracked: AtomicBool,
    /// The thread found no task running and none started or ended since its reading
    /// before: it sleeps as long as in a streak, and the first task to start reads.
    pub(super) idle: AtomicBool,
}

/// A worker's count of task starts and ends, alone on its cache line.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Activity(pub(super) AtomicU64);

/// Worker ids past this are not followed for idle spells (see [`Core::activity`]).
pub(super) const MAX_TRACKED_WORKERS: usize = 4096;

impl Core {
    /// How long after a deadline the thread leaves the reading to a worker whose task
    /// ends meanwhile: a quarter of the period.
    pub(super) fn grace_ns(&self) -> u64 {
        self.period_ns / 4
    }

    /// Periods the thread sleeps while the workers take the readings: [`TAP_SLEEP_PERIODS`],
    /// and no longer than [`TAP_SLEEP_MAX`] (a longer period gains little from it, and an
    /// idle spell's first reading would come late by as much).
    pub(super) fn sleep_periods(&self) -> u64 {
        let most = (TAP_SLEEP_MAX.as_nanos() as u64 / self.period_ns.max(1)).max(1);
        TAP_SLEEP_PERIODS.min(most)
    }

    /// When the thread next wakes: a deadline's grace after it, or, while the workers take
    /// every reading on time or no task runs, [`TAP_SLEEP_PERIODS`] periods later.
    pub(super) fn wake_ns(&self) -> u64 {
        let next = self.next_ns.load(Ordering::Relaxed);
        let long =
            self.streak.load(Ordering::Relaxed) >= TAP_STREAK || self.idle.load(Ordering::Relaxed);
        if self.tap && long {
            // Never sooner than without the streak (a period of 8 ms or more sleeps one).
            next + ((self.sleep_periods() - 1) * self.period_ns).max(self.grace_ns())
        } else if self.tap {
            next + self.grace_ns()
        } else {
            next
        }
    }

    /// Moves the deadline past `now`, counting the deadlines skipped on the way: as left
    /// unread on purpose if `idle`, else as overruns. A reading that ends an idle spell
    /// (taken off the grid, at a task's start) moves the grid to it: the next deadline is a
    /// whole period later, so that the next reading does not find the sensor not yet
    /// updated (RAPL's counters move every ~1 ms).
    pub(super) fn advance(&self, w: &mut Worker, now: u64, idle: bool) {
        let next = self.next_ns.load(Ordering::Relaxed);
        if now >= next {
            let missed = (now - next) / self.period_ns + 1;
            if idle {
                w.stats.idle_skipped += missed - 1;
                self.next_ns.store(now + self.period_ns, Ordering::Relaxed);
            } else {
                w.stats.overruns += missed - 1;
                self.next_ns
                    .store(next + missed * self.period_ns, Ordering::Relaxed);
            }
        }
    }

    /// A worker at the end of a task found the deadline past: reads, unless another
    /// thread is reading (it never waits) or the sampler stops.
    #[cold]
    #[inline(never)]
    pub(super) fn read_from_worker(&self) {
        let Some(mut w) = self.worker.try_lock() else {
            return;
        };
        let before = Clock::now().as_ns();
        let next = self.next_ns.load(Ordering::Relaxed);
        if before < next || self.stop.load(Ordering::Acquire) {
            return;
        }
        w.read_all();
        let after = Clock::now().as_ns();
        w.stats.worker_readings += 1;
        w.stats.worker_read_ns += after.saturating_sub(before);
        if before - next <= self.grace_ns() {
            self.streak.fetch_add(1, Ordering::Relaxed);
        } else {
            self.streak.store(0, Ordering::Relaxed);
        }
        // A task starting after an idle spell ends it.
        let idle = self.idle.swap(false, Ordering::Relaxed);
        self.advance(&mut w, after, idle);
    }

    /// A task started (`start`) or ended on `worker` at `t`: counted, and the reading
    /// taken if its deadline passed. At a start, only after an idle spell (the thread
    /// asleep): while tasks run, their ends take the readings, and a worker's next start
    /// follows its end at once.
    #[inline]
    pub(super) fn event(&self, worker: WorkerId, t: Timestamp, start: bool) {
        if !self.tap {
            return;
        }
        self.touch(worker);
        if (!start || self.idle.load(Ordering::Relaxed))
            && t.as_ns() >= self.next_ns.load(Ordering::Relaxed)
        {
            self.read_from_worker();
        }
    }

    /// Counts a task's start or end on `worker`.
    #[inline]
    pub(super) fn touch(&self, worker: WorkerId) {
        match self.activity.get(worker as usize) {
            // Its worker alone writes it: a load and a store, no locked instruction.
            Some(a) => {
                a.0.store(a.0.load(Ordering::Relaxed) + 1, Ordering::Release)
            }
            None if !self.untracked.load(Ordering::Relaxed) => {
                self.untracked.store(true, Ordering::Relaxed)
            }
            None => {}
        }
    }

    /// The workers' starts and ends so far, and whether a task runs (or may: a worker not
    /// followed ran one).
    pub(super) fn activity(&self) -> (u64, bool) {
        let mut sum = 0u64;
        let mut running = self.untracked.load(Ordering::Relaxed);
        for a in self.activity.iter() {
            let n = a.0.load(Ordering::Acquire);
            sum = sum.wrapping_add(n);
            running |= n % 2 == 1;
        }
        (sum, running)
    }
}

/// An [`ExecutionObserver`] through which the runtime's workers take the sampler's
/// readings between their tasks (see the module docs), handing every event on to `inner`
/// (the simulated meter's observer, when there is one). Give it to the runtime when it is
/// built and to [`Sampler::start_tapped`](super::Sampler::start_tapped) when the sampler starts; before that, and after
/// the sampler stops, it only hands events on.
pub struct SamplerTap {
    inner: Option<Arc<dyn ExecutionObserver>>,
    pub(super) core: OnceLock<Arc<Core>>,
}

impl std::fmt::Debug for SamplerTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamplerTap")
            .field("inner", &self.inner.is_some())
            .field("attached", &self.core.get().is_some())
            .finish()
    }
}

impl SamplerTap {
    /// A tap that hands the workers' events on to `inner`.
    pub fn new(inner: Option<Arc<dyn ExecutionObserver>>) -> Arc<SamplerTap> {
        Arc::new(SamplerTap {
            inner,
            core: OnceLock::new(),
        })
    }

    /// Whether a sampler takes readings through it (not when one of its meters must be
    /// read by the sampler's thread only).
    pub fn is_attached(&self) -> bool {
        self.core.get().is_some_and(|c| c.tap)
    }
}

impl ExecutionObserver for SamplerTap {
    fn codelet_registered(&self, info: &CodeletInfo) {
        if let Some(o) = &self.inner {
            o.codelet_registered(info);
        }
    }

    #[inline]
    fn task_started(&self, worker: WorkerId, codelet: CodeletId, arch: Arch, t: Timestamp) {
        if let Some(o) = &self.inner {
            o.task_started(worker, codelet, arch, t);
        }
        if let Some(c) = self.core.get() {
            c.event(worker, t, true);
        }
    }

    #[inline]
    fn task_ended(&self, worker: WorkerId, codelet: CodeletId, arch: Arch, t: Timestamp) {
        if let Some(o) = &self.inner {
            o.task_ended(worker, codelet, arch, t);
        }
        if let Some(c) = self.core.get() {
            c.event(worker, t, false);
        }
    }
}
