//! `taskwatt run <app>`: runs a built-in app with the energy sampler on the best available
//! meter, checks the result, writes the trace, and prints the run (makespan, tasks,
//! GFlop/s) and the energy attribution report, as tables or as JSON (`--json`).

use std::path::PathBuf;

use serde::Serialize;
use taskwatt::apps::{App, AppRun};
use taskwatt::energy::attribution::attribute_trace;
use taskwatt::energy::SamplerStats;
use taskwatt::session::{
    measured_run, MeasuredRun, MeasuredRunOptions, SessionError, StopSignal, TypeCalibration,
};
use taskwatt::traces::{read_trace, WorkerInfo};

use super::args::RunArgs;
use super::progress::Progress;
use super::report::{self};
use super::signals::{Interrupted, SignalWatch};
use super::CliResult;

#[derive(Serialize)]
struct RunOutput<'a> {
    app: &'a AppRun,
    gflops: f64,
    makespan_s: f64,
    policy: &'a str,
    workers: &'a [WorkerInfo],
    /// The workers reserved for type calibration (last in `workers`): no graph task ran
    /// on them.
    reserved_workers: &'a [u32],
    /// What drives the GPU workers (`emulated` or `cuda`; null when there are none).
    gpu_backend: Option<taskwatt::runtime::GpuBackend>,
    kernels: &'static str,
    stats: StatsJson,
    trace: TraceOut,
    energy: Option<EnergyOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    type_calibration_auto: Option<&'a taskwatt::session::AutoCalibrationReport>,
}

#[derive(Serialize)]
struct StatsJson {
    submitted: u64,
    executed: u64,
    failed: u64,
    cancelled: u64,
    /// Copies of data between memory nodes (with GPUs).
    transfers: u64,
    transferred_bytes: u64,
    /// Of those, copies made ahead of their task by a GPU's prefetcher.
    prefetches: u64,
    /// Device copies dropped under a GPU's memory limit, and those written back first.
    evictions: u64,
    written_back: u64,
    /// The most bytes of copies one GPU held at once.
    device_peak_bytes: u64,
}

#[derive(Serialize)]
struct TraceOut {
    path: Option<PathBuf>,
    bytes: u64,
    tasks: u64,
    samples: u64,
}

#[derive(Serialize)]
struct EnergyOut<'a> {
    meter: String,
    /// The CPU frequency's source (`cpu-frequency`'s description), or why there is none.
    frequency: String,
    simulated: bool,
    period_ms: f64,
    sampler: SamplerJson,
    backends: &'a [taskwatt::energy::BackendStatus],
}

#[derive(Serialize)]
struct SamplerJson {
    samples: u64,
    reads: u64,
    overruns: u64,
    read_errors: u64,
    /// Readings the workers took between their tasks (energy/src/sampler.rs).
    worker_readings: u64,
    /// Deadlines left unread while no task ran (the thread then reads every 8 ms).
    idle_skipped: u64,
    /// The sampling's CPU time in % of one core: the thread's and the workers' readings.
    cpu_percent: Option<f64>,
}

impl From<&SamplerStats> for SamplerJson {
    fn from(s: &SamplerStats) -> Self {
        SamplerJson {
            samples: s.samples,
            reads: s.reads,
            overruns: s.overruns,
            read_errors: s.read_errors,
            worker_readings: s.worker_readings,
            idle_skipped: s.idle_skipped,
            cpu_percent: s.cpu_percent_of_one_core(),
        }
    }
}

pub(crate) fn run(a: RunArgs) -> CliResult {
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
    if let Some(p) = &a.platform {
        return run_on_platform(&a, p);
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
            save_energy_model(&a, &att);
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
        report::emit_svg_only(trace, att, dir)?;
    }
    // The results above stand; a trace that could not be written (a full disk) is still
    // an error.
    run.trace
        .map(drop)
        .map_err(|e| format!("the run completed, but its trace could not be written: {e}").into())
}

fn one_gamma(g: &[f64]) -> Result<Option<f64>, String> {
    match g {
        [] => Ok(None),
        [x] => Ok(Some(*x)),
        _ => Err("run takes one --gamma; `taskwatt compare --gamma a,b,c` sweeps several".into()),
    }
}

/// Saves the run's fitted energy model beside the performance models, for dmdae (types
/// by codelet-arch only); a failure is a note on stderr, not the run's error.
fn save_energy_model(a: &RunArgs, att: &taskwatt::energy::attribution::Attribution) {
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
            f.model.save(&path).map_err(|e| e.to_string())
        });
    if let Err(e) = saved {
        eprintln!(
            "note: the run's energy model was not saved to {}: {e}",
            path.display()
        );
    }
}

