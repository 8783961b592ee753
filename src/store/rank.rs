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
//! Registered per connection through the `fts5_api` pointer FTS5 hands out
//! to `SELECT fts5(?1)` (the documented way; rusqlite has no FTS5 API).

use rusqlite::ffi;
use std::ffi::{c_int, c_void};

/// The SQL name of the function.
pub const FUNCTION: &str = "piidx_bm25";

/// BM25's constants, as FTS5 sets them.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Makes `piidx_bm25` available to the FTS5 tables of `conn`, attached
/// databases included.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is only used while `conn` is borrowed, on this
    // thread; the statement is finalized before returning.
    let db = unsafe { conn.handle() };
    let api = unsafe { fts5_api(db) };
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

/// The connection's `fts5_api`, or `None` when FTS5 is missing.
///
/// # Safety
/// `db` must be an open connection used by no other thread meanwhile.
unsafe fn fts5_api(db: *mut ffi::sqlite3) -> Option<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
    let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
    let sql = c"SELECT fts5(?1)";
    // SAFETY: `db` is open (the caller's contract); `api` outlives the
    // statement, which FTS5 fills in during the step.
    unsafe {
        let prepared =
            ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, std::ptr::null_mut());
        if prepared == ffi::SQLITE_OK {
            ffi::sqlite3_bind_pointer(
                stmt,
                1,
                (&mut api as *mut *mut ffi::fts5_api).cast(),
                c"fts5_api_ptr".as_ptr(),
                None,
            );
            ffi::sqlite3_step(stmt);
        }
        ffi::sqlite3_finalize(stmt);
    }
    (!api.is_null()).then_some(api)
}

/// What one query computes once and reuses for every row (FTS5 auxdata).
struct QueryData {
    avgdl: f64,
    idf: Vec<f64>,
    freq: Vec<f64>,
}

unsafe extern "C" fn piidx_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _n_val: c_int,
    _values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with a valid API, cursor context and result
    // context, for the duration of the call.
    unsafe {
        match score(&*api, fts) {
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

/// The current row's score: lower is better, as with `bm25()`.
unsafe fn score(api: &ffi::Fts5ExtensionApi, fts: *mut ffi::Fts5Context) -> Result<f64, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call.
    unsafe {
        let query = &mut *query_data(api, fts)?;
        let mut instances: c_int = 0;
        check(method(api.xInstCount)?(fts, &mut instances))?;
        if let [freq] = query.freq.as_mut_slice() {
            // One phrase: every instance is one of its own (a common word
            // has dozens per row, each an `xInst` call).
            *freq = f64::from(instances);
        } else {
            phrase_frequencies(api, fts, instances, &mut query.freq)?;
        }
        let mut tokens: c_int = 0;
        check(method(api.xColumnSize)?(fts, -1, &mut tokens))?;
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

/// How many of the row's `instances` each phrase has.
///
/// # Safety
/// `api` and `fts` as FTS5 passes them to an auxiliary function.
unsafe fn phrase_frequencies(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    instances: c_int,
    freq: &mut [f64],
) -> Result<(), c_int> {
    freq.fill(0.0);
    for i in 0..instances {
        let (mut phrase, mut column, mut offset): (c_int, c_int, c_int) = (0, 0, 0);
        // SAFETY: FTS5 passes valid pointers for the duration of the call.
        check(unsafe { method(api.xInst)?(fts, i, &mut phrase, &mut column, &mut offset) })?;
        if let Some(freq) = usize::try_from(phrase).ok().and_then(|p| freq.get_mut(p)) {
            *freq += 1.0;
        }
    }
    Ok(())
}

/// The query's `QueryData`, computed on the first row.
unsafe fn query_data(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
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
        let data = Box::into_raw(Box::new(QueryData {
            avgdl,
            idf,
            freq: vec![0.0; phrases],
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
