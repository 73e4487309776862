//! Scenario tests of the attribution on synthetic traces with known powers.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use taskwatt_traces::{Arch, Domain, MeterInfo, TaskChunk, TaskRecord, Trace};

use super::testkit::{task, Synth, SynthCodelet, SynthConfig};
use super::*;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-9)
}

fn power<'a>(d: &'a DomainReport, name: &str) -> &'a TypeReport {
    d.types
        .iter()
        .find(|t| t.key.to_string() == name)
        .unwrap_or_else(|| panic!("no type {name} in {:?}", d.types))
}

fn assert_fits_80(text: &str) {
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "line too long: {l:?}");
    }
}

/// Adds a GPU implementation of gemm: same codelet name, another arch, another power.
fn with_gpu_gemm(mut cfg: SynthConfig) -> SynthConfig {
    cfg.codelets.push(SynthCodelet {
        name: "gemm",
        power_w: vec![30.0, 25.0],
        dur_ns: (50_000, 150_000),
        weight: 1.0,
        arch: Arch::Gpu,
    });
    cfg
}

#[test]
fn noiseless_systems_are_recovered_exactly_by_every_solver() {
    let cfg = with_gpu_gemm(SynthConfig::two_packages(1));
    let s = Synth::generate(&cfg);
    for (solver, weights) in [
        (Solver::Nnls, RowWeights::Uniform),
        (Solver::Ols, RowWeights::Uniform),
        (Solver::Nnls, RowWeights::InverseDuration),
    ] {
        let opts = AttributionOptions {
            solver,
            weights,
            ..AttributionOptions::default()
        };
        let a = attribute(&s.parts(), &s.tasks, &opts).unwrap();
        assert_eq!(a.report.domains.len(), 2);
        for (di, d) in a.report.domains.iter().enumerate() {
            assert!(
                rel(d.base.value_w, cfg.base_w[di]) < 1e-6,
                "{solver:?} base {d:?}"
            );
            assert!(d.base.reliable);
            assert_eq!(d.types.len(), 5);
            for c in &cfg.codelets {
                let name = format!("{}@{}", c.name, c.arch);
                let t = power(d, &name);
                assert!(
                    rel(t.power.value_w, c.power_w[di]) < 1e-6,
                    "{solver:?} {name}: {} vs {}",
                    t.power.value_w,
                    c.power_w[di]
                );
                assert!(t.power.reliable, "{name}: {:?}", t.power.issues);
            }
            let f = &d.fit;
            assert!(f.inseparable.is_empty(), "{:?}", f.inseparable);
            // Base, five types and the base's drift.
            assert_eq!(f.rank, 7);
            assert!(f.r2.unwrap() > 1.0 - 1e-9);
            assert!(f.mape_pct.unwrap() < 1e-6);
            assert!(f.cv_mape_pct.unwrap() < 1e-6);
            assert_eq!(f.cv_folds, 5);
            assert!(!f.base_pinned_by_idle);
            // Accounting: types' totals plus idle make up the fitted energy.
            let sum: f64 = d.types.iter().map(|t| t.total_j).sum::<f64>() + d.idle_j;
            assert!(rel(sum, d.fitted_j) < 1e-9, "{sum} vs {}", d.fitted_j);
            assert!(rel(d.fitted_j, d.measured_j) < 1e-9);
            let truth = d.truth.as_ref().expect("synthetic traces carry truth");
            assert_eq!(truth.rows.len(), 6);
            for r in &truth.rows {
                assert!(r.error_pct.unwrap().abs() < 1e-4, "{r:?}");
            }
        }
        assert_eq!(a.fits[0].residuals_j.len(), 600);
    }
}

#[test]
fn trace_and_parts_give_the_same_report() {
    let s = Synth::generate(&SynthConfig::two_packages(2));
    let mut chunk = TaskChunk::default();
    for r in &s.tasks {
        chunk.push(*r, &[]);
    }
    let trace = Trace {
        codelets: s.codelets.clone(),
        tasks: vec![chunk],
        meters: vec![MeterInfo {
            id: 0,
            backend: "sim".into(),
            simulated: true,
            description: String::new(),
        }],
        domains: s.domains.clone(),
        samples: s.samples.clone(),
        truth: Some(s.truth.clone()),
        markers: s.markers.clone(),
        ..Trace::default()
    };
    let opts = AttributionOptions::default();
    let a = attribute_trace(&trace, &opts).unwrap();
    let b = attribute(&s.parts(), s.tasks.iter().copied(), &opts).unwrap();
    assert_eq!(a.report, b.report);
    let json = serde_json::to_string(&a.report).unwrap();
    assert!(json.contains("\"domain\":{\"kind\":\"cpu_package\",\"id\":0}"));
    let text = render_report(&a.report, &RenderOptions { simulated: true });
    assert!(text.starts_with(&"#".repeat(80)));
    assert!(text.contains("SIMULATED meter"));
    assert_fits_80(&text);
    let plain = render_report(&a.report, &RenderOptions::default());
    assert!(!plain.contains("SIMULATED"));
}

/// Workers 0-3 run ordinary tasks; `x` on worker 4 always runs with `y` on workers 5
/// and 6 over the same span (`T_y = 2 T_x` in every interval); `rare` runs 3 times.
fn co_running(seed: u64, jitter: f64) -> (SynthConfig, Synth) {
    co_running_noisy(seed, jitter, 0.0)
}

