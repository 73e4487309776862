//! Distributed Cholesky, gemm and stencil over a 2D block-cyclic distribution, each
//! checked on rank 0 against the sequential result of the same kernels.
//!
//! Every rank registers every tile (the owner's holds the data, the others a tile without
//! storage until a message fills it) and submits every task; the stencil's tiles also
//! have their sides as handles of their own (`Edge`), so that only halos move. The
//! runtime runs each task on the owner of the data it writes. At the end every tile is brought to rank
//! 0, which compares with `taskwatt_kernels::sequential`: the distributed run applies each
//! tile's updates in the sequential order, so the results agree to the last bit (the
//! check allows 1e-12 relative).
//!
//! The codelets are the built-in apps' ([`taskwatt_apps::codelets`]): the same task types
//! (names, kernels, GPU implementations) as `taskwatt run` without `--mpi`.

use std::time::Instant;

use taskwatt_apps::codelets::{halo_codelet, heat_step_codelet, AppScalar, Beta, HeatStep};
use taskwatt_kernels::{sequential, Edge, Extent, Scalar, Side, Tile, TiledMatrix};

use crate::dist::{DistHandle, DistRuntime, DistStats, DistTask};
use crate::DistError;

/// A `p` x `q` grid of ranks: tile `(i, j)` belongs to rank `(i mod p) q + (j mod q)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BlockCyclic {
    /// Grid rows.
    pub p: usize,
    /// Grid columns.
    pub q: usize,
}

impl BlockCyclic {
    /// The squarest grid of `size` ranks (`p <= q`).
    pub fn of(size: usize) -> BlockCyclic {
        let size = size.max(1);
        let p = (1..=size)
            .filter(|p| size.is_multiple_of(*p) && p * p <= size)
            .max()
            .unwrap_or(1);
        BlockCyclic { p, q: size / p }
    }

    /// The owner of tile `(i, j)`.
    pub fn owner(&self, i: usize, j: usize) -> usize {
        (i % self.p) * self.q + (j % self.q)
    }
}

/// The distributed apps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DistApp {
    /// Tiled Cholesky (lower).
    Cholesky,
    /// C = A B, tiled.
    Gemm,
    /// Jacobi heat steps on a tiled grid.
    Stencil,
}

impl DistApp {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            DistApp::Cholesky => "cholesky",
            DistApp::Gemm => "gemm",
            DistApp::Stencil => "stencil",
        }
    }
}

/// What a rank's part of a distributed app did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DistOutcome {
    /// The app.
    pub app: DistApp,
    /// Matrix order and tile size.
    pub n: usize,
    /// Tile size.
    pub nb: usize,
    /// This rank, and the job's size.
    pub rank: usize,
    /// Ranks.
    pub ranks: usize,
    /// The distribution.
    pub grid: BlockCyclic,
    /// From the first submission to the end of this rank's tasks and messages (before the
    /// gather for the check), s.
    pub makespan_s: f64,
    /// On rank 0: the largest difference from the sequential result, relative to the
    /// result's largest element.
    pub check_rel_diff: Option<f64>,
    /// Whether the check passed (rank 0).
    pub check_passed: Option<bool>,
    /// This rank's counts.
    pub stats: DistStats,
}

/// The check's tolerance, relative to the result's largest element.
pub const CHECK_TOLERANCE: f64 = 1e-12;

type Tiles<T> = Vec<Vec<Option<DistHandle<Tile<T>>>>>;

fn register<T: Scalar>(
    d: &mut DistRuntime,
    g: BlockCyclic,
    nt: usize,
    nb: usize,
    lower: bool,
    make: impl Fn(usize, usize) -> Tile<T>,
) -> Result<Tiles<T>, DistError> {
    let me = d.rank();
    let mut t: Tiles<T> = (0..nt).map(|_| (0..nt).map(|_| None).collect()).collect();
    for (i, row) in t.iter_mut().enumerate() {
        for (j, slot) in row.iter_mut().enumerate() {
            if lower && j > i {
                continue;
            }
            let owner = g.owner(i, j);
            // Another rank's tile takes no memory here until a message fills it.
            let v = if owner == me {
                make(i, j)
            } else {
                Tile::unallocated(nb)
            };
            *slot = Some(d.register(owner, v)?);
        }
    }
    Ok(t)
}

/// The edges of each tile (`[i][j][side]`, sides in `Side::ALL`'s order), for the sides a
/// neighbour reads; owned with the tile, and without storage on the other ranks until a
/// message fills them.
type EdgeHandles = Vec<Vec<[Option<DistHandle<Edge>>; 4]>>;

