//! A distributed conjugate gradient over 4 ranks (threads), its dot products reductions
//! across ranks (and, in a variant, the owner of one of its scalars migrated mid-run),
//! checked bitwise against a sequential CG that sums in the same grouping (each rank's
//! partial sums, the owner's first, then the others in rank order).

use taskwatt_mpi::{DistHandle, DistRuntime, DistTask, ThreadNet};
use taskwatt_runtime::{Codelet, Runtime};

const RANKS: usize = 4;
/// Two blocks per rank: a rank's two partial sums add up alike in either order.
const BLOCKS: usize = 2 * RANKS;
const NB: usize = 16;
const ITERS: usize = 12;
/// The iteration after which `pq` moves from rank 0 to rank 3, in the migrating variant.
const MIGRATE_AFTER: usize = 5;

fn rhs(b: usize) -> Vec<f64> {
    (0..NB)
        .map(|i| 1.0 + ((b * NB + i) % 7) as f64 / 8.0)
        .collect()
}

/// y = A x on block b of the 1-D Laplacian tridiag(-1, 2, -1), with the neighbour blocks'
/// edge values (0 past the ends).
fn matvec(x: &[f64], left: f64, right: f64) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let l = if i == 0 { left } else { x[i - 1] };
            let r = if i + 1 == x.len() { right } else { x[i + 1] };
            2.0 * x[i] - l - r
        })
        .collect()
}

