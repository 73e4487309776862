//! The engine against hand-computed schedules, the real policies in virtual time, the
//! simulated meters against their truth, and the trace it writes.

use taskwatt_traces::{AccessMode, Arch, CodeletInfo};
use taskwatt_whatif::{
    figures, simulate, to_trace, type_energy, Graph, GraphBuilder, GraphTask, Platform, SimOptions,
    WhatIfError,
};

const MS: u64 = 1_000_000;

fn codelets() -> Vec<CodeletInfo> {
    ["potrf", "gemm"]
        .iter()
        .enumerate()
        .map(|(i, n)| CodeletInfo {
            id: i as u32,
            name: (*n).into(),
            archs: vec![Arch::Cpu],
        })
        .collect()
}

fn task(id: u64, codelet: u32, ms: u64) -> GraphTask {
    GraphTask {
        id,
        codelet,
        arch: Arch::Cpu,
        priority: 0,
        footprint: 0,
        duration_ns: ms * MS,
    }
}

fn platform(extra: &str) -> Platform {
    Platform::from_toml_str(
        &format!(
            "name = \"test\"\n[cpu]\ncores_per_package = 2\n[runtime]\noverhead_us = 0\n\
             [meter]\nprofile = \"ideal\"\n{extra}"
        ),
        "test",
    )
    .unwrap()
}

fn time_only(policy: &str) -> SimOptions {
    let mut o = SimOptions::new(policy);
    o.energy = false;
    o
}

#[test]
fn a_chain_takes_the_sum_and_a_fan_takes_its_share() {
    // potrf(10) -> 4 x gemm(10) -> potrf(10): 10 + 2 x 10 + 10 on two workers.
    let mut b = GraphBuilder::new(codelets());
    let root = b.task(task(0, 0, 10), &[]);
    let mids: Vec<u32> = (1..=4).map(|i| b.task(task(i, 1, 10), &[root])).collect();
    b.task(task(5, 0, 10), &mids);
    let g = b.build();
    for policy in ["eager", "ws", "lws", "prio", "dmda", "dmdas"] {
        let r = simulate(&g, &platform(""), &time_only(policy)).unwrap();
        assert_eq!(r.makespan_ns, 40 * MS, "{policy}");
        assert_eq!(r.tasks, 6);
        assert_eq!(r.per_worker.iter().sum::<u64>(), 6);
    }
    // With 3 us of runtime overhead per task: three levels on the critical path, the
    // middle one two tasks deep.
    let r = simulate(
        &g,
        &Platform::from_toml_str(
            "name = \"t\"\n[cpu]\ncores_per_package = 2\n[runtime]\noverhead_us = 3\n",
            "t",
        )
        .unwrap(),
        &time_only("eager"),
    )
    .unwrap();
    assert_eq!(r.makespan_ns, 40 * MS + 4 * 3_000);
}

#[test]
fn dmda_decides_in_virtual_time_on_a_heterogeneous_platform() {
    // Independent gemms, 8x faster on a GPU: dmda puts nearly all of them on the GPUs and
    // finishes well before eager, which hands them to whoever asks.
    let mut b = GraphBuilder::new(codelets());
    for i in 0..200 {
        b.task(task(i, 1, 8), &[]);
    }
    let g = b.build();
    let p = platform("[gpu]\ncount = 2\n[speed.factors]\ngemm = { gpu = 8.0 }\n");
    let dmda = simulate(&g, &p, &time_only("dmda")).unwrap();
    let eager = simulate(&g, &p, &time_only("eager")).unwrap();
    let on_gpus = |r: &taskwatt_whatif::SimRun| r.per_worker[2] + r.per_worker[3];
    assert!(on_gpus(&dmda) >= 170, "{:?}", dmda.per_worker);
    // 200 x 1 ms on 2 GPUs is 100 ms; the CPUs take 8 ms each.
    assert!(dmda.makespan_ns <= 95 * MS, "{}", dmda.makespan_ns);
    assert!(
        eager.makespan_ns > dmda.makespan_ns,
        "eager {} <= dmda {}",
        eager.makespan_ns,
        dmda.makespan_ns
    );
}

