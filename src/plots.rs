//! SVG plots of energy reports (plotters, SVG backend): power over time, energy per task
//! type, residuals, and predicted against measured energy per policy.
//!
//! The functions take plain series so that they serve the report, `compare` and anyone
//! else; each writes one self-contained SVG file.

use std::path::Path;

use plotters::prelude::*;

/// A plotting error (an I/O error writing the file, or a degenerate series).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {message}")]
pub struct PlotError {
    /// The file being drawn.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// File names for plots named after task types, domains or policies: each name made safe
/// for a file (letters, digits, `-` and `_`; anything else, spaces and `/` included, as
/// `_`), and kept apart from those already given (`a b` and `a_b` get `a_b` and `a_b-2`).
#[derive(Debug, Default)]
pub struct FileNames {
    used: std::collections::HashSet<String>,
}

impl FileNames {
    /// `{prefix}{name}.svg`, safe and not given before.
    pub fn svg(&mut self, prefix: &str, name: &str) -> String {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let safe = if safe.is_empty() { "_".into() } else { safe };
        let mut file = format!("{prefix}{safe}.svg");
        let mut k = 2;
        while !self.used.insert(file.clone()) {
            file = format!("{prefix}{safe}-{k}.svg");
            k += 1;
        }
        file
    }
}

/// Turns plotters' errors into a [`PlotError`] naming the file.
trait OrPlot<T> {
    fn or_plot(self, path: &Path) -> Result<T, PlotError>;
}

impl<T, E: std::fmt::Display> OrPlot<T> for Result<T, E> {
    fn or_plot(self, path: &Path) -> Result<T, PlotError> {
        self.map_err(|x| PlotError {
            path: path.display().to_string(),
            message: x.to_string(),
        })
    }
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 1.0, hi + 1.0);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// The label of the row or column whose centre is at `v` (`i + 0.5`), else nothing.
fn label_at(labels: &[String], v: f64) -> String {
    let i = v.floor();
    if i >= 0.0 && (v - i - 0.5).abs() < 1e-6 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Measured and reconstructed power over time for one domain: `(t_s, measured_w,
/// reconstructed_w)` per interval (midpoint time).
pub fn power_over_time(
    path: &Path,
    title: &str,
    points: &[(f64, f64, f64)],
) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    let (x0, x1) = range(points.iter().map(|p| p.0));
    let (y0, y1) = range(points.iter().flat_map(|p| [p.1, p.2]));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(x0..x1, y0.min(0.0)..y1)
        .or_plot(path)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("power (W)")
        .draw()
        .or_plot(path)?;
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            COLORS[0].stroke_width(1),
        ))
        .or_plot(path)?
        .label("measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], COLORS[0]));
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.2)),
            COLORS[1].stroke_width(2),
        ))
        .or_plot(path)?
        .label("model")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], COLORS[1]));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .or_plot(path)?;
    root.present().or_plot(path)
}

/// One bar of [`bars`].
#[derive(Clone, Debug)]
pub struct Bar {
    /// Its label.
    pub label: String,
    /// Its length.
    pub value: f64,
    /// The half-width of its whisker (0 for none).
    pub whisker: f64,
    /// Whether it is a measurement: a bar that is not is drawn pale, and its label says
    /// so, as the text report puts such figures in parentheses.
    pub measured: bool,
}

