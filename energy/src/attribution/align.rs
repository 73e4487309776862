//! Intervals aligned to the meter: a cumulative counter that updates on its own tick
//! (RAPL every ~1 ms, NVML's total energy every few ms) shows, at a read at time `t`, the
//! energy at its last update `B ≤ t`. Taking `t` as the end of the interval shifts each
//! interval's energy by up to one tick; when the sampling period is close to the tick,
//! intervals with no update read exactly zero, the next ones double, and the regression
//! sees task time and energy in different rows: types come out low and the base high,
//! with confident intervals (issue 15 measured 20-80 % low at a 1 ms period on a 1 ms
//! counter).
//!
//! What this module does, per domain with a known update interval `U`:
//!
//! 1. **Phase from the readings.** Two consecutive reads less than `U` apart constrain
//!    the tick phase `φ` (ticks at `φ + kU`): a reading that changed says a tick fell
//!    between them, a reading that repeated (stale) says none did. Each constraint is an
//!    arc of phases mod `U`; votes over 256 phase bins find the arc every constraint agrees
//!    with. When at least [`MIN_CONSTRAINTS`] constraints exist and
//!    [`MIN_CONSISTENCY`] of them agree, every sample time is replaced by its last tick,
//!    `φ + ⌊(t − φ)/U⌋·U`, and stale samples (same tick as the previous one) are dropped:
//!    the rows are then the meter's own update intervals, exactly.
//! 2. **Otherwise** (sampling slower than the tick, gives no constraint; or a drifting
//!    tick, gives inconsistent ones) every sample time is moved back by `U/2`, the
//!    expected lag of a reading behind its time, which removes the bias to first order;
//!    and when the median interval spans fewer than [`MERGE_TICKS`] updates, consecutive
//!    intervals are merged until each spans at least that many, so that the leftover
//!    misalignment (up to `U/2` at each end) is a small part of every row.
//!
//! Sensors that report power (integrated by the sampler) or have no known update interval
//! are left as they are.

use serde::{Deserialize, Serialize};
use taskwatt_traces::DomainInfo;

/// Phase bins over one update interval.
const BINS: usize = 256;
/// Fewest phase constraints (reads closer than one tick) to trust a phase estimate.
pub(crate) const MIN_CONSTRAINTS: usize = 20;
/// Share of constraints the chosen phase must satisfy.
pub(crate) const MIN_CONSISTENCY: f64 = 0.97;
/// Updates each interval spans, at least, when the phase is unknown.
pub(crate) const MERGE_TICKS: u64 = 10;
/// The phase counts as known when the reads pin it within `1/MAX_AMBIGUITY` of an update
/// interval: mapping a read to its tick is then off by at most half that.
const MAX_AMBIGUITY: u64 = 16;

/// What the reads say about the tick phase.
struct PhaseEstimate {
    /// The middle of the phases the most reads agree with, and the width of that range,
    /// ns; `None` without information.
    phase: Option<(u64, u64)>,
    /// Reads closer than one tick.
    constraints: usize,
    /// Share of them the phase satisfies.
    consistency: f64,
}

/// How a domain's samples were aligned to its meter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Alignment {
    /// The sample times already are the meter's update times (the meter stamped them):
    /// nothing to do.
    AtTicks {
        /// The update interval, ns.
        update_ns: u64,
        /// Where the update interval came from.
        #[serde(default)]
        source: IntervalSource,
    },
    /// Sample times replaced by the meter's update times, from a phase found in the
    /// readings.
    Phase {
        /// The update interval, ns.
        update_ns: u64,
        /// The tick phase found, ns in `[0, update_ns)`.
        phase_ns: u64,
        /// Reads closer than one update that constrained the phase.
        constraints: usize,
        /// Share of them the phase satisfies.
        consistency: f64,
        /// Stale samples dropped (no update since the previous read).
        stale_dropped: usize,
        /// Windows with a phase of their own (1: one phase for the whole run).
        #[serde(default = "one")]
        windows: usize,
        /// Where the update interval came from.
        #[serde(default)]
        source: IntervalSource,
    },
    /// Sample times moved back by their expected lag behind the last update (half an
    /// update interval, or the middle of the phases the reads allow), and intervals
    /// merged so that each spans at least `MERGE_TICKS` updates.
    Merged {
        /// The update interval, ns.
        update_ns: u64,
        /// Phase constraints found.
        constraints: usize,
        /// Share satisfied by the best phase (0 without constraints).
        consistency: f64,
        /// Width of the phases the reads allow, ns (`update_ns` without information).
        ambiguity_ns: u64,
        /// Samples dropped by merging.
        merged: usize,
        /// Where the update interval came from.
        #[serde(default)]
        source: IntervalSource,
    },
}

