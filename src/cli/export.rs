//! `taskwatt export FILE --format chrome|csv -o OUT`.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use taskwatt_traces::{
    export_chrome, export_csv_samples, export_csv_tasks, recover_trace, refuse_output_over_input,
    write_chrome, write_csv_samples, write_csv_tasks, AtomicFile, Trace, TraceError,
};

use super::CliResult;

fn name_of(f: Format) -> &'static str {
    match f {
        Format::Chrome => "chrome",
        Format::Csv => "csv",
        Format::Dot => "dot",
        Format::Paje => "paje",
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// Chrome trace event JSON: open it in https://ui.perfetto.dev or chrome://tracing.
    Chrome,
    /// CSV: one row per task in OUT, one row per energy reading in OUT with `.samples.csv`.
    Csv,
    /// Graphviz DOT: the task graph, one node per task, one edge per dependency.
    Dot,
    /// Paje, for ViTE (and PajeNG's pj_dump): worker states, copies between memory nodes,
    /// power variables, markers.
    Paje,
}

#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// The trace (.twt) to export.
    file: PathBuf,
    /// Output format (default: from the output's extension, `.csv`, `.dot`/`.gv`,
    /// `.paje`, else chrome).
    #[arg(long = "format", value_enum)]
    format_arg: Option<Format>,
    /// The format used: `--format`, or the one the extension names.
    #[arg(skip = Format::Chrome)]
    format: Format,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
    /// Export what a damaged or cut-short trace still holds (every complete chunk).
    #[arg(long)]
    recover: bool,
}

/// `t.csv` -> `t.transfers.csv`: the copies between memory nodes, written only for a
/// run that made some (with GPUs).
pub(crate) fn transfers_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}.transfers.csv"))
}

/// `t.csv` -> `t.accesses.csv`: the tasks' data accesses (format 1.3 traces).
pub(crate) fn accesses_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}.accesses.csv"))
}

/// An extra CSV file: kept only if it has rows.
struct Extra {
    file: taskwatt::traces::AtomicFile,
    path: PathBuf,
    rows: u64,
    what: &'static str,
}

/// Keeps the extra files that have rows, and says what was written.
fn wrote_csv(a: &ExportArgs, sp: &Path, tasks: u64, samples: u64, extras: Vec<Extra>) -> CliResult {
    let mut parts = vec![
        format!("{} ({tasks} tasks)", a.output.display()),
        format!("{} ({samples} energy readings)", sp.display()),
    ];
    for e in extras {
        if e.rows > 0 {
            e.file.commit()?;
            parts.push(format!("{} ({} {})", e.path.display(), e.rows, e.what));
        }
    }
    let last = parts.pop().expect("two parts at least");
    eprintln!("wrote {} and {last}", parts.join(", "));
    Ok(())
}

/// Writes the transfers and accesses files beside `a.output` (kept by `wrote_csv` only if
/// they have rows).
fn write_extras(
    a: &ExportArgs,
    transfers: impl FnOnce(&mut AtomicFile) -> Result<u64, TraceError>,
    accesses: impl FnOnce(&mut AtomicFile) -> Result<u64, TraceError>,
) -> Result<Vec<Extra>, TraceError> {
    let (tp, ap) = (transfers_path(&a.output), accesses_path(&a.output));
    let mut tout = create(&tp)?;
    let t = transfers(&mut tout)?;
    let mut aout = create(&ap)?;
    let n = accesses(&mut aout)?;
    Ok(vec![
        Extra {
            file: tout,
            path: tp,
            rows: t,
            what: "copies between memory nodes",
        },
        Extra {
            file: aout,
            path: ap,
            rows: n,
            what: "data accesses",
        },
    ])
}

/// `t.csv` -> `t.samples.csv`.
pub(crate) fn samples_path(out: &Path) -> PathBuf {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.with_file_name(format!("{stem}.samples.csv"))
}

/// An output that appears only once complete: a failed export leaves no partial file and
/// keeps one that was there.
fn create(path: &Path) -> Result<AtomicFile, TraceError> {
    AtomicFile::create(path)
}

/// The format an output's extension names, if any.
fn format_of_extension(out: &Path) -> Option<Format> {
    let ext = out.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "json" => Some(Format::Chrome),
        "csv" => Some(Format::Csv),
        "dot" | "gv" => Some(Format::Dot),
        "paje" | "trace" => Some(Format::Paje),
        _ => None,
    }
}

