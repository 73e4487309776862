//! Data handles: registered values whose accesses (R, W, RW) order the tasks.
//!
//! # Implicit dependencies (sequential consistency, as StarPU's default)
//!
//! Each handle keeps, under a small lock taken only at submission, the last task that
//! wrote it and the readers submitted since. A new task that
//!
//! - **reads** depends on the last writer (read-after-write), and joins the readers;
//! - **writes** (W or RW) depends on every reader since the last write (write-after-read), or
//!   on the last writer if there was no reader (write-after-write), and becomes the last
//!   writer.
//!
//! So readers of one version run in parallel, and the resulting order is the one a
//! sequential execution in submission order would give. The data itself sits in an
//! `UnsafeCell`: the dependencies are what make access exclusive (a writer runs alone) or
//! shared (readers only), which is the invariant every `unsafe` access below relies on.
//!
//! # Replicas
//!
//! Today all data lives in main memory (memory node 0). The handle already tracks a
//! coherence state per memory node ([`ReplicaState`], an MSI protocol as in StarPU's data
//! management) so that a GPU memory node can hold a copy later: a read on node `n` makes the
//! copy on `n` valid (fetching it from a valid node), a write on `n` invalidates the others.
//! See docs/accelerators.md.

use std::any::Any;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::modes::HandleExt;
use crate::sync::SpinLock;
use smallvec::SmallVec;

use crate::inline::Value;
use crate::pool::NodePool;
use crate::task::TaskNode;

/// How a task accesses a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Access {
    /// Read only.
    R,
    /// Write only (the previous value is not read).
    W,
    /// Read and write.
    RW,
    /// Read and write, in any order among consecutive `Commute` accesses (StarPU's
    /// `STARPU_RW|STARPU_COMMUTE`): such tasks do not depend on one another, only on the
    /// accesses before the group, and never run at the same time (each holds the handle's
    /// commute lock while it runs). What comes after the group waits for all of it.
    Commute,
    /// A contribution to a reduction (StarPU's `STARPU_REDUX`): consecutive `Redux` tasks
    /// run in parallel, each writing into a private copy of its worker, initialised by the
    /// handle's reduction (see [`Runtime::set_reduction`](crate::Runtime::set_reduction));
    /// the copies are combined into the data by a reduction task that the runtime submits
    /// before the next other access (a task, an acquisition or the unregistration).
    Redux,
}

impl Access {
    /// Whether the access writes.
    #[inline]
    pub fn writes(self) -> bool {
        !matches!(self, Access::R)
    }

    /// Whether tasks with this access form a group with the consecutive ones of the same
    /// mode (`Commute`, `Redux`) instead of being ordered one after the other.
    #[inline]
    pub fn groups(self) -> bool {
        matches!(self, Access::Commute | Access::Redux)
    }
}

/// Most memory nodes a handle can have replicas on (node 0 is main memory).
pub const MAX_MEMORY_NODES: usize = 4;

/// Most devices a runtime drives (one memory node each, after main memory).
pub const MAX_DEVICES: usize = MAX_MEMORY_NODES - 1;

/// Coherence state of one replica (MSI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ReplicaState {
    /// No valid copy on this node.
    Invalid = 0,
    /// A valid copy that other nodes may share.
    Shared = 1,
    /// The only valid copy.
    Owner = 2,
}

/// Readers kept before the first pruning of finished ones.
pub(crate) const READERS_PRUNE_MIN: usize = 64;

pub(crate) struct HandleDeps {
    pub(crate) last_writer: Option<Arc<TaskNode>>,
    /// Inline up to 4: most versions have few readers, and a first read then costs no
    /// allocation.
    pub(crate) readers: SmallVec<[Arc<TaskNode>; 4]>,
    /// Length of `readers` at which finished readers are next pruned (doubles, so that
    /// pruning stays amortised O(1) per read even when no reader has finished).
    pub(crate) prune_at: usize,
}