#[test]
fn copies_follow_the_data_between_memory_nodes() {
    // A task writes a tile on a GPU; the next one reads it on the CPU: one copy back.
    let mut b = GraphBuilder::new(codelets());
    let a = b.task(task(0, 1, 1), &[]);
    b.access(a, 7, AccessMode::RW, 1 << 20);
    let c = b.task(task(1, 0, 1), &[a]);
    b.access(c, 7, AccessMode::R, 1 << 20);
    let g = b.build();
    // gemm on the GPU only (the CPU factor makes it 1000x slower), potrf on the CPU only.
    let p = platform(
        "[gpu]\ncount = 1\nbandwidth_gb_s = 1.0\nlatency_us = 0.001\n[speed.factors]\ngemm = { gpu = 1.0, cpu = 0.001 }\n",
    );
    let r = simulate(&g, &p, &time_only("dmda")).unwrap();
    assert_eq!(r.per_worker[2], 1, "{:?}", r.per_worker);
    // In to the GPU, back to the host: 2 copies of 1 MiB at 1 GB/s.
    assert_eq!(r.copies, (2, 2 << 20));
    let copy_ns = (1u64 << 20) as f64; // 1 ns per byte
    let want = 2.0 * copy_ns + 2e6;
    assert!(
        (r.makespan_ns as f64 - want).abs() < 10.0,
        "{} vs {want}",
        r.makespan_ns
    );
}

#[test]
fn a_task_that_no_worker_can_run_is_named() {
    let mut b = GraphBuilder::new(codelets());
    let mut t = task(42, 1, 1);
    t.arch = Arch::Gpu;
    b.task(t, &[]);
    let e = simulate(&b.build(), &platform(""), &time_only("eager")).unwrap_err();
    assert!(matches!(e, WhatIfError::NoWorker { task: 42, .. }), "{e}");
    let m = e.to_string();
    assert!(m.contains("gemm") && m.contains("[gpu]"), "{m}");
    let e = simulate(&Graph::default(), &platform(""), &time_only("fifo")).unwrap_err();
    assert!(e.to_string().contains("fifo"), "{e}");
}

#[test]
fn the_simulated_meters_integrate_power_over_virtual_time() {
    // 400 gemms of 5 ms on 2 cores: 1 s of virtual time, both workers busy.
    let mut b = GraphBuilder::new(codelets());
    for i in 0..400 {
        b.task(task(i, 1, 5), &[]);
    }
    let g = b.build();
    let p = platform("");
    let r = simulate(&g, &p, &SimOptions::new("lws")).unwrap();
    assert_eq!(r.makespan_ns, 1_000 * MS);
    let t = to_trace(&r, &g, &p, None);
    let f = figures(&t);
    // Truth: package 30 W base + 2 x 16 W gemm; DRAM 4 W + 2 x 1.8 W (default.toml).
    let pkg = f
        .domains
        .iter()
        .find(|d| d.name.contains("package"))
        .unwrap();
    let dram = f.domains.iter().find(|d| d.name.contains("dram")).unwrap();
    assert!((pkg.energy_j - 62.0).abs() < 0.5, "{}", pkg.energy_j);
    assert!((dram.energy_j - 7.6).abs() < 0.2, "{}", dram.energy_j);
    let types = type_energy(&t, t.truth.as_ref().unwrap());
    assert_eq!(types.len(), 1);
    assert!((types[0].dynamic_j - 2.0 * 17.8).abs() < 1e-6, "{types:?}");
    // The trace says what it is, and the attribution finds the truth back.
    assert!(t.is_simulated());
    assert_eq!(t.meta.params["simulated"], "virtual time");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.twt");
    t.save(&path).unwrap();
    let back = taskwatt_traces::read_trace(&path).unwrap();
    assert_eq!(back.tasks().count(), 400);
    let a = taskwatt_energy::attribution::attribute_trace(
        &back,
        &taskwatt_energy::attribution::AttributionOptions::default(),
    )
    .unwrap();
    assert_eq!(a.report.tasks, 400);
}

