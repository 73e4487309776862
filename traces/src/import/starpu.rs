//! StarPU's `tasks.rec`, as written by `starpu_fxt_tool` from an FxT trace.
//!
//! The file is a GNU recutils-style list of records separated by blank lines, each line
//! `Key: value`. Times (`SubmitTime`, `StartTime`, `EndTime`) are in ms from StarPU's trace
//! origin. What an importer meets (see the README beside the test data):
//! - `Control: WontUse` records, with no name, worker or times: skipped, counted;
//! - internal records (`_starpu_data_acquire_*`, `_starpu_sync_task`) with no `WorkerId`
//!   and no times: skipped, counted as not executed;
//! - records without `Name`: named after their `Model` (the perfmodel symbol), else
//!   `unnamed`;
//! - records in neither `JobId` nor time order;
//! - `DependsOn` repeating an id: deduplicated, first occurrence order kept.
//!
//! A kept task's id is its `JobId`; `footprint` is the sum of its `Sizes` (bytes, as in a
//! taskwatt trace) or, without `Sizes`, StarPU's hexadecimal `Footprint` hash; submit is
//! `SubmitTime` (start when absent); ready, which StarPU does not record, is the start
//! time. A worker is a GPU worker when its `MemoryNode` is above 0 (node 0 is main RAM).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::builder::TraceBuilder;
use super::energy::read_energy;
use super::{ImportOptions, TimeUnit};
use crate::error::shorten;
use crate::{
    AccessMode, Arch, TaskAccess, TaskId, TaskRecord, TaskStatus, Timestamp, Trace, TraceError,
    WorkerId,
};

/// Records of a `tasks.rec` that are not task executions, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StarpuSkipped {
    /// Control records (`Control: WontUse`...).
    pub control: u64,
    /// Records without a worker and times: internal tasks, tasks that never ran.
    pub not_executed: u64,
    /// Records with times but a negative `WorkerId` (StarPU's "no worker": nothing to
    /// attribute them to).
    pub no_worker: u64,
}

/// The result of [`import_starpu`].
#[derive(Clone, Debug)]
pub struct StarpuImport {
    /// The executed tasks (and energy, if a samples file was given).
    pub trace: Trace,
    /// What was left out.
    pub skipped: StarpuSkipped,
    /// Executed tasks without `Name`, named after their `Model`.
    pub named_from_model: u64,
    /// Executed tasks with neither `Name` nor `Model`, named `unnamed`.
    pub unnamed: u64,
    /// Data accesses kept (from `Handles`, `Modes` and `Sizes`), for the what-if's copies.
    pub accesses: u64,
    /// Accesses left out: a `SCRATCH` buffer (no data between tasks) or a mode this
    /// importer does not know.
    pub accesses_left_out: u64,
    /// Tasks that start before another task of their worker ended.
    pub overlapping: u64,
}

/// One record's fields, parsed as they are met.
#[derive(Default)]
struct Rec {
    first_line: u64,
    last_line: u64,
    name: Option<String>,
    model: Option<String>,
    job_id: Option<u64>,
    worker: Option<WorkerId>,
    submit: Option<u64>,
    start: Option<(u64, u64)>,
    end: Option<(u64, u64)>,
    priority: i32,
    footprint: Option<u64>,
    sizes: Option<u64>,
    depends: Vec<TaskId>,
    control: bool,
    memory_node: Option<i64>,
    /// `WorkerId` was negative.
    negative_worker: bool,
    /// `SubmitTime`'s line.
    submit_line: u64,
    /// `Handles`, `Modes` and `Sizes`, each with its line: the task's data accesses.
    handles: Option<(Vec<u64>, u64)>,
    modes: Option<(Vec<Option<AccessMode>>, u64)>,
    size_list: Option<(Vec<u64>, u64)>,
    /// The keys of [`KEYS`] met so far, bit `i` for `KEYS[i]`.
    seen: u32,
}

