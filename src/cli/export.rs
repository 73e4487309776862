//! `taskwatt export FILE --format chrome|csv -o OUT`.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use taskwatt_traces::{
    export_chrome, export_csv_samples, export_csv_tasks, recover_trace, refuse_output_over_input,
    write_chrome, write_csv_samples, write_csv_tasks, AtomicFile, Trace, TraceError,
};

use super::CliResult;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// Chrome trace event JSON: open it in https://ui.perfetto.dev or chrome://tracing.
    Chrome,
    /// CSV: one row per task in OUT, one row per energy reading in OUT with `.samples.csv`.
    Csv,
    /// Graphviz DOT: the task graph, one node per task, one edge per dependency.
    Dot,
    /// Paje, for ViTE (and PajeNG's pj_dump): worker states, power variables, markers.
    Paje,
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// The trace (.twt) to export.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
    /// Export what a damaged or cut-short trace still holds (every complete chunk).
    #[arg(long)]
    recover: bool,
}

/// `t.csv` -> `t.samples.csv`.
pub(crate) fn samples_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.samples.csv"))
}

/// An output that appears only once complete: a failed export leaves no partial file and
/// keeps one that was there.
fn create(path: &Path) -> Result<AtomicFile, TraceError> {
    AtomicFile::create(path)
}

pub(crate) fn export(a: ExportArgs) -> CliResult {
    // Before anything is opened: `-o` naming the input would destroy it.
    refuse_output_over_input(&a.output, &[&a.file])?;
    if matches!(a.format, Format::Csv) {
        refuse_output_over_input(&samples_path(&a.output), &[&a.file])?;
    }
    if a.recover {
        let r = recover_trace(&a.file)?;
        if let Some(p) = &r.problem {
            eprintln!(
                "warning: {p}\n  exporting the {} complete chunks ({} tasks, {} energy readings) before byte {}",
                r.complete_chunks,
                r.trace.task_count(),
                r.trace.samples.len(),
                r.valid_bytes
            );
        }
        return export_trace(&a, &r.trace);
    }
    let res = export_streaming(&a);
    if let Err(e) = &res {
        if let Some(
            TraceError::Truncated { .. } | TraceError::Corrupt { .. } | TraceError::CutShort { .. },
        ) = e.downcast_ref::<TraceError>()
        {
            let r = recover_trace(&a.file)?;
            return Err(format!(
                "{e}\n  {} complete chunks ({} tasks) are readable: rerun with --recover to export them",
                r.complete_chunks,
                r.trace.task_count()
            )
            .into());
        }
    }
    res
}

fn export_trace(a: &ExportArgs, trace: &Trace) -> CliResult {
    match a.format {
        Format::Paje => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::write_paje(trace, &mut out)?;
            out.commit()?;
            eprintln!("wrote {} ({n} tasks)", a.output.display());
        }
        Format::Dot => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::write_dot(trace, &mut out)?;
            out.commit()?;
            eprintln!("wrote {} ({n} tasks)", a.output.display());
        }
        Format::Chrome => {
            let mut out = create(&a.output)?;
            let n = write_chrome(trace, &mut out)?;
            out.commit()?;
            eprintln!("wrote {} ({n} events)", a.output.display());
        }
        Format::Csv => {
            let (mut out, sp) = (create(&a.output)?, samples_path(&a.output));
            let mut sout = create(&sp)?;
            let tasks = write_csv_tasks(trace, &mut out)?;
            let samples = write_csv_samples(trace, &mut sout)?;
            out.commit()?;
            sout.commit()?;
            eprintln!(
                "wrote {} ({tasks} tasks) and {} ({samples} energy readings)",
                a.output.display(),
                sp.display()
            );
        }
    }
    Ok(())
}

fn export_streaming(a: &ExportArgs) -> CliResult {
    match a.format {
        Format::Paje => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::export_paje(&a.file, &mut out)?;
            out.commit()?;
            eprintln!(
                "wrote {} ({n} tasks); open it with `vite {}`",
                a.output.display(),
                a.output.display()
            );
        }
        Format::Dot => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::export_dot(&a.file, &mut out)?;
            out.commit()?;
            eprintln!(
                "wrote {} ({n} tasks); draw it with `dot -Tsvg {} -o graph.svg`",
                a.output.display(),
                a.output.display()
            );
        }
        Format::Chrome => {
            let mut out = create(&a.output)?;
            let n = export_chrome(&a.file, &mut out)?;
            out.commit()?;
            eprintln!(
                "wrote {} ({n} events); open it in https://ui.perfetto.dev",
                a.output.display()
            );
        }
        Format::Csv => {
            let (mut out, sp) = (create(&a.output)?, samples_path(&a.output));
            let mut sout = create(&sp)?;
            let tasks = export_csv_tasks(&a.file, &mut out)?;
            let samples = export_csv_samples(&a.file, &mut sout)?;
            out.commit()?;
            sout.commit()?;
            eprintln!(
                "wrote {} ({tasks} tasks) and {} ({samples} energy readings)",
                a.output.display(),
                sp.display()
            );
        }
    }
    Ok(())
}
