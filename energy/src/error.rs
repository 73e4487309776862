//! The crate's one error type.
//!
//! Every message names what was being read (a file, a perf event, a GPU, a config), the field
//! in question, and what to do about it. Errors that mean "this backend does not exist on this
//! machine" (no powercap tree, no perf `power` PMU, no NVIDIA driver) are told apart from real
//! failures by [`EnergyError::is_unavailable`], so that detection can report them as a status
//! instead of failing the run.

use std::io;
use std::path::PathBuf;

/// What can go wrong while finding, opening, reading or sampling an energy meter.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum EnergyError {
    /// The powercap sysfs directory does not exist.
    #[error(
        "no {root}: kernel without CONFIG_POWERCAP / intel_rapl_common, or a VM that exposes \
         no RAPL (try `modprobe intel_rapl_msr`, or use `--meter rapl-perf` / `--meter sim`)"
    )]
    NoPowercap {
        /// The powercap root that was looked at.
        root: PathBuf,
    },

    /// The powercap directory exists but holds no `intel-rapl:N` zone.
    #[error(
        "{root} holds no intel-rapl:N zone: the RAPL powercap driver is not loaded \
         (`modprobe intel_rapl_msr`) or this CPU/VM has no RAPL"
    )]
    NoRaplZones {
        /// The powercap root that was looked at.
        root: PathBuf,
    },

    /// `energy_uj` exists but may not be read by this user (root-only since CVE-2020-8694).
    #[error(
        "permission denied reading {path}: since CVE-2020-8694 (PLATYPUS) RAPL energy_uj is \
         readable by root only. Options: run as root; or grant read access with a udev rule or \
         `chgrp <group> .../energy_uj && chmod g+r .../energy_uj` for a trusted group; or use \
         the perf_event path (`--meter rapl-perf`), which needs CAP_PERFMON or \
         /proc/sys/kernel/perf_event_paranoid <= 0. Do not make energy_uj world-readable on a \
         shared machine: fine-grain energy readings are a side channel that leaks secrets \
         (PLATYPUS recovered AES keys from them)"
    )]
    RaplPermission {
        /// The file that could not be read.
        path: PathBuf,
    },

    /// A sensor file could not be read (it vanished, or an I/O error).
    #[error("cannot read {path} ({field}): {source}; {fix}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the file holds, e.g. `energy_uj`.
        field: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
        /// What to do about it.
        fix: &'static str,
    },

    /// A sensor file held something that does not parse.
    #[error(
        "{path}: field `{field}` holds {contents:?}, expected {expected}; the driver wrote \
         something this version does not understand (check `dmesg`, or report it with the \
         file's contents)"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        field: &'static str,
        /// What it held (trimmed, at most 64 characters).
        contents: String,
        /// What was expected.
        expected: &'static str,
    },

    /// The perf `power` PMU does not exist.
    #[error(
        "no perf `power` PMU at {path}: the kernel exposes no RAPL perf events (needs the RAPL \
         perf driver, CONFIG_PERF_EVENTS_INTEL_RAPL: Intel since Linux 3.14, AMD Zen since 5.8; \
         most VMs have none). `taskwatt meters` says whether `rapl-powercap` works here instead; \
         else `--meter sim`"
    )]
    NoPerfPmu {
        /// The PMU directory that was looked at.
        path: PathBuf,
    },

    /// The perf `msr` PMU, or its APERF/MPERF events, are missing.
    #[error(
        "no APERF/MPERF at {path}: {missing} is missing (needs CONFIG_X86_MSR's perf PMU, \
         Linux 4.0+; most VMs hide aperf and mperf). Frequency falls back to cpufreq; opening \
         the events also needs CAP_PERFMON or `perf_event_paranoid <= 0`"
    )]
    NoMsrPmu {
        /// The PMU directory that was looked at.
        path: PathBuf,
        /// What it lacks.
        missing: String,
    },

    /// No CPU frequency source could be opened.
    #[error(
        "CPU frequency cannot be read ({tried}); the fit then cannot correct for frequency \
         changes and only warns when the tasks' power changes over the run"
    )]
    NoFrequency {
        /// What each source lacked.
        tried: String,
    },

    /// perf_event is not available on this operating system.
    #[error("the perf_event RAPL path needs Linux; this build targets another OS")]
    PerfUnsupported,

    /// `perf_event_open` failed for one RAPL event.
    #[error("cannot open perf event power/{event}/ on CPU {cpu}: {source}; {fix}")]
    PerfOpen {
        /// Event name, e.g. `energy-pkg`.
        event: String,
        /// CPU it was opened on.
        cpu: u32,
        /// The error from the kernel.
        #[source]
        source: io::Error,
        /// What to do about it.
        fix: &'static str,
    },

    /// Reading an open perf counter failed.
    #[error("cannot read perf event power/{event}/ on CPU {cpu}: {source}")]
    PerfRead {
        /// Event name.
        event: String,
        /// CPU.
        cpu: u32,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// NVML cannot be loaded: no NVIDIA driver on this machine.
    #[error("no NVIDIA driver (libnvidia-ml.so.1 not found): {detail}; install the NVIDIA driver to measure GPUs")]
    NoNvidiaDriver {
        /// What the loader said.
        detail: String,
    },

    /// NVML loaded but found no GPU.
    #[error("NVML found no GPU (nvmlDeviceGetCount returned 0)")]
    NoGpu,

    /// An NVML call failed.
    #[error("NVML {call} on {device} failed: {message}")]
    Nvml {
        /// Which GPU, e.g. `GPU 0` (or `the driver` for initialisation).
        device: String,
        /// The NVML call, e.g. `nvmlDeviceGetTotalEnergyConsumption`.
        call: &'static str,
        /// NVML's message.
        message: String,
    },

    /// The simulated meter's configuration is invalid.
    #[error("simulated meter config {origin}: {message}")]
    SimConfig {
        /// Where the config came from (a path, or `built-in default`).
        origin: String,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// A worker id too large for the simulated meter, whose per-worker table is indexed by
    /// worker id (the runtime numbers its workers from 0).
    #[error("simulated meter: worker {worker} has an id at or above the limit of {limit}; the simulated meter indexes workers by id, so number the workers densely from 0")]
    SimWorkerId {
        /// The worker id.
        worker: u32,
        /// Ids must be below this.
        limit: usize,
    },

    /// A sampling period outside 1 ms ..= 1 s.
    #[error("sampling period {} is outside 1 ms ..= 1 s: RAPL updates every ~1 ms, so faster sampling reads the same value twice, and slower sampling risks missing a 32-bit wrap", crate::error::period_text(*.period_ns))]
    InvalidPeriod {
        /// The period asked for.
        period_ns: u128,
    },

    /// An environment variable has a value this build does not know.
    #[error("{variable} = {value:?}: expected {expected}")]
    BadEnv {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it accepts, in words.
        expected: &'static str,
    },

    /// An unknown `--meter` value.
    #[error("unknown meter {given:?}: expected one of auto, rapl-perf, rapl-powercap, nvml, sim")]
    UnknownMeter {
        /// What was given.
        given: String,
    },

    /// The sampler thread could not be started.
    #[error("cannot start the energy sampler thread: {source}")]
    SamplerSpawn {
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// The sampler thread panicked.
    #[error("the energy sampler thread panicked: {message}")]
    SamplerPanicked {
        /// The panic message.
        message: String,
    },
}

impl EnergyError {
    /// Whether this error means "this backend is not present on this machine" (no sysfs tree,
    /// no PMU, no driver, no GPU), as opposed to a failure of a backend that is present.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            EnergyError::NoPowercap { .. }
                | EnergyError::NoMsrPmu { .. }
                | EnergyError::NoFrequency { .. }
                | EnergyError::NoRaplZones { .. }
                | EnergyError::NoPerfPmu { .. }
                | EnergyError::PerfUnsupported
                | EnergyError::NoNvidiaDriver { .. }
                | EnergyError::NoGpu
        )
    }

    /// Maps an I/O error on a sensor file: permission denied on `energy_uj` becomes
    /// [`EnergyError::RaplPermission`], everything else [`EnergyError::Read`] with a fix.
    pub(crate) fn from_io(path: PathBuf, field: &'static str, source: io::Error) -> EnergyError {
        match source.kind() {
            io::ErrorKind::PermissionDenied if field == "energy_uj" => {
                EnergyError::RaplPermission { path }
            }
            io::ErrorKind::PermissionDenied => EnergyError::Read {
                path,
                field,
                source,
                fix: "run as root or grant read access to this file",
            },
            io::ErrorKind::NotFound => EnergyError::Read {
                path,
                field,
                source,
                fix: "the sensor vanished (driver unloaded, CPU offlined or device removed); \
                      check `ls` on its directory and reload the driver",
            },
            _ => EnergyError::Read {
                path,
                field,
                source,
                fix: "check the driver's kernel log (`dmesg`)",
            },
        }
    }

    /// A parse error, with the contents trimmed and cut to 64 characters.
    pub(crate) fn parse(
        path: PathBuf,
        field: &'static str,
        contents: &str,
        expected: &'static str,
    ) -> EnergyError {
        let contents: String = contents.trim().chars().take(64).collect();
        EnergyError::Parse {
            path,
            field,
            contents,
            expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_denied_on_energy_uj_names_every_option_and_the_risk() {
        let e = EnergyError::from_io(
            PathBuf::from("/sys/class/powercap/intel-rapl:0/energy_uj"),
            "energy_uj",
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(matches!(e, EnergyError::RaplPermission { .. }));
        let m = e.to_string();
        for needle in [
            "intel-rapl:0/energy_uj",
            "CVE-2020-8694",
            "root",
            "udev",
            "chmod",
            "rapl-perf",
            "CAP_PERFMON",
            "perf_event_paranoid",
            "side channel",
        ] {
            assert!(m.contains(needle), "{needle:?} missing from {m}");
        }
        assert!(!e.is_unavailable());
    }

    #[test]
    fn vanished_file_is_a_read_error_naming_the_file() {
        let e = EnergyError::from_io(
            PathBuf::from("/x/intel-rapl:1/energy_uj"),
            "energy_uj",
            io::Error::from(io::ErrorKind::NotFound),
        );
        let m = e.to_string();
        assert!(
            m.contains("/x/intel-rapl:1/energy_uj") && m.contains("vanished"),
            "{m}"
        );
    }

    #[test]
    fn parse_error_cuts_long_contents() {
        let e = EnergyError::parse(
            PathBuf::from("/f"),
            "energy_uj",
            &"9".repeat(500),
            "an integer",
        );
        match e {
            EnergyError::Parse { contents, .. } => assert_eq!(contents.len(), 64),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn unavailability_is_told_apart() {
        assert!(EnergyError::NoPowercap { root: "/p".into() }.is_unavailable());
        assert!(EnergyError::NoNvidiaDriver { detail: "x".into() }.is_unavailable());
        assert!(!EnergyError::UnknownMeter { given: "x".into() }.is_unavailable());
    }
}

/// A period for a message: `5 s`, `250 ms`, `999 us` (`5000000000 ns` read badly).
pub(crate) fn period_text(ns: u128) -> String {
    match ns {
        n if n >= 1_000_000_000 && n % 1_000_000 == 0 => format!("{} s", n as f64 / 1e9),
        n if n >= 1_000_000 && n % 1_000 == 0 => format!("{} ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{} us", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

taskwatt_traces::debug_as_display!(EnergyError);
