//! `piidx search --pg`: the team store's `texts` (every chunk of text the
//! index's full-text shards hold: messages, thinking, tool calls and
//! results, bash output, summaries…) matched with their `tsvector` (GIN),
//! ranked with `ts_rank_cd`, the best chunk of each entry kept, and cut into
//! snippets by FTS5 as the index cuts them, as the index's `Hit`s. The
//! `tsvector`s hold the index's own tokens (`store::pg::lexemes`), so a
//! query is split into words as the index splits it. The GIN index alone
//! finds the candidates (`to_candidate_tsquery`: phrases as words, no NOT,
//! so no `tsvector` is read for them); they are checked with the query
//! itself and ranked newest first until the index's `RANK_WINDOW` match
//! (both choose among the same matches), so the `tsvector`s read (to check
//! a phrase, to rank) are the newest candidates', not every match's.
//!
//! The query language is piidx's (words AND-ed, "phrases", prefix*, OR,
//! NOT, parentheses), read by the index's `syntax::translate` and turned
//! here into a `tsquery`; `--raw` passes a `tsquery` through. The filters are the index's: `--role` reads the same
//! conditions (`search::role_condition`) on the same column names.
//! `--substring` has no word index to use in the store and is refused.

use std::collections::HashMap;

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::search::snippet::{Marking, clean_snippet};
use crate::query::search::syntax::{has_unspaced_script, translate};
use crate::query::search::{Hit, RANK_WINDOW, SearchError, SearchOptions, Sort, role_condition};
use crate::store::pg::lexemes::{TRIGRAM_MARK, Tokenizers};
use crate::time::format_iso_ms;

#[derive(Debug, thiserror::Error)]
pub enum PgSearchError {
    #[error(
        "the query {0:?} has no searchable words (only punctuation or operators); put a word or a \"quoted phrase\" in it"
    )]
    Empty(String),
    #[error("{0} is not available with --pg: the team store has a word index only")]
    Unsupported(&'static str),
    #[error(transparent)]
    Filter(#[from] SearchError),
    #[error(transparent)]
    Pg(#[from] PgError),
}

/// A lexeme for `to_tsquery`, quoted.
fn lexeme(word: &str, prefix: bool) -> String {
    let quoted = word.replace('\\', "\\\\").replace('\'', "''");
    if prefix {
        format!("'{quoted}':*")
    } else {
        format!("'{quoted}'")
    }
}

/// A lexeme no text has (trigram lexemes have at least one character
/// after the mark): what an operand without tokens becomes, as FTS5's
/// empty phrase matches nothing.
fn nothing() -> String {
    lexeme(&TRIGRAM_MARK.to_string(), false)
}

/// One operand of the index's MATCH expression (a quoted string, maybe a
/// prefix) as a `tsquery`: its tokens, by the index's tokenizer, joined
/// with `<->`; with `trigrams`, its trigrams (a term under three
/// characters: a prefix of the texts' trigrams, so found anywhere).
fn operand(
    tokenizers: &Tokenizers,
    text: &str,
    prefix: bool,
    trigrams: bool,
    join: &str,
) -> Result<String, PgError> {
    let mut parts = Vec::new();
    if trigrams {
        tokenizers.trigrams(text, |token| parts.push(lexeme(token, false)))?;
        if parts.is_empty() && !text.is_empty() {
            let short = format!("{TRIGRAM_MARK}{}", text.to_lowercase());
            parts.push(lexeme(&short, true));
        }
    } else {
        tokenizers.words(text, |token| parts.push(lexeme(token, false)))?;
        if prefix && let Some(last) = parts.pop() {
            parts.push(format!("{last}:*"));
        }
    }
    Ok(match parts.len() {
        0 => nothing(),
        1 => parts.remove(0),
        _ => format!("({})", parts.join(join)),
    })
}

/// piidx's query language as a `tsquery` text; `None` when it has no word.
/// The query is read as the index reads it (`syntax::translate`: words
/// AND-ed, "phrases", prefix*, OR, NOT, parentheses) and its operands are
/// split by the tokenizers that made the store's lexemes: a query with
/// unspaced script (CJK & co.) is looked for in the trigrams, as the index
/// looks in its trigram table.
pub fn to_tsquery(tokenizers: &Tokenizers, query: &str) -> Result<Option<String>, PgError> {
    tsquery(tokenizers, query, false)
}

/// The `tsquery` of the texts that may match `query`, which the GIN index
/// answers alone: a phrase is its words AND-ed, and what is under NOT is
/// left out (either would make PostgreSQL read the `tsvector` of every
/// text that has the words). A superset of the matches, which `to_tsquery`
/// then checks newest first, only until the ranking window is full.
pub fn to_candidate_tsquery(
    tokenizers: &Tokenizers,
    query: &str,
) -> Result<Option<String>, PgError> {
    tsquery(tokenizers, query, true)
}

/// `to_tsquery` (`candidate` false) or `to_candidate_tsquery`.
fn tsquery(
    tokenizers: &Tokenizers,
    query: &str,
    candidate: bool,
) -> Result<Option<String>, PgError> {
    let join = if candidate { " & " } else { " <-> " };
    let expr = translate(query).expr;
    if expr.is_empty() {
        return Ok(None);
    }
    let trigrams = has_unspaced_script(query);
    let mut out = String::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut text = String::new();
                while let Some(c) = chars.next() {
                    if c == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    text.push(c);
                }
                let prefix = chars.peek() == Some(&'*');
                if prefix {
                    chars.next();
                }
                out.push_str(&operand(tokenizers, &text, prefix, trigrams, join)?);
            }
            '(' | ')' => out.push(c),
            c if c.is_whitespace() => {}
            _ => {
                let mut word = String::from(c);
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == '"' {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                if candidate && word == "NOT" {
                    skip_operand(&mut chars);
                    continue;
                }
                // FTS5's binary NOT is "and not".
                out.push_str(match word.as_str() {
                    "AND" => " & ",
                    "OR" => " | ",
                    "NOT" => " & !",
                    _ => " ",
                });
            }
        }
    }
    Ok(Some(out))
}