#[test]
fn the_same_inputs_give_the_same_schedule() {
    let mut b = GraphBuilder::new(codelets());
    let mut prev = Vec::new();
    for i in 0..300u64 {
        let preds: Vec<u32> = prev.iter().rev().take(2).copied().collect();
        prev.push(b.task(task(i, (i % 2) as u32, 1 + i % 7), &preds));
    }
    let g = b.build();
    let p = platform("[gpu]\ncount = 1\n[speed.factors]\ngemm = { gpu = 3.0 }\n");
    for policy in ["ws", "lws", "dmda"] {
        let a = simulate(&g, &p, &SimOptions::new(policy)).unwrap();
        let b = simulate(&g, &p, &SimOptions::new(policy)).unwrap();
        assert_eq!(a.makespan_ns, b.makespan_ns, "{policy}");
        assert_eq!(a.per_worker, b.per_worker, "{policy}");
        assert_eq!(
            a.energy.unwrap().samples.len(),
            b.energy.unwrap().samples.len()
        );
    }
}

#[test]
fn a_task_of_no_duration_starts_before_it_ends() {
    // Zero-length tasks (an imported trace at µs resolution) on one worker, then a real
    // one: the meter must not see a task left running.
    let mut b = GraphBuilder::new(codelets());
    let mut prev = Vec::new();
    for i in 0..5 {
        prev = vec![b.task(task(i, 1, 0), &prev)];
    }
    b.task(task(9, 1, 100), &prev);
    let g = b.build();
    let p = platform("");
    let r = simulate(&g, &p, &SimOptions::new("eager")).unwrap();
    assert_eq!(r.makespan_ns, 100 * MS);
    let t = to_trace(&r, &g, &p, None);
    let f = figures(&t);
    let pkg = f
        .domains
        .iter()
        .find(|d| d.name.contains("package"))
        .unwrap();
    // 30 W base + 16 W gemm for 0.1 s: a task left "running" would add 16 W more.
    assert!((pkg.energy_j - 4.6).abs() < 0.1, "{}", pkg.energy_j);
}

#[test]
fn a_reader_waits_for_a_copy_still_on_its_way() {
    // A GPU writes a 100 MiB tile; two CPU readers start at once on node 0: the second
    // finds the host copy valid but in flight, and waits for it too.
    let mut b = GraphBuilder::new(codelets());
    let w = b.task(task(0, 1, 1), &[]);
    b.access(w, 1, AccessMode::W, 100 << 20);
    for i in 1..=2 {
        let r = b.task(task(i, 0, 1), &[w]);
        b.access(r, 1, AccessMode::R, 100 << 20);
    }
    let g = b.build();
    let p = platform(
        "[gpu]\ncount = 1\nbandwidth_gb_s = 1.0\nlatency_us = 0.001\n[speed.factors]\ngemm = { gpu = 1.0, cpu = 0.001 }\n",
    );
    let r = simulate(&g, &p, &SimOptions::new("dmda")).unwrap();
    // 1 ms on the GPU, 104.9 ms of copy back, then both readers (1 ms each, in parallel).
    let copy = (100u64 << 20) as f64;
    let want = 1e6 + copy + 1e6;
    assert!(
        (r.makespan_ns as f64 - want).abs() < 1e3,
        "{} vs {want}",
        r.makespan_ns
    );
    assert_eq!(r.copies.0, 1, "one copy back, shared by both readers");
}

