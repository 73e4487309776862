//! COMMUTE, REDUX and partitioning: their behaviour, their errors, and random partition
//! rounds against sequential execution under every policy (the random graphs of COMMUTE
//! and REDUX accesses are in sequential_equivalence.rs).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use taskwatt_runtime::{
    Access, Codelet, Filter, Matrix, MatrixPart, Runtime, RuntimeError, Task, VectorPart,
};
use taskwatt_scheduler::POLICIES;

/// A graph on one vector: whole-vector tasks, then tasks on its parts (any mode but
/// REDUX), then whole-vector tasks again, as often as `rounds` says.
#[derive(Clone, Debug)]
struct PartSpec {
    len: usize,
    rounds: Vec<Round>,
}

#[derive(Clone, Debug)]
struct Round {
    whole_before: usize,
    parts: usize,
    /// (part, mode) per task on the parts.
    tasks: Vec<(usize, Access)>,
}

fn part_spec() -> impl Strategy<Value = PartSpec> {
    (4usize..40).prop_flat_map(|len| {
        let round = (0usize..3, 1usize..5).prop_flat_map(|(whole_before, parts)| {
            let mode = prop_oneof![
                Just(Access::R),
                Just(Access::W),
                Just(Access::RW),
                Just(Access::Commute)
            ];
            proptest::collection::vec((0..parts, mode), 0..20).prop_map(move |tasks| Round {
                whole_before,
                parts,
                tasks,
            })
        });
        proptest::collection::vec(round, 1..4).prop_map(move |rounds| PartSpec { len, rounds })
    })
}

/// The bounds of part `p` of `parts` near-equal blocks of `len` (the longer first).
fn block(len: usize, parts: usize, p: usize) -> std::ops::Range<usize> {
    let (q, r) = (len / parts, len % parts);
    let start = p * q + p.min(r);
    start..start + q + usize::from(p < r)
}

fn whole_step(v: &mut [u64], k: u64) {
    // Mixes every element with its neighbour: the order against the parts' tasks shows.
    let first = v[0];
    for i in 0..v.len() {
        let next = if i + 1 < v.len() { v[i + 1] } else { first };
        v[i] = v[i].wrapping_mul(3).wrapping_add(next ^ k);
    }
}

fn part_step(p: &mut [u64], mode: Access, k: u64) {
    let sum = p.iter().fold(0u64, |a, x| a.wrapping_add(*x));
    for x in p.iter_mut() {
        match mode {
            Access::W => *x = k,
            Access::RW => *x = x.wrapping_mul(5).wrapping_add(sum ^ k),
            _ => *x = x.wrapping_add(k),
        }
    }
}

fn part_sequential(spec: &PartSpec) -> Vec<u64> {
    let mut v: Vec<u64> = (0..spec.len as u64).collect();
    for (r, round) in spec.rounds.iter().enumerate() {
        for w in 0..round.whole_before {
            whole_step(&mut v, (r * 10 + w) as u64);
        }
        for (t, &(p, mode)) in round.tasks.iter().enumerate() {
            if mode != Access::R {
                part_step(&mut v[block(spec.len, round.parts, p)], mode, t as u64 + 1);
            }
        }
    }
    whole_step(&mut v, 999);
    v
}

