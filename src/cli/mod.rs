//! Subcommands of the `taskwatt` CLI, one file each.

mod export;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// taskwatt: a StarPU-style task runtime with fine-grain energy attribution.
#[derive(Parser, Debug)]
#[command(name = "taskwatt", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a built-in app, check its result, and write its trace.
    Run(run::RunArgs),
    /// Export a trace to Chrome trace JSON (Perfetto) or CSV.
    Export(export::ExportArgs),
}

/// A CLI error: printed as `taskwatt: <message>` with exit code 1 (2 for usage errors,
/// which clap handles).
pub(crate) type CliResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Export(a) => export::export(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskwatt: {e}");
            let mut src = e.source();
            while let Some(s) = src {
                eprintln!("  caused by: {s}");
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
