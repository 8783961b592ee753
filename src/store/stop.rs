//! When a read must stop: a deadline, and a flag another thread sets (the
//! client went away, a request was cancelled). SQLite checks it from its
//! progress handler every few thousand steps, on the index's connection
//! and on every shard reader's, and stops the running statement with
//! `SQLITE_INTERRUPT`; the query layer turns that into its own error.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// SQLite's virtual-machine steps between two looks at a `Stop`.
const STEPS: std::ffi::c_int = 4096;

/// A deadline and a cancel flag, shared by every connection of one read.
/// The default has no budget of its own: `bounded` gives it one.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    budget: Option<Duration>,
    deadline: Option<Instant>,
    cancelled: Arc<AtomicBool>,
}

impl Stop {
    /// Stops `budget` from now.
    pub fn after(budget: Duration) -> Stop {
        Stop {
            budget: Some(budget),
            deadline: Instant::now().checked_add(budget),
            cancelled: Arc::default(),
        }
    }

    /// Never stops unless cancelled (asked for: `bounded` keeps it so).
    pub fn never() -> Stop {
        Stop {
            budget: Some(Duration::MAX),
            ..Stop::default()
        }
    }

    /// This `Stop` when it has a budget; else one of `budget` from now
    /// that shares its cancel flag.
    pub fn bounded(&self, budget: Duration) -> Stop {
        if self.budget.is_some() {
            return self.clone();
        }
        Stop {
            cancelled: self.cancelled.clone(),
            ..Stop::after(budget)
        }
    }

    /// The time it was given, if any.
    pub fn budget(&self) -> Option<Duration> {
        self.budget
    }

    /// Stops every read that shares this `Stop`, at its next look.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Cancelled, or past the deadline.
    pub fn reached(&self) -> bool {
        self.is_cancelled()
            || self
                .deadline
                .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Makes `conn`'s statements stop when this does, until the guard is
    /// dropped (a connection kept across requests must not keep an old
    /// deadline). Through SQLite's C API, as rusqlite's own setter needs
    /// the connection mutably and the queries hold it shared.
    pub fn watch<'c>(&self, conn: &'c Connection) -> Watching<'c> {
        let stop = Box::new(self.clone());
        // SAFETY: the handle is the live connection's; the pointer handed
        // to SQLite is `stop`'s, which the guard owns and keeps at one
        // address (boxed) until it removes the handler in `drop`; the
        // callback only reads it.
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(
                conn.handle(),
                STEPS,
                Some(reached),
                std::ptr::from_ref::<Stop>(&stop).cast_mut().cast(),
            );
        }
        Watching { conn, _stop: stop }
    }
}

/// SQLite's progress callback: non-zero stops the statement.
extern "C" fn reached(stop: *mut std::ffi::c_void) -> std::ffi::c_int {
    // SAFETY: `Stop::watch` passes a pointer to a `Stop` that outlives the
    // handler.
    let stop = unsafe { &*stop.cast::<Stop>() };
    std::ffi::c_int::from(stop.reached())
}

/// `Stop::watch`'s guard: removes the progress handler when dropped.
pub struct Watching<'c> {
    conn: &'c Connection,
    _stop: Box<Stop>,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `watch`; after this SQLite no longer holds the
        // pointer.
        unsafe {
            rusqlite::ffi::sqlite3_progress_handler(
                self.conn.handle(),
                0,
                None,
                std::ptr::null_mut(),
            );
        }
    }
}

/// True for the error SQLite gives when a `Stop` interrupted a statement.
pub fn is_interrupt(err: &rusqlite::Error) -> bool {
    err.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_past_its_deadline_is_interrupted_and_the_connection_recovers() {
        let conn = Connection::open_in_memory().unwrap();
        let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
        let stop = Stop::after(Duration::from_millis(50));
        {
            let _watching = stop.watch(&conn);
            let err = conn.query_row(endless, [], |_| Ok(())).unwrap_err();
            assert!(is_interrupt(&err), "{err}");
        }
        // The guard is gone: the same connection runs long statements again.
        let n: i64 = conn
            .query_row(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) SELECT count(*) FROM c",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(n, 200000);
        let cancelled = Stop::never();
        cancelled.cancel();
        let _watching = cancelled.watch(&conn);
        assert!(is_interrupt(
            &conn.query_row(endless, [], |_| Ok(())).unwrap_err()
        ));
    }
}
