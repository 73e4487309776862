//! The tile kernels of tiled Cholesky and tiled GEMM, with BLAS/LAPACK semantics
//! (column-major, lower triangle), dispatched to the backend chosen at compile time.
//!
//! | kernel      | computes                         | LAPACK/BLAS equivalent                  |
//! |-------------|----------------------------------|-----------------------------------------|
//! | [`potrf`]   | `A = L L^T`, `L` over `A`'s lower | `dpotrf('L')`                           |
//! | [`trsm`]    | `B = B L^-T`                     | `dtrsm('R', 'L', 'T', 'N', alpha = 1)`  |
//! | [`syrk`]    | `C = C - A A^T` (lower)          | `dsyrk('L', 'N', alpha = -1, beta = 1)` |
//! | [`gemm_nt`] | `C = C - A B^T`                  | `dgemm('N', 'T', alpha = -1, beta = 1)` |
//! | [`gemm_nn`] | `C = alpha A B + beta C`         | `dgemm('N', 'N')`                       |
//!
//! All operands are tiles of the same order `nb`; a mismatch is a caller bug and panics.
//! Each call runs on the calling thread only.

use crate::{KernelError, Tile};

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

fn same_order(kernel: &str, tiles: &[&Tile]) -> usize {
    let nb = tiles[0].nb();
    for t in &tiles[1..] {
        assert_eq!(t.nb(), nb, "{kernel}: all tiles must have the same order");
    }
    nb
}

#[cfg(not(feature = "blas"))]
fn view(t: &Tile) -> MatRef<'_> {
    MatRef::from_slice(t.as_slice(), t.nb(), t.nb(), t.nb())
}

