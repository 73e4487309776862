//! Scenario: the built-in apps' task graphs run sequentially with this crate's kernels
//! (whichever backend is compiled in), in f64 and in f32, and pass the residual checks; a
//! deliberately broken run fails them, so the checks can fail.

use taskwatt_kernels::{
    cholesky_residual, gemm_nt, gemm_residual, potrf, residual_tolerance, residual_tolerance_for,
    sequential, syrk, trsm, KernelError, Scalar, TiledMatrix,
};

fn tiled_cholesky_passes_the_check<T: Scalar>(n: usize, nb: usize) -> Result<f64, KernelError> {
    let a = TiledMatrix::<T>::random_spd(n, nb, 2025)?;
    let mut l = a.clone();
    sequential::cholesky(&mut l)?;
    let r = cholesky_residual(&a, &l)?;
    let tol = residual_tolerance_for::<T>(n);
    assert!(r < tol, "{}: residual {r} >= {tol}", T::NAME);
    Ok(r)
}

#[test]
fn tiled_cholesky_n512_nb64_passes_the_check() -> Result<(), KernelError> {
    tiled_cholesky_passes_the_check::<f64>(512, 64)?;
    Ok(())
}

/// In f32 the residual is that of f32 arithmetic: far above f64's tolerance (the check
/// sees the precision), a few f32 epsilons (far below f32's).
#[test]
fn tiled_cholesky_f32_n512_nb64_passes_the_check() -> Result<(), KernelError> {
    let r = tiled_cholesky_passes_the_check::<f32>(512, 64)?;
    assert!(
        r > residual_tolerance(512),
        "f32 residual {r} looks like f64"
    );
    assert!(r < 1e3 * f64::from(f32::EPSILON), "f32 residual {r}");
    Ok(())
}

/// The loop nest of `sequential::cholesky` written out with the kernels, minus the
/// trailing update `(k, i, j) = (0, 3, 1)`; returns the residual and its tolerance.
fn cholesky_missing_one_update<T: Scalar>(n: usize, nb: usize) -> Result<(f64, f64), KernelError> {
    let a = TiledMatrix::<T>::random_spd(n, nb, 7)?;
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
    Ok((cholesky_residual(&a, &l)?, residual_tolerance_for::<T>(n)))
}

/// The check must catch the missing task.
#[test]
fn tiled_cholesky_missing_one_update_fails_the_check() -> Result<(), KernelError> {
    let (r, tol) = cholesky_missing_one_update::<f64>(256, 64)?;
    assert!(r > 1e3 * tol, "residual {r} should flag the missing update");
    // f32's tolerance is 2^29 times f64's: on a smaller matrix (a larger share of it
    // dropped, a lower tolerance) the dropped update still stands well above it.
    let (r, tol) = cholesky_missing_one_update::<f32>(64, 16)?;
    assert!(r > 10.0 * tol, "f32 residual {r} vs tolerance {tol}");
    Ok(())
}

#[test]
fn tiled_gemm_passes_the_check() -> Result<(), KernelError> {
    let (n, nb) = (320, 64);
    let a: TiledMatrix = TiledMatrix::random(n, nb, 1)?;
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

fn tiles_generated_alone_factor_like_the_whole<T: Scalar>() -> Result<(), KernelError> {
    // A runtime may generate each tile inside its own task: same matrix, same factor.
    let (n, nb, seed) = (192, 64, 11);
    let whole = TiledMatrix::<T>::random_spd(n, nb, seed)?;
    let mut alone = TiledMatrix::empty(n, nb)?;
    for j in 0..alone.nt() {
        for i in j..alone.nt() {
            alone.insert(i, j, TiledMatrix::spd_tile(n, nb, seed, i, j))?;
        }
    }
    assert_eq!(alone, whole);
    sequential::cholesky(&mut alone)?;
    assert!(cholesky_residual(&whole, &alone)? < residual_tolerance_for::<T>(n));
    Ok(())
}

#[test]
fn tiles_generated_alone_factor_like_the_whole_both_precisions() -> Result<(), KernelError> {
    tiles_generated_alone_factor_like_the_whole::<f64>()?;
    tiles_generated_alone_factor_like_the_whole::<f32>()
}

/// Measured residuals, for the docs (`cargo test -p taskwatt-kernels --release --test
/// tiled_apps -- --ignored --nocapture`).
#[test]
#[ignore = "prints figures for the docs; slow in debug builds"]
fn print_residuals() -> Result<(), KernelError> {
    for n in [512, 4096] {
        let r64 = tiled_cholesky_passes_the_check::<f64>(n, 256.min(n / 2))?;
        let r32 = tiled_cholesky_passes_the_check::<f32>(n, 256.min(n / 2))?;
        println!("n = {n}: f64 {r64:.2e}, f32 {r32:.2e}");
    }
    for (n, nb) in [(256, 64), (64, 16)] {
        let (r, tol) = cholesky_missing_one_update::<f32>(n, nb)?;
        println!("f32 dropped update n = {n} nb = {nb}: {r:.2e} (tolerance {tol:.2e})");
    }
    Ok(())
}
