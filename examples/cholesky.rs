//! Tiled Cholesky factorization A = L Lᵀ, written the way an application would write it.
//!
//! For a 3 x 3 grid of tiles (lower part), the graph of the first step is:
//!
//! ```text
//!                potrf(A00)
//!               /          \
//!       trsm(A00,A10)    trsm(A00,A20)
//!          |      \        /      |
//!   syrk(A10,A11)  gemm(A20,A10,A21)  syrk(A20,A22)
//!          |              |               |
//!                  ... step 2: potrf(A11) ...
//! ```
//!
//! Every arrow comes from the data: a task that reads a tile waits for the last task that
//! wrote it. Prints the time, GFlop/s and the residual ||A - L Lᵀ|| / ||A||.
//!
//! Run: `cargo run --release --example cholesky -- 2048 256` (order, tile order).

use std::time::Instant;

use taskwatt::kernels::{self, cholesky_residual, Tile, TiledMatrix};
use taskwatt::{Codelet, Runtime, Task};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().transpose()?.unwrap_or(2048);
    let nb = args.next().transpose()?.unwrap_or(256);

    let a: TiledMatrix = TiledMatrix::random_spd(n, nb, 7)?; // f64 (TiledMatrix<f32>: single)
    let nt = a.nt();
    let rt = Runtime::builder().app("cholesky-example").build()?;

    let potrf = Codelet::new("potrf")
        .cpu(|ctx| kernels::potrf(ctx.rw::<Tile>(0)).expect("the matrix is positive definite"));
    let trsm = Codelet::new("trsm").cpu(|ctx| kernels::trsm(ctx.r::<Tile>(0), ctx.rw(1)));
    let syrk = Codelet::new("syrk").cpu(|ctx| kernels::syrk(ctx.r::<Tile>(0), ctx.rw(1)));
    let gemm =
        Codelet::new("gemm").cpu(|ctx| kernels::gemm_nt(ctx.r::<Tile>(0), ctx.r(1), ctx.rw(2)));

    // One handle per lower tile.
    let mut work = a.clone();
    let mut tiles = std::collections::HashMap::new();
    for j in 0..nt {
        for i in j..nt {
            tiles.insert((i, j), rt.register(work.take(i, j).expect("lower tile")));
        }
    }
    let t = |i, j| &tiles[&(i, j)];

    let start = Instant::now();
    for k in 0..nt {
        rt.submit(Task::new(&potrf).rw(t(k, k)))?;
        for i in k + 1..nt {
            rt.submit(Task::new(&trsm).r(t(k, k)).rw(t(i, k)))?;
        }
        for i in k + 1..nt {
            rt.submit(Task::new(&syrk).r(t(i, k)).rw(t(i, i)))?;
            for j in k + 1..i {
                rt.submit(Task::new(&gemm).r(t(i, k)).r(t(j, k)).rw(t(i, j)))?;
            }
        }
    }
    rt.wait_all()?;
    let secs = start.elapsed().as_secs_f64();

    for ((i, j), h) in tiles {
        work.insert(i, j, rt.unregister(h)?)?;
    }
    let residual = cholesky_residual(&a, &work)?;
    println!(
        "n={n} tile={nb}: {secs:.3} s, {:.1} GFlop/s on {} workers ({}), residual {residual:.1e}",
        kernels::flops::cholesky(n) / secs / 1e9,
        rt.workers().len(),
        kernels::backend(),
    );
    assert!(residual < kernels::residual_tolerance(n));
    Ok(())
}
