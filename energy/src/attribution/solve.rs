//! Solving `E_i ≈ P_base·Δt_i + Σ_k p_k·T_ik` for one domain.
//!
//! The rows of one domain, possibly stacked from several traces (model fitting), are
//! streamed once into a Givens triangle per cross-validation fold ([`TriAccumulator`]);
//! the folds merge into the full factor. Every solve then works on a `(K+1)`-square
//! problem, whatever the number of intervals. Columns are scaled to unit norm before
//! solving so that the solvers' tolerances and the condition number do not depend on
//! units or on how long a type ran.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};
use taskwatt_traces::Domain;

use super::diagnostics::{self, FitDiagnostics};
use super::error::AttributionError;
use super::key::{KeyKind, TypeKey};
use super::nnls::{lstsq_min_norm, nnls};
use super::qr::TriAccumulator;
use super::system::{DomainSystem, TypeStats};

/// The most task types one domain's dense fit takes: its triangle and cross-validation
/// folds are dense, so memory grows with the square of the number of types and time with
/// its cube (1024 types: about 50 MB and a second or two). More types are fitted by
/// coordinate descent on the sparse system (`large.rs`): linear in the non-zeros, without
/// intervals.
pub const MAX_TYPES: usize = 1024;

/// The most task types one domain takes at all (2^20): past it the input is refused
/// ([`AttributionError::TooManyTypes`]).
pub const MAX_SPARSE_TYPES: usize = 1 << 20;

/// Rows a single-trace fit needs before it models a base drift.
pub(crate) const MIN_DRIFT_ROWS: usize = 30;

/// Task types up to which contention is modelled (its profile solves the fit a few dozen
/// times, and the augmented factor doubles the columns).
pub const MAX_CONTENTION_TYPES: usize = 64;

/// The default [`AttributionOptions::precision_pct`]: 95% intervals within ±5%.
pub const DEFAULT_PRECISION_PCT: f64 = 5.0;

/// Relative singular-value cut-off below which a direction counts as exactly collinear.
pub(crate) const RANK_TOL: f64 = 1e-9;

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
    fn describe(&self) -> &'static str {
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
    /// [`Flag::Imprecise`].
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

/// One coefficient (base power or a type's power) with its uncertainty.
///
/// A coefficient is *shown as a measurement* (`reliable`) only when nothing is flagged:
/// it has a finite 95% interval, that interval lies within
/// [`AttributionOptions::precision_pct`] of the value, it is not held at a bound, not
/// negative and rests on enough tasks. Otherwise `flags` says why, and the value and its
/// interval are still given: a flag never hides them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The estimate, W (the solver's solution: non-negative under NNLS).
    pub value_w: f64,
    /// Standard error, W, from the covariance of the unconstrained least-squares fit on
    /// every column that entered the solve (`sqrt(σ̂² [(XᵀWX)⁻¹]_kk)`), so that it does
    /// not shrink when another coefficient is held at a bound; `None` when the
    /// coefficient is not identifiable (exact collinearity) or no degree of freedom is
    /// left.
    pub se_w: Option<f64>,
    /// 95% confidence interval `[low, high]`, W: the unconstrained fit's Student-t
    /// interval, intersected with `[0, ∞)` under NNLS (powers are physical) and widened,
    /// if needed, to contain `value_w`. See docs/attribution.md, "Intervals".
    #[serde(default)]
    pub ci95_w: Option<[f64; 2]>,
    /// Held at zero by the non-negativity constraint.
    pub at_bound: bool,
    /// Shown as a measurement: no flag (see the type's docs).
    pub reliable: bool,
    /// Why it is not shown as a measurement, machine-readable; empty when `reliable`.
    #[serde(default)]
    pub flags: Vec<Flag>,
    /// The same reasons in words.
    pub issues: Vec<String>,
}

impl Estimate {
    /// Half-width of the 95% interval relative to the value, % (the larger side);
    /// `None` without an interval or for a zero value.
    pub fn relative_half_width_pct(&self) -> Option<f64> {
        let [lo, hi] = self.ci95_w?;
        let v = self.value_w;
        (v != 0.0).then(|| 100.0 * (v - lo).max(hi - v) / v.abs())
    }

    /// Whether the 95% interval contains `w`.
    pub fn covers(&self, w: f64) -> Option<bool> {
        self.ci95_w.map(|[lo, hi]| lo <= w && w <= hi)
    }
}

/// Why a coefficient is not shown as a measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Flag {
    /// Its 95% interval is wider than the precision threshold.
    Imprecise {
        /// Half-width of the interval, % of the value.
        half_width_pct: f64,
        /// The threshold, %.
        threshold_pct: f64,
    },
    /// Held at zero by NNLS: the data put the unconstrained value at or below zero.
    AtBound,
    /// Negative (OLS only): the data cannot separate the type, or the model is wrong.
    Negative,
    /// Exactly collinear with other columns: only a combination is identified.
    Inseparable {
        /// The other columns.
        with: Vec<String>,
    },
    /// Nearly collinear with other columns (given with `Imprecise`, as its cause).
    NearlyCollinear {
        /// The other columns.
        with: Vec<String>,
        /// Condition index of the dependency.
        condition_index: f64,
    },
    /// Too few tasks inside the sampled window.
    TooFewTasks {
        /// Tasks seen.
        count: u64,
        /// The configured minimum.
        minimum: u64,
    },
    /// The type never ran inside the sampled window.
    NoTimeInWindow,
    /// No interval can be given (not identifiable, or no residual degree of freedom).
    NoInterval,
    /// The run's occupancy did not vary enough to tell the power alone from the power
    /// beside other tasks: the value is the power at the run's occupancy.
    ContentionUnknown,
    /// The residuals show that the model does not hold for this domain (the powers change
    /// over the run, or with the occupancy beyond the fitted contention).
    ModelInDoubt {
        /// Which departure, in words.
        departure: String,
    },
}

impl Flag {
    /// A short note for tables: `imprecise`, `held at 0`, `collinear`...
    pub fn short(&self) -> &'static str {
        match self {
            Flag::Imprecise { .. } => "imprecise",
            Flag::AtBound => "held at 0",
            Flag::Negative => "negative",
            Flag::Inseparable { .. } => "collinear",
            Flag::NearlyCollinear { .. } => "near-collinear",
            Flag::TooFewTasks { .. } => "few tasks",
            Flag::NoTimeInWindow => "no time",
            Flag::NoInterval => "no interval",
            Flag::ContentionUnknown => "contention?",
            Flag::ModelInDoubt { .. } => "model?",
        }
    }
}

/// The rows' error variance, `a + b·Δt + c·q` (J²), fitted to a fit's residuals: what a
/// measurement over a span adds to the uncertainty of a prediction compared with it. `a`
/// is a reading's own error, `b·Δt` noise that adds up over time (the meter's, the
/// base's), and `c·q` the tasks' own variation: `q = Σ_k p_k² · T_k · d̄_k` over the types
/// that ran (power, busy time, mean duration), so that a task whose energy varies by a
/// share `v` around its type's mean adds `(v · p · d)²`, `c` estimating `v²`. Without the
/// last term, a busy region's measurement would be given the noise of the run's average
/// interval and a prediction's interval would miss it (per-task variation of 10 % put half
/// of the application regions outside).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseModel {
    /// `a`, J² per interval.
    pub per_interval_j2: f64,
    /// `b`, J² per second of interval.
    pub per_second_j2: f64,
    /// `c`, the tasks' energy variance as a share of the square of their mean energy.
    #[serde(default)]
    pub per_task: f64,
}

