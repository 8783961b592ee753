//! `piidx sql`: one read-only statement, any result shape, its rows handed
//! one at a time to a `RowSink` as SQLite steps through them: the first row
//! is printed at once, and memory does not grow with the result. A runaway
//! statement (a recursive CTE without end, a sort of everything) is stopped
//! by `Limits`: time spent in SQLite, and SQLite's heap.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;
use rusqlite::types::ValueRef;
use serde_json::Value;

use crate::store::{Index, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("piidx sql only reads; `{0}` would change the database (use sqlite3 if you mean it)")]
    Write(String),
    #[error(
        "piidx sql refuses `{0}`: it would reach past the index or change the connection; ask the index's tables (attach other files in sqlite3 if you mean to)"
    )]
    Refused(String),
    #[error(
        "the statement ran for {0:?} and was stopped; pass a larger --timeout (0: none) if it is meant to take long"
    )]
    Timeout(Duration),
    #[error(
        "the statement needed more than {} MiB of memory and was stopped; pass a larger --max-memory (0: none) if it is meant to",
        .0 >> 20
    )]
    Memory(u64),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sink could not take a row (its output went away or failed).
    #[error(transparent)]
    Output(#[from] std::io::Error),
}

/// How far one statement may go.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Time spent in SQLite (not waiting for the reader of the output, a
    /// pager, say); `None`: no limit.
    pub timeout: Option<Duration>,
    /// SQLite's whole heap (page cache, sorters, strings, the result row);
    /// `None`: no limit. Rows are not collected, so this bounds the process.
    pub memory: Option<u64>,
}

/// Where rows go: the column names once, then each row.
pub trait RowSink {
    fn columns(&mut self, names: &[String]) -> std::io::Result<()>;
    fn row(&mut self, values: Vec<Value>) -> std::io::Result<()>;
    /// After the last row.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Opens the index at `db`, runs `query` and hands its rows to `sink` as
/// they come. The full-text shards are attached as `fts0`, `fts1`, ... when
/// they exist; a query that does not use them runs without them. The
/// `search()` function (`search_fn`) is there too.
pub fn run(db: &Path, query: &str, limits: Limits, sink: &mut dyn RowSink) -> Result<(), SqlError> {
    if let Some(bytes) = limits.memory {
        limit_heap(bytes);
    }
    let mut store = Index::open(db)?;
    let _ = store.attach_fts();
    super::search_fn::register(store.connection(), db)?;
    let refusals = store.refuse_side_doors()?;
    let clock = Clock::new(limits.timeout);
    let stopped = clock.clone();
    store.interrupt_when(move || stopped.out_of_time())?;
    let stopped = |err: rusqlite::Error| match (err.sqlite_error_code(), limits.memory) {
        (Some(ErrorCode::OperationInterrupted), _) => SqlError::Timeout(clock.limit),
        (Some(ErrorCode::AuthorizationForStatementDenied), _) => {
            SqlError::Refused(refusals.last().unwrap_or_else(|| query.to_owned()))
        }
        (Some(ErrorCode::OutOfMemory), Some(bytes)) => SqlError::Memory(bytes),
        _ => SqlError::Sqlite(err),
    };
    let conn = store.connection();
    clock.start();
    let mut stmt = conn.prepare(query).map_err(stopped)?;
    if !stmt.readonly() {
        let verb = query
            .split_whitespace()
            .next()
            .unwrap_or(query)
            .to_uppercase();
        return Err(SqlError::Write(verb));
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    clock.pause();
    sink.columns(&columns)?;
    let count = columns.len();
    clock.start();
    let mut result = stmt.query([]).map_err(stopped)?;
    while let Some(row) = result.next().map_err(stopped)? {
        let mut values = Vec::with_capacity(count);
        for index in 0..count {
            values.push(to_json(row.get_ref(index)?));
        }
        clock.pause();
        sink.row(values)?;
        clock.start();
    }
    clock.pause();
    sink.finish()?;
    Ok(())
}

/// Caps SQLite's heap for the rest of the process. SQLite counts its memory
/// only with `SQLITE_CONFIG_MEMSTATUS`, which this build leaves off for speed
/// (`.cargo/config.toml`) and which can only be switched on before SQLite
/// starts: so before the first connection opens.
fn limit_heap(bytes: u64) {
    // SAFETY: sqlite3_config is called before any connection exists in
    // this process (it returns SQLITE_MISUSE otherwise, and the limit is
    // then not enforced); both calls only set process-wide numbers.
    unsafe {
        rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 1 as std::ffi::c_int);
        rusqlite::ffi::sqlite3_hard_heap_limit64(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// The time a statement has spent in SQLite, against its limit. Shared
/// with the progress handler, which runs inside SQLite's steps.
#[derive(Clone)]
struct Clock {
    limit: Duration,
    epoch: Instant,
    /// Nanoseconds since `epoch` at which the limit is reached while
    /// running; `u64::MAX` while paused or without a limit.
    deadline: Arc<AtomicU64>,
    /// Nanoseconds of the limit left when paused.
    left: Arc<AtomicU64>,
}

impl Clock {
    fn new(limit: Option<Duration>) -> Clock {
        let nanos = limit.map_or(u64::MAX, |limit| {
            u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX)
        });
        Clock {
            limit: limit.unwrap_or(Duration::MAX),
            epoch: Instant::now(),
            deadline: Arc::new(AtomicU64::new(u64::MAX)),
            left: Arc::new(AtomicU64::new(nanos)),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn start(&self) {
        let left = self.left.load(Ordering::Relaxed);
        let deadline = self.now().saturating_add(left);
        self.deadline.store(deadline, Ordering::Relaxed);
    }

    fn pause(&self) {
        let deadline = self.deadline.swap(u64::MAX, Ordering::Relaxed);
        if deadline != u64::MAX {
            self.left
                .store(deadline.saturating_sub(self.now()), Ordering::Relaxed);
        }
    }

    fn out_of_time(&self) -> bool {
        self.now() >= self.deadline.load(Ordering::Relaxed)
    }
}

/// SQLite values as JSON; blobs become `"<blob N bytes>"` (never raw bytes).
pub fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(bytes) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => Value::String(format!("<blob {} bytes>", bytes.len())),
    }
}
