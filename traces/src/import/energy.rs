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

/// Reads `samples` and, if given, `workers`. Without `workers`, every domain covers every
/// worker in `all_workers`.
pub(super) fn read_energy(
    samples: &Path,
    workers: Option<&Path>,
    unit: TimeUnit,
    all_workers: &BTreeSet<WorkerId>,
    source: &str,
    wrap_j: Option<f64>,
) -> Result<Energy, TraceError> {
    // The documented format, or taskwatt's own samples export (`t_ns`, `domain_key`).
    let (mut t, format) = Table::open_any(
        samples,
        &[
            &["time", "domain", "energy_j"],
            &["t_ns", "domain_key", "energy_j"],
        ],
    )?;
    let exported = format == 1;
    let unit = if exported { TimeUnit::Ns } else { unit };
    let (c_time, c_dom, c_e) = if exported {
        (
            t.required("t_ns"),
            t.required("domain_key"),
            t.required("energy_j"),
        )
    } else {
        (
            t.required("time"),
            t.required("domain"),
            t.required("energy_j"),
        )
    };
    let mut domains: Vec<DomainInfo> = Vec::new();
    let mut ids: HashMap<String, DomainId> = HashMap::new();
    // Every reading as (domain, time, line, energy): rows may come in any order; they are
    // sorted by time per domain, then unwrapped and checked.
    let mut rows: Vec<(DomainId, u64, u64, f64)> = Vec::new();
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
        let name = row.get(c_dom);
        let id = match ids.get(name) {
            Some(&id) => id,
            None => {
                let domain = parse_domain(name).ok_or_else(|| {
                    t.err(
                        row.line,
                        "domain",
                        &format!("a domain name: {DOMAIN_NAMES}"),
                        name,
                    )
                })?;
                let Ok(id) = DomainId::try_from(domains.len()) else {
                    return Err(t.err(row.line, "domain", "at most 65536 domains", name));
                };
                ids.insert(name.to_string(), id);
                domains.push(DomainInfo {
                    id,
                    meter: 0,
                    domain,
                    name: name.to_string(),
                    unit: "J".to_string(),
                    // Unknown: the readings come already in joules.
                    resolution_j: 0.0,
                    wrap_range_j: None,
                    update_interval_ns: None,
                    sensor: SensorKind::EnergyCounter,
                    workers: Vec::new(),
                });
                id
            }
        };
        let e_text = row.get(c_e);
        let energy = e_text
            .parse::<f64>()
            .ok()
            .filter(|e| e.is_finite())
            .ok_or_else(|| t.err(row.line, "energy_j", "a finite number of joules", e_text))?;
        rows.push((id, ns, row.line, energy));
    }
    rows.sort_unstable_by_key(|r| (r.0, r.1, r.2));
    let mut out = Vec::with_capacity(rows.len());
    // Per domain, in time order: the previous (line, raw, unwrapped) and the wrap offset.
    let mut prev: Option<(DomainId, u64, f64, f64)> = None;
    let mut offset = 0.0;
    for &(id, ns, line, raw) in &rows {
        let mut energy = raw;
        match prev {
            Some((pd, pline, praw, pe)) if pd == id => {
                if let Some(w) = wrap_j.filter(|_| raw < praw) {
                    offset += w;
                    let _ = pline;
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
                             wraps, give its range with --counter-wrap"
                        ),
                        &raw.to_string(),
                    ));
                }
            }
            _ => offset = 0.0,
        }
        prev = Some((id, line, raw, energy));
        out.push(EnergySample {
            domain: id,
            t: Timestamp(ns),
            wall_unix_ns: 0,
            energy_j: energy,
            raw,
        });
    }
    out.sort_by_key(|s| s.t);
    if let Some(w) = wrap_j {
        for d in &mut domains {
            d.wrap_range_j = Some(w);
        }
    }

    match workers {
        Some(w) => map_workers(w, &ids, &mut domains)?,
        None => {
            for d in &mut domains {
                d.workers = all_workers.iter().copied().collect();
            }
        }
    }
    Ok(Energy {
        meter: MeterInfo {
            id: 0,
            backend: "import".to_string(),
            simulated: false,
            description: format!("imported from {} ({source})", samples.display()),
        },
        domains,
        samples: out,
    })
}

fn map_workers(
    path: &Path,
    ids: &HashMap<String, DomainId>,
    domains: &mut [DomainInfo],
) -> Result<(), TraceError> {
    let mut t = Table::open(path, &["worker", "domain"])?;
    let (c_w, c_d) = (t.required("worker"), t.required("domain"));
    while let Some(row) = t.next_row()? {
        let w = row.get(c_w);
        let worker: WorkerId = w
            .parse()
            .map_err(|_| t.err(row.line, "worker", "a worker id (0, 1, ...)", w))?;
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
        let e = read_energy(s.path(), Some(w.path()), TimeUnit::Ms, &all, "csv", None).unwrap();
        assert_eq!(e.domains.len(), 2);
        assert_eq!(e.domains[0].workers, [0, 1]);
        assert_eq!(e.domains[1].workers, [1]);
        assert_eq!(e.samples[2].t, Timestamp(1_500_000));
        assert!(!e.meter.simulated && e.meter.backend == "import");
        let e = read_energy(s.path(), None, TimeUnit::Ms, &all, "csv", None).unwrap();
        assert_eq!(e.domains[1].workers, [0, 1, 2]);
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
        ];
        for (text, want) in cases {
            let f = file(text);
            let e = read_energy(f.path(), None, TimeUnit::Ms, &all, "csv", None).unwrap_err();
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
        let s = file("time,domain,energy_j\n0,package-0,0\n");
        let w = file("worker,domain\n0,gpu-0\n");
        let e = read_energy(s.path(), Some(w.path()), TimeUnit::Ms, &all, "csv", None).unwrap_err();
        assert!(
            e.to_string()
                .contains(":2: domain: expected a domain of the samples file (package-0)"),
            "{e}"
        );
    }
}
