//! The generic CSV importer: `tasks.csv`, one row per task execution.
//!
//! Required columns `type`, `worker`, `start`, `end`; optional `id` (default: the row's
//! rank among data rows, from 0) and `arch` (`cpu` by default). Times are in the unit the
//! caller gives. The file has no submission, readiness, priority, size or dependency
//! information, so each task gets submit = ready = start, priority 0, footprint 0 and no
//! predecessors. docs/import.md describes the files.

use std::path::Path;

use super::energy::read_energy;
use super::table::Table;
use super::{ImportOptions, TimeUnit, TraceBuilder};
use crate::{Arch, TaskRecord, Timestamp, Trace, TraceError, WorkerId};

/// Builds a trace from a `tasks.csv` and the optional `samples.csv` and `workers.csv` of
/// `opts`. Malformed rows are refused with an error naming the file, the line, the column
/// and what was expected.
pub fn import_csv(tasks: impl AsRef<Path>, opts: &ImportOptions) -> Result<Trace, TraceError> {
    let path = tasks.as_ref();
    let unit = opts.time_unit;
    // The documented format, or taskwatt's own CSV export (times in ns whatever the unit).
    let (mut t, format) = Table::open_any(
        path,
        &[
            &["type", "worker", "start", "end"],
            &["codelet", "worker", "start_ns", "end_ns"],
        ],
    )?;
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
    // With an id column, ids must be unique: (id, line) pairs, sorted and checked once at
    // the end (16 bytes a task; a hash map took 50). Without one, ids are row ranks.
    let mut ids: Vec<(u64, u64)> = Vec::new();
    let mut rank = 0u64;
    while let Some(row) = t.next_row()? {
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
        if c_id.is_some() {
            ids.push((id, row.line));
        }
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
        let codelet = b.codelet(name, arch);
        b.push(
            TaskRecord::executed(id, codelet, arch, worker, Timestamp(start), Timestamp(end)),
            Vec::new(),
        );
        rank += 1;
    }
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0].0 == w[1].0) {
        let (first, second) = (w[0].1.min(w[1].1), w[0].1.max(w[1].1));
        return Err(t.err(
            second,
            "id",
            &format!("a unique task id (line {first} has the same)"),
            &w[0].0.to_string(),
        ));
    }
    drop(ids);
    let energy = match &opts.samples {
        Some(s) => Some(read_energy(s, opts, unit, &b.workers(), "csv")?),
        None => None,
    };
    let trace = b.build("csv", path, energy);
    Ok(trace)
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
