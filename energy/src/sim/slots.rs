//! Per-worker execution state shared between a worker thread (the only writer) and the
//! sampler thread (the reader): a seqlock over atomics, no lock and no allocation on the
//! worker's side.
//!
//! # What a slot holds
//! A worker's *extra* energy (above the base power) on each channel (package, DRAM, GPU) is a
//! piecewise-linear function of time: it grows at the running task's extra power and stays
//! flat while idle. A [`Piece`] `(t, e, p)` says "from `t` on, the energy is `e + p·(T - t)`",
//! until the next task start or end. The slot holds the current piece.
//!
//! # Why a small history
//! A RAPL-like counter shows the energy at its last update tick `B ≤ now`, not at `now`; the
//! reader therefore needs `E(B)` for a `B` that may lie before the worker's latest events
//! (tasks shorter than a tick end between `B` and the read). The piece that covers a tick
//! boundary `B` is always the one that ends at the first event after `B`, and that event is the
//! first of its tick. So when an event is the first of its tick (for a stream of ticks: 1 ms
//! RAPL ticks, the GPU's refresh ticks), the writer pushes the piece it ends into a small ring
//! for that stream. The reader evaluates `E(B)` on the newest ring piece that starts at or
//! before `B`, or on the current piece when that one starts at or before `B`. Between the
//! tick `B` and a read there are at most a tick and a few µs of events, so a ring of
//! [`RING`] pieces is more than enough; if a reader falls further behind, the value is a close
//! over-estimate and is counted as stale.
//!
//! # Memory orderings (the classic seqlock, Boehm 2012, "Can seqlocks get along with
//! programming language memory models?")
//! Writer (single: the worker owning the slot):
//! 1. `seq.store(s + 1, Relaxed)` marks the slot as being written (odd);
//! 2. `fence(Release)`: the odd mark is ordered before every data store below;
//! 3. data stores, `Relaxed`;
//! 4. `seq.store(s + 2, Release)`: the data is published with the even value.
//!
//! Reader: `s1 = seq.load(Acquire)` (retry while odd), data loads `Relaxed`,
//! `fence(Acquire)`, `s2 = seq.load(Relaxed)`; the copy is consistent iff `s1 == s2`. If the
//! reader saw any store of a write in progress, the fences make it see that write's odd mark
//! (or later) in `s2`, so it retries. Everything is an atomic, so a torn read is a retry, never
//! undefined behaviour; the writer never waits for the reader.
//!
//! The single-writer rule (a worker id is reported by one thread only) is the runtime's: each
//! worker reports its own starts and ends.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Channels of a worker's extra energy: package, DRAM, GPU.
pub(crate) const CHANNELS: usize = 3;
/// Channel of the worker's package domain.
pub(crate) const PKG: usize = 0;
/// Channel of the worker's DRAM domain.
pub(crate) const DRAM: usize = 1;
/// Channel of the worker's GPU domain.
pub(crate) const GPU: usize = 2;
/// Tick streams: RAPL update ticks and GPU refresh ticks.
pub(crate) const STREAMS: usize = 2;
/// Stream of the RAPL-like domains.
pub(crate) const RAPL_STREAM: usize = 0;
/// Stream of the GPU domains.
pub(crate) const GPU_STREAM: usize = 1;
/// Pieces kept per stream.
pub(crate) const RING: usize = 4;

/// From `t` on, the energy on channel `c` is `e[c] + p[c]·(T - t)` (J, W, ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Piece {
    pub(crate) t: u64,
    pub(crate) e: [f64; CHANNELS],
    pub(crate) p: [f64; CHANNELS],
}

impl Piece {
    /// The energy on `ch` at `b` (≥ `t`).
    #[inline]
    pub(crate) fn at(&self, ch: usize, b: u64) -> f64 {
        self.e[ch] + self.p[ch] * (b.saturating_sub(self.t) as f64 * 1e-9)
    }
}

#[derive(Default)]
struct AtomicPiece {
    t: AtomicU64,
    e: [AtomicU64; CHANNELS],
    p: [AtomicU64; CHANNELS],
}

impl AtomicPiece {
    #[inline]
    fn load(&self) -> Piece {
        let mut out = Piece {
            t: self.t.load(Ordering::Relaxed),
            ..Piece::default()
        };
        for c in 0..CHANNELS {
            out.e[c] = f64::from_bits(self.e[c].load(Ordering::Relaxed));
            out.p[c] = f64::from_bits(self.p[c].load(Ordering::Relaxed));
        }
        out
    }

    #[inline]
    fn store(&self, piece: &Piece) {
        self.t.store(piece.t, Ordering::Relaxed);
        for c in 0..CHANNELS {
            self.e[c].store(piece.e[c].to_bits(), Ordering::Relaxed);
            self.p[c].store(piece.p[c].to_bits(), Ordering::Relaxed);
        }
    }
}

