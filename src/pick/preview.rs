//! The preview pane: the selected session's transcript (the branch `show`
//! prints), opened at the hit, without colour (the pane styles it).
//!
//! A session can be large, so previews are made on a thread of their own
//! (`Previewer`), on its own connection: keys never wait for one, and a
//! preview no longer wanted is skipped. Only the entries around the hit
//! (the first ones for a session's own row) are rendered.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};

use crate::query::tree::{self, SessionTree};
use crate::render::transcript::{self, Options, Style, Tools};
use crate::render::{Term, one_line, safe};
use crate::store::Index;

use super::results::Row;
use crate::query::search::{MARK_CLOSE, MARK_OPEN};

/// Entries rendered before and after the hit.
const AROUND: usize = 8;

/// Makes previews on its thread; dropped, the thread ends.
pub struct Previewer {
    asks: Sender<(u64, Row, usize)>,
    made: Receiver<(u64, Preview)>,
}

impl Previewer {
    pub fn start(db: PathBuf) -> Previewer {
        let (asks, asked) = mpsc::channel::<(u64, Row, usize)>();
        let (done, made) = mpsc::channel();
        std::thread::spawn(move || {
            let index = Index::open(&db);
            while let Ok(mut ask) = asked.recv() {
                // Only the newest selection matters.
                while let Ok(newer) = asked.try_recv() {
                    ask = newer;
                }
                let (id, row, height) = ask;
                let preview = match &index {
                    Ok(index) => preview(index, &row, height),
                    Err(err) => Preview {
                        lines: vec![format!("cannot open the index: {err}")],
                        ..Preview::default()
                    },
                };
                if done.send((id, preview)).is_err() {
                    break;
                }
            }
        });
        Previewer { asks, made }
    }

    /// Asks for the preview of `row`, known as `id`.
    pub fn ask(&self, id: u64, row: Row, height: usize) {
        let _ = self.asks.send((id, row, height));
    }

    /// The newest preview made since the last call, if any.
    pub fn ready(&self) -> Option<(u64, Preview)> {
        self.made.try_iter().last()
    }
}

/// A transcript and the line to show first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    pub lines: Vec<String>,
    pub top: usize,
    /// The words to highlight (the hit's matches).
    pub marks: Vec<String>,
}

/// The preview of `row`, with the hit's line about a third of `height`
/// down the pane.
pub fn preview(index: &Index, row: &Row, height: usize) -> Preview {
    match load(index, row) {
        Ok(preview) => around_hit(preview, height),
        Err(err) => Preview {
            lines: vec![format!("cannot show this session: {err}")],
            ..Preview::default()
        },
    }
}

fn load(index: &Index, row: &Row) -> Result<Preview, tree::ViewError> {
    let tree = index.in_snapshot(|index| {
        let found = tree::resolve(index, &row.session_path)?;
        SessionTree::load(index, found)
    })?;
    let options = Options {
        style: Style::Text,
        full_system: false,
        // Whole: the hit may be anywhere in a tool's output.
        tools: Tools::Full,
        notes: false,
        theme: Term::plain().theme(),
    };
    let hit = row
        .hit
        .as_ref()
        .and_then(|hit| tree.find(&hit.entry_id).ok());
    // The branch through the hit: the current one when it holds the hit,
    // else the hit's own.
    let leaf = tree.leaf();
    let path = match (hit, leaf) {
        (Some(hit), Some(leaf)) if tree.path_to(leaf).contains(&hit) => tree.path_to(leaf),
        (Some(hit), _) => tree.path_to(hit),
        (None, Some(leaf)) => tree.path_to(leaf),
        (None, None) => Vec::new(),
    };
    // The entries around the hit, or the first ones.
    let at = hit.and_then(|hit| path.iter().position(|&node| node == hit));
    let from = at.map_or(0, |at| at.saturating_sub(AROUND));
    let to = at.map_or(2 * AROUND, |at| at + AROUND + 1).min(path.len());
    let window = &path[from..to];
    let text = transcript::context(&tree, window, options);
    // Where the hit's entry starts: the transcript up to its parent is
    // printed the same way, so its length is the hit's first line.
    let start = at.map(|at| {
        transcript::context(&tree, &window[..at - from], options)
            .lines()
            .count()
    });
    let marks: Vec<String> = row
        .hit
        .as_ref()
        .map(|hit| marked_words(&hit.snippet))
        .unwrap_or_default();
    let lines: Vec<String> = text
        .lines()
        .map(|line| safe(line).replace('\t', "    "))
        .collect();
    let top = start.map(|start| {
        let start = start.saturating_sub(1);
        lines
            .iter()
            .enumerate()
            .skip(start)
            .find(|(_, line)| {
                let line = line.to_lowercase();
                marks.iter().any(|mark| line.contains(mark.as_str()))
            })
            .map_or(start, |(at, _)| at)
    });
    Ok(Preview {
        lines,
        top: top.unwrap_or(0),
        marks,
    })
}

/// The hit's line a third of the way down, not past the end.
fn around_hit(mut preview: Preview, height: usize) -> Preview {
    if preview.top > 0 {
        preview.top = preview.top.saturating_sub(height / 3);
    }
    preview
}

/// The matched words of a snippet, lower-cased.
pub fn marked_words(snippet: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in snippet.split(MARK_OPEN).skip(1) {
        if let Some((word, _)) = part.split_once(MARK_CLOSE) {
            let word = one_line(word).to_lowercase();
            if !word.is_empty() && !words.contains(&word) {
                words.push(word);
            }
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_words_are_the_matches() {
        let snippet = format!(
            "a {MARK_OPEN}Parser{MARK_CLOSE} and {MARK_OPEN}lexer{MARK_CLOSE}, {MARK_OPEN}parser{MARK_CLOSE}"
        );
        assert_eq!(marked_words(&snippet), ["parser", "lexer"]);
        assert!(marked_words("no marks").is_empty());
    }
}
