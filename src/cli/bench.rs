//! `taskwatt bench taskbench <Task Bench flags>`: one Task Bench run, printing Task
//! Bench's own configuration and summary lines; `taskwatt bench metg`: a METG(50 %) sweep
//! of taskwatt under several policies (traced by default) beside rayon and sequential
//! baselines and external Task Bench programs (StarPU).

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use taskwatt::traces::Clock;
use taskwatt_taskbench::{
    clock_read_ns, core_to_core_first_pair, help, measure_peak, median, summarise, sweep,
    wants_help, App, CpuTicks, Dependence, KernelType, MetgConfig, Peak, Sample, SweepEta, System,
    SystemMetg, Tracing,
};

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Run Task Bench graphs (single-dash Task Bench flags; `-h` lists them).
    Taskbench(TaskbenchArgs),
    /// Sweep task granularity and report METG(50 %) per system.
    Metg(MetgArgs),
}

#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
struct TaskbenchArgs {
    /// Task Bench's flags, e.g. `-steps 1000 -width 2 -type stencil_1d -kernel
    /// compute_bound -iter 4096 -worker 2 --sched lws`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    flags: Vec<String>,
}

#[derive(Args, Debug)]
struct MetgArgs {
    /// Dependence pattern (Task Bench's -type).
    #[arg(long, default_value = "stencil_1d", value_parser = parse_pattern)]
    pattern: Dependence,
    /// Points per timestep.
    #[arg(long, default_value_t = 2)]
    width: i64,
    /// Timesteps.
    #[arg(long, default_value_t = 1000)]
    steps: i64,
    /// Kernel (Task Bench's -kernel).
    #[arg(long, default_value = "compute_bound", value_parser = parse_kernel)]
    kernel: KernelType,
    /// Repetitions of every point.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// taskwatt policies to measure (`lws+submitter`: lws with the submitting thread as
    /// the last worker, RuntimeBuilder::submitter_works).
    #[arg(long, value_delimiter = ',', default_value = "eager,ws,lws,prio")]
    policies: Vec<String>,
    /// Baselines to measure beside taskwatt (`rayon`, `sequential`; `none` for none).
    #[arg(long, value_delimiter = ',', default_value = "rayon,sequential")]
    baselines: Vec<String>,
    /// Whether taskwatt runs record their trace (to a temporary .twt file): `on`, `off`,
    /// or `both` (each policy twice, to measure what tracing costs).
    #[arg(long, default_value = "on", value_parser = ["on", "off", "both"])]
    tracing: String,
    /// Another Task Bench program to measure, as NAME=PATH (repeatable), e.g.
    /// `starpu=target/starpu/taskbench-starpu` (built by benches/starpu/build.sh).
    #[arg(long, value_name = "NAME=PATH")]
    external: Vec<String>,
    /// Workers of the parallel systems (default: all cores; at most the runtime's
    /// MAX_WORKERS, 4096: each is a thread, started before the sweep).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=taskwatt::runtime::MAX_WORKERS as u64))]
    workers: Option<usize>,
    /// Largest iteration count, as a power of two.
    #[arg(long, default_value_t = 20)]
    max_log2: u32,
    /// Smallest iteration count, as a power of two.
    #[arg(long, default_value_t = 4)]
    min_log2: u32,
    /// Repeat a run during which the host (hypervisor) gave more than this percentage of
    /// the CPU time to other guests (`steal` in /proc/stat); `off`: never.
    #[arg(long, default_value = "5", value_parser = parse_max_steal)]
    max_steal: StealLimit,
    /// At most this many repeats of one run for steal; the last is kept either way.
    #[arg(long, default_value_t = 3)]
    steal_retries: usize,
    /// Print every sample and the summary as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_pattern(s: &str) -> Result<Dependence, String> {
    Dependence::from_name(s).map_err(|e| e.to_string())
}

fn parse_kernel(s: &str) -> Result<KernelType, String> {
    KernelType::from_name(s).map_err(|e| e.to_string())
}

