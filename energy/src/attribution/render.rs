//! Plain-text rendering of reports and predictions, in tables that fit 80 columns.
//!
//! A coefficient shown as a measurement prints as `value` with `+-half-width` of its 95%
//! interval. Anything flagged prints in parentheses with its interval as a range and the
//! flag, so that nobody copies it as a measurement. Output is ASCII only.

use std::fmt::Write as _;

use super::conditioning::InseparableReason;
use super::diagnostics::fmt_ns;
use super::estimate::Estimate;
use super::report::{AttributionReport, DomainReport, TruthComparison};
use super::text::{pct, signed_pct, wrap, Table, WIDTH};
use super::units::si;

mod prediction;
#[cfg(test)]
use prediction::around;
pub use prediction::render_prediction;

/// How to render.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    /// The energies come from a simulated meter: print a banner saying so (the caller
    /// knows, e.g. from `Trace::is_simulated`).
    pub simulated: bool,
}

/// Renders an attribution report.
pub fn render_report(report: &AttributionReport, opts: &RenderOptions) -> String {
    let mut out = String::new();
    banner(&mut out, opts);
    let _ = writeln!(
        out,
        "taskwatt energy attribution: {} task(s), types by {}, solver {}",
        report.tasks,
        report.key,
        report.solver.name()
    );
    wrap(
        &mut out,
        &format!(
            "a power is shown as a measurement when its 95% interval is within +-{}% of it \
             (--measured-within, or precision_pct in the library's AttributionOptions); anything else is in (parentheses) with its interval and why",
            report.precision_pct
        ),
        "",
        "  ",
    );
    wrap(
        &mut out,
        "legend: power = extra watts while one task of the type runs; base = the \
         domain's power with nothing running; idle = base energy no running task holds; \
         total/task = a task's own energy plus its workers' share of the base",
        "",
        "  ",
    );
    if let Some(app) = report
        .domains
        .first()
        .and_then(|d| d.regions.iter().find(|r| r.name == "application"))
    {
        wrap(
            &mut out,
            &format!(
                "headline: the application's task graph, {} task(s) in {:.3} s; calibration \
                 and other regions are listed per domain",
                app.tasks, app.window_s
            ),
            "",
            "  ",
        );
    }
    list(&mut out, "warnings", &report.warnings);
    for d in &report.domains {
        out.push('\n');
        domain(&mut out, d);
    }
    all_domains(&mut out, report);
    out
}

/// One figure over the domains that add up (packages, DRAM, GPUs; psys without a package;
/// core and uncore are inside their package): users asked for the run's and the
/// application's energy in one number. Not for a merged run of several nodes, whose job
/// summary gives it per node.
fn all_domains(out: &mut String, report: &AttributionReport) {
    use taskwatt_traces::Domain;
    if report.domains.iter().any(|d| d.name.starts_with("node ")) {
        return;
    }
    let package = report
        .domains
        .iter()
        .any(|d| matches!(d.domain, Domain::CpuPackage { .. }));
    let added: Vec<&DomainReport> = report
        .domains
        .iter()
        .filter(|d| match d.domain {
            Domain::CpuPackage { .. } | Domain::Dram { .. } | Domain::Gpu { .. } => true,
            Domain::Psys => !package,
            Domain::Core { .. } | Domain::Uncore { .. } => false,
        })
        .collect();
    if added.len() < 2 {
        return;
    }
    let names = added
        .iter()
        .map(|d| d.domain.to_string())
        .collect::<Vec<_>>()
        .join(" + ");
    let measured: f64 = added.iter().map(|d| d.measured_j).sum();
    let app: Option<Vec<f64>> = added
        .iter()
        .map(|d| {
            let r = d.regions.iter().find(|r| r.name == "application")?;
            Some(r.measured_j.unwrap_or(r.energy_j))
        })
        .collect();
    let app = app.map_or(String::new(), |v| {
        format!(
            "; the application {} ({})",
            si(v.iter().sum(), "J"),
            v.iter()
                .map(|j| si(*j, "J"))
                .collect::<Vec<_>>()
                .join(" + ")
        )
    });
    out.push('\n');
    wrap(
        out,
        &format!(
            "all domains ({names}; core, uncore and psys are inside them): measured {}{app}",
            si(measured, "J")
        ),
        "",
        "  ",
    );
}

