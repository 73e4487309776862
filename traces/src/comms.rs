//! The model of a distributed run's messages (format 1.4): each rank's Comms chunk, its
//! messages and its clock estimates against rank 0's.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// One message between ranks of a distributed run (taskwatt-mpi).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommRecord {
    /// The other rank.
    pub peer: u32,
    /// A send (else a receive).
    pub send: bool,
    /// The distributed handle (the message's tag).
    pub handle: u32,
    /// Bytes.
    pub bytes: u64,
    /// When it was posted (its data ready), on this rank's trace clock.
    pub start: Timestamp,
    /// When it completed.
    pub end: Timestamp,
}

/// A rank's messages (format 1.4): who it is, its clock against rank 0's, and its
/// messages. A merged trace (`taskwatt merge`) holds one per rank, on rank 0's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommChunk {
    /// This rank.
    pub rank: u32,
    /// Ranks in the job.
    pub size: u32,
    /// Estimates of rank 0's clock minus this rank's, each with when it was taken and the
    /// round trip it came from (the fastest of a ping-pong): at the start of the run and at
    /// its end, so that a merge corrects offset and drift.
    pub clock: Vec<ClockSample>,
    /// The workers of this rank (their ids in this trace).
    #[serde(default)]
    pub workers: Vec<u32>,
    /// The node (host) the rank ran on: ranks of one node share its energy domains.
    #[serde(default)]
    pub node: String,
    /// On the first rank of a node whose meter is the simulated one: its configuration
    /// (`SimConfig` as JSON) and sampling period, for `taskwatt merge` to run the node's
    /// simulated meter over all the node's tasks (no process sees them all live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim_meter: Option<serde_json::Value>,
    /// The sampling period of `sim_meter`, ns.
    #[serde(default)]
    pub sim_period_ns: u64,
    /// The messages.
    pub events: Vec<CommRecord>,
    /// Written while the rank ran: `events` are only those since the rank's previous
    /// partial chunk, and the other fields but `rank` and `size` are empty. A rank's last
    /// chunk that is not partial holds all its messages; a rank killed before it wrote one
    /// leaves its messages in its partial chunks (`taskwatt merge --recover` gathers them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// One estimate of a rank's clock against rank 0's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSample {
    /// When it was taken, on this rank's clock.
    pub at: Timestamp,
    /// Rank 0's clock minus this rank's, ns.
    pub offset_ns: i64,
    /// The round trip of the ping-pong it came from, ns (the error is at most half of it).
    pub rtt_ns: u64,
}
