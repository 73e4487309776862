//! The distributed runtime: StarPU-MPI's model over one local [`Runtime`] per rank.
//!
//! Every rank submits the same sequence of tasks. A handle is registered on every rank
//! with its owner; a task runs on the owner of the data it writes (or where it is told).
//! For each task, every rank works out the same thing from the same flow:
//!
//! - on the rank that runs it, each datum it reads that another rank owns is received
//!   first into this rank's copy, unless the copy is still valid (received before and not
//!   written since: the cache); then the task is submitted to the local runtime;
//! - on the owner of such a datum, a send is posted when the datum is ready;
//! - every other rank skips the task;
//! - a write makes every other rank's copy stale.
//!
//! Sends and receives are deferred acquisitions of the local runtime
//! ([`Runtime::acquire_deferred`]), posted and tested by the communication thread
//! (`crate::comm`), so that no worker waits for the network. The tag of a message is its
//! handle's id; two messages of one handle between two ranks keep the flow's order, since
//! each waits for the accesses before it.

use std::any::Any;

use taskwatt_runtime::{Access, Codelet, DeferredAccess, DeviceData, Handle, Runtime, Task};

use crate::comm::{Cmd, CommThread, Op};
use crate::transport::Transport;
use crate::DistError;
use taskwatt_traces::TraceSink;

/// A datum of a distributed run: its owner, and this rank's copy.
#[derive(Debug)]
pub struct DistHandle<T> {
    pub(crate) id: u32,
    pub(crate) owner: usize,
    pub(crate) local: Handle<T>,
    /// Its reduction across ranks, once set ([`DistRuntime::set_reduction`]).
    pub(crate) red: Option<std::sync::Arc<DistReduction<T>>>,
}

/// A datum's reduction across ranks (see `crate::redux`): the neutral element, and the
/// local tasks that reset a contributor's copy and fold a received contribution into the
/// owner's value.
pub(crate) struct DistReduction<T> {
    pub(crate) init: std::sync::Arc<dyn Fn() -> T + Send + Sync>,
    pub(crate) reset: Codelet,
    pub(crate) fold: Codelet,
}

impl<T> std::fmt::Debug for DistReduction<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DistReduction")
    }
}

impl<T> DistHandle<T> {
    /// Its id (also the tag of its messages).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The rank that owns it.
    pub fn owner(&self) -> usize {
        self.owner
    }

    /// This rank's copy: the data on its owner, a cache elsewhere.
    pub fn local(&self) -> &Handle<T> {
        &self.local
    }
}

/// What a task needs of a handle, whatever its type.
pub trait DistAccess {
    /// The handle's id.
    fn dist_id(&self) -> u32;
    /// Its owner.
    fn dist_owner(&self) -> usize;
    /// Adds the local copy to a task.
    fn add_to<'a>(&'a self, task: Task<'a>, mode: Access) -> Task<'a>;
    /// Its size, bytes.
    fn dist_bytes(&self) -> u64;
    /// A deferred acquisition of the local copy.
    fn defer(
        &self,
        rt: &Runtime,
        write: bool,
    ) -> Result<taskwatt_runtime::DeferredAccess, taskwatt_runtime::RuntimeError>;
    /// What gives a granted write acquisition of the local copy its storage (a copy made
    /// without, which a task is about to write without reading).
    fn materializer(&self) -> fn(&mut taskwatt_runtime::DeferredAccess);
    /// Whether it has a reduction across ranks.
    fn has_reduction(&self) -> bool;
    /// This rank starts contributing to the handle's reduction: its copy is reset to the
    /// neutral element (a local task; nothing without a reduction).
    fn redux_reset(&self, rt: &Runtime) -> Result<(), taskwatt_runtime::RuntimeError>;
    /// On the owner: receives `from`'s contribution and folds it into the value.
    fn redux_collect(&self, d: &mut DistRuntime, from: usize) -> Result<(), DistError>;
}

