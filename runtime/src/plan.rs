//! The workers a [`RuntimeBuilder`] will start: where each CPU worker goes on the
//! topology (the first hardware thread of each core first), the GPU workers beside the
//! first, the reserved workers on the cores after the workers', and how many cores the
//! workers leave free.

use taskwatt_traces::{Arch, WorkerInfo};

use crate::builder::{RuntimeBuilder, MAX_WORKERS};
use crate::error::RuntimeError;
use crate::handle::MAX_DEVICES;
use crate::topology::{Pu, Topology};

impl RuntimeBuilder {
    /// The workers `build` will start (ids, pinned CPUs, cores, packages), without
    /// starting anything: an energy meter needs them before the runtime exists.
    pub fn worker_plan(&self) -> Result<Vec<WorkerInfo>, RuntimeError> {
        self.plan().map(|(_, w)| w)
    }

    /// How many cores of the CPU workers' packages no CPU worker uses (first hardware
    /// threads only): what [`RuntimeBuilder::reserved_workers`] can take without sharing a
    /// core. Type calibration reserves them (see runtime/src/reserved.rs).
    pub fn spare_cores(&self) -> Result<usize, RuntimeError> {
        let (topology, workers) = self.plan()?;
        let allowed = self.allowed_cpus();
        let cpus: Vec<&WorkerInfo> = workers
            .iter()
            .filter(|w| w.arch == Arch::Cpu)
            .take(workers.iter().filter(|w| w.arch == Arch::Cpu).count() - self.reserved)
            .collect();
        let packages: std::collections::BTreeSet<u32> = cpus.iter().map(|w| w.package).collect();
        let cores: std::collections::BTreeSet<(u32, Option<u32>, u32)> = topology
            .pus
            .iter()
            .filter(|p| allowed.is_empty() || allowed.contains(&p.os_index))
            .filter(|p| packages.contains(&p.package))
            // A PU of unknown core is a core of its own.
            .map(|p| {
                (
                    p.package,
                    p.core,
                    if p.core.is_some() { 0 } else { p.os_index },
                )
            })
            .collect();
        Ok(cores.len().saturating_sub(cpus.len()))
    }

    /// The CPUs this process may run on, within the share given to `cpus`.
    fn allowed_cpus(&self) -> Vec<u32> {
        let mut allowed: Vec<u32> = core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id as u32)
            .collect();
        if let Some(share) = &self.cpus {
            let mine: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|c| share.contains(c))
                .collect();
            if !mine.is_empty() {
                allowed = mine;
            }
        }
        allowed
    }

    pub(crate) fn plan(&self) -> Result<(Topology, Vec<WorkerInfo>), RuntimeError> {
        let topology = Topology::discover();
        let allowed = self.allowed_cpus();
        let n = match self.workers {
            Some(0) => {
                return Err(RuntimeError::Workers(
                    "0 workers: ask for at least 1".into(),
                ))
            }
            Some(n) if n > MAX_WORKERS => {
                return Err(RuntimeError::Workers(format!(
                    "{n} workers: at most {MAX_WORKERS} are supported"
                )))
            }
            Some(n) => n,
            None => allowed.len().clamp(1, MAX_WORKERS),
        };
        if self.gpus > MAX_DEVICES {
            return Err(RuntimeError::Workers(format!(
                "{} {} GPUs: at most {MAX_DEVICES} are supported (one memory node each)",
                self.gpus, self.gpu_backend
            )));
        }
        if self.reserved > crate::task::MAX_RESERVED {
            return Err(RuntimeError::Workers(format!(
                "{} reserved workers: at most {} are supported",
                self.reserved,
                crate::task::MAX_RESERVED
            )));
        }
        if n + self.reserved > MAX_WORKERS {
            return Err(RuntimeError::Workers(format!(
                "{n} workers and {} reserved: at most {MAX_WORKERS} in all are supported",
                self.reserved
            )));
        }
        let placement = topology.placement(n + self.reserved, &allowed);
        let helper = self.helper_id(n)?;
        let workers = (0..n)
            .map(|i| {
                let pu = placement.get(i);
                // The helper is the application's thread: never pinned.
                cpu_worker(i, pu, self.pin && helper != Some(i))
            })
            .collect::<Vec<_>>();
        let mut workers = workers;
        for i in 0..self.gpus {
            let near = workers.first().map(|w| (w.package, w.numa));
            workers.push(WorkerInfo {
                id: (n + i) as u32,
                arch: Arch::Gpu,
                cpu: None,
                core: None,
                package: near.map_or(0, |(p, _)| p),
                numa: near.and_then(|(_, m)| m),
                device: Some(i as u32),
            });
        }
        // Reserved workers last, on the cores after the workers' (the placement of the
        // first `n` does not depend on how many more are placed).
        for i in 0..self.reserved {
            workers.push(cpu_worker(
                n + self.gpus + i,
                placement.get(n + i),
                self.pin,
            ));
        }
        Ok((topology, workers))
    }
}

/// CPU worker `id` on `pu`, pinned to it if `pin`.
fn cpu_worker(id: usize, pu: Option<&Pu>, pin: bool) -> WorkerInfo {
    WorkerInfo {
        id: id as u32,
        arch: Arch::Cpu,
        cpu: if pin { pu.map(|p| p.os_index) } else { None },
        core: pu.and_then(|p| p.core),
        package: pu.map_or(0, |p| p.package),
        numa: pu.and_then(|p| p.numa),
        device: None,
    }
}
