//! pi_agent_rust's SQLite session files (`session_store = "sqlite"`): a
//! `<ts>_<id8>.sqlite` with `pi_session_header(id, json)` and
//! `pi_session_entries(seq, json)` holding the same JSON as its JSONL lines
//! (the port's `src/session_sqlite.rs`). Read here, read-only, as the lines
//! of the equivalent JSONL file: the header, then the entries by `seq`. The
//! port replaces the whole content in one transaction per save, so a file
//! that changed is read again from its start, row by row.
//!
//! Images and media over 64 KiB are not in the entries' JSON: a block's
//! `data` is `{"$piBlob":"sha256:<hex>",…}` and the bytes are a row of the
//! same file's `pi_session_blobs(digest, byte_length, data)` (the port's
//! `session_sqlite/attachments.rs`; JSONL sessions keep them in
//! `<file>.blobs/` instead). `blob_len` and `blob` read them, read-only.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::read::Line;

/// Why a `.sqlite` file is not read as a session.
#[derive(Debug, thiserror::Error)]
pub enum PortSqliteError {
    #[error("not a pi_agent_rust session database (no pi_session_header / pi_session_entries)")]
    NotASession,
    #[error("cannot read or write the SQLite file")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot put the written SQLite file in place")]
    Write(#[source] std::io::Error),
}

/// The file name of the port's session index, which holds no session.
pub const SESSION_INDEX: &str = "session-index.sqlite";

/// Hands `take` the session's lines one at a time, as the JSONL reader
/// (`read::LineReader`) does a file's, at the offsets of the JSONL
/// equivalent (a newline after each; the port's JSON has none in it): the
/// header's JSON, then every entry's in `seq` order; stops early when
/// `take` returns false. Memory is bounded by the longest line under
/// `max_line`, not by the session.
///
/// The file is anyone's: a table with a column computed when read (a
/// generated column, say `printf('%.*c', 1e9, 'x')`) is not the port's and
/// is not read, and the connection trusts nothing in the schema.
pub fn each_line(
    path: &Path,
    max_line: usize,
    take: &mut dyn FnMut(Line<'_>) -> bool,
) -> Result<(), PortSqliteError> {
    let conn = open_read_only(path)?;
    let (tables, computed): (i64, i64) = conn.query_row(
        "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table'
                    AND name IN ('pi_session_header', 'pi_session_entries')),
                (SELECT count(*) FROM pragma_table_xinfo('pi_session_header') WHERE hidden <> 0)
              + (SELECT count(*) FROM pragma_table_xinfo('pi_session_entries') WHERE hidden <> 0)",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    if tables != 2 || computed != 0 {
        return Err(PortSqliteError::NotASession);
    }
    let cap = i64::try_from(max_line).unwrap_or(i64::MAX);
    let mut offset = 0u64;
    // The length comes from the record header; the text is read only
    // when it is under the cap.
    for rows_from in [
        "pi_session_header LIMIT 1",
        "pi_session_entries ORDER BY seq ASC",
    ] {
        let mut stmt = conn.prepare(&format!(
            "SELECT octet_length(json),
                    CASE WHEN octet_length(json) <= ?1 THEN CAST(json AS BLOB) END
               FROM {rows_from}"
        ))?;
        let mut rows = stmt.query([cap])?;
        while let Some(row) = rows.next()? {
            // NULL (no JSON at all) reads as an empty line.
            let len = row
                .get::<_, Option<i64>>(0)?
                .map_or(0, |len| u64::try_from(len).unwrap_or(0));
            let line = match row.get_ref(1)? {
                ValueRef::Blob(bytes) => Line::Text {
                    offset,
                    bytes,
                    terminated: true,
                },
                _ if len > 0 => Line::Oversized {
                    offset,
                    len,
                    terminated: true,
                },
                _ => Line::Text {
                    offset,
                    bytes: b"",
                    terminated: true,
                },
            };
            if !take(line) {
                return Ok(());
            }
            offset += len + 1;
        }
    }
    Ok(())
}

/// The length of the attachment `sha256:<hex>` kept in the SQLite session
/// at `path`, or `None` when the file, its `pi_session_blobs` table or the
/// row is not there.
pub fn blob_len(path: &Path, hex: &str) -> Option<u64> {
    let conn = open_read_only(path).ok()?;
    conn.query_row(
        "SELECT length(data) FROM pi_session_blobs
          WHERE digest = ?1 AND typeof(data) = 'blob' LIMIT 1",
        [format!("sha256:{hex}")],
        |row| row.get::<_, i64>(0),
    )
    .ok()
    .and_then(|len| u64::try_from(len).ok())
}

/// The bytes of the attachment `sha256:<hex>` kept in the SQLite session at
/// `path`, or `None` (see `blob_len`).
pub fn blob(path: &Path, hex: &str) -> Option<Vec<u8>> {
    let conn = open_read_only(path).ok()?;
    conn.query_row(
        "SELECT data FROM pi_session_blobs
          WHERE digest = ?1 AND typeof(data) = 'blob' LIMIT 1",
        [format!("sha256:{hex}")],
        |row| row.get::<_, Vec<u8>>(0),
    )
    .ok()
}

/// A connection to a file anyone may have written: read-only, and no
/// function with side effects run from its schema (`trusted_schema`).
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA,
        false,
    )?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    Ok(conn)
}

