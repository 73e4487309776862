//! The background trace writer and the sinks that feed it.
//!
//! Workers and the energy sampler hold [`TraceSink`]s (cheap clones of one handle) and
//! send whole [`Chunk`]s; one writer thread encodes them and appends them to the file
//! through a `BufWriter`. The channel between them is bounded: when the disk falls behind,
//! producers wait instead of the trace piling up in memory, so a run of any length needs
//! only `CHANNEL_CHUNKS` chunks in flight.
//!
//! Task chunks circulate: [`TraceSink::swap_tasks`] sends a worker's full buffer and hands
//! back an empty one taken from a pool that the writer thread refills with the chunks it
//! has encoded (cleared, capacity kept). In steady state no task buffer is allocated.
//!
//! # Order
//! Chunks from one sender are written in the order it sent them (one FIFO channel); chunks
//! from different senders interleave in channel order.
//!
//! # Shutdown
//! 1. [`TraceWriter::finish`] sends a `Finish` message down the same channel, so every chunk
//!    sent before the call (by a thread that happens-before it) is ahead of it.
//! 2. The thread writes those chunks, then an End chunk it computes from what it wrote
//!    (task, failed and sample counts, first start, last end, wall-clock end), flushes the
//!    `BufWriter` and returns its summary or the first error it met.
//! 3. `finish` joins the thread and marks the sinks closed; from then on `send` drops the
//!    chunk and counts it ([`TraceSink::dropped`]), and [`TraceSink::is_enabled`] is false.
//!
//! After an I/O error the thread stops writing but keeps receiving (and counting as dropped)
//! until `Finish`, so that producers never block on a dead writer. Dropping a
//! `TraceWriter` without `finish` flushes what was written and leaves no End chunk: the
//! file then reads as cut short, which is what it is.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::format::{encode_chunk, file_header};
use crate::{
    Chunk, Clock, RunEnd, RunOutcome, TaskChunk, TaskStatus, Timestamp, Trace, TraceError,
};

/// Chunks in flight between the producers and the writer thread.
const CHANNEL_CHUNKS: usize = 64;
/// Empty task chunks kept for reuse.
const POOL_CHUNKS: usize = 64;
/// `BufWriter` capacity. Chunks larger than this go straight to the file in one write.
const BUF_BYTES: usize = 1 << 20;

/// The longest a written chunk stays in the writer's buffer before it reaches the file
/// (the operating system's page cache): the buffer is flushed when the queue runs empty,
/// and at the latest this long after the first unflushed write, however busy the queue.
pub const WRITER_FLUSH: Duration = Duration::from_millis(25);

enum Msg {
    Chunk(Chunk),
    /// Write an End chunk (this one, its counts taken from the tally, or one computed from
    /// the tally with this outcome), flush, return the summary.
    Finish(Option<RunEnd>, RunOutcome),
    /// Flush and return without an End chunk (the writer was dropped).
    Abandon,
}

/// What [`TraceWriter::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteSummary {
    /// The file.
    pub path: PathBuf,
    /// Bytes written, header included.
    pub bytes: u64,
    /// Chunks written, the End chunk included.
    pub chunks: u64,
    /// Task records written.
    pub tasks: u64,
    /// Energy samples written.
    pub samples: u64,
}

/// Writes a `.twt` trace file from a background thread. See the module docs for the
/// shutdown protocol.
pub struct TraceWriter {
    path: PathBuf,
    sink: TraceSink,
    thread: Option<JoinHandle<Result<WriteSummary, TraceError>>>,
}