fn one() -> usize {
    1
}

/// Where a domain's update interval came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum IntervalSource {
    /// The meter (or the import's `--update-interval`) said it.
    #[default]
    Declared,
    /// Nobody said it: found from the reads that repeated (no update between them).
    Detected,
    /// The reads contradict the declared interval and agree with another one.
    Corrected {
        /// What was declared, ns.
        declared_ns: u64,
    },
}

impl Alignment {
    /// Records where the update interval came from: `None` declared, `Some(0)` found in
    /// the reads, `Some(d)` found in the reads against the declared `d`.
    pub(crate) fn set_detected(&mut self, detected: Option<u64>) {
        let src = match detected {
            None => IntervalSource::Declared,
            Some(0) => IntervalSource::Detected,
            Some(d) => IntervalSource::Corrected { declared_ns: d },
        };
        match self {
            Alignment::AtTicks { source, .. }
            | Alignment::Phase { source, .. }
            | Alignment::Merged { source, .. } => *source = src,
        }
    }

    fn source_words(&self) -> String {
        let (Alignment::AtTicks { source, .. }
        | Alignment::Phase { source, .. }
        | Alignment::Merged { source, .. }) = self;
        match source {
            IntervalSource::Declared => String::new(),
            IntervalSource::Detected => {
                " (update interval found from the repeated readings)".to_owned()
            }
            IntervalSource::Corrected { declared_ns } => format!(
                " (update interval found from the repeated readings; the meter declared \
                 {:.3} ms, which they contradict)",
                *declared_ns as f64 * 1e-6
            ),
        }
    }
}

impl Alignment {
    /// One line for the report.
    pub fn describe(&self) -> String {
        let mut out = self.describe_alignment();
        out.push_str(&self.source_words());
        out
    }

    fn describe_alignment(&self) -> String {
        let ms = |ns: u64| ns as f64 * 1e-6;
        match self {
            Alignment::AtTicks { update_ns, .. } => format!(
                "sample times are the meter's own {:.3} ms update times: intervals are aligned",
                ms(*update_ns)
            ),
            Alignment::Phase {
                update_ns,
                phase_ns,
                constraints,
                consistency,
                stale_dropped,
                windows,
                ..
            } => format!(
                "intervals aligned to the meter's {:.3} ms updates ({}, from {} close reads, \
                 {:.1}% consistent); {} stale reading(s) dropped",
                ms(*update_ns),
                if *windows > 1 {
                    format!("a phase for each of {windows} stretches of the run")
                } else {
                    format!("phase {:.3} ms", ms(*phase_ns))
                },
                constraints,
                100.0 * consistency,
                stale_dropped
            ),
            Alignment::Merged {
                update_ns,
                constraints,
                consistency,
                ambiguity_ns,
                merged,
                ..
            } => {
                let why = if *constraints < MIN_CONSTRAINTS {
                    "the period is too long to see the update phase".to_owned()
                } else if *consistency < MIN_CONSISTENCY {
                    format!(
                        "the update phase is not stable: {:.1}% of {} close reads agree",
                        100.0 * consistency,
                        constraints
                    )
                } else {
                    format!(
                        "the reads leave the update phase open over {:.3} ms",
                        ms(*ambiguity_ns)
                    )
                };
                format!(
                    "sample times moved back by their expected lag behind the meter's {:.3} ms \
                     updates ({why}); {merged} sample(s) merged so that each interval spans \
                     at least {MERGE_TICKS} updates",
                    ms(*update_ns)
                )
            }
        }
    }
}

/// Aligns `samples` (sorted, distinct times, non-decreasing energy) to the domain's meter;
/// `None` when the sensor has no known update interval or is not a counter.
pub(crate) fn align(info: &DomainInfo, samples: &mut Vec<(u64, f64)>) -> Option<Alignment> {
    if !info.sensor.is_counter() || samples.len() < 2 {
        return None;
    }
    let declared = info.update_interval_ns.filter(|&u| u > 0);
    let (u, detected) = match declared {
        Some(u) => match detect_update_interval(samples) {
            // The reads contradict the declared interval (a RAPL counter updating every
            // 0.977 ms, not 1 ms, drifts out of phase over a run): believe the reads.
            Some(d) if !informative_at(samples, u) && informative_at(samples, d) => (d, Some(u)),
            _ => (u, None),
        },
        None => (detect_update_interval(samples)?, Some(0)),
    };
    let mut a = align_at(samples, u)?;
    a.set_detected(detected);
    Some(a)
}