/// A session in pi_agent_rust's SQLite format, to be written by
/// `write_port_session`.
#[derive(Debug, Clone, Default)]
pub struct PortSession {
    /// The header's `id` (`pi_session_header.id`) and JSON.
    pub id: String,
    pub header: String,
    /// Every entry's JSON, in order (`seq` 1, 2, …), attachments as
    /// `$piBlob` references.
    pub entries: Vec<String>,
    /// The referenced attachments: `sha256:<hex>` and bytes.
    pub blobs: Vec<(String, Vec<u8>)>,
    /// `pi_session_meta`: `message_count` and `name` (the port writes
    /// `name` only when the session has one).
    pub message_count: u64,
    pub name: Option<String>,
}

/// The port's tables (`session_sqlite.rs` `INIT_SQL`, and
/// `session_sqlite/attachments.rs` `INIT_BLOBS` when there are attachments).
const PORT_SCHEMA: &str = "
PRAGMA journal_mode = WAL;
CREATE TABLE IF NOT EXISTS pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
const PORT_BLOBS: &str = "CREATE TABLE IF NOT EXISTS pi_session_blobs (digest TEXT PRIMARY KEY NOT NULL, byte_length INTEGER NOT NULL, data BLOB NOT NULL)";

/// Writes `session` as a new pi_agent_rust SQLite session file at `path`
/// (replacing what is there once it is complete: written beside it, then
/// renamed over it).
pub fn write_port_session(path: &Path, session: &PortSession) -> Result<(), PortSqliteError> {
    let partial = path.with_extension("sqlite.partial");
    let _ = std::fs::remove_file(&partial);
    {
        let mut conn = Connection::open(&partial)?;
        conn.execute_batch(PORT_SCHEMA)?;
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO pi_session_header (id, json) VALUES (?1, ?2)",
            [&session.id, &session.header],
        )?;
        for (seq, entry) in session.entries.iter().enumerate() {
            tx.execute(
                "INSERT INTO pi_session_entries (seq, json) VALUES (?1, ?2)",
                rusqlite::params![seq as i64 + 1, entry],
            )?;
        }
        if !session.blobs.is_empty() {
            tx.execute_batch(PORT_BLOBS)?;
            for (digest, bytes) in &session.blobs {
                tx.execute(
                    "INSERT OR IGNORE INTO pi_session_blobs (digest, byte_length, data)
                     VALUES (?1, ?2, ?3)",
                    rusqlite::params![digest, bytes.len() as i64, bytes],
                )?;
            }
        }
        tx.execute(
            "INSERT INTO pi_session_meta (key, value) VALUES ('message_count', ?1)",
            [session.message_count.to_string()],
        )?;
        if let Some(name) = &session.name {
            tx.execute(
                "INSERT INTO pi_session_meta (key, value) VALUES ('name', ?1)",
                [name],
            )?;
        }
        tx.commit()?;
        // Closing the last connection checkpoints the WAL into the file.
        conn.close().map_err(|(_, err)| err)?;
    }
    std::fs::rename(&partial, path).map_err(PortSqliteError::Write)?;
    Ok(())
}
