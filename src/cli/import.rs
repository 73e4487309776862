//! `taskwatt import`: turns another runtime's trace into a `.twt` trace, so that the
//! attribution works on it: generic CSV (tasks, samples, workers) or StarPU's `tasks.rec`.

use std::path::PathBuf;

use clap::Args;
use taskwatt::traces::{import_csv, import_starpu, ImportOptions, TimeUnit};

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// tasks.csv: columns type, worker, start, end (optional id, arch); see docs/import.md.
    #[arg(long, conflicts_with = "starpu", required_unless_present = "starpu")]
    tasks: Option<PathBuf>,
    /// StarPU's tasks.rec (from starpu_fxt_tool); its times are in ms.
    #[arg(long)]
    starpu: Option<PathBuf>,
    /// samples.csv: columns time, domain, energy_j (cumulative J).
    #[arg(long)]
    samples: Option<PathBuf>,
    /// workers.csv: columns worker, domain (which workers each domain covers).
    #[arg(long)]
    workers: Option<PathBuf>,
    /// Unit of the CSV times: s, ms, us or ns (tasks.rec times are always ms; this then
    /// applies to the samples CSV only).
    #[arg(long, default_value = "s")]
    time_unit: TimeUnit,
    /// The trace to write.
    #[arg(short, long)]
    output: PathBuf,
}

pub(crate) fn import(a: ImportArgs) -> CliResult {
    let inputs: Vec<&std::path::Path> = [&a.tasks, &a.starpu, &a.samples, &a.workers]
        .into_iter()
        .flatten()
        .map(|p| p.as_path())
        .collect();
    taskwatt_traces::refuse_output_over_input(&a.output, &inputs)?;
    let mut opts = ImportOptions::new(a.time_unit);
    if let Some(s) = &a.samples {
        opts = opts.samples(s);
    }
    if let Some(w) = &a.workers {
        opts = opts.workers(w);
    }
    let trace = match (&a.tasks, &a.starpu) {
        (Some(t), _) => import_csv(t, &opts)?,
        (None, Some(rec)) => {
            let imp = import_starpu(rec, &opts)?;
            eprintln!(
                "{}: {} executed tasks; skipped {} control records, {} records without worker or times and {} with WorkerId -1 (no worker); {} named from their perfmodel, {} unnamed",
                rec.display(),
                imp.trace.task_count(),
                imp.skipped.control,
                imp.skipped.not_executed,
                imp.skipped.no_worker,
                imp.named_from_model,
                imp.unnamed
            );
            imp.trace
        }
        (None, None) => unreachable!("clap requires --tasks or --starpu"),
    };
    let s = trace.save(&a.output)?;
    eprintln!(
        "wrote {} ({} tasks, {} energy samples, {} domains)",
        s.path.display(),
        s.tasks,
        s.samples,
        trace.domains.len()
    );
    Ok(())
}
