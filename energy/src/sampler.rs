//! The sampler: one thread that reads every meter periodically and streams the readings into
//! the trace.
//!
//! # Protocol
//! 1. [`Sampler::start`] numbers the meters and domains, computes which workers each domain
//!    covers, and sends `Chunk::Meters`, then one `Chunk::Truth` per simulated meter.
//! 2. It takes the first reading of every meter on the caller's thread, so that the baseline
//!    exists before the caller starts any task, then starts the sampler thread.
//! 3. The thread sleeps to absolute deadlines `start + k·period` (no drift; with a tap, see
//!    below), reads every meter at each, stamps every reading with the time its value was current on the trace clock
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
//! 4. [`Sampler::stop`] wakes the thread at once; it takes a last reading (and, for a
//!    counter that refreshes slowly, as NVML's, one after its first refresh past the
//!    stop: `FINAL_UPDATE_MIN`), flushes, sends
//!    each simulated meter's truth again with what the run realised, measures its own CPU
//!    time and returns [`SamplerStats`].
//!
//! # Readings taken by the workers
//!
//! On a virtual machine a thread's wake-up alone can cost 13 to 20 µs of CPU, which at
//! 1 kHz is 1.3 to 2 % of a core before anything is read. So a runtime whose workers
//! report their tasks to a [`SamplerTap`] (an [`ExecutionObserver`]) lets them take the
//! readings: at a task's end past the deadline, the worker that ended it reads every meter
//! (if no other thread is reading; it never waits), exactly as the thread would have.
//!
//! The thread wakes a quarter of a period after each deadline and reads only if no worker
//! did. Once the workers have taken [`TAP_STREAK`] readings in a row within that quarter,
//! it sleeps [`TAP_SLEEP_PERIODS`] periods instead of one (at most [`TAP_SLEEP_MAX`]),
//! until it finds a deadline that no task end took (idle workers, or tasks longer than the
//! period). It reads that one and goes back to every period. So at 1 kHz, tasks much
//! shorter than the period cost the thread one wake-up in eight, and longer ones keep the
//! readings on the period's grid.
//!
//! While no task runs the thread wakes as seldom: each worker counts its task starts and
//! ends (odd while one runs) on a cache line of its own, and when the thread's reading
//! finds no task running and none started or ended since its previous reading, it sleeps
//! as in a streak. The first task to start then reads, so the idle interval ends where the
//! work begins, and the deadline grid restarts a period after that reading. The deadlines
//! slept through are counted apart ([`SamplerStats::idle_skipped`]).
//!
//! Each reading keeps its own timestamp, wherever it was taken. The deadlines a busy
//! spell's end leaves before the thread's next wake-up (up to `TAP_SLEEP_PERIODS - 1`) are
//! skipped and counted as overruns; the counters are cumulative, so that interval merely
//! spans more time. A meter whose read may block ([`Meter::readable_from_workers`]: NVML's) keeps
//! every reading on the thread. [`SamplerStats`] counts the readings taken by workers and
//! the time they took, and [`SamplerStats::cpu_percent_of_one_core`] includes it.
//!
//! A domain whose read fails (a zone that vanished) gets no sample for that reading; the
//! failure is counted per domain and reported in [`SamplerStats::failures`], and the other
//! domains go on. Nothing is dropped silently.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use taskwatt_traces::{
    Chunk, Clock, Domain, DomainId, DomainInfo, EnergySample, FrequencySample, MeterId, MeterInfo,
    Timestamp, TraceSink, WorkerInfo,
};

use crate::freq::FrequencyReader;

mod tap;
pub use tap::SamplerTap;
use tap::{Activity, Core, MAX_TRACKED_WORKERS};

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

/// While the workers take the readings (see the module docs), the sampler's thread wakes
/// once every this many periods (at most [`TAP_SLEEP_MAX`] apart).
pub const TAP_SLEEP_PERIODS: u64 = 8;

/// The longest the sampler's thread sleeps while the workers take the readings.
pub const TAP_SLEEP_MAX: Duration = Duration::from_millis(8);

/// Readings in a row the workers must take on time (within a quarter of a period of
/// their deadline) before the sampler's thread sleeps [`TAP_SLEEP_PERIODS`] periods.
pub const TAP_STREAK: u64 = 8;

