//! A device's memory limit, eviction and prefetch, on emulated GPUs (whose copies are
//! separate allocations: a copy evicted without its write-back, or a stale one used,
//! changes the result).

use std::sync::mpsc;
use std::time::Duration;

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task};
use taskwatt_scheduler::POLICIES;
use taskwatt_traces::{Arch, TraceSink, TransferKind};

const TILE: usize = 4096;
const TILE_BYTES: u64 = (TILE * 8) as u64;

/// A tiled product-like graph: C[i][j] += A[i] ⊙ B[j] for K rounds on a GPU-only codelet,
/// a CPU-only codelet that rescales A[i] between rounds, and the expected result computed
/// sequentially. 8 + 8 + 64 tiles of 32 KiB.
#[derive(Clone, Copy)]
struct Graph {
    n: usize,
    rounds: usize,
}

impl Graph {
    fn expected(&self) -> Vec<Vec<u64>> {
        let mut a: Vec<Vec<u64>> = (0..self.n).map(|i| vec![i as u64 + 1; TILE]).collect();
        let b: Vec<Vec<u64>> = (0..self.n).map(|j| vec![j as u64 + 2; TILE]).collect();
        let mut c = vec![vec![0u64; TILE]; self.n * self.n];
        for r in 0..self.rounds {
            for i in 0..self.n {
                for j in 0..self.n {
                    for k in 0..TILE {
                        c[i * self.n + j][k] += a[i][k] * b[j][k];
                    }
                }
            }
            if r + 1 < self.rounds {
                for ai in &mut a {
                    ai.iter_mut().for_each(|x| *x += 1);
                }
            }
        }
        c
    }

    fn total_bytes(&self) -> u64 {
        (2 * self.n + self.n * self.n) as u64 * TILE_BYTES
    }
}

/// Runs the graph on one CPU worker and one emulated GPU under `policy` with the device
/// limited to `limit` bytes; returns the result, the trace and the stats.
fn run(
    g: &Graph,
    policy: &str,
    limit: u64,
) -> (
    Result<Vec<Vec<u64>>, RuntimeError>,
    taskwatt_traces::Trace,
    taskwatt_runtime::RuntimeStats,
) {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .policy(policy)
        .gpu_memory_limit(limit)
        .trace(sink)
        .build()
        .unwrap();
    let fma = Codelet::new("fma").gpu(|ctx| {
        let a = ctx.r::<Vec<u64>>(0);
        let b = ctx.r::<Vec<u64>>(1);
        let c = ctx.rw::<Vec<u64>>(2);
        for k in 0..c.len() {
            c[k] += a[k] * b[k];
        }
    });
    let bump = Codelet::new("bump").cpu(|ctx| {
        ctx.rw::<Vec<u64>>(0).iter_mut().for_each(|x| *x += 1);
    });
    let a: Vec<_> = (0..g.n)
        .map(|i| rt.register_replicated_bytes(vec![i as u64 + 1; TILE], TILE_BYTES))
        .collect();
    let b: Vec<_> = (0..g.n)
        .map(|j| rt.register_replicated_bytes(vec![j as u64 + 2; TILE], TILE_BYTES))
        .collect();
    let c: Vec<_> = (0..g.n * g.n)
        .map(|_| rt.register_replicated_bytes(vec![0u64; TILE], TILE_BYTES))
        .collect();
    for r in 0..g.rounds {
        for i in 0..g.n {
            for j in 0..g.n {
                rt.submit(Task::new(&fma).r(&a[i]).r(&b[j]).rw(&c[i * g.n + j]))
                    .unwrap();
            }
        }
        if r + 1 < g.rounds {
            for ai in &a {
                rt.submit(Task::new(&bump).rw(ai)).unwrap();
            }
        }
    }
    let waited = rt.wait_all();
    let stats = rt.stats();
    let result = waited.map(|()| c.into_iter().map(|h| rt.unregister(h).unwrap()).collect());
    drop((a, b));
    rt.shutdown().unwrap();
    (result, memory.into_trace().unwrap(), stats)
}