fn part_parallel(spec: &PartSpec, policy: &str, workers: usize) -> Vec<u64> {
    let rt = Runtime::builder()
        .workers(workers)
        .policy(policy)
        .build()
        .unwrap();
    let v = rt.register((0..spec.len as u64).collect::<Vec<_>>());
    let whole = Codelet::new("whole").cpu(|ctx| whole_step(ctx.rw::<Vec<u64>>(0), *ctx.arg()));
    let part = Codelet::new("part").cpu(|ctx| {
        let (mode, k): &(Access, u64) = ctx.arg();
        if *mode == Access::R {
            let _ = ctx.r::<VectorPart<u64>>(0).iter().sum::<u64>();
        } else {
            std::thread::yield_now();
            part_step(ctx.w::<VectorPart<u64>>(0), *mode, *k);
        }
    });
    for (r, round) in spec.rounds.iter().enumerate() {
        for w in 0..round.whole_before {
            rt.submit(Task::new(&whole).rw(&v).arg((r * 10 + w) as u64))
                .unwrap();
        }
        let parts = rt.partition(&v, Filter::Blocks(round.parts)).unwrap();
        assert_eq!(parts.len(), round.parts);
        for (t, &(p, mode)) in round.tasks.iter().enumerate() {
            rt.submit(
                Task::new(&part)
                    .access(&parts[p], mode)
                    .arg((mode, t as u64 + 1)),
            )
            .unwrap();
        }
        rt.unpartition(parts).unwrap();
    }
    rt.submit(Task::new(&whole).rw(&v).arg(999u64)).unwrap();
    rt.wait_all().unwrap();
    rt.unregister(v).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn partitioned_runs_match_sequential(spec in part_spec()) {
        let expected = part_sequential(&spec);
        for policy in POLICIES {
            for workers in [1, 2, 4] {
                prop_assert_eq!(&part_parallel(&spec, policy.name, workers), &expected, "policy {} at {} workers", policy.name, workers);
            }
        }
    }
}

#[test]
fn commute_members_never_overlap_and_run_in_parallel_with_nothing_after() {
    let rt = Runtime::builder().workers(4).build().unwrap();
    let h = rt.register(0u64);
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r2, m2) = (running.clone(), most.clone());
    let cl = Codelet::new("c").cpu(move |ctx| {
        let now = r2.fetch_add(1, Ordering::SeqCst) + 1;
        m2.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(200));
        *ctx.rw::<u64>(0) += 1;
        r2.fetch_sub(1, Ordering::SeqCst);
    });
    for _ in 0..64 {
        rt.submit(Task::new(&cl).commute(&h)).unwrap();
    }
    assert_eq!(
        *rt.acquire(&h).unwrap(),
        64,
        "the read waits for the whole group"
    );
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "two COMMUTE tasks ran at once"
    );
}

