//! # taskwatt-runtime
//!
//! A task-based runtime in the style of StarPU. An application registers data, declares
//! tasks that access it R, W or RW, and submits them; the runtime infers the dependencies
//! in submission order and runs the tasks on worker threads pinned to cores, under a
//! scheduling policy from [`taskwatt_scheduler`]. Every execution is recorded into a
//! [`taskwatt_traces::TraceSink`].
//!
//! ```
//! use taskwatt_runtime::{Codelet, Runtime, Task};
//! use taskwatt_traces::TraceSink;
//!
//! let (sink, memory) = TraceSink::memory();
//! let rt = Runtime::builder().workers(2).policy("lws").trace(sink).build().unwrap();
//!
//! // x = 1; y = x + 1; z = x * 10 (y and z in parallel); x = y + z.
//! let set = Codelet::new("set").cpu(|ctx| *ctx.w::<i64>(0) = 1);
//! let add1 = Codelet::new("add1").cpu(|ctx| *ctx.w::<i64>(1) = ctx.r::<i64>(0) + 1);
//! let mul10 = Codelet::new("mul10").cpu(|ctx| *ctx.w::<i64>(1) = ctx.r::<i64>(0) * 10);
//! let sum = Codelet::new("sum").cpu(|ctx| {
//!     *ctx.w::<i64>(2) = ctx.r::<i64>(0) + ctx.r::<i64>(1)
//! });
//! let (x, y, z) = (rt.register(0i64), rt.register(0i64), rt.register(0i64));
//! rt.submit(Task::new(&set).w(&x)).unwrap();
//! rt.submit(Task::new(&add1).r(&x).w(&y)).unwrap();
//! rt.submit(Task::new(&mul10).r(&x).w(&z)).unwrap();
//! rt.submit(Task::new(&sum).r(&y).r(&z).w(&x)).unwrap();
//! rt.wait_all().unwrap();
//! assert_eq!(*rt.acquire(&x).unwrap(), 12);
//!
//! drop(rt); // flushes the workers' trace buffers
//! let trace = memory.into_trace().unwrap();
//! assert_eq!(trace.task_count(), 4);
//! ```

mod acquire;
mod builder;
mod codelet;
mod completion;
mod context;
mod copies;
mod deadlock;
mod device;
mod error;
mod handle;
mod helper;
mod inline;
mod loom_shim;
mod modes;
mod panics;
mod partition;
mod perfmodel;
mod pipeline;
mod plan;
mod pool;
mod prefetch;
mod reserved;
mod runtime;
mod shared;
mod size;
mod staging;
mod submit;
mod sync;
mod task;
mod topology;
mod tracelog;
mod worker;

pub use acquire::{DeferredAccess, ReadGuard, WriteGuard};
pub use builder::{
    PolicyFactory, RuntimeBuilder, DEFAULT_TRACE_FLUSH, IDLE_ENV, MAX_TRACE_CHUNK, MAX_WORKERS,
};
pub use codelet::{Codelet, ImplFn};
pub use context::{TaskCtx, MAX_ACCESSES};
pub use device::memory::{parse_size, MEMORY_LIMIT_ENV};
pub use device::{
    bytes_of, bytes_of_mut, cuda_device_uuids, format_uuid, DeviceData, Element, GpuBackend,
};
pub use error::{RuntimeError, TaskFailure};
pub use handle::{Access, Handle, ReplicaState, MAX_DEVICES, MAX_MEMORY_NODES};
pub use helper::SUBMITTER_WORKS_ENV;
pub use partition::{Filter, Matrix, MatrixPart, Partition, Partitioned, VectorPart};
pub use perfmodel::{
    Basis, DurationPrediction, Entry as PerfEntry, History, PerfModelError, PerfModels, CALIBRATED,
    PERFMODEL_DIR_ENV,
};
pub use pipeline::PIPELINE_ENV;
pub use runtime::{InterruptHandle, Runtime, MAX_HANDLE_NAME};
pub use shared::RuntimeStats;
pub use size::DataSize;
pub use staging::STAGING_ENV;
pub use task::MAX_RESERVED;
pub use task::{ReadyTask, Task, TaskHandle};
pub use topology::{available_memory_bytes, from_sysfs as topology_from_sysfs, Pu, Topology};

/// The CUDA backend's public parts (cargo feature `cuda`): what a GPU implementation gets
/// ([`TaskCtx::cuda`]), the checks for the driver and cuBLAS, and cudarc itself, for the
/// implementations' own calls.
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use crate::device::cuda::{
        cublas_present, device_count, device_uuids, driver_present, driver_version, CudaTask,
        BUILT_FOR_CUDA, STAGING_ENV,
    };
    pub use cudarc;
}

pub use taskwatt_scheduler as scheduler;
pub use taskwatt_traces as traces;
