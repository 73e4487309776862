//! Residual checks for tiled Cholesky and tiled GEMM, in `O(n^2)` time.
//!
//! # What is estimated
//! The quantity of interest is the relative backward error
//! `||A - L L^T||_F / ||A||_F` (Cholesky) or
//! `||C - (alpha A B + beta C0)||_F / (|alpha| ||A||_F ||B||_F + |beta| ||C0||_F)` (GEMM).
//! Forming `L L^T` costs `n^3 / 3` flops, as much as the factorisation. Instead, with `E`
//! the error matrix and `x` a vector of independent random signs (`+-1`),
//! `E[ ||E x||^2 ] = ||E||_F^2` (Hutchinson's trace estimator applied to `E^T E`), and
//! `E x = A x - L (L^T x)` costs three matrix-vector products. We average over [`PROBES`]
//! sign vectors, processed together as an `n x PROBES` block so each tile is read once per
//! product (a skinny `gemm`).
//!
//! For `n = 4096` (tiles of 256) the Cholesky check takes about 0.08 s on one core,
//! against seconds for the dense product; the GEMM check, with four products over full
//! matrices, about 0.3 s.
//!
//! # How good the estimate is
//! The squared estimate has a relative standard deviation of at most `sqrt(2 / PROBES)` = 0.5,
//! so the reported residual is typically within a factor 1.5 of the exact one (the tests
//! check a factor 3 against the dense computation), and a nonzero `E` goes unseen only if
//! `E x = 0` for every probe, which has probability at most `2^-PROBES` (1/256). The probes
//! are fixed (seeded), so the check is reproducible.
//!
//! # Precision
//! The checks take matrices of either [`Scalar`] type and always compute in f64: tiles are
//! widened exactly, so for an f32 factorisation they measure the backward error of the f32
//! factor with respect to the f32 input, not rounding in the check itself (an f32 check
//! would add errors of the size it is trying to see).
//!
//! # Tolerance
//! [`residual_tolerance_for`]`::<T>(n) = 30 n eps_T`, with `eps_T` the machine epsilon of
//! the matrices' type (`2^-52` for f64, [`residual_tolerance`]; `2^-23` for f32): the
//! threshold LAPACK's own test suite applies to `||A - L L^T|| / (n eps ||A||)` in both
//! precisions (`THRESH = 30` in `dtest.in` and `stest.in`).
//! Measured with [`TiledMatrix::random_spd`] and [`sequential::cholesky`](crate::sequential::cholesky):
//! 4.8e-16 at `n = 512` (tolerance 3.4e-12) and 8.9e-16 at `n = 4096` (tolerance 2.7e-11),
//! both backends; GEMM residuals are about 2e-17. One dropped trailing update (one
//! `gemm_nt` task) at `n = 256` gives 1.1e-3. The check is norm-wise: it catches a missing,
//! repeated or misplaced task, not a tiny perturbation of one entry (a relative change of
//! 1e-6 in one element of `L` at `n = 4096` moves the residual to about 3e-12, under the
//! tolerance).
//!
//! In f32 the same rule gives 1.8e-3 at `n = 512` and 1.5e-2 at `n = 4096`, while the
//! measured residuals are 0.8e-7 to 1.5e-7 (about one f32 epsilon, as f64's are a few
//! f64 epsilons), both backends. The threshold is LAPACK's and generous by design, so in
//! f32 it catches a dropped task only where the task is large against it: at `n = 256`
//! (tiles of 64) one dropped update gives 1.1e-3 against a tolerance of 9.2e-4, at
//! `n = 64` (tiles of 16) 3.1e-3 against 2.3e-4. An f32 run that must detect single
//! dropped tasks at scale should compare the residual with its measured size instead.

use std::any::Any;
use std::borrow::Cow;

use crate::pure::{gemm_view, Op};
use crate::view::{MatMut, MatRef};
use crate::{random, KernelError, Scalar, Tile, TiledMatrix};

/// Number of random sign vectors the residual estimates average over.
pub const PROBES: usize = 8;

/// Seed of the probe vectors: fixed so that a check gives the same number every run.
const PROBE_SEED: u64 = 0x7a5c_0de5_5eed;

/// The pass/fail threshold for [`cholesky_residual`] and [`gemm_residual`] on f64
/// matrices of order `n`: `30 * n * f64::EPSILON` (see the module docs).
pub fn residual_tolerance(n: usize) -> f64 {
    residual_tolerance_for::<f64>(n)
}

/// The pass/fail threshold for [`cholesky_residual`] and [`gemm_residual`] on matrices of
/// `T` of order `n`: `30 * n * eps_T` (see the module docs), e.g. 1.5e-2 for f32 and
/// `n = 4096`.
pub fn residual_tolerance_for<T: Scalar>(n: usize) -> f64 {
    30.0 * n as f64 * T::EPSILON
}

