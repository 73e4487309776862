//! Durations that depend on what runs beside them.
//!
//! On a real package a kernel runs slower when the other cores work too: they share the
//! last-level cache, the memory bandwidth and the power budget (the turbo bins fall as
//! cores fill). Issue 31 measured Cholesky's kernels 9-15 % slower with both cores of a
//! 2-core machine busy. A replay that keeps each recorded duration whatever runs beside
//! it predicts a run on more workers too fast and one on fewer too slow.
//!
//! So each task's *occupancy* is read from the trace: the mean number of its package's CPU
//! workers busy while it ran, itself included ([`occupancy`], a sweep per package). Per
//! codelet, the tasks' durations relative to their codelet and footprint's mean, `r`, are
//! regressed on it: `r = α + s·(k − 1)` ([`DurationLaw`]). `α` is the relative duration
//! alone, and `g(k) = (α + s·(k − 1))/α` the factor at `k` busy.
//!
//! The law is fitted only where the trace shows a contrast. That needs at least
//! [`MIN_TASKS`] CPU tasks whose occupancy spreads by at least [`MIN_SPREAD`] (standard
//! deviation). It is applied only when precise: its slope's 95 % interval within
//! ±[`MAX_HALF_WIDTH_PCT`] % of the duration alone per core. A run on one worker has no
//! contrast, and its codelets are listed as unidentified, with the reason.
//! The simulator divides each CPU task's duration by `g` at its recorded occupancy, and
//! multiplies it by `g` at the occupancy the simulated package has when the task starts.
//! A law is applied past the occupancies it was fitted on only up to
//! [`MAX_EXTRAPOLATION`] busy cores beyond them, and `simulate` says where it extrapolates.
//! The factor is bounded to `0.5..=3`.

use std::collections::HashMap;

use taskwatt_traces::{Arch, TaskRecord};

/// Fewest CPU tasks of a codelet to fit its law.
pub const MIN_TASKS: usize = 20;
/// Least standard deviation of the tasks' occupancy to fit a law (busy cores).
pub const MIN_SPREAD: f64 = 0.1;
/// The widest 95 % interval of a law's slope, in percent of the duration alone per busy
/// core, that is applied: a noisier law would move predictions by its noise.
pub const MAX_HALF_WIDTH_PCT: f64 = 5.0;
/// Busy cores past the largest recorded occupancy a law is extrapolated to; beyond, it
/// is held at its value there.
pub const MAX_EXTRAPOLATION: f64 = 2.0;

/// One codelet's duration against the number of busy cores of its package.
#[derive(Clone, Debug, PartialEq)]
pub struct DurationLaw {
    /// The codelet's name.
    pub codelet: String,
    /// Relative duration alone (`k = 1`), and its increase per extra busy core.
    pub alpha: f64,
    /// See [`DurationLaw::alpha`].
    pub slope: f64,
    /// The slope's standard error.
    pub slope_se: f64,
    /// CPU tasks it was fitted on.
    pub tasks: usize,
    /// The occupancies they ran at: least and largest, busy cores.
    pub k_min: f64,
    /// See [`DurationLaw::k_min`].
    pub k_max: f64,
}

impl DurationLaw {
    /// The duration's factor at `k` busy cores relative to alone, with the slope `slope`.
    fn factor_with(&self, k: f64, slope: f64) -> f64 {
        let k = k.clamp(1.0, self.k_max + MAX_EXTRAPOLATION);
        ((self.alpha + slope * (k - 1.0)) / self.alpha).clamp(0.5, 3.0)
    }

    /// The duration's factor at `k` busy cores relative to alone.
    pub fn factor(&self, k: f64) -> f64 {
        self.factor_with(k, self.slope)
    }

    /// The percentage a duration grows by per extra busy core, relative to alone.
    pub fn percent_per_core(&self) -> f64 {
        100.0 * self.slope / self.alpha
    }
}

/// Every codelet's law, and the codelets without one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContentionLaws {
    /// By codelet id.
    pub laws: HashMap<u32, DurationLaw>,
    /// Codelets with CPU tasks and no law, each with why.
    pub unidentified: Vec<(String, String)>,
    /// A replica's slopes (drawn within their errors); `None`: the fitted ones.
    slopes: Option<HashMap<u32, f64>>,
}

