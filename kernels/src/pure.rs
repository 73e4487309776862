//! Pure-Rust backend: the `gemm` crate for the bulk of the flops, recursive blocking around
//! it for potrf, trsm and syrk.
//!
//! Each triangular kernel splits its problem in two halves until the pieces are at most
//! [`BASE`] wide, so all but a `BASE / nb` fraction of its flops run in `gemm` calls on
//! blocks of size `nb / 2, nb / 4, ...` (the recursive formulation of Gustavson, "Recursion
//! leads to automatic variable blocking for dense linear-algebra algorithms", IBM J. R&D
//! 1997; LAPACK's `dpotrf2` is the same recursion). For `nb = 256` and `BASE = 16`, 15/16
//! of trsm's flops, all of syrk's (its leaves call `gemm` too) and about 7/8 of potrf's go
//! through `gemm`.
//!
//! The leaves (`potrf_unblocked`, `trsm_unblocked`) are compiled per instruction set
//! (`simd.rs`) and work on fixed-size local copies, which is what lets the compiler
//! vectorise them; see their docs for the forms that did not vectorise.
//!
//! Like BLAS/LAPACK, the kernels read and write only the lower triangle of `potrf`'s and
//! `syrk`'s square operand and only the lower triangle of `trsm`'s `L`: the strictly upper
//! triangle of a diagonal tile keeps whatever it held.
//!
//! Every `gemm` call is single-threaded (`Parallelism::None`): the task runtime, not the
//! kernel, decides which core runs what.
//!
//! Everything is generic over the [`Scalar`] type and monomorphised for f64 and f32; the
//! `gemm` crate picks its f64 or f32 micro-kernels from the type.

// With `blas`, only `gemm_view` (used by the residual checks) and the views it needs are
// live in the library; the rest is still compiled and cross-checked against BLAS in tests.
#![cfg_attr(feature = "blas", allow(dead_code))]

use gemm_common::Parallelism;

use crate::simd::{madd, multiversion};
use crate::view::{MatMut, MatRef};
use crate::Scalar;

/// Width at and below which the recursion stops and a leaf loop takes over. Measured on
/// an AVX-512 core (nb = 128 and 256): 16 beats 32 by 5-15% on trsm and potrf, 64 loses
/// 10-35%, 8 loses again on small tiles (the `gemm` calls get too small to be efficient).
pub(crate) const BASE: usize = 16;

/// Whether an operand of [`gemm_view`] is used as is or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// `op(X) = X`.
    N,
    /// `op(X) = X^T`.
    T,
}

/// `dst = alpha * op(a) * op(b) + beta * dst`; `dst` is not read when `beta == 0` (BLAS
/// semantics: NaN in `dst` does not leak through a zero `beta`).
pub(crate) fn gemm_view<T: Scalar>(
    alpha: T,
    a: MatRef<'_, T>,
    ta: Op,
    b: MatRef<'_, T>,
    tb: Op,
    beta: T,
    mut dst: MatMut<'_, T>,
) {
    let (m, k) = match ta {
        Op::N => (a.rows(), a.cols()),
        Op::T => (a.cols(), a.rows()),
    };
    let (kb, n) = match tb {
        Op::N => (b.rows(), b.cols()),
        Op::T => (b.cols(), b.rows()),
    };
    assert!(
        m == dst.rows() && n == dst.cols() && k == kb,
        "gemm_view: op(a) is {m}x{k}, op(b) is {kb}x{n}, dst is {}x{}",
        dst.rows(),
        dst.cols()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // Nothing to multiply: dst = beta * dst, without reading dst when beta == 0.
        for j in 0..n {
            for x in dst.col_mut(j) {
                *x = if beta == T::ZERO { T::ZERO } else { beta * *x };
            }
        }
        return;
    }
    // (column stride, row stride) of op(X): transposing swaps them.
    let strides = |x: &MatRef<'_, T>, op: Op| match op {
        Op::N => (x.ld() as isize, 1isize),
        Op::T => (1isize, x.ld() as isize),
    };
    let (a_cs, a_rs) = strides(&a, ta);
    let (b_cs, b_rs) = strides(&b, tb);
    let dst_ld = dst.ld() as isize;
    // SAFETY: the three views satisfy the invariants of view.rs, so every element gemm
    // touches (m x k of op(a), k x n of op(b), m x n of dst, with the strides above) is
    // inside its allocation. `dst` is a `MatMut`, so no live `MatRef` (a or b) aliases it.
    // The gemm crate's `alpha` scales dst and its `beta` scales the product, hence the
    // swapped order below.
    unsafe {
        gemm_raw::<T>(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            dst_ld,
            1,
            beta != T::ZERO,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            beta,
            alpha,
        );
    }
}

