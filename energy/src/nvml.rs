//! NVIDIA GPUs through NVML (`nvml`).
//!
//! Two sensors, in order of preference:
//! 1. `nvmlDeviceGetTotalEnergyConsumption` (Volta and later): a cumulative counter in mJ
//!    since the driver loaded. The driver refreshes it every 20-100 ms depending on the board,
//!    so consecutive reads closer than that see the same value; the domain records a 100 ms
//!    update interval (the worst case) so that attribution intervals are chosen longer.
//! 2. `nvmlDeviceGetPowerUsage` (mW), integrated by the sampler with the trapezoid rule
//!    ([`crate::wrap::PowerIntegrator`]). On Ampere and later, except GA100 (A100, A30, A800),
//!    the value is a 1 s running average, so the integrated energy lags the load by about
//!    half a second; on older parts and GA100 it is a short-window ("instant") reading. The
//!    window is recorded as `SensorKind::IntegratedPower { window_ns }`.
//!
//! The devices are behind the [`GpuDevice`] trait: [`NvmlMeter::open`] loads
//! `libnvidia-ml.so.1` at run time (nvml-wrapper uses libloading, so the binary does not link
//! against it), and tests script a device with `ScriptedGpu` (feature `testkit`). A missing library is
//! *unavailability* ([`EnergyError::NoNvidiaDriver`]), not a failure: most machines have no
//! NVIDIA GPU.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use taskwatt_traces::{Domain, SensorKind};

use crate::meter::{Coverage, DomainRead, DomainSpec, Meter, MeterDescription, RawReading};
use crate::EnergyError;

/// The energy counter's worst-case refresh interval (it refreshes every 20-100 ms).
pub const NVML_ENERGY_UPDATE_NS: u64 = 100_000_000;
/// The 1 s averaging window of `power_usage` on Ampere and later (except GA100).
pub const NVML_AVERAGE_WINDOW_NS: u64 = 1_000_000_000;
/// The short window of an "instant" `power_usage` reading (older parts and GA100), about
/// 25 ms of every 100 ms according to measurements of A100/H100 boards.
pub const NVML_INSTANT_WINDOW_NS: u64 = 25_000_000;

/// A GPU architecture, as far as energy sensing cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuArchitecture {
    /// Kepler (2012).
    Kepler,
    /// Maxwell.
    Maxwell,
    /// Pascal.
    Pascal,
    /// Volta: first with the total energy counter.
    Volta,
    /// Turing.
    Turing,
    /// Ampere: `power_usage` becomes a 1 s average (except GA100).
    Ampere,
    /// Ada Lovelace.
    Ada,
    /// Hopper.
    Hopper,
    /// Blackwell.
    Blackwell,
    /// Unknown, most likely newer: treated as newest.
    Unknown,
}

impl GpuArchitecture {
    /// Whether `power_usage` is a 1 s average on a device of this architecture named `name`.
    pub fn power_is_one_second_average(self, name: &str) -> bool {
        let ga100 = ["A100", "A30", "A800"].iter().any(|m| name.contains(m));
        self >= GpuArchitecture::Ampere && !ga100
    }
}

/// One GPU as the NVML meter needs it. The real implementation calls NVML; tests use
/// [`ScriptedGpu`](crate::ScriptedGpu) (feature `testkit`).
pub trait GpuDevice: Send {
    /// Its NVML index.
    fn index(&self) -> u32;
    /// Its product name, e.g. `NVIDIA H100 80GB HBM3`.
    fn name(&self) -> Result<String, EnergyError>;
    /// Its architecture.
    fn architecture(&self) -> GpuArchitecture;
    /// Total energy since the driver loaded, in mJ; `Ok(None)` when the device does not
    /// support the counter (before Volta).
    fn total_energy_consumption_mj(&mut self) -> Result<Option<u64>, EnergyError>;
    /// Current power draw in mW (see the module docs for its averaging).
    fn power_usage_mw(&mut self) -> Result<u32, EnergyError>;
    /// Its UUID as NVML writes it (`GPU-8c1f…`), to match it with a CUDA device; `None`
    /// when the driver does not say.
    fn uuid(&self) -> Option<String> {
        None
    }
}

/// A GPU UUID without its `GPU-` prefix, in lower case: NVML writes `GPU-` and lower-case
/// hex, a CUDA `CUuuid` is 16 bytes that callers format as they like.
pub(crate) fn normalize_uuid(uuid: &str) -> String {
    let t = uuid.trim();
    let t = t
        .strip_prefix("GPU-")
        .or_else(|| t.strip_prefix("gpu-"))
        .unwrap_or(t);
    t.to_ascii_lowercase()
}

