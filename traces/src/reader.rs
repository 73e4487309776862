//! Reading `.twt` files: a streaming chunk reader, a strict whole-trace read, and
//! recovery of a file cut short or damaged at its tail.
//!
//! The reader holds one chunk's payload at a time, so scanning a trace of any size takes
//! O(largest chunk) memory. It checks, in this order, for each chunk: the 16-byte header is
//! complete, its magic is `TWCK`, the payload is complete, its CRC-32 matches, and the
//! payload decodes. The first failure ends the stream; every chunk before it was complete
//! and verified, which is what [`recover_trace`] relies on.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::format::{
    decode_payload, parse_chunk_header, parse_file_header, ChunkKind, CHUNK_HEADER_LEN,
    FILE_HEADER_LEN, FILE_MAGIC, FORMAT_VERSION,
};
use crate::{Chunk, FormatVersion, RunEnd, Trace, TraceError};

/// Reads a `.twt` file chunk by chunk.
#[derive(Debug)]
pub struct TraceReader {
    path: PathBuf,
    src: BufReader<File>,
    version: FormatVersion,
    /// End of the last complete chunk (or of the header).
    offset: u64,
    /// Complete chunks read, those skipped as unknown included.
    chunks: u64,
    /// Chunks of unknown kinds skipped (files of a newer minor version only).
    skipped: u64,
    /// Set after an error: the stream is over.
    done: bool,
    /// Payload buffer, reused from chunk to chunk.
    payload: Vec<u8>,
    /// The End chunk, once read: nothing may follow it.
    end: Option<RunEnd>,
    /// The file's length when opened: a chunk stepped over must end within it.
    file_len: u64,
    /// What the chunks read so far hold, to check the End chunk's counts against.
    tally: ReadTally,
}

/// Counts of the chunks a reader decoded; a count is unknown (`None`) once a chunk of its
/// kind was stepped over without decoding.
#[derive(Debug, Default)]
struct ReadTally {
    tasks: Option<(u64, u64)>,
    samples: Option<u64>,
    tasks_skipped: bool,
    samples_skipped: bool,
}

