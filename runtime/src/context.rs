//! What an implementation sees: its task's data buffers, its argument, its worker.

use std::any::Any;
use std::cell::Cell;

use taskwatt_traces::{TaskId, WorkerId};

use crate::handle::Access;
use crate::task::Body;

/// Most data accesses one task may declare (their modes are packed three bits each, in
/// two words of the task node).
pub const MAX_ACCESSES: usize = 42;

/// The context of one running task.
///
/// Buffers are numbered in the order the task declared its accesses. [`TaskCtx::r`] gives
/// shared access to a buffer declared R or RW (or W), [`TaskCtx::w`]/[`TaskCtx::rw`]
/// exclusive access to one declared W or RW. Each buffer can be borrowed mutably once, or
/// shared any number of times, per task; anything else panics (and the task fails), since it
/// would alias a `&mut`.
pub struct TaskCtx<'a> {
    pub(crate) body: &'a Body,
    codelet: &'a str,
    pub(crate) task: TaskId,
    pub(crate) worker: WorkerId,
    /// The worker's memory node: 0 (main memory), or a device's, whose copies the
    /// buffers then are.
    node: usize,
    /// The worker's device state (a CUDA worker's stream and cuBLAS handle).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    device: Option<&'a crate::device::WorkerState>,
    /// Bit i: buffer i was borrowed mutably.
    mut_borrowed: Cell<u64>,
    /// Bit i: buffer i was borrowed shared.
    shared_borrowed: Cell<u64>,
}

