//! The trace clock: one monotonic clock for the whole process.
//!
//! Every timestamp in a trace (task submit/ready/start/end, energy samples) is a
//! [`Timestamp`]: nanoseconds since a process-wide origin taken the first time the clock is
//! read. One origin for every thread is what lets the attribution clip task executions to
//! meter intervals without any per-thread offset.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Nanoseconds on the trace clock (since the process-wide origin).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The origin of the trace clock.
    pub const ZERO: Timestamp = Timestamp(0);

    /// Nanoseconds since the origin.
    #[inline]
    pub fn as_ns(self) -> u64 {
        self.0
    }

    /// Seconds since the origin.
    #[inline]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// `self - earlier` in nanoseconds, saturating at zero.
    #[inline]
    pub fn saturating_sub(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

struct Origin {
    instant: Instant,
    unix_ns: u64,
    /// Where the TSC can stand in for CLOCK_MONOTONIC (see [`Tsc`]).
    tsc: Option<Tsc>,
}

/// The TSC calibration again, for [`Clock::now`]'s fast path: `TSC_SCALE` is the
/// origin's `ns_per_tick_q32` once the origin is set and uses the TSC, 0 before or
/// otherwise; `TSC_BASE` is its `tsc0`, stored before the scale is published.
static TSC_BASE: AtomicU64 = AtomicU64::new(0);
static TSC_SCALE: AtomicU64 = AtomicU64::new(0);

fn origin() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    let o = ORIGIN.get_or_init(|| {
        // The wall clock first: the origin is the start of the calibration, microseconds
        // later, not its end (2 ms later).
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let tsc = Tsc::calibrate();
        Origin {
            instant: tsc.map_or_else(Instant::now, |t| t.instant0),
            unix_ns,
            tsc,
        }
    });
    if let Some(t) = &o.tsc {
        if TSC_SCALE.load(Ordering::Relaxed) == 0 {
            TSC_BASE.store(t.tsc0, Ordering::Relaxed);
            TSC_SCALE.store(t.ns_per_tick_q32, Ordering::Release);
        }
    }
    o
}

/// The time-stamp counter as the trace clock, on x86-64 where the kernel itself trusts it.
///
/// A traced task reads the clock three times on its worker (start, end) and its
/// submitter; `clock_gettime` costs ~45 ns on a VM, `rdtsc` about half. The TSC is used
/// only where Linux's own clocksource is `tsc`: the kernel has then checked that it is
/// invariant and synchronised across CPUs. Its rate is measured once against
/// CLOCK_MONOTONIC over [`Tsc::CALIBRATION`] (a few ppm; every timestamp of a trace,
/// energy samples included, comes from this one clock, so they stay consistent).
/// `TASKWATT_CLOCK=monotonic` turns it off.
#[derive(Clone, Copy, Debug)]
struct Tsc {
    /// TSC and CLOCK_MONOTONIC at the origin.
    tsc0: u64,
    instant0: Instant,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    ns_per_tick_q32: u64,
}

impl Tsc {
    const CALIBRATION: std::time::Duration = std::time::Duration::from_millis(2);

    fn calibrate() -> Option<Tsc> {
        if !Self::trusted() {
            return None;
        }
        let (t0, i0) = Self::pair()?;
        while i0.elapsed() < Self::CALIBRATION {
            std::hint::spin_loop();
        }
        let (t1, i1) = Self::pair()?;
        let ns = i1.duration_since(i0).as_nanos();
        let ticks = t1.checked_sub(t0)? as u128;
        if ticks == 0 {
            return None;
        }
        Some(Tsc {
            tsc0: t0,
            instant0: i0,
            ns_per_tick_q32: u64::try_from((ns << 32) / ticks).ok()?,
        })
    }

    /// Whether Linux uses the TSC as its clocksource, and the user did not opt out.
    fn trusted() -> bool {
        if !cfg!(target_arch = "x86_64")
            || std::env::var("TASKWATT_CLOCK").is_ok_and(|v| v == "monotonic")
        {
            return false;
        }
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
    }

    /// A TSC reading and an `Instant` taken as close together as this thread can: the
    /// tightest of a few tries brackets the TSC read.
    fn pair() -> Option<(u64, Instant)> {
        (0..5)
            .filter_map(|_| {
                let a = Instant::now();
                let t = read_tsc()?;
                let b = Instant::now();
                Some((b.duration_since(a), t, a + b.duration_since(a) / 2))
            })
            .min_by_key(|(w, _, _)| *w)
            .map(|(_, t, i)| (t, i))
    }

