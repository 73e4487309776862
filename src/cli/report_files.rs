//! `taskwatt report --csv DIR` and `--svg DIR` (and `run --svg`): the attribution's files,
//! the per-type table and the intervals as CSV, and the plots per domain.

use std::fmt::Write as _;
use std::path::Path;

use taskwatt::energy::attribution::Attribution;
use taskwatt::plots;
use taskwatt::traces::Trace;

use super::CliResult;

pub(crate) fn emit_svg_only(trace: &Trace, att: &Attribution, dir: &Path) -> CliResult {
    let files = write_svg(dir, trace, att)?;
    eprintln!("wrote {}", files.join(", "));
    Ok(())
}

pub(crate) fn write_csv(dir: &Path, att: &Attribution) -> CliResult {
    super::output_dir(dir, "--csv")?;
    let mut types = String::from(
        "domain,type,count,mean_duration_s,power_w,power_se_w,ci95_low_w,ci95_high_w,measurement,flags,dynamic_j_per_task,total_j_per_task,total_j,share_of_measured\n",
    );
    let ci = |e: &taskwatt::energy::attribution::Estimate| {
        e.ci95_w
            .map_or(",".to_owned(), |[lo, hi]| format!("{},{}", n(lo), n(hi)))
    };
    let flags = |e: &taskwatt::energy::attribution::Estimate| {
        csv_field(
            &e.flags
                .iter()
                .map(|f| f.short())
                .collect::<Vec<_>>()
                .join(";"),
        )
    };
    for d in &att.report.domains {
        // The base's power; its energy is in the types' total_j (each task's share of
        // it) and in the idle row (what no task holds), so that the column adds up to
        // the fitted energy (the base row's 383 J made it 642 J against 492 measured).
        writeln!(
            types,
            "{},base,,,{},{},{},{},{},,,,",
            d.name,
            n(d.base.value_w),
            d.base.se_w.map_or(String::new(), n),
            ci(&d.base),
            d.base.reliable,
            flags(&d.base),
        )?;
        writeln!(
            types,
            "{},idle (base),,,,,,,{},,,,{},{}",
            d.name,
            d.base.reliable,
            n(d.idle_j),
            n(d.idle_share)
        )?;
        for t in &d.types {
            writeln!(
                types,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                d.name,
                csv_field(&t.key.to_string()),
                t.count,
                n(t.mean_duration_s),
                n(t.power.value_w),
                t.power.se_w.map_or(String::new(), n),
                ci(&t.power),
                t.power.reliable,
                flags(&t.power),
                n(t.dynamic_j_per_task),
                n(t.total_j_per_task),
                n(t.total_j),
                n(t.share_of_measured)
            )?;
        }
    }
    let mut rows = String::from("domain,t_start_s,t_end_s,measured_j,model_j,residual_j\n");
    for (fit, sys) in fits_with_systems(att) {
        let t = sys.sample_times_ns();
        for (i, (e, r)) in sys.energy_j().iter().zip(&fit.residuals_j).enumerate() {
            writeln!(
                rows,
                "{},{},{},{},{},{}",
                fit.name,
                n(t[i] as f64 * 1e-9),
                n(t[i + 1] as f64 * 1e-9),
                n(*e),
                n(e - r),
                n(*r)
            )?;
        }
    }
    let write =
        |name: &str, text: &str| taskwatt_traces::write_atomic(dir.join(name), text.as_bytes());
    write("types.csv", &types)?;
    write("intervals.csv", &rows)?;
    Ok(())
}

