//! A simulated run as a trace (which `report`, `export` and `predict` read) and as a
//! summary (makespan, energy per domain and per type).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use taskwatt_traces::{
    Arch, Domain, GroundTruth, Marker, MeterInfo, RunEnd, RunMeta, RunOutcome, TaskChunk,
    Timestamp, TopologyInfo, Trace,
};

use crate::engine::{SimRun, T0_NS};
use crate::graph::Graph;
use crate::platform::Platform;

/// The trace of a simulated run: every task at its virtual time, the simulated copies,
/// the simulated meters' samples and truth, a `graph` marker over the run. Its meta says
/// it is simulated (`params.simulated = "virtual time"`, the platform, the source trace).
pub fn to_trace(run: &SimRun, graph: &Graph, platform: &Platform, source: Option<&Trace>) -> Trace {
    to_trace_with(run, graph, platform, source, true)
}

/// [`to_trace`], with the source's data accesses only when `accesses`: without them the
/// trace serves [`figures`], [`type_energy`] and predictions at a fraction of the memory (a
/// 1 M-task graph's accesses are 6 M records, 190 MB).
pub fn to_trace_with(
    run: &SimRun,
    graph: &Graph,
    platform: &Platform,
    source: Option<&Trace>,
    accesses: bool,
) -> Trace {
    let mut meta = source.map(|t| t.meta.clone()).unwrap_or_default();
    // The recording's parameters describe the recording (its period, GPUs, calibration):
    // kept under `recorded_`.
    meta.params = meta
        .params
        .into_iter()
        .map(|(k, v)| (format!("recorded_{k}"), v))
        .collect();
    meta = RunMeta {
        taskwatt_version: env!("CARGO_PKG_VERSION").to_owned(),
        policy: run.policy.clone(),
        host: format!("virtual: {}", platform.name),
        wall_start_unix_ns: 0,
        clock_origin_unix_ns: 0,
        command_line: std::env::args().collect(),
        workers: run.workers.clone(),
        topology: TopologyInfo {
            source: format!("platform {}", platform.origin),
            packages: platform.packages,
            cores: platform.packages * platform.cores_per_package,
            pus: platform.packages * platform.cores_per_package,
            numa_nodes: platform.packages,
        },
        ..meta
    };
    meta.params
        .insert("simulated".into(), "virtual time".into());
    meta.params.insert("platform".into(), platform.name.clone());
    if let Some(src) = source {
        meta.params
            .insert("recorded_policy".into(), src.meta.policy.clone());
        meta.params
            .insert("recorded_host".into(), src.meta.host.clone());
    }
    let mut codelets = graph.codelets.clone();
    for c in &mut codelets {
        for (_, r) in &run.records {
            if r.codelet == c.id && !c.archs.contains(&r.arch) {
                c.archs.push(r.arch);
            }
        }
    }
    let mut chunk = TaskChunk::with_capacity(run.records.len(), graph.preds.len());
    let mut preds = Vec::new();
    for (i, r) in &run.records {
        preds.clear();
        preds.extend(
            graph
                .preds(*i as usize)
                .iter()
                .map(|&p| graph.tasks[p as usize].id),
        );
        chunk.push(*r, &preds);
    }
    let end = Timestamp(T0_NS + run.makespan_ns);
    let (meters, domains, samples, truth) = match &run.energy {
        Some(e) => (
            vec![MeterInfo {
                id: 0,
                backend: "sim".into(),
                simulated: true,
                description: format!(
                    "simulated meter in virtual time on platform {} (not a measurement, not \
                     a run): {} ms sampling",
                    platform.name,
                    e.period_ns / 1_000_000
                ),
            }],
            e.domains.clone(),
            e.samples.clone(),
            e.truth.clone(),
        ),
        None => (Vec::new(), Vec::new(), Vec::new(), None),
    };
    Trace {
        meta,
        codelets,
        tasks: vec![chunk],
        meters,
        domains,
        samples: samples.clone(),
        truth,
        markers: vec![Marker {
            name: "graph".into(),
            start: Timestamp(T0_NS),
            end,
        }],
        transfers: run.transfers.clone(),
        accesses: source
            .filter(|_| accesses)
            .map(|t| {
                // The graph's tasks, sorted, to keep the accesses of those it holds.
                let mut ids: Vec<u64> = graph.tasks.iter().map(|t| t.id).collect();
                ids.sort_unstable();
                t.accesses
                    .iter()
                    .filter(|a| ids.binary_search(&a.task).is_ok())
                    .copied()
                    .collect()
            })
            .unwrap_or_default(),
        comms: Vec::new(),
        // The source's names, so that the simulated copies are shown by them.
        handles: source.map(|t| t.handles.clone()).unwrap_or_default(),
        frequencies: Vec::new(),
        evictions: Vec::new(),
        end: Some(RunEnd {
            tasks: run.tasks as u64,
            failed: 0,
            samples: samples.len() as u64,
            first_start: run
                .records
                .iter()
                .map(|(_, r)| r.start)
                .min()
                .unwrap_or(Timestamp(T0_NS)),
            last_end: end,
            wall_end_unix_ns: 0,
            outcome: RunOutcome::Complete,
        }),
    }
}

