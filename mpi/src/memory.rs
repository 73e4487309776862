//! The account of the memory a rank's copies of other ranks' data take, in flight as well
//! as cached, for its limit ([`DistRuntime::set_memory_limit`], in `crate::cache`): past
//! it, submission waits (and with it the receives it would post) until the copies that
//! tasks already submitted have finished reading are freed.
//!
//! The cache limit ([`DistRuntime::set_cache_limit`]) decides from the flow alone which
//! copies are dropped, the same way on every rank; it cannot bound the copies in flight,
//! because the submission runs ahead of the tasks and every copy a submitted task needs is
//! received as its message comes. This limit is local: a rank that holds more than it
//! allows does not submit its next task that needs a new copy while copies it has already
//! dropped wait for their readers to finish. The flow, and so every rank's decisions, stay
//! the same; only this rank's submission is later.
//!
//! Why it cannot deadlock: take the rank blocked at the earliest task `m` of the flow.
//! Every rank has submitted every task before `m`, so every message those tasks need is
//! posted, they all finish, and the copies waiting for them are freed: that rank goes on.
//! When nothing it waits for is left (every copy it holds is cached, or needed by the task
//! itself), it goes on over the limit rather than wait for ever.
//!
//! Bytes are counted per copy that holds, or is about to hold, storage: from the receive
//! (or the write) that makes it to the release that frees it (a flush, an eviction). That
//! is right for types that can be without storage ([`DeviceData::release_storage`]: tiles
//! and edges made unallocated); a copy of a type that keeps its storage (a `Vec`) is
//! counted as freed at its release all the same, so the limit undercounts such copies.
//!
//! [`DeviceData::release_storage`]: taskwatt_runtime::DeviceData::release_storage
//! [`DistRuntime::set_memory_limit`]: crate::DistRuntime::set_memory_limit
//! [`DistRuntime::set_cache_limit`]: crate::DistRuntime::set_cache_limit

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// This rank's account of its copies' memory.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The most bytes of copies (`None`: no limit).
    pub(crate) limit: Option<u64>,
    /// Bytes of the copies that hold (or are about to hold) storage.
    pub(crate) stored: Arc<AtomicU64>,
    /// Releases handed to the communication thread and not yet done.
    pub(crate) pending: Arc<AtomicU64>,
    /// Per handle: whether this rank's copy holds (or is about to hold) storage.
    pub(crate) holds: Vec<bool>,
}

/// What the communication thread does once a release is done: the bytes go back.
pub(crate) type Freed = Box<dyn FnOnce() + Send>;

impl Memory {
    /// Handle `id`'s copy (of `bytes`) gets storage: counted, once.
    pub(crate) fn fill(&mut self, id: usize, bytes: u64) {
        if let Some(h) = self.holds.get_mut(id) {
            if !*h {
                *h = true;
                self.stored.fetch_add(bytes, Ordering::SeqCst);
            }
        }
    }

    /// Handle `id`'s copy is to be freed: what to run once the release is done.
    pub(crate) fn free(&mut self, id: usize, bytes: u64) -> Option<Freed> {
        let h = self.holds.get_mut(id)?;
        if !std::mem::replace(h, false) {
            return None;
        }
        self.pending.fetch_add(1, Ordering::SeqCst);
        let (stored, pending) = (self.stored.clone(), self.pending.clone());
        Some(Box::new(move || {
            stored.fetch_sub(bytes, Ordering::SeqCst);
            pending.fetch_sub(1, Ordering::SeqCst);
        }))
    }
}