impl NoiseModel {
    /// Non-negative least squares of `r²` on `(1, Δt, q)` over `(Δt s, q J², r² J²)`
    /// rows (every subset of the three terms, the best feasible one); `None` from fewer
    /// than 8 rows or no variance.
    pub fn fit(rows: impl Iterator<Item = (f64, f64, f64)>) -> Option<NoiseModel> {
        let mut m = [[0.0f64; 3]; 3];
        let mut v = [0.0f64; 3];
        let (mut n, mut yy) = (0usize, 0.0);
        for (d, q, r2) in rows {
            if !(d.is_finite() && q.is_finite() && r2.is_finite()) {
                continue;
            }
            let x = [1.0, d, q];
            for i in 0..3 {
                for j in 0..3 {
                    m[i][j] += x[i] * x[j];
                }
                v[i] += x[i] * r2;
            }
            yy += r2 * r2;
            n += 1;
        }
        if n < 8 {
            return None;
        }
        let mut best: Option<([f64; 3], f64)> = None;
        for mask in 1u8..8 {
            let idx: Vec<usize> = (0..3).filter(|i| mask & (1 << i) != 0).collect();
            let Some(c) = solve_small(&m, &v, &idx) else {
                continue;
            };
            if c.iter().any(|&x| x < 0.0) {
                continue;
            }
            let mut beta = [0.0; 3];
            for (&i, &ci) in idx.iter().zip(&c) {
                beta[i] = ci;
            }
            // SSE = yy − 2 βᵀv + βᵀMβ.
            let mut sse = yy;
            for i in 0..3 {
                sse -= 2.0 * beta[i] * v[i];
                for j in 0..3 {
                    sse += beta[i] * m[i][j] * beta[j];
                }
            }
            if best.is_none_or(|(_, b)| sse < b) {
                best = Some((beta, sse));
            }
        }
        let ([a, b, c], _) = best?;
        ((a + b + c).is_finite() && a + b + c > 0.0).then_some(NoiseModel {
            per_interval_j2: a,
            per_second_j2: b,
            per_task: c,
        })
    }

    /// The variance of a measurement over `intervals` intervals (fractions count as
    /// such) lasting `seconds` in all, over which the tasks' `q` sums to `task_q_j2`, J².
    pub fn variance_j2(&self, intervals: f64, seconds: f64, task_q_j2: f64) -> f64 {
        self.per_interval_j2 * intervals + self.per_second_j2 * seconds + self.per_task * task_q_j2
    }

    /// `q = Σ_k p_k² · T_k · d̄_k`, J², from the types' powers (W), busy times (s) and
    /// mean durations (s).
    pub fn task_q(terms: impl Iterator<Item = (f64, f64, f64)>) -> f64 {
        terms.map(|(p, t, d)| p * p * t.max(0.0) * d.max(0.0)).sum()
    }
}

/// Least squares on the subset `idx` of a 3×3 normal system; `None` when singular.
fn solve_small(m: &[[f64; 3]; 3], v: &[f64; 3], idx: &[usize]) -> Option<Vec<f64>> {
    let k = idx.len();
    let mut a = DMatrix::<f64>::zeros(k, k);
    let mut b = DVector::<f64>::zeros(k);
    for (r, &i) in idx.iter().enumerate() {
        for (c, &j) in idx.iter().enumerate() {
            a[(r, c)] = m[i][j];
        }
        b[r] = v[i];
    }
    let x = a.lu().solve(&b)?;
    x.iter()
        .all(|x| x.is_finite())
        .then(|| x.iter().copied().collect())
}

/// The rows' `(Δt s, q J², r² J²)` for a fit's noise model, from its stack, its types'
/// powers and its residuals (one per row of `rows`, ascending).
pub(crate) fn noise_rows(
    stack: &Stack<'_>,
    rows: &[usize],
    residuals: &[f64],
    powers: &[f64],
) -> Vec<(f64, f64, f64)> {
    let durations: Vec<f64> = stack
        .stats
        .iter()
        .map(|s| {
            if s.count > 0 {
                s.total_ns as f64 * 1e-9 / s.count as f64
            } else {
                0.0
            }
        })
        .collect();
    // `rows` ascending: visit each run of consecutive rows, beside the residuals.
    let mut out = Vec::with_capacity(rows.len());
    let mut next = 0;
    while next < rows.len() {
        let start = next;
        while next + 1 < rows.len() && rows[next + 1] == rows[next] + 1 {
            next += 1;
        }
        let (first, last) = (rows[start], rows[next]);
        next += 1;
        stack.visit(first..last + 1, |g, x, _, _| {
            let r = residuals[start + (g - first)];
            let q = NoiseModel::task_q(
                durations
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| (powers.get(k).copied().unwrap_or(0.0), x[k + 1], d)),
            );
            out.push((x[0], q, r * r));
        });
    }
    out
}

/// A prediction's 95 % half-width for a measurement: `h`, the half-width from the powers'
/// covariance, combined with the measurement's own noise `var_j2` at the normal quantile
/// (the noise's variance rests on every row of the fit).
pub(crate) fn widen(h: f64, var_j2: f64) -> f64 {
    (h * h + 1.96 * 1.96 * var_j2.max(0.0)).sqrt()
}

/// The fit of one domain.
#[derive(Clone, Debug)]
pub struct DomainFit {
    /// The domain.
    pub domain: Domain,
    /// Its name (from the first trace).
    pub name: String,
    /// The task types, in column order.
    pub keys: Vec<TypeKey>,
    /// Base power `P_base`.
    pub base: Estimate,
    /// Power of each type, parallel to `keys`.
    pub types: Vec<Estimate>,
    /// Per-type counts summed over the stacked traces, parallel to `keys`.
    pub stats: Vec<TypeStats>,
    /// `E_i − Ê_i`, J, one per interval (stacked traces one after the other).
    pub residuals_j: Vec<f64>,
    /// The rows' error variance against their length, from `residuals_j`.
    pub noise: Option<NoiseModel>,
    /// The base power's linear drift over the window (the change from the window's middle
    /// to its end, W; `base` is the window's mean), when modelled.
    pub drift: Option<Estimate>,
    /// The contention, when the domain's occupancy columns exist.
    pub contention: Option<super::contention::ContentionFit>,
    /// How the sampled frequency entered the fit, when the trace has it for the domain.
    pub frequency: Option<super::frequency::FrequencyFit>,
    /// Each type's mean power at the occupancy it ran at, when contention is modelled
    /// (parallel to `keys`; `None` for a type with no time in the window).
    pub types_at_run: Vec<Option<Estimate>>,
    /// Covariance of the unconstrained coefficients in `layout`'s order (the matrix behind
    /// every interval); `None` when a coefficient is not identifiable.
    pub covariance_w2: Option<Vec<Vec<f64>>>,
    /// Without `covariance_w2` (a coefficient not identifiable): the covariance over the
    /// directions the data identify, which gives intervals to the combinations that do
    /// not lean on the others (a region's energy when two types always run together).
    pub estimable_covariance: Option<super::covariance::Estimable>,
    /// The order of `covariance_w2`.
    pub layout: CovLayout,
    /// Student-t 95% quantile for the intervals.
    pub t95: f64,
    /// Fit quality and warnings.
    pub diagnostics: FitDiagnostics,
}

