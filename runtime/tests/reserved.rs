//! Reserved workers: outside the policy, they run only what is pinned to them, beside the
//! policy's workers, and their tasks take part in the graph's dependencies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task};
use taskwatt_scheduler::policy_names;

/// Every policy: no unpinned task runs on a reserved worker, every pinned one runs on its
/// worker, and the tasks' dependencies hold across the two.
#[test]
fn only_pinned_tasks_run_on_reserved_workers_under_every_policy() {
    for policy in policy_names() {
        let rt = Runtime::builder()
            .workers(2)
            .reserved_workers(2)
            .policy(policy)
            .build()
            .unwrap();
        assert_eq!(rt.workers().len(), 4, "{policy}");
        assert_eq!(rt.reserved_workers(), vec![2, 3], "{policy}");
        let ran: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
        let r = ran.clone();
        // Each task appends (its tag, its worker) to the handle's log, in dependency order.
        let cl = Codelet::new("step").cpu(move |ctx| {
            let tag = *ctx.arg::<u32>();
            r.lock().unwrap().push((tag, ctx.worker()));
            ctx.rw::<Vec<u32>>(0).push(tag);
        });
        let chains: Vec<_> = (0..4).map(|_| rt.register(Vec::<u32>::new())).collect();
        for step in 0..50u32 {
            for (c, h) in chains.iter().enumerate() {
                let tag = step * 10 + c as u32;
                let t = Task::new(&cl).rw(h).arg(tag);
                // Every third step of chain c runs on reserved worker 2 + c % 2.
                let t = if step % 3 == 0 {
                    t.on_worker(2 + (c as u32 % 2))
                } else {
                    t
                };
                rt.submit(t).unwrap();
            }
        }
        rt.wait_all().unwrap();
        for (c, h) in chains.into_iter().enumerate() {
            let want: Vec<u32> = (0..50).map(|s| s * 10 + c as u32).collect();
            assert_eq!(
                rt.unregister(h).unwrap(),
                want,
                "{policy}: chain {c} out of order"
            );
        }
        let ran = ran.lock().unwrap();
        assert_eq!(ran.len(), 200, "{policy}");
        for &(tag, worker) in ran.iter() {
            let (step, c) = (tag / 10, tag % 10);
            if step % 3 == 0 {
                assert_eq!(
                    worker,
                    2 + c % 2,
                    "{policy}: pinned task {tag} ran elsewhere"
                );
            } else {
                assert!(
                    worker < 2,
                    "{policy}: task {tag} ran on reserved worker {worker}"
                );
            }
        }
        rt.shutdown().unwrap();
    }
}

/// A reserved worker runs beside the policy's: a pinned task and an unpinned one meet.
#[test]
fn a_reserved_worker_runs_beside_the_policy_s_workers() {
    let rt = Runtime::builder()
        .workers(1)
        .reserved_workers(1)
        .build()
        .unwrap();
    let arrived = Arc::new(AtomicUsize::new(0));
    let met = Arc::new(AtomicUsize::new(0));
    let (a, m) = (arrived.clone(), met.clone());
    let meet = Codelet::new("meet").cpu(move |_| {
        a.fetch_add(1, Ordering::SeqCst);
        let t0 = Instant::now();
        while a.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        if a.load(Ordering::SeqCst) >= 2 {
            m.fetch_add(1, Ordering::SeqCst);
        }
    });
    let (x, y) = (rt.register(()), rt.register(()));
    rt.submit(Task::new(&meet).w(&x).on_worker(1)).unwrap();
    rt.submit(Task::new(&meet).w(&y)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(
        met.load(Ordering::SeqCst),
        2,
        "the two tasks did not run at once"
    );
}

/// A task pinned to a worker the policy schedules, or with no CPU implementation, is
/// refused by name; one whose implementation panics fails as any other.
#[test]
fn pinning_misused_is_an_error_naming_the_reserved_workers() {
    let rt = Runtime::builder()
        .workers(1)
        .reserved_workers(1)
        .build()
        .unwrap();
    let cl = Codelet::new("work").cpu(|_| {});
    for w in [0, 7] {
        let err = rt.submit(Task::new(&cl).on_worker(w)).unwrap_err();
        assert!(matches!(err, RuntimeError::NotReserved { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("worker {w}")) && msg.contains("[1]"),
            "{msg}"
        );
    }
    let boom = Codelet::new("boom").cpu(|_| panic!("calibration kernel failed"));
    rt.submit(Task::new(&boom).on_worker(1)).unwrap();
    let err = rt.wait_all().unwrap_err().to_string();
    assert!(err.contains("calibration kernel failed"), "{err}");
    // The worker lives on.
    let n = Arc::new(AtomicUsize::new(0));
    let k = n.clone();
    let count = Codelet::new("count").cpu(move |_| {
        k.fetch_add(1, Ordering::SeqCst);
    });
    rt.submit(Task::new(&count).on_worker(1)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 1);
    // Without reserved workers there is nothing to pin to.
    let plain = Runtime::builder().workers(1).build().unwrap();
    assert!(plain.reserved_workers().is_empty());
    let err = plain.submit(Task::new(&cl).on_worker(0)).unwrap_err();
    assert!(err.to_string().contains("here []"), "{err}");
}

/// With GPU workers, the reserved ones come after them; a codelet with no CPU
/// implementation cannot be pinned; too many reserved workers is an error naming the limit.
#[test]
fn reserved_workers_come_after_the_gpus_and_run_cpu_code_only() {
    let rt = Runtime::builder()
        .workers(1)
        .gpus(1, taskwatt_runtime::GpuBackend::Emulated)
        .reserved_workers(1)
        .build()
        .unwrap();
    assert_eq!(rt.reserved_workers(), vec![2]);
    let gpu_only = Codelet::new("gpu_only").gpu(|_| {});
    let err = rt
        .submit(Task::new(&gpu_only).on_worker(2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no CPU implementation"), "{err}");
    let both = Codelet::new("both").cpu(|_| {}).gpu(|_| {});
    for _ in 0..20 {
        rt.submit(Task::new(&both).on_worker(2)).unwrap();
    }
    rt.wait_all().unwrap();
    let err = Runtime::builder()
        .workers(1)
        .reserved_workers(taskwatt_runtime::MAX_RESERVED + 1)
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("at most 127"), "{err}");
}
