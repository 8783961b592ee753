//! The read side of the full-text shards: connections of their own, so
//! that a query reads every shard at once (on one connection, attached
//! shards are read one after another). `fts` has the shards' writers.
//!
//! Each reader is a thread holding an in-memory connection with its shard
//! attached as `fts<shard>` and `rank::FUNCTION` registered, opened there
//! from the start of the command, while the index's own connection opens,
//! and running the queries sent to it in order. Opened when first needed,
//! on a thread per query, it took ~1.9 ms of a search's critical path
//! (open, schema, attach), and on two cores a new thread next to the one
//! opening waited up to a millisecond to be scheduled. The index itself is
//! attached to a reader's connection (`Index::attach_to`) only when a query
//! first needs its tables: most need the shard alone, and reading the
//! index's schema is most of opening it; on two cores, that work slowed the
//! index's own opening.
//!
//! A caller that knows its first queries before the index is open starts
//! them at once (`ShardReaders::start`: SQL text and parameters for every
//! shard, shard 0's on a reader of its own) and takes their rows later
//! (`Started::take_if`), if they are still the queries it needs. With
//! shard 0's reader, every query of the shards alone runs on the readers,
//! and the index's connection need not attach the shards at all: the
//! readers tell which database their files belong to (`belong_to`), the
//! check the index's connection made when it attached them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, mpsc};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};

use super::{Index, Stop, StoreError, attach_one_shard, rank, shard_path};

/// Why a query on the shards' connections failed.
#[derive(Debug, thiserror::Error)]
pub enum ShardReadError {
    /// The query itself (its SQL, or an FTS5 expression it was given).
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// Attaching the index to a reader's connection.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A reader could not open its connection, or its thread stopped.
    #[error("a full-text shard's connection failed: {0}")]
    Connection(String),
}

/// Readers of shards 1, 2, ...; shard 0 is read by the index's own
/// connection, or by a reader of its own when one was opened
/// (`open_shard0`) and a query needs the shard alone. Dropping them ends
/// their threads, which close their connections.
#[derive(Default)]
pub struct ShardReaders {
    readers: Vec<ShardReader>,
    /// Shard 0's reader (`open_shard0`). Like the others, it lives as long
    /// as these: a command about to exit, which leaves its connections
    /// open (`cmd/search.rs`), does not close it (unmapping its shard) on
    /// the other core meanwhile.
    shard0: Option<ShardReader>,
    /// When the queries sent from now on stop (`set_stop`).
    stop: Stop,
}

impl ShardReaders {
    /// Starts opening a reader for every shard file after the first that
    /// `db` has.
    pub fn open(db: &Path) -> ShardReaders {
        let readers = (1..)
            .take_while(|&shard| shard_path(db, shard).exists())
            .map(|shard| ShardReader::open(db.to_owned(), shard))
            .collect();
        ShardReaders {
            readers,
            shard0: None,
            stop: Stop::never(),
        }
    }

    /// Starts opening a reader for shard 0 of `db`, if there is none: the
    /// queries that need the shard alone then run there, and the index's
    /// connection need not attach the shards (`belong_to`).
    pub fn open_shard0(&mut self, db: &Path) {
        if self.shard0.is_none() {
            self.shard0 = Some(ShardReader::open(db.to_owned(), 0));
        }
    }

    /// Whether shard 0 has a reader (`open_shard0`).
    pub fn has_shard0(&self) -> bool {
        self.shard0.is_some()
    }

    /// True when shard 0 has a reader and every reader's file is that
    /// shard of the database whose shards have the id `db_id` (what the
    /// index's connection checks when it attaches them). Waits for the
    /// readers to be open; false if one could not be opened.
    pub fn belong_to(&self, db_id: &str) -> bool {
        self.shard0.is_some()
            && self
                .shard0
                .iter()
                .chain(&self.readers)
                .all(|reader| reader.db_id.wait().as_deref() == Some(db_id))
    }