pub(crate) fn export(mut a: ExportArgs) -> CliResult {
    // `-o x.csv` without `--format` wrote Chrome JSON into x.csv.
    let named = format_of_extension(&a.output);
    a.format = match (a.format_arg, named) {
        (Some(f), Some(n)) if std::mem::discriminant(&f) != std::mem::discriminant(&n) => {
            eprintln!(
                "warning: writing {} as --format {} although its extension names {}",
                a.output.display(),
                name_of(f),
                name_of(n)
            );
            f
        }
        (Some(f), _) => f,
        (None, Some(n)) => n,
        (None, None) => {
            // `-o out.xyz` wrote Chrome JSON without a word.
            if let Some(ext) = a.output.extension() {
                eprintln!(
                    "note: {}: `.{}` names no format (.json, .csv, .dot/.gv, .paje): \
                     writing Chrome trace JSON; --format chooses another",
                    a.output.display(),
                    ext.to_string_lossy()
                );
            }
            Format::Chrome
        }
    };
    // Before anything is opened: `-o` naming the input would destroy it.
    refuse_output_over_input(&a.output, &[&a.file])?;
    if matches!(a.format, Format::Csv) {
        refuse_output_over_input(&samples_path(&a.output), &[&a.file])?;
        refuse_output_over_input(&transfers_path(&a.output), &[&a.file])?;
        refuse_output_over_input(&accesses_path(&a.output), &[&a.file])?;
    }
    if a.recover {
        let r = recover_trace(&a.file)?;
        if r.complete_chunks == 0 {
            // An empty export (a Chrome file of one event) would read as a success.
            return Err(format!(
                "{}: nothing to recover: the file holds no complete chunk{}",
                a.file.display(),
                r.problem
                    .as_ref()
                    .map_or(String::new(), |p| format!(" ({p})"))
            )
            .into());
        }
        if let Some(p) = &r.problem {
            eprintln!("warning: {p}\n  exporting {}", r.summary());
        }
        return export_trace(&a, &r.trace);
    }
    let res = export_streaming(&a);
    if let Err(e) = &res {
        if let Some(
            TraceError::Truncated { .. } | TraceError::Corrupt { .. } | TraceError::CutShort { .. },
        ) = e.downcast_ref::<TraceError>()
        {
            let r = recover_trace(&a.file)?;
            return Err(format!(
                "{e}\n  {} complete chunks ({} tasks) are readable: rerun with --recover to export them",
                r.complete_chunks,
                r.trace.task_count()
            )
            .into());
        }
    }
    res
}

fn export_trace(a: &ExportArgs, trace: &Trace) -> CliResult {
    match a.format {
        Format::Paje => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::write_paje(trace, &mut out)?;
            out.commit()?;
            eprintln!("wrote {} ({n} tasks)", a.output.display());
        }
        Format::Dot => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::write_dot(trace, &mut out)?;
            out.commit()?;
            eprintln!("wrote {} ({n} tasks)", a.output.display());
        }
        Format::Chrome => {
            let mut out = create(&a.output)?;
            let n = match energy_of(trace) {
                Some(f) => taskwatt::traces::write_chrome_with(trace, &mut out, &f)?,
                None => write_chrome(trace, &mut out)?,
            };
            out.commit()?;
            eprintln!("wrote {} ({n} events)", a.output.display());
        }
        Format::Csv => {
            let (mut out, sp) = (create(&a.output)?, samples_path(&a.output));
            let mut sout = create(&sp)?;
            let tasks = write_csv_tasks(trace, &mut out)?;
            let samples = write_csv_samples(trace, &mut sout)?;
            let extras = write_extras(
                a,
                |f| taskwatt::traces::write_csv_transfers(trace, f),
                |f| taskwatt::traces::write_csv_accesses(trace, f),
            )?;
            out.commit()?;
            sout.commit()?;
            wrote_csv(a, &sp, tasks, samples, extras)?;
        }
    }
    Ok(())
}

