//! Errors of the trace crate.
//!
//! Every message names the file, where in it (byte offset or line), what was being read,
//! and what to do about it: a trace error is usually read by someone who has a damaged
//! file in hand and wants to know whether `recover_trace` can save it.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A `.twt` format version: `major.minor`.
///
/// Readers accept any minor of their own major (skipping chunk kinds they do not know in
/// files with a newer minor) and refuse any other major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FormatVersion {
    /// Incompatible layout changes.
    pub major: u16,
    /// Compatible additions (new chunk kinds, new codecs, new optional JSON fields).
    pub minor: u16,
}

impl fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What can go wrong writing, reading, exporting or importing a trace.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The operating system refused to open, read or write the file.
    #[error("cannot access {}: {source}{}", path.display(), io_hint(source))]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// An output path names one of the command's inputs: writing it would destroy the
    /// input before (or while) it is read.
    #[error("{} is also an input ({}) of this command: writing it would destroy that input; choose another output path", output.display(), input.display())]
    OutputIsInput {
        /// The output path given.
        output: PathBuf,
        /// The input it is.
        input: PathBuf,
    },

    /// A text file (CSV, tasks.rec) holds bytes that are not UTF-8.
    #[error("{}:{line}: not UTF-8 text (byte 0x{byte:02x} in field {column}); save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 IN > OUT`", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Line number, from 1.
        line: u64,
        /// The field, from 1.
        column: usize,
        /// The first byte that is not valid UTF-8.
        byte: u8,
    },

    /// `TASKWATT_CLOCK` has a value this build does not know.
    #[error("TASKWATT_CLOCK={value}: expected `tsc` (the default: the TSC where Linux trusts it, else CLOCK_MONOTONIC) or `monotonic`; unset it for the default")]
    ClockEnv {
        /// The value found.
        value: String,
    },

    /// The file does not start with the `.twt` magic bytes.
    #[error("{} is not a taskwatt trace: it does not start with the magic bytes \"TWTRACE\\0\" at byte 0; pass a .twt file written by taskwatt (StarPU tasks.rec and CSV files go through `taskwatt import`)", path.display())]
    NotATrace {
        /// The file.
        path: PathBuf,
    },

    /// The file's major format version is not the one this build reads.
    #[error("{}: trace format version {found} (at byte 8) is not supported: this build reads format {}.0 to {supported}; open it with a taskwatt release that reads format {}.x", path.display(), supported.major, found.major)]
    UnknownVersion {
        /// The file.
        path: PathBuf,
        /// The version in the file's header.
        found: FormatVersion,
        /// The newest version this build reads.
        supported: FormatVersion,
    },

    /// The file is empty: nothing was ever written to it.
    #[error("{}: the file is empty (0 bytes): no trace was written to it (a run that failed before it started, or not the file meant)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },

    /// The file ends in the middle of a header or chunk.
    #[error("{}: truncated at byte {offset}: the {what} needs {needed} bytes but the file has only {have} left; {}: `--recover` (on `taskwatt report` and `taskwatt export`; `recover_trace` in the library) reads every intact chunk", path.display(), cut_or_damaged(*.needed))]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the incomplete header or chunk starts.
        offset: u64,
        /// What was being read: `file header`, `chunk header`, `Tasks chunk`...
        what: String,
        /// Bytes it needs (header and payload, from `offset`).
        needed: u64,
        /// Bytes the file still had from `offset`.
        have: u64,
    },

    /// The bytes are there but wrong: CRC mismatch, bad varint, bad enum, bad JSON...
    #[error("{}: corrupt data at byte {offset}: {reason}; the file is damaged there: `--recover` (on `taskwatt report` and `taskwatt export`; `recover_trace` in the library) reads every intact chunk before and after it", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The byte where the bad data is (the chunk start for a CRC mismatch).
        offset: u64,
        /// What is wrong, naming the chunk and field.
        reason: String,
    },

    /// Every chunk is valid but there is no End chunk: the run stopped before its trace
    /// was finished.
    #[error("{}: the trace ends after {chunks} complete chunks without an End chunk: the run stopped before its trace was finished (killed, crashed, or a program that returned without TraceWriter::finish); read what it holds with --recover (`taskwatt report --recover`, `taskwatt export --recover`; recover_trace)", path.display())]
    CutShort {
        /// The file.
        path: PathBuf,
        /// Complete chunks in it.
        chunks: u64,
    },

    /// A sink was used after its writer finished, or the writer thread failed.
    #[error("the trace sink is closed: its writer already finished or its thread failed; TraceWriter::finish reports the cause")]
    Closed,

    /// A chunk handed to the writer cannot be encoded.
    #[error("invalid chunk handed to the trace writer: {reason}; this is a bug in the code that built the chunk")]
    InvalidChunk {
        /// What is wrong with it.
        reason: String,
    },

    /// An exporter could not write its output.
    #[error("cannot write the {what}: {source}; check that the output is writable and the disk is not full")]
    Output {
        /// What was being written, e.g. `Chrome trace JSON`.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// An imported file has a malformed line.
    #[error("{}:{line}: {column}: expected {expected}, found `{found}`; fix that line or regenerate the file", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Line number, from 1.
        line: u64,
        /// The column (CSV) or key (StarPU tasks.rec) at fault.
        column: String,
        /// What was expected there.
        expected: String,
        /// What was there (shortened when long).
        found: String,
    },
}