/// The keys the importer reads: each at most once per record.
const KEYS: [&str; 15] = [
    "Name",
    "Model",
    "JobId",
    "WorkerId",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "Priority",
    "Footprint",
    "Sizes",
    "DependsOn",
    "Control",
    "MemoryNode",
    "Handles",
    "Modes",
];

/// A `Modes` entry as StarPU writes it (`R`, `W`, `RW`, `COMMUTE` or `REDUX`, possibly
/// joined by `|`: `RW|COMMUTE`). `None` for what holds no data between tasks (`SCRATCH`,
/// a worker's private buffer) or a mode this importer does not know: that access is left
/// out.
fn access_mode(m: &str) -> Option<AccessMode> {
    let has = |k: &str| m.split('|').any(|p| p.eq_ignore_ascii_case(k));
    if has("REDUX") {
        Some(AccessMode::Redux)
    } else if has("COMMUTE") {
        Some(AccessMode::Commute)
    } else if has("RW") || (has("R") && has("W")) {
        Some(AccessMode::RW)
    } else if has("W") {
        Some(AccessMode::W)
    } else if has("R") {
        Some(AccessMode::R)
    } else {
        None
    }
}

struct Parser {
    path: PathBuf,
    b: TraceBuilder,
    skipped: StarpuSkipped,
    named_from_model: u64,
    unnamed: u64,
    /// JobId -> line of the record that had it, for duplicate detection.
    ids: HashMap<u64, u64>,
    accesses_kept: u64,
    accesses_left_out: u64,
}

impl Parser {
    fn err(&self, line: u64, column: &str, expected: &str, found: &str) -> TraceError {
        TraceError::Malformed {
            path: self.path.clone(),
            line,
            column: column.to_string(),
            expected: expected.to_string(),
            found: shorten(found),
        }
    }

    /// Parses one `Key: value` line into `rec`.
    fn field(&self, rec: &mut Rec, line: u64, key: &str, v: &str) -> Result<(), TraceError> {
        let int = |expected: &str| self.err(line, key, expected, v);
        if let Some(i) = KEYS.iter().position(|k| *k == key) {
            if rec.seen & (1 << i) != 0 {
                return Err(int(&format!(
                    "`{key}` once per record (the record from line {} has it already): \
                     the file was edited or concatenated by hand; regenerate it with \
                     starpu_fxt_tool",
                    rec.first_line
                )));
            }
            rec.seen |= 1 << i;
        }
        let time = || {
            TimeUnit::Ms.parse_ns(v).ok_or_else(|| {
                // 1e300 is not negative: say what is wrong with it.
                let big = v.trim().parse::<f64>().is_ok_and(|x| x >= 0.0);
                int(if big {
                    "a time in ms below about 1.8e13 (2^64 ns)"
                } else {
                    "a non-negative time in ms"
                })
            })
        };
        match key {
            "Name" => rec.name = Some(v.to_string()),
            "Model" => rec.model = Some(v.to_string()),
            "JobId" => rec.job_id = Some(v.parse().map_err(|_| int("a job id (an integer)"))?),
            "WorkerId" => {
                let w: i64 = v.parse().map_err(|_| int("a worker id (an integer)"))?;
                // A negative worker means "none" in StarPU.
                rec.negative_worker = w < 0;
                if w >= 0 {
                    rec.worker =
                        Some(WorkerId::try_from(w).map_err(|_| int("a worker id below 2^32"))?);
                }
            }
            "SubmitTime" => {
                rec.submit = Some(time()?);
                rec.submit_line = line;
            }
            "StartTime" => rec.start = Some((time()?, line)),
            "EndTime" => rec.end = Some((time()?, line)),
            "Priority" => {
                rec.priority = v
                    .parse()
                    .map_err(|_| int("a priority (a 32-bit integer)"))?
            }
            "Footprint" => {
                let hex = v.trim_start_matches("0x");
                rec.footprint = Some(
                    u64::from_str_radix(hex, 16)
                        .map_err(|_| int("a hexadecimal footprint, e.g. 54b49fcb"))?,
                );
            }
            "Sizes" => {
                let sizes = v
                    .split_whitespace()
                    .map(|s| s.parse::<u64>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| int("data sizes in bytes, separated by spaces"))?;
                rec.sizes = Some(sizes.iter().fold(0u64, |a, b| a.saturating_add(*b)));
                rec.size_list = Some((sizes, line));
            }
            "Handles" => {
                let handles = v
                    .split_whitespace()
                    .map(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| {
                        int("data handles (hexadecimal addresses, e.g. 55d2cd01cef0), separated by spaces")
                    })?;
                rec.handles = Some((handles, line));
            }
            "Modes" => {
                rec.modes = Some((v.split_whitespace().map(access_mode).collect(), line));
            }
            "DependsOn" => {
                for s in v.split_whitespace() {
                    let id: TaskId = s.parse().map_err(|_| int("job ids separated by spaces"))?;
                    if !rec.depends.contains(&id) {
                        rec.depends.push(id);
                    }
                }
            }
            "Control" => rec.control = true,
            "MemoryNode" => {
                rec.memory_node = Some(v.parse().map_err(|_| int("a memory node (an integer)"))?)
            }
            _ => {}
        }
        Ok(())
    }

