//! Minimum effective task granularity, METG(50 %) (Slaughter et al., SC 2020): the
//! smallest task duration at which a system still reaches 50 % of the machine's peak.
//!
//! The sweep runs one graph at iterations 2^20, 2^19, ..., 2^4 of compute_bound. Each
//! point gives
//! - efficiency = (FLOPs / elapsed) / peak, where peak is what the machine's cores give
//!   running the compute kernel alone: one core alone for the sequential run, all the
//!   workers' cores at once for the others (see [`Peak`]);
//! - granularity = elapsed x cores / tasks (µs): the time one task occupies one core.
//!
//! METG is computed from those points exactly as Task Bench's scripts/chart_metg.py does:
//! of the points with efficiency >= 50 %, take the one with the smallest granularity; if
//! the next point (fewer iterations) has a smaller granularity, interpolate linearly, in
//! (efficiency, granularity), the granularity at exactly 50 %. Task Bench averages the
//! repetitions' elapsed times first; on a shared machine we also compute one METG per
//! repetition and report their minimum and median, and repeat the runs during which the
//! hypervisor gave our CPU time to other guests (see steal.rs).

use std::time::Instant;

use serde::Serialize;

use super::error::TaskBenchError;
use super::graph::{Dependence, TaskGraph};
use super::kernel::{compute_bound, compute_bound_impl, Kernel, KernelType};
use super::steal::CpuTicks;
use super::system::System;

/// What to sweep.
#[derive(Clone, Debug, Serialize)]
pub struct MetgConfig {
    /// The dependence pattern.
    pub pattern: Dependence,
    /// Points per timestep.
    pub width: i64,
    /// Timesteps.
    pub steps: i64,
    /// The kernel (compute_bound for Task Bench's METG).
    pub kernel: KernelType,
    /// Repetitions of every point (Task Bench uses 5).
    pub repeat: usize,
    /// Workers of the parallel systems.
    pub workers: usize,
    /// The systems, in the order of the first repetition.
    pub systems: Vec<System>,
    /// Largest iteration count, as a power of two (20).
    pub max_log2: u32,
    /// Smallest iteration count, as a power of two (4).
    pub min_log2: u32,
    /// The efficiency threshold (0.5).
    pub threshold: f64,
    /// Repeat a run during which the host stole more than this share of the CPU time
    /// (see steal.rs); `None`: never.
    pub max_steal: Option<f64>,
    /// At most this many repeats per run; the last one is kept whatever its steal.
    pub steal_retries: usize,
}

impl MetgConfig {
    /// Iteration counts of the sweep, largest first.
    pub fn iterations(&self) -> Vec<i64> {
        (self.min_log2..=self.max_log2)
            .rev()
            .map(|l| 1i64 << l)
            .collect()
    }

    /// The graph at `iterations`.
    pub fn graph(&self, iterations: i64) -> Result<TaskGraph, TaskBenchError> {
        let mut g = TaskGraph::new(0);
        g.dependence = self.pattern;
        g.max_width = self.width;
        g.timesteps = self.steps;
        g.kernel = Kernel {
            kind: self.kernel,
            iterations,
            ..Kernel::default()
        };
        g.finish()
    }

    /// Number of runs the sweep makes.
    pub fn runs(&self) -> usize {
        self.iterations().len() * self.repeat * self.systems.len()
    }
}

/// The time left in a sweep, from the runs done so far.
///
/// A run's time is nearly affine in the kernel's iterations per task: a fixed cost per task
/// (the runtime's overhead) plus the work. The sweep goes from the largest iteration count
/// down, so a rate taken from the first runs, as a plain progress bar's ETA is, predicts
/// the last ones many times too long (42 to 69 minutes were once shown for a 5-minute
/// sweep). Here each system's runs are fitted as `a + b · iterations` by least squares,
/// from the first two distinct iteration counts on; with one, the time is taken as
/// proportional to the iterations (an underestimate: the fixed cost is then unknown).
#[derive(Debug)]
pub struct SweepEta {
    /// Per system: the runs left at each iteration count, and the (iterations, seconds)
    /// of the runs done.
    systems: Vec<SystemEta>,
}

/// One system's name, runs left per iteration count, and (iterations, seconds) done.
type SystemEta = (String, Vec<(i64, usize)>, Vec<(f64, f64)>);