/// Reads until `buf` is full or the source ends; returns the bytes read.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl TraceReader {
    /// Opens `path` and checks its header: magic, then major version.
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| TraceError::io(&path, e))?;
        let file_len = file.metadata().map_err(|e| TraceError::io(&path, e))?.len();
        let mut src = BufReader::with_capacity(1 << 16, file);
        let mut h = [0u8; FILE_HEADER_LEN];
        let n = read_full(&mut src, &mut h).map_err(|e| TraceError::io(&path, e))?;
        if n == 0 {
            return Err(TraceError::Empty { path });
        }
        let magic_len = n.min(FILE_MAGIC.len());
        if h[..magic_len] != FILE_MAGIC[..magic_len] {
            return Err(TraceError::NotATrace { path });
        }
        if n < FILE_HEADER_LEN {
            return Err(TraceError::Truncated {
                path,
                offset: 0,
                what: "file header".into(),
                needed: FILE_HEADER_LEN as u64,
                have: n as u64,
            });
        }
        let version =
            parse_file_header(&h).ok_or_else(|| TraceError::NotATrace { path: path.clone() })?;
        if version.major != FORMAT_VERSION.major {
            return Err(TraceError::UnknownVersion {
                path,
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        Ok(TraceReader {
            path,
            src,
            version,
            offset: FILE_HEADER_LEN as u64,
            chunks: 0,
            skipped: 0,
            done: false,
            payload: Vec::new(),
            end: None,
            file_len,
            tally: ReadTally::default(),
        })
    }

    /// A reader of the same file from `offset` on (a chunk boundary found by its magic
    /// past damage), for [`recover_trace`]: the End chunk's counts are not checked
    /// against what it reads (the damaged chunks are not among them).
    fn resume_at(&self, offset: u64) -> Result<TraceReader, TraceError> {
        use std::io::{Seek, SeekFrom};
        let mut file = File::open(&self.path).map_err(|e| self.io(e))?;
        file.seek(SeekFrom::Start(offset)).map_err(|e| self.io(e))?;
        Ok(TraceReader {
            path: self.path.clone(),
            src: BufReader::with_capacity(1 << 16, file),
            version: self.version,
            offset,
            chunks: self.chunks,
            skipped: self.skipped,
            done: false,
            payload: Vec::new(),
            end: None,
            file_len: self.file_len,
            tally: ReadTally {
                tasks_skipped: true,
                samples_skipped: true,
                ..ReadTally::default()
            },
        })
    }

    /// The file's format version.
    pub fn version(&self) -> FormatVersion {
        self.version
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset just past the last complete chunk read (16, the header, at first): the
    /// length of the file's valid prefix so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Complete chunks read so far, including chunks of unknown kinds that were skipped.
    pub fn chunks_read(&self) -> u64 {
        self.chunks
    }

    /// Chunks of kinds this build does not know that were skipped (only in files written
    /// by a newer minor version).
    pub fn chunks_skipped(&self) -> u64 {
        self.skipped
    }

    /// The next chunk, `Ok(None)` at the end of a complete file. After an error the stream
    /// is over and later calls return `Ok(None)`.
    ///
    /// The reader is strict about the file as a whole too: a file that ends without an End
    /// chunk ends with [`TraceError::CutShort`] (after its last chunk was returned), a chunk
    /// after the End chunk is corrupt (two traces concatenated), and the End chunk's task,
    /// failed-task and sample counts must match the chunks before it (a chunk duplicated or
    /// dropped). [`recover_trace`] reads what such a file holds.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, TraceError> {
        self.next_chunk_where(|_| true)
    }

    /// Like [`next_chunk`](Self::next_chunk), but chunks whose kind `want` refuses are
    /// stepped over without reading or checking their payload (exporters use it for a cheap
    /// first pass over the metadata).
    pub(crate) fn next_chunk_where(
        &mut self,
        want: impl Fn(ChunkKind) -> bool,
    ) -> Result<Option<Chunk>, TraceError> {
        if self.done {
            return Ok(None);
        }
        let r = self.read_chunk(&want);
        if r.is_err() {
            self.done = true;
        }
        r
    }

    fn read_chunk(
        &mut self,
        want: &impl Fn(ChunkKind) -> bool,
    ) -> Result<Option<Chunk>, TraceError> {
        loop {
            let start = self.offset;
            let mut h = [0u8; CHUNK_HEADER_LEN];
            let n = read_full(&mut self.src, &mut h).map_err(|e| self.io(e))?;
            if n == 0 {
                if self.end.is_none() {
                    return Err(TraceError::CutShort {
                        path: self.path.clone(),
                        chunks: self.chunks,
                    });
                }
                return Ok(None);
            }
            if self.end.is_some() {
                let kind = ChunkKind::from_u8(h[4]).map_or_else(
                    || format!("chunk of kind {}", h[4]),
                    |k| format!("{} chunk", k.name()),
                );
                return Err(self.corrupt(
                    start,
                    format!("a {kind} after the End chunk (two traces concatenated?)"),
                ));
            }
            if n < CHUNK_HEADER_LEN {
                return Err(TraceError::Truncated {
                    path: self.path.clone(),
                    offset: start,
                    what: "chunk header".into(),
                    needed: CHUNK_HEADER_LEN as u64,
                    have: n as u64,
                });
            }
            let h = parse_chunk_header(&h).map_err(|reason| self.corrupt(start, reason))?;
            let kind = ChunkKind::from_u8(h.kind).filter(|k| k.codec() == h.codec);
            let what = kind.map_or_else(
                || format!("chunk of kind {} (codec {})", h.kind, h.codec),
                |k| format!("{} chunk", k.name()),
            );
            let next = start + CHUNK_HEADER_LEN as u64 + u64::from(h.len);

            // The End chunk is always decoded, to check the counts against it.
            if kind.is_some_and(|k| !want(k) && k != ChunkKind::End) {
                match kind {
                    Some(ChunkKind::Tasks) => self.tally.tasks_skipped = true,
                    Some(ChunkKind::Samples) => self.tally.samples_skipped = true,
                    _ => {}
                }
                if next > self.file_len {
                    // Seeking past the end would not fail: the file is cut in this chunk.
                    return Err(TraceError::Truncated {
                        path: self.path.clone(),
                        offset: start,
                        what,
                        needed: CHUNK_HEADER_LEN as u64 + u64::from(h.len),
                        have: self.file_len.saturating_sub(start),
                    });
                }
                self.src
                    .seek_relative(i64::from(h.len))
                    .map_err(|e| self.io(e))?;
                self.offset = next;
                self.chunks += 1;
                continue;
            }

            self.payload.clear();
            let got = (&mut self.src)
                .take(u64::from(h.len))
                .read_to_end(&mut self.payload)
                .map_err(|e| self.io(e))?;
            if got < h.len as usize {
                return Err(TraceError::Truncated {
                    path: self.path.clone(),
                    offset: start,
                    what,
                    needed: CHUNK_HEADER_LEN as u64 + u64::from(h.len),
                    have: (CHUNK_HEADER_LEN + got) as u64,
                });
            }
            let crc = crc32fast::hash(&self.payload);
            if crc != h.crc {
                return Err(self.corrupt(
                    start,
                    format!(
                        "CRC-32 mismatch in the {what}'s {}-byte payload (stored 0x{:08x}, computed 0x{crc:08x})",
                        h.len, h.crc
                    ),
                ));
            }
            let Some(kind) = kind else {
                if self.version.minor > FORMAT_VERSION.minor {
                    // Forward compatibility: a newer minor may add kinds and codecs.
                    self.offset = next;
                    self.chunks += 1;
                    self.skipped += 1;
                    continue;
                }
                return Err(self.corrupt(
                    start,
                    format!(
                        "unknown {what} in a format {} file (this build reads {FORMAT_VERSION})",
                        self.version
                    ),
                ));
            };
            let chunk = decode_payload(kind, &self.payload).map_err(|e| {
                self.corrupt(start + CHUNK_HEADER_LEN as u64 + e.pos as u64, e.reason)
            })?;
            self.check_counts(start, &chunk)?;
            self.offset = next;
            self.chunks += 1;
            if !want(kind) {
                continue;
            }
            return Ok(Some(chunk));
        }
    }

    /// Adds a decoded chunk to the tally; an End chunk is checked against it.
    fn check_counts(&mut self, start: u64, chunk: &Chunk) -> Result<(), TraceError> {
        let t = &mut self.tally;
        match chunk {
            Chunk::Tasks(c) => {
                let failed = c
                    .records
                    .iter()
                    .filter(|r| r.status == crate::TaskStatus::Failed)
                    .count() as u64;
                let (n, f) = t.tasks.get_or_insert((0, 0));
                *n += c.len() as u64;
                *f += failed;
            }
            Chunk::Samples(s) => *t.samples.get_or_insert(0) += s.len() as u64,
            Chunk::End(end) => {
                let (tasks, failed) = t.tasks.unwrap_or((0, 0));
                let samples = t.samples.unwrap_or(0);
                let mut wrong = Vec::new();
                if !t.tasks_skipped && (tasks, failed) != (end.tasks, end.failed) {
                    wrong.push(format!(
                        "{} task records ({} failed) where the End chunk counts {} ({} failed)",
                        tasks, failed, end.tasks, end.failed
                    ));
                }
                if !t.samples_skipped && samples != end.samples {
                    wrong.push(format!(
                        "{samples} energy samples where the End chunk counts {}",
                        end.samples
                    ));
                }
                if !wrong.is_empty() {
                    return Err(self.corrupt(
                        start,
                        format!(
                            "the file holds {}: a chunk was duplicated or dropped (read what \
                             is there with `taskwatt export --recover`)",
                            wrong.join(" and ")
                        ),
                    ));
                }
                self.end = Some(end.clone());
            }
            _ => {}
        }
        Ok(())
    }

    fn io(&self, e: io::Error) -> TraceError {
        TraceError::io(&self.path, e)
    }

    fn corrupt(&self, offset: u64, reason: String) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            reason,
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Chunk, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_chunk().transpose()
    }
}

