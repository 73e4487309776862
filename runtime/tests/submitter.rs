//! The submitting thread as a worker (`RuntimeBuilder::submitter_works`): it runs tasks
//! while it waits, as the last CPU worker, in the trace as its own worker; it keeps
//! helping after a wait longer than its idle polling; a task it runs cannot wait on the
//! runtime; a panic there fails the task, not the thread.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task};
use taskwatt_traces::{TraceSink, WorkerId};

fn traced(workers: usize, policy: &str) -> (Runtime, taskwatt_traces::MemoryTrace) {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(workers)
        .policy(policy)
        .submitter_works(true)
        .trace(sink)
        .build()
        .unwrap();
    (rt, memory)
}

#[test]
fn with_one_worker_every_task_runs_on_the_waiting_thread_and_is_traced_as_its_worker() {
    for policy in ["eager", "ws", "lws", "prio", "dmda"] {
        let (rt, memory) = traced(1, policy);
        let me = std::thread::current().id();
        let on_me = Arc::new(AtomicU32::new(0));
        let seen = on_me.clone();
        let inc = Codelet::new("inc").cpu(move |ctx| {
            *ctx.rw::<u64>(0) += 1;
            if std::thread::current().id() == me {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        });
        let x = rt.register(0u64);
        let tasks: Vec<_> = (0..100)
            .map(|_| rt.submit(Task::new(&inc).rw(&x)).unwrap())
            .collect();
        // A task's wait runs its predecessors too, and returns once that task is done.
        rt.wait(&tasks[49]).unwrap();
        assert!(tasks[49].is_finished(), "{policy}");
        // An acquisition runs the rest.
        assert_eq!(*rt.acquire(&x).unwrap(), 100, "{policy}");
        rt.wait_all().unwrap();
        assert_eq!(
            on_me.load(Ordering::Relaxed),
            100,
            "{policy}: all on this thread"
        );
        drop(x);
        drop(rt);
        let trace = memory.into_trace().unwrap();
        assert_eq!(trace.meta.workers.len(), 1);
        assert_eq!(
            trace.meta.workers[0].cpu, None,
            "the application's thread is not pinned"
        );
        assert_eq!(
            trace
                .meta
                .params
                .get("submitter_worker")
                .map(String::as_str),
            Some("0"),
            "{policy}"
        );
        assert_eq!(trace.task_count(), 100);
        assert!(trace.tasks().all(|(r, _)| r.worker == 0));
    }
}

#[test]
fn the_helper_keeps_helping_after_waiting_longer_than_its_idle_polling() {
    // A 20 ms task, then 16 tasks of 5 ms that it releases: the helper has parked by
    // the time they are ready (its polling lasts 150 µs), and a push must wake it.
    for policy in ["eager", "lws", "dmda"] {
        let (rt, memory) = traced(2, policy);
        let slow = Codelet::new("slow").cpu(|ctx| {
            std::thread::sleep(Duration::from_millis(20));
            *ctx.rw::<u64>(0) += 1;
        });
        let read = Codelet::new("read").cpu(|ctx| {
            std::thread::sleep(Duration::from_millis(5));
            assert_eq!(*ctx.r::<u64>(0), 1);
        });
        let x = rt.register(0u64);
        rt.submit(Task::new(&slow).rw(&x)).unwrap();
        for _ in 0..16 {
            rt.submit(Task::new(&read).r(&x)).unwrap();
        }
        rt.wait_all().unwrap();
        drop(x);
        drop(rt);
        let trace = memory.into_trace().unwrap();
        let helper: WorkerId = trace.meta.params["submitter_worker"].parse().unwrap();
        assert_eq!(helper, 1, "the last CPU worker");
        let readers_on_helper = trace
            .tasks()
            .filter(|(r, _)| r.worker == helper && trace.codelet_name(r.codelet) == "read")
            .count();
        assert!(
            readers_on_helper >= 4,
            "{policy}: the helper ran {readers_on_helper} of the 16 readers (expected about \
             half): a push after it parked did not wake it"
        );
    }
}

#[test]
fn a_task_on_the_helper_that_waits_on_its_runtime_is_refused_and_a_panic_fails_only_the_task() {
    let rt = Arc::new(
        Runtime::builder()
            .workers(1)
            .submitter_works(true)
            .build()
            .unwrap(),
    );
    let got: Arc<Mutex<Option<Result<(), RuntimeError>>>> = Arc::new(Mutex::new(None));
    let (inner, out) = (Arc::downgrade(&rt), got.clone());
    let waits = Codelet::new("waits").cpu(move |_| {
        if let Some(rt) = inner.upgrade() {
            *out.lock().unwrap() = Some(rt.wait_all());
        }
    });
    rt.submit(Task::new(&waits)).unwrap();
    rt.wait_all().unwrap();
    assert!(
        matches!(
            got.lock().unwrap().take(),
            Some(Err(RuntimeError::Deadlock { .. }))
        ),
        "wait_all inside a task run by the helper must be refused"
    );
    let boom = Codelet::new("boom").cpu(|_| panic!("boom"));
    rt.submit(Task::new(&boom)).unwrap();
    match rt.wait_all() {
        Err(RuntimeError::TasksFailed { failures, .. }) => {
            assert_eq!(failures.len(), 1);
            assert!(failures[0].message.contains("boom"));
        }
        other => panic!("expected the task's failure, got {other:?}"),
    }
    // The thread and the runtime go on.
    let x = rt.register(1u64);
    let dbl = Codelet::new("dbl").cpu(|ctx| *ctx.rw::<u64>(0) *= 2);
    rt.submit(Task::new(&dbl).rw(&x)).unwrap();
    assert_eq!(*rt.acquire(&x).unwrap(), 2);
}

#[test]
fn two_waiting_threads_one_helps_the_other_waits() {
    let rt = Runtime::builder()
        .workers(2)
        .submitter_works(true)
        .build()
        .unwrap();
    let work = Codelet::new("work").cpu(|ctx| {
        std::thread::sleep(Duration::from_micros(200));
        *ctx.rw::<u64>(0) += 1;
    });
    let hs: Vec<_> = (0..4).map(|_| rt.register(0u64)).collect();
    std::thread::scope(|s| {
        for h in &hs {
            let (rt, work) = (&rt, &work);
            s.spawn(move || {
                for _ in 0..50 {
                    rt.submit(Task::new(work).rw(h)).unwrap();
                }
                rt.wait_all().unwrap();
            });
        }
    });
    for h in &hs {
        assert_eq!(*rt.acquire(h).unwrap(), 50);
    }
}

#[test]
fn a_bad_submitter_works_variable_is_an_error_naming_it() {
    // Only this test sets it, on a builder without the option.
    std::env::set_var(taskwatt_runtime::SUBMITTER_WORKS_ENV, "maybe");
    let err = Runtime::builder().workers(1).build().err();
    std::env::remove_var(taskwatt_runtime::SUBMITTER_WORKS_ENV);
    let msg = err.expect("a bad value is refused").to_string();
    assert!(msg.contains("TASKWATT_SUBMITTER_WORKS=maybe"), "{msg}");
}
