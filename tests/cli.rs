//! The `taskwatt` binary end to end: run an app with a trace, export it, and meet a
//! truncated trace and an unknown policy.

mod common;

use common::{ok, s, taskwatt};

#[test]
fn run_cholesky_then_export_chrome_and_csv() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.twt");
    let json = ok(&[
        "run",
        "cholesky",
        "--n",
        "512",
        "--tile",
        "128",
        "--sched",
        "ws",
        "--workers",
        "2",
        "--trace",
        s(&trace),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    // 4 x 4 tiles: 4 potrf + 6 trsm + 6 syrk + 4 gemm.
    assert_eq!(v["app"]["tasks"], 20);
    assert_eq!(v["app"]["check"]["passed"], true);
    assert_eq!(v["policy"], "ws");
    assert_eq!(v["trace"]["tasks"], 20);

    let chrome = dir.path().join("t.json");
    ok(&["export", s(&trace), "--format", "chrome", "-o", s(&chrome)]);
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let events = c["traceEvents"].as_array().unwrap();
    // Task slices (markers such as the `graph` span are slices too, in their own category).
    let tasks: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "cpu")
        .collect();
    assert_eq!(tasks.len(), 20);
    for name in ["potrf", "trsm", "syrk", "gemm"] {
        assert!(tasks.iter().any(|e| e["name"] == name), "no {name} event");
    }

    let csv = dir.path().join("t.csv");
    ok(&["export", s(&trace), "--format", "csv", "-o", s(&csv)]);
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 21, "header + one row per task");
    assert!(
        !dir.path().join("t.transfers.csv").exists(),
        "no transfers file for a CPU-only run"
    );

    // Without --format, the output's extension names it (`-o x.csv` wrote Chrome JSON).
    let csv2 = dir.path().join("u.csv");
    ok(&["export", s(&trace), "-o", s(&csv2)]);
    assert_eq!(std::fs::read_to_string(&csv2).unwrap(), text);
    let dot = dir.path().join("g.dot");
    ok(&["export", s(&trace), "-o", s(&dot)]);
    assert!(std::fs::read_to_string(&dot)
        .unwrap()
        .starts_with("digraph"));
    // A format named against the extension is written, and said.
    let out = taskwatt(&["export", s(&trace), "--format", "chrome", "-o", s(&csv2)]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("as --format chrome although its extension names csv"),
        "{err}"
    );
}

