//! The workers' event logs: what the simulated meter's observer costs a task.
//!
//! Each worker appends its task starts and ends to a ring of its own; whoever integrates
//! (the sampler's read, or a worker helping, under the integrator's lock) takes what the
//! rings hold. A ring has one writer (its worker) and one reader at a time, so an append is
//! two relaxed stores and a release store of the ring's tail: no lock, no read-modify-write,
//! and no cache line written by anyone else on the worker's path (the reader writes the head
//! only when it drains). With a lock per log instead, each event cost an uncontended lock
//! and unlock, two locked instructions: about 1.4 % of a run's samples on 3 µs tasks.
//!
//! Every slot is atomic, so nothing here is `unsafe`: two threads appending under one
//! worker id (only a misuse of the public observer can do that) may garble that worker's
//! events, never memory.
//!
//! The rings are allocated and written once when the meter is built ([`LOG_CAPACITY`] events,
//! 64 KiB a worker), so that their first touch (a fresh page, zeroed by the kernel) is not
//! paid inside the graph. A ring at [`HELP_AT`] events has its worker drain every ring when
//! nobody else is: integration in batches of about a thousand events on a thread that is
//! running anyway, rather than the sampler preempting a worker every period for all of them
//! (on a machine whose cores the workers fill). A full ring makes the worker wait for a
//! drain (see [`super::observer`]), so nothing is ever dropped.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Events a worker's ring holds.
pub(crate) const LOG_CAPACITY: usize = 1 << 12;

/// Events in a worker's ring at which it drains every ring itself, if it can.
pub(crate) const HELP_AT: usize = LOG_CAPACITY / 4;

/// One entry of a worker's log: from `t` (ns, trace clock) on, the worker runs power code
/// `code` ([`super::integrator::IDLE`]: nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) t: u64,
    pub(crate) code: u32,
}

#[derive(Default)]
struct Slot {
    t: AtomicU64,
    code: AtomicU32,
}

/// A counter alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicUsize);

/// One worker's ring: `tail` written by the worker only, `head` by the reader only.
struct Log {
    tail: Padded,
    head: Padded,
    slots: Box<[Slot]>,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            tail: Padded::default(),
            head: Padded::default(),
            slots: (0..LOG_CAPACITY).map(|_| Slot::default()).collect(),
        }
    }
}

/// What an append found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Appended; the ring now holds this many events.
    Held(usize),
    /// The ring is full: drain, then append again.
    Full,
    /// No ring for this worker id.
    NoLog,
}

/// Every worker's ring; worker `w` is the only one that appends to ring `w`.
pub(crate) struct Logs {
    logs: Box<[Log]>,
}

impl Logs {
    pub(crate) fn new(workers: usize) -> Logs {
        Logs {
            logs: (0..workers).map(|_| Log::default()).collect(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.logs.len()
    }

    /// Appends `e` to worker `w`'s ring.
    #[inline]
    pub(crate) fn push(&self, w: usize, e: Event) -> Pushed {
        let Some(log) = self.logs.get(w) else {
            return Pushed::NoLog;
        };
        let slots = &log.slots;
        let tail = log.tail.0.load(Ordering::Relaxed);
        // Acquire: the reader's loads of the slots it took happened before this overwrite.
        let held = tail.wrapping_sub(log.head.0.load(Ordering::Acquire));
        if held >= LOG_CAPACITY {
            return Pushed::Full;
        }
        let slot = &slots[tail % LOG_CAPACITY];
        slot.t.store(e.t, Ordering::Relaxed);
        slot.code.store(e.code, Ordering::Relaxed);
        // Release: the slot's stores are visible to a reader that sees this tail.
        log.tail.0.store(tail.wrapping_add(1), Ordering::Release);
        Pushed::Held(held + 1)
    }

    /// Appends worker `w`'s events to `into`, in the order logged, and empties its ring.
    /// Called by one reader at a time (the integrator's holder).
    pub(crate) fn take(&self, w: usize, into: &mut Vec<Event>) {
        let log = &self.logs[w];
        let slots = &log.slots;
        let head = log.head.0.load(Ordering::Relaxed);
        let tail = log.tail.0.load(Ordering::Acquire);
        let mut i = head;
        while i != tail {
            let slot = &slots[i % LOG_CAPACITY];
            into.push(Event {
                t: slot.t.load(Ordering::Relaxed),
                code: slot.code.load(Ordering::Relaxed),
            });
            i = i.wrapping_add(1);
        }
        log.head.0.store(tail, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_order_wraps_and_says_when_full() {
        let logs = Logs::new(2);
        let mut out = Vec::new();
        let mut t = 0;
        // Three times round the ring, drained at varying fill levels.
        for round in 0..3 * LOG_CAPACITY / 1000 {
            let n = 1000 + round % 7;
            for _ in 0..n {
                t += 1;
                assert!(matches!(
                    logs.push(1, Event { t, code: 7 }),
                    Pushed::Held(_)
                ));
            }
            let before = out.len();
            logs.take(1, &mut out);
            assert_eq!(out.len() - before, n);
        }
        assert!(out.windows(2).all(|w| w[1].t == w[0].t + 1));
        for i in 0..LOG_CAPACITY {
            let e = Event {
                t: i as u64,
                code: 1,
            };
            assert_eq!(logs.push(0, e), Pushed::Held(i + 1));
        }
        assert_eq!(logs.push(0, Event { t: 0, code: 1 }), Pushed::Full);
        out.clear();
        logs.take(0, &mut out);
        assert_eq!(out.len(), LOG_CAPACITY);
        assert_eq!(logs.push(0, Event { t: 0, code: 1 }), Pushed::Held(1));
        assert_eq!(logs.push(2, Event { t: 0, code: 1 }), Pushed::NoLog);
    }

    #[test]
    fn a_reader_on_another_thread_sees_every_event_once_in_order() {
        let logs = std::sync::Arc::new(Logs::new(1));
        const N: u64 = 200_000;
        let writer = {
            let logs = logs.clone();
            std::thread::spawn(move || {
                let mut t = 0;
                while t < N {
                    match logs.push(0, Event { t, code: t as u32 }) {
                        Pushed::Held(_) => t += 1,
                        Pushed::Full => std::thread::yield_now(),
                        Pushed::NoLog => unreachable!(),
                    }
                }
            })
        };
        let mut got = Vec::new();
        while got.len() < N as usize {
            logs.take(0, &mut got);
        }
        writer.join().unwrap();
        for (i, e) in got.iter().enumerate() {
            assert_eq!((e.t, e.code), (i as u64, i as u32));
        }
    }
}
