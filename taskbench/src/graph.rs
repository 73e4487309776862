//! The task graph of Task Bench (Slaughter et al., "Task Bench: A Parameterized Benchmark
//! for Evaluating Parallel Runtime Performance", SC 2020): `timesteps` rows of at most
//! `max_width` points; the points of row `t` depend on points of row `t - 1` through one of
//! the dependence patterns below.
//!
//! Every function here has the same definition as the method of the same name of
//! `TaskGraph` in Task Bench's core/core.cc, so that task counts, dependency counts and
//! FLOP counts agree with Task Bench's and its METG scripts apply unchanged. Points and
//! timesteps are `i64` because Task Bench uses C `long`. Intervals are inclusive
//! `(first, last)` pairs, as Task Bench's `std::pair<long, long>`.

use serde::Serialize;

use super::error::TaskBenchError;
use super::kernel::Kernel;
use super::random::random_uniform;

/// A dependence pattern: which points of timestep `t - 1` a point of timestep `t` reads.
/// Serialised by its Task Bench name ([`Dependence::name`]: `stencil_1d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dependence {
    /// No dependencies at all.
    Trivial,
    /// Each point depends on the same point of the previous timestep.
    NoComm,
    /// Point `x` depends on `x - 1`, `x`, `x + 1` (clamped to the graph).
    Stencil1d,
    /// As `Stencil1d`, wrapping around at both ends.
    Stencil1dPeriodic,
    /// Diagonal wavefront: the width grows then shrinks, `x` depends on `x - 1` and `x`.
    Dom,
    /// A binary tree fanning out: `x` depends on `x / 2`; width doubles each timestep.
    Tree,
    /// Butterfly: `x` depends on `x - 2^k`, `x`, `x + 2^k`, `k` cycling over log2(width).
    Fft,
    /// Each point depends on every point.
    AllToAll,
    /// `x` depends on the `radix` points around it.
    Nearest,
    /// `x` depends on `radix` points spread across the width, shifted each timestep.
    Spread,
    /// As `Nearest`, keeping each dependency with probability `fraction_connected`.
    RandomNearest,
}

impl Serialize for Dependence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Dependence {
    /// Every pattern implemented, in Task Bench's (alphabetical) listing order.
    pub const ALL: [Dependence; 11] = [
        Dependence::AllToAll,
        Dependence::Dom,
        Dependence::Fft,
        Dependence::Nearest,
        Dependence::NoComm,
        Dependence::RandomNearest,
        Dependence::Spread,
        Dependence::Stencil1d,
        Dependence::Stencil1dPeriodic,
        Dependence::Tree,
        Dependence::Trivial,
    ];

    /// Task Bench's name (`-type NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Dependence::Trivial => "trivial",
            Dependence::NoComm => "no_comm",
            Dependence::Stencil1d => "stencil_1d",
            Dependence::Stencil1dPeriodic => "stencil_1d_periodic",
            Dependence::Dom => "dom",
            Dependence::Tree => "tree",
            Dependence::Fft => "fft",
            Dependence::AllToAll => "all_to_all",
            Dependence::Nearest => "nearest",
            Dependence::Spread => "spread",
            Dependence::RandomNearest => "random_nearest",
        }
    }

    /// The pattern named `name`, or an error listing the valid names.
    pub fn from_name(name: &str) -> Result<Dependence, TaskBenchError> {
        Dependence::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| TaskBenchError::UnknownPattern {
                name: name.to_string(),
                valid: Dependence::ALL.map(Dependence::name).join(", "),
            })
    }

    /// Whether the pattern takes a `-period` (Task Bench's `needs_period`).
    pub fn needs_period(self) -> bool {
        matches!(self, Dependence::Spread | Dependence::RandomNearest)
    }

    /// Whether the pattern reads `-radix`.
    pub fn needs_radix(self) -> bool {
        matches!(
            self,
            Dependence::Nearest | Dependence::Spread | Dependence::RandomNearest
        )
    }
}

