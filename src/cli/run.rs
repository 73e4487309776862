//! `taskwatt run <app>`: runs a built-in app with the energy sampler on the best available
//! meter, checks the result, writes the trace, and prints the run (makespan, tasks,
//! GFlop/s) and the energy attribution report, as tables or as JSON (`--json`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use taskwatt::apps::{App, AppConfig, AppRun, Precision};
use taskwatt::energy::attribution::attribute_trace;
use taskwatt::energy::{DetectOptions, MeterChoice, SamplerStats};
use taskwatt::runtime::Runtime;
use taskwatt::session::{
    measured_run, MeasuredRun, MeasuredRunOptions, SessionError, StopSignal, TypeCalibration,
};
use taskwatt::traces::{read_trace, WorkerInfo};

use super::report::{self, AttributionArgs};
use super::signals::{Interrupted, SignalWatch};
use super::{parse_duration, CliResult};

/// The app and its problem (shared by `run` and `compare`).
#[derive(Args, Debug, Clone)]
pub(crate) struct AppArgs {
    /// The app to run.
    #[arg(value_enum)]
    pub(crate) app: App,
    /// Matrix or grid order.
    #[arg(long, default_value_t = 4096)]
    pub(crate) n: usize,
    /// Tile order.
    #[arg(long, default_value_t = 256)]
    pub(crate) tile: usize,
    /// Time steps (stencil).
    #[arg(long, default_value_t = 20)]
    pub(crate) steps: usize,
    /// Seed of the generated input.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Skip the result check.
    #[arg(long)]
    pub(crate) no_check: bool,
    /// Run the app this many times back to back (fresh input each time; at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub(crate) iterations: usize,
    /// Number of workers (default: one per usable core).
    #[arg(long)]
    pub(crate) workers: Option<usize>,
    /// Do not record task durations into the performance models (`taskwatt perfmodel`).
    #[arg(long)]
    pub(crate) no_perfmodel: bool,
    /// The performance models' directory (default: $TASKWATT_PERFMODEL_DIR, else
    /// $XDG_CACHE_HOME/taskwatt/perfmodels, else ~/.cache/taskwatt/perfmodels).
    #[arg(long, value_name = "DIR")]
    pub(crate) perfmodel_dir: Option<PathBuf>,
    /// GPUs to drive besides the CPU workers (at most 3), on the backend of --gpu-backend.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=taskwatt::runtime::MAX_DEVICES as i64))]
    pub(crate) gpus: u32,
    /// The GPU backend: `emulated`, a device in main memory whose copies of the data are
    /// separate allocations and which runs the CPU kernels (to test scheduling, data
    /// transfers and GPU energy attribution without a GPU; its timings are CPU timings);
    /// or `cuda`, NVIDIA GPUs 0..N through CUDA and cuBLAS (a build with `--features
    /// cuda`; the driver and cuBLAS are loaded at run time).
    #[arg(long, value_enum, default_value_t = GpuBackend::Emulated)]
    pub(crate) gpu_backend: GpuBackend,
    /// dmdae's energy model (from `taskwatt fit`); without it, dmdae uses the model the
    /// last measured run of the same app saved beside the performance models
    /// (energy-model-<app>.json), and without that it places tasks as dmda, and says so.
    #[arg(long, value_name = "FILE")]
    pub(crate) energy_model: Option<PathBuf>,
    /// dmdae's weight of the expected completion time (TASKWATT_SCHED_ALPHA; default 1).
    #[arg(long)]
    pub(crate) alpha: Option<f64>,
    /// dmdae's weight of the copies' time (TASKWATT_SCHED_BETA; default 1).
    #[arg(long)]
    pub(crate) beta: Option<f64>,
    /// dmdae: µs a joule is worth (TASKWATT_SCHED_GAMMA; default 1000, as StarPU's).
    /// `compare` takes a list (`--gamma 0,1000,100000`) and runs dmdae at each, beside
    /// its --policies, for the energy/makespan (Pareto) plot.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub(crate) gamma: Vec<f64>,
    /// dmdae: the power of workers kept waiting, W (TASKWATT_SCHED_IDLE_POWER; default 0).
    #[arg(long, value_name = "W")]
    pub(crate) idle_power: Option<f64>,
    /// Element type of the matrices: f64 or f32 (cholesky and gemm; stencil is f64 only).
    #[arg(long, value_enum, default_value_t = Precision::F64)]
    pub(crate) precision: Precision,
}