/// How one GPU is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    EnergyCounter,
    Power,
}

/// Which of a GPU's sensors the meter reads when it has the energy counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NvmlSensors {
    /// The counter and the power readings, as two domains of the same GPU (the counter
    /// first), which attribution fits together (the default).
    #[default]
    Both,
    /// The counter alone.
    Counter,
}

impl NvmlSensors {
    /// From `TASKWATT_NVML_SENSORS` (`both`, the default, or `counter`).
    pub fn from_env() -> Result<NvmlSensors, EnergyError> {
        match std::env::var("TASKWATT_NVML_SENSORS") {
            Err(_) => Ok(NvmlSensors::Both),
            Ok(v) => match v.trim() {
                "" | "both" => Ok(NvmlSensors::Both),
                "counter" => Ok(NvmlSensors::Counter),
                other => Err(EnergyError::BadEnv {
                    variable: "TASKWATT_NVML_SENSORS",
                    value: other.to_owned(),
                    expected: "`both` (the energy counter and the power readings, fitted \
                               together) or `counter`",
                }),
            },
        }
    }
}

/// A meter over NVIDIA GPUs.
pub struct NvmlMeter {
    devices: Vec<Box<dyn GpuDevice>>,
    /// One per domain: the device (index into `devices`) and how it is read.
    reads: Vec<(usize, Source)>,
    specs: Vec<DomainSpec>,
}

impl std::fmt::Debug for NvmlMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlMeter")
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

impl NvmlMeter {
    /// Loads NVML from the system (`libnvidia-ml.so.1`) and opens every GPU.
    pub fn open() -> Result<NvmlMeter, EnergyError> {
        Self::open_with_library(None)
    }

    /// Loads NVML from `library` (or the system's `libnvidia-ml.so.1` when `None`) and opens
    /// every GPU; the sensors read follow `TASKWATT_NVML_SENSORS` ([`NvmlSensors::from_env`]).
    pub fn open_with_library(library: Option<&Path>) -> Result<NvmlMeter, EnergyError> {
        Self::open_matched(library, None)
    }

    /// [`NvmlMeter::open_with_library`], with the GPUs matched to the CUDA devices whose
    /// UUIDs `cuda_uuids` lists in CUDA's order (see [`NvmlMeter::from_devices_matched`]).
    pub fn open_matched(
        library: Option<&Path>,
        cuda_uuids: Option<&[String]>,
    ) -> Result<NvmlMeter, EnergyError> {
        let sensors = NvmlSensors::from_env()?;
        let nvml = real::init(library)?;
        let nvml = Arc::new(nvml);
        let count = nvml
            .device_count()
            .map_err(|e| real::error("the driver", "nvmlDeviceGetCount", e))?;
        if count == 0 {
            return Err(EnergyError::NoGpu);
        }
        let mut devices: Vec<Box<dyn GpuDevice>> = Vec::new();
        for index in 0..count {
            devices.push(Box::new(real::NvmlGpu::new(nvml.clone(), index)?));
        }
        Self::from_devices_matched(devices, sensors, cuda_uuids)
    }

    /// A meter over the given devices, each GPU domain numbered as the CUDA device with
    /// the same UUID in `cuda_uuids` (CUDA's order: the GPU workers' `device`), so that a
    /// domain covers the worker that drives it whatever order NVML (PCI bus order) and
    /// CUDA (fastest first, unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`) list them in. A GPU that
    /// is not among them (hidden by `CUDA_VISIBLE_DEVICES`, say) is not measured. Without
    /// `cuda_uuids`, or where a device does not tell its UUID (said in a warning), NVML's
    /// index is used.
    pub fn from_devices_matched(
        devices: Vec<Box<dyn GpuDevice>>,
        sensors: NvmlSensors,
        cuda_uuids: Option<&[String]>,
    ) -> Result<NvmlMeter, EnergyError> {
        let Some(order) = cuda_uuids else {
            let numbered = devices.into_iter().map(|d| (d.index(), d)).collect();
            return Self::build(numbered, sensors);
        };
        let order: Vec<String> = order.iter().map(|u| normalize_uuid(u)).collect();
        let mut numbered = Vec::with_capacity(devices.len());
        for d in devices {
            match d.uuid() {
                Some(u) => match order.iter().position(|o| *o == normalize_uuid(&u)) {
                    Some(ordinal) => numbered.push((ordinal as u32, d)),
                    None => log::info!(
                        "NVML GPU {} ({u}) is not among the CUDA devices this run drives: \
                         not measured",
                        d.index()
                    ),
                },
                None => {
                    log::warn!(
                        "NVML GPU {} does not tell its UUID: taken as CUDA device {} (set \
                         CUDA_DEVICE_ORDER=PCI_BUS_ID so that the orders agree)",
                        d.index(),
                        d.index()
                    );
                    numbered.push((d.index(), d));
                }
            }
        }
        numbered.sort_by_key(|(i, _)| *i);
        Self::build(numbered, sensors)
    }

