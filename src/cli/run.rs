//! `taskwatt run <app>`: runs a built-in app, checks it, writes the trace, prints the
//! makespan, task count and GFlop/s (as a table, or as JSON with `--json`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use taskwatt::apps::{run_app, App, AppConfig, AppRun};
use taskwatt::runtime::{Runtime, RuntimeStats};
use taskwatt::traces::{TraceSink, TraceWriter, WorkerInfo};

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// The app to run.
    #[arg(value_enum)]
    app: App,
    /// Scheduling policy: eager, ws, lws or prio.
    #[arg(long, env = "TASKWATT_SCHED")]
    sched: Option<String>,
    /// Number of workers (default: one per usable core).
    #[arg(long)]
    workers: Option<usize>,
    /// Write the trace to this file (.twt).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Matrix or grid order.
    #[arg(long, default_value_t = 4096)]
    n: usize,
    /// Tile order.
    #[arg(long, default_value_t = 256)]
    tile: usize,
    /// Time steps (stencil).
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// Seed of the generated input.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the result check.
    #[arg(long)]
    no_check: bool,
}

#[derive(Serialize)]
struct RunOutput<'a> {
    app: &'a AppRun,
    gflops: f64,
    makespan_s: f64,
    policy: &'a str,
    workers: &'a [WorkerInfo],
    kernels: &'static str,
    stats: RuntimeStatsJson,
    trace: Option<TraceOut>,
}

#[derive(Serialize)]
struct RuntimeStatsJson {
    submitted: u64,
    executed: u64,
    failed: u64,
    cancelled: u64,
}

impl From<RuntimeStats> for RuntimeStatsJson {
    fn from(s: RuntimeStats) -> Self {
        RuntimeStatsJson {
            submitted: s.submitted,
            executed: s.executed,
            failed: s.failed,
            cancelled: s.cancelled,
        }
    }
}

#[derive(Serialize)]
struct TraceOut {
    path: PathBuf,
    bytes: u64,
    tasks: u64,
    samples: u64,
}

/// Shows tasks done / submitted on stderr while the graph runs (hidden when stderr is
/// not a terminal).
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(rt: &Runtime, label: String) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} tasks {per_sec}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(label);
        // The runtime lives on this thread; poll its counters through a cheap snapshot
        // function instead of sharing it.
        let stats = rt.stats_probe();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let st = stats();
                bar.set_length(st.submitted);
                bar.set_position(st.executed + st.failed + st.cancelled);
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn run(a: RunArgs) -> CliResult {
    let config = AppConfig {
        n: a.n,
        tile: a.tile,
        steps: a.steps,
        seed: a.seed,
        check: !a.no_check,
    };
    let writer = match &a.trace {
        Some(p) => Some(TraceWriter::create(p)?),
        None => None,
    };
    let sink = writer
        .as_ref()
        .map_or_else(TraceSink::null, TraceWriter::sink);
    let mut b = Runtime::builder()
        .trace(sink)
        .app(a.app.name())
        .param("n", config.n)
        .param("tile", config.tile)
        .param("seed", config.seed)
        .param("kernels", taskwatt::kernels::backend());
    if a.app == App::Stencil {
        b = b.param("steps", config.steps);
    }
    if let Some(w) = a.workers {
        b = b.workers(w);
    }
    if let Some(s) = &a.sched {
        b = b.policy(s.clone());
    }
    let rt = b.build()?;
    let workers = rt.workers().to_vec();
    let policy = rt.policy_name().to_string();
    let result = {
        let _progress = Progress::start(&rt, format!("{} ({policy})", a.app.name()));
        run_app(a.app, &rt, &config)
    };
    let stats = rt.shutdown();
    let trace = match writer {
        Some(w) => {
            let s = w.finish()?;
            Some(TraceOut {
                path: s.path,
                bytes: s.bytes,
                tasks: s.tasks,
                samples: s.samples,
            })
        }
        None => None,
    };
    let run = result?;
    let stats = stats?;
    let out = RunOutput {
        app: &run,
        gflops: run.gflops(),
        makespan_s: run.makespan.as_secs_f64(),
        policy: &policy,
        workers: &workers,
        kernels: taskwatt::kernels::backend(),
        stats: stats.into(),
        trace,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_table(&out);
    }
    Ok(())
}

fn print_table(o: &RunOutput<'_>) {
    let c = &o.app.config;
    let shape = match o.app.app {
        App::Stencil => format!("n={} tile={} steps={}", c.n, c.tile, c.steps),
        _ => format!("n={} tile={}", c.n, c.tile),
    };
    println!(
        "{} {shape}: {} workers, policy {}, kernels {}",
        o.app.app.name(),
        o.workers.len(),
        o.policy,
        o.kernels
    );
    println!("  {:<10} {:.3} s", "makespan", o.makespan_s);
    println!("  {:<10} {}", "tasks", o.app.tasks);
    println!("  {:<10} {:.2}", "GFlop/s", o.gflops);
    match &o.app.check {
        Some(ch) => println!(
            "  {:<10} {} = {:.2e} <= {:.2e}: {}",
            "check",
            ch.what,
            ch.value,
            ch.tolerance,
            if ch.passed { "ok" } else { "FAILED" }
        ),
        None => println!("  {:<10} skipped", "check"),
    }
    if let Some(t) = &o.trace {
        println!(
            "  {:<10} {} ({} tasks, {} energy samples, {:.1} KiB)",
            "trace",
            t.path.display(),
            t.tasks,
            t.samples,
            t.bytes as f64 / 1024.0
        );
    }
}
