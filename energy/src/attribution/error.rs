//! What can go wrong while attributing energy, fitting or loading a model.
//!
//! Every variant names what was being read (domain, file) and what to do about it, so that
//! the CLI can print the message as is.

use std::path::PathBuf;

/// Errors of the attribution, model fitting and prediction.
#[derive(thiserror::Error)]
pub enum AttributionError {
    /// No domain has the two samples needed to form one interval.
    #[error(
        "nothing to attribute: no energy domain has an interval between two readings at \
         different times ({domains} domain(s) described, {samples} reading(s) in all): a run \
         shorter than one sampling period or than the meter's update interval, or a trace \
         recorded without a meter; run the graph longer, sample faster, or record with a \
         meter"
    )]
    NoEnergyData {
        /// Domains the input described.
        domains: usize,
        /// Samples the input held.
        samples: usize,
    },
    /// A domain has more task types than the fit supports.
    #[error(
        "{types} task types in domain {domain}: the fit supports at most {max} per domain \
         ({types} would need about {mib} MiB); group tasks into fewer types (`--key codelet` \
         rather than `codelet+footprint`), or check the trace's codelet names"
    )]
    TooManyTypes {
        /// The domain (e.g. `package-0`).
        domain: String,
        /// Types found.
        types: usize,
        /// The limit ([`MAX_SPARSE_TYPES`](crate::attribution::MAX_SPARSE_TYPES)).
        max: usize,
        /// Estimated memory of the fit, MiB.
        mib: u64,
    },
    /// User-given row weights do not match the system they are meant for.
    #[error(
        "row weights for domain {domain}: expected {expected} weight(s), one per interval, \
         found {found}; give one weight per interval between consecutive samples"
    )]
    WeightsLength {
        /// The domain (e.g. `package-0`).
        domain: String,
        /// Number of intervals (rows) of that domain.
        expected: usize,
        /// Number of weights given.
        found: usize,
    },
    /// A row weight is negative, infinite or NaN.
    #[error(
        "row weights for domain {domain}: weight #{index} is {value}; weights must be finite \
         and >= 0"
    )]
    InvalidWeight {
        /// The domain.
        domain: String,
        /// Index of the bad weight.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A model file has a format version this build does not read.
    #[error(
        "model file {path}: format_version {found} is not supported (this build reads version \
         {supported}); re-fit the model with this taskwatt (`taskwatt fit`)"
    )]
    ModelVersion {
        /// The file.
        path: PathBuf,
        /// The version found (`missing` when the field is absent).
        found: String,
        /// The version this build reads.
        supported: u32,
    },
    /// A model file is not valid JSON or does not have the model's fields.
    #[error(
        "model file {path}: {source}; the file is not a taskwatt energy model (or is damaged)"
    )]
    ModelParse {
        /// The file.
        path: PathBuf,
        /// What serde_json said.
        #[source]
        source: serde_json::Error,
    },
    /// A model file could not be read or written.
    #[error("model file {path}: {source}")]
    ModelIo {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `fit_model` was given no trace.
    #[error("no trace to fit a model from: give at least one trace with energy samples")]
    NothingToFit,
    /// Systems built with different task-type keys were mixed.
    #[error(
        "task types were keyed by `{first}` but one input was keyed by `{other}`; build \
         every trace's systems with the same key kind (for prediction: the model's)"
    )]
    KeyKindMismatch {
        /// The key kind expected (first trace's, or the model's).
        first: super::key::KeyKind,
        /// The key kind found.
        other: super::key::KeyKind,
    },
    /// The trace has no energy domain (an import without samples) and the model has
    /// several CPU packages or GPUs: which workers each covered cannot be guessed.
    #[error(
        "the trace has no energy domain, and the model's domains [{model}] include several \
         packages or GPUs: which workers each covers is unknown; import the trace with \
         --workers workers.csv (docs/import.md) or fit a single-package model"
    )]
    NoWorkerMap {
        /// The model's domains.
        model: String,
    },
    /// None of the trace's domains is in the model.
    #[error(
        "the model knows domains [{model}] but the trace has [{trace}]: no domain to predict; \
         fit a model on a trace from the same kind of machine"
    )]
    NoMatchingDomain {
        /// The model's domains.
        model: String,
        /// The trace's domains.
        trace: String,
    },
    /// A domain's cumulative energy went down between two samples: a counter runs forward
    /// only (wraps are undone before the attribution), so the trace is damaged or was
    /// edited, and no interval energy computed from it can be trusted.
    #[error(
        "domain {domain}: the cumulative energy decreases from {previous_j} J at \
         t = {previous_t_ns} ns to {energy_j} J at t = {t_ns} ns (by {drop_j} J, more than the \
         domain's resolution); energy counters only run forward: fix or remove the sample at \
         t = {t_ns} ns (or re-record the run)"
    )]
    EnergyDecreases {
        /// The domain's name (e.g. `package-0`).
        domain: String,
        /// Time of the earlier sample, ns.
        previous_t_ns: u64,
        /// Its reading, J.
        previous_j: f64,
        /// Time of the sample that is lower, ns.
        t_ns: u64,
        /// Its reading, J.
        energy_j: f64,
        /// `previous_j - energy_j`.
        drop_j: f64,
    },
    /// A task ends before it starts.
    #[error(
        "task {task} (codelet {codelet}, worker {worker}) ends at {end_ns} ns, before it \
         starts at {start_ns} ns; a task's end must not precede its start: fix or remove \
         that task record"
    )]
    TaskEndsBeforeStart {
        /// The task's id.
        task: u64,
        /// Its codelet id.
        codelet: u32,
        /// Its worker id.
        worker: u32,
        /// Its start, ns.
        start_ns: u64,
        /// Its end, ns.
        end_ns: u64,
    },
    /// A model file holds a power that prediction cannot multiply by.
    #[error(
        "model file {path}: domain {domain}, {what} has power {value} W; a power must be a \
         finite number from 0 to 1e6 W (a negative power would predict negative energy, and \
         no device draws a megawatt): fix that value or re-fit the model (`taskwatt fit`)"
    )]
    ModelPower {
        /// The file (`in-memory model` when not read from a file).
        path: PathBuf,
        /// The domain's name.
        domain: String,
        /// `base power` or `type <key>`.
        what: String,
        /// The value found.
        value: f64,
    },
    /// A model field other than a power holds a value no fit gives (an interval's
    /// quantile, the noise model, the covariance, the drift).
    #[error(
        "{path}: domain {domain}: {field} = {value:?} is not a value a fit gives ({why}): fix \
         that value or re-fit the model (`taskwatt fit`)",
        path = .path.display()
    )]
    ModelField {
        /// The file (`in-memory model` when not read from a file).
        path: PathBuf,
        /// The domain's name.
        domain: String,
        /// The field (`t95`, `noise.per_interval_j2`, `covariance_w2[1][1]`...).
        field: String,
        /// The value found.
        value: f64,
        /// What it must be.
        why: String,
    },
}

taskwatt_traces::debug_as_display!(AttributionError);