/// Skips the operand that comes next in a MATCH expression: a quoted
/// string (maybe a prefix) or a parenthesized group.
fn skip_operand(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    let mut depth = 0usize;
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
            }
            '"' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !quoted && depth == 0 {
            if chars.peek() == Some(&'*') {
                chars.next();
            }
            return;
        }
    }
}

/// The index's MATCH expression for `--raw`'s `tsquery`, for snippets:
/// its quoted lexemes, OR-ed.
fn raw_snippet_expr(tsquery: &str) -> String {
    let mut words = Vec::new();
    let mut rest = tsquery;
    while let Some(at) = rest.find('\'') {
        let after = &rest[at + 1..];
        let Some(end) = after.find('\'') else { break };
        let word = after[..end].trim_start_matches(TRIGRAM_MARK);
        if !word.is_empty() {
            words.push(format!("\"{}\"", word.replace('"', "\"\"")));
        }
        rest = &after[end + 1..];
    }
    words.join(" OR ")
}

/// The candidate query (`to_candidate_tsquery`) of a `--raw` `tsquery`: PostgreSQL's
/// `querytree` (the query without what is under NOT), its phrase operators
/// made ANDs.
fn raw_candidate_query(pg: &mut Pg, tsquery: &str) -> Result<String, PgSearchError> {
    let row = pg
        .client
        .query_one(
            "SELECT regexp_replace(querytree($1::text::tsquery), '<(-|[0-9]+)>', '&', 'g')",
            &[&tsquery],
        )
        .map_err(pg.err())?;
    let candidate: String = row.try_get(0).map_err(pg.err())?;
    if candidate.trim() == "T" || candidate.trim().is_empty() {
        return Err(PgSearchError::Empty(tsquery.to_owned()));
    }
    Ok(candidate)
}

