//! Machine topology: which processing units (PUs) exist, and their core, package and NUMA
//! node.
//!
//! Sources, in order: hwloc through the `hwlocality` crate (feature `hwloc`, on by default;
//! hwloc2 is unmaintained and panics on NUMA queries), then Linux's /sys, then a flat
//! fallback (every PU on package 0) from `std::thread::available_parallelism`. Workers are
//! pinned to PUs chosen one per physical core first, so that 2 workers on a machine with
//! hyper-threads land on 2 cores.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use taskwatt_traces::TopologyInfo;

/// One processing unit (hardware thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pu {
    /// OS index (what `sched_setaffinity` and core_affinity take).
    pub os_index: u32,
    /// Physical core id within its package, where known.
    pub core: Option<u32>,
    /// Package (socket) id.
    pub package: u32,
    /// NUMA node, where known.
    pub numa: Option<u32>,
}

/// The machine's processing units and where they came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// `hwloc`, `sysfs` or `fallback`.
    pub source: &'static str,
    /// Every PU, by OS index.
    pub pus: Vec<Pu>,
}

impl Topology {
    /// Discovers the topology of this machine.
    pub fn discover() -> Topology {
        #[cfg(feature = "hwloc")]
        if let Some(t) = from_hwloc() {
            return t;
        }
        from_sysfs(Path::new("/sys/devices/system")).unwrap_or_else(fallback)
    }

    /// Summary for the trace.
    pub fn info(&self) -> TopologyInfo {
        let packages: BTreeSet<u32> = self.pus.iter().map(|p| p.package).collect();
        let cores: BTreeSet<(u32, Option<u32>, u32)> = self
            .pus
            .iter()
            .map(|p| {
                (
                    p.package,
                    p.core,
                    if p.core.is_none() { p.os_index } else { 0 },
                )
            })
            .collect();
        let numa: BTreeSet<u32> = self.pus.iter().filter_map(|p| p.numa).collect();
        TopologyInfo {
            source: self.source.to_string(),
            packages: packages.len() as u32,
            cores: cores.len() as u32,
            pus: self.pus.len() as u32,
            numa_nodes: numa.len().max(1) as u32,
        }
    }

    /// The PUs to pin `n` workers to, restricted to `allowed` OS indices (the process's
    /// affinity mask): one per physical core first, then second hyper-threads; wraps around
    /// when `n` exceeds the PUs.
    pub fn placement(&self, n: usize, allowed: &[u32]) -> Vec<Pu> {
        let usable: Vec<&Pu> = self
            .pus
            .iter()
            .filter(|p| allowed.is_empty() || allowed.contains(&p.os_index))
            .collect();
        if usable.is_empty() || n == 0 {
            return Vec::new();
        }
        // Rank each PU by its position among the PUs of its core: 0 for the first thread.
        let mut seen: BTreeMap<(u32, Option<u32>), usize> = BTreeMap::new();
        let mut ranked: Vec<(usize, u32, &Pu)> = usable
            .iter()
            .map(|p| {
                let key = (p.package, p.core.or(Some(u32::MAX - p.os_index)));
                let r = seen.entry(key).or_insert(0);
                let rank = *r;
                *r += 1;
                (rank, p.os_index, *p)
            })
            .collect();
        ranked.sort_by_key(|&(rank, os, _)| (rank, os));
        (0..n).map(|i| ranked[i % ranked.len()].2.clone()).collect()
    }
}

#[cfg(feature = "hwloc")]
fn from_hwloc() -> Option<Topology> {
    use hwlocality::object::types::ObjectType;
    let topo = hwlocality::Topology::new().ok()?;
    let numa_nodes: Vec<(u32, Vec<usize>)> = topo
        .objects_with_type(ObjectType::NUMANode)
        .filter_map(|n| {
            let set = n.cpuset()?;
            Some((
                n.os_index()? as u32,
                set.iter_set().map(usize::from).collect(),
            ))
        })
        .collect();
    let mut pus: Vec<Pu> = topo
        .objects_with_type(ObjectType::PU)
        .filter_map(|pu| {
            let os = pu.os_index()?;
            let package = pu
                .first_ancestor_with_type(ObjectType::Package)
                .and_then(|p| p.os_index())
                .unwrap_or(0) as u32;
            let core = pu
                .first_ancestor_with_type(ObjectType::Core)
                .and_then(|c| c.os_index())
                .map(|c| c as u32);
            let numa = numa_nodes
                .iter()
                .find(|(_, cpus)| cpus.contains(&os))
                .map(|(id, _)| *id);
            Some(Pu {
                os_index: os as u32,
                core,
                package,
                numa,
            })
        })
        .collect();
    if pus.is_empty() {
        return None;
    }
    pus.sort_by_key(|p| p.os_index);
    Some(Topology {
        source: "hwloc",
        pus,
    })
}

