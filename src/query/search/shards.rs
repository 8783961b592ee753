//! Connections of their own for the full-text shards, each on a thread of
//! its own, so that every shard is queried at once; and the first scoring
//! queries of a ranked word search, started on them before the index is
//! open.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rusqlite::types::Value as SqlValue;

use super::plan::{Plan, plan};
use super::stage::{query_rows, rank_window};
use super::weigh::{best_bm25_first, rank_sql};
use super::{SearchError, SearchOptions, Sort};
use crate::query::rank;
use crate::store::Index;

/// Connections of their own for the full-text shards after the first, so
/// that every shard is queried at once (on one connection, shards are
/// queried one after another). Each lives on a thread of its own, opened
/// there from the start of the command while the main connection opens,
/// and runs the queries sent to it. Opened when first needed, on a thread
/// per query, it took ~1.9 ms of a search's critical path (open, schema,
/// attach), and on two cores a new thread next to the one opening waited
/// up to a millisecond to be scheduled.
#[derive(Default)]
pub struct ShardConnections {
    /// Shards 1, 2, ...: the main connection queries shard 0.
    workers: Vec<ShardWorker>,
    scoring: Option<ScoringStarted>,
}

/// The first scoring queries of a ranked word search (windowed, no session
/// restriction), started on every shard before the index is open: they need
/// only the query and the shard files, and scoring was most of the time
/// after opening. `search` takes their rows when its first queries are
/// these, and drops them otherwise (when the index records another number
/// of shards than there are files).
struct ScoringStarted {
    sqls: Vec<String>,
    expr: String,
    rows: Vec<Reply<(i64, f64)>>,
    /// A connection for shard 0, which the main one queries otherwise.
    _shard0: ShardWorker,
}

impl ShardConnections {
    /// Starts opening one connection per shard file after the first that
    /// `db` has, when `options` will query the shards (a word or trigram
    /// search; a scan reads the main file only), and for a ranked word
    /// search its first scoring queries. A connection the search turns out
    /// not to need is closed unused.
    pub fn open(db: &Path, options: &SearchOptions) -> ShardConnections {
        let Ok(Plan::Fts { table, expr }) = plan(options) else {
            return ShardConnections::default();
        };
        let workers: Vec<ShardWorker> = (1..)
            .take_while(|&shard| crate::store::shard_path(db, shard).exists())
            .map(|shard| ShardWorker::open(db.to_owned(), shard))
            .collect();
        let scoring = (options.sort == Sort::Rank && !options.raw)
            .then(|| ScoringStarted::start(db, table, expr, &workers));
        ShardConnections { workers, scoring }
    }

    /// The connections of shards 1 to `shards - 1`: those opening in
    /// advance, then new ones.
    pub(super) fn take(&mut self, shards: usize, db: &Path) -> Vec<ShardWorker> {
        let mut workers = std::mem::take(&mut self.workers);
        workers.truncate(shards.saturating_sub(1));
        while workers.len() + 1 < shards {
            workers.push(ShardWorker::open(db.to_owned(), workers.len() + 1));
        }
        workers
    }

    /// The rows of the scoring queries started in advance, if they are
    /// `sqls` for `expr`; they are given out once.
    pub(super) fn started_scoring(
        &mut self,
        sqls: &[String],
        expr: &str,
    ) -> Option<Result<Vec<(i64, f64)>, SearchError>> {
        let scoring = self
            .scoring
            .take()
            .filter(|scoring| scoring.sqls == sqls && scoring.expr == expr)?;
        let mut matches = Vec::new();
        Some(receive(scoring.rows, &mut matches).map(|()| best_bm25_first(matches)))
    }
}

impl ScoringStarted {
    /// Sends shard 0's query to a new connection, the others' to `workers`,
    /// with the window `search` gives them when the index records as many
    /// shards as there are files.
    fn start(db: &Path, table: &str, expr: String, workers: &[ShardWorker]) -> ScoringStarted {
        let shards = workers.len() + 1;
        let window = rank_window(shards);
        let sqls: Vec<String> = (0..shards)
            .map(|shard| {
                let source = format!("{}.{table}", crate::store::shard_schema(shard));
                rank_sql(table, &source, "", &window)
            })
            .collect();
        let shard0 = ShardWorker::open(db.to_owned(), 0);
        let rows = std::iter::once(&shard0)
            .chain(workers)
            .zip(&sqls)
            .map(|(worker, sql)| {
                let (sql, params) = (sql.clone(), [SqlValue::Text(expr.clone())]);
                worker.run(false, move |conn| {
                    query_rows(conn, &sql, &params, |row| Ok((row.get(0)?, row.get(1)?)))
                })
            })
            .collect();
        ScoringStarted {
            sqls,
            expr,
            rows,
            _shard0: shard0,
        }
    }
}

