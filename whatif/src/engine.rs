//! The discrete-event engine: workers, the policy, virtual time, the simulated meters.
//!
//! One thread plays every worker. Time jumps from event to event (a task's start, after
//! the runtime's overhead and its copies, and its end). At each event the real policy
//! object decides, as in a run: a released task is pushed with the releasing worker as
//! origin, then that worker is told it is done, then idle workers pop (the releasing one
//! first, as the runtime's worker takes one of the tasks it released). Policies that read
//! the time (dmda and its kin) read the virtual clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use taskwatt_energy::{Accumulator, ManualClock, Meter, RawReading, SimMeter};
use taskwatt_scheduler::{
    create_policy_with, ArchMask, Local, Origin, Policy, PolicyClock, PolicyOptions, SchedTask,
};
use taskwatt_traces::{
    Arch, DomainInfo, EnergySample, ExecutionObserver, GroundTruth, TaskRecord, Timestamp,
    Transfer, WorkerInfo,
};

use crate::graph::Graph;
use crate::platform::{Durations, Platform};
use crate::WhatIfError;

/// Virtual time of the first event, ns (the trace clock of a simulated run starts here).
pub const T0_NS: u64 = 1_000_000_000;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// The scheduling policy (a name of `taskwatt_scheduler::POLICIES`; `taskwatt
    /// simulate --help` lists them).
    pub policy: String,
    /// The policies' knobs (dmdae's weights; `None` fields: defaults and environment).
    pub policy_options: PolicyOptions,
    /// Run the simulated meters (off: time only, for throughput).
    pub energy: bool,
    /// Keep every task record, copy and sample for a trace.
    pub record: bool,
    /// Extra power of each (codelet, architecture), W, for dmdae.
    pub task_powers: Vec<(String, Arch, f64)>,
    /// A replica of the run for a prediction's interval: each task's duration is its
    /// type's mean times a deviation drawn, with this seed, from its type's recorded ones
    /// (`duration / mean of its codelet and footprint`). `None`: the durations as the
    /// platform's `durations` says.
    pub replica_seed: Option<u64>,
    /// Scale CPU durations by the recorded contention laws (`contention.rs`) to the busy
    /// cores of the simulated package (default true).
    pub contention: bool,
}

impl SimOptions {
    /// `policy`, with the meters and the records.
    pub fn new(policy: &str) -> Self {
        SimOptions {
            policy: policy.to_owned(),
            policy_options: PolicyOptions::default(),
            energy: true,
            record: true,
            task_powers: Vec::new(),
            replica_seed: None,
            contention: true,
        }
    }
}

/// What the meters of a simulated run read.
#[derive(Clone, Debug, Default)]
pub struct SimEnergy {
    /// Domains (ids from 0), as in a trace.
    pub domains: Vec<DomainInfo>,
    /// Samples, in time order.
    pub samples: Vec<EnergySample>,
    /// The meters' truth.
    pub truth: Option<GroundTruth>,
    /// The sampling period, ns.
    pub period_ns: u64,
    /// Each domain's energy over the run (from [`T0_NS`] to the last task's end), exactly:
    /// the simulated machine's, without the sensors' update interval, quantisation or
    /// noise, which the samples keep (a GPU counter refreshed every 50 ms cannot tell the
    /// energy of a 33 ms graph, and interpolating its readings spreads it over the idle
    /// time after). By domain id.
    pub exact_j: Vec<f64>,
}

/// The outcome of a simulation.
#[derive(Clone, Debug, Default)]
pub struct SimRun {
    /// The policy's name.
    pub policy: String,
    /// The workers.
    pub workers: Vec<WorkerInfo>,
    /// First task release to last task end, ns.
    pub makespan_ns: u64,
    /// Tasks run.
    pub tasks: usize,
    /// Tasks per worker.
    pub per_worker: Vec<u64>,
    /// Busy time (overhead, copies and tasks) per worker, ns.
    pub busy_ns: Vec<u64>,
    /// Per-task overhead used, ns: the platform's constant, or the mean of the draws from
    /// the recorded run's distribution.
    pub overhead_ns: u64,
    /// Where the overhead came from, in words (the platform's constant, or the recorded
    /// run's hand-offs with their median and 99th percentile).
    pub overhead_source: String,
    /// The task records (ids of the recorded run, virtual times from [`T0_NS`]), in end
    /// order, with the index of each task in the graph; empty unless recording.
    pub records: Vec<(u32, TaskRecord)>,
    /// The simulated copies.
    pub transfers: Vec<Transfer>,
    /// Copies and bytes (counted even when not recording).
    pub copies: (u64, u64),
    /// The meters' readings, when energy was simulated.
    pub energy: Option<SimEnergy>,
    /// Events processed.
    pub events: u64,
}

