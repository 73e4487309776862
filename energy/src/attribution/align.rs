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
        /// Where the update interval came from.
        #[serde(default)]
        source: IntervalSource,
    },
    /// Sample times moved back by their expected lag behind the last update (half an
    /// update interval, or the middle of the phases the reads allow), and intervals
    /// merged so that each spans at least [`MERGE_TICKS`] updates.
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
                ..
            } => format!(
                "intervals aligned to the meter's {:.3} ms updates (phase {:.3} ms, from {} \
                 close reads, {:.1}% consistent); {} stale reading(s) dropped",
                ms(*update_ns),
                ms(*phase_ns),
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

/// Whether the reads pin one tick phase at update interval `u`.
fn informative_at(samples: &[(u64, f64)], u: u64) -> bool {
    let est = estimate_phase(samples, u);
    est.constraints >= MIN_CONSTRAINTS
        && est.consistency >= MIN_CONSISTENCY
        && est.phase.is_some_and(|p| p.1 <= u / MAX_AMBIGUITY)
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

/// The phase that most close reads agree with.
fn estimate_phase(samples: &[(u64, f64)], u: u64) -> PhaseEstimate {
    // Circular difference array over BINS bins; a constraint votes for the bins whose
    // centre satisfies it.
    let mut diff = vec![0i64; BINS + 1];
    let mut n = 0usize;
    let bin_of = |x: u64| -> usize { ((x % u) as u128 * BINS as u128 / u as u128) as usize };
    // Adds one vote to every bin in the circular half-open bin range [a, b).
    let vote = |diff: &mut Vec<i64>, a: usize, b: usize| {
        if a <= b {
            diff[a] += 1;
            diff[b] -= 1;
        } else {
            diff[a] += 1;
            diff[BINS] -= 1;
            diff[0] += 1;
            diff[b] -= 1;
        }
    };
    for w in samples.windows(2) {
        let (t0, e0) = w[0];
        let (t1, e1) = w[1];
        let dt = t1 - t0;
        if dt >= u || dt == 0 {
            continue;
        }
        n += 1;
        // Ticks in (t0, t1] have phases in the arc from t0 to t1 (mod u); by bin: the bins
        // after t0's up to t1's.
        let (a, b) = ((bin_of(t0) + 1) % BINS, (bin_of(t1) + 1) % BINS);
        if e1 != e0 {
            // A tick fell in (t0, t1]: the phase is in the arc.
            if a != b {
                vote(&mut diff, a, b);
            }
        } else {
            // No tick: the phase is outside the arc.
            if a == b {
                vote(&mut diff, 0, BINS);
            } else {
                vote(&mut diff, b, a);
            }
        }
    }
    if n == 0 {
        return PhaseEstimate {
            phase: None,
            constraints: 0,
            consistency: 0.0,
        };
    }
    let mut votes = vec![0i64; BINS];
    let mut acc = 0;
    for (i, v) in votes.iter_mut().enumerate() {
        acc += diff[i];
        *v = acc;
    }
    let best = *votes.iter().max().expect("bins");
    // The middle of the longest circular run of best bins.
    let (mut run_start, mut run_len) = (0usize, 0usize);
    for start in 0..BINS {
        if votes[start] != best || votes[(start + BINS - 1) % BINS] == best {
            continue;
        }
        let mut len = 0;
        while len < BINS && votes[(start + len) % BINS] == best {
            len += 1;
        }
        if len > run_len {
            (run_start, run_len) = (start, len);
        }
    }
    let consistency = best as f64 / n as f64;
    if run_len == 0 {
        // Every bin is best: no information.
        return PhaseEstimate {
            phase: None,
            constraints: n,
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
    let (lo, hi) = exact_arc(samples, u, centre);
    let phase = (centre as i128 + ((lo + hi) / 2) as i128).rem_euclid(u as i128) as u64;
    let width = (hi - lo).max(0) as u64;
    PhaseEstimate {
        phase: Some((phase, width)),
        constraints: n,
        consistency,
    }
}

/// The phases every constraining read that agrees with `centre` allows, as offsets from
/// `centre` in ns: `[lo, hi]`, `lo ≤ 0 ≤ hi` (ticks in `(t0, t1]` for a read that changed,
/// none for one that repeated).
fn exact_arc(samples: &[(u64, f64)], u: u64, centre: u64) -> (i64, i64) {
    let ui = u as i64;
    // Offset of a phase from the centre, in [-u/2, u/2).
    let off = |x: u64| -> i64 {
        let d = (x % u) as i64 - centre as i64;
        (d + ui / 2).rem_euclid(ui) - ui / 2
    };
    let (mut lo, mut hi) = (-ui / 2, ui / 2);
    for w in samples.windows(2) {
        let (t0, e0) = w[0];
        let (t1, e1) = w[1];
        let dt = t1 - t0;
        if dt >= u || dt == 0 {
            continue;
        }
        // The allowed arc, as (start exclusive, end inclusive) phases.
        let (a, len) = if e1 != e0 {
            (t0, dt as i64)
        } else {
            (t1, ui - dt as i64)
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

/// What the reads say about a meter whose update interval nobody gave: when some reads
/// repeated the previous one (no update between them), the interval whose ticks agree with
/// the most reads, searched from half to 64 times the median read spacing and refined to
/// a part in a million. `None` without repeated reads (updates faster than reads) or
/// without an interval that at least [`MIN_CONSISTENCY`] of the reads agree with.
pub(crate) fn detect_update_interval(samples: &[(u64, f64)]) -> Option<u64> {
    // Enough reads to tell, few enough to stay cheap.
    let s = &samples[..samples.len().min(20_000)];
    if s.len() < MIN_CONSTRAINTS + 2 {
        return None;
    }
    let stale = s
        .windows(2)
        .filter(|w| w[1].1 == w[0].1 && w[1].0 > w[0].0)
        .count();
    if stale * 100 < s.len() || stale < 5 {
        return None;
    }
    let mut dts: Vec<u64> = s
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .filter(|&d| d > 0)
        .collect();
    let mid = dts.len() / 2;
    let median = *dts.select_nth_unstable(mid).1;
    let score = |u: u64| -> Option<(f64, u64)> {
        let est = estimate_phase(s, u);
        (est.constraints >= MIN_CONSTRAINTS)
            .then(|| (est.consistency, est.phase.map_or(u, |p| p.1)))
    };
    // Coarse: 64 steps per octave.
    let mut best: Option<(u64, f64, u64)> = None;
    for j in -64i32..=(6 * 64) {
        let u = (median as f64 * 2f64.powf(f64::from(j) / 64.0)) as u64;
        if u < 2 {
            continue;
        }
        if let Some((c, width)) = score(u) {
            let better = match best {
                None => true,
                // Clearly more consistent, or as consistent with a tighter phase.
                Some((_, bc, bw)) => {
                    c > bc + 1e-3 || ((c - bc).abs() <= 1e-3 && width * bw.max(1) < bw * 1)
                }
            };
            if better {
                best = Some((u, c, width));
            }
        }
    }
    let (mut u, mut c, _) = best?;
    // Fine: the true interval keeps one phase over the whole run.
    for rel in [1.2e-2, 1.2e-4] {
        let lo = u as f64 * (1.0 - rel);
        let step = 2.0 * rel * u as f64 / 200.0;
        for k in 0..=200 {
            let cand = (lo + step * f64::from(k)) as u64;
            if let Some((cc, _)) = score(cand) {
                if cc > c {
                    (u, c) = (cand, cc);
                }
            }
        }
    }
    (c >= MIN_CONSISTENCY).then_some(u)
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
