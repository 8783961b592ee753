//! Stage 7: turning answers into output. The query modules return typed
//! values; this layer alone decides how they look: aligned tables that fit
//! the terminal, JSON, CSV, Markdown, transcripts and trees, colour. Every
//! front-end (the CLI, the picker) renders the same answers; nothing under
//! `query/` imports this module.
//!
//! Text that comes from sessions is untrusted: it reaches a terminal only
//! through `safe`, which shows control characters instead of sending them.

mod csv;
mod table;
mod term;

pub mod hits;
pub mod misc;
pub mod sessions;
pub mod sql;
pub mod transcript;
pub mod tree;
pub mod usage;

pub use csv::write_csv;
pub use table::{Align, Cell, Column, Table};
pub use term::{ColorChoice, Pager, Term, Theme};

use std::io::{self, Write};

use serde::Serialize;

/// What a listing command prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

impl Format {
    /// `--json` wins over `--csv`; neither means a table.
    pub fn choose(json: bool, csv: bool) -> Format {
        if json {
            Format::Json
        } else if csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

/// Pretty JSON and a newline. JSON keeps session text exactly.
pub fn write_json(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// Session text made safe for a terminal: control characters (escape
/// sequences that would move the cursor, set the title or the clipboard)
/// become visible `^[`-style escapes, as `cat -v` shows them; newlines and
/// tabs stay.
pub fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            match c as u32 {
                code @ 0..=0x1f => {
                    out.push('^');
                    out.push((code as u8 + b'@') as char);
                }
                0x7f => out.push_str("^?"),
                code => out.push_str(&format!("\\u{{{code:x}}}")),
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn is_unsafe(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// Text on one line: newlines and tabs become spaces, runs of spaces one.
pub fn one_line(text: &str) -> String {
    safe(text).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Dollars as every command prints them: cents, or four decimals below one cent.
pub fn money(value: f64) -> String {
    if value != 0.0 && value.abs() < 0.01 {
        format!("${value:.4}")
    } else {
        format!("${value:.2}")
    }
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A time as `2026-02-01 10:00` (UTC).
pub fn minute(ms: i64) -> String {
    crate::time::format_iso_ms(ms)
        .replace('T', " ")
        .chars()
        .take(16)
        .collect()
}

/// `2026-02-01T10:00:00.000Z` as `2026-02-01 10:00`.
fn minute_of(timestamp: Option<&str>) -> String {
    timestamp
        .map(|t| safe(t).replace('T', " ").chars().take(16).collect())
        .unwrap_or_else(|| "-".to_owned())
}

/// The first 8 characters of an id, as `piidx sessions` shows it (enough
/// for `piidx show` unless two sessions began in the same minute).
fn short_id(id: &str) -> String {
    safe(id).chars().take(8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert_eq!(safe("a\u{1b}]52;c;x\u{7}b"), "a^[]52;c;x^Gb");
        assert_eq!(safe("line\nnext\ttab"), "line\nnext\ttab");
        assert_eq!(safe("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(one_line(" a\n b\u{1b}[2J "), "a b^[[2J");
    }

    #[test]
    fn numbers_and_money() {
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(group_digits(-999), "-999");
        assert_eq!(money(3.5), "$3.50");
        assert_eq!(money(0.00126), "$0.0013");
        assert_eq!(money(0.0), "$0.00");
    }
}
