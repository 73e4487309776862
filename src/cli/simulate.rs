//! `taskwatt simulate`: a recorded graph replayed in virtual time on a platform file,
//! under one or more policies, with the simulated meters' energy.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use taskwatt::energy::attribution::{predict_trace, EnergyModel};
use taskwatt::traces::read_trace;
use taskwatt::whatif::{
    figures, simulate, to_trace_with, type_energy, Graph, Platform, RunFigures, SimOptions,
    TypeEnergy,
};

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// The recorded trace whose graph to replay (its tasks, dependencies and, from format
    /// 1.3, data accesses).
    pub(crate) trace: PathBuf,
    /// The platform: a TOML file, or a built-in name (this-machine, 2x16, 1s-4gpu,
    /// 2cpu-2gpu; see whatif/platforms/ and docs/whatif.md).
    #[arg(long)]
    pub(crate) platform: String,
    /// Policies to simulate, comma-separated (any of `taskwatt run --sched`).
    #[arg(long, value_delimiter = ',', default_value = "lws")]
    pub(crate) sched: Vec<String>,
    /// A fitted energy model (`taskwatt fit`): each simulated run's energy is also
    /// predicted with it, and dmdae takes its task powers from it.
    #[arg(long, value_name = "FILE")]
    pub(crate) energy_model: Option<PathBuf>,
    /// Write the simulated run's trace here (one policy only); `report` and `export`
    /// read it.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
    /// Time only: no simulated meter.
    #[arg(long)]
    pub(crate) no_energy: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// One simulated run, for the tables and the JSON.
#[derive(serde::Serialize)]
pub(crate) struct SimRow {
    pub(crate) policy: String,
    pub(crate) figures: RunFigures,
    pub(crate) types: Vec<TypeEnergy>,
    pub(crate) predicted_j: Option<f64>,
    pub(crate) tasks_per_worker: Vec<u64>,
    pub(crate) copies: u64,
    pub(crate) copied_bytes: u64,
    pub(crate) overhead_us: f64,
    /// Where the overhead came from (the platform's constant, or the recorded hand-offs).
    pub(crate) overhead_source: String,
    pub(crate) simulated_in_s: f64,
}

/// Notes about simulated runs, each once with the policies it applies to, printed after
/// the results (the same prediction warning for every policy was a screen of notes before
/// the table).
#[derive(Default)]
pub(crate) struct Notes(Vec<(String, Vec<String>)>);

impl Notes {
    fn add(&mut self, note: String, policy: &str) {
        match self.0.iter_mut().find(|(n, _)| *n == note) {
            Some((_, ps)) => ps.push(policy.to_owned()),
            None => self.0.push((note, vec![policy.to_owned()])),
        }
    }

    /// Prints the notes on stderr, one line each (naming the policies when not all).
    pub(crate) fn print(&self, policies: usize) {
        for (note, ps) in &self.0 {
            if ps.len() == policies || ps.is_empty() {
                eprintln!("note: {note}");
            } else {
                eprintln!("note ({}): {note}", ps.join(", "));
            }
        }
    }
}

