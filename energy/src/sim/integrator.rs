//! The simulated machine's integrator: the exact energy of a contended package.
//!
//! # Why every event, in time order
//! On the contended machine a task's power depends on what runs beside it: with `k` of a
//! domain's workers busy, each draws `g(k)` of its power alone (sub-additivity and turbo
//! frequencies, [`SimConfig::occupancy_factor`]). A domain's dynamic power is then
//! `cap(t)·g(k(t))·S(t)`, `S` the sum of the running tasks' powers: a product of every
//! worker's state, which no per-worker integral can give. So each worker appends its task
//! starts and ends to a ring of its own ([`Logs`]: three stores on the worker's hot path, no
//! lock), and the reader (the sampler, or a replay) drains every ring, merges the workers'
//! time-ordered runs (no sort, no allocation once warm) and integrates each domain's
//! piecewise-constant power exactly between the events.
//!
//! # Reads at update ticks
//! A counter shows its energy at its last update tick `B ≤ now`; the drained events may
//! reach past `B` (events of the current tick). Each domain keeps the energy at the tick
//! boundaries its integration crossed ([`DomainAcc::hist`]), so a read at `B` is exact
//! either way: from the state when `B` is past the last event, from the history otherwise.
//!
//! # Bounded memory
//! A worker whose ring reaches [`super::log::HELP_AT`] events drains every ring itself when
//! nobody holds the integrator (a sampler stalled for a long time, or none at all), and waits
//! for a drain when its ring is full, so memory is bounded and no event is lost.
//!
//! # Late events
//! A worker takes a task's time, then logs it. An event logged after a drain that already
//! integrated past its time (the worker was preempted between the two) is applied at the
//! time integrated to, and counted ([`Integrator::late_events`]); the shift is that
//! preemption's length.
//!
//! # What the run realised
//! Per domain and task type the integrator also keeps the time the type ran, its energy
//! at the power alone (with the per-task variation drawn) and at the occupancy and cap it
//! ran under, in O(1) per event (each type's running power times the integral of the
//! domain's factor): the truth of "power alone" and "power at the run's occupancy" that
//! reports compare against.

use std::collections::VecDeque;

use super::config::SimConfig;
use super::log::{Event, Logs};
use super::noise::SplitMix64;

/// Power channels of a worker: package, DRAM, GPU.
pub(crate) const CHANNELS: usize = 3;
/// Channel of the worker's package domain.
pub(crate) const PKG: usize = 0;
/// Channel of the worker's DRAM domain.
pub(crate) const DRAM: usize = 1;
/// Channel of the worker's GPU domain.
pub(crate) const GPU: usize = 2;

/// A worker's power code when it runs nothing.
pub(crate) const IDLE: u32 = u32::MAX;

/// `to - from` ns as a float (0 when `to` is earlier), through `i64`: one instruction, where
/// `u64 as f64` takes several on x86-64 without AVX-512, at a few conversions per event.
#[inline]
fn span(from: u64, to: u64) -> f64 {
    to.saturating_sub(from).min(i64::MAX as u64) as i64 as f64
}

/// A worker's current power.
#[derive(Clone, Copy, Debug)]
struct WorkerState {
    code: u32,
    p: [f64; CHANNELS],
}

/// One task type's account on one domain: what it ran and drew.
#[derive(Clone, Copy, Debug, Default)]
struct TypeAcc {
    /// Summed power alone of its running tasks, W, and their number.
    p: f64,
    n: u32,
    /// Domain time and factor integral when `p`/`n` last changed.
    t_mark: u64,
    f_mark: f64,
    /// ∫ p·f dt, J; ∫ p dt, J; ∫ n dt, ns.
    energy_j: f64,
    alone_j: f64,
    busy_ns: f64,
}

