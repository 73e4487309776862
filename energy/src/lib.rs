//! # taskwatt-energy
//!
//! Energy meters, and the sampler that writes their readings into a taskwatt trace.
//!
//! - [`Meter`]: the one small trait every backend implements; raw readings only.
//! - [`Accumulator`] ([`CounterUnwrapper`], [`PowerIntegrator`]): raw counters and powers to
//!   monotone cumulative joules, the one place wraparound is handled, for every backend.
//! - [`PowercapMeter`] (`rapl-powercap`), [`PerfMeter`] (`rapl-perf`), [`NvmlMeter`] (`nvml`):
//!   the real sensors, each tested on fake sysfs trees or scripted devices.
//! - [`SimMeter`] (`sim`) and its [`SimObserver`]: a simulated RAPL/NVML-like meter that
//!   integrates, live, configured powers over the tasks the workers actually run; its
//!   [`SimConfig`] is the ground truth attribution is checked against.
//! - [`Sampler`]: one thread reading every meter periodically into a
//!   [`TraceSink`](taskwatt_traces::TraceSink).
//! - [`detect`]: which backends exist here, and which to use for a [`MeterChoice`].
//! - [`attribution`]: after the run, per-task-type power by least squares over the meter
//!   intervals (Risse, Guermouche and Trahay, IEEE CLUSTER 2025), diagnostics, reports,
//!   models and predictions.
//!
//! See `docs/energy.md` for the backends, their permissions and the simulator's model.
//!
//! # Example: the simulated meter, sampled into memory
//!
//! ```
//! use std::time::Duration;
//! use taskwatt_energy::{detect, DetectOptions, MeterChoice, Sampler, SamplerConfig};
//! use taskwatt_traces::{
//!     Arch, Chunk, Clock, CodeletInfo, ExecutionObserver, TraceSink, WorkerInfo,
//! };
//!
//! let workers = vec![WorkerInfo {
//!     id: 0, arch: Arch::Cpu, cpu: Some(0), core: Some(0), package: 0, numa: Some(0),
//!     device: None,
//! }];
//! let detected = detect(MeterChoice::Sim, &workers, &DetectOptions::default())?;
//! let observer = detected.observer.clone().expect("the simulator was chosen");
//!
//! let (sink, trace) = TraceSink::memory();
//! let config = SamplerConfig::with_period(Duration::from_millis(2))?;
//! let sampler = Sampler::start(detected.meters, &workers, sink, config)?;
//!
//! // What the runtime does on its worker threads:
//! observer.codelet_registered(&CodeletInfo { id: 0, name: "gemm".into(), archs: vec![Arch::Cpu] });
//! observer.task_started(0, 0, Arch::Cpu, Clock::now());
//! std::thread::sleep(Duration::from_millis(20));
//! observer.task_ended(0, 0, Arch::Cpu, Clock::now());
//!
//! let stats = sampler.stop()?;
//! assert!(stats.samples >= 4);
//! let chunks = trace.chunks();
//! assert!(matches!(&chunks[0], Chunk::Meters { meters, .. } if meters[0].simulated));
//! assert!(matches!(&chunks[1], Chunk::Truth(_)));
//! assert!(chunks.iter().any(|c| matches!(c, Chunk::Samples(s) if !s.is_empty())));
//! # Ok::<(), taskwatt_energy::EnergyError>(())
//! ```

pub mod attribution;
mod detect;
mod error;
pub mod freq;
mod meter;
mod nvml;
mod powercap;
mod rapl_perf;
mod sampler;
#[cfg(any(test, feature = "testkit"))]
mod scripted_gpu;
mod sim;
mod wrap;

pub use detect::{
    detect, format_statuses, BackendStatus, DetectOptions, Detected, DomainStatus, MeterChoice,
};
pub use error::EnergyError;
pub use meter::{Coverage, DomainRead, DomainSpec, Meter, MeterDescription, RawReading};
pub use nvml::{
    GpuArchitecture, GpuDevice, NvmlMeter, NvmlSensors, NVML_AVERAGE_WINDOW_NS,
    NVML_ENERGY_UPDATE_NS, NVML_INSTANT_WINDOW_NS,
};
pub use powercap::{PowercapMeter, DEFAULT_POWERCAP_ROOT};
pub use rapl_perf::{PerfEventDesc, PerfMeter, PowerPmu, DEFAULT_CPU_SYSFS, DEFAULT_PERF_PMU_DIR};
pub use sampler::{
    ReadFailure, Sampler, SamplerConfig, SamplerStats, SamplerTap, MAX_PERIOD, MIN_PERIOD,
    SAMPLE_FLUSH, TAP_SLEEP_MAX, TAP_SLEEP_PERIODS, TAP_STREAK,
};
#[cfg(any(test, feature = "testkit"))]
pub use scripted_gpu::{Scripted, ScriptedGpu};
/// The simulated meter over recorded executions (a distributed run's nodes, at merge).
pub use sim::{replay as replay_sim, Execution, Replayed};
pub use sim::{
    ArchPowers, CpuSimConfig, DomainPower, GpuSensor, GpuSimConfig, ManualClock, Profile,
    RaplSimConfig, SimClock, SimConfig, SimFrequency, SimMeter, SimObserver, SplitMix64, TaskPower,
    TaskSimConfig, TraceClock, MAX_SIM_CODELETS, MAX_SIM_POWER_W, MAX_SIM_WORKERS,
    MIN_OCCUPANCY_FACTOR,
};
pub use wrap::{Accumulator, CounterUnwrapper, PowerIntegrator};
