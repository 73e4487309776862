//! `taskwatt run`'s outputs checked against its inputs before anything runs: no file it
//! writes may be one it reads.

use std::path::PathBuf;

use super::args::{perf_dir_outputs, RunArgs};
use super::CliResult;

/// No file the run writes may name (or link to) a file it reads (the energy model, the sim
/// config, a platform file) or another file it writes. Its outputs: `--trace` (each rank's
/// under `--mpi`), the plots of `--svg`, and the performance models' directory (models.json,
/// bus.json and the saved energy model). Checked before anything runs, so nothing is
/// overwritten. The saved energy model is the one exception: where it is the `--energy-model`
/// the run reads, the run does not save over it (`save_energy_model` says so).
pub(super) fn refuse_trace_over_inputs(a: &RunArgs) -> CliResult {
    let platform = a
        .platform
        .as_deref()
        .map(std::path::Path::new)
        .filter(|p| p.is_file());
    let inputs: Vec<&std::path::Path> = [
        a.app.energy_model.as_deref(),
        a.energy.sim_config.as_deref(),
        platform,
    ]
    .into_iter()
    .flatten()
    .collect();
    // The performance models' files: models.json and bus.json over every input, the saved
    // energy model over the sim config and platform (over the --energy-model read, it is
    // not saved: `save_energy_model`), and all of them over the trace (written at the end,
    // then models.json over it at shutdown, or the reverse).
    let (mut perf_files, saved) = match (a.mpi, a.app.perf_models()?) {
        (false, Some(d)) => (
            perf_dir_outputs(&a.app)?,
            Some(d.join(taskwatt::session::run_energy_model(a.app.app))),
        ),
        _ => (Vec::new(), None),
    };
    for f in &perf_files {
        taskwatt::traces::refuse_output_over_input(f, &inputs)?;
    }
    if let Some(saved) = saved {
        let not_model: Vec<&std::path::Path> = [a.energy.sim_config.as_deref(), platform]
            .into_iter()
            .flatten()
            .collect();
        taskwatt::traces::refuse_output_over_input(&saved, &not_model)?;
        perf_files.push(saved);
    }
    if let Some(trace) = &a.trace {
        taskwatt::traces::refuse_output_over_input(trace, &inputs)?;
        let perf: Vec<&std::path::Path> = perf_files.iter().map(PathBuf::as_path).collect();
        taskwatt::traces::refuse_output_over_input(trace, &perf).map_err(|_| {
            format!(
                "--trace {} is a file of the performance models' directory, which the run \
                 rewrites at its end: give another path (or --perfmodel-dir elsewhere)",
                trace.display()
            )
        })?;
        if a.mpi {
            // Each rank writes `stem.rankN.ext`: none of them may be an input.
            for input in &inputs {
                if let Some(r) = rank_of(trace, input) {
                    return Err(format!(
                        "--trace {} under --mpi writes rank {r}'s trace to {}, an input of \
                         the run: give another --trace",
                        trace.display(),
                        input.display()
                    )
                    .into());
                }
            }
        }
    }
    if let Some(dir) = &a.svg {
        // Before the run: a file given for the directory failed only after the whole app
        // had run and its report was printed.
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "--svg {} is not a directory: --svg takes a directory to write its plots into",
                dir.display()
            )
            .into());
        }
        super::refuse_dir_over_inputs(dir, "--svg", &[], Some("svg"), &inputs)?;
    }
    Ok(())
}

/// The rank whose trace, for `--trace trace --mpi`, is `input` (`stem.rankN.ext` beside it).
fn rank_of(trace: &std::path::Path, input: &std::path::Path) -> Option<usize> {
    let stem = trace.file_stem()?.to_str()?;
    let ext = trace.extension().map_or(Some("twt"), |e| e.to_str())?;
    let name = input.file_name()?.to_str()?;
    let r: usize = name
        .strip_prefix(stem)?
        .strip_prefix(".rank")?
        .strip_suffix(ext)?
        .strip_suffix('.')?
        .parse()
        .ok()?;
    let parent = |p: &std::path::Path| {
        let d = p.parent().filter(|d| !d.as_os_str().is_empty());
        d.unwrap_or(std::path::Path::new(".")).canonicalize().ok()
    };
    (parent(trace)? == parent(input)?).then_some(r)
}