impl TraceError {
    /// The byte offset the error points at, for format errors.
    pub fn offset(&self) -> Option<u64> {
        match self {
            TraceError::Truncated { offset, .. } | TraceError::Corrupt { offset, .. } => {
                Some(*offset)
            }
            _ => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> TraceError {
        TraceError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn output(what: &str, source: io::Error) -> TraceError {
        TraceError::Output {
            what: what.to_string(),
            source,
        }
    }
}

/// What to do about an I/O error, by its kind.
fn io_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => "; check the path",
        io::ErrorKind::PermissionDenied => "; check that you may read (or write) it",
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "; free some space or write elsewhere"
        }
        io::ErrorKind::IsADirectory => "; give a file, not a directory",
        io::ErrorKind::AlreadyExists => "; remove it or choose another path",
        _ => "",
    }
}

/// Shortens a found value for an error message.
pub(crate) fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_offset_and_fix() {
        let e = TraceError::Truncated {
            path: "run.twt".into(),
            offset: 4242,
            what: "Tasks chunk".into(),
            needed: 100,
            have: 7,
        };
        let m = e.to_string();
        assert!(m.contains("run.twt") && m.contains("4242") && m.contains("Tasks chunk"));
        assert!(m.contains("recover"), "{m}");
        assert_eq!(e.offset(), Some(4242));

        let e = TraceError::UnknownVersion {
            path: "a.twt".into(),
            found: FormatVersion { major: 2, minor: 0 },
            supported: FormatVersion { major: 1, minor: 0 },
        };
        let m = e.to_string();
        assert!(
            m.contains("2.0") && m.contains("1.0") && m.contains("a.twt"),
            "{m}"
        );
        assert_eq!(e.offset(), None);

        let e = TraceError::Malformed {
            path: "tasks.csv".into(),
            line: 12,
            column: "start".into(),
            expected: "a number".into(),
            found: "abc".into(),
        };
        assert!(e
            .to_string()
            .starts_with("tasks.csv:12: start: expected a number"));
    }

    #[test]
    fn shorten_keeps_short_and_cuts_long() {
        assert_eq!(shorten("abc"), "abc");
        let long = "x".repeat(100);
        assert_eq!(shorten(&long).chars().count(), 61);
    }
}

/// Why a chunk runs past the end of its file: a length no chunk taskwatt writes has (its
/// largest are about a MiB) is a damaged header; otherwise the file was cut.
fn cut_or_damaged(needed: u64) -> &'static str {
    if needed > 64 << 20 {
        "no chunk is that long: its length field is damaged (or the file was cut there)"
    } else {
        "the run was probably cut short"
    }
}

/// Gives an error type a `Debug` that reads as its message and its causes, one per line.
/// `fn main() -> Result<(), Box<dyn Error>>` prints the error it returns with `Debug`: a
/// derived one showed a user `Runtime(UnknownPolicy(UnknownPolicy { name: "dmdaa", ... }))`
/// where the message says "unknown scheduling policy `dmdaa`: known policies are ...".
/// The variants stay matchable; only their printing changes.
#[macro_export]
macro_rules! debug_as_display {
    ($t:ty) => {
        impl ::std::fmt::Debug for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{self}")?;
                let mut cause = ::std::error::Error::source(self);
                while let Some(c) = cause {
                    write!(f, "\n  caused by: {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
        }
    };
}

debug_as_display!(TraceError);
