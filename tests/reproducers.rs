//! Issue 16's reproducers, end to end: each one must end in a clean error (exit 1, or 2
//! for clap's usage errors) or a correct result, under a 2 GiB address-space limit and
//! within 20 s: no panic, abort, hang or out-of-memory kill. Outputs never clobber inputs.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ok, s};

/// Runs `taskwatt args` under `ulimit -v 2 GiB`, failing the test if it has not exited
/// within `limit` or died of a signal or a panic. Returns its output.
fn bounded_for(limit: Duration, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_taskwatt"))
        .args(args)
        .env_remove("TASKWATT_SCHED")
        .env(
            "TASKWATT_PERFMODEL_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/perfmodels"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Drained while it runs: a full pipe would block it.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out_t = drain(child.stdout.take().map(|o| Box::new(o) as _));
    let err_t = drain(child.stderr.take().map(|o| Box::new(o) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("taskwatt {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = Output {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "taskwatt {args:?} died of a signal (abort or OOM): {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && out.status.code() != Some(101),
        "taskwatt {args:?} panicked: {stderr}"
    );
    out
}

fn bounded(args: &[&str]) -> Output {
    bounded_for(Duration::from_secs(20), args, &[])
}

/// Asserts a clean refusal whose message contains `want`.
fn refused(args: &[&str], want: &str) {
    refused_env(args, &[], want)
}

fn refused_env(args: &[&str], env: &[(&str, &str)], want: &str) {
    let out = bounded_for(Duration::from_secs(20), args, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "taskwatt {args:?} should be refused, got {:?}: {stderr}",
        out.status
    );
    assert!(
        stderr.contains(want),
        "taskwatt {args:?}: the message should say `{want}`: {stderr}"
    );
}

/// As [`refused`], and `file` is left byte for byte as it was.
fn refused_leaving(args: &[&str], want: &str, file: &Path) {
    let before = std::fs::read(file).unwrap();
    refused(args, want);
    assert_eq!(
        std::fs::read(file).unwrap(),
        before,
        "{} changed",
        file.display()
    );
}

/// A small complete trace (stencil, simulated energy).
fn small_trace(dir: &Path) -> PathBuf {
    let trace = dir.join("t.twt");
    ok(&[
        "run",
        "stencil",
        "--n",
        "256",
        "--tile",
        "64",
        "--steps",
        "4",
        "--workers",
        "2",
        "--period",
        "1ms",
        "--no-report",
        "--trace",
        s(&trace),
    ]);
    trace
}

fn write(path: &Path, text: &[u8]) {
    std::fs::File::create(path)
        .unwrap()
        .write_all(text)
        .unwrap();
}

/// A small stencil run, for the refusals that must come before it starts.
const SMALL_STENCIL: &[&str] = &[
    "run", "stencil", "--n", "256", "--tile", "64", "--steps", "2",
];

#[test]
fn outputs_never_clobber_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path());
    let before = std::fs::read(&trace).unwrap();
    refused(
        &["export", s(&trace), "--format", "csv", "-o", s(&trace)],
        "is also an input",
    );
    refused(
        &["export", s(&trace), "--format", "chrome", "-o", s(&trace)],
        "is also an input",
    );
    refused(&["fit", s(&trace), "-o", s(&trace)], "is also an input");
    // The same file under another name.
    let alias = dir.path().join(".").join("t.twt");
    refused(&["fit", s(&trace), "-o", s(&alias)], "is also an input");
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        before,
        "the trace is byte-identical"
    );
    // An energy model read by `run` (dmdae) and `simulate`, named as their output, and a
    // sim config read by `run`: refused before anything runs, the files untouched
    // (issue 29: both exited 0 with the model overwritten by a trace).
    let model = dir.path().join("m.json");
    ok(&["fit", s(&trace), "-o", s(&model)]);
    let model_before = std::fs::read(&model).unwrap();
    refused(
        &[
            SMALL_STENCIL,
            &[
                "--sched",
                "dmdae",
                "--energy-model",
                s(&model),
                "--trace",
                s(&model),
            ],
        ]
        .concat(),
        "is also an input",
    );
    let hard = dir.path().join("m-link.json");
    std::fs::hard_link(&model, &hard).unwrap();
    refused(
        &[
            "simulate",
            s(&trace),
            "--platform",
            "this-machine",
            "--sched",
            "lws",
            "--energy-model",
            s(&model),
            "--output",
            s(&hard),
        ],
        "is also an input",
    );
    assert_eq!(
        std::fs::read(&model).unwrap(),
        model_before,
        "the model is intact"
    );
    let sim = dir.path().join("sim.toml");
    write(&sim, b"[tasks]\nvariation = 0.0\n");
    refused(
        &[
            SMALL_STENCIL,
            &["--sim-config", s(&sim), "--trace", s(&sim)],
        ]
        .concat(),
        "is also an input",
    );
    assert_eq!(std::fs::read(&sim).unwrap(), b"[tasks]\nvariation = 0.0\n");
}

/// The files a run writes without a flag naming them (the performance models' directory:
/// models.json, bus.json, the saved energy model) never replace a file it reads, nor its
/// trace.
#[test]
fn the_performance_models_directory_never_clobbers_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let pm = dir.path().join("pm");
    std::fs::create_dir(&pm).unwrap();
    let base = [
        SMALL_STENCIL,
        &["--workers", "2", "--perfmodel-dir", s(&pm)],
    ]
    .concat();
    refused(
        &[&base[..], &["--trace", s(&pm.join("models.json"))]].concat(),
        "performance models' directory",
    );
    let sim = pm.join("bus.json");
    write(&sim, b"{\"tasks\": {\"variation\": 0.0}}");
    refused_leaving(
        &[&base[..], &["--sim-config", s(&sim)]].concat(),
        "is also an input",
        &sim,
    );
    refused_leaving(
        &[
            "compare",
            "stencil",
            "--n",
            "256",
            "--tile",
            "64",
            "--steps",
            "2",
            "--perfmodel-dir",
            s(&pm),
            "--sim-config",
            s(&sim),
        ],
        "is also an input",
        &sim,
    );
    // An energy model kept as the directory's models.json would be overwritten by the
    // performance models: refused.
    let in_models = dir.path().join("pm2");
    std::fs::create_dir(&in_models).unwrap();
    let em = in_models.join("models.json");
    write(&em, b"{}");
    refused_leaving(
        &[
            SMALL_STENCIL,
            &["--perfmodel-dir", s(&in_models), "--energy-model", s(&em)],
        ]
        .concat(),
        "is also an input",
        &em,
    );
    // The saved model's own slot named as --energy-model: the run goes on and leaves it.
    let trace = small_trace(dir.path());
    let model = pm.join("energy-model-stencil.json");
    ok(&["fit", s(&trace), "-o", s(&model)]);
    let before = std::fs::read(&model).unwrap();
    let out = bounded(&[&base[..], &["--energy-model", s(&model)]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("energy model was not saved"), "{stderr}");
    assert_eq!(
        std::fs::read(&model).unwrap(),
        before,
        "the model is intact"
    );
}

#[test]
fn a_failed_export_leaves_no_output_behind() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path());
    let bytes = std::fs::read(&trace).unwrap();
    // Cut short: strict export refuses it and writes nothing.
    let cut = dir.path().join("cut.twt");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    for format in ["chrome", "csv"] {
        let out = dir.path().join(format!("out-{format}"));
        refused(
            &["export", s(&cut), "--format", format, "-o", s(&out)],
            "--recover",
        );
        assert!(
            !out.exists(),
            "{format}: a failed export left {}",
            out.display()
        );
    }
    // An existing output is left as it was when the export fails.
    let out = dir.path().join("keep.json");
    std::fs::write(&out, b"previous").unwrap();
    refused(
        &["export", s(&cut), "--format", "chrome", "-o", s(&out)],
        "--recover",
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
}

