//! `taskwatt fit TRACE... -o model.json` and `taskwatt predict model.json TRACE... [--json]`.

use std::path::PathBuf;

use clap::Args;
use taskwatt::energy::attribution::{
    fit_model, predict_trace, render_prediction, render_report, AttributionReport, EnergyModel,
    RenderOptions, TraceSystems,
};
use taskwatt::traces::read_trace;

use super::report::AttributionArgs;
use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct FitArgs {
    /// Traces to fit one model on (their intervals are stacked).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// The model file to write (JSON).
    #[arg(short, long)]
    output: PathBuf,
    /// Fit traces of a simulated meter together with traces of real meters (refused
    /// otherwise: the model would blend the simulation's powers with the machine's).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    attribution: AttributionArgs,
}

/// Refuses to stack traces of the simulated meter with traces of real meters (`force`:
/// says it and goes on), and says when the traces come from different hosts.
fn check_one_machine(traces: &[(PathBuf, bool, String)], force: bool) -> CliResult {
    let (sim, real): (Vec<_>, Vec<_>) = traces.iter().partition(|(_, s, _)| *s);
    if !sim.is_empty() && !real.is_empty() {
        let names = |v: &[&(PathBuf, bool, String)]| {
            v.iter()
                .map(|(p, _, _)| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let msg = format!(
            "readings of taskwatt's simulated meter in {}, of real (or imported) meters in \
             {}: one model of both would blend the simulation's powers with the machine's",
            names(&sim),
            names(&real)
        );
        if !force {
            return Err(
                format!("{msg}; fit them apart, or pass --force to fit them together").into(),
            );
        }
        eprintln!("warning (--force): {msg}");
    }
    let mut hosts: Vec<&str> = traces
        .iter()
        .map(|(_, _, h)| h.as_str())
        .filter(|h| !h.is_empty())
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() > 1 {
        eprintln!(
            "warning: the traces come from {} hosts ({}): one model assumes one machine's \
             powers",
            hosts.len(),
            hosts.join(", ")
        );
    }
    Ok(())
}

pub(crate) fn fit(a: FitArgs) -> CliResult {
    let inputs: Vec<&std::path::Path> = a.traces.iter().map(|p| p.as_path()).collect();
    taskwatt_traces::refuse_output_over_input(&a.output, &inputs)?;
    let opts = a.attribution.options();
    let mut systems = Vec::new();
    let mut simulated = false;
    let mut origins = Vec::new();
    let no_energy = |p: &PathBuf| {
        format!(
            "{}: no energy readings in this trace (recorded without a meter, or imported \
             without --samples)",
            p.display()
        )
    };
    for p in &a.traces {
        let t = read_trace(p)?;
        // Such a trace was refused with a message that named no file, or, beside others,
        // added nothing without a word.
        if t.samples.is_empty() {
            if a.traces.len() == 1 {
                return Err(format!(
                    "{}: nothing to fit; record it with a meter (`taskwatt run`, \
                     `Measure`), or import it with --samples (docs/import.md)",
                    no_energy(p)
                )
                .into());
            }
            eprintln!("warning: {}: left out of the fit", no_energy(p));
            continue;
        }
        simulated |= t.is_simulated();
        origins.push((p.clone(), t.is_simulated(), t.meta.host.clone()));
        systems.push(TraceSystems::from_trace(&t, opts.key)?);
    }
    if systems.is_empty() {
        return Err("none of the traces has energy readings: nothing to fit".into());
    }
    check_one_machine(&origins, a.force)?;
    let mut fit = fit_model(&systems, None, &opts)?;
    fit.model.simulated = simulated;
    fit.model.save(&a.output)?;
    let report = AttributionReport {
        key: opts.key,
        solver: opts.solver,
        precision_pct: opts.precision_pct,
        tasks: systems.iter().map(|s| s.tasks).sum(),
        unmetered_tasks: systems.iter().map(|s| s.unmetered_tasks).sum(),
        domains: fit.reports,
        warnings: Vec::new(),
    };
    print!("{}", render_report(&report, &RenderOptions { simulated }));
    eprintln!(
        "wrote {} ({}, {})",
        a.output.display(),
        super::count(systems.len() as u64, "trace"),
        super::count(fit.model.domains.len() as u64, "domain")
    );
    Ok(())
}

#[derive(Args, Debug)]
pub(crate) struct PredictArgs {
    /// The model (from `taskwatt fit`).
    model: PathBuf,
    /// Traces whose energy to predict.
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// Print JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn predict(a: PredictArgs) -> CliResult {
    let model = EnergyModel::load(&a.model)?;
    let mut out = Vec::new();
    for p in &a.traces {
        let t = read_trace(p)?;
        let pred = predict_trace(&model, &t)?;
        // A model of simulated readings predicts simulated energy, whatever the trace's
        // own meter (a trace without one, or an import).
        let simulated = t.is_simulated() || model.simulated;
        if a.json {
            out.push(serde_json::json!({
                "trace": p,
                "simulated": simulated,
                "model_simulated": model.simulated,
                "prediction": pred,
            }));
        } else {
            println!("{}", p.display());
            if model.simulated && !t.is_simulated() {
                println!(
                    "SIMULATED: the model was fitted on readings of taskwatt's simulated \
                     meter ({}), so these are the simulation's powers, not this machine's",
                    a.model.display()
                );
            }
            print!("{}", render_prediction(&pred, &RenderOptions { simulated }));
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}
