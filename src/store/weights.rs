//! The most a full-text row's score can be weighed by, kept in its shard
//! beside its length (`lengths`), so that ranking needs fewer lookups in
//! the main file.
//!
//! A search weighs each match's bm25 by the kind of its chunk (a tool
//! result half as much as a message: `KIND_WEIGHTS`), which only the main
//! file's `chunks` tells, at a page read or two per match. `weigh` looks
//! matches up best first until no later one can enter the top; with the
//! weight unknown it must assume 1, and a common word's top, mostly tool
//! results, settled only after hundreds of lookups (docs/search.md). Here
//! each row has the highest weight of the chunks that point at it: an
//! entry's own chunk, or every chunk whose text is that shared text.
//!
//! A row's byte (`Weight`) is raised, never lowered: when a later chunk
//! points at a shared text with a higher weight, and after a kill by the
//! catch-up, which sends the weights of every chunk above a shard's mark
//! again. A deleted chunk's weight stays, which keeps it an upper bound
//! (ids are never used again). 0 means not known (a shard written before
//! this table, until the next sync fills it): weight 1, as before.
//!
//! Blocks are laid out as the lengths' are: `SLOTS` bytes per row of
//! `weights(block, kinds)`, a row's slot at `lengths::locate`.

use std::collections::{BTreeMap, HashMap};

use rusqlite::{Connection, OptionalExtension, params};

use super::lengths::{SLOTS, locate};

/// `CREATE TABLE` of the weights.
pub(super) const CREATE_SQL: &str = "CREATE TABLE weights(
  block INTEGER PRIMARY KEY, -- (id / shards) / 1000
  kinds BLOB NOT NULL        -- 1000 bytes: 0 unknown, 1 weight 0.5, 2 weight 0.7, 3 weight 1
);";

/// A row's weight class, as stored: a higher byte is a higher weight.
pub type Weight = u8;

/// The weight of a chunk of `kind`: the Rust side of `KIND_WEIGHTS`
/// (`query::search::weigh`), which a test keeps equal to it.
pub fn kind_weight(kind: &str) -> f64 {
    match kind {
        "user" | "assistant" | "summary" => 1.0,
        "tool_result" => 0.5,
        _ => 0.7,
    }
}

/// The class stored for a chunk of `kind`.
pub fn class_of(kind: &str) -> Weight {
    match kind_weight(kind) {
        w if w >= 1.0 => 3,
        w if w >= 0.7 => 2,
        _ => 1,
    }
}

/// The most a row of class `class` can be weighed by; 1 when not known.
pub fn bound(class: Weight) -> f64 {
    match class {
        1 => 0.5,
        2 => 0.7,
        _ => 1.0,
    }
}

/// The class in slot `slot` of a block; 0 when the block is not of this
/// layout's size.
fn read_slot(kinds: &[u8], slot: usize) -> Weight {
    if kinds.len() != SLOTS as usize {
        return 0;
    }
    kinds.get(slot).copied().unwrap_or(0)
}

/// Raises the stored class of each `(row id, class)` to at least its
/// class. Runs inside the caller's transaction.
pub(super) fn raise(
    conn: &Connection,
    shards: i64,
    weights: &[(i64, Weight)],
) -> rusqlite::Result<()> {
    let mut blocks: BTreeMap<i64, Vec<(usize, Weight)>> = BTreeMap::new();
    for &(id, class) in weights {
        let (block, slot) = locate(id, shards);
        blocks.entry(block).or_default().push((slot, class));
    }
    let mut read = conn.prepare_cached("SELECT kinds FROM weights WHERE block = ?1")?;
    let mut write =
        conn.prepare_cached("INSERT OR REPLACE INTO weights(block, kinds) VALUES (?1, ?2)")?;
    for (block, slots) in blocks {
        let stored: Option<Vec<u8>> = read
            .query_row([block], |row| {
                Ok(row.get_ref(0)?.as_blob().map(<[u8]>::to_vec).ok())
            })
            .optional()?
            .flatten();
        // A block that is not of this layout (a damaged shard) starts anew.
        let mut kinds = stored
            .filter(|kinds| kinds.len() == SLOTS as usize)
            .unwrap_or_else(|| vec![0; SLOTS as usize]);
        let mut changed = false;
        for (slot, class) in slots {
            if let Some(stored) = kinds.get_mut(slot)
                && *stored < class
            {
                *stored = class;
                changed = true;
            }
        }
        if changed {
            write.execute(params![block, kinds])?;
        }
    }
    Ok(())
}

