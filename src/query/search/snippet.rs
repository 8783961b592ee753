//! The snippet of a hit, computed for the hits printed only: a chunk's
//! text (`body::chunk_body`: cut out of its entry's JSON, or read through the
//! `fts_content` view), marked by FTS5's own `snippet()` for a word search
//! (`snippets_of`, in a scratch table: the shards store no text) or around
//! the first term for a scan (`scan_snippet`), and made one safe line.

use std::collections::HashMap;

use super::body::chunk_body;
use super::fts5_snippet;
use super::{MARK_CLOSE, MARK_OPEN};
use crate::store::tokenizer::WORDS;

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

/// `snippet()`'s marks (`MARK_OPEN`, `MARK_CLOSE`, the ellipsis) and its
/// most tokens.
const MARKS: (&str, &str, &str) = ("\u{2}", "\u{3}", "…");
const TOKENS: i64 = 24;

/// The chunks' text and the query, ready to be marked by FTS5 (the team
/// store's hits are marked so too, as the index marks its own).
pub(crate) struct Marking {
    /// Tokenized as the trigram tables are, not as words.
    trigrams: bool,
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
            trigrams,
            expr: expr.to_owned(),
            bodies,
        }
    }

    /// Each chunk's snippet, by chunk id: computed as FTS5 computes it
    /// (`fts5_snippet`) for the queries that module reads, else by FTS5.
    pub(crate) fn run(self) -> rusqlite::Result<HashMap<i64, String>> {
        let direct = if self.trigrams {
            None
        } else {
            fts5_snippet::snippets(&self.expr, &self.bodies, MARKS, TOKENS)
        };
        match direct {
            Some(snippets) => Ok(snippets),
            None => self.run_in_fts5(),
        }
    }

    /// `run` by FTS5 itself.
    fn run_in_fts5(self) -> rusqlite::Result<HashMap<i64, String>> {
        let tokenize = if self.trigrams {
            "trigram".to_owned()
        } else {
            format!("{} {}", WORDS.0, WORDS.1.join(" "))
        };
        let mut scratch = rusqlite::Connection::open_in_memory()?;
        scratch.execute_batch(&format!(
            "CREATE VIRTUAL TABLE snip USING fts5(body, tokenize = '{tokenize}')"
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
        let (open, close, ellipsis) = MARKS;
        let mut snippets = scratch.prepare(
            "SELECT rowid, snippet(snip, 0, ?2, ?3, ?4, ?5) FROM snip WHERE snip MATCH ?1",
        )?;
        snippets
            .query_map(
                rusqlite::params![self.expr, open, close, ellipsis, TOKENS],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?
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

    /// The snippets computed here and FTS5's own for `query` (as search
    /// translates it) over `docs`; the first is `None` when the query is
    /// left to FTS5.
    fn both(query: &str, docs: &[String]) -> (Option<HashMap<i64, String>>, HashMap<i64, String>) {
        let expr = super::super::syntax::translate(query).expr;
        let bodies: Vec<(i64, String)> = (1..).zip(docs.iter().cloned()).collect();
        let direct = fts5_snippet::snippets(&expr, &bodies, MARKS, TOKENS);
        let fts5 = Marking::new(false, &expr, bodies).run_in_fts5().unwrap();
        (direct, fts5)
    }

    #[test]
    fn snippets_are_fts5s_own() {
        let long = "Intro words here. The parser reads every line: then it stops. \
                    Nothing else matters much here at all, not even the parser \
                    which reads again and again and again until the very end of \
                    the text, where the Café sits.  Last: parser";
        let docs = vec![
            long.to_owned(),
            "parse parser parsers Parsing".to_owned(),
            "fn main() { error!(\"x\") }\u{0} after a NUL parser".to_owned(),
            "nothing to see".to_owned(),
            // Two phrases at one place: FTS5 lists the first one first.
            format!("{}the error at{}", "word ".repeat(40), " word".repeat(30)),
        ];
        for query in [
            "the \"the error at\"",
            "\"the error at\" the",
            "parser",
            "pars*",
            "\"parser reads\"",
            "fn main",
            "cafe OR error",
            "(parser OR error) every",
            "Café x",
        ] {
            let (direct, fts5) = both(query, &docs);
            assert_eq!(direct.as_ref(), Some(&fts5), "{query}");
        }
        // The NUL ends the snippet, as SQLite's `%.*s` ends it.
        assert_eq!(
            both("error", &docs).1[&3],
            "fn main() { \u{2}error\u{3}!(\"x\") }"
        );
        // Left to FTS5: NOT, and an AND inside an OR.
        assert_eq!(both("parser NOT error", &docs).0, None);
        assert_eq!(both("(parser every) OR error", &docs).0, None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn snippets_match_fts5_on_any_text(
            docs in proptest::collection::vec(
                proptest::collection::vec(
                    (
                        proptest::sample::select(vec![
                            "the", "error", "Café", "cafe", "fn", "main()", "parse", "parser",
                            "Parsers", "x", "ünïcödé", "日本語", "serde_json", "a.b", "\u{0}", "",
                        ]),
                        proptest::sample::select(vec![
                            " ", " ", " ", " ", " ", "  ", "\n", ". ", ": ", ".\n", "-", "\t", "\r\n", ",", ".", ":",
                        ]),
                    ),
                    0..120,
                ),
                1..6,
            ),
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "error", "error", "parser", "parse*", "pars*", "\"fn main\"", "cafe", "Café", "OR",
                    "AND", "NOT", "(", ")", "the", "the", "x", "serde_json", "zzz", "\"the error\"", "a.b",
                ]),
                1..5,
            ),
        ) {
            let docs: Vec<String> = docs
                .iter()
                .map(|doc| doc.iter().map(|(word, sep)| format!("{word}{sep}")).collect())
                .collect();
            let query = words.join(" ");
            if super::super::syntax::translate(&query).is_empty() {
                return Ok(());
            }
            let (direct, fts5) = both(&query, &docs);
            if let Some(direct) = direct {
                proptest::prop_assert_eq!(direct, fts5, "query {:?}", query);
            }
        }
    }
}
