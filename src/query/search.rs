//! `piidx search`: ranked full-text search over every indexed text chunk.
//!
//! Three ways to find chunks (docs/search.md):
//! * words: the unicode61 `fts` tables of the shard files (attached as
//!   `fts0`, `fts1`, ...; see `store::fts`), query translated by
//!   `search_query`, matches of all shards ranked together;
//! * unspaced scripts (CJK, Thai, ...): the shards' `fts_trigram` tables,
//!   which hold only chunks containing such characters (the writer decides
//!   per chunk);
//! * `--substring`, or trigram terms shorter than 3 characters: a scan of
//!   the chunks' text (`scan_chunks`), newest first.
//!
//! Ranking is bm25 (`rank::FUNCTION`) times a per-kind weight, best chunk per
//! entry. Each shard scores its matches in parallel (the shards after the
//! first on `ShardConnections`, opened in the background from the start of
//! the command), then `weigh` looks the matches up in bm25 order until the
//! top `limit` entries are settled. Those get a snippet (computed for them
//! only; the shards store no text, so the chosen chunks are cut out of their
//! entries by `chunk_text` and re-tokenised in a scratch table).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};

use rusqlite::OptionalExtension;
use rusqlite::types::Value as SqlValue;
use serde::Serialize;

use super::chunk_text;
use super::rank;
use super::search_query::{Translated, has_unspaced_script, translate};
use crate::store::Index;
use crate::time::{format_iso_ms, parse_day, parse_iso_ms};

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

/// Weight applied to bm25 (which is negative: more negative is better).
const KIND_WEIGHTS: &str =
    "CASE c.kind WHEN 'user' THEN 1.0 WHEN 'assistant' THEN 1.0 WHEN 'summary' THEN 1.0
     WHEN 'tool_result' THEN 0.5 ELSE 0.7 END";

/// SQL condition for one `--role` value (fixed strings only, never user text).
fn role_condition(role: &str) -> Result<&'static str, SearchError> {
    let normalized = role.trim().to_lowercase().replace('-', "_");
    Ok(match normalized.as_str() {
        "user" => "c.kind = 'user'",
        "assistant" => "c.kind = 'assistant'",
        "thinking" => "c.kind = 'thinking'",
        "tool_call" | "toolcall" => "c.kind = 'tool_call'",
        "tool_result" | "toolresult" => "c.kind = 'tool_result'",
        "bash" | "bashexecution" | "bash_execution" => "c.kind = 'bash'",
        "summary" => "c.kind = 'summary'",
        "compaction" | "compactionsummary" | "compaction_summary" => {
            "(c.kind = 'summary' AND (e.type = 'compaction' OR mm.role = 'compactionSummary'))"
        }
        "branch_summary" | "branchsummary" | "branch" => {
            "(c.kind = 'summary' AND (e.type = 'branch_summary' OR mm.role = 'branchSummary'))"
        }
        "custom" | "custom_message" => "c.kind = 'custom'",
        "system" => "c.kind = 'system'",
        "usage" => "c.kind = 'usage'",
        "context_edit" | "contextedit" => "c.kind = 'context_edit'",
        "label" => "c.kind = 'label'",
        "session_name" | "name" | "session_info" => "c.kind = 'session_name'",
        "other" => "c.kind = 'other'",
        _ => return Err(SearchError::Role(role.to_owned())),
    })
}

/// `YYYY-MM-DD` (start of that UTC day, or the next day's start for `until`)
/// or an ISO time.
fn parse_date(text: &str, end_of_day: bool) -> Result<i64, SearchError> {
    let trimmed = text.trim();
    if let Some(ms) = parse_iso_ms(trimmed) {
        return Ok(if end_of_day { ms + 1 } else { ms });
    }
    match parse_day(trimmed) {
        Some(day) => Ok((day + i64::from(end_of_day)) * 86_400_000),
        None => Err(SearchError::Date(text.to_owned())),
    }
}

/// Filters as SQL conditions plus their parameters (appended after the
/// query parameter, numbered from `first`).
struct Filters {
    sql: Vec<String>,
    params: Vec<SqlValue>,
}

/// Whether some condition reads `alias.` columns (`e` entries, `s` sessions).
fn mentions(conditions: &[String], alias: &str) -> bool {
    let needle = format!("{alias}.");
    conditions.iter().any(|condition| {
        condition.match_indices(&needle).any(|(at, _)| {
            at == 0
                || !condition.as_bytes()[at - 1].is_ascii_alphanumeric()
                    && condition.as_bytes()[at - 1] != b'_'
        })
    })
}

