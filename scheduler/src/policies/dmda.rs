//! `dmda` and `dmdas`: deque model data aware (after StarPU's policies of the same names).
//!
//! Each worker has a queue of its own. A task, when it becomes ready, goes to the worker
//! where it is expected to *finish* first: that worker's expected availability (the
//! remaining time of its running task plus the expected durations of its queued tasks, or
//! now if idle) plus the task's expected duration on that worker's architecture
//! ([`SchedTask::expected_ns`], from the performance models). No stealing: the choice is
//! made once, at push, as in StarPU.
//!
//! A task without an expected duration on some architecture that can run it is a
//! calibration: it goes to the least loaded worker of an architecture without one (the
//! models learn from it), weighing its own duration as the mean of the estimates seen so
//! far. `dmdas` keeps each queue sorted by priority (higher first, FIFO among equals).
//!
//! The copies a task needs on a worker's memory node ([`SchedTask::transfer_bytes`]) are
//! counted at that worker's [`Bus`] (bandwidth and latency, measured once per machine),
//! as StarPU's β term with β = 1: the worker makes them before the task, so they delay its
//! end and are queued work like the task's own duration. Without a measured bus they
//! count for nothing; on CPU-only machines there are none.

use std::collections::VecDeque;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::{ArchMask, Local, Origin, Policy, SchedTask, WorkerDesc};

/// The weights of `dmdae`'s cost (StarPU's `STARPU_SCHED_ALPHA`, `_BETA`, `_GAMMA` and
/// `STARPU_IDLE_POWER`, in the same units): for a candidate worker,
/// `alpha·(end − best end) + beta·copies + gamma·(energy + idle_power·(end − latest end)⁺)`,
/// times in µs, energies in J, `gamma` in µs per J, `idle_power` in W.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyWeights {
    /// Weight of the expected completion time.
    pub alpha: f64,
    /// Weight of the copies' expected time.
    pub beta: f64,
    /// µs a joule is worth.
    pub gamma: f64,
    /// Power of the workers kept waiting when a choice ends after every other worker, W.
    pub idle_power_w: f64,
}

/// Environment variables of [`EnergyWeights`].
pub const ALPHA_ENV: &str = "TASKWATT_SCHED_ALPHA";
/// See [`ALPHA_ENV`].
pub const BETA_ENV: &str = "TASKWATT_SCHED_BETA";
/// See [`ALPHA_ENV`].
pub const GAMMA_ENV: &str = "TASKWATT_SCHED_GAMMA";
/// See [`ALPHA_ENV`].
pub const IDLE_POWER_ENV: &str = "TASKWATT_SCHED_IDLE_POWER";

impl Default for EnergyWeights {
    /// StarPU's defaults: alpha 1, beta 1, gamma 1000 µs/J, idle power 0 W.
    fn default() -> Self {
        EnergyWeights {
            alpha: 1.0,
            beta: 1.0,
            gamma: 1000.0,
            idle_power_w: 0.0,
        }
    }
}

impl EnergyWeights {
    /// The defaults, with any of the environment variables set; a value that is not a
    /// finite, non-negative number is an error naming the variable.
    pub fn from_env() -> Result<EnergyWeights, BadKnob> {
        let mut w = EnergyWeights::default();
        for (var, knob, field) in [
            (ALPHA_ENV, "alpha", &mut w.alpha),
            (BETA_ENV, "beta", &mut w.beta),
            (GAMMA_ENV, "gamma", &mut w.gamma),
            (IDLE_POWER_ENV, "idle_power_w", &mut w.idle_power_w),
        ] {
            if let Ok(v) = std::env::var(var) {
                *field = v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| BadKnob {
                        policy: "dmdae".into(),
                        knob: knob.into(),
                        value: v.clone(),
                        from: var.into(),
                    })?;
            }
        }
        Ok(w)
    }

    /// Checks that every weight is a finite, non-negative number; the error names the
    /// first that is not (`from` says where the weights came from, e.g. `--gamma`).
    pub fn check(&self, from: &str) -> Result<(), BadKnob> {
        for (knob, v) in [
            ("alpha", self.alpha),
            ("beta", self.beta),
            ("gamma", self.gamma),
            ("idle_power_w", self.idle_power_w),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(BadKnob {
                    policy: "dmdae".into(),
                    knob: knob.into(),
                    value: v.to_string(),
                    from: from.into(),
                });
            }
        }
        Ok(())
    }

    /// The weights as `(knob, value)` pairs, in the order of the cost's terms (what a
    /// trace records of the policy: `sched.gamma` and so on).
    pub fn knobs(&self) -> Vec<(String, String)> {
        vec![
            ("alpha".into(), self.alpha.to_string()),
            ("beta".into(), self.beta.to_string()),
            ("gamma".into(), self.gamma.to_string()),
            ("idle_power_w".into(), self.idle_power_w.to_string()),
        ]
    }
}

