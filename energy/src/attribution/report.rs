//! The attribution report: per domain and task type, power, energy per task, shares of
//! the measured energy, fit quality and, for simulated meters, the error against the
//! configured truth.
//!
//! Accounting (see docs/attribution.md): the base power of a domain is split evenly over
//! the `W` workers the domain covers, so a task holds `P_base / W` while it runs on top of
//! its own dynamic power `p_k`. Base energy that no task holds is *idle* energy:
//! `idle = P_base · (window − busy / W)`, where `busy` is the task time summed over
//! workers. With this split, `Σ_k total_k + idle = P_base · window + Σ_k p_k · T_k`, the
//! fitted energy.

use serde::{Deserialize, Serialize};
use taskwatt_traces::{Arch, Domain, DomainId, GroundTruth};

use super::diagnostics::FitDiagnostics;
use super::estimate::Estimate;
use super::fit::DomainFit;
use super::key::{KeyKind, TypeKey};
use super::options::Solver;
use super::system::DomainSystem;

/// The whole report of one attribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttributionReport {
    /// How tasks were grouped.
    pub key: KeyKind,
    /// The solver used.
    pub solver: Solver,
    /// The precision threshold: a coefficient is shown as a measurement only when its
    /// 95% interval lies within this many percent of its value.
    #[serde(default = "default_precision")]
    pub precision_pct: f64,
    /// Tasks read.
    pub tasks: u64,
    /// Tasks on workers no domain covers (not attributed anywhere).
    pub unmetered_tasks: u64,
    /// One entry per domain that had at least two samples.
    pub domains: Vec<DomainReport>,
    /// Warnings that concern the whole trace (domains skipped, unmetered tasks).
    pub warnings: Vec<String>,
}

fn default_precision() -> f64 {
    super::options::DEFAULT_PRECISION_PCT
}

/// One domain's attribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainReport {
    /// What the domain measures.
    pub domain: Domain,
    /// Its id in the trace.
    pub id: DomainId,
    /// The sensor's name.
    pub name: String,
    /// Workers the domain covers (`W`).
    pub workers: usize,
    /// Intervals (rows).
    pub intervals: usize,
    /// Sampled window (first to last sample), s.
    pub window_s: f64,
    /// Median interval length, s.
    pub median_interval_s: f64,
    /// Energy measured over the window, J.
    pub measured_j: f64,
    /// Energy the fitted model gives over the window, J.
    pub fitted_j: f64,
    /// Base power `P_base`.
    pub base: Estimate,
    /// `P_base · window`, J.
    pub base_energy_j: f64,
    /// Base energy held by no task, J (see the module docs).
    pub idle_j: f64,
    /// `idle_j / measured_j`.
    pub idle_share: f64,
    /// `Σ_k p_k · T_k`, J.
    pub dynamic_j: f64,
    /// Task types, in first-seen order.
    pub types: Vec<TypeReport>,
    /// Fit quality, separability and warnings.
    pub fit: FitDiagnostics,
    /// Error against the simulated meter's truth, when the trace has one.
    pub truth: Option<TruthComparison>,
    /// Energy per region of the run (application first, then calibration, then user
    /// regions); empty when the trace marks none.
    #[serde(default)]
    pub regions: Vec<RegionReport>,
    /// The contention: each task's power falls by `c` of its power alone per other task
    /// running beside it (docs/attribution.md, "Contention"); present when the domain's
    /// occupancy was modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<super::contention::ContentionFit>,
    /// The sampled frequency and how it entered the fit (docs/attribution.md,
    /// "Frequency"); present when the trace has the domain's frequency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency: Option<super::frequency::FrequencyFit>,
    /// The base power's linear drift over the window (its change from the window's middle
    /// to its end, W; `base` is the window's mean), when modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_drift: Option<Estimate>,
    /// The rows' error variance the measurement intervals use (`a + b·Δt + c·q`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<super::estimate::NoiseModel>,
}