/// The error of a run stopped by a signal, naming what the trace keeps.
pub(crate) fn interrupted(watch: &SignalWatch, e: &SessionError, kept: bool) -> Interrupted {
    let signal = watch.received().unwrap_or(signal_hook::consts::SIGINT);
    let message = if kept {
        format!("{e}; `taskwatt report` reads it")
    } else {
        "the run was interrupted (no --trace was given, so nothing was kept)".to_string()
    };
    Interrupted { signal, message }
}

fn output<'a>(a: &RunArgs, run: &'a MeasuredRun) -> RunOutput<'a> {
    RunOutput {
        app: &run.app,
        gflops: run.app.gflops(),
        makespan_s: run.app.makespan.as_secs_f64(),
        policy: &run.policy,
        workers: &run.workers,
        reserved_workers: &run.reserved_workers,
        gpu_backend: run
            .workers
            .iter()
            .any(|w| w.device.is_some())
            .then(|| a.app.gpu_backend.into()),
        kernels: taskwatt::kernels::backend(),
        type_calibration_auto: run.auto_calibration.as_ref(),
        stats: StatsJson {
            submitted: run.stats.submitted,
            executed: run.stats.executed,
            failed: run.stats.failed,
            cancelled: run.stats.cancelled,
            transfers: run.stats.transfers,
            transferred_bytes: run.stats.transferred_bytes,
            prefetches: run.stats.prefetches,
            evictions: run.stats.evictions,
            written_back: run.stats.written_back,
            device_peak_bytes: run.stats.device_peak_bytes,
        },
        trace: match &run.trace {
            Ok(t) => TraceOut {
                path: a.trace.clone(),
                bytes: t.bytes,
                tasks: t.tasks,
                samples: t.samples,
            },
            Err(_) => TraceOut {
                path: None,
                bytes: 0,
                tasks: 0,
                samples: 0,
            },
        },
        energy: run.sampler.as_ref().map(|s| EnergyOut {
            meter: run
                .meters
                .iter()
                .filter(|b| b.used && b.backend != FREQUENCY_STATUS)
                .map(|b| b.backend.clone())
                .collect::<Vec<_>>()
                .join("+"),
            frequency: run
                .meters
                .iter()
                .find(|b| b.backend == FREQUENCY_STATUS)
                .map_or_else(String::new, |b| {
                    if b.used {
                        b.description.clone().unwrap_or_default()
                    } else {
                        format!("not sampled: {}", b.reason.clone().unwrap_or_default())
                    }
                }),
            simulated: run.simulated,
            period_ms: a.energy.period.as_secs_f64() * 1e3,
            sampler: s.into(),
            backends: &run.meters,
        }),
    }
}

/// The status row `detect` gives the CPU frequency's source (not a meter).
const FREQUENCY_STATUS: &str = "cpu-frequency";

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