/// The gemm crates' single-threaded kernel for `T` (gemm-f64's or gemm-f32's, picked at
/// compile time from the type), as the `gemm` facade crate would call it:
/// `dst = alpha·dst + beta·lhs·rhs` (`dst` read only when `read_dst`). Called directly
/// because the facade also builds the complex kernels, which no tile uses: about 32 s of
/// CPU in a fresh build.
///
/// # Safety
/// As `gemm::gemm`: every element the strides reach is inside its allocation, and `dst`
/// aliases neither operand.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_raw<T: Scalar>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_cs: isize,
    dst_rs: isize,
    read_dst: bool,
    lhs: *const T,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const T,
    rhs_cs: isize,
    rhs_rs: isize,
    alpha: T,
    beta: T,
) {
    use std::any::TypeId;
    // `Scalar` is sealed to f64 and f32, so exactly one branch matches, and the casts
    // below are between a type and itself.
    if TypeId::of::<T>() == TypeId::of::<f64>() {
        // SAFETY: T is f64 (checked above); the caller's contract is gemm's.
        unsafe {
            gemm_f64::gemm::f64::get_gemm_fn()(
                m,
                n,
                k,
                dst.cast(),
                dst_cs,
                dst_rs,
                read_dst,
                lhs.cast(),
                lhs_cs,
                lhs_rs,
                rhs.cast(),
                rhs_cs,
                rhs_rs,
                alpha.to_f64(),
                beta.to_f64(),
                false,
                false,
                false,
                Parallelism::None,
            )
        }
    } else if TypeId::of::<T>() == TypeId::of::<f32>() {
        // SAFETY: T is f32 (checked above), so the f64 round trip of alpha and beta is
        // exact; the caller's contract is gemm's.
        unsafe {
            gemm_f32::gemm::f32::get_gemm_fn()(
                m,
                n,
                k,
                dst.cast(),
                dst_cs,
                dst_rs,
                read_dst,
                lhs.cast(),
                lhs_cs,
                lhs_rs,
                rhs.cast(),
                rhs_cs,
                rhs_rs,
                alpha.to_f64() as f32,
                beta.to_f64() as f32,
                false,
                false,
                false,
                Parallelism::None,
            )
        }
    } else {
        unreachable!("Scalar is sealed to f64 and f32")
    }
}

/// Where to split a dimension of `n > BASE`: about half, rounded down to a multiple of 8
/// (one AVX-512 vector of f64, half of one of f32) so the `gemm` blocks stay aligned to
/// the micro-kernel.
fn split_point(n: usize) -> usize {
    let half = n / 2;
    if half >= 16 {
        half / 8 * 8
    } else {
        half
    }
}

/// In-place lower Cholesky of the `n x n` block `a`. On failure returns the 0-based column
/// (counted from the block's first column plus `offset`) whose pivot was not positive.
pub(crate) fn potrf<T: Scalar>(a: MatMut<'_, T>, offset: usize) -> Result<(), usize> {
    let n = a.rows();
    debug_assert_eq!(n, a.cols());
    if n <= BASE {
        let mut result = Ok(());
        potrf_unblocked(a, offset, &mut result);
        return result;
    }
    let n1 = split_point(n);
    // A = [A11 . ; A21 A22]  ->  L11 = chol(A11); L21 = A21 L11^-T;
    // A22 -= L21 L21^T; L22 = chol(A22).
    let (left, right) = a.split_cols(n1);
    let (mut a11, mut a21) = left.split_rows(n1);
    let (_a12, mut a22) = right.split_rows(n1);
    potrf(a11.rb_mut(), offset)?;
    trsm(a11.rb(), a21.rb_mut());
    syrk(a21.rb(), a22.rb_mut());
    potrf(a22, offset + n1)
}

