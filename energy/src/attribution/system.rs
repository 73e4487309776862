//! Building the linear system: one pass over the tasks, clipping each one to the meter
//! intervals it overlaps.
//!
//! For a domain `d` with samples at `t_0 < t_1 < ... < t_n`, row `i` is the interval
//! `[t_i, t_{i+1})` with measured energy `E_i = energy(t_{i+1}) - energy(t_i)`; column `k`
//! holds `T_ik`, the time tasks of type `k` ran on the workers `d` covers during that
//! interval, each task cut exactly at the interval boundaries. Times are kept as integer
//! nanoseconds, so the assignment conserves task time exactly (the property test below).
//!
//! Cost: each task costs one guided binary search (a bucket table over the sample times
//! narrows the search to a few intervals, so a search touches one or two cache lines
//! instead of twenty) plus one add per interval it overlaps. Tasks may arrive in any
//! order, nothing is sorted and nothing is allocated per task; a column (`n` words) is
//! allocated the first time its type is seen.

use taskwatt_traces::{Domain, DomainInfo};

use super::input::IDLE_CALIBRATION;
use super::key::{KeyKind, TypeKey};

/// Per-type counts, gathered in the build pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeStats {
    /// Tasks of this type on the domain's workers (inside the sampled window or not).
    pub count: u64,
    /// Of those, tasks that overlap the sampled window.
    pub in_window: u64,
    /// Sum of the durations of all `count` tasks, ns.
    pub total_ns: u64,
    /// Sum of their durations clipped to the sampled window, ns (= the column's sum).
    pub clipped_ns: u64,
    /// Shortest duration, ns (`u64::MAX` if no task).
    pub min_ns: u64,
    /// Longest duration, ns.
    pub max_ns: u64,
    /// Tasks that lie entirely inside one interval.
    pub contained: u64,
    /// Its time inside the window weighted by the other tasks running beside it, ns (the
    /// occupancy column's sum; 0 when the columns were not built).
    pub occ_ns: u64,
    /// The same over all of its tasks, inside the window or not, ns.
    pub occ_total_ns: u64,
}

/// One task type's column.
#[derive(Clone, Debug)]
pub struct TypeColumn {
    /// The type.
    pub key: TypeKey,
    /// Counts and durations.
    pub stats: TypeStats,
    /// Time the type ran in each interval, summed over the domain's workers, ns.
    pub(crate) time_ns: Vec<u64>,
    /// The same weighted by the other tasks running beside it, ns (see `occupancy.rs`);
    /// empty when the domain's occupancy columns were not built.
    pub(crate) occ_ns: Vec<u64>,
}

impl TypeColumn {
    /// Time the type ran in each interval, ns (one entry per interval).
    pub fn time_ns(&self) -> &[u64] {
        &self.time_ns
    }

    /// Time the type ran in each interval weighted by the number of other tasks beside it,
    /// ns; empty when not built ([`DomainSystem::occupancy`]).
    pub fn occupancy_ns(&self) -> &[u64] {
        &self.occ_ns
    }
}

/// One domain's system: intervals (rows) and task-type time (columns).
#[derive(Clone, Debug)]
pub struct DomainSystem {
    pub(crate) info: DomainInfo,
    /// Sample times, ns, strictly increasing; empty for a domain with fewer than 2 samples.
    pub(crate) t_ns: Vec<u64>,
    /// Energy of each interval, J (`t_ns.len() - 1` entries).
    pub(crate) energy_j: Vec<f64>,
    pub(crate) columns: Vec<TypeColumn>,
    /// Rows lying entirely inside an idle-calibration marker.
    pub(crate) idle_rows: usize,
    /// Of those, rows in which some task ran nonetheless.
    pub(crate) idle_rows_with_tasks: usize,
    /// Samples dropped because they repeated the previous sample's time.
    pub(crate) duplicate_samples: usize,
    /// Samples dropped because their energy was not a finite number.
    pub(crate) invalid_samples: usize,
    /// First task start and last task end on the domain's workers, ns.
    pub(crate) task_span: Option<(u64, u64)>,
    /// How the samples were aligned to the meter's updates, if they were.
    pub(crate) alignment: Option<super::align::Alignment>,
    /// The trace's regions (see [`Regions`]), and per region and column: tasks starting
    /// in it and their time inside it, ns.
    pub(crate) regions: Vec<RegionDef>,
    pub(crate) region_time: Vec<Vec<(u64, u64)>>,
    /// Per region and column: occupancy-weighted time inside it, ns (empty when the
    /// occupancy columns were not built).
    pub(crate) region_occ: Vec<Vec<u64>>,
    /// How busy the domain was, and whether its occupancy columns exist.
    pub(crate) occupancy: super::occupancy::Occupancy,
    /// Region edges that fall inside an interval, by time: what ran before each, so that
    /// the interval's measured energy is split by the work on each side of the edge, not
    /// by time (a region that starts busy after an idle stretch would otherwise be shown
    /// short of what it measured).
    pub(crate) cuts: Vec<Cut>,
    /// Per interval, the mean frequency of the domain's busy cores, MHz (NaN where no
    /// sample covers it); empty when the trace has no frequency for the domain.
    pub(crate) freq_mhz: Vec<f64>,
}