#[test]
fn a_copy_between_gpus_is_one_copy_staged_through_the_host() {
    // A GPU writes a 1 MiB tile; two long GPU readers then run on both GPUs. The one on the
    // other GPU gets one copy from the writer's GPU, as the runtime makes it (one transfer,
    // two bus crossings without peer access), and the host's copy stays invalid: a CPU
    // reader after them copies from the GPU again.
    let mut b = GraphBuilder::new(codelets());
    let w = b.task(task(0, 1, 1), &[]);
    b.access(w, 1, AccessMode::W, 1 << 20);
    let mut readers = Vec::new();
    for i in 1..=2 {
        let r = b.task(task(i, 1, 20), &[w]);
        b.access(r, 1, AccessMode::R, 1 << 20);
        readers.push(r);
    }
    let c = b.task(task(3, 0, 1), &readers);
    b.access(c, 1, AccessMode::R, 1 << 20);
    let g = b.build();
    let p = platform(
        "[gpu]\ncount = 2\nbandwidth_gb_s = 1.0\nlatency_us = 0.001\n[speed.factors]\ngemm = { gpu = 1.0, cpu = 0.001 }\n",
    );
    let r = simulate(&g, &p, &SimOptions::new("dmda")).unwrap();
    assert_eq!(&r.per_worker[2..], &[2, 1], "{:?}", r.per_worker);
    let peer: Vec<_> = r
        .transfers
        .iter()
        .filter(|t| t.src != 0 && t.dst != 0)
        .collect();
    assert_eq!(peer.len(), 1, "{:?}", r.transfers);
    let took = peer[0].end.as_ns() - peer[0].start.as_ns();
    let crossing = (1u64 << 20) + 1; // 1 ns per byte, and the 1 ns latency
    assert!(took.abs_diff(2 * crossing) <= 2, "{took} ns");
    // The CPU reader copies from a GPU: the host was never made valid by the peer copy.
    let back: Vec<_> = r.transfers.iter().filter(|t| t.dst == 0).collect();
    assert_eq!(back.len(), 1, "{:?}", r.transfers);
    assert_eq!(r.copies.0, 2);
}

#[test]
fn a_gpu_counter_is_read_past_the_end_of_the_run() {
    // One GPU whose counter refreshes every 100 ms; 7 gemms of 30 ms on it. The GPU
    // domain's energy over the run is its truth: 60 W base and 180 W per gemm.
    let mut b = GraphBuilder::new(codelets());
    for i in 0..7 {
        b.task(task(i, 1, 30), &[]);
    }
    let g = b.build();
    let p = Platform::from_toml_str(
        "name = \"g\"\n[cpu]\ncores_per_package = 0\n[gpu]\ncount = 1\n[runtime]\noverhead_us = 0\n[speed.factors]\ngemm = { gpu = 1.0 }\n[meter]\nprofile = \"ideal\"\n[meter.gpu]\nupdate_interval_ms = 100\nnoise_sigma_w = 0.0\n",
        "g",
    )
    .unwrap();
    let r = simulate(&g, &p, &SimOptions::new("eager")).unwrap();
    assert_eq!(r.makespan_ns, 210 * MS);
    let e = r.energy.unwrap();
    let gpu = e
        .domains
        .iter()
        .find(|d| d.name.contains("GPU"))
        .unwrap()
        .id;
    let s: Vec<_> = e.samples.iter().filter(|s| s.domain == gpu).collect();
    let (first, last) = (s[0], s[s.len() - 1]);
    // A value from after the end (the counter's last update before the end is at 200 ms).
    assert!(
        last.t.as_ns() >= taskwatt_whatif::T0_NS + 210 * MS,
        "{:?}",
        last.t
    );
    let span = (last.t.as_ns() - first.t.as_ns()) as f64 * 1e-9;
    let truth = 60.0 * span + 180.0 * 0.21;
    let got = last.energy_j - first.energy_j;
    assert!(
        (got - truth).abs() / truth < 0.01,
        "{got} J against {truth} J"
    );
}

