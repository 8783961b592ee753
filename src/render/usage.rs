//! `piidx usage` and `piidx tools`: their tables, and their rows for
//! `--json`/`--csv` (numbers stay numbers, no total row).
//!
//! The usage table has every column when the terminal is wide enough; on a
//! narrow one it keeps the key, the token totals and the cost (as ccusage's
//! compact mode does) and says so.

use std::io::{self, Write};

use serde_json::{Map, Value, json};

use super::{
    Cell, Column, Format, Table, Term, group_digits, money, one_line, write_csv, write_json,
};
use crate::query::tools::ToolStats;
use crate::query::usage::{GroupBy, UsageReport, UsageRow};

/// The chart column's width in cells.
const BAR_WIDTH: usize = 30;

pub fn write(
    out: &mut dyn Write,
    report: &UsageReport,
    format: Format,
    chart: bool,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &objects(report)),
        Format::Csv => write_csv(out, &objects(report), term),
        Format::Table => {
            // Keys are cut in the compact layouts only.
            let fits = |table: &Table, layout: Layout| match term.width {
                None => true,
                Some(w) if layout >= Layout::Medium => table.natural_width() <= w,
                Some(w) => table.fits(w),
            };
            let full = table(report, Layout::Full, chart);
            if fits(&full, Layout::Full) {
                return full.write(out, term);
            }
            let chosen = [Layout::Medium, Layout::Compact]
                .into_iter()
                .map(|layout| (table(report, layout, chart), layout))
                .find(|(table, layout)| fits(table, *layout))
                .map_or_else(|| table(report, Layout::Narrow, false), |(table, _)| table);
            chosen.write(out, term)?;
            let note = format!(
                "({} more columns in a wider terminal or --json)",
                full.columns.len() - chosen.columns.len()
            );
            writeln!(out, "{}", term.theme().dim(&note))
        }
    }
}

/// The warning for unpriced usage, if any is left.
pub fn unpriced_warning(report: &UsageReport) -> Option<String> {
    (report.total.unpriced_tokens > 0).then(|| {
        format!(
            "{} tokens have no price (Pi recorded cost 0 or none) and are NOT included in cost: {}; pass --prices FILE to price them",
            group_digits(report.total.unpriced_tokens),
            report.unpriced_models.join(", ")
        )
    })
}

/// One object per row, with the columns the report has (`usage --json`).
pub fn objects(report: &UsageReport) -> Vec<Value> {
    report.rows.iter().map(|row| object(report, row)).collect()
}

/// One row (or the total) as `usage --json` prints it.
pub fn object(report: &UsageReport, row: &UsageRow) -> Value {
    let mut map = Map::new();
    map.insert("key".into(), json!(row.key));
    map.insert("records".into(), json!(row.records));
    map.insert("input_tokens".into(), json!(row.input_tokens));
    map.insert("output_tokens".into(), json!(row.output_tokens));
    map.insert("cache_read_tokens".into(), json!(row.cache_read_tokens));
    map.insert("cache_write_tokens".into(), json!(row.cache_write_tokens));
    map.insert("total_tokens".into(), json!(row.total_tokens));
    map.insert("cost".into(), dollars(row.cost));
    map.insert("unpriced_tokens".into(), json!(row.unpriced_tokens));
    if report.repriced {
        map.insert("repriced_tokens".into(), json!(row.repriced_tokens));
    }
    if report.subagents {
        map.insert("subagent_runs".into(), json!(row.subagent_runs));
        map.insert("subagent_tokens".into(), json!(row.subagent_tokens));
        map.insert("subagent_cost".into(), dollars(row.subagent_cost));
    }
    Value::Object(map)
}

/// Dollars to the millionth: sums of floats carry noise below that.
fn dollars(value: f64) -> Value {
    let rounded = (value * 1e6).round() / 1e6;
    serde_json::Number::from_f64(rounded).map_or(Value::Null, Value::Number)
}

/// How many columns the usage table shows, from all to the fewest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layout {
    /// Key, total, cost (marked `!` when some tokens have no price).
    Narrow,
    /// And input and output.
    Compact,
    /// And cache reads and writes, unpriced tokens, subagent cost.
    Medium,
    /// Every column.
    Full,
}

type Getter = fn(&UsageRow) -> String;

