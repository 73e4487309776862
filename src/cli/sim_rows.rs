//! `taskwatt simulate`'s rows: one simulated run per policy (`SimRow`), the verdicts its
//! intervals allow, and the table (`simulate`, `run --platform` and `compare` print them).

use taskwatt::whatif::{figures, Platform, RunFigures, TypeEnergy};

use super::sim_interval::Ranked;

/// [`super::sim_interval::verdicts`] on the rows.
pub(crate) fn ranked_verdicts(rows: &[SimRow]) -> Vec<String> {
    // The energy the table shows first, the model's, where every row has it with an
    // interval and the model covers the platform; else the platform powers' for every
    // row, said so (a CPU model on a GPU platform is a lower bound, without an interval,
    // and the energy verdict went missing).
    let model = rows.iter().any(|r| r.predicted_j.is_some());
    let by_model = model
        && rows.iter().all(|r| {
            r.predicted_j.is_some()
                && r.predicted_ci_j.is_some()
                && r.unpredicted_domains.is_empty()
        });
    let ranked: Vec<Ranked<'_>> = rows
        .iter()
        .map(|r| Ranked {
            policy: &r.policy,
            makespan: (r.figures.makespan_s, r.makespan_ci_s),
            energy: if by_model {
                (r.predicted_j, r.predicted_ci_j)
            } else {
                (r.figures.total_j, r.energy_ci_j)
            },
        })
        .collect();
    let mut lines = super::sim_interval::verdicts(&ranked);
    if model && !by_model {
        for l in &mut lines {
            if let Some(rest) = l.strip_prefix("energy: ") {
                *l = format!("energy (platform powers: the model's has no interval here): {rest}");
            }
        }
    }
    lines
}

/// One simulated run, for the tables and the JSON.
#[derive(serde::Serialize)]
pub(crate) struct SimRow {
    pub(crate) policy: String,
    /// The makespan's 95 % interval over the replicas (`None` without them), s.
    pub(crate) makespan_ci_s: Option<[f64; 2]>,
    /// The energy's, J.
    pub(crate) energy_ci_j: Option<[f64; 2]>,
    /// Replicas run for the intervals.
    pub(crate) replicas: usize,
    pub(crate) figures: RunFigures,
    pub(crate) types: Vec<TypeEnergy>,
    pub(crate) predicted_j: Option<f64>,
    /// `predicted_j`'s 95 % interval: the replicas' spread, relative, and the model's own
    /// interval for a measurement, combined (`sim_interval::combine`).
    pub(crate) predicted_ci_j: Option<[f64; 2]>,
    /// The simulated machine's domains the model has no fit of: `predicted_j` leaves them
    /// out (the platform's powers count them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unpredicted_domains: Vec<String>,
    /// Task types the energy model lacks: predicted at the base power alone (the
    /// prediction is then a lower bound).
    pub(crate) unpredicted_types: Vec<String>,
    pub(crate) tasks_per_worker: Vec<u64>,
    pub(crate) copies: u64,
    pub(crate) copied_bytes: u64,
    pub(crate) overhead_us: f64,
    /// Where the overhead came from (the platform's constant, or the recorded hand-offs).
    pub(crate) overhead_source: String,
    pub(crate) simulated_in_s: f64,
}