impl TypeAcc {
    fn flush(&mut self, t: u64, f_int: f64) {
        let dt = span(self.t_mark, t);
        self.energy_j += self.p * (f_int - self.f_mark);
        self.alone_j += self.p * dt * 1e-9;
        self.busy_ns += f64::from(self.n) * dt;
        self.t_mark = t;
        self.f_mark = f_int;
    }
}

/// One simulated domain's dynamic energy: the domain's workers' tasks, integrated exactly.
pub(crate) struct DomainAcc {
    /// The power channel it sums (package, DRAM, GPU).
    channel: usize,
    /// Occupancy factor by number of busy workers (index 0 unused).
    g: Vec<f64>,
    /// The cap's span (ns, trace clock) and factor, on package domains.
    cap: Option<(u64, u64, f64)>,
    /// Summed power alone of the running tasks, W; busy workers.
    s: f64,
    k: usize,
    /// Integrated up to `t` (ns): dynamic energy `e` (J) and `∫ f dt` (s), `f` the factor.
    t: u64,
    e: f64,
    f_int: f64,
    /// Tick boundaries' length, ns, and the energies at the boundaries crossed, newest last.
    tick: u64,
    /// The first tick boundary after `t` (kept, so that an event crossing none divides
    /// nothing).
    next_tick: u64,
    hist: VecDeque<(u64, f64)>,
    hist_cap: usize,
    /// Per power code: what the type ran and drew.
    types: Vec<TypeAcc>,
    /// ns spent with k workers busy, by k.
    occupancy_ns: Vec<f64>,
    /// Of which under the cap (package domains with a cap; else stays 0).
    capped_ns: Vec<f64>,
    /// Package domains: the cores' frequency (GHz) with k workers busy (index 0 unused;
    /// empty elsewhere), the frequency's factor under the cap, and the integrals of
    /// `k·f` and `k` over time (busy-core GHz·ns, busy-core ns): the busy-weighted mean
    /// frequency APERF/MPERF would give.
    freq: Vec<f64>,
    cap_freq: f64,
}

impl DomainAcc {
    /// The factor from `t` on, when it next changes (a cap edge) if before `to`, and whether
    /// the cap holds.
    #[inline]
    fn factor(&self, t: u64, to: u64) -> (f64, u64, bool) {
        let g = self.g[self.k.min(self.g.len() - 1)];
        match self.cap {
            Some((from, _, _)) if t < from => (g, to.min(from), false),
            Some((_, until, c)) if t < until => (g * c, to.min(until), true),
            _ => (g, to, false),
        }
    }

    /// Dynamic energy at `b ≥ self.t` with the current state, J (no mutation).
    fn peek(&self, b: u64) -> f64 {
        let (mut t, mut e) = (self.t, self.e);
        while t < b {
            let (f, end, _) = self.factor(t, b);
            e += self.s * f * span(t, end) * 1e-9;
            t = end;
        }
        e
    }

    /// The frequency from `t` on with the current state (GHz), and when it next changes.
    #[inline]
    fn frequency(&self, t: u64, to: u64) -> (f64, u64) {
        let f = self.freq[self.k.min(self.freq.len() - 1)];
        match self.cap {
            Some((from, _, _)) if t < from => (f, to.min(from)),
            Some((_, until, _)) if t < until => (f * self.cap_freq, to.min(until)),
            _ => (f, to),
        }
    }

    /// Adds the frequency integrals from `self.t` to `to` (state unchanged) to `(kf, k)`.
    fn frequency_integrals(&self, to: u64, kf: &mut f64, k: &mut f64) {
        if self.freq.is_empty() || self.k == 0 {
            return;
        }
        let mut t = self.t;
        while t < to {
            let (f, end) = self.frequency(t, to);
            let w = self.k as f64 * span(t, end);
            *kf += w * f;
            *k += w;
            t = end;
        }
    }

