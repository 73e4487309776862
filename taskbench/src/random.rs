//! Task Bench's deterministic "random" numbers (core/core_random.cc): the 128-bit
//! MurmurHash3 (Appleby's public-domain x64_128 variant) of a key of `long`s with seed
//! 1234567; the first 64 bits, scaled by 2^-64, give a uniform value in [0, 1).
//!
//! random_nearest keeps a dependency when this value is below `fraction_connected`, and
//! load_imbalance scales iterations by it, so the same key must give the same bits as in
//! Task Bench for the graphs and FLOP counts to agree.

const SEED: u32 = 1_234_567;

/// A uniform value in [0, 1) determined by `key` (Task Bench's `random_uniform` over the
/// key's native little-endian bytes).
pub(crate) fn random_uniform(key: &[i64]) -> f64 {
    let mut bytes = Vec::with_capacity(key.len() * 8);
    for k in key {
        bytes.extend_from_slice(&k.to_le_bytes());
    }
    let [h1, _] = murmur3_x64_128(&bytes, SEED);
    h1 as f64 * (-64f64).exp2()
}

/// MurmurHash3_x64_128 of `data`: the two 64-bit halves, low first.
pub(crate) fn murmur3_x64_128(data: &[u8], seed: u32) -> [u64; 2] {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let mut h1 = seed as u64;
    let mut h2 = seed as u64;

    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let k1 = u64::from_le_bytes(block[..8].try_into().expect("8 bytes"));
        let k2 = u64::from_le_bytes(block[8..].try_into().expect("8 bytes"));
        h1 ^= mix_k1(k1, C1, C2);
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2, C1, C2);
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    // The tail: bytes 8.. feed k2, bytes ..8 feed k1, both little-endian.
    let tail = blocks.remainder();
    if tail.len() > 8 {
        h2 ^= mix_k2(le_partial(&tail[8..]), C1, C2);
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(le_partial(&tail[..tail.len().min(8)]), C1, C2);
    }

    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    [h1, h2]
}

fn mix_k1(k1: u64, c1: u64, c2: u64) -> u64 {
    k1.wrapping_mul(c1).rotate_left(31).wrapping_mul(c2)
}

fn mix_k2(k2: u64, c1: u64, c2: u64) -> u64 {
    k2.wrapping_mul(c2).rotate_left(33).wrapping_mul(c1)
}

fn le_partial(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |k, (i, &b)| k | (b as u64) << (8 * i))
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values from the Python `mmh3` package (MurmurHash3_x64_128).
    #[test]
    fn matches_reference_murmur3() {
        assert_eq!(
            murmur3_x64_128(b"hello", 0),
            [0xcbd8_a7b3_41bd_9b02, 0x5b1e_906a_48ae_1d19]
        );
        let key: Vec<u8> = [0i64, 3, 0, 1, 2]
            .iter()
            .flat_map(|k| k.to_le_bytes())
            .collect();
        assert_eq!(
            murmur3_x64_128(&key, SEED),
            [0x5c5d_7e46_86ae_1dbe, 0x0bef_de11_0c8f_bd71]
        );
        let key: Vec<u8> = [1i64, 2, 3].iter().flat_map(|k| k.to_le_bytes()).collect();
        assert_eq!(
            murmur3_x64_128(&key, SEED),
            [0x2ccb_3ff8_bc63_3379, 0x8e55_f6c2_0a46_acfd]
        );
        assert_eq!(murmur3_x64_128(b"", 0), [0, 0]);
    }

    #[test]
    fn uniform_is_in_unit_interval_and_spread() {
        let vals: Vec<f64> = (0..1000).map(|i| random_uniform(&[i, 7])).collect();
        assert!(vals.iter().all(|v| (0.0..1.0).contains(v)));
        let below_half = vals.iter().filter(|v| **v < 0.5).count();
        assert!((400..600).contains(&below_half), "{below_half}");
        assert_eq!(
            random_uniform(&[0, 3, 0, 1, 2]),
            0x5c5d_7e46_86ae_1dbe_u64 as f64 / 2f64.powi(64)
        );
    }
}
