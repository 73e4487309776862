//! `taskwatt merge RANK_TRACES... -o OUT`: the traces of the ranks of a distributed run
//! (`taskwatt run --mpi`) as one trace on rank 0's clock (`taskwatt_mpi::merge`).

use std::path::PathBuf;

use clap::Args;
use taskwatt::traces::read_trace;

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct MergeArgs {
    /// The ranks' traces (`t.rank0.twt t.rank1.twt ...`, any order).
    #[arg(required = true)]
    traces: Vec<PathBuf>,
    /// The merged trace to write.
    #[arg(short, long)]
    output: PathBuf,
    /// Print the merge's figures as JSON.
    #[arg(long)]
    json: bool,
    /// Read traces cut short (a job that ended on a failure) up to their last complete
    /// chunk; a rank without its clock estimates keeps its own clock.
    #[arg(long)]
    recover: bool,
    /// Merge traces whose metadata names different jobs (refused otherwise: their messages
    /// would not pair, and their clocks would be aligned on each other's).
    #[arg(long)]
    force: bool,
}

pub(crate) fn merge(a: MergeArgs) -> CliResult {
    let inputs: Vec<&std::path::Path> = a.traces.iter().map(|p| p.as_path()).collect();
    taskwatt::traces::refuse_output_over_input(&a.output, &inputs)?;
    let mut traces = Vec::new();
    for p in &a.traces {
        let t = if a.recover {
            let r = taskwatt::traces::recover_trace(p)?;
            if let Some(problem) = &r.problem {
                eprintln!(
                    "{}: {} complete chunk(s) read ({problem})",
                    p.display(),
                    r.complete_chunks
                );
            }
            r.trace
        } else {
            read_trace(p).map_err(|e| {
                super::report::recover_hint(
                    e,
                    "the traces of a job that ended on a failure: merge them with --recover",
                )
            })?
        };
        traces.push((p.display().to_string(), t));
    }
    let (out, m) = if a.force {
        if let Err(e) = taskwatt_mpi::merge::one_job(&traces) {
            eprintln!("warning (--force): {e}");
        }
        taskwatt_mpi::merge::merge_any_jobs(traces)?
    } else {
        taskwatt_mpi::merge::merge(traces)?
    };
    out.save(&a.output)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
        return Ok(());
    }
    println!(
        "merged {} ranks: {} tasks, {} messages matched; clocks on rank 0's:",
        m.ranks, m.tasks, m.messages
    );
    for (k, c) in m.clocks.iter().enumerate() {
        let moved = if c.shift != 0 {
            format!(
                ", moved {} ns later so that its receives follow their sends",
                c.shift
            )
        } else {
            String::new()
        };
        let own = if k > 0 && c.at0 == 0.0 && c.offset0 == 0.0 {
            " (no clock estimate, a trace cut short: its own clock)"
        } else {
            ""
        };
        println!(
            "  rank {k}: offset {:+.0} ns, drift {:+.3} ppm{moved}{own}",
            c.offset0,
            c.drift * 1e6
        );
    }
    println!(
        "receives before their send: {} with the clock estimates, {} after the merge",
        m.receives_before_send, m.after
    );
    if m.unmatched > 0 {
        println!(
            "warning: {} send(s) or receive(s) have no other half in these traces (a rank's \
             trace cut short, or a job that ended on an error)",
            m.unmatched
        );
    }
    for n in &m.nodes {
        println!(
            "  node {}: ranks {:?}, energy {}",
            n.node, n.ranks, n.energy
        );
    }
    println!("wrote {}", a.output.display());
    Ok(())
}
