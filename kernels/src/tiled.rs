//! [`TiledMatrix`]: an `n x n` matrix as a grid of `nt x nt` tiles of order `nb`
//! (`n = nt * nb`), each tile optional, of f64 by default (`TiledMatrix<f32>` for single
//! precision).
//!
//! Tiles are stored in tile-column-major order (`(i, j)` at `i + j * nt`) as
//! `Option<Tile>`: a symmetric matrix for Cholesky holds only its lower tiles (`i >= j`), and
//! a runtime can [`take`](TiledMatrix::take) tiles out to give them to tasks and
//! [`insert`](TiledMatrix::insert) them back.
//!
//! Generated matrices are counter-based: element `(r, c)` is a function of
//! `(seed, r, c)` only, so [`TiledMatrix::spd_tile`] and [`TiledMatrix::random_tile`] build
//! any single tile (inside a task, say) equal to the same tile of the whole matrix, and no
//! buffer larger than one tile is ever formed. Elements are generated in f64 and rounded
//! once to the element type, so `TiledMatrix::<f32>::random_spd(n, nb, seed)` is
//! `random_spd(n, nb, seed)` rounded to f32 element by element.

use crate::{random, KernelError, Scalar, Tile};

/// The order of the matrix a tiled algorithm works on for a problem of order `n` in
/// tiles of order `nb`: `n` rounded up to a multiple of `nb`. The rows and columns past
/// `n` are padding, made so that they do not change the result on the first `n`
/// ([`TiledMatrix::random_spd`], [`TiledMatrix::random`]); the work on them is done, and
/// is not the problem's.
///
/// # Errors
/// [`KernelError::ZeroTileSize`] if `nb == 0`; [`KernelError::TooManyTiles`] if the
/// rounded order overflows.
pub fn padded_order(n: usize, nb: usize) -> Result<usize, KernelError> {
    if nb == 0 {
        return Err(KernelError::ZeroTileSize);
    }
    n.div_ceil(nb)
        .checked_mul(nb)
        .ok_or(KernelError::TooManyTiles { n, nb })
}

/// An `n x n` matrix of `T` (`f64` by default) split into `nb x nb` tiles; see the module
/// docs.
#[derive(Clone, Debug, PartialEq)]
pub struct TiledMatrix<T: Scalar = f64> {
    n: usize,
    nb: usize,
    nt: usize,
    tiles: Vec<Option<Tile<T>>>,
}

impl<T: Scalar> TiledMatrix<T> {
    /// A matrix of order `n` in tiles of order `nb`, holding no tile yet.
    ///
    /// # Errors
    /// [`KernelError::ZeroTileSize`] if `nb == 0`, [`KernelError::NotDivisible`] if `nb`
    /// does not divide `n`.
    pub fn empty(n: usize, nb: usize) -> Result<Self, KernelError> {
        if nb == 0 {
            return Err(KernelError::ZeroTileSize);
        }
        if !n.is_multiple_of(nb) {
            return Err(KernelError::NotDivisible { n, nb });
        }
        let nt = n / nb;
        let count = nt
            .checked_mul(nt)
            .ok_or(KernelError::TooManyTiles { n, nb })?;
        let mut tiles = Vec::new();
        tiles
            .try_reserve_exact(count)
            .map_err(|_| KernelError::TooManyTiles { n, nb })?;
        tiles.resize(count, None);
        Ok(Self { n, nb, nt, tiles })
    }

    /// All `nt x nt` tiles, zero. Errors as [`TiledMatrix::empty`].
    pub fn zeros(n: usize, nb: usize) -> Result<Self, KernelError> {
        let mut m = Self::empty(n, nb)?;
        m.tiles.iter_mut().for_each(|t| *t = Some(Tile::zeros(nb)));
        Ok(m)
    }

    /// Splits a dense column-major `n x n` matrix (`(r, c)` at `r + c * n`) into tiles.
    ///
    /// # Errors
    /// As [`TiledMatrix::empty`], and [`KernelError::WrongLength`] if
    /// `dense.len() != n * n`.
    pub fn from_dense(dense: &[T], n: usize, nb: usize) -> Result<Self, KernelError> {
        let mut m = Self::empty(n, nb)?;
        if dense.len() != n * n {
            return Err(KernelError::WrongLength {
                what: "dense matrix (n * n, column-major)",
                expected: n * n,
                got: dense.len(),
            });
        }
        let nt = m.nt;
        for j in 0..nt {
            for i in 0..nt {
                let tile = Tile::from_fn(nb, |r, c| dense[(i * nb + r) + (j * nb + c) * n]);
                m.tiles[i + j * nt] = Some(tile);
            }
        }
        Ok(m)
    }