/// Horizontal bars, one per row (the whisker drawn around its end). `unit` labels the
/// axis, `whiskers` what they mean (in the axis label, when any is drawn).
pub fn bars(
    path: &Path,
    title: &str,
    unit: &str,
    whiskers: &str,
    bars: &[Bar],
) -> Result<(), PlotError> {
    let rows: Vec<(String, f64, f64)> = bars
        .iter()
        .map(|b| {
            let label = if b.measured {
                b.label.clone()
            } else {
                format!("({}) not measured", b.label)
            };
            (label, b.value, b.whisker)
        })
        .collect();
    let unit = if bars.iter().any(|b| b.whisker > 0.0) {
        format!("{unit}; whiskers: {whiskers}")
    } else {
        unit.to_owned()
    };
    let pale: Vec<bool> = bars.iter().map(|b| !b.measured).collect();
    let (rows, unit) = (&rows[..], unit.as_str());
    let h = (90 + 34 * rows.len().max(1)) as u32;
    let root = SVGBackend::new(path, (900, h)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    let max = rows
        .iter()
        .map(|r| r.1 + r.2.abs())
        .fold(0.0f64, f64::max)
        .max(1e-12)
        * 1.1;
    let n = rows.len().max(1);
    // Row i occupies [i, i+1) on the y axis; its bar is the middle 70 %.
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(160)
        .build_cartesian_2d(0.0..max, 0.0..n as f64)
        .or_plot(path)?;
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(unit)
        .y_labels(2 * n + 1)
        .y_label_formatter(&|v: &f64| label_at(&labels, *v))
        .draw()
        .or_plot(path)?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            let c = COLORS[i % COLORS.len()];
            let y = i as f64;
            let alpha = if pale[i] { 0.25 } else { 0.8 };
            Rectangle::new([(0.0, y + 0.15), (r.1, y + 0.85)], c.mix(alpha).filled())
        }))
        .or_plot(path)?;
    chart
        .draw_series(
            rows.iter()
                .enumerate()
                .filter(|(_, r)| r.2 > 0.0)
                .map(|(i, r)| {
                    let y = i as f64 + 0.5;
                    PathElement::new(vec![(r.1 - r.2, y), (r.1 + r.2, y)], BLACK.stroke_width(2))
                }),
        )
        .or_plot(path)?;
    root.present().or_plot(path)
}

/// Residuals over time: `(t_s, residual_w)` per interval.
pub fn residuals(path: &Path, title: &str, points: &[(f64, f64)]) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (900, 360)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    let (x0, x1) = range(points.iter().map(|p| p.0));
    let m = points
        .iter()
        .map(|p| p.1.abs())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(x0..x1, -m..m)
        .or_plot(path)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("measured - model (W)")
        .y_label_formatter(&|v: &f64| tick(*v))
        .draw()
        .or_plot(path)?;
    chart
        .draw_series(LineSeries::new(
            [(x0, 0.0), (x1, 0.0)],
            BLACK.stroke_width(1),
        ))
        .or_plot(path)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|p| Circle::new((p.0, p.1), 2, COLORS[3].filled())),
        )
        .or_plot(path)?;
    root.present().or_plot(path)
}

/// Grouped bars: per label (a policy), measured and predicted values.
pub fn measured_vs_predicted(
    path: &Path,
    title: &str,
    unit: &str,
    rows: &[(String, f64, f64)],
) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    let n = rows.len().max(1);
    let max = rows
        .iter()
        .flat_map(|r| [r.1, r.2])
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-12)
        * 1.15;
    // Label i occupies [i, i+1) on the x axis: measured on its left, predicted on its right.
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n as f64, 0.0..max)
        .or_plot(path)?;
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(unit)
        .x_labels(2 * n + 1)
        .x_label_formatter(&|v: &f64| label_at(&labels, *v))
        .draw()
        .or_plot(path)?;
    for (k, (color, label)) in [(COLORS[0], "measured"), (COLORS[1], "predicted")]
        .into_iter()
        .enumerate()
    {
        chart
            .draw_series(rows.iter().enumerate().map(move |(i, r)| {
                let v = if k == 0 { r.1 } else { r.2 };
                let x = i as f64 + 0.1 + 0.4 * k as f64;
                Rectangle::new([(x, 0.0), (x + 0.38, v)], color.mix(0.85).filled())
            }))
            .or_plot(path)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .or_plot(path)?;
    root.present().or_plot(path)
}

/// One architecture's series in [`time_vs_size`]: its name, (footprint in bytes, mean
/// duration in µs, standard deviation in µs) per footprint, and the fitted power law
/// `t = a · size^b` (ns) if there is one.
pub type SizeSeries = (String, Vec<(f64, f64, f64)>, Option<(f64, f64)>);

