//! `taskwatt compare <app> --policies eager,ws,lws,prio [--fit-on ws] [--repeat N]`:
//! runs the app under each policy with the sampler on, fits a model on one policy's runs,
//! predicts the energy of every run from its trace alone, and compares with what was
//! measured.
//!
//! Runs are interleaved (repeat r runs the policies in an order rotated by r) so that a
//! drift of the machine (temperature, other load) does not favour one policy.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use taskwatt::energy::attribution::{fit_model, predict_trace, TraceSystems};
use taskwatt::plots;
use taskwatt::scheduler::check_policy_name;
use taskwatt::session::{measured_run, MeasuredRunOptions, SessionError, StopSignal};
use taskwatt::traces::read_trace;

use super::report::AttributionArgs;
use super::run::{AppArgs, EnergyArgs, Progress};
use super::signals::SignalWatch;
use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Policies to compare, comma-separated.
    #[arg(long, default_value = "eager,ws,lws,prio", value_delimiter = ',')]
    policies: Vec<String>,
    /// The policy whose runs the model is fitted on (default: the first).
    #[arg(long)]
    fit_on: Option<String>,
    /// Runs per policy (at least 1; default 3, so that the error's spread, max|err|, means
    /// something).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    repeat: usize,
    /// Keep the traces in this directory (default: a temporary one).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the comparison plot (compare.svg) into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Simulated rows beside the measured ones: these policies, replayed in virtual time
    /// (`taskwatt simulate`) from the first run of --fit-on, on each --platform; their
    /// energy is the platform's simulated meter's and the fitted model's prediction.
    #[arg(long, value_delimiter = ',', value_name = "POLICIES")]
    simulate: Vec<String>,
    /// Platforms of the simulated rows (files or built-in names); default: this-machine.
    #[arg(long, value_delimiter = ',', value_name = "FILE|NAME")]
    platform: Vec<String>,
    #[command(flatten)]
    energy: EnergyArgs,
    #[command(flatten)]
    attribution: AttributionArgs,
}

#[derive(Serialize, Clone)]
struct RunRow {
    policy: String,
    repeat: usize,
    makespan_s: f64,
    measured_j: f64,
    predicted_j: f64,
    error_pct: f64,
    /// 95% interval in which the measurement was expected (the model's uncertainty and
    /// the meter's noise), and whether it held the measurement.
    measurement_interval_j: Option<[f64; 2]>,
    covered: Option<bool>,
    /// The application region (the task graph without its calibration), when marked.
    application: Option<RegionRow>,
    fitted_on: bool,
    trace: PathBuf,
}

#[derive(Serialize, Clone, Copy)]
struct RegionRow {
    predicted_j: f64,
    measured_j: Option<f64>,
    /// As the run's: the 95% interval for the measurement, and whether it held it.
    measurement_interval_j: Option<[f64; 2]>,
    covered: Option<bool>,
}

/// Whether `m` lies in `iv`.
fn covers(iv: Option<[f64; 2]>, m: Option<f64>) -> Option<bool> {
    let ([lo, hi], m) = (iv?, m?);
    Some(lo <= m && m <= hi)
}

#[derive(Serialize)]
struct PolicyRow {
    policy: String,
    runs: usize,
    makespan_s: f64,
    measured_j: f64,
    predicted_j: f64,
    error_pct: f64,
    max_abs_error_pct: f64,
    /// Runs whose measurement interval held the measurement, of those with one.
    covered: (usize, usize),
    /// Mean energy of the application region (the graph alone), when every run marks it.
    application: Option<RegionRow>,
    fitted_on: bool,
}

#[derive(Serialize)]
struct CompareOut {
    app: String,
    simulated: bool,
    fit_on: String,
    runs: Vec<RunRow>,
    policies: Vec<PolicyRow>,
    /// Rows simulated in virtual time (`--simulate`), not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    virtual_rows: Vec<VirtualRow>,
}

/// A policy and platform that were not run: simulated from a recorded graph.
#[derive(Serialize)]
struct VirtualRow {
    policy: String,
    platform: String,
    makespan_s: f64,
    /// The platform's simulated meter over the graph, J.
    meter_j: Option<f64>,
    /// The fitted model's prediction of the simulated run, J.
    predicted_j: Option<f64>,
}