/// Energy of one domain over a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainEnergy {
    /// The domain.
    pub domain: Domain,
    /// Its name.
    pub name: String,
    /// Energy over the window, J (samples interpolated linearly at its ends).
    pub energy_j: f64,
    /// Whether it counts in the total (a second sensor of a device does not).
    pub in_total: bool,
}

/// The energy of one task type.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TypeEnergy {
    /// `codelet@arch`.
    pub key: String,
    /// Tasks.
    pub count: u64,
    /// Summed durations, s.
    pub busy_s: f64,
    /// Its extra (dynamic) energy over every domain, J: from the platform's meter truth.
    pub dynamic_j: f64,
}

/// Makespan and energy of a run, simulated or recorded, over its graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunFigures {
    /// First task event (release or submission) to last task end, s.
    pub makespan_s: f64,
    /// Per domain, over the same window.
    pub domains: Vec<DomainEnergy>,
    /// Sum of the domains that count, J; `None` without energy samples.
    pub total_j: Option<f64>,
}

/// The energy of each domain of `trace` between `a` and `b` (trace clock), from its
/// samples interpolated linearly; domains with fewer than two samples are left out.
pub fn window_energy(trace: &Trace, a: u64, b: u64) -> Vec<DomainEnergy> {
    let mut by: BTreeMap<u16, Vec<(u64, f64)>> = BTreeMap::new();
    for s in &trace.samples {
        by.entry(s.domain)
            .or_default()
            .push((s.t.as_ns(), s.energy_j));
    }
    let mut seen: Vec<&taskwatt_traces::DomainInfo> = Vec::new();
    let mut out = Vec::new();
    for d in &trace.domains {
        let Some(v) = by.get_mut(&d.id) else { continue };
        if v.len() < 2 {
            continue;
        }
        v.sort_by_key(|x| x.0);
        let at = |t: u64| -> f64 {
            let k = v.partition_point(|x| x.0 <= t);
            if k == 0 {
                return v[0].1;
            }
            if k == v.len() {
                return v[k - 1].1;
            }
            let ((t0, e0), (t1, e1)) = (v[k - 1], v[k]);
            if t1 == t0 {
                return e1;
            }
            e0 + (e1 - e0) * (t - t0) as f64 / (t1 - t0) as f64
        };
        let in_total = !seen.iter().any(|x| x.same_device(d));
        seen.push(d);
        out.push(DomainEnergy {
            domain: d.domain,
            name: d.name.clone(),
            energy_j: at(b) - at(a),
            in_total,
        });
    }
    out
}

/// Makespan and energy of any trace over its graph's span: first submission to last end
/// of the tasks inside its `graph` markers (all its tasks when it has none), so that
/// calibration phases around the graph do not count.
pub fn figures(trace: &Trace) -> RunFigures {
    let windows = crate::graph::graph_windows(trace);
    let (mut a, mut b) = (u64::MAX, 0u64);
    for (r, _) in trace.tasks() {
        if !crate::graph::in_windows(&windows, r.start.as_ns()) {
            continue;
        }
        a = a.min(r.submit.as_ns().min(r.start.as_ns()));
        b = b.max(r.end.as_ns());
    }
    if a > b {
        (a, b) = (0, 0);
    }
    RunFigures::new((b - a) as f64 * 1e-9, window_energy(trace, a, b))
}

