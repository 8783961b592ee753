//! The full-text indexes, split over shard files next to the main database
//! (`<db>.fts0`, `<db>.fts1`, ...), each written by its own thread during a
//! sync and attached read-only for queries. A shard holds the word index
//! (`fts`, unicode61) of its chunks and the trigram index (`fts_trigram`) of
//! those in scripts written without spaces.
//!
//! Why shards: one SQLite writer tokenises and indexes about 30 MB/s of
//! JSONL on a 2-core machine, and FTS5 is most of a cold sync; each file has
//! its own writer, so N shards index in parallel (docs/performance.md).
//! Chunk `id` lives in shard `id % N`; the writer skips ids to keep the
//! text given to each shard even (`ShardWriters::balance`).
//!
//! Consistency: the main database is the record. The main writer commits a
//! transaction first and only then hands its chunks to the shards, so a
//! shard never holds a row the main database has not committed. Each shard
//! stores, in the same transaction as its rows, the highest chunk id it has
//! caught up to (`indexed_upto`). Chunk ids are never reused
//! (`fts_shards.last_chunk_id`), so after a crash between the two commits the
//! next sync indexes every chunk above a shard's mark and deals with the
//! deletions still listed in `fts_deletes` (below).
//!
//! Deletion without `contentless_delete`: that option needs SQLite 3.43, and
//! the shard files must open in the `sqlite3` distributions ship (3.37 and
//! later; docs/schema.md). A contentless FTS5 table of older SQLite forgets a
//! row only through its `'delete'` command, given the text the row was
//! indexed with. The main writer reads that text from `entries.raw` (or the
//! shared text) before the chunk's rows go, exactly as the catch-up reads it
//! to index, and sends it with the deletion. A deletion logged in
//! `fts_deletes` but not applied when a sync was cut short has no text left
//! to delete with: the next sync rebuilds that shard instead (rare: a kill
//! between the two commits, or a reader that held the shard).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use rusqlite::{Connection, OptionalExtension, params};

use super::weights::Weight;
use super::{Result, StoreError, Writer, sqlite_error, uri_path, with_suffix};
use crate::normalize::CHUNK_BYTES;

/// `PRAGMA application_id` of shard files ("piis").
const SHARD_APPLICATION_ID: i64 = 0x7069_6973;

/// `PRAGMA user_version` of shard files with this layout; a shard of
/// another version is replaced and indexed again. Version 1 had no
/// `fts_trigram`; version 2 declared both tables `contentless_delete = 1`,
/// which SQLite before 3.43 refuses to open; version 3 was not
/// `auto_vacuum = INCREMENTAL` (see `reclaim`).
const SHARD_VERSION: i64 = 4;

const SHARD_SCHEMA: &str = "
CREATE TABLE shard(
  db_id        TEXT NOT NULL,    -- fts_shards.db_id of the main database
  shard        INTEGER NOT NULL, -- this file holds chunk ids with id % shards = shard
  shards       INTEGER NOT NULL,
  indexed_upto INTEGER NOT NULL, -- every such chunk id <= this is indexed
  purge_pending INTEGER NOT NULL DEFAULT 0 -- rows were deleted; see `purge`
);
CREATE VIRTUAL TABLE fts USING fts5(
  body,
  content = '',
  tokenize = 'unicode61 remove_diacritics 2'
);
-- Only chunks with characters of scripts written without spaces (CJK, Thai,
-- ...), which unicode61 cannot split into words (docs/search.md).
CREATE VIRTUAL TABLE fts_trigram USING fts5(
  body,
  content = '',
  tokenize = 'trigram'
);
-- FTS5 writes its in-memory buffer as a new segment whenever it exceeds
-- `hashsize` (default 1 MB), and at every commit. A larger buffer's hash
-- table and its sort at each flush miss the CPU's caches (with 16 MB a cold
-- sync took 1.18x the CPU of 2 MB, and 50 MiB more RSS); a smaller one
-- leaves more segments, and a query reads each (at 4 GB, 2 MB made a rare
-- word's search 1.37x slower than 16 MB). 4 MB costs the CPU of 2 MB and
-- the searches of 16 MB within a few percent (docs/performance.md).
-- A shard made with another size keeps it.
INSERT INTO fts(fts, rank) VALUES ('hashsize', 4194304);
INSERT INTO fts_trigram(fts_trigram, rank) VALUES ('hashsize', 4194304);
-- FTS5 writes leaves of about `pgsz` bytes (default 4050, one 4 KB page),
-- each a row of `fts_data`. The shard's pages are 16 KB (`SHARD_PAGE_SIZE`)
-- and its leaves as large: a quarter of the rows, pages and write calls,
-- less CPU for a load, no slower searches (docs/performance.md). The
-- margin below the page is FTS5's own.
INSERT INTO fts(fts, rank) VALUES ('pgsz', 16338);
INSERT INTO fts_trigram(fts_trigram, rank) VALUES ('pgsz', 16338);
";

/// A new shard's page size (see `pgsz` in `SHARD_SCHEMA`). A shard made
/// with 4 KB pages keeps them, and its leaves FTS5's default size.
const SHARD_PAGE_SIZE: i64 = 16384;

/// The shard's tables beyond `SHARD_SCHEMA`'s, which a shard of this
/// layout may lack (written by an earlier piidx) and which the writer adds.
fn add_later_tables(conn: &Connection, shards: usize) -> rusqlite::Result<()> {
    add_purge_column(conn)?;
    super::lengths::add_missing(conn, shards as i64)
}

/// Adds the weights table to a shard written before it existed, with the
/// weight of every chunk of the main file whose row the shard holds, in
/// one transaction: a shard has its weights table only with all of them.
fn add_weights(
    conn: &Connection,
    main: &Connection,
    shard: usize,
    shards: usize,
) -> rusqlite::Result<()> {
    if super::has_table(conn, "weights")? {
        return Ok(());
    }
    let weights = super::weights::of_chunks(main, shard, shards, i64::MAX)?;
    conn.execute_batch(&format!("BEGIN IMMEDIATE; {}", super::weights::CREATE_SQL))?;
    super::weights::raise(conn, shards as i64, &weights)?;
    conn.execute_batch("COMMIT")
}

/// The index text sent to the shards per message (the main writer commits
/// every ~32 MB of input, and the catch-up sends the same amount).
const CATCH_UP_BYTES: usize = 32 << 20;

/// How the full-text index is split, as recorded in the main database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    pub shards: usize,
    pub db_id: String,
    pub last_chunk_id: i64,
}

/// The file of shard `shard`: `<db>.fts<shard>`.
pub fn shard_path(db: &Path, shard: usize) -> PathBuf {
    with_suffix(db, &format!(".fts{shard}"))
}

/// The schema name under which `attach_shards` attaches shard `shard`.
pub fn shard_schema(shard: usize) -> String {
    format!("fts{shard}")
}

/// Shards used when a database is created: one per core, at most 8.
pub fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8))
}

/// Deletes a database file, its shard files, and every journal, log and
/// shared-memory file of each (best effort: what cannot go stays).
pub fn remove_database(db: &Path) {
    let _ = remove_shard_file(db);
    for shard in 0.. {
        let path = shard_path(db, shard);
        let any = ["", "-wal", "-shm", "-journal"]
            .iter()
            .any(|suffix| with_suffix(&path, suffix).exists());
        if !any {
            break;
        }
        let _ = remove_shard_file(&path);
        for left in leftovers(db, shard) {
            let _ = remove_shard_file(&left);
        }
    }
}

/// Deletes a shard file with its `-journal` (and a `-wal` or `-shm`).
fn remove_shard_file(path: &Path) -> std::io::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        match std::fs::remove_file(with_suffix(path, suffix)) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
    }
    Ok(())
}

/// Where `start_fts_anew` writes shard `shard` of a full re-read.
fn anew_path(db: &Path, shard: usize) -> PathBuf {
    with_suffix(&shard_path(db, shard), ".new")
}

/// Where `purge` copies the shard at `shard`.
fn purged_path(shard: &Path) -> PathBuf {
    with_suffix(shard, ".purged")
}

/// The files a sync killed on its way may leave beside shard `shard`.
fn leftovers(db: &Path, shard: usize) -> [PathBuf; 3] {
    [
        anew_path(db, shard),
        purged_path(&shard_path(db, shard)),
        purged_path(&anew_path(db, shard)),
    ]
}

