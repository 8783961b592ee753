//! The single writer: applies batches, removes files, and owns transactions.
//!
//! A batch's rows and the file's new cursor are written together, inside
//! whatever transaction is open, so any committed state is a consistent
//! prefix of every file. The full-text rows of new chunks are queued and go
//! to the shards after commit; deleted chunks are logged for them first
//! (`fts.rs`).

use rusqlite::{OptionalExtension, params};

use super::{Result, Writer};
use crate::normalize::{Detail, Entry, Header};
use crate::pipeline::{Batch, FileStatus, LineError};

/// Rows a batch added.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteStats {
    pub entries: u64,
    pub errors: u64,
}

/// Tables holding one file's rows, children before parents.
const FILE_TABLES: &[&str] = &[
    "exact_lines",
    "redactions",
    "shared_refs",
    "chunk_runs",
    "subagent_tool_calls",
    "subagent_messages",
    "subagent_runs",
    "subagent_deliveries",
    "chunks",
    "content_blocks",
    "tool_call_meta",
    "usage_records",
    "compactions",
    "branch_summaries",
    "labels",
    "model_changes",
    "message_meta",
    "entries",
    "parse_errors",
    "sessions",
];

impl Writer {
    pub fn begin(&self) -> Result<()> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.err())
    }

    /// Brings fork copies up to date (`copies.rs`), commits the open
    /// transaction, then hands its chunks to the full-text shards (which
    /// commit after it; see `fts.rs`).
    pub fn commit(&self) -> Result<()> {
        self.refresh_copies()?;
        let upto = self.record_chunk_ids()?;
        self.index_pending_messages()?;
        self.conn.execute_batch("COMMIT").map_err(self.err())?;
        crate::fault::reached(crate::fault::Point::Commit);
        crate::fault::hold_if_asked("commit", || false);
        self.dispatch_fts(upto)
    }

    /// Writes the open transaction's dirty pages to the file without
    /// committing (a test's crash point; see `fault`).
    pub fn flush_cache(&self) -> Result<()> {
        self.conn.cache_flush().map_err(self.err())
    }

    /// Applies one batch inside the open transaction.
    pub fn apply(&self, batch: &Batch) -> Result<WriteStats> {
        if let FileStatus::Unreadable(_) = batch.status {
            return Ok(WriteStats::default());
        }
        let path = batch.target.path.to_string_lossy();
        self.mark_links_stale(&path)?;
        let existing = self.file_id(&path)?;
        if let (true, Some(file_id)) = (batch.reset, existing) {
            self.delete_file_rows(file_id)?;
        }
        let file_id = self.upsert_file(batch, existing)?;
        let mut stats = WriteStats::default();
        if let FileStatus::Skipped(_) = batch.status {
            return Ok(stats);
        }
        if let Some(header) = &batch.header {
            self.insert_session(file_id, batch, header)?;
        }
        let session_id = batch
            .cursor
            .session
            .as_ref()
            .map(|facts| facts.session_id.as_str())
            .unwrap_or_default();
        for entry in &batch.entries {
            self.insert_entry(file_id, session_id, entry)?;
            stats.entries += 1;
        }
        for error in &batch.errors {
            self.insert_error(file_id, &path, error)?;
            stats.errors += 1;
        }
        for line in &batch.exact_lines {
            self.conn
                .prepare_cached(
                    "INSERT OR REPLACE INTO exact_lines(file_id, byte_offset, header, bytes)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![file_id, line.byte_offset, line.header, line.bytes])
                })
                .map_err(self.err())?;
        }
        if batch.cursor.session.is_some() {
            self.update_session(file_id, batch)?;
            self.agent_facts(file_id, batch)?;
        }
        Ok(stats)
    }

    /// Forgets a file that no longer exists, or marks it deleted.
    pub fn remove_file(&self, file_id: i64, keep_rows: bool) -> Result<()> {
        if let Some(path) = self.path_of(file_id)? {
            self.mark_links_stale(&path)?;
        }
        if keep_rows {
            self.conn
                .execute(
                    "UPDATE files SET status = 'deleted', deleted_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
                     WHERE file_id = ?1",
                    [file_id],
                )
                .map_err(self.err())?;
            return Ok(());
        }
        self.delete_file_rows(file_id)?;
        self.conn
            .execute("DELETE FROM files WHERE file_id = ?1", [file_id])
            .map_err(self.err())?;
        Ok(())
    }

    /// Notes, in the open transaction, that rows the subagent links are
    /// derived from changed, those of the file at `path` (a session file or
    /// an artifact): the artifacts pass then derives them again
    /// (`links_stale`). Kept in `meta` rather than in memory, so that a
    /// sync killed after committing rows but before relinking leaves the
    /// mark for the next one, which may find nothing else to do. The path
    /// is kept in memory (`LinkScope`): the links that depend on no file
    /// this writer changed are not derived again.
    pub fn mark_links_stale(&self, path: &str) -> Result<()> {
        if !self.link_scope.borrow().checked() {
            // A mark this writer did not make: its paths are unknown.
            let left_before = self.links_stale()?;
            self.link_scope.borrow_mut().checked_mark(left_before);
        }
        self.link_scope.borrow_mut().touch(path);
        self.conn
            .prepare_cached("INSERT OR IGNORE INTO meta(key, value) VALUES ('links_stale', '1')")
            .and_then(|mut stmt| stmt.execute([]))
            .map(|_| ())
            .map_err(self.err())
    }

    /// Derives every subagent link again at the end of this sync, whatever
    /// it changes: for a sync that reads (nearly) every file, where linking
    /// the outputs session by session costs more than linking them all
    /// (docs/performance.md).
    pub fn relink_all(&self) {
        self.link_scope.borrow_mut().everything();
    }

    /// True when rows changed since the subagent links were last derived.
    /// A sync that finds nothing new skips deriving them, which reads every
    /// session row (most of its page reads over 10,000 files).
    pub fn links_stale(&self) -> Result<bool> {
        self.conn
            .prepare_cached("SELECT 1 FROM meta WHERE key = 'links_stale'")
            .and_then(|mut stmt| stmt.query_row([], |_| Ok(())).optional())
            .map(|found| found.is_some())
            .map_err(self.err())
    }

    /// The links were derived again, in the open transaction.
    pub fn links_fresh(&self) -> Result<()> {
        self.link_scope.take();
        self.conn
            .prepare_cached("DELETE FROM meta WHERE key = 'links_stale'")
            .and_then(|mut stmt| stmt.execute([]))
            .map(|_| ())
            .map_err(self.err())
    }

    fn path_of(&self, file_id: i64) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT path FROM files WHERE file_id = ?1")
            .and_then(|mut stmt| stmt.query_row([file_id], |row| row.get(0)).optional())
            .map_err(self.err())
    }

    fn file_id(&self, path: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT file_id FROM files WHERE path = ?1")
            .and_then(|mut stmt| stmt.query_row([path], |row| row.get(0)).optional())
            .map_err(self.err())
    }

    fn delete_file_rows(&self, file_id: i64) -> Result<()> {
        self.deleted_rows.set(true);
        self.delete_fts_rows(file_id)?;
        self.unindex_message_text(file_id)?;
        let sql = [
            "CREATE TEMP TABLE IF NOT EXISTS gone_hashes(hash TEXT PRIMARY KEY)",
            "DELETE FROM gone_hashes",
            "INSERT OR IGNORE INTO gone_hashes SELECT hash FROM images WHERE file_id = ?1",
            "DELETE FROM images WHERE file_id = ?1",
            "DELETE FROM blobs WHERE hash IN (SELECT hash FROM gone_hashes)
               AND NOT EXISTS (SELECT 1 FROM images i WHERE i.hash = blobs.hash)",
        ];
        for statement in sql {
            let mut stmt = self.conn.prepare_cached(statement).map_err(self.err())?;
            if statement.contains("?1") {
                stmt.execute([file_id]).map_err(self.err())?;
            } else {
                stmt.execute([]).map_err(self.err())?;
            }
        }
        let gone_session: Option<String> = self
            .conn
            .prepare_cached("SELECT session_id FROM sessions WHERE file_id = ?1")
            .and_then(|mut stmt| stmt.query_row([file_id], |row| row.get(0)).optional())
            .map_err(self.err())?;
        let shared = self.shared_of_file(file_id)?;
        for table in FILE_TABLES {
            // content_blocks has no index on file_id (migration 0017): its
            // primary key starts with the entry.
            let filter = match *table {
                "content_blocks" => {
                    "entry_rowid IN (SELECT entry_rowid FROM entries WHERE file_id = ?1)"
                }
                _ => "file_id = ?1",
            };
            self.conn
                .prepare_cached(&format!("DELETE FROM {table} WHERE {filter}"))
                .and_then(|mut stmt| stmt.execute([file_id]))
                .map_err(self.err())?;
        }
        self.drop_unshared(&shared)?;
        if let Some(session_id) = gone_session {
            self.relink_children(&session_id)?;
        }
        Ok(())
    }

    fn upsert_file(&self, batch: &Batch, existing: Option<i64>) -> Result<i64> {
        let target = &batch.target;
        let cursor = &batch.cursor;
        let skip_reason = match &batch.status {
            FileStatus::Skipped(reason) => Some(reason.as_str()),
            _ => None,
        };
        // The stored size says how much of the file the index has looked at:
        // only the last batch of a file has seen it all. A sync killed after
        // an earlier batch leaves a size that differs from the file's, so
        // the next sync resumes from the cursor instead of calling the file
        // unchanged.
        let size = if batch.last {
            target.size
        } else {
            cursor.offset
        };
        let values = params![
            target.path.to_string_lossy(),
            target.root,
            target.rel_path,
            target.depth,
            batch.status.name(),
            skip_reason,
            target.dev,
            target.ino,
            size as i64,
            target.mtime_ns,
            cursor.offset as i64,
            cursor.line_count,
            cursor.object_count,
            cursor.tail_open,
            cursor.last_entry_id,
            batch.fingerprint.head_len as i64,
            batch.fingerprint.head_hash,
            batch.fingerprint.anchor_hash,
            crate::pipeline::PARSER_VERSION,
            target.seen_ns,
        ];
        let sql = "INSERT INTO files(path, root, rel_path, depth, status, skip_reason, dev, ino, size,
                       mtime_ns, offset, line_count, object_count, tail_open, last_entry_id, head_len,
                       head_hash, anchor_hash, parser_version, seen_ns, indexed_at)
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                       ?18, ?19, ?20, strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                   ON CONFLICT(path) DO UPDATE SET root = excluded.root, rel_path = excluded.rel_path,
                       depth = excluded.depth, status = excluded.status,
                       skip_reason = excluded.skip_reason, dev = excluded.dev, ino = excluded.ino,
                       size = excluded.size, mtime_ns = excluded.mtime_ns, offset = excluded.offset,
                       line_count = excluded.line_count, object_count = excluded.object_count,
                       tail_open = excluded.tail_open, last_entry_id = excluded.last_entry_id,
                       head_len = excluded.head_len, head_hash = excluded.head_hash,
                       anchor_hash = excluded.anchor_hash, parser_version = excluded.parser_version,
                       seen_ns = excluded.seen_ns, indexed_at = excluded.indexed_at, deleted_at = NULL";
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(values))
            .map_err(self.err())?;
        match existing {
            Some(file_id) => Ok(file_id),
            None => Ok(self.conn.last_insert_rowid()),
        }
    }

    fn insert_session(&self, file_id: i64, batch: &Batch, header: &Header) -> Result<()> {
        let path = batch.target.path.to_string_lossy();
        let project_dir = batch
            .target
            .rel_path
            .split('/')
            .next()
            .filter(|_| batch.target.depth >= 2);
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO sessions(file_id, session_id, file_path, cwd, project_dir, version,
                     created_at, created_ms, parent_session, listed_by_pi, header_raw, agent,
                     file_tail, parent_tail)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    file_id,
                    header.session_id,
                    path,
                    header.cwd,
                    project_dir,
                    header.version,
                    header.timestamp,
                    header.created_ms,
                    header.parent_session,
                    batch.target.listed,
                    header.raw,
                    header.agent,
                    tail_key(&path),
                    header.parent_session.as_deref().map(tail_key),
                ])
            })
            .map_err(self.err())?;
        // Link this session to its parent, and any children to it, whichever
        // was indexed first.
        self.link_to_parent(file_id, header.parent_session.as_deref())?;
        let own_tail = path_tail(&path);
        self.conn
            .prepare_cached(LINK_CHILDREN)
            .and_then(|mut stmt| stmt.execute(params![file_id, path, header.session_id, own_tail]))
            .map_err(self.err())?;
        Ok(())
    }

    /// Sets a session's `parent_session_id` from its header's
    /// `parentSession`: an exact path match wins; otherwise the trailing
    /// `<cwd-dir>/<file>.jsonl` must match (trees indexed from a copy);
    /// a `parentSession` that is no path is a session id (omp's `fork()`).
    fn link_to_parent(&self, file_id: i64, parent_session: Option<&str>) -> Result<()> {
        let parent_tail = parent_session.and_then(path_tail);
        self.conn
            .prepare_cached(LINK_TO_PARENT)
            .and_then(|mut stmt| stmt.execute(params![file_id, parent_tail]))
            .map_err(self.err())?;
        Ok(())
    }

    /// The children of a session that just lost its rows point elsewhere,
    /// or nowhere, as a fresh sync without it would have them (a rewrite
    /// of the parent links them again when its header comes back).
    fn relink_children(&self, session_id: &str) -> Result<()> {
        let children: Vec<(i64, Option<String>)> = self
            .conn
            .prepare_cached(CHILDREN_LINKED)
            .and_then(|mut stmt| {
                stmt.query_map([session_id], |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .map_err(self.err())?;
        for (child, parent_session) in children {
            self.link_to_parent(child, parent_session.as_deref())?;
        }
        Ok(())
    }

    fn update_session(&self, file_id: i64, batch: &Batch) -> Result<()> {
        let mut messages = 0i64;
        let mut first_user_text: Option<&str> = None;
        let mut first_other_text: Option<&str> = None;
        let mut name: Option<Option<&str>> = None;
        let mut named: Option<&str> = None;
        let mut activity: Option<i64> = None;
        // Pi's listAll never sees objects recovered from a glued line
        // (JSON.parse fails on the whole line) except those its readline
        // split at a lone `\r`: only those it sees count toward SessionInfo.
        for entry in batch.entries.iter().filter(|entry| entry.listed) {
            if let Some(message) = &entry.message {
                messages += 1;
                if matches!(message.role.as_str(), "user" | "assistant") {
                    activity = activity.max(message.timestamp_ms.or(entry.timestamp_ms));
                }
            }
            if let Some(text) = entry.user_text.as_deref()
                && first_user_text.is_none()
                && !text.is_empty()
            {
                first_user_text = Some(text);
            }
            if first_other_text.is_none() {
                first_other_text = entry
                    .other_text
                    .and_then(|index| entry.texts.get(index))
                    .map(|text| text.text.as_str());
            }
            // Pi 0.73.1: the latest session_info wins, and an empty name clears.
            if let Some(new_name) = &entry.session_name {
                name = Some(new_name.as_deref().map(str::trim).filter(|n| !n.is_empty()));
            }
            // pi_agent_rust: the latest session_info that has a name, as
            // written; one without a name leaves it (`session_index.rs`).
            if let Some(Some(new_name)) = &entry.session_name {
                named = Some(new_name);
            }
        }
        let leaf = batch.entries.last().map(|entry| entry.entry_id.as_str());
        let mtime_ms = batch.target.mtime_ns / 1_000_000;
        self.conn
            .prepare_cached(
                "UPDATE sessions SET
                     message_count = message_count + ?2,
                     entry_count = ?3,
                     first_message = CASE WHEN ?4 IS NOT NULL AND (first_message IS NULL OR first_other_text IS NOT NULL)
                                          THEN ?4 ELSE first_message END,
                     first_other_text = CASE WHEN ?4 IS NOT NULL
                                                  OR (first_message IS NOT NULL AND first_other_text IS NULL)
                                             THEN NULL ELSE coalesce(first_other_text, ?9) END,
                     name = CASE WHEN agent = 'pi_agent_rust' THEN coalesce(?10, name)
                                 WHEN ?5 THEN ?6 ELSE name END,
                     activity_ms = CASE WHEN ?7 IS NULL THEN activity_ms
                                        WHEN activity_ms IS NULL OR ?7 > activity_ms THEN ?7
                                        ELSE activity_ms END,
                     leaf_entry_id = coalesce(?8, leaf_entry_id)
                 WHERE file_id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    file_id,
                    messages,
                    batch.cursor.entry_count,
                    first_user_text,
                    name.is_some(),
                    name.flatten(),
                    activity,
                    leaf,
                    first_other_text,
                    named,
                ])
            })
            .map_err(self.err())?;
        self.conn
            .prepare_cached(
                "UPDATE sessions SET modified_ms = coalesce(activity_ms, created_ms, ?2) WHERE file_id = ?1",
            )
            .and_then(|mut stmt| stmt.execute(params![file_id, mtime_ms]))
            .map_err(self.err())?;
        // v1 compactions name their first kept entry by Pi's line index.
        self.conn
            .prepare_cached(
                "UPDATE compactions SET first_kept_entry_id =
                     (SELECT e.entry_id FROM entries e
                       WHERE e.file_id = compactions.file_id AND e.pi_index = compactions.first_kept_entry_index)
                 WHERE file_id = ?1 AND first_kept_entry_id IS NULL AND first_kept_entry_index IS NOT NULL",
            )
            .and_then(|mut stmt| stmt.execute([file_id]))
            .map_err(self.err())?;
        Ok(())
    }

    /// What oh-my-pi and pi_agent_rust keep beyond Pi's shapes, after a
    /// batch: omp's name as its `/resume` shows it (the title slot's title
    /// when not blank; a blank slot hides `header.title`; without a slot,
    /// `header.title`; failing those, the last compaction `shortSummary`;
    /// omp 18 `session-listing.ts`), its first message when no user message
    /// has text (the first developer or assistant text, until a user text
    /// comes: `update_session` clears `first_other_text` then, so a
    /// `first_message` beside a `first_other_text` is that text), and the
    /// port's current leaf (the header's `leafId` when it names an entry,
    /// `""` none; its `session.rs`).
    fn agent_facts(&self, file_id: i64, batch: &Batch) -> Result<()> {
        // An entry only omp writes makes a session whose header looked
        // like Pi's omp's (older omp headers have nothing of their own).
        if batch.entries.iter().any(|entry| entry.omp_only) {
            self.conn
                .prepare_cached(
                    "UPDATE sessions SET agent = 'omp' WHERE file_id = ?1 AND agent = 'pi'",
                )
                .and_then(|mut stmt| stmt.execute([file_id]))
                .map_err(self.err())?;
        }
        let short_summary = batch
            .entries
            .iter()
            .rev()
            .find_map(|entry| match &entry.detail {
                Detail::Compaction {
                    short_summary: Some(summary),
                    ..
                } => Some(summary.as_str()),
                _ => None,
            });
        let slot = batch.title_slot.as_ref().map(|slot| slot.raw.as_str());
        self.conn
            .prepare_cached(
                "UPDATE sessions SET
                     title_slot = ?2,
                     short_summary = coalesce(?3, short_summary)
                 WHERE file_id = ?1",
            )
            .and_then(|mut stmt| stmt.execute(params![file_id, slot, short_summary]))
            .map_err(self.err())?;
        self.conn
            .prepare_cached(
                "UPDATE sessions SET name = CASE
                     WHEN title_slot IS NOT NULL THEN
                         CASE WHEN json_type(title_slot, '$.title') = 'text'
                                   AND trim(json_extract(title_slot, '$.title')) <> ''
                              THEN json_extract(title_slot, '$.title')
                              ELSE short_summary END
                     WHEN json_type(header_raw, '$.title') = 'text'
                         THEN json_extract(header_raw, '$.title')
                     ELSE short_summary END,
                     first_message = coalesce(first_message, first_other_text)
                 WHERE file_id = ?1 AND agent = 'omp'",
            )
            .and_then(|mut stmt| stmt.execute([file_id]))
            .map_err(self.err())?;
        self.conn
            .prepare_cached(
                "UPDATE sessions SET leaf_entry_id = CASE
                     WHEN json_extract(header_raw, '$.leafId') = '' THEN NULL
                     ELSE json_extract(header_raw, '$.leafId') END
                 WHERE file_id = ?1 AND agent = 'pi_agent_rust'
                   AND json_type(header_raw, '$.leafId') = 'text'
                   AND (json_extract(header_raw, '$.leafId') = ''
                        OR EXISTS (SELECT 1 FROM entries e WHERE e.file_id = ?1
                                     AND e.entry_id = json_extract(sessions.header_raw, '$.leafId')))",
            )
            .and_then(|mut stmt| stmt.execute([file_id]))
            .map_err(self.err())?;
        Ok(())
    }

    fn insert_entry(&self, file_id: i64, session_id: &str, entry: &Entry) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO entries(file_id, session_id, entry_id, parent_id, type, timestamp, timestamp_ms,
                     line_no, byte_offset, byte_len, obj_in_line, pi_index, synthetic_id, glued, raw)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    file_id,
                    session_id,
                    entry.entry_id,
                    entry.parent_id,
                    entry.entry_type,
                    entry.timestamp,
                    entry.timestamp_ms,
                    entry.line_no,
                    entry.byte_offset,
                    entry.byte_len,
                    entry.obj_in_line,
                    entry.pi_index,
                    entry.synthetic_id,
                    entry.glued,
                    entry.raw,
                ])
            })
            .map_err(self.err())?;
        let rowid = self.conn.last_insert_rowid();
        let key = EntryKey {
            rowid,
            file_id,
            session_id,
            entry,
        };
        self.insert_message(&key)?;
        self.insert_blocks(&key)?;
        self.insert_usage(&key)?;
        self.insert_detail(&key)?;
        self.insert_images(&key)?;
        let shared = self.insert_shared(rowid, file_id, &entry.shared)?;
        self.insert_texts(&key, &shared)?;
        self.index_message_text(&key);
        self.insert_subagent_runs(rowid, file_id, session_id, entry)?;
        self.insert_redactions(rowid, file_id, &entry.redactions)?;
        Ok(())
    }

    /// A user or assistant message goes into `message_fts` (migration
    /// 0015) at the end of the transaction (`index_pending_messages`).
    fn index_message_text(&self, key: &EntryKey<'_>) {
        let conversation = key
            .entry
            .message
            .as_ref()
            .is_some_and(|message| matches!(message.role.as_str(), "user" | "assistant"));
        if conversation {
            self.pending_messages.borrow_mut().push(key.rowid);
        }
    }

    /// The messages of the open transaction into `message_fts`, their text
    /// read through its content view `v_message_text`: the same view gives
    /// the text they are deleted with (`unindex_message_text`), so the two
    /// always agree. Last in the transaction, because once an FTS5 table
    /// has been written, every later statement that opens a statement
    /// savepoint (an INSERT ... SELECT, an upsert) makes FTS5 write its
    /// pending terms to disk: written per entry, one small segment per
    /// message was merged again and again, a fifth of a cold sync.
    ///
    /// One statement for them all (`INDEX_MESSAGES`).
    pub(super) fn index_pending_messages(&self) -> Result<()> {
        let rowids = std::mem::take(&mut *self.pending_messages.borrow_mut());
        if rowids.is_empty() {
            return Ok(());
        }
        let list = rowids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        self.conn
            .prepare_cached(INDEX_MESSAGES)
            .and_then(|mut stmt| stmt.execute([format!("[{list}]")]))
            .map_err(self.err())?;
        Ok(())
    }

    /// Takes a file's messages out of `message_fts` (before their rows go):
    /// an external-content FTS5 table forgets a row given the text it was
    /// indexed with.
    fn unindex_message_text(&self, file_id: i64) -> Result<()> {
        // Emptied, it has none of the file's old messages. Nor are this
        // transaction's indexed yet: written now, each later statement that
        // opens a savepoint would make FTS5 write its pending terms (see
        // `index_pending_messages`).
        if self.message_text_emptied.get() {
            return Ok(());
        }
        // Messages of this transaction are deleted as the others: indexed.
        self.index_pending_messages()?;
        let removed = self
            .conn
            .prepare_cached(
                "INSERT INTO message_fts(message_fts, rowid, text, session_id, role, time)
                 SELECT 'delete', entry_rowid, text, session_id, role, time FROM v_message_text
                  WHERE file_id = ?1",
            )
            .and_then(|mut stmt| stmt.execute([file_id]))
            .map_err(self.err())?;
        if removed > 0 {
            self.message_text_deleted.set(true);
        }
        Ok(())
    }

    /// Empties `message_fts` for a sync that reads (most of) the index
    /// again (`Writer::start_fts_anew`): deleting each message with its
    /// text, read back through the view and tokenized again, was the
    /// largest statement of a full re-read; emptying it is one command,
    /// which leaves no deleted words behind. Until the sync ends, the
    /// messages it does not write again are missing, which `meta`'s
    /// `message_fts_behind` says, in the same transaction: the end of this
    /// sync, or the start of the next one if it was cut short, puts them
    /// back (`catch_up_message_text`).
    pub(super) fn empty_message_text(&self) -> Result<()> {
        self.conn
            .execute_batch(
                "BEGIN IMMEDIATE;
                 INSERT INTO message_fts(message_fts) VALUES ('delete-all');
                 INSERT OR REPLACE INTO meta(key, value) VALUES ('message_fts_behind', '1');
                 COMMIT;",
            )
            .map_err(self.err())?;
        self.message_text_emptied.set(true);
        Ok(())
    }

    /// `message_fts` was emptied by a sync that has not put back the
    /// messages it did not write again (`empty_message_text`).
    pub(super) fn message_text_behind(&self) -> Result<bool> {
        self.conn
            .query_row(
                "SELECT 1 FROM meta WHERE key = 'message_fts_behind'",
                [],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(self.err())
    }

    /// Indexes the messages `message_fts` is missing after it was emptied
    /// (`empty_message_text`), those FTS5 has no length row for, and clears
    /// the mark; nothing when it is not behind. Inside the caller's
    /// transaction.
    pub fn catch_up_message_text(&self) -> Result<()> {
        if !self.message_text_behind()? {
            return Ok(());
        }
        self.index_pending_messages()?;
        self.conn
            .execute_batch(
                "INSERT INTO message_fts(rowid, text, session_id, role, time)
                 SELECT v.entry_rowid, v.text, v.session_id, v.role, v.time FROM v_message_text v
                  WHERE v.entry_rowid NOT IN (SELECT id FROM message_fts_docsize);
                 DELETE FROM meta WHERE key = 'message_fts_behind';",
            )
            .map_err(self.err())
    }

    fn insert_message(&self, key: &EntryKey<'_>) -> Result<()> {
        let Some(message) = &key.entry.message else {
            return Ok(());
        };
        let usage = message.usage.as_ref();
        self.conn
            .prepare_cached(
                "INSERT INTO message_meta(entry_rowid, file_id, session_id, entry_id, role, timestamp_ms,
                     provider, model, api, stop_reason, error_message, response_id, input_tokens,
                     output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, cost_total,
                     tool_call_id, tool_name, is_error, exit_code, custom_type, text_len, attribution)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
                     ?19, ?20, ?21, ?22, ?23, ?24, ?25)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    key.rowid,
                    key.file_id,
                    key.session_id,
                    key.entry.entry_id,
                    message.role,
                    message.timestamp_ms,
                    message.provider,
                    message.model,
                    message.api,
                    message.stop_reason,
                    message.error_message,
                    message.response_id,
                    usage.map(|u| u.input),
                    usage.map(|u| u.output),
                    usage.map(|u| u.cache_read),
                    usage.map(|u| u.cache_write),
                    usage.map(|u| u.total),
                    usage.and_then(|u| u.cost_total),
                    message.tool_call_id,
                    message.tool_name,
                    message.is_error,
                    message.exit_code,
                    message.custom_type,
                    message.text_len,
                    message.attribution,
                ])
            })
            .map_err(self.err())?;
        if message.role == "toolResult"
            && let Some(call_id) = &message.tool_call_id
        {
            let Some((call_rowid, call_path)) = self.open_call(key.file_id, call_id)? else {
                return Ok(());
            };
            self.conn
                .prepare_cached(
                    "UPDATE tool_call_meta SET result_entry_rowid = ?1, result_entry_id = ?2,
                         result_timestamp_ms = ?3, is_error = ?4, result_len = ?5
                     WHERE entry_rowid = ?6 AND json_path = ?7",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        key.rowid,
                        key.entry.entry_id,
                        message.timestamp_ms,
                        message.is_error,
                        message.text_len,
                        call_rowid,
                        call_path,
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// The first earlier call with this id that has no result yet: the
    /// least (entry, block index, path). Picked here rather than with
    /// `ORDER BY ... LIMIT 1`: SQLite prepared that query again at nearly
    /// every call (`sqlite3Reprepare`, 5 % of the writer thread in a cold
    /// sync), while the matching calls are one or two rows.
    fn open_call(&self, file_id: i64, call_id: &str) -> Result<Option<(i64, String)>> {
        let calls: Vec<(i64, i64, String)> = self
            .conn
            .prepare_cached(
                "SELECT entry_rowid, block_index, json_path FROM tool_call_meta
                 WHERE file_id = ?1 AND call_id = ?2 AND result_entry_rowid IS NULL",
            )
            .and_then(|mut stmt| {
                stmt.query_map(params![file_id, call_id], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })?
                .collect()
            })
            .map_err(self.err())?;
        Ok(calls
            .into_iter()
            .min()
            .map(|(rowid, _, json_path)| (rowid, json_path)))
    }

    fn insert_blocks(&self, key: &EntryKey<'_>) -> Result<()> {
        let timestamp_ms = key
            .entry
            .message
            .as_ref()
            .and_then(|message| message.timestamp_ms);
        for block in &key.entry.blocks {
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO content_blocks(entry_rowid, json_path, block_index, file_id, type,
                         text_len, redacted, tool_call_id, image_hash)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        key.rowid,
                        block.json_path,
                        block.block_index,
                        key.file_id,
                        block.block_type,
                        block.text_len,
                        block.redacted,
                        block.tool_call_id,
                        block.image_hash,
                    ])
                })
                .map_err(self.err())?;
        }
        for call in &key.entry.tool_calls {
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO tool_call_meta(entry_rowid, json_path, block_index, file_id,
                         session_id, entry_id, call_id, name, timestamp_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        key.rowid,
                        call.json_path,
                        call.block_index,
                        key.file_id,
                        key.session_id,
                        key.entry.entry_id,
                        call.call_id,
                        call.name,
                        timestamp_ms,
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    fn insert_usage(&self, key: &EntryKey<'_>) -> Result<()> {
        let timestamp_ms = key
            .entry
            .message
            .as_ref()
            .and_then(|message| message.timestamp_ms)
            .or(key.entry.timestamp_ms);
        for record in &key.entry.usage {
            let usage = &record.usage;
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO usage_records(entry_rowid, source, file_id, session_id, entry_id,
                         timestamp_ms, provider, model, response_id, input_tokens, output_tokens,
                         cache_read_tokens, cache_write_tokens, total_tokens, cost_input, cost_output,
                         cost_cache_read, cost_cache_write, cost_total, reasoning_tokens,
                         cache_write_1h_tokens, cost_from_provider)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                         ?18, ?19, ?20, ?21, ?22)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        key.rowid,
                        record.source,
                        key.file_id,
                        key.session_id,
                        key.entry.entry_id,
                        timestamp_ms,
                        record.provider,
                        record.model,
                        record.response_id,
                        usage.input,
                        usage.output,
                        usage.cache_read,
                        usage.cache_write,
                        usage.total,
                        usage.cost_input,
                        usage.cost_output,
                        usage.cost_cache_read,
                        usage.cost_cache_write,
                        usage.cost_total,
                        usage.reasoning,
                        usage.cache_write_1h,
                        usage.cost_from_provider,
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    fn insert_detail(&self, key: &EntryKey<'_>) -> Result<()> {
        let (sql, extra): (&str, Vec<rusqlite::types::Value>) = match &key.entry.detail {
            Detail::None => return Ok(()),
            Detail::Compaction {
                first_kept_entry_id,
                first_kept_entry_index,
                tokens_before,
                from_hook,
                short_summary: _,
            } => (
                "INSERT INTO compactions(entry_rowid, file_id, session_id, entry_id, first_kept_entry_id,
                     first_kept_entry_index, tokens_before, from_hook) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                vec![
                    first_kept_entry_id.clone().into(),
                    (*first_kept_entry_index).into(),
                    (*tokens_before).into(),
                    from_hook.map(i64::from).into(),
                ],
            ),
            Detail::BranchSummary { from_id, from_hook } => (
                "INSERT INTO branch_summaries(entry_rowid, file_id, session_id, entry_id, from_id, from_hook)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                vec![from_id.clone().into(), from_hook.map(i64::from).into()],
            ),
            Detail::Label { target_id, label } => (
                "INSERT INTO labels(entry_rowid, file_id, session_id, entry_id, target_id, label)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                vec![target_id.clone().into(), label.clone().into()],
            ),
            Detail::ModelChange {
                kind,
                provider,
                model_id,
                thinking_level,
            } => (
                "INSERT INTO model_changes(entry_rowid, file_id, session_id, entry_id, kind, provider,
                     model_id, thinking_level) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                vec![
                    kind.to_string().into(),
                    provider.clone().into(),
                    model_id.clone().into(),
                    thinking_level.clone().into(),
                ],
            ),
        };
        let mut values: Vec<rusqlite::types::Value> = vec![
            key.rowid.into(),
            key.file_id.into(),
            key.session_id.to_owned().into(),
            key.entry.entry_id.clone().into(),
        ];
        values.extend(extra);
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(rusqlite::params_from_iter(values)))
            .map_err(self.err())?;
        Ok(())
    }

    fn insert_images(&self, key: &EntryKey<'_>) -> Result<()> {
        for image in &key.entry.images {
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO blobs(hash, encoding, data) VALUES (?1, ?2, ?3)",
                )
                .and_then(|mut stmt| stmt.execute(params![image.hash, image.encoding, image.bytes]))
                .map_err(self.err())?;
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO images(entry_rowid, json_path, file_id, payload_key, mime_type,
                         byte_len, hash, payload_index) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        key.rowid,
                        image.json_path,
                        key.file_id,
                        image.key,
                        image.mime_type,
                        image.bytes.len() as i64,
                        image.hash,
                        image.key_index,
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// The entry's chunks. A chunk of a shared value (`shared`: each
    /// value's text id and whether it is new) points at that value's
    /// full-text row instead of having its own.
    fn insert_texts(&self, key: &EntryKey<'_>, shared: &[(i64, bool)]) -> Result<()> {
        for text in &key.entry.texts {
            for &(start, len) in &text.spans {
                let body = text.text.get(start..start + len).unwrap_or_default();
                let shared_text = text.shared.as_ref().and_then(|(index, inner)| {
                    shared.get(*index).map(|&(text_id, _)| (text_id, inner))
                });
                let (chunk_id, fts_rowid) = match shared_text {
                    Some((text_id, inner)) => {
                        let chunk_id = self.next_chunk_id()?;
                        let row = self.shared_fts_row(text_id, inner, (start, len), body)?;
                        (chunk_id, Some(row))
                    }
                    None => (self.next_fts_rowid(len)?, None),
                };
                self.conn
                    .prepare_cached(
                        "INSERT INTO chunks(chunk_id, entry_rowid, file_id, json_path, start, len, field_len,
                             kind, tool_name, fts_rowid)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    )
                    .and_then(|mut stmt| {
                        stmt.execute(params![
                            chunk_id,
                            key.rowid,
                            key.file_id,
                            text.json_path,
                            start as i64,
                            len as i64,
                            text.text.len() as i64,
                            text.kind,
                            text.tool_name,
                            fts_rowid,
                        ])
                    })
                    .map_err(self.err())?;
                if fts_rowid.is_none() {
                    self.queue_fts_row(chunk_id, body);
                }
                self.queue_fts_weight(fts_rowid.unwrap_or(chunk_id), text.kind);
            }
        }
        Ok(())
    }

    fn insert_error(&self, file_id: i64, path: &str, error: &LineError) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO parse_errors(file_id, file_path, line_no, byte_offset, byte_len, reason, excerpt)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    file_id,
                    path,
                    error.line_no,
                    error.byte_offset,
                    error.byte_len,
                    error.reason,
                    error.excerpt,
                ])
            })
            .map_err(self.err())?;
        Ok(())
    }
}

