//! Sequential tiled algorithms: the task graphs of taskwatt's built-in apps, run in
//! submission order on the calling thread.
//!
//! They are the baselines a parallel run is compared with (same kernels, same order of
//! tile operations, one core) and the reference for its result. The loop nests are those
//! of StarPU's `cholesky_implicit.c` and the classic tiled GEMM; each kernel call here is
//! one task there:
//!
//! ```text
//! for k in 0..nt:                    // tiled Cholesky, right-looking, lower
//!     potrf(A[k][k])
//!     for i in k+1..nt: trsm(A[k][k], A[i][k])
//!     for j in k+1..nt:
//!         syrk(A[j][k], A[j][j])
//!         for i in j+1..nt: gemm_nt(A[i][k], A[j][k], A[i][j])
//! ```

use crate::{
    gemm_nn, gemm_nt, heat_step_in, potrf, syrk, trsm, KernelError, Neighbours, Scalar, Tile,
    TiledMatrix,
};

/// Factors `a` in place: its lower tiles become the tiles of `L` with `L L^T = A`.
///
/// Only lower tiles (`i >= j`) are read and written, and in diagonal tiles only the lower
/// triangle, so a matrix from [`TiledMatrix::random_spd`] works as is.
///
/// # Errors
/// [`KernelError::CholeskyFailed`] if a diagonal tile is not positive definite (the matrix
/// is then partly overwritten); [`KernelError::MissingTile`] if a lower tile is absent.
pub fn cholesky<T: Scalar>(a: &mut TiledMatrix<T>) -> Result<(), KernelError> {
    let (nb, nt) = (a.nb(), a.nt());
    const WHAT: &str = "sequential::cholesky";
    for j in 0..nt {
        for i in j..nt {
            a.need(i, j, WHAT, "")?;
        }
    }
    for k in 0..nt {
        let mut akk = take(a, k, k);
        let res = potrf(&mut akk);
        put(a, k, k, akk);
        res.map_err(|e| match e {
            KernelError::NotPositiveDefinite { column } => KernelError::CholeskyFailed {
                tile: k,
                column: k * nb + column,
            },
            other => other,
        })?;
        let akk = take(a, k, k);
        for i in k + 1..nt {
            trsm(&akk, a.tile_mut(i, k).expect("checked above"));
        }
        put(a, k, k, akk);
        for j in k + 1..nt {
            let ajk = take(a, j, k);
            syrk(&ajk, a.tile_mut(j, j).expect("checked above"));
            for i in j + 1..nt {
                let (aik, aij) = (take(a, i, k), a.tile_mut(i, j).expect("checked above"));
                gemm_nt(&aik, &ajk, aij);
                put(a, i, k, aik);
            }
            put(a, j, k, ajk);
        }
    }
    Ok(())
}

/// `c = alpha a b + beta c` on tiled matrices: `C[i][j] = alpha sum_k A[i][k] B[k][j] +
/// beta C[i][j]`, one [`gemm_nn`] per `(i, j, k)` (`beta` applied with `k = 0` only).
///
/// # Errors
/// [`KernelError::ShapeMismatch`] if the shapes differ; [`KernelError::MissingTile`] if a
/// tile is absent.
pub fn gemm<T: Scalar>(
    alpha: T,
    a: &TiledMatrix<T>,
    b: &TiledMatrix<T>,
    beta: T,
    c: &mut TiledMatrix<T>,
) -> Result<(), KernelError> {
    const WHAT: &str = "sequential::gemm";
    for m in [b, &*c] {
        if m.n() != a.n() || m.nb() != a.nb() {
            return Err(KernelError::ShapeMismatch {
                what: WHAT,
                n_a: a.n(),
                nb_a: a.nb(),
                n_b: m.n(),
                nb_b: m.nb(),
            });
        }
    }
    let nt = a.nt();
    let all = ", and every upper tile too (a general matrix)";
    for j in 0..nt {
        for i in 0..nt {
            for m in [a, b, &*c] {
                m.need(i, j, WHAT, all)?;
            }
        }
    }
    for j in 0..nt {
        for i in 0..nt {
            let cij = c.tile_mut(i, j).expect("checked above");
            for k in 0..nt {
                let (aik, bkj) = (
                    a.tile(i, k).expect("checked"),
                    b.tile(k, j).expect("checked"),
                );
                gemm_nn(alpha, aik, bkj, if k == 0 { beta } else { T::ONE }, cij);
            }
        }
    }
    Ok(())
}

/// Runs `steps` Jacobi steps of [`heat_step`](crate::heat_step) on the whole tiled grid (Dirichlet boundary
/// on the grid's edges), with a second grid as the write buffer.
///
/// # Errors
/// [`KernelError::MissingTile`] if a tile is absent.
pub fn heat(grid: &mut TiledMatrix, steps: usize, alpha: f64) -> Result<(), KernelError> {
    let n = grid.n();
    heat_in(grid, n, steps, alpha)
}