#[test]
fn commute_tasks_are_not_ordered_among_themselves() {
    // With one worker and prio, the group's members run by priority, not in submission
    // order: they do not depend on one another. Staging is off: with it, the worker could
    // take the blocker and the first member in one batch, end the blocker less than the
    // window after the others were staged, and run the first member before they reach
    // the policy (CI saw [1, 3, 2] once).
    let rt = Runtime::builder()
        .workers(1)
        .policy("prio")
        .staging(std::time::Duration::ZERO)
        .build()
        .unwrap();
    let h = rt.register(Vec::<i32>::new());
    let gate = rt.register(());
    // Hold the worker until the whole group is submitted, so that all of it is ready at
    // once (a sleep was not enough when the submitting thread was descheduled).
    let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let o = open.clone();
    let block = Codelet::new("block").cpu(move |_| {
        while !o.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    let push = Codelet::new("push").cpu(|ctx| {
        let p = *ctx.arg::<i32>();
        ctx.rw::<Vec<i32>>(0).push(p)
    });
    // The blocker first, at the highest priority, so that the worker takes it before the
    // group even if all are staged together.
    rt.submit(Task::new(&block).w(&gate).priority(100)).unwrap();
    for p in [1, 3, 2] {
        rt.submit(Task::new(&push).commute(&h).arg(p).priority(p))
            .unwrap();
    }
    open.store(true, Ordering::SeqCst);
    assert_eq!(rt.unregister(h).unwrap(), vec![3, 2, 1]);
}

#[test]
fn redux_contributions_reach_reads_acquisitions_and_unregistration() {
    let rt = Runtime::builder().workers(3).build().unwrap();
    let sum = rt.register(1000u64);
    rt.set_reduction(&sum, "sum", || 0u64, |a, x| *a += x)
        .unwrap();
    let add = Codelet::new("add").cpu(|ctx| *ctx.w::<u64>(0) += *ctx.arg::<u64>());
    let seen = rt.register(0u64);
    let copy = Codelet::new("copy").cpu(|ctx| *ctx.w::<u64>(1) = *ctx.r::<u64>(0));
    for i in 1..=10u64 {
        rt.submit(Task::new(&add).redux(&sum).arg(i)).unwrap();
    }
    rt.submit(Task::new(&copy).r(&sum).w(&seen)).unwrap();
    for i in 1..=10u64 {
        rt.submit(Task::new(&add).redux(&sum).arg(i)).unwrap();
    }
    assert_eq!(*rt.acquire(&sum).unwrap(), 1110);
    for i in 1..=5u64 {
        rt.submit(Task::new(&add).redux(&sum).arg(i)).unwrap();
    }
    assert_eq!(rt.unregister(sum).unwrap(), 1125);
    assert_eq!(rt.unregister(seen).unwrap(), 1055);
}

#[test]
fn redux_reductions_are_recorded_as_tasks_of_their_codelet() {
    let (sink, memory) = taskwatt_traces::TraceSink::memory();
    let rt = Runtime::builder().workers(2).trace(sink).build().unwrap();
    let sum = rt.register(0.0f64);
    rt.set_reduction(&sum, "sum_f64", || 0.0, |a, x| *a += x)
        .unwrap();
    let add = Codelet::new("add").cpu(|ctx| *ctx.w::<f64>(0) += 1.5);
    for _ in 0..8 {
        rt.submit(Task::new(&add).redux(&sum)).unwrap();
    }
    assert_eq!(rt.unregister(sum).unwrap(), 12.0);
    drop(rt);
    let trace = memory.into_trace().unwrap();
    let names: Vec<String> = trace
        .tasks()
        .map(|(t, _)| trace.codelet_name(t.codelet).to_string())
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "sum_f64").count(), 1);
    assert_eq!(names.iter().filter(|n| *n == "add").count(), 8);
}

#[test]
fn redux_misuse_is_a_typed_error_or_a_clear_panic() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let h = rt.register(0u64);
    let add = Codelet::new("add").cpu(|ctx| *ctx.w::<u64>(0) += 1);
    assert!(matches!(
        rt.submit(Task::new(&add).redux(&h)),
        Err(RuntimeError::NoReduction { .. })
    ));
    rt.set_reduction(&h, "sum", || 0u64, |a, x| *a += x)
        .unwrap();
    assert!(matches!(
        rt.set_reduction(&h, "sum", || 0u64, |a, x| *a += x),
        Err(RuntimeError::ReductionAlreadySet { .. })
    ));
    let other = Runtime::builder().workers(1).build().unwrap();
    assert!(matches!(
        other.set_reduction(&h, "sum", || 0u64, |a, x| *a += x),
        Err(RuntimeError::ForeignHandle { .. })
    ));
    let read = Codelet::new("read").cpu(|ctx| {
        let _ = ctx.r::<u64>(0);
    });
    rt.submit(Task::new(&read).redux(&h)).unwrap();
    let err = rt.wait_all().unwrap_err().to_string();
    assert!(err.contains("declared REDUX"), "{err}");
}

