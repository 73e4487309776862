//! The simulated meter: reads like a real sensor, computed live from the executions.
//!
//! At a read at time `t`, each domain shows its energy at its last update tick `B ≤ t`:
//!
//! ```text
//! E_d(B) = ∫ base_d(τ) dτ  +  ∫ cap(τ)·g_d(k(τ))·S_d(τ) dτ  +  noise_d(B)
//! ```
//!
//! `base_d` with its warm-up drift (closed form), `S_d` the summed power alone of the tasks
//! running on the domain's workers (each task's power varied around its type's), `k` their
//! number and `g_d` the domain's occupancy factor: the dynamic part is integrated exactly,
//! event by event ([`super::integrator`]); `noise_d` is white power noise
//! ([`super::noise`]). Then, like the hardware:
//! - RAPL-like package/DRAM domains quantise `E` to 2^-14 J units, add the start offset and
//!   keep the low 32 bits: the raw counter changes only every 1 ms and wraps;
//! - NVML-like GPU domains show `floor(E)` in mJ, refreshed every `update_interval_ms`, or,
//!   as a power sensor, the average power over the last `power_window_ms` of refreshes.
//!
//! Time comes from a [`SimClock`]: the trace clock in a run, a [`ManualClock`] in tests.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use taskwatt_traces::{
    Arch, Clock, Domain, DomainId, GroundTruth, RealisedDomain, RealisedType, SensorKind,
    Timestamp, TruthEntry, WorkerInfo,
};

use super::config::{DomainPower, GpuSensor, SimConfig, TaskPower};
use super::integrator::{DomainSetup, Integrator, DRAM, GPU, PKG};
use super::noise::{domain_seed, NoiseWalk};
use super::observer::{SimObserver, CODES};
use crate::meter::{Coverage, DomainRead, DomainSpec, Meter, MeterDescription, RawReading};
use crate::EnergyError;

/// Worker ids the simulated meter accepts: `0..MAX_SIM_WORKERS` (its per-worker table is
/// indexed by id; see [`EnergyError::SimWorkerId`]).
pub const MAX_SIM_WORKERS: usize = 1 << 16;

/// Where the simulated meter gets "now".
pub trait SimClock: Send + Sync {
    /// The current time on the trace clock.
    fn now(&self) -> Timestamp;
}

/// The process's trace clock ([`Clock::now`]): what a run uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceClock;

impl SimClock for TraceClock {
    fn now(&self) -> Timestamp {
        Clock::now()
    }
}

/// A clock that only moves when told to: what tests use.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock showing `t`.
    pub fn new(t: Timestamp) -> Self {
        ManualClock(AtomicU64::new(t.as_ns()))
    }

    /// Sets the time.
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_ns(), Ordering::Relaxed);
    }

    /// Moves the time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }
}

impl SimClock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::Relaxed))
    }
}

/// How one simulated domain turns energy into a reading.
#[derive(Clone, Debug)]
enum Model {
    Rapl {
        unit_j: f64,
        mask: u64,
        offset: u64,
    },
    GpuEnergy,
    /// A counter that, at each update `u`, adds `tick / sampled_ns` times the energy of
    /// `[u - sampled_ns, u]`.
    GpuSampled {
        sampled_ns: u64,
        /// The last update counted, and the counter's energy then, J.
        last_u: u64,
        acc_j: f64,
    },
    GpuPower {
        window_ns: u64,
        history: VecDeque<(u64, f64)>,
        last_w: f64,
    },
}

#[derive(Clone, Debug)]
struct SimDomain {
    /// The tick its value updates on, ns.
    tick_ns: u64,
    base_w: f64,
    /// Warm-up drift `(relative, tau s)`.
    drift: (f64, f64),
    noise_sigma_w: f64,
    noise: NoiseWalk,
    model: Model,
}

impl SimDomain {
    /// `∫ base` from the meter's start over `dt_s` seconds, drift included, J.
    fn base_energy(&self, dt_s: f64) -> f64 {
        let (d, tau) = self.drift;
        self.base_w * (dt_s + d * (dt_s - tau * (1.0 - (-dt_s / tau).exp())))
    }
}

/// A simulated energy meter (backend `sim`).
pub struct SimMeter {
    observer: Arc<SimObserver>,
    clock: Arc<dyn SimClock>,
    config: SimConfig,
    seed: u64,
    t0: u64,
    domains: Vec<SimDomain>,
    specs: Vec<DomainSpec>,
    /// Workers each domain covers.
    covered: Vec<usize>,
    stale: u64,
    /// Per domain: the update tick the last read's value belongs to, ns, and the first's.
    as_of: Vec<u64>,
    first: Vec<Option<u64>>,
}