impl DomainFit {
    /// The contention the fit's powers are alone at: `c` when identified, else 0.
    pub fn theta(&self) -> f64 {
        self.contention
            .as_ref()
            .filter(|c| c.identified)
            .map_or(0.0, |c| c.c.value_w)
    }
}

/// The order of a fit's (or a model's) covariance: the base, each type, then the base
/// drift and the contention when modelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CovLayout {
    /// Task types.
    pub types: usize,
    /// Whether a drift row follows the types.
    #[serde(default)]
    pub drift: bool,
    /// Whether a contention row comes last.
    #[serde(default)]
    pub contention: bool,
}

impl CovLayout {
    /// Rows of the covariance.
    pub fn len(&self) -> usize {
        1 + self.types + usize::from(self.drift) + usize::from(self.contention)
    }

    /// Whether it has no row (never: the base is always there).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The gradient of an energy `P_base·window + Σ_k p_k·(T_k − c·U_k) + drift·D` in
    /// this order: `window` (s), each type's effective time `T_k − c·U_k` (s), the drift's
    /// integral `D` (s), and `−Σ_k p_k·U_k` (J) for the contention.
    pub fn gradient(
        &self,
        window_s: f64,
        effective_s: &[f64],
        drift_s: f64,
        dc_j: f64,
    ) -> Vec<f64> {
        let mut g = Vec::with_capacity(self.len());
        g.push(window_s);
        g.extend((0..self.types).map(|k| effective_s.get(k).copied().unwrap_or(0.0)));
        if self.drift {
            g.push(drift_s);
        }
        if self.contention {
            g.push(dc_j);
        }
        g
    }

    /// The same layout without the drift row (what a model keeps), and the matrix to match.
    pub fn without_drift(&self, cov: &[Vec<f64>]) -> (CovLayout, Vec<Vec<f64>>) {
        if !self.drift {
            return (*self, cov.to_vec());
        }
        let skip = 1 + self.types;
        let keep: Vec<usize> = (0..self.len()).filter(|&i| i != skip).collect();
        let m = keep
            .iter()
            .map(|&i| keep.iter().map(|&j| cov[i][j]).collect())
            .collect();
        (
            CovLayout {
                drift: false,
                ..*self
            },
            m,
        )
    }
}

/// Half-width of the 95% interval of `cᵀ b` for coefficients `b` with covariance `cov`
/// (W², base then types) and Student quantile `t`: `t · sqrt(cᵀ cov c)`, with `c` in
/// seconds (so the result is in J). `None` when the shapes differ or the variance is not a
/// finite non-negative number.
pub(crate) fn half_width(cov: &[Vec<f64>], c: &[f64], t: f64) -> Option<f64> {
    if cov.len() != c.len() || cov.iter().any(|r| r.len() != c.len()) || !t.is_finite() {
        return None;
    }
    let v: f64 = cov
        .iter()
        .zip(c)
        .map(|(row, ci)| ci * row.iter().zip(c).map(|(x, cj)| x * cj).sum::<f64>())
        .sum();
    (v.is_finite() && v >= 0.0).then(|| t * v.sqrt())
}

/// One domain's rows, stacked over one or more traces, with a shared column set.
///
/// The *model* columns are: 0, the base (Δt); `1 + k`, type `keys[k]`'s effective time
/// `T − θ·U` (its time, less the contention `θ` times its occupancy-weighted time); then,
/// when [`Stack::drift`], the base drift `Δt·τ` (`τ` the interval's middle on `[-1, 1]`
/// over the system's window). The *augmented* rows add, when [`Stack::occupancy`], each
/// type's occupancy column `U` after the model columns: what the contention profile needs
/// (`contention.rs`).
pub(crate) struct Stack<'a> {
    pub(crate) systems: Vec<&'a DomainSystem>,
    pub(crate) keys: Vec<TypeKey>,
    pub(crate) stats: Vec<TypeStats>,
    /// Per system: local column -> stacked column (≥ 1).
    maps: Vec<Vec<usize>>,
    /// Row offset of each system; last entry = total rows.
    offsets: Vec<usize>,
    /// Row weights, or `None` for uniform.
    pub(crate) weights: Option<Vec<f64>>,
    /// Per system: whether it is its trace's primary reading of the domain (its task
    /// counts enter `stats`); a second sensor of the same device repeats the same tasks.
    primary: Vec<bool>,
    /// A base drift column (one system only).
    pub(crate) drift: bool,
    /// Occupancy columns in the augmented rows (every system has them).
    pub(crate) occupancy: bool,
    /// The contention the model rows are formed at.
    pub(crate) theta: f64,
    /// Per system, each interval's frequency ratio (`frequency.rs`; empty: none), and the
    /// exponent the task columns are scaled with (0: not at all).
    pub(crate) freq: Vec<Vec<f64>>,
    pub(crate) freq_beta: f64,
}

