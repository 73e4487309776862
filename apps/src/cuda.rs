//! The apps' tile kernels on CUDA workers, through cuBLAS (cargo feature `cuda`): gemm,
//! syrk and trsm in f32 and f64, as StarPU's Cholesky example does (potrf stays on the
//! CPU). Each call is queued on the worker's stream with its cuBLAS handle; the runtime
//! synchronises the stream when the implementation returns, so that the task's end in
//! the trace is the end of the device work.
//!
//! Tiles are column-major `nb x nb` with leading dimension `nb`, as on the CPU.

use std::any::TypeId;

use taskwatt_kernels::Scalar;
use taskwatt_runtime::cuda::cudarc::cublas::sys as cb;
use taskwatt_runtime::cuda::cudarc::driver::result as cu;
use taskwatt_runtime::cuda::CudaTask;
use taskwatt_runtime::TaskCtx;

fn is_f64<T: Scalar>() -> bool {
    TypeId::of::<T>() == TypeId::of::<f64>()
}

/// The order of a square tile of `len` bytes.
fn order<T: Scalar>(len: usize) -> i32 {
    let elems = len / std::mem::size_of::<T>();
    let nb = (elems as f64).sqrt().round() as usize;
    assert_eq!(nb * nb, elems, "a tile of {len} bytes is not square");
    i32::try_from(nb).expect("a tile order fits cuBLAS's int")
}

fn ok(status: cb::cublasStatus_t, what: &str) {
    if status != cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        panic!("cuBLAS {what} failed: {status:?}");
    }
}

/// Buffer `i`'s device address and tile order, all tiles of one order.
fn tiles<T: Scalar, const N: usize>(ctx: &TaskCtx<'_>, bufs: [usize; N]) -> ([u64; N], i32) {
    let mut ptrs = [0u64; N];
    let mut nb = None;
    for (p, &i) in ptrs.iter_mut().zip(&bufs) {
        let (ptr, len) = ctx.device_ptr(i);
        let n = order::<T>(len);
        assert!(nb.is_none_or(|m| m == n), "tiles of different orders");
        nb = Some(n);
        *p = ptr;
    }
    (ptrs, nb.unwrap_or(0))
}

/// `c = alpha a op(b) + beta c` (`op(b) = b^T` if `b_t`), buffers `[a, b, c]`.
pub(super) fn gemm<T: Scalar>(
    ctx: &TaskCtx<'_>,
    cu: &CudaTask,
    bufs: [usize; 3],
    b_t: bool,
    alpha: f64,
    beta: f64,
) {
    let ([a, b, c], nb) = tiles::<T, 3>(ctx, bufs);
    let h = *cu.blas().handle();
    let (na, nbop) = (
        cb::cublasOperation_t::CUBLAS_OP_N,
        if b_t {
            cb::cublasOperation_t::CUBLAS_OP_T
        } else {
            cb::cublasOperation_t::CUBLAS_OP_N
        },
    );
    // SAFETY: the addresses are this task's buffers on this worker's device, made valid
    // by the runtime, each `nb * nb` elements; alpha and beta live through the call
    // (host pointer mode).
    let status = unsafe {
        if is_f64::<T>() {
            cb::cublasDgemm_v2(
                h, na, nbop, nb, nb, nb, &alpha, a as _, nb, b as _, nb, &beta, c as _, nb,
            )
        } else {
            let (alpha, beta) = (alpha as f32, beta as f32);
            cb::cublasSgemm_v2(
                h, na, nbop, nb, nb, nb, &alpha, a as _, nb, b as _, nb, &beta, c as _, nb,
            )
        }
    };
    ok(status, "gemm");
}

/// `c = c - a a^T` on the lower triangle, buffers `[a, c]`.
pub(super) fn syrk<T: Scalar>(ctx: &TaskCtx<'_>, cu: &CudaTask, bufs: [usize; 2]) {
    let ([a, c], nb) = tiles::<T, 2>(ctx, bufs);
    let h = *cu.blas().handle();
    let (lo, n) = (
        cb::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        cb::cublasOperation_t::CUBLAS_OP_N,
    );
    // SAFETY: as in `gemm`.
    let status = unsafe {
        if is_f64::<T>() {
            let (alpha, beta) = (-1.0f64, 1.0f64);
            cb::cublasDsyrk_v2(h, lo, n, nb, nb, &alpha, a as _, nb, &beta, c as _, nb)
        } else {
            let (alpha, beta) = (-1.0f32, 1.0f32);
            cb::cublasSsyrk_v2(h, lo, n, nb, nb, &alpha, a as _, nb, &beta, c as _, nb)
        }
    };
    ok(status, "syrk");
}

/// `b = b L^-T`, `L` the lower triangle of buffer `l` (non-unit diagonal), buffers
/// `[l, b]`.
pub(super) fn trsm<T: Scalar>(ctx: &TaskCtx<'_>, cu: &CudaTask, bufs: [usize; 2]) {
    let ([l, b], nb) = tiles::<T, 2>(ctx, bufs);
    let h = *cu.blas().handle();
    let (side, lo, t, diag) = (
        cb::cublasSideMode_t::CUBLAS_SIDE_RIGHT,
        cb::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        cb::cublasOperation_t::CUBLAS_OP_T,
        cb::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
    );
    // SAFETY: as in `gemm`.
    let status = unsafe {
        if is_f64::<T>() {
            let one = 1.0f64;
            cb::cublasDtrsm_v2(h, side, lo, t, diag, nb, nb, &one, l as _, nb, b as _, nb)
        } else {
            let one = 1.0f32;
            cb::cublasStrsm_v2(h, side, lo, t, diag, nb, nb, &one, l as _, nb, b as _, nb)
        }
    };
    ok(status, "trsm");
}

/// Copies buffer `src` over buffer `dst` on the device (a calibration task's restore).
pub(super) fn copy(ctx: &TaskCtx<'_>, cu: &CudaTask, dst: usize, src: usize) {
    let (d, dl) = ctx.device_ptr(dst);
    let (s, sl) = ctx.device_ptr(src);
    assert_eq!(dl, sl, "restore between buffers of different sizes");
    // SAFETY: both are this task's buffers on this device, `dl` bytes each.
    unsafe { cu::memcpy_dtod_async(d, s, dl, cu.stream().cu_stream()) }
        .unwrap_or_else(|e| panic!("CUDA copy failed: {e:?}"));
}
