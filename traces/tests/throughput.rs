//! Writes and streams back 10 million tasks, to check that the writer keeps up and that
//! neither side holds the trace in memory. Ignored by default (seconds in release, minutes
//! in debug); run with
//! `cargo test -p taskwatt-traces --release --test throughput -- --ignored --nocapture`.

use std::time::Instant;

use taskwatt_traces::*;

const TASKS: u64 = 10_000_000;
const PRODUCERS: u64 = 2;
const BUFFER: usize = 4096;

/// Peak resident memory of this process, in MiB (Linux), else 0.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

#[test]
#[ignore]
fn ten_million_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.twt");
    let t0 = Instant::now();
    let w = TraceWriter::create(&path).unwrap();
    std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let sink = w.sink();
            s.spawn(move || {
                let mut buf = TaskChunk::with_capacity(BUFFER, 2 * BUFFER);
                let mut t = 0u64;
                for i in (p..TASKS).step_by(PRODUCERS as usize) {
                    t += 1_500;
                    let r = TaskRecord {
                        id: i,
                        codelet: (i % 4) as u32,
                        arch: Arch::Cpu,
                        worker: p as u32,
                        status: TaskStatus::Ok,
                        priority: 0,
                        footprint: 786_432,
                        submit: Timestamp(t - 900),
                        ready: Timestamp(t - 300),
                        start: Timestamp(t),
                        end: Timestamp(t + 1_200),
                        preds_start: 0,
                        preds_len: 0,
                    };
                    buf.push(r, &[i.saturating_sub(17), i.saturating_sub(3)]);
                    if buf.len() == BUFFER {
                        sink.swap_tasks(&mut buf);
                    }
                }
                sink.swap_tasks(&mut buf);
            });
        }
    });
    let sum = w.finish().unwrap();
    let write_s = t0.elapsed().as_secs_f64();
    let rss_write = peak_rss_mib();
    assert_eq!(sum.tasks, TASKS);

    let t1 = Instant::now();
    let mut n = 0u64;
    for c in TraceReader::open(&path).unwrap() {
        if let Chunk::Tasks(t) = c.unwrap() {
            n += t.len() as u64;
        }
    }
    let read_s = t1.elapsed().as_secs_f64();
    assert_eq!(n, TASKS);
    println!(
        "write: {TASKS} tasks in {write_s:.2} s ({:.1} M tasks/s), {:.1} MiB, {:.1} bytes/task; \
         stream read: {read_s:.2} s ({:.1} M tasks/s); peak RSS {rss_write:.0} MiB after write, {:.0} MiB after read",
        TASKS as f64 / write_s / 1e6,
        sum.bytes as f64 / (1 << 20) as f64,
        sum.bytes as f64 / TASKS as f64,
        TASKS as f64 / read_s / 1e6,
        peak_rss_mib()
    );
    // The trace is far larger than what may be resident: chunks in flight only.
    assert!(peak_rss_mib() < 200.0, "peak RSS {} MiB", peak_rss_mib());
}
