//! System BLAS/LAPACK backend (feature `blas`): CBLAS from OpenBLAS and LAPACKE.
//!
//! Each kernel is generic over [`Scalar`] and calls the `d` (f64) or `s` (f32) routine
//! through [`Routines`], implemented once per type; `Scalar`'s sealed supertrait requires
//! it, so every scalar type has its routines.
//!
//! The declarations below are the few prototypes we call, copied by hand from `cblas.h` and
//! `lapacke.h` instead of pulling in a `-sys` crate: `blasint` and `lapack_int` are 32-bit
//! `int` on Debian's `libopenblas0-pthread` and `liblapacke` (an `ILP64` build would need
//! `i64` here). Linking: `-lopenblas -llapacke` (see the `#[link]` attributes);
//! `LAPACKE_dpotrf_work` (`_spotrf_work`) calls the `dpotrf_` (`spotrf_`) that
//! `liblapack.so.3` provides, which the Debian alternatives point at OpenBLAS's own LAPACK.
//!
//! # One thread per call
//! OpenBLAS starts its own thread pool (one thread per core) unless told otherwise. Inside a
//! task runtime that would oversubscribe the cores the runtime already fills and move work
//! off the core the task was placed on. Either export `OPENBLAS_NUM_THREADS=1` before the
//! process starts, or rely on this module: every kernel first runs [`init`], which calls
//! `openblas_set_num_threads(1)` exactly once per process (a `std::sync::Once`, one atomic
//! load afterwards).
//!
//! # CPU detection
//! OpenBLAS picks its kernels from the CPU model at load time, unless `OPENBLAS_CORETYPE`
//! names a core (`OPENBLAS_VERBOSE=2` prints the choice). That can only be set from
//! outside: the library reads it in its constructor, before `main`. On the Sapphire Rapids
//! machine of BENCHMARKS.md, 0.3.21 (Debian 12) left to itself picks its Cooperlake
//! (AVX-512) kernels, but the machine's environment sets `OPENBLAS_CORETYPE=Haswell`
//! (AVX2). Single-core rates at nb = 256, Haswell vs Cooperlake: gemm 35 vs 52 GFlop/s in
//! f64 and 75 vs 124 in f32, but trsm 31 vs 21 (f64) and 70 vs 50 (f32), potrf 28 vs 23
//! (f64) and 53 vs 38 (f32): neither choice is best for every kernel, so measure both
//! (`env -u OPENBLAS_CORETYPE ...`).

use std::ffi::{c_char, c_int};
use std::sync::Once;

use crate::{KernelError, Scalar, Tile};

// CBLAS enum values (cblas.h).
const COL_MAJOR: c_int = 102;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;
const LOWER: c_int = 122;
const NON_UNIT: c_int = 131;
const RIGHT: c_int = 142;
// LAPACKE layout (lapacke.h).
const LAPACK_COL_MAJOR: c_int = 102;

#[link(name = "openblas")]
unsafe extern "C" {
    fn cblas_dgemm(
        order: c_int,
        trans_a: c_int,
        trans_b: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: f64,
        a: *const f64,
        lda: c_int,
        b: *const f64,
        ldb: c_int,
        beta: f64,
        c: *mut f64,
        ldc: c_int,
    );
    fn cblas_sgemm(
        order: c_int,
        trans_a: c_int,
        trans_b: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: f32,
        a: *const f32,
        lda: c_int,
        b: *const f32,
        ldb: c_int,
        beta: f32,
        c: *mut f32,
        ldc: c_int,
    );
    fn cblas_dsyrk(
        order: c_int,
        uplo: c_int,
        trans: c_int,
        n: c_int,
        k: c_int,
        alpha: f64,
        a: *const f64,
        lda: c_int,
        beta: f64,
        c: *mut f64,
        ldc: c_int,
    );
    fn cblas_ssyrk(
        order: c_int,
        uplo: c_int,
        trans: c_int,
        n: c_int,
        k: c_int,
        alpha: f32,
        a: *const f32,
        lda: c_int,
        beta: f32,
        c: *mut f32,
        ldc: c_int,
    );
    fn cblas_dtrsm(
        order: c_int,
        side: c_int,
        uplo: c_int,
        trans_a: c_int,
        diag: c_int,
        m: c_int,
        n: c_int,
        alpha: f64,
        a: *const f64,
        lda: c_int,
        b: *mut f64,
        ldb: c_int,
    );
    fn cblas_strsm(
        order: c_int,
        side: c_int,
        uplo: c_int,
        trans_a: c_int,
        diag: c_int,
        m: c_int,
        n: c_int,
        alpha: f32,
        a: *const f32,
        lda: c_int,
        b: *mut f32,
        ldb: c_int,
    );
    fn openblas_set_num_threads(num_threads: c_int);
    fn openblas_get_num_threads() -> c_int;
}

