//! Getting data back from the runtime: acquisition and unregistration.
//!
//! An acquisition is a node in the handle's dependency chain, exactly like a task (as in
//! StarPU's `starpu_data_acquire`): a read acquisition waits for the last writer, a write
//! acquisition for the readers and writers before it, and tasks submitted on the handle
//! while the guard lives wait for it to drop. It does not run on a worker: when it becomes
//! ready it is granted to the waiting thread, and dropping the guard finishes it.
//!
//! A failed predecessor does not cancel an acquisition: the caller gets the data as it is
//! (the failure is reported by `wait_all`), and tasks after the guard run normally.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use taskwatt_traces::Clock;

use crate::codelet::{Codelet, CodeletInner};
use crate::deadlock;
use crate::error::RuntimeError;
use crate::handle::{Access, Handle, HandleCore};
use crate::runtime::Runtime;
use crate::submit::link;
use crate::task::{Kind, Preds, TaskNode, DONE_OK};

fn acquire_codelet() -> Arc<CodeletInner> {
    static CL: OnceLock<Codelet> = OnceLock::new();
    CL.get_or_init(|| Codelet::new("<acquire>")).inner.clone()
}

/// Shared access to a handle's data, outside any task.
pub struct ReadGuard<'rt, T: 'static> {
    rt: &'rt Runtime,
    node: Arc<TaskNode>,
    core: Arc<HandleCore>,
    _t: PhantomData<&'rt T>,
}

/// Exclusive access to a handle's data, outside any task.
pub struct WriteGuard<'rt, T: 'static> {
    rt: &'rt Runtime,
    node: Arc<TaskNode>,
    pub(crate) core: Arc<HandleCore>,
    _t: PhantomData<&'rt mut T>,
}

impl Runtime {
    fn acquire_node(
        &self,
        operation: &'static str,
        core: &Arc<HandleCore>,
        mode: Access,
    ) -> Result<Arc<TaskNode>, RuntimeError> {
        let sh = &*self.shared;
        self.check_acquirable(operation, core)?;
        // What the acquisition will wait for, collected only when this thread holds a
        // guard that it could wait for in turn.
        let preds: Vec<Arc<TaskNode>> = if deadlock::holds_guard(sh.epoch) {
            crate::modes::waited_for(core, mode)
        } else {
            Vec::new()
        };
        deadlock::check_acquire(operation, sh.epoch, &preds)?;
        let node = self.link_acquire(core, mode, true);
        self.wait_helping(crate::helper::Check::EachTask, &|| {
            node.granted.load(Ordering::SeqCst)
        });
        if sh.devices {
            // The data back in main memory (the acquirer's and unregistering thread's).
            // SAFETY: the acquisition is granted, with the rights of `mode`.
            if let Err(message) = unsafe {
                sh.make_valid(
                    0,
                    std::iter::once((core, mode)),
                    crate::copies::CopyFor::APP,
                )
            } {
                // Nothing is handed out: the acquisition ends here, and the data stays
                // where it is valid.
                self.finish_acquire(&node);
                return Err(RuntimeError::Transfer {
                    handle: core.id,
                    message,
                });
            }
        }
        Ok(node)
    }

    /// Refuses an acquisition of a handle of another runtime, unregistered, partitioned,
    /// or after an interruption; folds a pending REDUX group into the data.
    fn check_acquirable(
        &self,
        operation: &'static str,
        core: &Arc<HandleCore>,
    ) -> Result<(), RuntimeError> {
        let sh = &*self.shared;
        if !core.belongs_to(&sh.nodes) {
            return Err(RuntimeError::ForeignHandle {
                operation: operation.into(),
                handle: core.id,
            });
        }
        if core.unregistered.load(Ordering::Acquire) {
            return Err(RuntimeError::Unregistered {
                codelet: "<acquire>".into(),
                handle: core.id,
            });
        }
        if sh.interrupted.load(Ordering::SeqCst) {
            return Err(sh.interrupted_error());
        }
        if let Some(ext) = core.ext() {
            if ext.partitioned.load(Ordering::Acquire) {
                return Err(RuntimeError::Partitioned {
                    operation: operation.into(),
                    handle: core.id,
                });
            }
            // The data includes the contributions of a pending REDUX group.
            self.reduce_pending(core)?;
        }
        Ok(())
    }

