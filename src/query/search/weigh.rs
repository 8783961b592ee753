//! Ranking a word search: each shard scores its matches with bm25
//! (`rank::FUNCTION`, no join), then `weigh` looks the matches up in the
//! main file in bm25 order, multiplies by the kind's weight, keeps each
//! entry's best chunk, and stops as soon as no later match can enter the
//! top `limit` entries (docs/search.md, "How the top is found"). Also the
//! orderings every stage 1 shares (`Ranked`, best first, newest first).

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use rusqlite::types::Value as SqlValue;

use super::SearchError;
use super::plan::{query_params, query_rows};
use crate::store::{Index, ShardReaders, rank, shard_schema, weights};

/// Weight applied to bm25 (which is negative: more negative is better).
pub(super) const KIND_WEIGHTS: &str =
    "CASE c.kind WHEN 'user' THEN 1.0 WHEN 'assistant' THEN 1.0 WHEN 'summary' THEN 1.0
     WHEN 'tool_result' THEN 0.5 ELSE 0.7 END";

/// A stage-1 row: a matching chunk, its score and timestamp.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ranked {
    pub chunk_id: i64,
    pub entry_rowid: i64,
    pub score: f64,
    pub timestamp_ms: Option<i64>,
}

/// A shard's scoring query: its matches of ?1 (`source` is `fts<k>.<table>`).
/// The function is told the schema and table, so that it reads the rows'
/// lengths beside the matches (`rank`).
pub(super) fn rank_sql(table: &str, source: &str, restriction: &str, window: &str) -> String {
    let schema = source.split_once('.').map_or("main", |(schema, _)| schema);
    format!(
        "SELECT rowid, {rank}({table}, '{schema}', '{table}') FROM {source}
          WHERE {table} MATCH ?1{restriction}{window}",
        rank = rank::FUNCTION,
    )
}

/// Runs shard `shard`'s scoring query (`rank_sql`) on `conn`, which has
/// the shard attached under its name: its matches, each with the best
/// score its weight allows (`Match`).
pub(super) fn scored(
    conn: &rusqlite::Connection,
    shard: usize,
    sql: &str,
    params: &[SqlValue],
) -> rusqlite::Result<Vec<Match>> {
    let rows: Vec<(i64, f64)> =
        query_rows(conn, sql, params, |row| Ok((row.get(0)?, row.get(1)?)))?;
    let ids: Vec<i64> = rows.iter().map(|(id, _)| *id).collect();
    let classes = weights::Classes::read(conn, &shard_schema(shard), &ids)?;
    Ok(rows
        .into_iter()
        .map(|(id, bm25)| Match {
            id,
            bm25,
            best: bm25 * weights::bound(classes.of(id)),
        })
        .collect())
}

/// A shard's match: its full-text row, its bm25, and the best score a
/// kind's weight can make of it (`best`, its bm25 times the most the row's
/// chunks weigh, `store::weights`: bm25 is negative, lower is better).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Match {
    pub id: i64,
    pub bm25: f64,
    pub best: f64,
}

/// Every shard's scored matches, in no order (`Weighing` orders them).
/// `restricted`: the queries keep the chunks of some sessions only, which
/// they read in the index.
pub(super) fn shard_matches(
    store: &Index,
    readers: &ShardReaders,
    sqls: &[String],
    params: &[SqlValue],
    restricted: bool,
) -> Result<Vec<Match>, SearchError> {
    let params: Arc<[SqlValue]> = params.into();
    let jobs: Vec<(usize, String)> = sqls.iter().cloned().enumerate().collect();
    let matches = readers.run(store, jobs, restricted, move |conn, (shard, sql)| {
        scored(conn, *shard, sql, &params)
    })?;
    Ok(matches)
}

/// Matches by the best score their weight allows, best first, ties newest
/// first. A row is in one shard, so no two matches tie on both, and an
/// unstable sort gives the one order.
fn best_first(a: &Match, b: &Match) -> std::cmp::Ordering {
    a.best.total_cmp(&b.best).then(b.id.cmp(&a.id))
}

/// A match in `Weighing`'s heap, which pops the greatest: the best
/// (`best_first`) is the greatest.
#[derive(Clone, Copy)]
struct Best(Match);

