//! The built-in applications that `taskwatt run` runs: tiled Cholesky, tiled GEMM and a
//! 2-D heat stencil. Each builds its task graph on a [`Runtime`], times it from the first
//! submission to the end of `wait_all`, and checks its result.
//!
//! Cholesky and GEMM run in f64 (default) or f32 ([`Precision`]); the stencil is f64 only
//! and refuses f32 with [`AppError::Unsupported`].

pub mod calibrate;
mod cholesky;
pub mod codelets;
#[cfg(feature = "cuda")]
mod cuda;
mod gemm;
mod stencil;

use std::time::Duration;

use serde::Serialize;
use taskwatt_kernels::{KernelError, Scalar};
use taskwatt_runtime::{Runtime, RuntimeError};

/// The error of a run interrupted while its input was generated: the runtime's own
/// (`wait_all` on an interrupted runtime returns it, with nothing run).
pub(crate) fn interrupted_while_generating(rt: &Runtime) -> AppError {
    match rt.wait_all() {
        Err(e) => AppError::Runtime(e),
        Ok(_) => AppError::Runtime(taskwatt_runtime::RuntimeError::Interrupted {
            finished: 0,
            not_run: 0,
        }),
    }
}

/// The most tasks a built-in app's run may submit (over all its iterations): checked
/// before anything is allocated, so that a mistyped size is an error, not a run that
/// grows until memory runs out.
pub const MAX_APP_TASKS: u64 = 1_000_000_000;

/// A built-in application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// Tiled Cholesky factorization (potrf, trsm, syrk, gemm), checked against the input.
    Cholesky,
    /// Tiled matrix product C = A B (gemm_nn), checked by a randomized residual.
    Gemm,
    /// 2-D heat equation, explicit 5-point Jacobi steps on tiles (heat_step), checked
    /// against a sequential run.
    Stencil,
}

impl App {
    /// The app's name.
    pub fn name(self) -> &'static str {
        match self {
            App::Cholesky => "cholesky",
            App::Gemm => "gemm",
            App::Stencil => "stencil",
        }
    }

    /// Whether the app has a type calibration (`--type-calibration`): every built-in app.
    /// Cholesky's four task types run in fixed proportions, and calibration separates
    /// their powers; GEMM and the stencil have one type each, which their graph alone pins
    /// down for the energy, but calibration also shows each type alone and beside others,
    /// which the what-if needs on other worker counts.
    pub fn calibrates(self) -> bool {
        matches!(self, App::Cholesky | App::Gemm | App::Stencil)
    }

    /// The codelet names the app uses (what the energy report will list).
    pub fn codelets(self) -> &'static [&'static str] {
        match self {
            App::Cholesky => &["potrf", "trsm", "syrk", "gemm"],
            App::Gemm => &["gemm_nn"],
            App::Stencil => &["heat_step"],
        }
    }
}

/// The element type an app computes in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Double precision (`f64`), the default.
    #[default]
    F64,
    /// Single precision (`f32`): Cholesky and GEMM only. The flop counts are the same, and
    /// a core does about twice as many f32 flops per second.
    F32,
}

impl Precision {
    /// `"f64"` or `"f32"`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F64 => "f64",
            Precision::F32 => "f32",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Problem parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AppConfig {
    /// Matrix or grid order.
    pub n: usize,
    /// Tile order.
    pub tile: usize,
    /// Time steps (stencil only).
    pub steps: usize,
    /// Seed of the generated input.
    pub seed: u64,
    /// Whether to check the result.
    pub check: bool,
    /// How many times to run the app back to back (fresh input each time), e.g. to give
    /// the energy attribution more intervals.
    pub iterations: usize,
    /// The element type of the matrices (Cholesky and GEMM; the stencil is f64 only).
    pub precision: Precision,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            n: 4096,
            tile: 256,
            steps: 20,
            seed: 1,
            check: true,
            iterations: 1,
            precision: Precision::F64,
        }
    }
}

