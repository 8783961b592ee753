//! Each full-text row's length in tokens, kept in a shard beside FTS5's own
//! `<table>_docsize` rows, in the layout ranking reads fastest.
//!
//! `piidx_bm25_parts` needs every match's length (`rank`). FTS5 keeps it in a
//! docsize row per row: a B-tree row to step to or seek for each match,
//! a large part of a search's work (docs/performance.md). Here the lengths of a shard's
//! rows sit in blocks of `SLOTS` two-byte slots, one row of
//! `<table>_lengths(block, sizes)` each, addressed by the chunk id's
//! position in its shard (`id / shards`: shard `s` holds the ids with
//! `id % shards = s`), so a query's matches, newest first, read one small
//! row per block of neighbouring chunks.
//!
//! The shard writer records the lengths of the rows it inserts in the same
//! transaction, from the docsize rows FTS5 has just written, so the two
//! never disagree on a row the index holds (`mismatches`, part of
//! `piidx doctor`). A deleted row's slot keeps its old length: no match
//! reads it, and its id is never used again. A slot of 0 (never written, or
//! a length that does not fit in two bytes) sends the reader to FTS5's
//! `xColumnSize`, as does a block of another size than `SLOTS`' and a shard
//! written before this table existed, until the next sync adds it.

use rusqlite::{Connection, OptionalExtension, params};

/// Slots per block: two blocks of two-byte lengths, with their cells'
/// headers, fit in one page of the shard (4 KiB; 1,024 slots would leave
/// each block alone on its page), with no overflow page to follow.
pub const SLOTS: i64 = 1000;

/// The tables that have lengths: every FTS5 table of a shard.
pub(super) const TABLES: [&str; 2] = ["fts", "fts_trigram"];

/// `CREATE TABLE` of `table`'s lengths.
pub(super) fn create_sql(table: &str) -> String {
    format!(
        "CREATE TABLE {table}_lengths(
           block INTEGER PRIMARY KEY, -- (id / shards) / {SLOTS}
           sizes BLOB NOT NULL        -- {SLOTS} little-endian u16: tokens, 0 = ask FTS5
         );"
    )
}

/// The block and slot of chunk `id` in a shard of `shards`.
pub fn locate(id: i64, shards: i64) -> (i64, usize) {
    let position = id.div_euclid(shards.max(1));
    (
        position.div_euclid(SLOTS),
        position.rem_euclid(SLOTS) as usize,
    )
}

/// The length in slot `slot` of a block's `sizes`; `None` when it is not
/// recorded (0), or when the block is not of this layout's size: a block
/// of another size would place the ids otherwise, so none of it is read.
pub(super) fn read_slot(sizes: &[u8], slot: usize) -> Option<i32> {
    if sizes.len() != SLOTS as usize * 2 {
        return None;
    }
    let bytes = sizes.get(slot * 2..slot * 2 + 2)?;
    let tokens = u16::from_le_bytes([bytes[0], bytes[1]]);
    (tokens != 0).then_some(i32::from(tokens))
}

/// What a slot holds for a row of `tokens` tokens.
fn slot_value(tokens: i64) -> u16 {
    u16::try_from(tokens).unwrap_or(0)
}

/// A `SELECT id, sz` docsize row: the id, and what its slot holds.
fn docsize_row(row: &rusqlite::Row) -> rusqlite::Result<(i64, u16)> {
    let tokens = row
        .get_ref(1)?
        .as_blob_or_null()?
        .and_then(total_size)
        .unwrap_or(0);
    Ok((row.get(0)?, slot_value(tokens)))
}

/// Records the lengths of `table`'s rows with ids in `low..=high`, from
/// their docsize rows. Runs inside the caller's transaction.
pub(super) fn record(
    conn: &Connection,
    table: &str,
    shards: i64,
    low: i64,
    high: i64,
) -> rusqlite::Result<()> {
    let mut sizes = conn.prepare_cached(&format!(
        "SELECT id, sz FROM {table}_docsize WHERE id BETWEEN ?1 AND ?2 ORDER BY id"
    ))?;
    let mut rows = sizes.query(params![low, high])?;
    let mut block = Block::default();
    while let Some(row) = rows.next()? {
        let (id, value) = docsize_row(row)?;
        let (number, slot) = locate(id, shards);
        if block.number != Some(number) {
            block.save(conn, table)?;
            block.load(conn, table, number)?;
        }
        block.sizes[slot * 2..slot * 2 + 2].copy_from_slice(&value.to_le_bytes());
    }
    block.save(conn, table)
}

