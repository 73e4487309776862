//! Fitting a domain with more task types than the dense path takes ([`MAX_TYPES`]):
//! memory and time linear in the system's non-zeros.
//!
//! The dense path folds rows into a `(K+2)²` triangle per cross-validation fold and takes
//! SVDs of it: quadratic memory and cubic time in the number of types `K` (5 000 types took
//! 2.3 GB and 31 s before it was capped). Past the cap, the rows are stored once in
//! compressed sparse column form (an interval holds only the types that ran in it, so the
//! non-zeros are about `intervals × types per interval`), columns are scaled to unit norm,
//! and the least-squares problem is solved by cyclic coordinate descent: for each column
//! `j` in turn, `b_j ← b_j + a_jᵀ r / ‖a_j‖²` (clipped at 0 under NNLS), `r ← r − a_j Δb_j`.
//! Each sweep costs one pass over the non-zeros; sweeps stop when no coefficient moves by
//! more than `1e-10` of the largest (or after 2 000 sweeps, with a warning).
//!
//! What is given up: intervals (no covariance without the dense inverse) and the
//! separability analysis. Every power is therefore flagged `no_interval` and none is
//! shown as a measurement; the report says why in a warning. Residuals, R² and MAPE are
//! computed as usual.

use super::conditioning::{InseparableGroup, InseparableReason};
use super::diagnostics::FitDiagnostics;
use super::estimate::{Estimate, Flag};
use super::fit::DomainFit;
use super::options::{AttributionOptions, Solver, MAX_TYPES};
use super::stack::Stack;

/// Sweeps of coordinate descent, at most.
const MAX_SWEEPS: usize = 2_000;
/// Relative change below which the sweeps stop.
const TOL: f64 = 1e-10;

