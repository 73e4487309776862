//! The CUDA backend on a real GPU (cargo feature `cuda`). Where no driver, device or
//! cuBLAS can be loaded, each test checks the error `build` gives and prints why it
//! skipped the rest; the device part runs where one is (`cargo test -p taskwatt-runtime
//! --features cuda --test cuda`).
#![cfg(feature = "cuda")]

use taskwatt_runtime::cuda::cudarc::cublas::sys as cb;
use taskwatt_runtime::cuda::{cublas_present, device_count};
use taskwatt_runtime::traces::TraceSink;
use taskwatt_runtime::{Codelet, GpuBackend, Runtime, RuntimeError, Task, TaskCtx};

/// Whether a CUDA device and cuBLAS are here; if not, checks that `build` says so.
fn cuda_here(test: &str) -> bool {
    let why = match device_count() {
        Ok(0) => "no CUDA device".to_string(),
        Ok(_) if !cublas_present() => "cuBLAS cannot be loaded".to_string(),
        Ok(_) => return true,
        Err(e) => e,
    };
    match Runtime::builder()
        .workers(1)
        .gpus(1, GpuBackend::Cuda)
        .build()
    {
        Err(RuntimeError::Device { backend, message }) => {
            assert_eq!(backend, "cuda");
            assert!(!message.is_empty());
        }
        Err(e) => panic!("expected a Device error, got {e}"),
        Ok(_) => panic!("a CUDA runtime was built where {why}"),
    }
    eprintln!("{test}: skipped on this machine: {why}");
    false
}

