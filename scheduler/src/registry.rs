//! Policies by name: the API, the CLI's `--sched` and `TASKWATT_SCHED` all go through here.

use crate::policies::{BadKnob, Dmda, Eager, EnergyWeights, Lws, Prio, Ws};
use crate::{Policy, SchedTask, WorkerDesc};

/// The environment variable that picks a policy when the API does not.
pub const SCHED_ENV: &str = "TASKWATT_SCHED";

/// The default policy.
pub const DEFAULT_POLICY: &str = "lws";

/// A policy name nobody registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduling policy `{name}`{}: known policies are {}", .source_hint, .known.join(", "))]
pub struct UnknownPolicy {
    /// The name asked for.
    pub name: String,
    /// Where the name came from, e.g. " (from TASKWATT_SCHED)".
    pub source_hint: String,
    /// The registered names.
    pub known: Vec<String>,
}

/// A policy that cannot be made: its name is unknown, or a knob's value is not one it
/// can run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy of that name.
    #[error(transparent)]
    Unknown(#[from] UnknownPolicy),
    /// A knob with a value the policy cannot run with (it names the knob and where the
    /// value came from).
    #[error(transparent)]
    Knob(#[from] BadKnob),
}

/// The policies' settings, each passed to its own policy's constructor. A field left
/// `None` takes the policy's defaults and the environment (`TASKWATT_SCHED_GAMMA` and so
/// on); one given is used as it is, whatever the environment says.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PolicyOptions {
    /// dmdae's weights.
    pub dmdae: Option<EnergyWeights>,
}

impl PolicyOptions {
    /// dmdae at `weights`.
    pub fn dmdae(weights: EnergyWeights) -> PolicyOptions {
        PolicyOptions {
            dmdae: Some(weights),
        }
    }
}

/// One registered policy.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInfo {
    /// Its name.
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
}

/// The built-in policies, in the order they are listed to users.
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "eager",
        summary: "one central FIFO queue shared by every worker",
    },
    PolicyInfo {
        name: "ws",
        summary: "work stealing: local LIFO deques, FIFO steals from random victims, an injector",
    },
    PolicyInfo {
        name: "lws",
        summary: "locality work stealing: a worker keeps what it releases, steals near first",
    },
    PolicyInfo {
        name: "prio",
        summary: "one central queue ordered by task priority, FIFO among equals",
    },
    PolicyInfo {
        name: "dmda",
        summary: "each task to the worker where it is expected to finish first (performance models), FIFO queues",
    },
    PolicyInfo {
        name: "dmdas",
        summary: "dmda with each worker's queue sorted by priority",
    },
    PolicyInfo {
        name: "dmdae",
        summary: "dmda weighing each task's expected energy (a fitted energy model) against time: TASKWATT_SCHED_ALPHA, _BETA, _GAMMA, _IDLE_POWER",
    },
];

/// Names of the built-in policies.
pub fn policy_names() -> Vec<&'static str> {
    POLICIES.iter().map(|p| p.name).collect()
}

/// Creates the built-in policy `name` for `workers`, with its defaults and the
/// environment's knobs ([`create_policy_with`] takes them typed).
pub fn create_policy<T: SchedTask>(
    name: &str,
    workers: &[WorkerDesc],
) -> Result<Box<dyn Policy<T>>, PolicyError> {
    create_policy_with(name, workers, None, &PolicyOptions::default())
}

/// [`create_policy`], with the policies that reason about time (dmda, dmdas, dmdae)
/// reading "now" from `clock` when one is given: the same code decides in virtual time.
pub fn create_policy_with_clock<T: SchedTask>(
    name: &str,
    workers: &[WorkerDesc],
    clock: Option<std::sync::Arc<dyn crate::PolicyClock>>,
) -> Result<Box<dyn Policy<T>>, PolicyError> {
    create_policy_with(name, workers, clock, &PolicyOptions::default())
}