impl SweepEta {
    /// Every run of `cfg` still to come.
    pub fn new(cfg: &MetgConfig) -> SweepEta {
        let left: Vec<(i64, usize)> = cfg
            .iterations()
            .into_iter()
            .map(|i| (i, cfg.repeat))
            .collect();
        SweepEta {
            systems: cfg
                .systems
                .iter()
                .map(|s| (s.label(), left.clone(), Vec::new()))
                .collect(),
        }
    }

    /// Counts `sample` as done.
    pub fn record(&mut self, sample: &Sample) {
        if let Some((_, left, done)) = self
            .systems
            .iter_mut()
            .find(|(label, _, _)| *label == sample.system)
        {
            if let Some((_, n)) = left.iter_mut().find(|(i, _)| *i == sample.iterations) {
                *n = n.saturating_sub(1);
            }
            done.push((sample.iterations as f64, sample.elapsed_s));
        }
    }

    /// Seconds left, if every system with runs left has one done.
    pub fn remaining_s(&self) -> Option<f64> {
        let mut total = 0.0;
        for (_, left, done) in &self.systems {
            let runs: usize = left.iter().map(|(_, n)| n).sum();
            if runs == 0 {
                continue;
            }
            let (a, b) = affine_fit(done)?;
            total += left
                .iter()
                .map(|&(i, n)| n as f64 * (a + b * i as f64).max(0.0))
                .sum::<f64>();
        }
        Some(total)
    }
}

/// `y = a + b·x` by least squares over `points`, with `a ≥ 0` and `b ≥ 0`; proportional
/// (`a = 0`) when every point has the same `x`. None without a point.
fn affine_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.is_empty() {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= f64::EPSILON * mx * mx * n || sxx == 0.0 {
        return Some((0.0, if mx > 0.0 { my / mx } else { 0.0 }));
    }
    let b = (sxy / sxx).max(0.0);
    let a = my - b * mx;
    if a < 0.0 {
        // Through the origin instead.
        let sxy0: f64 = points.iter().map(|p| p.0 * p.1).sum();
        let sxx0: f64 = points.iter().map(|p| p.0 * p.0).sum();
        return Some((0.0, (sxy0 / sxx0).max(0.0)));
    }
    Some((a, b))
}

/// The machine's peak: the compute kernel alone, best of `tries` runs of 2^20 iterations,
/// on one core, and on `cores_together` cores at once.
///
/// The second is what a parallel system is measured against, as Task Bench measures
/// against the peak of the node: cores computing at once need not each give what one
/// gives alone (turbo frequencies drop as more cores run; on a virtual machine two vCPUs
/// may share a physical core, or a host that gives them less when both are busy). The
/// sweep measures it again at the end and says when it moved: a machine whose speed
/// drifts during the sweep shifts every system's efficiency alike.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Peak {
    /// FLOP/s of one core computing alone.
    pub flops_per_core: f64,
    /// Seconds of the best run of 2^20 iterations, alone.
    pub best_seconds: f64,
    /// FLOP/s of each core while `cores_together` cores compute at once (the slowest
    /// core's, since a graph waits for its last task).
    pub flops_per_core_together: f64,
    /// The cores that computed at once.
    pub cores_together: usize,
    /// `avx2+fma` or `portable`.
    pub implementation: &'static str,
}

impl Peak {
    /// The peak FLOP/s of `cores` cores: one core alone, or `cores` computing at once
    /// (from the measurement with [`Peak::cores_together`] of them).
    pub fn flops(&self, cores: usize) -> f64 {
        if cores <= 1 {
            self.flops_per_core
        } else {
            self.flops_per_core_together * cores as f64
        }
    }
}

/// FLOPs of one run of 2^20 iterations.
const PEAK_ITERATIONS: i64 = 1 << 20;

fn peak_flops(seconds: f64) -> f64 {
    (2 * 64 * PEAK_ITERATIONS + 64) as f64 / seconds
}

/// Measures [`Peak`] on one core (the calling thread), then on the first `cores` CPUs
/// this process may use, at once (threads pinned there when they can be).
pub fn measure_peak(cores: usize, tries: usize) -> Peak {
    compute_bound(1 << 12); // warm up the clock and the code
    let best = least_of(tries, one_run);
    let cores = cores.max(1);
    let together = if cores == 1 {
        best
    } else {
        least_of(tries, || slowest_of(cores))
    };
    Peak {
        flops_per_core: peak_flops(best),
        best_seconds: best,
        flops_per_core_together: peak_flops(together),
        cores_together: cores,
        implementation: compute_bound_impl(),
    }
}

