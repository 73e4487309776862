//! The apps on an emulated GPU that holds a quarter of their data: every policy completes,
//! the result is checked, and the trace shows the evictions, the write-backs and the
//! copies made ahead of their task.

mod common;

use common::{ok, s, taskwatt};
use taskwatt::traces::TransferKind;

#[test]
fn cholesky_and_gemm_complete_on_a_device_a_quarter_of_their_data_under_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    // f64, tiles of 64² (32 KiB): Cholesky 1024² is 8 MiB, GEMM's three 512² matrices 6 MiB.
    // Which tasks the GPU gets depends on timing (one CPU worker beside it): the bound
    // is checked on every run, and each app must have evicted under some policy.
    for (app, n, limit) in [("cholesky", "1024", 2u64 << 20), ("gemm", "512", 3 << 19)] {
        let mut evicted = 0;
        for p in taskwatt::scheduler::POLICIES {
            let trace = dir.path().join(format!("{app}-{}.twt", p.name));
            let out = ok(&[
                "run",
                app,
                "--n",
                n,
                "--tile",
                "64",
                "--sched",
                p.name,
                "--workers",
                "1",
                "--gpus",
                "1",
                "--gpu-memory-limit",
                &limit.to_string(),
                "--no-energy",
                "--no-perfmodel",
                "--trace",
                s(&trace),
                "--json",
            ]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let what = format!("{app} under {}", p.name);
            assert_eq!(v["app"]["check"]["passed"], true, "{what}");
            let t = taskwatt::traces::read_trace(&trace).unwrap();
            evicted += t.evictions.len();
            assert_eq!(
                v["stats"]["evictions"].as_u64(),
                Some(t.evictions.len() as u64),
                "{what}"
            );
            assert_eq!(
                t.transfers
                    .iter()
                    .filter(|c| c.kind == TransferKind::WriteBack)
                    .count(),
                t.evictions.iter().filter(|e| e.written_back).count(),
                "{what}"
            );
            // Never more on the device than the limit: the copies made to it and not
            // evicted yet, replayed from the trace.
            let mut events: Vec<(u64, bool, u64, u64)> = t
                .transfers
                .iter()
                .filter(|c| c.dst == 1)
                .map(|c| (c.end.0, true, c.handle, c.bytes))
                .chain(
                    t.evictions
                        .iter()
                        .map(|e| (e.time.0, false, e.handle, e.bytes)),
                )
                .collect();
            events.sort_unstable();
            let mut on = std::collections::HashMap::new();
            for (_, add, h, b) in events {
                if add {
                    on.insert(h, b);
                } else {
                    on.remove(&h);
                }
                let held: u64 = on.values().sum();
                assert!(held <= limit, "{what}: {held} bytes on the device");
            }
            // Copies made ahead of their task start before it.
            let starts: std::collections::HashMap<u64, u64> =
                t.tasks().map(|(r, _)| (r.id, r.start.0)).collect();
            assert!(t
                .transfers
                .iter()
                .filter(|c| c.kind == TransferKind::Prefetch)
                .all(|c| c.start.0 < starts[&c.task.unwrap()]));
        }
        assert!(evicted > 0, "{app}: no eviction under any policy");
    }
}

#[test]
fn a_device_limit_below_one_tile_is_an_error_naming_it() {
    let out = taskwatt(&[
        "run",
        "gemm",
        "--n",
        "256",
        "--tile",
        "64",
        "--workers",
        "1",
        "--gpus",
        "1",
        "--sched",
        "dmda",
        "--gpu-memory-limit",
        "16KiB",
        "--no-energy",
        "--no-perfmodel",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("16.0 KiB") && err.contains("raise the limit"),
        "{err}"
    );
    // The handle by the name the app gave it (`handle 0` said nothing of which tile).
    assert!(err.contains("][0]`)"), "{err}");
    let out = taskwatt(&["run", "gemm", "--gpus", "1", "--gpu-memory-limit", "lots"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("64MiB"));
}
