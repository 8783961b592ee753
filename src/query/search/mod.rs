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
//! entry. Each shard scores its matches in parallel (on the store's
//! `ShardReaders`, opened in the background from the start of the command:
//! `HeadStart`; shard 0 on the index's connection when the search has no
//! reader for it or its queries need the index's tables, which then
//! attaches the shards), then `weigh` looks the matches up in
//! bm25 order until the top `limit` entries are settled. A very common word
//! is ranked (or sorted by time) among its newest matches first, and among
//! more only when those hold too few hits: `stage` lists these attempts and
//! runs each one. The top entries get a snippet (`hit`, `snippet`: computed
//! for them only, on a shard reader's thread while their details are read;
//! the shards store no text, so the chosen chunks are cut out of their
//! entries by `chunk_text` and tokenized again: `fts5_snippet`).

mod body;
pub mod chunk_text;
mod fts5_snippet;
mod hit;
mod outputs;
mod plan;
mod scan;
pub mod sessions;
pub(crate) mod snippet;
mod stage;
pub mod syntax;
mod weigh;

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use serde::Serialize;

use crate::query::scope::Scope;
use crate::store::{Index, ShardReadError, ShardReaders, Started, Stop, rank, shard_schema};
#[cfg(feature = "postgres")]
pub(crate) use plan::role_condition;
use plan::{Filters, Plan, plan};
pub use plan::{MAX_QUERY_BYTES, MAX_TERMS, MAX_VALUES, ROLES};
pub use stage::{RANK_WINDOW, RECENT_WINDOW};
pub use syntax::as_you_type;

/// How long a search may run when its options give no budget of their
/// own: every search is bounded, whichever front-end asks.
pub const SEARCH_BUDGET: Duration = Duration::from_secs(10);
/// `KIND_WEIGHTS` for one kind, for the team store's search, which ranks
/// in the client.
#[cfg(feature = "postgres")]
pub(crate) use crate::store::weights::kind_weight;
use stage::{Stage1, rank_window};
use weigh::{Scoring, ShardMatches, rank_sql};

/// Marks around a match inside `Hit::snippet`; the printer replaces them.
pub const MARK_OPEN: char = '\u{2}';
pub const MARK_CLOSE: char = '\u{3}';

/// The order of hits (`--sort`, `sort`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    // `value(help)`, not doc comments: a variant's doc comment would make
    // its schema a `oneOf` of descriptions instead of a plain `enum`.
    #[default]
    #[value(help = "Best matches first")]
    Rank,
    #[value(help = "Newest first")]
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
    /// When the search stops: its time budget (from when the `Stop` was
    /// made; `SEARCH_BUDGET` from the start of the search when it has
    /// none) and a flag a front-end sets when its client went away.
    pub stop: Stop,
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
    /// The file of the hit when it is in oh-my-pi's full output of the tool
    /// result (`<session>/<N>.<tool>.log`; `json_path` is then
    /// `artifact://<N>`), null when it is in the session itself.
    pub full_output: Option<String>,
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
    #[error("unknown role {0:?}; use one of {roles}", roles = ROLES.join(", "))]
    Role(String),
    #[error(
        "the query has {count} terms and at most {max} are searched; leave out the common words (the rarest find the most)"
    )]
    TooManyTerms { count: usize, max: usize },
    #[error(
        "the query is {0} bytes long and at most {max} are searched; search for its rarest words",
        max = MAX_QUERY_BYTES
    )]
    TooLong(usize),
    #[error("{count} {what} values were given and at most {max} are taken; give fewer")]
    TooManyValues {
        what: &'static str,
        count: usize,
        max: usize,
    },
    #[error(
        "the search ran for {0:?}, its time limit, and was stopped; narrow it (rarer words, fewer prefixes*, --project, --since)"
    )]
    Timeout(Duration),
    #[error("the search was cancelled")]
    Cancelled,
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("a full-text shard's connection failed: {0}")]
    ShardConnection(String),
}

impl SearchError {
    /// True when the request itself is at fault (a front-end answers 400,
    /// or "invalid params"), false when the index or the machine is.
    pub fn is_callers(&self) -> bool {
        matches!(
            self,
            SearchError::Empty(_)
                | SearchError::RawSyntax { .. }
                | SearchError::Role(_)
                | SearchError::TooManyTerms { .. }
                | SearchError::TooLong(_)
                | SearchError::TooManyValues { .. }
                | SearchError::Timeout(_)
                | SearchError::Cancelled
        )
    }

