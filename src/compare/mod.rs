//! Policies compared by their energy: run a graph under several scheduling policies (and
//! dmdae at several gamma values), with repeats, fit one energy model on one policy's runs,
//! predict every run from its trace alone, and compare with what was measured; the table,
//! JSON and the plots (measured against predicted, and the Pareto front of a gamma sweep).
//!
//! [`Compare`] does it for your own graph: a closure builds the runtime, another submits
//! the graph.
//!
//! ```
//! use taskwatt::compare::Compare;
//! use taskwatt::{Codelet, Measure, MeterChoice, Runtime, Task};
//!
//! let work = Codelet::new("work").cpu(|ctx| {
//!     ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x = x.sqrt() + 1.0)
//! });
//! let cmp = Compare::new()
//!     .policies(["eager", "lws"])
//!     .repeat(1)
//!     .measure(Measure::new().meter(MeterChoice::Sim))
//!     .run(
//!         || Runtime::builder().workers(2),
//!         |rt| {
//!             let data: Vec<_> = (0..4).map(|_| rt.register(vec![2.0f64; 1 << 12])).collect();
//!             for _ in 0..50 {
//!                 for d in &data {
//!                     rt.submit(Task::new(&work).rw(d))?;
//!                 }
//!             }
//!             rt.wait_all()
//!         },
//!     )
//!     .unwrap();
//! println!("{}", cmp.text());
//! ```
//!
//! `taskwatt compare` is built on [`compare_runs`] (its runs are the built-in apps'). Runs
//! are interleaved (repeat `r` runs the policies in an order rotated by `r`) so that a drift
//! of the machine does not favour one policy.

#[cfg(feature = "plots")]
use std::path::Path;
use std::path::PathBuf;

use serde::Serialize;
use taskwatt_energy::attribution::{
    fit_model, predict_trace, AttributionError, AttributionOptions, EnergyModel, TraceSystems,
};
use taskwatt_runtime::{Runtime, RuntimeBuilder, RuntimeError};
use taskwatt_traces::{read_trace, TraceError};

use crate::{Measure, MeasureError};

mod output;
mod stats;

/// One run: its policy and repeat, what was measured and what the model predicted.
#[derive(Serialize, Clone, Debug)]
pub struct CompareRun {
    /// The policy (`dmdae:γ` for dmdae at a gamma).
    pub policy: String,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// The graph's makespan, s.
    pub makespan_s: f64,
    /// Energy measured over the run, J.
    pub measured_j: f64,
    /// Energy the model predicts from the run's trace, J.
    pub predicted_j: f64,
    /// `100 · (predicted − measured) / measured`.
    pub error_pct: f64,
    /// 95% interval in which the measurement was expected (the model's uncertainty and
    /// the meter's noise), and whether it held the measurement.
    pub measurement_interval_j: Option<[f64; 2]>,
    /// Whether that interval held the measurement.
    pub covered: Option<bool>,
    /// The application region (the task graph without its calibration), when marked.
    pub application: Option<RegionEnergy>,
    /// Whether the model was fitted on this policy's runs.
    pub fitted_on: bool,
    /// The run's trace.
    pub trace: PathBuf,
}

/// The application region of a run (or the mean over a policy's runs).
#[derive(Serialize, Clone, Copy, Debug)]
pub struct RegionEnergy {
    /// Predicted energy, J.
    pub predicted_j: f64,
    /// Measured energy, J.
    pub measured_j: Option<f64>,
    /// As the run's: the 95% interval for the measurement, and whether it held it.
    pub measurement_interval_j: Option<[f64; 2]>,
    /// Whether the interval held the measurement.
    pub covered: Option<bool>,
}

/// Whether `m` lies in `iv`.
fn covers(iv: Option<[f64; 2]>, m: Option<f64>) -> Option<bool> {
    let ([lo, hi], m) = (iv?, m?);
    Some(lo <= m && m <= hi)
}

