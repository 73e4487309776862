//! Times one simulation of a 1 M-task stencil graph per policy (a quick look; the
//! criterion benchmark `cargo bench -p taskwatt-benches --bench whatif` is the measure).

use std::time::Instant;

use taskwatt_traces::{Arch, CodeletInfo};
use taskwatt_whatif::{simulate, GraphBuilder, GraphTask, Platform, SimOptions};

fn main() {
    let (width, steps) = (1000u32, 1000u32);
    let mut b = GraphBuilder::new(vec![CodeletInfo {
        id: 0,
        name: "stencil".into(),
        archs: vec![Arch::Cpu],
    }]);
    let mut preds = Vec::new();
    for s in 0..steps {
        for i in 0..width {
            preds.clear();
            if s > 0 {
                for j in i.saturating_sub(1)..=(i + 1).min(width - 1) {
                    preds.push((s - 1) * width + j);
                }
            }
            let task = GraphTask {
                id: u64::from(s * width + i),
                codelet: 0,
                arch: Arch::Cpu,
                priority: 0,
                footprint: 0,
                duration_ns: 50_000 + u64::from((s * 7919 + i * 104_729) % 100_000),
            };
            b.task(task, &preds);
        }
    }
    let g = b.build();
    for platform in ["this-machine", "2x16"] {
        let p = Platform::builtin(platform).unwrap().unwrap();
        for policy in ["eager", "lws", "dmda"] {
            for energy in [false, true] {
                let mut o = SimOptions::new(policy);
                o.energy = energy;
                o.record = energy;
                let t = Instant::now();
                let r = simulate(&g, &p, &o).unwrap();
                let s = t.elapsed().as_secs_f64();
                println!(
                    "{platform:>12} {policy:>6} {:>14}: {:.3} s host, {:.2} M tasks/s, makespan {:.3} s virtual",
                    if energy { "meters+records" } else { "time only" },
                    s,
                    g.len() as f64 / s / 1e6,
                    r.makespan_ns as f64 * 1e-9
                );
            }
        }
    }
}