    /// The queries sent from now on stop when `stop` does (each reader's
    /// connection watches it while it runs one).
    pub fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }

    /// Runs `job`, which needs no connection, on the thread of a reader
    /// (shard 0's, else shard 1's) after the queries sent to it before: a
    /// thread that is up, and idle once they are done. The reply comes on
    /// the returned channel; `None` when there is no reader to run it.
    pub fn spare<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<mpsc::Receiver<T>> {
        let reader = self.shard0.as_ref().or(self.readers.first())?;
        let (reply, replied) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |_| {
            let _ = reply.send(job());
        });
        reader.jobs.send(job).ok()?;
        Some(replied)
    }

    /// How many queries `run` runs at once: one on the index's connection
    /// and one per reader.
    pub fn connections(&self) -> usize {
        self.readers.len() + 1
    }

    /// Keeps the readers of shards 1 to `shards - 1` of `index` (the
    /// shards it records, which the files found may not be), opening those
    /// that are missing.
    pub fn fit(&mut self, index: &Index, shards: usize) {
        self.readers.truncate(shards.saturating_sub(1));
        while self.readers.len() + 1 < shards {
            let shard = self.readers.len() + 1;
            self.readers
                .push(ShardReader::open(index.path().to_owned(), shard));
        }
    }

    /// Runs `jobs[k]` with `params` on shard `k` of `db`, before the
    /// index is open: shard 0's on its reader (`open_shard0`), the others'
    /// on theirs, each by `run(connection, job, params)`.
    pub fn start<J, T>(
        &mut self,
        db: &Path,
        jobs: Vec<J>,
        params: Vec<SqlValue>,
        run: ShardQuery<J, T>,
    ) -> Started<J, T>
    where
        J: Clone + Send + 'static,
        T: Send + 'static,
    {
        self.open_shard0(db);
        let replies = self
            .shard0
            .iter()
            .chain(&self.readers)
            .zip(&jobs)
            .map(|(reader, job)| {
                let (job, params, stop) = (job.clone(), params.clone(), self.stop.clone());
                reader.run(false, move |conn| {
                    let _watching = stop.watch(conn);
                    run(conn, &job, &params)
                })
            })
            .collect();
        Started {
            jobs,
            params,
            replies: Some(replies),
        }
    }

    /// Runs `jobs[k]` on reader `k` and `jobs[0]` on `index`'s connection,
    /// or on shard 0's reader when there is one and the queries read the
    /// shards alone, all at once, and returns their rows in job order.
    /// `needs_index`: the queries read the index's tables, not only the
    /// shards. There are never more jobs than connections.
    pub fn run<J, T>(
        &self,
        index: &Index,
        jobs: Vec<J>,
        needs_index: bool,
        run: impl Fn(&Connection, &J) -> rusqlite::Result<Vec<T>> + Clone + Send + 'static,
    ) -> Result<Vec<T>, ShardReadError>
    where
        J: Send + 'static,
        T: Send + 'static,
    {
        let mut jobs = jobs.into_iter();
        let Some(first) = jobs.next() else {
            return Ok(Vec::new());
        };
        let send = |reader: &ShardReader, job: J| {
            let (run, stop) = (run.clone(), self.stop.clone());
            reader.run(needs_index, move |conn| {
                let _watching = stop.watch(conn);
                run(conn, &job)
            })
        };
        // Shard 0's job on its reader, or kept for the index's connection.
        let (here, mut replies) = match self.shard0.as_ref().filter(|_| !needs_index) {
            Some(reader) => (None, vec![send(reader, first)]),
            None => (Some(first), Vec::new()),
        };
        replies.extend(
            self.readers
                .iter()
                .zip(jobs)
                .map(|(reader, job)| send(reader, job)),
        );
        let mut rows = match here {
            Some(job) => run(index.connection(), &job)?,
            None => Vec::new(),
        };
        receive(replies, &mut rows)?;
        Ok(rows)
    }
}

/// How `ShardReaders::start` runs a shard's query: on the connection that
/// has the shard attached, with the job (which names the shard) and its
/// parameters.
pub type ShardQuery<J, T> = fn(&Connection, &J, &[SqlValue]) -> rusqlite::Result<Vec<T>>;

/// Queries `ShardReaders::start` sent to every shard, and where their
/// rows arrive.
pub struct Started<J, T> {
    jobs: Vec<J>,
    params: Vec<SqlValue>,
    /// `None` once taken.
    replies: Option<Vec<Reply<T>>>,
}

impl<J: PartialEq, T> Started<J, T> {
    /// Every shard's rows, shard 0's first, if the queries started were
    /// `jobs` with `params`; `None` otherwise (their rows are dropped) and
    /// after the first call.
    pub fn take_if(
        &mut self,
        jobs: &[J],
        params: &[SqlValue],
    ) -> Option<Result<Vec<T>, ShardReadError>> {
        let replies = self.replies.take()?;
        if self.jobs != jobs || self.params != params {
            return None;
        }
        let mut rows = Vec::new();
        Some(receive(replies, &mut rows).map(|()| rows))
    }
}

/// Where a `ShardReader`'s rows arrive.
type Reply<T> = mpsc::Receiver<Result<Vec<T>, ShardReadError>>;

/// Work for a `ShardReader`'s thread: its connection, or why it could not
/// be opened.
type Job = Box<dyn FnOnce(Result<&mut ReaderConnection, &str>) + Send>;