impl AppConfig {
    /// Matrices (or grids) of order `n` that `app` holds at once, its check included.
    fn matrices(app: App, check: bool) -> u64 {
        match app {
            // A, and its copy for the residual.
            App::Cholesky => 1 + u64::from(check),
            // A, B, C, and copies of A and B for the residual.
            App::Gemm => 3 + 2 * u64::from(check),
            // Two grids, and the sequential run's two.
            App::Stencil => 2 + 2 * u64::from(check),
        }
    }

    /// Checks the parameters before anything is allocated or submitted: sizes of zero,
    /// sizes whose matrices would not fit in this machine's available memory (or overflow
    /// the address space), and counts that would run nothing.
    ///
    /// # Errors
    /// [`AppError::Invalid`], saying which parameter and what would work.
    /// The tasks the run submits, over all its iterations (saturating).
    pub fn tasks(&self, app: App) -> u128 {
        let t = self.n.div_ceil(self.tile.max(1)) as u128;
        let cube = |a: u128, b: u128, c: u128| a.saturating_mul(b).saturating_mul(c);
        let per = match app {
            App::Cholesky => cube(t, t + 1, t + 2) / 6,
            App::Gemm => cube(t, t, t),
            App::Stencil => cube(self.steps as u128, t, t),
        };
        per.saturating_mul(self.iterations as u128)
    }

    /// Checks the sizes before anything runs: each one's range, the matrices' memory, then
    /// the number of tasks ([`MAX_APP_TASKS`]).
    pub fn validate(&self, app: App) -> Result<(), AppError> {
        self.validate_sizes(app)?;
        let invalid = |reason: String| AppError::Invalid {
            app: app.name(),
            reason,
        };
        let tasks = self.tasks(app);
        if tasks > MAX_APP_TASKS as u128 {
            return Err(invalid(format!(
                "--n {}, --tile {}{} and --iterations {} make {} tasks, more than the {} a \
                 run takes (its trace and its runtime grow with them); use fewer",
                self.n,
                self.tile,
                if app == App::Stencil {
                    format!(", --steps {}", self.steps)
                } else {
                    String::new()
                },
                self.iterations,
                if tasks > u64::MAX as u128 {
                    "more than 2^64".to_string()
                } else {
                    tasks.to_string()
                },
                MAX_APP_TASKS
            )));
        }
        Ok(())
    }

    fn validate_sizes(&self, app: App) -> Result<(), AppError> {
        let invalid = |reason: String| AppError::Invalid {
            app: app.name(),
            reason,
        };
        if self.n == 0 {
            return Err(invalid(
                "--n 0 is an empty matrix: nothing would run; use --n of at least the tile size, e.g. --n 4096".into(),
            ));
        }
        if self.tile == 0 {
            return Err(invalid(
                "--tile 0: use a tile order of at least 1 (256 is typical)".into(),
            ));
        }
        if self.iterations == 0 {
            return Err(invalid(
                "--iterations 0 runs nothing: use at least 1".into(),
            ));
        }
        if app == App::Stencil && self.steps == 0 {
            return Err(invalid("--steps 0 runs nothing: use at least 1".into()));
        }
        let elem = match (app, self.precision) {
            (App::Stencil, _) | (_, Precision::F64) => 8u64,
            (_, Precision::F32) => 4,
        };
        // Every app pads an n that the tile does not divide up to a multiple of it.
        let order = (self.n as u64)
            .div_ceil(self.tile as u64)
            .saturating_mul(self.tile as u64);
        let bytes = order
            .checked_mul(order)
            .and_then(|e| e.checked_mul(elem))
            .and_then(|b| b.checked_mul(Self::matrices(app, self.check)));
        let available = taskwatt_runtime::available_memory_bytes();
        match bytes {
            Some(b) if available.is_none_or(|a| b <= a) => Ok(()),
            _ => Err(invalid(format!(
                "--n {} needs {} for its matrices, more than {}; use a smaller --n{}",
                self.n,
                bytes.map_or_else(|| "more than 2^64 bytes".to_string(), gib),
                available.map_or_else(
                    || "the address space".to_string(),
                    |a| format!("the {} of memory available here", gib(a))
                ),
                if self.check {
                    " (or --no-check, which needs fewer copies)"
                } else {
                    ""
                }
            ))),
        }
    }
}