/// Laid out in cache lines by who writes them, so that the tasks working on the value and
/// the thread submitting the next ones do not take each other's lines: the `Arc`'s
/// counts alone in the first line (both sides write them), then the value (tasks), then
/// the dependency state (submission), then what is read on both sides and rarely written.
/// Before, the value shared a line with the dependency state and another with
/// `unregistered`, and the counts one with the lock.
#[repr(C, align(64))]
pub(crate) struct HandleCore {
    /// The value, inline when it is small (see inline.rs); none once unregistered.
    data: UnsafeCell<Value>,
    replicas: [AtomicU8; MAX_MEMORY_NODES],
    pub(crate) deps: LineAligned<SpinLock<HandleDeps>>,
    pub(crate) id: u64,
    pub(crate) bytes: u64,
    pub(crate) type_name: &'static str,
    /// How to copy the value between memory nodes: set by `register_replicated` only (a
    /// handle without it stays on node 0, and its tasks run on CPU workers only).
    pub(crate) copier: Option<&'static Copier>,
    /// Where the nodes this handle still holds go when it is dropped (the runtime's pool).
    pool: Option<Arc<NodePool>>,
    pub(crate) unregistered: AtomicBool,
    /// Group state, reduction and partitioning (modes.rs): made on first use only.
    ext: OnceLock<Box<HandleExt>>,
}

/// A value that starts a cache line (and so ends the fields before it in `HandleCore`).
#[repr(align(64))]
pub(crate) struct LineAligned<T>(T);

impl<T> std::ops::Deref for LineAligned<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for LineAligned<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

// SAFETY: `data` is only touched through `data_ref` and `data_mut`, whose callers hold
// the access rights that the dependency protocol grants (shared for readers, exclusive for
// a writer or the unregistering thread); `T: Send + Sync` is required at registration.
unsafe impl Sync for HandleCore {}

static NEXT_HANDLE: AtomicU64 = AtomicU64::new(0);

/// Handles registered so far, by every runtime of the process (the next id).
pub(crate) fn handles_made() -> u64 {
    NEXT_HANDLE.load(Ordering::Relaxed)
}

