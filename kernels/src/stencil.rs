//! One explicit step of the 2-D heat equation on a tile: the 5-point Jacobi stencil.
//!
//! The global grid is an `n x n` [`TiledMatrix`](crate::TiledMatrix) of temperatures;
//! tile `(i, j)` covers grid rows `i*nb..(i+1)*nb` and columns `j*nb..(j+1)*nb`. North is
//! the tile above (`i - 1`), south below (`i + 1`), west to the left (`j - 1`), east to the
//! right (`j + 1`).
//!
//! For every cell `u` not on the global boundary,
//!
//! ```text
//! u' = (1 - 4 alpha) u + alpha (u_north + u_south + u_west + u_east)
//! ```
//!
//! which is forward Euler on `du/dt = D laplacian(u)` with `alpha = D dt / h^2`; it is stable
//! for `0 <= alpha <= 1/4`. Cells on the global boundary (first/last row/column of the whole
//! grid) are Dirichlet cells: they keep their value, so the initial grid sets the boundary
//! temperature.
//!
//! A task of a tiled stencil app reads its tile and (up to) four neighbour tiles of step
//! `t` and writes its tile of step `t + 1` in a second grid: [`heat_step`] takes the
//! neighbours as `&Tile` (read access in the task graph) and the output as `&mut Tile`
//! (write access), so the source grid can be shared by all tasks of one step. Only one row
//! or column of each neighbour is read.

use crate::simd::{madd, multiversion};
use crate::Tile;

/// The tiles around the one being updated; `None` marks a side on the global boundary.
#[derive(Clone, Copy, Debug, Default)]
pub struct Neighbours<'a> {
    /// Tile above (tile row `i - 1`); its last row is read.
    pub north: Option<&'a Tile>,
    /// Tile below (tile row `i + 1`); its first row is read.
    pub south: Option<&'a Tile>,
    /// Tile to the left (tile column `j - 1`); its last column is read.
    pub west: Option<&'a Tile>,
    /// Tile to the right (tile column `j + 1`); its first column is read.
    pub east: Option<&'a Tile>,
}

impl Neighbours<'_> {
    /// No neighbours: the tile is the whole grid, all four sides are boundary.
    pub fn none() -> Self {
        Self::default()
    }
}

/// How much of a tile lies inside the grid: its first `rows` rows and `cols` columns. A
/// tile of a grid whose order the tile does not divide is padded at the grid's far edges;
/// there the grid's last row and column (`rows - 1`, `cols - 1`) are its boundary, kept as
/// the other Dirichlet cells are, and the padding past them is kept too, so that the
/// first `n` rows and columns are the order-`n` grid's, bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Rows inside the grid (1 to the tile's order).
    pub rows: usize,
    /// Columns inside the grid.
    pub cols: usize,
}

impl Extent {
    /// A whole tile of order `nb`.
    pub fn full(nb: usize) -> Extent {
        Extent { rows: nb, cols: nb }
    }

    /// Tile `(i, j)` of a grid of order `n` in tiles of order `nb`.
    pub fn of(n: usize, nb: usize, i: usize, j: usize) -> Extent {
        let inside = |k: usize| n.saturating_sub(k * nb).clamp(1, nb.max(1));
        Extent {
            rows: inside(i),
            cols: inside(j),
        }
    }
}

/// Keeps, in `dst`, `src`'s cells from the grid's last row and column inside the tile on
/// (a partial tile's boundary and padding; see [`Extent`]).
fn keep_past(src: &Tile, dst: &mut Tile, extent: Extent) {
    let nb = src.nb();
    if extent.rows < nb {
        let r0 = extent.rows.saturating_sub(1);
        for (d, c) in dst
            .as_mut_slice()
            .chunks_exact_mut(nb)
            .zip(src.as_slice().chunks_exact(nb))
        {
            d[r0..].copy_from_slice(&c[r0..]);
        }
    }
    if extent.cols < nb {
        let c0 = extent.cols.saturating_sub(1) * nb;
        dst.as_mut_slice()[c0..].copy_from_slice(&src.as_slice()[c0..]);
    }
}

