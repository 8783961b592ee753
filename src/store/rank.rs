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
//! read from the table's `<table>_docsize` rows. FTS5's `xColumnSize` looks
//! each one up from the root of that table's B-tree with a statement of its
//! own: ~0.6 µs a row, most of a shard's ranking of a common word's newest
//! 2,500 matches (1.4 of 1.9 ms). Given the table as
//! `piidx_bm25(fts, 'fts0', 'fts')`, a query whose matches come newest first
//! (`ORDER BY rowid DESC`, as search's windows do) walks the docsize rows
//! down beside them instead (`Docsizes`): a few steps to the next match, and
//! a new seek only after a gap. The sizes read are the same; any row it
//! cannot read that way is asked of `xColumnSize`.
//!
//! Registered per connection through the `fts5_api` pointer FTS5 hands out
//! to `SELECT fts5(?1)` (the documented way; rusqlite has no FTS5 API).

use rusqlite::ffi;
use std::ffi::{c_int, c_void};

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
    /// The table's docsize rows, when the function was told the table.
    docsizes: Option<Docsizes>,
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
        let table = || docsize_table(ctx, n_val, values);
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
/// the connection and the docsize table named in the arguments, if any.
unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    table: impl FnOnce() -> Option<(*mut ffi::sqlite3, String)>,
) -> Result<f64, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        let query = &mut *query_data(api, fts, table)?;
        phrase_frequencies(api, fts, &mut query.freq)?;
        let rowid = method(api.xRowid)?(fts);
        let known = query
            .docsizes
            .as_mut()
            .and_then(|sizes| sizes.tokens(rowid));
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
    table: impl FnOnce() -> Option<(*mut ffi::sqlite3, String)>,
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
        let columns = usize::try_from(method(api.xColumnCount)?(fts)).unwrap_or(0);
        let docsizes = table().and_then(|(db, table)| Docsizes::prepare(db, &table, columns));
        let data = Box::into_raw(Box::new(QueryData {
            avgdl,
            idf,
            freq: vec![0.0; phrases],
            docsizes,
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

/// The docsize table named by the function's two optional arguments
/// (schema, FTS5 table), with the connection to read it on. Names are
/// piidx's own (`fts0`, `fts`); anything else is not used.
///
/// # Safety
/// As FTS5 passes them to an auxiliary function.
unsafe fn docsize_table(
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    values: *mut *mut ffi::sqlite3_value,
) -> Option<(*mut ffi::sqlite3, String)> {
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
    (!db.is_null()).then(|| (db, format!("\"{schema}\".\"{table}_docsize\"")))
}

/// How many docsize rows `Docsizes` steps over to reach the next match
/// before it seeks it instead (a step costs a fraction of a seek).
const MAX_STEPS: usize = 8;

/// A walk down a docsize table (`id INTEGER PRIMARY KEY, sz BLOB`: a
/// varint per column) beside a query's matches, newest first.
struct Docsizes {
    /// `SELECT id, sz ... WHERE id <= ?1 ORDER BY id DESC`, on the query's
    /// connection; finalized on drop.
    stmt: *mut ffi::sqlite3_stmt,
    columns: usize,
    /// The row the statement is on, if it is on one.
    at: Option<i64>,
    /// The previous match's rowid: a later match above it means the
    /// matches do not come newest first, and `xColumnSize` is asked.
    last: Option<i64>,
}

impl Docsizes {
    /// `None` when the statement cannot be prepared (no such table).
    ///
    /// # Safety
    /// `db` is the connection of the running query, used on this thread.
    unsafe fn prepare(db: *mut ffi::sqlite3, table: &str, columns: usize) -> Option<Docsizes> {
        let sql = std::ffi::CString::new(format!(
            "SELECT id, sz FROM {table} WHERE id <= ?1 ORDER BY id DESC"
        ))
        .ok()?;
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        // SAFETY: `db` is open (the caller's contract).
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, std::ptr::null_mut())
        };
        if rc != ffi::SQLITE_OK || stmt.is_null() || columns == 0 {
            // SAFETY: finalizing a null statement is a no-op.
            unsafe { ffi::sqlite3_finalize(stmt) };
            return None;
        }
        Some(Docsizes {
            stmt,
            columns,
            at: None,
            last: None,
        })
    }

    /// The token count of row `rowid` (all columns), or `None` when it is
    /// not read here.
    fn tokens(&mut self, rowid: i64) -> Option<c_int> {
        let descending = self.last.is_none_or(|last| rowid < last);
        self.last = Some(rowid);
        if !descending {
            self.at = None;
            return None;
        }
        let mut steps = 0;
        while steps < MAX_STEPS && self.at.is_some_and(|at| at > rowid) {
            self.at = self.step();
            steps += 1;
        }
        if self.at.is_none_or(|at| at > rowid) {
            self.at = self.seek(rowid);
        }
        if self.at != Some(rowid) {
            return None;
        }
        // SAFETY: the statement is on a row; the blob lives until the next
        // step, reset or finalize.
        let size = unsafe {
            let blob = ffi::sqlite3_column_blob(self.stmt, 1).cast::<u8>();
            let len = usize::try_from(ffi::sqlite3_column_bytes(self.stmt, 1)).ok()?;
            if blob.is_null() {
                return None;
            }
            std::slice::from_raw_parts(blob, len)
        };
        total_size(size, self.columns)
    }

    /// Positions the statement on the greatest id at most `rowid`.
    fn seek(&mut self, rowid: i64) -> Option<i64> {
        // SAFETY: `stmt` is a live statement of this connection and thread.
        unsafe {
            ffi::sqlite3_reset(self.stmt);
            if ffi::sqlite3_bind_int64(self.stmt, 1, rowid) != ffi::SQLITE_OK {
                return None;
            }
        }
        self.step()
    }

    /// The next row's id (downwards), `None` at the end or on an error.
    fn step(&mut self) -> Option<i64> {
        // SAFETY: `stmt` is a live statement of this connection and thread.
        unsafe {
            (ffi::sqlite3_step(self.stmt) == ffi::SQLITE_ROW)
                .then(|| ffi::sqlite3_column_int64(self.stmt, 0))
        }
    }
}

impl Drop for Docsizes {
    fn drop(&mut self) {
        // SAFETY: the statement is finalized once, here.
        unsafe { ffi::sqlite3_finalize(self.stmt) };
    }
}

/// The sum of a docsize blob's per-column varints, as FTS5 decodes them
/// (`fts5StorageDecodeSizeArray`: exactly `columns` varints, nothing
/// after them); `None` when the blob is not that.
fn total_size(mut blob: &[u8], columns: usize) -> Option<c_int> {
    let mut total: c_int = 0;
    for _ in 0..columns {
        let (value, used) = varint(blob)?;
        // FTS5 keeps each column's size as a 32-bit integer.
        total = total.wrapping_add(value as u32 as c_int);
        blob = &blob[used..];
    }
    blob.is_empty().then_some(total)
}

/// SQLite's varint (1–9 bytes, big-endian, 7 bits a byte but the ninth's
/// 8) and its length.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return Some(((value << 8) | u64::from(byte), 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
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
    fn docsizes_walked_beside_the_matches_give_the_same_scores() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(a, b, content = '')")
            .unwrap();
        // Matches close together (a step apart) and far apart (a seek),
        // rows of every length, and rows without the word between.
        for id in 1..=400_i64 {
            let word = if id % 3 == 0 || (id > 200 && id % 37 == 0) {
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
            let walked = rows("piidx_bm25(t, 'main', 't')");
            assert!(!walked.is_empty(), "{query}");
            assert_eq!(walked, rows("piidx_bm25(t)"), "{query} {order}");
        }
        // The walk itself reads every row's size (the comparison above
        // would also hold if it read none).
        // SAFETY: the connection is open and used on this thread only.
        let mut sizes = unsafe { Docsizes::prepare(conn.handle(), "\"main\".\"t_docsize\"", 2) }
            .expect("the docsize table");
        for id in (1..=400_i64).rev().step_by(3) {
            let expected = 1 + (id % 11) + (id % 5);
            assert_eq!(sizes.tokens(id), Some(expected as c_int), "row {id}");
        }
        assert_eq!(sizes.tokens(399), None, "not newest first");
        assert_eq!(total_size(&[3, 0x81, 0x00], 2), Some(3 + 128));
        assert_eq!(total_size(&[3], 2), None);
        assert_eq!(total_size(&[3, 4, 5], 2), None);
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
