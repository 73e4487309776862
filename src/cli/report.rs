//! `taskwatt report TRACE [--json] [--csv DIR] [--svg DIR]`: the per-task-type energy
//! attribution of one trace, as tables (80 columns), JSON, CSV files and SVG plots.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use taskwatt::energy::attribution::{
    attribute, attribute_trace, render_report, Attribution, AttributionOptions, KeyKind,
    RenderOptions, RowWeights, SensorModel, Solver, TraceParts,
};
use taskwatt::traces::{read_trace_without_tasks, RunOutcome, TaskStream, Trace};

use super::CliResult;

/// How to attribute (shared by `report`, `run`, `fit` and `compare`).
#[derive(Args, Debug, Clone)]
pub(crate) struct AttributionArgs {
    /// What a task type is: codelet, codelet-arch or codelet-footprint.
    #[arg(long, default_value = "codelet-arch", value_parser = parse_key)]
    pub(crate) key: KeyKind,
    /// Solver: nnls (powers >= 0) or ols.
    #[arg(long, default_value = "nnls", value_parser = parse_solver)]
    pub(crate) solver: Solver,
    /// Row weights: `auto` (default) from the rows' own error variance, a + b * interval
    /// length, fitted to a first fit's residuals; `uniform`; or `duration`, 1/interval
    /// length (white power noise on intervals of uneven length).
    #[arg(long, default_value = "auto", value_parser = parse_weights)]
    pub(crate) weights: RowWeights,
    /// The same as `--weights duration` (kept for scripts).
    #[arg(long, hide = true)]
    pub(crate) weight_by_duration: bool,
    /// Whether to fit each domain's contention (tasks drawing less when others run beside
    /// them): `on` (default) or `off` (every task draws its power whatever runs beside it).
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub(crate) contention: bool,
    /// Whether to fit a linear drift of the base power over the run: `on` (default) or
    /// `off`.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub(crate) drift: bool,
    /// Whether to use the CPU frequency sampled beside the energy (trace format 1.6) as a
    /// regressor: `on` (default) or `off` (the frequency is only reported).
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub(crate) frequency: bool,
    /// Show a power as a measurement only when its 95% interval is within this many
    /// percent of it; anything wider is shown as a range and flagged.
    #[arg(long, value_name = "PCT", allow_negative_numbers = true,
          default_value_t = taskwatt::energy::attribution::DEFAULT_PRECISION_PCT,
          value_parser = parse_precision)]
    pub(crate) measured_within: f64,
    /// How tasks reach a domain's readings: `aware` (default) through the domain's
    /// sensor (a counter, a counter that samples part of the time, a power reading
    /// averaged over a window); `clip` treats every domain as an ideal counter, each task
    /// clipped to its intervals (the seed paper's model), to compare.
    #[arg(long, default_value = "aware", value_parser = parse_sensor_model)]
    pub(crate) sensor_model: SensorModel,
}

fn parse_weights(s: &str) -> Result<RowWeights, String> {
    match s {
        "auto" => Ok(RowWeights::Auto),
        "uniform" => Ok(RowWeights::Uniform),
        "duration" => Ok(RowWeights::InverseDuration),
        _ => Err(format!(
            "unknown weights `{s}`: use auto, uniform or duration"
        )),
    }
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("`{s}`: use on or off")),
    }
}

fn parse_sensor_model(s: &str) -> Result<SensorModel, String> {
    match s {
        "aware" => Ok(SensorModel::Aware),
        "clip" => Ok(SensorModel::Clip),
        _ => Err(format!("unknown sensor model `{s}`: use aware or clip")),
    }
}

fn parse_precision(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage: give e.g. 5 or 2.5%"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "--measured-within {s}: give a percentage above 0, e.g. 5"
        ));
    }
    Ok(v)
}

fn parse_key(s: &str) -> Result<KeyKind, String> {
    KeyKind::parse(s).ok_or_else(|| {
        let names: Vec<&str> = KeyKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown key `{s}`: use one of {}", names.join(", "))
    })
}

fn parse_solver(s: &str) -> Result<Solver, String> {
    match s {
        "nnls" => Ok(Solver::Nnls),
        "ols" => Ok(Solver::Ols),
        _ => Err(format!("unknown solver `{s}`: use nnls or ols")),
    }
}

