//! The build pass: one walk over a trace's tasks that clips each to the intervals of every
//! domain it touches and fills the systems' columns ([`TraceSystems::build`]), with the
//! intervals' frequency ratios.

use std::borrow::Borrow;
use std::collections::HashMap;

use taskwatt_traces::{DomainInfo, FrequencySample, TaskRecord};

use super::error::AttributionError;
use super::input::{TraceParts, IDLE_CALIBRATION};
use super::key::{names_by_id, CodeletNames, KeyKind, TypeKey};
use super::system::*;

/// How a task's activity reaches a domain's readings (see docs/attribution.md, "Sensor
/// models"). Row `i` is the interval `[t_i, t_{i+1}]`; a column's entry is the task time,
/// in ns, that the row's energy counts at the task's power.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Response {
    /// An ideal counter: the task's time inside the interval.
    Clip,
    /// A counter that, at each update `u` (every `update_ns`, the interval ends once
    /// aligned), counts `update_ns / sampled_ns` times the energy of `[u - sampled_ns, u]`.
    Sampled { sampled_ns: u64, update_ns: u64 },
    /// A power reading averaged over the last `window_ns`, integrated by the sampler with
    /// the trapezoid rule between readings: the interval's energy is its length times the
    /// mean of the readings at its two ends.
    Averaged { window_ns: u64 },
}

impl Response {
    /// The response of `info`'s sensor.
    fn of(info: &DomainInfo) -> Response {
        match info.sensor {
            taskwatt_traces::SensorKind::EnergyCounter => Response::Clip,
            taskwatt_traces::SensorKind::SampledCounter { sampled_ns } => {
                match info.update_interval_ns {
                    Some(u) if sampled_ns > 0 && sampled_ns < u => Response::Sampled {
                        sampled_ns,
                        update_ns: u,
                    },
                    _ => Response::Clip,
                }
            }
            taskwatt_traces::SensorKind::IntegratedPower { window_ns } if window_ns > 0 => {
                Response::Averaged { window_ns }
            }
            taskwatt_traces::SensorKind::IntegratedPower { .. } => Response::Clip,
        }
    }

    /// Adds the response to a task running over `[start, end]` to `col`.
    fn spread(self, t: &[u64], finder: &IntervalFinder, start: u64, end: u64, col: &mut [u64]) {
        let overlap = |a: u64, b: u64| end.min(b).saturating_sub(start.max(a)) as f64;
        let n = col.len();
        let add = |col: &mut [u64], i: usize, w: f64| {
            if w > 0.0 {
                col[i] += w.round() as u64;
            }
        };
        match self {
            Response::Clip => unreachable!("clipped by the caller"),
            Response::Sampled {
                sampled_ns,
                update_ns,
            } => {
                let scale = update_ns as f64 / sampled_ns as f64;
                // Rows whose updates' sampled parts the task can touch: from the one it
                // starts in, while an update after the row's start can still see it.
                let mut i = finder.find(t, start.max(t[0]));
                while i < n {
                    let (a, b) = (t[i], t[i + 1]);
                    if a >= end.saturating_add(sampled_ns) {
                        break;
                    }
                    // The updates in (a, b]: b, b - update, ... (the interval ends on one).
                    let mut w = 0.0;
                    let mut u = b;
                    while u > a {
                        w += overlap(u.saturating_sub(sampled_ns), u);
                        u = u.saturating_sub(update_ns);
                        if u == 0 {
                            break;
                        }
                    }
                    add(col, i, w * scale);
                    i += 1;
                }
            }
            Response::Averaged { window_ns } => {
                let reading = |x: u64| overlap(x.saturating_sub(window_ns), x) / window_ns as f64;
                // Readings at x in (start, end + window) see the task.
                let mut i = finder.find(t, start.max(t[0]));
                let last = end.saturating_add(window_ns);
                while i < n && t[i] < last {
                    let (a, b) = (t[i], t[i + 1]);
                    add(col, i, 0.5 * (b - a) as f64 * (reading(a) + reading(b)));
                    i += 1;
                }
            }
        }
    }
}

/// Finds the interval holding a time: a bucket table over `[t_0, t_n)` gives a short
/// range of candidate intervals, a binary search finishes.
struct IntervalFinder {
    t0: u64,
    width: u64,
    /// `guide[b]`: the interval holding `t0 + b * width`.
    guide: Vec<u32>,
}

impl IntervalFinder {
    fn new(t: &[u64]) -> IntervalFinder {
        let n = t.len() - 1;
        let span = t[n] - t[0];
        let width = span.div_ceil(n as u64).max(1);
        let buckets = (span / width) as usize + 1;
        let mut guide = Vec::with_capacity(buckets + 1);
        let mut i = 0usize;
        for b in 0..=buckets {
            let start = t[0].saturating_add(b as u64 * width);
            while i + 1 < n && t[i + 1] <= start {
                i += 1;
            }
            guide.push(i as u32);
        }
        IntervalFinder {
            t0: t[0],
            width,
            guide,
        }
    }

