//! Aligned tables that fit the terminal: cells are padded by their display
//! width (a CJK character takes two columns), and when a table is wider
//! than the terminal its widest text columns are cut (with `…`) first.

use std::io::{self, Write};

use anstyle::Style;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::term::Term;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A column: its header, alignment, and whether (and where) it may be cut
/// to fit.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub align: Align,
    pub shrink: bool,
    /// Cut the start, not the end: a path's last parts say the most.
    pub keep_end: bool,
    /// When the table cannot fit, or only by cutting a column below half
    /// its width, columns with a `drop` are left out, the highest first;
    /// 0: never.
    pub drop: u8,
}

impl Column {
    /// Text that may be cut to fit the terminal.
    pub fn text(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            align: Align::Left,
            shrink: true,
            keep_end: false,
            drop: 0,
        }
    }

    /// Left out (highest `rank` first) when the table cannot fit.
    pub fn droppable(self, rank: u8) -> Column {
        Column { drop: rank, ..self }
    }

    /// A path: cut at the start to fit.
    pub fn path(name: &str) -> Column {
        Column {
            keep_end: true,
            ..Column::text(name)
        }
    }

    /// Short values (ids, times, kinds): never cut.
    pub fn fixed(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            align: Align::Left,
            shrink: false,
            keep_end: false,
            drop: 0,
        }
    }

    /// Numbers: right-aligned, never cut.
    pub fn number(name: &str) -> Column {
        Column {
            name: name.to_owned(),
            align: Align::Right,
            shrink: false,
            keep_end: false,
            drop: 0,
        }
    }
}

/// One cell: plain text (one line) and a style for terminals.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub text: String,
    pub style: Option<Style>,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, style: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_owned())
    }
}

impl Cell {
    pub fn styled(text: impl Into<String>, style: Style) -> Cell {
        Cell {
            text: text.into(),
            style: Some(style),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
}

/// Columns are never cut below this (nor below their header).
const MIN_WIDTH: usize = 8;
const GAP: usize = 2;
/// Output that is never cut (not a terminal) pads no column past this: a
/// longer cell is written whole and pushes the rest of its own row right,
/// where padding every row to it made each line of `sessions | grep` as
/// long as the longest first message.
const UNCUT_PAD: usize = 100;

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// Whether the table fits `width` columns once its text is cut.
    pub fn fits(&self, width: usize) -> bool {
        let widths = self.widths(Some(width));
        widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1) <= width
    }

    /// Whether the table fits `width` with no column cut below half its
    /// width (else a column had better be left out).
    fn fits_well(&self, width: usize) -> bool {
        let natural = self.widths(None);
        self.fits(width)
            && self
                .widths(Some(width))
                .iter()
                .zip(&natural)
                .all(|(cut, full)| cut * 2 >= *full)
    }

    /// The table without its first column to drop.
    fn without_highest_drop(&self) -> Table {
        let gone = (0..self.columns.len())
            .max_by_key(|&i| self.columns[i].drop)
            .unwrap_or(0);
        let mut table = self.clone();
        table.columns.remove(gone);
        for row in &mut table.rows {
            if gone < row.len() {
                row.remove(gone);
            }
        }
        table
    }

