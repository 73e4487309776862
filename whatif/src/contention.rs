//! Durations that depend on what runs beside them.
//!
//! On a real package a kernel runs slower when the other cores work too: they share the
//! last-level cache, the memory bandwidth and the power budget (the turbo bins fall as
//! cores fill). Issue 31 measured Cholesky's kernels 9-15 % slower with both cores of a
//! 2-core machine busy. A replay that keeps each recorded duration whatever runs beside
//! it predicts a run on more workers too fast and one on fewer too slow.
//!
//! So each task's *occupancy* is read from the trace: the mean number of its package's CPU
//! workers busy while it ran, itself included (`occupancy`, a sweep per package). Per
//! codelet, the tasks' durations relative to their codelet and footprint's mean, `r`, are
//! regressed on it: `r = α + s·(k − 1)` ([`DurationLaw`]). `α` is the relative duration
//! alone, and `g(k) = (α + s·(k − 1))/α` the factor at `k` busy.
//!
//! The law is fitted only where the trace shows a contrast. That needs at least
//! [`MIN_TASKS`] CPU tasks whose occupancy spreads by at least [`MIN_SPREAD`] (standard
//! deviation). It is applied when precise, its slope's 95 % interval within
//! ±[`MAX_HALF_WIDTH_PCT`] % of the duration alone per core, or when it is a slowdown whose
//! whole interval lies above 0 % ([`applies`]). A run on one worker has no contrast, and its
//! codelets are listed as unidentified, with the reason.
//! The simulator divides each CPU task's duration by `g` at its recorded occupancy, and
//! multiplies it by `g` at the occupancy the simulated package has when the task starts.
//! A law is applied past the occupancies it was fitted on only up to
//! [`MAX_EXTRAPOLATION`] busy cores beyond them, and `simulate` says where it extrapolates.
//! The factor is bounded to `0.5..=3`.

use std::collections::HashMap;

use taskwatt_traces::{Arch, TaskRecord};

/// Fewest CPU tasks of a codelet to fit its law.
pub const MIN_TASKS: usize = 20;
/// Stretches of the recording, of equal length, whose tasks' errors may be correlated
/// (the clusters of a law's robust standard error).
pub const BLOCKS: usize = 32;

/// Least standard deviation of the tasks' occupancy to fit a law (busy cores).
pub const MIN_SPREAD: f64 = 0.1;
/// The widest 95 % interval of a law's slope, in percent of the duration alone per busy
/// core, that is applied whatever its sign: a noisier law would move predictions by its
/// noise, unless it is a slowdown whose whole interval lies above 0 % ([`applies`]).
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

    /// The half-width of the slope's 95 % interval, in the same percent.
    pub fn half_width_pct(&self) -> f64 {
        half_width_pct(self.slope_se, self.alpha)
    }

    /// Whether the law is precise (its interval within ±[`MAX_HALF_WIDTH_PCT`] %), rather
    /// than applied as a slowdown whose whole interval lies above 0 % ([`applies`]).
    pub fn is_precise(&self) -> bool {
        self.half_width_pct() <= MAX_HALF_WIDTH_PCT
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

/// Where a task ran: in the graph, or in a type calibration phase around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Group {
    /// The graph's own tasks.
    Graph,
    /// Calibration tasks: the same codelets on scratch data, alone and on every core.
    Calibration,
}

