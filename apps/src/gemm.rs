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
