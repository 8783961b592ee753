//! Stage 5 and 6: the SQLite database. The only module that speaks SQL.
//!
//! Two handles, so that "one writer" is a fact of the types: `Writer::open`
//! opens read-write, refuses databases that are not piidx's or are newer
//! than this build, and upgrades older ones in place; only `sync` (and the
//! commands that hold its lock) has one. `Index::open` is every query
//! command's: it never writes, so it works while a sync runs (WAL) and on
//! read-only media.

mod check;
mod copies;
mod fts;
mod functions;
mod guard;
pub mod lengths;
mod machine;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod port_sqlite;
mod profile;
mod push_source;
pub mod rank;
mod redaction;
mod restore;
mod roots;
mod schema;
mod shard_readers;
mod shared;
mod state;
mod stop;
mod subagents;
pub mod tokenizer;
pub mod weights;
mod write;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

pub use check::{FileCounts, Identity, unfinished_writes};
pub use fts::{
    ShardConfig, attach_one_shard, attach_shards, default_shards, remove_database, shard_path,
    shard_schema,
};
pub use functions::register as register_functions;
pub use guard::Refusals;
pub use machine::{Machine, host_name};
pub use push_source::{PushFile, PushTable};
pub use redaction::RedactionState;
pub use restore::{entries_mention, restore_entry, shared_values, stored_images};
pub use roots::{RootInfo, remembered};
pub use schema::SCHEMA_VERSION;
pub use shard_readers::{ShardReadError, ShardReaders, Started};
pub use state::{FileStat, FileState};
pub use stop::{Stop, Watching, is_interrupt};
pub use subagents::{ArtifactRow, ArtifactState};
pub use write::WriteStats;

/// `PRAGMA application_id` of piidx databases ("piix").
pub const APPLICATION_ID: i64 = 0x7069_6978;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path} is not a piidx database (it has other tables); pass --db with another path")]
    Foreign { path: PathBuf },
    #[error(
        "{path} was written by a newer piidx (schema {found}, this build knows up to {known}); upgrade piidx or pass --db with another path"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("no piidx database at {path}; run `piidx sync` first (or pass --db)")]
    Missing { path: PathBuf },
    #[error(
        "{path} has schema {found} but this piidx needs {known}; run `piidx sync` to upgrade it"
    )]
    TooOld {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("cannot make a redaction key for {path} (from /dev/urandom)")]
    RedactionKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot create the directory for {path}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a SQLite database (or its header is destroyed); pass --db with another path, or run `piidx doctor --fix` to rebuild it (the old file is kept)"
    )]
    NotADatabase { path: PathBuf },
    #[error("{path} is damaged (run `piidx doctor --fix` to rebuild it; the old file is kept)")]
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "{path} is read-only (the file, its directory or the file system); make it writable or pass --db with another path; the index is unchanged"
    )]
    ReadOnly { path: PathBuf },
    #[error(
        "{path} holds the unfinished write of a piidx that was killed (its journal must be rolled back), and this user may not write it; run `piidx sync` or `piidx doctor --fix` as a user who may"
    )]
    NeedsRecovery { path: PathBuf },
    #[error("{path} was deleted or replaced while piidx was writing it; run the command again")]
    Moved { path: PathBuf },
    #[error(
        "disk full writing {path}: free space and re-run; the index keeps only what was committed before (it is consistent)"
    )]
    DiskFull { path: PathBuf },
    #[error(
        "cannot open {path} (check that the path and its directory exist and are accessible, or pass --db with another path)"
    )]
    CannotOpen {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("full-text shard {path}: {message}")]
    Shard { path: PathBuf, message: String },
    #[error(
        "the full-text shard {path} is missing, out of date or belongs to another database; run `piidx sync` to rebuild it"
    )]
    ShardMissing { path: PathBuf },
    #[error("{path}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The read handle of an index: every query command's. It never writes
/// (a hot journal aside, see `recovering`), so it works while a sync runs
/// (WAL) and on read-only media.
pub struct Index {
    conn: Connection,
    path: PathBuf,
    /// Opened with `immutable=1` (read-only media).
    immutable: bool,
}

