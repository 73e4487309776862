//! Misuse and interruption end in a typed error, never a hang or a dead worker
//! (issue 16: "errors, not hangs").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task, MAX_TRACE_CHUNK, MAX_WORKERS};
use taskwatt_traces::{Chunk, TraceSink};

fn rt(workers: usize) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .pin(false)
        .build()
        .unwrap()
}

fn task_records(chunks: &[Chunk]) -> usize {
    chunks
        .iter()
        .map(|c| match c {
            Chunk::Tasks(t) => t.len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn an_interrupted_runtime_stops_within_a_task_and_keeps_what_ran() {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(2)
        .pin(false)
        .trace(sink)
        .build()
        .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let slow = Codelet::new("slow").cpu(move |ctx| {
        std::thread::sleep(Duration::from_millis(5));
        *ctx.rw::<u64>(0) += 1;
        r.fetch_add(1, Ordering::SeqCst);
    });
    let x = rt.register(0u64);
    for _ in 0..400 {
        rt.submit(Task::new(&slow).rw(&x)).unwrap();
    }
    let handle = rt.interrupt_handle();
    let t0 = Instant::now();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(60));
        handle.interrupt();
    });
    let err = rt.wait_all().unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "400 × 5 ms would take 2 s; the interruption cut it short"
    );
    let RuntimeError::Interrupted { finished, not_run } = err else {
        panic!("expected Interrupted, got {err}")
    };
    assert!(
        finished >= 1 && not_run >= 1,
        "{finished} ran, {not_run} not"
    );
    assert_eq!(finished + not_run, 400);
    assert_eq!(finished as usize, ran.load(Ordering::SeqCst));
    assert!(err_text(rt.submit(Task::new(&slow).rw(&x))).contains("interrupted"));
    assert!(rt.is_interrupted());
    let stats = rt.stats();
    assert_eq!(stats.not_run, not_run);
    assert_eq!(stats.cancelled, 0, "not run is not cancelled");
    assert!(matches!(
        rt.shutdown(),
        Err(RuntimeError::Interrupted { .. })
    ));
    let trace = memory.into_trace().unwrap();
    assert_eq!(
        trace.task_count(),
        finished,
        "every task that ran is in the trace"
    );
}

fn err_text<T>(r: Result<T, RuntimeError>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn records_reach_the_sink_within_the_flush_bound_during_a_long_task() {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .pin(false)
        .trace(sink)
        .trace_flush(Duration::from_millis(20))
        .build()
        .unwrap();
    let quick = Codelet::new("quick").cpu(|_| {});
    let long = Codelet::new("long").cpu(|_| std::thread::sleep(Duration::from_millis(600)));
    let first = rt.submit(Task::new(&quick)).unwrap();
    rt.submit(Task::new(&long).after(&first)).unwrap();
    // The worker runs `long` right after `quick` without parking: only the flusher can
    // send `quick`'s record before `long` ends.
    let t0 = Instant::now();
    let mut seen = 0;
    while t0.elapsed() < Duration::from_millis(400) {
        seen = task_records(&memory.chunks());
        if seen > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(seen, 1, "quick's record was sent while long ran");
    rt.wait_all().unwrap();
    drop(rt);
    assert_eq!(memory.into_trace().unwrap().task_count(), 2);
}

struct PanicsOnDrop(&'static str);
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("{}", self.0);
        }
    }
}

#[test]
fn panicking_drops_fail_the_task_or_are_reported_and_the_workers_go_on() {
    let rt = rt(2);
    let noop = Codelet::new("noop").cpu(|_| {});
    // A task argument whose drop panics fails its task.
    rt.submit(Task::new(&noop).arg(Arc::new(PanicsOnDrop("arg drop"))))
        .unwrap();
    let err = rt.wait_all().unwrap_err().to_string();
    assert!(
        err.contains("argument panicked when dropped") && err.contains("arg drop"),
        "{err}"
    );
    // A panic payload whose drop panics.
    let nasty = Codelet::new("nasty").cpu(|_| std::panic::panic_any(PanicsOnDrop("payload")));
    rt.submit(Task::new(&nasty)).unwrap();
    assert!(rt.wait_all().is_err());
    // The last reference to a registered value, dropped on a worker.
    // The task holds the data until the handle is gone, so that the worker drops it.
    let dropped = Arc::new(std::sync::Barrier::new(2));
    let d = dropped.clone();
    let inc = Codelet::new("inc").cpu(move |ctx| {
        let _ = ctx.r::<PanicsOnDrop>(0);
        d.wait();
    });
    let h = rt.register_bytes(PanicsOnDrop("value drop"), 0);
    rt.submit(Task::new(&inc).r(&h)).unwrap();
    drop(h);
    dropped.wait();
    rt.wait_all().unwrap();
    // Still two live workers: two tasks that meet each other.
    let gate = Arc::new(std::sync::Barrier::new(2));
    let g = gate.clone();
    let meet = Codelet::new("meet").cpu(move |_| {
        g.wait();
    });
    rt.submit(Task::new(&meet)).unwrap();
    rt.submit(Task::new(&meet)).unwrap();
    rt.wait_all().unwrap();
    drop(gate);
}

