//! RAPL through the powercap sysfs tree (`rapl-powercap`).
//!
//! Linux's `intel_rapl_common` driver exposes each RAPL domain as a powercap zone:
//!
//! ```text
//! /sys/class/powercap/
//!   intel-rapl:0/            name = package-0   energy_uj  max_energy_range_uj
//!     intel-rapl:0:0/        name = dram        (or core, uncore)
//!   intel-rapl:1/            name = package-1   (or psys: the whole platform)
//!     intel-rapl:1:0/        name = dram
//!   intel-rapl:0:0 -> ...    (sub-zones are also linked at the top level)
//!   intel-rapl-mmio:0/       the same package through MMIO: skipped, it is a duplicate
//! ```
//!
//! AMD Zen exposes the same tree since Linux 5.8 (package and core zones, no dram).
//!
//! `energy_uj` is a cumulative counter in µJ that wraps at `max_energy_range_uj` (the 32-bit
//! hardware counter scaled to µJ): the wrap is undone by [`crate::wrap`], with a range of
//! `max_energy_range_uj + 1` since the file can hold `0..=max`. The hardware's energy step
//! (2^-14 J = 61 µJ on most Intel parts, 15.3 µJ on AMD) is not exposed here; the domain's
//! resolution is the file's unit, 1 µJ.
//!
//! Since CVE-2020-8694 (PLATYPUS, Linux 5.10 and stable backports) `energy_uj` is readable by
//! root only: [`PowercapMeter::open`] probes every `energy_uj` so that a permission problem is
//! reported at start, with the options, rather than at the first sample.
//!
//! Each read re-opens the file (a few µs): a zone that vanishes mid-run (driver unloaded, CPU
//! hot-unplugged) then fails with an error naming its file instead of silently reading a stale
//! descriptor.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use taskwatt_traces::{Domain, SensorKind};

use crate::meter::{Coverage, DomainRead, DomainSpec, Meter, MeterDescription, RawReading};
use crate::EnergyError;

/// Where the kernel puts the powercap tree.
pub const DEFAULT_POWERCAP_ROOT: &str = "/sys/class/powercap";

/// RAPL's update interval: the hardware refreshes the counters about every 1 ms.
pub(crate) const RAPL_UPDATE_NS: u64 = 1_000_000;

/// A RAPL meter reading the powercap sysfs tree.
#[derive(Debug)]
pub struct PowercapMeter {
    root: PathBuf,
    files: Vec<PathBuf>,
    specs: Vec<DomainSpec>,
    skipped: Vec<String>,
}

impl PowercapMeter {
    /// Opens the tree at [`DEFAULT_POWERCAP_ROOT`].
    pub fn open_default() -> Result<PowercapMeter, EnergyError> {
        Self::open(Path::new(DEFAULT_POWERCAP_ROOT))
    }