/// The energy of one region of the run on one domain, from the fitted powers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionReport {
    /// `application`, `calibration` or a user region's name.
    pub name: String,
    /// Its length (union of its spans), s.
    pub window_s: f64,
    /// Tasks on the domain's workers that started in it.
    pub tasks: u64,
    /// `P_base · window + Σ_k p_k · T_k(region)`, J.
    pub energy_j: f64,
    /// 95% interval of `energy_j` from the fit's covariance; `None` without one.
    pub interval_j: Option<[f64; 2]>,
    /// 95% interval in which a measurement of the region is expected: `interval_j`
    /// widened by the measurement's own noise over the region (the fit's residual
    /// variance, `a + b·Δt` per interval); what `measured_j` is checked against.
    #[serde(default)]
    pub measurement_interval_j: Option<[f64; 2]>,
    /// Measured energy over the region's spans, J: the intervals inside them, and the
    /// share of an interval a span's edge cuts that the fit puts on the region's side;
    /// `None` when a span lies outside the sampled window.
    pub measured_j: Option<f64>,
    /// `P_base · window`, J.
    pub base_j: f64,
    /// Base energy no task of the region holds, J.
    pub idle_j: f64,
    /// Per task type with time in the region.
    pub types: Vec<RegionType>,
    /// Where one type alone ran on the domain's workers in the region (a type's own
    /// calibration, say): its power measured directly, beside the fitted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone: Option<AloneCheck>,
}

/// A type's power measured directly, in a region where it alone ran on a domain's
/// workers: the measured energy less the base, over the type's busy time there (less the
/// fitted contention's share when several of its tasks ran at once), beside the fit's
/// estimate from the whole trace. The isolation reference for a fit made on mixed runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AloneCheck {
    /// The type.
    pub key: TypeKey,
    /// Its busy time in the region, s, and the region's length.
    pub busy_s: f64,
    /// `(measured - P_base · window) / effective busy time`, W.
    pub measured_w: f64,
    /// Standard error of `measured_w`, W: the base's over the region and the meter's noise
    /// there, both over the busy time. A type busy a small share of its region (tasks of
    /// a microsecond) magnifies the base's error by `window / busy`, so that a check
    /// agreeing with the fit then proves little; `None` without a base error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_se_w: Option<f64>,
    /// The fit's power of the type, W.
    pub fitted_w: f64,
}

/// One task type within a region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionType {
    /// The type.
    pub key: TypeKey,
    /// Tasks that started in the region.
    pub count: u64,
    /// Task time inside the region, summed over workers, s.
    pub busy_s: f64,
    /// `(p_k + P_base / W) · busy`, J.
    pub total_j: f64,
    /// `total_j` over the region's energy.
    pub share: f64,
    /// Whether the type's power is shown as a measurement.
    pub measured: bool,
}

/// One task type in one domain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeReport {
    /// The type.
    pub key: TypeKey,
    /// Tasks of the type on the domain's workers.
    pub count: u64,
    /// Of those, tasks overlapping the sampled window.
    pub in_window: u64,
    /// Mean duration, s.
    pub mean_duration_s: f64,
    /// Task time inside the window, summed over workers, s (`T_k`).
    pub busy_s: f64,
    /// Dynamic power `p_k` of a task of the type running alone.
    pub power: Estimate,
    /// Its mean power at the occupancy it ran at, `p_k·(T_k − c·U_k)/T_k`, when the
    /// domain's contention was modelled: what its tasks drew in this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_at_run: Option<Estimate>,
    /// Mean number of tasks running on the domain while it ran (itself included), when
    /// the occupancy is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_occupancy: Option<f64>,
    /// Its dynamic energy per task at the occupancy it ran at, J.
    pub dynamic_j_per_task: f64,
    /// That plus its workers' share of the base per task, `P_base / W · mean duration`, J.
    pub total_j_per_task: f64,
    /// `p_k·(T_k − c·U_k) + P_base / W · T_k`, J.
    pub total_j: f64,
    /// `total_j / measured_j`.
    pub share_of_measured: f64,
}

