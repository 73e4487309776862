//! What can go wrong in a distributed run.

/// A distributed-run error: each names the rank, and the peer or handle involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// The local runtime failed.
    #[error("rank {rank}: {source}")]
    Runtime {
        /// This rank.
        rank: usize,
        /// The runtime's error.
        source: taskwatt_runtime::RuntimeError,
    },
    /// A message did not come (or did not leave) in time: its peer died, hung, or did not
    /// submit the same task flow.
    #[error(
        "rank {rank}: no {what} rank {peer} for handle {handle}, no message of this rank \
         completed, and no rank computed, for {waited_s:.1} s: rank {peer} died, or the ranks \
         did not register the same data in the same order and submit the same sequence of \
         tasks (every rank must); TASKWATT_MPI_TIMEOUT sets the limit (now {limit_s} s)"
    )]
    Timeout {
        /// This rank.
        rank: usize,
        /// The other rank.
        peer: usize,
        /// `message from` or `delivery to`.
        what: &'static str,
        /// The handle.
        handle: u32,
        /// How long it waited, s.
        waited_s: f64,
        /// The limit, s.
        limit_s: u64,
    },
    /// The transport failed.
    #[error("rank {rank}: communication with rank {peer} failed: {message}")]
    Transport {
        /// This rank.
        rank: usize,
        /// The other rank.
        peer: usize,
        /// What failed.
        message: String,
    },
    /// A task failed on this rank: what it should have written would reach the other ranks
    /// wrong (a failed task's data is sent as it stands), so the job ends.
    #[error(
        "rank {rank}: {failure}; the data it should have written would reach the other ranks \
         wrong, so the job ends (every rank: MPI_Abort; docs/mpi.md)"
    )]
    TaskFailed {
        /// This rank.
        rank: usize,
        /// The failure (task, codelet, worker, message).
        failure: String,
    },
    /// A REDUX access to a datum without a reduction.
    #[error(
        "task {codelet} contributes to handle {handle} (REDUX), which has no reduction: call \
         DistRuntime::set_reduction on it, on every rank, first"
    )]
    NoReduction {
        /// The codelet.
        codelet: String,
        /// The handle.
        handle: u32,
    },
    /// An owner or rank outside the job.
    #[error("rank {given} is outside the job of {size} rank(s) ({what})")]
    BadRank {
        /// The rank given.
        given: usize,
        /// Ranks in the job.
        size: usize,
        /// Where it was given.
        what: &'static str,
    },
    /// The communication thread is gone (it failed earlier).
    #[error("rank {rank}: the communication thread stopped: {message}")]
    CommThread {
        /// This rank.
        rank: usize,
        /// Why.
        message: String,
    },
    /// A partitioned datum used as a whole.
    #[error(
        "rank {rank}: handle {handle} is partitioned and cannot be {what}: use its parts, or \
         call DistRuntime::unpartition first"
    )]
    Partitioned {
        /// This rank.
        rank: usize,
        /// The handle.
        handle: u32,
        /// What was asked.
        what: &'static str,
    },
    /// A partition that cannot be made.
    #[error("rank {rank}: handle {handle} cannot be partitioned: {reason}")]
    BadPartition {
        /// This rank.
        rank: usize,
        /// The handle.
        handle: u32,
        /// Why.
        reason: String,
    },
    /// MPI is not available in this build or could not start.
    #[error("{0}")]
    NoMpi(String),
}
