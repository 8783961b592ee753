//! `piidx sessions`: the table, and Pi's own `SessionInfo` objects for
//! `--json` and `--csv`.

use std::io::{self, Write};

use crate::query::sessions::SessionInfo;

use super::{Cell, Column, Format, Table, Term, minute, one_line, write_json};

pub fn write(
    out: &mut dyn Write,
    sessions: &[SessionInfo],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => {
            let values: Vec<serde_json::Value> =
                sessions.iter().map(SessionInfo::to_pi_json).collect();
            write_json(out, &values)
        }
        Format::Csv => {
            let values: Vec<serde_json::Value> =
                sessions.iter().map(SessionInfo::to_pi_json).collect();
            super::write_csv(out, &values, term)
        }
        Format::Table => table(sessions).write(out, term),
    }
}

/// The longest id prefix a table shows: two real ids (UUIDv7: a
/// millisecond, then random bits) made in the same millisecond, as a fork
/// and its parent can be, differ within the first 20 characters; a longer
/// one is cut with `…`, and the column shrinks (cut the same way) to fit a
/// narrow terminal.
const ID_WIDTH: usize = 24;

fn fit_id(id: &str) -> String {
    if id.chars().count() <= ID_WIDTH {
        return id.to_owned();
    }
    let mut cut: String = id.chars().take(ID_WIDTH - 1).collect();
    cut.push('…');
    cut
}

/// Newest first; a `*` after the id marks a file Pi's `listAll()` does not
/// list (`--all`).
pub fn table(sessions: &[SessionInfo]) -> Table {
    let mut table = Table::new(vec![
        Column::fixed("modified"),
        Column::number("msgs"),
        Column::text("id"),
        Column::text("name / first message"),
        Column::path("cwd").droppable(1),
    ]);
    for info in sessions {
        let mut id = fit_id(&info.short_id);
        if !info.listed_by_pi {
            id.push('*');
        }
        let title = info.title();
        table.push(vec![
            info.modified_ms.map(minute).unwrap_or_default().into(),
            info.message_count.to_string().into(),
            Cell::styled(id, anstyle::Style::new().effects(anstyle::Effects::BOLD)),
            one_line(title).into(),
            one_line(&info.cwd).into(),
        ]);
    }
    table
}
