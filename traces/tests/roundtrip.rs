//! Several producers write one trace through the background writer, the way workers and
//! the energy sampler do; the file must read back with every chunk, in each producer's
//! order, and agree with an in-memory sink fed the same chunks.

use std::thread;

use taskwatt_traces::*;

const WORKERS: u32 = 4;
const TASKS_PER_WORKER: u64 = 5_000;
const BUFFER: usize = 128;

fn record(worker: u32, seq: u64) -> TaskRecord {
    let t = seq * 10_000 + u64::from(worker);
    TaskRecord {
        id: seq * u64::from(WORKERS) + u64::from(worker),
        codelet: worker % 2,
        arch: Arch::Cpu,
        worker,
        status: if seq.is_multiple_of(97) {
            TaskStatus::Failed
        } else {
            TaskStatus::Ok
        },
        priority: 0,
        footprint: 1 << 20,
        submit: Timestamp(t),
        ready: Timestamp(t + 1),
        start: Timestamp(t + 2),
        end: Timestamp(t + 5_000),
        preds_start: 0,
        preds_len: 0,
    }
}

/// What every producer sends, through `sink`.
fn produce(sink: &TraceSink) {
    sink.send(Chunk::Meta(RunMeta {
        policy: "eager".into(),
        host: "test".into(),
        ..RunMeta::default()
    }));
    sink.send(Chunk::Codelets(vec![
        CodeletInfo {
            id: 0,
            name: "even".into(),
            archs: vec![Arch::Cpu],
        },
        CodeletInfo {
            id: 1,
            name: "odd".into(),
            archs: vec![Arch::Cpu],
        },
    ]));
    thread::scope(|s| {
        for w in 0..WORKERS {
            let sink = sink.clone();
            s.spawn(move || {
                let mut buf = TaskChunk::with_capacity(BUFFER, BUFFER);
                for seq in 0..TASKS_PER_WORKER {
                    let r = record(w, seq);
                    let pred = r.id.checked_sub(u64::from(WORKERS));
                    buf.push(r, pred.as_slice());
                    if buf.len() == BUFFER {
                        sink.swap_tasks(&mut buf);
                        assert!(buf.records.capacity() >= BUFFER);
                    }
                }
                sink.swap_tasks(&mut buf);
            });
        }
        let sink = sink.clone();
        s.spawn(move || {
            for i in 0..50u64 {
                sink.send(Chunk::Samples(
                    (0..20)
                        .map(|k| EnergySample {
                            domain: (k % 2) as u16,
                            t: Timestamp(i * 1_000_000 + k),
                            wall_unix_ns: i,
                            energy_j: (i * 20 + k) as f64,
                            raw: f64::NAN,
                        })
                        .collect(),
                ));
            }
        });
    });
}

#[test]
fn concurrent_producers_round_trip_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.twt");
    let w = TraceWriter::create(&path).unwrap();
    assert_eq!(w.path(), path);
    produce(&w.sink());
    let sum = w.finish().unwrap();
    let total = u64::from(WORKERS) * TASKS_PER_WORKER;
    assert_eq!(sum.tasks, total);
    assert_eq!(sum.samples, 1000);
    assert_eq!(sum.bytes, std::fs::metadata(&path).unwrap().len());

    let t = read_trace(&path).unwrap();
    assert_eq!(t.task_count(), total);
    assert_eq!(t.meta.policy, "eager");
    assert_eq!(t.codelet_name(1), "odd");
    assert_eq!(t.samples.len(), 1000);
    // Each worker's records come back in the order it produced them.
    for w in 0..WORKERS {
        let seqs: Vec<u64> = t
            .tasks()
            .filter(|(r, _)| r.worker == w)
            .map(|(r, preds)| {
                assert_eq!(*r, {
                    let mut want = record(w, r.id / u64::from(WORKERS));
                    want.preds_start = r.preds_start;
                    want.preds_len = r.preds_len;
                    want
                });
                assert_eq!(preds, r.id.checked_sub(u64::from(WORKERS)).as_slice());
                r.id / u64::from(WORKERS)
            })
            .collect();
        assert_eq!(
            seqs,
            (0..TASKS_PER_WORKER).collect::<Vec<_>>(),
            "worker {w}"
        );
    }
    let end = t.end.clone().unwrap();
    assert_eq!((end.tasks, end.samples), (total, 1000));
    assert_eq!(
        end.failed,
        u64::from(WORKERS) * TASKS_PER_WORKER.div_ceil(97)
    );
    assert_eq!(end.first_start, Timestamp(2));
    assert_eq!(
        end.last_end,
        Timestamp((TASKS_PER_WORKER - 1) * 10_000 + u64::from(WORKERS - 1) + 5_000)
    );

    // The same producers into memory give the same trace, up to chunk interleaving and
    // the wall-clock end.
    let (sink, mem) = TraceSink::memory();
    produce(&sink);
    let m = mem.into_trace().unwrap();
    let mut a: Vec<_> = t.tasks().map(|(r, p)| (r.id, p.to_vec())).collect();
    let mut b: Vec<_> = m.tasks().map(|(r, p)| (r.id, p.to_vec())).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let (me, te) = (m.end.unwrap(), t.end.unwrap());
    assert_eq!(
        (me.tasks, me.failed, me.samples, me.first_start, me.last_end),
        (te.tasks, te.failed, te.samples, te.first_start, te.last_end)
    );
}

#[test]
fn streaming_reader_sees_every_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.twt");
    let w = TraceWriter::create(&path).unwrap();
    produce(&w.sink());
    let sum = w.finish().unwrap();
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.version(), FORMAT_VERSION);
    let chunks: Vec<Chunk> = r.map(Result::unwrap).collect();
    assert_eq!(chunks.len() as u64, sum.chunks);
    assert!(matches!(chunks.first(), Some(Chunk::Meta(_))));
    assert!(matches!(chunks.last(), Some(Chunk::End(_))));
}
