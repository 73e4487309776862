//! The worker loop: pop, run, record, release; spin briefly when idle, then park.
//!
//! Each worker has its own trace buffer (a [`TaskChunk`] with preallocated room, behind a
//! lock that only the trace flusher thread ever contends for): recording a task is a push
//! into it. A full buffer is swapped for an empty recycled one through the trace sink. A
//! worker about to park sends a partial buffer, so that a trace on disk is never more than
//! one idle period behind; since a worker parks only after polling for a while (see
//! [`find_task`]), one that idles for microseconds between tasks does not wake the trace
//! writer each time. The flusher sends buffers whose oldest record is older than the
//! flush period (see runtime.rs, "Trace flushing").
//!
//! Everything a worker runs that is user code (the task, and the drops of its argument,
//! its data references and a panic's payload) runs inside a panic boundary: a panic there
//! fails the task or is reported, and the worker goes on.
//!
//! Tasks ready at their submission are staged by the runtime, not given to the policy at
//! once; the workers take them in batches (see [`Staged`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use taskwatt_scheduler::Local;
use taskwatt_traces::{Arch, Clock, TaskChunk, TaskRecord, TaskStatus, Timestamp, WorkerId};

use crate::context::TaskCtx;
use crate::error::TaskFailure;
use crate::panics;
use crate::pool::NodePool;
use crate::shared::Shared;
use crate::sync::StartLatch;
use crate::task::{Accesses, Body, ReadyTask, TaskNode, DONE_CANCELLED, DONE_FAILED, DONE_OK};

pub(crate) struct WorkerCtx {
    pub(crate) shared: Arc<Shared>,
    /// Told once the worker is pinned and ready, before its first pop.
    pub(crate) started: Arc<StartLatch>,
    pub(crate) idle: IdlePolicy,
    pub(crate) cpu: Option<u32>,
    pub(crate) me: Me,
}

/// Who runs a task: a worker thread, or the submitting thread as the helper worker (see
/// helper.rs).
pub(crate) struct Me {
    pub(crate) id: WorkerId,
    pub(crate) arch: Arch,
    /// The memory node the worker computes on (0: main memory; a GPU's own node later).
    pub(crate) memory_node: usize,
    /// A GPU worker's device state (its stream and BLAS handle on CUDA).
    pub(crate) device: Option<crate::device::WorkerState>,
    /// The helper: what its tasks release goes to the policy as `Origin::External`,
    /// since it leaves when its wait ends and must not keep tasks for itself.
    pub(crate) helper: bool,
    /// A reserved worker (reserved.rs): outside the policy, so its releases are external
    /// and the policy is not told of its tasks.
    pub(crate) reserved: bool,
}

impl Me {
    /// The origin of what this worker's task releases.
    #[inline]
    fn origin<'a>(&self, local: &'a mut Local) -> Option<(usize, &'a mut Local)> {
        if self.helper || self.reserved {
            None
        } else {
            Some((self.id as usize, local))
        }
    }
}

/// Tells the start latch once, at the latest when dropped: `build()` must not wait forever
/// for a worker whose setup panicked (a custom policy's `local`, say).
struct Arrival<'a>(Option<&'a StartLatch>);

impl<'a> Arrival<'a> {
    fn new(latch: &'a StartLatch) -> Arrival<'a> {
        Arrival(Some(latch))
    }

    fn now(&mut self) {
        if let Some(latch) = self.0.take() {
            latch.arrive();
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if let Some(latch) = self.0.take() {
            if std::thread::panicking() {
                latch.fail();
            } else {
                latch.arrive();
            }
        }
    }
}

/// Pins the calling worker thread to its CPU, if it has one. Pinning can fail in a
/// restricted container; the worker still runs, unpinned, and says so (the trace's
/// placement is corrected by `build`).
fn pin(ctx: &WorkerCtx) {
    if let Some(cpu) = ctx.cpu {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu as usize }) {
            log::warn!(
                "worker {} could not be pinned to CPU {cpu} (a cpuset or container that \
                 forbids it?): it runs unpinned, and the trace says so",
                ctx.me.id
            );
            ctx.started.unpinned(ctx.me.id);
        }
    }
}

