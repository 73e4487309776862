//! The task graph to replay: tasks, dependencies and data accesses, from a trace or built
//! directly.

use std::collections::HashMap;

use taskwatt_traces::{AccessMode, Arch, CodeletInfo, Trace};

use crate::WhatIfError;

/// One task of the graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GraphTask {
    /// Its id in the recorded run (submission order).
    pub id: u64,
    /// Its codelet (an id of [`Graph::codelets`]).
    pub codelet: u32,
    /// The architecture it ran on.
    pub arch: Arch,
    /// Its priority.
    pub priority: i32,
    /// Bytes it accessed (its handles' sizes): with the codelet, what perf models key on.
    pub footprint: u64,
    /// Its recorded duration, ns.
    pub duration_ns: u64,
}

/// One data access of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    /// Dense handle index.
    pub(crate) handle: u32,
    /// Whether the task reads the data (needs a valid copy where it runs).
    pub(crate) reads: bool,
    /// Whether it writes it (invalidates the other copies).
    pub(crate) writes: bool,
    /// Size, bytes.
    pub(crate) bytes: u64,
}

/// A task graph: tasks in submission order, successor lists, accesses.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub(crate) tasks: Vec<GraphTask>,
    pub(crate) npreds: Vec<u32>,
    pub(crate) succ_start: Vec<u32>,
    pub(crate) succ: Vec<u32>,
    pub(crate) preds_start: Vec<u32>,
    pub(crate) preds: Vec<u32>,
    /// Each task's accesses (`acc[acc_start[i]..acc_start[i + 1]]`), shared with a
    /// simulation's replicas (the policy asks them what a task would copy).
    pub(crate) acc_start: std::sync::Arc<Vec<u32>>,
    pub(crate) acc: std::sync::Arc<Vec<Access>>,
    pub(crate) handles: u32,
    /// The trace's id of each dense handle index.
    pub(crate) handle_ids: Vec<u64>,
    pub(crate) codelets: Vec<CodeletInfo>,
    /// Edges to tasks the trace does not hold (acquisitions, tasks of a cut trace).
    pub(crate) dropped_edges: usize,
    /// The per-task runtime overhead measured in the recorded run.
    pub(crate) measured_overhead: Option<Overhead>,
    /// Per task (graph order), the mean number of its package's CPU workers busy while it
    /// ran in the recording, itself included (`contention.rs`); empty for a built graph.
    pub(crate) occupancy: Vec<f64>,
    /// Each codelet's duration against the busy cores, where the recording shows it.
    pub(crate) laws: crate::contention::ContentionLaws,
    /// How much the recording machine's speed moved between stretches as long as the
    /// graph (relative standard deviation, `wander.rs`); `None` without calibration, or
    /// with too little of it for a graph this long.
    pub(crate) wander: Option<f64>,
    /// CPU tasks of the recording outside its graph (type calibration).
    pub(crate) calibration_tasks: usize,
    /// When [`Graph::wander`] came from stretches shorter than the graph (too little
    /// calibration for graph-long ones), their length in ns.
    pub(crate) wander_window_ns: Option<u64>,
}

/// Strata an [`Overhead`] keeps.
const STRATA: usize = 1024;

/// The runtime's overhead per task as the recorded run had it: the gaps between a worker's
/// consecutive tasks when the second was ready before the first ended (the time the
/// runtime took to hand it over), as a distribution. A median alone replays a run whose
/// hand-offs are mostly quick with some long waits (a loaded machine) far too fast: a
/// Task Bench trace with a 0.2 µs median gap spent 4.4 µs per task on average.
#[derive(Clone, Debug, PartialEq)]
pub struct Overhead {
    /// The sorted gaps cut into up to [`STRATA`] strata of equal counts, each stratum's
    /// mean, ns: a draw of a stratum at random has the gaps' mean exactly.
    strata: Vec<f64>,
    /// Gaps measured.
    pub gaps: usize,
    /// Their mean, median and 99th percentile, ns.
    pub mean_ns: f64,
    /// See [`Overhead::mean_ns`].
    pub median_ns: u64,
    /// See [`Overhead::mean_ns`].
    pub p99_ns: u64,
}

