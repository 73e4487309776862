//! A limit on each rank's cached copies: the apps stay right, copies are evicted and read
//! again, and no rank ends over the limit.

use taskwatt_kernels::Tile;
use taskwatt_mpi::apps::{run, DistApp, DistOutcome};

mod common;

/// Runs `app` (order 512, tiles of 64: 32 KiB each) on 4 ranks with each rank's cache
/// capped at `limit` bytes; returns each rank's outcome and cached bytes at the end.
fn run_capped(app: DistApp, limit: Option<u64>) -> Vec<(DistOutcome, u64)> {
    common::on_ranks(4, 0, move |rank, d| {
        d.set_cache_limit(limit);
        let out = run(d, app, 512, 64, 3, 11).unwrap();
        (out, d.cached_bytes(rank))
    })
}

#[test]
fn capped_caches_evict_and_read_again_and_the_apps_stay_right() {
    let tile = 64 * 64 * 8;
    for app in [DistApp::Cholesky, DistApp::Gemm, DistApp::Stencil] {
        let free = run_capped(app, None);
        // Room for three tiles: a gemm task reads two others' tiles at once. The stencil
        // moves only its tiles' edges (64 values each): room for three of those.
        let limit = match app {
            DistApp::Stencil => 3 * 64 * 8,
            _ => 3 * tile,
        };
        let capped = run_capped(app, Some(limit));
        assert_eq!(capped[0].0.check_passed, Some(true), "{}", app.name());
        let evicted: u64 = capped.iter().map(|(o, _)| o.stats.evicted).sum();
        let received = |runs: &[(DistOutcome, u64)]| -> u64 {
            runs.iter().map(|(o, _)| o.stats.received.0).sum()
        };
        assert!(evicted > 0, "{}: nothing evicted", app.name());
        if app == DistApp::Stencil {
            // Each version of an edge is read by one task: evicting it after costs no
            // message.
            assert_eq!(received(&capped), received(&free), "stencil");
        } else {
            assert!(
                received(&capped) > received(&free),
                "{}: {} received capped, {} without a cap",
                app.name(),
                received(&capped),
                received(&free)
            );
        }
        // Rank 0 gathered the whole matrix for the check, past the limit; the others
        // end within it.
        for (rank, (_, held)) in capped.iter().enumerate().skip(1) {
            assert!(*held <= limit, "{}: rank {rank} holds {held} B", app.name());
        }
    }
}

#[test]
fn a_gather_under_a_cache_limit_keeps_every_gathered_copy() {
    let out = common::on_ranks(3, 0, |me, d| {
        // Room for one copy; rank 0 gathers six tiles from ranks 1 and 2 (tiles give
        // their storage back when evicted).
        d.set_cache_limit(Some(8 * 64));
        let hs: Vec<_> = (0..6)
            .map(|b| {
                let owner = 1 + b % 2;
                let v = if me == owner {
                    Tile::from_fn(8, |_, _| b as f64)
                } else {
                    Tile::unallocated(8)
                };
                d.register(owner, v).unwrap()
            })
            .collect();
        d.gather(&hs, 0).unwrap();
        d.wait_all().unwrap();
        hs.into_iter()
            .map(|h| d.unregister(h).unwrap().as_slice().last().copied())
            .collect::<Vec<_>>()
    });
    assert_eq!(out[0], (0..6).map(|b| Some(b as f64)).collect::<Vec<_>>());
}

/// Rank 1 adds 32 of rank 0's tiles into its own, one task each, with each rank's copies
/// capped at `limit` bytes; returns rank 1's largest copies' bytes after a submission,
/// its memory waits, and its sum's first element.
fn sum_remote_tiles(limit: Option<u64>) -> (u64, u64, f64) {
    let out = common::on_ranks(2, 0, move |me, d| {
        d.set_memory_limit(limit);
        let add = taskwatt_runtime::Codelet::new("add").cpu(|ctx| {
            let x = ctx.r::<Tile>(0).as_slice().to_vec();
            let acc = ctx.rw::<Tile>(1);
            for (a, x) in acc.as_mut_slice().iter_mut().zip(x) {
                *a += x;
            }
        });
        let tiles: Vec<_> = (0..32)
            .map(|k| {
                let v = if me == 0 {
                    Tile::from_fn(64, |_, _| k as f64)
                } else {
                    Tile::unallocated(64)
                };
                d.register(0, v).unwrap()
            })
            .collect();
        let acc = d
            .register(
                1,
                if me == 1 {
                    Tile::zeros(64)
                } else {
                    Tile::unallocated(64)
                },
            )
            .unwrap();
        let mut most = 0;
        for t in &tiles {
            d.submit(taskwatt_mpi::DistTask::new(&add).r(t).rw(&acc))
                .unwrap();
            most = most.max(d.copies_bytes());
        }
        d.wait_all().unwrap();
        let waits = d.stats().memory_waits;
        let first = (me == 1).then(|| d.unregister(acc).unwrap().as_slice()[0]);
        (most, waits, first)
    });
    let (most, waits, first) = out[1];
    (most, waits, first.unwrap())
}

#[test]
fn a_memory_limit_holds_the_receives_back_and_the_result_stays_right() {
    let tile = 64 * 64 * 8;
    let want = (0..32).sum::<i32>() as f64;
    // Without a limit the submission runs ahead: every copy is received (and kept).
    let (most, waits, sum) = sum_remote_tiles(None);
    assert_eq!(sum, want);
    assert_eq!(waits, 0);
    assert_eq!(most, 32 * tile);
    // With room for four copies, the rank waits for the oldest to be freed before it
    // receives more.
    let (most, waits, sum) = sum_remote_tiles(Some(4 * tile));
    assert_eq!(sum, want);
    assert!(
        most <= 4 * tile,
        "{most} B of copies at once, past {}",
        4 * tile
    );
    assert!(waits > 0, "the submission never waited");
}