pub(crate) fn compare(a: CompareArgs) -> CliResult {
    let mut policies: Vec<String> = a
        .policies
        .iter()
        .map(|p| check_policy_name(p).map(str::to_string))
        .collect::<Result<_, _>>()?;
    // dmdae at each --gamma, labelled `dmdae:γ`, beside the policies.
    let sweep: Vec<String> = a.app.gamma.iter().map(|g| format!("dmdae:{g}")).collect();
    policies.extend(sweep.iter().cloned());
    if policies.is_empty() {
        return Err("--policies is empty: name at least one policy".into());
    }
    let fit_on = match &a.fit_on {
        Some(p) => check_policy_name(p)?.to_string(),
        None => policies[0].clone(),
    };
    if !policies.contains(&fit_on) {
        return Err(format!(
            "--fit-on {fit_on} is not among --policies {}",
            policies.join(",")
        )
        .into());
    }
    for p in &a.simulate {
        check_policy_name(p)?;
    }
    let platforms: Vec<taskwatt::whatif::Platform> = if a.simulate.is_empty() {
        if !a.platform.is_empty() {
            return Err(
                "--platform gives the platforms of --simulate's rows: add --simulate".into(),
            );
        }
        Vec::new()
    } else if a.platform.is_empty() {
        vec![taskwatt::whatif::Platform::load("this-machine")?]
    } else {
        a.platform
            .iter()
            .map(taskwatt::whatif::Platform::load)
            .collect::<Result<_, _>>()?
    };
    a.app.config().validate(a.app.app)?;
    // A gamma sweep weighs dmdae's energy term: without task powers every gamma runs
    // dmda, and the sweep's front would be run-to-run noise.
    if !a.app.gamma.is_empty() && a.app.task_powers(Some("dmdae"), None)?.is_empty() {
        return Err(format!(
            "--gamma {}: dmdae has no task powers here (no --energy-model, and no model saved \
             by an earlier `taskwatt run {}` with energy sampling, or one without \
             codelet@arch types), so every gamma would place tasks as dmda does and the \
             sweep would compare noise; give --energy-model, or run the app once first",
            a.app
                .gamma
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(","),
            a.app.app.name()
        )
        .into());
    }
    let repeat = a.repeat;
    let tmp = tempfile::tempdir()?;
    let dir = a.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    super::output_dir(&dir, "--keep")?;
    let detect = a.energy.detect_options()?;

    // 1. Run every policy, interleaved; a signal stops the run in progress and the rest.
    let stop = StopSignal::new();
    let watch = SignalWatch::start(stop.clone())?;
    let mut runs: Vec<(String, usize, f64, PathBuf)> = Vec::new();
    for r in 0..repeat {
        for k in 0..policies.len() {
            let policy = &policies[(k + r) % policies.len()];
            let (name, gamma) = match policy.split_once(':') {
                Some((n, g)) => (n.to_string(), g.parse::<f64>().ok()),
                None => (policy.clone(), None),
            };
            let trace = dir.join(format!("{}-{policy}-{r}.twt", a.app.app.name()));
            let opts = MeasuredRunOptions {
                app: a.app.app,
                config: a.app.config(),
                policy: Some(name.clone()),
                workers: a.app.workers,
                gpus: a.app.gpus as usize,
                gpu_backend: a.app.gpu_backend.into(),
                task_powers: a.app.task_powers(Some(name.as_str()), gamma)?,
                perf_models: a.app.perf_models()?,
                trace: trace.clone(),
                meter: a.energy.meter,
                detect: detect.clone(),
                period: Some(a.energy.period),
                idle_calibration: a.energy.idle_calibration,
                type_calibration: a.energy.type_calibration,
                stop: stop.clone(),
            };
            let label = format!("{} {policy} ({}/{})", a.app.app.name(), r + 1, repeat);
            let run = match measured_run(&opts, |b| b, |rt| Progress::start(rt, label)) {
                Err(e @ SessionError::Interrupted { .. }) => {
                    return Err(super::run::interrupted(&watch, &e, a.keep.is_some()).into())
                }
                r => r?,
            };
            run.trace?;
            runs.push((policy.clone(), r, run.app.makespan.as_secs_f64(), trace));
        }
    }

    // 2. Fit on one policy's traces.
    let opts = a.attribution.options();
    let mut systems = Vec::new();
    let mut simulated = false;
    for (p, _, _, path) in &runs {
        if *p == fit_on {
            let t = read_trace(path)?;
            simulated |= t.is_simulated();
            systems.push(TraceSystems::from_trace(&t, opts.key)?);
        }
    }
    let model = fit_model(&systems, None, &opts)?.model;

    // 3. Predict every run from its trace.
    let mut rows = Vec::new();
    for (policy, r, makespan, path) in &runs {
        let t = read_trace(path)?;
        let pred = predict_trace(&model, &t)?;
        let measured = pred
            .total_measured_j
            .ok_or_else(|| format!("{}: no energy samples to compare with", path.display()))?;
        rows.push(RunRow {
            policy: policy.clone(),
            repeat: *r,
            makespan_s: *makespan,
            measured_j: measured,
            predicted_j: pred.total_predicted_j,
            error_pct: pred.total_error_pct.unwrap_or(f64::NAN),
            measurement_interval_j: pred.total_measurement_interval_j,
            covered: covers(pred.total_measurement_interval_j, Some(measured)),
            application: pred.region_total("application").map(|(p, m)| {
                let iv = pred.region_measurement_interval("application");
                RegionRow {
                    predicted_j: p,
                    measured_j: m,
                    measurement_interval_j: iv,
                    covered: covers(iv, m),
                }
            }),
            fitted_on: *policy == fit_on,
            trace: path.clone(),
        });
    }
    let per_policy: Vec<PolicyRow> = policies
        .iter()
        .map(|p| {
            let rs: Vec<&RunRow> = rows.iter().filter(|r| &r.policy == p).collect();
            let n = rs.len() as f64;
            let mean = |f: &dyn Fn(&RunRow) -> f64| rs.iter().map(|r| f(r)).sum::<f64>() / n;
            PolicyRow {
                policy: p.clone(),
                runs: rs.len(),
                makespan_s: mean(&|r| r.makespan_s),
                measured_j: mean(&|r| r.measured_j),
                predicted_j: mean(&|r| r.predicted_j),
                error_pct: mean(&|r| r.error_pct),
                max_abs_error_pct: rs.iter().map(|r| r.error_pct.abs()).fold(0.0, f64::max),
                covered: count_covered(rs.iter().map(|r| r.covered)),
                application: rs
                    .iter()
                    .map(|r| r.application)
                    .collect::<Option<Vec<RegionRow>>>()
                    .map(|v| RegionRow {
                        predicted_j: v.iter().map(|x| x.predicted_j).sum::<f64>() / n,
                        measured_j: v
                            .iter()
                            .map(|x| x.measured_j)
                            .sum::<Option<f64>>()
                            .map(|m| m / n),
                        measurement_interval_j: None,
                        covered: None,
                    }),
                fitted_on: *p == fit_on,
            }
        })
        .collect();
    // 4. Simulated rows, from the first run of the fitted-on policy.
    let mut virtual_rows = Vec::new();
    if let Some((_, _, _, src)) = runs.iter().find(|(p, ..)| *p == fit_on) {
        let src = read_trace(src)?;
        // The --gamma sweep left its last value in the environment: a simulated dmdae row
        // uses the default gamma, or the one --gamma gives alone.
        let gamma = match a.app.gamma.as_slice() {
            [g] => Some(*g),
            _ => None,
        };
        std::env::remove_var(taskwatt::scheduler::GAMMA_ENV);
        let powers = a.app.task_powers(Some("dmdae"), gamma)?;
        for platform in &platforms {
            let (sims, _, notes) = super::simulate::simulate_policies(
                &src,
                platform,
                &a.simulate,
                Some(&model),
                &powers,
                true,
            )?;
            notes.print(a.simulate.len());
            for r in sims {
                virtual_rows.push(VirtualRow {
                    policy: r.policy,
                    platform: platform.name.clone(),
                    makespan_s: r.figures.makespan_s,
                    meter_j: r.figures.total_j,
                    predicted_j: r.predicted_j,
                });
            }
        }
    }
    let out = CompareOut {
        app: a.app.app.name().into(),
        simulated,
        fit_on: fit_on.clone(),
        runs: rows,
        policies: per_policy,
        virtual_rows,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&out, repeat);
    }
    if let Some(d) = &a.svg {
        super::output_dir(d, "--svg")?;
        let p = d.join("compare.svg");
        let bars: Vec<(String, f64, f64)> = out
            .policies
            .iter()
            .map(|r| (r.policy.clone(), r.measured_j, r.predicted_j))
            .collect();
        let sim = if simulated { " (SIMULATED meter)" } else { "" };
        plots::measured_vs_predicted(
            &p,
            &format!(
                "{}: energy measured and predicted by a model fitted on {fit_on}{sim}",
                out.app
            ),
            "energy (J)",
            &bars,
        )?;
        eprintln!("wrote {}", p.display());
        if !out.virtual_rows.is_empty() {
            // Measured runs (the application region) and simulated rows on one plane.
            let p = d.join("whatif.svg");
            let mut points = policy_points(&out.policies, " (run)");
            points.extend(out.virtual_rows.iter().filter_map(|v| {
                v.meter_j.map(|e| {
                    (
                        format!("{} on {} (simulated)", v.policy, v.platform),
                        v.makespan_s,
                        e,
                    )
                })
            }));
            plots::pareto(
                &p,
                &format!(
                    "{}: energy against makespan, measured runs and virtual-time simulations \
                     (not runs){sim}",
                    out.app
                ),
                &points,
                &[],
            )?;
            eprintln!("wrote {}", p.display());
        }
        if !sweep.is_empty() {
            let p = d.join("pareto.svg");
            let points = policy_points(&out.policies, "");
            plots::pareto(
                &p,
                &format!(
                    "{}: energy against makespan, dmdae over gamma (µs/J) beside the \
                     policies{sim}",
                    out.app
                ),
                &points,
                &sweep,
            )?;
            eprintln!("wrote {}", p.display());
        }
    }
    if a.keep.is_some() {
        eprintln!("traces kept in {}", dir.display());
    }
    Ok(())
}

