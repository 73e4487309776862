//! The tile kernels of tiled Cholesky and tiled GEMM, with BLAS/LAPACK semantics
//! (column-major, lower triangle), dispatched to the backend chosen at compile time.
//!
//! | kernel      | computes                         | LAPACK/BLAS equivalent (`x` = `d` or `s`) |
//! |-------------|----------------------------------|-------------------------------------------|
//! | [`potrf`]   | `A = L L^T`, `L` over `A`'s lower | `xpotrf('L')`                             |
//! | [`trsm`]    | `B = B L^-T`                     | `xtrsm('R', 'L', 'T', 'N', alpha = 1)`    |
//! | [`syrk`]    | `C = C - A A^T` (lower)          | `xsyrk('L', 'N', alpha = -1, beta = 1)`   |
//! | [`gemm_nt`] | `C = C - A B^T`                  | `xgemm('N', 'T', alpha = -1, beta = 1)`   |
//! | [`gemm_nn`] | `C = alpha A B + beta C`         | `xgemm('N', 'N')`                         |
//!
//! Every kernel is generic over the element type ([`Scalar`]: `f64` or `f32`, which the
//! tiles fix; `d` and `s` routines respectively with `blas`). All operands are tiles of the
//! same order `nb`; a mismatch is a caller bug and panics. Each call runs on the calling
//! thread only.

use crate::{KernelError, Scalar, Tile};

#[cfg(not(feature = "blas"))]
use crate::{
    pure,
    pure::Op,
    view::{MatMut, MatRef},
};

/// Which backend this build uses: `"pure-rust (gemm crate)"` or
/// `"system BLAS (OpenBLAS)"` (feature `blas`).
pub fn backend() -> &'static str {
    if cfg!(feature = "blas") {
        "system BLAS (OpenBLAS)"
    } else {
        "pure-rust (gemm crate)"
    }
}

/// Prepares the backend for use from many threads at once, one thread per call.
///
/// With `blas`, this sets OpenBLAS to a single thread (`openblas_set_num_threads(1)`); every
/// kernel also does it on first use, so calling `init` is optional and only moves that
/// one-time cost out of the first task. With the pure-Rust backend it does nothing.
pub fn init() {
    #[cfg(feature = "blas")]
    crate::blas::init();
}

/// How many threads one kernel call may use: always 1 once [`init`] ran (with `blas`, what
/// OpenBLAS reports).
pub fn backend_threads() -> usize {
    #[cfg(feature = "blas")]
    {
        crate::blas::init();
        crate::blas::threads()
    }
    #[cfg(not(feature = "blas"))]
    {
        1
    }
}

fn same_order<T: Scalar>(kernel: &str, tiles: &[&Tile<T>]) -> usize {
    let nb = tiles[0].nb();
    for t in &tiles[1..] {
        assert_eq!(t.nb(), nb, "{kernel}: all tiles must have the same order");
    }
    nb
}

#[cfg(not(feature = "blas"))]
fn view<T: Scalar>(t: &Tile<T>) -> MatRef<'_, T> {
    MatRef::from_slice(t.as_slice(), t.nb(), t.nb(), t.nb())
}

#[cfg(not(feature = "blas"))]
fn view_mut<T: Scalar>(t: &mut Tile<T>) -> MatMut<'_, T> {
    let nb = t.nb();
    MatMut::from_slice(t.as_mut_slice(), nb, nb, nb)
}

/// Cholesky factorisation in place: on success the lower triangle of `a` holds `L` with
/// `L L^T = A`, where `A` is the symmetric matrix whose lower triangle `a` held.
///
/// Only the lower triangle (diagonal included) is read and written; the strictly upper
/// triangle keeps its old values, as with LAPACK.
///
/// # Errors
/// [`KernelError::NotPositiveDefinite`] with the 0-based column whose pivot was `<= 0` or
/// NaN. The tile is then partly overwritten (columns before `column` hold `L`).
pub fn potrf<T: Scalar>(a: &mut Tile<T>) -> Result<(), KernelError> {
    T::tile_potrf(a)
}

/// Triangular solve from the right: `b = b * L^-T`, `L` the lower triangle of `l` with its
/// diagonal (non-unit). The strictly upper triangle of `l` is not read.
///
/// This is the panel update of tiled Cholesky: `A[i][k] = A[i][k] * L[k][k]^-T`.
///
/// # Panics
/// If the tiles differ in order.
pub fn trsm<T: Scalar>(l: &Tile<T>, b: &mut Tile<T>) {
    T::tile_trsm(l, b)
}

/// Symmetric rank-`nb` update of the lower triangle: `c = c - a a^T`.
///
/// Only the lower triangle of `c` (diagonal included) is written; the strictly upper
/// triangle keeps its old values, as with BLAS.
///
/// # Panics
/// If the tiles differ in order.
pub fn syrk<T: Scalar>(a: &Tile<T>, c: &mut Tile<T>) {
    T::tile_syrk(a, c)
}

