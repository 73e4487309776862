//! Fine-grain energy attribution (Risse, Guermouche & Trahay, "Fine-grain energy
//! consumption modeling of HPC task-based programs", IEEE CLUSTER 2025).
//!
//! Meters give cumulative energy per domain every few milliseconds; tasks last
//! microseconds. For each domain, every interval between two samples becomes one row of
//! a linear system `E_i ≈ P_base·Δt_i + Σ_k p_k·T_ik`, where `T_ik` is the time tasks of
//! type `k` ran on the domain's workers during the interval (each task clipped exactly to
//! the interval bounds). Least squares (non-negative by default) gives the base power and
//! a dynamic power per task type; diagnostics say which numbers to trust.
//!
//! ```text
//! trace ──► TraceSystems::build (one pass over tasks) ──► fit per domain (QR / NNLS)
//!       ──► diagnostics (SE, R², CV MAPE, inseparable types, sampling warnings)
//!       ──► AttributionReport ──► render_report / JSON
//! traces ─► fit_model ──► EnergyModel (versioned JSON) ──► predict(model, trace)
//! ```
//!
//! The design, every diagnostic and how to read the report: `docs/attribution.md`.
//!
//! Files, by layer from the ground up (no two import each other, as
//! `scripts/check-structure.py` checks in CI):
//! - inputs: `key` (task-type keys), `input` (what is read from a trace), `system` (a
//!   domain's linear system and regions), `build` (the build pass and clipping), `align`
//!   (the meter's update grid), `occupancy`;
//! - the numeric kernel: `qr` (streaming Givens QR), `nnls` (Lawson-Hanson), `stack` (a
//!   domain's stacked rows, their triangles and solves);
//! - what a fit is asked and gives: `options`, `estimate` (a coefficient, its flags, the
//!   noise model, the covariance layout), `units`;
//! - the fit's parts: `contention`, `frequency`, `covariance`, `conditioning` (which types
//!   cannot be separated), `diagnostics`, `departures`,
//!   `large` (the sparse fit past `MAX_TYPES`), gathered in `fit` (one domain's fit);
//! - `solve` (fitting a domain: the orchestration);
//! - results: `report` (energy accounting), `model` (model files and fitting them),
//!   `predict` (predicting a run with a model), `render`
//!   (text), `attribute` (the one-trace entry point).

mod align;
mod attribute;
mod build;
mod conditioning;
mod contention;
mod covariance;
pub use covariance::Estimable;
mod departures;
mod diagnostics;
mod error;
mod estimate;
mod fit;
mod frequency;
pub use frequency::FrequencyFit;
mod input;
mod key;
mod large;
mod model;
mod nnls;
mod occupancy;
mod options;
mod predict;
mod qr;
mod render;
mod report;
#[cfg(any(test, feature = "testkit"))]
pub mod scenario;
mod solve;
mod stack;
mod system;
mod text;

/// Word-wraps `text` to the reports' 80 columns (a number never split from its unit), the
/// first line starting with `first`, the others with `rest`; each line ends with `\n`.
pub fn wrap_text(text: &str, first: &str, rest: &str) -> String {
    let mut out = String::new();
    text::wrap(&mut out, text, first, rest);
    out
}
mod units;

#[cfg(test)]
mod scale;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use align::{Alignment, IntervalSource};
pub use attribute::{attribute, attribute_systems, attribute_trace, Attribution};
pub use conditioning::{InseparableGroup, InseparableReason};
pub use contention::ContentionFit;
pub use diagnostics::FitDiagnostics;
pub use error::AttributionError;
pub use estimate::{CovLayout, Estimate, Flag};
pub use fit::DomainFit;
pub use input::{trace_tasks, TraceParts, IDLE_CALIBRATION};
pub use key::{footprint_class, KeyKind, TypeKey};
pub use model::{
    fit_model, DomainModel, EnergyModel, ModelFit, TypeModel, MAX_MODEL_POWER_W,
    MODEL_FORMAT_OLDEST, MODEL_FORMAT_VERSION, UNKNOWN_CONTENTION_MAX,
};
pub use nnls::{nnls, NnlsSolution};
pub use occupancy::{Occupancy, OCCUPANCY_MAX_TASKS};
pub use options::{
    AttributionOptions, RowWeights, SensorModel, Solver, DEFAULT_PRECISION_PCT,
    MAX_CONTENTION_TYPES, MAX_SPARSE_TYPES, MAX_TYPES,
};
pub use predict::{
    predict, predict_systems, predict_trace, DomainPrediction, EnergyPrediction, RegionPrediction,
};
pub use render::{render_prediction, render_report, RenderOptions};
pub use report::{
    AloneCheck, AttributionReport, DomainReport, RegionReport, RegionType, TruthComparison,
    TruthRow, TypeReport,
};
pub use system::{regions_of, DomainSystem, RegionDef, TraceSystems, TypeColumn, TypeStats};
