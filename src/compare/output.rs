//! A comparison's outputs: the verdict, the terminal table, the JSON and the plots.

use std::fmt::Write as _;

use super::*;

/// `writeln!` into a `String` (which cannot fail).
macro_rules! outln {
    ($out:expr) => { let _ = writeln!($out); };
    ($out:expr, $($arg:tt)*) => { let _ = writeln!($out, $($arg)*); };
}

impl Comparison {
    /// Which policy used least energy, and whether the others are measurably different:
    /// each other policy's runs against the best one's by Welch's t-test, two-sided, at
    /// 95 % over all the comparisons (Bonferroni; `stats.rs`); with one run per policy
    /// nothing can be told apart. The energy
    /// is the application region's (the graph alone) where every run marks it: the whole
    /// run's adds the idle calibration and the sampler's window, the same under every
    /// policy, which only dilute the difference. `None` with fewer than two policies.
    pub fn verdict(&self) -> Option<String> {
        if self.policies.len() < 2 {
            return None;
        }
        let app = self
            .runs
            .iter()
            .all(|r| r.application.and_then(|a| a.measured_j).is_some())
            && self
                .policies
                .iter()
                .all(|p| p.application.and_then(|a| a.measured_j).is_some());
        let pick = |region: Option<RegionEnergy>, whole: f64| match region {
            Some(RegionEnergy {
                measured_j: Some(j),
                ..
            }) if app => j,
            _ => whole,
        };
        let of_run = |r: &CompareRun| pick(r.application, r.measured_j);
        let of_policy = |p: &PolicySummary| pick(p.application, p.measured_j);
        let what = if app {
            "the application (the graph alone)"
        } else {
            "the whole run"
        };
        let runs_of = |p: &str| -> Vec<f64> {
            self.runs
                .iter()
                .filter(|r| r.policy == p)
                .map(of_run)
                .collect()
        };
        let best = self
            .policies
            .iter()
            .min_by(|a, b| of_policy(a).total_cmp(&of_policy(b)))?;
        let best_j = of_policy(best);
        if self.repeat < 2 {
            return Some(format!(
                "least energy over {what}: {} ({best_j:.3} J), from one run per policy: the \
                 runs' spread is unknown, so small differences cannot be told from noise \
                 (repeat at least 3)",
                best.policy
            ));
        }
        // Each other policy against the best by Welch's t-test, two-sided, the level
        // shared over the comparisons (stats.rs: the runs' ranges called identical
        // policies different in about a third of comparisons).
        let best_runs = runs_of(&best.policy);
        let others: Vec<&PolicySummary> = self
            .policies
            .iter()
            .filter(|p| p.policy != best.policy)
            .collect();
        let level = super::stats::threshold(others.len());
        let (mut close, mut more): (Vec<&PolicySummary>, Vec<&PolicySummary>) = others
            .iter()
            .partition(|p| super::stats::welch_more(&best_runs, &runs_of(&p.policy)) >= level);
        // Nearest first.
        close.sort_by(|a, b| of_policy(a).total_cmp(&of_policy(b)));
        more.sort_by(|a, b| of_policy(a).total_cmp(&of_policy(b)));
        let list = |v: &[&PolicySummary]| {
            v.iter()
                .map(|p| format!("{} ({:.3} J)", p.policy, of_policy(p)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let how = format!(
            "Welch's t-test on the runs, {:.0} % over the {} comparison(s)",
            100.0 * (1.0 - super::stats::LEVEL),
            others.len()
        );
        // Two runs tell apart only large differences: `--repeat 1` was told to repeat 3
        // times, `--repeat 2` was not.
        let few = if self.repeat == 2 {
            " (from two runs per policy: a test on two runs tells apart only large \
             differences; repeat at least 3)"
        } else {
            ""
        };
        Some(if close.is_empty() {
            format!(
                "least energy over {what}: {} ({best_j:.3} J); every other policy used \
                 measurably more ({how}){few}",
                best.policy
            )
        } else if more.is_empty() {
            format!(
                "lowest mean energy over {what}: {} ({best_j:.3} J), but not measurably \
                 below {} ({how}): do not rank them on these runs{few}",
                best.policy,
                list(&close)
            )
        } else {
            format!(
                "lowest mean energy over {what}: {} ({best_j:.3} J); not measurably \
                 different from it: {}; measurably more: {} ({how}){few}",
                best.policy,
                list(&close),
                list(&more)
            )
        })
    }

    /// The comparison as JSON (what `taskwatt compare --json` prints), with its
    /// [`verdict`](Self::verdict).
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let (Some(o), Some(verdict)) = (v.as_object_mut(), self.verdict()) {
            o.insert("verdict".to_owned(), serde_json::Value::String(verdict));
        }
        v
    }

    /// The terminal table (the CLI's `compare` output).
    pub fn text(&self) -> String {
        let (o, repeat) = (self, self.repeat);
        let mut out = String::new();
        if o.simulated {
            outln!(
                out,
                "*** SIMULATED meter: energies come from taskwatt's simulator, not a sensor ***"
            );
        }
        outln!(
            out,
            "{}: model fitted on {} ({} run{} per policy); measured and predicted are the runs' \
             means, error the mean of each run's (predicted - measured) / measured",
            o.app,
            o.fit_on,
            repeat,
            if repeat == 1 { "" } else { "s" }
        );
        outln!(
            out,
            "the whole runs (the graph, and the calibration and sampling around it):"
        );
        outln!(
            out,
            "{:<14} {:>10} {:>12} {:>12} {:>9} {:>9} {:>7}{}",
            "policy",
            "makespan",
            "measured",
            "predicted",
            "error",
            "max|err|",
            "covers",
            if repeat > 1 { "  runs measured" } else { "" }
        );
        // The runs' own range beside their mean: the verdict compares them (neither the
        // table nor the JSON's means showed it).
        let runs_range = |p: &str, app: bool| {
            let (lo, hi) = o
                .runs
                .iter()
                .filter(|r| r.policy == p)
                .filter_map(|r| {
                    if app {
                        r.application.and_then(|a| a.measured_j)
                    } else {
                        Some(r.measured_j)
                    }
                })
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), e| {
                    (lo.min(e), hi.max(e))
                });
            if repeat > 1 && lo.is_finite() {
                format!("  {lo:.3} to {hi:.3} J")
            } else {
                String::new()
            }
        };
        let frac = |(k, n): (usize, usize)| {
            if n == 0 {
                "-".to_owned()
            } else {
                format!("{k}/{n}")
            }
        };
        for r in &o.policies {
            outln!(
                out,
                "{:<14} {:>8.3} s {:>10.2} J {:>10.2} J {:>8.2}% {:>8.2}% {:>7}{}{}",
                r.policy,
                r.makespan_s,
                r.measured_j,
                r.predicted_j,
                r.error_pct,
                r.max_abs_error_pct,
                frac(r.covered),
                runs_range(&r.policy, false),
                if r.fitted_on { "  (fitted on)" } else { "" }
            );
        }
        let all = count_covered(o.runs.iter().map(|r| r.covered));
        let app = count_covered(o.runs.iter().map(|r| r.application.and_then(|a| a.covered)));
        if all.1 + app.1 > 0 {
            outln!(
                out,
                "covers: runs whose measurement lies in the prediction's 95% interval (the\n\
                 model's uncertainty, the meter's noise, the tasks' variation): {} of the runs'\n\
                 totals, {} of their application regions",
                frac(all),
                frac(app)
            );
        } else {
            outln!(
                out,
                "covers: - (the predictions have no 95% interval: a fit that left powers unidentified,\n\
                 or a type the model lacks; see the warnings below)"
            );
        }
        if !o.virtual_rows.is_empty() {
            outln!(
                out,
                "simulated in virtual time from the first {} run (not runs; the meter is the \
                 platform's simulated one, over the graph alone):",
                o.fit_on
            );
            outln!(
                out,
                "{:<14} {:<34} {:>10} {:>12} {:>12}  {}",
                "policy",
                "platform",
                "makespan",
                "meter",
                "model",
                "model's 95%"
            );
            let j = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2} J"));
            let ci = |c: Option<[f64; 2]>| {
                c.map_or("-".to_owned(), |[a, b]| format!("{a:.2} to {b:.2} J"))
            };
            for v in &o.virtual_rows {
                let partial = if v.unpredicted_domains.is_empty() {
                    ""
                } else {
                    "*"
                };
                outln!(
                    out,
                    "{:<14} {:<34} {:>8.3} s {:>12} {:>12}  {}",
                    v.policy,
                    v.platform,
                    v.makespan_s,
                    j(v.meter_j),
                    format!("{}{partial}", j(v.predicted_j)),
                    ci(v.predicted_ci_j)
                );
            }
            for v in &o.virtual_verdicts {
                outln!(out, "{v}");
            }
            if let Some(v) = o
                .virtual_rows
                .iter()
                .find(|v| !v.unpredicted_domains.is_empty())
            {
                outln!(
                    out,
                    "* the model has no fit of {} on {}: left out of its figure, counted by \
                     the meter's",
                    v.unpredicted_domains.join(", "),
                    v.platform
                );
            }
        }
        if o.policies.iter().all(|r| r.application.is_some()) {
            outln!(
                out,
                "the application alone (the graph, without calibration):"
            );
            outln!(
                out,
                "{:<14} {:>12} {:>12} {:>9} {:>7}{}",
                "policy",
                "measured",
                "predicted",
                "error",
                "covers",
                if repeat > 1 { "  runs measured" } else { "" }
            );
            for r in &o.policies {
                let app = r.application.expect("checked");
                let m = app.measured_j;
                let covered = r.application_covered;
                outln!(
                    out,
                    "{:<14} {:>12} {:>10.2} J {:>9} {:>7}{}",
                    r.policy,
                    m.map_or("-".to_owned(), |m| format!("{m:.2} J")),
                    app.predicted_j,
                    m.filter(|&m| m != 0.0).map_or("-".to_owned(), |m| format!(
                        "{:.2}%",
                        100.0 * (app.predicted_j - m) / m
                    )),
                    frac(covered),
                    runs_range(&r.policy, true)
                );
            }
        }
        if let Some(v) = o.verdict() {
            outln!(out, "{v}");
        }
        if !o.warnings.is_empty() {
            outln!(
                out,
                "warnings (the model's predictions; figures of the first run that gave each):"
            );
            for w in &o.warnings {
                out += &taskwatt_energy::attribution::wrap_text(w, "  - ", "    ");
            }
        }
        out
    }
}

