//! Idle workers park: an empty runtime burns no CPU. (Its own test binary, so that no
//! other test's threads add CPU time.)

use std::time::Duration;

/// The tests of this file one at a time: the CPU time measured is the whole process's, and
/// the others' workers would add theirs (a failure in CI: 60 ms in 300 ms, at the bound).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

use taskwatt_runtime::{Codelet, Runtime, Task};

#[test]
fn idle_workers_park_instead_of_spinning() {
    let _one = one_at_a_time();
    let rt = Runtime::builder().workers(2).build().unwrap();
    // Give the workers time to finish their spin budget and park.
    std::thread::sleep(Duration::from_millis(50));
    let before = process_cpu_ns();
    std::thread::sleep(Duration::from_millis(300));
    let used = process_cpu_ns() - before;
    // Two spinning workers would burn ~600 ms of CPU here; parked ones burn ~0.
    assert!(
        used < 60_000_000,
        "idle runtime used {} ms of CPU in 300 ms",
        used / 1_000_000
    );
    // And they wake up for new work.
    let cl = Codelet::new("c").cpu(|_| {});
    rt.submit(Task::new(&cl)).unwrap();
    rt.wait_all().unwrap();
}

/// CPU time of this process (utime + stime), from /proc/self/stat.
fn process_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    ticks * 10_000_000 // USER_HZ = 100 on Linux
}

/// A worker sends its partial trace buffer when it parks: the records reach the sink while
/// the runtime is still up, without a shutdown.
#[test]
fn parked_workers_send_their_trace_records() {
    let _one = one_at_a_time();
    use taskwatt_traces::{Chunk, TraceSink};

    let (sink, mem) = TraceSink::memory();
    let rt = Runtime::builder().workers(2).trace(sink).build().unwrap();
    let cl = Codelet::new("c").cpu(|_| {});
    for _ in 0..10 {
        rt.submit(Task::new(&cl)).unwrap();
    }
    rt.wait_all().unwrap();
    let recorded = |mem: &taskwatt_traces::MemoryTrace| {
        mem.chunks()
            .iter()
            .map(|c| match c {
                Chunk::Tasks(t) => t.len(),
                _ => 0,
            })
            .sum::<usize>()
    };
    // Once the workers have polled and parked, with the runtime still up.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while recorded(&mem) < 10 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(recorded(&mem), 10, "records still held by parked workers");
    drop(rt);
}

/// An idle budget of `Duration::MAX` (never park) runs tasks and shuts down: the spin
/// and yield budgets are added without overflowing (issue 29: a worker panicked with
/// "overflow when adding durations", and the tasks left to it never ran).
#[test]
fn an_unbounded_idle_budget_never_overflows() {
    let _one = one_at_a_time();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder()
            .workers(2)
            .idle(Duration::MAX, Duration::MAX)
            .build()
            .unwrap();
        let cl = Codelet::new("c").cpu(|_| {});
        // Rounds apart, so that the workers go idle between them.
        for _ in 0..3 {
            for _ in 0..50 {
                rt.submit(Task::new(&cl)).unwrap();
            }
            rt.wait_all().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(rt);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the runtime with an unbounded idle budget finished its rounds and shut down");
}