    /// The integrals of `k·f` and `k` from the start up to `b ≥ self.t` (no mutation):
    /// from the time spent at each occupancy (kept per event anyway), O(workers) per read
    /// rather than a frequency integral per event.
    pub(crate) fn frequency_at(&self, b: u64) -> (f64, f64) {
        let (mut kf, mut k) = (0.0, 0.0);
        if self.freq.is_empty() {
            return (kf, k);
        }
        for (n, (free, capped)) in self.occupancy_ns.iter().zip(&self.capped_ns).enumerate() {
            let f = self.freq[n.min(self.freq.len() - 1)];
            kf += n as f64 * f * (free + self.cap_freq * capped);
            k += n as f64 * (free + capped);
        }
        self.frequency_integrals(b, &mut kf, &mut k);
        (kf, k)
    }

    /// Whether this domain models the cores' frequency (a package domain).
    #[cfg(test)]
    pub(crate) fn has_frequency(&self) -> bool {
        !self.freq.is_empty()
    }

    /// Integrated up to, ns.
    pub(crate) fn integrated_to(&self) -> u64 {
        self.t
    }

    /// Integrates the current state up to `to`, keeping the tick boundaries crossed.
    fn advance(&mut self, to: u64) {
        if to <= self.t {
            return;
        }
        while self.t < to {
            let (f, end, capped) = self.factor(self.t, to);
            let rate = self.s * f * 1e-9;
            let first = self.next_tick;
            if first <= end {
                let last = end / self.tick * self.tick;
                let keep = self.hist_cap as u64 - 1;
                let from = first.max(last.saturating_sub(keep * self.tick));
                let mut b = from;
                while b <= last {
                    if self.hist.len() == self.hist_cap {
                        self.hist.pop_front();
                    }
                    self.hist.push_back((b, self.e + rate * span(self.t, b)));
                    b += self.tick;
                }
            }
            let dt = span(self.t, end);
            self.e += rate * dt;
            self.f_int += f * dt * 1e-9;
            if self.k < self.occupancy_ns.len() {
                if capped {
                    self.capped_ns[self.k] += dt;
                } else {
                    self.occupancy_ns[self.k] += dt;
                }
            }
            self.t = end;
            if first <= end {
                self.next_tick = (end / self.tick + 1).saturating_mul(self.tick);
            }
        }
    }

    /// Dynamic energy at tick boundary `b`, J: `Ok` exact, `Err` the nearest kept value
    /// when the boundary's history was overwritten.
    pub(crate) fn energy_at(&self, b: u64) -> Result<f64, f64> {
        if b >= self.t {
            return Ok(self.peek(b));
        }
        match self.hist.iter().rev().find(|(hb, _)| *hb <= b) {
            Some(&(hb, e)) if hb == b => Ok(e),
            Some(&(_, e)) => Err(e),
            None => Err(self.hist.front().map_or(0.0, |h| h.1)),
        }
    }

    fn account(&mut self, code: u32, p: f64, start: bool) {
        let Some(acc) = self.types.get_mut(code as usize) else {
            return;
        };
        acc.flush(self.t, self.f_int);
        if start {
            acc.p += p;
            acc.n += 1;
        } else {
            acc.p -= p;
            acc.n = acc.n.saturating_sub(1);
            if acc.n == 0 {
                acc.p = 0.0; // no rounding residue once idle
            }
        }
    }
}

/// What one domain realised, per power code: `(code, busy s, mean power alone W, mean power
/// at the run's occupancy W)`, and the time with `k` workers busy, s.
pub(crate) struct RealisedAcc {
    pub(crate) types: Vec<(u32, f64, f64, f64)>,
    pub(crate) occupancy_s: Vec<f64>,
    pub(crate) factors: Vec<f64>,
}

