//! loom models of the lock-free protocols, driving the real `Sleep`, `Waiters` and
//! `TaskNode` (compiled against loom's primitives) through every interleaving loom reaches.
//!
//! A lost wake-up shows as a loom deadlock (a thread parked on a condition variable that
//! nobody will notify); a data race on a task's data as a loom causality violation. The
//! runtime's glue around the nodes (`Shared::release`, `Runtime::release_guard` in
//! runtime.rs) needs a whole `Shared` (policy, trace sink, codelet registry), which only
//! `RuntimeBuilder::build` makes, and it spawns OS threads: its few lines on `pending` are
//! copied below ([`release`], [`release_guard`]) and must be kept in step with runtime.rs.
//! The dependency inference itself (`runtime::link`) is the real one.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p taskwatt-runtime --release --lib loom`

use std::sync::atomic::AtomicUsize as Count;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::thread;
use taskwatt_traces::Timestamp;

use super::{AtomicBool, AtomicUsize, Mutex};
use crate::codelet::Codelet;
use crate::handle::{Access, HandleCore};
use crate::submit::link;
use crate::sync::{Sleep, TaskCount, Waiters};
use crate::task::{Accesses, Body, Kind, Preds, TaskNode, DONE_FAILED, DONE_OK};

/// Runs `f` under loom with at most `preemptions` preemptions per execution (`None`:
/// unbounded, every interleaving). Fails if loom explored a single execution: the model would then check nothing.
fn check(preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if preemptions.is_some() {
        b.preemption_bound = preemptions;
    }
    let executions = Arc::new(Count::new(0));
    let counted = executions.clone();
    b.check(move || {
        counted.fetch_add(1, Relaxed);
        f();
    });
    let n = executions.load(Relaxed);
    eprintln!("loom explored {n} executions");
    assert!(n > 1, "the model has no interleaving to explore");
}

// ---------------------------------------------------------------------------------------
// Sleep: idle workers park without missing a push (sync.rs, "Idle workers").

/// A scheduling policy reduced to a count of ready tasks: Release on push and Acquire on
/// pop, the weakest orderings a policy's queue gives.
fn pop(queue: &AtomicUsize) -> bool {
    queue
        .fetch_update(Acquire, Acquire, |n| n.checked_sub(1))
        .is_ok()
}

fn push(queue: &AtomicUsize, sleep: &Sleep) {
    queue.fetch_add(1, Release);
    sleep.notify(1);
}

/// worker.rs `run`, from an empty `find_task` to parking, until it got one task or the
/// runtime shuts down. Returns whether it got a task. With a `staged` list, tasks staged
/// with a window that no task reaches in the model: taken only at a wake-up and in the
/// last look before parking.
fn worker_until_one_task(
    sleep: &Sleep,
    queue: &AtomicUsize,
    staged: Option<&Mutex<usize>>,
) -> bool {
    let mut woken = false;
    loop {
        if pop(queue) {
            return true;
        }
        if let Some(st) = staged {
            if std::mem::take(&mut woken) && take_staged(st, queue, sleep) > 0 {
                continue;
            }
        }
        let epoch = sleep.prepare();
        if let Some(st) = staged {
            if take_staged(st, queue, sleep) > 0 {
                sleep.cancel();
                continue;
            }
        }
        if pop(queue) {
            sleep.cancel();
            return true;
        }
        if sleep.is_shutdown() {
            sleep.cancel();
            return false;
        }
        sleep.sleep(epoch);
        woken = true;
    }
}

#[test]
fn loom_sleep_push_wakes_the_parking_worker() {
    check(None, || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let queue = Arc::new(AtomicUsize::new(0));
        let (s, q) = (sleep.clone(), queue.clone());
        let worker = thread::spawn(move || worker_until_one_task(&s, &q, None));
        push(&queue, &sleep);
        assert!(worker.join().unwrap(), "the worker must get the task");
    });
}

#[test]
fn loom_sleep_two_pushes_wake_two_workers() {
    // notify(1) with two sleepers takes the notify_one path. Three threads around a
    // mutex and a condition variable: unbounded, loom runs for more than 10 minutes; with
    // 3 preemptions it explores ~17,000 executions in about a second.
    check(Some(3), || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let queue = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (s, q) = (sleep.clone(), queue.clone());
                thread::spawn(move || worker_until_one_task(&s, &q, None))
            })
            .collect();
        push(&queue, &sleep);
        push(&queue, &sleep);
        for w in workers {
            assert!(w.join().unwrap(), "each worker must get one task");
        }
    });
}