impl Filters {
    fn build(options: &SearchOptions, first: usize) -> Result<Filters, SearchError> {
        let mut filters = Filters {
            sql: Vec::new(),
            params: Vec::new(),
        };
        let mut next = first;
        let mut param = |filters: &mut Filters, value: SqlValue| -> usize {
            filters.params.push(value);
            next += 1;
            next - 1
        };
        if !options.roles.is_empty() {
            let mut any = Vec::new();
            for role in &options.roles {
                for part in role.split(',').filter(|p| !p.trim().is_empty()) {
                    any.push(role_condition(part)?);
                }
            }
            if !any.is_empty() {
                filters.sql.push(format!("({})", any.join(" OR ")));
            }
        }
        if !options.entry_types.is_empty() {
            let mut any = Vec::new();
            for entry_type in &options.entry_types {
                let n = param(&mut filters, entry_type.trim().to_owned().into());
                any.push(format!("e.type = ?{n}"));
            }
            filters.sql.push(format!("({})", any.join(" OR ")));
        }
        if let Some(project) = &options.project {
            let n = param(&mut filters, project.clone().into());
            filters
                .sql
                .push(format!("(s.project_dir = ?{n} OR instr(s.cwd, ?{n}) > 0)"));
        }
        if let Some(cwd) = &options.cwd {
            let trimmed = cwd.trim_end_matches('/');
            let n = param(&mut filters, trimmed.to_owned().into());
            filters.sql.push(format!(
                "(s.cwd = ?{n} OR substr(s.cwd, 1, length(?{n}) + 1) = ?{n} || '/')"
            ));
        }
        if let Some(session) = &options.session {
            let n = param(&mut filters, session.clone().into());
            filters.sql.push(format!(
                "(substr(s.session_id, 1, length(?{n})) = ?{n} OR s.file_path = ?{n})"
            ));
        }
        if let Some(tool) = &options.tool {
            let n = param(&mut filters, tool.clone().into());
            filters
                .sql
                .push(format!("c.tool_name = ?{n} COLLATE NOCASE"));
        }
        if let Some(model) = &options.model {
            let n = param(&mut filters, model.to_lowercase().into());
            filters
                .sql
                .push(format!("instr(lower(mm.model), ?{n}) > 0"));
        }
        if let Some(since) = &options.since {
            let n = param(&mut filters, parse_date(since, false)?.into());
            filters.sql.push(format!("e.timestamp_ms >= ?{n}"));
        }
        if let Some(until) = &options.until {
            let n = param(&mut filters, parse_date(until, true)?.into());
            filters.sql.push(format!("e.timestamp_ms < ?{n}"));
        }
        Ok(filters)
    }

    fn clause(&self) -> String {
        self.sql
            .iter()
            .map(|condition| format!(" AND {condition}"))
            .collect()
    }

    /// For a ranked word search: the conditions on the session alone
    /// (`--project`, `--cwd`, `--session`) as a restriction of the FTS query
    /// to the chunks of those sessions' files, for when the newest matches
    /// of a common word hold too few of theirs: every match was then ranked
    /// and joined (`the --project auth`: 176 ms on 1 GB, 40 ms so). Not the
    /// first try: the set of a big project's chunk ids costs ~20 ms to build.
    fn fts_restriction(&self) -> String {
        let conditions: Vec<&str> = self
            .sql
            .iter()
            .filter(|condition| {
                let one = std::slice::from_ref(*condition);
                mentions(one, "s") && !["c", "e", "mm"].iter().any(|a| mentions(one, a))
            })
            .map(String::as_str)
            .collect();
        if conditions.is_empty() {
            return String::new();
        }
        // `+rowid`: a filter on each match, not a rowid lookup per member.
        format!(
            " AND +rowid IN (SELECT coalesce(c.fts_rowid, c.chunk_id) FROM sessions s
                              CROSS JOIN chunks c ON c.file_id = s.file_id WHERE {})",
            conditions.join(" AND ")
        )
    }
}

/// Which index answers the query.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// MATCH on an FTS table.
    Fts { table: &'static str, expr: String },
    /// Every term looked for in the chunk text (`scan_chunks`); `unspaced`
    /// limits the scan to the chunks in fts_trigram (all chunks with CJK & co).
    Scan { terms: Vec<String>, unspaced: bool },
}

fn plan(options: &SearchOptions) -> Result<Plan, SearchError> {
    if options.raw {
        let table = if has_unspaced_script(&options.query) {
            "fts_trigram"
        } else {
            "fts"
        };
        return Ok(Plan::Fts {
            table,
            expr: options.query.clone(),
        });
    }
    let Translated { expr, terms } = translate(&options.query);
    if expr.is_empty() {
        return Err(SearchError::Empty(options.query.clone()));
    }
    let unspaced = has_unspaced_script(&options.query);
    if options.substring && !unspaced {
        // The trigram table only holds unspaced-script chunks (docs/search.md).
        return Ok(Plan::Scan {
            terms,
            unspaced: false,
        });
    }
    if options.substring || unspaced {
        if terms.iter().all(|term| term.chars().count() >= 3) {
            return Ok(Plan::Fts {
                table: "fts_trigram",
                expr,
            });
        }
        return Ok(Plan::Scan {
            terms,
            unspaced: true,
        });
    }
    Ok(Plan::Fts { table: "fts", expr })
}