/// Links the sessions that name session `?3` (file `?1`, path `?2`, path
/// tail `?4`) as their parent: by its path; or, for a child not linked
/// yet, by its session id (omp's `fork()`) or a path that ends as its does
/// (a tree indexed from a copy). Those are looked for among the unlinked
/// children alone (`sessions_unlinked`, migration 0024), the path's ending
/// by the recorded path's own tail (`sessions_unlinked_tail`, migration
/// 0026): asked of every session, each session written read them all.
const LINK_CHILDREN: &str = "UPDATE sessions SET parent_session_id = ?3
     WHERE file_id <> ?1 AND file_id IN (
         SELECT file_id FROM sessions WHERE parent_session = ?2
         UNION ALL
         SELECT file_id FROM sessions INDEXED BY sessions_unlinked
          WHERE parent_session_id IS NULL AND parent_session IS NOT NULL
            AND parent_session = ?3
         UNION ALL
         SELECT file_id FROM sessions INDEXED BY sessions_unlinked_tail
          WHERE parent_session_id IS NULL AND parent_tail IS NOT NULL
            AND parent_tail = ?4)";

/// The last two components of a path (`<cwd-dir>/<file>.jsonl`) with a
/// leading `/`, for matching a parent recorded under another root.
fn path_tail(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/').filter(|part| !part.is_empty());
    let file = parts.next()?;
    let dir = parts.next()?;
    Some(format!("/{dir}/{file}"))
}