#[test]
fn strict_export_refuses_what_report_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path());
    let bytes = std::fs::read(&trace).unwrap();
    let header_only = dir.path().join("header.twt");
    std::fs::write(&header_only, &bytes[..16]).unwrap();
    let twice = dir.path().join("twice.twt");
    let mut both = bytes.clone();
    both.extend_from_slice(&bytes[16..]);
    std::fs::write(&twice, &both).unwrap();
    for bad in [&header_only, &twice] {
        let r = bounded(&["report", s(bad)]);
        assert_eq!(
            r.status.code(),
            Some(1),
            "report accepted {}",
            bad.display()
        );
        let e = bounded(&["export", s(bad), "-o", s(&dir.path().join("x.json"))]);
        assert_eq!(
            e.status.code(),
            Some(1),
            "export accepted {}",
            bad.display()
        );
    }
}

#[test]
fn absurd_sizes_are_refused_up_front() {
    refused(
        &["run", "cholesky", "--period", "100000000000000000000s"],
        "one week",
    );
    refused(
        &[
            "run",
            "cholesky",
            "--idle-calibration",
            "100000000000000000000s",
        ],
        "one week",
    );
    refused(
        &["run", "gemm", "--n", "18446744073709551615", "--tile", "1"],
        "--n 18446744073709551615 needs",
    );
    refused(
        &["run", "gemm", "--n", "10000000", "--tile", "10000000"],
        "memory available",
    );
    refused(
        &["run", "stencil", "--workers", "100000", "--no-energy"],
        "100000",
    );
    refused(
        &[
            "run",
            "stencil",
            "--trace-chunk",
            "4000000000",
            "--no-energy",
        ],
        "4000000000",
    );
    refused(
        &[
            "bench",
            "taskbench",
            "-steps",
            "2",
            "-width",
            "100000000000000",
        ],
        "-width",
    );
    refused(&["run", "cholesky", "--n", "0"], "--n 0");
    refused(&["run", "cholesky", "--iterations", "0"], "--iterations");
    refused(&["compare", "stencil", "--repeat", "0"], "--repeat");
    // Audit defect 4: a billion repeats ran until killed.
    refused(
        &["compare", "stencil", "--repeat", "1000000000"],
        "--repeat",
    );
    refused(
        &[
            "bench",
            "taskbench",
            "-steps",
            "4",
            "-width",
            "2",
            "-iter",
            "4294967296",
        ],
        "-iter",
    );
    refused_env(
        &["run", "stencil", "--n", "64", "--tile", "32"],
        &[("TASKWATT_CLOCK", "bogus")],
        "TASKWATT_CLOCK",
    );
}