/// One worker's state; cache-padded so that two workers' writes never share a line.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Slot {
    seq: AtomicU64,
    cur: AtomicPiece,
    pushed: [AtomicU64; STREAMS],
    rings: [[AtomicPiece; RING]; STREAMS],
}

/// A consistent copy of a slot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Snapshot {
    cur: Piece,
    pushed: [u64; STREAMS],
    rings: [[Piece; RING]; STREAMS],
}

impl Snapshot {
    /// The worker's extra energy on channel `ch` at tick boundary `b` of `stream`:
    /// `Ok(exact)`, or `Err(over-estimate)` if the history covering `b` was overwritten.
    pub(crate) fn energy_at(&self, stream: usize, ch: usize, b: u64) -> Result<f64, f64> {
        if self.cur.t <= b {
            return Ok(self.cur.at(ch, b));
        }
        let pushed = self.pushed[stream];
        let kept = pushed.min(RING as u64);
        let mut oldest = self.cur.e[ch];
        for k in 0..kept {
            let piece = &self.rings[stream][((pushed - 1 - k) % RING as u64) as usize];
            if piece.t <= b {
                return Ok(piece.at(ch, b));
            }
            oldest = piece.e[ch];
        }
        Err(oldest)
    }
}

impl Slot {
    /// A slot idle since `t0`, with no energy.
    pub(crate) fn new(t0: u64) -> Slot {
        let slot = Slot::default();
        slot.cur.t.store(t0, Ordering::Relaxed);
        slot
    }

    /// Writer side: at `t`, the worker's extra power becomes `p_new`. `ticks[s]` is stream
    /// `s`'s tick length in ns. Only the owning worker may call this.
    #[inline]
    pub(crate) fn transition(&self, t: u64, p_new: [f64; CHANNELS], ticks: &[u64; STREAMS]) {
        // The single writer reads back its own last stores: no ordering needed.
        let cur = self.cur.load();
        let t = t.max(cur.t); // a worker's clock never goes back; guard anyway
        let dt_s = (t - cur.t) as f64 * 1e-9;
        let mut e = cur.e;
        for (e, p) in e.iter_mut().zip(cur.p) {
            *e += p * dt_s;
        }
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (stream, &tick) in ticks.iter().enumerate() {
            if t / tick > cur.t / tick {
                // First event of its tick: `cur` covers the boundaries since `cur.t`.
                let n = self.pushed[stream].load(Ordering::Relaxed);
                self.rings[stream][(n % RING as u64) as usize].store(&cur);
                self.pushed[stream].store(n + 1, Ordering::Relaxed);
            }
        }
        self.cur.store(&Piece { t, e, p: p_new });
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// Reader side: a consistent copy. Spins (then yields) while a write is in progress, which
    /// lasts a few dozen ns unless the writer is preempted mid-write.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut tries = 0u32;
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 0 {
                let mut snap = Snapshot {
                    cur: self.cur.load(),
                    ..Snapshot::default()
                };
                for s in 0..STREAMS {
                    snap.pushed[s] = self.pushed[s].load(Ordering::Relaxed);
                    for (i, piece) in self.rings[s].iter().enumerate() {
                        snap.rings[s][i] = piece.load();
                    }
                }
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s1 {
                    return snap;
                }
            }
            tries += 1;
            if tries < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const TICKS: [u64; STREAMS] = [MS, 20 * MS];

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(1.0)
    }

    #[test]
    fn energy_at_any_boundary_after_many_short_tasks() {
        let s = Slot::new(0);
        // Tasks of 100 us at 10 W, separated by 100 us idle, over 5 ms.
        let mut t = 0;
        while t < 5 * MS {
            s.transition(t, [10.0, 1.0, 0.0], &TICKS);
            s.transition(t + 100_000, [0.0; 3], &TICKS);
            t += 200_000;
        }
        let snap = s.snapshot();
        // Up to boundary k ms: half the time busy at 10 W.
        for k in 1..=5u64 {
            let b = k * MS;
            let want = 10.0 * 0.5 * b as f64 * 1e-9;
            let got = snap.energy_at(RAPL_STREAM, PKG, b);
            assert!(close(got.unwrap(), want), "k={k}: {got:?} vs {want}");
        }
        // A boundary far behind the ring: stale over-estimate.
        let s2 = Slot::new(0);
        for k in 0..10u64 {
            s2.transition(k * MS + 10, [5.0, 0.0, 0.0], &TICKS);
        }
        assert!(s2.snapshot().energy_at(RAPL_STREAM, PKG, MS).is_err());
    }

