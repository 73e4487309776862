//! Acquisition, unregistration, waiting on one task, idle parking and drop semantics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use taskwatt_runtime::{Codelet, Runtime, Task};

#[test]
fn acquire_waits_for_writers_and_orders_later_tasks() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let slow_inc = Codelet::new("slow_inc").cpu(|ctx| {
        std::thread::sleep(Duration::from_millis(5));
        *ctx.rw::<u64>(0) += 1;
    });
    let x = rt.register(0u64);
    for _ in 0..5 {
        rt.submit(Task::new(&slow_inc).rw(&x)).unwrap();
    }
    {
        let mut g = rt.acquire_mut(&x).unwrap();
        assert_eq!(*g, 5, "acquire waits for every pending writer");
        *g = 100;
        // A task submitted while the guard lives waits for it.
        rt.submit(Task::new(&slow_inc).rw(&x)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(*g, 100);
    }
    rt.wait_all().unwrap();
    assert_eq!(rt.unregister(x).unwrap(), 101);
}

#[test]
fn acquisitions_are_not_recorded_as_predecessors() {
    use taskwatt_traces::TraceSink;
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder().workers(1).trace(sink).build().unwrap();
    let inc = Codelet::new("inc").cpu(|ctx| *ctx.rw::<u64>(0) += 1);
    let x = rt.register(0u64);
    let first = rt.submit(Task::new(&inc).rw(&x)).unwrap();
    drop(rt.acquire_mut(&x).unwrap());
    let after = rt.submit(Task::new(&inc).rw(&x)).unwrap();
    rt.wait_all().unwrap();
    drop(rt);
    let trace = memory.into_trace().unwrap();
    for (r, preds) in trace.tasks() {
        if r.id == after.id() {
            assert!(preds.iter().all(|p| *p == first.id()), "{preds:?}");
        }
    }
}

#[test]
fn wait_on_one_task() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let sleepy = Codelet::new("sleepy").cpu(|ctx| {
        std::thread::sleep(Duration::from_millis(*ctx.arg::<u64>()));
    });
    let long = rt.submit(Task::new(&sleepy).arg(200u64)).unwrap();
    let short = rt.submit(Task::new(&sleepy).arg(1u64)).unwrap();
    rt.wait(&short).unwrap();
    assert!(short.is_finished());
    assert!(!long.is_finished());
    rt.wait(&long).unwrap();
}

#[test]
fn dropping_with_pending_tasks_runs_them() {
    let done = Arc::new(AtomicU64::new(0));
    {
        let rt = Runtime::builder().workers(2).build().unwrap();
        let d = done.clone();
        let cl = Codelet::new("work").cpu(move |_| {
            std::thread::sleep(Duration::from_micros(200));
            d.fetch_add(1, Ordering::SeqCst);
        });
        let h = rt.register(0u8);
        for _ in 0..50 {
            rt.submit(Task::new(&cl).rw(&h)).unwrap();
        }
    }
    assert_eq!(done.load(Ordering::SeqCst), 50);
}

#[test]
fn a_writer_after_thousands_of_readers_waits_for_every_one() {
    use std::sync::atomic::AtomicUsize;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let read = Codelet::new("read").cpu(move |ctx| {
        let _ = ctx.r::<u64>(0);
        d.fetch_add(1, Ordering::SeqCst);
    });
    let d = done.clone();
    let write = Codelet::new("write").cpu(move |ctx| {
        *ctx.w::<u64>(0) = d.load(Ordering::SeqCst) as u64;
    });
    let x = rt.register(0u64);
    for _ in 0..5000 {
        rt.submit(Task::new(&read).r(&x)).unwrap();
    }
    rt.submit(Task::new(&write).w(&x)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(
        rt.unregister(x).unwrap(),
        5000,
        "the writer ran after all 5000 readers"
    );
}

/// A worker that panics while starting (here a custom policy's `local`) makes `build()`
/// fail with a message, instead of waiting for it forever.
#[test]
fn a_worker_panicking_at_start_fails_the_build() {
    use taskwatt_runtime::scheduler::{Local, Origin, Policy};
    use taskwatt_runtime::ReadyTask;

    struct Broken;
    impl Policy<ReadyTask> for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn local(&self, worker: usize) -> Local {
            if worker == 1 {
                panic!("no state for worker 1");
            }
            Local::none()
        }
        fn push(&self, _task: ReadyTask, _origin: Origin<'_>) {}
        fn pop(&self, _worker: usize, _local: &mut Local) -> Option<ReadyTask> {
            None
        }
    }
    let err = Runtime::builder()
        .workers(2)
        .custom_policy(|_| Box::new(Broken))
        .build()
        .err()
        .expect("build must fail")
        .to_string();
    assert!(err.contains("1 worker(s) panicked while starting"), "{err}");
}
