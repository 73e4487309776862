//! History-based performance models (after StarPU's `STARPU_HISTORY_BASED` and
//! `STARPU_NL_REGRESSION_BASED` models): per (codelet, architecture, footprint), the
//! count, mean and variance of the measured durations, and per (codelet, architecture) a
//! power law `t = a · size^b` fitted on the footprints seen, for the sizes not seen.
//!
//! A runtime built with [`RuntimeBuilder::perf_models`](crate::RuntimeBuilder::perf_models)
//! records every successful task's duration (each worker in a table of its own, so that
//! recording takes no shared lock), and merges them into the directory's models when it
//! shuts down. The directory holds one file, `models.json`, rewritten whole (to a temporary
//! file, then renamed) under an exclusive lock on `models.lock`: several processes may
//! save at once, and each one's executions are kept.
//!
//! The directory is `$TASKWATT_PERFMODEL_DIR` if set, else `$XDG_CACHE_HOME/taskwatt/perfmodels`,
//! else `~/.cache/taskwatt/perfmodels` ([`PerfModels::default_dir`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use taskwatt_traces::Arch;

/// The environment variable naming the models' directory.
pub const PERFMODEL_DIR_ENV: &str = "TASKWATT_PERFMODEL_DIR";

/// The file format's version, written in every file; a file of another version is refused.
const VERSION: u32 = 1;

/// A model could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PerfModelError {
    /// A file could not be read, written, locked or renamed.
    #[error("performance models: {what} {}: {source}; check the directory's permissions, or point {PERFMODEL_DIR_ENV} elsewhere", path.display())]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// `models.json` is not a model file of this version.
    #[error("performance models: {} is not a taskwatt model file of version {VERSION}: {reason}; remove it (`taskwatt perfmodel clear`) to start afresh", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No directory could be chosen.
    #[error("performance models: no directory: set {PERFMODEL_DIR_ENV}, XDG_CACHE_HOME or HOME")]
    NoDirectory,
}

/// Durations of one (codelet, architecture, footprint): Welford's running moments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Executions.
    pub count: u64,
    /// Mean duration, ns.
    pub mean_ns: f64,
    /// Sum of squared deviations from the mean, ns² (the variance is `m2 / (count - 1)`).
    pub m2: f64,
}

impl History {
    /// Adds one duration.
    #[inline]
    pub fn add(&mut self, ns: f64) {
        self.count += 1;
        let d = ns - self.mean_ns;
        self.mean_ns += d / self.count as f64;
        self.m2 += d * (ns - self.mean_ns);
    }

    /// The moments of both sets of durations (Chan et al.'s parallel combination).
    pub fn merge(&mut self, o: &History) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *o;
            return;
        }
        let n = (self.count + o.count) as f64;
        let d = o.mean_ns - self.mean_ns;
        self.mean_ns += d * o.count as f64 / n;
        self.m2 += o.m2 + d * d * self.count as f64 * o.count as f64 / n;
        self.count += o.count;
    }

    /// Sample standard deviation, ns (0 with fewer than two executions).
    pub fn std_ns(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / (self.count - 1) as f64).max(0.0).sqrt()
        }
    }
}

/// One history entry of a codelet.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The architecture.
    pub arch: Arch,
    /// The task's footprint (the bytes of its data handles).
    pub footprint: u64,
    /// Its durations.
    #[serde(flatten)]
    pub history: History,
}

/// Where a prediction comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The history of this very footprint.
    History,
    /// The power law fitted on the other footprints.
    Regression,
}

/// A predicted duration.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DurationPrediction {
    /// Expected duration, ns.
    pub mean_ns: f64,
    /// Its standard deviation, ns (0 from the regression).
    pub std_ns: f64,
    /// Executions behind it.
    pub count: u64,
    /// Where it comes from.
    pub basis: Basis,
}

/// Executions of one footprint needed before its history is trusted alone (StarPU
/// calibrates with 10).
pub const CALIBRATED: u64 = 10;