/// A graph shorter than its GPU counter's refresh (33 ms against 50 ms): interpolating
/// the readings spread the GPU's energy over the idle time to the next refresh, and put the
/// run 16 % low with an interval that excluded the truth (a user's imported StarPU
/// Cholesky on `2cpu-2gpu`). The run's figure is the machine's exact energy.
#[test]
fn a_graph_shorter_than_a_gpu_refresh_gets_its_exact_energy() {
    let mut b = GraphBuilder::new(codelets());
    // 3 gemms of 11 ms, one after the other: the GPU busy all of its 33 ms.
    let a = b.task(task(0, 1, 11), &[]);
    let c = b.task(task(1, 1, 11), &[a]);
    b.task(task(2, 1, 11), &[c]);
    let g = b.build();
    let p = Platform::from_toml_str(
        "name = \"g\"\n[cpu]\ncores_per_package = 0\n[gpu]\ncount = 1\n[runtime]\noverhead_us = 0\n[speed.factors]\ngemm = { gpu = 1.0 }\n[meter]\nprofile = \"ideal\"\n[meter.gpu]\nupdate_interval_ms = 50\nnoise_sigma_w = 0.0\n",
        "g",
    )
    .unwrap();
    let r = simulate(&g, &p, &SimOptions::new("eager")).unwrap();
    assert_eq!(r.makespan_ns, 33 * MS);
    let out = to_trace(&r, &g, &p, None);
    let gpu = |f: &taskwatt_whatif::RunFigures| {
        f.domains
            .iter()
            .find(|d| d.name.contains("GPU"))
            .unwrap()
            .energy_j
    };
    // 60 W base and 180 W per gemm, over 33 ms busy throughout.
    let truth = (60.0 + 180.0) * 0.033;
    let exact = gpu(&taskwatt_whatif::sim_figures(&r, &out));
    assert!(
        (exact - truth).abs() < 1e-6 * truth,
        "{exact} J against {truth} J"
    );
    // Interpolated between the refreshes at 0 and 50 ms, it was a third low.
    let interpolated = gpu(&figures(&out));
    assert!(interpolated < 0.8 * truth, "{interpolated} J");
}

#[test]
fn platform_limits_are_enforced_with_the_field_named() {
    for (extra, field) in [
        ("[gpu]\ncount = 40\n", "gpu.count"),
        (
            "[speed.factors]\ngemm = { gpu = 1e-300 }\n",
            "speed.factors.gemm.gpu",
        ),
        ("[runtime]\noverhead_us = 1e20\n", "runtime.overhead_us"),
        // Accepted before, and a replay of 120 tasks then ran for minutes.
        ("[runtime]\noverhead_us = 1e9\n", "runtime.overhead_us"),
        ("[gpu]\nlatency_us = 1e20\n", "gpu.latency_us"),
    ] {
        let text = format!("name = \"x\"\n[cpu]\ncores_per_package = 2\n{extra}");
        let e = Platform::from_toml_str(&text, "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{extra}: {e}");
    }
}

/// A recorded run whose hand-offs are mostly quick with a few long waits (a loaded
/// machine): 2 workers, 2 000 independent tasks of 10 µs, gaps of 0.2 µs but one in 20 of
/// 100 µs. The replay draws each task's overhead from the recorded distribution and
/// reproduces the makespan; the median gap alone (0.2 µs) made it a third too fast.
#[test]
fn the_overhead_is_drawn_from_the_recorded_hand_offs() {
    use taskwatt_traces::{TaskChunk, TaskRecord, Timestamp, Trace};
    let mut chunk = TaskChunk::default();
    let mut id = 0u64;
    let mut recorded_end = 0u64;
    for w in 0..2u32 {
        let mut t = 1_000u64;
        for k in 0..1000u64 {
            let mut r =
                TaskRecord::executed(id, 0, Arch::Cpu, w, Timestamp(t), Timestamp(t + 10_000));
            // Submitted and ready at the start of the run: every gap is a hand-off.
            r.submit = Timestamp(0);
            r.ready = Timestamp(0);
            chunk.push(r, &[]);
            id += 1;
            recorded_end = recorded_end.max(t + 10_000);
            t += 10_000 + if k % 20 == 19 { 100_000 } else { 200 };
        }
    }
    let trace = Trace {
        codelets: codelets(),
        tasks: vec![chunk],
        ..Trace::default()
    };
    let g = Graph::from_trace(&trace).unwrap();
    let o = g.measured_overhead().expect("hand-offs measured");
    // 999 hand-offs per worker, 49 of them long.
    let mean = (2.0 * 49.0 * 100_000.0 + 2.0 * 950.0 * 200.0) / 1998.0;
    assert_eq!((o.gaps, o.median_ns, o.p99_ns), (1998, 200, 100_000));
    assert!((o.mean_ns - mean).abs() < 1e-6, "{} vs {mean}", o.mean_ns);
    let p = Platform::from_toml_str(
        "name = \"test\"\n[cpu]\ncores_per_package = 2\n[meter]\nprofile = \"ideal\"\n",
        "test",
    )
    .unwrap();
    let r = simulate(&g, &p, &time_only("eager")).unwrap();
    let recorded = (recorded_end - 1_000) as f64;
    let err = r.makespan_ns as f64 / recorded - 1.0;
    eprintln!("replay error {:+.2} %", 100.0 * err);
    assert!(
        err.abs() < 0.05,
        "replay {} ns vs recorded {recorded} ns",
        r.makespan_ns
    );
    // The platform's constant, when it gives one, is used as it is.
    let p0 = platform("");
    let r0 = simulate(&g, &p0, &time_only("eager")).unwrap();
    assert!(r0.makespan_ns < r.makespan_ns * 3 / 4, "{}", r0.makespan_ns);
    assert!(
        r0.overhead_source.contains("constant"),
        "{}",
        r0.overhead_source
    );
}

