//! Importers: build a [`Trace`] from other tools' output, for `taskwatt import`.
//!
//! - [`import_csv`]: a generic `tasks.csv` (one row per task execution);
//! - [`import_starpu`]: StarPU's `tasks.rec`, as written by `starpu_fxt_tool`.
//!
//! Either may take energy from a `samples.csv` (cumulative joules per domain) and map
//! domains to workers with a `workers.csv`; see docs/import.md for every column. The
//! imported trace's meter has backend `import` and is not simulated. Fields the source does
//! not have get documented stand-ins (a task's ready time is its start time...), never
//! guesses dressed as measurements.

use std::path::PathBuf;
use std::str::FromStr;

mod builder;
mod csv;
mod energy;
mod spill;
mod starpu;
mod table;

pub use csv::{import_csv, import_csv_to, ImportWritten};

pub use starpu::{import_starpu, StarpuImport, StarpuSkipped};

/// The unit of the times in an imported file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

impl TimeUnit {
    /// Decimal digits between this unit and a nanosecond.
    fn ns_digits(self) -> u32 {
        match self {
            TimeUnit::S => 9,
            TimeUnit::Ms => 6,
            TimeUnit::Us => 3,
            TimeUnit::Ns => 0,
        }
    }

    /// `s`, `ms`, `us` or `ns`.
    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::S => "s",
            TimeUnit::Ms => "ms",
            TimeUnit::Us => "us",
            TimeUnit::Ns => "ns",
        }
    }

    /// Converts a decimal time in this unit to ns, exactly for plain decimals (`130.103336`
    /// ms is 130103336 ns, not a float's neighbour of it); digits below 1 ns are rounded
    /// half up. Exponent forms (`1.5e-3`) go through `f64`. Negative times are refused.
    pub fn parse_ns(self, s: &str) -> Option<u64> {
        self.parse_plain_ns(s.as_bytes())
            .or_else(|| self.parse_general_ns(s))
    }

    /// [`TimeUnit::parse_ns`] for any text (the plain case's slow path).
    fn parse_general_ns(self, s: &str) -> Option<u64> {
        let s = s.trim();
        let s = s.strip_prefix('+').unwrap_or(s);
        if s.contains(['e', 'E']) {
            let v: f64 = s.parse().ok()?;
            let ns = v * 10f64.powi(self.ns_digits() as i32);
            return (ns.is_finite() && ns >= 0.0 && ns < u64::MAX as f64)
                .then(|| ns.round() as u64);
        }
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
            return None;
        }
        let k = self.ns_digits() as usize;
        let mut ns: u128 = 0;
        for b in int
            .bytes()
            .chain(frac.bytes().chain(std::iter::repeat(b'0')).take(k))
        {
            ns = ns.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
        }
        if frac.as_bytes().get(k).is_some_and(|&b| b >= b'5') {
            ns += 1;
        }
        u64::try_from(ns).ok()
    }
}

impl TimeUnit {
    /// The common case of [`TimeUnit::parse_ns`] in one pass: digits, optionally a `.` and
    /// at most as many digits as the unit has below a nanosecond, no sign, space or
    /// exponent, and small enough for a `u64` without checks (at most 19 digits). `None`
    /// sends the text to the general path, which decides.
    #[inline]
    fn parse_plain_ns(self, s: &[u8]) -> Option<u64> {
        let k = self.ns_digits() as usize;
        if s.is_empty() || s.len() > 19 {
            return None;
        }
        let mut v: u64 = 0;
        let mut frac: Option<usize> = None;
        for &b in s {
            match b {
                b'0'..=b'9' => {
                    if let Some(f) = &mut frac {
                        if *f == k {
                            return None;
                        }
                        *f += 1;
                    }
                    v = v * 10 + u64::from(b - b'0');
                }
                b'.' if frac.is_none() => frac = Some(0),
                _ => return None,
            }
        }
        let digits = s.len() - usize::from(frac.is_some());
        if digits == 0 {
            return None;
        }
        // At most 19 digits read, and at most 9 more to scale: the product can exceed a
        // `u64` only past 19 digits in all.
        let scale = k - frac.unwrap_or(0);
        if digits + scale > 19 {
            return None;
        }
        Some(v * 10u64.pow(scale as u32))
    }
}

impl FromStr for TimeUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" | "seconds" => Ok(TimeUnit::S),
            "ms" => Ok(TimeUnit::Ms),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ns" => Ok(TimeUnit::Ns),
            other => Err(format!("unknown time unit `{other}`: use s, ms, us or ns")),
        }
    }
}

