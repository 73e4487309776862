//! The systems a Task Bench graph can run on, and what a run reports.

use std::time::Duration;

use serde::Serialize;

use super::baselines;
use super::error::TaskBenchError;
use super::graph::TaskGraph;
use super::stf;

/// Where the graph runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "system", rename_all = "snake_case")]
pub enum System {
    /// The taskwatt runtime under a scheduling policy (`eager`, `ws`, `lws`, `prio`).
    Taskwatt {
        /// The policy name.
        policy: String,
    },
    /// A dataflow executor on a rayon pool (atomic dependency counters).
    Rayon,
    /// One thread, in timestep order.
    Sequential,
}

impl System {
    /// The system named `name` (`taskwatt`, `rayon`, `sequential`); `policy` applies to
    /// taskwatt only (default `lws`, as StarPU's Task Bench).
    pub fn from_name(name: &str, policy: Option<&str>) -> Result<System, TaskBenchError> {
        let system = match name {
            "taskwatt" => System::Taskwatt {
                policy: policy.unwrap_or("lws").to_string(),
            },
            "rayon" => System::Rayon,
            "sequential" => System::Sequential,
            other => return Err(TaskBenchError::UnknownSystem(other.to_string())),
        };
        if policy.is_some() && !matches!(system, System::Taskwatt { .. }) {
            return Err(TaskBenchError::InvalidValue {
                flag: "--sched".into(),
                value: policy.unwrap_or_default().into(),
                reason: format!("a scheduling policy applies to --system taskwatt, not {name}"),
            });
        }
        Ok(system)
    }

    /// A short label: `taskwatt/lws`, `rayon`, `sequential`.
    pub fn label(&self) -> String {
        match self {
            System::Taskwatt { policy } => format!("taskwatt/{policy}"),
            System::Rayon => "rayon".into(),
            System::Sequential => "sequential".into(),
        }
    }

    /// The cores the system uses with `workers` workers (sequential: one).
    pub fn cores(&self, workers: usize) -> usize {
        match self {
            System::Sequential => 1,
            _ => workers,
        }
    }

    /// Runs `graphs` once with `workers` workers.
    pub fn run(&self, graphs: &[TaskGraph], workers: usize) -> Result<RunOutcome, TaskBenchError> {
        match self {
            System::Taskwatt { policy } => stf::run(graphs, workers, policy),
            System::Rayon => baselines::run_rayon(graphs, workers),
            System::Sequential => baselines::run_sequential(graphs),
        }
    }
}

/// One timed run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunOutcome {
    /// Submission plus execution, as Task Bench times it.
    pub elapsed: Duration,
    /// A hash of every task's output hash, each chained to its inputs': equal across
    /// systems when they ran the same graph with the same data flow.
    pub checksum: u64,
    /// How many tasks ran.
    pub tasks_executed: u64,
}