/// Reads a whole trace, strictly: any damage, a chunk after the End chunk, or a missing
/// End chunk ([`TraceError::CutShort`]) is an error. Use [`recover_trace`] to get what a
/// damaged file still holds.
pub fn read_trace(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    read_trace_where(path.as_ref(), |_| true)
}

/// Every chunk of the trace at `path` but its tasks, checked as [`read_trace`] checks
/// them: the task chunks are stepped over without decoding (their count is the End
/// chunk's, `trace.end`), for a reader that then streams them with [`TaskStream`]. With
/// the two, a report on 10 M tasks never holds their 720 MB of records.
pub fn read_trace_without_tasks(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    read_trace_where(path.as_ref(), |k| k != ChunkKind::Tasks)
}

/// The chunks `want` keeps of the trace at `path`, strictly (see [`read_trace`]).
fn read_trace_where(path: &Path, want: impl Fn(ChunkKind) -> bool) -> Result<Trace, TraceError> {
    let mut r = TraceReader::open(path)?;
    let mut t = Trace::default();
    // The samples' chunks are kept apart and joined once at the end, into a list of the
    // exact size. Grown by doubling, chunk by chunk, then shrunk, the list was copied about
    // three times and held up to twice its size (a 10 M-task report's peak: 194 MiB now,
    // 205 before; its CPU time did not move).
    let mut samples: Vec<Vec<crate::EnergySample>> = Vec::new();
    loop {
        let at = r.offset();
        let Some(chunk) = r.next_chunk_where(&want)? else {
            break;
        };
        if t.end.is_some() {
            return Err(after_end(&r, at, &chunk));
        }
        match chunk {
            Chunk::Samples(s) => samples.push(s),
            chunk => t.push(chunk),
        }
    }
    if t.end.is_none() {
        return Err(TraceError::CutShort {
            path: r.path,
            chunks: r.chunks,
        });
    }
    t.samples.reserve_exact(samples.iter().map(Vec::len).sum());
    for s in samples {
        t.samples.extend(s);
    }
    // The other lists grew by doubling, chunk by chunk: up to half of each unused (80 MB
    // of a 1 M-task trace's accesses).
    t.accesses.shrink_to_fit();
    t.transfers.shrink_to_fit();
    Ok(t)
}