#[test]
fn svg_into_a_file_says_it_is_not_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let trace = small_trace(dir.path());
    refused(
        &["report", s(&trace), "--svg", "/dev/full"],
        "not a directory",
    );
}

#[test]
fn huge_ids_do_not_size_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.csv");
    let samples = dir.path().join("samples.csv");
    let workers = dir.path().join("workers.csv");
    let mut t = String::from("type,worker,start,end\n");
    let mut smp = String::from("time,domain,energy_j\n");
    for i in 0..200u64 {
        let w = if i % 2 == 0 { 0 } else { u32::MAX };
        t += &format!(
            "{},{w},{},{}\n",
            ["a", "b"][(i % 3 == 0) as usize],
            i * 10,
            i * 10 + 7
        );
    }
    for k in 0..=100u64 {
        smp += &format!(
            "{},package-0,{}\n",
            k * 20,
            k as f64 * 0.3 + (k % 7) as f64 * 0.01
        );
    }
    write(&tasks, t.as_bytes());
    write(&samples, smp.as_bytes());
    write(
        &workers,
        format!("worker,domain\n0,package-0\n{},package-0\n", u32::MAX).as_bytes(),
    );
    let trace = dir.path().join("big-ids.twt");
    ok(&[
        "import",
        "--tasks",
        s(&tasks),
        "--samples",
        s(&samples),
        "--workers",
        s(&workers),
        "--time-unit",
        "ms",
        "-o",
        s(&trace),
    ]);
    let r = bounded(&["report", s(&trace)]);
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let e = bounded(&["export", s(&trace), "-o", s(&dir.path().join("c.json"))]);
    assert_eq!(
        e.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
}

#[test]
fn many_task_types_end_in_a_result_or_a_clean_error_in_bounded_memory() {
    // The issue saw 5 000 types take 2.3 GB and 20 000 abort. Up to MAX_TYPES (1024) per
    // domain the dense fit runs; past it, coordinate descent on the sparse system, in
    // memory linear in the types, without intervals. (5 000 is the first figure;
    // 300 dense types keep this test at a few seconds in the dev profile, where 800 took
    // 13 s: the dense fit's cost is cubic in the types.)
    for (types, dense) in [(300u64, true), (5_000, false)] {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks.csv");
        let samples = dir.path().join("samples.csv");
        let mut t = String::from("type,worker,start,end\n");
        for i in 0..40_000u64 {
            t += &format!(
                "type{},{},{},{}\n",
                i % types,
                i % 2,
                (i / 2) * 10,
                (i / 2) * 10 + 8
            );
        }
        let mut smp = String::from("time,domain,energy_j\n");
        for k in 0..=4_000u64 {
            smp += &format!("{},package-0,{}\n", k * 50, k as f64 * 2.0);
        }
        write(&tasks, t.as_bytes());
        write(&samples, smp.as_bytes());
        let trace = dir.path().join("many.twt");
        ok(&[
            "import",
            "--tasks",
            s(&tasks),
            "--samples",
            s(&samples),
            "--time-unit",
            "us",
            "-o",
            s(&trace),
        ]);
        // Debug builds are slower than the 20 s the issue asks of the release binary.
        let r = bounded_for(
            Duration::from_secs(120),
            &["report", s(&trace), "--json"],
            &[],
        );
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(0), "{types} types: {err}");
        let out = String::from_utf8_lossy(&r.stdout);
        assert_eq!(
            out.contains("coordinate descent"),
            !dense,
            "{types} types: {}",
            &out[..out.len().min(2000)]
        );
    }
}

