//! `taskwatt run <app>`: runs a built-in app with the energy sampler on the best available
//! meter, checks the result, writes the trace, and prints the run (makespan, tasks,
//! GFlop/s) and the energy attribution report, as tables or as JSON (`--json`).

use taskwatt::energy::attribution::attribute_trace;
use taskwatt::session::{
    measured_run, MeasuredRunOptions, SessionError, StopSignal, TypeCalibration,
};
use taskwatt::traces::read_trace;

use super::args::RunArgs;
use super::progress::Progress;
use super::report::{self};
use super::run_table::{interrupted, one_gamma, output, print_table};
use super::signals::SignalWatch;
use super::CliResult;

pub(crate) fn run(a: RunArgs) -> CliResult {
    a.check_sched_from_env()?;
    a.app.config().validate(a.app.app)?;
    super::run_outputs::refuse_trace_over_inputs(&a)?;
    if a.mpi {
        let ignored = a.flags_mpi_ignores();
        if !ignored.is_empty() {
            return Err(format!(
                "run --mpi does not take {}: a distributed run has no calibration, no \
                 performance models, no report (merge the ranks' traces with `taskwatt \
                 merge`, then `taskwatt report`); drop them \
                 (docs/mpi.md)",
                ignored.join(", ")
            )
            .into());
        }
        return super::mpi::run(&a);
    }
    refuse_ranks_without_mpi()?;
    if let Some(p) = &a.platform {
        return super::run_platform::run_on_platform(&a, p);
    }
    // More workers than CPUs runs (StarPU's workers would too), but they share cores: the
    // figures are then those of an oversubscribed machine.
    if let (Some(w), Ok(cpus)) = (a.app.workers, std::thread::available_parallelism()) {
        if w > cpus.get() {
            eprintln!(
                "warning: {w} workers on {cpus} usable CPUs: workers share cores, so the \
                 makespan and the per-task powers are those of an oversubscribed machine"
            );
        }
    }
    if a.no_energy && (a.svg.is_some() || a.energy.idle_calibration.is_some()) {
        eprintln!(
            "warning: --no-energy samples no meter, so --svg writes no energy plots and \
             calibration measures nothing"
        );
    }
    let tmp;
    let trace_path = match &a.trace {
        Some(p) => p.clone(),
        None => {
            tmp = tempfile::Builder::new().suffix(".twt").tempfile()?;
            tmp.path().to_path_buf()
        }
    };
    let opts = MeasuredRunOptions {
        app: a.app.app,
        config: a.app.config(),
        policy: a.sched.clone(),
        workers: a.app.workers,
        gpus: a.app.gpus as usize,
        gpu_backend: a.app.gpu_backend.into(),
        gpu_memory_limit: a.app.gpu_memory_limit,
        task_powers: a.app.task_powers(a.sched.as_deref())?,
        policy_options: a
            .app
            .policy_options(a.sched.as_deref(), one_gamma(&a.app.gamma)?)?,
        perf_models: a.app.perf_models()?,
        trace: trace_path.clone(),
        meter: a.energy.meter,
        detect: a.energy.detect_options()?,
        period: (!a.no_energy).then_some(a.energy.period),
        idle_calibration: a.energy.idle_calibration,
        type_calibration: a.energy.type_calibration.map(|t| match t {
            TypeCalibration::Auto { budget, step, .. } => TypeCalibration::Auto {
                budget,
                step,
                precision_pct: a.attribution.measured_within,
            },
            fixed => fixed,
        }),
        stop: StopSignal::new(),
    };
    let label = a.app.app.name().to_string();
    let chunk = a.trace_chunk;
    let watch = SignalWatch::start(opts.stop.clone())?;
    let run = measured_run(
        &opts,
        |b| match chunk {
            Some(n) => b.trace_chunk(n as usize),
            None => b,
        },
        |rt| Progress::start(rt, label),
    );
    let run = match run {
        Err(e @ SessionError::Interrupted { .. }) => {
            return Err(interrupted(&watch, &e, a.trace.is_some()).into())
        }
        r => r?,
    };
    drop(watch);
    let out = output(&a, &run);
    let attribution = match (&out.energy, a.no_report, &run.trace) {
        (Some(_), false, Ok(_)) => {
            let trace = read_trace(&trace_path)?;
            let att = attribute_trace(&trace, &a.attribution.options())?;
            save_energy_model(&a, &att, trace.is_simulated());
            Some((trace, att))
        }
        _ => None,
    };
    if a.json {
        let mut v = serde_json::to_value(&out)?;
        if let Some((_, att)) = &attribution {
            v["attribution"] = serde_json::to_value(&att.report)?;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_table(&out);
        warn_if_loaded();
        if let Some((trace, att)) = &attribution {
            println!();
            report::emit(trace, att, false, None, None)?;
            print!(
                "{}",
                report::sensor_check(None, trace, att, &a.attribution.options())?
            );
        }
    }
    if let (Some(dir), Some((trace, att))) = (&a.svg, &attribution) {
        super::report_files::emit_svg_only(trace, att, dir)?;
    }
    // The results above stand; a trace that could not be written (a full disk) is still
    // an error.
    run.trace
        .map(drop)
        .map_err(|e| format!("the run completed, but its trace could not be written: {e}").into())
}

/// Saves the run's fitted energy model beside the performance models, for dmdae (types
/// by codelet-arch only); a failure is a note on stderr, not the run's error.
fn save_energy_model(
    a: &RunArgs,
    att: &taskwatt::energy::attribution::Attribution,
    simulated: bool,
) {
    let Ok(Some(dir)) = a.app.perf_models() else {
        return;
    };
    if att.systems.key != taskwatt::energy::attribution::KeyKind::CodeletArch {
        return;
    }
    let path = dir.join(taskwatt::session::run_energy_model(a.app.app));
    if let Some(m) = a
        .app
        .energy_model
        .as_deref()
        .filter(|m| taskwatt::traces::refuse_output_over_input(&path, &[m]).is_err())
    {
        eprintln!(
            "note: the run's energy model was not saved: {} is the --energy-model this run \
             read, and is left as it was (fit a model of this run with `taskwatt fit`)",
            m.display()
        );
        return;
    }
    let saved = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            taskwatt::energy::attribution::fit_model(
                std::slice::from_ref(&att.systems),
                None,
                &a.attribution.options(),
            )
            .map_err(|e| e.to_string())
        })
        .and_then(|f| {
            // A run too short to pin down any power (a 4-task graph) does not replace a
            // model that dmdae and `simulate` would otherwise go on using.
            let reliable = f
                .model
                .domains
                .iter()
                .flat_map(|d| &d.types)
                .filter(|t| t.power.reliable)
                .count();
            if reliable == 0 && path.exists() {
                eprintln!(
                    "note: the run's energy model was not saved: its fit pinned down no task \
                     type's power, and {} (an earlier run's) is kept",
                    path.display()
                );
                return Ok(());
            }
            let mut model = f.model;
            model.simulated = simulated;
            model.save(&path).map_err(|e| e.to_string())
        });
    if let Err(e) = saved {
        eprintln!(
            "note: the run's energy model was not saved to {}: {e}",
            path.display()
        );
    }
}

