//! Data movement in a trace: copies between memory nodes ([`Transfer`], why each was
//! made: [`TransferKind`]), device copies evicted under a memory limit ([`Eviction`]),
//! the tasks' data accesses ([`TaskAccess`]) and the handles' names ([`HandleInfo`]).

use serde::{Deserialize, Serialize};

use crate::{TaskId, Timestamp, WorkerId};

/// A copy of a data handle's value between memory nodes (0 is main memory; a device's
/// node is `1 + device`), made before a task that needed it there, or before an
/// acquisition or unregistration brought the data back to main memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The handle (its id, unique in the process).
    pub handle: u64,
    /// The node copied from.
    pub src: u32,
    /// The node copied to.
    pub dst: u32,
    /// Bytes moved (the handle's registered size).
    pub bytes: u64,
    /// The worker that made the copy; `None` for the application's thread (acquisition,
    /// unregistration).
    pub worker: Option<WorkerId>,
    /// The task the copy was made for, if any.
    pub task: Option<TaskId>,
    /// Start of the copy.
    pub start: Timestamp,
    /// End of the copy.
    pub end: Timestamp,
    /// Why the copy was made (format 1.7; a trace of an older version has fetches only).
    #[serde(default, skip_serializing_if = "TransferKind::is_fetch")]
    pub kind: TransferKind,
}

/// Why a copy between memory nodes was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferKind {
    /// Made when the task (or acquisition) that needed it started: the worker waited for it.
    #[default]
    Fetch,
    /// Made ahead of its task, while the worker ran earlier ones (a GPU worker's
    /// pipeline): its start comes before its task's.
    Prefetch,
    /// A device's only valid copy written back to main memory before it was evicted to
    /// make room (see [`Eviction`]).
    WriteBack,
}

impl TransferKind {
    /// Whether this is a plain fetch (the default, left out of the JSON).
    pub fn is_fetch(&self) -> bool {
        *self == TransferKind::Fetch
    }

    /// The name used in exports.
    pub fn name(self) -> &'static str {
        match self {
            TransferKind::Fetch => "fetch",
            TransferKind::Prefetch => "prefetch",
            TransferKind::WriteBack => "write-back",
        }
    }
}

/// A device's copy of a handle dropped to make room for another under the device's
/// memory limit (format 1.7): least recently used first, copies that are valid elsewhere
/// before the only valid ones, which are written back to main memory first (a
/// [`TransferKind::WriteBack`] transfer just before).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eviction {
    /// The handle.
    pub handle: u64,
    /// The memory node the copy was on.
    pub node: u32,
    /// Bytes freed (the handle's registered size).
    pub bytes: u64,
    /// Whether it was the only valid copy, written back to main memory first.
    pub written_back: bool,
    /// The worker (or the device's prefetcher, which records its GPU worker) that needed
    /// the room.
    pub worker: Option<WorkerId>,
    /// The task the room was made for, if any.
    pub task: Option<TaskId>,
    /// When the copy was dropped.
    pub time: Timestamp,
}

/// How a task accessed a data handle (the runtime's access modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AccessMode {
    /// Read.
    R,
    /// Written without being read.
    W,
    /// Read and written.
    RW,
    /// Read and written, in any order with the other COMMUTE accesses of its group.
    Commute,
    /// A contribution to a reduction.
    Redux,
}

impl AccessMode {
    /// Every mode, by its stored index.
    pub const ALL: [AccessMode; 5] = [
        AccessMode::R,
        AccessMode::W,
        AccessMode::RW,
        AccessMode::Commute,
        AccessMode::Redux,
    ];

    /// The mode's name, as StarPU writes it (`R`, `W`, `RW`, `COMMUTE`, `REDUX`).
    pub fn name(self) -> &'static str {
        match self {
            AccessMode::R => "R",
            AccessMode::W => "W",
            AccessMode::RW => "RW",
            AccessMode::Commute => "COMMUTE",
            AccessMode::Redux => "REDUX",
        }
    }

    /// Its index in [`AccessMode::ALL`] (what the trace stores).
    pub fn index(self) -> u8 {
        self as u8
    }
}

/// One data access of a task (format 1.3): the handle, the mode, and the bytes it counts
/// for (the handle's registered size). A task has one per handle it declared, in the
/// order it declared them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAccess {
    /// The task.
    pub task: TaskId,
    /// The handle (its id, unique in the process).
    pub handle: u64,
    /// How it was accessed.
    pub mode: AccessMode,
    /// The handle's registered size.
    pub bytes: u64,
}

/// A data handle the application named (format 1.5): its id, its name and its registered
/// size, so that exports show `A[2][1]` where they would show `h260`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandleInfo {
    /// The handle (its id, unique in the process; [`TaskAccess::handle`], [`Transfer::handle`]).
    pub handle: u64,
    /// The name the application gave it.
    pub name: String,
    /// Its registered size.
    pub bytes: u64,
}
