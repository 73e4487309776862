//! Runtime errors.

use taskwatt_scheduler::{BadKnob, PolicyError, UnknownPolicy};
use taskwatt_traces::TaskId;

/// A task that panicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    /// The task's id.
    pub task: TaskId,
    /// Its codelet's name.
    pub codelet: String,
    /// The panic message.
    pub message: String,
    /// The worker it ran on.
    pub worker: u32,
}

impl std::fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "task {} (codelet `{}`) failed on worker {}: {}",
            self.task, self.codelet, self.worker, self.message
        )
    }
}

/// The first three failures, and how many more there are (the error holds them all).
fn first_failures(failures: &[TaskFailure]) -> String {
    const SHOWN: usize = 3;
    let mut s = failures
        .iter()
        .take(SHOWN)
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    if failures.len() > SHOWN {
        s.push_str(&format!("; and {} more", failures.len() - SHOWN));
    }
    s
}

/// Errors of the runtime.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The scheduling policy name is not registered.
    #[error(transparent)]
    UnknownPolicy(#[from] UnknownPolicy),

    /// A policy's knob has a value the policy cannot run with.
    #[error(transparent)]
    PolicyKnob(#[from] BadKnob),

    /// A codelet has no implementation for any architecture the runtime has workers for.
    #[error(
        "codelet `{codelet}` has no implementation for any worker of this runtime \
         (it implements: {implemented}; workers: {present}); add one with `Codelet::cpu(..)`"
    )]
    NoImplementation {
        /// The codelet's name.
        codelet: String,
        /// The architectures it implements.
        implemented: String,
        /// The architectures the runtime has workers for.
        present: String,
    },

    /// A task was submitted on a handle that was unregistered.
    #[error("task of codelet `{codelet}` accesses data handle {handle}, which was unregistered; register the data again")]
    Unregistered {
        /// The codelet's name.
        codelet: String,
        /// The handle's id.
        handle: u64,
    },

    /// A task lists the same handle twice, and not to read it both times.
    #[error("task of codelet `{codelet}` lists data handle {handle} twice (accesses {first} and {second}), and writes it: list it once, with RW if it is both read and written (a handle only read may be listed twice)")]
    DuplicateAccess {
        /// The codelet's name.
        codelet: String,
        /// The handle's id.
        handle: u64,
        /// Index of the first access.
        first: usize,
        /// Index of the second.
        second: usize,
    },

    /// A task declares more data accesses than the runtime supports.
    #[error(
        "task of codelet `{codelet}` declares {count} data accesses; at most {max} are supported"
    )]
    TooManyAccesses {
        /// The codelet's name.
        codelet: String,
        /// How many it declared.
        count: usize,
        /// The maximum.
        max: usize,
    },

    /// One or more tasks panicked since the last wait; their dependents were cancelled.
    #[error("{} task(s) failed{}: {}", .failures.len(), if *.cancelled > 0 { format!(" and {} dependent task(s) were cancelled", .cancelled) } else { String::new() }, first_failures(.failures))]
    TasksFailed {
        /// The tasks that panicked, in the order they failed.
        failures: Vec<TaskFailure>,
        /// How many tasks were cancelled because a predecessor failed.
        cancelled: u64,
    },

    /// This task was cancelled because a predecessor failed.
    #[error("task {task} (codelet `{codelet}`) was cancelled because a task it depends on failed")]
    Cancelled {
        /// The task's id.
        task: TaskId,
        /// Its codelet's name.
        codelet: String,
    },

    /// The worker configuration is not possible.
    #[error("invalid worker configuration: {0}")]
    Workers(String),
    /// `TASKWATT_IDLE_US` does not parse.
    #[error(
        "TASKWATT_IDLE_US={value}: expected <spin>,<yield> in microseconds, e.g. 50,100 \
         (or unset it for the defaults)"
    )]
    IdleEnv {
        /// The value found.
        value: String,
    },

    /// `TASKWATT_STAGING_US` does not parse.
    #[error(
        "TASKWATT_STAGING_US={value}: expected the staging window in microseconds, e.g. 2 \
         or 0.5 (0 turns staging off; unset it for the default)"
    )]
    StagingEnv {
        /// The value found.
        value: String,
    },

    /// `TASKWATT_SUBMITTER_WORKS` does not parse.
    #[error(
        "TASKWATT_SUBMITTER_WORKS={value}: expected 1 (the waiting thread runs tasks) or 0 \
         (or unset it for the default, 0)"
    )]
    SubmitterWorksEnv {
        /// The value found.
        value: String,
    },

    /// The runtime was interrupted ([`Runtime::interrupt`](crate::Runtime::interrupt)):
    /// tasks that had not started were not run, and no task is accepted any more.
    #[error(
        "the runtime was interrupted: {finished} task(s) had run, {not_run} submitted task(s) \
         were not run; build a new runtime to run more"
    )]
    Interrupted {
        /// Tasks that ran (completed or failed) before the interruption took effect.
        finished: u64,
        /// Submitted tasks that were not run.
        not_run: u64,
    },

    /// A data handle registered with another runtime was given to this one.
    #[error(
        "{operation}: data handle {handle} was registered with another runtime; a handle \
         belongs to the runtime that registered it: register the data with this runtime \
         (or unregister it from the other first)"
    )]
    ForeignHandle {
        /// What was attempted (`submit of codelet `x``, `acquire`, ...).
        operation: String,
        /// The handle's id.
        handle: u64,
    },

    /// A task handle from another runtime was given to this one.
    #[error(
        "{operation}: task {task} was submitted to another runtime; wait for it, or depend \
         on it, through that runtime"
    )]
    ForeignTask {
        /// What was attempted.
        operation: String,
        /// The task's id (in its own runtime).
        task: TaskId,
    },

    /// A task whose codelet has only a GPU implementation accesses a handle that cannot
    /// be copied to a device.
    #[error(
        "codelet `{codelet}` has only a GPU implementation, but handle {handle} cannot be \
         copied to this runtime's devices: register it with `register_device` (the type \
         must implement DeviceData; any device) or `register_replicated` (the type must \
         be Clone; emulated devices only), or give the codelet a CPU implementation"
    )]
    NotReplicated {
        /// The codelet.
        codelet: String,
        /// The handle.
        handle: u64,
    },

    /// A device could not be opened or set up (the driver, a device or a library is
    /// missing, or a call failed).
    #[error("GPU backend `{backend}`: {message}")]
    Device {
        /// The backend.
        backend: &'static str,
        /// What failed, and what to do about it.
        message: String,
    },

    /// Data could not be brought back to main memory (a device copy failed).
    #[error("handle {handle} could not be copied back to main memory: {message}")]
    Transfer {
        /// The handle.
        handle: u64,
        /// Why.
        message: String,
    },

    /// The performance models could not be loaded.
    #[error(transparent)]
    PerfModel(#[from] crate::perfmodel::PerfModelError),

    /// The call would wait forever (StarPU answers `-EDEADLK` here).
    #[error("{operation} would wait forever: {reason}")]
    Deadlock {
        /// The call (`wait_all`, `wait`, `acquire`, `acquire_mut`, `unregister`).
        operation: &'static str,
        /// Why, and what to do instead.
        reason: String,
    },

    /// A task pinned ([`Task::on_worker`](crate::Task::on_worker)) to a worker that is not
    /// reserved, or whose codelet has no CPU implementation.
    #[error(
        "task of codelet `{codelet}` is pinned to worker {worker}, {why}: only the \
         runtime's reserved workers take pinned tasks (RuntimeBuilder::reserved_workers; \
         their ids: Runtime::reserved_workers(), here {reserved:?})"
    )]
    NotReserved {
        /// The codelet's name.
        codelet: String,
        /// The worker named.
        worker: u32,
        /// Why it cannot run there.
        why: String,
        /// The reserved workers' ids.
        reserved: Vec<u32>,
    },

    /// A REDUX access to a handle that has no reduction.
    #[error(
        "task of codelet `{codelet}` accesses data handle {handle} in REDUX mode, but the \
         handle has no reduction: call Runtime::set_reduction on it first (how to make a \
         contribution and how to combine two)"
    )]
    NoReduction {
        /// The codelet's name.
        codelet: String,
        /// The handle's id.
        handle: u64,
    },

    /// `set_reduction` on a handle that already has one.
    #[error(
        "data handle {handle} already has a reduction: set it once, before the first REDUX \
         access (register the data again to change it)"
    )]
    ReductionAlreadySet {
        /// The handle's id.
        handle: u64,
    },

    /// An access to a partitioned handle, whose children hold the data.
    #[error(
        "{operation}: data handle {handle} is partitioned; access its parts, or unpartition \
         it first (Runtime::unpartition)"
    )]
    Partitioned {
        /// What was attempted.
        operation: String,
        /// The handle's id.
        handle: u64,
    },

    /// An unregistration of a part of a partitioned handle.
    #[error(
        "unregister: data handle {handle} is a part of a partitioned handle, a view into the \
         parent's data that must not outlive the partitioning; Runtime::unpartition retires \
         the parts and gives the parent back, with what the parts' tasks wrote"
    )]
    PartUnregistered {
        /// The part's id.
        handle: u64,
    },

    /// A partitioning that cannot be done on this data.
    #[error("cannot partition data handle {handle}: {reason}")]
    BadPartition {
        /// The handle's id.
        handle: u64,
        /// Why, and what would work.
        reason: String,
    },

    /// The trace chunk size is out of range.
    #[error(
        "trace chunk of {records} records: at most {max} are supported (each worker \
         preallocates a chunk; 4096, the default, keeps the overhead per task low)"
    )]
    TraceChunk {
        /// The size asked for.
        records: usize,
        /// The limit.
        max: usize,
    },

    /// Spawning a worker thread failed.
    #[error("could not spawn worker thread {worker}: {source}")]
    Spawn {
        /// The worker id.
        worker: usize,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<PolicyError> for RuntimeError {
    fn from(e: PolicyError) -> Self {
        match e {
            PolicyError::Unknown(e) => RuntimeError::UnknownPolicy(e),
            PolicyError::Knob(e) => RuntimeError::PolicyKnob(e),
        }
    }
}

taskwatt_traces::debug_as_display!(RuntimeError);