/// Whether the reads pin the tick phase at update interval `u`, for the whole run or
/// window by window.
fn informative_at(samples: &[(u64, f64)], u: u64) -> bool {
    let est = estimate_phase(samples, u);
    (est.constraints >= MIN_CONSTRAINTS
        && est.consistency >= MIN_CONSISTENCY
        && est.phase.is_some_and(|p| p.1 <= u / MAX_AMBIGUITY))
        || windowed_phases(samples, u).is_some()
}

/// [`align`] at a known update interval `u`.
fn align_at(samples: &mut Vec<(u64, f64)>, u: u64) -> Option<Alignment> {
    if at_ticks(samples, u) {
        return Some(Alignment::AtTicks {
            update_ns: u,
            source: IntervalSource::Declared,
        });
    }
    let est = estimate_phase(samples, u);
    let informative = est.constraints >= MIN_CONSTRAINTS && est.consistency >= MIN_CONSISTENCY;
    let before = samples.len();
    let pinned = informative && est.phase.is_some_and(|p| p.1 <= u / MAX_AMBIGUITY);
    if !pinned {
        // One phase for the whole run does not hold (a tick that drifts, an interval known
        // only roughly): a phase per window may.
        if let Some((phases, constraints, consistency)) = windowed_phases(samples, u) {
            let mut w = 0;
            let mut prev = 0u64;
            for s in samples.iter_mut() {
                while w + 1 < phases.len() && phases[w + 1].0 <= s.0 {
                    w += 1;
                }
                // Never earlier than the read before: windows' phases differ a little.
                s.0 = last_tick(s.0, u, phases[w].1 % u).max(prev);
                prev = s.0;
            }
            samples.dedup_by_key(|s| s.0);
            return Some(Alignment::Phase {
                update_ns: u,
                phase_ns: phases[0].1,
                constraints,
                consistency,
                stale_dropped: before - samples.len(),
                windows: phases.len(),
                source: IntervalSource::Declared,
            });
        }
    }
    match est.phase {
        Some((phase, width)) if informative && width <= u / MAX_AMBIGUITY => {
            for s in samples.iter_mut() {
                s.0 = last_tick(s.0, u, phase);
            }
            // Reads within one update show the same value: keep the first of each tick.
            samples.dedup_by_key(|s| s.0);
            return Some(Alignment::Phase {
                update_ns: u,
                phase_ns: phase,
                constraints: est.constraints,
                consistency: est.consistency,
                stale_dropped: before - samples.len(),
                windows: 1,
                source: IntervalSource::Declared,
            });
        }
        Some((phase, _)) if informative => {
            // The middle of the allowed phases: the expected lag of each read.
            for s in samples.iter_mut() {
                s.0 = last_tick(s.0, u, phase);
            }
        }
        _ => {
            let half = u / 2;
            for s in samples.iter_mut() {
                s.0 = s.0.saturating_sub(half);
            }
        }
    }
    samples.dedup_by_key(|s| s.0);
    let min_span = MERGE_TICKS.saturating_mul(u);
    let last = *samples.last().expect("at least two samples");
    let mut kept: Vec<(u64, f64)> = Vec::with_capacity(samples.len());
    for &s in samples.iter() {
        match kept.last() {
            Some(k) if s.0 - k.0 < min_span => {}
            _ => kept.push(s),
        }
    }
    if kept.last() != Some(&last) {
        // The tail shorter than the span joins the last interval.
        if kept.len() >= 2 {
            kept.pop();
        }
        kept.push(last);
    }
    *samples = kept;
    Some(Alignment::Merged {
        update_ns: u,
        constraints: est.constraints,
        consistency: est.consistency,
        ambiguity_ns: if informative {
            est.phase.map_or(u, |p| p.1)
        } else {
            u
        },
        merged: before - samples.len(),
        source: IntervalSource::Declared,
    })
}

/// Whether the sample times already are update times (a meter that knows its ticks, as
/// the simulator does, stamps them): all but 1% fall on one phase.
fn at_ticks(samples: &[(u64, f64)], u: u64) -> bool {
    let phase = samples[samples.len() / 2].0 % u;
    let on = samples.iter().filter(|s| s.0 % u == phase).count();
    on * 100 >= samples.len() * 99
}

/// The last tick at or before `t`, ticks at `phase + k·u`.
fn last_tick(t: u64, u: u64, phase: u64) -> u64 {
    if t < phase {
        // Before the first tick on record: the reading is of the tick before it.
        return t.saturating_sub(u);
    }
    phase + (t - phase) / u * u
}