#[test]
fn loom_sleep_shutdown_wakes_the_parking_worker() {
    check(None, || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let queue = Arc::new(AtomicUsize::new(0));
        let (s, q) = (sleep.clone(), queue.clone());
        let worker = thread::spawn(move || worker_until_one_task(&s, &q, None));
        sleep.shutdown();
        assert!(!worker.join().unwrap(), "no task was pushed");
    });
}

// ---------------------------------------------------------------------------------------
// Staging: a task staged at submission reaches a worker, parked or not (runtime.rs
// `Shared::stage` and `Shared::take_staged`, worker.rs `run` and `find_task`; their lines
// on the staged list and `Sleep` are copied here and must be kept in step).

/// runtime.rs `Shared::stage`: each staged task wakes one parked worker.
fn stage(staged: &Mutex<usize>, sleep: &Sleep) {
    *staged.lock() += 1;
    sleep.notify(1);
}

/// runtime.rs `Shared::take_staged` from a worker: the staged tasks go to the policy, and
/// parked workers are woken for all but one.
fn take_staged(staged: &Mutex<usize>, queue: &AtomicUsize, sleep: &Sleep) -> usize {
    let n = std::mem::take(&mut *staged.lock());
    queue.fetch_add(n, Release);
    sleep.notify(n.saturating_sub(1));
    n
}

#[test]
fn loom_staging_a_staged_task_reaches_the_parking_worker() {
    check(None, || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let staged = Arc::new(Mutex::new(0usize));
        let queue = Arc::new(AtomicUsize::new(0));
        let (s, st, q) = (sleep.clone(), staged.clone(), queue.clone());
        let worker = thread::spawn(move || worker_until_one_task(&s, &q, Some(&st)));
        stage(&staged, &sleep);
        assert!(
            worker.join().unwrap(),
            "the worker must get the staged task"
        );
    });
}

#[test]
fn loom_staging_two_staged_tasks_reach_two_workers() {
    // Whoever takes both pushes them and wakes the other worker for one. Bounded as
    // `loom_sleep_two_pushes_wake_two_workers`.
    check(Some(3), || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let staged = Arc::new(Mutex::new(0usize));
        let queue = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (s, st, q) = (sleep.clone(), staged.clone(), queue.clone());
                thread::spawn(move || worker_until_one_task(&s, &q, Some(&st)))
            })
            .collect();
        stage(&staged, &sleep);
        stage(&staged, &sleep);
        for w in workers {
            assert!(w.join().unwrap(), "each worker must get one task");
        }
    });
}

// ---------------------------------------------------------------------------------------
// Waiters: a waiting thread sees the completion (sync.rs, "Waiting threads").

#[test]
fn loom_waiters_completion_wakes_the_waiter() {
    check(None, || {
        let waiters = Arc::new(Waiters::new());
        // Stands for `in_flight` (wait_all) or a node's `status` (wait), both SeqCst.
        let done = Arc::new(AtomicBool::new(false));
        let (w, d) = (waiters.clone(), done.clone());
        let waiter = thread::spawn(move || w.wait_until(|| d.load(SeqCst)));
        done.store(true, SeqCst);
        let _ = waiters.notify_all();
        waiter.join().unwrap();
    });
}

// The helper (the submitting thread as a worker) parks in `Sleep`, where a push wakes it,
// and is woken there by the completion its wait is for (helper.rs, `Helper::find`; its
// parking is copied here: keep it in step).

#[test]
fn loom_a_parked_helper_is_woken_by_the_completion_it_waits_for() {
    check(None, || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let waiters = Arc::new(Waiters::new());
        let done = Arc::new(AtomicBool::new(false));
        let (s, w, d) = (sleep.clone(), waiters.clone(), done.clone());
        let completer = thread::spawn(move || {
            d.store(true, SeqCst);
            // `Shared::notify_waiters`.
            if w.notify_all() {
                s.wake_all();
            }
        });
        let epoch = sleep.prepare();
        waiters.helper_parked.store(true, SeqCst);
        super::fence(SeqCst);
        if done.load(SeqCst) {
            sleep.cancel();
        } else {
            sleep.sleep(epoch);
        }
        waiters.helper_parked.store(false, SeqCst);
        completer.join().unwrap();
    });
}

