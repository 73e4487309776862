//! Chrome trace event JSON, as loaded by Perfetto (ui.perfetto.dev) and chrome://tracing.
//!
//! Layout of the output:
//! - one process (pid 1) named after the run (app, policy, host);
//! - one thread track per worker (tid = worker id), named by `thread_name` metadata
//!   ("worker 3 · cpu · core 3 · package 0") and ordered by `thread_sort_index`;
//! - each task an `X` (complete) event: `name` the codelet, `cat` the architecture, `ts`
//!   and `dur` in µs with three decimals (exact ns), `args` the task id, priority,
//!   footprint, predecessors, submit→ready and ready→start delays (µs) and status;
//! - each energy domain a `C` (counter) track `power <domain>` in W, one value per pair of
//!   consecutive samples of that domain, placed at the first sample of the pair;
//! - each dependency a flow arrow (Perfetto's flow events: `s` at the end of the
//!   predecessor, `f` with `bp: "e"` at the start of the successor, sharing an `id`),
//!   emitted as soon as both ends have been read, whatever the order of the chunks;
//! - each copy of data between memory nodes (format 1.2, runs with GPUs) an `X` event
//!   `copy h<handle> <src>→<dst>` in category `transfer`, on a track per destination node
//!   ("transfers to node 1", tid 2000000 + node), with the bytes, the handle, both nodes
//!   and the task it was made for in `args`;
//! - markers as `X` events on their own tracks (tid 1000000 and up): overlapping markers
//!   go to separate lanes because Perfetto only draws properly nested slices on one track;
//! - a distributed run's merged trace (`taskwatt merge`, format 1.4): one process per rank
//!   (pid 2 + rank, "rank N"), its workers' tracks in it, and its messages as `X` events on
//!   a "messages" track (tid 3000000), each send joined to its receive by a flow arrow;
//! - run metadata (version, policy, host...) in the top-level `otherData` (flat strings,
//!   shown by the viewers' metadata panel) and in full under `metadata`.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::format::ChunkKind;
use crate::{
    Chunk, DomainId, EnergySample, Marker, TaskChunk, TaskStatus, Timestamp, Trace, TraceError,
    Transfer, WorkerInfo,
};

use super::{read_metadata, stream};

/// Per (sender, receiver, handle): each message's start and end.
type Messages = HashMap<(u32, u32, u32), Vec<(Timestamp, Timestamp)>>;

const PID: u32 = 1;
/// Marker lanes use tids from here, above any worker id a run will have.
const MARKER_TID: u64 = 1_000_000;
/// Transfer tracks: this plus the destination node.
const TRANSFER_TID: u64 = 2_000_000;
/// A rank's messages track (in the rank's process).
const COMM_TID: u64 = 3_000_000;
const WHAT: &str = "Chrome trace JSON";

/// Each task's energy in J, when known (from an attribution), and whether it rests on
/// measurements only: shown in the task's `args` as `energy_mJ`, with `energy_note` when
/// it rests on a power the attribution does not show as a measurement (the report puts
/// those in parentheses; the timeline showed them as plain numbers).
pub type TaskEnergy<'a> = &'a dyn Fn(&crate::TaskRecord) -> Option<(f64, bool)>;

/// Exports the trace file at `path` as Chrome trace event JSON, streaming; returns the
/// number of trace events written.
pub fn export_chrome(path: impl AsRef<Path>, out: impl Write) -> Result<u64, TraceError> {
    export_chrome_with(path, out, &|_| None)
}

/// [`export_chrome`], with each task's energy (see [`TaskEnergy`]).
pub fn export_chrome_with(
    path: impl AsRef<Path>,
    out: impl Write,
    energy: TaskEnergy<'_>,
) -> Result<u64, TraceError> {
    let path = path.as_ref();
    let meta = read_metadata(path)?;
    let mut w = Chrome::begin(&meta, out).map_err(err)?;
    w.energy = Some(energy);
    stream(
        path,
        |k| {
            matches!(
                k,
                ChunkKind::Tasks
                    | ChunkKind::Samples
                    | ChunkKind::Transfers
                    | ChunkKind::Frequencies
                    | ChunkKind::Evictions
            )
        },
        |c| {
            match c {
                Chunk::Tasks(t) => w.tasks(&t),
                Chunk::Samples(s) => w.samples(&s),
                Chunk::Transfers(t) => w.transfers(&t),
                Chunk::Frequencies(f) => w.frequencies(&f),
                Chunk::Evictions(e) => w.evictions(&e),
                _ => Ok(()),
            }
            .map_err(err)
        },
    )?;
    w.finish().map_err(err)
}

/// Exports an in-memory trace as Chrome trace event JSON; returns the number of trace
/// events written.
pub fn write_chrome(trace: &Trace, out: impl Write) -> Result<u64, TraceError> {
    write_chrome_with(trace, out, &|_| None)
}