/// A path from its second-to-last `/` (the whole path when it has fewer),
/// kept as `sessions.file_tail` and `parent_tail`: it equals a tail that
/// `path_tail` makes exactly when the path ends with that tail, so the
/// index on it answers "ends with". Migration 0026 computes the same for
/// the rows already there, in SQL, trailing `/`s and all.
fn tail_key(path: &str) -> &str {
    let dir = &path[..path.rfind('/').map_or(0, |slash| slash + 1)];
    match dir.trim_end_matches('/').rfind('/') {
        Some(slash) => &path[slash..],
        None => path,
    }
}

/// `link_to_parent`'s statement: session `?1`'s parent by the path its
/// header records; else by that path's tail `?2`, the session whose own
/// tail it is (`sessions_file_tail`, migration 0026); else by a session id.
const LINK_TO_PARENT: &str = "UPDATE sessions SET parent_session_id = coalesce(
          (SELECT p.session_id FROM sessions p WHERE p.file_path = sessions.parent_session),
          (SELECT p.session_id FROM sessions p
            WHERE ?2 IS NOT NULL AND p.file_tail = ?2 AND p.file_id <> sessions.file_id
            ORDER BY p.file_id LIMIT 1),
          -- oh-my-pi's `fork()` writes the parent's session id, not its path.
          (SELECT p.session_id FROM sessions p
            WHERE instr(sessions.parent_session, '/') = 0
              AND p.session_id = sessions.parent_session AND p.file_id <> sessions.file_id
            ORDER BY p.file_id LIMIT 1))
      WHERE file_id = ?1";

