//! SQL for subagent runs, their child transcripts, artifacts and links.
//!
//! Runs are written with their parent entry (same batch, same transaction).
//! Artifact files are written by the artifacts pass at the end of a sync,
//! which then re-derives the links (artifact → run, run → child session
//! file, child session → parent session, omp output → tool result) from
//! what the database holds, so the result never depends on which file was
//! indexed first. omp's outputs are linked again only for the sessions
//! whose files the writer changed (`LinkScope`).

use std::collections::{BTreeSet, HashMap};

use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, params};

use super::{Result, Writer};
use crate::normalize::Entry;
use crate::normalize::shared::{inflate, inflated_len};
use crate::normalize::subagent::SubagentRun;

/// What the database remembers about one artifact file.
#[derive(Debug, Clone)]
pub struct ArtifactState {
    pub artifact_id: i64,
    pub root: String,
    pub size: u64,
    pub mtime_ns: i64,
    /// Found on disk by the pass in progress (false as read).
    pub seen: bool,
}

/// One artifact file as read from disk.
#[derive(Debug, Clone, Default)]
pub struct ArtifactRow {
    pub path: String,
    pub root: String,
    pub project_dir: Option<String>,
    pub name: String,
    pub base: Option<String>,
    pub kind: &'static str,
    pub run_id: Option<String>,
    pub agent: Option<String>,
    pub size: u64,
    pub mtime_ns: i64,
    /// Searchable text (`_output.md`).
    pub text: Option<String>,
    /// `_meta.json` re-serialized compactly.
    pub meta_json: Option<String>,
    pub note: Option<String>,
    /// An omp full tool output (`tool_output`): the session file whose
    /// artifact folder holds it.
    pub session_path: Option<String>,
}

/// The files a writer changed whose rows subagent links are derived from,
/// since it last derived them (`Writer::mark_links_stale`).
///
/// An omp full output's link depends only on the tool results of its own
/// session: the session file and the JSONL files in its folder. Relinking
/// the outputs of the sessions whose files changed, instead of every
/// output, makes a sync after one appended line cost what the line costs,
/// not what the index holds (`link_tool_outputs`).
#[derive(Debug, Default)]
pub(super) struct LinkScope {
    /// Whether `meta.links_stale` was looked at before this writer's
    /// first mark.
    checked: bool,
    /// Every link is derived again: a mark this writer did not make was
    /// there (a sync killed before it relinked), so which files changed is
    /// unknown; or the sync reads nearly every file (`Writer::relink_all`).
    everything: bool,
    /// The files this writer changed, and the session files whose folders
    /// hold them: the sessions among them are those whose outputs may now
    /// link elsewhere.
    paths: BTreeSet<String>,
}

impl LinkScope {
    pub(super) fn checked(&self) -> bool {
        self.checked
    }

    pub(super) fn checked_mark(&mut self, left_before: bool) {
        self.checked = true;
        self.everything |= left_before;
    }

    pub(super) fn everything(&mut self) {
        self.checked = true;
        self.everything = true;
    }

    /// A file whose rows changed: the sessions it is part of.
    pub(super) fn touch(&mut self, path: &str) {
        // A path already here was either touched, or is a session above one
        // that was: the sessions above it are here too.
        if !self.paths.contains(path) {
            self.paths.insert(path.to_owned());
            self.paths.extend(session_files_above(path));
        }
    }

    /// Whether every link must be derived again. A writer that never
    /// marked may still find a mark (left by a sync killed before it
    /// relinked), and knows nothing of what changed.
    fn covers_everything(&self) -> bool {
        !self.checked || self.everything
    }
}

