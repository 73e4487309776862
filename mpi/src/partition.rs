//! Partitions of distributed data (StarPU-MPI's partitioned handles): a distributed
//! vector split into parts, each a distributed handle of its own with the vector's owner,
//! so that a task on another rank receives only the part it reads.
//!
//! Every rank calls [`DistRuntime::partition`] and [`DistRuntime::unpartition`] at the
//! same point of the flow, as every other call. On each rank the parts are views on that
//! rank's copy of the vector (`VectorPart`, as `Runtime::partition` makes them), taken once
//! the accesses submitted to it before are done there; a rank whose copy of the vector was
//! valid has valid parts (no message to read them). While partitioned, the vector itself
//! is refused ([`DistError::Partitioned`]) and its copies are kept in place (the cache
//! does not free them). `unpartition` brings every part's value to the owner, retires the
//! parts, and gives the vector back: valid on its owner, where the parts' writes landed,
//! and nowhere else.

use std::ops::Deref;

use taskwatt_runtime::{DataSize, Element, Filter, Partition as _, VectorPart};

use crate::dist::{DistHandle, DistRuntime};
use crate::DistError;

/// The parts of a partitioned distributed vector (see the module docs), until
/// [`DistRuntime::unpartition`]. Derefs to the parts.
#[derive(Debug)]
pub struct DistParts<E> {
    parent: u32,
    owner: usize,
    parts: Vec<DistHandle<VectorPart<E>>>,
}

impl<E> Deref for DistParts<E> {
    type Target = [DistHandle<VectorPart<E>>];
    fn deref(&self) -> &[DistHandle<VectorPart<E>>] {
        &self.parts
    }
}

impl<E> DistParts<E> {
    /// The partitioned vector's id.
    pub fn parent(&self) -> u32 {
        self.parent
    }
}

impl DistRuntime {
    /// Splits the distributed vector `h` into parts by `filter` (`Filter::Blocks(n)`), each
    /// a distributed handle owned by `h`'s owner (see the module docs). Every rank's copy
    /// must have the owner's length (register the same length everywhere).
    pub fn partition<E: Element + DataSize>(
        &mut self,
        h: &DistHandle<Vec<E>>,
        filter: Filter,
    ) -> Result<DistParts<E>, DistError> {
        self.end_redux(h)?;
        self.not_partitioned(h.id, "partitioned again")?;
        let (rank, id) = (self.rank, h.id as usize);
        let want = self.handles[id].bytes;
        let parts = {
            // This rank's copy, once what was submitted to it before is done here.
            let waiting = self.waits.enter();
            let mut g = self
                .runtime()
                .acquire_mut(&h.local)
                .map_err(|source| DistError::Runtime { rank, source })?;
            drop(waiting);
            let have = std::mem::size_of_val(g.as_slice()) as u64;
            if have != want {
                return Err(DistError::BadPartition {
                    rank,
                    handle: h.id,
                    reason: format!(
                        "this rank's copy has {have} bytes and the owner's {want}: register a \
                         vector of the same length on every rank to partition it"
                    ),
                });
            }
            g.split(filter).map_err(|reason| DistError::BadPartition {
                rank,
                handle: h.id,
                reason,
            })?
            // The guard goes: the views stay valid, since the vector is refused and its
            // storage kept until `unpartition`.
        };
        let meta = &mut self.handles[id];
        meta.partitioned = true;
        // The cache must not free the storage the parts view.
        meta.kept_evict = meta.evict.take();
        let valid = meta.valid.clone();
        let mut out = Vec::with_capacity(parts.len());
        for (p, _) in parts {
            let d = self.register(h.owner, p)?;
            self.handles[d.id as usize].valid = valid.clone();
            out.push(d);
        }
        Ok(DistParts {
            parent: h.id,
            owner: h.owner,
            parts: out,
        })
    }

    /// Gives a partitioned vector back (see the module docs): every part's value goes to
    /// the owner, the parts are retired, and the vector is valid on its owner only.
    pub fn unpartition<E: Element + DataSize>(
        &mut self,
        parts: DistParts<E>,
    ) -> Result<(), DistError> {
        let DistParts {
            parent,
            owner,
            parts,
        } = parts;
        for p in &parts {
            self.fetch_to(p, owner)?;
        }
        // Each waits for the accesses to its part here (the owner's receives included).
        for p in parts {
            self.unregister(p)?;
        }
        let meta = &mut self.handles[parent as usize];
        meta.partitioned = false;
        meta.evict = meta.kept_evict.take();
        for (r, v) in meta.valid.iter_mut().enumerate() {
            *v = r == owner;
        }
        Ok(())
    }

    /// Refuses a use of handle `id` while it is partitioned.
    pub(crate) fn not_partitioned(&self, id: u32, what: &'static str) -> Result<(), DistError> {
        match self.handles.get(id as usize) {
            Some(m) if m.partitioned => Err(DistError::Partitioned {
                rank: self.rank,
                handle: id,
                what,
            }),
            _ => Ok(()),
        }
    }
}