impl<'a> Stack<'a> {
    /// Refuses more than [`MAX_SPARSE_TYPES`] types ([`AttributionError::TooManyTypes`]).
    pub(crate) fn new(
        systems: Vec<&'a DomainSystem>,
        weights: &RowWeights,
    ) -> Result<Stack<'a>, AttributionError> {
        let primary = vec![true; systems.len()];
        Self::with_primary(systems, primary, weights)
    }

    /// As [`Stack::new`], with `primary[i]` false for a system that is a second sensor of a
    /// device another system reads (its rows enter the fit, its task counts do not).
    pub(crate) fn with_primary(
        systems: Vec<&'a DomainSystem>,
        primary: Vec<bool>,
        weights: &RowWeights,
    ) -> Result<Stack<'a>, AttributionError> {
        let mut keys: Vec<TypeKey> = Vec::new();
        let mut stats: Vec<TypeStats> = Vec::new();
        let mut index: HashMap<TypeKey, usize> = HashMap::new();
        let mut maps = Vec::with_capacity(systems.len());
        let mut offsets = vec![0];
        for (si, s) in systems.iter().enumerate() {
            let mut map = Vec::with_capacity(s.columns.len());
            for c in &s.columns {
                let g = *index.entry(c.key.clone()).or_insert_with(|| {
                    keys.push(c.key.clone());
                    stats.push(TypeStats {
                        min_ns: u64::MAX,
                        ..TypeStats::default()
                    });
                    keys.len() - 1
                });
                if primary[si] {
                    merge_stats(&mut stats[g], &c.stats);
                }
                map.push(g + 1);
            }
            maps.push(map);
            offsets.push(offsets.last().unwrap() + s.intervals());
            if keys.len() > MAX_SPARSE_TYPES {
                let p = keys.len() as u64 + 1;
                let rows = *offsets.last().unwrap() as u64;
                return Err(AttributionError::TooManyTypes {
                    domain: s.info.name.clone(),
                    types: keys.len(),
                    max: MAX_SPARSE_TYPES,
                    mib: (rows * p * 8) >> 20,
                });
            }
        }
        let rows = *offsets.last().unwrap();
        let domain = systems.first().map(|s| s.domain());
        let w = match weights {
            // Auto weights are fitted by `fit_stack`, from a first unweighted fit.
            RowWeights::Uniform | RowWeights::Auto => None,
            RowWeights::InverseDuration => {
                let total: u64 = systems.iter().map(|s| total_span(s)).sum();
                let mean = total as f64 / rows.max(1) as f64;
                let mut w = Vec::with_capacity(rows);
                for s in &systems {
                    w.extend((0..s.intervals()).map(|i| mean / s.dt_ns(i) as f64));
                }
                Some(w)
            }
            RowWeights::PerInterval(map) => match domain.and_then(|d| map.get(&d)) {
                None => None,
                Some(v) => {
                    let name = domain.map(|d| d.to_string()).unwrap_or_default();
                    if v.len() != rows {
                        return Err(AttributionError::WeightsLength {
                            domain: name,
                            expected: rows,
                            found: v.len(),
                        });
                    }
                    if let Some((index, &value)) = v
                        .iter()
                        .enumerate()
                        .find(|(_, w)| !(w.is_finite() && **w >= 0.0))
                    {
                        return Err(AttributionError::InvalidWeight {
                            domain: name,
                            index,
                            value,
                        });
                    }
                    Some(v.clone())
                }
            },
        };
        Ok(Stack {
            systems,
            keys,
            stats,
            maps,
            offsets,
            weights: w,
            primary,
            drift: false,
            occupancy: false,
            theta: 0.0,
            freq: Vec::new(),
            freq_beta: 0.0,
        })
    }

    /// Adds a base drift column when `drift` and the stack is one system with enough
    /// rows, and occupancy columns when `occupancy` and every system has them (with two
    /// tasks at once somewhere): what the dense fit models beyond the base and the powers.
    pub(crate) fn enable(&mut self, drift: bool, occupancy: bool) {
        self.drift = drift && self.systems.len() == 1 && self.rows() >= MIN_DRIFT_ROWS;
        self.occupancy = occupancy
            && self.keys.len() <= MAX_CONTENTION_TYPES
            && self.systems.iter().all(|s| s.occupancy.built)
            && self.max_k() >= 2
            && self.stats.iter().any(|st| st.occ_ns > 0);
    }

    /// The most tasks that ran at once on the domain, over every system.
    pub(crate) fn max_k(&self) -> usize {
        self.systems
            .iter()
            .map(|s| s.occupancy.max_k())
            .max()
            .unwrap_or(0)
    }

    /// Columns of the augmented rows: the model's, then the occupancy columns.
    pub(crate) fn augmented(&self) -> usize {
        self.unknowns() + if self.occupancy { self.keys.len() } else { 0 }
    }

    /// Multiplies the weights of every row of system `i` by `scale[i]`.
    pub(crate) fn scale_systems(&mut self, scale: &[f64]) {
        let rows = self.rows();
        let w = self.weights.get_or_insert_with(|| vec![1.0; rows]);
        for (i, f) in scale.iter().enumerate() {
            for x in &mut w[self.offsets[i]..self.offsets[i + 1]] {
                *x *= f;
            }
        }
    }

    /// The rows of primary systems, in row order.
    pub(crate) fn primary_rows(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.systems.len())
            .filter(|&i| self.primary[i])
            .flat_map(|i| self.offsets[i]..self.offsets[i + 1])
    }

    /// Model unknowns: base, one per type, and the drift when modelled.
    pub(crate) fn unknowns(&self) -> usize {
        self.keys.len() + 1 + usize::from(self.drift)
    }

    /// Total rows.
    pub(crate) fn rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    /// The span of row `g`, ns, on its trace's clock.
    pub(crate) fn row_span(&self, g: usize) -> (u64, u64) {
        let si = self.offsets.partition_point(|&o| o <= g) - 1;
        let s = self.systems[si];
        let i = g - self.offsets[si];
        (s.t_ns[i], s.t_ns[i + 1])
    }

    /// The frequency ratio of row `g` (`frequency.rs`), where the stack has them.
    pub(crate) fn freq_ratio(&self, g: usize) -> Option<f64> {
        let si = self.offsets.partition_point(|&o| o <= g) - 1;
        self.freq
            .get(si)
            .and_then(|r| r.get(g - self.offsets[si]))
            .copied()
    }

    /// Each stacked system's rows.
    pub(crate) fn system_ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.offsets.windows(2).map(|w| w[0]..w[1])
    }

    /// Calls `f(row, a, y, w)` for each row in `range` with the augmented row `a` (model
    /// columns at no contention, then the occupancy columns), in seconds, `y` in J.
    pub(crate) fn visit_augmented(
        &self,
        range: Range<usize>,
        mut f: impl FnMut(usize, &[f64], f64, f64),
    ) {
        let mut x = vec![0.0; self.augmented()];
        let (k, p) = (self.keys.len(), self.unknowns());
        for (si, s) in self.systems.iter().enumerate() {
            let (lo, hi) = (self.offsets[si], self.offsets[si + 1]);
            let (a, b) = (range.start.max(lo), range.end.min(hi));
            let map = &self.maps[si];
            let (centre, half) = match s.window_ns() {
                Some((t0, tn)) => (0.5 * (t0 + tn) as f64, (0.5 * (tn - t0) as f64).max(1.0)),
                None => (0.0, 1.0),
            };
            let ratio = self
                .freq
                .get(si)
                .filter(|r| self.freq_beta != 0.0 && r.len() == s.intervals());
            for g in a..b {
                let i = g - lo;
                x.fill(0.0);
                let dt = s.dt_ns(i) as f64 * 1e-9;
                x[0] = dt;
                // The task columns at the interval's frequency (`frequency.rs`).
                let scale = ratio.map_or(1.0, |r| r[i].powf(self.freq_beta)) * 1e-9;
                for (c, col) in s.columns.iter().enumerate() {
                    x[map[c]] = col.time_ns[i] as f64 * scale;
                    if self.occupancy {
                        x[p + map[c] - 1] = col.occ_ns[i] as f64 * scale;
                    }
                }
                if self.drift {
                    let mid = 0.5 * (s.t_ns[i] + s.t_ns[i + 1]) as f64;
                    x[1 + k] = dt * (mid - centre) / half;
                }
                let w = self.weights.as_ref().map_or(1.0, |w| w[g]);
                f(g, &x, s.energy_j[i], w);
            }
        }
    }

    /// Calls `f(row, x, y, w)` for each row in `range` with the model row `x` at the
    /// stack's contention `theta`, in seconds, `y` in J.
    pub(crate) fn visit(&self, range: Range<usize>, mut f: impl FnMut(usize, &[f64], f64, f64)) {
        let p = self.unknowns();
        if !(self.occupancy && self.theta != 0.0) {
            // At no contention the model row is the augmented row's head: no copy.
            self.visit_augmented(range, |g, a, y, w| f(g, &a[..p], y, w));
            return;
        }
        let mut x = vec![0.0; p];
        self.visit_augmented(range, |g, a, y, w| {
            self.model_row(a, &mut x);
            f(g, &x, y, w);
        });
    }

    /// The model row of augmented row `a` at the stack's contention.
    #[inline]
    pub(crate) fn model_row(&self, a: &[f64], x: &mut [f64]) {
        let p = self.unknowns();
        x.copy_from_slice(&a[..p]);
        if self.occupancy && self.theta != 0.0 {
            for (j, xj) in x.iter_mut().enumerate().take(self.keys.len() + 1).skip(1) {
                *xj -= self.theta * a[p + j - 1];
            }
        }
    }

    /// The model's factor at contention `theta` from the augmented factor `acc`:
    /// `R[:, j] − θ·R[:, aux(j)]` for the type columns, and `z`.
    pub(crate) fn model_r(&self, acc: &TriAccumulator, theta: f64) -> (DMatrix<f64>, DVector<f64>) {
        let p = self.unknowns();
        let all: Vec<usize> = (0..p).collect();
        let mut r = acc.r_columns(&all);
        if self.occupancy && theta != 0.0 {
            let aux: Vec<usize> = (1..=self.keys.len()).map(|j| p + j - 1).collect();
            let ra = acc.r_columns(&aux);
            for (c, j) in (1..=self.keys.len()).enumerate() {
                let col = ra.column(c).clone_owned();
                r.column_mut(j).axpy(-theta, &col, 1.0);
            }
        }
        (r, acc.z())
    }

    /// `R[:, aux]·v`: the factor of `Σ_k v_k U_k` (the contention's derivative direction
    /// for powers `v`), from the augmented factor.
    pub(crate) fn occupancy_direction(&self, acc: &TriAccumulator, v: &[f64]) -> DVector<f64> {
        let p = self.unknowns();
        let aux: Vec<usize> = (1..=self.keys.len()).map(|j| p + j - 1).collect();
        let ra = acc.r_columns(&aux);
        ra * DVector::from_column_slice(v)
    }

    /// Interval lengths of every row, ns, in row order.
    pub(crate) fn dt_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.systems
            .iter()
            .flat_map(|s| (0..s.intervals()).map(move |i| s.dt_ns(i)))
    }

    /// Column labels: `base`, then the keys, then `base drift`.
    pub(crate) fn label(&self, j: usize) -> String {
        if j == 0 {
            "base".to_owned()
        } else if j <= self.keys.len() {
            self.keys[j - 1].to_string()
        } else {
            "base drift".to_owned()
        }
    }
}