impl TraceWriter {
    /// Creates (or truncates) `path`, writes the file header and starts the writer thread.
    pub fn create(path: impl AsRef<Path>) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        crate::trace::check_dir_of(&path)?;
        let file = File::create(&path).map_err(|e| TraceError::io(&path, e))?;
        TraceWriter::spawn(path, Box::new(file))
    }

    /// Starts a writer over any byte sink; `path` only names it in errors and summaries.
    pub(crate) fn spawn(
        path: PathBuf,
        out: Box<dyn Write + Send>,
    ) -> Result<TraceWriter, TraceError> {
        let mut out = BufWriter::with_capacity(BUF_BYTES, out);
        // The header goes out now so that an unwritable file fails here, not at finish.
        out.write_all(&file_header())
            .and_then(|()| out.flush())
            .map_err(|e| TraceError::io(&path, e))?;
        let (tx, rx) = crossbeam_channel::bounded(CHANNEL_CHUNKS);
        let (pool_tx, pool_rx) = crossbeam_channel::bounded(POOL_CHUNKS);
        let shared = Arc::new(FileShared {
            tx,
            pool: pool_rx,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let mut state = WriterThread {
            path: path.clone(),
            out,
            rx,
            pool: pool_tx,
            shared: Arc::clone(&shared),
            buf: Vec::new(),
            tally: EndTally::default(),
            bytes: crate::format::FILE_HEADER_LEN as u64,
            chunks: 0,
            error: None,
            dead: false,
            unflushed_since: None,
        };
        let thread = std::thread::Builder::new()
            .name("taskwatt-trace-writer".into())
            .spawn(move || state.run())
            .map_err(|e| TraceError::io(&path, e))?;
        Ok(TraceWriter {
            path,
            sink: TraceSink {
                inner: SinkInner::File(shared),
            },
            thread: Some(thread),
        })
    }

    /// A handle for producers; clone it freely.
    pub fn sink(&self) -> TraceSink {
        self.sink.clone()
    }

    /// Writes everything sent before this call, then an End chunk computed from what the
    /// writer saw (task count, failed count, sample count, first start, last end, wall
    /// end), flushes, joins. Returns the first error the thread met, if any.
    pub fn finish(self) -> Result<WriteSummary, TraceError> {
        self.finish_with_outcome(RunOutcome::Complete)
    }

    /// Like [`finish`](Self::finish), with the End chunk saying how the run ended: a run
    /// that was interrupted or failed must not leave a trace that reads as complete.
    pub fn finish_with_outcome(mut self, outcome: RunOutcome) -> Result<WriteSummary, TraceError> {
        self.stop(Msg::Finish(None, outcome))
    }

    /// Like [`finish`](Self::finish) but writes `end` as the End chunk, its counts taken
    /// from what was written (re-saving a trace keeps its original end, outcome and times).
    pub(crate) fn finish_with(mut self, end: RunEnd) -> Result<WriteSummary, TraceError> {
        let outcome = end.outcome;
        self.stop(Msg::Finish(Some(end), outcome))
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn stop(&mut self, msg: Msg) -> Result<WriteSummary, TraceError> {
        let Some(thread) = self.thread.take() else {
            return Err(TraceError::Closed);
        };
        let SinkInner::File(shared) = &self.sink.inner else {
            unreachable!("a TraceWriter's sink is a file sink");
        };
        // The thread only ends on Finish/Abandon or by panicking; a failed send means the
        // latter, which join reports.
        let _ = shared.tx.send(msg);
        let res = thread.join().unwrap_or(Err(TraceError::Closed));
        shared.closed.store(true, Ordering::Release);
        res
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop(Msg::Abandon);
        }
    }
}

impl std::fmt::Debug for TraceWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// State of the writer thread.
struct WriterThread {
    path: PathBuf,
    out: BufWriter<Box<dyn Write + Send>>,
    rx: Receiver<Msg>,
    pool: Sender<TaskChunk>,
    shared: Arc<FileShared>,
    /// Encoding buffer, reused: header and payload of one chunk, written in one call.
    buf: Vec<u8>,
    tally: EndTally,
    bytes: u64,
    chunks: u64,
    /// The first error met, reported by finish.
    error: Option<TraceError>,
    /// Set by an I/O error: nothing more is written.
    dead: bool,
    /// When the buffer first held bytes not yet flushed to the file.
    unflushed_since: Option<Instant>,
}

impl WriterThread {
    fn run(&mut self) -> Result<WriteSummary, TraceError> {
        let finish = loop {
            // Wake up in time to flush what has waited `WRITER_FLUSH` in the buffer.
            let msg = match self.unflushed_since {
                None => self.rx.recv().map_err(|_| ()),
                Some(t) => {
                    let due = t + WRITER_FLUSH;
                    match self.rx.recv_deadline(due) {
                        Ok(m) => Ok(m),
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                            self.flush();
                            continue;
                        }
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(()),
                    }
                }
            };
            match msg {
                Ok(Msg::Chunk(chunk)) => self.chunk(chunk),
                Ok(Msg::Finish(end, outcome)) => break Some((end, outcome)),
                Ok(Msg::Abandon) | Err(()) => break None,
            }
        };
        if let (Some((end, outcome)), false) = (finish, self.dead) {
            let tally = self.tally.end(Clock::unix_now_ns());
            let end = match end {
                // The counts are what this file holds, so that it reads back.
                Some(end) => RunEnd {
                    tasks: tally.tasks,
                    failed: tally.failed,
                    samples: tally.samples,
                    ..end
                },
                None => RunEnd { outcome, ..tally },
            };
            self.write(&Chunk::End(end));
        }
        if !self.dead {
            if let Err(e) = self.out.flush() {
                self.fail(TraceError::io(&self.path, e));
            }
        }
        if let Some(e) = self.error.take() {
            self.shared.closed.store(true, Ordering::Release);
            return Err(e);
        }
        Ok(WriteSummary {
            path: self.path.clone(),
            bytes: self.bytes,
            chunks: self.chunks,
            tasks: self.tally.tasks,
            samples: self.tally.samples,
        })
    }

    fn chunk(&mut self, chunk: Chunk) {
        if self.dead {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The writer owns the End chunk: it is computed at finish.
        if matches!(chunk, Chunk::End(_)) {
            return;
        }
        if self.write(&chunk) {
            self.tally.add(&chunk);
        }
        if let Chunk::Tasks(mut t) = chunk {
            t.clear();
            // A full pool just means enough spares already; drop this one.
            let _ = self.pool.try_send(t);
        }
        // Flush when idle, so that a crash loses little; under load the buffer fills and
        // is written in large pieces, and `run` flushes it `WRITER_FLUSH` after its first
        // unflushed write at the latest.
        if !self.dead
            && (self.rx.is_empty()
                || self
                    .unflushed_since
                    .is_some_and(|t| t.elapsed() >= WRITER_FLUSH))
        {
            self.flush();
        } else if !self.dead && self.unflushed_since.is_none() {
            self.unflushed_since = Some(Instant::now());
        }
    }

    /// Flushes the buffer to the file.
    fn flush(&mut self) {
        self.unflushed_since = None;
        if !self.dead {
            if let Err(e) = self.out.flush() {
                self.fail(TraceError::io(&self.path, e));
            }
        }
    }

    /// Encodes and writes one chunk; false if it was not written.
    fn write(&mut self, chunk: &Chunk) -> bool {
        self.buf.clear();
        if let Err(reason) = encode_chunk(chunk, &mut self.buf) {
            // One bad chunk does not end the trace, but finish reports it.
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            self.error
                .get_or_insert(TraceError::InvalidChunk { reason });
            return false;
        }
        match self.out.write_all(&self.buf) {
            Ok(()) => {
                self.bytes += self.buf.len() as u64;
                self.chunks += 1;
                true
            }
            Err(e) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                self.fail(TraceError::io(&self.path, e));
                false
            }
        }
    }

    fn fail(&mut self, e: TraceError) {
        self.error.get_or_insert(e);
        self.dead = true;
        self.shared.closed.store(true, Ordering::Release);
    }
}