    /// [`NvmlMeter::from_devices_with`] reading both sensors where both exist.
    pub fn from_devices(devices: Vec<Box<dyn GpuDevice>>) -> Result<NvmlMeter, EnergyError> {
        Self::from_devices_with(devices, NvmlSensors::Both)
    }

    /// A meter over the given devices: each is probed once for the energy counter and for
    /// its power. A device with the counter gets a counter domain, and with
    /// [`NvmlSensors::Both`] a second domain of the same GPU for its power readings when
    /// they answer; a device without the counter is read through its power.
    pub fn from_devices_with(
        devices: Vec<Box<dyn GpuDevice>>,
        sensors: NvmlSensors,
    ) -> Result<NvmlMeter, EnergyError> {
        Self::from_devices_matched(devices, sensors, None)
    }

    /// The meter over `devices`, each with the index its domains take (the CUDA device it
    /// is, or its NVML index).
    fn build(
        devices: Vec<(u32, Box<dyn GpuDevice>)>,
        sensors: NvmlSensors,
    ) -> Result<NvmlMeter, EnergyError> {
        if devices.is_empty() {
            return Err(EnergyError::NoGpu);
        }
        let mut out = Vec::with_capacity(devices.len());
        let mut reads = Vec::with_capacity(devices.len());
        let mut specs = Vec::with_capacity(devices.len());
        for (index, mut dev) in devices {
            let nvml_index = dev.index();
            let name = match dev.name()? {
                n if nvml_index == index => n,
                n => format!("{n}, NVML {nvml_index}"),
            };
            let arch = dev.architecture();
            let window_ns = if arch.power_is_one_second_average(&name) {
                NVML_AVERAGE_WINDOW_NS
            } else {
                NVML_INSTANT_WINDOW_NS
            };
            let power_spec = |what: &str| DomainSpec {
                domain: Domain::Gpu { index },
                name: format!("{name} (GPU {index}, {what})"),
                unit: "W".into(),
                joules_per_unit: 1.0,
                resolution_j: 1e-3,
                wrap_range_raw: None,
                sensor: SensorKind::IntegratedPower { window_ns },
                update_interval_ns: Some(NVML_ENERGY_UPDATE_NS),
                covers: Coverage::Gpu { index },
            };
            let d = out.len();
            match dev.total_energy_consumption_mj()? {
                Some(_) => {
                    reads.push((d, Source::EnergyCounter));
                    specs.push(DomainSpec {
                        domain: Domain::Gpu { index },
                        name: format!("{name} (GPU {index}, total energy counter)"),
                        unit: "mJ".into(),
                        joules_per_unit: 1e-3,
                        resolution_j: 1e-3,
                        wrap_range_raw: None,
                        sensor: SensorKind::EnergyCounter,
                        update_interval_ns: Some(NVML_ENERGY_UPDATE_NS),
                        covers: Coverage::Gpu { index },
                    });
                    // A second sensor only if it answers now: a board without power
                    // readings keeps its counter alone.
                    if sensors == NvmlSensors::Both && dev.power_usage_mw().is_ok() {
                        reads.push((d, Source::Power));
                        specs.push(power_spec("power_usage, fitted with the counter"));
                    }
                }
                None => {
                    reads.push((d, Source::Power));
                    specs.push(power_spec("integrated power_usage"));
                }
            }
            out.push(dev);
        }
        Ok(NvmlMeter {
            devices: out,
            reads,
            specs,
        })
    }
}

impl Meter for NvmlMeter {
    fn readable_from_workers(&self) -> bool {
        false
    }

