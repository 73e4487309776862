//! Scenario: a power cap lowers the cores' frequency for a third of the run.
//!
//! Two workers on one package run three task types: each type alone on one worker, then
//! on both (the contrast type calibration gives), then a long mixed phase. From 40 % to 70 %
//! of the run a cap lowers the frequency, and with it every task's power. The simulated
//! machine is replayed over the schedule with its frequency sampled beside the energy.
//!
//! With the frequency as a regressor, every type's power alone comes out within 5 % of the
//! truth and the fit says it used the frequency. Without it (`frequency: false`, or a trace
//! without frequency samples) the same data read the types low, and the fit's departure
//! check flags what it shows. A steady machine (no cap) is left alone: the exponent is not
//! used and the powers are those of a fit without frequency.

use taskwatt_energy::attribution::{attribute, AttributionOptions, TraceParts};
use taskwatt_energy::{replay_sim, Execution, SimConfig};
use taskwatt_traces::{Arch, CodeletInfo, TaskRecord, Timestamp, WorkerInfo};

const MS: u64 = 1_000_000;
const NAMES: [&str; 3] = ["gemm", "trsm", "syrk"];

fn worker(id: u32) -> WorkerInfo {
    WorkerInfo::cpu(id, 0)
}

/// A deterministic schedule: calibration phases, then 8 s of mixed tasks of 2-9 ms with
/// small gaps on both workers. Returns the executions and the run's end.
fn schedule() -> (Vec<Execution>, u64) {
    let mut ex = Vec::new();
    let mut t = 100 * MS;
    let mut lcg = 0x2545_f491_u64;
    let mut next = |m: u64| {
        lcg = lcg
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (lcg >> 33) % m
    };
    // Each type alone on worker 0, then on both, 400 ms each.
    for c in 0..3u32 {
        for both in [false, true] {
            let end = t + 400 * MS;
            for w in 0..if both { 2 } else { 1 } {
                let mut s = t;
                while s + 5 * MS < end {
                    let d = (3 + next(4)) * MS;
                    ex.push(Execution {
                        worker: w,
                        codelet: c,
                        arch: Arch::Cpu,
                        start: Timestamp(s),
                        end: Timestamp(s + d),
                    });
                    s += d + next(300) * 1_000;
                }
            }
            t = end + 50 * MS;
        }
    }
    // Mixed: each worker draws types at random, with idle gaps now and then.
    let start = t;
    let end = start + 8_000 * MS;
    for w in 0..2u32 {
        let mut s = start + u64::from(w) * 700_000;
        while s + 10 * MS < end {
            let c = next(3) as u32;
            let d = (2 + next(8)) * MS;
            ex.push(Execution {
                worker: w,
                codelet: c,
                arch: Arch::Cpu,
                start: Timestamp(s),
                end: Timestamp(s + d),
            });
            s += d + if next(5) == 0 { next(6) * MS } else { 100_000 };
        }
    }
    (ex, end)
}

struct Run {
    domains: Vec<taskwatt_traces::DomainInfo>,
    samples: Vec<taskwatt_traces::EnergySample>,
    frequencies: Vec<taskwatt_traces::FrequencySample>,
    codelets: Vec<CodeletInfo>,
    tasks: Vec<TaskRecord>,
    config: SimConfig,
}

fn run(cap: bool, seed: u64) -> Run {
    let (execs, end) = schedule();
    let mut config = SimConfig {
        seed: Some(seed),
        ..SimConfig::default()
    };
    // Frequency, not drift, is under test here.
    config.package.drift = 0.0;
    config.dram.drift = 0.0;
    if cap {
        // The replay's meter starts one period before the first task.
        let s = end as f64 * 1e-9;
        config.cpu.cap_factor = 0.7;
        config.cpu.cap_from_s = 0.4 * s;
        config.cpu.cap_to_s = 0.7 * s;
    }
    let codelets: Vec<CodeletInfo> = NAMES
        .iter()
        .enumerate()
        .map(|(i, n)| CodeletInfo {
            id: i as u32,
            name: (*n).into(),
            archs: vec![Arch::Cpu],
        })
        .collect();
    let workers = [worker(0), worker(1)];
    let r = replay_sim(
        config.clone(),
        &workers,
        &codelets,
        &execs,
        10 * MS,
        None,
        0,
        "",
    )
    .unwrap();
    let tasks = execs
        .iter()
        .enumerate()
        .map(|(i, e)| TaskRecord::executed(i as u64, e.codelet, e.arch, e.worker, e.start, e.end))
        .collect();
    Run {
        domains: r.domains,
        samples: r.samples,
        frequencies: r.frequencies,
        codelets,
        tasks,
        config,
    }
}

