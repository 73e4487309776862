//! How far to trust a fit: standard errors, R², residuals, rank and conditioning,
//! cross-validated error, the types that cannot be separated, and sampling warnings.
//!
//! Which types cannot be separated, and why: conditioning.rs.

use serde::{Deserialize, Serialize};

use super::conditioning::{conditioning, InseparableGroup, InseparableReason};
use super::estimate::{Estimate, Flag};
use super::options::{AttributionOptions, Solver};
use super::qr::TriAccumulator;
use super::stack::{fold_range, solve, Solved, Stack};

/// Fit quality of one domain.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FitDiagnostics {
    /// The solver used.
    pub solver: Solver,
    /// The row weights used: `uniform`, `1/dt` or `user`.
    pub weights: String,
    /// Intervals (rows).
    pub rows: usize,
    /// Unknowns that entered the solve (base + types with time in the window).
    pub unknowns: usize,
    /// Numerical rank of the column-scaled system.
    pub rank: usize,
    /// `σ_max / σ_min` of the column-scaled system; `None` when rank-deficient.
    pub condition_number: Option<f64>,
    /// Singular values of the column-scaled system, largest first.
    pub singular_values: Vec<f64>,
    /// Coefficient of determination on interval energies (weighted); `None` if the
    /// energies do not vary.
    pub r2: Option<f64>,
    /// Root mean square residual per interval, J.
    pub rmse_j: f64,
    /// In-sample mean absolute percentage error on interval energy, %.
    pub mape_pct: Option<f64>,
    /// Cross-validated MAPE (contiguous blocks), %; `None` when too few rows.
    pub cv_mape_pct: Option<f64>,
    /// Folds used for cross-validation (1 = none).
    pub cv_folds: usize,
    /// Groups of columns the data cannot separate.
    pub inseparable: Vec<InseparableGroup>,
    /// Rows entirely inside idle-calibration markers.
    pub idle_calibration_rows: usize,
    /// Whether rows without any task time (inside idle-calibration markers or not)
    /// pinned the base power.
    pub base_pinned_by_idle: bool,
    /// Rows without any task time, idle-calibration rows included.
    #[serde(default)]
    pub idle_rows: usize,
    /// How the intervals were aligned to the meter's updates, in words (one line per
    /// stacked trace that was aligned).
    #[serde(default)]
    pub alignment: Vec<String>,
    /// The sensors fitted together when one device has two (NVML's energy counter and its
    /// power readings), each with its rows and weight, in words; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joint: Vec<String>,
    /// How the intervals' covariance was estimated (`classical`, or `block-robust (...)`).
    #[serde(default)]
    pub covariance: String,
    /// Sampling and data warnings, in words.
    pub warnings: Vec<String>,
}

impl FitDiagnostics {
    /// What the dense and the large-system fits' diagnostics share, taken from the stacked
    /// system: the solver, the rows, the idle-calibration rows and how each stacked trace
    /// was aligned. Each fit sets its own figures over it (`..FitDiagnostics::of_stack`).
    pub(super) fn of_stack(stack: &Stack<'_>, solver: Solver, rows: usize) -> FitDiagnostics {
        FitDiagnostics {
            solver,
            rows,
            cv_folds: 1,
            idle_calibration_rows: stack.systems.iter().map(|s| s.idle_rows).sum(),
            alignment: once_each(
                stack
                    .systems
                    .iter()
                    .filter_map(|s| s.alignment.as_ref().map(|a| a.describe())),
            ),
            ..FitDiagnostics::default()
        }
    }
}

/// Each line once, in first-seen order, with how many traces said it when several did
/// (a model fitted on three traces said each alignment three times).
fn once_each(lines: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for l in lines {
        match seen.iter_mut().find(|(s, _)| *s == l) {
            Some((_, n)) => *n += 1,
            None => seen.push((l, 1)),
        }
    }
    seen.into_iter()
        .map(|(l, n)| {
            if n > 1 {
                format!("{l} ({n} traces)")
            } else {
                l
            }
        })
        .collect()
}

