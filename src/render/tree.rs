//! `piidx tree`: a session's entries drawn as a tree, one line per entry,
//! the current branch marked (`•`, the leaf `◀`) and coloured, branch
//! points counted (`⑂2`), labels and context edits beside their entries.

use std::io::{self, Write};

use unicode_width::UnicodeWidthStr;

use super::table::fit;
use super::transcript::edit_marks;
use super::{Term, safe};
use crate::query::tree::TreeOutline;

/// Summaries are cut to what is left of the line (at least this much).
const MIN_SUMMARY: usize = 20;
/// Without a terminal width, summaries are cut to this many columns.
const SUMMARY_WIDTH: usize = 90;

pub fn write(out: &mut dyn Write, outline: &TreeOutline, term: &Term) -> io::Result<()> {
    let theme = term.theme();
    // The path whole (it is there to be copied), on a line of its own.
    writeln!(out, "{}", theme.bold(&safe(&outline.session_id)))?;
    writeln!(out, "{}", theme.dim(&safe(&outline.path)))?;
    // Explicit stack (deep trees are common): (entry, prefix of its own
    // line, prefix of its children's lines).
    let mut stack: Vec<(usize, String, String)> = Vec::new();
    let multi_root = outline.roots.len() > 1;
    for (i, &root) in outline.roots.iter().enumerate().rev() {
        let (own, rest) = match (multi_root, i + 1 == outline.roots.len()) {
            (false, _) => ("", ""),
            (true, true) => ("└─ ", "   "),
            (true, false) => ("├─ ", "│  "),
        };
        stack.push((root, own.to_owned(), rest.to_owned()));
    }
    while let Some((index, own, rest)) = stack.pop() {
        let entry = &outline.entries[index];
        let mark = if entry.is_leaf {
            "◀"
        } else if entry.on_branch {
            "•"
        } else {
            " "
        };
        let mut notes = String::new();
        if entry.child_count > 1 {
            notes.push_str(&format!(" ⑂{}", entry.child_count));
        }
        if let Some(label) = &entry.label {
            notes.push_str(&format!(" [{}]", safe(label)));
        }
        if !entry.edits.is_empty() {
            notes.push_str(&format!(" {}", edit_marks(&entry.edits)));
        }
        let id = safe(&entry.id);
        let used = mark.width() + 1 + own.width() + id.width() + 1 + notes.width();
        let room = term
            .width
            .map_or(SUMMARY_WIDTH, |width| width.saturating_sub(used))
            .max(MIN_SUMMARY);
        let summary = fit(&safe(&entry.summary), room);
        let line = format!("{mark} {own}{id} {summary}");
        let line = if entry.on_branch {
            theme.current(&line)
        } else {
            line
        };
        writeln!(out, "{line}{}", theme.dim(&notes))?;
        match entry.children.as_slice() {
            [only] => stack.push((*only, rest.clone(), rest)),
            kids => {
                for (i, &kid) in kids.iter().enumerate().rev() {
                    let (a, b) = if i + 1 == kids.len() {
                        ("└─ ", "   ")
                    } else {
                        ("├─ ", "│  ")
                    };
                    stack.push((kid, format!("{rest}{a}"), format!("{rest}{b}")));
                }
            }
        }
    }
    Ok(())
}