impl std::fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an import finds its optional files, and the unit of their times.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    /// Unit of the times in `tasks.csv` and `samples.csv` (StarPU's `tasks.rec` is always
    /// in ms, and its samples must be on the same clock).
    pub time_unit: TimeUnit,
    /// A `samples.csv` of cumulative energy readings.
    pub samples: Option<PathBuf>,
    /// A `workers.csv` mapping workers to the domains that cover them.
    pub workers: Option<PathBuf>,
    /// A `domains.csv` declaring each domain's sensor (energy counter, power readings
    /// averaged over a window, a counter that samples part of each update), update
    /// interval, resolution and workers (docs/import.md).
    pub domains: Option<PathBuf>,
    /// The meter's update interval, ns, if known: lets the attribution align intervals to
    /// the meter's updates (`docs/attribution.md`, "Intervals aligned to the meter").
    pub update_interval_ns: Option<u64>,
    /// The meter's energy resolution (one count), J, if known (RAPL: 2^-14 J ≈ 61 µJ).
    pub resolution_j: Option<f64>,
    /// The samples' `energy_j` column is a raw counter (in J) that wraps after this many
    /// J: each step back is undone by adding the range (RAPL's `max_energy_range_uj`).
    pub wrap_range_j: Option<f64>,
    /// Counts the bytes of the tasks file read so far (`tasks.csv`, after decompression),
    /// for a progress display on another thread.
    pub progress: Option<ReadProgress>,
    /// Bytes of task records an import to a file ([`import_csv_to`]) holds in memory, 32
    /// per task; past that, they are sorted into a temporary file in the output's directory
    /// and merged back (default [`ImportOptions::DEFAULT_TASK_MEMORY`], about a million
    /// tasks). Imports that return a [`crate::Trace`] hold it whole whatever this says.
    pub task_memory: usize,
}

/// A count of the bytes an import has read of its tasks file, shared with the thread that
/// shows it ([`ImportOptions::progress`]). Two are equal when they are the same counter.
#[derive(Clone, Debug, Default)]
pub struct ReadProgress(pub(crate) std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ReadProgress {
    /// A counter at 0.
    pub fn new() -> ReadProgress {
        ReadProgress::default()
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl PartialEq for ReadProgress {
    fn eq(&self, other: &ReadProgress) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Opens `path` for reading, decompressing it on the fly when it starts with gzip's magic
/// bytes (`.rec.gz`, `.csv.gz`, whatever the name).
pub(crate) fn open_text(
    path: &std::path::Path,
) -> Result<Box<dyn std::io::BufRead>, crate::TraceError> {
    use std::io::{BufRead, BufReader};
    let file = std::fs::File::open(path).map_err(|e| crate::TraceError::io(path, e))?;
    let mut r = BufReader::new(file);
    let gz = r
        .fill_buf()
        .map_err(|e| crate::TraceError::io(path, e))?
        .starts_with(&[0x1f, 0x8b]);
    Ok(if gz {
        Box::new(LineLimit::new(BufReader::new(
            flate2::bufread::MultiGzDecoder::new(r),
        )))
    } else {
        Box::new(LineLimit::new(r))
    })
}

/// The longest line a text trace (CSV, tasks.rec) may hold: real ones are a few hundred
/// bytes. A longer line is an error before it fills memory (a small gzip can hold a line of
/// gigabytes; `/dev/zero` is one endless line).
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// A reader that fails once a line runs past [`MAX_LINE_BYTES`] without a line feed.
struct LineLimit<R> {
    inner: R,
    /// Bytes consumed since the last line feed.
    run: usize,
    /// Bytes consumed in all.
    offset: u64,
}

impl<R: std::io::BufRead> LineLimit<R> {
    fn new(inner: R) -> Self {
        LineLimit {
            inner,
            run: 0,
            offset: 0,
        }
    }
}

impl<R: std::io::BufRead> std::io::BufRead for LineLimit<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.run > MAX_LINE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a line longer than {MAX_LINE_BYTES} bytes before byte {}: a CSV or \
                     tasks.rec line is a few hundred bytes, so this file is corrupt or not \
                     a text trace",
                    self.offset
                ),
            ));
        }
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        if let Ok(buf) = self.inner.fill_buf() {
            let seen = &buf[..amt.min(buf.len())];
            match seen.iter().rposition(|&b| b == b'\n') {
                Some(i) => self.run = seen.len() - i - 1,
                None => self.run += seen.len(),
            }
        }
        self.offset += amt as u64;
        self.inner.consume(amt);
    }
}

