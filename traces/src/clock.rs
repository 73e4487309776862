//! The trace clock: one monotonic clock for the whole process.
//!
//! Every timestamp in a trace (task submit/ready/start/end, energy samples) is a
//! [`Timestamp`]: nanoseconds since a process-wide origin taken the first time the clock is
//! read. One origin for every thread is what lets the attribution clip task executions to
//! meter intervals without any per-thread offset.

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
}

fn origin() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    ORIGIN.get_or_init(|| Origin {
        instant: Instant::now(),
        unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    })
}

/// The process-wide trace clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock;

impl Clock {
    /// Now, on the trace clock.
    #[inline]
    pub fn now() -> Timestamp {
        let o = origin();
        Timestamp(o.instant.elapsed().as_nanos() as u64)
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
    fn clock_is_monotonic_across_threads() {
        let a = Clock::now();
        let b = std::thread::spawn(Clock::now).join().unwrap();
        let c = Clock::now();
        assert!(a <= b && b <= c, "{a:?} {b:?} {c:?}");
    }
}
