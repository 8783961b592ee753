//! `piidx_bm25(fts)`: the FTS5 auxiliary function search ranks with. It is
//! part of the store because the shards' readers (`shard_readers`) register
//! it on their connections, as search does on the index's.
//!
//! It is FTS5's own `bm25()` (k1 = 1.2, b = 0.75, the same formula, the same
//! per-phrase IDF) except for a query of a single phrase, which gets no IDF
//! factor. `bm25()` computes each phrase's IDF before it scores the first
//! row, by walking every match of the phrase in the table: for a common word
//! that walk is most of the ranking query even when only the newest few
//! thousand matches are scored (4 ms of 5.5 for `the` in one shard of the
//! 1 GB benchmark database, docs/performance.md). With one phrase the IDF
//! multiplies every row's score by the same number, so it cannot change the
//! order; left out, it also stops differing between the shards (each shard
//! has its own row and match counts), so their scores compare exactly.
//!
//! Each phrase's count in a row is read from its own positions
//! (`xPhraseFirst`, `xPhraseNext`), not from the row's instance list, which
//! FTS5 builds by merging every phrase's positions (`phrase_frequencies`).
//!
//! Each row's length (its token count, for the length normalisation) is
//! what FTS5's `xColumnSize` gives, which looks it up in the table's
//! `<table>_docsize` rows with a statement of its own (~0.6 µs a row, most
//! of a shard's ranking of a common word's newest matches). Given the shard
//! and table as `piidx_bm25(fts, 'fts0', 'fts')`, it reads the lengths the
//! shard keeps in blocks instead (`lengths`): one small row per block of
//! neighbouring chunks. A row whose length is not there is asked of
//! `xColumnSize`, so the scores are the same either way.
//!
//! Registered per connection through the `fts5_api` pointer FTS5 hands out
//! to `SELECT fts5(?1)` (the documented way; rusqlite has no FTS5 API).

use rusqlite::ffi;
use std::ffi::{c_int, c_void};

use super::lengths;

/// The SQL name of the function.
pub const FUNCTION: &str = "piidx_bm25";

/// BM25's constants, as FTS5 sets them.
pub(crate) const K1: f64 = 1.2;
pub(crate) const B: f64 = 0.75;

/// Makes `piidx_bm25` available to the FTS5 tables of `conn`, attached
/// databases included.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is only used while `conn` is borrowed, on this
    // thread; the statement is finalized before returning.
    let db = unsafe { conn.handle() };
    let api = unsafe { super::tokenizer::fts5_api(db) };
    let rc = match api {
        Some(api) => unsafe {
            match (*api).xCreateFunction {
                Some(create) => create(
                    api,
                    c"piidx_bm25".as_ptr(),
                    std::ptr::null_mut(),
                    Some(piidx_bm25),
                    None,
                ),
                None => ffi::SQLITE_ERROR,
            }
        },
        None => ffi::SQLITE_ERROR,
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some(format!("cannot register {FUNCTION} with FTS5")),
        ))
    }
}

/// What one query computes once and reuses for every row (FTS5 auxdata).
struct QueryData {
    avgdl: f64,
    idf: Vec<f64>,
    freq: Vec<f64>,
    /// The shard's lengths, when the function was told the shard and table.
    lengths: Option<Lengths>,
}

unsafe extern "C" fn piidx_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with a valid API, cursor context and result
    // context, and `n_val` argument values, for the duration of the call.
    unsafe {
        let table = || lengths_table(ctx, n_val, values);
        match score(&*api, fts, table) {
            Ok(score) => ffi::sqlite3_result_double(ctx, score),
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}

/// An entry of the extension API, or SQLITE_ERROR when this FTS5 lacks it.
fn method<T>(method: Option<T>) -> Result<T, c_int> {
    method.ok_or(ffi::SQLITE_ERROR)
}

fn check(rc: c_int) -> Result<(), c_int> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rc)
    }
}

