//! A real written trace, cut and damaged in every way a crash or a bad disk can: the
//! strict reader must name the right offset, recovery must keep every complete chunk,
//! and nothing may panic.

use std::path::{Path, PathBuf};

use taskwatt_traces::*;

fn task(id: u64, worker: u32, start: u64) -> TaskRecord {
    TaskRecord {
        id,
        codelet: (id % 3) as u32,
        arch: Arch::Cpu,
        worker,
        status: TaskStatus::Ok,
        priority: (id % 5) as i32 - 2,
        footprint: 4096 * id,
        submit: Timestamp(start / 2),
        ready: Timestamp(start - 10),
        start: Timestamp(start),
        end: Timestamp(start + 1000 + id),
        preds_start: 0,
        preds_len: 0,
    }
}

/// Writes a small but complete trace; returns its path and the byte offset where each
/// chunk starts, plus the file length.
fn write_sample(dir: &Path) -> (PathBuf, Vec<u64>) {
    let path = dir.join("run.twt");
    let w = TraceWriter::create(&path).unwrap();
    let s = w.sink();
    s.send(Chunk::Meta(RunMeta {
        policy: "lws".into(),
        ..RunMeta::default()
    }));
    s.send(Chunk::Codelets(vec![CodeletInfo {
        id: 0,
        name: "gemm".into(),
        archs: vec![Arch::Cpu],
    }]));
    let mut c = TaskChunk::with_capacity(16, 16);
    for i in 0..40u64 {
        let preds: Vec<u64> = (i.saturating_sub(3)..i).collect();
        c.push(task(i, (i % 2) as u32, 1_000_000 + i * 2000), &preds);
        if c.len() == 16 {
            s.swap_tasks(&mut c);
        }
    }
    s.swap_tasks(&mut c);
    s.send(Chunk::Samples(
        (0..10)
            .map(|i| EnergySample {
                domain: 0,
                t: Timestamp(i * 1_000_000),
                wall_unix_ns: 1_700_000_000_000_000_000 + i,
                energy_j: i as f64 * 0.5,
                raw: i as f64 * 500_000.0,
            })
            .collect(),
    ));
    w.finish().unwrap();

    let mut r = TraceReader::open(&path).unwrap();
    let mut starts = vec![r.offset()];
    while r.next_chunk().unwrap().is_some() {
        starts.push(r.offset());
    }
    (path, starts)
}

/// The chunks of a file read strictly up to its first problem.
fn chunks_of(path: &Path) -> Vec<Chunk> {
    TraceReader::open(path)
        .unwrap()
        .map_while(Result::ok)
        .collect()
}

#[test]
fn every_cut_in_the_last_two_chunks_and_the_header() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let len = bytes.len() as u64;
    assert_eq!(*starts.last().unwrap(), len);
    let all = chunks_of(&path);
    let n = all.len();
    assert!(n >= 7, "Meta, Codelets, 3 Tasks, Samples, End: {n}");

    let cut_path = dir.path().join("cut.twt");
    let first_cut = starts[n - 2];
    let header_cuts = [0u64, 1, 7, 8, 11, 15];
    for cut in header_cuts.into_iter().chain(first_cut..len) {
        std::fs::write(&cut_path, &bytes[..cut as usize]).unwrap();
        // Complete chunks before the cut.
        let complete = starts
            .iter()
            .filter(|&&s| s <= cut)
            .count()
            .saturating_sub(1);
        let at_boundary = starts.contains(&cut);

        let strict = read_trace(&cut_path).unwrap_err();
        match &strict {
            TraceError::Empty { .. } => assert_eq!(cut, 0),
            TraceError::Truncated { offset, .. } if cut < 16 => assert_eq!(*offset, 0),
            TraceError::Truncated {
                offset,
                needed,
                have,
                ..
            } => {
                assert!(!at_boundary, "cut {cut}");
                assert_eq!(*offset, starts[complete], "cut {cut}: {strict}");
                assert_eq!(offset + have, cut, "cut {cut}");
                assert!(needed > have);
            }
            TraceError::CutShort { chunks, .. } => {
                assert!(at_boundary && cut >= 16, "cut {cut}: {strict}");
                assert_eq!(*chunks, complete as u64);
            }
            other => panic!("cut {cut}: unexpected {other}"),
        }

        let rec = recover_trace(&cut_path).unwrap();
        assert_eq!(rec.complete_chunks, complete as u64, "cut {cut}");
        let valid = if cut < 16 { 0 } else { starts[complete] };
        assert_eq!(rec.valid_bytes, valid, "cut {cut}");
        assert!(rec.problem.is_some() && !rec.is_complete());
        assert_eq!(
            rec.trace,
            Trace::from_chunks(all[..complete].iter().cloned()),
            "cut {cut}"
        );
    }
    // Uncut: complete.
    let rec = recover_trace(&path).unwrap();
    assert!(rec.is_complete());
    assert_eq!(rec.complete_chunks, n as u64);
    assert_eq!(rec.trace, read_trace(&path).unwrap());
}