impl Index {
    /// Opens an existing, current database without ever writing to it.
    pub fn open(path: &Path) -> Result<Self> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_owned(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let opened = recovering(|| {
            Connection::open_with_flags(path, flags)
                .map_err(sqlite_error(path))
                .and_then(|conn| {
                    let index = Index {
                        conn,
                        path: path.to_owned(),
                        immutable: false,
                    };
                    index.configure()?;
                    schema::check_readable(&index.conn, path)?;
                    Ok(index)
                })
        });
        match opened {
            Err(StoreError::CannotOpen { .. }) if !with_suffix(path, "-wal").exists() => {
                Self::open_immutable(path)
            }
            other => other,
        }
    }

    /// On read-only media SQLite cannot create the `-shm` file a WAL
    /// database needs; with no `-wal` present nobody can be writing, so the
    /// file is opened as immutable.
    fn open_immutable(path: &Path) -> Result<Self> {
        let uri = format!("file:{}?immutable=1", uri_path(path));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(uri, flags).map_err(sqlite_error(path))?;
        let index = Index {
            conn,
            path: path.to_owned(),
            immutable: true,
        };
        index.configure()?;
        schema::check_readable(&index.conn, path)?;
        Ok(index)
    }

    fn configure(&self) -> Result<()> {
        self.conn
            .busy_timeout(Duration::from_secs(10))
            .map_err(sqlite_error(&self.path))?;
        functions::register(&self.conn).map_err(sqlite_error(&self.path))?;
        self.conn
            .execute_batch(
                "PRAGMA query_only = 1; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -32768;",
            )
            .map_err(sqlite_error(&self.path))
    }

