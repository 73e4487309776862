//! Subcommands of the `taskwatt` CLI, one file each.

mod args;
mod bench;
mod compare;
mod export;
mod import;
mod logger;
mod merge;
mod meters;
mod model;
mod mpi;
mod perfmodel;
mod progress;
mod report;
mod report_files;
mod run;
mod run_outputs;
mod run_platform;
mod run_table;
mod signals;
mod sim_interval;
mod sim_rows;
mod simulate;

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
    Run(args::RunArgs),
    /// Export a trace to Chrome trace JSON (Perfetto), CSV, Graphviz DOT or Paje (ViTE).
    Export(export::ExportArgs),
    /// List the energy meters: what each found here, or why it is unavailable.
    Meters(meters::MetersArgs),
    /// Attribute a trace's energy to its task types (tables, JSON, CSV, SVG).
    Report(report::ReportArgs),
    /// Fit one energy model on one or more traces.
    Fit(model::FitArgs),
    /// Predict the energy of traces with a fitted model.
    Predict(model::PredictArgs),
    /// Run an app under several policies, fit on one, predict the others.
    Compare(compare::CompareArgs),
    /// Import another runtime's trace (CSV, StarPU tasks.rec) as a taskwatt trace.
    Import(import::ImportArgs),
    /// Benchmarks: Task Bench graphs and METG sweeps against rayon and sequential baselines.
    Bench(bench::BenchArgs),
    /// The performance models that `run` records: show, clear, check against a trace.
    Perfmodel(perfmodel::PerfmodelArgs),
    /// Merge the traces of the ranks of a distributed run into one, on rank 0's clock.
    Merge(merge::MergeArgs),
    /// Replay a trace's graph in virtual time on a platform file, under any policy: its
    /// makespan and energy (what-if).
    Simulate(simulate::SimulateArgs),
}

/// Parses a duration the way `humantime` does: `10ms`, `1s`, `500us`, `2.5s`, `1min 30s`
/// (units ns, us or µs, ms, s, min, h, ...); a bare number is refused, since a period in
/// milliseconds and one in seconds differ by a thousand.
/// `1 trace`, `2 traces`: a count and its noun, in the singular for one.
pub(crate) fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("`{s}` has no unit: write e.g. 10ms, 1s, 500us"));
    }
    let d = humantime::parse_duration(s).map_err(|e| match e {
        // Too large, or finer than a nanosecond.
        humantime::DurationError::NumberOverflow => format!(
            "`{s}` is out of range: taskwatt accepts durations from 1ns to one week (604800s)"
        ),
        e => {
            format!("`{s}` is not a duration ({e}): write e.g. 10ms, 1s, 500us, 2.5s or 1min 30s")
        }
    })?;
    // A week is far beyond any period or calibration that makes sense, and keeps every
    // sum of durations safe.
    const MAX: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
    if d > MAX {
        return Err(format!(
            "`{s}` is longer than the longest duration taskwatt accepts (one week, 604800s)"
        ));
    }
    Ok(d)
}

/// Creates the directory an option names for its output files (`--svg DIR`, `--csv DIR`,
/// `--keep DIR`), with an error that names the option when the path is a file.
pub(crate) fn output_dir(dir: &std::path::Path, flag: &str) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "{flag} {} is not a directory: {flag} takes a directory to write its files into",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{flag}: cannot create the directory {}: {e}", dir.display()))
}

/// Refuses an input that a file written into `dir` (by `flag`) would replace: one named in
/// `names`, or, for outputs named per domain, any file of extension `ext` there.
pub(crate) fn refuse_dir_over_inputs(
    dir: &std::path::Path,
    flag: &str,
    names: &[&str],
    ext: Option<&str>,
    inputs: &[&std::path::Path],
) -> Result<(), Box<dyn std::error::Error>> {
    for name in names {
        taskwatt_traces::refuse_output_over_input(&dir.join(name), inputs)?;
    }
    if let Some(ext) = ext {
        for input in inputs {
            let same_dir = match (input.parent(), dir.canonicalize()) {
                (Some(p), Ok(d)) => {
                    let p = if p.as_os_str().is_empty() {
                        std::path::Path::new(".")
                    } else {
                        p
                    };
                    p.canonicalize().is_ok_and(|p| p == d)
                }
                _ => false,
            };
            if same_dir && input.extension().is_some_and(|e| e == ext) {
                return Err(format!(
                    "{flag} {} would write .{ext} files beside the input {}, which one of them \
                     could replace: choose another directory (or rename the input)",
                    dir.display(),
                    input.display()
                )
                .into());
            }
        }
    }
    Ok(())
}

/// A CLI error: printed as `taskwatt: <message>` with exit code 1 (2 for usage errors,
/// which clap handles).
pub(crate) type CliResult = Result<(), Box<dyn std::error::Error>>;

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = logger::init() {
        eprintln!("taskwatt: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = taskwatt_traces::Clock::check_env() {
        eprintln!("taskwatt: {e}");
        return ExitCode::FAILURE;
    }
    let res = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Export(a) => export::export(a),
        Command::Meters(a) => meters::meters(a),
        Command::Report(a) => report::report(a),
        Command::Fit(a) => model::fit(a),
        Command::Predict(a) => model::predict(a),
        Command::Compare(a) => compare::compare(a),
        Command::Import(a) => import::import(a),
        Command::Bench(a) => bench::bench(a),
        Command::Perfmodel(a) => perfmodel::perfmodel(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Merge(a) => merge::merge(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let top = e.to_string();
            eprintln!("taskwatt: {top}");
            if let Some(i) = e.downcast_ref::<signals::Interrupted>() {
                return ExitCode::from(u8::try_from(128 + i.signal).unwrap_or(1));
            }
            let mut src = e.source();
            while let Some(s) = src {
                // A cause the message already says in full is not said twice.
                let cause = s.to_string();
                if !top.contains(&cause) {
                    eprintln!("  caused by: {cause}");
                }
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_need_a_unit_and_stay_under_a_week() {
        assert_eq!(parse_duration("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration(" 2.5s "), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("1min 30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 parsecs")
            .unwrap_err()
            .contains("not a duration"));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("8 days").unwrap_err().contains("one week"));
    }
}
