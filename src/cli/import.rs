//! `taskwatt import`: turns another runtime's trace into a `.twt` trace, so that the
//! attribution works on it: generic CSV (tasks, samples, workers) or StarPU's `tasks.rec`.

use std::path::PathBuf;

use clap::Args;
use taskwatt::traces::{import_csv_to, import_starpu, ImportOptions, ReadProgress, TimeUnit};

use super::CliResult;

#[derive(Args, Debug)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("source").required(true).multiple(false)))]
pub(crate) struct ImportArgs {
    /// tasks.csv: columns type, worker, start, end (optional id, arch); see docs/import.md.
    #[arg(long, group = "source")]
    tasks: Option<PathBuf>,
    /// StarPU's tasks.rec (from starpu_fxt_tool); its times are in ms.
    #[arg(long, group = "source")]
    starpu: Option<PathBuf>,
    /// samples.csv: columns time, domain, and energy_j (cumulative J) or power_w (power
    /// readings of the domains --domains declares `power`).
    #[arg(long)]
    samples: Option<PathBuf>,
    /// workers.csv: columns worker, domain (which workers each domain covers).
    #[arg(long)]
    workers: Option<PathBuf>,
    /// domains.csv: columns domain, sensor (counter, power or sampled_counter), and as
    /// needed measures, window_ms, sampled_ms, update_ms, resolution_j, workers: what each
    /// domain's sensor is, so that the attribution models it (docs/import.md).
    #[arg(long)]
    domains: Option<PathBuf>,
    /// Unit of the CSV times: s, ms, us or ns. Default: s with --tasks; ms with --starpu
    /// (tasks.rec times are always ms, and the samples must be on the same clock).
    #[arg(long)]
    time_unit: Option<TimeUnit>,
    /// The meter's update interval (e.g. 1ms for RAPL): lets the attribution align the
    /// intervals to the meter's updates.
    #[arg(long, value_parser = super::parse_duration)]
    update_interval: Option<std::time::Duration>,
    /// The meter's energy resolution in J (one counter step; RAPL: 0.000061).
    #[arg(long)]
    energy_resolution: Option<f64>,
    /// The samples' energy_j column is a raw counter (J) that wraps after this many J
    /// (RAPL: max_energy_range_uj / 1e6): each step back is undone.
    #[arg(long, value_name = "J")]
    counter_wrap: Option<f64>,
    /// With --tasks (--starpu builds its trace in memory): the most memory the tasks take
    /// while they are sorted (32 bytes each; e.g. `256MiB`). Past it, they are sorted into a
    /// temporary file in the output's directory and merged back, so that any number of
    /// tasks imports in bounded memory.
    #[arg(long, value_name = "SIZE", value_parser = taskwatt::runtime::parse_size, default_value = "32MiB", conflicts_with = "starpu")]
    task_memory: u64,
    /// The trace to write.
    #[arg(short, long)]
    output: PathBuf,
}