/// Estimates against the simulated meter's configured powers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthComparison {
    /// The meter's white power noise at 1 ms, W.
    pub noise_sigma_w: f64,
    /// `base` first, then one row per type.
    pub rows: Vec<TruthRow>,
}

/// One coefficient against its truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TruthRow {
    /// `base` or the type's name.
    pub name: String,
    /// The estimate, W.
    pub estimate_w: f64,
    /// The truth, W: the codelet's entry for the arch, else the default entry (`*`), else
    /// 0 W; `None` for a key without arch whose archs' truths differ.
    pub truth_w: Option<f64>,
    /// `estimate − truth`, W.
    pub error_w: Option<f64>,
    /// `100 · (estimate − truth) / truth`; `None` if the truth is 0.
    pub error_pct: Option<f64>,
    /// The estimate's standard error, W.
    pub se_w: Option<f64>,
    /// `(estimate − truth) / SE`.
    pub z: Option<f64>,
    /// Whether the estimate's 95% interval (`ci95_w`) contains the truth.
    pub covered: Option<bool>,
    /// The estimate's 95% interval, W.
    #[serde(default)]
    pub ci95_w: Option<[f64; 2]>,
    /// Whether the estimate was marked reliable.
    pub reliable: bool,
    /// The truth is the simulator's default power (codelet `*`): its configuration does not
    /// name this codelet.
    #[serde(default)]
    pub truth_is_default: bool,
}

/// Builds one domain's report from its fit and the system(s) it was fitted on.
pub(crate) fn domain_report(
    fit: &DomainFit,
    systems: &[&DomainSystem],
    truth: Option<&GroundTruth>,
) -> DomainReport {
    let first = systems[0];
    let workers = {
        let mut w = first.info.workers.clone();
        w.sort_unstable();
        w.dedup();
        w.len()
    };
    let window_ns: u64 = systems
        .iter()
        .filter_map(|s| s.window_ns())
        .map(|(a, b)| b - a)
        .sum();
    let window_s = window_ns as f64 * 1e-9;
    let measured_j: f64 = systems.iter().flat_map(|s| s.energy_j()).sum();
    let fitted_j = measured_j - fit.residuals_j.iter().sum::<f64>();
    let intervals: usize = systems.iter().map(|s| s.intervals()).sum();
    let mut dts: Vec<u64> = systems
        .iter()
        .flat_map(|s| (0..s.intervals()).map(move |i| s.dt_ns(i)))
        .collect();
    let median_interval_s = if dts.is_empty() {
        0.0
    } else {
        let mid = dts.len() / 2;
        *dts.select_nth_unstable(mid).1 as f64 * 1e-9
    };
    let p_base = fit.base.value_w;
    let per_worker = if workers > 0 {
        p_base / workers as f64
    } else {
        0.0
    };
    let share = |j: f64| {
        if measured_j != 0.0 {
            j / measured_j
        } else {
            0.0
        }
    };
    let theta = fit.theta();
    let types: Vec<TypeReport> = fit
        .keys
        .iter()
        .zip(&fit.types)
        .zip(&fit.stats)
        .enumerate()
        .map(|(k, ((key, est), st))| {
            let mean = if st.count > 0 {
                st.total_ns as f64 * 1e-9 / st.count as f64
            } else {
                0.0
            };
            let busy_s = st.clipped_ns as f64 * 1e-9;
            // The share of its time that counts at its power alone, after contention.
            let ratio = if st.clipped_ns > 0 {
                (st.clipped_ns as f64 - theta * st.occ_ns as f64) / st.clipped_ns as f64
            } else {
                1.0
            };
            let p = est.value_w;
            let dynamic = p * ratio;
            let total_j = (dynamic + per_worker) * busy_s;
            TypeReport {
                key: key.clone(),
                count: st.count,
                in_window: st.in_window,
                mean_duration_s: mean,
                busy_s,
                power: est.clone(),
                power_at_run: fit.types_at_run.get(k).cloned().flatten(),
                mean_occupancy: (fit.contention.is_some() && st.clipped_ns > 0)
                    .then(|| 1.0 + st.occ_ns as f64 / st.clipped_ns as f64),
                dynamic_j_per_task: dynamic * mean,
                total_j_per_task: (dynamic + per_worker) * mean,
                total_j,
                share_of_measured: share(total_j),
            }
        })
        .collect();
    let busy_s: f64 = types.iter().map(|t| t.busy_s).sum();
    let idle_j = if workers > 0 {
        p_base * (window_s - busy_s / workers as f64)
    } else {
        p_base * window_s
    };
    // Only a simulated domain has a truth: a real meter beside the simulated one (NVML
    // beside a simulated package) is not compared with anything.
    let truth = match (truth, systems) {
        (Some(t), [one]) if t.base_w.iter().any(|(d, _)| *d == one.info.id) => {
            Some(compare_truth(fit, one.info.id, t))
        }
        _ => None,
    };
    let regions = match systems {
        [one] => region_reports(fit, one, workers),
        _ => Vec::new(),
    };
    DomainReport {
        domain: first.domain(),
        id: first.info.id,
        name: first.info.name.clone(),
        workers,
        intervals,
        window_s,
        median_interval_s,
        measured_j,
        fitted_j,
        base: fit.base.clone(),
        base_energy_j: p_base * window_s,
        idle_j,
        idle_share: share(idle_j),
        dynamic_j: types
            .iter()
            .map(|t| t.total_j - per_worker * t.busy_s)
            .sum(),
        types,
        fit: fit.diagnostics.clone(),
        truth,
        regions,
        contention: fit.contention.clone(),
        frequency: fit.frequency.clone(),
        base_drift: fit.drift.clone(),
        noise: fit.noise,
    }
}