/// `remove_shard_file`, its error naming the file.
fn remove_file_of(path: &Path) -> Result<()> {
    remove_shard_file(path).map_err(|source| StoreError::Shard {
        path: path.to_owned(),
        message: source.to_string(),
    })
}

/// Puts the shard file at `new` (written anew, or a purged copy) in the
/// place of the one at `old`.
/// A rollback journal left hot by a writer that died belongs to the old
/// file: it is played back into that file (SQLite does so when it first
/// reads it) before the rename, or it would be played into the new one.
/// Readers that have the old file open keep reading it; the next to open
/// the path get the new one.
fn replace_shard(new: &Path, old: &Path) -> Result<()> {
    if old.exists() {
        let settled = Connection::open_with_flags(old, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
            .and_then(|conn| {
                conn.query_row("PRAGMA schema_version", [], |row| row.get::<_, i64>(0))
            });
        if settled.is_err() {
            // Not a database SQLite can read: nothing of it to keep.
            remove_file_of(old)?;
        }
    }
    std::fs::rename(new, old).map_err(|source| StoreError::Shard {
        path: old.to_owned(),
        message: format!("cannot replace it with {}: {source}", new.display()),
    })?;
    // Its journal, empty since the last commit.
    remove_file_of(new)
}

/// The shard configuration of the database on `conn`; `None` before its
/// first sync (of schema 6 or later).
pub(super) fn read_shard_config(conn: &Connection) -> rusqlite::Result<Option<ShardConfig>> {
    conn.query_row(
        "SELECT shards, db_id, last_chunk_id FROM fts_shards",
        [],
        |row| {
            Ok(ShardConfig {
                shards: row.get::<_, i64>(0)?.max(1) as usize,
                db_id: row.get(1)?,
                last_chunk_id: row.get(2)?,
            })
        },
    )
    .optional()
}

/// A fresh identifier for a set of shard files.
fn new_db_id(db: &Path) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{}:{}:{nanos}", db.display(), std::process::id());
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(seed.as_bytes()))
}

impl Writer {
    /// Reads the configuration, creating it on first use; `wanted` (a shard
    /// count different from the recorded one) or `reset` start new, empty
    /// shard files, which the next `start_fts` fills from the chunks.
    fn configure_shards(&self, wanted: Option<usize>, reset: bool) -> Result<ShardConfig> {
        let current = self.shard_config()?;
        let shards = wanted.or(current.as_ref().map(|c| c.shards));
        let shards = shards.unwrap_or_else(default_shards).clamp(1, 64);
        if let Some(config) = current.filter(|c| c.shards == shards && !reset) {
            return Ok(config);
        }
        self.next_chunk_id.set(0);
        let last_chunk_id = self.next_chunk_id()? - 1;
        self.next_chunk_id.set(0);
        let config = ShardConfig {
            shards,
            db_id: new_db_id(&self.path),
            last_chunk_id,
        };
        self.conn
            .execute_batch("BEGIN IMMEDIATE; DELETE FROM fts_shards; DELETE FROM fts_deletes;")
            .map_err(self.err())?;
        self.conn
            .execute(
                "INSERT INTO fts_shards(shards, db_id, last_chunk_id) VALUES (?1, ?2, ?3)",
                params![config.shards as i64, config.db_id, config.last_chunk_id],
            )
            .map_err(self.err())?;
        self.conn.execute_batch("COMMIT").map_err(self.err())?;
        Ok(config)
    }

    /// Opens the shard files for writing (creating or replacing those that
    /// do not belong to this database), starts one writer thread per shard,
    /// and queues whatever they are missing. Call before the first `begin`.
    pub fn start_fts(&self, wanted: Option<usize>) -> Result<()> {
        // A full re-read cut short left messages out of `message_fts`: they
        // go back before this sync may delete any of them (FTS5 must be
        // told a deleted row's text, which it cannot be for one it lacks).
        if self.message_text_behind()? {
            self.begin()?;
            self.catch_up_message_text()?;
            self.conn.execute_batch("COMMIT").map_err(self.err())?;
        }
        self.start_fts_with(wanted, false)
    }

    /// Drops every shard and indexes all chunks again, and `message_fts`
    /// from its view (`doctor --fix`).
    pub fn rebuild_fts(&self) -> Result<()> {
        self.conn
            .execute_batch(
                "INSERT INTO message_fts(message_fts) VALUES ('rebuild');
                 INSERT INTO message_fts(message_fts) VALUES ('optimize');
                 DELETE FROM meta WHERE key = 'message_fts_behind';",
            )
            .map_err(self.err())?;
        self.start_fts_with(None, true)?;
        match self.finish_fts()?.into_iter().next() {
            Some(path) => Err(StoreError::Shard {
                path,
                message:
                    "another process held it open; close it and run `piidx doctor --fix` again"
                        .into(),
            }),
            None => Ok(()),
        }
    }

    fn start_fts_with(&self, wanted: Option<usize>, reset: bool) -> Result<()> {
        let config = self.configure_shards(wanted, reset)?;
        self.reset_undeleted(&config)?;
        self.run_shard_writers(&config, shard_path, 0)?;
        self.catch_up(&config)
    }

    /// Starts the shard writers of a full re-read (`sync --full`), which
    /// deletes every row the shards hold and writes it again. Deleting from
    /// a contentless FTS5 table means tokenizing the old text once more, and
    /// a shard that lost rows is merged and vacuumed whole (`purge`): such a
    /// re-read took twice a cold sync's time and memory. Instead each shard
    /// is written anew beside the one readers use (`<shard>.new`), from the
    /// rows this sync writes, and replaces it at `finish_fts`.
    ///
    /// The old shards are not touched: readers keep them until then. The
    /// deletions are only logged (`fts_deletes`), without their text: if
    /// the sync dies on the way, the next one replaces each old shard that
    /// holds a logged row and indexes it from the chunks (`reset_undeleted`),
    /// as it does after any sync killed between its two commits.
    /// `message_fts` in the main file is emptied and filled again in the
    /// same spirit (`empty_message_text`).
    pub fn start_fts_anew(&self, wanted: Option<usize>) -> Result<()> {
        self.empty_message_text()?;
        let config = self.configure_shards(wanted, false)?;
        self.run_shard_writers(&config, anew_path, config.last_chunk_id + 1)
    }

    /// Starts a writer on each shard's file at `path_of(db, shard)`, after
    /// removing what a sync killed on its way left; chunk ids are handed out
    /// from after the configuration's last. `new_from` is the first id the
    /// shards hold when they are written anew (0 otherwise).
    fn run_shard_writers(
        &self,
        config: &ShardConfig,
        path_of: fn(&Path, usize) -> PathBuf,
        new_from: i64,
    ) -> Result<()> {
        let mut writers = Vec::with_capacity(config.shards);
        for shard in 0..config.shards {
            for left in leftovers(&self.path, shard) {
                remove_file_of(&left)?;
            }
            writers.push(ShardWriter::open(
                path_of(&self.path, shard),
                shard,
                config,
                &self.conn,
            )?);
        }
        // Shard files from an earlier, larger shard count.
        for shard in config.shards.. {
            let path = shard_path(&self.path, shard);
            if !path.exists() {
                break;
            }
            remove_file_of(&path)?;
        }
        self.next_chunk_id.set(config.last_chunk_id + 1);
        *self.shards.borrow_mut() = Some(ShardWriters { writers, new_from });
        Ok(())
    }

    /// Sends the shards what they still lack and closes their input. Each
    /// writer then commits, merges and compacts its file on its own thread
    /// (`purge`) while this one goes on with the main file; rows written
    /// after this reach the shards at the next sync. Call after the last
    /// `commit` that the shards must take; `finish_fts` waits for them.
    /// No chunk may be deleted in between: `finish_fts` forgets every
    /// logged deletion, as the shards had all applied them.
    pub fn close_fts(&self) -> Result<()> {
        let Some(mut writers) = self.shards.borrow_mut().take() else {
            return Ok(());
        };
        // Shards written anew: the rows older than them that this sync did
        // not delete (those of a file kept as deleted, or that could not be
        // read).
        let new_from = writers.new_from;
        if new_from > 0 {
            self.queue_chunks(&mut writers, 0, new_from - 1)?;
        }
        writers.close();
        *self.closed_shards.borrow_mut() = Some(writers);
        Ok(())
    }