const HIT_COLUMNS: &str =
    "s.session_id, s.file_path, s.name, s.first_message, s.cwd, e.entry_id, c.kind,
     e.type, e.timestamp_ms, c.tool_name, c.json_path, e.line_no, c.chunk_id";

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
    let chosen: Vec<i64> = best.iter().map(|(chunk_id, _)| *chunk_id).collect();
    let mut fts_snippets = match &plan {
        Plan::Fts { table, expr } => snippets_of(conn, table, expr, &chosen)?,
        Plan::Scan { .. } => HashMap::new(),
    };
    let mut details = conn.prepare(&format!(
        "SELECT {HIT_COLUMNS} FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
         JOIN sessions s ON s.file_id = c.file_id WHERE c.chunk_id = ?1"
    ))?;
    let mut hits = Vec::with_capacity(best.len());
    for (chunk_id, score) in best {
        // Each statement reads its own snapshot: a sync that removed the
        // chunk since it was ranked takes the hit with it.
        let found = details.query_row([chunk_id], |row| {
            Ok(Hit {
                session_id: row.get(0)?,
                session_path: row.get(1)?,
                session_name: row.get(2)?,
                first_message: row.get(3)?,
                cwd: row.get(4)?,
                entry_id: row.get(5)?,
                role: row.get(6)?,
                entry_type: row.get(7)?,
                timestamp: row.get::<_, Option<i64>>(8)?.map(format_iso_ms),
                tool_name: row.get(9)?,
                json_path: row.get(10)?,
                line_no: row.get(11)?,
                chunk_id: row.get(12)?,
                score,
                snippet: String::new(),
                run: None,
            })
        });
        let Some(mut hit) = found.optional()? else {
            continue;
        };
        hit.run = run_of(conn, chunk_id)?;
        hit.snippet = match &plan {
            Plan::Fts { .. } => fts_snippets.remove(&chunk_id),
            Plan::Scan { terms, .. } => {
                chunk_body(conn, chunk_id)?.map(|body| scan_snippet(&body, terms))
            }
        }
        .map(|snippet| clean_snippet(&snippet))
        .unwrap_or_default();
        hits.push(hit);
    }
    Ok(hits)
}

/// A stage-1 row: a matching chunk, its score and timestamp.
#[derive(Debug, Clone, Copy)]
struct Ranked {
    chunk_id: i64,
    entry_rowid: i64,
    score: f64,
    timestamp_ms: Option<i64>,
}

