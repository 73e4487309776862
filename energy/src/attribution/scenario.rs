//! Scenarios with known truth, for testing the attribution's claims on data its own code
//! did not produce: coverage of the intervals, flags, accuracy of what is shown as a
//! measurement, and no bias when sampling at the meter's update period.
//!
//! A scenario is a run of `packages × workers_per_package` workers executing six task
//! types (durations log-uniform between 50 µs and 10 ms, each type with its own power per
//! package), with random idle gaps and occasional whole-machine idle phases, measured by a
//! RAPL-like counter: it updates every `update_ns` at a random phase, quantises to
//! `2^-14 J`, carries white power noise, and is read every `period_ns` with wake-up
//! jitter. Reads are stamped with the time of the read, as taskwatt's sampler stamps a real
//! meter. Energy is integrated task by task per update tick, independently of the
//! attribution's own clipping code.
//!
//! ```
//! use taskwatt_energy::attribution::{attribute, scenario::Scenario, AttributionOptions};
//! let s = Scenario::random(7).generate();
//! let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
//! assert_eq!(a.report.domains.len(), s.domains.len());
//! ```

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use taskwatt_traces::{
    Arch, CodeletInfo, Domain, DomainInfo, EnergySample, GroundTruth, Marker, SensorKind,
    TaskRecord, Timestamp, TruthEntry,
};

use super::input::TraceParts;

/// The knobs of one scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Random seed (tasks, powers, noise, jitter).
    pub seed: u64,
    /// CPU packages (one energy domain each).
    pub packages: u32,
    /// Workers per package.
    pub workers_per_package: u32,
    /// Run length, ns.
    pub run_ns: u64,
    /// Sampling period, ns.
    pub period_ns: u64,
    /// Wake-up jitter of each read, at most, ns.
    pub jitter_ns: u64,
    /// The counter's update interval, ns.
    pub update_ns: u64,
    /// White power noise, W at 1 ms (its σ capped at half the base power, and each draw
    /// at the base, so that the counter never runs backwards).
    pub noise_w: f64,
    /// Probability that a worker idles between two tasks (for up to 2 ms).
    pub idle_gap: f64,
}

impl Scenario {
    /// A scenario drawn from the ranges issue 15 names: 1-2 packages, 2-8 workers per
    /// package, 1 ms or 10 ms periods, noise 1-20 W, 1 ms updates.
    pub fn random(seed: u64) -> Scenario {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5ce7_a210);
        let period_ns = if rng.random_bool(0.5) {
            1_000_000
        } else {
            10_000_000
        };
        Scenario {
            seed,
            packages: rng.random_range(1..=2),
            workers_per_package: rng.random_range(2..=8),
            run_ns: 3_000_000_000,
            period_ns,
            jitter_ns: rng.random_range(0..=period_ns.min(2_000_000) / 2),
            update_ns: 1_000_000,
            noise_w: [1.0, 5.0, 20.0][rng.random_range(0..3)],
            idle_gap: rng.random_range(0.05..0.4),
        }
    }

    /// Generates the run.
    pub fn generate(&self) -> Generated {
        generate(self)
    }
}

/// A generated run: everything [`TraceParts`] needs, and the truth.
#[derive(Clone, Debug)]
pub struct Generated {
    /// One domain per package.
    pub domains: Vec<DomainInfo>,
    /// The six codelets.
    pub codelets: Vec<CodeletInfo>,
    /// Task executions.
    pub tasks: Vec<TaskRecord>,
    /// Counter reads.
    pub samples: Vec<EnergySample>,
    /// Idle phases are not marked (the attribution must find the base without help).
    pub markers: Vec<Marker>,
    /// Base and task powers.
    pub truth: GroundTruth,
}

