//! GPU workers on ranks (emulated GPUs, ranks as threads): data written on one rank's GPU
//! is copied back to main memory for its message, and a message received into a copy that
//! a GPU held makes main memory's copy the valid one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use taskwatt_mpi::DistTask;
use taskwatt_runtime::Codelet;

mod common;

#[test]
fn data_written_on_a_rank_s_gpu_reaches_the_other_rank_and_back() {
    let on_gpu = Arc::new(AtomicUsize::new(0));
    let g = on_gpu.clone();
    let out = common::on_ranks(2, 1, move |rank, d| {
        // GPU-only: every write of `a` and `b` happens in a device's copy.
        let g2 = g.clone();
        let add = Codelet::new("add_on_gpu").gpu(move |ctx| {
            let x = ctx.r::<Vec<f64>>(0).clone();
            let y = ctx.rw::<Vec<f64>>(1);
            y.iter_mut().zip(x).for_each(|(y, x)| *y += x);
            g2.fetch_add(1, Ordering::Relaxed);
        });
        let a = d.register(0, vec![1.0f64; 64]).unwrap();
        let b = d.register(1, vec![10.0f64; 64]).unwrap();
        for _ in 0..3 {
            // On rank 1's GPU, reading `a` from rank 0; then on rank 0's, reading `b`.
            d.submit(DistTask::new(&add).r(&a).rw(&b)).unwrap();
            d.submit(DistTask::new(&add).r(&b).rw(&a)).unwrap();
        }
        d.wait_all().unwrap();
        let (a_owner, b_owner) = (a.owner(), b.owner());
        let a = d.unregister(a).unwrap();
        let b = d.unregister(b).unwrap();
        (
            (a_owner == rank).then_some(a),
            (b_owner == rank).then_some(b),
            d.stats().clone(),
        )
    });
    // The same sequence on one memory: b += a; a += b; three times.
    let (mut a, mut b) = (1.0f64, 10.0f64);
    for _ in 0..3 {
        b += a;
        a += b;
    }
    for (rank, (got_a, got_b, stats)) in out.into_iter().enumerate() {
        if let Some(v) = got_a {
            assert!(
                v.iter().all(|&x| x == a),
                "rank {rank}: a = {} not {a}",
                v[0]
            );
        }
        if let Some(v) = got_b {
            assert!(
                v.iter().all(|&x| x == b),
                "rank {rank}: b = {} not {b}",
                v[0]
            );
        }
        assert_eq!(stats.received.0, 3, "rank {rank}: {stats:?}");
    }
    assert_eq!(on_gpu.load(Ordering::Relaxed), 6);
}