/// A replica draws each task's deviation from its type's recorded ones: reproducible for
/// a seed, another run for another seed, and the same work on average.
#[test]
fn replicas_redraw_the_durations_from_the_recorded_variability() {
    let mut b = GraphBuilder::new(codelets());
    for i in 0..400 {
        // One type, 1 ms or 3 ms (mean 2 ms).
        b.task(task(i, 1, if i % 2 == 0 { 1 } else { 3 }), &[]);
    }
    let g = b.build();
    let p = platform("");
    let base = simulate(&g, &p, &time_only("eager")).unwrap();
    assert!(
        base.makespan_ns.abs_diff(400 * MS) <= 3 * MS,
        "{}",
        base.makespan_ns
    );
    let replica = |seed: u64| {
        let mut o = time_only("eager");
        o.replica_seed = Some(seed);
        simulate(&g, &p, &o).unwrap()
    };
    assert_eq!(replica(1).makespan_ns, replica(1).makespan_ns);
    let spans: Vec<u64> = (1..=16).map(|s| replica(s).makespan_ns).collect();
    assert!(spans.iter().any(|&m| m != spans[0]), "{spans:?}");
    let mean = spans.iter().sum::<u64>() as f64 / spans.len() as f64;
    // 400 draws of 1 or 3 ms: their sum's sd is 20 ms over 2 workers, 10 ms per worker.
    assert!((mean / (400.0 * MS as f64) - 1.0).abs() < 0.05, "{spans:?}");
    assert!(
        spans
            .iter()
            .all(|&m| (m as f64 / (400.0 * MS as f64) - 1.0).abs() < 0.2),
        "{spans:?}"
    );
}

