//! The state a runtime's workers, submitters and waiters share ([`Shared`]), its
//! counters ([`RuntimeStats`]), and the small concerns that need no room of their own:
//! the clock, interruption, the codelet registry and the performance models.
//!
//! The rest of `Shared`'s behaviour lives by concern: staging.rs (tasks ready at
//! submission), completion.rs (finishing a task and releasing its successors),
//! copies.rs (making data valid on a memory node), tracelog.rs (what goes to the trace
//! besides task records).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use taskwatt_scheduler::{ArchMask, Policy};
use taskwatt_traces::{
    Arch, Chunk, Clock, CodeletInfo, ExecutionObserver, TaskAccess, TaskChunk, Timestamp,
    TraceSink, Transfer, WorkerInfo,
};

use crate::codelet::CodeletInner;
use crate::device::{Backend, GpuBackend};
use crate::error::{RuntimeError, TaskFailure};
use crate::handle::HandleCore;
use crate::pool::NodePool;
use crate::sync::{Sleep, TaskCount, Waiters};
use crate::task::{ReadyTask, TaskNode};

/// Counters of a runtime since it started. Exact once `wait_all` returned; while tasks
/// run, workers report `executed` in batches, so it may lag by a few dozen tasks per
/// worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Tasks submitted.
    pub submitted: u64,
    /// Tasks whose implementation returned.
    pub executed: u64,
    /// Tasks whose implementation panicked.
    pub failed: u64,
    /// Tasks cancelled because a predecessor failed.
    pub cancelled: u64,
    /// Tasks not run because the runtime was interrupted.
    pub not_run: u64,
    /// Copies of data between memory nodes (with devices only).
    pub transfers: u64,
    /// Bytes those copies moved (the handles' registered sizes).
    pub transferred_bytes: u64,
    /// Of those copies, the ones a GPU worker's prefetcher made ahead of their task.
    pub prefetches: u64,
    /// Device copies dropped to make room under a device's memory limit.
    pub evictions: u64,
    /// Of those, the only valid copies, written back to main memory first.
    pub written_back: u64,
    /// The most bytes of copies one device held at once (the handles' registered sizes;
    /// the largest over the devices).
    pub device_peak_bytes: u64,
    /// Workers not parked when the counters were read: running a task, or looking for
    /// one before they park (0 once every worker waits for work; a sign of life for a
    /// distributed run's peers).
    pub awake_workers: u64,
}

/// The performance models of a runtime that records them.
pub(crate) struct PerfState {
    pub(crate) dir: std::path::PathBuf,
    /// The models saved before this run.
    pub(crate) loaded: crate::perfmodel::PerfModels,
    /// Per worker: what it measured (locked by its worker per task, and at shutdown).
    pub(crate) workers: Vec<CachePadded<Mutex<crate::perfmodel::WorkerHistory>>>,
}

#[derive(Default)]
pub(crate) struct CodeletRegistry {
    pub(crate) by_ptr: HashMap<usize, u32>,
    /// Keeps registered codelets alive so that their addresses stay unique.
    pub(crate) kept: Vec<Arc<CodeletInner>>,
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) failures: Vec<TaskFailure>,
    pub(crate) cancelled: u64,
    /// The failed and cancelled nodes, marked `reported` when `wait_all` reports them.
    pub(crate) nodes: Vec<Arc<TaskNode>>,
}