/// Where a `ShardWorker`'s rows arrive.
type Reply<T> = mpsc::Receiver<Result<Vec<T>, SearchError>>;

/// Work for a `ShardWorker`'s thread: its connection, or why it could not
/// be opened.
type Job = Box<dyn FnOnce(Result<&mut ShardConnection, &str>) + Send>;

/// One of `ShardConnections`: the queue of the thread that holds the
/// connection, which ends (and closes it) when this is dropped.
pub(super) struct ShardWorker {
    jobs: mpsc::Sender<Job>,
}

impl ShardWorker {
    fn open(db: PathBuf, shard: usize) -> ShardWorker {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::spawn(move || {
            let mut opened = ShardConnection::open(db, shard).map_err(|err| err.to_string());
            for job in queue {
                job(opened.as_mut().map_err(|message| message.as_str()));
            }
        });
        ShardWorker { jobs }
    }

    /// Runs `query` on the connection's thread (with the index's tables
    /// when `needs_index`); the result arrives on the returned channel.
    fn run<T: Send + 'static>(
        &self,
        needs_index: bool,
        query: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<Vec<T>> + Send + 'static,
    ) -> Reply<T> {
        let (reply, replied) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |conn| {
            let rows = match conn {
                Ok(conn) => conn
                    .connection(needs_index)
                    .and_then(|conn| Ok(query(conn)?)),
                Err(message) => Err(SearchError::ShardConnection(message.to_owned())),
            };
            // The search stopped waiting (it failed on another connection).
            let _ = reply.send(rows);
        });
        // A thread that is gone has dropped the job with its `reply`: the
        // receiver says so.
        let _ = self.jobs.send(job);
        replied
    }
}

/// The connection a `ShardWorker`'s thread holds: in memory, with its
/// shard attached as `fts<shard>` and `rank::FUNCTION`; the index itself is
/// attached (`Index::attach_to`) when a query first needs its tables. Most
/// need the shard alone, and reading the index's schema is most of opening
/// it: on two cores, that work slowed the main connection's own opening.
struct ShardConnection {
    conn: rusqlite::Connection,
    db: PathBuf,
    index: bool,
}

impl ShardConnection {
    fn open(db: PathBuf, shard: usize) -> Result<ShardConnection, SearchError> {
        let conn = rusqlite::Connection::open_in_memory()?;
        crate::store::attach_one_shard(&conn, &db, shard)?;
        rank::register(&conn)?;
        Ok(ShardConnection {
            conn,
            db,
            index: false,
        })
    }

    fn connection(&mut self, needs_index: bool) -> Result<&rusqlite::Connection, SearchError> {
        if needs_index && !self.index {
            Index::attach_to(&self.conn, &self.db)?;
            self.index = true;
        }
        Ok(&self.conn)
    }
}

/// Runs `jobs[0]` on `store` and `jobs[k]` on `extra[k-1]`, all at once
/// (`needs_index`: the queries read the index's tables, not only the
/// shards). There are never more jobs than connections.
pub(super) fn on_connections<J, T>(
    store: &Index,
    extra: &[ShardWorker],
    jobs: Vec<J>,
    needs_index: bool,
    run: impl Fn(&rusqlite::Connection, &J) -> rusqlite::Result<Vec<T>> + Clone + Send + 'static,
) -> Result<Vec<T>, SearchError>
where
    J: Send + 'static,
    T: Send + 'static,
{
    let mut jobs = jobs.into_iter();
    let Some(first) = jobs.next() else {
        return Ok(Vec::new());
    };
    let replies: Vec<_> = extra
        .iter()
        .zip(jobs)
        .map(|(connection, job)| {
            let run = run.clone();
            connection.run(needs_index, move |conn| run(conn, &job))
        })
        .collect();
    let mut rows = run(store.connection(), &first)?;
    receive(replies, &mut rows)?;
    Ok(rows)
}

/// Waits for every reply and adds its rows to `rows`, in order.
fn receive<T>(replies: Vec<Reply<T>>, rows: &mut Vec<T>) -> Result<(), SearchError> {
    for reply in replies {
        rows.extend(reply.recv().map_err(|_| thread_stopped())??);
    }
    Ok(())
}

/// A `ShardWorker` whose thread ended without an answer.
fn thread_stopped() -> SearchError {
    SearchError::ShardConnection("its thread stopped before answering".to_owned())
}
