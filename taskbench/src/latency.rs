//! What one cache line costs to move between two cores: the unit in which a task runtime's
//! per-task overhead is paid.
//!
//! Handing a task from the submitting thread to a worker, and its completion back, moves
//! a few cache lines between cores: the task's node, the queue slot, the predecessor's
//! state that the next submission reads. Each move costs one core-to-core transfer, and
//! that latency differs between machines several fold (tens of ns between the cores of a
//! desktop part; 78 to 130 ns between the two virtual CPUs of the development VM, from
//! one half hour to the next). An empty-task figure means little
//! without it: BENCHMARKS.md gives both.
//!
//! The measurement is a ping-pong: two threads pinned to two CPUs take turns incrementing
//! one counter, each waiting to see the other's last value, so every turn moves the line
//! once. The one-way latency is the time per turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use taskwatt_traces::Clock;

/// One counter alone in its cache lines (128 bytes: the adjacent-line prefetcher pairs
/// lines).
#[repr(align(128))]
struct Line(AtomicU64);

/// The one-way latency of a cache-line transfer between CPUs `a` and `b` (operating
/// system CPU numbers), in ns: the least over `tries` ping-pongs of `turns` turns each.
/// `None` when either thread cannot be pinned (fewer CPUs, a restricted cpuset), since
/// two threads sharing one CPU would measure the scheduler instead, or when `turns` or
/// `tries` is zero.
pub fn core_to_core_ns(a: usize, b: usize, turns: u64, tries: usize) -> Option<f64> {
    if turns == 0 || tries == 0 || a == b {
        return None;
    }
    // Only CPUs this process may run on (core_affinity also panics on ids past the
    // kernel's CPU set size).
    let allowed = core_affinity::get_core_ids()?;
    if ![a, b].iter().all(|c| allowed.iter().any(|id| id.id == *c)) {
        return None;
    }
    (0..tries)
        .map(|_| ping_pong(a, b, turns))
        .try_fold(f64::INFINITY, |best, t| t.map(|t| best.min(t)))
}

/// [`core_to_core_ns`] between the [`first_two_cpus`], as `bench metg` reports it: best of
/// 3 runs of 200 000 turns. Returns the two CPUs and the latency in ns.
pub fn core_to_core_first_pair() -> Option<(usize, usize, f64)> {
    let (a, b) = first_two_cpus()?;
    Some((a, b, core_to_core_ns(a, b, 200_000, 3)?))
}

/// What one reading of the trace clock costs, in ns: the least over `tries` runs of
/// `reads` back-to-back readings (`None` if either is zero). A traced task reads it three
/// times (submission, start, end), so on a machine where it is slow this is most of what
/// tracing adds to an empty task. On the development VM the TSC takes 16 to 26 ns to read
/// (depending on the half hour), more than an uncontended locked instruction (9 ns): three
/// readings are 50 to 80 ns of the 50 to 90 ns between traced and untraced empty tasks in
/// BENCHMARKS.md.
pub fn clock_read_ns(reads: u64, tries: usize) -> Option<f64> {
    if reads == 0 || tries == 0 {
        return None;
    }
    let once = || {
        let start = Instant::now();
        let mut sum = 0u64;
        for _ in 0..reads {
            sum = sum.wrapping_add(std::hint::black_box(Clock::now()).0);
        }
        std::hint::black_box(sum);
        start.elapsed().as_nanos() as f64 / reads as f64
    };
    // The first reading calibrates the clock: not timed.
    let _ = Clock::now();
    Some((0..tries).map(|_| once()).fold(f64::INFINITY, f64::min))
}

/// The first two CPUs this process may run on, for [`core_to_core_ns`].
pub fn first_two_cpus() -> Option<(usize, usize)> {
    let ids = core_affinity::get_core_ids()?;
    match ids.as_slice() {
        [a, b, ..] => Some((a.id, b.id)),
        _ => None,
    }
}

/// One ping-pong, on two threads of its own: pinning the caller would leave it pinned
/// (the submitting thread of the sweep that follows, say).
fn ping_pong(a: usize, b: usize, turns: u64) -> Option<f64> {
    let line = Line(AtomicU64::new(0));
    let counter = &line.0;
    std::thread::scope(|s| {
        let even = s.spawn(|| side(counter, a, 0, turns));
        let odd = s.spawn(|| side(counter, b, 1, turns));
        let (even, odd) = (even.join().ok().flatten(), odd.join().ok().flatten());
        odd?;
        even.map(|e| e.as_nanos() as f64 / (turns - 1).max(1) as f64)
    })
}

