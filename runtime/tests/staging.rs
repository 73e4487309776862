//! Staging: tasks ready at submission wait for an idle worker's window, a batch, a
//! wake-up or a waiting thread before they reach the policy (see docs/runtime.md,
//! "Staging").
//!
//! The windows here are long (10 s) and the workers poll for 10 s before parking, so that
//! only the path under test can hand a staged task to the policy within the test.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taskwatt_runtime::scheduler::{Eager, Local, Origin, Policy};
use taskwatt_runtime::{Codelet, ReadyTask, Runtime, Task, TaskHandle};

const LONG: Duration = Duration::from_secs(10);

/// One worker that polls for [`LONG`] before parking, with the given staging window.
fn runtime(policy: &str, window: Duration) -> Runtime {
    Runtime::builder()
        .workers(1)
        .policy(policy)
        .idle(LONG, Duration::ZERO)
        .staging(window)
        .build()
        .unwrap()
}

/// Whether `task` finishes within `limit`, without waiting on it through the runtime (which
/// would take the staged tasks itself).
fn finishes_unaided(task: &TaskHandle, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if task.is_finished() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_staged_task_waits_for_the_window_and_waiting_takes_it_at_once() {
    let rt = runtime("lws", LONG);
    let cl = Codelet::new("c").cpu(|_| {});
    let h = rt.register(0u64);
    let t = rt.submit(Task::new(&cl).rw(&h)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !t.is_finished(),
        "the worker has been idle for less than the window"
    );
    rt.wait(&t).unwrap();

    // `wait_all` and `acquire` take them too.
    let t = rt.submit(Task::new(&cl).rw(&h)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!t.is_finished());
    rt.wait_all().unwrap();
    assert!(t.is_finished());
    let t = rt.submit(Task::new(&cl).rw(&h)).unwrap();
    assert_eq!(*rt.acquire(&h).unwrap(), 0);
    assert!(t.is_finished(), "the read waited for the staged writer");
}

#[test]
fn a_parked_worker_takes_the_staged_tasks_when_woken() {
    // Parks after 1 s of polling; woken, it would poll that long again before the look
    // that comes with parking.
    let idle = Duration::from_secs(1);
    let rt = Runtime::builder()
        .workers(1)
        .idle(idle, Duration::ZERO)
        .staging(LONG)
        .build()
        .unwrap();
    let cl = Codelet::new("c").cpu(|_| {});
    std::thread::sleep(idle + Duration::from_millis(300));
    let t = rt.submit(Task::new(&cl)).unwrap();
    assert!(
        finishes_unaided(&t, Duration::from_millis(700)),
        "taken at the wake-up, not after another idle period"
    );
}

#[test]
fn a_worker_about_to_park_takes_the_staged_tasks() {
    // Still polling when the task is staged (so nobody is woken), and the window is far:
    // only the last look before parking can take it.
    let rt = Runtime::builder()
        .workers(1)
        .idle(Duration::from_millis(100), Duration::ZERO)
        .staging(LONG)
        .build()
        .unwrap();
    let cl = Codelet::new("c").cpu(|_| {});
    let t = rt.submit(Task::new(&cl)).unwrap();
    assert!(finishes_unaided(&t, Duration::from_secs(5)));
}

#[test]
fn a_busy_worker_takes_the_tasks_staged_for_the_window() {
    // One worker, busy with a chain of tasks behind a gate: the task staged meanwhile,
    // of higher priority, runs as soon as the gate ends, not after the chain.
    let window = Duration::from_millis(200);
    let rt = runtime("prio", window);
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    let gate = Codelet::new("gate").cpu(move |_| {
        while !g.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    });
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let cl = Codelet::new("c").cpu(move |ctx| o.lock().unwrap().push(*ctx.arg::<i32>()));
    let (h, other) = (rt.register(0u64), rt.register(0u64));
    rt.submit(Task::new(&gate).rw(&h)).unwrap();
    // Takes the gate out of staging (an acquisition waits), and returns at once.
    drop(rt.acquire(&other).unwrap());
    // Behind the gate: released by the worker, never staged.
    for i in 0..10 {
        rt.submit(Task::new(&cl).rw(&h).arg(i)).unwrap();
    }
    let staged = rt.submit(Task::new(&cl).arg(-1).priority(1)).unwrap();
    std::thread::sleep(window + Duration::from_millis(100));
    assert!(!staged.is_finished(), "the worker is still in the gate");
    go.store(true, Ordering::Release);
    assert!(finishes_unaided(&staged, Duration::from_secs(5)));
    rt.wait_all().unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        "taken after the gate, before the chain's second task was released"
    );
}

#[test]
fn staged_tasks_reach_the_priority_policy_together() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let cl = Codelet::new("p").cpu(move |ctx| o.lock().unwrap().push(*ctx.arg::<i32>()));
    // The worker takes the staged tasks once it has been idle for 1 s: the 20 tasks
    // are all submitted by then, and reach the policy in one go.
    let rt = runtime("prio", Duration::from_secs(1));
    let tasks: Vec<TaskHandle> = (0..20)
        .map(|p| rt.submit(Task::new(&cl).arg(p).priority(p)).unwrap())
        .collect();
    assert!(finishes_unaided(&tasks[0], Duration::from_secs(10)));
    rt.wait_all().unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        (0..20).rev().collect::<Vec<_>>(),
        "highest priority first"
    );
}

/// Eager, recording which thread pushed each task and from where.
struct Recorder {
    inner: Eager<ReadyTask>,
    pushes: Arc<Mutex<Vec<(String, bool)>>>,
}

impl Policy<ReadyTask> for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn local(&self, worker: usize) -> Local {
        self.inner.local(worker)
    }

    fn push(&self, task: ReadyTask, origin: Origin<'_>) {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let external = matches!(origin, Origin::External);
        self.pushes.lock().unwrap().push((thread, external));
        self.inner.push(task, origin);
    }

    fn pop(&self, worker: usize, local: &mut Local) -> Option<ReadyTask> {
        self.inner.pop(worker, local)
    }
}

/// Which threads pushed the tasks of a three-task chain, the first ready at submission.
fn pushers(window: Duration) -> Vec<(String, bool)> {
    let pushes = Arc::new(Mutex::new(Vec::new()));
    let p = pushes.clone();
    let rt = Runtime::builder()
        .workers(1)
        .staging(window)
        .custom_policy(move |w| {
            Box::new(Recorder {
                inner: Eager::new(w),
                pushes: p,
            })
        })
        .build()
        .unwrap();
    let cl = Codelet::new("c").cpu(|_| std::thread::sleep(Duration::from_millis(30)));
    let h = rt.register(0u64);
    let tasks: Vec<TaskHandle> = (0..3)
        .map(|_| rt.submit(Task::new(&cl).rw(&h)).unwrap())
        .collect();
    assert!(finishes_unaided(&tasks[2], Duration::from_secs(5)));
    let seen = pushes.lock().unwrap().clone();
    seen
}

#[test]
fn staged_tasks_are_pushed_by_a_worker_and_others_as_before() {
    let me = std::thread::current().name().unwrap().to_string();
    let worker = "taskwatt-worker-0".to_string();
    // Staged: the first task reaches the policy from the worker, as an external task.
    assert_eq!(
        pushers(Duration::from_micros(2)),
        [
            (worker.clone(), true),
            (worker.clone(), false),
            (worker.clone(), false)
        ]
    );
    // Not staged: the submitting thread pushes it.
    assert_eq!(
        pushers(Duration::ZERO),
        [(me, true), (worker.clone(), false), (worker, false)]
    );
}
