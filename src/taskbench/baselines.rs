//! The same task graphs without a task runtime, as baselines measured beside taskwatt:
//!
//! - `rayon`: a dataflow executor on a rayon pool. Each task has an atomic count of its
//!   unfinished inputs; a finishing task decrements its dependents' counts (found with
//!   Task Bench's reverse dependencies) and spawns, in the scope, those that reach zero.
//!   No data inference, no scheduler policy: the lower bound of what a runtime adds.
//! - `sequential`: one thread, timestep by timestep, two rows of outputs per graph.
//!
//! Both run the exact task body of the taskwatt run ([`execute_point`]), so checksums
//! agree, and both time the same span: the graph's execution, not pool start-up.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use super::error::TaskBenchError;
use super::graph::TaskGraph;
use super::point::{combine, execute_point, Checksums, DepTable, PointOutput};
use super::system::RunOutcome;

/// One graph's state under rayon: every task's output, written once, and its count of
/// unfinished inputs.
struct DataflowGraph<'a> {
    graph: &'a TaskGraph,
    deps: DepTable,
    sums: Checksums,
    outputs: Vec<OnceLock<PointOutput>>,
    pending: Vec<AtomicU32>,
}

impl DataflowGraph<'_> {
    fn index(&self, t: i64, x: i64) -> usize {
        (t * self.graph.max_width + x) as usize
    }

    /// Runs task `(t, x)`, then releases its dependents.
    fn run_task<'s>(&'s self, scope: &rayon::Scope<'s>, t: i64, x: i64) {
        let g = self.graph;
        let inputs = self.deps.inputs(g, t, x).map(|d| {
            let out = self.outputs[self.index(t - 1, d)].get();
            (
                d,
                out.expect("a task runs only after its inputs are written"),
            )
        });
        let mut out = PointOutput::new(g.output_bytes_per_task);
        let h = execute_point(g, t, x, inputs, &mut out);
        self.sums.record(t, x, h);
        if self.outputs[self.index(t, x)].set(out).is_err() {
            unreachable!("task ({t}, {x}) ran twice");
        }
        for succ in self.deps.outputs(g, t, x) {
            // AcqRel: the release publishes this task's output to whichever task sees
            // the count reach zero; that task's acquire makes all its inputs visible.
            if self.pending[self.index(t + 1, succ)].fetch_sub(1, Ordering::AcqRel) == 1 {
                scope.spawn(move |s| self.run_task(s, t + 1, succ));
            }
        }
    }
}

/// Runs `graphs` on a rayon pool of `workers` threads.
pub(crate) fn run_rayon(
    graphs: &[TaskGraph],
    workers: usize,
) -> Result<RunOutcome, TaskBenchError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|i| format!("taskbench-rayon-{i}"))
        .build()
        .map_err(|e| TaskBenchError::TaskFailed {
            system: "rayon".into(),
            message: format!("cannot start the rayon pool: {e}"),
        })?;
    let states: Vec<DataflowGraph> = graphs
        .iter()
        .map(|g| {
            let n = (g.timesteps * g.max_width) as usize;
            DataflowGraph {
                graph: g,
                deps: DepTable::new(g),
                sums: Checksums::new(g),
                outputs: (0..n).map(|_| OnceLock::new()).collect(),
                pending: (0..n).map(|_| AtomicU32::new(0)).collect(),
            }
        })
        .collect();

    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            for st in &states {
                let g = st.graph;
                for t in 0..g.timesteps {
                    let offset = g.offset_at_timestep(t);
                    for x in offset..offset + g.width_at_timestep(t) {
                        let n = st.deps.inputs(g, t, x).count() as u32;
                        st.pending[st.index(t, x)].store(n, Ordering::Relaxed);
                    }
                }
            }
            // Roots are spawned only once every count is set: a root finishing early
            // must not decrement a count still to be stored.
            for st in &states {
                let g = st.graph;
                for t in 0..g.timesteps {
                    let offset = g.offset_at_timestep(t);
                    for x in offset..offset + g.width_at_timestep(t) {
                        if st.pending[st.index(t, x)].load(Ordering::Relaxed) == 0 {
                            s.spawn(move |s| st.run_task(s, t, x));
                        }
                    }
                }
            }
        })
    }));
    let elapsed = start.elapsed();
    if let Err(panic) = result {
        return Err(TaskBenchError::TaskFailed {
            system: "rayon".into(),
            message: panic_message(&panic),
        });
    }
    let (checksum, tasks_executed) = combine(states.iter().map(|s| s.sums.finish()));
    Ok(RunOutcome {
        elapsed,
        checksum: Some(checksum),
        tasks_executed,
    })
}

/// Runs `graphs` on the calling thread, timestep by timestep (graphs interleaved).
pub(crate) fn run_sequential(graphs: &[TaskGraph]) -> Result<RunOutcome, TaskBenchError> {
    struct Rows<'a> {
        graph: &'a TaskGraph,
        deps: DepTable,
        sums: Checksums,
        rows: [Vec<PointOutput>; 2],
    }
    let mut states: Vec<Rows> = graphs
        .iter()
        .map(|g| {
            let row = vec![PointOutput::new(g.output_bytes_per_task); g.max_width as usize];
            Rows {
                graph: g,
                deps: DepTable::new(g),
                sums: Checksums::new(g),
                rows: [row.clone(), row],
            }
        })
        .collect();
    let max_steps = graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);

    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        for t in 0..max_steps {
            for st in states.iter_mut() {
                let g = st.graph;
                if t >= g.timesteps {
                    continue;
                }
                // Row t % 2 is written, row (t - 1) % 2 read.
                let [even, odd] = &mut st.rows;
                let (prev, cur) = if t % 2 == 0 {
                    (&*odd, even)
                } else {
                    (&*even, odd)
                };
                let offset = g.offset_at_timestep(t);
                for x in offset..offset + g.width_at_timestep(t) {
                    let inputs = st.deps.inputs(g, t, x).map(|d| (d, &prev[d as usize]));
                    let h = execute_point(g, t, x, inputs, &mut cur[x as usize]);
                    st.sums.record(t, x, h);
                }
            }
        }
    }));
    let elapsed = start.elapsed();
    if let Err(panic) = result {
        return Err(TaskBenchError::TaskFailed {
            system: "sequential".into(),
            message: panic_message(&panic),
        });
    }
    let (checksum, tasks_executed) = combine(states.iter().map(|s| s.sums.finish()));
    Ok(RunOutcome {
        elapsed,
        checksum: Some(checksum),
        tasks_executed,
    })
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a task panicked".into())
}