/// The simulated machine's frequency per package ([`SimMeter::frequency_reader`]).
pub struct SimFrequency {
    observer: Arc<SimObserver>,
    clock: Arc<dyn SimClock>,
    /// The package domains' indices in the integrator, and their packages.
    domains: Vec<usize>,
    packages: Vec<u32>,
    /// The energy counters' update interval: a read describes the span up to the last
    /// update, as the package's energy does.
    tick: u64,
    /// Per package: the integrals of `k·f` and `k` at the previous read.
    last: Vec<(f64, f64)>,
    as_of: Option<u64>,
}

impl std::fmt::Debug for SimFrequency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFrequency")
            .field("packages", &self.packages)
            .finish_non_exhaustive()
    }
}

impl crate::freq::FrequencyReader for SimFrequency {
    fn describe(&self) -> String {
        "simulated cores' frequency (turbo bins and cap of the sim config)".into()
    }

    fn packages(&self) -> &[u32] {
        &self.packages
    }

    fn read(&mut self, out: &mut [Option<f64>]) {
        let b = self.clock.now().as_ns() / self.tick * self.tick;
        let mut integ = self.observer.integrator.lock();
        integ.drain(self.observer.logs());
        for ((slot, &d), last) in out.iter_mut().zip(&self.domains).zip(&mut self.last) {
            let acc = &integ.domains[d];
            let (kf, k) = acc.frequency_at(b.max(acc.integrated_to()));
            let (dkf, dk) = (kf - last.0, k - last.1);
            *last = (kf, k);
            *slot = (dk > 0.0).then(|| dkf / dk * 1e3);
        }
        self.as_of = Some(b);
    }

    fn value_time(&self) -> Option<Timestamp> {
        self.as_of.map(Timestamp)
    }
}

impl std::fmt::Debug for SimMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimMeter")
            .field("start", &self.t0)
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

/// A seed for a meter whose configuration leaves it open: the time and the process, mixed.
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut m = super::noise::SplitMix64::new(t ^ (u64::from(std::process::id()) << 32));
    m.next_u64()
}

impl SimMeter {
    /// A simulated meter on the trace clock for these workers.
    pub fn new(config: SimConfig, workers: &[WorkerInfo]) -> Result<SimMeter, EnergyError> {
        Self::with_clock(config, workers, Arc::new(TraceClock))
    }

