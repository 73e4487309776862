//! Merging ranks' traces (ranks as threads, two ranks to a node): one view, every receive
//! after its send, and each node's simulated meter run over the node's tasks, attributed
//! per node as one node is.

use taskwatt_mpi::apps::{run, DistApp};
use taskwatt_mpi::{DistRuntime, ThreadNet, Transport};
use taskwatt_runtime::Runtime;
use taskwatt_traces::{Chunk, Clock, ClockSample, CommChunk, Trace, TraceSink};

/// Runs `app` on `size` ranks, `per_node` to a node, each writing a trace in memory as
/// `taskwatt run --mpi --trace` does (the simulated meter left to the merge).
fn traces(
    app: DistApp,
    size: usize,
    per_node: usize,
    n: usize,
    tile: usize,
) -> Vec<(String, Trace)> {
    let threads: Vec<_> = ThreadNet::with_nodes(size, per_node)
        .into_iter()
        .map(move |net| {
            std::thread::spawn(move || {
                let (rank, node) = (net.rank(), net.node_name());
                let (sink, memory): (TraceSink, _) = TraceSink::memory();
                let rt = Runtime::builder()
                    .workers(1)
                    .policy("lws")
                    .trace(sink.clone())
                    .app(app.name())
                    .build()
                    .unwrap();
                let workers: Vec<u32> = rt.workers().iter().map(|w| w.id).collect();
                // As `run --mpi --trace` does: messages streamed to the trace as they go.
                let mut d = DistRuntime::with_trace(rt, Box::new(net), sink.clone()).unwrap();
                let names = d.node_names().unwrap();
                let leader = names.iter().position(|x| *x == node) == Some(rank);
                let clock = |d: &mut DistRuntime| {
                    let at = Clock::now();
                    let (offset_ns, rtt_ns) = d.clock_offset().unwrap();
                    ClockSample {
                        at,
                        offset_ns,
                        rtt_ns,
                    }
                };
                let first = clock(&mut d);
                // Idle time before the graph, as a run's start has, pins the base power.
                std::thread::sleep(std::time::Duration::from_millis(300));
                let out = run(&mut d, app, n, tile, 2, 11).unwrap();
                let last = clock(&mut d);
                let (_, events) = d.shutdown().unwrap();
                let mut cfg = taskwatt_energy::SimConfig::default();
                cfg.package.noise_sigma_w = 2.0;
                sink.send(Chunk::Comms(CommChunk {
                    rank: rank as u32,
                    size: size as u32,
                    clock: vec![first, last],
                    workers,
                    node,
                    sim_meter: leader.then(|| serde_json::to_value(&cfg).unwrap()),
                    sim_period_ns: 10_000_000,
                    events,
                    partial: false,
                }));
                drop(sink);
                if rank == 0 {
                    assert_eq!(out.check_passed, Some(true));
                }
                (format!("rank {rank}"), memory.into_trace().unwrap())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn ranks_merge_into_one_view_with_every_receive_after_its_send() {
    let mut t = traces(DistApp::Cholesky, 4, 2, 512, 64);
    t.reverse(); // any order
    let (merged, report) = taskwatt_mpi::merge::merge(t).unwrap();
    assert_eq!(report.ranks, 4);
    assert!(report.messages > 0);
    assert_eq!(report.after, 0);
    assert_eq!(report.unmatched, 0);
    // nt = 8: 8 potrf, 28 trsm, 28 syrk, 56 gemm.
    assert_eq!(merged.tasks().count(), 120);
    let ids: std::collections::HashSet<u64> = merged.tasks().map(|(r, _)| r.id).collect();
    assert_eq!(ids.len(), 120, "task ids unique in the job");
    // Every predecessor is a task of the merged trace.
    for (_, preds) in merged.tasks() {
        assert!(preds.iter().all(|p| ids.contains(p)));
    }
    assert_eq!(merged.comms.len(), 4);
    assert_eq!(report.nodes.len(), 2);
    for n in &report.nodes {
        assert_eq!(n.energy, "simulated at merge", "{n:?}");
        assert_eq!(n.ranks.len(), 2);
    }
    // Per node: a package and a DRAM domain, each covering the node's two ranks' workers.
    let pkgs: Vec<_> = merged
        .domains
        .iter()
        .filter(|d| matches!(d.domain, taskwatt_traces::Domain::CpuPackage { .. }))
        .collect();
    assert_eq!(pkgs.len(), 2);
    for d in &pkgs {
        assert_eq!(d.workers.len(), 2, "{d:?}");
    }
    // A merged trace writes and reads back.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.twt");
    merged.save(&p).unwrap();
    let back = taskwatt_traces::read_trace(&p).unwrap();
    assert_eq!(back.comms.len(), 4);
}

#[test]
fn each_node_is_attributed_against_its_truth() {
    // 512 gemms of 128: a few tenths of a second of work per node between idle spells.
    let t = traces(DistApp::Gemm, 4, 2, 1024, 128);
    let (merged, _) = taskwatt_mpi::merge::merge(t).unwrap();
    let a = taskwatt_energy::attribution::attribute_trace(
        &merged,
        &taskwatt_energy::attribution::AttributionOptions::default(),
    )
    .unwrap();
    let pkgs: Vec<_> = a
        .report
        .domains
        .iter()
        .filter(|d| matches!(d.domain, taskwatt_traces::Domain::CpuPackage { .. }))
        .collect();
    assert_eq!(pkgs.len(), 2);
    for d in pkgs {
        let truth = d.truth.as_ref().expect("a simulated node has its truth");
        for row in &truth.rows {
            let Some(e) = row.error_pct else { continue };
            eprintln!(
                "{}: {} {:+.2} % (shown as a measurement: {}, interval covers: {:?})",
                d.name, row.name, e, row.reliable, row.covered
            );
            // A node's package runs 2 workers on a contended simulated machine, a few
            // tenths of a second of gemms: what is shown as a measurement is within 10 %,
            // and what is not is flagged (a short run leaves the contention loosely pinned).
            assert!(
                !row.reliable || e.abs() < 10.0,
                "{}: {} shown as a measurement, off by {e:.1} %",
                d.name,
                row.name
            );
            // Shown or not, no value is grossly off. What is not shown as a measurement is
            // flagged so in the report; its error spreads widely on a short run: the worst
            // of 10 runs was -8.4 % on an Intel Xeon VM, but on a 2-vCPU AMD EPYC VM (stop
            // 47), in about 20 runs of the code before that stop and 20 after, one value
            // each passed 20 % (+36.4 % before, +38.7 % after), the others within 21 %.
            let bound = if row.reliable { 10.0 } else { 50.0 };
            assert!(e.abs() < bound, "{}: {} off by {e:.1} %", d.name, row.name);
        }
    }
}

#[test]
fn the_traces_of_a_rank_cut_short_still_merge() {
    let mut t = traces(DistApp::Cholesky, 2, 2, 256, 64);
    // Rank 1 died before its end: no Comms chunk, no End chunk; its meta says its rank.
    let (_, r1) = &mut t[1];
    r1.comms.clear();
    r1.end = None;
    r1.meta.params.insert("mpi_rank".into(), "1".into());
    r1.meta.params.insert("mpi_size".into(), "2".into());
    let (merged, report) = taskwatt_mpi::merge::merge(t).unwrap();
    assert_eq!(report.ranks, 2);
    assert!(report.unmatched > 0, "rank 0's messages have no other half");
    assert_eq!(
        merged.end.unwrap().outcome,
        taskwatt_traces::RunOutcome::Failed
    );
    // Rank 1 died after its start's Comms chunk (what `run --mpi` writes before the
    // graph: rank, node, workers, first clock estimate, meter) and its messages' partial
    // chunks: the merge keeps its clock estimate, its node's meter and its messages.
    let mut t = traces(DistApp::Cholesky, 2, 1, 256, 64);
    let (_, whole) = taskwatt_mpi::merge::merge(t.clone()).unwrap();
    let (_, r1) = &mut t[1];
    let last = r1.comms.pop().unwrap();
    assert!(!last.partial && r1.comms.iter().all(|c| c.partial));
    let streamed: usize = r1.comms.iter().map(|c| c.events.len()).sum();
    assert_eq!(streamed, last.events.len(), "every message was streamed");
    r1.comms.push(CommChunk {
        clock: vec![last.clock[0]],
        events: Vec::new(),
        ..last
    });
    r1.end = None;
    let (_, report) = taskwatt_mpi::merge::merge(t.clone()).unwrap();
    assert_eq!(
        report.messages, whole.messages,
        "the streamed messages are kept"
    );
    assert_eq!(report.unmatched, 0);
    // Without its last partial chunk (killed before it was sent), those messages lack
    // their other half.
    let (_, r1) = &mut t[1];
    let lost = r1.comms.iter().rposition(|c| c.partial).unwrap();
    r1.comms.remove(lost);
    let (_, report) = taskwatt_mpi::merge::merge(t).unwrap();
    assert!(
        report.clocks[1].at0 > 0.0,
        "rank 1's first clock estimate is kept"
    );
    assert!(report.unmatched > 0);
    let node1 = report.nodes.iter().find(|n| n.ranks == [1]).unwrap();
    assert_eq!(node1.energy, "simulated at merge", "{:?}", report.nodes);
    // Without its meta, the trace is refused by name.
    let mut t = traces(DistApp::Cholesky, 2, 2, 256, 64);
    t[1].1.comms.clear();
    let e = taskwatt_mpi::merge::merge(t).unwrap_err();
    assert!(e.contains("rank 1") && e.contains("no Comms chunk"), "{e}");
}

/// Issue 34: the traces of two jobs are refused, naming each trace's job, unless forced.
#[test]
fn traces_of_two_jobs_are_refused_unless_forced() {
    let mut t = traces(DistApp::Cholesky, 2, 2, 256, 64);
    for (k, (_, tr)) in t.iter_mut().enumerate() {
        let job = if k == 0 { "aaaa-1" } else { "bbbb-2" };
        tr.meta
            .params
            .insert(taskwatt_mpi::merge::JOB_PARAM.into(), job.into());
    }
    let e = taskwatt_mpi::merge::merge(t.clone()).unwrap_err();
    assert!(
        e.contains("2 different jobs")
            && e.contains("rank 0 is of job aaaa-1")
            && e.contains("--force"),
        "{e}"
    );
    let (_, report) = taskwatt_mpi::merge::merge_any_jobs(t.clone()).unwrap();
    assert_eq!(report.ranks, 2);
    // One job named on every trace, or on none: merged.
    for (_, tr) in t.iter_mut() {
        tr.meta
            .params
            .insert(taskwatt_mpi::merge::JOB_PARAM.into(), "aaaa-1".into());
    }
    taskwatt_mpi::merge::merge(t).unwrap();
}