    /// An interrupted statement as what stopped it.
    fn stopped_by(self, stop: &Stop) -> SearchError {
        match &self {
            SearchError::Sqlite(err) if crate::store::is_interrupt(err) => Self::stopped(stop),
            _ => self,
        }
    }

    /// Why `stop` stopped the search.
    fn stopped(stop: &Stop) -> SearchError {
        if stop.is_cancelled() {
            SearchError::Cancelled
        } else {
            SearchError::Timeout(stop.budget().unwrap_or(SEARCH_BUDGET))
        }
    }
}

impl From<ShardReadError> for SearchError {
    fn from(err: ShardReadError) -> SearchError {
        match err {
            // A --raw query's syntax error may come from any shard.
            ShardReadError::Sqlite(err) => SearchError::Sqlite(err),
            ShardReadError::Store(err) => SearchError::Store(err),
            ShardReadError::Connection(message) => SearchError::ShardConnection(message),
        }
    }
}

/// What a search starts from the beginning of the command, while the index
/// opens: the shards' readers (`ShardReaders`; shard 0's too for a ranked
/// search) and, for a ranked word search, its first scoring queries (the
/// window, no session restriction), which need only the query and the
/// shard files; scoring was most of the time after opening. `search` takes
/// their rows when its first queries are these, and drops them otherwise
/// (when the index records another number of shards than there are files).
#[derive(Default)]
pub struct HeadStart {
    readers: ShardReaders,
    /// Each shard's matches (`weigh::ShardMatches`).
    scoring: Option<Started<Scoring, ShardMatches>>,
}

impl HeadStart {
    /// Starts opening a reader per shard file after the first that `db`
    /// has, when `options` will query the shards (a word or trigram search;
    /// a scan reads the main file only), and for a ranked word search its
    /// first scoring queries, with the window `search` gives them when the
    /// index records as many shards as there are files. A reader the search
    /// turns out not to need is closed unused.
    pub fn open(db: &Path, options: &SearchOptions) -> HeadStart {
        let Ok(Plan::Fts { table, expr }) = plan(options) else {
            return HeadStart::default();
        };
        let mut readers = ShardReaders::open(db);
        readers.set_stop(options.stop.bounded(SEARCH_BUDGET));
        // A ranked search reads shard 0 on a reader too (`search_within`).
        if options.sort == Sort::Rank {
            readers.open_shard0(db);
        }
        let scoring = (options.sort == Sort::Rank && !options.raw).then(|| {
            let shards = readers.connections();
            let window = rank_window(shards);
            let scorings = (0..shards)
                .map(|shard| {
                    let source = format!("{}.{table}", shard_schema(shard));
                    rank_sql(table, &source, "", &window)
                })
                .collect();
            readers.start(db, scorings, scoring_params(&expr), weigh::scored)
        });
        HeadStart { readers, scoring }
    }

    /// The matches of the scoring queries started in advance, shard by
    /// shard, if they are `scorings` for `expr`; they are given out once.
    fn started_scoring(
        &mut self,
        scorings: &[Scoring],
        expr: &str,
    ) -> Option<Result<Vec<ShardMatches>, SearchError>> {
        let rows = self
            .scoring
            .as_mut()?
            .take_if(scorings, &scoring_params(expr))?;
        Some(rows.map_err(SearchError::from))
    }
}

/// The parameters of an unrestricted scoring query: the MATCH expression.
fn scoring_params(expr: &str) -> Vec<SqlValue> {
    vec![SqlValue::Text(expr.to_owned())]
}

/// Refuses options no search would take (too long, too many terms or
/// values, an empty query), as `search` does before reading anything: for
/// a search asked of another store (`query::pg::search`).
pub fn check(options: &SearchOptions) -> Result<(), SearchError> {
    plan(options)?;
    Filters::build(options, 1).map(|_| ())
}

/// Runs a search and returns at most `options.limit` hits. `store` queries
/// the first shard, `head`'s readers the others. Stage 1 tries the
/// plan's attempts (`Stage1::attempts`) in order until one settles the top
/// `limit` entries; stage 2 makes hits of those entries' best chunks.
pub fn search(
    store: &Index,
    mut head: HeadStart,
    options: &SearchOptions,
) -> Result<Vec<Hit>, SearchError> {
    search_again(store, &mut head, options)
}

