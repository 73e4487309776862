//! Collects imported task executions and assembles the trace, in bounded memory: each
//! task is kept in 32 bytes (a `TaskRecord` is 72), and the chunks are made one worker at a
//! time and handed on as they are made (to the trace file's writer, whose channel is
//! bounded, for [`import_csv_to`](super::import_csv_to); into a [`Trace`] for the importers
//! that return one). An import to a file also keeps at most a budget of records in memory:
//! past it, they are sorted into runs in a temporary file ([`super::spill`]) and merged
//! back worker by worker.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::energy::Energy;
use super::spill::{self, Rec, Segment, Spill};
use crate::writer::EndTally;
use crate::{
    Arch, Chunk, CodeletId, CodeletInfo, RunMeta, TaskChunk, TaskId, TaskRecord, TaskStatus,
    Timestamp, Trace, TraceError, WorkerId, WorkerInfo,
};

/// Records per task chunk in an imported trace.
pub(super) const RECORDS_PER_CHUNK: usize = 4096;

/// [`Rec::extra`] of a record without extras.
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

/// One worker's records.
struct PerWorker {
    id: WorkerId,
    /// Its first task's architecture.
    arch: Arch,
    /// Records in memory, in blocks of at most [`RECORDS_PER_CHUNK`] (no growth slack
    /// beyond the last block: a single growing vector would hold up to twice the records).
    blocks: Vec<Vec<Rec>>,
    /// Runs of its records in the spill file, each sorted by [`spill::key`].
    spilled: Vec<Segment>,
}

/// Where records beyond the memory budget go, and the ids to check for duplicates.
struct Spilling {
    /// The directory of the temporary file, created at the first spill.
    dir: std::path::PathBuf,
    /// Records kept in memory before a spill.
    budget: usize,
    file: Option<Spill>,
    /// Whether ids come from the source and must be checked for duplicates.
    check_ids: bool,
    /// The ids pushed so far, while they are `first..=last` in that order (the usual
    /// case: nothing to keep); once not, the range they were until then.
    consecutive: Option<(TaskId, TaskId)>,
    /// Whether a later id broke `consecutive`.
    broken: bool,
    /// The ids pushed after the break and since the last spill, in input order.
    ids: Vec<TaskId>,
    /// Sorted runs of the ids spilled.
    id_runs: Vec<Segment>,
}

