//! Stage 2 of a search: the chosen chunks as `Hit`s, with their session,
//! entry and subagent run looked up, and a snippet, for the hits printed
//! only (stage 1 reads no text and joins as little as it can).

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use super::body::chunk_body;
use super::plan::Plan;
use super::snippet::{clean_snippet, scan_snippet, snippets_of};
use super::{Hit, RunRef};
use crate::time::format_iso_ms;

const HIT_COLUMNS: &str =
    "s.session_id, s.file_path, s.name, s.first_message, s.cwd, e.entry_id, c.kind,
     e.type, e.timestamp_ms, c.tool_name, c.json_path, e.line_no, c.chunk_id";

/// The hits of the chosen chunks (chunk id, score), in that order: a chunk
/// a sync removed since it was ranked is left out.
pub(super) fn hits(
    conn: &rusqlite::Connection,
    plan: &Plan,
    best: Vec<(i64, f64)>,
) -> rusqlite::Result<Vec<Hit>> {
    let chosen: Vec<i64> = best.iter().map(|(chunk_id, _)| *chunk_id).collect();
    let mut fts_snippets = match plan {
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
                full_output: None,
            })
        });
        let Some(mut hit) = found.optional()? else {
            continue;
        };
        hit.run = run_of(conn, chunk_id)?;
        hit.snippet = match plan {
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