/// A policy over its runs: means, the largest error, the intervals that held.
#[derive(Serialize, Clone, Debug)]
pub struct PolicySummary {
    /// The policy.
    pub policy: String,
    /// Its runs.
    pub runs: usize,
    /// Mean makespan, s.
    pub makespan_s: f64,
    /// Mean measured energy, J.
    pub measured_j: f64,
    /// Mean predicted energy, J.
    pub predicted_j: f64,
    /// Mean error, %.
    pub error_pct: f64,
    /// Largest error in absolute value, %.
    pub max_abs_error_pct: f64,
    /// Runs whose measurement interval held the measurement, of those with one.
    pub covered: (usize, usize),
    /// Mean energy of the application region (the graph alone), when every run marks it
    /// (its `covered` and interval are the runs', in `application_covered`).
    pub application: Option<RegionEnergy>,
    /// `(covered, with an interval)` over the runs' application regions: what the text's
    /// second table's `covers` column shows.
    pub application_covered: (usize, usize),
    /// Whether the model was fitted on its runs.
    pub fitted_on: bool,
    /// The lowest and highest measured energy of its runs (whole runs), J: the spread the
    /// verdict's test weighs (the text prints it; the means alone were in the JSON).
    pub measured_range_j: [f64; 2],
    /// The same over the application regions, when every run marks one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application_range_j: Option<[f64; 2]>,
}

/// A comparison of policies: every run, every policy, and the simulated rows if any.
#[derive(Serialize, Clone, Debug)]
pub struct Comparison {
    /// The application's name.
    pub app: String,
    /// Whether the energies come from the simulated meter.
    pub simulated: bool,
    /// The policy the model was fitted on.
    pub fit_on: String,
    /// Runs per policy.
    pub repeat: usize,
    /// Every run, in the order run.
    pub runs: Vec<CompareRun>,
    /// One row per policy, in the order given.
    pub policies: Vec<PolicySummary>,
    /// Rows simulated in virtual time (`--simulate`), not run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub virtual_rows: Vec<SimulatedRow>,
    /// What the simulated rows' intervals let one say of their order, per platform:
    /// `simulate`'s verdicts (a ranking, or "indistinguishable here").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub virtual_verdicts: Vec<String>,
    /// The predictions' warnings, each kind once (with the figures of the first run that
    /// gave it): the model's flagged powers (collinear, held at 0, imprecise) every
    /// prediction rests on, types it lacks, contention beyond it.
    pub warnings: Vec<String>,
    /// The model fitted on `fit_on`'s runs.
    #[serde(skip)]
    pub model: EnergyModel,
}

/// A policy and platform that were not run: simulated from a recorded graph.
#[derive(Serialize, Clone, Debug)]
pub struct SimulatedRow {
    /// The policy simulated.
    pub policy: String,
    /// The platform's name.
    pub platform: String,
    /// Its makespan in virtual time, s.
    pub makespan_s: f64,
    /// The platform's simulated meter over the graph, J.
    pub meter_j: Option<f64>,
    /// The fitted model's prediction of the simulated run, J.
    pub predicted_j: Option<f64>,
    /// The makespan's 95 % interval over the replicas of the simulation, s.
    pub makespan_ci_s: Option<[f64; 2]>,
    /// The simulated meter's, J.
    pub meter_ci_j: Option<[f64; 2]>,
    /// `predicted_j`'s: the replicas' spread and the model's own interval, combined, J.
    #[serde(default)]
    pub predicted_ci_j: Option<[f64; 2]>,
    /// The simulated machine's domains the model has no fit of (left out of
    /// `predicted_j`; the meter counts them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpredicted_domains: Vec<String>,
}

/// A run to compare: its policy (`dmdae:1000` for dmdae at a gamma), its repeat, its
/// makespan and its trace.
#[derive(Clone, Debug)]
pub struct RecordedRun {
    /// The policy, as the comparison names it.
    pub policy: String,
    /// Which repeat (0-based).
    pub repeat: usize,
    /// The graph's makespan, s.
    pub makespan_s: f64,
    /// The run's trace, with energy samples.
    pub trace: PathBuf,
}