/// Each region's energy from the fitted powers (at the occupancy its tasks ran at, with
/// the base's drift over its spans), with its interval and measured energy.
fn region_reports(fit: &DomainFit, sys: &DomainSystem, workers: usize) -> Vec<RegionReport> {
    let p_base = fit.base.value_w;
    let per_worker = if workers > 0 {
        p_base / workers as f64
    } else {
        0.0
    };
    let theta = fit.theta();
    // Fit columns by key (the system's columns are the fit's for a single trace, but
    // match by key to be safe).
    let index: std::collections::HashMap<&TypeKey, usize> =
        fit.keys.iter().enumerate().map(|(i, k)| (k, i)).collect();
    let occ = sys.region_occupancy();
    let powers: Vec<f64> = sys
        .columns()
        .iter()
        .map(|c| index.get(&c.key).map_or(0.0, |&k| fit.types[k].value_w))
        .collect();
    sys.regions()
        .iter()
        .zip(sys.region_time())
        .enumerate()
        .map(|(ri, (r, times))| {
            let window_s = r.length_ns() as f64 * 1e-9;
            let mut effective = vec![0.0; fit.keys.len()];
            let mut dc = 0.0;
            let mut types = Vec::new();
            let mut tasks = 0;
            let mut busy_total = 0.0;
            let mut dynamic = 0.0;
            let mut task_q = 0.0;
            // The types with time here, and the last one's (key, busy, effective time).
            let mut ran = 0;
            let mut last: Option<(TypeKey, f64, f64, f64)> = None;
            for (ci, (col, &(count, ns))) in sys.columns().iter().zip(times).enumerate() {
                let Some(&k) = index.get(&col.key) else {
                    continue;
                };
                tasks += count;
                if ns == 0 && count == 0 {
                    continue;
                }
                let busy_s = ns as f64 * 1e-9;
                let u_s = occ
                    .get(ri)
                    .and_then(|o| o.get(ci))
                    .map_or(0.0, |&u| u as f64 * 1e-9);
                let x = busy_s - theta * u_s;
                if ns > 0 {
                    ran += 1;
                    last = Some((col.key.clone(), busy_s, x, fit.types[k].value_w));
                }
                busy_total += busy_s;
                effective[k] += x;
                let est = &fit.types[k];
                let st = &fit.stats[k];
                if st.count > 0 {
                    let mean_s = st.total_ns as f64 * 1e-9 / st.count as f64;
                    task_q += super::estimate::NoiseModel::task_q(std::iter::once((
                        est.value_w,
                        busy_s,
                        mean_s,
                    )));
                }
                dc -= est.value_w * u_s;
                dynamic += est.value_w * x;
                types.push(RegionType {
                    key: col.key.clone(),
                    count,
                    busy_s,
                    total_j: est.value_w * x + per_worker * busy_s,
                    share: 0.0,
                    measured: est.reliable,
                });
            }
            let drift_s = drift_integral(sys, &r.spans);
            let base_j = p_base * window_s;
            let energy_j =
                base_j + dynamic + fit.drift.as_ref().map_or(0.0, |d| d.value_w * drift_s);
            for ty in &mut types {
                ty.share = if energy_j != 0.0 {
                    ty.total_j / energy_j
                } else {
                    0.0
                };
            }
            let c = fit.layout.gradient(window_s, &effective, drift_s, dc);
            let half = match (&fit.covariance_w2, &fit.estimable_covariance) {
                (Some(cov), _) => super::estimate::half_width(cov, &c, fit.t95),
                // A type not identifiable alone: the region's energy may still be.
                (None, Some(e)) => e.half_width(&c, fit.t95),
                (None, None) => None,
            };
            let interval_j = half.map(|h| [(energy_j - h).max(0.0), energy_j + h]);
            let measurement_interval_j = half.zip(fit.noise).map(|(h, n)| {
                let var = n.variance_j2(sys.intervals_in(&r.spans), window_s, task_q);
                let w = super::estimate::widen(h, var);
                [(energy_j - w).max(0.0), energy_j + w]
            });
            let measured_j =
                sys.measured_over(&r.spans, &|c| sys.split_share(c, p_base, &powers, theta));
            let idle_j = if workers > 0 {
                p_base * (window_s - busy_total / workers as f64)
            } else {
                base_j
            };
            let drift_j = fit.drift.as_ref().map_or(0.0, |d| d.value_w * drift_s);
            let alone = match (ran, last, measured_j) {
                (1, Some((key, busy_s, x, fitted_w)), Some(m)) if x > 0.0 => {
                    // The base's error over the window and the reading's own noise, per
                    // second of the type's (effective) busy time.
                    let base_var = fit.base.se_w.map(|se| (se * window_s).powi(2));
                    let noise_var = fit
                        .noise
                        .map(|n| n.variance_j2(sys.intervals_in(&r.spans), window_s, 0.0));
                    Some(AloneCheck {
                        key,
                        busy_s,
                        measured_w: (m - base_j - drift_j) / x,
                        measured_se_w: base_var
                            .map(|b| (b + noise_var.unwrap_or(0.0)).max(0.0).sqrt() / x),
                        fitted_w,
                    })
                }
                _ => None,
            };
            RegionReport {
                name: r.name.clone(),
                window_s,
                tasks,
                energy_j,
                interval_j,
                measurement_interval_j,
                measured_j,
                base_j,
                idle_j,
                types,
                alone,
            }
        })
        .collect()
}