/// Simulates `trace`'s graph under each policy; also returns the last run's trace (when
/// `keep_last`: whole, with the data accesses; otherwise `None`), and the
/// notes to print after the results.
pub(crate) fn simulate_policies(
    trace: &taskwatt::traces::Trace,
    platform: &Platform,
    policies: &[String],
    model: Option<&EnergyModel>,
    powers: &taskwatt::session::TaskPowers,
    policy_options: &taskwatt::scheduler::PolicyOptions,
    energy: bool,
    keep_last: bool,
) -> Result<(Vec<SimRow>, Option<taskwatt::traces::Trace>, Notes), Box<dyn std::error::Error>> {
    let graph = Graph::from_trace(trace)?;
    let mut notes = Notes::default();
    if graph.dropped_edges() > 0 {
        notes.0.push((
            format!(
                "{} dependency edge(s) name tasks the trace does not hold (acquisitions or a \
                 cut trace): left out",
                graph.dropped_edges()
            ),
            Vec::new(),
        ));
    }
    if platform.gpus > 0 && !graph.has_accesses() {
        notes.0.push((
            "the trace has no data accesses (format 1.3, recorded by `taskwatt run`): no copy \
             to or from the GPUs is simulated"
                .to_owned(),
            Vec::new(),
        ));
    }
    // How the platform's speed factors meet the trace's codelet names.
    let names: Vec<(&str, bool)> = graph
        .codelets()
        .iter()
        .filter(|c| graph.tasks().iter().any(|t| t.codelet == c.id))
        .map(|c| {
            let gpu = c.archs.contains(&taskwatt::traces::Arch::Gpu)
                || graph
                    .tasks()
                    .iter()
                    .any(|t| t.codelet == c.id && t.arch == taskwatt::traces::Arch::Gpu);
            (c.name.as_str(), gpu)
        })
        .collect();
    for n in platform.name_notes(&names) {
        notes.0.push((n, Vec::new()));
    }
    let mut rows = Vec::new();
    let mut last = None;
    for p in policies {
        let mut opts = SimOptions::new(p);
        opts.energy = energy;
        opts.policy_options = *policy_options;
        opts.task_powers = match model {
            Some(m) => taskwatt::session::task_powers_of(m),
            None => powers.clone(),
        };
        let t0 = Instant::now();
        let run = simulate(&graph, platform, &opts)?;
        let took = t0.elapsed().as_secs_f64();
        // The data accesses only for the trace kept (the figures do not read them).
        let out = to_trace_with(&run, &graph, platform, Some(trace), keep_last);
        let figs = figures(&out);
        let types = out
            .truth
            .as_ref()
            .map(|t| type_energy(&out, t))
            .unwrap_or_default();
        let predicted_j = match model {
            Some(m) if energy => {
                let pred = predict_trace(m, &out)?;
                for w in &pred.warnings {
                    notes.add(
                        format!("on {}: the model's prediction: {w}", platform.name),
                        &run.policy,
                    );
                }
                Some(pred.total_predicted_j)
            }
            _ => None,
        };
        rows.push(SimRow {
            policy: run.policy.clone(),
            figures: figs,
            types,
            predicted_j,
            tasks_per_worker: run.per_worker.clone(),
            copies: run.copies.0,
            copied_bytes: run.copies.1,
            overhead_us: run.overhead_ns as f64 * 1e-3,
            overhead_source: run.overhead_source.clone(),
            simulated_in_s: took,
        });
        if keep_last {
            last = Some(out);
        }
    }
    Ok((rows, last, notes))
}

pub(crate) fn run(a: SimulateArgs) -> CliResult {
    if a.output.is_some() && a.sched.len() > 1 {
        return Err("--output writes one simulated trace: give one policy to --sched".into());
    }
    if let Some(o) = &a.output {
        // Every file the command reads: the trace, the energy model, a platform file.
        let platform = std::path::Path::new(&a.platform);
        let inputs: Vec<&std::path::Path> = [
            Some(a.trace.as_path()),
            a.energy_model.as_deref(),
            platform.is_file().then_some(platform),
        ]
        .into_iter()
        .flatten()
        .collect();
        taskwatt::traces::refuse_output_over_input(o, &inputs)?;
    }
    for p in &a.sched {
        taskwatt::scheduler::check_policy_name(p)?;
    }
    let platform = Platform::load(&a.platform)?;
    let trace = read_trace(&a.trace)?;
    let model = a.energy_model.as_ref().map(EnergyModel::load).transpose()?;
    let recorded = figures(&trace);
    let (rows, last, notes) = simulate_policies(
        &trace,
        &platform,
        &a.sched,
        model.as_ref(),
        &Vec::new(),
        &Default::default(),
        !a.no_energy,
        a.output.is_some(),
    )?;
    if let (Some(o), Some(t)) = (&a.output, &last) {
        t.save(o)?;
    }
    if a.json {
        let v = serde_json::json!({
            "simulated": "virtual time",
            "platform": {
                "name": platform.name,
                "origin": platform.origin,
                "workers": platform.workers().len(),
                "gpus": platform.gpus,
            },
            "recorded": {
                "trace": a.trace,
                "policy": trace.meta.policy,
                "host": trace.meta.host,
                "simulated_meter": trace.is_simulated(),
                "figures": recorded,
            },
            "runs": rows,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!(
            "{}",
            render_rows(&platform, &trace, &rows, model.is_some(), !a.no_energy)
        );
    }
    notes.print(a.sched.len());
    if let Some(o) = &a.output {
        eprintln!(
            "wrote {} (a simulated run: `taskwatt report` reads it)",
            o.display()
        );
    }
    Ok(())
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
        if energy {
            "; energy from the platform's simulated meters"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "recorded: {} tasks under {} on {}: makespan {:.4} s, energy {}{}",
        trace.tasks().count(),
        trace.meta.policy,
        trace.meta.host,
        recorded.makespan_s,
        j(recorded.total_j),
        if trace.is_simulated() {
            " (simulated meter)"
        } else {
            ""
        }
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<10} {:>12} {:>14} {:>14} {:>10} {:>10}",
        "policy",
        "makespan",
        "energy",
        if model { "model's" } else { "" },
        "copies",
        "host time"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<10} {:>10.4} s {:>14} {:>14} {:>10} {:>7.2} ms",
            r.policy,
            r.figures.makespan_s,
            j(r.figures.total_j),
            if model {
                j(r.predicted_j)
            } else {
                String::new()
            },
            r.copies,
            r.simulated_in_s * 1e3
        );
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
