//! `piidx search --pg`: the team store's `texts` (every chunk of text the
//! index's full-text shards hold: messages, thinking, tool calls and
//! results, bash output, summaries…) found through its word index (`words`,
//! posting lists the pushing clients made with the index's own tokenizers:
//! `store::pg::words`), ranked with bm25 times the index's weight per kind
//! of text, the best chunk of each entry kept, and cut into snippets by
//! FTS5 as the index cuts them, as the index's `Hit`s.
//!
//! The query is piidx's language (words AND-ed, "phrases", prefix*, OR,
//! NOT, parentheses), read by the index's `syntax::translate` and split by
//! the same tokenizers (`query`); `--raw` takes a `tsquery` of the store's
//! lexemes. One round trip fetches the postings of every lexeme of the
//! query (in each batch, the block that holds it), the client finds the
//! chunks that may match (`eval`), and checks them newest first against
//! `texts` (which batch wrote each chunk, and the filters, by primary key)
//! until the index's `RANK_WINDOW` of each machine match: the same newest
//! matches the index ranks. The filters are the index's: `--role` reads the
//! same conditions (`search::role_condition`) on the same column names.
//! `--substring` has no word index to use in the store and is refused.

mod eval;
mod query;

use std::collections::HashMap;

use eval::{Found, Key};
use query::{ParseError, Query};

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::search::snippet::{Marking, clean_snippet};
use crate::query::search::syntax::{has_unspaced_script, translate};
use crate::query::search::{
    Hit, RANK_WINDOW, SearchError, SearchOptions, Sort, kind_weight, role_condition,
};
use crate::store::pg::lexemes::{TRIGRAM_MARK, Tokenizers};
use crate::store::pg::words::Malformed;
use crate::store::rank::ShardStats;
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
    Query(#[from] ParseError),
    #[error(transparent)]
    Postings(#[from] Malformed),
    #[error(transparent)]
    Filter(#[from] SearchError),
    #[error(transparent)]
    Pg(#[from] PgError),
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

/// The postings of every term of the query, in one round trip: in each
/// batch of the machines searched, the row whose first lexeme is the last
/// not after the term (and for a prefix, the rows after it that start with
/// it); of that row, the term's list (and for a phrase's words, its
/// positions), sliced out of the row's bytes, so that only its pages are
/// read. Columns: term number (from 1), src, the row's batch, the list,
/// the positions (or null).
const POSTINGS_SQL: &str = "
SELECT q.n, w.src, w.batch,
       substring(w.lists FROM coalesce(w.list_ends[x.i - 1], 0) + 1
                         FOR w.list_ends[x.i] - coalesce(w.list_ends[x.i - 1], 0)),
       CASE WHEN q.positions THEN
         substring(w.positions FROM coalesce(w.position_ends[x.i - 1], 0) + 1
                               FOR w.position_ends[x.i] - coalesce(w.position_ends[x.i - 1], 0))
       END
  FROM unnest($1::text[], $2::bool[], $3::bool[]) WITH ORDINALITY AS q(lexeme, prefix, positions, n)
 CROSS JOIN word_batches b
 CROSS JOIN LATERAL (
       SELECT w.* FROM words w
        WHERE w.src = b.src AND w.batch = b.batch
          AND w.first >= coalesce((SELECT o.first FROM words o
                                    WHERE o.src = b.src AND o.batch = b.batch
                                      AND o.first <= q.lexeme COLLATE \"C\"
                                    ORDER BY o.first DESC LIMIT 1), '')
          AND w.first <= (CASE WHEN q.prefix THEN q.lexeme || chr(1114111) ELSE q.lexeme END)
                         COLLATE \"C\"
       OFFSET 0) w
 CROSS JOIN LATERAL (
       SELECT array_position(w.lexemes, q.lexeme) AS i WHERE NOT q.prefix
       UNION ALL
       SELECT u.i::integer FROM unnest(w.lexemes) WITH ORDINALITY AS u(word, i)
        WHERE q.prefix AND starts_with(u.word, q.lexeme)) x
 WHERE x.i IS NOT NULL
   AND ($4::text IS NULL OR b.src IN (SELECT s.src FROM sessions s WHERE s.machine = $4))";

/// Candidates checked against `texts` per round trip: a window's worth,
/// as most are matches.
const PAGE: usize = RANK_WINDOW as usize;

/// A matching chunk, ranked.
struct Match {
    key: Key,
    entry_rowid: i64,
    timestamp_ms: Option<i64>,
    score: f64,
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
    let tokenizers = Tokenizers::new().map_err(PgError::from)?;
    let empty = || PgSearchError::Empty(options.query.clone());
    let (query, snippet_expr) = if options.raw {
        let query = Query::parse_raw(&options.query)?;
        (query, raw_snippet_expr(&options.query))
    } else {
        let query = Query::parse(&tokenizers, &options.query)?.ok_or_else(empty)?;
        (query, translate(&options.query).expr)
    };
    if query.terms.is_empty() {
        return Err(empty());
    }
    let err = pg.err_owned();
    let mut tx = begin(pg, options).map_err(&err)?;
    let lists = fetch_postings(&mut tx, &query, machine).map_err(&err)?;
    let postings = lists
        .iter()
        .map(|row| {
            let n: i64 = row.try_get(0)?;
            let term = (n - 1) as usize;
            Ok((
                term,
                row.try_get(1)?,
                row.try_get(3)?,
                row.try_get(4)?,
                row.try_get(2)?,
            ))
        })
        .collect::<Result<Vec<(usize, i32, &[u8], Option<&[u8]>, i64)>, postgres::Error>>()
        .map_err(&err)?;
    let found = Found::new(query.terms.len(), postings)?;
    let matches = window(&mut tx, &err, &query, &found, options, machine)?;
    let best = best_entries(matches, options.sort, options.limit);
    let rows = hit_rows(&mut tx, &best).map_err(&err)?;
    tx.commit().map_err(&err)?;
    let trigrams = has_unspaced_script(&options.query);
    Ok(hits(&rows, &best, &snippet_expr, trigrams).map_err(&err)?)
}

/// The search's transaction: one snapshot for every statement, read-only,
/// with the same time budget as the index's search as the server's own
/// limit (0: none).
fn begin<'a>(
    pg: &'a mut Pg,
    options: &SearchOptions,
) -> Result<postgres::Transaction<'a>, postgres::Error> {
    let budget = options
        .stop
        .bounded(crate::query::search::SEARCH_BUDGET)
        .budget();
    let timeout_ms = budget
        .filter(|b| *b != std::time::Duration::MAX)
        .map_or(0, |b| b.as_millis());
    let mut tx = pg
        .client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    // A memo of the lateral lookups would hash whole rows' arrays; a plan
    // made for the first page's keys would be made again for each page.
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {timeout_ms}; SET LOCAL enable_memoize = off;
         SET LOCAL plan_cache_mode = force_generic_plan"
    ))?;
    Ok(tx)
}

