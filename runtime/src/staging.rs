//! Staging: codelet tasks ready at their submission wait, in submission order, for a
//! short window before they go to the policy, so that a submitting thread's burst
//! reaches the workers as one batch (docs/runtime.md, "Staging").

use std::sync::atomic::Ordering;
use std::sync::Arc;

use taskwatt_scheduler::Origin;
use taskwatt_traces::{Clock, Timestamp};

use crate::shared::Shared;
use crate::task::{ReadyTask, TaskNode};

impl Shared {
    /// Stages `node`, a codelet task ready at its submission, and wakes a parked worker
    /// if there is one, as a push to the policy would: it takes the staged tasks at once.
    /// (Waking one only for the first task of a batch, to save wake-ups, made Task
    /// Bench's stencil at 2^6 iterations take 1.3 to 1.5 times as long in most runs.)
    pub(crate) fn stage(&self, node: Arc<TaskNode>) {
        let mut staged = self.staged.lock();
        let first = staged.is_empty();
        if first {
            let since = if self.timing {
                node.submit
            } else {
                Clock::now()
            };
            self.staged_since
                .store(since.as_ns().max(1), Ordering::Relaxed);
        }
        if self.timing {
            node.ready.store(node.submit.as_ns(), Ordering::Relaxed);
        }
        staged.push(node);
        drop(staged);
        self.sleep.notify(1);
    }

    /// Whether a task has been staged for the window or longer at `now` (the trace
    /// clock; read only when something is staged, so never without staging).
    #[inline]
    pub(crate) fn staged_due(&self, now: impl FnOnce() -> Timestamp) -> bool {
        let since = self.staged_since.load(Ordering::Relaxed);
        since != 0 && now().as_ns().saturating_sub(since) >= self.staging.as_nanos() as u64
    }

    /// Gives the staged tasks to the policy, in submission order, as the submitting
    /// thread would have: `buf` is the caller's empty vector, swapped with the staged one
    /// so that neither side allocates. Returns how many; wakes parked workers for all
    /// but one (the caller, a worker, goes on to pop; `wake_all` when the caller is not
    /// a worker). Without staging, nothing is ever staged: no lock is taken.
    pub(crate) fn take_staged(&self, buf: &mut Vec<Arc<TaskNode>>, wake_all: bool) -> usize {
        if self.staging.is_zero() {
            return 0;
        }
        debug_assert!(buf.is_empty());
        let mut staged = self.staged.lock();
        std::mem::swap(&mut *staged, buf);
        self.staged_since.store(0, Ordering::Relaxed);
        drop(staged);
        let n = buf.len();
        for node in buf.drain(..) {
            self.policy.push(ReadyTask(node), Origin::External);
        }
        self.sleep
            .notify(if wake_all { n } else { n.saturating_sub(1) });
        n
    }

    /// Gives the staged tasks to the policy before a thread outside the workers waits.
    pub(crate) fn flush_staged(&self) {
        self.take_staged(&mut Vec::new(), true);
    }
}

/// The environment variable that overrides the default staging window.
pub const STAGING_ENV: &str = "TASKWATT_STAGING_US";

const DEFAULT_STAGING: std::time::Duration = std::time::Duration::from_micros(2);

/// `TASKWATT_STAGING_US=<µs>` if set, else the default.
pub(crate) fn from_env() -> Result<std::time::Duration, crate::error::RuntimeError> {
    let Ok(value) = std::env::var(STAGING_ENV) else {
        return Ok(DEFAULT_STAGING);
    };
    match value.trim().parse::<f64>() {
        Ok(us) if us.is_finite() && (0.0..=1e9).contains(&us) => {
            Ok(std::time::Duration::from_secs_f64(us * 1e-6))
        }
        _ => Err(crate::error::RuntimeError::StagingEnv { value }),
    }
}