fn total_span(s: &DomainSystem) -> u64 {
    s.window_ns().map_or(0, |(a, b)| b - a)
}

pub(crate) fn merge_stats(into: &mut TypeStats, s: &TypeStats) {
    into.count += s.count;
    into.in_window += s.in_window;
    into.total_ns += s.total_ns;
    into.clipped_ns += s.clipped_ns;
    into.min_ns = into.min_ns.min(s.min_ns);
    into.max_ns = into.max_ns.max(s.max_ns);
    into.contained += s.contained;
    into.occ_ns += s.occ_ns;
    into.occ_total_ns += s.occ_total_ns;
}

/// Contiguous block `f` of `k` over `n` rows.
pub(crate) fn fold_range(n: usize, k: usize, f: usize) -> Range<usize> {
    (f * n / k)..((f + 1) * n / k)
}

/// One triangle of the augmented rows per fold (a single one when `folds < 2`), from one
/// pass over the rows.
pub(crate) fn accumulate(stack: &Stack<'_>, folds: usize) -> Vec<TriAccumulator> {
    let n = stack.rows();
    let k = folds.max(1);
    (0..k)
        .map(|f| accumulate_ranges(stack, std::slice::from_ref(&fold_range(n, k, f))))
        .collect()
}

/// The weighted rows of `ranges`, folded into one triangle.
fn accumulate_ranges(stack: &Stack<'_>, ranges: &[Range<usize>]) -> TriAccumulator {
    let p = stack.augmented();
    let mut acc = TriAccumulator::new(p);
    let mut row = vec![0.0; p + 1];
    for r in ranges {
        stack.visit_augmented(r.clone(), |_, x, y, w| {
            if w <= 0.0 {
                return;
            }
            let sw = w.sqrt();
            for (o, v) in row.iter_mut().zip(x) {
                *o = v * sw;
            }
            row[p] = y * sw;
            acc.push(&row);
        });
    }
    acc.flush();
    acc
}

/// A solution of the accumulated problem.
#[derive(Clone, Debug)]
pub(crate) struct Solved {
    /// Coefficients, W (0 for excluded columns).
    pub(crate) coef: Vec<f64>,
    /// Columns that entered the solve (nonzero norm).
    pub(crate) included: Vec<usize>,
    /// Their norms (the scaling applied).
    pub(crate) norms: Vec<f64>,
    /// Per included column: free (not held at zero by NNLS).
    pub(crate) free: Vec<bool>,
    /// `R[:, included] · diag(1/norms)`.
    pub(crate) scaled: DMatrix<f64>,
    /// The unconstrained least-squares solution, W (0 for excluded columns): equal to
    /// `coef` under OLS, and the centre of every interval under NNLS.
    pub(crate) ols: Vec<f64>,
}

/// Solves the accumulated least-squares problem with the chosen solver, at the stack's
/// contention.
pub(crate) fn solve(acc: &TriAccumulator, stack: &Stack<'_>, solver: Solver) -> Solved {
    let (r, z) = stack.model_r(acc, stack.theta);
    solve_r(&r, z, solver)
}

/// Solves `min ‖r·b − z‖` (a factor `r` of the model's columns) with the chosen solver.
pub(crate) fn solve_r(r: &DMatrix<f64>, z: DVector<f64>, solver: Solver) -> Solved {
    let p = r.ncols();
    let norm = |j: usize| r.column(j).norm();
    let included: Vec<usize> = (0..p).filter(|&j| norm(j) > 0.0).collect();
    let norms: Vec<f64> = included.iter().map(|&j| norm(j)).collect();
    let mut a = r.select_columns(&included);
    for (k, d) in norms.iter().enumerate() {
        a.column_mut(k).unscale_mut(*d);
    }
    let unconstrained = ols(&a, &z);
    let (xs, free) = match solver {
        Solver::Nnls => {
            let s = nnls(&a, &z);
            (s.x, s.passive)
        }
        Solver::Ols => (unconstrained.clone(), vec![true; included.len()]),
    };
    let mut coef = vec![0.0; p];
    let mut ols_coef = vec![0.0; p];
    for (k, &j) in included.iter().enumerate() {
        coef[j] = xs[k] / norms[k];
        ols_coef[j] = unconstrained[k] / norms[k];
    }
    Solved {
        coef,
        included,
        norms,
        free,
        scaled: a,
        ols: ols_coef,
    }
}

