//! `piidx_bm25_parts(fts)`: the FTS5 auxiliary function search ranks with,
//! and the bm25 it feeds (`Scorer`). It is part of the store because the
//! shards' readers (`shard_readers`) register it on their connections, as
//! search does on the index's.
//!
//! The score is FTS5's own `bm25()` (k1 = 1.2, b = 0.75, the same formula,
//! the same per-phrase IDF) over every shard at once, except for a query of
//! a single phrase, which gets no IDF factor. Each shard's table knows only
//! its own rows: its row count, token total and each phrase's matches
//! differ from the other shards' and from the whole index's, and which
//! shard a chunk lands in depends on the order a sync's workers finished
//! its files. Scored in its shard, the same chunk scored differently from
//! one fresh sync to the next, and so did the order of the hits. So the
//! function scores nothing: for each row it returns the row's parts (its
//! length and each phrase's count in it; `RowValue`), the first row of a
//! query also its shard's statistics, and search adds the shards'
//! statistics up and scores every match with them (`Scorer`), as `bm25()`
//! would over one table holding every chunk. A shard with no match has no
//! row to carry its statistics; they are read from its table instead
//! (`ShardStats::read`).
//!
//! `bm25()` computes each phrase's IDF before it scores the first row, by
//! walking every match of the phrase in the table: for a common word that
//! walk is most of the ranking query even when only the newest few thousand
//! matches are scored (4 ms of 5.5 for `the` in one shard of the 1 GB
//! benchmark database, docs/performance.md). With one phrase the IDF
//! multiplies every row's score by the same number, so it cannot change the
//! order, and the walk is left out.
//!
//! Each phrase's count in a row is read from its own positions
//! (`xPhraseFirst`, `xPhraseNext`), not from the row's instance list, which
//! FTS5 builds by merging every phrase's positions (`phrase_frequencies`).
//!
//! Each row's length (its token count, for the length normalisation) is
//! what FTS5's `xColumnSize` gives, which looks it up in the table's
//! `<table>_docsize` rows with a statement of its own (~0.6 µs a row, most
//! of a shard's ranking of a common word's newest matches). Given the shard
//! and table as `piidx_bm25_parts(fts, 'fts0', 'fts')`, it reads the
//! lengths the shard keeps in blocks instead (`lengths`): one small row per
//! block of neighbouring chunks. A row whose length is not there is asked
//! of `xColumnSize`, so the parts are the same either way.
//!
//! Registered per connection through the `fts5_api` pointer FTS5 hands out
//! to `SELECT fts5(?1)` (the documented way; rusqlite has no FTS5 API).

use rusqlite::{OptionalExtension, ffi};
use std::ffi::{c_int, c_void};

use super::lengths;

/// The SQL name of the function.
pub const FUNCTION: &str = "piidx_bm25_parts";

/// BM25's constants, as FTS5 sets them.
pub(crate) const K1: f64 = 1.2;
pub(crate) const B: f64 = 0.75;

/// Makes `piidx_bm25_parts` available to the FTS5 tables of `conn`, attached
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
                    c"piidx_bm25_parts".as_ptr(),
                    std::ptr::null_mut(),
                    Some(piidx_bm25_parts),
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
    /// A blob row's value begins with these bytes: the shard's statistics
    /// (`Parts::header`).
    header: Vec<u8>,
    /// The row's value when it is a blob, built here and copied out by
    /// SQLite.
    row: Vec<u8>,
    /// A row has carried the statistics (`header`).
    told: bool,
    freq: Vec<u32>,
    /// The shard's lengths, when the function was told the shard and table.
    lengths: Option<Lengths>,
}

