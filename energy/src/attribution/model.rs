//! Energy models: the fitted powers saved to a versioned file, fitted on one or more
//! traces, and used to predict the energy of another run.
//!
//! Domains are matched across traces by what they measure ([`Domain`], e.g. `package-0`),
//! never by id: ids are per trace. Types are matched by [`TypeKey`] (codelet *name*,
//! plus arch or footprint class according to the model's [`KeyKind`]).
//!
//! File format: JSON with a `format_version` field, checked before anything else is
//! parsed so that a file from a newer taskwatt fails with a message that says so.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use taskwatt_traces::{Domain, TaskRecord};

use super::error::AttributionError;
use super::estimate::{Estimate, NoiseModel};
use super::fit::DomainFit;
use super::input::{trace_tasks, TraceParts};
use super::key::{KeyKind, TypeKey};
use super::options::{AttributionOptions, Solver};
use super::report::{domain_report, DomainReport};
use super::solve::fit_groups;
use super::system::{DomainSystem, TraceSystems};

/// The model file format version this build writes. Version 2 added each domain's
/// contention and the covariance's layout; version 1 files are read as models without
/// contention.
pub const MODEL_FORMAT_VERSION: u32 = 2;

/// The oldest model file format version this build reads.
pub const MODEL_FORMAT_OLDEST: u32 = 1;

/// A fitted energy model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyModel {
    /// File format version ([`MODEL_FORMAT_VERSION`]).
    pub format_version: u32,
    /// How tasks were grouped into types.
    pub key: KeyKind,
    /// The solver that produced the powers.
    pub solver: Solver,
    /// Number of traces the model was fitted on.
    pub traces: usize,
    /// One entry per domain.
    pub domains: Vec<DomainModel>,
}

/// The model of one domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainModel {
    /// What the domain measures (the matching key).
    pub domain: Domain,
    /// The sensor's name in the first trace.
    pub name: String,
    /// Workers the domain covered in the first trace.
    pub workers: usize,
    /// Base power.
    pub base: Estimate,
    /// Per-type dynamic powers.
    pub types: Vec<TypeModel>,
    /// Intervals the fit used.
    pub rows: usize,
    /// R² of the fit.
    pub r2: Option<f64>,
    /// Cross-validated MAPE of the fit, %.
    pub cv_mape_pct: Option<f64>,
    /// The contention `c`: each task draws `1 − c·(k − 1)` of its power alone with `k`
    /// tasks running on the domain; absent when not fitted (the powers are then taken as
    /// alone whatever the occupancy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Estimate>,
    /// Covariance of the powers, in `layout`'s order (base, `types` in order, then the
    /// contention when fitted): what prediction intervals are computed from. Absent in
    /// models written before it existed, or when a power was not identifiable (then
    /// predictions have no interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covariance_w2: Option<Vec<Vec<f64>>>,
    /// The order of `covariance_w2` (absent in version 1 files: base then types).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<super::estimate::CovLayout>,
    /// Student-t 95% quantile for the fit's residual degrees of freedom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t95: Option<f64>,
    /// The fit's residual variance against interval length: what a measurement adds to
    /// a prediction's uncertainty (absent in older files: predictions then have no
    /// measurement interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<super::estimate::NoiseModel>,
    /// The base's drift over the fitted window (its change from the window's middle to
    /// its end, W), when fitted: the base is carried as the window's mean, so a part of
    /// another run may see a base up to this far from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_drift: Option<Estimate>,
}

/// The largest power, W, a model may hold for a domain's base or a task type: a
/// megawatt, far above any one package, DRAM or GPU. A model power beyond it is an edit
/// gone wrong, and predictions multiplied by it would print figures of hundreds of digits.
pub const MAX_MODEL_POWER_W: f64 = 1e6;

/// The contention assumed at most when a model knows none (fitted on one worker, or with
/// contention off) and predicts a run whose tasks ran side by side: the top of what real
/// packages show (`c` = 0.03 to 0.1 per extra busy core). The prediction stays at the
/// powers alone; its intervals reach down by what this contention would take off.
pub const UNKNOWN_CONTENTION_MAX: f64 = 0.1;

/// The model of one task type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeModel {
    /// The type.
    pub key: TypeKey,
    /// Tasks seen in the fitting traces.
    pub count: u64,
    /// Their mean duration, s.
    pub mean_duration_s: f64,
    /// Dynamic power.
    pub power: Estimate,
}

impl EnergyModel {
    /// The model of a domain, if it has one.
    pub fn domain(&self, d: Domain) -> Option<&DomainModel> {
        self.domains.iter().find(|m| m.domain == d)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a model always serialises")
    }

    /// Parses a model; `path` only names the source in errors. Rejects any
    /// `format_version` other than [`MODEL_FORMAT_VERSION`] before parsing the rest.
    pub fn from_json(text: &str, path: &Path) -> Result<EnergyModel, AttributionError> {
        let parse = |source| AttributionError::ModelParse {
            path: path.to_owned(),
            source,
        };
        let value: serde_json::Value = serde_json::from_str(text).map_err(parse)?;
        let found = value.get("format_version");
        let known = u64::from(MODEL_FORMAT_OLDEST)..=u64::from(MODEL_FORMAT_VERSION);
        if !found
            .and_then(|v| v.as_u64())
            .is_some_and(|v| known.contains(&v))
        {
            return Err(AttributionError::ModelVersion {
                path: path.to_owned(),
                found: found.map_or("missing".to_owned(), |v| v.to_string()),
                supported: MODEL_FORMAT_VERSION,
            });
        }
        let mut model: EnergyModel = serde_json::from_value(value).map_err(parse)?;
        model.format_version = MODEL_FORMAT_VERSION;
        model.validate(path)?;
        Ok(model)
    }

