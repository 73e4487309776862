//! The simulated meter over executions that already happened: the same meter as a live
//! run's, on a clock the replay sets, fed the executions in time order. A distributed run
//! uses it per node (`taskwatt merge`): the ranks of a node are separate processes, so no
//! live observer sees all of their tasks, but their merged trace does.

use std::sync::Arc;

use taskwatt_traces::{
    Arch, CodeletInfo, DomainInfo, EnergySample, ExecutionObserver, FrequencySample, GroundTruth,
    Timestamp, WorkerInfo,
};

use super::{ManualClock, SimConfig, SimMeter};
use crate::{Accumulator, EnergyError, Meter, RawReading};

/// One execution to replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Execution {
    /// The worker (an id of the replay's workers).
    pub worker: u32,
    /// The codelet.
    pub codelet: u32,
    /// Its architecture.
    pub arch: Arch,
    /// When it started.
    pub start: Timestamp,
    /// When it ended.
    pub end: Timestamp,
}

/// What the replayed meter read.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    /// Its domains, ids from the replay's first id.
    pub domains: Vec<DomainInfo>,
    /// Their samples, in time order.
    pub samples: Vec<EnergySample>,
    /// The package domains' frequency at every reading where their cores ran.
    pub frequencies: Vec<FrequencySample>,
    /// The meter's truth, on those ids.
    pub truth: Option<GroundTruth>,
    /// The meter's description.
    pub description: String,
}