    fn describe(&self) -> MeterDescription {
        let names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        MeterDescription {
            backend: "nvml".into(),
            simulated: false,
            description: format!(
                "NVIDIA NVML: {} (energy counter refreshes every 20-100 ms; power_usage is a \
                 1 s average on Ampere and later except GA100)",
                names.join("; ")
            ),
        }
    }

    fn domains(&self) -> &[DomainSpec] {
        &self.specs
    }

    fn read(&mut self, out: &mut [DomainRead]) {
        for (slot, &(d, source)) in out.iter_mut().zip(&self.reads) {
            let dev = &mut self.devices[d];
            *slot = match source {
                Source::EnergyCounter => match dev.total_energy_consumption_mj() {
                    Ok(Some(mj)) => Ok(RawReading::Counter(mj)),
                    Ok(None) => Err(EnergyError::Nvml {
                        device: format!("GPU {}", dev.index()),
                        call: "nvmlDeviceGetTotalEnergyConsumption",
                        message: "the energy counter stopped being supported mid-run".into(),
                    }),
                    Err(e) => Err(e),
                },
                Source::Power => dev
                    .power_usage_mw()
                    .map(|mw| RawReading::Power(f64::from(mw) * 1e-3)),
            };
        }
    }
}

/// The real devices, over nvml-wrapper.
mod real {
    use super::*;
    use nvml_wrapper::enums::device::DeviceArchitecture;
    use nvml_wrapper::error::NvmlError;
    use nvml_wrapper::Nvml;

    pub(super) fn init(library: Option<&Path>) -> Result<Nvml, EnergyError> {
        let result = match library {
            Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
            None => Nvml::init(),
        };
        result.map_err(|e| match e {
            NvmlError::LibloadingError(e) => EnergyError::NoNvidiaDriver {
                detail: e.to_string(),
            },
            NvmlError::DriverNotLoaded => EnergyError::NoNvidiaDriver {
                detail: "libnvidia-ml loaded but the NVIDIA kernel driver is not running".into(),
            },
            other => error("the driver", "nvmlInit_v2", other),
        })
    }

    pub(super) fn error(device: &str, call: &'static str, e: NvmlError) -> EnergyError {
        EnergyError::Nvml {
            device: device.to_owned(),
            call,
            message: e.to_string(),
        }
    }

    /// One GPU: NVML's device handles borrow the library, so the handle is looked up by index
    /// at each call (a cheap table lookup in the driver).
    pub(super) struct NvmlGpu {
        nvml: Arc<Nvml>,
        index: u32,
        label: String,
        arch: GpuArchitecture,
    }

    impl NvmlGpu {
        pub(super) fn new(nvml: Arc<Nvml>, index: u32) -> Result<NvmlGpu, EnergyError> {
            let label = format!("GPU {index}");
            let arch = {
                let dev = nvml
                    .device_by_index(index)
                    .map_err(|e| error(&label, "nvmlDeviceGetHandleByIndex", e))?;
                match dev.architecture() {
                    Ok(DeviceArchitecture::Kepler) => GpuArchitecture::Kepler,
                    Ok(DeviceArchitecture::Maxwell) => GpuArchitecture::Maxwell,
                    Ok(DeviceArchitecture::Pascal) => GpuArchitecture::Pascal,
                    Ok(DeviceArchitecture::Volta) => GpuArchitecture::Volta,
                    Ok(DeviceArchitecture::Turing) => GpuArchitecture::Turing,
                    Ok(DeviceArchitecture::Ampere) => GpuArchitecture::Ampere,
                    Ok(DeviceArchitecture::Ada) => GpuArchitecture::Ada,
                    Ok(DeviceArchitecture::Hopper) => GpuArchitecture::Hopper,
                    Ok(DeviceArchitecture::Blackwell) => GpuArchitecture::Blackwell,
                    _ => GpuArchitecture::Unknown,
                }
            };
            Ok(NvmlGpu {
                nvml,
                index,
                label,
                arch,
            })
        }

        fn device(&self, call: &'static str) -> Result<nvml_wrapper::Device<'_>, EnergyError> {
            self.nvml
                .device_by_index(self.index)
                .map_err(|e| error(&self.label, call, e))
        }
    }

