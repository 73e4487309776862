//! Proptest strategies for the trace model (tests only).
//!
//! Timestamps and ids favour the edges (0, `u64::MAX`) because the binary codec stores
//! wrapping differences: the edges are where a sign or overflow mistake would show.

use std::collections::BTreeMap;

use proptest::collection::vec;
use proptest::prelude::*;

use crate::*;

/// A u64 that is often an edge value.
pub(crate) fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        0u64..10_000,
        any::<u64>(),
    ]
}

fn ts() -> impl Strategy<Value = Timestamp> {
    edge_u64().prop_map(Timestamp)
}

fn arch() -> impl Strategy<Value = Arch> {
    prop_oneof![Just(Arch::Cpu), Just(Arch::Gpu)]
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        -1e12f64..1e12,
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z_]{1,8}", "\\PC{0,6}"]
}

/// A task chunk built with `push`, so its arena is contiguous.
pub(crate) fn task_chunk() -> impl Strategy<Value = TaskChunk> {
    let record = (
        (
            edge_u64(),
            any::<u32>(),
            arch(),
            any::<u32>(),
            any::<bool>(),
        ),
        (any::<i32>(), edge_u64(), ts(), ts(), ts(), ts()),
        vec(edge_u64(), 0..5),
    );
    vec(record, 0..12).prop_map(|rows| {
        let mut c = TaskChunk::default();
        for ((id, codelet, arch, worker, failed), (priority, footprint, s, r, st, e), preds) in rows
        {
            let rec = TaskRecord {
                id,
                codelet,
                arch,
                worker,
                status: if failed {
                    TaskStatus::Failed
                } else {
                    TaskStatus::Ok
                },
                priority,
                footprint,
                submit: s,
                ready: r,
                start: st,
                end: e,
                preds_start: 0,
                preds_len: 0,
            };
            c.push(rec, &preds);
        }
        c
    })
}

/// Samples with any float bits in `raw` (NaN included) and edge times.
pub(crate) fn samples() -> impl Strategy<Value = Vec<EnergySample>> {
    let s = (any::<u16>(), ts(), edge_u64(), any::<f64>(), any::<f64>()).prop_map(
        |(domain, t, wall_unix_ns, energy_j, raw)| EnergySample {
            domain,
            t,
            wall_unix_ns,
            energy_j,
            raw,
        },
    );
    vec(s, 0..10)
}

/// Sample equality on float bits (NaN == NaN).
pub(crate) fn samples_eq(a: &[EnergySample], b: &[EnergySample]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.domain == y.domain
                && x.t == y.t
                && x.wall_unix_ns == y.wall_unix_ns
                && x.energy_j.to_bits() == y.energy_j.to_bits()
                && x.raw.to_bits() == y.raw.to_bits()
        })
}

fn opt_u32() -> impl Strategy<Value = Option<u32>> {
    proptest::option::of(any::<u32>())
}

pub(crate) fn run_meta() -> impl Strategy<Value = RunMeta> {
    let worker = (
        any::<u32>(),
        arch(),
        opt_u32(),
        opt_u32(),
        any::<u32>(),
        opt_u32(),
        opt_u32(),
    )
        .prop_map(|(id, arch, cpu, core, package, numa, device)| WorkerInfo {
            id,
            arch,
            cpu,
            core,
            package,
            numa,
            device,
        });
    (
        (name(), name(), name(), edge_u64(), edge_u64()),
        (
            vec(name(), 0..3),
            proptest::option::of(name()),
            proptest::collection::btree_map(name(), name(), 0..3),
            vec(worker, 0..4),
            (name(), any::<u32>(), any::<u32>()),
        ),
    )
        .prop_map(
            |((v, policy, host, wall, origin), (cmd, app, params, workers, (src, p, c)))| RunMeta {
                taskwatt_version: v,
                policy,
                host,
                wall_start_unix_ns: wall,
                clock_origin_unix_ns: origin,
                command_line: cmd,
                app,
                params: params.into_iter().collect::<BTreeMap<_, _>>(),
                workers,
                topology: TopologyInfo {
                    source: src,
                    packages: p,
                    cores: c,
                    pus: p.wrapping_add(c),
                    numa_nodes: 1,
                },
            },
        )
}