/// A codelet's performance model: mean duration (with ± one standard deviation) against
/// footprint, log-log, one colour per architecture, and the fitted power law as a line.
pub fn time_vs_size(path: &Path, title: &str, series: &[SizeSeries]) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    let pts = || series.iter().flat_map(|s| s.1.iter());
    let (x0, x1) = range(pts().map(|p| p.0.max(1.0)));
    let (y0, y1) = range(pts().flat_map(|p| [(p.1 - p.2).max(p.1 * 0.5), p.1 + p.2]));
    let (x0, x1) = (x0.max(1.0) / 1.5, x1.max(1.0) * 1.5);
    let (y0, y1) = (y0.max(1e-3) / 1.5, y1.max(1e-3) * 1.5);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .or_plot(path)?;
    chart
        .configure_mesh()
        .x_desc("footprint (bytes)")
        .y_desc("duration (us)")
        .draw()
        .or_plot(path)?;
    for (i, (name, points, law)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(points.iter().map(|p| {
                ErrorBar::new_vertical(
                    p.0,
                    (p.1 - p.2).max(p.1 * 0.5),
                    p.1,
                    p.1 + p.2,
                    color.filled(),
                    6,
                )
            }))
            .or_plot(path)?
            .label(name.clone())
            .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
        if let Some((a, b)) = law {
            let line = (0..=40).map(|k| {
                let x = x0 * (x1 / x0).powf(k as f64 / 40.0);
                (x, a * x.powf(*b) / 1e3)
            });
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(1)))
                .or_plot(path)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .or_plot(path)?;
    root.present().or_plot(path)
}

/// Energy against makespan, one point per label (a policy, or dmdae at one γ); the points
/// of `sweep` (labels in sweep order) joined by a line: the Pareto plot of `compare
/// --gamma`.
pub fn pareto(
    path: &Path,
    title: &str,
    points: &[ParetoPoint],
    sweep: &[String],
) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).or_plot(path)?;
    // The axes hold the points and their intervals.
    let (x0, x1) = range(
        points
            .iter()
            .flat_map(|p| [p.x].into_iter().chain(p.x_ci.into_iter().flatten())),
    );
    let (y0, y1) = range(
        points
            .iter()
            .flat_map(|p| [p.y].into_iter().chain(p.y_ci.into_iter().flatten())),
    );
    let pad = |a: f64, b: f64| {
        let d = ((b - a) * 0.1).max(b.abs() * 0.02).max(1e-9);
        (a - d, b + d)
    };
    let ((x0, x1), (y0, y1)) = (pad(x0, x1), pad(y0, y1));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, y0..y1)
        .or_plot(path)?;
    chart
        .configure_mesh()
        .x_desc("makespan (s)")
        .y_desc("energy (J)")
        .draw()
        .or_plot(path)?;
    let line: Vec<(f64, f64)> = sweep
        .iter()
        .filter_map(|l| points.iter().find(|p| &p.label == l).map(|p| (p.x, p.y)))
        .collect();
    chart
        .draw_series(LineSeries::new(line, COLORS[0].stroke_width(2)))
        .or_plot(path)?;
    for (i, p) in points.iter().enumerate() {
        let in_sweep = sweep.contains(&p.label);
        let color = if in_sweep {
            COLORS[0]
        } else {
            COLORS[1 + i % 5]
        };
        // 95 % intervals as error bars.
        let bars = p
            .x_ci
            .map(|[a, b]| vec![(a, p.y), (b, p.y)])
            .into_iter()
            .chain(p.y_ci.map(|[a, b]| vec![(p.x, a), (p.x, b)]));
        chart
            .draw_series(bars.map(|l| PathElement::new(l, color.stroke_width(1))))
            .or_plot(path)?;
        chart
            .draw_series(std::iter::once(Circle::new((p.x, p.y), 5, color.filled())))
            .or_plot(path)?;
        chart
            .draw_series(std::iter::once(Text::new(
                p.label.clone(),
                (p.x, p.y),
                ("sans-serif", 13).into_font(),
            )))
            .or_plot(path)?;
    }
    root.present().or_plot(path)
}

/// A point of [`pareto`]: its label, makespan (s) and energy (J), with their 95 % intervals
/// where the point has them (drawn as error bars).
#[derive(Clone, Debug, PartialEq)]
pub struct ParetoPoint {
    /// The label.
    pub label: String,
    /// Makespan, s.
    pub x: f64,
    /// Energy, J.
    pub y: f64,
    /// The makespan's interval.
    pub x_ci: Option<[f64; 2]>,
    /// The energy's.
    pub y_ci: Option<[f64; 2]>,
}

impl ParetoPoint {
    /// A point without intervals.
    pub fn new(label: String, x: f64, y: f64) -> ParetoPoint {
        ParetoPoint {
            label,
            x,
            y,
            x_ci: None,
            y_ci: None,
        }
    }
}