/// How the sampler runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamplerConfig {
    /// Time between readings, 1 ms ..= 1 s (default 10 ms).
    pub period: Duration,
    /// Samples per `Chunk::Samples` (default 1024); a partial batch is sent at least every
    /// 50 ms (`SAMPLE_FLUSH`).
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
    /// Readings taken by the runtime's workers between two tasks (see [`SamplerTap`]).
    pub worker_readings: u64,
    /// The time those readings took on the workers, in ns.
    pub worker_read_ns: u64,
    /// Times the sampler's thread woke up (its deadlines, and the stop).
    pub thread_wakeups: u64,
    /// Deadlines left unread because no task ran (see "Readings taken by the workers" in
    /// the module docs): the readings on each side of them span that idle time.
    pub idle_skipped: u64,
    /// How long the stop waited for the slow counters' refresh after it, ns: a counter
    /// that refreshes every 5 ms or less often (NVML's) is read again after its first
    /// refresh past the stop, for at most 250 ms, so that its record covers the run.
    pub final_update_ns: u64,
}

/// Counters refreshing this often or less get a reading after their first refresh past
/// the stop: their record then covers the whole run (NVML's refreshes every 20 to 100 ms;
/// RAPL's, every millisecond, needs none).
pub(crate) const FINAL_UPDATE_MIN: Duration = Duration::from_millis(5);

/// The longest the stop waits for a slow counter's refresh.
pub(crate) const FINAL_UPDATE_MAX: Duration = Duration::from_millis(250);

impl SamplerStats {
    /// The sampling's cost, in % of one core, where known: the thread's CPU time and the
    /// time the workers spent on the readings they took.
    pub fn cpu_percent_of_one_core(&self) -> Option<f64> {
        let cpu = self.thread_cpu_ns? + self.worker_read_ns;
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
    /// Each domain's energy at the last reading (NaN before one).
    last_j: Vec<f64>,
    /// At the first reading (NaN before one).
    first_j: Vec<f64>,
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
                        m.last_j[i] = energy_j;
                        if m.first_j[i].is_nan() {
                            m.first_j[i] = energy_j;
                        }
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

    /// After the stop's reading: a slow counter (one that refreshes every `FINAL_UPDATE_MIN`
    /// or more, as NVML's every 20 to 100 ms), or one that has not moved since the first
    /// reading (a run shorter than one refresh), shows the energy of its last refresh
    /// before the stop, not of the run's end, so its record would end up to one refresh
    /// before the graph does, and a region's measured energy would miss that much. Reads
    /// again, every millisecond, until each such counter has moved (a refresh after the
    /// stop), for at most its refresh interval and 5 ms more (a counter that no longer
    /// moves, at 0 W, ends it). Returns how long it waited.
    fn final_update(&mut self) -> Duration {
        let t0 = Instant::now();
        // Also a counter that has not moved since the first reading, however fast it
        // refreshes: a run shorter than one refresh (an empty graph) read one value twice,
        // which gives no interval, and its attribution failed or not by chance.
        let slow = |m: &MeterState| -> Vec<(usize, u64)> {
            m.meter
                .domains()
                .iter()
                .enumerate()
                .filter_map(|(i, d)| {
                    let u = d.update_interval_ns?;
                    let still = m.first_j[i].is_finite() && m.first_j[i] == m.last_j[i];
                    (u >= FINAL_UPDATE_MIN.as_nanos() as u64 || still).then_some((i, u))
                })
                .collect()
        };
        let at_stop: Vec<Vec<(usize, f64)>> = self
            .meters
            .iter()
            .map(|m| slow(m).into_iter().map(|(i, _)| (i, m.last_j[i])).collect())
            .collect();
        let longest = self
            .meters
            .iter()
            .flat_map(|m| slow(m).into_iter().map(|(_, u)| u))
            .max();
        let Some(longest) = longest else {
            return Duration::ZERO;
        };
        let limit = Duration::from_nanos(longest.min(FINAL_UPDATE_MAX.as_nanos() as u64))
            + Duration::from_millis(5);
        let moved = |w: &Worker| {
            w.meters.iter().zip(&at_stop).all(|(m, stop)| {
                stop.iter()
                    .all(|&(i, j)| !j.is_finite() || m.last_j[i] != j)
            })
        };
        while !moved(self) && t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(1));
            self.read_all();
        }
        t0.elapsed()
    }

    fn finish(&mut self) -> SamplerStats {
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
        std::mem::take(&mut self.stats)
    }
}

