//! Collectives and point-to-point transfers on handles (StarPU-MPI's
//! `starpu_mpi_isend/irecv_detached`, `starpu_mpi_scatter_detached`,
//! `starpu_mpi_gather_detached`, a broadcast, `starpu_mpi_barrier`).
//!
//! As every operation of [`DistRuntime`], each is called by every rank at the same point of
//! the flow, so that every rank keeps the same record of which copies are valid; only the
//! ranks concerned post messages. The messages are the flow's own (deferred acquisitions of
//! the local copies, numbered per peer and tag), so they wait for the tasks submitted
//! before and the tasks submitted after wait for them: none of these calls blocks, but
//! [`DistRuntime::barrier`].
//!
//! | call | moves | then valid |
//! |---|---|---|
//! | [`transfer`](DistRuntime::transfer)`(h, from, to)` | `from`'s copy into `to`'s | `to`'s as `from`'s; if `to` owns `h`, only `to`'s and `from`'s |
//! | [`broadcast`](DistRuntime::broadcast)`(h)` | the owner's value to every rank | every copy |
//! | [`gather`](DistRuntime::gather)`(hs, root)` | each owner's value to `root` | `root`'s copies |
//! | [`scatter`](DistRuntime::scatter)`(hs, root)` | `root`'s copy of each to its owner | the owners' and `root`'s |
//! | [`barrier`](DistRuntime::barrier) | nothing: this rank's tasks and messages done, then every rank's | |
//!
//! The clock rendezvous ([`DistRuntime::clock_sample`]) and the node names
//! ([`DistRuntime::node_names`]) are rendezvous of every rank too.

use taskwatt_runtime::DeviceData;

use crate::comm::Cmd;
use crate::dist::{DistAccess, DistHandle, DistRuntime};
use crate::DistError;

impl DistRuntime {
    /// A clock offset against rank 0 (ns) and the round trip it came from; a rendezvous of
    /// every rank.
    pub fn clock_offset(&mut self) -> Result<(i64, u64), DistError> {
        let rx = self.ask(Cmd::Clock)?;
        self.answer(&rx)
    }

    /// [`DistRuntime::clock_offset`] with the time it holds at (this rank's clock): the
    /// rendezvous's, read when it returns, not before it. A time read before the call is
    /// off by however long rank 0 took to arrive (a rank 0 checking its result for seconds
    /// gave its peers end estimates seconds early, and merges that failed on receives before
    /// their sends). What a rank's trace keeps, at its start and its end, for `merge`.
    pub fn clock_sample(&mut self) -> Result<taskwatt_traces::ClockSample, DistError> {
        let (offset_ns, rtt_ns) = self.clock_offset()?;
        Ok(taskwatt_traces::ClockSample {
            at: taskwatt_traces::Clock::now(),
            offset_ns,
            rtt_ns,
        })
    }

    /// Every rank's node name, indexed by rank; a rendezvous of every rank. The ranks of a
    /// node share its energy domains (the first of them samples, or the merge simulates
    /// them).
    pub fn node_names(&mut self) -> Result<Vec<String>, DistError> {
        let rx = self.ask(Cmd::Names)?;
        self.answer(&rx)
    }

    /// Sends rank `from`'s copy of `h` to rank `to`, into its copy (StarPU-MPI's
    /// `starpu_mpi_isend_detached` on `from` paired with `starpu_mpi_irecv_detached` on
    /// `to`; here every rank calls it, at the same point of the flow).
    ///
    /// The send waits for the tasks submitted before that access `from`'s copy, and the
    /// tasks submitted after that access `to`'s copy wait for the receive. `to`'s copy is
    /// then as valid as `from`'s was; when `to` owns `h`, the message replaces the value
    /// (every other copy but `from`'s becomes stale), which is how data prepared on one
    /// rank reaches its owners ([`DistRuntime::scatter`]). A copy registered without
    /// storage (`Tile::unallocated`) gets it from the message, and cannot be the source.
    pub fn transfer<T: DeviceData>(
        &mut self,
        h: &DistHandle<T>,
        from: usize,
        to: usize,
    ) -> Result<(), DistError> {
        self.transfer_dyn(h, from, to)
    }

    fn transfer_dyn(
        &mut self,
        h: &dyn DistAccess,
        from: usize,
        to: usize,
    ) -> Result<(), DistError> {
        for (r, what) in [(from, "transfer's source"), (to, "transfer's destination")] {
            if r >= self.size {
                return Err(DistError::BadRank {
                    given: r,
                    size: self.size,
                    what,
                });
            }
        }
        self.end_redux(h)?;
        if from == to {
            return Ok(());
        }
        let meta = &mut self.handles[h.dist_id() as usize];
        let from_valid = meta.owner == from || meta.valid[from];
        if meta.owner == to {
            for (r, v) in meta.valid.iter_mut().enumerate() {
                *v = r == to || r == from;
            }
        } else {
            meta.valid[to] = from_valid;
            meta.last_use[to] = self.submitted;
        }
        let me = self.rank;
        if me == from {
            self.post(true, to, h)?;
        } else if me == to {
            self.post(false, from, h)?;
        }
        self.evict_for(to, &[h.dist_id()])
    }

    /// Brings the owner's value of `h` to every rank (each copy then valid until the next
    /// write): a read by every rank in one call.
    pub fn broadcast<T: DeviceData>(&mut self, h: &DistHandle<T>) -> Result<(), DistError> {
        for r in 0..self.size {
            self.fetch_to(h, r)?;
        }
        Ok(())
    }

    /// Brings each handle's value to `root`, into its copies (StarPU-MPI's
    /// `starpu_mpi_gather_detached`): `root`'s tasks that read them, or its `unregister`,
    /// then see the owners' values. Under a cache limit
    /// ([`DistRuntime::set_cache_limit`]) the gathered copies are kept whole: older copies
    /// are evicted first, and the gathered ones only by later copies.
    pub fn gather<T: DeviceData>(
        &mut self,
        hs: &[DistHandle<T>],
        root: usize,
    ) -> Result<(), DistError> {
        let limit = self.cache_limit.take();
        let fetched = hs.iter().try_for_each(|h| self.fetch_to(h, root));
        self.cache_limit = limit;
        fetched?;
        let keep: Vec<u32> = hs.iter().map(DistHandle::id).collect();
        self.evict_for(root, &keep)
    }

    /// Sends `root`'s copy of each handle to its owner, where it replaces the value
    /// (StarPU-MPI's `starpu_mpi_scatter_detached`): the data a rank prepared, or read
    /// from a file, for every rank. `root` must have registered each handle with storage
    /// (the value to send); the others' copies are stale after it.
    pub fn scatter<T: DeviceData>(
        &mut self,
        hs: &[DistHandle<T>],
        root: usize,
    ) -> Result<(), DistError> {
        for h in hs {
            self.transfer(h, root, h.owner)?;
        }
        Ok(())
    }

    /// Waits for this rank's tasks and messages ([`DistRuntime::wait_all`]), then for every
    /// rank to get there (StarPU-MPI's `starpu_mpi_barrier`).
    pub fn barrier(&mut self) -> Result<(), DistError> {
        self.wait_all()?;
        let rx = self.ask(Cmd::Barrier)?;
        self.answer(&rx)
    }
}
