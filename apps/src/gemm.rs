//! Tiled matrix product C = A B:
//!
//! ```text
//! for i, j in 0..nt:            (nt^2 independent chains)
//!     for l in 0..nt: gemm_nn(R A[i][l], R B[l][j], RW C[i][j])
//! ```
//!
//! Generic over the element type (f64 or f32); the check computes in f64 either way.

use std::time::Instant;

use taskwatt_kernels::{flops, gemm_residual, residual_tolerance_for, Tile, TiledMatrix};
use taskwatt_runtime::{Handle, Runtime, Task};

use super::codelets::AppScalar;

use super::{kernel_err, tile_bytes, App, AppConfig, AppError, AppRun, Check};

/// Runs gemm_nn alone, then on every worker, for `each` (or its time in `only`; see
/// calibrate.rs), so that a recording shows the type alone and beside others: the
/// contention law the what-if applies on other worker counts. Like the graph's, the tasks
/// stream their tiles: each takes the next A, B and C of pools as large as the app's
/// matrices, up to [`CALIBRATION_POOL_BYTES`](super::CALIBRATION_POOL_BYTES) in all (the
/// same tiles every time would stay in a core's cache, and show no contention where the
/// graph, sharing the memory's bandwidth, runs 20 % slower beside another).
pub(super) fn calibrate<T: AppScalar>(
    rt: &Runtime,
    cfg: &AppConfig,
    sink: &taskwatt_traces::TraceSink,
    each: std::time::Duration,
    only: Option<&[(String, std::time::Duration)]>,
) -> Result<(), AppError> {
    let time = super::calibration_time("gemm_nn", each, only);
    if time.is_zero() {
        return Ok(());
    }
    let nb = cfg.tile;
    let bytes = tile_bytes::<T>(nb);
    let n = cfg.n.max(nb);
    let slots = 2 * rt.workers().len();
    let per_pool = super::calibration_pool(n, nb, bytes, 3).max(slots);
    let a0 = TiledMatrix::<T>::random_tile_in(n, nb, cfg.seed, 0, 0);
    let b0 = TiledMatrix::<T>::random_tile_in(n, nb, cfg.seed.wrapping_add(1), 0, 0);
    let pool = |t: &Tile<T>| -> Vec<Handle<Tile<T>>> {
        (0..per_pool)
            .map(|_| rt.register_device_bytes(t.clone(), bytes))
            .collect()
    };
    let (pa, pb, pc) = (pool(&a0), pool(&b0), pool(&Tile::zeros(nb)));
    let next = std::cell::Cell::new(0usize);
    let cl = T::gemm_nn();
    // Consecutive tasks take consecutive C tiles, so that the tasks of one batch (at most
    // `slots <= per_pool`) write distinct ones.
    super::calibrate::phase(rt, sink, "gemm_nn", time, &|_| {
        let k = next.get();
        next.set(k + 1);
        Task::new(cl)
            .r(&pa[k % per_pool])
            .r(&pb[(k + per_pool / 2) % per_pool])
            .rw(&pc[k % per_pool])
    })?;
    Ok(())
}

pub(super) fn run<T: AppScalar>(rt: &Runtime, cfg: &AppConfig) -> Result<AppRun, AppError> {
    let err = kernel_err("gemm");
    let (n, nb) = (cfg.n, cfg.tile);
    let go = || !rt.is_interrupted();
    let (Some(a), Some(b)) = (
        TiledMatrix::<T>::random_while(n, nb, cfg.seed, &go).map_err(&err)?,
        TiledMatrix::random_while(n, nb, cfg.seed.wrapping_add(1), &go).map_err(&err)?,
    ) else {
        return Err(super::interrupted_while_generating(rt));
    };
    let (nt, order) = (a.nt(), a.n());
    let inputs = cfg.check.then(|| (a.clone(), b.clone()));

    let cl = T::gemm_nn();
    let register = |mut m: TiledMatrix<T>, name: &str| -> Vec<Handle<Tile<T>>> {
        let mut v = Vec::with_capacity(nt * nt);
        for j in 0..nt {
            for i in 0..nt {
                let t = m.take(i, j).unwrap_or_else(|| Tile::zeros(nb));
                let h = rt.register_device_bytes(t, tile_bytes::<T>(nb));
                rt.set_name(&h, format!("{name}[{i}][{j}]"));
                v.push(h);
            }
        }
        v
    };
    let (ha, hb) = (register(a, "A"), register(b, "B"));
    let hc = register(TiledMatrix::zeros(order, nb).map_err(&err)?, "C");

    let (start, graph_start) = (Instant::now(), taskwatt_traces::Clock::now());
    for l in 0..nt {
        for j in 0..nt {
            for i in 0..nt {
                rt.submit(
                    Task::new(cl)
                        .r(&ha[i + l * nt])
                        .r(&hb[l + j * nt])
                        .rw(&hc[i + j * nt]),
                )?;
            }
        }
    }
    rt.wait_all()?;
    let (makespan, graph_end) = (start.elapsed(), taskwatt_traces::Clock::now());

    // Of the order of A and B: padded when `nb` does not divide `n`.
    let mut c = TiledMatrix::empty(order, nb).map_err(&err)?;
    for (idx, h) in hc.into_iter().enumerate() {
        c.insert(idx % nt, idx / nt, rt.unregister(h)?)
            .map_err(&err)?;
    }
    let check = match inputs {
        Some((a, b)) => {
            let c0 = TiledMatrix::zeros(order, nb).map_err(&err)?;
            let value = gemm_residual(T::ONE, &a, &b, T::ZERO, &c0, &c).map_err(&err)?;
            let tolerance = residual_tolerance_for::<T>(n);
            Some(Check {
                what: "||C - A B||_F / (||A||_F ||B||_F) (randomized)",
                value,
                tolerance,
                passed: value <= tolerance,
            })
        }
        None => None,
    };
    Ok(AppRun {
        app: App::Gemm,
        config: *cfg,
        tasks: (nt * nt * nt) as u64,
        flops: flops::gemm_total(n),
        makespan,
        graph: vec![(graph_start, graph_end)],
        check,
    })
}
