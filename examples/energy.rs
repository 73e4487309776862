//! Energy of your own task graph: three codelets of a user's application, measured and
//! attributed per task type by adding five lines to the plain runtime code (marked
//! `// energy`).
//!
//! `cargo run --release --example energy` (on a machine without RAPL or NVML the meter is
//! the simulated one, and the report says so).

use std::time::Duration;

use taskwatt::{Codelet, Measure, Runtime, Task};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = Measure::new() // energy
        .period(Duration::from_millis(5)) // energy
        .idle_calibration(Duration::from_millis(200)) // energy
        .start(Runtime::builder())?; // energy
    let rt = m.runtime();

    // A user's application: blocks of a vector scaled, combined and reduced.
    let scale = Codelet::new("scale").cpu(|ctx| {
        let k = *ctx.arg::<f64>();
        ctx.rw::<Vec<f64>>(0)
            .iter_mut()
            .for_each(|x| *x = (*x * k).sin());
    });
    let axpy = Codelet::new("axpy").cpu(|ctx| {
        let x = ctx.r::<Vec<f64>>(0).clone();
        let y = ctx.rw::<Vec<f64>>(1);
        y.iter_mut().zip(&x).for_each(|(y, x)| *y += 0.5 * x.cos());
    });
    let dot = Codelet::new("dot").cpu(|ctx| {
        let s: f64 = ctx.r::<Vec<f64>>(0).iter().map(|x| x * x).sum();
        *ctx.rw::<f64>(1) += s;
    });
    let blocks: Vec<_> = (0..16)
        .map(|i| rt.register(vec![i as f64; 1 << 15]))
        .collect();
    let total = rt.register(0.0f64);
    for step in 0..40 {
        for (i, b) in blocks.iter().enumerate() {
            rt.submit(Task::new(&scale).rw(b).arg(1.0 + step as f64 * 1e-3))?;
            let next = &blocks[(i + 1) % blocks.len()];
            rt.submit(Task::new(&axpy).r(b).rw(next))?;
        }
        if step % 4 == 0 {
            for b in &blocks {
                rt.submit(Task::new(&dot).r(b).rw(&total))?;
            }
        }
    }
    rt.wait_all()?;

    let report = m.finish()?; // energy
    print!("{}", report.text());
    Ok(())
}
