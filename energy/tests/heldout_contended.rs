//! Held-out contended data, made by a generator that shares nothing with the simulated
//! meter (`energy/src/sim`): its own schedule, its own power law, its own noise and its own
//! RAPL-like counter, written as CSV and imported as a user would, without any meter flag.
//!
//! The machine departs from the attribution's linear model as packages do: each task draws
//! `(1 − c·(k − 1))` of its power alone with `k` tasks running (c up to 0.1), a frequency
//! step scales every task's power by 0.8 over part of the run, the base drifts linearly,
//! each task's power varies around its type's (10-30 %), the counter updates every
//! 0.977 ms (not 1 ms) at an unknown phase and is read every 1 to 100 ms by a sampler that
//! is late now and then. What is checked (issue 28's bars): of the powers shown as
//! measurements, at least 95 % within 5 % of the truth and none beyond 10 %; 95 % intervals
//! that cover; and every scenario with a contention of 0.03 or more either fitted within
//! 5 % or warned about by name.

use std::fmt::Write as _;

use taskwatt_energy::attribution::{attribute_trace, AttributionOptions, Flag};
use taskwatt_traces::{import_csv, ImportOptions, TimeUnit};

/// xorshift64*, seeded per scenario.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        // Sum of twelve uniforms (Irwin-Hall): not the simulator's Box-Muller.
        (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    name: String,
    workers: usize,
    contention: f64,
    /// Every task's power times this over this share of the run.
    step: Option<(f64, f64, f64)>,
    variation: f64,
    /// Base change over the run, relative.
    drift: f64,
    period_ms: f64,
    noise_w: f64,
    /// Share of the application with every worker busy (the rest: random occupancy).
    full_share: f64,
    /// Whether each type also runs alone, then together, before the application.
    calibrated: bool,
    seed: u64,
}

const POWERS: [f64; 4] = [6.0, 11.0, 15.0, 9.0];
const NAMES: [&str; 4] = ["alpha", "beta", "gamma", "delta"];
const BASE_W: f64 = 25.0;
const RUN_MS: f64 = 16_000.0;
/// Idle at the start and at the end, ms.
const IDLE_MS: f64 = 1_000.0;

/// One task: worker, type, start and end (ms), its own power alone (W).
type Task = (usize, usize, f64, f64, f64);

/// The run: idle for a second, each type alone then on every worker for a while (what
/// type calibration does; `calibrated` scenarios only), the application (40 ms epochs, every
/// worker busy in `full_share` of them, a random number of workers in the others, random
/// types back to back), idle for a second at the end.
fn schedule(sc: &Scenario, rng: &mut Rng) -> Vec<Task> {
    let mut tasks = Vec::new();
    let push = |tasks: &mut Vec<Task>, rng: &mut Rng, w: usize, ty: usize, s: f64, e: f64| {
        let p = POWERS[ty] * (1.0 + sc.variation * rng.normal().clamp(-3.0, 3.0)).max(0.0);
        tasks.push((w, ty, s, e, p));
    };
    let mut t = IDLE_MS;
    if sc.calibrated {
        for ty in 0..NAMES.len() {
            for together in [false, true] {
                let until = t + if together { 300.0 } else { 500.0 };
                let m = if together { sc.workers } else { 1 };
                for w in 0..m {
                    let mut s = t + rng.uniform() * 0.2;
                    while s < until {
                        let e = (s + 0.5 + rng.uniform() * 3.0).min(until);
                        push(&mut tasks, rng, w, ty, s, e);
                        s = e + rng.uniform() * 0.1;
                    }
                }
                t = until + 5.0;
            }
        }
    }
    let epoch = 40.0;
    while t < RUN_MS - IDLE_MS {
        // How many workers run in this epoch.
        let m = if rng.uniform() < sc.full_share {
            sc.workers
        } else {
            1 + (rng.next() % sc.workers as u64) as usize
        };
        for w in 0..m {
            let mut s = t + rng.uniform() * 0.5;
            while s < t + epoch {
                let ty = (rng.next() % NAMES.len() as u64) as usize;
                let e = (s + 0.4 + rng.uniform() * 3.6).min(t + epoch);
                push(&mut tasks, rng, w, ty, s, e);
                s = e + rng.uniform() * 0.3;
            }
        }
        t += epoch;
    }
    tasks
}

