//! A live view of task executions, for consumers that must see them as they happen.
//!
//! The simulated energy meter integrates power over the executions *while the run goes*
//! (it is read by the sampler like a real sensor), so it cannot wait for the trace. The
//! runtime calls an [`ExecutionObserver`] from the worker thread at each task start and end,
//! on the trace clock. Implementations must be cheap and must not block: they run on the
//! task hot path.

use crate::{Arch, CodeletInfo, Timestamp, WorkerId};

/// Receives task start/end events from workers as they happen.
pub trait ExecutionObserver: Send + Sync {
    /// A codelet gets its dense id, before any task of it starts.
    fn codelet_registered(&self, info: &CodeletInfo) {
        let _ = info;
    }
    /// `worker` starts running a task of `codelet` at `t`.
    fn task_started(&self, worker: WorkerId, codelet: crate::CodeletId, arch: Arch, t: Timestamp);
    /// `worker` finished that task at `t`.
    fn task_ended(&self, worker: WorkerId, codelet: crate::CodeletId, arch: Arch, t: Timestamp);
}
