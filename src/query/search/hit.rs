//! Stage 2 of a search: the chosen chunks as `Hit`s, with their session,
//! entry and subagent run looked up, and a snippet, for the hits printed
//! only (stage 1 reads no text and joins as little as it can).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, mpsc};

use super::body::chunk_body;
use super::plan::Plan;
use super::snippet::{Marking, clean_snippet, scan_snippet, snippets_of};
use super::{Hit, RunRef, SearchError};
use crate::store::ShardReaders;
use crate::time::format_iso_ms;

/// A hit's details, its subagent run (`chunk_runs`, migration 0002: the
/// run whose transcript is embedded in the chunk's tool result, else the
/// first run whose child session file holds the chunk), for the chunk ids
/// of the JSON array ?1, in one statement: a statement per hit and two per
/// run cost ~1 ms of a search of 20 hits. A chunk a sync removed since it
/// was ranked has no row.
const DETAILS: &str = "SELECT j.key, s.session_id, s.file_path, s.name, s.first_message, s.cwd,
        e.entry_id, c.kind, e.type, e.timestamp_ms, c.tool_name, c.json_path, e.line_no,
        c.chunk_id,
        er.run_rowid IS NOT NULL AND ef.file_id IS NOT NULL,
        er.agent, er.mode, er.position, er.run_id, er.tool_call_id, er.session_id, ef.path,
        cr.run_rowid IS NOT NULL,
        cr.agent, cr.mode, cr.position, cr.run_id, cr.tool_call_id, cr.session_id, cf.path
   FROM json_each(?1) j
   JOIN chunks c ON c.chunk_id = j.value
   JOIN entries e ON e.entry_rowid = c.entry_rowid
   JOIN sessions s ON s.file_id = c.file_id
   LEFT JOIN chunk_runs k ON k.chunk_id = c.chunk_id
   LEFT JOIN subagent_runs er ON er.run_rowid = k.run_rowid
   LEFT JOIN files ef ON ef.file_id = er.file_id
   LEFT JOIN subagent_runs cr ON cr.run_rowid = (
        SELECT r.run_rowid FROM subagent_runs r JOIN files f ON f.file_id = r.file_id
         WHERE r.child_file_id = c.file_id ORDER BY r.run_rowid LIMIT 1)
   LEFT JOIN files cf ON cf.file_id = cr.file_id";

/// The hits of the chosen chunks (chunk id, score), in that order: a chunk
/// a sync removed since it was ranked is left out. A word search's
/// snippets are marked on a shard reader's thread, idle by now.
pub(super) fn hits(
    conn: &rusqlite::Connection,
    readers: &ShardReaders,
    plan: &Plan,
    best: Vec<(i64, f64)>,
) -> Result<Vec<Hit>, SearchError> {
    // Nothing to look up, nor snippets to mark.
    if best.is_empty() {
        return Ok(Vec::new());
    }
    let chosen: Vec<i64> = best.iter().map(|(chunk_id, _)| *chunk_id).collect();
    // A word search's snippets are marked while the details are read
    // (their text is read first, here).
    let marking = match plan {
        Plan::Fts { table, expr } => Some(Pending::start(
            snippets_of(conn, table, expr, &chosen)?,
            readers,
        )),
        Plan::Scan { .. } => None,
    };
    let mut hits = details(conn, &best)?;
    match (marking, plan) {
        (Some(marking), _) => {
            let mut snippets = marking.finish()?;
            for hit in &mut hits {
                hit.snippet = snippets
                    .remove(&hit.chunk_id)
                    .map(|snippet| clean_snippet(&snippet))
                    .unwrap_or_default();
            }
        }
        (None, Plan::Scan { terms, .. }) => {
            for hit in &mut hits {
                hit.snippet = chunk_body(conn, hit.chunk_id)?
                    .map(|body| clean_snippet(&scan_snippet(&body, terms)))
                    .unwrap_or_default();
            }
        }
        (None, Plan::Fts { .. }) => {}
    }
    Ok(hits)
}

