//! The snippet of a hit, computed for the hits printed only: a chunk's
//! text (`body::chunk_body`: cut out of its entry's JSON, or read through the
//! `fts_content` view), marked by FTS5's own `snippet()` for a word search
//! (`snippets_of`, in a scratch table: the shards store no text) or around
//! the first term for a scan (`scan_snippet`), and made one safe line.

use std::collections::HashMap;

use super::body::chunk_body;
use super::{MARK_CLOSE, MARK_OPEN};

/// Control characters (newlines, tabs, terminal escapes from tool output)
/// become spaces, so a snippet is one safe line; the match marks stay.
pub(crate) fn clean_snippet(snippet: &str) -> String {
    snippet
        .chars()
        .map(|c| {
            if c.is_control() && c != MARK_OPEN && c != MARK_CLOSE {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// A window of about 120 characters around the first term found, marked.
pub(super) fn scan_snippet(body: &str, terms: &[String]) -> String {
    let lower = body.to_lowercase();
    // Lowercasing may change byte lengths; only use positions when it did not.
    let same = lower.len() == body.len();
    let found = terms
        .iter()
        .filter_map(|term| {
            let needle = term.to_lowercase();
            let at = if same {
                lower.find(&needle)
            } else {
                body.find(term.as_str())
            }?;
            Some((at, needle.len()))
        })
        .min();
    let Some((at, len)) = found else {
        return body.chars().take(120).collect();
    };
    let mut start = at.saturating_sub(60);
    while !body.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + len + 60).min(body.len());
    while !body.is_char_boundary(end) {
        end += 1;
    }
    let end_match = at + len;
    format!(
        "{}{}{MARK_OPEN}{}{MARK_CLOSE}{}{}",
        if start > 0 { "…" } else { "" },
        &body[start..at],
        &body[at..end_match],
        &body[end_match..end],
        if end < body.len() { "…" } else { "" },
    )
}

/// Snippets for FTS hits. The shards are contentless, so the chosen chunks
/// are indexed again in a scratch in-memory table with the tokenizer of
/// `table`, where FTS5's own `snippet()` marks the same matches. The
/// chunks' text is read here, on the index's connection; the marking
/// (`Marking::run`) needs none, so it can run on a thread of its own while
/// the hits' details are read.
pub(super) fn snippets_of(
    conn: &rusqlite::Connection,
    table: &str,
    expr: &str,
    chunk_ids: &[i64],
) -> rusqlite::Result<Marking> {
    let bodies = chunk_ids
        .iter()
        .copied()
        .map(|chunk_id| Ok((chunk_id, chunk_body(conn, chunk_id)?.unwrap_or_default())))
        .collect::<rusqlite::Result<_>>()?;
    Ok(Marking::new(table == "fts_trigram", expr, bodies))
}

/// The chunks' text and the query, ready to be marked by FTS5 (the team
/// store's hits are marked so too, as the index marks its own).
pub(crate) struct Marking {
    tokenize: &'static str,
    expr: String,
    /// (chunk id, text), in chunk id order.
    bodies: Vec<(i64, String)>,
}

impl Marking {
    /// `bodies` (chunk id, text) to mark where the index's MATCH expression
    /// `expr` matches, tokenized as the trigram shard or the word shards are.
    pub(crate) fn new(trigrams: bool, expr: &str, mut bodies: Vec<(i64, String)>) -> Marking {
        bodies.sort_unstable_by_key(|(id, _)| *id);
        bodies.dedup_by_key(|(id, _)| *id);
        Marking {
            tokenize: if trigrams {
                "trigram"
            } else {
                "unicode61 remove_diacritics 2"
            },
            expr: expr.to_owned(),
            bodies,
        }
    }

    /// Each chunk's snippet, by chunk id.
    pub(crate) fn run(self) -> rusqlite::Result<HashMap<i64, String>> {
        let mut scratch = rusqlite::Connection::open_in_memory()?;
        scratch.execute_batch(&format!(
            "CREATE VIRTUAL TABLE snip USING fts5(body, tokenize = '{}')",
            self.tokenize
        ))?;
        // In one transaction and in rowid order: FTS5 writes its pending terms
        // out as a segment at every commit, and before any row whose id is not
        // above the last one's. In rank order, one by one, nearly every insert
        // wrote a segment (2–3 ms of a search).
        let filling = scratch.transaction()?;
        {
            let mut insert = filling.prepare("INSERT INTO snip(rowid, body) VALUES (?1, ?2)")?;
            for (chunk_id, text) in &self.bodies {
                insert.execute(rusqlite::params![chunk_id, text])?;
            }
        }
        filling.commit()?;
        let mut snippets = scratch.prepare(
            "SELECT rowid, snippet(snip, 0, char(2), char(3), '…', 24) FROM snip WHERE snip MATCH ?1",
        )?;
        snippets
            .query_map([&self.expr], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_lose_control_characters() {
        assert_eq!(
            clean_snippet("a\n\u{1b}[31mb\u{2}c\u{3}\t"),
            "a  [31mb\u{2}c\u{3} "
        );
    }

    #[test]
    fn scan_snippets_mark_the_match() {
        let snippet = scan_snippet("hello SessionManager world", &["sessionman".to_owned()]);
        assert_eq!(snippet, "hello \u{2}SessionMan\u{3}ager world");
    }
}
