//! `Measure`: energy of a user's own graph in one call.

use std::time::Duration;

use taskwatt::{Codelet, Measure, MeterChoice, Runtime, Task};

/// A codelet body that spins for `us` microseconds.
fn spin(us: u64) -> impl Fn(&taskwatt::TaskCtx<'_>) + Send + Sync + 'static {
    move |_| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_micros(us) {
            std::hint::spin_loop();
        }
    }
}

#[test]
fn a_three_codelet_graph_gets_its_report_per_type_and_region() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.twt");
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(2))
        .idle_calibration(Duration::from_millis(50))
        .trace(&path)
        .start(Runtime::builder().workers(2))
        .unwrap();
    assert!(m.is_simulated());
    let rt = m.runtime();
    let a = Codelet::new("a").cpu(spin(300));
    let b = Codelet::new("b").cpu(spin(500));
    let c = Codelet::new("c").cpu(spin(200));
    let x = rt.register(0u8);
    let y = rt.register(0u8);
    {
        let _r = m.region("first-half");
        for _ in 0..60 {
            rt.submit(Task::new(&a).rw(&x)).unwrap();
            rt.submit(Task::new(&b).rw(&y)).unwrap();
        }
        rt.wait_all().unwrap();
    }
    for _ in 0..60 {
        rt.submit(Task::new(&c).r(&x)).unwrap();
        rt.submit(Task::new(&c).r(&y)).unwrap();
    }
    rt.wait_all().unwrap();
    let report = m.finish().unwrap();
    assert!(report.simulated);
    assert_eq!(report.trace.as_deref(), Some(path.as_path()));
    assert!(path.exists());
    let d = &report.attribution.report.domains[0];
    let mut names: Vec<String> = d.types.iter().map(|t| t.key.codelet.clone()).collect();
    names.sort();
    assert_eq!(names, ["a", "b", "c"]);
    let regions: Vec<&str> = d.regions.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(regions, ["application", "calibration", "first-half"]);
    let app = &d.regions[0];
    assert_eq!(app.tasks, 240);
    let text = report.text();
    assert!(text.contains("SIMULATED"));
    assert!(
        text.contains("energy of the application (240 task(s)"),
        "{text}"
    );
    // One figure over the package and its DRAM, the run's and the application's (a user
    // added them by hand).
    let domains = &report.attribution.report.domains;
    assert_eq!(domains.len(), 2, "the simulated package and DRAM");
    let measured: f64 = domains.iter().map(|d| d.measured_j).sum();
    let at = text
        .find("\nall domains (package-0 + dram-0")
        .unwrap_or_else(|| panic!("{text}"));
    let line = &text[at..];
    // Its figure, as the report writes joules (three significant digits).
    let figure: f64 = line
        .split("measured ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        (figure - measured).abs() <= 0.01 * measured,
        "{line}: {measured} J"
    );
    assert!(text.contains("the application"), "{text}");
    assert!(report.json()["report"]["domains"].is_array());
}

#[test]
fn the_application_region_ends_where_the_program_says() {
    // A user checked the result on the main thread before `finish`: 0.5 s counted as the
    // application's idle energy. `end_application` ends the region at the graph's end.
    let m_of = || {
        Measure::new()
            .meter(MeterChoice::Sim)
            .period(Duration::from_millis(2))
            // None: no empty `calibration` row in the report (there was one).
            .idle_calibration(Duration::ZERO)
            .start(Runtime::builder().workers(1))
            .unwrap()
    };
    let graph = |m: &taskwatt::Measured| {
        let rt = m.runtime();
        let a = Codelet::new("a").cpu(spin(200));
        let x = rt.register(0u8);
        for _ in 0..50 {
            rt.submit(Task::new(&a).rw(&x)).unwrap();
        }
    };
    let window = |m: taskwatt::Measured| {
        let r = m.finish().unwrap();
        let d = &r.attribution.report.domains[0];
        assert!(
            d.regions.iter().all(|r| r.name != "calibration"),
            "{:?}",
            d.regions
        );
        d.regions
            .iter()
            .find(|r| r.name == "application")
            .unwrap()
            .window_s
    };
    let m = m_of();
    graph(&m);
    // The runtime borrowed before `end_application` is usable after it (with `&mut self`
    // this did not compile: a user's result check after the graph).
    let rt = m.runtime();
    m.end_application().unwrap();
    rt.wait_all().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let ended = window(m);
    assert!(ended < 0.25, "the application region lasted {ended} s");
    // Without it, the region runs to `finish`, the main thread's check included.
    let m = m_of();
    graph(&m);
    m.runtime().wait_all().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let whole = window(m);
    assert!(whole >= 0.3, "{whole}");
}

