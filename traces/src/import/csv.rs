//! The generic CSV importer: `tasks.csv`, one row per task execution.
//!
//! Required columns `type`, `worker`, `start`, `end`; optional `id` (default: the row's
//! rank among data rows, from 0) and `arch` (`cpu` by default). Times are in the unit the
//! caller gives. The file has no submission, readiness, priority, size or dependency
//! information, so each task gets submit = ready = start, priority 0, footprint 0 and no
//! predecessors. docs/import.md describes the files.

use std::path::Path;

use super::builder::{Emitted, TraceBuilder};
use super::energy::{read_energy, Energy};
use super::spill::RECORD_BYTES;
use super::table::{Row, Table};
use super::{ImportOptions, TimeUnit};
use crate::{Arch, TaskRecord, Timestamp, Trace, TraceError, WorkerId};

/// Imports `tasks` (and the energy files `opts` names) into a [`Trace`] in memory.
pub fn import_csv(tasks: impl AsRef<Path>, opts: &ImportOptions) -> Result<Trace, TraceError> {
    let path = tasks.as_ref();
    let (b, energy, _) = read(path, opts, None)?;
    b.build("csv", path, energy).map(|(t, _)| t)
}

/// What [`import_csv_to`] wrote.
#[derive(Clone, Debug)]
pub struct ImportWritten {
    /// The trace file written.
    pub path: std::path::PathBuf,
    /// Tasks written.
    pub tasks: u64,
    /// Energy samples written.
    pub samples: u64,
    /// Energy domains.
    pub domains: usize,
    /// The tasks' first start and last end, ns on the trace's clock.
    pub task_span: Option<(u64, u64)>,
    /// The samples' first and last time, ns on the trace's clock.
    pub sample_span: Option<(u64, u64)>,
    /// Bytes of the temporary file the tasks beyond [`ImportOptions::task_memory`] were
    /// sorted through (0 when they fitted; the file is gone once the import returns).
    pub spilled_bytes: u64,
    /// The unit the tasks' times were read in: the options', or ns for taskwatt's own
    /// export (its `start_ns` and `end_ns` columns).
    pub time_unit: TimeUnit,
    /// Tasks that start before another task of their worker ended: a worker of the
    /// source runs several tasks at once, which taskwatt's workers never do (the
    /// attribution then counts each as running).
    pub overlapping: u64,
}

/// Imports `tasks` (and the energy files `opts` names) straight into the trace file `out`
/// in bounded memory: at most [`ImportOptions::task_memory`] bytes of tasks (32 bytes
/// each) are held; past that they are sorted into runs in a temporary file in `out`'s
/// directory and merged back, worker by worker, as the chunks go to the file's writer
/// (BENCHMARKS.md, "Import at scale"). The file appears at `out` only once complete.
pub fn import_csv_to(
    tasks: impl AsRef<Path>,
    opts: &ImportOptions,
    out: impl AsRef<Path>,
) -> Result<ImportWritten, TraceError> {
    let path = tasks.as_ref();
    crate::trace::check_dir_of(out.as_ref())?;
    let dir = match out.as_ref().parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (b, energy, time_unit) = read(path, opts, Some(dir))?;
    let target = crate::AtomicPath::new(out.as_ref());
    let w = crate::TraceWriter::create(target.path()).map_err(|e| target.name_target(e))?;
    let sink = w.sink();
    let mut tally = crate::writer::EndTally::default();
    let e: Emitted = b.emit("csv", path, energy, &mut |c| {
        tally.add(&c);
        sink.send(c);
    })?;
    drop(sink);
    // No wall clock in the sources: the End records the counts and the span only.
    w.finish_with(tally.end(0))?;
    target.commit()?;
    Ok(ImportWritten {
        path: out.as_ref().to_path_buf(),
        tasks: e.tasks,
        samples: e.samples,
        domains: e.domains,
        task_span: e.task_span,
        sample_span: e.sample_span,
        spilled_bytes: e.spilled_bytes,
        time_unit,
        overlapping: e.overlapping,
    })
}