#[test]
fn a_partitioned_handle_is_refused_and_its_parts_die_with_the_partitioning() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let v = rt.register(vec![1u32; 8]);
    let touch = Codelet::new("touch").cpu(|_| {});
    let parts = rt.partition(&v, Filter::Blocks(2)).unwrap();
    assert!(matches!(
        rt.submit(Task::new(&touch).r(&v)),
        Err(RuntimeError::Partitioned { .. })
    ));
    assert!(matches!(
        rt.acquire(&v),
        Err(RuntimeError::Partitioned { .. })
    ));
    assert!(matches!(
        rt.partition(&v, Filter::Blocks(2)),
        Err(RuntimeError::Partitioned { .. })
    ));
    let kept = parts[0].clone();
    rt.unpartition(parts).unwrap();
    assert!(matches!(
        rt.submit(Task::new(&touch).r(&kept)),
        Err(RuntimeError::Unregistered { .. })
    ));
    // Dropping the partitioning gives the parent back too.
    let parts = rt.partition(&v, Filter::Blocks(4)).unwrap();
    drop(parts);
    rt.submit(Task::new(&touch).r(&v)).unwrap();
    assert!(matches!(
        rt.partition(&v, Filter::Blocks(9)),
        Err(RuntimeError::BadPartition { .. })
    ));
    assert!(matches!(
        rt.partition(&v, Filter::Grid { rows: 1, cols: 1 }),
        Err(RuntimeError::BadPartition { .. })
    ));
    assert_eq!(rt.unregister(v).unwrap(), vec![1u32; 8]);
}

#[test]
fn a_matrix_grid_covers_every_element_once() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (rows, cols) = (7, 5);
    let m = rt.register(Matrix::from_fn(rows, cols, |i, j| (i * 100 + j) as i64));
    let parts = rt.partition(&m, Filter::Grid { rows: 3, cols: 2 }).unwrap();
    assert_eq!(parts.len(), 6);
    let mark = Codelet::new("mark").cpu(|ctx| {
        let tag = *ctx.arg::<i64>();
        let b = ctx.rw::<MatrixPart<i64>>(0);
        for j in 0..b.cols() {
            for x in b.col_mut(j) {
                *x = -(*x) * 1000 - tag;
            }
        }
    });
    for (k, p) in parts.iter().enumerate() {
        rt.submit(Task::new(&mark).rw(p).arg(k as i64)).unwrap();
    }
    rt.unpartition(parts).unwrap();
    let m = rt.unregister(m).unwrap();
    let mut tags = std::collections::BTreeSet::new();
    for j in 0..cols {
        for i in 0..rows {
            let x = *m.get(i, j);
            let original = (i * 100 + j) as i64;
            let tag = -(x + original * 1000);
            assert!(
                (0..6).contains(&tag),
                "({i}, {j}) marked {x}: touched once, by one part"
            );
            tags.insert(tag);
        }
    }
    assert_eq!(tags.len(), 6, "every part has elements");
}