/// One side of the ping-pong, pinned to `cpu`: turn k (from 0) is played by the side of
/// k's parity, which waits for the counter to read k, then writes k + 1. Returns the time
/// from turn 0 to the last turn. Turn 0 waits for nothing but the other side's pinning
/// failure, so it is left out of the clock, and it is a compare-exchange, so as not to
/// overwrite that failure.
fn side(counter: &AtomicU64, cpu: usize, parity: u64, turns: u64) -> Option<Duration> {
    // Should this side give up or unwind, the other must not wait for it forever.
    let guard = StopUnlessDone(counter);
    pin(counter, cpu)?;
    if parity == 0 {
        counter
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
    }
    let start = Instant::now();
    let mut k = if parity == 0 { 2 } else { 1 };
    while k < turns {
        wait_for(counter, k)?;
        counter.store(k + 1, Ordering::Release);
        k += 2;
    }
    wait_for(counter, turns)?;
    std::mem::forget(guard);
    Some(start.elapsed())
}

/// Pins the calling thread (one of the two spawned) to `cpu`; if it cannot, tells the other
/// thread to stop.
fn pin(counter: &AtomicU64, cpu: usize) -> Option<()> {
    if core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
        Some(())
    } else {
        counter.store(STOP, Ordering::Release);
        None
    }
}

/// Stops the other side when dropped: a side that finishes forgets it.
struct StopUnlessDone<'a>(&'a AtomicU64);

impl Drop for StopUnlessDone<'_> {
    fn drop(&mut self) {
        self.0.store(STOP, Ordering::Release);
    }
}

/// The counter value by which a thread that could not be pinned stops the other.
const STOP: u64 = u64::MAX;

/// Waits until the counter reads `k` (`None` if it reads [`STOP`]).
fn wait_for(counter: &AtomicU64, k: u64) -> Option<()> {
    loop {
        match counter.load(Ordering::Acquire) {
            STOP => return None,
            v if v == k => return Some(()),
            _ => std::hint::spin_loop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_between_two_cpus_takes_a_plausible_time() {
        let Some((a, b)) = first_two_cpus() else {
            eprintln!("skipped: fewer than two CPUs to pin to");
            return;
        };
        let ns = core_to_core_ns(a, b, 20_000, 2).expect("two pinnable CPUs");
        // A line cannot move in less than a few ns, and even a loaded VM moves one in
        // well under 100 µs on average.
        assert!(ns > 1.0 && ns < 100_000.0, "{ns} ns");
    }

    #[test]
    fn a_clock_reading_takes_a_plausible_time() {
        assert_eq!(clock_read_ns(0, 3), None);
        assert_eq!(clock_read_ns(1000, 0), None);
        let ns = clock_read_ns(100_000, 3).expect("a measurement");
        // Faster than 0.1 ns would mean the loop was optimised away; a reading slower
        // than 10 µs would mean a system call each time, even on a loaded VM.
        assert!(ns > 0.1 && ns < 10_000.0, "{ns} ns");
    }

    #[test]
    fn the_calling_thread_is_left_unpinned() {
        let allowed = || {
            std::fs::read_to_string("/proc/thread-self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("Cpus_allowed_list"))
                        .map(str::to_string)
                })
        };
        let Some((a, b)) = first_two_cpus() else {
            eprintln!("skipped: fewer than two CPUs to pin to");
            return;
        };
        let before = allowed();
        assert!(core_to_core_ns(a, b, 1000, 1).is_some());
        assert_eq!(
            allowed(),
            before,
            "the measurement pins threads of its own only"
        );
    }

    #[test]
    fn a_cpu_that_does_not_exist_gives_no_figure() {
        assert_eq!(core_to_core_ns(0, 1 << 20, 1000, 1), None);
        assert_eq!(core_to_core_ns(0, 0, 1000, 1), None, "one CPU is no pair");
        assert_eq!(core_to_core_ns(0, 1, 0, 1), None);
    }
}