/// The task records of a trace file, read chunk by chunk: one chunk is in memory at a
/// time. A fault in the file (a corrupt or truncated chunk, task counts that disagree with
/// the End chunk) ends the iteration early; [`TaskStream::finish`] then returns it, so a
/// caller that consumed the stream must call it before trusting what it computed.
pub struct TaskStream {
    reader: TraceReader,
    chunk: Option<crate::TaskChunk>,
    at: usize,
    left: usize,
    error: Option<TraceError>,
}

impl TaskStream {
    /// Streams the tasks of `path`; `expected` is their count, if known (an End chunk's:
    /// it sizes the consumer's work through `size_hint`).
    pub fn open(path: impl AsRef<Path>, expected: u64) -> Result<TaskStream, TraceError> {
        Ok(TaskStream {
            reader: TraceReader::open(path)?,
            chunk: None,
            at: 0,
            left: usize::try_from(expected).unwrap_or(usize::MAX),
            error: None,
        })
    }

    /// The fault that ended the stream early, if any.
    pub fn finish(self) -> Result<(), TraceError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Iterator for TaskStream {
    type Item = crate::TaskRecord;

    fn next(&mut self) -> Option<crate::TaskRecord> {
        loop {
            if let Some(c) = &self.chunk {
                if let Some(r) = c.records.get(self.at) {
                    self.at += 1;
                    self.left = self.left.saturating_sub(1);
                    return Some(*r);
                }
            }
            match self.reader.next_chunk_where(|k| k == ChunkKind::Tasks) {
                Ok(Some(Chunk::Tasks(c))) => {
                    self.chunk = Some(c);
                    self.at = 0;
                }
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, None)
    }
}

fn after_end(r: &TraceReader, at: u64, chunk: &Chunk) -> TraceError {
    r.corrupt(
        at,
        format!(
            "a {} chunk after the End chunk (two traces concatenated?)",
            ChunkKind::of(chunk).name()
        ),
    )
}

/// What [`recover_trace`] could read.
#[derive(Debug)]
pub struct Recovered {
    /// Every complete chunk before the problem, assembled.
    pub trace: Trace,
    /// Complete chunks read.
    pub complete_chunks: u64,
    /// Length of the file's valid prefix, in bytes: truncating the file there leaves a
    /// well-formed (if cut-short) trace.
    pub valid_bytes: u64,
    /// Why reading stopped before a clean end: `None` for a complete trace,
    /// [`TraceError::CutShort`] when every chunk is valid but the End chunk is missing,
    /// otherwise the (first) truncation or corruption met.
    pub problem: Option<TraceError>,
    /// Damaged stretches stepped over, `(offset, bytes)`: after a damaged chunk, reading
    /// goes on at the next chunk whose magic, header and CRC-32 are intact (a few flipped
    /// bytes lost one chunk, not every chunk after it).
    pub skipped: Vec<(u64, u64)>,
}

impl Recovered {
    /// Whether the file was a complete trace.
    pub fn is_complete(&self) -> bool {
        self.problem.is_none()
    }

    /// What was read, for a message: `the 16 complete chunks (162 tasks, 30 energy
    /// readings) before byte 29471`, and the damaged stretches stepped over.
    pub fn summary(&self) -> String {
        let what = format!(
            "{} complete chunks ({} tasks, {} energy readings)",
            self.complete_chunks,
            self.trace.task_count(),
            self.trace.samples.len()
        );
        if self.skipped.is_empty() {
            return format!("the {what} before byte {}", self.valid_bytes);
        }
        let bytes: u64 = self.skipped.iter().map(|s| s.1).sum();
        format!(
            "the {what} around {} damaged stretch(es) stepped over ({bytes} bytes from byte \
             {}): what those held is lost",
            self.skipped.len(),
            self.skipped[0].0
        )
    }
}

/// Reads every complete chunk of a trace that was cut short (a run interrupted, a disk
/// full) or is damaged at its tail. Errors only when the file cannot be opened or is not a
/// trace of a supported version; a file cut inside its header gives an empty trace.
///
/// Recovery stops at the first damaged chunk: chunks after it, if any, are not searched for.
pub fn recover_trace(path: impl AsRef<Path>) -> Result<Recovered, TraceError> {
    let mut r = match TraceReader::open(path) {
        Ok(r) => r,
        Err(e @ (TraceError::Truncated { .. } | TraceError::Empty { .. })) => {
            return Ok(Recovered {
                trace: Trace::default(),
                complete_chunks: 0,
                valid_bytes: 0,
                problem: Some(e),
                skipped: Vec::new(),
            })
        }
        Err(e) => return Err(e),
    };
    let mut trace = Trace::default();
    let mut problem = None;
    let mut valid_bytes = r.offset();
    let mut chunks = 0;
    let mut skipped = Vec::new();
    // Until the first damage, the valid prefix grows with each chunk.
    let mut intact = true;
    loop {
        let at = r.offset();
        match r.next_chunk() {
            Ok(Some(chunk)) => {
                if trace.end.is_some() {
                    problem.get_or_insert(after_end(&r, at, &chunk));
                    break;
                }
                trace.push(chunk);
                if intact {
                    valid_bytes = r.offset();
                }
                chunks = r.chunks_read();
            }
            Ok(None) => {
                if intact {
                    valid_bytes = r.offset();
                }
                chunks = r.chunks_read();
                break;
            }
            Err(e) => {
                let damaged =
                    matches!(e, TraceError::Corrupt { .. } | TraceError::Truncated { .. });
                let resumed = if damaged { resync(&r, at)? } else { None };
                problem.get_or_insert(e);
                intact = false;
                match resumed {
                    Some((next, first, chunk)) => {
                        skipped.push((at, first - at));
                        if trace.end.is_some() {
                            break;
                        }
                        trace.push(chunk);
                        r = next;
                        chunks = r.chunks_read();
                    }
                    None => break,
                }
            }
        }
    }
    if problem.is_none() && trace.end.is_none() {
        problem = Some(TraceError::CutShort {
            path: r.path.clone(),
            chunks,
        });
    }
    Ok(Recovered {
        trace,
        complete_chunks: chunks,
        valid_bytes,
        problem,
        skipped,
    })
}

/// The reader resumed at the first intact chunk after the damaged one at `at`, with that
/// chunk: each later `TWCK` magic is tried until a chunk there reads whole (header, CRC-32,
/// payload); `None` when none does.
fn resync(r: &TraceReader, at: u64) -> Result<Option<(TraceReader, u64, Chunk)>, TraceError> {
    let mut from = at + 1;
    while let Some(pos) = next_magic(&r.path, from).map_err(|e| r.io(e))? {
        let mut next = r.resume_at(pos)?;
        if let Ok(Some(chunk)) = next.next_chunk() {
            return Ok(Some((next, pos, chunk)));
        }
        from = pos + 1;
    }
    Ok(None)
}

/// The offset of the next chunk magic in the file at or after `from`, read in blocks.
fn next_magic(path: &Path, from: u64) -> io::Result<Option<u64>> {
    use crate::format::CHUNK_MAGIC;
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut buf = vec![0u8; 1 << 20];
    // The last bytes of a block, kept so that a magic across two blocks is found.
    let keep = CHUNK_MAGIC.len() - 1;
    let (mut base, mut have) = (from, 0usize);
    loop {
        let n = read_full(&mut f, &mut buf[have..])?;
        let len = have + n;
        if let Some(i) = buf[..len]
            .windows(CHUNK_MAGIC.len())
            .position(|w| w == CHUNK_MAGIC)
        {
            return Ok(Some(base + i as u64));
        }
        if n == 0 || len < CHUNK_MAGIC.len() {
            return Ok(None);
        }
        buf.copy_within(len - keep..len, 0);
        base += (len - keep) as u64;
        have = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_chunk, file_header};
    use crate::{RunEnd, RunMeta};
    use std::io::Write;

    fn header(major: u16, minor: u16) -> Vec<u8> {
        let mut h = file_header().to_vec();
        h[8..10].copy_from_slice(&major.to_le_bytes());
        h[10..12].copy_from_slice(&minor.to_le_bytes());
        h
    }

    /// A chunk of a kind format 1.0 does not have.
    fn alien_chunk() -> Vec<u8> {
        let payload = b"from the future";
        let mut c = b"TWCK".to_vec();
        c.extend_from_slice(&[99, 7, 0, 0]);
        c.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        c.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        c.extend_from_slice(payload);
        c
    }

    fn file_with(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn three_chunks(minor: u16) -> (Vec<u8>, u64) {
        let mut b = header(1, minor);
        encode_chunk(&Chunk::Meta(RunMeta::default()), &mut b).unwrap();
        let alien_at = b.len() as u64;
        b.extend_from_slice(&alien_chunk());
        encode_chunk(&Chunk::End(RunEnd::default()), &mut b).unwrap();
        (b, alien_at)
    }

    #[test]
    fn unknown_kind_in_a_newer_minor_is_skipped() {
        let (b, _) = three_chunks(FORMAT_VERSION.minor + 1);
        let f = file_with(&b);
        let mut r = TraceReader::open(f.path()).unwrap();
        assert_eq!(r.version().minor, FORMAT_VERSION.minor + 1);
        let kinds: Vec<_> = r.by_ref().map(|c| ChunkKind::of(&c.unwrap())).collect();
        assert_eq!(kinds, [ChunkKind::Meta, ChunkKind::End]);
        assert_eq!((r.chunks_read(), r.chunks_skipped()), (3, 1));
        assert_eq!(r.offset(), b.len() as u64);
        assert!(read_trace(f.path()).unwrap().end.is_some());
    }

    #[test]
    fn unknown_kind_in_our_own_minor_is_corrupt() {
        let (b, alien_at) = three_chunks(FORMAT_VERSION.minor);
        let f = file_with(&b);
        let e = read_trace(f.path()).unwrap_err();
        assert_eq!(e.offset(), Some(alien_at), "{e}");
        assert!(e.to_string().contains("kind 99"), "{e}");
        let rec = recover_trace(f.path()).unwrap();
        assert_eq!((rec.complete_chunks, rec.valid_bytes), (2, alien_at));
        // The chunk is stepped over: the End chunk after it is read.
        let alien_len = alien_chunk().len() as u64;
        assert_eq!(rec.skipped, [(alien_at, alien_len)]);
        assert!(rec.trace.end.is_some());
    }

    #[test]
    fn other_major_and_wrong_magic_are_refused() {
        let f = file_with(&header(2, 0));
        let e = TraceReader::open(f.path()).unwrap_err();
        assert!(
            matches!(e, TraceError::UnknownVersion { found, .. } if found == FormatVersion { major: 2, minor: 0 }),
            "{e}"
        );
        assert!(recover_trace(f.path()).is_err());
        for bad in [&b"PK\x03\x04 zip file"[..], b"TWTRACX\0\x01\0\0\0\0\0\0\0"] {
            let f = file_with(bad);
            let e = TraceReader::open(f.path()).unwrap_err();
            assert!(matches!(e, TraceError::NotATrace { .. }), "{e}");
        }
    }

    #[test]
    fn missing_file_is_io_with_path() {
        let e = read_trace("/no/such/trace.twt").unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }), "{e}");
        assert!(e.to_string().contains("/no/such/trace.twt"));
    }

