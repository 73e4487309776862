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
    /// Every interval counts the same.
    #[default]
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
        }
    }
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
    /// Covariance of the unconstrained coefficients, W², base then types (the matrix
    /// behind every interval); `None` when a coefficient is not identifiable.
    pub covariance_w2: Option<Vec<Vec<f64>>>,
    /// Student-t 95% quantile for the fit's residual degrees of freedom.
    pub t95: f64,
    /// Fit quality and warnings.
    pub diagnostics: FitDiagnostics,
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
/// Column 0 is the base (Δt); column `1 + k` is type `keys[k]`.
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
            RowWeights::Uniform => None,
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
        })
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

    /// Unknowns: base plus one per type.
    pub(crate) fn unknowns(&self) -> usize {
        self.keys.len() + 1
    }

    /// Total rows.
    pub(crate) fn rows(&self) -> usize {
        *self.offsets.last().unwrap()
    }

    /// Calls `f(row, x, y, w)` for each row in `range`, `x` in seconds, `y` in J.
    pub(crate) fn visit(&self, range: Range<usize>, mut f: impl FnMut(usize, &[f64], f64, f64)) {
        let mut x = vec![0.0; self.unknowns()];
        for (si, s) in self.systems.iter().enumerate() {
            let (lo, hi) = (self.offsets[si], self.offsets[si + 1]);
            let (a, b) = (range.start.max(lo), range.end.min(hi));
            let map = &self.maps[si];
            for g in a..b {
                let i = g - lo;
                x.fill(0.0);
                x[0] = s.dt_ns(i) as f64 * 1e-9;
                for (c, col) in s.columns.iter().enumerate() {
                    x[map[c]] = col.time_ns[i] as f64 * 1e-9;
                }
                let w = self.weights.as_ref().map_or(1.0, |w| w[g]);
                f(g, &x, s.energy_j[i], w);
            }
        }
    }

    /// Interval lengths of every row, ns, in row order.
    pub(crate) fn dt_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.systems
            .iter()
            .flat_map(|s| (0..s.intervals()).map(move |i| s.dt_ns(i)))
    }

    /// Column labels: `base`, then the keys.
    pub(crate) fn label(&self, j: usize) -> String {
        if j == 0 {
            "base".to_owned()
        } else {
            self.keys[j - 1].to_string()
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
}

/// Contiguous block `f` of `k` over `n` rows.
pub(crate) fn fold_range(n: usize, k: usize, f: usize) -> Range<usize> {
    (f * n / k)..((f + 1) * n / k)
}

/// One triangle per fold (a single one when `folds < 2`), from one pass over the rows.
pub(crate) fn accumulate(stack: &Stack<'_>, folds: usize) -> Vec<TriAccumulator> {
    let p = stack.unknowns();
    let n = stack.rows();
    let k = folds.max(1);
    let mut accs = vec![TriAccumulator::new(p); k];
    let mut row = vec![0.0; p + 1];
    for (f, acc) in accs.iter_mut().enumerate() {
        stack.visit(fold_range(n, k, f), |_, x, y, w| {
            if w <= 0.0 {
                return;
            }
            let sw = w.sqrt();
            for (r, v) in row.iter_mut().zip(x) {
                *r = v * sw;
            }
            row[p] = y * sw;
            acc.push(&row);
        });
        acc.flush();
    }
    accs
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

/// Solves the accumulated least-squares problem with the chosen solver.
pub(crate) fn solve(acc: &TriAccumulator, p: usize, solver: Solver) -> Solved {
    let included: Vec<usize> = (0..p).filter(|&j| acc.column_norm(j) > 0.0).collect();
    let norms: Vec<f64> = included.iter().map(|&j| acc.column_norm(j)).collect();
    let mut a = acc.r_columns(&included);
    for (k, d) in norms.iter().enumerate() {
        a.column_mut(k).unscale_mut(*d);
    }
    let z = acc.z();
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

/// Fits one domain from its rows stacked over one or more traces.
pub(crate) fn fit_stack(stack: &Stack<'_>, opts: &AttributionOptions) -> DomainFit {
    if stack.keys.len() > MAX_TYPES {
        let mut fit = super::large::fit_large(stack, opts);
        fit.diagnostics.weights = opts.weights.describe().to_owned();
        return fit;
    }
    let p = stack.unknowns();
    let n = stack.rows();
    // Contiguous-block cross-validation needs at least two rows per fold to mean anything.
    let folds = if opts.cv_folds >= 2 && n >= 2 * opts.cv_folds {
        opts.cv_folds
    } else {
        1
    };
    let accs = accumulate(stack, folds);
    let mut full = accs[0].clone();
    for a in &accs[1..] {
        full.merge(a);
    }
    let solved = solve(&full, p, opts.solver);
    let first = stack.systems[0];
    let mut out = diagnostics::analyse(stack, &solved, &accs, folds, opts);
    out.diagnostics.weights = opts.weights.describe().to_owned();
    DomainFit {
        domain: first.domain(),
        name: first.info.name.clone(),
        keys: stack.keys.clone(),
        base: out.estimates.remove(0),
        types: out.estimates,
        stats: stack.stats.clone(),
        residuals_j: out.residuals_j,
        covariance_w2: out.covariance,
        t95: out.t95,
        diagnostics: out.diagnostics,
    }
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
        return Ok(fit_stack(&stack, opts));
    }
    let alone = AttributionOptions {
        cv_folds: 0,
        ..opts.clone()
    };
    let mut var = Vec::with_capacity(systems.len());
    for s in &systems {
        let one = Stack::new(vec![*s], &opts.weights)?;
        let f = fit_stack(&one, &alone);
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
    let mut fit = fit_stack(&stack, opts);
    let keep: Vec<usize> = stack.primary_rows().collect();
    fit.residuals_j = keep.iter().map(|&r| fit.residuals_j[r]).collect();
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