/// The current row's score: lower is better, as with `bm25()`. `table`:
/// the connection, shard and table named in the arguments, if any.
unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    table: impl FnOnce() -> Option<(*mut ffi::sqlite3, String, String)>,
) -> Result<f64, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        let query = &mut *query_data(api, fts, table)?;
        phrase_frequencies(api, fts, &mut query.freq)?;
        let rowid = method(api.xRowid)?(fts);
        let known = query.lengths.as_mut().and_then(|sizes| sizes.tokens(rowid));
        let tokens = match known {
            Some(tokens) => tokens,
            None => {
                let mut tokens: c_int = 0;
                check(method(api.xColumnSize)?(fts, -1, &mut tokens))?;
                tokens
            }
        };
        let length_norm = K1 * (1.0 - B + B * f64::from(tokens) / query.avgdl);
        let sum: f64 = query
            .idf
            .iter()
            .zip(&query.freq)
            .map(|(idf, freq)| idf * ((freq * (K1 + 1.0)) / (freq + length_norm)))
            .sum();
        Ok(-sum)
    }
}

/// How many times each phrase occurs in the row: `bm25()`'s counts, which
/// it takes from the row's instance list (`xInstCount`, `xInst`). That list
/// is every phrase's positions merged into one sorted array, built for the
/// row, then read back one call per instance: a common word has dozens a
/// row, so for `the` that was a third of a shard's ranking, for `fn main`
/// more. Walking each phrase's own positions (`xPhraseFirst`,
/// `xPhraseNext`) reads the same position lists, so the counts are the same.
///
/// # Safety
/// `api` and `fts` as FTS5 passes them to an auxiliary function.
unsafe fn phrase_frequencies(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    freq: &mut [f64],
) -> Result<(), c_int> {
    let (first, next) = (method(api.xPhraseFirst)?, method(api.xPhraseNext)?);
    for (phrase, freq) in freq.iter_mut().enumerate() {
        let phrase = c_int::try_from(phrase).map_err(|_| ffi::SQLITE_ERROR)?;
        let mut iter = ffi::Fts5PhraseIter {
            a: std::ptr::null(),
            b: std::ptr::null(),
        };
        let (mut column, mut offset): (c_int, c_int) = (0, 0);
        let mut count: u32 = 0;
        // SAFETY: FTS5 passes valid pointers for the duration of the call;
        // `iter` is only used with this row's cursor, within the call.
        unsafe {
            check(first(fts, phrase, &mut iter, &mut column, &mut offset))?;
            while column >= 0 {
                count += 1;
                next(fts, &mut iter, &mut column, &mut offset);
            }
        }
        *freq = f64::from(count);
    }
    Ok(())
}

/// The query's `QueryData`, computed on the first row.
unsafe fn query_data(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    table: impl FnOnce() -> Option<(*mut ffi::sqlite3, String, String)>,
) -> Result<*mut QueryData, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        let existing = method(api.xGetAuxdata)?(fts, 0).cast::<QueryData>();
        if !existing.is_null() {
            return Ok(existing);
        }
        let phrases = usize::try_from(method(api.xPhraseCount)?(fts)).unwrap_or(0);
        let (mut rows, mut tokens): (i64, i64) = (0, 0);
        check(method(api.xRowCount)?(fts, &mut rows))?;
        check(method(api.xColumnTotalSize)?(fts, -1, &mut tokens))?;
        let avgdl = if rows > 0 && tokens > 0 {
            tokens as f64 / rows as f64
        } else {
            1.0
        };
        let idf = if phrases == 1 {
            vec![1.0]
        } else {
            (0..phrases)
                .map(|phrase| phrase_idf(api, fts, phrase, rows))
                .collect::<Result<_, _>>()?
        };
        let lengths = table().and_then(|(db, schema, table)| Lengths::prepare(db, &schema, &table));
        let data = Box::into_raw(Box::new(QueryData {
            avgdl,
            idf,
            freq: vec![0.0; phrases],
            lengths,
        }));
        // On failure FTS5 has already called `drop_query_data` on `data`.
        check(method(api.xSetAuxdata)?(
            fts,
            data.cast(),
            Some(drop_query_data),
        ))?;
        Ok(data)
    }
}

/// `bm25()`'s IDF of one phrase: ln((N − n + 0.5) / (n + 0.5)), at least 1e-6,
/// where n is the number of rows matching the phrase.
unsafe fn phrase_idf(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    phrase: usize,
    rows: i64,
) -> Result<f64, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        let mut hits: i64 = 0;
        let phrase = c_int::try_from(phrase).map_err(|_| ffi::SQLITE_ERROR)?;
        check(method(api.xQueryPhrase)?(
            fts,
            phrase,
            (&mut hits as *mut i64).cast(),
            Some(count_row),
        ))?;
        let idf = ((rows - hits) as f64 + 0.5).ln() - (hits as f64 + 0.5).ln();
        Ok(if idf <= 0.0 { 1e-6 } else { idf })
    }
}

unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    hits: *mut c_void,
) -> c_int {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        *hits.cast::<i64>() += 1;
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn drop_query_data(data: *mut c_void) {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        drop(Box::from_raw(data.cast::<QueryData>()));
    }
}

/// The shard and FTS5 table named by the function's two optional
/// arguments (schema, table), with the connection to read them on. Names
/// are piidx's own (`fts0`, `fts`); anything else is not used.
///
/// # Safety
/// As FTS5 passes them to an auxiliary function.
unsafe fn lengths_table(
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) -> Option<(*mut ffi::sqlite3, String, String)> {
    if n_val != 2 || values.is_null() {
        return None;
    }
    let name = |i: usize| -> Option<String> {
        // SAFETY: `values` holds `n_val` (2) values for the call.
        let text = unsafe { ffi::sqlite3_value_text(*values.add(i)) };
        if text.is_null() {
            return None;
        }
        // SAFETY: SQLite's text is NUL-terminated and lives for the call.
        let text = unsafe { std::ffi::CStr::from_ptr(text.cast()) }
            .to_str()
            .ok()?;
        let plain =
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        plain.then(|| text.to_owned())
    };
    let (schema, table) = (name(0)?, name(1)?);
    // SAFETY: the context is valid for the call.
    let db = unsafe { ffi::sqlite3_context_db_handle(ctx) };
    (!db.is_null()).then_some((db, schema, table))
}

/// A shard's `<table>_lengths` (`lengths`), read a block at a time as the
/// matches come.
struct Lengths {
    /// `SELECT sizes ... WHERE block = ?1`, on the query's connection.
    stmt: Statement,
    /// The shard count, which places an id in the blocks.
    shards: i64,
    /// The block last read, and its sizes.
    block: Option<i64>,
    sizes: Vec<u8>,
}

impl Lengths {
    /// `None` when the shard has no such table (a shard of an earlier
    /// piidx, until the next sync adds it, or no shard at all).
    ///
    /// # Safety
    /// `db` is the connection of the running query, used on this thread.
    unsafe fn prepare(db: *mut ffi::sqlite3, schema: &str, table: &str) -> Option<Lengths> {
        // SAFETY: the caller's contract.
        let shards = unsafe {
            let stmt = Statement::prepare(db, &format!("SELECT shards FROM \"{schema}\".shard"))?;
            stmt.step().then(|| ffi::sqlite3_column_int64(stmt.0, 0))?
        };
        // SAFETY: the caller's contract.
        let stmt = unsafe {
            Statement::prepare(
                db,
                &format!("SELECT sizes FROM \"{schema}\".\"{table}_lengths\" WHERE block = ?1"),
            )?
        };
        Some(Lengths {
            stmt,
            shards,
            block: None,
            sizes: Vec::new(),
        })
    }

    /// The token count of row `rowid` (all columns), or `None` when it is
    /// not recorded.
    fn tokens(&mut self, rowid: i64) -> Option<c_int> {
        let (block, slot) = lengths::locate(rowid, self.shards);
        if self.block != Some(block) {
            self.block = Some(block);
            self.sizes.clear();
            // SAFETY: `stmt` is a live statement of this connection and
            // thread; the blob is copied before the reset.
            unsafe {
                let stmt = self.stmt.0;
                ffi::sqlite3_reset(stmt);
                if ffi::sqlite3_bind_int64(stmt, 1, block) == ffi::SQLITE_OK && self.stmt.step() {
                    let blob = ffi::sqlite3_column_blob(stmt, 0).cast::<u8>();
                    let len = usize::try_from(ffi::sqlite3_column_bytes(stmt, 0)).unwrap_or(0);
                    if !blob.is_null() {
                        self.sizes
                            .extend_from_slice(std::slice::from_raw_parts(blob, len));
                    }
                }
                ffi::sqlite3_reset(stmt);
            }
        }
        lengths::read_slot(&self.sizes, slot)
    }
}

/// A prepared statement, finalized on drop.
struct Statement(*mut ffi::sqlite3_stmt);

