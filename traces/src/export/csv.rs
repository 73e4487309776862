//! CSV exports: one row per task, one row per energy sample.
//!
//! Tasks: `id,codelet,arch,worker,status,priority,footprint,submit_ns,ready_ns,start_ns,end_ns,preds`
//! with the codelet by name and the predecessors joined by `;`. Samples:
//! `domain,domain_name,domain_key,t_ns,wall_unix_ns,energy_j,raw` (`domain_key` is what the domain measures, `package-0`: `taskwatt import` reads these files back). Times are integer ns on the trace
//! clock; floats are written in Rust's shortest round-trip form (`NaN` for an
//! integrated-power domain's raw value). Fields are quoted (RFC 4180) only when they hold a
//! comma, a quote or a line break.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::format::ChunkKind;
use crate::{Chunk, EnergySample, TaskChunk, TaskStatus, Trace, TraceError, UNKNOWN_CODELET};

use super::{read_metadata, stream};

/// Header row of the tasks CSV.
const TASKS_HEADER: &str =
    "id,codelet,arch,worker,status,priority,footprint,submit_ns,ready_ns,start_ns,end_ns,preds\n";
/// Header row of the samples CSV.
const SAMPLES_HEADER: &str =
    "domain,domain_name,domain_key,t_ns,wall_unix_ns,energy_j,raw,simulated\n";
const TRANSFERS_HEADER: &str =
    "handle,src_node,dst_node,bytes,worker,task,start_ns,end_ns,handle_name,kind\n";
const ACCESSES_HEADER: &str = "task,handle,mode,bytes,handle_name\n";

/// Exports the tasks' data accesses of the trace file at `path` as CSV (format 1.3),
/// streaming; returns the rows written (header excluded). One row per access: the task,
/// the handle, the mode (`R`, `W`, `RW`, `COMMUTE`, `REDUX`), the handle's bytes and its
/// name (empty if the application did not name it).
pub fn export_csv_accesses(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Csv::new(out, &meta, "accesses CSV");
    w.write(ACCESSES_HEADER)?;
    stream(
        path,
        |k| k == ChunkKind::Accesses,
        |c| match c {
            Chunk::Accesses(a) => w.accesses(&a),
            _ => Ok(()),
        },
    )?;
    w.finish()
}

/// Exports an in-memory trace's data accesses as CSV; returns the rows written.
pub fn write_csv_accesses(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    let mut w = Csv::new(out, trace, "accesses CSV");
    w.write(ACCESSES_HEADER)?;
    w.accesses(&trace.accesses)?;
    w.finish()
}

/// Exports the copies between memory nodes of the trace file at `path` as CSV (format 1.2;
/// none on a CPU-only run), streaming; returns the rows written (header excluded).
pub fn export_csv_transfers(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Csv::new(out, &meta, "transfers CSV");
    w.write(TRANSFERS_HEADER)?;
    stream(
        path,
        |k| k == ChunkKind::Transfers,
        |c| match c {
            Chunk::Transfers(t) => w.transfers(&t),
            _ => Ok(()),
        },
    )?;
    w.finish()
}

/// Exports an in-memory trace's copies between memory nodes as CSV; returns the rows
/// written. Empty fields: no worker (the application's thread), no task.
pub fn write_csv_transfers(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    let mut w = Csv::new(out, trace, "transfers CSV");
    w.write(TRANSFERS_HEADER)?;
    w.transfers(&trace.transfers)?;
    w.finish()
}

/// Exports the tasks of the trace file at `path` as CSV, streaming; returns the rows
/// written (header excluded).
pub fn export_csv_tasks(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Csv::new(out, &meta, "tasks CSV");
    w.write(TASKS_HEADER)?;
    stream(
        path,
        |k| k == ChunkKind::Tasks,
        |c| match c {
            Chunk::Tasks(t) => w.tasks(&t),
            _ => Ok(()),
        },
    )?;
    w.finish()
}

/// Exports the energy samples of the trace file at `path` as CSV, streaming; returns the
/// rows written (header excluded).
pub fn export_csv_samples(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Csv::new(out, &meta, "samples CSV");
    w.write(SAMPLES_HEADER)?;
    stream(
        path,
        |k| k == ChunkKind::Samples,
        |c| match c {
            Chunk::Samples(s) => w.samples(&s),
            _ => Ok(()),
        },
    )?;
    w.finish()
}

