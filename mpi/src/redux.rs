//! Reductions across ranks (StarPU-MPI's REDUX on distributed data).
//!
//! A datum with a reduction ([`DistRuntime::set_reduction`]) can take REDUX contributions
//! from tasks on any rank. Every rank works out the same phases from the same flow:
//!
//! 1. **A phase starts** at the first REDUX access after any other. The copies of the ranks
//!    that are not the owner stop being copies of the value: a rank that contributes resets
//!    its copy to the neutral element (a local task of the `init` function) before its
//!    first contribution, and its local runtime reduces its workers' contributions into
//!    that copy as for any REDUX access. The owner contributes into the value itself.
//! 2. **The phase ends** at the next other access (a task that reads or writes the datum,
//!    a `fetch_to`, `flush`, `migrate` or `unregister`): each contributing rank sends its
//!    copy to the owner, and the owner receives them into buffers of their own and folds
//!    them into the value with `combine`, in rank order (local tasks). Then only the
//!    owner's copy is valid.
//!
//! So a reduction's result does not depend on the timing of the messages: on the owner,
//! its own contributions (folded by its runtime), then rank 1's, rank 2's... With one
//! worker per rank it is bitwise reproducible; with several, each rank's local reduction
//! folds its workers' contributions in the order they finish, as StarPU's does.

use std::sync::Arc;

use taskwatt_runtime::{Codelet, DeviceData};

use crate::dist::{DistAccess, DistHandle, DistReduction, DistRuntime};
use crate::DistError;

impl DistRuntime {
    /// Gives `h` a reduction, on every rank at the same point (StarPU's
    /// `starpu_data_set_reduction_methods` on distributed data): `init` makes the neutral
    /// element, `combine(acc, x)` folds `x` into `acc`. Tasks on any rank may then access
    /// `h` with [`crate::DistTask::redux`]; see the module's documentation for when the
    /// contributions reach the owner, and in what order.
    pub fn set_reduction<T: DeviceData>(
        &mut self,
        h: &mut DistHandle<T>,
        name: &str,
        init: impl Fn() -> T + Send + Sync + 'static,
        combine: impl Fn(&mut T, T) + Send + Sync + 'static,
    ) -> Result<(), DistError> {
        let init: Arc<dyn Fn() -> T + Send + Sync> = Arc::new(init);
        let combine: Arc<dyn Fn(&mut T, T) + Send + Sync> = Arc::new(combine);
        let (i, c) = (init.clone(), combine.clone());
        self.runtime()
            .set_reduction(&h.local, name, move || i(), move |acc, x| c(acc, x))
            .map_err(|source| DistError::Runtime {
                rank: self.rank,
                source,
            })?;
        let i = init.clone();
        let reset = Codelet::new(format!("{name}_init")).cpu(move |ctx| *ctx.w::<T>(0) = i());
        let fold = Codelet::new(format!("{name}_fold")).cpu(move |ctx| {
            let x = ctx.r::<T>(1).clone();
            combine(ctx.w::<T>(0), x);
        });
        h.red = Some(Arc::new(DistReduction { init, reset, fold }));
        Ok(())
    }

    /// A REDUX access of `h` by a task that runs on `exec`.
    pub(crate) fn start_redux(
        &mut self,
        h: &dyn DistAccess,
        exec: usize,
        codelet: &str,
    ) -> Result<(), DistError> {
        let me = self.rank;
        // Refused on every rank alike, so that they keep the same flow.
        if !h.has_reduction() {
            return Err(DistError::NoReduction {
                codelet: codelet.to_owned(),
                handle: h.dist_id(),
            });
        }
        let meta = &mut self.handles[h.dist_id() as usize];
        let owner = meta.owner;
        // The value is about to change: no other rank's copy holds it any more.
        for (r, v) in meta.valid.iter_mut().enumerate() {
            *v = r == owner;
        }
        if exec == owner || meta.contributors[exec] {
            return Ok(());
        }
        meta.contributors[exec] = true;
        if exec != me {
            return Ok(());
        }
        h.redux_reset(self.runtime())
            .map_err(|source| DistError::Runtime { rank: me, source })
    }

    /// Ends `h`'s reduction phase, if one is open: the contributions go to the owner.
    pub(crate) fn end_redux(&mut self, h: &dyn DistAccess) -> Result<(), DistError> {
        let me = self.rank;
        let meta = &mut self.handles[h.dist_id() as usize];
        if !meta.contributors.contains(&true) {
            return Ok(());
        }
        let owner = meta.owner;
        let from: Vec<usize> = (0..meta.contributors.len())
            .filter(|&r| std::mem::take(&mut meta.contributors[r]))
            .collect();
        for r in from {
            if r == me {
                self.post(true, owner, h)?;
            } else if me == owner {
                h.redux_collect(self, r)?;
            }
        }
        Ok(())
    }
}