    /// Joins the tiles into a dense column-major `n x n` matrix; missing tiles read as 0.
    pub fn to_dense(&self) -> Vec<T> {
        let (n, nb, nt) = (self.n, self.nb, self.nt);
        let mut dense = vec![T::ZERO; n * n];
        for j in 0..nt {
            for i in 0..nt {
                let Some(tile) = self.tile(i, j) else {
                    continue;
                };
                for c in 0..nb {
                    let start = (i * nb) + (j * nb + c) * n;
                    dense[start..start + nb].copy_from_slice(tile.col(c));
                }
            }
        }
        dense
    }

    /// A reproducible symmetric positive definite matrix, lower tiles only (`i >= j`; the
    /// diagonal tiles are full and symmetric).
    ///
    /// Element `(r, c)` is uniform in `[0, 1)`, a function of `(seed, max(r, c), min(r, c))`,
    /// plus `n` on the diagonal: every row's off-diagonal sum is below `n - 1`, so the
    /// matrix is strictly diagonally dominant with a positive diagonal, hence SPD, with a
    /// condition number below about 3. (StarPU's `cholesky_implicit` likewise adds `n` to
    /// the diagonal of its generated matrix.) Rounding to f32 keeps it SPD: each element
    /// moves by at most `2^-24` relative, far less than the diagonal's margin of 1.
    ///
    /// When `nb` does not divide `n`, the matrix is of order [`padded_order`]`(n, nb)`:
    /// its first `n` rows and columns are the matrix of order `n`, the rest the identity's
    /// (see [`TiledMatrix::spd_tile`]), so that its Cholesky factor is the order-`n`
    /// factor beside the identity, exactly.
    ///
    /// Errors as [`TiledMatrix::empty`] (of the padded order).
    pub fn random_spd(n: usize, nb: usize, seed: u64) -> Result<Self, KernelError> {
        Ok(Self::random_spd_while(n, nb, seed, &|| true)?.expect("never stopped"))
    }