/// Fits one domain's stacked rows by coordinate descent (see the module docs).
pub(crate) fn fit_large(stack: &Stack<'_>, opts: &AttributionOptions) -> DomainFit {
    let p = stack.unknowns();
    let n = stack.rows();
    // Compressed sparse columns of the weighted system, and the weighted energies.
    let mut counts = vec![0usize; p];
    let mut y = vec![0.0; n];
    stack.visit(0..n, |g, x, e, w| {
        let sw = w.sqrt();
        y[g] = e * sw;
        for (j, &v) in x.iter().enumerate() {
            if v != 0.0 && sw > 0.0 {
                counts[j] += 1;
            }
        }
    });
    let mut start = vec![0usize; p + 1];
    for j in 0..p {
        start[j + 1] = start[j] + counts[j];
    }
    let nnz = start[p];
    let mut rows = vec![0u32; nnz];
    let mut vals = vec![0.0f64; nnz];
    let mut fill = start.clone();
    stack.visit(0..n, |g, x, _, w| {
        let sw = w.sqrt();
        if sw == 0.0 {
            return;
        }
        for (j, &v) in x.iter().enumerate() {
            if v != 0.0 {
                rows[fill[j]] = g as u32;
                vals[fill[j]] = v * sw;
                fill[j] += 1;
            }
        }
    });
    let col = |j: usize| (start[j]..start[j + 1]).map(|k| (rows[k] as usize, vals[k]));
    let norm2: Vec<f64> = (0..p)
        .map(|j| col(j).map(|(_, v)| v * v).sum::<f64>())
        .collect();

    // Coordinate descent on the residual r = y − X b.
    let mut b = vec![0.0; p];
    let mut r = y.clone();
    let nonneg = opts.solver == Solver::Nnls;
    let mut sweeps = 0;
    let mut converged = false;
    while sweeps < MAX_SWEEPS {
        sweeps += 1;
        let (mut max_step, mut max_b) = (0.0f64, 0.0f64);
        for j in 0..p {
            if norm2[j] == 0.0 {
                continue;
            }
            let g: f64 = col(j).map(|(i, v)| v * r[i]).sum();
            let mut nb = b[j] + g / norm2[j];
            if nonneg {
                nb = nb.max(0.0);
            }
            let d = nb - b[j];
            if d != 0.0 {
                for (i, v) in col(j) {
                    r[i] -= v * d;
                }
                b[j] = nb;
            }
            max_step = max_step.max((d * norm2[j].sqrt()).abs());
            max_b = max_b.max((b[j] * norm2[j].sqrt()).abs());
        }
        if max_step <= TOL * max_b.max(f64::MIN_POSITIVE) {
            converged = true;
            break;
        }
    }

    // Residuals and fit quality on the unweighted energies.
    let mut residuals = vec![0.0; n];
    let (mut rss_w, mut sw, mut swy) = (0.0, 0.0, 0.0);
    let (mut ape, mut ape_n) = (0.0, 0usize);
    stack.visit(0..n, |g, x, e, w| {
        let fit: f64 = x.iter().zip(&b).map(|(a, c)| a * c).sum();
        let res = e - fit;
        residuals[g] = res;
        rss_w += w * res * res;
        sw += w;
        swy += w * e;
        if e != 0.0 {
            ape += (res / e).abs();
            ape_n += 1;
        }
    });
    let mean = if sw > 0.0 { swy / sw } else { 0.0 };
    let mut tss_w = 0.0;
    stack.visit(0..n, |_, _, e, w| tss_w += w * (e - mean).powi(2));

    let mut inseparable = Vec::new();
    let mut warnings = vec![format!(
        "{} task types: more than the {MAX_TYPES} the dense fit takes, so the powers were \
         solved by coordinate descent ({sweeps} sweep(s), {nnz} non-zeros) without intervals \
         or separability analysis (types the data cannot separate get an arbitrary split): \
         no power is shown as a measurement; group tasks into fewer types (--key codelet) \
         for intervals",
        p - 1
    )];
    if n < p {
        warnings.push(format!(
            "{n} interval(s) for {p} unknowns: the powers are not identified (any of many \
             splits fits as well); sample more often or group tasks into fewer types"
        ));
    }
    if !converged {
        warnings.push(format!(
            "coordinate descent stopped after {MAX_SWEEPS} sweeps before converging: the \
             powers are approximate"
        ));
    }
    let estimate = |j: usize, label: String, issues: &mut Vec<InseparableGroup>| {
        let mut flags = vec![Flag::NoInterval];
        if j > 0 {
            let st = &stack.stats[j - 1];
            if st.clipped_ns == 0 {
                flags.insert(0, Flag::NoTimeInWindow);
                issues.push(InseparableGroup {
                    members: vec![label],
                    reason: InseparableReason::NoTimeInWindow,
                });
            }
        }
        if nonneg && b[j] == 0.0 && norm2[j] > 0.0 {
            flags.push(Flag::AtBound);
        }
        if b[j] < 0.0 {
            flags.push(Flag::Negative);
        }
        Estimate {
            value_w: b[j],
            se_w: None,
            ci95_w: None,
            at_bound: nonneg && b[j] == 0.0 && norm2[j] > 0.0,
            reliable: false,
            issues: flags
                .iter()
                .map(|f| match f {
                    Flag::NoInterval => "no interval: solved iteratively (too many types for \
                                         the dense fit)"
                        .to_owned(),
                    Flag::NoTimeInWindow => "never ran inside the sampled window".to_owned(),
                    Flag::AtBound => "held at 0 W by the non-negativity constraint".to_owned(),
                    _ => "negative power: not physical".to_owned(),
                })
                .collect(),
            flags,
        }
    };
    let base = estimate(0, stack.label(0), &mut inseparable);
    let types: Vec<Estimate> = (1..p)
        .map(|j| estimate(j, stack.label(j), &mut inseparable))
        .collect();
    let first = stack.systems[0];
    let rmse_j = (residuals.iter().map(|r| r * r).sum::<f64>() / n.max(1) as f64).sqrt();
    DomainFit {
        domain: first.domain(),
        name: first.info.name.clone(),
        keys: stack.keys.clone(),
        base,
        types,
        stats: stack.stats.clone(),
        noise: super::estimate::NoiseModel::fit(
            stack
                .dt_ns()
                .zip(&residuals)
                .map(|(d, r)| (d as f64 * 1e-9, 0.0, r * r)),
        ),
        residuals_j: residuals,
        drift: None,
        contention: None,
        frequency: None,
        types_at_run: vec![None; stack.keys.len()],
        covariance_w2: None,
        estimable_covariance: None,
        layout: super::estimate::CovLayout {
            types: stack.keys.len(),
            ..Default::default()
        },
        t95: f64::INFINITY,
        diagnostics: FitDiagnostics {
            unknowns: (0..p).filter(|&j| norm2[j] > 0.0).count(),
            r2: (tss_w > 0.0).then(|| 1.0 - rss_w / tss_w),
            rmse_j,
            mape_pct: (ape_n > 0).then(|| 100.0 * ape / ape_n as f64),
            inseparable,
            warnings,
            ..FitDiagnostics::of_stack(stack, opts.solver, n)
        },
    }
}
