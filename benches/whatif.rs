//! The what-if simulator's throughput: simulated tasks per second of host time, on a
//! 1 M-task graph (a 1000-wide stencil over 1000 steps: each task after three of the
//! previous step), one host core. Policies eager, lws and dmda; 2 workers (the
//! `this-machine` platform) and 32 (`2x16`); with the simulated meters and the records
//! (what `taskwatt simulate` does) and without (time only). And the same graph with data
//! on the 2-GPU platform (`2cpu-2gpu`): each task writes a handle of its own and reads
//! its three predecessors' (1 M handles of 32 KiB), so copies to and from the GPUs are
//! simulated. Figures in BENCHMARKS.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use taskwatt::traces::{AccessMode, Arch, CodeletInfo};
use taskwatt::whatif::{simulate, Graph, GraphBuilder, GraphTask, Platform, SimOptions};

/// A `width` x `steps` stencil graph; durations 50-150 µs, deterministic. With `data`,
/// the codelet has a GPU implementation and each task writes a handle of its own and reads
/// its predecessors'.
fn grid(width: u32, steps: u32, data: bool) -> Graph {
    let mut b = GraphBuilder::new(vec![CodeletInfo {
        id: 0,
        name: "stencil".into(),
        archs: if data {
            vec![Arch::Cpu, Arch::Gpu]
        } else {
            vec![Arch::Cpu]
        },
    }]);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut preds = Vec::with_capacity(3);
    for s in 0..steps {
        for i in 0..width {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            preds.clear();
            if s > 0 {
                let row = (s - 1) * width;
                for j in i.saturating_sub(1)..=(i + 1).min(width - 1) {
                    preds.push(row + j);
                }
            }
            let t = b.task(
                GraphTask {
                    id: u64::from(s * width + i),
                    codelet: 0,
                    arch: Arch::Cpu,
                    priority: 0,
                    footprint: 0,
                    duration_ns: 50_000 + x % 100_000,
                },
                &preds,
            );
            if data {
                for &p in &preds {
                    b.access(t, u64::from(p), AccessMode::R, 32 << 10);
                }
                b.access(t, u64::from(s * width + i), AccessMode::W, 32 << 10);
            }
        }
    }
    b.build()
}

fn throughput(c: &mut Criterion) {
    let g = grid(1000, 1000, false);
    let mut group = c.benchmark_group("whatif_1m_tasks");
    group.throughput(Throughput::Elements(g.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for platform in ["this-machine", "2x16"] {
        let p = Platform::builtin(platform).unwrap().unwrap();
        for policy in ["eager", "lws", "dmda"] {
            for energy in [false, true] {
                let mut opts = SimOptions::new(policy);
                opts.energy = energy;
                opts.record = energy;
                let id = format!(
                    "{platform}/{policy}/{}",
                    if energy {
                        "meters+records"
                    } else {
                        "time-only"
                    }
                );
                group.bench_with_input(BenchmarkId::from_parameter(id), &opts, |b, o| {
                    b.iter(|| simulate(&g, &p, o).unwrap().makespan_ns)
                });
            }
        }
    }
    group.finish();
}

/// The graph with data on two GPUs: the copies' bookkeeping per task (issue 31: it once
/// grew with the number of handles).
fn with_data(c: &mut Criterion) {
    let g = grid(1000, 1000, true);
    let mut group = c.benchmark_group("whatif_1m_tasks_data");
    group.throughput(Throughput::Elements(g.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    let p = Platform::builtin("2cpu-2gpu").unwrap().unwrap();
    for policy in ["eager", "dmda"] {
        let opts = SimOptions::new(policy);
        let id = format!("2cpu-2gpu/{policy}/meters+records");
        group.bench_with_input(BenchmarkId::from_parameter(id), &opts, |b, o| {
            b.iter(|| simulate(&g, &p, o).unwrap().makespan_ns)
        });
    }
    group.finish();
}

criterion_group!(benches, throughput, with_data);
criterion_main!(benches);