impl std::fmt::Display for Dependence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One task graph: Task Bench's `task_graph_t`, with the same fields and defaults.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskGraph {
    /// Position among the graphs joined with `-and` (seeds `random_nearest`).
    pub graph_index: i64,
    /// Number of timesteps (`-steps`).
    pub timesteps: i64,
    /// Number of points per timestep, at most (`-width`).
    pub max_width: i64,
    /// The dependence pattern (`-type`).
    pub dependence: Dependence,
    /// Dependencies per point in nearest/spread/random_nearest (`-radix`).
    pub radix: i64,
    /// Number of dependence sets in spread/random_nearest (`-period`); -1 until
    /// [`TaskGraph::finish`] sets Task Bench's default.
    pub period: i64,
    /// Probability of keeping each dependency in random_nearest (`-fraction`).
    pub fraction_connected: f64,
    /// What each task computes.
    pub kernel: Kernel,
    /// Bytes each task writes and its dependents read (`-output`, >= 16).
    pub output_bytes_per_task: usize,
    /// Scratch bytes of each running task, for memory_bound (`-scratch`).
    pub scratch_bytes_per_task: usize,
    /// Output fields per point: task `(t, x)` writes field `t % nb_fields` (`-field`);
    /// 0 until [`TaskGraph::finish`] sets Task Bench's default, `timesteps`.
    pub nb_fields: i64,
}

/// The widest graph accepted, in points per time step: Task Bench's own runs use up to a
/// few thousand, and the checks and buffers grow with it.
pub(super) const MAX_WIDTH: i64 = 1 << 24;
/// Tasks in one graph (-steps x -width): as many as one `taskwatt run` takes.
pub(super) const MAX_GRAPH_TASKS: u64 = 1_000_000_000;

impl TaskGraph {
    /// Task Bench's `default_graph(graph_index)`: 4 x 4, trivial, radix 3, empty kernel,
    /// 16 output bytes.
    pub fn new(graph_index: i64) -> TaskGraph {
        TaskGraph {
            graph_index,
            timesteps: 4,
            max_width: 4,
            dependence: Dependence::Trivial,
            radix: 3,
            period: -1,
            fraction_connected: 0.25,
            kernel: Kernel::default(),
            output_bytes_per_task: 16,
            scratch_bytes_per_task: 0,
            nb_fields: 0,
        }
    }

    /// Fills the defaults Task Bench fills after parsing (period 3 for the patterns that
    /// need one, else 0; `nb_fields = timesteps`), then checks the graph.
    pub fn finish(mut self) -> Result<TaskGraph, TaskBenchError> {
        if self.period < 0 {
            self.period = if self.dependence.needs_period() { 3 } else { 0 };
        }
        if self.nb_fields == 0 {
            self.nb_fields = self.timesteps;
        }
        self.check()?;
        Ok(self)
    }

    fn invalid(&self, reason: String) -> TaskBenchError {
        TaskBenchError::InvalidGraph {
            graph: self.graph_index as usize + 1,
            reason,
        }
    }

