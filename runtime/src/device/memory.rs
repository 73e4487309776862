//! A device's memory: a limit, the copies it holds, and least-recently-used eviction.
//!
//! Every copy of a handle on a device's memory node is charged to the device's account
//! ([`DeviceMemory`]) before it is made. When a copy would take the account over its
//! limit, the account drops copies that no task holds now, until the new one fits:
//!
//! 1. those valid elsewhere too (or no longer valid anywhere: stale copies), least
//!    recently used first: dropping them costs nothing but the next fetch;
//! 2. then the only valid copies, least recently used first, each written back to main
//!    memory before it is dropped.
//!
//! A task's data is pinned on its worker's node from before its copies until it ends;
//! the device's prefetcher pins the data it is copying for a queued task while it copies.
//! A pinned copy is never dropped, nor one whose handle another thread is copying (its
//! transfer lock is taken with `try_lock`: eviction never waits for a handle, so that it
//! cannot deadlock with a copy that waits for the account).
//!
//! When nothing can be dropped, a prefetch gives up (the task fetches its data when it
//! runs), and a task waits for the prefetcher to let go of what it pinned, or fails,
//! naming the limit, when its own data does not fit.
//!
//! The limit: [`RuntimeBuilder::gpu_memory_limit`](crate::RuntimeBuilder::gpu_memory_limit),
//! else the environment variable [`MEMORY_LIMIT_ENV`], else what the backend reports
//! (CUDA: 90 % of the device's memory; an emulated device has none).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use crate::handle::HandleCore;

/// Environment variable setting every device's memory limit: bytes, or a number with a
/// unit (`KiB`, `MiB`, `GiB`, or `K`, `M`, `G`, powers of 1024), e.g. `64MiB`.
pub const MEMORY_LIMIT_ENV: &str = "TASKWATT_GPU_MEMORY_LIMIT";

/// Where a device's memory limit came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LimitSource {
    Builder,
    Env,
    Device,
    None,
}

impl LimitSource {
    fn describe(&self) -> String {
        match self {
            LimitSource::Builder => {
                "set by --gpu-memory-limit or RuntimeBuilder::gpu_memory_limit".into()
            }
            LimitSource::Env => format!("set by {MEMORY_LIMIT_ENV}"),
            LimitSource::Device => "90 % of the device's memory".into(),
            LimitSource::None => "none".into(),
        }
    }
}

/// Who pins a copy: the task running on the device's worker, or the prefetcher copying
/// a queued task's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pinner {
    Task = 0,
    Prefetch = 1,
}

/// What [`DeviceMemory::make_room`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// The copy is charged (now, or already): make it.
    Charged { now: bool },
    /// Not now: what would have to go is pinned by the other side (the prefetcher, or a
    /// running task). A task waits and tries again; a prefetch gives up.
    Busy,
}

pub(crate) use super::Evicted;

/// What [`DeviceMemory::evict_one`] did.
enum Freed {
    /// A copy went.
    Some,
    /// None could go now: those that could are being copied by other threads.
    Busy,
    /// None can go: every copy is pinned.
    None,
}

struct Entry {
    core: Weak<HandleCore>,
    bytes: u64,
    /// When it was last pinned (the account's clock).
    last: u64,
    pins: [u32; 2],
    /// The copy is charged to the account (it exists, or is being made).
    charged: bool,
}

#[derive(Default)]
struct State {
    /// Bytes charged.
    used: u64,
    /// Counts pins, to order the entries by last use.
    tick: u64,
    /// By handle id: the handles with a copy charged, or pinned.
    entries: HashMap<u64, Entry>,
}

/// One device's memory account (see the module docs).
pub(crate) struct DeviceMemory {
    /// The memory node (1 + device).
    pub(crate) node: usize,
    /// Bytes; `u64::MAX` without a limit.
    pub(crate) limit: u64,
    source: LimitSource,
    state: Mutex<State>,
    /// Told when pins are let go.
    unpinned: Condvar,
    pub(crate) evictions: AtomicU64,
    pub(crate) written_back: AtomicU64,
    pub(crate) evicted_bytes: AtomicU64,
    /// The most bytes charged at once.
    pub(crate) peak: AtomicU64,
}