/// Two consecutive reads: whether the reading changed between them.
#[derive(Clone, Copy, Debug)]
struct Close {
    t0: u64,
    t1: u64,
    changed: bool,
}

/// Consecutive reads closer than `max` (and distinct in time): the phase constraints.
fn close_reads(samples: &[(u64, f64)], max: u64) -> Vec<Close> {
    samples
        .windows(2)
        .filter(|w| w[1].0 > w[0].0 && w[1].0 - w[0].0 < max)
        .map(|w| Close {
            t0: w[0].0,
            t1: w[1].0,
            changed: w[1].1 != w[0].1,
        })
        .collect()
}

/// The phase that most close reads agree with.
fn estimate_phase(samples: &[(u64, f64)], u: u64) -> PhaseEstimate {
    phase_of(&close_reads(samples, u), u)
}

/// How the phase bins voted: the constraints' count and the bins the most agree with.
struct Votes {
    /// Constraints (reads closer than `u`).
    n: usize,
    /// The most constraints any bin satisfies.
    best: i64,
    /// Bins that satisfy `best`.
    best_bins: usize,
    /// The constraints each bin satisfies.
    bins: [i64; BINS],
}

impl Votes {
    fn consistency(&self) -> f64 {
        self.best as f64 / self.n.max(1) as f64
    }

    fn best_share(&self) -> f64 {
        self.best_bins as f64 / BINS as f64
    }

    /// The longest circular run of best bins (of equal ones, the one starting at the
    /// lowest bin): its first bin and its length; 0 when every bin is best, which says
    /// nothing.
    fn run(&self) -> (usize, usize) {
        let mut run = (0usize, 0usize);
        if self.n == 0 || self.best_bins == BINS {
            return run;
        }
        // From just after a bin that is not best round to it: no run is cut by the wrap,
        // and the last bin visited ends the last run.
        let first = self
            .bins
            .iter()
            .position(|&v| v != self.best)
            .expect("a bin is not best");
        let mut len = 0;
        for i in 1..=BINS {
            let k = (first + i) % BINS;
            if self.bins[k] == self.best {
                len += 1;
            } else if len > 0 {
                let start = (k + BINS - len) % BINS;
                if len > run.1 || (len == run.1 && start < run.0) {
                    run = (start, len);
                }
                len = 0;
            }
        }
        run
    }
}

/// The phase bin of `x` (`x < 2u`): `⌊x·BINS/u⌋`, in 64 bits unless that would overflow.
fn bin_of(x: u64, u: u64) -> usize {
    match x.checked_mul(BINS as u64) {
        Some(p) => (p / u) as usize,
        None => (x as u128 * BINS as u128 / u as u128) as usize,
    }
}

/// How the phase bins vote over `cons` (those closer than `u`): what the search for the
/// update interval scores, without the exact refinement [`phase_of`] adds.
fn votes(cons: &[Close], u: u64) -> Votes {
    // Circular difference array over BINS bins; a constraint votes for the bins whose
    // centre satisfies it.
    let mut diff = [0i64; BINS + 1];
    let mut n = 0usize;
    for c in cons {
        let dt = c.t1 - c.t0;
        if dt >= u {
            continue;
        }
        n += 1;
        // Every bin the allowed arc touches gets a vote (a bin is a sliver of phases: the
        // exact refinement in `phase_of` finds the phase inside it): a tick in (t0, t1]
        // puts the phase on the arc from t0 to t1; none puts it on the arc from t1 round
        // to t0 + u.
        let (start, len) = if c.changed {
            (c.t0, dt)
        } else {
            (c.t1, u - dt)
        };
        let x = start % u;
        let k0 = bin_of(x, u);
        let count = (bin_of(x + len, u) - k0 + 1).min(BINS);
        // One vote for every bin in the circular range [k0, k0 + count): all of them when
        // it wraps onto itself.
        let k1 = (k0 + count) % BINS;
        if k0 < k1 {
            diff[k0] += 1;
            diff[k1] -= 1;
        } else {
            diff[k0] += 1;
            diff[BINS] -= 1;
            diff[0] += 1;
            diff[k1] -= 1;
        }
    }
    if n == 0 {
        return Votes {
            n,
            best: 0,
            best_bins: BINS,
            bins: [0; BINS],
        };
    }
    let mut votes = [0i64; BINS];
    let (mut acc, mut best, mut best_bins) = (0i64, i64::MIN, 0usize);
    for (v, d) in votes.iter_mut().zip(&diff) {
        acc += d;
        *v = acc;
        if acc > best {
            (best, best_bins) = (acc, 1);
        } else if acc == best {
            best_bins += 1;
        }
    }
    Votes {
        n,
        best,
        best_bins,
        bins: votes,
    }
}

