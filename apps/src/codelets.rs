//! The built-in apps' codelets, made once per process and element type, and shared by the
//! apps of this crate, their type calibration and the distributed apps of `taskwatt-mpi`:
//! the same objects, so the same task types in the traces, the performance models and the
//! energy reports, whichever of them ran.
//!
//! | codelet | buffers | argument | CPU | GPU (feature `cuda`) |
//! |---|---|---|---|---|
//! | `potrf` | RW A | [`Calibration`]: restore A from buffer 1 | `potrf` | none (CPU only, as in StarPU's example) |
//! | `trsm` | R L, RW B | [`Calibration`]: restore B from buffer 2 | `trsm` | cuBLAS `trsm` |
//! | `syrk` | R A, RW C | | `syrk` | cuBLAS `syrk` |
//! | `gemm` | R A, R B, RW C | | C -= A Bᵀ | cuBLAS `gemm` |
//! | `gemm_nn` | R A, R B, RW C | [`Beta`] (default 1) | C = A B + β C | cuBLAS `gemm` |
//! | `heat_step` | R src, R the neighbours present (tiles, or their [`Edge`]s), W dst | [`HeatStep`] | `heat_step`, `heat_step_edges` | none |
//! | `halo` | R tile, W its edges present | `[bool; 4]`: which of [`Side::ALL`] | [`Edge::fill_from`] | none |
//!
//! An emulated GPU (and a GPU worker built without the `cuda` feature) runs the CPU kernels
//! on its copies.

use std::sync::OnceLock;

use taskwatt_kernels::{
    gemm_nn, gemm_nt, heat_step_edges_in, heat_step_in, potrf, syrk, trsm, Edge, Edges, Extent,
    Neighbours, Scalar, Side, Tile,
};
use taskwatt_runtime::{Codelet, TaskCtx};

use crate::calibrate::Calibration;

/// Tiled Cholesky's four codelets.
#[derive(Debug)]
pub struct Cholesky {
    /// `potrf(RW A)`: A = L Lᵀ in place. Panics on a matrix that is not positive definite.
    pub potrf: Codelet,
    /// `trsm(R L, RW B)`: B = B L⁻ᵀ.
    pub trsm: Codelet,
    /// `syrk(R A, RW C)`: C -= A Aᵀ.
    pub syrk: Codelet,
    /// `gemm(R A, R B, RW C)`: C -= A Bᵀ.
    pub gemm: Codelet,
}

/// The argument of a `gemm_nn` task: `C = A B + beta C` (1 without the argument).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Beta(pub f64);

/// The argument of a `heat_step` task: which neighbours (north, south, west, east) are
/// among its buffers, in that order after the source, and the diffusion number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeatStep {
    /// North, south, west, east: whether that neighbour is a buffer.
    pub present: [bool; 4],
    /// The diffusion number (stable for at most 1/4).
    pub alpha: f64,
    /// Whether the neighbours' buffers are their [`Edge`]s (the halos a distributed run
    /// moves) rather than whole tiles.
    pub from_edges: bool,
    /// How much of the tile lies inside the grid ([`Extent::full`] but at the far edges
    /// of a grid whose order the tile does not divide).
    pub extent: Extent,
}

/// An element type of the apps, with its own codelets (a `static` inside a generic
/// function would be one for all types).
pub trait AppScalar: Scalar {
    /// Tiled Cholesky's codelets on tiles of this type.
    fn cholesky() -> &'static Cholesky;
    /// `gemm_nn` on tiles of this type.
    fn gemm_nn() -> &'static Codelet;
}

impl AppScalar for f64 {
    fn cholesky() -> &'static Cholesky {
        static CL: OnceLock<Cholesky> = OnceLock::new();
        CL.get_or_init(make_cholesky::<f64>)
    }
    fn gemm_nn() -> &'static Codelet {
        static CL: OnceLock<Codelet> = OnceLock::new();
        CL.get_or_init(make_gemm_nn::<f64>)
    }
}

impl AppScalar for f32 {
    fn cholesky() -> &'static Cholesky {
        static CL: OnceLock<Cholesky> = OnceLock::new();
        CL.get_or_init(make_cholesky::<f32>)
    }
    fn gemm_nn() -> &'static Codelet {
        static CL: OnceLock<Codelet> = OnceLock::new();
        CL.get_or_init(make_gemm_nn::<f32>)
    }
}

/// `heat_step` on f64 tiles (the stencil is f64 only).
pub fn heat_step_codelet() -> &'static Codelet {
    static CL: OnceLock<Codelet> = OnceLock::new();
    CL.get_or_init(|| {
        let cpu = |ctx: &TaskCtx<'_>| {
            let arg: &HeatStep = ctx.arg();
            let dst = 1 + arg.present.iter().filter(|p| **p).count();
            let (src, out) = (ctx.r::<Tile>(0), ctx.w::<Tile>(dst));
            if arg.from_edges {
                let [north, south, west, east] =
                    sides(&arg.present, |i| ctx.r::<Edge>(i).as_slice());
                let edges = Edges {
                    north,
                    south,
                    west,
                    east,
                };
                heat_step_edges_in(src, edges, out, arg.alpha, arg.extent);
            } else {
                let [north, south, west, east] = sides(&arg.present, |i| ctx.r::<Tile>(i));
                let halo = Neighbours {
                    north,
                    south,
                    west,
                    east,
                };
                heat_step_in(src, halo, out, arg.alpha, arg.extent);
            }
        };
        Codelet::new("heat_step").cpu(cpu)
    })
}