/// The queue of the thread that holds one shard's connection, which ends
/// (and closes it) when this is dropped.
struct ShardReader {
    jobs: mpsc::Sender<Job>,
    /// The id of the database the shard belongs to (`shard.db_id`), once
    /// the connection is open; `None` if it could not be opened or read.
    db_id: Arc<OnceLock<Option<String>>>,
}

impl ShardReader {
    fn open(db: PathBuf, shard: usize) -> ShardReader {
        let (jobs, queue) = mpsc::channel::<Job>();
        let db_id = Arc::new(OnceLock::new());
        let found = Unknown(db_id.clone());
        // A thread that cannot start drops this closure, and `found` with
        // it: its jobs then find no one to answer, and its id is `None`.
        let _ = std::thread::Builder::new().spawn(move || {
            let mut opened = ReaderConnection::open(db, shard).map_err(|err| err.to_string());
            let _ = found
                .0
                .set(opened.as_ref().ok().and_then(|conn| conn.db_id.clone()));
            for job in queue {
                job(opened.as_mut().map_err(|message| message.as_str()));
            }
        });
        ShardReader { jobs, db_id }
    }

    /// Runs `query` on the connection's thread (with the index's tables
    /// when `needs_index`); the result arrives on the returned channel.
    fn run<T: Send + 'static>(
        &self,
        needs_index: bool,
        query: impl FnOnce(&Connection) -> rusqlite::Result<Vec<T>> + Send + 'static,
    ) -> Reply<T> {
        let (reply, replied) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let rows = match conn {
                Ok(conn) => conn
                    .connection(needs_index)
                    .and_then(|conn| Ok(query(conn)?)),
                Err(message) => Err(ShardReadError::Connection(message.to_owned())),
            };
            // The caller stopped waiting (it failed on another connection).
            let _ = reply.send(rows);
        });
        // A thread that is gone has dropped the job with its `reply`: the
        // receiver says so.
        let _ = self.jobs.send(job);
        replied
    }
}

/// A reader's `db_id`, set to `None` when dropped unset: a thread that
/// ends (or panics) before it knows the id, or never starts, leaves
/// `belong_to` an answer rather than a wait for ever.
struct Unknown(Arc<OnceLock<Option<String>>>);

impl Drop for Unknown {
    fn drop(&mut self) {
        let _ = self.0.set(None);
    }
}

/// The connection a `ShardReader`'s thread holds: in memory, with its
/// shard attached and `rank::FUNCTION`; the index is attached when a query
/// first needs its tables.
struct ReaderConnection {
    conn: Connection,
    db: PathBuf,
    index: bool,
    /// `shard.db_id` of the shard's file.
    db_id: Option<String>,
}

impl ReaderConnection {
    fn open(db: PathBuf, shard: usize) -> Result<ReaderConnection, ShardReadError> {
        let conn = Connection::open_in_memory()?;
        let schema = attach_one_shard(&conn, &db, shard)?;
        // Mapped, the shard's pages are read in place: a `pread` copied each
        // 4 KiB page out of the OS page cache into a page just allocated (and
        // faulted in) for SQLite's cache; a mapped read faults in up to 16
        // pages at once. Ranking `the`'s 2,500 newest matches in one shard of
        // the 1 GB benchmark (`sqlite3` shell, whole process): 8.6 → 6.3 ms
        // CPU (docs/performance.md). Only the shard: the index, attached
        // later for some queries, is read a few pages at a time.
        conn.pragma_update(Some(schema.as_str()), "mmap_size", i64::MAX)?;
        rank::register(&conn)?;
        let db_id = conn
            .query_row(
                &format!("SELECT db_id FROM {schema}.shard WHERE shard = ?1"),
                [shard as i64],
                |row| row.get(0),
            )
            .optional()?;
        Ok(ReaderConnection {
            conn,
            db,
            index: false,
            db_id,
        })
    }

    fn connection(&mut self, needs_index: bool) -> Result<&Connection, ShardReadError> {
        if needs_index && !self.index {
            Index::attach_to(&self.conn, &self.db)?;
            self.index = true;
        }
        Ok(&self.conn)
    }
}

/// Waits for every reply and adds its rows to `rows`, in order.
fn receive<T>(replies: Vec<Reply<T>>, rows: &mut Vec<T>) -> Result<(), ShardReadError> {
    for reply in replies {
        rows.extend(reply.recv().map_err(|_| thread_stopped())??);
    }
    Ok(())
}

/// A `ShardReader` whose thread ended without an answer.
fn thread_stopped() -> ShardReadError {
    ShardReadError::Connection("its thread stopped before answering".to_owned())
}
