//! CSV of any list of answers: one column per field of the serialised
//! value, in its order; nested values as compact JSON. CSV is data, so its
//! text is exact, except on a terminal, where control characters are shown
//! (`render::safe`) like every other text from sessions.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use super::{Term, safe};

/// Writes a header and one line per item.
pub fn write_csv<T: Serialize>(out: &mut dyn Write, items: &[T], term: &Term) -> io::Result<()> {
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<Value>> = Vec::with_capacity(items.len());
    for item in items {
        let value = serde_json::to_value(item).map_err(io::Error::other)?;
        let Value::Object(map) = value else {
            rows.push(vec![value]);
            continue;
        };
        if columns.is_empty() {
            columns = map.keys().cloned().collect();
        }
        rows.push(
            columns
                .iter()
                .map(|c| map.get(c).cloned().unwrap_or(Value::Null))
                .collect(),
        );
    }
    writeln!(out, "{}", line(columns.iter().cloned(), term))?;
    for row in rows {
        writeln!(out, "{}", line(row.iter().map(plain), term))?;
    }
    Ok(())
}

/// One CSV line of `cells`, quoted where needed.
pub(super) fn line(cells: impl Iterator<Item = String>, term: &Term) -> String {
    cells
        .map(|cell| match term.is_terminal {
            true => safe(&cell).into_owned(),
            false => cell,
        })
        .map(|cell| {
            if cell.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", cell.replace('"', "\"\""))
            } else {
                cell
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A value as a CSV field: strings unquoted, null empty, the rest as JSON.
pub(super) fn plain(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