    /// A new acquisition node of `core`, linked into its chain with `mode` (granted at once
    /// when nothing is before it); `waiter`: a thread will wait for its grant.
    fn link_acquire(&self, core: &Arc<HandleCore>, mode: Access, waiter: bool) -> Arc<TaskNode> {
        let node = Arc::new(TaskNode::new(
            u64::MAX,
            Kind::Acquire,
            acquire_codelet(),
            u32::MAX,
            0,
            core.bytes,
            Clock::now(),
            None,
        ));
        // An acquisition has no trace record: its predecessor ids are not kept.
        let waits = link(core, mode, &node, &mut Preds::new());
        if waiter {
            node.has_waiter.store(true, Ordering::SeqCst);
        }
        self.release_guard(&node, waits);
        self.shared.flush_staged();
        node
    }

    /// Waits for the pending writers of `handle`, then gives shared access to its data.
    /// Tasks that write the handle and are submitted while the guard lives wait for it.
    pub fn acquire<T: Send + Sync + 'static>(
        &self,
        handle: &Handle<T>,
    ) -> Result<ReadGuard<'_, T>, RuntimeError> {
        let node = self.acquire_node("acquire", &handle.core, Access::R)?;
        deadlock::hold(self.shared.epoch, &handle.core, &node);
        Ok(ReadGuard {
            rt: self,
            node,
            core: Arc::clone(&handle.core),
            _t: PhantomData,
        })
    }

    /// Waits for every pending reader and writer of `handle`, then gives exclusive access.
    pub fn acquire_mut<T: Send + Sync + 'static>(
        &self,
        handle: &Handle<T>,
    ) -> Result<WriteGuard<'_, T>, RuntimeError> {
        let node = self.acquire_node("acquire_mut", &handle.core, Access::RW)?;
        deadlock::hold(self.shared.epoch, &handle.core, &node);
        Ok(WriteGuard {
            rt: self,
            node,
            core: Arc::clone(&handle.core),
            _t: PhantomData,
        })
    }

    /// Waits for every pending access to `handle` and takes its data back. Later
    /// submissions on any clone of the handle are an error.
    pub fn unregister<T: Send + Sync + 'static>(
        &self,
        handle: Handle<T>,
    ) -> Result<T, RuntimeError> {
        if handle
            .core
            .ext()
            .is_some_and(|e| e.part.load(Ordering::Acquire))
        {
            return Err(RuntimeError::PartUnregistered {
                handle: handle.core.id,
            });
        }
        let node = self.acquire_node("unregister", &handle.core, Access::RW)?;
        handle.core.unregistered.store(true, Ordering::Release);
        // The device copies go first: one may hold the value's memory pinned. (They are
        // invalid: the acquisition made main memory the owner.) Under the transfer lock: a
        // device's memory account may be evicting one of them now (device/memory.rs).
        if let Some(ext) = handle.core.ext() {
            let _g = ext.transfer.lock();
            for r in &ext.replicas {
                // SAFETY: as below, and the transfer lock keeps evictions out; no task
                // reads a replica of an unregistered handle.
                unsafe { *r.get() = None };
            }
        }
        // SAFETY: the write acquisition is granted: no task accesses the data until `node`
        // finishes below, and this thread holds no other reference to it.
        let value = unsafe { handle.core.data_mut() }.take::<T>();
        self.finish_acquire(&node);
        // A `Handle<T>` holds a `T` until it is unregistered.
        value.ok_or(RuntimeError::Unregistered {
            codelet: "<unregister>".into(),
            handle: handle.core.id,
        })
    }

    fn finish_acquire(&self, node: &TaskNode) {
        let pushed = self.shared.complete(node, DONE_OK, None, self.shared.now());
        self.shared.sleep.notify(pushed);
    }
}