/// [`heat_step`] on a tile of which only `extent` lies inside the grid (see [`Extent`]).
///
/// # Panics
/// As [`heat_step`].
pub fn heat_step_in(src: &Tile, halo: Neighbours<'_>, dst: &mut Tile, alpha: f64, extent: Extent) {
    heat_step(src, halo, dst, alpha);
    keep_past(src, dst, extent);
}

/// [`heat_step_edges`] on a tile of which only `extent` lies inside the grid.
///
/// # Panics
/// As [`heat_step_edges`].
pub fn heat_step_edges_in(
    src: &Tile,
    edges: Edges<'_>,
    dst: &mut Tile,
    alpha: f64,
    extent: Extent,
) {
    heat_step_edges(src, edges, dst, alpha);
    keep_past(src, dst, extent);
}

/// One Jacobi step: writes into `dst` the update of `src` (see the module docs for the
/// formula and the boundary rule). `src` and `dst` must be distinct tiles (the borrow
/// checker enforces it), as Jacobi reads only the old step.
///
/// # Panics
/// If `dst` or a neighbour has a different order from `src`.
pub fn heat_step(src: &Tile, halo: Neighbours<'_>, dst: &mut Tile, alpha: f64) {
    let nb = src.nb();
    assert_eq!(dst.nb(), nb, "heat_step: dst must have the order of src");
    for t in [halo.north, halo.south, halo.west, halo.east]
        .into_iter()
        .flatten()
    {
        assert_eq!(
            t.nb(),
            nb,
            "heat_step: neighbour tiles must have the order of src"
        );
    }
    if nb == 0 {
        return;
    }
    let row = |t: &Tile, i: usize| (0..nb).map(|j| t.get(i, j)).collect::<Vec<f64>>();
    let (north, south) = (
        halo.north.map(|t| row(t, nb - 1)),
        halo.south.map(|t| row(t, 0)),
    );
    let edges = Edges {
        north: north.as_deref(),
        south: south.as_deref(),
        west: halo.west.map(|t| t.col(nb - 1)),
        east: halo.east.map(|t| t.col(0)),
    };
    heat_step_dispatch(src, edges, dst, alpha);
}

/// [`heat_step`] from the neighbours' edges alone (a distributed stencil's halos, see
/// [`Edge`](crate::Edge)): the same values, bit for bit.
///
/// # Panics
/// If `dst` has a different order from `src`, or an edge does not have `nb` values.
pub fn heat_step_edges(src: &Tile, edges: Edges<'_>, dst: &mut Tile, alpha: f64) {
    let nb = src.nb();
    assert_eq!(
        dst.nb(),
        nb,
        "heat_step_edges: dst must have the order of src"
    );
    for e in [edges.north, edges.south, edges.west, edges.east]
        .into_iter()
        .flatten()
    {
        assert_eq!(
            e.len(),
            nb,
            "heat_step_edges: an edge must have the tile's order of values"
        );
    }
    if nb > 0 {
        heat_step_dispatch(src, edges, dst, alpha);
    }
}

multiversion!(
    /// [`heat_step`] after the shape checks, compiled per instruction set.
    fn heat_step_dispatch(src: &Tile, halo: Edges<'_>, dst: &mut Tile, alpha: f64) => heat_step_body
);

#[inline(always)]
fn heat_step_body<const FMA: bool>(src: &Tile, halo: Edges<'_>, dst: &mut Tile, alpha: f64) {
    let nb = src.nb();
    let c0 = 1.0 - 4.0 * alpha;
    for (j, d) in dst.as_mut_slice().chunks_exact_mut(nb).enumerate() {
        let c = src.col(j);
        let west = if j > 0 {
            Some(src.col(j - 1))
        } else {
            halo.west
        };
        let east = if j + 1 < nb {
            Some(src.col(j + 1))
        } else {
            halo.east
        };
        let (Some(w), Some(e)) = (west, east) else {
            // A column on the global west or east boundary: Dirichlet, keep it.
            d.copy_from_slice(c);
            continue;
        };
        // The first and last cells read the neighbour rows; when there is none they are on
        // the global north/south boundary.
        let north = halo.north.map(|r| r[j]);
        let south = halo.south.map(|r| r[j]);
        let cell = |i: usize, up: Option<f64>, down: Option<f64>| match (up, down) {
            (Some(u), Some(dn)) => madd::<f64, FMA>(c0, c[i], alpha * ((u + dn) + (w[i] + e[i]))),
            _ => c[i],
        };
        if nb == 1 {
            d[0] = cell(0, north, south);
            continue;
        }
        d[0] = cell(0, north, Some(c[1]));
        d[nb - 1] = cell(nb - 1, Some(c[nb - 2]), south);
        interior::<FMA>(&mut d[1..nb - 1], c, w, e, c0, alpha);
    }
}

/// The cells of the neighbours that a tile's update reads, `nb` values per side: what a
/// distributed stencil moves instead of whole tiles. `None` marks a side on the global
/// boundary.
#[derive(Clone, Copy, Debug, Default)]
pub struct Edges<'a> {
    /// The north tile's last row (`north[j]`: its column `j`).
    pub north: Option<&'a [f64]>,
    /// The south tile's first row.
    pub south: Option<&'a [f64]>,
    /// The west tile's last column.
    pub west: Option<&'a [f64]>,
    /// The east tile's first column.
    pub east: Option<&'a [f64]>,
}