    /// The `i` with `t[i] <= s < t[i+1]`, for `t[0] <= s < t[n]`.
    #[inline]
    fn find(&self, t: &[u64], s: u64) -> usize {
        let b = ((s - self.t0) / self.width) as usize;
        let lo = self.guide[b] as usize;
        let hi = self.guide[b + 1] as usize;
        // Invariant: t[lo] <= s (bucket start >= t[lo]) and s < t[hi + 1].
        lo + t[lo + 1..=hi].partition_point(|&x| x <= s)
    }
}

/// Why a domain with too many tasks has no occupancy columns.
fn too_many_for_occupancy() -> String {
    format!(
        "more than {} tasks on the domain: the occupancy columns were not built (their \
         memory), so contention is not modelled",
        super::occupancy::OCCUPANCY_MAX_TASKS
    )
}

/// Build-time state of one domain.
struct Builder {
    sys: DomainSystem,
    finder: Option<IntervalFinder>,
    /// Slot -> column.
    slots: SlotTable,
    by_key: HashMap<TypeKey, u32>,
    /// How a task's activity reaches this domain's readings.
    response: Response,
    /// The tasks, for the occupancy sweep (`None`: not built for this domain).
    spans: Option<super::occupancy::Spans>,
}

/// Slots (or worker ids) below this go through a flat table, the others through a map: ids
/// are usually small and dense, but a trace may hold any `u32`, and an id must never size an
/// array (worker 4294967295 would ask for tens of GiB).
const DENSE_IDS: usize = 1 << 16;

/// Slot -> column: a flat table for small slots (no hash on the hot path), a map above.
#[derive(Default)]
struct SlotTable {
    /// Column of each small slot, `u32::MAX` when not seen yet; grows up to `DENSE_IDS`.
    dense: Vec<u32>,
    sparse: HashMap<usize, u32>,
}

impl SlotTable {
    #[inline]
    fn get(&self, slot: usize) -> Option<u32> {
        if slot < DENSE_IDS {
            self.dense.get(slot).copied().filter(|&c| c != u32::MAX)
        } else {
            self.sparse.get(&slot).copied()
        }
    }

    fn insert(&mut self, slot: usize, column: u32) {
        if slot < DENSE_IDS {
            if slot >= self.dense.len() {
                self.dense.resize(slot + 1, u32::MAX);
            }
            self.dense[slot] = column;
        } else {
            self.sparse.insert(slot, column);
        }
    }
}

/// Worker id -> the domains covering it: a flat table for small ids, a map above.
struct WorkerCover {
    dense: Vec<Vec<u32>>,
    sparse: HashMap<u32, Vec<u32>>,
}

impl WorkerCover {
    fn new(domains: &[DomainInfo]) -> WorkerCover {
        let mut cover = WorkerCover {
            dense: Vec::new(),
            sparse: HashMap::new(),
        };
        for (di, d) in domains.iter().enumerate() {
            for &w in &d.workers {
                let list = if (w as usize) < DENSE_IDS {
                    if w as usize >= cover.dense.len() {
                        cover.dense.resize(w as usize + 1, Vec::new());
                    }
                    &mut cover.dense[w as usize]
                } else {
                    cover.sparse.entry(w).or_default()
                };
                if !list.contains(&(di as u32)) {
                    list.push(di as u32);
                }
            }
        }
        cover
    }

    #[inline]
    fn get(&self, worker: u32) -> &[u32] {
        let list = if (worker as usize) < DENSE_IDS {
            self.dense.get(worker as usize)
        } else {
            self.sparse.get(&worker)
        };
        list.map_or(&[][..], |v| &v[..])
    }
}

impl Builder {
    fn new(
        info: &DomainInfo,
        mut samples: Vec<(u64, f64)>,
        align_to_meter: bool,
    ) -> Result<Builder, AttributionError> {
        if !samples.is_sorted_by_key(|s| s.0) {
            samples.sort_by_key(|s| s.0);
        }
        let before = samples.len();
        samples.dedup_by_key(|s| s.0);
        let duplicate_samples = before - samples.len();
        // Counters run forward (wraps were undone when the trace was recorded or read); a
        // drop larger than one count of the counter is damage, not noise.
        let tolerance = if info.resolution_j.is_finite() {
            info.resolution_j.max(0.0)
        } else {
            0.0
        };
        if let Some(w) = samples.windows(2).find(|w| w[1].1 < w[0].1 - tolerance) {
            return Err(AttributionError::EnergyDecreases {
                domain: info.name.clone(),
                previous_t_ns: w[0].0,
                previous_j: w[0].1,
                t_ns: w[1].0,
                energy_j: w[1].1,
                drop_j: w[0].1 - w[1].1,
            });
        }
        let alignment = if align_to_meter {
            super::align::align(info, &mut samples)
        } else {
            None
        };
        let (t_ns, energy_j) = if samples.len() >= 2 {
            let t: Vec<u64> = samples.iter().map(|s| s.0).collect();
            let e = samples.windows(2).map(|w| w[1].1 - w[0].1).collect();
            (t, e)
        } else {
            (Vec::new(), Vec::new())
        };
        let finder = (t_ns.len() >= 2).then(|| IntervalFinder::new(&t_ns));
        Ok(Builder {
            sys: DomainSystem {
                info: info.clone(),
                t_ns,
                energy_j,
                columns: Vec::new(),
                idle_rows: 0,
                idle_rows_with_tasks: 0,
                duplicate_samples,
                invalid_samples: 0,
                task_span: None,
                alignment,
                regions: Vec::new(),
                region_time: Vec::new(),
                region_occ: Vec::new(),
                occupancy: super::occupancy::Occupancy::default(),
                cuts: Vec::new(),
                freq_mhz: Vec::new(),
            },
            finder,
            slots: SlotTable::default(),
            by_key: HashMap::new(),
            response: Response::Clip,
            spans: None,
        })
    }