impl<T: DeviceData> DistAccess for DistHandle<T> {
    fn dist_id(&self) -> u32 {
        self.id
    }
    fn dist_owner(&self) -> usize {
        self.owner
    }
    fn add_to<'a>(&'a self, task: Task<'a>, mode: Access) -> Task<'a> {
        task.access(&self.local, mode)
    }
    fn dist_bytes(&self) -> u64 {
        self.local.bytes()
    }
    fn defer(
        &self,
        rt: &Runtime,
        write: bool,
    ) -> Result<taskwatt_runtime::DeferredAccess, taskwatt_runtime::RuntimeError> {
        rt.acquire_deferred(&self.local, write)
    }
    fn materializer(&self) -> fn(&mut taskwatt_runtime::DeferredAccess) {
        materialize::<T>
    }
    fn has_reduction(&self) -> bool {
        self.red.is_some()
    }
    fn redux_reset(&self, rt: &Runtime) -> Result<(), taskwatt_runtime::RuntimeError> {
        match &self.red {
            Some(red) => rt.submit(Task::new(&red.reset).w(&self.local)).map(drop),
            None => Ok(()),
        }
    }
    fn redux_collect(&self, d: &mut DistRuntime, from: usize) -> Result<(), DistError> {
        let me = d.rank;
        let Some(red) = &self.red else {
            return Err(DistError::NoReduction {
                codelet: "(a contribution)".into(),
                handle: self.id,
            });
        };
        let value = (red.init)();
        let bytes = value.device_len() as u64;
        // A buffer of its own, tagged with the datum's id as the contribution is sent.
        let buffer = DistHandle {
            id: self.id,
            owner: self.owner,
            local: d.runtime().register_device_bytes(value, bytes),
            red: None,
        };
        d.post(false, from, &buffer)?;
        d.runtime()
            .submit(Task::new(&red.fold).rw(&self.local).r(&buffer.local))
            .map_err(|source| DistError::Runtime { rank: me, source })?;
        d.temps.push(Box::new(buffer.local));
        Ok(())
    }
}

/// What frees a rank's cached copy: a write acquisition queued after the accesses before,
/// and what to do with it once granted.
pub(crate) type Evict = Box<
    dyn Fn(
            &Runtime,
        )
            -> Result<(DeferredAccess, fn(&mut DeferredAccess)), taskwatt_runtime::RuntimeError>
        + Send,
>;

/// The [`Evict`] of `local`'s copy.
pub(crate) fn evictor<T: DeviceData>(local: &Handle<T>) -> Evict {
    let local = local.clone();
    Box::new(move |rt| Ok((rt.acquire_deferred(&local, true)?, release_storage::<T>)))
}

/// Gives the copy a granted write acquisition holds its storage.
fn materialize<T: DeviceData>(access: &mut taskwatt_runtime::DeferredAccess) {
    if let Some(v) = access.value_mut::<T>() {
        let _ = v.device_bytes_mut();
    }
}

/// Frees the storage of the copy a granted write acquisition holds.
fn release_storage<T: DeviceData>(access: &mut taskwatt_runtime::DeferredAccess) {
    if let Some(v) = access.value_mut::<T>() {
        v.release_storage();
    }
}

type Extra<'a> = Box<dyn FnOnce(Task<'a>) -> Task<'a> + 'a>;

/// A task of a distributed run, built like a [`Task`].
pub struct DistTask<'a> {
    codelet: &'a Codelet,
    accesses: Vec<(&'a dyn DistAccess, Access)>,
    extra: Vec<Extra<'a>>,
    rank: Option<usize>,
}

impl<'a> DistTask<'a> {
    /// A task of `codelet`.
    pub fn new(codelet: &'a Codelet) -> Self {
        DistTask {
            codelet,
            accesses: Vec::new(),
            extra: Vec::new(),
            rank: None,
        }
    }

    /// Reads `h`.
    pub fn r(mut self, h: &'a dyn DistAccess) -> Self {
        self.accesses.push((h, Access::R));
        self
    }

    /// Writes `h` (without reading it).
    pub fn w(mut self, h: &'a dyn DistAccess) -> Self {
        self.accesses.push((h, Access::W));
        self
    }

    /// Reads and writes `h`.
    pub fn rw(mut self, h: &'a dyn DistAccess) -> Self {
        self.accesses.push((h, Access::RW));
        self
    }

    /// Contributes to `h`'s reduction (REDUX; `h` needs [`DistRuntime::set_reduction`]).
    /// The task runs where what it writes, else what it reads, lives: each rank's
    /// contributions go to `h`'s owner when the phase ends (see `crate::redux`).
    pub fn redux(mut self, h: &'a dyn DistAccess) -> Self {
        self.accesses.push((h, Access::Redux));
        self
    }

    /// Its argument.
    pub fn arg<A: Any + Send + Sync>(mut self, arg: A) -> Self {
        self.extra.push(Box::new(move |t| t.arg(arg)));
        self
    }

