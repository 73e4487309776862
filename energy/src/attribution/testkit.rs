//! Synthetic traces with known powers, for the attribution's tests.
//!
//! Energy is computed from the cumulative-energy function
//! `E(t) = P_base·t + Σ_tasks p_task·|[start, end) ∩ [0, t)|` evaluated at every sample
//! time task by task (no clipping into intervals), so that the tests do not share the
//! code they check.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use taskwatt_traces::{
    Arch, CodeletInfo, Domain, DomainInfo, EnergySample, GroundTruth, Marker, SensorKind,
    TaskRecord, Timestamp, TruthEntry,
};

use super::input::{TraceParts, IDLE_CALIBRATION};

/// A task record with the fields the attribution reads.
pub(crate) fn task(codelet: u32, worker: u32, start: u64, end: u64) -> TaskRecord {
    TaskRecord::executed(
        0,
        codelet,
        Arch::Cpu,
        worker,
        Timestamp(start),
        Timestamp(end),
    )
}

/// A domain of a 1 µJ-resolution energy counter covering `workers`.
pub(crate) fn domain_info(id: u16, domain: Domain, workers: &[u32]) -> DomainInfo {
    DomainInfo {
        id,
        meter: 0,
        domain,
        name: domain.to_string(),
        unit: "uJ".into(),
        resolution_j: 1e-6,
        wrap_range_j: None,
        update_interval_ns: None,
        sensor: SensorKind::EnergyCounter,
        workers: workers.to_vec(),
    }
}

/// One codelet of a synthetic run.
#[derive(Clone, Debug)]
pub(crate) struct SynthCodelet {
    pub(crate) name: &'static str,
    /// Extra power per domain (index = domain), W.
    pub(crate) power_w: Vec<f64>,
    /// Duration range, ns.
    pub(crate) dur_ns: (u64, u64),
    /// Relative frequency.
    pub(crate) weight: f64,
    pub(crate) arch: Arch,
}

/// A synthetic run: workers pick codelets at random, with random idle gaps.
#[derive(Clone, Debug)]
pub(crate) struct SynthConfig {
    pub(crate) seed: u64,
    /// Workers of each domain.
    pub(crate) domains: Vec<(Domain, Vec<u32>)>,
    /// Base power per domain, W.
    pub(crate) base_w: Vec<f64>,
    pub(crate) codelets: Vec<SynthCodelet>,
    /// Sampling period, ns.
    pub(crate) period_ns: u64,
    /// Run length, ns.
    pub(crate) run_ns: u64,
    /// Idle gap between a worker's tasks, ns range.
    pub(crate) gap_ns: (u64, u64),
    /// White power noise at 1 ms, W.
    pub(crate) noise_w: f64,
    /// A leading idle-calibration window, ns (0 for none).
    pub(crate) idle_ns: u64,
}

impl SynthConfig {
    /// Two packages of four workers, four codelets, 1 ms sampling over 0.6 s.
    pub(crate) fn two_packages(seed: u64) -> SynthConfig {
        let c = |name, p0: f64, p1: f64, lo, hi, weight| SynthCodelet {
            name,
            power_w: vec![p0, p1],
            dur_ns: (lo, hi),
            weight,
            arch: Arch::Cpu,
        };
        SynthConfig {
            seed,
            domains: vec![
                (Domain::CpuPackage { id: 0 }, vec![0, 1, 2, 3]),
                (Domain::CpuPackage { id: 1 }, vec![4, 5, 6, 7]),
            ],
            base_w: vec![20.0, 15.0],
            codelets: vec![
                c("gemm", 9.0, 8.0, 100_000, 400_000, 3.0),
                c("trsm", 6.0, 5.5, 50_000, 200_000, 2.0),
                c("potrf", 3.0, 2.5, 200_000, 600_000, 1.0),
                c("copy", 1.5, 1.0, 20_000, 80_000, 2.0),
            ],
            period_ns: 1_000_000,
            run_ns: 600_000_000,
            gap_ns: (0, 300_000),
            noise_w: 0.0,
            idle_ns: 0,
        }
    }
}

/// The trace a [`SynthConfig`] produces.
#[derive(Clone, Debug)]
pub(crate) struct Synth {
    pub(crate) domains: Vec<DomainInfo>,
    pub(crate) codelets: Vec<CodeletInfo>,
    pub(crate) tasks: Vec<TaskRecord>,
    pub(crate) samples: Vec<EnergySample>,
    pub(crate) markers: Vec<Marker>,
    pub(crate) truth: GroundTruth,
}

