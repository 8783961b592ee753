//! Printing rows: an aligned table for people, JSON or CSV for programs.
//!
//! Every command that prints rows builds a `Rows` and hands it here, so
//! `--json` and `--csv` mean the same thing everywhere.

use std::io::{self, Write};

use serde_json::{Map, Value};

/// Column names plus rows of JSON values (numbers stay numbers).
#[derive(Debug, Default, Clone)]
pub struct Rows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Value>>,
}

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

/// Longest cell shown in table mode; JSON and CSV are never cut.
const TABLE_CELL_MAX: usize = 120;

pub fn print(out: &mut dyn Write, rows: &Rows, format: Format) -> io::Result<()> {
    match format {
        Format::Table => print_table(out, rows),
        Format::Json => print_json(out, rows),
        Format::Csv => print_csv(out, rows),
    }
}

pub fn print_json(out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
    let objects: Vec<Value> = rows
        .rows
        .iter()
        .map(|row| {
            let map: Map<String, Value> = rows
                .columns
                .iter()
                .cloned()
                .zip(row.iter().cloned())
                .collect();
            Value::Object(map)
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &objects)?;
    writeln!(out)
}

fn print_csv(out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .map(|cell| {
                if cell.contains([',', '"', '\n', '\r']) {
                    format!("\"{}\"", cell.replace('"', "\"\""))
                } else {
                    cell.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    writeln!(out, "{}", line(rows.columns.clone()))?;
    for row in &rows.rows {
        writeln!(out, "{}", line(row.iter().map(plain).collect()))?;
    }
    Ok(())
}

fn print_table(out: &mut dyn Write, rows: &Rows) -> io::Result<()> {
    let cells: Vec<Vec<String>> = rows
        .rows
        .iter()
        .map(|row| row.iter().map(table_cell).collect())
        .collect();
    let mut widths: Vec<usize> = rows.columns.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (index, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(index) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let render = |row: &[String]| -> String {
        row.iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    writeln!(out, "{}", render(&rows.columns))?;
    let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
    writeln!(out, "{}", render(&rule))?;
    for row in &cells {
        writeln!(out, "{}", render(row))?;
    }
    Ok(())
}

/// A value as plain text (CSV, table): strings unquoted, null empty.
pub fn plain(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn table_cell(value: &Value) -> String {
    let text = plain(value).replace('\n', "⏎").replace('\t', " ");
    shorten(&text, TABLE_CELL_MAX)
}

/// Cuts `text` to at most `max` characters, marking the cut with `…`.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}
