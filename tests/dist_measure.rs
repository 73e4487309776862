//! `DistMeasure`: the energy of a distributed application of one's own, ranks as threads
//! (`ThreadNet`), as a user would write it: each rank records its trace, the first rank of
//! each node meters it, and rank 0 merges the traces and attributes the job's energy.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use taskwatt::mpi::{DistTask, ThreadNet};
use taskwatt::traces::{read_trace, RunOutcome};
use taskwatt::{Codelet, DistMeasure, DistMeasureError, DistReport, Runtime};

/// A task that spins for `us` µs on the vector it writes, its buffer `at`.
fn spin(name: &'static str, us: u64, at: usize) -> Codelet {
    Codelet::new(name).cpu(move |ctx| {
        let t = Instant::now();
        let v = ctx.rw::<Vec<f64>>(at);
        while t.elapsed() < Duration::from_micros(us) {
            v[0] += 1.0;
        }
    })
}

/// Runs `rank` on each of `nets`, each as a thread (the ranks of one job writing `trace`),
/// and returns their results in rank order (`Err` for a rank that panicked).
fn ranks<T: Send + 'static>(
    nets: Vec<ThreadNet>,
    trace: &Path,
    rank: impl Fn(ThreadNet, PathBuf) -> T + Send + Sync + 'static,
) -> Vec<std::thread::Result<T>> {
    let rank = std::sync::Arc::new(rank);
    let threads: Vec<_> = nets
        .into_iter()
        .map(|net| {
            let (rank, trace) = (rank.clone(), trace.to_path_buf());
            std::thread::spawn(move || rank(net, trace))
        })
        .collect();
    threads.into_iter().map(|t| t.join()).collect()
}

/// Runs `size` ranks, `per_node` to a node, each with one worker: 8 blocks owned round
/// robin, 30 sweeps of `sweep` (300 µs) and, every third sweep, a `halo` (100 µs) reading
/// a block and writing its neighbour (a message when they live on different ranks).
fn job(
    trace: &Path,
    size: usize,
    per_node: usize,
    fail_on: Option<usize>,
) -> Vec<Result<DistReport, DistMeasureError>> {
    let handles = ranks(
        ThreadNet::with_nodes(size, per_node),
        trace,
        move |net, trace| {
            let mut m = DistMeasure::new(&trace)
                .period(Duration::from_millis(2))
                .start(Box::new(net), |share| {
                    assert!(share.local < share.ranks_on_node);
                    Runtime::builder().workers(1)
                })?;
            let rank = m.share().rank;
            let d = m.runtime();
            let sweep = spin("sweep", 300, 0);
            let halo = spin("halo", 100, 1);
            let boom = Codelet::new("boom").cpu(move |_| {
                if fail_on == Some(rank) {
                    panic!("boom on rank {rank}");
                }
            });
            let blocks: Vec<_> = (0..8)
                .map(|i| d.register(i % size, vec![0.0f64; 64]).unwrap())
                .collect();
            for s in 0..30 {
                for b in &blocks {
                    d.submit(DistTask::new(&sweep).rw(b)).unwrap();
                }
                if s % 3 == 0 {
                    for w in blocks.windows(2) {
                        d.submit(DistTask::new(&halo).r(&w[0]).rw(&w[1])).unwrap();
                    }
                }
                if s == 10 && fail_on.is_some() {
                    d.submit(DistTask::new(&boom).rw(&blocks[1]).on_rank(1))
                        .unwrap();
                }
            }
            m.finish()
        },
    );
    handles.into_iter().map(|h| h.unwrap()).collect()
}

fn rank_traces(trace: &Path, size: usize) -> Vec<PathBuf> {
    (0..size).map(|r| taskwatt::rank_path(trace, r)).collect()
}

