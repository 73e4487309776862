//! `taskwatt simulate`: a recorded graph replayed in virtual time on a platform file,
//! under one or more policies, with the simulated meters' energy.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use taskwatt::energy::attribution::{predict, trace_tasks, EnergyModel, TraceParts};
use taskwatt::traces::read_trace;
use taskwatt::whatif::{
    figures, sim_figures, simulate, to_trace_with, type_energy, Graph, Platform, SimOptions,
};

use super::sim_interval::{combine, interval};
use super::sim_rows::{ranked_verdicts, render_rows, SimRow};
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
    /// Energy from the platform's configured powers alone: no fitted model, not even the
    /// one the recorded app's last measured run saved (used by default when there is one)
    #[arg(long, conflicts_with = "energy_model")]
    pub(crate) platform_powers: bool,
    /// Replicas of each policy's run, each task's duration drawn afresh from its type's
    /// recorded variability, for the makespan's and the energy's 95 % intervals (0: none;
    /// graphs past 400 000 tasks get none, the replicas costing more than the run)
    #[arg(long, default_value_t = DEFAULT_REPLICAS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=64))]
    pub(crate) replicas: usize,
}

/// Simulated tasks the replicas of one policy may take in all: a graph of more than half
/// of it gets no interval (its replicas would cost more than the run it describes).
pub(crate) const REPLICA_TASKS: usize = 800_000;

/// Replicas `simulate` runs by default.
pub(crate) const DEFAULT_REPLICAS: usize = 8;

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
        self.print_new(policies, &mut Vec::new());
    }

    /// [`Notes::print`], leaving out the lines already in `said`, and adding those it
    /// prints: `compare` simulates one recording on several platforms, and said the
    /// recording's notes once per platform.
    pub(crate) fn print_new(&self, policies: usize, said: &mut Vec<String>) {
        for (note, ps) in &self.0 {
            let line = if ps.len() == policies || ps.is_empty() {
                format!("note: {note}")
            } else {
                format!("note ({}): {note}", ps.join(", "))
            };
            if !said.contains(&line) {
                eprintln!("{line}");
                said.push(line);
            }
        }
    }
}

/// The energy model the last measured run of `trace`'s app saved beside the performance
/// models (`taskwatt run` keeps `energy-model-<app>.json` there), when there is one; a
/// note on stderr says it is used.
fn saved_model(
    trace: &taskwatt::traces::Trace,
) -> Option<Result<EnergyModel, taskwatt::energy::attribution::AttributionError>> {
    let app = trace.meta.app.as_deref()?;
    let app = <taskwatt::apps::App as clap::ValueEnum>::from_str(app, false).ok()?;
    let dir = taskwatt::runtime::PerfModels::default_dir().ok()?;
    let path = dir.join(taskwatt::session::run_energy_model(app));
    if !path.exists() {
        return None;
    }
    eprintln!(
        "energy model: {} (saved by the last measured run of {}; --platform-powers for the \
         platform's configured powers alone)",
        path.display(),
        app.name()
    );
    Some(EnergyModel::load(&path))
}

/// What [`simulate_policies`] simulates, beside the trace and the platform.
pub(crate) struct SimRequest<'a> {
    /// The policies, each a row.
    pub(crate) policies: &'a [String],
    /// A fitted model: dmdae's powers and each row's predicted energy.
    pub(crate) model: Option<&'a EnergyModel>,
    /// dmdae's powers without a model.
    pub(crate) powers: &'a taskwatt::session::TaskPowers,
    /// The policies' knobs.
    pub(crate) policy_options: taskwatt::scheduler::PolicyOptions,
    /// Run the simulated meters.
    pub(crate) energy: bool,
    /// Return the last run's trace whole, with the data accesses.
    pub(crate) keep_last: bool,
    /// Replicas for the intervals (see [`DEFAULT_REPLICAS`]).
    pub(crate) replicas: usize,
}

