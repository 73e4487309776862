//! # taskwatt
//!
//! A task-based runtime for Rust in the style of StarPU, with fine-grain energy
//! attribution. Applications are graphs of tasks on registered data; the runtime infers
//! dependencies from R/W/RW accesses, runs the tasks on pinned workers under a scheduling
//! policy, records every execution in a trace and, with the energy crate, samples energy
//! meters into the same trace and attributes power to each task type.
//!
//! This crate is the facade: it re-exports the workspace crates (the built-in applications that the
//! `taskwatt` CLI runs are `taskwatt-apps`, [`apps`]) and holds the measured run.
//!
//! Features: `cli` (default) builds the `taskwatt` command line and what only it needs
//! (clap, indicatif, the Task Bench harness of the `taskwatt-taskbench` crate, ...), and
//! `plots` (in `cli`) the SVG plots of `taskwatt::plots`. A library user turns the
//! default off: `taskwatt = { version = "0.1", default-features = false }`. `hwloc` takes
//! the topology from hwloc, `blas` the tile kernels from the system's BLAS.
//!
//! ```
//! use taskwatt::{Codelet, Runtime, Task};
//!
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let double = Codelet::new("double").cpu(|ctx| *ctx.rw::<u64>(0) *= 2);
//! let x = rt.register(21u64);
//! rt.submit(Task::new(&double).rw(&x)).unwrap();
//! assert_eq!(rt.unregister(x).unwrap(), 42);
//! ```

pub mod compare;
mod dist_measure;
pub mod job;
mod measure;
#[cfg(feature = "plots")]
pub mod plots;
pub mod recording;
pub mod session;

#[doc(inline)]
pub use taskwatt_apps as apps;
#[doc(inline)]
pub use taskwatt_energy as energy;
#[doc(inline)]
pub use taskwatt_kernels as kernels;
#[doc(inline)]
pub use taskwatt_mpi as mpi;
#[doc(inline)]
pub use taskwatt_runtime as runtime;
#[doc(inline)]
pub use taskwatt_scheduler as scheduler;
#[doc(inline)]
pub use taskwatt_traces as traces;
#[doc(inline)]
pub use taskwatt_whatif as whatif;

/// What a user needs from the other crates, on this page: the trace sink, clock and
/// markers, the meter choice, and the one-trace attribution.
pub use taskwatt_energy::attribution::{attribute_trace, AttributionOptions, AttributionReport};
pub use taskwatt_traces::{Clock, Marker, Trace, TraceSink};

pub use dist_measure::{
    rank_path, DistMeasure, DistMeasureError, DistMeasured, DistReport, NodeShare,
};
pub use measure::{EnergyReport, Measure, MeasureError, Measured, MAX_IDLE_CALIBRATION};
pub use session::{AutoCalibrationReport, TypeCalibration};
pub use taskwatt_energy::MeterChoice;
pub use taskwatt_traces::Region;

pub use taskwatt_runtime::{
    Access, Codelet, DataSize, Filter, GpuBackend, Handle, Matrix, MatrixPart, Partitioned,
    PerfModels, Runtime, RuntimeBuilder, RuntimeError, Task, TaskCtx, TaskHandle, VectorPart,
    MAX_ACCESSES,
};