/// Fits a model on `fit_on`'s runs, predicts every run from its trace alone, and compares
/// with what was measured: what `taskwatt compare` and [`Compare::run`] do once the runs
/// are recorded. `policies` orders the per-policy rows.
///
/// # Errors
/// A trace that cannot be read, a fit that fails, a run without energy samples.
pub fn compare_runs(
    app: &str,
    runs: &[RecordedRun],
    policies: &[String],
    fit_on: &str,
    opts: &AttributionOptions,
) -> Result<Comparison, CompareError> {
    let repeat = runs.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
    // Fit on one policy's traces.
    let mut systems = Vec::new();
    let mut simulated = false;
    for r in runs {
        if r.policy == fit_on {
            let t = read_trace(&r.trace)?;
            simulated |= t.is_simulated();
            systems.push(TraceSystems::from_trace(&t, opts.key)?);
        }
    }
    let mut model = fit_model(&systems, None, opts)?.model;
    model.simulated = simulated;

    // Predict every run from its trace.
    let mut rows = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for run in runs {
        let (policy, r, makespan, path) = (&run.policy, &run.repeat, &run.makespan_s, &run.trace);
        let t = read_trace(path)?;
        let pred = predict_trace(&model, &t)?;
        // Each kind once: the same warning of another run differs in its figures, units
        // and the order of its types; its domain and first words name its kind.
        let kind = |w: &str| -> String {
            w.split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .filter(|c| !c.is_ascii_digit())
                .collect()
        };
        for w in &pred.warnings {
            if !warnings.iter().any(|x| kind(x) == kind(w)) {
                warnings.push(w.clone());
            }
        }
        let measured = pred
            .total_measured_j
            .ok_or_else(|| CompareError::NoEnergy(path.clone()))?;
        rows.push(CompareRun {
            policy: policy.clone(),
            repeat: *r,
            makespan_s: *makespan,
            measured_j: measured,
            predicted_j: pred.total_predicted_j,
            error_pct: pred.total_error_pct.unwrap_or(f64::NAN),
            measurement_interval_j: pred.total_measurement_interval_j,
            covered: covers(pred.total_measurement_interval_j, Some(measured)),
            application: pred.region_total("application").map(|(p, m)| {
                let iv = pred.region_measurement_interval("application");
                RegionEnergy {
                    predicted_j: p,
                    measured_j: m,
                    measurement_interval_j: iv,
                    covered: covers(iv, m),
                }
            }),
            fitted_on: policy == fit_on,
            trace: path.clone(),
        });
    }
    let per_policy: Vec<PolicySummary> = policies
        .iter()
        .map(|p| {
            let rs: Vec<&CompareRun> = rows.iter().filter(|r| &r.policy == p).collect();
            let n = rs.len() as f64;
            let mean = |f: &dyn Fn(&CompareRun) -> f64| rs.iter().map(|r| f(r)).sum::<f64>() / n;
            PolicySummary {
                policy: p.clone(),
                runs: rs.len(),
                makespan_s: mean(&|r| r.makespan_s),
                measured_j: mean(&|r| r.measured_j),
                predicted_j: mean(&|r| r.predicted_j),
                error_pct: mean(&|r| r.error_pct),
                max_abs_error_pct: rs.iter().map(|r| r.error_pct.abs()).fold(0.0, f64::max),
                covered: count_covered(rs.iter().map(|r| r.covered)),
                application_covered: count_covered(
                    rs.iter().map(|r| r.application.and_then(|a| a.covered)),
                ),
                application: rs
                    .iter()
                    .map(|r| r.application)
                    .collect::<Option<Vec<RegionEnergy>>>()
                    .map(|v| RegionEnergy {
                        predicted_j: v.iter().map(|x| x.predicted_j).sum::<f64>() / n,
                        measured_j: v
                            .iter()
                            .map(|x| x.measured_j)
                            .sum::<Option<f64>>()
                            .map(|m| m / n),
                        measurement_interval_j: None,
                        covered: None,
                    }),
                fitted_on: p == fit_on,
                measured_range_j: range(rs.iter().map(|r| r.measured_j)),
                application_range_j: rs
                    .iter()
                    .map(|r| r.application.and_then(|a| a.measured_j))
                    .collect::<Option<Vec<f64>>>()
                    .map(|v| range(v.into_iter())),
            }
        })
        .collect();
    Ok(Comparison {
        app: app.to_owned(),
        simulated,
        fit_on: fit_on.to_owned(),
        repeat,
        runs: rows,
        policies: per_policy,
        virtual_rows: Vec::new(),
        virtual_verdicts: Vec::new(),
        warnings,
        model,
    })
}

