//! `piidx search`: ranked full-text search over every indexed text chunk.
//! This file is the public API and the driver; each stage is a module.
//!
//! Three ways to find chunks (docs/search.md), chosen by `plan`:
//! * words: the unicode61 `fts` tables of the shard files (attached as
//!   `fts0`, `fts1`, ...; see `store::fts`), query translated by `syntax`,
//!   matches of all shards ranked together;
//! * unspaced scripts (CJK, Thai, ...): the shards' `fts_trigram` tables,
//!   which hold only chunks containing such characters (the writer decides
//!   per chunk);
//! * `--substring`, or trigram terms shorter than 3 characters: a scan of
//!   the chunks' text (`scan`), newest first.
//!
//! Ranking is bm25 (`rank::FUNCTION`) times a per-kind weight, best chunk per
//! entry. Each shard scores its matches in parallel (the shards after the
//! first on `ShardConnections`, opened in the background from the start of
//! the command), then `weigh` looks the matches up in bm25 order until the
//! top `limit` entries are settled. Those get a snippet (`hit`, `snippet`:
//! computed for them only; the shards store no text, so the chosen chunks
//! are cut out of their entries by `chunk_text` and re-tokenised in a
//! scratch table).

pub mod chunk_text;
mod hit;
mod plan;
mod scan;
mod shards;
mod snippet;
pub mod syntax;
mod weigh;

use std::sync::Arc;

use rusqlite::types::Value as SqlValue;
use serde::Serialize;

use crate::query::rank;
use crate::store::Index;
use plan::{Filters, Plan, mentions, plan};
use scan::scan_chunks;
pub use shards::ShardConnections;
use shards::{ShardWorker, on_connections};
use weigh::{
    KIND_WEIGHTS, Ranked, Weighing, best_per_entry, by_time, rank_sql, shard_matches, weigh,
};

/// Marks around a match inside `Hit::snippet`; the printer replaces them.
pub const MARK_OPEN: char = '\u{2}';
pub const MARK_CLOSE: char = '\u{3}';

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    Rank,
    Recent,
}

#[derive(Debug, Clone, Default)]
pub struct SearchOptions {
    pub query: String,
    pub project: Option<String>,
    pub cwd: Option<String>,
    pub session: Option<String>,
    pub roles: Vec<String>,
    /// Entry types (`message`, `compaction`, or one piidx does not know).
    pub entry_types: Vec<String>,
    pub tool: Option<String>,
    pub model: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: usize,
    pub sort: Sort,
    pub raw: bool,
    pub substring: bool,
}

/// One search result: the best chunk of one entry.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub session_id: String,
    pub session_path: String,
    pub session_name: Option<String>,
    pub first_message: Option<String>,
    pub cwd: String,
    pub entry_id: String,
    /// Kind of text (`user`, `assistant`, `thinking`, `tool_call`, ...).
    pub role: String,
    pub entry_type: String,
    pub timestamp: Option<String>,
    /// Snippet with matches between `MARK_OPEN` and `MARK_CLOSE`.
    pub snippet: String,
    /// Lower is better (`rank::FUNCTION` times the kind weight); 0 for scans.
    pub score: f64,
    pub tool_name: Option<String>,
    pub json_path: String,
    pub line_no: i64,
    /// The subagent run whose transcript holds the text (embedded in the
    /// parent session's tool result); null for the session's own entries.
    pub run: Option<RunRef>,
    #[serde(skip)]
    pub chunk_id: i64,
}

/// Which delegated run a hit in a child transcript belongs to: a
/// transcript embedded in the parent's tool result, or a child session
/// file of its own.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunRef {
    pub agent: Option<String>,
    pub mode: Option<String>,
    /// Index in `details.results[]`.
    pub position: i64,
    pub run_id: Option<String>,
    /// The parent's `subagent` tool call.
    pub tool_call_id: Option<String>,
    /// The session that delegated the run (the hit's own session for an
    /// embedded transcript).
    pub parent_session_id: String,
    pub parent_session_path: String,
    /// True when the hit is in the run's child session file.
    pub child_session: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(
        "the query {0:?} has no searchable words (only punctuation or operators); put a word or a \"quoted phrase\" in it"
    )]
    Empty(String),
    #[error("FTS5 syntax error in --raw query {query:?}: {message}")]
    RawSyntax { query: String, message: String },
    #[error(
        "unknown role {0:?}; use one of user, assistant, thinking, tool_call, tool_result, bash, summary, compaction, branch_summary, custom, system, usage, context_edit, label, session_name, other"
    )]
    Role(String),
    #[error("cannot read the date {0:?}; use YYYY-MM-DD or an ISO time like 2026-02-01T10:00:00Z")]
    Date(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("a full-text shard's connection failed: {0}")]
    ShardConnection(String),
}