fn co_running_noisy(seed: u64, jitter: f64, noise_w: f64) -> (SynthConfig, Synth) {
    let mut cfg = SynthConfig::two_packages(seed);
    cfg.noise_w = noise_w;
    cfg.domains = vec![(Domain::CpuPackage { id: 0 }, (0..8).collect())];
    cfg.base_w = vec![20.0];
    for c in &mut cfg.codelets {
        c.power_w.truncate(1);
    }
    let extra = |name, p| SynthCodelet {
        name,
        power_w: vec![p],
        dur_ns: (0, 0),
        weight: 0.0,
        arch: Arch::Cpu,
    };
    cfg.codelets
        .extend([extra("x", 4.0), extra("y", 2.0), extra("rare", 7.0)]);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ordinary = cfg.clone();
    ordinary.domains = vec![(Domain::CpuPackage { id: 0 }, vec![0, 1, 2, 3])];
    let mut tasks = Synth::tasks(&ordinary, &mut rng);
    let mut t = 0;
    while t < cfg.run_ns - 1_000_000 {
        let d = rng.random_range(100_000..500_000u64);
        tasks.push(task(4, 4, t, t + d));
        for w in [5, 6] {
            let j = (d as f64 * jitter * (rng.random::<f64>() - 0.5)) as i64;
            tasks.push(task(5, w, t, (t + d).saturating_add_signed(j)));
        }
        t += d + rng.random_range(50_000..400_000u64);
    }
    for k in 0..3u64 {
        tasks.push(task(
            6,
            7,
            100_000_000 * (k + 1),
            100_000_000 * (k + 1) + 400_000,
        ));
    }
    let s = Synth::with_tasks(&cfg, tasks, &mut rng);
    (cfg, s)
}

#[test]
fn co_running_types_and_rare_types_are_flagged_not_quoted() {
    let (_, s) = co_running(3, 0.0);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let d = &a.report.domains[0];
    let f = &d.fit;
    let exact: Vec<&InseparableGroup> = f
        .inseparable
        .iter()
        .filter(|g| g.reason == InseparableReason::ExactlyCollinear)
        .collect();
    assert_eq!(exact.len(), 1, "{:?}", f.inseparable);
    assert_eq!(exact[0].members, vec!["x@cpu", "y@cpu"]);
    assert!(f.inseparable.iter().any(|g| g.members == ["rare@cpu"]
        && g.reason
            == InseparableReason::TooFewTasks {
                count: 3,
                minimum: 10
            }));
    assert_eq!(f.rank, f.unknowns - 1);

    // x and y are only identified together, and a region holds them in the proportion
    // of the design: its energy is identified, and gets its interval.
    let (cfg, mut s) = co_running(3, 0.0);
    let third = cfg.run_ns / 3;
    let marker = |name: &str, start, end| taskwatt_traces::Marker {
        name: name.into(),
        start: taskwatt_traces::Timestamp(start),
        end: taskwatt_traces::Timestamp(end),
    };
    s.markers = vec![
        marker("graph", 0, cfg.run_ns),
        marker("region:middle", third, 2 * third),
    ];
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let d = &a.report.domains[0];
    assert!(
        a.fits[0].covariance_w2.is_none(),
        "x and y are not identified alone"
    );
    assert!(a.fits[0].estimable_covariance.is_some());
    assert_eq!(d.regions.len(), 2);
    for r in &d.regions {
        let [lo, hi] = r.interval_j.expect("a region's energy is identified");
        assert!(lo <= r.energy_j && r.energy_j <= hi, "{r:?}");
        assert!(hi - lo < 0.2 * r.energy_j, "{r:?}");
    }
    assert_eq!(f.condition_number, None);
    for name in ["x@cpu", "y@cpu", "rare@cpu"] {
        let t = power(d, name);
        assert!(!t.power.reliable, "{name} must be unreliable");
        assert!(!t.power.issues.is_empty());
    }
    // Only the combination is identified, and it is right: p_x + 2 p_y = 4 + 2·2.
    let combo = power(d, "x@cpu").power.value_w + 2.0 * power(d, "y@cpu").power.value_w;
    assert!(rel(combo, 8.0) < 1e-6, "{combo}");
    // Separable types are untouched.
    for (name, p) in [("gemm@cpu", 9.0), ("trsm@cpu", 6.0), ("copy@cpu", 1.5)] {
        let t = power(d, name);
        assert!(
            t.power.reliable && rel(t.power.value_w, p) < 1e-6,
            "{name} {t:?}"
        );
    }
    let text = render_report(&a.report, &RenderOptions::default());
    assert_fits_80(&text);
    assert!(text.contains("exactly collinear"));
    assert!(text.contains("(...) not a measurement"));
    let line = text.lines().find(|l| l.starts_with("x@cpu")).unwrap();
    assert!(line.contains('(') && line.contains("collinear"), "{line}");
}

#[test]
fn nearly_co_running_types_are_named_from_variance_proportions() {
    // Without noise a near dependency costs no precision: x and y are measured, and the
    // dependency is only mentioned.
    let (_, s) = co_running(4, 0.01);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let d = &a.report.domains[0];
    assert!(power(d, "x@cpu").power.reliable, "{:?}", power(d, "x@cpu"));
    assert!(
        d.fit
            .warnings
            .iter()
            .any(|w| w.contains("near dependency between x@cpu, y@cpu")),
        "{:?}",
        d.fit.warnings
    );
    // With noise, it makes their intervals wide: flagged, with the dependency as cause.
    let (_, s) = co_running_noisy(4, 0.01, 2.0);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let f = &a.report.domains[0].fit;
    let g = f
        .inseparable
        .iter()
        .find(|g| g.members.len() >= 2)
        .unwrap_or_else(|| panic!("no group in {:?}", f.inseparable));
    assert_eq!(g.members, vec!["x@cpu", "y@cpu"]);
    assert!(
        matches!(g.reason, InseparableReason::NearlyCollinear { condition_index } if condition_index > 30.0)
    );
    assert_eq!(f.rank, f.unknowns);
    let x = &power(&a.report.domains[0], "x@cpu").power;
    assert!(!x.reliable);
    assert!(
        x.flags
            .iter()
            .any(|f| matches!(f, Flag::NearlyCollinear { .. })),
        "{x:?}"
    );
    // The ordinary types keep workers 0-3 busy most of the time, so their columns and the
    // base form a moderate dependency: a warning, not a verdict.
    assert!(
        f.warnings.iter().any(|w| w.contains("moderate dependency")),
        "{:?}",
        f.warnings
    );
}