impl<R: std::io::BufRead> std::io::Read for LineLimit<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use std::io::BufRead;
        let buf = self.fill_buf()?;
        let n = buf.len().min(out.len());
        out[..n].copy_from_slice(&buf[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl ImportOptions {
    /// Tasks only, times in `time_unit`.
    pub fn new(time_unit: TimeUnit) -> Self {
        ImportOptions {
            time_unit,
            samples: None,
            workers: None,
            domains: None,
            update_interval_ns: None,
            resolution_j: None,
            wrap_range_j: None,
            progress: None,
            task_memory: Self::DEFAULT_TASK_MEMORY,
        }
    }

    /// [`ImportOptions::task_memory`]'s default: 32 MiB.
    pub const DEFAULT_TASK_MEMORY: usize = 32 << 20;

    /// Holds at most `bytes` of task records in memory ([`ImportOptions::task_memory`]).
    pub fn task_memory(mut self, bytes: usize) -> Self {
        self.task_memory = bytes;
        self
    }

    /// Counts the bytes of the tasks file read into `progress` as the import goes.
    pub fn progress(mut self, progress: ReadProgress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The samples' energy is a raw counter wrapping after `range_j` J.
    pub fn counter_wrap_j(mut self, range_j: f64) -> Self {
        self.wrap_range_j = Some(range_j);
        self
    }

    /// Adds a `samples.csv`.
    pub fn samples(mut self, path: impl Into<PathBuf>) -> Self {
        self.samples = Some(path.into());
        self
    }

    /// Sets the meter's update interval (ns) on every imported domain.
    pub fn update_interval_ns(mut self, ns: u64) -> Self {
        self.update_interval_ns = Some(ns);
        self
    }

    /// Sets the meter's energy resolution (J) on every imported domain.
    pub fn resolution_j(mut self, j: f64) -> Self {
        self.resolution_j = Some(j);
        self
    }

    /// Adds a `domains.csv` (each domain's sensor; docs/import.md).
    pub fn domains(mut self, path: impl Into<PathBuf>) -> Self {
        self.domains = Some(path.into());
        self
    }

    /// Adds a `workers.csv`.
    pub fn workers(mut self, path: impl Into<PathBuf>) -> Self {
        self.workers = Some(path.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_end_is_an_error_not_a_memory_grab() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        // Issue 29: a small gzip holding one huge line aborted the import (here 8 MiB of
        // one line, 8 KiB compressed; the reproducer's was 3 GB), and so did /dev/zero.
        let line = vec![b'7'; 8 << 20];
        let gz = d.path().join("long.csv.gz");
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::best(),
        );
        enc.write_all(b"type,worker,start,end\n").unwrap();
        enc.write_all(&line).unwrap();
        enc.finish().unwrap();
        let e = crate::import_csv(&gz, &ImportOptions::new(TimeUnit::Ns))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("long.csv.gz") && e.contains("a line longer than"),
            "{e}"
        );
        let dev = "/dev/zero";
        let e = crate::import_csv(dev, &ImportOptions::new(TimeUnit::Ns))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a line longer than"), "{e}");
        let e = crate::import_starpu(dev, &ImportOptions::new(TimeUnit::Ns))
            .unwrap_err()
            .to_string();
        assert!(e.contains("a line longer than"), "{e}");
        // Lines of ordinary length pass through untouched, across buffer refills.
        let ok = d.path().join("ok.csv");
        let mut text = String::from("type,worker,start,end\n");
        for i in 0..20_000 {
            text.push_str(&format!("a,0,{},{}\n", 10 * i, 10 * i + 5));
        }
        std::fs::write(&ok, text).unwrap();
        let t = crate::import_csv(&ok, &ImportOptions::new(TimeUnit::Ns)).unwrap();
        assert_eq!(t.task_count(), 20_000);
    }

    #[test]
    fn decimal_times_are_exact() {
        assert_eq!(TimeUnit::Ms.parse_ns("130.103336"), Some(130_103_336));
        assert_eq!(TimeUnit::Ms.parse_ns("0.0000005"), Some(1)); // rounds half up
        assert_eq!(TimeUnit::Ms.parse_ns("0.0000004"), Some(0));
        assert_eq!(TimeUnit::S.parse_ns("1"), Some(1_000_000_000));
        assert_eq!(TimeUnit::S.parse_ns(".5"), Some(500_000_000));
        assert_eq!(TimeUnit::Us.parse_ns("7."), Some(7_000));
        assert_eq!(TimeUnit::Ns.parse_ns(" 42 "), Some(42));
        assert_eq!(
            TimeUnit::Ns.parse_ns("18446744073709551615"),
            Some(u64::MAX)
        );
        assert_eq!(TimeUnit::Ns.parse_ns("18446744073709551616"), None);
        assert_eq!(TimeUnit::S.parse_ns("1.5e-3"), Some(1_500_000));
        for bad in ["", ".", "-1", "1,5", "abc", "1.2.3", "nan", "-1e3"] {
            assert_eq!(TimeUnit::Ms.parse_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_plain_fast_path_agrees_with_the_general_one() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut fast = 0;
        for _ in 0..200_000 {
            let int = next() % 10u64.pow((next() % 20) as u32).max(1);
            let frac_len = (next() % 12) as usize;
            let frac: String = (0..frac_len)
                .map(|_| char::from(b'0' + (next() % 10) as u8))
                .collect();
            let text = match next() % 3 {
                0 => int.to_string(),
                1 => format!("{int}.{frac}"),
                _ => format!(".{frac}"),
            };
            for unit in [TimeUnit::S, TimeUnit::Ms, TimeUnit::Us, TimeUnit::Ns] {
                if let Some(v) = unit.parse_plain_ns(text.as_bytes()) {
                    fast += 1;
                    assert_eq!(Some(v), unit.parse_general_ns(&text), "{text} {unit}");
                }
            }
        }
        assert!(fast > 100_000, "the fast path was taken {fast} times");
    }

    #[test]
    fn units_parse() {
        assert_eq!("MS".parse::<TimeUnit>(), Ok(TimeUnit::Ms));
        assert_eq!("µs".parse::<TimeUnit>(), Ok(TimeUnit::Us));
        assert!("min"
            .parse::<TimeUnit>()
            .unwrap_err()
            .contains("s, ms, us or ns"));
    }
}