impl HandleCore {
    pub(crate) fn new<T: Send + Sync + 'static>(
        value: T,
        bytes: u64,
        pool: Option<Arc<NodePool>>,
    ) -> HandleCore {
        HandleCore {
            id: NEXT_HANDLE.fetch_add(1, Ordering::Relaxed),
            bytes,
            type_name: std::any::type_name::<T>(),
            copier: None,
            deps: LineAligned(SpinLock::new(HandleDeps {
                last_writer: None,
                readers: SmallVec::new(),
                prune_at: READERS_PRUNE_MIN,
            })),
            unregistered: AtomicBool::new(false),
            replicas: [
                AtomicU8::new(ReplicaState::Owner as u8),
                AtomicU8::new(ReplicaState::Invalid as u8),
                AtomicU8::new(ReplicaState::Invalid as u8),
                AtomicU8::new(ReplicaState::Invalid as u8),
            ],
            data: UnsafeCell::new(Value::new(value)),
            pool,
            ext: OnceLock::new(),
        }
    }

    /// The handle's extension, if it had a grouping access, a reduction or a partitioning.
    #[inline]
    pub(crate) fn ext(&self) -> Option<&HandleExt> {
        self.ext.get().map(|b| &**b)
    }

    /// The handle's extension, made if needed.
    pub(crate) fn ext_or_init(&self) -> &HandleExt {
        self.ext.get_or_init(Box::default)
    }

    /// Whether the handle was registered with the runtime whose node pool is `pool`
    /// (a handle made without a pool, in a unit test, belongs anywhere).
    #[inline]
    pub(crate) fn belongs_to(&self, pool: &Arc<NodePool>) -> bool {
        self.pool.as_ref().is_none_or(|p| Arc::ptr_eq(p, pool))
    }

    /// Shared access to the value (none once unregistered).
    ///
    /// # Safety
    /// The caller holds read rights: it is a task with an R access that the dependencies
    /// released, or an acquirer whose acquisition was granted; no writer runs meanwhile.
    pub(crate) unsafe fn data_ref(&self) -> &Value {
        // SAFETY: by the caller's contract no `&mut` to the value exists while this `&` does.
        unsafe { &*self.data.get() }
    }

    /// Exclusive access to the value (none once unregistered; `Value::take` unregisters).
    ///
    /// # Safety
    /// The caller holds write rights (a released W/RW task, a granted write acquisition, or
    /// the unregistering thread) and takes at most one such reference at a time.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn data_mut(&self) -> &mut Value {
        // SAFETY: by the caller's contract this is the only reference to the value.
        unsafe { &mut *self.data.get() }
    }

    /// Replica state on memory node `node`.
    pub(crate) fn replica(&self, node: usize) -> ReplicaState {
        match self.replicas[node].load(Ordering::Acquire) {
            2 => ReplicaState::Owner,
            1 => ReplicaState::Shared,
            _ => ReplicaState::Invalid,
        }
    }

    /// Makes the copy on memory node `node` valid for an access in `access`, copying it
    /// from a valid node (node 0 first) if it is not, and updates the MSI states: a write
    /// makes `node` the owner and every other copy invalid; a read shares. Returns the
    /// source node and the bytes copied, if a copy was made. A copy that fails (a device
    /// out of memory, say) leaves the states as they were and returns why.
    ///
    /// # Safety
    /// The caller holds the access rights for `access` (a released task, a granted
    /// acquisition): no writer of the handle runs meanwhile, and a writer runs alone.
    pub(crate) unsafe fn make_valid(
        &self,
        node: usize,
        access: Access,
        backends: &[Arc<dyn crate::device::Backend>],
    ) -> Result<Option<(usize, u64)>, String> {
        if self.is_valid_for(node, access) {
            return Ok(None);
        }
        let ext = self.ext_or_init();
        // Readers on one node (the CPU workers all compute on node 0) may arrive together:
        // one copies, the others find the copy valid.
        let _g = ext.transfer.lock();
        let mut copied = None;
        if self.replica(node) == ReplicaState::Invalid {
            let from = (0..MAX_MEMORY_NODES).find(|&n| self.replica(n) != ReplicaState::Invalid);
            if let (Some(from), Some(copier)) = (from, self.copier) {
                let backend = |n: usize| {
                    backends
                        .get(n - 1)
                        .map(|b| &**b)
                        .ok_or_else(|| format!("memory node {n} has no device"))
                };
                // SAFETY: the source is valid and no writer runs (the caller's rights);
                // the destination is this node's, which only this thread writes now (the
                // transfer lock), and no task reads it while it is invalid.
                unsafe {
                    let replicas = &ext.replicas;
                    match (from, node) {
                        (0, n) => backend(n)?.copy_in(
                            copier,
                            &*self.data.get(),
                            &mut *replicas[n - 1].get(),
                        )?,
                        (f, 0) => {
                            let src = (*replicas[f - 1].get())
                                .as_deref()
                                .expect("a valid replica exists");
                            backend(f)?.copy_out(copier, src, &mut *self.data.get())?;
                        }
                        (f, n) => {
                            let src = (*replicas[f - 1].get())
                                .as_deref()
                                .expect("a valid replica exists");
                            backend(n)?.copy_from(
                                copier,
                                backend(f)?,
                                src,
                                &mut *replicas[n - 1].get(),
                            )?;
                        }
                    }
                }
                copied = Some((from, self.bytes));
            }
        }
        self.note_access(node, access);
        Ok(copied)
    }

    /// Whether a node other than `node` holds a valid copy (so that dropping `node`'s
    /// loses nothing). Read without the transfer lock: a hint for choosing what to evict,
    /// checked again by [`HandleCore::evict`] under the lock.
    pub(crate) fn valid_elsewhere(&self, node: usize) -> bool {
        (0..MAX_MEMORY_NODES).any(|n| n != node && self.replica(n) != ReplicaState::Invalid)
    }

    /// Drops the copy on device node `node` to free its memory, writing it back to main
    /// memory first when it is the only valid one. `Busy` when the handle is being copied
    /// by another thread now (its transfer lock is busy: never waited for), `Absent` when
    /// it has no copy there. A write-back that fails leaves
    /// everything as it was and says why.
    ///
    /// The caller makes sure that no task uses the copy on `node` (the device's memory
    /// account pins a running task's data). Every other change of the states is made
    /// under the transfer lock, so they hold still meanwhile.
    pub(crate) fn evict(
        &self,
        node: usize,
        backends: &[Arc<dyn crate::device::Backend>],
    ) -> Result<crate::device::Evicted, String> {
        use crate::device::Evicted;
        let Some(ext) = self.ext() else {
            return Ok(Evicted::Absent);
        };
        let Some(_g) = ext.transfer.try_lock() else {
            return Ok(Evicted::Busy);
        };
        // SAFETY: the transfer lock is held, and no task uses node `node`'s copy (the
        // caller's contract): nobody else touches the slot.
        let slot = unsafe { &mut *ext.replicas[node - 1].get() };
        let Some(src) = slot.as_deref() else {
            return Ok(Evicted::Absent);
        };
        let valid = self.replica(node) != ReplicaState::Invalid;
        let only = valid && !self.valid_elsewhere(node);
        if only {
            let copier = self.copier.ok_or("a copy on a device without a copier")?;
            let backend = backends
                .get(node - 1)
                .ok_or_else(|| format!("memory node {node} has no device"))?;
            // SAFETY: node 0 is invalid (this is the only valid copy), so nobody reads
            // main memory's value without first taking the transfer lock, held here.
            backend.copy_out(copier, src, unsafe { &mut *self.data.get() })?;
            self.replicas[0].store(ReplicaState::Owner as u8, Ordering::Release);
        }
        self.replicas[node].store(ReplicaState::Invalid as u8, Ordering::Release);
        *slot = None;
        Ok(Evicted::Dropped(only))
    }

    /// Whether an access in `access` on `node` needs no copy and changes no state: the
    /// node owns the data, or shares it and the access only reads.
    #[inline]
    pub(crate) fn is_valid_for(&self, node: usize, access: Access) -> bool {
        match self.replica(node) {
            ReplicaState::Owner => true,
            ReplicaState::Shared => !access.writes(),
            ReplicaState::Invalid => false,
        }
    }

    /// The copy on device node `node` (1 or more), if one was made.
    ///
    /// # Safety
    /// As [`HandleCore::data_ref`], on node `node`, which [`HandleCore::make_valid`] made
    /// valid for this access.
    pub(crate) unsafe fn replica_ref(&self, node: usize) -> Option<&(dyn Any + Send + Sync)> {
        let ext = self.ext()?;
        // SAFETY: the caller's rights exclude a writer on this node.
        unsafe { (*ext.replicas[node - 1].get()).as_deref() }
    }

    /// The copy on device node `node`, mutably.
    ///
    /// # Safety
    /// As [`HandleCore::data_mut`], on node `node`.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn replica_mut(&self, node: usize) -> Option<&mut (dyn Any + Send + Sync)> {
        let ext = self.ext()?;
        // SAFETY: the caller holds write rights: this is the only reference.
        unsafe { (*ext.replicas[node - 1].get()).as_deref_mut() }
    }

    /// Records an access from memory node `node`, updating the MSI states. With only node
    /// 0 in use this keeps node 0 the owner; the transfer a GPU node would need is where
    /// a data-transfer hook goes.
    pub(crate) fn note_access(&self, node: usize, access: Access) {
        if access.writes() {
            for (n, r) in self.replicas.iter().enumerate() {
                let s = if n == node {
                    ReplicaState::Owner
                } else {
                    ReplicaState::Invalid
                };
                r.store(s as u8, Ordering::Release);
            }
        } else if self.replica(node) == ReplicaState::Invalid {
            for r in &self.replicas {
                if r.load(Ordering::Acquire) == ReplicaState::Owner as u8 {
                    r.store(ReplicaState::Shared as u8, Ordering::Release);
                }
            }
            self.replicas[node].store(ReplicaState::Shared as u8, Ordering::Release);
        }
    }
}

