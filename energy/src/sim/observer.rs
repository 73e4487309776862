//! The simulated meter's ear on the runtime: an [`ExecutionObserver`] that worker threads call
//! at each task start and end.
//!
//! The hot path (`task_started`/`task_ended`) does two lock-free table loads and one seqlock
//! write into the worker's own cache-padded slot ([`super::slots`]): no lock, no allocation,
//! no shared cache line between workers. Codelet powers are resolved from their names once,
//! at `codelet_registered`, into a fixed table indexed by codelet id.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use taskwatt_traces::{Arch, CodeletId, CodeletInfo, ExecutionObserver, Timestamp, WorkerId};

use super::config::SimConfig;
use super::slots::{Slot, Snapshot, CHANNELS, STREAMS};

/// Codelet ids at or above this get the default task power (a run with more task types than
/// this is not one the simulator was sized for; it still works, less precisely).
pub const MAX_SIM_CODELETS: usize = 1024;

/// Receives task starts and ends from the runtime and keeps, per worker, what the simulated
/// meter needs to integrate the energy live. Hand it to the runtime as its observer; the
/// [`super::SimMeter`] that created it reads it.
pub struct SimObserver {
    slots: Box<[Slot]>,
    ticks: [u64; STREAMS],
    config: SimConfig,
    /// `MAX_SIM_CODELETS × Arch::COUNT × CHANNELS` powers (f64 bits), valid once `ready`.
    powers: Box<[AtomicU64]>,
    ready: Box<[AtomicBool]>,
    default: [[f64; CHANNELS]; Arch::COUNT],
    unknown_worker_events: AtomicU64,
    unregistered_events: AtomicU64,
}

impl std::fmt::Debug for SimObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimObserver")
            .field("workers", &self.slots.len())
            .field("ticks", &self.ticks)
            .finish_non_exhaustive()
    }
}

impl SimObserver {
    /// Slots for worker ids `0..workers`, idle since `t0`.
    pub(crate) fn new(config: SimConfig, workers: usize, t0: u64, ticks: [u64; STREAMS]) -> Self {
        let default = [
            config.default_power(Arch::Cpu).channels(),
            config.default_power(Arch::Gpu).channels(),
        ];
        SimObserver {
            slots: (0..workers).map(|_| Slot::new(t0)).collect(),
            ticks,
            config,
            powers: (0..MAX_SIM_CODELETS * Arch::COUNT * CHANNELS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            ready: (0..MAX_SIM_CODELETS)
                .map(|_| AtomicBool::new(false))
                .collect(),
            default,
            unknown_worker_events: AtomicU64::new(0),
            unregistered_events: AtomicU64::new(0),
        }
    }

    /// Events from worker ids the meter was not built for (ignored).
    pub fn unknown_worker_events(&self) -> u64 {
        self.unknown_worker_events.load(Ordering::Relaxed)
    }

    /// Task starts of codelets that were never registered, or whose id is at or above
    /// [`MAX_SIM_CODELETS`] (given the default power).
    pub fn unregistered_codelet_events(&self) -> u64 {
        self.unregistered_events.load(Ordering::Relaxed)
    }

    /// Number of worker slots.
    pub(crate) fn workers(&self) -> usize {
        self.slots.len()
    }

    /// A consistent copy of every worker's slot, into `out` (reused between reads).
    pub(crate) fn snapshot_into(&self, out: &mut [Snapshot]) {
        for (o, slot) in out.iter_mut().zip(self.slots.iter()) {
            *o = slot.snapshot();
        }
    }

    #[inline]
    fn powers_of(&self, codelet: CodeletId, arch: Arch) -> [f64; CHANNELS] {
        let id = codelet as usize;
        // Acquire pairs with the Release in `codelet_registered`: seeing `ready` means seeing
        // the powers stored before it.
        if id < MAX_SIM_CODELETS && self.ready[id].load(Ordering::Acquire) {
            let base = (id * Arch::COUNT + arch.index()) * CHANNELS;
            let mut p = [0.0; CHANNELS];
            for (c, v) in p.iter_mut().enumerate() {
                *v = f64::from_bits(self.powers[base + c].load(Ordering::Relaxed));
            }
            p
        } else {
            // Off the normal path: a codelet the runtime never registered.
            self.unregistered_events.fetch_add(1, Ordering::Relaxed);
            self.default[arch.index()]
        }
    }

    #[inline]
    fn transition(&self, worker: WorkerId, t: Timestamp, p: [f64; CHANNELS]) {
        match self.slots.get(worker as usize) {
            Some(slot) => slot.transition(t.as_ns(), p, &self.ticks),
            None => {
                self.unknown_worker_events.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl ExecutionObserver for SimObserver {
    fn codelet_registered(&self, info: &CodeletInfo) {
        let id = info.id as usize;
        if id >= MAX_SIM_CODELETS {
            return;
        }
        for arch in Arch::ALL {
            let p = self.config.task_power(&info.name, arch).channels();
            let base = (id * Arch::COUNT + arch.index()) * CHANNELS;
            for (c, v) in p.iter().enumerate() {
                self.powers[base + c].store(v.to_bits(), Ordering::Relaxed);
            }
        }
        self.ready[id].store(true, Ordering::Release);
    }

    fn task_started(&self, worker: WorkerId, codelet: CodeletId, arch: Arch, t: Timestamp) {
        let p = self.powers_of(codelet, arch);
        self.transition(worker, t, p);
    }

    fn task_ended(&self, worker: WorkerId, _codelet: CodeletId, _arch: Arch, t: Timestamp) {
        self.transition(worker, t, [0.0; CHANNELS]);
    }
}
