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
use super::outcome::BenchOutcome;
use super::point::{combine, execute_point, Checksums, DepTable, PointOutput};

/// One graph's state under rayon: every task's output, written once, and its count of
/// unfinished inputs.
struct DataflowGraph<'a> {
    graph: &'a TaskGraph,
    deps: DepTable,
    sums: Checksums,
    outputs: Vec<OnceLock<PointOutput>>,
    pending: Vec<AtomicU32>,
}

impl<'a> DataflowGraph<'a> {
    fn new(graph: &'a TaskGraph) -> DataflowGraph<'a> {
        let n = (graph.timesteps * graph.max_width) as usize;
        DataflowGraph {
            graph,
            deps: DepTable::new(graph),
            sums: Checksums::new(graph),
            outputs: (0..n).map(|_| OnceLock::new()).collect(),
            pending: (0..n).map(|_| AtomicU32::new(0)).collect(),
        }
    }

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

/// Sets every task's count of unfinished inputs and returns the roots (graph index,
/// timestep, point): the tasks without inputs. The roots are listed here, from the counts
/// as set, not found later by reading the counts: once a root runs, a count read later
/// may have reached zero because its task was released, and spawning that task again ran
/// it twice (seen on a loaded machine as "task (103, 1) ran twice").
fn set_counts(states: &[DataflowGraph<'_>]) -> Vec<(usize, i64, i64)> {
    let mut roots = Vec::new();
    for (gi, st) in states.iter().enumerate() {
        let g = st.graph;
        for t in 0..g.timesteps {
            let offset = g.offset_at_timestep(t);
            for x in offset..offset + g.width_at_timestep(t) {
                let n = st.deps.inputs(g, t, x).count() as u32;
                st.pending[st.index(t, x)].store(n, Ordering::Relaxed);
                if n == 0 {
                    roots.push((gi, t, x));
                }
            }
        }
    }
    roots
}

/// Runs `graphs` on a rayon pool of `workers` threads.
pub(crate) fn run_rayon(
    graphs: &[TaskGraph],
    workers: usize,
) -> Result<BenchOutcome, TaskBenchError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|i| format!("taskbench-rayon-{i}"))
        .build()
        .map_err(|e| TaskBenchError::TaskFailed {
            system: "rayon".into(),
            message: format!("cannot start the rayon pool: {e}"),
        })?;
    let states: Vec<DataflowGraph> = graphs.iter().map(DataflowGraph::new).collect();
    // Every thread started and awake before the timer, as taskwatt's workers are
    // (`Runtime::warm_up` in stf.rs): a thread still starting would be timed.
    pool.broadcast(|_| ());

    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| {
        pool.scope(|s| {
            // Every count is set before any task starts: a root finishing early must not
            // decrement a count still to be stored.
            let roots = set_counts(&states);
            for (gi, t, x) in roots {
                let st = &states[gi];
                s.spawn(move |s| st.run_task(s, t, x));
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
    Ok(BenchOutcome {
        elapsed,
        checksum: Some(checksum),
        tasks_executed,
    })
}

/// Runs `graphs` on the calling thread, timestep by timestep (graphs interleaved).
pub(crate) fn run_sequential(graphs: &[TaskGraph]) -> Result<BenchOutcome, TaskBenchError> {
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
    Ok(BenchOutcome {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dependence;

    fn graph(index: i64, dependence: Dependence, steps: i64) -> TaskGraph {
        let mut g = TaskGraph::new(index);
        g.dependence = dependence;
        g.max_width = 2;
        g.timesteps = steps;
        g.finish().unwrap()
    }

    #[test]
    fn roots_are_the_tasks_without_inputs_and_counts_are_set() {
        let graphs = [
            graph(0, Dependence::Stencil1d, 5),
            graph(1, Dependence::Trivial, 3),
        ];
        let states: Vec<DataflowGraph> = graphs.iter().map(DataflowGraph::new).collect();
        let roots = set_counts(&states);
        let mut want = vec![(0, 0, 0), (0, 0, 1)];
        want.extend((0..3).flat_map(|t| [(1, t, 0), (1, t, 1)]));
        assert_eq!(roots, want);
        // A stencil task of width 2 reads both points of the timestep before.
        assert!(states[0].pending[2..]
            .iter()
            .all(|p| p.load(Ordering::Relaxed) == 2));
    }

    #[test]
    fn every_task_runs_once_run_after_run() {
        // Before the roots were listed up front, a task released while the spawning loop
        // was still reading counts could be spawned twice (a panic, "ran twice").
        let graphs = [
            graph(0, Dependence::Stencil1d, 200),
            graph(1, Dependence::NoComm, 200),
        ];
        for _ in 0..20 {
            let out = run_rayon(&graphs, 2).unwrap();
            assert_eq!(out.tasks_executed, 800);
        }
    }
}