/// Estimates `||A - L L^T||_F / ||A||_F` (see the module docs for the method and its
/// accuracy).
///
/// `a` is the original symmetric matrix and `l` its factor, both given by their lower tiles
/// (`i >= j`; upper tiles, if present, are ignored). In diagonal tiles only the lower
/// triangle is read: `a`'s is mirrored, `l`'s upper part is taken as zero, so the factor
/// tiles can be used exactly as `potrf` left them.
///
/// # Errors
/// [`KernelError::ShapeMismatch`] if `a` and `l` differ in `n` or `nb`;
/// [`KernelError::MissingTile`] if a lower tile is absent.
pub fn cholesky_residual<T: Scalar>(
    a: &TiledMatrix<T>,
    l: &TiledMatrix<T>,
) -> Result<f64, KernelError> {
    same_shape("cholesky_residual", a, l)?;
    let (n, nb, nt) = (a.n(), a.nb(), a.nt());
    let x = probes(n);
    let mut ax = vec![0.0; n * PROBES];
    let mut ltx = vec![0.0; n * PROBES];
    let mut lltx = vec![0.0; n * PROBES];
    let mut a_norm2 = 0.0;
    for j in 0..nt {
        for i in j..nt {
            let aij = a.need(i, j, "cholesky_residual (original)", "")?;
            let lij = l.need(i, j, "cholesky_residual (factor)", "")?;
            if i == j {
                let s = symmetric_from_lower(aij);
                a_norm2 += sum_sq(&s);
                acc(&mut ax, n, nb, i, &s, Op::N, &x, j);
                let t = lower_triangle(lij);
                acc(&mut ltx, n, nb, j, &t, Op::T, &x, i);
            } else {
                let (aij, lij) = (wide(aij), wide(lij));
                a_norm2 += 2.0 * sum_sq(&aij);
                acc(&mut ax, n, nb, i, &aij, Op::N, &x, j);
                acc(&mut ax, n, nb, j, &aij, Op::T, &x, i);
                acc(&mut ltx, n, nb, j, &lij, Op::T, &x, i);
            }
        }
    }
    // Second pass, once L^T x is complete: L (L^T x).
    for j in 0..nt {
        for i in j..nt {
            let lij = l.need(i, j, "cholesky_residual (factor)", "")?;
            if i == j {
                acc(&mut lltx, n, nb, i, &lower_triangle(lij), Op::N, &ltx, j);
            } else {
                acc(&mut lltx, n, nb, i, &wide(lij), Op::N, &ltx, j);
            }
        }
    }
    Ok(relative(diff_norm2(&ax, &lltx), a_norm2.sqrt()))
}

/// Estimates `||C - (alpha A B + beta C0)||_F / (|alpha| ||A||_F ||B||_F + |beta| ||C0||_F)`
/// for tiled GEMM (see the module docs for the method and its accuracy). `c0` is `C`
/// before the product, `c` after. All tiles of all four matrices are needed.
///
/// # Errors
/// [`KernelError::ShapeMismatch`] if the matrices differ in `n` or `nb`;
/// [`KernelError::MissingTile`] if a tile is absent.
pub fn gemm_residual<T: Scalar>(
    alpha: T,
    a: &TiledMatrix<T>,
    b: &TiledMatrix<T>,
    beta: T,
    c0: &TiledMatrix<T>,
    c: &TiledMatrix<T>,
) -> Result<f64, KernelError> {
    let (alpha, beta) = (alpha.to_f64(), beta.to_f64());
    for other in [b, c0, c] {
        same_shape("gemm_residual", a, other)?;
    }
    let n = a.n();
    let x = probes(n);
    let (bx, b_norm) = general_product(b, &x)?;
    let (abx, a_norm) = general_product(a, &bx)?;
    let (c0x, c0_norm) = general_product(c0, &x)?;
    let (cx, _) = general_product(c, &x)?;
    let want: Vec<f64> = abx
        .iter()
        .zip(&c0x)
        .map(|(p, q)| alpha * p + beta * q)
        .collect();
    let scale = alpha.abs() * a_norm * b_norm + beta.abs() * c0_norm;
    Ok(relative(diff_norm2(&cx, &want), scale))
}