#[test]
fn handles_and_task_handles_belong_to_their_runtime() {
    let (a, b) = (rt(1), rt(1));
    let inc = Codelet::new("inc").cpu(|ctx| *ctx.rw::<u64>(0) += 1);
    let x = a.register(0u64);
    let e = err_text(b.submit(Task::new(&inc).rw(&x)));
    assert!(e.contains("registered with another runtime"), "{e}");
    assert!(err_text(b.acquire(&x)).contains("another runtime"));
    let t = a.submit(Task::new(&inc).rw(&x)).unwrap();
    let e = err_text(b.submit(Task::new(&inc).after(&t)));
    assert!(e.contains("submitted to another runtime"), "{e}");
    assert!(err_text(b.wait(&t)).contains("another runtime"));
    // Neither runtime is left waiting.
    a.wait_all().unwrap();
    b.wait_all().unwrap();
    assert_eq!(b.stats().submitted, 0);
    assert_eq!(*a.acquire(&x).unwrap(), 1);
}

#[test]
fn waits_from_inside_a_task_are_a_deadlock_error() {
    let rt = Arc::new(rt(2));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let x = rt.register(0u64);
    let waits = Codelet::new("waits").cpu(move |ctx| {
        let rt = ctx.arg::<Arc<Runtime>>();
        let mut s = s.lock().unwrap();
        s.push(err_text(rt.wait_all()));
        let h = ctx.r::<taskwatt_runtime::Handle<u64>>(0);
        s.push(err_text(rt.acquire(h)));
    });
    let hh = rt.register_bytes(x.clone(), 0);
    rt.submit(Task::new(&waits).r(&hh).arg(rt.clone())).unwrap();
    rt.wait_all().unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for e in seen.iter() {
        assert!(
            e.contains("would wait forever") && e.contains("inside a task"),
            "{e}"
        );
    }
}

#[test]
fn waits_while_holding_a_guard_they_need_are_a_deadlock_error() {
    let rt = rt(2);
    let inc = Codelet::new("inc").cpu(|ctx| *ctx.rw::<u64>(0) += 1);
    let (x, y) = (rt.register(0u64), rt.register(0u64));
    // Named (untraced: the name is kept all the same), the errors say which handle.
    rt.set_name(&x, "C[0][0]");
    {
        let g = rt.acquire_mut(&x).unwrap();
        // Nothing waits for the guard yet: waiting is fine.
        rt.wait_all().unwrap();
        // A task on x waits for the guard, another on y does not.
        rt.submit(Task::new(&inc).rw(&x)).unwrap();
        let ty = rt.submit(Task::new(&inc).rw(&y)).unwrap();
        rt.wait(&ty).unwrap();
        let e = err_text(rt.wait_all());
        assert!(
            e.contains("wait_all would wait forever") && e.contains("guard"),
            "{e}"
        );
        assert!(e.contains("(`C[0][0]`)"), "{e}");
        let e = err_text(rt.acquire(&x));
        assert!(e.contains("acquire would wait forever"), "{e}");
        // y is not behind the guard.
        assert_eq!(*rt.acquire(&y).unwrap(), 1);
        drop(g);
    }
    rt.wait_all().unwrap();
    {
        let r = rt.acquire(&x).unwrap();
        assert_eq!(*r, 1);
        // A second read guard is fine; a write one, or unregistering, is not.
        assert_eq!(*rt.acquire(&x).unwrap(), 1);
        assert!(err_text(rt.acquire_mut(&x)).contains("already holds"));
        assert!(err_text(rt.unregister(x.clone())).contains("unregister would wait forever"));
    }
    assert_eq!(rt.unregister(x).unwrap(), 1);
}

#[test]
fn absurd_sizes_are_refused_with_the_limit() {
    let e = err_text(Runtime::builder().workers(100_000).build());
    assert!(e.contains(&MAX_WORKERS.to_string()), "{e}");
    let (sink, _m) = TraceSink::memory();
    let e = err_text(
        Runtime::builder()
            .workers(1)
            .trace(sink)
            .trace_chunk(4_000_000_000)
            .build(),
    );
    assert!(e.contains(&MAX_TRACE_CHUNK.to_string()), "{e}");
}