    /// Classifies a finished record: keep, skip, or refuse.
    fn record(&mut self, rec: Rec) -> Result<(), TraceError> {
        if rec.control {
            self.skipped.control += 1;
            return Ok(());
        }
        let (worker, start, end) = match (rec.worker, rec.start, rec.end) {
            (Some(w), Some(s), Some(e)) => (w, s, e),
            (None, None, None) => {
                self.skipped.not_executed += 1;
                return Ok(());
            }
            (None, _, _) if rec.negative_worker => {
                self.skipped.no_worker += 1;
                return Ok(());
            }
            (w, s, _) => {
                // Part of an execution: a record cut short, most likely the file's last.
                let missing = if w.is_none() {
                    "WorkerId"
                } else if s.is_none() {
                    "StartTime"
                } else {
                    "EndTime"
                };
                return Err(self.err(
                    rec.first_line,
                    missing,
                    "WorkerId, StartTime and EndTime together (an executed task has all three; \
                     a record with only some of them is damaged): regenerate the file with \
                     starpu_fxt_tool",
                    &format!(
                        "a record (lines {}-{}) without {missing}",
                        rec.first_line, rec.last_line
                    ),
                ));
            }
        };
        let Some(id) = rec.job_id else {
            return Err(self.err(
                rec.first_line,
                "JobId",
                "a JobId in every executed task",
                &format!(
                    "a record (lines {}-{}) without one",
                    rec.first_line, rec.last_line
                ),
            ));
        };
        if let Some(prev) = self.ids.insert(id, rec.first_line) {
            return Err(self.err(
                rec.first_line,
                "JobId",
                &format!("a unique JobId (the record at line {prev} has the same)"),
                &id.to_string(),
            ));
        }
        if end.0 < start.0 {
            return Err(self.err(
                end.1,
                "EndTime",
                "a time at or after StartTime",
                &format!("{} ns before it", start.0 - end.0),
            ));
        }
        let submit = rec.submit.unwrap_or(start.0);
        if submit > start.0 {
            return Err(self.err(
                rec.submit_line,
                "SubmitTime",
                "a time at or before StartTime (a task runs after it is submitted)",
                &format!("{} ns after it", submit - start.0),
            ));
        }
        let accesses = self.accesses(id, &rec)?;
        let name = match (rec.name, rec.model) {
            (Some(n), _) => n,
            (None, Some(m)) => {
                self.named_from_model += 1;
                m
            }
            (None, None) => {
                self.unnamed += 1;
                "unnamed".to_string()
            }
        };
        let arch = if rec.memory_node.is_some_and(|n| n > 0) {
            Arch::Gpu
        } else {
            Arch::Cpu
        };
        let codelet = self.b.codelet(&name, arch);
        self.b.push(
            TaskRecord {
                id,
                codelet,
                arch,
                worker,
                status: TaskStatus::Ok,
                priority: rec.priority,
                footprint: rec.sizes.or(rec.footprint).unwrap_or(0),
                submit: Timestamp(submit),
                ready: Timestamp(start.0),
                start: Timestamp(start.0),
                end: Timestamp(end.0),
                preds_start: 0,
                preds_len: 0,
            },
            rec.depends,
        )?;
        self.b.accesses(accesses);
        Ok(())
    }