/// `∫ τ dt` over `spans`, s: the base drift's column over them (`τ` the time on `[-1, 1]`
/// across the system's sampled window).
pub(crate) fn drift_integral(sys: &DomainSystem, spans: &[(u64, u64)]) -> f64 {
    let Some((t0, tn)) = sys.window_ns() else {
        return 0.0;
    };
    let centre = 0.5 * (t0 as f64 + tn as f64);
    let half = (0.5 * (tn - t0) as f64).max(1.0);
    spans
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (a as f64 - centre, b as f64 - centre);
            (b * b - a * a) / (2.0 * half) * 1e-9
        })
        .sum()
}

fn compare_truth(fit: &DomainFit, id: DomainId, truth: &GroundTruth) -> TruthComparison {
    let realised = truth.realised_of(id);
    // The base the run realised (its drift included) when the meter recorded it, else the
    // configured one.
    let base_truth = realised
        .map(|r| r.base_mean_w)
        .or_else(|| truth.base_w.iter().find(|(d, _)| *d == id).map(|&(_, w)| w));
    let mut rows = vec![truth_row("base".to_owned(), &fit.base, base_truth)];
    for (key, est) in fit.keys.iter().zip(&fit.types) {
        let mut row = truth_row(key.to_string(), est, type_truth(truth, id, key));
        // A codelet the simulator's configuration does not name draws its default power:
        // the truth is a placeholder, not something anyone configured for this type.
        row.truth_is_default = !truth.codelet_entry(&key.codelet).is_some_and(|name| {
            truth
                .task_w
                .iter()
                .any(|t| t.domain == id && t.codelet == name)
        });
        rows.push(row);
    }
    // What the run realised: each type's mean power at the occupancy it ran at, and the
    // contention (exact for two workers; for more, the occupancy factor is not linear in
    // the number of tasks and has no single `c`).
    if let Some(r) = realised {
        for (k, (key, est)) in fit.keys.iter().zip(&fit.types_at_run).enumerate() {
            let Some(est) = est else { continue };
            let t = r
                .types
                .iter()
                .filter(|t| t.codelet == key.codelet && key.arch.is_none_or(|a| a == t.arch))
                .fold((0.0, 0.0), |(e, b), t| {
                    (e + t.at_run_w * t.busy_s, b + t.busy_s)
                });
            let truth_w = (t.1 > 0.0).then(|| t.0 / t.1);
            let _ = k;
            rows.push(truth_row(format!("{key} at run"), est, truth_w));
        }
        if let Some(c) = &fit.contention {
            let g = &r.occupancy_factor;
            let linear = g.len() >= 3
                && (2..g.len()).all(|k| {
                    let c2 = 1.0 - g[2];
                    (g[k] - (1.0 - c2 * (k - 1) as f64).max(0.0)).abs() < 1e-9
                });
            let c_true = (g.len() >= 3 && (g.len() == 3 || linear)).then(|| 1.0 - g[2]);
            rows.push(truth_row("contention".to_owned(), &c.c, c_true));
        }
    }
    TruthComparison {
        noise_sigma_w: truth.noise_of(id),
        rows,
    }
}