#[test]
fn nnls_holds_at_zero_what_ols_makes_negative() {
    let mut cfg = SynthConfig::two_packages(5);
    cfg.codelets[3].power_w = vec![-2.0, 1.0];
    let s = Synth::generate(&cfg);
    let ols = AttributionOptions {
        solver: Solver::Ols,
        ..AttributionOptions::default()
    };
    let a_ols = attribute(&s.parts(), &s.tasks, &ols).unwrap();
    let a_nnls = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let o = power(&a_ols.report.domains[0], "copy@cpu");
    let n = power(&a_nnls.report.domains[0], "copy@cpu");
    assert!(rel(o.power.value_w, -2.0) < 1e-6, "{o:?}");
    assert_eq!(n.power.value_w, 0.0);
    assert!(n.power.at_bound && n.power.flags.contains(&Flag::AtBound));
    // Held at 0, the power still has an interval, from the unconstrained fit: [0, hi],
    // with at least one half-width above 0 (the unconstrained interval lies wholly below
    // 0 here, and gave [0, 0]: a held power known exactly).
    let [lo, hi] = n.power.ci95_w.expect("an interval");
    let se = n.power.se_w.expect("a standard error");
    assert!(se > 0.0 && lo == 0.0 && hi >= 1.9 * se, "{:?}", n.power);
    // OLS's negative power is flagged, never shown as a measurement.
    assert!(!o.power.reliable && o.power.flags.contains(&Flag::Negative));
    let d = &a_nnls.report.domains[0];
    assert!(d.base.value_w >= 0.0 && d.types.iter().all(|t| t.power.value_w >= 0.0));
    // NNLS pays for the constraint with a worse fit; OLS is exact.
    assert!(a_ols.report.domains[0].fit.mape_pct.unwrap() < 1e-6);
    assert!(d.fit.mape_pct.unwrap() > 1e-3);
    // The other domain has no negative power: both solvers agree there.
    let (o1, n1) = (&a_ols.report.domains[1], &a_nnls.report.domains[1]);
    assert!(rel(o1.base.value_w, n1.base.value_w) < 1e-9);
    let text = render_report(&a_nnls.report, &RenderOptions::default());
    assert!(text.contains("held at 0"), "{text}");
}

#[test]
fn noisy_standard_errors_cover_the_truth_in_most_seeds() {
    let (mut covered, mut total) = (0, 0);
    let mut z2 = Vec::new();
    for seed in 0..20 {
        let mut cfg = SynthConfig::two_packages(100 + seed);
        cfg.noise_w = 1.0;
        cfg.run_ns = 400_000_000;
        let s = Synth::generate(&cfg);
        let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
        for d in &a.report.domains {
            assert!(d.fit.cv_mape_pct.unwrap() >= d.fit.mape_pct.unwrap() * 0.8);
            for r in &d.truth.as_ref().unwrap().rows {
                total += 1;
                covered += usize::from(r.covered == Some(true));
                // No estimate is far outside its own error bar.
                // No estimate is far outside its own error bar (none at all: held at 0).
                assert!(r.z.is_none_or(|z| z.abs() < 4.5), "seed {seed}: {r:?}");
                z2.extend(r.z.map(|z| z * z));
            }
        }
    }
    let rate = covered as f64 / total as f64;
    eprintln!("95% interval coverage: {covered}/{total}");
    // A 95% interval: expect about 0.95; 0.85 leaves room for 200 draws.
    assert!(rate > 0.85, "coverage {rate} ({covered}/{total})");
    // Calibrated, not merely wide: the squared z-scores average about 1.
    let var = z2.iter().sum::<f64>() / z2.len() as f64;
    assert!((0.6..1.6).contains(&var), "var(z) = {var}");
}

#[test]
fn idle_calibration_pins_the_base() {
    let mut cfg = SynthConfig::two_packages(6);
    cfg.idle_ns = 50_000_000;
    let s = Synth::generate(&cfg);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let f = &a.report.domains[0].fit;
    assert!(f.base_pinned_by_idle);
    assert_eq!(f.idle_calibration_rows, 50);
    assert!(
        f.warnings.iter().all(|w| !w.contains("idle-calibration")),
        "{:?}",
        f.warnings
    );
    assert!(f.idle_rows >= 50, "{}", f.idle_rows);
    let text = render_report(&a.report, &RenderOptions::default());
    assert!(
        text.contains(&format!(
            "base pinned by {} idle interval(s) (50 in idle",
            f.idle_rows
        )),
        "{text}"
    );
    // Idle intervals pin the base without markers too.
    let mut unmarked = s.clone();
    unmarked.markers.clear();
    let a = attribute(
        &unmarked.parts(),
        &unmarked.tasks,
        &AttributionOptions::default(),
    )
    .unwrap();
    let f = &a.report.domains[0].fit;
    assert!(f.base_pinned_by_idle && f.idle_rows >= 50 && f.idle_calibration_rows == 0);
}

