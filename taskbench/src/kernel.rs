//! The kernels of Task Bench (core/core_kernel.cc), with its FLOP and byte counts
//! (`count_flops_per_task`, `count_bytes_per_task` in core/core.cc).
//!
//! compute_bound is the kernel METG is measured with: per iteration, 16 independent
//! chains of one 256-bit FMA (`a = a * a + a` on 4 doubles), which Task Bench counts as
//! 2 x 64 FLOPs, plus 64 FLOPs per task. Sixteen chains cover the FMA latency (4 cycles)
//! times the two FMA ports of current x86 cores, so one core runs at its FMA peak. It is
//! written with `std::arch` intrinsics behind runtime detection of AVX2 and FMA, with
//! Task Bench's scalar fallback elsewhere.

use std::cell::RefCell;

use serde::Serialize;

use super::error::TaskBenchError;
use super::random::random_uniform;

/// Task Bench's kernel types that taskwatt implements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelType {
    /// Does nothing: measures pure runtime overhead.
    #[default]
    Empty,
    /// A dependent chain of integer multiply-modulo, `iterations` long.
    BusyWait,
    /// Copies half of a sample of the scratch buffer onto its other half, `iterations`
    /// times, cycling over `samples` samples.
    MemoryBound,
    /// 16 chains of 256-bit FMAs, `iterations` long: 128 x iterations + 64 FLOPs.
    ComputeBound,
    /// `c += a * b` over 32 doubles, `iterations` times: 64 x iterations FLOPs.
    ComputeBound2,
    /// compute_bound with iterations scaled per task by up to +/- `imbalance` / 2.
    LoadImbalance,
}

/// Kernels Task Bench names but taskwatt does not run, and why.
const NOT_IMPLEMENTED: [(&str, &str); 4] = [
    ("compute_dgemm", "needs Task Bench's BLAS build"),
    ("memory_daxpy", "needs Task Bench's BLAS build"),
    ("io_bound", "is unimplemented in Task Bench itself"),
    ("compute_and_mem", "is not implemented by taskwatt yet"),
];

impl KernelType {
    /// Every kernel implemented, in Task Bench's (alphabetical) listing order.
    pub const ALL: [KernelType; 6] = [
        KernelType::BusyWait,
        KernelType::ComputeBound,
        KernelType::ComputeBound2,
        KernelType::Empty,
        KernelType::LoadImbalance,
        KernelType::MemoryBound,
    ];

    /// Task Bench's name (`-kernel NAME`).
    pub fn name(self) -> &'static str {
        match self {
            KernelType::Empty => "empty",
            KernelType::BusyWait => "busy_wait",
            KernelType::MemoryBound => "memory_bound",
            KernelType::ComputeBound => "compute_bound",
            KernelType::ComputeBound2 => "compute_bound2",
            KernelType::LoadImbalance => "load_imbalance",
        }
    }

    /// The kernel named `name`, or an error listing the valid names.
    pub fn from_name(name: &str) -> Result<KernelType, TaskBenchError> {
        if let Some(k) = KernelType::ALL.into_iter().find(|k| k.name() == name) {
            return Ok(k);
        }
        let valid = KernelType::ALL.map(KernelType::name).join(", ");
        match NOT_IMPLEMENTED.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => Err(TaskBenchError::UnknownKernel {
                name: name.to_string(),
                why: format!("is a Task Bench kernel that {why}"),
                valid,
            }),
            None => Err(TaskBenchError::UnknownKernel {
                name: name.to_string(),
                why: "is not a Task Bench kernel".into(),
                valid,
            }),
        }
    }

    /// The name of the taskwatt codelet that runs this kernel (as it appears in traces).
    pub fn codelet_name(self) -> &'static str {
        match self {
            KernelType::Empty => "tb_empty",
            KernelType::BusyWait => "tb_busy_wait",
            KernelType::MemoryBound => "tb_memory",
            KernelType::ComputeBound => "tb_compute",
            KernelType::ComputeBound2 => "tb_compute2",
            KernelType::LoadImbalance => "tb_imbalance",
        }
    }
}