/// `MemAvailable` from /proc/meminfo (Linux), if it can be read.
pub(crate) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The result check of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// What was measured, e.g. `||A - L L^T||_F / ||A||_F`.
    pub what: &'static str,
    /// The measured error.
    pub value: f64,
    /// The largest error that passes.
    pub tolerance: f64,
    /// `value <= tolerance`.
    pub passed: bool,
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppRun {
    /// The app.
    pub app: App,
    /// Its parameters.
    pub config: AppConfig,
    /// Tasks submitted.
    pub tasks: u64,
    /// Floating-point operations (the app's conventional count).
    pub flops: f64,
    /// From the first submission to the end of `wait_all` (summed over iterations).
    #[serde(with = "duration_s")]
    pub makespan: Duration,
    /// The same spans on the trace clock, one per iteration: the measured run's
    /// `application` region, so that its energy covers the makespan and not the input's
    /// generation or the result's check.
    #[serde(skip)]
    pub graph: Vec<(taskwatt_traces::Timestamp, taskwatt_traces::Timestamp)>,
    /// The result check, if asked for.
    pub check: Option<Check>,
}

impl AppRun {
    /// GFlop/s over the makespan.
    pub fn gflops(&self) -> f64 {
        self.flops / self.makespan.as_secs_f64().max(1e-12) / 1e9
    }
}

mod duration_s {
    pub(super) fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// Errors of a built-in app.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The runtime refused or a task failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The parameters do not fit the kernels (e.g. a tile size that does not divide n).
    #[error("invalid {app} parameters: {source}")]
    Kernel {
        /// The app.
        app: &'static str,
        /// What the kernels said.
        source: KernelError,
    },
    /// The app has no implementation in the asked precision.
    #[error("{app} has no {precision} version; run it with --precision f64")]
    Unsupported {
        /// The app.
        app: &'static str,
        /// The precision asked for.
        precision: Precision,
    },
    /// The parameters cannot run: a size of zero, matrices that do not fit in memory, a
    /// count that runs nothing.
    #[error("invalid {app} parameters: {reason}")]
    Invalid {
        /// The app.
        app: &'static str,
        /// What is wrong, and what would work.
        reason: String,
    },
    /// The result is wrong.
    #[error("{app}: result check failed: {what} = {value:e} exceeds the tolerance {tolerance:e}")]
    CheckFailed {
        /// The app.
        app: &'static str,
        /// What was measured.
        what: &'static str,
        /// The error.
        value: f64,
        /// The tolerance.
        tolerance: f64,
    },
}

/// Type calibration (see `calibrate.rs`): runs each of the app's codelets alone, then on
/// every worker, for `each`, marking the phases in `sink`. An app with a single codelet
/// has no split to separate, but its calibration still shows the type alone and beside
/// others: the contention law that the what-if applies on other worker counts.
pub fn calibrate_types(
    app: App,
    rt: &Runtime,
    config: &AppConfig,
    sink: &taskwatt_traces::TraceSink,
    each: std::time::Duration,
) -> Result<(), AppError> {
    calibrate_some_types(app, rt, config, sink, each, None)
}

/// [`calibrate_types`] for the codelets named in `only`, each for its own duration (all
/// for `each` when `None`); names the app does not have are ignored.
pub fn calibrate_some_types(
    app: App,
    rt: &Runtime,
    config: &AppConfig,
    sink: &taskwatt_traces::TraceSink,
    each: std::time::Duration,
    only: Option<&[(String, std::time::Duration)]>,
) -> Result<(), AppError> {
    config.validate(app)?;
    taskwatt_kernels::init();
    match (app, config.precision) {
        (App::Cholesky, Precision::F64) => cholesky::calibrate::<f64>(rt, config, sink, each, only),
        (App::Cholesky, Precision::F32) => cholesky::calibrate::<f32>(rt, config, sink, each, only),
        (App::Gemm, Precision::F64) => gemm::calibrate::<f64>(rt, config, sink, each, only),
        (App::Gemm, Precision::F32) => gemm::calibrate::<f32>(rt, config, sink, each, only),
        (App::Stencil, _) => stencil::calibrate(rt, config, sink, each, only),
    }
}

