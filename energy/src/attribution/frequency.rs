//! Frequency as a regressor: a domain whose cores ran slower for part of the run.
//!
//! A task's dynamic power follows its core's frequency, `P ∝ f^β` (β between 1 and 3 on
//! real parts: `f·V²` with the voltage rising with `f`). Part of the frequency's change is
//! already in the model: the turbo bins fall as cores fill, which the contention `c`
//! absorbs (`contention.rs`). What it cannot absorb is a change at the *same* occupancy: a
//! power or thermal cap for part of the run, a governor that steps. Where the trace holds
//! the domain's sampled frequency (`Chunk::Frequencies`, format 1.6), each interval's
//! frequency is compared with what its occupancy predicts,
//!
//! ```text
//! r_i = f_i / f̂(k̄_i),   f̂(k) = a + b·(k − 1)   (weighted least squares over busy intervals)
//! ```
//!
//! (`k̄_i` the interval's mean number of busy tasks), and every task column of interval `i`
//! is scaled by `r_i^β`. The powers are then the powers at the frequency the domain usually
//! runs at for its occupancy, as without frequency, and an interval under a cap reads what
//! it drew. β is profiled (grid, then golden section) on the residual sum of squares, with
//! the contention profiled at each β; it is kept when a likelihood-ratio test (χ²₁, 95 %)
//! says the data need it, else held at 0. β's own uncertainty is not carried into the
//! powers' intervals: they are conditional on it.

use serde::{Deserialize, Serialize};

use super::options::Solver;
use super::stack::{accumulate, Stack};

/// Relative spread (weighted standard deviation of `ln r`) below which the frequency is
/// taken as steady and not profiled.
pub(crate) const STEADY: f64 = 0.003;

/// The profile's range of β.
const BETA_MAX: f64 = 4.0;

/// Grid points of the profile before the golden-section refinement.
const GRID: usize = 9;

/// χ²₁'s 95 % quantile: the likelihood-ratio test's threshold.
const CHI2_1_95: f64 = 3.841;

/// How the sampled frequency entered a domain's fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrequencyFit {
    /// β: the tasks' power follows `f^β` at a given occupancy (0 when not used).
    pub exponent: f64,
    /// Whether the fit uses it (the data needed it: the likelihood-ratio test passed).
    pub used: bool,
    /// Whether β was profiled (the frequency varied at a given occupancy, and the fit was
    /// asked to use it).
    #[serde(default)]
    pub profiled: bool,
    /// The likelihood-ratio statistic of β against β = 0 (χ²₁; above 3.84 it is used).
    pub lr: f64,
    /// Busy-time-weighted mean frequency over the run, MHz.
    pub mean_mhz: f64,
    /// The frequency's trend with occupancy, MHz per extra busy core (turbo bins).
    pub mhz_per_core: f64,
    /// The smallest and largest ratio of an interval's frequency to its occupancy's.
    pub ratio_range: (f64, f64),
    /// Weighted spread of the ratio's logarithm (0.01: 1 %).
    pub spread: f64,
}

/// Per system, the ratios `r_i` of the module docs (1 where unknown), with what they
/// describe; `None` when no system has frequency samples.
pub(crate) fn ratios(stack: &Stack<'_>) -> Option<(Vec<Vec<f64>>, FrequencyFit)> {
    if stack.systems.iter().all(|s| s.freq_mhz.is_empty()) {
        return None;
    }
    let mut out = Vec::with_capacity(stack.systems.len());
    let (mut sw, mut swf, mut slo, mut shi) = (0.0, 0.0, f64::INFINITY, 0.0f64);
    let (mut sl, mut sll) = (0.0, 0.0);
    let mut slope_sum = 0.0;
    for s in &stack.systems {
        let n = s.intervals();
        if s.freq_mhz.len() != n {
            out.push(Vec::new());
            continue;
        }
        // Per interval: busy time T and mean busy count k̄.
        let mut busy = vec![0.0; n];
        let mut occ = vec![0.0; n];
        for c in &s.columns {
            for (i, t) in c.time_ns.iter().enumerate() {
                busy[i] += *t as f64;
            }
            for (i, u) in c.occ_ns.iter().enumerate() {
                occ[i] += *u as f64;
            }
        }
        // f ≈ a + b·k̄, weighted by busy time, robustly: a cap holds a share of the
        // intervals away from the line, and a least-squares line would lean towards them
        // (reading the uncapped intervals as fast).
        let pts: Vec<(f64, f64, f64)> = (0..n)
            .filter(|&i| busy[i] > 0.0 && s.freq_mhz[i].is_finite())
            .map(|i| (occ[i] / busy[i], s.freq_mhz[i], busy[i]))
            .collect();
        let Some((icpt, slope, w, wy)) = robust_line(&pts) else {
            out.push(Vec::new());
            continue;
        };
        let mut r = vec![1.0; n];
        for i in 0..n {
            let f = s.freq_mhz[i];
            if busy[i] <= 0.0 || !f.is_finite() {
                continue;
            }
            let pred = icpt + slope * occ[i] / busy[i];
            if pred > 0.0 {
                r[i] = f / pred;
                let l = r[i].ln();
                sl += busy[i] * l;
                sll += busy[i] * l * l;
                slo = slo.min(r[i]);
                shi = shi.max(r[i]);
            }
        }
        sw += w;
        swf += wy;
        slope_sum += slope * w;
        out.push(r);
    }
    if sw <= 0.0 {
        return None;
    }
    let mean_l = sl / sw;
    let spread = (sll / sw - mean_l * mean_l).max(0.0).sqrt();
    Some((
        out,
        FrequencyFit {
            exponent: 0.0,
            used: false,
            profiled: false,
            lr: 0.0,
            mean_mhz: swf / sw,
            mhz_per_core: slope_sum / sw,
            ratio_range: (slo.min(shi), shi),
            spread,
        },
    ))
}