/// The hits of `best` without their snippets, in its order.
fn details(conn: &rusqlite::Connection, best: &[(i64, f64)]) -> rusqlite::Result<Vec<Hit>> {
    let ids: Vec<String> = best
        .iter()
        .map(|(chunk_id, _)| chunk_id.to_string())
        .collect();
    let mut stmt = conn.prepare(DETAILS)?;
    let mut found = stmt
        .query_map([format!("[{}]", ids.join(","))], |row| {
            let position = usize::try_from(row.get::<_, i64>(0)?).unwrap_or(usize::MAX);
            let run = |at: usize, child: bool| -> rusqlite::Result<Option<RunRef>> {
                if !row.get::<_, bool>(at)? {
                    return Ok(None);
                }
                Ok(Some(RunRef {
                    agent: row.get(at + 1)?,
                    mode: row.get(at + 2)?,
                    position: row.get(at + 3)?,
                    run_id: row.get(at + 4)?,
                    tool_call_id: row.get(at + 5)?,
                    parent_session_id: row.get(at + 6)?,
                    parent_session_path: row.get(at + 7)?,
                    child_session: child,
                }))
            };
            let hit = Hit {
                session_id: row.get(1)?,
                session_path: row.get(2)?,
                session_name: row.get(3)?,
                first_message: row.get(4)?,
                cwd: row.get(5)?,
                entry_id: row.get(6)?,
                role: row.get(7)?,
                entry_type: row.get(8)?,
                timestamp: row.get::<_, Option<i64>>(9)?.map(format_iso_ms),
                tool_name: row.get(10)?,
                json_path: row.get(11)?,
                line_no: row.get(12)?,
                chunk_id: row.get(13)?,
                score: best.get(position).map_or(0.0, |(_, score)| *score),
                snippet: String::new(),
                run: match run(14, false)? {
                    Some(embedded) => Some(embedded),
                    None => run(22, true)?,
                },
                full_output: None,
            };
            Ok((position, hit))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    found.sort_by_key(|(position, _)| *position);
    Ok(found.into_iter().map(|(_, hit)| hit).collect())
}

/// The marking of the snippets, sent to a shard reader's thread when
/// there is one, else done here when they are asked for.
struct Pending {
    /// The marking until a thread takes it.
    slot: Arc<Mutex<Option<Marking>>>,
    /// The snippets, or the marking's panic (the reader's thread lives on).
    reply: Option<mpsc::Receiver<std::thread::Result<rusqlite::Result<Snippets>>>>,
}

type Snippets = HashMap<i64, String>;

impl Pending {
    fn start(marking: Marking, readers: &ShardReaders) -> Pending {
        let slot = Arc::new(Mutex::new(Some(marking)));
        let taken = slot.clone();
        let reply = readers.spare(move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                take(&taken).map_or_else(|| Ok(HashMap::new()), Marking::run)
            }))
        });
        Pending { slot, reply }
    }

    /// Each chunk's snippet, by chunk id.
    fn finish(self) -> Result<Snippets, SearchError> {
        match self.reply.and_then(|reply| reply.recv().ok()) {
            Some(Ok(snippets)) => return Ok(snippets?),
            // As if it had panicked here.
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => {}
        }
        // No reader, or its thread ended before it took the marking: here.
        // Taken and not answered, it ended while marking.
        match take(&self.slot) {
            Some(marking) => Ok(marking.run()?),
            None => Err(SearchError::ShardConnection(
                "its thread stopped while marking the snippets".to_owned(),
            )),
        }
    }
}

fn take(slot: &Mutex<Option<Marking>>) -> Option<Marking> {
    slot.lock().ok().and_then(|mut marking| marking.take())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marking() -> Marking {
        Marking::new(
            false,
            "\"parser\"",
            vec![(7, "the parser reads".to_owned())],
        )
    }

    #[test]
    fn snippets_are_marked_here_without_a_reader() {
        let pending = Pending::start(marking(), &ShardReaders::default());
        assert!(pending.reply.is_none());
        let snippets = pending.finish().unwrap();
        assert_eq!(snippets[&7], "the \u{2}parser\u{3} reads");
    }

    #[test]
    fn a_marking_taken_and_not_answered_is_an_error() {
        let pending = Pending::start(marking(), &ShardReaders::default());
        take(&pending.slot);
        assert!(matches!(
            pending.finish(),
            Err(SearchError::ShardConnection(_))
        ));
    }
}