/// The block being filled by `record`.
#[derive(Default)]
struct Block {
    number: Option<i64>,
    sizes: Vec<u8>,
}

impl Block {
    fn load(&mut self, conn: &Connection, table: &str, number: i64) -> rusqlite::Result<()> {
        let mut read = conn.prepare_cached(&format!(
            "SELECT sizes FROM {table}_lengths WHERE block = ?1"
        ))?;
        // A block that is not a blob of this layout's size (a damaged
        // shard) is written anew.
        let mut sizes: Vec<u8> = read
            .query_row([number], |row| {
                Ok(row
                    .get_ref(0)?
                    .as_blob()
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default())
            })
            .optional()?
            .unwrap_or_default();
        if sizes.len() != SLOTS as usize * 2 {
            sizes = vec![0; SLOTS as usize * 2];
        }
        self.number = Some(number);
        self.sizes = sizes;
        Ok(())
    }

    fn save(&mut self, conn: &Connection, table: &str) -> rusqlite::Result<()> {
        if let Some(number) = self.number.take() {
            conn.prepare_cached(&format!(
                "INSERT OR REPLACE INTO {table}_lengths(block, sizes) VALUES (?1, ?2)"
            ))?
            .execute(params![number, self.sizes])?;
        }
        Ok(())
    }
}

/// Adds the lengths tables to a shard written before they existed, filled
/// from every docsize row, in one transaction.
pub(super) fn add_missing(conn: &Connection, shards: i64) -> rusqlite::Result<()> {
    for table in TABLES {
        if !has_lengths(conn, table)? {
            conn.execute_batch(&format!("BEGIN IMMEDIATE; {}", create_sql(table)))?;
            record(conn, table, shards, i64::MIN, i64::MAX)?;
            conn.execute_batch("COMMIT")?;
        }
    }
    Ok(())
}

fn has_lengths(conn: &Connection, table: &str) -> rusqlite::Result<bool> {
    super::has_table(conn, &format!("{table}_lengths"))
}

/// How many of `table`'s rows have a length slot that differs from their
/// docsize row (`None` when the shard has no lengths table yet).
pub fn mismatches(conn: &Connection, table: &str, shards: i64) -> rusqlite::Result<Option<i64>> {
    if !has_lengths(conn, table)? {
        return Ok(None);
    }
    let blocks: std::collections::HashMap<i64, Vec<u8>> = conn
        .prepare(&format!("SELECT block, sizes FROM {table}_lengths"))?
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut sizes = conn.prepare(&format!("SELECT id, sz FROM {table}_docsize"))?;
    let mut rows = sizes.query([])?;
    let mut wrong = 0;
    while let Some(row) = rows.next()? {
        let (id, value) = docsize_row(row)?;
        let (number, slot) = locate(id, shards);
        let recorded = blocks
            .get(&number)
            .and_then(|sizes| read_slot(sizes, slot))
            .unwrap_or(0);
        if recorded != i32::from(value) {
            wrong += 1;
        }
    }
    Ok(Some(wrong))
}

