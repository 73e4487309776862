//! What a fit is asked for: the solver, the rows' weights, the sensor model and the
//! precision a value needs to be shown as a measurement ([`AttributionOptions`]), and the
//! sizes past which a fit changes method or refuses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use taskwatt_traces::Domain;

use super::key::KeyKind;

/// The most task types one domain's dense fit takes: its triangle and cross-validation
/// folds are dense, so memory grows with the square of the number of types and time with
/// its cube (1024 types: about 50 MB and a second or two). More types are fitted by
/// coordinate descent on the sparse system (`large.rs`): linear in the non-zeros, without
/// intervals.
pub const MAX_TYPES: usize = 1024;

/// The most task types one domain takes at all (2^20): past it the input is refused
/// ([`AttributionError::TooManyTypes`](super::AttributionError::TooManyTypes)).
pub const MAX_SPARSE_TYPES: usize = 1 << 20;

/// Rows a single-trace fit needs before it models a base drift.
pub(crate) const MIN_DRIFT_ROWS: usize = 30;

/// Task types up to which contention is modelled (its profile solves the fit a few dozen
/// times, and the augmented factor doubles the columns).
pub const MAX_CONTENTION_TYPES: usize = 64;

/// The default [`AttributionOptions::precision_pct`]: 95% intervals within ±5%.
pub const DEFAULT_PRECISION_PCT: f64 = 5.0;

/// Which solver estimates the powers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Solver {
    /// Non-negative least squares (Lawson-Hanson): every power ≥ 0. The default.
    #[default]
    Nnls,
    /// Ordinary least squares: QR when the system has full rank, minimum-norm SVD
    /// solution otherwise. Powers may come out negative.
    Ols,
}

impl Solver {
    /// `nnls` or `ols`.
    pub fn name(self) -> &'static str {
        match self {
            Solver::Nnls => "nnls",
            Solver::Ols => "ols",
        }
    }
}

/// Weights of the rows (intervals) in the least-squares fit.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum RowWeights {
    /// The default: weights from the rows' own error variance, `1 / (a + b·Δt_i)`, with
    /// `a` (per-reading error: quantisation, misalignment) and `b` (white power noise,
    /// whose energy variance grows with the interval) fitted to the squared residuals of a
    /// first, unweighted fit (feasible generalised least squares).
    #[default]
    Auto,
    /// Every interval counts the same.
    Uniform,
    /// Weight `mean Δt / Δt_i`: the right weight when the noise is white power noise, whose
    /// energy variance grows with the interval length.
    InverseDuration,
    /// User-given weights per domain, one per interval (for a stacked fit: one per
    /// interval of every trace, in the order the traces were given).
    PerInterval(BTreeMap<Domain, Vec<f64>>),
}

impl RowWeights {
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            RowWeights::Auto => "auto: 1/(a + b dt)",
            RowWeights::Uniform => "uniform",
            RowWeights::InverseDuration => "1/dt",
            RowWeights::PerInterval(_) => "user",
        }
    }
}

/// Options of the attribution, the model fit and the diagnostics.
#[derive(Clone, Debug, PartialEq)]
pub struct AttributionOptions {
    /// How tasks are grouped into types.
    pub key: KeyKind,
    /// Which solver.
    pub solver: Solver,
    /// Row weights.
    pub weights: RowWeights,
    /// Cross-validation folds (contiguous blocks of intervals); below 2 disables it.
    pub cv_folds: usize,
    /// Types with fewer tasks inside the sampled window are flagged unreliable.
    pub min_tasks: u64,
    /// Condition index (σ_max / σ_j, columns scaled to unit norm) above which the
    /// columns of a dependency are declared inseparable and their values unreliable
    /// (Belsley, Kuh & Welsch call 30 to 100 moderate to strong; we flag strong).
    pub collinearity_index: f64,
    /// Condition index above which a dependency is only warned about (its columns' SEs
    /// are inflated but still honest).
    pub collinearity_warn_index: f64,
    /// Variance-decomposition proportion above which a column takes part in such a
    /// dependency (Belsley, Kuh & Welsch use 0.5).
    pub variance_proportion: f64,
    /// Fewer intervals than this per unknown triggers a "sampling period too long" warning.
    pub min_rows_per_unknown: f64,
    /// A coefficient is shown as a measurement only when its 95% interval lies within
    /// this many percent of its value on both sides (default 5): a number quoted as
    /// "8.9 W" is then good to about ±5%. Anything wider is shown as a range, flagged
    /// [`Flag::Imprecise`](super::Flag::Imprecise).
    pub precision_pct: f64,
    /// Align intervals to the meters' updates (default; see `Alignment`).
    pub align_to_meter: bool,
    /// How a task's activity reaches a domain's readings (default: through the domain's
    /// sensor, see docs/attribution.md "Sensor models").
    pub sensor_model: SensorModel,
    /// Fit each domain's contention (its tasks' power falling with the number running at
    /// once) where the occupancy columns exist (default on; docs/attribution.md,
    /// "Contention").
    pub contention: bool,
    /// Fit a linear drift of the base power over a single trace's window (default on).
    pub drift: bool,
    /// Use the sampled frequency as a regressor where the trace has it (default on;
    /// docs/attribution.md, "Frequency").
    pub frequency: bool,
}

/// How the design matrix sees a domain's sensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SensorModel {
    /// Through the sensor's response: clipping to intervals for an ideal counter, the
    /// sampled part of each update for a partly sampled counter, the averaging window for
    /// a power reading.
    #[default]
    Aware,
    /// Every domain as an ideal counter: each task clipped to the intervals it overlaps
    /// (the seed paper's model; kept to compare).
    Clip,
}

impl Default for AttributionOptions {
    fn default() -> Self {
        AttributionOptions {
            key: KeyKind::default(),
            solver: Solver::default(),
            weights: RowWeights::default(),
            cv_folds: 5,
            min_tasks: 10,
            collinearity_index: 100.0,
            collinearity_warn_index: 30.0,
            variance_proportion: 0.5,
            min_rows_per_unknown: 10.0,
            precision_pct: DEFAULT_PRECISION_PCT,
            align_to_meter: true,
            sensor_model: SensorModel::Aware,
            contention: true,
            drift: true,
            frequency: true,
        }
    }
}
