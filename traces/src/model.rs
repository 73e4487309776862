//! The trace model: what one run records.
//!
//! A trace is a stream of [`Chunk`]s. Task executions arrive in [`TaskChunk`]s, one per
//! worker buffer flush, so that nothing on the hot path allocates per task: a chunk keeps
//! every record's predecessors in one shared arena (`TaskChunk::preds`) and each record
//! points into it with a range.
//!
//! Energy lives in the same trace: [`MeterInfo`] and [`DomainInfo`] describe what was
//! measured and which workers each domain covers, [`EnergySample`]s carry cumulative,
//! wrap-corrected joules on the trace clock, and [`GroundTruth`] records the powers a
//! simulated meter was told to produce, so that reports can show the attribution error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::comms::CommChunk;
use crate::data::{Eviction, HandleInfo, TaskAccess, Transfer};
use crate::Timestamp;

/// The largest power, W, any input may give one domain or task type (a megawatt, far
/// above any package, DRAM or GPU): imported readings, energy models and simulated meters
/// all refuse more. Past it a value is an edit or a column gone wrong, and sums over it
/// overflow or print figures of hundreds of digits.
pub const MAX_POWER_W: f64 = 1e6;

/// Identifier of a task within one run (assigned in submission order, from 0).
pub type TaskId = u64;
/// Dense identifier of a codelet (task type) within one run, from 0.
pub type CodeletId = u32;
/// Identifier of a worker within one run, from 0.
pub type WorkerId = u32;
/// Identifier of a meter within one trace.
pub type MeterId = u16;
/// Identifier of a measured domain within one trace.
pub type DomainId = u16;

/// The architecture a codelet implementation (and a worker) runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// A CPU core.
    Cpu,
    /// A GPU (CUDA/HIP device), driven by a CPU thread.
    Gpu,
}

impl Arch {
    /// Every architecture, in id order.
    pub const ALL: [Arch; 2] = [Arch::Cpu, Arch::Gpu];
    /// How many architectures there are.
    pub const COUNT: usize = 2;

    /// Dense index of the architecture (0 for CPU).
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name: `cpu`, `gpu`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Cpu => "cpu",
            Arch::Gpu => "gpu",
        }
    }

    /// Inverse of [`Arch::index`].
    pub fn from_index(i: u8) -> Option<Arch> {
        match i {
            0 => Some(Arch::Cpu),
            1 => Some(Arch::Gpu),
            _ => None,
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a task execution ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// The implementation returned.
    Ok,
    /// The implementation panicked; its dependents were cancelled.
    Failed,
}

/// One task execution. Predecessors live in the owning [`TaskChunk`]'s arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    /// Task id (submission order).
    pub id: TaskId,
    /// Codelet (task type).
    pub codelet: CodeletId,
    /// Architecture of the implementation that ran.
    pub arch: Arch,
    /// Worker that ran it.
    pub worker: WorkerId,
    /// How it ended.
    pub status: TaskStatus,
    /// Scheduling priority (higher runs first under `prio`).
    pub priority: i32,
    /// Bytes of data the task accessed (sum of its handles' sizes).
    pub footprint: u64,
    /// When it was submitted.
    pub submit: Timestamp,
    /// When its last dependency was satisfied.
    pub ready: Timestamp,
    /// When its implementation started.
    pub start: Timestamp,
    /// When its implementation returned.
    pub end: Timestamp,
    /// Start of this record's predecessors in [`TaskChunk::preds`].
    pub preds_start: u32,
    /// Number of predecessors.
    pub preds_len: u32,
}

impl TaskRecord {
    /// A task of `codelet` that ran on `worker` from `start` to `end` and returned:
    /// priority 0, no footprint, submitted and ready at `start` (what an importer knows of
    /// another runtime's task). Its predecessors are set by [`TaskChunk::push`].
    pub fn executed(
        id: TaskId,
        codelet: CodeletId,
        arch: Arch,
        worker: WorkerId,
        start: Timestamp,
        end: Timestamp,
    ) -> TaskRecord {
        TaskRecord {
            id,
            codelet,
            arch,
            worker,
            status: TaskStatus::Ok,
            priority: 0,
            footprint: 0,
            submit: start,
            ready: start,
            start,
            end,
            preds_start: 0,
            preds_len: 0,
        }
    }

