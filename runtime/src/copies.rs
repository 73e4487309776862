//! Copies between memory nodes: making the data a task or an acquisition accesses valid
//! where it runs, within the device's memory limit (device/memory.rs), counting the
//! copies and recording them, and the evictions they caused, in the trace.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;
use taskwatt_traces::{Chunk, Eviction, TaskId, Transfer, TransferKind, WorkerId};

use crate::device::memory::{DeviceMemory, Evicted, Pinner, Room};
use crate::handle::{Access, HandleCore};
use crate::shared::Shared;
use crate::tracelog::TRANSFERS_PER_CHUNK;

/// Who a copy is made for, and why.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CopyFor {
    /// The worker that needs it (for the prefetcher: its GPU worker); none for the
    /// application's thread.
    pub(crate) worker: Option<WorkerId>,
    pub(crate) task: Option<TaskId>,
    pub(crate) kind: TransferKind,
}

impl CopyFor {
    /// For the application's thread (an acquisition, an unregistration).
    pub(crate) const APP: CopyFor = CopyFor {
        worker: None,
        task: None,
        kind: TransferKind::Fetch,
    };
}

/// Pins on a device's node, let go when dropped (see device/memory.rs).
pub(crate) struct Pins<'a> {
    mem: &'a DeviceMemory,
    ids: SmallVec<[u64; 8]>,
    who: Pinner,
}

impl Drop for Pins<'_> {
    fn drop(&mut self) {
        self.mem.unpin(self.ids.iter().copied(), self.who);
    }
}

impl Shared {
    /// Pins the handles of `accesses` that can have a copy on device node `node` (none
    /// for node 0, or when the runtime has no such device).
    pub(crate) fn pin<'a, 'h>(
        &'a self,
        node: usize,
        accesses: impl Iterator<Item = &'h Arc<HandleCore>> + Clone,
        who: Pinner,
    ) -> Option<Pins<'a>> {
        let mem = self.memories.get(node.checked_sub(1)?)?;
        let cores = accesses.filter(|c| c.copier.is_some());
        mem.pin(cores.clone(), who);
        Some(Pins {
            mem,
            ids: cores.map(|c| c.id).collect(),
            who,
        })
    }

    /// Makes every handle of `accesses` valid on memory node `node`, counting the
    /// copies and recording them in the trace. On a device's node each new copy is
    /// charged to the device's memory first, evicting others if needed. Stops at the
    /// first copy that fails, and says why. A prefetch (`why.kind`) that finds no room
    /// stops there and returns `false`; a task waits for room, or fails when its own
    /// data does not fit.
    ///
    /// # Safety
    /// The caller holds the access rights the accesses declare (a released task, a granted
    /// acquisition), and, on a device's node, has pinned the handles there
    /// ([`Shared::pin`]).
    pub(crate) unsafe fn make_valid<'a>(
        &self,
        node: usize,
        accesses: impl Iterator<Item = (&'a Arc<HandleCore>, Access)>,
        why: CopyFor,
    ) -> Result<bool, String> {
        let who = if why.kind == TransferKind::Prefetch {
            Pinner::Prefetch
        } else {
            Pinner::Task
        };
        for (core, mode) in accesses {
            // REDUX contributions go to per-worker slots in main memory; a valid copy needs
            // neither a copy nor a clock read.
            if mode == Access::Redux || core.is_valid_for(node, mode) {
                continue;
            }
            let fail = |e: String| {
                format!(
                    "handle {} could not be made valid on memory node {node}: {e}",
                    core.label()
                )
            };
            let mem = match node {
                0 => None,
                n if core.copier.is_some() => self.memories.get(n - 1),
                _ => None,
            };
            let mut charged_now = false;
            if let Some(mem) = mem {
                loop {
                    match mem.make_room(core, who, &mut |victim| self.evict(mem, victim, why)) {
                        Ok(Room::Charged { now }) => {
                            charged_now = now;
                            break;
                        }
                        Ok(Room::Busy) if who == Pinner::Prefetch => return Ok(false),
                        Ok(Room::Busy) => mem.wait_unpinned(),
                        Err(e) => return Err(fail(e)),
                    }
                }
            }
            let start = self.now();
            // SAFETY: the caller's contract.
            let copied = match unsafe { core.make_valid(node, mode, &self.backends) } {
                Ok(c) => c,
                Err(e) => {
                    if let (Some(mem), true) = (mem, charged_now) {
                        mem.uncharge(core.id);
                    }
                    return Err(fail(e));
                }
            };
            if let Some((src, bytes)) = copied {
                self.log_transfer(Transfer {
                    handle: core.id,
                    src: src as u32,
                    dst: node as u32,
                    bytes,
                    worker: why.worker,
                    task: why.task,
                    start,
                    end: self.now(),
                    kind: why.kind,
                });
            }
        }
        Ok(true)
    }

    /// Drops `victim`'s copy on `mem`'s node (see [`HandleCore::evict`]) and records it.
    /// A write-back that fails leaves the copy, and fails the copy that needed the room.
    fn evict(
        &self,
        mem: &DeviceMemory,
        victim: &HandleCore,
        why: CopyFor,
    ) -> Result<Evicted, String> {
        let start = self.now();
        let wrote = match victim.evict(mem.node, &self.backends) {
            Ok(Evicted::Dropped(w)) => w,
            Ok(other) => return Ok(other),
            Err(e) => {
                return Err(format!(
                    "handle {}'s copy on memory node {} could not be written back to make \
                     room: {e}",
                    victim.id, mem.node
                ))
            }
        };
        let end = self.now();
        if wrote {
            self.log_transfer(Transfer {
                handle: victim.id,
                src: mem.node as u32,
                dst: 0,
                bytes: victim.bytes,
                worker: why.worker,
                task: why.task,
                start,
                end,
                kind: TransferKind::WriteBack,
            });
        }
        if self.sink.is_enabled() {
            let mut log = self.eviction_log.lock();
            log.push(Eviction {
                handle: victim.id,
                node: mem.node as u32,
                bytes: victim.bytes,
                written_back: wrote,
                worker: why.worker,
                task: why.task,
                time: end,
            });
            if log.len() >= TRANSFERS_PER_CHUNK {
                self.sink.send(Chunk::Evictions(std::mem::take(&mut *log)));
            }
        }
        Ok(Evicted::Dropped(wrote))
    }

    /// Counts a copy, and records it in the trace.
    fn log_transfer(&self, t: Transfer) {
        self.transfers.fetch_add(1, Ordering::Relaxed);
        self.transferred_bytes.fetch_add(t.bytes, Ordering::Relaxed);
        if t.kind == TransferKind::Prefetch {
            self.prefetches.fetch_add(1, Ordering::Relaxed);
        }
        if self.sink.is_enabled() {
            let mut log = self.transfer_log.lock();
            log.push(t);
            if log.len() >= TRANSFERS_PER_CHUNK {
                self.sink.send(Chunk::Transfers(std::mem::take(&mut *log)));
            }
        }
    }
}
