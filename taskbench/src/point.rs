//! What one task of the graph does, the same under every system: Task Bench's
//! `execute_point` (check the inputs, write the output, run the kernel), plus a hash that
//! chains each output to its inputs so that systems can be compared by one checksum.

use std::sync::atomic::{AtomicU64, Ordering};

use super::graph::TaskGraph;

/// The data one task writes and its dependents read: Task Bench's output buffer of
/// `output_bytes_per_task` bytes, viewed as `(timestep, point)` pairs, plus the chained
/// hash of this task and its inputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointOutput {
    /// `output_bytes / 16` copies of `(timestep, point)` of the task that wrote it.
    pub pairs: Vec<[i64; 2]>,
    /// Hash of (graph, timestep, point) and of the inputs' hashes, in dependency order.
    pub hash: u64,
}

impl PointOutput {
    /// An unwritten output of `output_bytes` (pairs of -1, which no task writes).
    pub fn new(output_bytes: usize) -> PointOutput {
        PointOutput {
            pairs: vec![[-1, -1]; (output_bytes / 16).max(1)],
            hash: 0,
        }
    }
}

/// Runs task `(t, x)` of `graph`: checks every input holds `(t - 1, dep)` as Task Bench
/// does (a failed check panics: the task fails, naming what it found), fills `out`, runs
/// the kernel and returns the task's hash (never 0, so a written checksum slot is
/// distinguishable from an unwritten one).
pub fn execute_point<'a>(
    graph: &TaskGraph,
    t: i64,
    x: i64,
    inputs: impl Iterator<Item = (i64, &'a PointOutput)>,
    out: &mut PointOutput,
) -> u64 {
    let mut h = mix(mix(mix(graph.graph_index as u64) ^ t as u64) ^ x as u64);
    for (dep, input) in inputs {
        for pair in &input.pairs {
            if *pair != [t - 1, dep] {
                panic!(
                    "Task Bench detected a corrupted value in task (graph {} timestep {t} \
                     point {x}): input from point {dep} holds (timestep {}, point {}), \
                     expected (timestep {}, point {dep})",
                    graph.graph_index,
                    pair[0],
                    pair[1],
                    t - 1
                );
            }
        }
        h = mix(h.rotate_left(17) ^ input.hash);
    }
    out.pairs.fill([t, x]);
    let h = h | 1;
    out.hash = h;
    let k = graph.kernel;
    std::hint::black_box(k.execute(graph.graph_index, t, x, graph.scratch_bytes_per_task));
    h
}

/// splitmix64's finaliser: a cheap bijective mix.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The dependencies of every point materialised once per dependence set (the pattern
/// repeats, so submission does not recompute intervals, nor the hashes of
/// random_nearest), in the order Task Bench lists them.
#[derive(Debug)]
pub(crate) struct DepTable {
    width: usize,
    /// `forward[dset * width + x]`: start and end in `points`.
    forward: Vec<(u32, u32)>,
    reverse: Vec<(u32, u32)>,
    points: Vec<i64>,
}

impl DepTable {
    pub(crate) fn new(g: &TaskGraph) -> DepTable {
        let width = g.max_width as usize;
        let sets = g.max_dependence_sets().max(1);
        let mut points = Vec::new();
        let mut table = |f: &dyn Fn(i64, i64) -> Vec<(i64, i64)>| {
            let mut ranges = Vec::with_capacity(sets as usize * width);
            for dset in 0..sets {
                for x in 0..g.max_width {
                    let start = points.len() as u32;
                    for (a, b) in f(dset, x) {
                        points.extend(a..=b);
                    }
                    ranges.push((start, points.len() as u32));
                }
            }
            ranges
        };
        let forward = table(&|d, x| g.dependencies(d, x));
        let reverse = table(&|d, x| g.reverse_dependencies(d, x));
        DepTable {
            width,
            forward,
            reverse,
            points,
        }
    }