#[test]
fn sampling_problems_are_warned_about() {
    let mut cfg = SynthConfig::two_packages(7);
    cfg.run_ns = 40_000_000;
    let mut s = Synth::generate(&cfg);
    s.domains[0].update_interval_ns = Some(2_000_000);
    s.domains[1].resolution_j = 0.01;
    // Aligned to the meter (the default), 1 ms reads of a 2 ms counter whose phase the
    // synthetic readings do not show are merged into 20 ms intervals, and the report says
    // so.
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let al = &a.report.domains[0].fit.alignment;
    assert!(al.len() == 1 && al[0].contains("merged"), "{al:?}");
    assert!(
        a.report.domains[0].intervals <= 2,
        "{}",
        a.report.domains[0].intervals
    );
    let raw = AttributionOptions {
        align_to_meter: false,
        ..AttributionOptions::default()
    };
    let a = attribute(&s.parts(), &s.tasks, &raw).unwrap();
    let w0 = &a.report.domains[0].fit.warnings;
    assert!(
        w0.iter().any(|w| w.contains("too long or run too short")),
        "{w0:?}"
    );
    assert!(w0.iter().any(|w| w.contains("update interval")), "{w0:?}");
    let w1 = &a.report.domains[1].fit.warnings;
    assert!(w1.iter().any(|w| w.contains("resolution")), "{w1:?}");
    // Tasks longer than the intervals.
    let mut cfg = SynthConfig::two_packages(8);
    cfg.codelets[2].dur_ns = (2_000_000, 3_000_000);
    let s = Synth::generate(&cfg);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    let w = &a.report.domains[0].fit.warnings;
    assert!(
        w.iter()
            .any(|w| w.contains("tasks of potrf@cpu are longer")),
        "{w:?}"
    );
    assert!(
        w.iter().all(|w| !w.contains("gemm@cpu are longer")),
        "{w:?}"
    );
}

#[test]
fn footprint_classes_get_their_own_power() {
    let mut cfg = SynthConfig::two_packages(9);
    cfg.codelets[1].name = "gemm";
    let mut rng = StdRng::seed_from_u64(9);
    let mut tasks = Synth::tasks(&cfg, &mut rng);
    for t in &mut tasks {
        t.footprint = match t.codelet {
            0 => 1 << 20,
            1 => 3 << 21,
            _ => 100,
        };
    }
    let s = Synth::with_tasks(&cfg, tasks, &mut rng);
    let opts = AttributionOptions {
        key: KeyKind::CodeletFootprint,
        ..AttributionOptions::default()
    };
    let a = attribute(&s.parts(), &s.tasks, &opts).unwrap();
    let d = &a.report.domains[0];
    assert!(rel(power(d, "gemm/fp<2MiB").power.value_w, 9.0) < 1e-6);
    assert!(rel(power(d, "gemm/fp<8MiB").power.value_w, 6.0) < 1e-6);
    // The truth has two powers for "gemm": no single truth for either class.
    let rows = &d.truth.as_ref().unwrap().rows;
    assert!(rows
        .iter()
        .filter(|r| r.name.starts_with("gemm"))
        .all(|r| r.truth_w.is_none()));
    // Keyed by codelet only, the two gemm variants blend into one type.
    let opts = AttributionOptions {
        key: KeyKind::Codelet,
        ..AttributionOptions::default()
    };
    let a = attribute(&s.parts(), &s.tasks, &opts).unwrap();
    assert_eq!(a.report.domains[0].types.len(), 3);
}

