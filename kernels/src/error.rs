//! The one error type of the crate.
//!
//! Kernels that receive tiles of mismatched sizes panic (that is a bug in the caller, like
//! an out-of-bounds slice index); errors are kept for what data or configuration can cause:
//! a matrix that is not positive definite, a matrix order that tiles do not divide, a
//! missing tile, a LAPACK failure.

use thiserror::Error;

/// What can go wrong in this crate. Each message names the value at fault and the fix.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum KernelError {
    /// Cholesky met a pivot that is not strictly positive (or is NaN).
    ///
    /// `column` is 0-based within the tile that was factored: the leading
    /// `(column + 1) x (column + 1)` minor is not positive definite (LAPACK's `info` is
    /// `column + 1`).
    #[error(
        "potrf: tile is not positive definite, the pivot of column {column} (0-based) is <= 0 \
         or NaN; the input must be symmetric positive definite \
         (TiledMatrix::random_spd builds one)"
    )]
    NotPositiveDefinite {
        /// 0-based column of the tile where the factorisation stopped.
        column: usize,
    },

    /// Tiled Cholesky failed in a diagonal tile.
    #[error(
        "tiled Cholesky: diagonal tile {tile} is not positive definite at global column {column} \
         (0-based); the input must be symmetric positive definite (TiledMatrix::random_spd builds one)"
    )]
    CholeskyFailed {
        /// Index `k` of the diagonal tile `(k, k)` whose potrf failed.
        tile: usize,
        /// 0-based column of the whole matrix (`k * nb + column in the tile`).
        column: usize,
    },

    /// A LAPACK routine reported an error other than "not positive definite".
    #[error("{routine} returned info = {info}; a negative value names the bad argument (1-based)")]
    Lapack {
        /// The LAPACKE routine that failed.
        routine: &'static str,
        /// The `info` value it returned.
        info: i32,
    },

    /// A tiled matrix was asked for with a tile size of zero.
    #[error("tiled matrix: tile size nb = 0; use a tile size of at least 1 (256 is typical)")]
    ZeroTileSize,

    /// The tile grid (`(n / nb)^2` tiles) does not fit in the address space.
    #[error("tiled matrix: order n = {n} in tiles of nb = {nb} makes ({n}/{nb})^2 tiles, more than memory can index; use a larger tile or a smaller n")]
    TooManyTiles {
        /// Matrix order.
        n: usize,
        /// Tile size.
        nb: usize,
    },

    /// The matrix order is not a multiple of the tile size.
    #[error("tiled matrix: order n = {n} is not a multiple of the tile size nb = {nb}; pick nb dividing n")]
    NotDivisible {
        /// Matrix order.
        n: usize,
        /// Tile size.
        nb: usize,
    },

    /// A dense buffer or tile list does not have the length its shape implies.
    #[error("{what}: expected {expected} elements, got {got}")]
    WrongLength {
        /// Which buffer (`"dense matrix"`, `"tile list"`, `"tile data"`).
        what: &'static str,
        /// Length the shape implies.
        expected: usize,
        /// Length received.
        got: usize,
    },

    /// A tile given in a list has a different size from the matrix's tile size.
    #[error("tiled matrix: tile ({i}, {j}) has nb = {got}, expected {expected}; all tiles must share one size")]
    TileSize {
        /// Tile row.
        i: usize,
        /// Tile column.
        j: usize,
        /// The matrix's tile size.
        expected: usize,
        /// The tile's size.
        got: usize,
    },

    /// A computation needs a tile that the tiled matrix does not hold.
    #[error("{what}: tile ({i}, {j}) is missing; {what} needs every tile of the lower triangle (i >= j){extra}")]
    MissingTile {
        /// The computation that needed it.
        what: &'static str,
        /// Tile row.
        i: usize,
        /// Tile column.
        j: usize,
        /// Extra hint (e.g. ", and the upper one for a general matrix").
        extra: &'static str,
    },

    /// Two tiled matrices that must have the same shape do not.
    #[error("{what}: shapes differ, (n = {n_a}, nb = {nb_a}) vs (n = {n_b}, nb = {nb_b}); build both with the same n and nb")]
    ShapeMismatch {
        /// The computation that compared them.
        what: &'static str,
        /// Order of the first matrix.
        n_a: usize,
        /// Tile size of the first matrix.
        nb_a: usize,
        /// Order of the second matrix.
        n_b: usize,
        /// Tile size of the second matrix.
        nb_b: usize,
    },
}