pub(crate) fn bench(a: BenchArgs) -> CliResult {
    match a.command {
        BenchCommand::Taskbench(t) => taskbench(t),
        BenchCommand::Metg(m) => metg(m),
    }
}

fn taskbench(a: TaskbenchArgs) -> CliResult {
    if wants_help(&a.flags) {
        print!("{}", help());
        return Ok(());
    }
    let app = App::parse(&a.flags)?;
    print!("{}", app.display());
    let run = app.run()?;
    print!("{}", app.report_timing(run.elapsed.as_secs_f64()));
    // taskwatt's own lines, after Task Bench's: its scripts match only their own.
    println!(
        "System {} ({} workers)",
        app.system.label(),
        app.system.cores(app.workers)
    );
    println!("Tasks Executed {}", run.tasks_executed);
    if let Some(sum) = run.checksum {
        println!("Checksum {sum:016x}");
    }
    Ok(())
}

/// The load averages over 1, 5 and 15 minutes (Linux), as /proc/loadavg gives them.
fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The first of [`load_average`]'s figures.
fn load_1min(load: Option<&str>) -> Option<f64> {
    load?.split_whitespace().next()?.parse().ok()
}

/// Before the sweep nothing of ours runs: a one-minute load of half a core or more is
/// other work, which takes the cores the systems are timed on.
fn warn_if_busy(load: Option<&str>, workers: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(l) = load_1min(load).filter(|l| *l >= 0.5) {
        println!(
            "warning: the machine is busy before the sweep (load average {l:.1} on {cpus} \
             CPUs, for {workers} workers): other work competes for the cores, so times are \
             longer and noisier than on an idle machine; stop it, or read the figures as \
             this machine's under load"
        );
    }
}

/// After the sweep the load includes the sweep's own threads (up to `workers` runnable):
/// more than that, by a core, means other work ran meanwhile.
fn warn_if_others_ran(load: Option<&str>, workers: usize) {
    if let Some(l) = load_1min(load).filter(|l| *l > workers as f64 + 1.0) {
        println!(
            "warning: other work ran during the sweep (load average {l:.1} for {workers} \
             workers of ours): compare systems within this sweep only, and prefer the \
             median column"
        );
    }
}

/// `t` seconds as `1m05s` or `42s`.
fn mm_ss(t: f64) -> String {
    let s = t.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[derive(Serialize)]
struct MetgReport<'a> {
    config: &'a MetgConfig,
    /// Measured before the sweep; every efficiency is against it.
    peak: Peak,
    /// Measured again after the sweep.
    peak_after: Peak,
    load_average_before: Option<String>,
    load_average_after: Option<String>,
    /// Share of the CPU time the host stole over the whole sweep (`null`: unknown).
    host_steal: Option<f64>,
    /// One cache-line transfer between the first two CPUs, in ns (`null`: fewer than two
    /// CPUs to pin to).
    core_to_core_ns: Option<f64>,
    /// One reading of the trace clock, in ns (a traced task takes three).
    clock_read_ns: Option<f64>,
    summary: Vec<SystemMetg>,
    samples: Vec<Sample>,
}