pub(crate) struct Shared {
    pub(crate) policy: Box<dyn Policy<ReadyTask>>,
    // The lines written on the hot paths are padded apart: `sleep` is read for every push
    // and written when a worker parks, `count` holds the submitters' and the workers'
    // counters, and `executed` is written by workers with their batches.
    pub(crate) sleep: CachePadded<Sleep>,
    pub(crate) waiters: CachePadded<Waiters>,
    pub(crate) count: TaskCount,
    pub(crate) executed: CachePadded<AtomicU64>,
    /// Idle workers polling busily now, and how many may (see worker.rs, `find_task`).
    pub(crate) spinners: CachePadded<AtomicUsize>,
    pub(crate) max_spinners: usize,
    /// Finished nodes, recycled for new tasks (shared with the handles registered here,
    /// which give back the nodes they hold when they are dropped).
    pub(crate) nodes: Arc<NodePool>,
    /// Tasks submitted when `wait_all` last returned: the next one sizes the node pool
    /// for the graph in between (see [`NodePool::fit`]).
    pub(crate) graph_start: AtomicU64,
    /// [`crate::handle::handles_made`] at the last `wait_all` (see `NodePool::fit_handles`).
    pub(crate) handles_mark: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) report: Mutex<Report>,
    /// The run's first task failure, kept after `wait_all` reports it
    /// (`Runtime::failure_probe`).
    pub(crate) first_failure: std::sync::OnceLock<crate::error::TaskFailure>,
    pub(crate) codelets: Mutex<CodeletRegistry>,
    pub(crate) epoch: u32,
    pub(crate) sink: TraceSink,
    pub(crate) observer: Option<Arc<dyn ExecutionObserver>>,
    pub(crate) workers: Vec<WorkerInfo>,
    pub(crate) archs: [bool; Arch::COUNT],
    /// Some worker drives a device (a memory node other than 0): data is made valid on
    /// the worker's node before each task, and on node 0 before each acquisition.
    pub(crate) devices: bool,
    /// Run no implementation ([`RuntimeBuilder::dry_run`]).
    pub(crate) dry_run: bool,
    /// The devices' backends, by memory node (node `1 + i` is `backends[i]`).
    pub(crate) backends: Vec<Arc<dyn Backend>>,
    pub(crate) gpu_backend: GpuBackend,
    pub(crate) transfers: AtomicU64,
    pub(crate) transferred_bytes: AtomicU64,
    /// Transfers not yet sent to the trace.
    pub(crate) transfer_log: Mutex<Vec<Transfer>>,
    /// Copies GPU workers' prefetchers made ahead of their task.
    pub(crate) prefetches: AtomicU64,
    /// Each device's memory account, by device (device/memory.rs).
    pub(crate) memories: Vec<crate::device::memory::DeviceMemory>,
    /// Evictions not yet sent to the trace.
    pub(crate) eviction_log: Mutex<Vec<taskwatt_traces::Eviction>>,
    /// Tasks a GPU worker takes ahead of the one it runs, for its prefetcher (0: none).
    pub(crate) pipeline: usize,
    /// Handle names not yet in the trace.
    pub(crate) name_log: Mutex<Vec<taskwatt_traces::HandleInfo>>,
    /// Task accesses not yet sent to the trace.
    pub(crate) access_log: Mutex<Vec<TaskAccess>>,
    /// Tasks' accesses go to the trace (asked for, and a trace is written).
    pub(crate) trace_accesses: bool,
    /// Extra power per (codelet, architecture), W (see `RuntimeBuilder::task_powers`).
    pub(crate) task_powers: HashMap<String, [Option<f64>; Arch::COUNT]>,
    /// Performance models: those loaded, and what each worker measured.
    pub(crate) perf: Option<PerfState>,
    /// The policy reads expected durations, and performance models were loaded: each
    /// submission notes them with its codelet (see `CodeletInner::note_expected`).
    pub(crate) predictions: bool,
    pub(crate) policy_name: String,
    /// Whether anyone reads task timestamps (a trace or an observer): without, the hot
    /// path reads no clock.
    pub(crate) timing: bool,
    /// Codelet tasks ready at submission, in submission order, not yet given to the
    /// policy (see [`RuntimeBuilder::staging`] and docs/runtime.md, "Staging").
    pub(crate) staged: CachePadded<Mutex<Vec<Arc<TaskNode>>>>,
    /// When the oldest staged task was staged, on the trace clock in ns (at least 1); 0
    /// when none is. Written under `staged`'s lock, read without it by the workers after
    /// each task (a line written once per batch of staged tasks).
    pub(crate) staged_since: CachePadded<AtomicU64>,
    /// The staging window; zero: no staging.
    pub(crate) staging: std::time::Duration,
    /// Set by [`Runtime::interrupt`]: tasks not started are not run.
    pub(crate) interrupted: AtomicBool,
    pub(crate) not_run: AtomicU64,
    /// Each worker's trace buffer (empty without a trace): the worker pushes under the
    /// lock, the flusher thread takes stale ones (see the module docs).
    pub(crate) trace_bufs: Vec<CachePadded<Mutex<TaskChunk>>>,
    /// The reserved workers' queues (reserved.rs).
    pub(crate) reserved: crate::reserved::Reserved,
}