pub(crate) fn codelets() -> impl Strategy<Value = Vec<CodeletInfo>> {
    vec(
        (any::<u32>(), name(), vec(arch(), 0..3)).prop_map(|(id, name, archs)| CodeletInfo {
            id,
            name,
            archs,
        }),
        0..5,
    )
}

fn domain() -> impl Strategy<Value = Domain> {
    prop_oneof![
        any::<u32>().prop_map(|id| Domain::CpuPackage { id }),
        any::<u32>().prop_map(|id| Domain::Dram { id }),
        any::<u32>().prop_map(|id| Domain::Core { id }),
        any::<u32>().prop_map(|id| Domain::Uncore { id }),
        any::<u32>().prop_map(|index| Domain::Gpu { index }),
        Just(Domain::Psys),
    ]
}

pub(crate) fn meters() -> impl Strategy<Value = (Vec<MeterInfo>, Vec<DomainInfo>)> {
    let meter = (any::<u16>(), name(), any::<bool>(), name()).prop_map(
        |(id, backend, simulated, description)| MeterInfo {
            id,
            backend,
            simulated,
            description,
        },
    );
    let sensor = prop_oneof![
        Just(SensorKind::EnergyCounter),
        edge_u64().prop_map(|window_ns| SensorKind::IntegratedPower { window_ns }),
        edge_u64().prop_map(|sampled_ns| SensorKind::SampledCounter { sampled_ns }),
    ];
    let dom = (
        (any::<u16>(), any::<u16>(), domain(), name(), name()),
        (
            finite(),
            proptest::option::of(finite()),
            proptest::option::of(edge_u64()),
            sensor,
            vec(any::<u32>(), 0..4),
        ),
    )
        .prop_map(
            |((id, meter, domain, name, unit), (res, wrap, upd, sensor, workers))| DomainInfo {
                id,
                meter,
                domain,
                name,
                unit,
                resolution_j: res,
                wrap_range_j: wrap,
                update_interval_ns: upd,
                sensor,
                workers,
            },
        );
    (vec(meter, 0..3), vec(dom, 0..4))
}

pub(crate) fn truth() -> impl Strategy<Value = GroundTruth> {
    let entry =
        (any::<u16>(), name(), arch(), finite()).prop_map(|(domain, codelet, arch, extra_w)| {
            TruthEntry {
                domain,
                codelet,
                arch,
                extra_w,
            }
        });
    (
        vec((any::<u16>(), finite()), 0..3),
        vec(entry, 0..3),
        finite(),
        (name(), -1000i64..1000),
    )
        .prop_map(|(base_w, task_w, noise_sigma_w, (k, v))| GroundTruth {
            base_w,
            task_w,
            noise_sigma_w,
            config: serde_json::json!({ "seed": v, "name": k, "list": [1, 2.5, null] }),
            ..GroundTruth::default()
        })
}

pub(crate) fn markers() -> impl Strategy<Value = Vec<Marker>> {
    vec(
        (name(), ts(), ts()).prop_map(|(name, start, end)| Marker { name, start, end }),
        0..4,
    )
}

pub(crate) fn transfers() -> impl Strategy<Value = Vec<crate::Transfer>> {
    vec(
        (
            edge_u64(),
            0u32..4,
            0u32..4,
            edge_u64(),
            proptest::option::of(0u32..64),
            proptest::option::of(edge_u64()),
            ts(),
            ts(),
            0usize..3,
        )
            .prop_map(|(handle, src, dst, bytes, worker, task, start, end, k)| {
                crate::Transfer {
                    handle,
                    src,
                    dst,
                    bytes,
                    worker,
                    task,
                    start,
                    end,
                    kind: [
                        crate::TransferKind::Fetch,
                        crate::TransferKind::Prefetch,
                        crate::TransferKind::WriteBack,
                    ][k],
                }
            }),
        0..4,
    )
}

pub(crate) fn accesses() -> impl Strategy<Value = Vec<crate::TaskAccess>> {
    vec(
        (edge_u64(), edge_u64(), 0usize..5, edge_u64()).prop_map(|(task, handle, m, bytes)| {
            crate::TaskAccess {
                task,
                handle,
                mode: crate::AccessMode::ALL[m],
                bytes,
            }
        }),
        0..8,
    )
}