#[test]
fn a_model_fitted_on_two_traces_predicts_a_third() {
    let cfg = |seed| with_gpu_gemm(SynthConfig::two_packages(seed));
    let traces: Vec<Synth> = [10, 11].map(|s| Synth::generate(&cfg(s))).into();
    let key = KeyKind::CodeletArch;
    let systems: Vec<TraceSystems> = traces
        .iter()
        .map(|s| TraceSystems::build(&s.parts(), &s.tasks, key).unwrap())
        .collect();
    let fit = fit_model(&systems, None, &AttributionOptions::default()).unwrap();
    let m = &fit.model;
    assert_eq!(m.traces, 2);
    assert_eq!(m.domains.len(), 2);
    assert_eq!(fit.reports[0].intervals, 1200);
    let p0 = m.domain(Domain::CpuPackage { id: 0 }).unwrap();
    assert!(rel(p0.base.value_w, 20.0) < 1e-6);
    let back = EnergyModel::from_json(&m.to_json(), std::path::Path::new("m.json")).unwrap();
    assert_eq!(&back, m);

    // A third run, with one codelet the model never saw.
    let mut c3 = cfg(12);
    c3.codelets.push(SynthCodelet {
        name: "fft",
        power_w: vec![5.0, 5.0],
        dur_ns: (50_000, 100_000),
        weight: 0.5,
        arch: Arch::Cpu,
    });
    let third = Synth::generate(&cfg(12));
    let p = predict(m, &third.parts(), &third.tasks).unwrap();
    assert_eq!(p.domains.len(), 2);
    for d in &p.domains {
        assert!(d.sampled && d.error_pct.unwrap().abs() < 1e-6, "{d:?}");
        assert!(d.interval_mape_pct.unwrap() < 1e-6);
    }
    assert!(p.total_error_pct.unwrap().abs() < 1e-6);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);

    let mut with_fft = Synth::generate(&c3);
    // A region over the middle of the run, for the regions' intervals below.
    with_fft.markers.push(taskwatt_traces::Marker {
        name: format!("{}phase", taskwatt_traces::REGION_PREFIX),
        start: taskwatt_traces::Timestamp(100_000_000),
        end: taskwatt_traces::Timestamp(300_000_000),
    });
    let p = predict(m, &with_fft.parts(), &with_fft.tasks).unwrap();
    assert!(
        p.warnings.iter().any(|w| w.contains("fft@cpu")),
        "{:?}",
        p.warnings
    );
    assert_eq!(p.domains[0].missing_types, vec!["fft@cpu"]);
    assert!(
        p.domains[0].error_pct.unwrap() < 0.0,
        "fft energy is missing"
    );
    // A lower bound, without an interval that would look tight around it.
    assert!(p.domains[0].half_width_j.is_none() && p.domains[0].interval_j.is_none());
    assert!(p.total_interval_j.is_none());
    // Nor its regions (they showed intervals under a total that had none).
    assert!(!p.domains[0].regions.is_empty());
    for r in &p.domains[0].regions {
        assert!(
            r.interval_j.is_none() && r.measurement_interval_j.is_none(),
            "{r:?}"
        );
    }
    assert!(p.warnings.iter().any(|w| w.contains("a lower bound")));

    let text = render_prediction(&p, &RenderOptions { simulated: true });
    assert_fits_80(&text);
    assert!(
        text.contains("SIMULATED") && text.contains("fft@cpu"),
        "{text}"
    );
    // The same codelets named in upper case (StarPU's GEMM for taskwatt's gemm): matched.
    let mut upper = cfg(12);
    for c in &mut upper.codelets {
        c.name = match c.name {
            "gemm" => "GEMM",
            n => n,
        };
    }
    assert!(upper.codelets.iter().any(|c| c.name == "GEMM"));
    let shouting = Synth::generate(&upper);
    let p = predict(m, &shouting.parts(), &shouting.tasks).unwrap();
    for d in &p.domains {
        assert!(d.missing_types.is_empty(), "{d:?}");
        assert!(d.error_pct.unwrap().abs() < 1e-6, "{d:?}");
        assert!(d.half_width_j.is_some());
    }
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("GEMM@cpu as the model's gemm@cpu")),
        "{:?}",
        p.warnings
    );

    // Without samples the window is the run's task span and tasks are not clipped.
    let mut unsampled = third.clone();
    unsampled.samples.clear();
    let p = predict(m, &unsampled.parts(), &unsampled.tasks).unwrap();
    let span = (
        unsampled.tasks.iter().map(|t| t.start.0).min().unwrap(),
        unsampled.tasks.iter().map(|t| t.end.0).max().unwrap(),
    );
    let c = cfg(12);
    let expect0 = 20.0 * (span.1 - span.0) as f64 * 1e-9
        + unsampled
            .tasks
            .iter()
            .filter(|t| t.worker < 4)
            .map(|t: &TaskRecord| {
                c.codelets[t.codelet as usize].power_w[0] * t.duration_ns() as f64 * 1e-9
            })
            .sum::<f64>();
    assert!(!p.domains[0].sampled && p.domains[0].measured_j.is_none());
    assert!(rel(p.domains[0].predicted_j, expect0) < 1e-6);
    assert_eq!(p.total_measured_j, None);

    // Mixed key kinds are refused.
    let other = TraceSystems::build(&third.parts(), &third.tasks, KeyKind::Codelet).unwrap();
    assert!(matches!(
        fit_model(
            &[systems[0].clone(), other.clone()],
            None,
            &AttributionOptions::default()
        ),
        Err(AttributionError::KeyKindMismatch { .. })
    ));
    assert!(matches!(
        predict_systems(m, &other),
        Err(AttributionError::KeyKindMismatch { .. })
    ));
}

#[test]
fn bad_inputs_give_errors_that_say_what_to_do() {
    let s = Synth::generate(&SynthConfig::two_packages(13));
    let parts = TraceParts {
        samples: &[],
        ..s.parts()
    };
    let e = attribute(&parts, &s.tasks, &AttributionOptions::default()).unwrap_err();
    assert!(e.to_string().contains("record with a meter"), "{e}");
    let mut weights = std::collections::BTreeMap::new();
    weights.insert(Domain::CpuPackage { id: 0 }, vec![1.0; 3]);
    let opts = AttributionOptions {
        weights: RowWeights::PerInterval(weights),
        ..AttributionOptions::default()
    };
    let e = attribute(&s.parts(), &s.tasks, &opts).unwrap_err();
    assert!(e.to_string().contains("expected 600"), "{e}");
    assert!(matches!(
        fit_model(&[], None, &AttributionOptions::default()),
        Err(AttributionError::NothingToFit)
    ));
}