    /// Attaches the database at `path` read-only, as `idx`, to `conn`, whose
    /// main database is another (a search's extra connection, in memory):
    /// its tables are then found by their plain names. On read-only media
    /// as `open` opens it.
    pub fn attach_to(conn: &Connection, path: &Path) -> Result<()> {
        functions::register(conn).map_err(sqlite_error(path))?;
        let attach = |mode: &str| -> Result<()> {
            conn.execute(
                "ATTACH DATABASE ?1 AS idx",
                [format!("file:{}?{mode}", uri_path(path))],
            )
            .and_then(|_| {
                // The schema (and a WAL's `-shm`) is read on first use.
                conn.query_row("SELECT count(*) FROM idx.sqlite_schema", [], |_| Ok(()))
            })
            .map_err(sqlite_error(path))
        };
        let attached = attach("mode=ro").or_else(|err| match err {
            StoreError::NeedsRecovery { path } => {
                let _ = conn.execute("DETACH DATABASE idx", []);
                roll_back(&path)?;
                attach("mode=ro")
            }
            other => Err(other),
        });
        match attached {
            Err(StoreError::CannotOpen { .. }) if !with_suffix(path, "-wal").exists() => {
                // The ATTACH itself may have failed (then there is no `idx`).
                let _ = conn.execute("DETACH DATABASE idx", []);
                attach("immutable=1")
            }
            other => other,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for the query modules (they only read); not part
    /// of the library's interface: front-ends ask `query`, never SQLite.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Stops the running statement (with `SQLITE_INTERRUPT`) as soon as
    /// `stop` returns true; SQLite asks every few thousand steps.
    pub fn interrupt_when(&mut self, stop: impl FnMut() -> bool + Send + 'static) -> Result<()> {
        self.conn
            .progress_handler(4096, Some(stop))
            .map_err(sqlite_error(&self.path))
    }

    /// Runs `read` in one read transaction. Each statement on its own reads
    /// the database as it is then; inside, all of them read one snapshot, so
    /// a sync that commits meanwhile (say, removing the session just looked
    /// up) is not seen at all.
    pub fn in_snapshot<T, E: From<rusqlite::Error>>(
        &self,
        read: impl FnOnce(&Index) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let snapshot = self.conn.unchecked_transaction()?;
        let result = read(self)?;
        snapshot.commit()?;
        Ok(result)
    }

    /// How the full-text index is split; `None` before the first sync.
    pub fn shard_config(&self) -> Result<Option<ShardConfig>> {
        fts::read_shard_config(&self.conn).map_err(sqlite_error(&self.path))
    }

    /// Attaches the full-text shards to this connection and returns their
    /// schema names (`fts0`, `fts1`, ...).
    pub fn attach_fts(&self) -> Result<Vec<String>> {
        let config = self
            .shard_config()?
            .ok_or_else(|| StoreError::ShardMissing {
                path: shard_path(&self.path, 0),
            })?;
        attach_shards(&self.conn, &self.path, &config, self.immutable)
    }

    pub(crate) fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        sqlite_error(&self.path)
    }
}

/// Prepared statements the writer keeps (`Writer::open`).
const WRITER_STATEMENTS: usize = 128;

/// The one writer of an index, for `sync` (and `doctor --fix`, `roots
/// --forget`, which hold the sync lock too): it owns the transaction, the
/// queue of full-text rows for the shards and their writer threads.
pub struct Writer {
    conn: Connection,
    path: PathBuf,
    /// Chunks of the open transaction: the shards get them after commit.
    pending_fts: RefCell<Vec<fts::FtsRow>>,
    /// Rows deleted in the open transaction, with their text (to delete
    /// them from the contentless shards).
    pending_deletes: RefCell<Vec<fts::FtsRow>>,
    /// Weights of the open transaction's chunks (`weights`), for the
    /// shards after commit.
    pending_weights: RefCell<Vec<(i64, weights::Weight)>>,
    /// The next chunk id to hand out; 0 until read from the database.
    next_chunk_id: Cell<i64>,
    /// Writer threads of the full-text shards, during a sync.
    shards: RefCell<Option<fts::ShardWriters>>,
    /// The shard writers once their input is closed (`close_fts`), until
    /// `finish_fts` waits for them.
    closed_shards: RefCell<Option<fts::ShardWriters>>,
    /// Rows were deleted since the handle opened: `scrub_wal` has work.
    deleted_rows: Cell<bool>,
    /// Artifact text left `artifact_fts`: `purge_artifact_text` has work.
    artifact_text_deleted: Cell<bool>,
    /// Entries of the open transaction whose message goes into
    /// `message_fts` at its end.
    pending_messages: RefCell<Vec<i64>>,
    /// Message text left `message_fts`: `purge_artifact_text` has work.
    message_text_deleted: Cell<bool>,
    /// `message_fts` was emptied for a full re-read (`empty_message_text`):
    /// no file's messages are deleted from it one by one.
    message_text_emptied: Cell<bool>,
    /// The files whose rows the subagent links depend on that this writer
    /// changed since it last derived them (`mark_links_stale`).
    link_scope: RefCell<subagents::LinkScope>,
    /// The triggers note the keys each commit recounts the copies of
    /// (`copies.rs`); off during a first load, which counts them at its end.
    copies_tracked: Cell<bool>,
    /// `PIIDX_SQL_PROFILE`: the statements' times, written when it closes.
    _sql_profile: Option<profile::SqlProfile>,
}

impl Writer {
    fn wrap(conn: Connection, path: &Path) -> Writer {
        Writer {
            conn,
            path: path.to_owned(),
            pending_fts: Default::default(),
            pending_weights: Default::default(),
            pending_deletes: Default::default(),
            next_chunk_id: Cell::new(0),
            shards: Default::default(),
            closed_shards: Default::default(),
            deleted_rows: Cell::new(false),
            artifact_text_deleted: Cell::new(false),
            message_text_deleted: Cell::new(false),
            message_text_emptied: Cell::new(false),
            pending_messages: Default::default(),
            link_scope: Default::default(),
            copies_tracked: Cell::new(false),
            _sql_profile: None,
        }
    }

    /// Opens (creating if needed) and migrates the database for writing.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: path.to_owned(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(sqlite_error(path))?;
        // A batch runs about 60 distinct cached statements (entries, their
        // rows, shared texts, runs, chunks); rusqlite keeps 16, so most were
        // prepared again at every entry (a tenth of the writer thread in a
        // cold sync, docs/performance.md).
        conn.set_prepared_statement_cache_capacity(WRITER_STATEMENTS);
        // One plan per statement, whatever its parameters: SQLite otherwise
        // marks a statement whose plan looked at a bound value to be
        // prepared again whenever that value changes, and the parent link
        // (`LINK_TO_PARENT`) was prepared again for every session written.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )
        .map_err(sqlite_error(path))?;
        functions::register(&conn).map_err(sqlite_error(path))?;
        let mut writer = Writer::wrap(conn, path);
        writer._sql_profile = profile::SqlProfile::from_env(&mut writer.conn);
        schema::check_identity(&writer.conn, path)?;
        writer.configure()?;
        schema::migrate(&mut writer.conn, path)?;
        writer.track_copies()?;
        Ok(writer)
    }