/// The task the policy sees.
struct SimTask {
    idx: u32,
    priority: i32,
    archs: ArchMask,
    expected: [f32; 2],
    power: [f32; 2],
    data: Option<Arc<Replicas>>,
}

fn arch_slot(arch: ArchMask) -> usize {
    usize::from(arch == ArchMask::GPU)
}

impl SchedTask for SimTask {
    fn priority(&self) -> i32 {
        self.priority
    }

    fn archs(&self) -> ArchMask {
        self.archs
    }

    fn expected_ns(&self, arch: ArchMask) -> Option<f64> {
        let e = self.expected[arch_slot(arch)];
        e.is_finite().then_some(f64::from(e))
    }

    fn expected_power_w(&self, arch: ArchMask) -> Option<f64> {
        let p = self.power[arch_slot(arch)];
        p.is_finite().then_some(f64::from(p))
    }

    fn transfer_bytes(&self, node: usize) -> (u32, u64) {
        match &self.data {
            Some(d) => d.missing(self.idx as usize, node),
            None => (0, 0),
        }
    }
}

/// Which memory nodes hold a valid copy of each handle (bit per node), and the accesses,
/// shared with the tasks so that dmda can ask what a task would need to copy.
struct Replicas {
    valid: Vec<AtomicU32>,
    acc_start: Arc<Vec<u32>>,
    acc: Arc<Vec<crate::graph::Access>>,
}

impl Replicas {
    fn missing(&self, task: usize, node: usize) -> (u32, u64) {
        let (mut n, mut bytes) = (0, 0);
        for a in &self.acc[self.acc_start[task] as usize..self.acc_start[task + 1] as usize] {
            if a.reads && self.valid[a.handle as usize].load(Ordering::Relaxed) & (1 << node) == 0 {
                n += 1;
                bytes += a.bytes;
            }
        }
        (n, bytes)
    }
}

/// The virtual clock, ns since the first event.
struct VClock(AtomicU64);

impl PolicyClock for VClock {
    fn now_ns(&self) -> f64 {
        self.0.load(Ordering::Relaxed) as f64
    }
}

/// Durations of each task on each architecture (`u64::MAX`: cannot run there), the
/// actual ones and the expected ones a perf model would give.
struct Speeds {
    actual: Vec<[u64; 2]>,
    expected: Vec<[f32; 2]>,
}

pub use crate::interrupt::INTERRUPTION;