/// The least of `tries` (at least one) values of `f`.
fn least_of(tries: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..tries.max(1)).map(|_| f()).fold(f64::INFINITY, f64::min)
}

/// Seconds of one run of 2^20 iterations on the calling thread.
fn one_run() -> f64 {
    let t = Instant::now();
    std::hint::black_box(compute_bound(PEAK_ITERATIONS));
    t.elapsed().as_secs_f64()
}

/// Seconds the slowest of `cores` threads takes to run 2^20 iterations, all starting
/// together.
fn slowest_of(cores: usize) -> f64 {
    let cpus = core_affinity::get_core_ids().unwrap_or_default();
    let start = std::sync::Barrier::new(cores);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..cores)
            .map(|i| {
                let (cpu, start) = (cpus.get(i).copied(), &start);
                s.spawn(move || {
                    if let Some(cpu) = cpu {
                        core_affinity::set_for_current(cpu);
                    }
                    compute_bound(1 << 12);
                    start.wait();
                    one_run()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("the kernel does not panic"))
            .fold(0.0, f64::max)
    })
}

/// One timed run of the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// The system's label.
    pub system: String,
    /// Repetition index.
    pub rep: usize,
    /// Kernel iterations per task.
    pub iterations: i64,
    /// Cores the system used.
    pub cores: usize,
    /// Tasks run.
    pub tasks: i64,
    /// FLOPs of the whole graph.
    pub flops: i64,
    /// Seconds, as Task Bench times them.
    pub elapsed_s: f64,
    /// elapsed x cores / tasks, in µs.
    pub granularity_us: f64,
    /// (flops / elapsed) / the peak of `cores` cores ([`Peak::flops`]).
    pub efficiency: f64,
    /// Share of the CPU time the host stole during this run (`None`: unknown).
    pub steal: Option<f64>,
    /// Runs of this sample discarded for steal before this one.
    pub repeats: usize,
}

/// A METG estimate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "us", rename_all = "snake_case")]
pub enum Metg {
    /// Interpolated at the threshold, or the smallest efficient point when the next one
    /// is not finer (as Task Bench).
    Value(f64),
    /// Even the finest point measured was efficient: METG is at most this.
    AtMost(f64),
    /// No point reached the threshold.
    NotReached,
}

impl Metg {
    /// The number, if any (an upper bound for `AtMost`).
    pub fn us(self) -> Option<f64> {
        match self {
            Metg::Value(v) | Metg::AtMost(v) => Some(v),
            Metg::NotReached => None,
        }
    }

    /// `12.3`, `<= 0.4`, or `-`.
    pub fn display(self) -> String {
        match self {
            Metg::Value(v) => format!("{v:.3}"),
            Metg::AtMost(v) => format!("<= {v:.3}"),
            Metg::NotReached => "-".into(),
        }
    }
}

/// Task Bench's METG from `(granularity, efficiency)` points ordered by iterations,
/// largest first.
pub fn metg(points: &[(f64, f64)], threshold: f64) -> Metg {
    let Some((min_i, &(min_time, min_eff))) = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.1 >= threshold)
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
    else {
        return Metg::NotReached;
    };
    match points.get(min_i + 1) {
        None => Metg::AtMost(min_time),
        Some(&(next_time, next_eff)) if next_time < min_time => {
            // numpy.interp(threshold, [next_eff, min_eff], [next_time, min_time]);
            // next_eff < threshold <= min_eff here, since min_i is the finest efficient
            // point.
            let f = (threshold - next_eff) / (min_eff - next_eff);
            Metg::Value(next_time + f * (min_time - next_time))
        }
        Some(_) => Metg::Value(min_time),
    }
}