    /// `secure_delete`: what a deletion frees is overwritten with zeros, so
    /// the text of a deleted session (or of a secret in it) does not live on
    /// in free pages; `scrub_wal` takes it out of the WAL too.
    fn configure(&self) -> Result<()> {
        self.conn
            .busy_timeout(Duration::from_secs(10))
            .map_err(sqlite_error(&self.path))?;
        self.conn
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY; PRAGMA secure_delete = ON;
                 PRAGMA cache_size = -16384; PRAGMA journal_size_limit = 67108864; PRAGMA foreign_keys = OFF;",
            )
            .map_err(sqlite_error(&self.path))
    }

    /// A first sync only appends to an empty file. WAL writes every page
    /// twice (to the log, then back at checkpoint); a rollback journal copies
    /// only the pages that existed before each transaction, here almost none.
    /// Measured on a 1 GB cold sync: a third less system time, 5 % less wall
    /// time. Nobody reads an empty index, so WAL's non-blocking readers are
    /// not missed meanwhile. `synchronous = FULL` because in rollback mode
    /// `NORMAL` may lose the file on power loss; a bulk load commits rarely
    /// enough not to feel the extra fsync. `meta.bulk_load` stays until the
    /// load has finished, so that a first sync cut short is resumed the same
    /// way (in WAL mode it took twice as long). The load neither tracks nor
    /// indexes the keys of fork copies (`stop_tracking_copies`).
    pub fn begin_bulk_load(&self) -> Result<()> {
        self.begin()?;
        self.conn
            .execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('bulk_load', '1')",
                [],
            )
            .map_err(self.err())?;
        self.stop_tracking_copies()?;
        self.conn.execute_batch("COMMIT").map_err(self.err())?;
        self.set_journal_mode("DELETE", "FULL")
    }

    /// A first sync (`begin_bulk_load`) was cut short.
    pub fn bulk_load_unfinished(&self) -> Result<bool> {
        self.conn
            .query_row("SELECT 1 FROM meta WHERE key = 'bulk_load'", [], |_| Ok(()))
            .optional()
            .map(|found| found.is_some())
            .map_err(self.err())
    }

    /// Back to WAL after `begin_bulk_load` (a sync that fails on the way gets
    /// there the next time the file is opened for writing); then, in one
    /// transaction, the fork copies counted (`count_copies_after_load`) and
    /// the load is over.
    pub fn end_bulk_load(&self) -> Result<()> {
        self.set_journal_mode("WAL", "NORMAL")?;
        self.begin()?;
        self.count_copies_after_load()?;
        self.conn
            .execute("DELETE FROM meta WHERE key = 'bulk_load'", [])
            .map_err(self.err())?;
        self.conn.execute_batch("COMMIT").map_err(self.err())
    }

    /// After rows were deleted: the WAL still holds the pages as they were
    /// before (the deleted text in them) until it is overwritten. Copies it
    /// into the database and truncates it. Best effort, without waiting: a
    /// reader that holds an old snapshot keeps the WAL until the next sync.
    pub fn scrub_wal(&self) -> Result<()> {
        if !self.deleted_rows.get() {
            return Ok(());
        }
        let err = sqlite_error(&self.path);
        self.conn.busy_timeout(Duration::ZERO).map_err(&err)?;
        let done = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            });
        self.conn
            .busy_timeout(Duration::from_secs(10))
            .map_err(&err)?;
        match done {
            Ok(_) => Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                Ok(())
            }
            Err(other) => Err(classify(&self.path, other)),
        }
    }

    /// Best effort: leaving or entering WAL needs the file to itself, so if a
    /// reader holds it past the busy timeout the current mode stays.
    fn set_journal_mode(&self, mode: &str, synchronous: &str) -> Result<()> {
        let switched =
            self.conn
                .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |_| Ok(()));
        match switched {
            Ok(()) => {}
            Err(rusqlite::Error::SqliteFailure(err, _))
                if err.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                return Ok(());
            }
            Err(err) => return Err(classify(&self.path, err)),
        }
        self.conn
            .execute_batch(&format!("PRAGMA synchronous = {synchronous}"))
            .map_err(sqlite_error(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the full-text index is split; `None` before the first sync.
    pub fn shard_config(&self) -> Result<Option<ShardConfig>> {
        fts::read_shard_config(&self.conn).map_err(sqlite_error(&self.path))
    }

    pub(crate) fn err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        sqlite_error(&self.path)
    }

    /// The temporary table `temp.<table>(path)` holds exactly `paths`: a
    /// set that statements join on (`<col> IN temp.<table>`).
    fn fill_temp_paths<'a>(
        &self,
        table: &str,
        paths: impl IntoIterator<Item = &'a String>,
    ) -> Result<()> {
        self.conn
            .execute_batch(&format!(
                "CREATE TEMP TABLE IF NOT EXISTS {table}(path TEXT PRIMARY KEY);
                 DELETE FROM temp.{table};"
            ))
            .map_err(self.err())?;
        let mut insert = self
            .conn
            .prepare_cached(&format!(
                "INSERT OR IGNORE INTO temp.{table}(path) VALUES (?1)"
            ))
            .map_err(self.err())?;
        for path in paths {
            insert.execute([path]).map_err(self.err())?;
        }
        Ok(())
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A path for a `file:` URI: `%`, `?` and `#` (and non-ASCII bytes) escaped.
pub(super) fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Runs `open`; when it meets the journal or write-ahead log of a writer
/// that was killed (which a read-only connection cannot roll back), rolls it
/// back and runs `open` again.
fn recovering<T>(open: impl Fn() -> Result<T>) -> Result<T> {
    match open() {
        Err(StoreError::NeedsRecovery { path }) => {
            roll_back(&path)?;
            open()
        }
        other => other,
    }
}

/// Lets SQLite roll back a hot journal (or recover a WAL): it does so on the
/// first read of a connection that may write. When the file is not writable
/// for this user, the connection is read-only and the error stays.
pub(crate) fn roll_back(path: &Path) -> Result<()> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(sqlite_error(path))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(sqlite_error(path))?;
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
        .map_err(sqlite_error(path))
}