#[test]
fn the_cuda_backend_says_what_is_missing() {
    // Without the feature, the fix is to rebuild; with it, on a machine without the
    // driver (CI), the missing library is named. Where a GPU is present, the run works.
    let out = taskwatt(&[
        "run",
        "gemm",
        "--n",
        "256",
        "--tile",
        "128",
        "--workers",
        "1",
        "--gpus",
        "1",
        "--gpu-backend",
        "cuda",
        "--no-energy",
        "--no-perfmodel",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if cfg!(feature = "cuda") {
        if out.status.success() {
            eprintln!("a CUDA device is here: the run worked");
            return;
        }
        assert!(
            err.contains("libcuda") || err.contains("cuBLAS") || err.contains("CUDA device"),
            "{err}"
        );
    } else {
        assert!(!out.status.success());
        assert!(err.contains("--features cuda"), "{err}");
    }
}

#[test]
fn every_app_checks_its_result_beside_emulated_gpus_under_every_policy() {
    // 2 CPU workers and 2 emulated GPUs, whose copies of the tiles are separate
    // allocations: a coherence bug would fail the check.
    for policy in ["eager", "ws", "lws", "prio"] {
        for (app, extra) in [
            ("cholesky", &["--n", "512", "--tile", "64"][..]),
            ("gemm", &["--n", "256", "--tile", "64"]),
            ("stencil", &["--n", "256", "--tile", "64", "--steps", "5"]),
        ] {
            let mut args = vec![
                "run",
                app,
                "--sched",
                policy,
                "--workers",
                "2",
                "--gpus",
                "2",
                "--json",
            ];
            args.extend_from_slice(extra);
            let v: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
            assert_eq!(v["app"]["check"]["passed"], true, "{app} under {policy}");
            let archs: Vec<&str> = v["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w["arch"].as_str().unwrap())
                .collect();
            assert_eq!(archs, ["cpu", "cpu", "gpu", "gpu"]);
            assert_eq!(v["gpu_backend"], "emulated");
        }
    }
    // The copies are in the trace: Chrome tracks, a CSV file beside the tasks, a report line.
    // One CPU worker and tasks of about a millisecond: under eager (a shared queue) the
    // GPUs take some of them, and their data is copied to them.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("g.twt");
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--sched",
        "eager",
        "--workers",
        "1",
        "--gpus",
        "2",
        "--trace",
        s(&trace),
        "--json",
    ]))
    .unwrap();
    let copies = v["stats"]["transfers"].as_u64().unwrap();
    assert!(copies > 0);
    let chrome = dir.path().join("g.json");
    ok(&["export", s(&trace), "--format", "chrome", "-o", s(&chrome)]);
    let c: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let events = c["traceEvents"].as_array().unwrap();
    let n = events.iter().filter(|e| e["cat"] == "transfer").count() as u64;
    assert_eq!(n, copies, "one slice per copy");
    assert!(events.iter().any(|e| e["cat"] == "gpu"), "GPU task slices");
    ok(&[
        "export",
        s(&trace),
        "--format",
        "csv",
        "-o",
        s(&dir.path().join("g.csv")),
    ]);
    let rows = std::fs::read_to_string(dir.path().join("g.transfers.csv")).unwrap();
    assert_eq!(
        rows.lines().count() as u64,
        copies + 1,
        "header + one row per copy"
    );
    let report = ok(&["report", s(&trace)]);
    assert!(
        report.contains(&format!("transfers: {copies} copies between memory nodes")),
        "{report}"
    );
    assert!(report.contains("@gpu"), "{report}");

    let out = taskwatt(&["run", "gemm", "--gpus", "4"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gpus"));
}

#[test]
fn every_app_checks_its_result_under_every_policy() {
    for policy in ["eager", "ws", "lws", "prio"] {
        for (app, extra) in [
            ("cholesky", &["--n", "256", "--tile", "64"][..]),
            ("gemm", &["--n", "256", "--tile", "64"]),
            ("stencil", &["--n", "256", "--tile", "64", "--steps", "5"]),
        ] {
            let mut args = vec!["run", app, "--sched", policy, "--json"];
            args.extend_from_slice(extra);
            let v: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
            assert_eq!(v["app"]["check"]["passed"], true, "{app} under {policy}");
        }
    }
}

#[test]
fn truncated_trace_is_an_error_that_names_the_offset_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.twt");
    ok(&[
        "run",
        "stencil",
        "--n",
        "256",
        "--tile",
        "32",
        "--steps",
        "40",
        "--trace",
        s(&trace),
        // Buffers of 64 records reach the file while the graph runs, whatever the
        // workers' idle periods: the first two thirds of the file hold some of them.
        "--trace-chunk",
        "64",
    ]);
    let bytes = std::fs::read(&trace).unwrap();
    // `report --csv/--svg DIR` never writes over its input, whatever the input's name.
    for (name, flag) in [("types.csv", "--csv"), ("plot.svg", "--svg")] {
        let odd = dir.path().join(name);
        std::fs::copy(&trace, &odd).unwrap();
        let out = taskwatt(&["report", s(&odd), flag, s(dir.path())]);
        assert!(!out.status.success(), "{name}");
        assert_eq!(std::fs::read(&odd).unwrap(), bytes, "{name} intact");
    }
    let cut = dir.path().join("cut.twt");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();

    let out = taskwatt(&[
        "export",
        s(&cut),
        "--format",
        "csv",
        "-o",
        s(&dir.path().join("x.csv")),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut.twt") && err.contains("byte"), "{err}");
    assert!(err.contains("--recover"), "{err}");

    let out = taskwatt(&[
        "export",
        s(&cut),
        "--format",
        "csv",
        "-o",
        s(&dir.path().join("x.csv")),
        "--recover",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(dir.path().join("x.csv"))
        .unwrap()
        .lines()
        .count()
        - 1;
    assert!(
        rows > 0 && rows < 40 * 64,
        "recovered {rows} of {} tasks",
        40 * 64
    );

    // `report --recover` of a metered trace cut before its readings: cut short, not a
    // run without a meter (which it said, with the advice to record with one).
    let early = dir.path().join("early.twt");
    std::fs::write(&early, &bytes[..bytes.len().min(5000)]).unwrap();
    let out = taskwatt(&["report", s(&early), "--recover"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cut short") && !err.contains("without an energy meter"),
        "{err}"
    );
}

#[test]
fn an_unknown_policy_from_the_environment_names_the_variable() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskwatt"))
        .args(["run", "gemm", "--n", "64", "--tile", "32", "--no-energy"])
        .env("TASKWATT_SCHED", "dmdaa")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`dmdaa` (from TASKWATT_SCHED)") && err.contains("lws"),
        "{err}"
    );
}

#[test]
fn unknown_policy_is_a_clear_error() {
    let out = taskwatt(&[
        "run", "gemm", "--n", "64", "--tile", "32", "--sched", "heft",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("heft") && err.contains("eager, ws, lws, prio"),
        "{err}"
    );
    // `run --mpi` refuses the flags a distributed run does not honour, by name (and takes
    // `--gpus`: the distributed apps have the built-in codelets' GPU implementations).
    let out = taskwatt(&[
        "run",
        "cholesky",
        "--mpi",
        "--gpus",
        "1",
        "--iterations",
        "2",
        "--svg",
        "x.svg",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not take --iterations, --svg"), "{err}");
    // The help names every policy the registry has.
    let help = ok(&["run", "--help"]);
    for p in taskwatt::scheduler::POLICIES {
        assert!(help.contains(p.name), "`run --help` omits {}", p.name);
    }
    // The flush bound the help states is the runtime's.
    let ms = taskwatt::runtime::DEFAULT_TRACE_FLUSH.as_millis();
    assert!(
        help.contains(&format!("at least every {ms} ms of its own tasks")),
        "`run --help` states another trace flush than the runtime's {ms} ms"
    );
}

#[test]
fn perfmodel_show_check_and_clear() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let trace = dir.path().join("t.twt");
    let base = [
        "run",
        "cholesky",
        "--n",
        "512",
        "--tile",
        "64",
        "--workers",
        "2",
        "--no-energy",
        "--perfmodel-dir",
    ];
    let mut args = base.to_vec();
    args.push(s(&models));
    ok(&args);
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["perfmodel", "show", "--dir", s(&models), "--json"])).unwrap();
    for name in ["potrf", "trsm", "syrk", "gemm"] {
        assert!(v["codelets"][name].is_array(), "no model of {name}: {v}");
    }
    // A second run that does not record, checked against the models.
    let mut args = base.to_vec();
    args.extend([s(&models), "--no-perfmodel", "--trace", s(&trace)]);
    ok(&args);
    let c: serde_json::Value = serde_json::from_str(&ok(&[
        "perfmodel",
        "check",
        s(&trace),
        "--dir",
        s(&models),
        "--json",
    ]))
    .unwrap();
    let gemm = c
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task_type"] == "gemm@cpu")
        .unwrap();
    assert_eq!(gemm["tasks"], gemm["predicted"]);
    assert!(gemm["median_error_pct"].as_f64().is_some());
    let svg = dir.path().join("svg");
    ok(&["perfmodel", "show", "--dir", s(&models), "--svg", s(&svg)]);
    let drawn = std::fs::read_to_string(svg.join("gemm.svg")).unwrap();
    assert!(
        drawn.starts_with("<svg") && drawn.contains("cpu"),
        "{drawn:.200}"
    );
    ok(&["perfmodel", "clear", "gemm", "--dir", s(&models)]);
    let out = taskwatt(&["perfmodel", "show", "gemm", "--dir", s(&models)]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no model of codelet `gemm`"));
}

/// `compare --svg FILE` is refused before any run (it ran every policy, then failed).
#[test]
fn compare_refuses_an_svg_path_that_is_a_file_before_running() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("plot.svg");
    std::fs::write(&file, "not a directory").unwrap();
    let keep = d.path().join("keep");
    let out = taskwatt(&[
        "compare",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--meter",
        "sim",
        "--policies",
        "lws",
        "--repeat",
        "1",
        "--keep",
        keep.to_str().unwrap(),
        "--svg",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--svg") && err.contains("not a directory"),
        "{err}"
    );
    // No run was made: --keep holds no trace.
    let traces = std::fs::read_dir(&keep).map_or(0, |r| r.count());
    assert_eq!(traces, 0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
}

/// `run --svg FILE` likewise: it ran the app, printed the report and saved its models,
/// then failed on the plots.
#[test]
fn run_refuses_an_svg_path_that_is_a_file_before_running() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("chol.twt");
    std::fs::write(&file, "not a directory").unwrap();
    let models = d.path().join("pm");
    let out = taskwatt(&[
        "run",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--meter",
        "sim",
        "--perfmodel-dir",
        s(&models),
        "--svg",
        s(&file),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--svg") && err.contains("not a directory"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing ran");
    assert!(!models.exists(), "no model was saved");
}

/// `export --recover` of a trace cut inside its first chunk has nothing to export: an
/// error, not a Chrome file of one event and exit 0; an empty file says it is empty.
#[test]
fn recovering_a_trace_without_a_complete_chunk_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (full, cut, out) = (
        d.path().join("t.twt"),
        d.path().join("cut.twt"),
        d.path().join("cut.json"),
    );
    ok(&[
        "run",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--no-energy",
        "--trace",
        s(&full),
    ]);
    std::fs::write(&cut, &std::fs::read(&full).unwrap()[..100]).unwrap();
    let o = taskwatt(&[
        "export",
        "--recover",
        "--format",
        "chrome",
        "-o",
        s(&out),
        s(&cut),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nothing to recover"), "{err}");
    assert!(!out.exists());
    std::fs::write(&cut, b"").unwrap();
    let o = taskwatt(&["report", s(&cut)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("the file is empty") && !err.contains("--recover"),
        "{err}"
    );
}

/// An empty StarPU file is refused, as an empty tasks CSV is (it imported as a 0-task
/// trace).
#[test]
fn an_empty_starpu_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rec = d.path().join("tasks.rec");
    std::fs::write(&rec, "").unwrap();
    let out = taskwatt(&[
        "import",
        "--starpu",
        s(&rec),
        "-o",
        s(&d.path().join("o.twt")),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no executed task"), "{err}");
    assert!(!d.path().join("o.twt").exists());
}

#[test]
fn an_n_the_tile_does_not_divide_is_padded_for_every_app() {
    for (app, tasks) in [("cholesky", 20), ("gemm", 64), ("stencil", 5 * 16)] {
        let json = ok(&[
            "run",
            app,
            "--n",
            "500",
            "--tile",
            "128",
            "--steps",
            "5",
            "--workers",
            "2",
            "--no-energy",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        // 4 x 4 tiles, the last row and column padded (500 -> 512).
        assert_eq!(v["app"]["tasks"], tasks, "{app}");
        assert_eq!(v["app"]["check"]["passed"], true, "{app}");
    }
}

#[test]
fn ranks_of_an_mpi_launcher_without_mpi_are_refused() {
    // `mpirun -np 2 taskwatt run ... --trace t.twt` without --mpi: two whole runs wrote one
    // trace over each other (a CRC error on reading), and both said they succeeded.
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    let rank_of = |size: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_taskwatt"))
            .args([
                "run",
                "cholesky",
                "--n",
                "256",
                "--tile",
                "64",
                "--no-energy",
            ])
            .args(["--trace", trace.to_str().unwrap()])
            .env("OMPI_COMM_WORLD_SIZE", size)
            .env("TASKWATT_PERFMODEL_DIR", d.path().join("pm"))
            .output()
            .unwrap()
    };
    let out = rank_of("2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--mpi") && err.contains("OMPI_COMM_WORLD_SIZE=2"),
        "{err}"
    );
    assert!(!trace.exists(), "nothing is written");
    // One rank (mpirun -np 1) is a plain run.
    let out = rank_of("1");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(trace.exists());
}

#[test]
fn a_trace_recorded_without_a_meter_says_how_to_get_energy() {
    let d = tempfile::tempdir().unwrap();
    let trace = d.path().join("t.twt");
    ok(&[
        "run",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--no-energy",
        "--no-perfmodel",
        "--trace",
        s(&trace),
    ]);
    // It said "record the run with a meter enabled", which `bench` has no flag for.
    let out = taskwatt(&["report", s(&trace)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("recorded without an energy meter") && err.contains("taskwatt predict"),
        "{err}"
    );
}

#[test]
fn an_import_says_the_unit_it_read_the_times_in() {
    // A user's times in ms, read as s (the default), imported as a 100 s run silently.
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("t.csv");
    std::fs::write(
        &csv,
        "type,worker,start,end\na,0,0,10\nb,0,10,30\na,0,30,100\n",
    )
    .unwrap();
    let out = taskwatt(&[
        "import",
        "--tasks",
        s(&csv),
        "-o",
        s(&d.path().join("t.twt")),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("spanning 100.000 s") && err.contains("read in s (--time-unit"),
        "{err}"
    );
}

#[test]
fn an_import_names_both_sources_and_warns_of_overlapping_tasks() {
    let d = tempfile::tempdir().unwrap();
    let out_path = d.path().join("t.twt");
    // Without a source the usage names both (it named --tasks alone).
    let out = taskwatt(&["import", "-o", s(&out_path)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--tasks") && err.contains("--starpu"), "{err}");
    // Two tasks at once on worker 0: imported, with a warning.
    let csv = d.path().join("t.csv");
    std::fs::write(
        &csv,
        "type,worker,start,end\ngemm,0,0.5,1.5\ngemm,0,1.0,2.0\n",
    )
    .unwrap();
    let out = taskwatt(&["import", "--tasks", s(&csv), "-o", s(&out_path)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("1 of the 2 tasks start before"), "{err}");
    // --workers without --samples was ignored without a word.
    let w = d.path().join("w.csv");
    std::fs::write(&w, "worker,domain\n0,package-0\n").unwrap();
    let out = taskwatt(&[
        "import",
        "--tasks",
        s(&csv),
        "--workers",
        s(&w),
        "-o",
        s(&out_path),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("give --samples too"),
        "{err}"
    );
}

/// Samples whose times were in s, imported as ms beside tasks in ms: the report showed a
/// base of 400 kW "measured" to 524 pW, with a warning that the domain saw no task.
#[test]
fn readings_that_miss_the_tasks_are_not_attributed_and_say_why() {
    let d = tempfile::tempdir().unwrap();
    let (tasks, samples) = (d.path().join("t.csv"), d.path().join("s.csv"));
    let mut t = String::from("type,worker,start,end\n");
    for i in 0..200 {
        t += &format!("gemm,{},{},{}\n", i % 2, 130 + i, 130.5 + i as f64);
    }
    std::fs::write(&tasks, t).unwrap();
    let mut s_csv = String::from("time,domain,energy_j\n");
    for i in 0..200 {
        s_csv += &format!(
            "{:.3},package-0,{}\n",
            0.130 + i as f64 * 1e-3,
            i as f64 * 0.04
        );
    }
    std::fs::write(&samples, s_csv).unwrap();
    let twt = d.path().join("t.twt");
    let out = taskwatt(&[
        "import",
        "--tasks",
        s(&tasks),
        "--samples",
        s(&samples),
        "--time-unit",
        "ms",
        "-o",
        s(&twt),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = taskwatt(&["report", s(&twt)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("NOT ATTRIBUTED: no task ran"), "{text}");
    assert!(text.contains("do not overlap"), "{text}");
    assert!(text.contains("beyond what any one device"), "{text}");
}

#[test]
fn the_simulated_meter_s_defaults_can_be_printed() {
    // A sim-config error pointed at energy/src/sim/default.toml, a source file a user of
    // the binary does not have.
    let text = ok(&["meters", "--sim-defaults"]);
    assert!(
        text.contains("[package]") && text.contains("base_w"),
        "{text}"
    );
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.toml");
    // A misspelt field: the error names it and where the defaults are.
    std::fs::write(&bad, "[package]\nbase_watts = 45.0\n").unwrap();
    let out = taskwatt(&[
        "run",
        "cholesky",
        "--n",
        "256",
        "--tile",
        "64",
        "--meter",
        "sim",
        "--sim-config",
        s(&bad),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("base_w") && err.contains("--sim-defaults"),
        "{err}"
    );
}