/// QR when `a` has full column rank, minimum-norm SVD solution otherwise.
fn ols(a: &DMatrix<f64>, z: &DVector<f64>) -> DVector<f64> {
    if a.ncols() == 0 {
        return DVector::zeros(0);
    }
    let sv = a.singular_values();
    let (smax, smin) = (sv.max(), sv.min());
    if smin > RANK_TOL * smax {
        let qr = a.clone().qr();
        let mut qtz = z.clone();
        qr.q_tr_mul(&mut qtz);
        let r = qr.r();
        let n = a.ncols();
        if let Some(x) = r
            .view((0, 0), (n, n))
            .solve_upper_triangular(&qtz.rows(0, n).into_owned())
        {
            return x;
        }
    }
    lstsq_min_norm(a, z)
}

/// Fits one domain from its rows stacked over one or more traces: the auto weights (when
/// asked), the contention's profile (when the occupancy columns exist), the powers, then
/// everything [`diagnostics::analyse`] and [`super::departures`] say about them.
pub(crate) fn fit_stack(stack: &mut Stack<'_>, opts: &AttributionOptions) -> DomainFit {
    if stack.keys.len() > MAX_TYPES {
        let mut fit = super::large::fit_large(stack, opts);
        fit.diagnostics.weights = opts.weights.describe().to_owned();
        return fit;
    }
    stack.enable(opts.drift, opts.contention);
    let n = stack.rows();
    // Contiguous-block cross-validation needs at least two rows per fold to mean anything.
    let folds = if opts.cv_folds >= 2 && n >= 2 * opts.cv_folds {
        opts.cv_folds
    } else {
        1
    };
    // The sampled frequency: reported always, a regressor when asked (`frequency.rs`).
    let mut frequency = super::frequency::ratios(stack).map(|(r, mut f)| {
        if opts.frequency {
            stack.freq = r;
            super::frequency::profile(stack, &mut f, opts.solver);
        }
        f
    });
    if opts.weights == RowWeights::Auto {
        variance_weights(stack, opts.solver);
    }
    let accs = accumulate(stack, folds);
    let mut full = accs[0].clone();
    for a in &accs[1..] {
        full.merge(a);
    }
    let profiled = stack
        .occupancy
        .then(|| super::contention::profile(stack, &full, opts.solver));
    stack.theta = profiled.as_ref().map_or(0.0, |p| p.theta);
    let mut solved = solve(&full, stack, opts.solver);
    let mut theta = profiled.as_ref().filter(|p| p.identified).map(|p| p.theta);
    let mut out = diagnostics::analyse(stack, &solved, &accs, &full, folds, opts, theta);
    // A contention the data barely constrain (its 95 % interval moves the factor of the
    // busiest occupancy by more than half) identifies nothing: hold it at 0, so that the
    // powers are what the data do give, the powers at the run's occupancy.
    let loose = 0.5 / (stack.max_k().max(2) - 1) as f64;
    if theta.is_some()
        && out
            .theta_se
            .is_none_or(|se| out.theta_t.unwrap_or(out.t95) * se > loose)
    {
        theta = None;
        stack.theta = 0.0;
        solved = solve(&full, stack, opts.solver);
        out = diagnostics::analyse(stack, &solved, &accs, &full, folds, opts, None);
    }
    out.diagnostics.weights = opts.weights.describe().to_owned();
    out.diagnostics.covariance = out.cov_method.clone();
    let k = stack.keys.len();
    let layout = CovLayout {
        types: k,
        drift: stack.drift,
        contention: theta.is_some(),
    };
    let first = stack.systems[0];
    let mut estimates = out.estimates;
    let drift = stack.drift.then(|| estimates.remove(1 + k));
    let base = estimates.remove(0);
    let mut types = estimates;
    let contention = stack.occupancy.then(|| {
        let mean_k = {
            let (mut w, mut t) = (0.0, 0.0);
            for s in &stack.systems {
                let m = s.occupancy.mean_busy_k();
                let busy: u64 = s.occupancy.time_by_k_ns.iter().skip(1).sum();
                w += m * busy as f64;
                t += busy as f64;
            }
            if t > 0.0 {
                w / t
            } else {
                0.0
            }
        };
        super::contention::ContentionFit {
            c: contention_estimate(theta, out.theta_se, out.theta_t.unwrap_or(out.t95)),
            identified: theta.is_some(),
            max_k: stack.max_k(),
            mean_k,
        }
    });
    let mut types_at_run = vec![None; k];
    if stack.occupancy {
        for (j, est) in types.iter_mut().enumerate() {
            let st = &stack.stats[j];
            if st.clipped_ns == 0 {
                continue;
            }
            let at = at_run(
                est,
                j,
                st,
                stack.theta,
                theta.is_some(),
                &solved,
                out.covariance.as_ref(),
                &layout,
                out.at_run_t.get(j).copied().unwrap_or(out.t95),
                opts,
            );
            if theta.is_none() && st.occ_ns > 0 {
                // The occupancy hardly varied: this power is the power at the run's
                // occupancy, and nothing in the data gives the power alone.
                est.flags.push(Flag::ContentionUnknown);
                est.issues.push(describe_contention_unknown());
                est.reliable = false;
            }
            types_at_run[j] = Some(at);
        }
        if theta.is_none() {
            out.diagnostics.warnings.push(
                "contention cannot be separated from the powers: the number of tasks running \
                 at once hardly varied, so each power is the power at the run's occupancy, \
                 not alone (flagged `contention?`); run each type alone on one worker and on \
                 every worker (`--type-calibration`) to separate them"
                    .to_owned(),
            );
        }
    } else if let Some(why) = stack
        .systems
        .iter()
        .find_map(|s| s.occupancy.skipped.clone())
        .filter(|_| stack.max_k() >= 2)
    {
        out.diagnostics
            .warnings
            .push(format!("contention is not modelled: {why}"));
    } else if stack.max_k() >= 2 && k > MAX_CONTENTION_TYPES {
        out.diagnostics.warnings.push(format!(
            "contention is not modelled: {k} task types, more than the {MAX_CONTENTION_TYPES} \
             its profile takes"
        ));
    }
    let mut fit = DomainFit {
        domain: first.domain(),
        name: first.info.name.clone(),
        keys: stack.keys.clone(),
        base,
        types,
        stats: stack.stats.clone(),
        noise: None,
        residuals_j: out.residuals_j,
        drift,
        contention,
        frequency: frequency.take(),
        types_at_run,
        covariance_w2: out.covariance,
        estimable_covariance: out.estimable,
        layout,
        t95: out.t95,
        diagnostics: out.diagnostics,
    };
    super::departures::check(stack, &mut fit, opts);
    let rows: Vec<usize> = (0..stack.rows()).collect();
    fit.noise = noise_of(stack, &rows, &fit);
    fit
}

