//! `taskwatt meters [--json]`: every energy backend, what it found on this machine
//! (domains, resolution, wrap range) or the exact reason it is unavailable, and which one
//! `--meter auto` would use.

use clap::Args;
use taskwatt::energy::{detect, format_statuses, DetectOptions, MeterChoice};
use taskwatt::runtime::Runtime;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct MetersArgs {
    /// Print as JSON.
    #[arg(long)]
    json: bool,
    /// The meter choice to resolve (as `run --meter`).
    #[arg(long, default_value = "auto")]
    meter: MeterChoice,
    /// Print the simulated meter's default configuration (TOML, documented line by line):
    /// what `--sim-config` files override
    #[arg(long, conflicts_with = "json")]
    sim_defaults: bool,
}

pub(crate) fn meters(a: MetersArgs) -> CliResult {
    if a.sim_defaults {
        print!("{}", taskwatt::energy::SimConfig::DEFAULT_TOML);
        return Ok(());
    }
    let workers = Runtime::builder().worker_plan()?;
    let detected = detect(a.meter, &workers, &DetectOptions::default())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&detected.statuses)?);
    } else {
        print!("{}", format_statuses(&detected.statuses));
    }
    Ok(())
}
