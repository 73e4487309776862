//! Paje trace format, as read by ViTE (the viewer StarPU users open their traces with) and
//! by PajeNG's `pj_dump`.
//!
//! Layout: one `Program` container (the run) holding one `Worker` container per worker and
//! one `Meter` container; each worker has a `Worker State` whose value is the codelet it
//! runs (one entity value and colour per codelet, `Idle` between tasks); the meter has one
//! `Power <domain>` variable per energy domain (W, between consecutive samples); markers are
//! states of a `Markers` container; each copy between memory nodes is a `Copy` link from
//! its source's `Memory Node` container to its destination's (as StarPU's Paje traces show
//! them), labelled with the handle's name (or `h<id>`) and its bytes. Times are in seconds
//! (9 decimals, exact ns) on the trace clock.
//!
//! Paje wants events in time order, so the exporter reads every task and sample (24 bytes
//! a task), sorts, then writes: memory is linear in the run, unlike the streaming exports.

use std::collections::BTreeSet;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::{Domain, Trace, TraceError};

/// Exports the trace file at `path` as a Paje trace; returns the number of tasks.
pub fn export_paje(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let trace = crate::read_trace(path)?;
    write_paje(&trace, out).map_err(|e| match e {
        TraceError::Io { source, .. } => TraceError::Io {
            path: path.to_path_buf(),
            source,
        },
        other => other,
    })
}

/// Exports an in-memory trace as a Paje trace; returns the number of tasks.
pub fn write_paje(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    write(trace, out).map_err(|source| TraceError::Io {
        path: Path::new("Paje output").to_path_buf(),
        source,
    })
}

const HEADER: &str = "\
%EventDef PajeDefineContainerType 0
%       Alias string
%       Type string
%       Name string
%EndEventDef
%EventDef PajeDefineStateType 1
%       Alias string
%       Type string
%       Name string
%EndEventDef
%EventDef PajeDefineEntityValue 2
%       Alias string
%       Type string
%       Name string
%       Color color
%EndEventDef
%EventDef PajeCreateContainer 3
%       Time date
%       Alias string
%       Type string
%       Container string
%       Name string
%EndEventDef
%EventDef PajeDestroyContainer 4
%       Time date
%       Type string
%       Name string
%EndEventDef
%EventDef PajeSetState 5
%       Time date
%       Type string
%       Container string
%       Value string
%EndEventDef
%EventDef PajeDefineVariableType 6
%       Alias string
%       Type string
%       Name string
%       Color color
%EndEventDef
%EventDef PajeSetVariable 7
%       Time date
%       Type string
%       Container string
%       Value double
%EndEventDef
%EventDef PajeDefineLinkType 8
%       Alias string
%       Type string
%       StartContainerType string
%       EndContainerType string
%       Name string
%EndEventDef
%EventDef PajeStartLink 9
%       Time date
%       Type string
%       Container string
%       StartContainer string
%       Value string
%       Key string
%EndEventDef
%EventDef PajeEndLink 10
%       Time date
%       Type string
%       Container string
%       EndContainer string
%       Value string
%       Key string
%EndEventDef
";

/// Colours for codelets (cycled), as Paje's "r g b" in [0, 1].
const PALETTE: [&str; 8] = [
    "0.55 0.83 0.78",
    "1.0 1.0 0.70",
    "0.75 0.73 0.85",
    "0.98 0.50 0.45",
    "0.50 0.69 0.83",
    "0.99 0.71 0.38",
    "0.70 0.87 0.41",
    "0.99 0.80 0.90",
];

/// What happens at one instant, in the order Paje needs for equal times: ends (back to
/// idle) before starts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Worker back to idle.
    End { worker: u32 },
    /// Worker starts a task of a codelet.
    Start { worker: u32, codelet: u32 },
    /// Copy `k` (its index in the trace's transfers) leaves its source node.
    CopyStart { k: usize },
    /// Copy `k` reaches its destination node.
    CopyEnd { k: usize },
}

fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// A Paje string: double-quoted, with quotes replaced (Paje has no escape).
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "'"))
}