/// Kernels 10 % slower with both cores of the package busy, recorded on 2 workers (both
/// busy for 100 tasks each, then one alone for 100): replayed on one worker, the tasks run
/// at their duration alone. Keeping the recorded durations made it 6.7 % too slow.
#[test]
fn durations_follow_the_busy_cores_of_the_simulated_package() {
    use taskwatt_traces::{RunMeta, TaskChunk, TaskRecord, Timestamp, Trace, WorkerInfo};
    let mut chunk = TaskChunk::default();
    let mut id = 0u64;
    let mut push = |w: u32, start: u64, d: u64| {
        let mut r =
            TaskRecord::executed(id, 1, Arch::Cpu, w, Timestamp(start), Timestamp(start + d));
        r.submit = Timestamp(0);
        r.ready = Timestamp(0);
        chunk.push(r, &[]);
        id += 1;
    };
    let both = 1_100_000; // 1.1 ms with company
    for k in 0..100 {
        push(0, k * both, both);
        push(1, k * both, both);
    }
    for k in 0..100 {
        push(0, 100 * both + k * MS, MS);
    }
    let workers = (0..2).map(|id| WorkerInfo::cpu(id, 0)).collect();
    let trace = Trace {
        meta: RunMeta {
            workers,
            ..RunMeta::default()
        },
        codelets: codelets(),
        tasks: vec![chunk],
        ..Trace::default()
    };
    let g = Graph::from_trace(&trace).unwrap();
    let law = &g.contention_laws().laws[&1];
    assert!((law.percent_per_core() - 10.0).abs() < 0.5, "{law:?}");
    let one = Platform::from_toml_str(
        "name = \"one\"\n[cpu]\ncores_per_package = 1\n[runtime]\noverhead_us = 0\n",
        "one",
    )
    .unwrap();
    let r = simulate(&g, &one, &time_only("eager")).unwrap();
    let alone = 300 * MS;
    assert!(
        r.makespan_ns.abs_diff(alone) < MS,
        "{} vs {alone}",
        r.makespan_ns
    );
    let mut kept = time_only("eager");
    kept.contention = false;
    let r = simulate(&g, &one, &kept).unwrap();
    assert!(r.makespan_ns.abs_diff(320 * MS) < MS, "{}", r.makespan_ns);
    // Back on two cores, both busy throughout: 300 tasks at 1.1 ms on 2 workers.
    let r = simulate(&g, &platform(""), &time_only("eager")).unwrap();
    assert!(
        r.makespan_ns.abs_diff(165 * MS) < 2 * MS,
        "{}",
        r.makespan_ns
    );
}

/// A `graph` marker that selects none of the trace's tasks (its start after its end) is
/// named, not reported as a trace without tasks.
#[test]
fn a_marker_that_selects_no_task_is_named() {
    use taskwatt_traces::{Marker, TaskChunk, TaskRecord, Timestamp, Trace};
    let mut chunk = TaskChunk::default();
    chunk.push(
        TaskRecord::executed(0, 0, Arch::Cpu, 0, Timestamp(10), Timestamp(20)),
        &[],
    );
    let trace = Trace {
        codelets: codelets(),
        tasks: vec![chunk],
        markers: vec![Marker {
            name: "graph".into(),
            start: Timestamp(30),
            end: Timestamp(5),
        }],
        ..Trace::default()
    };
    let e = Graph::from_trace(&trace).unwrap_err().to_string();
    assert!(e.contains("`graph` marker") && e.contains("1 tasks"), "{e}");
}

/// A recording's calibration tasks are counted. The machine's speed between runs is
/// estimated on stretches as long as the graph when the calibration spans enough of them,
/// else on shorter stretches (said so), else not at all: `simulate` then says the
/// calibration was too short, not that there was none.
#[test]
fn a_calibration_too_short_for_its_graph_is_told_from_none() {
    use taskwatt_traces::{Marker, TaskChunk, TaskRecord, Timestamp, Trace};
    // The graph: 100 tasks of 1 ms, one every 2 ms from 0; calibration: `n` tasks after
    // it, on a machine 10 % slower every other `step` tasks.
    let recording = |n: u64, marked: bool, step: u64| {
        let mut chunk = TaskChunk::default();
        for i in 0..100 + n {
            let speed = if (i / step).is_multiple_of(2) {
                1.0
            } else {
                1.1
            };
            let d = (MS as f64 * speed) as u64;
            let start = i * 2 * MS;
            chunk.push(
                TaskRecord::executed(i, 1, Arch::Cpu, 0, Timestamp(start), Timestamp(start + d)),
                &[],
            );
        }
        Trace {
            codelets: codelets(),
            tasks: vec![chunk],
            markers: if marked {
                vec![Marker {
                    name: "graph".into(),
                    start: Timestamp(0),
                    end: Timestamp(199 * MS),
                }]
            } else {
                Vec::new()
            },
            ..Trace::default()
        }
    };
    let none = Graph::from_trace(&recording(0, false, 100)).unwrap();
    assert_eq!((none.calibration_tasks(), none.speed_wander()), (0, None));
    // 40 calibration tasks: too few for graph-long stretches, and for shorter ones too
    // (six stretches of 23 tasks, fewer than a mean needs).
    let few = Graph::from_trace(&recording(40, true, 100)).unwrap();
    assert_eq!(few.len(), 100);
    assert_eq!(few.calibration_tasks(), 40);
    assert_eq!((few.speed_wander(), few.wander_window_ns()), (None, None));
    // 100, the speed stepping every 25 tasks (50 ms): two stretches as long as the graph,
    // fewer than needed; six of 67 ms instead, which see the steps.
    const { assert!(taskwatt_whatif::MIN_WANDER_WINDOWS > 2) };
    let short = Graph::from_trace(&recording(100, true, 25)).unwrap();
    assert_eq!(short.calibration_tasks(), 100);
    let w = short
        .speed_wander()
        .expect("estimated over shorter stretches");
    assert!((0.01..0.08).contains(&w), "{w}");
    let ns = short.wander_window_ns().expect("said to be shorter");
    assert!(ns < 199 * MS && ns > 50 * MS, "{ns}");
    // 700: eight stretches as long as the graph, alternately 10 % slower.
    let long = Graph::from_trace(&recording(700, true, 100)).unwrap();
    assert_eq!(long.calibration_tasks(), 700);
    let w = long.speed_wander().expect("estimated over eight stretches");
    assert!((0.03..0.07).contains(&w), "{w}");
    assert_eq!(long.wander_window_ns(), None, "graph-long stretches");
}

