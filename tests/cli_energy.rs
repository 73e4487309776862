//! The energy side of the `taskwatt` binary: meters, a measured run with its report, the
//! report's CSV/SVG outputs, fit/predict, compare and import.

mod common;

use std::path::Path;

use common::{json, ok, s, taskwatt};

#[test]
fn meters_lists_every_backend_with_a_reason_when_unavailable() {
    let v = json(&["meters", "--json"]);
    let list = v.as_array().unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|b| b["backend"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["rapl-perf", "rapl-powercap", "nvml", "sim", "cpu-frequency"]
    );
    for b in list {
        if b["available"] == false {
            assert!(b["reason"].as_str().is_some_and(|r| !r.is_empty()), "{b}");
        }
    }
    assert_eq!(list[3]["available"], true);
    assert_eq!(list[3]["simulated"], true);
    // The simulator stands for the CPU here, and gives its cores' frequency.
    assert_eq!(list[4]["used"], true, "{}", list[4]);
    assert_eq!(list[4]["simulated"], true);
    assert!(list.iter().any(|b| b["used"] == true));
    let text = ok(&["meters"]);
    assert!(text.contains("sim"), "{text}");
}

#[test]
fn measured_run_report_fit_and_predict() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let v = json(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "5ms",
        "--idle-calibration",
        "100ms",
        "--trace",
        s(&trace),
        "--json",
    ]);
    assert_eq!(v["energy"]["simulated"], true);
    assert_eq!(v["energy"]["meter"], "sim");
    assert!(
        v["energy"]["frequency"]
            .as_str()
            .is_some_and(|f| f.contains("simulated cores")),
        "{}",
        v["energy"]
    );
    assert!(v["trace"]["samples"].as_u64().unwrap() > 20);
    // The package's frequency is in the trace (the simulated cores' turbo bins). (A run
    // this short may have too few samples for the report to describe it:
    // energy/tests/frequency.rs checks the report's field.)
    let t = taskwatt::traces::read_trace(&trace).unwrap();
    let package = t
        .domains
        .iter()
        .find(|d| matches!(d.domain, taskwatt::traces::Domain::CpuPackage { .. }))
        .unwrap()
        .id;
    assert!(!t.frequencies.is_empty());
    assert!(t
        .frequencies
        .iter()
        .all(|f| f.domain == package && (3000.0..=4100.0).contains(&f.mhz)));
    let domains = v["attribution"]["domains"].as_array().unwrap();
    assert_eq!(domains.len(), 2, "package and DRAM");
    let types: Vec<&str> = domains[0]["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"]["codelet"].as_str().unwrap())
        .collect();
    for c in ["potrf", "trsm", "syrk", "gemm"] {
        assert!(types.contains(&c), "{types:?}");
    }
    // The base power is pinned by the idle calibration and close to the truth (30 W).
    let base = domains[0]["base"]["value_w"].as_f64().unwrap();
    assert!((base - 30.0).abs() < 1.5, "base {base}");
    assert_eq!(domains[0]["fit"]["base_pinned_by_idle"], true);

    // The table says SIMULATED and fits 80 columns.
    let text = ok(&["report", s(&trace)]);
    assert!(text.contains("SIMULATED"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");

    let out = d.path().join("out");
    ok(&["report", s(&trace), "--csv", s(&out), "--svg", s(&out)]);
    let types_csv = std::fs::read_to_string(out.join("types.csv")).unwrap();
    assert!(types_csv.starts_with("domain,type,count"));
    assert!(types_csv.contains("gemm@cpu"), "{types_csv}");
    // Per domain, the total_j column adds up to the fitted energy: the types' (with their
    // share of the base) and the idle row's (the base row's own energy made it 30 % over).
    let header: Vec<&str> = types_csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for d in domains {
        let name = d["name"].as_str().unwrap();
        let sum: f64 = types_csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[0] == name)
            .filter_map(|f| f[col("total_j")].parse::<f64>().ok())
            .sum();
        let fitted = d["fitted_j"].as_f64().unwrap();
        assert!(
            (sum - fitted).abs() <= 1e-6 * fitted,
            "{name}: {sum} vs {fitted}"
        );
    }
    let intervals = std::fs::read_to_string(out.join("intervals.csv")).unwrap();
    assert!(intervals.lines().count() > 20);
    let svgs: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .collect();
    assert_eq!(svgs.len(), 6, "power, residuals and energy per domain");

    // The same readings without their `simulated` column: imported as a real meter's.
    // Fitted together with the simulated trace, they are refused (a user's fit of an
    // imported StarPU run beside a simulated one went through without a word).
    let csv = d.path().join("t.csv");
    ok(&["export", s(&trace), "-o", s(&csv)]);
    let samples = std::fs::read_to_string(d.path().join("t.samples.csv")).unwrap();
    let unlabelled: String = samples
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_owned() + "\n")
        .collect();
    assert!(unlabelled.starts_with("domain,") && !unlabelled.contains("simulated\n"));
    let real_samples = d.path().join("real.samples.csv");
    std::fs::write(&real_samples, unlabelled).unwrap();
    let real = d.path().join("real.twt");
    ok(&[
        "import",
        "--tasks",
        s(&csv),
        "--samples",
        s(&real_samples),
        "-o",
        s(&real),
    ]);
    let mixed = d.path().join("mixed.json");
    let r = taskwatt(&["fit", s(&trace), s(&real), "-o", s(&mixed)]);
    assert!(!r.status.success() && !mixed.exists());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("simulated meter in") && err.contains("--force"),
        "{err}"
    );
    let r = taskwatt(&["fit", s(&trace), s(&real), "-o", s(&mixed), "--force"]);
    assert!(r.status.success() && mixed.exists());

    let model = d.path().join("m.json");
    ok(&["fit", s(&trace), "-o", s(&model)]);
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&model).unwrap()).unwrap();
    assert!(m["format_version"].as_u64().is_some());
    let p = json(&["predict", s(&model), s(&trace), "--json"]);
    let err = p[0]["prediction"]["total_error_pct"].as_f64().unwrap();
    assert!(err.abs() < 2.0, "in-sample prediction error {err}%");
    // The model remembers it was fitted on the simulated meter: its prediction of a trace
    // without any meter is still labelled SIMULATED (it was shown as a measurement).
    assert_eq!(m["simulated"], true);
    let plain = d.path().join("plain.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--no-energy",
        "--trace",
        s(&plain),
    ]);
    let p = json(&["predict", s(&model), s(&plain), "--json"]);
    assert_eq!(p[0]["simulated"], true, "{p}");
    let text = ok(&["predict", s(&model), s(&plain)]);
    assert!(text.contains("SIMULATED"), "{text}");
    // A trace without readings: named and refused alone, named and left out beside others.
    let r = taskwatt(&["fit", s(&plain), "-o", s(&mixed)]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(err.contains("plain.twt: no energy readings"), "{err}");
    let r = taskwatt(&["fit", s(&plain), s(&trace), "-o", s(&mixed)]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains("plain.twt: no energy readings") && err.contains("left out"),
        "{err}"
    );
    assert!(err.contains("(1 trace, "), "{err}");
}

