//! Copies between memory nodes: making the data a task or an acquisition accesses valid
//! where it runs, counting the copies and recording them in the trace.

use std::sync::atomic::Ordering;

use taskwatt_traces::{Chunk, TaskId, Transfer, WorkerId};

use crate::handle::{Access, HandleCore};
use crate::shared::Shared;
use crate::tracelog::TRANSFERS_PER_CHUNK;

impl Shared {
    /// Makes every handle of `accesses` valid on memory node `node`, counting the
    /// copies and recording them in the trace (for task `task`, by worker `worker`; none
    /// for the application's thread). Stops at the first copy that fails, and says why.
    ///
    /// # Safety
    /// The caller holds the access rights the accesses declare (a released task, a granted
    /// acquisition).
    pub(crate) unsafe fn make_valid<'a>(
        &self,
        node: usize,
        accesses: impl Iterator<Item = (&'a HandleCore, Access)>,
        worker: Option<WorkerId>,
        task: Option<TaskId>,
    ) -> Result<(), String> {
        for (core, mode) in accesses {
            // REDUX contributions go to per-worker slots in main memory; a valid copy needs
            // neither a copy nor a clock read.
            if mode == Access::Redux || core.is_valid_for(node, mode) {
                continue;
            }
            let start = self.now();
            // SAFETY: the caller's contract.
            let copied = unsafe { core.make_valid(node, mode, &self.backends) }.map_err(|e| {
                format!(
                    "handle {} could not be made valid on memory node {node}: {e}",
                    core.id
                )
            })?;
            if let Some((src, bytes)) = copied {
                self.transfers.fetch_add(1, Ordering::Relaxed);
                self.transferred_bytes.fetch_add(bytes, Ordering::Relaxed);
                if self.sink.is_enabled() {
                    let t = Transfer {
                        handle: core.id,
                        src: src as u32,
                        dst: node as u32,
                        bytes,
                        worker,
                        task,
                        start,
                        end: self.now(),
                    };
                    let mut log = self.transfer_log.lock();
                    log.push(t);
                    if log.len() >= TRANSFERS_PER_CHUNK {
                        self.sink.send(Chunk::Transfers(std::mem::take(&mut *log)));
                    }
                }
            }
        }
        Ok(())
    }
}
