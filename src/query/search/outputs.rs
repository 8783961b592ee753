//! Hits in oh-my-pi's full tool outputs (`<N>.<tool>.log`, kind
//! `tool_output` in `subagent_artifacts`, see `crate::artifacts`): the whole
//! output of a tool result whose session text omp truncated. A word search
//! matches them in `artifact_fts` (in the main file) with the same
//! expression and filters as the chunks, and each match is a hit on the
//! tool result that names the output, saying which file it is in
//! (`Hit::full_output`). Merged with the chunks' hits by score (or time).

use rusqlite::types::Value as SqlValue;

use super::plan::Filters;
use super::snippet::clean_snippet;
use super::{Hit, Sort};
use crate::time::format_iso_ms;

/// The matches of `expr` in the full outputs linked to a tool result, best
/// first (or newest first), at most `limit`; `filters` are numbered from ?3.
pub(super) fn output_hits(
    conn: &rusqlite::Connection,
    expr: &str,
    filters: &Filters,
    sort: Sort,
    limit: usize,
) -> rusqlite::Result<Vec<Hit>> {
    // Most indexes hold no full outputs (only oh-my-pi writes them). Every
    // row `artifact_fts` has indexed has a `artifact_fts_docsize` row, so
    // without one nothing can match, and the search's statement (FTS5's
    // table opened, its configuration read, the joins planned: ~0.25 ms)
    // is left out.
    let indexed: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM artifact_fts_docsize)")?
        .query_row([], |row| row.get(0))?;
    if !indexed {
        return Ok(Vec::new());
    }
    let order = match sort {
        Sort::Rank => "score, a.artifact_id",
        Sort::Recent => "e.timestamp_ms DESC, a.artifact_id",
    };
    let sql = format!(
        "SELECT s.session_id, s.file_path, s.name, s.first_message, s.cwd, e.entry_id, e.type,
                e.timestamp_ms, c.tool_name, a.base, e.line_no, a.path,
                bm25(artifact_fts) AS score,
                snippet(artifact_fts, 0, char(2), char(3), '…', 16)
           FROM artifact_fts
           JOIN subagent_artifacts a ON a.artifact_id = artifact_fts.rowid
           JOIN entries e ON e.entry_rowid = a.entry_rowid
           JOIN sessions s ON s.file_id = e.file_id
           JOIN (SELECT entry_rowid, 'tool_result' AS kind, tool_name FROM message_meta) c
             ON c.entry_rowid = e.entry_rowid
           LEFT JOIN message_meta mm ON mm.entry_rowid = e.entry_rowid
          WHERE artifact_fts MATCH ?1 AND a.kind = 'tool_output'{}
          ORDER BY {order} LIMIT ?2",
        filters.clause()
    );
    let mut params: Vec<SqlValue> = vec![expr.to_owned().into(), (limit as i64).into()];
    params.extend(filters.params.iter().cloned());
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
        Ok(Hit {
            session_id: row.get(0)?,
            session_path: row.get(1)?,
            session_name: row.get(2)?,
            first_message: row.get(3)?,
            cwd: row.get(4)?,
            entry_id: row.get(5)?,
            role: "tool_result".to_owned(),
            entry_type: row.get(6)?,
            timestamp: row.get::<_, Option<i64>>(7)?.map(format_iso_ms),
            tool_name: row.get(8)?,
            json_path: format!("artifact://{}", row.get::<_, String>(9)?),
            line_no: row.get(10)?,
            full_output: row.get(11)?,
            score: row.get(12)?,
            snippet: clean_snippet(&row.get::<_, String>(13)?),
            run: None,
            chunk_id: 0,
        })
    })?;
    rows.collect()
}

/// `chunks` and `outputs` as one list of at most `limit` hits, by score
/// (lower is better) or by time, the chunks' first on a tie.
pub(super) fn merge(chunks: Vec<Hit>, outputs: Vec<Hit>, sort: Sort, limit: usize) -> Vec<Hit> {
    if outputs.is_empty() {
        return chunks;
    }
    let mut all: Vec<(usize, Hit)> = chunks.into_iter().chain(outputs).enumerate().collect();
    match sort {
        Sort::Rank => all.sort_by(|(i, a), (j, b)| a.score.total_cmp(&b.score).then(i.cmp(j))),
        // ISO timestamps sort as text; a hit without one goes last.
        Sort::Recent => all.sort_by(|(i, a), (j, b)| b.timestamp.cmp(&a.timestamp).then(i.cmp(j))),
    }
    all.into_iter().take(limit).map(|(_, hit)| hit).collect()
}