/// A shard's scoring query: its matches of ?1 (`source` is `fts<k>.<table>`).
fn rank_sql(table: &str, source: &str, restriction: &str, window: &str) -> String {
    format!(
        "SELECT rowid, {rank}({table}) FROM {source} WHERE {table} MATCH ?1{restriction}{window}",
        rank = rank::FUNCTION,
    )
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

/// Connections of their own for the full-text shards after the first, so
/// that every shard is queried at once (on one connection, shards are
/// queried one after another). Each lives on a thread of its own, opened
/// there from the start of the command while the main connection opens,
/// and runs the queries sent to it. Opened when first needed, on a thread
/// per query, it took ~1.9 ms of a search's critical path (open, schema,
/// attach), and on two cores a new thread next to the one opening waited
/// up to a millisecond to be scheduled.
#[derive(Default)]
pub struct ShardConnections {
    /// Shards 1, 2, ...: the main connection queries shard 0.
    workers: Vec<ShardWorker>,
    scoring: Option<ScoringStarted>,
}

/// The first scoring queries of a ranked word search (windowed, no session
/// restriction), started on every shard before the index is open: they need
/// only the query and the shard files, and scoring was most of the time
/// after opening. `search` takes their rows when its first queries are
/// these, and drops them otherwise (when the index records another number
/// of shards than there are files).
struct ScoringStarted {
    sqls: Vec<String>,
    expr: String,
    rows: Vec<Reply<(i64, f64)>>,
    /// A connection for shard 0, which the main one queries otherwise.
    _shard0: ShardWorker,
}

impl ShardConnections {
    /// Starts opening one connection per shard file after the first that
    /// `db` has, when `options` will query the shards (a word or trigram
    /// search; a scan reads the main file only), and for a ranked word
    /// search its first scoring queries. A connection the search turns out
    /// not to need is closed unused.
    pub fn open(db: &Path, options: &SearchOptions) -> ShardConnections {
        let Ok(Plan::Fts { table, expr }) = plan(options) else {
            return ShardConnections::default();
        };
        let workers: Vec<ShardWorker> = (1..)
            .take_while(|&shard| crate::store::shard_path(db, shard).exists())
            .map(|shard| ShardWorker::open(db.to_owned(), shard))
            .collect();
        let scoring = (options.sort == Sort::Rank && !options.raw)
            .then(|| ScoringStarted::start(db, table, expr, &workers));
        ShardConnections { workers, scoring }
    }

    /// The connections of shards 1 to `shards - 1`: those opening in
    /// advance, then new ones.
    fn take(&mut self, shards: usize, db: &Path) -> Vec<ShardWorker> {
        let mut workers = std::mem::take(&mut self.workers);
        workers.truncate(shards.saturating_sub(1));
        while workers.len() + 1 < shards {
            workers.push(ShardWorker::open(db.to_owned(), workers.len() + 1));
        }
        workers
    }

    /// The rows of the scoring queries started in advance, if they are
    /// `sqls` for `expr`; they are given out once.
    fn started_scoring(
        &mut self,
        sqls: &[String],
        expr: &str,
    ) -> Option<Result<Vec<(i64, f64)>, SearchError>> {
        let scoring = self
            .scoring
            .take()
            .filter(|scoring| scoring.sqls == sqls && scoring.expr == expr)?;
        let mut matches = Vec::new();
        Some(receive(scoring.rows, &mut matches).map(|()| best_bm25_first(matches)))
    }
}

impl ScoringStarted {
    /// Sends shard 0's query to a new connection, the others' to `workers`,
    /// with the window `search` gives them when the index records as many
    /// shards as there are files.
    fn start(db: &Path, table: &str, expr: String, workers: &[ShardWorker]) -> ScoringStarted {
        let shards = workers.len() + 1;
        let window = format!(" ORDER BY rowid DESC LIMIT {}", RANK_WINDOW / shards as i64);
        let sqls: Vec<String> = (0..shards)
            .map(|shard| {
                let source = format!("{}.{table}", crate::store::shard_schema(shard));
                rank_sql(table, &source, "", &window)
            })
            .collect();
        let shard0 = ShardWorker::open(db.to_owned(), 0);
        let rows = std::iter::once(&shard0)
            .chain(workers)
            .zip(&sqls)
            .map(|(worker, sql)| {
                let (sql, params) = (sql.clone(), [SqlValue::Text(expr.clone())]);
                worker.run(false, move |conn| {
                    query_rows(conn, &sql, &params, |row| Ok((row.get(0)?, row.get(1)?)))
                })
            })
            .collect();
        ScoringStarted {
            sqls,
            expr,
            rows,
            _shard0: shard0,
        }
    }
}

/// Where a `ShardWorker`'s rows arrive.
type Reply<T> = mpsc::Receiver<Result<Vec<T>, SearchError>>;

/// Work for a `ShardWorker`'s thread: its connection, or why it could not
/// be opened.
type Job = Box<dyn FnOnce(Result<&mut ShardConnection, &str>) + Send>;

/// One of `ShardConnections`: the queue of the thread that holds the
/// connection, which ends (and closes it) when this is dropped.
struct ShardWorker {
    jobs: mpsc::Sender<Job>,
}

impl ShardWorker {
    fn open(db: PathBuf, shard: usize) -> ShardWorker {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            let mut opened = ShardConnection::open(db, shard).map_err(|err| err.to_string());
            for job in queue {
                job(opened.as_mut().map_err(|message| message.as_str()));
            }
        });
        ShardWorker { jobs }
    }

    /// Runs `query` on the connection's thread (with the index's tables
    /// when `needs_index`); the result arrives on the returned channel.
    fn run<T: Send + 'static>(
        &self,
        needs_index: bool,
        query: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<Vec<T>> + Send + 'static,
    ) -> Reply<T> {
        let (reply, replied) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let rows = match conn {
                Ok(conn) => conn
                    .connection(needs_index)
                    .and_then(|conn| Ok(query(conn)?)),
                Err(message) => Err(SearchError::ShardConnection(message.to_owned())),
            };
            // The search stopped waiting (it failed on another connection).
            let _ = reply.send(rows);
        });
        // A thread that is gone has dropped the job with its `reply`: the
        // receiver says so.
        let _ = self.jobs.send(job);
        replied
    }
}

/// The connection a `ShardWorker`'s thread holds: in memory, with its
/// shard attached as `fts<shard>` and `rank::FUNCTION`; the index itself is
/// attached (`Index::attach_to`) when a query first needs its tables. Most
/// need the shard alone, and reading the index's schema is most of opening
/// it: on two cores, that work slowed the main connection's own opening.
struct ShardConnection {
    conn: rusqlite::Connection,
    db: PathBuf,
    index: bool,
}

impl ShardConnection {
    fn open(db: PathBuf, shard: usize) -> Result<ShardConnection, SearchError> {
        let conn = rusqlite::Connection::open_in_memory()?;
        crate::store::attach_one_shard(&conn, &db, shard)?;
        rank::register(&conn)?;
        Ok(ShardConnection {
            conn,
            db,
            index: false,
        })
    }

    fn connection(&mut self, needs_index: bool) -> Result<&rusqlite::Connection, SearchError> {
        if needs_index && !self.index {
            Index::attach_to(&self.conn, &self.db)?;
            self.index = true;
        }
        Ok(&self.conn)
    }
}

/// Runs `jobs[0]` on `store` and `jobs[k]` on `extra[k-1]`, all at once
/// (`needs_index`: the queries read the index's tables, not only the
/// shards). There are never more jobs than connections.
fn on_connections<J, T>(
    store: &Index,
    extra: &[ShardWorker],
    jobs: Vec<J>,
    needs_index: bool,
    run: impl Fn(&rusqlite::Connection, &J) -> rusqlite::Result<Vec<T>> + Clone + Send + 'static,
) -> Result<Vec<T>, SearchError>
where
    J: Send + 'static,
    T: Send + 'static,
{
    let mut jobs = jobs.into_iter();
    let Some(first) = jobs.next() else {
        return Ok(Vec::new());
    };
    let replies: Vec<_> = extra
        .iter()
        .zip(jobs)
        .map(|(connection, job)| {
            let run = run.clone();
            connection.run(needs_index, move |conn| run(conn, &job))
        })
        .collect();
    let mut rows = run(store.connection(), &first)?;
    receive(replies, &mut rows)?;
    Ok(rows)
}