/// `search` for a front-end that searches many times (the picker, the MCP
/// server): the shards' readers `head` opens are kept in it for the next
/// search. A limit of 0 is answered before this, by `Source::search`.
pub fn search_again(
    store: &Index,
    head: &mut HeadStart,
    options: &SearchOptions,
) -> Result<Vec<Hit>, SearchError> {
    let plan = plan(options)?;
    let conn = store.connection();
    let stop = options.stop.bounded(SEARCH_BUDGET);
    head.readers.set_stop(stop.clone());
    let _watching = stop.watch(conn);
    crate::fault::hold_if_asked("search", || stop.reached());
    if stop.reached() {
        return Err(SearchError::stopped(&stop));
    }
    search_within(store, head, options, plan).map_err(|err| err.stopped_by(&stop))
}

/// `search_again` once its `Stop` watches every connection.
fn search_within(
    store: &Index,
    head: &mut HeadStart,
    options: &SearchOptions,
    plan: Plan,
) -> Result<Vec<Hit>, SearchError> {
    // A ranked query binds the MATCH expression as ?1 and the row limit as
    // ?2, so its filters start at ?3; a scan binds only the filters.
    let first_filter = match &plan {
        Plan::Fts { .. } => 3,
        Plan::Scan { .. } => 1,
    };
    let filters = Filters::build(options, first_filter)?;
    let shards = match &plan {
        Plan::Fts { .. } if options.sort == Sort::Rank && filters.fts_restriction().is_empty() => {
            readers_alone(store, head)?
        }
        Plan::Fts { .. } => attach_ranked(store)?,
        Plan::Scan { unspaced: true, .. } => store.attach_fts()?,
        Plan::Scan { .. } => Vec::new(),
    };
    // The rest reads one snapshot (ATTACH is not allowed in a transaction).
    // Each statement on its own began and ended a read transaction of its
    // own, with a lock and an unlock of every file it read (`fcntl`) and a
    // look at the WAL index: ~30 statements and blob reads a search.
    store.in_snapshot(|store| search_attached(store, head, options, &plan, &filters, &shards))
}

/// The shards' schema names for a ranked search without session filters,
/// whose queries of the shards alone all run on the readers (shard 0's
/// too): the index's connection then attaches no shard, which cost ~0.3
/// ms of its thread (ATTACH, each shard's schema, the checks). The readers'
/// files must be the index's shards, as `attach_fts` checks; if one is not
/// (or could not be opened), the readers and their rows are dropped and
/// the shards attached after all, with `attach_fts`'s errors. Without a
/// reader of shard 0 (a front-end's next search), they are attached too.
fn readers_alone(store: &Index, head: &mut HeadStart) -> Result<Vec<String>, SearchError> {
    if head.readers.has_shard0() {
        if let Some(config) = store.shard_config()? {
            head.readers.fit(store, config.shards);
            if head.readers.belong_to(&config.db_id) {
                return Ok((0..config.shards).map(shard_schema).collect());
            }
        }
        *head = HeadStart::default();
    }
    attach_ranked(store)
}

/// The shards attached to the index's connection, with the ranking function.
fn attach_ranked(store: &Index) -> Result<Vec<String>, SearchError> {
    let shards = store.attach_fts()?;
    rank::register(store.connection())?;
    Ok(shards)
}

/// `search_within` once the shards are attached, in one read transaction.
fn search_attached(
    store: &Index,
    head: &mut HeadStart,
    options: &SearchOptions,
    plan: &Plan,
    filters: &Filters,
    shards: &[String],
) -> Result<Vec<Hit>, SearchError> {
    let conn = store.connection();
    let limit = options.limit;
    let stage1 = Stage1::new(plan, options, filters, shards);
    head.readers.fit(store, stage1.sources());
    let raw_error = |err: SearchError| match err {
        SearchError::Sqlite(err) if options.raw && !crate::store::is_interrupt(&err) => {
            SearchError::RawSyntax {
                query: options.query.clone(),
                message: err.to_string(),
            }
        }
        err => err,
    };
    let mut best = Vec::new();
    for attempt in stage1.attempts() {
        best = stage1.run(attempt, store, head, limit).map_err(raw_error)?;
        if best.len() == limit {
            break;
        }
    }
    // Stage 2: details and a snippet for the chosen chunks only.
    let hits = hit::hits(conn, &head.readers, plan, best)?;
    // oh-my-pi's full tool outputs, matched with the same words (not a
    // --raw query: its columns are the shards').
    match plan {
        Plan::Fts { table: "fts", expr } if !options.raw => {
            let outputs = outputs::output_hits(conn, expr, filters, options.sort, limit)?;
            Ok(outputs::merge(hits, outputs, options.sort, limit))
        }
        _ => Ok(hits),
    }
}
