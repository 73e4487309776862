//! The end of a rank: [`DistRuntime::shutdown`], and [`DistRuntime::end`], which also gives
//! the transport back for a last rendezvous of the ranks.

use taskwatt_traces::CommRecord;

use crate::dist::{DistRuntime, DistStats};
use crate::transport::Transport;
use crate::DistError;

/// What [`DistRuntime::end`] returns.
pub struct Ended {
    /// The rank's counts, bytes as they went.
    pub stats: DistStats,
    /// Every message of the rank.
    pub messages: Vec<CommRecord>,
    /// The transport, still connected to the other ranks.
    pub transport: Box<dyn Transport>,
}

impl std::fmt::Debug for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ended")
            .field("stats", &self.stats)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl DistRuntime {
    /// Waits for everything, stops the communication thread and the runtime; returns the
    /// counts and every message of this rank.
    pub fn shutdown(self) -> Result<(DistStats, Vec<CommRecord>), DistError> {
        self.end().map(|e| (e.stats, e.messages))
    }

    /// As [`DistRuntime::shutdown`], and gives the transport back, for a rendezvous of
    /// the ranks after this one's runtime is down (`taskwatt::DistMeasure` waits there
    /// for every rank's trace to be complete before rank 0 merges them).
    ///
    /// # Errors
    /// As [`DistRuntime::shutdown`]; the transport is then dropped.
    pub fn end(mut self) -> Result<Ended, DistError> {
        let waited = self.wait_all();
        let (log, net) = self.comm.stop();
        let rt = self.rt.take().expect("shutdown runs once");
        let stats = rt.shutdown();
        waited?;
        stats.map_err(|source| DistError::Runtime {
            rank: self.rank,
            source,
        })?;
        // The bytes as they went (a handle's footprint may not count a value's heap).
        let mut s = self.stats.clone();
        s.sent.1 = log.events.iter().filter(|e| e.send).map(|e| e.bytes).sum();
        s.received.1 = log.events.iter().filter(|e| !e.send).map(|e| e.bytes).sum();
        let transport = net.ok_or_else(|| DistError::CommThread {
            rank: self.rank,
            message: "it ended without giving its transport back".into(),
        })?;
        Ok(Ended {
            stats: s,
            messages: log.events,
            transport,
        })
    }
}