/// Ids are labels, not sizes: worker 4294967295 and codelet 4294967294 attribute like
/// worker 7 and codelet 0 did, with every key kind, and without a table sized by an id
/// (which would ask for tens of GiB and abort).
#[test]
fn huge_worker_and_codelet_ids_attribute_like_small_ones() {
    let cfg = SynthConfig::two_packages(4);
    let mut s = Synth::generate(&cfg);
    let (big_worker, big_codelet) = (u32::MAX, u32::MAX - 1);
    for d in &mut s.domains {
        for w in &mut d.workers {
            if *w == 7 {
                *w = big_worker;
            }
        }
    }
    assert!(s.domains[1].workers.contains(&big_worker));
    for t in &mut s.tasks {
        if t.worker == 7 {
            t.worker = big_worker;
        }
        if t.codelet == 0 {
            t.codelet = big_codelet;
        }
    }
    s.codelets[0].id = big_codelet;
    for key in KeyKind::ALL {
        let opts = AttributionOptions {
            key,
            ..AttributionOptions::default()
        };
        let a = attribute(&s.parts(), &s.tasks, &opts).unwrap();
        for (di, d) in a.report.domains.iter().enumerate() {
            assert!(rel(d.base.value_w, cfg.base_w[di]) < 1e-6, "{key}: {d:?}");
            let gemm = d
                .types
                .iter()
                .filter(|t| t.key.codelet == "gemm")
                .collect::<Vec<_>>();
            assert!(!gemm.is_empty(), "{key}: gemm lost: {:?}", d.types);
            assert!(d.types.iter().all(|t| !t.key.codelet.contains('#')));
            if key != KeyKind::CodeletFootprint {
                assert!(
                    rel(gemm[0].power.value_w, cfg.codelets[0].power_w[di]) < 1e-6,
                    "{key}: {:?}",
                    gemm[0]
                );
            }
            // Worker 4294967295's tasks are metered: every task of domain 1 is counted.
            let counted: u64 = d.types.iter().map(|t| t.count).sum();
            let want = s
                .tasks
                .iter()
                .filter(|t| s.domains[di].workers.contains(&t.worker))
                .count() as u64;
            assert_eq!(counted, want, "{key}, domain {di}");
        }
    }
}

#[test]
fn regions_split_the_energy_and_match_the_measured() {
    let cfg = SynthConfig::two_packages(9);
    let mut s = Synth::generate(&cfg);
    let half = cfg.run_ns / 2;
    s.markers = vec![
        taskwatt_traces::Marker {
            name: "graph".into(),
            start: taskwatt_traces::Timestamp(0),
            end: taskwatt_traces::Timestamp(half),
        },
        taskwatt_traces::Marker {
            name: "region:second-half".into(),
            start: taskwatt_traces::Timestamp(half),
            end: taskwatt_traces::Timestamp(cfg.run_ns),
        },
    ];
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    for d in &a.report.domains {
        let names: Vec<&str> = d.regions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["application", "second-half"]);
        let (app, second) = (&d.regions[0], &d.regions[1]);
        // Together the two halves are the whole window (up to its first/last sample).
        let sum = app.energy_j + second.energy_j;
        assert!(rel(sum, d.fitted_j) < 0.02, "{sum} vs {}", d.fitted_j);
        for r in &d.regions {
            let m = r.measured_j.expect("inside the sampled window");
            assert!(
                rel(r.energy_j, m) < 0.02,
                "{}: {} vs {m}",
                r.name,
                r.energy_j
            );
            let [lo, hi] = r.interval_j.expect("an interval");
            assert!(lo < r.energy_j && r.energy_j < hi);
            let typed: f64 = r.types.iter().map(|t| t.total_j).sum();
            assert!(rel(typed + r.idle_j, r.energy_j) < 1e-9);
        }
        let tasks: u64 = d.types.iter().map(|t| t.count).sum();
        assert!(app.tasks + second.tasks <= tasks && app.tasks + second.tasks + 50 >= tasks);
    }
    let text = render_report(&a.report, &RenderOptions::default());
    assert_fits_80(&text);
    assert!(text.contains("energy of the application"), "{text}");
    assert!(text.contains("second-half"));
    // EnergyPrediction works per region too, and agrees with what was measured there.
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let m = fit_model(&[sys], None, &AttributionOptions::default()).unwrap();
    let p = predict(&m.model, &s.parts(), &s.tasks).unwrap();
    for d in &p.domains {
        assert_eq!(d.regions.len(), 2);
        for r in &d.regions {
            assert!(r.error_pct.unwrap().abs() < 2.0, "{r:?}");
            assert!(r.interval_j.is_some());
        }
    }
    let (pred, meas) = p.region_total("application").unwrap();
    assert!(rel(pred, meas.unwrap()) < 0.02);
    let text = render_prediction(&p, &RenderOptions::default());
    assert_fits_80(&text);
    assert!(text.contains("second-half"), "{text}");
}

#[test]
fn another_run_s_base_off_by_part_of_the_drift_is_inside_the_measurement_interval() {
    // The model says the base drifted by β = 0.5 W across the fitted run; the run predicted
    // sits 0.4 β above the model's base over its whole window (a package warmer than in
    // the fitted run). Its total is inside the measurement interval, which the model's
    // covariance and noise alone would not reach.
    let mut cfg = SynthConfig::two_packages(21);
    cfg.noise_w = 0.05;
    let fitted = Synth::generate(&cfg);
    let systems =
        vec![TraceSystems::build(&fitted.parts(), &fitted.tasks, KeyKind::CodeletArch).unwrap()];
    let mut m = fit_model(&systems, None, &AttributionOptions::default())
        .unwrap()
        .model;
    let beta = 0.5;
    let mut other = cfg.clone();
    other.seed = 22;
    other.base_w = cfg.base_w.iter().map(|b| b + 0.4 * beta).collect();
    let run = Synth::generate(&other);
    let covers = |m: &EnergyModel| {
        let p = predict(m, &run.parts(), &run.tasks).unwrap();
        p.domains.iter().all(|d| {
            let [lo, hi] = d.measurement_interval_j.unwrap();
            (lo..=hi).contains(&d.measured_j.unwrap())
        })
    };
    assert!(!covers(&m), "the test's offset is within the noise alone");
    for d in &mut m.domains {
        d.base_drift = Some(Estimate {
            value_w: beta,
            se_w: Some(0.01),
            ci95_w: Some([beta - 0.02, beta + 0.02]),
            at_bound: false,
            reliable: true,
            flags: Vec::new(),
            issues: Vec::new(),
        });
    }
    assert!(covers(&m));
}

