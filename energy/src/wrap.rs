//! Raw readings to monotone cumulative joules: the one place where counter wraparound and
//! power integration are handled, for every backend.
//!
//! # Counters
//! A RAPL counter is 32 bits wide (in energy units of 2^-14 J on most Intel parts, so it wraps
//! every 262 kJ: about 20 min at 200 W), and powercap scales it to `energy_uj`, which wraps at
//! `max_energy_range_uj`. [`CounterUnwrapper`] keeps the sum of forward steps in raw units,
//! exactly, in a `u128`:
//! - a forward step (`raw >= last`) adds `raw - last`;
//! - a backward step larger than half the wrap range is a wrap and adds `raw + range - last`;
//! - a smaller backward step cannot be a wrap between two reads taken less than half a wrap
//!   period apart (the sampler reads every ≤ 1 s, a wrap takes minutes), so it is a sensor
//!   glitch: it adds nothing, keeps the previous value as reference (so a one-off bad read
//!   costs nothing) and is counted in [`CounterUnwrapper::glitches`].
//!
//! The invariant: as long as consecutive reads are less than half a wrap range apart in energy,
//! the cumulative value equals the true energy since the first read, to the counter's unit
//! (property-tested below). Counters without a wrap range (64-bit perf and NVML counters) only
//! ever step forward or glitch.
//!
//! # Powers
//! Power-only sensors (NVML `power_usage` before Volta, or when the energy counter is
//! unsupported) are integrated with the trapezoid rule between the sampler's timestamps
//! ([`PowerIntegrator`]). The sensor may itself average over a window (1 s on Ampere and later
//! except GA100): that lag is recorded in the domain's `SensorKind`, not corrected here.

use taskwatt_traces::Timestamp;

use crate::meter::{DomainSpec, RawReading};

/// Unwraps one raw counter into cumulative raw units since its first reading.
#[derive(Clone, Debug)]
pub struct CounterUnwrapper {
    range: Option<u64>,
    last: Option<u64>,
    total: u128,
    wraps: u64,
    glitches: u64,
}

impl CounterUnwrapper {
    /// An unwrapper for a counter that wraps modulo `range` raw units (`None`: never wraps).
    pub fn new(range: Option<u64>) -> Self {
        CounterUnwrapper {
            range: range.filter(|&r| r > 0),
            last: None,
            total: 0,
            wraps: 0,
            glitches: 0,
        }
    }

    /// Feeds the next raw reading; returns the cumulative raw units since the first reading.
    pub fn update(&mut self, raw: u64) -> u128 {
        let Some(last) = self.last else {
            self.last = Some(raw);
            return 0;
        };
        if raw >= last {
            self.total += u128::from(raw - last);
            self.last = Some(raw);
            return self.total;
        }
        let back = last - raw;
        match self.range {
            // `back > range / 2` written without rounding: 2 * back > range.
            Some(range) if u128::from(back) * 2 > u128::from(range) => {
                // raw + range - last, which is > 0 unless raw was outside the range.
                let step = (u128::from(raw) + u128::from(range)).saturating_sub(u128::from(last));
                self.total += step;
                self.wraps += 1;
                self.last = Some(raw);
            }
            _ => self.glitches += 1,
        }
        self.total
    }

    /// Cumulative raw units since the first reading.
    pub fn total(&self) -> u128 {
        self.total
    }

    /// How many wraps were unwrapped.
    pub fn wraps(&self) -> u64 {
        self.wraps
    }

    /// How many small backward steps were ignored as glitches.
    pub fn glitches(&self) -> u64 {
        self.glitches
    }
}

/// Integrates a power reading over the sampler's timestamps (trapezoid rule).
#[derive(Clone, Debug, Default)]
pub struct PowerIntegrator {
    last: Option<(Timestamp, f64)>,
    total_j: f64,
    glitches: u64,
}

impl PowerIntegrator {
    /// A fresh integrator (0 J).
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a power `watts` read at `t`; returns the cumulative energy in J since the first
    /// reading. A non-finite or negative power, or a timestamp that goes backwards, is a glitch:
    /// it is counted and skipped.
    pub fn update(&mut self, t: Timestamp, watts: f64) -> f64 {
        if !watts.is_finite() || watts < 0.0 {
            self.glitches += 1;
            return self.total_j;
        }
        match self.last {
            None => self.last = Some((t, watts)),
            Some((t0, _)) if t < t0 => self.glitches += 1,
            Some((t0, w0)) => {
                let dt_s = t.saturating_sub(t0) as f64 * 1e-9;
                self.total_j += 0.5 * (w0 + watts) * dt_s;
                self.last = Some((t, watts));
            }
        }
        self.total_j
    }