impl Writer {
    /// Writes the runs of one entry, their child messages and tool calls,
    /// and marks the entry's chunks that lie inside a run; and the
    /// background jobs it reports settled (omp's `async-result`, `hub`).
    pub(super) fn insert_subagent_runs(
        &self,
        entry_rowid: i64,
        file_id: i64,
        session_id: &str,
        entry: &Entry,
    ) -> Result<()> {
        let message = entry.message.as_ref();
        let timestamp_ms = message
            .and_then(|message| message.timestamp_ms)
            .or(entry.timestamp_ms);
        for run in &entry.subagent_runs {
            self.insert_run(entry_rowid, file_id, session_id, entry, timestamp_ms, run)?;
            let run_rowid = self.conn.last_insert_rowid();
            self.insert_run_children(run_rowid, file_id, run)?;
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO chunk_runs(chunk_id, run_rowid, file_id, message_position)
                     SELECT c.chunk_id, ?2, c.file_id,
                            CASE WHEN substr(c.json_path, length(?3) + 1, 10) = '.messages['
                                 THEN CAST(substr(c.json_path, length(?3) + 11) AS INTEGER) END
                       FROM chunks c
                      WHERE c.entry_rowid = ?1 AND substr(c.json_path, 1, length(?3) + 1) = ?3 || '.'",
                )
                .and_then(|mut stmt| stmt.execute(params![entry_rowid, run_rowid, run.json_path]))
                .map_err(self.err())?;
        }
        for (position, delivery) in entry.subagent_deliveries.iter().enumerate() {
            self.conn
                .prepare_cached(
                    "INSERT INTO subagent_deliveries(entry_rowid, file_id, position, job_id, status,
                                                     exit_code, duration_ms, model)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        entry_rowid,
                        file_id,
                        position as i64,
                        delivery.job_id,
                        delivery.status,
                        delivery.exit_code,
                        delivery.duration_ms,
                        delivery.model
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    fn insert_run(
        &self,
        entry_rowid: i64,
        file_id: i64,
        session_id: &str,
        entry: &Entry,
        timestamp_ms: Option<i64>,
        run: &SubagentRun,
    ) -> Result<()> {
        let message = entry.message.as_ref();
        let values: Vec<rusqlite::types::Value> = vec![
            entry_rowid.into(),
            file_id.into(),
            session_id.to_owned().into(),
            entry.entry_id.clone().into(),
            message.and_then(|m| m.tool_call_id.clone()).into(),
            message.and_then(|m| m.tool_name.clone()).into(),
            timestamp_ms.into(),
            run.json_path.clone().into(),
            run.mode.clone().into(),
            run.position.into(),
            run.run_index.into(),
            run.step.into(),
            run.agent.clone().into(),
            run.agent_source.clone().into(),
            run.task.clone().into(),
            run.exit_code.into(),
            run.status.clone().into(),
            run.error.clone().into(),
            run.stop_reason.clone().into(),
            run.model.clone().into(),
            run.input_tokens.into(),
            run.output_tokens.into(),
            run.cache_read_tokens.into(),
            run.cache_write_tokens.into(),
            run.cost.into(),
            run.turns.into(),
            run.context_tokens.into(),
            run.tool_count.into(),
            run.progress_tokens.into(),
            run.duration_ms.into(),
            (run.messages.len() as i64).into(),
            run.session_file.clone().into(),
            run.artifact_input_path.clone().into(),
            run.artifact_output_path.clone().into(),
            run.artifact_jsonl_path.clone().into(),
            run.artifact_meta_path.clone().into(),
            run.artifact_transcript_path.clone().into(),
            run.artifact_base.clone().into(),
            run.child_location.clone().into(),
            run.run_id.clone().into(),
            run.async_id.clone().into(),
            run.termination_signal.clone().into(),
        ];
        let placeholders = (1..=values.len())
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO subagent_runs(entry_rowid, file_id, session_id, entry_id, tool_call_id,
                 tool_name, timestamp_ms, json_path, mode, position, run_index, step, agent, agent_source,
                 task, exit_code, status, error, stop_reason, model, input_tokens, output_tokens,
                 cache_read_tokens, cache_write_tokens, cost, turns, context_tokens, tool_count,
                 progress_tokens, duration_ms, message_count, session_file, artifact_input_path,
                 artifact_output_path, artifact_jsonl_path, artifact_meta_path, artifact_transcript_path,
                 artifact_base, child_location, run_id, async_id, termination_signal)
             VALUES ({placeholders})"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| stmt.execute(rusqlite::params_from_iter(values)))
            .map_err(self.err())?;
        Ok(())
    }

    fn insert_run_children(&self, run_rowid: i64, file_id: i64, run: &SubagentRun) -> Result<()> {
        for child in &run.messages {
            let row = &child.row;
            let usage = row.usage.as_ref();
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO subagent_messages(run_rowid, position, file_id, json_path, role,
                         timestamp_ms, provider, model, stop_reason, error_message, input_tokens,
                         output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_total,
                         tool_call_id, tool_name, is_error, text_len)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                         ?18, ?19, ?20)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        run_rowid,
                        child.position,
                        file_id,
                        child.json_path,
                        row.role,
                        row.timestamp_ms,
                        row.provider,
                        row.model,
                        row.stop_reason,
                        row.error_message,
                        usage.map(|u| u.input),
                        usage.map(|u| u.output),
                        usage.map(|u| u.cache_read),
                        usage.map(|u| u.cache_write),
                        usage.map(|u| u.total),
                        usage.and_then(|u| u.cost_total),
                        row.tool_call_id,
                        row.tool_name,
                        row.is_error,
                        row.text_len,
                    ])
                })
                .map_err(self.err())?;
        }
        for call in &run.tool_calls {
            let result = run.messages.iter().find(|child| {
                child.position > call.message_position
                    && child.row.role == "toolResult"
                    && call.call_id.is_some()
                    && child.row.tool_call_id == call.call_id
            });
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO subagent_tool_calls(run_rowid, json_path, message_position,
                         block_index, file_id, call_id, name, result_position, is_error)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        run_rowid,
                        call.json_path,
                        call.message_position,
                        call.block_index,
                        file_id,
                        call.call_id,
                        call.name,
                        result.map(|child| child.position),
                        result.and_then(|child| child.row.is_error),
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// The files under `root` whose session oh-my-pi wrote: where its full
    /// tool outputs (`<file without .jsonl>/<N>.<tool>.log`) can be, at
    /// whatever depth below the root the sessions are.
    pub fn omp_session_files(&self, root: &str) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT f.path FROM files f JOIN sessions s ON s.file_id = f.file_id
                  WHERE f.root = ?1 AND s.agent = 'omp' ORDER BY f.path",
            )
            .map_err(self.err())?;
        let rows = stmt
            .query_map([root], |row| row.get::<_, String>(0))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err())
    }

    /// Every artifact file the database knows, by path.
    pub fn artifact_states(&self) -> Result<HashMap<String, ArtifactState>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, artifact_id, root, size, mtime_ns FROM subagent_artifacts")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    ArtifactState {
                        artifact_id: row.get(1)?,
                        root: row.get(2)?,
                        size: row.get::<_, i64>(3)?.max(0) as u64,
                        mtime_ns: row.get(4)?,
                        seen: false,
                    },
                ))
            })
            .map_err(self.err())?;
        let mut states = HashMap::new();
        for row in rows {
            let (path, state) = row.map_err(self.err())?;
            states.insert(path, state);
        }
        Ok(states)
    }

    /// Inserts or replaces one artifact row and its full-text entry.
    pub fn upsert_artifact(&self, row: &ArtifactRow) -> Result<()> {
        let replaced = self
            .conn
            .prepare_cached(
                "INSERT INTO artifact_fts(artifact_fts, rowid, text)
                 SELECT 'delete', artifact_id, text FROM subagent_artifacts
                  WHERE path = ?1 AND text IS NOT NULL",
            )
            .and_then(|mut stmt| stmt.execute([&row.path]))
            .map_err(self.err())?;
        if replaced > 0 {
            self.deleted_rows.set(true);
            self.artifact_text_deleted.set(true);
        }
        self.conn
            .prepare_cached(
                "INSERT INTO subagent_artifacts(path, root, project_dir, name, base, kind, run_id, agent,
                     size, mtime_ns, text, meta_json, note, session_path, indexed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,
                     strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                 ON CONFLICT(path) DO UPDATE SET root = excluded.root, project_dir = excluded.project_dir,
                     name = excluded.name, base = excluded.base, kind = excluded.kind,
                     run_id = excluded.run_id, agent = excluded.agent, size = excluded.size,
                     mtime_ns = excluded.mtime_ns, text = excluded.text, meta_json = excluded.meta_json,
                     note = excluded.note, session_path = excluded.session_path,
                     indexed_at = excluded.indexed_at",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    row.path,
                    row.root,
                    row.project_dir,
                    row.name,
                    row.base,
                    row.kind,
                    row.run_id,
                    row.agent,
                    row.size as i64,
                    row.mtime_ns,
                    row.text,
                    row.meta_json,
                    row.note,
                    row.session_path,
                ])
            })
            .map_err(self.err())?;
        self.conn
            .prepare_cached(
                "INSERT INTO artifact_fts(rowid, text)
                 SELECT artifact_id, text FROM subagent_artifacts WHERE path = ?1 AND text IS NOT NULL",
            )
            .and_then(|mut stmt| stmt.execute([&row.path]))
            .map_err(self.err())?;
        Ok(())
    }

    /// FTS5 keeps a deleted row's words in its segments until they are
    /// merged: after artifact text was replaced or removed, `artifact_fts`
    /// (small: `_output.md` texts) is merged into one segment, and
    /// `secure_delete` zeroes the pages that frees; the same for
    /// `message_fts` after messages left it (the conversation's text only,
    /// a few percent of the index).
    pub fn purge_artifact_text(&self) -> Result<()> {
        if self.artifact_text_deleted.replace(false) {
            self.conn
                .execute_batch("INSERT INTO artifact_fts(artifact_fts) VALUES ('optimize')")
                .map_err(self.err())?;
        }
        if self.message_text_deleted.replace(false) {
            self.conn
                .execute_batch("INSERT INTO message_fts(message_fts) VALUES ('optimize')")
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// Forgets an artifact file that no longer exists.
    pub fn remove_artifact(&self, artifact_id: i64) -> Result<()> {
        self.deleted_rows.set(true);
        self.artifact_text_deleted.set(true);
        for sql in [
            "INSERT INTO artifact_fts(artifact_fts, rowid, text)
             SELECT 'delete', artifact_id, text FROM subagent_artifacts
              WHERE artifact_id = ?1 AND text IS NOT NULL",
            "DELETE FROM subagent_artifacts WHERE artifact_id = ?1",
        ] {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut stmt| stmt.execute([artifact_id]))
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// Re-derives every subagent link from the rows present. Only rows whose
    /// link changes are written.
    pub fn link_subagents(&self) -> Result<()> {
        let sql = [
            // Artifact → run: same `<runId>_<agent>[_<index>]` stem, and either
            // the exact path the run recorded or the same root and cwd dir.
            "CREATE TEMP TABLE IF NOT EXISTS temp_artifact_links(artifact_id INTEGER PRIMARY KEY, run_rowid INTEGER)",
            "DELETE FROM temp_artifact_links",
            "INSERT INTO temp_artifact_links(artifact_id, run_rowid)
             SELECT a.artifact_id,
                    (SELECT r.run_rowid
                       FROM subagent_runs r
                       JOIN files f ON f.file_id = r.file_id
                       LEFT JOIN sessions s ON s.file_id = r.file_id
                      WHERE r.artifact_base = a.base AND a.kind <> 'tool_output'
                        AND (a.path IN (r.artifact_input_path, r.artifact_output_path, r.artifact_jsonl_path,
                                        r.artifact_meta_path, r.artifact_transcript_path)
                             OR (f.root = a.root AND s.project_dir IS a.project_dir))
                      ORDER BY a.path IN (r.artifact_input_path, r.artifact_output_path, r.artifact_jsonl_path,
                                          r.artifact_meta_path, r.artifact_transcript_path) DESC,
                               r.run_rowid
                      LIMIT 1)
               FROM subagent_artifacts a
              -- An omp full output is never a run's (the subquery finds
              -- none): only one that has a run is looked at, to clear it.
              WHERE a.kind <> 'tool_output' OR a.run_rowid IS NOT NULL",
            "UPDATE subagent_artifacts
                SET run_rowid = (SELECT l.run_rowid FROM temp_artifact_links l
                                  WHERE l.artifact_id = subagent_artifacts.artifact_id)
              WHERE artifact_id IN (SELECT l.artifact_id FROM temp_artifact_links l
                                      JOIN subagent_artifacts a ON a.artifact_id = l.artifact_id
                                     WHERE l.run_rowid IS NOT a.run_rowid)",
            // Run → child session file: the path it recorded, else
            // `<parent file without .jsonl>/<runId>/run-N/*.jsonl`
            // (pi-subagents), else omp's `<id>.jsonl` in the parent's
            // artifact folder: `<parent without .jsonl>/` for a session,
            // the folder holding it for a subagent transcript whose nested
            // runs' ids start with its own (`<stem>.<child>`; omp's
            // subagents share their parent's artifact folder).
            // `rtrim(path, <path without '/'>)` is the path's folder.
            "CREATE TEMP TABLE IF NOT EXISTS temp_run_links(run_rowid INTEGER PRIMARY KEY, child_file_id INTEGER)",
            "DELETE FROM temp_run_links",
            "INSERT INTO temp_run_links(run_rowid, child_file_id)
             SELECT r.run_rowid,
                    coalesce(
                      (SELECT f.file_id FROM files f JOIN sessions c ON c.file_id = f.file_id
                        WHERE f.path = r.session_file),
                      (SELECT c.file_id
                         FROM files p JOIN files c
                           ON c.path > substr(p.path, 1, length(p.path) - 6) || '/' || r.child_location || '/'
                          AND c.path < substr(p.path, 1, length(p.path) - 6) || '/' || r.child_location || '0'
                         JOIN sessions cs ON cs.file_id = c.file_id
                        WHERE p.file_id = r.file_id AND p.path LIKE '%.jsonl' AND r.child_location IS NOT NULL
                        ORDER BY c.path LIMIT 1),
                      (SELECT c.file_id
                         FROM files p JOIN files c
                           ON c.path = substr(p.path, 1, length(p.path) - 6) || '/' || r.child_location
                         JOIN sessions cs ON cs.file_id = c.file_id
                        WHERE p.file_id = r.file_id AND p.path LIKE '%.jsonl'
                          AND r.child_location LIKE '%.jsonl'),
                      (SELECT c.file_id
                         FROM (SELECT path, rtrim(path, replace(path, '/', '')) AS dir
                                 FROM files WHERE file_id = r.file_id AND path LIKE '%.jsonl') p
                         JOIN files c ON c.path = p.dir || r.child_location
                         JOIN sessions cs ON cs.file_id = c.file_id
                        WHERE r.child_location LIKE '%.jsonl'
                          AND substr(r.child_location, 1, length(p.path) - length(p.dir) - 5)
                              = substr(p.path, length(p.dir) + 1, length(p.path) - length(p.dir) - 6) || '.'))
               FROM subagent_runs r",
            "UPDATE subagent_runs
                SET child_file_id = (SELECT l.child_file_id FROM temp_run_links l
                                      WHERE l.run_rowid = subagent_runs.run_rowid),
                    child_session_id = (SELECT s.session_id FROM temp_run_links l
                                          JOIN sessions s ON s.file_id = l.child_file_id
                                         WHERE l.run_rowid = subagent_runs.run_rowid)
              WHERE run_rowid IN (SELECT l.run_rowid FROM temp_run_links l
                                    JOIN subagent_runs r ON r.run_rowid = l.run_rowid
                                    LEFT JOIN sessions s ON s.file_id = l.child_file_id
                                   WHERE l.child_file_id IS NOT r.child_file_id
                                      OR s.session_id IS NOT r.child_session_id)",
            // omp background run ← the latest delivery of its job in the same
            // session file (`subagent_deliveries`): how it ended.
            "UPDATE subagent_runs
                SET status = d.status, exit_code = d.exit_code,
                    duration_ms = coalesce(d.duration_ms, subagent_runs.duration_ms)
               FROM (SELECT file_id, job_id, status, exit_code, duration_ms,
                            row_number() OVER (PARTITION BY file_id, job_id
                                               ORDER BY entry_rowid DESC, position DESC) AS latest
                       FROM subagent_deliveries) d
              WHERE d.latest = 1 AND d.file_id = subagent_runs.file_id
                AND subagent_runs.mode = 'background' AND subagent_runs.tool_name = 'task'
                AND subagent_runs.child_location = d.job_id || '.jsonl'
                AND (subagent_runs.status IS NOT d.status OR subagent_runs.exit_code IS NOT d.exit_code
                     OR subagent_runs.duration_ms IS NOT coalesce(d.duration_ms, subagent_runs.duration_ms))",
            // omp background run ← its transcript's spend and first model
            // (else the model a `hub` snapshot of its job gives: a job
            // cancelled early leaves a transcript with none): the tool
            // result records neither (omp keeps them in memory), and a
            // foreground run's `results[i].usage` is that same sum.
            "UPDATE subagent_runs
                SET input_tokens = t.input, output_tokens = t.output,
                    cache_read_tokens = t.cache_read, cache_write_tokens = t.cache_write,
                    cost = t.cost, model = t.model
               FROM (SELECT r.run_rowid, u.input, u.output, u.cache_read, u.cache_write, u.cost,
                            coalesce(
                              (SELECT coalesce(m.provider || '/', '') || m.model_id FROM model_changes m
                                WHERE m.file_id = r.child_file_id AND m.kind = 'model'
                                  AND m.model_id IS NOT NULL
                                ORDER BY m.entry_rowid LIMIT 1),
                              (SELECT d.model FROM subagent_deliveries d
                                WHERE d.file_id = r.file_id AND r.child_location = d.job_id || '.jsonl'
                                  AND d.model IS NOT NULL
                                ORDER BY d.entry_rowid DESC, d.position DESC LIMIT 1)) AS model
                       FROM subagent_runs r
                       LEFT JOIN (SELECT file_id, sum(input_tokens) AS input, sum(output_tokens) AS output,
                                         sum(cache_read_tokens) AS cache_read,
                                         sum(cache_write_tokens) AS cache_write, sum(cost_total) AS cost
                                    FROM usage_records
                                   WHERE file_id IN (SELECT child_file_id FROM subagent_runs
                                                      WHERE mode = 'background')
                                   GROUP BY file_id) u ON u.file_id = r.child_file_id
                      WHERE r.mode = 'background' AND r.tool_name = 'task') t
              WHERE t.run_rowid = subagent_runs.run_rowid
                AND (subagent_runs.input_tokens IS NOT t.input OR subagent_runs.output_tokens IS NOT t.output
                     OR subagent_runs.cache_read_tokens IS NOT t.cache_read
                     OR subagent_runs.cache_write_tokens IS NOT t.cache_write
                     OR subagent_runs.cost IS NOT t.cost OR subagent_runs.model IS NOT t.model)",
            // Child session → parent session, when its header names none.
            "UPDATE sessions
                SET parent_session_id = (SELECT r.session_id FROM subagent_runs r
                                          WHERE r.child_file_id = sessions.file_id
                                          ORDER BY r.run_rowid LIMIT 1)
              WHERE parent_session_id IS NULL AND parent_session IS NULL
                AND file_id IN (SELECT child_file_id FROM subagent_runs WHERE child_file_id IS NOT NULL)",
        ];
        for statement in sql {
            self.conn.execute_batch(statement).map_err(self.err())?;
        }
        self.link_tool_outputs()?;
        self.link_nested_sessions()
    }

    /// omp's full output → the tool result that names it: an omp
    /// `toolResult` in the session whose folder holds the output, or in a
    /// subagent transcript in that folder (they share its numbering), whose
    /// `details.meta.truncation.artifactId` is the output's number; else
    /// the first whose `details.meta.limits.columnTruncated.artifactId` is,
    /// or whose text says `artifact://<N>` (in the entry as written: its
    /// long strings, kept in `shared_texts`, included). The session's own
    /// file first, then by path and place.
    ///
    /// Each tool result's ids are read out of its JSON once, into a table
    /// indexed by the number and the result's file: matching every output
    /// against every result of its folder parsed each result's JSON three
    /// times per output (30 s for a session of 3,000 truncated results).
    /// The texts are read, and inflated, only for the results an output
    /// that no result names by number may be linked to.
    fn link_tool_outputs(&self) -> Result<()> {
        let scope = self.link_scope.borrow();
        let sql = if scope.covers_everything() {
            tool_output_links(OutputScope::All)
        } else {
            self.fill_temp_paths("temp_link_scope", &scope.paths)?;
            tool_output_links(OutputScope::Changed)
        };
        for statement in &sql.gather {
            self.conn.execute_batch(statement).map_err(self.err())?;
        }
        self.gather_text_refs(&sql.texts)?;
        for statement in &sql.link {
            self.conn.execute_batch(statement).map_err(self.err())?;
        }
        Ok(())
    }

    /// Fills `temp_text_refs` with the outputs each text of `texts` names
    /// (rows of a result's `entry_rowid`, a text, whether it is JSON, and
    /// the text's zlib stream and length when it is stored deflated). A
    /// stream that does not inflate is passed over, as a text naming
    /// nothing: a damaged value must not stop the sync that links.
    fn gather_text_refs(&self, texts: &str) -> Result<()> {
        let mut refs = std::collections::BTreeSet::new();
        let mut statement = self.conn.prepare(texts).map_err(self.err())?;
        let mut rows = statement.query([]).map_err(self.err())?;
        while let Some(row) = rows.next().map_err(self.err())? {
            let entry_rowid: i64 = row.get(0).map_err(self.err())?;
            let is_json: bool = row.get(2).map_err(self.err())?;
            let inflated;
            let text = match row.get_ref(3).map_err(self.err())? {
                // Read as `sqlar_uncompress` reads it.
                ValueRef::Blob(stream) => {
                    match inflated_len(stream.len(), row.get(4).map_err(self.err())?) {
                        Some(len) => {
                            let Ok(text) = inflate(stream, len) else {
                                continue;
                            };
                            inflated = text;
                            &inflated[..]
                        }
                        None => stream,
                    }
                }
                _ => match row.get_ref(1).map_err(self.err())? {
                    ValueRef::Text(text) | ValueRef::Blob(text) => text,
                    _ => continue,
                },
            };
            for number in crate::artifacts::named_outputs(text, is_json) {
                refs.insert((number.to_owned(), entry_rowid));
            }
        }
        let mut insert = self
            .conn
            .prepare("INSERT INTO temp_text_refs(base, entry_rowid) VALUES (?1, ?2)")
            .map_err(self.err())?;
        for (base, entry_rowid) in refs {
            insert
                .execute(params![base, entry_rowid])
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// A session file below another session's own directory
    /// (`<parent file without .jsonl>/…/x.jsonl`, where pi-subagents keeps
    /// child sessions) whose header and runs name no parent, say the child
    /// of a run whose result was lost: its parent is the nearest such
    /// session.
    fn link_nested_sessions(&self) -> Result<()> {
        let orphans: Vec<(i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT s.file_id, f.path FROM sessions s JOIN files f ON f.file_id = s.file_id
                  WHERE s.parent_session_id IS NULL AND s.parent_session IS NULL AND f.depth > 2",
            )
            .and_then(|mut stmt| {
                stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .map_err(self.err())?;
        for (file_id, path) in orphans {
            for candidate in session_files_above(&path) {
                let parent: Option<String> = self
                    .conn
                    .prepare_cached(
                        "SELECT s.session_id FROM files f JOIN sessions s ON s.file_id = f.file_id
                          WHERE f.path = ?1",
                    )
                    .and_then(|mut stmt| stmt.query_row([&candidate], |row| row.get(0)).optional())
                    .map_err(self.err())?;
                if let Some(parent) = parent {
                    self.conn
                        .prepare_cached(
                            "UPDATE sessions SET parent_session_id = ?2 WHERE file_id = ?1",
                        )
                        .and_then(|mut stmt| stmt.execute(params![file_id, parent]))
                        .map_err(self.err())?;
                    break;
                }
            }
        }
        Ok(())
    }
}

/// The session files in whose folders `path` lies, nearest first: folder
/// `D/` belongs to the session file `D.jsonl` (`in_session_folder` in
/// SQL). Each is one lookup by path: a transcript's result may name an
/// output of any of them (`check`), and a session nested below them has
/// the nearest one as its parent (`link_nested_sessions`). As a range of
/// each session's path, the output check read every session's output for
/// each result.
pub(super) fn session_files_above(path: &str) -> impl Iterator<Item = String> + '_ {
    path.rmatch_indices('/')
        .filter(move |(at, _)| at + 1 < path.len())
        .map(|(at, _)| format!("{}.jsonl", &path[..at]))
}

/// SQL: `path` lies in the folder of the session file `session_path`
/// (omp's artifact folder: the file without `.jsonl`, then `/`), at any
/// depth. One range of paths, which an index on `path` serves.
pub(super) fn in_session_folder(path: &str, session_path: &str) -> String {
    format!(
        "{path} > substr({session_path}, 1, length({session_path}) - 6) || '/'
         AND {path} < substr({session_path}, 1, length({session_path}) - 6) || '0'"
    )
}

/// `Writer::link_tool_outputs`' statements: `gather` reads the tool
/// results of the outputs' sessions into `temp_tool_results`; `texts`
/// selects the texts `Writer::gather_text_refs` reads into
/// `temp_text_refs`; `link` links each output and writes what changed.
struct OutputLinkSql {
    gather: [String; 8],
    texts: String,
    link: [String; 4],
}

/// Which outputs `link_tool_outputs` links again.
#[derive(Clone, Copy)]
enum OutputScope {
    All,
    /// Those of the sessions in `temp_link_scope` (`LinkScope`).
    Changed,
}

impl OutputScope {
    /// SQL: `session_path` (a column of `subagent_artifacts`) is in scope.
    fn holds(self, session_path: &str) -> String {
        match self {
            OutputScope::All => "1".to_owned(),
            OutputScope::Changed => format!("{session_path} IN temp.temp_link_scope"),
        }
    }
}

fn tool_output_links(scope: OutputScope) -> OutputLinkSql {
    // Where `t` may name `a`: its session's own file, or a JSONL file in
    // that session's folder. Asked apart, each is one index range (an OR
    // of the two was not).
    const OWN_FILE: &str = "t.path = a.session_path";
    let in_folder = format!(
        "{} AND t.path LIKE '%.jsonl'",
        in_session_folder("t.path", "a.session_path")
    );
    let first_by_place =
        |t: &str| format!("ORDER BY {t}.path, {t}.byte_offset, {t}.obj_in_line LIMIT 1");
    // The result naming `a` by number in the session's own file, else in
    // its folder; then the same for a column id or the text.
    let by_number = |place: &str| {
        format!(
            "(SELECT t.entry_rowid FROM temp_tool_results t
               WHERE t.output_id = a.base AND {place} {})",
            first_by_place("t")
        )
    };
    // Each of the two ways is its own index lookup by `a.base`: testing
    // every result of the place for either took 3 s for a session of
    // 3,000 results named only in their texts.
    let by_text = |place: &str| {
        format!(
            "(SELECT named.entry_rowid FROM (
                SELECT t.* FROM temp_tool_results t
                 WHERE t.column_output_id = a.base AND {place}
                UNION
                SELECT t.* FROM temp_text_refs r
                 CROSS JOIN temp_tool_results t ON t.entry_rowid = r.entry_rowid
                 WHERE r.base = a.base AND {place}) named
              {})",
            first_by_place("named")
        )
    };
    let gather = [
        "CREATE TEMP TABLE IF NOT EXISTS temp_tool_results(
           entry_rowid INTEGER PRIMARY KEY, path TEXT NOT NULL, byte_offset INTEGER NOT NULL,
           obj_in_line INTEGER NOT NULL, output_id TEXT, column_output_id TEXT)"
            .to_owned(),
        // Every session numbers its outputs from 0: a number alone would
        // lead to one result in each session.
        "CREATE INDEX IF NOT EXISTS temp.temp_tool_results_output
           ON temp_tool_results(output_id, path)"
            .to_owned(),
        "CREATE INDEX IF NOT EXISTS temp.temp_tool_results_column
           ON temp_tool_results(column_output_id, path)"
            .to_owned(),
        "CREATE INDEX IF NOT EXISTS temp.temp_tool_results_path ON temp_tool_results(path)"
            .to_owned(),
        "DELETE FROM temp_tool_results".to_owned(),
        // The results are gathered from the outputs' sessions (`CROSS JOIN`
        // keeps that order): from every tool result of the index instead,
        // each was tried against every session.
        format!(
            "INSERT OR IGNORE INTO temp_tool_results
             SELECT e.entry_rowid, t.path, e.byte_offset, e.obj_in_line,
                    CAST(json_extract(e.raw, '$.message.details.meta.truncation.artifactId') AS TEXT),
                    CAST(json_extract(e.raw, '$.message.details.meta.limits.columnTruncated.artifactId')
                         AS TEXT)
               FROM (SELECT DISTINCT session_path FROM subagent_artifacts
                      WHERE kind = 'tool_output' AND session_path IS NOT NULL AND {}) a
               CROSS JOIN files t ON {OWN_FILE} OR ({in_folder})
               CROSS JOIN entries e ON e.file_id = t.file_id
               CROSS JOIN message_meta mm ON mm.entry_rowid = e.entry_rowid AND mm.role = 'toolResult'
              WHERE json_valid(e.raw)",
            scope.holds("session_path")
        ),
        // `artifact://<N>` in a result's text: output number → result.
        "CREATE TEMP TABLE IF NOT EXISTS temp_text_refs(
           base TEXT NOT NULL, entry_rowid INTEGER NOT NULL, PRIMARY KEY(base, entry_rowid))
           WITHOUT ROWID"
            .to_owned(),
        "DELETE FROM temp_text_refs".to_owned(),
    ];
    // The texts of the results that outputs named by no result's number
    // may be linked to: each result's JSON, and its shared values (a
    // string's own text, `is_json` 0; inflated by the caller).
    let texts = format!(
        "WITH unnamed(session_path) AS (
           SELECT DISTINCT a.session_path FROM subagent_artifacts a
            WHERE a.kind = 'tool_output' AND a.session_path IS NOT NULL AND {}
              AND {} IS NULL AND {} IS NULL),
         results(entry_rowid) AS (
           SELECT t.entry_rowid FROM unnamed a CROSS JOIN temp_tool_results t ON {OWN_FILE}
           UNION
           SELECT t.entry_rowid FROM unnamed a CROSS JOIN temp_tool_results t ON {in_folder})
         SELECT r.entry_rowid, e.raw, 1, NULL, NULL FROM results r
           JOIN entries e ON e.entry_rowid = r.entry_rowid
         UNION ALL
         SELECT r.entry_rowid, t.text, t.is_json, t.deflated, t.text_len FROM results r
           JOIN shared_refs sr ON sr.entry_rowid = r.entry_rowid
           JOIN shared_texts t ON t.text_id = sr.text_id",
        scope.holds("a.session_path"),
        by_number(OWN_FILE),
        by_number(&in_folder),
    );
    let link = [
        "CREATE TEMP TABLE IF NOT EXISTS temp_output_links(artifact_id INTEGER PRIMARY KEY, entry_rowid INTEGER)"
            .to_owned(),
        "DELETE FROM temp_output_links".to_owned(),
        format!(
            "INSERT INTO temp_output_links(artifact_id, entry_rowid)
             SELECT a.artifact_id, coalesce({}, {}, {}, {})
               FROM subagent_artifacts a
              WHERE a.kind = 'tool_output' AND a.session_path IS NOT NULL AND {}",
            by_number(OWN_FILE),
            by_number(&in_folder),
            by_text(OWN_FILE),
            by_text(&in_folder),
            scope.holds("a.session_path"),
        ),
        "UPDATE subagent_artifacts
            SET entry_rowid = (SELECT l.entry_rowid FROM temp_output_links l
                                WHERE l.artifact_id = subagent_artifacts.artifact_id)
          WHERE artifact_id IN (SELECT l.artifact_id FROM temp_output_links l
                                  JOIN subagent_artifacts a ON a.artifact_id = l.artifact_id
                                 WHERE l.entry_rowid IS NOT a.entry_rowid)"
            .to_owned(),
    ];
    OutputLinkSql {
        gather,
        texts,
        link,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Writer;
    use crate::store::{first_loop, query_plan};

    /// The link as one query defined it before `link_tool_outputs` (which
    /// parsed each tool result's JSON three times per output of its
    /// folder): the definition the faster one must keep. The text is the
    /// entry's whole JSON, its shared values put back (`v_entries_full`).
    const DEFINITION: &str = "
        SELECT a.artifact_id,
               (SELECT e.entry_rowid
                  FROM files f
                  JOIN entries e ON e.file_id = f.file_id
                  JOIN message_meta mm ON mm.entry_rowid = e.entry_rowid AND mm.role = 'toolResult'
                  JOIN v_entries_full w ON w.entry_rowid = e.entry_rowid
                 WHERE (f.path = a.session_path
                        OR (f.path > substr(a.session_path, 1, length(a.session_path) - 6) || '/'
                            AND f.path < substr(a.session_path, 1, length(a.session_path) - 6) || '0'
                            AND f.path LIKE '%.jsonl'))
                   AND json_valid(e.raw)
                   AND (CAST(json_extract(e.raw, '$.message.details.meta.truncation.artifactId') AS TEXT) = a.base
                        OR CAST(json_extract(e.raw, '$.message.details.meta.limits.columnTruncated.artifactId') AS TEXT) = a.base
                        OR instr(w.raw, 'artifact://' || a.base || ']') OR instr(w.raw, 'artifact://' || a.base || '\"')
                        OR instr(w.raw, 'artifact://' || a.base || '\\') OR instr(w.raw, 'artifact://' || a.base || ' ')
                        OR instr(w.raw, 'artifact://' || a.base || ':') OR instr(w.raw, 'artifact://' || a.base || ')'))
                 ORDER BY CAST(json_extract(e.raw, '$.message.details.meta.truncation.artifactId') AS TEXT) IS a.base DESC,
                          f.path = a.session_path DESC, f.path, e.byte_offset, e.obj_in_line
                 LIMIT 1)
          FROM subagent_artifacts a WHERE a.kind = 'tool_output' AND a.session_path IS NOT NULL
         ORDER BY a.artifact_id";

    /// Files around one omp session `s.jsonl`: its own, transcripts in its
    /// folder (one nested deeper), a neighbour whose name starts alike, a
    /// file in the folder that is not JSONL, and a second session.
    const FILES: &[&str] = &[
        "/r/p/s.jsonl",
        "/r/p/s/0-Explore.jsonl",
        "/r/p/s/0-Explore/1-Grep.jsonl",
        "/r/p/s-2.jsonl",
        "/r/p/s/notes.txt",
        "/r/p/t.jsonl",
    ];

    /// One tool result: where it is, and what names an output in it.
    #[derive(Debug, Clone)]
    struct Result {
        file: usize,
        role_is_result: bool,
        output_id: Option<u8>,
        column_id: Option<u8>,
        /// `artifact://<N>` and the character after it (none: the text ends).
        text_ref: Option<(u8, Option<char>)>,
        /// Where the text is: 0 in `raw`, 1 a shared text, 2 one deflated.
        shared: u8,
        valid_json: bool,
    }

    fn result() -> impl Strategy<Value = Result> {
        let id = proptest::option::of(0u8..4);
        (
            0..FILES.len(),
            prop::bool::weighted(0.9),
            id.clone(),
            id,
            proptest::option::of((
                0u8..12,
                proptest::option::of(prop::sample::select(vec![
                    ']', '"', '\\', ' ', ':', ')', '.', '5', '\n', '\u{1}', 'é',
                ])),
            )),
            0u8..3,
            prop::bool::weighted(0.9),
        )
            .prop_map(
                |(file, role_is_result, output_id, column_id, text_ref, shared, valid_json)| {
                    Result {
                        file,
                        role_is_result,
                        output_id,
                        column_id,
                        text_ref,
                        shared,
                        valid_json,
                    }
                },
            )
    }

    fn raw(result: &Result) -> String {
        let mut meta = serde_json::Map::new();
        if let Some(id) = result.output_id {
            meta.insert(
                "truncation".into(),
                serde_json::json!({ "artifactId": id.to_string() }),
            );
        }
        if let Some(id) = result.column_id {
            meta.insert(
                "limits".into(),
                serde_json::json!({ "columnTruncated": { "artifactId": id } }),
            );
        }
        let mut content = serde_json::json!({ "type": "text" });
        if result.shared == 0 {
            content["text"] = text(result).into();
        }
        let raw = serde_json::json!({
            "type": "message",
            "message": { "role": "toolResult", "content": [content], "details": { "meta": meta } }
        })
        .to_string();
        if result.valid_json {
            raw
        } else {
            format!("{raw}}}")
        }
    }

    /// The result's text: long when it is a shared text, as the lean
    /// layout keeps only strings of 1 KiB or more apart.
    fn text(result: &Result) -> String {
        let cut = if result.shared == 0 {
            "cut"
        } else {
            &"cut\n".repeat(300)
        };
        match result.text_ref {
            Some((id, after)) => {
                let after = after.map(String::from).unwrap_or_default();
                format!("{cut} [full output: artifact://{id}{after}")
            }
            None => cut.to_owned(),
        }
    }

    /// A shared text's row: the text, or '' and its zlib stream.
    fn shared_text(result: &Result) -> (String, Option<Vec<u8>>) {
        use std::io::Write;
        let text = text(result);
        if result.shared < 2 {
            return (text, None);
        }
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        zlib.write_all(text.as_bytes()).unwrap();
        (String::new(), Some(zlib.finish().unwrap()))
    }

    /// The index: `FILES`, `results` in them (in order, so byte offsets
    /// rise), and outputs `(number, session file)`.
    fn index(results: &[Result], outputs: &[(u8, usize)]) -> (tempfile::TempDir, Writer) {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        let conn = &writer.conn;
        for (file_id, path) in FILES.iter().enumerate() {
            conn.execute(
                "INSERT INTO files(file_id, path, root, rel_path, depth, status, parser_version)
                 VALUES (?1, ?2, '/r', ?2, 2, 'indexed', 1)",
                rusqlite::params![file_id as i64, path],
            )
            .unwrap();
        }
        for (n, result) in results.iter().enumerate() {
            let role = if result.role_is_result {
                "toolResult"
            } else {
                "assistant"
            };
            conn.execute(
                "INSERT INTO entries(entry_rowid, file_id, session_id, entry_id, type, line_no, byte_offset,
                                     byte_len, obj_in_line, synthetic_id, glued, raw)
                 VALUES (?1, ?2, 's', ?1, 'message', ?1, ?3, 1, ?4, 0, 0, ?5)",
                rusqlite::params![n as i64 + 1, result.file as i64, (n / 2) as i64, (n % 2) as i64, raw(result)],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO message_meta(entry_rowid, file_id, session_id, entry_id, role)
                 VALUES (?1, ?2, 's', ?1, ?3)",
                rusqlite::params![n as i64 + 1, result.file as i64, role],
            )
            .unwrap();
            if result.shared > 0 {
                let (stored, deflated) = shared_text(result);
                conn.execute(
                    "INSERT INTO shared_texts(text_id, hash, is_json, text, deflated, text_len)
                     VALUES (?1, ?1, 0, ?2, ?3, ?4)",
                    rusqlite::params![n as i64 + 1, stored, deflated, text(result).len() as i64],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO shared_refs(entry_rowid, json_path, key, key_index, file_id, text_id)
                     VALUES (?1, '$.message.content[0]', 'text', 1, ?2, ?1)",
                    rusqlite::params![n as i64 + 1, result.file as i64],
                )
                .unwrap();
            }
        }
        for (n, (number, session)) in outputs.iter().enumerate() {
            conn.execute(
                "INSERT INTO subagent_artifacts(path, root, name, base, kind, size, mtime_ns, session_path)
                 VALUES (?1, '/r', ?2, ?3, 'tool_output', 1, 1, ?4)",
                rusqlite::params![
                    format!("/r/p/out{n}.log"),
                    format!("{number}.bash.log"),
                    number.to_string(),
                    FILES[*session]
                ],
            )
            .unwrap();
        }
        (dir, writer)
    }

    /// The links are found from the outputs' sessions and by the outputs'
    /// numbers: no step reads every tool result of the index, or every
    /// result of a folder for each output named by its number; linking all
    /// outputs or those of the sessions a sync changed alike.
    #[test]
    fn outputs_are_linked_from_their_sessions_by_number() {
        for scope in [super::OutputScope::All, super::OutputScope::Changed] {
            outputs_of_scope_are_linked_by_number(scope);
        }
    }

    fn outputs_of_scope_are_linked_by_number(scope: super::OutputScope) {
        let (_dir, writer) = index(&[], &[]);
        writer
            .fill_temp_paths("temp_link_scope", &Vec::new())
            .unwrap();
        let sql = super::tool_output_links(scope);
        let statements: Vec<&String> = sql.gather.iter().chain(&sql.link).collect();
        let is_insert = |s: &&&String| s.trim_start().starts_with("INSERT");
        for statement in statements.iter().filter(|s| !is_insert(s)) {
            writer.conn.execute_batch(statement).unwrap();
        }
        let mut inserts = statements.iter().filter(is_insert);
        let fill = query_plan(&writer.conn, inserts.next().unwrap());
        assert!(
            first_loop(&fill).contains("subagent_artifacts"),
            "{fill:#?}"
        );
        assert!(
            fill.iter()
                .any(|line| line.starts_with("SEARCH t USING") && line.contains("(path=?)")),
            "{fill:#?}"
        );
        // By number in the session's file, then in its folder; then by
        // column id or text, in the same two places: each a lookup by the
        // output's number, never a scan of a place's results. The texts are
        // read for the results of unnamed outputs' places alone.
        let by_number = [
            "temp_tool_results_output (output_id=? AND path=?)",
            "temp_tool_results_output (output_id=? AND path>? AND path<?)",
        ];
        let texts = query_plan(&writer.conn, &sql.texts);
        let link = query_plan(&writer.conn, inserts.next().unwrap());
        for (plan, lookups) in [
            (
                &texts,
                [
                    "temp_tool_results_path (path=?)",
                    "temp_tool_results_path (path>? AND path<?)",
                ],
            ),
            (
                &link,
                [
                    "temp_tool_results_column (column_output_id=? AND path=?)",
                    "temp_tool_results_column (column_output_id=? AND path>? AND path<?)",
                ],
            ),
        ] {
            for lookup in by_number.iter().chain(&lookups) {
                assert!(
                    plan.iter().any(|line| line.ends_with(lookup)),
                    "{lookup}: {plan:#?}"
                );
            }
            assert!(
                !plan.iter().any(|line| line.starts_with("SCAN t")),
                "{plan:#?}"
            );
        }
        assert!(
            link.iter()
                .any(|line| line.starts_with("SEARCH r USING PRIMARY KEY (base=?)")),
            "{link:#?}"
        );
        assert!(
            !link
                .iter()
                .any(|line| line.ends_with("temp_tool_results_path (path=?)")),
            "{link:#?}"
        );
    }

    /// A shared text whose stream does not inflate names nothing, and the
    /// links are still made: a damaged value does not stop the sync.
    #[test]
    fn a_text_that_does_not_inflate_names_nothing() {
        let named = |file| Result {
            file,
            role_is_result: true,
            output_id: None,
            column_id: None,
            text_ref: Some((3, Some(']'))),
            shared: 2,
            valid_json: true,
        };
        let (_dir, writer) = index(&[named(0), named(1)], &[(3, 0)]);
        writer
            .conn
            .execute(
                "UPDATE shared_texts SET deflated = x'78da0102' WHERE text_id = 1",
                [],
            )
            .unwrap();
        writer.link_tool_outputs().unwrap();
        let linked: Option<i64> = writer
            .conn
            .query_row("SELECT entry_rowid FROM subagent_artifacts", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(linked, Some(2));
    }

    /// A session nested below other sessions' folders with no parent named
    /// gets the nearest of them; one below none keeps none.
    #[test]
    fn a_nested_session_gets_the_nearest_session_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        let files = [
            (1, "/r/p/s.jsonl", 2),
            (2, "/r/p/s/run-0.jsonl", 3),
            (3, "/r/p/s/run-0/c.jsonl", 4),
            (4, "/r/p/s/other/d.jsonl", 4),
            (5, "/r/p/t/e.jsonl", 3),
        ];
        for (file_id, path, depth) in files {
            writer
                .conn
                .execute(
                    "INSERT INTO files(file_id, path, root, rel_path, depth, status, parser_version)
                     VALUES (?1, ?2, '/r', ?2, ?3, 'indexed', 1)",
                    rusqlite::params![file_id, path, depth],
                )
                .unwrap();
            writer
                .conn
                .execute(
                    "INSERT INTO sessions(file_id, session_id, file_path, cwd, version, listed_by_pi,
                                          header_raw)
                     VALUES (?1, 'id' || ?1, ?2, '/p', 3, 1, '{}')",
                    rusqlite::params![file_id, path],
                )
                .unwrap();
        }
        writer.link_nested_sessions().unwrap();
        let parents: Vec<(i64, Option<String>)> = writer
            .conn
            .prepare("SELECT file_id, parent_session_id FROM sessions ORDER BY file_id")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let id = |n: &str| Some(n.to_owned());
        assert_eq!(
            parents,
            [
                (1, None),
                (2, id("id1")),
                (3, id("id2")),
                (4, id("id1")),
                (5, None)
            ]
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever names which output where, each output is linked to the
        /// tool result the definition chooses.
        #[test]
        fn outputs_link_to_the_results_the_definition_chooses(
            results in prop::collection::vec(result(), 0..24),
            outputs in prop::collection::vec((0u8..12, prop::sample::select(vec![0usize, 1, 3, 5])), 0..8),
        ) {
            let (_dir, writer) = index(&results, &outputs);
            let want: Vec<(i64, Option<i64>)> = writer
                .conn
                .prepare(DEFINITION)
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            writer.link_tool_outputs().unwrap();
            let got: Vec<(i64, Option<i64>)> = writer
                .conn
                .prepare("SELECT artifact_id, entry_rowid FROM subagent_artifacts ORDER BY artifact_id")
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            prop_assert_eq!(got, want);
        }

        /// Whatever results name which outputs where, the sync's check
        /// reports the results the definition finds without their output.
        #[test]
        fn missing_outputs_are_those_the_definition_finds(
            results in prop::collection::vec(result(), 0..24),
            outputs in prop::collection::vec((0u8..6, prop::sample::select(vec![0usize, 1, 2, 3, 5])), 0..8),
        ) {
            let (_dir, writer) = index(&results, &outputs);
            for (file_id, path) in FILES.iter().enumerate() {
                writer.conn.execute(
                    "INSERT INTO sessions(file_id, session_id, file_path, cwd, version, listed_by_pi,
                                          header_raw, agent)
                     VALUES (?1, ?1, ?2, '/p', 3, 1, '{}', 'omp')",
                    rusqlite::params![file_id as i64, path],
                )
                .unwrap();
            }
            let want: Vec<(String, i64, String)> = writer
                .conn
                .prepare(MISSING_DEFINITION)
                .unwrap()
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            prop_assert_eq!(writer.missing_tool_outputs().unwrap(), want);
        }
    }

    /// The check for results without their output as one statement: an
    /// output of the result's own session, or of any session in whose
    /// folder the result's file lies.
    const MISSING_DEFINITION: &str = "
        SELECT x.path, x.line_no, x.id
          FROM (SELECT f.path, e.line_no,
                       CASE WHEN json_valid(e.raw) THEN CAST(json_extract(e.raw,
                         '$.message.details.meta.truncation.artifactId') AS TEXT) END AS id
                  FROM sessions s
                  JOIN files f ON f.file_id = s.file_id
                  JOIN message_meta mm ON mm.file_id = s.file_id AND mm.role = 'toolResult'
                  JOIN entries e ON e.entry_rowid = mm.entry_rowid
                 WHERE s.agent = 'omp') x
         WHERE x.id IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM subagent_artifacts a
                            WHERE a.kind = 'tool_output' AND a.base = x.id
                              AND (a.session_path = x.path
                                   OR (x.path > substr(a.session_path, 1, length(a.session_path) - 6) || '/'
                                       AND x.path < substr(a.session_path, 1, length(a.session_path) - 6) || '0')))
         ORDER BY x.path, x.line_no";
}
