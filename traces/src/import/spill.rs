//! Imported task records past the import's memory budget, sorted into runs in a temporary
//! file and merged back worker by worker (an external merge sort). It keeps the import to a
//! file in bounded memory whatever the number of tasks: the budget, plus one read buffer per
//! run while a worker's chunks are made.
//!
//! The file is anonymous (`tempfile::tempfile_in`): it is created beside the output, holds
//! 32 bytes per spilled task and 8 per spilled id, and the system removes it when it is
//! closed, whether the import ends or fails.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::{TaskId, TraceError};

/// A task as kept until the end of the input: what `TaskRecord::executed` does not fill
/// with its defaults is in the builder's `extras`.
#[derive(Clone, Copy)]
pub(super) struct Rec {
    pub(super) id: TaskId,
    pub(super) start: u64,
    pub(super) end: u64,
    /// The codelet id times 2, plus the architecture's index (CPU 0, GPU 1).
    pub(super) codelet_arch: u32,
    /// Index in the builder's `extras`, or `u32::MAX`.
    pub(super) extra: u32,
}

/// Bytes of a [`Rec`], in memory and in the spill file.
pub(super) const RECORD_BYTES: usize = 32;
const _: () = assert!(std::mem::size_of::<Rec>() == RECORD_BYTES);

/// Records read at once from one run.
const READ_RECORDS: usize = 2048;

/// A sorted run of one worker's records, or of ids, in the file.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    offset: u64,
    count: u64,
}

/// The temporary file and where the next run goes.
pub(super) struct Spill {
    /// The directory it is in, to name in errors.
    dir: PathBuf,
    out: BufWriter<File>,
    /// The same file, read with positioned reads once written.
    file: File,
    len: u64,
}

impl Spill {
    /// A new temporary file in `dir`.
    pub(super) fn new(dir: &Path) -> Result<Spill, TraceError> {
        let err = |e| spill_err(dir, e);
        let file = tempfile::tempfile_in(dir).map_err(err)?;
        let out = BufWriter::with_capacity(1 << 16, file.try_clone().map_err(err)?);
        Ok(Spill {
            dir: dir.to_path_buf(),
            out,
            file,
            len: 0,
        })
    }

    /// Bytes written so far.
    pub(super) fn bytes(&self) -> u64 {
        self.len
    }

    /// Writes the records of `blocks` as one run in [`key`] order: each block is sorted,
    /// then they are merged (no copy of them all in one place) and freed.
    pub(super) fn write_records(&mut self, blocks: Vec<Vec<Rec>>) -> Result<Segment, TraceError> {
        let mut seg = Segment {
            offset: self.len,
            count: 0,
        };
        let mut buf = [0u8; RECORD_BYTES];
        let mut m = RecMerge::new(Vec::new(), blocks);
        while let Some(r) = m.next()? {
            encode(&r, &mut buf);
            self.out
                .write_all(&buf)
                .map_err(|e| spill_err(&self.dir, e))?;
            seg.count += 1;
        }
        self.len += seg.count * RECORD_BYTES as u64;
        Ok(seg)
    }

    /// Writes `ids`, already sorted, as one run.
    pub(super) fn write_ids(&mut self, ids: &[u64]) -> Result<Segment, TraceError> {
        let seg = Segment {
            offset: self.len,
            count: ids.len() as u64,
        };
        for id in ids {
            self.out
                .write_all(&id.to_le_bytes())
                .map_err(|e| spill_err(&self.dir, e))?;
        }
        self.len += (ids.len() * 8) as u64;
        Ok(seg)
    }

    /// Makes everything written readable.
    pub(super) fn flush(&mut self) -> Result<(), TraceError> {
        self.out.flush().map_err(|e| spill_err(&self.dir, e))
    }

    /// The records of `runs` and of the blocks `mem`, merged in [`key`] order.
    /// [`Spill::flush`] first.
    pub(super) fn merge(&self, runs: &[Segment], mem: Vec<Vec<Rec>>) -> RecMerge<'_> {
        let readers = runs
            .iter()
            .map(|&s| Reader::new(self, s, RECORD_BYTES))
            .collect();
        RecMerge::new(readers, mem)
    }

    /// The smallest id found twice in `runs`, `mem` (each sorted) and `range` (the ids
    /// `first..=last`, once each). [`Spill::flush`] first.
    pub(super) fn duplicate_id(
        &self,
        runs: &[Segment],
        mem: &[u64],
        range: Option<(u64, u64)>,
    ) -> Result<Option<u64>, TraceError> {
        let in_range = |id: u64| range.is_some_and(|(a, b)| (a..=b).contains(&id));
        let mut readers: Vec<Reader> = runs.iter().map(|&s| Reader::new(self, s, 8)).collect();
        let mut heap = BinaryHeap::new();
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(b) = r.next()? {
                heap.push(Reverse((id_of(b), i)));
            }
        }
        let mut mem = mem.iter();
        let mem_src = readers.len();
        if let Some(&id) = mem.next() {
            heap.push(Reverse((id, mem_src)));
        }
        let mut last = None;
        while let Some(Reverse((id, src))) = heap.pop() {
            if last == Some(id) || in_range(id) {
                return Ok(Some(id));
            }
            last = Some(id);
            let next = if src == mem_src {
                mem.next().copied()
            } else {
                readers[src].next()?.map(id_of)
            };
            if let Some(n) = next {
                heap.push(Reverse((n, src)));
            }
        }
        Ok(None)
    }
}