/// A running sampler; [`Sampler::stop`] it to get its statistics.
pub struct Sampler {
    /// The state the thread shares with a tap; its `stop` stops the thread.
    core: Arc<Core>,
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
        Self::start_tapped(meters, frequency, workers, sink, config, None)
    }

    /// As [`Sampler::start_with_frequency`], the workers taking the readings through
    /// `tap` between their tasks (see the module docs) when every meter allows it. A tap
    /// serves one sampler: given a second time, it is left to the first. The runtime must
    /// report its tasks to the same tap, with the ids of `workers`: a tap that sees no task
    /// looks idle, and is then read only every [`TAP_SLEEP_MAX`].
    pub fn start_tapped(
        meters: Vec<Box<dyn Meter>>,
        frequency: Vec<Box<dyn FrequencyReader>>,
        workers: &[WorkerInfo],
        sink: TraceSink,
        config: SamplerConfig,
        tap: Option<&SamplerTap>,
    ) -> Result<Sampler, EnergyError> {
        config.validate()?;
        let tappable = meters.iter().all(|m| m.readable_from_workers());
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
                last_j: vec![f64::NAN; n],
                first_j: vec![f64::NAN; n],
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

        let period_ns = config.period.as_nanos() as u64;
        let core = Arc::new(Core {
            worker: parking_lot::Mutex::new(worker),
            next_ns: AtomicU64::new(Clock::now().as_ns() + period_ns),
            period_ns,
            streak: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            tap: tap.is_some() && tappable,
            activity: (0..workers.iter().map(|w| w.id as usize + 1).max().unwrap_or(0))
                .take(MAX_TRACKED_WORKERS)
                .map(|_| Activity::default())
                .collect(),
            untracked: AtomicBool::new(false),
            idle: AtomicBool::new(false),
        });
        if let Some(t) = tap {
            let _ = t.core.set(core.clone());
        }
        // The thread waits for its next deadline parked (a futex wait with a timeout),
        // not in a channel's receive: crossbeam's spins and yields a dozen times before it
        // blocks, which at 1 kHz cost more CPU than the readings (BENCHMARKS.md, "Energy
        // sampler cost").
        let shared = core.clone();
        let handle = std::thread::Builder::new()
            .name("taskwatt-energy".into())
            .spawn(move || {
                let core = shared;
                let cpu0 = thread_cpu_ns();
                let start = Instant::now();
                let mut wakeups = 0u64;
                // The workers' activity at the thread's last reading.
                let mut seen = core.activity().0;
                loop {
                    // While the workers read, the thread only checks on them now and then.
                    let go_on = wait_until(core.wake_ns(), &core.stop);
                    wakeups += 1;
                    if !go_on {
                        break;
                    }
                    let mut w = core.worker.lock();
                    if Clock::now().as_ns() < core.next_ns.load(Ordering::Relaxed) {
                        // A worker took it.
                        continue;
                    }
                    w.read_all();
                    core.streak.store(0, Ordering::Relaxed);
                    // Deadlines already past when the reading ends are skipped, counted;
                    // as left unread on purpose if this thread slept through an idle spell.
                    let was_idle = core.idle.load(Ordering::Relaxed);
                    core.advance(&mut w, Clock::now().as_ns(), was_idle);
                    // No task runs, and none started or ended since the last reading here:
                    // sleep longer; the first task to start reads.
                    let (now_seen, running) = core.activity();
                    core.idle
                        .store(core.tap && !running && now_seen == seen, Ordering::Relaxed);
                    seen = now_seen;
                }
                let mut w = core.worker.lock();
                // Stop asked (or the Sampler dropped). Deadlines that passed while this
                // thread waited for a CPU were missed too.
                let now = Clock::now().as_ns();
                let next = core.next_ns.load(Ordering::Relaxed);
                if now >= next {
                    let missed = (now - next) / core.period_ns + 1;
                    if core.idle.load(Ordering::Relaxed) {
                        w.stats.idle_skipped += missed;
                    } else {
                        w.stats.overruns += missed;
                    }
                }
                w.read_all();
                let waited = w.final_update();
                let mut stats = w.finish();
                stats.final_update_ns = waited.as_nanos() as u64;
                stats.thread_wakeups = wakeups;
                stats.wall_ns = start.elapsed().as_nanos() as u64;
                stats.thread_cpu_ns = match (cpu0, thread_cpu_ns()) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                    _ => None,
                };
                stats
            })
            .map_err(|source| EnergyError::SamplerSpawn { source })?;
        Ok(Sampler {
            core,
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
        self.core.stop.store(true, Ordering::Release);
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

/// Parks the calling thread until `deadline_ns` on the trace clock; `false` as soon as
/// `stop` is set (the setter unparks it). Spurious wake-ups only park it again.
fn wait_until(deadline_ns: u64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Acquire) {
            return false;
        }
        let now = Clock::now().as_ns();
        if now >= deadline_ns {
            return true;
        }
        std::thread::park_timeout(Duration::from_nanos(deadline_ns - now));
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

    /// A sampler's shared state with no meter, for the thread's schedule alone.
    fn core(period_ms: u64, tap: bool) -> Core {
        Core {
            worker: parking_lot::Mutex::new(Worker {
                meters: Vec::new(),
                freqs: Vec::new(),
                fbatch: Vec::new(),
                sink: TraceSink::null(),
                batch: Vec::new(),
                batch_size: 1,
                last_flush: Instant::now(),
                stats: SamplerStats::default(),
            }),
            next_ns: AtomicU64::new(1_000_000_000),
            period_ns: period_ms * 1_000_000,
            streak: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            tap,
            activity: (0..2).map(|_| Activity::default()).collect(),
            untracked: AtomicBool::new(false),
            idle: AtomicBool::new(false),
        }
    }

    #[test]
    fn the_thread_sleeps_longer_only_while_workers_read_on_time() {
        let next = 1_000_000_000;
        // No tap: at each deadline.
        assert_eq!(core(1, false).wake_ns(), next);
        // A tap, no streak yet: a quarter period after it, leaving the reading to a worker.
        let c = core(1, true);
        assert_eq!(c.wake_ns(), next + 250_000);
        c.streak.store(TAP_STREAK - 1, Ordering::Relaxed);
        assert_eq!(c.wake_ns(), next + 250_000);
        // A streak: 8 periods of 1 ms (7 after the deadline).
        c.streak.store(TAP_STREAK, Ordering::Relaxed);
        assert_eq!(c.wake_ns(), next + 7_000_000);
        // No task running: as long, streak or not.
        let c = core(1, true);
        c.idle.store(true, Ordering::Relaxed);
        assert_eq!(c.wake_ns(), next + 7_000_000);
        // Never more than TAP_SLEEP_MAX: 4 periods of 2 ms, 1 of 10 ms ...
        let c = core(2, true);
        c.streak.store(TAP_STREAK, Ordering::Relaxed);
        assert_eq!(c.wake_ns(), next + 3 * 2_000_000);
        // ... and never sooner than a deadline's grace: a period of 10 ms wakes 2.5 ms after
        // it, streak or not.
        let c = core(10, true);
        assert_eq!(c.wake_ns(), next + 2_500_000);
        c.streak.store(TAP_STREAK, Ordering::Relaxed);
        assert_eq!(c.wake_ns(), next + 2_500_000);
    }

    #[test]
    fn the_workers_activity_says_whether_a_task_runs() {
        let c = core(1, true);
        assert_eq!(c.activity(), (0, false));
        c.touch(1);
        assert_eq!(c.activity(), (1, true));
        c.touch(1);
        c.touch(0);
        assert_eq!(c.activity(), (3, true));
        c.touch(0);
        assert_eq!(c.activity(), (4, false));
        // A worker past the ones followed: a task may always be running.
        c.touch(7);
        assert_eq!(c.activity(), (4, true));
    }

    #[test]
    fn deadlines_passed_over_are_counted() {
        let c = core(1, true);
        let mut w = c.worker.lock();
        // Read on time: the next deadline, nothing skipped.
        c.advance(&mut w, 1_000_100_000, false);
        assert_eq!(c.next_ns.load(Ordering::Relaxed), 1_001_000_000);
        assert_eq!(w.stats.overruns, 0);
        // Read 3.5 periods late: three deadlines skipped, the next one on the grid.
        c.advance(&mut w, 1_004_500_000, false);
        assert_eq!(c.next_ns.load(Ordering::Relaxed), 1_005_000_000);
        assert_eq!(w.stats.overruns, 3);
        // Before the deadline: nothing moves.
        c.advance(&mut w, 1_004_900_000, false);
        assert_eq!(c.next_ns.load(Ordering::Relaxed), 1_005_000_000);
        // Slept through an idle spell: counted apart, and the grid moves to the reading.
        c.advance(&mut w, 1_012_500_000, true);
        assert_eq!(c.next_ns.load(Ordering::Relaxed), 1_013_500_000);
        assert_eq!((w.stats.overruns, w.stats.idle_skipped), (3, 7));
    }

    #[test]
    fn period_bounds() {
        assert!(SamplerConfig::with_period(Duration::from_millis(1)).is_ok());
        assert!(SamplerConfig::with_period(Duration::from_secs(1)).is_ok());
        let e = SamplerConfig::with_period(Duration::from_micros(999)).unwrap_err();
        assert!(e.to_string().contains("999 us"), "{e}");
        let e = SamplerConfig::with_period(Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("period 5 s is"), "{e}");
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
        let samples: Vec<EnergySample> = trace
            .chunks()
            .iter()
            .flat_map(|c| match c {
                Chunk::Samples(s) => s.clone(),
                _ => Vec::new(),
            })
            .collect();
        // The first and the last reading of each domain at least, and the last one past
        // a refresh of its counter: read at once, the two were one value twice.
        assert!(samples.len() >= 4, "{samples:?}");
        for d in samples.iter().map(|s| s.domain) {
            let of: Vec<f64> = samples
                .iter()
                .filter(|s| s.domain == d)
                .map(|s| s.energy_j)
                .collect();
            assert!(of.len() >= 2 && of[0] != of[of.len() - 1], "{of:?}");
        }
    }

    #[test]
    fn a_slow_counter_is_read_again_after_its_refresh_past_the_stop() {
        // An NVML-like GPU counter refreshing every 50 ms: the stop's reading shows its
        // last refresh before the stop, up to 50 ms early. Without a reading after the
        // next refresh, the GPU's record ended before the run did, and a region ending
        // at the run's end measured up to 50 ms of its energy less than it drew.
        use crate::{Meter, SimConfig, SimMeter};
        use taskwatt_traces::{Arch, WorkerInfo};
        let mut c = SimConfig::default();
        c.gpu.update_interval_ms = 50;
        let gpu = WorkerInfo {
            arch: Arch::Gpu,
            device: Some(0),
            ..WorkerInfo::cpu(1, 0)
        };
        let meter = SimMeter::new(c, &[WorkerInfo::cpu(0, 0), gpu.clone()]).unwrap();
        let (sink, trace) = TraceSink::memory();
        let config = SamplerConfig {
            period: Duration::from_secs(1),
            batch: 1_000_000,
        };
        let sampler = Sampler::start(
            vec![Box::new(meter) as Box<dyn Meter>],
            &[WorkerInfo::cpu(0, 0), gpu],
            sink,
            config,
        )
        .unwrap();
        let gpu_id = sampler
            .domains()
            .iter()
            .find(|d| matches!(d.domain, taskwatt_traces::Domain::Gpu { .. }))
            .unwrap()
            .id;
        std::thread::sleep(Duration::from_millis(20));
        let stop_at = Clock::now();
        let stats = sampler.stop().unwrap();
        let last = trace
            .chunks()
            .iter()
            .flat_map(|c| match c {
                Chunk::Samples(s) => s.clone(),
                _ => Vec::new(),
            })
            .filter(|s| s.domain == gpu_id)
            .map(|s| s.t)
            .max()
            .unwrap();
        assert!(
            last >= stop_at,
            "the GPU's record ends at {last:?}, before the stop"
        );
        let waited = Duration::from_nanos(stats.final_update_ns);
        assert!(waited <= Duration::from_millis(250), "{waited:?}");
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