impl Comparison {
    /// Writes the plots into `dir`: `compare.svg` (measured and predicted energy per
    /// policy), `whatif.svg` with simulated rows, `pareto.svg` when `sweep` names the
    /// policies of a gamma sweep (`dmdae:γ`). Returns the files written.
    ///
    /// # Errors
    /// A plot that cannot be written.
    #[cfg(feature = "plots")]
    pub fn write_plots(
        &self,
        dir: &Path,
        sweep: &[String],
    ) -> Result<Vec<PathBuf>, crate::plots::PlotError> {
        let (out, simulated, fit_on) = (self, self.simulated, &self.fit_on);
        let mut written = Vec::new();
        let p = dir.join("compare.svg");
        // The application region's energy where every policy has it, as the verdict
        // compares (the whole runs are mostly the calibration around the graphs).
        let app: Option<Vec<(String, f64, f64)>> = out
            .policies
            .iter()
            .map(|r| {
                let a = r.application.as_ref()?;
                Some((r.policy.clone(), a.measured_j?, a.predicted_j))
            })
            .collect();
        let (bars, what) = match app {
            Some(bars) => (bars, "the application's energy (its graph)"),
            None => (
                out.policies
                    .iter()
                    .map(|r| (r.policy.clone(), r.measured_j, r.predicted_j))
                    .collect(),
                "energy of the whole runs",
            ),
        };
        let sim = if simulated { " (SIMULATED meter)" } else { "" };
        crate::plots::measured_vs_predicted(
            &p,
            &format!(
                "{}: {what}, measured and predicted by a model fitted on {fit_on}{sim}",
                out.app
            ),
            "energy (J)",
            &bars,
        )?;
        written.push(p);
        if !out.virtual_rows.is_empty() {
            // Measured runs (the application region) and simulated rows on one plane.
            let p = dir.join("whatif.svg");
            let mut points = policy_points(&out.policies, " (run)");
            // The model's prediction where it covers the platform (the measured runs'
            // points are measurements, not the platform's configured powers), else the
            // simulated meter's.
            points.extend(out.virtual_rows.iter().filter_map(|v| {
                let (e, ci, by) = match v.predicted_j {
                    // Not where it leaves out a domain (a CPU model on a GPU platform).
                    Some(p) if v.unpredicted_domains.is_empty() => {
                        (Some(p), v.predicted_ci_j, "model")
                    }
                    _ => (v.meter_j, v.meter_ci_j, "platform powers"),
                };
                e.map(|e| crate::plots::ParetoPoint {
                    x_ci: v.makespan_ci_s,
                    y_ci: ci,
                    ..crate::plots::ParetoPoint::new(
                        format!("{} on {} (simulated, {by})", v.policy, v.platform),
                        v.makespan_s,
                        e,
                    )
                })
            }));
            crate::plots::pareto(
                &p,
                &format!(
                    "{}: energy against makespan, measured runs and virtual-time simulations \
                     (not runs){sim}",
                    out.app
                ),
                &points,
                &[],
            )?;
            written.push(p);
        }
        if !sweep.is_empty() {
            let p = dir.join("pareto.svg");
            let points = policy_points(&out.policies, "");
            crate::plots::pareto(
                &p,
                &format!(
                    "{}: energy against makespan, dmdae over gamma (µs/J) beside the \
                     policies{sim}",
                    out.app
                ),
                &points,
                sweep,
            )?;
            written.push(p);
        }
        Ok(written)
    }
}

#[cfg(feature = "plots")]
/// One point per policy: its label (with `suffix`), makespan and energy (the application
/// region's where every run marks it, else the whole run's).
fn policy_points(policies: &[PolicySummary], suffix: &str) -> Vec<crate::plots::ParetoPoint> {
    policies
        .iter()
        .map(|r| {
            let e = r
                .application
                .and_then(|x| x.measured_j)
                .unwrap_or(r.measured_j);
            crate::plots::ParetoPoint::new(format!("{}{suffix}", r.policy), r.makespan_s, e)
        })
        .collect()
}