/// Where `--gpus` come from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GpuBackend {
    /// Emulated devices (see `RuntimeBuilder::emulated_gpus`).
    Emulated,
    /// NVIDIA GPUs through CUDA (a build with `--features cuda`).
    Cuda,
}

impl From<GpuBackend> for taskwatt::runtime::GpuBackend {
    fn from(b: GpuBackend) -> Self {
        match b {
            GpuBackend::Emulated => taskwatt::runtime::GpuBackend::Emulated,
            GpuBackend::Cuda => taskwatt::runtime::GpuBackend::Cuda,
        }
    }
}

/// Whether `policy`, or TASKWATT_SCHED when `None`, is dmdae.
fn is_dmdae(policy: Option<&str>) -> bool {
    policy
        .map(str::to_string)
        .or_else(|| std::env::var(taskwatt::scheduler::SCHED_ENV).ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("dmdae"))
}

/// Prints `msg` on stderr the first time only (a `compare` calls for dmdae's powers once
/// per run: ten runs printed the same line ten times).
fn note_once(msg: String) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if !seen.contains(&msg) {
        eprintln!("{msg}");
        seen.push(msg);
    }
}

impl AppArgs {
    /// dmdae's weights: its defaults, then TASKWATT_SCHED_ALPHA and the rest, then
    /// --alpha, --beta, `gamma` (one of --gamma's) and --idle-power; each checked, an error
    /// naming the flag or the variable. Given to the policy typed (the environment is
    /// never written), so that every run gets the weights it names.
    /// Other policies (`policy`, or TASKWATT_SCHED when `None`) get none.
    pub(crate) fn policy_options(
        &self,
        policy: Option<&str>,
        gamma: Option<f64>,
    ) -> Result<taskwatt::scheduler::PolicyOptions, Box<dyn std::error::Error>> {
        if !is_dmdae(policy) {
            return Ok(Default::default());
        }
        let mut w = taskwatt::scheduler::EnergyWeights::from_env()?;
        for (flag, v, field) in [
            ("--alpha", self.alpha, &mut w.alpha),
            ("--beta", self.beta, &mut w.beta),
            ("--gamma", gamma, &mut w.gamma),
            ("--idle-power", self.idle_power, &mut w.idle_power_w),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(format!("{flag} {v}: give a finite, non-negative number").into());
                }
                *field = v;
            }
        }
        Ok(taskwatt::scheduler::PolicyOptions::dmdae(w))
    }

    /// dmdae's task powers, when `policy` is dmdae: from --energy-model, else from the
    /// last run's model beside the performance models; none otherwise (and a note on
    /// stderr).
    pub(crate) fn task_powers(
        &self,
        policy: Option<&str>,
    ) -> Result<taskwatt::session::TaskPowers, Box<dyn std::error::Error>> {
        if !is_dmdae(policy) {
            return Ok(Vec::new());
        }
        let path = match (&self.energy_model, self.perf_models()?) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(dir)) => {
                Some(dir.join(taskwatt::session::run_energy_model(self.app))).filter(|p| p.exists())
            }
            (None, None) => None,
        };
        let Some(path) = path else {
            note_once(
                "dmdae: no energy model (give --energy-model, or run once with energy \
                 sampling to save one beside the performance models): tasks are placed as \
                 dmda places them"
                    .to_owned(),
            );
            return Ok(Vec::new());
        };
        let model = taskwatt::energy::attribution::EnergyModel::load(&path)?;
        let powers = taskwatt::session::task_powers_of(&model);
        if powers.is_empty() {
            note_once(format!(
                "dmdae: the model {} has no codelet@arch types (fit it with --key \
                 codelet-arch): tasks are placed as dmda places them",
                path.display()
            ));
        } else {
            note_once(format!(
                "dmdae: task powers from {} ({} codelet/architecture pairs)",
                path.display(),
                powers.len()
            ));
        }
        Ok(powers)
    }

    /// Where to record the performance models, if at all.
    pub(crate) fn perf_models(&self) -> Result<Option<PathBuf>, Box<dyn std::error::Error>> {
        if self.no_perfmodel {
            return Ok(None);
        }
        Ok(Some(match &self.perfmodel_dir {
            Some(d) => d.clone(),
            None => taskwatt::runtime::PerfModels::default_dir()?,
        }))
    }

    pub(crate) fn config(&self) -> AppConfig {
        AppConfig {
            n: self.n,
            tile: self.tile,
            steps: self.steps,
            seed: self.seed,
            check: !self.no_check,
            iterations: self.iterations,
            precision: self.precision,
        }
    }
}