/// A policy's knob with a value it cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "scheduling policy {policy}: knob {knob} = {value} (from {from}) is not a finite, \
     non-negative number: give one, or leave it unset for the default"
)]
pub struct BadKnob {
    /// The policy (`dmdae`).
    pub policy: String,
    /// The knob (`alpha`, `beta`, `gamma`, `idle_power_w`).
    pub knob: String,
    /// The value given, as given.
    pub value: String,
    /// Where it came from: an environment variable, a flag or the API.
    pub from: String,
}

/// Deque model data aware: earliest expected completion over workers.
pub struct Dmda<T> {
    name: &'static str,
    sorted: bool,
    /// `dmdae`: the energy term's weights.
    energy: Option<EnergyWeights>,
    workers: Vec<ArchMask>,
    /// Helpers (the submitting thread): never chosen, they take the next task of the
    /// most loaded queue of their architecture when they look (see `pop`).
    helpers: Vec<bool>,
    /// Each worker's memory node and bus.
    nodes: Vec<(usize, Option<crate::Bus>)>,
    queues: Vec<CachePadded<Mutex<Queue<T>>>>,
    start: Instant,
    /// A clock that replaces `start` (virtual time); `None`: wall time since `start`.
    clock: Option<std::sync::Arc<dyn crate::PolicyClock>>,
    /// Mean of the expected durations seen, ns (for calibrating tasks), and their count.
    seen: Mutex<(f64, u64)>,
}

struct Queue<T> {
    /// (task, its expected duration in ns, priority, sequence number).
    tasks: VecDeque<(T, f64, i32, u64)>,
    /// Sum of the queued tasks' expected durations, ns.
    queued_ns: f64,
    /// When the tasks the worker took are expected to end (ns since the policy's start);
    /// in the past when idle.
    running_end_ns: f64,
    /// The expected durations of the tasks the worker took and has not finished, oldest
    /// first: one, or a few for a GPU worker that takes tasks ahead for its prefetcher.
    in_hand: VecDeque<f64>,
    seq: u64,
}

impl<T: SchedTask> Dmda<T> {
    /// `dmda` (FIFO queues) for `workers`.
    pub fn new(workers: &[WorkerDesc]) -> Self {
        Dmda::with(workers, "dmda", false)
    }

    /// `dmdas` (priority-sorted queues) for `workers`.
    pub fn sorted(workers: &[WorkerDesc]) -> Self {
        Dmda::with(workers, "dmdas", true)
    }

    /// `dmdae`: dmda's choice by a cost that weighs the task's expected energy
    /// ([`SchedTask::expected_power_w`] × its expected duration) and the idle power of
    /// the workers a late end keeps waiting, with `weights`. A task whose power is not
    /// known on every candidate architecture is placed as dmda would.
    pub fn energy_aware(workers: &[WorkerDesc], weights: EnergyWeights) -> Self {
        let mut d = Dmda::with(workers, "dmdae", false);
        d.energy = Some(weights);
        d
    }

