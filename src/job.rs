//! A merged distributed run's energy per node and per task type over the nodes: the
//! `job` that `taskwatt report` prints (and `--json` gives) for the trace `taskwatt merge`
//! writes, and that [`crate::DistReport`]'s energy report ends with.

use taskwatt_energy::attribution::Attribution;
use taskwatt_traces::Trace;

/// A merged job's summary (`report` on the trace `taskwatt merge` writes): its energy per
/// node and per type over every node.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Job {
    /// Ranks in the job.
    pub ranks: usize,
    /// The nodes' energy together, J.
    pub measured_j: f64,
    /// Per node.
    pub nodes: Vec<JobNode>,
    /// Per task type, over every node.
    pub types: Vec<JobType>,
}

/// One node of a [`Job`].
#[derive(Clone, Debug, serde::Serialize)]
pub struct JobNode {
    /// Its name.
    pub node: String,
    /// Its packages', DRAM's and GPUs' energy (psys on a node without a package), J.
    pub measured_j: f64,
    /// (domain, J measured).
    pub domains: Vec<(String, f64)>,
    /// Domains inside the others (core and uncore in their package, psys beside a
    /// package): not added to `measured_j` nor to the types' energies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_added: Vec<String>,
}

/// One task type of a [`Job`], over its nodes.
#[derive(Clone, Debug, serde::Serialize)]
pub struct JobType {
    /// The type (`codelet@arch`).
    pub key: String,
    /// Its tasks.
    pub count: u64,
    /// Its energy with its base share, J.
    pub energy_j: f64,
    /// Half-width of the 95 % interval, J (the nodes' power intervals, taken as
    /// independent); `None` where a node's power has none (not identifiable).
    pub half95_j: Option<f64>,
    /// Every domain's power of the type is shown as a measurement; otherwise its energy
    /// rests on a flagged power (collinear, imprecise...), and the text puts it in
    /// parentheses as the domains' tables do.
    pub reliable: bool,
}

/// The job of a merged trace and its attribution: `None` for a trace without ranks.
pub fn job_of(trace: &Trace, att: &Attribution) -> Option<Job> {
    use std::collections::BTreeMap;
    if trace.comms.is_empty() {
        return None;
    }
    let node_of_worker: std::collections::HashMap<u32, &str> = trace
        .comms
        .iter()
        .flat_map(|c| c.workers.iter().map(move |&w| (w, c.node.as_str())))
        .collect();
    let node_of = |id: u16| -> String {
        trace
            .domains
            .iter()
            .find(|d| d.id == id)
            .and_then(|d| d.workers.first())
            .and_then(|w| node_of_worker.get(w))
            .map_or_else(|| "?".to_owned(), |n| (*n).to_owned())
    };
    let added = added_domains(
        &att.report
            .domains
            .iter()
            .map(|d| (d.domain, node_of(d.id)))
            .collect::<Vec<_>>(),
    );
    let mut nodes: BTreeMap<String, Vec<(String, f64, bool)>> = BTreeMap::new();
    // Per type: count, J, variance of the J (`None` once a power has no interval), every
    // power reliable.
    let mut types: BTreeMap<String, (u64, f64, Option<f64>, bool)> = BTreeMap::new();
    // A node's domains see the same tasks: a type's count per node is its largest.
    let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (d, &counts_in) in att.report.domains.iter().zip(&added) {
        let node = node_of(d.id);
        nodes.entry(node.clone()).or_default().push((
            d.domain.to_string(),
            d.measured_j,
            counts_in,
        ));
        if !counts_in {
            continue;
        }
        for t in &d.types {
            let c = counts.entry((node.clone(), t.key.to_string())).or_default();
            *c = (*c).max(t.count);
            let e = types
                .entry(t.key.to_string())
                .or_insert((0, 0.0, Some(0.0), true));
            e.1 += t.total_j;
            e.3 &= t.power.reliable;
            let h = t.power.ci95_w.map(|[lo, hi]| 0.5 * (hi - lo) * t.busy_s);
            e.2 = e.2.zip(h).map(|(v, h)| v + h * h);
        }
    }
    for ((_, k), c) in counts {
        types.entry(k).or_insert((0, 0.0, Some(0.0), true)).0 += c;
    }
    // A rank's own trace holds its start's Comms chunk and its end's: count ranks once.
    let ranks = trace
        .comms
        .iter()
        .map(|c| c.rank)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let nodes: Vec<JobNode> = nodes
        .into_iter()
        .map(|(node, domains)| JobNode {
            node,
            measured_j: domains.iter().filter(|d| d.2).map(|d| d.1).sum(),
            not_added: domains
                .iter()
                .filter(|d| !d.2)
                .map(|d| d.0.clone())
                .collect(),
            domains: domains.into_iter().map(|(d, j, _)| (d, j)).collect(),
        })
        .collect();
    Some(Job {
        ranks,
        measured_j: nodes.iter().map(|n| n.measured_j).sum(),
        nodes,
        types: types
            .into_iter()
            .map(|(key, (count, energy_j, var, reliable))| JobType {
                key,
                count,
                energy_j,
                half95_j: var.map(f64::sqrt),
                reliable,
            })
            .collect(),
    })
}

