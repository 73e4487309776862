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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot_free::SpinQueue;
use taskwatt::runtime::{Codelet, ReadyTask, Runtime, Task};
use taskwatt::scheduler::{Local, Origin, Policy};

/// A footprint-ordered queue under a std mutex (kept simple: this is an example).
mod parking_lot_free {
    use std::collections::BinaryHeap;
    use std::sync::Mutex;

    pub struct SpinQueue<T>(pub Mutex<BinaryHeap<(u64, std::cmp::Reverse<u64>, Item<T>)>>);

    /// Wrapper so BinaryHeap does not need `T: Ord`.
    pub struct Item<T>(pub T);
    impl<T> PartialEq for Item<T> {
        fn eq(&self, _: &Self) -> bool {
            true
        }
    }
    impl<T> Eq for Item<T> {}
    impl<T> PartialOrd for Item<T> {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl<T> Ord for Item<T> {
        fn cmp(&self, _: &Self) -> std::cmp::Ordering {
            std::cmp::Ordering::Equal
        }
    }
}

struct LargestFirst {
    queue: SpinQueue<ReadyTask>,
    seq: AtomicUsize,
}

impl Policy<ReadyTask> for LargestFirst {
    fn name(&self) -> &str {
        "largest-first"
    }

    fn local(&self, _worker: usize) -> Local {
        Local::none()
    }

    fn push(&self, task: ReadyTask, _origin: Origin<'_>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) as u64;
        let key = task.footprint();
        self.queue.0.lock().unwrap().push((
            key,
            std::cmp::Reverse(seq),
            parking_lot_free::Item(task),
        ));
    }

    fn pop(&self, _worker: usize, _local: &mut Local) -> Option<ReadyTask> {
        self.queue.0.lock().unwrap().pop().map(|(_, _, t)| t.0)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::builder()
        .workers(1) // one worker makes the start order visible
        .custom_policy(|_workers| {
            Box::new(LargestFirst {
                queue: SpinQueue(Default::default()),
                seq: AtomicUsize::new(0),
            })
        })
        .build()?;
    println!("policy: {}", rt.policy_name());

    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
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