/// `c = c - a b^T`: the trailing update of tiled Cholesky (`A[i][j] -= L[i][k] L[j][k]^T`).
///
/// # Panics
/// If the tiles differ in order.
pub fn gemm_nt<T: Scalar>(a: &Tile<T>, b: &Tile<T>, c: &mut Tile<T>) {
    T::tile_gemm_nt(a, b, c)
}

/// `c = alpha a b + beta c`: the tile operation of tiled GEMM. With `beta == 0`, `c` is
/// not read (NaN or garbage in `c` does not propagate), as in BLAS.
///
/// # Panics
/// If the tiles differ in order.
pub fn gemm_nn<T: Scalar>(alpha: T, a: &Tile<T>, b: &Tile<T>, beta: T, c: &mut Tile<T>) {
    T::tile_gemm_nn(alpha, a, b, beta, c)
}

/// The kernels' bodies, generic; each precision's instance is compiled here, by
/// [`Kernels`](crate::scalar::sealed::Kernels)'s implementations below.
fn potrf_in<T: Scalar>(a: &mut Tile<T>) -> Result<(), KernelError> {
    if a.nb() == 0 {
        return Ok(());
    }
    #[cfg(feature = "blas")]
    {
        crate::blas::potrf(a)
    }
    #[cfg(not(feature = "blas"))]
    {
        pure::potrf(view_mut(a), 0).map_err(|column| KernelError::NotPositiveDefinite { column })
    }
}