    #[inline]
    fn column(&mut self, kind: KeyKind, t: &TaskRecord, names: &CodeletNames<'_>) -> usize {
        let slot = kind.slot(t);
        if let Some(c) = self.slots.get(slot) {
            return c as usize;
        }
        self.new_column(slot, kind, t, names)
    }

    #[cold]
    fn new_column(
        &mut self,
        slot: usize,
        kind: KeyKind,
        t: &TaskRecord,
        names: &CodeletNames<'_>,
    ) -> usize {
        let key = kind.key_of(t, names);
        // Two codelet ids with one name share a column: the key is what a model matches on.
        let n = self.sys.energy_j.len();
        let next = self.sys.columns.len() as u32;
        let c = *self.by_key.entry(key.clone()).or_insert(next);
        if c == next {
            for r in &mut self.sys.region_time {
                r.push((0, 0));
            }
            for c in &mut self.sys.cuts {
                c.busy_ns.push(0);
            }
            self.sys.columns.push(TypeColumn {
                key,
                stats: TypeStats {
                    min_ns: u64::MAX,
                    ..TypeStats::default()
                },
                time_ns: vec![0; n],
                occ_ns: Vec::new(),
            });
        }
        self.slots.insert(slot, c);
        c as usize
    }

    #[inline]
    fn add(&mut self, col: usize, start: u64, end: u64) {
        let span = self.sys.task_span.get_or_insert((start, end));
        span.0 = span.0.min(start);
        span.1 = span.1.max(end);
        let dur = end.saturating_sub(start);
        if let Some(sp) = &mut self.spans {
            sp.push(start, end, col);
        }
        let t = &self.sys.t_ns;
        let column = &mut self.sys.columns[col];
        let st = &mut column.stats;
        st.count += 1;
        st.total_ns += dur;
        st.min_ns = st.min_ns.min(dur);
        st.max_ns = st.max_ns.max(dur);
        for (r, acc) in self.sys.regions.iter().zip(&mut self.sys.region_time) {
            let acc = &mut acc[col];
            for &(a, b) in &r.spans {
                let (s, e) = (start.max(a), end.min(b));
                if s < e {
                    acc.1 += e - s;
                }
                acc.0 += u64::from(a <= start && start < b);
            }
        }
        // Only the edges after the task's start whose interval begins before its end.
        let first = self.sys.cuts.partition_point(|c| c.t_ns <= start);
        for c in &mut self.sys.cuts[first..] {
            if t[c.row] >= end {
                break;
            }
            let (s, e) = (start.max(t[c.row]), end.min(c.t_ns));
            if s < e {
                c.busy_ns[col] += e - s;
            }
        }
        let Some(finder) = &self.finder else { return };
        let (t0, tn) = (t[0], t[t.len() - 1]);
        let (s, e) = (start.max(t0), end.min(tn));
        if s >= e {
            return;
        }
        st.in_window += 1;
        st.clipped_ns += e - s;
        let mut i = finder.find(t, s);
        if e <= t[i + 1] {
            // Whole inside one interval (what the sampling warnings count), whatever the
            // sensor.
            st.contained += u64::from(s == start && e == end);
        }
        if self.response != Response::Clip {
            self.response
                .spread(t, finder, start, end, &mut column.time_ns);
            return;
        }
        if e <= t[i + 1] {
            column.time_ns[i] += e - s;
            return;
        }
        let mut from = s;
        while from < e {
            let to = e.min(t[i + 1]);
            column.time_ns[i] += to - from;
            from = to;
            i += 1;
        }
    }

    /// The regions' edges that fall strictly inside an interval (set once the regions
    /// are, before any task).
    fn set_cuts(&mut self) {
        let Some(finder) = &self.finder else { return };
        let t = &self.sys.t_ns;
        let (t0, tn) = (t[0], t[t.len() - 1]);
        let mut edges: Vec<u64> = self
            .sys
            .regions
            .iter()
            .flat_map(|r| r.spans.iter().flat_map(|&(a, b)| [a, b]))
            .filter(|&e| t0 < e && e < tn)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        self.sys.cuts = edges
            .into_iter()
            .filter_map(|e| {
                let row = finder.find(t, e);
                (t[row] < e && e < t[row + 1]).then(|| Cut {
                    t_ns: e,
                    row,
                    busy_ns: vec![0; self.sys.columns.len()],
                })
            })
            .collect();
    }