#[test]
fn rank_0_merges_every_ranks_trace_and_attributes_the_jobs_energy_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    // Four ranks on two nodes: ranks 0 and 2 meter their node.
    let reports: Vec<DistReport> = job(&trace, 4, 2, None)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for (r, rep) in reports.iter().enumerate() {
        assert_eq!((rep.rank, rep.size), (r, 4));
        assert_eq!(rep.trace, rank_traces(&trace, 4)[r]);
        assert!(rep.stats.tasks > 0, "rank {r} ran no task");
        assert_eq!(rep.energy.is_some(), r == 0, "rank {r}");
        assert_eq!(rep.merged.is_some(), r == 0, "rank {r}");
    }
    let rep0 = &reports[0];
    assert!(rep0.not_merged.is_none(), "{:?}", rep0.not_merged);
    assert_eq!(rep0.merged.as_deref(), Some(trace.as_path()));
    // Every task of every rank is in the merged trace, on one clock.
    let merged = read_trace(&trace).unwrap();
    let ran: u64 = reports.iter().map(|r| r.stats.tasks).sum();
    assert_eq!(merged.tasks().count() as u64, ran);
    assert_eq!(merged.end.as_ref().unwrap().outcome, RunOutcome::Complete);
    // The messages of both sides, counted by each rank, are in the merged trace.
    let sent: usize = reports
        .iter()
        .map(|r| r.messages.iter().filter(|m| m.send).count())
        .sum();
    assert!(sent > 0, "the halos crossed ranks");
    // Both nodes' energy, simulated by the merge over their ranks' tasks, and said so.
    let energy = rep0.energy.as_ref().unwrap();
    assert!(energy.simulated);
    assert!(energy.text().contains("SIMULATED"), "{}", energy.text());
    let domains: Vec<String> = energy
        .attribution
        .report
        .domains
        .iter()
        .map(|d| d.name.clone())
        .collect();
    for node in ["node0", "node1"] {
        assert!(
            domains.iter().any(|d| d.contains(&format!("node {node}:"))),
            "{node} metered: {domains:?}"
        );
    }
    // Both task types are attributed energy.
    let text = energy.text();
    assert!(text.contains("sweep") && text.contains("halo"), "{text}");
    // The job's summary ends it, as `taskwatt report` prints it (it was missing).
    let job = energy.job.as_ref().expect("the job's summary");
    assert_eq!((job.ranks, job.nodes.len()), (4, 2));
    assert!(text.contains("job: 4 rank(s) on 2 node(s)"), "{text}");
    assert!(energy.json()["job"]["nodes"].is_array());
}

#[test]
fn a_task_failing_on_a_rank_fails_the_job_and_leaves_its_traces_marked_failed() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    let results = job(&trace, 2, 2, Some(1));
    let e = results[1].as_ref().unwrap_err().to_string();
    assert!(e.contains("boom"), "{e}");
    // Rank 0 waits for the failed task's block (a halo reads it): it fails too.
    assert!(
        results[0].is_err(),
        "{:?}",
        results[0].as_ref().map(|r| r.rank)
    );
    for p in rank_traces(&trace, 2) {
        let t = read_trace(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(
            t.end.unwrap().outcome,
            RunOutcome::Failed,
            "{}",
            p.display()
        );
    }
    assert!(!trace.exists(), "no merged trace of a failed job");
}

#[test]
fn without_merging_each_rank_finishes_its_own_trace_for_taskwatt_merge() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    let handles = ranks(ThreadNet::new(2), &trace, move |net, trace| {
        let mut m = DistMeasure::new(&trace)
            .merge(false)
            .energy(false)
            .start(Box::new(net), |_| Runtime::builder().workers(1))
            .unwrap();
        let d = m.runtime();
        let c = spin("c", 50, 0);
        let h = d.register(0, vec![0.0f64; 8]).unwrap();
        for _ in 0..10 {
            d.submit(DistTask::new(&c).rw(&h)).unwrap();
        }
        m.finish().unwrap()
    });
    let reports: Vec<DistReport> = handles.into_iter().map(|h| h.unwrap()).collect();
    assert!(reports
        .iter()
        .all(|r| r.merged.is_none() && r.energy.is_none()));
    let how = reports[0].not_merged.as_deref().unwrap_or_default();
    assert!(
        how.contains("taskwatt merge") && how.contains("job.rank*.twt"),
        "{how}"
    );
    assert!(!trace.exists());
    // The library's merge takes them as `taskwatt merge` would.
    let inputs = rank_traces(&trace, 2)
        .into_iter()
        .map(|p| (p.display().to_string(), read_trace(&p).unwrap()))
        .collect();
    let (merged, report) = taskwatt::mpi::merge::merge(inputs).unwrap();
    assert_eq!(report.ranks, 2);
    assert_eq!(merged.tasks().count(), 10);
}