/// `POSTINGS_SQL`'s rows for the query's terms.
fn fetch_postings(
    tx: &mut postgres::Transaction<'_>,
    query: &Query,
    machine: Option<&str>,
) -> Result<Vec<postgres::Row>, postgres::Error> {
    let lexemes: Vec<&str> = query.terms.iter().map(|t| t.lexeme.as_str()).collect();
    let prefixes: Vec<bool> = query.terms.iter().map(|t| t.prefix).collect();
    let positional = query.positional();
    tx.query(POSTINGS_SQL, &[&lexemes, &prefixes, &positional, &machine])
}

/// The matches the query ranks: each machine's candidates, newest first,
/// those the postings say may match checked against `texts` (the batch that
/// wrote each chunk, the filters) a page at a time, until `RANK_WINDOW` of
/// the machine's match; each scored.
/// `pg_err` names the store in errors.
fn window(
    tx: &mut postgres::Transaction<'_>,
    pg_err: &impl Fn(postgres::Error) -> PgError,
    query: &Query,
    found: &Found<'_>,
    options: &SearchOptions,
    machine: Option<&str>,
) -> Result<Vec<Match>, PgSearchError> {
    let collection = collection(tx, machine).map_err(pg_err)?;
    let (phrases, scorer) = found.phrases(query, collection);
    let mut params = Params::default();
    params.add(0i32);
    params.add(Vec::<i64>::new());
    let mut conds = conditions(
        &options.scope,
        machine,
        &Columns::sessions("c.timestamp_ms"),
        "s.machine",
        &mut params,
    );
    // The scope's conditions read the session; the filters, the text only.
    let sessions = if conds.is_empty() {
        ""
    } else {
        "JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id"
    };
    conds.extend(filters(options, &mut params)?);
    let check = tx
        .prepare(&format!(
            "SELECT c.chunk_id, c.batch, c.entry_rowid, c.timestamp_ms, c.kind, c.words
               FROM texts c {sessions}
              WHERE c.src = $1 AND c.chunk_id = ANY($2){}
              ORDER BY c.chunk_id",
            clause(&conds)
        ))
        .map_err(pg_err)?;
    let mut by_src: HashMap<i32, Vec<i64>> = HashMap::new();
    for (src, chunk) in found.candidates(&query.expr) {
        by_src.entry(src).or_default().push(chunk);
    }
    let mut matches = Vec::new();
    for (src, chunks) in by_src {
        let mut newest_first = chunks.into_iter().rev();
        let mut kept = 0;
        while kept < RANK_WINDOW {
            // The next candidates that may match (phrases and NOT checked
            // with the postings' own batch: `Found::may_match`).
            let mut page = Vec::with_capacity(PAGE);
            for chunk in newest_first.by_ref() {
                if found.may_match(&query.expr, (src, chunk))? {
                    page.push(chunk);
                    if page.len() == PAGE {
                        break;
                    }
                }
            }
            if page.is_empty() {
                break;
            }
            params.0[0] = Box::new(src);
            params.0[1] = Box::new(page);
            let rows = tx.query(&check, &params.refs()).map_err(pg_err)?;
            // In the key's order (no sort on the server): newest last.
            for row in rows.iter().rev() {
                let chunk: i64 = row.try_get(0).map_err(pg_err)?;
                let batch: i64 = row.try_get(1).map_err(pg_err)?;
                if !found.matches(&query.expr, (src, chunk), batch)? {
                    continue;
                }
                let kind: String = row.try_get(4).map_err(pg_err)?;
                let tokens = row.try_get::<_, Option<i32>>(5).map_err(pg_err)?;
                let tokens = tokens.and_then(|t| u32::try_from(t).ok()).unwrap_or(0);
                let bm25 = found.bm25(&phrases, &scorer, (src, chunk), batch, tokens)?;
                matches.push(Match {
                    key: (src, chunk),
                    entry_rowid: row.try_get(2).map_err(pg_err)?,
                    timestamp_ms: row.try_get(3).map_err(pg_err)?,
                    score: bm25 * kind_weight(&kind),
                });
                kept += 1;
                if kept >= RANK_WINDOW {
                    break;
                }
            }
        }
    }
    Ok(matches)
}

