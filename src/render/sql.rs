//! `piidx sql`: rows printed as they arrive. JSON and CSV go out row by
//! row; a table measures its columns on the first rows (`SAMPLE`) and cuts
//! later cells that are wider, so it too starts at once and holds little.

use std::io::{self, Write};

use serde_json::{Map, Value};
use unicode_width::UnicodeWidthStr;

use super::csv::{line, plain};
use super::table::fit;
use super::{Cell, Column, Format, Table, Term, safe};
use crate::query::sql::RowSink;

/// Rows a table measures its columns on before it prints.
const SAMPLE: usize = 1000;
/// Longest cell in a table (JSON and CSV are never cut).
const CELL_MAX: usize = 120;

/// Prints rows in `format` to `out`.
pub struct Printer<'a> {
    out: &'a mut dyn Write,
    format: Format,
    term: Term,
    columns: Vec<String>,
    rows: usize,
    /// Table rows held until the columns are measured.
    sample: Vec<Vec<Value>>,
    /// The table, once measured, and its column widths.
    table: Option<(Table, Vec<usize>)>,
}

impl<'a> Printer<'a> {
    pub fn new(out: &'a mut dyn Write, format: Format, term: Term) -> Printer<'a> {
        Printer {
            out,
            format,
            term,
            columns: Vec::new(),
            rows: 0,
            sample: Vec::new(),
            table: None,
        }
    }

    /// Measures the sample, prints the header and the sample.
    fn start_table(&mut self) -> io::Result<()> {
        let numeric: Vec<bool> = (0..self.columns.len())
            .map(|index| {
                let mut values = self.sample.iter().map(|row| &row[index]);
                values.clone().any(|v| !v.is_null()) && values.all(|v| v.is_null() || v.is_number())
            })
            .collect();
        let columns = self
            .columns
            .iter()
            .zip(numeric)
            .map(|(name, numeric)| {
                if numeric {
                    Column::number(name)
                } else {
                    Column::text(name)
                }
            })
            .collect();
        let mut table = Table::new(columns);
        for row in std::mem::take(&mut self.sample) {
            table.push(cells(&row));
        }
        let widths = table.widths(self.term.width);
        table.write_head(self.out, &widths, &self.term)?;
        for row in &table.rows {
            table.write_line(self.out, row, &widths, &self.term)?;
        }
        table.rows.clear();
        self.table = Some((table, widths));
        Ok(())
    }
}

fn cells(row: &[Value]) -> Vec<Cell> {
    row.iter()
        .map(|value| {
            let text = plain(value).replace('\n', "⏎").replace('\t', " ");
            let text = safe(&text);
            if text.width() > CELL_MAX {
                fit(&text, CELL_MAX).into()
            } else {
                text.into_owned().into()
            }
        })
        .collect()
}

impl RowSink for Printer<'_> {
    fn columns(&mut self, names: &[String]) -> io::Result<()> {
        self.columns = names.to_vec();
        match self.format {
            Format::Csv => writeln!(self.out, "{}", line(names.iter().cloned(), &self.term)),
            Format::Json | Format::Table => Ok(()),
        }
    }

    fn row(&mut self, values: Vec<Value>) -> io::Result<()> {
        self.rows += 1;
        match self.format {
            Format::Csv => writeln!(self.out, "{}", line(values.iter().map(plain), &self.term)),
            Format::Json => {
                // The layout `to_writer_pretty` gives the whole array.
                let object: Map<String, Value> = self.columns.iter().cloned().zip(values).collect();
                let text = serde_json::to_string_pretty(&object).map_err(io::Error::other)?;
                let open = if self.rows == 1 { "[\n" } else { ",\n" };
                self.out.write_all(open.as_bytes())?;
                for (i, part) in text.lines().enumerate() {
                    if i > 0 {
                        self.out.write_all(b"\n")?;
                    }
                    write!(self.out, "  {part}")?;
                }
                Ok(())
            }
            Format::Table => match &self.table {
                Some((table, widths)) => {
                    table.write_line(self.out, &cells(&values), widths, &self.term)
                }
                None => {
                    self.sample.push(values);
                    if self.sample.len() >= SAMPLE {
                        self.start_table()?;
                    }
                    Ok(())
                }
            },
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        match self.format {
            Format::Csv => Ok(()),
            Format::Json if self.rows == 0 => writeln!(self.out, "[]"),
            Format::Json => writeln!(self.out, "\n]"),
            Format::Table if self.table.is_none() => self.start_table(),
            Format::Table => Ok(()),
        }?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn print(format: Format, rows: &[Vec<Value>]) -> String {
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, format, Term::plain());
        printer.columns(&["a".to_owned(), "b".to_owned()]).unwrap();
        for row in rows {
            printer.row(row.clone()).unwrap();
        }
        printer.finish().unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn streamed_json_is_the_pretty_array() {
        let rows = vec![vec![json!(1), json!("x\ny")], vec![json!(null), json!(2.5)]];
        let objects: Vec<Value> = rows
            .iter()
            .map(|row| json!({"a": row[0], "b": row[1]}))
            .collect();
        let mut expected = serde_json::to_string_pretty(&objects).unwrap();
        expected.push('\n');
        assert_eq!(print(Format::Json, &rows), expected);
        assert_eq!(print(Format::Json, &[]), "[]\n");
    }

    #[test]
    fn tables_align_numbers_right() {
        let text = print(
            Format::Table,
            &[vec![json!(1), json!("x")], vec![json!(100), json!("y")]],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], "  1  x");
        assert_eq!(lines[3], "100  y");
    }
}
