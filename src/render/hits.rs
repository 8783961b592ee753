//! `piidx search`: hits as ripgrep shows matches, each with how to open it;
//! `-l` one line per session; `--json` the hits themselves.
//!
//! A hit takes four lines and a blank one: when, what kind of text and
//! which session; the snippet, matches in colour (or between `«` `»` when
//! there is no colour); the command that shows the entry in its branch;
//! the file and line.

use std::io::{self, Write};

use super::table::fit;
use super::{
    Cell, Column, Format, Table, Term, Theme, minute_of, one_line, safe, short_id, write_csv,
    write_json,
};
use crate::query::search::sessions::SessionHits;
use crate::query::search::{Hit, MARK_CLOSE, MARK_OPEN};
use crate::query::sessions::title;

/// Without a terminal width, titles are cut to this many columns.
const TITLE_WIDTH: usize = 60;

/// The snippet with its match marks as `«` `»`, for programs.
pub fn marked(snippet: &str) -> String {
    snippet.replace(MARK_OPEN, "«").replace(MARK_CLOSE, "»")
}

/// Hits as programs get them (`--json`, `--csv`, serve's API, MCP): each
/// snippet's marks as `«` `»`.
pub fn with_marks(hits: Vec<Hit>) -> Vec<Hit> {
    hits.into_iter()
        .map(|hit| Hit {
            snippet: marked(&hit.snippet),
            ..hit
        })
        .collect()
}

pub fn write(out: &mut dyn Write, hits: &[Hit], format: Format, term: &Term) -> io::Result<()> {
    match format {
        Format::Json | Format::Csv => {
            let hits = with_marks(hits.to_vec());
            if format == Format::Json {
                write_json(out, &hits)
            } else {
                write_csv(out, &hits, term)
            }
        }
        Format::Table => {
            let theme = term.theme();
            for hit in hits {
                write_hit(out, hit, term, &theme)?;
            }
            Ok(())
        }
    }
}

fn write_hit(out: &mut dyn Write, hit: &Hit, term: &Term, theme: &Theme) -> io::Result<()> {
    let when = minute_of(hit.timestamp.as_deref());
    let mut kind = hit.role.clone();
    if let Some(tool) = &hit.tool_name {
        kind.push_str(&format!(" [{}]", one_line(tool)));
    }
    let title = title(hit.session_name.as_deref(), hit.first_message.as_deref()).unwrap_or("");
    let used = when.chars().count() + 2 + kind.chars().count() + 2;
    let room = term
        .width
        .map_or(TITLE_WIDTH, |w| w.saturating_sub(used).max(20));
    writeln!(
        out,
        "{}  {}  {}",
        theme.dim(&when),
        theme.role(&hit.role, &kind),
        theme.bold(&fit(&one_line(title), room))
    )?;
    writeln!(out, "  {}", snippet(&hit.snippet, theme))?;
    if let Some(run) = &hit.run {
        let place = if run.child_session {
            format!(
                "in the child session of subagent run #{} of {} ({}, {}) delegated by session {}",
                run.position,
                run.agent.as_deref().unwrap_or("?"),
                run.mode.as_deref().unwrap_or("?"),
                run.run_id.as_deref().unwrap_or("no run id"),
                run.parent_session_id,
            )
        } else {
            format!(
                "in subagent run #{} of {} ({}, {})",
                run.position,
                run.agent.as_deref().unwrap_or("?"),
                run.mode.as_deref().unwrap_or("?"),
                run.run_id.as_deref().unwrap_or("no run id"),
            )
        };
        writeln!(out, "  {}", theme.dim(&one_line(&place)))?;
    }
    if let Some(file) = &hit.full_output {
        let place = format!(
            "in the full output of the tool result ({}): {}",
            safe(&hit.json_path),
            safe(file)
        );
        writeln!(out, "  {}", theme.dim(&one_line(&place)))?;
    }
    let open = format!(
        "piidx show {} --branch {}",
        safe(&hit.session_id),
        safe(&hit.entry_id)
    );
    writeln!(out, "  {}", theme.dim(&open))?;
    let place = format!("{}:{}", safe(&hit.session_path), hit.line_no);
    writeln!(out, "  {}\n", theme.dim(&place))
}

/// The snippet on one line, safe for a terminal, its matches painted (or
/// marked).
fn snippet(text: &str, theme: &Theme) -> String {
    let mut flat = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_whitespace() {
            if !flat.ends_with(' ') {
                flat.push(' ');
            }
        } else if c == MARK_OPEN || c == MARK_CLOSE {
            flat.push(c);
        } else {
            flat.push_str(&safe(c.encode_utf8(&mut [0; 4])));
        }
    }
    let flat = flat.trim();
    if !theme.is_on() {
        return marked(flat);
    }
    let mut out = String::new();
    let mut rest = flat;
    while let Some(open) = rest.find(MARK_OPEN) {
        out.push_str(&rest[..open]);
        let after = &rest[open + MARK_OPEN.len_utf8()..];
        let close = after.find(MARK_CLOSE).unwrap_or(after.len());
        out.push_str(&theme.matched(&after[..close]));
        rest = after.get(close + MARK_CLOSE.len_utf8()..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// `search -l`: one line per session.
pub fn write_sessions(
    out: &mut dyn Write,
    sessions: &[SessionHits],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &sessions),
        Format::Csv => write_csv(out, sessions, term),
        Format::Table => {
            let mut table = Table::new(vec![
                Column::fixed("session"),
                Column::fixed("best hit"),
                Column::text("name / first message"),
                Column::path("cwd").droppable(1),
            ]);
            let bold = anstyle::Style::new().effects(anstyle::Effects::BOLD);
            for session in sessions {
                let title = title(
                    session.session_name.as_deref(),
                    session.first_message.as_deref(),
                )
                .unwrap_or("");
                table.push(vec![
                    Cell::styled(short_id(&session.session_id), bold),
                    minute_of(session.best_timestamp.as_deref()).into(),
                    one_line(title).into(),
                    one_line(&session.cwd).into(),
                ]);
            }
            table.write(out, term)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Term;

    #[test]
    fn snippets_keep_their_marks_and_lose_control_characters() {
        let text = format!("a\n {MARK_OPEN}word{MARK_CLOSE}\u{1b}[2J  b");
        assert_eq!(snippet(&text, &Term::plain().theme()), "a «word»^[[2J b");
        let coloured = Term {
            color: true,
            width: None,
            is_terminal: true,
        };
        let painted = snippet(&text, &coloured.theme());
        assert!(
            painted.contains("\u{1b}[1m\u{1b}[31mword") || painted.contains("word\u{1b}[0m"),
            "{painted:?}"
        );
        assert!(!painted.contains(MARK_OPEN));
    }
}