    /// [`TiledMatrix::random_spd`], asking `go` before each tile: `None` as soon as it
    /// says no (a large input takes seconds; a run interrupted meanwhile stops at once).
    pub fn random_spd_while(
        n: usize,
        nb: usize,
        seed: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<Option<Self>, KernelError> {
        let padded = padded_order(n, nb)?;
        Self::fill_while(
            padded,
            nb,
            true,
            &|i, j| Self::spd_tile(n, nb, seed, i, j),
            go,
        )
    }

    /// An `n`-order matrix of `nb` tiles made by `tile(i, j)`, the lower ones only when
    /// `lower`, asking `go` before each: `None` as soon as it says no.
    fn fill_while(
        n: usize,
        nb: usize,
        lower: bool,
        tile: &dyn Fn(usize, usize) -> Tile<T>,
        go: &dyn Fn() -> bool,
    ) -> Result<Option<Self>, KernelError> {
        let mut m = Self::empty(n, nb)?;
        for j in 0..m.nt {
            for i in if lower { j } else { 0 }..m.nt {
                if !go() {
                    return Ok(None);
                }
                m.tiles[i + j * m.nt] = Some(tile(i, j));
            }
        }
        Ok(Some(m))
    }

    /// Tile `(i, j)` of [`TiledMatrix::random_spd`]`(n, nb, seed)`, built alone. Any `(i, j)`
    /// works (an upper tile is the transpose of its mirror), so a task can generate its own
    /// tile. Past row or column `n` (the padding of an `n` that `nb` does not divide) it
    /// is the identity's: 1 on the diagonal, 0 elsewhere.
    pub fn spd_tile(n: usize, nb: usize, seed: u64, i: usize, j: usize) -> Tile<T> {
        Tile::from_fn(nb, |r, c| {
            let (gr, gc) = ((i * nb + r) as u64, (j * nb + c) as u64);
            if gr.max(gc) >= n as u64 {
                return if gr == gc { T::from_f64(1.0) } else { T::ZERO };
            }
            let v = random::unit(seed, gr.max(gc), gr.min(gc));
            T::from_f64(if gr == gc { v + n as f64 } else { v })
        })
    }

    /// A reproducible general matrix with elements uniform in `[-1, 1)`, all tiles (for
    /// tiled GEMM). When `nb` does not divide `n`, it is of order [`padded_order`]`(n, nb)`,
    /// zero past row and column `n`. Errors as [`TiledMatrix::empty`] (of the padded
    /// order).
    pub fn random(n: usize, nb: usize, seed: u64) -> Result<Self, KernelError> {
        Ok(Self::random_while(n, nb, seed, &|| true)?.expect("never stopped"))
    }

    /// [`TiledMatrix::random`], asking `go` before each tile (as
    /// [`TiledMatrix::random_spd_while`]).
    pub fn random_while(
        n: usize,
        nb: usize,
        seed: u64,
        go: &dyn Fn() -> bool,
    ) -> Result<Option<Self>, KernelError> {
        let padded = padded_order(n, nb)?;
        Self::fill_while(
            padded,
            nb,
            false,
            &|i, j| Self::random_tile_in(n, nb, seed, i, j),
            go,
        )
    }

    /// Tile `(i, j)` of [`TiledMatrix::random`]`(n, nb, seed)` for an `n` that `nb`
    /// divides, built alone (it does not depend on `n`).
    pub fn random_tile(nb: usize, seed: u64, i: usize, j: usize) -> Tile<T> {
        Tile::from_fn(nb, |r, c| {
            T::from_f64(2.0 * random::unit(seed, (i * nb + r) as u64, (j * nb + c) as u64) - 1.0)
        })
    }

    /// Tile `(i, j)` of [`TiledMatrix::random`]`(n, nb, seed)` for any `n`: as
    /// [`TiledMatrix::random_tile`], and 0 past row or column `n` (the padding), so that a
    /// product of padded matrices is the order-`n` product beside zeros, exactly.
    pub fn random_tile_in(n: usize, nb: usize, seed: u64, i: usize, j: usize) -> Tile<T> {
        Tile::from_fn(nb, |r, c| {
            let (gr, gc) = ((i * nb + r) as u64, (j * nb + c) as u64);
            if gr.max(gc) >= n as u64 {
                return T::ZERO;
            }
            T::from_f64(2.0 * random::unit(seed, gr, gc) - 1.0)
        })
    }

    /// Builds a matrix from tiles in tile-column-major order (`(i, j)` at `i + j * nt`),
    /// e.g. the ones [`into_tiles`](TiledMatrix::into_tiles) gave out.
    ///
    /// # Errors
    /// As [`TiledMatrix::empty`]; [`KernelError::WrongLength`] if there are not `nt * nt`
    /// entries; [`KernelError::TileSize`] if a tile is not of order `nb`.
    pub fn from_tiles(
        n: usize,
        nb: usize,
        tiles: Vec<Option<Tile<T>>>,
    ) -> Result<Self, KernelError> {
        let mut m = Self::empty(n, nb)?;
        if tiles.len() != m.tiles.len() {
            return Err(KernelError::WrongLength {
                what: "tile list (nt * nt entries)",
                expected: m.tiles.len(),
                got: tiles.len(),
            });
        }
        for (k, t) in tiles.iter().enumerate() {
            if let Some(t) = t {
                if t.nb() != nb {
                    return Err(KernelError::TileSize {
                        i: k % m.nt,
                        j: k / m.nt,
                        expected: nb,
                        got: t.nb(),
                    });
                }
            }
        }
        m.tiles = tiles;
        Ok(m)
    }

    /// Gives the tiles out, tile-column-major (`(i, j)` at `i + j * nt`).
    pub fn into_tiles(self) -> Vec<Option<Tile<T>>> {
        self.tiles
    }

    /// Matrix order `n`.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Tile order `nb`.
    pub fn nb(&self) -> usize {
        self.nb
    }

    /// Tiles per side, `nt = n / nb`.
    pub fn nt(&self) -> usize {
        self.nt
    }

    fn index(&self, i: usize, j: usize) -> usize {
        assert!(
            i < self.nt && j < self.nt,
            "tile ({i}, {j}) out of range for nt = {}",
            self.nt
        );
        i + j * self.nt
    }

    /// Tile `(i, j)` if present.
    ///
    /// # Panics
    /// If `i >= nt` or `j >= nt` (as do the other tile accessors).
    pub fn tile(&self, i: usize, j: usize) -> Option<&Tile<T>> {
        self.tiles[self.index(i, j)].as_ref()
    }

    /// Tile `(i, j)` if present, writable.
    pub fn tile_mut(&mut self, i: usize, j: usize) -> Option<&mut Tile<T>> {
        let k = self.index(i, j);
        self.tiles[k].as_mut()
    }

    /// Removes tile `(i, j)` and returns it (`None` if absent).
    pub fn take(&mut self, i: usize, j: usize) -> Option<Tile<T>> {
        let k = self.index(i, j);
        self.tiles[k].take()
    }

    /// Puts `tile` at `(i, j)`, returning the tile it replaces.
    ///
    /// # Errors
    /// [`KernelError::TileSize`] if `tile` is not of order `nb` (then nothing changes).
    pub fn insert(
        &mut self,
        i: usize,
        j: usize,
        tile: Tile<T>,
    ) -> Result<Option<Tile<T>>, KernelError> {
        let k = self.index(i, j);
        if tile.nb() != self.nb {
            return Err(KernelError::TileSize {
                i,
                j,
                expected: self.nb,
                got: tile.nb(),
            });
        }
        Ok(self.tiles[k].replace(tile))
    }

    /// Tile `(i, j)`, or [`KernelError::MissingTile`] naming `what` needed it.
    pub(crate) fn need(
        &self,
        i: usize,
        j: usize,
        what: &'static str,
        extra: &'static str,
    ) -> Result<&Tile<T>, KernelError> {
        self.tile(i, j)
            .ok_or(KernelError::MissingTile { what, i, j, extra })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_padded_cholesky_and_product_are_the_unpadded_ones_beside_the_identity_and_zeros() {
        // n = 10 in tiles of 4 (padded to 12), against tiles of 2 (no padding).
        let (n, seed) = (10, 7);
        assert_eq!(padded_order(n, 4), Ok(12));
        assert_eq!(padded_order(n, 0), Err(KernelError::ZeroTileSize));
        let mut padded = TiledMatrix::random_spd(n, 4, seed).unwrap();
        let mut exact = TiledMatrix::random_spd(n, 2, seed).unwrap();
        assert_eq!((padded.n(), exact.n()), (12, 10));
        crate::sequential::cholesky(&mut padded).unwrap();
        crate::sequential::cholesky(&mut exact).unwrap();
        let (p, e) = (padded.to_dense(), exact.to_dense());
        for c in 0..12 {
            for r in c..12 {
                let got = p[r + c * 12];
                if r < n && c < n {
                    let want = e[r + c * n];
                    assert!(
                        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                        "L[{r}][{c}]"
                    );
                } else {
                    assert_eq!(got, if r == c { 1.0 } else { 0.0 }, "padding L[{r}][{c}]");
                }
            }
        }
        // C = A B on padded operands: the order-n product, zeros past it.
        let (a, b) = (
            TiledMatrix::random(n, 4, 1).unwrap(),
            TiledMatrix::random(n, 4, 2).unwrap(),
        );
        let (a2, b2) = (
            TiledMatrix::random(n, 2, 1).unwrap(),
            TiledMatrix::random(n, 2, 2).unwrap(),
        );
        let mut c = TiledMatrix::zeros(12, 4).unwrap();
        let mut c2 = TiledMatrix::zeros(n, 2).unwrap();
        crate::sequential::gemm(1.0, &a, &b, 0.0, &mut c).unwrap();
        crate::sequential::gemm(1.0, &a2, &b2, 0.0, &mut c2).unwrap();
        let (p, e) = (c.to_dense(), c2.to_dense());
        for col in 0..12 {
            for r in 0..12 {
                let got = p[r + col * 12];
                if r < n && col < n {
                    assert!((got - e[r + col * n]).abs() <= 1e-12, "C[{r}][{col}]");
                } else {
                    assert_eq!(got, 0.0, "padding C[{r}][{col}]");
                }
            }
        }
    }

    use super::*;
    // Constructors name no element type; the tests below are about f64 matrices.
    type TiledMatrix = super::TiledMatrix<f64>;

    #[test]
    fn dense_round_trip() {
        let n = 6;
        let dense: Vec<f64> = (0..n * n).map(|x| x as f64).collect();
        let m = TiledMatrix::from_dense(&dense, n, 3).unwrap();
        assert_eq!(m.nt(), 2);
        // Tile (1, 0) holds rows 3..6 of columns 0..3.
        assert_eq!(m.tile(1, 0).unwrap().get(0, 0), dense[3]);
        assert_eq!(m.tile(0, 1).unwrap().get(2, 1), dense[2 + 4 * n]);
        assert_eq!(m.to_dense(), dense);
    }

    #[test]
    fn shape_errors() {
        assert_eq!(TiledMatrix::empty(10, 0), Err(KernelError::ZeroTileSize));
        assert_eq!(
            TiledMatrix::empty(10, 4),
            Err(KernelError::NotDivisible { n: 10, nb: 4 })
        );
        assert!(matches!(
            TiledMatrix::from_dense(&[0.0; 5], 2, 1),
            Err(KernelError::WrongLength {
                expected: 4,
                got: 5,
                ..
            })
        ));
        let mut m = TiledMatrix::zeros(4, 2).unwrap();
        assert!(matches!(
            m.insert(0, 0, Tile::zeros(3)),
            Err(KernelError::TileSize { got: 3, .. })
        ));
        assert!(matches!(
            TiledMatrix::from_tiles(4, 2, vec![None; 3]),
            Err(KernelError::WrongLength { expected: 4, .. })
        ));
    }

    #[test]
    fn spd_is_symmetric_lower_only_and_tiles_match() {
        let (n, nb) = (12, 4);
        let m = TiledMatrix::random_spd(n, nb, 9).unwrap();
        assert!(m.tile(0, 1).is_none() && m.tile(1, 0).is_some());
        // Diagonal tiles are symmetric, with n added on the diagonal.
        let d = m.tile(1, 1).unwrap();
        for r in 0..nb {
            assert!(d.get(r, r) >= n as f64 && d.get(r, r) < n as f64 + 1.0);
            for c in 0..nb {
                assert_eq!(d.get(r, c), d.get(c, r));
            }
        }
        // An upper tile generated alone is the transpose of its lower mirror.
        let up = TiledMatrix::spd_tile(n, nb, 9, 0, 2);
        let low = m.tile(2, 0).unwrap();
        for r in 0..nb {
            for c in 0..nb {
                assert_eq!(up.get(r, c), low.get(c, r));
            }
        }
        // Same seed, same matrix; other seed, other matrix.
        assert_eq!(m, TiledMatrix::random_spd(n, nb, 9).unwrap());
        assert_ne!(m, TiledMatrix::random_spd(n, nb, 10).unwrap());
    }

    #[test]
    fn random_is_in_range_and_tiles_match() {
        let m = TiledMatrix::random(8, 4, 1).unwrap();
        assert!(m.to_dense().iter().all(|x| (-1.0..1.0).contains(x)));
        assert_eq!(m.tile(1, 0).unwrap(), &TiledMatrix::random_tile(4, 1, 1, 0));
    }

    #[test]
    fn a_tile_grid_beyond_the_address_space_is_an_error() {
        let err = TiledMatrix::empty(usize::MAX, 1).unwrap_err();
        assert!(matches!(err, KernelError::TooManyTiles { .. }), "{err}");
    }

    #[test]
    fn take_and_insert() {
        let mut m = TiledMatrix::zeros(4, 2).unwrap();
        let t = m.take(1, 1).unwrap();
        assert!(m.tile(1, 1).is_none());
        assert_eq!(m.insert(1, 1, t).unwrap(), None);
        let tiles = m.clone().into_tiles();
        assert_eq!(TiledMatrix::from_tiles(4, 2, tiles).unwrap(), m);
    }

    #[test]
    fn f32_generation_rounds_the_f64_matrix() {
        let (n, nb) = (12, 4);
        let wide = TiledMatrix::random_spd(n, nb, 9).unwrap();
        let narrow = super::TiledMatrix::<f32>::random_spd(n, nb, 9).unwrap();
        for j in 0..3 {
            for i in j..3 {
                let (w, s) = (wide.tile(i, j).unwrap(), narrow.tile(i, j).unwrap());
                for c in 0..nb {
                    for r in 0..nb {
                        assert_eq!(s.get(r, c), w.get(r, c) as f32);
                    }
                }
            }
        }
        let g = super::TiledMatrix::<f32>::random_tile(4, 1, 1, 0);
        assert_eq!(
            g.get(2, 3),
            TiledMatrix::random_tile(4, 1, 1, 0).get(2, 3) as f32
        );
    }
}