/// The simulated meter's extra power for a type: its codelet's entry for the arch, else
/// the default entry (codelet `*`), else 0 W, as the simulator itself resolves it. A key
/// without arch takes the value only when every arch agrees.
fn type_truth(truth: &GroundTruth, id: DomainId, key: &TypeKey) -> Option<f64> {
    let entries = |name: &str| -> Vec<(Arch, f64)> {
        truth
            .task_w
            .iter()
            .filter(|t| t.domain == id && t.codelet == name)
            .map(|t| (t.arch, t.extra_w))
            .collect()
    };
    let named = truth
        .codelet_entry(&key.codelet)
        .map_or_else(Vec::new, entries);
    let default = entries("*");
    // One value for an arch, or None if the entries disagree.
    let agree = |v: &[(Arch, f64)], arch: Arch| -> Option<Option<f64>> {
        let mut it = v.iter().filter(|(a, _)| *a == arch).map(|&(_, w)| w);
        let first = it.next()?;
        Some(
            it.all(|w| (w - first).abs() <= 1e-12 * first.abs().max(1.0))
                .then_some(first),
        )
    };
    let resolve = |arch: Arch| {
        agree(&named, arch)
            .or_else(|| agree(&default, arch))
            .unwrap_or(Some(0.0))
    };
    match key.arch {
        Some(a) => resolve(a),
        None => {
            let mut archs: Vec<Arch> = named.iter().chain(&default).map(|&(a, _)| a).collect();
            archs.dedup();
            let values: Option<Vec<f64>> = archs.iter().map(|&a| resolve(a)).collect();
            let values = values?;
            let first = values.first().copied().unwrap_or(0.0);
            values
                .iter()
                .all(|&w| (w - first).abs() <= 1e-12 * first.abs().max(1.0))
                .then_some(first)
        }
    }
}

