//! The import files' CSV reader: a header row naming the columns, then rows, with errors
//! that name the file, the line and the column.
//!
//! Parsing is the `csv` crate's (RFC 4180: quoted fields, `""` for a quote, line breaks
//! inside quotes); on top of it, fields are trimmed, blank lines and lines starting with
//! `#` are skipped, and a UTF-8 byte-order mark is ignored. Column names match
//! case-insensitively and columns may come in any order; columns the importer does not know
//! are ignored.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::error::shorten;
use crate::TraceError;

/// One data row.
#[derive(Debug, Default)]
pub(super) struct Row {
    /// Line number, from 1.
    pub(super) line: u64,
    /// `None` only between two reads ([`Table::next_row_into`] takes it to read into its
    /// buffers: a new record's allocation per row cost a tenth of an import's time).
    fields: Option<csv::StringRecord>,
}

impl Row {
    /// The field in column `i` (the empty string if the row is short: `Table::next_row`
    /// already refused rows with a wrong field count).
    pub(super) fn get(&self, i: usize) -> &str {
        self.fields
            .as_ref()
            .and_then(|f| f.get(i))
            .map_or("", str::trim_ascii)
    }
}

pub(super) struct Table {
    path: PathBuf,
    reader: csv::Reader<LineEnds>,
    header: Vec<String>,
    /// The offsets of the line ends the parser has not yet passed.
    ends: Rc<RefCell<VecDeque<(u64, u8)>>>,
    /// Line feeds before the first offset in `ends`.
    lines_before: u64,
}

/// The input, noting the offset of every `\r` and `\n` as it goes by: the `csv` crate's
/// record positions do not count the blank lines it skips (nor CRLF ends as one line), so
/// the lines an error names are counted here instead. Only the ends between the parser and
/// the read-ahead are kept.
struct LineEnds {
    inner: Box<dyn BufRead>,
    /// Where the bytes read are counted for a progress display, if anywhere.
    counted: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    offset: u64,
    ends: Rc<RefCell<VecDeque<(u64, u8)>>>,
}