    fn with(workers: &[WorkerDesc], name: &'static str, sorted: bool) -> Self {
        Dmda {
            name,
            sorted,
            energy: None,
            workers: workers.iter().map(|w| w.arch).collect(),
            helpers: workers.iter().map(|w| w.helper).collect(),
            nodes: workers.iter().map(|w| (w.memory_node, w.bus)).collect(),
            queues: workers
                .iter()
                .map(|_| {
                    CachePadded::new(Mutex::new(Queue {
                        tasks: VecDeque::new(),
                        queued_ns: 0.0,
                        running_end_ns: 0.0,
                        in_hand: VecDeque::new(),
                        seq: 0,
                    }))
                })
                .collect(),
            start: Instant::now(),
            clock: None,
            seen: Mutex::new((0.0, 0)),
        }
    }

    /// Reads "now" from `clock` instead of the wall clock (a simulation in virtual time).
    #[must_use]
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn crate::PolicyClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    fn now_ns(&self) -> f64 {
        match &self.clock {
            Some(c) => c.now_ns(),
            None => self.start.elapsed().as_nanos() as f64,
        }
    }

    /// A helper's pop: a task given to it (when no other worker could run it), else the
    /// next task of the queue of its architecture with the most expected work, whose owner is then expected to be free that much sooner. (A queue
    /// holds only tasks its worker's architecture can run, so the helper can run it.)
    fn help(&self, helper: usize) -> Option<T> {
        {
            let mut q = self.queues[helper].lock();
            if let Some((task, d, _, _)) = q.tasks.pop_front() {
                q.queued_ns = (q.queued_ns - d).max(0.0);
                return Some(task);
            }
        }
        let arch = self.workers[helper];
        let victim = (0..self.workers.len())
            .filter(|&w| !self.helpers[w] && self.workers[w] == arch)
            .map(|w| (w, self.queues[w].lock().queued_ns))
            .filter(|&(_, q)| q > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(w, _)| w)
            // A queue of zero expected work may still hold tasks (durations unknown
            // count as the mean seen, which may be 0): any non-empty one.
            .or_else(|| {
                (0..self.workers.len()).find(|&w| {
                    !self.helpers[w]
                        && self.workers[w] == arch
                        && !self.queues[w].lock().tasks.is_empty()
                })
            })?;
        let mut q = self.queues[victim].lock();
        let (task, d, _, _) = q.tasks.pop_front()?;
        q.queued_ns = (q.queued_ns - d).max(0.0);
        Some(task)
    }