#[test]
fn a_region_whose_guard_outlives_finish_is_closed_there_not_lost() {
    // The README's snippet, copied as is: `let _phase = m.region(..)` lives to the end of
    // the scope, after `finish`; its marker went to a finished trace and the region was
    // missing from the report, without a word.
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(2))
        .start(Runtime::builder().workers(1))
        .unwrap();
    let rt = m.runtime();
    let a = Codelet::new("a").cpu(spin(200));
    let x = rt.register(0u8);
    let _phase = m.region("assembly");
    for _ in 0..50 {
        rt.submit(Task::new(&a).rw(&x)).unwrap();
    }
    {
        let _inner = m.region("closed-before");
        rt.wait_all().unwrap();
    }
    m.end_application().unwrap();
    let report = m.finish().unwrap();
    assert_eq!(report.closed_at_finish, ["assembly"]);
    let d = &report.attribution.report.domains[0];
    let names: Vec<&str> = d.regions.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&"assembly"), "{names:?}");
    assert!(names.contains(&"closed-before"), "{names:?}");
    let text = report.text();
    assert!(
        text.contains("`assembly` were still open when finish began"),
        "{text}"
    );
    assert!(!text.contains("`closed-before`"), "{text}");
    drop(_phase); // records nothing more
}

#[test]
fn a_graph_that_runs_nothing_is_warned_about() {
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(2))
        .start(Runtime::builder().workers(1))
        .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let report = m.finish().unwrap();
    assert!(
        report
            .attribution
            .report
            .warnings
            .iter()
            .any(|w| w.contains("no task at all (an empty graph)")),
        "{:?}",
        report.attribution.report.warnings
    );
}

/// The README's snippet with no task, finished at once (no sleep): a run shorter than one
/// refresh of the meter read one value twice, and 2 runs in 8 failed with `NoEnergyData`
/// while the others reported. Now the sampler's stop waits for the counters to move.
#[test]
fn an_empty_graph_finished_at_once_reports_every_time() {
    for _ in 0..12 {
        let m = Measure::new()
            .meter(MeterChoice::Sim)
            .start(Runtime::builder().workers(1))
            .unwrap();
        let report = m.finish().unwrap();
        assert!(report
            .attribution
            .report
            .warnings
            .iter()
            .any(|w| w.contains("no task at all (an empty graph)")));
    }
}

/// A new user's run: a panicking task, the application's own `wait_all` reporting it,
/// then `finish`. The report says tasks failed (it listed the failed type as an ordinary
/// one), the trace's outcome is `failed`, and its accesses are recorded (`Measure`
/// records them as `taskwatt run` does, for `taskwatt simulate`).
#[test]
fn a_run_with_a_failed_task_reports_it_and_keeps_its_accesses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("failed.twt");
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(2))
        .trace(&path)
        .start(Runtime::builder().workers(2))
        .unwrap();
    let rt = m.runtime();
    let work = Codelet::new("work").cpu(spin(200));
    let boom = Codelet::new("boom").cpu(|_| panic!("a user's bug"));
    let x = rt.register(vec![0.0f64; 16]);
    let y = rt.register(vec![0.0f64; 16]);
    for _ in 0..40 {
        rt.submit(Task::new(&work).rw(&x)).unwrap();
    }
    rt.submit(Task::new(&boom).rw(&y)).unwrap();
    for _ in 0..5 {
        rt.submit(Task::new(&work).r(&y)).unwrap();
    }
    let err = rt.wait_all().unwrap_err();
    assert!(err.to_string().contains("boom"), "{err}");
    let report = m.finish().unwrap();
    assert_eq!((report.failed_tasks, report.cancelled_tasks), (1, 5));
    let text = report.text();
    assert!(
        text.starts_with("warning: 1 task(s) failed and 5 were cancelled"),
        "{text}"
    );
    assert_eq!(report.json()["failed_tasks"], 1);
    let trace = taskwatt::traces::read_trace(&path).unwrap();
    let end = trace.end.as_ref().expect("an End chunk");
    assert_eq!(end.outcome, taskwatt::traces::RunOutcome::Failed);
    assert_eq!(end.failed, 1);
    assert!(
        !trace.accesses.is_empty(),
        "Measure records the data accesses by default"
    );
}