#[test]
fn impossible_content_is_an_error_that_names_the_record() {
    let dir = tempfile::tempdir().unwrap();
    // Energy that decreases.
    let tasks = dir.path().join("tasks.csv");
    write(&tasks, b"type,worker,start,end\na,0,0,5\n");
    let samples = dir.path().join("samples.csv");
    write(
        &samples,
        b"time,domain,energy_j\n0,package-0,10\n5,package-0,9\n",
    );
    refused(
        &[
            "import",
            "--tasks",
            s(&tasks),
            "--samples",
            s(&samples),
            "-o",
            s(&dir.path().join("x.twt")),
        ],
        "samples.csv",
    );
    // A task that ends before it starts.
    write(&tasks, b"type,worker,start,end\na,0,5,1\n");
    refused(
        &[
            "import",
            "--tasks",
            s(&tasks),
            "-o",
            s(&dir.path().join("y.twt")),
        ],
        "tasks.csv:2",
    );
    // A model with negative or infinite powers.
    let trace = small_trace(dir.path());
    let model = dir.path().join("model.json");
    ok(&["fit", s(&trace), "-o", s(&model)]);
    let text = std::fs::read_to_string(&model).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let bad = dir.path().join("bad.json");
    if set_first_power(&mut v, serde_json::json!(-1000.0)) {
        std::fs::write(&bad, v.to_string()).unwrap();
        refused(&["predict", s(&bad), s(&trace)], "bad.json");
    } else {
        panic!("no power found in the model file: {text}");
    }
}

/// Sets the first power estimate (`value_w`) to `value`.
fn set_first_power(v: &mut serde_json::Value, value: serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "value_w" && x.is_number() {
                    *x = value;
                    return true;
                }
                if set_first_power(x, value.clone()) {
                    return true;
                }
            }
            false
        }
        serde_json::Value::Array(a) => a.iter_mut().any(|x| set_first_power(x, value.clone())),
        _ => false,
    }
}

#[test]
fn a_truncated_tasks_rec_is_an_error() {
    let rec = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data/starpu-1.4.12-cholesky-lws/tasks.rec");
    let Ok(text) = std::fs::read(&rec) else {
        eprintln!(
            "skipped: {} is absent (the shared test data)",
            rec.display()
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("tasks.rec");
    // Cut inside the last record's EndTime-like value: the file no longer ends with an
    // empty line.
    std::fs::write(&cut, &text[..text.len() - 9]).unwrap();
    refused(
        &[
            "import",
            "--starpu",
            s(&cut),
            "-o",
            s(&dir.path().join("x.twt")),
        ],
        "cut short",
    );
}

#[test]
fn a_non_utf8_csv_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = dir.path().join("tasks.csv");
    write(&tasks, b"type,worker,start,end\na,0,0,1\n\xff\xfe,0,1,2\n");
    let out = bounded(&[
        "import",
        "--tasks",
        s(&tasks),
        "-o",
        s(&dir.path().join("x.twt")),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("tasks.csv") && stderr.contains("UTF-8"),
        "{stderr}"
    );
    assert!(!stderr.contains("disk"), "{stderr}");
}

/// Issue 29: `--steps` had no bound, and a run of 2^64 - 1 steps grew by 20 MB/s until
/// memory ran out. Every app's task count is checked before anything runs.
#[test]
fn a_run_of_too_many_tasks_is_refused_before_it_starts() {
    refused(
        &["run", "stencil", "--steps", "18446744073709551615"],
        "tasks, more than",
    );
    refused(
        &["run", "gemm", "--n", "8192", "--tile", "4", "--no-check"],
        "tasks, more than",
    );
    refused(
        &["run", "cholesky", "--iterations", "18446744073709551615"],
        "tasks, more than",
    );
}
