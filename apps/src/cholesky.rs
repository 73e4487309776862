//! Tiled Cholesky (right-looking, as StarPU's `cholesky_implicit`):
//!
//! ```text
//! for k in 0..nt:
//!     potrf(RW A[k][k])
//!     for i in k+1..nt: trsm(R A[k][k], RW A[i][k])
//!     for i in k+1..nt:
//!         syrk(R A[i][k], RW A[i][i])
//!         for j in k+1..i: gemm(R A[i][k], R A[j][k], RW A[i][j])
//! ```
//!
//! Priorities follow the critical path: the panel of step k (potrf, trsm) before the
//! trailing update, earlier steps before later ones.
//!
//! The app is generic over the element type (`f64` or `f32`, from
//! [`AppConfig::precision`](super::AppConfig)); the task graph, the codelet names and the
//! flop count (`n^3 / 3`) are the same in both.

use std::time::{Duration, Instant};

use taskwatt_kernels::{
    cholesky_residual, flops, padded_order, potrf, residual_tolerance_for, Tile, TiledMatrix,
};
use taskwatt_runtime::{Handle, Runtime, Task};
use taskwatt_traces::TraceSink;

use super::calibrate::{phase, Calibration};
use super::codelets::{AppScalar, Cholesky};
use super::{kernel_err, tile_bytes, App, AppConfig, AppError, AppRun, Check};

/// Runs each of the four codelets (those named in `only`, for their own durations, if
/// given) alone, then on every worker, for `each` (see calibrate.rs).
pub(super) fn calibrate<T: AppScalar>(
    rt: &Runtime,
    cfg: &AppConfig,
    sink: &TraceSink,
    each: Duration,
    only: Option<&[(String, Duration)]>,
) -> Result<(), AppError> {
    let time = |name: &str| super::calibration_time(name, each, only);
    let err = kernel_err("cholesky");
    let (n, nb) = (cfg.n, cfg.tile);
    padded_order(n, nb).map_err(&err)?;
    // Two whole tiles of real values, padding or not (a small or ragged n pads them).
    let n = n.max(2 * nb);
    let cl = T::cholesky();
    let bytes = tile_bytes::<T>(nb);
    let a0 = TiledMatrix::<T>::spd_tile(n, nb, cfg.seed, 0, 0);
    let mut l = a0.clone();
    potrf(&mut l).map_err(&err)?;
    let b0 = TiledMatrix::<T>::spd_tile(n, nb, cfg.seed, 1, 0);
    let slots = 2 * rt.workers().len();
    let scratch: Vec<Handle<Tile<T>>> = (0..slots)
        .map(|_| rt.register_device_bytes(b0.clone(), bytes))
        .collect();
    let (a0, l, b0) = (
        rt.register_device_bytes(a0, bytes),
        rt.register_device_bytes(l, bytes),
        rt.register_device_bytes(b0, bytes),
    );
    // The pristine copy each in-place kernel restores its operand from is not part of the
    // task it stands for: the graph's footprint (one tile for potrf, two for trsm), so that
    // performance models and `--key codelet-footprint` file them with the graph's tasks.
    phase(rt, sink, "potrf", time("potrf"), &|s| {
        Task::new(&cl.potrf)
            .rw(&scratch[s])
            .r(&a0)
            .arg(Calibration)
            .footprint(bytes)
    })?;
    phase(rt, sink, "trsm", time("trsm"), &|s| {
        Task::new(&cl.trsm)
            .r(&l)
            .rw(&scratch[s])
            .r(&b0)
            .arg(Calibration)
            .footprint(2 * bytes)
    })?;
    phase(rt, sink, "syrk", time("syrk"), &|s| {
        Task::new(&cl.syrk).r(&b0).rw(&scratch[s])
    })?;
    phase(rt, sink, "gemm", time("gemm"), &|s| {
        Task::new(&cl.gemm).r(&b0).r(&l).rw(&scratch[s])
    })?;
    Ok(())
}

pub(super) fn run<T: AppScalar>(rt: &Runtime, cfg: &AppConfig) -> Result<AppRun, AppError> {
    let err = kernel_err("cholesky");
    let (n, nb) = (cfg.n, cfg.tile);
    let Some(a) = TiledMatrix::<T>::random_spd_while(n, nb, cfg.seed, &|| !rt.is_interrupted())
        .map_err(&err)?
    else {
        return Err(super::interrupted_while_generating(rt));
    };
    let nt = a.nt();
    let original = cfg.check.then(|| a.clone());

    let Cholesky {
        potrf: potrf_cl,
        trsm: trsm_cl,
        syrk: syrk_cl,
        gemm: gemm_cl,
    } = T::cholesky();

    let mut tiles = a;
    let mut h: Vec<Option<Handle<Tile<T>>>> = vec![None; nt * nt];
    for j in 0..nt {
        for i in j..nt {
            let t = tiles.take(i, j).expect("random_spd fills the lower tiles");
            let handle = rt.register_device_bytes(t, tile_bytes::<T>(nb));
            rt.set_name(&handle, format!("A[{i}][{j}]"));
            h[i + j * nt] = Some(handle);
        }
    }
    let at = |i: usize, j: usize| h[i + j * nt].as_ref().expect("lower tile");

    let (start, graph_start) = (Instant::now(), taskwatt_traces::Clock::now());
    let mut tasks = 0u64;
    for k in 0..nt {
        let base = 3 * (nt - k) as i32;
        rt.submit(Task::new(potrf_cl).rw(at(k, k)).priority(base + 2))?;
        for i in k + 1..nt {
            rt.submit(
                Task::new(trsm_cl)
                    .r(at(k, k))
                    .rw(at(i, k))
                    .priority(base + 1),
            )?;
        }
        for i in k + 1..nt {
            rt.submit(Task::new(syrk_cl).r(at(i, k)).rw(at(i, i)).priority(base))?;
            for j in k + 1..i {
                rt.submit(
                    Task::new(gemm_cl)
                        .r(at(i, k))
                        .r(at(j, k))
                        .rw(at(i, j))
                        .priority(base),
                )?;
            }
        }
        tasks +=
            1 + 2 * (nt - k - 1) as u64 + ((nt - k - 1) * (nt - k).saturating_sub(2) / 2) as u64;
    }
    rt.wait_all()?;
    let (makespan, graph_end) = (start.elapsed(), taskwatt_traces::Clock::now());

    for j in 0..nt {
        for i in j..nt {
            let handle = h[i + j * nt].take().expect("lower tile");
            tiles.insert(i, j, rt.unregister(handle)?).map_err(&err)?;
        }
    }
    let check = match original {
        Some(orig) => {
            let value = cholesky_residual(&orig, &tiles).map_err(&err)?;
            let tolerance = residual_tolerance_for::<T>(n);
            Some(Check {
                what: "||A - L L^T||_F / ||A||_F (randomized)",
                value,
                tolerance,
                passed: value <= tolerance,
            })
        }
        None => None,
    };
    Ok(AppRun {
        app: App::Cholesky,
        config: *cfg,
        tasks,
        flops: flops::cholesky(n),
        makespan,
        graph: vec![(graph_start, graph_end)],
        check,
    })
}