    /// The task's data accesses from its `Handles`, `Modes` and `Sizes` (one entry each
    /// per buffer); none when the record has no `Handles` or `Modes`. Lists of unequal
    /// lengths are refused: the record is damaged.
    fn accesses(&mut self, id: TaskId, rec: &Rec) -> Result<Vec<TaskAccess>, TraceError> {
        let (Some((handles, hl)), Some((modes, ml))) = (&rec.handles, &rec.modes) else {
            return Ok(Vec::new());
        };
        let unequal = |line: u64, key: &str, n: usize| {
            self.err(
                line,
                key,
                &format!(
                    "as many entries as `Handles` (line {hl}) has, {}: one per buffer",
                    handles.len()
                ),
                &format!("{n}"),
            )
        };
        if modes.len() != handles.len() {
            return Err(unequal(*ml, "Modes", modes.len()));
        }
        if let Some((sizes, sl)) = &rec.size_list {
            if sizes.len() != handles.len() {
                return Err(unequal(*sl, "Sizes", sizes.len()));
            }
        }
        let mut out = Vec::with_capacity(handles.len());
        for (i, (&handle, mode)) in handles.iter().zip(modes).enumerate() {
            let Some(mode) = *mode else {
                self.accesses_left_out += 1;
                continue;
            };
            // A handle read twice by one task is one access (as the runtime links it).
            if out.iter().any(|a: &TaskAccess| a.handle == handle) {
                continue;
            }
            let bytes = rec
                .size_list
                .as_ref()
                .and_then(|(s, _)| s.get(i).copied())
                .unwrap_or(0);
            out.push(TaskAccess {
                task: id,
                handle,
                mode,
                bytes,
            });
        }
        self.accesses_kept += out.len() as u64;
        Ok(out)
    }
}

