//! What `piidx push` reads from the index: every SQLite read of the push is
//! here, so that a change to how rows are stored (e.g. how `entries` keeps
//! its JSON) has one place to follow it.
//!
//! The unit of a push is a session file: its signature (`PushFile::sig`)
//! changes whenever any row the team store holds for it changes (new bytes,
//! a re-index, a new machine label, or values other files decide: fork
//! copies, parent and child links), and then all of the file's rows are
//! sent again. Rows are handed out as SQLite values, in the column order of
//! `PushTable::columns`, which is the order of the store's tables
//! (`pg-migrations/`).

use std::collections::HashMap;

use rusqlite::types::ValueRef;

use super::{Result, Writer};

/// One session file as the push sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushFile {
    pub file_id: i64,
    /// Bytes of the file the index has read (for batching).
    pub bytes: i64,
    /// xxh3-64 of everything that decides the file's rows in the store, hex.
    pub sig: String,
    /// xxh3-64 of what stays while the file only grows (path, head hash,
    /// parser version, machine label, layout): with it unchanged and the
    /// entries sent before still there, only newer entries need sending.
    pub base: String,
    /// The file's highest `entry_rowid` (0 with none): entries are only
    /// ever added with higher ones, so this marks what was sent.
    pub max_rowid: i64,
    /// The file's entries.
    pub entries: i64,
}

/// The tables a push fills, in the order it sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushTable {
    Files,
    Sessions,
    Entries,
    MessageMeta,
    Texts,
    ToolCalls,
    Usage,
    SubagentRuns,
}

impl PushTable {
    pub const ALL: [PushTable; 8] = [
        PushTable::Files,
        PushTable::Sessions,
        PushTable::Entries,
        PushTable::MessageMeta,
        PushTable::Texts,
        PushTable::ToolCalls,
        PushTable::Usage,
        PushTable::SubagentRuns,
    ];

    /// Rows of entries: a file that only grew keeps the ones it had, so
    /// a push sends its newer ones only. The other tables' rows of a file
    /// change with later lines (a tool call's result, the session's
    /// counts, fork copies) and are replaced whole.
    pub fn appends(self) -> bool {
        matches!(
            self,
            PushTable::Entries | PushTable::MessageMeta | PushTable::Texts
        )
    }