    /// Discovers the RAPL zones under `root` (a powercap directory, real or fake), checks that
    /// every `energy_uj` can be read, and returns the meter.
    pub fn open(root: &Path) -> Result<PowercapMeter, EnergyError> {
        if !root.is_dir() {
            return Err(EnergyError::NoPowercap {
                root: root.to_path_buf(),
            });
        }
        let zones = find_zones(root)?;
        if zones.is_empty() {
            return Err(EnergyError::NoRaplZones {
                root: root.to_path_buf(),
            });
        }
        // Parents first: a sub-zone's package id comes from its parent's name.
        let mut package_of_top: BTreeMap<u32, u32> = BTreeMap::new();
        let mut files = Vec::new();
        let mut specs = Vec::new();
        let mut skipped = Vec::new();
        for (key, dir) in &zones {
            let name_path = dir.join("name");
            let name = read_string(&name_path, "name")?;
            let top = key.0;
            let domain = match (key.1, parse_zone_name(&name)) {
                (None, Some(ZoneName::Package(id))) => {
                    package_of_top.insert(top, id);
                    Domain::CpuPackage { id }
                }
                (None, Some(ZoneName::Psys)) => Domain::Psys,
                (Some(_), Some(kind @ (ZoneName::Dram | ZoneName::Core | ZoneName::Uncore))) => {
                    // A sub-zone of a zone we could not name falls back to the zone index,
                    // which is the package id on every machine we know.
                    let id = package_of_top.get(&top).copied().unwrap_or(top);
                    match kind {
                        ZoneName::Dram => Domain::Dram { id },
                        ZoneName::Core => Domain::Core { id },
                        _ => Domain::Uncore { id },
                    }
                }
                _ => {
                    skipped.push(format!("{} ({name})", dir.display()));
                    continue;
                }
            };
            let energy = dir.join("energy_uj");
            read_u64(&energy, "energy_uj")?;
            let max_path = dir.join("max_energy_range_uj");
            let max = read_u64(&max_path, "max_energy_range_uj")?;
            if max == 0 {
                return Err(EnergyError::parse(
                    max_path,
                    "max_energy_range_uj",
                    "0",
                    "a positive range in uJ",
                ));
            }
            let covers = match domain {
                Domain::CpuPackage { id }
                | Domain::Dram { id }
                | Domain::Core { id }
                | Domain::Uncore { id } => Coverage::Package { id },
                Domain::Psys => Coverage::Platform,
                Domain::Gpu { index } => Coverage::Gpu { index },
            };
            specs.push(DomainSpec {
                domain,
                name: format!("{} ({name})", zone_dir_name(dir)),
                unit: "uJ".into(),
                joules_per_unit: 1e-6,
                resolution_j: 1e-6,
                wrap_range_raw: Some(max + 1),
                sensor: SensorKind::EnergyCounter,
                update_interval_ns: Some(RAPL_UPDATE_NS),
                covers,
            });
            files.push(energy);
        }
        if specs.is_empty() {
            return Err(EnergyError::NoRaplZones {
                root: root.to_path_buf(),
            });
        }
        Ok(PowercapMeter {
            root: root.to_path_buf(),
            files,
            specs,
            skipped,
        })
    }

    /// The powercap root it reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Zones found but not used (unknown names), as `path (name)`.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

impl Meter for PowercapMeter {
    fn describe(&self) -> MeterDescription {
        let names: Vec<String> = self.specs.iter().map(|s| s.domain.to_string()).collect();
        let mut description = format!(
            "RAPL via powercap sysfs at {}: {}",
            self.root.display(),
            names.join(", ")
        );
        if !self.skipped.is_empty() {
            description += &format!(" (zones not used: {})", self.skipped.join(", "));
        }
        MeterDescription {
            backend: "rapl-powercap".into(),
            simulated: false,
            description,
        }
    }

    fn domains(&self) -> &[DomainSpec] {
        &self.specs
    }

    fn read(&mut self, out: &mut [DomainRead]) {
        for (slot, file) in out.iter_mut().zip(&self.files) {
            *slot = read_u64(file, "energy_uj").map(RawReading::Counter);
        }
    }
}

/// Zone directory key: (top index, sub index).
type ZoneKey = (u32, Option<u32>);

/// Every `intel-rapl:N` and `intel-rapl:N:M` directory, top-level or nested, deduplicated by
/// name and sorted so that each parent comes before its sub-zones.
fn find_zones(root: &Path) -> Result<BTreeMap<ZoneKey, PathBuf>, EnergyError> {
    let mut zones = BTreeMap::new();
    let mut tops = Vec::new();
    for entry in read_dir(root)? {
        if let Some(key) = parse_zone_dir(&entry) {
            if key.1.is_none() {
                tops.push(entry.clone());
            }
            zones.entry(key).or_insert(entry);
        }
    }
    for top in tops {
        for entry in read_dir(&top)? {
            if let Some(key @ (_, Some(_))) = parse_zone_dir(&entry) {
                zones.entry(key).or_insert(entry);
            }
        }
    }
    Ok(zones)
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>, EnergyError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| EnergyError::from_io(dir.to_path_buf(), "powercap zone directory", e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|e| EnergyError::from_io(dir.to_path_buf(), "powercap zone directory", e))?;
        let path = entry.path();
        if path.is_dir() {
            out.push(path);
        }
    }
    Ok(out)
}

