//! Non-negative least squares: `min ‖A x − b‖` subject to `x ≥ 0`.
//!
//! Lawson & Hanson's active-set algorithm ("Solving Least Squares Problems", 1974,
//! ch. 23). Powers are physically non-negative: a negative coefficient from ordinary least
//! squares means the data cannot separate that type, and clamping it after the fact would
//! leave the other coefficients fitted around a wrong value. NNLS instead refits with the
//! variable held at zero.
//!
//! Sketch: variables are either passive (free, `x_j > 0`) or at the bound (`x_j = 0`).
//! The outer loop frees the bound variable whose gradient `w = Aᵀ(b − A x)` is most
//! positive; the inner loop solves the unconstrained problem on the passive set and, if
//! that leaves some passive variable ≤ 0, moves along the segment to the first one that
//! hits zero and returns it to the bound. At exit the KKT conditions hold: `x ≥ 0`,
//! `w ≤ 0` on the bound set, `w = 0` on the passive set (within `tol`).

use nalgebra::{DMatrix, DVector};

/// The result of [`nnls`].
#[derive(Clone, Debug, PartialEq)]
pub struct NnlsSolution {
    /// The minimiser, `x ≥ 0`.
    pub x: DVector<f64>,
    /// `true` for variables that are free (not held at zero).
    pub passive: Vec<bool>,
    /// Outer iterations taken.
    pub iterations: usize,
    /// `false` if the iteration cap (`3n + 10`) stopped the loop first.
    pub converged: bool,
}

/// Solves `min ‖A x − b‖₂` subject to `x ≥ 0` by the Lawson-Hanson algorithm.
///
/// Works for any shape, including rank-deficient `A` (subproblems are solved by SVD with
/// a relative cut-off, which picks the minimum-norm solution on the passive set).
pub fn nnls(a: &DMatrix<f64>, b: &DVector<f64>) -> NnlsSolution {
    let (m, n) = a.shape();
    assert_eq!(b.len(), m, "nnls: b has {} rows, A has {m}", b.len());
    let mut x = DVector::zeros(n);
    let mut passive = vec![false; n];
    let a_norm1 = (0..n)
        .map(|j| a.column(j).abs().sum())
        .fold(0.0f64, f64::max);
    let tol = 10.0 * f64::EPSILON * (m.max(n) as f64) * a_norm1 * b.norm().max(f64::MIN_POSITIVE);
    // Variables that failed to enter (rounding made their first solve non-positive):
    // skipped until some other variable enters, which is how Lawson-Hanson avoid cycling.
    let mut banned = vec![false; n];
    let max_iter = 3 * n + 10;
    let mut iterations = 0;
    let mut converged = false;
    while iterations < max_iter {
        let w = a.tr_mul(&(b - a * &x));
        let pick = (0..n)
            .filter(|&j| !passive[j] && !banned[j] && w[j] > tol)
            .max_by(|&i, &j| w[i].total_cmp(&w[j]));
        let Some(t) = pick else {
            converged = true;
            break;
        };
        iterations += 1;
        passive[t] = true;
        let mut first = true;
        loop {
            let s = solve_passive(a, b, &passive);
            let feasible = (0..n).all(|j| !passive[j] || s[j] > 0.0);
            if feasible {
                x = s;
                banned.iter_mut().for_each(|v| *v = false);
                break;
            }
            if first && s[t] <= 0.0 {
                // The entering variable itself came out non-positive: undo and skip it.
                passive[t] = false;
                banned[t] = true;
                break;
            }
            first = false;
            // Step from x towards s until the first passive variable reaches zero.
            let (alpha, hit) = (0..n)
                .filter(|&j| passive[j] && s[j] <= 0.0)
                .map(|j| (x[j] / (x[j] - s[j]), j))
                .fold((f64::INFINITY, t), |m, c| if c.0 < m.0 { c } else { m });
            x += (&s - &x) * alpha;
            // The variable that set the step is exactly at zero; rounding may leave others
            // just below it.
            x[hit] = 0.0;
            for j in 0..n {
                if passive[j] && x[j] <= 0.0 {
                    passive[j] = false;
                    x[j] = 0.0;
                }
            }
            if !passive.iter().any(|&p| p) {
                break;
            }
        }
    }
    NnlsSolution {
        x,
        passive,
        iterations,
        converged,
    }
}

/// Unconstrained least squares on the passive columns; zero elsewhere.
fn solve_passive(a: &DMatrix<f64>, b: &DVector<f64>, passive: &[bool]) -> DVector<f64> {
    let cols: Vec<usize> = (0..passive.len()).filter(|&j| passive[j]).collect();
    let mut out = DVector::zeros(passive.len());
    if cols.is_empty() {
        return out;
    }
    let s = lstsq_min_norm(&a.select_columns(&cols), b);
    for (k, &j) in cols.iter().enumerate() {
        out[j] = s[k];
    }
    out
}