/// Misuse of partitions (issue 29's campaign on the new API): each ends in a typed error
/// or a right result, never a hang, a dead worker or lost data.
#[test]
fn partitions_misused_end_in_errors_or_right_results() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let v = rt.register((0..12u64).collect::<Vec<_>>());
    let inc = Codelet::new("inc").cpu(|ctx| {
        ctx.rw::<VectorPart<u64>>(0)
            .iter_mut()
            .for_each(|x| *x += 1)
    });

    // No parts at all.
    assert!(matches!(
        rt.partition(&v, Filter::Blocks(0)),
        Err(RuntimeError::BadPartition { .. })
    ));

    // A part unregistered while the partitioning lives would hand out a view into the
    // parent that outlives it: refused, naming unpartition; the partitioning is unharmed.
    let parts = rt.partition(&v, Filter::Blocks(3)).unwrap();
    rt.submit(Task::new(&inc).rw(&parts[0])).unwrap();
    let Err(err) = rt.unregister(parts[0].clone()) else {
        panic!("a part was unregistered while partitioned")
    };
    assert!(
        matches!(err, RuntimeError::PartUnregistered { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("unpartition"), "{err}");
    rt.submit(Task::new(&inc).rw(&parts[1])).unwrap();
    rt.unpartition(parts).unwrap();
    let expect: Vec<u64> = (0..12).map(|x| if x < 8 { x + 1 } else { x }).collect();
    // After the partitioning, a part is gone like any unregistered handle.
    let now = rt.acquire(&v).unwrap().to_vec();
    assert_eq!(now, expect);

    // A task on a part that panics: the task fails, the partitioning still comes apart and
    // the other parts' work is kept.
    let boom = Codelet::new("boom").cpu(|_| panic!("a part's task panics"));
    let parts = rt.partition(&v, Filter::Blocks(2)).unwrap();
    rt.submit(Task::new(&boom).rw(&parts[0])).unwrap();
    rt.submit(Task::new(&inc).rw(&parts[1])).unwrap();
    let err = rt.wait_all().unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    rt.unpartition(parts).unwrap();
    let now = rt.acquire(&v).unwrap().to_vec();
    assert_eq!(
        &now[6..],
        &expect[6..].iter().map(|x| x + 1).collect::<Vec<_>>()[..]
    );

    // Partitioning from inside a task would wait on the task's own data: a deadlock
    // error, not a hang.
    let (tx, rx) = std::sync::mpsc::channel();
    let rt = Arc::new(rt);
    let inner = Arc::clone(&rt);
    let vh = v.clone();
    let nested = Codelet::new("nested").cpu(move |_| {
        let r = inner.partition(&vh, Filter::Blocks(2)).map(|p| p.len());
        tx.send(r.map_err(|e| e.to_string())).unwrap();
    });
    rt.submit(Task::new(&nested)).unwrap();
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("partition inside a task hung");
    let msg = got.unwrap_err();
    assert!(
        msg.contains("deadlock") || msg.contains("inside a task"),
        "{msg}"
    );
    let _ = rt.wait_all();
    assert_eq!(rt.unregister(v).unwrap().len(), 12);
}

/// Issue 29's campaign on REDUX: user code that panics in each of a reduction's three
/// places, a reduction on emulated GPUs, beside a partition, a guard and a deferred
/// acquisition. Each ends in a right result or a failure that names its task; none hangs
/// and none loses a contribution silently.
#[test]
fn redux_misused_ends_in_errors_or_right_results() {
    fn sum_of(rt: &Runtime, start: u64) -> taskwatt_runtime::Handle<u64> {
        let h = rt.register(start);
        rt.set_reduction(&h, "sum", || 0u64, |a, x| *a += x)
            .unwrap();
        h
    }
    let failed = |r: Result<(), RuntimeError>| match r {
        Err(RuntimeError::TasksFailed { failures, .. }) => failures
            .iter()
            .map(|f| format!("{}: {}", f.codelet, f.message))
            .collect::<Vec<_>>(),
        other => panic!("expected failed tasks, got {other:?}"),
    };
    let add = Codelet::new("add").cpu(|ctx| {
        assert_ne!(*ctx.arg::<u64>(), 2, "contribution 2 fails");
        *ctx.w::<u64>(0) += 1
    });
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();

    // The init panics: every contribution fails, naming the init's message; the data is
    // as it was.
    let h = rt.register(5u64);
    rt.set_reduction(
        &h,
        "sum",
        || -> u64 { panic!("init fails") },
        |a, x| *a += x,
    )
    .unwrap();
    for i in 10..14u64 {
        rt.submit(Task::new(&add).redux(&h).arg(i)).unwrap();
    }
    let f = failed(rt.wait_all());
    assert!(
        f.len() == 4 && f.iter().all(|m| m.starts_with("add: init fails")),
        "{f:?}"
    );
    assert_eq!(rt.unregister(h).unwrap(), 5);

    // The combine panics: the reduction task fails by its codelet's name at the next
    // wait_all (the acquisition that needed it gets the data as the failure left it).
    let h = rt.register(5u64);
    rt.set_reduction(&h, "fold", || 0u64, |_, _| panic!("combine fails"))
        .unwrap();
    for i in 10..14u64 {
        rt.submit(Task::new(&add).redux(&h).arg(i)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(*rt.acquire(&h).unwrap(), 5);
    let f = failed(rt.wait_all());
    assert!(
        f.len() == 1 && f[0].starts_with("fold: combine fails"),
        "{f:?}"
    );
    assert_eq!(rt.unregister(h).unwrap(), 5);

    // One contribution panics: the others arrive.
    let h = sum_of(&rt, 5);
    for i in 0..4u64 {
        rt.submit(Task::new(&add).redux(&h).arg(i)).unwrap();
    }
    let f = failed(rt.wait_all());
    assert!(
        f.len() == 1 && f[0].contains("contribution 2 fails"),
        "{f:?}"
    );
    assert_eq!(rt.unregister(h).unwrap(), 8);

    // Behind a read guard of this thread: the waits are deadlock errors, and dropping the
    // guard lets every contribution in.
    let h = sum_of(&rt, 5);
    let g = rt.acquire(&h).unwrap();
    for i in 10..14u64 {
        rt.submit(Task::new(&add).redux(&h).arg(i)).unwrap();
    }
    assert!(matches!(rt.wait_all(), Err(RuntimeError::Deadlock { .. })));
    assert!(matches!(rt.acquire(&h), Err(RuntimeError::Deadlock { .. })));
    drop(g);
    assert_eq!(rt.unregister(h).unwrap(), 9);

    // A deferred read after a group is granted once the reduction has run.
    let h = rt.register(vec![5u64]);
    rt.set_reduction(&h, "vsum", || vec![0u64], |a, x| a[0] += x[0])
        .unwrap();
    let push = Codelet::new("push").cpu(|ctx| ctx.w::<Vec<u64>>(0)[0] += 1);
    for _ in 0..4 {
        rt.submit(Task::new(&push).redux(&h)).unwrap();
    }
    let d = rt.acquire_deferred(&h, false).unwrap();
    let t = std::time::Instant::now();
    while !d.is_granted() {
        assert!(t.elapsed().as_secs() < 10, "never granted");
        std::thread::yield_now();
    }
    d.release();
    assert_eq!(rt.unregister(h).unwrap(), vec![9]);
    drop(rt);

    // On emulated GPUs, with a codelet that only has a CPU version: every contribution
    // lands (on the CPU worker).
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(2)
        .pin(false)
        .build()
        .unwrap();
    let h = rt.register(vec![1.0f64; 4]);
    rt.set_reduction(
        &h,
        "vsum",
        || vec![0.0; 4],
        |a, x| a.iter_mut().zip(x).for_each(|(a, x)| *a += x),
    )
    .unwrap();
    let inc =
        Codelet::new("inc").cpu(|ctx| ctx.w::<Vec<f64>>(0).iter_mut().for_each(|v| *v += 1.0));
    for _ in 0..16 {
        rt.submit(Task::new(&inc).redux(&h)).unwrap();
    }
    assert_eq!(rt.unregister(h).unwrap(), vec![17.0; 4]);
}

#[test]
fn a_named_handle_s_parts_are_named_after_it() {
    // Exports named a partitioned grid's blocks `h34` (a user named the grid).
    let (sink, trace) = taskwatt_traces::TraceSink::memory();
    let rt = Runtime::builder().workers(1).trace(sink).build().unwrap();
    let v = rt.register(vec![0u8; 12]);
    rt.set_name(&v, "grid");
    let parts = rt.partition(&v, Filter::Blocks(3)).unwrap();
    let ids: Vec<u64> = parts.iter().map(|p| p.id()).collect();
    rt.unpartition(parts).unwrap();
    drop(v);
    rt.shutdown().unwrap();
    let names: Vec<(u64, String)> = trace
        .chunks()
        .into_iter()
        .flat_map(|c| match c {
            taskwatt_traces::Chunk::Handles(h) => h,
            _ => Vec::new(),
        })
        .map(|h| (h.handle, h.name))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        assert!(
            names.contains(&(*id, format!("grid[{i}]"))),
            "part {i} ({id}) unnamed: {names:?}"
        );
    }
}