    impl GpuDevice for NvmlGpu {
        fn index(&self) -> u32 {
            self.index
        }
        fn name(&self) -> Result<String, EnergyError> {
            self.device("nvmlDeviceGetName")?
                .name()
                .map_err(|e| error(&self.label, "nvmlDeviceGetName", e))
        }
        fn architecture(&self) -> GpuArchitecture {
            self.arch
        }
        fn total_energy_consumption_mj(&mut self) -> Result<Option<u64>, EnergyError> {
            const CALL: &str = "nvmlDeviceGetTotalEnergyConsumption";
            match self.device(CALL)?.total_energy_consumption() {
                Ok(mj) => Ok(Some(mj)),
                Err(NvmlError::NotSupported) => Ok(None),
                Err(e) => Err(error(&self.label, CALL, e)),
            }
        }
        fn power_usage_mw(&mut self) -> Result<u32, EnergyError> {
            const CALL: &str = "nvmlDeviceGetPowerUsage";
            self.device(CALL)?
                .power_usage()
                .map_err(|e| error(&self.label, CALL, e))
        }
        fn uuid(&self) -> Option<String> {
            self.device("nvmlDeviceGetUUID").ok()?.uuid().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted_gpu::{Scripted, ScriptedGpu};
    use std::collections::VecDeque;

    fn read(m: &mut NvmlMeter) -> Vec<DomainRead> {
        let mut out: Vec<DomainRead> = (0..m.domains().len())
            .map(|_| Ok(RawReading::Counter(0)))
            .collect();
        m.read(&mut out);
        out
    }

    #[test]
    fn prefers_the_energy_counter() {
        let gpu =
            ScriptedGpu::with_energy(0, "NVIDIA H100", GpuArchitecture::Hopper, &[10, 10, 250]);
        let mut m = NvmlMeter::from_devices(vec![Box::new(gpu)]).unwrap();
        let d = &m.domains()[0];
        assert_eq!(d.domain, Domain::Gpu { index: 0 });
        assert_eq!(d.sensor, SensorKind::EnergyCounter);
        assert_eq!(d.unit, "mJ");
        assert_eq!(d.update_interval_ns, Some(NVML_ENERGY_UPDATE_NS));
        assert_eq!(d.covers, Coverage::Gpu { index: 0 });
        assert_eq!(read(&mut m)[0].as_ref().unwrap(), &RawReading::Counter(10));
        assert_eq!(read(&mut m)[0].as_ref().unwrap(), &RawReading::Counter(250));
        assert_eq!(read(&mut m)[0].as_ref().unwrap(), &RawReading::Counter(250));
        assert!(m.describe().description.contains("20-100 ms"));
    }

    #[test]
    fn gpus_are_numbered_as_the_cuda_devices_with_their_uuid() {
        // NVML lists by PCI bus, CUDA (by default) fastest first: here the other way round,
        // and a third GPU that the run does not drive.
        let gpu = |i: u32, mj: u64, uuid: &str| {
            Box::new(
                ScriptedGpu::with_energy(i, &format!("GPU{i}"), GpuArchitecture::Hopper, &[mj])
                    .with_uuid(uuid),
            ) as Box<dyn GpuDevice>
        };
        let devices = vec![
            gpu(0, 100, "GPU-aaaa-0000"),
            gpu(1, 200, "GPU-bbbb-1111"),
            gpu(2, 300, "GPU-cccc-2222"),
        ];
        let cuda = ["BBBB-1111".to_string(), "gpu-aaaa-0000".to_string()];
        let mut m =
            NvmlMeter::from_devices_matched(devices, NvmlSensors::Counter, Some(&cuda)).unwrap();
        let d = m.domains();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].covers, Coverage::Gpu { index: 0 });
        assert_eq!(d[1].covers, Coverage::Gpu { index: 1 });
        assert!(d[0].name.contains("GPU1, NVML 1"), "{}", d[0].name);
        let r = read(&mut m);
        // CUDA device 0 is NVML's GPU 1 (200 mJ), CUDA device 1 NVML's GPU 0.
        assert_eq!(r[0].as_ref().unwrap(), &RawReading::Counter(200));
        assert_eq!(r[1].as_ref().unwrap(), &RawReading::Counter(100));
        // Without the CUDA order, NVML's.
        let m = NvmlMeter::from_devices_matched(
            vec![gpu(0, 1, "GPU-a"), gpu(1, 2, "GPU-b")],
            NvmlSensors::Counter,
            None,
        )
        .unwrap();
        assert_eq!(m.domains()[1].covers, Coverage::Gpu { index: 1 });
        // None of them driven: no GPU to measure.
        let none = NvmlMeter::from_devices_matched(
            vec![gpu(0, 1, "GPU-a")],
            NvmlSensors::Counter,
            Some(&["GPU-z".to_string()]),
        );
        assert!(matches!(none, Err(EnergyError::NoGpu)));
    }