    /// The table's name in the team store.
    pub fn name(self) -> &'static str {
        match self {
            PushTable::Files => "files",
            PushTable::Sessions => "sessions",
            PushTable::Entries => "entries",
            PushTable::MessageMeta => "message_meta",
            PushTable::Texts => "texts",
            PushTable::ToolCalls => "tool_call_meta",
            PushTable::Usage => "usage_records",
            PushTable::SubagentRuns => "subagent_runs",
        }
    }

    /// The columns sent (besides `src`, the machine), in order.
    pub fn columns(self) -> &'static str {
        match self {
            PushTable::Files => {
                "file_id, machine, path, root, rel_path, depth, layout, size, mtime_ns, byte_offset, \
                 line_count, parser_version"
            }
            PushTable::Sessions => {
                "file_id, machine, session_id, file_path, cwd, project_dir, version, created_at, \
                 created_ms, parent_session, parent_session_id, name, first_message, message_count, \
                 entry_count, activity_ms, modified_ms, leaf_entry_id, listed_by_pi, header_raw"
            }
            PushTable::Entries => {
                "entry_rowid, file_id, session_id, entry_id, parent_id, type, timestamp_ms, line_no, \
                 byte_offset, byte_len, obj_in_line, pi_index"
            }
            PushTable::MessageMeta => {
                "entry_rowid, file_id, session_id, entry_id, role, timestamp_ms, provider, model, api, \
                 stop_reason, error_message, response_id, input_tokens, output_tokens, \
                 cache_read_tokens, cache_write_tokens, total_tokens, cost_total, tool_call_id, \
                 tool_name, is_error, exit_code, custom_type, text_len"
            }
            PushTable::Texts => {
                "chunk_id, entry_rowid, file_id, session_id, entry_id, line_no, entry_type, \
                 message_role, kind, tool_name, json_path, start, timestamp_ms, model, text"
            }
            PushTable::ToolCalls => {
                "entry_rowid, json_path, block_index, file_id, session_id, entry_id, call_id, name, \
                 timestamp_ms, result_entry_rowid, result_entry_id, result_timestamp_ms, is_error, \
                 result_len, copies"
            }
            PushTable::Usage => {
                "entry_rowid, source, file_id, session_id, entry_id, timestamp_ms, provider, model, \
                 response_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, \
                 total_tokens, cost_input, cost_output, cost_cache_read, cost_cache_write, cost_total, \
                 dedupe_key, copies, reasoning_tokens, cache_write_1h_tokens, cost_from_provider"
            }
            PushTable::SubagentRuns => {
                "run_rowid, entry_rowid, file_id, session_id, entry_id, tool_call_id, tool_name, \
                 timestamp_ms, json_path, mode, position, run_index, step, agent, agent_source, task, \
                 exit_code, status, error, stop_reason, model, input_tokens, output_tokens, \
                 cache_read_tokens, cache_write_tokens, cost, turns, context_tokens, tool_count, \
                 progress_tokens, duration_ms, message_count, session_file, child_file_id, \
                 child_session_id, run_id, termination_signal"
            }
        }
    }

    /// The SQLite query for one file's rows (`?1` the file, `?2` the
    /// index's own machine label, `?3` for `appends` tables: only entries
    /// after this `entry_rowid`), columns as `columns`.
    fn select(self) -> &'static str {
        match self {
            PushTable::Files => {
                "SELECT f.file_id, coalesce(r.machine, ?2), f.path, f.root, f.rel_path, f.depth,
                        coalesce(r.layout, 'per_cwd'), f.size, f.mtime_ns, f.offset, f.line_count,
                        f.parser_version
                   FROM files f LEFT JOIN roots r ON r.path = f.root
                  WHERE f.file_id = ?1 AND ?3 IS NOT NULL"
            }
            PushTable::Sessions => {
                "SELECT s.file_id, coalesce(r.machine, ?2), s.session_id, s.file_path, s.cwd,
                        s.project_dir, s.version, s.created_at, s.created_ms, s.parent_session,
                        s.parent_session_id, s.name, s.first_message, s.message_count,
                        s.entry_count, s.activity_ms, s.modified_ms, s.leaf_entry_id,
                        s.listed_by_pi, s.header_raw
                   FROM sessions s JOIN files f ON f.file_id = s.file_id
                   LEFT JOIN roots r ON r.path = f.root WHERE s.file_id = ?1 AND ?3 IS NOT NULL"
            }
            PushTable::Entries => {
                "SELECT entry_rowid, file_id, session_id, entry_id, parent_id, type, timestamp_ms,
                        line_no, byte_offset, byte_len, obj_in_line, pi_index
                   FROM entries WHERE file_id = ?1 AND ?2 IS NOT NULL AND entry_rowid > ?3"
            }
            PushTable::MessageMeta => {
                "SELECT entry_rowid, file_id, session_id, entry_id, role, timestamp_ms, provider,
                        model, api, stop_reason, error_message, response_id, input_tokens,
                        output_tokens, cache_read_tokens, cache_write_tokens, total_tokens,
                        cost_total, tool_call_id, tool_name, is_error, exit_code, custom_type, text_len
                   FROM message_meta
                  WHERE file_id = ?1 AND ?2 IS NOT NULL AND entry_rowid > ?3"
            }
            // Every text the index searches, chunk by chunk, with the
            // body its full-text shards were given (`fts_content`), in
            // chunk order. An empty body is left out by the caller: a
            // condition on it here would make SQLite extract every body
            // twice.
            PushTable::Texts => {
                "SELECT c.chunk_id, c.entry_rowid, c.file_id, e.session_id, e.entry_id, e.line_no,
                        e.type, mm.role, c.kind, c.tool_name, c.json_path, c.start,
                        e.timestamp_ms, mm.model, b.body
                   FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
                   LEFT JOIN message_meta mm ON mm.entry_rowid = c.entry_rowid
                   JOIN fts_content b ON b.chunk_id = c.chunk_id
                  WHERE c.file_id = ?1 AND ?2 IS NOT NULL AND c.entry_rowid > ?3
                  ORDER BY c.chunk_id"
            }
            PushTable::ToolCalls => {
                "SELECT entry_rowid, json_path, block_index, file_id, session_id, entry_id, call_id,
                        name, timestamp_ms, result_entry_rowid, result_entry_id,
                        result_timestamp_ms, is_error, result_len, copies
                   FROM tool_call_meta WHERE file_id = ?1 AND ?2 IS NOT NULL AND ?3 IS NOT NULL"
            }
            PushTable::Usage => {
                "SELECT entry_rowid, source, file_id, session_id, entry_id, timestamp_ms, provider,
                        model, response_id, input_tokens, output_tokens, cache_read_tokens,
                        cache_write_tokens, total_tokens, cost_input, cost_output, cost_cache_read,
                        cost_cache_write, cost_total, dedupe_key, copies, reasoning_tokens,
                        cache_write_1h_tokens, cost_from_provider
                   FROM usage_records WHERE file_id = ?1 AND ?2 IS NOT NULL AND ?3 IS NOT NULL"
            }
            PushTable::SubagentRuns => {
                "SELECT run_rowid, entry_rowid, file_id, session_id, entry_id, tool_call_id,
                        tool_name, timestamp_ms, json_path, mode, position, run_index, step, agent,
                        agent_source, task, exit_code, status, error, stop_reason, model,
                        input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost,
                        turns, context_tokens, tool_count, progress_tokens, duration_ms,
                        message_count, session_file, child_file_id, child_session_id, run_id,
                        termination_signal
                   FROM subagent_runs WHERE file_id = ?1 AND ?2 IS NOT NULL AND ?3 IS NOT NULL"
            }
        }
    }
}