pub(crate) fn run(ctx: WorkerCtx) {
    let mut arrival = Arrival::new(&ctx.started);
    pin(&ctx);
    let sh = &*ctx.shared;
    let me = ctx.me.id as usize;
    if ctx.me.memory_node != 0 {
        if let Some(b) = sh.backends.get(ctx.me.memory_node - 1) {
            b.enter_thread();
        }
    }
    crate::deadlock::set_worker(sh.epoch);
    let mut local = sh.policy.local(me);
    let buf = sh.trace_bufs.get(me).map(|b| &**b);
    arrival.now();
    let mut done = Done::new();
    if ctx.me.memory_node != 0 && sh.pipeline > 0 {
        // A GPU worker takes tasks ahead for its prefetcher (pipeline.rs), which ends
        // with the scope.
        std::thread::scope(|s| {
            let mut pipe = crate::pipeline::Pipeline::start(s, sh, ctx.me.memory_node, ctx.me.id);
            work(&ctx, &mut local, buf, &mut done, pipe.as_mut());
        });
    } else {
        work(&ctx, &mut local, buf, &mut done, None);
    }
    done.flush(sh);
    flush(sh, buf);
}

/// The loop of [`run`]: pop, run, release; park when there is nothing.
fn work(
    ctx: &WorkerCtx,
    local: &mut Local,
    buf: Option<&parking_lot::Mutex<TaskChunk>>,
    done: &mut Done,
    mut pipe: Option<&mut crate::pipeline::Pipeline>,
) {
    let sh = &*ctx.shared;
    let me = ctx.me.id as usize;
    // A task found by the last look before parking: run it as any other.
    let mut found: Option<ReadyTask> = None;
    let mut staged = Staged {
        buf: Vec::new(),
        now: false,
    };
    loop {
        let next = match found.take() {
            Some(task) => Some(task),
            None => match pipe.as_mut().and_then(|p| p.next()) {
                Some(task) => Some(task),
                None => find_task(sh, me, local, done, &ctx.idle, &mut staged),
            },
        };
        if let Some(task) = next {
            if let Some(p) = pipe.as_mut() {
                p.fill(sh, me, local);
            }
            let end = execute(sh, &ctx.me, task, local, buf, done);
            if done.finished >= Done::BATCH {
                done.flush(sh);
            }
            // Staged tasks reach the policy within the window even while this worker
            // has work (`end` is zero when nobody reads the clock).
            staged.take_due(sh, || if sh.timing { end } else { Clock::now() });
            continue;
        }
        // Park (see sync.rs for why this cannot miss a push). A task staged before
        // `prepare` is taken here; one staged after it finds this worker among the
        // sleepers and wakes it, as a push would.
        let epoch = sh.sleep.prepare();
        if staged.take(sh) > 0 {
            // Back to popping: one of these is for this worker (a policy may miss it
            // once, spuriously), and it woke nobody for it.
            sh.sleep.cancel();
            continue;
        }
        if let Some(task) = sh.policy.pop(me, local) {
            sh.sleep.cancel();
            found = Some(task);
            continue;
        }
        if sh.sleep.is_shutdown() {
            sh.sleep.cancel();
            break;
        }
        // Parking comes only after the idle polling (150 µs by default): sending the
        // records here wakes the writer at most once per idle period that long.
        flush(sh, buf);
        sh.sleep.sleep(epoch);
        // Whatever was staged while this worker slept has waited long enough.
        staged.now = true;
    }
}

/// A reserved worker's thread (reserved.rs): pinned as the others are, then runs what is pinned to it.
pub(crate) fn run_reserved(ctx: WorkerCtx) {
    let mut arrival = Arrival::new(&ctx.started);
    pin(&ctx);
    crate::deadlock::set_worker(ctx.shared.epoch);
    let sh: &Shared = &ctx.shared;
    let buf = sh.trace_bufs.get(ctx.me.id as usize).map(|b| &**b);
    // No policy state: a reserved worker's releases are external, and it is not the
    // policy's to be told of its tasks.
    let mut local = taskwatt_scheduler::Local::new(());
    let mut done = Done::new();
    arrival.now();
    while let Some(task) = sh.reserved.next(ctx.me.id) {
        execute(sh, &ctx.me, task, &mut local, buf, &mut done);
        // Its tasks are few and long: counted at once, so that a wait ends with them.
        done.flush(sh);
    }
    done.flush(sh);
    flush(sh, buf);
}