fn speeds(
    g: &Graph,
    p: &Platform,
    replica: Option<u64>,
    contention: bool,
) -> Result<Speeds, WhatIfError> {
    // Means per (codelet, footprint, arch) and per (codelet, arch).
    let mut by_fp: HashMap<(u32, u64, Arch), (f64, u64)> = HashMap::new();
    let mut by_cl: HashMap<(u32, Arch), (f64, u64)> = HashMap::new();
    for t in &g.tasks {
        let e = by_fp.entry((t.codelet, t.footprint, t.arch)).or_default();
        e.0 += t.duration_ns as f64;
        e.1 += 1;
        let e = by_cl.entry((t.codelet, t.arch)).or_default();
        e.0 += t.duration_ns as f64;
        e.1 += 1;
    }
    let mean = |c: u32, fp: u64, a: Arch| -> Option<f64> {
        by_fp
            .get(&(c, fp, a))
            .or_else(|| by_cl.get(&(c, a)))
            .map(|(s, n)| s / *n as f64)
    };
    // A replica's deviations: per (codelet, architecture), each recorded task's duration
    // over its codelet and footprint's mean there.
    let mut deviations: HashMap<(u32, Arch), Vec<f64>> = HashMap::new();
    if replica.is_some() {
        // A task interrupted for far longer than it runs (a preemption on a loaded
        // machine: one trsm of 308 ms among ones of 0.48 ms) is not its type's
        // variability: drawn 0 to 3 times per replica, it made a replay's interval 70
        // times wide. The replay itself keeps its recorded duration.
        let interrupted = g.interrupted();
        for (t, _) in g.tasks.iter().zip(&interrupted).filter(|(_, i)| !**i) {
            if let Some(m) = mean(t.codelet, t.footprint, t.arch).filter(|m| *m > 0.0) {
                deviations
                    .entry((t.codelet, t.arch))
                    .or_default()
                    .push(t.duration_ns as f64 / m);
            }
        }
    }
    let lists_gpu: HashMap<u32, bool> = g
        .codelets
        .iter()
        .map(|c| (c.id, c.archs.contains(&Arch::Gpu)))
        .collect();
    // Each codelet's mean recorded occupancy, where the trace has them: the durations
    // that are means are at it (`contention.rs`).
    let mut occ_mean: HashMap<u32, (f64, f64)> = HashMap::new();
    for (t, &k) in g.tasks.iter().zip(&g.occupancy) {
        if t.arch == Arch::Cpu {
            let e = occ_mean.entry(t.codelet).or_default();
            e.0 += k;
            e.1 += 1.0;
        }
    }
    // A replica also draws the machine's speed on the CPUs: the recording's wander
    // between stretches as long as its graph (wander.rs), where calibration showed it.
    let machine = match (replica, g.wander) {
        (Some(seed), Some(w)) => {
            let z = taskwatt_energy::SplitMix64::new(seed ^ 0x5EED_0F_C0E5).next_normal();
            (1.0 + w * z).clamp(0.5, 1.5)
        }
        _ => 1.0,
    };
    let mut actual = Vec::with_capacity(g.tasks.len());
    let mut expected = Vec::with_capacity(g.tasks.len());
    for (i, t) in g.tasks.iter().enumerate() {
        let name = g.codelet_name(t.codelet);
        let own = |a: Arch, recorded: bool| -> Option<f64> {
            if a == t.arch && recorded {
                Some(t.duration_ns as f64)
            } else {
                mean(t.codelet, t.footprint, a)
            }
        };
        let mut act = [u64::MAX; 2];
        let mut exp = [f32::NAN; 2];
        for a in Arch::ALL {
            if !p.has(a) {
                continue;
            }
            let pick = |recorded: bool| -> Option<f64> {
                let cpu_ref = own(Arch::Cpu, recorded);
                match p.factor(name, a) {
                    Some(f) => cpu_ref.map(|d| d / f).or_else(|| own(a, recorded)),
                    None => own(a, recorded).or_else(|| {
                        // Never ran there: as fast as on a core, if it has such an
                        // implementation (a GPU one) or is a CPU codelet.
                        let can = a == Arch::Cpu || lists_gpu.get(&t.codelet) == Some(&true);
                        if can {
                            cpu_ref
                        } else {
                            None
                        }
                    }),
                }
            };
            let recorded = p.durations == Durations::Recorded;
            let drawn = replica.and_then(|seed| {
                // The type's mean there, times a deviation of the type where it ran.
                let devs = deviations.get(&(t.codelet, t.arch))?;
                let k = crate::graph::mix(seed ^ crate::graph::mix(t.id)) % devs.len() as u64;
                pick(false).map(|m| m * devs[k as usize])
            });
            // On a CPU, the duration alone: the recorded one over its factor at the
            // occupancy it ran at (a mean's at its codelet's mean occupancy); the
            // simulation multiplies it by the factor at the occupancy it runs at.
            let alone = if contention && a == Arch::Cpu && g.laws.laws.contains_key(&t.codelet) {
                let k = match g.occupancy.get(i) {
                    Some(&k) if recorded && drawn.is_none() && t.arch == Arch::Cpu => k,
                    _ => occ_mean.get(&t.codelet).map_or(1.0, |(s, n)| s / n),
                };
                g.laws.factor(t.codelet, k)
            } else {
                1.0
            };
            if let Some(d) = drawn.or_else(|| pick(recorded)) {
                let machine = if a == Arch::Cpu { machine } else { 1.0 };
                act[a.index()] = (d / alone * machine).round().max(0.0) as u64;
            }
            if let Some(d) = pick(false) {
                exp[a.index()] = d as f32;
            }
        }
        if act.iter().all(|d| *d == u64::MAX) {
            let hint = if p.has(Arch::Gpu) {
                format!(
                    "it ran on a {} and the platform gives it no speed on its GPUs; add \
                     `{name} = {{ gpu = 4.0 }}` under [speed.factors] (times its CPU speed)",
                    t.arch.name()
                )
            } else {
                "it ran only on GPUs in the trace, and a CPU speed cannot be derived from GPU \
                 runs; give the platform GPUs ([gpu] count) or record it on CPUs"
                    .to_owned()
            };
            return Err(WhatIfError::NoWorker {
                task: t.id,
                codelet: name.to_owned(),
                ran: t.arch.name(),
                platform: p.name.clone(),
                hint,
            });
        }
        actual.push(act);
        expected.push(exp);
    }
    Ok(Speeds { actual, expected })
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    // Starts before ends at the same time: a task of no duration starts, then ends. (A
    // worker's next start is scheduled only once its end has been handled.)
    Start = 0,
    End = 1,
}

