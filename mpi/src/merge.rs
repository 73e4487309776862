//! The traces of the ranks of a distributed run as one trace on rank 0's clock
//! (`taskwatt merge`).
//!
//! Each rank's trace holds its clock against rank 0's, estimated by ping-pong at the start
//! and the end of the run (`CommChunk::clock`); a rank's times are mapped by the line
//! through the two estimates (offset and drift). Workers, tasks, codelets, meters and
//! domains get ids unique in the job: rank r's task `id` becomes `r << 40 | id`, its
//! workers and domains follow those of the ranks before it, codelets are matched by name.
//! Then every receive must end after its send started; where a clock estimate was off by
//! more than that allows, the receiving rank is moved later by the smallest amount that
//! puts every receive after its send, and the report says by how much.
//!
//! Energy is per node: the ranks of a node (same `CommChunk::node`) share the domains its
//! first rank sampled, or, with the simulated meter, the merge runs the node's simulated
//! meter over all the node's tasks ([`taskwatt_energy::replay_sim`]).

use std::collections::{BTreeMap, HashMap};

use taskwatt_traces::{
    ClockSample, CodeletInfo, CommChunk, CommRecord, Marker, RunEnd, TaskChunk, Timestamp, Trace,
};

/// A rank's clock map: `t + offset(t)` on rank 0's clock.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct ClockMap {
    /// Offset at `at0`, ns.
    pub offset0: f64,
    /// Local time of the first estimate, ns.
    pub at0: f64,
    /// Drift: change of the offset per ns of local time.
    pub drift: f64,
    /// Extra shift that causality asked for, ns.
    pub shift: i64,
}

impl ClockMap {
    fn of(samples: &[ClockSample]) -> ClockMap {
        let (Some(a), Some(b)) = (samples.first(), samples.last()) else {
            return ClockMap {
                offset0: 0.0,
                at0: 0.0,
                drift: 0.0,
                shift: 0,
            };
        };
        let dt = b.at.as_ns() as f64 - a.at.as_ns() as f64;
        let drift = if dt > 0.0 {
            (b.offset_ns - a.offset_ns) as f64 / dt
        } else {
            0.0
        };
        ClockMap {
            offset0: a.offset_ns as f64,
            at0: a.at.as_ns() as f64,
            drift,
            shift: 0,
        }
    }

    fn map(&self, t: Timestamp) -> Timestamp {
        let x = t.as_ns() as f64;
        let y = x + self.offset0 + self.drift * (x - self.at0) + self.shift as f64;
        Timestamp(y.max(0.0).round() as u64)
    }
}

/// What a merge did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MergeReport {
    /// Ranks.
    pub ranks: usize,
    /// Tasks.
    pub tasks: usize,
    /// Messages matched (a send with its receive).
    pub messages: usize,
    /// Each rank's clock map.
    pub clocks: Vec<ClockMap>,
    /// Receives that ended before their send started, with the clock estimates alone.
    pub receives_before_send: usize,
    /// The same after the merge (0 unless the merge failed).
    pub after: usize,
    /// Sends and receives without their other half (a rank's trace cut short, or a job
    /// that ended on an error).
    pub unmatched: usize,
    /// The nodes, with their ranks, and how their energy was measured.
    pub nodes: Vec<NodeReport>,
}

/// One node of a merged run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeReport {
    /// Its name.
    pub node: String,
    /// Its ranks.
    pub ranks: Vec<u32>,
    /// `simulated at merge`, `sampled by rank R`, or `none`.
    pub energy: String,
}