#[cfg(not(feature = "blas"))]
fn view_mut(t: &mut Tile) -> MatMut<'_> {
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
pub fn potrf(a: &mut Tile) -> Result<(), KernelError> {
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

/// Triangular solve from the right: `b = b * L^-T`, `L` the lower triangle of `l` with its
/// diagonal (non-unit). The strictly upper triangle of `l` is not read.
///
/// This is the panel update of tiled Cholesky: `A[i][k] = A[i][k] * L[k][k]^-T`.
///
/// # Panics
/// If the tiles differ in order.
pub fn trsm(l: &Tile, b: &mut Tile) {
    if same_order("trsm", &[l, b]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::trsm(l, b);
    #[cfg(not(feature = "blas"))]
    pure::trsm(view(l), view_mut(b));
}

/// Symmetric rank-`nb` update of the lower triangle: `c = c - a a^T`.
///
/// Only the lower triangle of `c` (diagonal included) is written; the strictly upper
/// triangle keeps its old values, as with BLAS.
///
/// # Panics
/// If the tiles differ in order.
pub fn syrk(a: &Tile, c: &mut Tile) {
    if same_order("syrk", &[a, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::syrk(a, c);
    #[cfg(not(feature = "blas"))]
    pure::syrk(view(a), view_mut(c));
}

/// `c = c - a b^T`: the trailing update of tiled Cholesky (`A[i][j] -= L[i][k] L[j][k]^T`).
///
/// # Panics
/// If the tiles differ in order.
pub fn gemm_nt(a: &Tile, b: &Tile, c: &mut Tile) {
    if same_order("gemm_nt", &[a, b, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::gemm(-1.0, a, b, true, 1.0, c);
    #[cfg(not(feature = "blas"))]
    pure::gemm_view(-1.0, view(a), Op::N, view(b), Op::T, 1.0, view_mut(c));
}

/// `c = alpha a b + beta c`: the tile operation of tiled GEMM. With `beta == 0`, `c` is
/// not read (NaN or garbage in `c` does not propagate), as in BLAS.
///
/// # Panics
/// If the tiles differ in order.
pub fn gemm_nn(alpha: f64, a: &Tile, b: &Tile, beta: f64, c: &mut Tile) {
    if same_order("gemm_nn", &[a, b, c]) == 0 {
        return;
    }
    #[cfg(feature = "blas")]
    crate::blas::gemm(alpha, a, b, false, beta, c);
    #[cfg(not(feature = "blas"))]
    pure::gemm_view(alpha, view(a), Op::N, view(b), Op::N, beta, view_mut(c));
}

#[cfg(test)]
mod tests {
    //! Each kernel against a naive triple loop, on orders that exercise the leaves (1, 3,
    //! 17), one split level (64) and several (97, with odd halves), for whichever backend
    //! is compiled in.
    use super::*;
    use crate::testutil::{assert_close, lower_eq, naive, random_tile, spd_tile, upper_eq};

    const SIZES: [usize; 5] = [1, 3, 17, 64, 97];

    #[test]
    fn potrf_matches_naive_and_keeps_upper() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = spd_tile(nb, 10 + s as u64);
            let mut got = a.clone();
            potrf(&mut got).unwrap();
            let want = naive::potrf(&a);
            lower_eq(&got, &want, 1e-12, &format!("potrf nb={nb}"));
            upper_eq(&got, &a, &format!("potrf nb={nb} upper"));
        }
    }

    #[test]
    fn potrf_reports_failing_column() {
        for nb in [1usize, 3, 17, 64, 97] {
            let bad = nb / 2;
            let mut a = spd_tile(nb, 3);
            // Make the leading (bad+1) minor indefinite: a huge negative diagonal entry
            // that no Schur complement of a diagonally dominant matrix can rescue.
            a.set(bad, bad, -1.0e6);
            let err = potrf(&mut a).unwrap_err();
            assert_eq!(
                err,
                KernelError::NotPositiveDefinite { column: bad },
                "nb={nb}"
            );
            assert!(err.to_string().contains(&format!("column {bad}")));
        }
    }

    #[test]
    fn potrf_reports_nan_pivot() {
        let mut a = spd_tile(5, 4);
        a.set(2, 2, f64::NAN);
        assert_eq!(
            potrf(&mut a),
            Err(KernelError::NotPositiveDefinite { column: 2 })
        );
    }

    #[test]
    fn trsm_matches_naive() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let mut l = spd_tile(nb, 20 + s as u64);
            potrf(&mut l).unwrap(); // a well-conditioned L, with garbage above the diagonal
            let b = random_tile(nb, 30 + s as u64);
            let mut got = b.clone();
            trsm(&l, &mut got);
            let want = naive::trsm(&l, &b);
            assert_close(&got, &want, 1e-12, &format!("trsm nb={nb}"));
        }
    }

    #[test]
    fn syrk_matches_naive_and_keeps_upper() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile(nb, 40 + s as u64);
            let c = random_tile(nb, 50 + s as u64);
            let mut got = c.clone();
            syrk(&a, &mut got);
            let want = naive::gemm(-1.0, &a, &a, true, 1.0, &c);
            lower_eq(&got, &want, 1e-12, &format!("syrk nb={nb}"));
            upper_eq(&got, &c, &format!("syrk nb={nb} upper"));
        }
    }

    #[test]
    fn gemm_nt_matches_naive() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile(nb, 60 + s as u64);
            let b = random_tile(nb, 70 + s as u64);
            let c = random_tile(nb, 80 + s as u64);
            let mut got = c.clone();
            gemm_nt(&a, &b, &mut got);
            assert_close(
                &got,
                &naive::gemm(-1.0, &a, &b, true, 1.0, &c),
                1e-12,
                &format!("gemm_nt nb={nb}"),
            );
        }
    }

    #[test]
    fn gemm_nn_matches_naive() {
        for (s, &nb) in SIZES.iter().enumerate() {
            let a = random_tile(nb, 90 + s as u64);
            let b = random_tile(nb, 100 + s as u64);
            let c = random_tile(nb, 110 + s as u64);
            let mut got = c.clone();
            gemm_nn(0.5, &a, &b, -2.0, &mut got);
            assert_close(
                &got,
                &naive::gemm(0.5, &a, &b, false, -2.0, &c),
                1e-12,
                &format!("gemm_nn nb={nb}"),
            );
        }
    }

    #[test]
    fn gemm_nn_with_zero_beta_ignores_c() {
        let a = random_tile(17, 1);
        let b = random_tile(17, 2);
        let mut c = Tile::from_fn(17, |_, _| f64::NAN);
        gemm_nn(1.0, &a, &b, 0.0, &mut c);
        assert_close(
            &c,
            &naive::gemm(1.0, &a, &b, false, 0.0, &Tile::zeros(17)),
            1e-12,
            "beta=0",
        );
    }

    #[test]
    fn empty_tiles_are_a_no_op() {
        let mut e = Tile::zeros(0);
        potrf(&mut e).unwrap();
        trsm(&Tile::zeros(0), &mut e);
        syrk(&Tile::zeros(0), &mut e);
        gemm_nt(&Tile::zeros(0), &Tile::zeros(0), &mut e);
        gemm_nn(1.0, &Tile::zeros(0), &Tile::zeros(0), 1.0, &mut e);
    }

    #[test]
    #[should_panic(expected = "same order")]
    fn mismatched_orders_panic() {
        gemm_nt(&Tile::zeros(3), &Tile::zeros(4), &mut Tile::zeros(3));
    }

    /// With `blas`, the pure-Rust kernels are still compiled: check both backends agree.
    #[cfg(feature = "blas")]
    #[test]
    fn pure_backend_agrees_with_blas() {
        use crate::pure::{self, Op};
        use crate::view::{MatMut, MatRef};
        fn v(t: &Tile) -> MatRef<'_> {
            MatRef::from_slice(t.as_slice(), t.nb(), t.nb(), t.nb())
        }
        fn vm(t: &mut Tile) -> MatMut<'_> {
            let nb = t.nb();
            MatMut::from_slice(t.as_mut_slice(), nb, nb, nb)
        }
        for nb in [17usize, 64, 97] {
            let a = spd_tile(nb, 1);
            let (mut p, mut q) = (a.clone(), a.clone());
            potrf(&mut p).unwrap();
            pure::potrf(vm(&mut q), 0).unwrap();
            assert_close(&q, &p, 1e-12, "potrf");
            let b = random_tile(nb, 2);
            let (mut x, mut y) = (b.clone(), b.clone());
            trsm(&p, &mut x);
            pure::trsm(v(&p), vm(&mut y));
            assert_close(&y, &x, 1e-12, "trsm");
            let (mut x, mut y) = (b.clone(), b.clone());
            syrk(&a, &mut x);
            pure::syrk(v(&a), vm(&mut y));
            assert_close(&y, &x, 1e-12, "syrk");
            let (mut x, mut y) = (b.clone(), b.clone());
            gemm_nt(&a, &p, &mut x);
            pure::gemm_view(-1.0, v(&a), Op::N, v(&p), Op::T, 1.0, vm(&mut y));
            assert_close(&y, &x, 1e-12, "gemm_nt");
        }
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