impl Synth {
    pub(crate) fn parts(&self) -> TraceParts<'_> {
        TraceParts {
            domains: &self.domains,
            samples: &self.samples,
            codelets: &self.codelets,
            markers: &self.markers,
            truth: Some(&self.truth),
            frequencies: &[],
        }
    }

    /// Builds the tasks of a config (energy not yet computed).
    pub(crate) fn tasks(cfg: &SynthConfig, rng: &mut StdRng) -> Vec<TaskRecord> {
        let total: f64 = cfg.codelets.iter().map(|c| c.weight).sum();
        let mut tasks = Vec::new();
        for (_, workers) in &cfg.domains {
            for &w in workers {
                let mut t = cfg.idle_ns + rng.random_range(0..=cfg.gap_ns.1);
                while t < cfg.run_ns {
                    let mut pick = rng.random::<f64>() * total;
                    let ci = cfg
                        .codelets
                        .iter()
                        .position(|c| {
                            pick -= c.weight;
                            pick < 0.0
                        })
                        .unwrap_or(cfg.codelets.len() - 1);
                    let c = &cfg.codelets[ci];
                    let d = rng.random_range(c.dur_ns.0..=c.dur_ns.1);
                    let mut r = task(ci as u32, w, t, (t + d).min(cfg.run_ns));
                    r.arch = c.arch;
                    r.id = tasks.len() as u64;
                    tasks.push(r);
                    t += d + rng.random_range(cfg.gap_ns.0..=cfg.gap_ns.1);
                }
            }
        }
        tasks
    }

    pub(crate) fn generate(cfg: &SynthConfig) -> Synth {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let tasks = Synth::tasks(cfg, &mut rng);
        Synth::with_tasks(cfg, tasks, &mut rng)
    }

    /// Samples, truth and metadata for given tasks; `power` of a task in domain `d` is
    /// `cfg.codelets[task.codelet].power_w[d]`.
    pub(crate) fn with_tasks(cfg: &SynthConfig, tasks: Vec<TaskRecord>, rng: &mut StdRng) -> Synth {
        let domains: Vec<DomainInfo> = cfg
            .domains
            .iter()
            .enumerate()
            .map(|(i, (d, w))| domain_info(i as u16, *d, w))
            .collect();
        let times: Vec<u64> = (0..=cfg.run_ns / cfg.period_ns)
            .map(|j| j * cfg.period_ns)
            .collect();
        let mut samples = Vec::new();
        for (di, info) in domains.iter().enumerate() {
            let mut cum: Vec<f64> = times
                .iter()
                .map(|&t| cfg.base_w[di] * t as f64 * 1e-9)
                .collect();
            // Tasks still running at a sample add their partial time; finished tasks add
            // their whole duration from the first sample at or after their end on.
            let mut step = vec![0.0; times.len() + 1];
            for r in tasks.iter().filter(|r| info.workers.contains(&r.worker)) {
                let p = cfg.codelets[r.codelet as usize].power_w[di];
                let mut j = times.partition_point(|&t| t <= r.start.0);
                while j < times.len() && times[j] < r.end.0 {
                    cum[j] += p * (times[j] - r.start.0) as f64 * 1e-9;
                    j += 1;
                }
                step[j] += p * r.duration_ns() as f64 * 1e-9;
            }
            let mut acc = 0.0;
            for (c, s) in cum.iter_mut().zip(&step) {
                acc += s;
                *c += acc;
            }
            // White power noise: an interval of length Δt gets N(0, σ² · Δt · 1 ms) J.
            let mut noise = 0.0;
            for j in 1..times.len() {
                let dt = (times[j] - times[j - 1]) as f64 * 1e-9;
                noise += cfg.noise_w * (dt * 1e-3).sqrt() * gaussian(rng);
                cum[j] += noise;
            }
            samples.extend(super::build::samples_for(info.id, &times, &cum));
        }
        let markers = if cfg.idle_ns > 0 {
            vec![Marker {
                name: IDLE_CALIBRATION.into(),
                start: Timestamp(0),
                end: Timestamp(cfg.idle_ns),
            }]
        } else {
            Vec::new()
        };
        let truth = GroundTruth {
            base_w: domains
                .iter()
                .map(|d| (d.id, cfg.base_w[d.id as usize]))
                .collect(),
            task_w: domains
                .iter()
                .flat_map(|d| {
                    cfg.codelets.iter().map(move |c| TruthEntry {
                        domain: d.id,
                        codelet: c.name.into(),
                        arch: c.arch,
                        extra_w: c.power_w[d.id as usize],
                    })
                })
                .collect(),
            noise_sigma_w: cfg.noise_w,
            config: serde_json::Value::Null,
            ..GroundTruth::default()
        };
        Synth {
            domains,
            codelets: cfg
                .codelets
                .iter()
                .enumerate()
                .map(|(i, c)| CodeletInfo {
                    id: i as u32,
                    name: c.name.into(),
                    archs: vec![c.arch],
                })
                .collect(),
            tasks,
            samples,
            markers,
            truth,
        }
    }
}

pub(crate) use super::scenario::gaussian;