/// A line `y ≈ a + b·x` through weighted points `(x, y, w)`: least absolute deviations,
/// then iteratively reweighted least squares with Tukey's bisquare (tuning 4.685 robust standard deviations, the scale from
/// the weighted median absolute deviation): points more than that far from the line, as
/// intervals under a cap are from the machine's usual frequency, get no weight. Returns
/// `(a, b, Σw, Σw·y)` over all points; `None` without weight.
fn robust_line(pts: &[(f64, f64, f64)]) -> Option<(f64, f64, f64, f64)> {
    let total: f64 = pts.iter().map(|p| p.2).sum();
    if total <= 0.0 {
        return None;
    }
    let wy_all: f64 = pts.iter().map(|p| p.2 * p.1).sum();
    let fit = |rw: &[f64]| -> Option<(f64, f64)> {
        let (mut w, mut wx, mut wy, mut wxx, mut wxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (&(x, y, pw), &r) in pts.iter().zip(rw) {
            let v = pw * r;
            w += v;
            wx += v * x;
            wy += v * y;
            wxx += v * x * x;
            wxy += v * x * y;
        }
        if w <= 0.0 {
            return None;
        }
        let var = wxx / w - (wx / w).powi(2);
        let b = if var > 1e-9 {
            (wxy / w - (wx / w) * (wy / w)) / var
        } else {
            0.0
        };
        Some((wy / w - b * wx / w, b))
    };
    let mut rw = vec![1.0; pts.len()];
    let (mut a, mut b) = fit(&rw)?;
    // Start from the least-absolute-deviation line (IRLS with weights 1/|r|): at a given
    // occupancy it follows the majority of the intervals, where least squares would fall
    // between a cap's intervals and the others.
    let eps = 1e-6 * a.abs().max(1.0);
    for _ in 0..50 {
        for (r, &(x, y, _)) in rw.iter_mut().zip(pts) {
            *r = 1.0 / (y - a - b * x).abs().max(eps);
        }
        let Some((na, nb)) = fit(&rw) else { break };
        let moved = (na - a).abs() + (nb - b).abs();
        (a, b) = (na, nb);
        if moved < 1e-9 * a.abs().max(1.0) {
            break;
        }
    }
    for _ in 0..20 {
        let mut res: Vec<(f64, f64)> = pts
            .iter()
            .map(|&(x, y, w)| ((y - a - b * x).abs(), w))
            .collect();
        res.sort_by(|p, q| p.0.total_cmp(&q.0));
        let (mut acc, mut mad) = (0.0, 0.0);
        for (r, w) in &res {
            acc += w;
            if acc >= 0.5 * total {
                mad = *r;
                break;
            }
        }
        let scale = 1.4826 * mad;
        if scale <= 1e-9 * a.abs().max(1.0) {
            break;
        }
        let cut = 4.685 * scale;
        for (r, &(x, y, _)) in rw.iter_mut().zip(pts) {
            let u = (y - a - b * x) / cut;
            *r = if u.abs() < 1.0 {
                (1.0 - u * u).powi(2)
            } else {
                0.0
            };
        }
        let Some((na, nb)) = fit(&rw) else { break };
        let moved = (na - a).abs() + (nb - b).abs();
        (a, b) = (na, nb);
        if moved < 1e-9 * a.abs().max(1.0) {
            break;
        }
    }
    Some((a, b, total, wy_all))
}

/// The residual sum of squares at the stack's current β, with the contention profiled.
fn rss(stack: &Stack<'_>, solver: Solver) -> f64 {
    let acc = accumulate(stack, 1).remove(0);
    let theta = if stack.occupancy {
        super::contention::profile(stack, &acc, solver).theta
    } else {
        0.0
    };
    // The full sum: the columns change with β, so the part no column explains does too.
    super::contention::rss(stack, &acc, theta, solver) + acc.tail_rss()
}

/// Profiles β on `stack` (whose ratios are set) and leaves `stack.freq_beta` at the value
/// the fit uses: the optimum when the data need it, else 0.
pub(crate) fn profile(stack: &mut Stack<'_>, fit: &mut FrequencyFit, solver: Solver) {
    if fit.spread < STEADY {
        stack.freq_beta = 0.0;
        return;
    }
    fit.profiled = true;
    let (beta, rss_b, values) = super::contention::grid_golden(
        |b| {
            stack.freq_beta = b;
            rss(stack, solver)
        },
        0.0,
        BETA_MAX,
        GRID,
        1e-3,
        20,
    );
    let rss0 = values[0];
    let dof = stack
        .rows()
        .saturating_sub(stack.unknowns() + 2 + usize::from(stack.occupancy))
        .max(1);
    let sigma2 = rss_b / dof as f64;
    fit.lr = if sigma2 > 0.0 {
        (rss0 - rss_b) / sigma2
    } else {
        0.0
    };
    fit.used = fit.lr > CHI2_1_95 && beta > 0.0;
    fit.exponent = if fit.used { beta } else { 0.0 };
    stack.freq_beta = fit.exponent;
}