    /// Checks every power that prediction multiplies by: it must be finite, at most
    /// [`MAX_MODEL_POWER_W`] in size, and >= 0 unless
    /// the model says it was fitted by ordinary least squares (`"solver": "ols"`), whose
    /// coefficients may legitimately be negative (prediction then warns). `path` names the
    /// source in the error ([`AttributionError::ModelPower`]).
    pub fn validate(&self, path: &Path) -> Result<(), AttributionError> {
        let negative_ok = self.solver == Solver::Ols;
        for d in &self.domains {
            let powers = std::iter::once(("base power".to_owned(), d.base.value_w)).chain(
                d.types
                    .iter()
                    .map(|t| (format!("type {}", t.key), t.power.value_w)),
            );
            for (what, value) in powers {
                if !value.is_finite()
                    || (value < 0.0 && !negative_ok)
                    || value.abs() > MAX_MODEL_POWER_W
                {
                    return Err(AttributionError::ModelPower {
                        path: path.to_owned(),
                        domain: d.name.clone(),
                        what,
                        value,
                    });
                }
            }
            if let Some(c) = &d.contention {
                // g(k) = 1 − c (k − 1) must stay a factor: a contention of 1 or more would
                // make two tasks at once draw nothing.
                if !(c.value_w.is_finite() && c.value_w > -1.0 && c.value_w < 1.0) {
                    return Err(AttributionError::ModelField {
                        path: path.to_owned(),
                        domain: d.name.clone(),
                        field: "contention".to_owned(),
                        value: c.value_w,
                        why: "a factor's slope, strictly between -1 and 1".to_owned(),
                    });
                }
            }
            let field = |field: String, value: f64, why: &str| AttributionError::ModelField {
                path: path.to_owned(),
                domain: d.name.clone(),
                field,
                value,
                why: why.to_owned(),
            };
            if let (Some(l), Some(cov)) = (&d.layout, &d.covariance_w2) {
                if l.types != d.types.len() || l.len() != cov.len() {
                    return Err(field(
                        "covariance_w2 rows".to_owned(),
                        cov.len() as f64,
                        &format!(
                            "its layout has {} coefficients for {} types",
                            l.len(),
                            d.types.len()
                        ),
                    ));
                }
            }
            // What the intervals are made of: finite, and of the sign a fit gives. A
            // negative t95 printed an interval of -5e306 J; a huge noise, inf J.
            if let Some(t) = d.t95 {
                if !(t.is_finite() && t > 0.0 && t <= 1e3) {
                    return Err(field("t95".to_owned(), t, "a Student quantile, 0 to 1000"));
                }
            }
            if let Some(n) = &d.noise {
                for (name, v) in [
                    ("noise.per_interval_j2", n.per_interval_j2),
                    ("noise.per_second_j2", n.per_second_j2),
                    ("noise.per_task", n.per_task),
                ] {
                    if !(v.is_finite() && (0.0..=1e12).contains(&v)) {
                        return Err(field(name.to_owned(), v, "finite, 0 to 1e12"));
                    }
                }
            }
            if let Some(cov) = &d.covariance_w2 {
                for (i, row) in cov.iter().enumerate() {
                    for (j, &v) in row.iter().enumerate() {
                        if !v.is_finite() || v.abs() > 1e12 || (i == j && v < 0.0) {
                            return Err(field(
                                format!("covariance_w2[{i}][{j}]"),
                                v,
                                "finite, at most 1e12 W² in size, and a variance >= 0",
                            ));
                        }
                    }
                }
            }
            if let Some(b) = &d.base_drift {
                if !(b.value_w.is_finite() && b.value_w.abs() <= MAX_MODEL_POWER_W) {
                    return Err(field(
                        "base_drift".to_owned(),
                        b.value_w,
                        "a power in W, finite and at most 1e6 in size",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads a model file.
    pub fn load(path: impl AsRef<Path>) -> Result<EnergyModel, AttributionError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| AttributionError::ModelIo {
            path: path.to_owned(),
            source,
        })?;
        EnergyModel::from_json(&text, path)
    }

    /// Writes the model file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), AttributionError> {
        let path = path.as_ref();
        // Complete or absent: a failure keeps the file that was there.
        taskwatt_traces::write_atomic(path, self.to_json().as_bytes()).map_err(|e| {
            AttributionError::ModelIo {
                path: path.to_owned(),
                source: match e {
                    taskwatt_traces::TraceError::Io { source, .. } => source,
                    other => std::io::Error::other(other.to_string()),
                },
            }
        })
    }
}

/// The result of [`fit_model`]: the model, and the fits and reports behind it.
#[derive(Clone, Debug)]
pub struct ModelFit {
    /// The model.
    pub model: EnergyModel,
    /// One fit per domain (stacked rows), in the model's order.
    pub fits: Vec<DomainFit>,
    /// One report per domain, in the model's order (no truth comparison when several
    /// traces were stacked).
    pub reports: Vec<DomainReport>,
}

/// Fits one model on one or more traces: every domain's rows are stacked over the
/// traces that measured it (matched by [`Domain`]), then fitted once.
///
/// All systems must have been built with the same [`KeyKind`] (`opts.key` is ignored
/// here: the systems' own key is used). With [`super::RowWeights::PerInterval`], a
/// domain's weights cover the stacked rows, trace after trace.
pub fn fit_model(
    traces: &[TraceSystems],
    truth: Option<&taskwatt_traces::GroundTruth>,
    opts: &AttributionOptions,
) -> Result<ModelFit, AttributionError> {
    let Some(first) = traces.first() else {
        return Err(AttributionError::NothingToFit);
    };
    let key = first.key;
    if let Some(t) = traces.iter().find(|t| t.key != key) {
        return Err(AttributionError::KeyKindMismatch {
            first: key,
            other: t.key,
        });
    }
    // Per domain, every trace's systems, each marked primary (the trace's first reading of
    // the domain) or second sensor of the same device.
    let mut by_domain: BTreeMap<Domain, Vec<(&DomainSystem, bool)>> = BTreeMap::new();
    for t in traces {
        let mut seen: Vec<&taskwatt_traces::DomainInfo> = Vec::new();
        for s in t.domains.iter().filter(|s| s.intervals() > 0) {
            let first = !seen.iter().any(|d| d.same_device(&s.info));
            seen.push(&s.info);
            by_domain.entry(s.domain()).or_default().push((s, first));
        }
    }
    if by_domain.is_empty() {
        return Err(AttributionError::NoEnergyData {
            domains: traces.iter().map(|t| t.domains.len()).sum(),
            samples: 0,
        });
    }
    let mut out = ModelFit {
        model: EnergyModel {
            format_version: MODEL_FORMAT_VERSION,
            key,
            solver: opts.solver,
            traces: traces.len(),
            domains: Vec::new(),
        },
        fits: Vec::new(),
        reports: Vec::new(),
    };
    let jobs: Vec<(Vec<&DomainSystem>, Vec<bool>)> = by_domain
        .values()
        .map(|group| {
            (
                group.iter().map(|(s, _)| *s).collect(),
                group.iter().map(|(_, p)| *p).collect(),
            )
        })
        .collect();
    let fitted = fit_groups(jobs.clone(), opts);
    for ((domain, _), ((systems, primary), fit)) in
        by_domain.into_iter().zip(jobs.into_iter().zip(fitted))
    {
        let fit = fit?;
        let primaries: Vec<&DomainSystem> = systems
            .iter()
            .zip(&primary)
            .filter(|(_, p)| **p)
            .map(|(s, _)| *s)
            .collect();
        let report = domain_report(&fit, &primaries, truth.filter(|_| traces.len() == 1));
        out.model.domains.push(DomainModel {
            domain,
            name: fit.name.clone(),
            workers: report.workers,
            base: fit.base.clone(),
            types: report
                .types
                .iter()
                .map(|t| TypeModel {
                    key: t.key.clone(),
                    count: t.count,
                    mean_duration_s: t.mean_duration_s,
                    power: t.power.clone(),
                })
                .collect(),
            rows: fit.diagnostics.rows,
            r2: fit.diagnostics.r2,
            cv_mape_pct: fit.diagnostics.cv_mape_pct,
            contention: fit
                .contention
                .as_ref()
                .filter(|c| c.identified)
                .map(|c| c.c.clone()),
            // A model carries no drift: its base is the fit's mean base.
            layout: Some(match &fit.covariance_w2 {
                Some(cov) => fit.layout.without_drift(cov).0,
                None => super::estimate::CovLayout {
                    drift: false,
                    ..fit.layout
                },
            }),
            covariance_w2: fit
                .covariance_w2
                .as_ref()
                .map(|cov| fit.layout.without_drift(cov).1),
            t95: Some(fit.t95).filter(|t| t.is_finite()),
            noise: fit.noise,
            base_drift: fit.drift.clone(),
        });
        out.fits.push(fit);
        out.reports.push(report);
    }
    Ok(out)
}

/// A prediction of a run's energy from a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The model's key kind (how the run's tasks were grouped).
    pub key: KeyKind,
    /// One entry per domain of the run that the model knows.
    pub domains: Vec<DomainPrediction>,
    /// Sum of `predicted_j` over the domains with `in_total`, J.
    pub total_predicted_j: f64,
    /// Same sum of `measured_j`, when every such domain was measured.
    pub total_measured_j: Option<f64>,
    /// `100 · (predicted − measured) / measured` over the total.
    pub total_error_pct: Option<f64>,
    /// 95% interval of `total_predicted_j` from the models' parameter uncertainty
    /// (domains taken as independent); `None` when a counted domain has none.
    #[serde(default)]
    pub total_interval_j: Option<[f64; 2]>,
    /// 95% interval in which the total's measurement is expected: `total_interval_j`
    /// widened by each domain's measurement noise; `None` when a counted domain has none.
    #[serde(default)]
    pub total_measurement_interval_j: Option<[f64; 2]>,
    /// Domains not in the model, types not in the model, unreliable powers used.
    pub warnings: Vec<String>,
}

/// The prediction for one domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainPrediction {
    /// The domain.
    pub domain: Domain,
    /// Its name in the run.
    pub name: String,
    /// Whether the run measured it: then the window is the sampled one and the tasks are
    /// clipped to it; otherwise the window is the run's task span.
    pub sampled: bool,
    /// The window, s.
    pub window_s: f64,
    /// `P_base · window`, J.
    pub base_j: f64,
    /// `Σ_k p_k · T_k`, J.
    pub dynamic_j: f64,
    /// `base_j + dynamic_j`, J.
    pub predicted_j: f64,
    /// 95% interval of `predicted_j` from the model's parameter uncertainty (its
    /// covariance): how far the powers could be off, not the run-to-run noise. `None`
    /// when the model carries no covariance.
    #[serde(default)]
    pub interval_j: Option<[f64; 2]>,
    /// Half-width of the covariance-based interval, J (kept for the totals).
    #[serde(skip)]
    pub half_width_j: Option<f64>,
    /// 95% interval in which a measurement over the window is expected: `interval_j`
    /// widened by the measurement's own noise (the fit's residual variance, `a + b·Δt`
    /// per interval); `None` for a window the run did not sample, or a model without a
    /// covariance or a noise model.
    #[serde(default)]
    pub measurement_interval_j: Option<[f64; 2]>,
    /// Its half-width, J (kept for the totals).
    #[serde(skip)]
    pub measurement_half_j: Option<f64>,
    /// How far below the prediction the intervals reach beyond their half-width, J: what
    /// an unknown contention could take off ([`UNKNOWN_CONTENTION_MAX`]); 0 otherwise.
    #[serde(default)]
    pub unknown_contention_j: f64,
    /// Measured energy over the window, J.
    pub measured_j: Option<f64>,
    /// `100 · (predicted − measured) / measured`.
    pub error_pct: Option<f64>,
    /// MAPE of the predicted interval energies against the measured ones, %.
    pub interval_mape_pct: Option<f64>,
    /// Whether the domain counts in the totals (nested domains do not: see the docs).
    pub in_total: bool,
    /// Types of the run that the model does not know (predicted with 0 W dynamic power).
    pub missing_types: Vec<String>,
    /// Powers the prediction used that the model flags (not shown as measurements), with
    /// the flag: `potrf@cpu (imprecise)`, `base (held at 0)`.
    pub unreliable_types: Vec<String>,
    /// The same prediction per region of the run (application, calibration, user
    /// regions); empty when the run marks none.
    #[serde(default)]
    pub regions: Vec<RegionPrediction>,
}

/// The prediction of one region of a run on one domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionPrediction {
    /// The region's name.
    pub name: String,
    /// Its length, s.
    pub window_s: f64,
    /// `P_base · window + Σ_k p_k · T_k(region)`, J.
    pub predicted_j: f64,
    /// 95% interval from the model's covariance.
    pub interval_j: Option<[f64; 2]>,
    /// 95% interval in which a measurement of the region is expected (`interval_j`
    /// widened by the measurement's noise over it).
    #[serde(default)]
    pub measurement_interval_j: Option<[f64; 2]>,
    /// Measured over the region's spans, when the run sampled the domain there.
    pub measured_j: Option<f64>,
    /// `100 · (predicted − measured) / measured`.
    pub error_pct: Option<f64>,
}