impl ContentionLaws {
    /// The duration factor of codelet `c` at `k` busy cores (1 without a law).
    pub fn factor(&self, c: u32, k: f64) -> f64 {
        match self.laws.get(&c) {
            Some(l) => {
                let s = self
                    .slopes
                    .as_ref()
                    .and_then(|m| m.get(&c).copied())
                    .unwrap_or(l.slope);
                l.factor_with(k, s)
            }
            None => 1.0,
        }
    }

    /// The laws with each slope drawn from a normal within its standard error (a replica
    /// for a prediction's interval), deterministically from `seed`.
    pub fn perturbed(&self, seed: u64) -> ContentionLaws {
        let slopes = self
            .laws
            .iter()
            .map(|(&c, l)| {
                let z = taskwatt_energy::SplitMix64::new(seed ^ u64::from(c)).next_normal();
                (c, l.slope + l.slope_se * z)
            })
            .collect();
        ContentionLaws {
            slopes: Some(slopes),
            ..self.clone()
        }
    }
}

/// Per record, the mean number of its package's CPU workers busy while it ran (itself
/// included); 0 for tasks on other architectures. `package_of` maps a worker to its
/// package.
pub(crate) fn occupancy(recs: &[&TaskRecord], package_of: impl Fn(u32) -> u32) -> Vec<f64> {
    let mut out = vec![0.0; recs.len()];
    // Per package: (time, 0 = end / 1 = start, record).
    let mut events: HashMap<u32, Vec<(u64, u8, usize)>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        if r.arch != Arch::Cpu {
            continue;
        }
        let e = events.entry(package_of(r.worker)).or_default();
        e.push((r.start.as_ns(), 1, i));
        e.push((r.end.as_ns().max(r.start.as_ns()), 0, i));
    }
    let mut at_start = vec![0.0f64; recs.len()];
    for (_, mut ev) in events {
        // Ends before starts at the same time: a task ending as another starts does not
        // run beside it.
        ev.sort_unstable();
        let (mut k, mut integral, mut last) = (0u32, 0.0f64, 0u64);
        for (t, kind, i) in ev {
            integral += f64::from(k) * (t - last) as f64;
            last = t;
            if kind == 1 {
                k += 1;
                at_start[i] = integral;
                // A task of no duration: the busy cores at its start.
                out[i] = f64::from(k);
            } else {
                let d = recs[i].end.as_ns().saturating_sub(recs[i].start.as_ns());
                if d > 0 {
                    out[i] = (integral - at_start[i]) / d as f64;
                }
                k = k.saturating_sub(1);
            }
        }
    }
    out
}

