//! Deferred acquisitions: linked in submission order, granted later, released by whoever
//! holds them (taskwatt-mpi's communication thread).

use std::time::{Duration, Instant};

use taskwatt_runtime::{Codelet, Runtime, Task};

fn wait_granted(a: &taskwatt_runtime::DeferredAccess) {
    let t = Instant::now();
    while !a.is_granted() {
        assert!(t.elapsed() < Duration::from_secs(10), "never granted");
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn a_deferred_write_orders_tasks_around_it_and_its_bytes_are_the_holders() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let h = rt.register(vec![1.0f64; 4]);
    let add = Codelet::new("add").cpu(|ctx| {
        for x in ctx.rw::<Vec<f64>>(0).iter_mut() {
            *x += 1.0;
        }
    });
    rt.submit(Task::new(&add).rw(&h)).unwrap();
    let w = rt.acquire_deferred(&h, true).unwrap();
    rt.submit(Task::new(&add).rw(&h)).unwrap();
    wait_granted(&w);
    // The task before it has run, the one after it has not (it waits for the release).
    let (p, n) = w.bytes().unwrap();
    assert_eq!(n, 32);
    // SAFETY: a granted write acquisition; the pointer covers 4 f64.
    let v = unsafe { std::slice::from_raw_parts_mut(p.cast::<f64>(), 4) };
    assert_eq!(v, &[2.0; 4]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(v, &[2.0; 4], "a later task ran during the acquisition");
    // Write as a receive would, from another thread, and release there.
    let addr = p as usize;
    std::thread::spawn(move || {
        // SAFETY: as above, still held.
        let v = unsafe { std::slice::from_raw_parts_mut(addr as *mut f64, 4) };
        v.copy_from_slice(&[10.0; 4]);
        w.release();
    })
    .join()
    .unwrap();
    assert_eq!(rt.unregister(h).unwrap(), vec![11.0; 4]);
}

#[test]
fn deferred_reads_wait_for_the_writer_and_hold_the_next_one() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let h = rt.register(vec![0u64; 2]);
    let slow = Codelet::new("slow").cpu(|ctx| {
        std::thread::sleep(Duration::from_millis(30));
        ctx.w::<Vec<u64>>(0)[0] = 7;
    });
    rt.submit(Task::new(&slow).w(&h)).unwrap();
    let a = rt.acquire_deferred(&h, false).unwrap();
    let b = rt.acquire_deferred(&h, false).unwrap();
    assert!(!a.is_granted(), "granted before the writer ended");
    wait_granted(&a);
    wait_granted(&b);
    // SAFETY: granted read acquisitions of 2 u64.
    let (p, _) = a.bytes().unwrap();
    assert_eq!(unsafe { *p.cast::<u64>() }, 7);
    let set = Codelet::new("set").cpu(|ctx| ctx.w::<Vec<u64>>(0)[1] = 9);
    rt.submit(Task::new(&set).w(&h)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    // SAFETY: as above.
    assert_eq!(
        unsafe { *p.cast::<u64>().add(1) },
        0,
        "the writer ran during reads"
    );
    drop(a);
    b.release();
    rt.wait_all().unwrap();
    assert_eq!(rt.unregister(h).unwrap(), vec![7, 9]);
}

#[test]
fn a_dry_run_records_the_graph_and_runs_no_implementation() {
    let (sink, memory) = taskwatt_traces::TraceSink::memory();
    let rt = Runtime::builder()
        .workers(2)
        .dry_run(true)
        .trace(sink)
        .trace_accesses(true)
        .build()
        .unwrap();
    let h = rt.register(vec![1u8; 4]);
    let boom = Codelet::new("boom").cpu(|_| panic!("a dry run ran an implementation"));
    for _ in 0..3 {
        rt.submit(Task::new(&boom).rw(&h)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(
        rt.unregister(h).unwrap(),
        vec![1u8; 4],
        "the data are left alone"
    );
    rt.shutdown().unwrap();
    let t = memory.into_trace().unwrap();
    let recs: Vec<_> = t.tasks().collect();
    assert_eq!(recs.len(), 3);
    // The chain of RW accesses is in the recorded graph.
    assert_eq!(recs.iter().map(|(_, p)| p.len()).sum::<usize>(), 2);
    assert_eq!(t.accesses.len(), 3);
}

/// A runtime with a granted deferred write on a handle, and a task on that handle waiting
/// for its release.
fn a_task_behind_a_deferred_write() -> (
    Runtime,
    taskwatt_runtime::Handle<Vec<u8>>,
    taskwatt_runtime::DeferredAccess,
) {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let h = rt.register(vec![0u8; 8]);
    let inc = Codelet::new("inc").cpu(|ctx| ctx.rw::<Vec<u8>>(0)[0] += 1);
    let d = rt.acquire_deferred(&h, true).unwrap();
    wait_granted(&d);
    rt.submit(Task::new(&inc).rw(&h)).unwrap();
    (rt, h, d)
}

/// Runs `f` on a thread, failing the test if it has not returned within 20 s (a hang).
fn within_20s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("returned instead of hanging")
}

/// Issue 29's four hangs of deferred acquisitions, each now an error or a right result.
#[test]
fn deferred_acquisitions_never_hang_their_thread() {
    // (a) Dropped before its grant while the thread holds a guard the grant waits for:
    // the drop returns at once, the acquisition ends when granted.
    within_20s(|| {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let h = rt.register(vec![0u8; 8]);
        let g = rt.acquire_mut(&h).unwrap();
        let d = rt.acquire_deferred(&h, false).unwrap();
        assert!(!d.is_granted());
        drop(d);
        drop(g);
        rt.wait_all().unwrap();
        // The handle is free again: a write acquisition is granted.
        rt.acquire_mut(&h).unwrap()[0] = 1;
    });
    // (b) A granted deferred write, a task on the handle, then wait_all on the same
    // thread: refused (the task waits for the release only this thread can do).
    within_20s(|| {
        let (rt, h, d) = a_task_behind_a_deferred_write();
        let e = rt.wait_all().unwrap_err().to_string();
        assert!(
            e.contains("deadlock") || e.contains("Deadlock") || e.contains("deferred"),
            "{e}"
        );
        d.release();
        rt.wait_all().unwrap();
        assert_eq!(rt.acquire(&h).unwrap()[0], 1);
    });
    // (c) A deferred read, then unregister on the same thread: refused.
    within_20s(|| {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let h = rt.register(vec![0u8; 8]);
        let d = rt.acquire_deferred(&h, false).unwrap();
        wait_granted(&d);
        let h2 = h.clone();
        let e = rt.unregister(h2).unwrap_err().to_string();
        assert!(e.contains("deferred"), "{e}");
        d.release();
        assert_eq!(rt.unregister(h).unwrap(), vec![0u8; 8]);
    });
    // (d) Inside a task, on the task's own handle: the acquisition waits for the task, and
    // its drop returns at once (it spun for ever).
    within_20s(|| {
        let rt = std::sync::Arc::new(Runtime::builder().workers(1).build().unwrap());
        let h = rt.register(vec![0u8; 8]);
        let (rt2, h2) = (rt.clone(), h.clone());
        let inner = Codelet::new("inner").cpu(move |ctx| {
            ctx.rw::<Vec<u8>>(0)[0] += 1;
            if let Ok(d) = rt2.acquire_deferred(&h2, false) {
                assert!(!d.is_granted());
                drop(d);
            }
        });
        rt.submit(Task::new(&inner).rw(&h)).unwrap();
        rt.wait_all().unwrap();
        assert_eq!(rt.acquire(&h).unwrap()[0], 1);
    });
    // (e) shutdown, and the runtime's drop, while this thread's deferred write blocks a
    // task: shutdown is refused as a deadlock and the drop returns (both would have waited
    // for a release that only this thread can make).
    within_20s(|| {
        let (rt, _h, d) = a_task_behind_a_deferred_write();
        let e = rt.shutdown().unwrap_err().to_string();
        assert!(e.contains("wait_all would wait forever"), "{e}");
        d.release();
    });
    within_20s(|| {
        let (rt, _h, d) = a_task_behind_a_deferred_write();
        drop(rt);
        d.release();
    });
    // A deferred acquisition handed off to another thread does not block this one's
    // waits (taskwatt-mpi's pattern): wait_all waits for the other thread's release.
    within_20s(|| {
        let rt = Runtime::builder().workers(1).build().unwrap();
        let h = rt.register(vec![0u8; 8]);
        let inc = Codelet::new("inc").cpu(|ctx| ctx.rw::<Vec<u8>>(0)[0] += 1);
        let d = rt.acquire_deferred(&h, true).unwrap();
        d.hand_off();
        rt.submit(Task::new(&inc).rw(&h)).unwrap();
        let t = std::thread::spawn(move || {
            wait_granted(&d);
            std::thread::sleep(Duration::from_millis(20));
            d.release();
        });
        rt.wait_all().unwrap();
        t.join().unwrap();
        assert_eq!(rt.acquire(&h).unwrap()[0], 1);
    });
}
