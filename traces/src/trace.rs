//! A whole trace in memory, assembled from its chunks.
//!
//! Chunk order carries little meaning beyond the task chunks' own: metadata may arrive at
//! any point (codelets are sent as they register), so assembly merges by id. The rules,
//! one per chunk kind, are on [`Trace::push`].

use std::path::Path;

use crate::{
    Chunk, CodeletId, CodeletInfo, DomainId, DomainInfo, EnergySample, GroundTruth, Marker,
    MeterInfo, RunEnd, RunMeta, TaskChunk, TaskId, TaskRecord, Timestamp, TraceError, TraceWriter,
    Transfer, WriteSummary,
};

/// Samples per chunk when a trace is written back out.
pub(crate) const SAMPLES_PER_CHUNK: usize = 8192;

/// Name returned by [`Trace::codelet_name`] for an id no Codelets chunk declared.
pub const UNKNOWN_CODELET: &str = "unknown";

/// A whole trace in memory.
///
/// Equality compares floats by value, so a trace whose samples hold NaN (the `raw` value
/// of an integrated-power domain) is not equal to itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Run metadata (default when the trace had no Meta chunk).
    pub meta: RunMeta,
    /// Codelets, sorted by id.
    pub codelets: Vec<CodeletInfo>,
    /// Task chunks, in trace order (empty chunks left out).
    pub tasks: Vec<TaskChunk>,
    /// Meters, sorted by id.
    pub meters: Vec<MeterInfo>,
    /// Measured domains, sorted by id.
    pub domains: Vec<DomainInfo>,
    /// Energy samples, in trace order.
    pub samples: Vec<EnergySample>,
    /// A simulated meter's truth, if any.
    pub truth: Option<GroundTruth>,
    /// Markers, in trace order.
    pub markers: Vec<Marker>,
    /// Copies of data between memory nodes, in trace order (format 1.2; none on CPU-only
    /// runs).
    pub transfers: Vec<Transfer>,
    /// The tasks' data accesses, in trace order (format 1.3): each task's in the order it
    /// declared them.
    pub accesses: Vec<crate::TaskAccess>,
    /// The messages of the ranks of a distributed run (format 1.4): one per rank in a
    /// merged trace, this rank's in a rank's own.
    pub comms: Vec<crate::CommChunk>,
    /// The data handles the application named (format 1.5), sorted by id (a later name
    /// of a handle replaces an earlier one).
    pub handles: Vec<crate::HandleInfo>,
    /// CPU packages' sampled frequencies, in trace order (format 1.6; none where no
    /// frequency could be read).
    pub frequencies: Vec<crate::FrequencySample>,
    /// Device copies dropped under a memory limit, in trace order (format 1.7).
    pub evictions: Vec<crate::Eviction>,
    /// The End chunk; `None` for a run that was cut short.
    pub end: Option<RunEnd>,
}

/// What the copies between memory nodes of a trace add up to, per (source, destination).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferSummary {
    /// Copies.
    pub count: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time spent copying, summed over copies (ns).
    pub busy_ns: u64,
    /// Per (source node, destination node): copies and bytes, sorted by the pair.
    pub by_route: Vec<((u32, u32), u64, u64)>,
    /// Copies made ahead of their task (format 1.7).
    pub prefetches: u64,
    /// Device copies evicted under a memory limit, and those written back first (format
    /// 1.7; [`Trace::transfer_summary`] counts them, [`TransferSummary::of`] cannot).
    pub evictions: u64,
    /// Copies written back before their eviction.
    pub write_backs: u64,
}

impl TransferSummary {
    /// The summary of `transfers`.
    pub fn of(transfers: &[Transfer]) -> TransferSummary {
        let mut s = TransferSummary::default();
        let mut routes = std::collections::BTreeMap::<(u32, u32), (u64, u64)>::new();
        for t in transfers {
            s.count += 1;
            s.bytes = s.bytes.saturating_add(t.bytes);
            s.busy_ns = s.busy_ns.saturating_add(t.end.saturating_sub(t.start));
            match t.kind {
                crate::TransferKind::Prefetch => s.prefetches += 1,
                crate::TransferKind::WriteBack => s.write_backs += 1,
                crate::TransferKind::Fetch => {}
            }
            let r = routes.entry((t.src, t.dst)).or_default();
            r.0 += 1;
            r.1 = r.1.saturating_add(t.bytes);
        }
        s.by_route = routes.into_iter().map(|(k, (n, b))| (k, n, b)).collect();
        s
    }
}