impl Overhead {
    /// The distribution of `gaps` (ns); `None` without any.
    pub fn from_gaps(mut gaps: Vec<u64>) -> Option<Overhead> {
        if gaps.is_empty() {
            return None;
        }
        gaps.sort_unstable();
        let n = gaps.len();
        let k = n.min(STRATA);
        let strata = (0..k)
            .map(|i| {
                let s = &gaps[i * n / k..(i + 1) * n / k];
                s.iter().map(|&g| g as f64).sum::<f64>() / s.len() as f64
            })
            .collect();
        Some(Overhead {
            strata,
            gaps: n,
            mean_ns: gaps.iter().map(|&g| g as f64).sum::<f64>() / n as f64,
            median_ns: gaps[n / 2],
            p99_ns: gaps[((n as f64 * 0.99) as usize).min(n - 1)],
        })
    }

    /// Task `i`'s overhead, ns: a stratum drawn by a hash of `i` (deterministic, so that a
    /// replay is reproducible; every stratum as likely).
    pub fn draw(&self, i: u64) -> u64 {
        let s = self.strata[(mix(i) % self.strata.len() as u64) as usize];
        s.round() as u64
    }
}

/// A well-mixed hash of `z` (deterministic draws): SplitMix64's first output.
pub(crate) fn mix(z: u64) -> u64 {
    taskwatt_energy::SplitMix64::new(z).next_u64()
}

/// Builds a [`Graph`] task by task (predecessors first).
#[derive(Debug, Default)]
pub struct GraphBuilder {
    g: Graph,
    edges: Vec<(u32, u32)>,
    accesses: Vec<(u32, Access)>,
    handles: HashMap<u64, u32>,
}

impl GraphBuilder {
    /// A builder for tasks of `codelets`.
    pub fn new(codelets: Vec<CodeletInfo>) -> Self {
        GraphBuilder {
            g: Graph {
                codelets,
                ..Graph::default()
            },
            ..GraphBuilder::default()
        }
    }

    /// Adds a task after `preds` (indices of tasks added before); returns its index.
    pub fn task(&mut self, task: GraphTask, preds: &[u32]) -> u32 {
        let i = self.g.tasks.len() as u32;
        self.g.tasks.push(task);
        for &p in preds {
            debug_assert!(p < i, "predecessors are added first");
            self.edges.push((p, i));
        }
        i
    }

    /// Declares that task `task` accesses handle `handle` (any id) of `bytes` with `mode`.
    pub fn access(&mut self, task: u32, handle: u64, mode: AccessMode, bytes: u64) {
        let n = self.handles.len() as u32;
        let h = *self.handles.entry(handle).or_insert(n);
        let (reads, writes) = match mode {
            AccessMode::R => (true, false),
            AccessMode::W => (false, true),
            AccessMode::RW | AccessMode::Commute | AccessMode::Redux => (true, true),
        };
        self.accesses.push((
            task,
            Access {
                handle: h,
                reads,
                writes,
                bytes,
            },
        ));
    }

    /// The graph.
    pub fn build(mut self) -> Graph {
        let n = self.g.tasks.len();
        let mut g = self.g;
        g.handles = self.handles.len() as u32;
        g.handle_ids = vec![0; self.handles.len()];
        for (&id, &i) in &self.handles {
            g.handle_ids[i as usize] = id;
        }
        // Successors and predecessors, compressed.
        self.edges.sort_unstable();
        self.edges.dedup();
        g.npreds = vec![0; n];
        g.succ_start = vec![0; n + 1];
        for &(p, s) in &self.edges {
            g.succ_start[p as usize + 1] += 1;
            g.npreds[s as usize] += 1;
        }
        for i in 0..n {
            g.succ_start[i + 1] += g.succ_start[i];
        }
        g.succ = self.edges.iter().map(|&(_, s)| s).collect();
        g.preds_start = vec![0; n + 1];
        for i in 0..n {
            g.preds_start[i + 1] = g.preds_start[i] + g.npreds[i];
        }
        let mut fill = g.preds_start.clone();
        g.preds = vec![0; self.edges.len()];
        for &(p, s) in &self.edges {
            g.preds[fill[s as usize] as usize] = p;
            fill[s as usize] += 1;
        }
        // Accesses grouped by task, in declaration order: placed by counts (no sort, no
        // buffer beside the two lists).
        let mut acc_start = vec![0; n + 1];
        for (t, _) in &self.accesses {
            acc_start[*t as usize + 1] += 1;
        }
        for i in 0..n {
            acc_start[i + 1] += acc_start[i];
        }
        let mut fill = acc_start.clone();
        let mut acc = vec![
            Access {
                handle: 0,
                reads: false,
                writes: false,
                bytes: 0,
            };
            self.accesses.len()
        ];
        for (t, a) in std::mem::take(&mut self.accesses) {
            acc[fill[t as usize] as usize] = a;
            fill[t as usize] += 1;
        }
        g.acc = std::sync::Arc::new(acc);
        g.acc_start = std::sync::Arc::new(acc_start);
        g
    }
}

