//! The simulated meter (`sim`): the default where nothing real can be read, and the ground
//! truth that attribution is checked against.
//!
//! - [`config`]: the powers (base per domain, extra per codelet and architecture) and the
//!   sensor behaviour, with a documented default (`default.toml`).
//! - [`observer`]: [`SimObserver`], the runtime's [`taskwatt_traces::ExecutionObserver`]:
//!   worker threads log task starts and ends, each into its own ring.
//! - `log`: the workers' event rings (what the observer costs a task).
//! - `integrator`: the exact integration of a contended domain's power over the logged
//!   events (why every event is kept, and in what order).
//! - `noise`: seeded white power noise.
//! - [`meter`]: [`SimMeter`], which the sampler reads like any sensor.

mod config;
mod integrator;
mod log;
mod meter;
mod noise;
mod observer;
mod replay;

pub use config::{
    ArchPowers, CpuSimConfig, DomainPower, GpuSensor, GpuSimConfig, Profile, RaplSimConfig,
    SimConfig, TaskPower, TaskSimConfig, MAX_SIM_POWER_W, MIN_OCCUPANCY_FACTOR,
};
pub use meter::{ManualClock, SimClock, SimFrequency, SimMeter, TraceClock, MAX_SIM_WORKERS};
pub use noise::SplitMix64;
pub use observer::{SimObserver, MAX_SIM_CODELETS};
pub use replay::{replay, Execution, Replayed};