impl Ord for Best {
    fn cmp(&self, other: &Best) -> std::cmp::Ordering {
        best_first(&other.0, &self.0)
    }
}

impl PartialOrd for Best {
    fn partial_cmp(&self, other: &Best) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Best {
    fn eq(&self, other: &Best) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Best {}

/// The shards' matches on their way through `weigh`.
pub(super) struct Weighing {
    /// The matches taken in order so far, best first (`best_first`).
    matches: Vec<Match>,
    /// The others, all worse, in a heap: `weigh` usually settles the top
    /// within a common word's first hundred matches of thousands, so they
    /// are ordered only as they are taken. Sorting them all, or selecting
    /// each batch from all the rest, read every match at every batch.
    rest: BinaryHeap<Best>,
    /// How many of `matches` have been looked up.
    next: usize,
    /// Those that passed the filters, weighted, best first.
    found: Vec<Ranked>,
}

impl Weighing {
    /// Every shard's matches, in any order.
    pub fn new(matches: Vec<Match>) -> Weighing {
        Weighing {
            matches: Vec::new(),
            rest: matches.into_iter().map(Best).collect(),
            next: 0,
            found: Vec::new(),
        }
    }

    /// How many matches there are.
    fn len(&self) -> usize {
        self.matches.len() + self.rest.len()
    }

    /// Takes matches in order until the best `end` are in `matches`.
    fn sort_through(&mut self, end: usize) {
        while self.matches.len() < end {
            match self.rest.pop() {
                Some(Best(found)) => self.matches.push(found),
                None => break,
            }
        }
    }
}

/// The best `limit` entries once their matches are weighted by kind and
/// filtered (each entry's best chunk: score, then newest first). The
/// matches' chunks are looked up in the main file (`lookup`, which applies
/// the filters) best first, in batches (`batch_size`), and only until no
/// later match can enter the top: bm25 is negative and a match's weight is
/// at most what its shard records for its row (1 when not known), so a
/// match scores at best its `best`, and once that is worse than the
/// `limit`-th entry's score, no later match can displace an entry or
/// improve one of them. Joining every match to `chunks` cost a random
/// page read per match: most of the ranking of a common word's 5,000-match
/// window (docs/search.md, "How the top is found").
/// Big batches (filters that reject most matches) are split over the
/// shards' connections.
pub(super) fn weigh(
    store: &Index,
    readers: &ShardReaders,
    lookup: &str,
    weighing: &mut Weighing,
    filters: &[SqlValue],
    limit: usize,
) -> Result<Vec<Ranked>, SearchError> {
    // Shared with the connections' threads.
    let (lookup, filters): (Arc<str>, Arc<[SqlValue]>) = (lookup.into(), filters.into());
    let first = limit * 2 + 16;
    let mut batches = 0;
    loop {
        let top = best_per_entry(&weighing.found, limit);
        weighing.sort_through(weighing.next + 1);
        let settled = match weighing.matches.get(weighing.next) {
            None => true,
            Some(next) => {
                top.len() == limit && top.last().is_some_and(|worst| next.best > worst.score)
            }
        };
        if settled {
            return Ok(top);
        }
        let end = (weighing.next + batch_size(first, batches)).min(weighing.len());
        weighing.sort_through(end);
        let bm25s: HashMap<i64, f64> = weighing.matches[weighing.next..end]
            .iter()
            .map(|found| (found.id, found.bm25))
            .collect();
        // In id order: neighbouring chunks share B-tree pages.
        let mut ids: Vec<i64> = bm25s.keys().copied().collect();
        ids.sort_unstable();
        let parts = if ids.len() >= PARALLEL_LOOKUPS {
            readers.connections()
        } else {
            1
        };
        let jobs: Vec<String> = ids
            .chunks(ids.len().div_ceil(parts).max(1))
            .map(json_array)
            .collect();
        let (lookup, filters) = (lookup.clone(), filters.clone());
        let rows = readers.run(store, jobs, true, move |conn, ids| {
            query_rows(conn, &lookup, &query_params(ids, None, &filters), |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get::<_, f64>(3)?,
                    row.get(4)?,
                ))
            })
        })?;
        for (row_id, chunk_id, entry_rowid, weight, timestamp_ms) in rows {
            if let Some(bm25) = bm25s.get(&row_id) {
                weighing.found.push(Ranked {
                    chunk_id,
                    entry_rowid,
                    score: bm25 * weight,
                    timestamp_ms,
                });
            }
        }
        weighing.found.sort_by(by_score);
        weighing.next = end;
        batches += 1;
    }
}

