//! Scenario: the built-in apps' task graphs run sequentially with this crate's kernels
//! (whichever backend is compiled in) and pass the residual checks; a deliberately broken
//! run fails them, so the checks can fail.

use taskwatt_kernels::{
    cholesky_residual, gemm_nt, gemm_residual, potrf, residual_tolerance, sequential, syrk, trsm,
    KernelError, TiledMatrix,
};

#[test]
fn tiled_cholesky_n512_nb64_passes_the_check() -> Result<(), KernelError> {
    let a = TiledMatrix::random_spd(512, 64, 2025)?;
    let mut l = a.clone();
    sequential::cholesky(&mut l)?;
    let r = cholesky_residual(&a, &l)?;
    assert!(
        r < residual_tolerance(512),
        "residual {r} >= {}",
        residual_tolerance(512)
    );
    Ok(())
}

/// The same loop nest written out with the kernels, minus one trailing update: the check
/// must catch the missing task.
#[test]
fn tiled_cholesky_missing_one_update_fails_the_check() -> Result<(), KernelError> {
    let (n, nb) = (256, 64);
    let a = TiledMatrix::random_spd(n, nb, 7)?;
    let nt = a.nt();
    let mut l = a.clone();
    for k in 0..nt {
        let mut akk = l.take(k, k).unwrap();
        potrf(&mut akk)?;
        for i in k + 1..nt {
            trsm(&akk, l.tile_mut(i, k).unwrap());
        }
        l.insert(k, k, akk)?;
        for j in k + 1..nt {
            let ajk = l.take(j, k).unwrap();
            syrk(&ajk, l.tile_mut(j, j).unwrap());
            for i in j + 1..nt {
                if (k, i, j) == (0, 3, 1) {
                    continue; // the dropped task
                }
                let aik = l.take(i, k).unwrap();
                gemm_nt(&aik, &ajk, l.tile_mut(i, j).unwrap());
                l.insert(i, k, aik)?;
            }
            l.insert(j, k, ajk)?;
        }
    }
    let r = cholesky_residual(&a, &l)?;
    assert!(
        r > 1e3 * residual_tolerance(n),
        "residual {r} should flag the missing update"
    );
    Ok(())
}

#[test]
fn tiled_gemm_passes_the_check() -> Result<(), KernelError> {
    let (n, nb) = (320, 64);
    let a = TiledMatrix::random(n, nb, 1)?;
    let b = TiledMatrix::random(n, nb, 2)?;
    let c0 = TiledMatrix::random(n, nb, 3)?;
    let mut c = c0.clone();
    sequential::gemm(1.5, &a, &b, -0.5, &mut c)?;
    let r = gemm_residual(1.5, &a, &b, -0.5, &c0, &c)?;
    assert!(r < residual_tolerance(n), "residual {r}");
    // Forgetting beta (as if C were overwritten) must be caught.
    let mut wrong = c0.clone();
    sequential::gemm(1.5, &a, &b, 0.0, &mut wrong)?;
    assert!(gemm_residual(1.5, &a, &b, -0.5, &c0, &wrong)? > 1e-3);
    Ok(())
}

#[test]
fn tiles_generated_alone_factor_like_the_whole() -> Result<(), KernelError> {
    // A runtime may generate each tile inside its own task: same matrix, same factor.
    let (n, nb, seed) = (192, 64, 11);
    let whole = TiledMatrix::random_spd(n, nb, seed)?;
    let mut alone = TiledMatrix::empty(n, nb)?;
    for j in 0..alone.nt() {
        for i in j..alone.nt() {
            alone.insert(i, j, TiledMatrix::spd_tile(n, nb, seed, i, j))?;
        }
    }
    assert_eq!(alone, whole);
    sequential::cholesky(&mut alone)?;
    assert!(cholesky_residual(&whole, &alone)? < residual_tolerance(n));
    Ok(())
}