    #[test]
    fn chunk_after_end_is_an_error() {
        let mut b = header(1, 0);
        encode_chunk(&Chunk::End(RunEnd::default()), &mut b).unwrap();
        let at = b.len() as u64;
        encode_chunk(&Chunk::Markers(vec![]), &mut b).unwrap();
        let f = file_with(&b);
        let e = read_trace(f.path()).unwrap_err();
        assert_eq!(e.offset(), Some(at));
        let rec = recover_trace(f.path()).unwrap();
        assert!(rec.trace.end.is_some());
        assert_eq!((rec.complete_chunks, rec.valid_bytes), (1, at));
    }

    #[test]
    fn filtered_reads_step_over_payloads() {
        let mut b = header(1, 0);
        encode_chunk(&Chunk::Meta(RunMeta::default()), &mut b).unwrap();
        encode_chunk(&Chunk::Samples(vec![]), &mut b).unwrap();
        encode_chunk(&Chunk::End(RunEnd::default()), &mut b).unwrap();
        let f = file_with(&b);
        let mut r = TraceReader::open(f.path()).unwrap();
        let mut kinds = Vec::new();
        while let Some(c) = r
            .next_chunk_where(|k| k != ChunkKind::Samples && k != ChunkKind::Meta)
            .unwrap()
        {
            kinds.push(ChunkKind::of(&c));
        }
        assert_eq!(kinds, [ChunkKind::End]);
        assert_eq!(r.chunks_read(), 3);
    }
}
