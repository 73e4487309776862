//! `TASKWATT_SCHED` picks the policy when the API does not. (Its own test binary: the
//! variable is process-wide.)

use taskwatt_runtime::Runtime;

#[test]
fn policy_from_environment_variable() {
    // Only this test touches TASKWATT_SCHED in this binary.
    std::env::set_var("TASKWATT_SCHED", "prio");
    let rt = Runtime::builder().workers(1).build().unwrap();
    assert_eq!(rt.policy_name(), "prio");
    drop(rt);
    std::env::set_var("TASKWATT_SCHED", "nope");
    let err = Runtime::builder()
        .workers(1)
        .build()
        .err()
        .unwrap()
        .to_string();
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