/// Reads the tasks and the energy; with `spill`, records beyond `opts.task_memory` go to a
/// temporary file in that directory.
fn read(
    path: &Path,
    opts: &ImportOptions,
    spill: Option<&Path>,
) -> Result<(TraceBuilder, Option<Energy>, TimeUnit), TraceError> {
    let unit = opts.time_unit;
    let (mut t, format) = Table::open_counted(
        path,
        &[
            &["type", "worker", "start", "end"],
            &["codelet", "worker", "start_ns", "end_ns"],
        ],
        opts.progress.as_ref().map(|p| p.0.clone()),
    )?;
    // `taskwatt export --format csv` writes times in ns under these names.
    let exported = format == 1;
    let unit = if exported { TimeUnit::Ns } else { unit };
    let (c_type, c_worker, c_start, c_end) = if exported {
        (
            t.required("codelet"),
            t.required("worker"),
            t.required("start_ns"),
            t.required("end_ns"),
        )
    } else {
        (
            t.required("type"),
            t.required("worker"),
            t.required("start"),
            t.required("end"),
        )
    };
    let (c_id, c_arch) = (t.column("id"), t.column("arch"));
    let mut b = TraceBuilder::new();
    if let Some(dir) = spill {
        b.spill_to(dir, opts.task_memory / RECORD_BYTES, c_id.is_some());
    }
    let mut rank = 0u64;
    let mut row = Row::default();
    // The last type name and its codelet, per architecture: rows of one type often
    // follow each other, and the lookup by name is then skipped.
    let mut last: [(String, u32); 2] = [(String::new(), u32::MAX), (String::new(), u32::MAX)];
    while t.next_row_into(&mut row)? {
        let name = row.get(c_type);
        if name.is_empty() {
            return Err(t.err(row.line, "type", "a task type name", name));
        }
        let w = row.get(c_worker);
        let worker: WorkerId = w
            .parse()
            .map_err(|_| t.err(row.line, "worker", "a worker id (0, 1, ...)", w))?;
        let time = |col: usize, label: &str| {
            let v = row.get(col);
            unit.parse_ns(v).ok_or_else(|| {
                t.err(
                    row.line,
                    label,
                    &format!("a non-negative time in {unit}"),
                    v,
                )
            })
        };
        let start = time(c_start, "start")?;
        let end = time(c_end, "end")?;
        if end < start {
            return Err(t.err(
                row.line,
                "end",
                &format!("a time at or after start ({})", row.get(c_start)),
                row.get(c_end),
            ));
        }
        let id = match c_id {
            None => rank,
            Some(c) => {
                let v = row.get(c);
                v.parse()
                    .map_err(|_| t.err(row.line, "id", "a task id (a non-negative integer)", v))?
            }
        };
        let arch = match c_arch {
            None => Arch::Cpu,
            Some(c) => {
                let v = row.get(c);
                match v.to_ascii_lowercase().as_str() {
                    "" | "cpu" => Arch::Cpu,
                    "gpu" | "cuda" | "hip" => Arch::Gpu,
                    _ => return Err(t.err(row.line, "arch", "cpu or gpu", v)),
                }
            }
        };
        let cache = &mut last[arch.index()];
        let codelet = if cache.1 != u32::MAX && cache.0 == name {
            cache.1
        } else {
            let id = b.codelet(name, arch);
            cache.0.clear();
            cache.0.push_str(name);
            cache.1 = id;
            id
        };
        b.push(
            TaskRecord::executed(id, codelet, arch, worker, Timestamp(start), Timestamp(end)),
            Vec::new(),
        )?;
        rank += 1;
    }
    if c_id.is_some() {
        if let Some(dup) = b.duplicate_id()? {
            let (first, second) = lines_of_id(path, c_id.unwrap_or(0), dup)?;
            return Err(Table::open_any(path, &[&["id"]])?.0.err(
                second,
                "id",
                &format!("a unique task id (line {first} has the same)"),
                &dup.to_string(),
            ));
        }
    }
    let energy = match &opts.samples {
        Some(s) => Some(read_energy(s, opts, unit, &b.workers(), "csv")?),
        None => None,
    };
    Ok((b, energy, unit))
}