/// [`write_chrome`], with each task's energy (see [`TaskEnergy`]).
pub fn write_chrome_with(
    trace: &Trace,
    out: impl Write,
    energy: TaskEnergy<'_>,
) -> Result<u64, TraceError> {
    let go = || -> io::Result<u64> {
        let mut w = Chrome::begin(trace, out)?;
        w.energy = Some(energy);
        for t in &trace.tasks {
            w.tasks(t)?;
        }
        w.samples(&trace.samples)?;
        w.transfers(&trace.transfers)?;
        w.evictions(&trace.evictions)?;
        w.frequencies(&trace.frequencies)?;
        w.finish()
    };
    go().map_err(err)
}

fn err(e: io::Error) -> TraceError {
    TraceError::output(WHAT, e)
}

/// Writes `ns` as µs with exactly three decimals: no float rounding, any u64.
fn us(out: &mut impl Write, ns: u64) -> io::Result<()> {
    write!(out, "{}.{:03}", ns / 1000, ns % 1000)
}

fn json_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(io::Error::from)
}

fn worker_label(w: &WorkerInfo) -> String {
    let mut s = format!("worker {} · {}", w.id, w.arch);
    if let Some(d) = w.device {
        s += &format!(" {d}");
    }
    if let Some(c) = w.core {
        s += &format!(" · core {c}");
    } else if let Some(c) = w.cpu {
        s += &format!(" · cpu {c}");
    }
    s + &format!(" · package {}", w.package)
}

/// Assigns each marker a lane in which it overlaps no other; returns (lane, marker).
fn marker_lanes(markers: &[Marker]) -> Vec<(u64, &Marker)> {
    let mut sorted: Vec<&Marker> = markers.iter().collect();
    sorted.sort_by_key(|m| (m.start, std::cmp::Reverse(m.end)));
    let mut lane_end: Vec<Timestamp> = Vec::new();
    sorted
        .into_iter()
        .map(|m| {
            let lane = match lane_end.iter().position(|&e| e <= m.start) {
                Some(l) => l,
                None => {
                    lane_end.push(Timestamp::ZERO);
                    lane_end.len() - 1
                }
            };
            lane_end[lane] = m.end.max(m.start);
            (lane as u64, m)
        })
        .collect()
}

struct Chrome<'e, W: Write> {
    out: BufWriter<W>,
    events: u64,
    /// Each task's energy, if known.
    energy: Option<TaskEnergy<'e>>,
    /// Codelet names by id, already JSON-escaped.
    names: HashMap<u32, String>,
    /// Workers that have a thread_name event.
    /// Workers whose track is named (a set, not a vector indexed by id: an id comes from
    /// the file and may be 4294967295).
    named: std::collections::HashSet<u32>,
    /// Counter names by domain, already JSON-escaped.
    counters: HashMap<DomainId, String>,
    /// Last sample of each domain: (t, energy).
    last: HashMap<DomainId, (Timestamp, f64)>,
    /// Each package's last frequency sample's time.
    last_freq: HashMap<DomainId, Timestamp>,
    /// Tasks read so far: id -> (worker, end), for the dependency arrows (16 bytes a task).
    ends: HashMap<u64, (u32, Timestamp)>,
    /// Successors waiting for a predecessor not read yet: pred id -> (worker, start).
    waiting: HashMap<u64, Vec<(u32, Timestamp)>>,
    /// Flow arrows written.
    flows: u64,
    /// Named handles' labels by id, JSON-escaped without the quotes.
    handles: HashMap<u64, String>,
    /// Destination nodes whose transfer track is named.
    transfer_tracks: std::collections::HashSet<u32>,
    /// A distributed run's workers: their rank (process `PID + 1 + rank`).
    rank_of: HashMap<u32, u32>,
    buf: Vec<u8>,
}

impl<'e, W: Write> Chrome<'e, W> {
    /// Writes the header, the metadata events and the markers.
    fn begin(meta: &Trace, out: W) -> io::Result<Chrome<'e, W>> {
        let mut w = Chrome {
            out: BufWriter::with_capacity(1 << 16, out),
            events: 0,
            energy: None,
            names: HashMap::new(),
            named: std::collections::HashSet::new(),
            counters: HashMap::new(),
            last: HashMap::new(),
            last_freq: HashMap::new(),
            ends: HashMap::new(),
            waiting: HashMap::new(),
            flows: 0,
            handles: meta
                .handles
                .iter()
                .map(|h| {
                    // A string's JSON is quoted: the quotes off.
                    let q = serde_json::to_string(&h.name).unwrap_or_else(|_| "\"\"".into());
                    (h.handle, q[1..q.len() - 1].to_string())
                })
                .collect(),
            transfer_tracks: std::collections::HashSet::new(),
            rank_of: meta
                .comms
                .iter()
                .flat_map(|c| c.workers.iter().map(move |&w| (w, c.rank)))
                .collect(),
            buf: Vec::with_capacity(256),
        };
        let m = &meta.meta;
        let o = &mut w.out;
        o.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
        let app = m.app.clone().unwrap_or_default();
        let simulated = meta.is_simulated().to_string();
        let flat: Vec<(&str, &str)> = vec![
            ("taskwatt_version", &m.taskwatt_version),
            ("policy", &m.policy),
            ("host", &m.host),
            ("app", &app),
            ("simulated_energy", &simulated),
        ];
        serde_json::to_writer(&mut *o, &flat.into_iter().collect::<HashMap<_, _>>())?;
        o.write_all(b",\"metadata\":")?;
        serde_json::to_writer(
            &mut *o,
            &serde_json::json!({
                "run": m,
                "codelets": meta.codelets,
                "meters": meta.meters,
                "domains": meta.domains,
                "end": meta.end,
            }),
        )?;
        o.write_all(b",\"traceEvents\":[\n")?;

