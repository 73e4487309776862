//! What goes to the trace besides the task records the workers buffer: handle names,
//! transfers and data accesses (logged, then sent in chunks), and the flusher thread that
//! sends stale worker buffers (see runtime.rs, "Trace flushing").

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use taskwatt_traces::{AccessMode, Chunk, Clock, TaskAccess, TaskId};

use crate::handle::Access;
use crate::shared::Shared;

/// Transfers sent to the trace in one chunk.
pub(crate) const TRANSFERS_PER_CHUNK: usize = 512;

/// Task accesses sent to the trace in one chunk.
pub(crate) const ACCESSES_PER_CHUNK: usize = 8192;

/// The thread that sends stale trace buffers (see the module docs, "Trace flushing").
pub(crate) struct Flusher {
    stop: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: JoinHandle<()>,
}

impl Flusher {
    pub(crate) fn start(shared: &Arc<Shared>, every: Duration) -> std::io::Result<Flusher> {
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (sh, st) = (Arc::downgrade(shared), stop.clone());
        let thread = std::thread::Builder::new()
            .name("taskwatt-trace-flush".into())
            .spawn(move || {
                let (lock, cv) = &*st;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    stopped = cv
                        .wait_timeout(stopped, every / 2)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if *stopped {
                        return;
                    }
                    let Some(sh) = sh.upgrade() else { return };
                    sh.flush_stale_traces(every);
                }
            })?;
        Ok(Flusher { stop, thread })
    }

    pub(crate) fn stop(self) {
        *self.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.1.notify_all();
        let _ = self.thread.join();
    }
}

impl Shared {
    /// Sends the handle names, transfers and accesses not yet in the trace.
    pub(crate) fn flush_transfers(&self) {
        self.flush_names();
        let mut log = self.transfer_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Transfers(std::mem::take(&mut *log)));
        }
        drop(log);
        let mut log = self.eviction_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Evictions(std::mem::take(&mut *log)));
        }
        drop(log);
        let mut log = self.access_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Accesses(std::mem::take(&mut *log)));
        }
    }

    /// Sends the handle names not yet in the trace.
    pub(crate) fn flush_names(&self) {
        let mut log = self.name_log.lock();
        if !log.is_empty() {
            self.sink.send(Chunk::Handles(std::mem::take(&mut *log)));
        }
    }

    /// Notes task `task`'s data accesses for the trace (sent in chunks of
    /// `ACCESSES_PER_CHUNK`, and by the flusher).
    pub(crate) fn note_accesses(&self, task: TaskId, accesses: &crate::task::Accesses) {
        let mut log = self.access_log.lock();
        for (core, mode) in accesses.iter() {
            log.push(TaskAccess {
                task,
                handle: core.id,
                mode: match mode {
                    Access::R => AccessMode::R,
                    Access::W => AccessMode::W,
                    Access::RW => AccessMode::RW,
                    Access::Commute => AccessMode::Commute,
                    Access::Redux => AccessMode::Redux,
                },
                bytes: core.bytes,
            });
        }
        if log.len() >= ACCESSES_PER_CHUNK {
            let full = std::mem::replace(&mut *log, Vec::with_capacity(ACCESSES_PER_CHUNK));
            drop(log);
            self.sink.send(Chunk::Accesses(full));
        }
    }

    /// Sends the trace buffers whose oldest record ended `age` ago or earlier; a buffer
    /// its worker is writing to is left for the next look.
    pub(crate) fn flush_stale_traces(&self, age: Duration) {
        if self.devices || self.trace_accesses {
            self.flush_transfers();
        } else {
            self.flush_names();
        }
        let now = Clock::now().as_ns();
        for slot in &self.trace_bufs {
            if let Some(mut buf) = slot.try_lock() {
                let stale = buf
                    .records
                    .first()
                    .is_some_and(|r| now.saturating_sub(r.end.as_ns()) >= age.as_nanos() as u64);
                if stale {
                    self.sink.swap_tasks(&mut buf);
                }
            }
        }
    }
}