/// The phase that most of `cons` (those closer than `u`) agree with.
fn phase_of(cons: &[Close], u: u64) -> PhaseEstimate {
    let v = votes(cons, u);
    if v.n == 0 {
        return PhaseEstimate {
            phase: None,
            constraints: 0,
            consistency: 0.0,
        };
    }
    let consistency = v.consistency();
    let (run_start, run_len) = v.run();
    if run_len == 0 {
        // Every bin is best: no information.
        return PhaseEstimate {
            phase: None,
            constraints: v.n,
            consistency,
        };
    }
    // Bin k holds phases in [k·u/BINS, (k+1)·u/BINS); a run of bins [s, s+len) holds
    // [s·u/BINS, (s+len)·u/BINS): its middle is where the most reads agree, to a bin.
    let mid2 = 2 * run_start + run_len; // twice the middle, in bins
    let centre = ((mid2 as u128 * u as u128) / (2 * BINS as u128)) as u64 % u;
    // Refined exactly: the intersection, in ns, of the arcs of every read that agrees with
    // that middle. Taking a bin's middle instead puts the phase up to half a bin (u / 512)
    // off, which maps the reads that fell in that sliver to the wrong tick (issue 28
    // measured a 3-6 % bias on 1 ms fits from it).
    let (lo, hi) = exact_arc(cons, u, centre);
    let phase = (centre as i128 + ((lo + hi) / 2) as i128).rem_euclid(u as i128) as u64;
    let width = (hi - lo).max(0) as u64;
    PhaseEstimate {
        phase: Some((phase, width)),
        constraints: v.n,
        consistency,
    }
}

/// The phases every constraint that agrees with `centre` allows, as offsets from `centre`
/// in ns: `[lo, hi]`, `lo ≤ 0 ≤ hi` (a tick in `(t0, t1]` for a read that changed, none for
/// one that repeated).
fn exact_arc(cons: &[Close], u: u64, centre: u64) -> (i64, i64) {
    let ui = u as i64;
    // Offset of a phase from the centre, in [-u/2, u/2).
    let off = |x: u64| -> i64 {
        let d = (x % u) as i64 - centre as i64;
        (d + ui / 2).rem_euclid(ui) - ui / 2
    };
    let (mut lo, mut hi) = (-ui / 2, ui / 2);
    for c in cons {
        let dt = c.t1 - c.t0;
        if dt >= u {
            continue;
        }
        // The allowed arc, as (start exclusive, end inclusive) phases.
        let (a, len) = if c.changed {
            (c.t0, dt as i64)
        } else {
            (c.t1, ui - dt as i64)
        };
        // The arc (a, a + len] in offsets around the centre, when it holds the centre.
        let start = off(a);
        let (s, e) = if start < 0 && start + len >= 0 {
            (start, start + len)
        } else if start >= 0 && start - ui + len >= 0 {
            (start - ui, start - ui + len)
        } else {
            continue; // disagrees with the centre: one of the inconsistent reads
        };
        lo = lo.max(s + 1);
        hi = hi.min(e);
    }
    if lo > hi {
        (0, 0)
    } else {
        (lo, hi)
    }
}

/// Constraints per window when the phase is found window by window: enough to pin it, few
/// enough that a tick interval off by a little (or a tick that drifts) moves little within a
/// window.
const PER_WINDOW: usize = 40;

/// The phase of each window of [`PER_WINDOW`] consecutive constraints: the window's first
/// read time and its estimate (a last window too short to say much joins the one before).
fn windowed(cons: &[Close], u: u64) -> Vec<(u64, PhaseEstimate)> {
    let n = cons.len();
    let windows = (n / PER_WINDOW).max(1);
    (0..windows)
        .map(|w| {
            let (a, b) = (w * n / windows, (w + 1) * n / windows);
            (cons[a].t0, phase_of(&cons[a..b], u))
        })
        .collect()
}

