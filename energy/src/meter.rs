//! The meter interface: what every backend (RAPL perf, RAPL powercap, NVML, simulated)
//! offers the sampler.
//!
//! A [`Meter`] describes itself, lists its domains once ([`DomainSpec`]), and on each
//! [`Meter::read`] gives one *raw* reading per domain: a counter value in the domain's own unit,
//! or a power in W. Turning raw readings into cumulative, wrap-corrected joules is not the
//! backend's business: it happens in one place, [`crate::wrap`], driven by the sampler. This
//! keeps backends to "find the sensor, read the number" and makes the wrap logic testable once.

use serde::Serialize;
use taskwatt_traces::{
    Arch, Domain, DomainId, GroundTruth, SensorKind, Timestamp, WorkerId, WorkerInfo,
};

use crate::EnergyError;

/// What a meter is, for the trace's `MeterInfo` and for `taskwatt meters`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeterDescription {
    /// Backend name: `rapl-perf`, `rapl-powercap`, `nvml` or `sim`.
    pub backend: String,
    /// Whether the readings are simulated rather than measured.
    pub simulated: bool,
    /// Human-readable description (paths, device names; "simulated" for the sim).
    pub description: String,
}

/// Which part of the machine a domain's energy covers; the sampler turns it into the list of
/// workers the domain covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Coverage {
    /// One CPU package (socket): every worker whose `package` matches, GPU drivers included.
    Package {
        /// Package id.
        id: u32,
    },
    /// One GPU: the GPU workers driving device `index`.
    Gpu {
        /// Device index.
        index: u32,
    },
    /// The whole platform: every worker.
    Platform,
}

impl Coverage {
    /// The workers this coverage includes, in the order of `workers`.
    pub fn workers(self, workers: &[WorkerInfo]) -> Vec<WorkerId> {
        workers
            .iter()
            .filter(|w| match self {
                Coverage::Package { id } => w.package == id,
                Coverage::Gpu { index } => w.arch == Arch::Gpu && w.device == Some(index),
                Coverage::Platform => true,
            })
            .map(|w| w.id)
            .collect()
    }
}

/// One domain a meter reads, as the meter describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DomainSpec {
    /// What it measures.
    pub domain: Domain,
    /// The sensor's own name (`package-0`, `energy-pkg`, `NVIDIA H100`...).
    pub name: String,
    /// Unit of the raw counter, e.g. `uJ`, `mJ`, `2^-14 J`, or `W` for power sensors.
    pub unit: String,
    /// Joules per raw counter unit (1e-6 for `uJ`); 1 for power sensors (raw is W).
    pub joules_per_unit: f64,
    /// Smallest energy step the sensor can show, in J.
    pub resolution_j: f64,
    /// The raw counter wraps modulo this many units (e.g. `max_energy_range_uj`); `None` for
    /// counters that do not wrap in practice (64-bit perf and NVML counters) and for powers.
    pub wrap_range_raw: Option<u64>,
    /// What the sensor reports.
    pub sensor: SensorKind,
    /// How often the sensor's value changes, in ns, if known.
    pub update_interval_ns: Option<u64>,
    /// Which part of the machine it covers.
    pub covers: Coverage,
}

impl DomainSpec {
    /// The wrap range in J, if the counter wraps.
    pub fn wrap_range_j(&self) -> Option<f64> {
        self.wrap_range_raw.map(|r| r as f64 * self.joules_per_unit)
    }

    /// The trace's description of this domain, as domain `id` of meter `meter`, covering
    /// those of `workers` it covers.
    pub fn info(
        &self,
        id: taskwatt_traces::DomainId,
        meter: taskwatt_traces::MeterId,
        workers: &[WorkerInfo],
    ) -> taskwatt_traces::DomainInfo {
        taskwatt_traces::DomainInfo {
            id,
            meter,
            domain: self.domain,
            name: self.name.clone(),
            unit: self.unit.clone(),
            resolution_j: self.resolution_j,
            wrap_range_j: self.wrap_range_j(),
            update_interval_ns: self.update_interval_ns,
            sensor: self.sensor,
            workers: self.covers.workers(workers),
        }
    }
}

/// One raw reading of one domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RawReading {
    /// A cumulative counter, in the domain's unit, as the sensor gives it (may wrap).
    Counter(u64),
    /// A power, in W, as the sensor gives it (the sampler integrates it).
    Power(f64),
}