/// Everything that decides a file's rows in the store, as one text: the
/// file's own state (not `indexed_at`, which a re-check of a file changed
/// within the last seconds rewrites with nothing else; a re-index shows in
/// its entries' row ids), its machine label and root layout, and the values other
/// files decide (its session's parent, its fork copies' `copies`, its runs'
/// child sessions).
///
/// Each table is read once, grouped by file (a pass in key order), rather
/// than looked up file by file: an incremental push reads every file's
/// signature, and the lookups made that most of its time (~200 ms of a
/// 100-line push on the 1 GB index).
const SIGNATURES: &str = "
WITH e AS (SELECT file_id, count(*) || ':' || coalesce(max(entry_rowid), 0) AS sig,
                  coalesce(max(entry_rowid), 0) AS max_rowid, count(*) AS n
             FROM entries GROUP BY file_id),
     u AS (SELECT file_id, count(*) || ':' || coalesce(sum(copies * (entry_rowid % 1000003)), 0) AS sig
             FROM usage_records GROUP BY file_id),
     t AS (SELECT file_id,
                  count(*) || ':' || coalesce(sum(copies * (entry_rowid % 1000003 + block_index)), 0) AS sig
             FROM tool_call_meta GROUP BY file_id),
     sr AS (SELECT file_id,
                   count(*) || ':' || coalesce(sum(coalesce(child_file_id, -1) * (run_rowid % 1000003)), 0)
                   || ':' || coalesce(group_concat(child_session_id ORDER BY run_rowid), '')
                   -- an omp background run's spend and model follow its transcript
                   || ':' || coalesce(group_concat(CASE WHEN mode = 'background'
                                          THEN coalesce(input_tokens, '') || ',' || coalesce(output_tokens, '')
                                               || ',' || coalesce(cache_read_tokens, '') || ','
                                               || coalesce(cache_write_tokens, '') || ',' || coalesce(cost, '')
                                               || ',' || coalesce(model, '') END, ';' ORDER BY run_rowid), '') AS sig
              FROM subagent_runs GROUP BY file_id)