/// The reads' evidence for update interval `u`: over windows of the same constraints
/// (every close read, whatever `u`), the log of the share of phases that agree with the
/// most of them, less [`LOG_ERROR`] per read none agrees with (a read closer than `u` that
/// no phase satisfies, or a repeated read farther apart than `u`, which no tick
/// interval of `u` allows). The true interval pins the phase with no read against it; a
/// wrong one either contradicts reads or, agreeing with them by chance, leaves a smaller
/// share of phases that do (Bayesian evidence with a uniform prior on the phase).
fn evidence(cons: &[Close], u: u64) -> (f64, usize) {
    let (mut log_e, mut used) = (0.0, 0usize);
    let n = cons.len();
    let windows = (n / PER_WINDOW).max(1);
    for w in 0..windows {
        let win = &cons[w * n / windows..(w + 1) * n / windows];
        // A repeat over a whole interval or more: impossible at `u`.
        let impossible = win
            .iter()
            .filter(|c| !c.changed && c.t1 - c.t0 >= u)
            .count();
        let v = votes(win, u);
        let against = v.n - v.best.max(0) as usize;
        log_e +=
            v.best_share().max(1.0 / BINS as f64).ln() + LOG_ERROR * (against + impossible) as f64;
        used += v.n;
    }
    (log_e, used)
}

/// Log-probability of a read that no phase explains (a read stamped a little off its
/// value, say): one in a hundred.
const LOG_ERROR: f64 = -4.605;

/// Each window's first read time and phase, the constraints and the share they satisfy.
type WindowPhases = (Vec<(u64, u64)>, usize, f64);

/// Phases window by window at update interval `u`, when every window pins its phase: the
/// window starts and phases. A meter whose tick drifts (or whose interval is known only
/// approximately) keeps one phase per window rather than one for the whole run.
fn windowed_phases(samples: &[(u64, f64)], u: u64) -> Option<WindowPhases> {
    let cons = close_reads(samples, u);
    if cons.len() < MIN_CONSTRAINTS {
        return None;
    }
    let mut out = Vec::new();
    let (mut agree, mut total) = (0.0, 0usize);
    for (start, e) in windowed(&cons, u) {
        let (phase, width) = e.phase?;
        if e.consistency < MIN_CONSISTENCY || width > u / MAX_AMBIGUITY {
            return None;
        }
        agree += e.consistency * e.constraints as f64;
        total += e.constraints;
        out.push((start, phase));
    }
    Some((out, total, agree / total.max(1) as f64))
}

/// What the reads say about a meter whose update interval nobody gave (or that the reads
/// contradict): when some reads repeated the previous one (no update between them), the
/// interval whose ticks agree with the most close reads. The search starts from the run's
/// span over the number of updates seen (readings that changed) and scans ±35 % of it, in
/// steps fine enough that within a window of [`PER_WINDOW`] constraints the ticks drift by
/// less than a sixteenth of an interval; each window keeps its own phase, so that an
/// interval slightly off, or a tick that drifts, does not spoil the score. `None` without
/// repeated reads (updates faster than reads: nothing to align), or when no interval
/// satisfies [`MIN_CONSISTENCY`] of them.
pub(crate) fn detect_update_interval(samples: &[(u64, f64)]) -> Option<u64> {
    let s = &samples[..samples.len().min(50_000)];
    if s.len() < MIN_CONSTRAINTS + 2 {
        return None;
    }
    let stale = s
        .windows(2)
        .filter(|w| w[1].1 == w[0].1 && w[1].0 > w[0].0)
        .count();
    if stale * 200 < s.len() || stale < 5 {
        return None;
    }
    let changes = s.windows(2).filter(|w| w[1].1 != w[0].1).count().max(1);
    let u0 = (s[s.len() - 1].0 - s[0].0) as f64 / changes as f64;
    let (lo, hi) = (0.65 * u0, 1.35 * u0);
    let cons = close_reads(s, hi as u64 + 1);
    if cons.len() < MIN_CONSTRAINTS {
        return None;
    }
    // The longest window, in intervals: the step keeps its drift under 1/16 of one.
    let n = cons.len();
    let windows = (n / PER_WINDOW).max(1);
    let longest = (0..windows)
        .map(|w| cons[((w + 1) * n / windows) - 1].t1 - cons[w * n / windows].t0)
        .max()
        .unwrap_or(0) as f64;
    let rel = (u0 / (16.0 * longest.max(u0))).clamp(1e-6, 1e-2);
    // The interval with the most evidence.
    let mut best: Option<(u64, f64)> = None;
    let mut u = lo;
    while u <= hi {
        let cand = u as u64;
        let (e, used) = evidence(&cons, cand);
        if used >= MIN_CONSTRAINTS && best.is_none_or(|b| e > b.1) {
            best = Some((cand, e));
        }
        u *= 1.0 + rel;
    }
    let (mut u, _) = best?;
    // One phase for the whole run, when the interval is exact enough to keep it: refine it
    // to the run's length.
    // (The same reads for every candidate: those closer than all of them.)
    let same = close_reads(samples, (u as f64 * (1.0 - 2.0 * rel)) as u64);
    let ticks = ((samples[samples.len() - 1].0 - samples[0].0) as f64 / u as f64).max(1.0);
    let fine = (1.0 / (16.0 * ticks)).max(1e-9);
    let steps = ((rel / fine).ceil() as i64).min(4000);
    let mut global = votes(&same, u).consistency();
    let centre = u as f64;
    for k in -steps..=steps {
        let cand = (centre * (1.0 + fine * k as f64)) as u64;
        let g = votes(&same, cand).consistency();
        if g > global {
            (u, global) = (cand, g);
        }
    }
    // Kept only when the reads agree with it as the alignment needs, window by window or
    // over the whole run.
    let own = close_reads(samples, u);
    let (c, _, _) = windowed_consistency(&own, u);
    (c >= MIN_CONSISTENCY || phase_of(&own, u).consistency >= MIN_CONSISTENCY).then_some(u)
}

