//! On workers of two architectures (CPU cores and GPUs), every registered policy hands
//! each task exactly once, and only to a worker whose architecture the task can run on,
//! whoever pushed it; with one architecture, the task's set does not matter.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use taskwatt_scheduler::{create_policy, ArchMask, Origin, SchedTask, WorkerDesc, POLICIES};

struct Job {
    id: usize,
    archs: ArchMask,
}

impl SchedTask for Job {
    fn priority(&self) -> i32 {
        (self.id % 5) as i32
    }
    fn archs(&self) -> ArchMask {
        self.archs
    }
}

/// Task `i`'s set: CPU only, GPU only, or both, in a pattern no policy lines up with.
fn archs_of(i: usize) -> ArchMask {
    match (i * 7 + i / 3) % 3 {
        0 => ArchMask::CPU,
        1 => ArchMask::GPU,
        _ => ArchMask::CPU.or(ArchMask::GPU),
    }
}

fn workers(cpus: usize, gpus: usize) -> Vec<WorkerDesc> {
    (0..cpus + gpus)
        .map(|id| {
            let w = WorkerDesc::new(id, (id % 2) as u32, None);
            if id < cpus {
                w
            } else {
                w.with_arch(ArchMask::GPU)
            }
        })
        .collect()
}

#[test]
fn every_policy_gives_tasks_only_to_workers_that_can_run_them() {
    const PER_WORKER: usize = 3_000;
    const EXTERNAL: usize = 3_000;
    for info in POLICIES {
        for (cpus, gpus) in [(2, 2), (3, 1), (1, 1)] {
            let descs = workers(cpus, gpus);
            let n = descs.len();
            let policy = Arc::new(create_policy::<Job>(info.name, &descs).unwrap());
            let total = n * PER_WORKER + EXTERNAL;
            let seen: Arc<Vec<AtomicU8>> = Arc::new((0..total).map(|_| AtomicU8::new(0)).collect());
            let wrong = Arc::new(AtomicUsize::new(0));
            let popped = Arc::new(AtomicUsize::new(0));
            for i in 0..EXTERNAL {
                let id = n * PER_WORKER + i;
                policy.push(
                    Job {
                        id,
                        archs: archs_of(id),
                    },
                    Origin::External,
                );
            }
            std::thread::scope(|s| {
                for (w, desc) in descs.iter().enumerate() {
                    let (policy, seen, popped, wrong) =
                        (policy.clone(), seen.clone(), popped.clone(), wrong.clone());
                    let mine = desc.arch;
                    s.spawn(move || {
                        let mut local = policy.local(w);
                        let mut next = w * PER_WORKER;
                        let end = next + PER_WORKER;
                        // A worker of either kind releases tasks of every kind, as a CPU
                        // task's successor may be a GPU task.
                        while popped.load(Ordering::Relaxed) < total {
                            for _ in 0..3 {
                                if next < end {
                                    let job = Job {
                                        id: next,
                                        archs: archs_of(next),
                                    };
                                    policy.push(
                                        job,
                                        Origin::Worker {
                                            id: w,
                                            local: &mut local,
                                        },
                                    );
                                    next += 1;
                                }
                            }
                            if let Some(job) = policy.pop(w, &mut local) {
                                if !job.archs.contains(mine) {
                                    wrong.fetch_add(1, Ordering::Relaxed);
                                }
                                seen[job.id].fetch_add(1, Ordering::Relaxed);
                                popped.fetch_add(1, Ordering::Relaxed);
                                policy.done(w, &mut local);
                            } else if next >= end {
                                std::thread::yield_now();
                            }
                        }
                    });
                }
            });
            assert_eq!(
                wrong.load(Ordering::Relaxed),
                0,
                "{} on {cpus} CPU + {gpus} GPU workers gave tasks to workers that cannot run them",
                info.name
            );
            let bad: Vec<usize> = (0..total)
                .filter(|&i| seen[i].load(Ordering::Relaxed) != 1)
                .collect();
            assert!(
                bad.is_empty(),
                "{} on {cpus} CPU + {gpus} GPU: {} task(s) not popped exactly once, e.g. {:?}",
                info.name,
                bad.len(),
                &bad[..bad.len().min(5)]
            );
        }
    }
}

#[test]
fn prio_takes_the_best_task_a_worker_can_run() {
    let descs = workers(1, 1);
    let p = create_policy::<Job>("prio", &descs).unwrap();
    let (mut l0, mut l1) = (p.local(0), p.local(1));
    // ids give priorities id % 5: 4 (GPU only), 3 (both), 2 (CPU only).
    for (id, archs) in [(2, ArchMask::CPU), (4, ArchMask::GPU), (3, ArchMask::ALL)] {
        p.push(Job { id, archs }, Origin::External);
    }
    // The CPU worker cannot have 4: it gets 3, then 2.
    assert_eq!(p.pop(0, &mut l0).map(|j| j.id), Some(3));
    assert_eq!(p.pop(0, &mut l0).map(|j| j.id), Some(2));
    assert!(p.pop(0, &mut l0).is_none());
    assert_eq!(p.pop(1, &mut l1).map(|j| j.id), Some(4));
}

#[test]
fn masks_compose() {
    let both = ArchMask::CPU.or(ArchMask::GPU);
    assert!(both.contains(ArchMask::GPU) && !ArchMask::CPU.contains(ArchMask::GPU));
    assert!(ArchMask::ALL.contains(both) && ArchMask::CPU.intersects(both));
    assert!(ArchMask::CPU.and(ArchMask::GPU).is_empty());
    assert_eq!(ArchMask::of_index(1), ArchMask::GPU);
    assert_eq!(format!("{both:?}"), "ArchMask(CPU|GPU)");
}

/// ws and lws: an idle GPU worker takes, from a CPU worker's deque, the tasks it can run
/// too (before, it got only what was ready at submission), and never a CPU-only one,
/// which stays available to the CPU workers.
#[test]
fn an_idle_gpu_steals_what_it_can_run_from_the_cores() {
    for name in ["ws", "lws"] {
        let descs = workers(1, 1);
        let p = create_policy::<Job>(name, &descs).unwrap();
        let (mut cpu, mut gpu) = (p.local(0), p.local(1));
        // The CPU worker releases, in order: a CPU-only task, then four that both can run
        // (lws keeps the first in its hand-off slot, unstealable).
        for (id, archs) in [
            (0, ArchMask::CPU),
            (1, ArchMask::CPU),
            (2, ArchMask::ALL),
            (3, ArchMask::ALL),
            (4, ArchMask::ALL),
        ] {
            p.push(
                Job { id, archs },
                Origin::Worker {
                    id: 0,
                    local: &mut cpu,
                },
            );
        }
        let mut stolen = Vec::new();
        while let Some(j) = p.pop(1, &mut gpu) {
            assert_ne!(
                j.archs,
                ArchMask::CPU,
                "{name}: the GPU took a CPU-only task"
            );
            stolen.push(j.id);
        }
        assert!(!stolen.is_empty(), "{name}: the GPU stayed idle");
        let mut rest = Vec::new();
        while let Some(j) = p.pop(0, &mut cpu) {
            rest.push(j.id);
        }
        let mut all: Vec<usize> = stolen.iter().chain(&rest).copied().collect();
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3, 4], "{name}: GPU {stolen:?}, CPU {rest:?}");
        assert!(rest.contains(&0) && rest.contains(&1), "{name}: {rest:?}");
    }
}
