//! How much the recording machine's speed moves from one stretch of time to the next.
//!
//! A replay's replicas draw each task's duration from its type's recorded variability, so
//! their spread says how much the makespan varies because tasks vary. It does not say how
//! much it varies because the whole machine runs faster or slower from one run to the
//! next: a VM whose neighbours come and go, a package that throttles. On the development
//! VM that was the larger part: three one-worker recordings of one Cholesky took 0.648,
//! 0.655 and 0.719 s, while each replay's interval was ±1.5 %.
//!
//! A recording with type calibration around its graph spans ten times the graph or more.
//! Cut into windows as long as the graph, its tasks' durations relative to their type's
//! mean show how far the machine's speed moves between windows that long:
//! [`speed_wander`] is that spread, less what each window's own task sampling explains.
//! The replicas then also draw the machine's speed (engine.rs), so that the interval holds
//! a run on a faster or slower stretch. Without calibration the recording is one window:
//! nothing is estimated, and the docs say the interval does not hold this.
//!
//! # Shorter stretches
//!
//! `--type-calibration auto` stops once the powers are pinned down, which on a graph of a
//! second or more is well before it spans four times the graph. The recording is then cut
//! into [`SHORT_WINDOWS`] equal stretches instead, shorter than the graph. The mean speed
//! varies at least as much between short stretches as between long ones (a speed that
//! drifts slowly moves alike over both; quick swings average out over the long ones), so
//! the spread is then overstated rather than understated: the intervals widen, and
//! `simulate` says on what stretches the spread was measured.

use std::collections::HashMap;
use std::hash::Hash;

/// Fewest tasks in a window for its mean to count.
const MIN_WINDOW_TASKS: usize = 30;

/// Fewest windows to estimate a spread.
pub const MIN_WINDOWS: usize = 4;

/// Equal stretches the whole recording is cut into when it holds too few as long as its
/// graph (see "Shorter stretches").
pub(crate) const SHORT_WINDOWS: u64 = 6;

/// The relative standard deviation of the machine's speed between windows of
/// `window_ns`, from `tasks` as `(key, start_ns, duration_ns)`, `key` what a duration is
/// relative to (a type and its group: graph or calibration). `None` when fewer than
/// [`MIN_WINDOWS`] windows hold [`MIN_WINDOW_TASKS`] tasks each.
pub(crate) fn speed_wander<K: Hash + Eq + Copy>(
    tasks: &[(K, u64, f64)],
    window_ns: u64,
) -> Option<f64> {
    if window_ns == 0 || tasks.is_empty() {
        return None;
    }
    let mut means: HashMap<K, (f64, usize)> = HashMap::new();
    for &(k, _, d) in tasks {
        let e = means.entry(k).or_default();
        e.0 += d;
        e.1 += 1;
    }
    let t0 = tasks.iter().map(|t| t.1).min()?;
    // Per window: (Σr, Σr², n), r a task's duration over its key's mean.
    let mut windows: HashMap<u64, (f64, f64, usize)> = HashMap::new();
    for &(k, s, d) in tasks {
        let (sum, n) = means[&k];
        let m = sum / n as f64;
        if m <= 0.0 {
            continue;
        }
        let r = d / m;
        let w = windows.entry((s - t0) / window_ns).or_default();
        w.0 += r;
        w.1 += r * r;
        w.2 += 1;
    }
    let full: Vec<(f64, f64)> = windows
        .values()
        .filter(|w| w.2 >= MIN_WINDOW_TASKS)
        .map(|&(s, ss, n)| {
            let n = n as f64;
            let mean = s / n;
            // The variance of the window's mean from its own tasks alone.
            let within = ((ss - s * s / n) / (n - 1.0)).max(0.0) / n;
            (mean, within)
        })
        .collect();
    if full.len() < MIN_WINDOWS {
        return None;
    }
    let k = full.len() as f64;
    let grand = full.iter().map(|w| w.0).sum::<f64>() / k;
    let between = full.iter().map(|w| (w.0 - grand).powi(2)).sum::<f64>() / (k - 1.0);
    let sampling = full.iter().map(|w| w.1).sum::<f64>() / k;
    Some((between - sampling).max(0.0).sqrt() / grand)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tasks of two types over 20 windows of 1 s, the machine's speed per window given.
    fn tasks(speed: impl Fn(u64) -> f64, noise: f64) -> Vec<(u64, u64, f64)> {
        let mut out = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for w in 0..20u64 {
            for i in 0..200u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                let key = i % 2;
                let base = if key == 0 { 1000.0 } else { 250.0 };
                out.push((
                    key,
                    w * 1_000_000_000 + i * 5_000_000,
                    base * speed(w) * (1.0 + noise * u),
                ));
            }
        }
        out
    }

    #[test]
    fn a_steady_machine_shows_no_wander_whatever_its_tasks_vary() {
        let s = speed_wander(&tasks(|_| 1.0, 0.4), 1_000_000_000).unwrap();
        assert!(s < 0.01, "{s}");
    }

    #[test]
    fn a_machine_that_alternates_between_two_speeds_shows_their_spread() {
        // ±6 % by window: a standard deviation of about 6 %.
        let s = speed_wander(
            &tasks(|w| if w % 2 == 0 { 0.94 } else { 1.06 }, 0.2),
            1_000_000_000,
        )
        .unwrap();
        assert!((s - 0.06).abs() < 0.01, "{s}");
    }

    #[test]
    fn replicas_draw_the_machine_s_speed_within_the_wander() {
        use crate::engine::{simulate, SimOptions};
        use crate::graph::{GraphBuilder, GraphTask};
        // 40 equal independent tasks on two cores: without a wander every replica takes
        // the same time; with 10 %, the replicas' makespans spread by about that.
        let mut b = GraphBuilder::new(Vec::new());
        for id in 0..40 {
            let t = GraphTask {
                id,
                codelet: 0,
                arch: taskwatt_traces::Arch::Cpu,
                priority: 0,
                footprint: 0,
                duration_ns: 1_000_000,
            };
            b.task(t, &[]);
        }
        let mut g = b.build();
        let platform = crate::platform::Platform::from_toml_str(
            "name = \"t\"\n[cpu]\ncores_per_package = 2\n[runtime]\noverhead_us = 0\n",
            "t",
        )
        .unwrap();
        let spans = |g: &crate::graph::Graph| -> Vec<f64> {
            (0..16u64)
                .map(|seed| {
                    let mut o = SimOptions::new("eager");
                    o.energy = false;
                    o.replica_seed = Some(seed);
                    simulate(g, &platform, &o).unwrap().makespan_ns as f64
                })
                .collect()
        };
        let still = spans(&g);
        assert!(still.iter().all(|m| *m == still[0]), "{still:?}");
        g.wander = Some(0.1);
        let moved = spans(&g);
        let mean = moved.iter().sum::<f64>() / 16.0;
        let sd = (moved.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / 15.0).sqrt() / mean;
        assert!((0.05..0.16).contains(&sd), "{sd} {moved:?}");
    }

    #[test]
    fn a_recording_as_long_as_one_window_gives_nothing() {
        let t = tasks(|_| 1.0, 0.1);
        assert_eq!(speed_wander(&t, 100_000_000_000), None);
        assert_eq!(speed_wander::<u64>(&[], 1), None);
    }
}