SELECT f.file_id, coalesce(f.offset, 0),
       f.path || '|' || coalesce(f.offset, '') || '|' || coalesce(f.line_count, '') || '|'
       || coalesce(f.head_hash, '') || '|' || coalesce(f.anchor_hash, '') || '|'
       || coalesce(f.parser_version, '') || '|'
       || coalesce(e.sig, '0:0') || '|'
       || coalesce(f.mtime_ns, '') || '|' || coalesce(r.machine, ?1) || '|'
       || coalesce(r.layout, '') || '|' || coalesce(s.parent_session_id, '') || '|'
       || coalesce(s.listed_by_pi, '') || '|'
       || coalesce(u.sig, '0:0') || '|'
       || coalesce(t.sig, '0:0') || '|'
       || coalesce(sr.sig, '0:0:'),
       f.path || '|' || coalesce(f.head_hash, '') || '|' || coalesce(f.parser_version, '') || '|'
       || coalesce(r.machine, ?1) || '|' || coalesce(r.layout, ''),
       coalesce(e.max_rowid, 0),
       coalesce(e.n, 0)
  FROM files f JOIN sessions s ON s.file_id = f.file_id
  LEFT JOIN roots r ON r.path = f.root
  LEFT JOIN e ON e.file_id = f.file_id
  LEFT JOIN u ON u.file_id = f.file_id
  LEFT JOIN t ON t.file_id = f.file_id
  LEFT JOIN sr ON sr.file_id = f.file_id
 WHERE f.status = 'indexed'";

impl Writer {
    /// Every session file the store should hold, with its signature.
    pub fn push_files(&self, machine_name: &str) -> Result<Vec<PushFile>> {
        let mut stmt = self.conn.prepare(SIGNATURES).map_err(self.err())?;
        let rows = stmt
            .query_map([machine_name], |row| {
                let hash =
                    |text: String| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()));
                Ok(PushFile {
                    file_id: row.get(0)?,
                    bytes: row.get(1)?,
                    sig: hash(row.get(2)?),
                    base: hash(row.get(3)?),
                    max_rowid: row.get(4)?,
                    entries: row.get(5)?,
                })
            })
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.err())
    }

    /// How many of the file's entries have an `entry_rowid` up to `max`:
    /// all that were sent when it was `max`, unless the file was re-indexed.
    pub fn entries_up_to(&self, file_id: i64, max: i64) -> Result<i64> {
        self.conn
            .query_row(
                "SELECT count(*) FROM entries WHERE file_id = ?1 AND entry_rowid <= ?2",
                [file_id, max],
                |row| row.get(0),
            )
            .map_err(self.err())
    }

    /// Calls `each` with the values of every row of `table` for the file
    /// (of an `appends` table: with an `entry_rowid` above `after`), in
    /// column order; stops at its first error.
    pub fn push_rows<E: From<super::StoreError>>(
        &self,
        table: PushTable,
        file_id: i64,
        machine_name: &str,
        after: i64,
        mut each: impl FnMut(&[ValueRef<'_>]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut stmt = self
            .conn
            .prepare_cached(table.select())
            .map_err(self.err())?;
        let width = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params![file_id, machine_name, after])
            .map_err(self.err())?;
        while let Some(row) = rows.next().map_err(self.err())? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(row.get_ref(i).map_err(self.err())?);
            }
            each(&values)?;
        }
        Ok(())
    }

    /// The signatures this index recorded as pushed to `target`.
    pub fn pushed_files(&self, target: &str) -> Result<HashMap<i64, String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT file_id, sig FROM push_files WHERE target = ?1")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([target], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err())
    }

    /// Records what the store now holds for these files (`None`: nothing).
    pub fn record_pushed(&self, target: &str, files: &[(i64, Option<&str>)]) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(self.err())?;
        for (file_id, sig) in files {
            match sig {
                Some(sig) => tx.execute(
                    "INSERT OR REPLACE INTO push_files(target, file_id, sig, pushed_at)
                     VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                    rusqlite::params![target, file_id, sig],
                ),
                None => tx.execute(
                    "DELETE FROM push_files WHERE target = ?1 AND file_id = ?2",
                    rusqlite::params![target, file_id],
                ),
            }
            .map_err(self.err())?;
        }
        tx.commit().map_err(self.err())
    }
}