impl AttributionArgs {
    pub(crate) fn options(&self) -> AttributionOptions {
        let mut o = AttributionOptions {
            key: self.key,
            solver: self.solver,
            weights: self.weights.clone(),
            precision_pct: self.measured_within,
            sensor_model: self.sensor_model,
            contention: self.contention,
            drift: self.drift,
            frequency: self.frequency,
            ..AttributionOptions::default()
        };
        if self.weight_by_duration {
            o.weights = RowWeights::InverseDuration;
        }
        o
    }
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// The trace (.twt).
    trace: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also write types.csv and intervals.csv into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Also write SVG plots into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Read every complete chunk of a trace that was cut short or is damaged at its tail
    /// (a killed run), instead of refusing it.
    #[arg(long)]
    recover: bool,
    #[command(flatten)]
    attribution: AttributionArgs,
}

pub(crate) fn report(a: ReportArgs) -> CliResult {
    // Where a recovered trace was cut (its readings may be past it).
    let mut cut_at = None;
    let trace = if a.recover {
        let r = taskwatt::traces::recover_trace(&a.trace)?;
        cut_at = r.problem.as_ref().map(|_| r.valid_bytes);
        if let Some(p) = &r.problem {
            eprintln!("warning: {p}\n  reporting on {}", r.summary());
        }
        r.trace
    } else {
        // Everything but the tasks, which the attribution then reads chunk by chunk from
        // the file (`attribute_streamed`): a 10 M-task trace's records are never all in
        // memory.
        read_trace_without_tasks(&a.trace).map_err(with_recover_hint)?
    };
    warn_outcome(&a.trace, &trace);
    if let Some(dir) = &a.csv {
        super::refuse_dir_over_inputs(
            dir,
            "--csv",
            &["types.csv", "intervals.csv"],
            None,
            &[&a.trace],
        )?;
    }
    if let Some(dir) = &a.svg {
        super::refuse_dir_over_inputs(dir, "--svg", &[], Some("svg"), &[&a.trace])?;
    }
    let opts = a.attribution.options();
    let source = (!a.recover).then_some(a.trace.as_path());
    let att = attribute_from(source, &trace, &opts)
        .map_err(|e| no_samples_hint(&a.trace, &trace, e, cut_at))?;
    emit(&trace, &att, a.json, a.csv.as_deref(), a.svg.as_deref())?;
    if !a.json {
        print!("{}", sensor_check(source, &trace, &att, &opts)?);
    }
    Ok(())
}

/// A fault in the file, with how to report on what it holds.
fn with_recover_hint(e: taskwatt::traces::TraceError) -> Box<dyn std::error::Error> {
    recover_hint(e, "rerun with --recover to report on its complete chunks")
}

/// `e`, with `hint` on --recover where the file is cut short or corrupt (not where it is
/// missing or unreadable, which --recover does not help).
pub(crate) fn recover_hint(
    e: taskwatt::traces::TraceError,
    hint: &str,
) -> Box<dyn std::error::Error> {
    match e {
        e @ (taskwatt::traces::TraceError::Truncated { .. }
        | taskwatt::traces::TraceError::Corrupt { .. }
        | taskwatt::traces::TraceError::CutShort { .. }) => format!("{e}\n  {hint}").into(),
        e => e.into(),
    }
}

/// Attributes `trace`, whose tasks are its own (`source` is `None`) or are streamed from
/// the file `source` (`trace` then has none: `read_trace_without_tasks`).
fn attribute_from(
    source: Option<&Path>,
    trace: &Trace,
    opts: &AttributionOptions,
) -> Result<Attribution, Box<dyn std::error::Error>> {
    let Some(path) = source else {
        return Ok(attribute_trace(trace, opts)?);
    };
    let expected = trace.end.as_ref().map_or(0, |e| e.tasks);
    let mut tasks = TaskStream::open(path, expected)?;
    let att = attribute(&TraceParts::from_trace(trace), &mut tasks, opts);
    // A fault in a task chunk ended the stream early: it, not a result on part of the tasks.
    tasks.finish().map_err(with_recover_hint)?;
    Ok(att?)
}