/// Builds a trace from StarPU's `tasks.rec`, keeping executed tasks (those with
/// `WorkerId`, `StartTime` and `EndTime`) and counting the records left out. Energy comes
/// from `opts.samples` (times in `opts.time_unit`, on StarPU's trace clock) and
/// `opts.workers`.
pub fn import_starpu(
    tasks_rec: impl AsRef<Path>,
    opts: &ImportOptions,
) -> Result<StarpuImport, TraceError> {
    let path = tasks_rec.as_ref();
    let mut src = super::open_text(path)?;
    let mut p = Parser {
        path: path.to_path_buf(),
        b: TraceBuilder::new(),
        skipped: StarpuSkipped::default(),
        named_from_model: 0,
        unnamed: 0,
        ids: HashMap::new(),
        accesses_kept: 0,
        accesses_left_out: 0,
    };
    let mut rec: Option<Rec> = None;
    let mut raw = Vec::new();
    let mut line = 0u64;
    loop {
        raw.clear();
        let n = src
            .read_until(b'\n', &mut raw)
            .map_err(|e| TraceError::io(path, e))?;
        if n == 0 {
            break;
        }
        line += 1;
        // The file's last line, without its newline: cut in the middle of a line.
        let cut = !raw.ends_with(b"\n");
        let cut_short = |p: &Parser, what: &str| {
            p.err(
                line,
                "(end of file)",
                "a complete last line and a blank line after the last record, as \
                 starpu_fxt_tool writes them: the file is cut short (regenerate it with \
                 starpu_fxt_tool)",
                what,
            )
        };
        let text = match std::str::from_utf8(&raw) {
            Ok(t) => t,
            Err(e) => {
                let at = e.valid_up_to();
                // Field 1 is the key, 2 the value.
                let column = if raw[..at].contains(&b':') { 2 } else { 1 };
                return Err(TraceError::NotUtf8 {
                    path: path.to_path_buf(),
                    line,
                    column,
                    byte: raw[at],
                });
            }
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            if let Some(r) = rec.take() {
                p.record(r)?;
            }
            continue;
        }
        // recutils comments and record descriptors.
        if text.starts_with('#') || text.starts_with('%') {
            continue;
        }
        let Some((key, value)) = text.split_once(':') else {
            if cut {
                return Err(cut_short(&p, text));
            }
            return Err(p.err(
                line,
                "(line)",
                "a `Key: value` line or a blank line between records",
                text,
            ));
        };
        let r = rec.get_or_insert_with(|| Rec {
            first_line: line,
            ..Rec::default()
        });
        r.last_line = line;
        if let Err(e) = p.field(r, line, key.trim(), value.trim()) {
            return Err(if cut { cut_short(&p, text) } else { e });
        }
    }
    if let Some(r) = rec.take() {
        // starpu_fxt_tool ends every record with a blank line: a record still open at the
        // end of the file was cut, perhaps in the middle of a value. What is wrong with
        // its fields is said first, when something is.
        let (first_line, last_line) = (r.first_line, r.last_line);
        p.record(r)?;
        return Err(p.err(
            last_line,
            "(end of file)",
            "a blank line after the last record, as starpu_fxt_tool writes it: the file \
             is cut short (regenerate it with starpu_fxt_tool; if you edited it by hand and \
             it is complete, end it with a blank line)",
            &format!("the end of the file inside the record of lines {first_line}-{last_line}"),
        ));
    }
    let energy = match &opts.samples {
        Some(s) => Some(read_energy(
            s,
            opts,
            opts.time_unit,
            &p.b.workers(),
            "starpu",
        )?),
        None => None,
    };
    let (trace, emitted) = p.b.build("starpu tasks.rec", path, energy)?;
    Ok(StarpuImport {
        trace,
        skipped: p.skipped,
        named_from_model: p.named_from_model,
        unnamed: p.unnamed,
        accesses: p.accesses_kept,
        accesses_left_out: p.accesses_left_out,
        overlapping: emitted.overlapping,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn rec_file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn import(text: &str) -> Result<StarpuImport, TraceError> {
        let f = rec_file(text);
        import_starpu(f.path(), &ImportOptions::new(TimeUnit::Ms))
    }

    const TWO: &str = "\
Control: WontUse
JobId: 9
SubmitTime: 0.5

Name: _starpu_data_acquire_post
JobId: 1
DependsOn: 2

Model: chol_model_gemm
JobId: 12
DependsOn: 3 4 3
WorkerId: 1
MemoryNode: 1
SubmitTime: 1.000001
StartTime: 2
EndTime: 2.5
Priority: -3
Footprint: 54b49fcb

JobId: 13
WorkerId: 0
StartTime: 3
EndTime: 4
Footprint: 0x10
Sizes: 100 28

";

    #[test]
    fn records_are_kept_skipped_and_named() {
        let imp = import(TWO).unwrap();
        assert_eq!(
            imp.skipped,
            StarpuSkipped {
                control: 1,
                not_executed: 1,
                no_worker: 0,
            }
        );
        assert_eq!((imp.named_from_model, imp.unnamed), (1, 1));
        let t = &imp.trace;
        assert_eq!(t.task_count(), 2);
        let by_id: HashMap<u64, (TaskRecord, Vec<u64>)> =
            t.tasks().map(|(r, p)| (r.id, (*r, p.to_vec()))).collect();
        let (g, preds) = &by_id[&12];
        assert_eq!(t.codelet_name(g.codelet), "chol_model_gemm");
        assert_eq!(preds, &[3, 4], "DependsOn deduplicated");
        assert_eq!(
            (g.submit.0, g.ready.0, g.start.0, g.end.0),
            (1_000_001, 2_000_000, 2_000_000, 2_500_000)
        );
        assert_eq!(
            (g.priority, g.footprint, g.arch),
            (-3, 0x54b4_9fcb, Arch::Gpu)
        );
        let (u, _) = &by_id[&13];
        assert_eq!(t.codelet_name(u.codelet), "unnamed");
        assert_eq!(
            (u.footprint, u.submit.0, u.arch),
            (128, 3_000_000, Arch::Cpu)
        );
    }

    #[test]
    fn malformed_input_names_the_line() {
        let cases = [
            ("JobId: 1\nWorkerId: 0\nStartTime: 1.x\nEndTime: 2\n", ":3: StartTime: expected a non-negative time in ms, found `1.x`"),
            ("JobId: abc\n", ":1: JobId: expected a job id"),
            ("JobId: 1\nPriority: high\n", ":2: Priority: expected a priority"),
            ("JobId: 1\nDependsOn: 1 two\n", ":2: DependsOn: expected job ids"),
            ("JobId: 1\nFootprint: zz\n", ":2: Footprint: expected a hexadecimal footprint"),
            ("Name: X\nthis line has no colon\n", ":2: (line): expected a `Key: value` line"),
            // Truncated: the last record stops after StartTime...
            ("Name: A\nJobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n\nName: B\nJobId: 2\nWorkerId: 0\nStartTime: 3\n", ":7: EndTime: expected WorkerId, StartTime and EndTime together"),
            // ... or inside a key.
            ("Name: A\nJobId: 1\nWorkerId: 0\nStartTime: 1\nEndTi", ":5: (end of file): expected a complete last line"),
            ("Name: A\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n", ":1: JobId: expected a JobId in every executed task"),
            ("JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n\nJobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n", ":6: JobId: expected a unique JobId (the record at line 1 has the same)"),
            ("JobId: 1\nWorkerId: 0\nStartTime: 3\nEndTime: 2\n", ":4: EndTime: expected a time at or after StartTime"),
            // A key twice: the last one won, and made the start precede the submission.
            ("JobId: 1\nWorkerId: 0\nSubmitTime: 2\nStartTime: 3\nEndTime: 4\nStartTime: 1\n", ":6: StartTime: expected `StartTime` once per record (the record from line 1 has it already)"),
            ("JobId: 1\nWorkerId: 0\nSubmitTime: 5\nStartTime: 3\nEndTime: 4\n", ":3: SubmitTime: expected a time at or before StartTime"),
            ("JobId: 1\nWorkerId: 0\nStartTime: 1e300\nEndTime: 2\n", ":3: StartTime: expected a time in ms below about 1.8e13"),
            ("JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\nHandles: 1a 2b\nModes: R\n", ":6: Modes: expected as many entries as `Handles` (line 5) has, 2"),
            ("JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\nHandles: 1a 2b\nModes: R W\nSizes: 8\n", ":7: Sizes: expected as many entries as `Handles` (line 5) has, 2"),
            ("JobId: 1\nHandles: 1a zz\n", ":2: Handles: expected data handles"),
        ];
        for (text, want) in cases {
            let e = import(text).unwrap_err();
            assert!(matches!(e, TraceError::Malformed { .. }), "{e}");
            assert!(e.to_string().contains(want), "{e}\nwanted: {want}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_as_in_csv() {
        let f = rec_file("");
        std::fs::write(
            f.path(),
            b"Name: GEMM\xe9\nJobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n\n",
        )
        .unwrap();
        let e = import_starpu(f.path(), &ImportOptions::new(TimeUnit::Ms)).unwrap_err();
        assert!(
            matches!(
                e,
                TraceError::NotUtf8 {
                    line: 1,
                    column: 2,
                    byte: 0xe9,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn handles_modes_and_sizes_become_the_tasks_data_accesses() {
        let imp = import(
            "JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2\nHandles: 55d2cd01cef0 0xa0 55d2cd01cef0 b0\n\
             Modes: R RW|COMMUTE R SCRATCH\nSizes: 64 8 64 4\n\n\
             JobId: 2\nWorkerId: 0\nStartTime: 2\nEndTime: 3\nHandles: a0\nModes: W\n\n",
        )
        .unwrap();
        let a: Vec<(u64, u64, AccessMode, u64)> = imp
            .trace
            .accesses
            .iter()
            .map(|a| (a.task, a.handle, a.mode, a.bytes))
            .collect();
        // The handle read twice once; the scratch buffer left out and counted.
        assert_eq!(
            a,
            [
                (1, 0x55d2_cd01_cef0, AccessMode::R, 64),
                (1, 0xa0, AccessMode::Commute, 8),
                (2, 0xa0, AccessMode::W, 0),
            ]
        );
        assert_eq!((imp.accesses, imp.accesses_left_out), (3, 1));
        assert_eq!(imp.overlapping, 0);
        // The real file: three buffers per GEMM, two per TRSM and SYRK, one per POTRF.
        let real = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/starpu-1.4.12-cholesky-lws/tasks.rec"
        );
        let imp = import_starpu(real, &ImportOptions::new(TimeUnit::Ms)).unwrap();
        assert_eq!(imp.accesses, 560 * 3 + 120 * 2 + 120 * 2 + 16);
        assert!(imp.trace.accesses.iter().all(|a| a.bytes == 262_144));
        assert_eq!(imp.overlapping, 0);
    }

    #[test]
    fn tasks_overlapping_on_one_worker_are_counted() {
        let imp = import(
            "JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 3\n\n\
             JobId: 2\nWorkerId: 0\nStartTime: 2\nEndTime: 4\n\n\
             JobId: 3\nWorkerId: 1\nStartTime: 2\nEndTime: 4\n\n\
             JobId: 4\nWorkerId: 0\nStartTime: 4\nEndTime: 5\n\n",
        )
        .unwrap();
        assert_eq!(imp.overlapping, 1);
    }

    #[test]
    fn a_file_cut_anywhere_is_an_error_or_imports_exactly_its_complete_records() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/data/starpu-1.4.12-cholesky-lws/tasks.rec"
        );
        let Ok(full) = std::fs::read(path) else {
            eprintln!("skipped: {path} is not there");
            return;
        };
        let whole = import_bytes(&full).unwrap().trace.task_count();
        assert_eq!(whole, 816);
        // Cut points: every 997th byte, and right after every 50th record.
        let mut cuts: Vec<usize> = (1..full.len()).step_by(997).collect();
        let ends: Vec<usize> = full
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w == b"\n\n")
            .map(|(i, _)| i + 2)
            .collect();
        cuts.extend(ends.iter().step_by(50));
        for cut in cuts {
            let head = &full[..cut];
            match import_bytes(head) {
                Ok(imp) => {
                    // Only at a record boundary, with every record before it.
                    assert!(head.ends_with(b"\n\n"), "cut at {cut} imported");
                    let complete = ends.iter().filter(|&&e| e <= cut).count() as u64;
                    let s = imp.skipped;
                    let n = imp.trace.task_count() + s.control + s.not_executed + s.no_worker;
                    assert_eq!(n, complete, "cut at {cut}");
                }
                Err(e) => {
                    let m = e.to_string();
                    assert!(
                        m.contains("cut short") || m.contains("expected"),
                        "cut at {cut}: {m}"
                    );
                }
            }
        }
    }

    fn import_bytes(b: &[u8]) -> Result<StarpuImport, TraceError> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b).unwrap();
        import_starpu(f.path(), &ImportOptions::new(TimeUnit::Ms))
    }

    #[test]
    fn negative_worker_with_times_is_skipped_and_counted() {
        let imp = import(
            "JobId: 1\nWorkerId: -1\nStartTime: 1\nEndTime: 2\n\nJobId: 2\nWorkerId: 0\nStartTime: 1\nEndTime: 2\n\n",
        )
        .unwrap();
        assert_eq!((imp.skipped.no_worker, imp.trace.task_count()), (1, 1));
        let e = import("JobId: 1\nWorkerId: 0\nStartTime: 1\nEndTime: 2.5").unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
    }

    #[test]
    fn crlf_comments_and_negative_workers() {
        let imp =
            import("# made by hand\r\n%rec: Task\r\nJobId: 1\r\nWorkerId: -1\r\n\r\n").unwrap();
        assert_eq!(imp.skipped.not_executed, 1);
        assert_eq!(imp.trace.task_count(), 0);
    }
}
