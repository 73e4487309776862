//! Every registered policy hands every pushed task to exactly one popper, under contention.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use taskwatt_scheduler::{create_policy, Origin, SchedTask, WorkerDesc, POLICIES};

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
                s.spawn(move || {
                    let mut local = policy.local(w);
                    // Each worker releases its own tasks in bursts while popping.
                    let mut next = w * PER_WORKER;
                    let end = next + PER_WORKER;
                    while popped.load(Ordering::Relaxed) < total {
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