    /// Decides whether the domain gets occupancy columns: a counter (clipped) read over at
    /// least one interval, covering two workers or more.
    fn want_occupancy(&mut self, tasks_hint: usize, all_workers: usize) {
        let workers = {
            let mut w = self.sys.info.workers.clone();
            w.sort_unstable();
            w.dedup();
            w.len()
        };
        // The domain's share of the tasks, taking them as spread evenly over the workers.
        let expected = tasks_hint as f64 * workers.min(all_workers) as f64 / all_workers as f64;
        let reason = if workers < 2 {
            Some("the domain covers one worker: no task runs beside another")
        } else if self.response != Response::Clip {
            Some("the sensor's readings are shaped (a sampled counter or averaged power)")
        } else {
            None
        };
        match reason {
            // Over the tasks the sweep keeps (spread evenly), known before the pass: none
            // is kept (a domain whose count the estimate gets wrong is decided in the pass).
            None if expected > super::occupancy::OCCUPANCY_MAX_TASKS as f64 => {
                self.sys.occupancy.skipped = Some(too_many_for_occupancy())
            }
            None => self.spans = Some(super::occupancy::Spans::new()),
            Some(r) => self.sys.occupancy.skipped = Some(r.to_owned()),
        }
    }

    /// Fills the occupancy columns from the tasks the pass kept.
    fn finish_occupancy(&mut self) {
        let Some(spans) = self.spans.take() else {
            return;
        };
        if spans.overflowed() {
            self.sys.occupancy.skipped = Some(too_many_for_occupancy());
            return;
        }
        let region_spans: Vec<Vec<(u64, u64)>> =
            self.sys.regions.iter().map(|r| r.spans.clone()).collect();
        let out =
            super::occupancy::sweep(spans, &self.sys.t_ns, self.sys.columns.len(), &region_spans);
        for ((col, occ), total) in self.sys.columns.iter_mut().zip(out.columns).zip(out.totals) {
            col.stats.occ_ns = occ.iter().sum();
            col.stats.occ_total_ns = total;
            col.occ_ns = occ;
        }
        // Regions: per region a value per column.
        self.sys.region_occ = out.regions;
        self.sys.occupancy.time_by_k_ns = out.time_by_k_ns;
        self.sys.occupancy.built = true;
    }

    /// Counts the rows lying inside idle-calibration markers.
    fn mark_idle(&mut self, markers: &[taskwatt_traces::Marker]) {
        let t = &self.sys.t_ns;
        if t.len() < 2 {
            return;
        }
        let mut ranges: Vec<(usize, usize)> = markers
            .iter()
            .filter(|m| m.name == IDLE_CALIBRATION)
            .filter_map(|m| {
                // Rows i with m.start <= t[i] and t[i+1] <= m.end.
                let first = t.partition_point(|&x| x < m.start.0);
                let last_sample = t.partition_point(|&x| x <= m.end.0);
                (last_sample > first + 1).then_some((first, last_sample - 1))
            })
            .collect();
        ranges.sort_unstable();
        let mut covered_to = 0usize;
        for (a, b) in ranges {
            for i in a.max(covered_to)..b {
                self.sys.idle_rows += 1;
                if self.sys.columns.iter().any(|c| c.time_ns[i] > 0) {
                    self.sys.idle_rows_with_tasks += 1;
                }
            }
            covered_to = covered_to.max(b);
        }
    }
}

impl TraceSystems {
    /// Builds the systems of a whole in-memory trace (errors: see [`TraceSystems::build`]).
    pub fn from_trace(
        trace: &taskwatt_traces::Trace,
        key: KeyKind,
    ) -> Result<TraceSystems, AttributionError> {
        TraceSystems::build(
            &TraceParts::from_trace(trace),
            super::input::trace_tasks(trace),
            key,
        )
    }

    /// Builds every domain's system from one pass over `tasks` (any order).
    ///
    /// Refuses content that cannot be: a domain whose cumulative energy decreases by more
    /// than its resolution ([`AttributionError::EnergyDecreases`], naming the domain and the
    /// sample) and a task that ends before it starts
    /// ([`AttributionError::TaskEndsBeforeStart`], naming the task).
    ///
    /// Samples are aligned to each meter's updates (see [`super::Alignment`]); use
    /// [`TraceSystems::build_with`] to take the sample times as they are.
    pub fn build<B: Borrow<TaskRecord>>(
        parts: &TraceParts<'_>,
        tasks: impl IntoIterator<Item = B>,
        key: KeyKind,
    ) -> Result<TraceSystems, AttributionError> {
        TraceSystems::build_with(parts, tasks, key, true, super::SensorModel::Aware)
    }