    /// A simulated meter reading time from `clock`. Domains: a package and a DRAM domain per
    /// package that has workers (package 0 when there are no workers), and, when
    /// `config.gpu.enabled`, a GPU domain per device driven by GPU workers. Energy counts from
    /// `clock.now()` at this call. A configuration without a seed gets a fresh one
    /// ([`SimMeter::seed`], recorded in the truth).
    pub fn with_clock(
        mut config: SimConfig,
        workers: &[WorkerInfo],
        clock: Arc<dyn SimClock>,
    ) -> Result<SimMeter, EnergyError> {
        config.validate("in-memory config")?;
        let seed = *config.seed.get_or_insert_with(fresh_seed);
        let t0 = clock.now().as_ns();
        let rapl_tick = config.rapl.update_interval_us * 1_000;
        let gpu_tick = config.gpu.update_interval_ms * 1_000_000;
        // The integrator's tables are indexed by worker id (no hash on the workers' hot
        // path): refuse an id that would size them absurdly rather than allocate for it.
        if let Some(w) = workers.iter().find(|w| w.id as usize >= MAX_SIM_WORKERS) {
            return Err(EnergyError::SimWorkerId {
                worker: w.id,
                limit: MAX_SIM_WORKERS,
            });
        }
        let slots = workers.iter().map(|w| w.id as usize + 1).max().unwrap_or(0);
        // A partly sampled GPU counter needs the energy at the start of each sampled part:
        // its boundaries are every sampled part (which divides the update interval, see the
        // config's check), so that one lies a sampled part before each update.
        let sampled_ns = config.gpu.sampled_ms * 1_000_000;
        let sampled =
            config.gpu.sensor != GpuSensor::Power && sampled_ns > 0 && sampled_ns < gpu_tick;

        let mut packages: Vec<u32> = workers.iter().map(|w| w.package).collect();
        if packages.is_empty() {
            packages.push(0);
        }
        packages.sort_unstable();
        packages.dedup();
        let mut gpus: Vec<u32> = workers
            .iter()
            .filter(|w| w.arch == Arch::Gpu)
            .filter_map(|w| w.device)
            .collect();
        gpus.sort_unstable();
        gpus.dedup();
        if !config.gpu.enabled {
            gpus.clear();
        }

        let unit_j = config.energy_unit_j();
        let bits = config.rapl.counter_bits;
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let rapl_model = Model::Rapl {
            unit_j,
            mask,
            offset: config.rapl.start_offset,
        };
        let wrap = if bits == 64 { None } else { Some(1u64 << bits) };
        let covered = |c: Coverage| -> Vec<usize> {
            c.workers(workers)
                .into_iter()
                .map(|id| id as usize)
                .collect()
        };
        let cap = config.cap().map(|(from, to, f)| {
            let at = |s: f64| t0.saturating_add((s * 1e9) as u64);
            (at(from), at(to), f)
        });

        let mut domains = Vec::new();
        let mut specs = Vec::new();
        let mut setups = Vec::new();
        let factors = |pkg: bool, n: usize| -> Vec<f64> {
            (0..=n).map(|k| config.occupancy_factor(pkg, k)).collect()
        };
        let (freq, cap_freq) = {
            let (f, cap) = config.frequency_model();
            let n = config.cpu.turbo_ghz.len() + workers.len() + 1;
            let table: Vec<f64> = (0..n).map(f).collect();
            (move |k: usize| table[k.min(n - 1)], cap)
        };
        let domain = |power: &DomainPower, code: u64, tick: u64, model: Model| SimDomain {
            tick_ns: tick,
            base_w: power.base_w,
            drift: config.drift(power),
            noise_sigma_w: power.noise_sigma_w,
            noise: NoiseWalk::new(
                domain_seed(seed, code),
                power.noise_sigma_w,
                power.base_w,
                t0,
            ),
            model,
        };
        for &id in &packages {
            for (d, channel, power, code) in [
                (Domain::CpuPackage { id }, PKG, &config.package, 1u64),
                (Domain::Dram { id }, DRAM, &config.dram, 2u64),
            ] {
                let covers = Coverage::Package { id };
                let ws = covered(covers);
                setups.push(DomainSetup {
                    channel,
                    g: factors(channel == PKG, ws.len()),
                    cap: if channel == PKG { cap } else { None },
                    freq: if channel == PKG {
                        (0..=ws.len()).map(|k| freq(k.max(1))).collect()
                    } else {
                        Vec::new()
                    },
                    cap_freq,
                    workers: ws,
                    tick_ns: rapl_tick,
                    hist_cap: 8,
                });
                domains.push(domain(
                    power,
                    (code << 32) | u64::from(id),
                    rapl_tick,
                    rapl_model.clone(),
                ));
                specs.push(DomainSpec {
                    domain: d,
                    name: format!("simulated {d}"),
                    unit: format!("2^-{} J", config.rapl.energy_unit_exp),
                    joules_per_unit: unit_j,
                    resolution_j: unit_j,
                    wrap_range_raw: wrap,
                    sensor: SensorKind::EnergyCounter,
                    update_interval_ns: Some(rapl_tick),
                    covers,
                });
            }
        }
        let gpu_power = DomainPower {
            base_w: config.gpu.base_w,
            noise_sigma_w: config.gpu.noise_sigma_w,
            contention: 0.0,
            drift: 0.0,
            drift_tau_s: 30.0,
        };
        for &index in &gpus {
            let g = &config.gpu;
            let covers = Coverage::Gpu { index };
            let kinds: &[GpuSensor] = match g.sensor {
                GpuSensor::Both => &[GpuSensor::Energy, GpuSensor::Power],
                GpuSensor::Energy => &[GpuSensor::Energy],
                GpuSensor::Power => &[GpuSensor::Power],
            };
            for &kind in kinds {
                let (model, unit, jpu, sensor) = match kind {
                    GpuSensor::Energy if sampled => (
                        Model::GpuSampled {
                            sampled_ns,
                            last_u: t0 / gpu_tick * gpu_tick,
                            acc_j: 0.0,
                        },
                        "mJ",
                        1e-3,
                        SensorKind::SampledCounter { sampled_ns },
                    ),
                    GpuSensor::Energy => (Model::GpuEnergy, "mJ", 1e-3, SensorKind::EnergyCounter),
                    GpuSensor::Power | GpuSensor::Both => (
                        Model::GpuPower {
                            window_ns: g.power_window_ms * 1_000_000,
                            history: VecDeque::from([(t0, 0.0)]),
                            last_w: g.base_w,
                        },
                        "W",
                        1.0,
                        SensorKind::IntegratedPower {
                            window_ns: g.power_window_ms * 1_000_000,
                        },
                    ),
                };
                let ws = covered(covers);
                let n = ws.len();
                setups.push(DomainSetup {
                    channel: GPU,
                    g: vec![1.0; n + 1],
                    cap: None,
                    freq: Vec::new(),
                    cap_freq: 1.0,
                    workers: ws,
                    // The sampled counter reads the energy a sampled part before each
                    // update: its boundaries are every sampled part, kept for ~100 s.
                    tick_ns: if sampled { sampled_ns } else { gpu_tick },
                    hist_cap: if sampled { 4096 } else { 8 },
                });
                domains.push(domain(
                    &gpu_power,
                    (3u64 << 32) | u64::from(index),
                    gpu_tick,
                    model,
                ));
                specs.push(DomainSpec {
                    domain: Domain::Gpu { index },
                    name: match (g.sensor, kind) {
                        (GpuSensor::Both, GpuSensor::Power) => {
                            format!("simulated NVML GPU {index} power")
                        }
                        _ => format!("simulated NVML GPU {index}"),
                    },
                    unit: unit.into(),
                    joules_per_unit: jpu,
                    resolution_j: 1e-3,
                    wrap_range_raw: None,
                    sensor,
                    update_interval_ns: Some(gpu_tick),
                    covers,
                });
            }
        }
        let covered_n = setups.iter().map(|s| s.workers.len()).collect();
        let integrator = Integrator::new(&config, seed, t0, slots, CODES, setups);
        let observer = Arc::new(SimObserver::new(config.clone(), slots, integrator));
        Ok(SimMeter {
            observer,
            clock,
            config,
            seed,
            t0,
            first: vec![None; domains.len()],
            domains,
            specs,
            covered: covered_n,
            stale: 0,
            as_of: Vec::new(),
        })
    }

