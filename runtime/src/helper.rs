//! The submitting thread as a worker ([`RuntimeBuilder::submitter_works`]).
//!
//! A runtime of `n` CPU workers with this option starts `n - 1` worker threads: the last
//! CPU worker is the *helper*, run by whichever thread waits on the runtime (`wait_all`,
//! a task's `wait`, an acquisition), as TBB's and Taskflow's calling threads do. It pops
//! tasks as a worker does, until what it waits for holds; it records its tasks in the
//! trace as its own worker, and its tasks count in the energy attribution as any
//! worker's. What the helper must never do is keep a task that only it may run: it
//! leaves when its wait ends, and may not wait again for a long time. So
//! - a policy is told which worker is the helper ([`WorkerDesc::helper`]) and never gives
//!   a task to it alone (dmda lets it take the next task of the most loaded queue);
//! - what its tasks release goes to the policy as [`Origin::External`], where any worker
//!   takes it, not to a deque of its own;
//! - before it leaves, it reports its finished tasks and sends its trace records.
//!
//! While idle it polls as a worker does (see worker.rs, `find_task`), then parks among
//! the workers in [`Sleep`](crate::sync::Sleep), where a push wakes it, with
//! [`Waiters::helper_parked`](crate::sync::Waiters) set, so that the completion its wait
//! is for wakes it too. Only one thread helps at a time: a second waiting thread waits
//! as it would without the option.
//!
//! [`RuntimeBuilder::submitter_works`]: crate::RuntimeBuilder::submitter_works
//! [`WorkerDesc::helper`]: taskwatt_scheduler::WorkerDesc::helper
//! [`Origin::External`]: taskwatt_scheduler::Origin::External

use std::sync::atomic::Ordering;

use crate::loom_shim::fence;

use taskwatt_scheduler::Local;
use taskwatt_traces::{Arch, Clock, WorkerId};

use crate::shared::Shared;
use crate::task::ReadyTask;
use crate::worker::{self, Done, IdlePolicy, Me, Spinner, Staged};

/// The helper worker's state, taken by one waiting thread at a time.
pub(crate) struct Helper {
    id: WorkerId,
    idle: IdlePolicy,
    state: parking_lot::Mutex<Option<State>>,
}

struct State {
    local: Local,
    done: Done,
    staged: Staged,
    me: Me,
}

/// How a wait checks its condition while helping.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// After every task: the condition can hold while tasks remain (one task's wait, an
    /// acquisition).
    EachTask,
    /// Only when nothing is left to run: `wait_all`, whose condition needs the helper's
    /// own finished tasks reported (which it does when it runs out of work).
    WhenIdle,
}

impl Helper {
    pub(crate) fn new(id: WorkerId, idle: IdlePolicy) -> Helper {
        Helper {
            id,
            idle,
            state: parking_lot::Mutex::new(None),
        }
    }

    /// Runs tasks as the helper until `done()` holds. Returns `false`, having run
    /// nothing, when another thread helps already (the caller then waits as usual).
    pub(crate) fn help(&self, sh: &Shared, check: Check, done: &dyn Fn() -> bool) -> bool {
        let Some(mut guard) = self.state.try_lock() else {
            return false;
        };
        let id = self.id;
        let st = guard.get_or_insert_with(|| State {
            local: sh.policy.local(id as usize),
            done: Done::new(),
            staged: Staged {
                buf: Vec::new(),
                now: false,
            },
            me: Me {
                id,
                arch: Arch::Cpu,
                memory_node: 0,
                device: None,
                helper: true,
                reserved: false,
            },
        });
        // Inside the loop this thread runs tasks: a task that waits on the runtime is
        // refused as it is on a worker thread.
        let _in_tasks = crate::deadlock::WorkerMark::enter(sh.epoch);
        let buf = sh.trace_bufs.get(id as usize).map(|b| &**b);
        loop {
            if check == Check::EachTask && done() {
                break;
            }
            let task = match sh.policy.pop(id as usize, &mut st.local) {
                Some(t) => Some(t),
                None => {
                    st.done.flush(sh);
                    if done() {
                        break;
                    }
                    self.find(sh, st, done)
                }
            };
            match task {
                Some(task) => {
                    let end = worker::execute(sh, &st.me, task, &mut st.local, buf, &mut st.done);
                    if st.done.finished >= Done::BATCH {
                        st.done.flush(sh);
                    }
                    st.staged
                        .take_due(sh, || if sh.timing { end } else { Clock::now() });
                }
                None if done() => break,
                // Stopping (a failed start): the caller waits as usual.
                None if sh.sleep.is_shutdown() => break,
                None => {}
            }
        }
        st.done.flush(sh);
        worker::flush(sh, buf);
        true
    }

    /// Polls for a task for the idle budget, then parks until a push or `done()`.
    /// `None`: `done()` may hold (the caller checks).
    fn find(&self, sh: &Shared, st: &mut State, done: &dyn Fn() -> bool) -> Option<ReadyTask> {
        let id = self.id as usize;
        if st.staged.take(sh) > 0 {
            if let Some(t) = sh.policy.pop(id, &mut st.local) {
                return Some(t);
            }
        }
        let start = std::time::Instant::now();
        let spinner = Spinner::enter(sh);
        let mut round = 0u32;
        loop {
            if let Some(t) = sh.policy.pop(id, &mut st.local) {
                return Some(t);
            }
            round = round.wrapping_add(1);
            let e = start.elapsed();
            let yielding = !spinner.busy || e >= self.idle.spin;
            if yielding || round.is_multiple_of(4) {
                if done() {
                    return None;
                }
                if e >= self.idle.spin.saturating_add(self.idle.yield_) {
                    break;
                }
                if st.staged.take_due(sh, Clock::now) > 0 {
                    continue;
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
        drop(spinner);
        // Park among the workers (see the module docs): a push wakes it as it wakes them,
        // and a completer that sees `helper_parked` wakes every sleeper.
        let epoch = sh.sleep.prepare();
        sh.waiters.helper_parked.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let found = if done() {
            None
        } else if st.staged.take(sh) > 0 {
            sh.policy.pop(id, &mut st.local)
        } else {
            match sh.policy.pop(id, &mut st.local) {
                Some(t) => Some(t),
                None => {
                    sh.sleep.sleep(epoch);
                    sh.waiters.helper_parked.store(false, Ordering::SeqCst);
                    return None;
                }
            }
        };
        sh.sleep.cancel();
        sh.waiters.helper_parked.store(false, Ordering::SeqCst);
        found
    }
}

/// The environment variable that turns [`RuntimeBuilder::submitter_works`] on (`1`) or
/// off (`0`) by default.
///
/// [`RuntimeBuilder::submitter_works`]: crate::RuntimeBuilder::submitter_works
pub const SUBMITTER_WORKS_ENV: &str = "TASKWATT_SUBMITTER_WORKS";

/// `TASKWATT_SUBMITTER_WORKS` if set (`1`, `0`, `true`, `false`), else off.
pub(crate) fn from_env() -> Result<bool, crate::RuntimeError> {
    match std::env::var(SUBMITTER_WORKS_ENV) {
        Err(_) => Ok(false),
        Ok(v) => match v.trim() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" | "" => Ok(false),
            _ => Err(crate::RuntimeError::SubmitterWorksEnv { value: v }),
        },
    }
}