/// The meters in virtual time.
struct Meters {
    meter: SimMeter,
    clock: Arc<ManualClock>,
    obs: Arc<taskwatt_energy::SimObserver>,
    accs: Vec<Accumulator>,
    reads: Vec<taskwatt_energy::DomainRead>,
    next_ns: u64,
    period_ns: u64,
    out: SimEnergy,
}

impl Meters {
    fn new(p: &Platform, workers: &[WorkerInfo], g: &Graph) -> Result<Meters, WhatIfError> {
        let clock = Arc::new(ManualClock::new(Timestamp(T0_NS)));
        let meter =
            SimMeter::with_clock(p.meter.clone(), workers, clock.clone()).map_err(|source| {
                WhatIfError::Meter {
                    origin: p.origin.clone(),
                    source,
                }
            })?;
        let obs = meter.observer();
        for c in &g.codelets {
            obs.codelet_registered(c);
        }
        let specs = meter.domains().to_vec();
        let domains = specs
            .iter()
            .enumerate()
            .map(|(i, s)| s.info(i as u16, 0, workers))
            .collect();
        Ok(Meters {
            accs: specs.iter().map(Accumulator::for_domain).collect(),
            reads: specs.iter().map(|_| Ok(RawReading::Counter(0))).collect(),
            meter,
            clock,
            obs,
            next_ns: T0_NS,
            period_ns: p.period_ns,
            out: SimEnergy {
                domains,
                period_ns: p.period_ns,
                ..SimEnergy::default()
            },
        })
    }

    /// Reads every period boundary up to `t` (trace clock).
    fn until(&mut self, t: u64) {
        while self.next_ns <= t {
            let at = self.next_ns;
            self.clock.set(Timestamp(at));
            self.meter.read(&mut self.reads);
            for (i, r) in self.reads.iter_mut().enumerate() {
                let r = std::mem::replace(r, Ok(RawReading::Counter(0)));
                if let Ok(reading) = r {
                    let vt = self.meter.value_time(i).unwrap_or(Timestamp(at));
                    let energy_j = self.accs[i].update(vt, reading);
                    self.out.samples.push(EnergySample {
                        domain: i as u16,
                        t: vt,
                        wall_unix_ns: 0,
                        energy_j,
                        raw: reading.raw_for_trace(),
                    });
                }
            }
            self.next_ns += self.period_ns;
        }
        self.clock.set(Timestamp(t));
    }
}