    /// Execution time in ns.
    #[inline]
    pub fn duration_ns(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A batch of task records, as flushed by one worker buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskChunk {
    /// The records, in the order the worker finished them.
    pub records: Vec<TaskRecord>,
    /// Predecessor ids of every record, concatenated.
    pub preds: Vec<TaskId>,
}

impl TaskChunk {
    /// An empty chunk with room for `records` records and `preds` predecessor ids.
    pub fn with_capacity(records: usize, preds: usize) -> Self {
        TaskChunk {
            records: Vec::with_capacity(records),
            preds: Vec::with_capacity(preds),
        }
    }

    /// Appends a record; its `preds_start`/`preds_len` are set from `preds`.
    #[inline]
    pub fn push(&mut self, mut record: TaskRecord, preds: &[TaskId]) {
        record.preds_start = self.preds.len() as u32;
        record.preds_len = preds.len() as u32;
        self.preds.extend_from_slice(preds);
        self.records.push(record);
    }

    /// The predecessors of `record`, which must belong to this chunk.
    #[inline]
    pub fn preds_of(&self, record: &TaskRecord) -> &[TaskId] {
        let s = record.preds_start as usize;
        &self.preds[s..s + record.preds_len as usize]
    }

    /// Records with their predecessors.
    pub fn iter(&self) -> impl Iterator<Item = (&TaskRecord, &[TaskId])> + '_ {
        self.records.iter().map(move |r| (r, self.preds_of(r)))
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the chunk holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Empties the chunk, keeping its allocations.
    pub fn clear(&mut self) {
        self.records.clear();
        self.preds.clear();
    }

    /// Writes once over the whole capacity of an empty chunk, so that the operating system
    /// maps its pages now rather than one page fault per few dozen records later, on the
    /// hot path of whoever fills it (a worker recording tasks).
    pub fn prefault(&mut self) {
        debug_assert!(self.is_empty(), "prefault overwrites records");
        let blank = TaskRecord::executed(0, 0, Arch::Cpu, 0, Timestamp::ZERO, Timestamp::ZERO);
        self.records.resize(self.records.capacity(), blank);
        self.preds.resize(self.preds.capacity(), 0);
        self.clear();
    }
}

/// A codelet (task type) as the trace knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeletInfo {
    /// Dense id within the run.
    pub id: CodeletId,
    /// Its name, e.g. `gemm`.
    pub name: String,
    /// The architectures it has implementations for.
    pub archs: Vec<Arch>,
}

/// One worker: an OS thread pinned to a core (CPU) or driving a device (GPU).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// Worker id.
    pub id: WorkerId,
    /// What it runs.
    pub arch: Arch,
    /// OS CPU index it is pinned to, if pinned.
    pub cpu: Option<u32>,
    /// Physical core id, where known.
    pub core: Option<u32>,
    /// CPU package (socket) id: RAPL package domains map to workers through this.
    pub package: u32,
    /// NUMA node, where known.
    pub numa: Option<u32>,
    /// GPU index, for GPU workers.
    pub device: Option<u32>,
}

impl WorkerInfo {
    /// CPU worker `id` on CPU and core `id` of `package` (NUMA node `package`): what a
    /// test, a replay or an import of a machine without a topology describes.
    pub fn cpu(id: WorkerId, package: u32) -> WorkerInfo {
        WorkerInfo {
            id,
            arch: Arch::Cpu,
            cpu: Some(id),
            core: Some(id),
            package,
            numa: Some(package),
            device: None,
        }
    }

    /// GPU worker `id` driving device `device`, its host thread unbound (package 0): the
    /// GPU counterpart of [`WorkerInfo::cpu`].
    pub fn gpu(id: WorkerId, device: u32) -> WorkerInfo {
        WorkerInfo {
            id,
            arch: Arch::Gpu,
            cpu: None,
            core: None,
            package: 0,
            numa: None,
            device: Some(device),
        }
    }
}

/// The machine's topology, as discovered at start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologyInfo {
    /// Where it came from: `hwloc`, `sysfs` or `fallback`.
    pub source: String,
    /// Number of CPU packages.
    pub packages: u32,
    /// Number of physical cores.
    pub cores: u32,
    /// Number of processing units (hardware threads).
    pub pus: u32,
    /// Number of NUMA nodes.
    pub numa_nodes: u32,
}

/// What a run was and where it ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// taskwatt version that wrote the trace.
    pub taskwatt_version: String,
    /// Scheduling policy name.
    pub policy: String,
    /// Host name.
    pub host: String,
    /// Wall-clock start of the run, ns since the Unix epoch.
    pub wall_start_unix_ns: u64,
    /// Wall-clock time of the trace clock's origin, ns since the Unix epoch.
    pub clock_origin_unix_ns: u64,
    /// The process's command line.
    pub command_line: Vec<String>,
    /// Application name, when known.
    pub app: Option<String>,
    /// Free-form parameters (problem size, tile size...).
    pub params: BTreeMap<String, String>,
    /// Workers.
    pub workers: Vec<WorkerInfo>,
    /// Topology.
    pub topology: TopologyInfo,
}