/// `index_pending_messages`'s statement: the messages whose rowids the JSON
/// array `?1` lists, into `message_fts`.
///
/// - The rowids as one array: a query of the view by `entry_rowid = ?1` was
///   prepared again by SQLite at every new rowid (its plan depends on the
///   bound value), 16 % of the writer thread's time in a cold sync (perf,
///   docs/performance.md).
/// - CROSS JOIN keeps the list outermost: with a plain JOIN, SQLite scanned
///   every message of the index once per commit.
/// - No ORDER BY: the nested loop gives the rows in the list's order (the
///   rowids ascending, which spares FTS5 a flush of its pending terms), and
///   sorting them copied every message's text into a temporary b-tree.
const INDEX_MESSAGES: &str = "INSERT INTO message_fts(rowid, text, session_id, role, time)
     SELECT v.entry_rowid, v.text, v.session_id, v.role, v.time
       FROM json_each(?1) j CROSS JOIN v_message_text v ON v.entry_rowid = j.value";

/// `relink_children`'s query: the sessions linked to a parent, from
/// their own index (`sessions_parent_id`, migration 0025).
const CHILDREN_LINKED: &str =
    "SELECT file_id, parent_session FROM sessions WHERE parent_session_id = ?1";

struct EntryKey<'a> {
    rowid: i64,
    file_id: i64,
    session_id: &'a str,
    entry: &'a Entry,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::query_plan;

    /// The plan of `sql` on a new, empty index.
    fn fresh_plan(sql: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        query_plan(&writer.conn, sql)
    }

    /// The conversation goes into `message_fts` without a sort, and each
    /// message's text is read out of its entry once (`v_message_text` of
    /// migration 0027): a message held about a dozen copies of itself.
    #[test]
    fn each_message_text_is_computed_once_and_not_sorted() {
        let plan = fresh_plan(INDEX_MESSAGES);
        assert!(
            !plan.iter().any(|line| line.contains("TEMP B-TREE")),
            "{plan:#?}"
        );
        let texts = plan
            .iter()
            .filter(|line| line.starts_with("CO-ROUTINE t"))
            .count();
        assert_eq!(texts, 1, "{plan:#?}");
    }

    /// A session that loses its rows finds the children linked to it in
    /// an index, not by reading every session.
    #[test]
    fn linked_children_are_found_in_an_index() {
        let plan = fresh_plan(CHILDREN_LINKED);
        assert!(
            plan.iter()
                .any(|line| line.contains("sessions_parent_id (parent_session_id=?)")),
            "{plan:#?}"
        );
    }

    /// A session written finds its children through indexes: by its path,
    /// and among the unlinked children for the other rules, never by
    /// reading every session.
    #[test]
    fn children_are_found_without_reading_every_session() {
        let plan = fresh_plan(LINK_CHILDREN);
        assert!(
            plan.iter()
                .any(|line| line.contains("sessions_parent (parent_session=?)")),
            "{plan:#?}"
        );
        for index in [
            "sessions_unlinked (parent_session=?)",
            "sessions_unlinked_tail (parent_tail=?)",
        ] {
            assert!(
                plan.iter().any(|line| line.contains(index)),
                "{index}: {plan:#?}"
            );
        }
        assert!(
            !plan.iter().any(|line| line.starts_with("SCAN sessions")),
            "{plan:#?}"
        );
    }

    /// A session naming a parent under another root finds it by its tail
    /// in an index, not by reading every session.
    #[test]
    fn a_parent_is_found_by_its_tail_in_an_index() {
        let plan = fresh_plan(LINK_TO_PARENT);
        assert!(
            plan.iter()
                .any(|line| line.contains("sessions_file_tail (file_tail=?)")),
            "{plan:#?}"
        );
        assert!(
            !plan.iter().any(|line| line.starts_with("SCAN p")),
            "{plan:#?}"
        );
    }

    /// A path's `tail_key` is what migration 0026 computes for the rows
    /// already there, and it equals a `path_tail` exactly when the path
    /// ends with that tail (what the unindexed rule asked).
    #[test]
    fn a_tail_key_matches_the_migration_and_the_paths_ending_alike() {
        let migration = include_str!("../../migrations/0026_path_tails.sql");
        let start = migration.find("UPDATE sessions SET").unwrap();
        let update = &migration[start..start + migration[start..].find(';').unwrap()];
        let dir = tempfile::tempdir().unwrap();
        let writer = Writer::open(&dir.path().join("x.db")).unwrap();
        let paths = [
            "/home/u/.pi/agent/sessions/--home-u-p--/2026-01-01T00-00-00-000Z_a.jsonl",
            "/copy/sessions/--home-u-p--/2026-01-01T00-00-00-000Z_a.jsonl",
            "/p--/2026-01-01T00-00-00-000Z_a.jsonl",
            "/x/--home-u-p--//2026-01-01T00-00-00-000Z_a.jsonl",
            "/x//--home-u-p--/2026-01-01T00-00-00-000Z_a.jsonl",
            "/x/--home-u-p--/2026-01-01T00-00-00-000Z_a.jsonl/",
            "/x/--home-u-p--/2026-01-01T00-00-00-000Z_a.jsonl//",
            "/r/--home-u-ü--/séance.jsonl",
            "/r/a/--home-u-ü--/séance.jsonl",
            "/séance.jsonl",
            "relative/--home-u-p--/a.jsonl",
            "--home-u-p--/a.jsonl",
            "a.jsonl",
            "/",
            "",
        ];
        for (n, path) in paths.iter().enumerate() {
            writer
                .conn
                .execute(
                    "INSERT INTO sessions(file_id, session_id, file_path, cwd, version,
                                          listed_by_pi, header_raw, parent_session)
                     VALUES (?1, ?1, ?2, '/p', 3, 1, '{}', ?2)",
                    rusqlite::params![n as i64, path],
                )
                .unwrap();
        }
        writer.conn.execute(update, []).unwrap();
        for (n, path) in paths.iter().enumerate() {
            let (file_tail, parent_tail): (String, String) = writer
                .conn
                .query_row(
                    "SELECT file_tail, parent_tail FROM sessions WHERE file_id = ?1",
                    [n as i64],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap();
            assert_eq!(file_tail, tail_key(path), "{path:?}");
            assert_eq!(parent_tail, tail_key(path), "{path:?}");
            for other in paths {
                if let Some(wanted) = path_tail(other) {
                    assert_eq!(
                        tail_key(path) == wanted,
                        path.ends_with(&wanted),
                        "{path:?} against {wanted:?}"
                    );
                }
            }
        }
    }
}
