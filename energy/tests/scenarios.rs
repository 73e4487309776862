//! Held-out scenarios (`attribution::scenario`): the claims the report makes, checked on
//! runs the attribution's own code did not produce, at 1 ms and 10 ms periods on a 1 ms
//! counter read at the time of the read.
//!
//! - Of the powers shown as measurements, at least 95% are within 5% of the truth, none
//!   beyond 10%.
//! - 95% intervals cover the truth 90-98% of the time, coefficients held at 0 included
//!   (a wider band here, 88-99%, for the few hundred coefficients a test can afford).

use taskwatt_energy::attribution::{attribute, scenario::Scenario, AttributionOptions};

struct Tally {
    shown: usize,
    within5: usize,
    beyond10: Vec<String>,
    intervals: usize,
    covered: usize,
}

/// Scenarios per period: 12, or `TASKWATT_SCENARIOS`.
fn count() -> u64 {
    std::env::var("TASKWATT_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

fn run(seeds: std::ops::Range<u64>, period_ns: Option<u64>) -> Tally {
    run_with(seeds, period_ns, &AttributionOptions::default())
}

fn run_with(
    seeds: std::ops::Range<u64>,
    period_ns: Option<u64>,
    opts: &AttributionOptions,
) -> Tally {
    let mut t = Tally {
        shown: 0,
        within5: 0,
        beyond10: Vec::new(),
        intervals: 0,
        covered: 0,
    };
    for seed in seeds {
        let mut sc = Scenario::random(seed);
        if let Some(p) = period_ns {
            sc.period_ns = p;
            sc.jitter_ns = sc.jitter_ns.min(p / 2);
        }
        let g = sc.generate();
        let a = attribute(&g.parts(), &g.tasks, opts).unwrap();
        for d in &a.report.domains {
            let coefs = std::iter::once(("base".to_owned(), &d.base))
                .chain(d.types.iter().map(|ty| (ty.key.to_string(), &ty.power)));
            for (name, e) in coefs {
                let truth = g.truth_of(d.id, &name).unwrap();
                if let Some(c) = e.covers(truth) {
                    t.intervals += 1;
                    t.covered += usize::from(c);
                }
                if e.reliable {
                    t.shown += 1;
                    let err = 100.0 * (e.value_w - truth).abs() / truth;
                    t.within5 += usize::from(err <= 5.0);
                    if err > 10.0 {
                        t.beyond10.push(format!(
                            "seed {seed} {name}: {} vs {truth} ({sc:?})",
                            e.value_w
                        ));
                    }
                }
            }
        }
    }
    t
}

fn check(t: &Tally, what: &str) {
    eprintln!(
        "{what}: {} shown as measurements, {} within 5%; coverage {}/{}",
        t.shown, t.within5, t.covered, t.intervals
    );
    assert!(
        t.beyond10.is_empty(),
        "{what}: beyond 10%: {:?}",
        t.beyond10
    );
    assert!(t.shown > 0, "{what}: nothing shown as a measurement");
    assert!(
        t.within5 * 100 >= t.shown * 95,
        "{what}: {} of {} measurements within 5%",
        t.within5,
        t.shown
    );
    let cov = t.covered as f64 / t.intervals as f64;
    assert!((0.88..=0.99).contains(&cov), "{what}: coverage {cov}");
}

#[test]
fn claims_hold_at_the_update_period() {
    check(
        &run(0..count(), Some(1_000_000)),
        "1 ms period on a 1 ms counter",
    );
}

#[test]
fn claims_hold_at_ten_update_periods() {
    check(
        &run(100..100 + count(), Some(10_000_000)),
        "10 ms period on a 1 ms counter",
    );
}

/// The baseline: the same scenarios with intervals taken at the read times as they are
/// (no alignment to the meter). Prints its figures; asserts nothing (it misses the bars at
/// 1 ms, which is the point). `cargo test -p taskwatt-energy --test scenarios -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn baseline_without_alignment() {
    let raw = AttributionOptions {
        align_to_meter: false,
        ..AttributionOptions::default()
    };
    for (p, first, what) in [(1_000_000, 0, "1 ms"), (10_000_000, 100, "10 ms")] {
        let t = run_with(first..first + count(), Some(p), &raw);
        eprintln!(
            "unaligned, {what}: {} shown as measurements, {} within 5%, {} beyond 10%; \
             coverage {}/{}",
            t.shown,
            t.within5,
            t.beyond10.len(),
            t.covered,
            t.intervals
        );
    }
}