/// A measured energy domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Domain {
    /// A CPU package (RAPL `package-N`).
    CpuPackage {
        /// Package id.
        id: u32,
    },
    /// The DRAM attached to a package (RAPL `dram`).
    Dram {
        /// Package id.
        id: u32,
    },
    /// The cores of a package (RAPL `core`, PP0).
    Core {
        /// Package id.
        id: u32,
    },
    /// The uncore/graphics of a package (RAPL `uncore`, PP1).
    Uncore {
        /// Package id.
        id: u32,
    },
    /// A GPU board (NVML).
    Gpu {
        /// Device index.
        index: u32,
    },
    /// The whole platform (RAPL `psys`).
    Psys,
}

impl std::fmt::Display for Domain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Domain::CpuPackage { id } => write!(f, "package-{id}"),
            Domain::Dram { id } => write!(f, "dram-{id}"),
            Domain::Core { id } => write!(f, "core-{id}"),
            Domain::Uncore { id } => write!(f, "uncore-{id}"),
            Domain::Gpu { index } => write!(f, "gpu-{index}"),
            Domain::Psys => f.write_str("psys"),
        }
    }
}

/// What kind of quantity a sensor reports.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SensorKind {
    /// A cumulative energy counter (RAPL energy_uj, NVML total energy).
    EnergyCounter,
    /// Instantaneous-ish power integrated by the sampler; the sensor averages over
    /// `window_ns` (NVML power_usage: 1 s on Ampere and later, except GA100).
    IntegratedPower {
        /// The sensor's averaging window, in ns.
        window_ns: u64,
    },
    /// A cumulative energy counter that sees only part of the time (format 1.3): at each
    /// update it adds the whole update interval's worth of the average power over its last
    /// `sampled_ns` (NVML's energy counter on A100 and H100 samples about a quarter of the
    /// time).
    SampledCounter {
        /// The part of each update interval the sensor sees (its last `sampled_ns`), ns.
        sampled_ns: u64,
    },
}

impl SensorKind {
    /// Whether the sensor reports a cumulative counter (ideal or sampled).
    pub fn is_counter(self) -> bool {
        matches!(
            self,
            SensorKind::EnergyCounter | SensorKind::SampledCounter { .. }
        )
    }
}

/// A meter backend instance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeterInfo {
    /// Id within the trace.
    pub id: MeterId,
    /// Backend name: `rapl-perf`, `rapl-powercap`, `nvml`, `sim`.
    pub backend: String,
    /// Whether its readings are simulated (and not measured).
    pub simulated: bool,
    /// Human-readable description (device, path...).
    pub description: String,
}

/// One domain of one meter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainInfo {
    /// Id within the trace.
    pub id: DomainId,
    /// The meter that reads it.
    pub meter: MeterId,
    /// What it measures.
    pub domain: Domain,
    /// The sensor's own name, e.g. `package-0` or `NVIDIA A100`.
    pub name: String,
    /// Unit of the raw counter, e.g. `uJ`, `mJ`, `2^-14 J`.
    pub unit: String,
    /// Smallest energy step, in J.
    pub resolution_j: f64,
    /// Range after which the raw counter wraps, in J, if it wraps.
    pub wrap_range_j: Option<f64>,
    /// How the sensor updates, in ns, if known.
    pub update_interval_ns: Option<u64>,
    /// What the sensor reports.
    pub sensor: SensorKind,
    /// Workers whose executions this domain's energy covers.
    pub workers: Vec<WorkerId>,
}

impl DomainInfo {
    /// Whether `other` measures the same device: the same `Domain` over the same workers
    /// (a second sensor of it, as NVML's power readings beside its counter). The packages
    /// of two nodes of a merged distributed run share a `Domain` but not their workers.
    pub fn same_device(&self, other: &DomainInfo) -> bool {
        self.domain == other.domain && {
            let (mut a, mut b) = (self.workers.clone(), other.workers.clone());
            a.sort_unstable();
            b.sort_unstable();
            a == b
        }
    }
}

