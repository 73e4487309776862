//! The sampler: one thread that reads every meter periodically and streams the readings into
//! the trace.
//!
//! # Protocol
//! 1. [`Sampler::start`] numbers the meters and domains, computes which workers each domain
//!    covers, and sends `Chunk::Meters`, then one `Chunk::Truth` per simulated meter.
//! 2. It takes the first reading of every meter on the caller's thread, so that the baseline
//!    exists before the caller starts any task, then starts the sampler thread.
//! 3. The thread sleeps to absolute deadlines `start + k·period` (no drift), reads every meter
//!    at each, stamps every reading with the time its value was current on the trace clock
//!    ([`Meter::value_time`] when the meter knows it, as the simulator does; otherwise the
//!    middle of the `read` call: a counter read then holds the value of its last update,
//!    and the attribution aligns reads to the meter's updates, see
//!    `attribution/align.rs`) and with the wall clock, unwraps them through
//!    [`crate::wrap`], and sends `Chunk::Samples`
//!    in batches (when a batch is full, and at least every [`SAMPLE_FLUSH`] so that a crash loses
//!    little). A deadline already past when the previous reading ends is skipped, not
//!    caught up, and counted as an overrun: readings are never assumed periodic, each has
//!    its own timestamp.
//!    With [`Sampler::start_with_frequency`], each reading also reads the CPU packages'
//!    frequency right after the meters ([`crate::freq`]) and sends it as
//!    `Chunk::Frequencies` with the samples, against each package's energy domain.
//! 4. [`Sampler::stop`] wakes the thread at once; it takes a last reading, flushes, sends
//!    each simulated meter's truth again with what the run realised, measures its own CPU
//!    time and returns [`SamplerStats`].
//!
//! A domain whose read fails (a zone that vanished) gets no sample for that reading; the
//! failure is counted per domain and reported in [`SamplerStats::failures`], and the other
//! domains go on. Nothing is dropped silently.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use taskwatt_traces::{
    Chunk, Clock, Domain, DomainId, DomainInfo, EnergySample, FrequencySample, MeterId, MeterInfo,
    Timestamp, TraceSink, WorkerInfo,
};

use crate::freq::FrequencyReader;

use crate::meter::{DomainRead, Meter, RawReading};
use crate::wrap::Accumulator;
use crate::EnergyError;

/// The shortest sampling period: RAPL updates about every 1 ms.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
/// The longest sampling period: slower risks a RAPL wrap between reads on big parts.
pub const MAX_PERIOD: Duration = Duration::from_secs(1);

/// Readings reach the trace sink at most this long after they were taken (a batch is also
/// sent when full): what a killed run can lose of its energy readings, and how soon a
/// trace being written can be fitted (adaptive type calibration).
pub const SAMPLE_FLUSH: Duration = Duration::from_millis(50);

/// How the sampler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// Time between readings, 1 ms ..= 1 s (default 10 ms).
    pub period: Duration,
    /// Samples per `Chunk::Samples` (default 1024); a partial batch is sent at least every
    /// second.
    pub batch: usize,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            period: Duration::from_millis(10),
            batch: 1024,
        }
    }
}

impl SamplerConfig {
    /// The default configuration with another period (checked).
    pub fn with_period(period: Duration) -> Result<SamplerConfig, EnergyError> {
        let c = SamplerConfig {
            period,
            ..SamplerConfig::default()
        };
        c.validate()?;
        Ok(c)
    }

    /// Checks the period is within [`MIN_PERIOD`] ..= [`MAX_PERIOD`].
    pub fn validate(&self) -> Result<(), EnergyError> {
        if (MIN_PERIOD..=MAX_PERIOD).contains(&self.period) {
            Ok(())
        } else {
            Err(EnergyError::InvalidPeriod {
                period_ns: self.period.as_nanos(),
            })
        }
    }
}

/// Repeated read failures of one domain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadFailure {
    /// Backend of its meter.
    pub backend: String,
    /// The domain.
    pub domain: Domain,
    /// The sensor's name.
    pub sensor: String,
    /// How many readings failed.
    pub count: u64,
    /// The first error's message.
    pub first_error: String,
}