/// Tasks this worker finished and has not reported to the shared counters yet.
///
/// `wait_all` waits for the shared in-flight count to reach zero, and every worker writing
/// it (and the executed count) for every task makes those lines bounce between cores. A
/// worker therefore reports in batches: every [`Done::BATCH`] tasks, and whenever it runs
/// out of work, before spinning or parking. The last task of a graph is thus reported as
/// soon as its worker finds nothing more to do, so `wait_all` returns no later than it did.
#[derive(Default)]
pub(crate) struct Done {
    pub(crate) finished: usize,
    executed: u64,
    /// The data references of those tasks. Dropping one decrements the reference count of
    /// a handle that the other workers' tasks read too (the same inputs): done in a batch,
    /// those decrements leave the path from one task's end to the next one's start.
    /// Released before the tasks are reported, so that after `wait_all` no task holds a
    /// handle.
    garbage: Vec<Accesses>,
    /// Finished nodes nobody else references, for the node pool (see pool.rs).
    nodes: Vec<Arc<TaskNode>>,
}

impl Done {
    pub(crate) const BATCH: usize = 32;

    /// With room for a batch: growing a vector on a worker's hot path costs a trip into
    /// the allocator, which for a worker's first tasks can mean a system call (and with
    /// it a chance for the scheduler to hand the core to another thread).
    pub(crate) fn new() -> Done {
        Done {
            garbage: Vec::with_capacity(Self::BATCH),
            nodes: Vec::with_capacity(Self::BATCH),
            ..Done::default()
        }
    }

    pub(crate) fn flush(&mut self, sh: &Shared) {
        for accesses in self.garbage.drain(..) {
            // The last reference to a registered value drops it here.
            panics::drop_quietly(accesses, None);
        }
        sh.nodes.give_back(&mut self.nodes);
        if self.executed > 0 {
            sh.executed.fetch_add(self.executed, Ordering::Relaxed);
            self.executed = 0;
        }
        // After `executed`: a `wait_all` that sees zero in flight sees every count.
        sh.tasks_finished(std::mem::take(&mut self.finished));
    }
}

/// Pops; when nothing is there, keeps polling for the idle budget before giving up (the
/// caller then parks). The first miss reports the finished tasks (see [`Done`]).
///
/// Polling comes in two phases. First a busy poll, a few `pause`s (~25 ns each on recent
/// x86) between attempts, so that a task released on another core is seen within ~0.2 µs.
/// Then a polite poll with `sched_yield` between attempts, which lets a thread sharing
/// the core (the submitting thread, most often) run. Parking is what costs: the next task
/// then needs a futex wake-up, whose latency on a VM is tens of µs, so the budget covers
/// the gaps of a fine-grained graph. (crossbeam's `Backoff` doubles its pause between
/// attempts and gives up after ~5 µs: a task released 2 µs into the wait was seen up to
/// 1.6 µs late, and a 6 µs gap cost a wake-up.)
///
/// Each look at the clock also takes the tasks staged for the window or longer (see
/// [`Staged`]).
///
/// At most `max_spinners` workers (half of them, at least one) poll busily at a time; the
/// others go straight to the polite poll (see [`Spinner`]). One busy poller is enough to
/// pick up the next task at once, and more of them take the cores from the submitting
/// thread, which an empty chain of tasks showed: only one task runnable at a time, one
/// worker running it, the other spinning beside the submitter.
#[inline]
fn find_task(
    sh: &Shared,
    me: usize,
    local: &mut Local,
    done: &mut Done,
    idle: &IdlePolicy,
    staged: &mut Staged,
) -> Option<ReadyTask> {
    if let Some(t) = sh.policy.pop(me, local) {
        return Some(t);
    }
    if done.finished > 0 {
        done.flush(sh);
    }
    if std::mem::take(&mut staged.now) && staged.take(sh) > 0 {
        if let Some(t) = sh.policy.pop(me, local) {
            return Some(t);
        }
    }
    if idle.spin.is_zero() && idle.yield_.is_zero() {
        return None;
    }
    let start = std::time::Instant::now();
    let spinner = Spinner::enter(sh);
    let mut round = 0u32;
    let mut yielding = !spinner.busy;
    loop {
        if let Some(t) = sh.policy.pop(me, local) {
            return Some(t);
        }
        round = round.wrapping_add(1);
        // The clock and the shutdown flag every 4 busy attempts (~0.5-1 µs), and after
        // every yield.
        if yielding || round.is_multiple_of(4) {
            if sh.sleep.is_shutdown() {
                return None;
            }
            let e = start.elapsed();
            if e >= idle.spin.saturating_add(idle.yield_) {
                return None;
            }
            yielding = !spinner.busy || e >= idle.spin;
            if staged.take_due(sh, Clock::now) > 0 {
                if let Some(t) = sh.policy.pop(me, local) {
                    return Some(t);
                }
            }
        }
        if yielding {
            std::thread::yield_now();
        } else {
            for _ in 0..4 {
                std::hint::spin_loop();
            }
        }
    }
}