    /// [`TraceSystems::build`], choosing whether samples are aligned to the meters'
    /// updates (`align_to_meter`) and how tasks reach the readings (`sensor`).
    pub fn build_with<B: Borrow<TaskRecord>>(
        parts: &TraceParts<'_>,
        tasks: impl IntoIterator<Item = B>,
        key: KeyKind,
        align_to_meter: bool,
        sensor: super::SensorModel,
    ) -> Result<TraceSystems, AttributionError> {
        let names = names_by_id(parts.codelets);
        let regions = regions_of(parts.markers);
        let tasks = tasks.into_iter();
        // Tasks the pass will see, when the iterator knows (a trace's task list does).
        let hint = tasks.size_hint().0;
        let all_workers = {
            let mut w: Vec<u32> = parts
                .domains
                .iter()
                .flat_map(|d| d.workers.clone())
                .collect();
            w.sort_unstable();
            w.dedup();
            w.len().max(1)
        };
        // Domain id -> its place in `parts.domains` (ids are u16: a flat table).
        let top = parts
            .domains
            .iter()
            .map(|d| usize::from(d.id) + 1)
            .max()
            .unwrap_or(0);
        let mut index = vec![usize::MAX; top];
        for (i, d) in parts.domains.iter().enumerate() {
            index[usize::from(d.id)] = i;
        }
        let place = |domain: u16| {
            index
                .get(usize::from(domain))
                .copied()
                .filter(|&i| i != usize::MAX)
        };
        // Sized first: grown by doubling, a million samples were copied twice over.
        let mut sizes = vec![0usize; parts.domains.len()];
        for s in parts.samples {
            if let Some(d) = place(s.domain) {
                sizes[d] += 1;
            }
        }
        let mut per_domain: Vec<Vec<(u64, f64)>> =
            sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
        let mut invalid = vec![0usize; parts.domains.len()];
        for s in parts.samples {
            if let Some(d) = place(s.domain) {
                // A reading that is not a number is no reading: dropping the sample merges
                // its two intervals into one, which the model handles exactly.
                if s.energy_j.is_finite() {
                    per_domain[d].push((s.t.0, s.energy_j));
                } else {
                    invalid[d] += 1;
                }
            }
        }
        let mut builders: Vec<Builder> = parts
            .domains
            .iter()
            .zip(per_domain)
            .zip(invalid)
            .map(|((info, samples), invalid)| {
                let mut b = Builder::new(info, samples, align_to_meter)?;
                b.response = match sensor {
                    super::SensorModel::Clip => Response::Clip,
                    super::SensorModel::Aware => Response::of(info),
                };
                b.sys.invalid_samples = invalid;
                b.sys.freq_mhz = interval_frequency(&b.sys.t_ns, info.id, parts.frequencies);
                b.sys.regions = regions.clone();
                b.sys.region_time = vec![Vec::new(); regions.len()];
                b.set_cuts();
                b.want_occupancy(hint, all_workers);
                Ok(b)
            })
            .collect::<Result<_, AttributionError>>()?;

        // worker -> domains covering it: a worker is usually in 1 to 3 domains.
        let cover = WorkerCover::new(parts.domains);

        let (mut count, mut unmetered) = (0u64, 0u64);
        let mut span: Option<(u64, u64)> = None;
        for task in tasks {
            let t = task.borrow();
            if t.end.0 < t.start.0 {
                return Err(AttributionError::TaskEndsBeforeStart {
                    task: t.id,
                    codelet: t.codelet,
                    worker: t.worker,
                    start_ns: t.start.0,
                    end_ns: t.end.0,
                });
            }
            count += 1;
            let sp = span.get_or_insert((t.start.0, t.end.0));
            sp.0 = sp.0.min(t.start.0);
            sp.1 = sp.1.max(t.end.0);
            let doms = cover.get(t.worker);
            if doms.is_empty() {
                unmetered += 1;
            }
            for &d in doms {
                let b = &mut builders[d as usize];
                let col = b.column(key, t, &names);
                b.add(col, t.start.0, t.end.0);
            }
        }
        // The occupancy sweeps are independent: one thread per domain that has one.
        std::thread::scope(|scope| {
            for b in &mut builders {
                b.mark_idle(parts.markers);
                if b.spans.is_some() {
                    scope.spawn(move || b.finish_occupancy());
                }
            }
        });
        Ok(TraceSystems {
            key,
            domains: builders.into_iter().map(|b| b.sys).collect(),
            tasks: count,
            unmetered_tasks: unmetered,
            span_ns: span,
        })
    }
}

/// Frequencies taken as readings, MHz: anything outside is dropped.
const MIN_MHZ: f64 = 1.0;
const MAX_MHZ: f64 = 100_000.0;