#[link(name = "lapacke")]
unsafe extern "C" {
    fn LAPACKE_dpotrf_work(layout: c_int, uplo: c_char, n: c_int, a: *mut f64, lda: c_int)
        -> c_int;
    fn LAPACKE_spotrf_work(layout: c_int, uplo: c_char, n: c_int, a: *mut f32, lda: c_int)
        -> c_int;
}

/// The CBLAS/LAPACKE routines of one scalar type, with the C prototypes' arguments.
///
/// # Safety
/// Callers uphold the C contract: pointers valid for the `(n, ld)` shapes given, and the
/// written operand not aliased by a read one.
#[allow(clippy::too_many_arguments, unreachable_pub)] // pub: bound of `Scalar`'s sealed supertrait
pub trait Routines: Sized {
    /// The LAPACKE routine's name, for errors.
    const POTRF: &'static str;
    /// `cblas_?gemm`.
    unsafe fn gemm(
        order: c_int,
        trans_a: c_int,
        trans_b: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: Self,
        a: *const Self,
        lda: c_int,
        b: *const Self,
        ldb: c_int,
        beta: Self,
        c: *mut Self,
        ldc: c_int,
    );
    /// `cblas_?syrk`.
    unsafe fn syrk(
        order: c_int,
        uplo: c_int,
        trans: c_int,
        n: c_int,
        k: c_int,
        alpha: Self,
        a: *const Self,
        lda: c_int,
        beta: Self,
        c: *mut Self,
        ldc: c_int,
    );
    /// `cblas_?trsm`.
    unsafe fn trsm(
        order: c_int,
        side: c_int,
        uplo: c_int,
        trans_a: c_int,
        diag: c_int,
        m: c_int,
        n: c_int,
        alpha: Self,
        a: *const Self,
        lda: c_int,
        b: *mut Self,
        ldb: c_int,
    );
    /// `LAPACKE_?potrf_work`.
    unsafe fn potrf(layout: c_int, uplo: c_char, n: c_int, a: *mut Self, lda: c_int) -> c_int;
}

macro_rules! routines {
    ($t:ty, $gemm:ident, $syrk:ident, $trsm:ident, $potrf:ident) => {
        impl Routines for $t {
            const POTRF: &'static str = stringify!($potrf);
            unsafe fn gemm(
                order: c_int,
                trans_a: c_int,
                trans_b: c_int,
                m: c_int,
                n: c_int,
                k: c_int,
                alpha: Self,
                a: *const Self,
                lda: c_int,
                b: *const Self,
                ldb: c_int,
                beta: Self,
                c: *mut Self,
                ldc: c_int,
            ) {
                // SAFETY: the caller's (see the trait).
                unsafe {
                    $gemm(
                        order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                    )
                }
            }
            unsafe fn syrk(
                order: c_int,
                uplo: c_int,
                trans: c_int,
                n: c_int,
                k: c_int,
                alpha: Self,
                a: *const Self,
                lda: c_int,
                beta: Self,
                c: *mut Self,
                ldc: c_int,
            ) {
                // SAFETY: the caller's (see the trait).
                unsafe { $syrk(order, uplo, trans, n, k, alpha, a, lda, beta, c, ldc) }
            }
            unsafe fn trsm(
                order: c_int,
                side: c_int,
                uplo: c_int,
                trans_a: c_int,
                diag: c_int,
                m: c_int,
                n: c_int,
                alpha: Self,
                a: *const Self,
                lda: c_int,
                b: *mut Self,
                ldb: c_int,
            ) {
                // SAFETY: the caller's (see the trait).
                unsafe {
                    $trsm(
                        order, side, uplo, trans_a, diag, m, n, alpha, a, lda, b, ldb,
                    )
                }
            }
            unsafe fn potrf(
                layout: c_int,
                uplo: c_char,
                n: c_int,
                a: *mut Self,
                lda: c_int,
            ) -> c_int {
                // SAFETY: the caller's (see the trait).
                unsafe { $potrf(layout, uplo, n, a, lda) }
            }
        }
    };
}