/// The integrator: every domain's state, fed the workers' logs in time order.
pub(crate) struct Integrator {
    workers: Vec<WorkerState>,
    /// Domains covering each worker.
    cover: Vec<Vec<usize>>,
    pub(crate) domains: Vec<DomainAcc>,
    /// Powers alone by code (`None`: a codelet not registered yet).
    table: Vec<Option<[f64; CHANNELS]>>,
    /// Powers of unregistered codes, by arch index.
    default: [[f64; CHANNELS]; 2],
    /// Codelet names by id (for the truth).
    names: Vec<Option<String>>,
    seed: u64,
    variation: f64,
    /// Each worker's drained events, and the merge's position in each.
    runs: Vec<Vec<Event>>,
    pos: Vec<usize>,
    late: u64,
    unregistered: u64,
}

/// What the meter gives the integrator about one domain.
pub(crate) struct DomainSetup {
    pub(crate) channel: usize,
    pub(crate) workers: Vec<usize>,
    pub(crate) tick_ns: u64,
    pub(crate) hist_cap: usize,
    /// Occupancy factor by busy workers, index 0 unused.
    pub(crate) g: Vec<f64>,
    pub(crate) cap: Option<(u64, u64, f64)>,
    /// Package domains: the frequency with k workers busy, GHz (index 0 unused), and its
    /// factor under the cap; empty and 1 elsewhere.
    pub(crate) freq: Vec<f64>,
    pub(crate) cap_freq: f64,
}