fn register_edges(
    d: &mut DistRuntime,
    g: BlockCyclic,
    nt: usize,
    nb: usize,
) -> Result<EdgeHandles, DistError> {
    let me = d.rank();
    let mut out = Vec::with_capacity(nt);
    for i in 0..nt {
        let mut row = Vec::with_capacity(nt);
        for j in 0..nt {
            let owner = g.owner(i, j);
            let mut sides: [Option<DistHandle<Edge>>; 4] = Default::default();
            for (k, read) in [i > 0, i + 1 < nt, j > 0, j + 1 < nt]
                .into_iter()
                .enumerate()
            {
                if read {
                    let e = if owner == me {
                        Edge::zeros(nb)
                    } else {
                        Edge::unallocated(nb)
                    };
                    sides[k] = Some(d.register(owner, e)?);
                }
            }
            row.push(sides);
        }
        out.push(row);
    }
    Ok(out)
}

fn tile<T: Scalar>(t: &Tiles<T>, i: usize, j: usize) -> &DistHandle<Tile<T>> {
    t[i][j].as_ref().expect("registered")
}

/// Brings every tile to rank 0 and takes them back; rank 0 gets the matrix.
fn gather<T: Scalar>(
    d: &mut DistRuntime,
    t: Tiles<T>,
    n: usize,
    nb: usize,
) -> Result<Option<TiledMatrix<T>>, DistError> {
    // The whole matrix on rank 0, whatever its cache limit.
    d.set_cache_limit(None);
    for h in t.iter().flatten().flatten() {
        d.fetch_to(h, 0)?;
    }
    d.wait_all()?;
    let nt = t.len();
    let mut tiles: Vec<Option<Tile<T>>> = (0..nt * nt).map(|_| None).collect();
    for (i, row) in t.into_iter().enumerate() {
        for (j, h) in row.into_iter().enumerate() {
            if let Some(h) = h {
                tiles[i + j * nt] = Some(d.unregister(h)?);
            }
        }
    }
    if d.rank() != 0 {
        return Ok(None);
    }
    Ok(Some(
        TiledMatrix::from_tiles(n, nb, tiles).expect("tiles of the matrix's shape"),
    ))
}

fn compare<T: Scalar>(got: &TiledMatrix<T>, want: &TiledMatrix<T>, lower: bool) -> f64 {
    let nt = want.nt();
    let (mut diff, mut max) = (0.0f64, 0.0f64);
    for j in 0..nt {
        for i in 0..nt {
            if lower && j > i {
                continue;
            }
            let (Some(a), Some(b)) = (got.tile(i, j), want.tile(i, j)) else {
                return f64::INFINITY;
            };
            // A tile without its storage (a freed copy) is not a result.
            if a.as_slice().len() != b.as_slice().len() {
                return f64::INFINITY;
            }
            for (x, y) in a.as_slice().iter().zip(b.as_slice()) {
                let (x, y) = (x.to_f64(), y.to_f64());
                diff = diff.max((x - y).abs());
                max = max.max(y.abs());
            }
        }
    }
    if max > 0.0 {
        diff / max
    } else {
        diff
    }
}

/// Runs `app` on the job in f64: `n` the matrix order (grid side for the stencil), `nb`
/// the tile size, `steps` the stencil's steps, `seed` the matrices'. Every rank calls it.
pub fn run(
    d: &mut DistRuntime,
    app: DistApp,
    n: usize,
    nb: usize,
    steps: usize,
    seed: u64,
) -> Result<DistOutcome, DistError> {
    run_with::<f64>(d, app, n, nb, steps, seed, true)
}

/// Brings the result to rank 0 when `check` (for the comparison), else lets every rank
/// take its tiles back: each rank then never holds more than its share and the copies in
/// flight.
fn result<T: Scalar>(
    d: &mut DistRuntime,
    t: Tiles<T>,
    n: usize,
    nb: usize,
    check: bool,
) -> Result<Option<TiledMatrix<T>>, DistError> {
    if check {
        return gather(d, t, n, nb);
    }
    for h in t.into_iter().flatten().flatten() {
        d.unregister(h)?;
    }
    Ok(None)
}

type Want<T> = Box<dyn FnOnce() -> TiledMatrix<T>>;

