//! `PIIDX_SQL_PROFILE=FILE`: what each statement of the sync's writer cost,
//! timed between SQLite's trace events (`sqlite3_trace_v2`) of its start
//! and its end.
//!
//! `perf` splits a sync's CPU by thread and C function, but the writer's
//! time is spread over B-tree and pager functions that every statement
//! shares: this says which statements (which tables, which indexes) it
//! goes to. One line per distinct statement, most expensive first:
//! milliseconds, calls, microseconds per call, and the SQL on one line.
//! Statements that others run inside them (FTS5's own, those of triggers)
//! have lines of their own and count in the one that ran them too.
//!
//! Off unless the variable is set; the file is written when the writer
//! closes (docs/performance.md shows how it was used).

use rusqlite::Connection;
use rusqlite::trace::{TraceEvent, TraceEventCodes};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Totals {
    calls: u64,
    time: Duration,
    /// When the run in progress began, if one is.
    started: Option<Instant>,
}

type Statements = Arc<Mutex<HashMap<String, Totals>>>;

/// The writer's statement times, written to `path` on drop.
pub(super) struct SqlProfile {
    path: PathBuf,
    statements: Statements,
}

impl SqlProfile {
    /// Starts timing `conn`'s statements when `PIIDX_SQL_PROFILE` names a
    /// file.
    pub(super) fn from_env(conn: &mut Connection) -> Option<SqlProfile> {
        let path = PathBuf::from(std::env::var_os("PIIDX_SQL_PROFILE")?);
        let statements = Statements::default();
        let sink = Arc::clone(&statements);
        // SQLite's own duration (`TraceEvent::Profile`) counts whole
        // milliseconds on Unix, so each run is timed here from its start
        // (`TraceEvent::Stmt`, also sent again for each trigger it fires:
        // the first one counts) to its end.
        let record = move |event: TraceEvent<'_>| {
            let (stmt, ended) = match event {
                TraceEvent::Stmt(stmt, _) => (stmt, false),
                TraceEvent::Profile(stmt, _) => (stmt, true),
                _ => return,
            };
            let now = Instant::now();
            let sql = stmt.sql();
            let mut statements = sink.lock().unwrap_or_else(PoisonError::into_inner);
            let totals = match statements.get_mut(sql.as_ref()) {
                Some(totals) => totals,
                None => statements.entry(sql.into_owned()).or_default(),
            };
            if !ended {
                totals.started.get_or_insert(now);
            } else if let Some(started) = totals.started.take() {
                totals.calls += 1;
                totals.time += now - started;
            }
        };
        let events = TraceEventCodes::SQLITE_TRACE_STMT | TraceEventCodes::SQLITE_TRACE_PROFILE;
        conn.trace_v2(events, Some(record)).ok()?;
        Some(SqlProfile { path, statements })
    }

    fn write(&self) -> std::io::Result<()> {
        let statements = self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut rows: Vec<_> = statements.iter().collect();
        rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| a.0.cmp(b.0)));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&self.path)?);
        for (sql, totals) in rows.into_iter().filter(|(_, totals)| totals.calls > 0) {
            let ms = totals.time.as_secs_f64() * 1e3;
            let per_call = ms * 1e3 / totals.calls as f64;
            let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
            writeln!(out, "{ms:.3}\t{}\t{per_call:.2}\t{sql}", totals.calls)?;
        }
        out.flush()
    }
}

impl Drop for SqlProfile {
    fn drop(&mut self) {
        if let Err(err) = self.write() {
            eprintln!(
                "piidx: could not write the SQL profile (PIIDX_SQL_PROFILE) to {}: {err}",
                self.path.display()
            );
        }
    }
}