/// Runs a search and returns at most `options.limit` hits. `store` queries
/// the first shard, `shard_connections` the others.
pub fn search(
    store: &Index,
    mut shard_connections: ShardConnections,
    options: &SearchOptions,
) -> Result<Vec<Hit>, SearchError> {
    let plan = plan(options)?;
    let limit = options.limit.max(1);
    let conn = store.connection();
    let shards = match &plan {
        Plan::Fts { .. } | Plan::Scan { unspaced: true, .. } => store.attach_fts()?,
        Plan::Scan { .. } => Vec::new(),
    };
    if matches!(plan, Plan::Fts { .. }) {
        rank::register(conn)?;
    }
    let sources: Vec<String> = match &plan {
        Plan::Fts { table, .. } => shards.iter().map(|s| format!("{s}.{table}")).collect(),
        Plan::Scan { .. } => Vec::new(),
    };
    // A ranked query binds the MATCH expression as ?1 and the row limit as
    // ?2, so its filters start at ?3; a scan binds only the filters.
    let first_filter = match &plan {
        Plan::Fts { .. } => 3,
        Plan::Scan { .. } => 1,
    };
    let filters = Filters::build(options, first_filter)?;
    // Newest first, for `--sort recent` and scans (ranked words are ordered
    // in `weigh`).
    let order = "e.timestamp_ms DESC, c.chunk_id DESC";
    let meta_join = if options.model.is_some() || !options.roles.is_empty() {
        "LEFT JOIN message_meta mm ON mm.entry_rowid = c.entry_rowid"
    } else {
        ""
    };
    // A ranked word search joins entries and sessions only for the filters
    // that read them: for a query matching thousands of chunks, those row
    // lookups cost more than the FTS query (ties then go newest chunk first).
    let lean = options.sort == Sort::Rank && matches!(plan, Plan::Fts { .. });
    let entries_join = if lean && !mentions(&filters.sql, "e") {
        ""
    } else {
        "JOIN entries e ON e.entry_rowid = c.entry_rowid"
    };
    let sessions_join = if lean && !mentions(&filters.sql, "s") {
        ""
    } else {
        "JOIN sessions s ON s.file_id = c.file_id"
    };
    // bm25 costs ~1 µs per matching chunk, so a stop-word-like query (most
    // chunks match) took 100s of ms. Such queries rank only their newest
    // RANK_WINDOW matches, each shard its share; if the window yields fewer
    // hits than asked for, the window is taken again among the matches of
    // the sessions that `--project`, `--cwd` or `--session` select (when
    // given), and then everything is ranked. `--sort recent` sorted
    // every match by time (300 ms for `the` on 1 GB); it first looks only at
    // the newest RECENT_WINDOW entries, walked by time (index
    // `entries_time`), and sorts every match only when they hold too few.
    let recent = options.sort == Sort::Recent && matches!(plan, Plan::Fts { .. });
    let mut windowed = (lean || recent) && !options.raw;
    let restriction = filters.fts_restriction();
    let mut restricted = false;
    let extra = shard_connections.take(sources.len(), store.path());
    let best: Vec<(i64, f64)> = loop {
        // Stage 1 ranks chunks without touching their text (no GROUP BY: one
        // entry's several chunks are merged below, fetching more rows if needed).
        let ts = if entries_join.is_empty() {
            "NULL"
        } else {
            "e.timestamp_ms"
        };
        let stage = match &plan {
            Plan::Fts { table, expr } if options.sort == Sort::Rank => {
                // This shard's share of the newest matches (chunks are dealt
                // to the shards in id order): FTS5 walks the doclists
                // newest first and stops there, scoring only those.
                let window = if windowed {
                    let share = RANK_WINDOW / sources.len().max(1) as i64;
                    format!(" ORDER BY rowid DESC LIMIT {share}")
                } else {
                    String::new()
                };
                let restriction = if restricted { restriction.as_str() } else { "" };
                let sqls = sources
                    .iter()
                    .map(|source| rank_sql(table, source, restriction, &window))
                    .collect();
                // ?1: a JSON array of full-text row ids (`weigh`): a chunk's
                // own row, or the row of the shared text it points at,
                // which every chunk pointing there matches.
                let lookup = format!(
                    "SELECT j.value, c.chunk_id, c.entry_rowid, {KIND_WEIGHTS}, {ts}
                     FROM json_each(?1) j JOIN chunks c
                       ON (c.chunk_id = j.value AND c.fts_rowid IS NULL) OR c.fts_rowid = j.value
                     {entries_join} {sessions_join} {meta_join}
                     WHERE 1 {filters}",
                    filters = filters.clause(),
                );
                Stage::Rank { sqls, expr, lookup }
            }
            Plan::Fts { table, expr } => {
                let sql = |source: &String| {
                    if windowed {
                        // The `+` keeps the match list a filter: as an index
                        // constraint, each entry would probe every match.
                        return format!(
                            "SELECT c.chunk_id, c.entry_rowid, 0.0 AS score, e.timestamp_ms
                             FROM entries e CROSS JOIN chunks c ON c.entry_rowid = e.entry_rowid
                             {sessions_join} {meta_join}
                             WHERE e.timestamp_ms >= coalesce((SELECT timestamp_ms FROM entries
                                     ORDER BY timestamp_ms DESC LIMIT 1 OFFSET {RECENT_WINDOW}),
                                   -9223372036854775808)
                               AND +coalesce(c.fts_rowid, c.chunk_id)
                                   IN (SELECT rowid FROM {source} WHERE {table} MATCH ?1)
                               {filters}
                             ORDER BY {order} LIMIT ?2",
                            filters = filters.clause(),
                        );
                    }
                    // Materialized: the match list is read once, then joined.
                    format!(
                        "WITH m AS MATERIALIZED (SELECT rowid FROM {source} WHERE {table} MATCH ?1)
                         SELECT c.chunk_id, c.entry_rowid, 0.0 AS score, {ts}
                         FROM m JOIN chunks c
                           ON (c.chunk_id = m.rowid AND c.fts_rowid IS NULL) OR c.fts_rowid = m.rowid
                         {entries_join} {sessions_join} {meta_join}
                         WHERE 1 {filters}
                         ORDER BY {order} LIMIT ?2",
                        filters = filters.clause(),
                    )
                };
                Stage::Recent {
                    sqls: sources.iter().map(sql).collect(),
                    expr,
                }
            }
            Plan::Scan { unspaced, .. } => {
                // A query with CJK can only match chunks holding CJK, and those
                // are exactly the rows of fts_trigram (listed in its docsize).
                // Those few chunks lead; any other scan walks the entries
                // newest first (index `entries_time`), so that the rows come
                // without a sort of every chunk and the scan can stop early.
                let from = if *unspaced {
                    let members = shards
                        .iter()
                        .map(|s| format!("SELECT id FROM {s}.fts_trigram_docsize"))
                        .collect::<Vec<_>>()
                        .join(" UNION ALL ");
                    format!(
                        "chunks c JOIN ({members}) d
                           ON (d.id = c.chunk_id AND c.fts_rowid IS NULL) OR d.id = c.fts_rowid
                         JOIN entries e ON e.entry_rowid = c.entry_rowid"
                    )
                } else {
                    "entries e CROSS JOIN chunks c ON c.entry_rowid = e.entry_rowid".to_owned()
                };
                // The terms are looked for by `scan_chunks`, which reads each
                // entry once; no LIMIT: it stops at `fetch` matches itself.
                Stage::Scan {
                    sql: format!(
                        "SELECT c.chunk_id, c.entry_rowid, e.timestamp_ms, c.json_path, c.start, c.len,
                                c.fts_rowid IS NOT NULL
                         FROM {from} JOIN sessions s ON s.file_id = c.file_id {meta_join}
                         WHERE 1 {filters}
                         ORDER BY {order}",
                        filters = filters.clause(),
                    ),
                }
            }
        };
        let raw_error = |err: SearchError| match err {
            SearchError::Sqlite(err) if options.raw => SearchError::RawSyntax {
                query: options.query.clone(),
                message: err.to_string(),
            },
            err => err,
        };
        // The shards' scored matches do not depend on how many rows are
        // fetched: computed once, weighed again if more rows are needed.
        let mut weighing = Weighing {
            matches: match &stage {
                Stage::Rank { sqls, expr, .. } => {
                    match shard_connections.started_scoring(sqls, expr) {
                        Some(matches) => matches?,
                        None => {
                            let params = query_params(expr, None, &filters.params);
                            shard_matches(store, &extra, sqls, &params, restricted)
                                .map_err(raw_error)?
                        }
                    }
                }
                _ => Vec::new(),
            },
            next: 0,
            found: Vec::new(),
        };
        let mut fetch = limit * 4 + 16;
        let best: Vec<(i64, f64)> = loop {
            let rows = match &stage {
                Stage::Rank { lookup, .. } => {
                    weigh(store, &extra, lookup, &mut weighing, &filters.params, limit)
                }
                Stage::Recent { sqls, expr } => {
                    let params = query_params(expr, Some(fetch), &filters.params);
                    run_recent(store, &extra, sqls, &params, fetch)
                }
                Stage::Scan { sql } => {
                    let terms = match &plan {
                        Plan::Scan { terms, .. } => terms.as_slice(),
                        Plan::Fts { .. } => &[],
                    };
                    scan_chunks(conn, sql, &filters.params, terms, fetch)
                }
            }
            .map_err(raw_error)?;
            let best: Vec<(i64, f64)> = best_per_entry(&rows, limit)
                .iter()
                .map(|row| (row.chunk_id, row.score))
                .collect();
            if best.len() == limit || rows.len() < fetch {
                break best;
            }
            fetch *= 4;
        };
        if best.len() < limit {
            if windowed && !recent && !restricted && !restriction.is_empty() {
                restricted = true;
                continue;
            }
            if windowed {
                windowed = false;
                continue;
            }
        }
        break best;
    };
    // Stage 2: details and a snippet for the chosen chunks only.
    Ok(hit::hits(conn, &plan, best)?)
}