impl RunFigures {
    /// The figures of `domains` over a run of `makespan_s`: the total sums those that count.
    fn new(makespan_s: f64, domains: Vec<DomainEnergy>) -> RunFigures {
        let total_j = (!domains.is_empty()).then(|| {
            domains
                .iter()
                .filter(|d| d.in_total)
                .map(|d| d.energy_j)
                .sum()
        });
        RunFigures {
            makespan_s,
            domains,
            total_j,
        }
    }
}

/// Makespan and energy of a simulated run: its energy per domain is the machine's,
/// exactly ([`crate::SimEnergy::exact_j`]), not interpolated from its meters' readings as
/// [`figures`] must for a recorded run; without meters, as [`figures`] of `trace` (its
/// output trace).
pub fn sim_figures(run: &SimRun, trace: &Trace) -> RunFigures {
    let Some(e) = run
        .energy
        .as_ref()
        .filter(|e| e.exact_j.len() == e.domains.len())
    else {
        return figures(trace);
    };
    let mut seen: Vec<&taskwatt_traces::DomainInfo> = Vec::new();
    let mut domains = Vec::new();
    for d in &e.domains {
        let in_total = !seen.iter().any(|x| x.same_device(d));
        seen.push(d);
        domains.push(DomainEnergy {
            domain: d.domain,
            name: d.name.clone(),
            energy_j: e.exact_j[d.id as usize],
            in_total,
        });
    }
    RunFigures::new(run.makespan_ns as f64 * 1e-9, domains)
}

/// Each type's count, busy time and dynamic energy under the meter's truth.
pub fn type_energy(trace: &Trace, truth: &GroundTruth) -> Vec<TypeEnergy> {
    let names: HashMap<u32, &str> = trace
        .codelets
        .iter()
        .map(|c| (c.id, c.name.as_str()))
        .collect();
    // Extra power of (codelet, arch) on every domain that covers a worker.
    let extra = |codelet: &str, arch: Arch, domain: u16| -> f64 {
        let pick = |name: &str| {
            truth
                .task_w
                .iter()
                .find(|e| e.domain == domain && e.codelet == name && e.arch == arch)
                .map(|e| e.extra_w)
        };
        truth
            .codelet_entry(codelet)
            .and_then(pick)
            .or_else(|| pick("*"))
            .unwrap_or(0.0)
    };
    let mut covers: HashMap<u32, Vec<u16>> = HashMap::new();
    let mut seen: Vec<&taskwatt_traces::DomainInfo> = Vec::new();
    for d in &trace.domains {
        if seen.iter().any(|x| x.same_device(d)) {
            continue;
        }
        seen.push(d);
        for w in &d.workers {
            covers.entry(*w).or_default().push(d.id);
        }
    }
    let mut acc: BTreeMap<String, (u64, f64, f64)> = BTreeMap::new();
    let mut watts: HashMap<(u32, Arch, u32), f64> = HashMap::new();
    for (r, _) in trace.tasks() {
        let name = names.get(&r.codelet).copied().unwrap_or("?");
        let w = *watts
            .entry((r.codelet, r.arch, r.worker))
            .or_insert_with(|| {
                covers
                    .get(&r.worker)
                    .map_or(0.0, |ds| ds.iter().map(|&d| extra(name, r.arch, d)).sum())
            });
        let s = r.end.as_ns().saturating_sub(r.start.as_ns()) as f64 * 1e-9;
        let e = acc.entry(format!("{name}@{}", r.arch.name())).or_default();
        e.0 += 1;
        e.1 += s;
        e.2 += w * s;
    }
    acc.into_iter()
        .map(|(key, (count, busy_s, dynamic_j))| TypeEnergy {
            key,
            count,
            busy_s,
            dynamic_j,
        })
        .collect()
}