/// The sweep's METGs for one system.
#[derive(Clone, Debug, Serialize)]
pub struct SystemMetg {
    /// The system's label.
    pub system: String,
    /// Cores it used.
    pub cores: usize,
    /// One METG per repetition.
    pub per_rep: Vec<Metg>,
    /// Minimum over repetitions (of the numeric ones).
    pub min_us: Option<f64>,
    /// Median over repetitions (of the numeric ones).
    pub median_us: Option<f64>,
    /// Some repetition's METG is only an upper bound (its finest point was still
    /// efficient): `min_us` and `median_us` are then at most these values.
    pub at_most: bool,
    /// Task Bench's: from the mean elapsed time of each point.
    pub taskbench: Metg,
}

/// Summarises `samples` per system.
pub fn summarise(
    samples: &[Sample],
    systems: &[System],
    threshold: f64,
    peak: &Peak,
) -> Vec<SystemMetg> {
    let mut out = Vec::new();
    for sys in systems {
        let label = sys.label();
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.system == label).collect();
        let mut iters: Vec<i64> = mine.iter().map(|s| s.iterations).collect();
        iters.sort_unstable_by(|a, b| b.cmp(a));
        iters.dedup();
        let reps = mine.iter().map(|s| s.rep + 1).max().unwrap_or(0);
        let curve = |pick: &dyn Fn(i64) -> Option<(f64, f64)>| -> Vec<(f64, f64)> {
            iters.iter().filter_map(|&i| pick(i)).collect()
        };
        let per_rep: Vec<Metg> = (0..reps)
            .map(|r| {
                let pts = curve(&|i| {
                    mine.iter()
                        .find(|s| s.rep == r && s.iterations == i)
                        .map(|s| (s.granularity_us, s.efficiency))
                });
                metg(&pts, threshold)
            })
            .collect();
        // Task Bench: mean elapsed per point, then granularity and efficiency.
        let mean_pts = curve(&|i| {
            let at: Vec<&&Sample> = mine.iter().filter(|s| s.iterations == i).collect();
            let first = at.first()?;
            let mean = at.iter().map(|s| s.elapsed_s).sum::<f64>() / at.len() as f64;
            Some((
                mean * first.cores as f64 / first.tasks as f64 * 1e6,
                first.flops as f64 / mean / peak.flops(first.cores),
            ))
        });
        let mut values: Vec<f64> = per_rep.iter().filter_map(|m| m.us()).collect();
        values.sort_by(f64::total_cmp);
        out.push(SystemMetg {
            system: label,
            cores: mine.first().map_or(sys.cores(1), |s| s.cores),
            min_us: values.first().copied(),
            median_us: median(&values),
            at_most: per_rep.iter().any(|m| matches!(m, Metg::AtMost(_))),
            per_rep,
            taskbench: metg(&mean_pts, threshold),
        });
    }
    out
}