/// The End chunk's counts, accumulated from chunks as they are written.
#[derive(Clone, Debug, Default)]
pub(crate) struct EndTally {
    tasks: u64,
    failed: u64,
    samples: u64,
    first_start: Option<Timestamp>,
    last_end: Option<Timestamp>,
}

impl EndTally {
    pub(crate) fn add(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::Tasks(t) => {
                for r in &t.records {
                    self.tasks += 1;
                    self.failed += u64::from(r.status == TaskStatus::Failed);
                    self.first_start = Some(self.first_start.map_or(r.start, |s| s.min(r.start)));
                    self.last_end = Some(self.last_end.map_or(r.end, |e| e.max(r.end)));
                }
            }
            Chunk::Samples(s) => self.samples += s.len() as u64,
            _ => {}
        }
    }

    /// The End chunk; first start and last end are zero when there was no task.
    pub(crate) fn end(&self, wall_end_unix_ns: u64) -> RunEnd {
        RunEnd {
            outcome: RunOutcome::Complete,
            tasks: self.tasks,
            failed: self.failed,
            samples: self.samples,
            first_start: self.first_start.unwrap_or(Timestamp::ZERO),
            last_end: self.last_end.unwrap_or(Timestamp::ZERO),
            wall_end_unix_ns,
        }
    }
}