/// One reading of one domain.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergySample {
    /// Domain read.
    pub domain: DomainId,
    /// When it was read, on the trace clock.
    pub t: Timestamp,
    /// When it was read, ns since the Unix epoch.
    pub wall_unix_ns: u64,
    /// Cumulative energy since the meter started, in J, wrap-corrected.
    pub energy_j: f64,
    /// The raw counter value as the sensor gave it (in the domain's unit), before wrap
    /// correction; NaN for integrated-power domains.
    pub raw: f64,
}

/// The mean frequency of a CPU package's busy cores over the span that ends at `t`
/// (format 1.6): from APERF/MPERF (the cycles a core ran while not halted over the time it
/// ran), cpufreq's current frequency, or the simulated machine's turbo bins and cap.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrequencySample {
    /// The package domain whose cores it describes.
    pub domain: DomainId,
    /// The end of the span it averages, on the trace clock; the span starts at the same
    /// domain's previous sample (or the run's first read).
    pub t: Timestamp,
    /// Mean frequency, MHz.
    pub mhz: f64,
}

/// A named interval on the trace clock, e.g. an idle-calibration window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// What it marks: `idle-calibration`, `graph`...
    pub name: String,
    /// Start.
    pub start: Timestamp,
    /// End.
    pub end: Timestamp,
}

/// The powers a simulated meter was configured with: the truth the attribution should find.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// Base power per domain, in W.
    pub base_w: Vec<(DomainId, f64)>,
    /// Extra power while a task of a codelet runs, per domain, in W.
    pub task_w: Vec<TruthEntry>,
    /// Standard deviation of the package's white power noise at 1 ms, in W (each domain's
    /// own is in `noise_w`).
    pub noise_sigma_w: f64,
    /// The full meter configuration, for the record.
    pub config: serde_json::Value,
    /// Standard deviation of each domain's white power noise at 1 ms, in W.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub noise_w: Vec<(DomainId, f64)>,
    /// What the run realised on each domain (a simulated meter knows it at the end of a
    /// run): the mean base, the occupancy factor and each type's mean powers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub realised: Vec<RealisedDomain>,
}

impl GroundTruth {
    /// The noise of `domain`, W at 1 ms: its own when recorded, else the package's.
    pub fn noise_of(&self, domain: DomainId) -> f64 {
        self.noise_w
            .iter()
            .find(|(d, _)| *d == domain)
            .map_or(self.noise_sigma_w, |(_, w)| *w)
    }

    /// What `domain` realised, when recorded.
    pub fn realised_of(&self, domain: DomainId) -> Option<&RealisedDomain> {
        self.realised.iter().find(|r| r.domain == domain)
    }

    /// The name under which [`GroundTruth::task_w`] lists codelet `name`, as the
    /// simulator resolves it: its own, else the one entry whose name differs in ASCII case
    /// only (an imported StarPU trace's `GEMM` is configured as `gemm`). `None` when it
    /// has no entry of its own: the default, `*`, applies.
    pub fn codelet_entry<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        let names = || self.task_w.iter().map(|e| e.codelet.as_str());
        if names().any(|c| c == name) {
            return Some(name);
        }
        let mut same = names().filter(|c| *c != "*" && c.eq_ignore_ascii_case(name));
        let first = same.next()?;
        // Entries repeat per domain and architecture: one name, however often.
        same.all(|c| c == first).then_some(first)
    }
}

/// What a simulated domain realised over a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RealisedDomain {
    /// The domain.
    pub domain: DomainId,
    /// The window the meter was read over (first and last update read), trace clock ns.
    pub window_ns: [u64; 2],
    /// Mean base power over that window, drift included, W.
    pub base_mean_w: f64,
    /// The occupancy factor `g(k)`: with `k` of the domain's workers busy, each task draws
    /// `g(k)` of its power alone (index 0 unused).
    pub occupancy_factor: Vec<f64>,
    /// Time with `k` of the domain's workers busy, s, by `k`.
    pub occupancy_s: Vec<f64>,
    /// Workers the domain covers.
    pub workers: usize,
    /// Each task type that ran on the domain's workers.
    pub types: Vec<RealisedType>,
}

/// What one task type realised on one simulated domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RealisedType {
    /// Codelet name.
    pub codelet: String,
    /// Architecture.
    pub arch: Arch,
    /// Task time, summed over workers, s.
    pub busy_s: f64,
    /// Mean power alone of its tasks (each task's drawn variation), time-weighted, W.
    pub alone_w: f64,
    /// Mean power at the occupancy and cap its tasks ran under, time-weighted, W.
    pub at_run_w: f64,
}