/// Each type's package power alone from the fit, against the truth: the largest relative
/// error, and whether the fit used the frequency.
fn errors(r: &Run, frequencies: bool, use_it: bool) -> (f64, bool, Vec<String>) {
    let parts = TraceParts {
        frequencies: if frequencies { &r.frequencies } else { &[] },
        ..TraceParts::new(&r.domains, &r.samples, &r.codelets)
    };
    let opts = AttributionOptions {
        frequency: use_it,
        ..AttributionOptions::default()
    };
    let a = attribute(&parts, &r.tasks, &opts).unwrap();
    let fit = &a.fits[0];
    let mut worst = 0.0f64;
    for (k, est) in fit.keys.iter().zip(&fit.types) {
        let name = k.to_string();
        let codelet = name.split('@').next().unwrap();
        let truth = r.config.task_power(codelet, Arch::Cpu).package_w;
        worst = worst.max((est.value_w / truth - 1.0).abs());
    }
    let used = fit.frequency.as_ref().is_some_and(|f| f.used);
    // The report carries what the fit did, for JSON and the text.
    let reported = a.report.domains[0].frequency.as_ref();
    assert_eq!(reported.is_some(), frequencies, "{reported:?}");
    if let Some(f) = reported {
        assert!((3000.0..=4100.0).contains(&f.mean_mhz), "{f:?}");
        let json = serde_json::to_value(f).unwrap();
        assert_eq!(json["used"], used);
    }
    (worst, used, fit.diagnostics.warnings.clone())
}

#[test]
fn a_cap_is_corrected_by_the_sampled_frequency() {
    for seed in [1, 2, 3] {
        let r = run(true, seed);
        assert!(
            r.frequencies.len() > 500,
            "{} frequency samples",
            r.frequencies.len()
        );
        let (with, used, with_warnings) = errors(&r, true, true);
        let (without, _, warnings) = errors(&r, false, true);
        assert!(
            !with_warnings
                .iter()
                .any(|w| w.contains("power changes over the run")),
            "seed {seed}: the corrected fit still warns of a change: {with_warnings:?}"
        );
        eprintln!(
            "seed {seed}: worst type error with frequency {:.2} %, without {:.2} %",
            100.0 * with,
            100.0 * without
        );
        assert!(used, "seed {seed}: the fit did not use the frequency");
        assert!(
            with < 0.05,
            "seed {seed}: with frequency, worst type error {:.1} %",
            100.0 * with
        );
        // Without it the cap pulls the powers off, and the fit says its model is in doubt.
        assert!(
            without > 2.0 * with,
            "seed {seed}: without frequency {:.1} %, with {:.1} %",
            100.0 * without,
            100.0 * with
        );
        assert!(
            warnings.iter().any(|w| w.contains("frequency")),
            "seed {seed}: no warning naming the frequency without it: {warnings:?}"
        );
        // Asked not to use it, the fit is the fit without frequency samples.
        let (off, used_off, _) = errors(&r, true, false);
        assert!(!used_off);
        assert!((off - without).abs() < 1e-9, "{off} vs {without}");
    }
}

#[test]
fn a_steady_machine_is_left_alone() {
    let r = run(false, 4);
    let (with, used, _) = errors(&r, true, true);
    let (without, _, _) = errors(&r, false, true);
    assert!(!used, "a steady frequency was used as a regressor");
    assert!((with - without).abs() < 1e-9, "{with} vs {without}");
    assert!(with < 0.05, "worst type error {:.1} %", 100.0 * with);
}