/// A fit's noise model from the stack rows `rows` (its residuals, in order), on a sample
/// of them past [`SAMPLE_ROWS`].
fn noise_of(stack: &Stack<'_>, rows: &[usize], fit: &DomainFit) -> Option<NoiseModel> {
    if fit.residuals_j.len() != rows.len() {
        return None;
    }
    let powers: Vec<f64> = fit.types.iter().map(|e| e.value_w).collect();
    let (sub_rows, sub_res): (Vec<usize>, Vec<f64>) = sample_blocks(rows.len())
        .into_iter()
        .flatten()
        .map(|i| (rows[i], fit.residuals_j[i]))
        .unzip();
    NoiseModel::fit(noise_rows(stack, &sub_rows, &sub_res, &powers).into_iter())
}

/// The contention as an estimate: its value, standard error and 95% interval (no sign
/// constraint: a package can be super-additive), or 0 without an interval when not
/// identified.
fn contention_estimate(theta: Option<f64>, se: Option<f64>, t: f64) -> Estimate {
    match (theta, se) {
        (Some(c), Some(se)) => Estimate {
            value_w: c,
            se_w: Some(se),
            ci95_w: Some([c - t * se, c + t * se]),
            at_bound: false,
            reliable: true,
            flags: Vec::new(),
            issues: Vec::new(),
        },
        (c, _) => Estimate {
            value_w: c.unwrap_or(0.0),
            se_w: None,
            ci95_w: None,
            at_bound: false,
            reliable: false,
            flags: vec![Flag::NoInterval],
            issues: vec!["not identified by the run's occupancy".to_owned()],
        },
    }
}

fn describe_contention_unknown() -> String {
    "contention unknown: the run's occupancy did not vary enough to tell its power alone from \
     its power beside other tasks; this is its power at the run's occupancy"
        .to_owned()
}

/// A type's mean power at the occupancy it ran at: `p_k·(T_k − c·U_k)/T_k`, its interval
/// from the covariance of `p_k` and `c` (delta method), its flags those of the power alone
/// that still apply.
#[allow(clippy::too_many_arguments)]
fn at_run(
    alone: &Estimate,
    j: usize,
    st: &TypeStats,
    theta: f64,
    fitted: bool,
    solved: &Solved,
    cov: Option<&Vec<Vec<f64>>>,
    layout: &CovLayout,
    t: f64,
    opts: &AttributionOptions,
) -> Estimate {
    let (tt, uu) = (st.clipped_ns as f64, st.occ_ns as f64);
    let ratio = (tt - theta * uu) / tt;
    let value = alone.value_w * ratio;
    let mut grad = vec![0.0; layout.len()];
    grad[1 + j] = ratio;
    if fitted {
        grad[layout.len() - 1] = -solved.ols[1 + j] * uu / tt;
    }
    let se = cov.and_then(|c| {
        let v: f64 = (0..grad.len())
            .map(|a| grad[a] * (0..grad.len()).map(|b| c[a][b] * grad[b]).sum::<f64>())
            .sum();
        (v.is_finite() && v >= 0.0).then(|| v.sqrt())
    });
    let centre = solved.ols[1 + j] * ratio;
    let ci = se.map(|s| {
        let (mut lo, mut hi) = (centre - t * s, centre + t * s);
        if opts.solver == Solver::Nnls {
            lo = lo.max(0.0);
            hi = hi.max(0.0);
        }
        [lo.min(value), hi.max(value)]
    });
    let mut flags: Vec<Flag> = alone
        .flags
        .iter()
        .filter(|f| {
            !matches!(
                f,
                Flag::Imprecise { .. } | Flag::ContentionUnknown | Flag::NearlyCollinear { .. }
            )
        })
        .cloned()
        .collect();
    match ci {
        Some([lo, hi]) if value > 0.0 && !alone.at_bound => {
            let pct = 100.0 * (value - lo).max(hi - value) / value;
            if pct > opts.precision_pct {
                flags.push(Flag::Imprecise {
                    half_width_pct: pct,
                    threshold_pct: opts.precision_pct,
                });
            }
        }
        None if !flags
            .iter()
            .any(|f| matches!(f, Flag::NoInterval | Flag::Inseparable { .. })) =>
        {
            flags.push(Flag::NoInterval)
        }
        _ => {}
    }
    let issues = flags.iter().map(|f| f.short().to_owned()).collect();
    Estimate {
        value_w: value,
        se_w: se,
        ci95_w: ci,
        at_bound: alone.at_bound,
        reliable: flags.is_empty(),
        flags,
        issues,
    }
}

/// Rows above which the variance models are fitted on a sample of the rows.
const SAMPLE_ROWS: usize = 1 << 17;

/// `0..n` whole, or, past [`SAMPLE_ROWS`], 64 blocks of rows spread evenly over it (blocks,
/// not single rows: the residuals' correlation in time is kept in each).
fn sample_blocks(n: usize) -> Vec<Range<usize>> {
    if n <= SAMPLE_ROWS {
        return std::iter::once(0..n).collect();
    }
    let blocks = 64;
    let len = SAMPLE_ROWS / blocks;
    (0..blocks)
        .map(|b| {
            let start = (b * (n - len)) / (blocks - 1);
            start..start + len
        })
        .collect()
}

/// Fits the rows' error variance `a + b·Δt` to the squared residuals of a first fit (at its
/// own profiled contention, with the weights the stack already has) and multiplies the
/// stack's weights by `1 / (a + b·Δt)`, normalised to a mean of 1.
fn variance_weights(stack: &mut Stack<'_>, solver: Solver) {
    let n = stack.rows();
    if n < 8 {
        return;
    }
    // The first fit only sets the weights' shape: on a long run, evenly spread blocks of
    // rows serve as well as all of them, at a fraction of the cost.
    let blocks = sample_blocks(n);
    let acc = accumulate_ranges(stack, &blocks);
    stack.theta = if stack.occupancy {
        super::contention::profile(stack, &acc, solver).theta
    } else {
        0.0
    };
    let solved = solve(&acc, stack, solver);
    let mut rows = Vec::with_capacity(n.min(SAMPLE_ROWS));
    for r in &blocks {
        stack.visit(r.clone(), |_, x, y, w| {
            if w <= 0.0 {
                return;
            }
            let r = y - x.iter().zip(&solved.coef).map(|(a, b)| a * b).sum::<f64>();
            rows.push((x[0], w * r * r));
        });
    }
    stack.theta = 0.0;
    let Some(NoiseModel {
        per_interval_j2: a,
        per_second_j2: b,
        ..
    }) = NoiseModel::fit(rows.into_iter().map(|(d, r2)| (d, 0.0, r2)))
    else {
        return;
    };
    let dts: Vec<f64> = stack.dt_ns().map(|d| d as f64 * 1e-9).collect();
    let floor = 1e-6 * (a + b * dts.iter().cloned().fold(0.0, f64::max));
    let raw: Vec<f64> = dts.iter().map(|d| 1.0 / (a + b * d).max(floor)).collect();
    let mean = raw.iter().sum::<f64>() / raw.len() as f64;
    let w = stack.weights.get_or_insert_with(|| vec![1.0; n]);
    for (x, r) in w.iter_mut().zip(&raw) {
        *x *= r / mean;
    }
}

