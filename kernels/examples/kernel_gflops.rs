//! Single-core GFlop/s of every tile kernel, for the backend compiled in, in f64 (default)
//! or f32 (first argument `f32`; the stencil, f64 only, is then left out).
//!
//! ```text
//! for nb in [128, 256, 512]:
//!     for kernel in potrf, trsm, syrk, gemm_nt, gemm_nn, heat_step (f64):
//!         repeat kernel(tile inputs) on this thread, inputs restored between calls
//!     sequential tiled Cholesky, n = 2048 in nb x nb tiles (the apps' per-core ceiling)
//! ```
//!
//! Prints one line per (nb, kernel): best and median GFlop/s over the timed calls (flop
//! counts from `taskwatt_kernels::flops`), and the ratio of the best to `gemm_nt`'s best at
//! the same `nb`, the baseline every kernel is compared with since gemm is the fastest
//! thing a core can do here. Only the kernel call is timed (the input copy is not).
//!
//! ```text
//! cargo run -p taskwatt-kernels --release --example kernel_gflops [-- [f32|f64] NB...]
//! cargo run -p taskwatt-kernels --release --features blas --example kernel_gflops
//! ```

use std::time::{Duration, Instant};

use taskwatt_kernels::{
    backend, backend_threads, flops, gemm_nn, gemm_nt, heat_step, init, potrf, sequential, syrk,
    trsm, Neighbours, Scalar, Tile, TiledMatrix,
};

/// Time budget per (kernel, nb) measurement.
const BUDGET: Duration = Duration::from_millis(300);
const MIN_CALLS: usize = 5;

struct Rate {
    best: f64,
    median: f64,
    calls: usize,
}

/// Calls `prepare(out)` (untimed) then `run(out)` (timed) until the budget is spent;
/// GFlop/s statistics.
fn measure<S>(
    flop: f64,
    out: &mut S,
    mut prepare: impl FnMut(&mut S),
    mut run: impl FnMut(&mut S),
) -> Rate {
    prepare(out);
    run(out); // warm-up: page faults, gemm's thread-local buffers, OpenBLAS init
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < MIN_CALLS || start.elapsed() < BUDGET {
        prepare(out);
        let t = Instant::now();
        run(out);
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Rate {
        best: flop / times[0] / 1e9,
        median: flop / times[times.len() / 2] / 1e9,
        calls: times.len(),
    }
}

fn tile<T: Scalar>(nb: usize, seed: u64) -> Tile<T> {
    TiledMatrix::<T>::random_tile(nb, seed, 0, 0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let precision = match args.first().map(String::as_str) {
        Some(p @ ("f32" | "f64")) => {
            let p = p.to_string();
            args.remove(0);
            p
        }
        _ => "f64".to_string(),
    };
    let sizes: Vec<usize> = args.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![128, 256, 512]
    } else {
        sizes
    };
    init();
    println!(
        "backend: {}, threads per call: {}, precision: {precision}",
        backend(),
        backend_threads()
    );
    if precision == "f32" {
        table::<f32>(&sizes)
    } else {
        table::<f64>(&sizes)
    }
}

/// The table for element type `T` (see the module docs).
fn table<T: Scalar>(sizes: &[usize]) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "{:>5}  {:<22} {:>9} {:>9} {:>10} {:>6}",
        "nb", "kernel", "best", "median", "vs gemm_nt", "calls"
    );
    println!(
        "{:>5}  {:<22} {:>9} {:>9} {:>10} {:>6}",
        "", "", "GFlop/s", "GFlop/s", "", ""
    );
    for &nb in sizes {
        let spd = TiledMatrix::<T>::spd_tile(nb, nb, 1, 0, 0);
        let mut l = spd.clone();
        potrf(&mut l)?;
        let (a, b, c) = (tile::<T>(nb, 2), tile::<T>(nb, 3), tile::<T>(nb, 4));
        let mut w = Tile::zeros(nb);
        let mut rows: Vec<(&str, Rate)> = Vec::new();

        let from_c = |w: &mut Tile<T>| w.clone_from(&c);
        rows.push((
            "gemm_nt",
            measure(flops::gemm(nb), &mut w, from_c, |w| gemm_nt(&a, &b, w)),
        ));
        rows.push((
            "gemm_nn",
            measure(flops::gemm(nb), &mut w, from_c, |w| {
                gemm_nn(T::ONE, &a, &b, T::ONE, w)
            }),
        ));
        rows.push((
            "syrk",
            measure(flops::syrk(nb), &mut w, from_c, |w| syrk(&a, w)),
        ));
        // trsm shrinks b by about 1/sqrt(nb) per call: restoring it keeps denormals away.
        rows.push((
            "trsm",
            measure(
                flops::trsm(nb),
                &mut w,
                |w| w.clone_from(&b),
                |w| trsm(&l, w),
            ),
        ));
        rows.push((
            "potrf",
            measure(
                flops::potrf(nb),
                &mut w,
                |w| w.clone_from(&spd),
                |w| potrf(w).expect("SPD tile"),
            ),
        ));
        if T::NAME == "f64" {
            let (a, b, c) = (tile::<f64>(nb, 2), tile::<f64>(nb, 3), tile::<f64>(nb, 4));
            let halo = Neighbours {
                north: Some(&b),
                south: Some(&b),
                west: Some(&c),
                east: Some(&c),
            };
            rows.push((
                "heat_step",
                measure(
                    flops::heat_step(nb),
                    &mut Tile::zeros(nb),
                    |_| {},
                    |w| heat_step(&a, halo, w, 0.2),
                ),
            ));
        }

        let n = 2048usize.max(nb);
        let whole = TiledMatrix::<T>::random_spd(n, nb, 5)?;
        let mut m = whole.clone();
        let chol = measure(
            flops::cholesky(n),
            &mut m,
            |m| m.clone_from(&whole),
            |m| sequential::cholesky(m).expect("SPD matrix"),
        );
        let label = format!("cholesky n={n} (seq.)");
        let gemm_best = rows[0].1.best;
        for (name, r) in rows
            .iter()
            .map(|(s, r)| (s.to_string(), r))
            .chain([(label, &chol)])
        {
            println!(
                "{nb:>5}  {name:<22} {:>9.1} {:>9.1} {:>10.2} {:>6}",
                r.best,
                r.median,
                r.best / gemm_best,
                r.calls
            );
        }
    }
    Ok(())
}