#[test]
fn a_flipped_payload_byte_is_corrupt_at_its_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let bad = dir.path().join("bad.twt");
    // One byte in the middle of each chunk's payload.
    for w in starts.windows(2) {
        let (s, e) = (w[0], w[1]);
        if e - s <= 16 {
            continue;
        }
        let mut b = bytes.clone();
        b[((s + 16 + e) / 2) as usize] ^= 0x40;
        std::fs::write(&bad, &b).unwrap();
        let err = read_trace(&bad).unwrap_err();
        assert!(
            matches!(&err, TraceError::Corrupt { offset, reason, .. } if *offset == s && reason.contains("CRC")),
            "chunk at {s}: {err}"
        );
        let rec = recover_trace(&bad).unwrap();
        assert_eq!(rec.valid_bytes, s);
        // Reading goes on at the next chunk: only the damaged one is lost (a flip a third
        // of the way into a user's trace lost all 816 of its tasks). The End chunk, last,
        // has none after it.
        if e == *starts.last().unwrap() {
            assert!(rec.skipped.is_empty() && rec.trace.end.is_none());
            continue;
        }
        assert_eq!(rec.skipped, [(s, e - s)], "chunk at {s}");
        assert_eq!(rec.complete_chunks, starts.len() as u64 - 2, "chunk at {s}");
        let whole = read_trace(&path).unwrap();
        let lost = whole.task_count() - rec.trace.task_count();
        assert!(lost <= 16, "chunk at {s}: {lost} tasks lost");
        assert!(
            rec.trace.end.is_some(),
            "the End chunk after the damage is read"
        );
    }
}

#[test]
fn a_damaged_chunk_header_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let mut b = std::fs::read(&path).unwrap();
    let s = starts[3] as usize;
    b[s] = b'X'; // chunk magic
    let bad = dir.path().join("bad.twt");
    std::fs::write(&bad, &b).unwrap();
    let err = read_trace(&bad).unwrap_err();
    assert_eq!(err.offset(), Some(s as u64), "{err}");
    assert!(err.to_string().contains("chunk magic"), "{err}");
    // The three chunks before it, and every one after it.
    let rec = recover_trace(&bad).unwrap();
    assert_eq!(rec.valid_bytes, s as u64);
    assert_eq!(rec.skipped, [(starts[3], starts[4] - starts[3])]);
    assert_eq!(rec.complete_chunks, starts.len() as u64 - 2);
}

/// A length field no chunk has: said as such, and the chunks after it are read.
#[test]
fn a_damaged_length_field_is_named_and_stepped_over() {
    let dir = tempfile::tempdir().unwrap();
    let (path, starts) = write_sample(dir.path());
    let mut b = std::fs::read(&path).unwrap();
    let s = starts[1] as usize;
    b[s + 8..s + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let bad = dir.path().join("bad.twt");
    std::fs::write(&bad, &b).unwrap();
    let err = read_trace(&bad).unwrap_err();
    assert!(err.to_string().contains("length field is damaged"), "{err}");
    let rec = recover_trace(&bad).unwrap();
    assert_eq!(rec.skipped, [(starts[1], starts[2] - starts[1])]);
    assert_eq!(
        rec.trace.task_count(),
        read_trace(&path).unwrap().task_count()
    );
}

#[test]
fn a_dropped_writer_leaves_a_cut_short_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ctrl-c.twt");
    {
        let w = TraceWriter::create(&path).unwrap();
        w.sink().send(Chunk::Meta(RunMeta::default()));
        let mut c = TaskChunk::default();
        c.push(task(0, 0, 100), &[]);
        w.sink().swap_tasks(&mut c);
        // Dropped without finish, as on an early return or a panic.
    }
    let e = read_trace(&path).unwrap_err();
    assert!(matches!(e, TraceError::CutShort { chunks: 2, .. }), "{e}");
    let rec = recover_trace(&path).unwrap();
    assert_eq!(rec.trace.task_count(), 1);
    assert!(matches!(rec.problem, Some(TraceError::CutShort { .. })));
}