/// A kernel and its parameters: Task Bench's `kernel_t`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Kernel {
    /// Which kernel.
    pub kind: KernelType,
    /// Iterations per task (`-iter`).
    pub iterations: i64,
    /// Samples the memory_bound scratch buffer is cut into (`-sample`, default 16).
    pub samples: i32,
    /// Load imbalance, 0 to 2 (`-imbalance`).
    pub imbalance: f64,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            kind: KernelType::Empty,
            iterations: 0,
            samples: 16,
            imbalance: 0.0,
        }
    }
}

/// Task Bench's scratch fill value ("SCRATCHB", kinda).
pub(crate) const MAGIC: u64 = 0x5C4A_7C8B;

impl Kernel {
    /// The conditions under which Task Bench's kernel would assert.
    pub(crate) fn check(&self, scratch_bytes: usize) -> Result<(), String> {
        if self.kind == KernelType::MemoryBound {
            if scratch_bytes == 0 || !scratch_bytes.is_multiple_of(8) {
                return Err(format!(
                    "memory_bound needs -scratch > 0 and a multiple of 8 (got {scratch_bytes})"
                ));
            }
            if self.samples <= 0 {
                return Err(format!(
                    "memory_bound needs -sample >= 1 (got {})",
                    self.samples
                ));
            }
            let sample = scratch_bytes / self.samples as usize;
            if sample == 0 || !sample.is_multiple_of(2) {
                return Err(format!(
                    "memory_bound copies half of each sample: -scratch / -sample = {sample} \
                     must be even and > 0"
                ));
            }
        }
        Ok(())
    }

    /// FLOPs of the task at `(timestep, point)` of graph `graph_index`.
    pub fn flops_per_task(&self, graph_index: i64, timestep: i64, point: i64) -> i64 {
        match self.kind {
            KernelType::Empty | KernelType::BusyWait | KernelType::MemoryBound => 0,
            KernelType::ComputeBound => 2 * 64 * self.iterations + 64,
            KernelType::ComputeBound2 => 2 * 32 * self.iterations,
            KernelType::LoadImbalance => {
                2 * 64 * self.imbalance_iterations(graph_index, timestep, point) + 64
            }
        }
    }

    /// Bytes moved by one task with `scratch_bytes` of scratch.
    pub fn bytes_per_task(&self, scratch_bytes: usize) -> i64 {
        match self.kind {
            KernelType::MemoryBound => (scratch_bytes as i128 * self.iterations as i128
                / self.samples.max(1) as i128)
                .min(i64::MAX as i128) as i64,
            _ => 0,
        }
    }

    /// Task Bench's `select_imbalance_iterations`.
    fn imbalance_iterations(&self, graph_index: i64, timestep: i64, point: i64) -> i64 {
        let value = random_uniform(&[graph_index, timestep, point]);
        ((1.0 + (value - 0.5) * self.imbalance) * self.iterations as f64).round() as i64
    }

    /// Runs the kernel for the task at `(timestep, point)`; memory_bound uses this
    /// thread's scratch buffer of `scratch_bytes`. Returns a value that depends on the
    /// work, so the optimiser cannot drop it.
    pub fn execute(
        &self,
        graph_index: i64,
        timestep: i64,
        point: i64,
        scratch_bytes: usize,
    ) -> f64 {
        match self.kind {
            KernelType::Empty => 0.0,
            KernelType::BusyWait => busy_wait(self.iterations) as f64,
            KernelType::ComputeBound => compute_bound(self.iterations),
            KernelType::ComputeBound2 => compute_bound2(self.iterations),
            KernelType::LoadImbalance => {
                compute_bound(self.imbalance_iterations(graph_index, timestep, point))
            }
            KernelType::MemoryBound => with_scratch(scratch_bytes, |scratch| {
                memory_bound(scratch, self.iterations, self.samples as i64, timestep);
                scratch[scratch.len() - 1] as f64
            }),
        }
    }
}