/// Fits each codelet's law on its CPU tasks: `tasks` as `(codelet, footprint, duration,
/// occupancy, group, start)` (start in ns), `name` of a codelet id.
///
/// Each group's tasks are relative to their own mean (per codelet and footprint), and the
/// slope comes from the occupancy's variation within each group (a fixed effect per group):
/// calibration tasks, which run on a hot scratch tile, may be faster or slower than the
/// graph's at every occupancy, and that must not read as contention. A recording on one
/// worker thus gets its law from its calibration's contrast (alone, then every core of
/// the package, reserved workers included), and `α` is the graph's where it has tasks.
///
/// The slope's standard error is the larger of the classical one and one robust to
/// durations correlated in time ([`BLOCKS`] stretches of the recording as clusters): a
/// machine whose speed wanders (a VM's neighbours) makes neighbouring tasks err alike, and
/// the classical error then claimed ±2 % for slopes that moved by 15 % between recordings.
pub(crate) fn fit<'a>(
    tasks: impl Iterator<Item = (u32, u64, f64, f64, Group, u64)> + Clone,
    name: impl Fn(u32) -> &'a str,
) -> ContentionLaws {
    // The clusters: BLOCKS equal stretches of the tasks' span.
    let (t_min, t_max) = tasks
        .clone()
        .fold((u64::MAX, 0), |(a, b), t| (a.min(t.5), b.max(t.5)));
    let block_ns = (t_max.saturating_sub(t_min) / BLOCKS as u64).max(1);
    let block_of = |t: u64| ((t.saturating_sub(t_min) / block_ns) as usize).min(BLOCKS - 1);
    // Means per (codelet, footprint, group).
    let mut means: HashMap<(u32, u64, Group), (f64, usize)> = HashMap::new();
    for (c, fp, d, _, g, _) in tasks.clone() {
        let e = means.entry((c, fp, g)).or_default();
        e.0 += d;
        e.1 += 1;
    }
    // Per codelet and group: (Σx, Σr, Σxx, Σxr, Σrr, n, kmin, kmax), x = k − 1,
    // r = d / mean.
    let mut sums: HashMap<(u32, Group), [f64; 8]> = HashMap::new();
    for (c, fp, d, k, g, _) in tasks.clone() {
        let (s, n) = means[&(c, fp, g)];
        let m = s / n as f64;
        if m <= 0.0 || k <= 0.0 {
            continue;
        }
        let (x, r) = (k - 1.0, d / m);
        let e = sums
            .entry((c, g))
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
    // Each codelet's within-group slope, then per cluster Σ x̃·e (x̃ = x − x̄ of the
    // task's group, e its residual) for the robust error.
    let mut within: HashMap<u32, (f64, f64)> = HashMap::new();
    for (&(c, _), &[sx, sr, sxx, sxr, _, ng, _, _]) in &sums {
        let e = within.entry(c).or_default();
        e.0 += sxx - sx * sx / ng;
        e.1 += sxr - sx * sr / ng;
    }
    let slopes: HashMap<u32, f64> = within.iter().map(|(&c, &(xx, xr))| (c, xr / xx)).collect();
    let mut clusters: HashMap<(u32, usize), f64> = HashMap::new();
    for (c, fp, d, k, g, t) in tasks {
        let (s, n) = means[&(c, fp, g)];
        let m = s / n as f64;
        if m <= 0.0 || k <= 0.0 {
            continue;
        }
        let [sx, sr, .., ng, _, _] = sums[&(c, g)];
        let slope = slopes[&c];
        let xt = (k - 1.0) - sx / ng;
        let e = d / m - sr / ng - slope * xt;
        *clusters.entry((c, block_of(t))).or_default() += xt * e;
    }
    let mut robust: HashMap<u32, (f64, usize)> = HashMap::new();
    for ((c, _), v) in &clusters {
        let e = robust.entry(*c).or_default();
        e.0 += v * v;
        e.1 += 1;
    }
    let mut out = ContentionLaws::default();
    let mut ids: Vec<u32> = sums.keys().map(|(c, _)| *c).collect();
    ids.sort_unstable();
    ids.dedup();
    for c in ids {
        // Within-group sums: (Sxx, Sxr, Srr), and the tasks of groups whose occupancy
        // varies.
        let (mut sxx_w, mut sxr_w, mut srr_w) = (0.0, 0.0, 0.0);
        let (mut n, mut n_vary, mut groups) = (0.0, 0.0, 0.0);
        let (mut kmin, mut kmax) = (f64::INFINITY, 0.0f64);
        for g in [Group::Graph, Group::Calibration] {
            let Some(&[sx, sr, sxx, sxr, srr, ng, lo, hi]) = sums.get(&(c, g)) else {
                continue;
            };
            let gxx = (sxx - sx * sx / ng).max(0.0);
            sxx_w += gxx;
            sxr_w += sxr - sx * sr / ng;
            srr_w += srr - sr * sr / ng;
            n += ng;
            groups += 1.0;
            if gxx > 1e-12 * ng {
                n_vary += ng;
            }
            kmin = kmin.min(lo);
            kmax = kmax.max(hi);
        }
        let nm = n as usize;
        let spread = if n_vary > 0.0 {
            (sxx_w / n_vary).sqrt()
        } else {
            0.0
        };
        let why = if nm < MIN_TASKS {
            Some(format!("{nm} CPU tasks, fewer than {MIN_TASKS}"))
        } else if spread < MIN_SPREAD {
            Some(format!(
                "the busy cores beside its tasks hardly varied (from {kmin:.2} to {kmax:.2}, \
                 spread {spread:.2}): record it on more workers, with type calibration, or \
                 with an idle core now and then"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            out.unidentified.push((name(c).to_owned(), why));
            continue;
        }
        let slope = sxr_w / sxx_w;
        // α: the relative duration alone of the graph's tasks where there are some.
        let [sx, sr, .., ng, _, _] = sums
            .get(&(c, Group::Graph))
            .or_else(|| sums.get(&(c, Group::Calibration)))
            .copied()
            .expect("a codelet with tasks has a group");
        let alpha = (sr - slope * sx) / ng;
        // Residual variance and the slope's standard error (a mean per group and the
        // slope fitted).
        let rss = srr_w - slope * sxr_w;
        let classical = ((rss.max(0.0) / (n - groups - 1.0).max(1.0)) / sxx_w).sqrt();
        // Clustered by stretch of time, with the small-sample factor G / (G − 1).
        let (meat, g_clusters) = robust.get(&c).copied().unwrap_or((0.0, 0));
        let clustered = if g_clusters > 1 {
            (meat * g_clusters as f64 / (g_clusters - 1) as f64).sqrt() / sxx_w
        } else {
            f64::INFINITY
        };
        let se = classical.max(clustered);
        if !(alpha > 0.1 && slope.is_finite() && se.is_finite()) {
            out.unidentified.push((
                name(c).to_owned(),
                "its durations do not follow a line in the busy cores".to_owned(),
            ));
            continue;
        }
        let half = half_width_pct(se, alpha);
        let pct = 100.0 * slope / alpha;
        if !applies(pct, half) {
            let why = if pct < 0.0 {
                "too noisy to apply, and a speed-up beside busy cores is not what contention \
                 does"
            } else {
                "too noisy to apply, and 0 % (no slowdown) is within its interval"
            };
            out.unidentified.push((
                name(c).to_owned(),
                format!(
                    "{pct:+.1}% ± {half:.1}% per extra busy core: {why} (more tasks, or a \
                     quieter recording, narrow it)"
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

/// Whether a law of `pct` ± `half` % per extra busy core (its slope and 95 % half-width,
/// relative to the duration alone) is applied: when precise (`half` within
/// [`MAX_HALF_WIDTH_PCT`]), or when it is a slowdown whose whole interval lies above 0 %
/// (`pct > half`). Keeping the recorded durations is itself a law, of no slowdown: where the
/// recording shows +22 % ± 7 %, that is the law its interval excludes, and the replicas
/// draw the slope within its error, so the prediction's interval widens with it. A
/// speed-up is applied only when precise: contention does not make a kernel faster, so a
/// wide negative slope is the machine's drift, not a law (the README's Cholesky showed
/// gemm −14.5 % ± 10.8 % in one recording and +2.1 % ± 8.1 % in the next).
pub fn applies(pct: f64, half: f64) -> bool {
    half <= MAX_HALF_WIDTH_PCT || pct > half
}

/// A slope's 95 % half-width from its standard error, in percent of the duration alone.
fn half_width_pct(se: f64, alpha: f64) -> f64 {
    196.0 * se / alpha
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
            tasks.push((
                0u32,
                64u64,
                1000.0 * (1.0 + 0.1 * (k - 1.0)) * noise,
                k,
                Group::Graph,
                i as u64 * 1_000_000,
            ));
            tasks.push((
                1u32,
                64u64,
                500.0 * noise,
                2.0,
                Group::Graph,
                i as u64 * 1_000_000,
            ));
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

    #[test]
    fn a_one_worker_recording_takes_its_law_from_its_calibration_s_contrast() {
        // The graph always alone; calibration tasks 8 % faster at every occupancy (a hot
        // scratch tile), alone and at 2 busy; both 12 % longer per extra busy core.
        let noise = |i: usize| 1.0 + 0.02 * ((i * 7919 % 13) as f64 - 6.0) / 6.0;
        let mut tasks = Vec::new();
        for i in 0..300 {
            tasks.push((
                0u32,
                64u64,
                1000.0 * noise(i),
                1.0,
                Group::Graph,
                i as u64 * 1_000_000,
            ));
        }
        for i in 0..300 {
            let k = if i % 3 == 0 { 1.0 } else { 2.0 };
            let d = 920.0 * (1.0 + 0.12 * (k - 1.0)) * noise(i + 5);
            let t = (300 + i) as u64 * 1_000_000;
            tasks.push((0u32, 64u64, d, k, Group::Calibration, t));
        }
        let laws = fit(tasks.iter().copied(), |_| "gemm");
        let l = &laws.laws[&0];
        assert!((l.percent_per_core() - 12.0).abs() < 1.0, "{l:?}");
        assert!((l.alpha - 1.0).abs() < 0.01, "{l:?}");
        // Pooled as one group, the calibration's hot tile reads as a smaller slowdown.
        let pooled = fit(
            tasks
                .iter()
                .map(|&(c, f, d, k, _, t)| (c, f, d, k, Group::Graph, t)),
            |_| "gemm",
        );
        assert!(pooled.laws[&0].percent_per_core() < 10.0, "{pooled:?}");
        // The graph alone: no contrast.
        let alone = fit(tasks.iter().copied().take(300), |_| "gemm");
        assert!(alone.laws.is_empty() && alone.unidentified[0].1.contains("hardly varied"));
    }

    #[test]
    fn an_imprecise_slowdown_is_applied_and_an_imprecise_speed_up_is_not() {
        // Precise laws apply whatever their sign; imprecise ones only as a slowdown that
        // their whole interval lies above 0 %.
        assert!(applies(-3.0, 4.0) && applies(12.0, 1.0));
        assert!(
            applies(22.0, 7.1),
            "+22 % ± 7.1 %: 0 % is outside its interval"
        );
        assert!(
            !applies(-14.5, 10.8),
            "a wide speed-up is the machine's drift"
        );
        assert!(!applies(3.0, 8.0), "0 % is within its interval");
        // The same through a fit: a machine whose speed wanders by stretches (12 %
        // standard deviation) under a real 30 % slowdown per extra busy core, and the
        // same machine under a speed-up.
        let recording = |pct: f64| {
            let mut rng = taskwatt_energy::SplitMix64::new(3);
            let mut tasks = Vec::new();
            for j in 0..24u64 {
                let k = 1.0 + (j % 2) as f64;
                let speed = 1.0 + 0.12 * rng.next_normal().clamp(-2.5, 2.5);
                for i in 0..30u64 {
                    let d = 1000.0 * (1.0 + pct / 100.0 * (k - 1.0)) * speed;
                    tasks.push((0u32, 64u64, d, k, Group::Graph, (j * 30 + i) * 1_000_000));
                }
            }
            fit(tasks.iter().copied(), |_| "heat_step")
        };
        let slow = recording(30.0);
        let l = &slow.laws[&0];
        let half = l.half_width_pct();
        assert!(half > MAX_HALF_WIDTH_PCT, "imprecise, as meant: {l:?}");
        assert!(!l.is_precise());
        assert!((l.percent_per_core() - 30.0).abs() < half, "{l:?}");
        // Its replicas draw the slope within its error: their factors spread.
        let draws: Vec<f64> = (0..16).map(|s| slow.perturbed(s).factor(0, 2.0)).collect();
        let (lo, hi) = draws
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        assert!(hi - lo > 0.03, "{draws:?}");
        let fast = recording(-30.0);
        assert!(fast.laws.is_empty(), "{fast:?}");
        assert!(fast.unidentified[0].1.contains("speed-up"), "{fast:?}");
    }

    #[test]
    fn a_machine_whose_speed_wanders_gets_an_error_that_holds_the_truth() {
        // No contention at all, but the machine's speed wanders by stretches of 50 tasks
        // (5 % standard deviation), and the occupancy alternates by the same stretches: every stretch's
        // tasks err alike. The classical error (independent tasks) would call a spurious
        // slope precise; clustered by stretch of time, its interval holds 0.
        let mut rng = taskwatt_energy::SplitMix64::new(11);
        let mut tasks = Vec::new();
        for j in 0..64u64 {
            let k = 1.0 + (j % 2) as f64;
            let speed = 1.0 + 0.05 * rng.next_normal().clamp(-2.0, 2.0);
            for i in 0..50u64 {
                let d = 1000.0 * speed * (1.0 + 0.005 * rng.next_normal());
                tasks.push((0u32, 64u64, d, k, Group::Graph, (j * 50 + i) * 1_000_000));
            }
        }
        let laws = fit(tasks.iter().copied(), |_| "gemm");
        // The classical error here is about 0.05 / √(3200 · 0.25) ≈ 0.0018: a slope of a
        // percent or two would read as real. The clustered one holds the truth, 0.
        let l = &laws.laws[&0];
        assert!(l.slope_se > 0.006, "{l:?}");
        assert!(l.slope.abs() < 1.96 * l.slope_se, "{l:?}");
    }
}
