//! The ranks of a test job: threads of one process over `ThreadNet`.

use std::sync::Arc;

use taskwatt_mpi::{DistRuntime, ThreadNet, Transport};
use taskwatt_runtime::Runtime;

/// Runs `f(rank, runtime)` on `size` ranks, each over a runtime of one CPU worker and
/// `gpus` emulated GPUs (messages time out after 20 s), then shuts each rank down; returns
/// each rank's result, in rank order.
pub(crate) fn on_ranks<R: Send + 'static>(
    size: usize,
    gpus: usize,
    f: impl Fn(usize, &mut DistRuntime) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = Arc::new(f);
    let threads: Vec<_> = ThreadNet::new(size)
        .into_iter()
        .map(|net| {
            let f = f.clone();
            std::thread::spawn(move || {
                let rank = net.rank();
                let mut b = Runtime::builder().workers(1);
                if gpus > 0 {
                    b = b.emulated_gpus(gpus);
                }
                let mut d =
                    DistRuntime::with_timeout(b.build().unwrap(), Box::new(net), 20).unwrap();
                let r = f(rank, &mut d);
                d.shutdown().unwrap();
                r
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}