/// Whether the database on `conn` has table `name` (a shard's tables
/// added by later layouts: `lengths`, `weights`).
fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get(0),
    )
}

fn sqlite_error(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| classify(path, source)
}

/// Turns the SQLite result codes a user can act on into messages that say
/// what to do; everything else keeps SQLite's own text.
fn classify(path: &Path, source: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    let path = path.to_owned();
    let (code, extended) = match &source {
        rusqlite::Error::SqliteFailure(err, _) => (Some(err.code), err.extended_code),
        _ => (None, 0),
    };
    match extended {
        rusqlite::ffi::SQLITE_READONLY_ROLLBACK | rusqlite::ffi::SQLITE_READONLY_RECOVERY => {
            return StoreError::NeedsRecovery { path };
        }
        rusqlite::ffi::SQLITE_READONLY_DBMOVED => return StoreError::Moved { path },
        _ => {}
    }
    match code {
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase { path },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path, source },
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path },
        Some(ErrorCode::DiskFull) => StoreError::DiskFull { path },
        Some(ErrorCode::CannotOpen) => StoreError::CannotOpen { path, source },
        _ => StoreError::Sqlite { path, source },
    }
}

impl StoreError {
    /// The database file is damaged or not SQLite at all: `doctor --fix`
    /// rebuilds it; anything else is left alone.
    pub fn is_broken_database(&self) -> bool {
        matches!(
            self,
            StoreError::NotADatabase { .. } | StoreError::Corrupt { .. }
        )
    }
}

/// The plan SQLite makes for `sql` (`EXPLAIN QUERY PLAN`), one line a
/// step, for the tests that keep a statement on its indexes.
#[cfg(test)]
pub(crate) fn query_plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    // Parameters, if any, as NULL: the plan does not depend on them.
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    stmt.query_map(rusqlite::params_from_iter(nulls), |row| row.get(3))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The first table a `query_plan` reads: its outermost loop.
#[cfg(test)]
pub(crate) fn first_loop(plan: &[String]) -> &str {
    plan.iter()
        .find(|line| line.starts_with("SEARCH") || line.starts_with("SCAN"))
        .map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_deleted_under_a_writer_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let err = conn.execute("INSERT INTO t VALUES (2)", []).unwrap_err();
        assert!(matches!(classify(&path, err), StoreError::Moved { .. }));
    }
}
