//! Energy for imported traces: `samples.csv` (cumulative joules per domain) and
//! `workers.csv` (which workers each domain covers).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::table::Table;
use super::TimeUnit;
use crate::{
    Domain, DomainId, DomainInfo, EnergySample, MeterInfo, SensorKind, Timestamp, TraceError,
    WorkerId,
};

/// What the energy files give.
#[derive(Debug)]
pub(super) struct Energy {
    pub(super) meter: MeterInfo,
    pub(super) domains: Vec<DomainInfo>,
    pub(super) samples: Vec<EnergySample>,
}

/// The largest energy reading imported, in size: a petajoule, a megawatt for 30 years.
const MAX_IMPORT_ENERGY_J: f64 = 1e15;

const DOMAIN_NAMES: &str = "package-N, dram-N, core-N, uncore-N, gpu-N or psys";

/// The domain a name like `package-0`, `pkg0`, `DRAM_1`, `gpu 2` or `psys` stands for.
pub(super) fn parse_domain(name: &str) -> Option<Domain> {
    let n = name.trim().to_ascii_lowercase();
    if n == "psys" || n == "platform" {
        return Some(Domain::Psys);
    }
    // Longest prefixes first: `uncore` before `core`, `package` before `pkg`.
    type Make = fn(u32) -> Domain;
    let kinds: [(&str, Make); 7] = [
        ("package", |id| Domain::CpuPackage { id }),
        ("pkg", |id| Domain::CpuPackage { id }),
        ("uncore", |id| Domain::Uncore { id }),
        ("core", |id| Domain::Core { id }),
        ("dram", |id| Domain::Dram { id }),
        ("gpu", |index| Domain::Gpu { index }),
        ("cpu", |id| Domain::CpuPackage { id }),
    ];
    kinds.iter().find_map(|(prefix, make)| {
        let rest = n.strip_prefix(prefix)?;
        let rest = rest.trim_start_matches(['-', '_', ' ']);
        rest.parse::<u32>().ok().map(make)
    })
}

/// A domain the domains file declares (`--domains`): its sensor, and what is known of it.
#[derive(Debug)]
struct Declared {
    /// Its line in the domains file.
    line: u64,
    /// What it measures, if the file says (else its label's name).
    measures: Option<Domain>,
    sensor: SensorKind,
    update_interval_ns: Option<u64>,
    resolution_j: Option<f64>,
    /// The workers it covers, if the file says.
    workers: Option<Vec<WorkerId>>,
}

/// The sensor kinds a domains file may name, for its errors.
const SENSOR_KINDS: &str = "counter (an energy counter: RAPL, NVML total energy), power \
    (power readings averaged over window_ms: NVML power usage) or sampled_counter (a counter \
    that sees the last sampled_ms of each update_ms: NVML's on A100 and H100)";

