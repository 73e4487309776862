//! Counter-based pseudo-random numbers: element `(r, c)` of a generated matrix is a pure
//! function of `(seed, r, c)`, so any tile can be generated alone, by any thread, in any
//! order, and still match the same tile generated as part of the whole matrix.

/// SplitMix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a bijective 64-bit mixer with good avalanche.
#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 64 random bits for the pair `(a, b)` under `seed`.
#[inline]
pub(crate) fn bits(seed: u64, a: u64, b: u64) -> u64 {
    splitmix64(splitmix64(splitmix64(seed) ^ a) ^ b)
}

/// Uniform in `[0, 1)` for `(a, b)` under `seed` (53 random mantissa bits).
#[inline]
pub(crate) fn unit(seed: u64, a: u64, b: u64) -> f64 {
    (bits(seed, a, b) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `+1` or `-1` with equal probability, for `(a, b)` under `seed`.
#[inline]
pub(crate) fn sign(seed: u64, a: u64, b: u64) -> f64 {
    if bits(seed, a, b) >> 63 == 0 {
        1.0
    } else {
        -1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_is_in_range_and_roughly_uniform() {
        let n = 10_000;
        let xs: Vec<f64> = (0..n).map(|i| unit(7, i, 3)).collect();
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
    }

    #[test]
    fn depends_on_every_input() {
        assert_ne!(bits(1, 2, 3), bits(2, 2, 3));
        assert_ne!(bits(1, 2, 3), bits(1, 3, 3));
        assert_ne!(bits(1, 2, 3), bits(1, 2, 4));
        assert_ne!(bits(1, 2, 3), bits(1, 3, 2));
        assert_eq!(bits(1, 2, 3), bits(1, 2, 3));
    }

    #[test]
    fn signs_are_balanced() {
        let s: f64 = (0..10_000).map(|i| sign(5, i, 0)).sum();
        assert!(s.abs() < 400.0, "sum of signs {s}");
    }
}