    /// Closes the shards' input (`close_fts`) and waits for every shard to
    /// commit what it was sent (shards written anew then take the old ones'
    /// places), then forgets the deletions they have all applied. Call after
    /// the last `commit`.
    /// Returns the shards a reader kept from committing: they catch up at
    /// the next sync (their deletions stay logged for it).
    pub fn finish_fts(&self) -> Result<Vec<PathBuf>> {
        self.close_fts()?;
        let Some(writers) = self.closed_shards.borrow_mut().take() else {
            return Ok(Vec::new());
        };
        let written_anew: Vec<PathBuf> = if writers.new_from > 0 {
            writers.writers.iter().map(|w| w.path.clone()).collect()
        } else {
            Vec::new()
        };
        let behind = writers.finish()?;
        if !behind.is_empty() {
            return Ok(behind);
        }
        for (shard, new) in written_anew.iter().enumerate() {
            replace_shard(new, &shard_path(&self.path, shard))?;
        }
        // With a WHERE clause: a bare DELETE clears the table's root page
        // even when it is empty, so every no-change sync wrote (and
        // fsynced) a page.
        self.conn
            .execute("DELETE FROM fts_deletes WHERE chunk_id IS NOT NULL", [])
            .map_err(self.err())?;
        Ok(Vec::new())
    }