#[test]
fn loom_a_parked_helper_is_woken_by_the_last_finish_of_wait_all() {
    check(None, || {
        let sleep = Arc::new(Sleep::with_wake_all(false));
        let waiters = Arc::new(Waiters::new());
        let count = Arc::new(TaskCount::new());
        count.submit();
        let (s, w, c) = (sleep.clone(), waiters.clone(), count.clone());
        let worker = thread::spawn(move || {
            // `Shared::tasks_finished`.
            if c.finish(1, &w) {
                s.wake_all();
            }
        });
        let epoch = sleep.prepare();
        waiters.helper_parked.store(true, SeqCst);
        super::fence(SeqCst);
        if count.all_done() {
            sleep.cancel();
        } else {
            sleep.sleep(epoch);
        }
        waiters.helper_parked.store(false, SeqCst);
        assert!(count.all_done());
        worker.join().unwrap();
    });
}

// ---------------------------------------------------------------------------------------
// TaskCount: `wait_all` returns once every submitted task finished (sync.rs, "Counting
// tasks for `wait_all`").

#[test]
fn loom_task_count_the_last_finisher_wakes_wait_all() {
    check(None, || {
        let waiters = Arc::new(Waiters::new());
        let count = Arc::new(TaskCount::new());
        // Two tasks submitted before `wait_all`, finished by two workers in any order.
        count.submit();
        count.submit();
        let finish = |n| {
            let (w, c) = (waiters.clone(), count.clone());
            thread::spawn(move || c.finish(n, &w))
        };
        let workers = [finish(1), finish(1)];
        waiters.wait_until(|| count.all_done());
        // Returning early would be the bug: both finishes must be counted by now.
        assert!(count.all_done());
        for w in workers {
            w.join().unwrap();
        }
    });
}

#[test]
fn loom_task_count_a_concurrent_submission_is_waited_for() {
    check(None, || {
        let waiters = Arc::new(Waiters::new());
        let count = Arc::new(TaskCount::new());
        let finished = Arc::new(AtomicBool::new(false));
        // Another thread submits a task and a worker finishes it; `wait_all` started
        // after the submission must not return before the finish.
        let (w, c, f) = (waiters.clone(), count.clone(), finished.clone());
        let submitted = Arc::new(AtomicBool::new(false));
        let s = submitted.clone();
        let worker = thread::spawn(move || {
            c.submit();
            s.store(true, SeqCst);
            f.store(true, SeqCst);
            let _ = c.finish(1, &w);
        });
        if submitted.load(SeqCst) {
            waiters.wait_until(|| count.all_done());
            assert!(
                finished.load(SeqCst),
                "wait_all returned before the task finished"
            );
        }
        worker.join().unwrap();
    });
}

// ---------------------------------------------------------------------------------------
// TaskNode: successor lists and dependency counters (task.rs, "A node's life").

fn node(id: u64) -> Arc<TaskNode> {
    Arc::new(TaskNode::new(
        id,
        Kind::Codelet,
        Codelet::new("model").inner,
        0,
        0,
        0,
        Timestamp::ZERO,
        None,
    ))
}

/// runtime.rs `Shared::release`: finishes `node` and returns the successors it made ready.
fn release(node: &TaskNode, status: u8) -> Vec<Arc<TaskNode>> {
    let mut ready = Vec::new();
    for s in node.finish(status) {
        if status != DONE_OK {
            s.cancelled.store(true, Relaxed);
        }
        if s.pending.fetch_sub(1, AcqRel) == 1 {
            ready.push(s);
        }
    }
    ready
}

/// runtime.rs `Runtime::release_guard`: whether dropping the guard made `node` ready.
/// `waits`: whether an edge to `node` was added (without one, a plain store).
fn release_guard(node: &TaskNode, waits: bool) -> bool {
    if waits {
        node.pending.fetch_sub(1, AcqRel) == 1
    } else {
        node.pending.store(0, Relaxed);
        true
    }
}

/// Stands for `HandleCore`'s data (a task's output): an `UnsafeCell` that the dependency
/// protocol makes safe to share, here loom's, which reports any access not ordered by it.
struct Data(UnsafeCell<u64>);

// SAFETY: as for `HandleCore`: the tasks of a model access the cell only when the
// dependencies allow it, which is what loom checks.
unsafe impl Sync for Data {}

impl Data {
    fn new() -> Data {
        Data(UnsafeCell::new(0))
    }
}