/// An acquisition linked into the handle's dependency chain now, in submission order, and
/// granted later, without any thread waiting for it: what a communication thread needs
/// (taskwatt-mpi posts a send when the data it sends is ready, and a receive when the
/// buffer it receives into is free, without blocking a worker or the submitting thread).
///
/// Poll [`DeferredAccess::is_granted`]; once granted, the data's bytes are the holder's
/// (shared for a read, exclusive for a write) until [`DeferredAccess::release`], which
/// lets the tasks submitted after it run. Dropping it releases it. On a runtime with GPU
/// workers the data may be valid on a device only: [`DeferredAccess::to_host`] brings it to
/// main memory, and the bytes and the value are handed out only after it.
pub struct DeferredAccess {
    shared: Arc<crate::shared::Shared>,
    node: Arc<TaskNode>,
    core: Arc<HandleCore>,
    write: bool,
    bytes: unsafe fn(&HandleCore, bool) -> (*mut u8, usize),
    released: bool,
    /// Whether main memory holds the data for this acquisition (always, without GPUs).
    on_host: bool,
}

impl std::fmt::Debug for DeferredAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredAccess")
            .field("handle", &self.core.id)
            .field("write", &self.write)
            .field("granted", &self.is_granted())
            .finish()
    }
}

/// The bytes of the `T` a handle holds: through a shared reference for a read (tasks may
/// read the value meanwhile), an exclusive one for a write.
///
/// # Safety
/// The caller holds a granted acquisition of the handle, a write one when `write`.
unsafe fn bytes_of_handle<T: crate::device::DeviceData>(
    core: &HandleCore,
    write: bool,
) -> (*mut u8, usize) {
    const HOLDS: &str = "a registered Handle<T> holds a T until unregistered";
    if write {
        // SAFETY: a granted write acquisition: no task accesses the data meanwhile.
        let v = unsafe { core.data_mut() }.get_mut::<T>().expect(HOLDS);
        let b = v.device_bytes_mut();
        (b.as_mut_ptr(), b.len())
    } else {
        // SAFETY: a granted read acquisition: only readers meanwhile.
        let b = unsafe { core.data_ref() }
            .get::<T>()
            .expect(HOLDS)
            .device_bytes();
        (b.as_ptr().cast_mut(), b.len())
    }
}

impl Runtime {
    /// Links an acquisition of `handle` (a write one when `write`) into its dependency
    /// chain, as a task submitted now would be, and returns at once; see
    /// [`DeferredAccess`]. On a runtime with GPU workers, the holder brings the data to
    /// main memory once granted ([`DeferredAccess::to_host`]).
    pub fn acquire_deferred<T: crate::device::DeviceData>(
        &self,
        handle: &Handle<T>,
        write: bool,
    ) -> Result<DeferredAccess, RuntimeError> {
        let sh = &*self.shared;
        let core = &handle.core;
        self.check_acquirable("acquire_deferred", core)?;
        let mode = if write { Access::RW } else { Access::R };
        let node = self.link_acquire(core, mode, false);
        // Held by this thread until handed off (`DeferredAccess::hand_off`) or released:
        // its waits that could only end after the release are refused as deadlocks.
        deadlock::hold(sh.epoch, core, &node);
        Ok(DeferredAccess {
            shared: Arc::clone(&self.shared),
            node,
            core: Arc::clone(core),
            write,
            bytes: bytes_of_handle::<T>,
            released: false,
            on_host: !sh.devices,
        })
    }
}

impl DeferredAccess {
    /// Whether every access before it has finished: the bytes are now the holder's.
    pub fn is_granted(&self) -> bool {
        self.node.granted.load(Ordering::SeqCst)
    }

    /// Whether it is a write acquisition.
    pub fn is_write(&self) -> bool {
        self.write
    }