    /// Its priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.extra.push(Box::new(move |t| t.priority(p)));
        self
    }

    /// Runs it on `rank` instead of the owner of what it writes.
    pub fn on_rank(mut self, rank: usize) -> Self {
        self.rank = Some(rank);
        self
    }
}

/// Counts of a rank's part of a distributed run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DistStats {
    /// Tasks this rank ran.
    pub tasks: u64,
    /// Tasks it skipped (other ranks ran them).
    pub skipped: u64,
    /// Messages sent (counted when posted), and their bytes (as sent; known at shutdown).
    pub sent: (u64, u64),
    /// Messages received (counted when posted), and their bytes (known at shutdown).
    pub received: (u64, u64),
    /// Reads served from a valid cached copy (no message).
    pub cache_hits: u64,
    /// Cached copies this rank dropped ([`DistRuntime::flush`]).
    pub flushed: u64,
    /// Cached copies this rank dropped to stay within its cache limit
    /// ([`DistRuntime::set_cache_limit`]).
    pub evicted: u64,
    /// Times this rank's submission waited for copies to be freed, to stay within its
    /// memory limit ([`DistRuntime::set_memory_limit`]), and how long in all, ns.
    pub memory_waits: u64,
    /// See `memory_waits`.
    pub memory_wait_ns: u64,
}

pub(crate) struct Meta {
    pub(crate) owner: usize,
    /// Per rank: whether its copy is valid (the owner's always is).
    pub(crate) valid: Vec<bool>,
    /// Per rank: whether it holds a contribution to the handle's reduction, not yet sent
    /// to the owner (see `crate::redux`).
    pub(crate) contributors: Vec<bool>,
    /// The bytes of a copy (every rank's copy has the owner's size).
    pub(crate) bytes: u64,
    /// Per rank: the last task (submission number) that read its copy (see `crate::cache`).
    pub(crate) last_use: Vec<u64>,
    /// Frees this rank's copy once the accesses before are done (see `crate::cache`);
    /// `None` once unregistered.
    pub(crate) evict: Option<Evict>,
    /// Partitioned (`crate::partition`): refused, and `evict` kept aside meanwhile.
    pub(crate) partitioned: bool,
    pub(crate) kept_evict: Option<Evict>,
}

/// One rank of a distributed run.
pub struct DistRuntime {
    pub(crate) rt: Option<Runtime>,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) comm: CommThread,
    pub(crate) handles: Vec<Meta>,
    pub(crate) stats: DistStats,
    /// Buffers of reductions' contributions, dropped once their folds have run.
    pub(crate) temps: Vec<Box<dyn std::any::Any>>,
    /// Per peer and tag: receives posted so far (their order, `comm::Op::seq`).
    recv_seq: std::collections::HashMap<(usize, u32), u64>,
    /// Tasks submitted so far (the clock of the caches' least-recent use).
    pub(crate) submitted: u64,
    /// Each rank's most bytes of cached copies ([`DistRuntime::set_cache_limit`]).
    pub(crate) cache_limit: Option<u64>,
    /// This rank's copies' memory, and its limit (see `crate::memory`).
    pub(crate) memory: crate::memory::Memory,
    /// The application's calls that wait in taskwatt now (`crate::comm`'s beats).
    pub(crate) waits: crate::comm::AppWaits,
}

