//! Collects imported task executions and assembles the trace, in bounded memory: each
//! task is kept in 32 bytes until the end of the input (a `TaskRecord` is 72), and the
//! chunks are made one worker at a time and handed on as they are made (to the trace
//! file's writer, whose channel is bounded, for [`import_csv_to`](super::import_csv_to);
//! into a [`Trace`] for the importers that return one).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::energy::Energy;
use crate::writer::EndTally;
use crate::{
    Arch, Chunk, CodeletId, CodeletInfo, RunMeta, TaskChunk, TaskId, TaskRecord, TaskStatus,
    Timestamp, Trace, WorkerId, WorkerInfo,
};

/// Records per task chunk in an imported trace.
pub(super) const RECORDS_PER_CHUNK: usize = 4096;

/// A task as kept until the end of the input: what `TaskRecord::executed` does not fill
/// with its defaults is in `extras`.
#[derive(Clone, Copy)]
struct Rec {
    id: TaskId,
    start: u64,
    end: u64,
    /// The codelet id times 2, plus the architecture's index (CPU 0, GPU 1).
    codelet_arch: u32,
    /// Index in `extras`, or [`NO_EXTRA`].
    extra: u32,
}

const NO_EXTRA: u32 = u32::MAX;

/// The fields of a record that differ from `TaskRecord::executed`'s defaults (StarPU's
/// submission times, priorities and footprints).
struct Extra {
    submit: u64,
    ready: u64,
    footprint: u64,
    priority: i32,
    status: TaskStatus,
}

/// Collects imported task executions and assembles the trace.
pub(super) struct TraceBuilder {
    codelets: Vec<CodeletInfo>,
    by_name: HashMap<String, CodeletId>,
    /// Per worker, in order of first appearance: its id, architecture (its first task's)
    /// and records, in blocks of [`RECORDS_PER_CHUNK`] (no growth slack: a single growing
    /// vector would hold up to twice that).
    per_worker: Vec<(WorkerId, Arch, Vec<Vec<Rec>>)>,
    /// Where each worker is in `per_worker`.
    slot: HashMap<WorkerId, usize>,
    /// The last worker pushed to, and its slot: rows of one worker often follow each other.
    last: Option<(WorkerId, usize)>,
    extras: Vec<Extra>,
    /// Predecessors of the tasks that have some (StarPU's `DependsOn`; CSV has none).
    preds: HashMap<TaskId, Vec<TaskId>>,
    /// The first start and last end of the tasks pushed.
    span: Option<(u64, u64)>,
    tasks: u64,
}

/// What [`TraceBuilder::emit`] handed on.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Emitted {
    pub(super) tasks: u64,
    pub(super) samples: u64,
    pub(super) domains: usize,
    /// The tasks' first start and last end, ns.
    pub(super) task_span: Option<(u64, u64)>,
    /// The samples' first and last time, ns.
    pub(super) sample_span: Option<(u64, u64)>,
}

impl TraceBuilder {
    pub(super) fn new() -> Self {
        TraceBuilder {
            codelets: Vec::new(),
            by_name: HashMap::new(),
            per_worker: Vec::new(),
            slot: HashMap::new(),
            last: None,
            extras: Vec::new(),
            preds: HashMap::new(),
            span: None,
            tasks: 0,
        }
    }

    /// The id of the codelet called `name`, declared on first use.
    pub(super) fn codelet(&mut self, name: &str, arch: Arch) -> CodeletId {
        // A few types (the common case) are found faster by comparing names than hashing.
        let known = if self.codelets.len() <= 16 {
            self.codelets.iter().find(|c| c.name == name).map(|c| c.id)
        } else {
            self.by_name.get(name).copied()
        };
        let id = match known {
            Some(id) => id,
            None => {
                let id = self.codelets.len() as CodeletId;
                self.by_name.insert(name.to_string(), id);
                self.codelets.push(CodeletInfo {
                    id,
                    name: name.to_string(),
                    archs: Vec::new(),
                });
                id
            }
        };
        let archs = &mut self.codelets[id as usize].archs;
        if !archs.contains(&arch) {
            archs.push(arch);
            archs.sort();
        }
        id
    }

    pub(super) fn push(&mut self, r: TaskRecord, preds: Vec<TaskId>) {
        if !preds.is_empty() {
            self.preds.insert(r.id, preds);
        }
        let plain = TaskRecord::executed(r.id, r.codelet, r.arch, r.worker, r.start, r.end);
        let extra = if (r.submit, r.ready, r.footprint, r.priority, r.status)
            == (
                plain.submit,
                plain.ready,
                plain.footprint,
                plain.priority,
                plain.status,
            ) {
            NO_EXTRA
        } else {
            self.extras.push(Extra {
                submit: r.submit.0,
                ready: r.ready.0,
                footprint: r.footprint,
                priority: r.priority,
                status: r.status,
            });
            u32::try_from(self.extras.len() - 1)
                .ok()
                .filter(|&i| i != NO_EXTRA)
                .expect("fewer than 2^32 - 1 imported tasks with submission times")
        };
        let rec = Rec {
            id: r.id,
            start: r.start.0,
            end: r.end.0,
            codelet_arch: r.codelet * 2 + r.arch.index() as u32,
            extra,
        };
        self.span = Some(match self.span {
            None => (rec.start, rec.end),
            Some((a, b)) => (a.min(rec.start), b.max(rec.end)),
        });
        self.tasks += 1;
        let slot = match self.last {
            Some((w, slot)) if w == r.worker => slot,
            _ => {
                let n = self.per_worker.len();
                let slot = *self.slot.entry(r.worker).or_insert(n);
                if slot == n {
                    self.per_worker.push((r.worker, r.arch, Vec::new()));
                }
                self.last = Some((r.worker, slot));
                slot
            }
        };
        let blocks = &mut self.per_worker[slot].2;
        match blocks.last_mut() {
            Some(b) if b.len() < RECORDS_PER_CHUNK => b.push(rec),
            _ => {
                let mut b = Vec::with_capacity(RECORDS_PER_CHUNK);
                b.push(rec);
                blocks.push(b);
            }
        }
    }