/// The hits for `options` from the team store; `machine` keeps one
/// machine's sessions.
pub fn search(
    pg: &mut Pg,
    options: &SearchOptions,
    machine: Option<&str>,
) -> Result<Vec<Hit>, PgSearchError> {
    if options.substring {
        return Err(PgSearchError::Unsupported("--substring"));
    }
    crate::query::search::check(options)?;
    pg.check_readable()?;
    // The same time budget as the index's search, as the server's own
    // limit (0: none).
    let budget = options
        .stop
        .bounded(crate::query::search::SEARCH_BUDGET)
        .budget();
    let timeout_ms = budget
        .filter(|b| *b != std::time::Duration::MAX)
        .map_or(0, |b| b.as_millis());
    pg.client
        .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
        .map_err(pg.err())?;
    let tokenizers = Tokenizers::new().map_err(PgError::from)?;
    let (tsquery, candidate, snippet_expr) = if options.raw {
        let candidate = raw_candidate_query(pg, &options.query)?;
        (
            options.query.clone(),
            candidate,
            raw_snippet_expr(&options.query),
        )
    } else {
        let empty = || PgSearchError::Empty(options.query.clone());
        let tsquery = to_tsquery(&tokenizers, &options.query)?.ok_or_else(empty)?;
        let candidate = to_candidate_tsquery(&tokenizers, &options.query)?.ok_or_else(empty)?;
        (tsquery, candidate, translate(&options.query).expr)
    };
    // Words and prefixes only: the candidates are the matches.
    let check = if candidate == tsquery {
        "true"
    } else {
        "t.tsv @@ q.q"
    };
    let mut params = Params::default();
    params.add(tsquery);
    params.add(options.limit as i64);
    params.add(candidate);
    let mut conds = conditions(
        &options.scope,
        machine,
        &Columns::sessions("c.timestamp_ms"),
        "s.machine",
        &mut params,
    );
    conds.extend(filters(options, &mut params)?);
    let order = match options.sort {
        Sort::Rank => "rank DESC, timestamp_ms DESC NULLS LAST, src, chunk_id",
        Sort::Recent => "timestamp_ms DESC NULLS LAST, rank DESC, src, chunk_id",
    };
    // Candidates: the texts the GIN index finds alone (phrases as words,
    // without NOT: `to_candidate_tsquery`), newest first; then each is
    // checked with the query itself (only when that differs: a phrase or
    // NOT reads the text's `tsvector`) and ranked, in that order, until
    // `RANK_WINDOW` match: the LIMIT stops the loop, so a phrase of common
    // words reads the `tsvector`s of the newest candidates only. The
    // lateral subquery is fenced (OFFSET 0), so it runs per candidate, in
    // order, by the primary key. The best chunk of each entry; the texts
    // of the hits only.
    let sql = format!(
        "WITH q AS (SELECT $1::text::tsquery AS q, $3::text::tsquery AS c),
         cand AS MATERIALIZED (
           SELECT c.src, c.chunk_id, c.entry_rowid, c.timestamp_ms
             FROM texts c CROSS JOIN q
             JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id
            WHERE c.tsv @@ q.c{}
            ORDER BY c.timestamp_ms DESC NULLS LAST, c.chunk_id DESC),
         matches AS (
           SELECT m.src, m.chunk_id, m.entry_rowid, m.timestamp_ms, r.rank
             FROM cand m CROSS JOIN LATERAL (
               SELECT {check} AS hit, ts_rank_cd(t.tsv, q.q) AS rank
                 FROM texts t CROSS JOIN q
                WHERE t.src = m.src AND t.chunk_id = m.chunk_id OFFSET 0) r
            WHERE r.hit
            LIMIT {RANK_WINDOW}),
         ranked AS (
           SELECT DISTINCT ON (src, entry_rowid) src, chunk_id, timestamp_ms, rank
             FROM matches ORDER BY src, entry_rowid, rank DESC, chunk_id),
         best AS (SELECT * FROM ranked ORDER BY {order} LIMIT $2)
         SELECT s.session_id, s.file_path, s.name, s.first_message, s.cwd, c.entry_id, c.kind,
                c.entry_type, c.timestamp_ms, c.line_no, b.rank::float8, c.text,
                c.tool_name, c.json_path, c.chunk_id
           FROM best b
           JOIN texts c ON c.src = b.src AND c.chunk_id = b.chunk_id
           JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id
          ORDER BY {}",
        clause(&conds),
        order
            .split(", ")
            .map(|term| format!("b.{term}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let rows = pg.client.query(&sql, &params.refs()).map_err(pg.err())?;
    let err = pg.err_owned();
    let texts: Vec<(i64, &str)> = rows
        .iter()
        .map(|row| Ok((row.try_get(14)?, row.try_get(11)?)))
        .collect::<Result<_, postgres::Error>>()
        .map_err(&err)?;
    let trigrams = has_unspaced_script(&options.query);
    let mut snippets = snippets(&texts, &snippet_expr, trigrams);
    let hits = rows
        .iter()
        .map(|row| {
            let rank: f64 = row.try_get(10)?;
            let chunk_id: i64 = row.try_get(14)?;
            let snippet = match snippets.remove(&chunk_id) {
                Some(snippet) => snippet,
                None => row.try_get::<_, &str>(11)?.chars().take(120).collect(),
            };
            Ok(Hit {
                session_id: row.try_get::<_, Option<String>>(0)?.unwrap_or_default(),
                session_path: row.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                session_name: row.try_get(2)?,
                first_message: row.try_get(3)?,
                cwd: row.try_get::<_, Option<String>>(4)?.unwrap_or_default(),
                entry_id: row.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
                role: row.try_get(6)?,
                entry_type: row.try_get::<_, Option<String>>(7)?.unwrap_or_default(),
                timestamp: row.try_get::<_, Option<i64>>(8)?.map(format_iso_ms),
                snippet: clean_snippet(&snippet),
                // Lower is better, as the index's scores.
                score: -rank,
                tool_name: row.try_get(12)?,
                json_path: row.try_get(13)?,
                line_no: row.try_get::<_, Option<i64>>(9)?.unwrap_or(0),
                run: None,
                full_output: None,
                chunk_id,
            })
        })
        .collect::<Result<_, postgres::Error>>()
        .map_err(err)?;
    Ok(hits)
}

/// The snippets of the hits' texts (by chunk id), marked by FTS5's own
/// `snippet()` with the index's MATCH expression and tokenizer, as the index
/// marks its hits: the store keeps no token offsets, and PostgreSQL's
/// `ts_headline` would split the text with its own parser. A text the
/// expression does not match (a term under three characters in a trigram
/// search) has no snippet here, nor has any text when FTS5 refuses the
/// expression (a `--raw` query's words).
fn snippets(texts: &[(i64, &str)], expr: &str, trigrams: bool) -> HashMap<i64, String> {
    if texts.is_empty() || expr.is_empty() {
        return HashMap::new();
    }
    let bodies = texts
        .iter()
        .map(|(id, text)| (*id, (*text).to_owned()))
        .collect();
    Marking::new(trigrams, expr, bodies)
        .run()
        .unwrap_or_default()
}

/// `--role`, `--type`, `--tool` and `--model` as conditions on `texts c`.
/// The roles are the index's own conditions: they name `c.kind`, `e.type`
/// and `mm.role`, which `texts` holds as `kind`, `entry_type` and
/// `message_role`.
fn filters(options: &SearchOptions, params: &mut Params) -> Result<Vec<String>, SearchError> {
    let mut conds = Vec::new();
    let mut roles = Vec::new();
    for role in &options.roles {
        for part in role.split(',').filter(|p| !p.trim().is_empty()) {
            roles.push(
                role_condition(part)?
                    .replace("e.type", "c.entry_type")
                    .replace("mm.role", "c.message_role"),
            );
        }
    }
    if !roles.is_empty() {
        conds.push(format!("({})", roles.join(" OR ")));
    }
    if !options.entry_types.is_empty() {
        let types: Vec<String> = options
            .entry_types
            .iter()
            .map(|t| t.trim().to_owned())
            .collect();
        let n = params.add(types);
        conds.push(format!("c.entry_type = ANY(${n})"));
    }
    if let Some(tool) = &options.tool {
        let n = params.add(tool.to_lowercase());
        conds.push(format!("lower(c.tool_name) = ${n}"));
    }
    if let Some(model) = &options.model {
        let n = params.add(model.to_lowercase());
        conds.push(format!("strpos(lower(c.model), ${n}) > 0"));
    }
    Ok(conds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(query: &str) -> Option<String> {
        to_tsquery(&Tokenizers::new().unwrap(), query).unwrap()
    }

    #[test]
    fn the_query_language_becomes_a_tsquery_of_the_index_tokens() {
        assert_eq!(t("foo bar").as_deref(), Some("'foo' & 'bar'"));
        assert_eq!(t("pars* OR lexer").as_deref(), Some("'pars':* | 'lexer'"));
        assert_eq!(
            t("\"exact phrase\" NOT x").as_deref(),
            Some("('exact' <-> 'phrase') & !'x'")
        );
        assert_eq!(
            t("SessionManager.listAll").as_deref(),
            Some("('sessionmanager' <-> 'listall')")
        );
        assert_eq!(t("(a OR b) c").as_deref(), Some("('a' | 'b') & 'c'"));
        assert_eq!(t("it's").as_deref(), Some("('it' <-> 's')"));
        assert_eq!(t("Café").as_deref(), Some("'cafe'"));
        assert_eq!(t("-- ()"), None);
    }

    #[test]
    fn the_candidate_query_has_phrases_as_words_and_no_negations() {
        let c = |query: &str| to_candidate_tsquery(&Tokenizers::new().unwrap(), query).unwrap();
        assert_eq!(
            c("\"exact phrase\" NOT x").as_deref(),
            Some("('exact' & 'phrase')")
        );
        assert_eq!(c("a NOT (b OR \"c d\") e").as_deref(), Some("'a' & 'e'"));
        assert_eq!(c("serde_json").as_deref(), Some("('serde' & 'json')"));
    }

    #[test]
    fn unspaced_scripts_are_looked_for_in_trigrams() {
        assert_eq!(
            t("桜餅テスト").as_deref(),
            Some("('#桜餅テ' <-> '#餅テス' <-> '#テスト')")
        );
        assert_eq!(t("桜餅").as_deref(), Some("'#桜餅':*"));
    }

    #[test]
    fn raw_queries_snippet_with_their_lexemes() {
        assert_eq!(
            raw_snippet_expr("'foo' & !'b''ar':*"),
            "\"foo\" OR \"b\" OR \"ar\""
        );
    }
}
