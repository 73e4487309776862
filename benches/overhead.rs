//! Per-task runtime overhead on empty tasks, beside rayon in the same run.
//!
//! Graphs (N tasks each):
//! - `independent`: N tasks with no dependency;
//! - `chain`: N tasks that each read-write one handle (every task depends on the previous);
//! - `fan`: one writer, N/2 readers of its handle that each write their own handle, and
//!   N/2 tasks that each read two of those (fan-out then fan-in, all through data).
//!
//! taskwatt runs with dependency inference (STF handles) and with tracing off and on (a
//! trace file written by the background writer). rayon runs the same shapes: `scope.spawn`
//! for independent tasks, atomic dependency counters for the chain and the fan (the
//! "rayon with counters" baseline of issue 3). A Taskflow-style executor (`taskflow_style.rs`:
//! a static graph with join counters, work-stealing workers that run the first successor
//! they make ready) runs them too, its graph built in the timed loop
//! (`taskflow-style/build+run`, as a submission builds taskwatt's) and built once and
//! rerun (`taskflow-style/run`, Taskflow's reuse of a taskflow). Throughput is reported per
//! task: ns/task is 1e9 / (elements per second).
//!
//! Run: `cargo bench --bench overhead`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use taskflow_style::{Executor, Graph};
use taskwatt::traces::{TraceSink, TraceWriter};
use taskwatt::{Codelet, Runtime, Task};

mod taskflow_style;

const N: usize = 20_000;

fn runtime(policy: &str, sink: TraceSink) -> Runtime {
    Runtime::builder()
        .workers(2)
        .policy(policy)
        .trace(sink)
        .build()
        .unwrap()
}

fn submit_graph(rt: &Runtime, cl: &Codelet, shape: &str) {
    match shape {
        "independent" => {
            for _ in 0..N {
                rt.submit(Task::new(cl)).unwrap();
            }
        }
        "chain" => {
            let h = rt.register(0u8);
            for _ in 0..N {
                rt.submit(Task::new(cl).rw(&h)).unwrap();
            }
        }
        "fan" => {
            let root = rt.register(0u8);
            rt.submit(Task::new(cl).w(&root)).unwrap();
            let mids: Vec<_> = (0..N / 2).map(|_| rt.register(0u8)).collect();
            for m in &mids {
                rt.submit(Task::new(cl).r(&root).w(m)).unwrap();
            }
            for w in mids.windows(2) {
                rt.submit(Task::new(cl).r(&w[0]).r(&w[1])).unwrap();
            }
        }
        _ => unreachable!(),
    }
    rt.wait_all().unwrap();
}

/// rayon with the same shapes; dependencies by atomic counters.
fn rayon_graph(pool: &rayon::ThreadPool, shape: &str) {
    match shape {
        "independent" => pool.scope(|s| {
            for _ in 0..N {
                s.spawn(|_| std::hint::black_box(()));
            }
        }),
        "chain" => {
            fn link(s: &rayon::Scope<'_>, left: usize) {
                std::hint::black_box(());
                if left > 0 {
                    s.spawn(move |s| link(s, left - 1));
                }
            }
            pool.scope(|s| s.spawn(|s| link(s, N - 1)));
        }
        "fan" => {
            let half = N / 2;
            // Join task i waits for mids i and i+1.
            let counts: Arc<Vec<AtomicUsize>> =
                Arc::new((0..half - 1).map(|_| AtomicUsize::new(2)).collect());
            pool.scope(|s| {
                s.spawn(|s| {
                    for m in 0..half {
                        let counts = counts.clone();
                        s.spawn(move |s| {
                            std::hint::black_box(m);
                            for j in [m.wrapping_sub(1), m] {
                                if j < half - 1 && counts[j].fetch_sub(1, Ordering::AcqRel) == 1 {
                                    s.spawn(move |_| {
                                        std::hint::black_box(j);
                                    });
                                }
                            }
                        });
                    }
                });
            });
        }
        _ => unreachable!(),
    }
}

/// The same shapes as a static graph for the Taskflow-style executor.
fn taskflow_graph(shape: &str) -> Graph {
    let mut g = Graph::with_capacity(N);
    match shape {
        "independent" => {
            for _ in 0..N {
                g.node();
            }
        }
        "chain" => {
            let mut last = g.node();
            for _ in 1..N {
                let n = g.node();
                g.precede(last, n);
                last = n;
            }
        }
        "fan" => {
            let root = g.node();
            let mids: Vec<u32> = (0..N / 2).map(|_| g.node()).collect();
            for &m in &mids {
                g.precede(root, m);
            }
            for w in mids.windows(2) {
                let j = g.node();
                g.precede(w[0], j);
                g.precede(w[1], j);
            }
        }
        _ => unreachable!(),
    }
    g
}

fn overhead(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let empty = Codelet::new("empty").cpu(|_| {});
    for shape in ["independent", "chain", "fan"] {
        let mut g = c.benchmark_group(format!("overhead/{shape}"));
        g.throughput(Throughput::Elements(N as u64));
        g.sample_size(20);
        g.bench_function("rayon", |b| b.iter(|| rayon_graph(&pool, shape)));
        let ex = Executor::new(2);
        g.bench_function(BenchmarkId::new("taskflow-style", "build+run"), |b| {
            b.iter(|| ex.run(&taskflow_graph(shape)))
        });
        let built = taskflow_graph(shape);
        g.bench_function(BenchmarkId::new("taskflow-style", "run"), |b| {
            b.iter(|| ex.run(&built))
        });
        drop(ex);
        for policy in ["eager", "ws", "lws", "prio"] {
            let rt = runtime(policy, TraceSink::null());
            g.bench_function(BenchmarkId::new("taskwatt-notrace", policy), |b| {
                b.iter(|| submit_graph(&rt, &empty, shape))
            });
            drop(rt);
            let writer =
                TraceWriter::create(dir.path().join(format!("{shape}-{policy}.twt"))).unwrap();
            let rt = runtime(policy, writer.sink());
            g.bench_function(BenchmarkId::new("taskwatt-trace", policy), |b| {
                b.iter(|| submit_graph(&rt, &empty, shape))
            });
            drop(rt);
            writer.finish().unwrap();
        }
        g.finish();
    }
}

criterion_group!(benches, overhead);
criterion_main!(benches);
