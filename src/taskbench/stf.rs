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
//! execution (`wait_all`), not runtime start-up or data registration.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use taskwatt_runtime::{Codelet, Handle, Runtime, Task, MAX_ACCESSES};

use super::error::TaskBenchError;
use super::graph::TaskGraph;
use super::kernel::KernelType;
use super::point::{combine, execute_point, Checksums, DepTable, PointOutput};
use super::system::RunOutcome;

/// What every task of one graph shares.
struct GraphState {
    graph: TaskGraph,
    deps: DepTable,
    sums: Checksums,
}

/// The task's `cl_arg`: which point it is.
struct PointArg {
    state: Arc<GraphState>,
    t: i64,
    x: i64,
}

/// The codelet of a kernel: buffer 0 is the output (W), buffers 1.. the inputs (R) in
/// dependency order.
fn point_codelet(kind: KernelType) -> Codelet {
    Codelet::new(kind.codelet_name()).cpu(|ctx| {
        let a = ctx.arg::<PointArg>();
        let st = &*a.state;
        let out = ctx.w::<PointOutput>(0);
        let inputs = st
            .deps
            .inputs(&st.graph, a.t, a.x)
            .enumerate()
            .map(|(i, d)| (d, ctx.r::<PointOutput>(i + 1)));
        let h = execute_point(&st.graph, a.t, a.x, inputs, out);
        st.sums.record(a.t, a.x, h);
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

/// Runs `graphs` on a fresh taskwatt runtime of `workers` workers under `policy`.
pub(crate) fn run(
    graphs: &[TaskGraph],
    workers: usize,
    policy: &str,
) -> Result<RunOutcome, TaskBenchError> {
    check_accesses(graphs)?;
    let rt = Runtime::builder()
        .workers(workers)
        .policy(policy)
        .app("taskbench")
        .build()?;

    let mut codelets: HashMap<KernelType, Codelet> = HashMap::new();
    let mut states = Vec::new();
    let mut handles: Vec<Vec<Handle<PointOutput>>> = Vec::new();
    for g in graphs {
        codelets
            .entry(g.kernel.kind)
            .or_insert_with(|| point_codelet(g.kernel.kind));
        let n = (g.nb_fields * g.max_width) as usize;
        let bytes = g.output_bytes_per_task;
        handles.push(
            (0..n)
                .map(|_| rt.register_bytes(PointOutput::new(bytes), bytes as u64))
                .collect(),
        );
        states.push(Arc::new(GraphState {
            graph: g.clone(),
            deps: DepTable::new(g),
            sums: Checksums::new(g),
        }));
    }

    let start = Instant::now();
    let max_steps = graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
    for t in 0..max_steps {
        for (st, hs) in states.iter().zip(&handles) {
            let g = &st.graph;
            if t >= g.timesteps {
                continue;
            }
            let cl = &codelets[&g.kernel.kind];
            let w = g.max_width;
            let field = |t: i64| (t % g.nb_fields) * w;
            let offset = g.offset_at_timestep(t);
            for x in offset..offset + g.width_at_timestep(t) {
                let mut task = Task::new(cl).w(&hs[(field(t) + x) as usize]);
                for d in st.deps.inputs(g, t, x) {
                    task = task.r(&hs[(field(t - 1) + d) as usize]);
                }
                rt.submit(task.arg(PointArg {
                    state: st.clone(),
                    t,
                    x,
                }))?;
            }
        }
    }
    rt.wait_all()?;
    let elapsed = start.elapsed();

    let (checksum, tasks_executed) = combine(states.iter().map(|s| s.sums.finish()));
    drop(rt);
    Ok(RunOutcome {
        elapsed,
        checksum,
        tasks_executed,
    })
}
