//! Occupancy columns: how busy a domain was while each task type ran.
//!
//! On a real package a task's power depends on what runs beside it (shared uncore and
//! voltage regulator, turbo bins that fall as cores fill, power limits): with `k` of the
//! domain's workers busy, each task draws about `(1 − c·(k − 1))` of its power alone
//! (docs/attribution.md, "Contention"). The fit needs, per interval `i` and type `k`, the
//! time the type ran weighted by the number of *other* tasks running beside it:
//!
//! ```text
//! U_ik = ∫_i n_k(t) · (k(t) − 1) dt      (k(t) ≥ 1 while a task of type k runs)
//! ```
//!
//! so that the type's energy in the interval is `p_k · (T_ik − c · U_ik)`. `U` needs every
//! task of the domain in time order: the build pass keeps each task's span and type
//! ([`Spans`], 20 bytes a task, up to [`OCCUPANCY_MAX_TASKS`] per domain), and a sweep
//! over them afterwards fills the columns, exactly, cut at the interval boundaries like the
//! task time. Cost: a sort of the spans (usually nearly sorted already) and, per change of
//! the running set, one add per running type and interval crossed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

/// Tasks per domain up to which the occupancy columns are built (the spans take 20 bytes
/// each while the systems are built); past it the fit does without them and says so.
pub const OCCUPANCY_MAX_TASKS: usize = 4_000_000;

/// How busy a domain was over its sampled window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    /// Whether the per-type occupancy columns were built.
    pub built: bool,
    /// Why not, when they were not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Time inside the sampled window with `k` tasks running, ns, by `k` (index 0: none).
    pub time_by_k_ns: Vec<u64>,
}

impl Occupancy {
    /// The most tasks that ran at once inside the window.
    pub fn max_k(&self) -> usize {
        self.time_by_k_ns.iter().rposition(|&t| t > 0).unwrap_or(0)
    }

    /// Mean number of tasks running while at least one runs.
    pub fn mean_busy_k(&self) -> f64 {
        let (mut w, mut t) = (0.0, 0.0);
        for (k, &ns) in self.time_by_k_ns.iter().enumerate().skip(1) {
            w += k as f64 * ns as f64;
            t += ns as f64;
        }
        if t > 0.0 {
            w / t
        } else {
            0.0
        }
    }
}

/// One domain's tasks as the build pass saw them: `(start, end, column)`.
pub(crate) struct Spans {
    spans: Vec<(u64, u64, u32)>,
    limit: usize,
    overflow: bool,
}

impl Spans {
    /// Up to [`OCCUPANCY_MAX_TASKS`] tasks.
    pub(crate) fn new() -> Spans {
        Self::with_limit(OCCUPANCY_MAX_TASKS)
    }