/// Reads the domains file: one row per domain of the samples file whose sensor is not an
/// ideal counter, or whose workers, update interval or resolution are known.
fn read_domains(
    path: &Path,
    all_workers: &BTreeSet<WorkerId>,
) -> Result<HashMap<String, Declared>, TraceError> {
    let mut t = Table::open(path, &["domain", "sensor"])?;
    let (c_d, c_s) = (t.required("domain"), t.required("sensor"));
    let col = |name: &str| t.column(name);
    let (c_m, c_w, c_smp, c_u, c_r, c_wk) = (
        col("measures"),
        col("window_ms"),
        col("sampled_ms"),
        col("update_ms"),
        col("resolution_j"),
        col("workers"),
    );
    let mut out: HashMap<String, Declared> = HashMap::new();
    while let Some(row) = t.next_row()? {
        let cell = |c: Option<usize>| c.map_or("", |c| row.get(c).trim());
        let label = row.get(c_d).trim();
        if label.is_empty() {
            return Err(t.err(
                row.line,
                "domain",
                "the domain's name in the samples file",
                "",
            ));
        }
        if let Some(d) = out.get(label) {
            return Err(t.err(
                row.line,
                "domain",
                &format!("a domain declared once (line {} declares it too)", d.line),
                label,
            ));
        }
        let ms = |c: Option<usize>, name: &str, what: &str| -> Result<Option<u64>, TraceError> {
            let v = cell(c);
            if v.is_empty() {
                return Ok(None);
            }
            match v.parse::<f64>() {
                Ok(x) if x > 0.0 && x <= 3.6e6 => Ok(Some((x * 1e6).round() as u64)),
                _ => Err(t.err(
                    row.line,
                    name,
                    &format!("{what}, in ms (above 0, at most 3600000)"),
                    v,
                )),
            }
        };
        let needed = |v: Option<u64>, name: &str, what: &str| {
            v.ok_or_else(|| {
                t.err(
                    row.line,
                    name,
                    &format!("{what}, in ms: a column `{name}` with it on this row"),
                    "",
                )
            })
        };
        let update = ms(c_u, "update_ms", "the sensor's update interval")?;
        let kind = cell(Some(c_s)).to_ascii_lowercase().replace('-', "_");
        let sensor = match kind.as_str() {
            "counter" | "energy" | "energy_counter" => SensorKind::EnergyCounter,
            "power" | "power_average" | "integrated_power" => SensorKind::IntegratedPower {
                window_ns: needed(
                    ms(c_w, "window_ms", "the power readings' averaging window")?,
                    "window_ms",
                    "the power readings' averaging window (NVML: 1000 on Ampere and later)",
                )?,
            },
            "sampled_counter" | "sampled" => {
                let sampled = needed(
                    ms(
                        c_smp,
                        "sampled_ms",
                        "the part of each update the counter sees",
                    )?,
                    "sampled_ms",
                    "the part of each update the counter sees (A100, H100: 25 of 100)",
                )?;
                let u = needed(update, "update_ms", "the counter's update interval")?;
                if sampled >= u {
                    return Err(t.err(
                        row.line,
                        "sampled_ms",
                        &format!(
                            "less than update_ms ({} ms): a counter that sees all the time \
                             is sensor `counter`",
                            u as f64 / 1e6
                        ),
                        cell(c_smp),
                    ));
                }
                SensorKind::SampledCounter {
                    sampled_ns: sampled,
                }
            }
            _ => {
                return Err(t.err(
                    row.line,
                    "sensor",
                    &format!("a sensor kind: {SENSOR_KINDS}"),
                    cell(Some(c_s)),
                ))
            }
        };
        let measures = match cell(c_m) {
            "" => None,
            m => Some(parse_domain(m).ok_or_else(|| {
                t.err(
                    row.line,
                    "measures",
                    &format!("a domain name: {DOMAIN_NAMES}"),
                    m,
                )
            })?),
        };
        let resolution_j = match cell(c_r) {
            "" => None,
            r => Some(
                r.parse::<f64>()
                    .ok()
                    .filter(|r| r.is_finite() && *r >= 0.0)
                    .ok_or_else(|| {
                        t.err(
                            row.line,
                            "resolution_j",
                            "a non-negative number of joules",
                            r,
                        )
                    })?,
            ),
        };
        let workers = match cell(c_wk) {
            "" => None,
            w => {
                Some(parse_workers(w, all_workers).map_err(|e| t.err(row.line, "workers", &e, w))?)
            }
        };
        out.insert(
            label.to_string(),
            Declared {
                line: row.line,
                measures,
                sensor,
                update_interval_ns: update,
                resolution_j,
                workers,
            },
        );
    }
    Ok(out)
}