    /// The worker where `task` is expected to finish first, and its expected duration
    /// there.
    fn choose(&self, task: &T) -> (usize, f64) {
        let can = task.archs();
        let now = self.now_ns();
        // Expected durations per candidate worker (None: not calibrated there), read once
        // per architecture.
        let mut by_arch: Vec<(ArchMask, Option<f64>)> = Vec::new();
        let mut est = |w: usize| {
            let a = self.workers[w];
            match by_arch.iter().find(|(x, _)| *x == a) {
                Some(&(_, e)) => e,
                None => {
                    let e = task.expected_ns(a);
                    by_arch.push((a, e));
                    e
                }
            }
        };
        // The helper only when no other worker can run the task (a runtime whose only CPU
        // worker is the submitting thread).
        let others =
            (0..self.workers.len()).any(|w| can.contains(self.workers[w]) && !self.helpers[w]);
        let candidates: Vec<(usize, Option<f64>)> = (0..self.workers.len())
            .filter(|&w| can.contains(self.workers[w]) && !(others && self.helpers[w]))
            .map(|w| (w, est(w)))
            .collect();
        let calibrating: Vec<(usize, Option<f64>)> = candidates
            .iter()
            .copied()
            .filter(|(_, e)| e.is_none())
            .collect();
        let available = |w: usize| {
            let q = self.queues[w].lock();
            q.running_end_ns.max(now) + q.queued_ns
        };
        let fallback = {
            let s = self.seen.lock();
            if s.1 > 0 {
                s.0
            } else {
                1.0
            }
        };
        let pool = if calibrating.is_empty() {
            &candidates
        } else {
            &calibrating
        };
        // The copies each memory node needs, read once per node.
        let mut by_node: Vec<(usize, (u32, u64))> = Vec::new();
        let mut transfer = |w: usize| {
            let (node, bus) = self.nodes[w];
            let Some(bus) = bus else { return 0.0 };
            let need = match by_node.iter().find(|(n, _)| *n == node) {
                Some(&(_, need)) => need,
                None => {
                    let need = task.transfer_bytes(node);
                    by_node.push((node, need));
                    need
                }
            };
            bus.time_ns(need.0, need.1)
        };
        let mut best = (usize::MAX, f64::INFINITY, 0.0, None);
        // A calibration goes where the models lack a duration, copies or not: weighing
        // them would keep every uncalibrated task on the node that holds the data, and
        // the other architecture would never be measured.
        let exploring = !calibrating.is_empty();
        // dmdae: (worker, end, duration with copies, copies, duration) of each candidate,
        // to weigh once the best and the latest ends are known.
        let mut costed: Vec<(usize, f64, f64, f64, Option<f64>)> = Vec::new();
        for &(w, e) in pool {
            let copies = if exploring { 0.0 } else { transfer(w) };
            let d = e.unwrap_or(fallback) + copies;
            let end = available(w) + d;
            if self.energy.is_some() {
                costed.push((w, end, d, copies, e));
            }
            if end < best.1 {
                best = (w, end, d, e);
            }
        }
        if let (Some(k), false) = (self.energy, exploring || costed.is_empty()) {
            let power = |w: usize| task.expected_power_w(self.workers[w]);
            if costed.iter().all(|c| power(c.0).is_some()) {
                let latest = (0..self.workers.len()).map(available).fold(now, f64::max);
                // The α term is the end without the copies, which β weighs apart (as in
                // StarPU): with α = β = 1 and γ = 0 the choice is dmda's.
                let best_end = costed
                    .iter()
                    .map(|c| c.1 - c.3)
                    .fold(f64::INFINITY, f64::min);
                let cost = |c: &(usize, f64, f64, f64, Option<f64>)| {
                    let (w, end, d, copies, _) = *c;
                    let energy_j = power(w).unwrap_or(0.0) * (d - copies) * 1e-9
                        + k.idle_power_w * (end - latest).max(0.0) * 1e-9;
                    k.alpha * (end - copies - best_end) * 1e-3
                        + k.beta * copies * 1e-3
                        + k.gamma * energy_j
                };
                if let Some(c) = costed.iter().min_by(|a, b| cost(a).total_cmp(&cost(b))) {
                    best = (c.0, c.1, c.2, c.4);
                }
            }
        }
        if best.0 == usize::MAX {
            // No worker can run it (the runtime refuses those at submission): any.
            return (0, fallback);
        }
        if let Some(d) = best.3 {
            let mut s = self.seen.lock();
            s.1 += 1;
            s.0 += (d - s.0) / s.1 as f64;
        }
        (best.0, best.2)
    }
}

impl<T: SchedTask> Policy<T> for Dmda<T> {
    fn name(&self) -> &str {
        self.name
    }

    fn knobs(&self) -> Vec<(String, String)> {
        self.energy.map(|w| w.knobs()).unwrap_or_default()
    }

    fn local(&self, _worker: usize) -> Local {
        Local::none()
    }

    fn uses_expected_durations(&self) -> bool {
        true
    }

    fn any_worker_takes_a_push(&self) -> bool {
        false
    }

    fn push(&self, task: T, _origin: Origin<'_>) {
        let (w, d) = self.choose(&task);
        let prio = task.priority();
        let mut q = self.queues[w].lock();
        let seq = q.seq;
        q.seq += 1;
        q.queued_ns += d;
        if self.sorted {
            // After every task of higher or equal priority: FIFO among equals.
            let at = q.tasks.partition_point(|e| e.2 >= prio);
            q.tasks.insert(at, (task, d, prio, seq));
        } else {
            q.tasks.push_back((task, d, prio, seq));
        }
    }