#[test]
fn a_graph_four_times_the_device_memory_completes_right_under_every_policy() {
    let g = Graph { n: 8, rounds: 3 };
    let expected = g.expected();
    let limit = g.total_bytes() / 4;
    for p in POLICIES {
        let (result, trace, stats) = run(&g, p.name, limit);
        let result = result.unwrap_or_else(|e| panic!("{}: {e}", p.name));
        assert!(result == expected, "{}: wrong result", p.name);
        // The data is four times the limit, and the GPU-only codelet runs on the device.
        assert!(
            !trace.evictions.is_empty() && stats.evictions == trace.evictions.len() as u64,
            "{}: {} evictions in the trace, {stats:?}",
            p.name,
            trace.evictions.len()
        );
        // C tiles are written on the device only: some had to be written back.
        let write_backs: Vec<_> = trace
            .transfers
            .iter()
            .filter(|t| t.kind == TransferKind::WriteBack)
            .collect();
        let dirty = trace.evictions.iter().filter(|e| e.written_back).count();
        assert!(dirty > 0, "{}", p.name);
        assert_eq!(write_backs.len(), dirty, "{}", p.name);
        assert!(write_backs.iter().all(|t| t.src == 1 && t.dst == 0));
        assert_eq!(stats.written_back, dirty as u64);
        // Nothing on the device beyond the limit, ever: at any time, the copies made and
        // not yet evicted fit (replayed from the trace, per handle).
        let mut events: Vec<(u64, i8, u64)> = Vec::new();
        for t in trace.transfers.iter().filter(|t| t.dst == 1) {
            events.push((t.end.0, 1, t.handle));
        }
        for e in &trace.evictions {
            events.push((e.time.0, -1, e.handle));
        }
        events.sort_unstable();
        let mut on = std::collections::HashSet::new();
        let mut peak = 0u64;
        for (_, d, h) in events {
            if d > 0 {
                on.insert(h);
            } else {
                on.remove(&h);
            }
            peak = peak.max(on.len() as u64 * TILE_BYTES);
        }
        assert!(
            peak <= limit,
            "{}: {peak} bytes on a {limit}-byte device",
            p.name
        );
        assert!(stats.device_peak_bytes <= limit && stats.device_peak_bytes >= peak);

        // Prefetch: copies made ahead of their task start before it.
        let starts: std::collections::HashMap<u64, (u64, Arch)> = trace
            .tasks()
            .map(|(r, _)| (r.id, (r.start.0, r.arch)))
            .collect();
        let prefetched: Vec<_> = trace
            .transfers
            .iter()
            .filter(|t| t.kind == TransferKind::Prefetch)
            .collect();
        assert!(!prefetched.is_empty(), "{}: no prefetch", p.name);
        assert_eq!(stats.prefetches, prefetched.len() as u64);
        for t in &prefetched {
            let (start, arch) = starts[&t.task.unwrap()];
            assert!(t.start.0 < start, "{}: a prefetch after its task", p.name);
            assert_eq!(arch, Arch::Gpu);
        }
        // The CPU-only codelet never ran on the GPU worker.
        let bump = trace.codelets.iter().find(|c| c.name == "bump").unwrap().id;
        assert!(trace
            .tasks()
            .filter(|(r, _)| r.codelet == bump)
            .all(|(r, _)| r.arch == Arch::Cpu));
    }
}