impl<'a> TaskCtx<'a> {
    pub(crate) fn new(
        body: &'a Body,
        codelet: &'a str,
        task: TaskId,
        worker: WorkerId,
        node: usize,
        device: Option<&'a crate::device::WorkerState>,
    ) -> TaskCtx<'a> {
        TaskCtx {
            body,
            codelet,
            task,
            worker,
            node,
            device,
            mut_borrowed: Cell::new(0),
            shared_borrowed: Cell::new(0),
        }
    }

    /// The running task's id.
    pub fn task_id(&self) -> TaskId {
        self.task
    }

    /// The worker running it.
    pub fn worker(&self) -> WorkerId {
        self.worker
    }

    /// Number of data buffers.
    pub fn buffers(&self) -> usize {
        self.body.accesses.len()
    }

    /// The task's argument (see [`Task::arg`](crate::Task::arg)).
    ///
    /// # Panics
    /// If the task has no argument or it is not an `A`.
    #[track_caller]
    pub fn arg<A: Any>(&self) -> &A {
        if !self.body.arg.is_some() {
            panic!(
                "codelet `{}` asked for an argument of type {} but the task has none",
                self.codelet,
                std::any::type_name::<A>()
            )
        }
        // A match, not a closure: the panic's location is the codelet's call.
        match self.body.arg.get::<A>() {
            Some(a) => a,
            None => panic!(
                "codelet `{}` asked for an argument of type {}, which is not the type given to Task::arg",
                self.codelet,
                std::any::type_name::<A>()
            ),
        }
    }

    /// The task's argument if it has one of type `A`.
    pub fn try_arg<A: Any>(&self) -> Option<&A> {
        self.body.arg.get::<A>()
    }

    /// Shared access to buffer `i`.
    ///
    /// # Panics
    /// If `i` is out of range, the buffer is not a `T`, it was already borrowed mutably,
    /// or the handle was unregistered.
    #[track_caller]
    pub fn r<T: Any>(&self, i: usize) -> &T {
        let (core, mode) = self.slot(i);
        if mode == Access::Redux {
            self.fail(
                i,
                "was declared REDUX: its value is known only after the reduction; write \
                 this task's contribution with `w` or `rw`",
            );
        }
        let bit = 1u64 << i;
        if self.mut_borrowed.get() & bit != 0 {
            self.fail(i, "is already borrowed mutably in this task");
        }
        self.shared_borrowed.set(self.shared_borrowed.get() | bit);
        // SAFETY: this task holds at least read rights on the handle (the dependencies
        // released it only after every earlier writer finished, and no later writer starts
        // before it finishes), and the flags above exclude a `&mut` from this context.
        if self.node != 0 {
            // SAFETY: as below; the worker made this node's copy valid for this task.
            return match unsafe { core.replica_ref(self.node) } {
                Some(v) => match v.downcast_ref::<T>() {
                    Some(t) => t,
                    None => self.in_device_memory::<T>(i, v),
                },
                None => self.fail(i, "has no copy on this device (it was unregistered)"),
            };
        }
        let data = unsafe { core.data_ref() };
        match data.get::<T>() {
            Some(v) => v,
            None if data.is_some() => self.wrong_type::<T>(i),
            None => self.fail(i, "was unregistered"),
        }
    }

    /// Exclusive access to buffer `i`, declared W, RW or COMMUTE; for a buffer declared
    /// REDUX, this worker's contribution to the reduction (see [`Access::Redux`]).
    ///
    /// # Panics
    /// As [`TaskCtx::r`], and if the buffer was declared R or was already borrowed.
    #[allow(clippy::mut_from_ref)]
    #[track_caller]
    pub fn w<T: Any>(&self, i: usize) -> &mut T {
        let (core, mode) = self.slot(i);
        if !mode.writes() {
            self.fail(i, "was declared R: declare it W or RW to write it");
        }
        let bit = 1u64 << i;
        if (self.mut_borrowed.get() | self.shared_borrowed.get()) & bit != 0 {
            self.fail(i, "is already borrowed in this task");
        }
        self.mut_borrowed.set(self.mut_borrowed.get() | bit);
        if mode == Access::Redux {
            let red = core
                .ext()
                .and_then(|e| e.reduction.get())
                .expect("a REDUX access is accepted only on a handle with a reduction");
            // SAFETY: this is the REDUX task running on this worker, and the flag above
            // makes this the only reference to the slot handed out by this context.
            let slot = unsafe { red.slot(self.worker as usize) };
            return match slot.downcast_mut::<T>() {
                Some(t) => t,
                None => self.wrong_type::<T>(i),
            };
        }
        // SAFETY: the task holds write rights (a W/RW access runs with no other task
        // accessing the handle), and the flag above makes this the only reference to buffer
        // `i` handed out by this context.
        if self.node != 0 {
            // SAFETY: as below; the worker made this node's copy valid (and the owner) for
            // this task.
            return match unsafe { core.replica_mut(self.node) } {
                Some(v) if v.is::<T>() => v.downcast_mut::<T>().expect("checked"),
                Some(v) => self.in_device_memory::<T>(i, v),
                None => self.fail(i, "has no copy on this device (it was unregistered)"),
            };
        }
        let data = unsafe { core.data_mut() };
        if !data.is_some() {
            self.fail(i, "was unregistered");
        }
        match data.get_mut::<T>() {
            Some(t) => t,
            None => self.wrong_type::<T>(i),
        }
    }

    /// Same as [`TaskCtx::w`]: exclusive access to a buffer declared RW (or W).
    #[allow(clippy::mut_from_ref)]
    #[inline]
    #[track_caller]
    pub fn rw<T: Any>(&self, i: usize) -> &mut T {
        self.w(i)
    }

    /// The device address of buffer `i`, which lives in a device's own memory (on a
    /// CUDA worker: a `CUdeviceptr`), and its length in bytes. The worker made it valid
    /// for the declared access; writing through the address of a buffer declared R is
    /// the implementation's fault, as in StarPU.
    ///
    /// # Panics
    /// If `i` is out of range, or the buffer is not in a device's own memory (on a CPU
    /// worker, or an emulated GPU: use [`TaskCtx::r`] and [`TaskCtx::w`]).
    #[track_caller]
    pub fn device_ptr(&self, i: usize) -> (u64, usize) {
        let (core, _) = self.slot(i);
        if self.node != 0 {
            // SAFETY: the worker made this node's copy valid for this task; only its
            // address is read.
            if let Some(b) = unsafe { core.replica_ref(self.node) }
                .and_then(|v| v.downcast_ref::<crate::device::DeviceBuffer>())
            {
                return (b.ptr, b.len);
            }
        }
        self.fail(
            i,
            "is not in a device's own memory (this worker computes on the host's copies): \
             use `r`/`w`",
        )
    }

    /// On a CUDA worker, its stream and cuBLAS handle; none elsewhere (a CPU worker, an
    /// emulated GPU). A GPU implementation that serves both CUDA and emulated devices
    /// branches on this.
    #[cfg(feature = "cuda")]
    pub fn cuda(&self) -> Option<&crate::device::cuda::CudaTask> {
        self.device?.downcast_ref()
    }

    #[cold]
    #[track_caller]
    fn in_device_memory<T>(&self, i: usize, v: &(dyn Any + Send + Sync)) -> ! {
        if v.is::<crate::device::DeviceBuffer>() {
            self.fail(
                i,
                "lives in the device's own memory on this worker: use `device_ptr` (and \
                 `cuda()` for the stream) in a GPU implementation",
            )
        }
        self.wrong_type::<T>(i)
    }

    #[track_caller]
    fn slot(&self, i: usize) -> (&crate::handle::HandleCore, Access) {
        match self.body.accesses.get(i) {
            Some(slot) => slot,
            None => panic!(
                "codelet `{}` asked for buffer {i} but the task declared {} access(es)",
                self.codelet,
                self.body.accesses.len()
            ),
        }
    }

    #[track_caller]
    fn wrong_type<T>(&self, i: usize) -> ! {
        let (core, _) = self.slot(i);
        panic!(
            "codelet `{}`: buffer {i} holds `{}`, not `{}`",
            self.codelet,
            core.type_name,
            std::any::type_name::<T>()
        )
    }

    #[track_caller]
    fn fail(&self, i: usize, why: &str) -> ! {
        panic!("codelet `{}`: buffer {i} {why}", self.codelet)
    }
}
