//! The runtime's public face: registering data, waiting, interrupting and shutting down.
//! Its other rooms: builder.rs (configuring and starting it), submit.rs (submission and
//! dependency inference), shared.rs (the state its threads share) with staging.rs,
//! completion.rs, copies.rs and tracelog.rs (that state's behaviour by concern), and
//! worker.rs (the workers' loop).
//!
//! # Shutdown (what `Drop` does)
//!
//! Dropping a [`Runtime`] with tasks pending is defined: it finishes them.
//!
//! 1. Wait until every submitted task has finished, failed or been cancelled. (No
//!    acquisition guard can be alive: guards borrow the runtime.) Failures not yet reported
//!    by a `wait_all` are printed to stderr, since `Drop` cannot return them; call
//!    [`Runtime::shutdown`] to get them as an error instead.
//! 2. Raise the shutdown flag and wake every worker.
//! 3. Each worker, finding no task, flushes its trace buffer and exits.
//! 4. Join the worker threads, then the trace flusher.
//!
//! # Interruption
//!
//! [`Runtime::interrupt`] (or an [`InterruptHandle`] from another thread, a signal handler's
//! thread say) makes the workers finish the task each is running and start no other: every
//! task not yet started is counted as not run and finished at once, its successors with it,
//! so that `wait_all` returns [`RuntimeError::Interrupted`] within one task's duration. Later
//! submissions are refused with the same error. The trace keeps every task that ran.
//!
//! # Trace flushing
//!
//! Each worker records into its own buffer, sent to the trace sink when full, when the
//! worker parks and when it exits. So that a killed process loses little, a flusher thread
//! also sends every buffer whose oldest record is [`RuntimeBuilder::trace_flush`](crate::RuntimeBuilder::trace_flush) old (25 ms
//! by default), looking twice per period: a record reaches the sink at most 1.5 periods
//! after its task ended, even while its worker runs a long task. (The buffer is behind an
//! uncontended lock for this: one lock per recorded task.)

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use taskwatt_traces::{TaskId, WorkerId, WorkerInfo};

use crate::device::GpuBackend;
use crate::error::{RuntimeError, TaskFailure};
use crate::handle::Handle;
use crate::helper::{Check, Helper};
use crate::pool::NodePool;
use crate::shared::{RuntimeStats, Shared};
use crate::task::{TaskHandle, TaskNode, DONE_FAILED, DONE_OK};
use crate::tracelog::Flusher;

/// The longest handle name [`Runtime::set_name`] keeps, in bytes.
pub const MAX_HANDLE_NAME: usize = 256;

/// Interrupts a runtime from any thread (see [`Runtime::interrupt`]). Holds no reference
/// that keeps the runtime alive: once it is gone, `interrupt` does nothing.
#[derive(Clone, Debug)]
pub struct InterruptHandle {
    shared: Weak<Shared>,
}

impl InterruptHandle {
    /// Interrupts the runtime, if it still exists. Returns at once.
    pub fn interrupt(&self) {
        if let Some(sh) = self.shared.upgrade() {
            sh.interrupt();
        }
    }

    /// Whether the runtime was interrupted (false once it is gone).
    pub fn is_interrupted(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|sh| sh.interrupted.load(Ordering::SeqCst))
    }
}

/// A task runtime: workers pinned to cores, a scheduling policy, dependency inference on
/// registered data, and a trace of every execution.
///
/// ```
/// use taskwatt_runtime::{Codelet, Runtime, Task};
///
/// let rt = Runtime::builder().workers(2).policy("ws").build().unwrap();
/// let inc = Codelet::new("inc").cpu(|ctx| *ctx.rw::<u64>(0) += 1);
/// let x = rt.register(0u64);
/// for _ in 0..100 {
///     rt.submit(Task::new(&inc).rw(&x)).unwrap();
/// }
/// rt.wait_all().unwrap();
/// assert_eq!(*rt.acquire(&x).unwrap(), 100);
/// ```
pub struct Runtime {
    pub(crate) shared: Arc<Shared>,
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) flusher: Option<Flusher>,
    /// The submitting thread's worker, when it works ([`RuntimeBuilder::submitter_works`](crate::RuntimeBuilder::submitter_works)).
    pub(crate) helper: Option<Helper>,
}

impl Runtime {
    /// The workers, with their core and package; the reserved workers, if any, come last
    /// (see [`Runtime::reserved_workers`]).
    pub fn workers(&self) -> &[WorkerInfo] {
        &self.shared.workers
    }