/// Rows `1..nb-1` of one column: `d[k] = c0 c[k+1] + alpha ((c[k] + c[k+2]) + (w[k+1] +
/// e[k+1]))`. Separate slices of equal length (and `d` a distinct `&mut`) let the compiler
/// drop bounds checks and vectorise.
#[inline(always)]
fn interior<const FMA: bool>(d: &mut [f64], c: &[f64], w: &[f64], e: &[f64], c0: f64, alpha: f64) {
    let m = d.len();
    let (up, mid, down) = (&c[..m], &c[1..m + 1], &c[2..m + 2]);
    let (w, e) = (&w[1..m + 1], &e[1..m + 1]);
    for k in 0..m {
        d[k] = madd::<f64, FMA>(c0, mid[k], alpha * ((up[k] + down[k]) + (w[k] + e[k])));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assert_close, naive, random_tile};

    #[test]
    fn a_padded_grid_s_first_n_rows_and_columns_are_the_order_n_grid_s_bit_for_bit() {
        use crate::{padded_order, sequential, TiledMatrix};
        let f =
            |r: usize, c: usize| ((r * 31 + c * 17) % 23) as f64 + if r == 0 { 100.0 } else { 0.0 };
        for (n, nb) in [(10usize, 4usize), (9, 3), (7, 5), (5, 4), (6, 1)] {
            // The order-n grid in one tile, and padded in tiles of nb (padding: 7.0, to
            // catch any leak into the grid).
            let mut whole = TiledMatrix::from_tiles(n, n, vec![Some(Tile::from_fn(n, f))]).unwrap();
            let big = padded_order(n, nb).unwrap();
            let nt = big / nb;
            let tiles = (0..nt * nt)
                .map(|k| {
                    let (i, j) = (k % nt, k / nt);
                    Some(Tile::from_fn(nb, |r, c| {
                        let (gr, gc) = (i * nb + r, j * nb + c);
                        if gr < n && gc < n {
                            f(gr, gc)
                        } else {
                            7.0
                        }
                    }))
                })
                .collect();
            let mut padded = TiledMatrix::from_tiles(big, nb, tiles).unwrap();
            sequential::heat(&mut whole, 6, 0.2).unwrap();
            sequential::heat_in(&mut padded, n, 6, 0.2).unwrap();
            let (a, b) = (whole.to_dense(), padded.to_dense());
            for c in 0..n {
                for r in 0..n {
                    assert_eq!(
                        a[r + c * n].to_bits(),
                        b[r + c * big].to_bits(),
                        "n {n}, nb {nb}: ({r}, {c})"
                    );
                }
            }
        }
    }

    #[test]
    fn the_edges_give_the_same_values_as_the_tiles_bit_for_bit() {
        use crate::{Edge, Side};
        for nb in [1usize, 2, 7, 16] {
            let src = random_tile(nb, 1);
            let ns: Vec<Tile> = (2..6).map(|s| random_tile(nb, s)).collect();
            // Neighbour north reads its South side, south its North, west its East, east
            // its West.
            let sides = [Side::South, Side::North, Side::East, Side::West];
            let edges: Vec<Edge> = ns
                .iter()
                .zip(sides)
                .map(|(t, s)| {
                    let mut e = Edge::unallocated(nb);
                    e.fill_from(t, s);
                    e
                })
                .collect();
            for mask in 0..16u32 {
                let on = |k: usize| mask & (1 << k) != 0;
                let tiles = Neighbours {
                    north: on(0).then_some(&ns[0]),
                    south: on(1).then_some(&ns[1]),
                    west: on(2).then_some(&ns[2]),
                    east: on(3).then_some(&ns[3]),
                };
                let sl = |k: usize| on(k).then(|| edges[k].as_slice());
                let halo = Edges {
                    north: sl(0),
                    south: sl(1),
                    west: sl(2),
                    east: sl(3),
                };
                let (mut a, mut b) = (Tile::zeros(nb), Tile::zeros(nb));
                heat_step(&src, tiles, &mut a, 0.2);
                heat_step_edges(&src, halo, &mut b, 0.2);
                assert!(
                    a.as_slice()
                        .iter()
                        .zip(b.as_slice())
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "nb={nb} mask={mask:04b}"
                );
            }
        }
    }

    #[test]
    fn single_tile_matches_dense_stencil() {
        for nb in [1usize, 2, 3, 17, 64] {
            let src = random_tile(nb, nb as u64);
            let mut dst = Tile::zeros(nb);
            heat_step(&src, Neighbours::none(), &mut dst, 0.2);
            let want = naive::heat_step_dense(src.as_slice(), nb, 0.2);
            assert_close(
                &dst,
                &Tile::from_col_major(nb, want).unwrap(),
                1e-15,
                &format!("nb={nb}"),
            );
        }
    }

    #[test]
    fn baseline_version_matches_dispatched_version() {
        let (src, n) = (random_tile(9, 1), random_tile(9, 2));
        let halo = Neighbours {
            north: Some(&n),
            west: Some(&n),
            ..Neighbours::none()
        };
        let (mut fast, mut plain) = (Tile::zeros(9), Tile::zeros(9));
        heat_step(&src, halo, &mut fast, 0.2);
        let north: Vec<f64> = (0..9).map(|j| n.get(8, j)).collect();
        let edges = Edges {
            north: Some(&north),
            west: Some(n.col(8)),
            ..Edges::default()
        };
        heat_step_body::<false>(&src, edges, &mut plain, 0.2);
        assert_close(&plain, &fast, 1e-15, "heat_step");
    }

    #[test]
    fn boundary_is_kept_and_constant_field_is_steady() {
        let src = Tile::from_fn(6, |_, _| 3.0);
        let mut dst = Tile::zeros(6);
        let n = Tile::from_fn(6, |_, _| 3.0);
        heat_step(
            &src,
            Neighbours {
                north: Some(&n),
                east: Some(&n),
                ..Neighbours::none()
            },
            &mut dst,
            0.25,
        );
        assert!(dst.as_slice().iter().all(|&x| (x - 3.0).abs() < 1e-15));
    }

    #[test]
    fn neighbour_rows_feed_the_edges() {
        // Zero tile, hot north neighbour: only row 0 (not its boundary corners) warms up.
        let src = Tile::zeros(4);
        let hot = Tile::from_fn(4, |_, _| 1.0);
        let mut dst = Tile::zeros(4);
        heat_step(
            &src,
            Neighbours {
                north: Some(&hot),
                ..Neighbours::none()
            },
            &mut dst,
            0.25,
        );
        for j in 0..4 {
            let want = if j == 0 || j == 3 { 0.0 } else { 0.25 };
            assert_eq!(dst.get(0, j), want, "column {j}");
            assert_eq!(dst.get(1, j), 0.0);
        }
    }

    #[test]
    #[should_panic(expected = "neighbour tiles")]
    fn mismatched_neighbour_panics() {
        let t = Tile::zeros(3);
        let other = Tile::zeros(4);
        heat_step(
            &t,
            Neighbours {
                west: Some(&other),
                ..Neighbours::none()
            },
            &mut Tile::zeros(3),
            0.1,
        );
    }
}