#[test]
fn compare_passes_on_the_warnings_of_a_model_it_could_not_pin_down() {
    // 20 tasks: the fit leaves the types collinear. `predict` said so; `compare` printed
    // its errors of 0.02 to 1 % and a verdict without a word.
    let args = [
        "compare",
        "cholesky",
        "--n",
        "512",
        "--tile",
        "128",
        "--policies",
        "lws,eager",
        "--meter",
        "sim",
    ];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let v = json(&with_json);
    let w: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        w.iter()
            .any(|w| w.contains("are flagged, not measurements")),
        "{w:?}"
    );
    // Each kind once per domain, whatever the number of runs.
    let flagged = |d: &str| {
        w.iter()
            .filter(|w| w.starts_with(d) && w.contains("are flagged"))
            .count()
    };
    assert_eq!(flagged("package-0"), 1, "{w:?}");
    let text = ok(&args);
    assert!(text.contains("warnings (the model's predictions"), "{text}");
    // The second table's covers column is in the JSON too (it read null).
    for p in v["policies"].as_array().unwrap() {
        assert!(p["application_covered"].is_array(), "{p}");
    }
    assert!(text.contains("the whole runs ("), "{text}");
}

#[test]
fn compare_fits_on_one_policy_and_predicts_the_others() {
    let v = json(&[
        "compare",
        "stencil",
        "--n",
        "512",
        "--tile",
        "64",
        "--steps",
        "30",
        "--policies",
        "ws,eager",
        "--fit-on",
        "ws",
        "--meter",
        "sim",
        "--period",
        "5ms",
        "--json",
    ]);
    assert_eq!(v["fit_on"], "ws");
    assert_eq!(v["simulated"], true);
    let p = v["policies"].as_array().unwrap();
    assert_eq!(p.len(), 2);
    for r in p {
        assert!(r["measured_j"].as_f64().unwrap() > 0.0);
        assert!(r["error_pct"].as_f64().unwrap().abs() < 5.0, "{r}");
    }
    // The verdict the text ends with is in the JSON too; the traces, temporary without
    // --keep, are not named.
    assert!(v["verdict"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    for r in v["runs"].as_array().unwrap() {
        assert!(r["trace"].is_null(), "{r}");
    }
    let out = taskwatt(&["compare", "gemm", "--policies", "ws,fifo"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fifo"));
}

#[test]
fn import_starpu_and_reject_malformed_csv_with_the_line() {
    let d = tempfile::tempdir().unwrap();
    let rec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/tests/data/starpu-1.4.12-cholesky-lws/tasks.rec");
    let out = d.path().join("starpu.twt");
    ok(&["import", "--starpu", s(&rec), "-o", s(&out)]);
    // Without samples there is nothing to attribute: the error says how to import some or
    // to predict instead (it said to record the run with a meter).
    let r = taskwatt(&["report", s(&out)]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("without energy samples")
            && err.contains("--samples")
            && err.contains("taskwatt predict"),
        "{err}"
    );
    let csv = d.path().join("tasks.csv");
    ok(&["export", s(&out), "--format", "csv", "-o", s(&csv)]);
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 817);

    let bad = d.path().join("bad.csv");
    std::fs::write(
        &bad,
        "type,worker,start,end\ngemm,0,0.5,0.7\ngemm,zero,0.7,0.9\n",
    )
    .unwrap();
    let r = taskwatt(&[
        "import",
        "--tasks",
        s(&bad),
        "-o",
        s(&d.path().join("x.twt")),
    ]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("bad.csv") && err.contains('3') && err.contains("worker"),
        "{err}"
    );
}

#[test]
fn a_missing_real_meter_is_a_clear_error() {
    if Path::new("/sys/class/powercap").exists() {
        eprintln!("skipped: this machine has /sys/class/powercap");
        return;
    }
    let r = taskwatt(&[
        "run",
        "gemm",
        "--n",
        "128",
        "--tile",
        "64",
        "--meter",
        "rapl-powercap",
    ]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("powercap"), "{err}");
}

#[test]
fn type_calibration_runs_each_codelet_alone_and_marks_it() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let v = json(&[
        "run",
        "cholesky",
        "--n",
        "512",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "5ms",
        // Long enough for 20 tasks of each type on a machine loaded by other tests and
        // builds (60 ms left one type at 20 once, beside a CI run and a build).
        "--type-calibration",
        "200ms",
        "--trace",
        s(&trace),
        "--json",
    ]);
    // The graph's own counts are unchanged by the calibration tasks.
    assert_eq!(v["app"]["tasks"], 20);
    let chrome = d.path().join("t.json");
    ok(&["export", s(&trace), "--format", "chrome", "-o", s(&chrome)]);
    let text = std::fs::read_to_string(&chrome).unwrap();
    for c in ["potrf", "trsm", "syrk", "gemm"] {
        assert!(
            text.contains(&format!("type-calibration:{c}")),
            "no marker for {c}"
        );
    }
    // Every type ran many times alone, so none is left at "too few tasks".
    let types = v["attribution"]["domains"][0]["types"].as_array().unwrap();
    assert_eq!(types.len(), 4);
    for t in types {
        assert!(t["count"].as_u64().unwrap() > 20, "{t}");
    }
    // Calibration tasks have the footprint of the graph's tasks of their type: potrf's
    // and trsm's pristine input copy made them a tile larger, and the performance models
    // fitted a size law through what was one size.
    let csv = d.path().join("t.csv");
    ok(&["export", s(&trace), "-o", s(&csv)]);
    let mut sizes = std::collections::BTreeMap::<String, std::collections::BTreeSet<u64>>::new();
    let tasks = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = tasks.lines().next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (c_codelet, c_fp) = (col("codelet"), col("footprint"));
    for l in tasks.lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        sizes
            .entry(f[c_codelet].to_owned())
            .or_default()
            .insert(f[c_fp].parse().unwrap());
    }
    for (c, fp) in &sizes {
        assert_eq!(fp.len(), 1, "{c}: footprints {fp:?}");
    }
}

#[test]
fn type_calibration_on_fewer_workers_than_cores_uses_the_free_cores_too() {
    // One worker on a machine of two cores or more: calibration runs each type beside
    // another on a reserved worker, so that the fit separates a type's power alone from
    // the package's contention, which a one-worker graph never shows.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("one core: no free core to reserve");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let args = [
        "run",
        "cholesky",
        "--workers",
        "1",
        "--n",
        "512",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "5ms",
        // Long enough that the contended rounds hold some intervals even while the
        // other tests of this file run (at 250 ms, 1 run in about 20 left it unidentified).
        "--type-calibration",
        "500ms",
        "--trace",
        s(&trace),
    ];
    let v = json(&[&args[..], &["--json"]].concat());
    let reserved = v["reserved_workers"].as_array().unwrap();
    assert!(!reserved.is_empty(), "{}", v["workers"]);
    // No GPU worker: no GPU backend either (it said `emulated` until stop 53).
    assert!(v["gpu_backend"].is_null(), "{}", v["gpu_backend"]);
    assert_eq!(
        v["workers"].as_array().unwrap().len(),
        1 + reserved.len(),
        "{v}"
    );
    let package = &v["attribution"]["domains"][0];
    assert_eq!(package["domain"]["kind"], "cpu_package", "{package}");
    let c = &package["contention"];
    assert_eq!(c["identified"], true, "{c}");
    assert!(c["max_k"].as_u64().unwrap() >= 2, "{c}");
    // No graph task ran on a reserved worker; calibration tasks did.
    let t = taskwatt::traces::read_trace(&trace).unwrap();
    let graph: Vec<_> = t.markers.iter().filter(|m| m.name == "graph").collect();
    assert!(!graph.is_empty());
    let (mut in_graph, mut outside) = (0, 0);
    for r in t.tasks.iter().flat_map(|c| c.records.iter()) {
        if reserved
            .iter()
            .any(|w| w.as_u64() == Some(u64::from(r.worker)))
        {
            if graph.iter().any(|m| m.start <= r.start && r.start <= m.end) {
                in_graph += 1;
            } else {
                outside += 1;
            }
        }
    }
    assert_eq!(in_graph, 0, "graph tasks ran on a reserved worker");
    assert!(outside > 0, "no calibration task ran on a reserved worker");
    let text = ok(&args);
    assert!(text.contains("1 worker (+"), "{text}");
    // GEMM has one task type: calibration still runs it alone and beside others (what
    // the what-if's contention law needs), on the free cores too.
    let gemm_trace = d.path().join("gemm.twt");
    let out = taskwatt(&[
        "run",
        "gemm",
        "--workers",
        "1",
        "--n",
        "256",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--type-calibration",
        "100ms",
        "--trace",
        s(&gemm_trace),
        "--json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["reserved_workers"].as_array().unwrap().len(),
        reserved.len(),
        "{v}"
    );
    let t = taskwatt::traces::read_trace(&gemm_trace).unwrap();
    assert!(
        t.markers
            .iter()
            .any(|m| m.name == "type-calibration:gemm_nn"),
        "{:?}",
        t.markers
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("does nothing"), "{err}");
}

#[test]
fn auto_type_calibration_calibrates_only_flagged_types_within_its_budget() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let v = json(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "5ms",
        "--type-calibration",
        "auto:1500ms",
        "--trace",
        s(&trace),
        "--json",
    ]);
    let auto = &v["type_calibration_auto"];
    assert!(auto.is_object(), "{v}");
    let spent = auto["spent_s"].as_f64().unwrap();
    // The budget bounds the calibration (plus one fit and one flush per round).
    assert!(spent < 1.5 + 1.0, "{auto}");
    let rounds = auto["rounds"].as_array().unwrap();
    // A 1024-order Cholesky alone leaves some type imprecise: at least one round ran, and
    // each round calibrated only named codelets of the app.
    assert!(!rounds.is_empty(), "{auto}");
    // The first round runs every type that ran (for the what-if's contention laws),
    // flagged or not.
    let mut first: Vec<&str> = rounds[0][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    first.sort_unstable();
    assert_eq!(first, ["gemm", "potrf", "syrk", "trsm"], "{auto}");
    for r in rounds {
        for t in r[0].as_array().unwrap() {
            assert!(
                ["potrf", "trsm", "syrk", "gemm"].contains(&t.as_str().unwrap()),
                "{r}"
            );
        }
    }
    assert!(auto["error"].is_null(), "{auto}");
    // The calibration ran after the graph, marked like fixed calibration.
    let chrome = d.path().join("t.json");
    ok(&["export", s(&trace), "--format", "chrome", "-o", s(&chrome)]);
    let text = std::fs::read_to_string(&chrome).unwrap();
    assert!(text.contains("type-calibration:"));
    assert_eq!(v["app"]["tasks"], 120);
}