    fn pop(&self, worker: usize, _local: &mut Local) -> Option<T> {
        if self.helpers[worker] {
            return self.help(worker);
        }
        let now = self.now_ns();
        let mut q = self.queues[worker].lock();
        let (task, d, _, _) = q.tasks.pop_front()?;
        q.queued_ns = (q.queued_ns - d).max(0.0);
        // A task taken ahead (a GPU worker's pipeline) runs after those in hand.
        q.running_end_ns = q.running_end_ns.max(now) + d;
        q.in_hand.push_back(d);
        Some(task)
    }

    fn done(&self, worker: usize, _local: &mut Local) {
        let now = self.now_ns();
        let mut q = self.queues[worker].lock();
        // The worker runs what it took in order: the oldest is the one that ended.
        q.in_hand.pop_front();
        q.running_end_ns = now + q.in_hand.iter().sum::<f64>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T {
        id: u32,
        prio: i32,
        cpu_ns: Option<f64>,
        gpu_ns: Option<f64>,
        /// Bytes not valid on the GPU's node (one copy), none missing on the CPU's.
        gpu_missing: u64,
    }
    impl SchedTask for T {
        fn expected_power_w(&self, arch: ArchMask) -> Option<f64> {
            // 10 W on a core, 200 W on a GPU.
            Some(if arch == ArchMask::GPU { 200.0 } else { 10.0 })
        }
        fn transfer_bytes(&self, node: usize) -> (u32, u64) {
            match node {
                1 if self.gpu_missing > 0 => (1, self.gpu_missing),
                _ => (0, 0),
            }
        }
        fn priority(&self) -> i32 {
            self.prio
        }
        fn expected_ns(&self, arch: ArchMask) -> Option<f64> {
            if arch == ArchMask::GPU {
                self.gpu_ns
            } else {
                self.cpu_ns
            }
        }
    }

    fn t(id: u32, cpu: f64, gpu: f64) -> T {
        T {
            id,
            prio: 0,
            cpu_ns: Some(cpu),
            gpu_ns: Some(gpu),
            gpu_missing: 0,
        }
    }

    #[test]
    fn dmdae_trades_time_for_energy_by_gamma() {
        let ws = vec![
            WorkerDesc::new(0, 0, None),
            WorkerDesc::new(1, 0, None).with_arch(ArchMask::GPU),
        ];
        // 3 ms at 10 W on the CPU (0.03 J), 1 ms at 200 W on the GPU (0.2 J).
        let place = |gamma: f64| {
            let p = Dmda::<T>::energy_aware(
                &ws,
                EnergyWeights {
                    gamma,
                    ..EnergyWeights::default()
                },
            );
            p.push(t(0, 3e6, 1e6), Origin::External);
            if p.pop(1, &mut p.local(1)).is_some() {
                "gpu"
            } else {
                "cpu"
            }
        };
        // gamma 0: time only, as dmda. gamma 1e5 µs/J: the GPU's extra 0.17 J is worth
        // 17 ms, more than the CPU's 2 ms later end.
        assert_eq!(place(0.0), "gpu");
        assert_eq!(place(1e3), "gpu");
        assert_eq!(place(1e5), "cpu");
        // Idle power: an end after every other worker's keeps them waiting; the CPU's
        // 3 ms do so 2 ms longer than the GPU's 1 ms, 2 J at 1 kW, more than the 0.17 J
        // it saves: back to the GPU.
        let p = Dmda::<T>::energy_aware(
            &ws,
            EnergyWeights {
                gamma: 1e5,
                idle_power_w: 1000.0,
                ..EnergyWeights::default()
            },
        );
        p.push(t(1, 3e6, 1e6), Origin::External);
        assert_eq!(p.pop(1, &mut p.local(1)).map(|t| t.id), Some(1));
        // γ = 0 chooses as dmda, the copies counted once: 1 ms + 4.01 ms of copies on the
        // GPU is later than 3 ms on the CPU.
        let bus = Some(crate::Bus {
            bytes_per_s: 1_000_000_000,
            latency_ns: 10_000,
        });
        let ws = vec![
            WorkerDesc::new(0, 0, None).with_memory_node(0, bus),
            WorkerDesc::new(1, 0, None)
                .with_arch(ArchMask::GPU)
                .with_memory_node(1, bus),
        ];
        let p = Dmda::<T>::energy_aware(
            &ws,
            EnergyWeights {
                gamma: 0.0,
                ..EnergyWeights::default()
            },
        );
        p.push(
            T {
                gpu_missing: 4_000_000,
                ..t(2, 3e6, 1e6)
            },
            Origin::External,
        );
        assert_eq!(p.pop(0, &mut p.local(0)).map(|t| t.id), Some(2));
        p.push(
            T {
                gpu_missing: 1_000_000,
                ..t(3, 3e6, 1e6)
            },
            Origin::External,
        );
        assert_eq!(p.pop(1, &mut p.local(1)).map(|t| t.id), Some(3));
    }

    #[test]
    fn the_copies_a_task_needs_count_at_the_workers_bus() {
        // 1 GB/s and 10 us per copy to the GPU: 4 MB to copy cost 4.01 ms there.
        let bus = Some(crate::Bus {
            bytes_per_s: 1_000_000_000,
            latency_ns: 10_000,
        });
        let ws = vec![
            WorkerDesc::new(0, 0, None).with_memory_node(0, bus),
            WorkerDesc::new(1, 0, None)
                .with_arch(ArchMask::GPU)
                .with_memory_node(1, bus),
        ];
        let p = Dmda::<T>::new(&ws);
        let (mut l0, mut l1) = (p.local(0), p.local(1));
        // 3 ms on the CPU, 1 ms on the GPU: the GPU wins without copies, not with them.
        let task = |id, missing| T {
            gpu_missing: missing,
            ..t(id, 3e6, 1e6)
        };
        p.push(task(0, 4_000_000), Origin::External);
        assert_eq!(p.pop(0, &mut l0).map(|t| t.id), Some(0));
        p.done(0, &mut l0);
        p.push(task(1, 1_000_000), Origin::External);
        assert_eq!(
            p.pop(1, &mut l1).map(|t| t.id),
            Some(1),
            "1.01 ms + 1 ms < 3 ms"
        );
        // Without a measured bus, copies count for nothing.
        let p = Dmda::<T>::new(&[
            WorkerDesc::new(0, 0, None),
            WorkerDesc::new(1, 0, None)
                .with_arch(ArchMask::GPU)
                .with_memory_node(1, None),
        ]);
        p.push(task(2, 4_000_000), Origin::External);
        assert_eq!(p.pop(1, &mut p.local(1)).map(|t| t.id), Some(2));
    }

    #[test]
    fn a_task_goes_where_it_finishes_first() {
        let ws = vec![
            WorkerDesc::new(0, 0, None),
            WorkerDesc::new(1, 0, None).with_arch(ArchMask::GPU),
        ];
        let p = Dmda::<T>::new(&ws);
        let (mut l0, mut l1) = (p.local(0), p.local(1));
        // 10.5 times faster on the GPU: the first four go there (1 to 4 ms of GPU work
        // against 10.5 ms on the CPU).
        for id in 0..4 {
            p.push(t(id, 10.5e6, 1e6), Origin::External);
        }
        assert!(p.pop(0, &mut l0).is_none());
        let on_gpu: Vec<u32> = std::iter::from_fn(|| p.pop(1, &mut l1).map(|t| t.id)).collect();
        assert_eq!(on_gpu, [0, 1, 2, 3]);
        // Ten more fit on the GPU before 10.5 ms once those four are done; the eleventh is
        // better on the CPU.
        for _ in 0..4 {
            p.done(1, &mut l1);
        }
        for id in 4..15 {
            p.push(t(id, 10.5e6, 1e6), Origin::External);
        }
        assert_eq!(
            p.pop(0, &mut l0).map(|t| t.id),
            Some(14),
            "the 11th: 11 ms > 10.5 ms"
        );
        assert!(p.pop(0, &mut l0).is_none());
    }

    #[test]
    fn tasks_a_worker_took_ahead_count_until_each_is_done() {
        let ws = vec![
            WorkerDesc::new(0, 0, None),
            WorkerDesc::new(1, 0, None).with_arch(ArchMask::GPU),
        ];
        let p = Dmda::<T>::new(&ws);
        let (mut l0, mut l1) = (p.local(0), p.local(1));
        // The GPU worker takes three 3 ms tasks (one running, two ahead for its
        // prefetcher) and finishes one: 6 ms of them are still in hand.
        for id in 0..3 {
            p.push(t(id, 10e6, 3e6), Origin::External);
        }
        for _ in 0..3 {
            assert!(p.pop(1, &mut l1).is_some());
        }
        p.done(1, &mut l1);
        // A task of 5 ms on the GPU against 10 on the CPU: 6 + 5 = 11 > 10, the CPU.
        p.push(t(3, 10e6, 5e6), Origin::External);
        assert_eq!(p.pop(0, &mut l0).map(|t| t.id), Some(3));
        // Both others done: the GPU is free again and takes the next.
        p.done(1, &mut l1);
        p.done(1, &mut l1);
        p.push(t(4, 10e6, 5e6), Origin::External);
        assert_eq!(p.pop(1, &mut l1).map(|t| t.id), Some(4));
    }

    #[test]
    fn a_helper_is_never_chosen_and_takes_the_next_task_of_the_most_loaded_queue() {
        let mut ws = WorkerDesc::flat(3);
        ws[2] = ws[2].clone().as_helper();
        let p = Dmda::<T>::new(&ws);
        let (mut l0, mut l1, mut lh) = (p.local(0), p.local(1), p.local(2));
        // 1, 2, 3... ms on the CPU: each goes to the worker that ends first, never the
        // helper, though it is idle.
        for id in 0..6 {
            p.push(t(id, (1 + id) as f64 * 1e6, 1.0), Origin::External);
        }
        let queued = |w: usize| p.queues[w].lock().tasks.len();
        assert_eq!(queued(2), 0, "nothing given to the helper");
        assert_eq!(queued(0) + queued(1), 6);
        let heavier = if p.queues[0].lock().queued_ns >= p.queues[1].lock().queued_ns {
            0
        } else {
            1
        };
        let front = p.queues[heavier].lock().tasks.front().map(|e| e.0.id);
        assert_eq!(
            p.pop(2, &mut lh).map(|t| t.id),
            front,
            "the most loaded queue's next"
        );
        // The rest go to their workers.
        let mut rest = 0;
        while p.pop(0, &mut l0).is_some() || p.pop(1, &mut l1).is_some() {
            rest += 1;
        }
        assert_eq!(rest, 5);
        assert!(p.pop(2, &mut lh).is_none());
        // The helper alone (no other CPU worker): it is given the task.
        let only = vec![WorkerDesc::new(0, 0, None).as_helper()];
        let p = Dmda::<T>::new(&only);
        let mut l = p.local(0);
        p.push(t(9, 1e6, 1.0), Origin::External);
        assert_eq!(p.pop(0, &mut l).map(|t| t.id), Some(9));
    }

    #[test]
    fn uncalibrated_tasks_explore_and_dmdas_sorts_by_priority() {
        let ws = WorkerDesc::flat(2);
        let p = Dmda::<T>::sorted(&ws);
        let (mut l0, mut l1) = (p.local(0), p.local(1));
        for (id, prio) in [(0, 0), (1, 5), (2, 0), (3, 5)] {
            p.push(
                T {
                    id,
                    prio,
                    cpu_ns: None,
                    gpu_ns: None,
                    gpu_missing: 0,
                },
                Origin::External,
            );
        }
        // Spread over both workers by load, each queue by priority.
        let a: Vec<(u32, i32)> =
            std::iter::from_fn(|| p.pop(0, &mut l0).map(|t| (t.id, t.prio))).collect();
        let b: Vec<(u32, i32)> =
            std::iter::from_fn(|| p.pop(1, &mut l1).map(|t| (t.id, t.prio))).collect();
        assert_eq!(a.len() + b.len(), 4);
        assert_eq!(a.len(), 2, "{a:?} {b:?}");
        for q in [&a, &b] {
            assert!(q.windows(2).all(|w| w[0].1 >= w[1].1), "{q:?}");
        }
    }
}