impl DeviceMemory {
    pub(crate) fn new(node: usize, limit: Option<u64>, source: LimitSource) -> DeviceMemory {
        DeviceMemory {
            node,
            limit: limit.unwrap_or(u64::MAX),
            source: if limit.is_some() {
                source
            } else {
                LimitSource::None
            },
            state: Mutex::new(State::default()),
            unpinned: Condvar::new(),
            evictions: AtomicU64::new(0),
            written_back: AtomicU64::new(0),
            evicted_bytes: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// The limit, for messages: `64.0 MiB (set by TASKWATT_GPU_MEMORY_LIMIT)`.
    pub(crate) fn describe_limit(&self) -> String {
        format!("{} ({})", human(self.limit), self.source.describe())
    }

    /// Pins `cores` on this node for `who`: none of their copies here is dropped until
    /// [`DeviceMemory::unpin`].
    pub(crate) fn pin<'a>(&self, cores: impl Iterator<Item = &'a Arc<HandleCore>>, who: Pinner) {
        let mut st = self.state.lock();
        for core in cores {
            st.tick += 1;
            let tick = st.tick;
            let e = st.entries.entry(core.id).or_insert_with(|| Entry {
                core: Arc::downgrade(core),
                bytes: core.bytes,
                last: tick,
                pins: [0; 2],
                charged: false,
            });
            e.pins[who as usize] += 1;
            e.last = tick;
        }
    }

    /// Lets go of pins taken by [`DeviceMemory::pin`].
    pub(crate) fn unpin(&self, ids: impl Iterator<Item = u64>, who: Pinner) {
        let mut st = self.state.lock();
        for id in ids {
            if let Some(e) = st.entries.get_mut(&id) {
                e.pins[who as usize] = e.pins[who as usize].saturating_sub(1);
                if e.pins == [0, 0] && !e.charged {
                    st.entries.remove(&id);
                }
            }
        }
        drop(st);
        self.unpinned.notify_all();
    }

    /// Charges a copy of `core` (pinned by the caller) to the account, dropping others
    /// with `evict` (called under the account's lock, for one copy at a time) until it
    /// fits. An error when it can never fit: the handle alone is over the limit, or the
    /// copies pinned by `who` itself leave no room.
    pub(crate) fn make_room(
        &self,
        core: &Arc<HandleCore>,
        who: Pinner,
        evict: &mut dyn FnMut(&HandleCore) -> Result<Evicted, String>,
    ) -> Result<Room, String> {
        let bytes = core.bytes;
        if bytes > self.limit {
            return Err(format!(
                "handle {} has {} and memory node {}'s limit is {}: no copy of it fits \
                 on the device; raise the limit ({MEMORY_LIMIT_ENV}, \
                 --gpu-memory-limit or RuntimeBuilder::gpu_memory_limit) above the largest \
                 datum a GPU task uses",
                core.label(),
                human(bytes),
                self.node,
                self.describe_limit()
            ));
        }
        let mut st = self.state.lock();
        if st.entries.get(&core.id).is_some_and(|e| e.charged) {
            return Ok(Room::Charged { now: false });
        }
        loop {
            if st.used.saturating_add(bytes) <= self.limit {
                st.used += bytes;
                self.peak.fetch_max(st.used, Ordering::Relaxed);
                st.tick += 1;
                let tick = st.tick;
                let e = st.entries.entry(core.id).or_insert_with(|| Entry {
                    core: Arc::downgrade(core),
                    bytes,
                    last: tick,
                    pins: [0; 2],
                    charged: false,
                });
                e.charged = true;
                return Ok(Room::Charged { now: true });
            }
            match self.evict_one(&mut st, core.id, evict)? {
                Freed::Some => continue,
                // Another thread copies a copy that could go: it is done soon.
                Freed::Busy => return Ok(Room::Busy),
                Freed::None => {}
            }
            // Nothing can go now. Pinned by the other side only: it lets go soon.
            let other = 1 - who as usize;
            let busy = st
                .entries
                .values()
                .any(|e| e.charged && e.pins[other] > 0 && e.pins[who as usize] == 0);
            if busy {
                return Ok(Room::Busy);
            }
            let own: u64 = st
                .entries
                .values()
                .filter(|e| e.charged && e.pins[who as usize] > 0)
                .map(|e| e.bytes)
                .sum();
            let others = match st.used.saturating_sub(own) {
                0 => String::new(),
                b => format!(", and {} are held by other copies pinned now", human(b)),
            };
            return Err(format!(
                "memory node {}'s limit is {}: the task's data does not fit (its other \
                 handles hold {} there and handle {} needs {} more{others}); raise the limit \
                 ({MEMORY_LIMIT_ENV}, --gpu-memory-limit or RuntimeBuilder::gpu_memory_limit) \
                 above one task's data",
                self.node,
                self.describe_limit(),
                human(own),
                core.id,
                human(bytes),
            ));
        }
    }

    /// Waits (a little) for pins to be let go, after [`Room::Busy`].
    pub(crate) fn wait_unpinned(&self) {
        let mut st = self.state.lock();
        self.unpinned
            .wait_for(&mut st, std::time::Duration::from_millis(2));
    }

    /// Takes back the charge of a copy that could not be made.
    pub(crate) fn uncharge(&self, id: u64) {
        let mut st = self.state.lock();
        if let Some(e) = st.entries.get_mut(&id) {
            if e.charged {
                e.charged = false;
                let b = e.bytes;
                if e.pins == [0, 0] {
                    st.entries.remove(&id);
                }
                st.used = st.used.saturating_sub(b);
            }
        }
    }

    /// Drops one copy that no one pins, if there is one: the dead first (their handles
    /// were dropped, and their copies with them), then the clean, then the dirty, least
    /// recently used first.
    fn evict_one(
        &self,
        st: &mut State,
        needed_by: u64,
        evict: &mut dyn FnMut(&HandleCore) -> Result<Evicted, String>,
    ) -> Result<Freed, String> {
        let mut dead = Vec::new();
        let mut cands: Vec<(bool, u64, u64, Arc<HandleCore>)> = Vec::new();
        for (&id, e) in &st.entries {
            if !e.charged || e.pins != [0, 0] || id == needed_by {
                continue;
            }
            match e.core.upgrade() {
                None => dead.push(id),
                Some(c) => cands.push((!c.valid_elsewhere(self.node), e.last, id, c)),
            }
        }
        if !dead.is_empty() {
            for id in dead {
                if let Some(e) = st.entries.remove(&id) {
                    st.used = st.used.saturating_sub(e.bytes);
                }
            }
            return Ok(Freed::Some);
        }
        cands.sort_unstable_by_key(|c| (c.0, c.1));
        let mut busy = false;
        for (_, _, id, core) in cands {
            match evict(&core)? {
                Evicted::Busy => busy = true,
                Evicted::Absent => {
                    let e = st.entries.remove(&id).expect("a candidate has an entry");
                    st.used = st.used.saturating_sub(e.bytes);
                    return Ok(Freed::Some);
                }
                Evicted::Dropped(wrote) => {
                    let e = st.entries.remove(&id).expect("a candidate has an entry");
                    st.used = st.used.saturating_sub(e.bytes);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                    self.evicted_bytes.fetch_add(e.bytes, Ordering::Relaxed);
                    if wrote {
                        self.written_back.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(Freed::Some);
                }
            }
        }
        Ok(if busy { Freed::Busy } else { Freed::None })
    }
}

/// `64.0 MiB`.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Reads a size: bytes, or a number with a unit (`KiB`/`K`, `MiB`/`M`, `GiB`/`G`; powers
/// of 1024; case does not matter). Zero is refused: a device that can hold nothing.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{text}` is not a size: write bytes, or a number with KiB, MiB or GiB \
                 (e.g. 64MiB)"
            ))
        }
    };
    let n: f64 = num.parse().map_err(|_| {
        format!(
            "`{text}` is not a size: write bytes, or a number with KiB, MiB or GiB (e.g. 64MiB)"
        )
    })?;
    let bytes = n * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(format!(
            "`{text}` is not a usable memory limit: give at least one byte"
        ));
    }
    Ok(bytes as u64)
}