/// The rows of `texts` and `sessions` of the best matches.
fn hit_rows(
    tx: &mut postgres::Transaction<'_>,
    best: &[Match],
) -> Result<Vec<postgres::Row>, postgres::Error> {
    let keys: (Vec<i32>, Vec<i64>) = best.iter().map(|m| m.key).unzip();
    tx.query(
        "SELECT s.session_id, s.file_path, s.name, s.first_message, s.cwd, c.entry_id, c.kind,
                c.entry_type, c.timestamp_ms, c.line_no, c.text, c.tool_name, c.json_path,
                c.chunk_id, c.src
           FROM unnest($1::int[], $2::bigint[]) AS k(src, chunk_id)
           JOIN texts c ON c.src = k.src AND c.chunk_id = k.chunk_id
           JOIN sessions s ON s.src = c.src AND s.file_id = c.file_id",
        &[&keys.0, &keys.1],
    )
}

/// The hits, in `best`'s order, with their snippets.
fn hits(
    rows: &[postgres::Row],
    best: &[Match],
    snippet_expr: &str,
    trigrams: bool,
) -> Result<Vec<Hit>, postgres::Error> {
    // Texts by row number: chunk ids repeat across machines.
    let mut by_key: HashMap<Key, usize> = HashMap::new();
    let mut texts: Vec<(i64, &str)> = Vec::with_capacity(rows.len());
    for (at, row) in rows.iter().enumerate() {
        by_key.insert((row.try_get(14)?, row.try_get(13)?), at);
        texts.push((at as i64, row.try_get(10)?));
    }
    let mut snippets = snippets(&texts, snippet_expr, trigrams);
    let mut hits = Vec::with_capacity(best.len());
    for found in best {
        if let Some(&at) = by_key.get(&found.key) {
            hits.push(hit(&rows[at], found.score, snippets.remove(&(at as i64)))?);
        }
    }
    Ok(hits)
}