/// `acc = acc * 139 mod (2^31 - 1)`, `iterations` times.
pub fn busy_wait(iterations: i64) -> i64 {
    let mut acc: i64 = 113;
    for _ in 0..iterations {
        acc = acc * 139 % 2_147_483_647;
    }
    std::hint::black_box(acc)
}

/// Task Bench's compute_bound kernel: `2 * 64 * iterations + 64` FLOPs. Returns the
/// product of the 64 lanes (as Task Bench), which keeps the work observable.
pub fn compute_bound(iterations: i64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA, checked just above.
            return std::hint::black_box(unsafe { fma::compute_bound(iterations) });
        }
    }
    std::hint::black_box(compute_bound_portable(iterations))
}

/// Which implementation [`compute_bound`] uses here: `"avx2+fma"` or `"portable"`.
pub fn compute_bound_impl() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2+fma";
        }
    }
    "portable"
}

/// Task Bench's fallback without AVX: 64 scalar `a = a * a + a` chains.
pub(crate) fn compute_bound_portable(iterations: i64) -> f64 {
    let mut a = [1.2345f64; 64];
    for _ in 0..iterations {
        for v in a.iter_mut() {
            *v = *v * *v + *v;
        }
    }
    a.iter().product()
}

#[cfg(target_arch = "x86_64")]
mod fma {
    use std::arch::x86_64::{__m256d, _mm256_fmadd_pd, _mm256_set_pd};

    /// 16 independent 256-bit FMA chains (the registers a..p stay in the 16 ymm
    /// registers: the array is fully unrolled by the constant-length inner loop).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn compute_bound(iterations: i64) -> f64 {
        let mut a: [__m256d; 16] = [_mm256_set_pd(1.0, 2.0, 3.0, 4.0); 16];
        for _ in 0..iterations {
            for v in a.iter_mut() {
                *v = _mm256_fmadd_pd(*v, *v, *v);
            }
        }
        // SAFETY: __m256d is four f64 with no invalid bit patterns; same size.
        let lanes: [[f64; 4]; 16] = unsafe { std::mem::transmute(a) };
        lanes.iter().flatten().product()
    }
}

/// Task Bench's compute_bound2: `c[i] += a[i] * b[i]` over 32 doubles per iteration.
pub(crate) fn compute_bound2(iterations: i64) -> f64 {
    let a = [1.2345f64; 32];
    let b = [1.010101f64; 32];
    let mut c = [0f64; 32];
    for _ in 0..iterations {
        for i in 0..32 {
            c[i] += a[i] * b[i];
        }
        std::hint::black_box(&mut c);
    }
    c.iter().sum()
}

thread_local! {
    /// The scratch buffer of the task running on this thread: Task Bench gives each
    /// running task `scratch_bytes` (StarPU's implementation: one buffer per worker,
    /// which is the same thing since a worker runs one task at a time).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer of `bytes`, filled with [`MAGIC`] words when
/// first made (Task Bench's `prepare_scratch`), and checks the first word is still MAGIC,
/// as Task Bench's `execute_point` does.
fn with_scratch<R>(bytes: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() != bytes {
            *s = MAGIC.to_le_bytes().repeat(bytes / 8);
        }
        assert_eq!(
            s[..8],
            MAGIC.to_le_bytes(),
            "memory_bound: the scratch buffer lost its magic value"
        );
        f(&mut s)
    })
}

