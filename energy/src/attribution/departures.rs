//! Does the model hold? Residual checks against time and against occupancy.
//!
//! A fit can be exact arithmetic on a model that is wrong for the machine: a frequency step
//! or a power cap for part of the run, a contention the fitted law does not follow, a base
//! that wanders. Their residuals show it where R² and CV MAPE do not. After each fit, the
//! residuals `e_i` are regressed on the fitted dynamic energy `d_i = Σ_k p_k x_ik` within
//!
//! - **time blocks** ([`TIME_BLOCKS`] contiguous stretches of the run): `λ_g = Σ w e d / Σ
//!   w d²` is how much the tasks' power in block `g` differs from the fitted powers,
//!   relatively (a cap at 0.8 over a third of the run reads about −14 % there and +7 %
//!   elsewhere);
//! - **occupancy levels** (rows grouped by the mean number of tasks running, rounded):
//!   the same `λ` per level, which a contention law that fits leaves at 0;
//! - **frequency**, where the trace has it (rows grouped by their frequency's ratio to
//!   their occupancy's usual one, `frequency.rs`): the same `λ` per group, which the
//!   fitted `f^β` leaves at 0.
//!
//! and the base's shift `μ_g = Σ w e Δt / Σ w Δt²` per time block. Each `λ` gets a
//! standard error from batch means (the group cut into [`BATCHES`] consecutive batches,
//! robust to errors correlated over shorter stretches than a batch). A departure is named
//! when it is both significant (`|λ| > 4·SE`, about 1 in 16 000 by chance per test) and
//! material (`|λ|` above [`MATERIAL_SHARE`] of the precision threshold, so that what it can
//! move is a good part of what a measurement may be off by). Then every power of the
//! domain is flagged [`Flag::ModelInDoubt`] (not shown as a measurement) and a warning
//! says which departure, where, and what to do. A base that shifts only warns: the base's
//! column absorbs it unless it follows the tasks.

use super::estimate::Flag;
use super::fit::DomainFit;
use super::options::AttributionOptions;
use super::stack::Stack;
use super::units::si;

/// Contiguous time blocks of the time check.
pub(crate) const TIME_BLOCKS: usize = 6;
/// Batches a group is cut into for its standard error.
const BATCHES: usize = 8;
/// Significance: `|λ|` over this many standard errors.
const SIGMAS: f64 = 4.0;
/// Materiality: `|λ|` over this share of the precision threshold (5 % × 0.6 = 3 %).
const MATERIAL_SHARE: f64 = 0.6;

/// A ratio's sums over [`BATCHES`] consecutive batches of its rows: `(Σ num, Σ den)` each.
type Batches = [(f64, f64); BATCHES];

/// `λ = Σ num / Σ den` over every batch, and its batch-means standard error; `None` with
/// fewer than `2·BATCHES` rows, no information (`Σ den ≤ 0`, or NaN) or fewer than four
/// batches with any.
fn ratio(batches: &Batches, rows: usize) -> Option<(f64, f64)> {
    let total_den: f64 = batches.iter().map(|b| b.1).sum();
    if total_den.is_nan() || total_den <= 0.0 || rows < 2 * BATCHES {
        return None;
    }
    let lambda = batches.iter().map(|b| b.0).sum::<f64>() / total_den;
    let xs: Vec<(f64, f64)> = batches
        .iter()
        .filter(|b| b.1 > 0.0)
        .map(|&(nu, dd)| (nu / dd, dd))
        .collect();
    if xs.len() < 4 {
        return None;
    }
    // Weighted batch means: the spread of the batches' ratios, each weighted by its share
    // of the information.
    let wsum: f64 = xs.iter().map(|x| x.1).sum();
    let mean = xs.iter().map(|x| x.0 * x.1).sum::<f64>() / wsum;
    let var = xs.iter().map(|x| x.1 * (x.0 - mean).powi(2)).sum::<f64>() / wsum;
    let neff = wsum * wsum / xs.iter().map(|x| x.1 * x.1).sum::<f64>();
    let se = (var / (neff - 1.0).max(1.0)).sqrt();
    Some((lambda, se))
}

/// The batch of row `i` of `len` rows: equal counts, the last batch taking the remainder.
fn batch_of(i: usize, len: usize) -> usize {
    (i / (len / BATCHES).max(1)).min(BATCHES - 1)
}

/// The `(w·e·d, w·d²)` of a group's rows, in row order (batched once the group is known).
type Group = Vec<(f64, f64)>;

/// [`ratio`] of a group's rows.
fn group_ratio(rows: &Group) -> Option<(f64, f64)> {
    let mut b: Batches = [(0.0, 0.0); BATCHES];
    for (i, &(nu, dd)) in rows.iter().enumerate() {
        let x = &mut b[batch_of(i, rows.len())];
        x.0 += nu;
        x.1 += dd;
    }
    ratio(&b, rows.len())
}

