//! A panicking task fails alone: its dependents are cancelled, `wait_all` names it, and
//! the runtime stays usable. Submit-time errors are reported at submit.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task};

#[test]
fn panicking_task_cancels_dependents_and_runtime_stays_usable() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    let r2 = ran.clone();
    let ok = Codelet::new("ok").cpu(move |_| {
        r2.fetch_add(1, Ordering::SeqCst);
    });
    let boom = Codelet::new("boom").cpu(|ctx| {
        if *ctx.arg::<bool>() {
            panic!("tile is not positive definite");
        }
    });
    let a = rt.register(0u32);
    let b = rt.register(0u32);
    rt.submit(Task::new(&ok).w(&a)).unwrap();
    let bad = rt.submit(Task::new(&boom).rw(&a).arg(true)).unwrap();
    // Two dependents through data, one through an explicit edge, one independent.
    rt.submit(Task::new(&ok).r(&a).w(&b)).unwrap();
    rt.submit(Task::new(&ok).rw(&b)).unwrap();
    rt.submit(Task::new(&ok).after(&bad)).unwrap();
    rt.submit(Task::new(&ok)).unwrap();
    let err = rt.wait_all().unwrap_err();
    match &err {
        RuntimeError::TasksFailed {
            failures,
            cancelled,
        } => {
            assert_eq!(failures.len(), 1);
            assert_eq!(failures[0].task, bad.id());
            assert_eq!(failures[0].codelet, "boom");
            assert!(failures[0].message.contains("not positive definite"));
            assert_eq!(*cancelled, 3);
        }
        other => panic!("unexpected error {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("boom") && msg.contains(&format!("task {}", bad.id())),
        "{msg}"
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2,
        "only the first and the independent task ran"
    );
    assert!(matches!(
        rt.wait(&bad),
        Err(RuntimeError::TasksFailed { .. })
    ));

    // Still usable: the failure was reported once, new work runs, and a task submitted
    // after the failure on the same data runs (the failure cancelled only its dependents
    // at the time).
    rt.submit(Task::new(&ok).rw(&a)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    let stats = rt.stats();
    assert_eq!((stats.failed, stats.cancelled), (1, 3));
}

#[test]
fn waiting_on_a_cancelled_task_says_so() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let boom = Codelet::new("boom").cpu(|_| panic!("no"));
    let ok = Codelet::new("ok").cpu(|_| {});
    let a = rt.register(1u8);
    rt.submit(Task::new(&boom).w(&a)).unwrap();
    let dep = rt.submit(Task::new(&ok).r(&a)).unwrap();
    match rt.wait(&dep) {
        Err(RuntimeError::Cancelled { task, codelet }) => {
            assert_eq!(task, dep.id());
            assert_eq!(codelet, "ok");
        }
        other => panic!("expected Cancelled, got {other:?}"),
    }
    assert!(rt.wait_all().is_err());
}

#[test]
fn codelet_without_implementation_is_rejected_at_submit() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let gpu_only = Codelet::new("gpu_only").gpu(|_| {});
    let err = rt.submit(Task::new(&gpu_only)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RuntimeError::NoImplementation { .. }));
    assert!(
        msg.contains("gpu_only") && msg.contains("gpu") && msg.contains("cpu"),
        "{msg}"
    );
    // Nothing was submitted.
    rt.wait_all().unwrap();
    assert_eq!(rt.stats().submitted, 0);
}

#[test]
fn same_handle_twice_and_unregistered_handles_are_errors() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let cl = Codelet::new("c").cpu(|_| {});
    let a = rt.register(0u8);
    let err = rt.submit(Task::new(&cl).r(&a).w(&a)).unwrap_err();
    assert!(
        matches!(
            err,
            RuntimeError::DuplicateAccess {
                first: 0,
                second: 1,
                ..
            }
        ),
        "{err}"
    );
    let a2 = a.clone();
    assert_eq!(rt.unregister(a).unwrap(), 0);
    let err = rt.submit(Task::new(&cl).r(&a2)).unwrap_err();
    assert!(matches!(err, RuntimeError::Unregistered { .. }), "{err}");
    assert!(rt.acquire(&a2).is_err());
}

