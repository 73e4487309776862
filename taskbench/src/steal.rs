//! CPU time the hypervisor gave to other guests while a run was timed ("steal").
//!
//! On a virtual machine the host may run other guests on our virtual CPUs' physical
//! cores. The guest cannot see that time, except as the `steal` column of `/proc/stat`
//! (filled in from the paravirtual steal clock). A run timed while the host stole a third
//! of the CPU time looks a third slower: on the development VM, sweeps minutes apart gave
//! rayon's METG from 3.4 to 60 µs, with the host taking 0 to 38 % of the CPU time. The
//! METG sweep therefore reads the counters around every run and repeats a run during
//! which the host stole more than a given share of the CPU time (see `metg::sweep`).
//!
//! `/proc/stat` counts in clock ticks (10 ms): a run shorter than a tick that meets any
//! steal at all shows a whole tick of it, so short runs are repeated on any steal, long
//! ones above the share. On bare metal, or where the file cannot be read, steal reads as
//! zero or unknown and nothing is repeated.

use std::path::Path;

/// The machine's CPU time counters, summed over CPUs, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTicks {
    /// Ticks the host gave to other guests.
    pub steal: u64,
    /// All ticks (user, nice, system, idle, iowait, irq, softirq, steal).
    pub total: u64,
}

impl CpuTicks {
    /// The counters of this machine (`/proc/stat`), or `None` where they cannot be read.
    pub fn read() -> Option<CpuTicks> {
        CpuTicks::read_from(Path::new("/proc/stat"))
    }

    /// The counters in a `/proc/stat`-format file.
    pub fn read_from(path: &Path) -> Option<CpuTicks> {
        CpuTicks::parse(&std::fs::read_to_string(path).ok()?)
    }

    /// Parses the aggregate `cpu` line of `/proc/stat`. Kernels before 2.6.11 have no
    /// steal column: steal is then zero.
    pub fn parse(stat: &str) -> Option<CpuTicks> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if fields.len() < 4 {
            return None;
        }
        Some(CpuTicks {
            steal: fields.get(7).copied().unwrap_or(0),
            total: fields.iter().sum(),
        })
    }

    /// The share of the CPU time stolen between `self` and `later`: 0 when no tick went
    /// to steal; otherwise stolen ticks over all ticks, at least one tick's worth of
    /// either (a run shorter than a tick that met steal reads as mostly stolen).
    pub fn stolen_since(self, later: CpuTicks) -> f64 {
        let steal = later.steal.saturating_sub(self.steal);
        if steal == 0 {
            return 0.0;
        }
        let total = later.total.saturating_sub(self.total).max(steal);
        steal as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3637003 112252 210678 1590340 4375 0 2118 39518 0 0\n\
                        cpu0 1830098 56248 117505 734697 2543 0 811 18301 0 0\n\
                        intr 123\n";

    #[test]
    fn parses_the_aggregate_line() {
        let t = CpuTicks::parse(STAT).unwrap();
        assert_eq!(t.steal, 39518);
        assert_eq!(
            t.total,
            3637003 + 112252 + 210678 + 1590340 + 4375 + 2118 + 39518
        );
        // An old kernel without the steal column.
        let old = CpuTicks::parse("cpu 10 0 5 85\n").unwrap();
        assert_eq!((old.steal, old.total), (0, 100));
        assert_eq!(CpuTicks::parse("cpu0 1 2 3 4\n"), None, "no aggregate line");
        assert_eq!(CpuTicks::parse("cpu 1 x 3 4\n"), None, "not a number");
    }

    #[test]
    fn the_stolen_share_is_of_all_ticks_and_at_least_one_tick() {
        let a = CpuTicks {
            steal: 100,
            total: 1000,
        };
        let same = CpuTicks { ..a };
        assert_eq!(a.stolen_since(same), 0.0);
        let quarter = CpuTicks {
            steal: 150,
            total: 1200,
        };
        assert_eq!(a.stolen_since(quarter), 0.25);
        // A short run: one tick of steal and no other tick counted yet.
        let short = CpuTicks {
            steal: 101,
            total: 1001,
        };
        assert_eq!(a.stolen_since(short), 1.0);
        // Counters that went back (another reader's file, a reset) read as no steal.
        assert_eq!(quarter.stolen_since(a), 0.0);
    }

    #[test]
    fn reads_a_stat_file_and_reports_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, STAT).unwrap();
        assert_eq!(CpuTicks::read_from(&p).unwrap().steal, 39518);
        assert_eq!(CpuTicks::read_from(&dir.path().join("missing")), None);
    }
}