    /// The observer to hand to the runtime (`Arc<dyn ExecutionObserver>`).
    pub fn observer(&self) -> Arc<SimObserver> {
        self.observer.clone()
    }

    /// A reader of the simulated cores' frequency, per package: what APERF/MPERF would give
    /// on the machine it simulates (the turbo bin of the busy cores, lowered under the cap).
    /// Hand it to [`crate::Sampler::start_with_frequency`].
    pub fn frequency_reader(&self) -> SimFrequency {
        let mut domains = Vec::new();
        let mut packages = Vec::new();
        for (i, spec) in self.specs.iter().enumerate() {
            if let Domain::CpuPackage { id } = spec.domain {
                domains.push(i);
                packages.push(id);
            }
        }
        SimFrequency {
            observer: self.observer.clone(),
            clock: self.clock.clone(),
            tick: self.config.rapl.update_interval_us.max(1) * 1_000,
            last: vec![(0.0, 0.0); domains.len()],
            domains,
            packages,
            as_of: None,
        }
    }

    /// Its configuration (with the seed it uses).
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The seed of its noise and per-task variation.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// When it started counting, on the trace clock.
    pub fn start(&self) -> Timestamp {
        Timestamp(self.t0)
    }

    /// Reads whose tick lay so far behind the integrated events that its energy was gone
    /// (the value was then the nearest kept one). Zero unless the sampler stalls for
    /// many ticks.
    pub fn stale_reads(&self) -> u64 {
        self.stale
    }

    /// Each domain's energy from the start to the clock's now, exactly: the machine's
    /// energy, without the sensors' quantisation, update interval, averaging window or
    /// noise (a what-if's figure for its simulated run; the readings keep all of them).
    /// Exact only at or after the latest reading: call it before reading past `now`.
    pub fn exact_energy_j(&mut self) -> Vec<f64> {
        let t = self.clock.now().as_ns();
        let observer = self.observer.clone();
        let mut integ = observer.integrator.lock();
        integ.drain(observer.logs());
        (0..self.domains.len())
            .map(|i| {
                if t <= self.t0 {
                    return 0.0;
                }
                let dynamic = integ.domains[i].energy_at(t).unwrap_or_else(|stale| stale);
                self.domains[i].base_energy((t - self.t0) as f64 * 1e-9) + dynamic
            })
            .collect()
    }

    /// The energy of domain `i` at boundary `b`, before quantisation.
    fn energy_at(&mut self, integ: &Integrator, i: usize, b: u64) -> f64 {
        if b <= self.t0 {
            return 0.0;
        }
        let dynamic = match integ.domains[i].energy_at(b) {
            Ok(x) => x,
            Err(x) => {
                self.stale += 1;
                x
            }
        };
        let d = &mut self.domains[i];
        let e = d.base_energy((b - self.t0) as f64 * 1e-9) + dynamic;
        (e + d.noise.at(b)).max(0.0)
    }
}

impl Meter for SimMeter {
    fn describe(&self) -> MeterDescription {
        let c = &self.config;
        let machine = if c.contended() {
            format!(
                "contended machine (package contention {}, DRAM {}, turbo {:?} GHz, per-task \
                 variation {}, drift {})",
                c.package.contention,
                c.dram.contention,
                c.cpu.turbo_ghz,
                c.tasks.variation,
                c.package.drift
            )
        } else {
            "ideal machine (linear model)".to_owned()
        };
        MeterDescription {
            backend: "sim".into(),
            simulated: true,
            description: format!(
                "simulated meter (not a measurement) of a {machine}: RAPL-like package/DRAM \
                 counters (2^-{} J, {} us ticks, {}-bit), NVML-like GPUs ({} ms, {}), white \
                 noise sigma {} W per package at 1 ms, seed {}",
                c.rapl.energy_unit_exp,
                c.rapl.update_interval_us,
                c.rapl.counter_bits,
                c.gpu.update_interval_ms,
                match c.gpu.sensor {
                    GpuSensor::Energy => "mJ counter",
                    GpuSensor::Power => "averaged power",
                    GpuSensor::Both => "mJ counter and averaged power",
                },
                c.package.noise_sigma_w,
                self.seed
            ),
        }
    }