fn metg(a: MetgArgs) -> CliResult {
    let workers = a
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if a.repeat == 0 {
        return Err("--repeat must be >= 1 (sweeps per system)".into());
    }
    // METG's efficiency is FLOP/s against the machine's peak: a kernel without FLOPs is
    // 0 % efficient at every size, and its sweep says nothing.
    let probe = taskwatt_taskbench::Kernel {
        kind: a.kernel,
        iterations: 1,
        ..Default::default()
    };
    if probe.flops_per_task(0, 0, 0) == 0 {
        return Err(format!(
            "--kernel {} does no floating-point work, and METG measures efficiency in \
             FLOP/s: use compute_bound (the default), compute_bound2 or load_imbalance",
            a.kernel.name()
        )
        .into());
    }
    if a.max_log2 > 30 {
        return Err(format!(
            "--max-log2 {} is over 30 (2^30 iterations per task)",
            a.max_log2
        )
        .into());
    }
    if a.min_log2 > a.max_log2 {
        return Err(format!(
            "--min-log2 {} is above --max-log2 {}: the sweep goes from the first to the second",
            a.min_log2, a.max_log2
        )
        .into());
    }
    let tracings: &[Tracing] = match a.tracing.as_str() {
        "off" => &[Tracing::Off],
        "both" => &[Tracing::Temp, Tracing::Off],
        _ => &[Tracing::Temp],
    };
    let mut systems: Vec<System> = Vec::new();
    for p in &a.policies {
        for t in tracings {
            systems.push(System::Taskwatt {
                policy: p.clone(),
                tracing: t.clone(),
            });
        }
    }
    for e in &a.external {
        let Some((name, path)) = e
            .split_once('=')
            .filter(|(n, p)| !n.is_empty() && !p.is_empty())
        else {
            return Err(format!(
                "--external {e}: expected NAME=PATH, e.g. starpu=target/starpu/taskbench-starpu"
            )
            .into());
        };
        // Checked before the sweep, not when its first point reaches it.
        let program = std::path::Path::new(path);
        let runnable = std::fs::metadata(program).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        });
        if !runnable {
            return Err(format!(
                "--external {e}: {path} is not an executable file; build StarPU's Task Bench \
                 program first (benches/starpu/build.sh) or give its path"
            )
            .into());
        }
        systems.push(System::External {
            name: name.to_string(),
            program: path.into(),
        });
    }
    for b in a.baselines.iter().filter(|b| b.as_str() != "none") {
        match b.as_str() {
            "rayon" => systems.push(System::Rayon),
            "sequential" => systems.push(System::Sequential),
            other => {
                return Err(format!(
                    "unknown baseline `{other}` (--baselines): use rayon, sequential or none"
                )
                .into())
            }
        }
    }
    let cfg = MetgConfig {
        pattern: a.pattern,
        width: a.width,
        steps: a.steps,
        kernel: a.kernel,
        repeat: a.repeat,
        workers,
        systems,
        max_log2: a.max_log2,
        min_log2: a.min_log2,
        threshold: 0.5,
        max_steal: a.max_steal.0,
        steal_retries: a.steal_retries,
    };
    cfg.graph(1 << cfg.min_log2)?; // reject a bad graph before measuring anything

    let load_before = load_average();
    let ticks_before = CpuTicks::read();
    let peak = measure_peak(workers, 10);
    let c2c = core_to_core_first_pair();
    let clock = clock_read_ns(1_000_000, 3);
    if !a.json {
        print_peak("peak", &peak);
        match c2c {
            Some((x, y, ns)) => println!(
                "core to core: {ns:.0} ns per cache-line transfer between CPUs {x} and {y} \
                 (ping-pong, best of 3; the unit of a task's hand-off)"
            ),
            None => println!("core to core: not measured (fewer than two CPUs to pin to)"),
        }
        if let Some(ns) = clock {
            println!(
                "trace clock: {ns:.1} ns per reading ({}; a traced task reads it 3 times)",
                if Clock::uses_tsc() {
                    "the TSC"
                } else {
                    "CLOCK_MONOTONIC"
                }
            );
        }
        println!(
            "load average before: {}",
            load_before.as_deref().unwrap_or("unavailable")
        );
    }

    if !a.json {
        warn_if_busy(load_before.as_deref(), workers);
    }
    let bar = ProgressBar::new(cfg.runs() as u64);
    // Not indicatif's {eta}: runs get shorter as the sweep goes on (see SweepEta).
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}]")
            .expect("a valid progress template"),
    );
    let mut eta = SweepEta::new(&cfg);
    let samples = sweep(&cfg, &peak, &mut |s: &Sample| {
        eta.record(s);
        let left = eta
            .remaining_s()
            .map_or_else(String::new, |t| format!(", about {} left", mm_ss(t)));
        bar.set_message(format!(
            "{} 2^{}{left}",
            s.system,
            s.iterations.trailing_zeros()
        ));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    // Again after the sweep: a machine whose cores slowed down or sped up meanwhile
    // (another guest on the host, a thermal limit) shifts every efficiency.
    let peak_after = measure_peak(workers, 10);
    let load_after = load_average();
    let host_steal = ticks_before
        .zip(CpuTicks::read())
        .map(|(a, b)| a.stolen_since(b));
    let summary = summarise(&samples, &cfg.systems, cfg.threshold, &peak);

    if a.json {
        let report = MetgReport {
            config: &cfg,
            peak,
            peak_after,
            load_average_before: load_before,
            load_average_after: load_after,
            host_steal,
            core_to_core_ns: c2c.map(|(_, _, ns)| ns),
            clock_read_ns: clock,
            summary,
            samples,
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_peak("peak after the sweep", &peak_after);
    let moved = peak_after.flops(workers) / peak.flops(workers) - 1.0;
    if moved.abs() > 0.1 {
        println!(
            "  the peak of {workers} cores moved by {:+.0} % during the sweep: the efficiencies \
             below are against the first; compare systems within this sweep only",
            moved * 100.0
        );
    }
    println!(
        "load average after: {}",
        load_after.as_deref().unwrap_or("unavailable")
    );
    warn_if_others_ran(load_after.as_deref(), workers);
    print_steal(&cfg, &samples, host_steal);
    println!();
    print_efficiency_table(&cfg, &samples);
    println!();
    if a.tracing == "both" {
        print_tracing_cost(&cfg, &samples);
        println!();
    }
    println!(
        "METG(50%) in µs, {} width {} steps {}, {} reps ({} workers; sequential on 1 core):",
        cfg.pattern, cfg.width, cfg.steps, cfg.repeat, workers
    );
    let w = summary
        .iter()
        .map(|s| s.system.len())
        .max()
        .unwrap_or(0)
        .max(18);
    println!(
        "{:<w$} {:>10} {:>12} {:>16}",
        "system", "min", "median", "Task Bench mean"
    );
    for s in &summary {
        // A repetition whose finest point was still efficient gives only a bound.
        let bound = if s.at_most { "<= " } else { "" };
        let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{bound}{v:.3}"));
        println!(
            "{:<w$} {:>10} {:>12} {:>16}",
            s.system,
            opt(s.min_us),
            opt(s.median_us),
            s.taskbench.display()
        );
    }
    println!(
        "min and median: of the METGs of each repetition; Task Bench mean: the METG of the \
         mean time per point (Task Bench's own figure), which one slow repetition moves"
    );
    for s in &summary {
        if let (Some(m), Some(tb)) = (s.median_us, s.taskbench.us()) {
            if tb > 2.0 * m || tb < 0.5 * m {
                println!(
                    "  {}: the mean-based METG ({tb:.3} µs) is {:.1}× the median ({m:.3} \
                     µs): some repetitions were much slower or faster than the others (a \
                     descheduled worker, a busy machine); the median is the figure to quote",
                    s.system,
                    tb / m
                );
            }
        }
    }
    Ok(())
}

/// The peak, alone and with every worker's core computing at once.
fn print_peak(what: &str, peak: &Peak) {
    println!(
        "{what}: {:.3e} FLOP/s on one core alone ({}, 2^20 iterations in {:.3} ms); \
         {:.3e} per core with {} computing at once = {:.3e} FLOP/s (sequential is measured \
         against the first, the others against the second)",
        peak.flops_per_core,
        peak.implementation,
        peak.best_seconds * 1e3,
        peak.flops_per_core_together,
        peak.cores_together,
        peak.flops(peak.cores_together),
    );
}

/// What the host took: over the sweep, and the runs repeated or kept for it.
fn print_steal(cfg: &MetgConfig, samples: &[Sample], host_steal: Option<f64>) {
    let Some(share) = host_steal else {
        println!("host steal: unknown (/proc/stat unreadable); no run was repeated for it");
        return;
    };
    let repeated: usize = samples.iter().map(|s| s.repeats).sum();
    let over = |s: &&Sample| matches!((cfg.max_steal, s.steal), (Some(m), Some(v)) if v > m);
    let kept = samples.iter().filter(over).count();
    match cfg.max_steal {
        Some(max) => println!(
            "host steal: {:.1} % of the CPU time during the sweep; {repeated} runs repeated \
             (more than {:.0} % stolen){}",
            share * 100.0,
            max * 100.0,
            if kept > 0 {
                format!(", {kept} kept after {} repeats", cfg.steal_retries)
            } else {
                String::new()
            }
        ),
        None => println!(
            "host steal: {:.1} % of the CPU time during the sweep (no run repeated: \
             --max-steal off)",
            share * 100.0
        ),
    }
}

/// `--max-steal`, as a share of the CPU time (`None`: off).
#[derive(Clone, Copy, Debug)]
struct StealLimit(Option<f64>);

/// `--max-steal`: a percentage (0 to 100), or `off`.
fn parse_max_steal(s: &str) -> Result<StealLimit, String> {
    if s == "off" {
        return Ok(StealLimit(None));
    }
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(StealLimit(Some(p / 100.0))),
        _ => Err(format!(
            "`{s}`: expected a percentage of CPU time from 0 to 100 (e.g. 5), or `off`"
        )),
    }
}

/// The median of `v` (NaN when empty).
fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    median(&v).unwrap_or(f64::NAN)
}

/// Median efficiency per iteration count and system.
fn print_efficiency_table(cfg: &MetgConfig, samples: &[Sample]) {
    let labels: Vec<String> = cfg.systems.iter().map(System::label).collect();
    let w = labels.iter().map(String::len).max().unwrap_or(0).max(8);
    print!("median efficiency\n{:>8}", "iter");
    for l in &labels {
        print!(" {l:>w$}");
    }
    println!();
    for it in cfg.iterations() {
        print!("{:>8}", format!("2^{}", it.trailing_zeros()));
        for l in &labels {
            let e = median_of(
                samples
                    .iter()
                    .filter(|s| &s.system == l && s.iterations == it)
                    .map(|s| s.efficiency)
                    .collect(),
            );
            print!(" {:>w$}", format!("{:.1}%", e * 100.0));
        }
        println!();
    }
}

/// With `--tracing both`: per policy and iteration count, the median elapsed time traced
/// over untraced, minus one, beside the task duration (granularity) of the untraced run.
fn print_tracing_cost(cfg: &MetgConfig, samples: &[Sample]) {
    let pairs: Vec<(String, String)> = cfg
        .systems
        .iter()
        .filter_map(|s| match s {
            System::Taskwatt { policy, tracing } if tracing.is_on() => Some((
                s.label(),
                System::Taskwatt {
                    policy: policy.clone(),
                    tracing: Tracing::Off,
                }
                .label(),
            )),
            _ => None,
        })
        .filter(|(_, off)| cfg.systems.iter().any(|s| &s.label() == off))
        .collect();
    if pairs.is_empty() {
        return;
    }
    let med = |label: &str, it: i64, f: &dyn Fn(&Sample) -> f64| {
        median_of(
            samples
                .iter()
                .filter(|s| s.system == label && s.iterations == it)
                .map(f)
                .collect(),
        )
    };
    println!("tracing cost: median elapsed traced / untraced - 1 (untraced task granularity)");
    print!("{:>8}", "iter");
    for (on, _) in &pairs {
        print!(" {on:>24}");
    }
    println!();
    for it in cfg.iterations() {
        print!("{:>8}", format!("2^{}", it.trailing_zeros()));
        for (on, off) in &pairs {
            let cost = med(on, it, &|s| s.elapsed_s) / med(off, it, &|s| s.elapsed_s) - 1.0;
            let gran = med(off, it, &|s| s.granularity_us);
            print!(" {:>24}", format!("{:+.1}% ({gran:.1} µs)", cost * 100.0));
        }
        println!();
    }
}