/// Where the trace knows the truth and a domain's sensor is not an ideal counter: each
/// type's error under the sensor-aware model beside the error clipping gives (the seed
/// paper's model), from a second attribution with `--sensor-model clip`.
pub(crate) fn sensor_check(
    source: Option<&Path>,
    trace: &Trace,
    att: &Attribution,
    opts: &AttributionOptions,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut out = String::new();
    let shaped = |s: taskwatt::traces::SensorKind| s != taskwatt::traces::SensorKind::EnergyCounter;
    if opts.sensor_model != SensorModel::Aware
        || trace.truth.is_none()
        || !trace.domains.iter().any(|d| shaped(d.sensor))
    {
        return Ok(out);
    }
    let clip = attribute_from(
        source,
        trace,
        &AttributionOptions {
            sensor_model: SensorModel::Clip,
            ..opts.clone()
        },
    )?;
    for (d, c) in att.report.domains.iter().zip(&clip.report.domains) {
        // Every sensor of the device: one, or two fitted together (NVML's counter and power).
        let Some(me) = trace.domains.iter().find(|i| i.id == d.id) else {
            continue;
        };
        let infos: Vec<_> = trace.domains.iter().filter(|i| i.same_device(me)).collect();
        let (Some(ta), Some(tc)) = (&d.truth, &c.truth) else {
            continue;
        };
        if !infos.iter().any(|i| shaped(i.sensor)) {
            continue;
        }
        let words = |k: taskwatt::traces::SensorKind| match k {
            taskwatt::traces::SensorKind::SampledCounter { sampled_ns } => format!(
                "a counter that sees the last {} ms of each update",
                sampled_ns as f64 / 1e6
            ),
            taskwatt::traces::SensorKind::IntegratedPower { window_ns } => {
                format!("power averaged over {} ms", window_ns as f64 / 1e6)
            }
            taskwatt::traces::SensorKind::EnergyCounter => "an energy counter".to_owned(),
        };
        let sensor = infos
            .iter()
            .map(|i| words(i.sensor))
            .collect::<Vec<_>>()
            .join(" and ");
        let _ = writeln!(
            out,
            "\nsensor model on {} ({sensor}): error against the simulated truth",
            d.name
        );
        let _ = writeln!(
            out,
            "  {:<20} {:>10} {:>14} {:>14}",
            "coefficient", "truth", "sensor-aware", "clipping"
        );
        let pct = |v: Option<f64>| v.map_or("-".to_owned(), |p| format!("{p:+.2}%"));
        for r in &ta.rows {
            let clipped = tc.rows.iter().find(|x| x.name == r.name);
            let _ = writeln!(
                out,
                "  {:<20} {:>10} {:>14} {:>14}",
                r.name,
                r.truth_w.map_or("-".to_owned(), |w| format!("{w:.1} W")),
                pct(r.error_pct),
                pct(clipped.and_then(|x| x.error_pct)),
            );
        }
    }
    Ok(out)
}

/// Says on stderr when a trace's run did not complete: its figures cover only what ran.
pub(crate) fn warn_outcome(path: &Path, trace: &Trace) {
    let outcome = trace.end.as_ref().map(|e| e.outcome);
    match outcome {
        Some(RunOutcome::Interrupted) => eprintln!(
            "warning: {} is the trace of an interrupted run: the report covers the tasks that finished before the signal",
            path.display()
        ),
        Some(RunOutcome::Failed) => eprintln!(
            "warning: {} is the trace of a failed run ({}): the report covers what ran",
            path.display(),
            if trace.comms.is_empty() {
                "a task or the result check failed, or the program dropped its measurement \
                 before finishing it"
            } else {
                "a rank of the job failed or was killed, or a task or the check failed"
            }
        ),
        Some(RunOutcome::Complete) | None => {}
    }
}