/// What the sampler did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SamplerStats {
    /// Meter reads (one per meter per reading, first and last included).
    pub reads: u64,
    /// Samples written.
    pub samples: u64,
    /// Deadlines skipped because the previous reading ended after them.
    pub overruns: u64,
    /// Domain readings that failed.
    pub read_errors: u64,
    /// The failures, per domain.
    pub failures: Vec<ReadFailure>,
    /// Counter wraps undone.
    pub wraps: u64,
    /// Readings ignored as glitches (small backward steps, bad powers).
    pub glitches: u64,
    /// Wall time of the sampler thread, in ns.
    pub wall_ns: u64,
    /// CPU time the sampler thread used, in ns, where the OS tells (Linux).
    pub thread_cpu_ns: Option<u64>,
    /// Frequency samples written (one per package per reading where its cores ran).
    pub frequency_samples: u64,
}

impl SamplerStats {
    /// The sampler thread's cost, in % of one core, where known.
    pub fn cpu_percent_of_one_core(&self) -> Option<f64> {
        let cpu = self.thread_cpu_ns?;
        (self.wall_ns > 0).then(|| 100.0 * cpu as f64 / self.wall_ns as f64)
    }
}

/// One meter with its reading state.
struct MeterState {
    meter: Box<dyn Meter>,
    backend: String,
    simulated: bool,
    ids: Vec<DomainId>,
    acc: Vec<Accumulator>,
    out: Vec<DomainRead>,
    fails: Vec<(u64, Option<String>)>,
}

/// Everything the sampler thread owns.
struct Worker {
    meters: Vec<MeterState>,
    freqs: Vec<crate::freq::PackageFrequency>,
    fbatch: Vec<FrequencySample>,
    sink: TraceSink,
    batch: Vec<EnergySample>,
    batch_size: usize,
    last_flush: Instant,
    stats: SamplerStats,
}

