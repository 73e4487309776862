//! Exporters: Chrome trace event JSON (for Perfetto), CSV, the task graph as DOT, and
//! Paje (for ViTE).
//!
//! The `export_*` functions stream from a trace file in two passes: a cheap first pass
//! reads only the metadata chunks (codelet and domain names, workers, markers), stepping
//! over task and sample payloads; the second streams the task and sample chunks one at a
//! time. Memory stays O(metadata + one chunk) whatever the trace's length. A file without
//! an End chunk (an interrupted run) exports fine; a damaged one fails with the reader's
//! error after writing what came before it: export `recover_trace(path)?.trace` with the
//! `write_*` functions instead.
//!
//! The `write_*` functions export a [`Trace`] already in memory.

use std::path::Path;

use crate::format::ChunkKind;
use crate::{Chunk, Trace, TraceError, TraceReader};

mod chrome;
mod csv;
mod dot;
mod paje;

pub use chrome::{export_chrome, export_chrome_with, write_chrome, write_chrome_with, TaskEnergy};
pub use csv::{
    export_csv_accesses, export_csv_samples, export_csv_tasks, export_csv_transfers,
    write_csv_accesses, write_csv_samples, write_csv_tasks, write_csv_transfers,
};
pub use dot::{export_dot, write_dot};
pub use paje::{export_paje, write_paje};

/// The first pass: every chunk but tasks and samples, assembled.
fn read_metadata(path: &Path) -> Result<Trace, TraceError> {
    let mut r = TraceReader::open(path)?;
    let mut t = Trace::default();
    while let Some(c) =
        r.next_chunk_where(|k| !matches!(k, ChunkKind::Tasks | ChunkKind::Samples))?
    {
        t.push(c);
    }
    Ok(t)
}

/// The second pass: hands each chunk of the wanted kinds to `f`, in file order.
fn stream(
    path: &Path,
    want: impl Fn(ChunkKind) -> bool,
    mut f: impl FnMut(Chunk) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let mut r = TraceReader::open(path)?;
    while let Some(c) = r.next_chunk_where(&want)? {
        f(c)?;
    }
    Ok(())
}