fn export_streaming(a: &ExportArgs) -> CliResult {
    match a.format {
        Format::Paje => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::export_paje(&a.file, &mut out)?;
            out.commit()?;
            eprintln!(
                "wrote {} ({n} tasks); open it with `vite {}`",
                a.output.display(),
                a.output.display()
            );
        }
        Format::Dot => {
            let mut out = create(&a.output)?;
            let n = taskwatt::traces::export_dot(&a.file, &mut out)?;
            out.commit()?;
            eprintln!(
                "wrote {} ({n} tasks); draw it with `dot -Tsvg {} -o graph.svg`",
                a.output.display(),
                a.output.display()
            );
        }
        Format::Chrome => {
            let mut out = create(&a.output)?;
            let energy = task_energy(&a.file);
            let n = match &energy {
                Some(f) => taskwatt::traces::export_chrome_with(&a.file, &mut out, f)?,
                None => export_chrome(&a.file, &mut out)?,
            };
            out.commit()?;
            eprintln!(
                "wrote {} ({n} events); open it in https://ui.perfetto.dev",
                a.output.display()
            );
        }
        Format::Csv => {
            let (mut out, sp) = (create(&a.output)?, samples_path(&a.output));
            let mut sout = create(&sp)?;
            let tasks = export_csv_tasks(&a.file, &mut out)?;
            let samples = export_csv_samples(&a.file, &mut sout)?;
            let extras = write_extras(
                a,
                |f| taskwatt::traces::export_csv_transfers(&a.file, f),
                |f| taskwatt::traces::export_csv_accesses(&a.file, f),
            )?;
            out.commit()?;
            sout.commit()?;
            wrote_csv(a, &sp, tasks, samples, extras)?;
        }
    }
    Ok(())
}

/// A task's energy in joules, if the attribution gives one, and whether every power it
/// rests on is a measurement.
type EnergyOf = Box<dyn Fn(&taskwatt::traces::TaskRecord) -> Option<(f64, bool)>>;

/// Each task's energy from the attribution of the trace at `path` (None without energy
/// samples, or when the attribution fails: the export then goes without, with a warning).
fn task_energy(path: &std::path::Path) -> Option<EnergyOf> {
    let trace = taskwatt::traces::read_trace(path).ok()?;
    energy_of(&trace)
}

/// Per task: `Σ_d (p_k,d + P_base,d / W_d) · duration` over the package, DRAM and GPU
/// domains covering its worker (psys only when no package does; core and uncore are inside
/// their package), with the attribution's powers at run (`p_k,d` beside the others, as
/// the contention model has it): what `report` calls total energy per task.
fn energy_of(trace: &Trace) -> Option<EnergyOf> {
    use std::collections::HashMap;
    use taskwatt::traces::{Arch, Domain};
    if trace.samples.is_empty() {
        return None;
    }
    let att = match taskwatt::attribute_trace(trace, &taskwatt::AttributionOptions::default()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("warning: no per-task energy in the export: {e}");
            return None;
        }
    };
    let has_package = att
        .report
        .domains
        .iter()
        .any(|d| matches!(d.domain, Domain::CpuPackage { .. }));
    // worker -> [(base share, powers by (codelet, arch))]
    // Each power with whether it is shown as a measurement; the base's alike.
    type Powers = HashMap<(String, Option<Arch>), (f64, bool)>;
    type Share = (f64, bool);
    let mut by_worker: HashMap<u32, Vec<(Share, std::sync::Arc<Powers>)>> = HashMap::new();
    for d in &att.report.domains {
        let counted = match d.domain {
            Domain::CpuPackage { .. } | Domain::Dram { .. } | Domain::Gpu { .. } => true,
            Domain::Psys => !has_package,
            _ => false,
        };
        if !counted || d.workers == 0 {
            continue;
        }
        let powers: Powers = d
            .types
            .iter()
            // The power at run (beside the tasks it ran with, under the contention
            // model), as `report`'s total/task: the power alone made tile_gemm's tasks
            // sum to 3.5 % more than the report's energy for the type.
            .map(|t| {
                let p = t.power_at_run.as_ref().unwrap_or(&t.power);
                ((t.key.codelet.clone(), t.key.arch), (p.value_w, p.reliable))
            })
            .collect();
        let powers = std::sync::Arc::new(powers);
        let share = (d.base.value_w / d.workers as f64, d.base.reliable);
        let Some(info) = trace.domains.iter().find(|i| i.id == d.id) else {
            continue;
        };
        for &w in &info.workers {
            by_worker
                .entry(w)
                .or_default()
                .push((share, powers.clone()));
        }
    }
    let names: HashMap<u32, String> = trace
        .codelets
        .iter()
        .map(|c| (c.id, c.name.clone()))
        .collect();
    Some(Box::new(move |r: &taskwatt::traces::TaskRecord| {
        let doms = by_worker.get(&r.worker)?;
        let name = names
            .get(&r.codelet)
            .cloned()
            .unwrap_or_else(|| format!("codelet#{}", r.codelet));
        let secs = r.end.0.saturating_sub(r.start.0) as f64 * 1e-9;
        let key = (name, Some(r.arch));
        let mut measured = true;
        let joules = doms
            .iter()
            .map(|((share, base_ok), p)| {
                let (w, ok) = p.get(&key).copied().unwrap_or((0.0, false));
                measured &= ok && *base_ok;
                (share + w) * secs
            })
            .sum();
        Some((joules, measured))
    }))
}
