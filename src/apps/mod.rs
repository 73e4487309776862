//! The built-in applications that `taskwatt run` runs: tiled Cholesky, tiled GEMM and a
//! 2-D heat stencil. Each builds its task graph on a [`Runtime`], times it from the first
//! submission to the end of `wait_all`, and checks its result.

mod calibrate;
mod cholesky;
mod gemm;
mod stencil;

use std::time::Duration;

use serde::Serialize;
use taskwatt_kernels::KernelError;
use taskwatt_runtime::{Runtime, RuntimeError};

/// A built-in application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
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

    /// The codelet names the app uses (what the energy report will list).
    pub fn codelets(self) -> &'static [&'static str] {
        match self {
            App::Cholesky => &["potrf", "trsm", "syrk", "gemm"],
            App::Gemm => &["gemm_nn"],
            App::Stencil => &["heat_step"],
        }
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
        }
    }
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

/// Type calibration (see `calibrate.rs`): runs each of the app's codelets alone on every
/// worker for `each`, marking the phases in `sink`. Apps with a single codelet have
/// nothing to separate and return at once.
pub fn calibrate_types(
    app: App,
    rt: &Runtime,
    config: &AppConfig,
    sink: &taskwatt_traces::TraceSink,
    each: std::time::Duration,
) -> Result<(), AppError> {
    taskwatt_kernels::init();
    match app {
        App::Cholesky => cholesky::calibrate(rt, config, sink, each),
        App::Gemm | App::Stencil => Ok(()),
    }
}

pub use calibrate::{Calibration, TYPE_CALIBRATION};

/// Runs `app` on `rt`, `config.iterations` times back to back (each iteration with a
/// fresh input: the seed plus the iteration number). The result sums tasks, flops and
/// makespans, and keeps the worst check.
pub fn run_app(app: App, rt: &Runtime, config: &AppConfig) -> Result<AppRun, AppError> {
    taskwatt_kernels::init();
    let mut total: Option<AppRun> = None;
    for i in 0..config.iterations.max(1) {
        let cfg = AppConfig {
            seed: config.seed.wrapping_add(i as u64),
            ..*config
        };
        let run = match app {
            App::Cholesky => cholesky::run(rt, &cfg),
            App::Gemm => gemm::run(rt, &cfg),
            App::Stencil => stencil::run(rt, &cfg),
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

/// Bytes of one `nb x nb` f64 tile.
fn tile_bytes(nb: usize) -> u64 {
    (nb * nb * std::mem::size_of::<f64>()) as u64
}