/// The same failure seen first by `finish`: an error, but one that names the trace, which
/// is complete on disk; and a `Measured` dropped before `finish` (an early `?` return)
/// leaves a finished trace too, instead of one without its End chunk.
#[test]
fn a_failed_finish_and_a_dropped_run_leave_a_finished_trace() {
    let dir = tempfile::tempdir().unwrap();
    let start = |name: &str| {
        let path = dir.path().join(name);
        let m = Measure::new()
            .meter(MeterChoice::Sim)
            .period(Duration::from_millis(2))
            .trace_accesses(false)
            .trace(&path)
            .start(Runtime::builder().workers(2))
            .unwrap();
        (m, path)
    };
    let boom = Codelet::new("boom").cpu(|_| panic!("a user's bug"));
    let work = Codelet::new("work").cpu(spin(200));

    let (m, path) = start("finish.twt");
    for _ in 0..20 {
        m.runtime().submit(Task::new(&work)).unwrap();
    }
    m.runtime().submit(Task::new(&boom)).unwrap();
    let err = m.finish().unwrap_err();
    assert!(
        matches!(err, taskwatt::MeasureError::TasksFailed { trace: Some(ref p), .. } if *p == path),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("boom") && msg.contains("taskwatt report"),
        "{msg}"
    );
    // The energy of what ran comes with the error (it could only be had from the CLI).
    let taskwatt::MeasureError::TasksFailed {
        report: Some(ref report),
        ..
    } = err
    else {
        panic!("no report with the error: {err}");
    };
    assert_eq!(report.failed_tasks, 1);
    assert!(report.text().contains("failed"), "{}", report.text());
    let trace = taskwatt::traces::read_trace(&path).unwrap();
    assert_eq!(
        trace.end.as_ref().map(|e| e.outcome),
        Some(taskwatt::traces::RunOutcome::Failed)
    );
    assert!(trace.accesses.is_empty(), "turned off");

    let (m, path) = start("dropped.twt");
    for _ in 0..20 {
        m.runtime().submit(Task::new(&work)).unwrap();
    }
    drop(m);
    let trace = taskwatt::traces::read_trace(&path).expect("a finished trace");
    let end = trace.end.as_ref().expect("an End chunk");
    assert_eq!(end.outcome, taskwatt::traces::RunOutcome::Failed);
    assert_eq!(end.tasks, 20, "the tasks submitted ran and were recorded");
}

/// Issue 29: `idle_calibration(Duration::MAX)` parked the runtime for ever inside
/// `start`. Longer than a week is now an error, before any file is created.
#[test]
fn an_idle_calibration_longer_than_a_week_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never.twt");
    let t0 = std::time::Instant::now();
    let err = Measure::new()
        .meter(MeterChoice::Sim)
        .idle_calibration(Duration::MAX)
        .trace(&path)
        .start(Runtime::builder().workers(1))
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(err, taskwatt::MeasureError::IdleCalibrationTooLong { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("one week"), "{err}");
    assert!(!path.exists(), "no trace is created");
    // A week exactly is accepted (not run here: it is the bound, not a test length).
    assert!(taskwatt::MAX_IDLE_CALIBRATION == Duration::from_secs(604_800));
}

