//! Predicting a run's energy with a fitted model: per domain, region and type, with the
//! intervals the model's covariance, noise and contention give.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use taskwatt_traces::{Domain, TaskRecord};

use super::error::AttributionError;
use super::estimate::{Estimate, NoiseModel};
use super::input::{trace_tasks, TraceParts};
use super::key::{KeyKind, TypeKey};
use super::model::*;
use super::system::{DomainSystem, TraceSystems};

/// The share of the fitted base drift (`β`: the base goes from `P_base − β` to
/// `P_base + β` across the fitted window) by which a predicted run's base may sit off the
/// model's over a long region or its whole window.
const RUN_TO_RUN_DRIFT: f64 = 0.5;
/// A prediction of a run's energy from a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnergyPrediction {
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

impl EnergyPrediction {
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
) -> Result<EnergyPrediction, AttributionError> {
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
) -> Result<EnergyPrediction, AttributionError> {
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
) -> Result<EnergyPrediction, AttributionError> {
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
    Ok(EnergyPrediction {
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
    // A type the model names only in another case (StarPU's GEMM, taskwatt's gemm): the
    // model's, as the platform files' speed factors match names. Unique matches only.
    let folded = |k: &TypeKey| -> Option<&TypeKey> {
        let mut hits = m.types.iter().map(|t| &t.key).filter(|t| {
            t.arch == k.arch && t.codelet.eq_ignore_ascii_case(&k.codelet) && **t != *k
        });
        let hit = hits.next()?;
        hits.next().is_none().then_some(hit)
    };
    let mut case_matched: Vec<String> = Vec::new();
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
    // A contention fitted on a few workers, applied to many: beyond the occupancies it was
    // fitted on (a model of 2 cores predicting 16 busy ones put a package's dynamic power
    // near 0 and the prediction 74 % low, without a word).
    if let Some(c) = m.contention.as_ref().filter(|c| c.value_w > 0.0) {
        let max_k = s
            .occupancy()
            .time_by_k_ns
            .iter()
            .rposition(|&t| t > 0)
            .unwrap_or(0);
        if max_k > m.workers.max(1) {
            let left = 1.0 - c.value_w * (max_k - 1) as f64;
            warnings.push(format!(
                "{}: the model's contention (c = {:.3} per extra busy task) was fitted on {} \
                 worker(s), and this run had up to {max_k} tasks at once, where it leaves each \
                 task {}: an extrapolation, and its dynamic energy may be far off",
                s.domain(),
                c.value_w,
                m.workers,
                if left > 0.0 {
                    format!("{:.0} % of its power alone", 100.0 * left)
                } else {
                    "no dynamic power at all".to_owned()
                }
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
        let key = match powers.contains_key(&col.key) {
            true => &col.key,
            false => match folded(&col.key) {
                Some(k) => {
                    if ns > 0 {
                        case_matched.push(format!("{} as the model's {k}", col.key));
                    }
                    k
                }
                None => &col.key,
            },
        };
        let p = match powers.get(key) {
            Some(e) => {
                if !e.reliable && ns > 0 {
                    unreliable.push(format!("{} ({})", col.key, flag_of(e)));
                }
                if let Some(&i) = index.get(key) {
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
    // Types the model lacks: their dynamic energy is missing from the prediction, so it is
    // a lower bound, and an interval over the model's coefficients alone would look tight
    // around a figure that is not (StarPU's GEMM against a model of taskwatt's gemm: 42 %
    // low, +-0.2 %).
    let half_width_j = m
        .covariance_w2
        .as_ref()
        .filter(|_| missing.is_empty())
        .and_then(|cov| super::estimate::half_width(cov, &c, m.t95.unwrap_or(1.96)));
    if !case_matched.is_empty() {
        warnings.push(format!(
            "{}: type(s) {} (names that differ only in case)",
            s.domain(),
            case_matched.join(", ")
        ));
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "{}: type(s) {} are not in the model: predicted with base power only, so the \
             prediction lacks their dynamic energy (a lower bound) and has no interval; fit \
             the model on a run of these types (`taskwatt predict` matches types by codelet \
             and architecture)",
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
    let drift_w = m.base_drift.as_ref().map_or(0.0, |d| d.value_w.abs());
    // The run predicted is not the one fitted: its base may sit off the model's by half
    // the fitted drift over its whole window (see the regions' drift below).
    let measurement_half_j = half_width_j.zip(m.noise).filter(|_| sampled).map(|(h, n)| {
        super::estimate::widen(h, n.variance_j2(s.intervals() as f64, window_s, task_q))
            .hypot(drift_w * window_s * RUN_TO_RUN_DRIFT)
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
    // Never more than the tasks' own energy: contention takes off part of what they draw,
    // not the base (15 cores beside each other at 0.1 each took off 108 % of it, and the
    // interval reached 0 J, below the base energy alone).
    let unknown_contention_j = below(dc).min(dynamic_j.max(0.0));
    if unknown_contention_j > 0.0 && unknown_contention_j >= 1e-3 * (base_j + dynamic_j).abs() {
        warnings.push(format!(
            "{}: the model has no contention term (its fit did not identify one: a run on one \
             worker, contention off, or tasks whose number at once hardly varied) and this run \
             ran tasks side by side: it may be high by up to {} ({:.1} %), what a contention \
             of {UNKNOWN_CONTENTION_MAX} would take off; its intervals reach down that far. Fit \
             on a run with type calibration (each type alone and on every worker), which \
             identifies it",
            s.domain(),
            super::units::si(unknown_contention_j, "J"),
            100.0 * unknown_contention_j / (base_j + dynamic_j)
        ));
    }
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
            // As for the whole window: a type the model lacks makes the prediction a lower
            // bound, without an interval (the regions' table showed one beside a total
            // that had none).
            let half = m
                .covariance_w2
                .as_ref()
                .filter(|_| missing.is_empty())
                .and_then(|cov| super::estimate::half_width(cov, &c, t95));
            let interval_j = half.map(|h| [(predicted_j - h).max(0.0), predicted_j + h]);
            // The base over a part of the run may be off its mean by the fitted drift, less
            // the longer the part; and the run predicted is not the one fitted: its own base
            // may sit off the model's by half the drift even over its whole window (a
            // package warms differently from one run to the next; BENCHMARKS.md,
            // "Cross-worker-count prediction": without this, 6 of 30 totals missed by 0.14
            // to 0.20 %).
            let drift_j =
                drift_w * window * (1.0 - window / window_s.max(window)).max(RUN_TO_RUN_DRIFT);
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
pub(crate) fn mark_nested(domains: &mut [DomainPrediction], second: &[bool]) {
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