impl std::ops::Deref for Data {
    type Target = UnsafeCell<u64>;
    fn deref(&self) -> &UnsafeCell<u64> {
        &self.0
    }
}

/// What a successor may rely on when it becomes ready, checked by whoever readied it.
struct Readied {
    times: Count,
}

impl Readied {
    fn new() -> Arc<Readied> {
        Arc::new(Readied {
            times: Count::new(0),
        })
    }

    fn run(&self, succ: &TaskNode, preds: &[&TaskNode], out: &[&Data]) {
        assert_eq!(
            self.times.fetch_add(1, Relaxed),
            0,
            "successor made ready twice"
        );
        for p in preds {
            assert!(
                p.is_finished(),
                "successor ready before its predecessor finished"
            );
        }
        // SAFETY (model): `succ` is ready and taken by this thread only; loom reports a
        // race with `set_body` if the counter does not order them.
        let body = unsafe { succ.take_body() }.expect("body published before the guard release");
        assert_eq!(body.preds.len(), preds.len(), "every predecessor recorded");
        for cell in out {
            // SAFETY (model): loom checks this read; a causality violation means the
            // predecessor's write is not ordered before it.
            assert_eq!(cell.with(|p| unsafe { *p }), 42);
        }
    }
}

/// A predecessor's body: writes its output, then finishes.
fn run_pred(pred: &TaskNode, out: &Data, status: u8) -> Vec<Arc<TaskNode>> {
    // SAFETY (model): only this thread writes `out`, before `finish`.
    out.with_mut(|p| unsafe { *p = 42 });
    release(pred, status)
}

/// Submits `succ` after `preds`, as `Runtime::submit` does for explicit dependencies.
fn submit_after(succ: &Arc<TaskNode>, preds: &[&Arc<TaskNode>]) -> bool {
    let mut ids = Preds::new();
    let mut waits = false;
    for p in preds {
        waits |= p.add_successor(succ, &mut ids);
    }
    // SAFETY (model): the guard is held until just below.
    unsafe {
        succ.set_body(Body {
            accesses: Accesses::new(),
            preds: ids,
            arg: crate::inline::Arg::NONE,
        })
    };
    release_guard(succ, waits)
}

/// One predecessor finishing with `status` on a worker while its successor is submitted:
/// the successor becomes ready exactly once, whichever side releases it. Returns it.
fn race_one_predecessor(status: u8) -> Arc<TaskNode> {
    let (pred, succ) = (node(0), node(1));
    let out = Arc::new(Data::new());
    let readied = Readied::new();
    let worker = {
        let (pred, out, readied) = (pred.clone(), out.clone(), readied.clone());
        thread::spawn(move || {
            for s in run_pred(&pred, &out, status) {
                readied.run(&s, &[&pred], &[&out]);
            }
        })
    };
    if submit_after(&succ, &[&pred]) {
        readied.run(&succ, &[&pred], &[&out]);
    }
    worker.join().unwrap();
    assert_eq!(readied.times.load(Relaxed), 1, "ready exactly once");
    succ
}

#[test]
fn loom_task_successor_added_while_predecessor_finishes() {
    check(None, || {
        let succ = race_one_predecessor(DONE_OK);
        assert!(
            !succ.cancelled.load(Relaxed),
            "a successful predecessor cancels nothing"
        );
    });
}

#[test]
fn loom_task_two_predecessors_finish_while_successor_is_submitted() {
    check(None, || {
        let (p0, p1, succ) = (node(0), node(1), node(2));
        let out: [Arc<Data>; 2] = [Arc::new(Data::new()), Arc::new(Data::new())];
        let readied = Readied::new();
        let workers: Vec<_> = [&p0, &p1]
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let (p, p0, p1, out, readied) = (
                    p.clone(),
                    p0.clone(),
                    p1.clone(),
                    out.clone(),
                    readied.clone(),
                );
                thread::spawn(move || {
                    for s in run_pred(&p, &out[i], DONE_OK) {
                        readied.run(&s, &[&p0, &p1], &[&out[0], &out[1]]);
                    }
                })
            })
            .collect();
        if submit_after(&succ, &[&p0, &p1]) {
            readied.run(&succ, &[&p0, &p1], &[&out[0], &out[1]]);
        }
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(readied.times.load(Relaxed), 1, "ready exactly once");
    });
}

