//! System BLAS/LAPACK backend (feature `blas`): CBLAS from OpenBLAS and LAPACKE.
//!
//! The declarations below are the few prototypes we call, copied by hand from `cblas.h` and
//! `lapacke.h` instead of pulling in a `-sys` crate: `blasint` and `lapack_int` are 32-bit
//! `int` on Debian's `libopenblas0-pthread` and `liblapacke` (an `ILP64` build would need
//! `i64` here). Linking: `-lopenblas -llapacke` (see the `#[link]` attributes);
//! `LAPACKE_dpotrf_work` calls the `dpotrf_` that `liblapack.so.3` provides, which the
//! Debian alternatives point at OpenBLAS's own LAPACK.
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
//! OpenBLAS picks its kernels from the CPU model at load time. 0.3.21 (Debian 12) does not
//! know Sapphire Rapids and falls back to its Haswell (AVX2) kernels; exporting
//! `OPENBLAS_CORETYPE=SkylakeX` before the process starts selects the AVX-512 ones (gemm
//! about 1.5x faster there, `OPENBLAS_VERBOSE=2` prints the choice). That can only be set
//! from outside: the library reads it in its constructor, before `main`.

use std::ffi::{c_char, c_int};
use std::sync::Once;

use crate::{KernelError, Tile};

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
    fn openblas_set_num_threads(num_threads: c_int);
    fn openblas_get_num_threads() -> c_int;
}

#[link(name = "lapacke")]
unsafe extern "C" {
    fn LAPACKE_dpotrf_work(layout: c_int, uplo: c_char, n: c_int, a: *mut f64, lda: c_int)
        -> c_int;
}

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
fn dim(t: &Tile) -> c_int {
    c_int::try_from(t.nb()).expect("tile order exceeds BLAS's 32-bit int")
}

pub(crate) fn potrf(a: &mut Tile) -> Result<(), KernelError> {
    init();
    let n = dim(a);
    if n == 0 {
        return Ok(());
    }
    // SAFETY: `a` holds n*n elements, column-major with leading dimension n. `_work` skips
    // LAPACKE's O(n^2) NaN pre-scan of the input (which would report NaN as a bad argument).
    let info = unsafe {
        LAPACKE_dpotrf_work(
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
        0 => match (0..a.nb()).find(|&j| a.get(j, j).is_nan() || a.get(j, j) <= 0.0) {
            None => Ok(()),
            Some(column) => Err(KernelError::NotPositiveDefinite { column }),
        },
        i if i > 0 => Err(KernelError::NotPositiveDefinite {
            column: (i - 1) as usize,
        }),
        i => Err(KernelError::Lapack {
            routine: "LAPACKE_dpotrf_work",
            info: i,
        }),
    }
}

pub(crate) fn trsm(l: &Tile, b: &mut Tile) {
    init();
    let n = dim(l);
    // SAFETY: both tiles are n x n column-major with ld = n (checked equal by the caller)
    // and cannot alias (`&` vs `&mut`).
    unsafe {
        cblas_dtrsm(
            COL_MAJOR,
            RIGHT,
            LOWER,
            TRANS,
            NON_UNIT,
            n,
            n,
            1.0,
            l.as_slice().as_ptr(),
            n,
            b.as_mut_slice().as_mut_ptr(),
            n,
        )
    }
}

pub(crate) fn syrk(a: &Tile, c: &mut Tile) {
    init();
    let n = dim(a);
    // SAFETY: as in `trsm`.
    unsafe {
        cblas_dsyrk(
            COL_MAJOR,
            LOWER,
            NO_TRANS,
            n,
            n,
            -1.0,
            a.as_slice().as_ptr(),
            n,
            1.0,
            c.as_mut_slice().as_mut_ptr(),
            n,
        )
    }
}

/// `c = alpha * a * op(b) + beta * c`, `op(b) = b^T` when `b_trans`.
pub(crate) fn gemm(alpha: f64, a: &Tile, b: &Tile, b_trans: bool, beta: f64, c: &mut Tile) {
    init();
    let n = dim(a);
    // SAFETY: as in `trsm`; `a` and `b` may be the same tile (both shared borrows).
    unsafe {
        cblas_dgemm(
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
