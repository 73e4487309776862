//! Scale checks, ignored by default (they take seconds in release and far longer in
//! debug). Run with:
//!
//! ```text
//! cargo test -p taskwatt-energy --release attribution::scale -- --ignored --nocapture
//! ```
//!
//! Each prints the wall time of the build pass and of the fit + diagnostics + report, and
//! the process's peak resident memory (VmHWM), reset before the attribution starts so that
//! the figure is the attribution's own (plus the samples, which the trace holds anyway).

use std::time::Instant;

use taskwatt_traces::{Arch, CodeletInfo, Domain, TaskRecord};

use super::testkit::{domain_info, task};
use super::*;

/// Streams `n` tasks over `workers` workers, chunk by chunk (1024 tasks of one worker per
/// chunk, workers in turn, as a runtime's flushes would), filling `run_ns` of time.
struct TaskStream {
    n: u64,
    emitted: u64,
    workers: u32,
    clock: Vec<u64>,
    slot_ns: u64,
    rng: u64,
}

impl TaskStream {
    fn new(n: u64, workers: u32, run_ns: u64) -> TaskStream {
        TaskStream {
            n,
            emitted: 0,
            workers,
            clock: vec![0; workers as usize],
            slot_ns: run_ns * u64::from(workers) / n,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64*: fast and good enough to vary durations and codelets.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

impl Iterator for TaskStream {
    type Item = TaskRecord;

    fn next(&mut self) -> Option<TaskRecord> {
        if self.emitted == self.n {
            return None;
        }
        let w = ((self.emitted / 1024) % u64::from(self.workers)) as u32;
        self.emitted += 1;
        let r = self.next_u64();
        let codelet = (r % 8) as u32;
        // Duration 40% to 100% of the slot, the rest idle: types differ by duration mix.
        let dur = self.slot_ns * (40 + (r >> 8) % 61) / 100 * (8 + u64::from(codelet)) / 12;
        let start = self.clock[w as usize];
        self.clock[w as usize] = start + self.slot_ns * (8 + u64::from(codelet)) / 12;
        Some(task(codelet, w, start, start + dur.max(1)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.n - self.emitted) as usize;
        (left, Some(left))
    }
}

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn reset_hwm() {
    // Writing 5 to clear_refs resets the peak RSS (Linux >= 4.0).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn run(tasks: u64, intervals: u64) {
    let period = 1_000_000u64;
    let run_ns = intervals * period;
    let workers = 16;
    let domains = vec![
        domain_info(0, Domain::CpuPackage { id: 0 }, &(0..8).collect::<Vec<_>>()),
        domain_info(
            1,
            Domain::CpuPackage { id: 1 },
            &(8..16).collect::<Vec<_>>(),
        ),
        domain_info(2, Domain::Psys, &(0..16).collect::<Vec<_>>()),
    ];
    let codelets: Vec<CodeletInfo> = (0..8)
        .map(|i| CodeletInfo {
            id: i,
            name: format!("k{i}"),
            archs: vec![Arch::Cpu],
        })
        .collect();
    // Energies from a first, untimed pass: base 10 W per domain, codelet k draws k+1 W.
    let t0 = Instant::now();
    let mut energy = vec![vec![0.0f64; intervals as usize + 1]; domains.len()];
    for r in TaskStream::new(tasks, workers, run_ns) {
        let p = f64::from(r.codelet + 1);
        for (d, info) in domains.iter().enumerate() {
            if !info.workers.contains(&r.worker) {
                continue;
            }
            let (mut s, e) = (r.start.0, r.end.0.min(run_ns));
            while s < e {
                let i = (s / period) as usize;
                let to = e.min((i as u64 + 1) * period);
                energy[d][i + 1] += p * (to - s) as f64 * 1e-9;
                s = to;
            }
        }
    }
    let times: Vec<u64> = (0..=intervals).map(|j| j * period).collect();
    let mut samples = Vec::with_capacity(times.len() * domains.len());
    for (d, e) in energy.iter_mut().enumerate() {
        let mut acc = 0.0;
        for (j, v) in e.iter_mut().enumerate() {
            acc += *v
                + if j > 0 {
                    10.0 * period as f64 * 1e-9
                } else {
                    0.0
                };
            *v = acc;
        }
        samples.extend(super::build::samples_for(d as u16, &times, e));
    }
    drop(energy);
    let gen = t0.elapsed();

    let parts = TraceParts::new(&domains, &samples, &codelets);
    reset_hwm();
    let before = vm_hwm_kib();
    let t1 = Instant::now();
    let systems = TraceSystems::build(
        &parts,
        TaskStream::new(tasks, workers, run_ns),
        KeyKind::Codelet,
    )
    .unwrap();
    let build = t1.elapsed();
    let t2 = Instant::now();
    let a = attribute_systems(&parts, systems, &AttributionOptions::default()).unwrap();
    let fit = t2.elapsed();
    let peak = vm_hwm_kib();
    println!(
        "{tasks} tasks, {intervals} intervals x 3 domains: build {:.3} s, fit+diagnostics+report \
         {:.3} s, total {:.3} s; peak RSS {} MiB (at start {} MiB); generation {:.1} s",
        build.as_secs_f64(),
        fit.as_secs_f64(),
        (build + fit).as_secs_f64(),
        peak.map_or(0, |k| k / 1024),
        before.map_or(0, |k| k / 1024),
        gen.as_secs_f64()
    );
    let d = &a.report.domains[2];
    println!(
        "psys: base {:.4} W (truth 10), k0 {:.4} W (1), k7 {:.4} W (8), R^2 {:?}, cond {:?}",
        d.base.value_w,
        d.types
            .iter()
            .find(|t| t.key.codelet == "k0")
            .unwrap()
            .power
            .value_w,
        d.types
            .iter()
            .find(|t| t.key.codelet == "k7")
            .unwrap()
            .power
            .value_w,
        d.fit.r2,
        d.fit.condition_number
    );
}

#[test]
#[ignore = "scale check: run in release with --ignored --nocapture"]
fn scale_1m_tasks_100k_intervals() {
    run(1_000_000, 100_000);
}

#[test]
#[ignore = "scale check: run in release with --ignored --nocapture"]
fn scale_10m_tasks_1m_intervals() {
    run(10_000_000, 1_000_000);
}

#[test]
#[ignore = "prints a sample report"]
fn print_sample_report() {
    let cfg = super::testkit::SynthConfig {
        noise_w: 1.0,
        idle_ns: 20_000_000,
        ..super::testkit::SynthConfig::two_packages(1)
    };
    let s = super::testkit::Synth::generate(&cfg);
    let a = attribute(&s.parts(), &s.tasks, &AttributionOptions::default()).unwrap();
    print!(
        "{}",
        render_report(&a.report, &RenderOptions { simulated: true })
    );
}
