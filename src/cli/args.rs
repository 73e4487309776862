//! The argument groups `run` and `compare` share: the app and its runtime (`AppArgs`)
//! and how energy is measured (`EnergyArgs`), with what they decide from the flags.
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use taskwatt::apps::{App, AppConfig, Precision};
use taskwatt::energy::{DetectOptions, MeterChoice};
use taskwatt::session::TypeCalibration;

use super::parse_duration;
use super::report::AttributionArgs;

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
    /// Number of workers (default: one per usable CPU, that is per hardware thread).
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
    #[arg(long, value_enum, default_value_t = GpuBackendArg::Emulated)]
    pub(crate) gpu_backend: GpuBackendArg,
    /// The most each GPU holds (e.g. `64MiB`; default: $TASKWATT_GPU_MEMORY_LIMIT, else
    /// 90 % of a CUDA device's memory, and no limit for an emulated one). Past it, copies
    /// are evicted, least recently used first, and the only valid ones written back.
    #[arg(long, value_name = "SIZE", value_parser = taskwatt::runtime::parse_size)]
    pub(crate) gpu_memory_limit: Option<u64>,
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
pub(crate) enum GpuBackendArg {
    /// Emulated devices (see `RuntimeBuilder::emulated_gpus`).
    Emulated,
    /// NVIDIA GPUs through CUDA (a build with `--features cuda`).
    Cuda,
}