impl Prediction {
    /// A region's measurement interval summed over the domains counted in the totals
    /// (taken as independent), J; `None` when one of them has none.
    pub fn region_measurement_interval(&self, name: &str) -> Option<[f64; 2]> {
        let (p, _) = self.region_total(name)?;
        let v = self
            .domains
            .iter()
            .filter(|d| d.in_total)
            .flat_map(|d| d.regions.iter().filter(|r| r.name == name))
            .map(|r| {
                r.measurement_interval_j
                    .map(|[lo, hi]| (0.5 * (hi - lo)).powi(2))
            })
            .sum::<Option<f64>>()?;
        let h = v.sqrt();
        Some([(p - h).max(0.0), p + h])
    }

    /// A region's predicted and measured energy summed over the domains counted in the
    /// totals: `(predicted, measured)`; `None` when no counted domain has the region.
    pub fn region_total(&self, name: &str) -> Option<(f64, Option<f64>)> {
        let rs: Vec<&RegionPrediction> = self
            .domains
            .iter()
            .filter(|d| d.in_total)
            .flat_map(|d| d.regions.iter().filter(|r| r.name == name))
            .collect();
        (!rs.is_empty()).then(|| {
            (
                rs.iter().map(|r| r.predicted_j).sum(),
                rs.iter().map(|r| r.measured_j).sum(),
            )
        })
    }
}

