//! The task graphs on taskwatt, mapped to data the way StarPU's Task Bench
//! (starpu/main.cc) maps them: each graph owns a matrix of `nb_fields x width` data
//! handles; task `(t, x)` writes handle `(t % nb_fields, x)` and reads handle
//! `((t - 1) % nb_fields, d)` for each dependency `d`, so the runtime infers every edge
//! from the accesses (sequential task flow). With the default `nb_fields = timesteps`
//! every handle is written once and only true (read-after-write) edges exist; a smaller
//! `-field` reuses handles, and the write-after-read edges it adds are the runtime's to
//! honour.
//!
//! Graphs joined with `-and` are submitted timestep by timestep, interleaved, into one
//! runtime, so they run concurrently. As in Task Bench, the timer covers submission and
//! execution (`wait_all`), not runtime start-up or data registration; the workers, parked
//! during the registration, are woken before it starts (`Runtime::warm_up`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use taskwatt_runtime::{Codelet, Handle, Runtime, Task, MAX_ACCESSES};
use taskwatt_traces::{TraceSink, TraceWriter};

use super::error::TaskBenchError;
use super::graph::TaskGraph;
use super::kernel::KernelType;
use super::outcome::BenchOutcome;
use super::point::{combine, execute_point, Checksums, DepTable, PointOutput};

/// What every task of one graph shares.
struct GraphState {
    graph: TaskGraph,
    deps: DepTable,
    sums: Checksums,
}

/// The task's `cl_arg`: which point of which graph it is. The graphs themselves are held
/// by the codelet's closure, so that submitting a task touches no shared reference count.
/// 16 bytes, so that the runtime stores it in the task without an allocation (a point
/// index fits in 32 bits: Task Bench's widths are C `int`s).
struct PointArg {
    t: i64,
    x: i32,
    graph: u32,
}

/// The codelet of a kernel, for every graph of `states` that uses it (one task type per
/// kernel in the trace): buffer 0 is the output (W), buffers 1.. the inputs (R) in
/// dependency order.
fn point_codelet(kind: KernelType, states: Arc<[GraphState]>) -> Codelet {
    Codelet::new(kind.codelet_name()).cpu(move |ctx| {
        let a = ctx.arg::<PointArg>();
        let st = &states[a.graph as usize];
        let x = i64::from(a.x);
        let out = ctx.w::<PointOutput>(0);
        let inputs = st
            .deps
            .inputs(&st.graph, a.t, x)
            .enumerate()
            .map(|(i, d)| (d, ctx.r::<PointOutput>(i + 1)));
        let h = execute_point(&st.graph, a.t, x, inputs, out);
        st.sums.record(a.t, x, h);
    })
}

/// Checks every task of `graphs` fits taskwatt's access limit.
pub(crate) fn check_accesses(graphs: &[TaskGraph]) -> Result<(), TaskBenchError> {
    for g in graphs {
        let n = DepTable::new(g).max_inputs() + 1;
        if n > MAX_ACCESSES {
            return Err(TaskBenchError::InvalidGraph {
                graph: g.graph_index as usize + 1,
                reason: format!(
                    "a `{}` task of width {} reads {} outputs and writes one: taskwatt tasks \
                     declare at most {MAX_ACCESSES} accesses (use a smaller -width or -radix, \
                     or --system rayon)",
                    g.dependence,
                    g.max_width,
                    n - 1
                ),
            });
        }
    }
    Ok(())
}

/// A policy name with this suffix (`lws+submitter`) runs that policy with the submitting
/// thread as the last of the workers (`RuntimeBuilder::submitter_works`).
pub(crate) const SUBMITTER_SUFFIX: &str = "+submitter";