impl std::fmt::Display for TransferSummary {
    /// `118 copies between memory nodes, 59.0 MiB, 41.2 ms of copying (0→1: 40, 1→0: 12, ...)`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} copies between memory nodes, {:.1} MiB, {:.1} ms of copying",
            self.count,
            self.bytes as f64 / (1u64 << 20) as f64,
            self.busy_ns as f64 / 1e6
        )?;
        let routes: Vec<String> = self
            .by_route
            .iter()
            .map(|((a, b), n, _)| format!("{a}\u{2192}{b}: {n}"))
            .collect();
        if !routes.is_empty() {
            write!(f, " ({})", routes.join(", "))?;
        }
        if self.prefetches > 0 {
            write!(f, "; {} made ahead of their task", self.prefetches)?;
        }
        if self.evictions > 0 {
            write!(
                f,
                "; {} evicted under the device's memory limit, {} written back first",
                self.evictions, self.write_backs
            )?;
        }
        Ok(())
    }
}

/// Inserts `item` into `v` (sorted by `key`), replacing an item with the same key.
fn upsert<T, K: Ord>(v: &mut Vec<T>, item: T, key: impl Fn(&T) -> K) {
    match v.binary_search_by(|x| key(x).cmp(&key(&item))) {
        Ok(i) => v[i] = item,
        Err(i) => v.insert(i, item),
    }
}

impl Trace {
    /// Assembles chunks, in order, with [`Trace::push`].
    pub fn from_chunks(chunks: impl IntoIterator<Item = Chunk>) -> Trace {
        let mut t = Trace::default();
        for c in chunks {
            t.push(c);
        }
        t
    }

