//! `taskwatt perfmodel show|clear|check`: the history-based performance models (like
//! `starpu_perfmodel_display`), and how well they predict the durations of a trace.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;
use taskwatt::runtime::{PerfModels, CALIBRATED};
use taskwatt::traces::{read_trace, Arch, TaskStatus};

use super::CliResult;

#[derive(Args, Debug)]
pub(crate) struct PerfmodelArgs {
    #[command(subcommand)]
    command: PerfmodelCommand,
}

#[derive(Subcommand, Debug)]
enum PerfmodelCommand {
    /// Per codelet, architecture and footprint: executions, mean and standard deviation of
    /// the duration; per codelet and architecture, the power law fitted across sizes.
    Show {
        /// Only this codelet.
        codelet: Option<String>,
        #[command(flatten)]
        dir: DirArg,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
        /// Also write one SVG per codelet into this directory: duration against
        /// footprint, log-log, per architecture, with the fitted power law.
        #[arg(long, value_name = "DIR")]
        svg: Option<PathBuf>,
    },
    /// Remove the models of one codelet, or of all.
    Clear {
        /// Only this codelet.
        codelet: Option<String>,
        #[command(flatten)]
        dir: DirArg,
    },
    /// Predict the duration of every task of a trace from the models, and compare with
    /// what it measured: the median and 90th percentile of |predicted - measured| /
    /// measured per task type. Check a run that did not record into the models
    /// (`run --no-perfmodel`), or its own tasks are part of the prediction.
    Check {
        /// The trace.
        trace: PathBuf,
        #[command(flatten)]
        dir: DirArg,
        /// JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct DirArg {
    /// The models' directory (default: $TASKWATT_PERFMODEL_DIR, else
    /// $XDG_CACHE_HOME/taskwatt/perfmodels, else ~/.cache/taskwatt/perfmodels). Also
    /// `--perfmodel-dir`, as `run` and `compare` spell it.
    #[arg(long, visible_alias = "perfmodel-dir", value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArg {
    fn get(&self) -> Result<PathBuf, Box<dyn std::error::Error>> {
        match &self.dir {
            Some(d) => Ok(d.clone()),
            None => Ok(PerfModels::default_dir()?),
        }
    }
}

pub(crate) fn perfmodel(a: PerfmodelArgs) -> CliResult {
    match a.command {
        PerfmodelCommand::Show {
            codelet,
            dir,
            json,
            svg,
        } => show(codelet, &dir.get()?, json, svg.as_deref()),
        PerfmodelCommand::Clear { codelet, dir } => {
            let d = dir.get()?;
            let n = PerfModels::clear(&d, codelet.as_deref())?;
            match (&codelet, n) {
                (Some(c), 0) => eprintln!("no model of codelet `{c}` in {}", d.display()),
                _ => eprintln!("removed the models of {n} codelet(s) from {}", d.display()),
            }
            Ok(())
        }
        PerfmodelCommand::Check { trace, dir, json } => check(&trace, &dir.get()?, json),
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn show(
    codelet: Option<String>,
    dir: &std::path::Path,
    json: bool,
    svg: Option<&std::path::Path>,
) -> CliResult {
    let mut m = PerfModels::load(dir)?;
    if let Some(c) = &codelet {
        m.codelets.retain(|k, _| k == c);
        if m.codelets.is_empty() {
            return Err(format!(
                "no model of codelet `{c}` in {} (`taskwatt perfmodel show` lists them)",
                dir.display()
            )
            .into());
        }
    }
    if let Some(out) = svg {
        write_svg(&m, out)?;
    }
    if json {
        #[derive(Serialize)]
        struct Fit {
            arch: Arch,
            a: f64,
            b: f64,
            executions: u64,
        }
        #[derive(Serialize)]
        struct Out<'a> {
            dir: &'a std::path::Path,
            calibrated_after: u64,
            codelets: &'a BTreeMap<String, Vec<taskwatt::runtime::PerfEntry>>,
            regressions: BTreeMap<&'a str, Vec<Fit>>,
        }
        let regressions = m
            .codelets
            .keys()
            .map(|c| {
                let fits = Arch::ALL
                    .into_iter()
                    .filter_map(|arch| {
                        m.regression(c, arch).map(|(a, b, executions)| Fit {
                            arch,
                            a,
                            b,
                            executions,
                        })
                    })
                    .collect();
                (c.as_str(), fits)
            })
            .collect();
        let out = Out {
            dir,
            calibrated_after: CALIBRATED,
            codelets: &m.codelets,
            regressions,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("performance models in {}", dir.display());
    let cuda = dir.join("cuda");
    if cuda.join("models.json").exists() {
        println!(
            "  runs with CUDA GPUs keep theirs apart: --dir {}",
            cuda.display()
        );
    }
    if m.codelets.is_empty() {
        println!("  none yet: `taskwatt run` records them (unless --no-perfmodel)");
        return Ok(());
    }
    println!(
        "  a footprint is calibrated after {CALIBRATED} executions; other sizes use t = a * size^b"
    );
    for (name, entries) in &m.codelets {
        println!("\n{name}");
        println!(
            "  {:<5} {:>12} {:>7} {:>12} {:>12}  calibrated",
            "arch", "footprint", "count", "mean", "std dev"
        );
        for e in entries {
            println!(
                "  {:<5} {:>12} {:>7} {:>12} {:>12}  {}",
                e.arch.name(),
                e.footprint,
                e.history.count,
                fmt_ns(e.history.mean_ns),
                fmt_ns(e.history.std_ns()),
                if e.history.count >= CALIBRATED {
                    "yes"
                } else {
                    "no"
                }
            );
        }
        for arch in Arch::ALL {
            if let Some((a, b, _)) = m.regression(name, arch) {
                let how = match m.fitted_exponent(name, arch) {
                    Some(f) if f < 0.0 => format!(
                        "its calibrated footprints fit exponent {f:.3}: larger data did not \
                         run longer, so one duration for every size"
                    ),
                    _ => "fitted on its calibrated footprints".to_string(),
                };
                println!("  {}: t = {a:.4e} ns * size^{b:.3} ({how})", arch.name());
            }
        }
    }
    Ok(())
}

/// One SVG per codelet: `<codelet>.svg` in `out`.
fn write_svg(m: &PerfModels, out: &std::path::Path) -> CliResult {
    super::output_dir(out, "--svg")?;
    let mut files = Vec::new();
    let mut names = taskwatt::plots::FileNames::default();
    for (name, entries) in &m.codelets {
        let series: Vec<taskwatt::plots::SizeSeries> = Arch::ALL
            .into_iter()
            .filter(|a| entries.iter().any(|e| e.arch == *a))
            .map(|arch| {
                let points = entries
                    .iter()
                    .filter(|e| e.arch == arch && e.history.count > 0)
                    .map(|e| {
                        (
                            e.footprint as f64,
                            e.history.mean_ns / 1e3,
                            e.history.std_ns() / 1e3,
                        )
                    })
                    .collect();
                let law = m.regression(name, arch).map(|(a, b, _)| (a, b));
                (arch.name().to_string(), points, law)
            })
            .collect();
        let path = out.join(names.svg("", name));
        taskwatt::plots::time_vs_size(
            &path,
            &format!("{name}: duration against footprint"),
            &series,
        )?;
        files.push(path.display().to_string());
    }
    eprintln!("wrote {}", files.join(", "));
    Ok(())
}

#[derive(Serialize)]
struct TypeCheck {
    task_type: String,
    tasks: usize,
    predicted: usize,
    median_error_pct: Option<f64>,
    p90_error_pct: Option<f64>,
}

fn check(trace: &std::path::Path, dir: &std::path::Path, json: bool) -> CliResult {
    let m = PerfModels::load(dir)?;
    let t = read_trace(trace)?;
    // Per type: the relative errors of the tasks with a prediction, and the task count.
    let mut by_type: BTreeMap<String, (usize, Vec<f64>)> = BTreeMap::new();
    for chunk in &t.tasks {
        for r in &chunk.records {
            if r.status != TaskStatus::Ok {
                continue;
            }
            let name = t.codelet_name(r.codelet);
            let measured = r.end.saturating_sub(r.start) as f64;
            let e = by_type
                .entry(format!("{name}@{}", r.arch.name()))
                .or_default();
            e.0 += 1;
            if measured <= 0.0 {
                continue;
            }
            if let Some(p) = m.predict(name, r.arch, r.footprint) {
                e.1.push(((p.mean_ns - measured) / measured).abs() * 100.0);
            }
        }
    }
    let pct = |v: &mut Vec<f64>, q: f64| -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[((v.len() - 1) as f64 * q).round() as usize])
    };
    let rows: Vec<TypeCheck> = by_type
        .into_iter()
        .map(|(task_type, (tasks, mut errs))| TypeCheck {
            task_type,
            tasks,
            predicted: errs.len(),
            median_error_pct: pct(&mut errs, 0.5),
            p90_error_pct: pct(&mut errs, 0.9),
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    println!(
        "durations of {} predicted from the models in {}",
        trace.display(),
        dir.display()
    );
    println!(
        "  {:<20} {:>7} {:>9} {:>12} {:>12}",
        "type", "tasks", "predicted", "median |err|", "p90 |err|"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}%"));
    for r in &rows {
        println!(
            "  {:<20} {:>7} {:>9} {:>12} {:>12}",
            r.task_type,
            r.tasks,
            r.predicted,
            opt(r.median_error_pct),
            opt(r.p90_error_pct)
        );
    }
    if rows.iter().any(|r| r.predicted < r.tasks) {
        println!(
            "  (tasks without a prediction: no model of their codelet, architecture and size)"
        );
    }
    Ok(())
}
