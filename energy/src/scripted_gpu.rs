//! A scripted NVIDIA GPU: a [`GpuDevice`] that answers from queues, so that the NVML meter
//! and the sampler can be tested without a GPU (feature `testkit`, on by default).

use std::collections::VecDeque;

use crate::nvml::{GpuArchitecture, GpuDevice};
use crate::EnergyError;

/// One scripted answer of a [`ScriptedGpu`].
#[derive(Clone, Debug, PartialEq)]
pub enum Scripted<T> {
    /// Answer this value.
    Value(T),
    /// Fail with this NVML message (e.g. `GPU is lost`).
    Fail(String),
}

/// A scripted GPU for tests: answers its energy and power calls from queues, repeating the
/// last answer when a queue runs dry. The meter's constructor consumes one energy answer to
/// probe for the counter.
#[derive(Clone, Debug)]
pub struct ScriptedGpu {
    index: u32,
    name: String,
    arch: GpuArchitecture,
    energy: VecDeque<Scripted<Option<u64>>>,
    pub(crate) power: VecDeque<Scripted<u32>>,
    uuid: Option<String>,
}

impl ScriptedGpu {
    /// A Volta-or-later GPU whose energy counter reads `energies_mj` in turn.
    pub fn with_energy(index: u32, name: &str, arch: GpuArchitecture, energies_mj: &[u64]) -> Self {
        ScriptedGpu {
            index,
            name: name.into(),
            arch,
            energy: energies_mj
                .iter()
                .map(|&e| Scripted::Value(Some(e)))
                .collect(),
            power: VecDeque::from([Scripted::Value(0)]),
            uuid: None,
        }
    }

    /// A GPU without the energy counter, whose power reads `powers_mw` in turn.
    pub fn power_only(index: u32, name: &str, arch: GpuArchitecture, powers_mw: &[u32]) -> Self {
        ScriptedGpu {
            index,
            name: name.into(),
            arch,
            energy: VecDeque::from([Scripted::Value(None)]),
            power: powers_mw.iter().map(|&p| Scripted::Value(p)).collect(),
            uuid: None,
        }
    }

    /// Its UUID, as NVML would write it (`GPU-…`).
    pub fn with_uuid(mut self, uuid: &str) -> Self {
        self.uuid = Some(uuid.into());
        self
    }

    /// Appends an energy answer (a value or a failure).
    pub fn then_energy(mut self, answer: Scripted<Option<u64>>) -> Self {
        self.energy.push_back(answer);
        self
    }

    /// Appends a power answer (a value or a failure).
    pub fn then_power(mut self, answer: Scripted<u32>) -> Self {
        self.power.push_back(answer);
        self
    }

    fn next<T: Clone>(
        queue: &mut VecDeque<Scripted<T>>,
        index: u32,
        call: &'static str,
    ) -> Result<T, EnergyError> {
        let answer = if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        };
        match answer {
            Some(Scripted::Value(v)) => Ok(v),
            Some(Scripted::Fail(message)) => Err(EnergyError::Nvml {
                device: format!("GPU {index}"),
                call,
                message,
            }),
            None => Err(EnergyError::Nvml {
                device: format!("GPU {index}"),
                call,
                message: "the script is empty".into(),
            }),
        }
    }
}

impl GpuDevice for ScriptedGpu {
    fn index(&self) -> u32 {
        self.index
    }
    fn name(&self) -> Result<String, EnergyError> {
        Ok(self.name.clone())
    }
    fn architecture(&self) -> GpuArchitecture {
        self.arch
    }
    fn total_energy_consumption_mj(&mut self) -> Result<Option<u64>, EnergyError> {
        Self::next(
            &mut self.energy,
            self.index,
            "nvmlDeviceGetTotalEnergyConsumption",
        )
    }
    fn power_usage_mw(&mut self) -> Result<u32, EnergyError> {
        Self::next(&mut self.power, self.index, "nvmlDeviceGetPowerUsage")
    }
    fn uuid(&self) -> Option<String> {
        self.uuid.clone()
    }
}
