//! Figures as people read them: three significant digits with an SI prefix.

/// Three significant digits with an SI prefix: `15.1 mJ`, `251 J`, `12.3 kJ`.
pub(crate) fn si(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return format!("{v} {unit}");
    }
    if v == 0.0 {
        return format!("0 {unit}");
    }
    // Past the largest prefix: scientific notation, never hundreds of digits.
    if v.abs() >= 999.5e12 {
        return format!("{v:.2e} {unit}");
    }
    const PREFIXES: [(f64, &str); 9] = [
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1.0, ""),
        (1e-3, "m"),
        (1e-6, "u"),
        (1e-9, "n"),
        (1e-12, "p"),
    ];
    let a = v.abs();
    let (scale, p) = PREFIXES
        .iter()
        .copied()
        .find(|(s, _)| a >= *s * 0.9995)
        .unwrap_or((1e-12, "p"));
    let x = v / scale;
    let decimals = if x.abs() >= 99.95 {
        0
    } else if x.abs() >= 9.995 {
        1
    } else {
        2
    };
    format!("{x:.decimals$} {p}{unit}")
}