/// `v` to 15 significant digits, in the shortest form that reads back as that: the
/// arithmetic's last bits (`0.018000000000000002`) are not the figure's.
fn n(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    format!("{v:.14e}").parse::<f64>().unwrap_or(v).to_string()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn fits_with_systems(
    att: &Attribution,
) -> impl Iterator<
    Item = (
        &taskwatt::energy::attribution::DomainFit,
        &taskwatt::energy::attribution::DomainSystem,
    ),
> {
    att.fits.iter().filter_map(move |f| {
        att.systems
            .domains
            .iter()
            .find(|s| s.domain() == f.domain)
            .map(|s| (f, s))
    })
}

pub(crate) fn write_svg(
    dir: &Path,
    trace: &Trace,
    att: &Attribution,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    super::output_dir(dir, "--svg")?;
    let sim = if trace.is_simulated() {
        " (SIMULATED meter)"
    } else {
        ""
    };
    let mut files = Vec::new();
    let mut names = plots::FileNames::default();
    for (fit, sys) in fits_with_systems(att) {
        let t = sys.sample_times_ns();
        let t0 = t.first().copied().unwrap_or(0);
        let mut power = Vec::with_capacity(sys.intervals());
        let mut resid = Vec::with_capacity(sys.intervals());
        for (i, (e, r)) in sys.energy_j().iter().zip(&fit.residuals_j).enumerate() {
            let dt = (t[i + 1] - t[i]) as f64 * 1e-9;
            let mid = ((t[i] + t[i + 1]) / 2 - t0) as f64 * 1e-9;
            power.push((mid, e / dt, (e - r) / dt));
            resid.push((mid, r / dt));
        }
        let p = dir.join(names.svg("power-", &fit.name));
        plots::power_over_time(
            &p,
            &format!("{}: measured and model power{sim}", fit.name),
            &power,
        )?;
        files.push(p.display().to_string());
        let r = dir.join(names.svg("residuals-", &fit.name));
        plots::residuals(
            &r,
            &format!("{}: residuals per interval{sim}", fit.name),
            &resid,
        )?;
        files.push(r.display().to_string());
    }
    for d in &att.report.domains {
        // The application's energy, as the text report's headline table (the whole trace
        // gave its calibration's tasks the largest bars); the whole trace without one.
        let power = |k: &taskwatt::energy::attribution::TypeKey| {
            d.types.iter().find(|t| &t.key == k).map(|t| &t.power)
        };
        // The 95% interval of a type's dynamic energy, from its power's.
        let whisker = |p: Option<&taskwatt::energy::attribution::Estimate>, busy_s: f64| {
            p.and_then(|p| p.ci95_w)
                .map_or(0.0, |[lo, hi]| (hi - lo) / 2.0 * busy_s)
        };
        let (window, mut rows): (&str, Vec<plots::Bar>) =
            match d.regions.iter().find(|r| r.name == "application") {
                Some(app) => (
                    "the application (its graph)",
                    app.types
                        .iter()
                        .map(|t| plots::Bar {
                            label: t.key.to_string(),
                            value: t.total_j,
                            whisker: whisker(power(&t.key), t.busy_s),
                            measured: t.measured,
                        })
                        .collect(),
                ),
                None => (
                    "the whole trace",
                    d.types
                        .iter()
                        .map(|t| plots::Bar {
                            label: t.key.to_string(),
                            value: t.total_j,
                            whisker: whisker(Some(&t.power), t.busy_s),
                            measured: t.power.reliable,
                        })
                        .collect(),
                ),
            };
        let idle = d
            .regions
            .iter()
            .find(|r| r.name == "application")
            .map_or(d.idle_j, |r| r.idle_j);
        rows.push(plots::Bar {
            label: "idle".into(),
            value: idle,
            whisker: 0.0,
            measured: d.base.reliable,
        });
        let b = dir.join(names.svg("energy-", &d.name));
        plots::bars(
            &b,
            &format!(
                "{}: energy per task type over {window} (with its base share){sim}",
                d.name
            ),
            "energy (J)",
            "95% interval of the type's power",
            &rows,
        )?;
        files.push(b.display().to_string());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::n;

    #[test]
    fn csv_numbers_drop_the_arithmetics_last_bits_only() {
        assert_eq!(n(0.1 + 0.2), "0.3");
        assert_eq!(n(0.018000000000000002), "0.018");
        assert_eq!(n(29.912345678901234), "29.9123456789012");
        assert_eq!(n(-1.5e-7), "-0.00000015");
        assert_eq!(n(f64::NAN), "NaN");
    }
}
