//! # taskwatt-scheduler
//!
//! Scheduling policies behind one trait, [`Policy`], whose hooks have a documented call
//! order and say who owns a task after each call (see [`policy`](Policy)'s module docs).
//! Six are built in, one file each (dmda and dmdas share one), and registered by name:
//! `eager`, `ws`, `lws` (the default), `prio`, and the model-driven `dmda` and `dmdas`.
//! With workers of several architectures, each gives a task only to a worker that can run
//! it ([`SchedTask::archs`], [`WorkerDesc::arch`]).
//!
//! ```
//! use taskwatt_scheduler::{create_policy, Origin, SchedTask, WorkerDesc};
//!
//! struct Job(i32);
//! impl SchedTask for Job {
//!     fn priority(&self) -> i32 { self.0 }
//! }
//!
//! let policy = create_policy::<Job>("prio", &WorkerDesc::flat(1)).unwrap();
//! let mut local = policy.local(0);
//! policy.push(Job(1), Origin::External);
//! policy.push(Job(9), Origin::External);
//! assert_eq!(policy.pop(0, &mut local).map(|j| j.0), Some(9));
//! ```

mod policies;
mod policy;
mod registry;

pub use policies::{
    BadKnob, Dmda, Eager, EnergyWeights, Lws, Prio, Ws, ALPHA_ENV, BETA_ENV, GAMMA_ENV,
    IDLE_POWER_ENV,
};
pub use policy::{ArchMask, Archs, Bus, Local, Origin, Policy, PolicyClock, SchedTask, WorkerDesc};
pub use registry::{
    check_policy_name, create_policy, create_policy_with, create_policy_with_clock,
    policy_from_env, policy_names, PolicyError, PolicyInfo, PolicyOptions, UnknownPolicy,
    DEFAULT_POLICY, POLICIES, SCHED_ENV,
};