impl HandleCore {
    /// The handle for a message: its id, and the name `Runtime::set_name` gave it
    /// (`3 (\`A[0][0]\`)`).
    pub(crate) fn label(&self) -> String {
        match self.ext().and_then(|e| e.name.lock().clone()) {
            Some(name) => format!("{} (`{name}`)", self.id),
            None => self.id.to_string(),
        }
    }

    /// Gives a handle that nobody else holds any more back to its runtime's pool, cleared,
    /// instead of freeing it: the application dropped its last [`Handle`], and no task,
    /// acquisition or task being built refers to it. Otherwise the last of those frees it
    /// as usual.
    ///
    /// Clearing does at once what freeing would: the value is dropped, and the nodes the
    /// handle held go back to the node pool. A graph that registers a handle for every
    /// few tasks and drops it after (the fan-out/fan-in of the overhead benchmark: one
    /// for every two tasks) thus allocates no handle once the pool is warm.
    fn retire(mut core: Arc<HandleCore>) {
        // The count first: a plain load, where `get_mut` locks the weak count.
        if Arc::strong_count(&core) != 1 {
            return;
        }
        let Some(c) = Arc::get_mut(&mut core) else {
            return;
        };
        let Some(pool) = c.pool.clone() else {
            return;
        };
        // The value's drop may panic: the handle is then freed by the unwinding, and the
        // assignment has already stored the empty value, so nothing is dropped twice.
        // The extension first: a device replica may hold the value's memory pinned, and
        // lets go of it before the value is freed.
        c.ext.take();
        *c.data.get_mut() = Value::NONE;
        let deps = c.deps.get_mut();
        let readers = std::mem::take(&mut deps.readers);
        pool.recycle(deps.last_writer.take().into_iter().chain(readers));
        deps.prune_at = READERS_PRUNE_MIN;
        pool.keep_handle(core);
    }