    /// The width of the table when nothing is cut.
    pub fn natural_width(&self) -> usize {
        let widths = self.widths(None);
        widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1)
    }

    /// The column widths: each column's widest cell, then the widest
    /// shrinkable columns cut down in turn until the table fits `limit`.
    pub fn widths(&self, limit: Option<usize>) -> Vec<usize> {
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.name.width()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.text.width());
            }
        }
        let Some(limit) = limit else {
            return widths;
        };
        let floor = |index: usize| self.columns[index].name.width().max(MIN_WIDTH);
        loop {
            let total: usize = widths.iter().sum::<usize>() + GAP * widths.len().saturating_sub(1);
            if total <= limit {
                break;
            }
            let excess = total - limit;
            let mut shrinkable: Vec<usize> = (0..widths.len())
                .filter(|&i| self.columns[i].shrink && widths[i] > floor(i))
                .collect();
            if shrinkable.is_empty() {
                break;
            }
            shrinkable.sort_by_key(|&i| std::cmp::Reverse(widths[i]));
            let widest = shrinkable[0];
            // Down to the next widest, the floor, or just enough.
            let next = shrinkable.get(1).map_or(0, |&i| widths[i]);
            let target = widths[widest]
                .saturating_sub(excess)
                .max(next)
                .max(floor(widest));
            widths[widest] = if target < widths[widest] {
                target
            } else {
                widths[widest] - 1
            };
        }
        widths
    }

    /// The widths rows are padded (and cut) to: fitted to the terminal's
    /// width, or for output that is never cut each column's widest cell,
    /// up to `UNCUT_PAD`.
    fn layout(&self, term: &Term) -> Vec<usize> {
        match term.width {
            Some(_) => self.widths(term.width),
            None => self
                .widths(None)
                .into_iter()
                .map(|width| width.min(UNCUT_PAD))
                .collect(),
        }
    }

    /// Writes the table cut to the terminal's width, leaving out droppable
    /// columns when cutting is not enough.
    pub fn write(&self, out: &mut dyn Write, term: &Term) -> io::Result<()> {
        if let Some(width) = term.width
            && !self.fits_well(width)
            && self.columns.iter().any(|c| c.drop > 0)
        {
            return self.without_highest_drop().write(out, term);
        }
        let widths = self.layout(term);
        self.write_head(out, &widths, term)?;
        // Output that is not a terminal gets every cell whole.
        let cut = term.width.is_some();
        for row in &self.rows {
            writeln!(out, "{}", self.line(row, &widths, term, cut))?;
        }
        Ok(())
    }

    /// The header and the rule under it.
    pub(super) fn write_head(
        &self,
        out: &mut dyn Write,
        widths: &[usize],
        term: &Term,
    ) -> io::Result<()> {
        let header: Vec<Cell> = self
            .columns
            .iter()
            .map(|c| Cell::from(c.name.as_str()))
            .collect();
        self.write_line(out, &header, widths, term)?;
        let rule: Vec<Cell> = widths.iter().map(|w| Cell::from("─".repeat(*w))).collect();
        let rule_line = self.line(&rule, widths, &Term::plain(), true);
        writeln!(out, "{}", term.theme().dim(&rule_line))
    }

    /// One row, cut and padded to `widths`.
    pub(super) fn write_line(
        &self,
        out: &mut dyn Write,
        row: &[Cell],
        widths: &[usize],
        term: &Term,
    ) -> io::Result<()> {
        writeln!(out, "{}", self.line(row, widths, term, true))
    }

    /// `row` padded to `widths`, each cell cut to its width when `cut`.
    fn line(&self, row: &[Cell], widths: &[usize], term: &Term, cut: bool) -> String {
        let theme = term.theme();
        let mut parts = Vec::with_capacity(widths.len());
        for (index, width) in widths.iter().enumerate() {
            let cell = row.get(index).cloned().unwrap_or_default();
            let column = self.columns.get(index);
            let text = if !cut {
                cell.text.clone()
            } else if column.is_some_and(|c| c.keep_end) {
                fit_end(&cell.text, *width)
            } else {
                fit(&cell.text, *width)
            };
            let pad = width.saturating_sub(text.width());
            let padded = match column.map_or(Align::Left, |c| c.align) {
                Align::Left => format!("{text}{}", " ".repeat(pad)),
                Align::Right => format!("{}{text}", " ".repeat(pad)),
            };
            parts.push(match cell.style {
                Some(style) => {
                    // Only the text is styled, not its padding.
                    let trimmed = padded.trim_end();
                    let rest = &padded[trimmed.len()..];
                    format!("{}{rest}", theme.paint(style, trimmed))
                }
                None => padded,
            });
        }
        parts.join(&" ".repeat(GAP)).trim_end().to_owned()
    }
}

/// `text` cut to `width` display columns, the cut marked with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// `text` cut to its last `width` display columns, the cut marked with `…`.
pub fn fit_end(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        kept.push(c);
        used += w;
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut table = Table::new(vec![
            Column::fixed("id"),
            Column::text("title"),
            Column::number("n"),
        ]);
        table.push(vec!["a1".into(), "日本語のセッション".into(), "12".into()]);
        table.push(vec![
            "b2".into(),
            "a much longer english title here".into(),
            "3".into(),
        ]);
        table
    }

    #[test]
    fn cjk_cells_line_up_by_display_width() {
        let mut out = Vec::new();
        table().write(&mut out, &Term::plain()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let end = |line: &str| line.width();
        assert_eq!(end(lines[2]), end(lines[3]), "{text}");
    }

    #[test]
    fn paths_keep_their_end() {
        assert_eq!(fit_end("/home/u/projects/piidx", 10), "…cts/piidx");
        assert_eq!(fit("/home/u/projects/piidx", 10), "/home/u/p…");
    }

    #[test]
    fn the_widest_text_column_is_cut_to_fit() {
        let term = Term {
            color: false,
            width: Some(30),
            is_terminal: true,
        };
        let mut out = Vec::new();
        table().write(&mut out, &term).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().all(|line| line.width() <= 30), "{text}");
        assert!(text.contains('…'), "{text}");
    }
}
