//! `taskwatt export FILE --format chrome|csv -o OUT`.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use taskwatt_traces::{export_chrome, export_csv_samples, export_csv_tasks};

use super::CliResult;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// Chrome trace event JSON: open it in https://ui.perfetto.dev or chrome://tracing.
    Chrome,
    /// CSV: one row per task in OUT, one row per energy reading in OUT with `.samples.csv`.
    Csv,
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
}

/// `t.csv` -> `t.samples.csv`.
pub(crate) fn samples_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.samples.csv"))
}

fn create(path: &Path) -> Result<BufWriter<File>, Box<dyn std::error::Error>> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| format!("cannot create {}: {e}", path.display()).into())
}

pub(crate) fn export(a: ExportArgs) -> CliResult {
    match a.format {
        Format::Chrome => {
            let n = export_chrome(&a.file, create(&a.output)?)?;
            eprintln!(
                "wrote {} ({n} events); open it in https://ui.perfetto.dev",
                a.output.display()
            );
        }
        Format::Csv => {
            let tasks = export_csv_tasks(&a.file, create(&a.output)?)?;
            let sp = samples_path(&a.output);
            let samples = export_csv_samples(&a.file, create(&sp)?)?;
            eprintln!(
                "wrote {} ({tasks} tasks) and {} ({samples} energy readings)",
                a.output.display(),
                sp.display()
            );
        }
    }
    Ok(())
}