multiversion!(
    /// Unblocked Cholesky of a block of at most `BASE` columns (see the body's docs).
    fn potrf_unblocked<T: Scalar>(a: MatMut<'_, T>, offset: usize, result: &mut Result<(), usize>) => potrf_unblocked_body
);

/// The leaf is left-looking (column `j` receives all updates from columns `k < j`, then
/// is scaled) and works on a copy in a fixed `BASE x BASE` array, zero above the block's
/// lower triangle and beyond `n`. Each update runs over a whole `BASE`-long column held in
/// a local array: constant trip counts compile to a few full-width vector FMAs and the
/// accumulator stays in registers. (Trimmed, right-looking updates left most of the leaf
/// scalar, and LLVM vectorised that form across columns with gathers: 7x slower at n = 32.)
/// The extra rows touched are rows `< j` of column `j`, the strict upper triangle, which the
/// lower-triangle computation never reads and which is never copied back; rows `>= n` stay
/// zero because every column they are updated with is zero there.
#[inline(always)]
fn potrf_unblocked_body<T: Scalar, const FMA: bool>(
    mut a: MatMut<'_, T>,
    offset: usize,
    result: &mut Result<(), usize>,
) {
    let n = a.rows();
    let mut w = [[T::ZERO; BASE]; BASE]; // w[j] is column j
    for j in 0..n {
        w[j][j..n].copy_from_slice(&a.col(j)[j..]);
    }
    *result = Ok(());
    for j in 0..n {
        let mut y: [T; BASE] = w[j];
        for x in &w[..j] {
            let f = -x[j];
            for i in 0..BASE {
                y[i] = madd::<T, FMA>(f, x[i], y[i]);
            }
        }
        let d = y[j];
        // As LAPACK: `ajj <= 0 .or. disnan(ajj)`.
        if d.is_nan() || d <= T::ZERO {
            *result = Err(offset + j);
            break;
        }
        let ljj = d.sqrt();
        let inv = T::ONE / ljj;
        for x in &mut y[j + 1..n] {
            *x *= inv;
        }
        y[j] = ljj;
        w[j] = y;
    }
    // As LAPACK: on failure, the columns before the failing one hold L and the rest keep
    // their input values; only the lower triangle is written back.
    for (j, col) in w.iter().enumerate().take(n) {
        a.col_mut(j)[j..].copy_from_slice(&col[j..n]);
    }
}

/// `b = b * L^-T` with `L` the lower triangle of the `n x n` block `l` (non-unit diagonal)
/// and `b` of size `m x n`.
pub(crate) fn trsm<T: Scalar>(l: MatRef<'_, T>, b: MatMut<'_, T>) {
    let n = l.rows();
    debug_assert_eq!(n, b.cols());
    if n <= BASE {
        return trsm_unblocked(l, b);
    }
    let n1 = split_point(n);
    let n2 = n - n1;
    // X [L11^T L21^T; 0 L22^T] = [B1 B2]  ->  X1 = B1 L11^-T; B2 -= X1 L21^T;
    // X2 = B2 L22^-T.
    let (mut b1, mut b2) = b.split_cols(n1);
    trsm(l.sub(0, 0, n1, n1), b1.rb_mut());
    gemm_view(
        -T::ONE,
        b1.rb(),
        Op::N,
        l.sub(n1, 0, n2, n1),
        Op::T,
        T::ONE,
        b2.rb_mut(),
    );
    trsm(l.sub(n1, n1, n2, n2), b2);
}

multiversion!(
    /// Column-by-column substitution for `n <= BASE`:
    /// `x_j = (b_j - sum_{k<j} x_k L[j,k]) / L[j,j]`.
    fn trsm_unblocked<T: Scalar>(l: MatRef<'_, T>, b: MatMut<'_, T>) => trsm_unblocked_body
);

/// Rows per strip in [`trsm_unblocked_body`]: a 32 x BASE strip is 4 KiB (f64), so it stays in L1
/// while each of its columns is solved.
const TRSM_STRIP: usize = 32;

/// Left-looking substitution over strips of `TRSM_STRIP` rows, copied into a fixed-size
/// local array: `x_j` is accumulated in registers from the finished columns `k < j`. Fixed
/// sizes and a local copy are what let the compiler vectorise it (on the strided views in
/// place, it could not rule out aliasing between `x_j` and the `x_k` and emitted scalar
/// code). A short last strip is zero-padded; its padding rows are computed and dropped.
#[inline(always)]
fn trsm_unblocked_body<T: Scalar, const FMA: bool>(l: MatRef<'_, T>, mut b: MatMut<'_, T>) {
    let n = l.rows();
    let m = b.rows();
    let mut lt = [[T::ZERO; BASE]; BASE]; // lt[j][k] = L[j, k]: row j of L, contiguous
    let mut inv_diag = [T::ZERO; BASE];
    for k in 0..n {
        let col = l.col(k);
        for j in k..n {
            lt[j][k] = col[j];
        }
        inv_diag[k] = T::ONE / col[k];
    }
    let mut strip = [[T::ZERO; TRSM_STRIP]; BASE]; // strip[j] = rows r0.. of column j
    let mut r0 = 0;
    while r0 < m {
        let rows = TRSM_STRIP.min(m - r0);
        for (j, s) in strip.iter_mut().enumerate().take(n) {
            s[..rows].copy_from_slice(&b.col(j)[r0..r0 + rows]);
            s[rows..].fill(T::ZERO);
        }
        for j in 0..n {
            let mut y: [T; TRSM_STRIP] = strip[j];
            for k in 0..j {
                let f = -lt[j][k];
                let x = &strip[k];
                for i in 0..TRSM_STRIP {
                    y[i] = madd::<T, FMA>(f, x[i], y[i]);
                }
            }
            let inv = inv_diag[j];
            for v in y.iter_mut() {
                *v *= inv;
            }
            strip[j] = y;
        }
        for (j, s) in strip.iter().enumerate().take(n) {
            b.col_mut(j)[r0..r0 + rows].copy_from_slice(&s[..rows]);
        }
        r0 += rows;
    }
}

/// Lower triangle of `c -= a a^T`, `a` of size `m x k`, `c` of size `m x m`.
pub(crate) fn syrk<T: Scalar>(a: MatRef<'_, T>, c: MatMut<'_, T>) {
    let m = c.rows();
    debug_assert_eq!(m, a.rows());
    if m <= BASE {
        return syrk_leaf(a, c);
    }
    let m1 = split_point(m);
    let m2 = m - m1;
    let k = a.cols();
    // [C11 . ; C21 C22] -= [A1; A2] [A1; A2]^T, lower part: C11 -= A1 A1^T (recurse),
    // C21 -= A2 A1^T (gemm), C22 -= A2 A2^T (recurse).
    let (a1, a2) = (a.sub(0, 0, m1, k), a.sub(m1, 0, m2, k));
    let (left, right) = c.split_cols(m1);
    let (c11, c21) = left.split_rows(m1);
    let (_c12, c22) = right.split_rows(m1);
    syrk(a1, c11);
    gemm_view(-T::ONE, a2, Op::N, a1, Op::T, T::ONE, c21);
    syrk(a2, c22);
}

/// Leaf of [`syrk`]: the full `m x m` product goes to a stack buffer through `gemm` (twice
/// the needed flops on a block that is a `BASE / nb` share of the whole, still faster than
/// a scalar loop), then only its lower triangle is subtracted from `c`, so `c`'s strictly
/// upper triangle is never written.
fn syrk_leaf<T: Scalar>(a: MatRef<'_, T>, mut c: MatMut<'_, T>) {
    let m = c.rows();
    let mut scratch = [T::ZERO; BASE * BASE];
    let s = &mut scratch[..m * m];
    gemm_view(
        T::ONE,
        a,
        Op::N,
        a,
        Op::T,
        T::ZERO,
        MatMut::from_slice(s, m, m, m),
    );
    for j in 0..m {
        let cj = c.col_mut(j);
        for (y, &x) in cj[j..].iter_mut().zip(&s[j * m + j..(j + 1) * m]) {
            *y -= x;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The kernels' results are checked against naive loops in `dense.rs`; here, that the
    //! leaves' baseline (no FMA) versions, which this machine's dispatch may never pick,
    //! agree with the dispatched ones, in both precisions.
    use super::*;
    use crate::testutil::{assert_close, random_tile, spd_tile};
    use crate::Tile;

    fn view_mut<T: Scalar>(t: &mut Tile<T>) -> MatMut<'_, T> {
        let nb = t.nb();
        MatMut::from_slice(t.as_mut_slice(), nb, nb, nb)
    }

    fn leaves_agree<T: Scalar>(tol: f64) {
        for nb in [1usize, 5, BASE] {
            let a = spd_tile::<T>(nb, 7);
            let (mut fast, mut plain) = (a.clone(), a.clone());
            let (mut r1, mut r2) = (Err(99), Err(99));
            potrf_unblocked(view_mut(&mut fast), 0, &mut r1);
            potrf_unblocked_body::<T, false>(view_mut(&mut plain), 0, &mut r2);
            assert_eq!((r1, r2), (Ok(()), Ok(())));
            assert_close(&plain, &fast, tol, "potrf leaf");

            let b = random_tile::<T>(nb, 8);
            let (mut x, mut y) = (b.clone(), b.clone());
            let l = MatRef::from_slice(fast.as_slice(), nb, nb, nb);
            trsm_unblocked(l, view_mut(&mut x));
            trsm_unblocked_body::<T, false>(l, view_mut(&mut y));
            assert_close(&y, &x, tol, "trsm leaf");
        }
    }

    #[test]
    fn baseline_leaves_match_dispatched_leaves() {
        leaves_agree::<f64>(1e-13);
        leaves_agree::<f32>(1e-5);
    }
}
