//! `taskwatt bench taskbench` end to end: every dependence pattern on taskwatt, rayon and
//! sequential gives the same task count, dependency count and checksum (each task's
//! output is a hash of its inputs', so the checksum changes if any edge is missed or
//! data flows from the wrong version); graphs joined with `-and`; Task Bench's summary
//! lines; and clear errors for unknown patterns and flags.

mod common;

use common::{ok, taskwatt};

/// The numbers a run reports.
#[derive(Debug, PartialEq, Eq)]
struct Report {
    tasks: u64,
    dependencies: u64,
    executed: u64,
    checksum: String,
}

fn field<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{out}"))
        .trim()
}

/// The systems of a `bench metg --json` summary, in order.
fn summary_systems(v: &serde_json::Value) -> Vec<&str> {
    v["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["system"].as_str().unwrap())
        .collect()
}

fn run(flags: &str, system: &[&str]) -> Report {
    let mut args = vec!["bench", "taskbench"];
    args.extend(flags.split_whitespace());
    args.extend(system);
    let out = ok(&args);
    Report {
        tasks: field(&out, "Total Tasks ").parse().unwrap(),
        dependencies: field(&out, "Total Dependencies ").parse().unwrap(),
        executed: field(&out, "Tasks Executed ").parse().unwrap(),
        checksum: field(&out, "Checksum ").to_string(),
    }
}

/// Runs `flags` on every system (taskwatt under `policy`), asserts they agree, and
/// returns the report.
fn agree(flags: &str, policy: &str) -> Report {
    let tw = run(
        flags,
        &["-worker", "2", "--system", "taskwatt", "--sched", policy],
    );
    let ry = run(flags, &["-worker", "2", "--system", "rayon"]);
    let sq = run(flags, &["--system", "sequential"]);
    assert_eq!(tw, ry, "taskwatt/{policy} vs rayon on `{flags}`");
    assert_eq!(tw, sq, "taskwatt/{policy} vs sequential on `{flags}`");
    assert_eq!(tw.executed, tw.tasks, "every task ran once on `{flags}`");
    tw
}

#[test]
fn every_pattern_agrees_across_systems() {
    let policies = ["eager", "ws", "lws", "prio"];
    let patterns = [
        ("trivial", "", Some(0)),
        ("no_comm", "", Some(9 * 4)),
        ("stencil_1d", "", Some(9 * (2 + 3 + 3 + 2))),
        ("stencil_1d_periodic", "", Some(9 * 12)),
        ("dom", "", None),
        ("tree", "", None),
        ("fft", "", None),
        ("all_to_all", "", Some(9 * 16)),
        ("nearest", "-radix 2", Some(9 * (1 + 2 + 2 + 2))),
        ("spread", "-radix 2 -period 2", Some(9 * 8)),
        ("random_nearest", "-radix 3 -fraction 0.5", None),
    ];
    for (i, (pattern, extra, deps)) in patterns.into_iter().enumerate() {
        let flags =
            format!("-steps 10 -width 4 -type {pattern} {extra} -kernel compute_bound -iter 32");
        let r = agree(&flags, policies[i % policies.len()]);
        if let Some(d) = deps {
            assert_eq!(r.dependencies, d, "dependencies of {pattern}");
        }
        if !matches!(pattern, "dom" | "tree") {
            assert_eq!(r.tasks, 40, "tasks of {pattern}");
        }
    }
}

#[test]
fn checksum_depends_on_the_graph() {
    let a = run(
        "-steps 10 -width 4 -type stencil_1d",
        &["--system", "sequential"],
    );
    let b = run(
        "-steps 10 -width 4 -type no_comm",
        &["--system", "sequential"],
    );
    assert_eq!(a.tasks, b.tasks);
    assert_ne!(a.checksum, b.checksum);
}

#[test]
fn two_graphs_joined_with_and_run_together() {
    let flags = "-steps 10 -width 4 -type stencil_1d -kernel compute_bound -iter 64 \
                 -and -steps 6 -width 3 -type nearest -radix 3 -kernel busy_wait -iter 100";
    let r = agree(flags, "lws");
    assert_eq!(r.tasks, 40 + 18);
    let out = ok(&["bench", "taskbench", "-steps", "3", "-and", "-steps", "5"]);
    assert!(
        out.contains("    Task Graph 2:\n      Time Steps: 5\n"),
        "{out}"
    );
}

#[test]
fn memory_kernel_and_reused_fields_agree() {
    let r = agree(
        "-steps 10 -width 4 -type stencil_1d -kernel memory_bound -scratch 4096 -iter 20",
        "ws",
    );
    // Task Bench: scratch x iterations / samples bytes per task.
    let out = ok(&[
        "bench",
        "taskbench",
        "-steps",
        "10",
        "-width",
        "4",
        "-kernel",
        "memory_bound",
        "-scratch",
        "4096",
        "-iter",
        "20",
        "--system",
        "sequential",
    ]);
    assert_eq!(
        field(&out, "Total Bytes "),
        (40 * 4096 * 20 / 16).to_string()
    );
    // Two fields per point: writers must wait for the readers of the older version.
    let two = run(
        "-steps 10 -width 4 -type stencil_1d -kernel memory_bound -scratch 4096 -iter 20 \
         -field 2",
        &["-worker", "2", "--system", "taskwatt", "--sched", "eager"],
    );
    assert_eq!(two, r);
}

#[test]
fn prints_task_benchs_summary_lines() {
    let out = ok(&[
        "bench",
        "taskbench",
        "-steps",
        "4",
        "-width",
        "2",
        "-type",
        "stencil_1d",
        "-kernel",
        "compute_bound",
        "-iter",
        "16",
        "-worker",
        "1",
    ]);
    for line in [
        "Running Task Benchmark",
        "      Dependence Type: stencil_1d",
        "        Type: compute_bound",
        "Total Tasks 8",
        "Total Dependencies 12",
        "  Unable to estimate local/nonlocal dependencies",
        &format!("Total FLOPs {}", 8 * (128 * 16 + 64)),
        "Total Bytes 0",
        "Transfer (estimated):",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "missing `{line}` in:\n{out}"
        );
    }
    let elapsed = field(&out, "Elapsed Time ");
    assert!(
        elapsed.ends_with(" seconds") && elapsed.contains("e-0"),
        "{elapsed}"
    );
    let help = ok(&["bench", "taskbench", "-h"]);
    assert!(
        help.contains("-steps") && help.contains("random_nearest"),
        "{help}"
    );
}