/// `(covered, with an interval)`.
fn count_covered(c: impl Iterator<Item = Option<bool>>) -> (usize, usize) {
    c.flatten()
        .fold((0, 0), |(k, n), ok| (k + usize::from(ok), n + 1))
}

/// Your graph under several policies (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct Compare {
    policies: Vec<String>,
    gammas: Vec<f64>,
    repeat: usize,
    fit_on: Option<String>,
    measure: Measure,
    energy_model: Option<EnergyModel>,
    keep: Option<PathBuf>,
    name: String,
}

impl Default for Compare {
    fn default() -> Self {
        Compare::new()
    }
}

impl Compare {
    /// eager, ws, lws and prio, 3 runs each, fitted on the first, measured by
    /// `Measure::new()`, traces in a temporary directory.
    pub fn new() -> Compare {
        Compare {
            policies: ["eager", "ws", "lws", "prio"].map(String::from).to_vec(),
            gammas: Vec::new(),
            repeat: 3,
            fit_on: None,
            measure: Measure::new(),
            energy_model: None,
            keep: None,
            name: "graph".into(),
        }
    }

    /// The policies to compare (any of `taskwatt run --sched`).
    pub fn policies<S: Into<String>>(mut self, p: impl IntoIterator<Item = S>) -> Compare {
        self.policies = p.into_iter().map(Into::into).collect();
        self
    }

    /// dmdae at each of these gamma values (µs/J), labelled `dmdae:γ`, beside the
    /// policies; it needs [`Compare::energy_model`] (without task powers every gamma runs
    /// dmda, and the sweep would compare noise: refused).
    pub fn gamma(mut self, g: impl IntoIterator<Item = f64>) -> Compare {
        self.gammas = g.into_iter().collect();
        self
    }

    /// Runs per policy (at least 1).
    pub fn repeat(mut self, n: usize) -> Compare {
        self.repeat = n;
        self
    }

    /// The policy whose runs the model is fitted on (default: the first).
    pub fn fit_on(mut self, p: impl Into<String>) -> Compare {
        self.fit_on = Some(p.into());
        self
    }

    /// How each run is measured (meter, period, idle calibration); its trace path is
    /// set per run.
    pub fn measure(mut self, m: Measure) -> Compare {
        self.measure = m;
        self
    }

    /// The energy model dmdae takes its task powers from (`taskwatt fit`, or
    /// [`Comparison::model`] of an earlier comparison).
    pub fn energy_model(mut self, m: EnergyModel) -> Compare {
        self.energy_model = Some(m);
        self
    }

    /// Keep the traces in `dir` (`<name>-<policy>-<repeat>.twt`).
    pub fn keep(mut self, dir: impl Into<PathBuf>) -> Compare {
        self.keep = Some(dir.into());
        self
    }

    /// The graph's name in the output and the trace files (default `graph`).
    pub fn name(mut self, n: impl Into<String>) -> Compare {
        self.name = n.into();
        self
    }