fn partial(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The dot product as the reduction groups it, with `owner` owning the result.
fn grouped(parts: &[f64], owner: usize) -> f64 {
    let group = |r: usize| {
        let mut acc = 0.0;
        for b in (0..BLOCKS).filter(|b| b % RANKS == r) {
            acc += parts[b];
        }
        acc
    };
    let mut v = 0.0 + group(owner);
    for r in (0..RANKS).filter(|&r| r != owner) {
        v += group(r);
    }
    v
}

fn sequential(migrate: bool) -> Vec<Vec<f64>> {
    let mut x = vec![vec![0.0; NB]; BLOCKS];
    let mut r: Vec<Vec<f64>> = (0..BLOCKS).map(rhs).collect();
    let mut p = r.clone();
    let parts: Vec<f64> = (0..BLOCKS).map(|b| partial(&r[b], &r[b])).collect();
    let mut rr = grouped(&parts, 0);
    for it in 0..ITERS {
        let pq_owner = if migrate && it > MIGRATE_AFTER { 3 } else { 0 };
        let q: Vec<Vec<f64>> = (0..BLOCKS)
            .map(|b| {
                let left = if b > 0 { p[b - 1][NB - 1] } else { 0.0 };
                let right = if b + 1 < BLOCKS { p[b + 1][0] } else { 0.0 };
                matvec(&p[b], left, right)
            })
            .collect();
        let parts: Vec<f64> = (0..BLOCKS).map(|b| partial(&p[b], &q[b])).collect();
        let alpha = rr / grouped(&parts, pq_owner);
        for b in 0..BLOCKS {
            for i in 0..NB {
                x[b][i] += alpha * p[b][i];
                r[b][i] -= alpha * q[b][i];
            }
        }
        let parts: Vec<f64> = (0..BLOCKS).map(|b| partial(&r[b], &r[b])).collect();
        let rr_new = grouped(&parts, 0);
        let beta = rr_new / rr;
        for b in 0..BLOCKS {
            for i in 0..NB {
                p[b][i] = r[b][i] + beta * p[b][i];
            }
        }
        rr = rr_new;
    }
    x
}

fn rank_main(d: &mut DistRuntime, migrate: bool) -> Vec<(usize, Vec<f64>)> {
    let me = d.rank();
    let vec_of =
        |d: &mut DistRuntime, f: &dyn Fn(usize) -> Vec<f64>| -> Vec<DistHandle<Vec<f64>>> {
            (0..BLOCKS)
                .map(|b| d.register(b % RANKS, f(b)).unwrap())
                .collect()
        };
    let x = vec_of(d, &|_| vec![0.0; NB]);
    let r = vec_of(d, &rhs);
    let p = vec_of(d, &rhs);
    let q = vec_of(d, &|_| vec![0.0; NB]);
    let scalar = |d: &mut DistRuntime, name: &str| {
        let mut h = d.register(0, vec![0.0f64]).unwrap();
        d.set_reduction(&mut h, name, || vec![0.0f64], |acc, v| acc[0] += v[0])
            .unwrap();
        h
    };
    let rr = scalar(d, "rr");
    let mut pq = scalar(d, "pq");
    let rr_new = scalar(d, "rr_new");

    let dot = Codelet::new("dot").cpu(|ctx| {
        let v = partial(ctx.r::<Vec<f64>>(0), ctx.r::<Vec<f64>>(1));
        ctx.w::<Vec<f64>>(2)[0] += v;
    });
    let zero = Codelet::new("zero").cpu(|ctx| ctx.w::<Vec<f64>>(0)[0] = 0.0);
    let av = Codelet::new("matvec").cpu(|ctx| {
        let (has_left, has_right) = *ctx.arg::<(bool, bool)>();
        let mut k = 1;
        let left = if has_left {
            k += 1;
            ctx.r::<Vec<f64>>(k - 1)[NB - 1]
        } else {
            0.0
        };
        let right = if has_right {
            ctx.r::<Vec<f64>>(k)[0]
        } else {
            0.0
        };
        let y = matvec(ctx.r::<Vec<f64>>(0), left, right);
        *ctx.w::<Vec<f64>>(if has_right { k + 1 } else { k }) = y;
    });
    let axpy = Codelet::new("axpy").cpu(|ctx| {
        let alpha = ctx.r::<Vec<f64>>(2)[0] / ctx.r::<Vec<f64>>(3)[0];
        let (pb, qb) = (ctx.r::<Vec<f64>>(0).clone(), ctx.r::<Vec<f64>>(1).clone());
        let x = ctx.w::<Vec<f64>>(4);
        for i in 0..NB {
            x[i] += alpha * pb[i];
        }
        let r = ctx.w::<Vec<f64>>(5);
        for i in 0..NB {
            r[i] -= alpha * qb[i];
        }
    });
    let update = Codelet::new("update_p").cpu(|ctx| {
        let beta = ctx.r::<Vec<f64>>(1)[0] / ctx.r::<Vec<f64>>(2)[0];
        let rb = ctx.r::<Vec<f64>>(0).clone();
        let p = ctx.w::<Vec<f64>>(3);
        for i in 0..NB {
            p[i] = rb[i] + beta * p[i];
        }
    });
    let assign = Codelet::new("assign").cpu(|ctx| {
        let v = ctx.r::<Vec<f64>>(0)[0];
        ctx.w::<Vec<f64>>(1)[0] = v;
    });

    d.submit(DistTask::new(&zero).w(&rr)).unwrap();
    for b in 0..BLOCKS {
        d.submit(DistTask::new(&dot).r(&r[b]).r(&r[b]).redux(&rr))
            .unwrap();
    }
    for it in 0..ITERS {
        if migrate && it == MIGRATE_AFTER + 1 {
            d.migrate(&mut pq, 3).unwrap();
        }
        for b in 0..BLOCKS {
            let (hl, hr) = (b > 0, b + 1 < BLOCKS);
            let mut t = DistTask::new(&av).r(&p[b]);
            if hl {
                t = t.r(&p[b - 1]);
            }
            if hr {
                t = t.r(&p[b + 1]);
            }
            d.submit(t.w(&q[b]).arg((hl, hr))).unwrap();
        }
        d.submit(DistTask::new(&zero).w(&pq)).unwrap();
        for b in 0..BLOCKS {
            d.submit(DistTask::new(&dot).r(&p[b]).r(&q[b]).redux(&pq))
                .unwrap();
        }
        for b in 0..BLOCKS {
            d.submit(
                DistTask::new(&axpy)
                    .r(&p[b])
                    .r(&q[b])
                    .r(&rr)
                    .r(&pq)
                    .rw(&x[b])
                    .rw(&r[b]),
            )
            .unwrap();
        }
        d.submit(DistTask::new(&zero).w(&rr_new)).unwrap();
        for b in 0..BLOCKS {
            d.submit(DistTask::new(&dot).r(&r[b]).r(&r[b]).redux(&rr_new))
                .unwrap();
        }
        for b in 0..BLOCKS {
            d.submit(DistTask::new(&update).r(&r[b]).r(&rr_new).r(&rr).rw(&p[b]))
                .unwrap();
        }
        d.submit(DistTask::new(&assign).r(&rr_new).w(&rr)).unwrap();
    }
    d.wait_all().unwrap();
    let mut mine = Vec::new();
    for (b, h) in x.into_iter().enumerate() {
        let owner = h.owner();
        let v = d.unregister(h).unwrap();
        if owner == me {
            mine.push((b, v));
        }
    }
    for h in r.into_iter().chain(p).chain(q).chain([rr, pq, rr_new]) {
        d.unregister(h).unwrap();
    }
    mine
}

#[test]
fn a_distributed_cg_with_reductions_is_bitwise_the_sequential_one() {
    cg(false);
}

#[test]
fn a_distributed_cg_with_a_migration_mid_run_is_bitwise_the_sequential_one() {
    cg(true);
}

fn cg(migrate: bool) {
    let want = sequential(migrate);
    let threads: Vec<_> = ThreadNet::new(RANKS)
        .into_iter()
        .map(|net| {
            std::thread::spawn(move || {
                let rt = Runtime::builder().workers(1).build().unwrap();
                let mut d = DistRuntime::with_timeout(rt, Box::new(net), 10).unwrap();
                let out = rank_main(&mut d, migrate);
                d.shutdown().unwrap();
                out
            })
        })
        .collect();
    let mut got = vec![Vec::new(); BLOCKS];
    for t in threads {
        for (b, v) in t.join().unwrap() {
            got[b] = v;
        }
    }
    // The CG converged (12 iterations of a 128-unknown Laplacian) and agrees to the bit.
    let residual: f64 = (0..BLOCKS)
        .map(|b| {
            let left = if b > 0 { got[b - 1][NB - 1] } else { 0.0 };
            let right = if b + 1 < BLOCKS { got[b + 1][0] } else { 0.0 };
            let ax = matvec(&got[b], left, right);
            ax.iter()
                .zip(rhs(b))
                .map(|(a, f)| (a - f).powi(2))
                .sum::<f64>()
        })
        .sum();
    assert!(residual.is_finite());
    for b in 0..BLOCKS {
        assert_eq!(got[b], want[b], "block {b}");
    }
}