    /// Cumulative energy in J.
    pub fn total_j(&self) -> f64 {
        self.total_j
    }

    /// Readings skipped as glitches.
    pub fn glitches(&self) -> u64 {
        self.glitches
    }
}

/// The per-domain state that turns raw readings into cumulative J, chosen from the domain's
/// [`DomainSpec`]: counters are unwrapped, powers integrated.
#[derive(Clone, Debug)]
pub enum Accumulator {
    /// A cumulative counter, `joules_per_unit` J per raw unit.
    Counter {
        /// The unwrapper.
        unwrapper: CounterUnwrapper,
        /// J per raw unit.
        joules_per_unit: f64,
    },
    /// A power sensor.
    Power(PowerIntegrator),
}

impl Accumulator {
    /// The accumulator for `spec`.
    pub fn for_domain(spec: &DomainSpec) -> Accumulator {
        match spec.sensor {
            taskwatt_traces::SensorKind::EnergyCounter
            | taskwatt_traces::SensorKind::SampledCounter { .. } => Accumulator::Counter {
                unwrapper: CounterUnwrapper::new(spec.wrap_range_raw),
                joules_per_unit: spec.joules_per_unit,
            },
            taskwatt_traces::SensorKind::IntegratedPower { .. } => {
                Accumulator::Power(PowerIntegrator::new())
            }
        }
    }

    /// Feeds one reading taken at `t`; returns cumulative J since the first reading. A reading
    /// of the wrong kind (a power for a counter domain, or the reverse) is a backend bug: it is
    /// counted as a glitch and the previous total is returned.
    pub fn update(&mut self, t: Timestamp, reading: RawReading) -> f64 {
        match (self, reading) {
            (
                Accumulator::Counter {
                    unwrapper,
                    joules_per_unit,
                },
                RawReading::Counter(raw),
            ) => unwrapper.update(raw) as f64 * *joules_per_unit,
            (Accumulator::Power(p), RawReading::Power(w)) => p.update(t, w),
            (acc, _) => {
                acc.count_glitch();
                acc.total_j()
            }
        }
    }

    /// Cumulative J so far.
    pub fn total_j(&self) -> f64 {
        match self {
            Accumulator::Counter {
                unwrapper,
                joules_per_unit,
            } => unwrapper.total() as f64 * joules_per_unit,
            Accumulator::Power(p) => p.total_j(),
        }
    }

    /// Wraps unwrapped so far (0 for powers).
    pub fn wraps(&self) -> u64 {
        match self {
            Accumulator::Counter { unwrapper, .. } => unwrapper.wraps(),
            Accumulator::Power(_) => 0,
        }
    }

    /// Glitches skipped so far.
    pub fn glitches(&self) -> u64 {
        match self {
            Accumulator::Counter { unwrapper, .. } => unwrapper.glitches(),
            Accumulator::Power(p) => p.glitches(),
        }
    }