pub(crate) fn import(a: ImportArgs) -> CliResult {
    let inputs: Vec<&std::path::Path> = [&a.tasks, &a.starpu, &a.samples, &a.workers, &a.domains]
        .into_iter()
        .flatten()
        .map(|p| p.as_path())
        .collect();
    taskwatt_traces::refuse_output_over_input(&a.output, &inputs)?;
    let unit = a.time_unit.unwrap_or(if a.starpu.is_some() {
        TimeUnit::Ms
    } else {
        TimeUnit::S
    });
    let mut opts =
        ImportOptions::new(unit).task_memory(usize::try_from(a.task_memory).unwrap_or(usize::MAX));
    if let Some(u) = a.update_interval {
        opts = opts.update_interval_ns(u.as_nanos().min(u64::MAX as u128) as u64);
    }
    if let Some(r) = a.energy_resolution {
        if !(r.is_finite() && r >= 0.0) {
            return Err(format!(
                "--energy-resolution {r}: give the counter's step in J (>= 0), e.g. 0.000061"
            )
            .into());
        }
        opts = opts.resolution_j(r);
    }
    if let Some(w) = a.counter_wrap {
        if !(w.is_finite() && w > 0.0) {
            return Err(format!("--counter-wrap {w}: give the counter's range in J (> 0)").into());
        }
        opts = opts.counter_wrap_j(w);
    }
    if let Some(s) = &a.samples {
        opts = opts.samples(s);
    }
    if let Some(w) = &a.workers {
        if a.samples.is_none() {
            return Err(format!(
                "--workers {}: it says which workers each energy domain covers; give \
                 --samples too (without energy samples it has nothing to map)",
                w.display()
            )
            .into());
        }
        opts = opts.workers(w);
    }
    if let Some(d) = &a.domains {
        if a.samples.is_none() {
            return Err(format!(
                "--domains {}: it declares the sensors of a samples file; give --samples too",
                d.display()
            )
            .into());
        }
        opts = opts.domains(d);
    }
    let trace = match (&a.tasks, &a.starpu) {
        (Some(t), _) => {
            // Straight to the file, never the whole trace in memory.
            let read = ReadProgress::new();
            let shown = ReadBar::start(t, read.clone());
            let w = import_csv_to(t, &opts.progress(read), &a.output);
            drop(shown);
            let w = w?;
            if let (Some(tasks), Some(samples)) = (w.task_span, w.sample_span) {
                warn_if_disjoint(tasks, samples, unit);
            }
            let sorted = if w.spilled_bytes > 0 {
                format!(
                    "; sorted through a temporary file of {:.0} MiB, removed (--task-memory)",
                    w.spilled_bytes as f64 / (1u64 << 20) as f64
                )
            } else {
                String::new()
            };
            // The span the times give, in the unit they were read in: a file of ms read
            // as s (the default) imported as a 100 s run without a word.
            let spans = w.task_span.map_or(String::new(), |(a, b)| {
                format!(
                    " spanning {:.3} s, their times read in {}",
                    (b - a) as f64 * 1e-9,
                    if w.time_unit == unit {
                        format!("{unit} (--time-unit; ns in taskwatt's own export)")
                    } else {
                        format!(
                            "{} (taskwatt's own export: its start_ns and end_ns)",
                            w.time_unit
                        )
                    }
                )
            });
            eprintln!(
                "wrote {} ({}{spans}, {}, {}{sorted})",
                w.path.display(),
                super::count(w.tasks, "task"),
                super::count(w.samples, "energy sample"),
                super::count(w.domains as u64, "domain")
            );
            warn_overlapping(w.overlapping, w.tasks);
            return Ok(());
        }
        (None, Some(rec)) => {
            let imp = import_starpu(rec, &opts)?;
            eprintln!(
                "{}: {} executed tasks; skipped {} control records, {} records without worker or times and {} with WorkerId -1 (no worker); {} named from their perfmodel, {} unnamed",
                rec.display(),
                imp.trace.task_count(),
                imp.skipped.control,
                imp.skipped.not_executed,
                imp.skipped.no_worker,
                imp.named_from_model,
                imp.unnamed
            );
            if imp.accesses > 0 || imp.accesses_left_out > 0 {
                eprintln!(
                    "  {} data accesses kept from Handles, Modes and Sizes (the what-if's \
                     copies){}",
                    imp.accesses,
                    if imp.accesses_left_out > 0 {
                        format!(
                            "; {} left out (SCRATCH buffers or modes not known)",
                            imp.accesses_left_out
                        )
                    } else {
                        String::new()
                    }
                );
            }
            warn_overlapping(imp.overlapping, imp.trace.task_count() as u64);
            // As an empty --tasks file is: a trace of nothing is no use, and says nothing.
            if imp.trace.task_count() == 0 {
                return Err(format!(
                    "{}: no executed task in it: give the tasks.rec that starpu_fxt_tool \
                     writes from a run's FxT trace (docs/import.md)",
                    rec.display()
                )
                .into());
            }
            imp.trace
        }
        (None, None) => unreachable!("clap requires --tasks or --starpu"),
    };
    let span = |v: &mut dyn Iterator<Item = u64>| {
        v.fold(None, |acc: Option<(u64, u64)>, t| {
            Some(acc.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
        })
    };
    let tasks = span(&mut trace.tasks().flat_map(|(t, _)| [t.start.0, t.end.0]));
    let samples = span(&mut trace.samples.iter().map(|s| s.t.0));
    if let (Some(tasks), Some(samples)) = (tasks, samples) {
        warn_if_disjoint(tasks, samples, unit);
    }
    let s = trace.save(&a.output)?;
    eprintln!(
        "wrote {} ({}, {}, {})",
        s.path.display(),
        super::count(s.tasks, "task"),
        super::count(s.samples, "energy sample"),
        super::count(trace.domains.len() as u64, "domain")
    );
    Ok(())
}

/// Says when tasks overlap on one worker: the source's "worker" is not one thread running
/// one task at a time, and the attribution would count each overlapping task as running.
fn warn_overlapping(overlapping: u64, tasks: u64) {
    if overlapping > 0 {
        eprintln!(
            "warning: {overlapping} of the {tasks} tasks start before an earlier task of \
             their worker ended: a worker runs one task at a time; if the worker column \
             names a process or a node rather than a thread, give each thread its own \
             worker id (the attribution counts every overlapping task as running)"
        );
    }
}

/// Says when no energy sample falls within the tasks' span: almost always a wrong
/// `--time-unit` (the attribution would then see no task in any interval).
fn warn_if_disjoint((first, last): (u64, u64), (s0, s1): (u64, u64), unit: TimeUnit) {
    if s1 < first || s0 > last {
        eprintln!(
            "warning: no energy sample falls within the tasks' span (tasks {:.6} s to {:.6} s, \
             samples {:.6} s to {:.6} s, times read as {unit}): check --time-unit",
            first as f64 * 1e-9,
            last as f64 * 1e-9,
            s0 as f64 * 1e-9,
            s1 as f64 * 1e-9
        );
    }
}

/// The bytes of a tasks file read so far, on stderr while the import runs (indicatif's
/// bar, hidden when stderr is not a terminal); cleared when dropped. Against the file's
/// size, unless it is compressed (then the bytes alone: they are counted decompressed).
struct ReadBar {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ReadBar {
    fn start(path: &std::path::Path, read: ReadProgress) -> ReadBar {
        use indicatif::{ProgressBar, ProgressStyle};
        let gz = path.extension().is_some_and(|e| e == "gz");
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let bar = if gz || size == 0 {
            ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {msg}: {bytes} read ({bytes_per_sec})")
                    .expect("valid template"),
            )
        } else {
            ProgressBar::new(size).with_style(
                ProgressStyle::with_template(
                    "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            )
        };
        bar.set_message(format!("reading {}", path.display()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(std::sync::atomic::Ordering::Relaxed) {
                let n = read.bytes();
                bar.set_position(n);
                if !gz && size > 0 && n >= size {
                    bar.set_message("sorting each worker's tasks and writing".to_string());
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        ReadBar {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ReadBar {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