/// `(M x, ||M||_F)` for a matrix with all tiles present; the norm is the second value.
fn general_product<T: Scalar>(
    m: &TiledMatrix<T>,
    x: &[f64],
) -> Result<(Vec<f64>, f64), KernelError> {
    let (n, nb, nt) = (m.n(), m.nb(), m.nt());
    let mut y = vec![0.0; n * PROBES];
    let mut norm2 = 0.0;
    for j in 0..nt {
        for i in 0..nt {
            let t = wide(m.need(
                i,
                j,
                "gemm_residual",
                ", and every upper tile too (a general matrix)",
            )?);
            norm2 += sum_sq(&t);
            acc(&mut y, n, nb, i, &t, Op::N, x, j);
        }
    }
    Ok((y, norm2.sqrt()))
}

fn same_shape<T: Scalar>(
    what: &'static str,
    a: &TiledMatrix<T>,
    b: &TiledMatrix<T>,
) -> Result<(), KernelError> {
    if a.n() != b.n() || a.nb() != b.nb() {
        return Err(KernelError::ShapeMismatch {
            what,
            n_a: a.n(),
            nb_a: a.nb(),
            n_b: b.n(),
            nb_b: b.nb(),
        });
    }
    Ok(())
}

/// `n x PROBES` column-major block of random signs.
fn probes(n: usize) -> Vec<f64> {
    let mut x = Vec::with_capacity(n * PROBES);
    for p in 0..PROBES {
        x.extend((0..n).map(|r| random::sign(PROBE_SEED, p as u64, r as u64)));
    }
    x
}

/// `y[rows of tile i] += op(t) * x[rows of tile j]` on `n x PROBES` blocks.
#[allow(clippy::too_many_arguments)]
fn acc(y: &mut [f64], n: usize, nb: usize, i: usize, t: &Tile, op: Op, x: &[f64], j: usize) {
    let tv = MatRef::from_slice(t.as_slice(), nb, nb, nb);
    let xv = MatRef::from_slice(&x[j * nb..], nb, PROBES, n);
    let yv = MatMut::from_slice(&mut y[i * nb..], nb, PROBES, n);
    gemm_view(1.0, tv, op, xv, Op::N, 1.0, yv);
}

/// `t` in f64: borrowed when it already is (no copy in the f64 checks), widened exactly
/// otherwise.
fn wide<T: Scalar>(t: &Tile<T>) -> Cow<'_, Tile> {
    match (t as &dyn Any).downcast_ref::<Tile>() {
        Some(t) => Cow::Borrowed(t),
        None => Cow::Owned(Tile::from_fn(t.nb(), |r, c| t.get(r, c).to_f64())),
    }
}

/// The full symmetric tile (in f64) whose lower triangle is `t`'s.
fn symmetric_from_lower<T: Scalar>(t: &Tile<T>) -> Tile {
    Tile::from_fn(t.nb(), |r, c| {
        if r >= c { t.get(r, c) } else { t.get(c, r) }.to_f64()
    })
}

/// `t`'s lower triangle (diagonal included) in f64, zeros above.
fn lower_triangle<T: Scalar>(t: &Tile<T>) -> Tile {
    Tile::from_fn(
        t.nb(),
        |r, c| {
            if r >= c {
                t.get(r, c).to_f64()
            } else {
                0.0
            }
        },
    )
}

fn sum_sq(t: &Tile) -> f64 {
    t.as_slice().iter().map(|x| x * x).sum()
}

