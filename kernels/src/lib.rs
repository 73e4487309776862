//! Tile kernels for taskwatt's built-in apps: tiled Cholesky, tiled GEMM and a 2-D heat
//! stencil.
//!
//! A runtime task runs one kernel on a few [`Tile`]s (square `nb x nb`, column-major) on the
//! calling thread only: the runtime, not the kernel, provides the parallelism.
//!
//! # Precision
//! Tiles, tiled matrices and the dense kernels are generic over the element type
//! ([`Scalar`]: `f64`, the default type parameter, or `f32`): `Tile` is `Tile<f64>`,
//! `Tile<f32>` is single precision, and a kernel's precision is that of its tiles. The
//! stencil is f64 only. Constructors name no type, so where nothing else fixes it, write
//! it: `let a: TiledMatrix = ...` (f64) or `TiledMatrix::<f32>::random_spd(...)`. The
//! residual checks compute in f64 for either type ([`residual_tolerance_for`] scales with
//! the type's epsilon).
//!
//! # Backends
//! - default, pure Rust: the `gemm` crate (single-threaded, AVX-512 or AVX2 micro-kernels
//!   chosen at run time) does the bulk of the flops; potrf, trsm and syrk are recursive so
//!   most of their flops are `gemm` calls too, and their small leaves are vectorised loops
//!   compiled per instruction set (`pure.rs`, `simd.rs`);
//! - feature `blas`: CBLAS (`cblas_dgemm`, `cblas_dsyrk`, `cblas_dtrsm`, and the `s`
//!   routines for f32) and LAPACKE (`LAPACKE_dpotrf_work`, `LAPACKE_spotrf_work`) from the
//!   system, linked as `-lopenblas -llapacke`
//!   (Debian/Ubuntu: `apt install libopenblas-dev liblapacke-dev`). OpenBLAS must run one
//!   thread per call: set `OPENBLAS_NUM_THREADS=1`, or let the crate do it, since every
//!   kernel calls `openblas_set_num_threads(1)` once per process (see [`init`]).
//!   `OPENBLAS_CORETYPE` in the environment overrides OpenBLAS's choice of kernels and
//!   changes its speed a lot (`blas.rs` explains).
//!
//! [`backend`] names the one compiled in; both pass the same tests. For single-core
//! GFlop/s of every kernel, run `cargo run -p taskwatt-kernels --release --example
//! kernel_gflops` (add `--features blas` for the other backend).
//!
//! # Contents
//! - [`Scalar`] (`scalar.rs`): the element types, f64 and f32 (sealed);
//! - [`Tile`] (`tile.rs`) and [`TiledMatrix`] (`tiled.rs`): data, dense split/join, seeded
//!   SPD and general generators that build any tile alone;
//! - kernels (`dense.rs`): [`potrf`], [`trsm`], [`syrk`], [`gemm_nt`], [`gemm_nn`];
//!   (`stencil.rs`): [`heat_step`] with [`Neighbours`];
//! - [`flops`]: operation counts (LAWN 41 per kernel; `n^3/3` for Cholesky as StarPU);
//! - checks (`check.rs`): [`cholesky_residual`], [`gemm_residual`], [`residual_tolerance`]
//!   and [`residual_tolerance_for`], `O(n^2)` randomized estimates of the relative backward
//!   error;
//! - [`sequential`]: the apps' task graphs run in order on one thread (baselines);
//! - [`KernelError`] (`error.rs`).
//!
//! # Example
//! Tiled Cholesky of a seeded SPD matrix, sequentially, then the residual check:
//!
//! ```
//! use taskwatt_kernels::{
//!     cholesky_residual, residual_tolerance, residual_tolerance_for, sequential, TiledMatrix,
//! };
//!
//! let a: TiledMatrix = TiledMatrix::random_spd(256, 64, 42)?; // f64, 4 x 4 lower tiles
//! let mut l = a.clone();
//! sequential::cholesky(&mut l)?; // potrf/trsm/syrk/gemm_nt on the tiles, in order
//! let residual = cholesky_residual(&a, &l)?; // ~ ||A - L L^T||_F / ||A||_F
//! assert!(residual < residual_tolerance(256), "residual {residual}");
//!
//! // The same in single precision: the f64 matrix rounded to f32, checked in f64.
//! let a = TiledMatrix::<f32>::random_spd(256, 64, 42)?;
//! let mut l = a.clone();
//! sequential::cholesky(&mut l)?;
//! assert!(cholesky_residual(&a, &l)? < residual_tolerance_for::<f32>(256));
//! # Ok::<(), taskwatt_kernels::KernelError>(())
//! ```

mod check;
mod dense;
mod edge;
mod error;
pub mod flops;
mod pure;
mod random;
mod scalar;
pub mod sequential;
mod simd;
mod stencil;
mod tile;
mod tiled;
mod view;

#[cfg(feature = "blas")]
mod blas;
#[cfg(test)]
mod testutil;

pub use check::{
    cholesky_residual, gemm_residual, residual_tolerance, residual_tolerance_for, PROBES,
};
pub use dense::{backend, backend_threads, gemm_nn, gemm_nt, init, potrf, syrk, trsm};
pub use edge::{Edge, Side};
pub use error::KernelError;
pub use scalar::Scalar;
pub use stencil::{
    heat_step, heat_step_edges, heat_step_edges_in, heat_step_in, Edges, Extent, Neighbours,
};
pub use tile::Tile;
pub use tiled::{padded_order, TiledMatrix};