/// The table for people: grouped digits, dollars, a total row, and an
/// optional bar per row (share of the largest cost, else of tokens).
fn table(report: &UsageReport, layout: Layout, chart: bool) -> Table {
    let by_cost = report.rows.iter().any(|r| r.cost + r.subagent_cost > 0.0);
    let measure = |r: &UsageRow| {
        if by_cost {
            r.cost + r.subagent_cost
        } else {
            (r.total_tokens + r.subagent_tokens) as f64
        }
    };
    let max = report.rows.iter().map(measure).fold(0.0, f64::max);
    let unpriced_column = layout >= Layout::Medium;
    let key_column = match report.by {
        GroupBy::Project => Column::path("key"),
        _ => Column::text("key"),
    };
    // (the least layout that shows it, whether the report has it, column, cell)
    let all: [(Layout, bool, Column, Getter); 14] = [
        (Layout::Narrow, true, key_column, |r| one_line(&r.key)),
        (Layout::Full, true, Column::number("records"), |r| {
            group_digits(r.records)
        }),
        (Layout::Compact, true, Column::number("input"), |r| {
            group_digits(r.input_tokens)
        }),
        (Layout::Compact, true, Column::number("output"), |r| {
            group_digits(r.output_tokens)
        }),
        (Layout::Medium, true, Column::number("cache read"), |r| {
            group_digits(r.cache_read_tokens)
        }),
        (Layout::Medium, true, Column::number("cache write"), |r| {
            group_digits(r.cache_write_tokens)
        }),
        (Layout::Narrow, true, Column::number("total"), |r| {
            group_digits(r.total_tokens)
        }),
        (
            Layout::Narrow,
            unpriced_column,
            Column::number("cost"),
            |r| money(r.cost),
        ),
        (
            Layout::Narrow,
            !unpriced_column,
            Column::number("cost"),
            |r| {
                let mark = if r.unpriced_tokens > 0 { " !" } else { "" };
                format!("{}{mark}", money(r.cost))
            },
        ),
        (Layout::Medium, true, Column::number("unpriced"), |r| {
            if r.unpriced_tokens > 0 {
                format!("{} !", group_digits(r.unpriced_tokens))
            } else {
                "0".to_owned()
            }
        }),
        (
            Layout::Full,
            report.repriced,
            Column::number("repriced"),
            |r| group_digits(r.repriced_tokens),
        ),
        (
            Layout::Full,
            report.subagents,
            Column::number("subagent runs"),
            |r| group_digits(r.subagent_runs),
        ),
        (
            Layout::Full,
            report.subagents,
            Column::number("subagent tokens"),
            |r| group_digits(r.subagent_tokens),
        ),
        (
            Layout::Medium,
            report.subagents,
            Column::number("subagent cost"),
            |r| money(r.subagent_cost),
        ),
    ];
    let columns: Vec<(Column, Getter)> = all
        .into_iter()
        .filter(|(least, has, _, _)| *has && layout >= *least)
        .map(|(_, _, column, get)| (column, get))
        .collect();
    let mut table = Table::new(columns.iter().map(|(column, _)| column.clone()).collect());
    if chart {
        table.columns.push(Column::fixed(if by_cost {
            "cost chart"
        } else {
            "token chart"
        }));
    }
    let theme_total = anstyle::Style::new().effects(anstyle::Effects::BOLD);
    for row in &report.rows {
        let mut cells: Vec<Cell> = columns.iter().map(|(_, get)| get(row).into()).collect();
        if chart {
            cells.push(bar(measure(row), max, BAR_WIDTH).into());
        }
        table.push(cells);
    }
    let total: Vec<Cell> = columns
        .iter()
        .map(|(_, get)| Cell::styled(get(&report.total), theme_total))
        .collect();
    table.push(total);
    table
}

/// A bar of `width` cells in eighth blocks for `value / max`.
pub fn bar(value: f64, max: f64, width: usize) -> String {
    if max <= 0.0 || value <= 0.0 {
        return String::new();
    }
    let eighths = ((value / max) * (width * 8) as f64).round().max(1.0) as usize;
    let mut out = "█".repeat(eighths / 8);
    let partial = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"][eighths % 8];
    out.push_str(partial);
    out
}

/// `piidx tools`.
pub fn write_tools(
    out: &mut dyn Write,
    stats: &[ToolStats],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &stats),
        Format::Csv => write_csv(out, stats, term),
        Format::Table => {
            let mut table = Table::new(vec![
                Column::text("key"),
                Column::number("calls"),
                Column::number("errors"),
                Column::number("error %"),
                Column::number("no result").droppable(3),
                Column::number("median"),
                Column::number("p95").droppable(2),
                Column::number("largest output").droppable(4),
                Column::text("largest in (session entry)").droppable(5),
            ]);
            let ms = |ms: Option<i64>| ms.map(duration).unwrap_or_default();
            for s in stats {
                table.push(vec![
                    one_line(&s.key).into(),
                    group_digits(s.calls).into(),
                    group_digits(s.errors).into(),
                    format!("{:.1}", s.error_rate * 100.0).into(),
                    group_digits(s.no_result).into(),
                    ms(s.median_ms).into(),
                    ms(s.p95_ms).into(),
                    s.max_result_len.map(bytes).unwrap_or_default().into(),
                    one_line(s.largest.as_deref().unwrap_or("")).into(),
                ]);
            }
            table.write(out, term)
        }
    }
}

/// `850 ms`, `12.3 s`, `4.0 min`.
pub fn duration(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{:.1} min", ms as f64 / 60_000.0)
    }
}

/// `512 B`, `12.3 KB`, `4.5 MB`.
pub fn bytes(n: i64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MB", n as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars() {
        assert_eq!(bar(1.0, 1.0, 4), "████");
        assert_eq!(bar(0.5, 1.0, 4), "██");
        assert_eq!(bar(1.0 / 8.0, 1.0, 4), "▌");
        assert_eq!(bar(0.0, 1.0, 4), "");
    }

    #[test]
    fn units() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(bytes(2048), "2.0 KB");
    }
}