fn zone_dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `intel-rapl:3` → (3, None), `intel-rapl:3:1` → (3, Some(1)); anything else (including
/// `intel-rapl-mmio:0` and the `intel-rapl` control type) → None.
fn parse_zone_dir(path: &Path) -> Option<ZoneKey> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix("intel-rapl:")?;
    let mut parts = rest.split(':');
    let top = parts.next()?.parse().ok()?;
    let sub = match parts.next() {
        None => None,
        Some(s) => Some(s.parse().ok()?),
    };
    if parts.next().is_some() {
        return None;
    }
    Some((top, sub))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ZoneName {
    Package(u32),
    Dram,
    Core,
    Uncore,
    Psys,
}

/// A zone's `name`: `package-N` (also `package-N-die-M` on multi-die parts, mapped to package
/// N), `dram`, `core`, `uncore`, `psys`.
fn parse_zone_name(name: &str) -> Option<ZoneName> {
    match name {
        "dram" => Some(ZoneName::Dram),
        "core" => Some(ZoneName::Core),
        "uncore" => Some(ZoneName::Uncore),
        "psys" => Some(ZoneName::Psys),
        _ => {
            let rest = name.strip_prefix("package-")?;
            let id = rest.split('-').next()?.parse().ok()?;
            Some(ZoneName::Package(id))
        }
    }
}

/// Reads a small sysfs file into a stack buffer (no allocation on the sampling path).
fn read_small<'b>(
    path: &Path,
    field: &'static str,
    buf: &'b mut [u8; 64],
) -> Result<&'b str, EnergyError> {
    let mut f = File::open(path).map_err(|e| EnergyError::from_io(path.to_path_buf(), field, e))?;
    let mut n = 0;
    loop {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if n == buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(EnergyError::from_io(path.to_path_buf(), field, e)),
        }
    }
    std::str::from_utf8(&buf[..n])
        .map_err(|_| EnergyError::parse(path.to_path_buf(), field, "<not UTF-8>", "text"))
}

fn read_u64(path: &Path, field: &'static str) -> Result<u64, EnergyError> {
    let mut buf = [0u8; 64];
    let text = read_small(path, field, &mut buf)?;
    text.trim().parse().map_err(|_| {
        EnergyError::parse(
            path.to_path_buf(),
            field,
            text,
            "a non-negative integer (µJ)",
        )
    })
}