    pub(super) fn workers(&self) -> BTreeSet<WorkerId> {
        self.per_worker.iter().map(|w| w.0).collect()
    }

    /// Every task id pushed, sorted (for a uniqueness check after the input).
    pub(super) fn sorted_ids(&self) -> Vec<TaskId> {
        let mut ids: Vec<TaskId> = Vec::with_capacity(self.tasks as usize);
        for (_, _, blocks) in &self.per_worker {
            for b in blocks {
                ids.extend(b.iter().map(|r| r.id));
            }
        }
        ids.sort_unstable();
        ids
    }

    /// The trace, in memory.
    pub(super) fn build(self, source: &str, file: &Path, energy: Option<Energy>) -> Trace {
        let mut chunks = Vec::new();
        let mut tally = EndTally::default();
        self.emit(source, file, energy, &mut |c| {
            tally.add(&c);
            chunks.push(c);
        });
        let mut trace = Trace::from_chunks(chunks);
        // No wall clock in the sources: the End records the counts and the span only.
        trace.end = Some(tally.end(0));
        trace
    }

    /// Hands on the trace's chunks: its metadata, one run of task chunks per worker (each
    /// worker's records in end order), then the energy. Each worker's records are freed
    /// as its chunks are made.
    pub(super) fn emit(
        mut self,
        source: &str,
        file: &Path,
        energy: Option<Energy>,
        out: &mut dyn FnMut(Chunk),
    ) -> Emitted {
        self.per_worker.sort_unstable_by_key(|w| w.0);
        let mut params = BTreeMap::new();
        params.insert("import.source".to_string(), source.to_string());
        params.insert("import.file".to_string(), file.display().to_string());
        let meta = RunMeta {
            taskwatt_version: env!("CARGO_PKG_VERSION").to_string(),
            policy: "unknown (imported)".to_string(),
            params,
            workers: self
                .per_worker
                .iter()
                .map(|&(id, arch, _)| WorkerInfo {
                    id,
                    arch,
                    cpu: None,
                    core: None,
                    package: 0,
                    numa: None,
                    device: None,
                })
                .collect(),
            ..RunMeta::default()
        };
        out(Chunk::Meta(meta));
        out(Chunk::Codelets(self.codelets));
        let mut emitted = Emitted {
            tasks: self.tasks,
            task_span: self.span,
            ..Emitted::default()
        };
        let no_preds: Vec<TaskId> = Vec::new();
        let extras = self.extras;
        for (worker, _, blocks) in self.per_worker {
            // One worker at a time is made contiguous (each block freed as it is copied).
            let mut recs = Vec::with_capacity(blocks.iter().map(Vec::len).sum());
            for b in blocks {
                recs.extend(b);
            }
            recs.sort_unstable_by_key(|r| (r.end, r.start, r.id));
            for part in recs.chunks(RECORDS_PER_CHUNK) {
                let mut c = TaskChunk::with_capacity(part.len(), 0);
                for r in part {
                    let arch = Arch::ALL[(r.codelet_arch & 1) as usize];
                    let mut t = TaskRecord::executed(
                        r.id,
                        r.codelet_arch / 2,
                        arch,
                        worker,
                        Timestamp(r.start),
                        Timestamp(r.end),
                    );
                    if let Some(e) = extras.get(r.extra as usize) {
                        t.submit = Timestamp(e.submit);
                        t.ready = Timestamp(e.ready);
                        t.footprint = e.footprint;
                        t.priority = e.priority;
                        t.status = e.status;
                    }
                    c.push(t, self.preds.get(&r.id).unwrap_or(&no_preds));
                }
                out(Chunk::Tasks(c));
            }
        }
        if let Some(e) = energy {
            emitted.domains = e.domains.len();
            emitted.samples = e.samples.len() as u64;
            emitted.sample_span = e.samples.iter().map(|s| s.t.0).fold(None, |acc, t| {
                Some(acc.map_or((t, t), |(a, b): (u64, u64)| (a.min(t), b.max(t))))
            });
            out(Chunk::Meters {
                meters: vec![e.meter],
                domains: e.domains,
            });
            for s in e.samples.chunks(crate::trace::SAMPLES_PER_CHUNK) {
                out(Chunk::Samples(s.to_vec()));
            }
        }
        emitted
    }
}