/// Replays `executions` of `workers` through a simulated meter of `config`, read every
/// `period_ns` from one period before the first start (or `window`'s start, if earlier) to
/// past the last end (or `window`'s end, if later), every domain's last value from after
/// it. Domain ids start at `first_id`; names get `prefix`.
#[allow(clippy::too_many_arguments)]
pub fn replay(
    config: SimConfig,
    workers: &[WorkerInfo],
    codelets: &[CodeletInfo],
    executions: &[Execution],
    period_ns: u64,
    window: Option<(Timestamp, Timestamp)>,
    first_id: u16,
    prefix: &str,
) -> Result<Replayed, EnergyError> {
    let period_ns = period_ns.max(1_000_000);
    let mut first = executions
        .iter()
        .map(|e| e.start.as_ns())
        .min()
        .unwrap_or(0);
    let mut last = executions
        .iter()
        .map(|e| e.end.as_ns())
        .max()
        .unwrap_or(first);
    if let Some((a, b)) = window {
        first = first.min(a.as_ns());
        last = last.max(b.as_ns());
    }
    // From the window's start to its end, as a live sampler reads from its start to its
    // stop: the grid of whole periods before and after put up to two periods of a node's
    // idle base into the merged run (a 4 ms graph sampled at 1 s read a 1 s window).
    let t0 = first;
    let clock = Arc::new(ManualClock::new(Timestamp(t0)));
    let mut meter = SimMeter::with_clock(config, workers, clock.clone())?;
    let obs = meter.observer();
    for c in codelets {
        obs.codelet_registered(c);
    }
    let specs = meter.domains().to_vec();
    let domains: Vec<DomainInfo> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut d = s.info(first_id + i as u16, 0, workers);
            d.name = format!("{prefix}{}", d.name);
            d
        })
        .collect();
    let mut accs: Vec<Accumulator> = specs.iter().map(Accumulator::for_domain).collect();
    let mut reads: Vec<crate::DomainRead> =
        specs.iter().map(|_| Ok(RawReading::Counter(0))).collect();
    // Starts before ends at one instant (a task of no length starts, then ends).
    let mut events: Vec<(u64, bool, &Execution)> = Vec::with_capacity(2 * executions.len());
    for e in executions {
        events.push((e.start.as_ns(), false, e));
        events.push((e.end.as_ns().max(e.start.as_ns()), true, e));
    }
    events.sort_by_key(|(t, end, e)| (*t, *end, e.worker));
    let mut freq = crate::freq::PackageFrequency::new(Box::new(meter.frequency_reader()), &domains);
    let mut frequencies = Vec::new();
    let mut samples = Vec::new();
    let mut next = t0;
    // When the last reading was taken.
    let mut read_last: Option<u64> = None;
    // `stop`: also read at `t` itself, if the grid did not (the sampler's last reading).
    let mut read_until =
        |t: u64, stop: bool, meter: &mut SimMeter, samples: &mut Vec<EnergySample>| {
            if stop && next > t && read_last.is_none_or(|r| r < t) {
                // The last grid reading came before `t`: one more, there.
                next = t;
            }
            while next <= t {
                read_last = Some(next);
                clock.set(Timestamp(next));
                meter.read(&mut reads);
                if let Some(f) = &mut freq {
                    f.read_into(&mut frequencies);
                }
                for (i, r) in reads.iter_mut().enumerate() {
                    if let Ok(reading) = std::mem::replace(r, Ok(RawReading::Counter(0))) {
                        let vt = meter.value_time(i).unwrap_or(Timestamp(next));
                        samples.push(EnergySample {
                            domain: first_id + i as u16,
                            t: vt,
                            wall_unix_ns: 0,
                            energy_j: accs[i].update(vt, reading),
                            raw: reading.raw_for_trace(),
                        });
                    }
                }
                next += period_ns;
            }
            clock.set(Timestamp(t));
        };
    for (t, end, e) in &events {
        read_until(*t, false, &mut meter, &mut samples);
        if *end {
            obs.task_ended(e.worker, e.codelet, e.arch, Timestamp(*t));
        } else {
            obs.task_started(e.worker, e.codelet, e.arch, Timestamp(*t));
        }
    }
    let refresh = domains
        .iter()
        .filter_map(|d| d.update_interval_ns)
        .max()
        .unwrap_or(0);
    // The last reading once the slowest counter has refreshed past the end, as the live
    // sampler's final update waits for it (`Sampler::stop`).
    read_until(last, false, &mut meter, &mut samples);
    read_until(last + refresh, true, &mut meter, &mut samples);
    let ids: Vec<u16> = domains.iter().map(|d| d.id).collect();
    Ok(Replayed {
        truth: meter.ground_truth(&ids),
        description: meter.describe().description,
        domains,
        samples,
        frequencies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_reads_what_its_executions_draw() {
        let mut c = SimConfig::ideal();
        c.package.noise_sigma_w = 0.0;
        c.dram.noise_sigma_w = 0.0;
        let w = |id| WorkerInfo::cpu(id, 0);
        let cl = [CodeletInfo {
            id: 0,
            name: "gemm".into(),
            archs: vec![Arch::Cpu],
        }];
        let ms = 1_000_000u64;
        // Two workers, each busy for 500 ms in 1 s.
        let ex: Vec<Execution> = (0..2u32)
            .map(|k| Execution {
                worker: k,
                codelet: 0,
                arch: Arch::Cpu,
                start: Timestamp(1_000 * ms + u64::from(k) * 250 * ms),
                end: Timestamp(1_500 * ms + u64::from(k) * 250 * ms),
            })
            .collect();
        let r = replay(c, &[w(0), w(1)], &cl, &ex, 10 * ms, None, 5, "node a: ").unwrap();
        assert_eq!(r.domains[0].id, 5);
        assert!(r.domains[0].name.starts_with("node a: "));
        let pkg: Vec<&EnergySample> = r.samples.iter().filter(|s| s.domain == 5).collect();
        let (a, b) = (pkg[0], pkg[pkg.len() - 1]);
        let span = (b.t.as_ns() - a.t.as_ns()) as f64 * 1e-9;
        // 30 W base over the span, plus 16 W for gemm over 2 x 0.5 s.
        let want = 30.0 * span + 16.0;
        assert!(
            (b.energy_j - a.energy_j - want).abs() < 0.01,
            "{} vs {want}",
            b.energy_j - a.energy_j
        );
        assert!(r.truth.unwrap().base_w.iter().any(|(d, _)| *d == 5));

        // On the contended machine (no variation or drift), the 250 ms both workers run
        // gemm draw g(2) of 2 x 16 W.
        let mut c = SimConfig::default();
        c.package.noise_sigma_w = 0.0;
        c.dram.noise_sigma_w = 0.0;
        c.tasks.variation = 0.0;
        c.package.drift = 0.0;
        let g2 = c.occupancy_factor(true, 2);
        assert!(g2 < 0.95, "{g2}");
        let r = replay(c, &[w(0), w(1)], &cl, &ex, 10 * ms, None, 0, "").unwrap();
        let pkg: Vec<&EnergySample> = r.samples.iter().filter(|s| s.domain == 0).collect();
        let (a, b) = (pkg[0], pkg[pkg.len() - 1]);
        let span = (b.t.as_ns() - a.t.as_ns()) as f64 * 1e-9;
        let want = 30.0 * span + 16.0 * 0.5 + 32.0 * g2 * 0.25;
        assert!(
            (b.energy_j - a.energy_j - want).abs() < 0.01,
            "{} vs {want}",
            b.energy_j - a.energy_j
        );
        // The truth says what the run realised: gemm at g(2) for half of its time.
        let truth = r.truth.unwrap();
        let real = truth.realised_of(0).unwrap();
        let gemm = &real.types[0];
        assert_eq!(gemm.codelet, "gemm");
        assert!((gemm.busy_s - 1.0).abs() < 1e-9, "{}", gemm.busy_s);
        assert!((gemm.alone_w - 16.0).abs() < 1e-9);
        let at_run = 16.0 * (0.5 + 0.5 * g2);
        assert!((gemm.at_run_w - at_run).abs() < 1e-9, "{}", gemm.at_run_w);
        assert!(
            (real.occupancy_s[2] - 0.25).abs() < 1e-9,
            "{:?}",
            real.occupancy_s
        );
        assert_eq!(real.occupancy_factor[2], g2);
    }
}