/// Task Bench's `execute_kernel_memory`: `iterations` sample copies, continuing where the
/// previous timestep stopped (`timestep * iterations` mod `samples`), each copying the
/// first half of the sample region onto its second half. A prologue runs up to the end of
/// the buffer, the body whole passes, an epilogue the rest.
pub(crate) fn memory_bound(scratch: &mut [u8], iterations: i64, samples: i64, timestep: i64) {
    let sample_bytes = scratch.len() / samples as usize;
    let copy = |scratch: &mut [u8], start: i64, n: i64| {
        let from = start as usize * sample_bytes;
        let region = &mut scratch[from..from + n as usize * sample_bytes];
        let half = region.len() / 2;
        region.copy_within(..half, half);
    };
    let mut iter = 0;
    let start = (timestep * iterations + iter) % samples;
    let n = samples.min(start + iterations) - start;
    if n > 0 {
        copy(scratch, start, n);
        iter += n;
    }
    while iter + samples <= iterations {
        let start = (timestep * iterations + iter) % samples;
        copy(scratch, start, samples);
        iter += samples;
    }
    let start = (timestep * iterations + iter) % samples;
    let n = iterations - iter;
    if n > 0 {
        copy(scratch, start, n);
        iter += n;
    }
    debug_assert_eq!(iter, iterations);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_and_byte_counts_are_task_benchs() {
        let k = Kernel {
            kind: KernelType::ComputeBound,
            iterations: 1000,
            ..Kernel::default()
        };
        assert_eq!(k.flops_per_task(0, 0, 0), 128_064);
        let m = Kernel {
            kind: KernelType::MemoryBound,
            iterations: 32,
            ..Kernel::default()
        };
        assert_eq!(m.bytes_per_task(4096), 4096 * 32 / 16);
        assert_eq!(m.flops_per_task(0, 0, 0), 0);
    }

    #[test]
    fn fma_and_portable_compute_agree() {
        // a -> a^2 + a from (1, 2, 3, 4) lanes (x16), vs the scalar chains from 1.2345:
        // both are finite for 3 iterations and grow; compare the FMA path with a scalar
        // model of the same lanes.
        let mut lanes = [1.0f64, 2.0, 3.0, 4.0];
        for _ in 0..3 {
            for v in lanes.iter_mut() {
                *v = v.mul_add(*v, *v);
            }
        }
        let expect = lanes.iter().product::<f64>().powi(16);
        let got = compute_bound(3);
        if compute_bound_impl() == "avx2+fma" {
            assert!((got / expect - 1.0).abs() < 1e-9, "{got} vs {expect}");
        }
        if compute_bound_impl() == "avx2+fma" {
            assert_eq!(compute_bound(0), 24f64.powi(16));
        }
        assert!(compute_bound_portable(3) > 1.0);
    }

    #[test]
    fn memory_bound_cycles_through_samples_without_losing_magic() {
        let k = Kernel {
            kind: KernelType::MemoryBound,
            iterations: 37,
            samples: 8,
            imbalance: 0.0,
        };
        k.check(1024).unwrap();
        assert!(k.check(0).is_err());
        for t in 0..5 {
            k.execute(0, t, 0, 1024);
        }
        with_scratch(1024, |s| {
            assert!(s.chunks(8).all(|w| w == MAGIC.to_le_bytes()));
        });
    }

    #[test]
    fn memory_bound_copies_each_touched_half() {
        // Mark bytes with their index; 1 iteration per task, 4 samples of 16 bytes: the task
        // of timestep 2 starts at sample 2 and copies its first half onto its second.
        let mut s: Vec<u8> = (0..64).collect();
        memory_bound(&mut s, 1, 4, 2);
        assert_eq!(&s[32..40], &[32, 33, 34, 35, 36, 37, 38, 39]);
        assert_eq!(&s[40..48], &[32, 33, 34, 35, 36, 37, 38, 39]);
        assert_eq!(&s[..32], &(0..32).collect::<Vec<u8>>()[..]);
    }

    #[test]
    fn unknown_and_unimplemented_kernels_are_explained() {
        let e = KernelType::from_name("compute_dgemm")
            .unwrap_err()
            .to_string();
        assert!(e.contains("BLAS") && e.contains("compute_bound"), "{e}");
        let e = KernelType::from_name("nope").unwrap_err().to_string();
        assert!(e.contains("not a Task Bench kernel"), "{e}");
        assert_eq!(busy_wait(1), 113 * 139);
        assert!(compute_bound2(10) > 0.0);
    }
}