/// How energy is measured (shared by `run` and `compare`).
#[derive(Args, Debug, Clone)]
pub(crate) struct EnergyArgs {
    /// Energy meter: auto (RAPL perf_event, then RAPL powercap, then NVML for GPUs, then
    /// the simulated meter), rapl-perf, rapl-powercap, nvml or sim.
    #[arg(long, default_value = "auto")]
    pub(crate) meter: MeterChoice,
    /// Sampling period of the energy meters (1ms to 1s).
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub(crate) period: Duration,
    /// Sample the meters with every worker parked for this long before and after the
    /// graph, to pin the base power (e.g. 1s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) idle_calibration: Option<Duration>,
    /// Run the app's task types alone (on one worker, then on every worker), so that types
    /// that co-run in fixed proportion, and a type's power alone from its power beside
    /// others, can be separated: a duration (e.g. 300ms) runs each type that long before
    /// the graph; `auto` (or `auto:5s`, a budget) calibrates after the graph only the types
    /// whose power alone the fit could not pin down, until their 95% intervals are within
    /// 0.4 x --measured-within or the budget (default 10s) is spent.
    #[arg(long, value_parser = parse_type_calibration)]
    pub(crate) type_calibration: Option<TypeCalibration>,
    /// The simulated meter's configuration (TOML or JSON), holding only what it changes
    /// from the embedded default (energy/src/sim/default.toml: a contended machine; a file
    /// with `profile = "ideal"` gives the linear model).
    #[arg(long)]
    pub(crate) sim_config: Option<PathBuf>,
}

fn parse_type_calibration(s: &str) -> Result<TypeCalibration, String> {
    let Some(rest) = s.strip_prefix("auto") else {
        return parse_duration(s).map(TypeCalibration::Fixed);
    };
    let mut auto = TypeCalibration::auto();
    if let Some(b) = rest.strip_prefix(':') {
        let budget = parse_duration(b)?;
        if let TypeCalibration::Auto {
            budget: ref mut x, ..
        } = auto
        {
            *x = budget;
        }
    } else if !rest.is_empty() {
        return Err(format!(
            "`{s}`: give a duration (300ms), `auto` or `auto:<budget>` (auto:5s)"
        ));
    }
    Ok(auto)
}

