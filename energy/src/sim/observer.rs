//! The simulated meter's ear on the runtime: an [`ExecutionObserver`] that worker threads call
//! at each task start and end.
//!
//! The hot path (`task_started`/`task_ended`) appends one event to the worker's own ring
//! (three stores, no lock: [`super::log`]; see [`super::integrator`] for why every event is
//! kept). A codelet's power is resolved from its
//! name once, at `codelet_registered`, into the integrator's table indexed by power code
//! (`2·codelet id + arch`).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use taskwatt_traces::{Arch, CodeletId, CodeletInfo, ExecutionObserver, Timestamp, WorkerId};

use super::config::SimConfig;
use super::integrator::{Integrator, IDLE};
use super::log::{Event, Logs, Pushed, HELP_AT};

/// Codelet ids at or above this get the default task power (a run with more task types than
/// this is not one the simulator was sized for; it still works, less precisely).
pub const MAX_SIM_CODELETS: usize = 1024;

/// Power codes: two per codelet id below [`MAX_SIM_CODELETS`] (CPU, GPU), then two for every
/// larger id (never registered: default power).
pub(crate) const CODES: usize = 2 * MAX_SIM_CODELETS + 2;

/// The power code of `codelet` on `arch`.
#[inline]
pub(crate) fn code_of(codelet: CodeletId, arch: Arch) -> u32 {
    let id = (codelet as usize).min(MAX_SIM_CODELETS);
    (2 * id + arch.index()) as u32
}

/// Receives task starts and ends from the runtime and keeps, per worker, the log the
/// simulated meter integrates. Hand it to the runtime as its observer; the
/// [`super::SimMeter`] that created it reads it.
pub struct SimObserver {
    logs: Logs,
    pub(crate) integrator: Mutex<Integrator>,
    config: SimConfig,
    unknown_worker_events: AtomicU64,
}

impl std::fmt::Debug for SimObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimObserver")
            .field("workers", &self.logs.len())
            .finish_non_exhaustive()
    }
}

impl SimObserver {
    /// Logs for worker ids `0..workers`, integrated by `integrator`.
    pub(crate) fn new(config: SimConfig, workers: usize, integrator: Integrator) -> Self {
        SimObserver {
            logs: Logs::new(workers),
            integrator: Mutex::new(integrator),
            config,
            unknown_worker_events: AtomicU64::new(0),
        }
    }

    /// Events from worker ids the meter was not built for (ignored).
    pub fn unknown_worker_events(&self) -> u64 {
        self.unknown_worker_events.load(Ordering::Relaxed)
    }

    /// Task starts of codelets that were never registered, or whose id is at or above
    /// [`MAX_SIM_CODELETS`] (given the default power), among the events integrated so far.
    pub fn unregistered_codelet_events(&self) -> u64 {
        let mut i = self.integrator.lock();
        i.drain(&self.logs);
        i.unregistered_events()
    }

    /// Events applied later than their time because the worker logged them after a read
    /// had integrated past it (a worker preempted between taking a task's time and logging
    /// it): each is off by that delay.
    pub fn late_events(&self) -> u64 {
        self.integrator.lock().late_events()
    }

    /// The workers' logs.
    pub(crate) fn logs(&self) -> &Logs {
        &self.logs
    }

    #[inline]
    fn log(&self, worker: WorkerId, t: Timestamp, code: u32) {
        let e = Event { t: t.as_ns(), code };
        loop {
            match self.logs.push(worker as usize, e) {
                Pushed::Held(len) => {
                    if len >= HELP_AT {
                        // Nobody drained for a while: drain here, unless someone is doing it.
                        if let Some(mut i) = self.integrator.try_lock() {
                            i.drain(&self.logs);
                        }
                    }
                    return;
                }
                // Wait for the drain (the holder is draining or about to), then append.
                Pushed::Full => self.integrator.lock().drain(&self.logs),
                Pushed::NoLog => {
                    self.unknown_worker_events.fetch_add(1, Ordering::Relaxed);
                    return;
                }
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
        let mut i = self.integrator.lock();
        i.set_name(id, &info.name);
        for arch in Arch::ALL {
            let p = self.config.task_power(&info.name, arch).channels();
            i.set_powers(code_of(info.id, arch) as usize, p);
        }
    }

    fn task_started(&self, worker: WorkerId, codelet: CodeletId, arch: Arch, t: Timestamp) {
        self.log(worker, t, code_of(codelet, arch));
    }

    fn task_ended(&self, worker: WorkerId, _codelet: CodeletId, _arch: Arch, t: Timestamp) {
        self.log(worker, t, IDLE);
    }
}