/// A worker's side of staging (see [`RuntimeBuilder::staging`](crate::RuntimeBuilder::staging)
/// and docs/runtime.md, "Staging"). A worker gives the staged tasks to the policy:
/// - after each task and while idle, once the oldest was staged for the window or longer;
/// - at once when it wakes up from parking, and in its last look before parking.
///
/// It swaps its empty vector with the staged one, so that neither side allocates.
pub(crate) struct Staged {
    pub(crate) buf: Vec<Arc<TaskNode>>,
    /// Take the staged tasks at the next miss, without waiting for the window: set on
    /// waking up from parking.
    pub(crate) now: bool,
}

impl Staged {
    /// Gives the staged tasks to the policy; returns how many.
    #[inline]
    pub(crate) fn take(&mut self, sh: &Shared) -> usize {
        sh.take_staged(&mut self.buf, false)
    }

    /// The same, if the oldest was staged for the window or longer at `now()` (read only
    /// when something is staged).
    #[inline]
    pub(crate) fn take_due(&mut self, sh: &Shared, now: impl FnOnce() -> Timestamp) -> usize {
        if !sh.staged_due(now) {
            return 0;
        }
        sh.take_staged(&mut self.buf, false)
    }
}

/// A worker's turn at busy polling, given back when dropped: at most `max_spinners` idle
/// workers poll busily at a time, the others poll politely from the start. Relaxed
/// ordering: the count only steers how a worker waits, never whether it finds a task.
pub(crate) struct Spinner<'a> {
    sh: &'a Shared,
    /// Whether this worker got a turn.
    pub(crate) busy: bool,
}

