//! The simulated meter (`sim`): the default where nothing real can be read, and the ground
//! truth that attribution is checked against.
//!
//! - [`config`]: the powers (base per domain, extra per codelet and architecture) and the
//!   sensor behaviour, with a documented default (`default.toml`).
//! - [`observer`]: [`SimObserver`], the runtime's [`taskwatt_traces::ExecutionObserver`]:
//!   worker threads report task starts and ends into per-worker slots.
//! - `slots`: the lock-free per-worker state (a seqlock over atomics) and why it keeps a
//!   little history.
//! - `noise`: seeded white power noise.
//! - [`meter`]: [`SimMeter`], which the sampler reads like any sensor.

mod config;
mod meter;
mod noise;
mod observer;
mod replay;
mod slots;

pub use config::{
    ArchPowers, DomainPower, GpuSensor, GpuSimConfig, RaplSimConfig, SimConfig, TaskPower,
};
pub use meter::{ManualClock, SimClock, SimMeter, TraceClock, MAX_SIM_WORKERS};
pub use observer::{SimObserver, MAX_SIM_CODELETS};
pub use replay::{replay, Execution, Replayed};