/// A user's graph whose two short types always run together (a sweep, then its halo
/// exchange, on each block): the graph pins their sum, not their split. `finish_calibrating`
/// runs each flagged type alone until the fit separates them.
#[test]
fn adaptive_calibration_separates_short_types_that_run_in_fixed_proportions() {
    use taskwatt::energy::DetectOptions;
    use taskwatt::energy::SimConfig;
    let sim = SimConfig::from_toml_str(
        "[codelets]\n\
         sweep = { cpu = { package_w = 9.0, dram_w = 2.0 } }\n\
         halo = { cpu = { package_w = 21.0, dram_w = 0.8 } }\n",
        "test",
    )
    .unwrap();
    let run = |calibrate: bool| {
        let m = Measure::new()
            .meter(MeterChoice::Sim)
            .period(Duration::from_millis(5))
            .idle_calibration(Duration::from_millis(300))
            .detect_options(DetectOptions {
                sim: sim.clone(),
                ..DetectOptions::default()
            })
            .start(Runtime::builder().workers(2))
            .unwrap();
        let rt = m.runtime();
        let sweep = Codelet::new("sweep").cpu(spin(400));
        let halo = Codelet::new("halo").cpu(spin(60));
        let blocks: Vec<_> = (0..8).map(|_| rt.register(vec![0.0f64; 64])).collect();
        for _ in 0..250 {
            for b in &blocks {
                rt.submit(Task::new(&sweep).rw(b)).unwrap();
                rt.submit(Task::new(&halo).rw(b)).unwrap();
            }
        }
        rt.wait_all().unwrap();
        let scratch: Vec<_> = (0..m.calibration_slots())
            .map(|_| rt.register(vec![0.0f64; 64]))
            .collect();
        let report = if calibrate {
            m.finish_calibrating(|codelet, slot| match codelet {
                "sweep" => Some(Task::new(&sweep).rw(&scratch[slot])),
                "halo" => Some(Task::new(&halo).rw(&scratch[slot])),
                _ => None,
            })
            .unwrap()
        } else {
            m.finish().unwrap()
        };
        let d = report.attribution.report.domains[0].clone();
        (d, report.calibration)
    };
    let shown = |d: &taskwatt::energy::attribution::DomainReport| {
        d.types
            .iter()
            .filter(|t| t.power.reliable)
            .map(|t| t.key.codelet.clone())
            .collect::<Vec<_>>()
    };
    // Without calibration the split is not pinned down: not both types are shown. (Which
    // one is missing varies from run to run: the simulated machine draws a fresh seed and
    // the tasks' durations vary; usually the short one, sometimes the long one.)
    let (plain, none) = run(false);
    assert!(none.is_none());
    let plain_shown = shown(&plain);
    assert!(
        !(plain_shown.contains(&"halo".to_string()) && plain_shown.contains(&"sweep".to_string())),
        "{:?}",
        plain.types
    );

    let (d, calibration) = run(true);
    let calibration = calibration.expect("calibration ran");
    assert!(calibration.error.is_none(), "{calibration:?}");
    assert!(!calibration.rounds.is_empty(), "{calibration:?}");
    // The first round calibrates the types the graph left unpinned: one of the two, or both.
    let first = &calibration.rounds[0].0;
    assert!(
        !first.is_empty() && first.iter().all(|t| t == "halo" || t == "sweep"),
        "{calibration:?}"
    );
    let mut s = shown(&d);
    s.sort();
    assert_eq!(
        s,
        ["halo", "sweep"],
        "both shown as measurements: {:?}",
        d.types
    );
    let truth = d.truth.as_ref().expect("the simulated meter's truth");
    let types = truth
        .rows
        .iter()
        .filter(|r| r.name.starts_with("sweep@") || r.name.starts_with("halo@"));
    for row in types {
        let err = row.error_pct.expect("a non-zero truth");
        assert!(err.abs() < 5.0, "{}: {err:+.1} % off the truth", row.name);
    }
}

/// A calibration closure over fewer scratch handles than `calibration_slots()` (a user's
/// off-by-a-few) gives `None` past them: the calibration says so by name, the report is
/// still made, nothing panics.
#[test]
fn a_calibration_closure_short_of_slots_is_reported_not_a_panic() {
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(5))
        .type_calibration(taskwatt::TypeCalibration::Fixed(Duration::from_millis(50)))
        .start(Runtime::builder().workers(2))
        .unwrap();
    let rt = m.runtime();
    let work = Codelet::new("work").cpu(spin(200));
    let b = rt.register(vec![0.0f64; 16]);
    for _ in 0..200 {
        rt.submit(Task::new(&work).rw(&b)).unwrap();
    }
    assert_eq!(m.calibration_slots(), 4);
    // Two scratch handles where four slots are asked for.
    let scratch: Vec<_> = (0..2).map(|_| rt.register(vec![0.0f64; 16])).collect();
    let report = m
        .finish_calibrating(|codelet, slot| match codelet {
            "work" => scratch.get(slot).map(|h| Task::new(&work).rw(h)),
            _ => None,
        })
        .expect("the run and its report do not fail");
    let calibration = report.calibration.expect("calibration was asked for");
    let error = calibration
        .error
        .expect("a calibration that could not run says why");
    assert!(error.contains("work (from slot 2 of 0..4)"), "{error}");
}

