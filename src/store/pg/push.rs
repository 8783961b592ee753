//! `piidx push`: the index's changes since its last push, sent to the team
//! store.
//!
//! A session file is the unit. The store's `push_files` says which version
//! (signature) of each of this machine's files it holds, and up to which
//! entry; files whose signature differs are sent a batch of files per
//! transaction: their old rows deleted, the new ones loaded with `COPY`
//! with the word index of their texts (`words`, made here), and their
//! `push_files` rows written, all committed together. A file
//! that only grew since (appended lines) keeps its entries' rows in the
//! store and gets its newer entries; its other rows (the session's counts,
//! tool calls whose results came later, usage and runs) are replaced. So a push killed at
//! any point leaves every file either as it was or as it is now, and the
//! next push sends what is left: nothing twice, nothing lost. The index
//! keeps the same record (`push_files` in SQLite, written after the store
//! committed), for information; the store's record is the one that counts.
//!
//! Each machine's rows are its own (`src`), and a push holds a session
//! advisory lock on its `src` only: machines push at the same time without
//! waiting for each other, and two pushes of one index take turns.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Instant;

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use rusqlite::types::ValueRef;
use serde::Serialize;

use super::lexemes::{Scratch, Tokenizers};
use super::words::{BatchWords, Block};
use super::{PUSH_LOCK, Pg, PgError};
use crate::fault;
use crate::store::{PushFile, PushTable, Writer};

/// What a push did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushReport {
    /// The index's machine label and the store's id for it.
    pub machine: String,
    pub src: i32,
    pub files_sent: u64,
    /// Of those, files that only grew: their newer entries were sent.
    pub files_appended: u64,
    pub files_deleted: u64,
    pub files_unchanged: u64,
    /// Rows sent, all tables.
    pub rows_sent: u64,
    /// Bytes of session files whose rows were sent.
    pub source_bytes: u64,
    pub batches: u64,
    pub seconds: f64,
}

/// Bytes of session files per transaction (`PIIDX_TEST_BATCH_BYTES` in
/// tests): large enough that commits cost little, small enough that a
/// killed push loses little.
const BATCH_BYTES: u64 = 32 << 20;
/// Files per transaction at most.
const BATCH_FILES: usize = 2000;