/// Creates the built-in policy `name` for `workers`, reading "now" from `clock` when one
/// is given, with the knobs of `options` (checked: a bad one is an error naming it).
pub fn create_policy_with<T: SchedTask>(
    name: &str,
    workers: &[WorkerDesc],
    clock: Option<std::sync::Arc<dyn crate::PolicyClock>>,
    options: &PolicyOptions,
) -> Result<Box<dyn Policy<T>>, PolicyError> {
    let name = name.trim();
    let timed = |d: Dmda<T>| match &clock {
        Some(c) => d.with_clock(c.clone()),
        None => d,
    };
    Ok(match name.to_ascii_lowercase().as_str() {
        "eager" => Box::new(Eager::new(workers)),
        "ws" => Box::new(Ws::new(workers)),
        "lws" => Box::new(Lws::new(workers)),
        "prio" => Box::new(Prio::new(workers)),
        "dmda" => Box::new(timed(Dmda::new(workers))),
        "dmdas" => Box::new(timed(Dmda::sorted(workers))),
        "dmdae" => {
            let weights = match options.dmdae {
                Some(w) => {
                    w.check("PolicyOptions::dmdae")?;
                    w
                }
                None => EnergyWeights::from_env()?,
            };
            Box::new(timed(Dmda::energy_aware(workers, weights)))
        }
        _ => return Err(unknown(name, "").into()),
    })
}

/// Checks a policy name without creating it.
pub fn check_policy_name(name: &str) -> Result<&'static str, UnknownPolicy> {
    let lower = name.trim().to_ascii_lowercase();
    POLICIES
        .iter()
        .find(|p| p.name == lower)
        .map(|p| p.name)
        .ok_or_else(|| {
            // `run --sched dmda,lws` said only that `dmda,lws` is unknown.
            let list = if name.contains(',') {
                " (one policy here, not a list: `taskwatt compare --policies` and \
                 `taskwatt simulate --sched` take lists)"
            } else {
                ""
            };
            unknown(name, list)
        })
}

/// The policy name from `TASKWATT_SCHED`, if set (checked), else `None`.
pub fn policy_from_env() -> Result<Option<&'static str>, UnknownPolicy> {
    match std::env::var(SCHED_ENV) {
        Ok(v) if !v.trim().is_empty() => {
            check_policy_name(&v).map(Some).map_err(|e| UnknownPolicy {
                source_hint: format!(" (from {SCHED_ENV})"),
                ..e
            })
        }
        _ => Ok(None),
    }
}

fn unknown(name: &str, hint: &str) -> UnknownPolicy {
    UnknownPolicy {
        name: name.to_string(),
        source_hint: hint.to_string(),
        known: policy_names().into_iter().map(String::from).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct T;
    impl SchedTask for T {
        fn priority(&self) -> i32 {
            0
        }
    }

    #[test]
    fn unknown_name_lists_known_ones() {
        let err = create_policy::<T>("fifo", &WorkerDesc::flat(2))
            .err()
            .expect("fifo is not a policy");
        let msg = err.to_string();
        assert!(msg.contains("`fifo`"), "{msg}");
        for p in POLICIES {
            assert!(msg.contains(p.name), "{msg}");
        }
        // A list where one policy goes says where lists go.
        let msg = check_policy_name("dmda,lws").unwrap_err().to_string();
        assert!(msg.contains("not a list"), "{msg}");
    }

    #[test]
    fn every_listed_policy_can_be_created_under_its_name() {
        for p in POLICIES {
            let pol = create_policy::<T>(p.name, &WorkerDesc::flat(3)).unwrap();
            assert_eq!(pol.name(), p.name);
            assert_eq!(check_policy_name(&p.name.to_uppercase()).unwrap(), p.name);
        }
    }

    #[test]
    fn dmdae_takes_its_weights_typed_and_names_a_bad_one() {
        let w = EnergyWeights {
            gamma: 250.0,
            ..EnergyWeights::default()
        };
        let pol = create_policy_with::<T>(
            "dmdae",
            &WorkerDesc::flat(2),
            None,
            &PolicyOptions::dmdae(w),
        )
        .unwrap();
        assert!(pol
            .knobs()
            .contains(&("gamma".to_string(), "250".to_string())));
        // Other policies have no knobs to record.
        assert!(create_policy::<T>("dmda", &WorkerDesc::flat(2))
            .unwrap()
            .knobs()
            .is_empty());
        let bad = EnergyWeights {
            idle_power_w: -1.0,
            ..EnergyWeights::default()
        };
        let err = create_policy_with::<T>(
            "dmdae",
            &WorkerDesc::flat(2),
            None,
            &PolicyOptions::dmdae(bad),
        )
        .err()
        .expect("a negative idle power is refused");
        assert!(matches!(err, PolicyError::Knob(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("idle_power_w") && msg.contains("-1"), "{msg}");
        assert!(!msg.contains("unknown"), "{msg}");
    }
}
