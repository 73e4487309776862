//! The numeric kernel: one domain's rows stacked from its systems ([`Stack`]), streamed
//! into Givens triangles per cross-validation fold, and the solves on them ([`solve`],
//! [`solve_r`]), with the tolerance under which a direction counts as collinear.

use std::collections::HashMap;
use std::ops::Range;

use nalgebra::{DMatrix, DVector};

use super::error::AttributionError;
use super::key::TypeKey;
use super::nnls::{lstsq_min_norm, nnls};
use super::options::*;
use super::qr::TriAccumulator;
use super::system::{DomainSystem, TypeStats};

/// Relative singular-value cut-off below which a direction counts as exactly collinear.
pub(crate) const RANK_TOL: f64 = 1e-9;

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
pub(crate) fn accumulate_ranges(stack: &Stack<'_>, ranges: &[Range<usize>]) -> TriAccumulator {
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

/// Loading above which a column belongs to an exact null vector (unit-norm vector).
pub(crate) const NULL_LOADING: f64 = 1e-3;

/// Diagonal of `(AᵀA)⁻¹` for a column-scaled `A`, by SVD; `None` for coefficients that
/// load on a null direction (not identifiable).
pub(crate) fn scaled_variances(a: &DMatrix<f64>) -> Vec<Option<f64>> {
    let m = a.ncols();
    if m == 0 {
        return Vec::new();
    }
    let svd = a.clone().svd(false, true);
    let s = &svd.singular_values;
    let v_t = svd.v_t.as_ref().expect("V was computed");
    let smax = s.max();
    (0..m)
        .map(|k| {
            let mut var = 0.0;
            for j in 0..s.len() {
                let v = v_t[(j, k)];
                if s[j] <= RANK_TOL * smax {
                    if v.abs() > NULL_LOADING {
                        return None;
                    }
                } else {
                    var += v * v / (s[j] * s[j]);
                }
            }
            Some(var)
        })
        .collect()
}

/// Two-sided 95% quantile of Student's t with `dof` degrees of freedom (a table to 10,
/// then the Cornish-Fisher expansion, within 2e-4 of the exact value); infinite below 1.
pub(crate) fn t975(dof: f64) -> f64 {
    const TABLE: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    if dof.is_nan() || dof < 1.0 {
        return f64::INFINITY;
    }
    if dof < 11.0 {
        return TABLE[dof as usize - 1];
    }
    let z: f64 = 1.959_963_984_540_054;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * dof)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * dof * dof)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * dof.powi(3))
}

#[cfg(test)]
mod tests {
    use super::*;

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