/// A tick's label: the value to a millionth, never `-0` (a residual axis centred on 0
/// labelled its middle `-0.0`).
fn tick(v: f64) -> String {
    let r = (v * 1e6).round() / 1e6;
    format!("{}", if r == 0.0 { 0.0 } else { r })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_at_zero_is_never_minus_zero() {
        assert_eq!(tick(-0.0), "0");
        assert_eq!(tick(-1e-12), "0");
        assert_eq!(tick(-0.5), "-0.5");
        assert_eq!(tick(2.0), "2");
    }

    #[test]
    fn plot_file_names_are_safe_and_distinct() {
        let mut n = FileNames::default();
        assert_eq!(n.svg("energy-", "GPU 0/dram"), "energy-GPU_0_dram.svg");
        assert_eq!(n.svg("", "a b"), "a_b.svg");
        assert_eq!(n.svg("", "a_b"), "a_b-2.svg");
        assert_eq!(n.svg("", "a/b"), "a_b-3.svg");
        assert_eq!(n.svg("power-", ""), "power-_.svg");
    }

    #[test]
    fn every_plot_writes_an_svg() {
        let d = tempfile::tempdir().unwrap();
        let pts: Vec<(f64, f64, f64)> = (0..50)
            .map(|i| (i as f64 * 0.01, 40.0 + (i % 7) as f64, 41.0))
            .collect();
        power_over_time(&d.path().join("p.svg"), "package-0", &pts).unwrap();
        let bar = |label: &str, value, whisker, measured| Bar {
            label: label.into(),
            value,
            whisker,
            measured,
        };
        bars(
            &d.path().join("b.svg"),
            "energy per task type",
            "J",
            "95% interval",
            &[bar("gemm", 12.0, 0.5, true), bar("potrf", 1.0, 0.0, false)],
        )
        .unwrap();
        let b = std::fs::read_to_string(d.path().join("b.svg")).unwrap();
        assert!(b.contains("(potrf) not measured") && b.contains("whiskers: 95% interval"));
        residuals(
            &d.path().join("r.svg"),
            "residuals",
            &pts.iter().map(|p| (p.0, p.1 - p.2)).collect::<Vec<_>>(),
        )
        .unwrap();
        measured_vs_predicted(
            &d.path().join("c.svg"),
            "compare",
            "J",
            &[("ws".into(), 10.0, 10.1), ("lws".into(), 9.0, 8.9)],
        )
        .unwrap();
        // Points at the intervals' corners keep the axes (and their grid) the same with
        // and without intervals.
        let corner = |x, y| ParetoPoint::new(String::new(), x, y);
        let mut with = ParetoPoint::new("dmda (simulated)".into(), 1.0, 40.0);
        with.x_ci = Some([0.9, 1.2]);
        with.y_ci = Some([38.0, 43.0]);
        pareto(
            &d.path().join("w.svg"),
            "whatif",
            &[
                ParetoPoint::new("lws (run)".into(), 1.1, 41.0),
                corner(0.9, 38.0),
                corner(1.2, 43.0),
                with,
            ],
            &[],
        )
        .unwrap();
        pareto(
            &d.path().join("w0.svg"),
            "whatif",
            &[
                ParetoPoint::new("lws (run)".into(), 1.1, 41.0),
                corner(0.9, 38.0),
                corner(1.2, 43.0),
                ParetoPoint::new("dmda (simulated)".into(), 1.0, 40.0),
            ],
            &[],
        )
        .unwrap();
        let w = std::fs::read_to_string(d.path().join("w.svg")).unwrap();
        let w0 = std::fs::read_to_string(d.path().join("w0.svg")).unwrap();
        // Two error bars more than the same points without intervals.
        let lines = |s: &str| s.matches("<polyline").count() + s.matches("<line").count();
        assert!(w.contains("dmda (simulated)"), "{w}");
        assert_eq!(lines(&w), lines(&w0) + 2, "{w}");
        for f in ["p.svg", "b.svg", "r.svg", "c.svg", "w.svg"] {
            let s = std::fs::read_to_string(d.path().join(f)).unwrap();
            assert!(s.starts_with("<svg") && s.contains("</svg>"), "{f}");
        }
        let b = std::fs::read_to_string(d.path().join("b.svg")).unwrap();
        assert!(b.contains("gemm") && b.contains("potrf"));
    }
}