/// A region edge strictly inside a sampled interval.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Cut {
    /// The edge, ns.
    pub(crate) t_ns: u64,
    /// The interval it falls in.
    pub(crate) row: usize,
    /// Per column: the tasks' time in the interval before the edge, ns.
    pub(crate) busy_ns: Vec<u64>,
}

/// One region of a run: a name and the time spans it covers.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionDef {
    /// `application`, `calibration`, or a user region's name.
    pub name: String,
    /// Disjoint spans, ns, sorted.
    pub spans: Vec<(u64, u64)>,
}

impl RegionDef {
    /// Total length, ns.
    pub fn length_ns(&self) -> u64 {
        self.spans.iter().map(|(a, b)| b - a).sum()
    }
}

/// The regions of a trace, from its markers: `graph` is the `application`,
/// `idle-calibration` and `type-calibration:*` together are `calibration`, and
/// `region:<name>` markers (see `taskwatt_traces::Region`) are user regions. A type's own
/// calibration (`type-calibration:<codelet>`, one codelet) is also a region of its own,
/// `calibration:<codelet>`, where the report measures that type's power directly (see
/// `RegionReport::alone`).
pub fn regions_of(markers: &[taskwatt_traces::Marker]) -> Vec<RegionDef> {
    let mut out: Vec<RegionDef> = Vec::new();
    let mut add =
        |name: &str, m: &taskwatt_traces::Marker| match out.iter_mut().find(|r| r.name == name) {
            Some(r) => r.spans.push((m.start.0, m.end.0)),
            None => out.push(RegionDef {
                name: name.to_owned(),
                spans: vec![(m.start.0, m.end.0)],
            }),
        };
    for m in markers {
        if m.end.0 <= m.start.0 {
            continue;
        }
        if m.name == "graph" {
            add("application", m);
        } else if m.name == IDLE_CALIBRATION {
            add("calibration", m);
        } else if let Some(types) = m.name.strip_prefix("type-calibration:") {
            add("calibration", m);
            if !types.contains('+') {
                add(&format!("calibration:{types}"), m);
            }
        } else if let Some(n) = m.name.strip_prefix(taskwatt_traces::REGION_PREFIX) {
            add(n, m);
        }
    }
    for r in &mut out {
        // Union of the spans, so that overlapping markers count once.
        r.spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(r.spans.len());
        for &(a, b) in &r.spans {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        r.spans = merged;
    }
    // The application first, then calibration, then user regions in first-seen order.
    out.sort_by_key(|r| match r.name.as_str() {
        "application" => 0,
        "calibration" => 1,
        _ => 2,
    });
    out
}

impl DomainSystem {
    /// The domain as the trace describes it.
    pub fn info(&self) -> &DomainInfo {
        &self.info
    }

    /// What the domain measures (the key that matches domains across traces).
    pub fn domain(&self) -> Domain {
        self.info.domain
    }

    /// Number of intervals (rows); 0 when the domain had fewer than two samples.
    pub fn intervals(&self) -> usize {
        self.energy_j.len()
    }

    /// Sample times, ns (`intervals() + 1` entries, or none).
    pub fn sample_times_ns(&self) -> &[u64] {
        &self.t_ns
    }

    /// Measured energy of each interval, J.
    pub fn energy_j(&self) -> &[f64] {
        &self.energy_j
    }

    /// Length of interval `i`, ns.
    #[inline]
    pub fn dt_ns(&self, i: usize) -> u64 {
        self.t_ns[i + 1] - self.t_ns[i]
    }

    /// The sampled window `(first sample, last sample)`, ns.
    pub fn window_ns(&self) -> Option<(u64, u64)> {
        Some((*self.t_ns.first()?, *self.t_ns.last()?))
    }

    /// The task-type columns, in first-seen order.
    pub fn columns(&self) -> &[TypeColumn] {
        &self.columns
    }

    /// Rows entirely inside idle-calibration markers.
    pub fn idle_calibration_rows(&self) -> usize {
        self.idle_rows
    }

    /// First task start and last task end on this domain's workers, ns.
    pub fn task_span_ns(&self) -> Option<(u64, u64)> {
        self.task_span
    }

    /// The share of interval `cut.row`'s energy that the model puts before the edge:
    /// `base · Δt + Σ_k p_k · x_k` over the part, over the same for the whole interval,
    /// `x_k` the column's busy time less the contention's share (the interval's ratio of
    /// occupancy to time, taken as even within it); the time's share when the model puts
    /// no energy in the interval.
    pub(crate) fn split_share(&self, cut: &Cut, base_w: f64, powers: &[f64], theta: f64) -> f64 {
        let i = cut.row;
        let (t0, t1) = (self.t_ns[i], self.t_ns[i + 1]);
        let by_time = (cut.t_ns - t0) as f64 / (t1 - t0) as f64;
        let (mut part, mut whole) = (base_w * (cut.t_ns - t0) as f64, base_w * (t1 - t0) as f64);
        for ((col, &p), &b) in self.columns.iter().zip(powers).zip(&cut.busy_ns) {
            let t = col.time_ns[i] as f64;
            if t <= 0.0 {
                continue;
            }
            let u = col.occ_ns.get(i).map_or(0.0, |&u| u as f64);
            let keep = 1.0 - theta * u / t;
            part += p * b as f64 * keep;
            whole += p * t * keep;
        }
        if whole > 0.0 && part.is_finite() {
            (part / whole).clamp(0.0, 1.0)
        } else {
            by_time
        }
    }

    /// Measured energy over `spans`, J: the intervals inside them whole, an interval a
    /// span's edge cuts split by `share` (the model's share of its energy before the
    /// edge, [`DomainSystem::split_share`]) or, at an edge not known in advance, by time.
    pub(crate) fn measured_over(
        &self,
        spans: &[(u64, u64)],
        share: &dyn Fn(&Cut) -> f64,
    ) -> Option<f64> {
        let at = |t: u64| -> Option<f64> {
            match self.cuts.binary_search_by_key(&t, |c| c.t_ns) {
                Ok(k) => {
                    let c = &self.cuts[k];
                    let before: f64 = self.energy_j[..c.row].iter().sum();
                    Some(before + share(c) * self.energy_j[c.row])
                }
                Err(_) => self.energy_at(t),
            }
        };
        spans.iter().map(|&(a, b)| Some(at(b)? - at(a)?)).sum()
    }

    /// How many intervals `spans` cover, an interval they cover in part counting for its
    /// share of time: what a measurement's noise over them scales with.
    pub(crate) fn intervals_in(&self, spans: &[(u64, u64)]) -> f64 {
        let t = &self.t_ns;
        if t.len() < 2 {
            return 0.0;
        }
        let mut n = 0.0;
        for &(a, b) in spans {
            let (a, b) = (a.max(t[0]), b.min(t[t.len() - 1]));
            if a >= b {
                continue;
            }
            let mut i = t.partition_point(|&x| x <= a).saturating_sub(1);
            while i + 1 < t.len() && t[i] < b {
                let (s, e) = (a.max(t[i]), b.min(t[i + 1]));
                if s < e {
                    n += (e - s) as f64 / (t[i + 1] - t[i]) as f64;
                }
                i += 1;
            }
        }
        n
    }

    /// Measured energy from the first sample to `t_ns`, J, interpolated linearly between
    /// the two samples around it; a time less than one interval outside the sampled window
    /// is taken at its edge (a run's last reading may land just before the end of its
    /// graph); `None` further out.
    pub fn energy_at(&self, t_ns: u64) -> Option<f64> {
        let t = &self.t_ns;
        let n = t.len();
        if n < 2 {
            return None;
        }
        let t_ns = if t_ns < t[0] && t[0] - t_ns <= t[1] - t[0] {
            t[0]
        } else if t_ns > t[n - 1] && t_ns - t[n - 1] <= t[n - 1] - t[n - 2] {
            t[n - 1]
        } else {
            t_ns
        };
        if t_ns < t[0] || t_ns > t[n - 1] {
            return None;
        }
        let i = t.partition_point(|&s| s <= t_ns).clamp(1, t.len() - 1);
        let before: f64 = self.energy_j[..i - 1].iter().sum();
        let f = (t_ns - t[i - 1]) as f64 / (t[i] - t[i - 1]) as f64;
        Some(before + f * self.energy_j[i - 1])
    }

    /// The trace's regions.
    pub fn regions(&self) -> &[RegionDef] {
        &self.regions
    }

    /// Per region (in [`DomainSystem::regions`] order) and column: tasks starting in the
    /// region and their time inside it, ns.
    pub fn region_time(&self) -> &[Vec<(u64, u64)>] {
        &self.region_time
    }

    /// How the samples were aligned to the meter's updates (see `align.rs`); `None` when
    /// the meter's update interval is unknown or it reports power.
    pub fn alignment(&self) -> Option<&super::align::Alignment> {
        self.alignment.as_ref()
    }

    /// How busy the domain was, and whether its occupancy columns were built.
    pub fn occupancy(&self) -> &super::occupancy::Occupancy {
        &self.occupancy
    }

    /// Per region (in [`DomainSystem::regions`] order) and column: the occupancy-weighted
    /// time inside the region, ns; empty when not built.
    pub fn region_occupancy(&self) -> &[Vec<u64>] {
        &self.region_occ
    }
}

/// The systems of every domain of one trace, built in one pass over its tasks.
#[derive(Clone, Debug)]
pub struct TraceSystems {
    /// How tasks were grouped into types.
    pub key: KeyKind,
    /// One system per domain of the trace, in the trace's order (including domains with
    /// too few samples, which have no rows).
    pub domains: Vec<DomainSystem>,
    /// Tasks read.
    pub tasks: u64,
    /// Tasks on workers that no domain covers.
    pub unmetered_tasks: u64,
    /// First task start and last task end over every task, ns.
    pub span_ns: Option<(u64, u64)>,
}
