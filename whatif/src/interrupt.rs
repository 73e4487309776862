//! Tasks interrupted for far longer than they run (a preemption on a loaded machine): the
//! replay keeps their recorded durations, the replicas' draws leave them out.

use std::collections::HashMap;

use taskwatt_traces::Arch;

use crate::Graph;

/// How many times its type's median a task's duration must reach to count as an
/// interruption rather than the type's own variability ([`Graph::interruptions`]).
pub const INTERRUPTION: f64 = 20.0;

pub(crate) fn is_interruption(dev: f64, median: f64) -> bool {
    median > 0.0 && dev > INTERRUPTION * median
}

pub(crate) fn median_of(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

impl Graph {
    /// The tasks whose duration is over [`INTERRUPTION`] times their type's median on
    /// their architecture, per codelet: `(codelet, count, longest ns, median ns)`. They
    /// are left out of the replicas' draws (a preemption, not the type's variability).
    pub fn interruptions(&self) -> Vec<(String, usize, u64, u64)> {
        let mut by: HashMap<(u32, Arch), Vec<u64>> = HashMap::new();
        for t in &self.tasks {
            by.entry((t.codelet, t.arch))
                .or_default()
                .push(t.duration_ns);
        }
        let mut out = Vec::new();
        for ((c, _), mut d) in by {
            d.sort_unstable();
            let median = d[d.len() / 2];
            let long: Vec<u64> = d
                .iter()
                .copied()
                .filter(|&x| median > 0 && x as f64 > INTERRUPTION * median as f64)
                .collect();
            if let Some(&max) = long.last() {
                out.push((self.codelet_name(c).to_owned(), long.len(), max, median));
            }
        }
        out.sort();
        out
    }
}