/// Matches each receive with its send: the k-th message from `src` to `dst` of a handle.
/// Returns (send rank, send index, recv rank, recv index).
fn pairs(comms: &[CommChunk]) -> Vec<(usize, usize, usize, usize)> {
    let mut sends: HashMap<(u32, u32, u32), Vec<usize>> = HashMap::new();
    let mut recvs: HashMap<(u32, u32, u32), Vec<usize>> = HashMap::new();
    for c in comms {
        for (i, e) in c.events.iter().enumerate() {
            if e.send {
                sends.entry((c.rank, e.peer, e.handle)).or_default().push(i);
            } else {
                recvs.entry((e.peer, c.rank, e.handle)).or_default().push(i);
            }
        }
    }
    let rank_index: HashMap<u32, usize> =
        comms.iter().enumerate().map(|(i, c)| (c.rank, i)).collect();
    let mut out = Vec::new();
    for (key, rs) in &recvs {
        let Some(ss) = sends.get(key) else { continue };
        let (src, dst) = (rank_index[&key.0], rank_index[&key.1]);
        // Both lists are in completion order; messages of one handle between two ranks
        // are ordered by the flow, so sort by start.
        let mut ss = ss.clone();
        ss.sort_by_key(|&i| comms[src].events[i].start);
        let mut rs = rs.clone();
        rs.sort_by_key(|&i| comms[dst].events[i].start);
        for (s, r) in ss.into_iter().zip(rs) {
            out.push((src, s, dst, r));
        }
    }
    out
}

fn violations(comms: &[CommChunk], pairs: &[(usize, usize, usize, usize)]) -> Vec<(usize, u64)> {
    pairs
        .iter()
        .filter_map(|&(s, si, r, ri)| {
            let send = comms[s].events[si].start;
            let recv = comms[r].events[ri].end;
            (recv < send).then(|| (r, send.as_ns() - recv.as_ns()))
        })
        .collect()
}

/// Merges the traces of every rank of a distributed run (any order) into one trace on
/// rank 0's clock; see the module docs. Each input is `(name, trace)`, the name for errors.
pub fn merge(inputs: Vec<(String, Trace)>) -> Result<(Trace, MergeReport), String> {
    one_job(&inputs)?;
    merge_any_jobs(inputs)
}

/// The meta parameter that names a distributed run: rank 0's draw, gathered by every rank
/// before its runtime starts (`taskwatt run --mpi`), so that the ranks of one job share it.
pub const JOB_PARAM: &str = "mpi_job";

/// Refuses traces of different jobs (a trace without [`JOB_PARAM`], from an older taskwatt
/// or a job run as threads, is taken as any job's): merged, their messages would not pair
/// and their clocks would be aligned on each other's, a wrong view that looks right.
pub fn one_job(inputs: &[(String, Trace)]) -> Result<(), String> {
    let mut jobs: Vec<(&str, &str)> = inputs
        .iter()
        .filter_map(|(name, t)| Some((t.meta.params.get(JOB_PARAM)?.as_str(), name.as_str())))
        .collect();
    jobs.sort_unstable();
    jobs.dedup_by_key(|(job, _)| *job);
    if jobs.len() > 1 {
        let list: Vec<String> = jobs
            .iter()
            .map(|(job, name)| format!("{name} is of job {job}"))
            .collect();
        return Err(format!(
            "these traces come from {} different jobs ({}): give the traces of one job (each \
             rank's `STEM.rankN.twt` of one `mpirun`), or --force to merge them anyway",
            jobs.len(),
            list.join(", ")
        ));
    }
    Ok(())
}

