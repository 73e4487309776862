//! The emulated device: a memory node of separate allocations (clones of the value), a
//! worker that runs codelets on the CPU. See the `device` module's docs.

use std::any::Any;

use super::{Backend, Replica, WorkerState};
use crate::handle::Copier;
use crate::inline::Value;

/// An emulated GPU.
pub(crate) struct Emulated;

impl Backend for Emulated {
    fn holds(&self, _copier: &Copier) -> bool {
        true
    }

    fn copy_in(
        &self,
        copier: &Copier,
        home: &Value,
        dst: &mut Option<Replica>,
    ) -> Result<(), String> {
        *dst = Some((copier.from_home)(home));
        Ok(())
    }

    fn copy_from(
        &self,
        copier: &Copier,
        _from: &dyn Backend,
        src: &(dyn Any + Send + Sync),
        dst: &mut Option<Replica>,
    ) -> Result<(), String> {
        *dst = Some((copier.between)(src));
        Ok(())
    }

    fn copy_out(
        &self,
        copier: &Copier,
        src: &(dyn Any + Send + Sync),
        home: &mut Value,
    ) -> Result<(), String> {
        (copier.to_home)(src, home);
        Ok(())
    }

    fn worker(&self) -> Result<Option<WorkerState>, String> {
        Ok(None)
    }

    fn describe(&self) -> String {
        "emulated GPU (separate allocations in main memory; runs codelets on the CPU)".into()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