impl Read for LineEnds {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut ends = self.ends.borrow_mut();
        for i in memchr::memchr2_iter(b'\n', b'\r', &buf[..n]) {
            ends.push_back((self.offset + i as u64, buf[i]));
        }
        self.offset += n as u64;
        if let Some(c) = &self.counted {
            c.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(n)
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens `path` and reads its header, which must hold every column of `required`.
    pub(super) fn open(path: &Path, required: &[&str]) -> Result<Table, TraceError> {
        Table::open_any(path, &[required]).map(|(t, _)| t)
    }

    /// Opens `path` and reads its header, which must hold every column of one of the
    /// `formats` (the first that matches is returned with its index); the error names the
    /// first format's columns.
    pub(super) fn open_any(path: &Path, formats: &[&[&str]]) -> Result<(Table, usize), TraceError> {
        Table::open_counted(path, formats, None)
    }

    /// As [`Table::open_any`], counting the bytes read into `counted`.
    pub(super) fn open_counted(
        path: &Path,
        formats: &[&[&str]],
        counted: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    ) -> Result<(Table, usize), TraceError> {
        let required = formats[0];
        let ends = Rc::new(RefCell::new(VecDeque::new()));
        let input = LineEnds {
            inner: super::open_text(path)?,
            counted,
            offset: 0,
            ends: Rc::clone(&ends),
        };
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            // Comments are skipped in `next_fields`, not by the `csv` crate, whose line
            // numbers leave comment lines out.
            // Fields are trimmed as they are read (`Row::get`): the csv crate's own
            // trimming builds a new record for every row.
            .trim(csv::Trim::None)
            .from_reader(input);
        let mut t = Table {
            path: path.to_path_buf(),
            reader,
            header: Vec::new(),
            ends,
            lines_before: 0,
        };
        let Some((line, header)) = t.next_fields(csv::ByteRecord::new())? else {
            return Err(t.err(
                1,
                "(header)",
                &format!("a header row naming the columns {}", required.join(", ")),
                "an empty file",
            ));
        };
        let header: Vec<String> = header
            .iter()
            .enumerate()
            .map(|(i, h)| {
                if i == 0 {
                    h.trim_start_matches('\u{feff}')
                } else {
                    h
                }
            })
            .map(|h| h.trim_ascii().to_string())
            .collect();
        t.header = header.into_iter().map(|h| h.to_ascii_lowercase()).collect();
        if let Some(k) = formats
            .iter()
            .position(|f| f.iter().all(|c| t.column(c).is_some()))
        {
            return Ok((t, k));
        }
        for col in required {
            if t.column(col).is_none() {
                return Err(t.err(
                    line,
                    col,
                    &format!("a header with the columns {}", required.join(", ")),
                    &t.header.join(","),
                ));
            }
        }
        unreachable!("the first format's columns are all present, or an error was returned")
    }

    /// The index of column `name`, if the header has it.
    pub(super) fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The index of a column checked present by `open`.
    pub(super) fn required(&self, name: &str) -> usize {
        self.column(name)
            .expect("required columns are checked when the table is opened")
    }

    /// The next data row, with as many fields as the header.
    pub(super) fn next_row(&mut self) -> Result<Option<Row>, TraceError> {
        let mut row = Row::default();
        Ok(self.next_row_into(&mut row)?.then_some(row))
    }

    /// As [`Table::next_row`], into `row`, whose allocation is reused (the importers' hot
    /// path: one record's buffers for the whole file). `false` at the end.
    pub(super) fn next_row_into(&mut self, row: &mut Row) -> Result<bool, TraceError> {
        let bytes = row
            .fields
            .take()
            .map_or_else(csv::ByteRecord::new, csv::StringRecord::into_byte_record);
        let Some((line, fields)) = self.next_fields(bytes)? else {
            return Ok(false);
        };
        if fields.len() != self.header.len() {
            return Err(self.err(
                line,
                "(row)",
                &format!("{} fields, like the header", self.header.len()),
                &format!("{} fields", fields.len()),
            ));
        }
        row.line = line;
        row.fields = Some(fields);
        Ok(true)
    }

    pub(super) fn err(&self, line: u64, column: &str, expected: &str, found: &str) -> TraceError {
        TraceError::Malformed {
            path: self.path.clone(),
            line,
            column: column.to_string(),
            expected: expected.to_string(),
            found: shorten(found),
        }
    }

    /// The line, from 1, of a record the parser began looking for at byte `from`: past the
    /// blank lines there, which the parser skipped.
    fn line_at(&mut self, from: u64) -> u64 {
        let mut ends = self.ends.borrow_mut();
        while let Some(&(at, b)) = ends.front() {
            if at >= from {
                break;
            }
            self.lines_before += u64::from(b == b'\n');
            ends.pop_front();
        }
        let mut at_record = from;
        while let Some(&(at, b)) = ends.front() {
            if at != at_record {
                break;
            }
            self.lines_before += u64::from(b == b'\n');
            at_record += 1;
            ends.pop_front();
        }
        self.lines_before + 1
    }

    /// The next record that is not blank or a comment, with its line number.
    /// `bytes` is a record to read into (its allocation is reused).
    fn next_fields(
        &mut self,
        mut bytes: csv::ByteRecord,
    ) -> Result<Option<(u64, csv::StringRecord)>, TraceError> {
        loop {
            let read = self.reader.read_byte_record(&mut bytes);
            let more = read.map_err(|e| {
                let line = e.position().map_or(0, |p| self.line_at(p.byte()));
                match e.into_kind() {
                    csv::ErrorKind::Io(e) => TraceError::io(&self.path, e),
                    other => self.err(line, "(row)", "a CSV record", &format!("{other:?}")),
                }
            })?;
            if !more {
                return Ok(None);
            }
            let line = bytes.position().map_or(0, |p| self.line_at(p.byte()));
            // A line of spaces, or one whose first field starts with `#` after them.
            if bytes.iter().all(|f| f.trim_ascii().is_empty())
                || bytes
                    .get(0)
                    .is_some_and(|f| f.trim_ascii_start().starts_with(b"#"))
            {
                continue;
            }
            return match csv::StringRecord::from_byte_record(bytes) {
                Ok(fields) => Ok(Some((line, fields))),
                Err(e) => {
                    let field = e.utf8_error().field();
                    let at = e.utf8_error().valid_up_to();
                    let raw = e.into_byte_record();
                    let bad = raw.get(field).unwrap_or_default();
                    Err(TraceError::NotUtf8 {
                        path: self.path.clone(),
                        line,
                        column: field + 1,
                        byte: bad.get(at).copied().unwrap_or(0),
                    })
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn quotes_spaces_and_line_breaks_in_fields() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(
            f,
            "a,b,c\n x ,\"y, z\",\"q\"\"q\"\n\"two\nlines\",2,3\n1,\"open\n"
        )
        .unwrap();
        let mut t = Table::open(f.path(), &["a"]).unwrap();
        let r = t.next_row().unwrap().unwrap();
        assert_eq!(
            (r.line, r.get(0), r.get(1), r.get(2)),
            (2, "x", "y, z", "q\"q")
        );
        let r = t.next_row().unwrap().unwrap();
        assert_eq!((r.line, r.get(0)), (3, "two\nlines"));
        // An unclosed quote runs to the end of the file: one field short.
        let e = t.next_row().unwrap_err();
        assert!(
            e.to_string().contains(":5: (row): expected 3 fields"),
            "{e}"
        );
    }

    #[test]
    fn line_numbers_count_blank_lines_and_crlf() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(f, "a,b\r\n\r\n\r\n1,2\r\n\n\"x\r\ny\",4\n\r\n5,6\n7\n").unwrap();
        let mut t = Table::open(f.path(), &["a"]).unwrap();
        let mut lines = Vec::new();
        let e = loop {
            match t.next_row() {
                Ok(Some(r)) => lines.push(r.line),
                Ok(None) => panic!("the short row is an error"),
                Err(e) => break e,
            }
        };
        assert_eq!(lines, [4, 6, 9]);
        assert!(e.to_string().contains(":10: (row)"), "{e}");
    }

    #[test]
    fn invalid_utf8_names_the_line_and_field() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"a,b\n1,x\xffy\n").unwrap();
        let mut t = Table::open(f.path(), &["a"]).unwrap();
        match t.next_row().unwrap_err() {
            TraceError::NotUtf8 {
                line, column, byte, ..
            } => {
                assert_eq!((line, column, byte), (2, 2, 0xff))
            }
            e => panic!("{e}"),
        }
    }

    #[test]
    fn header_rows_and_errors() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write!(
            f,
            "\u{feff}# comment\nType, Worker ,start\n\na,1,2\r\nb,2\n"
        )
        .unwrap();
        let mut t = Table::open(f.path(), &["type", "worker"]).unwrap();
        assert_eq!(t.required("worker"), 1);
        assert_eq!(t.column("end"), None);
        let r = t.next_row().unwrap().unwrap();
        assert_eq!((r.line, r.get(0), r.get(2)), (4, "a", "2"));
        let e = t.next_row().unwrap_err();
        assert!(
            e.to_string().contains(":5: (row): expected 3 fields"),
            "{e}"
        );

        let e = Table::open(f.path(), &["type", "end"]).unwrap_err();
        assert!(
            e.to_string()
                .contains(":2: end: expected a header with the columns type, end"),
            "{e}"
        );
    }
}
