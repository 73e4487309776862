//! The built-in policies, one file each.

mod dmda;
mod eager;
mod lws;
mod prio;
mod steal;
mod ws;

pub use dmda::{BadKnob, Dmda, EnergyWeights, ALPHA_ENV, BETA_ENV, GAMMA_ENV, IDLE_POWER_ENV};
pub use eager::Eager;
pub use lws::Lws;
pub use prio::Prio;
pub use ws::Ws;
