//! `piidx search -l`: the sessions that hold hits, best first, each once.

use std::collections::HashMap;

use serde::Serialize;

use super::{HeadStart, Hit, SearchError, SearchOptions, search};
use crate::store::Index;

/// A session with hits: where it is, and how many of the hits it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionHits {
    pub session_id: String,
    pub session_path: String,
    pub session_name: Option<String>,
    pub first_message: Option<String>,
    pub cwd: String,
    /// Hits (entries) in this session among those searched.
    pub hits: usize,
    /// The entry of its best hit, and that hit's time.
    pub best_entry_id: String,
    pub best_timestamp: Option<String>,
}

/// Hits grouped by session file, in the order of each session's best hit.
pub fn group_by_session(hits: &[Hit]) -> Vec<SessionHits> {
    let mut order: Vec<SessionHits> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for hit in hits {
        match at.get(hit.session_path.as_str()) {
            Some(&index) => order[index].hits += 1,
            None => {
                at.insert(&hit.session_path, order.len());
                order.push(SessionHits {
                    session_id: hit.session_id.clone(),
                    session_path: hit.session_path.clone(),
                    session_name: hit.session_name.clone(),
                    first_message: hit.first_message.clone(),
                    cwd: hit.cwd.clone(),
                    hits: 1,
                    best_entry_id: hit.entry_id.clone(),
                    best_timestamp: hit.timestamp.clone(),
                });
            }
        }
    }
    order
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
