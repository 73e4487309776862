//! A custom scheduling policy: "largest footprint first", plugged in through the same
//! trait as the built-in ones.
//!
//! ```text
//!   fill(W v0)  fill(W v1)  ...  fill(W v7)      8 independent tasks, sizes 1..8 MiB
//!       │           │                │
//!   sum(R v0)   sum(R v1)   ...  sum(R v7)       each waits for its own fill
//! ```
//!
//! The policy keeps one central queue ordered by task footprint (bytes of data touched), so
//! the biggest tasks start first, a classic way to shorten the makespan of a bag of
//! uneven tasks. Prints the order in which the fills started and checks the sums.
//!
//! Run: `cargo run --release --example custom_policy`

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use taskwatt::runtime::{Codelet, ReadyTask, Runtime, Task};
use taskwatt::scheduler::{Local, Origin, Policy};

/// A queued task with its sort key: largest footprint first, then submission order.
struct Entry {
    footprint: u64,
    seq: u64,
    task: ReadyTask,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.footprint, self.seq) == (o.footprint, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.footprint.cmp(&o.footprint).then(o.seq.cmp(&self.seq))
    }
}

struct LargestFirst {
    queue: Mutex<BinaryHeap<Entry>>,
    seq: AtomicU64,
}

impl Policy<ReadyTask> for LargestFirst {
    fn name(&self) -> &str {
        "largest-first"
    }

    fn local(&self, _worker: usize) -> Local {
        Local::none()
    }

    fn push(&self, task: ReadyTask, _origin: Origin<'_>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let footprint = task.footprint();
        self.queue.lock().unwrap().push(Entry {
            footprint,
            seq,
            task,
        });
    }

    fn pop(&self, _worker: usize, _local: &mut Local) -> Option<ReadyTask> {
        self.queue.lock().unwrap().pop().map(|e| e.task)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder()
        .workers(1) // one worker makes the start order visible
        .custom_policy(|_workers| {
            Box::new(LargestFirst {
                queue: Mutex::new(BinaryHeap::new()),
                seq: AtomicU64::new(0),
            })
        })
        .build()?;
    println!("policy: {}", rt.policy_name());

    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let fill = Codelet::new("fill").cpu(move |ctx| {
        let v = ctx.w::<Vec<u64>>(0);
        o.lock().unwrap().push(v.len() / (1 << 17));
        v.iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
    });
    let sum = Codelet::new("sum").cpu(|ctx| {
        let v = ctx.r::<Vec<u64>>(0);
        let n = v.len() as u64;
        assert_eq!(v.iter().sum::<u64>(), n * (n - 1) / 2);
    });

    // Hold the single worker busy while everything is submitted, so that the policy
    // sees all fills at once.
    let gate = rt.register(());
    let hold =
        Codelet::new("hold").cpu(|_| std::thread::sleep(std::time::Duration::from_millis(50)));
    rt.submit(Task::new(&hold).w(&gate))?;
    for mib in 1..=8u64 {
        let len = (mib << 20) / 8;
        let v = rt.register_bytes(vec![0u64; len as usize], mib << 20);
        rt.submit(Task::new(&fill).w(&v))?;
        rt.submit(Task::new(&sum).r(&v))?;
    }
    rt.wait_all()?;
    let order = order.lock().unwrap().clone();
    println!("fill start order by size (MiB): {order:?}");
    assert_eq!(order, vec![8, 7, 6, 5, 4, 3, 2, 1]);
    Ok(())
}