/// The median of `sorted` (ascending), if it is not empty.
pub fn median(sorted: &[f64]) -> Option<f64> {
    match sorted.len() {
        0 => None,
        n if n % 2 == 1 => Some(sorted[n / 2]),
        n => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Runs the sweep: for every iteration count, largest first, `repeat` rounds of every
/// system, the order rotating each round so that no system always runs first (or right
/// after the same neighbour). A run during which the host stole more than
/// `cfg.max_steal` of the CPU time is run again, up to `cfg.steal_retries` times.
/// `progress` sees every sample as it is taken.
pub fn sweep(
    cfg: &MetgConfig,
    peak: &Peak,
    progress: &mut dyn FnMut(&Sample),
) -> Result<Vec<Sample>, TaskBenchError> {
    sweep_with_ticks(cfg, peak, progress, &mut CpuTicks::read)
}

/// [`sweep`], reading the CPU time counters with `ticks` (a scripted host in tests).
pub(crate) fn sweep_with_ticks(
    cfg: &MetgConfig,
    peak: &Peak,
    progress: &mut dyn FnMut(&Sample),
    ticks: &mut dyn FnMut() -> Option<CpuTicks>,
) -> Result<Vec<Sample>, TaskBenchError> {
    let mut samples = Vec::with_capacity(cfg.runs());
    let n = cfg.systems.len();
    // One untimed run each: first-touch page faults and thread start-up stay out.
    let warm = cfg.graph(1 << cfg.min_log2)?;
    for sys in &cfg.systems {
        sys.run(std::slice::from_ref(&warm), cfg.workers)?;
    }
    for (pi, iterations) in cfg.iterations().into_iter().enumerate() {
        let g = cfg.graph(iterations)?;
        let graphs = std::slice::from_ref(&g);
        let tasks = g.timesteps * g.max_width;
        let flops: i64 = (0..g.timesteps)
            .map(|t| g.kernel.flops_per_task(0, t, 0) * g.width_at_timestep(t))
            .sum();
        // The first checksum seen at this point: every system must agree with it.
        let mut reference: Option<(String, u64)> = None;
        for rep in 0..cfg.repeat {
            for k in 0..n {
                let sys = &cfg.systems[(k + rep + pi) % n];
                let mut repeats = 0;
                let (out, steal) = loop {
                    let before = ticks();
                    let out = sys.run(graphs, cfg.workers)?;
                    let steal = before.zip(ticks()).map(|(a, b)| a.stolen_since(b));
                    match (cfg.max_steal, steal) {
                        (Some(max), Some(s)) if s > max && repeats < cfg.steal_retries => {
                            repeats += 1;
                        }
                        _ => break (out, steal),
                    }
                };
                if let Some(sum) = out.checksum {
                    match &reference {
                        None => reference = Some((sys.label(), sum)),
                        Some((first, first_sum)) if *first_sum != sum => {
                            return Err(TaskBenchError::ChecksumMismatch {
                                iterations,
                                first: first.clone(),
                                first_sum: *first_sum,
                                other: sys.label(),
                                other_sum: sum,
                            })
                        }
                        Some(_) => {}
                    }
                }
                let cores = sys.cores(cfg.workers);
                let elapsed_s = out.elapsed.as_secs_f64();
                let s = Sample {
                    system: sys.label(),
                    rep,
                    iterations,
                    cores,
                    tasks,
                    flops,
                    elapsed_s,
                    granularity_us: elapsed_s * cores as f64 / tasks as f64 * 1e6,
                    efficiency: flops as f64 / elapsed_s / peak.flops(cores),
                    steal,
                    repeats,
                };
                progress(&s);
                samples.push(s);
            }
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small stencil sweep of `systems`: 4 steps of width 2, one repetition, one worker,
    /// 2^4 iterations only, no steal guard.
    fn small(systems: Vec<System>) -> MetgConfig {
        MetgConfig {
            pattern: Dependence::Stencil1d,
            width: 2,
            steps: 4,
            kernel: KernelType::ComputeBound,
            repeat: 1,
            workers: 1,
            systems,
            max_log2: 4,
            min_log2: 4,
            threshold: 0.5,
            max_steal: None,
            steal_retries: 0,
        }
    }

    /// A made-up peak: 1 GFLOP/s per core, alone or together.
    const GIGAFLOP: Peak = Peak {
        flops_per_core: 1e9,
        best_seconds: 1.0,
        flops_per_core_together: 1e9,
        cores_together: 2,
        implementation: "test",
    };

    #[test]
    fn metg_interpolates_between_the_last_efficient_point_and_the_next() {
        // Granularities halve; efficiency 0.9, 0.8, 0.6, 0.4: crossing between 0.6 and 0.4,
        // at 25 µs and 12.5 µs: 12.5 + (0.5 - 0.4) / (0.6 - 0.4) x 12.5 = 18.75.
        let pts = [
            (100.0, 0.9),
            (50.0, 0.8),
            (25.0, 0.6),
            (12.5, 0.4),
            (6.0, 0.1),
        ];
        assert_eq!(metg(&pts, 0.5), Metg::Value(18.75));
    }

    #[test]
    fn metg_edge_cases() {
        assert_eq!(metg(&[(10.0, 0.4), (5.0, 0.1)], 0.5), Metg::NotReached);
        assert_eq!(metg(&[(10.0, 0.9), (5.0, 0.7)], 0.5), Metg::AtMost(5.0));
        // Next point is not finer (noise): no interpolation, as Task Bench.
        assert_eq!(metg(&[(10.0, 0.9), (12.0, 0.3)], 0.5), Metg::Value(10.0));
        // A noisy efficient point below a dip still counts (smallest efficient wins).
        assert_eq!(
            metg(&[(10.0, 0.9), (5.0, 0.45), (2.5, 0.55), (1.2, 0.2)], 0.5),
            Metg::Value(1.2 + (0.5 - 0.2) / (0.55 - 0.2) * (2.5 - 1.2))
        );
    }

    #[test]
    fn summarise_takes_min_median_and_mean_elapsed_metg() {
        let sys = System::Sequential;
        let mk = |rep, iterations: i64, eff: f64| Sample {
            system: sys.label(),
            rep,
            iterations,
            cores: 1,
            tasks: 10,
            flops: 10 * (128 * iterations + 64),
            elapsed_s: 10.0 * (128 * iterations + 64) as f64 / (eff * 1e9),
            granularity_us: (128 * iterations + 64) as f64 / (eff * 1e9) * 1e6,
            efficiency: eff,
            steal: None,
            repeats: 0,
        };
        let samples = vec![
            mk(0, 1024, 0.9),
            mk(0, 512, 0.3),
            mk(1, 1024, 0.9),
            mk(1, 512, 0.6),
            mk(2, 1024, 0.9),
            mk(2, 512, 0.7),
        ];
        let s = &summarise(&samples, &[sys], 0.5, &GIGAFLOP)[0];
        assert_eq!(s.per_rep.len(), 3);
        assert!(matches!(s.per_rep[0], Metg::Value(_)));
        assert!(matches!(s.per_rep[1], Metg::AtMost(_)));
        assert!(s.min_us.unwrap() <= s.median_us.unwrap());
        assert!(s.taskbench.us().is_some());
    }

    #[test]
    fn a_parallel_system_is_measured_against_its_cores_computing_together() {
        let peak = Peak {
            flops_per_core: 4e9,
            best_seconds: 1.0,
            flops_per_core_together: 3e9,
            cores_together: 2,
            implementation: "test",
        };
        assert_eq!(peak.flops(1), 4e9, "one core: alone");
        assert_eq!(peak.flops(2), 6e9, "two: together");
        // The sweep's efficiencies use it: sequential against one core alone, the
        // others against their cores together.
        let cfg = MetgConfig {
            workers: 2,
            ..small(vec![System::Sequential, System::Rayon])
        };
        for s in sweep(&cfg, &peak, &mut |_| {}).unwrap() {
            let expect = s.flops as f64 / s.elapsed_s / if s.cores == 1 { 4e9 } else { 6e9 };
            assert!((s.efficiency - expect).abs() < 1e-12, "{}", s.system);
        }
    }

    #[test]
    fn the_peak_is_measured_alone_and_together() {
        let p = measure_peak(2, 2);
        assert_eq!(p.cores_together, 2);
        assert!(p.flops_per_core > 1e8 && p.flops_per_core.is_finite());
        assert!(p.flops_per_core_together > 1e8 && p.flops_per_core_together.is_finite());
        let one = measure_peak(1, 1);
        assert_eq!(
            one.flops_per_core_together, one.flops_per_core,
            "one core: the same run"
        );
    }

    #[test]
    fn the_eta_fits_a_fixed_cost_per_run_and_counts_what_is_left() {
        let cfg = MetgConfig {
            repeat: 2,
            workers: 2,
            max_log2: 10,
            min_log2: 4,
            ..small(vec![System::Sequential, System::Rayon])
        };
        let mut eta = SweepEta::new(&cfg);
        assert_eq!(eta.remaining_s(), None, "nothing measured yet");
        // Runs take 0.5 s + 1 ms per iteration (sequential) and twice that (rayon).
        let time = |sys: &str, i: i64| {
            let k = if sys == "sequential" { 1.0 } else { 2.0 };
            k * (0.5 + 1e-3 * i as f64)
        };
        let sample = |sys: &str, i: i64| Sample {
            system: sys.into(),
            rep: 0,
            iterations: i,
            cores: 1,
            tasks: 8,
            flops: 0,
            elapsed_s: time(sys, i),
            granularity_us: 0.0,
            efficiency: 1.0,
            steal: None,
            repeats: 0,
        };
        let all: Vec<(String, i64)> = cfg
            .iterations()
            .into_iter()
            .flat_map(|i| {
                ["sequential", "rayon", "rayon", "sequential"]
                    .into_iter()
                    .map(move |s| (s.to_string(), i))
            })
            .collect();
        for (k, (sys, i)) in all.iter().enumerate() {
            eta.record(&sample(sys, *i));
            if k == 0 {
                assert_eq!(eta.remaining_s(), None, "rayon not measured yet");
                continue;
            }
            let left: f64 = all[k + 1..].iter().map(|(s, i)| time(s, *i)).sum();
            let got = eta.remaining_s().expect("both systems measured");
            if k >= 5 {
                // Two iteration counts seen for both: the fit is exact.
                assert!(
                    (got - left).abs() < 1e-9 * left.max(1.0),
                    "after {k}: {got} vs {left}"
                );
            } else {
                // One: proportional, so an underestimate, never an overestimate.
                assert!(got <= left + 1e-9, "after {k}: {got} vs {left}");
            }
        }
        assert_eq!(eta.remaining_s(), Some(0.0));
    }

    #[test]
    fn sweep_orders_and_counts_runs() {
        let cfg = MetgConfig {
            repeat: 2,
            workers: 2,
            max_log2: 6,
            ..small(vec![System::Sequential, System::Rayon])
        };
        assert_eq!(cfg.iterations(), [64, 32, 16]);
        let peak = GIGAFLOP;
        let mut seen = Vec::new();
        let samples = sweep(&cfg, &peak, &mut |s| seen.push(s.system.clone())).unwrap();
        assert_eq!(samples.len(), cfg.runs());
        assert_eq!(seen[..4], ["sequential", "rayon", "rayon", "sequential"]);
        assert!(samples.iter().all(|s| s.tasks == 8 && s.efficiency > 0.0));
    }

    #[test]
    fn runs_the_host_stole_from_are_repeated_up_to_the_limit() {
        let mut cfg = MetgConfig {
            max_log2: 5,
            max_steal: Some(0.05),
            steal_retries: 3,
            ..small(vec![System::Sequential])
        };
        let peak = GIGAFLOP;
        // A scripted host: each read advances 100 ticks, of which `stolen[i]` went to
        // other guests during run i (reads come in pairs around every run).
        let scripted = |stolen: Vec<u64>| {
            let mut reads = 0usize;
            let mut at = CpuTicks { steal: 0, total: 0 };
            move || {
                if reads % 2 == 1 {
                    let s = stolen.get(reads / 2).copied().unwrap_or(0);
                    at = CpuTicks {
                        steal: at.steal + s,
                        total: at.total + 100,
                    };
                }
                reads += 1;
                Some(at)
            }
        };
        // Point 2^5: stolen 30 %, then 2 % (kept after one repeat). Point 2^4: clean.
        let mut host = scripted(vec![30, 2, 0]);
        let samples = sweep_with_ticks(&cfg, &peak, &mut |_| {}, &mut host).unwrap();
        let got: Vec<(usize, Option<f64>)> = samples.iter().map(|s| (s.repeats, s.steal)).collect();
        assert_eq!(got, [(1, Some(0.02)), (0, Some(0.0))]);
        // A host that always steals: three repeats, then the fourth run is kept.
        let mut greedy = scripted(vec![50; 16]);
        let samples = sweep_with_ticks(&cfg, &peak, &mut |_| {}, &mut greedy).unwrap();
        assert!(samples
            .iter()
            .all(|s| s.repeats == 3 && s.steal == Some(0.5)));
        // Off, or where the counters cannot be read: nothing is repeated.
        cfg.max_steal = None;
        let mut host = scripted(vec![50; 4]);
        let samples = sweep_with_ticks(&cfg, &peak, &mut |_| {}, &mut host).unwrap();
        assert!(samples.iter().all(|s| s.repeats == 0));
        cfg.max_steal = Some(0.05);
        let samples = sweep_with_ticks(&cfg, &peak, &mut |_| {}, &mut || None).unwrap();
        assert!(samples.iter().all(|s| s.repeats == 0 && s.steal.is_none()));
    }

    #[cfg(unix)]
    #[test]
    fn sweep_rejects_a_system_that_ran_another_graph() {
        use std::os::unix::fs::PermissionsExt;
        // A Task Bench program that reports a plausible time but a wrong checksum.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-taskbench");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'Elapsed Time 1.000000e-03 seconds'\necho 'Checksum 0000000000000001'\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cfg = small(vec![
            System::Sequential,
            System::External {
                name: "fake".into(),
                program: fake,
            },
        ]);
        let peak = GIGAFLOP;
        let e = sweep(&cfg, &peak, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&e, TaskBenchError::ChecksumMismatch { other, .. } if other == "fake"),
            "{e}"
        );
    }
}