/// What [`analyse`] returns to the fit.
pub(crate) struct Analysis {
    /// Base then types.
    pub(crate) estimates: Vec<Estimate>,
    /// Covariance of the unconstrained coefficients, W², over the model's columns then
    /// the contention when fitted; `None` when some coefficient is not identifiable or no
    /// degree of freedom is left.
    pub(crate) covariance: Option<Vec<Vec<f64>>>,
    /// Without `covariance`: the covariance over the identified directions.
    pub(crate) estimable: Option<super::covariance::Estimable>,
    /// The contention's standard error, when fitted.
    pub(crate) theta_se: Option<f64>,
    /// The Student quantile of the contention's interval (its own effective blocks).
    pub(crate) theta_t: Option<f64>,
    /// The Student quantile of each type's power at the run's occupancy.
    pub(crate) at_run_t: Vec<f64>,
    /// How the covariance was estimated.
    pub(crate) cov_method: String,
    /// Student-t 95% quantile for the intervals.
    pub(crate) t95: f64,
    pub(crate) residuals_j: Vec<f64>,
    pub(crate) diagnostics: FitDiagnostics,
}

/// Everything but the coefficients: residual pass, SEs, conditioning, CV, warnings.
/// `full` is the augmented factor of every row; `theta` the contention when fitted (the
/// stack's rows are formed at it).
pub(crate) fn analyse(
    stack: &Stack<'_>,
    solved: &Solved,
    accs: &[TriAccumulator],
    full: &TriAccumulator,
    folds: usize,
    opts: &AttributionOptions,
    theta: Option<f64>,
) -> Analysis {
    let p = stack.unknowns();
    let n = stack.rows();
    let b = &solved.coef;

    // Residual pass.
    let mut residuals = vec![0.0; n];
    let (mut rss_w, mut sw, mut rows_w) = (0.0, 0.0, 0usize);
    let mut rss_ols_w = 0.0;
    let mut ape = Ape::default();
    let mut negative = 0usize;
    // Rows without task time: they pin the base, marked as idle calibration or not.
    let mut empty_rows = 0usize;
    // The total sum of squares in the same pass, about a shift (the first row's energy)
    // that keeps the sums' cancellation small: Σw(y−s)² − (Σw(y−s))²/Σw.
    let shift = if n > 0 {
        let mut first = 0.0;
        stack.visit_augmented(0..1, |_, _, y, _| first = y);
        first
    } else {
        0.0
    };
    let (mut swd, mut swd2) = (0.0, 0.0);
    // The covariance's block scores (covariance.rs) and the cross-validation's held-out
    // errors, in the same pass: each fold's coefficients from the other folds' factors.
    let theta_dir = theta.map(|_| {
        let k = stack.keys.len();
        let powers: Vec<f64> = (1..=k).map(|j| solved.ols[j]).collect();
        -stack.occupancy_direction(full, &powers)
    });
    let mut scores = super::covariance::BlockScores::new(stack, solved, theta_dir.as_ref());
    let cv_coefs: Vec<Vec<f64>> = if folds >= 2 {
        (0..folds)
            .map(|f| {
                let mut train = TriAccumulator::new(stack.augmented());
                for (g, a) in accs.iter().enumerate() {
                    if g != f {
                        train.merge(a);
                    }
                }
                solve(&train, stack, opts.solver).coef
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut cv_ape = Ape::default();
    let (mut fold, mut fold_end) = (
        0,
        if folds >= 2 {
            fold_range(n, folds, 0).end
        } else {
            n
        },
    );
    let mut x = vec![0.0; p];
    let copy = stack.occupancy && stack.theta != 0.0;
    stack.visit_augmented(0..n, |g, a, y, w| {
        // The model row: the augmented row's head at no contention (as `Stack::visit`).
        let x = if copy {
            stack.model_row(a, &mut x);
            &x[..]
        } else {
            &a[..p]
        };
        let dy = y - shift;
        swd += w * dy;
        swd2 += w * dy * dy;
        empty_rows += usize::from(w > 0.0 && x[1..=stack.keys.len()].iter().all(|&v| v == 0.0));
        let r = y - dot(x, b);
        residuals[g] = r;
        rss_w += w * r * r;
        let r_ols = y - dot(x, scores.ols());
        rss_ols_w += w * r_ols * r_ols;
        scores.add(g, a, x, w, r_ols);
        if !cv_coefs.is_empty() {
            while g >= fold_end {
                fold += 1;
                fold_end = fold_range(n, folds, fold).end;
            }
            cv_ape.add(y - dot(x, &cv_coefs[fold]), y);
        }
        sw += w;
        rows_w += usize::from(w > 0.0);
        ape.add(r, y);
        negative += usize::from(y < 0.0);
    });
    let tss_w = if sw > 0.0 {
        (swd2 - swd * swd / sw).max(0.0)
    } else {
        swd2
    };
    let rmse_j = (residuals.iter().map(|r| r * r).sum::<f64>() / n.max(1) as f64).sqrt();

    // Conditioning and separability on the column-scaled system.
    let labels: Vec<String> = solved.included.iter().map(|&j| stack.label(j)).collect();
    let cond = conditioning(&solved.scaled, &labels, opts);

    // Standard errors and intervals from the unconstrained fit on every included column
    // (docs/attribution.md, "Intervals"): holding one coefficient at a bound must not make
    // the others look more precise than the data allow. The covariance is classical and
    // block-robust combined, over the model's columns and the contention (covariance.rs).
    let cov = super::covariance::covariance(
        super::covariance::CovInput {
            solved,
            theta_dir,
            rows_w,
            rss_ols_w,
            scores,
        },
        p,
        cond.rank,
    );
    let t = cov.t95;
    let width = cov.se.len();
    let unit = |j: usize| -> Vec<f64> {
        let mut g = vec![0.0; width];
        g[j] = 1.0;
        g
    };
    let mut se: Vec<Option<f64>> = cov.se[..p].to_vec();
    let mut ci: Vec<Option<[f64; 2]>> = vec![None; p];
    let theta_se = theta.and_then(|_| cov.se.get(p).copied().flatten());
    let theta_t = theta.map(|_| cov.t95_of(&unit(p)));
    for &j in &solved.included {
        let t = cov.t95_of(&unit(j));
        ci[j] = se[j].map(|s| {
            let centre = solved.ols[j];
            let (mut lo, mut hi) = (centre - t * s, centre + t * s);
            if opts.solver == Solver::Nnls && j <= stack.keys.len() {
                // Powers are physical: every true value the unconstrained interval
                // holds is also in its non-negative part. (The drift may be negative.)
                // Cut at 0, it keeps at least one half-width above it: an interval
                // wholly below 0 gave `[0, 0]`, a held power known exactly.
                if lo < 0.0 {
                    hi = hi.max(t * s);
                }
                lo = lo.max(0.0);
            }
            [lo.min(b[j]), hi.max(b[j])]
        });
    }
    se.truncate(p);
    let t_of = |g: &[f64]| cov.t95_of(g);
    let at_run_t: Vec<f64> = (1..=stack.keys.len())
        .map(|j| {
            // A power at the run's occupancy rests on its power alone and the contention.
            let mut g = vec![0.0; width];
            g[j] = 1.0;
            if theta.is_some() {
                g[p] = 1.0;
            }
            t_of(&g)
        })
        .collect();
    let covariance = cov.matrix;
    let estimable = cov.estimable;

    // Cross-validation: fit on every fold but one, predict the held-out block.
    let cv_mape_pct = (folds >= 2).then(|| cv_ape.mean_pct()).flatten();

    // Groups: collinearity, too few tasks, no time.
    let mut inseparable = cond.groups;
    let cond_warnings = cond.warnings;
    for (k, st) in stack.stats.iter().enumerate() {
        if st.clipped_ns == 0 {
            inseparable.push(InseparableGroup {
                members: vec![stack.label(k + 1)],
                reason: InseparableReason::NoTimeInWindow,
            });
        } else if st.in_window < opts.min_tasks {
            inseparable.push(InseparableGroup {
                members: vec![stack.label(k + 1)],
                reason: InseparableReason::TooFewTasks {
                    count: st.in_window,
                    minimum: opts.min_tasks,
                },
            });
        }
    }

    let estimates = estimates(stack, solved, &se, &ci, &inseparable, opts);
    // A near dependency whose members all came out precise is not a problem to report as
    // inseparable: their intervals already account for it.
    let mut near_ok = Vec::new();
    inseparable.retain(|g| {
        let keep = !matches!(g.reason, InseparableReason::NearlyCollinear { .. })
            || g.members
                .iter()
                .any(|m| (0..p).any(|j| stack.label(j) == *m && !estimates[j].reliable));
        if !keep {
            near_ok.push(g.members.join(", "));
        }
        keep
    });
    let mut warnings = cond_warnings;
    for m in near_ok {
        warnings.push(format!(
            "near dependency between {m}: their 95% intervals are still within the precision \
             threshold"
        ));
    }
    warnings.extend(sampling_warnings(stack, &estimates, opts));
    if negative > 0 {
        warnings.push(format!(
            "{negative} interval(s) have negative measured energy: the counter went backwards \
             (wrap or reset not corrected); those rows pull the fit down"
        ));
    }
    let busy_idle: usize = stack.systems.iter().map(|s| s.idle_rows_with_tasks).sum();
    if busy_idle > 0 {
        warnings.push(format!(
            "{busy_idle} interval(s) inside idle-calibration markers contain task time: the \
             markers do not match a parked runtime"
        ));
    }
    let dup: usize = stack.systems.iter().map(|s| s.duplicate_samples).sum();
    if dup > 0 {
        warnings.push(format!(
            "{dup} sample(s) repeated the previous sample's time (the sampler read faster \
             than the sensor updates, or a reading was taken twice) and were dropped: not an \
             error, the intervals end at the sensor's own updates"
        ));
    }
    let invalid: usize = stack.systems.iter().map(|s| s.invalid_samples).sum();
    if invalid > 0 {
        warnings.push(format!(
            "{invalid} sample(s) had a non-finite energy and were dropped (their intervals \
             merged with the next)"
        ));
    }
    if rows_w < n {
        warnings.push(format!("{} interval(s) have weight 0", n - rows_w));
    }

    Analysis {
        estimates,
        covariance,
        estimable,
        theta_se,
        theta_t,
        at_run_t,
        cov_method: cov.method,
        t95: t,
        residuals_j: residuals,
        diagnostics: FitDiagnostics {
            unknowns: solved.included.len(),
            rank: cond.rank,
            condition_number: cond.condition,
            singular_values: cond.singular_values,
            // With the base power alone (no task ran on the domain's workers) there is no
            // variation to explain: R² would only compare a constant with the mean.
            r2: (tss_w > 0.0 && solved.included.len() > 1).then(|| 1.0 - rss_w / tss_w),
            rmse_j,
            mape_pct: ape.mean_pct(),
            cv_mape_pct,
            cv_folds: folds,
            inseparable,
            base_pinned_by_idle: empty_rows > 0,
            idle_rows: empty_rows,
            warnings,
            ..FitDiagnostics::of_stack(stack, opts.solver, n)
        },
    }
}

#[inline]
fn dot(x: &[f64], b: &[f64]) -> f64 {
    x.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// Mean absolute percentage error accumulator; rows with zero energy are skipped
/// (their percentage error is undefined).
#[derive(Default)]
struct Ape {
    sum: f64,
    n: usize,
}

impl Ape {
    fn add(&mut self, r: f64, y: f64) {
        if y != 0.0 {
            self.sum += (r / y).abs();
            self.n += 1;
        }
    }

    fn mean_pct(&self) -> Option<f64> {
        (self.n > 0).then(|| 100.0 * self.sum / self.n as f64)
    }
}

/// Rows in which some type ran, per type power (and contention) they pin, below which the
/// types' powers are flagged [`Flag::FewActiveRows`].
pub(crate) const MIN_ACTIVE_ROWS_PER_UNKNOWN: usize = 3;

/// Base then type estimates, each with its interval and the flags that keep it from being
/// shown as a measurement.
fn estimates(
    stack: &Stack<'_>,
    solved: &Solved,
    se: &[Option<f64>],
    ci: &[Option<[f64; 2]>],
    groups: &[InseparableGroup],
    opts: &AttributionOptions,
) -> Vec<Estimate> {
    let p = stack.unknowns();
    // The rows where some type ran pin the types' powers (and the contention), whatever
    // the idle rows around them add to the degrees of freedom.
    let types = stack.keys.len();
    let mut active = 0usize;
    stack.visit(0..stack.rows(), |_, x, _, _| {
        if x[1..=types].iter().any(|&t| t > 0.0) {
            active += 1;
        }
    });
    let type_unknowns = types + usize::from(stack.occupancy);
    let few_rows = types > 0 && active < MIN_ACTIVE_ROWS_PER_UNKNOWN * type_unknowns;
    (0..p)
        .map(|j| {
            let label = stack.label(j);
            let value = solved.coef[j];
            let pos = solved.included.iter().position(|&i| i == j);
            let at_bound = pos.is_some_and(|k| !solved.free[k]);
            let mut flags = Vec::new();
            let mut near = None;
            for g in groups.iter().filter(|g| g.members.contains(&label)) {
                let with: Vec<String> =
                    g.members.iter().filter(|m| **m != label).cloned().collect();
                match &g.reason {
                    InseparableReason::ExactlyCollinear => flags.push(Flag::Inseparable { with }),
                    InseparableReason::NearlyCollinear { condition_index } => {
                        near = Some(Flag::NearlyCollinear {
                            with,
                            condition_index: *condition_index,
                        })
                    }
                    InseparableReason::TooFewTasks { count, minimum } => {
                        flags.push(Flag::TooFewTasks {
                            count: *count,
                            minimum: *minimum,
                        })
                    }
                    InseparableReason::NoTimeInWindow => flags.push(Flag::NoTimeInWindow),
                }
            }
            if at_bound {
                flags.push(Flag::AtBound);
            }
            if value < 0.0 {
                flags.push(Flag::Negative);
            }
            if few_rows && (1..=types).contains(&j) {
                flags.push(Flag::FewActiveRows {
                    rows: active,
                    unknowns: type_unknowns,
                });
            }
            let interval = ci[j];
            match interval {
                None => {
                    if pos.is_some() && !flags.iter().any(|f| matches!(f, Flag::Inseparable { .. }))
                    {
                        flags.push(Flag::NoInterval);
                    }
                }
                Some([lo, hi]) if !at_bound && value >= 0.0 => {
                    let half = (value - lo).max(hi - value);
                    let pct = if value > 0.0 {
                        100.0 * half / value
                    } else {
                        f64::INFINITY
                    };
                    if pct > opts.precision_pct {
                        flags.push(Flag::Imprecise {
                            half_width_pct: pct,
                            threshold_pct: opts.precision_pct,
                        });
                    }
                }
                Some(_) => {}
            }
            if !flags.is_empty() {
                // A near dependency is named when it is the likely cause of a flag.
                flags.extend(near.take());
            }
            let issues = flags
                .iter()
                .map(|f| describe(f, interval, solved.ols[j]))
                .collect();
            Estimate {
                value_w: value,
                se_w: se[j],
                ci95_w: interval,
                at_bound,
                reliable: flags.is_empty(),
                flags,
                issues,
            }
        })
        .collect()
}

/// `pct` (above `threshold`) with as many decimals as it takes not to print as the
/// threshold: `5.3`, not `5` beside a threshold of 5; whole numbers from 10 up.
pub(crate) fn pct_above(pct: f64, threshold: f64) -> String {
    for decimals in 0..4 {
        let text = format!("{pct:.decimals$}");
        if text.parse::<f64>().is_ok_and(|v| v > threshold) && (decimals > 0 || pct >= 10.0) {
            return text;
        }
    }
    format!("{pct:.4}")
}

/// A flag in words.
/// [`describe`] for a flag added after the fit (no unconstrained value at hand).
pub(crate) fn describe_flag(f: &Flag, ci: Option<[f64; 2]>) -> String {
    describe(f, ci, f64::NAN)
}

fn describe(f: &Flag, ci: Option<[f64; 2]>, unconstrained: f64) -> String {
    let range = ci.map_or(String::new(), |[lo, hi]| {
        format!(" (95% interval {} to {})", w(lo), w(hi))
    });
    match f {
        Flag::Imprecise {
            half_width_pct,
            threshold_pct,
        } => format!(
            "imprecise: 95% interval +-{}%, wider than +-{threshold_pct}%{range}",
            pct_above(*half_width_pct, *threshold_pct)
        ),
        // The unconstrained fit may give it a positive power: it is the other powers'
        // bounds, pulling the fit, that leave this one at 0.
        Flag::AtBound if unconstrained > 0.0 => format!(
            "held at 0 W by the non-negativity constraint: the unconstrained fit gives it {} \
             but others below 0, and with those held at 0 its best value is 0 W{range}",
            w(unconstrained)
        ),
        Flag::AtBound if unconstrained.is_nan() => {
            format!("held at 0 W by the non-negativity constraint{range}")
        }
        Flag::AtBound => format!(
            "held at 0 W by the non-negativity constraint (unconstrained fit {}){range}",
            w(unconstrained)
        ),
        Flag::Negative => format!("negative power{range}: not physical"),
        Flag::Inseparable { with } => format!(
            "exactly collinear with {}: only their combination is identified",
            with.join(", ")
        ),
        Flag::NearlyCollinear {
            with,
            condition_index,
        } => format!(
            "nearly collinear with {} (condition index {condition_index:.0})",
            with.join(", ")
        ),
        Flag::TooFewTasks { count, minimum } => {
            format!("only {count} task(s) in the sampled window (minimum {minimum})")
        }
        Flag::FewActiveRows { rows, unknowns } => format!(
            "the types ran in only {rows} interval(s) for {unknowns} power(s) they share \
             (fewer than {MIN_ACTIVE_ROWS_PER_UNKNOWN} each): the fit is nearly exact there \
             and its interval too narrow to trust; run the graph longer or sample more often"
        ),
        Flag::NoTimeInWindow => "never ran inside the sampled window".to_owned(),
        Flag::NoInterval => {
            "no interval (not identifiable, or no residual degree of freedom)".to_owned()
        }
        Flag::ContentionUnknown => "contention unknown: the run's occupancy did not vary \
                                    enough to tell its power alone from its power beside \
                                    other tasks"
            .to_owned(),
        Flag::ModelInDoubt { departure } => format!("the model does not hold: {departure}"),
    }
}

fn w(v: f64) -> String {
    super::units::si(v, "W")
}

/// Warnings about the sampling period, the sensor and the task durations.
fn sampling_warnings(
    stack: &Stack<'_>,
    estimates: &[Estimate],
    opts: &AttributionOptions,
) -> Vec<String> {
    let mut out = Vec::new();
    let n = stack.rows();
    let unknowns = stack.unknowns();
    if (n as f64) < opts.min_rows_per_unknown * unknowns as f64 {
        out.push(format!(
            "sampling period too long or run too short: {n} interval(s) for {unknowns} \
             unknown(s), fewer than {} per unknown; sample more often or run longer",
            opts.min_rows_per_unknown
        ));
    }
    let mut dts: Vec<u64> = stack.dt_ns().collect();
    if dts.is_empty() {
        return out;
    }
    let mid = dts.len() / 2;
    let median = *dts.select_nth_unstable(mid).1;
    for (k, st) in stack.stats.iter().enumerate() {
        // A task fits inside one interval unless it is longer than the interval or
        // straddles a boundary; when (almost) none fits, the type is longer than the
        // intervals. (The shortest duration alone would be fooled by the task the end of
        // the run cut short.)
        if st.in_window > 0 && st.contained * 20 <= st.in_window {
            out.push(format!(
                "tasks of {} are longer than the intervals: only {} of {} fit inside one \
                 (mean task {}, median interval {}); each interval sees only part of a \
                 task, so its power is told from the base only by how many workers run it",
                stack.keys[k],
                st.contained,
                st.in_window,
                fmt_ns(st.total_ns / st.count.max(1)),
                fmt_ns(median)
            ));
        }
    }
    for s in &stack.systems {
        let info = &s.info;
        if let Some(u) = info.update_interval_ns.filter(|&u| median < u) {
            out.push(format!(
                "sampling period too short: median interval {} is below the sensor's update \
                 interval {} for {}; readings repeat and energy lands in the wrong interval",
                fmt_ns(median),
                fmt_ns(u),
                info.name
            ));
        }
        if let taskwatt_traces::SensorKind::IntegratedPower { window_ns } = info.sensor {
            if median < window_ns {
                out.push(format!(
                    "sampling period too short: median interval {} is below the power sensor's \
                     averaging window {} for {}; each reading smooths several intervals",
                    fmt_ns(median),
                    fmt_ns(window_ns),
                    info.name
                ));
            }
        }
        let quantum_w = info.resolution_j / (median as f64 * 1e-9);
        let weakest = estimates[1..]
            .iter()
            .filter(|e| e.reliable && e.value_w > 0.0)
            .map(|e| e.value_w)
            .fold(f64::INFINITY, f64::min);
        if weakest.is_finite() && quantum_w > 0.5 * weakest {
            out.push(format!(
                "sampling period too short for the sensor's resolution: one energy quantum \
                 ({:.3e} J) per median interval is {:.3} W, more than half the weakest type \
                 power ({:.3} W) in {}",
                info.resolution_j, quantum_w, weakest, info.name
            ));
        }
    }
    out
}

/// `850 ns`, `12.5 µs`, `3.20 ms`, `1.50 s`.
pub(crate) fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_said_by_several_traces_is_said_once() {
        let lines = ["aligned", "open", "aligned", "aligned"].map(String::from);
        assert_eq!(once_each(lines.into_iter()), ["aligned (3 traces)", "open"]);
    }

    #[test]
    fn durations_print_in_readable_units() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_500), "12.5 us");
        assert_eq!(fmt_ns(3_200_000), "3.20 ms");
        assert_eq!(fmt_ns(1_500_000_000), "1.50 s");
    }

    #[test]
    fn an_imprecise_power_never_reads_as_the_threshold() {
        assert_eq!(super::pct_above(5.3, 5.0), "5.3");
        assert_eq!(super::pct_above(5.04, 5.0), "5.04");
        assert_eq!(super::pct_above(38.2, 5.0), "38");
        assert_eq!(super::pct_above(10.0, 5.0), "10");
        assert_eq!(super::pct_above(7.6, 5.0), "7.6");
    }
}