impl From<GpuBackendArg> for taskwatt::runtime::GpuBackend {
    fn from(b: GpuBackendArg) -> Self {
        match b {
            GpuBackendArg::Emulated => taskwatt::runtime::GpuBackend::Emulated,
            GpuBackendArg::Cuda => taskwatt::runtime::GpuBackend::Cuda,
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
            // `run --sched lws --gamma 1000` ran lws without a word about the gamma.
            let given: Vec<&str> = [
                ("--alpha", self.alpha),
                ("--beta", self.beta),
                ("--gamma", gamma),
                ("--idle-power", self.idle_power),
            ]
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(f, _)| *f)
            .collect();
            if !given.is_empty() {
                note_once(format!(
                    "note: {} weigh(s) dmdae's choices only: ignored under {}",
                    given.join(", "),
                    policy.unwrap_or("the policy TASKWATT_SCHED names")
                ));
            }
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

    /// Whether dmdae would find an energy model: --energy-model, or one saved beside the
    /// performance models by an earlier measured run of the app.
    pub(crate) fn has_energy_model(&self) -> Result<bool, Box<dyn std::error::Error>> {
        Ok(self.energy_model.is_some()
            || self.perf_models()?.is_some_and(|dir| {
                dir.join(taskwatt::session::run_energy_model(self.app))
                    .exists()
            }))
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
        let mut powers = taskwatt::session::task_powers_of(&model);
        // Only the app's own codelets count: a model of another app (cholesky's for gemm)
        // was taken, and every gamma then ran as dmda while the sweep looked like a finding.
        let own = self.app.codelets();
        let lacking: Vec<&str> = own
            .iter()
            .copied()
            .filter(|c| !powers.iter().any(|(n, _, _)| n.eq_ignore_ascii_case(c)))
            .collect();
        if lacking.len() == own.len() {
            powers.clear();
            note_once(format!(
                "dmdae: the model {} has no power for {}'s codelets ({}): it is another \
                 app's, or fitted with another key; tasks are placed as dmda places them",
                path.display(),
                self.app.name(),
                own.join(", ")
            ));
            return Ok(powers);
        }
        if !lacking.is_empty() {
            note_once(format!(
                "dmdae: the model {} has no power for {}: their tasks count as drawing none",
                path.display(),
                lacking.join(", ")
            ));
        }
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
            // A model whose fit could not pin some powers down (collinear, held at 0,
            // few tasks) places by them all the same: said, not silent.
            let flagged: Vec<String> = model
                .domains
                .iter()
                .flat_map(|d| d.types.iter())
                .filter(|t| !t.power.reliable)
                .map(|t| t.key.to_string())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if !flagged.is_empty() {
                note_once(format!(
                    "dmdae: the model's powers for {} are flagged, not measurements (its fit \
                     could not pin them down: `taskwatt report` on the run it was fitted on \
                     says why); dmdae places by them all the same. Fit on a run with type \
                     calibration for powers it can rest on",
                    flagged.join(", ")
                ));
            }
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

/// The files every run (and every run of a compare) writes into the performance models'
/// directory, if it records them: models.json and bus.json.
pub(crate) fn perf_dir_outputs(app: &AppArgs) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    Ok(match app.perf_models()? {
        Some(d) => vec![d.join("models.json"), d.join("bus.json")],
        None => Vec::new(),
    })
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) app: AppArgs,
    /// Scheduling policy: eager, ws, lws, prio, dmda, dmdas or dmdae (the dmda family reads
    /// the performance models, a first run calibrating them; dmdae also weighs each
    /// worker's energy by the energy model, `--gamma`).
    #[arg(long, env = "TASKWATT_SCHED")]
    pub(crate) sched: Option<String>,
    /// Write the trace to this file (.twt); default: a temporary file, removed after.
    #[arg(long)]
    pub(crate) trace: Option<PathBuf>,
    /// Task records per worker trace buffer (default 4096, at most 1048576): a worker sends
    /// its buffer when full, when it parks, and at least every 25 ms of its own tasks.
    #[arg(long, value_name = "RECORDS", value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub(crate) trace_chunk: Option<u32>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) energy: EnergyArgs,
    /// Do not sample energy at all.
    #[arg(long)]
    pub(crate) no_energy: bool,
    /// Do not print the energy attribution report.
    #[arg(long)]
    pub(crate) no_report: bool,
    /// Write the report's SVG plots into this directory.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// Run on a platform you do not have, in virtual time: the app runs here once (lws,
    /// --workers) so that its result is checked and its kernels timed, then its graph is
    /// simulated on the platform (a file or a built-in name, see `taskwatt simulate`)
    /// under --sched, with the platform's simulated meters; --trace gets the simulated
    /// run, which every output marks as simulated.
    #[arg(long, value_name = "FILE|NAME")]
    pub(crate) platform: Option<String>,
    /// With --platform: execute no kernel. The app's graph is recorded by a run whose tasks
    /// do nothing (no result, no check), and each task's duration is its codelet's mean in
    /// the performance models of earlier runs (`taskwatt run APP` records them).
    #[arg(long, requires = "platform")]
    pub(crate) no_exec: bool,
    /// One rank of a distributed run under mpirun (a build with `--features mpi`):
    /// `mpirun -np 4 taskwatt run cholesky --mpi`. The app's tiles are distributed 2D
    /// block-cyclic; every rank writes its own trace (`--trace t.twt` gives
    /// `t.rank0.twt`, ...), which `taskwatt merge` joins (docs/mpi.md).
    #[arg(long)]
    pub(crate) mpi: bool,
    /// With `--mpi`: each rank caches at most this many MiB of copies of other ranks'
    /// data, dropping its least recently read ones past it and reading them again when
    /// needed (`DistRuntime::set_cache_limit`); default: no limit.
    #[arg(long, value_name = "MIB", requires = "mpi")]
    pub(crate) cache_limit_mib: Option<u64>,
    /// With `--mpi`: each rank's copies of other ranks' data, in flight or cached, take at
    /// most this many MiB: past it, the rank's submission (and so its receives) waits for
    /// copies to be freed (`DistRuntime::set_memory_limit`; it also caps the cache at half of
    /// it unless `--cache-limit-mib` says otherwise); default: no limit.
    #[arg(long, value_name = "MIB", requires = "mpi")]
    pub(crate) memory_limit_mib: Option<u64>,
    #[command(flatten)]
    pub(crate) attribution: AttributionArgs,
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

    /// A policy clap took from `TASKWATT_SCHED` (no `--sched` on the command line) that
    /// is unknown: the error says where the name came from (`TASKWATT_SCHED=dmdaa` said
    /// only "unknown scheduling policy `dmdaa`").
    pub(crate) fn check_sched_from_env(&self) -> Result<(), taskwatt::scheduler::UnknownPolicy> {
        let on_line = std::env::args().any(|x| x == "--sched" || x.starts_with("--sched="));
        match &self.sched {
            Some(name) if !on_line => taskwatt::scheduler::check_policy_name(name)
                .map(drop)
                .map_err(|mut e| {
                    e.source_hint = format!(" (from {})", taskwatt::scheduler::SCHED_ENV);
                    e
                }),
            _ => Ok(()),
        }
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
    pub(crate) fn flags_mpi_ignores(&self) -> Vec<&'static str> {
        let a = &self.app;
        let e = &self.energy;
        [
            (a.iterations != 1, "--iterations"),
            (a.no_perfmodel, "--no-perfmodel"),
            (a.perfmodel_dir.is_some(), "--perfmodel-dir"),
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
