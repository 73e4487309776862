//! taskwatt-mpi on a communicator of the application's: `MPI_COMM_WORLD` split in two
//! halves, each half a distributed run of its own (a dot product over its ranks with a
//! reduction), while the application exchanges its own messages on `MPI_COMM_WORLD` with
//! the tags taskwatt uses: neither sees the other's.
//!
//! ```sh
//! cargo build -p taskwatt-mpi --features mpi --example split_comm
//! mpirun -np 4 target/debug/examples/split_comm
//! ```

use taskwatt_mpi::rsmpi::topology::Color;
use taskwatt_mpi::rsmpi::traits::*;
use taskwatt_mpi::rsmpi::Threading;
use taskwatt_mpi::{DistRuntime, DistTask, MpiTransport};
use taskwatt_runtime::{Codelet, Runtime};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (universe, threading) = taskwatt_mpi::rsmpi::initialize_with_threading(Threading::Multiple)
        .ok_or("MPI could not start: run under mpirun")?;
    if threading < Threading::Serialized {
        return Err(
            format!("MPI gives thread level {threading:?}; taskwatt needs SERIALIZED").into(),
        );
    }
    let world = universe.world();
    let (wrank, wsize) = (world.rank(), world.size());
    let half = world
        .split_by_color(Color::with_value(wrank % 2))
        .ok_or("the split gave no communicator")?;
    let (rank, size) = (half.rank() as usize, half.size() as usize);

    // The application's own message on the world, tag 0 (the tag of taskwatt's first
    // handle): sent before the run, received after it.
    let peer = (wrank + 1) % wsize;
    let from = (wrank + wsize - 1) % wsize;
    let token: &'static [u64] = Box::leak(vec![wrank as u64; 4].into_boxed_slice());
    let sent = world.process_at_rank(peer).immediate_send_with_tag(
        taskwatt_mpi::rsmpi::request::StaticScope,
        token,
        0,
    );

    let rt = Runtime::builder().workers(1).build()?;
    let mut d = DistRuntime::new(rt, Box::new(MpiTransport::with_communicator(&half)))?;
    // Each rank of the half owns a block x_r = (r + 1, ...); the dot x.x is reduced on 0.
    let n = 1000;
    let xs: Vec<_> = (0..size)
        .map(|owner| d.register(owner, vec![owner as f64 + 1.0; n]))
        .collect::<Result<_, _>>()?;
    let mut dot = d.register(0, vec![0.0f64])?;
    d.set_reduction(&mut dot, "dot", || vec![0.0], |acc, x| acc[0] += x[0])?;
    let partial = Codelet::new("partial_dot").cpu(|ctx| {
        let s: f64 = ctx.r::<Vec<f64>>(0).iter().map(|v| v * v).sum();
        ctx.w::<Vec<f64>>(1)[0] += s;
    });
    for x in &xs {
        d.submit(DistTask::new(&partial).r(x).redux(&dot))?;
    }
    d.fetch_to(&dot, 0)?;
    d.wait_all()?;
    let got = d.unregister(dot)?[0];
    for x in xs {
        d.unregister(x)?;
    }
    d.shutdown()?;

    let (back, _) = world.process_at_rank(from).receive_vec_with_tag::<u64>(0);
    sent.wait();
    if back != [from as u64; 4] {
        return Err(format!("world rank {wrank}: the application's message was {back:?}").into());
    }
    if rank == 0 {
        let want: f64 = (0..size).map(|r| ((r + 1) * (r + 1) * n) as f64).sum();
        if got != want {
            return Err(format!("half {}: dot {got}, not {want}", wrank % 2).into());
        }
        println!(
            "half {} ({size} ranks of {wsize}): dot {got} as expected; the application's \
             messages on the world arrived intact",
            wrank % 2
        );
    }
    Ok(())
}