/// The most memory the tile pools of a calibration take, in all: more than a package's
/// last-level cache on common machines (32 MiB on this VM's EPYC), so that tasks that
/// stream their tiles in the graph stream them in calibration too.
pub const CALIBRATION_POOL_BYTES: u64 = 96 << 20;

/// Tiles in each of `roles` pools of a calibration on an order-`n` problem: as many as one
/// of the app's matrices has, within [`CALIBRATION_POOL_BYTES`] for all the pools.
fn calibration_pool(n: usize, nb: usize, tile_bytes: u64, roles: u64) -> usize {
    let nt = n.div_ceil(nb.max(1));
    let fit = CALIBRATION_POOL_BYTES / (tile_bytes.max(1) * roles.max(1));
    (nt * nt).min(fit as usize).max(1)
}

/// A codelet's calibration time: `each`, or its time in `only` (zero when not named).
fn calibration_time(
    name: &str,
    each: std::time::Duration,
    only: Option<&[(String, std::time::Duration)]>,
) -> std::time::Duration {
    match only {
        None => each,
        Some(o) => o
            .iter()
            .find(|(n, _)| n == name)
            .map_or(std::time::Duration::ZERO, |(_, d)| *d),
    }
}

pub use calibrate::{Calibration, TYPE_CALIBRATION};

/// Runs `app` on `rt`, `config.iterations` times back to back (each iteration with a
/// fresh input: the seed plus the iteration number). The result sums tasks, flops and
/// makespans, and keeps the worst check.
///
/// # Errors
/// [`AppError::Unsupported`] for the stencil in f32 (before anything runs); else as the
/// app's run and check.
pub fn run_app(app: App, rt: &Runtime, config: &AppConfig) -> Result<AppRun, AppError> {
    if app == App::Stencil && config.precision != Precision::F64 {
        return Err(AppError::Unsupported {
            app: app.name(),
            precision: config.precision,
        });
    }
    config.validate(app)?;
    taskwatt_kernels::init();
    let mut total: Option<AppRun> = None;
    for i in 0..config.iterations.max(1) {
        let cfg = AppConfig {
            seed: config.seed.wrapping_add(i as u64),
            ..*config
        };
        let run = match (app, cfg.precision) {
            (App::Cholesky, Precision::F64) => cholesky::run::<f64>(rt, &cfg),
            (App::Cholesky, Precision::F32) => cholesky::run::<f32>(rt, &cfg),
            (App::Gemm, Precision::F64) => gemm::run::<f64>(rt, &cfg),
            (App::Gemm, Precision::F32) => gemm::run::<f32>(rt, &cfg),
            (App::Stencil, _) => stencil::run(rt, &cfg),
        }?;
        if let Some(c) = &run.check {
            if !c.passed {
                return Err(AppError::CheckFailed {
                    app: app.name(),
                    what: c.what,
                    value: c.value,
                    tolerance: c.tolerance,
                });
            }
        }
        total = Some(match total {
            None => run,
            Some(mut t) => {
                t.tasks += run.tasks;
                t.flops += run.flops;
                t.makespan += run.makespan;
                t.graph.extend(run.graph);
                if let (Some(a), Some(b)) = (&t.check, &run.check) {
                    if b.value > a.value {
                        t.check = run.check.clone();
                    }
                }
                t
            }
        });
    }
    let mut run = total.expect("at least one iteration");
    run.config = *config;
    Ok(run)
}

fn kernel_err(app: &'static str) -> impl Fn(KernelError) -> AppError {
    move |source| AppError::Kernel { app, source }
}

/// Bytes of one `nb x nb` tile of `T`.
fn tile_bytes<T: Scalar>(nb: usize) -> u64 {
    (nb * nb * std::mem::size_of::<T>()) as u64
}