impl Graph {
    /// The graph a trace recorded: every task execution with its predecessors (format
    /// 1.0) and, where the trace has them (format 1.3), its data accesses.
    ///
    /// When the trace marks its task graph (`graph` markers, as `taskwatt run` does), only
    /// the tasks that started inside them are the graph: calibration phases around it are
    /// left out.
    pub fn from_trace(trace: &Trace) -> Result<Graph, WhatIfError> {
        let windows = graph_windows(trace);
        // Borrowed from the trace: a copy of each record and its predecessors was 1 M heap
        // allocations and 150 MB on a 1 M-task graph.
        let mut recs: Vec<(&taskwatt_traces::TaskRecord, &[u64])> =
            Vec::with_capacity(trace.tasks.iter().map(|c| c.records.len()).sum());
        for chunk in &trace.tasks {
            for r in &chunk.records {
                if in_windows(&windows, r.start.as_ns()) {
                    recs.push((r, chunk.preds_of(r)));
                }
            }
        }
        if recs.is_empty() {
            let all: usize = trace.tasks.iter().map(|c| c.records.len()).sum();
            return Err(WhatIfError::Graph(if all > 0 {
                format!(
                    "none of the trace's {all} tasks started inside its `graph` marker(s) {}: \
                     an edited or damaged marker (a start after its end?); remove the markers \
                     to replay every task",
                    windows
                        .iter()
                        .map(|(a, b)| format!("{a}..{b} ns"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                "the trace holds no task (a trace of an empty or failed-to-start run?)".into()
            }));
        }
        recs.sort_by_key(|(r, _)| r.id);
        if let Some(w) = recs.windows(2).find(|w| w[0].0.id == w[1].0.id) {
            return Err(WhatIfError::Graph(format!(
                "task {} appears twice in the trace",
                w[0].0.id
            )));
        }
        let index: HashMap<u64, u32> = recs
            .iter()
            .enumerate()
            .map(|(i, (r, _))| (r.id, i as u32))
            .collect();
        // Codelets of one name are one type, as the report groups them: a reduction made
        // anew per iteration (`set_reduction` each time) was 300 types of one name, with
        // 300 notes and no duration law between them.
        let mut first: HashMap<&str, u32> = HashMap::new();
        let canon: HashMap<u32, u32> = trace
            .codelets
            .iter()
            .map(|c| (c.id, *first.entry(c.name.as_str()).or_insert(c.id)))
            .collect();
        let mut codelets = trace.codelets.clone();
        for c in &trace.codelets {
            let to = canon[&c.id];
            if to != c.id {
                if let Some(k) = codelets.iter_mut().find(|k| k.id == to) {
                    for a in &c.archs {
                        if !k.archs.contains(a) {
                            k.archs.push(*a);
                        }
                    }
                }
            }
        }
        let mut b = GraphBuilder::new(codelets);
        let mut dropped = 0;
        let mut preds = Vec::new();
        for &(r, ps) in &recs {
            preds.clear();
            for p in ps {
                match index.get(p) {
                    Some(&i) if (i as usize) < b.g.tasks.len() => preds.push(i),
                    _ => dropped += 1,
                }
            }
            b.task(
                GraphTask {
                    id: r.id,
                    codelet: canon.get(&r.codelet).copied().unwrap_or(r.codelet),
                    arch: r.arch,
                    priority: r.priority,
                    footprint: r.footprint,
                    duration_ns: r.end.as_ns().saturating_sub(r.start.as_ns()),
                },
                &preds,
            );
        }
        b.accesses.reserve(trace.accesses.len());
        for a in &trace.accesses {
            if let Some(&i) = index.get(&a.task) {
                b.access(i, a.handle, a.mode, a.bytes);
            }
        }
        let mut g = b.build();
        g.dropped_edges = dropped;
        g.measured_overhead = overhead(&recs);
        // What ran beside each task, and each codelet's duration against it.
        let package: HashMap<u32, u32> = trace
            .meta
            .workers
            .iter()
            .map(|w| (w.id, w.package))
            .collect();
        let records: Vec<&taskwatt_traces::TaskRecord> = recs.iter().map(|(r, _)| *r).collect();
        let package_of = |w| package.get(&w).copied().unwrap_or(0);
        g.occupancy = crate::contention::occupancy(&records, package_of);
        // The type calibration's tasks (outside the graph's markers) give the laws the
        // contrast a graph on few workers lacks; they are not replayed.
        let calibration: Vec<&taskwatt_traces::TaskRecord> = if windows.is_empty() {
            Vec::new()
        } else {
            trace
                .tasks
                .iter()
                .flat_map(|c| c.records.iter())
                .filter(|r| r.arch == Arch::Cpu && !in_windows(&windows, r.start.as_ns()))
                .collect()
        };
        let calibration_occupancy = crate::contention::occupancy(&calibration, package_of);
        use crate::contention::Group;
        // Every CPU task, the graph's and the calibration's, with its group and occupancy:
        // what the laws and the machine's wander are fitted on.
        let cpu: Vec<(&taskwatt_traces::TaskRecord, Group, f64)> = records
            .iter()
            .zip(&g.occupancy)
            .map(|(r, &k)| (*r, Group::Graph, k))
            .chain(
                calibration
                    .iter()
                    .zip(&calibration_occupancy)
                    .map(|(r, &k)| (*r, Group::Calibration, k)),
            )
            .filter(|(r, _, _)| r.arch == Arch::Cpu)
            .collect();
        let duration =
            |r: &taskwatt_traces::TaskRecord| r.end.as_ns().saturating_sub(r.start.as_ns()) as f64;
        let laws = crate::contention::fit(
            cpu.iter().map(|&(r, group, k)| {
                (
                    canon.get(&r.codelet).copied().unwrap_or(r.codelet),
                    r.footprint,
                    duration(r),
                    k,
                    group,
                    r.start.as_ns(),
                )
            }),
            |c| {
                g.codelets
                    .iter()
                    .find(|x| x.id == c)
                    .map_or("?", |x| x.name.as_str())
            },
        );
        g.laws = laws;
        // The machine's speed between stretches as long as the graph, each task relative
        // to its type, group and busy cores (calibration alternates alone and on every
        // core: a stretch that holds more of one must not read as slower).
        g.calibration_tasks = calibration.len();
        if !calibration.is_empty() {
            let span = records.iter().map(|r| r.end.as_ns()).max().unwrap_or(0)
                - records.iter().map(|r| r.start.as_ns()).min().unwrap_or(0);
            let tasks: Vec<_> = cpu
                .iter()
                .map(|&(r, group, k)| {
                    let c = canon.get(&r.codelet).copied().unwrap_or(r.codelet);
                    let key = (c, r.footprint, group, k.round() as u32);
                    (key, r.start.as_ns(), duration(r))
                })
                .collect();
            g.wander = crate::wander::speed_wander(&tasks, span);
            if g.wander.is_none() {
                // Too little calibration for stretches as long as the graph: shorter ones
                // (`wander.rs`, "Shorter stretches"), said so by `simulate`.
                let first = tasks.iter().map(|t| t.1).min().unwrap_or(0);
                let last = cpu.iter().map(|(r, ..)| r.end.as_ns()).max().unwrap_or(0);
                let short = last.saturating_sub(first) / crate::wander::SHORT_WINDOWS;
                if short > 0 && short < span {
                    g.wander = crate::wander::speed_wander(&tasks, short);
                    g.wander_window_ns = g.wander.map(|_| short);
                }
            }
        }
        Ok(g)
    }

    /// Tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether it has no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The tasks, in submission order.
    pub fn tasks(&self) -> &[GraphTask] {
        &self.tasks
    }

    /// The codelets.
    pub fn codelets(&self) -> &[CodeletInfo] {
        &self.codelets
    }

    /// The indices of the predecessors of task `i`.
    pub fn preds(&self, i: usize) -> &[u32] {
        &self.preds[self.preds_start[i] as usize..self.preds_start[i + 1] as usize]
    }

    /// Whether the graph knows the tasks' data accesses (format 1.3 traces recorded with
    /// them): without them no copy is simulated.
    pub fn has_accesses(&self) -> bool {
        !self.acc.is_empty()
    }

    /// Edges to tasks the trace does not hold, left out.
    pub fn dropped_edges(&self) -> usize {
        self.dropped_edges
    }

    /// The per-task runtime overhead measured in the recorded run: its median, ns.
    pub fn measured_overhead_ns(&self) -> Option<u64> {
        self.measured_overhead.as_ref().map(|o| o.median_ns)
    }

    /// How much the recording machine's speed moved between stretches as long as the
    /// graph: a relative standard deviation, from the calibration around the graph
    /// (`None` without one). Replicas draw the machine's speed within it.
    pub fn speed_wander(&self) -> Option<f64> {
        self.wander
    }

    /// The length of the stretches [`Graph::speed_wander`] was estimated on, when they
    /// are shorter than the graph (its calibration was too short for graph-long ones);
    /// `None` when they are as long as the graph, or nothing was estimated.
    pub fn wander_window_ns(&self) -> Option<u64> {
        self.wander_window_ns
    }

    /// CPU tasks the recording ran outside its graph, to calibrate types: what
    /// [`Graph::speed_wander`] is estimated from (0 without calibration).
    pub fn calibration_tasks(&self) -> usize {
        self.calibration_tasks
    }

    /// Each codelet's duration against the busy cores of its package, as the recording
    /// shows it (`contention.rs`).
    pub fn contention_laws(&self) -> &crate::contention::ContentionLaws {
        &self.laws
    }

    /// The per-task runtime overhead measured in the recorded run, as a distribution.
    pub fn measured_overhead(&self) -> Option<&Overhead> {
        self.measured_overhead.as_ref()
    }

    pub(crate) fn succs(&self, i: usize) -> &[u32] {
        &self.succ[self.succ_start[i] as usize..self.succ_start[i + 1] as usize]
    }

    pub(crate) fn accesses(&self, i: usize) -> &[Access] {
        &self.acc[self.acc_start[i] as usize..self.acc_start[i + 1] as usize]
    }

    pub(crate) fn codelet_name(&self, c: u32) -> &str {
        self.codelets
            .iter()
            .find(|x| x.id == c)
            .map_or("?", |x| x.name.as_str())
    }
}

/// The spans of a trace's `graph` markers (the application's task graph); empty when it
/// has none (then every task counts).
pub fn graph_windows(trace: &Trace) -> Vec<(u64, u64)> {
    trace
        .markers
        .iter()
        .filter(|m| m.name == "graph")
        .map(|m| (m.start.as_ns(), m.end.as_ns()))
        .collect()
}

/// Whether `t` lies in one of `windows` (always, without windows).
pub fn in_windows(windows: &[(u64, u64)], t: u64) -> bool {
    windows.is_empty() || windows.iter().any(|&(a, b)| a <= t && t <= b)
}

/// The runtime's own time per task in a recorded run: the median gap between a worker's
/// task and its next one, over the pairs where the next one was ready before the first
/// ended (so that the gap is the runtime's, not a wait for work). `None` without such
/// pairs.
/// The hand-offs of `recs` (sorted by id): per worker, the gap from a task's end to the
/// next task's start when the next was ready before the first ended. A task is ready when
/// the trace says (`ready`), or, where the trace does not record it (an imported StarPU
/// trace's `ready` is its start), when its last predecessor ended and it was submitted.
fn overhead(recs: &[(&taskwatt_traces::TaskRecord, &[u64])]) -> Option<Overhead> {
    let end_of = |id: u64| -> Option<u64> {
        recs.binary_search_by_key(&id, |(r, _)| r.id)
            .ok()
            .map(|i| recs[i].0.end.as_ns())
    };
    let mut by_worker: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
    for &(r, preds) in recs {
        let ready = if r.ready < r.start {
            r.ready.as_ns()
        } else {
            preds
                .iter()
                .filter_map(|&p| end_of(p))
                .fold(r.submit.as_ns(), u64::max)
        };
        by_worker
            .entry(r.worker)
            .or_default()
            .push((r.start.as_ns(), r.end.as_ns(), ready));
    }
    let mut gaps = Vec::new();
    for v in by_worker.values_mut() {
        v.sort_unstable();
        for w in v.windows(2) {
            let ((_, a_end, _), (b_start, _, b_ready)) = (w[0], w[1]);
            if b_ready <= a_end && b_start >= a_end {
                gaps.push(b_start - a_end);
            }
        }
    }
    Overhead::from_gaps(gaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, d: u64) -> GraphTask {
        GraphTask {
            id,
            codelet: 0,
            arch: Arch::Cpu,
            priority: 0,
            footprint: 0,
            duration_ns: d,
        }
    }

    #[test]
    fn builder_compresses_successors_and_predecessors() {
        let mut b = GraphBuilder::new(Vec::new());
        let a = b.task(task(0, 1), &[]);
        let c = b.task(task(1, 1), &[a]);
        let d = b.task(task(2, 1), &[a, c, a]);
        b.access(d, 77, AccessMode::RW, 8);
        let g = b.build();
        assert_eq!(g.succs(0), &[1, 2]);
        assert_eq!(g.succs(1), &[2]);
        assert_eq!(g.preds(2), &[0, 1]);
        assert_eq!(g.npreds, vec![0, 1, 2]);
        assert_eq!(g.accesses(2).len(), 1);
        assert!(g.accesses(0).is_empty());
        assert_eq!(g.handles, 1);
    }
}
