//! 2-D heat equation: `steps` explicit Jacobi steps on an n x n grid in nb x nb tiles,
//! with two grids used in turn as source and destination:
//!
//! ```text
//! for s in 0..steps:
//!     for i, j in 0..nt:
//!         heat_step(R cur[i][j], R cur[i±1][j], R cur[i][j±1], W next[i][j])
//!     swap(cur, next)
//! ```
//!
//! A tile of step s+1 waits for its 5 source tiles of step s (read-after-write) and for
//! the readers of its destination tile of step s-1 (write-after-read), so steps overlap
//! as a wavefront. The check compares with a sequential run cell by cell: the same
//! operations in the same order give bit-identical values.

use std::time::Instant;

use taskwatt_kernels::{flops, sequential, Extent, Tile, TiledMatrix};
use taskwatt_runtime::{Handle, Runtime, Task};

use super::codelets::HeatStep;

use super::{kernel_err, tile_bytes, App, AppConfig, AppError, AppRun, Check};

/// Diffusion number: stable for alpha <= 1/4.
const ALPHA: f64 = 0.2;

/// Initial grid: a hot top edge (Dirichlet, 100), a warm seeded bump inside, 0 elsewhere;
/// `None` as soon as `go` says no (asked before each tile).
fn initial(
    n: usize,
    nb: usize,
    seed: u64,
    go: &dyn Fn() -> bool,
) -> Result<Option<TiledMatrix>, taskwatt_kernels::KernelError> {
    // A grid whose order the tile does not divide is padded (see `Extent`).
    let nt = n.div_ceil(nb.max(1));
    let mut tiles = Vec::with_capacity(nt * nt);
    let (ci, cj) = (
        (seed as usize * 7919) % n.max(1),
        (seed as usize * 104_729) % n.max(1),
    );
    for j in 0..nt {
        for i in 0..nt {
            if !go() {
                return Ok(None);
            }
            tiles.push(Some(Tile::from_fn(nb, |r, c| {
                let (gr, gc) = (i * nb + r, j * nb + c);
                if gr == 0 {
                    100.0
                } else {
                    let d2 = (gr.abs_diff(ci).pow(2) + gc.abs_diff(cj).pow(2)) as f64;
                    50.0 * (-d2 / (n as f64)).exp()
                }
            })));
        }
    }
    TiledMatrix::from_tiles(nt * nb, nb, tiles).map(Some)
}

/// Runs heat_step alone, then on every worker, for `each` (or its time in `only`; see
/// calibrate.rs), so that a recording shows the type alone and beside others: the
/// contention law the what-if applies on other worker counts. Each task is an interior
/// tile's step (four neighbours), and like the graph's, the tasks stream their tiles: the
/// next source and destination of pools as large as the app's grids, up to
/// [`CALIBRATION_POOL_BYTES`](super::CALIBRATION_POOL_BYTES) in all.
pub(super) fn calibrate(
    rt: &Runtime,
    cfg: &AppConfig,
    sink: &taskwatt_traces::TraceSink,
    each: std::time::Duration,
    only: Option<&[(String, std::time::Duration)]>,
) -> Result<(), AppError> {
    let time = super::calibration_time("heat_step", each, only);
    if time.is_zero() {
        return Ok(());
    }
    let nb = cfg.tile;
    let bytes = tile_bytes::<f64>(nb);
    let slots = 2 * rt.workers().len();
    let per_pool = super::calibration_pool(cfg.n.max(nb), nb, bytes, 2).max(slots);
    let t0 = taskwatt_kernels::TiledMatrix::<f64>::random_tile(nb, cfg.seed, 1, 1);
    let src: Vec<Handle<Tile>> = (0..per_pool)
        .map(|_| rt.register_replicated_bytes(t0.clone(), bytes))
        .collect();
    let dst: Vec<Handle<Tile>> = (0..per_pool)
        .map(|_| rt.register_replicated_bytes(Tile::zeros(nb), bytes))
        .collect();
    let next = std::cell::Cell::new(0usize);
    let cl = super::codelets::heat_step_codelet();
    // Consecutive tasks write consecutive destinations, distinct within a batch.
    super::calibrate::phase(rt, sink, "heat_step", time, &|_| {
        let k = next.get();
        next.set(k + 1);
        let mut t = Task::new(cl).r(&src[k % per_pool]);
        for d in 1..=4 {
            t = t.r(&src[(k + d) % per_pool]);
        }
        t.w(&dst[k % per_pool]).arg(HeatStep {
            present: [true; 4],
            alpha: ALPHA,
            from_edges: false,
            extent: Extent::full(nb),
        })
    })?;
    Ok(())
}