/// Pushes the index `writer` into the store `pg` (whose schema is migrated
/// first); `target` names the store in the index's own record.
pub fn push(writer: &Writer, pg: &mut Pg) -> Result<PushReport, PgError> {
    let started = Instant::now();
    pg.migrate()?;
    let machine = writer.machine()?;
    let target = pg.url.clone();
    let err = |source| PgError::Postgres {
        url: target.clone(),
        source,
    };
    let src: i32 = pg
        .client
        .query_one(
            "INSERT INTO machines(uid, name) VALUES ($1, $2)
             ON CONFLICT (uid) DO UPDATE SET name = excluded.name
             RETURNING src",
            &[&machine.uid, &machine.name],
        )
        .map_err(err)?
        .try_get(0)
        .map_err(err)?;
    // Two pushes of one index take turns; other machines do not wait.
    pg.client
        .execute("SELECT pg_advisory_lock($1, $2)", &[&PUSH_LOCK, &src])
        .map_err(err)?;
    // A commit need not wait for its WAL to reach the disk: a server crash
    // may lose the last few, each whole (its rows with its `push_files`
    // rows), and the next push sends those files again.
    pg.client
        .batch_execute("SET synchronous_commit = off")
        .map_err(err)?;
    let mut report = PushReport {
        machine: machine.name.clone(),
        src,
        ..PushReport::default()
    };

    let held: HashMap<i64, Held> = pg
        .client
        .query(
            "SELECT file_id, sig, base, max_rowid, entries FROM push_files WHERE src = $1",
            &[&src],
        )
        .map_err(err)?
        .into_iter()
        .map(|row| {
            let held = Held {
                sig: row.try_get(1)?,
                base: row.try_get(2)?,
                max_rowid: row.try_get(3)?,
                entries: row.try_get(4)?,
            };
            Ok((row.try_get(0)?, held))
        })
        .collect::<Result<_, postgres::Error>>()
        .map_err(err)?;
    let files = writer.push_files(&machine.name)?;
    let present: HashSet<i64> = files.iter().map(|file| file.file_id).collect();
    let gone: Vec<i64> = held
        .keys()
        .filter(|id| !present.contains(id))
        .copied()
        .collect();
    // Each changed file with the entry after which its rows are sent: 0
    // for all of them, else the last one sent when the file only grew
    // since (same base, and every entry sent then still there).
    let mut changed = Vec::new();
    for file in &files {
        let after = match held.get(&file.file_id) {
            Some(held) if held.sig == file.sig => continue,
            Some(held)
                if held.base == file.base
                    && held.max_rowid > 0
                    && file.max_rowid >= held.max_rowid
                    && writer.entries_up_to(file.file_id, held.max_rowid)? == held.entries =>
            {
                held.max_rowid
            }
            _ => 0,
        };
        changed.push((file, after));
    }
    report.files_unchanged = (files.len() - changed.len()) as u64;

    if !gone.is_empty() {
        let mut tx = pg.client.transaction().map_err(err)?;
        delete_files(&mut tx, src, &gone, |_| true).map_err(err)?;
        tx.execute(
            "DELETE FROM push_files WHERE src = $1 AND file_id = ANY($2)",
            &[&src, &gone],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
        report.files_deleted = gone.len() as u64;
        let done: Vec<(i64, Option<&str>)> = gone.iter().map(|id| (*id, None)).collect();
        writer.record_pushed(&target, &done)?;
    }

    let batch_bytes = fault::batch_bytes(BATCH_BYTES);
    let mut rest = changed.as_slice();
    let mut buf = Vec::with_capacity(1 << 17);
    while !rest.is_empty() {
        let mut take = 0;
        let mut bytes = 0u64;
        while take < rest.len() && take < BATCH_FILES && (take == 0 || bytes < batch_bytes) {
            bytes += rest[take].0.bytes.max(0) as u64;
            take += 1;
        }
        let (batch, later) = rest.split_at(take);
        rest = later;
        let ids: Vec<i64> = batch.iter().map(|(file, _)| file.file_id).collect();
        let (whole, grew): (Vec<i64>, Vec<i64>) = {
            let (whole, grew): (Vec<_>, Vec<_>) = batch.iter().partition(|(_, after)| *after == 0);
            let ids =
                |files: Vec<&(&PushFile, i64)>| files.iter().map(|(f, _)| f.file_id).collect();
            (ids(whole), ids(grew))
        };

        let mut tx = pg.client.transaction().map_err(err)?;
        let batch_id: i64 = tx
            .query_one("SELECT nextval('word_batch_ids')", &[])
            .map_err(err)?
            .try_get(0)
            .map_err(err)?;
        let mut batch_words = BatchWords::default();
        // Files sent whole lose all their rows; files that grew keep their
        // entries' rows, which the new ones follow.
        delete_files(&mut tx, src, &whole, |_| true).map_err(err)?;
        delete_files(&mut tx, src, &grew, |table| !table.appends()).map_err(err)?;
        for table in PushTable::ALL {
            // Texts carry their batch and number of words; their words go
            // to the word index (`words`).
            let words = table == PushTable::Texts;
            let sql = format!(
                "COPY {} (src, {}{}) FROM STDIN",
                table.name(),
                table.columns(),
                if words { ", batch, words" } else { "" }
            );
            let mut copy = LazyCopy::new(&mut tx, sql, &target);
            if words {
                batch_words = copy_texts(
                    writer,
                    batch,
                    &machine.name,
                    (src, batch_id),
                    &mut copy,
                    &mut report.rows_sent,
                )?;
                copy.finish()?;
                continue;
            }
            for (file, after) in batch {
                let after = if table.appends() { *after } else { 0 };
                writer.push_rows(table, file.file_id, &machine.name, after, |values| {
                    encode_row(&mut buf, src, values);
                    buf.push(b'\n');
                    report.rows_sent += 1;
                    if buf.len() >= 1 << 16 {
                        copy.write(&buf)?;
                        buf.clear();
                    }
                    Ok::<(), PgError>(())
                })?;
            }
            copy.write(&buf)?;
            copy.finish()?;
            buf.clear();
        }
        write_words(&mut tx, src, batch_id, batch_words).map_err(err)?;
        let sigs: Vec<&str> = batch.iter().map(|(file, _)| file.sig.as_str()).collect();
        let bases: Vec<&str> = batch.iter().map(|(file, _)| file.base.as_str()).collect();
        let max_rowids: Vec<i64> = batch.iter().map(|(file, _)| file.max_rowid).collect();
        let entries: Vec<i64> = batch.iter().map(|(file, _)| file.entries).collect();
        tx.execute(
            "INSERT INTO push_files(src, file_id, sig, base, max_rowid, entries)
             SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
             ON CONFLICT (src, file_id) DO UPDATE
               SET sig = excluded.sig, base = excluded.base, max_rowid = excluded.max_rowid,
                   entries = excluded.entries, pushed_at = now()",
            &[&src, &ids, &sigs, &bases, &max_rowids, &entries],
        )
        .map_err(err)?;
        fault::reached(fault::Point::PushCopy);
        tx.commit().map_err(err)?;
        fault::reached(fault::Point::Push);
        let done: Vec<(i64, Option<&str>)> = batch
            .iter()
            .map(|(file, _)| (file.file_id, Some(file.sig.as_str())))
            .collect();
        writer.record_pushed(&target, &done)?;
        report.files_sent += batch.len() as u64;
        report.files_appended += grew.len() as u64;
        report.source_bytes += bytes;
        report.batches += 1;
    }

    if report.batches > 0 {
        merge_small_batches(&mut pg.client, src, &err)?;
    }
    pg.client
        .execute(
            "UPDATE machines SET last_push = now() WHERE src = $1",
            &[&src],
        )
        .map_err(err)?;
    pg.client
        .execute("SELECT pg_advisory_unlock($1, $2)", &[&PUSH_LOCK, &src])
        .map_err(err)?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Sends a batch's texts through `copy` (texts without words in the index,
/// whose body is empty or none, are not sent), and makes their word index.
/// A second thread makes the words and the texts' COPY lines (which carry
/// their number of words) while this one reads the index, so each takes
/// a core. `batch`: (src, batch id).
fn copy_texts(
    writer: &Writer,
    files: &[(&PushFile, i64)],
    machine: &str,
    (src, batch): (i32, i64),
    copy: &mut LazyCopy<'_, '_>,
    rows: &mut u64,
) -> Result<BatchWords, PgError> {
    std::thread::scope(|scope| {
        // Texts to the words' thread (bounded: the index is read no further
        // ahead than that), COPY lines back (unbounded: it never waits).
        let (to_words, texts) = std::sync::mpsc::sync_channel::<(Vec<u8>, i64, String)>(1024);
        let (to_copy, lines) = std::sync::mpsc::channel::<Vec<u8>>();
        let worker = scope.spawn(move || -> Result<BatchWords, PgError> {
            let tokenizers = Tokenizers::new()?;
            let mut scratch = Scratch::default();
            let mut words = BatchWords::default();
            let mut out = Vec::with_capacity(1 << 17);
            for (head, chunk_id, text) in texts {
                out.extend_from_slice(&head);
                out.push(b'\t');
                escape_text(&mut out, &text);
                let tokens = tokenizers.lexemes(&text, &mut scratch, |lexeme, positions| {
                    words.add(lexeme, chunk_id, 0, positions)
                })?;
                words.chunks += 1;
                words.tokens += i64::from(tokens);
                out.extend_from_slice(format!("\t{batch}\t{tokens}\n").as_bytes());
                if out.len() >= 1 << 16 && to_copy.send(std::mem::take(&mut out)).is_err() {
                    break;
                }
            }
            // A closed channel means the reading thread failed: its error is
            // the one told.
            let _ = to_copy.send(out);
            Ok(words)
        });
        for (file, after) in files {
            writer.push_rows(PushTable::Texts, file.file_id, machine, *after, |values| {
                let Some((ValueRef::Text(text), head)) = values.split_last() else {
                    return Ok(());
                };
                let Some(ValueRef::Integer(chunk_id)) = head.first() else {
                    return Ok(());
                };
                if text.is_empty() {
                    return Ok(());
                }
                let mut line = Vec::with_capacity(256);
                encode_row(&mut line, src, head);
                let text = String::from_utf8_lossy(text).into_owned();
                if to_words.send((line, *chunk_id, text)).is_err() {
                    // The words' thread failed: its error is told below.
                    return Ok(());
                }
                *rows += 1;
                while let Ok(bytes) = lines.try_recv() {
                    copy.write(&bytes)?;
                }
                Ok::<(), PgError>(())
            })?;
        }
        drop(to_words);
        for bytes in lines.iter() {
            copy.write(&bytes)?;
        }
        worker.join().map_err(|_| PgError::Copy {
            url: copy.url.to_owned(),
            source: std::io::Error::other("the thread making the word index panicked"),
        })?
    })
}

/// Writes a batch's word index: its blocks (`words`, binary COPY: the
/// server parses no text for them) and its `word_batches` row.
fn write_words(
    tx: &mut postgres::Transaction<'_>,
    src: i32,
    batch: i64,
    words: BatchWords,
) -> Result<(), postgres::Error> {
    if words.is_empty() {
        return Ok(());
    }
    let (chunks, tokens) = (words.chunks, words.tokens);
    let (blocks, bytes) = words.into_blocks();
    let copy = tx.copy_in(
        "COPY words (src, batch, first, lexemes, list_ends, lists, position_ends, positions)
         FROM STDIN (FORMAT binary)",
    )?;
    let mut rows = BinaryCopyInWriter::new(
        copy,
        &[
            Type::INT4,
            Type::INT8,
            Type::TEXT,
            Type::TEXT_ARRAY,
            Type::INT4_ARRAY,
            Type::BYTEA,
            Type::INT4_ARRAY,
            Type::BYTEA,
        ],
    );
    for block in &blocks {
        rows.write(&[
            &src,
            &batch,
            &block.first(),
            &block.lexemes,
            &block.list_ends,
            &block.lists,
            &block.position_ends,
            &block.positions,
        ])?;
    }
    rows.finish()?;
    tx.execute(
        "INSERT INTO word_batches(src, batch, chunks, tokens, bytes) VALUES ($1, $2, $3, $4, $5)",
        &[&src, &batch, &chunks, &tokens, &(bytes as i64)],
    )?;
    Ok(())
}

/// Batches are merged by size tier: under 64 KiB, 512 KiB and 4 MiB of
/// lists; larger ones (a first push's) are left as they are.
const TIERS: [i64; 3] = [64 << 10, 512 << 10, 4 << 20];
/// A tier's batches are merged once it has this many.
const MERGE_AT: usize = 8;

/// Merges a machine's small batches, LSM-style, so that a word is read in
/// a bounded number of rows however many pushes there were: whenever a
/// tier holds `MERGE_AT` batches, they become one, without the postings
/// that no longer count. Each merge is one transaction.
/// `err` names the store in errors.
fn merge_small_batches(
    client: &mut postgres::Client,
    src: i32,
    err: &impl Fn(postgres::Error) -> PgError,
) -> Result<(), PgError> {
    loop {
        let sizes: Vec<(i64, i64)> = client
            .query(
                "SELECT batch, bytes FROM word_batches WHERE src = $1 ORDER BY batch",
                &[&src],
            )
            .map_err(err)?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, postgres::Error>>()
            .map_err(err)?;
        let tier = |bytes: i64| TIERS.iter().position(|limit| bytes < *limit);
        let Some(full) = (0..TIERS.len()).find(|t| {
            sizes
                .iter()
                .filter(|(_, bytes)| tier(*bytes) == Some(*t))
                .count()
                >= MERGE_AT
        }) else {
            return Ok(());
        };
        let merged: Vec<i64> = sizes
            .iter()
            .filter(|(_, bytes)| tier(*bytes) == Some(full))
            .map(|(batch, _)| *batch)
            .collect();
        merge_batches(client, src, &merged, err)?;
    }
}

/// Merges `batches` of machine `src` into a new one, in one transaction.
/// A malformed list stops the merge (rolled back) rather than losing its
/// postings.
fn merge_batches(
    client: &mut postgres::Client,
    src: i32,
    batches: &[i64],
    err: &impl Fn(postgres::Error) -> PgError,
) -> Result<(), PgError> {
    let mut tx = client.transaction().map_err(err)?;
    let new: i64 = tx
        .query_one("SELECT nextval('word_batch_ids')", &[])
        .map_err(err)?
        .try_get(0)
        .map_err(err)?;
    let rows = tx
        .query(
            "SELECT batch, lexemes, list_ends, lists, position_ends, positions
               FROM words WHERE src = $1 AND batch = ANY($2)",
            &[&src, &batches],
        )
        .map_err(err)?;
    let mut blocks: Vec<(i64, Block)> = Vec::with_capacity(rows.len());
    for row in &rows {
        let block = Block {
            lexemes: row.try_get(1).map_err(err)?,
            list_ends: row.try_get(2).map_err(err)?,
            lists: row.try_get(3).map_err(err)?,
            position_ends: row.try_get(4).map_err(err)?,
            positions: row.try_get(5).map_err(err)?,
        };
        blocks.push((row.try_get(0).map_err(err)?, block));
    }
    // The chunks still in `texts` with the batch their postings name.
    let mut chunks: Vec<i64> = Vec::new();
    for (batch, block) in &blocks {
        for i in 0..block.lexemes.len() {
            for posting in block.postings(i, *batch)? {
                chunks.push(posting?.chunk_id);
            }
        }
    }
    chunks.sort_unstable();
    chunks.dedup();
    // (Merged batches' postings name the batches that wrote their chunks,
    // not the merged batch.)
    let mut live: HashMap<(i64, i64), i64> = HashMap::new();
    for row in tx
        .query(
            "SELECT chunk_id, batch, coalesce(words, 0) FROM texts
              WHERE src = $1 AND chunk_id = ANY($2) AND batch IS NOT NULL",
            &[&src, &chunks],
        )
        .map_err(err)?
    {
        live.insert(
            (row.try_get(0).map_err(err)?, row.try_get(1).map_err(err)?),
            i64::from(row.try_get::<_, i32>(2).map_err(err)?),
        );
    }
    let mut words = BatchWords::default();
    let mut kept: HashSet<(i64, i64)> = HashSet::new();
    for (batch, block) in &blocks {
        for (i, lexeme) in block.lexemes.iter().enumerate() {
            for posting in block.postings(i, *batch)? {
                let posting = posting?;
                let key = (posting.chunk_id, posting.batch);
                if !live.contains_key(&key) {
                    continue;
                }
                kept.insert(key);
                let positions = posting.positions()?;
                words.add(
                    lexeme,
                    posting.chunk_id,
                    (new - posting.batch) as u64,
                    &positions,
                );
            }
        }
    }
    // The chunks this merge keeps postings of (a live chunk of a later
    // batch counts there).
    words.chunks = kept.len() as i64;
    words.tokens = kept.iter().filter_map(|key| live.get(key)).sum();
    tx.execute(
        "DELETE FROM words WHERE src = $1 AND batch = ANY($2)",
        &[&src, &batches],
    )
    .map_err(err)?;
    tx.execute(
        "DELETE FROM word_batches WHERE src = $1 AND batch = ANY($2)",
        &[&src, &batches],
    )
    .map_err(err)?;
    write_words(&mut tx, src, new, words).map_err(err)?;
    tx.commit().map_err(err)
}

/// What the store holds of one file (its `push_files` row).
struct Held {
    sig: String,
    base: String,
    max_rowid: i64,
    entries: i64,
}

/// A table's COPY, opened with its first bytes: a table without rows in a
/// batch (often, in a small push) costs no round trip.
struct LazyCopy<'a, 't> {
    sql: String,
    url: &'a str,
    /// The transaction, until the COPY opens and borrows it.
    tx: Option<&'a mut postgres::Transaction<'t>>,
    copy: Option<postgres::CopyInWriter<'a>>,
}

impl<'a, 't> LazyCopy<'a, 't> {
    fn new(tx: &'a mut postgres::Transaction<'t>, sql: String, url: &'a str) -> Self {
        LazyCopy {
            sql,
            url,
            tx: Some(tx),
            copy: None,
        }
    }

    /// Sends `bytes`, opening the COPY first if they are its first.
    fn write(&mut self, bytes: &[u8]) -> Result<(), PgError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if let Some(tx) = self.tx.take() {
            let copy = tx.copy_in(&self.sql).map_err(|source| PgError::Postgres {
                url: self.url.to_owned(),
                source,
            })?;
            self.copy = Some(copy);
        }
        if let Some(copy) = self.copy.as_mut() {
            copy.write_all(bytes).map_err(|source| PgError::Copy {
                url: self.url.to_owned(),
                source,
            })?;
        }
        Ok(())
    }

    /// Ends the COPY, if it was opened.
    fn finish(self) -> Result<(), PgError> {
        let Some(copy) = self.copy else {
            return Ok(());
        };
        copy.finish().map(drop).map_err(|source| PgError::Postgres {
            url: self.url.to_owned(),
            source,
        })
    }
}

/// Deletes the rows of these files of machine `src` from the tables `which`
/// picks, in one round trip (the ids are numbers, written into the SQL).
fn delete_files(
    tx: &mut postgres::Transaction<'_>,
    src: i32,
    ids: &[i64],
    which: impl Fn(PushTable) -> bool,
) -> Result<(), postgres::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let sql: String = PushTable::ALL
        .into_iter()
        .filter(|table| which(*table))
        .map(|table| {
            format!(
                "DELETE FROM {} WHERE src = {src} AND file_id = ANY('{{{list}}}'::bigint[]);",
                table.name()
            )
        })
        .collect();
    tx.batch_execute(&sql)
}

