//! A Taskflow-style executor, as a baseline for the per-task overhead: a static graph of
//! nodes with their successors and a join counter each, run by persistent worker threads
//! with work-stealing deques. What Taskflow does and this does too: the graph is known
//! before it runs (no dependency inference), a node's join counter is reset at each run, a
//! finished node decrements its successors' counters and runs the first one that becomes
//! ready itself (the rest go to its own deque), and idle workers steal, then park.
//!
//! What it leaves out, to be a floor rather than a rival: tracing, data, priorities,
//! conditions and subflows, and any error or panic handling. Each worker counts its
//! finished nodes locally and adds them to the shared count only when it runs out of work.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_deque::{Injector, Stealer, Worker};
use crossbeam_utils::Backoff;

/// A static task graph: nodes and their successors.
#[derive(Default)]
pub(crate) struct Graph {
    succ: Vec<Vec<u32>>,
    preds: Vec<u32>,
    join: Vec<AtomicU32>,
}

impl Graph {
    /// An empty graph with room for `n` nodes.
    pub(crate) fn with_capacity(n: usize) -> Graph {
        Graph {
            succ: Vec::with_capacity(n),
            preds: Vec::with_capacity(n),
            join: Vec::with_capacity(n),
        }
    }

    /// A new node with no edge.
    pub(crate) fn node(&mut self) -> u32 {
        self.succ.push(Vec::new());
        self.preds.push(0);
        self.join.push(AtomicU32::new(0));
        (self.succ.len() - 1) as u32
    }

    /// `a` runs before `b`.
    pub(crate) fn precede(&mut self, a: u32, b: u32) {
        self.succ[a as usize].push(b);
        self.preds[b as usize] += 1;
    }
}

struct Shared {
    injector: Injector<u32>,
    stealers: Vec<Stealer<u32>>,
    /// The graph being run (null between runs).
    graph: std::sync::atomic::AtomicPtr<Graph>,
    /// Nodes of the run not yet counted as finished.
    remaining: AtomicUsize,
    /// Bumped at each run, so that parked workers know there is one.
    epoch: AtomicU64,
    /// Workers inside a run (holding a reference to its graph).
    active: AtomicUsize,
    stop: AtomicBool,
    wake: (Mutex<()>, Condvar),
    done: (Mutex<bool>, Condvar),
}

/// Persistent workers that run [`Graph`]s.
pub(crate) struct Executor {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Executor {
    /// `n` worker threads.
    pub(crate) fn new(n: usize) -> Executor {
        let locals: Vec<Worker<u32>> = (0..n).map(|_| Worker::new_lifo()).collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            stealers: locals.iter().map(Worker::stealer).collect(),
            graph: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            remaining: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
            done: (Mutex::new(false), Condvar::new()),
        });
        let threads = locals
            .into_iter()
            .enumerate()
            .map(|(i, local)| {
                let s = shared.clone();
                std::thread::spawn(move || work(&s, i, &local))
            })
            .collect();
        Executor { shared, threads }
    }

    /// Runs `g` to the end: resets its join counters, hands its sources to the workers and
    /// waits, parked.
    pub(crate) fn run(&self, g: &Graph) {
        let s = &self.shared;
        if g.succ.is_empty() {
            return;
        }
        for (j, &p) in g.join.iter().zip(&g.preds) {
            j.store(p, Ordering::Relaxed);
        }
        *s.done.0.lock().unwrap() = false;
        s.remaining.store(g.succ.len(), Ordering::Relaxed);
        s.graph
            .store(g as *const Graph as *mut Graph, Ordering::SeqCst);
        {
            let _l = s.wake.0.lock().unwrap();
            s.epoch.fetch_add(1, Ordering::SeqCst);
            s.wake.1.notify_all();
        }
        for (i, &p) in g.preds.iter().enumerate() {
            if p == 0 {
                s.injector.push(i as u32);
            }
        }
        let mut done = s.done.0.lock().unwrap();
        while !*done {
            done = s.done.1.wait(done).unwrap();
        }
        drop(done);
        s.graph.store(std::ptr::null_mut(), Ordering::SeqCst);
        while s.active.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        {
            let _l = self.shared.wake.0.lock().unwrap();
            self.shared.stop.store(true, Ordering::SeqCst);
            self.shared.wake.1.notify_all();
        }
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

/// A worker: runs nodes while the run has some, then spins a while and parks.
fn work(s: &Shared, me: usize, local: &Worker<u32>) {
    let mut seen = 0u64;
    loop {
        // Wait for a run: spin about 50 µs, then park.
        let mut spins = 0u32;
        loop {
            if s.stop.load(Ordering::SeqCst) {
                return;
            }
            let e = s.epoch.load(Ordering::SeqCst);
            if e != seen {
                seen = e;
                break;
            }
            spins += 1;
            if spins < 2000 {
                std::hint::spin_loop();
                continue;
            }
            let l = s.wake.0.lock().unwrap();
            if s.epoch.load(Ordering::SeqCst) == seen && !s.stop.load(Ordering::SeqCst) {
                drop(s.wake.1.wait(l).unwrap());
            }
        }
        // Counted in before the graph is read: `run` clears the graph, then waits for no
        // worker to be in, before it returns.
        s.active.fetch_add(1, Ordering::SeqCst);
        let g = s.graph.load(Ordering::SeqCst);
        if g.is_null() {
            s.active.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        // SAFETY: `run` keeps the graph alive and unmoved until `active` is back to 0.
        let g: &Graph = unsafe { &*g };
        let mut finished = 0usize;
        let backoff = Backoff::new();
        loop {
            let next = local.pop().or_else(|| steal(s, me, local));
            match next {
                Some(mut n) => {
                    backoff.reset();
                    // Run `n`, then the first successor it makes ready, and so on.
                    loop {
                        std::hint::black_box(n);
                        finished += 1;
                        let mut cached = None;
                        for &t in &g.succ[n as usize] {
                            if g.join[t as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                                match cached {
                                    None => cached = Some(t),
                                    Some(_) => local.push(t),
                                }
                            }
                        }
                        match cached {
                            Some(t) => n = t,
                            None => break,
                        }
                    }
                }
                None => {
                    if finished > 0 {
                        let k = std::mem::take(&mut finished);
                        if s.remaining.fetch_sub(k, Ordering::AcqRel) == k {
                            let mut d = s.done.0.lock().unwrap();
                            *d = true;
                            s.done.1.notify_one();
                        }
                    }
                    if s.remaining.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    backoff.snooze();
                }
            }
        }
        s.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn steal(s: &Shared, me: usize, local: &Worker<u32>) -> Option<u32> {
    loop {
        let mut retry = false;
        match s.injector.steal_batch_and_pop(local) {
            crossbeam_deque::Steal::Success(n) => return Some(n),
            crossbeam_deque::Steal::Retry => retry = true,
            crossbeam_deque::Steal::Empty => {}
        }
        for (i, st) in s.stealers.iter().enumerate() {
            if i == me {
                continue;
            }
            match st.steal() {
                crossbeam_deque::Steal::Success(n) => return Some(n),
                crossbeam_deque::Steal::Retry => retry = true,
                crossbeam_deque::Steal::Empty => {}
            }
        }
        if !retry {
            return None;
        }
    }
}