/// What a file sink shares with its writer.
struct FileShared {
    tx: Sender<Msg>,
    /// Empty task chunks the writer has finished with.
    pool: Receiver<TaskChunk>,
    dropped: AtomicU64,
    /// Set when the writer finished or failed.
    closed: AtomicBool,
}

#[derive(Clone)]
enum SinkInner {
    Null,
    Memory(Arc<Mutex<Vec<Chunk>>>),
    File(Arc<FileShared>),
}

/// Where producers send trace chunks: a [`TraceWriter`], memory, or nowhere.
///
/// `Send + Sync + Clone`; a clone is one reference-count increment.
#[derive(Clone)]
pub struct TraceSink {
    inner: SinkInner,
}

impl TraceSink {
    /// A sink that discards everything (tracing off); [`is_enabled`](Self::is_enabled) is
    /// false.
    pub fn null() -> TraceSink {
        TraceSink {
            inner: SinkInner::Null,
        }
    }

    /// A sink that keeps every chunk in memory, for tests and in-process use.
    pub fn memory() -> (TraceSink, MemoryTrace) {
        let chunks = Arc::new(Mutex::new(Vec::new()));
        (
            TraceSink {
                inner: SinkInner::Memory(Arc::clone(&chunks)),
            },
            MemoryTrace { chunks },
        )
    }

    /// Whether chunks sent here go anywhere: false for the null sink and for a file sink
    /// whose writer has finished or failed. Producers may skip building chunks when false.
    pub fn is_enabled(&self) -> bool {
        match &self.inner {
            SinkInner::Null => false,
            SinkInner::Memory(_) => true,
            SinkInner::File(s) => !s.closed.load(Ordering::Acquire),
        }
    }