unsafe extern "C" fn piidx_bm25_parts(
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
        match row_parts(&*api, fts, table) {
            Ok(Row::Packed(value)) => ffi::sqlite3_result_int64(ctx, value),
            Ok(Row::Full(row)) => match c_int::try_from(row.len()) {
                Ok(len) => {
                    ffi::sqlite3_result_blob(ctx, row.as_ptr().cast(), len, ffi::SQLITE_TRANSIENT())
                }
                Err(_) => ffi::sqlite3_result_error_toobig(ctx),
            },
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

/// What `row_parts` gives SQLite for a row (`RowValue`).
enum Row<'q> {
    Full(&'q [u8]),
    Packed(i64),
}

/// The current row's value (`RowValue`), a blob valid until the next row.
/// `table`: the connection, shard and table named in the arguments, if any.
unsafe fn row_parts<'q>(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    table: impl FnOnce() -> Option<(*mut ffi::sqlite3, String, String)>,
) -> Result<Row<'q>, c_int> {
    // SAFETY: FTS5 passes valid pointers for the duration of the call; the
    // auxdata lives until the query ends, past this row's copy.
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
        let tokens = u32::try_from(tokens).unwrap_or(0);
        if query.told
            && let Some(packed) = pack(tokens, &query.freq)
        {
            return Ok(Row::Packed(packed));
        }
        query.told = true;
        query.row.clear();
        query.row.extend_from_slice(&query.header);
        query.row.extend_from_slice(&tokens.to_le_bytes());
        for freq in &query.freq {
            query.row.extend_from_slice(&freq.to_le_bytes());
        }
        Ok(Row::Full(&query.row))
    }
}

/// A row's parts in one integer, when they fit (`RowValue::Packed`): the
/// phrase count (1 to 3) in bits 0–1, the length in bits 2–17, each
/// phrase's count in 15 bits from bit 18. A chunk holds at most
/// `normalize::CHUNK_BYTES` of text, so its counts fit; a longer shared
/// text's may not. SQLite copies a blob result into memory of its own and
/// the reader takes it back in two calls; an integer costs neither, which
/// was 5 % of a common word's search.
fn pack(tokens: u32, freq: &[u32]) -> Option<i64> {
    let fits = (1..=PACKED_PHRASES).contains(&freq.len())
        && tokens <= 0xffff
        && freq.iter().all(|&freq| freq <= 0x7fff);
    fits.then(|| {
        let packed = freq.iter().enumerate().fold(
            freq.len() as u64 | (u64::from(tokens) << 2),
            |packed, (n, &freq)| packed | (u64::from(freq) << (18 + 15 * n)),
        );
        packed as i64
    })
}

/// The most phrases `pack` packs.
const PACKED_PHRASES: usize = 3;

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
    freq: &mut [u32],
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
        *freq = count;
    }
    Ok(())
}