    /// A handle holding `value`: a cleared one from `pool` when one was kept, else a new
    /// allocation.
    fn make<T: Send + Sync + 'static>(
        value: T,
        bytes: u64,
        pool: Option<&Arc<NodePool>>,
    ) -> Arc<HandleCore> {
        if let Some(mut core) = pool.and_then(|p| p.take_handle()) {
            if let Some(c) = Arc::get_mut(&mut core) {
                // Cleared by `retire`: no value, no nodes; the pool is the same.
                c.id = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
                c.bytes = bytes;
                c.type_name = std::any::type_name::<T>();
                c.copier = None;
                *c.unregistered.get_mut() = false;
                *c.replicas[0].get_mut() = ReplicaState::Owner as u8;
                for r in &mut c.replicas[1..] {
                    *r.get_mut() = ReplicaState::Invalid as u8;
                }
                *c.data.get_mut() = Value::new(value);
                return core;
            }
        }
        Arc::new(HandleCore::new(value, bytes, pool.cloned()))
    }
}

impl Drop for HandleCore {
    fn drop(&mut self) {
        // The replicas before the value (see `retire`).
        self.ext.take();
        // The last writer and readers of a handle that is never written again (a graph's
        // outputs, each written once) would otherwise be freed here, not reused: give the
        // finished ones nobody else holds back to the pool.
        if let Some(pool) = &self.pool {
            let deps = self.deps.get_mut();
            let readers = std::mem::take(&mut deps.readers);
            pool.recycle(deps.last_writer.take().into_iter().chain(readers));
        }
    }
}

