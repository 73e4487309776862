//! Test helpers: seeded tiles, tolerant comparisons, and naive reference implementations
//! (textbook loops, no blocking) that the kernels are checked against.

use crate::{random, Scalar, Tile, TiledMatrix};

/// Tile with entries uniform in [-1, 1) (rounded to `T`), reproducible from `seed`.
pub(crate) fn random_tile<T: Scalar>(nb: usize, seed: u64) -> Tile<T> {
    Tile::from_fn(nb, |i, j| {
        T::from_f64(2.0 * random::unit(seed, i as u64, j as u64) - 1.0)
    })
}

/// Symmetric positive definite tile: random symmetric part plus `nb` on the diagonal.
pub(crate) fn spd_tile<T: Scalar>(nb: usize, seed: u64) -> Tile<T> {
    TiledMatrix::<T>::spd_tile(nb, nb, seed, 0, 0)
}

/// `t` in f64 (exact), for the f64 naive references.
pub(crate) fn widen<T: Scalar>(t: &Tile<T>) -> Tile {
    Tile::from_fn(t.nb(), |i, j| t.get(i, j).to_f64())
}

fn scale_of<T: Scalar>(t: &Tile<T>) -> f64 {
    t.as_slice()
        .iter()
        .fold(1.0f64, |m, x| m.max(x.to_f64().abs()))
}

/// All elements within `tol * max(1, max |want|)`; `got` and `want` may differ in type
/// (compared in f64).
pub(crate) fn assert_close<T: Scalar, U: Scalar>(
    got: &Tile<T>,
    want: &Tile<U>,
    tol: f64,
    ctx: &str,
) {
    assert_eq!(got.nb(), want.nb(), "{ctx}: order");
    let bound = tol * scale_of(want);
    let nb = got.nb();
    for j in 0..nb {
        for i in 0..nb {
            let (g, w) = (got.get(i, j).to_f64(), want.get(i, j).to_f64());
            assert!(
                (g - w).abs() <= bound,
                "{ctx}: ({i}, {j}) got {g}, want {w}"
            );
        }
    }
}

/// Lower triangles (diagonal included) within tolerance, as [`assert_close`].
pub(crate) fn lower_eq<T: Scalar, U: Scalar>(got: &Tile<T>, want: &Tile<U>, tol: f64, ctx: &str) {
    let bound = tol * scale_of(want);
    for j in 0..got.nb() {
        for i in j..got.nb() {
            let (g, w) = (got.get(i, j).to_f64(), want.get(i, j).to_f64());
            assert!(
                (g - w).abs() <= bound,
                "{ctx}: ({i}, {j}) got {g}, want {w}"
            );
        }
    }
}

/// Strictly upper triangles bit-for-bit equal (the kernels must not touch them).
pub(crate) fn upper_eq<T: Scalar>(got: &Tile<T>, orig: &Tile<T>, ctx: &str) {
    for j in 0..got.nb() {
        for i in 0..j {
            // Widening is exact and injective on non-NaN values.
            assert_eq!(
                got.get(i, j).to_f64().to_bits(),
                orig.get(i, j).to_f64().to_bits(),
                "{ctx}: ({i}, {j}) changed"
            );
        }
    }
}

pub(crate) mod naive {
    //! In f64 only: inputs of another type are widened first (`super::widen`).
    use crate::{Scalar, Tile, TiledMatrix};

    /// Cholesky-Crout on the lower triangle; the strict upper triangle is copied from `a`.
    pub(crate) fn potrf(a: &Tile) -> Tile {
        let n = a.nb();
        let mut l = a.clone();
        for j in 0..n {
            let mut d = a.get(j, j);
            for k in 0..j {
                d -= l.get(j, k) * l.get(j, k);
            }
            let ljj = d.sqrt();
            l.set(j, j, ljj);
            for i in j + 1..n {
                let mut s = a.get(i, j);
                for k in 0..j {
                    s -= l.get(i, k) * l.get(j, k);
                }
                l.set(i, j, s / ljj);
            }
        }
        l
    }

    /// `B L^-T` row by row: each row `x` solves `x L^T = b` by forward substitution.
    pub(crate) fn trsm(l: &Tile, b: &Tile) -> Tile {
        let n = l.nb();
        let mut x = b.clone();
        for r in 0..n {
            for j in 0..n {
                let mut s = b.get(r, j);
                for k in 0..j {
                    s -= x.get(r, k) * l.get(j, k);
                }
                x.set(r, j, s / l.get(j, j));
            }
        }
        x
    }

    /// `alpha a op(b) + beta c`, `op(b) = b^T` if `b_trans`.
    pub(crate) fn gemm(alpha: f64, a: &Tile, b: &Tile, b_trans: bool, beta: f64, c: &Tile) -> Tile {
        let n = a.nb();
        Tile::from_fn(n, |i, j| {
            let dot: f64 = (0..n)
                .map(|k| a.get(i, k) * if b_trans { b.get(j, k) } else { b.get(k, j) })
                .sum();
            alpha * dot + beta * c.get(i, j)
        })
    }

    /// One heat step on a dense column-major `n x n` grid, all edges Dirichlet.
    pub(crate) fn heat_step_dense(u: &[f64], n: usize, alpha: f64) -> Vec<f64> {
        let at = |r: usize, c: usize| u[r + c * n];
        let mut out = u.to_vec();
        for c in 1..n.saturating_sub(1) {
            for r in 1..n - 1 {
                out[r + c * n] = (1.0 - 4.0 * alpha) * at(r, c)
                    + alpha * ((at(r - 1, c) + at(r + 1, c)) + (at(r, c - 1) + at(r, c + 1)));
            }
        }
        out
    }

    /// Dense symmetric matrix from the lower tiles (and lower triangles of diagonal tiles),
    /// in f64.
    pub(crate) fn symmetric_dense<T: Scalar>(a: &TiledMatrix<T>) -> Vec<f64> {
        let n = a.n();
        let mut d = lower_dense(a);
        for c in 0..n {
            for r in 0..c {
                d[r + c * n] = d[c + r * n];
            }
        }
        d
    }

    /// Dense lower-triangular matrix from the lower tiles, in f64; zeros above the
    /// diagonal.
    pub(crate) fn lower_dense<T: Scalar>(a: &TiledMatrix<T>) -> Vec<f64> {
        let (n, nb) = (a.n(), a.nb());
        let mut d = vec![0.0; n * n];
        for c in 0..n {
            for r in c..n {
                d[r + c * n] = a
                    .tile(r / nb, c / nb)
                    .expect("lower tile")
                    .get(r % nb, c % nb)
                    .to_f64();
            }
        }
        d
    }

    /// Dense Cholesky (lower, zeros above) of a dense symmetric matrix.
    pub(crate) fn dense_cholesky(a: &[f64], n: usize) -> Vec<f64> {
        let t = Tile::from_col_major(n, a.to_vec()).expect("n x n");
        let l = potrf(&t);
        Tile::from_fn(n, |i, j| if i >= j { l.get(i, j) } else { 0.0 }).into_vec()
    }

    /// Dense `alpha a b + beta c`.
    pub(crate) fn dense_gemm(
        alpha: f64,
        a: &[f64],
        b: &[f64],
        beta: f64,
        c: &[f64],
        n: usize,
    ) -> Vec<f64> {
        let t = |v: &[f64]| Tile::from_col_major(n, v.to_vec()).expect("n x n");
        gemm(alpha, &t(a), &t(b), false, beta, &t(c)).into_vec()
    }
}