/// `λ` of the tasks' power per group (`groups[i]` labelled `labels[i]`): every group's
/// `λ`, and the significant and material ones described with their label.
fn by_group(groups: &[Group], labels: &[String], material: f64) -> (Vec<f64>, Vec<String>) {
    let (mut lambdas, mut found) = (Vec::new(), Vec::new());
    for (g, label) in groups.iter().zip(labels) {
        if let Some((l, se)) = group_ratio(g) {
            lambdas.push(l);
            if l.abs() > material && l.abs() > SIGMAS * se {
                found.push(format!(
                    "{:+.0}% {label} ({:.1} sigma)",
                    100.0 * l,
                    l.abs() / se.max(1e-12)
                ));
            }
        }
    }
    (lambdas, found)
}

fn seconds(ns: u64) -> String {
    format!("{:.3} s", ns as f64 * 1e-9)
}

/// Runs the checks on a finished fit and flags its powers when the model does not hold.
pub(crate) fn check(stack: &Stack<'_>, fit: &mut DomainFit, opts: &AttributionOptions) {
    let n = stack.rows();
    if n < TIME_BLOCKS * 2 * BATCHES || fit.residuals_j.len() != n {
        return;
    }
    let k = stack.keys.len();
    let coef: Vec<f64> = std::iter::once(fit.base.value_w)
        .chain(fit.types.iter().map(|t| t.value_w))
        .chain(fit.drift.iter().map(|d| d.value_w))
        .collect();
    // One pass: the time blocks' batches are row ranges, summed as they come; the
    // occupancy and frequency groups keep their rows' two terms, batched at the end.
    let profiled = fit.frequency.as_ref().is_some_and(|f| f.profiled);
    const EDGES: [f64; 3] = [0.95, 0.99, 1.01];
    let block_lo = |b: usize| b * n / TIME_BLOCKS;
    let mut blocks: Vec<(Batches, Batches)> =
        vec![([(0.0, 0.0); BATCHES], [(0.0, 0.0); BATCHES]); TIME_BLOCKS];
    let mut by_k: Vec<Group> = Vec::new();
    let mut by_freq: Vec<Group> = vec![Vec::new(); EDGES.len() + 1];
    let mut x = vec![0.0; stack.unknowns()];
    let mut block = 0;
    stack.visit_augmented(0..n, |g, a, _, w| {
        stack.model_row(a, &mut x);
        let d: f64 = (1..=k).map(|j| coef[j] * x[j]).sum();
        let busy: f64 = a[1..=k].iter().sum();
        let (e, dt) = (fit.residuals_j[g], x[0]);
        while g >= block_lo(block + 1) {
            block += 1;
        }
        let (lo, hi) = (block_lo(block), block_lo(block + 1));
        let at = batch_of(g - lo, hi - lo);
        let (tasks, base) = &mut blocks[block];
        tasks[at].0 += w * e * d;
        tasks[at].1 += w * d * d;
        base[at].0 += w * e * dt;
        base[at].1 += w * dt * dt;
        let level = if dt > 0.0 { busy / dt } else { 0.0 };
        if level >= 0.5 {
            let i = level.round() as usize - 1;
            if by_k.len() <= i {
                by_k.resize(i + 1, Vec::new());
            }
            by_k[i].push((w * e * d, w * d * d));
        }
        if profiled {
            if let Some(r) = stack.freq_ratio(g).filter(|r| !r.is_nan()) {
                by_freq[EDGES.partition_point(|&edge| edge <= r)].push((w * e * d, w * d * d));
            }
        }
    });
    let material = MATERIAL_SHARE * opts.precision_pct / 100.0;
    let mut departures: Vec<String> = Vec::new();
    // The range of the tasks' power relative to the fit, over the groups of a departure
    // found (0 included): the powers' intervals widen to it.
    let (mut low, mut high) = (0.0f64, 0.0f64);

    // Time.
    let mut found = Vec::new();
    let mut lambdas = Vec::new();
    let mut base_shift = Vec::new();
    let base = fit.base.value_w.abs().max(1e-9);
    for (b, (tasks, shift)) in blocks.iter().enumerate() {
        let (lo, hi) = (block_lo(b), block_lo(b + 1));
        let span = (stack.row_span(lo).0, stack.row_span(hi - 1).1);
        if let Some((l, se)) = ratio(tasks, hi - lo) {
            lambdas.push(l);
            if l.abs() > material && l.abs() > SIGMAS * se {
                found.push(format!(
                    "{:+.0}% from {} to {} ({:.1} sigma)",
                    100.0 * l,
                    seconds(span.0),
                    seconds(span.1),
                    l.abs() / se.max(1e-12)
                ));
            }
        }
        if let Some((mu, se)) = ratio(shift, hi - lo) {
            if mu.abs() / base > 0.02 && mu.abs() > SIGMAS * se {
                base_shift.push(format!(
                    "{:+.1}% from {} to {}",
                    100.0 * mu / base,
                    seconds(span.0),
                    seconds(span.1)
                ));
            }
        }
    }
    if !found.is_empty() {
        for l in &lambdas {
            low = low.min(*l);
            high = high.max(*l);
        }
        // With the frequency recorded and fitted, "record the frequency" was no advice.
        let why = if profiled {
            "the recorded frequency does not explain it: a power cap, a temperature, or a \
             change in what the tasks do for part of it; these powers average over it; split \
             the run at the change"
        } else {
            "a frequency change or a power cap for part of it; these powers average over \
             it; sample at a steady frequency, split the run at the change, or record the \
             frequency"
        };
        departures.push(format!(
            "the tasks' power changes over the run ({}): {why}",
            found.join("; ")
        ));
    }
    if !base_shift.is_empty() {
        fit.diagnostics.warnings.push(format!(
            "the base power shifts over the run beyond a linear drift ({}): warming up, or \
             something else running on the domain; idle intervals spread over the run pin it",
            base_shift.join("; ")
        ));
    }

    // Occupancy.
    let max_k = by_k.len();
    if max_k >= 2 {
        let labels: Vec<String> = (1..=max_k)
            .map(|level| format!("with {level} task(s) running"))
            .collect();
        let (lambdas, found) = by_group(&by_k, &labels, material);
        if !found.is_empty() {
            for l in &lambdas {
                low = low.min(*l);
                high = high.max(*l);
            }
            let what = match &fit.contention {
                Some(c) if c.identified => {
                    format!("beyond the fitted contention (c = {:.3})", c.c.value_w)
                }
                _ => "and contention is not modelled here".to_owned(),
            };
            departures.push(format!(
                "the tasks' power depends on how many run at once {what} ({}): shared \
                 caches, memory or power limits; calibrate the types alone and together \
                 (`--type-calibration`, or `Measured::finish_calibrating` in the library), or \
                 read these powers as averages over the run's \
                 occupancy",
                found.join("; ")
            ));
        }
    }

    // Frequency: groups of rows by their frequency's ratio to their occupancy's usual one.
    if profiled {
        let labels = [
            "where the frequency is below 95% of its usual",
            "where the frequency is 95-99% of its usual",
            "where the frequency is 99-101% of its usual",
            "where the frequency is above 101% of its usual",
        ]
        .map(str::to_owned);
        let (lambdas, found) = by_group(&by_freq, &labels, material);
        if !found.is_empty() {
            for l in &lambdas {
                low = low.min(*l);
                high = high.max(*l);
            }
            let beta = fit.frequency.as_ref().map_or(0.0, |f| f.exponent);
            departures.push(format!(
                "the tasks' power does not follow the sampled frequency as fitted (f^{beta:.2}) \
                 ({}): a cap that also limits something the frequency does not show, or a \
                 frequency sampled on other cores than the tasks'; split the run at the \
                 change",
                found.join("; ")
            ));
        }
    }

    if departures.is_empty() {
        return;
    }
    for d in &departures {
        fit.diagnostics
            .warnings
            .push(format!("model departure: {d}"));
    }
    let short = departures
        .iter()
        .map(|d| d.split(" (").next().unwrap_or(d).to_owned())
        .collect::<Vec<_>>()
        .join("; ");
    let flag = Flag::ModelInDoubt { departure: short };
    // Each power's interval spans what the tasks drew over the run, not only the fit's
    // average: the truth of a power that changes lies within that range.
    let mark = |e: &mut super::estimate::Estimate| {
        e.issues.push(format!(
            "the model does not hold here (its power ranges {:+.0}% to {:+.0}% around this \
             value over the run): see the warnings",
            100.0 * low,
            100.0 * high
        ));
        e.flags.push(flag.clone());
        e.reliable = false;
        if let Some([lo, hi]) = &mut e.ci95_w {
            let range =
                |lo: f64, hi: f64| format!(" (95% interval {} to {})", si(lo, "W"), si(hi, "W"));
            let before = range(*lo, *hi);
            *lo = (*lo * (1.0 + low)).max(0.0);
            *hi *= 1.0 + high;
            // The notes name the interval the table shows (they named the one before).
            let after = range(*lo, *hi);
            for i in &mut e.issues {
                *i = i.replace(&before, &after);
            }
        }
    };
    for t in &mut fit.types {
        mark(t);
    }
    for t in fit.types_at_run.iter_mut().flatten() {
        mark(t);
    }
    if let Some(c) = &mut fit.contention {
        mark(&mut c.c);
    }
}