/// Share of the constraints their own window's phase satisfies, how many there are, and
/// the mean width of the windows' phases (a share of `u`; 1 where a window pins nothing).
fn windowed_consistency(cons: &[Close], u: u64) -> (f64, usize, f64) {
    let (mut agree, mut total, mut width) = (0.0, 0usize, 0.0);
    let windows = windowed(cons, u);
    for (_, e) in &windows {
        agree += e.consistency * e.constraints as f64;
        total += e.constraints;
        width += e.phase.map_or(1.0, |p| p.1 as f64 / u as f64);
    }
    (
        if total > 0 { agree / total as f64 } else { 0.0 },
        total,
        width / windows.len().max(1) as f64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_traces::Domain;
    use taskwatt_traces::SensorKind;

    fn info(u: Option<u64>) -> DomainInfo {
        DomainInfo {
            id: 0,
            meter: 0,
            domain: Domain::CpuPackage { id: 0 },
            name: "package-0".into(),
            unit: "uJ".into(),
            workers: vec![0],
            resolution_j: 1e-6,
            wrap_range_j: None,
            update_interval_ns: u,
            sensor: SensorKind::EnergyCounter,
        }
    }

    /// Reads every `period` (+ deterministic jitter) of a counter that adds `p` W at ticks
    /// `phase + k·u`.
    fn reads(period: u64, jitter: u64, u: u64, phase: u64, n: usize) -> Vec<(u64, f64)> {
        let p = 10.0;
        (0..n as u64)
            .map(|k| {
                let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
                let t = 5 * u + k * period + h % (jitter + 1);
                let tick = last_tick(t, u, phase);
                (t, p * tick as f64 * 1e-9)
            })
            .collect()
    }

    #[test]
    fn finds_the_phase_and_maps_reads_to_their_tick() {
        let u = 1_000_000;
        for phase in [37_000, 250_000, 400_000, 550_000] {
            // Reads 0-600 us after each millisecond (wake-up jitter) straddle the tick.
            let mut s = reads(1_000_000, 600_000, u, phase, 2000);
            let a = align(&info(Some(u)), &mut s).unwrap();
            let Alignment::Phase {
                phase_ns,
                consistency,
                ..
            } = a
            else {
                panic!("{a:?}");
            };
            let err = (phase_ns as i64 - phase as i64).rem_euclid(u as i64);
            let err = err.min(u as i64 - err);
            assert!(err <= 6_000, "phase {phase}: found {phase_ns}");
            assert!(consistency >= 0.99, "{consistency}");
            // Each aligned interval's energy is 10 W times its length, but for the rare read
            // that lands within the phase's uncertainty of a tick.
            let exact = s
                .windows(2)
                .filter(|w| {
                    let e = w[1].1 - w[0].1;
                    let want = 10.0 * (w[1].0 - w[0].0) as f64 * 1e-9;
                    (e - want).abs() < 1e-9
                })
                .count();
            assert!(
                exact * 100 >= 99 * (s.len() - 1),
                "{exact} of {}",
                s.len() - 1
            );
        }
    }

    #[test]
    fn reads_locked_to_the_tick_leave_the_phase_open_and_merge() {
        let u = 1_000_000;
        // Reads always 0-200 us after the tick: any phase in the other 800 us fits.
        let mut s = reads(1_000_000, 200_000, u, 0, 2000);
        let a = align(&info(Some(u)), &mut s).unwrap();
        let Alignment::Merged { ambiguity_ns, .. } = &a else {
            panic!("{a:?}");
        };
        assert!(*ambiguity_ns > 700_000, "{a:?}");
        assert!(a.describe().contains("open"), "{}", a.describe());
        let spans: Vec<u64> = s.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(spans.iter().all(|&d| d >= MERGE_TICKS * u), "{spans:?}");
    }

    #[test]
    fn slow_sampling_moves_back_half_a_tick_and_merges() {
        let u = 1_000_000;
        let mut s = reads(2_000_000, 37_000, u, 300_000, 1000);
        let a = align(&info(Some(u)), &mut s).unwrap();
        let Alignment::Merged { merged, .. } = a else {
            panic!("{a:?}");
        };
        assert!(merged > 700, "{merged}");
        let spans: Vec<u64> = s.windows(2).map(|w| w[1].0 - w[0].0).collect();
        assert!(spans.iter().all(|&d| d >= MERGE_TICKS * u), "{spans:?}");
        assert!(a.describe().contains("too long"));
    }

    /// The votes as defined, bin by bin: a constraint votes for each bin whose phases
    /// `[k·u/BINS, (k+1)·u/BINS)` meet its arc `[x, x + len]` (mod `u`).
    fn naive_votes(cons: &[Close], u: u64) -> (usize, Vec<i64>) {
        let (b, u) = (BINS as u128, u as u128);
        let mut bins = vec![0i64; BINS];
        let mut n = 0;
        for c in cons.iter().filter(|c| c.t1 - c.t0 < u as u64) {
            n += 1;
            let dt = (c.t1 - c.t0) as u128;
            let (start, len) = if c.changed {
                (c.t0 as u128, dt)
            } else {
                (c.t1 as u128, u - dt)
            };
            let (x, y) = (start % u, start % u + len);
            for (k, v) in bins.iter_mut().enumerate() {
                let k = k as u128;
                let meets = |k: u128| x * b < (k + 1) * u && k * u <= y * b;
                if meets(k) || meets(k + b) {
                    *v += 1;
                }
            }
        }
        (n, bins)
    }

    proptest::proptest! {
        /// The difference array, its wrap-round and the longest run of best bins agree
        /// with a count made bin by bin.
        #[test]
        fn votes_match_a_bin_by_bin_count(
            u in 1u64..5_000_000,
            reads in proptest::collection::vec((0u64..50_000_000, 0u64..6_000_000, proptest::bool::ANY), 0..60),
        ) {
            let cons: Vec<Close> = reads
                .iter()
                .map(|&(t0, dt, changed)| Close { t0, t1: t0 + dt, changed })
                .collect();
            let v = votes(&cons, u);
            let (n, bins) = naive_votes(&cons, u);
            proptest::prop_assert_eq!(v.n, n);
            if n == 0 {
                return Ok(());
            }
            let best = *bins.iter().max().unwrap();
            proptest::prop_assert_eq!(v.best, best);
            proptest::prop_assert_eq!(v.best_bins, bins.iter().filter(|&&x| x == best).count());
            // The longest run, the lowest start among equals; none when all are best.
            let mut run = (0, 0);
            for start in 0..BINS {
                if bins[start] != best || bins[(start + BINS - 1) % BINS] == best {
                    continue;
                }
                let len = (0..BINS).take_while(|i| bins[(start + i) % BINS] == best).count();
                if len > run.1 {
                    run = (start, len);
                }
            }
            proptest::prop_assert_eq!(v.run(), run);
        }
    }

    #[test]
    fn reads_stamped_at_their_tick_are_left_as_they_are() {
        let u = 1_000_000;
        let mut s: Vec<(u64, f64)> = (0..100).map(|k| (k * u + 3, k as f64)).collect();
        s.push((100 * u + 500, 100.0));
        let orig = s.clone();
        assert_eq!(
            align(&info(Some(u)), &mut s),
            Some(Alignment::AtTicks {
                update_ns: u,
                source: IntervalSource::Declared
            })
        );
        assert_eq!(s, orig);
    }

    #[test]
    fn unknown_update_interval_or_power_sensor_is_left_alone() {
        let mut s = reads(1_000_000, 0, 1_000_000, 0, 10);
        let orig = s.clone();
        assert!(align(&info(None), &mut s).is_none());
        let mut i = info(Some(1_000_000));
        i.sensor = SensorKind::IntegratedPower { window_ns: 1 };
        assert!(align(&i, &mut s).is_none());
        assert_eq!(s, orig);
    }
}
