//! Errors of the Task Bench driver: each names the flag or graph at fault and the fix.

use std::path::PathBuf;

use taskwatt_runtime::RuntimeError;
use taskwatt_traces::TraceError;

/// What can go wrong parsing Task Bench flags or running a graph.
#[derive(Debug, thiserror::Error)]
pub enum TaskBenchError {
    /// A flag that neither Task Bench nor taskwatt's driver knows.
    #[error("unknown flag `{flag}`: valid flags are {valid}")]
    UnknownFlag {
        /// The flag as given.
        flag: String,
        /// The valid flags.
        valid: String,
    },
    /// A flag given without its value.
    #[error("flag `{flag}` requires an argument ({what})")]
    MissingValue {
        /// The flag.
        flag: String,
        /// What it takes.
        what: &'static str,
    },
    /// A flag whose value does not parse or is out of range.
    #[error("invalid flag `{flag} {value}`: {reason}")]
    InvalidValue {
        /// The flag.
        flag: String,
        /// The value as given.
        value: String,
        /// What it must be.
        reason: String,
    },
    /// `-type` names no pattern.
    #[error("unknown dependence pattern `{name}` (-type): valid patterns are {valid}")]
    UnknownPattern {
        /// The name given.
        name: String,
        /// The valid names.
        valid: String,
    },
    /// `-kernel` names no implemented kernel.
    #[error("kernel `{name}` (-kernel) {why}: valid kernels are {valid}")]
    UnknownKernel {
        /// The name given.
        name: String,
        /// Why it cannot run.
        why: String,
        /// The valid names.
        valid: String,
    },
    /// `--system` names no system.
    #[error("unknown system `{0}` (--system): valid systems are taskwatt, rayon, sequential")]
    UnknownSystem(String),
    /// The trace of a taskwatt run could not be written.
    #[error("trace {}: {source}", path.display())]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// What went wrong.
        source: Box<TraceError>,
    },
    /// An external Task Bench program could not be run, failed, or printed no timing.
    #[error("external system `{name}` ({}): {reason}", program.display())]
    External {
        /// Its label.
        name: String,
        /// The program.
        program: PathBuf,
        /// What went wrong and how to fix it.
        reason: String,
    },
    /// Two systems computed different checksums for the same graph: one of them ran a
    /// different graph or lost a dependency.
    #[error(
        "checksum mismatch at {iterations} iterations: {first} gave {first_sum:016x}, \
         {other} gave {other_sum:016x} (the systems did not run the same graph)"
    )]
    ChecksumMismatch {
        /// Kernel iterations of the point.
        iterations: i64,
        /// The first system's label.
        first: String,
        /// Its checksum.
        first_sum: u64,
        /// The disagreeing system.
        other: String,
        /// Its checksum.
        other_sum: u64,
    },
    /// A graph whose parameters Task Bench would reject.
    #[error("task graph {graph}: {reason}")]
    InvalidGraph {
        /// 1-based, as Task Bench's `display` numbers graphs.
        graph: usize,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The taskwatt runtime refused to build or run.
    #[error("taskwatt runtime: {0}")]
    Runtime(#[from] RuntimeError),
    /// A task panicked (for instance, it found a corrupted input).
    #[error("a task failed under {system}: {message}")]
    TaskFailed {
        /// The system that ran it.
        system: String,
        /// The panic message.
        message: String,
    },
}