fn trsm_in<T: Scalar>(l: &Tile<T>, b: &mut Tile<T>) {
    if same_order("trsm", &[l, b]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::trsm(l, b);
    #[cfg(not(feature = "blas"))]
    pure::trsm(view(l), view_mut(b));
}

fn syrk_in<T: Scalar>(a: &Tile<T>, c: &mut Tile<T>) {
    if same_order("syrk", &[a, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::syrk(a, c);
    #[cfg(not(feature = "blas"))]
    pure::syrk(view(a), view_mut(c));
}

fn gemm_nt_in<T: Scalar>(a: &Tile<T>, b: &Tile<T>, c: &mut Tile<T>) {
    if same_order("gemm_nt", &[a, b, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::gemm(-T::ONE, a, b, true, T::ONE, c);
    #[cfg(not(feature = "blas"))]
    pure::gemm_view(-T::ONE, view(a), Op::N, view(b), Op::T, T::ONE, view_mut(c));
}

fn gemm_nn_in<T: Scalar>(alpha: T, a: &Tile<T>, b: &Tile<T>, beta: T, c: &mut Tile<T>) {
    if same_order("gemm_nn", &[a, b, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::gemm(alpha, a, b, false, beta, c);
    #[cfg(not(feature = "blas"))]
    pure::gemm_view(alpha, view(a), Op::N, view(b), Op::N, beta, view_mut(c));
}

/// The entry points the public kernels call: one non-generic function per kernel and
/// precision, so each is compiled in this crate, at this crate's opt-level. A generic
/// public kernel would otherwise be instantiated by its caller, at the caller's: the
/// README's first command (`cargo run`, the dev profile) built the facade's apps at
/// opt-level 0 and ran the tiles' loops unoptimised (Cargo.toml, `[profile.dev]`).
macro_rules! compiled_kernels {
    ($t:ty) => {
        impl crate::scalar::sealed::Kernels for $t {
            fn tile_potrf(a: &mut Tile<$t>) -> Result<(), KernelError> {
                potrf_in(a)
            }
            fn tile_trsm(l: &Tile<$t>, b: &mut Tile<$t>) {
                trsm_in(l, b)
            }
            fn tile_syrk(a: &Tile<$t>, c: &mut Tile<$t>) {
                syrk_in(a, c)
            }
            fn tile_gemm_nt(a: &Tile<$t>, b: &Tile<$t>, c: &mut Tile<$t>) {
                gemm_nt_in(a, b, c)
            }
            fn tile_gemm_nn(alpha: $t, a: &Tile<$t>, b: &Tile<$t>, beta: $t, c: &mut Tile<$t>) {
                gemm_nn_in(alpha, a, b, beta, c)
            }
        }
    };
}

compiled_kernels!(f64);
compiled_kernels!(f32);

#[cfg(test)]
mod tests {
    //! Each kernel against a naive triple loop, on orders that exercise the leaves (1, 3,
    //! 17), one split level (64) and several (97, with odd halves), for whichever backend
    //! is compiled in, in both precisions. The reference is computed in f64 from the same
    //! (rounded) inputs, so an f32 kernel is compared with the exact result of its inputs.
    use super::*;
    use crate::testutil::{assert_close, lower_eq, naive, random_tile, spd_tile, upper_eq, widen};

    const SIZES: [usize; 5] = [1, 3, 17, 64, 97];

    /// Tolerance (relative to the largest reference element) of a kernel in `T` against
    /// the f64 reference: 1e-12 for f64 as before, 1e-5 (84 eps) for f32. Every f32 case
    /// passes at 1e-6 (8 eps) on both backends here; the margin is for other CPUs' kernels.
    fn tol<T: Scalar>() -> f64 {
        if T::EPSILON == f64::EPSILON {
            1e-12
        } else {
            1e-5
        }
    }

    fn potrf_matches_naive_and_keeps_upper<T: Scalar>() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = spd_tile::<T>(nb, 10 + s as u64);
            let mut got = a.clone();
            potrf(&mut got).unwrap();
            let want = naive::potrf(&widen(&a));
            let ctx = format!("potrf {} nb={nb}", T::NAME);
            lower_eq(&got, &want, tol::<T>(), &ctx);
            upper_eq(&got, &a, &ctx);
        }
    }

    #[test]
    fn potrf_matches_naive_and_keeps_upper_f64() {
        potrf_matches_naive_and_keeps_upper::<f64>();
    }

    #[test]
    fn potrf_matches_naive_and_keeps_upper_f32() {
        potrf_matches_naive_and_keeps_upper::<f32>();
    }

    fn potrf_reports_failing_column<T: Scalar>() {
        for nb in [1usize, 3, 17, 64, 97] {
            let bad = nb / 2;
            let mut a = spd_tile::<T>(nb, 3);
            // Make the leading (bad+1) minor indefinite: a huge negative diagonal entry
            // that no Schur complement of a diagonally dominant matrix can rescue.
            a.set(bad, bad, T::from_f64(-1.0e6));
            let err = potrf(&mut a).unwrap_err();
            assert_eq!(
                err,
                KernelError::NotPositiveDefinite { column: bad },
                "{} nb={nb}",
                T::NAME
            );
            assert!(err.to_string().contains(&format!("column {bad}")));
        }
        let mut a = spd_tile::<T>(5, 4);
        a.set(2, 2, T::from_f64(f64::NAN));
        assert_eq!(
            potrf(&mut a),
            Err(KernelError::NotPositiveDefinite { column: 2 }),
            "{} NaN pivot",
            T::NAME
        );
    }

    #[test]
    fn potrf_reports_failing_column_and_nan_pivot() {
        potrf_reports_failing_column::<f64>();
        potrf_reports_failing_column::<f32>();
    }

    fn trsm_matches_naive<T: Scalar>() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let mut l = spd_tile::<T>(nb, 20 + s as u64);
            potrf(&mut l).unwrap(); // a well-conditioned L, with garbage above the diagonal
            let b = random_tile::<T>(nb, 30 + s as u64);
            let mut got = b.clone();
            trsm(&l, &mut got);
            let want = naive::trsm(&widen(&l), &widen(&b));
            assert_close(
                &got,
                &want,
                tol::<T>(),
                &format!("trsm {} nb={nb}", T::NAME),
            );
        }
    }

    #[test]
    fn trsm_matches_naive_both_precisions() {
        trsm_matches_naive::<f64>();
        trsm_matches_naive::<f32>();
    }

    fn syrk_matches_naive_and_keeps_upper<T: Scalar>() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile::<T>(nb, 40 + s as u64);
            let c = random_tile::<T>(nb, 50 + s as u64);
            let mut got = c.clone();
            syrk(&a, &mut got);
            let want = naive::gemm(-1.0, &widen(&a), &widen(&a), true, 1.0, &widen(&c));
            let ctx = format!("syrk {} nb={nb}", T::NAME);
            lower_eq(&got, &want, tol::<T>(), &ctx);
            upper_eq(&got, &c, &ctx);
        }
    }

    #[test]
    fn syrk_matches_naive_and_keeps_upper_both_precisions() {
        syrk_matches_naive_and_keeps_upper::<f64>();
        syrk_matches_naive_and_keeps_upper::<f32>();
    }

    fn gemm_nt_matches_naive<T: Scalar>() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile::<T>(nb, 60 + s as u64);
            let b = random_tile::<T>(nb, 70 + s as u64);
            let c = random_tile::<T>(nb, 80 + s as u64);
            let mut got = c.clone();
            gemm_nt(&a, &b, &mut got);
            assert_close(
                &got,
                &naive::gemm(-1.0, &widen(&a), &widen(&b), true, 1.0, &widen(&c)),
                tol::<T>(),
                &format!("gemm_nt {} nb={nb}", T::NAME),
            );
        }
    }

    #[test]
    fn gemm_nt_matches_naive_both_precisions() {
        gemm_nt_matches_naive::<f64>();
        gemm_nt_matches_naive::<f32>();
    }

    fn gemm_nn_matches_naive<T: Scalar>() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile::<T>(nb, 90 + s as u64);
            let b = random_tile::<T>(nb, 100 + s as u64);
            let c = random_tile::<T>(nb, 110 + s as u64);
            let mut got = c.clone();
            gemm_nn(T::from_f64(0.5), &a, &b, T::from_f64(-2.0), &mut got);
            assert_close(
                &got,
                &naive::gemm(0.5, &widen(&a), &widen(&b), false, -2.0, &widen(&c)),
                tol::<T>(),
                &format!("gemm_nn {} nb={nb}", T::NAME),
            );
        }
        // beta == 0: c is not read, NaN does not propagate.
        let a = random_tile::<T>(17, 1);
        let b = random_tile::<T>(17, 2);
        let mut c = Tile::from_fn(17, |_, _| T::from_f64(f64::NAN));
        gemm_nn(T::ONE, &a, &b, T::ZERO, &mut c);
        assert_close(
            &c,
            &naive::gemm(1.0, &widen(&a), &widen(&b), false, 0.0, &Tile::zeros(17)),
            tol::<T>(),
            &format!("gemm_nn {} beta=0", T::NAME),
        );
    }

    #[test]
    fn gemm_nn_matches_naive_both_precisions() {
        gemm_nn_matches_naive::<f64>();
        gemm_nn_matches_naive::<f32>();
    }

    fn empty_tiles_are_a_no_op<T: Scalar>() {
        let mut e = Tile::<T>::zeros(0);
        potrf(&mut e).unwrap();
        trsm(&Tile::zeros(0), &mut e);
        syrk(&Tile::zeros(0), &mut e);
        gemm_nt(&Tile::zeros(0), &Tile::zeros(0), &mut e);
        gemm_nn(T::ONE, &Tile::zeros(0), &Tile::zeros(0), T::ONE, &mut e);
    }

    #[test]
    fn empty_tiles_are_a_no_op_both_precisions() {
        empty_tiles_are_a_no_op::<f64>();
        empty_tiles_are_a_no_op::<f32>();
    }

    #[test]
    #[should_panic(expected = "same order")]
    fn mismatched_orders_panic() {
        gemm_nt(&Tile::<f32>::zeros(3), &Tile::zeros(4), &mut Tile::zeros(3));
    }

    /// With `blas`, the pure-Rust kernels are still compiled: check both backends agree.
    #[cfg(feature = "blas")]
    fn pure_backend_agrees_with_blas<T: Scalar>() {
        use crate::pure::{self, Op};
        use crate::view::{MatMut, MatRef};
        fn v<T: Scalar>(t: &Tile<T>) -> MatRef<'_, T> {
            MatRef::from_slice(t.as_slice(), t.nb(), t.nb(), t.nb())
        }
        fn vm<T: Scalar>(t: &mut Tile<T>) -> MatMut<'_, T> {
            let nb = t.nb();
            MatMut::from_slice(t.as_mut_slice(), nb, nb, nb)
        }
        let tol = tol::<T>();
        for nb in [17usize, 64, 97] {
            let a = spd_tile::<T>(nb, 1);
            let (mut p, mut q) = (a.clone(), a.clone());
            potrf(&mut p).unwrap();
            pure::potrf(vm(&mut q), 0).unwrap();
            assert_close(&q, &p, tol, "potrf");
            let b = random_tile::<T>(nb, 2);
            let (mut x, mut y) = (b.clone(), b.clone());
            trsm(&p, &mut x);
            pure::trsm(v(&p), vm(&mut y));
            assert_close(&y, &x, tol, "trsm");
            let (mut x, mut y) = (b.clone(), b.clone());
            syrk(&a, &mut x);
            pure::syrk(v(&a), vm(&mut y));
            assert_close(&y, &x, tol, "syrk");
            let (mut x, mut y) = (b.clone(), b.clone());
            gemm_nt(&a, &p, &mut x);
            pure::gemm_view(-T::ONE, v(&a), Op::N, v(&p), Op::T, T::ONE, vm(&mut y));
            assert_close(&y, &x, tol, "gemm_nt");
        }
    }

    #[cfg(feature = "blas")]
    #[test]
    fn pure_backend_agrees_with_blas_both_precisions() {
        pure_backend_agrees_with_blas::<f64>();
        pure_backend_agrees_with_blas::<f32>();
    }

    #[test]
    fn backend_is_named_and_single_threaded() {
        init();
        assert_eq!(backend_threads(), 1);
        let want = if cfg!(feature = "blas") {
            "system BLAS (OpenBLAS)"
        } else {
            "pure-rust (gemm crate)"
        };
        assert_eq!(backend(), want);
    }
}