fn id_of(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

fn spill_err(dir: &Path, e: std::io::Error) -> TraceError {
    TraceError::Io {
        path: dir.to_path_buf(),
        source: std::io::Error::new(
            e.kind(),
            format!(
                "{e} (a temporary file of the import's sorted tasks, 32 bytes per task \
                 beyond the import's memory budget, is written in the output's directory: \
                 free space there, or raise the budget (`taskwatt import --task-memory`, \
                 `ImportOptions::task_memory`))"
            ),
        ),
    }
}

/// A record's place in its worker's order: end, start, id.
type Key = (u64, u64, u64);

/// The order of a worker's records in the trace.
pub(super) fn key(r: &Rec) -> Key {
    (r.end, r.start, r.id)
}

fn encode(r: &Rec, b: &mut [u8; RECORD_BYTES]) {
    b[0..8].copy_from_slice(&r.id.to_le_bytes());
    b[8..16].copy_from_slice(&r.start.to_le_bytes());
    b[16..24].copy_from_slice(&r.end.to_le_bytes());
    b[24..28].copy_from_slice(&r.codelet_arch.to_le_bytes());
    b[28..32].copy_from_slice(&r.extra.to_le_bytes());
}

fn decode(b: &[u8]) -> Rec {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Rec {
        id: u64_at(0),
        start: u64_at(8),
        end: u64_at(16),
        codelet_arch: u32_at(24),
        extra: u32_at(28),
    }
}

/// Reads one run in blocks with positioned reads (the runs share the file).
struct Reader<'a> {
    spill: &'a Spill,
    next_offset: u64,
    /// Items of the run not yet read from the file.
    left: u64,
    item: usize,
    buf: Vec<u8>,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(spill: &'a Spill, s: Segment, item: usize) -> Self {
        Reader {
            spill,
            next_offset: s.offset,
            left: s.count,
            item,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The next item's bytes.
    fn next(&mut self) -> Result<Option<&[u8]>, TraceError> {
        if self.pos == self.buf.len() {
            if self.left == 0 {
                return Ok(None);
            }
            let n = self
                .left
                .min((READ_RECORDS * RECORD_BYTES / self.item) as u64) as usize;
            self.buf.resize(n * self.item, 0);
            read_exact_at(&self.spill.file, &mut self.buf, self.next_offset)
                .map_err(|e| spill_err(&self.spill.dir, e))?;
            self.next_offset += self.buf.len() as u64;
            self.left -= n as u64;
            self.pos = 0;
        }
        let b = &self.buf[self.pos..self.pos + self.item];
        self.pos += self.item;
        Ok(Some(b))
    }
}

#[cfg(unix)]
fn read_exact_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(f: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(f, buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One worker's records from its runs and from memory, in [`key`] order.
pub(super) struct RecMerge<'a> {
    readers: Vec<Reader<'a>>,
    /// Blocks in memory, each sorted; the sources after the readers.
    mem: Vec<std::vec::IntoIter<Rec>>,
    /// The sources other than `cur`, by their next record's key.
    heap: BinaryHeap<Reverse<(Key, usize)>>,
    /// The source whose record comes next. It stays out of the heap while its records
    /// come before every other source's: a worker's rows that came in time order make
    /// runs that follow each other, and are then merged without a heap operation.
    cur: Option<usize>,
    /// Each source's next record.
    heads: Vec<Option<Rec>>,
    started: bool,
}

impl<'a> RecMerge<'a> {
    /// Merges the runs `readers` reads and the blocks `mem`, which it sorts.
    fn new(readers: Vec<Reader<'a>>, mem: Vec<Vec<Rec>>) -> Self {
        let heads = vec![None; readers.len() + mem.len()];
        RecMerge {
            readers,
            mem: mem
                .into_iter()
                .map(|mut b| {
                    b.sort_unstable_by_key(key);
                    b.into_iter()
                })
                .collect(),
            heap: BinaryHeap::new(),
            cur: None,
            heads,
            started: false,
        }
    }

    fn pull(&mut self, src: usize) -> Result<Option<Rec>, TraceError> {
        let next = match src.checked_sub(self.readers.len()) {
            Some(m) => self.mem[m].next(),
            None => self.readers[src].next()?.map(decode),
        };
        self.heads[src] = next;
        Ok(next)
    }

    /// The next record.
    pub(super) fn next(&mut self) -> Result<Option<Rec>, TraceError> {
        if !self.started {
            self.started = true;
            for src in 0..self.heads.len() {
                if let Some(r) = self.pull(src)? {
                    self.heap.push(Reverse((key(&r), src)));
                }
            }
            self.cur = self.heap.pop().map(|Reverse((_, s))| s);
        }
        let Some(src) = self.cur else {
            return Ok(None);
        };
        let r = self.heads[src].take();
        match self.pull(src)? {
            Some(n) if self.heap.peek().is_none_or(|Reverse((k, _))| key(&n) <= *k) => {}
            Some(n) => {
                self.heap.push(Reverse((key(&n), src)));
                self.cur = self.heap.pop().map(|Reverse((_, s))| s);
            }
            None => self.cur = self.heap.pop().map(|Reverse((_, s))| s),
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, end: u64) -> Rec {
        Rec {
            id,
            start: end / 2,
            end,
            codelet_arch: (id % 7) as u32,
            extra: u32::MAX,
        }
    }

    #[test]
    fn runs_and_memory_merge_in_key_order() {
        // Runs interleaved in time, then runs that follow each other (a worker's rows in
        // time order), each longer than one read buffer.
        for interleaved in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = Spill::new(dir.path()).unwrap();
            let mut all = Vec::new();
            let mut runs = Vec::new();
            for k in 0..3u64 {
                let end = |i: u64| {
                    if interleaved {
                        i * 3 + k
                    } else {
                        k * 100_000 + i
                    }
                };
                // Blocks of up to 1000 in reverse order, unsorted within.
                let r: Vec<Rec> = (0..5000)
                    .rev()
                    .map(|i| rec(k * 10_000 + i, end(i)))
                    .collect();
                all.extend(r.iter().copied());
                runs.push(
                    s.write_records(r.chunks(1000).map(<[Rec]>::to_vec).collect())
                        .unwrap(),
                );
            }
            let mem: Vec<Rec> = (0..10).rev().map(|i| rec(90_000 + i, i * 1000)).collect();
            all.extend(mem.iter().copied());
            let mem = vec![mem[..4].to_vec(), Vec::new(), mem[4..].to_vec()];
            s.flush().unwrap();
            let mut m = s.merge(&runs, mem);
            let mut got = Vec::new();
            while let Some(r) = m.next().unwrap() {
                got.push(r);
            }
            assert!(m.next().unwrap().is_none());
            all.sort_unstable_by_key(key);
            let fields = |r: &Rec| (r.id, r.start, r.end, r.codelet_arch, r.extra);
            assert_eq!(
                got.iter().map(fields).collect::<Vec<_>>(),
                all.iter().map(fields).collect::<Vec<_>>(),
                "interleaved {interleaved}"
            );
        }
    }

    #[test]
    fn a_duplicate_id_is_found_across_runs_and_memory() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spill::new(dir.path()).unwrap();
        let a: Vec<u64> = (0..3000).map(|i| i * 2).collect();
        let b: Vec<u64> = (0..3000).map(|i| i * 2 + 1).collect();
        let runs = [s.write_ids(&a).unwrap(), s.write_ids(&b).unwrap()];
        s.flush().unwrap();
        assert_eq!(s.duplicate_id(&runs, &[6001, 7000], None).unwrap(), None);
        assert_eq!(s.duplicate_id(&runs, &[4321], None).unwrap(), Some(4321));
        assert_eq!(s.duplicate_id(&runs[..1], &[], None).unwrap(), None);
        let range = Some((10_000, 20_000));
        assert_eq!(s.duplicate_id(&runs, &[9999, 20_001], range).unwrap(), None);
        assert_eq!(
            s.duplicate_id(&runs, &[9999, 20_000], range).unwrap(),
            Some(20_000)
        );
        assert_eq!(
            s.duplicate_id(&runs[1..], &[], Some((5, 9))).unwrap(),
            Some(5)
        );
    }

    #[test]
    fn a_missing_directory_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let e = Spill::new(&gone).err().expect("no directory");
        let text = e.to_string();
        assert!(text.contains("gone"), "{text}");
        assert!(text.contains("temporary file"), "{text}");
    }
}
