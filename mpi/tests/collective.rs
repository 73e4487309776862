//! Collectives and point-to-point transfers on handles, ranks as threads (`ThreadNet`):
//! each checked by the values every rank ends with, against what the call says it moves.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use taskwatt_mpi::{DistRuntime, DistTask};
use taskwatt_runtime::Codelet;

const RANKS: usize = 4;

mod common;

/// Runs `f` on `RANKS` ranks of one worker each.
fn job<R: Send + 'static>(
    f: impl Fn(usize, &mut DistRuntime) -> R + Send + Sync + 'static,
) -> Vec<R> {
    common::on_ranks(RANKS, 0, f)
}

#[test]
fn a_broadcast_gives_every_rank_the_owner_s_value() {
    let out = job(|rank, d| {
        // Every rank registers its own guess; only the owner's (rank 2) is the value.
        let h = d.register(2, vec![rank as f64; 3]).unwrap();
        let bump = Codelet::new("bump").cpu(|ctx| ctx.w::<Vec<f64>>(0)[0] += 10.0);
        d.submit(DistTask::new(&bump).rw(&h)).unwrap();
        d.broadcast(&h).unwrap();
        d.wait_all().unwrap();
        d.unregister(h).unwrap()
    });
    for (rank, v) in out.iter().enumerate() {
        assert_eq!(v, &vec![12.0, 2.0, 2.0], "rank {rank}");
    }
}

#[test]
fn a_gather_brings_every_owner_s_value_to_the_root_only() {
    let out = job(|rank, d| {
        let hs: Vec<_> = (0..RANKS)
            .map(|owner| {
                d.register(owner, vec![(100 * rank + owner) as u64])
                    .unwrap()
            })
            .collect();
        d.gather(&hs, 1).unwrap();
        d.wait_all().unwrap();
        hs.into_iter()
            .map(|h| d.unregister(h).unwrap()[0])
            .collect::<Vec<_>>()
    });
    // The root holds every owner's value (owner r registered 100 r + r).
    assert_eq!(out[1], vec![0, 101, 202, 303]);
    // The others kept their own copies: only theirs is the value.
    assert_eq!(out[3], vec![300, 301, 302, 303]);
}

#[test]
fn a_scatter_replaces_each_owner_s_value_with_the_root_s_and_tasks_see_it() {
    let out = job(|rank, d| {
        // The root (rank 0) prepared every block; the owners registered zeros.
        let hs: Vec<_> = (0..RANKS)
            .map(|owner| {
                let v = if rank == 0 {
                    vec![10 * owner as i64 + 7]
                } else {
                    vec![0]
                };
                d.register(owner, v).unwrap()
            })
            .collect();
        d.scatter(&hs, 0).unwrap();
        // Each owner's task runs after the scatter's receive.
        let double = Codelet::new("double").cpu(|ctx| ctx.w::<Vec<i64>>(0)[0] *= 2);
        for h in &hs {
            d.submit(DistTask::new(&double).rw(h)).unwrap();
        }
        // Rank 3 reads every block afterwards: it gets the owners' new values.
        let sum = d.register(3, vec![0i64]).unwrap();
        let add = Codelet::new("add").cpu(|ctx| {
            let x = ctx.r::<Vec<i64>>(0)[0];
            ctx.w::<Vec<i64>>(1)[0] += x;
        });
        for h in &hs {
            d.submit(DistTask::new(&add).r(h).rw(&sum)).unwrap();
        }
        d.wait_all().unwrap();
        let owned: Vec<i64> = hs
            .into_iter()
            .map(|h| {
                let owner = h.owner();
                let v = d.unregister(h).unwrap()[0];
                if owner == rank {
                    v
                } else {
                    -1
                }
            })
            .collect();
        (owned, d.unregister(sum).unwrap()[0])
    });
    for (rank, (owned, _)) in out.iter().enumerate() {
        assert_eq!(
            owned[rank],
            2 * (10 * rank as i64 + 7),
            "rank {rank}'s block"
        );
    }
    assert_eq!(
        out[3].1,
        (0..RANKS as i64).map(|r| 2 * (10 * r + 7)).sum::<i64>()
    );
}

#[test]
fn a_transfer_between_two_copies_moves_the_source_s_copy_and_keeps_the_owner_s_value() {
    let out = job(|rank, d| {
        let h = d.register(0, vec![rank as u32 + 1]).unwrap();
        // Rank 1 gets the owner's value, then passes its copy on to rank 2.
        d.fetch_to(&h, 1).unwrap();
        d.transfer(&h, 1, 2).unwrap();
        // Rank 3's own registration (4) goes to rank 1 only as a copy: rank 1's is stale
        // then, and its next read receives the owner's value again.
        d.transfer(&h, 3, 1).unwrap();
        let seen = d.register(1, vec![0u32]).unwrap();
        let look = Codelet::new("look").cpu(|ctx| {
            let x = ctx.r::<Vec<u32>>(0)[0];
            ctx.w::<Vec<u32>>(1)[0] = x;
        });
        d.submit(DistTask::new(&look).r(&h).rw(&seen)).unwrap();
        d.wait_all().unwrap();
        (d.unregister(h).unwrap()[0], d.unregister(seen).unwrap()[0])
    });
    assert_eq!(out[0].0, 1, "the owner's value");
    assert_eq!(out[2].0, 1, "rank 2 got rank 1's copy, the owner's value");
    assert_eq!(
        out[1].1, 1,
        "rank 1's task read the owner's value, not rank 3's"
    );
    assert_eq!(out[3].0, 4, "rank 3 kept its own");
}

#[test]
fn a_barrier_returns_on_no_rank_before_every_rank_reached_it() {
    let before = Arc::new(AtomicUsize::new(0));
    let b = before.clone();
    let out = job(move |rank, d| {
        // The last rank gets there late.
        if rank == RANKS - 1 {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        b.fetch_add(1, Ordering::SeqCst);
        d.barrier().unwrap();
        let seen = b.load(Ordering::SeqCst);
        // Twice in a row: the barrier can be used again.
        d.barrier().unwrap();
        seen
    });
    assert!(out.iter().all(|&n| n == RANKS), "{out:?}");
    assert_eq!(before.load(Ordering::SeqCst), RANKS);
}

#[test]
fn a_transfer_to_a_rank_outside_the_job_is_refused_by_name() {
    let out = job(|_, d| {
        let h = d.register(0, vec![0u8]).unwrap();
        let e = d.transfer(&h, 0, RANKS).unwrap_err().to_string();
        d.unregister(h).unwrap();
        e
    });
    assert!(
        out[0].contains("destination") && out[0].contains(&RANKS.to_string()),
        "{}",
        out[0]
    );
}
