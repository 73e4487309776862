//! Contention: the fit of a domain whose tasks draw less when others run beside them.
//!
//! The model (docs/attribution.md, "Contention"): with `k` of the domain's tasks running,
//! each draws `(1 − c·(k − 1))` of its power alone, so interval `i` reads
//!
//! ```text
//! E_i ≈ P_base·Δt_i + Σ_k p_k·(T_ik − c·U_ik)
//! ```
//!
//! (`U` from `occupancy.rs`). It is linear in the powers for a given `c`: the fit profiles
//! `c` (variable projection: for each `c` the powers are solved exactly, NNLS or OLS, on the
//! small factor `R_model(c) = R[:, T] − c·R[:, U]` of the augmented rows, so no pass over
//! the data is repeated), a grid then a golden-section search on the residual sum of
//! squares. The Jacobian at the optimum adds the column `−Σ_k p_k U_k` for `c`, which is
//! how `c`'s uncertainty reaches every power's interval (`covariance.rs`).
//!
//! `c` is identified only when the occupancy varies independently of the task mix: a run
//! whose tasks always run `W` at a time reads `p_k·(1 − c·(W − 1))` and nothing more. Type
//! calibration gives the contrast (each type alone on one worker, then on every worker).
//! When the Jacobian's `c` direction is (nearly) a combination of the others, the fit
//! keeps `c = 0`, and the powers it gives are the powers at the run's occupancy, not alone:
//! flagged so, with a warning that says how to separate them.

use serde::{Deserialize, Serialize};

use super::options::Solver;
use super::qr::TriAccumulator;
use super::stack::{solve_r, Stack};

/// Condition index of the contention's direction above which it is taken as not
/// identified (the powers' intervals would span orders of magnitude).
const UNIDENTIFIED_INDEX: f64 = 1e4;

/// Grid points of the profile before the golden-section refinement.
const GRID: usize = 41;

/// What the profile found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Profiled {
    /// The contention at the optimum (0 when not identified).
    pub(crate) theta: f64,
    /// Whether the data identify it.
    pub(crate) identified: bool,
    /// The search's bounds.
    pub(crate) bounds: (f64, f64),
}

/// How a domain's contention came out, for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentionFit {
    /// `c`: each task's power falls by this fraction of its power alone per other task
    /// running beside it (with its standard error and 95% interval).
    pub c: super::estimate::Estimate,
    /// Whether the run's occupancy identified `c`; when not, `c` is held at 0 and the
    /// types' powers are at the run's occupancy.
    pub identified: bool,
    /// The most tasks that ran at once on the domain.
    pub max_k: usize,
    /// Mean number of tasks running while any runs.
    pub mean_k: f64,
}

/// Residual sum of squares of the model at contention `theta` (the part the powers
/// change: `‖R(θ)·b − z‖²`).
pub(crate) fn rss(stack: &Stack<'_>, acc: &TriAccumulator, theta: f64, solver: Solver) -> f64 {
    let (r, z) = stack.model_r(acc, theta);
    let s = solve_r(&r, z.clone(), solver);
    (&r * nalgebra::DVector::from_column_slice(&s.coef) - z).norm_squared()
}

/// The minimum of `f` on `[a, b]` by golden-section search, to a bracket narrower than
/// `tol` or after `iters` steps: `(x, f(x))`.
fn golden_min(
    mut f: impl FnMut(f64) -> f64,
    mut a: f64,
    mut b: f64,
    tol: f64,
    iters: usize,
) -> (f64, f64) {
    let g = 0.5 * (5f64.sqrt() - 1.0);
    let (mut x1, mut x2) = (b - g * (b - a), a + g * (b - a));
    let (mut f1, mut f2) = (f(x1), f(x2));
    for _ in 0..iters {
        if f1 <= f2 {
            b = x2;
            (x2, f2) = (x1, f1);
            x1 = b - g * (b - a);
            f1 = f(x1);
        } else {
            a = x1;
            (x1, f1) = (x2, f2);
            x2 = a + g * (b - a);
            f2 = f(x2);
        }
        if (b - a).abs() < tol {
            break;
        }
    }
    if f1 <= f2 {
        (x1, f1)
    } else {
        (x2, f2)
    }
}