    #[test]
    fn reads_both_sensors_of_a_gpu_that_has_both() {
        let gpu = ScriptedGpu::with_energy(0, "NVIDIA H100", GpuArchitecture::Hopper, &[10, 70])
            .then_power(Scripted::Value(300_000));
        let mut m = NvmlMeter::from_devices(vec![Box::new(gpu.clone())]).unwrap();
        let d = m.domains();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].domain, d[1].domain);
        assert_eq!(d[0].sensor, SensorKind::EnergyCounter);
        assert_eq!(
            d[1].sensor,
            SensorKind::IntegratedPower {
                window_ns: NVML_AVERAGE_WINDOW_NS
            }
        );
        let r = read(&mut m);
        assert_eq!(r[0].as_ref().unwrap(), &RawReading::Counter(70));
        assert_eq!(r[1].as_ref().unwrap(), &RawReading::Power(300.0));
        // The counter alone when asked.
        let m = NvmlMeter::from_devices_with(vec![Box::new(gpu)], NvmlSensors::Counter).unwrap();
        assert_eq!(m.domains().len(), 1);
        // And when the power readings fail at the probe.
        let mut mute = ScriptedGpu::with_energy(0, "NVIDIA H100", GpuArchitecture::Hopper, &[1]);
        mute.power = VecDeque::from([Scripted::Fail("Not Supported".into())]);
        let m = NvmlMeter::from_devices(vec![Box::new(mute)]).unwrap();
        assert_eq!(m.domains().len(), 1);
    }

    #[test]
    fn falls_back_to_power_with_the_right_window() {
        let cases = [
            (
                GpuArchitecture::Pascal,
                "Tesla P100",
                NVML_INSTANT_WINDOW_NS,
            ),
            (
                GpuArchitecture::Ampere,
                "NVIDIA A100-SXM4-40GB",
                NVML_INSTANT_WINDOW_NS,
            ),
            (
                GpuArchitecture::Ampere,
                "NVIDIA RTX A6000",
                NVML_AVERAGE_WINDOW_NS,
            ),
            (
                GpuArchitecture::Hopper,
                "NVIDIA H100",
                NVML_AVERAGE_WINDOW_NS,
            ),
        ];
        for (arch, name, window_ns) in cases {
            let gpu = ScriptedGpu::power_only(1, name, arch, &[150_000, 250_500]);
            let mut m = NvmlMeter::from_devices(vec![Box::new(gpu)]).unwrap();
            assert_eq!(
                m.domains()[0].sensor,
                SensorKind::IntegratedPower { window_ns },
                "{name}"
            );
            assert_eq!(read(&mut m)[0].as_ref().unwrap(), &RawReading::Power(150.0));
            assert_eq!(read(&mut m)[0].as_ref().unwrap(), &RawReading::Power(250.5));
        }
    }

    #[test]
    fn a_lost_gpu_fails_its_domain_only() {
        let a = ScriptedGpu::with_energy(0, "A", GpuArchitecture::Volta, &[1, 2])
            .then_energy(Scripted::Fail("GPU is lost".into()));
        let b = ScriptedGpu::with_energy(1, "B", GpuArchitecture::Volta, &[5, 6]);
        let mut m =
            NvmlMeter::from_devices_with(vec![Box::new(a), Box::new(b)], NvmlSensors::Counter)
                .unwrap();
        let r = read(&mut m);
        assert!(r[0].is_ok() && r[1].is_ok());
        let r = read(&mut m);
        let msg = r[0].as_ref().unwrap_err().to_string();
        assert!(
            msg.contains("GPU 0") && msg.contains("GPU is lost"),
            "{msg}"
        );
        assert!(r[1].is_ok());
    }

    #[test]
    fn no_devices_is_no_gpu() {
        let e = NvmlMeter::from_devices(Vec::new()).unwrap_err();
        assert!(e.is_unavailable());
    }

    /// The real loader runs: a library that is not there is "no NVIDIA driver",
    /// reported as unavailability.
    #[test]
    fn missing_library_is_unavailability() {
        let e = NvmlMeter::open_with_library(Some(Path::new("/nonexistent/libnvidia-ml.so.1")))
            .unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        let m = e.to_string();
        assert!(
            m.contains("no NVIDIA driver (libnvidia-ml.so.1 not found)"),
            "{m}"
        );
    }
}