/// Codelets of one name are one type, as in the report: a reduction made anew each
/// iteration (`set_reduction` per iteration) was one type per iteration, each too small
/// for a duration law, and `simulate` listed it once per iteration.
#[test]
fn codelets_of_one_name_are_one_type() {
    use taskwatt_traces::{TaskChunk, TaskRecord, Timestamp, Trace};
    let mut codelets = codelets();
    for i in 2..5u32 {
        codelets.push(CodeletInfo {
            id: i,
            name: "norm_sum".into(),
            archs: vec![Arch::Cpu],
        });
    }
    let mut chunk = TaskChunk::default();
    for (id, c) in [(0u64, 2u32), (1, 3), (2, 4), (3, 1)] {
        let t = 1_000 + id * 20_000;
        chunk.push(
            TaskRecord::executed(id, c, Arch::Cpu, 0, Timestamp(t), Timestamp(t + 10_000)),
            &[],
        );
    }
    let trace = Trace {
        codelets,
        tasks: vec![chunk],
        ..Trace::default()
    };
    let g = Graph::from_trace(&trace).unwrap();
    let ids: Vec<u32> = g.tasks().iter().map(|t| t.codelet).collect();
    assert_eq!(ids, [2, 2, 2, 1]);
}

/// A loaded recording: one task of 200 ran 300 times as long as the others (a
/// preemption). Drawn 0 to 3 times per replica it made the replicas' makespans range
/// tenfold; it is named as an interruption, kept in the replay, left out of the draws.
#[test]
fn an_interrupted_task_is_kept_in_the_replay_and_left_out_of_the_draws() {
    let mut b = GraphBuilder::new(codelets());
    for i in 0..200u64 {
        let d = if i == 77 { 300 } else { 1 };
        b.task(task(i, 1, d), &[]);
    }
    let g = b.build();
    let long = g.interruptions();
    assert_eq!(long.len(), 1, "{long:?}");
    assert_eq!((long[0].0.as_str(), long[0].1), ("gemm", 1));
    let p = platform("");
    // The replay: the 300 ms task on one core, the 199 others on the other.
    let replay = simulate(&g, &p, &time_only("eager")).unwrap();
    assert!(replay.makespan_ns >= 300 * MS, "{}", replay.makespan_ns);
    // The replicas: 200 tasks of 1 ms each on 2 cores, whatever the seed.
    for seed in 0..8u64 {
        let mut o = time_only("eager");
        o.replica_seed = Some(seed);
        let r = simulate(&g, &p, &o).unwrap();
        let ms = r.makespan_ns as f64 / MS as f64;
        assert!((95.0..=110.0).contains(&ms), "seed {seed}: {ms} ms");
    }
}