/// The tables of simulated runs: a banner, the recorded run, one row per policy, then
/// each run's energy per domain and per type.
pub(crate) fn render_rows(
    platform: &Platform,
    trace: &taskwatt::traces::Trace,
    rows: &[SimRow],
    model: bool,
    energy: bool,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let j = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2} J"));
    let recorded = figures(trace);
    let _ = writeln!(
        out,
        "SIMULATED in virtual time (not a run) on platform \"{}\" ({} workers: {} CPU, {} \
         GPU){}",
        platform.name,
        platform.workers().len(),
        platform.cpu_workers(),
        platform.gpus,
        match (energy, model) {
            (true, true) =>
                "; energy predicted by the fitted model, the platform's configured \
                             powers (its simulated meters) beside it",
            (true, false) =>
                "; energy from the platform's configured powers (its simulated \
                              meters), no fitted model (--energy-model gives one, as does a \
                              measured run of the app, which saves its model)",
            _ => "",
        }
    );
    // The graph's tasks, those replayed: calibration phases around it are left out.
    let windows = taskwatt::whatif::graph::graph_windows(trace);
    let all = trace.tasks().count();
    let graph = trace
        .tasks()
        .filter(|(r, _)| taskwatt::whatif::graph::in_windows(&windows, r.start.as_ns()))
        .count();
    let _ = writeln!(
        out,
        "recorded: {} under {} on {}: makespan {:.4} s (the graph's first submission to its \
         last task's end), energy {}{}",
        if graph == all {
            format!("{all} tasks")
        } else {
            format!("{graph} graph tasks (of the trace's {all}: its calibration is not replayed)")
        },
        trace.meta.policy,
        if trace.meta.host.is_empty() {
            "an unknown host"
        } else {
            trace.meta.host.as_str()
        },
        recorded.makespan_s,
        j(recorded.total_j),
        if trace.is_simulated() {
            " (simulated meter)"
        } else {
            ""
        }
    );
    // Unlike totals: the recording's GPUs' energy, where the platform has none.
    let gpu_j: f64 = recorded
        .domains
        .iter()
        .filter(|d| d.in_total && matches!(d.domain, taskwatt::traces::Domain::Gpu { .. }))
        .map(|d| d.energy_j)
        .sum();
    if platform.gpus == 0 && gpu_j > 0.0 {
        let _ = writeln!(
            out,
            "  ({gpu_j:.2} J of that on its GPUs, which this platform does not have: compare \
             the rest, {:.2} J, with the simulated energy)",
            recorded.total_j.unwrap_or(0.0) - gpu_j
        );
    }
    let _ = writeln!(out);
    // With a fitted model its prediction comes first; the platform's configured powers
    // beside it, labelled as such.
    let _ = writeln!(
        out,
        "{:<10} {:>12} {:>16} {:>16} {:>10} {:>10}",
        "policy",
        "makespan",
        if model { "energy (model)" } else { "energy" },
        if model { "platform powers" } else { "" },
        "copies",
        "host time"
    );
    for r in rows {
        let (first, second) = if model {
            let partial = if r.unpredicted_domains.is_empty() && r.unpredicted_types.is_empty() {
                ""
            } else {
                "*"
            };
            (
                format!("{}{partial}", j(r.predicted_j)),
                j(r.figures.total_j),
            )
        } else {
            (j(r.figures.total_j), String::new())
        };
        let _ = writeln!(
            out,
            "{:<10} {:>10.4} s {:>16} {:>16} {:>10} {:>7.2} ms",
            r.policy,
            r.figures.makespan_s,
            first,
            second,
            r.copies,
            r.simulated_in_s * 1e3
        );
        if let Some([lo, hi]) = r.makespan_ci_s {
            let mut energy = r
                .predicted_ci_j
                .map(|[a, b]| format!(", energy (model) {a:.2} to {b:.2} J"))
                .unwrap_or_default();
            if let Some([a, b]) = r.energy_ci_j {
                let what = if model { "platform powers" } else { "energy" };
                energy += &format!(", {what} {a:.2} to {b:.2} J");
            }
            let _ = writeln!(
                out,
                "{:<10} 95% interval: makespan {lo:.4} to {hi:.4} s{energy} ({} replicas)",
                "", r.replicas
            );
        }
    }
    if let Some(r) = rows.iter().find(|r| !r.unpredicted_domains.is_empty()) {
        let _ = writeln!(
            out,
            "* the model has no fit of {}: its energy leaves them out (the platform powers \
             count them), so compare it with the other column's domains it has",
            r.unpredicted_domains.join(", ")
        );
    }
    if let Some(r) = rows.iter().find(|r| !r.unpredicted_types.is_empty()) {
        let _ = writeln!(
            out,
            "* the model has no power for {}: their tasks count at the base power alone, so \
             its energy is a lower bound (fit the model on a run of these types; names are \
             matched by codelet and architecture, ignoring case)",
            r.unpredicted_types.join(", ")
        );
    }
    for line in ranked_verdicts(rows) {
        let _ = writeln!(out, "{line}");
    }
    for r in rows {
        if r.figures.domains.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n{}: energy per domain (simulated meter, virtual time)",
            r.policy
        );
        for d in &r.figures.domains {
            let _ = writeln!(
                out,
                "  {:<40} {:>12.2} J{}",
                d.name,
                d.energy_j,
                if d.in_total {
                    ""
                } else {
                    "  (second sensor: not in the total)"
                }
            );
        }
        let _ = writeln!(
            out,
            "  {:<40} {:>9} {:>10} {:>12}",
            "type", "count", "busy", "dynamic"
        );
        for t in &r.types {
            let _ = writeln!(
                out,
                "  {:<40} {:>9} {:>8.3} s {:>10.2} J",
                t.key, t.count, t.busy_s, t.dynamic_j
            );
        }
        let _ = writeln!(
            out,
            "  tasks per worker: {:?}; runtime overhead {:.1} us per task on average ({})",
            r.tasks_per_worker, r.overhead_us, r.overhead_source
        );
    }
    out
}