/// The number of chunks and their word tokens, over the machines
/// searched: bm25's collection, as one shard's statistics are the index's.
fn collection(
    tx: &mut postgres::Transaction<'_>,
    machine: Option<&str>,
) -> Result<ShardStats, postgres::Error> {
    let row = tx.query_one(
        "SELECT coalesce(sum(b.chunks), 0)::int8, coalesce(sum(b.tokens), 0)::int8
           FROM word_batches b
          WHERE $1::text IS NULL OR b.src IN (SELECT s.src FROM sessions s WHERE s.machine = $1)",
        &[&machine],
    )?;
    Ok(ShardStats {
        rows: row.try_get(0)?,
        tokens: row.try_get(1)?,
        hits: None,
    })
}

/// The best match of each entry, in the order asked, the first `limit`.
fn best_entries(matches: Vec<Match>, sort: Sort, limit: usize) -> Vec<Match> {
    let mut best: HashMap<(i32, i64), Match> = HashMap::new();
    for m in matches {
        let entry = (m.key.0, m.entry_rowid);
        match best.get(&entry) {
            Some(kept) if (kept.score, kept.key.1) <= (m.score, m.key.1) => {}
            _ => {
                best.insert(entry, m);
            }
        }
    }
    let mut best: Vec<Match> = best.into_values().collect();
    let newest = |m: &Match| std::cmp::Reverse(m.timestamp_ms);
    best.sort_unstable_by(|a, b| {
        let by_score = a.score.total_cmp(&b.score);
        let by_time = newest(a).cmp(&newest(b));
        match sort {
            Sort::Rank => by_score.then(by_time),
            Sort::Recent => by_time.then(by_score),
        }
        .then(a.key.cmp(&b.key))
    });
    best.truncate(limit);
    best
}

/// A hit from its row of `texts` and `sessions`.
fn hit(row: &postgres::Row, score: f64, snippet: Option<String>) -> Result<Hit, postgres::Error> {
    let chunk_id: i64 = row.try_get(13)?;
    let snippet = match snippet {
        Some(snippet) => snippet,
        None => row.try_get::<_, &str>(10)?.chars().take(120).collect(),
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
        score,
        tool_name: row.try_get(11)?,
        json_path: row.try_get(12)?,
        line_no: row.try_get::<_, Option<i64>>(9)?.unwrap_or(0),
        run: None,
        full_output: None,
        chunk_id,
    })
}

/// The snippets of the hits' texts (by the id given with each), marked by FTS5's own
/// `snippet()` with the index's MATCH expression and tokenizer, as the index
/// marks its hits (the store keeps no token offsets). A text the
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

    #[test]
    fn raw_queries_snippet_with_their_lexemes() {
        assert_eq!(
            raw_snippet_expr("'foo' & !'b''ar':*"),
            "\"foo\" OR \"b\" OR \"ar\""
        );
    }
}