/// [`run`] with tiles of `T` (f64, or f32 for Cholesky and gemm; the stencil is f64 only),
/// comparing the result with the sequential one on rank 0 only when `check` (which brings
/// the whole matrix, and its reference, to rank 0).
pub fn run_with<T: AppScalar>(
    d: &mut DistRuntime,
    app: DistApp,
    n: usize,
    nb: usize,
    steps: usize,
    seed: u64,
    check: bool,
) -> Result<DistOutcome, DistError> {
    if nb == 0 || n == 0 {
        return Err(DistError::NoMpi(format!(
            "--n {n} and --tile {nb} must be positive"
        )));
    }
    // Every app pads an `n` that the tile does not divide (`padded_order`): Cholesky's and
    // GEMM's padding is the identity's or zeros, which leave the first `n` rows and columns
    // exact; the stencil's is kept as its boundary is (`Extent`).
    let nt = n.div_ceil(nb);
    let order = nt * nb;
    let g = BlockCyclic::of(d.size());
    let cl = T::cholesky();
    // Each arm starts the clock at its first submission, after registering (and, on the
    // owner, generating) its data: StarPU-MPI's "Computation time" starts there too.
    let (makespan, diff) = match app {
        DistApp::Cholesky => {
            let a = register(d, g, nt, nb, true, |i, j| {
                TiledMatrix::<T>::spd_tile(n, nb, seed, i, j)
            })?;
            let start = Instant::now();
            for k in 0..nt {
                let p = (2 * (nt - k)) as i32;
                d.submit(DistTask::new(&cl.potrf).rw(tile(&a, k, k)).priority(p + 2))?;
                for i in k + 1..nt {
                    d.submit(
                        DistTask::new(&cl.trsm)
                            .r(tile(&a, k, k))
                            .rw(tile(&a, i, k))
                            .priority(p + 1),
                    )?;
                }
                for j in k + 1..nt {
                    d.submit(
                        DistTask::new(&cl.syrk)
                            .r(tile(&a, j, k))
                            .rw(tile(&a, j, j))
                            .priority(p),
                    )?;
                    for i in j + 1..nt {
                        d.submit(
                            DistTask::new(&cl.gemm)
                                .r(tile(&a, i, k))
                                .r(tile(&a, j, k))
                                .rw(tile(&a, i, j)),
                        )?;
                    }
                }
                // Column k is final and read by no later step: drop its copies (each
                // rank's freed once its readers ran), as StarPU-MPI's Cholesky does.
                for i in k..nt {
                    d.flush(tile(&a, i, k))?;
                }
            }
            d.wait_all()?;
            let m = start.elapsed().as_secs_f64();
            let got = result(d, a, order, nb, check)?;
            let want: Want<T> = Box::new(move || {
                let mut r = TiledMatrix::<T>::random_spd(n, nb, seed).expect("valid sizes");
                sequential::cholesky(&mut r).expect("SPD");
                r
            });
            (m, got.map(|got| compare(&got, &want(), true)))
        }
        DistApp::Gemm => {
            let a = register(d, g, nt, nb, false, |i, j| {
                TiledMatrix::<T>::random_tile_in(n, nb, seed, i, j)
            })?;
            let b = register(d, g, nt, nb, false, |i, j| {
                TiledMatrix::<T>::random_tile_in(n, nb, seed ^ 0x5eed, i, j)
            })?;
            let c = register(d, g, nt, nb, false, |_, _| Tile::<T>::zeros(nb))?;
            let start = Instant::now();
            for j in 0..nt {
                for i in 0..nt {
                    for k in 0..nt {
                        d.submit(
                            DistTask::new(T::gemm_nn())
                                .r(tile(&a, i, k))
                                .r(tile(&b, k, j))
                                .rw(tile(&c, i, j))
                                .arg(Beta(if k == 0 { 0.0 } else { 1.0 })),
                        )?;
                    }
                }
                // B's column j is read by no later column of C.
                for k in 0..nt {
                    d.flush(tile(&b, k, j))?;
                }
            }
            d.wait_all()?;
            let m = start.elapsed().as_secs_f64();
            let got = result(d, c, order, nb, check)?;
            for h in a.into_iter().chain(b).flatten().flatten() {
                d.unregister(h)?;
            }
            let want: Want<T> = Box::new(move || {
                let a = TiledMatrix::<T>::random(n, nb, seed).expect("valid sizes");
                let b = TiledMatrix::<T>::random(n, nb, seed ^ 0x5eed).expect("valid sizes");
                let mut c = TiledMatrix::<T>::zeros(order, nb).expect("valid sizes");
                sequential::gemm(T::ONE, &a, &b, T::ZERO, &mut c).expect("shapes");
                c
            });
            (m, got.map(|got| compare(&got, &want(), false)))
        }
        DistApp::Stencil => {
            if T::NAME != "f64" {
                return Err(DistError::NoMpi(
                    "the stencil is f64 only: drop --precision f32".into(),
                ));
            }
            let (heat, halo) = (heat_step_codelet(), halo_codelet());
            let alpha = 0.1;
            let init =
                move |i: usize, j: usize| TiledMatrix::<f64>::random_tile_in(n, nb, seed, i, j);
            let x = register(d, g, nt, nb, false, init)?;
            let y = register(d, g, nt, nb, false, |_, _| Tile::<f64>::zeros(nb))?;
            // Only halos move: each tile's sides that a neighbour reads are edges of their
            // own (owned with the tile, `nb` values each), refreshed by a `halo` task after
            // the tile is written, and the neighbours' updates read those.
            let x_edges = register_edges(d, g, nt, nb)?;
            let y_edges = register_edges(d, g, nt, nb)?;
            let start = Instant::now();
            let grids = [(&x, &x_edges), (&y, &y_edges)];
            // Which sides of tile (i, j) a neighbour reads, in `Side::ALL`'s order.
            let sides = |i: usize, j: usize| [i > 0, i + 1 < nt, j > 0, j + 1 < nt];
            let refresh = |d: &mut DistRuntime, t: &Tiles<f64>, e: &EdgeHandles, i, j| {
                let mut task = DistTask::new(halo).r(tile(t, i, j));
                for h in e[i][j].iter().flatten() {
                    task = task.w(h);
                }
                d.submit(task.arg(sides(i, j)))
            };
            for i in 0..nt {
                for j in 0..nt {
                    refresh(d, &x, &x_edges, i, j)?;
                }
            }
            for s in 0..steps {
                let ((src, src_e), (dst, dst_e)) = (grids[s % 2], grids[(s + 1) % 2]);
                for j in 0..nt {
                    for i in 0..nt {
                        // North reads the tile above's last row (its South side), south
                        // the first row of the one below (its North side), and so on.
                        let present = [i > 0, i + 1 < nt, j > 0, j + 1 < nt];
                        let edge = |ii: usize, jj: usize, side: Side| {
                            src_e[ii][jj][side as usize]
                                .as_ref()
                                .expect("a side a neighbour reads")
                        };
                        let mut t = DistTask::new(heat).r(tile(src, i, j));
                        if present[0] {
                            t = t.r(edge(i - 1, j, Side::South));
                        }
                        if present[1] {
                            t = t.r(edge(i + 1, j, Side::North));
                        }
                        if present[2] {
                            t = t.r(edge(i, j - 1, Side::East));
                        }
                        if present[3] {
                            t = t.r(edge(i, j + 1, Side::West));
                        }
                        d.submit(t.w(tile(dst, i, j)).arg(HeatStep {
                            present,
                            alpha,
                            from_edges: true,
                            extent: Extent::of(n, nb, i, j),
                        }))?;
                    }
                }
                // The next step's halos (none after the last step).
                if s + 1 < steps {
                    for j in 0..nt {
                        for i in 0..nt {
                            refresh(d, dst, dst_e, i, j)?;
                        }
                    }
                }
            }
            d.wait_all()?;
            let m = start.elapsed().as_secs_f64();
            let (result, other) = if steps.is_multiple_of(2) {
                (x, y)
            } else {
                (y, x)
            };
            let got = self::result(d, result, order, nb, check)?;
            for h in other.into_iter().flatten().flatten() {
                d.unregister(h)?;
            }
            for h in x_edges
                .into_iter()
                .chain(y_edges)
                .flatten()
                .flatten()
                .flatten()
            {
                d.unregister(h)?;
            }
            let diff = got.map(|got| {
                let mut r = TiledMatrix::random(n, nb, seed).expect("valid sizes");
                sequential::heat_in(&mut r, n, steps, alpha).expect("full grid");
                compare(&got, &r, false)
            });
            (m, diff)
        }
    };
    Ok(DistOutcome {
        app,
        n,
        nb,
        rank: d.rank(),
        ranks: d.size(),
        grid: g,
        makespan_s: makespan,
        check_rel_diff: diff,
        check_passed: diff.map(|x| x <= CHECK_TOLERANCE),
        stats: d.stats().clone(),
    })
}