/// The time-weighted mean of `domain`'s frequency samples over each interval of `t`
/// (NaN where none covers it); empty when the domain has fewer than two samples. Sample
/// `j` stands for the span since the domain's previous sample.
pub(crate) fn interval_frequency(t: &[u64], domain: u16, samples: &[FrequencySample]) -> Vec<f64> {
    let mut f: Vec<(u64, f64)> = samples
        .iter()
        // A frequency no core runs at (a corrupt or hostile trace) is no reading: kept out,
        // it cannot push the fit's columns to infinity.
        .filter(|s| s.domain == domain && (MIN_MHZ..=MAX_MHZ).contains(&s.mhz))
        .map(|s| (s.t.0, s.mhz))
        .collect();
    if f.len() < 2 || t.len() < 2 {
        return Vec::new();
    }
    f.sort_by_key(|s| s.0);
    f.dedup_by_key(|s| s.0);
    let mut out = vec![0.0; t.len() - 1];
    let mut weight = vec![0.0; t.len() - 1];
    let mut i = 0;
    for w in f.windows(2) {
        let ((a, _), (b, mhz)) = (w[0], w[1]);
        // Intervals ending at or before `a` are done.
        while i + 1 < t.len() && t[i + 1] <= a {
            i += 1;
        }
        let mut j = i;
        while j + 1 < t.len() && t[j] < b {
            let lo = a.max(t[j]);
            let hi = b.min(t[j + 1]);
            if hi > lo {
                let d = (hi - lo) as f64;
                out[j] += d * mhz;
                weight[j] += d;
            }
            j += 1;
        }
    }
    for (o, w) in out.iter_mut().zip(&weight) {
        *o = if *w > 0.0 { *o / w } else { f64::NAN };
    }
    out
}