/// The weight of every chunk of the main file up to id `upto` whose row is
/// in shard `shard` of `shards`: `(row id, class)`, a shared text's row
/// once per chunk pointing at it.
pub fn of_chunks(
    main: &Connection,
    shard: usize,
    shards: usize,
    upto: i64,
) -> rusqlite::Result<Vec<(i64, Weight)>> {
    let mut stmt = main.prepare(
        "SELECT coalesce(fts_rowid, chunk_id), kind FROM chunks
          WHERE coalesce(fts_rowid, chunk_id) % ?2 = ?1 AND chunk_id <= ?3",
    )?;
    let rows = stmt.query_map(params![shard as i64, shards as i64, upto], chunk_weight)?;
    rows.collect()
}

/// The weight of every chunk with an id in `(from, to]`, whichever shard
/// its row is in (a shard's catch-up after a kill): `(row id, class)`, as
/// `of_chunks` gives them.
pub(super) fn of_chunks_between(
    main: &Connection,
    from: i64,
    to: i64,
) -> rusqlite::Result<Vec<(i64, Weight)>> {
    let mut stmt = main.prepare_cached(
        "SELECT coalesce(fts_rowid, chunk_id), kind FROM chunks
          WHERE chunk_id > ?1 AND chunk_id <= ?2",
    )?;
    let rows = stmt.query_map([from, to], chunk_weight)?;
    rows.collect()
}

/// A `SELECT row id, kind` row of `chunks`: the row and its chunk's class
/// (a kind that is not text weighs as `KIND_WEIGHTS`' ELSE).
fn chunk_weight(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Weight)> {
    let kind = row
        .get_ref(1)?
        .as_str_or_null()
        .ok()
        .flatten()
        .unwrap_or_default();
    Ok((row.get(0)?, class_of(kind)))
}

/// The classes of one query's matches in a shard attached as `schema`,
/// from the blocks their ids span, read at once: a common word's matches
/// newest first fill a few dozen blocks. (An FTS5 function asked per row
/// cost more than the lookups it saved: docs/performance.md.)
pub struct Classes {
    shards: i64,
    /// The first block read, and the blocks from it on (empty where the
    /// shard has none): a lookup per match, without hashing.
    first: i64,
    blocks: Vec<Vec<u8>>,
}

impl Classes {
    /// The blocks of `ids` in the shard attached as `schema` (a name of
    /// piidx's own, `fts<k>`); none when it has no weights table yet.
    pub fn read(conn: &Connection, schema: &str, ids: &[i64]) -> rusqlite::Result<Classes> {
        let mut classes = Classes {
            shards: 1,
            first: 0,
            blocks: Vec::new(),
        };
        let (Some(&low), Some(&high)) = (ids.iter().min(), ids.iter().max()) else {
            return Ok(classes);
        };
        let (shards, has_table): (Option<i64>, bool) = conn
            .prepare_cached(&format!(
                "SELECT (SELECT shards FROM \"{schema}\".shard),
                        EXISTS (SELECT 1 FROM \"{schema}\".sqlite_schema
                                 WHERE type = 'table' AND name = 'weights')"
            ))?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        let (Some(shards), true) = (shards, has_table) else {
            return Ok(classes);
        };
        let (first, last) = (locate(low, shards).0, locate(high, shards).0);
        classes.shards = shards;
        classes.first = first;
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT block, kinds FROM \"{schema}\".weights WHERE block BETWEEN ?1 AND ?2"
        ))?;
        let mut rows = stmt.query([first, last])?;
        while let Some(row) = rows.next()? {
            let block: i64 = row.get(0)?;
            let Ok(at) = usize::try_from(block - first) else {
                continue;
            };
            if classes.blocks.len() <= at {
                classes.blocks.resize(at + 1, Vec::new());
            }
            // A block that is not a blob (a damaged shard) reads as unknown.
            if let Ok(Some(kinds)) = row.get_ref(1)?.as_blob_or_null() {
                classes.blocks[at] = kinds.to_vec();
            }
        }
        Ok(classes)
    }

    /// The class of row `id`: 0 (not known) when its block was not read.
    pub fn of(&self, id: i64) -> Weight {
        let (block, slot) = locate(id, self.shards);
        usize::try_from(block - self.first)
            .ok()
            .and_then(|at| self.blocks.get(at))
            .map_or(0, |kinds| read_slot(kinds, slot))
    }
}