/// Reads `<root>/cpu/cpuN/topology/{physical_package_id,core_id}` and
/// `<root>/node/nodeN/cpulist`.
pub fn from_sysfs(root: &Path) -> Option<Topology> {
    let mut pus = Vec::new();
    for entry in std::fs::read_dir(root.join("cpu")).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        let Some(idx) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let topo = entry.path().join("topology");
        let read = |f: &str| -> Option<u32> {
            std::fs::read_to_string(topo.join(f))
                .ok()?
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .map(|v| v as u32)
        };
        pus.push(Pu {
            os_index: idx,
            core: read("core_id"),
            package: read("physical_package_id").unwrap_or(0),
            numa: None,
        });
    }
    if pus.is_empty() {
        return None;
    }
    if let Ok(nodes) = std::fs::read_dir(root.join("node")) {
        for node in nodes.flatten() {
            let name = node.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(list) = std::fs::read_to_string(node.path().join("cpulist")) else {
                continue;
            };
            for cpu in parse_cpulist(&list) {
                if let Some(p) = pus.iter_mut().find(|p| p.os_index == cpu) {
                    p.numa = Some(id);
                }
            }
        }
    }
    pus.sort_by_key(|p| p.os_index);
    Some(Topology {
        source: "sysfs",
        pus,
    })
}

fn fallback() -> Topology {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    Topology {
        source: "fallback",
        pus: (0..n)
            .map(|i| Pu {
                os_index: i,
                core: Some(i),
                package: 0,
                numa: None,
            })
            .collect(),
    }
}

/// Parses a Linux cpulist such as `0-3,8,10-11`; malformed parts are skipped.
pub(crate) fn parse_cpulist(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(v) = part.trim().parse() {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// The memory available to a new program, in bytes (Linux's `MemAvailable`), if known: to
/// refuse a graph whose data would not fit before allocating any of it.
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn sysfs_tree_with_two_packages_and_smt() {
        let d = tempfile::tempdir().unwrap();
        // 2 packages x 2 cores x 2 threads: cpu0..3 first threads, cpu4..7 siblings.
        for cpu in 0..8u32 {
            let t = d.path().join(format!("cpu/cpu{cpu}/topology"));
            write(
                &t.join("physical_package_id"),
                &format!("{}\n", (cpu % 4) / 2),
            );
            write(&t.join("core_id"), &format!("{}\n", cpu % 2));
        }
        write(&d.path().join("node/node0/cpulist"), "0-1,4-5\n");
        write(&d.path().join("node/node1/cpulist"), "2-3,6-7\n");
        std::fs::create_dir_all(d.path().join("cpu/cpufreq")).unwrap();
        let t = from_sysfs(d.path()).unwrap();
        assert_eq!(t.source, "sysfs");
        assert_eq!(t.pus.len(), 8);
        assert_eq!(t.pus[2].package, 1);
        assert_eq!(t.pus[6].numa, Some(1));
        let info = t.info();
        assert_eq!(
            (info.packages, info.cores, info.pus, info.numa_nodes),
            (2, 4, 8, 2)
        );
        // 4 workers go to the 4 physical cores before any sibling thread.
        let place: Vec<u32> = t.placement(4, &[]).iter().map(|p| p.os_index).collect();
        assert_eq!(place, vec![0, 1, 2, 3]);
        let place: Vec<u32> = t.placement(5, &[]).iter().map(|p| p.os_index).collect();
        assert_eq!(place, vec![0, 1, 2, 3, 4]);
        // Only the allowed PUs are used.
        let place: Vec<u32> = t.placement(2, &[5, 6]).iter().map(|p| p.os_index).collect();
        assert_eq!(place, vec![5, 6]);
    }

    #[test]
    fn cpulist_parsing() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<u32>::new());
        assert_eq!(parse_cpulist("x,2"), vec![2]);
    }

    #[test]
    fn this_machine_has_a_topology() {
        let t = Topology::discover();
        assert!(!t.pus.is_empty());
        assert!(t.info().pus as usize >= 1);
    }
}
