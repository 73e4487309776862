//! Solving `E_i ≈ P_base·Δt_i + Σ_k p_k·T_ik` for one domain.
//!
//! The rows of one domain, possibly stacked from several traces (model fitting), are
//! streamed once into a Givens triangle per cross-validation fold ([`TriAccumulator`]);
//! the folds merge into the full factor. Every solve then works on a `(K+1)`-square
//! problem, whatever the number of intervals. Columns are scaled to unit norm before
//! solving so that the solvers' tolerances and the condition number do not depend on
//! units or on how long a type ran.

use std::ops::Range;

use super::diagnostics::{self};
use super::error::AttributionError;
use super::estimate::*;
use super::fit::*;
use super::options::*;
use super::stack::*;
use super::system::{DomainSystem, TypeStats};

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
    // The rows that pin the types pin the contention too.
    let mut contention = contention;
    let few = types
        .iter()
        .flat_map(|t| &t.flags)
        .find(|f| matches!(f, Flag::FewActiveRows { .. }))
        .cloned();
    if let (Some(f), Some(c)) = (few, contention.as_mut()) {
        c.c.issues.push(diagnostics::describe_flag(&f, c.c.ci95_w));
        c.c.flags.push(f);
        c.c.reliable = false;
    }
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
                 every worker (`--type-calibration`, or `Measured::finish_calibrating` in the \
                 library) to separate them"
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
            // As for the powers alone (diagnostics.rs): cut at 0, one half-width kept.
            if lo < 0.0 {
                hi = hi.max(t * s);
            }
            lo = lo.max(0.0);
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
}
