//! Rendering a prediction (`taskwatt predict`): one row per domain, the model's interval
//! and where a measurement is expected.

use std::fmt::Write as _;

use super::{banner, list, RenderOptions};
use crate::attribution::predict::EnergyPrediction;
use crate::attribution::text::{pct, signed_pct, Table};
use crate::attribution::units::si;

/// Renders a prediction.
pub fn render_prediction(pred: &EnergyPrediction, opts: &RenderOptions) -> String {
    let mut out = String::new();
    banner(&mut out, opts);
    let _ = writeln!(out, "taskwatt energy prediction (types by {})", pred.key);
    let mut t = Table::new(&[
        ("domain", false),
        ("window", true),
        ("base", true),
        ("predicted", true),
        ("+-95%", true),
        ("meas+-", true),
        ("measured", true),
        ("error", true),
        ("iMAPE", true),
    ]);
    for d in &pred.domains {
        let mut name = d.domain.to_string();
        if !d.in_total {
            name.push('*');
        }
        t.row(vec![
            name,
            format!("{:.2} s", d.window_s),
            si(d.base_j, "J"),
            si(d.predicted_j, "J"),
            around(d.predicted_j, d.interval_j),
            around(d.predicted_j, d.measurement_interval_j),
            d.measured_j.map_or("-".into(), |m| si(m, "J")),
            d.error_pct.map_or("-".into(), signed_pct),
            d.interval_mape_pct.map_or("-".into(), pct),
        ]);
    }
    t.row(vec![
        "total".into(),
        String::new(),
        String::new(),
        si(pred.total_predicted_j, "J"),
        around(pred.total_predicted_j, pred.total_interval_j),
        around(pred.total_predicted_j, pred.total_measurement_interval_j),
        pred.total_measured_j.map_or("-".into(), |m| si(m, "J")),
        pred.total_error_pct.map_or("-".into(), signed_pct),
        String::new(),
    ]);
    t.render(&mut out);
    if pred.domains.iter().any(|d| !d.in_total) {
        out.push_str("* contained in another domain: not counted in the total\n");
    }
    if pred.total_measurement_interval_j.is_some() {
        out.push_str(
            "+-95%: the model's uncertainty; meas+-: where a measurement is expected (that\n\
             uncertainty, the meter's noise and the tasks' own variation, 95%)\n",
        );
    }
    if has_lopsided(pred) {
        out.push_str(
            "-a/+b: an interval that reaches further down than up (a contention the model\n\
             does not know, or a power's bound at 0)\n",
        );
    }
    if pred.domains.iter().any(|d| !d.regions.is_empty()) {
        out.push('\n');
        let mut t = Table::new(&[
            ("domain", false),
            ("region", false),
            ("window", true),
            ("predicted", true),
            ("+-95%", true),
            ("meas+-", true),
            ("measured", true),
            ("error", true),
        ]);
        for d in &pred.domains {
            for r in &d.regions {
                t.row(vec![
                    d.domain.to_string(),
                    r.name.clone(),
                    format!("{:.3} s", r.window_s),
                    si(r.predicted_j, "J"),
                    around(r.predicted_j, r.interval_j),
                    around(r.predicted_j, r.measurement_interval_j),
                    r.measured_j.map_or("-".into(), |m| si(m, "J")),
                    r.error_pct.map_or("-".into(), signed_pct),
                ]);
            }
        }
        t.render(&mut out);
    }
    list(&mut out, "warnings", &pred.warnings);
    out
}

/// An interval around `centre` as its half-width (`12.3 mJ`), or as `-a/+b` where its
/// sides differ by more than 5 % (a contention the model does not know reaches down only).
pub(super) fn around(centre: f64, iv: Option<[f64; 2]>) -> String {
    let Some([lo, hi]) = iv else {
        return "-".into();
    };
    let (down, up) = ((centre - lo).max(0.0), (hi - centre).max(0.0));
    if lopsided(down, up) {
        let (d, u) = (si(down, "J"), si(up, "J"));
        // One unit for both where they share it: `-87.8/+36.6 mJ`.
        match (d.split_once(' '), u.split_once(' ')) {
            (Some((dv, du)), Some((uv, uu))) if du == uu => format!("-{dv}/+{uv} {uu}"),
            _ => format!("-{d}/+{u}"),
        }
    } else {
        si((hi - lo) / 2.0, "J")
    }
}

fn lopsided(down: f64, up: f64) -> bool {
    (down - up).abs() > 0.05 * down.max(up)
}

/// Whether a row of the prediction shows an interval as `-a/+b`.
fn has_lopsided(pred: &EnergyPrediction) -> bool {
    let side = |c: f64, iv: Option<[f64; 2]>| {
        iv.is_some_and(|[lo, hi]| lopsided((c - lo).max(0.0), (hi - c).max(0.0)))
    };
    side(pred.total_predicted_j, pred.total_interval_j)
        || side(pred.total_predicted_j, pred.total_measurement_interval_j)
        || pred.domains.iter().any(|d| {
            side(d.predicted_j, d.interval_j)
                || side(d.predicted_j, d.measurement_interval_j)
                || d.regions.iter().any(|r| {
                    side(r.predicted_j, r.interval_j)
                        || side(r.predicted_j, r.measurement_interval_j)
                })
        })
}