/// One row in COPY's text format, without its newline: tab-separated, `\N`
/// for NULL, with backslash escapes. PostgreSQL text cannot hold NUL: it
/// becomes U+FFFD.
fn encode_row(buf: &mut Vec<u8>, src: i32, values: &[ValueRef<'_>]) {
    buf.extend_from_slice(src.to_string().as_bytes());
    for value in values {
        buf.push(b'\t');
        match value {
            ValueRef::Null | ValueRef::Blob(_) => buf.extend_from_slice(b"\\N"),
            ValueRef::Integer(i) => buf.extend_from_slice(i.to_string().as_bytes()),
            ValueRef::Real(f) => {
                let text = if f.is_nan() {
                    "NaN".to_owned()
                } else if f.is_infinite() {
                    if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned()
                } else {
                    f.to_string()
                };
                buf.extend_from_slice(text.as_bytes());
            }
            ValueRef::Text(bytes) => escape_text(buf, &String::from_utf8_lossy(bytes)),
        }
    }
}

/// `text` escaped for COPY's text format: the runs between the bytes COPY
/// reads specially are copied whole.
fn escape_text(buf: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            0 => "\u{FFFD}".as_bytes(),
            _ => continue,
        };
        buf.extend_from_slice(&bytes[start..i]);
        buf.extend_from_slice(escaped);
        start = i + 1;
    }
    buf.extend_from_slice(&bytes[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_escapes_what_copy_reads_specially() {
        let mut buf = Vec::new();
        encode_row(
            &mut buf,
            7,
            &[
                ValueRef::Null,
                ValueRef::Integer(-3),
                ValueRef::Real(0.1),
                ValueRef::Text(b"a\tb\\c\nd\0"),
            ],
        );
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "7\t\\N\t-3\t0.1\ta\\tb\\\\c\\nd\u{FFFD}"
        );
    }
}