/// One (domain, codelet, arch) truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthEntry {
    /// Domain whose energy the task adds to.
    pub domain: DomainId,
    /// Codelet name.
    pub codelet: String,
    /// Architecture.
    pub arch: Arch,
    /// Extra power while running, in W.
    pub extra_w: f64,
}

/// How a run ended, as its End chunk says (format 1.1; files of 1.0 read as `Complete`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOutcome {
    /// The run finished its work.
    #[default]
    Complete,
    /// The run was stopped early (Ctrl-C, SIGTERM, `Runtime::interrupt`): the trace holds
    /// the tasks that ran before.
    Interrupted,
    /// The run failed (its app, runtime or meter returned an error): the trace holds what
    /// was recorded up to the failure.
    Failed,
}

impl RunOutcome {
    /// `complete`, `interrupted` or `failed`.
    pub fn name(self) -> &'static str {
        match self {
            RunOutcome::Complete => "complete",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Failed => "failed",
        }
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The end of a run, written last: its absence means the run was cut short.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// Tasks recorded.
    pub tasks: u64,
    /// Tasks that failed.
    pub failed: u64,
    /// Energy samples recorded.
    pub samples: u64,
    /// First task start, on the trace clock.
    pub first_start: Timestamp,
    /// Last task end, on the trace clock.
    pub last_end: Timestamp,
    /// Wall-clock end, ns since the Unix epoch.
    pub wall_end_unix_ns: u64,
    /// How the run ended (format 1.1; absent, and so `complete`, in 1.0 files).
    #[serde(default)]
    pub outcome: RunOutcome,
}

/// One unit of a trace file.
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// Run metadata; the first chunk of every trace.
    Meta(RunMeta),
    /// Codelets seen so far (new ones only).
    Codelets(Vec<CodeletInfo>),
    /// Task executions.
    Tasks(TaskChunk),
    /// Meters and their domains.
    Meters {
        /// Meters.
        meters: Vec<MeterInfo>,
        /// Domains.
        domains: Vec<DomainInfo>,
    },
    /// Energy samples.
    Samples(Vec<EnergySample>),
    /// A simulated meter's truth.
    Truth(GroundTruth),
    /// Named intervals.
    Markers(Vec<Marker>),
    /// Copies of data between memory nodes (format 1.2).
    Transfers(Vec<Transfer>),
    /// The data accesses of tasks (format 1.3).
    Accesses(Vec<TaskAccess>),
    /// The messages of one rank of a distributed run, and its clock offsets (format 1.4).
    Comms(CommChunk),
    /// The end of the run.
    End(RunEnd),
    /// Names of data handles (new ones, or renamed).
    Handles(Vec<HandleInfo>),
    /// CPU packages' frequencies (format 1.6).
    Frequencies(Vec<FrequencySample>),
    /// Device copies dropped under a memory limit (format 1.7).
    Evictions(Vec<Eviction>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_codelet_is_found_in_the_truth_in_another_case_when_one_entry_fits() {
        let entry = |codelet: &str, domain: DomainId, arch: Arch| TruthEntry {
            domain,
            codelet: codelet.into(),
            arch,
            extra_w: 1.0,
        };
        let truth = GroundTruth {
            task_w: vec![
                entry("gemm", 0, Arch::Cpu),
                entry("gemm", 1, Arch::Gpu),
                entry("syrk", 0, Arch::Cpu),
                entry("SYRK", 0, Arch::Cpu),
                entry("*", 0, Arch::Cpu),
            ],
            ..GroundTruth::default()
        };
        assert_eq!(truth.codelet_entry("gemm"), Some("gemm"));
        assert_eq!(
            truth.codelet_entry("GEMM"),
            Some("gemm"),
            "entries repeat per domain"
        );
        assert_eq!(
            truth.codelet_entry("SYRK"),
            Some("SYRK"),
            "its own name first"
        );
        assert_eq!(
            truth.codelet_entry("Syrk"),
            None,
            "two fit: neither is guessed"
        );
        assert_eq!(truth.codelet_entry("potrf"), None);
    }

    #[test]
    fn prefault_keeps_an_empty_chunk_with_its_capacity() {
        let mut c = TaskChunk::with_capacity(100, 200);
        c.prefault();
        assert!(c.is_empty() && c.preds.is_empty());
        assert!(c.records.capacity() >= 100 && c.preds.capacity() >= 200);
        let r = TaskRecord::executed(7, 1, Arch::Cpu, 0, Timestamp(1), Timestamp(2));
        c.push(r, &[3, 4]);
        assert_eq!(
            c.iter().next().map(|(r, p)| (r.id, p.to_vec())),
            Some((7, vec![3, 4]))
        );
    }
}
