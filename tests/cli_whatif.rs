//! `taskwatt simulate` and `taskwatt run --platform`: a recorded graph in virtual time.

mod common;

use common::{json, ok, s, taskwatt};

/// Records Cholesky n=1024 tile=128 (120 tasks) on 2 workers under `policy`, with the
/// simulated meter; returns the trace's path.
fn record(dir: &std::path::Path, policy: &str) -> std::path::PathBuf {
    record_with(dir, policy, &["--no-report"])
}

/// [`record`] with `extra` arguments.
fn record_with(dir: &std::path::Path, policy: &str, extra: &[&str]) -> std::path::PathBuf {
    let (trace, pm) = (dir.join(format!("{policy}.twt")), dir.join("pm"));
    let mut args = vec![
        "run",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "128",
        "--workers",
        "2",
        "--sched",
        policy,
        "--meter",
        "sim",
        "--perfmodel-dir",
        s(&pm),
        "--trace",
        s(&trace),
    ];
    args.extend_from_slice(extra);
    ok(&args);
    trace
}

#[test]
fn simulate_replays_a_recorded_run_under_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record(dir.path(), "lws");
    let v = json(&[
        "simulate",
        s(&trace),
        "--platform",
        "this-machine",
        "--sched",
        "eager,ws,lws,prio,dmda",
        "--json",
    ]);
    assert_eq!(v["simulated"], "virtual time");
    let recorded = v["recorded"]["figures"]["makespan_s"].as_f64().unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    for r in runs {
        let per_worker: u64 = r["tasks_per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(per_worker, 120, "{r}");
        assert!(r["figures"]["total_j"].as_f64().unwrap() > 0.0, "{r}");
        // Each prediction has its interval, from replicas whose durations are drawn from
        // the recorded variability, and it holds the prediction.
        assert_eq!(r["replicas"], 8, "{r}");
        let (lo, hi) = (
            r["makespan_ci_s"][0].as_f64().unwrap(),
            r["makespan_ci_s"][1].as_f64().unwrap(),
        );
        let m = r["figures"]["makespan_s"].as_f64().unwrap();
        // (The width is the recording's own variability: in a test run beside others it
        // can be wide.)
        assert!(0.0 <= lo && lo < m && m < hi, "{lo}..{hi} around {m}");
        assert!(r["energy_ci_j"][1].as_f64().unwrap() > r["energy_ci_j"][0].as_f64().unwrap());
    }
    // And the order is either stated beyond the intervals or called indistinguishable.
    let verdicts = v["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 2, "{verdicts:?}");
    for verdict in verdicts {
        let t = verdict.as_str().unwrap();
        assert!(
            t.contains("indistinguishable") || t.contains("beyond the others"),
            "{t}"
        );
    }
    // Replayed under the policy it ran with, the run takes no longer than it did (a
    // disturbed recording, from tests running beside it, is longer than its replay, which
    // has its durations but not its waits), and at least its work over the two workers.
    let lws = runs.iter().find(|r| r["policy"] == "lws").unwrap();
    let m = lws["figures"]["makespan_s"].as_f64().unwrap();
    let work: f64 = lws["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["busy_s"].as_f64().unwrap())
        .sum();
    assert!(
        m >= work / 2.0 && m <= recorded * 1.25,
        "simulated {m} s: recorded {recorded} s, work {work} s on 2 workers"
    );

    // One policy to a trace, which report and export read, marked as virtual time.
    let out = dir.path().join("sim.twt");
    ok(&[
        "simulate",
        s(&trace),
        "--platform",
        "this-machine",
        "--sched",
        "dmda",
        "--output",
        s(&out),
    ]);
    let report = ok(&["report", s(&out)]);
    assert!(report.contains("VIRTUAL TIME"), "{report}");
    assert!(report.contains("SIMULATED"), "{report}");
    let j = json(&["report", s(&out), "--json"]);
    assert_eq!(j["run"], "virtual time");
    ok(&["export", s(&out), "-o", s(&dir.path().join("sim.json"))]);

    // Without replicas, the verdict says the rows cannot be ranked (it said nothing).
    let none = json(&[
        "simulate",
        s(&trace),
        "--platform",
        "this-machine",
        "--sched",
        "eager,lws",
        "--replicas",
        "0",
        "--json",
    ]);
    let v = none["verdicts"].as_array().unwrap();
    assert!(
        v.len() == 1 && v[0].as_str().unwrap().contains("do not rank them"),
        "{none}"
    );

    // A policy named twice is simulated once, and said (two identical rows were printed).
    let twice = taskwatt(&[
        "simulate",
        s(&trace),
        "--platform",
        "this-machine",
        "--sched",
        "eager,EAGER",
        "--json",
    ]);
    assert!(twice.status.success());
    assert!(String::from_utf8_lossy(&twice.stderr).contains("more than once"));
    let v: serde_json::Value = serde_json::from_slice(&twice.stdout).unwrap();
    let rows = v["runs"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");

    // Errors name what is wrong.
    let e = taskwatt(&["simulate", s(&trace), "--platform", "nowhere.toml"]);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success());
    assert!(
        msg.contains("nowhere.toml") && msg.contains("2cpu-2gpu"),
        "{msg}"
    );
    let fails = |extra: &[&str]| {
        let mut args = vec!["simulate", s(&trace), "--platform", "2x16"];
        args.extend(extra);
        let e = taskwatt(&args);
        assert!(!e.status.success());
        String::from_utf8_lossy(&e.stderr).into_owned()
    };
    assert!(fails(&["--sched", "fifo"]).contains("fifo"));
    let e = fails(&["--sched", "eager,lws", "--output", s(&out)]);
    assert!(e.contains("one policy"), "{e}");
}

#[test]
fn run_on_a_heterogeneous_platform_checks_the_result_and_dmda_uses_the_gpus() {
    // The platform and size: n=4096, tile 512 (56 gemms), gemm 8x faster on 2 GPUs.
    let dir = tempfile::tempdir().unwrap();
    let app = ["cholesky", "--n", "4096", "--tile", "512", "--workers", "2"];
    let sim = dir.path().join("dmda.twt");
    let mut args = vec!["run"];
    args.extend(app);
    args.extend([
        "--platform",
        "2cpu-2gpu",
        "--sched",
        "dmda",
        "--json",
        "--trace",
        s(&sim),
    ]);
    let v = json(&args);
    assert_eq!(v["recorded"]["app"]["check"]["passed"], true, "{v}");
    assert_eq!(v["simulated"], "virtual time");
    let count = |run: &serde_json::Value, key: &str| -> u64 {
        run["types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == key)
            .map_or(0, |t| t["count"].as_u64().unwrap())
    };
    // dmda sends most gemms to the GPUs.
    assert!(
        count(&v["run"], "gemm@gpu") > 3 * count(&v["run"], "gemm@cpu"),
        "{v}"
    );
    let report = ok(&["report", s(&sim)]);
    assert!(report.contains("VIRTUAL TIME"), "{report}");

    // From one recording, dmda finishes before eager (a recording per policy would
    // compare two recordings as much as two policies).
    let rec = dir.path().join("rec.twt");
    let mut args = vec!["run"];
    args.extend(app);
    args.extend(["--no-energy", "--no-report", "--trace", s(&rec)]);
    ok(&args);
    let v = json(&[
        "simulate",
        s(&rec),
        "--platform",
        "2cpu-2gpu",
        "--sched",
        "eager,dmda",
        "--no-energy",
        "--json",
    ]);
    let makespan = |i: usize| v["runs"][i]["figures"]["makespan_s"].as_f64().unwrap();
    assert_eq!(v["runs"][1]["policy"], "dmda");
    assert!(
        makespan(1) < makespan(0),
        "dmda {} s, eager {} s",
        makespan(1),
        makespan(0)
    );
}

#[test]
fn compare_adds_simulated_rows_and_plots_them_beside_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("svg");
    let base = [
        "compare",
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "256",
        "--workers",
        "2",
        "--meter",
        "sim",
        "--policies",
        "lws",
        "--repeat",
        "1",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--simulate",
        "dmda,eager",
        "--platform",
        "this-machine,2cpu-2gpu",
        "--svg",
        s(&svg),
        "--json",
    ]);
    let v = json(&args);
    let rows = v["virtual_rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{v}");
    // Each platform's rows get simulate's verdicts (makespan and energy): compare ranked
    // nothing among them.
    let verdicts = v["virtual_verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 4, "{verdicts:?}");
    assert!(verdicts.iter().all(|x| {
        let t = x.as_str().unwrap();
        t.starts_with("on ") && (t.contains("indistinguishable") || t.contains("beyond"))
    }));
    // On the GPU platform the CPU model is a lower bound: the platform powers are ranked,
    // and said to be.
    assert!(
        verdicts.iter().any(|x| x.as_str().unwrap().contains("GPU")
            && x.as_str().unwrap().contains("energy (platform powers")),
        "{verdicts:?}"
    );
    assert!(rows
        .iter()
        .any(|r| r["platform"].as_str().unwrap().contains("2 GPUs")));
    for r in rows {
        assert!(r["makespan_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["meter_j"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["predicted_j"].as_f64().unwrap() > 0.0, "{r}");
        // A CPU-only model predicts no GPU: the rows with GPUs say what they leave out.
        let gpus = r["platform"].as_str().unwrap().contains("GPU");
        assert_eq!(r["unpredicted_domains"].is_array(), gpus, "{r}");
    }
    let plot = std::fs::read_to_string(svg.join("whatif.svg")).unwrap();
    // The model's energy where it covers the platform, the platform's powers where not.
    assert!(plot.contains("(simulated, model)") && plot.contains("(run)"));
    assert!(plot.contains("(simulated, platform powers)"), "{plot}");
    let mut args = base.to_vec();
    args.extend(["--platform", "2x16"]);
    let e = taskwatt(&args);
    assert!(String::from_utf8_lossy(&e.stderr).contains("add --simulate"));
}

#[test]
fn run_on_a_platform_without_executing_takes_durations_from_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let pm = dir.path().join("pm");
    let app = [
        "cholesky",
        "--n",
        "1024",
        "--tile",
        "256",
        "--perfmodel-dir",
        s(&pm),
    ];
    // No models yet: the error says how to record them.
    let mut args = vec!["run"];
    args.extend(app);
    args.extend(["--platform", "2cpu-2gpu", "--no-exec", "--no-report"]);
    let e = taskwatt(&args);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success());
    assert!(
        msg.contains("no performance model") && msg.contains("taskwatt run cholesky"),
        "{msg}"
    );
    // A real run records them; then the graph alone is simulated.
    let mut rec = vec!["run"];
    rec.extend(app);
    rec.extend(["--no-energy", "--no-report"]);
    ok(&rec);
    args.push("--json");
    let v = json(&args);
    assert_eq!(
        v["recorded"]["app"]["check"],
        serde_json::Value::Null,
        "{v}"
    );
    let tasks: u64 = v["run"]["tasks_per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(tasks, 20);
    assert!(v["run"]["figures"]["makespan_s"].as_f64().unwrap() > 0.0);
    // Each duration is drawn from its model's spread, so the replicas' interval has one
    // (every task at its type's mean gave an interval of zero width).
    let ci = &v["run"]["makespan_ci_s"];
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    assert!(hi > lo, "{ci}");
}

/// Without --energy-model, `simulate` predicts with the model the recorded app's last
/// measured run saved, the platform's configured powers beside it; `--platform-powers`
/// asks for those alone, and no saved model says there is none.
#[test]
fn simulate_predicts_energy_with_the_app_s_saved_model() {
    let dir = tempfile::tempdir().unwrap();
    // A measured run with its report saves the app's model beside the performance models.
    let (trace, pm) = (record_with(dir.path(), "lws", &[]), dir.path().join("pm"));
    assert!(pm.join("energy-model-cholesky.json").exists());
    let sim_on = |platform: &str, models: &std::path::Path, extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskwatt"))
            .args(["simulate", s(&trace), "--platform", platform])
            .args(if extra.contains(&"--replicas") {
                &[][..]
            } else {
                &["--replicas", "0"][..]
            })
            .args(extra)
            .env("TASKWATT_PERFMODEL_DIR", models)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let sim = |models: &std::path::Path, extra: &[&str]| sim_on("this-machine", models, extra);
    let (text, err) = sim(&pm, &[]);
    assert!(err.contains("energy-model-cholesky.json"), "{err}");
    assert!(
        text.contains("energy (model)") && text.contains("platform powers"),
        "{text}"
    );
    let (text, _) = sim(&pm, &["--platform-powers"]);
    assert!(!text.contains("energy (model)"), "{text}");
    // The model's energy, shown first, has its own interval (it had the platform
    // powers' alone): the replicas' spread and the model's, around its prediction.
    let (json, _) = sim(&pm, &["--replicas", "4", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r = &v["runs"][0];
    let p = r["predicted_j"].as_f64().unwrap();
    let [lo, hi] = [0, 1].map(|i| r["predicted_ci_j"][i].as_f64().unwrap());
    assert!(lo < p && p < hi, "{lo}..{hi} around {p}");
    let (text, _) = sim(&pm, &["--replicas", "4"]);
    assert!(text.contains(", energy (model) "), "{text}");
    // The model's prediction is over the simulated run, whatever the platform's meters
    // sample at: it was over their readings' window, which runs to the next refresh past
    // the end, and grew with the period (0.86 J at 10 ms, 0.55 J at 1 ms, 0.49 J
    // measured, in a user's run).
    let platform = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/whatif/platforms/this-machine.toml"
    ))
    .unwrap();
    let mut predicted = Vec::new();
    for period in ["1", "50"] {
        let p = dir.path().join(format!("p{period}.toml"));
        let text = platform
            .lines()
            .map(|l| {
                if l.starts_with("period_ms") {
                    format!("period_ms = {period}")
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(text.contains(&format!("period_ms = {period}")), "{text}");
        std::fs::write(&p, text).unwrap();
        let (out, _) = sim_on(s(&p), &pm, &["--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        predicted.push(v["runs"][0]["predicted_j"].as_f64().unwrap());
    }
    assert!(
        (predicted[0] - predicted[1]).abs() < 1e-6 * predicted[0],
        "{predicted:?}"
    );
    // On two sockets the model (fitted on one) predicts the first only: the table marks
    // its figure and names what it leaves out (only a note on stderr said so).
    let (out, _) = sim_on("2x16", &pm, &[]);
    assert!(
        out.contains("J*") && out.contains("no fit of simulated package-1"),
        "{out}"
    );
    let (out, _) = sim_on("2x16", &pm, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let left = v["runs"][0]["unpredicted_domains"].as_array().unwrap();
    assert!(left.iter().any(|d| d == "simulated package-1"), "{left:?}");
    // A run too short to pin down any power (4 tasks) keeps that model, and says so.
    let before = std::fs::read(pm.join("energy-model-cholesky.json")).unwrap();
    let out = taskwatt(&[
        "run",
        "cholesky",
        "--n",
        "128",
        "--tile",
        "64",
        "--meter",
        "sim",
        "--perfmodel-dir",
        s(&pm),
    ]);
    assert!(out.status.success());
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(note.contains("pinned down no task type's power"), "{note}");
    assert_eq!(
        std::fs::read(pm.join("energy-model-cholesky.json")).unwrap(),
        before
    );
    let (text, err) = sim(&dir.path().join("none"), &[]);
    assert!(text.contains("no fitted model"), "{text}");
    assert!(!err.contains("energy model:"), "{err}");
}

#[test]
fn a_recording_with_emulated_gpus_says_its_cpu_durations_include_their_threads() {
    // Emulated GPUs are threads on the CPUs' cores: a user's CPU tasks ran 20 % slower
    // beside them, and simulating the trace on a CPU-only platform kept those durations
    // without a word.
    let dir = tempfile::tempdir().unwrap();
    let trace = record_with(dir.path(), "lws", &["--no-report", "--gpus", "1"]);
    let out = taskwatt(&[
        "simulate",
        s(&trace),
        "--platform",
        "this-machine",
        "--replicas",
        "0",
        "--no-energy",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("1 emulated GPU(s)"), "{err}");
    // The recorded energy includes the GPU's, which a CPU-only platform has not.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("which this platform does not have"), "{text}");
    // A recording without them gets no such note.
    let plain = record(dir.path(), "eager");
    let out = taskwatt(&[
        "simulate",
        s(&plain),
        "--platform",
        "this-machine",
        "--replicas",
        "0",
        "--no-energy",
    ]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("emulated GPU"));
}