/// Fits each codelet's law on its CPU tasks: `tasks` as `(codelet, footprint, duration,
/// occupancy)`, `name` of a codelet id.
pub(crate) fn fit<'a>(
    tasks: impl Iterator<Item = (u32, u64, f64, f64)> + Clone,
    name: impl Fn(u32) -> &'a str,
) -> ContentionLaws {
    // Means per (codelet, footprint).
    let mut means: HashMap<(u32, u64), (f64, usize)> = HashMap::new();
    for (c, fp, d, _) in tasks.clone() {
        let e = means.entry((c, fp)).or_default();
        e.0 += d;
        e.1 += 1;
    }
    // Per codelet: (Σx, Σr, Σxx, Σxr, Σrr, n, kmin, kmax), x = k − 1, r = d / mean.
    let mut sums: HashMap<u32, [f64; 8]> = HashMap::new();
    for (c, fp, d, k) in tasks {
        let (s, n) = means[&(c, fp)];
        let m = s / n as f64;
        if m <= 0.0 || k <= 0.0 {
            continue;
        }
        let (x, r) = (k - 1.0, d / m);
        let e = sums
            .entry(c)
            .or_insert([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, f64::INFINITY, 0.0]);
        e[0] += x;
        e[1] += r;
        e[2] += x * x;
        e[3] += x * r;
        e[4] += r * r;
        e[5] += 1.0;
        e[6] = e[6].min(k);
        e[7] = e[7].max(k);
    }
    let mut out = ContentionLaws::default();
    let mut ids: Vec<u32> = sums.keys().copied().collect();
    ids.sort_unstable();
    for c in ids {
        let [sx, sr, sxx, sxr, srr, n, kmin, kmax] = sums[&c];
        let nm = n as usize;
        let var_x = (sxx - sx * sx / n) / n;
        let why = if nm < MIN_TASKS {
            Some(format!("{nm} CPU tasks, fewer than {MIN_TASKS}"))
        } else if var_x.sqrt() < MIN_SPREAD {
            Some(format!(
                "the busy cores beside its tasks hardly varied (from {kmin:.2} to {kmax:.2}, \
                 spread {:.2}): record it on more workers, or with an idle core now and then",
                var_x.sqrt()
            ))
        } else {
            None
        };
        if let Some(why) = why {
            out.unidentified.push((name(c).to_owned(), why));
            continue;
        }
        let sxx_c = sxx - sx * sx / n;
        let slope = (sxr - sx * sr / n) / sxx_c;
        let alpha = (sr - slope * sx) / n;
        // Residual variance and the slope's standard error.
        let rss = (srr - sr * sr / n) - slope * (sxr - sx * sr / n);
        let se = ((rss.max(0.0) / (n - 2.0)) / sxx_c).sqrt();
        if !(alpha > 0.1 && slope.is_finite() && se.is_finite()) {
            out.unidentified.push((
                name(c).to_owned(),
                "its durations do not follow a line in the busy cores".to_owned(),
            ));
            continue;
        }
        let half = 196.0 * se / alpha;
        if half > MAX_HALF_WIDTH_PCT {
            out.unidentified.push((
                name(c).to_owned(),
                format!(
                    "{:+.1}% ± {half:.1}% per extra busy core: too noisy to apply (more \
                     tasks, or a quieter recording, narrow it)",
                    100.0 * slope / alpha
                ),
            ));
            continue;
        }
        out.laws.insert(
            c,
            DurationLaw {
                codelet: name(c).to_owned(),
                alpha,
                slope,
                slope_se: se,
                tasks: nm,
                k_min: kmin,
                k_max: kmax,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_traces::Timestamp;

    fn rec(worker: u32, start: u64, end: u64) -> TaskRecord {
        TaskRecord::executed(0, 0, Arch::Cpu, worker, Timestamp(start), Timestamp(end))
    }

    #[test]
    fn occupancy_is_the_mean_of_the_busy_cores_over_each_task() {
        // Worker 0 runs 0..100; worker 1 runs 50..150: each had company half its time.
        let a = rec(0, 0, 100);
        let b = rec(1, 50, 150);
        // Worker 2 on another package: alone.
        let c = rec(2, 0, 100);
        let occ = occupancy(&[&a, &b, &c], |w| u32::from(w == 2));
        assert_eq!(occ, vec![1.5, 1.5, 1.0]);
    }

    #[test]
    fn a_slowdown_is_fitted_where_the_occupancy_varies_and_not_elsewhere() {
        // Codelet 0: 10 % longer per extra busy core, over 1 to 2 busy; codelet 1 always
        // at 2 busy.
        let mut tasks = Vec::new();
        for i in 0..100 {
            let k = 1.0 + (i % 11) as f64 / 10.0;
            let noise = 1.0 + 0.01 * ((i * 7919 % 13) as f64 - 6.0) / 6.0;
            tasks.push((0u32, 64u64, 1000.0 * (1.0 + 0.1 * (k - 1.0)) * noise, k));
            tasks.push((1u32, 64u64, 500.0 * noise, 2.0));
        }
        let laws = fit(
            tasks.iter().copied(),
            |c| if c == 0 { "gemm" } else { "potrf" },
        );
        let l = &laws.laws[&0];
        assert!((l.percent_per_core() - 10.0).abs() < 1.0, "{l:?}");
        assert!((laws.factor(0, 2.0) - 1.1).abs() < 0.01);
        assert_eq!(laws.factor(1, 2.0), 1.0);
        assert_eq!(laws.unidentified.len(), 1);
        assert!(laws.unidentified[0].1.contains("hardly varied"));
        // Past the recorded occupancies: extrapolated two cores, then held.
        assert!((l.factor(10.0) - l.factor(4.0)).abs() < 1e-12);
        // A replica draws the slope within its error.
        let p = laws.perturbed(7);
        assert!((p.factor(0, 2.0) - 1.1).abs() < 0.02);
        assert_eq!(p.factor(0, 2.0), laws.perturbed(7).factor(0, 2.0));
    }
}
