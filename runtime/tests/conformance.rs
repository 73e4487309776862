//! Every registered policy runs the same graphs: each task runs exactly once, and every
//! dependency is respected (a task starts after each predecessor ended), checked both
//! against the runtime's own trace and against an execution log kept by the tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use taskwatt_runtime::{Codelet, Runtime, Task, TaskHandle};
use taskwatt_scheduler::POLICIES;
use taskwatt_traces::{TaskId, TraceSink};

struct Graph {
    name: &'static str,
    build: fn(&Runtime, &Codelet) -> Vec<TaskHandle>,
}

/// Counts executions per task id, to check "exactly once" without the trace.
fn counting_codelet(counts: Arc<Vec<AtomicU32>>) -> Codelet {
    Codelet::new("work").cpu(move |ctx| {
        counts[ctx.task_id() as usize].fetch_add(1, Ordering::Relaxed);
        // A little work so that tasks overlap.
        let mut x = ctx.task_id();
        for _ in 0..200 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    })
}

fn graphs() -> Vec<Graph> {
    vec![
        Graph {
            name: "independent",
            build: |rt, cl| {
                (0..300)
                    .map(|_| rt.submit(Task::new(cl)).unwrap())
                    .collect()
            },
        },
        Graph {
            name: "chain-on-one-handle",
            build: |rt, cl| {
                let h = rt.register(0u8);
                (0..300)
                    .map(|_| rt.submit(Task::new(cl).rw(&h)).unwrap())
                    .collect()
            },
        },
        Graph {
            name: "fan-out-fan-in",
            build: |rt, cl| {
                let root = rt.register(0u8);
                let leaves: Vec<_> = (0..64).map(|_| rt.register(0u8)).collect();
                let mut v = vec![rt.submit(Task::new(cl).w(&root)).unwrap()];
                for round in 0..3 {
                    let _ = round;
                    for l in &leaves {
                        v.push(rt.submit(Task::new(cl).r(&root).w(l)).unwrap());
                    }
                    let mut t = Task::new(cl);
                    for l in &leaves[..32] {
                        t = t.r(l);
                    }
                    v.push(rt.submit(t.rw(&root)).unwrap());
                }
                v
            },
        },
        Graph {
            name: "explicit-dependencies",
            build: |rt, cl| {
                let mut v: Vec<TaskHandle> = Vec::new();
                for i in 0..200usize {
                    let mut t = Task::new(cl).priority((i % 5) as i32);
                    for back in [1usize, 3, 7] {
                        if i >= back {
                            t = t.after(&v[i - back]);
                        }
                    }
                    v.push(rt.submit(t).unwrap());
                }
                v
            },
        },
        Graph {
            name: "stencil-1d",
            build: |rt, cl| {
                let width = 8;
                let mut cur: Vec<_> = (0..width).map(|_| rt.register(0u8)).collect();
                let mut next: Vec<_> = (0..width).map(|_| rt.register(0u8)).collect();
                let mut v = Vec::new();
                for _step in 0..30 {
                    for (x, out) in next.iter().enumerate() {
                        let mut t = Task::new(cl).w(out);
                        for dx in [-1i64, 0, 1] {
                            let y = x as i64 + dx;
                            if (0..width as i64).contains(&y) {
                                t = t.r(&cur[y as usize]);
                            }
                        }
                        v.push(rt.submit(t).unwrap());
                    }
                    std::mem::swap(&mut cur, &mut next);
                }
                v
            },
        },
    ]
}

#[test]
fn every_policy_runs_every_graph_correctly() {
    // The submitting thread as the last worker too (with one worker, it is the only one:
    // every task runs in `wait_all`).
    for policy in POLICIES {
        for (workers, helper) in [
            (1, false),
            (2, false),
            (4, false),
            (1, true),
            (2, true),
            (4, true),
        ] {
            for g in graphs() {
                let counts: Arc<Vec<AtomicU32>> =
                    Arc::new((0..2000).map(|_| AtomicU32::new(0)).collect());
                let cl = counting_codelet(counts.clone());
                let (sink, memory) = TraceSink::memory();
                let rt = Runtime::builder()
                    .workers(workers)
                    .policy(policy.name)
                    .trace(sink)
                    .trace_chunk(64)
                    .submitter_works(helper)
                    .build()
                    .unwrap();
                let handles = (g.build)(&rt, &cl);
                rt.wait_all().unwrap();
                assert!(handles.iter().all(TaskHandle::is_finished));
                let n = handles.len();
                drop(rt);
                let ctx = format!(
                    "policy {} / {} workers (submitter works: {helper}) / graph {}",
                    policy.name, workers, g.name
                );
                for (i, c) in counts.iter().enumerate().take(n) {
                    assert_eq!(
                        c.load(Ordering::Relaxed),
                        1,
                        "{ctx}: task {i} ran a wrong number of times"
                    );
                }
                let trace = memory.into_trace().unwrap();
                assert_eq!(
                    trace.task_count() as usize,
                    n,
                    "{ctx}: trace has the wrong task count"
                );
                let mut by_id: HashMap<TaskId, (u64, u64)> = HashMap::new();
                for (r, _) in trace.tasks() {
                    assert!(
                        by_id
                            .insert(r.id, (r.start.as_ns(), r.end.as_ns()))
                            .is_none(),
                        "{ctx}: task {} recorded twice",
                        r.id
                    );
                    assert!(
                        r.submit <= r.ready && r.ready <= r.start && r.start <= r.end,
                        "{ctx}: task {} times out of order: {r:?}",
                        r.id
                    );
                    assert!((r.worker as usize) < workers);
                }
                for (r, preds) in trace.tasks() {
                    for p in preds {
                        let (_, pend) = by_id[p];
                        assert!(
                            pend <= r.start.as_ns(),
                            "{ctx}: task {} started before its predecessor {p} ended",
                            r.id
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn inferred_dependencies_match_sequential_consistency() {
    // w(a) -> r(a) x3 in parallel -> w(a): the writer waits for all readers (WAR), the
    // readers for the first writer (RAW), and a reader after a W waits for it.
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder().workers(2).trace(sink).build().unwrap();
    let cl = Codelet::new("n").cpu(|_| {});
    let a = rt.register(0u32);
    let w1 = rt.submit(Task::new(&cl).w(&a)).unwrap();
    let r: Vec<_> = (0..3)
        .map(|_| rt.submit(Task::new(&cl).r(&a)).unwrap())
        .collect();
    let w2 = rt.submit(Task::new(&cl).rw(&a)).unwrap();
    let w3 = rt.submit(Task::new(&cl).w(&a)).unwrap();
    rt.wait_all().unwrap();
    drop(rt);
    let trace = memory.into_trace().unwrap();
    let preds: HashMap<TaskId, Vec<TaskId>> = trace
        .tasks()
        .map(|(rec, p)| {
            let mut p = p.to_vec();
            p.sort_unstable();
            (rec.id, p)
        })
        .collect();
    assert_eq!(preds[&w1.id()], Vec::<TaskId>::new());
    for t in &r {
        assert_eq!(preds[&t.id()], vec![w1.id()]);
    }
    assert_eq!(
        preds[&w2.id()],
        r.iter().map(|t| t.id()).collect::<Vec<_>>()
    );
    assert_eq!(preds[&w3.id()], vec![w2.id()]);
}
