//! Helpers shared by the CLI tests: run the `taskwatt` binary and check its exit.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `taskwatt args` without `TASKWATT_SCHED` from the caller's environment.
pub(crate) fn taskwatt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taskwatt"))
        .args(args)
        .env_remove("TASKWATT_SCHED")
        // The models `run` records go to the build's temporary directory, not the user's
        // cache.
        .env(
            "TASKWATT_PERFMODEL_DIR",
            concat!(env!("CARGO_TARGET_TMPDIR"), "/perfmodels"),
        )
        .output()
        .expect("the taskwatt binary runs")
}

/// Runs `taskwatt args`, asserts success, returns stdout.
pub(crate) fn ok(args: &[&str]) -> String {
    let out = taskwatt(args);
    assert!(
        out.status.success(),
        "taskwatt {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `taskwatt args`, asserts success, parses stdout as JSON.
pub(crate) fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(args)).unwrap()
}

/// A path as `&str`.
pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