/// Collects imported task executions and assembles the trace.
pub(super) struct TraceBuilder {
    codelets: Vec<CodeletInfo>,
    by_name: HashMap<String, CodeletId>,
    /// Per worker, in order of first appearance.
    per_worker: Vec<PerWorker>,
    /// Where each worker is in `per_worker`.
    slot: HashMap<WorkerId, usize>,
    /// The last worker pushed to, and its slot: rows of one worker often follow each other.
    last: Option<(WorkerId, usize)>,
    extras: Vec<Extra>,
    /// Predecessors of the tasks that have some (StarPU's `DependsOn`; CSV has none).
    preds: HashMap<TaskId, Vec<TaskId>>,
    /// The tasks' data accesses, where the source has them (StarPU's `Handles`, `Modes`
    /// and `Sizes`), in input order.
    accesses: Vec<crate::TaskAccess>,
    /// The first start and last end of the tasks pushed.
    span: Option<(u64, u64)>,
    tasks: u64,
    /// Records in memory.
    buffered: usize,
    /// The last id pushed, while every id so far was greater than the one before (then
    /// they are all distinct and need no check).
    increasing: Option<Option<TaskId>>,
    spilling: Option<Spilling>,
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
    /// Bytes written to the temporary file (0 when the records fitted in memory).
    pub(super) spilled_bytes: u64,
    /// Tasks that start before another task of their worker ended (a worker runs one
    /// task at a time: the source's workers are not what taskwatt calls one).
    pub(super) overlapping: u64,
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
            accesses: Vec::new(),
            span: None,
            tasks: 0,
            buffered: 0,
            increasing: Some(None),
            spilling: None,
        }
    }

    /// Keeps at most `budget` records in memory (at least one chunk's), sorting the rest
    /// into a temporary file in `dir`; `check_ids`: the ids come from the source and must
    /// be checked for duplicates ([`TraceBuilder::duplicate_id`]). Only for sources
    /// without submission times or dependencies (CSV), whose records are whole in 32 bytes.
    pub(super) fn spill_to(&mut self, dir: &Path, budget: usize, check_ids: bool) {
        self.spilling = Some(Spilling {
            dir: dir.to_path_buf(),
            budget: budget.max(RECORDS_PER_CHUNK),
            file: None,
            check_ids,
            consecutive: None,
            broken: false,
            ids: Vec::new(),
            id_runs: Vec::new(),
        });
    }

    /// Adds a task's data accesses (after its record was pushed).
    pub(super) fn accesses(&mut self, a: impl IntoIterator<Item = crate::TaskAccess>) {
        self.accesses.extend(a);
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

    pub(super) fn push(&mut self, r: TaskRecord, preds: Vec<TaskId>) -> Result<(), TraceError> {
        if let Some(last) = &mut self.increasing {
            if last.is_some_and(|l| l >= r.id) {
                self.increasing = None;
            } else {
                *last = Some(r.id);
            }
        }
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
                    self.per_worker.push(PerWorker {
                        id: r.worker,
                        arch: r.arch,
                        blocks: Vec::new(),
                        spilled: Vec::new(),
                    });
                }
                self.last = Some((r.worker, slot));
                slot
            }
        };
        let blocks = &mut self.per_worker[slot].blocks;
        match blocks.last_mut() {
            Some(b) if b.len() < RECORDS_PER_CHUNK => b.push(rec),
            _ => {
                // Grown by doubling to exactly RECORDS_PER_CHUNK: many workers with few
                // tasks each do not hold a whole chunk's room each.
                let mut b = Vec::with_capacity(64);
                b.push(rec);
                blocks.push(b);
            }
        }
        self.buffered += 1;
        if let Some(sp) = &mut self.spilling {
            if sp.check_ids {
                match &mut sp.consecutive {
                    Some((_, last)) if !sp.broken && last.checked_add(1) == Some(r.id) => {
                        *last = r.id
                    }
                    None => sp.consecutive = Some((r.id, r.id)),
                    _ => {
                        sp.broken = true;
                        sp.ids.push(r.id);
                    }
                }
            }
            if self.buffered >= sp.budget {
                self.spill()?;
            }
        }
        Ok(())
    }

    /// Sorts the records in memory into runs in the spill file, one per worker, and the
    /// ids into one more.
    fn spill(&mut self) -> Result<(), TraceError> {
        let Some(sp) = &mut self.spilling else {
            return Ok(());
        };
        debug_assert!(self.extras.is_empty() && self.preds.is_empty());
        if sp.file.is_none() {
            sp.file = Some(Spill::new(&sp.dir)?);
        }
        let file = sp.file.as_mut().expect("created above");
        for w in &mut self.per_worker {
            if !w.blocks.is_empty() {
                w.spilled
                    .push(file.write_records(std::mem::take(&mut w.blocks))?);
            }
        }
        if !sp.ids.is_empty() {
            sp.ids.sort_unstable();
            sp.id_runs.push(file.write_ids(&sp.ids)?);
            sp.ids.clear();
        }
        self.buffered = 0;
        Ok(())
    }

    pub(super) fn workers(&self) -> BTreeSet<WorkerId> {
        self.per_worker.iter().map(|w| w.id).collect()
    }

    /// A task id pushed twice, if any. Free when the ids came in increasing order.
    pub(super) fn duplicate_id(&mut self) -> Result<Option<TaskId>, TraceError> {
        if self.increasing.is_some() {
            return Ok(None);
        }
        if let Some(Spilling {
            file: Some(file),
            check_ids: true,
            consecutive,
            ids,
            id_runs,
            ..
        }) = &mut self.spilling
        {
            ids.sort_unstable();
            file.flush()?;
            return file.duplicate_id(id_runs, ids, *consecutive);
        }
        let mut ids: Vec<TaskId> = Vec::with_capacity(self.buffered);
        for w in &self.per_worker {
            for b in &w.blocks {
                ids.extend(b.iter().map(|r| r.id));
            }
        }
        ids.sort_unstable();
        Ok(ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]))
    }

    /// The trace, in memory.
    pub(super) fn build(
        self,
        source: &str,
        file: &Path,
        energy: Option<Energy>,
    ) -> Result<(Trace, Emitted), TraceError> {
        let mut chunks = Vec::new();
        let mut tally = EndTally::default();
        let e = self.emit(source, file, energy, &mut |c| {
            tally.add(&c);
            chunks.push(c);
        })?;
        let mut trace = Trace::from_chunks(chunks);
        // No wall clock in the sources: the End records the counts and the span only.
        trace.end = Some(tally.end(0));
        Ok((trace, e))
    }

    /// Hands on the trace's chunks: its metadata, one run of task chunks per worker (each
    /// worker's records in end order), then the energy. Each worker's records are freed
    /// as its chunks are made; spilled ones are merged back from the file.
    pub(super) fn emit(
        mut self,
        source: &str,
        file: &Path,
        energy: Option<Energy>,
        out: &mut dyn FnMut(Chunk),
    ) -> Result<Emitted, TraceError> {
        self.per_worker.sort_unstable_by_key(|w| w.id);
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
                .map(|w| WorkerInfo {
                    id: w.id,
                    arch: w.arch,
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
        let mut spill = self.spilling.and_then(|sp| sp.file);
        if let Some(f) = &mut spill {
            f.flush()?;
            emitted.spilled_bytes = f.bytes();
        }
        let mut part: Vec<Rec> = Vec::with_capacity(RECORDS_PER_CHUNK);
        for mut w in self.per_worker {
            // One worker at a time is made contiguous (each block freed as it is copied),
            // unless some of its records are in the spill file: then its blocks are merged
            // with its runs there, and never copied.
            let spilled = match &spill {
                Some(f) if !w.spilled.is_empty() => {
                    Some(f.merge(&w.spilled, std::mem::take(&mut w.blocks)))
                }
                _ => None,
            };
            let mut recs = Vec::new();
            if spilled.is_none() {
                recs.reserve_exact(w.blocks.iter().map(Vec::len).sum());
                for b in w.blocks {
                    recs.extend(b);
                }
                recs.sort_unstable_by_key(spill::key);
            }
            // In end order, a task overlaps an earlier one exactly when it starts before
            // the previous one's end (the latest of the earlier ends).
            let mut prev_end = 0u64;
            let overlapping = &mut emitted.overlapping;
            let mut chunk = |part: &[Rec]| {
                let mut c = TaskChunk::with_capacity(part.len(), 0);
                for r in part {
                    if r.start < prev_end {
                        *overlapping += 1;
                    }
                    prev_end = prev_end.max(r.end);
                    let arch = Arch::ALL[(r.codelet_arch & 1) as usize];
                    let mut t = TaskRecord::executed(
                        r.id,
                        r.codelet_arch / 2,
                        arch,
                        w.id,
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
            };
            match spilled {
                Some(mut merged) => {
                    while let Some(r) = merged.next()? {
                        part.push(r);
                        if part.len() == RECORDS_PER_CHUNK {
                            chunk(&part);
                            part.clear();
                        }
                    }
                    if !part.is_empty() {
                        chunk(&part);
                        part.clear();
                    }
                }
                None => recs.chunks(RECORDS_PER_CHUNK).for_each(&mut chunk),
            }
        }
        for a in self.accesses.chunks(crate::trace::SAMPLES_PER_CHUNK) {
            out(Chunk::Accesses(a.to_vec()));
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
        Ok(emitted)
    }
}