/// The models of every codelet: `codelet -> entries`, sorted by (architecture, footprint).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerfModels {
    version: u32,
    /// Per codelet name.
    pub codelets: BTreeMap<String, Vec<Entry>>,
}

impl PerfModels {
    /// No model.
    pub fn new() -> PerfModels {
        PerfModels {
            version: VERSION,
            codelets: BTreeMap::new(),
        }
    }

    /// The default directory (see the module docs).
    pub fn default_dir() -> Result<PathBuf, PerfModelError> {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        if let Some(d) = env(PERFMODEL_DIR_ENV) {
            return Ok(d);
        }
        if let Some(c) = env("XDG_CACHE_HOME") {
            return Ok(c.join("taskwatt").join("perfmodels"));
        }
        env("HOME")
            .map(|h| h.join(".cache").join("taskwatt").join("perfmodels"))
            .ok_or(PerfModelError::NoDirectory)
    }

    /// The models saved in `dir` (none if it has no model file).
    pub fn load(dir: &Path) -> Result<PerfModels, PerfModelError> {
        let path = dir.join("models.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PerfModels::new()),
            Err(source) => {
                return Err(PerfModelError::Io {
                    what: "cannot read",
                    path,
                    source,
                })
            }
        };
        let m: PerfModels = serde_json::from_str(&text).map_err(|e| PerfModelError::Format {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if m.version != VERSION {
            return Err(PerfModelError::Format {
                path,
                reason: format!("it is of version {}", m.version),
            });
        }
        // A duration is finite and non-negative, its spread too: a negative mean was
        // taken as it was, and dmda placed tasks by it.
        for (codelet, entries) in &m.codelets {
            for e in entries {
                let h = &e.history;
                if !(h.mean_ns.is_finite() && h.mean_ns >= 0.0 && h.m2.is_finite() && h.m2 >= 0.0) {
                    return Err(PerfModelError::Format {
                        path,
                        reason: format!(
                            "codelet {codelet} ({}, footprint {}): mean_ns = {:?}, m2 = {:?}: \
                             a duration's mean and spread are finite and non-negative; \
                             remove the entry, or `taskwatt perfmodel clear`",
                            e.arch.name(),
                            e.footprint,
                            h.mean_ns,
                            h.m2
                        ),
                    });
                }
            }
        }
        Ok(m)
    }

    /// Adds one duration.
    pub fn add(&mut self, codelet: &str, arch: Arch, footprint: u64, ns: f64) {
        self.entry(codelet, arch, footprint).add(ns);
    }

    /// The history of (`codelet`, `arch`, `footprint`), made empty if there is none.
    pub(crate) fn entry(&mut self, codelet: &str, arch: Arch, footprint: u64) -> &mut History {
        let v = self.codelets.entry(codelet.to_string()).or_default();
        let i = match v
            .binary_search_by(|e| (e.arch.index(), e.footprint).cmp(&(arch.index(), footprint)))
        {
            Ok(i) => i,
            Err(i) => {
                v.insert(
                    i,
                    Entry {
                        arch,
                        footprint,
                        history: History::default(),
                    },
                );
                i
            }
        };
        &mut v[i].history
    }

    /// Adds every execution of `other`.
    pub fn merge(&mut self, other: &PerfModels) {
        for (name, entries) in &other.codelets {
            for e in entries {
                self.entry(name, e.arch, e.footprint).merge(&e.history);
            }
        }
    }

    /// The expected duration of a task of `codelet` on `arch` with `footprint`: its
    /// history once it has [`CALIBRATED`] executions, else the power law fitted on the
    /// calibrated footprints of that architecture (two sizes at least), else the history
    /// however short, else none.
    pub fn predict(&self, codelet: &str, arch: Arch, footprint: u64) -> Option<DurationPrediction> {
        let entries = self.codelets.get(codelet)?;
        let exact = entries
            .iter()
            .find(|e| e.arch == arch && e.footprint == footprint);
        let from_history = |e: &Entry| DurationPrediction {
            mean_ns: e.history.mean_ns,
            std_ns: e.history.std_ns(),
            count: e.history.count,
            basis: Basis::History,
        };
        if let Some(e) = exact.filter(|e| e.history.count >= CALIBRATED) {
            return Some(from_history(e));
        }
        if let Some((a, b, n)) = self.regression(codelet, arch) {
            return Some(DurationPrediction {
                mean_ns: a * (footprint.max(1) as f64).powf(b),
                std_ns: 0.0,
                count: n,
                basis: Basis::Regression,
            });
        }
        exact.filter(|e| e.history.count > 0).map(from_history)
    }

    /// `(a, b, executions)` of `t = a · size^b`, least squares in log-log space over the
    /// calibrated footprints of `arch` (weighted by their counts), if there are two sizes.
    /// A fitted exponent below 0 (larger data ran shorter: sizes too close for the noise,
    /// or a size-independent task) is not extrapolated: the law is then one duration for
    /// every size, the executions' geometric mean (`b = 0`;
    /// [`PerfModels::fitted_exponent`] keeps the fitted one).
    pub fn regression(&self, codelet: &str, arch: Arch) -> Option<(f64, f64, u64)> {
        let (mx, my, b, w) = self.log_log_fit(codelet, arch)?;
        if b < 0.0 {
            return Some((my.exp(), 0.0, w as u64));
        }
        Some(((my - b * mx).exp(), b, w as u64))
    }

    /// The exponent the log-log least squares gives, before [`PerfModels::regression`]
    /// takes a negative one for 0.
    pub fn fitted_exponent(&self, codelet: &str, arch: Arch) -> Option<f64> {
        self.log_log_fit(codelet, arch).map(|f| f.2)
    }

    /// `(mean ln size, mean ln t, slope, executions)`, weighted by the counts.
    fn log_log_fit(&self, codelet: &str, arch: Arch) -> Option<(f64, f64, f64, f64)> {
        let pts: Vec<(f64, f64, f64)> = self
            .codelets
            .get(codelet)?
            .iter()
            .filter(|e| {
                e.arch == arch
                    && e.history.count >= CALIBRATED
                    && e.footprint > 0
                    && e.history.mean_ns > 0.0
            })
            .map(|e| {
                (
                    (e.footprint as f64).ln(),
                    e.history.mean_ns.ln(),
                    e.history.count as f64,
                )
            })
            .collect();
        if pts.len() < 2 {
            return None;
        }
        let w: f64 = pts.iter().map(|p| p.2).sum();
        let mx = pts.iter().map(|p| p.0 * p.2).sum::<f64>() / w;
        let my = pts.iter().map(|p| p.1 * p.2).sum::<f64>() / w;
        let sxx: f64 = pts.iter().map(|p| p.2 * (p.0 - mx).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let sxy: f64 = pts.iter().map(|p| p.2 * (p.0 - mx) * (p.1 - my)).sum();
        Some((mx, my, sxy / sxx, w))
    }

    /// Whether `codelet` still needs executions on `arch` at `footprint` before its
    /// history is trusted (automatic calibration: a scheduler explores it).
    pub fn needs_calibration(&self, codelet: &str, arch: Arch, footprint: u64) -> bool {
        self.codelets.get(codelet).is_none_or(|v| {
            !v.iter().any(|e| {
                e.arch == arch && e.footprint == footprint && e.history.count >= CALIBRATED
            })
        })
    }

    /// Merges `self` into the models saved in `dir` (made if needed), under the directory's
    /// lock: what another process saved meanwhile is kept.
    pub fn save_merged(&self, dir: &Path) -> Result<PerfModels, PerfModelError> {
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| PerfModelError::Io { what, path, source }
        };
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
        let lock = lock_dir(dir)?;
        let mut all = PerfModels::load(dir)?;
        all.merge(self);
        all.write(dir)?;
        drop(lock);
        Ok(all)
    }

    /// Writes `dir/models.json` through a temporary file renamed over it (the caller
    /// holds the lock): an error mid-write leaves the previous file whole.
    fn write(&self, dir: &Path) -> Result<(), PerfModelError> {
        let path = dir.join("models.json");
        let tmp = dir.join(format!("models.json.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|source| {
            let _ = std::fs::remove_file(&tmp);
            PerfModelError::Io {
                what: "cannot write",
                path,
                source,
            }
        })
    }

    /// Removes the models of `codelet` (all of them with `None`) from `dir`, under its
    /// lock. Returns how many codelets were removed.
    pub fn clear(dir: &Path, codelet: Option<&str>) -> Result<usize, PerfModelError> {
        // A file given as the directory: "removed 0" said nothing was wrong.
        if dir.exists() && !dir.is_dir() {
            return Err(PerfModelError::Io {
                what: "cannot clear the models in",
                path: dir.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    "it is a file, not the models' directory",
                ),
            });
        }
        if !dir.join("models.json").exists() {
            return Ok(0);
        }
        let _lock = lock_dir(dir)?;
        let mut all = PerfModels::load(dir)?;
        let removed = match codelet {
            Some(c) => usize::from(all.codelets.remove(c).is_some()),
            None => std::mem::take(&mut all.codelets).len(),
        };
        all.write(dir)?;
        Ok(removed)
    }
}

/// The directory's lock file, opened and locked exclusively (released when dropped).
pub(crate) fn lock_dir(dir: &Path) -> Result<std::fs::File, PerfModelError> {
    let path = dir.join("models.lock");
    let io = |what| {
        let path = path.clone();
        move |source| PerfModelError::Io { what, path, source }
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io("cannot open"))?;
    f.lock().map_err(io("cannot lock"))?;
    Ok(f)
}

/// What one worker measured: (codelet id, architecture index, footprint) -> durations.
/// The first execution of each key on each worker is left out: it pays the cold caches,
/// page faults and lazy initialisation (a kernel's first call) that later ones do not,
/// and a single such outlier moved potrf's mean by a factor of two in a 16-task run.
#[derive(Default)]
pub(crate) struct WorkerHistory(
    pub(crate) std::collections::HashMap<(u32, u8, u64), (bool, History)>,
);

impl WorkerHistory {
    /// Records one duration (the first of its key only marks the key seen).
    #[inline]
    pub(crate) fn add(&mut self, key: (u32, u8, u64), ns: f64) {
        let (seen, h) = self.0.entry(key).or_default();
        if *seen {
            h.add(ns);
        } else {
            *seen = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welford_merge_matches_one_pass() {
        let xs = [3.0, 5.0, 4.0, 10.0, 2.0, 7.5];
        let mut one = History::default();
        xs.iter().for_each(|&x| one.add(x));
        let (mut a, mut b) = (History::default(), History::default());
        xs[..2].iter().for_each(|&x| a.add(x));
        xs[2..].iter().for_each(|&x| b.add(x));
        a.merge(&b);
        assert_eq!(a.count, one.count);
        assert!((a.mean_ns - one.mean_ns).abs() < 1e-12);
        assert!((a.std_ns() - one.std_ns()).abs() < 1e-12);
    }

    #[test]
    fn history_then_regression_for_unseen_sizes() {
        let mut m = PerfModels::new();
        // t = 2 · size^1.5, calibrated at two sizes.
        for size in [100u64, 400] {
            for _ in 0..CALIBRATED {
                m.add("k", Arch::Cpu, size, 2.0 * (size as f64).powf(1.5));
            }
        }
        let p = m.predict("k", Arch::Cpu, 400).unwrap();
        assert_eq!(p.basis, Basis::History);
        assert!((p.mean_ns - 16_000.0).abs() < 1e-6);
        let p = m.predict("k", Arch::Cpu, 1600).unwrap();
        assert_eq!(p.basis, Basis::Regression);
        assert!(
            (p.mean_ns / (2.0 * 1600f64.powf(1.5)) - 1.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!(m.predict("k", Arch::Gpu, 400).is_none());
        assert!(m.needs_calibration("k", Arch::Gpu, 400));
        assert!(!m.needs_calibration("k", Arch::Cpu, 100));
    }

    #[test]
    fn a_law_whose_larger_data_ran_shorter_is_one_duration_for_every_size() {
        // A stencil's halo tiles and inner tiles: noise makes the larger ones faster. The
        // fitted exponent (-0.5 here) would predict ever shorter tasks for larger data.
        let mut m = PerfModels::new();
        for (size, ns) in [(100u64, 1000.0), (400, 500.0)] {
            for _ in 0..CALIBRATED {
                m.add("heat", Arch::Cpu, size, ns);
            }
        }
        assert!((m.fitted_exponent("heat", Arch::Cpu).unwrap() + 0.5).abs() < 1e-9);
        let (a, b, _) = m.regression("heat", Arch::Cpu).unwrap();
        assert_eq!(b, 0.0);
        // The geometric mean of the two sizes' durations, whatever the size.
        assert!((a - (1000.0f64 * 500.0).sqrt()).abs() < 1e-6, "{a}");
        let p = m.predict("heat", Arch::Cpu, 1_000_000).unwrap();
        assert!((p.mean_ns - a).abs() < 1e-6);
    }

    #[test]
    fn saves_merge_what_others_saved_and_clear_removes() {
        let d = tempfile::tempdir().unwrap();
        let mut a = PerfModels::new();
        a.add("x", Arch::Cpu, 8, 100.0);
        let mut b = PerfModels::new();
        b.add("x", Arch::Cpu, 8, 300.0);
        b.add("y", Arch::Gpu, 8, 50.0);
        // Two processes' saves, at once.
        std::thread::scope(|s| {
            s.spawn(|| a.save_merged(d.path()).unwrap());
            s.spawn(|| b.save_merged(d.path()).unwrap());
        });
        let m = PerfModels::load(d.path()).unwrap();
        let h = &m.codelets["x"][0].history;
        assert_eq!((h.count, h.mean_ns), (2, 200.0));
        assert_eq!(m.codelets["y"][0].arch, Arch::Gpu);
        // `clear` writes a new file renamed over the old one, never the old one in place
        // (issue 29: an error mid-write emptied it): the inode changes, no temporary
        // is left.
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let before = ino(&d.path().join("models.json"));
        assert_eq!(PerfModels::clear(d.path(), Some("y")).unwrap(), 1);
        assert_ne!(ino(&d.path().join("models.json")), before);
        assert!(std::fs::read_dir(d.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp")));
        assert!(!PerfModels::load(d.path())
            .unwrap()
            .codelets
            .contains_key("y"));
        std::fs::write(
            d.path().join("models.json"),
            "{\"version\":9,\"codelets\":{}}",
        )
        .unwrap();
        let e = PerfModels::load(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("version 9") && e.contains("perfmodel clear"),
            "{e}"
        );
        // A file given as the directory is an error, not "removed 0".
        let file = d.path().join("models.json");
        let e = PerfModels::clear(&file, None).unwrap_err().to_string();
        assert!(e.contains("not the models' directory"), "{e}");
        // A negative mean (it was used as it was, and dmda placed tasks by it).
        let mut m = PerfModels::new();
        m.add("x", Arch::Cpu, 8, 100.0);
        m.codelets.get_mut("x").unwrap()[0].history.mean_ns = -1e6;
        std::fs::write(
            d.path().join("models.json"),
            serde_json::to_string(&m).unwrap(),
        )
        .unwrap();
        let e = PerfModels::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("codelet x") && e.contains("mean_ns"), "{e}");
    }
}
