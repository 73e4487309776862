//! What can go wrong while reading a platform or simulating a graph.

use std::path::PathBuf;

/// A what-if error: every variant names the file or field and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WhatIfError {
    /// The platform file cannot be read.
    #[error("cannot read platform file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The platform file is not valid TOML for a platform.
    #[error("platform {origin}: {message} (see docs/whatif.md and whatif/platforms/*.toml)")]
    Platform {
        /// The file (or `built-in NAME`).
        origin: String,
        /// What is wrong, with the field.
        message: String,
    },
    /// The simulated meter of the platform cannot be made.
    #[error("platform {origin}, [meter]: {source}")]
    Meter {
        /// The file.
        origin: String,
        /// The energy crate's error.
        source: taskwatt_energy::EnergyError,
    },
    /// The trace cannot be replayed.
    #[error("cannot replay the trace: {0}")]
    Graph(String),
    /// A task can run on no worker of the platform.
    #[error("task {task} ({codelet}) can run on no worker of platform {platform}: {hint}")]
    NoWorker {
        /// The task id.
        task: u64,
        /// Its codelet.
        codelet: String,
        /// The architecture it ran on.
        ran: &'static str,
        /// The platform's name.
        platform: String,
        /// What would let it run.
        hint: String,
    },
    /// The policy name is unknown.
    #[error(transparent)]
    Policy(#[from] taskwatt_scheduler::UnknownPolicy),
    /// A policy's knob has a value the policy cannot run with.
    #[error(transparent)]
    PolicyKnob(#[from] taskwatt_scheduler::BadKnob),
    /// The scheduling policy lost a task or kept it from every worker.
    #[error(
        "policy {policy} left {left} task(s) unscheduled with every worker idle at {at_ms:.3} \
         ms of virtual time (a policy bug: it must hand every pushed task to some worker)"
    )]
    Stuck {
        /// The policy.
        policy: String,
        /// Tasks not run.
        left: usize,
        /// When, ms.
        at_ms: f64,
    },
}

impl From<taskwatt_scheduler::PolicyError> for WhatIfError {
    fn from(e: taskwatt_scheduler::PolicyError) -> Self {
        match e {
            taskwatt_scheduler::PolicyError::Unknown(e) => WhatIfError::Policy(e),
            taskwatt_scheduler::PolicyError::Knob(e) => WhatIfError::PolicyKnob(e),
        }
    }
}