impl EnergyArgs {
    pub(crate) fn detect_options(&self) -> Result<DetectOptions, Box<dyn std::error::Error>> {
        let mut detect = DetectOptions::default();
        if let Some(p) = &self.sim_config {
            detect.sim = taskwatt::energy::SimConfig::from_file(p)?;
        }
        Ok(detect)
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Scheduling policy: eager, ws, lws, prio, dmda, dmdas or dmdae (the dmda family reads
    /// the performance models, a first run calibrating them; dmdae also weighs each
    /// worker's energy by the energy model, `--gamma`).
    #[arg(long, env = "TASKWATT_SCHED")]
    sched: Option<String>,
    /// Write the trace to this file (.twt); default: a temporary file, removed after.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Task records per worker trace buffer (default 4096, at most 1048576): a worker sends
    /// its buffer when full, when it parks, and at least every 25 ms of its own tasks.
    #[arg(long, value_name = "RECORDS", value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    trace_chunk: Option<u32>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    energy: EnergyArgs,
    /// Do not sample energy at all.
    #[arg(long)]
    no_energy: bool,
    /// Do not print the energy attribution report.
    #[arg(long)]
    no_report: bool,
    /// Write the report's SVG plots into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Run on a platform you do not have, in virtual time: the app runs here once (lws,
    /// --workers) so that its result is checked and its kernels timed, then its graph is
    /// simulated on the platform (a file or a built-in name, see `taskwatt simulate`)
    /// under --sched, with the platform's simulated meters; --trace gets the simulated
    /// run, which every output marks as simulated.
    #[arg(long, value_name = "FILE|NAME")]
    platform: Option<String>,
    /// With --platform: execute no kernel. The app's graph is recorded by a run whose tasks
    /// do nothing (no result, no check), and each task's duration is its codelet's mean in
    /// the performance models of earlier runs (`taskwatt run APP` records them).
    #[arg(long, requires = "platform")]
    no_exec: bool,
    /// One rank of a distributed run under mpirun (a build with `--features mpi`):
    /// `mpirun -np 4 taskwatt run cholesky --mpi`. The app's tiles are distributed 2D
    /// block-cyclic; every rank writes its own trace (`--trace t.twt` gives
    /// `t.rank0.twt`, ...), which `taskwatt merge` joins (docs/mpi.md).
    #[arg(long)]
    mpi: bool,
    #[command(flatten)]
    attribution: AttributionArgs,
}

/// What `run --mpi` reads (src/cli/mpi.rs).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
impl RunArgs {
    pub(crate) fn app_config(&self) -> taskwatt::apps::AppConfig {
        self.app.config()
    }
    pub(crate) fn app(&self) -> App {
        self.app.app
    }
    pub(crate) fn app_name(&self) -> &'static str {
        self.app.app.name()
    }
    pub(crate) fn sched(&self) -> Option<&str> {
        self.sched.as_deref()
    }
    pub(crate) fn workers(&self) -> Option<usize> {
        self.app.workers
    }
    pub(crate) fn trace_path(&self) -> Option<&std::path::Path> {
        self.trace.as_deref()
    }
    pub(crate) fn json_output(&self) -> bool {
        self.json
    }
    pub(crate) fn energy_args(&self) -> &EnergyArgs {
        &self.energy
    }
    pub(crate) fn no_energy_flag(&self) -> bool {
        self.no_energy
    }

    /// The flags given that `run --mpi` does not honour (each rank's run is the MPI app of
    /// src/cli/mpi.rs).
    fn flags_mpi_ignores(&self) -> Vec<&'static str> {
        let a = &self.app;
        let e = &self.energy;
        [
            (a.iterations != 1, "--iterations"),
            (a.no_check, "--no-check"),
            (a.no_perfmodel, "--no-perfmodel"),
            (a.perfmodel_dir.is_some(), "--perfmodel-dir"),
            (a.gpus != 0, "--gpus"),
            (a.gpu_backend != GpuBackend::Emulated, "--gpu-backend"),
            (self.trace_chunk.is_some(), "--trace-chunk"),
            (self.no_report, "--no-report"),
            (self.svg.is_some(), "--svg"),
            (self.platform.is_some(), "--platform"),
            (e.idle_calibration.is_some(), "--idle-calibration"),
            (e.type_calibration.is_some(), "--type-calibration"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }
}

#[derive(Serialize)]
struct RunOutput<'a> {
    app: &'a AppRun,
    gflops: f64,
    makespan_s: f64,
    policy: &'a str,
    workers: &'a [WorkerInfo],
    /// What drives the GPU workers (`emulated` or `cuda`; emulated when there are none).
    gpu_backend: taskwatt::runtime::GpuBackend,
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
}

impl From<&SamplerStats> for SamplerJson {
    fn from(s: &SamplerStats) -> Self {
        SamplerJson {
            samples: s.samples,
            reads: s.reads,
            overruns: s.overruns,
            read_errors: s.read_errors,
        }
    }
}

/// Shows tasks done / submitted on stderr while the graph runs (hidden when stderr is
/// not a terminal).
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub(crate) fn start(rt: &Runtime, label: String) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} tasks {per_sec}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(label);
        let stats = rt.stats_probe();
        // Count the application's tasks only: what ran before (calibration) is not its.
        let before = stats();
        let (sub0, done0) = (
            before.submitted,
            before.executed + before.failed + before.cancelled,
        );
        bar.reset_elapsed();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let st = stats();
                bar.set_length(st.submitted.saturating_sub(sub0));
                bar.set_position((st.executed + st.failed + st.cancelled).saturating_sub(done0));
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn run(a: RunArgs) -> CliResult {
    a.app.config().validate(a.app.app)?;
    refuse_trace_over_inputs(&a)?;
    if a.mpi {
        let ignored = a.flags_mpi_ignores();
        if !ignored.is_empty() {
            return Err(format!(
                "run --mpi does not take {}: a distributed run has CPU workers only, no \
                 performance models, no report (merge the ranks' traces with `taskwatt \
                 merge`, then `taskwatt report`) and always checks its result; drop them \
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
                report::sensor_check(trace, att, &a.attribution.options())?
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

/// No file the run writes may name (or link to) a file it reads (the energy model, the sim
/// config, a platform file) or another file it writes. Its outputs: `--trace` (each rank's
/// under `--mpi`), the plots of `--svg`, and the performance models' directory (models.json,
/// bus.json and the saved energy model). Checked before anything runs, so nothing is
/// overwritten. The saved energy model is the one exception: where it is the `--energy-model`
/// the run reads, the run does not save over it (`save_energy_model` says so).
fn refuse_trace_over_inputs(a: &RunArgs) -> CliResult {
    let platform = a
        .platform
        .as_deref()
        .map(std::path::Path::new)
        .filter(|p| p.is_file());
    let inputs: Vec<&std::path::Path> = [
        a.app.energy_model.as_deref(),
        a.energy.sim_config.as_deref(),
        platform,
    ]
    .into_iter()
    .flatten()
    .collect();
    // The performance models' files: outputs over the sim config and platform, and over the
    // trace (written at the end, then models.json over it at shutdown, or the reverse).
    let perf_files = if a.mpi {
        Vec::new()
    } else {
        perf_dir_outputs(&a.app)?
    };
    let not_model: Vec<&std::path::Path> = [a.energy.sim_config.as_deref(), platform]
        .into_iter()
        .flatten()
        .collect();
    for f in &perf_files {
        taskwatt::traces::refuse_output_over_input(f, &not_model)?;
    }
    if let Some(trace) = &a.trace {
        taskwatt::traces::refuse_output_over_input(trace, &inputs)?;
        let perf: Vec<&std::path::Path> = perf_files.iter().map(PathBuf::as_path).collect();
        taskwatt::traces::refuse_output_over_input(trace, &perf).map_err(|_| {
            format!(
                "--trace {} is a file of the performance models' directory, which the run \
                 rewrites at its end: give another path (or --perfmodel-dir elsewhere)",
                trace.display()
            )
        })?;
        if a.mpi {
            // Each rank writes `stem.rankN.ext`: none of them may be an input.
            for input in &inputs {
                if let Some(r) = rank_of(trace, input) {
                    return Err(format!(
                        "--trace {} under --mpi writes rank {r}'s trace to {}, an input of \
                         the run: give another --trace",
                        trace.display(),
                        input.display()
                    )
                    .into());
                }
            }
        }
    }
    if let Some(dir) = &a.svg {
        super::refuse_dir_over_inputs(dir, "--svg", &[], Some("svg"), &inputs)?;
    }
    Ok(())
}

/// The rank whose trace, for `--trace trace --mpi`, is `input` (`stem.rankN.ext` beside it).
fn rank_of(trace: &std::path::Path, input: &std::path::Path) -> Option<usize> {
    let stem = trace.file_stem()?.to_str()?;
    let ext = trace.extension().map_or(Some("twt"), |e| e.to_str())?;
    let name = input.file_name()?.to_str()?;
    let r: usize = name
        .strip_prefix(stem)?
        .strip_prefix(".rank")?
        .strip_suffix(ext)?
        .strip_suffix('.')?
        .parse()
        .ok()?;
    let parent = |p: &std::path::Path| {
        let d = p.parent().filter(|d| !d.as_os_str().is_empty());
        d.unwrap_or(std::path::Path::new(".")).canonicalize().ok()
    };
    (parent(trace)? == parent(input)?).then_some(r)
}

/// The files a run (or a compare) writes into the performance models' directory, if it
/// records them: models.json, bus.json and the saved energy model of its app.
pub(crate) fn perf_dir_outputs(app: &AppArgs) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    Ok(match app.perf_models()? {
        Some(d) => vec![
            d.join("models.json"),
            d.join("bus.json"),
            d.join(taskwatt::session::run_energy_model(app.app)),
        ],
        None => Vec::new(),
    })
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
        .and_then(|f| f.model.save(&path).map_err(|e| e.to_string()));
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
        gpu_backend: a.app.gpu_backend.into(),
        kernels: taskwatt::kernels::backend(),
        type_calibration_auto: run.auto_calibration.as_ref(),
        stats: StatsJson {
            submitted: run.stats.submitted,
            executed: run.stats.executed,
            failed: run.stats.failed,
            cancelled: run.stats.cancelled,
            transfers: run.stats.transfers,
            transferred_bytes: run.stats.transferred_bytes,
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
        _ => format!("n={} tile={}", c.n, c.tile),
    };
    let gpus = o.workers.iter().filter(|w| w.device.is_some()).count();
    let workers = if gpus == 0 {
        format!("{} workers", o.workers.len())
    } else {
        format!(
            "{} CPU workers + {gpus} {}",
            o.workers.len() - gpus,
            match o.gpu_backend {
                taskwatt::runtime::GpuBackend::Emulated =>
                    "emulated GPU(s) (CPU kernels on copies of the data)",
                taskwatt::runtime::GpuBackend::Cuda => "CUDA GPU(s)",
            }
        )
    };
    println!(
        "{} {shape}: {workers}, policy {}, kernels {}",
        o.app.app.name(),
        o.policy,
        o.kernels
    );
    println!("  {:<10} {:.3} s", "makespan", o.makespan_s);
    println!("  {:<10} {}", "tasks", o.app.tasks);
    if gpus > 0 {
        println!(
            "  {:<10} {} copies between memory nodes, {:.1} MiB",
            "transfers",
            o.stats.transfers,
            o.stats.transferred_bytes as f64 / (1u64 << 20) as f64
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
        println!(
            "  {:<10} {}{} every {} ms: {} samples, {} read errors",
            "energy",
            e.meter,
            if e.simulated { " (SIMULATED)" } else { "" },
            e.period_ms,
            e.sampler.samples,
            e.sampler.read_errors
        );
        if e.sampler.overruns > 0 {
            println!(
                "  {:<10} {} reading(s) skipped: the sampler thread woke after their deadline \
                 (a loaded machine, or a period too short for it); each reading keeps its own \
                 time, so the attribution is not biased, only given fewer intervals",
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
                format!("still imprecise: {}", auto.still_flagged.join(", "))
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
                 check); task durations from the performance models",
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
            r.end = taskwatt::traces::Timestamp(r.start.as_ns() + p.mean_ns.max(0.0) as u64);
        }
    }
    Ok(())
}
