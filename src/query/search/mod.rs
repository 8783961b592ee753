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
//! top `limit` entries are settled. A very common word is ranked (or sorted
//! by time) among its newest matches first, and among more only when those
//! hold too few hits: `stage` lists these attempts and runs each one. The
//! top entries get a snippet (`hit`, `snippet`:
//! computed for them only; the shards store no text, so the chosen chunks
//! are cut out of their entries by `chunk_text` and re-tokenised in a
//! scratch table).

pub mod chunk_text;
mod hit;
mod plan;
mod scan;
mod shards;
mod snippet;
mod stage;
pub mod syntax;
mod weigh;

use serde::Serialize;

use crate::query::rank;
use crate::query::scope::Scope;
use crate::store::Index;
use plan::{Filters, Plan, plan};
pub use shards::ShardConnections;
use stage::Stage1;
pub use stage::{RANK_WINDOW, RECENT_WINDOW};

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
    /// The sessions and the time searched (`--project`, `--cwd`,
    /// `--session`, `--since`, `--until`).
    pub scope: Scope,
    pub roles: Vec<String>,
    /// Entry types (`message`, `compaction`, or one piidx does not know).
    pub entry_types: Vec<String>,
    pub tool: Option<String>,
    pub model: Option<String>,
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
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("a full-text shard's connection failed: {0}")]
    ShardConnection(String),
}

/// Runs a search and returns at most `options.limit` hits. `store` queries
/// the first shard, `shard_connections` the others. Stage 1 tries the
/// plan's attempts (`Stage1::attempts`) in order until one settles the top
/// `limit` entries; stage 2 makes hits of those entries' best chunks.
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
    // A ranked query binds the MATCH expression as ?1 and the row limit as
    // ?2, so its filters start at ?3; a scan binds only the filters.
    let first_filter = match &plan {
        Plan::Fts { .. } => 3,
        Plan::Scan { .. } => 1,
    };
    let filters = Filters::build(options, first_filter)?;
    let stage1 = Stage1::new(&plan, options, &filters, &shards);
    let extra = shard_connections.take(stage1.sources(), store.path());
    let raw_error = |err: SearchError| match err {
        SearchError::Sqlite(err) if options.raw => SearchError::RawSyntax {
            query: options.query.clone(),
            message: err.to_string(),
        },
        err => err,
    };
    let mut best = Vec::new();
    for attempt in stage1.attempts() {
        best = stage1
            .run(attempt, store, &extra, &mut shard_connections, limit)
            .map_err(raw_error)?;
        if best.len() == limit {
            break;
        }
    }
    // Stage 2: details and a snippet for the chosen chunks only.
    Ok(hit::hits(conn, &plan, best)?)
}
