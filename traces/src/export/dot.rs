//! The task graph as Graphviz DOT: one node per task execution (its codelet, id and
//! worker; filled with one colour per codelet), one edge per dependency. `dot -Tsvg` draws
//! it; for more than a few thousand tasks, `sfdp` or a viewer such as xdot copes better.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::format::ChunkKind;
use crate::{Chunk, TaskChunk, Trace, TraceError};

use super::{read_metadata, stream};

/// Fill colours, one per codelet (cycled): a qualitative palette readable with black text.
const PALETTE: [&str; 10] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
    "#d9d9d9", "#bc80bd",
];

/// Exports the trace file at `path` as a DOT graph, streaming; returns the number of tasks.
pub fn export_dot(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Dot::begin(&meta, out).map_err(|e| err(path, e))?;
    stream(
        path,
        |k| matches!(k, ChunkKind::Tasks),
        |c| match c {
            Chunk::Tasks(t) => w.tasks(&t).map_err(|e| err(path, e)),
            _ => Ok(()),
        },
    )?;
    w.finish().map_err(|e| err(path, e))
}

/// Exports an in-memory trace as a DOT graph; returns the number of tasks.
pub fn write_dot(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    let go = || -> io::Result<u64> {
        let mut w = Dot::begin(trace, out)?;
        for t in &trace.tasks {
            w.tasks(t)?;
        }
        w.finish()
    };
    go().map_err(|e| err(Path::new("DOT output"), e))
}

fn err(path: &Path, source: io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

struct Dot<W: Write> {
    out: BufWriter<W>,
    /// Codelet id -> (escaped name, colour).
    codelets: HashMap<u32, (String, &'static str)>,
    tasks: u64,
    /// A merged job's trace (ranks in its Comms chunks): task ids are `rank << 40 | id`,
    /// shown as `#id r<rank>`.
    ranks: bool,
}

/// Bits of a merged job's task id below its rank (`taskwatt merge`).
const RANK_SHIFT: u32 = 40;

impl<W: Write> Dot<W> {
    fn begin(meta: &Trace, out: W) -> io::Result<Dot<W>> {
        let mut w = Dot {
            out: BufWriter::with_capacity(1 << 16, out),
            codelets: meta
                .codelets
                .iter()
                .enumerate()
                .map(|(i, c)| (c.id, (escape(&c.name), PALETTE[i % PALETTE.len()])))
                .collect(),
            tasks: 0,
            ranks: meta.comms.iter().any(|c| c.rank != meta.comms[0].rank),
        };
        let title = escape(&format!(
            "{} ({})",
            meta.meta.app.as_deref().unwrap_or("taskwatt run"),
            meta.meta.policy
        ));
        writeln!(w.out, "digraph taskwatt {{")?;
        writeln!(w.out, "  label=\"{title}\";")?;
        writeln!(
            w.out,
            "  node [shape=box, style=filled, fontname=\"Helvetica\", fontsize=10];"
        )?;
        Ok(w)
    }

    fn tasks(&mut self, chunk: &TaskChunk) -> io::Result<()> {
        for (r, preds) in chunk.iter() {
            let (name, colour) = self
                .codelets
                .get(&r.codelet)
                .map_or((format!("codelet {}", r.codelet), "#ffffff"), |(n, c)| {
                    (n.clone(), *c)
                });
            let id = if self.ranks {
                let local = r.id & ((1 << RANK_SHIFT) - 1);
                format!("#{local} r{}", r.id >> RANK_SHIFT)
            } else {
                format!("#{}", r.id)
            };
            writeln!(
                self.out,
                "  t{} [label=\"{name}\\n{id} w{}\", fillcolor=\"{colour}\"];",
                r.id, r.worker
            )?;
            for p in preds {
                writeln!(self.out, "  t{p} -> t{};", r.id)?;
            }
            self.tasks += 1;
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<u64> {
        writeln!(self.out, "}}")?;
        self.out.flush()?;
        Ok(self.tasks)
    }
}

/// A DOT string's content: quotes and backslashes escaped, line breaks as `\n`.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, CodeletInfo, TaskRecord, Timestamp};

    #[test]
    fn nodes_edges_and_escaped_names() {
        let mut chunk = TaskChunk::default();
        chunk.push(
            TaskRecord::executed(0, 0, Arch::Cpu, 0, Timestamp(1), Timestamp(2)),
            &[],
        );
        chunk.push(
            TaskRecord::executed(1, 1, Arch::Cpu, 1, Timestamp(3), Timestamp(4)),
            &[0],
        );
        let trace = Trace {
            codelets: vec![
                CodeletInfo {
                    id: 0,
                    name: "po\"trf".into(),
                    archs: vec![Arch::Cpu],
                },
                CodeletInfo {
                    id: 1,
                    name: "gemm".into(),
                    archs: vec![Arch::Cpu],
                },
            ],
            tasks: vec![chunk],
            ..Trace::default()
        };
        let mut out = Vec::new();
        assert_eq!(write_dot(&trace, &mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("digraph taskwatt {"));
        assert!(text.contains("t0 [label=\"po\\\"trf\\n#0 w0\""), "{text}");
        assert!(text.contains("t1 [label=\"gemm\\n#1 w1\""), "{text}");
        assert!(text.contains("  t0 -> t1;\n"));
        assert!(text.trim_end().ends_with('}'));
        // Balanced braces and one statement per line: what dot's parser needs.
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }

    #[test]
    fn a_merged_job_s_tasks_are_labelled_with_their_rank() {
        // `taskwatt merge` numbers rank r's task id as `r << 40 | id`: the label showed
        // `#1099511627781`.
        let mut chunk = TaskChunk::default();
        let id = (1u64 << RANK_SHIFT) | 5;
        chunk.push(
            TaskRecord::executed(id, 0, Arch::Cpu, 3, Timestamp(1), Timestamp(2)),
            &[],
        );
        let rank = |rank| crate::CommChunk {
            rank,
            size: 2,
            ..crate::CommChunk::default()
        };
        let trace = Trace {
            tasks: vec![chunk],
            comms: vec![rank(0), rank(1)],
            ..Trace::default()
        };
        let mut out = Vec::new();
        write_dot(&trace, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(&format!("t{id} [label=\"codelet 0\\n#5 r1 w3\"")),
            "{text}"
        );
    }
}
