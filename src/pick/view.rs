//! Drawing the picker with ratatui: the list of rows, the preview pane
//! (beside the list on a wide terminal, under it on a narrow one), the
//! status line, the query line and the keys.
//!
//! Every text from a session goes through `render::safe`/`one_line` before
//! it reaches a cell: it is untrusted.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph};

use super::preview::Preview;
use super::results::{Found, Row};
use super::state::{Reach, State};
use crate::query::search::{MARK_CLOSE, MARK_OPEN};
use crate::render::{minute, one_line, safe};

/// Below this width the preview goes under the list.
const SIDE_BY_SIDE: u16 = 110;

const KEYS: &str =
    "Enter resume · ^O show · ^X export · ^Y path · Tab here/all · ^R role · Esc quit";

/// Everything a frame shows.
pub struct Screen<'a> {
    pub state: &'a State,
    pub found: &'a Found,
    pub preview: Option<&'a Preview>,
    pub current_dir: &'a str,
}

/// Draws the frame; returns the height of the preview pane's text.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen<'_>) -> u16 {
    let [body, status, prompt, keys] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let (list_area, preview_area) = if body.width >= SIDE_BY_SIDE {
        let [list, preview] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)])
                .areas(body);
        (list, preview)
    } else {
        let [list, preview] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
        (list, preview)
    };
    draw_list(frame, list_area, screen);
    let preview_height = draw_preview(frame, preview_area, screen.preview);
    frame.render_widget(Paragraph::new(status_line(screen)), status);
    draw_prompt(frame, prompt, screen.state);
    frame.render_widget(
        Paragraph::new(Span::styled(KEYS, Style::new().add_modifier(Modifier::DIM))),
        keys,
    );
    preview_height
}

fn draw_list(frame: &mut Frame<'_>, area: Rect, screen: &Screen<'_>) {
    let items: Vec<ListItem<'_>> = screen.found.rows.iter().map(row_line).collect();
    let list = List::new(items)
        .block(
            Block::new()
                .borders(Borders::RIGHT | Borders::BOTTOM)
                // The divider meets the preview's bottom line, which goes on
                // to its right: a junction, not a corner.
                .border_set(ratatui::symbols::border::Set {
                    bottom_right: "┴",
                    ..ratatui::symbols::border::PLAIN
                }),
        )
        .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("▌");
    let mut state = ListState::default();
    if !screen.found.rows.is_empty() {
        state.select(Some(screen.state.selected));
    }
    frame.render_stateful_widget(list, area, &mut state);
}

fn row_line(row: &Row) -> ListItem<'static> {
    let time = row.time_ms.map_or_else(|| " ".repeat(16), minute);
    let project = project_of(&row.cwd);
    let mut spans = vec![
        Span::styled(time, Style::new().add_modifier(Modifier::DIM)),
        Span::raw(" "),
        Span::styled(pad(&project, 14), Style::new().fg(Color::Cyan)),
        Span::raw(" "),
    ];
    match &row.hit {
        None => {
            spans.push(Span::styled(
                "session ",
                Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
            ));
            spans.push(Span::styled(
                one_line(&row.title),
                Style::new().add_modifier(Modifier::BOLD),
            ));
        }
        Some(hit) => {
            spans.push(Span::styled(
                format!("{:<11.11} ", hit.role),
                Style::new().fg(Color::Yellow),
            ));
            spans.extend(snippet_spans(&hit.snippet));
        }
    }
    ListItem::new(Line::from(spans))
}

/// `text` cut or padded to `width` columns (CJK takes two).
fn pad(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.extend(std::iter::repeat_n(' ', width - used));
    out
}

/// The last component of a cwd, the way people name their projects.
fn project_of(cwd: &str) -> String {
    let name = cwd.trim_end_matches('/').rsplit('/').next().unwrap_or(cwd);
    one_line(if name.is_empty() { cwd } else { name })
}

/// Characters of a snippet kept before its first match, so that the match
/// shows in a narrow list.
const LEAD: usize = 24;

/// A snippet on one line, its matches highlighted.
fn snippet_spans(snippet: &str) -> Vec<Span<'static>> {
    let matched = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
    let mut spans = Vec::new();
    let lead = snippet.split(MARK_OPEN).next().unwrap_or("");
    let lead_chars = lead.chars().count();
    let snippet = if lead_chars > LEAD && snippet.contains(MARK_OPEN) {
        let cut: String = lead.chars().skip(lead_chars - LEAD).collect();
        format!("…{cut}{}", &snippet[lead.len()..])
    } else {
        snippet.to_owned()
    };
    for (i, part) in snippet.split(MARK_OPEN).enumerate() {
        let (hit, rest) = match part.split_once(MARK_CLOSE) {
            Some((hit, rest)) if i > 0 => (Some(hit), rest),
            _ => (None, part),
        };
        if let Some(hit) = hit {
            spans.push(Span::styled(flat(hit), matched));
        }
        if !rest.is_empty() {
            spans.push(Span::raw(flat(rest)));
        }
    }
    spans
}

/// Text made safe, on one line, runs of white space one space (not
/// trimmed: a match's neighbours keep their space).
fn flat(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in safe(text).chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

fn draw_preview(frame: &mut Frame<'_>, area: Rect, preview: Option<&Preview>) -> u16 {
    let block = Block::new().borders(Borders::BOTTOM);
    let inner = block.inner(area);
    let Some(preview) = preview else {
        frame.render_widget(block, area);
        return inner.height;
    };
    let highlight = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
    let lines: Vec<Line<'_>> = preview
        .lines
        .iter()
        .skip(preview.top)
        .take(inner.height as usize)
        .map(|line| {
            let lower = line.to_lowercase();
            if !preview.marks.is_empty() && preview.marks.iter().any(|m| lower.contains(m.as_str()))
            {
                Line::styled(line.as_str(), highlight)
            } else {
                Line::raw(line.as_str())
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
    inner.height
}

fn status_line(screen: &Screen<'_>) -> Line<'static> {
    let reach = match screen.state.reach {
        Reach::Here => format!("here: {}", one_line(screen.current_dir)),
        Reach::All => "all sessions".to_owned(),
    };
    let query = screen.state.query();
    let mut parts = vec![reach];
    if !query.roles.is_empty() {
        parts.push(format!("role {}", query.roles.join(",")));
    }
    if let Some(model) = &query.model {
        parts.push(format!("model {}", one_line(model)));
    }
    if let Some(since) = &query.since {
        parts.push(format!("since {}", one_line(since)));
    }
    let found = screen.found;
    parts.push(format!("{} sessions · {} hits", found.sessions, found.hits));
    let mut spans = vec![Span::styled(
        parts.join(" · "),
        Style::new().add_modifier(Modifier::DIM),
    )];
    if let Some(problem) = &found.problem {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(
            one_line(problem),
            Style::new().fg(Color::Yellow),
        ));
    }
    Line::from(spans)
}

fn draw_prompt(frame: &mut Frame<'_>, area: Rect, state: &State) {
    let prompt = "> ";
    let text = state.line.text();
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                prompt,
                Style::new().fg(Color::Green).add_modifier(Modifier::BOLD),
            ),
            Span::raw(one_line(text)),
        ])),
        area,
    );
    let before: String = text.chars().take(state.line.cursor()).collect();
    let column = unicode_width::UnicodeWidthStr::width(before.as_str()) + prompt.len();
    let x = area
        .x
        .saturating_add(u16::try_from(column).unwrap_or(u16::MAX));
    frame.set_cursor_position(Position::new(x.min(area.right().saturating_sub(1)), area.y));
}