    /// Sends a chunk. Blocks while the writer's channel is full (back-pressure). Never
    /// panics: when the writer has finished or failed the chunk is dropped and counted.
    ///
    /// End chunks are ignored: the writer computes its own at finish.
    pub fn send(&self, chunk: Chunk) {
        match &self.inner {
            SinkInner::Null => {}
            SinkInner::Memory(m) => {
                if !matches!(chunk, Chunk::End(_)) {
                    lock(m).push(chunk);
                }
            }
            SinkInner::File(s) => {
                if s.tx.send(Msg::Chunk(chunk)).is_err() {
                    s.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Hot path: sends `full` and leaves in its place an empty [`TaskChunk`] with at least
    /// the same capacity, recycled from chunks the writer has already encoded (no
    /// allocation in steady state). On the null sink it only clears `full`.
    pub fn swap_tasks(&self, full: &mut TaskChunk) {
        let mut fresh = match &self.inner {
            SinkInner::Null => {
                full.clear();
                return;
            }
            SinkInner::Memory(_) => TaskChunk::default(),
            SinkInner::File(s) => s.pool.try_recv().unwrap_or_default(),
        };
        // `reserve(n)` on an empty Vec guarantees capacity >= n and allocates only if the
        // recycled chunk is smaller.
        fresh.records.reserve(full.records.capacity());
        fresh.preds.reserve(full.preds.capacity());
        self.send(Chunk::Tasks(mem::replace(full, fresh)));
    }

    /// Chunks dropped because the writer had finished or failed.
    pub fn dropped(&self) -> u64 {
        match &self.inner {
            SinkInner::File(s) => s.dropped.load(Ordering::Relaxed),
            _ => 0,
        }
    }
}

impl std::fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.inner {
            SinkInner::Null => "null",
            SinkInner::Memory(_) => "memory",
            SinkInner::File(_) => "file",
        };
        f.debug_struct("TraceSink").field("kind", &kind).finish()
    }
}

fn lock(m: &Mutex<Vec<Chunk>>) -> MutexGuard<'_, Vec<Chunk>> {
    // A producer that panicked mid-push leaves a valid Vec: poisoning carries no meaning.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The chunks collected by a [`TraceSink::memory`] sink. Clones share them.
#[derive(Clone)]
pub struct MemoryTrace {
    chunks: Arc<Mutex<Vec<Chunk>>>,
}

impl MemoryTrace {
    /// A copy of the chunks sent so far, in order.
    pub fn chunks(&self) -> Vec<Chunk> {
        lock(&self.chunks).clone()
    }

    /// The energy samples sent so far, in order.
    pub fn samples(&self) -> Vec<crate::EnergySample> {
        lock(&self.chunks)
            .iter()
            .filter_map(|c| match c {
                Chunk::Samples(s) => Some(s.iter().copied()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Assembles the chunks into a [`Trace`], with the End chunk a [`TraceWriter`] would
    /// have written now, so that a memory trace and a file trace of the same chunks are
    /// equal but for the wall-clock end.
    pub fn into_trace(self) -> Result<Trace, TraceError> {
        let chunks = match Arc::try_unwrap(self.chunks) {
            Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
            Err(shared) => lock(&shared).clone(),
        };
        let mut tally = EndTally::default();
        chunks.iter().for_each(|c| tally.add(c));
        let mut trace = Trace::from_chunks(chunks);
        trace.end = Some(tally.end(Clock::unix_now_ns()));
        Ok(trace)
    }
}

impl std::fmt::Debug for MemoryTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTrace")
            .field("chunks", &lock(&self.chunks).len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, EnergySample, RunMeta, TaskRecord};
    use std::io;

    pub(crate) fn rec(id: u64, worker: u32, start: u64, end: u64) -> TaskRecord {
        TaskRecord::executed(id, 0, Arch::Cpu, worker, Timestamp(start), Timestamp(end))
    }

    /// A byte sink that fails once `limit` bytes have been written.
    struct FailAfter {
        limit: usize,
        written: usize,
    }
    impl Write for FailAfter {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.written + b.len() > self.limit {
                return Err(io::Error::other("disk full (test)"));
            }
            self.written += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<TraceSink>();
        send_sync::<MemoryTrace>();
        send_sync::<TraceWriter>();
    }

    #[test]
    fn null_sink_discards_and_keeps_capacity() {
        let s = TraceSink::null();
        assert!(!s.is_enabled());
        let mut c = TaskChunk::with_capacity(100, 50);
        c.push(rec(1, 0, 1, 2), &[0]);
        let ptr = c.records.as_ptr();
        s.swap_tasks(&mut c);
        assert!(c.is_empty() && c.preds.is_empty());
        assert_eq!(c.records.as_ptr(), ptr, "null sink must not reallocate");
        s.send(Chunk::Markers(vec![]));
        assert_eq!(s.dropped(), 0);
    }

    #[test]
    fn memory_sink_collects_in_order_and_computes_end() {
        let (s, mem) = TraceSink::memory();
        assert!(s.is_enabled());
        s.send(Chunk::Meta(RunMeta::default()));
        let mut c = TaskChunk::with_capacity(8, 8);
        c.push(rec(0, 0, 10, 20), &[]);
        c.push(rec(1, 0, 5, 30), &[0]);
        s.swap_tasks(&mut c);
        assert!(c.is_empty() && c.records.capacity() >= 8 && c.preds.capacity() >= 8);
        s.send(Chunk::End(RunEnd::default())); // ignored: End belongs to the writer
        s.send(Chunk::Samples(vec![EnergySample {
            domain: 0,
            t: Timestamp(1),
            wall_unix_ns: 0,
            energy_j: 1.0,
            raw: 1.0,
        }]));
        let chunks = mem.chunks();
        assert_eq!(chunks.len(), 3);
        assert!(matches!(chunks[1], Chunk::Tasks(ref t) if t.len() == 2));
        let t = mem.clone().into_trace().unwrap();
        let end = t.end.unwrap();
        assert_eq!((end.tasks, end.samples, end.failed), (2, 1, 0));
        assert_eq!(
            (end.first_start, end.last_end),
            (Timestamp(5), Timestamp(30))
        );
    }

    #[test]
    fn finish_counts_and_later_sends_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let w = TraceWriter::create(dir.path().join("t.twt")).unwrap();
        let s = w.sink();
        assert!(s.is_enabled());
        s.send(Chunk::Meta(RunMeta::default()));
        let mut c = TaskChunk::with_capacity(4, 0);
        for i in 0..10 {
            c.push(rec(i, 0, i, i + 1), &[]);
            if c.len() == 4 {
                s.swap_tasks(&mut c);
            }
        }
        s.swap_tasks(&mut c);
        let sum = w.finish().unwrap();
        // Meta + 3 task chunks + End.
        assert_eq!((sum.chunks, sum.tasks, sum.samples), (5, 10, 0));
        let len = std::fs::metadata(dir.path().join("t.twt")).unwrap().len();
        assert_eq!(sum.bytes, len);
        assert!(!s.is_enabled());
        s.send(Chunk::Markers(vec![]));
        s.swap_tasks(&mut c);
        assert_eq!(s.dropped(), 2);
    }

    #[test]
    fn swap_tasks_recycles_written_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let w = TraceWriter::create(dir.path().join("t.twt")).unwrap();
        let s = w.sink();
        let mut c = TaskChunk::with_capacity(64, 64);
        let mut sent = Vec::new();
        let mut recycled = false;
        for i in 0..2000u64 {
            c.push(rec(i, 0, i, i), &[i]);
            sent.push(c.records.as_ptr() as usize);
            s.swap_tasks(&mut c);
            assert!(c.is_empty() && c.records.capacity() >= 64 && c.preds.capacity() >= 64);
            if sent.contains(&(c.records.as_ptr() as usize)) {
                recycled = true;
                break;
            }
            std::thread::yield_now();
        }
        assert!(recycled, "the writer never handed a chunk back");
        w.finish().unwrap();
    }

    #[test]
    fn io_failure_is_reported_by_finish_and_does_not_block_senders() {
        let w = TraceWriter::spawn(
            "full.twt".into(),
            Box::new(FailAfter {
                limit: 4096,
                written: 0,
            }),
        )
        .unwrap();
        let s = w.sink();
        let mut c = TaskChunk::with_capacity(256, 0);
        // Far more than the channel holds: senders must not block after the failure.
        for i in 0..100_000u64 {
            c.push(rec(i, 0, i, i + 1), &[]);
            if c.len() == 256 {
                s.swap_tasks(&mut c);
            }
        }
        let e = w.finish().unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }), "{e}");
        assert!(e.to_string().contains("full.twt"), "{e}");
        assert!(s.dropped() > 0);
        assert!(!s.is_enabled());
    }

    #[test]
    fn invalid_chunk_is_dropped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let w = TraceWriter::create(dir.path().join("t.twt")).unwrap();
        let mut bad = TaskChunk::default();
        let mut r = rec(0, 0, 0, 1);
        r.preds_len = 3;
        bad.records.push(r);
        w.sink().send(Chunk::Tasks(bad));
        w.sink().send(Chunk::Meta(RunMeta::default()));
        let e = w.finish().unwrap_err();
        assert!(matches!(e, TraceError::InvalidChunk { .. }), "{e}");
        // The chunk after the bad one, and the End, were still written.
        let t = crate::read_trace(dir.path().join("t.twt")).unwrap();
        assert!(t.end.is_some() && t.tasks.is_empty());
    }

    #[test]
    fn create_in_a_missing_directory_names_the_path() {
        let e = TraceWriter::create("/nonexistent-dir/x/t.twt").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/x/t.twt"), "{e}");
        assert!(
            e.to_string()
                .contains("its directory /nonexistent-dir/x does not exist"),
            "{e}"
        );
    }
}
