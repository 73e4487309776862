//! `TASKWATT_SCHED`, `TASKWATT_IDLE_US` and `TASKWATT_STAGING_US` apply when the API does not
//! say. (Its own test binary: the variables are process-wide.)

use std::sync::Mutex;

use taskwatt_runtime::{Codelet, Runtime, Task};

/// The tests set process-wide variables that every `build()` reads: one at a time.
static ENV: Mutex<()> = Mutex::new(());

/// The error of building a one-worker runtime with the environment as it is.
fn build_error() -> String {
    match Runtime::builder().workers(1).build() {
        Ok(_) => panic!("the build should have failed"),
        Err(e) => e.to_string(),
    }
}

/// A two-worker runtime built with the environment as it is runs 100 tasks.
fn runs_tasks() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let cl = Codelet::new("c").cpu(|_| {});
    for _ in 0..100 {
        rt.submit(Task::new(&cl)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(rt.stats().executed, 100);
}

#[test]
fn policy_from_environment_variable() {
    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    // Only this test touches TASKWATT_SCHED in this binary.
    std::env::set_var("TASKWATT_SCHED", "prio");
    let rt = Runtime::builder().workers(1).build().unwrap();
    assert_eq!(rt.policy_name(), "prio");
    drop(rt);
    std::env::set_var("TASKWATT_SCHED", "nope");
    let err = build_error();
    assert!(
        err.contains("TASKWATT_SCHED") && err.contains("nope"),
        "{err}"
    );
    // The API wins over the variable.
    let rt = Runtime::builder()
        .workers(1)
        .policy("eager")
        .build()
        .unwrap();
    assert_eq!(rt.policy_name(), "eager");
    std::env::remove_var("TASKWATT_SCHED");
}

#[test]
fn idle_policy_from_environment_variable() {
    use std::time::Duration;
    use taskwatt_runtime::IDLE_ENV;

    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    // Only this test touches TASKWATT_IDLE_US in this binary.
    std::env::set_var(IDLE_ENV, "fifty");
    let err = build_error();
    assert!(
        err.contains("TASKWATT_IDLE_US=fifty") && err.contains("<spin>,<yield>"),
        "{err}"
    );
    // The API wins over the variable.
    let rt = Runtime::builder()
        .workers(1)
        .idle(Duration::ZERO, Duration::ZERO)
        .build()
        .unwrap();
    drop(rt);
    // A valid value runs tasks (here: park at once).
    std::env::set_var(IDLE_ENV, "0, 0");
    runs_tasks();
    std::env::remove_var(IDLE_ENV);
}

#[test]
fn staging_window_from_environment_variable() {
    use std::time::Duration;
    use taskwatt_runtime::STAGING_ENV;

    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    // Only this test touches TASKWATT_STAGING_US in this binary; unset even if it fails,
    // so that the other tests build.
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            std::env::remove_var(STAGING_ENV);
        }
    }
    let _unset = Unset;
    for bad in ["soon", "-1", "NaN"] {
        std::env::set_var(STAGING_ENV, bad);
        let err = build_error();
        assert!(
            err.contains(&format!("TASKWATT_STAGING_US={bad}")) && err.contains("microseconds"),
            "{err}"
        );
    }
    // The API wins over the variable.
    drop(
        Runtime::builder()
            .workers(1)
            .staging(Duration::ZERO)
            .build()
            .unwrap(),
    );
    // Valid values run tasks: off, and a fraction of a microsecond.
    for good in ["0", " 0.5 "] {
        std::env::set_var(STAGING_ENV, good);
        runs_tasks();
    }
}