    /// The ids of the reserved workers
    /// ([`RuntimeBuilder::reserved_workers`](crate::RuntimeBuilder::reserved_workers)):
    /// the policy never gives them a task; they run the tasks pinned to them with
    /// [`Task::on_worker`](crate::Task::on_worker).
    pub fn reserved_workers(&self) -> Vec<WorkerId> {
        self.shared.reserved.ids().collect()
    }

    /// The name of the scheduling policy in use.
    pub fn policy_name(&self) -> &str {
        &self.shared.policy_name
    }

    /// Registers `value` as data that tasks access through the returned handle. It counts
    /// the bytes of its data ([`DataSize`]: a `Vec<f64>` of `n` elements counts `8n`) in
    /// task footprints, copies and the trace; see [`Runtime::register_bytes`] for a size
    /// given by hand.
    ///
    /// [`DataSize`]: crate::DataSize
    pub fn register<T: crate::DataSize + Send + Sync + 'static>(&self, value: T) -> Handle<T> {
        let bytes = value.data_bytes();
        self.register_bytes(value, bytes)
    }

    /// Registers `value`, counting `bytes` in task footprints (for a type that does not
    /// implement [`DataSize`](crate::DataSize), or a size other than its data's).
    pub fn register_bytes<T: Send + Sync + 'static>(&self, value: T, bytes: u64) -> Handle<T> {
        Handle::new(value, bytes, Some(&self.shared.nodes))
    }

    /// Registers `value` as data that can have copies on the memory nodes of devices
    /// (see [`RuntimeBuilder::emulated_gpus`](crate::RuntimeBuilder::emulated_gpus)): tasks on it may run on GPU workers. It
    /// counts the bytes of its data ([`DataSize`](crate::DataSize)) in footprints and in
    /// each copy; see [`Runtime::register_replicated_bytes`].
    pub fn register_replicated<T: crate::DataSize + Clone + Send + Sync + 'static>(
        &self,
        value: T,
    ) -> Handle<T> {
        let bytes = value.data_bytes();
        self.register_replicated_bytes(value, bytes)
    }

    /// As [`Runtime::register_replicated`], counting `bytes` in task footprints and in
    /// the bytes each copy between memory nodes moves.
    pub fn register_replicated_bytes<T: Clone + Send + Sync + 'static>(
        &self,
        value: T,
        bytes: u64,
    ) -> Handle<T> {
        Handle::new_replicated(value, bytes, Some(&self.shared.nodes))
    }

    /// Registers `value` as data that any device can hold, an emulated GPU (as a clone)
    /// or a CUDA GPU (as a copy of its bytes, see [`DeviceData`]): tasks on it may run on
    /// GPU workers of either backend. It counts `size_of_val` of its bytes in task
    /// footprints; see [`Runtime::register_device_bytes`].
    ///
    /// [`DeviceData`]: crate::DeviceData
    pub fn register_device<T: crate::DeviceData>(&self, value: T) -> Handle<T> {
        let bytes = value.device_bytes().len() as u64;
        self.register_device_bytes(value, bytes)
    }

    /// As [`Runtime::register_device`], counting `bytes` in task footprints and in
    /// transfers.
    pub fn register_device_bytes<T: crate::DeviceData>(&self, value: T, bytes: u64) -> Handle<T> {
        Handle::new_device(value, bytes, Some(&self.shared.nodes))
    }

    /// The names of the codelets submitted so far, in the order they were first
    /// submitted (each once, even when two codelets share a name).
    pub fn codelet_names(&self) -> Vec<String> {
        let reg = self.shared.codelets.lock();
        let mut out: Vec<String> = Vec::with_capacity(reg.kept.len());
        for c in &reg.kept {
            if !out.contains(&c.name) {
                out.push(c.name.clone());
            }
        }
        out
    }

    /// Names `handle` (StarPU's `starpu_data_set_name`): the trace records the name, every
    /// export shows it where it would show `h<id>` (copies in Perfetto and Paje, the
    /// transfers and accesses CSVs), and the deadlock errors name it beside its id. A later name replaces an earlier one; a name
    /// longer than [`MAX_HANDLE_NAME`] bytes is cut there.
    pub fn set_name<T>(&self, handle: &Handle<T>, name: impl Into<String>) {
        let mut name = name.into();
        if name.len() > MAX_HANDLE_NAME {
            let mut end = MAX_HANDLE_NAME;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            log::warn!(
                "the name of handle {} is {} bytes long: cut at {MAX_HANDLE_NAME}",
                handle.id(),
                name.len()
            );
            name.truncate(end);
        }
        // Kept with the handle, traced or not: the runtime's errors name it too.
        *handle.core.ext_or_init().name.lock() = Some(name.clone());
        if !self.shared.sink.is_enabled() {
            return;
        }
        self.shared
            .name_log
            .lock()
            .push(taskwatt_traces::HandleInfo {
                handle: handle.id(),
                name,
                bytes: handle.core.bytes,
            });
    }

    /// The backend that drives this runtime's GPU workers (emulated when it has none).
    pub fn gpu_backend(&self) -> GpuBackend {
        self.shared.gpu_backend
    }

    /// Waits for every submitted task. Returns the failures since the last `wait_all`
    /// (tasks that panicked, and how many dependents were cancelled); the runtime stays
    /// usable either way. Must not be called from inside a task.
    ///
    /// Cancellation reaches every task that depends, through data or explicitly, on a
    /// failed task, up to the `wait_all` that reports the failure: tasks submitted after
    /// it run normally, on the data as the failure left it.
    ///
    /// Returns [`RuntimeError::Deadlock`] instead of waiting forever when called from
    /// inside one of this runtime's tasks, or while this thread holds an acquisition guard
    /// that a submitted task waits for; [`RuntimeError::Interrupted`] once the runtime
    /// was interrupted (after the tasks that were running have ended).
    pub fn wait_all(&self) -> Result<(), RuntimeError> {
        let sh = &*self.shared;
        crate::deadlock::check_wait_all(sh.epoch)?;
        sh.flush_staged();
        self.wait_helping(Check::WhenIdle, &|| sh.count.all_done());
        let submitted = sh.count.submitted();
        let graph = submitted.saturating_sub(sh.graph_start.swap(submitted, Ordering::Relaxed));
        sh.nodes.fit(graph);
        let made = crate::handle::handles_made();
        sh.nodes
            .fit_handles(made.saturating_sub(sh.handles_mark.swap(made, Ordering::Relaxed)));
        let report = std::mem::take(&mut *sh.report.lock());
        for n in &report.nodes {
            n.reported.store(true, Ordering::Release);
        }
        if sh.interrupted.load(Ordering::SeqCst) {
            return Err(sh.interrupted_error());
        }
        if report.failures.is_empty() && report.cancelled == 0 {
            Ok(())
        } else {
            Err(RuntimeError::TasksFailed {
                failures: report.failures,
                cancelled: report.cancelled,
            })
        }
    }

    /// Waits until `done()` holds: runs tasks meanwhile as the helper worker, when the
    /// submitting thread works and no other thread helps already (see helper.rs).
    pub(crate) fn wait_helping(&self, check: Check, done: &dyn Fn() -> bool) {
        if let Some(h) = &self.helper {
            if h.help(&self.shared, check, done) && done() {
                return;
            }
        }
        self.shared.waiters.wait_until(done);
    }

    /// Waits for one task. Errors if it panicked or was cancelled (the failure stays
    /// reported by the next `wait_all` too).
    pub fn wait(&self, task: &TaskHandle) -> Result<(), RuntimeError> {
        let node = &task.node;
        if task.runtime != self.shared.epoch {
            return Err(RuntimeError::ForeignTask {
                operation: "wait".into(),
                task: node.id,
            });
        }
        crate::deadlock::check_wait(self.shared.epoch, node)?;
        node.has_waiter.store(true, Ordering::SeqCst);
        self.shared.flush_staged();
        self.wait_helping(Check::EachTask, &|| node.is_finished());
        match node.status.load(Ordering::SeqCst) {
            DONE_OK => Ok(()),
            _ if self.shared.interrupted.load(Ordering::SeqCst) && !node_ran(node) => {
                Err(self.shared.interrupted_error())
            }
            DONE_FAILED => {
                let failures = self
                    .shared
                    .report
                    .lock()
                    .failures
                    .iter()
                    .filter(|f| f.task == node.id)
                    .cloned()
                    .collect();
                Err(RuntimeError::TasksFailed {
                    failures,
                    cancelled: 0,
                })
            }
            _ => Err(RuntimeError::Cancelled {
                task: node.id,
                codelet: node.codelet_name().to_string(),
            }),
        }
    }

    /// Wakes the parked workers and returns once none is parked (or after 10 ms), so
    /// that the next tasks are picked up by polling workers instead of waiting for a
    /// wake-up: call it before a timed region that follows a pause, such as registering
    /// a graph's data. Workers park after their idle polling (see
    /// [`RuntimeBuilder::idle`](crate::RuntimeBuilder::idle)), and waking one takes tens of µs to a few hundred on a
    /// VM: the first task of Task Bench's stencil started 31 to 147 µs after its
    /// submission. A woken worker polls for its idle budget again, then parks.
    pub fn warm_up(&self) {
        let sh = &*self.shared;
        sh.sleep.notify(usize::MAX);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(10);
        while sh.sleep.sleepers() > 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
    }

    /// Interrupts the runtime: each worker finishes the task it runs and starts no other;
    /// tasks not started are not run (their count is in [`RuntimeStats::not_run`]), later
    /// submissions are refused, and waits return [`RuntimeError::Interrupted`] once the
    /// running tasks have ended. Shut down or drop the runtime as usual afterwards: the
    /// trace keeps every task that ran. Returns at once.
    pub fn interrupt(&self) {
        self.shared.interrupt();
    }

    /// A handle that interrupts this runtime from another thread.
    pub fn interrupt_handle(&self) -> InterruptHandle {
        InterruptHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// Whether the runtime was interrupted.
    pub fn is_interrupted(&self) -> bool {
        self.shared.interrupted.load(Ordering::SeqCst)
    }

    /// Counters since the runtime started.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.stats()
    }

    /// The performance models: those saved before this run merged with what this run
    /// measured so far; `None` unless built with [`RuntimeBuilder::perf_models`](crate::RuntimeBuilder::perf_models).
    pub fn perf_models(&self) -> Option<crate::perfmodel::PerfModels> {
        let perf = self.shared.perf.as_ref()?;
        let mut m = perf.loaded.clone();
        m.merge(&self.shared.measured_models()?);
        Some(m)
    }

    /// A function that reads the counters, for a progress display on another thread.
    pub fn stats_probe(&self) -> impl Fn() -> RuntimeStats + Send + 'static {
        let sh = self.shared.clone();
        move || sh.stats()
    }

    /// A function, for another thread, that gives the run's first task failure, reported
    /// by [`Runtime::wait_all`] or not (a distributed rank ends its job on it, rather than
    /// send what a failed task left to the other ranks); `None` while none failed.
    pub fn failure_probe(&self) -> impl Fn() -> Option<TaskFailure> + Send + 'static {
        let sh = self.shared.clone();
        move || sh.first_failure.get().cloned()
    }

    /// Id the next submitted task will get.
    pub fn next_task_id(&self) -> TaskId {
        self.shared.count.submitted()
    }

    /// Waits for every task, stops the workers and flushes their trace buffers. Returns the
    /// failures not yet reported, as `wait_all` does.
    pub fn shutdown(mut self) -> Result<RuntimeStats, RuntimeError> {
        let res = self.wait_all();
        if let Err(e @ RuntimeError::Deadlock { .. }) = res {
            // Inside one of its own tasks: joining the workers would join this thread.
            return Err(e);
        }
        self.stop_workers();
        let stats = self.stats();
        res.map(|()| stats)
    }

    fn stop_workers(&mut self) {
        self.shared.sleep.shutdown();
        self.shared.reserved.shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(f) = self.flusher.take() {
            f.stop();
        }
        self.shared.flush_transfers();
        self.shared.save_perf_models();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        /// Closes the pool when dropped, even by a panic below: the nodes and data handles
        /// it keeps may hold the pool itself (see `NodePool::close`).
        struct Close(Arc<NodePool>);
        impl Drop for Close {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        let _close = Close(self.shared.nodes.clone());
        if !self.threads.is_empty() || self.helper.is_some() {
            match self.wait_all() {
                Ok(()) | Err(RuntimeError::Interrupted { .. }) => {}
                Err(RuntimeError::Deadlock { .. }) => {
                    // Dropped inside one of its own tasks (moved into one): waiting would
                    // never end. The workers are left to exit with the process.
                    log::error!(
                        "a runtime was dropped where waiting for its tasks would never end \
                         (inside one of its own tasks, or while this thread's guard or \
                         deferred acquisition holds back a task); its workers are left \
                         running"
                    );
                    return;
                }
                Err(e) => log::error!("runtime dropped with unreported failures: {e}"),
            }
            self.stop_workers();
        } else if let Some(f) = self.flusher.take() {
            f.stop();
        }
    }
}

/// Whether `node` ran (completed or failed), as opposed to being cancelled or not run.
fn node_ran(node: &TaskNode) -> bool {
    matches!(node.status.load(Ordering::SeqCst), DONE_OK | DONE_FAILED)
}