/// [`heat`] on a grid of order `n` padded to a multiple of its tiles' order (`grid.n()`
/// is [`padded_order`](crate::padded_order)`(n, nb)`): the rows and columns past `n` are
/// padding, kept, and the first `n` are the order-`n` grid's (see
/// [`Extent`](crate::Extent)).
///
/// # Errors
/// As [`heat`].
pub fn heat_in(
    grid: &mut TiledMatrix,
    n: usize,
    steps: usize,
    alpha: f64,
) -> Result<(), KernelError> {
    let (nb, nt) = (grid.nb(), grid.nt());
    for j in 0..nt {
        for i in 0..nt {
            grid.need(
                i,
                j,
                "sequential::heat",
                ", and every upper tile too (a full grid)",
            )?;
        }
    }
    let mut next = TiledMatrix::zeros(grid.n(), nb)?;
    for _ in 0..steps {
        for j in 0..nt {
            for i in 0..nt {
                let src = &*grid;
                let halo = Neighbours {
                    north: i.checked_sub(1).and_then(|n| src.tile(n, j)),
                    south: if i + 1 < nt { src.tile(i + 1, j) } else { None },
                    west: j.checked_sub(1).and_then(|w| src.tile(i, w)),
                    east: if j + 1 < nt { src.tile(i, j + 1) } else { None },
                };
                heat_step_in(
                    src.tile(i, j).expect("checked"),
                    halo,
                    next.tile_mut(i, j).expect("zeros"),
                    alpha,
                    crate::Extent::of(n, nb, i, j),
                );
            }
        }
        std::mem::swap(grid, &mut next);
    }
    Ok(())
}

fn take<T: Scalar>(a: &mut TiledMatrix<T>, i: usize, j: usize) -> Tile<T> {
    a.take(i, j).expect("tile presence checked on entry")
}

fn put<T: Scalar>(a: &mut TiledMatrix<T>, i: usize, j: usize, t: Tile<T>) {
    a.insert(i, j, t).expect("tile came from this matrix");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::naive;
    use crate::{cholesky_residual, gemm_residual, residual_tolerance, residual_tolerance_for};
    // Constructors name no element type; these tests are about f64 matrices unless they
    // say `crate::TiledMatrix::<f32>`.
    type TiledMatrix = crate::TiledMatrix<f64>;

    #[test]
    fn cholesky_matches_dense_factor() {
        let a = TiledMatrix::random_spd(51, 17, 5).unwrap();
        let mut l = a.clone();
        cholesky(&mut l).unwrap();
        let want = naive::dense_cholesky(&naive::symmetric_dense(&a), 51);
        let got = naive::lower_dense(&l);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
        assert!(cholesky_residual(&a, &l).unwrap() < residual_tolerance(51));
    }

    #[test]
    fn cholesky_names_the_global_column() {
        let mut a = TiledMatrix::random_spd(30, 10, 1).unwrap();
        a.tile_mut(2, 2).unwrap().set(4, 4, -1e6);
        assert_eq!(
            cholesky(&mut a),
            Err(KernelError::CholeskyFailed {
                tile: 2,
                column: 24
            })
        );
        let mut a = TiledMatrix::random_spd(30, 10, 1).unwrap();
        a.take(2, 1);
        assert!(matches!(
            cholesky(&mut a),
            Err(KernelError::MissingTile { i: 2, j: 1, .. })
        ));
    }

    #[test]
    fn gemm_matches_dense() {
        let (n, nb) = (27, 9);
        let a = TiledMatrix::random(n, nb, 1).unwrap();
        let b = TiledMatrix::random(n, nb, 2).unwrap();
        let c0 = TiledMatrix::random(n, nb, 3).unwrap();
        let mut c = c0.clone();
        gemm(2.0, &a, &b, 0.5, &mut c).unwrap();
        let want = naive::dense_gemm(2.0, &a.to_dense(), &b.to_dense(), 0.5, &c0.to_dense(), n);
        for (g, w) in c.to_dense().iter().zip(&want) {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
        assert!(gemm_residual(2.0, &a, &b, 0.5, &c0, &c).unwrap() < residual_tolerance(n));
    }

    #[test]
    fn heat_matches_dense_grid() {
        let (n, nb, steps, alpha) = (15, 5, 4, 0.2);
        let mut grid = TiledMatrix::random(n, nb, 8).unwrap();
        let mut dense = grid.to_dense();
        heat(&mut grid, steps, alpha).unwrap();
        for _ in 0..steps {
            dense = naive::heat_step_dense(&dense, n, alpha);
        }
        for (g, w) in grid.to_dense().iter().zip(&dense) {
            assert!((g - w).abs() < 1e-14, "{g} vs {w}");
        }
    }

    #[test]
    fn f32_cholesky_and_gemm_pass_their_checks() {
        let a = crate::TiledMatrix::<f32>::random_spd(51, 17, 5).unwrap();
        let mut l = a.clone();
        cholesky(&mut l).unwrap();
        let want = naive::dense_cholesky(&naive::symmetric_dense(&a), 51);
        for (g, w) in naive::lower_dense(&l).iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
        let r = cholesky_residual(&a, &l).unwrap();
        assert!(r < residual_tolerance_for::<f32>(51), "{r}");

        let (n, nb) = (27, 9);
        let a = crate::TiledMatrix::<f32>::random(n, nb, 1).unwrap();
        let b = crate::TiledMatrix::<f32>::random(n, nb, 2).unwrap();
        let c0 = crate::TiledMatrix::<f32>::random(n, nb, 3).unwrap();
        let mut c = c0.clone();
        gemm(2.0, &a, &b, 0.5, &mut c).unwrap();
        let r = gemm_residual(2.0, &a, &b, 0.5, &c0, &c).unwrap();
        assert!(r < residual_tolerance_for::<f32>(n), "{r}");
    }
}
