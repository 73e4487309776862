//! The simulated meters' white power noise: deterministic from a seed, independent of when
//! the meter is read.
//!
//! Time is cut into 1 ms steps on the trace clock. Step `i` of a domain draws one standard
//! normal `z_i` and adds `σ·z_i` W for that millisecond, i.e. `σ·z_i·1 ms` J; the cumulative
//! noise at a boundary `B` sums the steps that end at or before `B`. Draws happen in step
//! order from a per-domain generator, so the noise of step `i` depends only on the seed, the
//! domain and `i`, never on how often the sampler reads.
//!
//! The noise is clipped so that the domain's power never drops below zero (`σ·z ≥ -base`):
//! real counters never run backwards. With the default powers (30 W base, σ = 5 W) the clip
//! is 6σ away and never triggers in practice.
//!
//! The generator is SplitMix64 (Steele, Lea, Flood 2014) and the normal comes from the
//! Box-Muller transform: both are a few lines, so a seed gives the same noise in every build,
//! whatever the version of `rand`.

/// Length of a noise step: the noise's time resolution.
pub(crate) const NOISE_STEP_NS: u64 = 1_000_000;

/// SplitMix64: a tiny, well-mixed, reproducible generator (the simulated meters' noise and
/// per-task variation, and the what-if simulator's deterministic draws).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits (`SplitMix64::new(x).next_u64()` is a good hash of `x`).
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal (Box-Muller; the pair's second value is discarded: two uniforms per
    /// normal are cheap at one draw per millisecond and domain).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = self.next_open01();
        let u2 = self.next_open01();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// Near-normal draws from one 64-bit draw: the sum of four 16-bit uniforms, centred and
/// scaled to unit variance (Irwin-Hall, within ±3.46): a few ns, where Box-Muller's
/// logarithm and cosine cost tens, for the per-task variation drawn at every task start.
impl SplitMix64 {
    pub(crate) fn next_near_normal(&mut self) -> f64 {
        let x = self.next_u64();
        let sum = (x & 0xFFFF) + ((x >> 16) & 0xFFFF) + ((x >> 32) & 0xFFFF) + (x >> 48);
        // Each term is uniform on {0, ..., 65535}: mean 32767.5, variance (65536² - 1)/12.
        const MEAN: f64 = 4.0 * 32_767.5;
        const INV_SD: f64 = 1.0 / 37_837.227_237; // sqrt(4 (65536² - 1) / 12)
        (sum as i64 as f64 - MEAN) * INV_SD
    }
}

/// One domain's cumulative noise energy.
#[derive(Clone, Debug)]
pub(crate) struct NoiseWalk {
    rng: SplitMix64,
    sigma_w: f64,
    floor_w: f64,
    next_step: u64,
    cum_j: f64,
}

impl NoiseWalk {
    /// Noise of standard deviation `sigma_w` from the first step that starts at or after
    /// `t0` (so that every noisy step lies inside the integrated base power and the total
    /// never runs backwards), clipped at `-base_w`; `seed` should differ per domain.
    pub(crate) fn new(seed: u64, sigma_w: f64, base_w: f64, t0: u64) -> Self {
        NoiseWalk {
            rng: SplitMix64::new(seed),
            sigma_w,
            floor_w: -base_w,
            next_step: t0.div_ceil(NOISE_STEP_NS),
            cum_j: 0.0,
        }
    }

    /// The cumulative noise energy in J of the steps that end at or before `b`.
    pub(crate) fn at(&mut self, b: u64) -> f64 {
        let end = b / NOISE_STEP_NS; // steps < end have ended by b
        if self.sigma_w == 0.0 {
            self.next_step = self.next_step.max(end);
            return 0.0;
        }
        while self.next_step < end {
            let w = (self.sigma_w * self.rng.next_normal()).max(self.floor_w);
            self.cum_j += w * (NOISE_STEP_NS as f64 * 1e-9);
            self.next_step += 1;
        }
        self.cum_j
    }
}

/// A seed for one domain, mixed from the configuration's seed and a domain code.
pub(crate) fn domain_seed(seed: u64, code: u64) -> u64 {
    let mut m = SplitMix64::new(seed ^ code.wrapping_mul(0xA24B_AED4_963E_E407));
    m.next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normals_have_unit_variance() {
        let mut r = SplitMix64::new(7);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.next_normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn near_normals_have_unit_variance_and_a_normal_spread() {
        // Per-task draws come from fresh generators seeded by a hash, as in the integrator.
        let n = 200_000u64;
        let xs: Vec<f64> = (0..n)
            .map(|i| SplitMix64::new(i.wrapping_mul(0x9E37_79B9)).next_near_normal())
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        // Within one and two standard deviations: 68.3 % and 95.4 % for a normal (Irwin-Hall
        // of four: 66.5 % and 95.8 %).
        let within = |k: f64| xs.iter().filter(|x| x.abs() < k).count() as f64 / n as f64;
        assert!((within(1.0) - 0.683).abs() < 0.03, "{}", within(1.0));
        assert!((within(2.0) - 0.954).abs() < 0.01, "{}", within(2.0));
        assert!(xs.iter().all(|x| x.abs() <= 3.47));
    }

    #[test]
    fn noise_does_not_depend_on_read_pattern() {
        let ms = NOISE_STEP_NS;
        let mut a = NoiseWalk::new(3, 5.0, 30.0, 0);
        let mut b = NoiseWalk::new(3, 5.0, 30.0, 0);
        for k in 1..=1000 {
            a.at(k * ms + 17);
        }
        let x = a.at(1000 * ms);
        let y = b.at(1000 * ms + 999_999);
        assert_eq!(x, y);
        // Reading the same boundary twice gives the same value.
        assert_eq!(b.at(1000 * ms), y);
        // Another seed gives other noise.
        assert_ne!(NoiseWalk::new(4, 5.0, 30.0, 0).at(1000 * ms), x);
    }

    #[test]
    fn clipping_keeps_power_non_negative() {
        let mut w = NoiseWalk::new(1, 100.0, 1.0, 0);
        let mut prev = 0.0;
        for k in 1..=10_000u64 {
            let e = w.at(k * NOISE_STEP_NS);
            // Never below -base (1 W) for 1 ms, up to rounding of the running sum.
            assert!(e - prev >= -1e-3 - 1e-12, "{}", e - prev);
            prev = e;
        }
    }
}