/// Predicts a run's energy per domain with a model. `tasks` is read once.
pub fn predict<B: Borrow<TaskRecord>>(
    model: &EnergyModel,
    parts: &TraceParts<'_>,
    tasks: impl IntoIterator<Item = B>,
) -> Result<Prediction, AttributionError> {
    let systems = TraceSystems::build(parts, tasks, model.key)?;
    predict_systems(model, &systems)
}

/// Predicts a whole in-memory trace's energy with a model.
///
/// A trace with no energy domain at all (an import of tasks without samples) is predicted
/// on the model's domains, each taken to cover every worker: right for a model of one
/// package (with its DRAM, cores, uncore or psys), refused
/// ([`AttributionError::NoWorkerMap`]) when the model has several packages or GPUs.
pub fn predict_trace(
    model: &EnergyModel,
    trace: &taskwatt_traces::Trace,
) -> Result<Prediction, AttributionError> {
    if !trace.domains.is_empty() {
        return predict(model, &TraceParts::from_trace(trace), trace_tasks(trace));
    }
    let count = |f: fn(&Domain) -> bool| model.domains.iter().filter(|d| f(&d.domain)).count();
    let packages = count(|d| matches!(d, Domain::CpuPackage { .. }));
    let gpus = count(|d| matches!(d, Domain::Gpu { .. }));
    if packages > 1 || gpus > 0 {
        return Err(AttributionError::NoWorkerMap {
            model: model
                .domains
                .iter()
                .map(|d| d.domain.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut workers: Vec<u32> = trace.meta.workers.iter().map(|w| w.id).collect();
    workers.extend(trace_tasks(trace).map(|t| t.worker));
    workers.sort_unstable();
    workers.dedup();
    let domains: Vec<taskwatt_traces::DomainInfo> = model
        .domains
        .iter()
        .enumerate()
        .map(|(i, d)| taskwatt_traces::DomainInfo {
            id: i as u16,
            meter: 0,
            domain: d.domain,
            name: d.name.clone(),
            unit: "J".into(),
            resolution_j: 0.0,
            wrap_range_j: None,
            update_interval_ns: None,
            sensor: taskwatt_traces::SensorKind::EnergyCounter,
            workers: workers.clone(),
        })
        .collect();
    let parts = TraceParts {
        domains: &domains,
        samples: &[],
        codelets: &trace.codelets,
        markers: &trace.markers,
        truth: None,
        frequencies: &[],
    };
    let mut p = predict(model, &parts, trace_tasks(trace))?;
    p.warnings.insert(
        0,
        "the trace has no energy domain: every worker is taken as covered by each of the \
         model's domains, over the run's task span"
            .to_owned(),
    );
    Ok(p)
}

/// Predicts from systems built with the model's key kind.
pub fn predict_systems(
    model: &EnergyModel,
    systems: &TraceSystems,
) -> Result<Prediction, AttributionError> {
    let mut warnings = Vec::new();
    model.validate(Path::new("(in memory)"))?;
    if systems.key != model.key {
        return Err(AttributionError::KeyKindMismatch {
            first: model.key,
            other: systems.key,
        });
    }
    let mut domains = Vec::new();
    for s in &systems.domains {
        let Some(m) = model.domain(s.domain()) else {
            warnings.push(format!(
                "domain {} ({}) is not in the model: not predicted",
                s.domain(),
                s.info.name
            ));
            continue;
        };
        domains.push(predict_domain(m, s, systems.span_ns, &mut warnings));
    }
    if domains.is_empty() {
        let list = |it: &mut dyn Iterator<Item = Domain>| {
            it.map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
        };
        return Err(AttributionError::NoMatchingDomain {
            model: list(&mut model.domains.iter().map(|d| d.domain)),
            trace: list(&mut systems.domains.iter().map(|d| d.domain())),
        });
    }
    // A second sensor of a device already predicted counts once.
    let second: Vec<bool> = {
        let predicted: Vec<&DomainSystem> = systems
            .domains
            .iter()
            .filter(|s| model.domain(s.domain()).is_some())
            .collect();
        (0..predicted.len())
            .map(|i| {
                predicted[..i]
                    .iter()
                    .any(|p| p.info.same_device(&predicted[i].info))
            })
            .collect()
    };
    mark_nested(&mut domains, &second);
    let counted: Vec<&DomainPrediction> = domains.iter().filter(|d| d.in_total).collect();
    let total_predicted_j: f64 = counted.iter().map(|d| d.predicted_j).sum();
    let total_measured_j = counted.iter().map(|d| d.measured_j).sum::<Option<f64>>();
    // Domains taken as independent: half-widths add in quadrature.
    let below: f64 = counted.iter().map(|d| d.unknown_contention_j).sum();
    let total = |half: fn(&DomainPrediction) -> Option<f64>| {
        let h = counted
            .iter()
            .map(|d| half(d).map(|h| h * h))
            .sum::<Option<f64>>()?
            .sqrt();
        Some([
            (total_predicted_j - h - below).max(0.0),
            total_predicted_j + h,
        ])
    };
    let total_interval_j = total(|d| d.half_width_j);
    let total_measurement_interval_j = total(|d| d.measurement_half_j);
    Ok(Prediction {
        total_interval_j,
        total_measurement_interval_j,
        key: model.key,
        total_error_pct: total_measured_j
            .and_then(|m| (m != 0.0).then(|| 100.0 * (total_predicted_j - m) / m)),
        total_predicted_j,
        total_measured_j,
        domains,
        warnings,
    })
}

fn predict_domain(
    m: &DomainModel,
    s: &DomainSystem,
    span: Option<(u64, u64)>,
    warnings: &mut Vec<String>,
) -> DomainPrediction {
    let powers: HashMap<&TypeKey, &Estimate> = m.types.iter().map(|t| (&t.key, &t.power)).collect();
    let sampled = s.intervals() > 0;
    let (a, b) = s.window_ns().or(span).unwrap_or((0, 0));
    let window_s = (b - a) as f64 * 1e-9;
    let base_w = m.base.value_w;
    let layout = m.layout.unwrap_or(super::estimate::CovLayout {
        types: m.types.len(),
        drift: false,
        contention: false,
    });
    let c_model = m.contention.as_ref().map_or(0.0, |c| c.value_w);
    // A domain of one worker never runs two tasks at once: its powers alone are exact.
    let one_worker = {
        let mut w = s.info.workers.clone();
        w.sort_unstable();
        w.dedup();
        w.len() < 2
    };
    if m.contention.is_some()
        && !one_worker
        && !s.occupancy().built
        && s.columns.iter().any(|c| c.stats.count > 0)
    {
        if let Some(why) = &s.occupancy().skipped {
            warnings.push(format!(
                "{}: the model has a contention but the run's occupancy is not known ({why}): \
                 predicted at the powers alone",
                s.domain()
            ));
        }
    }
    let mut coef = Vec::with_capacity(s.columns.len());
    let (mut missing, mut unreliable) = (Vec::new(), Vec::new());
    let flag_of = |e: &Estimate| e.flags.first().map_or("unreliable", |f| f.short());
    if !m.base.reliable {
        unreliable.push(format!("base ({})", flag_of(&m.base)));
    }
    // Model-order effective times, for the covariance.
    let index: HashMap<&TypeKey, usize> = m
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| (&t.key, i))
        .collect();
    let mut effective = vec![0.0; m.types.len()];
    let mut dc = 0.0;
    let mut dynamic_j = 0.0;
    // Each column's mean task duration in this run, s (for the measurement noise).
    let dur: Vec<f64> = s
        .columns
        .iter()
        .map(|c| {
            if c.stats.count > 0 {
                c.stats.total_ns as f64 * 1e-9 / c.stats.count as f64
            } else {
                0.0
            }
        })
        .collect();
    let mut task_q = 0.0;
    for (col, &d) in s.columns.iter().zip(&dur) {
        let (ns, occ) = if sampled {
            (col.stats.clipped_ns, col.stats.occ_ns)
        } else {
            (col.stats.total_ns, col.stats.occ_total_ns)
        };
        let (t, u) = (ns as f64 * 1e-9, occ as f64 * 1e-9);
        let x = t - c_model * u;
        let p = match powers.get(&col.key) {
            Some(e) => {
                if !e.reliable && ns > 0 {
                    unreliable.push(format!("{} ({})", col.key, flag_of(e)));
                }
                if let Some(&i) = index.get(&col.key) {
                    effective[i] += x;
                    dc -= e.value_w * u;
                }
                e.value_w
            }
            None => {
                if ns > 0 {
                    missing.push(col.key.to_string());
                }
                0.0
            }
        };
        dynamic_j += p * x;
        task_q += NoiseModel::task_q(std::iter::once((p, t, d)));
        coef.push(p);
    }
    let c = layout.gradient(window_s, &effective, 0.0, dc);
    let half_width_j = m
        .covariance_w2
        .as_ref()
        .and_then(|cov| super::estimate::half_width(cov, &c, m.t95.unwrap_or(1.96)));
    if !missing.is_empty() {
        warnings.push(format!(
            "{}: type(s) {} are not in the model: predicted with base power only",
            s.domain(),
            missing.join(", ")
        ));
    }
    if !unreliable.is_empty() {
        warnings.push(format!(
            "{}: the model's power(s) for {} are flagged, not measurements: this domain's \
             prediction rests on them{}",
            s.domain(),
            unreliable.join(", "),
            if half_width_j.is_some() {
                " (its interval includes their uncertainty)"
            } else {
                ""
            }
        ));
    }
    // Only an OLS model gets here with negative powers (see `EnergyModel::validate`).
    let negative: Vec<String> = std::iter::once(("base".to_owned(), base_w))
        .chain(m.types.iter().map(|t| (t.key.to_string(), t.power.value_w)))
        .filter(|(_, p)| *p < 0.0)
        .map(|(k, p)| format!("{k} ({p} W)"))
        .collect();
    if !negative.is_empty() {
        warnings.push(format!(
            "{}: the OLS model has negative power(s) {}: the prediction subtracts energy for \
             them; fit with the default NNLS solver for physical powers",
            s.domain(),
            negative.join(", ")
        ));
    }
    let base_j = base_w * window_s;
    let predicted_j = base_j + dynamic_j;
    let measurement_half_j = half_width_j.zip(m.noise).filter(|_| sampled).map(|(h, n)| {
        super::estimate::widen(h, n.variance_j2(s.intervals() as f64, window_s, task_q))
    });
    // A model without contention, a run with tasks side by side: at most
    // UNKNOWN_CONTENTION_MAX of their occupancy-weighted energy may not be drawn.
    let unknown = m.contention.is_none() && s.occupancy().built;
    let below = |dc: f64| {
        if unknown {
            UNKNOWN_CONTENTION_MAX * (-dc).max(0.0)
        } else {
            0.0
        }
    };
    let unknown_contention_j = below(dc);
    if unknown_contention_j > 0.0 && unknown_contention_j >= 1e-3 * (base_j + dynamic_j).abs() {
        warnings.push(format!(
            "{}: the model knows no contention (fitted on one worker, or with contention off) \
             and this run ran tasks side by side: it may be high by up to {} ({:.1} %), what a \
             contention of {UNKNOWN_CONTENTION_MAX} would take off; its intervals reach down \
             that far. Fit on a run with as many workers as this one",
            s.domain(),
            super::units::si(unknown_contention_j, "J"),
            100.0 * unknown_contention_j / (base_j + dynamic_j)
        ));
    }
    let drift_w = m.base_drift.as_ref().map_or(0.0, |d| d.value_w.abs());
    let measured_j = sampled.then(|| s.energy_j().iter().sum::<f64>());
    let interval_mape_pct = sampled
        .then(|| {
            let (mut sum, mut n) = (0.0, 0usize);
            for (i, &y) in s.energy_j().iter().enumerate() {
                if y == 0.0 {
                    continue;
                }
                let mut yhat = base_w * s.dt_ns(i) as f64 * 1e-9;
                for (c, p) in s.columns.iter().zip(&coef) {
                    let u = c.occ_ns.get(i).map_or(0.0, |&u| u as f64);
                    yhat += p * (c.time_ns[i] as f64 - c_model * u) * 1e-9;
                }
                sum += ((y - yhat) / y).abs();
                n += 1;
            }
            (n > 0).then(|| 100.0 * sum / n as f64)
        })
        .flatten();
    let t95 = m.t95.unwrap_or(1.96);
    let occ = s.region_occupancy();
    let regions = s
        .regions()
        .iter()
        .zip(s.region_time())
        .enumerate()
        .map(|(ri, (r, times))| {
            let window = r.length_ns() as f64 * 1e-9;
            let mut effective = vec![0.0; m.types.len()];
            let mut dc = 0.0;
            let mut predicted_j = base_w * window;
            let mut task_q = 0.0;
            for (ci, ((col, &(_, ns)), p)) in s.columns.iter().zip(times).zip(&coef).enumerate() {
                let busy = ns as f64 * 1e-9;
                task_q += NoiseModel::task_q(std::iter::once((*p, busy, dur[ci])));
                let u = occ
                    .get(ri)
                    .and_then(|o| o.get(ci))
                    .map_or(0.0, |&u| u as f64 * 1e-9);
                let x = busy - c_model * u;
                predicted_j += p * x;
                if let Some(&i) = index.get(&col.key) {
                    effective[i] += x;
                    dc -= p * u;
                }
            }
            let c = layout.gradient(window, &effective, 0.0, dc);
            let half = m
                .covariance_w2
                .as_ref()
                .and_then(|cov| super::estimate::half_width(cov, &c, t95));
            let interval_j = half.map(|h| [(predicted_j - h).max(0.0), predicted_j + h]);
            // The base over a part of the run may be off its mean by the fitted drift, up to
            // none for the whole window.
            let drift_j = drift_w * window * (1.0 - window / window_s.max(window)).max(0.0);
            let lo = below(dc);
            let measurement_interval_j = half.zip(m.noise).filter(|_| sampled).map(|(h, n)| {
                let var = n.variance_j2(s.intervals_in(&r.spans), window, task_q);
                let w = super::estimate::widen(h, var).hypot(drift_j);
                [(predicted_j - w - lo).max(0.0), predicted_j + w]
            });
            let interval_j = interval_j.map(|[a, b]| [(a - lo).max(0.0), b]);
            let measured_j = sampled
                .then(|| s.measured_over(&r.spans, &|c| s.split_share(c, base_w, &coef, c_model)))
                .flatten();
            RegionPrediction {
                name: r.name.clone(),
                window_s: window,
                predicted_j,
                interval_j,
                measurement_interval_j,
                error_pct: measured_j
                    .and_then(|mj| (mj != 0.0).then(|| 100.0 * (predicted_j - mj) / mj)),
                measured_j,
            }
        })
        .collect();
    DomainPrediction {
        regions,
        domain: s.domain(),
        name: s.info.name.clone(),
        sampled,
        window_s,
        base_j,
        dynamic_j,
        predicted_j,
        interval_j: half_width_j.map(|h| {
            [
                (predicted_j - h - unknown_contention_j).max(0.0),
                predicted_j + h,
            ]
        }),
        half_width_j,
        measurement_interval_j: measurement_half_j.map(|h| {
            [
                (predicted_j - h - unknown_contention_j).max(0.0),
                predicted_j + h,
            ]
        }),
        measurement_half_j,
        unknown_contention_j,
        error_pct: measured_j.and_then(|mj| (mj != 0.0).then(|| 100.0 * (predicted_j - mj) / mj)),
        measured_j,
        interval_mape_pct,
        in_total: true,
        missing_types: missing,
        unreliable_types: unreliable,
    }
}

/// Domains contained in another predicted domain leave the totals: `core-N` and
/// `uncore-N` inside `package-N`; packages and DRAM inside `psys`; a second sensor of a
/// device (a trace's later domain with the same `Domain`).
fn mark_nested(domains: &mut [DomainPrediction], second: &[bool]) {
    let present: Vec<Domain> = domains.iter().map(|d| d.domain).collect();
    let has_psys = present.contains(&Domain::Psys);
    for (i, d) in domains.iter_mut().enumerate() {
        // A second sensor of a device already listed counts once.
        d.in_total = !second.get(i).copied().unwrap_or(false)
            && match d.domain {
                Domain::Core { id } | Domain::Uncore { id } => {
                    !has_psys && !present.contains(&Domain::CpuPackage { id })
                }
                Domain::CpuPackage { .. } | Domain::Dram { .. } => !has_psys,
                Domain::Gpu { .. } | Domain::Psys => true,
            };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_model() -> EnergyModel {
        let est = |v| Estimate {
            value_w: v,
            se_w: Some(0.1),
            ci95_w: Some([v - 0.2, v + 0.2]),
            at_bound: false,
            reliable: true,
            flags: vec![],
            issues: vec![],
        };
        EnergyModel {
            format_version: MODEL_FORMAT_VERSION,
            key: KeyKind::CodeletArch,
            solver: Solver::Nnls,
            traces: 2,
            domains: vec![DomainModel {
                domain: Domain::CpuPackage { id: 0 },
                name: "package-0".into(),
                workers: 4,
                base: est(20.0),
                types: vec![TypeModel {
                    key: TypeKey::codelet_arch("gemm", taskwatt_traces::Arch::Cpu),
                    count: 10,
                    mean_duration_s: 1e-3,
                    power: est(7.5),
                }],
                rows: 100,
                r2: Some(0.99),
                cv_mape_pct: None,
                contention: None,
                covariance_w2: Some(vec![vec![0.01, -0.002], vec![-0.002, 0.01]]),
                layout: Some(super::super::estimate::CovLayout {
                    types: 1,
                    ..Default::default()
                }),
                t95: Some(1.97),
                noise: None,
                base_drift: None,
            }],
        }
    }

    #[test]
    fn version_1_files_read_as_models_without_contention() {
        let mut v: serde_json::Value = serde_json::from_str(&sample_model().to_json()).unwrap();
        v["format_version"] = 1.into();
        v["domains"][0].as_object_mut().unwrap().remove("layout");
        let m = EnergyModel::from_json(&v.to_string(), Path::new("old.json")).unwrap();
        assert_eq!(m.format_version, MODEL_FORMAT_VERSION);
        assert!(m.domains[0].contention.is_none() && m.domains[0].layout.is_none());
        // A contention that would make tasks draw nothing is refused, naming it.
        let mut m = sample_model();
        m.domains[0].contention = Some(m.domains[0].base.clone());
        let msg = m.validate(Path::new("m.json")).unwrap_err().to_string();
        assert!(
            msg.contains("contention") && msg.contains("m.json"),
            "{msg}"
        );
    }

    #[test]
    fn model_file_round_trips() {
        let dir = std::env::temp_dir().join(format!("tw-attr-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.json");
        let m = sample_model();
        m.save(&path).unwrap();
        assert_eq!(EnergyModel::load(&path).unwrap(), m);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_versions_are_rejected_with_the_file_and_versions() {
        let path = Path::new("models/old.json");
        let mut v: serde_json::Value = serde_json::from_str(&sample_model().to_json()).unwrap();
        v["format_version"] = 7.into();
        let err = EnergyModel::from_json(&v.to_string(), path).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, AttributionError::ModelVersion { .. }),
            "{msg}"
        );
        assert!(
            msg.contains("models/old.json") && msg.contains("format_version 7"),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("version {MODEL_FORMAT_VERSION}")),
            "{msg}"
        );
        v.as_object_mut().unwrap().remove("format_version");
        let msg = EnergyModel::from_json(&v.to_string(), path)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("format_version missing"), "{msg}");
        let msg = EnergyModel::from_json("{ not json", path)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("models/old.json") && msg.contains("not a taskwatt"),
            "{msg}"
        );
    }

    #[test]
    fn impossible_powers_are_refused_naming_the_file_the_type_and_the_value() {
        let path = Path::new("models/edited.json");
        let mut v: serde_json::Value = serde_json::from_str(&sample_model().to_json()).unwrap();
        v["domains"][0]["types"][0]["power"]["value_w"] = (-18985.0).into();
        let err = EnergyModel::from_json(&v.to_string(), path).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, AttributionError::ModelPower { value, .. } if value == -18985.0),
            "{msg}"
        );
        for part in ["models/edited.json", "package-0", "type gemm@cpu", "-18985"] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        // A negative base power too.
        let mut v: serde_json::Value = serde_json::from_str(&sample_model().to_json()).unwrap();
        v["domains"][0]["base"]["value_w"] = (-1.0).into();
        let msg = EnergyModel::from_json(&v.to_string(), path)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("base power has power -1 W"), "{msg}");
        // Numbers JSON cannot hold (1e999) are refused by the parser.
        let text = sample_model().to_json().replace("7.5", "1e999");
        assert!(EnergyModel::from_json(&text, path).is_err());
        // An OLS model may hold negative coefficients: that is what OLS gives.
        let mut ols = sample_model();
        ols.solver = Solver::Ols;
        ols.domains[0].types[0].power.value_w = -2.0;
        assert!(EnergyModel::from_json(&ols.to_json(), path).is_ok());
        // Not a NaN, an infinity or a power no device draws (issue 29: 1e308 W printed
        // `inf J` and 300-digit figures), even in memory and even from OLS.
        for bad in [f64::NAN, f64::INFINITY, 1e308, -1e308, 2e6] {
            let mut m = ols.clone();
            m.domains[0].types[0].power.value_w = bad;
            assert!(matches!(
                m.validate(path),
                Err(AttributionError::ModelPower { .. })
            ));
        }
    }

    #[test]
    fn interval_fields_no_fit_gives_are_refused_naming_the_field() {
        // A negative t95 printed an interval of -5e306 J, a huge noise one of inf J.
        let path = Path::new("models/edited.json");
        let mut m = sample_model();
        m.domains[0].t95 = Some(-2.0);
        let msg = m.validate(path).unwrap_err().to_string();
        assert!(
            msg.contains("t95 = -2.0") && msg.contains("package-0"),
            "{msg}"
        );
        let mut m = sample_model();
        m.domains[0].noise = Some(super::super::estimate::NoiseModel {
            per_interval_j2: 1e300,
            per_second_j2: 0.0,
            per_task: 0.0,
        });
        let msg = m.validate(path).unwrap_err().to_string();
        assert!(msg.contains("noise.per_interval_j2"), "{msg}");
        let mut m = sample_model();
        if let Some(cov) = &mut m.domains[0].covariance_w2 {
            cov[0][0] = -1.0;
            let msg = m.validate(path).unwrap_err().to_string();
            assert!(msg.contains("covariance_w2[0][0]"), "{msg}");
        }
        let mut m = sample_model();
        m.domains[0].base_drift = Some(Estimate {
            value_w: f64::INFINITY,
            ..m.domains[0].base.clone()
        });
        let msg = m.validate(path).unwrap_err().to_string();
        assert!(msg.contains("base_drift"), "{msg}");
        assert!(sample_model().validate(path).is_ok());
    }

    #[test]
    fn nested_domains_leave_the_total() {
        let d = |domain| DomainPrediction {
            domain,
            name: String::new(),
            sampled: false,
            window_s: 1.0,
            base_j: 1.0,
            dynamic_j: 0.0,
            predicted_j: 1.0,
            interval_j: None,
            half_width_j: None,
            measurement_interval_j: None,
            measurement_half_j: None,
            unknown_contention_j: 0.0,
            measured_j: None,
            error_pct: None,
            interval_mape_pct: None,
            in_total: true,
            missing_types: vec![],
            unreliable_types: vec![],
            regions: vec![],
        };
        let mut v = vec![
            d(Domain::CpuPackage { id: 0 }),
            d(Domain::Core { id: 0 }),
            d(Domain::Dram { id: 0 }),
            d(Domain::Gpu { index: 0 }),
        ];
        mark_nested(&mut v, &[]);
        let flags: Vec<bool> = v.iter().map(|d| d.in_total).collect();
        assert_eq!(flags, vec![true, false, true, true]);
        v.push(d(Domain::Psys));
        mark_nested(&mut v, &[]);
        let flags: Vec<bool> = v.iter().map(|d| d.in_total).collect();
        assert_eq!(flags, vec![false, false, false, true, true]);
    }
}