#[test]
fn export_csv_then_import_then_report_reproduces_the_powers() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let v = json(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "2ms",
        "--iterations",
        "3",
        "--trace",
        s(&trace),
        "--json",
    ]);
    let csv = d.path().join("t.csv");
    ok(&["export", s(&trace), "--format", "csv", "-o", s(&csv)]);
    let back = d.path().join("back.twt");
    // The CSV does not carry the meter's update interval (the simulated RAPL's 1 ms): given
    // on import, the intervals are aligned as the recording's were, whatever the reads'
    // timing (without it the attribution detects it from the reads, which a loaded machine
    // can blur).
    ok(&[
        "import",
        "--tasks",
        s(&csv),
        "--samples",
        s(&d.path().join("t.samples.csv")),
        "--update-interval",
        "1ms",
        "-o",
        s(&back),
    ]);
    let r = json(&["report", s(&back), "--json"]);
    // The samples' `simulated` column keeps the label through the round trip.
    assert_eq!(
        r["simulated"], true,
        "the re-imported run lost its SIMULATED label"
    );
    let powers = |report: &serde_json::Value| -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for dom in report["domains"].as_array().unwrap() {
            out.push((
                format!("{} base", dom["domain"]),
                dom["base"]["value_w"].as_f64().unwrap(),
            ));
            for t in dom["types"].as_array().unwrap() {
                out.push((
                    format!("{} {}", dom["domain"], t["key"]),
                    t["power"]["value_w"].as_f64().unwrap(),
                ));
            }
        }
        // Types are listed in first-seen order, which the import's per-worker order changes.
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    };
    let (a, b) = (powers(&v["attribution"]), powers(&r["report"]));
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for ((ka, pa), (kb, pb)) in a.iter().zip(&b) {
        assert_eq!(ka, kb);
        // The import lists the types in another order, so the fit's columns are permuted;
        // the contention is profiled by golden section to 1e-7 of its range, which the
        // permutation's rounding can move within: the powers agree to about that, not to
        // the last bit (a 1.8e-8 difference was seen under load).
        assert!(
            (pa - pb).abs() <= 1e-6 * pa.abs().max(1.0),
            "{ka}: {pa} before, {pb} after the round trip"
        );
    }
}

