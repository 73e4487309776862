//! Completion: a finished node releases its successors, readies those whose last
//! predecessor it was (to the policy, a granted acquisition or a cancellation), and
//! counts failures and cancellations for the next `wait_all`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use taskwatt_scheduler::{Local, Origin};
use taskwatt_traces::Timestamp;

use crate::error::TaskFailure;
use crate::shared::Shared;
use crate::task::{Kind, ReadyTask, TaskNode, DONE_CANCELLED, DONE_OK};

pub(crate) enum Readied {
    Pushed,
    Granted,
    /// Given to its reserved worker (reserved.rs), which wakes itself.
    Reserved,
    Cancelled(Arc<TaskNode>),
    /// A deferred acquisition released before its grant: it ends now.
    Released(Arc<TaskNode>),
}

impl Shared {
    /// Marks `node` finished with `status` at `now` and releases its successors (their
    /// ready time is `now`: a worker passes the end time it just recorded, so that
    /// releasing costs no clock read). Ready codelet tasks go to the policy with `origin`;
    /// the return value is how many, so that the caller can wake workers. Cancelled
    /// successors are finished here too, iteratively.
    pub(crate) fn complete(
        &self,
        node: &TaskNode,
        status: u8,
        mut local: Option<(usize, &mut Local)>,
        now: Timestamp,
    ) -> usize {
        let mut pushed = 0;
        let mut cancelled: Vec<Arc<TaskNode>> = Vec::new();
        let mut released: Vec<Arc<TaskNode>> = Vec::new();
        self.release(
            node,
            status,
            &mut local,
            &mut pushed,
            (&mut cancelled, &mut released),
            now,
        );
        loop {
            if let Some(c) = cancelled.pop() {
                self.note_cancelled(&c);
                self.release(
                    &c,
                    DONE_CANCELLED,
                    &mut local,
                    &mut pushed,
                    (&mut cancelled, &mut released),
                    now,
                );
                self.task_finished();
            } else if let Some(r) = released.pop() {
                // A deferred acquisition released before its grant ends at its grant.
                self.release(
                    &r,
                    DONE_OK,
                    &mut local,
                    &mut pushed,
                    (&mut cancelled, &mut released),
                    now,
                );
            } else {
                break;
            }
        }
        pushed
    }

    pub(crate) fn release(
        &self,
        node: &TaskNode,
        status: u8,
        local: &mut Option<(usize, &mut Local)>,
        pushed: &mut usize,
        (cancelled, released): (&mut Vec<Arc<TaskNode>>, &mut Vec<Arc<TaskNode>>),
        now: Timestamp,
    ) {
        let successors = node.finish(status);
        if node.has_waiter.load(Ordering::SeqCst) {
            self.notify_waiters();
        }
        if successors.len() > 1 {
            for s in &successors {
                s.prefetch_pending();
            }
        }
        for s in successors {
            if status != DONE_OK {
                s.cancelled.store(true, Ordering::Relaxed);
            }
            // AcqRel: the last decrement must see every predecessor's writes (Acquire)
            // and publish this one's (Release) to whoever runs the successor.
            if s.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                match self.ready(s, local, now) {
                    Readied::Pushed => *pushed += 1,
                    Readied::Cancelled(c) => cancelled.push(c),
                    Readied::Released(r) => released.push(r),
                    Readied::Granted | Readied::Reserved => {}
                }
            }
        }
    }

    /// `node` has no pending dependency left since `now`.
    pub(crate) fn ready(
        &self,
        node: Arc<TaskNode>,
        local: &mut Option<(usize, &mut Local)>,
        now: Timestamp,
    ) -> Readied {
        if self.timing {
            // A predecessor may have ended (and stamped `now`) while this node was being
            // submitted: it was ready no earlier than its submission.
            node.ready
                .store(now.max(node.submit).as_ns(), Ordering::Relaxed);
        }
        match node.kind {
            Kind::Acquire => {
                node.granted.store(true, Ordering::SeqCst);
                if node.abandoned.swap(false, Ordering::SeqCst) {
                    return Readied::Released(node);
                }
                if node.has_waiter.load(Ordering::SeqCst) {
                    self.notify_waiters();
                }
                Readied::Granted
            }
            Kind::Codelet if node.cancelled.load(Ordering::Relaxed) => Readied::Cancelled(node),
            Kind::Codelet => {
                // A task pinned to a reserved worker never reaches the policy.
                if let Some(i) = node.reserved_index() {
                    self.reserved.push(i, node);
                    return Readied::Reserved;
                }
                let origin = match local {
                    Some((id, l)) => Origin::Worker { id: *id, local: l },
                    None => Origin::External,
                };
                self.policy.push(ReadyTask(node), origin);
                Readied::Pushed
            }
        }
    }

    /// One codelet task is done for good (ran, failed or was cancelled).
    pub(crate) fn task_finished(&self) {
        self.tasks_finished(1);
    }

    /// `n` codelet tasks are done for good. Workers count their own tasks and report them
    /// in batches (see worker.rs), so that the shared counter is not written by every core
    /// for every task.
    pub(crate) fn tasks_finished(&self, n: usize) {
        if self.count.finish(n as u64, &self.waiters) {
            self.sleep.wake_all();
        }
    }

    /// Wakes the threads waiting on tasks (and the helper, parked among the workers).
    pub(crate) fn notify_waiters(&self) {
        if self.waiters.notify_all() {
            self.sleep.wake_all();
        }
    }

    pub(crate) fn record_failure(&self, node: &Arc<TaskNode>, failure: TaskFailure) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let _ = self.first_failure.set(failure.clone());
        let mut r = self.report.lock();
        r.failures.push(failure);
        r.nodes.push(node.clone());
    }

    pub(crate) fn note_cancelled(&self, node: &Arc<TaskNode>) {
        // SAFETY: `node` was ready (its dependency count reached zero) and this thread is
        // the one cancelling it: nobody else takes its body.
        let body = unsafe { node.take_body() };
        // The argument's or a handle's drop may panic: not on this thread's watch.
        crate::panics::drop_quietly(body, Some(node.id));
        if self.interrupted.load(Ordering::Relaxed) {
            // Not run because of the interruption, not because of a failure.
            self.note_not_run();
            self.report.lock().nodes.push(node.clone());
            return;
        }
        self.cancelled.fetch_add(1, Ordering::Relaxed);
        let mut r = self.report.lock();
        r.cancelled += 1;
        r.nodes.push(node.clone());
    }
}