impl Generated {
    /// The run as the attribution reads it.
    pub fn parts(&self) -> TraceParts<'_> {
        TraceParts {
            domains: &self.domains,
            samples: &self.samples,
            codelets: &self.codelets,
            markers: &self.markers,
            truth: Some(&self.truth),
            frequencies: &[],
        }
    }

    /// The true power of a coefficient (`base` or a type name like `t3@cpu`) on domain
    /// `domain`.
    pub fn truth_of(&self, domain: u16, name: &str) -> Option<f64> {
        if name == "base" {
            return self
                .truth
                .base_w
                .iter()
                .find(|(d, _)| *d == domain)
                .map(|&(_, w)| w);
        }
        let codelet = name.split('@').next()?;
        self.truth
            .task_w
            .iter()
            .find(|t| t.domain == domain && t.codelet == codelet)
            .map(|t| t.extra_w)
    }
}

const TYPES: usize = 6;
/// RAPL's energy unit.
const RESOLUTION_J: f64 = 1.0 / 16384.0;

fn generate(sc: &Scenario) -> Generated {
    let mut rng = StdRng::seed_from_u64(sc.seed);
    let packages = sc.packages.max(1) as usize;
    let wpp = sc.workers_per_package.max(1);
    // Types: durations log-uniform in [50 us, 10 ms], each [d, 2d]; powers per package.
    let durs: Vec<(u64, u64)> = (0..TYPES)
        .map(|_| {
            let d = (50e3f64.ln() + rng.random::<f64>() * (5e6f64.ln() - 50e3f64.ln())).exp();
            (d as u64, 2 * d as u64)
        })
        .collect();
    let weights: Vec<f64> = (0..TYPES).map(|_| rng.random_range(0.5..2.0)).collect();
    let powers: Vec<Vec<f64>> = (0..packages)
        .map(|_| (0..TYPES).map(|_| rng.random_range(2.0..20.0)).collect())
        .collect();
    let base: Vec<f64> = (0..packages)
        .map(|_| rng.random_range(15.0..40.0))
        .collect();
    // Whole-machine idle phases: 3 of 50 ms.
    let idle_phases: Vec<(u64, u64)> = (1..=3)
        .map(|k| {
            let a = sc.run_ns * k / 4;
            (a, a + 50_000_000)
        })
        .collect();
    let wsum: f64 = weights.iter().sum();
    let mut tasks = Vec::new();
    let mut id = 0u64;
    for w in 0..packages as u32 * wpp {
        let mut t = rng.random_range(0..200_000u64);
        while t < sc.run_ns {
            if let Some(&(_, b)) = idle_phases.iter().find(|(a, b)| t >= *a && t < *b) {
                t = b + rng.random_range(0..100_000u64);
                continue;
            }
            let mut x = rng.random::<f64>() * wsum;
            let mut k = 0;
            while k + 1 < TYPES && x >= weights[k] {
                x -= weights[k];
                k += 1;
            }
            let d = rng.random_range(durs[k].0..=durs[k].1);
            let end = t + d;
            if idle_phases.iter().any(|(a, _)| t < *a && end > *a) || end > sc.run_ns {
                // Do not run into an idle phase or past the end: wait instead.
                t = idle_phases
                    .iter()
                    .map(|(a, _)| *a)
                    .find(|a| *a > t)
                    .unwrap_or(sc.run_ns)
                    .max(t + 1);
                continue;
            }
            tasks.push(TaskRecord::executed(
                id,
                k as u32,
                Arch::Cpu,
                w,
                Timestamp(t),
                Timestamp(end),
            ));
            id += 1;
            t = end;
            if rng.random_bool(sc.idle_gap) {
                t += rng.random_range(0..2_000_000u64);
            }
        }
    }
    // Energy per update tick, per package: ticks at phase + j·U.
    let u = sc.update_ns.max(1);
    let phase = rng.random_range(0..u);
    let ticks = (sc.run_ns + 2 * u) / u + 2;
    let tick_time = |j: u64| phase + j * u; // tick j
    let mut domains = Vec::new();
    let mut samples = Vec::new();
    // Read times: every period, with wake-up jitter, stamped at the read.
    let mut reads = Vec::new();
    let mut r = u + phase;
    while r + sc.period_ns < sc.run_ns {
        let j = if sc.jitter_ns > 0 {
            rng.random_range(0..sc.jitter_ns)
        } else {
            0
        };
        reads.push(r + j);
        r += sc.period_ns;
    }
    for pkg in 0..packages {
        let workers: Vec<u32> = (pkg as u32 * wpp..(pkg as u32 + 1) * wpp).collect();
        // Energy accumulated in tick interval j = [tick j-1, tick j).
        let mut e = vec![0.0f64; ticks as usize + 1];
        // A counter never runs backwards: the noise's σ is capped at half the base power
        // and each draw at the base, so that an idle tick's energy stays positive.
        let sigma = sc.noise_w.min(base[pkg] / 2.0);
        let len = u as f64 * 1e-9;
        for ej in e.iter_mut().skip(1) {
            let n = (sigma * (len * 1e-3).sqrt() * gaussian(&mut rng))
                .clamp(-0.99 * base[pkg] * len, 0.99 * base[pkg] * len);
            *ej = base[pkg] * len + n;
        }
        for t in tasks.iter().filter(|t| workers.contains(&t.worker)) {
            let p = powers[pkg][t.codelet as usize];
            let (s, en) = (t.start.0, t.end.0);
            // Tick intervals overlapping [s, en).
            let first = if s < phase { 0 } else { (s - phase) / u + 1 };
            let mut j = first;
            loop {
                let lo = if j == 0 { 0 } else { tick_time(j - 1) };
                let hi = tick_time(j);
                if lo >= en {
                    break;
                }
                let ov = en.min(hi).saturating_sub(s.max(lo));
                if (j as usize) < e.len() {
                    e[j as usize] += p * ov as f64 * 1e-9;
                }
                j += 1;
            }
        }
        let mut cum = vec![0.0; e.len()];
        let mut acc = 0.0;
        for (c, x) in cum.iter_mut().zip(&e) {
            acc += x;
            *c = acc;
        }
        for &t in &reads {
            // The value of the last tick at or before t (tick j at phase + j·U holds the
            // energy of intervals 1..=j).
            let j = if t < phase { 0 } else { (t - phase) / u } as usize;
            let v = (cum[j.min(cum.len() - 1)] / RESOLUTION_J).floor() * RESOLUTION_J;
            samples.push(EnergySample {
                domain: pkg as u16,
                t: Timestamp(t),
                wall_unix_ns: 0,
                energy_j: v,
                raw: v / RESOLUTION_J,
            });
        }
        let domain = Domain::CpuPackage { id: pkg as u32 };
        domains.push(DomainInfo {
            id: pkg as u16,
            meter: 0,
            domain,
            name: domain.to_string(),
            unit: "2^-14 J".into(),
            resolution_j: RESOLUTION_J,
            wrap_range_j: None,
            update_interval_ns: Some(u),
            sensor: SensorKind::EnergyCounter,
            workers,
        });
    }
    let truth = GroundTruth {
        base_w: (0..packages).map(|p| (p as u16, base[p])).collect(),
        task_w: (0..packages)
            .flat_map(|p| {
                let powers = &powers;
                (0..TYPES).map(move |k| TruthEntry {
                    domain: p as u16,
                    codelet: format!("t{k}"),
                    arch: Arch::Cpu,
                    extra_w: powers[p][k],
                })
            })
            .collect(),
        noise_sigma_w: sc.noise_w,
        config: serde_json::Value::Null,
        ..GroundTruth::default()
    };
    Generated {
        domains,
        codelets: (0..TYPES)
            .map(|k| CodeletInfo {
                id: k as u32,
                name: format!("t{k}"),
                archs: vec![Arch::Cpu],
            })
            .collect(),
        tasks,
        samples,
        markers: Vec::new(),
        truth,
    }
}

/// A standard normal draw (Box-Muller).
pub(crate) fn gaussian(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
