//! Codelets: named task types with one implementation per architecture (StarPU's
//! `struct starpu_codelet`).
//!
//! A codelet is cheap to clone (an `Arc`). The runtime gives each codelet a dense id the
//! first time a task of it is submitted; that id is what the trace records and what the
//! energy attribution groups by. The id is cached in the codelet, tagged with the
//! runtime's epoch, so the lookup on the submit path is one atomic load.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use taskwatt_traces::Arch;

use crate::context::TaskCtx;

/// The signature of an implementation: it reads and writes the task's data through the
/// context.
pub type ImplFn = dyn Fn(&TaskCtx<'_>) + Send + Sync + 'static;

/// Aligned to a cache line, so that the `Arc`'s counts sit alone in the line before it.
/// Submissions wrote those counts (`Task::new` cloned the codelet, and a recycled node
/// dropped the one it held; now a task borrows its codelet, and only a new node takes a
/// reference), and every worker reads `impls` and `name` for every task: in one line,
/// each task's start waited for the line the submitter had just written.
#[repr(align(64))]
pub(crate) struct CodeletInner {
    pub(crate) name: String,
    pub(crate) impls: [Option<Arc<ImplFn>>; Arch::COUNT],
    /// `(runtime epoch << 32) | dense id` of the last runtime that registered it.
    pub(crate) slot: AtomicU64,
    /// Expected durations per footprint and architecture (ns), noted by a runtime whose
    /// policy reads them (dmda); empty otherwise.
    pub(crate) expected:
        parking_lot::RwLock<std::collections::HashMap<u64, [Option<f64>; Arch::COUNT]>>,
    /// Extra power per architecture, W, from the energy model of the last runtime that
    /// registered it with one (`RuntimeBuilder::task_powers`; for dmdae).
    pub(crate) power_w: parking_lot::RwLock<[Option<f64>; Arch::COUNT]>,
}

/// A named task type with implementations per architecture.
///
/// ```
/// use taskwatt_runtime::Codelet;
///
/// let scale = Codelet::new("scale").cpu(|ctx| {
///     let v = ctx.rw::<Vec<f64>>(0);
///     let k = *ctx.arg::<f64>();
///     v.iter_mut().for_each(|x| *x *= k);
/// });
/// assert_eq!(scale.name(), "scale");
/// ```
#[derive(Clone)]
pub struct Codelet {
    pub(crate) inner: Arc<CodeletInner>,
}

impl CodeletInner {
    /// The expected duration of a task of this codelet on `arch` with `footprint`, ns, as
    /// the runtime noted it from its performance models (see [`CodeletInner::note_expected`]).
    pub(crate) fn expected_ns(&self, arch: Arch, footprint: u64) -> Option<f64> {
        self.expected
            .read()
            .get(&footprint)
            .and_then(|e| e[arch.index()])
    }

    /// Whether durations at `footprint` were noted.
    pub(crate) fn has_expected(&self, footprint: u64) -> bool {
        self.expected.read().contains_key(&footprint)
    }

    /// Notes the expected duration on `arch` at `footprint` (none: not calibrated). A
    /// codelet used by two runtimes with different models keeps the last noted.
    pub(crate) fn note_expected(&self, arch: Arch, footprint: u64, ns: Option<f64>) {
        self.expected.write().entry(footprint).or_default()[arch.index()] = ns;
    }

    /// The architectures with an implementation, as a policy sees them.
    #[inline]
    pub(crate) fn arch_mask(&self) -> taskwatt_scheduler::ArchMask {
        let mut m = taskwatt_scheduler::ArchMask::NONE;
        for a in Arch::ALL {
            if self.impls[a.index()].is_some() {
                m = m.or(taskwatt_scheduler::ArchMask::of_index(a.index()));
            }
        }
        m
    }
}

impl Codelet {
    /// A codelet with no implementation yet. Add at least one with [`Codelet::cpu`].
    pub fn new(name: impl Into<String>) -> Codelet {
        Codelet {
            inner: Arc::new(CodeletInner {
                expected: Default::default(),
                power_w: Default::default(),
                name: name.into(),
                impls: [None, None],
                slot: AtomicU64::new(0),
            }),
        }
    }

    /// Adds (or replaces) the CPU implementation.
    pub fn cpu<F>(self, f: F) -> Codelet
    where
        F: Fn(&TaskCtx<'_>) + Send + Sync + 'static,
    {
        self.with_impl(Arch::Cpu, Arc::new(f))
    }

    /// Adds (or replaces) the GPU implementation. It runs on a GPU worker's driving thread;
    /// see docs/accelerators.md for how GPU workers plug in.
    pub fn gpu<F>(self, f: F) -> Codelet
    where
        F: Fn(&TaskCtx<'_>) + Send + Sync + 'static,
    {
        self.with_impl(Arch::Gpu, Arc::new(f))
    }

    fn with_impl(self, arch: Arch, f: Arc<ImplFn>) -> Codelet {
        let mut impls = self.inner.impls.clone();
        impls[arch.index()] = Some(f);
        Codelet {
            inner: Arc::new(CodeletInner {
                expected: Default::default(),
                power_w: Default::default(),
                name: self.inner.name.clone(),
                impls,
                slot: AtomicU64::new(0),
            }),
        }
    }

    /// The codelet's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The architectures it has implementations for.
    pub fn archs(&self) -> Vec<Arch> {
        Arch::ALL
            .into_iter()
            .filter(|a| self.inner.impls[a.index()].is_some())
            .collect()
    }

    /// Whether it can run on `arch`.
    pub fn implements(&self, arch: Arch) -> bool {
        self.inner.impls[arch.index()].is_some()
    }
}

impl CodeletInner {
    /// The dense id cached for `epoch`, if this codelet was registered by that runtime.
    #[inline]
    pub(crate) fn cached_id(&self, epoch: u32) -> Option<u32> {
        // Relaxed: the slot only caches a value the registering thread also keeps in the
        // runtime's registry (under its lock); a stale read just takes the slow path.
        let v = self.slot.load(Ordering::Relaxed);
        ((v >> 32) as u32 == epoch).then_some(v as u32)
    }

    pub(crate) fn cache_id(&self, epoch: u32, id: u32) {
        self.slot
            .store(((epoch as u64) << 32) | id as u64, Ordering::Relaxed);
    }
}

impl fmt::Debug for Codelet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codelet")
            .field("name", &self.inner.name)
            .field("archs", &self.archs())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_workers_read_shares_no_line_with_the_reference_counts() {
        use std::mem::{align_of, offset_of, size_of};
        // `Arc` puts its two counts first and the value at the value's alignment: a
        // line-aligned value starts on the line after the counts.
        assert!(align_of::<CodeletInner>() >= 64);
        // What a worker reads for each task fits in that first line.
        let name_end = offset_of!(CodeletInner, name) + size_of::<String>();
        let impls_end =
            offset_of!(CodeletInner, impls) + size_of::<[Option<Arc<ImplFn>>; Arch::COUNT]>();
        assert!(name_end <= 64 && impls_end <= 64, "{name_end} {impls_end}");
    }
}