impl Worker {
    /// Reads every meter once.
    fn read_all(&mut self) {
        for m in &mut self.meters {
            let before = Clock::now();
            m.meter.read(&mut m.out);
            let after = Clock::now();
            let mid = before.as_ns() + after.saturating_sub(before) / 2;
            let wall = Clock::unix_now_ns();
            self.stats.reads += 1;
            for (i, r) in m.out.iter_mut().enumerate() {
                // Leave an error in place of a stale value if the meter forgets a slot.
                let r = std::mem::replace(r, Ok(RawReading::Power(f64::NAN)));
                match r {
                    Ok(reading) => {
                        // When the value was current (see `Meter::value_time`).
                        // Otherwise the time of the read: the attribution finds the update
                        // each read shows from the readings themselves (align.rs).
                        let t = m.meter.value_time(i).unwrap_or(Timestamp(mid));
                        let energy_j = m.acc[i].update(t, reading);
                        self.batch.push(EnergySample {
                            domain: m.ids[i],
                            t,
                            wall_unix_ns: wall,
                            energy_j,
                            raw: reading.raw_for_trace(),
                        });
                        self.stats.samples += 1;
                    }
                    Err(e) => {
                        self.stats.read_errors += 1;
                        let f = &mut m.fails[i];
                        f.0 += 1;
                        f.1.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
        for f in &mut self.freqs {
            self.stats.frequency_samples += f.read_into(&mut self.fbatch);
        }
        if self.batch.len() >= self.batch_size || self.last_flush.elapsed() >= SAMPLE_FLUSH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let full = std::mem::replace(&mut self.batch, Vec::with_capacity(self.batch_size));
            self.sink.send(Chunk::Samples(full));
        }
        if !self.fbatch.is_empty() {
            self.sink
                .send(Chunk::Frequencies(std::mem::take(&mut self.fbatch)));
        }
        self.last_flush = Instant::now();
    }

    fn finish(mut self) -> SamplerStats {
        self.flush();
        // A simulated meter's truth again, now with what the run realised (the last Truth
        // chunk of a trace is its truth).
        for m in &self.meters {
            if m.simulated {
                if let Some(truth) = m.meter.ground_truth(&m.ids) {
                    self.sink.send(Chunk::Truth(truth));
                }
            }
        }
        for m in &self.meters {
            for (i, acc) in m.acc.iter().enumerate() {
                self.stats.wraps += acc.wraps();
                self.stats.glitches += acc.glitches();
                if let (count, Some(first)) = &m.fails[i] {
                    let spec = &m.meter.domains()[i];
                    self.stats.failures.push(ReadFailure {
                        backend: m.backend.clone(),
                        domain: spec.domain,
                        sensor: spec.name.clone(),
                        count: *count,
                        first_error: first.clone(),
                    });
                }
            }
        }
        self.stats
    }
}

/// A running sampler; [`Sampler::stop`] it to get its statistics.
pub struct Sampler {
    /// Set to stop the thread, which is then unparked.
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<SamplerStats>>,
    meters: Vec<MeterInfo>,
    domains: Vec<DomainInfo>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("meters", &self.meters)
            .field("domains", &self.domains.len())
            .finish_non_exhaustive()
    }
}

impl Sampler {
    /// Starts sampling `meters` into `sink` (see the module docs for what is sent when).
    /// `workers` gives each domain the workers it covers.
    pub fn start(
        meters: Vec<Box<dyn Meter>>,
        workers: &[WorkerInfo],
        sink: TraceSink,
        config: SamplerConfig,
    ) -> Result<Sampler, EnergyError> {
        Self::start_with_frequency(meters, Vec::new(), workers, sink, config)
    }

    /// As [`Sampler::start`], also reading `frequency` at every reading, right after the
    /// meters: each package's frequency goes to the trace against the package's energy
    /// domain (`Chunk::Frequencies`). A reader's package with no package domain among the
    /// meters' is not written.
    pub fn start_with_frequency(
        meters: Vec<Box<dyn Meter>>,
        frequency: Vec<Box<dyn FrequencyReader>>,
        workers: &[WorkerInfo],
        sink: TraceSink,
        config: SamplerConfig,
    ) -> Result<Sampler, EnergyError> {
        config.validate()?;
        let mut infos = Vec::with_capacity(meters.len());
        let mut domains = Vec::new();
        let mut states = Vec::with_capacity(meters.len());
        for (mi, meter) in meters.into_iter().enumerate() {
            let desc = meter.describe();
            let id = mi as MeterId;
            infos.push(MeterInfo {
                id,
                backend: desc.backend.clone(),
                simulated: desc.simulated,
                description: desc.description,
            });
            let mut ids = Vec::new();
            for spec in meter.domains() {
                let did = domains.len() as DomainId;
                ids.push(did);
                domains.push(spec.info(did, id, workers));
            }
            let n = ids.len();
            states.push(MeterState {
                acc: meter
                    .domains()
                    .iter()
                    .map(Accumulator::for_domain)
                    .collect(),
                out: (0..n).map(|_| Ok(RawReading::Power(f64::NAN))).collect(),
                fails: vec![(0, None); n],
                simulated: desc.simulated,
                backend: desc.backend,
                ids,
                meter,
            });
        }
        sink.send(Chunk::Meters {
            meters: infos.clone(),
            domains: domains.clone(),
        });
        for (info, state) in infos.iter().zip(&states) {
            if info.simulated {
                if let Some(truth) = state.meter.ground_truth(&state.ids) {
                    sink.send(Chunk::Truth(truth));
                }
            }
        }

        let freqs = frequency
            .into_iter()
            .filter_map(|reader| crate::freq::PackageFrequency::new(reader, &domains))
            .collect();
        let mut worker = Worker {
            meters: states,
            freqs,
            fbatch: Vec::new(),
            sink,
            batch: Vec::with_capacity(config.batch),
            batch_size: config.batch.max(1),
            last_flush: Instant::now(),
            stats: SamplerStats::default(),
        };
        worker.read_all();

        // The thread waits for its next deadline parked (a futex wait with a timeout),
        // not in a channel's receive: crossbeam's spins and yields a dozen times before it
        // blocks, which at 1 kHz cost more CPU than the readings (BENCHMARKS.md, "Energy
        // sampler cost").
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let period = config.period;
        let handle = std::thread::Builder::new()
            .name("taskwatt-energy".into())
            .spawn(move || {
                let cpu0 = thread_cpu_ns();
                let start = Instant::now();
                let mut next = start + period;
                // Deadlines already past at `now`, from `next` on: skipped, counted.
                let skip_missed = |next: &mut Instant, now: Instant, stats: &mut SamplerStats| {
                    if now >= *next {
                        let missed = ((now - *next).as_nanos() / period.as_nanos()) as u32 + 1;
                        stats.overruns += u64::from(missed);
                        *next += period * missed;
                    }
                };
                loop {
                    if !wait_until(next, &stopping) {
                        // Stop asked (or the Sampler dropped). Deadlines that passed while
                        // this thread waited for a CPU were missed too.
                        skip_missed(&mut next, Instant::now(), &mut worker.stats);
                        break;
                    }
                    worker.read_all();
                    next += period;
                    skip_missed(&mut next, Instant::now(), &mut worker.stats);
                }
                worker.read_all();
                let mut stats = worker.finish();
                stats.wall_ns = start.elapsed().as_nanos() as u64;
                stats.thread_cpu_ns = match (cpu0, thread_cpu_ns()) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                    _ => None,
                };
                stats
            })
            .map_err(|source| EnergyError::SamplerSpawn { source })?;
        Ok(Sampler {
            stop,
            handle: Some(handle),
            meters: infos,
            domains,
        })
    }

    /// The meters, as written to the trace.
    pub fn meters(&self) -> &[MeterInfo] {
        &self.meters
    }

    /// The domains, as written to the trace.
    pub fn domains(&self) -> &[DomainInfo] {
        &self.domains
    }

    /// Takes a last reading, flushes, stops the thread and returns what it did.
    pub fn stop(mut self) -> Result<SamplerStats, EnergyError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<SamplerStats, EnergyError> {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = &self.handle {
            h.thread().unpark();
        }
        match self.handle.take() {
            Some(h) => h.join().map_err(|p| EnergyError::SamplerPanicked {
                message: p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into()),
            }),
            None => Ok(SamplerStats::default()),
        }
    }
}

