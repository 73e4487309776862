//! `taskwatt run APP --platform P`: the app runs here once (to check its result and time its
//! kernels, or with --no-exec not at all), then its graph is simulated on the platform.

use taskwatt::energy::attribution::attribute_trace;
use taskwatt::session::{measured_run, MeasuredRunOptions, SessionError, StopSignal};
use taskwatt::traces::read_trace;

use super::args::RunArgs;
use super::progress::Progress;
use super::report;
use super::run_table::{interrupted, one_gamma, output, print_table};
use super::signals::SignalWatch;
use super::CliResult;

/// `run --platform`: the app runs here once to check its result and time its kernels
/// (lws, --workers CPU workers, no meter), then its graph is simulated on the platform.
pub(crate) fn run_on_platform(a: &RunArgs, platform: &str) -> CliResult {
    let platform = taskwatt::whatif::Platform::load(platform)?;
    let policy = a
        .sched
        .clone()
        .unwrap_or_else(|| taskwatt::scheduler::DEFAULT_POLICY.to_owned());
    taskwatt::scheduler::check_policy_name(&policy)?;
    if a.app.gpus > 0 {
        eprintln!(
            "note: --gpus is ignored with --platform: the recording runs on this machine's CPU \
             cores, the platform gives the GPUs"
        );
    }
    let recorded = tempfile::Builder::new().suffix(".twt").tempfile()?;
    let mut config = a.app.config();
    if a.no_exec {
        // Nothing is computed: there is no result to check.
        config.check = false;
    }
    let opts = MeasuredRunOptions {
        app: a.app.app,
        config,
        policy: Some("lws".into()),
        workers: a.app.workers,
        gpus: 0,
        gpu_backend: taskwatt::runtime::GpuBackend::Emulated,
        gpu_memory_limit: None,
        task_powers: Vec::new(),
        policy_options: Default::default(),
        perf_models: None,
        trace: recorded.path().to_path_buf(),
        meter: a.energy.meter,
        detect: a.energy.detect_options()?,
        period: None,
        idle_calibration: None,
        type_calibration: None,
        stop: StopSignal::new(),
    };
    let watch = SignalWatch::start(opts.stop.clone())?;
    let label = a.app.app.name().to_string();
    let dry = a.no_exec;
    let run = measured_run(&opts, |b| b.dry_run(dry), |rt| Progress::start(rt, label));
    let run = match run {
        Err(e @ SessionError::Interrupted { .. }) => {
            return Err(interrupted(&watch, &e, false).into())
        }
        r => r?,
    };
    drop(watch);
    run.trace
        .as_ref()
        .map_err(|e| format!("the recording run's trace could not be written: {e}"))?;
    let mut out = output(a, &run);
    // The recording is a temporary file; --trace gets the simulated run.
    out.trace.path = None;
    let mut trace = read_trace(recorded.path())?;
    if a.no_exec {
        durations_from_models(a, &mut trace)?;
    }
    let model = a
        .app
        .energy_model
        .as_ref()
        .map(taskwatt::energy::attribution::EnergyModel::load)
        .transpose()?;
    // dmdae's knobs (--alpha ...) and, without --energy-model, the powers of the model
    // the app's last measured run saved.
    let powers = a.app.task_powers(Some(&policy))?;
    let (rows, sim, notes) = super::simulate::simulate_policies(
        &trace,
        &platform,
        &super::simulate::SimRequest {
            policies: std::slice::from_ref(&policy),
            model: model.as_ref(),
            powers: &powers,
            policy_options: a
                .app
                .policy_options(Some(&policy), one_gamma(&a.app.gamma)?)?,
            energy: !a.no_energy,
            keep_last: true,
            replicas: super::simulate::DEFAULT_REPLICAS,
        },
    )?;
    notes.print(1);
    let sim = sim.expect("one policy simulated");
    if let Some(p) = &a.trace {
        sim.save(p)?;
    }
    let attribution = if a.no_report || a.no_energy {
        None
    } else {
        Some(attribute_trace(&sim, &a.attribution.options())?)
    };
    if a.json {
        let mut v = serde_json::json!({
            "simulated": "virtual time",
            "platform": platform.name,
            "recorded": out,
            "run": rows[0],
        });
        if let Some(att) = &attribution {
            v["attribution"] = serde_json::to_value(&att.report)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let mut text =
            super::sim_rows::render_rows(&platform, &trace, &rows, model.is_some(), !a.no_energy);
        if a.no_exec {
            println!(
                "recorded the graph of {} without executing it (--no-exec: no result, no \
                 check); each task's duration drawn from its type's performance model \
                 (mean and spread of the recorded executions)",
                a.app.app.name()
            );
            // The recording's own times are those of tasks that did nothing.
            text = text
                .lines()
                .filter(|l| !l.starts_with("recorded: "))
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        } else {
            println!("recorded on this machine (to check the result and time the kernels):");
            print_table(&out);
        }
        println!();
        print!("{text}");
        if let Some(att) = &attribution {
            println!();
            report::emit(&sim, att, false, None, None)?;
        }
    }
    if let Some(p) = &a.trace {
        eprintln!("wrote {} (the simulated run)", p.display());
    }
    Ok(())
}

/// One task's duration from its type's model: log-normal with the model's mean and
/// standard deviation (the recorded executions' spread, so that the replicas' interval
/// shows it; a duration from the size law has none), drawn reproducibly per task id.
fn model_draw(p: &taskwatt::runtime::DurationPrediction, id: u64) -> f64 {
    let mean = p.mean_ns.max(0.0);
    if mean == 0.0 || p.std_ns <= 0.0 {
        return mean;
    }
    let s2 = (1.0 + (p.std_ns / mean).powi(2)).ln();
    let z = taskwatt::energy::SplitMix64::new(id ^ 0x0E5E_C0DE).next_normal();
    (mean.ln() - s2 / 2.0 + s2.sqrt() * z).exp()
}

/// `run --platform --no-exec`: each task of a recording whose tasks did nothing gets its
/// codelet's mean duration (on a CPU, at its footprint) from the performance models.
fn durations_from_models(
    a: &RunArgs,
    trace: &mut taskwatt::traces::Trace,
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = a.app.perf_models()?.ok_or(
        "--no-exec takes the tasks' durations from the performance models: drop --no-perfmodel",
    )?;
    let models = taskwatt::runtime::PerfModels::load(&dir)?;
    let names: std::collections::HashMap<u32, String> = trace
        .codelets
        .iter()
        .map(|c| (c.id, c.name.clone()))
        .collect();
    for chunk in &mut trace.tasks {
        for r in &mut chunk.records {
            let name = names.get(&r.codelet).map_or("?", String::as_str);
            let p = models
                .predict(name, taskwatt::traces::Arch::Cpu, r.footprint)
                .ok_or_else(|| {
                    format!(
                        "--no-exec: no performance model of {name} on a CPU (footprint {} \
                         bytes) in {}: run `taskwatt run {} --n {} --tile {}` once to \
                         record them",
                        r.footprint,
                        dir.display(),
                        a.app.app.name(),
                        a.app.n,
                        a.app.tile
                    )
                })?;
            r.end = taskwatt::traces::Timestamp(r.start.as_ns() + model_draw(&p, r.id) as u64);
        }
    }
    Ok(())
}
