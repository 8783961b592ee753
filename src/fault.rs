//! Deterministic crash points, for tests only.
//!
//! A crash test that sends `kill -9` after a delay can lose its race on a
//! fast machine (the sync is already done) and then passes without testing
//! anything. Instead, tests set `PIIDX_TEST_KILL_AT=<point>:<n>` and the
//! process kills itself with SIGKILL the `n`-th time it reaches `<point>`:
//!
//! * `commit`: right after the main database committed a transaction, before
//!   the full-text shards got its chunks;
//! * `batch`: after a batch was applied inside the open transaction, with the
//!   page cache written to the file (a hot journal during a first sync);
//! * `shard`: in a shard writer, with its transaction's rows written to the
//!   file but not committed (a hot journal in the shard);
//! * `push_copy`: in `piidx push`, a batch's rows sent to PostgreSQL inside
//!   its open transaction, before the commit;
//! * `push`: in `piidx push`, right after PostgreSQL committed a batch, before
//!   the index recorded it.
//!
//! `PIIDX_TEST_BATCH_BYTES=<n>` makes batches (and commits) that small, so a
//! small test file spans many committed batches.
//!
//! `PIIDX_TEST_LOAD_SEGMENTS=<n>` makes a shard's first load merge its
//! segments whenever it holds `n` (see `store::fts::LOAD_SEGMENTS`), so a
//! small tree reaches that merge.
//!
//! `PIIDX_TEST_PANIC=<place>` panics at a named place (`pick`: after the
//! picker's first frame), to test what a panic leaves behind.
//!
//! `PIIDX_TEST_HOLD=search` makes every search wait, before it reads
//! anything, until it is told to stop (cancelled, or out of time): a slow
//! search whenever a test needs one, with no race against the machine.
//! `PIIDX_TEST_HOLD=commit` holds a sync right after its first commit, with
//! the lock taken; `PIIDX_TEST_HOLD_DIR` lets the test see the hold reached
//! and release it (see `hold_if_asked`).
//!
//! Unset (always, outside tests), each check is one relaxed atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    Commit,
    Batch,
    Shard,
    PushCopy,
    Push,
}

struct Plan {
    kill_at: Option<(Point, u64)>,
    batch_bytes: Option<u64>,
    load_segments: Option<i64>,
}

static PLAN: OnceLock<Plan> = OnceLock::new();
static REACHED: [AtomicU64; 5] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

fn plan() -> &'static Plan {
    PLAN.get_or_init(|| Plan {
        kill_at: std::env::var("PIIDX_TEST_KILL_AT")
            .ok()
            .and_then(|spec| parse_kill_at(&spec)),
        batch_bytes: std::env::var("PIIDX_TEST_BATCH_BYTES")
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 0),
        load_segments: std::env::var("PIIDX_TEST_LOAD_SEGMENTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > 1),
    })
}

/// How many segments a shard's first load lets an index hold before it
/// merges them: `PIIDX_TEST_LOAD_SEGMENTS`, else `default`.
pub fn load_segments(default: i64) -> i64 {
    plan().load_segments.unwrap_or(default)
}

fn parse_kill_at(spec: &str) -> Option<(Point, u64)> {
    let (point, n) = spec.split_once(':')?;
    let point = match point {
        "commit" => Point::Commit,
        "batch" => Point::Batch,
        "shard" => Point::Shard,
        "push_copy" => Point::PushCopy,
        "push" => Point::Push,
        _ => return None,
    };
    Some((point, n.parse().ok()?))
}

/// True when the process will die at this arrival: the caller then makes
/// the state worth testing (flushes its page cache) and calls `kill_now`.
pub fn due(point: Point) -> bool {
    let Some((at, n)) = plan().kill_at else {
        return false;
    };
    if at != point {
        return false;
    }
    REACHED[point as usize].fetch_add(1, Ordering::SeqCst) + 1 == n
}

/// Panics when `PIIDX_TEST_PANIC` names `place`: a test's way to check
/// that a panic there leaves things (the terminal) as they were.
pub fn panic_if_due(place: &str) {
    if std::env::var("PIIDX_TEST_PANIC").is_ok_and(|value| value == place) {
        panic!("PIIDX_TEST_PANIC={place}");
    }
}

/// Waits while `PIIDX_TEST_HOLD` names `place`, until `stopped` says so or
/// the test releases it. With `PIIDX_TEST_HOLD_DIR=<dir>`, arriving creates
/// `<dir>/held` (the test's sign that the process is there) and the hold
/// ends once `<dir>/release` exists; later arrivals then pass at once.
pub fn hold_if_asked(place: &str, stopped: impl Fn() -> bool) {
    static HOLD: OnceLock<Option<String>> = OnceLock::new();
    let hold = HOLD.get_or_init(|| std::env::var("PIIDX_TEST_HOLD").ok());
    if hold.as_deref() != Some(place) {
        return;
    }
    let dir = std::env::var_os("PIIDX_TEST_HOLD_DIR").map(std::path::PathBuf::from);
    if let Some(dir) = &dir {
        // A test hook: if the sign cannot be written the test times out
        // waiting for it and says so; nothing to report from here.
        let _ = std::fs::write(dir.join("held"), place);
    }
    let released = || dir.as_ref().is_some_and(|dir| dir.join("release").exists());
    while !stopped() && !released() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Dies as `kill -9` would: no destructor, no flush, no unlock.
pub fn kill_now() -> ! {
    // SAFETY: kill(2) and getpid(2) have no memory-safety preconditions.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL cannot be caught; this is not reached.
    std::process::abort()
}

/// `due(point)` and then die at once.
pub fn reached(point: Point) {
    if due(point) {
        kill_now();
    }
}

/// The batch size to use: `PIIDX_TEST_BATCH_BYTES` when set, else `normal`.
pub fn batch_bytes(normal: u64) -> u64 {
    plan().batch_bytes.unwrap_or(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_specs_parse() {
        assert_eq!(parse_kill_at("commit:3"), Some((Point::Commit, 3)));
        assert_eq!(parse_kill_at("shard:1"), Some((Point::Shard, 1)));
        assert_eq!(parse_kill_at("nope:1"), None);
        assert_eq!(parse_kill_at("batch"), None);
    }
}
