//! Property: a random graph with random R, W, RW, COMMUTE and REDUX accesses leaves the
//! same final data as a sequential execution in submission order, under every policy, at
//! 1, 2 and 4 workers, alone and beside 1 or 2 emulated GPUs (whose copies of the data are
//! separate allocations, so that a transfer missed or made from a stale copy changes the
//! result). With GPUs, one task in three has a GPU implementation only, and the data is
//! acquired halfway through and compared with the sequential prefix (a copy back to main
//! memory).
//!
//! A COMMUTE or REDUX contribution is added (wrapping) to the handle and depends only on
//! what the task reads through its other accesses, so any order of a group gives the
//! sequential result; a COMMUTE task reads the handle, yields the processor, then writes,
//! so two members running at once would lose an update and the comparison would fail.

use proptest::prelude::*;
use taskwatt_runtime::{Access, Codelet, Runtime, Task, TaskCtx};
use taskwatt_scheduler::POLICIES;

#[derive(Clone, Debug)]
struct Spec {
    handles: usize,
    /// Per task: (handle, mode) pairs, distinct handles.
    tasks: Vec<Vec<(usize, Access)>>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (2usize..6).prop_flat_map(|handles| {
        // Grouping modes twice as likely, so that groups of several form.
        let mode = prop_oneof![
            1 => Just(Access::R),
            1 => Just(Access::W),
            1 => Just(Access::RW),
            2 => Just(Access::Commute),
            2 => Just(Access::Redux),
        ];
        let task = proptest::collection::vec((0..handles, mode), 1..4).prop_map(|mut v| {
            v.sort_by_key(|a| a.0);
            v.dedup_by_key(|a| a.0);
            v
        });
        proptest::collection::vec(task, 1..50).prop_map(move |tasks| Spec { handles, tasks })
    })
}

/// What task `id` reads from its ordered accesses.
fn digest(id: u64, modes: &[Access], read: &dyn Fn(usize) -> u64) -> u64 {
    let mut d = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, m) in modes.iter().enumerate() {
        if matches!(m, Access::R | Access::RW) {
            d = d.rotate_left(7) ^ read(i);
        }
    }
    d
}

fn sequential(spec: &Spec) -> Vec<u64> {
    sequential_prefix(spec, spec.tasks.len())
}

/// The data after the first `n` tasks.
fn sequential_prefix(spec: &Spec, n: usize) -> Vec<u64> {
    let mut data: Vec<u64> = (0..spec.handles as u64).collect();
    for (id, accesses) in spec.tasks.iter().enumerate().take(n) {
        let modes: Vec<Access> = accesses.iter().map(|a| a.1).collect();
        let d = digest(id as u64, &modes, &|i| data[accesses[i].0]);
        for (i, &(h, m)) in accesses.iter().enumerate() {
            let x = d ^ i as u64;
            match m {
                Access::R => {}
                Access::W => data[h] = x,
                Access::RW => data[h] = data[h].wrapping_mul(31).wrapping_add(d),
                _ => data[h] = data[h].wrapping_add(x),
            }
        }
    }
    data
}

fn parallel(spec: &Spec, policy: &str, workers: usize, gpus: usize) -> Vec<u64> {
    let rt = Runtime::builder()
        .workers(workers)
        .emulated_gpus(gpus)
        .policy(policy)
        .build()
        .unwrap();
    let handles: Vec<_> = (0..spec.handles as u64)
        .map(|v| {
            if gpus > 0 {
                rt.register_replicated(v)
            } else {
                rt.register(v)
            }
        })
        .collect();
    for h in &handles {
        rt.set_reduction(h, "sum", || 0u64, |acc, x| *acc = acc.wrapping_add(x))
            .unwrap();
    }
    let cl = Codelet::new("mix").cpu(mix);
    let gpu_only = Codelet::new("mix_gpu").gpu(mix);
    let half = spec.tasks.len() / 2;
    for (id, accesses) in spec.tasks.iter().enumerate() {
        if gpus > 0 && id == half {
            let expected = sequential_prefix(spec, half);
            for (h, e) in handles.iter().zip(&expected) {
                assert_eq!(*rt.acquire(h).unwrap(), *e, "acquired after {half} tasks");
            }
        }
        let modes: Vec<Access> = accesses.iter().map(|a| a.1).collect();
        let mut t = Task::new(if gpus > 0 && id % 3 == 0 {
            &gpu_only
        } else {
            &cl
        });
        for &(h, m) in accesses {
            t = t.access(&handles[h], m);
        }
        rt.submit(t.arg((id as u64, modes))).unwrap();
    }
    rt.wait_all().unwrap();
    handles
        .into_iter()
        .map(|h| rt.unregister(h).unwrap())
        .collect()
}

fn mix(ctx: &TaskCtx<'_>) {
    {
        // The task's index in the spec (ids also count the reduction tasks).
        let (id, modes): &(u64, Vec<Access>) = ctx.arg();
        // One borrow per buffer: shared for R, exclusive otherwise (for REDUX, this
        // worker's contribution).
        let mut slots: Vec<Result<&u64, &mut u64>> = modes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if *m == Access::R {
                    Ok(ctx.r::<u64>(i))
                } else {
                    Err(ctx.w::<u64>(i))
                }
            })
            .collect();
        let d = digest(*id, modes, &|i| match &slots[i] {
            Ok(r) => **r,
            Err(w) => **w,
        });
        for (i, m) in modes.iter().enumerate() {
            let x = d ^ i as u64;
            let Err(v) = &mut slots[i] else { continue };
            match m {
                Access::W => **v = x,
                Access::RW => **v = v.wrapping_mul(31).wrapping_add(d),
                Access::Commute => {
                    let old = **v;
                    std::thread::yield_now();
                    **v = old.wrapping_add(x);
                }
                _ => **v = v.wrapping_add(x),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn parallel_runs_match_sequential(spec in spec()) {
        let expected = sequential(&spec);
        for policy in POLICIES {
            for workers in [1, 2, 4] {
                for gpus in [0, 1, 2] {
                    prop_assert_eq!(
                        &parallel(&spec, policy.name, workers, gpus),
                        &expected,
                        "policy {} at {} workers and {} emulated GPU(s)", policy.name, workers, gpus
                    );
                }
            }
        }
    }

}
