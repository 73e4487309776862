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

use crate::dist::DistRuntime;
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
}