impl Integrator {
    /// `codes` power codes (see [`super::observer`]); `workers` worker slots.
    pub(crate) fn new(
        config: &SimConfig,
        seed: u64,
        t0: u64,
        workers: usize,
        codes: usize,
        setups: Vec<DomainSetup>,
    ) -> Integrator {
        let mut cover = vec![Vec::new(); workers];
        let domains = setups
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                for &w in &s.workers {
                    if w < workers {
                        cover[w].push(i);
                    }
                }
                DomainAcc {
                    channel: s.channel,
                    occupancy_ns: vec![0.0; s.workers.len() + 1],
                    capped_ns: vec![0.0; s.workers.len() + 1],
                    g: s.g,
                    cap: s.cap,
                    freq: s.freq,
                    cap_freq: s.cap_freq,
                    s: 0.0,
                    k: 0,
                    t: t0,
                    e: 0.0,
                    f_int: 0.0,
                    tick: s.tick_ns.max(1),
                    next_tick: (t0 / s.tick_ns.max(1) + 1).saturating_mul(s.tick_ns.max(1)),
                    hist: VecDeque::with_capacity(s.hist_cap),
                    hist_cap: s.hist_cap.max(2),
                    types: vec![
                        TypeAcc {
                            t_mark: t0,
                            ..TypeAcc::default()
                        };
                        codes
                    ],
                }
            })
            .collect();
        Integrator {
            workers: vec![
                WorkerState {
                    code: IDLE,
                    p: [0.0; CHANNELS],
                };
                workers
            ],
            cover,
            domains,
            table: vec![None; codes],
            names: Vec::new(),
            default: [
                config.default_power(taskwatt_traces::Arch::Cpu).channels(),
                config.default_power(taskwatt_traces::Arch::Gpu).channels(),
            ],
            seed,
            variation: config.variation(),
            runs: Vec::new(),
            pos: Vec::new(),
            late: 0,
            unregistered: 0,
        }
    }

    /// Sets the powers alone of power code `code`.
    pub(crate) fn set_powers(&mut self, code: usize, p: [f64; CHANNELS]) {
        if let Some(slot) = self.table.get_mut(code) {
            *slot = Some(p);
        }
    }

    /// Names codelet `id`.
    pub(crate) fn set_name(&mut self, id: usize, name: &str) {
        if id >= self.names.len() {
            self.names.resize(id + 1, None);
        }
        self.names[id] = Some(name.to_owned());
    }

    /// The codelet name and architecture of power code `code`, when registered.
    pub(crate) fn describe_code(&self, code: u32) -> Option<(String, taskwatt_traces::Arch)> {
        let name = self.names.get((code / 2) as usize)?.clone()?;
        let arch = taskwatt_traces::Arch::ALL[(code & 1) as usize];
        Some((name, arch))
    }

    /// Events applied at a later time than theirs (see the module docs).
    pub(crate) fn late_events(&self) -> u64 {
        self.late
    }

    /// Task starts whose codelet was never registered (given the default power).
    pub(crate) fn unregistered_events(&self) -> u64 {
        self.unregistered
    }

    /// Drains every log and applies the events in time order.
    pub(crate) fn drain(&mut self, logs: &Logs) {
        let n = logs.len().min(self.workers.len());
        let mut runs = std::mem::take(&mut self.runs);
        runs.resize_with(n, Vec::new);
        for (w, run) in runs.iter_mut().enumerate() {
            run.clear();
            logs.take(w, run);
            // A worker logs in time order; events pushed otherwise (a caller of the public
            // observer) are put in order, keeping equal times as logged.
            if !run.is_sorted_by_key(|e| e.t) {
                run.sort_by_key(|e| e.t);
            }
        }
        let mut pos = std::mem::take(&mut self.pos);
        pos.clear();
        pos.resize(n, 0);
        // Merge by time, the lower worker first at equal times.
        if n <= 8 {
            loop {
                let mut best: Option<(u64, usize)> = None;
                for (w, run) in runs.iter().enumerate() {
                    if let Some(e) = run.get(pos[w]) {
                        if best.is_none_or(|(t, _)| e.t < t) {
                            best = Some((e.t, w));
                        }
                    }
                }
                let Some((t, w)) = best else { break };
                let code = runs[w][pos[w]].code;
                pos[w] += 1;
                self.apply(t, w, code);
            }
        } else {
            let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> = runs
                .iter()
                .enumerate()
                .filter_map(|(w, run)| run.first().map(|e| std::cmp::Reverse((e.t, w))))
                .collect();
            while let Some(std::cmp::Reverse((t, w))) = heap.pop() {
                let code = runs[w][pos[w]].code;
                pos[w] += 1;
                if let Some(e) = runs[w].get(pos[w]) {
                    heap.push(std::cmp::Reverse((e.t, w)));
                }
                self.apply(t, w, code);
            }
        }
        self.runs = runs;
        self.pos = pos;
    }

    /// The per-task multiplier of a task started by worker `w` at `t`.
    fn multiplier(&self, w: usize, t: u64) -> f64 {
        if self.variation == 0.0 {
            return 1.0;
        }
        let mut r = SplitMix64::new(
            self.seed ^ (w as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ t.rotate_left(17),
        );
        (1.0 + self.variation * r.next_near_normal().clamp(-3.0, 3.0)).max(0.0)
    }

    fn apply(&mut self, t: u64, w: usize, code: u32) {
        let old = self.workers[w];
        let p = if code == IDLE {
            [0.0; CHANNELS]
        } else {
            let alone = match self.table.get(code as usize).copied().flatten() {
                Some(p) => p,
                None => {
                    self.unregistered += 1;
                    self.default[(code & 1) as usize]
                }
            };
            let m = self.multiplier(w, t);
            alone.map(|x| x * m)
        };
        for &di in &self.cover[w] {
            let d = &mut self.domains[di];
            let at = if t < d.t {
                self.late += 1;
                d.t
            } else {
                t
            };
            d.advance(at);
            let ch = d.channel;
            if old.code != IDLE {
                d.account(old.code, old.p[ch], false);
                d.s -= old.p[ch];
                d.k = d.k.saturating_sub(1);
            }
            if code != IDLE {
                d.account(code, p[ch], true);
                d.s += p[ch];
                d.k += 1;
            }
            if d.k == 0 {
                d.s = 0.0; // no rounding residue once idle
            }
        }
        self.workers[w] = WorkerState { code, p };
    }

    /// What domain `i` realised up to `t`.
    pub(crate) fn realised(&mut self, i: usize, t: u64) -> RealisedAcc {
        let d = &mut self.domains[i];
        d.advance(t);
        let (now, f_int) = (d.t, d.f_int);
        let mut types = Vec::new();
        for (code, acc) in d.types.iter_mut().enumerate() {
            acc.flush(now, f_int);
            if acc.busy_ns > 0.0 {
                let busy_s = acc.busy_ns * 1e-9;
                types.push((
                    code as u32,
                    busy_s,
                    acc.alone_j / busy_s,
                    acc.energy_j / busy_s,
                ));
            }
        }
        RealisedAcc {
            types,
            occupancy_s: (d.occupancy_ns.iter().zip(&d.capped_ns))
                .map(|(free, capped)| (free + capped) * 1e-9)
                .collect(),
            factors: d.g.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::log::Pushed;
    use super::*;

    const MS: u64 = 1_000_000;

    fn setup(g: Vec<f64>, cap: Option<(u64, u64, f64)>) -> Integrator {
        let mut c = SimConfig::default();
        c.tasks.variation = 0.0;
        let mut i = Integrator::new(
            &c,
            1,
            0,
            3,
            4,
            vec![DomainSetup {
                channel: 0,
                workers: vec![0, 1, 2],
                tick_ns: MS,
                hist_cap: 4,
                g,
                cap,
                freq: vec![0.0, 4.0, 3.8, 3.6],
                cap_freq: 0.5,
            }],
        );
        i.set_powers(0, [10.0, 0.0, 0.0]);
        i.set_powers(2, [20.0, 0.0, 0.0]);
        i
    }

    #[test]
    fn occupancy_scales_every_running_task() {
        // g(1) = 1, g(2) = 0.9, g(3) = 0.8.
        let mut i = setup(vec![1.0, 1.0, 0.9, 0.8], None);
        i.apply(0, 0, 0); // 10 W from 0
        i.apply(2 * MS, 1, 2); // 20 W from 2 ms
        i.apply(4 * MS, 2, 0); // 10 W from 4 ms
        i.apply(6 * MS, 0, IDLE);
        // 0-2 ms: 10 W; 2-4: 30 * 0.9; 4-6: 40 * 0.8; 6-8: 30 * 0.9.
        let want = (10.0 * 2.0 + 27.0 * 2.0 + 32.0 * 2.0 + 27.0 * 2.0) * 1e-3;
        let e = i.domains[0].energy_at(8 * MS).unwrap();
        assert!((e - want).abs() < 1e-12, "{e} vs {want}");
        // A boundary crossed by the integration is kept exactly.
        i.apply(9 * MS + 500_000, 1, IDLE);
        let at8 = i.domains[0].energy_at(8 * MS).unwrap();
        assert!((at8 - want).abs() < 1e-12, "{at8} vs {want}");
        // What the run realised: code 0 (two tasks) ran 0-6 ms and 4-... ms.
        let r = i.realised(0, 10 * MS);
        let c0 = r.types.iter().find(|t| t.0 == 0).unwrap();
        assert!((c0.2 - 10.0).abs() < 1e-9, "alone {}", c0.2);
        assert!(c0.3 < 10.0 && c0.3 > 8.0, "at run {}", c0.3);
    }

    #[test]
    fn a_cap_scales_the_power_inside_its_span() {
        let mut i = setup(vec![1.0; 4], Some((2 * MS, 4 * MS, 0.5)));
        i.apply(0, 0, 0);
        let e = i.domains[0].energy_at(6 * MS).unwrap();
        let want = 10.0 * (2.0 + 1.0 + 2.0) * 1e-3;
        assert!((e - want).abs() < 1e-12, "{e} vs {want}");
    }

    #[test]
    fn the_frequency_is_the_busy_weighted_mean_of_the_bins_and_the_cap() {
        let mut i = setup(vec![1.0; 4], Some((4 * MS, 6 * MS, 0.5)));
        // One core 0-2 ms (4.0 GHz), two 2-4 ms (3.8 GHz each), two under the cap 4-5 ms
        // (1.9 GHz), idle from 5 ms.
        i.apply(0, 0, 0);
        i.apply(2 * MS, 1, 0);
        let d = &i.domains[0];
        assert!(d.has_frequency());
        let (kf, k) = d.frequency_at(4 * MS);
        assert!((kf / k - (2.0 * 4.0 + 4.0 * 3.8) / 6.0).abs() < 1e-12);
        i.apply(5 * MS, 0, IDLE);
        i.apply(5 * MS, 1, IDLE);
        let (kf5, k5) = i.domains[0].frequency_at(8 * MS);
        assert_eq!(k5 - k, 2.0 * MS as f64, "idle time adds nothing");
        assert!(((kf5 - kf) / (k5 - k) - 1.9).abs() < 1e-12);
    }

    #[test]
    fn late_events_are_applied_at_the_integrated_time_and_counted() {
        let mut i = setup(vec![1.0; 4], None);
        i.apply(5 * MS, 0, 0);
        i.apply(3 * MS, 1, 0);
        assert_eq!(i.late_events(), 1);
        assert_eq!(i.domains[0].k, 2);
    }

    #[test]
    fn logs_drain_in_time_order_across_workers() {
        let logs = Logs::new(2);
        let mut i = setup(vec![1.0, 1.0, 0.5, 0.5], None);
        logs.push(0, Event { t: 0, code: 0 });
        logs.push(1, Event { t: MS, code: 0 });
        logs.push(
            0,
            Event {
                t: 3 * MS,
                code: IDLE,
            },
        );
        logs.push(
            1,
            Event {
                t: 4 * MS,
                code: IDLE,
            },
        );
        i.drain(&logs);
        // 0-1: 10; 1-3: 20 * 0.5; 3-4: 10.
        let want = (10.0 + 10.0 * 2.0 + 10.0) * 1e-3;
        let e = i.domains[0].energy_at(5 * MS).unwrap();
        assert!((e - want).abs() < 1e-12, "{e} vs {want}");
        assert_eq!(i.late_events(), 0);
    }

    /// Integration cost per event, two workers on a package and its DRAM, 3 µs tasks drained
    /// every 500 tasks (as the workers' rings ask): `cargo test -p taskwatt-energy --release --lib sim::integrator::tests::cost
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cost_per_event() {
        let c = SimConfig::default();
        let setup = |channel: usize| DomainSetup {
            channel,
            workers: vec![0, 1],
            tick_ns: MS,
            hist_cap: 8,
            g: vec![1.0, 1.0, 0.97],
            cap: None,
            freq: if channel == 0 {
                vec![0.0, 4.0, 3.8]
            } else {
                Vec::new()
            },
            cap_freq: 1.0,
        };
        let mut i = Integrator::new(&c, 1, 0, 2, 16, vec![setup(0), setup(1)]);
        for code in 0..16 {
            i.set_powers(code, [10.0 + code as f64, 2.0, 0.0]);
        }
        let logs = Logs::new(2);
        let tasks = 2_000_000u64;
        let per_drain = 500;
        let start = std::time::Instant::now();
        let mut t = [0u64, 1_500];
        for n in 0..tasks {
            for w in 0..2 {
                let code = ((n * 7 + w as u64) % 8 * 2) as u32;
                assert!(matches!(
                    logs.push(w, Event { t: t[w], code }),
                    Pushed::Held(_)
                ));
                t[w] += 3_000;
                let end = Event {
                    t: t[w],
                    code: IDLE,
                };
                assert!(matches!(logs.push(w, end), Pushed::Held(_)));
                t[w] += 100;
            }
            if n % per_drain == 0 {
                i.drain(&logs);
            }
        }
        i.drain(&logs);
        let ns = start.elapsed().as_nanos() as f64 / (tasks * 4) as f64;
        println!("{ns:.1} ns per event (push and integration)");
        assert!(i.domains[0].energy_at(t[0]).is_ok());
    }
}
