//! Other Task Bench implementations, run as programs: any binary that takes Task Bench's
//! flags and prints Task Bench's `Elapsed Time ... seconds` line can be measured beside
//! taskwatt (benches/starpu/ builds one for StarPU).
//!
//! The program is run once per point with the graph's flags and `-core <workers>`
//! (StarPU's Task Bench flag). Its own timing line is what counts, so process start-up
//! and runtime initialisation stay out, as they do for taskwatt. If it also prints
//! taskwatt's `Tasks Executed` and `Checksum` lines, the sweep checks that it ran the same
//! graph.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::error::TaskBenchError;
use super::graph::TaskGraph;
use super::outcome::BenchOutcome;

/// The flags that reproduce `graphs` (joined with `-and`), then `-core workers`.
pub(crate) fn flags(graphs: &[TaskGraph], workers: usize) -> Vec<String> {
    let mut out = Vec::new();
    for (i, g) in graphs.iter().enumerate() {
        if i > 0 {
            out.push("-and".to_string());
        }
        let mut push = |flag: &str, value: String| {
            out.push(flag.to_string());
            out.push(value);
        };
        push("-steps", g.timesteps.to_string());
        push("-width", g.max_width.to_string());
        push("-type", g.dependence.name().to_string());
        push("-kernel", g.kernel.kind.name().to_string());
        push("-iter", g.kernel.iterations.to_string());
        // The rest only when it differs from Task Bench's defaults, so that a program
        // implementing fewer flags still runs the common graphs.
        let d = TaskGraph::new(0);
        if g.output_bytes_per_task != d.output_bytes_per_task {
            push("-output", g.output_bytes_per_task.to_string());
        }
        if g.nb_fields != g.timesteps {
            push("-field", g.nb_fields.to_string());
        }
        if g.dependence.needs_radix() && g.radix != d.radix {
            push("-radix", g.radix.to_string());
        }
        if g.dependence.needs_period() && g.period != 3 {
            push("-period", g.period.to_string());
        }
    }
    out.push("-core".to_string());
    out.push(workers.to_string());
    out
}

/// Runs `program` on `graphs` with `workers` workers and reads its report.
pub(crate) fn run(
    name: &str,
    program: &Path,
    graphs: &[TaskGraph],
    workers: usize,
) -> Result<BenchOutcome, TaskBenchError> {
    let fail = |reason: String| TaskBenchError::External {
        name: name.to_string(),
        program: program.to_path_buf(),
        reason,
    };
    let out = Command::new(program)
        .args(flags(graphs, workers))
        .env("STARPU_SILENT", "1")
        .output()
        .map_err(|e| {
            fail(format!(
                "cannot run it: {e} (for StarPU, build it with benches/starpu/build.sh)"
            ))
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(fail(format!(
            "exited with {}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )));
    }
    parse_report(&stdout, graphs).map_err(fail)
}

/// Reads `Elapsed Time`, and `Tasks Executed` and `Checksum` where present.
pub(crate) fn parse_report(stdout: &str, graphs: &[TaskGraph]) -> Result<BenchOutcome, String> {
    let line = |prefix: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix).map(str::trim))
    };
    let elapsed = line("Elapsed Time ")
        .and_then(|v| v.strip_suffix("seconds"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| {
            "its output has no `Elapsed Time <seconds> seconds` line: is it a Task Bench \
             program?"
                .to_string()
        })?;
    let expected: i64 = graphs.iter().map(|g| g.timesteps * g.max_width).sum();
    let tasks_executed = match line("Tasks Executed ") {
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| format!("unreadable `Tasks Executed {v}` line"))?,
        None => expected as u64,
    };
    let checksum = match line("Checksum ") {
        Some(v) => Some(
            u64::from_str_radix(v, 16).map_err(|_| format!("unreadable `Checksum {v}` line"))?,
        ),
        None => None,
    };
    Ok(BenchOutcome {
        elapsed: Duration::from_secs_f64(elapsed),
        checksum,
        tasks_executed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dependence, KernelType};

    fn graph() -> TaskGraph {
        let mut g = TaskGraph::new(0);
        g.timesteps = 10;
        g.max_width = 2;
        g.dependence = Dependence::Stencil1d;
        g.kernel.kind = KernelType::ComputeBound;
        g.kernel.iterations = 64;
        g.finish().unwrap()
    }

    #[test]
    fn flags_reproduce_the_graph() {
        let f = flags(&[graph()], 2).join(" ");
        assert_eq!(
            f,
            "-steps 10 -width 2 -type stencil_1d -kernel compute_bound -iter 64 -core 2"
        );
        let mut g = graph();
        g.output_bytes_per_task = 64;
        g.nb_fields = 3;
        let f = flags(&[g.clone(), g], 1).join(" ");
        assert!(f.contains("-output 64 -field 3 -and -steps 10"), "{f}");
    }

    #[test]
    fn reads_elapsed_tasks_and_checksum() {
        let g = [graph()];
        let out = "Total Tasks 20\nElapsed Time 1.500000e-03 seconds\nFLOP/s 1e9\n\
                   Tasks Executed 20\nChecksum 00000000000000ff\n";
        let r = parse_report(out, &g).unwrap();
        assert_eq!(r.elapsed, Duration::from_micros(1500));
        assert_eq!((r.tasks_executed, r.checksum), (20, Some(255)));
        // A plain Task Bench program: no checksum; the graph's task count is assumed.
        let r = parse_report("Elapsed Time 2.0e-01 seconds\n", &g).unwrap();
        assert_eq!((r.tasks_executed, r.checksum), (20, None));
        assert!(parse_report("Total Tasks 20\n", &g)
            .unwrap_err()
            .contains("Elapsed Time"));
        assert!(parse_report("Elapsed Time 1 seconds\nChecksum xyz\n", &g)
            .unwrap_err()
            .contains("Checksum xyz"));
    }

    #[test]
    fn a_missing_program_says_how_to_build_it() {
        let e = run(
            "starpu",
            Path::new("/nonexistent/taskbench-starpu"),
            &[graph()],
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("benches/starpu/build.sh"), "{e}");
        assert!(e.contains("/nonexistent/taskbench-starpu"), "{e}");
    }
}