/// Which domains a node's total adds, each `(domain, node)`: its packages, DRAM and GPUs;
/// psys only on a node without a package (it covers them); core and uncore never (they
/// are inside their package). Summed as they came, a node with RAPL's core domain would
/// count that energy twice.
fn added_domains(domains: &[(taskwatt_traces::Domain, String)]) -> Vec<bool> {
    use taskwatt_traces::Domain;
    let packaged: std::collections::BTreeSet<&str> = domains
        .iter()
        .filter(|(d, _)| matches!(d, Domain::CpuPackage { .. }))
        .map(|(_, n)| n.as_str())
        .collect();
    domains
        .iter()
        .map(|(d, node)| match d {
            Domain::CpuPackage { .. } | Domain::Dram { .. } | Domain::Gpu { .. } => true,
            Domain::Psys => !packaged.contains(node.as_str()),
            Domain::Core { .. } | Domain::Uncore { .. } => false,
        })
        .collect()
}

/// The job's summary as text (empty for a trace without ranks).
pub fn job_summary(trace: &Trace, att: &Attribution) -> String {
    job_of(trace, att).map_or_else(String::new, |j| j.text())
}

impl Job {
    /// The summary as text, starting with an empty line: the job's energy, each node's
    /// with its domains, and each type's over the nodes with its 95 % interval.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let job = self;
        let _ = writeln!(
            out,
            "\njob: {} rank(s) on {} node(s), {:.2} J measured in all",
            job.ranks,
            job.nodes.len(),
            job.measured_j
        );
        for n in &job.nodes {
            let parts: Vec<String> = n
                .domains
                .iter()
                .map(|(d, j)| {
                    let inside = if n.not_added.contains(d) {
                        ", inside the others: not added"
                    } else {
                        ""
                    };
                    format!("{d} {j:.2} J{inside}")
                })
                .collect();
            let _ = writeln!(
                out,
                "  node {}: {:.2} J ({})",
                n.node,
                n.measured_j,
                parts.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "  {:<20} {:>8} {:>12} {:>12}",
            "type (all nodes)", "count", "energy", "+-95%"
        );
        for t in &job.types {
            let j = if t.reliable {
                format!("{:.2} J", t.energy_j)
            } else {
                format!("({:.2} J)", t.energy_j)
            };
            let h = t.half95_j.map_or("-".to_owned(), |h| format!("{h:.2} J"));
            let _ = writeln!(out, "  {:<20} {:>8} {:>12} {:>12}", t.key, t.count, j, h);
        }
        if job.types.iter().any(|t| !t.reliable) {
            out.push_str(
                "  (J): rests on a power not shown as a measurement on some node (see its \
             domain's table)\n",
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::added_domains;
    use taskwatt_traces::Domain;

    #[test]
    fn a_nodes_total_adds_each_joule_once() {
        let on = |d, n: &str| (d, n.to_owned());
        let domains = [
            on(Domain::CpuPackage { id: 0 }, "a"),
            on(Domain::Core { id: 0 }, "a"),
            on(Domain::Uncore { id: 0 }, "a"),
            on(Domain::Dram { id: 0 }, "a"),
            on(Domain::Psys, "a"),
            on(Domain::Gpu { index: 0 }, "a"),
            // A node read through psys alone: psys is its total.
            on(Domain::Psys, "b"),
        ];
        assert_eq!(
            added_domains(&domains),
            [true, false, false, true, false, true, true]
        );
    }
}