    /// Adds one chunk:
    /// - Meta, Truth, End: the latest one wins (a trace has one of each);
    /// - Codelets, Meters: merged by id, a later entry replacing an earlier one;
    /// - Tasks, Samples, Markers: appended (empty task chunks are left out).
    pub fn push(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Meta(m) => self.meta = m,
            Chunk::Codelets(cs) => {
                for c in cs {
                    upsert(&mut self.codelets, c, |c| c.id);
                }
            }
            Chunk::Tasks(t) => {
                if !t.is_empty() {
                    self.tasks.push(t);
                }
            }
            Chunk::Meters { meters, domains } => {
                for m in meters {
                    upsert(&mut self.meters, m, |m| m.id);
                }
                for d in domains {
                    upsert(&mut self.domains, d, |d| d.id);
                }
            }
            Chunk::Samples(s) => self.samples.extend(s),
            Chunk::Truth(t) => self.truth = Some(t),
            Chunk::Markers(m) => self.markers.extend(m),
            Chunk::Transfers(t) => self.transfers.extend(t),
            Chunk::Accesses(a) => self.accesses.extend(a),
            Chunk::Comms(c) => self.comms.push(c),
            Chunk::Handles(h) => {
                for h in h {
                    upsert(&mut self.handles, h, |h| h.handle);
                }
            }
            Chunk::Frequencies(f) => self.frequencies.extend(f),
            Chunk::Evictions(e) => self.evictions.extend(e),
            Chunk::End(e) => self.end = Some(e),
        }
    }

    /// The name of handle `id`, if the application named it.
    pub fn handle_name(&self, id: u64) -> Option<&str> {
        self.handles
            .binary_search_by_key(&id, |h| h.handle)
            .ok()
            .map(|i| self.handles[i].name.as_str())
    }

    /// How exports show handle `id`: its name, else `h<id>`.
    pub fn handle_label(&self, id: u64) -> std::borrow::Cow<'_, str> {
        match self.handle_name(id) {
            Some(n) => std::borrow::Cow::Borrowed(n),
            None => std::borrow::Cow::Owned(format!("h{id}")),
        }
    }

    /// What the copies between memory nodes add up to (all zero on a CPU-only run).
    pub fn transfer_summary(&self) -> TransferSummary {
        TransferSummary {
            evictions: self.evictions.len() as u64,
            ..TransferSummary::of(&self.transfers)
        }
    }

    /// Number of task records.
    pub fn task_count(&self) -> u64 {
        self.tasks.iter().map(|c| c.len() as u64).sum()
    }

    /// Every task record with its predecessors, in trace order.
    pub fn tasks(&self) -> impl Iterator<Item = (&TaskRecord, &[TaskId])> + '_ {
        self.tasks.iter().flat_map(|c| c.iter())
    }

    /// The codelet with this id, if declared.
    pub fn codelet(&self, id: CodeletId) -> Option<&CodeletInfo> {
        self.codelets
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.codelets[i])
    }

    /// The codelet's name, or [`UNKNOWN_CODELET`] for an undeclared id.
    pub fn codelet_name(&self, id: CodeletId) -> &str {
        self.codelet(id)
            .map_or(UNKNOWN_CODELET, |c| c.name.as_str())
    }

    /// The domain with this id, if declared.
    pub fn domain(&self, id: DomainId) -> Option<&DomainInfo> {
        self.domains
            .binary_search_by_key(&id, |d| d.id)
            .ok()
            .map(|i| &self.domains[i])
    }

    /// Whether any meter's readings are simulated.
    pub fn is_simulated(&self) -> bool {
        self.meters.iter().any(|m| m.simulated)
    }

    /// The interval the trace covers: earliest to latest of task starts and ends, sample
    /// times and marker bounds; `(ZERO, ZERO)` for an empty trace.
    pub fn span(&self) -> (Timestamp, Timestamp) {
        let times = self
            .tasks()
            .flat_map(|(r, _)| [r.start, r.end])
            .chain(self.samples.iter().map(|s| s.t))
            .chain(self.markers.iter().flat_map(|m| [m.start, m.end]));
        let mut span: Option<(Timestamp, Timestamp)> = None;
        for t in times {
            span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
        span.unwrap_or((Timestamp::ZERO, Timestamp::ZERO))
    }

    /// Writes the trace to a `.twt` file: metadata first, then tasks, samples and markers;
    /// the End chunk is this trace's own when it has one (its counts those of the chunks
    /// written), else computed by the writer. The file appears at `path` only once complete
    /// (see [`AtomicPath`](crate::AtomicPath)): a failure keeps what was there.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<WriteSummary, TraceError> {
        let path = path.as_ref();
        check_dir_of(path)?;
        let target = crate::AtomicPath::new(path);
        let w = TraceWriter::create(target.path()).map_err(|e| target.name_target(e))?;
        let sink = w.sink();
        sink.send(Chunk::Meta(self.meta.clone()));
        if !self.codelets.is_empty() {
            sink.send(Chunk::Codelets(self.codelets.clone()));
        }
        if !self.meters.is_empty() || !self.domains.is_empty() {
            sink.send(Chunk::Meters {
                meters: self.meters.clone(),
                domains: self.domains.clone(),
            });
        }
        if let Some(t) = &self.truth {
            sink.send(Chunk::Truth(t.clone()));
        }
        for t in &self.tasks {
            sink.send(Chunk::Tasks(t.clone()));
        }
        for s in self.samples.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Samples(s.to_vec()));
        }
        if !self.markers.is_empty() {
            sink.send(Chunk::Markers(self.markers.clone()));
        }
        for a in self.accesses.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Accesses(a.to_vec()));
        }
        for t in self.transfers.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Transfers(t.to_vec()));
        }
        for c in &self.comms {
            sink.send(Chunk::Comms(c.clone()));
        }
        for h in self.handles.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Handles(h.to_vec()));
        }
        for f in self.frequencies.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Frequencies(f.to_vec()));
        }
        for e in self.evictions.chunks(SAMPLES_PER_CHUNK) {
            sink.send(Chunk::Evictions(e.to_vec()));
        }
        let mut summary = match &self.end {
            Some(end) => w.finish_with(end.clone()),
            None => w.finish(),
        }?;
        summary.path = target.target().to_path_buf();
        target.commit()?;
        Ok(summary)
    }
}