/// Minimum-norm least-squares solution by SVD, singular values below `1e-12 σ_max` cut.
pub(crate) fn lstsq_min_norm(a: &DMatrix<f64>, b: &DVector<f64>) -> DVector<f64> {
    let svd = a.clone().svd(true, true);
    let smax = svd.singular_values.iter().copied().fold(0.0, f64::max);
    svd.solve(b, smax * 1e-12).expect("U and V were computed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    fn assert_kkt(a: &DMatrix<f64>, b: &DVector<f64>, sol: &NnlsSolution) {
        let w = a.tr_mul(&(b - a * &sol.x));
        let scale = a.norm() * b.norm() * 1e-9;
        for j in 0..sol.x.len() {
            assert!(sol.x[j] >= 0.0, "x[{j}] = {}", sol.x[j]);
            assert!(
                w[j] <= scale,
                "gradient w[{j}] = {} > 0 at the optimum",
                w[j]
            );
            if sol.x[j] > 0.0 {
                assert!(w[j].abs() <= scale, "w[{j}] = {} on a free variable", w[j]);
            }
        }
        assert!(sol.converged);
    }

    /// The NNLS optimum by enumerating every support (fine for n <= 6).
    fn brute_force(a: &DMatrix<f64>, b: &DVector<f64>) -> (DVector<f64>, f64) {
        let n = a.ncols();
        let mut best = (DVector::zeros(n), b.norm_squared());
        for mask in 1u32..(1 << n) {
            let passive: Vec<bool> = (0..n).map(|j| mask & (1 << j) != 0).collect();
            let s = solve_passive(a, b, &passive);
            if s.iter().all(|&v| v >= -1e-12) {
                let r = (b - a * &s).norm_squared();
                if r < best.1 {
                    best = (s, r);
                }
            }
        }
        best
    }

    #[test]
    fn textbook_case_with_a_negative_unconstrained_solution() {
        // Unconstrained solution is (2, -1): NNLS must drop x1 and refit x0 alone.
        let a = DMatrix::from_row_slice(3, 2, &[1.0, 0.0, 1.0, 1.0, 1.0, 2.0]);
        let b = DVector::from_vec(vec![2.0, 1.0, 0.0]);
        let sol = nnls(&a, &b);
        assert!((sol.x[0] - 1.0).abs() < 1e-12, "{}", sol.x);
        assert_eq!(sol.x[1], 0.0);
        assert_eq!(sol.passive, vec![true, false]);
        assert_kkt(&a, &b, &sol);
    }

    #[test]
    fn consistent_non_negative_systems_are_solved_exactly() {
        let mut seed = 3;
        let a = DMatrix::from_fn(30, 5, |_, _| lcg(&mut seed));
        let x = DVector::from_vec(vec![1.5, 0.0, 2.0, 0.25, 0.0]);
        let b = &a * &x;
        let sol = nnls(&a, &b);
        assert!((&sol.x - &x).amax() < 1e-10, "{}", sol.x);
        assert_kkt(&a, &b, &sol);
    }

    #[test]
    fn matches_brute_force_and_satisfies_kkt_on_random_problems() {
        let mut seed = 11;
        for case in 0..200 {
            let m = 3 + case % 9;
            let n = 1 + case % 6;
            let a = DMatrix::from_fn(m, n, |_, _| lcg(&mut seed));
            let b = DVector::from_fn(m, |_, _| lcg(&mut seed));
            let sol = nnls(&a, &b);
            assert_kkt(&a, &b, &sol);
            let (_, best) = brute_force(&a, &b);
            let got = (&b - &a * &sol.x).norm_squared();
            assert!(
                got <= best + 1e-9 * (1.0 + best),
                "case {case}: {got} > {best}"
            );
        }
    }

    #[test]
    fn rank_deficient_and_empty_problems() {
        // Two identical columns: any split is optimal; the objective must be.
        let a = DMatrix::from_row_slice(3, 2, &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
        let b = DVector::from_vec(vec![2.0, 4.0, 6.0]);
        let sol = nnls(&a, &b);
        assert!((&a * &sol.x - &b).norm() < 1e-10);
        assert_kkt(&a, &b, &sol);
        // b in the negative cone: x = 0.
        let b = DVector::from_vec(vec![-1.0, -2.0, -3.0]);
        let sol = nnls(&a, &b);
        assert_eq!(sol.x, DVector::zeros(2));
        assert_kkt(&a, &b, &sol);
    }
}