impl Drop for Sampler {
    /// A sampler dropped without `stop` still takes its last reading and flushes.
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Parks the calling thread until `deadline`; `false` as soon as `stop` is set (the
/// setter unparks it). Spurious wake-ups only park it again.
fn wait_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// CPU time of the calling thread in ns, from `/proc/thread-self/schedstat` (ns precision)
/// or else `/proc/thread-self/stat` (utime + stime, in USER_HZ = 100 ticks). `None` off Linux.
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    if let Ok(s) = std::fs::read_to_string("/proc/thread-self/schedstat") {
        if let Some(ns) = s.split_whitespace().next().and_then(|v| v.parse().ok()) {
            return Some(ns);
        }
    }
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    parse_stat_cpu_ns(&s)
}

/// utime + stime of a `/proc/.../stat` line, in ns. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`.
fn parse_stat_cpu_ns(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn period_bounds() {
        assert!(SamplerConfig::with_period(Duration::from_millis(1)).is_ok());
        assert!(SamplerConfig::with_period(Duration::from_secs(1)).is_ok());
        let e = SamplerConfig::with_period(Duration::from_micros(999)).unwrap_err();
        assert!(e.to_string().contains("999000 ns"), "{e}");
        assert!(SamplerConfig::with_period(Duration::from_millis(1001)).is_err());
        assert_eq!(SamplerConfig::default().period, Duration::from_millis(10));
    }

    #[test]
    fn a_dropped_sampler_still_takes_its_last_reading_and_flushes() {
        use crate::{Meter, SimConfig, SimMeter};
        let meter = SimMeter::new(SimConfig::default(), &[]).unwrap();
        let (sink, trace) = TraceSink::memory();
        let config = SamplerConfig {
            period: Duration::from_secs(1),
            batch: 1_000_000,
        };
        let sampler =
            Sampler::start(vec![Box::new(meter) as Box<dyn Meter>], &[], sink, config).unwrap();
        assert_eq!(sampler.domains().len(), 2);
        drop(sampler);
        let samples: usize = trace
            .chunks()
            .iter()
            .map(|c| match c {
                Chunk::Samples(s) => s.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(samples, 4, "first and last reading of 2 domains");
    }

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        let line = "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu_ns(line), Some(300 * 10_000_000));
        assert_eq!(parse_stat_cpu_ns("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn thread_cpu_time_grows_with_work() {
        let a = thread_cpu_ns().expect("Linux has /proc/thread-self");
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = thread_cpu_ns().unwrap();
        assert!(b > a, "{a} {b}");
    }
}
