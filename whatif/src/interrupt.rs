//! Tasks interrupted for far longer than they run (a preemption on a loaded machine): the
//! replay keeps their recorded durations, the replicas' draws leave them out.

use std::collections::HashMap;

use taskwatt_traces::Arch;

use crate::Graph;

/// How many times its type's median a task's duration must reach to count as an
/// interruption rather than the type's own variability ([`Graph::interruptions`]).
pub const INTERRUPTION: f64 = 20.0;

impl Graph {
    /// Per task, whether its duration is over [`INTERRUPTION`] times its type's median
    /// on its architecture (the one rule the replicas' draws and the note share).
    pub(crate) fn interrupted(&self) -> Vec<bool> {
        let medians = self.medians();
        self.tasks
            .iter()
            .map(|t| {
                let m = medians[&(t.codelet, t.arch)];
                m > 0 && t.duration_ns as f64 > INTERRUPTION * m as f64
            })
            .collect()
    }

    /// The interrupted tasks (over [`INTERRUPTION`] times their type's median) per
    /// codelet: `(codelet, count, longest ns, its type's median ns)`. They are left out
    /// of the replicas' draws.
    pub fn interruptions(&self) -> Vec<(String, usize, u64, u64)> {
        let medians = self.medians();
        let mut by: HashMap<(u32, Arch), (usize, u64)> = HashMap::new();
        for (t, _) in self
            .tasks
            .iter()
            .zip(self.interrupted())
            .filter(|(_, i)| *i)
        {
            let e = by.entry((t.codelet, t.arch)).or_default();
            e.0 += 1;
            e.1 = e.1.max(t.duration_ns);
        }
        let mut out: Vec<_> = by
            .into_iter()
            .map(|((c, a), (n, max))| (self.codelet_name(c).to_owned(), n, max, medians[&(c, a)]))
            .collect();
        out.sort();
        out
    }

    /// Each (codelet, architecture)'s median duration, ns.
    fn medians(&self) -> HashMap<(u32, Arch), u64> {
        let mut by: HashMap<(u32, Arch), Vec<u64>> = HashMap::new();
        for t in &self.tasks {
            by.entry((t.codelet, t.arch))
                .or_default()
                .push(t.duration_ns);
        }
        by.into_iter()
            .map(|(k, mut d)| {
                d.sort_unstable();
                (k, d[d.len() / 2])
            })
            .collect()
    }
}
