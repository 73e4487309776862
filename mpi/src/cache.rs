//! A limit on each rank's cached copies (StarPU-MPI's cache, bounded): past it, a rank's
//! least recently read copies are dropped, as [`DistRuntime::flush`] drops them, and read
//! again from their owner when a later task needs them.
//!
//! Every rank keeps every rank's record of valid copies, so eviction is decided from the
//! flow alone, the same way on every rank: when a rank gets a new copy (a task's read, a
//! `fetch_to`, a `transfer`), and its copies then hold more than the limit, every rank
//! marks its least recently read copies stale, oldest first, but never one the task
//! needs; the rank itself frees their storage once the tasks submitted before have read
//! them (for types that can be without it, [`DeviceData::release_storage`](taskwatt_runtime::DeviceData::release_storage): tiles made
//! with `Tile::unallocated`). A single task that needs more than the limit goes over it.
//!
//! The cost: a scan of the handles per new copy, only with a limit set.
//!
//! The memory limit ([`DistRuntime::set_memory_limit`], see `crate::memory`) also bounds
//! the copies in flight, by holding this rank's submission back.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use taskwatt_runtime::{Access, DeviceData};

use crate::comm::Cmd;
use crate::dist::{DistAccess, DistHandle, DistRuntime};
use crate::DistError;

impl DistRuntime {
    /// Caps each rank's cached copies (the copies of data it does not own, valid or kept)
    /// at `bytes`; `None` (the default) keeps them until a write or a
    /// [`DistRuntime::flush`]. Every rank calls it with the same limit at the same point
    /// of the flow: each rank works out every rank's evictions.
    pub fn set_cache_limit(&mut self, bytes: Option<u64>) {
        self.cache_limit = bytes;
    }

    /// The bytes of the copies rank `r` caches now (valid copies of data it does not own),
    /// as every rank records them.
    pub fn cached_bytes(&self, r: usize) -> u64 {
        self.handles
            .iter()
            .filter(|m| m.owner != r && m.valid.get(r).copied().unwrap_or(false))
            .map(|m| m.bytes)
            .sum()
    }

    /// Rank `r` just got a copy: drops its least recently read copies past the limit,
    /// keeping those of the handles in `keep` (the task's own).
    pub(crate) fn evict_for(&mut self, r: usize, keep: &[u32]) -> Result<(), DistError> {
        let Some(limit) = self.cache_limit else {
            return Ok(());
        };
        loop {
            let mut held = 0u64;
            let mut oldest: Option<(u64, usize)> = None;
            for (id, m) in self.handles.iter().enumerate() {
                if m.owner == r || !m.valid[r] {
                    continue;
                }
                held += m.bytes;
                if !keep.contains(&(id as u32)) && oldest.is_none_or(|(t, _)| m.last_use[r] < t) {
                    oldest = Some((m.last_use[r], id));
                }
            }
            let (true, Some((_, id))) = (held > limit, oldest) else {
                return Ok(());
            };
            self.handles[id].valid[r] = false;
            if r == self.rank && self.drop_copy(id)? {
                self.stats.evicted += 1;
            }
        }
    }

    /// Drops every rank's cached copy of `h` (StarPU-MPI's `starpu_mpi_cache_flush`): every
    /// rank calls it at the same point of the flow, typically once the tasks that read a
    /// datum are all submitted. A rank holding a copy frees its storage once the tasks
    /// submitted before have read it (for types that can be without it,
    /// [`DeviceData::release_storage`]: tiles made with `Tile::unallocated`); a task that
    /// reads the datum later receives it again. The owner's value stays.
    pub fn flush<T: DeviceData>(&mut self, h: &DistHandle<T>) -> Result<(), DistError> {
        self.not_partitioned(h.id, "flushed")?;
        self.end_redux(h)?;
        let me = self.rank;
        let meta = &mut self.handles[h.id as usize];
        let held = meta.owner != me && meta.valid[me];
        for (r, v) in meta.valid.iter_mut().enumerate() {
            *v = r == meta.owner;
        }
        if held && self.drop_copy(h.id as usize)? {
            self.stats.flushed += 1;
        }
        Ok(())
    }

    /// Frees this rank's copy of handle `id` once the accesses submitted before are done
    /// (a flush, an eviction); `false` where it has none to free (it owns the value, or
    /// the handle is unregistered).
    pub(crate) fn drop_copy(&mut self, id: usize) -> Result<bool, DistError> {
        let Some(evict) = &self.handles[id].evict else {
            return Ok(false);
        };
        let (access, f) = evict(self.runtime()).map_err(|source| DistError::Runtime {
            rank: self.rank,
            source,
        })?;
        access.hand_off();
        let freed = self.memory.free(id, self.handles[id].bytes);
        self.command(Cmd::Apply(access, f, freed))?;
        Ok(true)
    }

    /// Caps the memory this rank's copies of other ranks' data take, in flight or cached,
    /// at `bytes` (see the module docs); `None` (the default) for no cap. Without a cache
    /// limit it also sets one of half of it: copies kept between uses take at most that
    /// half, and those in flight the rest (a task that needs more than half goes over).
    /// Every rank calls it with the same value at the same point of the flow, as the
    /// cache limit.
    pub fn set_memory_limit(&mut self, bytes: Option<u64>) {
        self.memory.limit = bytes;
        if self.cache_limit.is_none() {
            self.cache_limit = bytes.map(|b| b / 2);
        }
    }

    /// The bytes this rank's copies of other ranks' data hold now, in flight or cached.
    pub fn copies_bytes(&self) -> u64 {
        self.memory.stored.load(Ordering::SeqCst)
    }

    /// Before a task of this rank that needs `need` more bytes of copies: waits while that
    /// would pass the memory limit and copies wait to be freed.
    pub(crate) fn wait_for_memory(&mut self, need: u64) -> Result<(), DistError> {
        let Some(limit) = self.memory.limit else {
            return Ok(());
        };
        let (stored, pending) = (&self.memory.stored, &self.memory.pending);
        let over = || stored.load(Ordering::SeqCst) + need > limit;
        if !over() || pending.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let t0 = Instant::now();
        let _waiting = self.waits.enter();
        let mut spins = 0u32;
        while over() && pending.load(Ordering::SeqCst) > 0 {
            self.check()?;
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.stats.memory_waits += 1;
        self.stats.memory_wait_ns += t0.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// Before a task of this rank: holds the submission back while the copies it needs
    /// that this rank does not hold would pass the memory limit (see `crate::memory`).
    pub(crate) fn hold_back_for(
        &mut self,
        accesses: &[(&dyn DistAccess, Access)],
    ) -> Result<(), DistError> {
        if self.memory.limit.is_none() {
            return Ok(());
        }
        let me = self.rank;
        let need: u64 = accesses
            .iter()
            .filter(|(h, m)| {
                let id = h.dist_id() as usize;
                let meta = &self.handles[id];
                let reads = !matches!(m, Access::W | Access::Redux);
                meta.owner != me
                    && !self.memory.holds[id]
                    && (matches!(m, Access::W) || (reads && !meta.valid[me]))
            })
            .map(|(h, _)| h.dist_bytes())
            .sum();
        self.wait_for_memory(need)
    }
}