fn banner(out: &mut String, opts: &RenderOptions) {
    if opts.simulated {
        let rule = "#".repeat(WIDTH);
        let _ = writeln!(out, "{rule}");
        let _ = writeln!(
            out,
            "{:<78}#",
            "# SIMULATED meter: these energies come from a simulated meter, not hardware."
        );
        let _ = writeln!(out, "{rule}");
    }
}

fn domain(out: &mut String, d: &DomainReport) {
    let domain = d.domain.to_string();
    let head = if d.name == domain {
        format!("== {domain}, {} worker(s) ", d.workers)
    } else {
        format!("== {domain} ({}), {} worker(s) ", d.name, d.workers)
    };
    let pad = WIDTH.saturating_sub(head.len());
    let _ = writeln!(out, "{head}{}", "=".repeat(pad));
    // Fewer intervals than unknowns (the base and each type): nothing below can be a
    // measurement, and a run too short to sample printed full tables of 535 kW and
    // 35 MW in parentheses under no headline.
    let unknowns = d.types.len() + 1;
    if d.types.iter().any(|t| t.count > 0) && d.types.iter().all(|t| t.busy_s == 0.0) {
        wrap(
            out,
            "NOT ATTRIBUTED: no task ran while this domain was sampled (see the warnings): \
             the figures below are of its readings alone",
            "",
            "  ",
        );
    } else if d.intervals < unknowns {
        wrap(
            out,
            &format!(
                "NOT ATTRIBUTED: {} interval(s) for {unknowns} unknowns (the base and {} \
                 type(s)): the figures below are whatever fits them, not estimates. Run \
                 the graph longer or sample faster (the period), so that the readings cut \
                 it into many more intervals than it has types",
                d.intervals,
                d.types.len()
            ),
            "",
            "  ",
        );
    }
    let f = &d.fit;
    let lines = [
        format!(
            "window {:.3} s, {} interval(s) (median {}); measured {}, fitted {}",
            d.window_s,
            d.intervals,
            fmt_ns((d.median_interval_s * 1e9).round() as u64),
            si(d.measured_j, "J"),
            si(d.fitted_j, "J")
        ),
        format!(
            "fit {} (weights {}): R^2 {}, MAPE {} in-sample, {} CV ({} folds)",
            f.solver.name(),
            f.weights,
            f.r2.map_or("-".into(), |r| format!("{r:.4}")),
            f.mape_pct.map_or("-".into(), pct),
            f.cv_mape_pct.map_or("-".into(), pct),
            f.cv_folds
        ),
        format!(
            "rank {}/{}, condition number {}; {}",
            f.rank,
            f.unknowns,
            f.condition_number
                .map_or("inf".into(), |c| format!("{c:.1}")),
            if f.base_pinned_by_idle {
                format!(
                    "base pinned by {} idle interval(s) ({} in idle calibration)",
                    f.idle_rows, f.idle_calibration_rows
                )
            } else {
                "base not pinned (no interval without tasks)".to_owned()
            }
        ),
        format!(
            "base power {}{}; base energy {}; idle {} ({} of measured)",
            estimate(&d.base),
            match &d.base_drift {
                Some(dr) if dr.value_w.abs() >= 0.0005 * d.base.value_w.abs() => format!(
                    " (the window's mean; drift {}{} to its end)",
                    if dr.value_w >= 0.0 { "+" } else { "" },
                    si(dr.value_w, "W")
                ),
                _ => String::new(),
            },
            si(d.base_energy_j, "J"),
            si(d.idle_j, "J"),
            pct(100.0 * d.idle_share)
        ),
    ];
    let mut extra: Vec<String> = Vec::new();
    if let Some(c) = &d.contention {
        extra.push(if c.identified {
            let half = c.c.ci95_w.map(|[lo, hi]| (hi - lo) / 2.0);
            // In parentheses, as a power would be, when its interval reaches 0 or beyond
            // (0.436 +-0.436 against a truth of 0.078 read as a measurement).
            let shaky = !c.c.reliable || half.is_none_or(|h| h >= c.c.value_w.abs());
            let value = format!(
                "{:.3}{}",
                c.c.value_w,
                half.map_or(String::new(), |h| format!(" +-{h:.3}"))
            );
            format!(
                "contention {}: with k tasks at once each draws 1 - c(k - 1) of its power \
                 alone (up to {} at once here, {:.2} on average while busy){}",
                if shaky { format!("({value})") } else { value },
                c.max_k,
                c.mean_k,
                if shaky {
                    "; not a measurement: its interval reaches 0"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "contention not identified: the number of tasks at once hardly varied (up to \
                 {}, {:.2} on average); powers are at the run's occupancy",
                c.max_k, c.mean_k
            )
        });
    }
    if let Some(q) = &d.frequency {
        let base = format!(
            "frequency {:.2} GHz on average while busy ({:+.0} MHz per extra busy core), {:.1} % \
             to {:.1} % of its occupancy's",
            q.mean_mhz / 1e3,
            q.mhz_per_core,
            100.0 * q.ratio_range.0,
            100.0 * q.ratio_range.1
        );
        extra.push(if q.used {
            format!(
                "{base}: the tasks' power follows f^{:.2} (likelihood ratio {:.0}), intervals \
                 at other frequencies are read at their own",
                q.exponent, q.lr
            )
        } else if q.spread < super::frequency::STEADY {
            format!("{base}: steady")
        } else if !q.profiled {
            format!("{base}: not used (`--frequency off`)")
        } else {
            format!(
                "{base}: the fit does not need it (likelihood ratio {:.1})",
                q.lr
            )
        });
    }
    if !f.covariance.is_empty() && f.covariance != "classical" {
        // "block-robust (...)" alone, or "classical and block-robust (...)": the wider.
        let wider = if f.covariance.starts_with("classical and") {
            ", the wider"
        } else {
            ""
        };
        extra.push(format!("intervals: {} covariance{wider}", f.covariance));
    }
    for l in lines.iter().chain(&extra).chain(&f.alignment) {
        wrap(out, l, "", "  ");
    }
    if !f.joint.is_empty() {
        wrap(
            out,
            "one fit of the device's sensors together (shared powers, each sensor's rows \
             weighted by 1/its residual variance):",
            "",
            "  ",
        );
        for l in &f.joint {
            wrap(out, l, "  - ", "    ");
        }
    }
    out.push('\n');

    let at_run = d.types.iter().any(|t| t.power_at_run.is_some());
    let mut head = vec![
        ("type", false),
        ("count", true),
        ("mean dur", true),
        ("power", true),
        ("95% interval", true),
    ];
    if at_run {
        head.push(("at run", true));
    }
    head.push(("note", false));
    let mut t = Table::new(&head);
    for ty in &d.types {
        let (value, range) = value_range(&ty.power);
        let mut row = vec![
            ty.key.to_string(),
            ty.count.to_string(),
            fmt_ns((ty.mean_duration_s * 1e9).round() as u64),
            value,
            range,
        ];
        if at_run {
            row.push(
                ty.power_at_run
                    .as_ref()
                    .map_or("-".into(), |e| value_range(e).0),
            );
        }
        row.push(note(&ty.power));
        t.row(row);
    }
    t.render(out);
    if at_run {
        wrap(
            out,
            "power: a task of the type alone; at run: its mean power beside the others it ran \
             with",
            "",
            "  ",
        );
    }
    out.push('\n');

    if !d.regions.is_empty() {
        let mut t = Table::new(&[
            ("region", false),
            ("window", true),
            ("tasks", true),
            ("energy", true),
            ("+-95%", true),
            ("measured", true),
        ]);
        for r in &d.regions {
            t.row(vec![
                r.name.clone(),
                format!("{:.3} s", r.window_s),
                r.tasks.to_string(),
                si(r.energy_j, "J"),
                r.interval_j
                    .map_or("-".into(), |[lo, hi]| si((hi - lo) / 2.0, "J")),
                r.measured_j.map_or("-".into(), |m| si(m, "J")),
            ]);
        }
        t.row(vec![
            "whole trace".into(),
            format!("{:.3} s", d.window_s),
            d.types.iter().map(|t| t.count).sum::<u64>().to_string(),
            si(d.fitted_j, "J"),
            String::new(),
            si(d.measured_j, "J"),
        ]);
        t.render(out);
        out.push('\n');
        // Types measured alone (their own calibration): the isolation reference.
        let alone: Vec<_> = d
            .regions
            .iter()
            .filter_map(|r| r.alone.as_ref().map(|a| (r, a)))
            .collect();
        if !alone.is_empty() {
            out.push_str(
                "measured alone (a region where one type ran alone here: its power from the\n\
                 meter, less the base, over its busy time) against the fit:\n",
            );
            for (r, a) in alone {
                let diff = if a.measured_w != 0.0 {
                    format!(
                        "{:+.1} %",
                        100.0 * (a.fitted_w - a.measured_w) / a.measured_w
                    )
                } else {
                    "-".into()
                };
                let figures = format!(
                    "{} alone over {:.2} s busy, fitted {} ({diff})",
                    si(a.measured_w, "W"),
                    a.busy_s,
                    si(a.fitted_w, "W"),
                );
                let line = format!("  {:<14} {}: {figures}", r.name, a.key);
                if line.chars().count() <= WIDTH {
                    let _ = writeln!(out, "{line}");
                } else {
                    // A long region or type name: the figures on a line of their own.
                    let _ = writeln!(out, "  {} {}:\n    {figures}", r.name, a.key);
                }
                // The check's own 95 % uncertainty, where it is wide: the base's error over
                // the region, magnified by window / busy for a type busy a small share.
                if let Some(se) = a
                    .measured_se_w
                    .filter(|&se| a.measured_w != 0.0 && 1.96 * se > 0.05 * a.measured_w.abs())
                {
                    let _ = writeln!(
                        out,
                        "    alone +-{} (busy {:.0}% of it: the base's error weighs {:.0}x)",
                        si(1.96 * se, "W"),
                        100.0 * a.busy_s / r.window_s.max(f64::MIN_POSITIVE),
                        r.window_s / a.busy_s.max(f64::MIN_POSITIVE),
                    );
                }
            }
            out.push('\n');
        }
    }
    match d.regions.iter().find(|r| r.name == "application") {
        Some(app) => {
            let _ = writeln!(
                out,
                "energy of the application ({} task(s), {:.3} s):",
                app.tasks, app.window_s
            );
            let mut t = Table::new(&[
                ("type", false),
                ("count", true),
                ("total/task", true),
                ("total", true),
                ("share", true),
            ]);
            for ty in &app.types {
                let shown = |v: f64| {
                    if ty.measured {
                        si(v, "J")
                    } else {
                        format!("({})", si(v, "J"))
                    }
                };
                t.row(vec![
                    ty.key.to_string(),
                    ty.count.to_string(),
                    shown(if ty.count > 0 {
                        ty.total_j / ty.count as f64
                    } else {
                        0.0
                    }),
                    shown(ty.total_j),
                    pct(100.0 * ty.share),
                ]);
            }
            let share = if app.energy_j != 0.0 {
                app.idle_j / app.energy_j
            } else {
                0.0
            };
            t.row(vec![
                "idle (base)".into(),
                String::new(),
                String::new(),
                in_parens_unless(d.base.reliable, si(app.idle_j, "J")),
                pct(100.0 * share),
            ]);
            t.render(out);
        }
        None => whole_trace_energy(out, d),
    }
    if d.types.iter().any(|t| !t.power.reliable) || !d.base.reliable {
        out.push_str(
            "(...) not a measurement: its 95% interval is wider than the precision threshold\n\
             or it is flagged (held at 0, collinear, few tasks...); see the notes below\n",
        );
        let notes: Vec<String> = std::iter::once(("base".to_owned(), &d.base))
            .chain(d.types.iter().map(|t| (t.key.to_string(), &t.power)))
            .filter(|(_, e)| !e.reliable)
            .map(|(name, e)| format!("{name}: {}", e.issues.join("; ")))
            .collect();
        list(out, "flagged", &notes);
    }

    let groups: Vec<String> = f
        .inseparable
        .iter()
        .map(|g| {
            let why = match &g.reason {
                InseparableReason::ExactlyCollinear => {
                    "exactly collinear: only their combination is identified".to_owned()
                }
                InseparableReason::NearlyCollinear { condition_index } => {
                    format!("nearly collinear (condition index {condition_index:.0})")
                }
                InseparableReason::TooFewTasks { count, minimum } => {
                    format!("{count} task(s) in the window, fewer than {minimum}")
                }
                InseparableReason::NoTimeInWindow => "never ran in the sampled window".into(),
            };
            format!("{}: {why}", g.members.join(", "))
        })
        .collect();
    list(out, "inseparable", &groups);
    list(out, "warnings", &f.warnings);
    if let Some(tr) = &d.truth {
        truth(out, tr);
    }
}

/// The energy table over the whole trace (when the trace marks no application region).
fn whole_trace_energy(out: &mut String, d: &DomainReport) {
    let mut t = Table::new(&[
        ("type", false),
        ("dyn/task", true),
        ("total/task", true),
        ("total", true),
        ("share", true),
    ]);
    for ty in &d.types {
        let shown = |v: f64| {
            if ty.power.reliable {
                si(v, "J")
            } else {
                format!("({})", si(v, "J"))
            }
        };
        // A type none of whose tasks fell in the sampled window has no energy there: a
        // per-task figure beside a total of 0 J read as a contradiction.
        let per_task = |v: f64| {
            if ty.in_window == 0 {
                "-".to_owned()
            } else {
                shown(v)
            }
        };
        t.row(vec![
            ty.key.to_string(),
            per_task(ty.dynamic_j_per_task),
            per_task(ty.total_j_per_task),
            shown(ty.total_j),
            pct(100.0 * ty.share_of_measured),
        ]);
    }
    t.row(vec![
        "idle (base)".into(),
        String::new(),
        String::new(),
        in_parens_unless(d.base.reliable, si(d.idle_j, "J")),
        pct(100.0 * d.idle_share),
    ]);
    t.render(out);
}

fn truth(out: &mut String, tr: &TruthComparison) {
    out.push('\n');
    wrap(
        out,
        &format!(
            "truth (simulated meter; noise {:.3} W at 1 ms; the base and `at run` as the run \
             realised them):",
            tr.noise_sigma_w
        ),
        "",
        "  ",
    );
    let mut t = Table::new(&[
        ("coefficient", false),
        ("estimate", true),
        ("truth", true),
        ("error", true),
        ("error%", true),
        ("95% interval", true),
        ("in", true),
    ]);
    for r in &tr.rows {
        // The contention is a fraction, not a power.
        let unitless = r.name == "contention";
        let num = |v: f64| {
            if unitless {
                format!("{v:.4}")
            } else {
                si(v, "W")
            }
        };
        let est = if r.reliable {
            num(r.estimate_w)
        } else {
            format!("({})", num(r.estimate_w))
        };
        t.row(vec![
            r.name.clone(),
            est,
            r.truth_w.map_or("?".into(), |v| {
                if r.truth_is_default {
                    format!("{}*", num(v))
                } else {
                    num(v)
                }
            }),
            r.error_w.map_or("-".into(), num),
            r.error_pct.map_or("-".into(), signed_pct),
            r.ci95_w.map_or("-".into(), |[lo, hi]| {
                if unitless {
                    format!("{lo:.4}..{hi:.4}")
                } else {
                    range(lo, hi)
                }
            }),
            r.covered
                .map_or("-", |c| if c { "yes" } else { "NO" })
                .to_owned(),
        ]);
    }
    t.render(out);
    if tr.rows.iter().any(|r| r.truth_is_default) {
        out.push_str(
            "* the simulator's default power: its configuration does not name this codelet\n\
             (give it one in --sim-config, or in the library SimConfig's task powers, to test\n\
             the attribution against a chosen truth)\n",
        );
    }
}

/// `12.3 W +- 50.0 mW`, or `(12.3 W) 8.00 W..15.1 W imprecise`.
fn estimate(e: &Estimate) -> String {
    let (v, r) = value_range(e);
    if e.reliable {
        format!("{v} {r}")
    } else {
        format!("{v} {r} {}", note(e))
    }
}

/// A measurement: `12.3 W`, `+-50.0 mW` (the larger side of its 95% interval). Flagged:
/// `(12.3 W)`, `8.00 W..15.1 W`.
fn value_range(e: &Estimate) -> (String, String) {
    if e.reliable {
        let half = e
            .ci95_w
            .map(|[lo, hi]| (e.value_w - lo).max(hi - e.value_w));
        return (
            si(e.value_w, "W"),
            half.map_or("-".into(), |h| format!("+-{}", si(h, "W"))),
        );
    }
    (
        format!("({})", si(e.value_w, "W")),
        e.ci95_w.map_or("-".into(), |[lo, hi]| range(lo, hi)),
    )
}

/// `8.00 W..15.1 W`, or `0..2.10 W`.
fn range(lo: f64, hi: f64) -> String {
    if lo == 0.0 {
        format!("0..{}", si(hi, "W"))
    } else {
        format!("{}..{}", si(lo, "W"), si(hi, "W"))
    }
}

/// The first flag, short: `imprecise +-23%`, `held at 0`, `collinear`...
fn note(e: &Estimate) -> String {
    match e.flags.first() {
        Some(super::estimate::Flag::Imprecise {
            half_width_pct,
            threshold_pct,
        }) if half_width_pct.is_finite() => {
            // `+-5.2%`, not `+-5%` beside a threshold of 5 %.
            format!(
                "imprecise +-{}%",
                super::diagnostics::pct_above(*half_width_pct, *threshold_pct)
            )
        }
        Some(f) => f.short().to_owned(),
        None if !e.reliable => "unreliable".into(),
        None => String::new(),
    }
}

fn list(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title}:");
    for it in items {
        wrap(out, it, "  - ", "    ");
    }
}