fn diff_norm2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// `sqrt(mean over probes of ||E x||^2) / scale`; a zero scale (zero matrices) returns the
/// absolute estimate rather than NaN.
fn relative(err_norm2: f64, scale: f64) -> f64 {
    let est = (err_norm2 / PROBES as f64).sqrt();
    if scale > 0.0 {
        est / scale
    } else {
        est
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::naive;
    // Constructors name no element type; these tests are about f64 matrices unless they
    // say `super::TiledMatrix::<f32>`.
    type TiledMatrix = super::TiledMatrix<f64>;

    /// Exact `||A - L L^T||_F / ||A||_F` by dense O(n^3) products, for small n.
    fn exact_cholesky_residual<T: Scalar>(
        a: &super::TiledMatrix<T>,
        l: &super::TiledMatrix<T>,
    ) -> f64 {
        let n = a.n();
        let (ad, ld) = (naive::symmetric_dense(a), naive::lower_dense(l));
        let mut num = 0.0;
        let mut den = 0.0;
        for c in 0..n {
            for r in 0..n {
                let llt: f64 = (0..n).map(|k| ld[r + k * n] * ld[c + k * n]).sum();
                num += (ad[r + c * n] - llt).powi(2);
                den += ad[r + c * n].powi(2);
            }
        }
        (num / den).sqrt()
    }

    fn dense_factor(a: &TiledMatrix) -> TiledMatrix {
        let l = naive::dense_cholesky(&naive::symmetric_dense(a), a.n());
        TiledMatrix::from_dense(&l, a.n(), a.nb()).unwrap()
    }

    #[test]
    fn exact_factor_passes() {
        let a = TiledMatrix::random_spd(48, 16, 1).unwrap();
        let l = dense_factor(&a);
        let r = cholesky_residual(&a, &l).unwrap();
        assert!(r < residual_tolerance(48), "residual {r}");
    }

    #[test]
    fn estimate_tracks_the_exact_residual() {
        let a = TiledMatrix::random_spd(48, 16, 2).unwrap();
        for (tile, scale) in [((1, 0), 1e-6), ((2, 2), 1e-3), ((2, 1), 1e-9)] {
            let mut l = dense_factor(&a);
            let t = l.tile_mut(tile.0, tile.1).unwrap();
            let v = t.get(3, 1);
            t.set(3, 1, v + scale);
            let est = cholesky_residual(&a, &l).unwrap();
            let exact = exact_cholesky_residual(&a, &l);
            assert!(
                est > exact / 3.0 && est < exact * 3.0,
                "tile {tile:?}: estimate {est} vs exact {exact}"
            );
            assert!(est > residual_tolerance(48));
        }
    }

    #[test]
    fn upper_garbage_in_diagonal_tiles_is_ignored() {
        let a = TiledMatrix::random_spd(32, 8, 3).unwrap();
        let mut l = dense_factor(&a);
        l.tile_mut(1, 1).unwrap().set(0, 5, 1e9);
        let mut a2 = a.clone();
        a2.tile_mut(2, 2).unwrap().set(1, 6, -1e9);
        assert!(cholesky_residual(&a2, &l).unwrap() < residual_tolerance(32));
    }

    #[test]
    fn shape_and_missing_tile_errors() {
        let a = TiledMatrix::random_spd(32, 8, 3).unwrap();
        let l = TiledMatrix::random_spd(32, 16, 3).unwrap();
        assert!(matches!(
            cholesky_residual(&a, &l),
            Err(KernelError::ShapeMismatch { .. })
        ));
        let mut l = dense_factor(&a);
        l.take(3, 1);
        let err = cholesky_residual(&a, &l).unwrap_err();
        assert!(
            matches!(err, KernelError::MissingTile { i: 3, j: 1, .. }),
            "{err}"
        );
        let g = TiledMatrix::random(32, 8, 1).unwrap();
        assert!(matches!(
            gemm_residual(1.0, &a, &g, 0.0, &g, &g),
            Err(KernelError::MissingTile { .. })
        ));
    }

    #[test]
    fn gemm_residual_detects_errors() {
        let (n, nb) = (30, 10);
        let a = TiledMatrix::random(n, nb, 1).unwrap();
        let b = TiledMatrix::random(n, nb, 2).unwrap();
        let c0 = TiledMatrix::random(n, nb, 3).unwrap();
        let want = naive::dense_gemm(0.5, &a.to_dense(), &b.to_dense(), -1.0, &c0.to_dense(), n);
        let c = TiledMatrix::from_dense(&want, n, nb).unwrap();
        let ok = gemm_residual(0.5, &a, &b, -1.0, &c0, &c).unwrap();
        assert!(ok < residual_tolerance(n), "{ok}");
        let mut bad = c.clone();
        let t = bad.tile_mut(2, 1).unwrap();
        t.set(0, 0, t.get(0, 0) + 1e-4);
        let r = gemm_residual(0.5, &a, &b, -1.0, &c0, &bad).unwrap();
        assert!(r > 1e-7, "{r}");
    }

    /// The f32 path: an f32 factor (the f64 dense factor rounded) passes the f32 tolerance
    /// and fails the f64 one (so the check really sees f32 rounding, widened exactly), and
    /// the estimate tracks the exact residual computed in f64 from the f32 data.
    #[test]
    fn f32_factor_is_checked_in_f64() {
        let a = super::TiledMatrix::<f32>::random_spd(48, 16, 4).unwrap();
        let l64 = naive::dense_cholesky(&naive::symmetric_dense(&a), 48);
        let l32: Vec<f32> = l64.iter().map(|&x| x as f32).collect();
        let l = super::TiledMatrix::<f32>::from_dense(&l32, 48, 16).unwrap();
        let est = cholesky_residual(&a, &l).unwrap();
        let exact = exact_cholesky_residual(&a, &l);
        assert!(est < residual_tolerance_for::<f32>(48), "{est}");
        assert!(
            est > residual_tolerance(48),
            "{est}: f32 rounding must be visible"
        );
        assert!(est > exact / 3.0 && est < exact * 3.0, "{est} vs {exact}");
        assert_eq!(
            residual_tolerance_for::<f32>(4096),
            30.0 * 4096.0 * 2f64.powi(-23)
        );
    }
}