impl Shared {
    /// The trace clock, or zero when no one reads task timestamps.
    #[inline]
    pub(crate) fn now(&self) -> Timestamp {
        if self.timing {
            Clock::now()
        } else {
            Timestamp::ZERO
        }
    }

    pub(crate) fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            // Ids are taken only by submitted tasks (acquisitions have none).
            submitted: self.count.submitted(),
            executed: self.executed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            not_run: self.not_run.load(Ordering::Relaxed),
            transfers: self.transfers.load(Ordering::Relaxed),
            transferred_bytes: self.transferred_bytes.load(Ordering::Relaxed),
            prefetches: self.prefetches.load(Ordering::Relaxed),
            evictions: self
                .memories
                .iter()
                .map(|m| m.evictions.load(Ordering::Relaxed))
                .sum(),
            written_back: self
                .memories
                .iter()
                .map(|m| m.written_back.load(Ordering::Relaxed))
                .sum(),
            device_peak_bytes: self
                .memories
                .iter()
                .map(|m| m.peak.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0),
            awake_workers: (self.workers.len() - self.reserved.len())
                .saturating_sub(self.sleep.sleepers()) as u64,
        }
    }

    pub(crate) fn interrupt(&self) {
        if !self.interrupted.swap(true, Ordering::SeqCst) {
            // Every parked worker: each drains what is ready without running it.
            self.sleep.notify(usize::MAX);
        }
    }

    /// The error every call returns once interrupted.
    pub(crate) fn interrupted_error(&self) -> RuntimeError {
        RuntimeError::Interrupted {
            finished: self.executed.load(Ordering::Relaxed) + self.failed.load(Ordering::Relaxed),
            not_run: self.not_run.load(Ordering::Relaxed),
        }
    }

    /// Counts one task not run because of an interruption.
    pub(crate) fn note_not_run(&self) {
        self.not_run.fetch_add(1, Ordering::Relaxed);
    }

    /// The architectures a task of `codelet` on `accesses` can run on, with devices: a
    /// GPU worker (emulated or not) runs only a codelet's GPU implementation, on data
    /// registered for devices; a codelet with a CPU implementation only never runs there.
    pub(crate) fn task_archs(
        &self,
        codelet: &CodeletInner,
        accesses: &crate::task::Accesses,
    ) -> Result<ArchMask, RuntimeError> {
        let mut m = codelet.arch_mask();
        let held = |c: &HandleCore| {
            c.copier
                .is_some_and(|cp| self.backends.first().is_none_or(|b| b.holds(cp)))
        };
        if let Some(core) = accesses.handles().iter().find(|c| !held(c)) {
            if codelet.impls[Arch::Cpu.index()].is_none() {
                return Err(RuntimeError::NotReplicated {
                    codelet: codelet.name.clone(),
                    handle: core.id,
                });
            }
            m = m.and(ArchMask::CPU);
        }
        Ok(m)
    }

    /// Notes with `codelet` its expected durations at `footprint` from the loaded models,
    /// for the policy (once per codelet and footprint).
    #[cold]
    pub(crate) fn note_expected_slow(&self, codelet: &CodeletInner, footprint: u64) {
        let Some(perf) = self.perf.as_ref() else {
            return;
        };
        for arch in Arch::ALL {
            let p = perf.loaded.predict(&codelet.name, arch, footprint);
            codelet.note_expected(arch, footprint, p.map(|p| p.mean_ns));
        }
    }

    /// As `note_expected_slow`, after a look that finds most footprints noted already.
    #[inline]
    pub(crate) fn note_expected(&self, codelet: &CodeletInner, footprint: u64) {
        if !codelet.has_expected(footprint) {
            self.note_expected_slow(codelet, footprint);
        }
    }

    /// This run's measurements, as performance models (none if not recorded).
    pub(crate) fn measured_models(&self) -> Option<crate::perfmodel::PerfModels> {
        let perf = self.perf.as_ref()?;
        let names: Vec<String> = self
            .codelets
            .lock()
            .kept
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let mut m = crate::perfmodel::PerfModels::new();
        for w in &perf.workers {
            for (&(cid, arch, footprint), (_, h)) in &w.lock().0 {
                if h.count == 0 {
                    continue;
                }
                let (Some(name), Some(&arch)) =
                    (names.get(cid as usize), Arch::ALL.get(arch as usize))
                else {
                    continue;
                };
                m.entry(name, arch, footprint).merge(h);
            }
        }
        Some(m)
    }

    /// Merges this run's measurements into the models' directory (once: the tables are
    /// emptied); a failure is logged, since shutdown cannot return it.
    pub(crate) fn save_perf_models(&self) {
        let Some(m) = self.measured_models() else {
            return;
        };
        let perf = self.perf.as_ref().expect("measured_models returned some");
        for w in &perf.workers {
            w.lock().0.clear();
        }
        if m.codelets.is_empty() {
            return;
        }
        if let Err(e) = m.save_merged(&perf.dir) {
            log::warn!("{e}");
        }
    }

    pub(crate) fn codelet_id(&self, codelet: &Arc<CodeletInner>) -> Result<u32, RuntimeError> {
        if let Some(id) = codelet.cached_id(self.epoch) {
            return Ok(id);
        }
        let runnable = Arch::ALL
            .iter()
            .any(|a| self.archs[a.index()] && codelet.impls[a.index()].is_some());
        if !runnable {
            let list = |f: &dyn Fn(Arch) -> bool| {
                let v: Vec<&str> = Arch::ALL
                    .iter()
                    .filter(|a| f(**a))
                    .map(|a| a.name())
                    .collect();
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            return Err(RuntimeError::NoImplementation {
                codelet: codelet.name.clone(),
                implemented: list(&|a| codelet.impls[a.index()].is_some()),
                present: list(&|a| self.archs[a.index()]),
            });
        }
        let mut reg = self.codelets.lock();
        let key = Arc::as_ptr(codelet) as usize;
        let id = match reg.by_ptr.get(&key) {
            Some(&id) => id,
            None => {
                let id = reg.kept.len() as u32;
                reg.by_ptr.insert(key, id);
                reg.kept.push(codelet.clone());
                if !self.task_powers.is_empty() {
                    *codelet.power_w.write() = self
                        .task_powers
                        .get(&codelet.name)
                        .copied()
                        .unwrap_or_default();
                }
                let info = CodeletInfo {
                    id,
                    name: codelet.name.clone(),
                    archs: Arch::ALL
                        .into_iter()
                        .filter(|a| codelet.impls[a.index()].is_some())
                        .collect(),
                };
                if let Some(o) = &self.observer {
                    o.codelet_registered(&info);
                }
                self.sink.send(Chunk::Codelets(vec![info]));
                id
            }
        };
        codelet.cache_id(self.epoch, id);
        Ok(id)
    }
}