/// Waits for every reply and adds its rows to `rows`, in order.
fn receive<T>(replies: Vec<Reply<T>>, rows: &mut Vec<T>) -> Result<(), SearchError> {
    for reply in replies {
        rows.extend(reply.recv().map_err(|_| thread_stopped())??);
    }
    Ok(())
}

/// A `ShardWorker` whose thread ended without an answer.
fn thread_stopped() -> SearchError {
    SearchError::ShardConnection("its thread stopped before answering".to_owned())
}

/// Every shard's scored matches (chunk id, bm25), best first.
/// `restricted`: the queries keep the chunks of some sessions only, which
/// they read in the index.
fn shard_matches(
    store: &Index,
    extra: &[ShardWorker],
    sqls: &[String],
    params: &[SqlValue],
    restricted: bool,
) -> Result<Vec<(i64, f64)>, SearchError> {
    let params: Arc<[SqlValue]> = params.into();
    let matches = on_connections(store, extra, sqls.to_vec(), restricted, move |conn, sql| {
        query_rows(conn, sql, &params, |row| Ok((row.get(0)?, row.get(1)?)))
    })?;
    Ok(best_bm25_first(matches))
}

/// Scored matches (chunk id, bm25) best first, ties newest first.
fn best_bm25_first(mut matches: Vec<(i64, f64)>) -> Vec<(i64, f64)> {
    matches.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    matches
}

/// The shards' matches on their way through `weigh`.
struct Weighing {
    /// Every match, best bm25 first.
    matches: Vec<(i64, f64)>,
    /// How many of `matches` have been looked up.
    next: usize,
    /// Those that passed the filters, weighted, best first.
    found: Vec<Ranked>,
}

/// The best `limit` entries once their matches are weighted by kind and
/// filtered (each entry's best chunk: score, then newest first). The
/// matches' chunks are looked up in the main file (`lookup`, which applies
/// the filters) in bm25 order, in batches that double, and only until no
/// later match can enter the top: a weight is at most 1 and bm25 is
/// negative, so a match scores at best its bm25, and once that is worse
/// than the `limit`-th entry's score, no later match can displace an entry
/// or improve one of them. Joining every match to `chunks` cost a random
/// page read per match: most of the ranking of a common word's 5,000-match
/// window (docs/search.md, "How the top is found").
/// Big batches (filters that reject most matches) are split over the
/// shards' connections.
fn weigh(
    store: &Index,
    extra: &[ShardWorker],
    lookup: &str,
    weighing: &mut Weighing,
    filters: &[SqlValue],
    limit: usize,
) -> Result<Vec<Ranked>, SearchError> {
    // Shared with the connections' threads.
    let (lookup, filters): (Arc<str>, Arc<[SqlValue]>) = (lookup.into(), filters.into());
    let mut batch = limit * 2 + 16;
    loop {
        let top = best_per_entry(&weighing.found, limit);
        let settled = match weighing.matches.get(weighing.next) {
            None => true,
            Some(&(_, bm25)) => {
                top.len() == limit && top.last().is_some_and(|worst| bm25 > worst.score)
            }
        };
        if settled {
            return Ok(top);
        }
        let end = (weighing.next + batch).min(weighing.matches.len());
        let bm25s: HashMap<i64, f64> = weighing.matches[weighing.next..end]
            .iter()
            .copied()
            .collect();
        // In id order: neighbouring chunks share B-tree pages.
        let mut ids: Vec<i64> = bm25s.keys().copied().collect();
        ids.sort_unstable();
        let parts = if ids.len() >= PARALLEL_LOOKUPS {
            extra.len() + 1
        } else {
            1
        };
        let jobs: Vec<String> = ids
            .chunks(ids.len().div_ceil(parts).max(1))
            .map(json_array)
            .collect();
        let (lookup, filters) = (lookup.clone(), filters.clone());
        let rows = on_connections(store, extra, jobs, true, move |conn, ids| {
            query_rows(conn, &lookup, &query_params(ids, None, &filters), |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get::<_, f64>(3)?,
                    row.get(4)?,
                ))
            })
        })?;
        for (row_id, chunk_id, entry_rowid, weight, timestamp_ms) in rows {
            if let Some(bm25) = bm25s.get(&row_id) {
                weighing.found.push(Ranked {
                    chunk_id,
                    entry_rowid,
                    score: bm25 * weight,
                    timestamp_ms,
                });
            }
        }
        weighing.found.sort_by(by_score);
        weighing.next = end;
        batch *= 2;
    }
}

/// The first `limit` rows of distinct entries: each entry's best chunk,
/// as `rows` are sorted best first.
fn best_per_entry(rows: &[Ranked], limit: usize) -> Vec<Ranked> {
    let mut seen = HashSet::new();
    rows.iter()
        .filter(|row| seen.insert(row.entry_rowid))
        .take(limit)
        .copied()
        .collect()
}