/// Stage 1's queries, by plan and sort.
enum Stage<'a> {
    /// Ranked words: one scoring query per shard (`shard_matches`), then a
    /// lookup of each chunk's weight, time and filters (`weigh`).
    Rank {
        sqls: Vec<String>,
        expr: &'a str,
        lookup: String,
    },
    /// Words, newest first: one query per shard, joined in SQL (`run_recent`).
    Recent { sqls: Vec<String>, expr: &'a str },
    /// Chunk text tested in Rust (`scan_chunks`).
    Scan { sql: String },
}

/// A word query's parameters: the MATCH expression as ?1, the row limit as
/// ?2 (NULL when the query has none), then the filters from ?3.
fn query_params(expr: &str, limit: Option<usize>, filters: &[SqlValue]) -> Vec<SqlValue> {
    let limit = limit.map_or(SqlValue::Null, |limit| SqlValue::Integer(limit as i64));
    [SqlValue::Text(expr.to_owned()), limit]
        .into_iter()
        .chain(filters.iter().cloned())
        .collect()
}

/// Runs `sql` with as many of `params` as it has parameters: a restriction
/// or lookup refers to some of the filters only.
fn query_rows<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[SqlValue],
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let used = stmt.parameter_count().min(params.len());
    stmt.query_map(rusqlite::params_from_iter(&params[..used]), row)?
        .collect()
}

/// `--sort recent`'s stage 1: every shard's query, merged newest first,
/// `fetch` kept.
fn run_recent(
    store: &Index,
    extra: &[ShardWorker],
    sqls: &[String],
    params: &[SqlValue],
    fetch: usize,
) -> Result<Vec<Ranked>, SearchError> {
    let params: Arc<[SqlValue]> = params.into();
    let mut rows = on_connections(store, extra, sqls.to_vec(), true, move |conn, sql| {
        query_rows(conn, sql, &params, |row| {
            Ok(Ranked {
                chunk_id: row.get(0)?,
                entry_rowid: row.get(1)?,
                score: row.get(2)?,
                timestamp_ms: row.get(3)?,
            })
        })
    })?;
    rows.sort_by(by_time);
    rows.truncate(fetch);
    Ok(rows)
}

/// Matches beyond which a ranked query scores only the newest ones.
pub const RANK_WINDOW: i64 = 5_000;

/// Newest entries a `--sort recent` word search looks in first.
pub const RECENT_WINDOW: i64 = 10_000;