impl<'a> Spinner<'a> {
    pub(crate) fn enter(sh: &'a Shared) -> Spinner<'a> {
        let busy = sh.spinners.fetch_add(1, Ordering::Relaxed) < sh.max_spinners;
        if !busy {
            sh.spinners.fetch_sub(1, Ordering::Relaxed);
        }
        Spinner { sh, busy }
    }
}

impl Drop for Spinner<'_> {
    fn drop(&mut self) {
        if self.busy {
            self.sh.spinners.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// How long an idle worker polls before parking (see [`find_task`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdlePolicy {
    /// Busy polling.
    pub(crate) spin: std::time::Duration,
    /// Then polling with `sched_yield` between attempts.
    pub(crate) yield_: std::time::Duration,
}

/// Sends the worker's records, if it has any.
pub(crate) fn flush(sh: &Shared, buf: Option<&parking_lot::Mutex<TaskChunk>>) {
    if let Some(buf) = buf {
        let mut b = buf.lock();
        if !b.is_empty() {
            sh.sink.swap_tasks(&mut b);
        }
    }
}

pub(crate) fn execute(
    sh: &Shared,
    ctx: &Me,
    task: ReadyTask,
    local: &mut Local,
    buf: Option<&parking_lot::Mutex<TaskChunk>>,
    done: &mut Done,
) -> Timestamp {
    let node = task.0;
    // Its lines come from the submitter and from the worker that released it: ask for
    // all of them at once (the body is taken, the status and successor list written).
    node.prefetch_for_write();
    // SAFETY: the policy gave this ready node to this worker only (each node is pushed
    // once, and its pop is ordered after the push).
    let Some(body) = (unsafe { node.take_body() }) else {
        // Every node is pushed once and its body taken once (policy contract): a missing
        // body is a runtime bug, not a user error.
        unreachable!("task {} was scheduled twice", node.id);
    };
    // The implementation of the worker's architecture: a GPU worker, emulated or not,
    // never runs a CPU implementation (the policies see the task's architectures).
    let Some(imp) = node.codelet.impls[ctx.arch.index()].as_deref() else {
        unreachable!(
            "policy gave task {} to a worker that cannot run it",
            node.id
        );
    };
    if sh.interrupted.load(Ordering::Relaxed) {
        return skip(sh, ctx, node, body, local, done);
    }
    // COMMUTE tasks of one handle run one at a time: the wait for the lock is not the
    // task's time.
    let commute = if body.accesses.has_grouping() {
        crate::modes::CommuteGuard::take(body.accesses.iter())
    } else {
        crate::modes::CommuteGuard::none()
    };
    // A copy that failed fails the task (its implementation does not run).
    let mut copy_failed = None;
    // On a device, the task's data is pinned there until it ends: nothing evicts it.
    let pins = match ctx.memory_node {
        0 => None,
        n => sh.pin(
            n,
            body.accesses.iter().map(|(c, _)| c),
            crate::device::memory::Pinner::Task,
        ),
    };
    if sh.devices {
        // The data valid on this worker's memory node (copied there if not), before the
        // task's start, so that the copies are not the task's time, and after the commute
        // locks, so that a COMMUTE member copies what the previous member wrote.
        // A copy runs user code (a replicated value's `Clone`): a panic there fails the
        // task, as one in its implementation does, and the worker lives on.
        copy_failed = match panics::catch(|| {
            // SAFETY: the dependencies released this task: it holds the rights it declared.
            unsafe {
                sh.make_valid(
                    ctx.memory_node,
                    body.accesses.iter(),
                    crate::copies::CopyFor {
                        worker: Some(ctx.id),
                        task: Some(node.id),
                        kind: taskwatt_traces::TransferKind::Fetch,
                    },
                )
            }
        }) {
            Ok(copied) => copied.err(),
            Err(m) => Some(format!(
                "copying the task's data to memory node {} panicked (a replicated value's \
                 Clone): {m}",
                ctx.memory_node
            )),
        };
    }
    let cid = node.codelet_id;
    let start = sh.now();
    if let Some(o) = &sh.observer {
        o.task_started(ctx.id, cid, ctx.arch, start);
    }
    let outcome = match copy_failed {
        Some(e) => Err(e),
        None if sh.dry_run => Ok(()),
        None => {
            let tctx = TaskCtx::new(
                &body,
                node.codelet_name(),
                node.id,
                ctx.id,
                ctx.memory_node,
                ctx.device.as_ref(),
            );
            let outcome = panics::catch(|| imp(&tctx));
            // A device task ends when the work it queued has.
            match (outcome, ctx.memory_node) {
                (Ok(()), n) if n != 0 => sh.backends[n - 1].finish_task(ctx.device.as_ref()),
                (outcome, _) => outcome,
            }
        }
    };
    // The argument is dropped now, before successors run, since its drop may be
    // observable; a panic there fails the task. (The data references go in the next batch,
    // see `Done`.)
    let Body {
        accesses,
        arg,
        preds,
    } = body;
    let dropped = panics::catch(move || drop(arg));
    let outcome = match (outcome, dropped) {
        (Err(m), _) => Err(m),
        (Ok(()), Err(m)) => Err(format!("the task's argument panicked when dropped: {m}")),
        (Ok(()), Ok(())) => Ok(()),
    };
    let end = match (&outcome, sh.timing) {
        // A failed task ends when it panicked: the unwinding, and the backtrace the
        // application's hook may print, are not its time (panics.rs).
        (Err(_), true) => {
            let now = sh.now();
            // (One before `start` is another panic's, caught on this thread earlier.)
            panics::take_panic_time()
                .filter(|t| *t >= start)
                .map_or(now, |t| t.min(now))
        }
        _ => sh.now(),
    };
    drop(pins);
    drop(commute);
    if let Some(o) = &sh.observer {
        o.task_ended(ctx.id, cid, ctx.arch, end);
    }
    let status = match outcome {
        Ok(()) => {
            done.executed += 1;
            if let Some(perf) = &sh.perf {
                let key = (cid, ctx.arch.index() as u8, node.footprint);
                perf.workers[ctx.id as usize]
                    .lock()
                    .add(key, end.saturating_sub(start) as f64);
            }
            DONE_OK
        }
        Err(message) => {
            sh.record_failure(
                &node,
                TaskFailure {
                    task: node.id,
                    codelet: node.codelet_name().to_string(),
                    message,
                    worker: ctx.id,
                },
            );
            DONE_FAILED
        }
    };
    if let Some(buf) = buf {
        let mut buf = buf.lock();
        buf.push(
            TaskRecord {
                id: node.id,
                codelet: cid,
                arch: ctx.arch,
                worker: ctx.id,
                status: if status == DONE_OK {
                    TaskStatus::Ok
                } else {
                    TaskStatus::Failed
                },
                priority: node.priority,
                footprint: node.footprint,
                submit: node.submit,
                ready: Timestamp(node.ready.load(Ordering::Relaxed)),
                start,
                end,
                preds_start: 0,
                preds_len: 0,
            },
            &preds,
        );
        if buf.len() >= buf.records.capacity() {
            sh.sink.swap_tasks(&mut buf);
        }
    }
    done.garbage.push(accesses);
    let pushed = sh.complete(&node, status, ctx.origin(local), end);
    done.finished += 1;
    if NodePool::keep(&node) {
        done.nodes.push(node);
    }
    if ctx.reserved {
        // Outside the policy: it takes none of what it released.
        sh.sleep.notify(pushed);
        return end;
    }
    sh.policy.done(ctx.id as usize, local);
    // This worker takes one of the released tasks itself; wake others for the rest.
    sh.sleep.notify(pushed.saturating_sub(1));
    end
}

/// The runtime was interrupted before `node` started: it is not run, not recorded, and its
/// successors are finished with it (see runtime.rs, "Interruption").
fn skip(
    sh: &Shared,
    ctx: &Me,
    node: std::sync::Arc<crate::task::TaskNode>,
    body: Body,
    local: &mut Local,
    done: &mut Done,
) -> Timestamp {
    panics::drop_quietly(body, Some(node.id));
    sh.note_not_run();
    sh.report.lock().nodes.push(node.clone());
    let now = sh.now();
    let pushed = sh.complete(&node, DONE_CANCELLED, ctx.origin(local), now);
    done.finished += 1;
    if NodePool::keep(&node) {
        done.nodes.push(node);
    }
    if ctx.reserved {
        sh.sleep.notify(pushed);
        return now;
    }
    sh.policy.done(ctx.id as usize, local);
    sh.sleep.notify(pushed.saturating_sub(1));
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Runtime;
    use std::time::Duration;

    #[test]
    fn warm_up_wakes_the_parked_workers() {
        // Polling politely for 300 ms, then parking: long enough that the workers are
        // still polling when `warm_up` has returned and the assertion runs.
        let rt = Runtime::builder()
            .workers(2)
            .idle(Duration::ZERO, Duration::from_millis(300))
            .build()
            .unwrap();
        let sleepers = || rt.shared.sleep.sleepers();
        let t0 = std::time::Instant::now();
        while sleepers() < 2 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sleepers(), 2, "both workers park after their idle polling");
        rt.warm_up();
        assert_eq!(sleepers(), 0, "none is parked once warm_up returns");
        // Without parked workers it returns at once.
        rt.warm_up();
    }

    #[test]
    fn at_most_half_the_workers_spin_busily_and_a_turn_is_given_back() {
        // Workers that park at once never take a turn themselves.
        let rt = Runtime::builder()
            .workers(4)
            .idle(Duration::ZERO, Duration::ZERO)
            .build()
            .unwrap();
        let sh = &*rt.shared;
        assert_eq!(sh.max_spinners, 2);
        let a = Spinner::enter(sh);
        let b = Spinner::enter(sh);
        let c = Spinner::enter(sh);
        assert!(a.busy && b.busy && !c.busy, "two turns for four workers");
        assert_eq!(
            sh.spinners.load(Ordering::Relaxed),
            2,
            "a refused turn is not counted"
        );
        drop(c);
        assert_eq!(sh.spinners.load(Ordering::Relaxed), 2);
        drop(a);
        let d = Spinner::enter(sh);
        assert!(d.busy, "a turn given back goes to the next idle worker");
        drop((b, d));
        assert_eq!(sh.spinners.load(Ordering::Relaxed), 0);
        let one = Runtime::builder()
            .workers(1)
            .idle(Duration::ZERO, Duration::ZERO)
            .build()
            .unwrap();
        assert_eq!(
            one.shared.max_spinners, 1,
            "a single worker may always spin"
        );
    }
}