#[test]
fn without_a_pipeline_nothing_is_prefetched_and_the_result_is_the_same() {
    let (sink, _memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .gpu_pipeline(0)
        .trace(sink)
        .build()
        .unwrap();
    let v = rt.register_replicated_bytes(vec![1u64; TILE], TILE_BYTES);
    let add = Codelet::new("add").gpu(|ctx| ctx.rw::<Vec<u64>>(0)[0] += 1);
    for _ in 0..10 {
        rt.submit(Task::new(&add).rw(&v)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(rt.stats().prefetches, 0);
    assert_eq!(rt.unregister(v).unwrap()[0], 11);
}

/// Runs `f` on a thread and fails the test if it does not end within `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("hung instead of failing")
}

#[test]
fn a_limit_below_one_tile_fails_the_task_naming_the_limit_and_never_hangs() {
    let g = Graph { n: 2, rounds: 1 };
    for limit in [TILE_BYTES - 1, 2 * TILE_BYTES] {
        // Below one tile: no copy fits. Two tiles: each fits, a task's three do not.
        let (result, trace, _) = within(60, move || run(&g, "dmda", limit));
        let err = result.unwrap_err();
        let RuntimeError::TasksFailed { failures, .. } = &err else {
            panic!("{err}");
        };
        let m = &failures[0].message;
        assert!(
            m.contains("gpu_memory_limit") && m.contains("memory node 1"),
            "limit {limit}: {m}"
        );
        drop(trace);
    }
    assert!(Runtime::builder()
        .emulated_gpus(1)
        .gpu_memory_limit(0)
        .build()
        .is_err());
}

#[test]
fn parts_of_a_vector_and_a_matrix_run_on_gpus_and_land_in_their_parent() {
    use taskwatt_runtime::{Filter, Matrix, MatrixPart, VectorPart};
    let f = |x: u64| ((x * 3 + 1) * 3 + 1) * 3 + 1;
    // 8 vector parts of 4 KiB: with room for 3, parts are evicted and written back.
    for limit in [None, Some(3 * 4096)] {
        for policy in ["eager", "lws", "dmda"] {
            let mut b = Runtime::builder()
                .workers(1)
                .emulated_gpus(1)
                .policy(policy);
            if let Some(l) = limit {
                b = b.gpu_memory_limit(l);
            }
            let rt = b.build().unwrap();
            let scale = Codelet::new("scale").gpu(|ctx| {
                ctx.rw::<VectorPart<u64>>(0)
                    .iter_mut()
                    .for_each(|x| *x = *x * 3 + 1)
            });
            let v = rt.register_replicated((0..4096u64).collect::<Vec<_>>());
            let parts = rt.partition(&v, Filter::Blocks(8)).unwrap();
            for _ in 0..3 {
                for p in parts.iter() {
                    rt.submit(Task::new(&scale).rw(p)).unwrap();
                }
            }
            // All done before the parts are retired (which frees their device copies): the
            // eight parts went through room for three.
            rt.wait_all().unwrap();
            rt.unpartition(parts).unwrap();
            let got = rt.unregister(v).unwrap();
            assert!(
                got.iter().enumerate().all(|(i, x)| *x == f(i as u64)),
                "{policy}, limit {limit:?}"
            );
            let stats = rt.stats();
            assert_eq!(stats.executed, 24);
            if limit.is_some() {
                assert!(stats.evictions > 0 && stats.written_back > 0, "{stats:?}");
            }
            // A matrix's blocks (strided views) too: each element gets its block's index.
            let m = rt.register_replicated(Matrix::from_fn(30, 20, |i, j| (i * 100 + j) as u64));
            let mark = Codelet::new("mark").gpu(|ctx| {
                let k = *ctx.arg::<u64>();
                let b = ctx.rw::<MatrixPart<u64>>(0);
                for j in 0..b.cols() {
                    b.col_mut(j).iter_mut().for_each(|x| *x += 1000 * k);
                }
            });
            let blocks = rt.partition(&m, Filter::Grid { rows: 3, cols: 2 }).unwrap();
            for (k, blk) in blocks.iter().enumerate() {
                rt.submit(Task::new(&mark).rw(blk).arg(k as u64)).unwrap();
            }
            rt.unpartition(blocks).unwrap();
            let m = rt.unregister(m).unwrap();
            for j in 0..20 {
                for i in 0..30 {
                    // Blocks by block column, then block row: 10 rows, 10 columns each.
                    let k = (j / 10) * 3 + i / 10;
                    assert_eq!(*m.get(i, j), (i * 100 + j + 1000 * k) as u64, "{policy}");
                }
            }
        }
    }
    // Parts of data registered for the CPU only stay there: a GPU-only codelet is refused.
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .build()
        .unwrap();
    let v = rt.register(vec![0u64; 64]);
    let parts = rt.partition(&v, Filter::Blocks(2)).unwrap();
    let gpu_only = Codelet::new("gpu_only").gpu(|_| {});
    assert!(rt.submit(Task::new(&gpu_only).rw(&parts[0])).is_err());
}

#[test]
fn handles_unregistered_while_the_device_evicts_others_lose_nothing() {
    // Unregistering a handle drops its device copy while the GPU worker and its
    // prefetcher evict copies to make room: both under the handle's transfer lock (a
    // double free, caught here, before they were), and a copy being handled elsewhere
    // makes a task wait, never fail.
    let f = |x: u64| ((x * 3 + 1) * 3 + 1) * 3 + 1;
    for round in 0..10 {
        let rt = Runtime::builder()
            .workers(1)
            .emulated_gpus(1)
            .policy(["eager", "lws"][round % 2])
            .gpu_memory_limit(3 * 4096)
            .build()
            .unwrap();
        let scale = Codelet::new("scale").gpu(|ctx| {
            ctx.rw::<Vec<u64>>(0)
                .iter_mut()
                .for_each(|x| *x = *x * 3 + 1)
        });
        let hs: Vec<_> = (0..8u64)
            .map(|k| rt.register_replicated((k * 512..(k + 1) * 512).collect::<Vec<u64>>()))
            .collect();
        for _ in 0..3 {
            for h in &hs {
                rt.submit(Task::new(&scale).rw(h)).unwrap();
            }
        }
        // No wait: each unregistration waits for its own handle's tasks only.
        let got: Vec<u64> = hs
            .into_iter()
            .flat_map(|h| rt.unregister(h).unwrap())
            .collect();
        rt.wait_all().unwrap();
        assert_eq!(rt.stats().failed, 0);
        assert!(got.iter().enumerate().all(|(i, x)| *x == f(i as u64)));
    }
}
