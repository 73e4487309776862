//! Imports a real StarPU `tasks.rec` (StarPU 1.4.12, `cholesky_implicit -size 4096
//! -nblocks 16`, scheduler lws, 2 CPU workers; see tests/data/.../README.md) and checks it
//! against what the run is known to have executed.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::PathBuf;

use taskwatt_traces::*;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/starpu-1.4.12-cholesky-lws/tasks.rec")
}

#[test]
fn real_cholesky_trace() {
    let imp = import_starpu(data(), &ImportOptions::new(TimeUnit::Ms)).unwrap();
    let t = &imp.trace;

    let mut per_name: BTreeMap<&str, u64> = BTreeMap::new();
    for (r, _) in t.tasks() {
        *per_name.entry(t.codelet_name(r.codelet)).or_default() += 1;
    }
    let want: BTreeMap<&str, u64> =
        BTreeMap::from([("GEMM", 560), ("POTRF", 16), ("SYRK", 120), ("TRSM", 120)]);
    assert_eq!(per_name, want);
    assert_eq!(t.task_count(), 816);

    // 1258 records: 136 WontUse controls, 306 internal or unexecuted, 816 executed.
    assert_eq!(
        imp.skipped,
        StarpuSkipped {
            control: 136,
            not_executed: 306,
            no_worker: 0,
        }
    );
    assert_eq!((imp.named_from_model, imp.unnamed), (0, 0));

    let workers: BTreeSet<u32> = t.tasks().map(|(r, _)| r.worker).collect();
    assert_eq!(workers, BTreeSet::from([0, 1]));
    assert_eq!(t.meta.workers.len(), 2);
    assert!(t.meta.workers.iter().all(|w| w.arch == Arch::Cpu));

    let ids: HashSet<u64> = t.tasks().map(|(r, _)| r.id).collect();
    assert_eq!(ids.len(), 816, "JobIds are unique");
    for (r, preds) in t.tasks() {
        assert!(r.submit <= r.start && r.start <= r.end, "{r:?}");
        let uniq: HashSet<_> = preds.iter().collect();
        assert_eq!(uniq.len(), preds.len(), "deduplicated");
        // Tiles of 256x256 doubles: 1 to 3 handles of 262144 bytes.
        assert!([262_144, 524_288, 786_432].contains(&r.footprint), "{r:?}");
    }
    // The first POTRF (JobId 35) as it appears in the file.
    let (p, preds) = t.tasks().find(|(r, _)| r.id == 35).unwrap();
    assert_eq!(t.codelet_name(p.codelet), "POTRF");
    assert_eq!(
        (p.worker, p.priority, p.submit.0, p.start.0, p.end.0),
        (1, 32, 129_965_111, 132_053_077, 132_976_125)
    );
    assert!(preds.is_empty());
    let (trsm, preds) = t.tasks().find(|(r, _)| r.id == 36).unwrap();
    assert_eq!(t.codelet_name(trsm.codelet), "TRSM");
    assert_eq!(preds, &[35]);

    // About 176 ms of execution.
    let (a, b) = t.span();
    let makespan_ms = b.saturating_sub(a) as f64 * 1e-6;
    assert!((100.0..250.0).contains(&makespan_ms), "{makespan_ms}");
    // Each worker runs one task at a time.
    for w in [0, 1] {
        let mut iv: Vec<(u64, u64)> = t
            .tasks()
            .filter(|(r, _)| r.worker == w)
            .map(|(r, _)| (r.start.0, r.end.0))
            .collect();
        iv.sort();
        assert!(
            iv.windows(2).all(|p| p[0].1 <= p[1].0),
            "worker {w} overlaps"
        );
    }

    // Through the file format and out to Perfetto.
    let dir = tempfile::tempdir().unwrap();
    let twt = dir.path().join("cholesky.twt");
    t.save(&twt).unwrap();
    assert_eq!(&read_trace(&twt).unwrap(), t);
    let mut json = Vec::new();
    export_chrome(&twt, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let x = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert_eq!(x, 816);
}

#[test]
fn with_energy_samples_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples.csv");
    let mut f = std::fs::File::create(&samples).unwrap();
    writeln!(f, "time,domain,energy_j").unwrap();
    for i in 0..=40u64 {
        // 5 ms steps over the run, 20 W on the package.
        writeln!(f, "{},package-0,{}", 125 + 5 * i, i as f64 * 0.1).unwrap();
    }
    drop(f);
    let opts = ImportOptions::new(TimeUnit::Ms).samples(&samples);
    let imp = import_starpu(data(), &opts).unwrap();
    let t = &imp.trace;
    assert_eq!(t.samples.len(), 41);
    assert_eq!(t.domains.len(), 1);
    assert_eq!(t.domains[0].domain, Domain::CpuPackage { id: 0 });
    assert_eq!(t.domains[0].workers, [0, 1]);
    assert_eq!(t.meters[0].backend, "import");
    assert!(!t.is_simulated());
    assert_eq!(t.samples[1].t, Timestamp(130_000_000));
    assert_eq!(t.end.as_ref().unwrap().samples, 41);
}