/// The rows, the last run's trace (when asked) and the notes.
pub(crate) type Simulated = (Vec<SimRow>, Option<taskwatt::traces::Trace>, Notes);

/// Simulates `trace`'s graph under each policy; also returns the last run's trace (when
/// `keep_last`: whole, with the data accesses; otherwise `None`), and the
/// notes to print after the results.
pub(crate) fn simulate_policies(
    trace: &taskwatt::traces::Trace,
    platform: &Platform,
    req: &SimRequest<'_>,
) -> Result<Simulated, Box<dyn std::error::Error>> {
    let SimRequest {
        policies,
        model,
        powers,
        policy_options,
        energy,
        keep_last,
        replicas,
    } = *req;
    let graph = Graph::from_trace(trace)?;
    let mut notes = Notes::default();
    // Emulated GPUs are threads on the recording machine's cores: its CPU tasks ran beside
    // them, slower than on a machine without (a user's stencil: 20 % slower than its
    // CPU-only runs), and the simulation keeps their durations.
    let emulated = trace
        .meta
        .params
        .get("gpus")
        .and_then(|g| g.strip_suffix(" emulated"))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .filter(|&n| n > 0);
    if let Some(n) = emulated {
        notes.0.push((
            format!(
                "the recording ran {n} emulated GPU(s), threads on the same cores as its CPU \
                 workers: its CPU tasks' durations, and the gaps between tasks the overhead is \
                 drawn from, include that competition, which a platform without those threads \
                 would not have (record without --gpus to simulate a CPU-only machine, or give \
                 the platform file `[runtime] overhead_us`)"
            ),
            Vec::new(),
        ));
    }
    // Tasks interrupted for far longer than they run: kept in the replay, left out of
    // the replicas' draws (said, with the longest).
    let long = graph.interruptions();
    if !long.is_empty() {
        notes.0.push((
            format!(
                "{} task(s) ran over {} times their type's median, interrupted (a loaded \
                 machine?): {}; the replay keeps their recorded durations, the replicas' \
                 draws leave them out",
                long.iter().map(|l| l.1).sum::<usize>(),
                taskwatt::whatif::engine::INTERRUPTION,
                long.iter()
                    .map(|(c, n, max, med)| format!(
                        "{c} {n} (up to {:.1} ms against {:.3} ms)",
                        *max as f64 * 1e-6,
                        *med as f64 * 1e-6
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Vec::new(),
        ));
    }
    // Replicas for the intervals, within a budget of simulated tasks.
    let asked = replicas;
    let replicas = replicas.min(REPLICA_TASKS / graph.len().max(1));
    if asked >= 2 && replicas < 2 {
        notes.0.push((
            format!(
                "no interval: {} tasks leave room for {replicas} replica(s) of the run in the \
                 budget of {REPLICA_TASKS} simulated tasks (give --replicas and a smaller graph)",
                graph.len()
            ),
            Vec::new(),
        ));
    }
    // The machine's own speed between runs, which the replicas draw.
    if replicas >= 2 {
        notes.0.push((
            match (graph.speed_wander(), graph.wander_window_ns()) {
                (Some(w), None) => format!(
                    "the recording machine's speed moved by {:.1}% (standard deviation) between \
                     stretches as long as the graph, in the calibration around it: the \
                     replicas draw it, so the intervals hold a run on a faster or slower stretch",
                    100.0 * w
                ),
                (Some(w), Some(ns)) => format!(
                    "the recording machine's speed moved by {:.1}% (standard deviation) between \
                     stretches of {:.3} s, shorter than the graph: its calibration ({} tasks \
                     outside the graph) is too short for stretches as long as the graph; the \
                     replicas draw it, and the mean speed varies at least as much between \
                     short stretches as between long ones, so the intervals may be wider than \
                     the machine needs (a calibration three times as long as the graph \
                     measures it on graph-long stretches)",
                    100.0 * w,
                    ns as f64 * 1e-9,
                    graph.calibration_tasks()
                ),
                (None, _) if graph.calibration_tasks() > 0 => format!(
                    "the recording's calibration ({} tasks outside the graph) is too short \
                     beside its graph to show how much the machine's speed moves between runs \
                     (that takes {} stretches as long as the graph): the intervals hold the \
                     tasks' variability only (record with a calibration at least three times \
                     as long as the graph: --type-calibration with a duration)",
                    graph.calibration_tasks(),
                    taskwatt::whatif::MIN_WANDER_WINDOWS
                ),
                (None, _) => "the recording has no calibration around its graph to show how much \
                         the machine's speed moves between runs: the intervals hold the tasks' \
                         variability only (record with --type-calibration, or `Measured::finish_calibrating` \
                         in the library)"
                    .to_owned(),
            },
            Vec::new(),
        ));
    }
    // The durations' contention laws: what was fitted, what was not, what is extrapolated.
    let laws = graph.contention_laws();
    let mut fitted: Vec<&taskwatt::whatif::DurationLaw> = laws.laws.values().collect();
    fitted.sort_by(|a, b| a.codelet.cmp(&b.codelet));
    if !fitted.is_empty() {
        notes.0.push((
            format!(
                "CPU durations follow the busy cores of their package, as recorded: {}",
                fitted
                    .iter()
                    .map(|l| {
                        format!(
                            "{} {:+.1}% ± {:.1}% per extra busy core ({} tasks at \
                             {:.1}-{:.1}{})",
                            l.codelet,
                            l.percent_per_core(),
                            l.half_width_pct(),
                            l.tasks,
                            l.k_min,
                            l.k_max,
                            if !l.is_precise() {
                                "; imprecise, but a slowdown all the same: the intervals \
                                 draw it within its error"
                            } else {
                                ""
                            }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Vec::new(),
        ));
        let cores = f64::from(platform.cores_per_package);
        let beyond: Vec<String> = fitted
            .iter()
            .filter(|l| cores > l.k_max + 0.5)
            .map(|l| format!("{} (recorded up to {:.1})", l.codelet, l.k_max))
            .collect();
        if !beyond.is_empty() {
            notes.0.push((
                format!(
                    "the platform's packages have {cores} cores: the laws of {} are \
                     extrapolated (at most {} busy cores past the recorded, then held)",
                    beyond.join(", "),
                    taskwatt::whatif::contention::MAX_EXTRAPOLATION
                ),
                Vec::new(),
            ));
        }
    }
    if !laws.unidentified.is_empty() {
        notes.0.push((
            format!(
                "no contention law for {}: their recorded durations are kept whatever runs \
                 beside them",
                laws.unidentified
                    .iter()
                    .map(|(c, why)| format!("{c} ({why})"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Vec::new(),
        ));
    }
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
            "the trace has no data accesses: no copy to or from the GPUs is simulated \
             (`taskwatt run` and `Measure` record them; a runtime of your own does with \
             `Runtime::builder().trace_accesses(true)`)"
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
        opts.policy_options = policy_options;
        opts.task_powers = match model {
            Some(m) => taskwatt::session::task_powers_of(m),
            None => powers.clone(),
        };
        let t0 = Instant::now();
        let run = simulate(&graph, platform, &opts)?;
        let took = t0.elapsed().as_secs_f64();
        // The data accesses only for the trace kept (the figures do not read them).
        let out = to_trace_with(&run, &graph, platform, Some(trace), keep_last);
        let figs = sim_figures(&run, &out);
        let types = out
            .truth
            .as_ref()
            .map(|t| type_energy(&out, t))
            .unwrap_or_default();
        let mut unpredicted_types: Vec<String> = Vec::new();
        let predicted_j = match model {
            Some(m) if energy => {
                // Over the run's tasks' span, as the energy column: without the readings,
                // whose window runs past the end to the meters' next refresh (and a
                // prediction over it grew with the sampling period).
                let parts = TraceParts {
                    samples: &[],
                    ..TraceParts::from_trace(&out)
                };
                let pred = predict(m, &parts, trace_tasks(&out))?;
                for d in &pred.domains {
                    for t in &d.missing_types {
                        if !unpredicted_types.contains(t) {
                            unpredicted_types.push(t.clone());
                        }
                    }
                }
                for w in &pred.warnings {
                    notes.add(
                        format!("on {}: the model's prediction: {w}", platform.name),
                        &run.policy,
                    );
                }
                Some((
                    pred.total_predicted_j,
                    pred.total_measurement_interval_j.or(pred.total_interval_j),
                ))
            }
            _ => None,
        };
        let (predicted_j, model_ci_j) = (predicted_j.map(|p| p.0), predicted_j.and_then(|p| p.1));
        let unpredicted_domains: Vec<String> = match model {
            Some(m) if predicted_j.is_some() => out
                .domains
                .iter()
                .filter(|d| m.domain(d.domain).is_none())
                .map(|d| d.name.clone())
                .collect(),
            _ => Vec::new(),
        };
        // The replicas: each task's deviation from its type's mean drawn afresh from the
        // recorded ones (time and meters, no records).
        let (mut spans, mut joules) = (Vec::new(), Vec::new());
        if replicas >= 2 {
            for k in 0..replicas {
                let mut o = opts.clone();
                o.record = false;
                o.replica_seed = Some(0x5EED_0000 + k as u64);
                let rr = simulate(&graph, platform, &o)?;
                spans.push(rr.makespan_ns as f64 * 1e-9);
                // The simulated machine's exact energy (none without meters).
                if let Some(j) = sim_figures(&rr, &taskwatt::traces::Trace::default()).total_j {
                    joules.push(j);
                }
            }
        }
        let makespan_ci_s = interval(figs.makespan_s, &spans);
        let energy_ci_j = figs.total_j.and_then(|j| interval(j, &joules));
        // A lower bound (a type the model lacks) has no interval, as in `predict`.
        let predicted_ci_j = predicted_j
            .filter(|_| unpredicted_types.is_empty())
            .and_then(|p| {
                let relative = figs
                    .total_j
                    .zip(energy_ci_j)
                    .map(|(j, [lo, hi])| [lo / j, hi / j]);
                combine(p, relative, model_ci_j)
            });
        rows.push(SimRow {
            policy: run.policy.clone(),
            makespan_ci_s,
            energy_ci_j,
            replicas: spans.len(),
            figures: figs,
            types,
            predicted_j,
            predicted_ci_j,
            unpredicted_domains,
            unpredicted_types,
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

pub(crate) fn run(mut a: SimulateArgs) -> CliResult {
    // `--sched eager,eager` printed two identical rows: each policy once (as named,
    // `dmdae:1000` and `dmdae:10` being two).
    let mut seen = Vec::new();
    a.sched.retain(|p| {
        let key = p.to_ascii_lowercase();
        let first = !seen.contains(&key);
        if first {
            seen.push(key);
        } else {
            eprintln!("note: --sched names {p} more than once: simulated once");
        }
        first
    });
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
    let model = match (&a.energy_model, a.platform_powers) {
        (Some(p), _) => Some(EnergyModel::load(p)?),
        // No energy asked for: no saved model to load (and announce).
        (None, _) if a.no_energy => None,
        (None, true) => None,
        // The model the recorded app's last measured run saved beside the performance
        // models, if any.
        (None, false) => saved_model(&trace).transpose()?,
    };
    let recorded = figures(&trace);
    let (rows, last, notes) = simulate_policies(
        &trace,
        &platform,
        &SimRequest {
            policies: &a.sched,
            model: model.as_ref(),
            powers: &Vec::new(),
            policy_options: Default::default(),
            energy: !a.no_energy,
            keep_last: a.output.is_some(),
            replicas: a.replicas,
        },
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
            "verdicts": ranked_verdicts(&rows),
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