/// The limit for every device from the builder's value or [`MEMORY_LIMIT_ENV`], and where
/// it came from; `None` leaves each device's own.
pub(crate) fn configured_limit(builder: Option<u64>) -> Result<Option<(u64, LimitSource)>, String> {
    if let Some(b) = builder {
        if b == 0 {
            return Err(
                "RuntimeBuilder::gpu_memory_limit(0): a device that can hold nothing; give \
                 at least the largest datum a GPU task uses"
                    .into(),
            );
        }
        return Ok(Some((b, LimitSource::Builder)));
    }
    match std::env::var(MEMORY_LIMIT_ENV) {
        Ok(v) if !v.trim().is_empty() => parse_size(&v)
            .map(|b| Some((b, LimitSource::Env)))
            .map_err(|e| format!("{MEMORY_LIMIT_ENV}: {e}")),
        _ => Ok(None),
    }
}

/// The accounts of a runtime's devices: the configured limit, else each backend's.
pub(crate) fn accounts(
    backends: &[Arc<dyn crate::device::Backend>],
    configured: Option<(u64, LimitSource)>,
) -> Vec<DeviceMemory> {
    backends
        .iter()
        .enumerate()
        .map(|(i, b)| match &configured {
            Some((l, s)) => DeviceMemory::new(1 + i, Some(*l), s.clone()),
            None => DeviceMemory::new(1 + i, b.memory_limit(), LimitSource::Device),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert!(parse_size("0").unwrap_err().contains("at least one byte"));
        assert!(parse_size("lots").unwrap_err().contains("64MiB"));
        assert!(parse_size("3 furlongs").is_err());
    }

    fn core(bytes: u64) -> Arc<HandleCore> {
        Arc::new(HandleCore::new(0u8, bytes, None))
    }

    #[test]
    fn the_least_recently_used_unpinned_copy_goes_first() {
        let m = DeviceMemory::new(1, Some(300), LimitSource::Builder);
        let (a, b, c) = (core(100), core(100), core(150));
        let mut dropped = Vec::new();
        for h in [&a, &b] {
            m.pin(std::iter::once(h), Pinner::Task);
            let r = m.make_room(h, Pinner::Task, &mut |_| unreachable!());
            assert_eq!(r, Ok(Room::Charged { now: true }));
            m.unpin(std::iter::once(h.id), Pinner::Task);
        }
        // b used again: a is the oldest.
        m.pin(std::iter::once(&b), Pinner::Task);
        m.unpin(std::iter::once(b.id), Pinner::Task);
        m.pin(std::iter::once(&c), Pinner::Task);
        let r = m.make_room(&c, Pinner::Task, &mut |h| {
            dropped.push(h.id);
            Ok(Evicted::Dropped(false))
        });
        assert_eq!(r, Ok(Room::Charged { now: true }));
        assert_eq!(dropped, [a.id]);
        assert_eq!(m.evictions.load(Ordering::Relaxed), 1);
        // Charged already: nothing to do.
        assert_eq!(
            m.make_room(&c, Pinner::Task, &mut |_| unreachable!()),
            Ok(Room::Charged { now: false })
        );
    }

    #[test]
    fn pinned_copies_stay_and_a_task_too_big_is_an_error_naming_the_limit() {
        let m = DeviceMemory::new(1, Some(250), LimitSource::Env);
        let (a, b, c) = (core(100), core(100), core(100));
        m.pin([&a, &b, &c].into_iter(), Pinner::Task);
        for h in [&a, &b] {
            assert!(matches!(
                m.make_room(h, Pinner::Task, &mut |_| unreachable!()),
                Ok(Room::Charged { .. })
            ));
        }
        let e = m
            .make_room(&c, Pinner::Task, &mut |_| unreachable!("pinned"))
            .unwrap_err();
        assert!(
            e.contains(MEMORY_LIMIT_ENV) && e.contains("250 bytes"),
            "{e}"
        );
        let big = core(251);
        let e = m
            .make_room(&big, Pinner::Task, &mut |_| unreachable!())
            .unwrap_err();
        assert!(e.contains("no copy of it fits"), "{e}");
    }

    #[test]
    fn a_prefetch_gives_way_to_the_running_task_s_pins() {
        let m = DeviceMemory::new(1, Some(150), LimitSource::Builder);
        let (a, b) = (core(100), core(100));
        m.pin(std::iter::once(&a), Pinner::Task);
        assert!(m
            .make_room(&a, Pinner::Task, &mut |_| unreachable!())
            .is_ok());
        m.pin(std::iter::once(&b), Pinner::Prefetch);
        assert_eq!(
            m.make_room(&b, Pinner::Prefetch, &mut |_| unreachable!()),
            Ok(Room::Busy)
        );
        // The task's side, the other way round: waits for the prefetcher.
        m.unpin(std::iter::once(a.id), Pinner::Task);
        m.unpin(std::iter::once(b.id), Pinner::Prefetch);
        m.pin(std::iter::once(&a), Pinner::Prefetch);
        m.pin(std::iter::once(&b), Pinner::Task);
        assert_eq!(
            m.make_room(&b, Pinner::Task, &mut |_| unreachable!()),
            Ok(Room::Busy)
        );
    }

    #[test]
    fn a_dropped_handle_s_copy_is_reclaimed_first() {
        let m = DeviceMemory::new(1, Some(150), LimitSource::Builder);
        let a = core(100);
        m.pin(std::iter::once(&a), Pinner::Task);
        assert!(m
            .make_room(&a, Pinner::Task, &mut |_| unreachable!())
            .is_ok());
        m.unpin(std::iter::once(a.id), Pinner::Task);
        drop(a);
        let b = core(100);
        m.pin(std::iter::once(&b), Pinner::Task);
        assert_eq!(
            m.make_room(&b, Pinner::Task, &mut |_| unreachable!("dead, not evicted")),
            Ok(Room::Charged { now: true })
        );
        assert_eq!(m.evictions.load(Ordering::Relaxed), 0);
    }
}