fn read_string(path: &Path, field: &'static str) -> Result<String, EnergyError> {
    let mut buf = [0u8; 64];
    Ok(read_small(path, field, &mut buf)?.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::Accumulator;
    use std::fs;
    use taskwatt_traces::Timestamp;

    /// Writes a zone directory with the given files.
    fn zone(dir: &Path, name: &str, energy: &str, max: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("name"), format!("{name}\n")).unwrap();
        fs::write(dir.join("energy_uj"), format!("{energy}\n")).unwrap();
        fs::write(dir.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
    }

    /// Two packages with dram, the way an Intel server lays it out, plus the top-level
    /// sub-zone links and an MMIO duplicate.
    fn two_socket_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let max = "262143328850";
        zone(&r.join("intel-rapl:0"), "package-0", "1000", max);
        zone(
            &r.join("intel-rapl:0/intel-rapl:0:0"),
            "dram",
            "200",
            "65712999613",
        );
        zone(&r.join("intel-rapl:1"), "package-1", "3000", max);
        zone(
            &r.join("intel-rapl:1/intel-rapl:1:0"),
            "dram",
            "400",
            "65712999613",
        );
        zone(&r.join("intel-rapl-mmio:0"), "package-0", "7", max);
        fs::create_dir_all(r.join("intel-rapl")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            r.join("intel-rapl:0/intel-rapl:0:0"),
            r.join("intel-rapl:0:0"),
        )
        .unwrap();
        t
    }

    fn read_all(m: &mut PowercapMeter) -> Vec<DomainRead> {
        let mut out: Vec<DomainRead> = (0..m.domains().len())
            .map(|_| Ok(RawReading::Counter(0)))
            .collect();
        m.read(&mut out);
        out
    }

    #[test]
    fn discovers_two_packages_with_dram() {
        let t = two_socket_tree();
        let mut m = PowercapMeter::open(t.path()).unwrap();
        let domains: Vec<Domain> = m.domains().iter().map(|d| d.domain).collect();
        assert_eq!(
            domains,
            vec![
                Domain::CpuPackage { id: 0 },
                Domain::Dram { id: 0 },
                Domain::CpuPackage { id: 1 },
                Domain::Dram { id: 1 },
            ]
        );
        let d1 = &m.domains()[3];
        assert_eq!(d1.covers, Coverage::Package { id: 1 });
        assert_eq!(d1.wrap_range_raw, Some(65_712_999_614));
        assert_eq!(d1.unit, "uJ");
        assert!(d1.name.contains("intel-rapl:1:0") && d1.name.contains("dram"));
        let reads: Vec<u64> = read_all(&mut m)
            .into_iter()
            .map(|r| match r.unwrap() {
                RawReading::Counter(v) => v,
                p => panic!("{p:?}"),
            })
            .collect();
        assert_eq!(reads, vec![1000, 200, 3000, 400]);
        let d = m.describe();
        assert_eq!(d.backend, "rapl-powercap");
        assert!(!d.simulated);
        assert!(d.description.contains("package-1"), "{}", d.description);
    }

    #[test]
    fn amd_psys_core_and_unknown_zones() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        zone(&r.join("intel-rapl:0"), "package-0", "1", "100");
        zone(&r.join("intel-rapl:0/intel-rapl:0:0"), "core", "1", "100");
        zone(&r.join("intel-rapl:0/intel-rapl:0:1"), "uncore", "1", "100");
        zone(&r.join("intel-rapl:1"), "psys", "1", "100");
        zone(&r.join("intel-rapl:2"), "mystery", "1", "100");
        let m = PowercapMeter::open(r).unwrap();
        let domains: Vec<Domain> = m.domains().iter().map(|d| d.domain).collect();
        assert_eq!(
            domains,
            vec![
                Domain::CpuPackage { id: 0 },
                Domain::Core { id: 0 },
                Domain::Uncore { id: 0 },
                Domain::Psys,
            ]
        );
        assert_eq!(m.domains()[3].covers, Coverage::Platform);
        assert_eq!(m.skipped().len(), 1);
        assert!(m.skipped()[0].contains("mystery"));
        assert!(m.describe().description.contains("not used"));
    }

    #[test]
    fn a_wrap_is_undone_by_the_shared_unwrapper() {
        let t = two_socket_tree();
        let r = t.path();
        fs::write(r.join("intel-rapl:0/energy_uj"), "262143328000\n").unwrap();
        let mut m = PowercapMeter::open(r).unwrap();
        let mut acc = Accumulator::for_domain(&m.domains()[0]);
        let first = read_all(&mut m).remove(0).unwrap();
        acc.update(Timestamp(0), first);
        // 850 uJ to the top, the value 0 itself (1 uJ), then 149 more.
        fs::write(r.join("intel-rapl:0/energy_uj"), "149\n").unwrap();
        let second = read_all(&mut m).remove(0).unwrap();
        let j = acc.update(Timestamp(1), second);
        assert!((j - 1000e-6).abs() < 1e-12, "{j}");
        assert_eq!(acc.wraps(), 1);
    }

    #[test]
    fn missing_energy_uj_names_the_file() {
        let t = two_socket_tree();
        fs::remove_file(t.path().join("intel-rapl:1/energy_uj")).unwrap();
        let e = PowercapMeter::open(t.path()).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("intel-rapl:1/energy_uj"), "{m}");
        assert!(!e.is_unavailable());
    }

    #[test]
    fn garbage_contents_are_a_parse_error_naming_file_and_contents() {
        let t = two_socket_tree();
        fs::write(t.path().join("intel-rapl:0/max_energy_range_uj"), "lots\n").unwrap();
        let e = PowercapMeter::open(t.path()).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("intel-rapl:0/max_energy_range_uj") && m.contains("\"lots\""),
            "{m}"
        );
        // And at read time.
        let t = two_socket_tree();
        let mut meter = PowercapMeter::open(t.path()).unwrap();
        fs::write(t.path().join("intel-rapl:1/energy_uj"), "-5\n").unwrap();
        let reads = read_all(&mut meter);
        let err = reads[2].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("intel-rapl:1/energy_uj") && err.contains("\"-5\""),
            "{err}"
        );
        assert!(reads[0].is_ok());
    }

    #[test]
    fn a_zone_that_vanishes_mid_run_fails_alone_naming_its_file() {
        let t = two_socket_tree();
        let mut m = PowercapMeter::open(t.path()).unwrap();
        assert!(read_all(&mut m).iter().all(|r| r.is_ok()));
        fs::remove_dir_all(t.path().join("intel-rapl:1")).unwrap();
        let reads = read_all(&mut m);
        assert!(reads[0].is_ok() && reads[1].is_ok());
        let err = reads[2].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("intel-rapl:1/energy_uj") && err.contains("vanished"),
            "{err}"
        );
        assert!(reads[3].is_err());
    }

    #[cfg(unix)]
    #[test]
    fn permission_denied_names_the_options() {
        use std::os::unix::fs::PermissionsExt;
        let t = two_socket_tree();
        let f = t.path().join("intel-rapl:0/energy_uj");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o000)).unwrap();
        if File::open(&f).is_ok() {
            // Root bypasses file permissions; the mapping itself is unit-tested in error.rs
            // (`permission_denied_on_energy_uj_names_every_option_and_the_risk`).
            println!("skipped: running as root, chmod 000 does not deny reads");
            return;
        }
        let e = PowercapMeter::open(t.path()).unwrap_err();
        assert!(matches!(e, EnergyError::RaplPermission { .. }), "{e}");
        let m = e.to_string();
        assert!(
            m.contains("intel-rapl:0/energy_uj") && m.contains("CAP_PERFMON"),
            "{m}"
        );
    }

    #[test]
    fn no_powercap_directory_at_all() {
        let t = tempfile::tempdir().unwrap();
        let e = PowercapMeter::open(&t.path().join("powercap")).unwrap_err();
        assert!(e.is_unavailable());
        let m = e.to_string();
        assert!(
            m.contains("CONFIG_POWERCAP") && m.contains("intel_rapl_common") && m.contains("VM"),
            "{m}"
        );
    }

    #[test]
    fn an_empty_powercap_directory_has_no_rapl() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir(t.path().join("intel-rapl")).unwrap();
        let e = PowercapMeter::open(t.path()).unwrap_err();
        assert!(matches!(e, EnergyError::NoRaplZones { .. }), "{e}");
        assert!(e.is_unavailable());
    }

    #[test]
    fn zone_names_and_dirs_parse() {
        assert_eq!(parse_zone_name("package-3"), Some(ZoneName::Package(3)));
        assert_eq!(
            parse_zone_name("package-1-die-1"),
            Some(ZoneName::Package(1))
        );
        assert_eq!(parse_zone_name("packages"), None);
        assert_eq!(
            parse_zone_dir(Path::new("/x/intel-rapl:2:1")),
            Some((2, Some(1)))
        );
        assert_eq!(parse_zone_dir(Path::new("/x/intel-rapl-mmio:0")), None);
        assert_eq!(parse_zone_dir(Path::new("/x/intel-rapl")), None);
        assert_eq!(parse_zone_dir(Path::new("/x/intel-rapl:1:2:3")), None);
    }
}