/// A `heat_step` task's neighbours (north, south, west, east), `None` where `present`
/// says there is none: the present ones are buffers 1, 2, ... in that order (`get(i)`
/// reads buffer `i`).
fn sides<T>(present: &[bool; 4], mut get: impl FnMut(usize) -> T) -> [Option<T>; 4] {
    let mut next = 0;
    present.map(|p| {
        p.then(|| {
            next += 1;
            get(next)
        })
    })
}

/// `halo`: copies the sides of a tile (buffer 0) that its neighbours read into their
/// [`Edge`]s (the W buffers that follow, in the order of [`Side::ALL`], for the sides the
/// `[bool; 4]` argument flags).
pub fn halo_codelet() -> &'static Codelet {
    static CL: OnceLock<Codelet> = OnceLock::new();
    CL.get_or_init(|| {
        Codelet::new("halo").cpu(|ctx| {
            let present: &[bool; 4] = ctx.arg();
            let t = ctx.r::<Tile>(0);
            let mut next = 1;
            for (side, p) in Side::ALL.into_iter().zip(present) {
                if *p {
                    ctx.w::<Edge>(next).fill_from(t, side);
                    next += 1;
                }
            }
        })
    })
}

/// In a calibration task, restores `dst` from the pristine copy in buffer `src` (kernels
/// that work in place would otherwise drift: potrf fails on its own factor, trsm
/// underflows to denormals).
fn restore<T: Scalar>(ctx: &TaskCtx<'_>, dst: &mut Tile<T>, src: usize) {
    if ctx.try_arg::<Calibration>().is_some() {
        dst.as_mut_slice()
            .copy_from_slice(ctx.r::<Tile<T>>(src).as_slice());
    }
}

fn make_cholesky<T: Scalar>() -> Cholesky {
    let trsm_cpu = |ctx: &TaskCtx<'_>| {
        let b = ctx.rw::<Tile<T>>(1);
        restore(ctx, b, 2);
        trsm(ctx.r::<Tile<T>>(0), b)
    };
    let syrk_cpu = |ctx: &TaskCtx<'_>| syrk(ctx.r::<Tile<T>>(0), ctx.rw::<Tile<T>>(1));
    let gemm_cpu = |ctx: &TaskCtx<'_>| {
        gemm_nt(
            ctx.r::<Tile<T>>(0),
            ctx.r::<Tile<T>>(1),
            ctx.rw::<Tile<T>>(2),
        )
    };
    let cl = Cholesky {
        potrf: Codelet::new("potrf").cpu(|ctx| {
            let a = ctx.rw::<Tile<T>>(0);
            restore(ctx, a, 1);
            if let Err(e) = potrf(a) {
                panic!("potrf: {e}");
            }
        }),
        trsm: Codelet::new("trsm").cpu(trsm_cpu),
        syrk: Codelet::new("syrk").cpu(syrk_cpu),
        gemm: Codelet::new("gemm").cpu(gemm_cpu),
    };
    // On CUDA workers, cuBLAS (potrf stays on the CPU, as in StarPU's example); an
    // emulated GPU runs the CPU kernels on its copies (without the feature, always).
    #[cfg(feature = "cuda")]
    let cl = Cholesky {
        trsm: cl.trsm.gpu(move |ctx| match ctx.cuda() {
            Some(cu) => {
                if ctx.try_arg::<Calibration>().is_some() {
                    crate::cuda::copy(ctx, cu, 1, 2);
                }
                crate::cuda::trsm::<T>(ctx, cu, [0, 1])
            }
            None => trsm_cpu(ctx),
        }),
        syrk: cl.syrk.gpu(move |ctx| match ctx.cuda() {
            Some(cu) => crate::cuda::syrk::<T>(ctx, cu, [0, 1]),
            None => syrk_cpu(ctx),
        }),
        gemm: cl.gemm.gpu(move |ctx| match ctx.cuda() {
            Some(cu) => crate::cuda::gemm::<T>(ctx, cu, [0, 1, 2], true, -1.0, 1.0),
            None => gemm_cpu(ctx),
        }),
        ..cl
    };
    #[cfg(not(feature = "cuda"))]
    let cl = Cholesky {
        trsm: cl.trsm.gpu(trsm_cpu),
        syrk: cl.syrk.gpu(syrk_cpu),
        gemm: cl.gemm.gpu(gemm_cpu),
        ..cl
    };
    cl
}

fn make_gemm_nn<T: Scalar>() -> Codelet {
    let beta = |ctx: &TaskCtx<'_>| ctx.try_arg::<Beta>().map_or(1.0, |b| b.0);
    let cpu = move |ctx: &TaskCtx<'_>| {
        gemm_nn(
            T::ONE,
            ctx.r::<Tile<T>>(0),
            ctx.r::<Tile<T>>(1),
            T::from_f64(beta(ctx)),
            ctx.rw::<Tile<T>>(2),
        )
    };
    let cl = Codelet::new("gemm_nn").cpu(cpu);
    #[cfg(feature = "cuda")]
    let cl = cl.gpu(move |ctx| match ctx.cuda() {
        Some(cu) => crate::cuda::gemm::<T>(ctx, cu, [0, 1, 2], false, 1.0, beta(ctx)),
        None => cpu(ctx),
    });
    #[cfg(not(feature = "cuda"))]
    let cl = cl.gpu(cpu);
    cl
}