        let mut label = String::from("taskwatt");
        if let Some(a) = &m.app {
            label += &format!(" {a}");
        }
        if !m.policy.is_empty() {
            label += &format!(" ({})", m.policy);
        }
        if !m.host.is_empty() {
            label += &format!(" on {}", m.host);
        }
        // A screenshot of the timeline says where its joules came from, not only the
        // metadata.
        if meta.is_simulated() {
            label += " (SIMULATED energy)";
        }
        w.event(|o| {
            write!(
                o,
                "{{\"ph\":\"M\",\"pid\":{PID},\"name\":\"process_name\",\"args\":{{\"name\":"
            )?;
            json_str(o, &label)?;
            o.write_all(b"}}")
        })?;
        for c in &meta.codelets {
            w.names.insert(c.id, serde_json::to_string(&c.name)?);
        }
        w.comms(&meta.comms)?;
        for info in &m.workers {
            w.name_worker(info.id, Some(info))?;
        }
        for d in &meta.domains {
            let simulated = meta.meters.iter().any(|m| m.id == d.meter && m.simulated);
            let mut name = format!(
                "power {}{}",
                d.domain,
                if simulated { " (SIMULATED)" } else { "" }
            );
            if w.counters.values().any(|n| n[1..n.len() - 1] == name) {
                name += &format!(" #{}", d.id);
            }
            w.counters.insert(d.id, serde_json::to_string(&name)?);
        }
        let lanes = marker_lanes(&meta.markers);
        let n_lanes = lanes.iter().map(|(l, _)| l + 1).max().unwrap_or(0);
        for lane in 0..n_lanes {
            let tid = MARKER_TID + lane;
            let name = if lane == 0 {
                "markers".to_string()
            } else {
                format!("markers {}", lane + 1)
            };
            w.thread_meta(PID, tid, &name)?;
        }
        for (lane, mk) in lanes {
            w.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"X\",\"pid\":{PID},\"tid\":{},\"cat\":\"marker\",\"name\":",
                    MARKER_TID + lane
                )?;
                json_str(o, &mk.name)?;
                o.write_all(b",\"ts\":")?;
                us(o, mk.start.0)?;
                o.write_all(b",\"dur\":")?;
                us(o, mk.end.saturating_sub(mk.start))?;
                o.write_all(b"}")
            })?;
        }
        Ok(w)
    }

    /// Writes one event, comma-separated from the previous one.
    fn event(&mut self, f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<()> {
        self.buf.clear();
        if self.events > 0 {
            self.buf.extend_from_slice(b",\n");
        }
        f(&mut self.buf)?;
        self.out.write_all(&self.buf)?;
        self.events += 1;
        Ok(())
    }

    fn thread_meta(&mut self, pid: u32, tid: u64, name: &str) -> io::Result<()> {
        self.event(|o| {
            write!(o, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":")?;
            json_str(o, name)?;
            o.write_all(b"}}")
        })?;
        self.event(|o| {
            write!(o, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{tid}}}}}")
        })
    }

    /// The process of a worker: its rank's in a distributed run, else the run's.
    fn pid(&self, worker: u32) -> u32 {
        self.rank_of.get(&worker).map_or(PID, |r| PID + 1 + r)
    }

    /// A distributed run's ranks as processes, their messages on a track of each, and an
    /// arrow from each send to its receive.
    /// One comm chunk's messages: a slice each on its rank's track; the sends and the
    /// receives noted for the arrows.
    fn comm_events(
        &mut self,
        pid: u32,
        c: &crate::CommChunk,
        sends: &mut Messages,
        recvs: &mut Messages,
    ) -> io::Result<()> {
        for e in &c.events {
            let (dir, arrow) = if e.send {
                ("send", "→")
            } else {
                ("recv", "←")
            };
            self.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{COMM_TID},\"cat\":\"message\",\"name\":\"{dir} h{} {arrow} {}\",\"ts\":",
                    e.handle, e.peer
                )?;
                us(o, e.start.0)?;
                o.write_all(b",\"dur\":")?;
                us(o, e.end.saturating_sub(e.start))?;
                write!(
                    o,
                    ",\"args\":{{\"bytes\":{},\"handle\":{},\"peer\":{}}}}}",
                    e.bytes, e.handle, e.peer
                )
            })?;
            let key = if e.send {
                (c.rank, e.peer, e.handle)
            } else {
                (e.peer, c.rank, e.handle)
            };
            let to = if e.send { &mut *sends } else { &mut *recvs };
            to.entry(key).or_default().push((e.start, e.end));
        }
        Ok(())
    }

    fn comms(&mut self, comms: &[crate::CommChunk]) -> io::Result<()> {
        let mut sends: Messages = HashMap::new();
        let mut recvs: Messages = HashMap::new();
        // A rank's own trace holds its messages twice: in the partial chunks written as
        // they completed, and in the whole chunk of its end. The whole one, where there is
        // one (a rank killed mid-run has only the partial ones).
        let whole: std::collections::HashSet<u32> = comms
            .iter()
            .filter(|c| !c.partial && !c.events.is_empty())
            .map(|c| c.rank)
            .collect();
        let mut named = std::collections::HashSet::new();
        for c in comms {
            let pid = PID + 1 + c.rank;
            if c.partial && whole.contains(&c.rank) {
                continue;
            }
            if !named.insert(c.rank) {
                self.comm_events(pid, c, &mut sends, &mut recvs)?;
                continue;
            }
            self.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":\"rank {}\"}}}}",
                    c.rank
                )
            })?;
            self.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{pid}}}}}"
                )
            })?;
            self.thread_meta(pid, COMM_TID, "messages")?;
            self.comm_events(pid, c, &mut sends, &mut recvs)?;
        }
        // The k-th send of a handle between two ranks is the k-th receive's.
        let mut keys: Vec<_> = sends.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let (Some(s), Some(r)) = (sends.get(&key), recvs.get(&key)) else {
                continue;
            };
            let (mut s, mut r) = (s.clone(), r.clone());
            s.sort();
            r.sort();
            for ((ss, _), (_, re)) in s.into_iter().zip(r) {
                self.flows += 1;
                let id = self.flows;
                let (from, to) = (PID + 1 + key.0, PID + 1 + key.1);
                self.event(|o| {
                    write!(o, "{{\"ph\":\"s\",\"pid\":{from},\"tid\":{COMM_TID},\"id\":{id},\"cat\":\"message\",\"name\":\"message\",\"ts\":")?;
                    us(o, ss.0)?;
                    o.write_all(b"}")
                })?;
                self.event(|o| {
                    write!(o, "{{\"ph\":\"f\",\"bp\":\"e\",\"pid\":{to},\"tid\":{COMM_TID},\"id\":{id},\"cat\":\"message\",\"name\":\"message\",\"ts\":")?;
                    us(o, re.0.saturating_sub(1))?;
                    o.write_all(b"}")
                })?;
            }
        }
        Ok(())
    }

    /// Copies between memory nodes, on a track per destination node.
    fn transfers(&mut self, transfers: &[Transfer]) -> io::Result<()> {
        for t in transfers {
            let tid = TRANSFER_TID + u64::from(t.dst);
            if self.transfer_tracks.insert(t.dst) {
                self.thread_meta(PID, tid, &format!("transfers to node {}", t.dst))?;
            }
            let name = self.handles.get(&t.handle).cloned();
            let verb = match t.kind {
                crate::TransferKind::Fetch => "copy",
                k => k.name(),
            };
            self.event(|o| {
                match &name {
                    Some(n) => write!(o, "{{\"ph\":\"X\",\"pid\":{PID},\"tid\":{tid},\"cat\":\"transfer\",\"name\":\"{verb} {n} {}→{}\",\"ts\":", t.src, t.dst)?,
                    None => write!(o, "{{\"ph\":\"X\",\"pid\":{PID},\"tid\":{tid},\"cat\":\"transfer\",\"name\":\"{verb} h{} {}→{}\",\"ts\":", t.handle, t.src, t.dst)?,
                }
                us(o, t.start.0)?;
                o.write_all(b",\"dur\":")?;
                us(o, t.end.saturating_sub(t.start))?;
                write!(
                    o,
                    ",\"args\":{{\"bytes\":{},\"handle\":{},\"src\":{},\"dst\":{},\"kind\":\"{}\"",
                    t.bytes,
                    t.handle,
                    t.src,
                    t.dst,
                    t.kind.name()
                )?;
                if let Some(task) = t.task {
                    write!(o, ",\"task\":{task}")?;
                }
                if let Some(n) = &name {
                    write!(o, ",\"handle_name\":\"{n}\"")?;
                }
                o.write_all(b"}}")
            })?;
        }
        Ok(())
    }

    /// Device copies dropped under a memory limit: instants on the track of the node
    /// they were on.
    fn evictions(&mut self, evictions: &[crate::Eviction]) -> io::Result<()> {
        for e in evictions {
            let tid = TRANSFER_TID + u64::from(e.node);
            if self.transfer_tracks.insert(e.node) {
                self.thread_meta(PID, tid, &format!("transfers to node {}", e.node))?;
            }
            let label = match self.handles.get(&e.handle) {
                Some(n) => n.clone(),
                None => format!("h{}", e.handle),
            };
            self.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{PID},\"tid\":{tid},\"cat\":\"eviction\",\"name\":\"evict {label}\",\"ts\":"
                )?;
                us(o, e.time.0)?;
                write!(
                    o,
                    ",\"args\":{{\"bytes\":{},\"handle\":{},\"node\":{},\"written_back\":{}",
                    e.bytes, e.handle, e.node, e.written_back
                )?;
                if let Some(task) = e.task {
                    write!(o, ",\"for_task\":{task}")?;
                }
                o.write_all(b"}}")
            })?;
        }
        Ok(())
    }

    /// Names a worker's track, once.
    fn name_worker(&mut self, id: u32, info: Option<&WorkerInfo>) -> io::Result<()> {
        if !self.named.insert(id) {
            return Ok(());
        }
        let label = info.map_or_else(|| format!("worker {id}"), worker_label);
        self.thread_meta(self.pid(id), u64::from(id), &label)
    }

    fn tasks(&mut self, chunk: &TaskChunk) -> io::Result<()> {
        for (r, preds) in chunk.iter() {
            if !self.named.contains(&r.worker) {
                self.name_worker(r.worker, None)?;
            }
            let name = match self.names.get(&r.codelet) {
                Some(n) => n.clone(),
                None => {
                    let n = serde_json::to_string(&format!("codelet {}", r.codelet))?;
                    self.names.insert(r.codelet, n.clone());
                    n
                }
            };
            let joules = self.energy.and_then(|f| f(r)).filter(|j| j.0.is_finite());
            let pid = self.pid(r.worker);
            self.event(|o| {
                write!(
                    o,
                    "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"cat\":\"{}\",\"name\":{name},\"ts\":",
                    r.worker, r.arch
                )?;
                us(o, r.start.0)?;
                o.write_all(b",\"dur\":")?;
                us(o, r.end.saturating_sub(r.start))?;
                write!(
                    o,
                    ",\"args\":{{\"id\":{},\"priority\":{},\"footprint\":{},\"preds\":[",
                    r.id, r.priority, r.footprint
                )?;
                for (i, p) in preds.iter().enumerate() {
                    if i > 0 {
                        o.push(b',');
                    }
                    write!(o, "{p}")?;
                }
                o.write_all(b"],\"submit_to_ready_us\":")?;
                us(o, r.ready.saturating_sub(r.submit))?;
                o.write_all(b",\"ready_to_start_us\":")?;
                us(o, r.start.saturating_sub(r.ready))?;
                let status = match r.status {
                    TaskStatus::Ok => "ok",
                    TaskStatus::Failed => "failed",
                };
                if let Some((j, measured)) = joules {
                    write!(o, ",\"energy_mJ\":{}", j * 1e3)?;
                    if !measured {
                        o.write_all(
                            b",\"energy_note\":\"not a measurement: it rests on a power the \
                              report flags (taskwatt report says why)\"",
                        )?;
                    }
                }
                write!(o, ",\"status\":\"{status}\"}}}}")
            })?;
            // Dependency arrows: to this task from each predecessor read so far; the
            // others wait for their predecessor.
            for &p in preds {
                match self.ends.get(&p).copied() {
                    Some((pw, pend)) => self.flow((pw, pend), (r.worker, r.start))?,
                    None => self.waiting.entry(p).or_default().push((r.worker, r.start)),
                }
            }
            self.ends.insert(r.id, (r.worker, r.end));
            if let Some(succ) = self.waiting.remove(&r.id) {
                for to in succ {
                    self.flow((r.worker, r.end), to)?;
                }
            }
        }
        Ok(())
    }

    /// One dependency arrow from the end of a task to the start of another.
    fn flow(&mut self, from: (u32, Timestamp), to: (u32, Timestamp)) -> io::Result<()> {
        self.flows += 1;
        let id = self.flows;
        // The start binds to the slice that encloses it: a hair before the predecessor's end.
        let start = from.1 .0.saturating_sub(1);
        let (pf, pt) = (self.pid(from.0), self.pid(to.0));
        self.event(|o| {
            write!(
                o,
                "{{\"ph\":\"s\",\"pid\":{pf},\"tid\":{},\"id\":{id},\"cat\":\"dependency\",\"name\":\"dependency\",\"ts\":",
                from.0
            )?;
            us(o, start)?;
            o.write_all(b"}")
        })?;
        self.event(|o| {
            write!(
                o,
                "{{\"ph\":\"f\",\"bp\":\"e\",\"pid\":{pt},\"tid\":{},\"id\":{id},\"cat\":\"dependency\",\"name\":\"dependency\",\"ts\":",
                to.0
            )?;
            us(o, to.1 .0)?;
            o.write_all(b"}")
        })
    }

    fn samples(&mut self, samples: &[EnergySample]) -> io::Result<()> {
        for s in samples {
            let prev = self.last.insert(s.domain, (s.t, s.energy_j));
            let Some((t0, e0)) = prev else { continue };
            if s.t <= t0 {
                continue;
            }
            let watts = (s.energy_j - e0) / (s.t.saturating_sub(t0) as f64 * 1e-9);
            if !watts.is_finite() {
                continue;
            }
            let name = match self.counters.get(&s.domain) {
                Some(n) => n.clone(),
                None => {
                    let n = serde_json::to_string(&format!("power domain {}", s.domain))?;
                    self.counters.insert(s.domain, n.clone());
                    n
                }
            };
            self.event(|o| {
                write!(o, "{{\"ph\":\"C\",\"pid\":{PID},\"name\":{name},\"ts\":")?;
                us(o, t0.0)?;
                write!(o, ",\"args\":{{\"W\":{watts}}}}}")
            })?;
        }
        Ok(())
    }

    /// One `C` track `frequency <domain>` per package, in MHz: each sample's value from the
    /// domain's previous sample on (the span it averages).
    fn frequencies(&mut self, samples: &[crate::FrequencySample]) -> io::Result<()> {
        for s in samples {
            let prev = self.last_freq.insert(s.domain, s.t);
            let Some(t0) = prev else { continue };
            if s.t <= t0 || !s.mhz.is_finite() {
                continue;
            }
            let name = match self.counters.get(&s.domain) {
                // `"power package-0"` -> `"frequency package-0"`.
                Some(n) => serde_json::to_string(&format!(
                    "frequency{}",
                    n[1..n.len() - 1].strip_prefix("power").unwrap_or("")
                ))?,
                None => serde_json::to_string(&format!("frequency domain {}", s.domain))?,
            };
            let mhz = s.mhz;
            self.event(|o| {
                write!(o, "{{\"ph\":\"C\",\"pid\":{PID},\"name\":{name},\"ts\":")?;
                us(o, t0.0)?;
                write!(o, ",\"args\":{{\"MHz\":{mhz}}}}}")
            })?;
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<u64> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Arch, CodeletInfo, Domain, DomainInfo, MeterInfo, RunMeta, SensorKind};
    use crate::{TaskRecord, TraceWriter};
    use serde_json::Value;

    fn trace() -> Trace {
        let mut t = TaskChunk::default();
        for (id, worker, start, end) in [(0u64, 0u32, 1_000u64, 2_500u64), (1, 1, 1_500, 4_001)] {
            t.push(
                TaskRecord {
                    id,
                    codelet: id as u32,
                    arch: Arch::Cpu,
                    worker,
                    status: if id == 1 {
                        TaskStatus::Failed
                    } else {
                        TaskStatus::Ok
                    },
                    priority: 7,
                    footprint: 4096,
                    submit: Timestamp(100),
                    ready: Timestamp(400),
                    start: Timestamp(start),
                    end: Timestamp(end),
                    preds_start: 0,
                    preds_len: 0,
                },
                if id == 1 { &[0] } else { &[] },
            );
        }
        let sample = |t: u64, e: f64| EnergySample {
            domain: 0,
            t: Timestamp(t),
            wall_unix_ns: 0,
            energy_j: e,
            raw: e,
        };
        Trace::from_chunks([
            Chunk::Meta(RunMeta {
                policy: "lws".into(),
                host: "h\"1".into(),
                taskwatt_version: "0.1.0".into(),
                workers: vec![WorkerInfo {
                    id: 0,
                    arch: Arch::Cpu,
                    cpu: Some(2),
                    core: Some(1),
                    package: 0,
                    numa: None,
                    device: None,
                }],
                ..RunMeta::default()
            }),
            Chunk::Codelets(vec![
                CodeletInfo {
                    id: 0,
                    name: "gemm".into(),
                    archs: vec![Arch::Cpu],
                },
                CodeletInfo {
                    id: 1,
                    name: "po\"trf".into(),
                    archs: vec![Arch::Cpu],
                },
            ]),
            Chunk::Meters {
                meters: vec![MeterInfo {
                    id: 0,
                    backend: "sim".into(),
                    simulated: true,
                    description: String::new(),
                }],
                domains: vec![DomainInfo {
                    id: 0,
                    meter: 0,
                    domain: Domain::CpuPackage { id: 0 },
                    name: "package-0".into(),
                    unit: "uJ".into(),
                    resolution_j: 1e-6,
                    wrap_range_j: None,
                    update_interval_ns: None,
                    sensor: SensorKind::EnergyCounter,
                    workers: vec![0, 1],
                }],
            },
            Chunk::Tasks(t),
            // 2 J over 1 ms, then 1 J over 1 ms: 2000 W, 1000 W.
            Chunk::Samples(vec![sample(0, 0.0), sample(1_000_000, 2.0)]),
            Chunk::Samples(vec![sample(2_000_000, 3.0)]),
            Chunk::Frequencies(vec![
                crate::FrequencySample {
                    domain: 0,
                    t: Timestamp(1_000_000),
                    mhz: 3900.0,
                },
                crate::FrequencySample {
                    domain: 0,
                    t: Timestamp(2_000_000),
                    mhz: 3100.0,
                },
            ]),
            Chunk::Markers(vec![
                Marker {
                    name: "idle".into(),
                    start: Timestamp(0),
                    end: Timestamp(500),
                },
                Marker {
                    name: "graph".into(),
                    start: Timestamp(200),
                    end: Timestamp(5_000),
                },
            ]),
        ])
    }

    fn events_of(v: &Value) -> &Vec<Value> {
        v["traceEvents"].as_array().unwrap()
    }

    fn check(v: &Value, n: u64) {
        let ev = events_of(v);
        assert_eq!(ev.len() as u64, n);
        let x: Vec<&Value> = ev
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "cpu")
            .collect();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0]["name"], "gemm");
        assert_eq!(x[0]["ts"].as_f64(), Some(1.0));
        assert_eq!(x[0]["dur"].as_f64(), Some(1.5));
        assert_eq!(x[1]["name"], "po\"trf");
        assert_eq!(x[1]["dur"].as_f64(), Some(2.501));
        assert_eq!(x[1]["args"]["preds"], serde_json::json!([0]));
        assert_eq!(x[1]["args"]["status"], "failed");
        assert_eq!(x[1]["args"]["submit_to_ready_us"].as_f64(), Some(0.3));
        assert_eq!(x[1]["args"]["ready_to_start_us"].as_f64(), Some(1.1));
        let c: Vec<f64> = ev
            .iter()
            .filter(|e| e["ph"] == "C" && e["args"]["W"].is_number())
            .map(|e| e["args"]["W"].as_f64().unwrap())
            .collect();
        assert_eq!(c, [2000.0, 1000.0]);
        // The simulated meter's figures say so where one looks: the process and the
        // counters' names (not only the metadata).
        let counter = ev.iter().find(|e| e["ph"] == "C").unwrap();
        assert_eq!(counter["name"], "power package-0 (SIMULATED)");
        let process = ev.iter().find(|e| e["name"] == "process_name").unwrap();
        assert!(
            process["args"]["name"]
                .as_str()
                .unwrap()
                .ends_with("(SIMULATED energy)"),
            "{process}"
        );
        // The frequency: one value, from the first sample's time, named after the domain.
        let f: Vec<(&str, f64, f64)> = ev
            .iter()
            .filter(|e| e["ph"] == "C" && e["args"]["MHz"].is_number())
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["args"]["MHz"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(f, [("frequency package-0 (SIMULATED)", 1000.0, 3100.0)]);
        let names: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"worker 0 · cpu · core 1 · package 0"),
            "{names:?}"
        );
        assert!(names.contains(&"worker 1"), "{names:?}");
        // Overlapping markers go to two lanes.
        assert!(names.contains(&"markers") && names.contains(&"markers 2"));
        let markers = ev.iter().filter(|e| e["cat"] == "marker").count();
        assert_eq!(markers, 2);
        // The dependency 0 -> 1 is one flow arrow: `s` on task 0's track at its end, `f` on
        // task 1's at its start, one id.
        let flow: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "dependency").collect();
        assert_eq!(flow.len(), 2, "{flow:?}");
        let (s, f) = (flow[0], flow[1]);
        assert_eq!((s["ph"].as_str(), f["ph"].as_str()), (Some("s"), Some("f")));
        assert_eq!(s["id"], f["id"]);
        assert_eq!(f["bp"], "e");
        assert_eq!(s["tid"], x[0]["tid"]);
        assert_eq!(f["tid"], x[1]["tid"]);
        assert_eq!(f["ts"], x[1]["ts"]);
        assert_eq!(v["otherData"]["policy"], "lws");
        assert_eq!(v["otherData"]["simulated_energy"], "true");
        assert_eq!(v["metadata"]["run"]["host"], "h\"1");
    }

    #[test]
    fn a_rank_s_own_trace_shows_each_message_once() {
        // A rank writes its messages in partial chunks as they complete and again in the
        // whole chunk of its end: the export of one rank's trace showed each twice.
        let msg = |handle, t| crate::CommRecord {
            peer: 1,
            send: true,
            handle,
            bytes: 8,
            start: Timestamp(t),
            end: Timestamp(t + 10),
        };
        let chunk = |partial, events| crate::CommChunk {
            rank: 0,
            size: 2,
            partial,
            events,
            ..crate::CommChunk::default()
        };
        let count = |comms: Vec<crate::CommChunk>| {
            let mut t = trace();
            t.comms = comms;
            let mut out = Vec::new();
            write_chrome(&t, &mut out).unwrap();
            let v: Value = serde_json::from_slice(&out).unwrap();
            let ev = events_of(&v);
            let n = ev
                .iter()
                .filter(|e| e["cat"] == "message" && e["ph"] == "X")
                .count();
            let names = ev
                .iter()
                .filter(|e| e["name"] == "process_name" && e["args"]["name"] == "rank 0")
                .count();
            (n, names)
        };
        let (a, b) = (msg(1, 100), msg(2, 200));
        let whole = vec![
            chunk(false, vec![]),
            chunk(true, vec![a]),
            chunk(true, vec![b]),
            chunk(false, vec![a, b]),
        ];
        assert_eq!(count(whole), (2, 1));
        // Killed mid-run: no whole chunk with messages, the partial ones are all there is.
        let cut = vec![
            chunk(false, vec![]),
            chunk(true, vec![a]),
            chunk(true, vec![b]),
        ];
        assert_eq!(count(cut), (2, 1));
    }

    #[test]
    fn transfers_are_slices_on_a_track_per_destination_node() {
        let mut t = trace();
        t.transfers = vec![
            crate::Transfer {
                handle: 7,
                src: 0,
                dst: 1,
                bytes: 4096,
                worker: Some(1),
                task: Some(3),
                start: Timestamp(2_000),
                end: Timestamp(3_500),
                kind: crate::TransferKind::Prefetch,
            },
            crate::Transfer {
                handle: 7,
                src: 1,
                dst: 0,
                bytes: 4096,
                worker: None,
                task: None,
                start: Timestamp(9_000),
                end: Timestamp(9_700),
                kind: crate::TransferKind::Fetch,
            },
        ];
        t.evictions = vec![crate::Eviction {
            handle: 7,
            node: 1,
            bytes: 4096,
            written_back: true,
            worker: Some(1),
            task: Some(4),
            time: Timestamp(8_000),
        }];
        let mut out = Vec::new();
        write_chrome(&t, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let ev = events_of(&v);
        let copies: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "transfer").collect();
        assert_eq!(copies.len(), 2);
        assert_eq!(copies[0]["name"], "prefetch h7 0→1");
        assert_eq!(copies[0]["args"]["kind"], "prefetch");
        assert_eq!(copies[1]["name"], "copy h7 1→0");
        let evicted: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "eviction").collect();
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0]["ph"], "i");
        assert_eq!(evicted[0]["tid"], 2_000_001);
        assert_eq!(evicted[0]["args"]["written_back"], true);
        assert_eq!(evicted[0]["args"]["for_task"], 4);
        assert_eq!(copies[0]["tid"], 2_000_001);
        assert_eq!(copies[0]["ts"], 2.0);
        assert_eq!(copies[0]["dur"], 1.5);
        assert_eq!(copies[0]["args"]["bytes"], 4096);
        assert_eq!(copies[0]["args"]["task"], 3);
        assert!(copies[1]["args"].get("task").is_none());
        let tracks: Vec<&str> = ev
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .filter(|n| n.starts_with("transfers"))
            .collect();
        assert_eq!(tracks, ["transfers to node 1", "transfers to node 0"]);
    }

    #[test]
    fn in_memory_export_parses_back() {
        let mut out = Vec::new();
        let n = write_chrome(&trace(), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        check(&v, n);
    }

    #[test]
    fn streamed_export_matches_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        let t = trace();
        t.save(&path).unwrap();
        let mut a = Vec::new();
        let n = export_chrome(&path, &mut a).unwrap();
        let mut b = Vec::new();
        let t = crate::read_trace(&path).unwrap();
        write_chrome(&t, &mut b).unwrap();
        let v: Value = serde_json::from_slice(&a).unwrap();
        check(&v, n);
        assert_eq!(v, serde_json::from_slice::<Value>(&b).unwrap());
    }

    #[test]
    fn cut_short_file_is_refused_and_its_recovery_is_valid_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.twt");
        drop(TraceWriter::create(&path).unwrap()); // no End chunk
        let e = export_chrome(&path, std::io::sink()).unwrap_err();
        assert!(matches!(e, TraceError::CutShort { .. }), "{e}");
        assert!(e.to_string().contains("--recover"), "{e}");
        let mut out = Vec::new();
        let recovered = crate::recover_trace(&path).unwrap().trace;
        let n = write_chrome(&recovered, &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(events_of(&v).len() as u64, n);
        assert_eq!(n, 1, "only the process name");
    }

    #[test]
    fn lanes_separate_only_overlaps() {
        let m = |s, e| Marker {
            name: String::new(),
            start: Timestamp(s),
            end: Timestamp(e),
        };
        let ms = [m(0, 10), m(10, 20), m(5, 15), m(30, 40)];
        let lanes: Vec<u64> = marker_lanes(&ms).into_iter().map(|(l, _)| l).collect();
        // Sorted by start: (0,10)->0, (5,15)->1, (10,20)->0, (30,40)->0.
        assert_eq!(lanes, [0, 1, 0, 0]);
    }
}
