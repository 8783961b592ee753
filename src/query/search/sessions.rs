//! `piidx search -l`: the sessions that hold hits, best first, each once.

use std::collections::HashSet;

use serde::Serialize;

use super::{HeadStart, Hit, SearchError, SearchOptions, search};
use crate::store::Index;

/// A session with hits: where it is, and its best hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionHits {
    pub session_id: String,
    pub session_path: String,
    pub session_name: Option<String>,
    pub first_message: Option<String>,
    pub cwd: String,
    /// The entry of its best hit, and that hit's time.
    pub best_entry_id: String,
    pub best_timestamp: Option<String>,
}

/// Hits grouped by session file, in the order of each session's best hit.
pub fn group_by_session(hits: &[Hit]) -> Vec<SessionHits> {
    let mut seen: HashSet<&str> = HashSet::new();
    hits.iter()
        .filter(|hit| seen.insert(&hit.session_path))
        .map(|hit| SessionHits {
            session_id: hit.session_id.clone(),
            session_path: hit.session_path.clone(),
            session_name: hit.session_name.clone(),
            first_message: hit.first_message.clone(),
            cwd: hit.cwd.clone(),
            best_entry_id: hit.entry_id.clone(),
            best_timestamp: hit.timestamp.clone(),
        })
        .collect()
}

/// The first `max` sessions with hits, best first: searches for more hits
/// until `max` sessions hold some or every hit is found.
pub fn search_sessions(
    store: &Index,
    head: HeadStart,
    options: &SearchOptions,
    max: usize,
) -> Result<Vec<SessionHits>, SearchError> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let mut limit = max.saturating_mul(4);
    let mut head = Some(head);
    loop {
        let options = SearchOptions {
            limit,
            ..options.clone()
        };
        let hits = search(store, head.take().unwrap_or_default(), &options)?;
        let mut sessions = group_by_session(&hits);
        if sessions.len() >= max || hits.len() < limit {
            sessions.truncate(max);
            return Ok(sessions);
        }
        limit = limit.saturating_mul(4);
    }
}
