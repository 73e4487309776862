//! taskwatt's what-if simulator: run a recorded task graph on a platform you do not have,
//! in virtual time, under any scheduling policy, and read its time and energy.
//!
//! - [`Platform`] ([`platform`]): a TOML file of workers (CPU packages and cores, GPUs),
//!   buses, task speeds (from the trace, with factors per codelet and architecture) and the
//!   simulated meters' truth (the `--sim-config` format). Examples in `whatif/platforms/`,
//!   reference in docs/whatif.md.
//! - [`Graph`] ([`graph`]): the tasks, their dependencies and data accesses, from a trace
//!   ([`Graph::from_trace`]) or built ([`GraphBuilder`]).
//! - [`simulate`] ([`engine`]): a discrete-event run where the same policy objects as the
//!   runtime's make every decision (dmda reads the virtual clock), task durations and
//!   copies come from the platform, and the simulated meter integrates power over virtual
//!   time.
//! - [`to_trace`] ([`output`]): the simulated run as a trace that `report` and `export`
//!   accept, marked simulated everywhere; [`figures`]: makespan and energy of any trace.

pub mod contention;
pub mod engine;
mod error;
pub mod graph;
pub mod interrupt;
pub mod output;
pub mod platform;
mod wander;

pub use contention::{ContentionLaws, DurationLaw};
pub use engine::{simulate, SimEnergy, SimOptions, SimRun, T0_NS};
pub use error::WhatIfError;
pub use graph::{Graph, GraphBuilder, GraphTask, Overhead};
pub use output::{
    figures, sim_figures, to_trace, to_trace_with, type_energy, window_energy, DomainEnergy,
    RunFigures, TypeEnergy,
};
pub use platform::{Durations, Factors, Platform, BUILTIN};
/// Stretches as long as the graph, each of enough tasks, that a recording's calibration
/// must span for [`Graph::speed_wander`] to be estimated.
pub use wander::MIN_WINDOWS as MIN_WANDER_WINDOWS;