/// Exports an in-memory trace's tasks as CSV; returns the rows written.
pub fn write_csv_tasks(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    let mut w = Csv::new(out, trace, "tasks CSV");
    w.write(TASKS_HEADER)?;
    for t in &trace.tasks {
        w.tasks(t)?;
    }
    w.finish()
}

/// Exports an in-memory trace's energy samples as CSV; returns the rows written.
pub fn write_csv_samples(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    let mut w = Csv::new(out, trace, "samples CSV");
    w.write(SAMPLES_HEADER)?;
    w.samples(&trace.samples)?;
    w.finish()
}

/// A CSV field, quoted when it must be.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

struct Csv<W: Write> {
    out: BufWriter<W>,
    what: &'static str,
    rows: u64,
    codelets: HashMap<u32, String>,
    /// Per domain id: its sensor name, what it measures (`package-0`: what `import` reads),
    /// and whether its meter is the simulated one (`import` keeps the label).
    domains: HashMap<u16, (String, String, bool)>,
    /// Named handles' names by id, as CSV fields.
    handles: HashMap<u64, String>,
    line: Vec<u8>,
}

impl<W: Write> Csv<W> {
    fn new(out: W, meta: &Trace, what: &'static str) -> Self {
        Csv {
            out: BufWriter::with_capacity(1 << 16, out),
            what,
            rows: 0,
            codelets: meta
                .codelets
                .iter()
                .map(|c| (c.id, field(&c.name)))
                .collect(),
            domains: meta
                .domains
                .iter()
                .map(|d| {
                    let simulated = meta.meters.iter().any(|m| m.id == d.meter && m.simulated);
                    (d.id, (field(&d.name), d.domain.to_string(), simulated))
                })
                .collect(),
            handles: meta
                .handles
                .iter()
                .map(|h| (h.handle, field(&h.name)))
                .collect(),
            line: Vec::with_capacity(256),
        }
    }

    /// Handle `id`'s name as a field (empty if unnamed).
    fn handle_name(&self, id: u64) -> &str {
        self.handles.get(&id).map_or("", String::as_str)
    }

    fn err(&self, e: io::Error) -> TraceError {
        TraceError::output(self.what, e)
    }

    fn write(&mut self, s: &str) -> Result<(), TraceError> {
        self.out.write_all(s.as_bytes()).map_err(|e| self.err(e))
    }

    fn tasks(&mut self, chunk: &TaskChunk) -> Result<(), TraceError> {
        for (r, preds) in chunk.iter() {
            let l = &mut self.line;
            l.clear();
            let name = self
                .codelets
                .get(&r.codelet)
                .map_or(UNKNOWN_CODELET, String::as_str);
            let status = match r.status {
                TaskStatus::Ok => "ok",
                TaskStatus::Failed => "failed",
            };
            // Writes into a Vec cannot fail.
            let _ = write!(
                l,
                "{},{name},{},{},{status},{},{},{},{},{},{},",
                r.id,
                r.arch,
                r.worker,
                r.priority,
                r.footprint,
                r.submit.0,
                r.ready.0,
                r.start.0,
                r.end.0
            );
            for (i, p) in preds.iter().enumerate() {
                if i > 0 {
                    l.push(b';');
                }
                let _ = write!(l, "{p}");
            }
            l.push(b'\n');
            self.out.write_all(&self.line).map_err(|e| self.err(e))?;
            self.rows += 1;
        }
        Ok(())
    }

    fn samples(&mut self, samples: &[EnergySample]) -> Result<(), TraceError> {
        for s in samples {
            let l = &mut self.line;
            l.clear();
            let (name, key, sim) = self
                .domains
                .get(&s.domain)
                .map_or(("", "", false), |(n, k, sim)| {
                    (n.as_str(), k.as_str(), *sim)
                });
            let _ = writeln!(
                l,
                "{},{name},{key},{},{},{},{},{sim}",
                s.domain, s.t.0, s.wall_unix_ns, s.energy_j, s.raw
            );
            self.out.write_all(&self.line).map_err(|e| self.err(e))?;
            self.rows += 1;
        }
        Ok(())
    }

