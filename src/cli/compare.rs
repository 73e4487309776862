//! `taskwatt compare <app> --policies eager,ws,lws,prio [--fit-on ws] [--repeat N]`:
//! runs the app under each policy with the sampler on, fits a model on one policy's runs,
//! predicts the energy of every run from its trace alone, and compares with what was
//! measured.
//!
//! Runs are interleaved (repeat r runs the policies in an order rotated by r) so that a
//! drift of the machine (temperature, other load) does not favour one policy.

use std::path::PathBuf;

use clap::Args;
use taskwatt::compare::{compare_runs, RecordedRun, SimulatedRow};
use taskwatt::scheduler::check_policy_name;
use taskwatt::session::{measured_run, MeasuredRunOptions, SessionError, StopSignal};
use taskwatt::traces::read_trace;

use super::args::{AppArgs, EnergyArgs};
use super::progress::Progress;
use super::report::AttributionArgs;
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
    /// Runs per policy (1 to 1000; default 3, so that the error's spread, max|err|, means
    /// something).
    #[arg(long, default_value_t = 3, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_REPEAT))]
    repeat: usize,
    /// Keep the traces in this directory (default: a temporary one).
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Write the plots into this directory: compare.svg (measured and predicted energy per
    /// policy), whatif.svg with --simulate, pareto.svg with --gamma.
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

/// The most runs per policy `--repeat` takes: past a few tens the spread no longer narrows
/// (and 10^9 ran until killed).
const MAX_REPEAT: u64 = 1000;

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
    // Each once: `lws,lws` (or `--gamma 1000,1000`) ran twice as many runs, kept each
    // trace under one name (the second overwrote the first), printed two rows from the
    // same files and fitted on every trace twice.
    let mut once: Vec<String> = Vec::new();
    for p in policies {
        if once.contains(&p) {
            eprintln!("note: {p} is named twice: it runs once per repeat");
        } else {
            once.push(p);
        }
    }
    let policies = once;
    let sweep: Vec<String> = sweep.into_iter().fold(Vec::new(), |mut v, p| {
        if !v.contains(&p) {
            v.push(p);
        }
        v
    });
    // A row of the gamma sweep (`dmdae:1000`) is a row like any other to fit on.
    let fit_on = match &a.fit_on {
        Some(p) if p.starts_with("dmdae:") => p.clone(),
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
    // (Asked only with a model at hand: without one, the note that dmdae would place
    // tasks as dmda came before this refusal and read as if the sweep went on.)
    if !a.app.gamma.is_empty()
        && (!a.app.has_energy_model()? || a.app.task_powers(Some("dmdae"))?.is_empty())
    {
        return Err(format!(
            "--gamma {}: dmdae has no task powers here (no --energy-model, and no model saved \
             by an earlier `taskwatt run {}` with energy sampling, or one without \
             codelet@arch types or of another app), so every gamma would place tasks as dmda \
             does and the sweep would compare noise; give --energy-model, or run the app \
             once first",
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
    // Inputs a file written into --keep or --svg could replace.
    let platform_files: Vec<PathBuf> = a.platform.iter().map(PathBuf::from).collect();
    let inputs: Vec<&std::path::Path> = [&a.app.energy_model, &a.energy.sim_config]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .chain(platform_files.iter().map(PathBuf::as_path))
        .collect();
    super::refuse_dir_over_inputs(&dir, "--keep", &[], Some("twt"), &inputs)?;
    // The runs rewrite the performance models' files: none may be a file compare reads.
    for f in super::args::perf_dir_outputs(&a.app)? {
        taskwatt::traces::refuse_output_over_input(&f, &inputs)?;
    }
    if let Some(d) = &a.svg {
        // Checked before the runs: a file there failed the command after all of them.
        super::output_dir(d, "--svg")?;
        super::refuse_dir_over_inputs(
            d,
            "--svg",
            &["compare.svg", "whatif.svg", "pareto.svg"],
            None,
            &inputs,
        )?;
    }
    let detect = a.energy.detect_options()?;

    // 1. Run every policy, interleaved; a signal stops the run in progress and the rest.
    let stop = StopSignal::new();
    let watch = SignalWatch::start(stop.clone())?;
    let mut runs: Vec<RecordedRun> = Vec::new();
    for r in 0..repeat {
        for k in 0..policies.len() {
            let policy = &policies[(k + r) % policies.len()];
            // `dmdae:γ` runs at γ; a plain `dmdae` at the defaults, the environment and
            // --alpha and the rest, never at a γ of the sweep.
            let (name, gamma) = match policy.split_once(':') {
                Some((n, g)) => (n.to_string(), g.parse::<f64>().ok()),
                None => (policy.clone(), None),
            };
            // As the library names them: no `:` in a file name (`dmdae:1000`).
            let trace = dir.join(format!(
                "{}-{}-{r}.twt",
                a.app.app.name(),
                policy.replace(':', "_")
            ));
            let opts = MeasuredRunOptions {
                app: a.app.app,
                config: a.app.config(),
                policy: Some(name.clone()),
                workers: a.app.workers,
                gpus: a.app.gpus as usize,
                gpu_backend: a.app.gpu_backend.into(),
                gpu_memory_limit: a.app.gpu_memory_limit,
                task_powers: a.app.task_powers(Some(name.as_str()))?,
                policy_options: a.app.policy_options(Some(name.as_str()), gamma)?,
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
                    return Err(super::run_table::interrupted(&watch, &e, a.keep.is_some()).into())
                }
                r => r?,
            };
            run.trace?;
            runs.push(RecordedRun {
                policy: policy.clone(),
                repeat: r,
                makespan_s: run.app.makespan.as_secs_f64(),
                trace,
            });
        }
    }

    // 2. Fit on one policy's traces, predict every run from its trace (library: compare.rs).
    let mut out = compare_runs(
        a.app.app.name(),
        &runs,
        &policies,
        &fit_on,
        &a.attribution.options(),
    )?;
    let model = out.model.clone();
    // 4. Simulated rows, from the first run of the fitted-on policy.
    if let Some(first) = runs.iter().find(|r| r.policy == fit_on) {
        let src = read_trace(&first.trace)?;
        // A simulated dmdae row runs at the default gamma, or the one --gamma gives alone.
        let gamma = match a.app.gamma.as_slice() {
            [g] => Some(*g),
            _ => None,
        };
        // Only when a simulated row runs dmdae: its note named a model no row used.
        let powers = if a
            .simulate
            .iter()
            .any(|p| p.trim().eq_ignore_ascii_case("dmdae"))
        {
            a.app.task_powers(Some("dmdae"))?
        } else {
            Vec::new()
        };
        let policy_options = a.app.policy_options(Some("dmdae"), gamma)?;
        let mut said = Vec::new();
        for platform in &platforms {
            let (sims, _, notes) = super::simulate::simulate_policies(
                &src,
                platform,
                &super::simulate::SimRequest {
                    policies: &a.simulate,
                    model: Some(&model),
                    powers: &powers,
                    policy_options,
                    energy: true,
                    keep_last: false,
                    replicas: super::simulate::DEFAULT_REPLICAS,
                },
            )?;
            notes.print_new(a.simulate.len(), &mut said);
            for v in super::sim_rows::ranked_verdicts(&sims) {
                out.virtual_verdicts
                    .push(format!("on {}: {v}", platform.name));
            }
            for r in sims {
                out.virtual_rows.push(SimulatedRow {
                    policy: r.policy,
                    platform: platform.name.clone(),
                    makespan_s: r.figures.makespan_s,
                    meter_j: r.figures.total_j,
                    predicted_j: r.predicted_j,
                    makespan_ci_s: r.makespan_ci_s,
                    meter_ci_j: r.energy_ci_j,
                    predicted_ci_j: r.predicted_ci_j,
                    unpredicted_domains: r.unpredicted_domains,
                });
            }
        }
    }
    if a.json {
        let mut v = out.json();
        // Without --keep the traces are in a temporary directory, gone once this returns.
        if a.keep.is_none() {
            if let Some(runs) = v.get_mut("runs").and_then(|r| r.as_array_mut()) {
                for r in runs {
                    r["trace"] = serde_json::Value::Null;
                }
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", out.text());
    }
    if let Some(d) = &a.svg {
        super::output_dir(d, "--svg")?;
        for p in out.write_plots(d, &sweep)? {
            eprintln!("wrote {}", p.display());
        }
    }
    if a.keep.is_some() {
        eprintln!("traces kept in {}", dir.display());
    }
    Ok(())
}