/// The lines of the first two rows whose column `c_id` is `id`: read again only to name
/// them in the error (the ids are checked after the input, from the records).
fn lines_of_id(path: &Path, c_id: usize, id: u64) -> Result<(u64, u64), TraceError> {
    let (mut t, _) = Table::open_any(path, &[&[]])?;
    let mut row = Row::default();
    let mut found = Vec::new();
    while found.len() < 2 && t.next_row_into(&mut row)? {
        if row.get(c_id).parse::<u64>().ok() == Some(id) {
            found.push(row.line);
        }
    }
    Ok((
        found.first().copied().unwrap_or(0),
        found.get(1).copied().unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::TimeUnit;
    use std::io::Write;

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    #[test]
    fn streamed_to_a_file_it_is_the_same_trace_in_any_row_order() {
        let d = tempfile::tempdir().unwrap();
        // Workers interleaved, out of end order, three types, ids given.
        let mut text = String::from("id,type,worker,start,end\n");
        for i in 0..10_000u64 {
            let w = (i * 7) % 5;
            let start = (i * 7919) % 100_003;
            text.push_str(&format!(
                "{},t{},{w},{start},{}\n",
                50_000 - i,
                i % 3,
                start + 1 + i % 13
            ));
        }
        let tasks = file(d.path(), "tasks.csv", &text);
        let samples = file(
            d.path(),
            "samples.csv",
            "time,domain,energy_j\n0,package-0,0\n50000,package-0,1\n100100,package-0,2.5\n",
        );
        let mut whole =
            import_csv(&tasks, &ImportOptions::new(TimeUnit::Ns).samples(&samples)).unwrap();
        // All in memory; then at most one chunk's records (4096) in memory: two runs in
        // the temporary file and the rest merged from memory.
        for (budget, spilled) in [
            (ImportOptions::DEFAULT_TASK_MEMORY, 0),
            (1, 8192 * 32 + 8191 * 8),
        ] {
            let opts = ImportOptions::new(TimeUnit::Ns)
                .samples(&samples)
                .task_memory(budget);
            let out = d.path().join(format!("streamed-{budget}.twt"));
            let w = import_csv_to(&tasks, &opts, &out).unwrap();
            assert_eq!((w.tasks, w.samples, w.domains), (10_000, 3, 1));
            assert_eq!(w.sample_span, Some((0, 100_100)));
            // 32 bytes per record, and 8 per id from the second on: the ids decrease, so
            // they are kept to be checked once they no longer count up one by one.
            assert_eq!(w.spilled_bytes, spilled, "budget {budget}");
            let streamed = crate::read_trace(&out).unwrap();
            // The same content: the streamed file has its meters after the tasks, and its
            // End chunk is the import's own (no wall clock), as the trace in memory has.
            assert_eq!(streamed.end, whole.end);
            whole.end = streamed.end.clone();
            assert_eq!(streamed, whole, "budget {budget}");
            // Each worker's records in end order.
            for wk in 0..5 {
                let ends: Vec<u64> = streamed
                    .tasks()
                    .filter(|(r, _)| r.worker == wk)
                    .map(|(r, _)| r.end.0)
                    .collect();
                assert!(ends.windows(2).all(|p| p[0] <= p[1]), "worker {wk}");
            }
        }
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            4,
            "the inputs and the two traces: no temporary file left"
        );
    }

    #[test]
    fn a_duplicate_id_is_found_across_the_sorted_runs() {
        // 9000 rows, two runs of 4096 in the temporary file before the last; the id of row
        // 10 comes again at row 8500. The ids count down (all kept), or count up one by one
        // until that row (then only a range is kept of the first 8500).
        for down in [true, false] {
            let d = tempfile::tempdir().unwrap();
            let mut text = String::from("id,type,worker,start,end\n");
            let id = |i: u64| if down { 1_000_000 - i } else { i };
            for i in 0..9000u64 {
                let this = if i == 8500 { id(10) } else { id(i) };
                text.push_str(&format!("{this},a,{},{i},{}\n", i % 2, i + 1));
            }
            let tasks = file(d.path(), "tasks.csv", &text);
            let out = d.path().join("t.twt");
            let opts = ImportOptions::new(TimeUnit::Ns).task_memory(1);
            let e = import_csv_to(&tasks, &opts, &out).unwrap_err().to_string();
            assert!(e.contains("tasks.csv:8502: id"), "{e}");
            assert!(e.contains("line 12 has the same"), "{e}");
            assert!(!out.exists());
        }
    }

    #[test]
    fn an_output_in_a_missing_directory_is_named_not_its_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let tasks = file(d.path(), "tasks.csv", "type,worker,start,end\na,0,0,1\n");
        let out = d.path().join("nowhere").join("t.twt");
        let e = import_csv_to(&tasks, &ImportOptions::new(TimeUnit::Ns), &out)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nowhere/t.twt")
                && e.contains("does not exist")
                && !e.contains(".t.twt.tmp"),
            "{e}"
        );
    }

    #[test]
    fn the_progress_counts_every_byte_of_the_tasks_file() {
        let d = tempfile::tempdir().unwrap();
        let text = "type,worker,start,end\na,0,0,1\nb,1,0,2\n";
        let tasks = file(d.path(), "tasks.csv", text);
        let read = crate::ReadProgress::new();
        let opts = ImportOptions::new(TimeUnit::Ns).progress(read.clone());
        import_csv(&tasks, &opts).unwrap();
        assert_eq!(read.bytes(), text.len() as u64);
        assert_eq!(opts.progress, Some(read), "equal: the same counter");
    }

    #[test]
    fn a_duplicate_id_names_both_lines() {
        let d = tempfile::tempdir().unwrap();
        let tasks = file(
            d.path(),
            "tasks.csv",
            "id,type,worker,start,end\n1,a,0,0,1\n7,a,0,1,2\n\n3,a,1,0,1\n7,b,1,1,2\n",
        );
        let e = import_csv(&tasks, &ImportOptions::new(TimeUnit::Ns))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tasks.csv:6: id"), "{e}");
        assert!(e.contains("line 3 has the same"), "{e}");
        assert!(e.contains('7'), "{e}");
    }

    #[test]
    fn tasks_samples_and_workers() {
        let d = tempfile::tempdir().unwrap();
        let tasks = file(
            d.path(),
            "tasks.csv",
            "type,worker,start,end,arch\ngemm,0,0.5,1.5,cpu\npotrf,1,0,2,gpu\ngemm,0,0,0.25,\n",
        );
        let samples = file(
            d.path(),
            "samples.csv",
            "time,domain,energy_j\n0,package-0,0\n2,package-0,10\n0,gpu-0,0\n2,gpu-0,30\n",
        );
        let workers = file(
            d.path(),
            "workers.csv",
            "worker,domain\n0,package-0\n1,gpu-0\n",
        );
        let opts = ImportOptions::new(TimeUnit::Ms)
            .samples(&samples)
            .workers(&workers);
        let t = import_csv(&tasks, &opts).unwrap();
        assert_eq!(t.task_count(), 3);
        assert_eq!(t.codelet_name(0), "gemm");
        assert_eq!(t.codelets[0].archs, [Arch::Cpu]);
        assert_eq!(t.codelets[1].archs, [Arch::Gpu]);
        // Worker 0's records in end order; ids are the row ranks.
        let w0: Vec<(u64, u64)> = t
            .tasks()
            .filter(|(r, _)| r.worker == 0)
            .map(|(r, _)| (r.id, r.start.0))
            .collect();
        assert_eq!(w0, [(2, 0), (0, 500_000)]);
        assert_eq!(t.meta.workers.len(), 2);
        assert_eq!(t.meta.workers[1].arch, Arch::Gpu);
        assert_eq!(t.domains[0].workers, [0]);
        assert_eq!(t.domains[1].workers, [1]);
        assert_eq!(t.samples.len(), 4);
        assert!(!t.is_simulated());
        let end = t.end.as_ref().unwrap();
        assert_eq!((end.tasks, end.samples, end.last_end.0), (3, 4, 2_000_000));
        // And it survives the file format.
        let p = d.path().join("t.twt");
        t.save(&p).unwrap();
        assert_eq!(crate::read_trace(&p).unwrap(), t);
    }

    #[test]
    fn explicit_ids_and_units() {
        let d = tempfile::tempdir().unwrap();
        let tasks = file(d.path(), "t.csv", "id,end,start,worker,type\n7,3,1,0,a\n");
        let t = import_csv(&tasks, &ImportOptions::new(TimeUnit::S)).unwrap();
        let (r, _) = t.tasks().next().unwrap();
        assert_eq!(
            (r.id, r.start.0, r.end.0),
            (7, 1_000_000_000, 3_000_000_000)
        );
        assert!(t.domains.is_empty() && t.samples.is_empty());
    }

    #[test]
    fn malformed_rows_name_line_column_and_expectation() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (
                "worker,start,end\n",
                ":1: type: expected a header with the columns type, worker, start, end",
            ),
            (
                "type,worker,start,end\na,x,1,2\n",
                ":2: worker: expected a worker id",
            ),
            (
                "type,worker,start,end\na,0,1,2\na,0,abc,2\n",
                ":3: start: expected a non-negative time in us, found `abc`",
            ),
            (
                "type,worker,start,end\na,0,3,2\n",
                ":2: end: expected a time at or after start (3)",
            ),
            (
                "type,worker,start,end\n,0,1,2\n",
                ":2: type: expected a task type name",
            ),
            (
                "type,worker,start,end,arch\na,0,1,2,fpga\n",
                ":2: arch: expected cpu or gpu",
            ),
            (
                "type,worker,start,end,id\na,0,1,2,4\nb,0,1,2,4\n",
                ":3: id: expected a unique task id (line 2 has the same)",
            ),
            (
                "type,worker,start,end\na,0,1\n",
                ":2: (row): expected 4 fields",
            ),
        ];
        for (text, want) in cases {
            let p = file(d.path(), "bad.csv", text);
            let e = import_csv(&p, &ImportOptions::new(TimeUnit::Us)).unwrap_err();
            let m = e.to_string();
            assert!(
                m.contains("bad.csv") && m.contains(want),
                "{m}\nwanted: {want}"
            );
        }
    }
}