/// Warns when other work competed for the cores during the run: timings and GFlop/s then
/// move from run to run (the one-minute load average, Linux only).
fn warn_if_loaded() {
    let Ok(text) = std::fs::read_to_string("/proc/loadavg") else {
        return;
    };
    let Some(load) = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
    else {
        return;
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    // The run itself keeps every core busy: more than one extra runnable thread per two
    // cores means something else ran.
    if load > cores * 1.5 {
        println!(
            "  {:<10} the machine was loaded (load average {load:.1} on {cores} cores): \
             makespan and GFlop/s may differ from an idle machine's",
            "warning"
        );
    }
}

/// Under `mpirun` (or another MPI launcher) with several ranks but without `--mpi`, each
/// process would run the whole app and write the same trace over the others' (a corrupt
/// file, and every rank saying it succeeded): refused, naming the fix.
fn refuse_ranks_without_mpi() -> CliResult {
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"] {
        let Some(size) = std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        else {
            continue;
        };
        if size > 1 {
            return Err(format!(
                "this process is one of {size} that an MPI launcher started ({var}={size}), \
                 but `run` was not given --mpi: each would run the whole app and write the \
                 same trace over the others'. Add --mpi (each rank runs its share and writes \
                 its own trace, TRACE.rankN.twt; docs/mpi.md), or run taskwatt without \
                 mpirun"
            )
            .into());
        }
    }
    Ok(())
}