/// From this many chunks on, `weigh` splits a batch over the connections.
const PARALLEL_LOOKUPS: usize = 2048;

/// `[1,2,3]`: ids for `json_each`.
fn json_array(ids: &[i64]) -> String {
    let items: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// Newest first: entry time, then chunk id (later chunks are newer).
fn by_time(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.timestamp_ms
        .cmp(&a.timestamp_ms)
        .then(b.chunk_id.cmp(&a.chunk_id))
}

/// Best score first, ties newest first.
fn by_score(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    a.score.total_cmp(&b.score).then_with(|| by_time(a, b))
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

/// Stage 1 of a scan (`--substring`, short CJK terms): the SQL lists the
/// candidate chunks newest first, with the filters applied; here each one's
/// text is tested for every term, as `instr(lower(text), lower(term))` would
/// (SQLite's `lower` folds ASCII only), until `fetch` chunks match. Chunks
/// of one field come one after another, so each entry is read and each
/// field decoded once: through `fts_content`, a multi-MB field was parsed
/// again for every one of its chunks.
fn scan_chunks(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[SqlValue],
    terms: &[String],
    fetch: usize,
) -> Result<Vec<Ranked>, SearchError> {
    let needles: Vec<memchr::memmem::Finder> = terms
        .iter()
        .map(|term| memchr::memmem::Finder::new(term.to_ascii_lowercase().as_bytes()).into_owned())
        .collect();
    // A scan reads most of the main file. Mapped, its pages are read in
    // place, not copied out of the OS page cache by a `pread` each (a full
    // scan of 1 GB: 1.0 → 0.7 s). A ranked search reads a few hundred pages,
    // for which mapping the file cost more than it saved. Only the main file:
    // without a schema name the limit would apply to the shards too.
    conn.pragma_update(Some("main"), "mmap_size", i64::MAX)?;
    let mut stmt = conn.prepare(sql)?;
    // serde_json writes every character as itself except `"`, `\` and
    // control characters. A term without those occurs in an entry's text
    // only if it occurs in its JSON: one search of the JSON rules out an
    // entry without decoding any of its strings.
    let plain = terms
        .iter()
        .all(|term| !term.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
    let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
    let mut field = FieldCache::default();
    let mut found = Vec::new();
    while let Some(row) = rows.next()? {
        let chunk_id: i64 = row.get(0)?;
        let entry_rowid: i64 = row.get(1)?;
        // A shared text's chunk: its text is not in the entry's JSON.
        let shared: bool = row.get(6)?;
        if !shared && plain && !field.entry_holds(conn, entry_rowid, &needles)? {
            continue;
        }
        let span = (row.get::<_, i64>(4)?, row.get::<_, i64>(5)?);
        let scanned = if shared {
            None
        } else {
            field.span(conn, entry_rowid, &row.get::<_, String>(3)?, span)?
        };
        let text = match scanned {
            Some(text) => text,
            None => chunk_body(conn, chunk_id)?.unwrap_or_default(),
        };
        let lower = text.to_ascii_lowercase();
        if needles
            .iter()
            .all(|needle| needle.find(lower.as_bytes()).is_some())
        {
            found.push(Ranked {
                chunk_id,
                entry_rowid,
                score: 0.0,
                timestamp_ms: row.get(2)?,
            });
            if found.len() == fetch {
                break;
            }
        }
    }
    Ok(found)
}

/// An entry's JSON, as bytes.
const RAW_OF_ENTRY: &str = "SELECT CAST(raw AS BLOB) FROM entries WHERE entry_rowid = ?1";

/// The last entry read and the last string field decoded by `scan_chunks`.
#[derive(Default)]
struct FieldCache {
    entry: Option<(i64, Vec<u8>)>,
    /// Entry, path and decoded text (`None` when it could not be decoded,
    /// so that a field's other chunks do not try again).
    field: Option<(i64, String, Option<String>)>,
    /// Whether the entry's JSON, ASCII-lowercased, holds every term.
    holds: Option<(i64, bool)>,
    /// The last entry's JSON, ASCII-lowercased (kept for its capacity).
    lower: Vec<u8>,
}

impl FieldCache {
    /// Whether every needle occurs in the entry's JSON (ASCII case folded).
    fn entry_holds(
        &mut self,
        conn: &rusqlite::Connection,
        entry_rowid: i64,
        needles: &[memchr::memmem::Finder],
    ) -> rusqlite::Result<bool> {
        if let Some((rowid, holds)) = self.holds
            && rowid == entry_rowid
        {
            return Ok(holds);
        }
        // Lowercased straight out of SQLite's buffer: most entries are
        // ruled out here, and never copied whole. One that holds every term
        // is kept, as its chunks are decoded next.
        let (lower, kept) = (&mut self.lower, &mut self.entry);
        lower.clear();
        let holds = conn
            .prepare_cached(RAW_OF_ENTRY)?
            .query_row([entry_rowid], |row| {
                let raw = row.get_ref(0)?.as_bytes_or_null()?.unwrap_or_default();
                lower.extend(raw.iter().map(u8::to_ascii_lowercase));
                let holds = needles.iter().all(|needle| needle.find(lower).is_some());
                if holds {
                    *kept = Some((entry_rowid, raw.to_vec()));
                }
                Ok(holds)
            })
            .optional()?
            .unwrap_or(false);
        self.holds = Some((entry_rowid, holds));
        Ok(holds)
    }

    /// The entry's JSON, read once however many of its chunks ask.
    fn raw(&mut self, conn: &rusqlite::Connection, entry_rowid: i64) -> rusqlite::Result<&[u8]> {
        if !matches!(&self.entry, Some((rowid, _)) if *rowid == entry_rowid) {
            let raw: Vec<u8> = conn
                .prepare_cached(RAW_OF_ENTRY)?
                .query_row([entry_rowid], |row| row.get(0))
                .optional()?
                .unwrap_or_default();
            self.entry = Some((entry_rowid, raw));
        }
        Ok(self.entry.as_ref().map_or(&[][..], |(_, raw)| raw))
    }

    /// The chunk `span` of the field at `json_path`; `None` when the field
    /// cannot be decoded here (the caller asks `fts_content`).
    fn span(
        &mut self,
        conn: &rusqlite::Connection,
        entry_rowid: i64,
        json_path: &str,
        (start, len): (i64, i64),
    ) -> rusqlite::Result<Option<String>> {
        let field_cached = matches!(&self.field,
            Some((rowid, path, _)) if *rowid == entry_rowid && path == json_path);
        if !field_cached {
            let raw = self.raw(conn, entry_rowid)?;
            let text = chunk_text::span_text(raw, json_path, 0, raw.len());
            self.field = Some((entry_rowid, json_path.to_owned(), text));
        }
        let (Some((_, _, Some(text))), Ok(start), Ok(len)) =
            (&self.field, usize::try_from(start), usize::try_from(len))
        else {
            return Ok(None);
        };
        Ok(text
            .get(start..start.saturating_add(len).min(text.len()))
            .map(str::to_owned))
    }
}

/// Control characters (newlines, tabs, terminal escapes from tool output)
/// become spaces, so a snippet is one safe line; the match marks stay.
fn clean_snippet(snippet: &str) -> String {
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
fn scan_snippet(body: &str, terms: &[String]) -> String {
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

/// Matches beyond which a ranked query scores only the newest ones.
pub const RANK_WINDOW: i64 = 5_000;

/// Newest entries a `--sort recent` word search looks in first.
pub const RECENT_WINDOW: i64 = 10_000;

/// Snippets for FTS hits. The shards are contentless, so the chosen chunks
/// are indexed again in a scratch in-memory table with the tokenizer of
/// `table`, where FTS5's own `snippet()` marks the same matches.
fn snippets_of(
    conn: &rusqlite::Connection,
    table: &str,
    expr: &str,
    chunk_ids: &[i64],
) -> rusqlite::Result<HashMap<i64, String>> {
    let tokenize = if table == "fts_trigram" {
        "trigram"
    } else {
        "unicode61 remove_diacritics 2"
    };
    let mut scratch = rusqlite::Connection::open_in_memory()?;
    scratch.execute_batch(&format!(
        "CREATE VIRTUAL TABLE snip USING fts5(body, tokenize = '{tokenize}')"
    ))?;
    // In one transaction and in rowid order: FTS5 writes its pending terms
    // out as a segment at every commit, and before any row whose id is not
    // above the last one's. In rank order, one by one, nearly every insert
    // wrote a segment (2–3 ms of a search).
    let mut ids = chunk_ids.to_vec();
    ids.sort_unstable();
    let filling = scratch.transaction()?;
    {
        let mut insert = filling.prepare("INSERT INTO snip(rowid, body) VALUES (?1, ?2)")?;
        for &chunk_id in &ids {
            let text = chunk_body(conn, chunk_id)?;
            insert.execute(rusqlite::params![chunk_id, text.unwrap_or_default()])?;
        }
    }
    filling.commit()?;
    let mut snippets = scratch.prepare(
        "SELECT rowid, snippet(snip, 0, char(2), char(3), '…', 24) FROM snip WHERE snip MATCH ?1",
    )?;
    snippets
        .query_map([expr], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect()
}

/// The text of one chunk: cut out of the entry's JSON by `chunk_text`, or
/// by the `fts_content` view (which parses the whole entry) when that scan
/// does not find it. `None` when the chunk is gone.
fn chunk_body(conn: &rusqlite::Connection, chunk_id: i64) -> rusqlite::Result<Option<String>> {
    let chunk = conn
        .prepare_cached(
            "SELECT entry_rowid, json_path, start, len, fts_rowid IS NOT NULL
               FROM chunks WHERE chunk_id = ?1",
        )?
        .query_row([chunk_id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                usize::try_from(row.get::<_, i64>(2)?).ok(),
                usize::try_from(row.get::<_, i64>(3)?).ok(),
                row.get::<_, bool>(4)?,
            ))
        })
        .optional()?;
    let Some((entry_rowid, json_path, start, len, shared)) = chunk else {
        return Ok(None);
    };
    // A shared text's chunk is not in the entry's JSON: the view reads it.
    let scanned = match (start, len) {
        (Some(start), Some(len)) if !shared => scan_raw(conn, entry_rowid, &json_path, start, len),
        _ => None,
    };
    match scanned {
        Some(text) => Ok(Some(text)),
        None => conn
            .prepare_cached("SELECT body FROM fts_content WHERE chunk_id = ?1")?
            .query_row([chunk_id], |row| row.get(0))
            .optional()
            .map(Option::flatten),
    }
}

/// Reads `entries.raw` only as far as the chunk's window needs: escapes
/// only lengthen text, so the window ends at least `start + len` bytes in.
/// That much and a margin is read first, the rest only if it was short.
/// Any failure (the row is gone, the JSON is not as expected) is `None`.
fn scan_raw(
    conn: &rusqlite::Connection,
    entry_rowid: i64,
    json_path: &str,
    start: usize,
    len: usize,
) -> Option<String> {
    let blob = conn
        .blob_open(rusqlite::MAIN_DB, "entries", "raw", entry_rowid, true)
        .ok()?;
    let size = blob.len();
    let first = size.min(start.saturating_add(len).saturating_mul(9) / 8 + 64 * 1024);
    let mut raw = vec![0; first];
    blob.read_at_exact(&mut raw, 0).ok()?;
    if let Some(text) = chunk_text::span_text(&raw, json_path, start, len) {
        return Some(text);
    }
    if first == size {
        return None;
    }
    raw.resize(size, 0);
    blob.read_at_exact(&mut raw[first..], first).ok()?;
    chunk_text::span_text(&raw, json_path, start, len)
}

/// The subagent run a chunk belongs to (`chunk_runs`, migration 0002).
fn run_of(conn: &rusqlite::Connection, chunk_id: i64) -> rusqlite::Result<Option<RunRef>> {
    let run = |child: bool| {
        move |row: &rusqlite::Row<'_>| {
            Ok(RunRef {
                agent: row.get(0)?,
                mode: row.get(1)?,
                position: row.get(2)?,
                run_id: row.get(3)?,
                tool_call_id: row.get(4)?,
                parent_session_id: row.get(5)?,
                parent_session_path: row.get(6)?,
                child_session: child,
            })
        }
    };
    const COLUMNS: &str =
        "r.agent, r.mode, r.position, r.run_id, r.tool_call_id, r.session_id, f.path";
    let embedded = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM chunk_runs cr JOIN subagent_runs r ON r.run_rowid = cr.run_rowid
               JOIN files f ON f.file_id = r.file_id
              WHERE cr.chunk_id = ?1"
        ))?
        .query_row([chunk_id], run(false))
        .optional()?;
    if embedded.is_some() {
        return Ok(embedded);
    }
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM chunks c JOIN subagent_runs r ON r.child_file_id = c.file_id
           JOIN files f ON f.file_id = r.file_id
          WHERE c.chunk_id = ?1 ORDER BY r.run_rowid LIMIT 1"
    ))?
    .query_row([chunk_id], run(true))
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(parse_date("2026-02-01", false).unwrap(), 1_769_904_000_000);
        assert_eq!(
            parse_date("2026-02-01", true).unwrap(),
            1_769_904_000_000 + 86_400_000
        );
        assert_eq!(
            parse_date("2026-02-01T00:00:00Z", false).unwrap(),
            1_769_904_000_000
        );
        assert!(parse_date("yesterday", false).is_err());
        assert!(parse_date("2026-13-01", false).is_err());
    }

    #[test]
    fn roles_and_aliases() {
        for role in ["toolResult", "tool-result", "tool_result", "TOOL_RESULT"] {
            assert_eq!(role_condition(role).unwrap(), "c.kind = 'tool_result'");
        }
        assert!(role_condition("nope").is_err());
    }

    #[test]
    fn plans() {
        let options = |query: &str, substring: bool| SearchOptions {
            query: query.to_owned(),
            substring,
            ..SearchOptions::default()
        };
        assert!(matches!(
            plan(&options("foo", false)),
            Ok(Plan::Fts { table: "fts", .. })
        ));
        assert!(matches!(
            plan(&options("桜餅テスト", false)),
            Ok(Plan::Fts {
                table: "fts_trigram",
                ..
            })
        ));
        assert!(matches!(
            plan(&options("桜餅", false)),
            Ok(Plan::Scan { .. })
        ));
        assert!(matches!(
            plan(&options("istAl", true)),
            Ok(Plan::Scan { .. })
        ));
        assert!(matches!(
            plan(&options("()", false)),
            Err(SearchError::Empty(_))
        ));
    }

    #[test]
    fn filters_name_the_tables_they_read() {
        let conditions = vec![
            "c.kind = 'user'".to_owned(),
            "instr(lower(mm.model), ?3) > 0".to_owned(),
        ];
        assert!(!mentions(&conditions, "e") && !mentions(&conditions, "s"));
        assert!(mentions(&["(e.type = 'compaction')".to_owned()], "e"));
        assert!(mentions(&["s.cwd = ?3".to_owned()], "s"));
    }

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