/// Energy from 0 to each of `times` (ms), J: the base with its drift, each running task
/// at its power times the occupancy factor and the step, white noise in 0.25 ms steps.
fn energy_at(sc: &Scenario, tasks: &[Task], times: &[f64], rng: &mut Rng) -> Vec<f64> {
    let mut events: Vec<(f64, i32, usize)> = Vec::with_capacity(2 * tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        events.push((t.2, 1, i));
        events.push((t.3, -1, i));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let step_factor = |t: f64| match sc.step {
        Some((a, b, f)) if t >= a * RUN_MS && t < b * RUN_MS => f,
        _ => 1.0,
    };
    // The dynamic energy as a piecewise-linear function: breakpoints with cumulative J.
    let mut cuts: Vec<f64> = events.iter().map(|e| e.0).collect();
    if let Some((a, b, _)) = sc.step {
        cuts.push(a * RUN_MS);
        cuts.push(b * RUN_MS);
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let mut running: Vec<usize> = Vec::new();
    let mut ev = 0;
    let mut cum = vec![0.0; cuts.len()];
    let mut e = 0.0;
    for (j, &c) in cuts.iter().enumerate() {
        if j > 0 {
            let (a, b) = (cuts[j - 1], c);
            let k = running.len();
            if k > 0 {
                let sum: f64 = running.iter().map(|&i| tasks[i].4).sum();
                let g = (1.0 - sc.contention * (k - 1) as f64).max(0.0);
                e += sum * g * step_factor(0.5 * (a + b)) * (b - a) * 1e-3;
            }
            cum[j] = e;
        }
        while ev < events.len() && events[ev].0 <= c {
            let (_, d, i) = events[ev];
            if d > 0 {
                running.push(i);
            } else if let Some(p) = running.iter().position(|&x| x == i) {
                running.swap_remove(p);
            }
            ev += 1;
        }
    }
    // The rate after each cut (constant until the next one).
    let rates: Vec<f64> = (0..cuts.len())
        .map(|j| {
            if j + 1 < cuts.len() && cuts[j + 1] > cuts[j] {
                (cum[j + 1] - cum[j]) / ((cuts[j + 1] - cuts[j]) * 1e-3)
            } else {
                0.0
            }
        })
        .collect();
    let dynamic = |t: f64| -> f64 {
        let j = cuts.partition_point(|&c| c <= t);
        if j == 0 {
            return 0.0;
        }
        cum[j - 1] + rates[j - 1] * (t - cuts[j - 1]) * 1e-3
    };
    // Noise: 0.25 ms steps of white power noise whose 1 ms-equivalent SD is noise_w.
    let step_ms = 0.25;
    let sd = sc.noise_w * (1.0f64 / step_ms).sqrt();
    let mut out = Vec::with_capacity(times.len());
    let mut noise = 0.0;
    let mut noise_t = 0.0;
    for &t in times {
        while noise_t + step_ms <= t {
            noise += sd * rng.normal() * step_ms * 1e-3;
            noise_t += step_ms;
        }
        let base = BASE_W * (t + 0.5 * sc.drift * t * t / RUN_MS) * 1e-3;
        out.push(base + dynamic(t) + noise);
    }
    out
}

/// The meter: a counter of 2^-14 J units updated every 0.9766 ms at phase `phase`, read
/// every `period_ms` with delays (a loaded sampler). Returns (read time ns, energy J).
fn readings(sc: &Scenario, tasks: &[Task], rng: &mut Rng) -> Vec<(u64, f64)> {
    let update = 1000.0 / 1024.0;
    let phase = rng.uniform() * update;
    let unit = 2f64.powi(-14);
    let mut reads = Vec::new();
    let mut t = 0.0;
    while t < RUN_MS {
        let late = if rng.uniform() < 0.02 {
            rng.uniform() * 4.0 * sc.period_ms.min(10.0)
        } else {
            rng.uniform() * 0.05 * sc.period_ms
        };
        reads.push(t + late);
        t += sc.period_ms;
    }
    reads.sort_by(f64::total_cmp);
    reads.dedup();
    let ticks: Vec<f64> = reads
        .iter()
        .map(|&r| phase + ((r - phase) / update).floor() * update)
        .map(|x| x.max(0.0))
        .collect();
    let e = energy_at(sc, tasks, &ticks, rng);
    reads
        .iter()
        .zip(e)
        .map(|(&r, e)| ((r * 1e6) as u64, (e / unit).floor() * unit))
        .collect()
}

/// The package's frequency as a sampler beside the meter would read it at each of `reads`
/// (ns): 3.5 GHz, lowered by the step to its power factor to the power 1/2.4 (this
/// generator's own law, not the fit's), averaged over the span since the previous read,
/// with 0.5 % of read jitter. It does not follow the occupancy at all.
fn frequencies(sc: &Scenario, reads: &[(u64, f64)], rng: &mut Rng) -> Vec<(u64, f64)> {
    let (a, b, f) = sc.step.unwrap_or((0.0, 0.0, 1.0));
    let (a, b) = (a * RUN_MS, b * RUN_MS);
    let slow = f.powf(1.0 / 2.4);
    reads
        .windows(2)
        .map(|w| {
            let (s, e) = (w[0].0 as f64 * 1e-6, w[1].0 as f64 * 1e-6);
            let inside = (e.min(b) - s.max(a)).max(0.0) / (e - s).max(1e-9);
            let mhz = 3500.0 * (1.0 - inside * (1.0 - slow)) * (1.0 + 0.005 * rng.normal());
            (w[1].0, mhz)
        })
        .collect()
}

/// Writes the scenario as a user's CSV files and imports them without any meter flag; with
/// `frequency`, the package's sampled frequency is added to the trace (CSV import has no
/// column for it).
fn import(sc: &Scenario, dir: &std::path::Path, frequency: bool) -> taskwatt_traces::Trace {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ sc.seed.wrapping_mul(0xA24B_AED4_963E_E407));
    let tasks = schedule(sc, &mut rng);
    let reads = readings(sc, &tasks, &mut rng);
    let freq = frequency.then(|| frequencies(sc, &reads, &mut Rng(sc.seed ^ 0x5851_F42D)));
    let mut tcsv = String::from("type,worker,start,end\n");
    for t in &tasks {
        let _ = writeln!(
            tcsv,
            "{},{},{},{}",
            NAMES[t.1],
            t.0,
            (t.2 * 1e6).round() as u64,
            (t.3 * 1e6).round() as u64
        );
    }
    let mut scsv = String::from("time,domain,energy_j\n");
    for (t, e) in &reads {
        let _ = writeln!(scsv, "{t},package-0,{e}");
    }
    let tp = dir.join(format!("{}-tasks.csv", sc.name));
    let sp = dir.join(format!("{}-samples.csv", sc.name));
    std::fs::write(&tp, tcsv).unwrap();
    std::fs::write(&sp, scsv).unwrap();
    let mut trace = import_csv(&tp, &ImportOptions::new(TimeUnit::Ns).samples(&sp)).unwrap();
    if let Some(freq) = freq {
        let domain = trace.domains[0].id;
        trace.frequencies = freq
            .into_iter()
            .map(|(t, mhz)| taskwatt_traces::FrequencySample {
                domain,
                t: taskwatt_traces::Timestamp(t),
                mhz,
            })
            .collect();
    }
    trace
}

#[derive(Default)]
struct Tally {
    shown: usize,
    shown_within_5: usize,
    shown_beyond_10: Vec<String>,
    intervals: usize,
    covered: usize,
    /// Without the model's departures (frequency steps): intervals, covered.
    plain: (usize, usize),
    /// z-scores (error / SE) of every estimate with a standard error, without departures.
    z2: Vec<f64>,
    contended_unflagged: Vec<String>,
}

fn check(sc: &Scenario, dir: &std::path::Path, tally: &mut Tally, frequency: bool) {
    let trace = import(sc, dir, frequency);
    let att = attribute_trace(&trace, &AttributionOptions::default()).unwrap();
    let d = &att.report.domains[0];
    let mut named = d
        .fit
        .warnings
        .iter()
        .any(|w| w.contains("contention") || w.contains("model departure"));
    let mut worst: f64 = 0.0;
    let mut lines = Vec::new();
    for t in &d.types {
        let k = NAMES.iter().position(|n| *n == t.key.codelet).unwrap();
        let truth = POWERS[k];
        let e = &t.power;
        let err = 100.0 * (e.value_w - truth) / truth;
        if let Some([lo, hi]) = e.ci95_w {
            tally.intervals += 1;
            tally.covered += usize::from(lo <= truth && truth <= hi);
            if sc.step.is_none() {
                tally.plain.0 += 1;
                tally.plain.1 += usize::from(lo <= truth && truth <= hi);
                if let Some(se) = e.se_w {
                    tally.z2.push(((e.value_w - truth) / se).powi(2));
                }
            }
        }
        if e.flags
            .iter()
            .any(|f| matches!(f, Flag::ContentionUnknown | Flag::ModelInDoubt { .. }))
        {
            named = true;
        }
        if e.reliable {
            tally.shown += 1;
            tally.shown_within_5 += usize::from(err.abs() <= 5.0);
            if err.abs() > 10.0 {
                tally
                    .shown_beyond_10
                    .push(format!("{}: {} {err:+.1}%", sc.name, NAMES[k]));
            }
            worst = worst.max(err.abs());
        }
        let hw = e.relative_half_width_pct().unwrap_or(f64::NAN);
        let cov = e
            .covers(truth)
            .map_or("?", |c| if c { "" } else { " MISS" });
        lines.push(format!(
            "{}{} {err:+.1}% +-{hw:.0}%{cov}",
            NAMES[k],
            if e.reliable { "" } else { "(f)" },
        ));
    }
    let c = d.contention.as_ref().map(|c| (c.identified, c.c.value_w));
    eprintln!(
        "{:<28} c {:.2} fit {:?}: {}{}",
        sc.name,
        sc.contention,
        c,
        lines.join(", "),
        if named { " [warned]" } else { "" }
    );
    if sc.contention >= 0.03 && worst > 5.0 && !named {
        tally.contended_unflagged.push(sc.name.clone());
    }
}

fn scenarios() -> Vec<Scenario> {
    let mut out = Vec::new();
    let mut seed = 1;
    for &(workers, contention) in &[(2, 0.0), (2, 0.05), (2, 0.1), (4, 0.03), (4, 0.08)] {
        for &period_ms in &[1.0, 10.0, 100.0] {
            for &(variation, drift, step, calibrated, full_share) in &[
                (0.1, 0.0, None, true, 0.5),
                (0.3, 0.04, None, true, 0.8),
                (0.1, 0.0, Some((0.4, 0.7, 0.8)), true, 0.5),
                (0.2, 0.02, None, false, 0.9),
            ] {
                seed += 1;
                out.push(Scenario {
                    name: format!(
                        "w{workers}-c{contention}-p{period_ms}-v{variation}{}{}",
                        if step.is_some() { "-step" } else { "" },
                        if calibrated { "" } else { "-nocal" }
                    ),
                    calibrated,
                    workers,
                    contention,
                    step,
                    variation,
                    drift,
                    period_ms,
                    noise_w: 2.0,
                    full_share,
                    seed,
                });
            }
        }
    }
    out
}

#[test]
fn contended_held_out_data_is_fitted_or_flagged() {
    let dir = tempfile::tempdir().unwrap();
    // HELDOUT_KEEP=DIR keeps the CSV files there, to import and report them by hand.
    let keep = std::env::var_os("HELDOUT_KEEP").map(std::path::PathBuf::from);
    let at = keep.as_deref().unwrap_or(dir.path());
    let mut tally = Tally::default();
    for sc in scenarios() {
        check(&sc, at, &mut tally, false);
    }
    let within = tally.shown_within_5 as f64 / tally.shown.max(1) as f64;
    let coverage = tally.covered as f64 / tally.intervals.max(1) as f64;
    eprintln!(
        "shown {} of the powers, {:.1} % within 5 %; intervals cover {:.1} % ({} of {}); \
         without frequency steps {} of {}, mean z^2 {:.2}",
        tally.shown,
        100.0 * within,
        100.0 * coverage,
        tally.covered,
        tally.intervals,
        tally.plain.1,
        tally.plain.0,
        tally.z2.iter().sum::<f64>() / tally.z2.len().max(1) as f64
    );
    assert!(tally.shown > 0, "nothing shown as a measurement");
    assert!(within >= 0.95, "{:.1} % within 5 %", 100.0 * within);
    assert!(
        tally.shown_beyond_10.is_empty(),
        "shown beyond 10 %: {:?}",
        tally.shown_beyond_10
    );
    assert!(
        (0.88..=0.99).contains(&coverage),
        "coverage {:.1} %",
        100.0 * coverage
    );
    assert!(
        tally.contended_unflagged.is_empty(),
        "contended, off and not warned: {:?}",
        tally.contended_unflagged
    );
}

/// The frequency steps again, now with the package's frequency sampled beside the meter:
/// the fit corrects them instead of flagging them. Shown powers hold the same bars, and
/// more of them are shown than without the frequency.
#[test]
fn frequency_steps_are_fitted_with_the_sampled_frequency() {
    let dir = tempfile::tempdir().unwrap();
    let steps: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| s.step.is_some())
        .collect();
    let (mut with, mut without) = (Tally::default(), Tally::default());
    for sc in &steps {
        check(sc, dir.path(), &mut without, false);
        check(sc, dir.path(), &mut with, true);
    }
    let within = with.shown_within_5 as f64 / with.shown.max(1) as f64;
    let coverage = with.covered as f64 / with.intervals.max(1) as f64;
    eprintln!(
        "{} step scenarios: with frequency {} shown, {:.1} % within 5 %, coverage {:.1} %; \
         without {} shown",
        steps.len(),
        with.shown,
        100.0 * within,
        100.0 * coverage,
        without.shown
    );
    assert!(within >= 0.95, "{:.1} % within 5 %", 100.0 * within);
    assert!(
        with.shown_beyond_10.is_empty(),
        "shown beyond 10 %: {:?}",
        with.shown_beyond_10
    );
    assert!(
        with.shown > without.shown,
        "the frequency showed nothing more: {} against {}",
        with.shown,
        without.shown
    );
    assert!(
        with.contended_unflagged.is_empty(),
        "contended, off and not warned: {:?}",
        with.contended_unflagged
    );
}