#[cfg(test)]
mod tests {
    //! Each app in each precision on a small problem: the run's own check must pass, and
    //! the f32 residual must be that of f32 (far above f64's tolerance), so the precision
    //! really reached the kernels.
    use super::*;

    fn config(precision: Precision) -> AppConfig {
        AppConfig {
            n: 256,
            tile: 64,
            steps: 3,
            precision,
            ..AppConfig::default()
        }
    }

    fn runtime() -> Runtime {
        Runtime::builder().workers(2).build().expect("runtime")
    }

    #[test]
    fn cholesky_and_gemm_run_in_both_precisions() {
        let rt = runtime();
        for app in [App::Cholesky, App::Gemm] {
            let f64_run = run_app(app, &rt, &config(Precision::F64)).unwrap();
            let f32_run = run_app(app, &rt, &config(Precision::F32)).unwrap();
            let (c64, c32) = (f64_run.check.unwrap(), f32_run.check.unwrap());
            assert!(c64.passed && c32.passed, "{app:?}: {c64:?} {c32:?}");
            assert!(
                c32.value > c64.tolerance,
                "{app:?}: f32 residual {} looks like f64",
                c32.value
            );
            assert_eq!(f32_run.config.precision, Precision::F32);
            assert_eq!(
                (f32_run.tasks, f32_run.flops),
                (f64_run.tasks, f64_run.flops)
            );
        }
    }

    #[test]
    fn cholesky_type_calibration_runs_in_f32() {
        let rt = runtime();
        let sink = taskwatt_traces::TraceSink::null();
        calibrate_types(
            App::Cholesky,
            &rt,
            &config(Precision::F32),
            &sink,
            Duration::from_millis(5),
        )
        .unwrap();
        assert_eq!(rt.stats().failed, 0);
    }

    #[test]
    fn absurd_sizes_are_refused_before_anything_is_allocated() {
        let rt = runtime();
        let cases = [
            (
                App::Gemm,
                AppConfig {
                    n: usize::MAX,
                    tile: 1,
                    ..config(Precision::F64)
                },
                "more than",
            ),
            (
                App::Cholesky,
                AppConfig {
                    n: 10_000_000,
                    tile: 10_000_000,
                    ..config(Precision::F64)
                },
                "--n 10000000 needs",
            ),
            (
                App::Cholesky,
                AppConfig {
                    n: 0,
                    ..config(Precision::F64)
                },
                "--n 0",
            ),
            (
                App::Gemm,
                AppConfig {
                    iterations: 0,
                    ..config(Precision::F64)
                },
                "--iterations 0",
            ),
            (
                App::Stencil,
                AppConfig {
                    steps: 0,
                    ..config(Precision::F64)
                },
                "--steps 0",
            ),
        ];
        for (app, cfg, want) in cases {
            let err = run_app(app, &rt, &cfg).unwrap_err();
            assert!(matches!(err, AppError::Invalid { .. }), "{app:?}: {err}");
            assert!(err.to_string().contains(want), "{app:?}: {err}");
        }
        assert_eq!(rt.stats().submitted, 0);
    }

    #[test]
    fn stencil_refuses_f32_with_a_clear_error() {
        let err = run_app(App::Stencil, &runtime(), &config(Precision::F32)).unwrap_err();
        assert!(matches!(err, AppError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains("--precision f64"), "{err}");
        assert_eq!(Precision::F32.to_string(), "f32");
    }

    #[test]
    fn calibration_pools_are_the_app_s_matrix_within_the_bound() {
        let tile = tile_bytes::<f64>(256);
        // A 1024 matrix has 16 tiles of 256: all of them.
        assert_eq!(calibration_pool(1024, 256, tile, 3), 16);
        // A 4096 one has 256: three pools of 512 KiB tiles within 96 MiB hold 64 each.
        assert_eq!(calibration_pool(4096, 256, tile, 3), 64);
        assert!(3 * 64 * tile <= CALIBRATION_POOL_BYTES);
        // Tiles past the bound: one each.
        assert_eq!(
            calibration_pool(1 << 20, 1 << 14, tile_bytes::<f64>(1 << 14), 3),
            1
        );
    }
}