routines!(
    f64,
    cblas_dgemm,
    cblas_dsyrk,
    cblas_dtrsm,
    LAPACKE_dpotrf_work
);
routines!(
    f32,
    cblas_sgemm,
    cblas_ssyrk,
    cblas_strsm,
    LAPACKE_spotrf_work
);

static INIT: Once = Once::new();

/// Pins OpenBLAS to one thread per call (see the module docs). Idempotent and cheap.
pub(crate) fn init() {
    INIT.call_once(|| {
        // SAFETY: plain C call without pointers; OpenBLAS allows it at any time.
        unsafe { openblas_set_num_threads(1) }
    });
}

/// The number of threads OpenBLAS would use for one call (1 after [`init`]).
pub(crate) fn threads() -> usize {
    // SAFETY: plain C call without pointers.
    unsafe { openblas_get_num_threads() as usize }
}

/// `nb` as a BLAS integer. A tile with more than `i32::MAX` rows would hold 2^62 elements,
/// so this cannot fail for a tile that exists.
fn dim<T: Scalar>(t: &Tile<T>) -> c_int {
    c_int::try_from(t.nb()).expect("tile order exceeds BLAS's 32-bit int")
}

pub(crate) fn potrf<T: Scalar>(a: &mut Tile<T>) -> Result<(), KernelError> {
    init();
    let n = dim(a);
    if n == 0 {
        return Ok(());
    }
    // SAFETY: `a` holds n*n elements, column-major with leading dimension n. `_work` skips
    // LAPACKE's O(n^2) NaN pre-scan of the input (which would report NaN as a bad argument).
    let info = unsafe {
        T::potrf(
            LAPACK_COL_MAJOR,
            b'L' as c_char,
            n,
            a.as_mut_slice().as_mut_ptr(),
            n,
        )
    };
    match info {
        // OpenBLAS's own dpotrf tests `ajj <= 0` but not NaN, so a NaN pivot runs through
        // and leaves NaN on L's diagonal: the first non-positive-or-NaN diagonal entry is
        // the column the pure backend (and reference LAPACK) would name. O(nb).
        0 => match (0..a.nb()).find(|&j| a.get(j, j).is_nan() || a.get(j, j) <= T::ZERO) {
            None => Ok(()),
            Some(column) => Err(KernelError::NotPositiveDefinite { column }),
        },
        i if i > 0 => Err(KernelError::NotPositiveDefinite {
            column: (i - 1) as usize,
        }),
        i => Err(KernelError::Lapack {
            routine: T::POTRF,
            info: i,
        }),
    }
}

pub(crate) fn trsm<T: Scalar>(l: &Tile<T>, b: &mut Tile<T>) {
    init();
    let n = dim(l);
    // SAFETY: both tiles are n x n column-major with ld = n (checked equal by the caller)
    // and cannot alias (`&` vs `&mut`).
    unsafe {
        T::trsm(
            COL_MAJOR,
            RIGHT,
            LOWER,
            TRANS,
            NON_UNIT,
            n,
            n,
            T::ONE,
            l.as_slice().as_ptr(),
            n,
            b.as_mut_slice().as_mut_ptr(),
            n,
        )
    }
}

pub(crate) fn syrk<T: Scalar>(a: &Tile<T>, c: &mut Tile<T>) {
    init();
    let n = dim(a);
    // SAFETY: as in `trsm`.
    unsafe {
        T::syrk(
            COL_MAJOR,
            LOWER,
            NO_TRANS,
            n,
            n,
            -T::ONE,
            a.as_slice().as_ptr(),
            n,
            T::ONE,
            c.as_mut_slice().as_mut_ptr(),
            n,
        )
    }
}

/// `c = alpha * a * op(b) + beta * c`, `op(b) = b^T` when `b_trans`.
pub(crate) fn gemm<T: Scalar>(
    alpha: T,
    a: &Tile<T>,
    b: &Tile<T>,
    b_trans: bool,
    beta: T,
    c: &mut Tile<T>,
) {
    init();
    let n = dim(a);
    // SAFETY: as in `trsm`; `a` and `b` may be the same tile (both shared borrows).
    unsafe {
        T::gemm(
            COL_MAJOR,
            NO_TRANS,
            if b_trans { TRANS } else { NO_TRANS },
            n,
            n,
            n,
            alpha,
            a.as_slice().as_ptr(),
            n,
            b.as_slice().as_ptr(),
            n,
            beta,
            c.as_mut_slice().as_mut_ptr(),
            n,
        )
    }
}