#[test]
fn unknown_pattern_flag_and_policy_are_clear_errors() {
    let out = taskwatt(&["bench", "taskbench", "-type", "stencil_3d"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stencil_3d") && err.contains("valid patterns are"),
        "{err}"
    );
    assert!(err.contains("stencil_1d_periodic"), "{err}");

    let out = taskwatt(&["bench", "taskbench", "-stepz", "3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-stepz") && err.contains("-steps"), "{err}");

    let out = taskwatt(&["bench", "taskbench", "--sched", "fifo"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo"));

    // all_to_all of width 64 would declare 65 accesses (more than MAX_ACCESSES): refused
    // with the way out.
    let out = taskwatt(&["bench", "taskbench", "-type", "all_to_all", "-width", "64"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reads 64 outputs")
            && err.contains(&format!("at most {} accesses", taskwatt::MAX_ACCESSES))
            && err.contains("--system rayon"),
        "{err}"
    );
}

#[test]
fn metg_sweep_json_is_complete() {
    let v = common::json(&[
        "bench",
        "metg",
        "--steps",
        "20",
        "--repeat",
        "2",
        "--max-log2",
        "8",
        "--min-log2",
        "6",
        "--policies",
        "lws",
        "--workers",
        "2",
        "--json",
    ]);
    // 3 iteration counts x 2 repetitions x (lws, rayon, sequential).
    assert_eq!(v["samples"].as_array().unwrap().len(), 18);
    // The pattern by the name the CLI takes (it was `stencil1d`), and whether the min
    // and median are bounds only.
    assert_eq!(v["config"]["pattern"], "stencil_1d", "{}", v["config"]);
    for s in v["summary"].as_array().unwrap() {
        assert!(s["at_most"].is_boolean(), "{s}");
    }
    let systems = summary_systems(&v);
    assert_eq!(systems, ["taskwatt/lws", "rayon", "sequential"]);
    assert!(v["peak"]["flops_per_core"].as_f64().unwrap() > 1e8);
    // The peak of the two workers' cores computing at once, before and after the sweep.
    for p in [&v["peak"], &v["peak_after"]] {
        assert_eq!(p["cores_together"].as_u64(), Some(2), "{p}");
        assert!(p["flops_per_core_together"].as_f64().unwrap() > 1e8, "{p}");
    }
    // One cache line between the first two CPUs (CI and the development VM have two).
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        assert!(v["core_to_core_ns"].as_f64().unwrap() > 0.0);
    }
    // One reading of the trace clock: neither optimised away nor a system call.
    let clock = v["clock_read_ns"].as_f64().expect("the clock's cost");
    assert!(clock > 0.1 && clock < 10_000.0, "{clock}");
    // The host's steal, over the sweep and per run (runs stolen from are repeated, by
    // default at most 3 times).
    let share = v["host_steal"].as_f64().expect("Linux has /proc/stat");
    assert!((0.0..=1.0).contains(&share), "{share}");
    for s in v["samples"].as_array().unwrap() {
        assert!(s["repeats"].as_u64().unwrap() <= 3, "{s}");
        assert!(s["steal"].as_f64().is_some(), "{s}");
    }
}

#[test]
fn metg_refuses_a_kernel_without_flops_and_names_the_flag_at_fault() {
    let e = common::taskwatt(&["bench", "metg", "--kernel", "empty"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success());
    assert!(
        err.contains("empty") && err.contains("compute_bound"),
        "{err}"
    );
    let e = common::taskwatt(&["bench", "metg", "--min-log2", "12", "--max-log2", "8"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(err.contains("--min-log2 12 is above --max-log2 8"), "{err}");
}

#[test]
fn metg_measures_tracing_both_ways_and_checks_external_programs() {
    let v = common::json(&[
        "bench",
        "metg",
        "--steps",
        "10",
        "--repeat",
        "1",
        "--max-log2",
        "6",
        "--min-log2",
        "6",
        "--policies",
        "ws",
        "--tracing",
        "both",
        "--baselines",
        "none",
        "--workers",
        "2",
        "--json",
    ]);
    let systems = summary_systems(&v);
    assert_eq!(systems, ["taskwatt/ws", "taskwatt/ws-untraced"]);

    // An external program that cannot be run: the error names it and how to build one.
    let out = taskwatt(&[
        "bench",
        "metg",
        "--steps",
        "4",
        "--repeat",
        "1",
        "--max-log2",
        "4",
        "--min-log2",
        "4",
        "--baselines",
        "none",
        "--policies",
        "lws",
        "--external",
        "starpu=/nonexistent/taskbench-starpu",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/taskbench-starpu") && err.contains("benches/starpu/build.sh"),
        "{err}"
    );
    // Checked before the sweep (issue 29: the whole default sweep ran first).
    let t0 = std::time::Instant::now();
    let out = taskwatt(&["bench", "metg", "--external", "starpu=/nonexistent/x"]);
    assert!(!out.status.success());
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an executable file"));
    let out = taskwatt(&["bench", "metg", "--external", "starpu"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAME=PATH"));
    let out = taskwatt(&["bench", "metg", "--max-steal", "200"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("from 0 to 100") && err.contains("off"),
        "{err}"
    );
}

#[test]
fn taskbench_trace_records_every_task() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tb.twt");
    let trace = trace.to_str().unwrap();
    let out = ok(&[
        "bench",
        "taskbench",
        "-steps",
        "10",
        "-width",
        "3",
        "-type",
        "stencil_1d",
        "-worker",
        "2",
        "--trace",
        trace,
    ]);
    assert!(out.contains("Tasks Executed 30"), "{out}");
    // The trace is complete and readable: 30 tasks of one type.
    let csv_path = dir.path().join("tb.csv");
    ok(&[
        "export",
        "--format",
        "csv",
        "-o",
        csv_path.to_str().unwrap(),
        trace,
    ]);
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    let rows = csv.lines().filter(|l| l.contains("empty")).count();
    assert_eq!(rows, 30, "{csv}");

    let out = taskwatt(&["bench", "taskbench", "--system", "rayon", "--trace", trace]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only taskwatt records a trace"));
}

/// A worker count past the runtime's limit is refused before any thread starts: 100 000
/// workers aborted `bench metg` (no memory for the threads' stacks) and hung `bench
/// taskbench` on rayon.
#[test]
fn too_many_workers_are_refused_naming_the_flag() {
    let out = taskwatt(&[
        "bench",
        "metg",
        "--baselines",
        "none",
        "--policies",
        "lws",
        "--workers",
        "100000",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--workers") && !err.contains("panicked"),
        "{err}"
    );
    let out = taskwatt(&[
        "bench",
        "taskbench",
        "-steps",
        "4",
        "-width",
        "2",
        "-worker",
        "100000",
        "--system",
        "rayon",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-worker") && err.contains("4096"), "{err}");
}