#[test]
fn a_rank_whose_thread_panics_before_finish_ends_the_job_at_once() {
    // A user's `.unwrap()` failing on rank 1's main thread: rank 1 unwound, and rank 0
    // waited for its messages for the stall limit (300 s) instead of ending.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    let t0 = Instant::now();
    let handles = ranks(ThreadNet::new(2), &trace, move |net, trace| {
        let mut m = DistMeasure::new(&trace)
            .start(Box::new(net), |_| Runtime::builder().workers(1))
            .unwrap();
        let rank = m.share().rank;
        let d = m.runtime();
        let c = spin("c", 50, 0);
        let hs: Vec<_> = (0..2)
            .map(|o| d.register(o, vec![0.0f64; 8]).unwrap())
            .collect();
        for _ in 0..5 {
            d.submit(DistTask::new(&c).rw(&hs[0])).unwrap();
            d.submit(DistTask::new(&c).rw(&hs[1])).unwrap();
        }
        if rank == 1 {
            panic!("the application's own check failed on rank 1");
        }
        // Rank 0 reads rank 1's block: a message that will never come.
        d.submit(DistTask::new(&c).rw(&hs[0]).r(&hs[1])).unwrap();
        m.finish().map(|_| ())
    });
    let results = handles;
    assert!(results[1].is_err(), "rank 1 panicked");
    let r0 = results[0].as_ref().expect("rank 0 returns");
    assert!(r0.is_err(), "rank 0 cannot finish without rank 1");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "ended after {:?}",
        t0.elapsed()
    );
    // Rank 1's trace is finished all the same, marked failed.
    let t = read_trace(taskwatt::rank_path(&trace, 1)).unwrap();
    assert_eq!(t.end.unwrap().outcome, RunOutcome::Failed);
}

#[test]
fn the_merged_meter_covers_the_job_not_whole_periods_around_it() {
    // A 4 ms graph sampled every second read a window of 1 s: 250 times its energy.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    let handles = ranks(ThreadNet::new(2), &trace, move |net, trace| {
        let mut m = DistMeasure::new(&trace)
            .period(Duration::from_millis(500))
            .merge(false)
            .start(Box::new(net), |_| Runtime::builder().workers(1))
            .unwrap();
        let d = m.runtime();
        let c = spin("c", 1000, 0);
        let h = d.register(0, vec![0.0f64; 8]).unwrap();
        for _ in 0..10 {
            d.submit(DistTask::new(&c).rw(&h)).unwrap();
        }
        m.finish().unwrap()
    });
    for h in handles {
        h.unwrap();
    }
    let inputs = rank_traces(&trace, 2)
        .into_iter()
        .map(|p| (p.display().to_string(), read_trace(&p).unwrap()))
        .collect();
    let (merged, _) = taskwatt::mpi::merge::merge(inputs).unwrap();
    let times: Vec<u64> = merged.samples.iter().map(|s| s.t.as_ns()).collect();
    let (lo, hi) = (times.iter().min().unwrap(), times.iter().max().unwrap());
    let span_s = (hi - lo) as f64 * 1e-9;
    // The job: two clock rendezvous around 10 ms of tasks, a few ms of start and end.
    assert!(
        span_s < 0.2,
        "the readings span {span_s} s for a job of ~10 ms"
    );
    // One interval per domain for the base and a type: the report says it attributes
    // nothing, above the tables it prints all the same.
    let att = taskwatt::attribute_trace(&merged, &Default::default()).unwrap();
    let text = taskwatt::energy::attribution::render_report(
        &att.report,
        &taskwatt::energy::attribution::RenderOptions { simulated: true },
    );
    assert!(
        text.contains("NOT ATTRIBUTED: ") && text.contains("for 2 unknowns"),
        "{text}"
    );
}

#[test]
fn end_application_ends_the_ranks_graph_before_its_own_checks() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("job.twt");
    let handles = ranks(ThreadNet::new(2), &trace, move |net, trace| {
        let mut m = DistMeasure::new(&trace)
            .merge(false)
            .energy(false)
            .start(Box::new(net), |_| Runtime::builder().workers(1))
            .unwrap();
        let rank = m.share().rank;
        let d = m.runtime();
        let c = spin("c", 200, 0);
        let h = d.register(0, vec![0.0f64; 8]).unwrap();
        for _ in 0..10 {
            d.submit(DistTask::new(&c).rw(&h)).unwrap();
        }
        m.end_application().unwrap();
        if rank == 0 {
            // The application's own check of its result.
            std::thread::sleep(Duration::from_millis(300));
        }
        m.finish().unwrap()
    });
    for h in handles {
        h.unwrap();
    }
    let t = read_trace(taskwatt::rank_path(&trace, 0)).unwrap();
    let graph = t.markers.iter().find(|m| m.name == "graph").unwrap();
    let s = (graph.end.as_ns() - graph.start.as_ns()) as f64 * 1e-9;
    assert!(s < 0.2, "the graph span lasted {s} s, the check included");
}