#[test]
fn a_handle_read_twice_by_one_task_is_accepted_and_ordered_once() {
    // As StarPU does: both buffers see the same value; the task waits for the writer
    // before it and the writer after it waits for the task, once.
    for gpus in [0, 2] {
        let rt = Runtime::builder()
            .workers(2)
            .emulated_gpus(gpus)
            .build()
            .unwrap();
        let x = rt.register_replicated(vec![1.0f64; 256]);
        let out = rt.register_replicated(vec![0.0f64; 256]);
        let dot = |ctx: &taskwatt_runtime::TaskCtx<'_>| {
            let (a, b) = (ctx.r::<Vec<f64>>(0), ctx.r::<Vec<f64>>(1));
            let d: f64 = a.iter().zip(b).map(|(p, q)| p * q).sum();
            ctx.rw::<Vec<f64>>(2)[0] += d;
        };
        let square = Codelet::new("square").cpu(dot).gpu(dot);
        let double = |ctx: &taskwatt_runtime::TaskCtx<'_>| {
            ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|v| *v *= 2.0)
        };
        let double = Codelet::new("double").cpu(double).gpu(double);
        let mut want = 0.0;
        let mut v = 1.0f64;
        for _ in 0..20 {
            rt.submit(Task::new(&double).rw(&x)).unwrap();
            v *= 2.0;
            rt.submit(Task::new(&square).r(&x).r(&x).rw(&out)).unwrap();
            want += 256.0 * v * v;
        }
        rt.wait_all().unwrap();
        assert_eq!(rt.unregister(out).unwrap()[0], want, "{gpus} GPUs");
        assert_eq!(rt.unregister(x).unwrap(), vec![v; 256]);
        // Written and read: still refused, since the two buffers would alias.
        let y = rt.register(0u8);
        let cl = Codelet::new("c").cpu(|_| {});
        assert!(rt.submit(Task::new(&cl).r(&y).rw(&y)).is_err());
    }
}

#[test]
fn wrong_buffer_use_fails_the_task_with_a_clear_message() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let write_a_read = Codelet::new("write_a_read").cpu(|ctx| {
        *ctx.w::<u32>(0) = 1;
    });
    let wrong_type = Codelet::new("wrong_type").cpu(|ctx| {
        let _ = ctx.r::<String>(0);
    });
    let a = rt.register(0u32);
    rt.submit(Task::new(&write_a_read).r(&a)).unwrap();
    rt.submit(Task::new(&wrong_type).r(&a)).unwrap();
    let RuntimeError::TasksFailed { failures, .. } = rt.wait_all().unwrap_err() else {
        panic!("expected failures");
    };
    let msgs: Vec<&str> = failures.iter().map(|f| f.message.as_str()).collect();
    assert!(msgs.iter().any(|m| m.contains("declared R")), "{msgs:?}");
    assert!(msgs.iter().any(|m| m.contains("holds `u32`")), "{msgs:?}");
    // Where: the codelet's own call, not the library's code.
    assert!(
        msgs.iter()
            .filter(|m| m.contains("holds") || m.contains("declared R"))
            .all(|m| m.contains("failures.rs:")),
        "{msgs:?}"
    );
    assert_eq!(*rt.acquire(&a).unwrap(), 0);
}

#[test]
fn unknown_policy_lists_the_known_ones() {
    let err = Runtime::builder().policy("heft").build().err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("heft")
            && msg.contains("eager")
            && msg.contains("dmda")
            && msg.contains("lws"),
        "{msg}"
    );
}

/// A failed task ends when it panicked: what runs while the panic unwinds (here a guard
/// whose drop takes 60 ms; in a user's run, the backtrace `RUST_BACKTRACE` prints, 155 ms
/// against the task's 120 µs) is not its recorded time, so neither is its energy.
#[test]
fn a_failed_task_ends_when_it_panicked_not_when_the_unwinding_is_over() {
    use std::time::Duration;
    use taskwatt_traces::{TaskStatus, TraceSink};
    struct SlowToDrop;
    impl Drop for SlowToDrop {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(60));
        }
    }
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder().workers(1).trace(sink).build().unwrap();
    let boom = Codelet::new("boom").cpu(|_| {
        let _guard = SlowToDrop;
        std::thread::sleep(Duration::from_millis(2));
        panic!("after 2 ms of work");
    });
    let ok = Codelet::new("ok").cpu(|_| std::thread::sleep(Duration::from_millis(2)));
    // A panic caught earlier on the worker's thread (a data drop) must not be taken for
    // the task's: the successful task first, then the failing one.
    rt.submit(Task::new(&ok)).unwrap();
    let bad = rt.submit(Task::new(&boom)).unwrap();
    assert!(rt.wait_all().is_err());
    drop(rt);
    let trace = memory.into_trace().unwrap();
    let (r, _) = trace
        .tasks()
        .find(|(r, _)| r.id == bad.id())
        .expect("the failed task is recorded");
    assert_eq!(r.status, TaskStatus::Failed);
    let d = r.end.as_ns() - r.start.as_ns();
    assert!(
        (2_000_000..50_000_000).contains(&d),
        "recorded {d} ns: from its start to its panic (2 ms), not to the unwinding's end (62 ms)"
    );
}