    fn domains(&self) -> &[DomainSpec] {
        &self.specs
    }

    fn read(&mut self, out: &mut [DomainRead]) {
        let t = self.clock.now().as_ns();
        let observer = self.observer.clone();
        let mut integ = observer.integrator.lock();
        integ.drain(observer.logs());
        if self.as_of.len() < self.domains.len() {
            self.as_of.resize(self.domains.len(), 0);
        }
        for (i, slot) in out.iter_mut().enumerate().take(self.domains.len()) {
            let tick = self.domains[i].tick_ns;
            let b = t / tick * tick;
            self.as_of[i] = b;
            self.first[i].get_or_insert(b);
            if let Model::GpuSampled {
                sampled_ns, last_u, ..
            } = self.domains[i].model
            {
                // Each update since the last read adds its interval's worth of the power
                // seen in its sampled part.
                let (mut u, mut add) = (last_u, 0.0);
                while u + tick <= b {
                    u += tick;
                    // The start first: the noise walk only moves forward, so reading the
                    // end first would return the end's noise for the start too.
                    let before = self.energy_at(&integ, i, u - sampled_ns);
                    let seen = self.energy_at(&integ, i, u) - before;
                    add += seen * tick as f64 / sampled_ns as f64;
                }
                if let Model::GpuSampled { last_u, acc_j, .. } = &mut self.domains[i].model {
                    *last_u = u;
                    *acc_j += add;
                    *slot = Ok(RawReading::Counter((*acc_j * 1e3) as u64));
                }
                continue;
            }
            let e = self.energy_at(&integ, i, b);
            let reading = match &mut self.domains[i].model {
                Model::Rapl {
                    unit_j,
                    mask,
                    offset,
                } => RawReading::Counter(offset.wrapping_add((e / *unit_j) as u64) & *mask),
                Model::GpuEnergy => RawReading::Counter((e * 1e3) as u64),
                Model::GpuSampled { .. } => unreachable!("read above"),
                Model::GpuPower {
                    window_ns,
                    history,
                    last_w,
                } => {
                    if history.back().is_none_or(|&(hb, _)| b > hb) {
                        history.push_back((b, e));
                    }
                    // Keep the newest entry at or before the window's start, and what follows.
                    let start = b.saturating_sub(*window_ns);
                    while history.len() >= 2 && history[1].0 <= start {
                        history.pop_front();
                    }
                    let (b0, e0) = history[0];
                    if b > b0 {
                        *last_w = (e - e0) / ((b - b0) as f64 * 1e-9);
                    }
                    RawReading::Power(*last_w)
                }
            };
            *slot = Ok(reading);
        }
    }

    fn value_time(&self, i: usize) -> Option<Timestamp> {
        self.as_of.get(i).map(|&b| Timestamp(b))
    }

