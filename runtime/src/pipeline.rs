//! A GPU worker's pipeline: the tasks it takes ahead of the one it runs, whose data a
//! prefetcher thread of its own copies to the device meanwhile (StarPU's
//! `STARPU_CUDA_PIPELINE` and data prefetch).
//!
//! After taking a task, a GPU worker takes up to
//! [`RuntimeBuilder::gpu_pipeline`](crate::RuntimeBuilder::gpu_pipeline) more from the
//! policy (default [`DEFAULT_DEPTH`]) and hands each one's accesses to its prefetcher, which makes them
//! valid on the device (trace: transfers of kind `prefetch`, made before their task
//! starts). The worker runs its tasks in the order it took them, and waits, before each
//! one, for the prefetcher to be done with it; the task's own fetch then finds its data
//! there. On CUDA the prefetcher's copies run on the device's copy stream while the
//! worker's kernels run on its own: copies and kernels overlap.
//!
//! A task taken ahead is ready, so it holds the rights its accesses declare: copying its
//! data early changes nothing another task could see. COMMUTE and REDUX accesses, whose
//! rights come when the task runs, are left to the task.
//!
//! The prefetcher pins what it copies while it copies; under a memory limit a prefetch
//! that finds no room gives up (device/memory.rs), and the task fetches its data when
//! it runs.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use taskwatt_scheduler::Local;
use taskwatt_traces::{TaskId, TransferKind, WorkerId};

use crate::copies::CopyFor;
use crate::device::memory::Pinner;
use crate::handle::{Access, HandleCore};
use crate::shared::Shared;
use crate::task::ReadyTask;

/// Tasks a GPU worker takes ahead by default.
pub(crate) const DEFAULT_DEPTH: usize = 2;

/// Environment variable setting how many tasks a GPU worker takes ahead (0: none).
pub const PIPELINE_ENV: &str = "TASKWATT_GPU_PIPELINE";

/// The builder's depth, else [`PIPELINE_ENV`]'s, else [`DEFAULT_DEPTH`].
pub(crate) fn depth(builder: Option<usize>) -> Result<usize, String> {
    if let Some(d) = builder {
        return Ok(d);
    }
    match std::env::var(PIPELINE_ENV) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse::<usize>().map_err(|_| {
            format!(
                "{PIPELINE_ENV}={v}: give the number of tasks a GPU worker takes ahead \
                 (0 to copy each task's data when it starts)"
            )
        }),
        _ => Ok(DEFAULT_DEPTH),
    }
}

/// Set by the prefetcher when it is done with a task.
#[derive(Default)]
struct Slot {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Slot {
    fn finish(&self) {
        *self.done.lock() = true;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut d = self.done.lock();
        while !*d {
            self.cv.wait(&mut d);
        }
    }
}

struct Request {
    task: TaskId,
    worker: WorkerId,
    accesses: SmallVec<[(Arc<HandleCore>, Access); 4]>,
    slot: Arc<Slot>,
}

/// A GPU worker's side: the tasks taken ahead, and the way to its prefetcher.
pub(crate) struct Pipeline {
    tx: mpsc::Sender<Request>,
    ahead: VecDeque<(ReadyTask, Arc<Slot>)>,
    depth: usize,
    worker: WorkerId,
}

impl Pipeline {
    /// Starts the prefetcher of the worker `worker`, computing on memory node `node`, in
    /// `scope` (it ends when the pipeline is dropped); `None` if the thread could not be
    /// started (logged: the worker then fetches each task's data itself).
    pub(crate) fn start<'scope>(
        scope: &'scope std::thread::Scope<'scope, '_>,
        sh: &'scope Shared,
        node: usize,
        worker: WorkerId,
    ) -> Option<Pipeline> {
        let (tx, rx) = mpsc::channel::<Request>();
        let spawned = std::thread::Builder::new()
            .name(format!("taskwatt-prefetch-{worker}"))
            .spawn_scoped(scope, move || prefetcher(sh, node, rx));
        if let Err(e) = spawned {
            log::warn!(
                "GPU worker {worker}'s prefetcher could not be started ({e}): it copies each \
                 task's data when the task starts"
            );
            return None;
        }
        Some(Pipeline {
            tx,
            ahead: VecDeque::with_capacity(sh.pipeline),
            depth: sh.pipeline,
            worker,
        })
    }

    /// The oldest task taken ahead, once the prefetcher is done with it.
    pub(crate) fn next(&mut self) -> Option<ReadyTask> {
        let (task, slot) = self.ahead.pop_front()?;
        slot.wait();
        Some(task)
    }

    /// Takes tasks from the policy until `depth` wait, each handed to the prefetcher.
    pub(crate) fn fill(&mut self, sh: &Shared, me: usize, local: &mut Local) {
        while self.ahead.len() < self.depth {
            let Some(task) = sh.policy.pop(me, local) else {
                return;
            };
            let slot = Arc::new(Slot::default());
            // SAFETY: the policy gave this ready node to this worker, which has not taken
            // its body.
            let accesses = unsafe { task.0.accesses_ahead() };
            let req = Request {
                task: task.0.id,
                worker: self.worker,
                accesses,
                slot: Arc::clone(&slot),
            };
            if self.tx.send(req).is_err() {
                // The prefetcher is gone (it cannot panic out of its loop, but): the task
                // fetches its own data.
                slot.finish();
            }
            self.ahead.push_back((task, slot));
        }
    }
}

/// The prefetcher's loop: copies each request's data to `node`, then says it is done.
fn prefetcher(sh: &Shared, node: usize, rx: mpsc::Receiver<Request>) {
    if let Some(b) = sh.backends.get(node - 1) {
        b.enter_thread();
    }
    while let Ok(req) = rx.recv() {
        // The worker waits for this: told when this request is done, even by unwinding.
        struct Done<'a>(&'a Slot);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.finish();
            }
        }
        let _done = Done(&req.slot);
        if !sh.interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            let why = CopyFor {
                worker: Some(req.worker),
                task: Some(req.task),
                kind: TransferKind::Prefetch,
            };
            let pins = sh.pin(node, req.accesses.iter().map(|(c, _)| c), Pinner::Prefetch);
            // A copy runs user code (a replicated value's `Clone`): a panic or an error
            // here only ends the prefetch; the task meets it again when it fetches its
            // data, and fails with it there.
            // SAFETY: the task is ready and not started: it holds the rights of these
            // accesses (grouping ones are left out), and they are pinned on `node`.
            let r = crate::panics::catch(|| unsafe {
                sh.make_valid(node, req.accesses.iter().map(|(c, m)| (c, *m)), why)
            });
            if let Ok(Err(e)) | Err(e) = r.map(|r| r.map(|_| ())) {
                log::debug!("prefetch for task {} stopped: {e}", req.task);
            }
            drop(pins);
        }
    }
}