/// Runs `graphs` on a fresh taskwatt runtime of `workers` workers under `policy`,
/// recording its trace into `trace` if given. The trace is complete (the runtime stopped
/// and the writer finished) when this returns; only submission and execution are timed.
pub(crate) fn run(
    graphs: &[TaskGraph],
    workers: usize,
    policy: &str,
    trace: Option<&Path>,
) -> Result<BenchOutcome, TaskBenchError> {
    check_accesses(graphs)?;
    let writer = trace
        .map(|p| {
            TraceWriter::create(p).map_err(|source| TaskBenchError::Trace {
                path: p.to_path_buf(),
                source: Box::new(source),
            })
        })
        .transpose()?;
    let sink = writer
        .as_ref()
        .map_or_else(TraceSink::null, TraceWriter::sink);
    // `lws+submitter`: the policy, with the submitting thread as the last of the workers
    // (`RuntimeBuilder::submitter_works`), so that one sweep measures both.
    let (policy, submitter) = match policy.strip_suffix(SUBMITTER_SUFFIX) {
        Some(p) => (p, Some(true)),
        None => (policy, None),
    };
    let mut builder = Runtime::builder()
        .workers(workers)
        .policy(policy)
        .app("taskbench")
        .trace(sink);
    if let Some(on) = submitter {
        builder = builder.submitter_works(on);
    }
    let rt = builder.build()?;

    let mut handles: Vec<Vec<Handle<PointOutput>>> = Vec::new();
    for g in graphs {
        let n = (g.nb_fields * g.max_width) as usize;
        let bytes = g.output_bytes_per_task;
        handles.push(
            (0..n)
                .map(|_| rt.register_bytes(PointOutput::new(bytes), bytes as u64))
                .collect(),
        );
    }
    let states: Arc<[GraphState]> = graphs
        .iter()
        .map(|g| GraphState {
            graph: g.clone(),
            deps: DepTable::new(g),
            sums: Checksums::new(g),
        })
        .collect();
    let mut by_kind: Vec<(KernelType, Codelet)> = Vec::new();
    let codelets: Vec<Codelet> = graphs
        .iter()
        .map(|g| {
            let kind = g.kernel.kind;
            if let Some((_, cl)) = by_kind.iter().find(|(k, _)| *k == kind) {
                return cl.clone();
            }
            let cl = point_codelet(kind, states.clone());
            by_kind.push((kind, cl.clone()));
            cl
        })
        .collect();

    // The workers parked while the data was registered: wake them first, as rayon's
    // pool, started just before its timer, is awake (see `baselines::run_rayon`).
    rt.warm_up();
    let start = Instant::now();
    let max_steps = graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
    for t in 0..max_steps {
        for (gi, ((st, hs), cl)) in states.iter().zip(&handles).zip(&codelets).enumerate() {
            let g = &st.graph;
            if t >= g.timesteps {
                continue;
            }
            let w = g.max_width;
            let field = |t: i64| (t % g.nb_fields) * w;
            let offset = g.offset_at_timestep(t);
            for x in offset..offset + g.width_at_timestep(t) {
                let mut task = Task::new(cl).w(&hs[(field(t) + x) as usize]);
                for d in st.deps.inputs(g, t, x) {
                    task = task.r(&hs[(field(t - 1) + d) as usize]);
                }
                rt.submit(task.arg(PointArg {
                    t,
                    // Each point has a registered handle: 2^31 of them would not fit in
                    // memory, so neither index can overflow.
                    x: i32::try_from(x).expect("a point index fits in 32 bits"),
                    graph: u32::try_from(gi).expect("a graph index fits in 32 bits"),
                }))?;
            }
        }
    }
    rt.wait_all()?;
    let elapsed = start.elapsed();

    let (checksum, tasks_executed) = combine(states.iter().map(|s| s.sums.finish()));
    rt.shutdown()?;
    if let (Some(w), Some(p)) = (writer, trace) {
        w.finish().map_err(|source| TaskBenchError::Trace {
            path: p.to_path_buf(),
            source: Box::new(source),
        })?;
    }
    Ok(BenchOutcome {
        elapsed,
        checksum: Some(checksum),
        tasks_executed,
    })
}
