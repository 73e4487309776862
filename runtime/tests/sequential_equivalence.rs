//! Property: a random graph with random R/W/RW accesses leaves the same final data as a
//! sequential execution in submission order, under every policy, at 1, 2 and 4 workers.

use proptest::prelude::*;
use taskwatt_runtime::{Access, Codelet, Runtime, Task};
use taskwatt_scheduler::POLICIES;

#[derive(Clone, Debug)]
struct Spec {
    handles: usize,
    /// Per task: (handle, mode) pairs, distinct handles.
    tasks: Vec<Vec<(usize, Access)>>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (2usize..8).prop_flat_map(|handles| {
        let access = (
            0..handles,
            prop_oneof![Just(Access::R), Just(Access::W), Just(Access::RW)],
        );
        let task = proptest::collection::vec(access, 1..4).prop_map(|mut v| {
            v.sort_by_key(|a| a.0);
            v.dedup_by_key(|a| a.0);
            v
        });
        proptest::collection::vec(task, 1..60).prop_map(move |tasks| Spec { handles, tasks })
    })
}

/// What task `id` does: mixes the values it reads into a digest, then writes.
/// Returns the (buffer, value) writes.
fn apply(id: u64, modes: &[Access], read: &dyn Fn(usize) -> u64) -> Vec<(usize, u64)> {
    let mut writes = Vec::new();
    let mut digest = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, m) in modes.iter().enumerate() {
        if *m != Access::W {
            digest = digest.rotate_left(7) ^ read(i);
        }
    }
    for (i, m) in modes.iter().enumerate() {
        match m {
            Access::R => {}
            Access::W => writes.push((i, digest ^ i as u64)),
            Access::RW => writes.push((i, read(i).wrapping_mul(31).wrapping_add(digest))),
        }
    }
    writes
}

fn sequential(spec: &Spec) -> Vec<u64> {
    let mut data: Vec<u64> = (0..spec.handles as u64).collect();
    for (id, accesses) in spec.tasks.iter().enumerate() {
        let modes: Vec<Access> = accesses.iter().map(|a| a.1).collect();
        let writes = apply(id as u64, &modes, &|i| data[accesses[i].0]);
        for (i, v) in writes {
            data[accesses[i].0] = v;
        }
    }
    data
}

fn parallel(spec: &Spec, policy: &str, workers: usize) -> Vec<u64> {
    let rt = Runtime::builder()
        .workers(workers)
        .policy(policy)
        .build()
        .unwrap();
    let handles: Vec<_> = (0..spec.handles as u64).map(|v| rt.register(v)).collect();
    let cl = Codelet::new("mix").cpu(|ctx| {
        let modes: &Vec<Access> = ctx.arg();
        // One borrow per buffer: shared for R, exclusive for W/RW (read through it).
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
        let writes = apply(ctx.task_id(), modes, &|i| match &slots[i] {
            Ok(r) => **r,
            Err(w) => **w,
        });
        for (i, v) in writes {
            if let Err(w) = &mut slots[i] {
                **w = v;
            }
        }
    });
    for accesses in &spec.tasks {
        let modes: Vec<Access> = accesses.iter().map(|a| a.1).collect();
        let mut t = Task::new(&cl);
        for &(h, m) in accesses {
            t = t.access(&handles[h], m);
        }
        rt.submit(t.arg(modes)).unwrap();
    }
    rt.wait_all().unwrap();
    handles
        .into_iter()
        .map(|h| rt.unregister(h).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn parallel_runs_match_sequential(spec in spec()) {
        let expected = sequential(&spec);
        for policy in POLICIES {
            for workers in [1, 2, 4] {
                prop_assert_eq!(&parallel(&spec, policy.name, workers), &expected, "policy {} at {} workers", policy.name, workers);
            }
        }
    }
}