/// [`fit_group`] over several groups at once, one thread each (domains are independent:
/// a run's packages, DRAM and GPUs fit side by side), results in the groups' order.
pub(crate) fn fit_groups(
    groups: Vec<(Vec<&DomainSystem>, Vec<bool>)>,
    opts: &AttributionOptions,
) -> Vec<Result<DomainFit, AttributionError>> {
    if groups.len() < 2 {
        return groups
            .into_iter()
            .map(|(g, p)| fit_group(g, p, opts))
            .collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .map(|(g, p)| scope.spawn(move || fit_group(g, p, opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Fits one domain read by several sensors at once: `systems[i]` with `primary[i]` true
/// are the domain's primary readings (one per stacked trace); the others are second
/// sensors of the same device (NVML's power readings beside its energy counter), whose rows
/// enter the same least-squares problem through their own sensor responses, sharing the
/// base and type unknowns.
///
/// The sensors are not equally precise, so each one's rows are weighted by the inverse of
/// its residual variance in a fit of its own (feasible generalised least squares, the
/// primary's scale kept). Without a second sensor this is [`fit_stack`] unchanged.
/// Residuals, counts and the measured energy are the primary readings' only; the
/// diagnostics name every sensor and its weight.
pub(crate) fn fit_group(
    systems: Vec<&DomainSystem>,
    primary: Vec<bool>,
    opts: &AttributionOptions,
) -> Result<DomainFit, AttributionError> {
    let joint = primary.iter().any(|p| !p) && primary.iter().any(|p| *p);
    let mut stack = Stack::with_primary(systems.clone(), primary.clone(), &opts.weights)?;
    if !joint {
        return Ok(fit_stack(&mut stack, opts));
    }
    let alone = AttributionOptions {
        cv_folds: 0,
        ..opts.clone()
    };
    let mut var = Vec::with_capacity(systems.len());
    for s in &systems {
        let mut one = Stack::new(vec![*s], &opts.weights)?;
        let f = fit_stack(&mut one, &alone);
        let n = f.residuals_j.len();
        let dof = n.saturating_sub(one.unknowns()).max(1);
        let rss: f64 = f.residuals_j.iter().map(|r| r * r).sum();
        var.push((rss / dof as f64).max(f64::MIN_POSITIVE));
    }
    let reference = systems
        .iter()
        .zip(&primary)
        .zip(&var)
        .filter(|((_, p), _)| **p)
        .map(|(_, v)| *v)
        .fold(0.0, f64::max);
    let scale: Vec<f64> = var
        .iter()
        .map(|v| (reference / v).clamp(1e-6, 1e6))
        .collect();
    stack.scale_systems(&scale);
    let mut fit = fit_stack(&mut stack, opts);
    let keep: Vec<usize> = stack.primary_rows().collect();
    fit.residuals_j = keep.iter().map(|&r| fit.residuals_j[r]).collect();
    fit.noise = noise_of(&stack, &keep, &fit);
    fit.diagnostics.joint = systems
        .iter()
        .zip(&primary)
        .zip(scale.iter().zip(&var))
        .map(|((s, p), (w, v))| {
            format!(
                "{} ({}{}): {} rows, residual SD {:.3} J, weight {:.3}",
                s.info.name,
                sensor_words(s.info.sensor),
                if *p { ", primary" } else { "" },
                s.intervals(),
                v.sqrt(),
                w
            )
        })
        .collect();
    Ok(fit)
}

/// A sensor kind in words, for the diagnostics.
fn sensor_words(k: taskwatt_traces::SensorKind) -> String {
    use taskwatt_traces::SensorKind;
    match k {
        SensorKind::EnergyCounter => "energy counter".to_owned(),
        SensorKind::SampledCounter { sampled_ns } => {
            format!(
                "energy counter sampling {} ms per update",
                sampled_ns / 1_000_000
            )
        }
        SensorKind::IntegratedPower { window_ns } => {
            format!("power averaged over {} ms", window_ns / 1_000_000)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_noise_model_finds_the_meters_noise_and_the_tasks_variation() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        // Rows of 5-20 ms read by a meter with 2 W of white noise per ms, holding tasks of
        // 0.2-2 ms at 12 W whose energy varies by 10 % each (not the model's form: each
        // row's variance is the sum over its own tasks, whose durations vary).
        let mut rng = StdRng::seed_from_u64(7);
        let normal = move |r: &mut StdRng| -> f64 {
            let (u, v): (f64, f64) = (r.random::<f64>().max(1e-12), r.random());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let (p, mean_d) = (12.0, 1.1e-3);
        let mut rows = Vec::new();
        for _ in 0..4000 {
            let ms = rng.random_range(5..=20);
            let dt = ms as f64 * 1e-3;
            let mut r = 0.0;
            for _ in 0..ms {
                r += 2.0 * 1e-3 * normal(&mut rng);
            }
            let mut busy = 0.0;
            let fill = rng.random::<f64>() * dt * 2.0;
            while busy < fill {
                let d = rng.random_range(0.2e-3..2.0e-3);
                busy += d;
                r += 0.1 * normal(&mut rng) * p * d;
            }
            let q = NoiseModel::task_q(std::iter::once((p, busy, mean_d)));
            rows.push((dt, q, r * r));
        }
        let n = NoiseModel::fit(rows.into_iter()).unwrap();
        assert!((n.per_second_j2 / 4e-3 - 1.0).abs() < 0.25, "{n:?}");
        // E[d²]/E[d] over 0.2-2 ms is 1.24 ms against the 1.1 ms mean used in q.
        let v2 = n.per_task * mean_d / 1.24e-3;
        assert!((v2 / 0.01 - 1.0).abs() < 0.25, "{n:?}");
        // No error per reading: `a` small beside a 10 ms row's variance.
        assert!(n.per_interval_j2 < 0.15 * n.per_second_j2 * 0.01, "{n:?}");
        // Too few rows: no model.
        assert!(NoiseModel::fit([(1.0, 0.0, 1.0); 5].into_iter()).is_none());
    }

    #[test]
    fn folds_are_contiguous_and_cover_every_row() {
        let n = 17;
        let mut next = 0;
        for f in 0..5 {
            let r = fold_range(n, 5, f);
            assert_eq!(r.start, next);
            assert!(r.len() >= 3);
            next = r.end;
        }
        assert_eq!(next, n);
    }

    #[test]
    fn ols_uses_qr_on_full_rank_and_svd_otherwise() {
        let a = DMatrix::from_row_slice(3, 2, &[1.0, 0.0, 1.0, 1.0, 1.0, 2.0]);
        let z = DVector::from_vec(vec![2.0, 1.0, 0.0]);
        let x = ols(&a, &z);
        assert!(
            (x[0] - 2.0).abs() < 1e-12 && (x[1] + 1.0).abs() < 1e-12,
            "{x}"
        );
        let a = DMatrix::from_row_slice(2, 2, &[1.0, 1.0, 2.0, 2.0]);
        let z = DVector::from_vec(vec![2.0, 4.0]);
        let x = ols(&a, &z);
        assert!(
            (x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12,
            "{x}"
        );
    }
}
