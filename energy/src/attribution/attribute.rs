//! The attribution of one trace: build the systems, fit every domain, write the report.

use std::borrow::Borrow;

use taskwatt_traces::TaskRecord;

use super::error::AttributionError;
use super::fit::DomainFit;
use super::input::{trace_tasks, TraceParts};
use super::options::AttributionOptions;
use super::report::{domain_report, AttributionReport};
use super::solve::fit_groups;
use super::system::{DomainSystem, TraceSystems};

/// The result of [`attribute`]: the report, and the fits and systems behind it (for
/// residual plots, models and further analysis).
#[derive(Clone, Debug)]
pub struct Attribution {
    /// The report (serialisable, renderable).
    pub report: AttributionReport,
    /// One fit per reported domain, in the report's order (residuals per interval).
    pub fits: Vec<DomainFit>,
    /// The systems, one per domain of the trace.
    pub systems: TraceSystems,
}

/// Attributes the energy of one trace to its task types.
///
/// `tasks` is read once, in any order; pass `&TaskRecord`s or owned records.
pub fn attribute<B: Borrow<TaskRecord>>(
    parts: &TraceParts<'_>,
    tasks: impl IntoIterator<Item = B>,
    opts: &AttributionOptions,
) -> Result<Attribution, AttributionError> {
    let systems = TraceSystems::build_with(
        parts,
        tasks,
        opts.key,
        opts.align_to_meter,
        opts.sensor_model,
    )?;
    attribute_systems(parts, systems, opts)
}

/// More than any one device draws, W: a domain's base above it comes from readings in the
/// wrong unit.
const PLAUSIBLE_W: f64 = 20e3;

/// Why a domain's readings and its workers' tasks do not overlap, when they do not: the
/// two on different clocks or in different time units.
fn disjoint(s: &DomainSystem) -> Option<String> {
    let (a, b) = s.task_span?;
    let (&s0, &s1) = (s.t_ns.first()?, s.t_ns.last()?);
    (b < s0 || a > s1).then(|| {
        format!(
            "its readings ({:.6} s to {:.6} s) and its workers' tasks ({:.6} s to {:.6} s) \
             do not overlap: no task ran while it was sampled, so nothing is attributed \
             and its base power is that of another stretch. The readings are most likely \
             on another clock, in another time unit (an import's --time-unit) or of \
             another run",
            s0 as f64 * 1e-9,
            s1 as f64 * 1e-9,
            a as f64 * 1e-9,
            b as f64 * 1e-9
        )
    })
}

/// Attributes already built systems (see [`TraceSystems::build`]).
pub fn attribute_systems(
    parts: &TraceParts<'_>,
    systems: TraceSystems,
    opts: &AttributionOptions,
) -> Result<Attribution, AttributionError> {
    let mut warnings = Vec::new();
    let mut fits = Vec::new();
    let mut domains = Vec::new();
    // One device read by two sensors (NVML's energy counter and its power readings) gives
    // two systems of one domain: the first is its primary reading, the others enter the
    // same fit (`fit_group`).
    let mut groups: Vec<Vec<&DomainSystem>> = Vec::new();
    for s in &systems.domains {
        if s.intervals() == 0 {
            warnings.push(format!(
                "domain {} ({}) has fewer than two samples: not attributed",
                s.domain(),
                s.info.name
            ));
            continue;
        }
        match groups.iter_mut().find(|g| g[0].info.same_device(&s.info)) {
            Some(g) => g.push(s),
            None => groups.push(vec![s]),
        }
    }
    let jobs = groups
        .iter()
        .map(|g| (g.clone(), (0..g.len()).map(|i| i == 0).collect()))
        .collect();
    for (g, fit) in groups.iter().zip(fit_groups(jobs, opts)) {
        let fit = fit?;
        domains.push(domain_report(&fit, &g[..1], parts.truth));
        fits.push(fit);
    }
    if domains.is_empty() {
        return Err(AttributionError::NoEnergyData {
            domains: parts.domains.len(),
            samples: parts.samples.len(),
        });
    }
    for (d, g) in domains.iter().zip(&groups) {
        // No device draws this much: a unit slip (energy in mJ read as J, times in s read
        // as ms) gave 400 kW "measured" to within 524 pW.
        if d.base.value_w.abs() > PLAUSIBLE_W {
            warnings.push(format!(
                "domain {}: a base power of {:.3e} W is beyond what any one device draws \
                 (a whole node's is a few kW): the readings' units are most likely wrong \
                 (energy in mJ or uJ read as J, or times read in the wrong unit: an \
                 import's --time-unit); nothing in this domain is a measurement",
                d.name, d.base.value_w
            ));
        }
        if d.measured_j == 0.0 && d.window_s > 0.0 {
            warnings.push(format!(
                "domain {} measured 0 J in {:.3} s: its counter never advanced, so this \
                 meter reads nothing here (a virtual machine can expose a RAPL perf event or \
                 NVML without a working counter) and every power of the domain is 0 for that \
                 reason, not because its tasks draw none; use another meter (`taskwatt \
                 meters`)",
                d.name, d.window_s
            ));
            continue;
        }
        if d.workers == 0 {
            warnings.push(format!(
                "domain {} covers no worker of this run (a GPU that no worker drives, say): \
                 only its base power is fitted",
                d.name
            ));
        } else if systems.tasks == 0 {
            warnings.push(format!(
                "domain {}: the trace has no task at all (an empty graph): only the base \
                 power is fitted",
                d.name
            ));
        } else if let Some(w) = disjoint(g[0]) {
            warnings.push(format!("domain {}: {w}", d.name));
        } else if d.types.iter().all(|t| t.busy_s == 0.0) {
            warnings.push(format!(
                "domain {} saw no task: its workers ran nothing while it was sampled (a \
                 graph shorter than one sampling period, or a meter covering other workers)",
                d.name
            ));
        }
    }
    if systems.unmetered_tasks > 0 {
        warnings.push(format!(
            "{} of {} task(s) ran on workers that no domain covers: their energy is not \
             attributed",
            systems.unmetered_tasks, systems.tasks
        ));
    }
    Ok(Attribution {
        report: AttributionReport {
            key: systems.key,
            solver: opts.solver,
            precision_pct: opts.precision_pct,
            tasks: systems.tasks,
            unmetered_tasks: systems.unmetered_tasks,
            domains,
            warnings,
        },
        fits,
        systems,
    })
}

/// Attributes a whole in-memory trace (tasks of every chunk).
pub fn attribute_trace(
    trace: &taskwatt_traces::Trace,
    opts: &AttributionOptions,
) -> Result<Attribution, AttributionError> {
    attribute(&TraceParts::from_trace(trace), trace_tasks(trace), opts)
}