/// The minimum of `f` on `[lo, hi]`: a grid of `grid` points, then a golden-section search
/// in the bracket around the best of them (`golden_min`). Returns `(x, f(x))` and the
/// grid's values (the first at `lo`).
pub(crate) fn grid_golden(
    mut f: impl FnMut(f64) -> f64,
    lo: f64,
    hi: f64,
    grid: usize,
    tol: f64,
    iters: usize,
) -> (f64, f64, Vec<f64>) {
    let step = (hi - lo) / (grid.max(2) - 1) as f64;
    let values: Vec<f64> = (0..grid.max(2)).map(|i| f(lo + step * i as f64)).collect();
    let best = values
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i);
    let (x, fx) = golden_min(
        &mut f,
        lo + step * best.saturating_sub(1) as f64,
        lo + step * (best + 1).min(values.len() - 1) as f64,
        tol,
        iters,
    );
    if values[best] < fx {
        (lo + step * best as f64, values[best], values)
    } else {
        (x, fx, values)
    }
}

/// Profiles the contention over `acc` (the full augmented factor).
pub(crate) fn profile(stack: &Stack<'_>, acc: &TriAccumulator, solver: Solver) -> Profiled {
    let k = stack.max_k().max(2) as f64;
    // g(k_max) = 1 − c (k_max − 1) stays within (0.05, 1.3].
    let (lo, hi) = (-0.3 / (k - 1.0), 0.95 / (k - 1.0));
    let (theta, _, _) = grid_golden(
        |t| rss(stack, acc, t, solver),
        lo,
        hi,
        GRID,
        1e-7 * (hi - lo),
        40,
    );
    let identified = identified(stack, acc, theta, solver);
    Profiled {
        theta: if identified { theta } else { 0.0 },
        identified,
        bounds: (lo, hi),
    }
}

