//! Performance models recorded by a runtime: per (codelet, architecture, footprint)
//! durations merged across runs into the directory, and predictions for unseen sizes.

use std::time::Duration;

use taskwatt_runtime::{Basis, Codelet, PerfModels, Runtime, Task};
use taskwatt_traces::Arch;

fn run(dir: &std::path::Path) {
    let rt = Runtime::builder()
        .workers(2)
        .perf_models(dir)
        .build()
        .unwrap();
    let nap = Codelet::new("nap").cpu(|ctx| {
        std::thread::sleep(Duration::from_micros(*ctx.arg::<u64>()));
    });
    // Two sizes, whose durations follow t = 1 µs · (bytes / 1000): 1 ms and 2 ms.
    let small = rt.register_bytes(0u8, 1_000_000);
    let large = rt.register_bytes(0u8, 2_000_000);
    for _ in 0..14 {
        rt.submit(Task::new(&nap).r(&small).arg(1_000u64)).unwrap();
        rt.submit(Task::new(&nap).r(&large).arg(2_000u64)).unwrap();
    }
    rt.wait_all().unwrap();
    let live = rt.perf_models().expect("recorded");
    assert!(live.codelets.contains_key("nap"));
    rt.shutdown().unwrap();
}

#[test]
fn runs_merge_into_the_directory_and_predict_other_sizes() {
    let d = tempfile::tempdir().unwrap();
    run(d.path());
    let m = PerfModels::load(d.path()).unwrap();
    let e = &m.codelets["nap"];
    assert_eq!(e.len(), 2, "{e:?}");
    // 14 executions per size, less the first on each worker that ran it (warm-up).
    let first = e[0].history.count;
    assert!((12..=13).contains(&first), "{e:?}");
    let mean_ms = e[0].history.mean_ns / 1e6;
    assert!(
        (0.95..3.0).contains(&mean_ms),
        "a 1 ms sleep measured {mean_ms} ms"
    );

    run(d.path());
    let m = PerfModels::load(d.path()).unwrap();
    assert!(
        m.codelets["nap"][0].history.count >= 24,
        "the second run adds"
    );
    let p = m.predict("nap", Arch::Cpu, 2_000_000).unwrap();
    assert_eq!(p.basis, Basis::History);
    assert!((1.9e6..5e6).contains(&p.mean_ns), "{p:?}");
    // An unseen size: the power law through the two sizes (about linear here).
    let p = m.predict("nap", Arch::Cpu, 4_000_000).unwrap();
    assert_eq!(p.basis, Basis::Regression);
    assert!((3.4e6..1.2e7).contains(&p.mean_ns), "{p:?}");
    assert!(m.predict("nap", Arch::Gpu, 1_000_000).is_none());
}

#[test]
fn an_unreadable_model_file_fails_the_build_with_the_way_out() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("models.json"), "not json").unwrap();
    let e = Runtime::builder()
        .workers(1)
        .perf_models(d.path())
        .build()
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("models.json") && msg.contains("perfmodel clear"),
        "{msg}"
    );
}

#[test]
fn a_policy_that_asks_gets_the_expected_durations_of_the_models() {
    use std::sync::{Arc, Mutex};
    use taskwatt_runtime::ReadyTask;
    use taskwatt_scheduler::{ArchMask, Eager, Local, Origin, Policy, SchedTask};

    struct Recording(Eager<ReadyTask>, Arc<Mutex<Vec<Option<f64>>>>);
    impl Policy<ReadyTask> for Recording {
        fn name(&self) -> &str {
            "recording"
        }
        fn local(&self, w: usize) -> Local {
            self.0.local(w)
        }
        fn uses_expected_durations(&self) -> bool {
            true
        }
        fn push(&self, t: ReadyTask, o: Origin<'_>) {
            self.1.lock().unwrap().push(t.expected_ns(ArchMask::CPU));
            self.0.push(t, o)
        }
        fn pop(&self, w: usize, l: &mut Local) -> Option<ReadyTask> {
            self.0.pop(w, l)
        }
    }

    let d = tempfile::tempdir().unwrap();
    let mut m = PerfModels::new();
    for _ in 0..20 {
        m.add("nap", Arch::Cpu, 1_000_000, 1.5e6);
    }
    m.save_merged(d.path()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let rt = Runtime::builder()
        .workers(1)
        .perf_models(d.path())
        .custom_policy(move |w| Box::new(Recording(Eager::new(w), s)))
        .build()
        .unwrap();
    let nap = Codelet::new("nap").cpu(|_| {});
    let other = Codelet::new("unknown").cpu(|_| {});
    let h = rt.register_bytes(0u8, 1_000_000);
    rt.submit(Task::new(&nap).r(&h)).unwrap();
    rt.submit(Task::new(&other).r(&h)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(*seen.lock().unwrap(), [Some(1.5e6), None]);
}