/// Simulates `graph` on `platform` under `opts.policy`.
pub fn simulate(
    graph: &Graph,
    platform: &Platform,
    opts: &SimOptions,
) -> Result<SimRun, WhatIfError> {
    let n = graph.tasks.len();
    let workers = platform.workers();
    let descs = platform.worker_descs();
    let nw = workers.len();
    let clock = Arc::new(VClock(AtomicU64::new(0)));
    let policy: Box<dyn Policy<SimTask>> = create_policy_with(
        &opts.policy,
        &descs,
        Some(clock.clone()),
        &opts.policy_options,
    )?;
    let sp = speeds(graph, platform, opts.replica_seed, opts.contention)?;
    // Durations against the busy cores of their package (`contention.rs`): the recorded
    // laws, each slope drawn within its error in a replica.
    let laws = (opts.contention && !graph.laws.laws.is_empty()).then(|| match opts.replica_seed {
        Some(seed) => graph.laws.perturbed(seed),
        None => graph.laws.clone(),
    });
    let package_of: Vec<usize> = workers.iter().map(|w| w.package as usize).collect();
    let mut busy_cpus: Vec<u32> = vec![0; package_of.iter().max().map_or(1, |m| m + 1)];
    // The runtime's overhead per task: the platform's constant when it sets one, else a
    // draw from the recorded run's hand-offs (graph.rs, `Overhead`), else none.
    let measured = graph.measured_overhead();
    let replica_salt = opts
        .replica_seed
        .map_or(0, |s| crate::graph::mix(s ^ 0x0BE4_EAD0));
    let overhead_of = |i: usize| -> u64 {
        match (platform.overhead_ns, measured) {
            (Some(c), _) => c,
            // A replica draws afresh: the overhead's variability is in the intervals too.
            (None, Some(o)) => o.draw(graph.tasks[i].id ^ replica_salt),
            (None, None) => 0,
        }
    };
    let (overhead, overhead_source) = match (platform.overhead_ns, measured) {
        (Some(c), _) => (
            c,
            format!("the platform's constant, {:.1} us", c as f64 * 1e-3),
        ),
        (None, Some(o)) => (
            o.mean_ns.round() as u64,
            format!(
                "drawn per task from the recorded run's {} hand-offs: mean {:.1} us, median \
                 {:.1} us, 99th percentile {:.1} us",
                o.gaps,
                o.mean_ns * 1e-3,
                o.median_ns as f64 * 1e-3,
                o.p99_ns as f64 * 1e-3
            ),
        ),
        (None, None) => (0, "none (the trace shows no hand-off)".to_owned()),
    };
    let arch_of: Vec<Arch> = workers.iter().map(|w| w.arch).collect();
    let node_of: Vec<usize> = descs.iter().map(|d| d.memory_node).collect();
    let copies_on = platform.gpus > 0 && graph.has_accesses();
    let replicas = copies_on.then(|| {
        Arc::new(Replicas {
            // Every handle starts valid on the host.
            valid: (0..graph.handles).map(|_| AtomicU32::new(1)).collect(),
            acc_start: Arc::clone(&graph.acc_start),
            acc: Arc::clone(&graph.acc),
        })
    });
    let powers: HashMap<(&str, Arch), f64> = opts
        .task_powers
        .iter()
        .map(|(c, a, w)| ((c.as_str(), *a), *w))
        .collect();
    let make = |i: usize| -> SimTask {
        let t = &graph.tasks[i];
        let name = graph.codelet_name(t.codelet);
        let mut archs = ArchMask::NONE;
        for a in Arch::ALL {
            if sp.actual[i][a.index()] != u64::MAX {
                archs = archs.or(ArchMask::of_index(a.index()));
            }
        }
        let pw = |a: Arch| powers.get(&(name, a)).map_or(f32::NAN, |w| *w as f32);
        SimTask {
            idx: i as u32,
            priority: t.priority,
            archs,
            expected: sp.expected[i],
            power: [pw(Arch::Cpu), pw(Arch::Gpu)],
            data: replicas.clone(),
        }
    };
    let mut meters = if opts.energy {
        Some(Meters::new(platform, &workers, graph)?)
    } else {
        None
    };

    let mut run = SimRun {
        policy: policy.name().to_owned(),
        workers: workers.clone(),
        per_worker: vec![0; nw],
        busy_ns: vec![0; nw],
        overhead_ns: overhead,
        overhead_source,
        ..SimRun::default()
    };
    let mut pending = graph.npreds.clone();
    let mut ready_at = vec![0u64; if opts.record { n } else { 0 }];
    let mut locals: Vec<Local> = (0..nw).map(|w| policy.local(w)).collect();
    let mut idle = vec![true; nw];
    // The push count at a worker's last empty pop: it pops again only after a new push.
    let mut tried = vec![u64::MAX; nw];
    let mut pushes: u64 = 0;
    // The start of each worker's running task.
    let mut started: Vec<u64> = vec![0; nw];
    // (time, kind, worker, task)
    let mut heap: BinaryHeap<Reverse<(u64, Kind, u32, u32)>> = BinaryHeap::new();
    // When the last copy of each handle to each node lands (0: none in flight, or it has
    // landed long ago: either way nothing to wait for), `nodes` per handle. A task that
    // finds the copy valid but not there yet waits for it. Flat and indexed, so that a
    // write forgets the other nodes' copies in O(nodes), not O(copies ever made).
    let nodes = node_of.iter().copied().max().map_or(1, |m| m + 1);
    let mut landing: Vec<u64> = if copies_on {
        vec![0; graph.handles as usize * nodes]
    } else {
        Vec::new()
    };
    let at = |h: u32, node: usize| h as usize * nodes + node;
    for (i, _) in pending.iter().enumerate().filter(|(_, p)| **p == 0) {
        policy.push(make(i), Origin::External);
        pushes += 1;
    }
    let mut now: u64 = 0;
    let mut done = 0usize;
    let mut first: Option<usize> = None;
    let mut order: Vec<usize> = Vec::with_capacity(nw);
    loop {
        // Idle workers pop: the one that just finished first.
        order.clear();
        let f = first.take();
        order.extend(f);
        order.extend((0..nw).filter(|&w| Some(w) != f));
        for &w in &order {
            if !idle[w] || tried[w] == pushes {
                continue;
            }
            let Some(task) = policy.pop(w, &mut locals[w]) else {
                tried[w] = pushes;
                continue;
            };
            let i = task.idx as usize;
            let arch = arch_of[w];
            let mut dur = sp.actual[i][arch.index()];
            if dur == u64::MAX {
                // The policy gave a task to a worker that cannot run it.
                return Err(WhatIfError::Graph(format!(
                    "policy {} gave task {} ({}) to worker {w}, a {} worker it cannot run on",
                    run.policy,
                    graph.tasks[i].id,
                    graph.codelet_name(graph.tasks[i].codelet),
                    arch.name()
                )));
            }
            if arch == Arch::Cpu {
                // The duration at the busy cores of the package as the task starts.
                let pkg = package_of[w];
                busy_cpus[pkg] += 1;
                if let Some(l) = &laws {
                    let f = l.factor(graph.tasks[i].codelet, f64::from(busy_cpus[pkg]));
                    dur = (dur as f64 * f).round() as u64;
                }
            }
            let mut t = now + overhead_of(i);
            if let Some(r) = &replicas {
                let node = node_of[w];
                let mut ready = t;
                for a in graph.accesses(i) {
                    let v = &r.valid[a.handle as usize];
                    let mask = v.load(Ordering::Relaxed);
                    if a.reads && mask & (1 << node) != 0 {
                        // Valid here, but maybe still on its way.
                        ready = ready.max(landing[at(a.handle, node)]);
                    } else if a.reads {
                        // One copy, as the runtime makes it (runtime/src/handle.rs,
                        // `make_valid`): from the lowest node with a valid copy (the host
                        // when it has one). A copy between two GPUs is staged through main
                        // memory without peer access (docs/accelerators.md): two bus
                        // crossings, and the host's copy stays invalid.
                        let src = mask.trailing_zeros() as usize;
                        let crossings = if src != 0 && node != 0 { 2 } else { 1 };
                        let start = t.max(landing[at(a.handle, src)]);
                        let end = start + crossings * platform.bus.time_ns(1, a.bytes) as u64;
                        run.copies.0 += 1;
                        run.copies.1 += a.bytes;
                        if opts.record {
                            run.transfers.push(Transfer {
                                handle: graph.handle_ids[a.handle as usize],
                                src: src as u32,
                                dst: node as u32,
                                bytes: a.bytes,
                                worker: Some(w as u32),
                                task: Some(graph.tasks[i].id),
                                start: Timestamp(T0_NS + start),
                                end: Timestamp(T0_NS + end),
                                kind: taskwatt_traces::TransferKind::Fetch,
                            });
                        }
                        landing[at(a.handle, node)] = end;
                        t = end;
                        ready = ready.max(t);
                    }
                    if a.writes {
                        v.store(1 << node, Ordering::Relaxed);
                        for n in (0..nodes).filter(|&n| n != node) {
                            landing[at(a.handle, n)] = 0;
                        }
                    } else if a.reads {
                        v.store(mask | (1 << node), Ordering::Relaxed);
                    }
                }
                t = t.max(ready);
            }
            idle[w] = false;
            started[w] = t;
            run.busy_ns[w] += t - now + dur;
            heap.push(Reverse((t, Kind::Start, w as u32, task.idx)));
            heap.push(Reverse((t + dur, Kind::End, w as u32, task.idx)));
        }
        let Some(Reverse((t, kind, w, ti))) = heap.pop() else {
            break;
        };
        run.events += 1;
        now = t;
        clock.0.store(now, Ordering::Relaxed);
        let w = w as usize;
        let start = started[w];
        let i = ti as usize;
        let task = &graph.tasks[i];
        let arch = arch_of[w];
        if let Some(m) = meters.as_mut() {
            m.until(T0_NS + now);
        }
        match kind {
            Kind::Start => {
                if let Some(m) = &meters {
                    m.obs
                        .task_started(w as u32, task.codelet, arch, Timestamp(T0_NS + now));
                }
                continue;
            }
            Kind::End => {}
        }
        if arch == Arch::Cpu {
            let pkg = package_of[w];
            busy_cpus[pkg] = busy_cpus[pkg].saturating_sub(1);
        }
        if let Some(m) = &meters {
            m.obs
                .task_ended(w as u32, task.codelet, arch, Timestamp(T0_NS + now));
        }
        done += 1;
        run.per_worker[w] += 1;
        if opts.record {
            run.records.push((
                ti,
                TaskRecord {
                    id: task.id,
                    codelet: task.codelet,
                    arch,
                    worker: w as u32,
                    status: taskwatt_traces::TaskStatus::Ok,
                    priority: task.priority,
                    footprint: task.footprint,
                    submit: Timestamp(T0_NS),
                    ready: Timestamp(T0_NS + ready_at[i]),
                    start: Timestamp(T0_NS + start),
                    end: Timestamp(T0_NS + now),
                    preds_start: 0,
                    preds_len: 0,
                },
            ));
        }
        for &s in graph.succs(i) {
            let s = s as usize;
            pending[s] -= 1;
            if pending[s] == 0 {
                if opts.record {
                    ready_at[s] = now;
                }
                policy.push(
                    make(s),
                    Origin::Worker {
                        id: w,
                        local: &mut locals[w],
                    },
                );
                pushes += 1;
            }
        }
        policy.done(w, &mut locals[w]);
        idle[w] = true;
        tried[w] = u64::MAX;
        first = Some(w);
    }
    if done < n {
        return Err(WhatIfError::Stuck {
            policy: run.policy,
            left: n - done,
            at_ms: now as f64 * 1e-6,
        });
    }
    run.makespan_ns = now;
    run.tasks = done;
    if let Some(mut m) = meters {
        // The run's exact energy first: the meter is exact only up to its latest reading.
        m.until(T0_NS + now);
        m.out.exact_j = m.meter.exact_energy_j();
        // Until every domain has a value from after the end: a period more than the
        // slowest sensor's refresh (a GPU counter's value carries its last update's time).
        let refresh = m
            .out
            .domains
            .iter()
            .filter_map(|d| d.update_interval_ns)
            .max()
            .unwrap_or(0);
        m.until(T0_NS + now + refresh + m.period_ns);
        let ids: Vec<u16> = (0..m.out.domains.len() as u16).collect();
        m.out.truth = m.meter.ground_truth(&ids);
        run.energy = Some(m.out);
    }
    Ok(run)
}
