//! A small CSV reader for the import files: a header row naming the columns, then rows,
//! with errors that name the file, the line and the column.
//!
//! RFC 4180 quoting on one line (`"a, b"`, `""` for a quote); unquoted fields are trimmed;
//! blank lines and lines starting with `#` are skipped; a UTF-8 byte-order mark is ignored.
//! Column names match case-insensitively and columns may come in any order; columns the
//! importer does not know are ignored.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::error::shorten;
use crate::TraceError;

/// One data row.
#[derive(Debug)]
pub(super) struct Row {
    /// Line number, from 1.
    pub(super) line: u64,
    fields: Vec<String>,
}

impl Row {
    /// The field in column `i` (the empty string if the row is short: `Table::next_row`
    /// already refused rows with a wrong field count).
    pub(super) fn get(&self, i: usize) -> &str {
        self.fields.get(i).map_or("", String::as_str)
    }
}

pub(super) struct Table {
    path: PathBuf,
    src: Box<dyn BufRead>,
    line_no: u64,
    header: Vec<String>,
    buf: String,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("line_no", &self.line_no)
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
        let required = formats[0];
        let mut t = Table {
            path: path.to_path_buf(),
            src: super::open_text(path)?,
            line_no: 0,
            header: Vec::new(),
            buf: String::new(),
        };
        let Some((line, header)) = t.next_fields()? else {
            return Err(t.err(
                1,
                "(header)",
                &format!("a header row naming the columns {}", required.join(", ")),
                "an empty file",
            ));
        };
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
        let Some((line, fields)) = self.next_fields()? else {
            return Ok(None);
        };
        if fields.len() != self.header.len() {
            return Err(self.err(
                line,
                "(row)",
                &format!("{} fields, like the header", self.header.len()),
                &format!("{} fields", fields.len()),
            ));
        }
        Ok(Some(Row { line, fields }))
    }

    /// A malformed-input error in this file.
    pub(super) fn err(&self, line: u64, column: &str, expected: &str, found: &str) -> TraceError {
        TraceError::Malformed {
            path: self.path.clone(),
            line,
            column: column.to_string(),
            expected: expected.to_string(),
            found: shorten(found),
        }
    }

    /// The next non-blank, non-comment line, split into fields.
    fn next_fields(&mut self) -> Result<Option<(u64, Vec<String>)>, TraceError> {
        loop {
            let mut raw = std::mem::take(&mut self.buf).into_bytes();
            raw.clear();
            let n = self
                .src
                .read_until(b'\n', &mut raw)
                .map_err(|e| TraceError::io(&self.path, e))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            self.buf = String::from_utf8(raw).map_err(|e| {
                let at = e.utf8_error().valid_up_to();
                TraceError::NotUtf8 {
                    path: self.path.clone(),
                    line: self.line_no,
                    column: at + 1,
                    byte: e.as_bytes()[at],
                }
            })?;
            let mut line = self.buf.trim_end_matches(['\n', '\r']);
            if self.line_no == 1 {
                line = line.trim_start_matches('\u{feff}');
            }
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let fields = split(line).map_err(|(pos, expected)| {
                self.err(self.line_no, "(row)", expected, &line[pos..])
            })?;
            return Ok(Some((self.line_no, fields)));
        }
    }
}

const UNCLOSED: &str = "a closing quote for the field opened here";
const AFTER_QUOTE: &str = "a comma or the end of the line after a closing quote";

/// Splits one CSV line; the error gives the byte position and what was expected there.
fn split(line: &str) -> Result<Vec<String>, (usize, &'static str)> {
    let mut out = Vec::new();
    let mut rest = line;
    loop {
        let start = line.len() - rest.len();
        let trimmed = rest.trim_start();
        if let Some(q) = trimmed.strip_prefix('"') {
            let mut field = String::new();
            let mut chars = q.char_indices();
            let after = loop {
                match chars.next() {
                    None => return Err((start, UNCLOSED)),
                    Some((i, '"')) => {
                        if q[i + 1..].starts_with('"') {
                            field.push('"');
                            chars.next();
                        } else {
                            break &q[i + 1..];
                        }
                    }
                    Some((_, c)) => field.push(c),
                }
            };
            out.push(field);
            let after = after.trim_start();
            if after.is_empty() {
                return Ok(out);
            }
            match after.strip_prefix(',') {
                Some(r) => rest = r,
                None => return Err((line.len() - after.len(), AFTER_QUOTE)),
            }
        } else {
            match rest.split_once(',') {
                Some((f, r)) => {
                    out.push(f.trim().to_string());
                    rest = r;
                }
                None => {
                    out.push(rest.trim().to_string());
                    return Ok(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn split_handles_quotes_and_spaces() {
        assert_eq!(split("a, b ,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(split("\"x, y\",\"q\"\"q\",").unwrap(), ["x, y", "q\"q", ""]);
        assert_eq!(split("").unwrap(), [""]);
        assert_eq!(split("1,\"open").unwrap_err(), (2, UNCLOSED));
        assert_eq!(split("\"a\"b,c").unwrap_err(), (3, AFTER_QUOTE));
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