/// A worker list: ids and ranges separated by `;`, `,` or spaces (`2`, `0;1`, `0-15`), all
/// of them workers of the trace.
fn parse_workers(text: &str, all: &BTreeSet<WorkerId>) -> Result<Vec<WorkerId>, String> {
    let known = || {
        let v: Vec<String> = all.iter().take(16).map(|w| w.to_string()).collect();
        let more = if all.len() > 16 { ", ..." } else { "" };
        format!("{}{more}", v.join(", "))
    };
    let mut out = Vec::new();
    for part in text.split([';', ',', ' ']).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let (Ok(a), Ok(b)) = (a.parse::<WorkerId>(), b.parse::<WorkerId>()) else {
            return Err("worker ids or ranges, as `2`, `0;1` or `0-15`".to_string());
        };
        if a > b || b - a > 1 << 16 {
            return Err("worker ids or ranges, as `2`, `0;1` or `0-15`".to_string());
        }
        for w in a..=b {
            if !all.contains(&w) {
                return Err(format!(
                    "workers of the trace ({}); worker {w} ran no task in it",
                    known()
                ));
            }
            out.push(w);
        }
    }
    if out.is_empty() {
        return Err(format!("at least one worker of the trace ({})", known()));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Reads `opts`' samples file and, if given, its workers and domains files. Without
/// either, every domain covers every worker in `all_workers`.
pub(super) fn read_energy(
    samples: &Path,
    opts: &super::ImportOptions,
    unit: TimeUnit,
    all_workers: &BTreeSet<WorkerId>,
    source: &str,
) -> Result<Energy, TraceError> {
    let wrap_j = opts.wrap_range_j;
    let declared = match &opts.domains {
        Some(p) => Some((read_domains(p, all_workers)?, p)),
        None => None,
    };
    let declared_of = |label: &str| declared.as_ref().and_then(|(d, _)| d.get(label));
    // The documented format (energy, or power readings, or both columns), or taskwatt's
    // own samples export (`t_ns`, `domain_key`; each sensor by its `domain_name`).
    let (mut t, format) = Table::open_any(
        samples,
        &[
            &["time", "domain", "energy_j"],
            &["time", "domain", "power_w"],
            &["t_ns", "domain_key", "energy_j"],
        ],
    )?;
    let exported = format == 2;
    let unit = if exported { TimeUnit::Ns } else { unit };
    let (c_time, c_dom) = if exported {
        (t.required("t_ns"), t.required("domain_key"))
    } else {
        (t.required("time"), t.required("domain"))
    };
    // An export names each sensor (`domain_name`) apart from what it measures: two sensors
    // of one GPU share a `domain_key`.
    let c_label = if exported {
        t.column("domain_name").unwrap_or(c_dom)
    } else {
        c_dom
    };
    let (c_e, c_p) = (t.column("energy_j"), t.column("power_w"));
    // taskwatt's export says whether its readings came from the simulated meter; the
    // import keeps the label (a simulated run re-imported is still one).
    let c_sim = t.column("simulated");
    let mut simulated = false;
    let mut domains: Vec<DomainInfo> = Vec::new();
    let mut ids: HashMap<String, DomainId> = HashMap::new();
    // Every reading as (domain, time, line, value): rows may come in any order; they are
    // sorted by time per domain, then integrated or unwrapped, and checked.
    let mut rows: Vec<(DomainId, u64, u64, f64)> = Vec::new();
    // Per domain: whether its readings are powers (W) to integrate.
    let mut powers: Vec<bool> = Vec::new();
    // Per domain: the samples file's first line of it.
    let mut first_line: Vec<u64> = Vec::new();
    while let Some(row) = t.next_row()? {
        let time = row.get(c_time);
        let ns = unit.parse_ns(time).ok_or_else(|| {
            t.err(
                row.line,
                "time",
                &format!("a non-negative time in {unit}"),
                time,
            )
        })?;
        if let Some(c) = c_sim {
            let v = row.get(c).trim();
            if v.eq_ignore_ascii_case("true") {
                simulated = true;
            } else if !(v.is_empty() || v.eq_ignore_ascii_case("false")) {
                return Err(t.err(row.line, "simulated", "true, false or nothing", v));
            }
        }
        let label = row.get(c_label);
        let id = match ids.get(label) {
            Some(&id) => id,
            None => {
                let decl = declared_of(label);
                let name = if exported { row.get(c_dom) } else { label };
                let domain = match decl.and_then(|d| d.measures) {
                    Some(d) => d,
                    None => parse_domain(name).ok_or_else(|| {
                        let fix = if declared.is_some() {
                            " (or declare it in the domains file with a `measures` column)"
                        } else {
                            " (or name what it measures with --domains, column `measures`)"
                        };
                        t.err(
                            row.line,
                            "domain",
                            &format!("a domain name: {DOMAIN_NAMES}{fix}"),
                            name,
                        )
                    })?,
                };
                let Ok(id) = DomainId::try_from(domains.len()) else {
                    return Err(t.err(row.line, "domain", "at most 65536 domains", label));
                };
                ids.insert(label.to_string(), id);
                let sensor = decl.map_or(SensorKind::EnergyCounter, |d| d.sensor);
                // A power sensor's readings are in `power_w` where the file has it (else
                // `energy_j` holds them already integrated, as taskwatt's export does).
                let power = matches!(sensor, SensorKind::IntegratedPower { .. }) && c_p.is_some();
                powers.push(power);
                first_line.push(row.line);
                domains.push(DomainInfo {
                    id,
                    meter: 0,
                    domain,
                    name: label.to_string(),
                    unit: if power { "W" } else { "J" }.to_string(),
                    // Unknown unless given: the readings come already in joules.
                    resolution_j: decl
                        .and_then(|d| d.resolution_j)
                        .or(opts.resolution_j)
                        .unwrap_or(0.0),
                    wrap_range_j: None,
                    update_interval_ns: decl
                        .and_then(|d| d.update_interval_ns)
                        .or(opts.update_interval_ns),
                    sensor,
                    workers: decl.and_then(|d| d.workers.clone()).unwrap_or_default(),
                });
                id
            }
        };
        let (col, name, what) = if powers[id as usize] {
            (
                c_p,
                "power_w",
                "a finite, non-negative power reading in W, at most 1e6 W",
            )
        } else {
            (
                c_e,
                "energy_j",
                "a finite number of joules, at most 1e15 J in size",
            )
        };
        let text = col.map_or("", |c| row.get(c));
        let value = text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| {
                v.is_finite()
                    && if powers[id as usize] {
                        (0.0..=crate::MAX_POWER_W).contains(v)
                    } else {
                        v.abs() <= MAX_IMPORT_ENERGY_J
                    }
            })
            .ok_or_else(|| {
                let fix = if col.is_none() {
                    format!(" (the file has no `{name}` column)")
                } else {
                    String::new()
                };
                t.err(row.line, name, &format!("{what}{fix}"), text)
            })?;
        rows.push((id, ns, row.line, value));
    }
    if let Some((decl, path)) = &declared {
        let mut unused: Vec<(&String, &Declared)> =
            decl.iter().filter(|(l, _)| !ids.contains_key(*l)).collect();
        unused.sort_by_key(|(_, d)| d.line);
        if let Some((label, d)) = unused.first() {
            let mut known: Vec<&str> = ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(TraceError::Malformed {
                path: path.to_path_buf(),
                line: d.line,
                column: "domain".into(),
                expected: format!(
                    "a domain of the samples file {} ({})",
                    samples.display(),
                    known.join(", ")
                ),
                found: label.to_string(),
            });
        }
    }
    rows.sort_unstable_by_key(|r| (r.0, r.1, r.2));
    let mut out = Vec::with_capacity(rows.len());
    // Per domain, in time order: the previous (line, raw, cumulative J, time) and the wrap
    // offset.
    let mut prev: Option<(DomainId, u64, f64, f64, u64)> = None;
    let mut offset = 0.0;
    for &(id, ns, line, raw) in &rows {
        let power = powers[id as usize];
        let mut energy = if power { 0.0 } else { raw };
        if let Some((pd, pline, praw, _, pt)) = prev {
            // The same reading twice (a meter read again within one update, as taskwatt's
            // own sampler does at the end of a run) adds nothing: kept once. Two different
            // readings at one instant cannot both be right.
            if pd == id && pt == ns && praw.to_bits() == raw.to_bits() {
                continue;
            }
            if pd == id && pt == ns {
                let name = &domains[id as usize].name;
                // Sorted by line within one instant: `pline` is the earlier one.
                return Err(t.err(
                    line,
                    "time",
                    &format!(
                        "one reading per instant for domain {name}, but line {} is at the same \
                         time with another value; drop one or give the times at a finer unit \
                         (--time-unit)",
                        pline
                    ),
                    &format!("{ns} ns"),
                ));
            }
        }
        match prev {
            // Power readings: integrated with the trapezoid rule, as the sampler does.
            Some((pd, _, praw, pe, pt)) if pd == id && power => {
                energy = pe + 0.5 * (praw + raw) * (ns - pt) as f64 * 1e-9;
            }
            Some((pd, pline, praw, pe, _)) if pd == id => {
                if let Some(w) = wrap_j.filter(|_| raw < praw) {
                    offset += w;
                }
                energy = raw + offset;
                if energy < pe {
                    let name = &domains[id as usize].name;
                    return Err(t.err(
                        line,
                        "energy_j",
                        &format!(
                            "cumulative energy, at least the {pe} J of line {pline} (an earlier \
                             time) for domain {name}; if the column is a raw counter that \
                             wraps, give its range with --counter-wrap; if it holds power \
                             readings, declare the domain's sensor `power` with --domains"
                        ),
                        &raw.to_string(),
                    ));
                }
            }
            _ => offset = 0.0,
        }
        prev = Some((id, line, raw, energy, ns));
        out.push(EnergySample {
            domain: id,
            t: Timestamp(ns),
            wall_unix_ns: 0,
            energy_j: energy,
            raw: if power { f64::NAN } else { raw },
        });
    }
    out.sort_by_key(|s| s.t);
    if let Some(w) = wrap_j {
        for (d, power) in domains.iter_mut().zip(&powers) {
            if !power {
                d.wrap_range_j = Some(w);
            }
        }
    }
    if let Some(w) = &opts.workers {
        map_workers(w, &ids, &mut domains, all_workers)?;
    }
    // Neither file says: every worker (a declared list is never empty).
    if opts.workers.is_none() {
        for d in domains.iter_mut().filter(|d| d.workers.is_empty()) {
            d.workers = all_workers.iter().copied().collect();
        }
    }
    if let Some(d) = domains.iter().find(|d| d.workers.is_empty()) {
        let fix = match &opts.workers {
            Some(w) => format!(
                "add a row `<worker>,{}` to {} for each worker it covers",
                d.name,
                w.display()
            ),
            None => "give its workers in the domains file's `workers` column".to_string(),
        };
        return Err(t.err(
            first_line[d.id as usize],
            "domain",
            &format!("a domain that covers some worker ({fix})"),
            &d.name,
        ));
    }
    Ok(Energy {
        meter: MeterInfo {
            id: 0,
            backend: "import".to_string(),
            simulated,
            description: if simulated {
                format!(
                    "imported from {} ({source}); SIMULATED readings, as its `simulated` \
                     column says (taskwatt's simulated meter)",
                    samples.display()
                )
            } else {
                format!("imported from {} ({source})", samples.display())
            },
        },
        domains,
        samples: out,
    })
}