impl RawReading {
    /// The value as recorded in `EnergySample::raw`: the counter, or NaN for a power.
    pub fn raw_for_trace(self) -> f64 {
        match self {
            RawReading::Counter(v) => v as f64,
            RawReading::Power(_) => f64::NAN,
        }
    }
}

/// The result of reading one domain: a domain can fail (a zone vanished) while the others of
/// the same meter still read.
pub type DomainRead = Result<RawReading, EnergyError>;

/// An energy meter backend.
///
/// Call order: [`Meter::domains`] any time (the list never changes), then [`Meter::read`]
/// repeatedly from one thread (the sampler's). Implementations do their expensive discovery in
/// their constructor, so that `read` only reads.
pub trait Meter: Send {
    /// What this meter is.
    fn describe(&self) -> MeterDescription;

    /// The domains it reads, in the order [`Meter::read`] fills its output.
    fn domains(&self) -> &[DomainSpec];

    /// Reads every domain now. `out` has exactly `self.domains().len()` slots; slot `i` gets
    /// domain `i`'s reading or the error that prevented it.
    fn read(&mut self, out: &mut [DomainRead]);

    /// When the value domain `i` gave at the last [`Meter::read`] was current, on the trace
    /// clock, if the meter knows it exactly (a simulator knows its update ticks). `None`
    /// (real sensors) makes the sampler stamp the middle of the read; the attribution then
    /// maps each read to the update it shows (`attribution/align.rs`).
    fn value_time(&self, i: usize) -> Option<Timestamp> {
        let _ = i;
        None
    }

    /// Whether a task's worker may take a reading, between two tasks (see
    /// [`SamplerTap`](crate::SamplerTap)): a read that is quick and touches nothing the
    /// worker's task could be waiting on (a sysfs file, a perf counter, a simulation).
    /// NVML's calls can take a driver lock and milliseconds, so its meter says no; a meter
    /// that says no is read by the sampler's thread only.
    fn readable_from_workers(&self) -> bool {
        true
    }

    /// For simulated meters, the powers they were configured with, using `ids[i]` as the trace
    /// id of domain `i`. Real meters have no truth and return `None`.
    fn ground_truth(&self, ids: &[DomainId]) -> Option<GroundTruth> {
        let _ = ids;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: WorkerId, arch: Arch, package: u32, device: Option<u32>) -> WorkerInfo {
        WorkerInfo {
            id,
            arch,
            cpu: Some(id),
            core: Some(id),
            package,
            numa: Some(package),
            device,
        }
    }

    #[test]
    fn coverage_maps_workers_by_package_and_device() {
        let ws = [
            worker(0, Arch::Cpu, 0, None),
            worker(1, Arch::Cpu, 1, None),
            worker(2, Arch::Gpu, 0, Some(0)),
            worker(3, Arch::Gpu, 1, Some(1)),
        ];
        assert_eq!(Coverage::Package { id: 0 }.workers(&ws), vec![0, 2]);
        assert_eq!(Coverage::Package { id: 1 }.workers(&ws), vec![1, 3]);
        assert_eq!(Coverage::Gpu { index: 1 }.workers(&ws), vec![3]);
        assert_eq!(
            Coverage::Gpu { index: 7 }.workers(&ws),
            Vec::<WorkerId>::new()
        );
        assert_eq!(Coverage::Platform.workers(&ws), vec![0, 1, 2, 3]);
    }

    #[test]
    fn wrap_range_in_joules() {
        let d = DomainSpec {
            domain: Domain::CpuPackage { id: 0 },
            name: "package-0".into(),
            unit: "uJ".into(),
            joules_per_unit: 1e-6,
            resolution_j: 1e-6,
            wrap_range_raw: Some(262_143_328_850),
            sensor: SensorKind::EnergyCounter,
            update_interval_ns: Some(1_000_000),
            covers: Coverage::Package { id: 0 },
        };
        assert!((d.wrap_range_j().unwrap() - 262_143.328_85).abs() < 1e-6);
        assert!(RawReading::Power(3.0).raw_for_trace().is_nan());
        assert_eq!(RawReading::Counter(7).raw_for_trace(), 7.0);
    }
}