/// `x *= alpha` on the device with cuBLAS (f64).
fn dscal(ctx: &TaskCtx<'_>, alpha: f64) {
    let cu = ctx.cuda().expect("a CUDA worker");
    let (ptr, len) = ctx.device_ptr(0);
    // SAFETY: buffer 0 on this device, `len` bytes of f64.
    let s =
        unsafe { cb::cublasDscal_v2(*cu.blas().handle(), (len / 8) as i32, &alpha, ptr as _, 1) };
    assert_eq!(s, cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
}

#[test]
fn data_goes_to_the_gpu_and_back_through_tasks_of_both_architectures() {
    if !cuda_here("data_goes_to_the_gpu_and_back") {
        return;
    }
    // Every way host memory takes part in copies (the default is `register`).
    for mode in ["register", "staging", "pageable"] {
        std::env::set_var(taskwatt_runtime::cuda::STAGING_ENV, mode);
        round_trip();
    }
    std::env::remove_var(taskwatt_runtime::cuda::STAGING_ENV);
}

fn round_trip() {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(2)
        .gpus(1, GpuBackend::Cuda)
        .trace(sink)
        .build()
        .unwrap();
    let double = Codelet::new("double").gpu(|ctx| dscal(ctx, 2.0));
    // Replaces the vector (a new allocation): the next copy to the device must pin the
    // new memory, not the old.
    let plus1 = Codelet::new("plus1").cpu(|ctx| {
        let v = ctx.rw::<Vec<f64>>(0);
        *v = v.iter().map(|x| x + 1.0).collect();
    });
    let n = 1 << 20;
    let v = rt.register_device((0..n).map(|i| i as f64).collect::<Vec<f64>>());
    // GPU, CPU, GPU, GPU: three copies to the device, one back, one at the end.
    for cl in [&double, &plus1, &double, &double] {
        rt.submit(Task::new(cl).rw(&v)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(rt.acquire(&v).unwrap()[3], ((3.0 * 2.0) + 1.0) * 4.0);
    let stats = rt.stats();
    assert!(stats.transfers >= 4, "{stats:?}");
    let out = rt.unregister(v).unwrap();
    for (i, x) in out.iter().enumerate() {
        assert_eq!(*x, (i as f64 * 2.0 + 1.0) * 4.0, "element {i}");
    }
    drop(rt);
    let trace = memory.into_trace().unwrap();
    let gpu_tasks = trace
        .tasks()
        .filter(|(t, _)| t.arch == taskwatt_runtime::traces::Arch::Gpu)
        .count();
    assert_eq!(gpu_tasks, 3);
    assert!(trace
        .transfers
        .iter()
        .any(|t| t.dst == 1 && t.bytes == 8 << 20));
}

#[test]
fn a_codelet_with_only_a_cpu_implementation_stays_on_the_cpu() {
    if !cuda_here("cpu_only_codelet") {
        return;
    }
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .gpus(1, GpuBackend::Cuda)
        .policy("eager")
        .trace(sink)
        .build()
        .unwrap();
    let inc = Codelet::new("inc").cpu(|ctx| ctx.rw::<Vec<u32>>(0)[0] += 1);
    let v = rt.register_device(vec![0u32; 16]);
    for _ in 0..64 {
        rt.submit(Task::new(&inc).rw(&v)).unwrap();
    }
    assert_eq!(rt.unregister(v).unwrap()[0], 64);
    drop(rt);
    let trace = memory.into_trace().unwrap();
    assert!(trace
        .tasks()
        .all(|(t, _)| t.arch == taskwatt_runtime::traces::Arch::Cpu));
}

#[test]
fn a_gpu_only_codelet_on_data_without_a_byte_view_is_refused() {
    if !cuda_here("gpu_only_without_bytes") {
        return;
    }
    let rt = Runtime::builder()
        .workers(1)
        .gpus(1, GpuBackend::Cuda)
        .build()
        .unwrap();
    let g = Codelet::new("g").gpu(|_| {});
    // Clone-only registration: emulated devices can hold it, CUDA cannot.
    let v = rt.register_replicated(vec![0u8; 4]);
    match rt.submit(Task::new(&g).rw(&v)) {
        Err(RuntimeError::NotReplicated { .. }) => {}
        other => panic!("expected NotReplicated, got {other:?}"),
    }
}

/// cuBLAS's own dgemm rate on device 0 (n = `TASKWATT_DGEMM_N`, default 8192): the
/// yardstick `scripts/cuda-checks.sh` divides Cholesky's and GEMM's GFlop/s by, measured in
/// the same call (issue 33's bar: Cholesky n >= 32768 at 50 % of it or more).
#[test]
fn cublas_dgemm_rate_the_yardstick() {
    use taskwatt_runtime::cuda::cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
    use taskwatt_runtime::cuda::cudarc::driver::CudaContext;
    if !cuda_here("cublas_dgemm_rate") {
        return;
    }
    let n: usize = std::env::var("TASKWATT_DGEMM_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8192);
    let ctx = CudaContext::new(0).expect("device 0");
    let stream = ctx.default_stream();
    let a = stream.alloc_zeros::<f64>(n * n).expect("A");
    let b = stream.alloc_zeros::<f64>(n * n).expect("B");
    let mut c = stream.alloc_zeros::<f64>(n * n).expect("C");
    let blas = CudaBlas::new(stream.clone()).expect("cuBLAS");
    let op = cb::cublasOperation_t::CUBLAS_OP_N;
    let cfg = GemmConfig {
        transa: op,
        transb: op,
        m: n as i32,
        n: n as i32,
        k: n as i32,
        alpha: 1.0f64,
        lda: n as i32,
        ldb: n as i32,
        beta: 0.0,
        ldc: n as i32,
    };
    // SAFETY: three n x n f64 buffers on this stream, column-major with leading dimension n.
    let call = |c: &mut _| unsafe { blas.gemm(cfg, &a, &b, c) }.expect("dgemm");
    for _ in 0..2 {
        call(&mut c);
    }
    stream.synchronize().expect("sync");
    let reps = 10;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        call(&mut c);
    }
    stream.synchronize().expect("sync");
    let s = t.elapsed().as_secs_f64();
    let gflops = 2.0 * (n as f64).powi(3) * reps as f64 / s / 1e9;
    eprintln!("cuBLAS dgemm n={n}: {gflops:.0} GFlop/s ({reps} calls in {s:.3} s)");
    assert!(gflops.is_finite() && gflops > 0.0);
}