/// Batches of `weigh`'s first size before they double.
const EVEN_BATCHES: u32 = 5;

/// The size of `weigh`'s batch `n` (from 0): `first` for the first
/// `EVEN_BATCHES`, then twice the one before. Each lookup costs a page
/// read or two, and a common word's top settles within a few hundred
/// matches: batches doubling from the start looked up to twice what it
/// needed, where a batch more is only one more statement
/// (docs/performance.md). A filter that rejects most matches still
/// reaches thousands in a few more batches.
fn batch_size(first: usize, n: u32) -> usize {
    match n.checked_sub(EVEN_BATCHES) {
        None => first,
        Some(doublings) => first.saturating_mul(1 << (doublings + 1).min(20)),
    }
}

/// The first `limit` rows of distinct entries: each entry's best chunk,
/// as `rows` are sorted best first.
pub(super) fn best_per_entry(rows: &[Ranked], limit: usize) -> Vec<Ranked> {
    let mut seen = HashSet::new();
    rows.iter()
        .filter(|row| seen.insert(row.entry_rowid))
        .take(limit)
        .copied()
        .collect()
}

/// From this many chunks on, `weigh` splits a batch over the connections.
const PARALLEL_LOOKUPS: usize = 2048;

/// `[1,2,3]`: ids for `json_each`.
fn json_array(ids: &[i64]) -> String {
    let items: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// Newest first: entry time, then chunk id (later chunks are newer).
pub(super) fn by_time(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.timestamp_ms
        .cmp(&a.timestamp_ms)
        .then(b.chunk_id.cmp(&a.chunk_id))
}

/// Best score first, ties newest first.
fn by_score(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    a.score.total_cmp(&b.score).then_with(|| by_time(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::weights::kind_weight;

    /// The shards' weights (`store::weights`) and the team store's search
    /// weigh as the SQL does.
    #[test]
    fn kind_weight_is_the_sqls() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for kind in [
            "user",
            "assistant",
            "summary",
            "tool_result",
            "bash",
            "thinking",
            "x",
        ] {
            let sql: f64 = conn
                .query_row(
                    &format!("SELECT {KIND_WEIGHTS} FROM (SELECT ?1 AS kind) c"),
                    [kind],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(sql, kind_weight(kind), "{kind}");
        }
    }

    #[test]
    fn batches_keep_the_first_size_then_double() {
        let sizes: Vec<usize> = (0..8).map(|n| batch_size(56, n)).collect();
        assert_eq!(sizes, [56, 56, 56, 56, 56, 112, 224, 448]);
        // No overflow however many batches a filter needs.
        assert!(batch_size(56, 200) >= 56 << 20);
    }

    #[test]
    fn matches_sorted_in_steps_are_in_the_full_order() {
        // Scores with ties (decided by chunk id), in a scrambled order.
        let matches: Vec<Match> = (0..500_i64)
            .map(|i| {
                let bm25 = -f64::from(((i * 31) % 17) as i32);
                Match {
                    id: (i * 7919) % 1000,
                    bm25,
                    best: bm25 * [0.5, 0.7, 1.0][(i % 3) as usize],
                }
            })
            .collect();
        let mut full = matches.clone();
        full.sort_by(best_first);
        for steps in [
            &[1, 2, 3, 50, 500][..],
            &[56, 168, 392, 840],
            &[0, 499, 500],
        ] {
            let mut weighing = Weighing::new(matches.clone());
            for &end in steps {
                weighing.sort_through(end);
                let end = end.min(full.len());
                assert_eq!(weighing.matches[..end], full[..end], "{steps:?} {end}");
            }
        }
    }
}