/// Prints (or writes) an attribution in the forms asked for.
pub(crate) fn emit(
    trace: &Trace,
    att: &Attribution,
    json: bool,
    csv: Option<&Path>,
    svg: Option<&Path>,
) -> CliResult {
    if json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            simulated: bool,
            /// `virtual time` for the trace of a what-if simulation (`taskwatt simulate`).
            #[serde(skip_serializing_if = "Option::is_none")]
            run: Option<&'a str>,
            report: &'a taskwatt::energy::attribution::AttributionReport,
            /// Copies between memory nodes (runs with GPUs only).
            #[serde(skip_serializing_if = "Option::is_none")]
            transfers: Option<taskwatt::traces::TransferSummary>,
            /// A merged distributed run's energy per node and per type over the nodes.
            #[serde(skip_serializing_if = "Option::is_none")]
            job: Option<taskwatt::job::Job>,
        }
        let out = Out {
            simulated: trace.is_simulated(),
            run: virtual_time(trace).map(|_| "virtual time"),
            report: &att.report,
            transfers: (!trace.transfers.is_empty()).then(|| trace.transfer_summary()),
            job: taskwatt::job::job_of(trace, att),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let job = taskwatt::job::job_summary(trace, att);
        if let Some(platform) = virtual_time(trace) {
            println!(
                "VIRTUAL TIME: this trace is a what-if simulation on platform \"{platform}\" \
                 (taskwatt simulate), not a run: its times and energies are predictions"
            );
        }
        print!(
            "{}",
            render_report(
                &att.report,
                &RenderOptions {
                    simulated: trace.is_simulated()
                }
            )
        );
        if !trace.transfers.is_empty() {
            println!("transfers: {}", trace.transfer_summary());
        }
        print!("{job}");
    }
    if let Some(dir) = csv {
        super::report_files::write_csv(dir, att)?;
        eprintln!(
            "wrote {}/types.csv and {}/intervals.csv",
            dir.display(),
            dir.display()
        );
    }
    if let Some(dir) = svg {
        super::report_files::emit_svg_only(trace, att, dir)?;
    }
    Ok(())
}

/// The platform of a what-if simulation's trace; `None` for a real run.
pub(crate) fn virtual_time(trace: &Trace) -> Option<&str> {
    let p = &trace.meta.params;
    (p.get("simulated").map(String::as_str) == Some("virtual time"))
        .then(|| p.get("platform").map_or("?", String::as_str))
}

/// An imported trace without energy samples: how to give it some, or predict its energy
/// (the attribution's own hint says to record with a meter, which an import cannot).
fn no_samples_hint(
    path: &Path,
    trace: &Trace,
    e: Box<dyn std::error::Error>,
    cut_at: Option<u64>,
) -> Box<dyn std::error::Error> {
    use taskwatt::energy::attribution::AttributionError;
    if !matches!(
        e.downcast_ref::<AttributionError>(),
        Some(AttributionError::NoEnergyData { .. })
    ) {
        return e;
    }
    let p = &trace.meta.params;
    let path = path.display();
    let msg = if let Some(at) = cut_at {
        // A trace cut short holds no meter (its Meters chunk is written after the run's
        // metadata) or too few readings: not a run without a meter.
        format!(
            "{path}: the {at} bytes that --recover could read hold {} energy domain(s) and {} \
             reading(s), too few to attribute: the trace was cut short before its meter's \
             readings (they are written as the run goes, so a trace cut early has none). \
             Nothing in it can be attributed; `taskwatt export --recover` still shows its {} \
             task(s)",
            trace.domains.len(),
            trace.samples.len(),
            trace.task_count()
        )
    } else if let Some(rank) = p.get("mpi_rank") {
        format!(
            "{path}: the trace of rank {rank} of a distributed run, whose energy is read (or \
             simulated) for the whole node when the ranks' traces are merged: `taskwatt merge \
             STEM.rank*.twt -o job.twt`, then `taskwatt report job.twt` (docs/mpi.md)"
        )
    } else if let Some(from) = p.get("import.source") {
        format!(
            "{path}: imported from {} ({from}) without energy samples: nothing to attribute. \
             Import it again with the meter's readings (`taskwatt import ... --samples \
             samples.csv`, and --domains or --workers to say what each domain covers: \
             docs/import.md), or predict its energy with a model fitted on a measured run \
             (`taskwatt predict MODEL {path}`)",
            p.get("import.file")
                .map_or("another runtime's trace", String::as_str),
        )
    } else if trace.domains.is_empty() {
        format!(
            "{path}: recorded without an energy meter (`taskwatt bench`, `run --no-energy`, or \
             a runtime of your own without `Measure`): nothing to attribute. Record with \
             `taskwatt run` (a meter by default) or the library's `Measure`, or predict its \
             energy with a model fitted on a measured run (`taskwatt predict MODEL {path}`)"
        )
    } else {
        return e;
    };
    msg.into()
}