#[test]
fn loom_task_failed_predecessor_cancels_its_successor() {
    check(None, || {
        let succ = race_one_predecessor(DONE_FAILED);
        assert!(
            succ.cancelled.load(Relaxed),
            "cancelled whichever way it was released"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Handle data: tasks ordered by `runtime::link` never access a handle's data concurrently.

/// A task of the model: its node, its access to the handle, and the tasks it readies run
/// on the same thread (as with a worker-local push popped by the same worker).
fn run_task(node: &Arc<TaskNode>, tasks: &[(Arc<TaskNode>, Access)], data: &Data, ran: &Count) {
    // SAFETY (model): `node` is ready and run by this thread only.
    let body = unsafe { node.take_body() }.expect("body published before the guard release");
    let (_, mode) = tasks.iter().find(|(n, _)| Arc::ptr_eq(n, node)).unwrap();
    // loom checks these accesses: a write concurrent with any other access, or one not
    // ordered before a later read, is reported.
    // SAFETY (model): these accesses are what loom checks.
    if mode.writes() {
        data.with_mut(|p| unsafe { *p += 1 });
    } else {
        data.with(|p| unsafe { *p });
    }
    drop(body);
    ran.fetch_add(1, Relaxed);
    for s in release(node, DONE_OK) {
        run_task(&s, tasks, data, ran);
    }
}

#[test]
fn loom_handle_writer_readers_writer_never_overlap() {
    // W0 is submitted first and runs on a worker while R1, R2 and W3 are submitted on the
    // same handle: R1 and R2 depend on W0, W3 on both readers.
    check(None, || {
        let core = HandleCore::new(0u64, 8, None);
        let data = Arc::new(Data::new());
        let ran = Arc::new(Count::new(0));
        let modes = [Access::W, Access::R, Access::R, Access::RW];
        let tasks: Arc<Vec<(Arc<TaskNode>, Access)>> = Arc::new(
            modes
                .iter()
                .enumerate()
                .map(|(i, m)| (node(i as u64), *m))
                .collect(),
        );
        let submit = |i: usize| {
            let (n, mode) = &tasks[i];
            let mut preds = Preds::new();
            let waits = link(&core, *mode, n, &mut preds);
            // SAFETY (model): the guard is held until just below.
            unsafe {
                n.set_body(Body {
                    accesses: Accesses::new(),
                    preds,
                    arg: crate::inline::Arg::NONE,
                })
            };
            release_guard(n, waits)
        };
        assert!(submit(0), "W0 has no predecessor");
        let worker = {
            let (tasks, data, ran) = (tasks.clone(), data.clone(), ran.clone());
            thread::spawn(move || run_task(&tasks[0].0, &tasks, &data, &ran))
        };
        for i in 1..4 {
            if submit(i) {
                run_task(&tasks[i].0, &tasks, &data, &ran);
            }
        }
        worker.join().unwrap();
        assert_eq!(ran.load(Relaxed), 4, "every task ran once");
        // SAFETY (model): every task has finished.
        assert_eq!(data.with(|p| unsafe { *p }), 2, "both writers ran");
    });
}

// ---------------------------------------------------------------------------------------
// RawSpin: the lock of a handle's dependency state and of a node's successor list
// (sync.rs). The runtime's other models use loom's own mutex in its place.

/// A counter guarded by a `RawSpin`.
struct Guarded {
    lock: crate::sync::RawSpin,
    value: UnsafeCell<u32>,
}

// SAFETY (model): `value` is accessed only with `lock` held, which is what loom checks.
unsafe impl Sync for Guarded {}

impl Guarded {
    fn add_one(&self) {
        self.lock.acquire();
        // SAFETY (model): the lock is held; loom reports the access if it is not ordered
        // after the previous holder's.
        self.value.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: this thread holds the lock.
        unsafe { self.lock.release() };
    }
}

/// Another thread and the main one each add one under the lock: neither section overlaps
/// the other (loom reports a causality violation), and neither is lost.
#[test]
fn loom_spin_lock_orders_its_sections() {
    check(Some(2), || {
        let g = Arc::new(Guarded {
            lock: crate::sync::RawSpin::new(),
            value: UnsafeCell::new(0),
        });
        let other = {
            let g = g.clone();
            thread::spawn(move || g.add_one())
        };
        g.add_one();
        other.join().unwrap();
        assert!(
            g.lock.try_acquire(),
            "the lock is free once both holders left"
        );
        // SAFETY (model): the lock is held and the other thread has ended.
        assert_eq!(g.value.with(|p| unsafe { *p }), 2);
    });
}
