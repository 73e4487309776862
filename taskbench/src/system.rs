//! The systems a Task Bench graph can run on, and what a run reports.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::baselines;
use super::error::TaskBenchError;
use super::external;
use super::graph::TaskGraph;
use super::outcome::BenchOutcome;
use super::stf;

/// Whether, and where, a taskwatt run records its trace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tracing {
    /// No trace: the runtime reads no clock and records nothing.
    Off,
    /// Every task recorded into a `.twt` file in the temporary directory, removed after
    /// the run: the cost of tracing, without keeping the files of a sweep.
    Temp,
    /// Every task recorded into this `.twt` file.
    File(PathBuf),
}

impl Tracing {
    /// Whether tasks are recorded.
    pub fn is_on(&self) -> bool {
        !matches!(self, Tracing::Off)
    }
}

/// Where the graph runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "system", rename_all = "snake_case")]
pub enum System {
    /// The taskwatt runtime under a scheduling policy (`eager`, `ws`, `lws`, `prio`).
    Taskwatt {
        /// The policy name.
        policy: String,
        /// Whether the run is traced.
        tracing: Tracing,
    },
    /// A dataflow executor on a rayon pool (atomic dependency counters).
    Rayon,
    /// One thread, in timestep order.
    Sequential,
    /// Another Task Bench implementation, run as a program that takes Task Bench's flags
    /// and prints its `Elapsed Time` line (e.g. the StarPU driver of benches/starpu/).
    External {
        /// Its label (`starpu`).
        name: String,
        /// The program.
        program: PathBuf,
    },
}

impl System {
    /// The system named `name` (`taskwatt`, `rayon`, `sequential`); `policy` applies to
    /// taskwatt only (default `lws`, as StarPU's Task Bench). taskwatt runs untraced.
    pub fn from_name(name: &str, policy: Option<&str>) -> Result<System, TaskBenchError> {
        let system = match name {
            "taskwatt" => System::Taskwatt {
                policy: policy.unwrap_or("lws").to_string(),
                tracing: Tracing::Off,
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

    /// A short label: `taskwatt/lws` (traced), `taskwatt/lws-untraced`, `rayon`,
    /// `sequential`, or an external system's name.
    pub fn label(&self) -> String {
        match self {
            System::Taskwatt { policy, tracing } if tracing.is_on() => format!("taskwatt/{policy}"),
            System::Taskwatt { policy, .. } => format!("taskwatt/{policy}-untraced"),
            System::Rayon => "rayon".into(),
            System::Sequential => "sequential".into(),
            System::External { name, .. } => name.clone(),
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
    pub fn run(
        &self,
        graphs: &[TaskGraph],
        workers: usize,
    ) -> Result<BenchOutcome, TaskBenchError> {
        match self {
            System::Taskwatt { policy, tracing } => match tracing {
                Tracing::Off => stf::run(graphs, workers, policy, None),
                Tracing::File(path) => stf::run(graphs, workers, policy, Some(path)),
                Tracing::Temp => {
                    let path = temp_trace_path();
                    let out = stf::run(graphs, workers, policy, Some(&path));
                    let _ = std::fs::remove_file(&path);
                    out
                }
            },
            System::Rayon => baselines::run_rayon(graphs, workers),
            System::Sequential => baselines::run_sequential(graphs),
            System::External { name, program } => external::run(name, program, graphs, workers),
        }
    }
}

/// A trace file of its own for each run, even for runs on several threads of one process.
fn temp_trace_path() -> PathBuf {
    static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir: &Path = &std::env::temp_dir();
    dir.join(format!(
        "taskwatt-taskbench-{}-{run}.twt",
        std::process::id()
    ))
}
