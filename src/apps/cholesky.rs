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

use std::time::Instant;

use taskwatt_kernels::{
    cholesky_residual, flops, gemm_nt, potrf, residual_tolerance, syrk, trsm, Tile, TiledMatrix,
};
use taskwatt_runtime::{Codelet, Handle, Runtime, Task};

use super::{kernel_err, tile_bytes, App, AppConfig, AppError, AppRun, Check};

pub(super) fn run(rt: &Runtime, cfg: &AppConfig) -> Result<AppRun, AppError> {
    let err = kernel_err("cholesky");
    let (n, nb) = (cfg.n, cfg.tile);
    let a = TiledMatrix::random_spd(n, nb, cfg.seed).map_err(&err)?;
    let nt = a.nt();
    let original = cfg.check.then(|| a.clone());

    let potrf_cl = Codelet::new("potrf").cpu(|ctx| {
        if let Err(e) = potrf(ctx.rw::<Tile>(0)) {
            panic!("potrf: {e}");
        }
    });
    let trsm_cl = Codelet::new("trsm").cpu(|ctx| trsm(ctx.r::<Tile>(0), ctx.rw::<Tile>(1)));
    let syrk_cl = Codelet::new("syrk").cpu(|ctx| syrk(ctx.r::<Tile>(0), ctx.rw::<Tile>(1)));
    let gemm_cl = Codelet::new("gemm")
        .cpu(|ctx| gemm_nt(ctx.r::<Tile>(0), ctx.r::<Tile>(1), ctx.rw::<Tile>(2)));

    let mut tiles = a;
    let mut h: Vec<Option<Handle<Tile>>> = vec![None; nt * nt];
    for j in 0..nt {
        for i in j..nt {
            let t = tiles.take(i, j).expect("random_spd fills the lower tiles");
            h[i + j * nt] = Some(rt.register_bytes(t, tile_bytes(nb)));
        }
    }
    let at = |i: usize, j: usize| h[i + j * nt].as_ref().expect("lower tile");

    let start = Instant::now();
    let mut tasks = 0u64;
    for k in 0..nt {
        let base = 3 * (nt - k) as i32;
        rt.submit(Task::new(&potrf_cl).rw(at(k, k)).priority(base + 2))?;
        for i in k + 1..nt {
            rt.submit(
                Task::new(&trsm_cl)
                    .r(at(k, k))
                    .rw(at(i, k))
                    .priority(base + 1),
            )?;
        }
        for i in k + 1..nt {
            rt.submit(Task::new(&syrk_cl).r(at(i, k)).rw(at(i, i)).priority(base))?;
            for j in k + 1..i {
                rt.submit(
                    Task::new(&gemm_cl)
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
    let makespan = start.elapsed();

    for j in 0..nt {
        for i in j..nt {
            let handle = h[i + j * nt].take().expect("lower tile");
            tiles.insert(i, j, rt.unregister(handle)?).map_err(&err)?;
        }
    }
    let check = match original {
        Some(orig) => {
            let value = cholesky_residual(&orig, &tiles).map_err(&err)?;
            let tolerance = residual_tolerance(n);
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
        check,
    })
}