pub(super) fn run(rt: &Runtime, cfg: &AppConfig) -> Result<AppRun, AppError> {
    let err = kernel_err("stencil");
    let (n, nb, steps) = (cfg.n, cfg.tile, cfg.steps);
    let Some(grid) = initial(n, nb, cfg.seed, &|| !rt.is_interrupted()).map_err(&err)? else {
        return Err(super::interrupted_while_generating(rt));
    };
    let nt = grid.nt();
    let reference = cfg.check.then(|| grid.clone());

    let cl = super::codelets::heat_step_codelet();

    let mut g = grid;
    let mut cur: Vec<Handle<Tile>> = Vec::with_capacity(nt * nt);
    let mut nxt: Vec<Handle<Tile>> = Vec::with_capacity(nt * nt);
    for j in 0..nt {
        for i in 0..nt {
            let t = g.take(i, j).expect("initial grid is full");
            let next = rt.register_replicated_bytes(Tile::zeros(nb), tile_bytes::<f64>(nb));
            let here = rt.register_replicated_bytes(t, tile_bytes::<f64>(nb));
            rt.set_name(&next, format!("u1[{i}][{j}]"));
            rt.set_name(&here, format!("u0[{i}][{j}]"));
            nxt.push(next);
            cur.push(here);
        }
    }
    let idx = |i: usize, j: usize| i + j * nt;

    let (start, graph_start) = (Instant::now(), taskwatt_traces::Clock::now());
    for _ in 0..steps {
        for j in 0..nt {
            for i in 0..nt {
                let neighbours = [
                    i.checked_sub(1).map(|n| idx(n, j)),
                    (i + 1 < nt).then(|| idx(i + 1, j)),
                    j.checked_sub(1).map(|w| idx(i, w)),
                    (j + 1 < nt).then(|| idx(i, j + 1)),
                ];
                let mut t = Task::new(cl).r(&cur[idx(i, j)]);
                for k in neighbours.iter().flatten() {
                    t = t.r(&cur[*k]);
                }
                let present = neighbours.map(|k| k.is_some());
                rt.submit(t.w(&nxt[idx(i, j)]).arg(HeatStep {
                    present,
                    alpha: ALPHA,
                    from_edges: false,
                    extent: Extent::of(n, nb, i, j),
                }))?;
            }
        }
        std::mem::swap(&mut cur, &mut nxt);
    }
    rt.wait_all()?;
    let (makespan, graph_end) = (start.elapsed(), taskwatt_traces::Clock::now());

    let mut result = TiledMatrix::empty(nt * nb, nb).map_err(&err)?;
    for (k, h) in cur.into_iter().enumerate() {
        result
            .insert(k % nt, k / nt, rt.unregister(h)?)
            .map_err(&err)?;
    }
    let check = match reference {
        Some(mut r) => {
            sequential::heat_in(&mut r, n, steps, ALPHA).map_err(&err)?;
            let value = r
                .to_dense()
                .iter()
                .zip(result.to_dense())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            Some(Check {
                what: "max |parallel - sequential| over the grid",
                value,
                tolerance: 0.0,
                passed: value == 0.0,
            })
        }
        None => None,
    };
    Ok(AppRun {
        app: App::Stencil,
        config: *cfg,
        tasks: (steps * nt * nt) as u64,
        // The grid's cells only, not the padding's.
        flops: flops::heat_step(nb) * (steps * nt * nt) as f64 * (n * n) as f64
            / ((nt * nb) * (nt * nb)) as f64,
        makespan,
        graph: vec![(graph_start, graph_end)],
        check,
    })
}
