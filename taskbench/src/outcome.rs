//! What one timed run of a system gives: its time, its checksum and its task count, as
//! every system (taskwatt, the baselines, an external Task Bench program) reports it.

use std::time::Duration;

/// One timed run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchOutcome {
    /// Submission plus execution, as Task Bench times it.
    pub elapsed: Duration,
    /// A hash of every task's output hash, each chained to its inputs': equal across
    /// systems when they ran the same graph with the same data flow. `None` when an
    /// external program does not print one.
    pub checksum: Option<u64>,
    /// How many tasks ran.
    pub tasks_executed: u64,
}