fn truth_row(name: String, est: &Estimate, truth_w: Option<f64>) -> TruthRow {
    let error_w = truth_w.map(|t| est.value_w - t);
    let z = match (error_w, est.se_w) {
        (Some(e), Some(se)) if se > 0.0 => Some(e / se),
        (Some(e), Some(_)) => Some(if e == 0.0 {
            0.0
        } else {
            f64::INFINITY * e.signum()
        }),
        _ => None,
    };
    TruthRow {
        name,
        estimate_w: est.value_w,
        truth_w,
        error_w,
        error_pct: truth_w
            .zip(error_w)
            .and_then(|(t, e)| (t != 0.0).then(|| 100.0 * e / t)),
        se_w: est.se_w,
        z: z.filter(|z| z.is_finite()),
        covered: truth_w.and_then(|t| est.covers(t)),
        ci95_w: est.ci95_w,
        reliable: est.reliable,
        truth_is_default: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_traces::TruthEntry;

    #[test]
    fn type_truth_falls_back_like_the_simulator() {
        let e = |domain, codelet: &str, arch, extra_w| TruthEntry {
            domain,
            codelet: codelet.into(),
            arch,
            extra_w,
        };
        let truth = GroundTruth {
            task_w: vec![
                e(0, "*", Arch::Cpu, 2.0),
                e(0, "*", Arch::Gpu, 10.0),
                e(0, "gemm", Arch::Cpu, 5.0),
                e(1, "gemm", Arch::Cpu, 7.0),
            ],
            ..GroundTruth::default()
        };
        let t = |key: TypeKey| type_truth(&truth, 0, &key);
        assert_eq!(t(TypeKey::codelet_arch("gemm", Arch::Cpu)), Some(5.0));
        assert_eq!(t(TypeKey::codelet_arch("gemm", Arch::Gpu)), Some(10.0));
        assert_eq!(t(TypeKey::codelet_arch("potrf", Arch::Cpu)), Some(2.0));
        // Without arch, potrf's CPU and GPU truths differ.
        assert_eq!(t(TypeKey::codelet("potrf")), None);
        assert_eq!(type_truth(&truth, 1, &TypeKey::codelet("gemm")), Some(7.0));
        assert_eq!(type_truth(&truth, 2, &TypeKey::codelet("gemm")), Some(0.0));
    }

    #[test]
    fn truth_rows_compute_errors_and_coverage() {
        let est = Estimate {
            value_w: 10.5,
            se_w: Some(0.5),
            ci95_w: Some([9.52, 11.48]),
            at_bound: false,
            reliable: true,
            flags: vec![],
            issues: vec![],
        };
        let r = truth_row("x".into(), &est, Some(10.0));
        assert_eq!(r.error_w, Some(0.5));
        assert_eq!(r.error_pct, Some(5.0));
        assert_eq!(r.z, Some(1.0));
        assert_eq!(r.covered, Some(true));
        let r = truth_row("x".into(), &est, Some(11.5));
        assert_eq!(r.covered, Some(false));
        let r = truth_row("x".into(), &est, Some(0.0));
        assert_eq!(r.error_pct, None);
        let held = Estimate {
            value_w: 0.0,
            se_w: None,
            ci95_w: None,
            at_bound: true,
            ..est
        };
        let r = truth_row("x".into(), &held, Some(1.0));
        assert_eq!((r.z, r.covered), (None, None));
        // An interval held at the bound covers a small true power.
        let held = Estimate {
            ci95_w: Some([0.0, 2.0]),
            ..held
        };
        assert_eq!(truth_row("x".into(), &held, Some(1.0)).covered, Some(true));
    }
}