    fn ground_truth(&self, ids: &[DomainId]) -> Option<GroundTruth> {
        let c = &self.config;
        let mut truth = GroundTruth {
            noise_sigma_w: c.package.noise_sigma_w,
            config: serde_json::to_value(c).unwrap_or(serde_json::Value::Null),
            ..GroundTruth::default()
        };
        let pick = |p: TaskPower, channel: usize| p.channels()[channel];
        let mut integ = self.observer.integrator.lock();
        integ.drain(self.observer.logs());
        for (i, (d, &id)) in self.domains.iter().zip(ids).enumerate() {
            truth.base_w.push((id, d.base_w));
            truth.noise_w.push((id, d.noise_sigma_w));
            let channel = match self.specs[i].domain {
                Domain::Dram { .. } => DRAM,
                Domain::Gpu { .. } => GPU,
                _ => PKG,
            };
            let archs: &[Arch] = if channel == GPU {
                &[Arch::Gpu]
            } else {
                &Arch::ALL
            };
            let named = c.codelets.iter().map(|(n, p)| (n.as_str(), *p));
            for (name, powers) in std::iter::once(("*", c.default_task)).chain(named) {
                for &arch in archs {
                    if let Some(p) = powers.get(arch) {
                        truth.task_w.push(TruthEntry {
                            domain: id,
                            codelet: name.to_owned(),
                            arch,
                            extra_w: pick(p, channel),
                        });
                    }
                }
            }
            // What the run realised, once the meter has been read over a window.
            let (Some(first), Some(&last)) = (self.first[i], self.as_of.get(i)) else {
                continue;
            };
            if last <= first {
                continue;
            }
            let r = integ.realised(i, last);
            let span = |b: u64| (b.saturating_sub(self.t0)) as f64 * 1e-9;
            let base_mean_w = (d.base_energy(span(last)) - d.base_energy(span(first)))
                / ((last - first) as f64 * 1e-9);
            let mut types = Vec::new();
            for &(code, busy_s, alone_w, at_run_w) in &r.types {
                if let Some((codelet, arch)) = integ.describe_code(code) {
                    types.push(RealisedType {
                        codelet,
                        arch,
                        busy_s,
                        alone_w,
                        at_run_w,
                    });
                }
            }
            truth.realised.push(RealisedDomain {
                domain: id,
                window_ns: [first, last],
                base_mean_w,
                occupancy_factor: r.factors,
                occupancy_s: r.occupancy_s,
                workers: self.covered[i],
                types,
            });
        }
        Some(truth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_traces::{CodeletInfo, ExecutionObserver};

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_000 * MS;

    fn cpu(id: u32, package: u32) -> WorkerInfo {
        WorkerInfo::cpu(id, package)
    }

    /// The linear model without noise: every energy is exactly the integral of the powers.
    fn quiet() -> SimConfig {
        let mut c = SimConfig::ideal();
        c.package.noise_sigma_w = 0.0;
        c.dram.noise_sigma_w = 0.0;
        c.gpu.noise_sigma_w = 0.0;
        c
    }

    fn read(m: &mut SimMeter) -> Vec<RawReading> {
        let mut out: Vec<DomainRead> = (0..m.domains().len())
            .map(|_| Ok(RawReading::Counter(0)))
            .collect();
        m.read(&mut out);
        out.into_iter().map(|r| r.unwrap()).collect()
    }

    fn counter(r: RawReading) -> u64 {
        match r {
            RawReading::Counter(v) => v,
            p => panic!("{p:?}"),
        }
    }

    /// `raw` units of `unit` J are the quantisation of `e` J: `raw·unit ≤ e < (raw+1)·unit`
    /// (with a 1e-12 J allowance for the order of floating-point additions).
    fn assert_quantised(raw: u64, e: f64, unit: f64) {
        let lo = raw as f64 * unit;
        assert!(
            lo <= e + 1e-12 && e < lo + unit + 1e-12,
            "{raw} units of {unit} J vs {e} J"
        );
    }

    fn register(obs: &SimObserver, id: u32, name: &str) {
        obs.codelet_registered(&CodeletInfo {
            id,
            name: name.into(),
            archs: vec![Arch::Cpu],
        });
    }

    #[test]
    fn domains_follow_the_workers_packages() {
        let ws = [cpu(0, 0), cpu(1, 1), cpu(2, 1)];
        let m =
            SimMeter::with_clock(quiet(), &ws, Arc::new(ManualClock::new(Timestamp(T0)))).unwrap();
        let d: Vec<Domain> = m.domains().iter().map(|d| d.domain).collect();
        assert_eq!(
            d,
            vec![
                Domain::CpuPackage { id: 0 },
                Domain::Dram { id: 0 },
                Domain::CpuPackage { id: 1 },
                Domain::Dram { id: 1 },
            ]
        );
        let s = &m.domains()[2];
        assert_eq!(s.unit, "2^-14 J");
        assert_eq!(s.wrap_range_raw, Some(1 << 32));
        assert_eq!(s.update_interval_ns, Some(MS));
        assert!(m.describe().simulated && m.describe().description.contains("simulated"));
        // No workers: package 0 anyway.
        let m = SimMeter::new(quiet(), &[]).unwrap();
        assert_eq!(m.domains().len(), 2);
    }

    /// Scripted events on a controlled clock: the counter equals the integral to quantisation.
    #[test]
    fn energy_is_the_exact_integral_to_quantisation() {
        let clock = Arc::new(ManualClock::new(Timestamp(T0)));
        let ws = [cpu(0, 0), cpu(1, 0)];
        let mut m = SimMeter::with_clock(quiet(), &ws, clock.clone()).unwrap();
        let obs = m.observer();
        register(&obs, 0, "gemm"); // 16 W package, 1.8 W dram
        register(&obs, 1, "potrf"); // 7 W, 0.6 W
        let first = read(&mut m);
        assert_eq!(counter(first[0]), 0);

        let at = |ms: f64| Timestamp(T0 + (ms * MS as f64) as u64);
        obs.task_started(0, 0, Arch::Cpu, at(1.25));
        obs.task_started(1, 1, Arch::Cpu, at(2.0));
        obs.task_ended(0, 0, Arch::Cpu, at(5.5));
        obs.task_ended(1, 1, Arch::Cpu, at(3.0));
        obs.task_started(1, 0, Arch::Cpu, at(8.0)); // still running at the read
        clock.set(at(10.4)); // last tick: 10 ms after start

        let r = read(&mut m);
        let unit = 2f64.powi(-14);
        let pkg = 30.0 * 10e-3 + 16.0 * 4.25e-3 + 7.0 * 1e-3 + 16.0 * 2e-3;
        let dram = 4.0 * 10e-3 + 1.8 * 4.25e-3 + 0.6 * 1e-3 + 1.8 * 2e-3;
        assert_quantised(counter(r[0]), pkg, unit);
        assert_quantised(counter(r[1]), dram, unit);
    }

    #[test]
    fn counter_changes_only_at_update_ticks() {
        let clock = Arc::new(ManualClock::new(Timestamp(T0)));
        let mut m = SimMeter::with_clock(quiet(), &[cpu(0, 0)], clock.clone()).unwrap();
        let obs = m.observer();
        obs.task_started(0, 0, Arch::Cpu, Timestamp(T0 + 100_000));
        clock.set(Timestamp(T0 + 3 * MS + 1));
        let a = counter(read(&mut m)[0]);
        // Within the same tick the value holds although a task runs.
        clock.set(Timestamp(T0 + 3 * MS + 999_999));
        assert_eq!(counter(read(&mut m)[0]), a);
        // At the next tick it moves.
        clock.set(Timestamp(T0 + 4 * MS));
        assert!(counter(read(&mut m)[0]) > a);
    }

    #[test]
    fn the_32_bit_counter_wraps_from_its_start_offset() {
        let mut c = quiet();
        c.rapl.start_offset = (1u64 << 32) - 1000;
        let clock = Arc::new(ManualClock::new(Timestamp(T0)));
        let mut m = SimMeter::with_clock(c, &[cpu(0, 0)], clock.clone()).unwrap();
        assert_eq!(counter(read(&mut m)[0]), (1u64 << 32) - 1000);
        // 30 W for 10 ms = 0.3 J = 4915.2 units: past the top.
        clock.set(Timestamp(T0 + 10 * MS));
        let raw = counter(read(&mut m)[0]);
        assert_eq!(raw, 4915 - 1000);
        let mut acc = crate::wrap::Accumulator::for_domain(&m.domains()[0]);
        acc.update(Timestamp(0), RawReading::Counter((1u64 << 32) - 1000));
        let j = acc.update(Timestamp(1), RawReading::Counter(raw));
        assert!((j - 4915.0 * 2f64.powi(-14)).abs() < 1e-12);
    }

    /// With no tasks, the per-tick power minus the base has the configured σ, and a seed
    /// reproduces it exactly.
    #[test]
    fn noise_has_the_configured_sigma_and_is_seeded() {
        let run = |seed: u64| {
            let c = SimConfig {
                seed: Some(seed),
                ..SimConfig::ideal()
            };
            let clock = Arc::new(ManualClock::new(Timestamp(T0)));
            let mut m = SimMeter::with_clock(c, &[cpu(0, 0)], clock.clone()).unwrap();
            let mut acc = crate::wrap::Accumulator::for_domain(&m.domains()[0]);
            let mut acc_dram = crate::wrap::Accumulator::for_domain(&m.domains()[1]);
            let (mut prev, mut prev_d) = (0.0, 0.0);
            let (mut pw, mut pd) = (Vec::new(), Vec::new());
            for k in 0..=20_000u64 {
                clock.set(Timestamp(T0 + k * MS));
                let r = read(&mut m);
                let e = acc.update(Timestamp(k), r[0]);
                let ed = acc_dram.update(Timestamp(k), r[1]);
                if k > 0 {
                    pw.push((e - prev) / 1e-3);
                    pd.push((ed - prev_d) / 1e-3);
                }
                prev = e;
                prev_d = ed;
            }
            (pw, pd)
        };
        let stats = |v: &[f64]| {
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            (mean, sd)
        };
        let (pw, pd) = run(42);
        let c = SimConfig::ideal();
        let (mean, sd) = stats(&pw);
        assert!((mean - 30.0).abs() < 0.15, "mean {mean}");
        let want = c.package.noise_sigma_w;
        assert!((sd - want).abs() < 0.03 * want, "sd {sd} vs {want}");
        let (mean_d, sd_d) = stats(&pd);
        assert!((mean_d - 4.0).abs() < 0.05, "dram mean {mean_d}");
        let want = c.dram.noise_sigma_w;
        // Quantisation (2^-14 J per 1 ms) adds its own 18 mW.
        let q = 2f64.powi(-14) / 1e-3 / 12f64.sqrt();
        let want = (want * want + q * q).sqrt();
        assert!(
            (sd_d - want).abs() < 0.05 * want,
            "dram sd {sd_d} vs {want}"
        );
        assert_eq!(run(42).0, pw);
        assert_ne!(run(43).0, pw);
    }

    #[test]
    fn a_gpu_worker_gets_an_nvml_like_domain() {
        let mut c = quiet();
        c.gpu.update_interval_ms = 20;
        let clock = Arc::new(ManualClock::new(Timestamp(T0)));
        let gpu_worker = WorkerInfo {
            arch: Arch::Gpu,
            device: Some(0),
            ..cpu(1, 0)
        };
        let mut m =
            SimMeter::with_clock(c.clone(), &[cpu(0, 0), gpu_worker.clone()], clock.clone())
                .unwrap();
        let d = &m.domains()[2];
        assert_eq!(d.domain, Domain::Gpu { index: 0 });
        assert_eq!(d.unit, "mJ");
        assert_eq!(d.covers, Coverage::Gpu { index: 0 });
        assert_eq!(d.update_interval_ns, Some(20 * MS));
        let obs = m.observer();
        obs.codelet_registered(&CodeletInfo {
            id: 0,
            name: "gemm".into(),
            archs: vec![Arch::Cpu, Arch::Gpu],
        });
        obs.task_started(1, 0, Arch::Gpu, Timestamp(T0 + 5 * MS));
        obs.task_ended(1, 0, Arch::Gpu, Timestamp(T0 + 35 * MS));
        clock.set(Timestamp(T0 + 39 * MS)); // the last 20 ms refresh was at T0 + 20 ms
        let r = read(&mut m);
        let want = 60.0 * 20e-3 + 180.0 * 15e-3;
        assert_quantised(counter(r[2]), want, 1e-3);
        // The GPU task also drew 2 W on the package, whose 1 ms ticks are up to date.
        let pkg = 30.0 * 39e-3 + 2.0 * 30e-3;
        assert_quantised(counter(r[0]), pkg, 2f64.powi(-14));

        // As a power sensor: the average over the window of refreshes.
        c.gpu.sensor = GpuSensor::Power;
        c.gpu.power_window_ms = 40;
        let clock = Arc::new(ManualClock::new(Timestamp(0)));
        let mut m = SimMeter::with_clock(c, &[gpu_worker], clock.clone()).unwrap();
        let obs = m.observer();
        obs.task_started(1, 0, Arch::Gpu, Timestamp(40 * MS)); // unregistered: default 120 W
                                                               // Refreshes at 0, 20, 40... ms; the task (120 W default) starts at 40 ms.
        let expect = [60.0, 60.0, 60.0, 60.0, 60.0, 60.0, 120.0, 120.0, 180.0];
        for (k, want) in expect.iter().enumerate() {
            clock.set(Timestamp(k as u64 * 10 * MS));
            let RawReading::Power(w) = read(&mut m)[2] else {
                panic!("a power reading")
            };
            assert!((w - want).abs() < 1e-6, "k={k}: {w} vs {want}");
        }
        assert_eq!(obs.unregistered_codelet_events(), 1);
    }

    #[test]
    fn ground_truth_matches_the_domains() {
        let m = SimMeter::new(SimConfig::default(), &[cpu(0, 0)]).unwrap();
        let t = m.ground_truth(&[7, 8]).unwrap();
        assert_eq!(t.base_w, vec![(7, 30.0), (8, 4.0)]);
        let c = SimConfig::default();
        assert_eq!(t.noise_sigma_w, c.package.noise_sigma_w);
        // Each domain's own noise.
        assert_eq!(t.noise_of(7), c.package.noise_sigma_w);
        assert_eq!(t.noise_of(8), c.dram.noise_sigma_w);
        let gemm_pkg = t
            .task_w
            .iter()
            .find(|e| e.domain == 7 && e.codelet == "gemm" && e.arch == Arch::Cpu)
            .unwrap();
        assert_eq!(gemm_pkg.extra_w, 16.0);
        let gemm_dram = t
            .task_w
            .iter()
            .find(|e| e.domain == 8 && e.codelet == "gemm" && e.arch == Arch::Cpu)
            .unwrap();
        assert_eq!(gemm_dram.extra_w, 1.8);
        assert!(t.task_w.iter().any(|e| e.codelet == "*"));
        // No seed configured: the meter drew one, and the truth records it.
        assert_eq!(t.config["seed"], m.seed());
        let other = SimMeter::new(SimConfig::default(), &[cpu(0, 0)]).unwrap();
        assert_ne!(other.seed(), m.seed(), "every run draws its own seed");
        let fixed = SimConfig {
            seed: Some(42),
            ..SimConfig::default()
        };
        let m = SimMeter::new(fixed, &[cpu(0, 0)]).unwrap();
        assert_eq!(m.ground_truth(&[0, 1]).unwrap().config["seed"], 42);
    }

    #[test]
    fn unknown_workers_are_counted_not_crashed_on() {
        let m = SimMeter::new(quiet(), &[cpu(0, 0)]).unwrap();
        let obs = m.observer();
        obs.task_started(9, 0, Arch::Cpu, Clock::now());
        assert_eq!(obs.unknown_worker_events(), 1);
    }

    #[test]
    fn a_huge_worker_id_is_refused_not_allocated_for() {
        let e = SimMeter::new(quiet(), &[cpu(0, 0), cpu(u32::MAX, 0)]).unwrap_err();
        assert!(
            matches!(
                e,
                EnergyError::SimWorkerId {
                    worker: u32::MAX,
                    limit: MAX_SIM_WORKERS
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("4294967295"), "{e}");
        let last = (MAX_SIM_WORKERS - 1) as u32;
        assert!(SimMeter::new(quiet(), &[cpu(last, 0)]).is_ok());
    }
}