    pub(crate) fn with_limit(limit: usize) -> Spans {
        Spans {
            spans: Vec::new(),
            limit,
            overflow: false,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, start: u64, end: u64, col: usize) {
        if self.overflow {
            return;
        }
        if self.spans.len() >= self.limit {
            self.overflow = true;
            self.spans = Vec::new();
            return;
        }
        self.spans.push((start, end, col as u32));
    }

    pub(crate) fn overflowed(&self) -> bool {
        self.overflow
    }
}

/// What the sweep gives one domain.
pub(crate) struct Swept {
    /// Per column, `U` per interval, ns.
    pub(crate) columns: Vec<Vec<u64>>,
    /// Per column, `U` over all time (inside the window or not), ns.
    pub(crate) totals: Vec<u64>,
    /// Per region and column, `U` inside the region's spans, ns.
    pub(crate) regions: Vec<Vec<u64>>,
    /// Time inside the window with `k` tasks running, ns.
    pub(crate) time_by_k_ns: Vec<u64>,
}

/// Adds `f(i, len)` for every interval piece of `[a, b)` inside the window `t`. `cur` is
/// an interval at or before `a`'s (the sweep's time only grows, so it walks forward from
/// where the last call left it instead of searching).
#[inline]
fn pieces(t: &[u64], cur: &mut usize, a: u64, b: u64, mut f: impl FnMut(usize, u64)) {
    let n = t.len();
    if n < 2 {
        return;
    }
    let (a, b) = (a.max(t[0]), b.min(t[n - 1]));
    if a >= b {
        return;
    }
    let mut i = *cur;
    while i + 2 < n && t[i + 1] <= a {
        i += 1;
    }
    *cur = i;
    let mut from = a;
    while from < b {
        let to = b.min(t[i + 1]);
        f(i, to - from);
        from = to;
        i += 1;
    }
}

/// Sweeps `spans` in time order: per column the occupancy-weighted time per interval of
/// `t` (sample times), per region (`region_spans`) and column the same inside the region.
pub(crate) fn sweep(
    mut spans: Spans,
    t: &[u64],
    ncols: usize,
    region_spans: &[Vec<(u64, u64)>],
) -> Swept {
    let intervals = t.len().saturating_sub(1);
    let mut out = Swept {
        columns: vec![vec![0; intervals]; ncols],
        totals: vec![0; ncols],
        regions: vec![vec![0; ncols]; region_spans.len()],
        time_by_k_ns: vec![0],
    };
    let v = &mut spans.spans;
    if !v.is_sorted_by_key(|s| s.0) {
        // Stable: the tasks arrive as sorted runs (each worker's flushes in time order),
        // which the stable sort merges where the unstable one partitions afresh.
        v.sort_by_key(|s| s.0);
    }
    let mut running: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut count = vec![0u32; ncols];
    // Columns with a running task, and each one's place in `active`.
    let mut active: Vec<u32> = Vec::new();
    let mut place = vec![usize::MAX; ncols];
    let mut next_start = 0usize;
    let mut now = v.first().map_or(0, |s| s.0);
    let mut cur = 0usize;
    loop {
        let start_at = v.get(next_start).map(|s| s.0);
        let end_at = running.peek().map(|Reverse((e, _))| *e);
        let next = match (start_at, end_at) {
            (Some(s), Some(e)) => s.min(e),
            (Some(s), None) => s,
            (None, Some(e)) => e,
            (None, None) => break,
        };
        let k = running.len();
        if next > now && k > 0 {
            if out.time_by_k_ns.len() <= k {
                out.time_by_k_ns.resize(k + 1, 0);
            }
            let by_k = &mut out.time_by_k_ns[k];
            if k >= 2 {
                let others = (k - 1) as u64;
                for &c in &active {
                    out.totals[c as usize] += u64::from(count[c as usize]) * others * (next - now);
                }
                let columns = &mut out.columns;
                pieces(t, &mut cur, now, next, |i, len| {
                    *by_k += len;
                    for &c in &active {
                        columns[c as usize][i] += u64::from(count[c as usize]) * others * len;
                    }
                });
                for (r, rs) in region_spans.iter().enumerate() {
                    for &(a, b) in rs {
                        let len = next.min(b).saturating_sub(now.max(a));
                        if len > 0 {
                            for &c in &active {
                                out.regions[r][c as usize] +=
                                    u64::from(count[c as usize]) * others * len;
                            }
                        }
                    }
                }
            } else {
                pieces(t, &mut cur, now, next, |_, len| *by_k += len);
            }
        }
        now = next;
        // Ends first: a task ending when another starts does not run beside it.
        while let Some(&Reverse((e, c))) = running.peek() {
            if e > now {
                break;
            }
            running.pop();
            let c = c as usize;
            count[c] -= 1;
            if count[c] == 0 {
                let at = place[c];
                active.swap_remove(at);
                if let Some(&moved) = active.get(at) {
                    place[moved as usize] = at;
                }
                place[c] = usize::MAX;
            }
        }
        while let Some(&(s, e, c)) = v.get(next_start) {
            if s > now {
                break;
            }
            next_start += 1;
            if e <= s {
                continue;
            }
            running.push(Reverse((e, c)));
            let cu = c as usize;
            if count[cu] == 0 {
                place[cu] = active.len();
                active.push(c);
            }
            count[cu] += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(v: &[(u64, u64, usize)]) -> Spans {
        let mut s = Spans::new();
        for &(a, b, c) in v {
            s.push(a, b, c);
        }
        s
    }

    #[test]
    fn weights_each_type_by_the_tasks_beside_it() {
        // Intervals [0,100), [100,200). Type 0 on [0,150), type 1 on [50,200), type 0
        // again on [120,180).
        let t = [0, 100, 200];
        let s = spans(&[(120, 180, 0), (0, 150, 0), (50, 200, 1)]);
        let out = sweep(s, &t, 2, &[vec![(0, 100)]]);
        // Type 0: [50,120) one other (70), [120,150) two tasks of type 0 each with two
        // others (2*2*30 = 120), [150,180) one other (30).
        // In interval 0: [50,100) one other = 50; interval 1: 20 + 120 + 30 = 170.
        assert_eq!(out.columns[0], vec![50, 170]);
        // Type 1: [50,120) one other (70), [120,150) two others (60), [150,180) one (30).
        assert_eq!(out.columns[1], vec![50, 110]);
        assert_eq!(out.totals, vec![220, 160]);
        assert_eq!(out.regions[0], vec![50, 50]);
        // Time with k running: k=1 [0,50) and [180,200); k=2 [50,120) and [150,180);
        // k=3 [120,150).
        assert_eq!(out.time_by_k_ns, vec![0, 70, 100, 30]);
    }

    #[test]
    fn touching_tasks_do_not_overlap_and_the_window_clips() {
        let t = [100, 200];
        let s = spans(&[(0, 150, 0), (150, 300, 0), (150, 150, 1)]);
        let out = sweep(s, &t, 2, &[]);
        assert_eq!(out.columns[0], vec![0]);
        assert_eq!(out.time_by_k_ns, vec![0, 100]);
    }

    #[test]
    fn past_the_limit_the_spans_are_dropped_not_stored() {
        let mut s = Spans::with_limit(5);
        for i in 0..5 {
            s.push(i, i + 1, 0);
        }
        assert!(!s.overflowed());
        s.push(9, 10, 0);
        assert!(s.overflowed() && s.spans.capacity() == 0);
    }
}
