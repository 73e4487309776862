//! Text layout for the reports: word-wrapping to [`WIDTH`] columns that never splits a
//! number from its unit, and tables whose first column gives way (with `~`, the cut
//! names listed in full under the table) so that the whole fits.

use std::fmt::Write as _;

/// The reports' width, in columns.
pub(super) const WIDTH: usize = 80;

/// Whether `w` is a unit that must stay on the line of the number before it (`J`, `mW`,
/// `ms`, `W)`...).
fn is_unit(w: &str) -> bool {
    let core = w.trim_end_matches([',', ';', '.', ')', ':']);
    let base = core.trim_start_matches(['k', 'm', 'u', 'n', 'p', 'M', 'G', 'T']);
    !core.is_empty() && matches!(base, "J" | "W" | "s" | "Hz") && core.len() <= base.len() + 1
}

/// Word-wraps `text` to [`WIDTH`], never splitting a number from its unit.
pub(super) fn wrap(out: &mut String, text: &str, first: &str, rest: &str) {
    let mut words: Vec<String> = Vec::new();
    for w in text.split_whitespace() {
        match words.last_mut() {
            Some(prev) if is_unit(w) && prev.ends_with(|c: char| c.is_ascii_digit()) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => words.push(w.to_owned()),
        }
    }
    let mut line = first.to_owned();
    let mut empty = true;
    for word in &words {
        let word = word.as_str();
        if !empty && line.len() + 1 + word.len() > WIDTH {
            let _ = writeln!(out, "{line}");
            line = rest.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    let _ = writeln!(out, "{line}");
}

pub(super) fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

pub(super) fn signed_pct(v: f64) -> String {
    format!("{v:+.2}%")
}

/// A table whose first column shrinks (with `~`) so that the whole fits [`WIDTH`].
pub(super) struct Table {
    head: Vec<(&'static str, bool)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(head: &[(&'static str, bool)]) -> Table {
        Table {
            head: head.to_vec(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.head.len());
        self.rows.push(cells);
    }

    pub(super) fn render(&self, out: &mut String) {
        let n = self.head.len();
        let mut w: Vec<usize> = self.head.iter().map(|h| h.0.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let others: usize = w[1..].iter().sum::<usize>() + 2 * (n - 1);
        w[0] = w[0].min(WIDTH.saturating_sub(others).max(8));
        // Still too wide: the widest text column after the first gives up the rest.
        let total = w.iter().sum::<usize>() + 2 * (n - 1);
        if total > WIDTH {
            if let Some(i) = (1..n).filter(|&i| !self.head[i].1).max_by_key(|&i| w[i]) {
                w[i] = w[i].saturating_sub(total - WIDTH).max(8);
            }
        }
        // The first column's names as cut: names cut alike (`nrm_sum@cpu` and
        // `nrm_sum_init@cpu` both `nrm_sum~`) are numbered apart (`nrm_s~1`, `nrm_s~2`).
        let shorts = numbered_apart(self.rows.iter().map(|r| r[0].as_str()), w[0]);
        let line = |cells: &mut dyn Iterator<Item = (usize, String)>, row: Option<usize>| {
            let mut s = String::new();
            for (i, c) in cells {
                if i > 0 {
                    s.push_str("  ");
                }
                let c = match row {
                    Some(r) if i == 0 => shorts[r].clone(),
                    _ => fit(&c, w[i]),
                };
                if self.head[i].1 {
                    let _ = write!(s, "{c:>width$}", width = w[i]);
                } else {
                    let _ = write!(s, "{c:<width$}", width = w[i]);
                }
            }
            s.trim_end().to_owned()
        };
        let _ = writeln!(
            out,
            "{}",
            line(
                &mut self.head.iter().map(|h| h.0.to_owned()).enumerate(),
                None
            )
        );
        for (k, r) in self.rows.iter().enumerate() {
            let _ = writeln!(out, "{}", line(&mut r.iter().cloned().enumerate(), Some(k)));
        }
        // The names cut to fit, in full.
        let mut cut: Vec<String> = Vec::new();
        for (r, short) in self.rows.iter().zip(&shorts) {
            let full = format!("{short} is {}", r[0]);
            if *short != r[0] && !cut.contains(&full) {
                cut.push(full);
            }
        }
        if !cut.is_empty() {
            wrap(
                out,
                &format!("(cut to fit: {})", cut.join("; ")),
                "  ",
                "  ",
            );
        }
    }
}

/// `names` cut to `w` characters ([`fit`]); distinct names that would be cut alike end in
/// `~1`, `~2`... instead, in their order.
fn numbered_apart<'a>(names: impl Iterator<Item = &'a str>, w: usize) -> Vec<String> {
    let names: Vec<&str> = names.collect();
    let cut: Vec<String> = names.iter().map(|n| fit(n, w)).collect();
    let mut out = cut.clone();
    for (i, c) in cut.iter().enumerate() {
        let alike: Vec<usize> = (0..names.len())
            .filter(|&j| cut[j] == *c && names[j] != names[i])
            .collect();
        if alike.is_empty() || names[i].chars().count() <= w {
            continue;
        }
        // The rank of this name among the distinct names cut alike.
        let mut seen: Vec<&str> = Vec::new();
        for g in (0..names.len()).filter(|&j| cut[j] == *c).map(|j| names[j]) {
            if !seen.contains(&g) {
                seen.push(g);
            }
        }
        let k = seen.iter().position(|g| *g == names[i]).unwrap_or(0) + 1;
        let tag = format!("~{k}");
        let head: String = names[i].chars().take(w.saturating_sub(tag.len())).collect();
        out[i] = format!("{head}{tag}");
    }
    out
}

/// Cuts `s` to `w` characters, marking the cut with `~`.
fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(w.saturating_sub(1)).collect();
        t.push('~');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cut_alike_are_numbered_apart() {
        let names = [
            "nrm_sum@cpu",
            "nrm_sum_fold@cpu",
            "nrm_sum_init@cpu",
            "gemm@cpu",
        ];
        let cut = numbered_apart(names.iter().copied(), 8);
        assert_eq!(cut, ["nrm_su~1", "nrm_su~2", "nrm_su~3", "gemm@cpu"]);
        // One name in several rows keeps one label.
        let cut = numbered_apart(["a_long_name", "a_long_name", "b"].iter().copied(), 5);
        assert_eq!(cut, ["a_lo~", "a_lo~", "b"]);
    }

    #[test]
    fn tables_fit_80_columns_and_truncate_the_first_column() {
        let mut t = Table::new(&[("type", false), ("a", true), ("b", true)]);
        t.row(vec!["x".repeat(120), "1".into(), "22".into()]);
        t.row(vec!["short".into(), "333".into(), "4".into()]);
        t.row(vec!["sum_combine@cpu".repeat(5), "5".into(), "6".into()]);
        let mut out = String::new();
        t.render(&mut out);
        // The table's lines; under it, the cut names in full (a word of 120 characters
        // cannot be wrapped).
        for l in out.lines().take(4) {
            assert!(l.len() <= WIDTH, "{l}");
        }
        assert!(out.contains("x~"));
        assert!(out.lines().nth(2).unwrap().starts_with("short"));
        let legend: String = out.lines().skip(4).collect::<Vec<_>>().join(" ");
        assert!(legend.starts_with("  (cut to fit: "), "{out}");
        assert!(legend.contains(&"x".repeat(120)), "{out}");
        assert!(legend.contains(&"sum_combine@cpu".repeat(5)), "{out}");
        assert!(!legend.contains("short"), "{out}");
        // Number columns too wide for the first one to absorb: the text column gives way
        // (a type's row of 81 characters, `imprecise +-106%` at its end, went past 80).
        let mut t = Table::new(&[
            ("type", false),
            ("a", true),
            ("b", true),
            ("c", true),
            ("why", false),
        ]);
        t.row(vec![
            "gemm@cpu".into(),
            "9".repeat(20),
            "8".repeat(20),
            "7".repeat(14),
            "imprecise +-106%".into(),
        ]);
        let mut out = String::new();
        t.render(&mut out);
        for l in out.lines() {
            assert!(l.chars().count() <= WIDTH, "{l}");
        }
        assert!(
            out.contains(&"9".repeat(20)),
            "numbers are never cut: {out}"
        );
    }

    #[test]
    fn wrapping_never_splits_a_number_from_its_unit() {
        let mut out = String::new();
        let text = format!("{} measured 36.7 J, fitted 36.5 J at 12 mW", "x".repeat(66));
        wrap(&mut out, &text, "", "  ");
        for l in out.lines() {
            assert!(!l.trim_start().starts_with("J"), "{out}");
            assert!(l.len() <= WIDTH);
        }
        assert!(out.contains("36.7 J"), "{out}");
        assert!(is_unit("mJ,") && is_unit("W)") && !is_unit("Joules") && !is_unit("max"));
    }

    #[test]
    fn wrapping_keeps_lines_short() {
        let mut out = String::new();
        wrap(&mut out, &"word ".repeat(60), "  - ", "    ");
        assert!(out.lines().count() > 1);
        assert!(out.lines().all(|l| l.len() <= WIDTH));
    }
}