/// A typed handle on registered data. Cloning it clones the handle, not the data.
pub struct Handle<T> {
    /// Taken out only by `drop` (see [`HandleCore::retire`]).
    pub(crate) core: ManuallyDrop<Arc<HandleCore>>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        Handle {
            core: ManuallyDrop::new(Arc::clone(&self.core)),
            _t: PhantomData,
        }
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        // SAFETY: `core` is taken once, here, and the handle is not used after its drop.
        let core = unsafe { ManuallyDrop::take(&mut self.core) };
        HandleCore::retire(core);
    }
}

impl<T: Send + Sync + 'static> Handle<T> {
    /// A handle on `value`, reusing one that `pool` kept if it can.
    pub(crate) fn new(value: T, bytes: u64, pool: Option<&Arc<NodePool>>) -> Handle<T> {
        Handle {
            core: ManuallyDrop::new(HandleCore::make(value, bytes, pool)),
            _t: PhantomData,
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Handle<T> {
    /// A handle on `value` that can have copies on other memory nodes (of emulated
    /// devices).
    pub(crate) fn new_replicated(value: T, bytes: u64, pool: Option<&Arc<NodePool>>) -> Handle<T> {
        Self::with_copier(value, bytes, pool, &CopierOf::<T>::COPIER)
    }
}

impl<T: Send + Sync + 'static> Handle<T> {
    /// A handle on `value` copied between memory nodes by `copier`, which must be the
    /// copier of `T` (a part's, chosen at run time: see partition.rs).
    pub(crate) fn with_copier(
        value: T,
        bytes: u64,
        pool: Option<&Arc<NodePool>>,
        copier: &'static Copier,
    ) -> Handle<T> {
        let mut core = HandleCore::make(value, bytes, pool);
        Arc::get_mut(&mut core)
            .expect("a handle just made is held once")
            .copier = Some(copier);
        Handle {
            core: ManuallyDrop::new(core),
            _t: PhantomData,
        }
    }
}

impl<T: crate::device::DeviceData> Handle<T> {
    /// A handle on `value` that can have copies on the nodes of any device.
    pub(crate) fn new_device(value: T, bytes: u64, pool: Option<&Arc<NodePool>>) -> Handle<T> {
        Self::with_copier(value, bytes, pool, &CopierOf::<T>::DEVICE_COPIER)
    }
}

pub(crate) use crate::device::Replica;

/// The copies between memory nodes, for one value type (made by `CopierOf<T>`).
pub(crate) struct Copier {
    /// Node 0's value, copied for another node.
    pub(crate) from_home: fn(&Value) -> Replica,
    /// Another node's copy, copied for a third node.
    pub(crate) between: fn(&(dyn Any + Send + Sync)) -> Replica,
    /// Another node's copy, copied into node 0's value (its allocation reused).
    pub(crate) to_home: fn(&(dyn Any + Send + Sync), &mut Value),
    /// The value's bytes, for devices with memory of their own: none for a value
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    /// registered with `register_replicated` (emulated devices only).
    pub(crate) bytes: Option<BytesView>,
}

/// The bytes of a [`crate::DeviceData`] value held in a [`Value`] (none once taken).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct BytesView {
    pub(crate) get: fn(&Value) -> Option<&[u8]>,
    pub(crate) get_mut: fn(&mut Value) -> Option<&mut [u8]>,
}

struct CopierOf<T>(PhantomData<T>);

impl<T: Clone + Send + Sync + 'static> CopierOf<T> {
    const FROM_HOME: fn(&Value) -> Replica =
        |v| Box::new(v.get::<T>().expect("a handle holds its type").clone());
    const BETWEEN: fn(&(dyn Any + Send + Sync)) -> Replica = |r| {
        Box::new(
            r.downcast_ref::<T>()
                .expect("replicas hold the handle's type")
                .clone(),
        )
    };
    const TO_HOME: fn(&(dyn Any + Send + Sync), &mut Value) = |r, v| {
        let src = r
            .downcast_ref::<T>()
            .expect("replicas hold the handle's type");
        match v.get_mut::<T>() {
            Some(dst) => dst.clone_from(src),
            None => *v = Value::new(src.clone()),
        }
    };
    const COPIER: Copier = Copier {
        from_home: Self::FROM_HOME,
        between: Self::BETWEEN,
        to_home: Self::TO_HOME,
        bytes: None,
    };
}

