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