fn map_workers(
    path: &Path,
    ids: &HashMap<String, DomainId>,
    domains: &mut [DomainInfo],
    all_workers: &BTreeSet<WorkerId>,
) -> Result<(), TraceError> {
    let mut t = Table::open(path, &["worker", "domain"])?;
    let (c_w, c_d) = (t.required("worker"), t.required("domain"));
    while let Some(row) = t.next_row()? {
        let w = row.get(c_w);
        let worker: WorkerId = w
            .parse()
            .map_err(|_| t.err(row.line, "worker", "a worker id (0, 1, ...)", w))?;
        if !all_workers.contains(&worker) {
            return Err(t.err(
                row.line,
                "worker",
                &parse_workers(w, all_workers).err().unwrap_or_default(),
                w,
            ));
        }
        let d = row.get(c_d);
        let Some(&id) = ids.get(d) else {
            let mut known: Vec<&str> = ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(t.err(
                row.line,
                "domain",
                &format!("a domain of the samples file ({})", known.join(", ")),
                d,
            ));
        };
        domains[id as usize].workers.push(worker);
    }
    // Sorted and deduplicated once: linear in the rows, whatever the ids.
    for d in domains.iter_mut() {
        d.workers.sort_unstable();
        d.workers.dedup();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn read(
        samples: &Path,
        workers: Option<&Path>,
        domains: Option<&Path>,
        all: &BTreeSet<WorkerId>,
    ) -> Result<Energy, TraceError> {
        let mut o = crate::import::ImportOptions::new(TimeUnit::Ms);
        o.workers = workers.map(Path::to_path_buf);
        o.domains = domains.map(Path::to_path_buf);
        read_energy(samples, &o, TimeUnit::Ms, all, "csv")
    }

    #[test]
    fn domain_names() {
        assert_eq!(
            parse_domain("package-0"),
            Some(Domain::CpuPackage { id: 0 })
        );
        assert_eq!(parse_domain("PKG1"), Some(Domain::CpuPackage { id: 1 }));
        assert_eq!(parse_domain("uncore_2"), Some(Domain::Uncore { id: 2 }));
        assert_eq!(parse_domain("core-3"), Some(Domain::Core { id: 3 }));
        assert_eq!(parse_domain("dram 1"), Some(Domain::Dram { id: 1 }));
        assert_eq!(parse_domain("gpu-0"), Some(Domain::Gpu { index: 0 }));
        assert_eq!(parse_domain("psys"), Some(Domain::Psys));
        assert_eq!(parse_domain("fan-1"), None);
        assert_eq!(parse_domain("package"), None);
    }

    #[test]
    fn samples_and_workers() {
        let s = file(
            "time,domain,energy_j\n0,package-0,0\n0,dram-0,0\n1.5,package-0,30\n1.5,dram-0,3\n",
        );
        let w = file("worker,domain\n0,package-0\n1,package-0\n1,dram-0\n");
        let all = BTreeSet::from([0, 1, 2]);
        let e = read(s.path(), Some(w.path()), None, &all).unwrap();
        assert_eq!(e.domains.len(), 2);
        assert_eq!(e.domains[0].workers, [0, 1]);
        assert_eq!(e.domains[1].workers, [1]);
        assert_eq!(e.samples[2].t, Timestamp(1_500_000));
        assert!(!e.meter.simulated && e.meter.backend == "import");
        let e = read(s.path(), None, None, &all).unwrap();
        assert_eq!(e.domains[1].workers, [0, 1, 2]);
    }

    #[test]
    fn an_export_s_simulated_column_keeps_the_label() {
        let all = BTreeSet::from([0]);
        let head = "t_ns,domain_key,domain_name,energy_j,simulated\n";
        let sim = file(&format!(
            "{head}0,package-0,p,0,true\n5,package-0,p,1,true\n"
        ));
        let e = read(sim.path(), None, None, &all).unwrap();
        assert!(e.meter.simulated && e.meter.description.contains("SIMULATED"));
        let real = file(&format!("{head}0,package-0,p,0,false\n5,package-0,p,1,\n"));
        assert!(!read(real.path(), None, None, &all).unwrap().meter.simulated);
        let bad = file(&format!("{head}0,package-0,p,0,yes\n"));
        let e = read(bad.path(), None, None, &all).unwrap_err().to_string();
        assert!(
            e.contains(":2: simulated: expected true, false or nothing"),
            "{e}"
        );
    }

    #[test]
    fn a_reading_repeated_at_its_instant_is_kept_once() {
        // taskwatt's own exports hold these: the last periodic read and the final one,
        // within one update of the simulated counter.
        let s = file("time,domain,energy_j\n0,package-0,0\n1,package-0,3\n1,package-0,3\n");
        let e = read(s.path(), None, None, &BTreeSet::from([0])).unwrap();
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.samples[1].energy_j, 3.0);
    }

    #[test]
    fn bad_samples_name_line_and_column() {
        let all = BTreeSet::new();
        let cases = [
            (
                "time,domain,energy_j\n0,package-0,5\n1,package-0,4\n",
                ":3: energy_j: expected cumulative energy",
            ),
            (
                // Rows out of order are sorted by time first: then line 2's energy is
                // below line 3's, which comes earlier.
                "time,domain,energy_j\n2,package-0,5\n1,package-0,6\n",
                ":2: energy_j: expected cumulative energy, at least the 6 J of line 3",
            ),
            (
                "time,domain,energy_j\n0,fan,5\n",
                ":2: domain: expected a domain name",
            ),
            (
                "time,domain,energy_j\nx,psys,5\n",
                ":2: time: expected a non-negative time in ms",
            ),
            (
                "time,domain,energy_j\n1,psys,inf\n",
                ":2: energy_j: expected a finite number",
            ),
            (
                // Audit defect 18: near f64::MAX the fit's sums overflowed to NaN.
                "time,domain,energy_j\n0,package-0,0\n1,package-0,1e308\n",
                ":3: energy_j: expected a finite number of joules, at most 1e15 J",
            ),
            (
                // Audit defect 15: three readings at one instant imported, and the report
                // then said no domain had two samples.
                "time,domain,energy_j\n100,package-0,1\n100,package-0,2\n100,package-0,3\n",
                ":3: time: expected one reading per instant for domain package-0, but line 2",
            ),
        ];
        for (text, want) in cases {
            let f = file(text);
            let e = read(f.path(), None, None, &all).unwrap_err();
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
        let s = file("time,domain,energy_j\n0,package-0,0\n");
        let w = file("worker,domain\n0,gpu-0\n");
        let all = BTreeSet::from([0]);
        let e = read(s.path(), Some(w.path()), None, &all).unwrap_err();
        assert!(
            e.to_string()
                .contains(":2: domain: expected a domain of the samples file (package-0)"),
            "{e}"
        );
    }

    #[test]
    fn a_domains_file_declares_each_sensor_and_power_readings_are_integrated() {
        // One GPU read by two sensors (a sampled counter and power readings), a package
        // read by RAPL's counter.
        let s = file(
            "time,domain,energy_j,power_w\n\
             0,nvml-energy,0,\n0,nvml-power,,100\n0,package-0,0,\n\
             100,nvml-energy,10,\n100,nvml-power,,120\n100,package-0,5,\n\
             200,nvml-energy,21,\n200,nvml-power,,100\n200,package-0,9,\n",
        );
        let d = file(
            "domain,measures,sensor,window_ms,sampled_ms,update_ms,resolution_j,workers\n\
             nvml-energy,gpu-0,sampled_counter,,25,100,0.001,2\n\
             nvml-power,gpu-0,power,1000,,,,2\n",
        );
        let all = BTreeSet::from([0, 1, 2]);
        let e = read(s.path(), None, Some(d.path()), &all).unwrap();
        let by = |n: &str| e.domains.iter().find(|d| d.name == n).unwrap();
        let (c, p, k) = (by("nvml-energy"), by("nvml-power"), by("package-0"));
        assert_eq!(c.domain, Domain::Gpu { index: 0 });
        assert_eq!(
            c.sensor,
            SensorKind::SampledCounter {
                sampled_ns: 25_000_000
            }
        );
        assert_eq!(c.update_interval_ns, Some(100_000_000));
        assert_eq!(c.resolution_j, 0.001);
        assert_eq!(c.workers, [2]);
        assert_eq!(
            p.sensor,
            SensorKind::IntegratedPower {
                window_ns: 1_000_000_000
            }
        );
        assert!(p.same_device(c), "both sensors of one GPU");
        assert_eq!(k.sensor, SensorKind::EnergyCounter);
        assert_eq!(k.workers, [0, 1, 2], "undeclared: every worker");
        let power: Vec<f64> = e
            .samples
            .iter()
            .filter(|x| x.domain == p.id)
            .map(|x| x.energy_j)
            .collect();
        // Trapezoids: 0.1 s at (100 + 120) / 2, then at (120 + 100) / 2.
        assert_eq!(power.len(), 3);
        assert!(
            (power[1] - 11.0).abs() < 1e-9 && (power[2] - 22.0).abs() < 1e-9,
            "{power:?}"
        );
    }

    #[test]
    fn a_bad_domains_file_names_its_line_and_the_fix() {
        let s = file("time,domain,energy_j\n0,gpu-0,0\n1,gpu-0,1\n");
        let all = BTreeSet::from([0, 1]);
        let cases = [
            (
                "domain,sensor\ngpu-0,thermal\n",
                ":2: sensor: expected a sensor kind: counter",
            ),
            (
                "domain,sensor\ngpu-0,power\n",
                ":2: window_ms: expected the power readings' averaging window",
            ),
            (
                "domain,sensor,sampled_ms\ngpu-0,sampled_counter,25\n",
                ":2: update_ms: expected the counter's update interval",
            ),
            (
                "domain,sensor,sampled_ms,update_ms\ngpu-0,sampled,100,100\n",
                ":2: sampled_ms: expected less than update_ms",
            ),
            (
                "domain,sensor,workers\ngpu-0,counter,7\n",
                ":2: workers: expected workers of the trace (0, 1); worker 7 ran no task",
            ),
            (
                "domain,sensor\ngpu-0,counter\ngpu-0,counter\n",
                ":3: domain: expected a domain declared once (line 2",
            ),
            (
                "domain,sensor\ngpu-1,counter\n",
                ":2: domain: expected a domain of the samples file",
            ),
            (
                "domain,sensor,measures\ngpu-0,counter,fan\n",
                ":2: measures: expected a domain name",
            ),
        ];
        for (text, want) in cases {
            let d = file(text);
            let e = read(s.path(), None, Some(d.path()), &all).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{msg} / {want}");
            assert!(
                msg.contains(&d.path().display().to_string()),
                "names the file: {msg}"
            );
        }
        // A power domain whose file has no power column.
        let d = file("domain,sensor,window_ms\ngpu-0,power,1000\n");
        let s2 = file("time,domain,power_w\n0,gpu-0,\n");
        let e = read(s2.path(), None, Some(d.path()), &all).unwrap_err();
        assert!(
            e.to_string()
                .contains(":2: power_w: expected a finite, non-negative power reading in W"),
            "{e}"
        );
        // A domain the workers file does not cover.
        let s3 = file("time,domain,energy_j\n0,package-0,0\n0,gpu-0,0\n");
        let w = file("worker,domain\n0,package-0\n");
        let e = read(s3.path(), Some(w.path()), None, &all).unwrap_err();
        assert!(
            e.to_string().contains(
                ":3: domain: expected a domain that covers some worker (add a row `<worker>,gpu-0`"
            ),
            "{e}"
        );
    }
}