/// One point per policy: its label (with `suffix`), makespan and energy (the application
/// region's where every run marks it, else the whole run's).
fn policy_points(policies: &[PolicyRow], suffix: &str) -> Vec<(String, f64, f64)> {
    policies
        .iter()
        .map(|r| {
            let e = r
                .application
                .and_then(|x| x.measured_j)
                .unwrap_or(r.measured_j);
            (format!("{}{suffix}", r.policy), r.makespan_s, e)
        })
        .collect()
}

/// `(covered, with an interval)`.
fn count_covered(c: impl Iterator<Item = Option<bool>>) -> (usize, usize) {
    c.flatten()
        .fold((0, 0), |(k, n), ok| (k + usize::from(ok), n + 1))
}

fn print_table(o: &CompareOut, repeat: usize) {
    if o.simulated {
        println!("*** SIMULATED meter: energies come from taskwatt's simulator, not a sensor ***");
    }
    println!(
        "{}: model fitted on {} ({} run{} per policy); errors are (predicted - measured) / measured",
        o.app,
        o.fit_on,
        repeat,
        if repeat == 1 { "" } else { "s" }
    );
    println!(
        "{:<14} {:>10} {:>12} {:>12} {:>9} {:>9} {:>7}",
        "policy", "makespan", "measured", "predicted", "error", "max|err|", "covers"
    );
    let frac = |(k, n): (usize, usize)| {
        if n == 0 {
            "-".to_owned()
        } else {
            format!("{k}/{n}")
        }
    };
    for r in &o.policies {
        println!(
            "{:<14} {:>8.3} s {:>10.2} J {:>10.2} J {:>8.2}% {:>8.2}% {:>7}{}",
            r.policy,
            r.makespan_s,
            r.measured_j,
            r.predicted_j,
            r.error_pct,
            r.max_abs_error_pct,
            frac(r.covered),
            if r.fitted_on { "  (fitted on)" } else { "" }
        );
    }
    let all = count_covered(o.runs.iter().map(|r| r.covered));
    let app = count_covered(o.runs.iter().map(|r| r.application.and_then(|a| a.covered)));
    if all.1 + app.1 > 0 {
        println!(
            "covers: runs whose measurement lies in the prediction's 95% interval (the\n\
             model's uncertainty, the meter's noise, the tasks' variation): {} of the runs'\n\
             totals, {} of their application regions",
            frac(all),
            frac(app)
        );
    }
    if !o.virtual_rows.is_empty() {
        println!(
            "simulated in virtual time from the first {} run (not runs; the meter is the \
             platform's simulated one, over the graph alone):",
            o.fit_on
        );
        println!(
            "{:<14} {:<34} {:>10} {:>12} {:>12}",
            "policy", "platform", "makespan", "meter", "model"
        );
        let j = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2} J"));
        for v in &o.virtual_rows {
            println!(
                "{:<14} {:<34} {:>8.3} s {:>12} {:>12}",
                v.policy,
                v.platform,
                v.makespan_s,
                j(v.meter_j),
                j(v.predicted_j)
            );
        }
    }
    if o.policies.iter().all(|r| r.application.is_some()) {
        println!("the application alone (the graph, without calibration):");
        println!(
            "{:<14} {:>12} {:>12} {:>9} {:>7}",
            "policy", "measured", "predicted", "error", "covers"
        );
        for r in &o.policies {
            let app = r.application.expect("checked");
            let m = app.measured_j;
            let covered = count_covered(
                o.runs
                    .iter()
                    .filter(|x| x.policy == r.policy)
                    .map(|x| x.application.and_then(|a| a.covered)),
            );
            println!(
                "{:<14} {:>12} {:>10.2} J {:>9} {:>7}",
                r.policy,
                m.map_or("-".to_owned(), |m| format!("{m:.2} J")),
                app.predicted_j,
                m.filter(|&m| m != 0.0).map_or("-".to_owned(), |m| format!(
                    "{:.2}%",
                    100.0 * (app.predicted_j - m) / m
                )),
                frac(covered)
            );
        }
    }
}