    /// The points of timestep `t - 1` that task `(t, x)` reads, clamped to that
    /// timestep's offset and width (as Task Bench's `execute_point` and `report_timing`).
    pub(crate) fn inputs<'a>(
        &'a self,
        g: &TaskGraph,
        t: i64,
        x: i64,
    ) -> impl Iterator<Item = i64> + Clone + 'a {
        let (range, lo, hi) = if t == 0 {
            ((0, 0), 0, 0)
        } else {
            let dset = g.dependence_set_at_timestep(t) as usize;
            let lo = g.offset_at_timestep(t - 1);
            (
                self.forward[dset * self.width + x as usize],
                lo,
                lo + g.width_at_timestep(t - 1),
            )
        };
        self.points[range.0 as usize..range.1 as usize]
            .iter()
            .copied()
            .filter(move |p| (lo..hi).contains(p))
    }

    /// The tasks of timestep `t + 1` that read task `(t, x)`, clamped likewise.
    pub(crate) fn outputs<'a>(
        &'a self,
        g: &TaskGraph,
        t: i64,
        x: i64,
    ) -> impl Iterator<Item = i64> + 'a {
        let (range, lo, hi) = if t + 1 >= g.timesteps {
            ((0, 0), 0, 0)
        } else {
            let dset = g.dependence_set_at_timestep(t + 1) as usize;
            let lo = g.offset_at_timestep(t + 1);
            (
                self.reverse[dset * self.width + x as usize],
                lo,
                lo + g.width_at_timestep(t + 1),
            )
        };
        self.points[range.0 as usize..range.1 as usize]
            .iter()
            .copied()
            .filter(move |p| (lo..hi).contains(p))
    }

    /// The most inputs any task has.
    pub(crate) fn max_inputs(&self) -> usize {
        self.forward
            .iter()
            .map(|(a, b)| (b - a) as usize)
            .max()
            .unwrap_or(0)
    }
}

/// One slot per task of a graph (`t * width + x`), where the task stores its hash. Each
/// slot has a single writer, so relaxed stores suffice; the run's end (`wait_all`, the end
/// of a rayon scope, a join) orders them before the read.
#[derive(Debug)]
pub(crate) struct Checksums {
    width: i64,
    slots: Vec<AtomicU64>,
}

impl Checksums {
    pub(crate) fn new(g: &TaskGraph) -> Checksums {
        let n = (g.timesteps * g.max_width) as usize;
        Checksums {
            width: g.max_width,
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn record(&self, t: i64, x: i64, hash: u64) {
        self.slots[(t * self.width + x) as usize].store(hash, Ordering::Relaxed);
    }

    /// `(checksum, tasks executed)`: a hash of every slot in order, and how many were
    /// written.
    pub(crate) fn finish(&self) -> (u64, u64) {
        let mut sum = 0u64;
        let mut executed = 0;
        for s in &self.slots {
            let v = s.load(Ordering::Relaxed);
            executed += u64::from(v != 0);
            sum = mix(sum.rotate_left(5) ^ v);
        }
        (sum, executed)
    }
}

/// Combines the checksums of several graphs.
pub(crate) fn combine(sums: impl IntoIterator<Item = (u64, u64)>) -> (u64, u64) {
    sums.into_iter()
        .fold((0, 0), |(s, n), (c, e)| (mix(s ^ c), n + e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dependence;

    fn g(dep: Dependence) -> TaskGraph {
        let mut g = TaskGraph::new(0);
        g.dependence = dep;
        g.max_width = 4;
        g.timesteps = 4;
        g.finish().unwrap()
    }

    #[test]
    fn inputs_and_outputs_mirror_and_clamp() {
        let g = g(Dependence::Dom);
        let d = DepTable::new(&g);
        // 4 x 4 dom: timestep 0 is point 0, timestep 1 points 1 and 2. Point 1 reads
        // points 0 and 1 of timestep 0, of which only 0 exists; point 0 feeds points 0
        // and 1 of timestep 1, of which only 1 exists.
        assert_eq!(d.inputs(&g, 1, 1).collect::<Vec<_>>(), [0]);
        assert_eq!(d.outputs(&g, 0, 0).collect::<Vec<_>>(), [1]);
        assert_eq!(d.inputs(&g, 0, 0).count(), 0);
        assert_eq!(d.outputs(&g, 3, 0).count(), 0);
        let s = g_stencil();
        let d = DepTable::new(&s);
        assert_eq!(d.inputs(&s, 2, 0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(d.max_inputs(), 3);
    }

    fn g_stencil() -> TaskGraph {
        g(Dependence::Stencil1d)
    }

    #[test]
    fn execute_point_checks_inputs_and_chains_hashes() {
        let g = g_stencil();
        let mut a = PointOutput::new(32);
        let mut b = PointOutput::new(32);
        let ha = execute_point(&g, 0, 0, std::iter::empty(), &mut a);
        let hb = execute_point(&g, 0, 1, std::iter::empty(), &mut b);
        assert_ne!(ha, hb);
        assert_eq!(a.pairs, [[0, 0], [0, 0]]);
        let mut c = PointOutput::new(32);
        let h1 = execute_point(&g, 1, 0, [(0, &a), (1, &b)].into_iter(), &mut c);
        let h2 = execute_point(&g, 1, 0, [(0, &a), (1, &b)].into_iter(), &mut c);
        assert_eq!(h1, h2);
        let r = std::panic::catch_unwind(move || {
            let mut c = PointOutput::new(16);
            execute_point(&g, 1, 0, [(1, &a)].into_iter(), &mut c)
        });
        assert!(
            r.is_err(),
            "an input from the wrong point must fail the task"
        );
    }
}
