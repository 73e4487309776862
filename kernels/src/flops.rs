//! Floating-point operation counts, for GFlop/s figures.
//!
//! Per-kernel counts follow LAPACK Working Note 41 (Blackford & Dongarra, "Installation
//! guide for LAPACK", appendix on operation counts): multiplications plus additions, for
//! square `nb x nb` operands. Whole-algorithm counts follow what StarPU's examples print:
//! `n^3 / 3` for Cholesky (`examples/cholesky/cholesky_implicit.c`) and `2 n^3` for GEMM,
//! so GFlop/s figures are comparable with StarPU's.
//!
//! All counts are `f64` because `2 n^3` overflows `u64` only past `n = 2 * 10^6`, but
//! ratios and rates are wanted in floating point anyway.

/// `potrf` on `nb x nb`: `nb^3/3 + nb^2/2 + nb/6`, computed as the integer
/// `nb (nb + 1) (2 nb + 1) / 6`.
pub fn potrf(nb: usize) -> f64 {
    let n = nb as f64;
    n * (n + 1.0) * (2.0 * n + 1.0) / 6.0
}

/// `trsm` (right side) on `nb x nb`: `m n^2` with `m = n = nb`, i.e. `nb^3`.
pub fn trsm(nb: usize) -> f64 {
    let n = nb as f64;
    n * n * n
}

/// `syrk` on `nb x nb` with `k = nb`: `k n (n + 1)`, i.e. `nb^3 + nb^2`.
pub fn syrk(nb: usize) -> f64 {
    let n = nb as f64;
    n * n * (n + 1.0)
}

/// `gemm` on `nb x nb` (either transposition): `2 nb^3`.
pub fn gemm(nb: usize) -> f64 {
    let n = nb as f64;
    2.0 * n * n * n
}

/// One [`heat_step`](crate::heat_step) on `nb x nb`: 6 per cell
/// (`c0*u + alpha*((n + s) + (w + e))`: 2 multiplications, 4 additions), boundary cells
/// included.
pub fn heat_step(nb: usize) -> f64 {
    let n = nb as f64;
    6.0 * n * n
}

/// Cholesky of an `n x n` matrix as StarPU reports it: `n^3 / 3`.
pub fn cholesky(n: usize) -> f64 {
    let n = n as f64;
    n * n * n / 3.0
}

/// GEMM `C = alpha A B + beta C` with `n x n` matrices: `2 n^3`.
pub fn gemm_total(n: usize) -> f64 {
    gemm(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_counts_add_up_to_cholesky() {
        // Tiled Cholesky with t x t tiles runs t potrf, t(t-1)/2 trsm and syrk, and
        // t(t-1)(t-2)/6 gemm; the sum must be n^3/3 up to lower-order terms.
        let (t, nb) = (16usize, 256usize);
        let n = t * nb;
        let sum = t as f64 * potrf(nb)
            + (t * (t - 1) / 2) as f64 * (trsm(nb) + syrk(nb))
            + (t * (t - 1) * (t - 2) / 6) as f64 * gemm(nb);
        let rel = (sum - cholesky(n)).abs() / cholesky(n);
        assert!(
            rel < 0.01,
            "tile sum {sum} vs n^3/3 {} (rel {rel})",
            cholesky(n)
        );
    }

    #[test]
    fn small_values() {
        assert_eq!(potrf(1), 1.0);
        assert_eq!(gemm(2), 16.0);
        assert_eq!(trsm(3), 27.0);
        assert_eq!(syrk(2), 12.0);
        assert_eq!(heat_step(10), 600.0);
    }
}