    /// Runs `graph` under every policy, `repeat` times, interleaved: `builder()` makes
    /// each run's runtime (its policy is set here), `graph` submits the graph and waits
    /// for it. Then compares the runs ([`compare_runs`]).
    ///
    /// # Errors
    /// [`CompareError`]: an unknown or missing policy, a gamma sweep without an energy
    /// model, a run that fails, a comparison that cannot be made.
    pub fn run<B, G>(&self, builder: B, graph: G) -> Result<Comparison, CompareError>
    where
        B: Fn() -> RuntimeBuilder,
        G: Fn(&Runtime) -> Result<(), RuntimeError>,
    {
        // Each run's label, and the gamma of a sweep's dmdae.
        let mut runs_of: Vec<(String, Option<f64>)> = Vec::new();
        for p in &self.policies {
            let p = taskwatt_scheduler::check_policy_name(p)?.to_string();
            // Each once (twice, its runs shared one trace name and its row was counted
            // twice in the fit).
            if !runs_of.iter().any(|(q, _)| *q == p) {
                runs_of.push((p, None));
            }
        }
        let powers = self
            .energy_model
            .as_ref()
            .map(crate::session::task_powers_of)
            .unwrap_or_default();
        if !self.gammas.is_empty() && powers.is_empty() {
            return Err(CompareError::NoTaskPowers);
        }
        for g in &self.gammas {
            if !(g.is_finite() && *g >= 0.0) {
                return Err(CompareError::Invalid(format!(
                    "gamma {g}: give a finite, non-negative number of µs per J"
                )));
            }
            let label = format!("dmdae:{g}");
            if !runs_of.iter().any(|(q, _)| *q == label) {
                runs_of.push((label, Some(*g)));
            }
        }
        let policies: Vec<String> = runs_of.iter().map(|(p, _)| p.clone()).collect();
        if policies.is_empty() || self.repeat == 0 {
            return Err(CompareError::Invalid(
                "nothing to compare: give at least one policy (or gamma) and one repeat".into(),
            ));
        }
        let fit_on = match &self.fit_on {
            Some(p) => p.clone(),
            None => policies[0].clone(),
        };
        if !policies.contains(&fit_on) {
            return Err(CompareError::Invalid(format!(
                "fit_on {fit_on} is not among the policies {}",
                policies.join(",")
            )));
        }
        let tmp = tempfile::tempdir().map_err(|source| TraceError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let dir = self
            .keep
            .clone()
            .unwrap_or_else(|| tmp.path().to_path_buf());
        std::fs::create_dir_all(&dir).map_err(|source| TraceError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut runs = Vec::new();
        for r in 0..self.repeat {
            for k in 0..policies.len() {
                let (policy, gamma) = &runs_of[(k + r) % runs_of.len()];
                let mut b = builder();
                b = match gamma {
                    Some(gamma) => {
                        let weights = taskwatt_scheduler::EnergyWeights {
                            gamma: *gamma,
                            ..taskwatt_scheduler::EnergyWeights::default()
                        };
                        b.task_powers(powers.clone())
                            .policy("dmdae")
                            .policy_options(taskwatt_scheduler::PolicyOptions::dmdae(weights))
                    }
                    None if policy == "dmdae" => b.task_powers(powers.clone()).policy("dmdae"),
                    None => b.policy(policy.as_str()),
                };
                let trace = dir.join(format!(
                    "{}-{}-{r}.twt",
                    self.name,
                    policy.replace(':', "_")
                ));
                let m = self.measure.clone().trace(&trace).start(b)?;
                let t0 = std::time::Instant::now();
                let ran = graph(m.runtime());
                let makespan_s = t0.elapsed().as_secs_f64();
                ran?;
                // The comparison reads the trace itself: no attribution per run here.
                m.finish_trace()?;
                runs.push(RecordedRun {
                    policy: policy.clone(),
                    repeat: r,
                    makespan_s,
                    trace,
                });
            }
        }
        compare_runs(
            &self.name,
            &runs,
            &policies,
            &fit_on,
            &self.measure.attribution_options(),
        )
    }
}

/// Why a comparison could not be made.
#[derive(thiserror::Error)]
pub enum CompareError {
    /// A policy name the registry does not know.
    #[error(transparent)]
    Policy(#[from] taskwatt_scheduler::UnknownPolicy),
    /// A gamma sweep without task powers.
    #[error(
        "a gamma sweep weighs dmdae's energy term, and dmdae has no task powers here: every \
         gamma would place tasks as dmda does and the sweep would compare noise; give \
         Compare::energy_model (taskwatt fit, or an earlier comparison's model)"
    )]
    NoTaskPowers,
    /// A setting that cannot be run.
    #[error("{0}")]
    Invalid(String),
    /// A run failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// The graph failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A trace could not be written or read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The fit or a prediction failed.
    #[error(transparent)]
    Attribution(#[from] AttributionError),
    /// A run has no energy samples.
    #[error("{}: no energy samples to compare with (a run shorter than one sampling period, or energy sampling off)", .0.display())]
    NoEnergy(PathBuf),
}

taskwatt_traces::debug_as_display!(CompareError);

/// The lowest and the highest of `v`.
fn range(v: impl Iterator<Item = f64>) -> [f64; 2] {
    v.fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], x| {
        [lo.min(x), hi.max(x)]
    })
}