/// `text`, in parentheses unless it is a measurement (a flagged base power's idle energy).
fn in_parens_unless(measured: bool, text: String) -> String {
    if measured {
        text
    } else {
        format!("({text})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        assert_eq!(si(0.0151, "J"), "15.1 mJ");
        assert_eq!(si(251.2, "J"), "251 J");
        assert_eq!(si(12_345.0, "J"), "12.3 kJ");
        assert_eq!(si(-0.5, "W"), "-500 mW");
        assert_eq!(si(1.0, "W"), "1.00 W");
        assert_eq!(si(0.0, "W"), "0 W");
        assert_eq!(si(3.2e-7, "J"), "320 nJ");
        // Past tera: scientific notation, not hundreds of digits.
        assert_eq!(si(999.0e12, "J"), "999 TJ");
        assert_eq!(si(1.689e302, "J"), "1.69e302 J");
        assert_eq!(si(f64::INFINITY, "J"), "inf J");
    }

    #[test]
    fn an_interval_that_reaches_further_down_shows_both_sides() {
        // Symmetric: its half-width, as before.
        assert_eq!(around(3.72, Some([3.68, 3.76])), "40.0 mJ");
        // A contention the model does not know reaches down only: `3.72 J +-36.6 mJ`
        // hid the 87.8 mJ below.
        assert_eq!(around(3.72, Some([3.6322, 3.7566])), "-87.8/+36.6 mJ");
        assert_eq!(around(3.72, Some([2.52, 3.7566])), "-1.20 J/+36.6 mJ");
        assert_eq!(around(3.72, None), "-");
    }
}