/// The copier of a `Clone` type: emulated devices only.
pub(crate) fn replicated_copier<T: Clone + Send + Sync + 'static>() -> &'static Copier {
    &CopierOf::<T>::COPIER
}

/// The copier of a [`crate::DeviceData`] type (for the bus measure).
pub(crate) fn device_copier<T: crate::device::DeviceData>() -> &'static Copier {
    &CopierOf::<T>::DEVICE_COPIER
}

impl<T: crate::device::DeviceData> CopierOf<T> {
    const DEVICE_COPIER: Copier = Copier {
        from_home: Self::FROM_HOME,
        between: Self::BETWEEN,
        to_home: Self::TO_HOME,
        bytes: Some(BytesView {
            get: |v| v.get::<T>().map(|t| t.device_bytes()),
            get_mut: |v| v.get_mut::<T>().map(|t| t.device_bytes_mut()),
        }),
    };
}

impl<T> Handle<T> {
    /// The handle's id (unique in the process).
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// The size in bytes it counts for in task footprints.
    pub fn bytes(&self) -> u64 {
        self.core.bytes
    }

    /// The coherence state of its replica on memory node `node` (0 is main memory).
    pub fn replica_state(&self, node: usize) -> ReplicaState {
        self.core.replica(node.min(MAX_MEMORY_NODES - 1))
    }
}

impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("id", &self.core.id)
            .field("type", &self.core.type_name)
            .field("bytes", &self.core.bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_submission_and_counts_each_have_their_own_lines() {
        use std::mem::{align_of, offset_of, size_of};
        // `Arc` puts its two counts first and the value at the value's alignment: a
        // line-aligned value starts on the line after the counts.
        assert_eq!(align_of::<HandleCore>(), 64);
        let line = |offset: usize| offset / 64;
        let last = |offset: usize, size: usize| (offset + size - 1) / 64;
        // The value and its replica states: the first line.
        assert_eq!(offset_of!(HandleCore, data), 0);
        assert_eq!(
            last(offset_of!(HandleCore, replicas), MAX_MEMORY_NODES),
            0,
            "replicas in the value's line"
        );
        // The dependency state: a line of its own.
        let deps = offset_of!(HandleCore, deps);
        assert_eq!(line(deps), 1);
        assert_eq!(
            last(deps, size_of::<LineAligned<SpinLock<HandleDeps>>>()),
            1
        );
        // The rest after it.
        for offset in [
            offset_of!(HandleCore, id),
            offset_of!(HandleCore, bytes),
            offset_of!(HandleCore, type_name),
            offset_of!(HandleCore, pool),
            offset_of!(HandleCore, unregistered),
            offset_of!(HandleCore, ext),
        ] {
            assert_eq!(line(offset), 2);
        }
    }

    #[test]
    fn msi_states_follow_accesses() {
        let h = Handle::new(1u32, 4, None);
        assert_eq!(h.replica_state(0), ReplicaState::Owner);
        h.core.note_access(1, Access::R);
        assert_eq!(h.replica_state(0), ReplicaState::Shared);
        assert_eq!(h.replica_state(1), ReplicaState::Shared);
        h.core.note_access(1, Access::RW);
        assert_eq!(h.replica_state(0), ReplicaState::Invalid);
        assert_eq!(h.replica_state(1), ReplicaState::Owner);
        h.core.note_access(0, Access::W);
        assert_eq!(h.replica_state(0), ReplicaState::Owner);
        assert_eq!(h.replica_state(1), ReplicaState::Invalid);
    }
}
