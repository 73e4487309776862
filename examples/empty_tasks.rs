//! Per-task cost of empty tasks with data dependencies, traced: the probe behind the
//! paired measurements in BENCHMARKS.md (issue 3). Where `benches/overhead.rs` compares
//! taskwatt with rayon through criterion, this one prints one figure per graph, fast to
//! repeat, so that two builds can be run alternately on a noisy machine.
//!
//! ```text
//! cargo run --release --example empty_tasks -- [chain|independent|fan] [policy] [tasks] [reps] [--no-trace] [--latency] [--gated]
//! ```
//!
//! Graphs, as in the criterion bench: `chain` (every task read-writes one handle),
//! `independent` (no access), `fan` (one writer, tasks/2 readers that each write their own
//! handle, tasks/2 tasks that each read two of those; the handles are registered in the
//! timed region, as there). Defaults: `chain lws 20000 5`, traced into a temporary file.
//! `--latency` first prints what one cache line takes to move between the first two CPUs,
//! the unit in which a task's hand-off is paid (see `taskwatt_taskbench::core_to_core_ns`),
//! and what one reading of the trace clock costs (`taskwatt_taskbench::clock_read_ns`).
//! `--gated` holds the workers back while the graph is submitted (its first task, or every
//! independent task, also reads a handle the main thread has acquired for writing), and
//! prints the submission's cost alone before the total: the difference is what running
//! tasks on the other cores costs the submitting thread.
//! `TASKWATT_EMPTY_TASKS_TRACE=<path>` keeps the trace there: `taskwatt export --format csv`
//! then gives each task's submit, ready, start and end, from which the gaps between a
//! worker's tasks and the submitter's own rate can be read.

use std::time::Instant;

use taskwatt::traces::{TraceSink, TraceWriter};
use taskwatt::{Codelet, Runtime, Task};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trace = !args.iter().any(|a| a == "--no-trace");
    let gated = args.iter().any(|a| a == "--gated");
    if args.iter().any(|a| a == "--latency") {
        match taskwatt_taskbench::core_to_core_first_pair() {
            Some((a, b, ns)) => {
                println!("core to core: {ns:.0} ns per cache-line transfer (CPUs {a} and {b})")
            }
            None => println!("core to core: not measured (fewer than two CPUs to pin to)"),
        }
        if let Some(ns) = taskwatt_taskbench::clock_read_ns(1_000_000, 3) {
            println!("trace clock: {ns:.1} ns per reading (3 per traced task)");
        }
    }
    let pos: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let shape = pos.first().map_or("chain", |s| s.as_str());
    let policy = pos.get(1).map_or("lws", |s| s.as_str());
    let number = |i: usize, default: usize| -> usize {
        pos.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!(
                    "empty_tasks: argument {} must be a number, not `{s}`",
                    i + 1
                );
                std::process::exit(2)
            })
        })
    };
    let (tasks, reps) = (number(2, 20_000), number(3, 5));
    if !matches!(shape, "chain" | "independent" | "fan") {
        eprintln!("empty_tasks: unknown graph `{shape}`: use chain, independent or fan");
        std::process::exit(2);
    }

    let dir = tempfile::tempdir().expect("a temporary directory");
    // `TASKWATT_EMPTY_TASKS_TRACE=<path>` keeps the trace, to study the gaps between tasks.
    let path = std::env::var_os("TASKWATT_EMPTY_TASKS_TRACE").map_or_else(
        || dir.path().join("empty_tasks.twt"),
        std::path::PathBuf::from,
    );
    let writer = trace.then(|| TraceWriter::create(&path).expect("a trace file"));
    let sink = writer
        .as_ref()
        .map_or_else(TraceSink::null, TraceWriter::sink);
    let rt = match Runtime::builder()
        .workers(2)
        .policy(policy)
        .trace(sink)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("empty_tasks: {e}");
            std::process::exit(2)
        }
    };
    let empty = Codelet::new("empty").cpu(|_| {});
    let gate = rt.register(0u8);
    for _ in 0..reps {
        let start = Instant::now();
        let held = gated.then(|| rt.acquire_mut(&gate).expect("the gate"));
        // The first task waits for the gate when gated (every task, if independent).
        let first = |t| if gated { Task::r(t, &gate) } else { t };
        match shape {
            "chain" => {
                let h = rt.register(0u8);
                rt.submit(first(Task::new(&empty).rw(&h))).unwrap();
                for _ in 1..tasks {
                    rt.submit(Task::new(&empty).rw(&h)).unwrap();
                }
            }
            "independent" => {
                for _ in 0..tasks {
                    rt.submit(first(Task::new(&empty))).unwrap();
                }
            }
            _ => {
                let root = rt.register(0u8);
                rt.submit(first(Task::new(&empty).w(&root))).unwrap();
                let mids: Vec<_> = (0..tasks / 2).map(|_| rt.register(0u8)).collect();
                for m in &mids {
                    rt.submit(Task::new(&empty).r(&root).w(m)).unwrap();
                }
                for w in mids.windows(2) {
                    rt.submit(Task::new(&empty).r(&w[0]).r(&w[1])).unwrap();
                }
            }
        }
        if let Some(held) = held {
            let ns = start.elapsed().as_nanos() as f64 / tasks as f64;
            println!("{shape} {policy}: submitted in {ns:.0} ns/task with the workers held back");
            drop(held);
        }
        rt.wait_all().unwrap();
        let ns = start.elapsed().as_nanos() as f64 / tasks as f64;
        println!(
            "{shape} {policy} {}: {ns:.0} ns/task",
            if trace { "traced" } else { "untraced" }
        );
    }
    drop(gate);
    drop(rt);
    if let Some(w) = writer {
        w.finish().expect("the trace written");
    }
}