/// How many of the shard's rows are weighed below a chunk pointing at them
/// or not at all (`weights`: every chunk's, from `of_chunks`); `None` when
/// the shard has no weights table yet. Any is a fault: a search could miss
/// a hit.
pub fn below(
    conn: &Connection,
    shards: i64,
    weights: &[(i64, Weight)],
) -> rusqlite::Result<Option<i64>> {
    if !super::has_table(conn, "weights")? {
        return Ok(None);
    }
    // A block that is not a blob (written by hand, damaged) reads as
    // unknown, as a search reads it: its rows count as weighed below.
    let blocks: HashMap<i64, Vec<u8>> = conn
        .prepare("SELECT block, kinds FROM weights")?
        .query_map([], |row| {
            let kinds = row.get_ref(1)?.as_blob().map(<[u8]>::to_vec);
            Ok((row.get(0)?, kinds.unwrap_or_default()))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut wrong = 0;
    for &(id, class) in weights {
        let (block, slot) = locate(id, shards);
        // 0 (not known) reads as the highest weight, but a sync records
        // every chunk's: one missing is a fault all the same.
        let stored = blocks.get(&block).map_or(0, |kinds| read_slot(kinds, slot));
        if stored < class {
            wrong += 1;
        }
    }
    Ok(Some(wrong))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(CREATE_SQL).unwrap();
        conn
    }

    fn stored(conn: &Connection, id: i64, shards: i64) -> Weight {
        let (block, slot) = locate(id, shards);
        conn.query_row(
            "SELECT kinds FROM weights WHERE block = ?1",
            [block],
            |row| Ok(read_slot(row.get_ref(0)?.as_blob()?, slot)),
        )
        .optional()
        .unwrap()
        .unwrap_or(0)
    }

    #[test]
    fn classes_order_as_the_weights() {
        for (low, high) in [
            ("tool_result", "bash"),
            ("bash", "user"),
            ("tool_result", "user"),
        ] {
            assert!(class_of(low) < class_of(high));
            assert!(bound(class_of(low)) < bound(class_of(high)));
        }
        for kind in [
            "user",
            "assistant",
            "summary",
            "tool_result",
            "thinking",
            "x",
        ] {
            assert_eq!(bound(class_of(kind)), kind_weight(kind), "{kind}");
        }
        assert_eq!(bound(0), 1.0);
    }

    #[test]
    fn a_class_is_raised_never_lowered() {
        let conn = shard();
        raise(&conn, 2, &[(10, 1), (12, 2), (2_001, 1)]).unwrap();
        raise(&conn, 2, &[(10, 3), (12, 1)]).unwrap();
        assert_eq!(stored(&conn, 10, 2), 3);
        assert_eq!(stored(&conn, 12, 2), 2);
        // Id 2,001 is the shard's 1,000th row: the next block.
        assert_eq!(stored(&conn, 2_001, 2), 1);
        assert_eq!(stored(&conn, 14, 2), 0);
        assert_eq!(
            below(&conn, 2, &[(10, 3), (12, 2), (2_001, 1)]).unwrap(),
            Some(0)
        );
        assert_eq!(below(&conn, 2, &[(12, 3), (14, 1)]).unwrap(), Some(2));
    }

    #[test]
    fn a_querys_classes_are_read_from_the_blocks_its_ids_span() {
        let conn = shard();
        conn.execute_batch(
            "CREATE TABLE shard(shards INTEGER NOT NULL); INSERT INTO shard VALUES (2);",
        )
        .unwrap();
        // Ids 1, 3, ... of shard 1: blocks 0 and 2 written, block 1 damaged.
        raise(&conn, 2, &[(1, 3), (1_999, 1), (4_001, 2)]).unwrap();
        conn.execute("INSERT INTO weights VALUES (1, 'text')", [])
            .unwrap();
        let ids = [4_001, 1, 2_001, 1_999, 5_999];
        let classes = Classes::read(&conn, "main", &ids).unwrap();
        let got: Vec<Weight> = ids.iter().map(|&id| classes.of(id)).collect();
        assert_eq!(got, [2, 3, 0, 1, 0]);
        // Ids outside the blocks read, and a shard without the table: unknown.
        assert_eq!(classes.of(9_001), 0);
        conn.execute_batch("DROP TABLE weights").unwrap();
        let classes = Classes::read(&conn, "main", &ids).unwrap();
        assert!(ids.iter().all(|&id| classes.of(id) == 0));
    }

    /// A block that is not a blob counts its rows as weighed below (the
    /// check reads it as a search does), instead of failing the check.
    #[test]
    fn a_block_that_is_not_a_blob_counts_as_below() {
        let conn = shard();
        conn.execute("INSERT INTO weights VALUES (0, 'text')", [])
            .unwrap();
        assert_eq!(below(&conn, 1, &[(0, 1), (1, 2)]).unwrap(), Some(2));
        conn.execute("UPDATE weights SET kinds = 7", []).unwrap();
        assert_eq!(below(&conn, 1, &[(0, 1)]).unwrap(), Some(1));
    }

    #[test]
    fn a_damaged_block_reads_as_unknown_and_is_written_anew() {
        let conn = shard();
        conn.execute("INSERT INTO weights VALUES (0, x'0102')", [])
            .unwrap();
        assert_eq!(stored(&conn, 0, 1), 0);
        raise(&conn, 1, &[(1, 2)]).unwrap();
        assert_eq!((stored(&conn, 0, 1), stored(&conn, 1, 1)), (0, 2));
    }
}
