//! The what-if simulator's throughput: simulated tasks per second of host time, on a
//! 1 M-task graph (a 1000-wide stencil over 1000 steps: each task after three of the
//! previous step), one host core. Policies eager, lws and dmda; 2 workers (the
//! `this-machine` platform) and 32 (`2x16`); with the simulated meters and the records
//! (what `taskwatt simulate` does) and without (time only). Figures in BENCHMARKS.md.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use taskwatt::traces::{Arch, CodeletInfo};
use taskwatt::whatif::{simulate, Graph, GraphBuilder, GraphTask, Platform, SimOptions};

/// A `width` x `steps` stencil graph; durations 50-150 µs, deterministic.
fn grid(width: u32, steps: u32) -> Graph {
    let mut b = GraphBuilder::new(vec![CodeletInfo {
        id: 0,
        name: "stencil".into(),
        archs: vec![Arch::Cpu],
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
            b.task(
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
        }
    }
    b.build()
}

fn throughput(c: &mut Criterion) {
    let g = grid(1000, 1000);
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

criterion_group!(benches, throughput);
criterion_main!(benches);