    /// Checks `message_fts` against its view, and the full-text shards: both
    /// indexes of every shard pass FTS5's `integrity-check`, the word index holds exactly the shard's chunk ids
    /// up to its mark, and the trigram index only ids of those. `None` when
    /// all is well.
    pub fn fts_check(&self) -> Option<String> {
        let config = match self.shard_config() {
            Ok(Some(config)) => Ok(config),
            Ok(None) => Err("no shard configuration; `piidx sync` creates it".to_owned()),
            Err(err) => Err(crate::error_chain(&err)),
        };
        // Each shard is checked on a thread of its own, with a connection of
        // its own to the index, while this one checks `message_fts`: each
        // check is seconds of one core on a large index.
        let path = self.path.as_path();
        let (message, shards) = std::thread::scope(|scope| {
            let shards: Vec<_> = config
                .iter()
                .flat_map(|config| {
                    (0..config.shards).map(move |shard| {
                        scope.spawn(move || match Writer::open_for_doctor(path) {
                            Ok(store) => store.check_shard(config, shard),
                            Err(err) => Some(format!(
                                "shard {}: {}",
                                shard_path(path, shard).display(),
                                crate::error_chain(&err)
                            )),
                        })
                    })
                })
                .collect();
            let message = self.check_message_fts();
            let shards: Vec<Option<String>> = shards
                .into_iter()
                .map(|shard| {
                    shard
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect();
            (message, shards)
        });
        let found: Vec<String> = message
            .into_iter()
            .chain(config.err())
            .chain(shards.into_iter().flatten())
            .collect();
        (!found.is_empty()).then(|| found.join("; "))
    }

    /// `message_fts` (migration 0015) against its content view.
    fn check_message_fts(&self) -> Option<String> {
        if self.message_text_behind().unwrap_or(false) {
            return Some(
                "message_fts lacks the messages a full re-read cut short had not written again; `piidx sync` indexes them"
                    .into(),
            );
        }
        match self.conn.execute(
            "INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)",
            [],
        ) {
            Err(err) if !is_read_only(&err) => {
                Some(format!("message_fts does not match v_message_text: {err}"))
            }
            _ => None,
        }
    }

    fn check_shard(&self, config: &ShardConfig, shard: usize) -> Option<String> {
        let path = shard_path(&self.path, shard);
        let name = path.display();
        if !path.exists() {
            return Some(format!("shard {name} is missing"));
        }
        // Read-only media: no -shm can be made, and nobody writes there.
        let conn = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
            .and_then(|conn| {
                conn.query_row("PRAGMA application_id", [], |_| Ok(()))?;
                Ok(conn)
            })
            .or_else(|_| {
                Connection::open_with_flags(
                    format!("file:{}?immutable=1", uri_path(&path)),
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_URI,
                )
            });
        let conn = match conn {
            Ok(conn) => conn,
            Err(err) => return Some(format!("shard {name}: {err}")),
        };
        let upto = match shard_mark(&conn, shard, config) {
            Ok(Some(upto)) => upto,
            Ok(None) => return Some(format!("shard {name} belongs to another database")),
            Err(err) => return Some(format!("shard {name}: {err}")),
        };
        let behind: rusqlite::Result<i64> = self.conn.query_row(
            "SELECT count(*) FROM fts_rows WHERE fts_rowid % ?1 = ?2 AND fts_rowid > ?3",
            params![config.shards as i64, shard as i64, upto],
            |row| row.get(0),
        );
        match behind {
            Ok(0) => {}
            Ok(n) => {
                return Some(format!(
                    "shard {name} is behind: {n} chunk(s) are not searchable yet; `piidx sync` indexes them"
                ));
            }
            Err(err) => return Some(format!("shard {name}: {err}")),
        }
        for table in ["fts", "fts_trigram"] {
            if let Err(err) = conn.execute(
                &format!("INSERT INTO {table}({table}) VALUES('integrity-check')"),
                [],
            ) && !is_read_only(&err)
            {
                return Some(format!("shard {name}, {table}: {err}"));
            }
        }
        let ids = |conn: &Connection, sql: &str| -> rusqlite::Result<Vec<i64>> {
            conn.prepare(sql)?
                .query_map(params![config.shards as i64, shard as i64, upto], |row| {
                    row.get(0)
                })?
                .collect()
        };
        let want = ids(
            &self.conn,
            "SELECT fts_rowid FROM fts_rows WHERE fts_rowid % ?1 = ?2 AND fts_rowid <= ?3 ORDER BY 1",
        );
        // Every row, whatever its id: a row above the mark or of another
        // shard's ids is as wrong as a missing one.
        let have = ids(
            &conn,
            "SELECT rowid FROM fts WHERE ?1 + ?2 + ?3 IS NOT NULL ORDER BY 1",
        );
        let strays: rusqlite::Result<i64> = conn.query_row(
            "SELECT count(*) FROM fts_trigram_docsize WHERE id NOT IN (SELECT rowid FROM fts)",
            [],
            |row| row.get(0),
        );
        match strays {
            Ok(0) => {}
            Ok(n) => return Some(format!("shard {name}: {n} trigram row(s) without a chunk")),
            Err(err) => return Some(format!("shard {name}: {err}")),
        }
        for table in super::lengths::TABLES {
            match super::lengths::mismatches(&conn, table, config.shards as i64) {
                // A shard of an earlier piidx: sound, and the next sync adds
                // the lengths (search asks FTS5 for them meanwhile).
                Ok(Some(0) | None) => {}
                Ok(Some(n)) => {
                    return Some(format!(
                        "shard {name}: {n} row length(s) of {table} differ from FTS5's; \
                         `piidx doctor --fix` indexes it again"
                    ));
                }
                Err(err) => return Some(format!("shard {name}: {err}")),
            }
        }
        // A row weighed below a chunk of it could be left out of a search's
        // top (`weights`). Chunks above the mark are the next sync's.
        let below = super::weights::of_chunks(&self.conn, shard, config.shards, upto)
            .and_then(|weights| super::weights::below(&conn, config.shards as i64, &weights));
        match below {
            // A shard of an earlier piidx: the next sync adds its weights.
            Ok(Some(0) | None) => {}
            Ok(Some(n)) => {
                return Some(format!(
                    "shard {name}: {n} row(s) weighed below a chunk of theirs, which a search \
                     could leave out; `piidx doctor --fix` indexes it again"
                ));
            }
            Err(err) => return Some(format!("shard {name}: {err}")),
        }
        match (want, have) {
            (Ok(want), Ok(have)) if want == have => None,
            (Ok(want), Ok(have)) => {
                let want_set: std::collections::HashSet<_> = want.iter().collect();
                let have_set: std::collections::HashSet<_> = have.iter().collect();
                Some(format!(
                    "shard {name}: {} chunk(s) not indexed, {} row(s) without a chunk",
                    want_set.difference(&have_set).count(),
                    have_set.difference(&want_set).count()
                ))
            }
            (Err(err), _) | (_, Err(err)) => Some(format!("shard {name}: {err}")),
        }
    }

    /// Allocates the id of a new chunk: ids are never reused, so a shard's
    /// mark means the same chunks forever.
    pub(super) fn next_chunk_id(&self) -> Result<i64> {
        if self.next_chunk_id.get() == 0 {
            let last: i64 = self
                .conn
                .query_row(
                    "SELECT max(coalesce((SELECT max(chunk_id) FROM chunks), 0),
                                coalesce((SELECT max(last_chunk_id) FROM fts_shards), 0))",
                    [],
                    |row| row.get(0),
                )
                .map_err(self.err())?;
            self.next_chunk_id.set(last + 1);
        }
        let id = self.next_chunk_id.get();
        self.next_chunk_id.set(id + 1);
        Ok(id)
    }

    /// Allocates the id of a new full-text row of `len` bytes: the next
    /// chunk id, or a few ids further on, in the shard this sync has given
    /// the least text (`ShardWriters::balance`).
    pub(super) fn next_fts_rowid(&self, len: usize) -> Result<i64> {
        let next = self.next_chunk_id()?;
        let id = match self.shards.borrow_mut().as_mut() {
            Some(shards) => shards.balance(next, len),
            None => next,
        };
        self.next_chunk_id.set(id + 1);
        Ok(id)
    }

    /// Part of every commit, inside the transaction: remember the highest
    /// chunk id handed out.
    pub(super) fn record_chunk_ids(&self) -> Result<i64> {
        let last = self.next_chunk_id.get() - 1;
        if last < 0 {
            return Ok(0);
        }
        self.conn
            .prepare_cached("UPDATE fts_shards SET last_chunk_id = ?1 WHERE last_chunk_id < ?1")
            .and_then(|mut stmt| stmt.execute([last]))
            .map_err(self.err())?;
        Ok(last)
    }

    /// Logs the full-text rows of `file_id`'s own chunks for deletion
    /// (before the chunks go), with the text each was indexed with; rows of
    /// shared texts go with the text.
    pub(super) fn delete_fts_rows(&self, file_id: i64) -> Result<()> {
        let spans: Vec<Span> = self
            .conn
            .prepare_cached(
                "SELECT chunk_id, entry_rowid, json_path, start, len FROM chunks
                  WHERE file_id = ?1 AND fts_rowid IS NULL ORDER BY entry_rowid, json_path",
            )
            .and_then(|mut stmt| stmt.query_map([file_id], span)?.collect())
            .map_err(self.err())?;
        self.forget_fts_rows(spans)
    }

    /// Logs the full-text rows of shared text `text_id` for deletion
    /// (before the text goes), with their text.
    pub(super) fn delete_shared_fts_rows(&self, text_id: i64) -> Result<()> {
        let spans: Vec<Span> = self
            .conn
            .prepare_cached(
                "SELECT fts_rowid, -text_id, inner_path, start, len FROM shared_chunks
                  WHERE text_id = ?1 ORDER BY inner_path",
            )
            .and_then(|mut stmt| stmt.query_map([text_id], span)?.collect())
            .map_err(self.err())?;
        self.forget_fts_rows(spans)
    }

    /// Queues the weight of a new chunk of `kind` for the row `id` it is
    /// indexed under (its own, or its shared text's), sent after the
    /// commit; the catch-up sends those the shards miss (`queue_chunks`).
    pub(super) fn queue_fts_weight(&self, id: i64, kind: &str) {
        if self.shards.borrow().is_some() {
            self.pending_weights
                .borrow_mut()
                .push((id, super::weights::class_of(kind)));
        }
    }

    /// Queues a new chunk's full-text row for the shards, sent after the
    /// commit. Without writers there is no one to send it to: the catch-up
    /// of the next `start_fts` reads it from the chunks.
    pub(super) fn queue_fts_row(&self, id: i64, body: &str) {
        if self.shards.borrow().is_some() {
            self.pending_fts
                .borrow_mut()
                .push(fts_row(id, body.to_owned()));
        }
    }

    /// Logs the full-text rows of `spans` for deletion, drops those not
    /// yet sent to the shards, and queues the deletion of the others with
    /// the text each was indexed with. A row no running shard writer holds
    /// (none runs, or the shards are written anew) is only logged: its text
    /// is not read.
    fn forget_fts_rows(&self, spans: Vec<Span>) -> Result<()> {
        if spans.is_empty() {
            return Ok(());
        }
        debug_assert!(
            self.closed_shards.borrow().is_none(),
            "a chunk deleted between close_fts and finish_fts"
        );
        let mut log = self
            .conn
            .prepare_cached("INSERT OR IGNORE INTO fts_deletes(chunk_id) VALUES (?1)")
            .map_err(self.err())?;
        for (id, ..) in &spans {
            log.execute([id]).map_err(self.err())?;
        }
        let gone: std::collections::HashSet<i64> = spans.iter().map(|(id, ..)| *id).collect();
        self.pending_fts
            .borrow_mut()
            .retain(|(id, _, _)| !gone.contains(id));
        let held_from = match self.shards.borrow().as_ref() {
            Some(writers) => writers.new_from,
            None => return Ok(()),
        };
        let mut texts = ChunkTexts::new(&self.conn).map_err(self.err())?;
        let mut rows = Vec::new();
        for (id, owner, json_path, start, len) in spans {
            if id >= held_from {
                let body = texts
                    .body(owner, &json_path, start, len)
                    .map_err(self.err())?;
                rows.push(fts_row(id, body));
            }
        }
        drop(texts);
        self.pending_deletes.borrow_mut().extend(rows);
        Ok(())
    }

    /// After a commit: hands the committed chunks and deletions to the shard
    /// writers (waiting while they are a message behind).
    pub(super) fn dispatch_fts(&self, upto: i64) -> Result<()> {
        let rows = std::mem::take(&mut *self.pending_fts.borrow_mut());
        let deletes = std::mem::take(&mut *self.pending_deletes.borrow_mut());
        let weights = std::mem::take(&mut *self.pending_weights.borrow_mut());
        let mut shards = self.shards.borrow_mut();
        match shards.as_mut() {
            Some(writers) => writers.send(rows, deletes, weights, upto),
            // No writers (a write outside a sync): the next sync catches up.
            None => Ok(()),
        }
    }

    /// Queues what the shards miss: chunks above their marks. Each field's
    /// text is read once, however many chunks it has. (Logged deletions
    /// were dealt with when the shards opened: `reset_undeleted`.)
    fn catch_up(&self, config: &ShardConfig) -> Result<()> {
        let mut shards = self.shards.borrow_mut();
        let Some(writers) = shards.as_mut() else {
            return Ok(());
        };
        let from = writers.min_upto();
        if from >= config.last_chunk_id {
            return Ok(());
        }
        self.queue_chunks(writers, from, config.last_chunk_id)
    }

    /// Sends the shards the rows of the chunks with ids in `from + 1 ..=
    /// to` that they want (`ShardWriters::wants`).
    fn queue_chunks(&self, writers: &mut ShardWriters, from: i64, to: i64) -> Result<()> {
        // The rows of entries' own chunks and of shared texts, in id order;
        // `owner` is the entry (or, negated, the shared text) holding the
        // string at `json_path`.
        let mut chunks = self
            .conn
            .prepare(
                "SELECT chunk_id, entry_rowid, json_path, start, len FROM chunks
                  WHERE chunk_id > ?1 AND chunk_id <= ?2 AND fts_rowid IS NULL
                 UNION ALL
                 SELECT fts_rowid, -text_id, inner_path, start, len FROM shared_chunks
                  WHERE fts_rowid > ?1 AND fts_rowid <= ?2
                 ORDER BY 1",
            )
            .map_err(self.err())?;
        let mut texts = ChunkTexts::new(&self.conn).map_err(self.err())?;
        let mut rows = chunks.query([from, to]).map_err(self.err())?;
        let mut batch: Vec<FtsRow> = Vec::new();
        let mut bytes = 0;
        while let Some(row) = rows.next().map_err(self.err())? {
            let chunk_id: i64 = row.get(0).map_err(self.err())?;
            if !writers.wants(chunk_id) {
                continue;
            }
            let (_, owner, json_path, start, len) = span(row).map_err(self.err())?;
            let body = texts
                .body(owner, &json_path, start, len)
                .map_err(self.err())?;
            bytes += body.len();
            batch.push(fts_row(chunk_id, body));
            if bytes >= CATCH_UP_BYTES {
                writers.send(std::mem::take(&mut batch), Vec::new(), Vec::new(), chunk_id)?;
                bytes = 0;
            }
        }
        drop(rows);
        // The weights of the chunks in the range, shared texts' included: a
        // chunk pointing at an older shared text raises that row's.
        let weights =
            super::weights::of_chunks_between(&self.conn, from, to).map_err(self.err())?;
        writers.send(batch, Vec::new(), weights, to)
    }

    /// Deletions logged in `fts_deletes` by a sync that did not see them
    /// through (killed between the main commit and a shard's, or a reader
    /// held the shard) have lost their text with their rows. A shard that
    /// still holds any of them is replaced by an empty one, which the
    /// catch-up fills from the chunks; in the others they were applied.
    fn reset_undeleted(&self, config: &ShardConfig) -> Result<()> {
        let logged: Vec<i64> = self
            .conn
            .prepare("SELECT chunk_id FROM fts_deletes")
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .map_err(self.err())?;
        let count = config.shards as i64;
        for shard in 0..config.shards {
            let ids: Vec<i64> = logged
                .iter()
                .copied()
                .filter(|id| id.rem_euclid(count) as usize == shard)
                .collect();
            let path = shard_path(&self.path, shard);
            if ids.is_empty() || !path.exists() {
                continue;
            }
            let still_there =
                Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
                    .and_then(|conn| holds_any(&conn, &ids));
            // An unreadable shard is replaced when it opens, anyway.
            if still_there.unwrap_or(false) {
                remove_file_of(&path)?;
            }
        }
        Ok(())
    }
}

/// Whether the shard on `conn` holds a row of any of `ids` (in its word
/// index, which holds every row of the trigram one).
fn holds_any(conn: &Connection, ids: &[i64]) -> rusqlite::Result<bool> {
    let mut found = conn.prepare("SELECT 1 FROM fts_docsize WHERE id = ?1")?;
    for id in ids {
        if found.exists([id])? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The text of a chunk as the shards index it, read the same way for
/// indexing and for deleting (a contentless FTS5 row is deleted with the
/// very text it was indexed with): the string at `json_path` of the entry's
/// `raw` (or, for a negative owner, of the shared text), cut at the chunk's
/// byte span. The last field read is kept, as a field's chunks come in a
/// row.
struct ChunkTexts<'c> {
    field: rusqlite::CachedStatement<'c>,
    shared_field: rusqlite::CachedStatement<'c>,
    /// Owner, path and text of the last field read.
    last: (i64, String, String),
}

impl<'c> ChunkTexts<'c> {
    fn new(conn: &'c Connection) -> rusqlite::Result<ChunkTexts<'c>> {
        Ok(ChunkTexts {
            field: conn.prepare_cached(
                "SELECT json_extract(raw, ?2) FROM entries WHERE entry_rowid = ?1",
            )?,
            shared_field: conn.prepare_cached(
                "SELECT CASE WHEN ?2 = '$' THEN text ELSE json_extract(text, ?2) END
                   FROM v_shared_texts WHERE text_id = ?1",
            )?,
            last: (0, String::new(), String::new()),
        })
    }

    fn body(
        &mut self,
        owner: i64,
        json_path: &str,
        start: i64,
        len: i64,
    ) -> rusqlite::Result<String> {
        if self.last.0 != owner || self.last.1 != json_path {
            let statement = if owner < 0 {
                &mut self.shared_field
            } else {
                &mut self.field
            };
            let value: Option<String> = statement
                .query_row(params![owner.abs(), json_path], |row| row.get(0))
                .optional()?
                .flatten();
            self.last = (owner, json_path.to_owned(), value.unwrap_or_default());
        }
        let start = start.max(0) as usize;
        let len = len.max(0) as usize;
        Ok(self
            .last
            .2
            .get(start..start.saturating_add(len))
            .unwrap_or_default()
            .to_owned())
    }
}

/// A shard row of `body`: in the trigram index too when it has characters
/// of scripts written without spaces.
fn fts_row(chunk_id: i64, body: String) -> FtsRow {
    let trigram = crate::normalize::has_unspaced_script(&body);
    (chunk_id, body, trigram)
}

/// Rows for the shards: chunk id, text, and whether it also goes into the
/// trigram index.
pub(super) type FtsRow = (i64, String, bool);

/// Where a full-text row's text is: chunk id, owner (the entry, or the
/// shared text negated), JSON path, start and length (`ChunkTexts::body`).
type Span = (i64, i64, String, i64, i64);

fn span(row: &rusqlite::Row<'_>) -> rusqlite::Result<Span> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

/// One message to a shard writer; `upto` becomes its `indexed_upto`.
struct Work {
    /// Rows to delete, with the text they were indexed with.
    deletes: Vec<FtsRow>,
    rows: Vec<FtsRow>,
    /// Rows' weights to raise (`weights`): of these rows, and of rows the
    /// shard already holds that a new chunk points at.
    weights: Vec<(i64, Weight)>,
    upto: i64,
}

/// The writer threads of all shards.
pub(super) struct ShardWriters {
    writers: Vec<ShardWriter>,
    /// Written anew (`start_fts_anew`): the shards hold no chunk with a
    /// smaller id, whatever their marks say, until `finish_fts` sends them
    /// those that remain. 0 otherwise.
    new_from: i64,
}

impl ShardWriters {
    fn min_upto(&self) -> i64 {
        self.writers.iter().map(|w| w.upto).min().unwrap_or(0)
    }

    /// The id, `next` or a few after it, of a new row of `len` bytes. Its
    /// shard is `next`'s unless that shard has been given more than a
    /// chunk's worth of text beyond the least given one; then the id skips
    /// to that one's next id. Ids taken in turn fill the shards unevenly: a
    /// chunk of a shared text takes two ids (the chunk's, then its row's),
    /// so every row of one long tool output lands in the same shard of two,
    /// and the sync waits for the shard that got most (docs/performance.md).
    fn balance(&mut self, next: i64, len: usize) -> i64 {
        let count = self.writers.len();
        if count == 0 {
            return next;
        }
        let own = next.rem_euclid(count as i64) as usize;
        let given = |k: usize| self.writers[k].given;
        let lightest = (0..count).min_by_key(|&k| given(k)).unwrap_or(own);
        let shard = if given(own) > given(lightest) + CHUNK_BYTES as u64 {
            lightest
        } else {
            own
        };
        self.writers[shard].given += len as u64;
        next + (shard as i64 - own as i64).rem_euclid(count as i64)
    }

    /// Whether some shard still needs this chunk.
    fn wants(&self, chunk_id: i64) -> bool {
        let shard = chunk_id.rem_euclid(self.writers.len() as i64) as usize;
        self.writers
            .get(shard)
            .is_some_and(|writer| chunk_id > writer.upto || chunk_id < self.new_from)
    }

    /// Routes rows and deletions to their shards, skipping rows a shard
    /// already has. A shard that failed reports its error here.
    fn send(
        &mut self,
        rows: Vec<FtsRow>,
        deletes: Vec<FtsRow>,
        weights: Vec<(i64, Weight)>,
        upto: i64,
    ) -> Result<()> {
        let count = self.writers.len() as i64;
        let mut work: Vec<Work> = (0..count)
            .map(|_| Work {
                deletes: Vec::new(),
                rows: Vec::new(),
                weights: Vec::new(),
                upto,
            })
            .collect();
        for row in deletes {
            work[row.0.rem_euclid(count) as usize].deletes.push(row);
        }
        // Every shard takes its weights, even of rows it already has.
        for weight in weights {
            work[weight.0.rem_euclid(count) as usize]
                .weights
                .push(weight);
        }
        for row in rows {
            if self.wants(row.0) {
                work[row.0.rem_euclid(count) as usize].rows.push(row);
            }
        }
        let mut failed = None;
        for (writer, work) in self.writers.iter_mut().zip(work) {
            if writer.upto >= work.upto
                && work.rows.is_empty()
                && work.deletes.is_empty()
                && work.weights.is_empty()
            {
                continue;
            }
            writer.upto = writer.upto.max(work.upto);
            let sent = writer.sender.as_ref().is_some_and(|s| s.send(work).is_ok());
            if !sent && failed.is_none() {
                failed = Some(writer.path.clone());
            }
        }
        match failed {
            // The thread stopped on an error: report it.
            Some(path) => Err(self.join_failed(&path)),
            None => Ok(()),
        }
    }

    fn join_failed(&mut self, path: &Path) -> StoreError {
        for writer in &mut self.writers {
            if writer.path == path
                && let Err(err) = writer.join()
            {
                return err;
            }
        }
        StoreError::Shard {
            path: path.to_owned(),
            message: "the shard writer stopped".into(),
        }
    }

    /// Tells every writer that nothing more comes: each commits, purges
    /// and ends.
    fn close(&mut self) {
        for writer in &mut self.writers {
            writer.sender = None;
        }
    }

    /// Waits for every writer; returns the shards left behind (busy).
    fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.close();
        let mut behind = Vec::new();
        let mut first_error = None;
        for writer in &mut self.writers {
            match writer.join() {
                Ok(true) => {}
                Ok(false) => behind.push(writer.path.clone()),
                Err(err) => {
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(behind),
        }
    }
}

/// One shard file and the thread that writes it.
struct ShardWriter {
    path: PathBuf,
    /// What this shard has (or has been sent, once the thread commits).
    upto: i64,
    /// Bytes of text given to new rows of this shard by this sync
    /// (`ShardWriters::balance`).
    given: u64,
    sender: Option<SyncSender<Work>>,
    thread: Option<JoinHandle<Result<bool>>>,
}

impl ShardWriter {
    fn open(
        path: PathBuf,
        shard: usize,
        config: &ShardConfig,
        main: &Connection,
    ) -> Result<ShardWriter> {
        let (conn, upto) = open_shard_for_writing(&path, shard, config, main)?;
        let shards = config.shards as i64;
        // One message in flight: the main writer runs at most one commit
        // ahead of the slowest shard, which bounds memory.
        let (sender, receiver) = sync_channel::<Work>(1);
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name(format!("piidx-fts{shard}"))
            .spawn(move || write_shard(conn, &thread_path, shards, receiver))
            .map_err(|source| StoreError::Shard {
                path: path.clone(),
                message: format!("cannot start its writer thread: {source}"),
            })?;
        Ok(ShardWriter {
            path,
            upto,
            given: 0,
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// Whether the shard took everything it was sent (see `write_shard`).
    fn join(&mut self) -> Result<bool> {
        self.sender = None;
        match self.thread.take().map(JoinHandle::join) {
            None => Ok(true),
            Some(Ok(outcome)) => outcome,
            Some(Err(_)) => Err(StoreError::Shard {
                path: self.path.clone(),
                message: "its writer thread panicked".into(),
            }),
        }
    }
}

impl Drop for ShardWriter {
    /// A sync that fails still lets the shards commit what they were sent.
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// Opens a shard file, replacing it when it is not a shard of this
/// database and configuration (or not readable at all); returns its mark.
fn open_shard_for_writing(
    path: &Path,
    shard: usize,
    config: &ShardConfig,
    main: &Connection,
) -> Result<(Connection, i64)> {
    let err = sqlite_error(path);
    // Anything but a shard of this configuration (another database's,
    // another layout, damaged) is replaced by an empty one.
    if path.exists()
        && let Ok(Some(upto)) = read_mark(path, shard, config)
    {
        let conn = Connection::open(path).map_err(&err)?;
        configure_shard(&conn, path)?;
        add_later_tables(&conn, config.shards).map_err(&err)?;
        add_weights(&conn, main, shard, config.shards).map_err(&err)?;
        return Ok((conn, upto));
    }
    remove_file_of(path)?;
    let conn = Connection::open(path).map_err(&err)?;
    configure_shard(&conn, path)?;
    // Before the first table: only an empty file takes them (see `reclaim`).
    conn.execute_batch(&format!(
        "PRAGMA page_size = {SHARD_PAGE_SIZE}; PRAGMA auto_vacuum = INCREMENTAL"
    ))
    .map_err(&err)?;
    let lengths: String = super::lengths::TABLES
        .iter()
        .map(|table| super::lengths::create_sql(table))
        .collect();
    let weights = super::weights::CREATE_SQL;
    conn.execute_batch(&format!(
        "BEGIN IMMEDIATE; {SHARD_SCHEMA} {lengths} {weights}
         PRAGMA application_id = {SHARD_APPLICATION_ID}; PRAGMA user_version = {SHARD_VERSION};"
    ))
    .map_err(&err)?;
    // A first load merges its segments once, at its end (`purge`).
    conn.execute(
        "INSERT INTO shard(db_id, shard, shards, indexed_upto, purge_pending)
         VALUES (?1, ?2, ?3, 0, 1)",
        params![config.db_id, shard as i64, config.shards as i64],
    )
    .map_err(&err)?;
    conn.execute_batch(&merge_settings(FIRST_LOAD_MERGE))
        .map_err(&err)?;
    conn.execute_batch("COMMIT").map_err(&err)?;
    Ok((conn, 0))
}

/// The shard's `indexed_upto` if the file at `path` belongs to `config`
/// and has this layout.
fn read_mark(path: &Path, shard: usize, config: &ShardConfig) -> Result<Option<i64>> {
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)
        .map_err(sqlite_error(path))?;
    shard_mark(&conn, shard, config).map_err(sqlite_error(path))
}

fn shard_mark(
    conn: &Connection,
    shard: usize,
    config: &ShardConfig,
) -> rusqlite::Result<Option<i64>> {
    let app: i64 = conn.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if app != SHARD_APPLICATION_ID || version != SHARD_VERSION {
        return Ok(None);
    }
    conn.query_row(
        "SELECT indexed_upto FROM shard WHERE db_id = ?1 AND shard = ?2 AND shards = ?3",
        params![config.db_id, shard as i64, config.shards as i64],
        |row| row.get(0),
    )
    .optional()
}

/// Shards written before deletions were purged lack `purge_pending`.
fn add_purge_column(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool = conn.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('shard') WHERE name = 'purge_pending'",
        [],
        |row| row.get(0),
    )?;
    if !has {
        conn.execute_batch(
            "ALTER TABLE shard ADD COLUMN purge_pending INTEGER NOT NULL DEFAULT 0",
        )?;
    }
    Ok(())
}

/// Read-only media: a check that needs to write cannot run; not a finding.
fn is_read_only(err: &rusqlite::Error) -> bool {
    matches!(err, rusqlite::Error::SqliteFailure(e, _) if e.code == rusqlite::ErrorCode::ReadOnly)
}

/// A shard only grows by new FTS5 segment pages, which a rollback journal
/// does not copy (WAL writes every page twice: to the log, then back); a
/// reader that meets a shard commit waits for it (busy timeout), and the
/// main file, which readers use most, stays in WAL mode. A small page cache
/// is enough for appending. It is never spilled to the file before the
/// commit: a spill needs the exclusive lock, and with a reader holding the
/// shard SQLite waits the whole busy timeout for it at every page it
/// fetches, then goes on without spilling, so the sync crawled for hours
/// instead of giving up at its commit (`write_shard`).
fn configure_shard(conn: &Connection, path: &Path) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(sqlite_error(path))?;
    conn.execute_batch(
        "PRAGMA journal_mode = TRUNCATE; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;
         PRAGMA cache_size = -2048; PRAGMA cache_spill = OFF; PRAGMA journal_size_limit = 67108864;",
    )
    .map_err(sqlite_error(path))
}

/// The shard writer thread: one transaction per message. Returns whether
/// the shard took everything: when a reader holds the file past the busy
/// timeout, the transaction is rolled back and the rest is left to the next
/// sync (its mark stays where it was), instead of failing a sync whose main
/// database has already committed.
fn write_shard(
    conn: Connection,
    path: &Path,
    shards: i64,
    receiver: Receiver<Work>,
) -> Result<bool> {
    let err = sqlite_error(path);
    let loading = first_load(&conn).map_err(&err)?;
    while let Ok(work) = receiver.recv() {
        let written = write_work(&conn, &work, shards).and_then(|()| {
            if loading {
                merge_if_many(&conn)?;
            }
            Ok(())
        });
        match written {
            Ok(()) => {}
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy =>
            {
                conn.execute_batch("ROLLBACK").map_err(&err)?;
                // Drained so that the main writer never waits on this shard.
                for _ in receiver {}
                return Ok(false);
            }
            Err(other) => return Err(err(other)),
        }
    }
    // This sync's deletions, or those of one a kill cut short before its
    // purge: `purge_pending` persists either way.
    if !purge(&conn, path)? {
        reclaim(&conn).map_err(&err)?;
    }
    Ok(true)
}

/// FTS5 merges its segments as it goes, and every merge leaves the pages
/// of the segments it read free: after a cold sync of the bench corpus, 5 %
/// to 9 % of a shard's pages were free (24 MB of 333 MB). Shards are
/// `auto_vacuum = INCREMENTAL` (layout 4), so handing them back moves only
/// the pages after the first free one, at the end of each sync that wrote.
/// A reader holding the file leaves them for the next sync.
fn reclaim(conn: &Connection) -> rusqlite::Result<()> {
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))?;
    if free == 0 {
        return Ok(());
    }
    // One page per step (a row each): stepped to the end.
    let vacuumed = conn
        .prepare("PRAGMA incremental_vacuum")
        .and_then(|mut stmt| {
            let mut rows = stmt.query([])?;
            while rows.next()?.is_some() {}
            Ok(())
        });
    match vacuumed {
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            Ok(())
        }
        other => other,
    }
}

/// FTS5's `automerge` and `crisismerge` while a shard is first loaded: no
/// merging as it goes. With FTS5's own (4 and 16), a term's list was
/// written again at every level of the merge tree: a load spent about as
/// long merging as indexing (`fts_ceiling` at 1 GB: 7.0 s of inserts, and
/// 11.7–13.1 s with the merges). Its segments are merged once instead, at
/// the end (`purge`, which `purge_pending` asks of a first load), or when
/// there are `LOAD_SEGMENTS` of them. `crisismerge` is set to FTS5's
/// highest so that FTS5 never merges a level whole in one transaction (a
/// shard's dirty pages stay in memory until it commits).
const FIRST_LOAD_MERGE: (i64, i64) = (0, 1999);

/// FTS5's own `automerge` and `crisismerge`, for every sync after the
/// first load.
const MERGE_AS_YOU_GO: (i64, i64) = (4, 16);

/// Segments an index of a shard may hold during its first load before it
/// is merged whole: each is one flush of `hashsize` (a 1 GB corpus leaves
/// about 200 in each of two shards), and FTS5 holds at most 2,000.
const LOAD_SEGMENTS: i64 = 1000;

/// SQL that sets both indexes' `automerge` and `crisismerge`.
fn merge_settings((automerge, crisismerge): (i64, i64)) -> String {
    ["fts", "fts_trigram"]
        .iter()
        .map(|table| {
            format!(
                "INSERT INTO {table}({table}, rank) VALUES ('automerge', {automerge});
                 INSERT INTO {table}({table}, rank) VALUES ('crisismerge', {crisismerge});"
            )
        })
        .collect()
}

/// Whether the shard on `conn` is in its first load (`FIRST_LOAD_MERGE`).
fn first_load(conn: &Connection) -> rusqlite::Result<bool> {
    let automerge: Option<i64> = conn
        .query_row(
            "SELECT v FROM fts_config WHERE k = 'automerge'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    Ok(automerge == Some(FIRST_LOAD_MERGE.0))
}

/// How many segments `table` holds (one lookup per segment in `_idx`).
fn segments(conn: &Connection, table: &str) -> rusqlite::Result<i64> {
    conn.query_row(
        &format!(
            "WITH RECURSIVE seg(id) AS (
               SELECT min(segid) FROM {table}_idx
               UNION ALL
               SELECT (SELECT min(segid) FROM {table}_idx WHERE segid > seg.id)
                 FROM seg WHERE seg.id IS NOT NULL)
             SELECT count(id) FROM seg"
        ),
        [],
        |row| row.get(0),
    )
}

/// During a first load, merges the shard whole when an index holds
/// `LOAD_SEGMENTS` segments, in steps of bounded memory.
fn merge_if_many(conn: &Connection) -> rusqlite::Result<()> {
    let most = crate::fault::load_segments(LOAD_SEGMENTS);
    if segments(conn, "fts")? >= most || segments(conn, "fts_trigram")? >= most {
        merge_whole(conn)?;
    }
    Ok(())
}

/// Bytes of leaves one step of the purge's merge writes at least (2,000
/// leaves of FTS5's default size). Each step is a transaction of its own,
/// and a shard's dirty pages stay in memory until it commits
/// (`configure_shard`): one `optimize` held the whole shard, about its size
/// in RAM, where steps of this size hold a few tens of MB.
const PURGE_STEP_BYTES: i64 = 2000 * FTS5_DEFAULT_PGSZ;

/// Bytes of leaves one step writes at most, however many segments it reads:
/// twice the least. Four times the least merged the 4 GB first load's
/// shards in 11.3 s instead of 14.3, but raised that sync's peak RSS by
/// about 40 MB (docs/performance.md).
const PURGE_STEP_MAX_BYTES: i64 = 2 * PURGE_STEP_BYTES;

/// Leaves a step writes for each segment it reads. FTS5 ends every step by
/// rewriting the current leaf of each input segment (`fts5TrimSegments`),
/// and the next step reads them all again: after a first load of 4 GB (433
/// segments a shard) a step of `PURGE_STEP_BYTES` spent about as much on
/// them as on its output (docs/performance.md).
const STEP_LEAVES_PER_SEGMENT: i64 = 8;

/// FTS5's leaf size when a shard's config does not set `pgsz`.
const FTS5_DEFAULT_PGSZ: i64 = 4050;

/// FTS5's `'merge'` counts its work in leaves: `STEP_LEAVES_PER_SEGMENT`
/// for each segment of `table`, within `PURGE_STEP_BYTES` and
/// `PURGE_STEP_MAX_BYTES` of its leaves.
fn purge_step_leaves(conn: &Connection, table: &str) -> rusqlite::Result<i64> {
    let pgsz: Option<rusqlite::types::Value> = conn
        .query_row(
            &format!("SELECT v FROM {table}_config WHERE k = 'pgsz'"),
            [],
            |row| row.get(0),
        )
        .optional()?;
    // FTS5 takes 32 to 65536 and ignores any other value.
    let pgsz = match pgsz {
        Some(rusqlite::types::Value::Integer(size)) if (32..=65536).contains(&size) => size,
        _ => FTS5_DEFAULT_PGSZ,
    };
    let wanted = segments(conn, table)? * STEP_LEAVES_PER_SEGMENT;
    Ok(wanted.clamp(PURGE_STEP_BYTES / pgsz, PURGE_STEP_MAX_BYTES / pgsz))
}

/// The shards are contentless: deleting a row only records its id, and
/// its words stay in the index's segments until FTS5 merges them, which it
/// may never do; and a merge leaves the old segments' pages on the free
/// list as they were. So deleted text (a removed session, a secret) would
/// still be in the file. After rows were deleted, the segments are merged
/// into one, step by step (FTS5's `'merge'` with a negative page count:
/// all segments, as `optimize` does, a bounded step at a time), which
/// drops them; then the shard is copied without free pages (`VACUUM INTO`,
/// which writes the copy straight to its file) and the copy is renamed over
/// it. `purge_pending`, set in the transaction that deletes, is clear only
/// in that copy, so a kill on the way is made good by the next sync (which
/// removes a copy left behind). Only a sync that deleted rows pays for
/// this, where `secure_delete` would have slowed every cold sync (measured
/// in docs/performance.md). A reader holding the file leaves it pending.
/// Returns whether the shard at `path` was replaced (its connection, `conn`,
/// then reads the old file).
fn purge(conn: &Connection, path: &Path) -> Result<bool> {
    let err = sqlite_error(path);
    let pending: i64 = conn
        .query_row("SELECT purge_pending FROM shard", [], |row| row.get(0))
        .map_err(&err)?;
    if pending == 0 {
        return Ok(false);
    }
    let merged = conn
        .execute_batch(&format!(
            "BEGIN IMMEDIATE; {} COMMIT;",
            merge_settings(MERGE_AS_YOU_GO)
        ))
        .and_then(|()| merge_whole(conn));
    match merged {
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            if !conn.is_autocommit() {
                conn.execute_batch("ROLLBACK").map_err(&err)?;
            }
            return Ok(false);
        }
        merged => merged.map_err(&err)?,
    }
    let copy = purged_path(path);
    remove_file_of(&copy)?;
    conn.execute(
        "VACUUM INTO ?1",
        [format!("file:{}", super::uri_path(&copy))],
    )
    .map_err(&err)?;
    Connection::open(&copy)
        .and_then(|copied| copied.execute("UPDATE shard SET purge_pending = 0", []))
        .map_err(sqlite_error(&copy))?;
    replace_shard(&copy, path)?;
    Ok(true)
}

/// Merges every segment of both indexes into one, in transactions of
/// `purge_step_leaves`; FTS5 says a step found nothing left to merge by
/// changing fewer than two rows.
fn merge_whole(conn: &Connection) -> rusqlite::Result<()> {
    for table in ["fts", "fts_trigram"] {
        let leaves = purge_step_leaves(conn, table)?;
        let step = format!(
            "BEGIN IMMEDIATE;
             INSERT INTO {table}({table}, rank) VALUES ('merge', -{leaves});
             COMMIT;"
        );
        loop {
            let before = conn.total_changes();
            conn.execute_batch(&step)?;
            if conn.total_changes() - before < 2 {
                break;
            }
        }
    }
    Ok(())
}

fn write_work(conn: &Connection, work: &Work, shards: i64) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    // A row is deleted only if the shard has it: the `'delete'` command
    // takes away the words it is given whether the row is there or not, so
    // a row never sent (deleted in the transaction that made it) or already
    // deleted must not be deleted again.
    let mut has = conn.prepare_cached("SELECT 1 FROM fts_docsize WHERE id = ?1")?;
    let mut has_trigrams =
        conn.prepare_cached("SELECT 1 FROM fts_trigram_docsize WHERE id = ?1")?;
    let mut delete =
        conn.prepare_cached("INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?1, ?2)")?;
    let mut delete_trigrams = conn.prepare_cached(
        "INSERT INTO fts_trigram(fts_trigram, rowid, body) VALUES ('delete', ?1, ?2)",
    )?;
    let mut deleted = false;
    for (id, body, _) in &work.deletes {
        if has.exists([id])? {
            delete.execute(params![id, body])?;
            deleted = true;
        }
        if has_trigrams.exists([id])? {
            delete_trigrams.execute(params![id, body])?;
            deleted = true;
        }
    }
    if deleted {
        conn.execute("UPDATE shard SET purge_pending = 1", [])?;
    }
    let mut insert = conn.prepare_cached("INSERT INTO fts(rowid, body) VALUES (?1, ?2)")?;
    let mut insert_trigrams =
        conn.prepare_cached("INSERT INTO fts_trigram(rowid, body) VALUES (?1, ?2)")?;
    let (mut words, mut trigrams) = (IdRange::default(), IdRange::default());
    for (id, body, trigram) in &work.rows {
        insert.execute(params![id, body])?;
        words.add(*id);
        if *trigram {
            insert_trigrams.execute(params![id, body])?;
            trigrams.add(*id);
        }
    }
    for (table, range) in super::lengths::TABLES.into_iter().zip([words, trigrams]) {
        if let Some((low, high)) = range.0 {
            super::lengths::record(conn, table, shards, low, high)?;
        }
    }
    super::weights::raise(conn, shards, &work.weights)?;
    conn.execute(
        "UPDATE shard SET indexed_upto = max(indexed_upto, ?1)",
        [work.upto],
    )?;
    if crate::fault::due(crate::fault::Point::Shard) {
        let _ = conn.cache_flush();
        crate::fault::kill_now();
    }
    conn.execute_batch("COMMIT")
}

/// The lowest and highest of the ids inserted into a table.
#[derive(Default)]
struct IdRange(Option<(i64, i64)>);

impl IdRange {
    fn add(&mut self, id: i64) {
        self.0 = Some(
            self.0
                .map_or((id, id), |(low, high)| (low.min(id), high.max(id))),
        );
    }
}

/// Attaches every shard read-only to a query connection as `fts0`, `fts1`,
/// ...; returns their schema names. `immutable` for read-only media.
pub fn attach_shards(
    conn: &Connection,
    db: &Path,
    config: &ShardConfig,
    immutable: bool,
) -> Result<Vec<String>> {
    (0..config.shards)
        .map(|shard| attach_shard(conn, db, shard, Some(&config.db_id), immutable))
        .collect()
}

/// Attaches shard `shard` alone, as `attach_shards` does, to a connection
/// that queries only that shard (a search's extra connection, whose main
/// database is in memory). It checks that the file is that shard in this
/// layout; whether it belongs to the database is checked by
/// `attach_shards` on the search's main connection, for the same files.
pub fn attach_one_shard(conn: &Connection, db: &Path, shard: usize) -> Result<String> {
    attach_shard(conn, db, shard, None, false)
}

/// Attaches `<db>.fts<shard>` as `fts<shard>`, if it is that shard of a
/// database with id `db_id` (of any database when `None`).
/// A connection that searches again (the picker, the MCP server) finds
/// the shard attached by its first search and keeps it.
fn attach_shard(
    conn: &Connection,
    db: &Path,
    shard: usize,
    db_id: Option<&str>,
    immutable: bool,
) -> Result<String> {
    let path = shard_path(db, shard);
    if !path.exists() {
        return Err(StoreError::ShardMissing { path });
    }
    let name = shard_schema(shard);
    if is_attached(conn, &name) {
        return Ok(name);
    }
    match attach_checked(conn, &path, &name, shard, db_id, immutable) {
        Err(StoreError::NeedsRecovery { .. }) => {
            let _ = conn.execute("DETACH DATABASE ?1", [&name]);
            super::roll_back(&path)?;
            attach_checked(conn, &path, &name, shard, db_id, immutable)
        }
        other => other,
    }
}

/// Whether `conn` has a database named `name`, from SQLite's list of them
/// (`sqlite3_db_name`): no statement to prepare, which every shard reader
/// paid when this asked `pragma_database_list`.
fn is_attached(conn: &Connection, name: &str) -> bool {
    (0..)
        .map_while(|index| conn.db_name(index).ok())
        .any(|schema| schema == name)
}

fn attach_checked(
    conn: &Connection,
    path: &Path,
    name: &str,
    shard: usize,
    db_id: Option<&str>,
    immutable: bool,
) -> Result<String> {
    let missing = |err: rusqlite::Error| match sqlite_error(path)(err) {
        recover @ StoreError::NeedsRecovery { .. } => recover,
        _ => StoreError::ShardMissing {
            path: path.to_owned(),
        },
    };
    let mode = if immutable { "immutable=1" } else { "mode=ro" };
    conn.execute(
        "ATTACH DATABASE ?1 AS ?2",
        params![format!("file:{}?{mode}", uri_path(path)), name],
    )
    .map_err(sqlite_error(path))?;
    let belongs: Option<i64> = conn
        .query_row(
            &format!(
                "SELECT indexed_upto FROM {name}.shard
                 WHERE (?1 IS NULL OR db_id = ?1) AND shard = ?2"
            ),
            params![db_id, shard as i64],
            |row| row.get(0),
        )
        .optional()
        .map_err(missing)?;
    let version: i64 = conn
        .query_row(&format!("PRAGMA {name}.user_version"), [], |row| row.get(0))
        .map_err(missing)?;
    if belongs.is_none() || version != SHARD_VERSION {
        return Err(StoreError::ShardMissing {
            path: path.to_owned(),
        });
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard with `count` segments in its word index: one per
    /// transaction, FTS5's merging off as in a first load.
    fn shard_of_segments(count: i64) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SHARD_SCHEMA).unwrap();
        conn.execute_batch(&merge_settings(FIRST_LOAD_MERGE))
            .unwrap();
        for id in 0..count {
            conn.execute(
                "INSERT INTO fts(rowid, body) VALUES (?1, 'alpha beta gamma')",
                [id],
            )
            .unwrap();
        }
        assert_eq!(segments(&conn, "fts").unwrap(), count);
        conn
    }

    #[test]
    fn a_merge_step_grows_with_the_segments_it_reads_within_bounds() {
        let pgsz = 16338;
        let least = PURGE_STEP_BYTES / pgsz;
        let most = PURGE_STEP_MAX_BYTES / pgsz;
        for (count, leaves) in [
            (10, least),
            (100, 100 * STEP_LEAVES_PER_SEGMENT),
            (300, most),
        ] {
            let conn = shard_of_segments(count);
            assert_eq!(
                purge_step_leaves(&conn, "fts").unwrap(),
                leaves,
                "{count} segments"
            );
        }
        let conn = shard_of_segments(300);
        merge_whole(&conn).unwrap();
        assert_eq!(segments(&conn, "fts").unwrap(), 1);
        conn.execute(
            "INSERT INTO fts(fts, rank) VALUES ('integrity-check', 0)",
            [],
        )
        .unwrap();
    }
}