    /// The value, for a granted write acquisition of a handle of `T`: `None` before the
    /// grant, for a read acquisition, or for another type. It is the holder's alone until
    /// [`DeferredAccess::release`] (taskwatt-mpi frees a cached copy's storage this way).
    pub fn value_mut<T: 'static>(&mut self) -> Option<&mut T> {
        if !self.is_granted() || !self.write || !self.on_host {
            return None;
        }
        // SAFETY: a granted write acquisition: no task accesses the data meanwhile, and
        // the borrow of `self` makes this the only reference made through it.
        unsafe { self.core.data_mut() }.get_mut::<T>()
    }

    /// Once granted, on a runtime with GPU workers, makes main memory's copy valid for this
    /// acquisition: a read copies the data back from the device that last wrote it (the
    /// device keeps its copy); a write does the same and makes main memory's copy the only
    /// valid one (the tasks after it take it to a device again).
    /// Returns whether the bytes may now be taken: `false` before the grant, `true` at once
    /// without GPUs. The copy runs on the calling thread.
    pub fn to_host(&mut self) -> Result<bool, RuntimeError> {
        if self.on_host {
            return Ok(self.is_granted());
        }
        if !self.is_granted() {
            return Ok(false);
        }
        let mode = if self.write { Access::W } else { Access::R };
        // SAFETY: granted, with the rights of `mode`.
        unsafe {
            self.shared
                .make_valid(
                    0,
                    std::iter::once((&self.core, mode)),
                    crate::copies::CopyFor::APP,
                )
                .map(|_| ())
        }
        .map_err(|message| RuntimeError::Transfer {
            handle: self.core.id,
            message,
        })?;
        self.on_host = true;
        Ok(true)
    }

    /// Says that another thread will release it (taskwatt-mpi hands its acquisitions to
    /// its communication thread). Until then the creating thread holds it, as it holds a
    /// guard: a `wait_all`, `wait`, `acquire` or `unregister` on that thread that could
    /// only end after its release is refused with [`RuntimeError::Deadlock`]. Call it on
    /// the creating thread, before handing the acquisition over.
    pub fn hand_off(&self) {
        deadlock::release(&self.node);
    }

    /// The data's bytes: a pointer and a length, valid until [`DeferredAccess::release`]
    /// (the value is not moved or resized while an acquisition holds it). `None` until
    /// granted. Write through the pointer only if [`DeferredAccess::is_write`].
    pub fn bytes(&self) -> Option<(*mut u8, usize)> {
        if !self.is_granted() || !self.on_host {
            return None;
        }
        // SAFETY: granted, with the rights of its mode.
        Some(unsafe { (self.bytes)(&self.core, self.write) })
    }

    /// Ends the acquisition: the accesses submitted after it may run. Released (or
    /// dropped) before its grant, it returns at once and ends when granted, in its place
    /// in the handle's order: no wait, so no deadlock, whatever the releasing thread holds
    /// or runs (a guard the grant waits for, the task the acquisition waits for).
    pub fn release(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if self.released {
            return;
        }
        self.released = true;
        deadlock::release(&self.node);
        let node = &self.node;
        if !node.granted.load(Ordering::SeqCst) {
            // Hand the completion to the grant; if the grant came meanwhile, whoever
            // takes the flag back completes the node (exactly one does).
            node.abandoned.store(true, Ordering::SeqCst);
            if !node.granted.load(Ordering::SeqCst) || !node.abandoned.swap(false, Ordering::SeqCst)
            {
                return;
            }
        }
        let pushed = self.shared.complete(node, DONE_OK, None, self.shared.now());
        self.shared.sleep.notify(pushed);
    }
}

impl Drop for DeferredAccess {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<T: 'static> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the read acquisition is granted and lives as long as `self`: no writer
        // runs meanwhile.
        let data = unsafe { self.core.data_ref() };
        data.get::<T>()
            .expect("a registered Handle<T> holds a T until unregistered")
    }
}

impl<T: 'static> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the write acquisition is granted: nothing else accesses the data.
        let data = unsafe { self.core.data_ref() };
        data.get::<T>()
            .expect("a registered Handle<T> holds a T until unregistered")
    }
}

impl<T: 'static> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes this the only reference.
        let data = unsafe { self.core.data_mut() };
        data.get_mut::<T>()
            .expect("a registered Handle<T> holds a T until unregistered")
    }
}

impl<T: 'static> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        deadlock::release(&self.node);
        self.rt.finish_acquire(&self.node);
    }
}

impl<T: 'static> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        deadlock::release(&self.node);
        self.rt.finish_acquire(&self.node);
    }
}
