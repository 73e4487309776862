//! # taskwatt-traces
//!
//! What a taskwatt run records, and everything that reads or writes it:
//!
//! - the model ([`Chunk`], [`TaskChunk`], [`RunMeta`], energy [`DomainInfo`] and
//!   [`EnergySample`]...) on one process-wide [`Clock`];
//! - the `.twt` file format: a header, then self-delimiting, CRC-checked chunks (binary
//!   for tasks and samples, JSON for metadata); docs/trace-format.md has the layout;
//! - [`TraceWriter`], a background writer fed through cloneable [`TraceSink`]s over a
//!   bounded channel, recycling task buffers ([`TraceSink::swap_tasks`]);
//! - [`TraceReader`] (streaming), [`read_trace`] (strict) and [`recover_trace`] (keeps
//!   every complete chunk of a file cut short);
//! - [`Trace`], a whole trace in memory;
//! - exporters to Chrome trace JSON for Perfetto ([`export_chrome`]) and CSV;
//! - importers from CSV ([`import_csv`]) and StarPU's `tasks.rec` ([`import_starpu`]).
//!
//! ```
//! use taskwatt_traces::*;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("run.twt");
//!
//! let writer = TraceWriter::create(&path)?;
//! let sink = writer.sink(); // clone one per worker
//! sink.send(Chunk::Meta(RunMeta { policy: "eager".into(), ..RunMeta::default() }));
//! sink.send(Chunk::Codelets(vec![CodeletInfo {
//!     id: 0,
//!     name: "gemm".into(),
//!     archs: vec![Arch::Cpu],
//! }]));
//!
//! // A worker records executions into its buffer and hands it over when full.
//! let mut buffer = TaskChunk::with_capacity(1024, 1024);
//! let start = Clock::now();
//! let end = Clock::now();
//! let record = TaskRecord {
//!     id: 0, codelet: 0, arch: Arch::Cpu, worker: 0, status: TaskStatus::Ok,
//!     priority: 0, footprint: 3 * 8 * 256 * 256,
//!     submit: start, ready: start, start, end,
//!     preds_start: 0, preds_len: 0, // set by push
//! };
//! buffer.push(record, &[]);
//! sink.swap_tasks(&mut buffer); // sends it; `buffer` is now empty, capacity kept
//!
//! let summary = writer.finish()?; // writes the End chunk
//! assert_eq!(summary.tasks, 1);
//!
//! let trace = read_trace(&path)?;
//! assert_eq!(trace.task_count(), 1);
//! assert_eq!(trace.codelet_name(0), "gemm");
//! assert_eq!(trace.end.unwrap().tasks, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod atomic;
mod clock;
mod codec;
mod comms;
mod data;
mod error;
mod export;
mod format;
mod import;
mod model;
mod observe;
mod reader;
mod region;
#[cfg(test)]
mod testgen;
mod trace;
mod writer;

pub use atomic::{refuse_output_over_input, same_file, write_atomic, AtomicFile, AtomicPath};
pub use clock::{Clock, Timestamp, CLOCK_ENV};
pub use comms::{ClockSample, CommChunk, CommRecord};
pub use data::*;
pub use error::{FormatVersion, TraceError};
pub use export::{
    export_chrome, export_chrome_with, export_csv_accesses, export_csv_samples, export_csv_tasks,
    export_csv_transfers, export_dot, export_paje, write_chrome, write_chrome_with,
    write_csv_accesses, write_csv_samples, write_csv_tasks, write_csv_transfers, write_dot,
    write_paje, TaskEnergy,
};
pub use format::FORMAT_VERSION;
pub use import::{
    import_csv, import_csv_to, import_starpu, ImportOptions, ImportWritten, ReadProgress,
    StarpuImport, StarpuSkipped, TimeUnit,
};
pub use model::*;
pub use observe::ExecutionObserver;
pub use reader::{
    read_trace, read_trace_without_tasks, recover_trace, Recovered, TaskStream, TraceReader,
};
pub use region::{OpenRegions, Region, REGION_PREFIX};
pub use trace::{Trace, TransferSummary, UNKNOWN_CODELET};
pub use writer::{MemoryTrace, TraceSink, TraceWriter, WriteSummary, WRITER_FLUSH};
