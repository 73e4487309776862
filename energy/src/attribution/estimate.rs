//! What a fit gives for one coefficient ([`Estimate`], with its [`Flag`]s), the noise
//! model of a domain's intervals ([`NoiseModel`]), and the covariance's layout and the
//! half-widths it gives ([`CovLayout`], [`half_width`]).

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

/// One coefficient (base power or a type's power) with its uncertainty.
///
/// A coefficient is *shown as a measurement* (`reliable`) only when nothing is flagged:
/// it has a finite 95% interval, that interval lies within
/// [`AttributionOptions::precision_pct`](super::AttributionOptions::precision_pct) of the value, it is not held at a bound, not
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
    /// if needed, to contain `value_w`. Where the fit flags a departure from its model
    /// ([`Flag::ModelInDoubt`]) it is widened again to the range the power took over the
    /// run, so it can be much wider than `t95 · se_w`: `se_w` (and a model file's
    /// `covariance_w2`, whose diagonal is `se_w²`) stays the fitted average power's, which
    /// is what a prediction of a whole run multiplies. See docs/attribution.md,
    /// "Intervals".
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
    /// The types ran in too few intervals for the powers they share: an idle calibration
    /// gives the fit hundreds of rows, and its residual degrees of freedom, but the types
    /// are pinned by the few rows where they ran, where the fit is nearly exact and its
    /// interval too narrow to trust (a 60 ms graph in 7 of 184 intervals put 4 powers 50
    /// to 94 % off the truth, each with a ±1 % interval).
    FewActiveRows {
        /// Intervals in which some type ran.
        rows: usize,
        /// The type powers (and contention) they pin.
        unknowns: usize,
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
            Flag::FewActiveRows { .. } => "few rows",
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

/// A prediction's 95 % half-width for a measurement: `h`, the half-width from the powers'
/// covariance, combined with the measurement's own noise `var_j2` at the normal quantile
/// (the noise's variance rests on every row of the fit).
pub(crate) fn widen(h: f64, var_j2: f64) -> f64 {
    (h * h + 1.96 * 1.96 * var_j2.max(0.0)).sqrt()
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