fn write(trace: &Trace, out: impl Write) -> io::Result<u64> {
    let mut o = BufWriter::with_capacity(1 << 16, out);
    o.write_all(HEADER.as_bytes())?;
    writeln!(o, "0 CT_Prog 0 \"Program\"")?;
    writeln!(o, "0 CT_Worker CT_Prog \"Worker\"")?;
    writeln!(o, "0 CT_Meter CT_Prog \"Meter\"")?;
    writeln!(o, "0 CT_Markers CT_Prog \"Markers\"")?;
    writeln!(o, "1 ST_Worker CT_Worker \"Worker State\"")?;
    writeln!(o, "1 ST_Marker CT_Markers \"Marker\"")?;
    let nodes: BTreeSet<u32> = trace
        .transfers
        .iter()
        .flat_map(|t| [t.src, t.dst])
        .collect();
    if !nodes.is_empty() {
        writeln!(o, "0 CT_MemNode CT_Prog \"Memory Node\"")?;
        writeln!(o, "8 LT_Copy CT_Prog CT_MemNode CT_MemNode \"Copy\"")?;
    }
    writeln!(o, "2 V_idle ST_Worker \"Idle\" \"0.9 0.9 0.9\"")?;
    writeln!(o, "2 V_none ST_Marker \"none\" \"1.0 1.0 1.0\"")?;
    // Codelets: every id the tasks use, named when the trace declares it.
    let mut ids: BTreeSet<u32> = trace.codelets.iter().map(|c| c.id).collect();
    let mut events: Vec<(u64, Ev)> = Vec::with_capacity(2 * trace.task_count() as usize);
    let mut workers: BTreeSet<u32> = trace.meta.workers.iter().map(|w| w.id).collect();
    let mut tasks = 0u64;
    let mut t_max = 0u64;
    for chunk in &trace.tasks {
        for (r, _) in chunk.iter() {
            ids.insert(r.codelet);
            workers.insert(r.worker);
            events.push((
                r.start.0,
                Ev::Start {
                    worker: r.worker,
                    codelet: r.codelet,
                },
            ));
            events.push((r.end.0, Ev::End { worker: r.worker }));
            t_max = t_max.max(r.end.0);
            tasks += 1;
        }
    }
    for (k, t) in trace.transfers.iter().enumerate() {
        events.push((t.start.0, Ev::CopyStart { k }));
        events.push((t.end.0.max(t.start.0), Ev::CopyEnd { k }));
        t_max = t_max.max(t.end.0);
    }
    // One entity value (and colour) per codelet name: codelets that share a name (the
    // reduction codelets of several handles, each its own codelet) are one task type.
    let mut names: Vec<String> = Vec::new();
    let mut value_of: std::collections::HashMap<u32, usize> = Default::default();
    for id in &ids {
        let name = trace
            .codelets
            .iter()
            .find(|c| c.id == *id)
            .map_or(format!("codelet {id}"), |c| c.name.clone());
        let v = match names.iter().position(|n| *n == name) {
            Some(v) => v,
            None => {
                writeln!(
                    o,
                    "2 V_c{} ST_Worker {} \"{}\"",
                    names.len(),
                    quoted(&name),
                    PALETTE[names.len() % PALETTE.len()]
                )?;
                names.push(name);
                names.len() - 1
            }
        };
        value_of.insert(*id, v);
    }
    // Power variables, one per domain.
    for d in &trace.domains {
        let name = match d.domain {
            Domain::Psys => "psys".to_owned(),
            other => other.to_string(),
        };
        // A simulated meter's power says so in ViTE's legend too.
        let simulated = trace.meters.iter().any(|m| m.id == d.meter && m.simulated);
        let unit = if simulated { "W, SIMULATED" } else { "W" };
        writeln!(
            o,
            "6 VT_d{} CT_Meter {} \"0.8 0.2 0.2\"",
            d.id,
            quoted(&format!("Power {name} ({unit})"))
        )?;
    }
    let mut marks: Vec<(u64, bool, String)> = Vec::new();
    for (i, m) in trace.markers.iter().enumerate() {
        writeln!(o, "2 V_m{i} ST_Marker {} \"0.6 0.6 1.0\"", quoted(&m.name))?;
        marks.push((m.start.0, true, format!("V_m{i}")));
        marks.push((m.end.0, false, "V_none".to_owned()));
        t_max = t_max.max(m.end.0);
    }
    let t0 = secs(0);
    writeln!(o, "3 {t0} C_Prog CT_Prog 0 \"taskwatt run\"")?;
    for w in &workers {
        writeln!(o, "3 {t0} C_W{w} CT_Worker C_Prog \"worker {w}\"")?;
    }
    for n in &nodes {
        writeln!(o, "3 {t0} C_MN{n} CT_MemNode C_Prog \"memory node {n}\"")?;
    }
    writeln!(o, "3 {t0} C_Meter CT_Meter C_Prog \"energy\"")?;
    writeln!(o, "3 {t0} C_Markers CT_Markers C_Prog \"markers\"")?;
    for w in &workers {
        writeln!(o, "5 {t0} ST_Worker C_W{w} V_idle")?;
    }
    // Samples: the power of each interval, set at its first sample.
    let mut samples: Vec<(u64, u16, f64)> = Vec::new();
    let mut last: std::collections::HashMap<u16, (u64, f64)> = Default::default();
    let mut sorted: Vec<&crate::EnergySample> = trace.samples.iter().collect();
    sorted.sort_by_key(|s| (s.domain, s.t));
    for s in sorted {
        if let Some((t, e)) = last.insert(s.domain, (s.t.0, s.energy_j)) {
            if s.t.0 > t {
                let w = (s.energy_j - e) / ((s.t.0 - t) as f64 * 1e-9);
                if w.is_finite() {
                    samples.push((t, s.domain, w));
                }
            }
        }
        t_max = t_max.max(s.t.0);
    }
    events.sort_unstable();
    samples.sort_by_key(|s| s.0);
    marks.sort_by_key(|m| (m.0, m.1));
    // Merge the three time-sorted streams.
    let (mut i, mut j, mut k) = (0, 0, 0);
    loop {
        let te = events.get(i).map(|e| e.0);
        let ts = samples.get(j).map(|s| s.0);
        let tm = marks.get(k).map(|m| m.0);
        let Some(t) = [te, ts, tm].into_iter().flatten().min() else {
            break;
        };
        if te == Some(t) {
            match events[i].1 {
                Ev::End { worker } => writeln!(o, "5 {} ST_Worker C_W{worker} V_idle", secs(t))?,
                Ev::Start { worker, codelet } => writeln!(
                    o,
                    "5 {} ST_Worker C_W{worker} V_c{}",
                    secs(t),
                    value_of.get(&codelet).copied().unwrap_or_default()
                )?,
                Ev::CopyStart { k } | Ev::CopyEnd { k } => {
                    let c = &trace.transfers[k];
                    let value = quoted(&format!("{} {} B", trace.handle_label(c.handle), c.bytes));
                    match events[i].1 {
                        Ev::CopyStart { .. } => writeln!(
                            o,
                            "9 {} LT_Copy C_Prog C_MN{} {value} copy{k}",
                            secs(t),
                            c.src
                        )?,
                        _ => writeln!(
                            o,
                            "10 {} LT_Copy C_Prog C_MN{} {value} copy{k}",
                            secs(t),
                            c.dst
                        )?,
                    }
                }
            }
            i += 1;
        } else if tm == Some(t) {
            writeln!(o, "5 {} ST_Marker C_Markers {}", secs(t), marks[k].2)?;
            k += 1;
        } else {
            let (_, d, w) = samples[j];
            writeln!(o, "7 {} VT_d{d} C_Meter {w}", secs(t))?;
            j += 1;
        }
    }
    let end = secs(t_max);
    for w in &workers {
        writeln!(o, "4 {end} CT_Worker C_W{w}")?;
    }
    for n in &nodes {
        writeln!(o, "4 {end} CT_MemNode C_MN{n}")?;
    }
    writeln!(o, "4 {end} CT_Meter C_Meter")?;
    writeln!(o, "4 {end} CT_Markers C_Markers")?;
    writeln!(o, "4 {end} CT_Prog C_Prog")?;
    o.flush()?;
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, CodeletInfo, TaskChunk, TaskRecord, Timestamp};

    #[test]
    fn events_are_in_time_order_and_every_value_is_defined() {
        let mut chunk = TaskChunk::default();
        // Out of order on purpose: a later task first.
        chunk.push(
            TaskRecord::executed(1, 1, Arch::Cpu, 1, Timestamp(3_000), Timestamp(4_000)),
            &[],
        );
        chunk.push(
            TaskRecord::executed(0, 0, Arch::Cpu, 0, Timestamp(1_000), Timestamp(3_000)),
            &[],
        );
        let trace = Trace {
            codelets: vec![CodeletInfo {
                id: 0,
                name: "potrf".into(),
                archs: vec![Arch::Cpu],
            }],
            tasks: vec![chunk],
            ..Trace::default()
        };
        let mut out = Vec::new();
        assert_eq!(write_paje(&trace, &mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        let mut last = 0.0f64;
        for l in text
            .lines()
            .filter(|l| l.starts_with("5 ") || l.starts_with("7 "))
        {
            let t: f64 = l.split(' ').nth(1).unwrap().parse().unwrap();
            assert!(t >= last, "{l}");
            last = t;
        }
        assert!(text.contains("2 V_c0 ST_Worker \"potrf\""));
        // Two codelets of one name (reductions of two handles) are one value, one colour.
        let mut two = trace.clone();
        two.codelets.push(CodeletInfo {
            id: 1,
            name: "potrf".into(),
            archs: vec![Arch::Cpu],
        });
        let mut out2 = Vec::new();
        write_paje(&two, &mut out2).unwrap();
        let text2 = String::from_utf8(out2).unwrap();
        assert_eq!(text2.matches("ST_Worker \"potrf\"").count(), 1, "{text2}");
        assert!(
            text2.contains("5 0.000003000 ST_Worker C_W1 V_c0"),
            "{text2}"
        );
        // Codelet 1 is not declared: named by id, still defined before use.
        assert!(text.contains("2 V_c1 ST_Worker \"codelet 1\""));
        assert!(text.contains("5 0.000001000 ST_Worker C_W0 V_c0"));
        // At 3 us worker 0 ends before worker 1 starts.
        let end0 = text.find("5 0.000003000 ST_Worker C_W0 V_idle").unwrap();
        let start1 = text.find("5 0.000003000 ST_Worker C_W1 V_c1").unwrap();
        assert!(end0 < start1);
    }

    #[test]
    fn copies_are_links_between_memory_nodes_labelled_by_the_handle_s_name() {
        let copy = |handle, src, dst, start, end| crate::Transfer {
            handle,
            src,
            dst,
            bytes: 8000,
            worker: Some(1),
            task: Some(3),
            start: Timestamp(start),
            end: Timestamp(end),
            kind: crate::TransferKind::Fetch,
        };
        let trace = Trace {
            transfers: vec![copy(7, 0, 1, 5_000, 6_000), copy(9, 1, 0, 2_000, 2_000)],
            handles: vec![crate::HandleInfo {
                handle: 7,
                name: "grid[2]".into(),
                bytes: 8000,
            }],
            ..Trace::default()
        };
        let mut out = Vec::new();
        write_paje(&trace, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for want in [
            "3 0.000000000 C_MN0 CT_MemNode C_Prog \"memory node 0\"",
            "3 0.000000000 C_MN1 CT_MemNode C_Prog \"memory node 1\"",
            "9 0.000005000 LT_Copy C_Prog C_MN0 \"grid[2] 8000 B\" copy0",
            "10 0.000006000 LT_Copy C_Prog C_MN1 \"grid[2] 8000 B\" copy0",
            "9 0.000002000 LT_Copy C_Prog C_MN1 \"h9 8000 B\" copy1",
            "10 0.000002000 LT_Copy C_Prog C_MN0 \"h9 8000 B\" copy1",
            "4 0.000006000 CT_MemNode C_MN1",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
        // A copy of no duration starts before it ends.
        assert!(text.find("9 0.000002000").unwrap() < text.find("10 0.000002000").unwrap());
    }
}