    fn transfers(&mut self, transfers: &[crate::Transfer]) -> Result<(), TraceError> {
        for t in transfers {
            let mut l = std::mem::take(&mut self.line);
            l.clear();
            let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
            let _ = writeln!(
                l,
                "{},{},{},{},{},{},{},{},{},{}",
                t.handle,
                t.src,
                t.dst,
                t.bytes,
                opt(t.worker.map(u64::from)),
                opt(t.task),
                t.start.0,
                t.end.0,
                self.handle_name(t.handle),
                t.kind.name()
            );
            self.line = l;
            self.out.write_all(&self.line).map_err(|e| self.err(e))?;
            self.rows += 1;
        }
        Ok(())
    }

    fn accesses(&mut self, accesses: &[crate::TaskAccess]) -> Result<(), TraceError> {
        for a in accesses {
            let mut l = std::mem::take(&mut self.line);
            l.clear();
            let _ = writeln!(
                l,
                "{},{},{},{},{}",
                a.task,
                a.handle,
                a.mode.name(),
                a.bytes,
                self.handle_name(a.handle)
            );
            self.line = l;
            self.out.write_all(&self.line).map_err(|e| self.err(e))?;
            self.rows += 1;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<u64, TraceError> {
        self.out.flush().map_err(|e| self.err(e))?;
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, CodeletInfo, Domain, DomainInfo, SensorKind, TaskRecord, Timestamp};

    fn trace() -> Trace {
        let mut t = TaskChunk::default();
        let rec = |id, codelet| TaskRecord {
            id,
            codelet,
            arch: Arch::Gpu,
            worker: 3,
            status: TaskStatus::Ok,
            priority: -2,
            footprint: 8,
            submit: Timestamp(1),
            ready: Timestamp(2),
            start: Timestamp(3),
            end: Timestamp(u64::MAX),
            preds_start: 0,
            preds_len: 0,
        };
        t.push(rec(10, 0), &[4, 7, 9]);
        t.push(rec(11, 5), &[]);
        Trace::from_chunks([
            Chunk::Codelets(vec![CodeletInfo {
                id: 0,
                name: "gemm, \"tiled\"".into(),
                archs: vec![Arch::Gpu],
            }]),
            Chunk::Meters {
                meters: vec![crate::MeterInfo {
                    id: 0,
                    backend: "sim".into(),
                    simulated: true,
                    description: "the simulated meter".into(),
                }],
                domains: vec![DomainInfo {
                    id: 2,
                    meter: 0,
                    domain: Domain::Gpu { index: 0 },
                    name: "NVIDIA A100".into(),
                    unit: "mJ".into(),
                    resolution_j: 1e-3,
                    wrap_range_j: None,
                    update_interval_ns: None,
                    sensor: SensorKind::IntegratedPower { window_ns: 1 },
                    workers: vec![3],
                }],
            },
            Chunk::Tasks(t),
            Chunk::Samples(vec![EnergySample {
                domain: 2,
                t: Timestamp(5),
                wall_unix_ns: 6,
                energy_j: 0.1,
                raw: f64::NAN,
            }]),
        ])
    }

    #[test]
    fn tasks_csv_rows() {
        let mut out = Vec::new();
        assert_eq!(write_csv_tasks(&trace(), &mut out).unwrap(), 2);
        let s = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], TASKS_HEADER.trim_end());
        assert_eq!(
            lines[1],
            "10,\"gemm, \"\"tiled\"\"\",gpu,3,ok,-2,8,1,2,3,18446744073709551615,4;7;9"
        );
        assert_eq!(
            lines[2],
            "11,unknown,gpu,3,ok,-2,8,1,2,3,18446744073709551615,"
        );
    }

    #[test]
    fn samples_csv_rows_and_streaming_agrees() {
        let mut out = Vec::new();
        assert_eq!(write_csv_samples(&trace(), &mut out).unwrap(), 1);
        let s = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            s,
            format!("{SAMPLES_HEADER}2,NVIDIA A100,gpu-0,5,6,0.1,NaN,true\n")
        );

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.twt");
        trace().save(&p).unwrap();
        let mut streamed = Vec::new();
        export_csv_samples(&p, &mut streamed).unwrap();
        assert_eq!(streamed, out);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        export_csv_tasks(&p, &mut a).unwrap();
        write_csv_tasks(&trace(), &mut b).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn failing_output_is_an_output_error() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("no space"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::other("no space"))
            }
        }
        let e = write_csv_tasks(&trace(), Full).unwrap_err();
        assert!(matches!(e, TraceError::Output { .. }), "{e}");
        assert!(e.to_string().contains("tasks CSV"), "{e}");
    }
}