fn print_table(o: &RunOutput<'_>) {
    let c = &o.app.config;
    let shape = match o.app.app {
        App::Stencil => format!("n={} tile={} steps={}", c.n, c.tile, c.steps),
        _ if c.tile > 0 && !c.n.is_multiple_of(c.tile) => format!(
            "n={} tile={} (padded to {}: its work is in the makespan, not in the GFlop/s)",
            c.n,
            c.tile,
            c.n.div_ceil(c.tile) * c.tile
        ),
        _ => format!("n={} tile={}", c.n, c.tile),
    };
    let gpus = o.workers.iter().filter(|w| w.device.is_some()).count();
    let reserved = o.reserved_workers.len();
    let cpus = o.workers.len() - gpus - reserved;
    let mut workers = if gpus == 0 {
        format!("{cpus} worker{}", if cpus == 1 { "" } else { "s" })
    } else {
        format!(
            "{cpus} CPU workers + {gpus} {}",
            match o.gpu_backend {
                Some(taskwatt::runtime::GpuBackend::Cuda) => "CUDA GPU(s)",
                _ => "emulated GPU(s) (CPU kernels on copies of the data)",
            }
        )
    };
    if reserved > 0 {
        workers += &format!(
            " (+{reserved} reserved on the free cores for type calibration: no graph task \
             ran there)"
        );
    }
    println!(
        "{} {shape}: {workers}, policy {}, kernels {}",
        o.app.app.name(),
        o.policy,
        o.kernels
    );
    // Milliseconds below a second: a small run's "0.000 s" said nothing.
    if o.makespan_s < 1.0 {
        println!("  {:<10} {:.3} ms", "makespan", o.makespan_s * 1e3);
    } else {
        println!("  {:<10} {:.3} s", "makespan", o.makespan_s);
    }
    println!("  {:<10} {}", "tasks", o.app.tasks);
    if gpus > 0 {
        println!(
            "  {:<10} {} copies between memory nodes, {:.1} MiB",
            "transfers",
            o.stats.transfers,
            o.stats.transferred_bytes as f64 / (1u64 << 20) as f64
        );
        println!(
            "  {:<10} {} copies made ahead of their task; {} evictions, {} written back",
            "", o.stats.prefetches, o.stats.evictions, o.stats.written_back
        );
    }
    println!("  {:<10} {:.2}", "GFlop/s", o.gflops);
    match &o.app.check {
        Some(ch) => println!(
            "  {:<10} {} = {:.2e} <= {:.2e}: {}",
            "check",
            ch.what,
            ch.value,
            ch.tolerance,
            if ch.passed { "ok" } else { "FAILED" }
        ),
        None => println!("  {:<10} skipped", "check"),
    }
    if let Some(e) = &o.energy {
        let idle = if e.sampler.idle_skipped > 0 {
            format!(
                "; {} deadline(s) left unread while no task ran",
                e.sampler.idle_skipped
            )
        } else {
            String::new()
        };
        let cost = e
            .sampler
            .cpu_percent
            .map_or(String::new(), |p| format!(", {p:.2} % of a core"));
        println!(
            "  {:<10} {}{} every {} ms: {} samples ({} of {} readings taken by the workers \
             between tasks{idle}), {} read errors{cost}",
            "energy",
            e.meter,
            if e.simulated { " (SIMULATED)" } else { "" },
            e.period_ms,
            e.sampler.samples,
            e.sampler.worker_readings,
            e.sampler.reads,
            e.sampler.read_errors
        );
        // A few are expected where the workers take the readings: an idle spell's first
        // deadlines (energy/src/sampler.rs). Worth a line from 1 % of the deadlines on.
        if e.sampler.overruns * 100 > e.sampler.reads + e.sampler.overruns {
            println!(
                "  {:<10} {} reading(s) skipped: none was taken at their deadline (the sampler \
                 thread woke late on a loaded machine or with a period too short for it, or \
                 the workers that were taking the readings went idle); each reading keeps its \
                 own time, so the attribution is not biased, only given fewer intervals",
                "", e.sampler.overruns
            );
        }
        if !e.frequency.is_empty() {
            println!("  {:<10} {}", "frequency", e.frequency);
        }
        let real: Vec<&str> = e
            .backends
            .iter()
            .filter(|b| b.used && !b.simulated && b.backend != FREQUENCY_STATUS)
            .map(|b| b.backend.as_str())
            .collect();
        if e.simulated && real.is_empty() {
            println!(
                "  {:<10} no real energy sensor was used: `taskwatt meters` says why",
                ""
            );
        } else if e.simulated {
            println!(
                "  {:<10} measured by {}; the other domains are simulated (`taskwatt meters` \
                 says why)",
                "",
                real.join(" and ")
            );
        }
    } else {
        println!("  {:<10} not sampled", "energy");
    }
    if let Some(auto) = o.type_calibration_auto {
        let rounds: Vec<String> = auto
            .rounds
            .iter()
            .map(|(types, s)| format!("{} ({s:.2} s)", types.join("+")))
            .collect();
        println!(
            "  {:<10} auto, {:.2} s: {}; {}",
            "calibrated",
            auto.spent_s,
            if rounds.is_empty() {
                "nothing needed".to_owned()
            } else {
                rounds.join(", ")
            },
            if auto.still_flagged.is_empty() {
                "every type precise".to_owned()
            } else {
                // Not "imprecise": the report may show them as measurements, within its
                // threshold; calibration aims tighter.
                format!(
                    "not yet within the calibration's target ({} times the report's \
                     threshold): {}",
                    taskwatt::session::CALIBRATION_TARGET,
                    auto.still_flagged.join(", ")
                )
            }
        );
        if let Some(e) = &auto.error {
            println!("  {:<10} stopped: {e}", "");
        }
    }
    if let Some(p) = &o.trace.path {
        println!(
            "  {:<10} {} ({} tasks, {} energy samples, {:.1} KiB)",
            "trace",
            p.display(),
            o.trace.tasks,
            o.trace.samples,
            o.trace.bytes as f64 / 1024.0
        );
    }
}

/// `run --platform`: the app runs here once to check its result and time its kernels
/// (lws, --workers CPU workers, no meter), then its graph is simulated on the platform.
fn run_on_platform(a: &RunArgs, platform: &str) -> CliResult {
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
            super::simulate::render_rows(&platform, &trace, &rows, model.is_some(), !a.no_energy);
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

/// `run --platform --no-exec`: each task of a recording whose tasks did nothing gets its
/// codelet's mean duration (on a CPU, at its footprint) from the performance models.
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