impl std::fmt::Debug for DistRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistRuntime")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl DistRuntime {
    /// This rank's part of a job over `net`, running its tasks on `rt` (CPU and GPU workers).
    /// A message may take `TASKWATT_MPI_TIMEOUT` seconds (default 300) before the job is
    /// ended with an error naming the peer.
    pub fn new(rt: Runtime, net: Box<dyn Transport>) -> Result<DistRuntime, DistError> {
        Self::with_timeout(rt, net, crate::comm::timeout_s())
    }

    /// [`DistRuntime::new`] with the messages' time limit, s.
    pub fn with_timeout(
        rt: Runtime,
        net: Box<dyn Transport>,
        timeout_s: u64,
    ) -> Result<DistRuntime, DistError> {
        Self::start(rt, net, timeout_s, None)
    }

    /// [`DistRuntime::new`] that also sends each message to `trace` as it completes (in
    /// partial Comms chunks, every 25 ms or 256 messages while messages flow, and whenever
    /// the communication thread goes idle), so that the trace of a rank killed mid-run
    /// keeps its messages for `taskwatt merge --recover`.
    pub fn with_trace(
        rt: Runtime,
        net: Box<dyn Transport>,
        trace: TraceSink,
    ) -> Result<DistRuntime, DistError> {
        Self::start(rt, net, crate::comm::timeout_s(), Some(trace))
    }

    fn start(
        rt: Runtime,
        net: Box<dyn Transport>,
        timeout_s: u64,
        trace: Option<TraceSink>,
    ) -> Result<DistRuntime, DistError> {
        let (rank, size) = (net.rank(), net.size());
        let stats = rt.stats_probe();
        let waits = crate::comm::AppWaits::default();
        let busy = waits.busy(move || stats().awake_workers > 0);
        let failure = rt.failure_probe();
        let failed_task: crate::comm::FailedTask =
            Box::new(move || failure().map(|f| f.to_string()));
        Ok(DistRuntime {
            rt: Some(rt),
            rank,
            size,
            comm: CommThread::start(net, timeout_s.max(1), trace, busy, failed_task)?,
            handles: Vec::new(),
            stats: DistStats::default(),
            temps: Vec::new(),
            recv_seq: std::collections::HashMap::new(),
            submitted: 0,
            cache_limit: None,
            memory: crate::memory::Memory::default(),
            waits,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The local runtime.
    pub fn runtime(&self) -> &Runtime {
        self.rt.as_ref().expect("the runtime lives until shutdown")
    }

    /// Registers a datum owned by `owner`. Every rank registers every datum, in the same
    /// order, with a value of its size: the owner's holds the data, the others' receive
    /// copies.
    pub fn register<T: DeviceData>(
        &mut self,
        owner: usize,
        value: T,
    ) -> Result<DistHandle<T>, DistError> {
        if owner >= self.size {
            return Err(DistError::BadRank {
                given: owner,
                size: self.size,
                what: "a handle's owner",
            });
        }
        let id = self.handles.len() as u32;
        let mut valid = vec![false; self.size];
        valid[owner] = true;
        // Its size is its bytes, what a message of it carries (allocated or not yet: a
        // copy made with no storage, `Tile::unallocated`, gets it from its first message).
        let bytes = value.device_len() as u64;
        let local = self.runtime().register_device_bytes(value, bytes);
        self.memory.holds.push(false);
        self.handles.push(Meta {
            owner,
            valid,
            contributors: vec![false; self.size],
            bytes,
            last_use: vec![0; self.size],
            evict: (owner != self.rank).then(|| evictor(&local)),
            partitioned: false,
            kept_evict: None,
        });
        Ok(DistHandle {
            id,
            owner,
            local,
            red: None,
        })
    }

    pub(crate) fn check(&self) -> Result<(), DistError> {
        match self.comm.failed.lock().ok().and_then(|mut f| f.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub(crate) fn post(
        &mut self,
        send: bool,
        peer: usize,
        h: &dyn DistAccess,
    ) -> Result<(), DistError> {
        let c = if send {
            &mut self.stats.sent
        } else {
            &mut self.stats.received
        };
        c.0 += 1;
        c.1 += h.dist_bytes();
        // A receive into this rank's copy (not the owner taking its data back) fills it.
        if !send && h.dist_owner() != self.rank {
            self.memory.fill(h.dist_id() as usize, h.dist_bytes());
        }
        let access = h
            .defer(self.runtime(), !send)
            .map_err(|source| DistError::Runtime {
                rank: self.rank,
                source,
            })?;
        // The communication thread releases it, not this one.
        access.hand_off();
        let seq = if send {
            0
        } else {
            let n = self.recv_seq.entry((peer, h.dist_id())).or_insert(0);
            *n += 1;
            *n - 1
        };
        self.command(Cmd::Post(Op {
            send,
            peer,
            handle: h.dist_id(),
            access,
            seq,
        }))
    }

    /// Hands `cmd` to the communication thread.
    /// A thread that stopped on a failure answers with that failure, not with its absence.
    pub(crate) fn command(&self, cmd: Cmd) -> Result<(), DistError> {
        self.comm.tx.send(cmd).map_err(|_| {
            self.check().err().unwrap_or(DistError::CommThread {
                rank: self.rank,
                message: "it is gone".into(),
            })
        })
    }

    /// Hands the communication thread a command that answers on the channel it is given.
    pub(crate) fn ask<T>(
        &self,
        cmd: impl FnOnce(crossbeam_channel::Sender<Result<T, String>>) -> Cmd,
    ) -> Result<crossbeam_channel::Receiver<Result<T, String>>, DistError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.command(cmd(tx))?;
        Ok(rx)
    }

    /// The answer to [`DistRuntime::ask`].
    pub(crate) fn answer<T>(
        &self,
        rx: &crossbeam_channel::Receiver<Result<T, String>>,
    ) -> Result<T, DistError> {
        let _waiting = self.waits.enter();
        match rx.recv() {
            Ok(r) => r.map_err(|message| DistError::CommThread {
                rank: self.rank,
                message,
            }),
            Err(_) => Err(self.check().err().unwrap_or(DistError::CommThread {
                rank: self.rank,
                message: "the communication thread is gone".into(),
            })),
        }
    }

    /// Submits a task: every rank calls this for every task, in the same order.
    pub fn submit(&mut self, task: DistTask<'_>) -> Result<(), DistError> {
        self.check()?;
        let writes = |m: Access| !matches!(m, Access::R);
        // A contribution reads nothing of the value (its copy starts from the neutral element).
        let reads = |m: Access| !matches!(m, Access::W | Access::Redux);
        let exec = match task.rank {
            Some(r) if r >= self.size => {
                return Err(DistError::BadRank {
                    given: r,
                    size: self.size,
                    what: "a task's rank",
                })
            }
            Some(r) => r,
            // A contribution to a reduction does not choose the rank: the task runs where
            // what it writes, else what it reads, lives.
            None => task
                .accesses
                .iter()
                .find(|(_, m)| writes(*m) && !matches!(m, Access::Redux))
                .or(task
                    .accesses
                    .iter()
                    .find(|(_, m)| !matches!(m, Access::Redux)))
                .or(task.accesses.first())
                .map_or(0, |(h, _)| h.dist_owner()),
        };
        for (h, _) in &task.accesses {
            self.not_partitioned(h.dist_id(), "accessed by a task")?;
        }
        // Any other access ends a reduction's phase first: the contributions go home.
        for (h, m) in &task.accesses {
            if !matches!(m, Access::Redux) {
                self.end_redux(*h)?;
            }
        }
        // A contribution from a rank that is not the owner: its copy becomes an
        // accumulator, reset to the neutral element when it starts.
        for (h, m) in &task.accesses {
            if matches!(m, Access::Redux) {
                self.start_redux(*h, exec, task.codelet.name())?;
            }
        }
        let me = self.rank;
        if exec == me {
            self.hold_back_for(&task.accesses)?;
        }
        self.submitted += 1;
        let mut copied = false;
        for (h, m) in &task.accesses {
            if !reads(*m) {
                continue;
            }
            let id = h.dist_id() as usize;
            self.handles[id].last_use[exec] = self.submitted;
            let owner = self.handles[id].owner;
            if owner == exec || self.handles[id].valid[exec] {
                if exec == me && owner != me {
                    self.stats.cache_hits += 1;
                }
                continue;
            }
            // `exec` needs a copy: every rank records it; the two concerned post.
            self.handles[id].valid[exec] = true;
            copied = true;
            if exec == me {
                self.post(false, owner, *h)?;
            } else if owner == me {
                self.post(true, exec, *h)?;
            }
        }
        if copied && self.cache_limit.is_some() {
            let keep: Vec<u32> = task.accesses.iter().map(|(h, _)| h.dist_id()).collect();
            self.evict_for(exec, &keep)?;
        }
        // What it writes of another rank's data is sent home after it (StarPU-MPI runs
        // such a task and sends the data back to its owner): both copies are then valid.
        let homes: Vec<&dyn DistAccess> = task
            .accesses
            .iter()
            .filter(|(h, m)| writes(*m) && !matches!(m, Access::Redux) && h.dist_owner() != exec)
            .map(|(h, _)| *h)
            .collect();
        for (h, m) in &task.accesses {
            if writes(*m) && !matches!(m, Access::Redux) {
                let meta = &mut self.handles[h.dist_id() as usize];
                let home = meta.owner != exec;
                for (r, v) in meta.valid.iter_mut().enumerate() {
                    *v = r == meta.owner || (home && r == exec);
                }
            }
        }
        if exec != me {
            self.stats.skipped += 1;
            // The owner of what the task writes here takes it back.
            for h in homes.iter().filter(|h| h.dist_owner() == me) {
                self.post(false, exec, *h)?;
            }
            return Ok(());
        }
        for (h, m) in &task.accesses {
            // A copy the task writes without reading gets its storage first.
            if matches!(m, Access::W) && h.dist_owner() != me {
                let access = h
                    .defer(self.runtime(), true)
                    .map_err(|source| DistError::Runtime { rank: me, source })?;
                access.hand_off();
                self.memory.fill(h.dist_id() as usize, h.dist_bytes());
                self.command(Cmd::Apply(access, h.materializer(), None))?;
            }
        }
        let mut t = Task::new(task.codelet);
        for (h, m) in &task.accesses {
            t = h.add_to(t, *m);
        }
        for e in task.extra {
            t = e(t);
        }
        self.runtime()
            .submit(t)
            .map_err(|source| DistError::Runtime { rank: me, source })?;
        self.stats.tasks += 1;
        for h in homes {
            self.post(true, h.dist_owner(), h)?;
        }
        Ok(())
    }

    /// Brings the owner's value of `h` to rank `to` (into its copy), as a task reading it
    /// there would; a no-op where it is valid already.
    pub fn fetch_to<T: DeviceData>(
        &mut self,
        h: &DistHandle<T>,
        to: usize,
    ) -> Result<(), DistError> {
        if to >= self.size {
            return Err(DistError::BadRank {
                given: to,
                size: self.size,
                what: "fetch_to's destination",
            });
        }
        self.not_partitioned(h.id, "fetched")?;
        self.end_redux(h)?;
        let id = h.id as usize;
        if h.owner == to || self.handles[id].valid[to] {
            return Ok(());
        }
        self.handles[id].valid[to] = true;
        self.handles[id].last_use[to] = self.submitted;
        if to == self.rank {
            self.post(false, h.owner, h)?;
        } else if h.owner == self.rank {
            self.post(true, to, h)?;
        }
        self.evict_for(to, &[h.id])
    }

    /// Makes `to` the owner of `h` from this point of the flow on (StarPU-MPI's
    /// `starpu_mpi_data_migrate`): every rank calls it at the same point. The value moves
    /// there if `to`'s copy is not valid (a message once its last writer is done); tasks
    /// that write `h` then run on `to`. The old owner keeps a valid copy until the next
    /// write.
    pub fn migrate<T: DeviceData>(
        &mut self,
        h: &mut DistHandle<T>,
        to: usize,
    ) -> Result<(), DistError> {
        self.fetch_to(h, to)?;
        let from = h.owner;
        let meta = &mut self.handles[h.id as usize];
        meta.owner = to;
        h.owner = to;
        // The old owner's copy is now a cached one, and the new owner's the value.
        let bytes = meta.bytes;
        if self.rank == from {
            meta.evict = Some(evictor(&h.local));
            self.memory.fill(h.id as usize, bytes);
        } else if self.rank == to {
            meta.evict = None;
            if let Some(freed) = self.memory.free(h.id as usize, bytes) {
                freed();
            }
        }
        Ok(())
    }

    /// Waits for this rank's tasks and messages.
    pub fn wait_all(&mut self) -> Result<(), DistError> {
        let rx = self.ask(Cmd::Flush)?;
        // The tasks first (some wait for messages), then the messages (some wait for tasks
        // of their own rank, all submitted by now).
        let waiting = self.waits.enter();
        let tasks = self.runtime().wait_all();
        drop(waiting);
        let comms = self.answer(&rx);
        // The reductions' folds have run: their contributions' buffers can go.
        self.temps.clear();
        self.check()?;
        tasks.map_err(|source| DistError::Runtime {
            rank: self.rank,
            source,
        })?;
        comms
    }

    /// Takes a handle's value back (every rank: its own copy).
    pub fn unregister<T: DeviceData>(&mut self, h: DistHandle<T>) -> Result<T, DistError> {
        self.not_partitioned(h.id, "unregistered")?;
        self.end_redux(&h)?;
        self.handles[h.id as usize].evict = None;
        // The value leaves the runtime, storage and all.
        if let Some(freed) = self
            .memory
            .free(h.id as usize, self.handles[h.id as usize].bytes)
        {
            freed();
        }
        let _waiting = self.waits.enter();
        let value = self
            .runtime()
            .unregister(h.local)
            .map_err(|source| DistError::Runtime {
                rank: self.rank,
                source,
            })?;
        // A value the job's end left short (a message that never came, a reduction's
        // contribution missing) is not handed out as if right.
        self.check()?;
        Ok(value)
    }

    /// Counts so far.
    pub fn stats(&self) -> &DistStats {
        &self.stats
    }
}