#[test]
fn report_recover_reads_a_cut_trace_that_plain_report_refuses() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "2ms",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    // A killed run: the End chunk and part of the last chunk are gone.
    let bytes = std::fs::read(&trace).unwrap();
    std::fs::write(&trace, &bytes[..bytes.len() - 200]).unwrap();
    let r = taskwatt(&["report", s(&trace)]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("--recover"), "{err}");
    let out = ok(&["report", s(&trace), "--recover"]);
    assert!(out.contains("energy attribution"), "{out}");
}

/// The Paje export of `trace` (beside it), as PajeNG's `pj_dump` prints it; it must parse
/// without a complaint.
fn pj_dump(trace: &std::path::Path) -> String {
    let paje = trace.with_extension("paje");
    ok(&["export", s(trace), "--format", "paje", "-o", s(&paje)]);
    let r = std::process::Command::new("pj_dump")
        .arg(&paje)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success() && err.trim().is_empty(), "{err}");
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// The Paje export parses with PajeNG's `pj_dump` (CI installs `pajeng` and sets
/// `TASKWATT_REQUIRE_PJ_DUMP=1`; elsewhere the check is skipped when the tool is missing).
#[test]
fn paje_export_parses_with_pj_dump() {
    let have = std::process::Command::new("pj_dump")
        .arg("--help")
        .output()
        .is_ok();
    if !have {
        assert!(
            std::env::var_os("TASKWATT_REQUIRE_PJ_DUMP").is_none(),
            "pj_dump (Debian package pajeng) is required here"
        );
        eprintln!("pj_dump not installed (apt-get install pajeng): Paje parse check skipped");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "2ms",
        "--idle-calibration",
        "20ms",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    let dump = pj_dump(&trace);
    // 120 tasks, each a state of its worker, and power variables on the meter.
    let busy = dump
        .lines()
        .filter(|l| l.starts_with("State,") && !l.ends_with("Idle"))
        .filter(|l| {
            ["potrf", "trsm", "syrk", "gemm"]
                .iter()
                .any(|c| l.ends_with(c))
        })
        .count();
    assert_eq!(busy, 120, "{dump}");
    assert!(dump.lines().any(|l| l.starts_with("Variable,")));
    // The simulated meter's power says so in ViTE's legend.
    let paje = std::fs::read_to_string(trace.with_extension("paje")).unwrap();
    assert!(paje.contains("Power package-0 (W, SIMULATED)"), "{paje}");

    // With emulated GPUs the copies are links between memory nodes, named by tile.
    let trace = d.path().join("g.twt");
    ok(&[
        "run",
        "gemm",
        "--n",
        "512",
        "--tile",
        "128",
        "--workers",
        "1",
        "--gpus",
        "2",
        "--gpu-backend",
        "emulated",
        "--meter",
        "sim",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    let dump = pj_dump(&trace);
    let links: Vec<&str> = dump.lines().filter(|l| l.starts_with("Link,")).collect();
    assert!(!links.is_empty(), "{dump}");
    let tile = 128 * 128 * 8;
    assert!(
        links.iter().all(|l| l.contains(&format!("] {tile} B"))),
        "{links:?}"
    );
}

#[test]
fn chrome_export_carries_dependency_arrows_and_task_energy() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--meter",
        "sim",
        "--period",
        "2ms",
        // Types alone, then side by side: the contention is modelled, so a type's power
        // at run differs from its power alone.
        "--type-calibration",
        "100ms",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    let out = d.path().join("t.json");
    ok(&["export", s(&trace), "-o", s(&out)]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let tasks: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cpu")
        .collect();
    assert!(
        tasks.len() > 120,
        "{} tasks: the graph's 120 and the calibration's",
        tasks.len()
    );
    let mut exported = std::collections::BTreeMap::<String, f64>::new();
    for t in &tasks {
        let mj = t["args"]["energy_mJ"].as_f64().unwrap_or(-1.0);
        assert!(mj > 0.0, "{t}");
        *exported
            .entry(t["name"].as_str().unwrap().to_owned())
            .or_default() += mj * 1e-3;
    }
    // Each type's tasks add up to what `report` gives the type (count x total/task over
    // the package and DRAM): the export used the power alone, 3.5 % over the report for
    // a user's tile_gemm under contention.
    let r: serde_json::Value = serde_json::from_str(&ok(&["report", s(&trace), "--json"])).unwrap();
    let mut reported = std::collections::BTreeMap::<String, f64>::new();
    for d in r["report"]["domains"].as_array().unwrap() {
        for t in d["types"].as_array().unwrap() {
            let name = t["key"]["codelet"].as_str().unwrap().to_owned();
            *reported.entry(name).or_default() +=
                t["count"].as_f64().unwrap() * t["total_j_per_task"].as_f64().unwrap();
        }
    }
    assert_eq!(
        exported.keys().collect::<Vec<_>>(),
        reported.keys().collect::<Vec<_>>()
    );
    for (name, j) in &exported {
        let want = reported[name];
        assert!(
            (j - want).abs() <= 0.005 * want,
            "{name}: the export's tasks sum to {j} J, the report gives {want} J"
        );
    }
    // A task whose energy rests on a power the report flags says so (the timeline showed
    // plain numbers where the report shows parentheses), and only such a task.
    let mut flagged = std::collections::BTreeSet::new();
    for d in r["report"]["domains"].as_array().unwrap() {
        let base_ok = d["base"]["reliable"].as_bool().unwrap();
        for t in d["types"].as_array().unwrap() {
            let p = if t["power_at_run"].is_null() {
                &t["power"]
            } else {
                &t["power_at_run"]
            };
            if !base_ok || !p["reliable"].as_bool().unwrap() {
                flagged.insert(t["key"]["codelet"].as_str().unwrap().to_owned());
            }
        }
    }
    for t in &tasks {
        let name = t["name"].as_str().unwrap();
        assert_eq!(
            t["args"]["energy_note"].is_string(),
            flagged.contains(name),
            "{name}: {t}"
        );
    }
    // Every dependency of the Cholesky graph is one s/f pair.
    let preds: usize = tasks
        .iter()
        .map(|t| t["args"]["preds"].as_array().unwrap().len())
        .sum();
    let starts = ev.iter().filter(|e| e["ph"] == "s").count();
    let ends = ev.iter().filter(|e| e["ph"] == "f").count();
    assert!(preds > 0);
    assert_eq!((starts, ends), (preds, preds));
}

#[test]
fn gpu_domains_with_shaped_sensors_print_the_sensor_aware_and_clipping_errors() {
    // The simulated NVML as a counter that sees a quarter of each 100 ms update, on 2 CPU
    // workers and 2 emulated GPUs.
    let dir = tempfile::tempdir().unwrap();
    let default = include_str!("../energy/src/sim/default.toml");
    let cfg = default
        .replace("update_interval_ms = 50", "update_interval_ms = 100")
        .replace("sampled_ms = 0", "sampled_ms = 25");
    assert_ne!(cfg, default, "the default config changed: update this test");
    let cfg_path = dir.path().join("sim.toml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let trace = dir.path().join("t.twt");
    let pm = dir.path().join("pm");
    // Cholesky n=1024 tile 128 under eager, 3 iterations, on the config at `cfg_path`.
    let run = |trace: &std::path::Path| {
        ok(&[
            "run",
            "cholesky",
            "--n",
            "1024",
            "--tile",
            "128",
            "--workers",
            "2",
            "--gpus",
            "2",
            "--sched",
            "eager",
            "--meter",
            "sim",
            "--sim-config",
            s(&cfg_path),
            "--trace",
            s(trace),
            "--perfmodel-dir",
            s(&pm),
            "--no-report",
            "--iterations",
            "3",
        ])
    };
    run(&trace);
    let text = ok(&["report", s(&trace)]);
    assert!(
        text.contains("a counter that sees the last 25 ms of each update"),
        "{text}"
    );
    assert!(
        text.contains("sensor-aware") && text.contains("clipping"),
        "{text}"
    );
    // Asked for clipping, nothing to compare.
    let clip = ok(&["report", s(&trace), "--sensor-model", "clip"]);
    assert!(!clip.contains("sensor-aware"), "{clip}");
    let bad = taskwatt(&["report", s(&trace), "--sensor-model", "sideways"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("use aware or clip"));

    // Both sensors of each GPU (the counter and the averaged power), fitted together: one
    // domain per GPU in the report, naming both sensors.
    let both = default
        .replace("update_interval_ms = 50", "update_interval_ms = 100")
        .replace("sampled_ms = 0", "sampled_ms = 25")
        .replace("sensor = \"energy\"", "sensor = \"both\"");
    std::fs::write(&cfg_path, both).unwrap();
    let trace2 = dir.path().join("both.twt");
    run(&trace2);
    let text = ok(&["report", s(&trace2)]);
    assert!(text.contains("sensors together"), "{text}");
    assert!(
        text.contains("a counter that sees the last 25 ms of each update and power averaged"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["report", s(&trace2), "--json"])).unwrap();
    let gpus = json["report"]["domains"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["domain"]["kind"] == "gpu")
        .count();
    assert_eq!(gpus, 2, "{json}");
}

#[test]
fn dmdae_uses_the_last_run_s_energy_model_or_says_it_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let pm = dir.path().join("pm");
    let run = |sched: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "cholesky",
            "--n",
            "512",
            "--tile",
            "128",
            "--workers",
            "2",
            "--gpus",
            "1",
            "--meter",
            "sim",
            "--sched",
            sched,
            "--perfmodel-dir",
            s(&pm),
        ];
        args.extend_from_slice(extra);
        let out = taskwatt(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let first = run("dmdae", &["--no-energy"]);
    assert!(first.contains("dmdae: no energy model"), "{first}");
    // A measured run saves its model beside the performance models.
    run("dmda", &[]);
    assert!(pm.join("energy-model-cholesky.json").exists());
    let second = run("dmdae", &["--gamma", "100000", "--no-report"]);
    assert!(second.contains("dmdae: task powers from"), "{second}");
    let bad = taskwatt(&[
        "run",
        "cholesky",
        "--sched",
        "dmdae",
        "--gamma=-1",
        "--no-energy",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("non-negative"));
}

#[test]
fn compare_sweeps_dmdae_over_gamma_and_draws_the_pareto_plot() {
    let dir = tempfile::tempdir().unwrap();
    let (pm, svg, keep) = (
        dir.path().join("pm"),
        dir.path().join("svg"),
        dir.path().join("keep"),
    );
    let common = [
        "cholesky",
        "--n",
        "512",
        "--tile",
        "128",
        "--workers",
        "2",
        "--gpus",
        "1",
        "--meter",
        "sim",
    ];
    // Without an energy model a gamma sweep would compare dmda with itself: refused.
    let empty = dir.path().join("no-models");
    let mut args = vec!["compare"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--perfmodel-dir", s(&empty), "--gamma", "0,100000"]);
    let out = taskwatt(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--gamma 0,100000: dmdae has no task powers"),
        "{err}"
    );
    // Refused before anything runs, without the note that dmdae would place tasks as
    // dmda (it came first and read as if the sweep went on).
    assert_eq!(err.matches("dmdae: no energy model").count(), 0, "{err}");

    let mut args = vec!["run"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--sched", "dmda", "--perfmodel-dir", s(&pm)]);
    ok(&args);
    let mut args = vec!["compare"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&[
        "--perfmodel-dir",
        s(&pm),
        "--policies",
        "dmdae,dmda",
        "--gamma",
        "0,100000",
        "--repeat",
        "2",
        "--keep",
        s(&keep),
        "--svg",
        s(&svg),
        "--json",
    ]);
    let v = json(&args);
    let names: Vec<&str> = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dmdae", "dmda", "dmdae:0", "dmdae:100000"]);
    // Two runs per policy: the verdict says their range is a rough guide (`--repeat 1`
    // was told to repeat; 2 was not).
    let verdict = v["verdict"].as_str().unwrap();
    assert!(verdict.contains("from two runs per policy"), "{verdict}");
    // Each policy's runs' range beside its mean (the JSON had the means alone).
    for p in v["policies"].as_array().unwrap() {
        let [lo, hi] = [0, 1].map(|i| p["measured_range_j"][i].as_f64().unwrap());
        let m = p["measured_j"].as_f64().unwrap();
        assert!(lo <= m && m <= hi, "{p}");
    }
    // Every run used the gamma its row names: a plain dmdae the default (1000), whatever
    // the sweep ran before it (the sweep once set the environment, and a plain dmdae ran
    // at the last gamma of the sweep, each repeat at another).
    for (policy, gamma) in [
        ("dmdae", Some("1000")),
        ("dmda", None),
        ("dmdae:0", Some("0")),
        ("dmdae:100000", Some("100000")),
    ] {
        for r in 0..2 {
            let path = keep.join(format!("cholesky-{}-{r}.twt", policy.replace(':', "_")));
            let t = taskwatt::traces::read_trace(&path).unwrap();
            assert_eq!(
                t.meta.params.get("sched.gamma").map(String::as_str),
                gamma,
                "{}",
                path.display()
            );
        }
    }
    let plot = std::fs::read_to_string(svg.join("pareto.svg")).unwrap();
    assert!(
        plot.contains("dmdae:100000") && plot.contains("makespan"),
        "{plot}"
    );
    // The bars are the application's energy, which the verdict compares (they were the
    // whole runs', mostly the calibration around the graphs).
    let bars = std::fs::read_to_string(svg.join("compare.svg")).unwrap();
    assert!(bars.contains("the application"), "{bars}");
}

/// NVML-style GPU data brought to `import` with its sensors declared (`--domains`): power
/// readings averaged over 1 s, a counter that sees 25 ms of each 100 ms, and both sensors
/// of one GPU. The recorded run is the simulated meter's (its truth known); its CSV export
/// is what a user with an nvidia-smi log and a tasks file has.
#[test]
fn gpu_sensors_declared_on_import_give_each_type_s_gpu_power() {
    let d = tempfile::tempdir().unwrap();
    let (truth_w, cfg) = (150.0, d.path().join("sim.toml"));
    std::fs::write(
        &cfg,
        format!(
            "[gpu]\nsensor = \"both\"\nupdate_interval_ms = 100\nsampled_ms = 25\n\
             power_window_ms = 1000\n[codelets]\n\
             gemm_nn = {{ cpu = {{ package_w = 14.5, dram_w = 2.2 }}, \
             gpu = {{ package_w = 2.0, dram_w = 0.3, gpu_w = {truth_w} }} }}\n"
        ),
    )
    .unwrap();
    let trace = d.path().join("g.twt");
    ok(&[
        "run",
        "gemm",
        "--n",
        "3072",
        "--tile",
        "256",
        "--workers",
        "1",
        "--gpus",
        "2",
        "--gpu-backend",
        "emulated",
        "--sched",
        "dmda",
        "--idle-calibration",
        "1s",
        "--meter",
        "sim",
        "--sim-config",
        s(&cfg),
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    let csv = d.path().join("g.csv");
    ok(&["export", s(&trace), "--format", "csv", "-o", s(&csv)]);
    let samples = std::fs::read_to_string(d.path().join("g.samples.csv")).unwrap();
    // Worker 0 is the CPU worker, workers 1 and 2 drive GPUs 0 and 1.
    let declare = |power: &str, counter: &str| {
        let mut t = String::from("domain,measures,sensor,window_ms,sampled_ms,update_ms,workers\n");
        for g in 0..2 {
            t += &format!(
                "simulated NVML GPU {g} power,gpu-{g},{power},1000,,100,{}\n",
                g + 1
            );
            t += &format!(
                "simulated NVML GPU {g},gpu-{g},{counter},,25,100,{}\n",
                g + 1
            );
        }
        t
    };
    // Each GPU's gemm_nn power, as `report --json` gives it: (value, shown as measured).
    let import = |name: &str, keep: &dyn Fn(&str) -> bool, domains: String| {
        let samples_file = d.path().join(format!("{name}.samples.csv"));
        let kept: Vec<&str> = samples.lines().filter(|l| keep(l)).collect();
        std::fs::write(&samples_file, kept.join("\n") + "\n").unwrap();
        let domains_file = d.path().join(format!("{name}.domains.csv"));
        let declared: Vec<&str> = domains
            .lines()
            .filter(|l| {
                l.starts_with("domain,")
                    || kept
                        .iter()
                        .any(|k| k.contains(&format!(",{},", l.split(',').next().unwrap())))
            })
            .collect();
        std::fs::write(&domains_file, declared.join("\n") + "\n").unwrap();
        let out = d.path().join(format!("{name}.twt"));
        ok(&[
            "import",
            "--tasks",
            s(&csv),
            "--samples",
            s(&samples_file),
            "--domains",
            s(&domains_file),
            "-o",
            s(&out),
        ]);
        let json: serde_json::Value =
            serde_json::from_str(&ok(&["report", s(&out), "--json"])).unwrap();
        json["report"]["domains"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["domain"]["kind"] == "gpu")
            .map(|d| {
                let t = d["types"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["key"]["codelet"] == "gemm_nn")
                    .unwrap_or_else(|| panic!("{name}: no gemm_nn on {d}"));
                let p = &t["power"];
                (p["value_w"].as_f64().unwrap(), p["reliable"] == true)
            })
            .collect::<Vec<_>>()
    };
    let is_power = |l: &str| l.contains(" power,");
    let is_counter = |l: &str| l.contains("NVML GPU") && !is_power(l);
    for (name, keep, domains) in [
        (
            "both",
            &(|_: &str| true) as &dyn Fn(&str) -> bool,
            declare("power", "sampled_counter"),
        ),
        (
            "power",
            &|l: &str| !is_counter(l),
            declare("power", "sampled_counter"),
        ),
        (
            "counter",
            &|l: &str| !is_power(l),
            declare("power", "sampled_counter"),
        ),
    ] {
        let got = import(name, keep, domains);
        assert_eq!(got.len(), 2, "{name}: one fit per GPU");
        // Within 5 % of the truth; whether it is also shown as a measurement depends on how
        // many tasks each GPU got (on a loaded machine, one may get few).
        for (w, _) in &got {
            let err = (w / truth_w - 1.0).abs();
            assert!(
                err < 0.05,
                "{name}: gemm_nn@gpu {w:.1} W against {truth_w} W"
            );
        }
    }
    // The same power readings taken for an ideal counter: far off, which is why the
    // sensor must be declared.
    let got = import(
        "undeclared",
        &|l: &str| !is_counter(l),
        declare("counter", "counter"),
    );
    assert!(
        got.iter().all(|(w, _)| (w / truth_w - 1.0).abs() > 0.1),
        "undeclared power readings: {got:?}"
    );
}

/// A CSV import past `--task-memory` goes through a temporary file, says so, leaves
/// nothing behind, and writes the trace an import in memory writes.
#[test]
fn import_past_the_task_memory_sorts_through_a_temporary_file() {
    let d = tempfile::tempdir().unwrap();
    let tasks = d.path().join("tasks.csv");
    // 10 000 rows of 3 workers out of time order: at least one chunk (4096 tasks) stays in
    // memory, so two runs go to the file.
    let mut text = String::from("type,worker,start,end\n");
    for i in 0..10_000u64 {
        let start = (i * 7919) % 100_003;
        text.push_str(&format!("t{},{},{start},{}\n", i % 4, i % 3, start + 5));
    }
    std::fs::write(&tasks, text).unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut exports = Vec::new();
    for (mem, said) in [("32MiB", false), ("1", true)] {
        let trace = out.join(format!("t-{mem}.twt"));
        let r = taskwatt(&[
            "import",
            "--tasks",
            s(&tasks),
            "--time-unit",
            "us",
            "--task-memory",
            mem,
            "-o",
            s(&trace),
        ]);
        assert!(r.status.success());
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains("10000 tasks"), "{err}");
        assert_eq!(err.contains("temporary file of"), said, "{err}");
        let csv = d.path().join(format!("t-{mem}.csv"));
        ok(&["export", s(&trace), "--format", "csv", "-o", s(&csv)]);
        exports.push(std::fs::read(&csv).unwrap());
    }
    assert_eq!(exports[0], exports[1]);
    let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(left.len(), 2, "the two traces and nothing else: {left:?}");
    let r = taskwatt(&[
        "import",
        "--tasks",
        s(&tasks),
        "--task-memory",
        "lots",
        "-o",
        "x",
    ]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("--task-memory"));
    // --starpu builds its trace in memory: a budget for it is refused, not ignored.
    let r = taskwatt(&[
        "import",
        "--starpu",
        s(&tasks),
        "--task-memory",
        "1MiB",
        "-o",
        "x",
    ]);
    assert!(!r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("--task-memory"));
}

#[test]
fn dmdae_says_when_its_energy_model_rests_on_flagged_powers() {
    // 20 tasks: the fit leaves the types collinear, and dmdae placed by them silently.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let app = ["cholesky", "--n", "512", "--tile", "128", "--meter", "sim"];
    let mut args = vec!["run"];
    args.extend(app);
    args.extend(["--no-report", "--trace", s(&trace)]);
    ok(&args);
    let model = d.path().join("m.json");
    ok(&["fit", s(&trace), "-o", s(&model)]);
    let mut args = vec!["run"];
    args.extend(app);
    args.extend([
        "--sched",
        "dmdae",
        "--energy-model",
        s(&model),
        "--no-report",
    ]);
    let out = taskwatt(&args);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("are flagged, not measurements") && err.contains("dmdae places by them"),
        "{err}"
    );
}