/// Whether the contention's direction at `theta` stands apart from the model's columns:
/// the sine of its angle to their span (the part of it no combination of the columns
/// gives) must exceed `1 / UNIDENTIFIED_INDEX`. Measured against the span, not the columns,
/// so that two types that cannot be told apart (their own problem, flagged as such) do not
/// make the contention look unidentified too.
fn identified(stack: &Stack<'_>, acc: &TriAccumulator, theta: f64, solver: Solver) -> bool {
    let (r, z) = stack.model_r(acc, theta);
    let s = solve_r(&r, z, solver);
    let k = stack.keys.len();
    let powers: Vec<f64> = (1..=k).map(|j| s.coef[j]).collect();
    let d = stack.occupancy_direction(acc, &powers);
    let dn = d.norm();
    if dn.is_nan() || dn <= 0.0 || s.scaled.ncols() == 0 {
        return dn > 0.0;
    }
    let d = d / dn;
    let svd = s.scaled.clone().svd(true, false);
    let u = svd.u.expect("U was computed");
    let smax = svd.singular_values.max();
    let mut rest = d.clone();
    for (j, &sj) in svd.singular_values.iter().enumerate() {
        if sj > super::stack::RANK_TOL * smax {
            let uj = u.column(j);
            let c = uj.dot(&d);
            rest.axpy(-c, &uj, 1.0);
        }
    }
    rest.norm() > 1.0 / UNIDENTIFIED_INDEX
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{domain_info, task};
    use super::super::{AttributionOptions, KeyKind, TraceParts, TraceSystems};
    use super::*;
    use taskwatt_traces::{Arch, CodeletInfo, Domain, EnergySample, Timestamp};

    /// Two workers, two types; phases alone and together; energy from the contended
    /// model with `c` (no noise): the profile finds `c`.
    fn scenario(
        c: f64,
        together_only: bool,
    ) -> (Vec<taskwatt_traces::TaskRecord>, Vec<EnergySample>) {
        let ms = 1_000_000u64;
        let mut tasks = Vec::new();
        let mut t = 0u64;
        let powers = [10.0, 16.0];
        let mut timeline: Vec<(u64, u64, usize)> = Vec::new();
        for round in 0..200u64 {
            let ty = (round % 2) as usize;
            let dur = (2 + round % 3) * ms;
            if together_only || round % 4 < 2 {
                // Both workers run the type at once.
                for w in 0..2u32 {
                    tasks.push(task(ty as u32, w, t, t + dur));
                    timeline.push((t, t + dur, ty));
                }
            } else {
                tasks.push(task(ty as u32, (round % 2) as u32, t, t + dur));
                timeline.push((t, t + dur, ty));
            }
            t += dur + ms;
        }
        let end = t + 5 * ms;
        let mut samples = Vec::new();
        let mut e = 0.0;
        let mut prev = 0u64;
        for i in 0..=end / ms {
            let b = i * ms;
            // Energy in [prev, b): base 30 W, each task its power times g(k).
            if i > 0 {
                let mut seg = 30.0 * (b - prev) as f64 * 1e-9;
                let running: Vec<&(u64, u64, usize)> =
                    timeline.iter().filter(|s| s.0 < b && s.1 > prev).collect();
                // Tasks here start and end on whole ms: constant within the interval.
                let g = 1.0 - c * (running.len().max(1) - 1) as f64;
                for s in &running {
                    seg += powers[s.2] * g * (b - prev) as f64 * 1e-9;
                }
                e += seg;
            }
            samples.push(EnergySample {
                domain: 0,
                t: Timestamp(b),
                wall_unix_ns: 0,
                energy_j: e,
                raw: e,
            });
            prev = b;
        }
        (tasks, samples)
    }

    fn fit(c: f64, together_only: bool) -> (Profiled, Vec<f64>) {
        let (tasks, samples) = scenario(c, together_only);
        let domains = [domain_info(0, Domain::CpuPackage { id: 0 }, &[0, 1])];
        let cl: Vec<CodeletInfo> = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, n)| CodeletInfo {
                id: i as u32,
                name: n.to_string(),
                archs: vec![Arch::Cpu],
            })
            .collect();
        let parts = TraceParts::new(&domains, &samples, &cl);
        let sys = TraceSystems::build(&parts, tasks.iter(), KeyKind::Codelet).unwrap();
        let mut stack =
            Stack::new(vec![&sys.domains[0]], &super::super::RowWeights::Uniform).unwrap();
        stack.enable(false, true);
        assert!(stack.occupancy);
        let acc = {
            let mut a = super::super::stack::accumulate(&stack, 1);
            a.remove(0)
        };
        let p = profile(&stack, &acc, AttributionOptions::default().solver);
        stack.theta = p.theta;
        let s = super::super::stack::solve(&acc, &stack, Solver::Nnls);
        (p, s.coef)
    }

    #[test]
    fn the_profile_finds_the_contention_and_the_powers_alone() {
        for c in [0.0, 0.05, 0.1] {
            let (p, coef) = fit(c, false);
            assert!(p.identified, "c = {c}");
            assert!((p.theta - c).abs() < 1e-6, "c = {c}: {}", p.theta);
            for (got, want) in coef.iter().zip([30.0, 10.0, 16.0]) {
                assert!((got - want).abs() < 1e-6 * want, "c = {c}: {coef:?}");
            }
        }
    }

    #[test]
    fn a_fixed_occupancy_leaves_the_contention_unidentified() {
        let (p, coef) = fit(0.08, true);
        assert!(!p.identified);
        assert_eq!(p.theta, 0.0);
        // The powers are then the powers at two tasks at once: 0.92 of alone.
        assert!((coef[1] - 10.0 * 0.92).abs() < 1e-6, "{coef:?}");
    }
}
