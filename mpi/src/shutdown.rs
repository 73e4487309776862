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

impl Drop for DistRuntime {
    /// Dropped while its thread panics, before [`DistRuntime::shutdown`]: this rank will
    /// submit no more, and the others would wait for its messages until the stall limit
    /// (300 s), so it ends the job at once, as a rank that dies does (`MPI_Abort` under
    /// MPI; the other ranks' waits fail with `ThreadNet`). Without the panic, the
    /// runtime's own drop waits for what was submitted.
    fn drop(&mut self) {
        if self.rt.is_some() && std::thread::panicking() {
            self.comm.abort(format!(
                "rank {}: its application thread panicked before DistRuntime::shutdown (or \
                 DistMeasured::finish): the other ranks would wait for its messages",
                self.rank
            ));
        }
    }
}

impl DistRuntime {
    /// Ends the whole job from this rank, with `why` in its error: for an application
    /// that cannot go on (an error of its own), rather than return and leave the other
    /// ranks waiting for this one's messages until the stall limit. Under MPI every
    /// process ends (`MPI_Abort`); with `ThreadNet` the other ranks' waits fail.
    pub fn abort_job(mut self, why: &str) {
        self.comm.abort(format!("rank {}: {why}", self.rank));
        // The runtime's tasks waiting on messages were released by the abort.
        if let Some(rt) = self.rt.take() {
            let _ = rt.shutdown();
        }
    }
}