/// The sum of a docsize blob's varints, one per column, as FTS5 decodes
/// them (`fts5StorageDecodeSizeArray`); `None` when the blob is not that.
fn total_size(mut blob: &[u8]) -> Option<i64> {
    let mut total: i64 = 0;
    while !blob.is_empty() {
        let (value, used) = varint(blob)?;
        // FTS5 keeps each column's size as a 32-bit integer.
        total += i64::from(value as u32 as i32);
        blob = &blob[used..];
    }
    Some(total)
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

    #[test]
    fn a_docsize_blob_is_its_varints_summed() {
        assert_eq!(total_size(&[3, 0x81, 0x00]), Some(3 + 128));
        assert_eq!(total_size(&[3]), Some(3));
        assert_eq!(total_size(&[]), Some(0));
        assert_eq!(total_size(&[0x81]), None);
    }

    #[test]
    fn ids_of_a_shard_fill_its_slots_in_order() {
        // Shard 1 of 2 holds the odd ids: positions 0, 1, 2, ...
        assert_eq!(locate(1, 2), (0, 0));
        assert_eq!(locate(3, 2), (0, 1));
        assert_eq!(locate(2 * SLOTS + 1, 2), (1, 0));
        assert_eq!(locate(2 * SLOTS - 1, 2), (0, SLOTS as usize - 1));
        assert_eq!(locate(5, 1), (0, 5));
        let mut block = vec![0; SLOTS as usize * 2];
        block[2..4].copy_from_slice(&[7, 1]);
        assert_eq!(read_slot(&block, 1), Some(263));
        assert_eq!(read_slot(&block, 0), None);
        assert_eq!(read_slot(&block, SLOTS as usize), None);
        assert_eq!(read_slot(&block[..4], 1), None, "a block of another size");
        assert_eq!(slot_value(70_000), 0);
    }

    /// A shard-like table: rows of 1 + (id % 13) tokens, ids of shard 0 of
    /// 2, spread over several blocks.
    fn shard() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE fts USING fts5(body, content = ''); {}",
            create_sql("fts")
        ))
        .unwrap();
        for id in (0..3 * 2 * SLOTS).step_by(2).skip(1) {
            let body = "word ".repeat(1 + (id % 13) as usize);
            conn.execute(
                "INSERT INTO fts(rowid, body) VALUES (?1, ?2)",
                params![id, body],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn recorded_lengths_are_the_docsize_rows() {
        let conn = shard();
        assert_eq!(mismatches(&conn, "fts", 2).unwrap(), Some(3 * SLOTS - 1));
        // Recorded in two ranges, the second across a block's edge.
        record(&conn, "fts", 2, 0, 3 * SLOTS).unwrap();
        record(&conn, "fts", 2, 3 * SLOTS + 1, i64::MAX).unwrap();
        assert_eq!(mismatches(&conn, "fts", 2).unwrap(), Some(0));
        let blocks: i64 = conn
            .query_row("SELECT count(*) FROM fts_lengths", [], |row| row.get(0))
            .unwrap();
        assert_eq!(blocks, 3);
        let sizes: Vec<u8> = conn
            .query_row("SELECT sizes FROM fts_lengths WHERE block = 1", [], |row| {
                row.get(0)
            })
            .unwrap();
        let id = 2 * SLOTS + 2 * 5;
        assert_eq!(read_slot(&sizes, 5), Some(1 + (id % 13) as i32));
        // A wrong slot is found.
        conn.execute(
            "UPDATE fts_lengths SET sizes = CAST(zeroblob(2) || substr(sizes, 3) AS BLOB) WHERE block = 2",
            [],
        )
        .unwrap();
        assert_eq!(mismatches(&conn, "fts", 2).unwrap(), Some(1));
    }

    #[test]
    fn a_shard_without_lengths_gets_them_filled() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE fts USING fts5(body, content = '');
             CREATE VIRTUAL TABLE fts_trigram USING fts5(body, content = '', tokenize = 'trigram');
             INSERT INTO fts(rowid, body) VALUES (3, 'a b c'), (5, 'd');
             INSERT INTO fts_trigram(rowid, body) VALUES (5, 'abcdef');",
        )
        .unwrap();
        assert_eq!(mismatches(&conn, "fts", 2).unwrap(), None);
        add_missing(&conn, 2).unwrap();
        assert_eq!(mismatches(&conn, "fts", 2).unwrap(), Some(0));
        assert_eq!(mismatches(&conn, "fts_trigram", 2).unwrap(), Some(0));
        let sizes: Vec<u8> = conn
            .query_row("SELECT sizes FROM fts_lengths", [], |row| row.get(0))
            .unwrap();
        assert_eq!(
            (read_slot(&sizes, 1), read_slot(&sizes, 2)),
            (Some(3), Some(1))
        );
        let trigrams: Vec<u8> = conn
            .query_row("SELECT sizes FROM fts_trigram_lengths", [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(read_slot(&trigrams, 2), Some(4));
    }
}