#[test]
fn a_trace_without_samples_is_predicted_on_a_one_package_model() {
    // One package covering every worker.
    let mut cfg = SynthConfig::two_packages(21);
    cfg.domains = vec![(Domain::CpuPackage { id: 0 }, (0..8).collect())];
    cfg.base_w = vec![20.0];
    for c in &mut cfg.codelets {
        c.power_w.truncate(1);
    }
    let s = Synth::generate(&cfg);
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let fit = fit_model(&[sys], None, &AttributionOptions::default()).unwrap();
    let with = predict(&fit.model, &s.parts(), &s.tasks).unwrap();
    // The same tasks, imported without samples or domains.
    let mut chunk = TaskChunk::default();
    for r in &s.tasks {
        chunk.push(*r, &[]);
    }
    let bare = Trace {
        codelets: s.codelets.clone(),
        tasks: vec![chunk],
        ..Trace::default()
    };
    let p = predict_trace(&fit.model, &bare).unwrap();
    assert_eq!(p.domains.len(), 1);
    assert!(!p.domains[0].sampled);
    assert!(
        p.warnings[0].contains("no energy domain"),
        "{:?}",
        p.warnings
    );
    // Over the task span instead of the sampled window: close to the sampled prediction.
    assert!(
        rel(p.total_predicted_j, with.total_predicted_j) < 0.02,
        "{} vs {}",
        p.total_predicted_j,
        with.total_predicted_j
    );
    // Two packages: which worker each covered is unknown, and the error says what to do.
    let s2 = Synth::generate(&SynthConfig::two_packages(22));
    let sys2 = TraceSystems::build(&s2.parts(), &s2.tasks, KeyKind::CodeletArch).unwrap();
    let m2 = fit_model(&[sys2], None, &AttributionOptions::default()).unwrap();
    let e = predict_trace(&m2.model, &bare).unwrap_err();
    assert!(matches!(e, AttributionError::NoWorkerMap { .. }));
    assert!(e.to_string().contains("--workers"), "{e}");
}

#[test]
fn more_types_than_the_dense_fit_takes_are_solved_by_coordinate_descent() {
    use super::testkit::domain_info;
    let k = MAX_TYPES + 476; // 1500 types
    let n = 3_000u64; // 1 ms intervals
    let power = |c: u64| 1.0 + (c % 10) as f64;
    let mut tasks = Vec::new();
    let mut cum = vec![0.0];
    let mut e = 0.0;
    for i in 0..n {
        let t0 = i * 1_000_000;
        if i % 11 == 10 {
            // Idle intervals pin the base (else the base and the sum of the types would be
            // collinear).
            e += 20.0 * 1e-3;
            cum.push(e);
            continue;
        }
        // Type i mod k alone, and every 7th interval with a second type: each type runs
        // alone in at least one interval (k = 1500 is not a multiple of 7 or 11), so the
        // system is identified. The iterative path cannot tell otherwise.
        let a = i % k as u64;
        tasks.push(task(a as u32, 0, t0 + 100_000, t0 + 500_000));
        e += 20.0 * 1e-3 + power(a) * 4e-4;
        if i % 7 == 0 {
            let b = (i * 7 + 3) % k as u64;
            tasks.push(task(b as u32, 1, t0 + 200_000, t0 + 500_000));
            e += power(b) * 3e-4;
        }
        cum.push(e);
    }
    let times: Vec<u64> = (0..=n).map(|i| i * 1_000_000).collect();
    let domains = vec![domain_info(0, Domain::CpuPackage { id: 0 }, &[0, 1, 2, 3])];
    let samples = super::build::samples_for(0, &times, &cum);
    let codelets: Vec<taskwatt_traces::CodeletInfo> = (0..k as u32)
        .map(|c| taskwatt_traces::CodeletInfo {
            id: c,
            name: format!("t{c}"),
            archs: vec![Arch::Cpu],
        })
        .collect();
    let parts = TraceParts::new(&domains, &samples, &codelets);
    let a = attribute(&parts, &tasks, &AttributionOptions::default()).unwrap();
    let d = &a.report.domains[0];
    assert_eq!(d.types.len(), k);
    assert!(rel(d.base.value_w, 20.0) < 1e-6, "{:?}", d.base);
    for t in &d.types {
        let c: u64 = t.key.codelet[1..].parse().unwrap();
        assert!(
            rel(t.power.value_w, power(c)) < 1e-6,
            "{} {:?} {:?}",
            t.key,
            t.power,
            d.fit.warnings
        );
        // No interval without the dense inverse: never shown as a measurement.
        assert!(!t.power.reliable && t.power.flags.contains(&Flag::NoInterval));
    }
    assert!(
        d.fit
            .warnings
            .iter()
            .any(|w| w.contains("coordinate descent")),
        "{:?}",
        d.fit.warnings
    );
    let text = render_report(&a.report, &RenderOptions::default());
    assert_fits_80(&text);
}

#[test]
fn a_counter_that_never_advances_is_named_not_reported_as_zero_power() {
    // Seen on a virtual machine: the perf PMU exposes energy-psys, whose counter stays 0.
    let mut s = Synth::generate(&SynthConfig::two_packages(7));
    for x in &mut s.samples {
        x.energy_j = 0.0;
        x.raw = 0.0;
    }
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let a = attribute_systems(&s.parts(), sys, &AttributionOptions::default()).unwrap();
    let w = a.report.warnings.join("\n");
    assert!(
        w.contains("measured 0 J") && w.contains("never advanced"),
        "{w}"
    );
    // A live counter gets no such warning.
    let s = Synth::generate(&SynthConfig::two_packages(7));
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let a = attribute_systems(&s.parts(), sys, &AttributionOptions::default()).unwrap();
    assert!(!a.report.warnings.join("\n").contains("never advanced"));
}