/// Energy samples of one domain, for tests and fakes: cumulative readings at `times`.
#[cfg(test)]
pub(crate) fn samples_for(
    domain: u16,
    times: &[u64],
    cumulative_j: &[f64],
) -> Vec<taskwatt_traces::EnergySample> {
    times
        .iter()
        .zip(cumulative_j)
        .map(|(&t, &e)| taskwatt_traces::EnergySample {
            domain,
            t: taskwatt_traces::Timestamp(t),
            wall_unix_ns: 0,
            energy_j: e,
            raw: e,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{domain_info, task};
    use super::*;
    use proptest::prelude::*;
    use taskwatt_traces::{Arch, CodeletInfo, Domain, Marker, Timestamp};

    fn codelets() -> Vec<CodeletInfo> {
        ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, n)| CodeletInfo {
                id: i as u32,
                name: n.to_string(),
                archs: vec![Arch::Cpu],
            })
            .collect()
    }

    #[test]
    fn a_task_is_cut_at_interval_boundaries() {
        let domains = [domain_info(0, Domain::CpuPackage { id: 0 }, &[0, 1])];
        let samples = samples_for(0, &[100, 200, 300, 400], &[0.0, 1.0, 3.0, 6.0]);
        let cl = codelets();
        let parts = TraceParts::new(&domains, &samples, &cl);
        // Starts before the window, ends in the third interval; one inside interval 1;
        // one on an uncovered worker.
        let tasks = [
            task(0, 0, 50, 350),
            task(1, 1, 210, 260),
            task(0, 7, 100, 400),
        ];
        let s = TraceSystems::build(&parts, tasks.iter(), KeyKind::Codelet).unwrap();
        let d = &s.domains[0];
        assert_eq!(d.energy_j(), &[1.0, 2.0, 3.0]);
        assert_eq!(d.columns().len(), 2);
        assert_eq!(d.columns()[0].key, TypeKey::codelet("a"));
        assert_eq!(d.columns()[0].time_ns(), &[100, 100, 50]);
        assert_eq!(d.columns()[1].time_ns(), &[0, 50, 0]);
        assert_eq!(d.columns()[0].stats.clipped_ns, 250);
        assert_eq!(d.columns()[0].stats.total_ns, 300);
        assert_eq!(d.columns()[1].stats.contained, 1);
        assert_eq!(s.unmetered_tasks, 1);
        assert_eq!(s.span_ns, Some((50, 400)));
    }

    #[test]
    fn unsorted_and_repeated_samples_are_tolerated() {
        let domains = [domain_info(0, Domain::Psys, &[0])];
        let mut samples = samples_for(0, &[300, 100, 200, 200], &[6.0, 0.0, 1.0, 1.0]);
        samples.swap(0, 3);
        samples.push(samples_for(0, &[250], &[f64::NAN])[0]);
        let parts = TraceParts::new(&domains, &samples, &[]);
        let s = TraceSystems::build(&parts, [task(0, 0, 150, 250)], KeyKind::Codelet).unwrap();
        let d = &s.domains[0];
        assert_eq!(d.sample_times_ns(), &[100, 200, 300]);
        assert_eq!(d.energy_j(), &[1.0, 5.0]);
        assert_eq!(d.duplicate_samples, 1);
        assert_eq!(d.invalid_samples, 1);
        assert_eq!(d.columns()[0].key, TypeKey::codelet("codelet#0"));
        assert_eq!(d.columns()[0].time_ns(), &[50, 50]);
    }

    #[test]
    fn decreasing_energy_is_an_error_naming_the_domain_and_the_sample() {
        let domains = [domain_info(0, Domain::CpuPackage { id: 0 }, &[0])];
        // 996 J lost between t = 200 and t = 300 (in any sample order).
        let samples = samples_for(0, &[300, 100, 200, 400], &[4.0, 0.0, 1000.0, 1010.0]);
        let parts = TraceParts::new(&domains, &samples, &[]);
        let err =
            TraceSystems::build(&parts, [task(0, 0, 150, 250)], KeyKind::Codelet).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                AttributionError::EnergyDecreases {
                    t_ns: 300,
                    previous_t_ns: 200,
                    ..
                }
            ),
            "{msg}"
        );
        for part in ["package-0", "t = 300 ns", "by 996 J"] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        // A drop within the counter's resolution (1 µJ here) is rounding, not damage.
        let samples = samples_for(0, &[100, 200, 300], &[1.0, 2.0, 2.0 - 5e-7]);
        let parts = TraceParts::new(&domains, &samples, &[]);
        assert!(TraceSystems::build(&parts, [task(0, 0, 150, 250)], KeyKind::Codelet).is_ok());
    }

    #[test]
    fn a_task_ending_before_it_starts_is_an_error_naming_it() {
        let domains = [domain_info(0, Domain::Psys, &[0])];
        let samples = samples_for(0, &[100, 200], &[0.0, 1.0]);
        let parts = TraceParts::new(&domains, &samples, &[]);
        let mut bad = task(2, 0, 180, 120);
        bad.id = 41;
        let err =
            TraceSystems::build(&parts, [task(0, 0, 150, 160), bad], KeyKind::Codelet).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, AttributionError::TaskEndsBeforeStart { task: 41, .. }),
            "{msg}"
        );
        assert!(msg.contains("task 41") && msg.contains("120 ns"), "{msg}");
        // A zero-length task is fine.
        assert!(TraceSystems::build(&parts, [task(0, 0, 150, 150)], KeyKind::Codelet).is_ok());
    }

    #[test]
    fn idle_calibration_rows_are_counted() {
        let domains = [domain_info(0, Domain::Psys, &[0])];
        let times: Vec<u64> = (0..=10).map(|i| i * 100).collect();
        let e: Vec<f64> = (0..=10).map(f64::from).collect();
        let samples = samples_for(0, &times, &e);
        let markers = [
            Marker {
                name: IDLE_CALIBRATION.into(),
                start: Timestamp(0),
                end: Timestamp(350),
            },
            Marker {
                name: IDLE_CALIBRATION.into(),
                start: Timestamp(200),
                end: Timestamp(400),
            },
            Marker {
                name: "graph".into(),
                start: Timestamp(0),
                end: Timestamp(1000),
            },
        ];
        let parts = TraceParts {
            markers: &markers,
            ..TraceParts::new(&domains, &samples, &[])
        };
        let s = TraceSystems::build(&parts, [task(0, 0, 250, 260)], KeyKind::Codelet).unwrap();
        // Rows 0, 1, 2 (first marker) and 2, 3 (second): four distinct rows, one busy.
        assert_eq!(s.domains[0].idle_rows, 4);
        assert_eq!(s.domains[0].idle_rows_with_tasks, 1);
    }

    #[test]
    fn a_region_edge_inside_an_interval_splits_it_by_the_work_on_each_side() {
        // Intervals of 100 ns; 10 W of base, 30 W more while task `a` runs. The region
        // starts at 150, in the middle of interval 1, where `a` starts: all of that
        // interval's energy but the base before the edge is the region's.
        let domains = [domain_info(0, Domain::Psys, &[0])];
        let times = [0u64, 100, 200, 300];
        let e = [0.0, 1e-6, 1e-6 + 2.5e-6, 1e-6 + 2.5e-6 + 4e-6];
        let samples = samples_for(0, &times, &e);
        let markers = [Marker {
            name: "graph".into(),
            start: Timestamp(150),
            end: Timestamp(300),
        }];
        let cl = codelets();
        let parts = TraceParts {
            markers: &markers,
            ..TraceParts::new(&domains, &samples, &cl)
        };
        let s = TraceSystems::build(&parts, [task(0, 0, 150, 300)], KeyKind::Codelet).unwrap();
        let d = &s.domains[0];
        assert_eq!(d.cuts.len(), 1);
        assert_eq!(
            (d.cuts[0].row, d.cuts[0].busy_ns.as_slice()),
            (1, &[0u64][..])
        );
        let spans = &d.regions()[0].spans;
        // By time, the region would get half of interval 1: 1.25 µJ + 4 µJ.
        let by_time = d.measured_over(spans, &|_| 0.5).unwrap();
        assert!((by_time - 5.25e-6).abs() < 1e-15, "{by_time}");
        // By the model (10 W base, 30 W task): before the edge 10 W x 50 ns = 0.5 µJ of
        // the interval's 0.5 + 0.5 + 1.5 = 2.5 µJ, so the region holds 2 µJ of it.
        let share = d.measured_over(spans, &|c| d.split_share(c, 10.0, &[30.0], 0.0));
        assert!((share.unwrap() - 6e-6).abs() < 1e-15, "{share:?}");
        assert!((d.intervals_in(spans) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn a_domain_without_samples_still_counts_tasks() {
        let domains = [domain_info(0, Domain::Gpu { index: 0 }, &[0])];
        let parts = TraceParts::new(&domains, &[], &[]);
        let s = TraceSystems::build(&parts, [task(0, 0, 10, 30)], KeyKind::CodeletArch).unwrap();
        let d = &s.domains[0];
        assert_eq!(d.intervals(), 0);
        assert_eq!(d.columns()[0].stats.total_ns, 20);
        assert_eq!(d.columns()[0].stats.in_window, 0);
    }

    #[test]
    fn frequency_samples_are_averaged_over_each_interval_by_time() {
        let f = |t: u64, mhz: f64| FrequencySample {
            domain: 3,
            t: taskwatt_traces::Timestamp(t),
            mhz,
        };
        // Samples at 0, 10, 30 (spans 0-10 at 4000, 10-30 at 2000), another domain's
        // ignored; intervals 0-5, 5-20, 20-40.
        let samples = [f(0, 9.0), f(10, 4000.0), f(30, 2000.0)];
        let other = FrequencySample {
            domain: 4,
            ..f(20, 1.0)
        };
        let mut all = samples.to_vec();
        all.push(other);
        let got = interval_frequency(&[0, 5, 20, 40], 3, &all);
        assert_eq!(got[0], 4000.0);
        // 5 ns at 4000, 10 ns at 2000.
        assert!((got[1] - (5.0 * 4000.0 + 10.0 * 2000.0) / 15.0).abs() < 1e-9);
        // 10 ns at 2000; 30-40 has no sample: the covered part counts.
        assert_eq!(got[2], 2000.0);
        // Beyond the samples: NaN, not a guess.
        let got = interval_frequency(&[0, 30, 50, 60], 3, &samples);
        assert!(got[2].is_nan(), "{got:?}");
        // One sample spans nothing.
        assert!(interval_frequency(&[0, 5], 3, &samples[..1]).is_empty());
        // Impossible values are no readings (NaN, negative, a corrupt 1e300).
        let bad = [
            f(0, 2000.0),
            f(10, 1e300),
            f(20, f64::NAN),
            f(30, -5.0),
            f(40, 2000.0),
        ];
        let got = interval_frequency(&[0, 40], 3, &bad);
        assert_eq!(got, vec![2000.0]);
    }

    #[test]
    fn finder_agrees_with_plain_binary_search_on_irregular_times() {
        let t = [5u64, 6, 7, 100, 101, 1000, 1001, 1002, 5000];
        let f = IntervalFinder::new(&t);
        for s in 5..5000 {
            let want = t.partition_point(|&x| x <= s) - 1;
            assert_eq!(f.find(&t, s), want, "s = {s}");
        }
    }

    proptest! {
        /// The assignment conserves task time: per type, the column sums equal the tasks'
        /// durations clipped to [first sample, last sample].
        #[test]
        fn clipping_conserves_task_time(
            gaps in prop::collection::vec(1u64..500, 1..40),
            t0 in 0u64..1000,
            tasks in prop::collection::vec((0u32..3, 0u32..3, 0u64..12_000, 0u64..3000), 0..200),
            key in prop::sample::select(KeyKind::ALL.to_vec()),
        ) {
            let mut times = vec![t0];
            for g in &gaps {
                times.push(times.last().unwrap() + g);
            }
            let e: Vec<f64> = (0..times.len()).map(|i| i as f64).collect();
            let samples = samples_for(0, &times, &e);
            let domains = [domain_info(0, Domain::Psys, &[0, 1])];
            let cl = codelets();
            let parts = TraceParts::new(&domains, &samples, &cl);
            let recs: Vec<TaskRecord> = tasks
                .iter()
                .map(|&(c, w, s, d)| {
                    let mut r = task(c, w, s, s + d);
                    r.footprint = u64::from(c) << (d % 7);
                    r
                })
                .collect();
            let sys = TraceSystems::build(&parts, recs.iter(), key).unwrap();
            let d = &sys.domains[0];
            let (lo, hi) = (times[0], *times.last().unwrap());
            let names = names_by_id(&cl);
            let mut want: HashMap<TypeKey, u64> = HashMap::new();
            for r in recs.iter().filter(|r| r.worker < 2) {
                let clipped = r.end.0.min(hi).saturating_sub(r.start.0.max(lo));
                *want.entry(key.key_of(r, &names)).or_default() += clipped;
            }
            for c in d.columns() {
                let got: u64 = c.time_ns().iter().sum();
                prop_assert_eq!(got, want.get(&c.key).copied().unwrap_or(0), "{}", c.key);
                prop_assert_eq!(got, c.stats.clipped_ns);
                // No interval holds more of a type than its workers could run.
                for (i, &v) in c.time_ns().iter().enumerate() {
                    prop_assert!(v <= 200 * (times[i + 1] - times[i]));
                }
            }
            let seen: u64 = want.values().sum();
            let total: u64 = d.columns().iter().flat_map(|c| c.time_ns()).sum();
            prop_assert_eq!(total, seen);
        }
    }
}