    fn count_glitch(&mut self) {
        match self {
            Accumulator::Counter { unwrapper, .. } => unwrapper.glitches += 1,
            Accumulator::Power(p) => p.glitches += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unwraps_a_32_bit_counter() {
        let m = 1u64 << 32;
        let mut u = CounterUnwrapper::new(Some(m));
        assert_eq!(u.update(m - 10), 0);
        assert_eq!(u.update(m - 1), 9);
        assert_eq!(u.update(5), 15); // wrapped: 1 to reach m, then 5
        assert_eq!(u.wraps(), 1);
        assert_eq!(u.update(5), 15);
    }

    #[test]
    fn small_backward_step_is_a_glitch_and_costs_nothing() {
        let mut u = CounterUnwrapper::new(Some(1000));
        u.update(100);
        assert_eq!(u.update(150), 50);
        assert_eq!(u.update(140), 50); // glitch
        assert_eq!(u.glitches(), 1);
        assert_eq!(u.update(160), 60); // measured from 150, the last good value
        assert_eq!(u.wraps(), 0);
    }

    #[test]
    fn exactly_half_a_range_backwards_is_not_a_wrap() {
        let mut u = CounterUnwrapper::new(Some(1000));
        u.update(600);
        assert_eq!(u.update(100), 0);
        assert_eq!(u.glitches(), 1);
        assert_eq!(u.update(99), 499); // 501 back: a wrap of 499
    }

    #[test]
    fn counters_without_range_never_wrap() {
        let mut u = CounterUnwrapper::new(None);
        u.update(u64::MAX - 1);
        assert_eq!(u.update(3), 0);
        assert_eq!(u.glitches(), 1);
        assert_eq!(u.wraps(), 0);
    }

    #[test]
    fn trapezoid_integration() {
        let mut p = PowerIntegrator::new();
        assert_eq!(p.update(Timestamp(0), 100.0), 0.0);
        assert!((p.update(Timestamp(1_000_000_000), 200.0) - 150.0).abs() < 1e-9);
        assert!((p.update(Timestamp(1_500_000_000), 200.0) - 250.0).abs() < 1e-9);
        // Glitches are skipped.
        assert!((p.update(Timestamp(1_600_000_000), f64::NAN) - 250.0).abs() < 1e-9);
        assert!((p.update(Timestamp(1_000_000_000), 10.0) - 250.0).abs() < 1e-9);
        assert_eq!(p.glitches(), 2);
    }

    #[test]
    fn accumulator_follows_the_domain_kind() {
        use crate::meter::Coverage;
        use taskwatt_traces::{Domain, SensorKind};
        let spec = DomainSpec {
            domain: Domain::CpuPackage { id: 0 },
            name: "package-0".into(),
            unit: "uJ".into(),
            joules_per_unit: 1e-6,
            resolution_j: 1e-6,
            wrap_range_raw: Some(1_000_000),
            sensor: SensorKind::EnergyCounter,
            update_interval_ns: None,
            covers: Coverage::Package { id: 0 },
        };
        let mut a = Accumulator::for_domain(&spec);
        a.update(Timestamp(0), RawReading::Counter(999_000));
        let j = a.update(Timestamp(1), RawReading::Counter(500));
        assert!((j - 1500e-6).abs() < 1e-12);
        assert_eq!(a.wraps(), 1);
        // A power fed to a counter domain is a glitch.
        assert!((a.update(Timestamp(2), RawReading::Power(5.0)) - 1500e-6).abs() < 1e-12);
        assert_eq!(a.glitches(), 1);
    }

    proptest! {
        /// With steps below half the range, the unwrapped total is exactly the sum of steps,
        /// whatever the start value and however many wraps.
        #[test]
        fn unwrapped_total_is_the_true_sum(
            range in 16u64..=(1u64 << 40),
            start_frac in 0.0f64..1.0,
            steps_frac in proptest::collection::vec(0.0f64..1.0, 1..200),
        ) {
            let start = ((range - 1) as f64 * start_frac) as u64;
            let max_step = (range - 1) / 2; // 2 * step < range
            let mut u = CounterUnwrapper::new(Some(range));
            u.update(start);
            let mut truth: u128 = 0;
            for f in steps_frac {
                let step = (max_step as f64 * f) as u64;
                truth += u128::from(step);
                let raw = ((u128::from(start) + truth) % u128::from(range)) as u64;
                prop_assert_eq!(u.update(raw), truth);
            }
            prop_assert_eq!(u.glitches(), 0);
        }

        /// Whatever the sensor says, the total never goes down.
        #[test]
        fn total_is_monotone(
            range in proptest::option::of(2u64..1_000_000),
            raws in proptest::collection::vec(0u64..2_000_000, 1..200),
        ) {
            let mut u = CounterUnwrapper::new(range);
            let mut prev = 0u128;
            for raw in raws {
                let t = u.update(raw);
                prop_assert!(t >= prev);
                prev = t;
            }
        }

        /// Integrated power is monotone and matches a constant power exactly.
        #[test]
        fn constant_power_integrates_exactly(w in 0.0f64..1000.0, dts in proptest::collection::vec(1u64..1_000_000_000, 1..50)) {
            let mut p = PowerIntegrator::new();
            let mut t = 0u64;
            p.update(Timestamp(t), w);
            for dt in dts { t += dt; p.update(Timestamp(t), w); }
            let expect = w * t as f64 * 1e-9;
            prop_assert!((p.total_j() - expect).abs() <= 1e-9 * expect.max(1.0));
        }
    }
}