/// An error naming `path` when its directory does not exist: checked before writing,
/// since the writer's own error would name the temporary file beside it.
pub(crate) fn check_dir_of(path: &Path) -> Result<(), TraceError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(TraceError::Io {
                path: path.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("its directory {} does not exist", dir.display()),
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, MeterId, TaskStatus};

    fn codelet(id: CodeletId, name: &str) -> CodeletInfo {
        CodeletInfo {
            id,
            name: name.into(),
            archs: vec![Arch::Cpu],
        }
    }

    fn meter(id: MeterId, simulated: bool) -> MeterInfo {
        MeterInfo {
            id,
            backend: "sim".into(),
            simulated,
            description: String::new(),
        }
    }

    fn task(id: TaskId, start: u64, end: u64) -> TaskRecord {
        TaskRecord {
            id,
            codelet: 1,
            arch: Arch::Cpu,
            worker: 0,
            status: TaskStatus::Ok,
            priority: 0,
            footprint: 0,
            submit: Timestamp(0),
            ready: Timestamp(0),
            start: Timestamp(start),
            end: Timestamp(end),
            preds_start: 0,
            preds_len: 0,
        }
    }

    #[test]
    fn saving_into_a_missing_directory_names_the_file_asked_for() {
        let err = Trace::default()
            .save("/nonexistent-taskwatt-dir/x.twt")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nonexistent-taskwatt-dir/x.twt") && !err.contains(".tmp"),
            "{err}"
        );
    }

    #[test]
    fn codelets_merge_by_id_and_names_resolve() {
        let t = Trace::from_chunks([
            Chunk::Codelets(vec![codelet(1, "gemm"), codelet(0, "potrf")]),
            Chunk::Codelets(vec![codelet(2, "trsm")]),
            Chunk::Codelets(vec![codelet(1, "gemm2")]),
        ]);
        let ids: Vec<_> = t.codelets.iter().map(|c| c.id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(t.codelet_name(1), "gemm2");
        assert_eq!(t.codelet_name(2), "trsm");
        assert_eq!(t.codelet_name(9), UNKNOWN_CODELET);
    }

    #[test]
    fn tasks_span_and_simulation() {
        let mut a = TaskChunk::default();
        a.push(task(0, 100, 200), &[]);
        a.push(task(1, 150, 400), &[0]);
        let mut b = TaskChunk::default();
        b.push(task(2, 90, 95), &[0, 1]);
        let t = Trace::from_chunks([
            Chunk::Tasks(a),
            Chunk::Tasks(TaskChunk::default()),
            Chunk::Tasks(b),
            Chunk::Meters {
                meters: vec![meter(0, false)],
                domains: vec![],
            },
            Chunk::Markers(vec![Marker {
                name: "idle".into(),
                start: Timestamp(50),
                end: Timestamp(60),
            }]),
        ]);
        assert_eq!(t.tasks.len(), 2, "empty chunk left out");
        assert_eq!(t.task_count(), 3);
        let preds: Vec<_> = t.tasks().map(|(r, p)| (r.id, p.to_vec())).collect();
        assert_eq!(preds, [(0, vec![]), (1, vec![0]), (2, vec![0, 1])]);
        assert_eq!(t.span(), (Timestamp(50), Timestamp(400)));
        assert!(!t.is_simulated());
        let mut t = t;
        t.push(Chunk::Meters {
            meters: vec![meter(1, true)],
            domains: vec![],
        });
        assert!(t.is_simulated());
        assert_eq!(Trace::default().span(), (Timestamp::ZERO, Timestamp::ZERO));
    }

    #[test]
    fn save_keeps_everything_and_the_original_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TaskChunk::default();
        a.push(task(0, 10, 20), &[]);
        let end = RunEnd {
            tasks: 1,
            samples: 1,
            wall_end_unix_ns: 77,
            outcome: crate::RunOutcome::Failed,
            ..RunEnd::default()
        };
        let t = Trace::from_chunks([
            Chunk::Codelets(vec![codelet(1, "gemm")]),
            Chunk::Tasks(a),
            Chunk::Samples(vec![EnergySample {
                domain: 0,
                t: Timestamp(5),
                wall_unix_ns: 1,
                energy_j: 2.0,
                raw: 3.0,
            }]),
            Chunk::End(end),
        ]);
        let p = dir.path().join("t.twt");
        let sum = t.save(&p).unwrap();
        assert_eq!((sum.tasks, sum.samples), (1, 1));
        assert_eq!(crate::read_trace(&p).unwrap(), t);
    }
}