    #[inline]
    fn ns_since_origin(&self, tsc: u64) -> u64 {
        ns_since(tsc, self.tsc0, self.ns_per_tick_q32)
    }
}

/// Nanoseconds from `tsc0` to `tsc` at `ns_per_tick_q32` (32.32 fixed point).
#[inline]
fn ns_since(tsc: u64, tsc0: u64, ns_per_tick_q32: u64) -> u64 {
    // Saturating: a read a few cycles before `tsc0` on another core gives 0, not 2^64.
    let ticks = tsc.saturating_sub(tsc0) as u128;
    ((ticks * ns_per_tick_q32 as u128) >> 32) as u64
}

#[inline]
fn read_tsc() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions on x86-64 (it is always present there).
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The process-wide trace clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock;

/// The environment variable that chooses the trace clock (see [`Clock::check_env`]).
pub const CLOCK_ENV: &str = "TASKWATT_CLOCK";

impl Clock {
    /// Checks `TASKWATT_CLOCK`: unset, `tsc` (the default: the TSC where Linux trusts it,
    /// else CLOCK_MONOTONIC) or `monotonic` (always CLOCK_MONOTONIC). Anything else is an
    /// error naming the value, rather than a setting silently ignored.
    pub fn check_env() -> Result<(), crate::TraceError> {
        match std::env::var(CLOCK_ENV) {
            Err(std::env::VarError::NotPresent) => Ok(()),
            Ok(v) if v == "tsc" || v == "monotonic" => Ok(()),
            Ok(v) => Err(crate::TraceError::ClockEnv { value: v }),
            Err(std::env::VarError::NotUnicode(v)) => Err(crate::TraceError::ClockEnv {
                value: v.to_string_lossy().into_owned(),
            }),
        }
    }

    /// Now, on the trace clock.
    #[inline]
    pub fn now() -> Timestamp {
        // Fast path, once calibrated: two loads and the TSC, no call, no `OnceLock` check.
        let scale = TSC_SCALE.load(Ordering::Acquire);
        if scale != 0 {
            if let Some(t) = read_tsc() {
                return Timestamp(ns_since(t, TSC_BASE.load(Ordering::Relaxed), scale));
            }
        }
        let o = origin();
        if let Some(tsc) = &o.tsc {
            if let Some(t) = read_tsc() {
                return Timestamp(tsc.ns_since_origin(t));
            }
        }
        Timestamp(o.instant.elapsed().as_nanos() as u64)
    }

    /// Whether the clock reads the TSC (else CLOCK_MONOTONIC).
    pub fn uses_tsc() -> bool {
        origin().tsc.is_some()
    }

    /// Wall-clock time (ns since the Unix epoch) of the trace clock's origin.
    pub fn origin_unix_ns() -> u64 {
        origin().unix_ns
    }

    /// Wall-clock time now, in ns since the Unix epoch.
    pub fn unix_now_ns() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_tracks_the_monotonic_clock() {
        // Whichever source is in use, the trace clock advances at CLOCK_MONOTONIC's rate:
        // 50 ms measured both ways agree within 1 %.
        let (c0, i0) = (Clock::now(), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (c1, i1) = (Clock::now(), Instant::now());
        let trace = (c1.0 - c0.0) as f64;
        let mono = i1.duration_since(i0).as_nanos() as f64;
        assert!(
            (trace / mono - 1.0).abs() < 0.01,
            "trace clock {trace} ns vs monotonic {mono} ns (tsc: {})",
            Clock::uses_tsc()
        );
    }

    #[test]
    fn tsc_scale_is_exact_on_whole_ticks() {
        let t = Tsc {
            tsc0: 1000,
            instant0: Instant::now(),
            // 0.5 ns per tick (a 2 GHz TSC).
            ns_per_tick_q32: 1 << 31,
        };
        assert_eq!(t.ns_since_origin(1000), 0);
        assert_eq!(t.ns_since_origin(3000), 1000);
        // Before the origin (another core, a few cycles early): clamped to 0.
        assert_eq!(t.ns_since_origin(10), 0);
    }

    #[test]
    fn clock_is_monotonic_across_threads() {
        let a = Clock::now();
        let b = std::thread::spawn(Clock::now).join().unwrap();
        let c = Clock::now();
        assert!(a <= b && b <= c, "{a:?} {b:?} {c:?}");
    }
}