#[test]
fn a_check_alone_on_a_type_busy_a_small_share_says_how_loose_it_is() {
    // A user's 0.4 µs `pack`, busy 6 % of its own calibration region: the check
    // "measured alone" agreed with a fit 22 % off the truth, because the base's error
    // over the region, read over so little busy time, is many times the type's power.
    let c = |name, p: f64, lo, hi| SynthCodelet {
        name,
        power_w: vec![p],
        dur_ns: (lo, hi),
        weight: 1.0,
        arch: Arch::Cpu,
    };
    let cfg = SynthConfig {
        seed: 3,
        domains: vec![(Domain::CpuPackage { id: 0 }, vec![0])],
        base_w: vec![30.0],
        codelets: vec![
            c("work", 12.0, 500_000, 1_500_000),
            c("pack", 8.0, 2_000, 2_000),
        ],
        period_ns: 1_000_000,
        run_ns: 1_000_000_000,
        gap_ns: (0, 400_000),
        noise_w: 0.5,
        idle_ns: 0,
    };
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    // 0.4 s of both types at random, then 0.6 s of `pack` alone, 2 µs every 200 µs.
    let mut tasks: Vec<TaskRecord> = Synth::tasks(&cfg, &mut rng)
        .into_iter()
        .filter(|t| t.end.0 <= 400_000_000)
        .collect();
    let mut t = 400_000_000;
    while t + 2_000 <= cfg.run_ns {
        tasks.push(task(1, 0, t, t + 2_000));
        t += 200_000;
    }
    for (i, r) in tasks.iter_mut().enumerate() {
        r.id = i as u64;
    }
    let mut s = Synth::with_tasks(&cfg, tasks, &mut rng);
    s.markers.push(taskwatt_traces::Marker {
        name: "type-calibration:pack".into(),
        start: taskwatt_traces::Timestamp(400_000_000),
        end: taskwatt_traces::Timestamp(cfg.run_ns),
    });
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let a = attribute_systems(&s.parts(), sys, &AttributionOptions::default()).unwrap();
    let d = &a.report.domains[0];
    let check = d
        .regions
        .iter()
        .find_map(|r| r.alone.as_ref().filter(|_| r.name == "calibration:pack"))
        .expect("pack ran alone in its region");
    let se = check.measured_se_w.expect("the base has an error");
    // 1 % busy: the base's error weighs about 100 times; the check is loose, and says so.
    assert!(1.96 * se > 0.05 * check.measured_w.abs(), "{check:?}");
    let text = render_report(&a.report, &RenderOptions::default());
    assert!(text.contains("the base's error weighs"), "{text}");
    assert_fits_80(&text);
}

#[test]
fn a_graph_in_a_few_intervals_beside_a_long_idle_calibration_is_not_quoted() {
    // A 60 ms graph in 7 of 184 intervals, the rest an idle calibration: the idle rows gave
    // the fit its degrees of freedom, the 7 rows where the types ran fitted them nearly
    // exactly, and four powers 50 to 94 % off the truth were shown with ±1 % intervals.
    let flagged = |run_ns: u64| {
        let cfg = SynthConfig {
            idle_ns: 900_000_000,
            run_ns,
            noise_w: 0.5,
            ..SynthConfig::two_packages(11)
        };
        let s = Synth::generate(&cfg);
        let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
        let a = attribute_systems(&s.parts(), sys, &AttributionOptions::default()).unwrap();
        a.report
            .domains
            .iter()
            .flat_map(|d| &d.types)
            .filter(|t| {
                t.power
                    .flags
                    .iter()
                    .any(|f| matches!(f, Flag::FewActiveRows { .. }))
            })
            .count()
    };
    // 8 ms of tasks at 1 ms intervals: every type of both packages is flagged.
    assert_eq!(flagged(908_000_000), 8);
    // 300 ms of them: none is.
    assert_eq!(flagged(1_200_000_000), 0);
}

#[test]
fn a_contention_applied_beyond_the_workers_it_was_fitted_on_is_warned_about() {
    // A model of 2 cores predicting 16 busy ones put a package's dynamic power near 0 and
    // its prediction 74 % low, without a word.
    let s = Synth::generate(&SynthConfig::two_packages(21));
    let sys = TraceSystems::build(&s.parts(), &s.tasks, KeyKind::CodeletArch).unwrap();
    let mut m = fit_model(&[sys], None, &AttributionOptions::default())
        .unwrap()
        .model;
    let d = &mut m.domains[0];
    d.workers = 2;
    d.contention = Some(Estimate {
        value_w: 0.1,
        ..d.base.clone()
    });
    d.covariance_w2 = None;
    let p = predict(&m, &s.parts(), &s.tasks).unwrap();
    let w = p.warnings.join("\n");
    assert!(
        w.contains("fitted on 2 worker(s)") && w.contains("up to 4 tasks at once"),
        "{w}"
    );
    assert!(w.contains("70 % of its power alone"), "{w}");
    // Within the workers it was fitted on: no such warning.
    m.domains[0].workers = 4;
    let p = predict(&m, &s.parts(), &s.tasks).unwrap();
    assert!(!p.warnings.join("\n").contains("extrapolation"));
}
