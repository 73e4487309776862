//! Energy models: the fitted powers saved to a versioned file, fitted on one or more
//! traces, and used to predict the energy of another run.
//!
//! Domains are matched across traces by what they measure ([`Domain`], e.g. `package-0`),
//! never by id: ids are per trace. Types are matched by [`TypeKey`] (codelet *name*,
//! plus arch or footprint class according to the model's [`KeyKind`]).
//!
//! File format: JSON with a `format_version` field, checked before anything else is
//! parsed so that a file from a newer taskwatt fails with a message that says so.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use taskwatt_traces::Domain;

use super::error::AttributionError;
use super::estimate::Estimate;
use super::fit::DomainFit;
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
    /// Fitted on readings of taskwatt's simulated meter (in one trace at least): its
    /// powers are those the simulation was configured with, and what it predicts is
    /// labelled SIMULATED. Set by whoever fits ([`fit_model`] does not see the traces).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
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

/// The largest power, W, a model may hold for a domain's base or a task type
/// ([`taskwatt_traces::MAX_POWER_W`]): a model power beyond it is an edit gone wrong, and
/// predictions multiplied by it would print figures of hundreds of digits.
pub const MAX_MODEL_POWER_W: f64 = taskwatt_traces::MAX_POWER_W;

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
        let bytes = std::fs::read(path).map_err(|source| AttributionError::ModelIo {
            path: path.to_owned(),
            source,
        })?;
        // A trace given where the model goes (`predict t.twt model.json`) said only
        // "stream did not contain valid UTF-8".
        let text = String::from_utf8(bytes).map_err(|_| AttributionError::ModelIo {
            path: path.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not an energy model (a JSON file written by `taskwatt fit`): it is binary, \
                 a trace (.twt) perhaps; the model comes first: `taskwatt predict MODEL.json \
                 TRACE...`",
            ),
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
            simulated: false,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::predict::*;

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
            simulated: false,
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
        // A trace where the model goes: said, with the order of the arguments.
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("t.twt");
        std::fs::write(&binary, [b'T', b'W', 0xff, 0xfe, 0, 1]).unwrap();
        let msg = EnergyModel::load(&binary).unwrap_err().to_string();
        assert!(
            msg.contains("t.twt") && msg.contains("a trace (.twt) perhaps"),
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