/// [`merge`] without the check that the traces are of one job ([`one_job`]): `merge
/// --force`.
pub fn merge_any_jobs(inputs: Vec<(String, Trace)>) -> Result<(Trace, MergeReport), String> {
    let mut ranks: Vec<(Trace, CommChunk)> = Vec::new();
    for (name, t) in inputs {
        // A rank writes a Comms chunk at its start, partial ones with its messages as they
        // complete, and a complete one at its end. The last whole one is the most
        // complete; without its end's (a rank killed mid-run), its messages are those of
        // the partial chunks.
        let partial: Vec<CommRecord> = t
            .comms
            .iter()
            .filter(|c| c.partial)
            .flat_map(|c| c.events.iter().copied())
            .collect();
        let mut of_ranks: Vec<u32> = t.comms.iter().map(|c| c.rank).collect();
        of_ranks.sort_unstable();
        of_ranks.dedup();
        if of_ranks.len() > 1 {
            return Err(format!(
                "{name}: already a merged job's trace (ranks {of_ranks:?}): `taskwatt report` \
                 and `export` read it as it is; to merge again, give the ranks' own traces \
                 (t.rank0.twt, t.rank1.twt, ...)"
            ));
        }
        let c = match t.comms.iter().rev().find(|c| !c.partial).cloned() {
            Some(mut c) => {
                if c.events.is_empty() {
                    c.events = partial;
                }
                c
            }
            // A rank cut short before its first Comms chunk (a job that ended on a failure
            // at its start): its rank from its meta, no clock estimate, no message.
            None => {
                let param = |k: &str| t.meta.params.get(k).and_then(|v| v.parse::<u32>().ok());
                let (Some(rank), Some(size)) = (param("mpi_rank"), param("mpi_size")) else {
                    return Err(format!(
                        "{name}: not the trace of a rank of a distributed run (no Comms chunk \
                         and no mpi_rank in its meta; write them with `mpirun -np N taskwatt \
                         run APP --mpi --trace t.twt`)"
                    ));
                };
                CommChunk {
                    rank,
                    size,
                    workers: t.meta.workers.iter().map(|w| w.id).collect(),
                    events: partial,
                    ..CommChunk::default()
                }
            }
        };
        ranks.push((t, c));
    }
    if ranks.is_empty() {
        return Err("no trace to merge".into());
    }
    ranks.sort_by_key(|(_, c)| c.rank);
    let size = ranks[0].1.size as usize;
    let have: Vec<u32> = ranks.iter().map(|(_, c)| c.rank).collect();
    let missing: Vec<String> = (0..size as u32)
        .filter(|r| !have.contains(r))
        .map(|r| r.to_string())
        .collect();
    let twice: Vec<String> = ranks
        .windows(2)
        .filter(|w| w[0].1.rank == w[1].1.rank)
        .map(|w| w[0].1.rank.to_string())
        .collect();
    if !twice.is_empty() {
        return Err(format!(
            "rank(s) {} given more than once: give each rank's trace once (the job had \
             {size} ranks{})",
            twice.join(", "),
            if missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", missing.join(", "))
            }
        ));
    }
    if !missing.is_empty() || have.len() != size {
        return Err(format!(
            "the job had {size} ranks; the traces given are of ranks {have:?} (missing: {}): give \
             each rank's trace once",
            missing.join(", ")
        ));
    }
    // Clock maps, then every time of every rank on rank 0's clock.
    let mut maps: Vec<ClockMap> = ranks.iter().map(|(_, c)| ClockMap::of(&c.clock)).collect();
    let mapped = |maps: &[ClockMap]| -> Vec<CommChunk> {
        ranks
            .iter()
            .zip(maps)
            .map(|((_, c), m)| {
                let mut c = c.clone();
                for e in &mut c.events {
                    e.start = m.map(e.start);
                    e.end = m.map(e.end);
                }
                c
            })
            .collect()
    };
    let comms0 = mapped(&maps);
    let pairs = pairs(&comms0);
    let before = violations(&comms0, &pairs).len();
    // Causality: move a receiving rank later until its receives follow their sends.
    for _ in 0..=size {
        let v = violations(&mapped(&maps), &pairs);
        if v.is_empty() {
            break;
        }
        let mut need: BTreeMap<usize, u64> = BTreeMap::new();
        for (r, d) in v {
            let e = need.entry(r).or_default();
            *e = (*e).max(d + 1);
        }
        for (r, d) in need {
            maps[r].shift += d as i64;
        }
    }
    let comms = mapped(&maps);
    let left = violations(&comms, &pairs);
    let after = left.len();
    // The worst of them, for the error: which rank, and by how much.
    let worst = left.iter().max_by_key(|(_, d)| *d).copied();

    // Ids unique in the job.
    let mut out = Trace::default();
    let mut codelet_ids: HashMap<String, u32> = HashMap::new();
    let mut worker_base = 0u32;
    let mut domain_base = 0u16;
    let mut meter_base = 0u16;
    let mut tasks = 0usize;
    let mut chunk = TaskChunk::default();
    let mut hosts = Vec::new();
    for (k, ((t, _), m)) in ranks.iter().zip(&maps).enumerate() {
        let rank = k as u64;
        let task_id = |id: u64| (rank << 40) | id;
        let mut codelet_of: HashMap<u32, u32> = HashMap::new();
        for c in &t.codelets {
            let n = codelet_ids.len() as u32;
            let id = *codelet_ids.entry(c.name.clone()).or_insert(n);
            codelet_of.insert(c.id, id);
            if !out.codelets.iter().any(|x| x.id == id) {
                out.codelets.push(CodeletInfo {
                    id,
                    name: c.name.clone(),
                    archs: c.archs.clone(),
                });
            }
        }
        let worker_of: HashMap<u32, u32> = t
            .meta
            .workers
            .iter()
            .map(|w| (w.id, worker_base + w.id))
            .collect();
        let wmap = |w: u32| worker_of.get(&w).copied().unwrap_or(worker_base + w);
        for w in &t.meta.workers {
            let mut w = w.clone();
            w.id = wmap(w.id);
            out.meta.workers.push(w);
        }
        for (r, preds) in t.tasks() {
            let mut r = *r;
            r.id = task_id(r.id);
            r.codelet = codelet_of.get(&r.codelet).copied().unwrap_or(r.codelet);
            r.worker = wmap(r.worker);
            r.submit = m.map(r.submit);
            r.ready = m.map(r.ready);
            r.start = m.map(r.start);
            r.end = m.map(r.end);
            let preds: Vec<u64> = preds.iter().map(|&p| task_id(p)).collect();
            chunk.push(r, &preds);
            tasks += 1;
        }
        for mi in &t.meters {
            let mut mi = mi.clone();
            mi.id += meter_base;
            mi.description = format!("rank {k}: {}", mi.description);
            out.meters.push(mi);
        }
        for d in &t.domains {
            let mut d = d.clone();
            d.id += domain_base;
            d.meter += meter_base;
            d.name = format!("rank {k} {}", d.name);
            d.workers = d.workers.iter().map(|&w| wmap(w)).collect();
            out.domains.push(d);
        }
        for s in &t.samples {
            let mut s = *s;
            s.domain += domain_base;
            s.t = m.map(s.t);
            out.samples.push(s);
        }
        for f in &t.frequencies {
            let mut f = *f;
            f.domain += domain_base;
            f.t = m.map(f.t);
            out.frequencies.push(f);
        }
        if let Some(truth) = &t.truth {
            let o = out
                .truth
                .get_or_insert_with(|| taskwatt_traces::GroundTruth {
                    noise_sigma_w: truth.noise_sigma_w,
                    config: truth.config.clone(),
                    ..Default::default()
                });
            o.base_w
                .extend(truth.base_w.iter().map(|(d, w)| (d + domain_base, *w)));
            o.task_w.extend(truth.task_w.iter().map(|e| {
                let mut e = e.clone();
                e.domain += domain_base;
                e
            }));
        }
        for mk in &t.markers {
            out.markers.push(Marker {
                name: format!("rank {k}: {}", mk.name),
                start: m.map(mk.start),
                end: m.map(mk.end),
            });
        }
        for tr in &t.transfers {
            let mut tr = tr.clone();
            tr.start = m.map(tr.start);
            tr.end = m.map(tr.end);
            tr.worker = tr.worker.map(wmap);
            tr.task = tr.task.map(task_id);
            out.transfers.push(tr);
        }
        for ev in &t.evictions {
            let mut ev = ev.clone();
            ev.time = m.map(ev.time);
            ev.worker = ev.worker.map(wmap);
            ev.task = ev.task.map(task_id);
            out.evictions.push(ev);
        }
        for acc in &t.accesses {
            let mut acc = *acc;
            acc.task = task_id(acc.task);
            out.accesses.push(acc);
        }
        let mut c = comms[k].clone();
        c.workers = t.meta.workers.iter().map(|w| wmap(w.id)).collect();
        c.clock.clear(); // on rank 0's clock now
        out.comms.push(c);
        hosts.push(t.meta.host.clone());
        worker_base += t.meta.workers.iter().map(|w| w.id + 1).max().unwrap_or(0);
        domain_base += t.domains.iter().map(|d| d.id + 1).max().unwrap_or(0);
        meter_base += t.meters.iter().map(|m| m.id + 1).max().unwrap_or(0);
    }
    out.tasks.push(chunk);
    let r0 = &ranks[0].0.meta;
    out.meta.taskwatt_version = r0.taskwatt_version.clone();
    out.meta.policy = r0.policy.clone();
    out.meta.app = r0.app.clone();
    out.meta.params = r0.params.clone();
    out.meta
        .params
        .insert("mpi_merged_ranks".into(), size.to_string());
    out.meta.host = {
        let mut h = hosts.clone();
        h.dedup();
        h.join(",")
    };
    out.meta.command_line = r0.command_line.clone();
    out.meta.wall_start_unix_ns = r0.wall_start_unix_ns;
    out.meta.clock_origin_unix_ns = r0.clock_origin_unix_ns;
    let first = out
        .tasks()
        .map(|(r, _)| r.start)
        .min()
        .unwrap_or(Timestamp::ZERO);
    let last = out
        .tasks()
        .map(|(r, _)| r.end)
        .max()
        .unwrap_or(Timestamp::ZERO);
    out.end = Some(RunEnd {
        tasks: tasks as u64,
        failed: out
            .tasks()
            .filter(|(r, _)| r.status != taskwatt_traces::TaskStatus::Ok)
            .count() as u64,
        samples: out.samples.len() as u64,
        first_start: first,
        last_end: last,
        wall_end_unix_ns: 0,
        // A rank cut short (no End chunk) makes the job a failed one.
        outcome: if ranks.iter().any(|(t, _)| t.end.is_none()) {
            taskwatt_traces::RunOutcome::Failed
        } else {
            ranks
                .iter()
                .filter_map(|(t, _)| t.end.as_ref().map(|e| e.outcome))
                .find(|o| *o != taskwatt_traces::RunOutcome::Complete)
                .unwrap_or_default()
        },
    });
    let nodes = node_energy(&mut out, &ranks, &maps)?;
    let report = MergeReport {
        ranks: size,
        tasks,
        messages: pairs.len(),
        clocks: maps.clone(),
        receives_before_send: before,
        after,
        unmatched: ranks.iter().map(|(_, c)| c.events.len()).sum::<usize>() - 2 * pairs.len(),
        nodes,
    };
    if after > 0 {
        let (rank, by) = worst.unwrap_or((0, 0));
        return Err(format!(
            "{after} receive(s) still precede their send after the merge (the worst on rank \
             {}, {:.3} ms before its send): the ranks' clock estimates are off, or the traces \
             are of different runs. Check that every rank's trace is of this job; a rank \
             that read its clock long before a clock rendezvous (taken with \
             DistRuntime::clock_sample, as `run --mpi` does) records estimates that far off",
            comms.get(rank).map_or(rank as u32, |c| c.rank),
            by as f64 * 1e-6
        ));
    }
    Ok((out, report))
}