pub(crate) fn run_end() -> impl Strategy<Value = RunEnd> {
    let outcome = prop_oneof![
        Just(RunOutcome::Complete),
        Just(RunOutcome::Interrupted),
        Just(RunOutcome::Failed)
    ];
    (
        edge_u64(),
        edge_u64(),
        edge_u64(),
        ts(),
        ts(),
        edge_u64(),
        outcome,
    )
        .prop_map(
            |(tasks, failed, samples, first_start, last_end, wall, outcome)| RunEnd {
                tasks,
                failed,
                samples,
                first_start,
                last_end,
                wall_end_unix_ns: wall,
                outcome,
            },
        )
}

/// Any chunk, of any kind.
pub(crate) fn chunk() -> impl Strategy<Value = Chunk> {
    // Each arm boxed: one `prop_oneof!` over a dozen nested strategy types took most of
    // this crate's test build.
    prop_oneof![
        run_meta().prop_map(Chunk::Meta).boxed(),
        codelets().prop_map(Chunk::Codelets).boxed(),
        task_chunk().prop_map(Chunk::Tasks).boxed(),
        meters()
            .prop_map(|(meters, domains)| Chunk::Meters { meters, domains })
            .boxed(),
        samples().prop_map(Chunk::Samples).boxed(),
        truth().prop_map(Chunk::Truth).boxed(),
        markers().prop_map(Chunk::Markers).boxed(),
        run_end().prop_map(Chunk::End).boxed(),
        transfers().prop_map(Chunk::Transfers).boxed(),
        accesses().prop_map(Chunk::Accesses).boxed(),
        comms().prop_map(Chunk::Comms).boxed(),
        vec(
            (
                edge_u64(),
                0u32..4,
                edge_u64(),
                any::<bool>(),
                proptest::option::of(0u32..64),
                proptest::option::of(edge_u64()),
                ts()
            ),
            0..4
        )
        .prop_map(|e| Chunk::Evictions(
            e.into_iter()
                .map(
                    |(handle, node, bytes, written_back, worker, task, time)| crate::Eviction {
                        handle,
                        node,
                        bytes,
                        written_back,
                        worker,
                        task,
                        time,
                    }
                )
                .collect()
        ))
        .boxed(),
        vec((edge_u64(), ".{0,12}", edge_u64()), 0..4)
            .prop_map(|h| Chunk::Handles(
                h.into_iter()
                    .map(|(handle, name, bytes)| crate::HandleInfo {
                        handle,
                        name,
                        bytes
                    })
                    .collect()
            ))
            .boxed(),
        vec((any::<u16>(), edge_u64(), 0.0f64..1e7), 0..4)
            .prop_map(|f| Chunk::Frequencies(
                f.into_iter()
                    .map(|(domain, t, mhz)| crate::FrequencySample {
                        domain,
                        t: crate::Timestamp(t),
                        mhz
                    })
                    .collect()
            ))
            .boxed(),
    ]
}

/// A rank's messages and clock samples (format 1.4).
pub(crate) fn comms() -> impl Strategy<Value = crate::CommChunk> {
    (
        0u32..8,
        1u32..9,
        vec((ts(), any::<i64>(), edge_u64()), 0..3),
        vec(0u32..64, 0..4),
        vec(
            (0u32..8, any::<bool>(), any::<u32>(), edge_u64(), ts(), ts()),
            0..8,
        ),
    )
        .prop_map(|(rank, size, clock, workers, events)| crate::CommChunk {
            rank,
            size,
            clock: clock
                .into_iter()
                .map(|(at, offset_ns, rtt_ns)| crate::ClockSample {
                    at,
                    offset_ns,
                    rtt_ns,
                })
                .collect(),
            workers,
            node: format!("node{}", rank / 2),
            sim_meter: None,
            sim_period_ns: 0,
            events: events
                .into_iter()
                .map(
                    |(peer, send, handle, bytes, start, end)| crate::CommRecord {
                        peer,
                        send,
                        handle,
                        bytes,
                        start,
                        end,
                    },
                )
                .collect(),
            partial: rank % 3 == 1,
        })
}

/// Chunk equality with samples compared bitwise.
pub(crate) fn chunk_eq(a: &Chunk, b: &Chunk) -> bool {
    match (a, b) {
        (Chunk::Samples(x), Chunk::Samples(y)) => samples_eq(x, y),
        _ => a == b,
    }
}