impl Statement {
    /// # Safety
    /// `db` is an open connection, used on this thread.
    unsafe fn prepare(db: *mut ffi::sqlite3, sql: &str) -> Option<Statement> {
        let sql = std::ffi::CString::new(sql).ok()?;
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        // SAFETY: `db` is open (the caller's contract).
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, std::ptr::null_mut())
        };
        let stmt = Statement(stmt);
        (rc == ffi::SQLITE_OK && !stmt.0.is_null()).then_some(stmt)
    }

    /// Whether a step found a row.
    fn step(&self) -> bool {
        // SAFETY: a live statement of this thread's connection.
        unsafe { ffi::sqlite3_step(self.0) == ffi::SQLITE_ROW }
    }
}

impl Drop for Statement {
    fn drop(&mut self) {
        // SAFETY: finalized once, here; finalizing null is a no-op.
        unsafe { ffi::sqlite3_finalize(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(body);
             INSERT INTO t(body) VALUES
               ('alpha beta gamma'), ('alpha alpha delta'), ('beta beta beta beta epsilon zeta'),
               ('alpha'), ('gamma delta alpha beta'), ('nothing here at all');",
        )
        .unwrap();
        conn
    }

    fn scores(conn: &rusqlite::Connection, function: &str, query: &str) -> Vec<(i64, f64)> {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT rowid, {function}(t) FROM t WHERE t MATCH ?1 ORDER BY rowid"
            ))
            .unwrap();
        stmt.query_map([query], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    #[test]
    fn several_phrases_score_exactly_as_bm25() {
        let conn = table();
        for query in [
            "alpha beta",
            "alpha OR beta",
            "\"alpha beta\" OR delta",
            "gamma NOT beta",
        ] {
            let ours = scores(&conn, FUNCTION, query);
            let theirs = scores(&conn, "bm25", query);
            assert_eq!(ours.len(), theirs.len(), "{query}");
            for ((rowid, a), (_, b)) in ours.iter().zip(&theirs) {
                assert!((a - b).abs() < 1e-12, "{query} row {rowid}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn lengths_read_from_the_shard_give_the_same_scores() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        // Shard 1 of 3: ids 1, 4, 7, ... over several blocks.
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5(a, b, content = '');
             CREATE TABLE shard(shards INTEGER NOT NULL); INSERT INTO shard VALUES (3); {}",
            lengths::create_sql("t")
        ))
        .unwrap();
        let ids: Vec<i64> = (0..2500).map(|n| 3 * n + 1).collect();
        for &id in &ids {
            let word = if id % 7 == 0 || id % 101 == 0 {
                "alpha"
            } else {
                "beta"
            };
            let filler = "gamma ".repeat((id % 11) as usize);
            conn.execute(
                "INSERT INTO t(rowid, a, b) VALUES (?1, ?2, ?3)",
                rusqlite::params![
                    id,
                    format!("{word} {filler}"),
                    "delta ".repeat((id % 5) as usize)
                ],
            )
            .unwrap();
        }
        lengths::record(&conn, "t", 3, 0, i64::MAX).unwrap();
        // A row without its length: `xColumnSize` gives it.
        let (block, slot) = lengths::locate(7 * 103 + 1, 3);
        conn.execute(
            "UPDATE t_lengths SET sizes = CAST(substr(sizes, 1, ?2) || zeroblob(2) || substr(sizes, ?2 + 3) AS BLOB)
              WHERE block = ?1",
            rusqlite::params![block, 2 * slot as i64],
        )
        .unwrap();
        for (order, query) in [
            ("rowid DESC", "alpha"),
            ("rowid DESC", "alpha OR delta"),
            ("rowid DESC", "gamma"),
            ("rowid", "alpha"),
            ("rowid DESC LIMIT 7", "beta"),
        ] {
            let rows = |function: &str| -> Vec<(i64, f64)> {
                let sql =
                    format!("SELECT rowid, {function} FROM t WHERE t MATCH ?1 ORDER BY {order}");
                let mut stmt = conn.prepare(&sql).unwrap();
                stmt.query_map([query], |row| Ok((row.get(0)?, row.get(1)?)))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap()
            };
            let read = rows("piidx_bm25(t, 'main', 't')");
            assert!(!read.is_empty(), "{query}");
            assert_eq!(read, rows("piidx_bm25(t)"), "{query} {order}");
        }
        // The lengths are read (the comparison above would also hold if
        // none were).
        // SAFETY: the connection is open and used on this thread only.
        let mut lengths =
            unsafe { Lengths::prepare(conn.handle(), "main", "t") }.expect("the lengths table");
        for &id in ids.iter().rev().step_by(5) {
            let expected = (id != 7 * 103 + 1).then_some((1 + (id % 11) + (id % 5)) as c_int);
            assert_eq!(lengths.tokens(id), expected, "row {id}");
        }
        // SAFETY: as above.
        assert!(unsafe { Lengths::prepare(conn.handle(), "main", "nothing") }.is_none());
    }

    /// `counts(t, 0)`: each phrase's count in the row as FTS5's instance
    /// list gives it (`bm25()`'s way); `counts(t, 1)`: as
    /// `phrase_frequencies` counts it. Comma-separated.
    unsafe extern "C" fn counts(
        api: *const ffi::Fts5ExtensionApi,
        fts: *mut ffi::Fts5Context,
        ctx: *mut ffi::sqlite3_context,
        _n_val: c_int,
        values: *mut *mut ffi::sqlite3_value,
    ) {
        unsafe {
            let api = &*api;
            let phrases = usize::try_from(api.xPhraseCount.unwrap()(fts)).unwrap();
            let mut freq = vec![0.0; phrases];
            if ffi::sqlite3_value_int(*values) == 1 {
                phrase_frequencies(api, fts, &mut freq).unwrap();
            } else {
                let mut instances: c_int = 0;
                check(api.xInstCount.unwrap()(fts, &mut instances)).unwrap();
                for i in 0..instances {
                    let (mut phrase, mut column, mut offset) = (0, 0, 0);
                    check(api.xInst.unwrap()(
                        fts,
                        i,
                        &mut phrase,
                        &mut column,
                        &mut offset,
                    ))
                    .unwrap();
                    freq[usize::try_from(phrase).unwrap()] += 1.0;
                }
            }
            let text: Vec<String> = freq.iter().map(f64::to_string).collect();
            let text = std::ffi::CString::new(text.join(",")).unwrap();
            ffi::sqlite3_result_text(ctx, text.as_ptr(), -1, ffi::SQLITE_TRANSIENT());
        }
    }

    #[test]
    fn phrases_are_counted_as_in_the_instance_list() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        unsafe {
            let api = crate::store::tokenizer::fts5_api(conn.handle()).unwrap();
            let rc = (*api).xCreateFunction.unwrap()(
                api,
                c"counts".as_ptr(),
                std::ptr::null_mut(),
                Some(counts),
                None,
            );
            assert_eq!(rc, ffi::SQLITE_OK);
        }
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(a, b, tokenize = 'unicode61 remove_diacritics 2');
             INSERT INTO t(a, b) VALUES
               ('alpha beta gamma alpha', 'beta alpha'), ('alpha alpha delta', ''),
               ('beta beta beta beta epsilon zeta', 'alpha beta beta'), ('alpha', 'gamma'),
               ('gamma delta alpha beta gamma delta alpha beta', 'delta'),
               ('fn main() { fn helper } main', 'fn main'), ('nothing here at all', 'x');",
        )
        .unwrap();
        let mut checked = 0;
        for query in [
            "alpha",
            "alpha beta",
            "alpha alpha",
            "alpha OR beta",
            "\"alpha beta\" OR delta",
            "\"gamma delta\" alpha",
            "NEAR(alpha beta, 1)",
            "NEAR(gamma delta, 0) OR zeta",
            "gamma NOT beta",
            "b : beta alpha",
            "al* be*",
            "fn main",
            "\"fn main\"",
        ] {
            let mut stmt = conn
                .prepare("SELECT counts(t, 0), counts(t, 1) FROM t WHERE t MATCH ?1")
                .unwrap();
            let rows: Vec<(String, String)> = stmt
                .query_map([query], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert!(!rows.is_empty(), "{query}");
            for (by_instance, by_phrase) in rows {
                assert_eq!(by_phrase, by_instance, "{query}");
                checked += 1;
            }
        }
        assert!(checked > 20);
    }

    #[test]
    fn one_phrase_is_bm25_without_its_idf() {
        let conn = table();
        for query in ["alpha", "beta", "\"alpha beta\"", "del*"] {
            let ours = scores(&conn, FUNCTION, query);
            let theirs = scores(&conn, "bm25", query);
            assert!(!ours.is_empty(), "{query}");
            let ratio = theirs[0].1 / ours[0].1;
            assert!(ratio > 0.0, "{query}");
            for ((rowid, a), (_, b)) in ours.iter().zip(&theirs) {
                assert!(*a < 0.0, "{query} row {rowid}");
                assert!((b / a - ratio).abs() < 1e-9, "{query} row {rowid}");
            }
        }
    }
}