/// Each node's energy: the simulated meter run over the node's tasks (all its ranks') when
/// its first rank says so, or the domains its first rank sampled, widened to every worker
/// of the node.
fn node_energy(
    out: &mut Trace,
    ranks: &[(Trace, CommChunk)],
    maps: &[ClockMap],
) -> Result<Vec<NodeReport>, String> {
    let mut nodes: Vec<(String, Vec<usize>)> = Vec::new();
    for (k, (_, c)) in ranks.iter().enumerate() {
        match nodes.iter_mut().find(|(n, _)| *n == c.node) {
            Some((_, v)) => v.push(k),
            None => nodes.push((c.node.clone(), vec![k])),
        }
    }
    let mut reports = Vec::new();
    for (node, members) in nodes {
        let workers: Vec<u32> = members
            .iter()
            .flat_map(|&k| out.comms[k].workers.clone())
            .collect();
        let leader = members[0];
        let (_, lc) = &ranks[leader];
        let energy = if let Some(cfg) = &lc.sim_meter {
            let config = taskwatt_energy::SimConfig::from_recorded(
                cfg,
                &format!("rank {leader}'s simulated meter"),
            )
            .map_err(|e| e.to_string())?;
            let infos: Vec<taskwatt_traces::WorkerInfo> = out
                .meta
                .workers
                .iter()
                .filter(|w| workers.contains(&w.id))
                .cloned()
                .collect();
            let executions: Vec<taskwatt_energy::Execution> = out
                .tasks()
                .filter(|(r, _)| workers.contains(&r.worker))
                .map(|(r, _)| taskwatt_energy::Execution {
                    worker: r.worker,
                    codelet: r.codelet,
                    arch: r.arch,
                    start: r.start,
                    end: r.end,
                })
                .collect();
            // The node's meter ran from the first clock rendezvous of its ranks to the last:
            // the idle time around the graph pins the base power, as in a run.
            let window = members
                .iter()
                .filter_map(|&k| {
                    let c = &ranks[k].1.clock;
                    Some((maps[k].map(c.first()?.at), maps[k].map(c.last()?.at)))
                })
                .fold(
                    None,
                    |acc: Option<(Timestamp, Timestamp)>, (a, b)| match acc {
                        None => Some((a, b)),
                        Some((x, y)) => Some((x.min(a), y.max(b))),
                    },
                );
            let first_id = out.domains.iter().map(|d| d.id + 1).max().unwrap_or(0);
            let meter_id = out.meters.iter().map(|m| m.id + 1).max().unwrap_or(0);
            let r = taskwatt_energy::replay_sim(
                config,
                &infos,
                &out.codelets,
                &executions,
                lc.sim_period_ns,
                window,
                first_id,
                &format!("node {node}: "),
            )
            .map_err(|e| e.to_string())?;
            out.meters.push(taskwatt_traces::MeterInfo {
                id: meter_id,
                backend: "sim".into(),
                simulated: true,
                description: format!(
                    "node {node}: {} (run by `taskwatt merge` over the node's {} task(s) of \
                     ranks {:?})",
                    r.description,
                    executions.len(),
                    members
                ),
            });
            for mut d in r.domains {
                d.meter = meter_id;
                out.domains.push(d);
            }
            out.samples.extend(r.samples);
            out.frequencies.extend(r.frequencies);
            if let Some(t) = r.truth {
                let o = out
                    .truth
                    .get_or_insert_with(|| taskwatt_traces::GroundTruth {
                        noise_sigma_w: t.noise_sigma_w,
                        config: t.config.clone(),
                        ..Default::default()
                    });
                o.base_w.extend(t.base_w);
                o.task_w.extend(t.task_w);
            }
            "simulated at merge".to_owned()
        } else if out.domains.iter().any(|d| {
            d.workers
                .iter()
                .any(|w| out.comms[leader].workers.contains(w))
        }) {
            // The first rank of the node sampled its meters: they measure the whole node, a
            // package (and its DRAM, cores, uncore) its workers on that package, psys all.
            let mine = out.comms[leader].workers.clone();
            let package_of: HashMap<u32, u32> =
                out.meta.workers.iter().map(|w| (w.id, w.package)).collect();
            for d in &mut out.domains {
                if !d.workers.iter().any(|w| mine.contains(w)) {
                    continue;
                }
                use taskwatt_traces::Domain;
                d.workers = match d.domain {
                    Domain::CpuPackage { id }
                    | Domain::Dram { id }
                    | Domain::Core { id }
                    | Domain::Uncore { id } => workers
                        .iter()
                        .copied()
                        .filter(|w| package_of.get(w) == Some(&id))
                        .collect(),
                    Domain::Psys => workers.clone(),
                    // A GPU's domain covers the worker that drives it.
                    Domain::Gpu { .. } => d.workers.clone(),
                };
            }
            format!("sampled by rank {leader}")
        } else {
            "none".to_owned()
        };
        reports.push(NodeReport {
            node,
            ranks: members.iter().map(|&k| k as u32).collect(),
            energy,
        });
    }
    Ok(reports)
}
