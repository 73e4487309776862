//! Outputs that are complete or absent: written to a temporary file beside the target and
//! renamed over it once complete, so that a failure (an error, a panic, a full disk, a
//! kill) leaves no partial output and keeps a file that was there before intact. And the
//! check that an output is not one of the inputs, made before anything is opened.
//!
//! An output that exists and is not a regular file (`/dev/stdout`, a FIFO, `/dev/full`)
//! is written in place: it cannot be replaced by a rename, and there is nothing to keep.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::TraceError;

/// A path being written through a temporary file: [`commit`](Self::commit) renames it
/// into place; dropping it without a commit removes the temporary file.
#[derive(Debug)]
pub struct AtomicPath {
    target: PathBuf,
    /// The temporary file; `None` when the target is written in place.
    tmp: Option<PathBuf>,
    committed: bool,
}

impl AtomicPath {
    /// Reserves a temporary path beside `target` (same directory, so the rename is atomic):
    /// `.<name>.tmp-<pid>-<n>`.
    pub fn new(target: impl AsRef<Path>) -> AtomicPath {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let target = target.as_ref().to_path_buf();
        let in_place = std::fs::metadata(&target).is_ok_and(|m| !m.is_file());
        let tmp = (!in_place).then(|| {
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "output".into());
            target.with_file_name(format!(
                ".{name}.tmp-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ))
        });
        AtomicPath {
            target,
            tmp,
            committed: false,
        }
    }

    /// Where to write now.
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.target)
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// `e` naming the final path where it named the temporary one: a user asked for
    /// `/proc/sys/x.twt`, not `/proc/sys/.x.twt.tmp-26752-0`.
    pub fn name_target(&self, e: TraceError) -> TraceError {
        match e {
            TraceError::Io { path, source } if Some(&path) == self.tmp.as_ref() => TraceError::Io {
                path: self.target.clone(),
                source,
            },
            e => e,
        }
    }

    /// Moves the written file into place (the data is synced to disk first).
    pub fn commit(mut self) -> Result<(), TraceError> {
        self.committed = true;
        let Some(tmp) = &self.tmp else {
            return Ok(());
        };
        let res = File::open(tmp)
            .and_then(|f| f.sync_all())
            .and_then(|()| std::fs::rename(tmp, &self.target));
        if let Err(e) = res {
            let _ = std::fs::remove_file(tmp);
            return Err(TraceError::io(&self.target, e));
        }
        Ok(())
    }
}

impl Drop for AtomicPath {
    fn drop(&mut self) {
        if let (false, Some(tmp)) = (self.committed, &self.tmp) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// A buffered output file that appears at its path only when [`commit`](Self::commit)
/// succeeds (see the module docs).
#[derive(Debug)]
pub struct AtomicFile {
    out: BufWriter<File>,
    path: AtomicPath,
}

impl AtomicFile {
    /// Creates the temporary file for `target`.
    pub fn create(target: impl AsRef<Path>) -> Result<AtomicFile, TraceError> {
        // A missing directory said as such, as for traces (`check_dir_of`).
        crate::trace::check_dir_of(target.as_ref())?;
        let path = AtomicPath::new(target);
        let file = if path.tmp.is_some() {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path.path())
        } else {
            File::create(path.path())
        }
        .map_err(|e| TraceError::io(path.target(), e))?;
        Ok(AtomicFile {
            out: BufWriter::with_capacity(1 << 16, file),
            path,
        })
    }

    /// Flushes, then moves the file into place.
    pub fn commit(mut self) -> Result<(), TraceError> {
        self.out
            .flush()
            .map_err(|e| TraceError::io(self.path.target(), e))?;
        self.path.commit()
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        self.path.target()
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes `bytes` to `target` atomically.
pub fn write_atomic(target: impl AsRef<Path>, bytes: &[u8]) -> Result<(), TraceError> {
    let mut f = AtomicFile::create(target)?;
    f.write_all(bytes)
        .map_err(|e| TraceError::io(f.target(), e))?;
    f.commit()
}

/// Whether `a` and `b` name the same existing file (through links, `..` or symlinks).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses to write `output` when it is one of `inputs` ([`TraceError::OutputIsInput`]).
/// Call it before opening anything.
pub fn refuse_output_over_input(output: &Path, inputs: &[&Path]) -> Result<(), TraceError> {
    for input in inputs {
        if same_file(output, input) || output == *input {
            return Err(TraceError::OutputIsInput {
                output: output.to_path_buf(),
                input: input.to_path_buf(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_committed_file_replaces_the_target_and_a_dropped_one_leaves_it_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        std::fs::write(&p, b"before").unwrap();
        {
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"partial").unwrap();
            // Dropped: an error or a panic before commit.
        }
        assert_eq!(std::fs::read(&p).unwrap(), b"before");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp left"
        );
        write_atomic(&p, b"after").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"after");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let fresh = dir.path().join("new.csv");
        write_atomic(&fresh, b"x").unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"x");
    }

    #[test]
    fn a_device_is_written_in_place() {
        let a = AtomicPath::new("/dev/null");
        assert_eq!(a.path(), Path::new("/dev/null"));
        write_atomic("/dev/null", b"x").unwrap();
        let e = write_atomic("/dev/full", b"x").unwrap_err().to_string();
        assert!(e.contains("/dev/full") && e.contains("space"), "{e}");
    }

    #[test]
    fn outputs_equal_to_inputs_are_refused_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("t.twt");
        std::fs::write(&input, b"trace").unwrap();
        let link = dir.path().join("link.twt");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let dotted = dir.path().join(".").join("t.twt");
        for out in [&input, &link, &dotted] {
            let e = refuse_output_over_input(out, &[&input])
                .unwrap_err()
                .to_string();
            assert!(e.contains("is also an input"), "{e}");
        }
        refuse_output_over_input(&dir.path().join("other.csv"), &[&input]).unwrap();
    }
}