    /// Task Bench's `App::check` for one graph, plus the conditions under which Task Bench
    /// would divide by zero or assert, reported as errors instead.
    pub fn check(&self) -> Result<(), TaskBenchError> {
        let name = self.dependence.name();
        if self.timesteps <= 0 || self.max_width <= 0 {
            return Err(self.invalid("-steps and -width must be > 0".into()));
        }
        if self.max_width > MAX_WIDTH {
            return Err(self.invalid(format!(
                "-width {}: at most {MAX_WIDTH} points per time step are supported (each \
                 point has its own buffers and task per step)",
                self.max_width
            )));
        }
        let tasks = self.timesteps as u128 * self.max_width as u128;
        if tasks > MAX_GRAPH_TASKS as u128 {
            return Err(self.invalid(format!(
                "-steps {} x -width {} make {tasks} tasks, more than the {MAX_GRAPH_TASKS} a \
                 graph takes (its run and trace grow with them); use fewer -steps",
                self.timesteps, self.max_width
            )));
        }
        if self.dependence.needs_period() && self.period == 0 {
            return Err(self.invalid(format!(
                "pattern `{name}` requires a non-zero period (specify with -period)"
            )));
        }
        if !self.dependence.needs_period() && self.period != 0 {
            return Err(self.invalid(format!(
                "pattern `{name}` does not support a user-configurable period: drop -period"
            )));
        }
        if self.dependence == Dependence::Spread && self.radix == 0 {
            return Err(self.invalid("pattern `spread` needs -radix >= 1".into()));
        }
        if self.dependence == Dependence::Spread {
            // Task Bench: required to avoid wrapping around with later dependence sets.
            let spread = (self.max_width + self.radix - 1) / self.radix;
            if self.period > spread {
                return Err(self.invalid(format!(
                    "pattern `spread` requires a period that is at most {spread} \
                     (ceil(width / radix)); got -period {}",
                    self.period
                )));
            }
        }
        if self.dependence == Dependence::Fft && self.max_width < 2 {
            // ceil(log2(1)) = 0 dependence sets: Task Bench divides by zero.
            return Err(self.invalid("pattern `fft` needs -width >= 2".into()));
        }
        if self.nb_fields < 2 && self.timesteps > 1 {
            return Err(self.invalid(format!(
                "-field {} would make a task read and write the same data: use -field >= 2",
                self.nb_fields
            )));
        }
        if self.output_bytes_per_task < 16 {
            return Err(self.invalid(format!(
                "-output {} must be >= 16",
                self.output_bytes_per_task
            )));
        }
        self.kernel
            .check(self.scratch_bytes_per_task)
            .map_err(|r| self.invalid(r))?;
        // Task Bench's structural asserts: no duplicate dependency, and the reverse
        // dependencies mirror the dependencies.
        for dset in 0..self.max_dependence_sets() {
            let mut forward = vec![Vec::new(); self.max_width as usize];
            for point in 0..self.max_width {
                let deps = &mut forward[point as usize];
                for (first, last) in self.dependencies(dset, point) {
                    for dp in first..=last {
                        if deps.contains(&dp) {
                            return Err(self.invalid(format!(
                                "point {point} depends twice on point {dp} (dependence set \
                                 {dset}): the parameters make the pattern degenerate"
                            )));
                        }
                        deps.push(dp);
                    }
                }
            }
            for point in 0..self.max_width {
                for (first, last) in self.reverse_dependencies(dset, point) {
                    for rdp in first..=last {
                        if !forward[rdp as usize].contains(&point) {
                            return Err(self.invalid(format!(
                                "reverse dependency {point} -> {rdp} has no forward \
                                 dependency (dependence set {dset})"
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// First point of timestep `t` (0 before the first timestep).
    pub fn offset_at_timestep(&self, timestep: i64) -> i64 {
        if timestep < 0 {
            return 0;
        }
        match self.dependence {
            Dependence::Dom => 0.max(timestep + self.max_width - self.timesteps),
            _ => 0,
        }
    }

    /// Number of points of timestep `t` (0 before the first timestep).
    pub fn width_at_timestep(&self, timestep: i64) -> i64 {
        if timestep < 0 {
            return 0;
        }
        match self.dependence {
            Dependence::Dom => self
                .max_width
                .min((timestep + 1).min(self.timesteps - timestep)),
            Dependence::Tree => self.max_width.min(1i64 << timestep.min(62)),
            _ => self.max_width,
        }
    }

    /// Number of distinct dependence sets the pattern cycles through.
    pub fn max_dependence_sets(&self) -> i64 {
        match self.dependence {
            Dependence::Fft => (self.max_width as f64).log2().ceil() as i64,
            Dependence::Spread | Dependence::RandomNearest => self.period,
            _ => 1,
        }
    }

    /// The pattern repeats with this period in timesteps.
    pub fn timestep_period(&self) -> i64 {
        self.max_dependence_sets()
    }

    /// The dependence set used between timestep `t - 1` and `t`.
    pub fn dependence_set_at_timestep(&self, timestep: i64) -> i64 {
        match self.dependence {
            Dependence::Fft => {
                let n = self.max_dependence_sets();
                (timestep + n - 1) % n
            }
            Dependence::Spread | Dependence::RandomNearest => timestep % self.max_dependence_sets(),
            _ => 0,
        }
    }

    /// The points of the previous timestep that `point` depends on, as inclusive
    /// intervals, before clamping to that timestep's offset and width.
    pub fn dependencies(&self, dset: i64, point: i64) -> Vec<(i64, i64)> {
        let w = self.max_width;
        match self.dependence {
            Dependence::Trivial => vec![],
            Dependence::NoComm => vec![(point, point)],
            Dependence::Stencil1d => vec![(0.max(point - 1), (point + 1).min(w - 1))],
            Dependence::Stencil1dPeriodic => periodic(point, w),
            Dependence::Dom => vec![(0.max(point - 1), point)],
            Dependence::Tree => vec![(point / 2, point / 2)],
            Dependence::Fft => butterfly(point, dset, w),
            Dependence::AllToAll => vec![(0, w - 1)],
            Dependence::Nearest if self.radix > 0 => vec![(
                0.max(point - self.radix / 2),
                (point + (self.radix - 1) / 2).min(w - 1),
            )],
            Dependence::Nearest => vec![],
            Dependence::Spread => (0..self.radix)
                .map(|i| {
                    let shift = if i > 0 { dset } else { 0 };
                    let dep = (point + i * w / self.radix + shift) % w;
                    (dep, dep)
                })
                .collect(),
            Dependence::RandomNearest => self.random_runs(
                dset,
                point,
                0.max(point - self.radix / 2),
                (point + (self.radix - 1) / 2).min(w - 1),
                false,
            ),
        }
    }

    /// The points of the next timestep that depend on `point` (the mirror of
    /// [`TaskGraph::dependencies`]), as inclusive intervals, before clamping.
    pub fn reverse_dependencies(&self, dset: i64, point: i64) -> Vec<(i64, i64)> {
        let w = self.max_width;
        match self.dependence {
            Dependence::Trivial => vec![],
            Dependence::NoComm => vec![(point, point)],
            Dependence::Stencil1d => vec![(0.max(point - 1), (point + 1).min(w - 1))],
            Dependence::Stencil1dPeriodic => periodic(point, w),
            Dependence::Dom => vec![(point, (w - 1).min(point + 1))],
            Dependence::Tree => {
                let (child1, child2) = (point * 2, point * 2 + 1);
                if child2 < w {
                    vec![(child1, child2)]
                } else if child1 < w {
                    vec![(child1, child1)]
                } else {
                    vec![]
                }
            }
            Dependence::Fft => butterfly(point, dset, w),
            Dependence::AllToAll => vec![(0, w - 1)],
            Dependence::Nearest if self.radix > 0 => vec![(
                0.max(point - (self.radix - 1) / 2),
                (point + self.radix / 2).min(w - 1),
            )],
            Dependence::Nearest => vec![],
            Dependence::Spread => (0..self.radix)
                .map(|i| {
                    let shift = if i > 0 { dset } else { 0 };
                    let dep = (point - i * w / self.radix - shift).rem_euclid(w);
                    (dep, dep)
                })
                .collect(),
            Dependence::RandomNearest => self.random_runs(
                dset,
                point,
                0.max(point - (self.radix - 1) / 2),
                (point + self.radix / 2).min(w - 1),
                true,
            ),
        }
    }

    /// random_nearest: the runs of kept points in `first..=last`. Point `i` is kept when
    /// the hash of (graph, radix, dset, dependent, dependency) is below
    /// `fraction_connected`, or when it is the point itself (so each point depends at
    /// least on itself). The hash key names the dependency first, then the dependent, in
    /// both directions, so that forward and reverse agree.
    fn random_runs(
        &self,
        dset: i64,
        point: i64,
        first: i64,
        last: i64,
        reverse: bool,
    ) -> Vec<(i64, i64)> {
        let mut runs = Vec::new();
        let mut run_start = -1;
        for i in first..=last {
            let key = if reverse {
                [self.graph_index, self.radix, dset, point, i]
            } else {
                [self.graph_index, self.radix, dset, i, point]
            };
            let include =
                random_uniform(&key) < self.fraction_connected || (self.radix > 0 && i == point);
            if include {
                if run_start < 0 {
                    run_start = i;
                }
            } else {
                if run_start >= 0 {
                    runs.push((run_start, i - 1));
                }
                run_start = -1;
            }
        }
        if run_start >= 0 {
            runs.push((run_start, last));
        }
        runs
    }
}

fn periodic(point: i64, w: i64) -> Vec<(i64, i64)> {
    let mut deps = vec![(0.max(point - 1), (point + 1).min(w - 1))];
    if point - 1 < 0 {
        deps.push((w - 1, w - 1));
    }
    if point + 1 >= w {
        deps.push((0, 0));
    }
    deps
}

fn butterfly(point: i64, dset: i64, w: i64) -> Vec<(i64, i64)> {
    let mut deps = Vec::with_capacity(3);
    let d1 = point - (1i64 << dset);
    let d2 = point + (1i64 << dset);
    if d1 >= 0 {
        deps.push((d1, d1));
    }
    deps.push((point, point));
    if d2 < w {
        deps.push((d2, d2));
    }
    deps
}

/// Task Bench's `clamp` in `report_timing`: the part of `[start, end]` inside
/// `[min, max]`, as an empty interval `(x, x - 1)` when there is none.
pub(crate) fn clamp(start: i64, end: i64, min: i64, max: i64) -> (i64, i64) {
    if end < min {
        (min, min - 1)
    } else if start > max {
        (max, max - 1)
    } else {
        (start.max(min), end.min(max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(dep: Dependence, width: i64, radix: i64) -> TaskGraph {
        let mut g = TaskGraph::new(0);
        g.dependence = dep;
        g.max_width = width;
        g.timesteps = 8;
        g.radix = radix;
        g.finish().unwrap()
    }

    fn points(intervals: Vec<(i64, i64)>) -> Vec<i64> {
        intervals.into_iter().flat_map(|(a, b)| a..=b).collect()
    }

    #[test]
    fn stencil_1d_clamps_at_both_ends() {
        let g = graph(Dependence::Stencil1d, 4, 3);
        assert_eq!(points(g.dependencies(0, 0)), [0, 1]);
        assert_eq!(points(g.dependencies(0, 2)), [1, 2, 3]);
        assert_eq!(points(g.dependencies(0, 3)), [2, 3]);
        assert_eq!(points(g.reverse_dependencies(0, 3)), [2, 3]);
    }

    #[test]
    fn stencil_1d_periodic_wraps() {
        let g = graph(Dependence::Stencil1dPeriodic, 5, 3);
        assert_eq!(points(g.dependencies(0, 0)), [0, 1, 4]);
        assert_eq!(points(g.dependencies(0, 4)), [3, 4, 0]);
        assert_eq!(points(g.dependencies(0, 2)), [1, 2, 3]);
    }

    #[test]
    fn nearest_takes_radix_points_around_the_point() {
        // radix 5: x - 2 ..= x + 2; radix 4: x - 2 ..= x + 1 (Task Bench rounds this way).
        let g = graph(Dependence::Nearest, 10, 5);
        assert_eq!(points(g.dependencies(0, 5)), [3, 4, 5, 6, 7]);
        assert_eq!(points(g.dependencies(0, 0)), [0, 1, 2]);
        let g = graph(Dependence::Nearest, 10, 4);
        assert_eq!(points(g.dependencies(0, 5)), [3, 4, 5, 6]);
        assert_eq!(points(g.reverse_dependencies(0, 5)), [4, 5, 6, 7]);
        assert_eq!(points(g.dependencies(0, 9)), [7, 8, 9]);
        let g = graph(Dependence::Nearest, 10, 0);
        assert!(g.dependencies(0, 5).is_empty());
    }

    #[test]
    fn spread_spaces_dependencies_by_width_over_radix_and_shifts_per_set() {
        // width 12, radix 3, period 3: offsets 0, 4 + dset, 8 + dset (mod 12).
        let mut g = TaskGraph::new(0);
        g.dependence = Dependence::Spread;
        g.max_width = 12;
        g.timesteps = 8;
        let g = g.finish().unwrap();
        assert_eq!(g.period, 3);
        assert_eq!(points(g.dependencies(0, 1)), [1, 5, 9]);
        assert_eq!(points(g.dependencies(1, 1)), [1, 6, 10]);
        assert_eq!(points(g.dependencies(2, 10)), [10, 4, 8]);
        assert_eq!(points(g.reverse_dependencies(2, 4)), [4, 10, 6]);
        assert_eq!(g.dependence_set_at_timestep(4), 1);
    }

    #[test]
    fn spread_rejects_a_period_that_would_wrap() {
        let mut g = TaskGraph::new(0);
        g.dependence = Dependence::Spread;
        g.max_width = 4;
        g.radix = 3;
        g.period = 3; // ceil(4 / 3) = 2
        assert!(g.finish().unwrap_err().to_string().contains("at most 2"));
    }

    #[test]
    fn dom_and_tree_change_width_per_timestep() {
        let g = graph(Dependence::Dom, 4, 3); // 8 steps
        let widths: Vec<i64> = (0..8).map(|t| g.width_at_timestep(t)).collect();
        let offsets: Vec<i64> = (0..8).map(|t| g.offset_at_timestep(t)).collect();
        assert_eq!(widths, [1, 2, 3, 4, 4, 3, 2, 1]);
        assert_eq!(offsets, [0, 0, 0, 0, 0, 1, 2, 3]);
        assert_eq!(points(g.dependencies(0, 2)), [1, 2]);
        let g = graph(Dependence::Tree, 6, 3);
        let widths: Vec<i64> = (0..5).map(|t| g.width_at_timestep(t)).collect();
        assert_eq!(widths, [1, 2, 4, 6, 6]);
        assert_eq!(points(g.dependencies(0, 5)), [2]);
        assert_eq!(points(g.reverse_dependencies(0, 2)), [4, 5]);
        assert_eq!(points(g.reverse_dependencies(0, 3)), [] as [i64; 0]);
    }

    #[test]
    fn fft_butterflies_with_distance_two_to_the_set() {
        let g = graph(Dependence::Fft, 8, 3);
        assert_eq!(g.max_dependence_sets(), 3);
        // Timestep 1 uses set 0, timestep 2 set 1, timestep 3 set 2, timestep 4 set 0.
        let sets: Vec<i64> = (1..5).map(|t| g.dependence_set_at_timestep(t)).collect();
        assert_eq!(sets, [0, 1, 2, 0]);
        assert_eq!(points(g.dependencies(2, 5)), [1, 5]);
        assert_eq!(points(g.dependencies(1, 3)), [1, 3, 5]);
    }

    #[test]
    fn all_to_all_and_trivial_and_no_comm() {
        assert_eq!(
            points(graph(Dependence::AllToAll, 3, 3).dependencies(0, 1)),
            [0, 1, 2]
        );
        assert!(graph(Dependence::Trivial, 3, 3)
            .dependencies(0, 1)
            .is_empty());
        assert_eq!(
            points(graph(Dependence::NoComm, 3, 3).dependencies(0, 1)),
            [1]
        );
    }

    #[test]
    fn random_nearest_keeps_self_and_mirrors() {
        let mut g = TaskGraph::new(1);
        g.dependence = Dependence::RandomNearest;
        g.max_width = 16;
        g.radix = 5;
        g.fraction_connected = 0.5;
        let g = g.finish().unwrap(); // check() verifies forward/reverse mirroring
        for p in 0..16 {
            let deps = points(g.dependencies(0, p));
            assert!(deps.contains(&p));
            assert!(deps.iter().all(|d| (p - 2..=p + 2).contains(d)));
        }
        // With fraction 1 every neighbour is kept; with 0 only the point itself.
        let mut all = g.clone();
        all.fraction_connected = 1.0;
        assert_eq!(points(all.dependencies(0, 7)), [5, 6, 7, 8, 9]);
        let mut none = g.clone();
        none.fraction_connected = 0.0;
        assert_eq!(points(none.dependencies(0, 7)), [7]);
    }

    #[test]
    fn clamp_matches_task_bench() {
        assert_eq!(clamp(2, 5, 0, 3), (2, 3));
        assert_eq!(clamp(-1, 1, 0, 3), (0, 1));
        assert_eq!(clamp(5, 6, 0, 3), (3, 2));
        assert_eq!(clamp(-3, -1, 0, 3), (0, -1));
    }

    #[test]
    fn names_round_trip_and_unknown_lists_valid() {
        for d in Dependence::ALL {
            assert_eq!(Dependence::from_name(d.name()).unwrap(), d);
        }
        let e = Dependence::from_name("stencil_2d").unwrap_err().to_string();
        assert!(
            e.contains("stencil_2d") && e.contains("stencil_1d_periodic"),
            "{e}"
        );
    }
}