/// A closure that makes tasks of some types only: the others are named as not run (the
/// rounds listed them as calibrated, and the report said nothing).
#[test]
fn types_a_calibration_could_not_run_are_named() {
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(5))
        .type_calibration(taskwatt::TypeCalibration::Fixed(Duration::from_millis(30)))
        .start(Runtime::builder().workers(1))
        .unwrap();
    let rt = m.runtime();
    let (work, other) = (
        Codelet::new("work").cpu(spin(200)),
        Codelet::new("other").cpu(spin(100)),
    );
    let b = rt.register(vec![0.0f64; 16]);
    for _ in 0..100 {
        rt.submit(Task::new(&work).rw(&b)).unwrap();
        rt.submit(Task::new(&other).rw(&b)).unwrap();
    }
    let scratch: Vec<_> = (0..m.calibration_slots())
        .map(|_| rt.register(vec![0.0f64; 16]))
        .collect();
    let report = m
        .finish_calibrating(|codelet, slot| match codelet {
            "work" => Some(Task::new(&work).rw(&scratch[slot])),
            _ => None,
        })
        .unwrap();
    let text = report.text();
    let c = report.calibration.expect("calibration was asked for");
    assert_eq!(c.not_run, ["other"]);
    assert_eq!(c.rounds.len(), 1);
    assert_eq!(c.rounds[0].0, ["work"]);
    assert!(c.error.is_none(), "{c:?}");
    assert!(text.contains("not run: other"), "{text}");
}

/// The library's `Compare` on a user's graph: every policy run, one model fitted, every
/// run predicted; a gamma sweep without an energy model refused.
#[test]
fn compare_runs_a_user_graph_under_several_policies() {
    use taskwatt::compare::{Compare, CompareError};
    let work = Codelet::new("work").cpu(spin(300));
    let graph = |rt: &Runtime| {
        let data: Vec<_> = (0..4).map(|_| rt.register(vec![0u8; 16])).collect();
        for _ in 0..60 {
            for d in &data {
                rt.submit(Task::new(&work).rw(d))?;
            }
        }
        rt.wait_all()
    };
    let measure = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(5));
    let c = Compare::new()
        .policies(["eager", "lws"])
        .repeat(2)
        .measure(measure.clone())
        .name("mine")
        .run(|| Runtime::builder().workers(2), graph)
        .unwrap();
    assert_eq!(c.app, "mine");
    assert_eq!(c.runs.len(), 4);
    let names: Vec<&str> = c.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["eager", "lws"]);
    for r in &c.runs {
        assert!(r.measured_j > 0.0 && r.error_pct.abs() < 10.0, "{r:?}");
    }
    let text = c.text();
    assert!(
        text.contains("SIMULATED") && text.contains(" energy over the application"),
        "{text}"
    );
    assert!(c.json()["policies"].as_array().unwrap().len() == 2);
    // The verdict compares the graphs (the application region every run marks), not the
    // whole runs with their idle calibration and sampler window, and is in the JSON too.
    let verdict = c.verdict().unwrap();
    assert!(verdict.contains("over the application"), "{verdict}");
    assert_eq!(c.json()["verdict"], verdict.as_str());

    let err = Compare::new()
        .policies(["dmda"])
        .gamma([0.0, 1e5])
        .measure(measure)
        .run(|| Runtime::builder().workers(2), graph)
        .unwrap_err();
    assert!(matches!(err, CompareError::NoTaskPowers), "{err}");
}

/// A run with (emulated) GPUs: the library's report names the copies between memory
/// nodes, as `taskwatt report` does (the text and the JSON had them from the CLI only).
#[test]
fn the_library_s_report_names_the_copies_between_memory_nodes() {
    let m = Measure::new()
        .meter(MeterChoice::Sim)
        .period(Duration::from_millis(2))
        .start(Runtime::builder().workers(1).emulated_gpus(1))
        .unwrap();
    let rt = m.runtime();
    let kernel =
        |ctx: &taskwatt::TaskCtx<'_>| ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x *= 2.0);
    let gpu_only = Codelet::new("scale").gpu(kernel);
    let v = rt.register_replicated(vec![1.0f64; 1 << 12]);
    for _ in 0..20 {
        rt.submit(Task::new(&gpu_only).rw(&v)).unwrap();
    }
    assert_eq!(rt.unregister(v).unwrap()[0], (1u64 << 20) as f64);
    let report = m.finish().unwrap();
    let t = report
        .transfers
        .as_ref()
        .expect("copies to the GPU and back");
    assert!(t.count >= 2, "{t:?}");
    assert!(report.text().contains("transfers: "), "{}", report.text());
    assert!(report.json()["transfers"].is_object());
}
