//! Every registered policy hands every pushed task to exactly one popper, under contention.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use taskwatt_scheduler::{create_policy, Origin, Policy, SchedTask, WorkerDesc, POLICIES};

struct Job(usize);
impl SchedTask for Job {
    fn priority(&self) -> i32 {
        (self.0 % 7) as i32
    }
}

#[test]
fn every_policy_pops_each_task_exactly_once() {
    const WORKERS: usize = 4;
    const PER_WORKER: usize = 5_000;
    const EXTERNAL: usize = 5_000;
    for info in POLICIES {
        let policy = Arc::new(create_policy::<Job>(info.name, &WorkerDesc::flat(WORKERS)).unwrap());
        let total = WORKERS * PER_WORKER + EXTERNAL;
        let seen: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
        let popped = Arc::new(AtomicUsize::new(0));
        for i in 0..EXTERNAL {
            policy.push(Job(WORKERS * PER_WORKER + i), Origin::External);
        }
        std::thread::scope(|s| {
            for w in 0..WORKERS {
                let (policy, seen, popped) = (policy.clone(), seen.clone(), popped.clone());
                // Each worker releases its own tasks in bursts while popping.
                s.spawn(move || {
                    work(
                        &**policy,
                        w,
                        w * PER_WORKER..(w + 1) * PER_WORKER,
                        &seen,
                        &popped,
                        total,
                        None,
                    )
                });
            }
        });
        let bad: Vec<usize> = (0..total)
            .filter(|&i| seen[i].load(Ordering::Relaxed) != 1)
            .collect();
        assert!(
            bad.is_empty(),
            "{}: tasks not popped exactly once: {:?}",
            info.name,
            &bad[..bad.len().min(10)]
        );
    }
}

/// With a helper (the submitting thread, `WorkerDesc::helper`) that pops for a while and
/// then leaves for good, every task still reaches exactly one popper: no policy gives a
/// task to the helper alone, and what the helper releases it pushes as `External`.
#[test]
fn every_policy_leaves_nothing_to_a_helper_that_leaves() {
    const WORKERS: usize = 3;
    const PER_WORKER: usize = 3_000;
    const HELPER: usize = 3_000;
    let total = WORKERS * PER_WORKER + HELPER;
    for info in POLICIES {
        let mut descs = WorkerDesc::flat(WORKERS + 1);
        descs[WORKERS] = descs[WORKERS].clone().as_helper();
        let policy = Arc::new(create_policy::<Job>(info.name, &descs).unwrap());
        let seen: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
        let popped = Arc::new(AtomicUsize::new(0));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        std::thread::scope(|s| {
            // The helper: releases its tasks as External, pops some, then leaves.
            {
                let (policy, seen, popped) = (policy.clone(), seen.clone(), popped.clone());
                s.spawn(move || {
                    let mut local = policy.local(WORKERS);
                    for i in 0..HELPER {
                        policy.push(Job(WORKERS * PER_WORKER + i), Origin::External);
                        if i % 2 == 0 {
                            if let Some(Job(id)) = policy.pop(WORKERS, &mut local) {
                                seen[id].fetch_add(1, Ordering::Relaxed);
                                popped.fetch_add(1, Ordering::Relaxed);
                                policy.done(WORKERS, &mut local);
                            }
                        }
                    }
                });
            }
            for w in 0..WORKERS {
                let (policy, seen, popped) = (policy.clone(), seen.clone(), popped.clone());
                s.spawn(move || {
                    let tasks = w * PER_WORKER..(w + 1) * PER_WORKER;
                    work(&**policy, w, tasks, &seen, &popped, total, Some(deadline))
                });
            }
        });
        let bad: Vec<usize> = (0..total)
            .filter(|&i| seen[i].load(Ordering::Relaxed) != 1)
            .collect();
        assert!(
            bad.is_empty(),
            "{}: {} tasks not popped exactly once once the helper left (first: {:?})",
            info.name,
            bad.len(),
            &bad[..bad.len().min(10)]
        );
    }
}

/// Worker `w`: pushes the tasks of `tasks` three at a time (as released by its own tasks)
/// and pops, until `total` tasks were popped in all (or `deadline`).
fn work(
    policy: &dyn Policy<Job>,
    w: usize,
    tasks: std::ops::Range<usize>,
    seen: &[AtomicU8],
    popped: &AtomicUsize,
    total: usize,
    deadline: Option<std::time::Instant>,
) {
    let mut local = policy.local(w);
    let (mut next, end) = (tasks.start, tasks.end);
    while popped.load(Ordering::Relaxed) < total
        && deadline.is_none_or(|d| std::time::Instant::now() < d)
    {
        for _ in 0..3 {
            if next < end {
                policy.push(
                    Job(next),
                    Origin::Worker {
                        id: w,
                        local: &mut local,
                    },
                );
                next += 1;
            }
        }
        if let Some(Job(id)) = policy.pop(w, &mut local) {
            seen[id].fetch_add(1, Ordering::Relaxed);
            popped.fetch_add(1, Ordering::Relaxed);
            policy.done(w, &mut local);
        } else if next >= end {
            std::thread::yield_now();
        }
    }
}