/// The query's `QueryData`, computed on the first row: the shard's row
/// count, token total and, with several phrases, each phrase's matches.
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
        let hits = if phrases == 1 {
            None
        } else {
            Some(
                (0..phrases)
                    .map(|phrase| phrase_hits(api, fts, phrase))
                    .collect::<Result<_, _>>()?,
            )
        };
        let stats = ShardStats { rows, tokens, hits };
        let lengths = table().and_then(|(db, schema, table)| Lengths::prepare(db, &schema, &table));
        let data = Box::into_raw(Box::new(QueryData {
            header: Parts::header(&stats, phrases),
            row: Vec::new(),
            told: false,
            freq: vec![0; phrases],
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

/// The number of rows matching one phrase, as `bm25()` counts them for its
/// IDF.
unsafe fn phrase_hits(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    phrase: usize,
) -> Result<i64, c_int> {
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
        Ok(hits)
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

/// One shard's part of bm25's statistics for a query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardStats {
    /// The rows of the shard's table.
    pub rows: i64,
    /// Their tokens, all together.
    pub tokens: i64,
    /// How many rows match each phrase of the query: `None` for a query
    /// of one phrase (its IDF is left out), or when they cannot be told
    /// (`ShardStats::read`).
    pub hits: Option<Vec<i64>>,
}

impl ShardStats {
    /// The statistics of `schema.table` for the query `expr`, read without
    /// a matching row: the row count and token total from the table's
    /// averages record (FTS5's `xRowCount` and `xColumnTotalSize` read
    /// it), and each phrase's matches counted by a query of the phrase
    /// alone, when `expr` has several and their list can be told
    /// (`syntax::phrases`).
    pub fn read(
        conn: &rusqlite::Connection,
        schema: &str,
        table: &str,
        phrases: Option<&[String]>,
    ) -> rusqlite::Result<ShardStats> {
        let averages: Option<Vec<u8>> = conn
            .query_row(
                &format!("SELECT block FROM \"{schema}\".\"{table}_data\" WHERE id = 1"),
                [],
                |row| row.get(0),
            )
            .optional()?;
        let (rows, tokens) = averages.as_deref().map_or((0, 0), read_averages);
        let hits = match phrases {
            Some(phrases) => Self::count_hits(conn, schema, table, phrases)?,
            None => None,
        };
        Ok(ShardStats { rows, tokens, hits })
    }

    /// How many rows of `schema.table` match each of `phrases`, each
    /// counted by a query of the phrase alone; `None` for fewer than two
    /// (a query of one phrase has no IDF).
    pub fn count_hits(
        conn: &rusqlite::Connection,
        schema: &str,
        table: &str,
        phrases: &[String],
    ) -> rusqlite::Result<Option<Vec<i64>>> {
        if phrases.len() < 2 {
            return Ok(None);
        }
        let mut count = conn.prepare(&format!(
            "SELECT count(*) FROM \"{schema}\".\"{table}\" WHERE \"{table}\" MATCH ?1"
        ))?;
        phrases
            .iter()
            .map(|phrase| count.query_row([phrase], |row| row.get(0)))
            .collect::<rusqlite::Result<_>>()
            .map(Some)
    }
}

/// FTS5's averages record (rowid 1 of `<table>_data`): the row count, then
/// each column's token total, as SQLite varints. A record cut short counts
/// what it holds.
fn read_averages(record: &[u8]) -> (i64, i64) {
    let mut at = 0;
    let mut next = || read_varint(record, &mut at);
    let rows = next().unwrap_or(0);
    let mut tokens: u64 = 0;
    while let Some(column) = next() {
        tokens = tokens.wrapping_add(column);
    }
    (rows as i64, tokens as i64)
}

/// A SQLite varint (big-endian groups of 7 bits, the ninth byte whole), as
/// FTS5 writes its records (`sqlite3Fts5GetVarint`).
fn read_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    for n in 0..9 {
        let byte = *bytes.get(*at)?;
        *at += 1;
        if n == 8 {
            return Some((value << 8) | u64::from(byte));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    Some(value)
}

/// A row's value of `piidx_bm25_parts`, little-endian: its shard's
/// statistics (rows, tokens as i64; the phrase count as u32; with several
/// phrases, each one's hits as i64), then the row's length and each
/// phrase's count in it (u32 each). Read without copying; the statistics
/// are decoded only when asked for (`stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// The shard's row count and token total (16 bytes).
    totals: &'a [u8; 16],
    /// Each phrase's hits, 8 bytes each; empty for one phrase.
    hits: &'a [u8],
    pub tokens: u32,
    freq: &'a [u8],
}

impl<'a> Parts<'a> {
    fn header(stats: &ShardStats, phrases: usize) -> Vec<u8> {
        let mut header = Vec::with_capacity(20 + 8 * phrases);
        header.extend_from_slice(&stats.rows.to_le_bytes());
        header.extend_from_slice(&stats.tokens.to_le_bytes());
        header.extend_from_slice(&u32::try_from(phrases).unwrap_or(0).to_le_bytes());
        for hits in stats.hits.iter().flatten() {
            header.extend_from_slice(&hits.to_le_bytes());
        }
        header
    }

    /// Reads a value the function returned; `None` if it is not one.
    pub fn read(value: &'a [u8]) -> Option<Parts<'a>> {
        let (totals, rest) = value.split_first_chunk::<16>()?;
        let (phrases, rest) = rest.split_first_chunk::<4>()?;
        let phrases = usize::try_from(u32::from_le_bytes(*phrases)).ok()?;
        let hits_len = if phrases == 1 { 0 } else { 8 * phrases };
        let (hits, rest) = rest.split_at_checked(hits_len)?;
        let (tokens, freq) = rest.split_first_chunk::<4>()?;
        (freq.len() == 4 * phrases).then_some(Parts {
            totals,
            hits,
            tokens: u32::from_le_bytes(*tokens),
            freq,
        })
    }

    /// The statistics of the row's shard.
    pub fn stats(&self) -> ShardStats {
        let (rows, tokens) = self.totals.split_at(8);
        let int = |bytes: &[u8]| bytes.try_into().map_or(0, i64::from_le_bytes);
        ShardStats {
            rows: int(rows),
            tokens: int(tokens),
            hits: (self.phrases() != 1).then(|| self.hits.chunks_exact(8).map(int).collect()),
        }
    }

    /// How many phrases the query has.
    pub fn phrases(&self) -> usize {
        self.freq.len() / 4
    }

    /// Each phrase's count in the row.
    pub fn freq(&self) -> impl Iterator<Item = u32> + '_ {
        self.freq
            .chunks_exact(4)
            .map(|bytes| bytes.try_into().map_or(0, u32::from_le_bytes))
    }
}

/// A row's value of `piidx_bm25_parts`: its parts with its shard's
/// statistics (`Parts`, a blob), as the first row of a query and any row
/// whose counts do not fit in an integer get; or its parts alone, packed
/// in an integer (`pack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowValue<'a> {
    Full(Parts<'a>),
    Packed(i64),
}

impl<'a> RowValue<'a> {
    /// Reads a value the function returned; `None` if it is not one.
    pub fn read(value: rusqlite::types::ValueRef<'a>) -> Option<RowValue<'a>> {
        match value {
            rusqlite::types::ValueRef::Blob(blob) => Parts::read(blob).map(RowValue::Full),
            rusqlite::types::ValueRef::Integer(packed) if packed & 3 != 0 => {
                Some(RowValue::Packed(packed))
            }
            _ => None,
        }
    }

    /// The statistics of the row's shard, if the row carries them.
    pub fn stats(&self) -> Option<ShardStats> {
        match self {
            RowValue::Full(parts) => Some(parts.stats()),
            RowValue::Packed(_) => None,
        }
    }

    /// How many phrases the query has.
    pub fn phrases(&self) -> usize {
        match self {
            RowValue::Full(parts) => parts.phrases(),
            RowValue::Packed(packed) => (packed & 3) as usize,
        }
    }

    /// The row's length in tokens.
    pub fn tokens(&self) -> u32 {
        match self {
            RowValue::Full(parts) => parts.tokens,
            RowValue::Packed(packed) => ((packed >> 2) & 0xffff) as u32,
        }
    }

    /// Appends each phrase's count in the row to `out`.
    pub fn push_freq(&self, out: &mut Vec<u32>) {
        match self {
            RowValue::Full(parts) => out.extend(parts.freq()),
            RowValue::Packed(packed) => {
                out.extend((0..self.phrases()).map(|n| ((packed >> (18 + 15 * n)) & 0x7fff) as u32))
            }
        }
    }
}

/// bm25 over every shard together: the IDF of each phrase and the average
/// row length from the sum of the shards' statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorer {
    avgdl: f64,
    idf: Vec<f64>,
}

impl Scorer {
    /// For a query of `phrases` phrases over the shards of `stats`. A
    /// shard whose hits are not known (or are another query's) adds none.
    pub fn new<'s>(stats: impl IntoIterator<Item = &'s ShardStats>, phrases: usize) -> Scorer {
        let (mut rows, mut tokens) = (0_i64, 0_i64);
        let mut hits = vec![0_i64; phrases];
        for shard in stats {
            rows = rows.saturating_add(shard.rows);
            tokens = tokens.saturating_add(shard.tokens);
            if let Some(shard_hits) = shard.hits.as_ref().filter(|h| h.len() == phrases) {
                for (sum, hits) in hits.iter_mut().zip(shard_hits) {
                    *sum = sum.saturating_add(*hits);
                }
            }
        }
        let avgdl = if rows > 0 && tokens > 0 {
            tokens as f64 / rows as f64
        } else {
            1.0
        };
        let idf = if phrases == 1 {
            vec![1.0]
        } else {
            hits.iter().map(|&hits| idf(rows, hits)).collect()
        };
        Scorer { avgdl, idf }
    }

    /// A row's score, lower is better, as with `bm25()`: `tokens` its
    /// length, `freq` each phrase's count in it.
    pub fn score(&self, tokens: u32, freq: impl Iterator<Item = u32>) -> f64 {
        let length_norm = K1 * (1.0 - B + B * f64::from(tokens) / self.avgdl);
        let sum: f64 = self
            .idf
            .iter()
            .zip(freq)
            .map(|(idf, freq)| {
                let freq = f64::from(freq);
                idf * ((freq * (K1 + 1.0)) / (freq + length_norm))
            })
            .sum();
        -sum
    }
}

/// `bm25()`'s IDF of one phrase: ln((N − n + 0.5) / (n + 0.5)), at least 1e-6,
/// where n is the number of rows matching the phrase.
fn idf(rows: i64, hits: i64) -> f64 {
    let idf = ((rows - hits) as f64 + 0.5).ln() - (hits as f64 + 0.5).ln();
    if idf <= 0.0 { 1e-6 } else { idf }
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

    /// Each matching row of `sql` (rowid, the function's value) scored with
    /// the statistics of `stats` and those its rows carry.
    fn scored_with(
        conn: &rusqlite::Connection,
        sql: &str,
        query: &str,
        stats: &[ShardStats],
    ) -> Vec<(i64, f64)> {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows: Vec<(i64, rusqlite::types::Value)> = stmt
            .query_map([query], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        let values: Vec<RowValue> = rows
            .iter()
            .map(|(_, value)| RowValue::read(value.into()).expect("the function's value"))
            .collect();
        let carried: Vec<ShardStats> = values.iter().filter_map(RowValue::stats).collect();
        assert!(carried.len() <= 1 || carried.windows(2).all(|w| w[0] == w[1]));
        let mut all = stats.to_vec();
        all.extend(carried.into_iter().take(1));
        rows.iter()
            .zip(&values)
            .map(|((rowid, _), value)| {
                let scorer = Scorer::new(&all, value.phrases());
                let mut freq = Vec::new();
                value.push_freq(&mut freq);
                (*rowid, scorer.score(value.tokens(), freq.into_iter()))
            })
            .collect()
    }

    /// Our scores of `query` over `t` alone.
    fn ours(conn: &rusqlite::Connection, query: &str) -> Vec<(i64, f64)> {
        let sql = format!("SELECT rowid, {FUNCTION}(t) FROM t WHERE t MATCH ?1 ORDER BY rowid");
        scored_with(conn, &sql, query, &[])
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
            let ours = ours(&conn, query);
            let theirs = scores(&conn, "bm25", query);
            assert_eq!(ours.len(), theirs.len(), "{query}");
            for ((rowid, a), (_, b)) in ours.iter().zip(&theirs) {
                assert!((a - b).abs() < 1e-12, "{query} row {rowid}: {a} vs {b}");
            }
        }
    }

    /// Rows of `t` dealt to shards `s0` and `s1` (contentless, as piidx's
    /// are) in several ways, one of which leaves a shard without a match
    /// of a query: each match scored with both shards' statistics scores
    /// exactly as `bm25()` over `t`, whichever shard it is in.
    #[test]
    fn shards_together_score_as_one_table() {
        let conn = table();
        let bodies: Vec<(i64, String)> = {
            let mut stmt = conn.prepare("SELECT rowid, body FROM t").unwrap();
            stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        };
        let dealings: [fn(i64) -> bool; 4] =
            [|id| id % 2 == 0, |id| id <= 3, |id| id == 3, |_| true];
        let queries: [(&str, &[&str]); 5] = [
            ("alpha beta", &["\"alpha\"", "\"beta\""]),
            ("alpha OR beta", &["\"alpha\"", "\"beta\""]),
            ("\"alpha beta\" OR delta", &["\"alpha beta\"", "\"delta\""]),
            ("gamma NOT beta", &["\"gamma\"", "\"beta\""]),
            ("beta zeta", &["\"beta\"", "\"zeta\""]),
        ];
        let mut empty_shards = 0;
        for in_first in dealings {
            conn.execute_batch(
                "DROP TABLE IF EXISTS s0; DROP TABLE IF EXISTS s1;
                 CREATE VIRTUAL TABLE s0 USING fts5(body, content = '');
                 CREATE VIRTUAL TABLE s1 USING fts5(body, content = '');",
            )
            .unwrap();
            for (id, body) in &bodies {
                let shard = if in_first(*id) { "s0" } else { "s1" };
                conn.execute(
                    &format!("INSERT INTO {shard}(rowid, body) VALUES (?1, ?2)"),
                    rusqlite::params![id, body],
                )
                .unwrap();
            }
            for (query, phrases) in queries {
                let phrases: Vec<String> = phrases.iter().map(|p| p.to_string()).collect();
                let mut ours = Vec::new();
                for (shard, other) in [("s0", "s1"), ("s1", "s0")] {
                    let other = ShardStats::read(&conn, "main", other, Some(&phrases)).unwrap();
                    let sql = format!(
                        "SELECT rowid, {FUNCTION}({shard}) FROM {shard} WHERE {shard} MATCH ?1"
                    );
                    let scored = scored_with(&conn, &sql, query, &[other]);
                    if scored.is_empty() {
                        empty_shards += 1;
                    }
                    ours.extend(scored);
                }
                ours.sort_by_key(|(rowid, _)| *rowid);
                let theirs = scores(&conn, "bm25", query);
                assert_eq!(ours.len(), theirs.len(), "{query}");
                for ((rowid, a), (_, b)) in ours.iter().zip(&theirs) {
                    assert!((a - b).abs() < 1e-12, "{query} row {rowid}: {a} vs {b}");
                }
            }
        }
        assert!(empty_shards > 3, "some shard had no match: {empty_shards}");
    }

    /// Packed parts read back as they were; those that do not fit are not
    /// packed, and a query's rows after the first are packed.
    #[test]
    fn packed_parts_read_back_as_they_were() {
        for (tokens, freq) in [
            (0, vec![1]),
            (0xffff, vec![0x7fff]),
            (12, vec![3, 0]),
            (0xffff, vec![0x7fff, 0, 0x7fff]),
            (7, vec![1, 2, 3]),
        ] {
            let packed = pack(tokens, &freq).expect("fits");
            let value = RowValue::read(rusqlite::types::ValueRef::Integer(packed)).unwrap();
            assert_eq!(value.stats(), None);
            assert_eq!((value.tokens(), value.phrases()), (tokens, freq.len()));
            let mut read = Vec::new();
            value.push_freq(&mut read);
            assert_eq!(read, freq);
        }
        assert_eq!(pack(0x1_0000, &[1]), None);
        assert_eq!(pack(1, &[0x8000]), None);
        assert_eq!(pack(1, &[1, 1, 1, 1]), None);
        assert_eq!(pack(1, &[]), None);
        assert!(RowValue::read(rusqlite::types::ValueRef::Integer(0)).is_none());

        let conn = table();
        let sql = format!("SELECT {FUNCTION}(t) FROM t WHERE t MATCH 'alpha' ORDER BY rowid");
        let mut stmt = conn.prepare(&sql).unwrap();
        let kinds: Vec<rusqlite::types::Type> = stmt
            .query_map([], |row| Ok(row.get_ref(0)?.data_type()))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        use rusqlite::types::Type;
        assert_eq!(
            kinds,
            [Type::Blob, Type::Integer, Type::Integer, Type::Integer]
        );
    }

    /// A shard's statistics read from its table are those its matches
    /// carry, and an empty table's are nothing.
    #[test]
    fn statistics_read_from_the_table_are_the_functions() {
        let conn = table();
        for (query, phrases) in [
            ("alpha", vec!["\"alpha\""]),
            ("alpha beta", vec!["\"alpha\"", "\"beta\""]),
            (
                "al* AND (gamma OR zeta)",
                vec!["\"al\"*", "\"gamma\"", "\"zeta\""],
            ),
        ] {
            let phrases: Vec<String> = phrases.iter().map(|p| p.to_string()).collect();
            let value: Vec<u8> = conn
                .query_row(
                    &format!("SELECT {FUNCTION}(t) FROM t WHERE t MATCH ?1 LIMIT 1"),
                    [query],
                    |row| row.get(0),
                )
                .unwrap();
            let parts = Parts::read(&value).unwrap();
            assert_eq!(parts.stats().rows, 6);
            assert_eq!(parts.stats().tokens, 21);
            let read = ShardStats::read(&conn, "main", "t", Some(&phrases)).unwrap();
            assert_eq!(read, parts.stats(), "{query}");
        }
        conn.execute_batch("CREATE VIRTUAL TABLE e USING fts5(body, content = '');")
            .unwrap();
        let read = ShardStats::read(&conn, "main", "e", None).unwrap();
        assert_eq!(read, ShardStats::default());
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
            let rows = |call: &str| -> Vec<(i64, rusqlite::types::Value)> {
                let sql = format!("SELECT rowid, {call} FROM t WHERE t MATCH ?1 ORDER BY {order}");
                let mut stmt = conn.prepare(&sql).unwrap();
                stmt.query_map([query], |row| Ok((row.get(0)?, row.get(1)?)))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap()
            };
            let read = rows(&format!("{FUNCTION}(t, 'main', 't')"));
            assert!(!read.is_empty(), "{query}");
            assert_eq!(read, rows(&format!("{FUNCTION}(t)")), "{query} {order}");
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
            let mut freq = vec![0; phrases];
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
                    freq[usize::try_from(phrase).unwrap()] += 1;
                }
            }
            let text: Vec<String> = freq.iter().map(u32::to_string).collect();
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
            let ours = ours(&conn, query);
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