    #[test]
    fn running_task_is_counted_up_to_the_boundary() {
        let s = Slot::new(0);
        s.transition(MS / 2, [8.0, 0.5, 0.0], &TICKS);
        let snap = s.snapshot();
        assert!(close(
            snap.energy_at(RAPL_STREAM, PKG, 3 * MS).unwrap(),
            8.0 * 2.5e-3
        ));
        assert!(close(
            snap.energy_at(RAPL_STREAM, DRAM, 3 * MS).unwrap(),
            0.5 * 2.5e-3
        ));
        // Boundaries at or before the slot's start are the meter's business (energy 0);
        // the slot has no piece for them.
        assert!(snap.energy_at(RAPL_STREAM, PKG, 0).is_err());
    }

    #[test]
    fn gpu_stream_keeps_its_own_boundaries() {
        let s = Slot::new(0);
        // 30 tasks of 1 ms every 2 ms on the GPU channel: 30 RAPL pushes, 3 GPU pushes.
        for k in 0..30u64 {
            s.transition(2 * k * MS + 1, [0.0, 0.0, 100.0], &TICKS);
            s.transition(2 * k * MS + 1 + MS, [0.0; 3], &TICKS);
        }
        let snap = s.snapshot();
        let want = 100.0 * 1e-3 * 10.0; // 10 tasks before 20 ms
        assert!(close(
            snap.energy_at(GPU_STREAM, GPU, 20 * MS).unwrap(),
            want
        ));
        assert!(snap.energy_at(RAPL_STREAM, GPU, 20 * MS).is_err());
    }

    /// A reader racing a writer only ever sees consistent pieces: the energy at a boundary
    /// behind the writer is exactly what the script implies, and never decreases.
    ///
    /// The writer runs until the reader says it has seen enough, so the race is real even
    /// on one CPU (the writer cannot finish before the reader starts): the reader must check
    /// many snapshots taken at many distinct writer positions, i.e. with the writer having
    /// run between its checks. Both yield now and then so that one CPU alternates quickly;
    /// a time limit turns a stuck race into a failure, not a hang.
    #[test]
    fn concurrent_reader_sees_consistent_state() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        /// Stops the writer when the reader is done, including when an assertion unwinds.
        struct StopOnDrop(Arc<AtomicBool>);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }

        // Consistent snapshots to check, and distinct boundaries among them.
        let (want_checked, want_distinct) = if cfg!(miri) { (20, 2) } else { (20_000, 200) };
        let slot = Arc::new(Slot::new(0));
        let now = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (slot, now, stop) = (slot.clone(), now.clone(), stop.clone());
            std::thread::spawn(move || {
                // 50 us tasks at 4 W then 50 us idle: 2 W average, i.e. 2e-3 J per ms.
                let mut t = 0u64;
                let mut rounds = 0u64;
                while !stop.load(Ordering::Acquire) {
                    slot.transition(t, [4.0, 0.0, 0.0], &TICKS);
                    slot.transition(t + 50_000, [0.0; 3], &TICKS);
                    t += 100_000;
                    rounds += 1;
                    now.store(t, Ordering::Release);
                    // On one CPU, let the reader in now and then (it yields back when it
                    // has nothing new to check); on several, this costs nothing.
                    if rounds.is_multiple_of(1024) {
                        std::thread::yield_now();
                    }
                }
                rounds
            })
        };
        let guard = StopOnDrop(stop);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = 0.0;
        let (mut checked, mut distinct, mut last_b) = (0u64, 0u64, None);
        while checked < want_checked || distinct < want_distinct {
            assert!(
                Instant::now() < deadline,
                "after 60 s the reader checked {checked} snapshot(s) at {distinct} distinct \
                 boundaries; wanted {want_checked} and {want_distinct}"
            );
            let t = now.load(Ordering::Acquire);
            let snap = slot.snapshot();
            let b = (t / MS) * MS;
            if let Ok(e) = snap.energy_at(RAPL_STREAM, PKG, b) {
                let want = 2e-3 * (b / MS) as f64;
                // Relative: the writer sums millions of pieces when it runs long.
                assert!(
                    (e - want).abs() <= 1e-9 * want.max(1.0),
                    "b={b}: {e} vs {want}"
                );
                assert!(e >= last, "b={b}: {e} after {last}");
                last = e;
                checked += 1;
                if last_b != Some(b) {
                    distinct += 1;
                    last_b = Some(b);
                }
            }
            if (last_b == Some(b) && checked >= want_checked) || cfg!(miri) {
                // Nothing new to check until the writer moves: let it run.
                std::thread::yield_now();
            }
        }
        drop(guard);
        let rounds = writer.join().unwrap();
        // The writer ran across the reader's checks: more boundaries than the reader saw.
        assert!(
            rounds / 10 >= distinct - 1,
            "{rounds} rounds, {distinct} boundaries"
        );
    }
}
