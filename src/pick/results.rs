//! The picker's rows for a query: sessions whose name or first message
//! holds every word (Pi's `/resume` list when the query is empty), then the
//! full-text hits, from the same `query` functions the CLI prints.

use crate::query::QueryError;
use crate::query::scope::{Scope, When, now_ms};
use crate::query::search::{self, HeadStart, SearchError, SearchOptions, Sort};
use crate::query::sessions::{self, SessionInfo, SessionsQuery};
use crate::store::Index;
use crate::time::parse_iso_ms;

use super::state::{Query, Reach};

/// Hits asked of the search per query: a tall terminal's list. Each hit
/// costs a snippet, so not more.
const HITS: usize = 40;

/// One line of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub session_id: String,
    pub session_path: String,
    pub cwd: String,
    /// The session's name, else its first user message.
    pub title: String,
    pub time_ms: Option<i64>,
    /// The hit, for a full-text hit; `None` for a session's own line.
    pub hit: Option<HitRow>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HitRow {
    pub entry_id: String,
    pub role: String,
    /// With `search::MARK_OPEN` / `MARK_CLOSE` around the matches.
    pub snippet: String,
}

/// What a query found, and what the status line says about it.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub rows: Vec<Row>,
    pub sessions: usize,
    pub hits: usize,
    /// Why the search found nothing it could (a bad `since:`, a query of
    /// punctuation only), said instead of failing.
    pub problem: Option<String>,
}

/// The rows' source: the index, and the session lists of both reaches
/// (read once; the picker is short-lived).
pub struct Source {
    index: Index,
    scope: Scope,
    current_dir: String,
    here: Option<Vec<SessionInfo>>,
    all: Option<Vec<SessionInfo>>,
    /// The shards' readers, kept from one search to the next.
    head: HeadStart,
}

impl Source {
    pub fn new(index: Index, scope: Scope, current_dir: String) -> Source {
        Source {
            index,
            scope,
            current_dir,
            here: None,
            all: None,
            head: HeadStart::default(),
        }
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The scope of a reach: the command line's, narrowed to the current
    /// directory for `Here`.
    fn scope(&self, reach: Reach) -> Scope {
        let mut scope = self.scope.clone();
        if reach == Reach::Here {
            scope.cwd = Some(self.current_dir.clone());
        }
        scope
    }

    /// The sessions of a reach, in Pi's order.
    pub fn sessions(&mut self, reach: Reach) -> Result<&[SessionInfo], QueryError> {
        let scope = self.scope(reach);
        let slot = match reach {
            Reach::Here => &mut self.here,
            Reach::All => &mut self.all,
        };
        if slot.is_none() {
            let query = SessionsQuery {
                scope,
                limit: None,
                all: false,
            };
            *slot = Some(sessions::list(&self.index, &query)?);
        }
        Ok(slot.as_deref().unwrap_or_default())
    }

    /// The rows for `query` over `reach`.
    pub fn find(&mut self, query: &Query, reach: Reach) -> Result<Found, QueryError> {
        let mut found = Found::default();
        let mut scope = self.scope(reach);
        if let Some(since) = &query.since {
            match When::parse(since, now_ms(), &scope.tz) {
                Ok(when) => scope.since = Some(when),
                Err(err) => {
                    found.problem = Some(format!("since:{since}: {err}"));
                    return Ok(found);
                }
            }
        }
        let since_ms = scope.since.map(|when| when.start_ms(&scope.tz));
        let words: Vec<String> = query
            .words
            .split_whitespace()
            .map(str::to_lowercase)
            .collect();
        if !query.hits_only() {
            let titled = self
                .sessions(reach)?
                .iter()
                .filter(|info| since_ms.is_none_or(|since| info.modified_ms >= Some(since)))
                .filter(|info| {
                    words
                        .iter()
                        .all(|word| info.title().to_lowercase().contains(word))
                })
                .map(session_row);
            found.rows.extend(titled);
            found.sessions = found.rows.len();
        }
        if !words.is_empty() {
            let options = SearchOptions {
                query: search::as_you_type(&query.words, query.open),
                scope,
                roles: query.roles.clone(),
                model: query.model.clone(),
                limit: HITS,
                sort: Sort::Rank,
                ..SearchOptions::default()
            };
            match search::search_again(&self.index, &mut self.head, &options) {
                Ok(hits) => {
                    found.hits = hits.len();
                    found.rows.extend(hits.into_iter().map(|hit| {
                        Row {
                            title: sessions::title(
                                hit.session_name.as_deref(),
                                hit.first_message.as_deref(),
                            )
                            .unwrap_or_default()
                            .to_owned(),
                            time_ms: hit.timestamp.as_deref().and_then(parse_iso_ms),
                            session_id: hit.session_id,
                            session_path: hit.session_path,
                            cwd: hit.cwd,
                            hit: Some(HitRow {
                                entry_id: hit.entry_id,
                                role: hit.role,
                                snippet: hit.snippet,
                            }),
                        }
                    }));
                }
                Err(err @ (SearchError::Empty(_) | SearchError::Role(_))) => {
                    found.problem = Some(err.to_string());
                }
                Err(err) => return Err(err.into()),
            }
        }
        Ok(found)
    }
}

fn session_row(info: &SessionInfo) -> Row {
    Row {
        session_id: info.id.clone(),
        session_path: info.path.clone(),
        cwd: info.cwd.clone(),
        title: info.title().to_owned(),
        time_ms: info.modified_ms,
        hit: None,
    }
}
