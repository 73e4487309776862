//! taskwatt over MPI, in StarPU-MPI's model: every rank submits the same task flow; each
//! datum has an owner rank; a task runs where the data it writes lives; the runtime infers
//! the messages, caches data read several times until a write makes it stale, and a
//! communication thread makes them progress without blocking any worker.
//!
//! - [`DistRuntime`] ([`dist`]): one rank of a job, over a local `taskwatt` runtime.
//! - [`Transport`] ([`transport`]): the messages; [`ThreadNet`] puts ranks in threads of
//!   one process (tests, and trying the model without MPI); with feature `mpi`,
//!   `MpiTransport` is MPI's (rsmpi over the system's MPI library).
//! - Collectives and point-to-point transfers on handles (`collective`):
//!   [`DistRuntime::transfer`], [`DistRuntime::broadcast`], [`DistRuntime::gather`],
//!   [`DistRuntime::scatter`], [`DistRuntime::barrier`].
//! - [`apps`]: distributed Cholesky, gemm and stencil over a 2D block-cyclic distribution,
//!   checked against the sequential result.

pub mod apps;
mod cache;
mod collective;
mod comm;
pub mod dist;
mod error;
mod memory;
pub mod merge;
#[cfg(feature = "mpi")]
mod mpi_transport;
mod partition;
mod redux;
mod shutdown;
pub mod transport;

pub use dist::{DistAccess, DistHandle, DistRuntime, DistStats, DistTask};
pub use error::DistError;
/// rsmpi, the MPI binding taskwatt-mpi is built on (feature `mpi`): the communicator given
/// to [`MpiTransport::with_communicator`] is its type.
#[cfg(feature = "mpi")]
pub use mpi as rsmpi;
#[cfg(feature = "mpi")]
pub use mpi_transport::{abort_job, MpiTransport, MpiUniverse};
pub use partition::DistParts;
pub use shutdown::Ended;
pub use transport::{ThreadNet, Transport};

/// The CPUs of the `local`-th of `ranks` ranks on one node: a contiguous share of the CPUs
/// this process may use (one each, round robin, when there are more ranks than CPUs), so
/// that the ranks of a node do not pin their workers to the same cores.
pub fn cpu_share(local: usize, ranks: usize) -> Vec<u32> {
    let allowed: Vec<u32> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id as u32)
        .collect();
    let ranks = ranks.max(1);
    if allowed.is_empty() {
        return Vec::new();
    }
    if allowed.len() >= ranks {
        let per = allowed.len() / ranks;
        allowed[local * per..(local + 1) * per].to_vec()
    } else {
        vec![allowed[local % allowed.len()]]
    }
}
