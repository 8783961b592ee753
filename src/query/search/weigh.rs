//! Ranking a word search: each shard finds its matches and their parts
//! (`rank::FUNCTION`, no join), `score_together` scores them with bm25 over
//! every shard's statistics, then `weigh` looks the matches up in the main
//! file in bm25 order, multiplies by the kind's weight, keeps each entry's
//! best chunk, and stops as soon as no later match can enter the top
//! `limit` entries (docs/search.md, "How the top is found"). Also the
//! orderings every stage 1 shares (`Ranked`, best first, newest first).

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use rusqlite::types::Value as SqlValue;

use super::plan::{query_params, query_rows};
use super::{SearchError, syntax};
use crate::store::rank::{self, ShardStats};
use crate::store::{Index, ShardReaders, weights};

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

/// A shard's scoring query (`rank_sql`), and the table it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Scoring {
    sql: String,
    /// The shard's schema (`fts0`, ...) and FTS5 table.
    schema: String,
    table: &'static str,
}

/// A shard's scoring query: its matches of ?1 (`source` is `fts<k>.<table>`)
/// with their parts (`rank`). The function is told the schema and table,
/// so that it reads the rows' lengths beside the matches.
pub(super) fn rank_sql(
    table: &'static str,
    source: &str,
    restriction: &str,
    window: &str,
) -> Scoring {
    let schema = source.split_once('.').map_or("main", |(schema, _)| schema);
    Scoring {
        sql: format!(
            "SELECT rowid, {rank}({table}, '{schema}', '{table}') FROM {source}
              WHERE {table} MATCH ?1{restriction}{window}",
            rank = rank::FUNCTION,
        ),
        schema: schema.to_owned(),
        table,
    }
}

/// One shard's matches, not yet scored: bm25 needs every shard's
/// statistics (`rank`).
#[derive(Debug, Default)]
pub(super) struct ShardMatches {
    /// The shard's statistics: from its matches, or read from its table
    /// when it has none (then without the phrases' hits, which
    /// `score_together` reads only if another shard has matches).
    stats: ShardStats,
    /// How many phrases the query has, as FTS5 counted them (0 without a
    /// match).
    phrases: usize,
    ids: Vec<i64>,
    /// Each match's length in tokens.
    tokens: Vec<u32>,
    /// Each phrase's count in each match, `phrases` per match.
    freq: Vec<u32>,
    /// The most each match's chunks weigh (`weights::bound`).
    bounds: Vec<f64>,
}

/// Runs a shard's scoring query on `conn`, which has the shard attached
/// under its name: its matches with their parts, and the shard's
/// statistics (one `ShardMatches`).
pub(super) fn scored(
    conn: &rusqlite::Connection,
    scoring: &Scoring,
    params: &[SqlValue],
) -> rusqlite::Result<Vec<ShardMatches>> {
    let mut found = ShardMatches::default();
    let mut stats = None;
    found.ids = query_rows(conn, &scoring.sql, params, |row| {
        let value = row.get_ref(1)?;
        let parts = rank::RowValue::read(value).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                value.data_type(),
                format!("not a value of {}", rank::FUNCTION).into(),
            )
        })?;
        found.tokens.push(parts.tokens());
        parts.push_freq(&mut found.freq);
        found.phrases = parts.phrases();
        if stats.is_none() {
            stats = parts.stats();
        }
        row.get(0)
    })?;
    found.stats = match stats {
        Some(stats) => stats,
        None => ShardStats::read(conn, &scoring.schema, scoring.table, None)?,
    };
    let classes = weights::Classes::read(conn, &scoring.schema, &found.ids)?;
    found.bounds = found
        .ids
        .iter()
        .map(|&id| weights::bound(classes.of(id)))
        .collect();
    Ok(vec![found])
}

/// Every shard's matches scored with the statistics of all of them
/// (`rank::Scorer`), in no order (`Weighing` orders them).
pub(super) fn score_together(
    store: &Index,
    readers: &ShardReaders,
    scorings: &[Scoring],
    expr: &str,
    mut shards: Vec<ShardMatches>,
) -> Result<Vec<Match>, SearchError> {
    let phrases = shards.iter().map(|shard| shard.phrases).max().unwrap_or(0);
    if phrases > 1 {
        count_missing_hits(store, readers, scorings, expr, &mut shards)?;
    }
    let scorer = rank::Scorer::new(shards.iter().map(|shard| &shard.stats), phrases);
    let mut matches = Vec::with_capacity(shards.iter().map(|shard| shard.ids.len()).sum());
    for shard in &shards {
        let freq = shard.freq.chunks_exact(shard.phrases.max(1));
        for (((&id, &tokens), freq), &bound) in shard
            .ids
            .iter()
            .zip(&shard.tokens)
            .zip(freq)
            .zip(&shard.bounds)
        {
            let bm25 = scorer.score(tokens, freq.iter().copied());
            matches.push(Match {
                id,
                bm25,
                best: bm25 * bound,
            });
        }
    }
    Ok(matches)
}

/// Counts the phrases' hits in the shards without a match, which read
/// only their totals (`ShardStats::read`), on their own connections: the
/// query has several phrases (another shard's matches say how many), and
/// they can be listed (`syntax::phrases`). Their totals are kept.
fn count_missing_hits(
    store: &Index,
    readers: &ShardReaders,
    scorings: &[Scoring],
    expr: &str,
    shards: &mut [ShardMatches],
) -> Result<(), SearchError> {
    let missing = |shard: &ShardMatches| shard.ids.is_empty() && shard.stats.hits.is_none();
    let list: Arc<[String]> = match syntax::phrases(expr) {
        Some(list) if shards.len() == scorings.len() && shards.iter().any(missing) => list.into(),
        _ => return Ok(()),
    };
    let jobs: Vec<Option<Scoring>> = shards
        .iter()
        .zip(scorings)
        .map(|(shard, scoring)| missing(shard).then(|| scoring.clone()))
        .collect();
    let counted = readers.run(store, jobs, false, move |conn, job| {
        let hits = match job {
            Some(scoring) => ShardStats::count_hits(conn, &scoring.schema, scoring.table, &list)?,
            None => None,
        };
        Ok(vec![hits])
    })?;
    for (shard, hits) in shards.iter_mut().zip(counted) {
        if hits.is_some() {
            shard.stats.hits = hits;
        }
    }
    Ok(())
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

/// Every shard's matches, not yet scored (`score_together`).
/// `restricted`: the queries keep the chunks of some sessions only, which
/// they read in the index.
pub(super) fn shard_matches(
    store: &Index,
    readers: &ShardReaders,
    scorings: &[Scoring],
    params: &[SqlValue],
    restricted: bool,
) -> Result<Vec<ShardMatches>, SearchError> {
    let params: Arc<[SqlValue]> = params.into();
    let jobs: Vec<Scoring> = scorings.to_vec();
    let matches = readers.run(store, jobs, restricted, move |conn, scoring| {
        scored(conn, scoring, &params)
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

    /// `syntax::phrases` lists the phrases FTS5 numbers, in its order: a
    /// shard without a match counts them as the function does in one
    /// with matches.
    #[test]
    fn phrases_are_listed_as_fts5_numbers_them() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        rank::register(&conn).unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(body, content = '');
             INSERT INTO t(rowid, body) VALUES
               (1, 'fn main parses the session file'), (2, 'fn helper reads the file'),
               (3, 'error: main failed'), (4, 'warning the parser is slow'),
               (5, 'the main thing is the session'), (6, 'src/lib.rs fn main');",
        )
        .unwrap();
        let translated = [
            "fn main",
            "\"the session\" file",
            "main OR (pars* error)",
            "the NOT warning",
            "src/lib.rs main",
        ]
        .map(|query| syntax::translate(query).expr);
        let raw = ["error OR warning", "pars* main", "(the AND main) OR fn"];
        let mut checked = 0;
        for expr in translated.iter().map(String::as_str).chain(raw) {
            let value: Vec<u8> = conn
                .query_row(
                    &format!(
                        "SELECT {}(t) FROM t WHERE t MATCH ?1 LIMIT 1",
                        rank::FUNCTION
                    ),
                    [expr],
                    |row| row.get(0),
                )
                .unwrap();
            let parts = rank::Parts::read(&value).unwrap();
            let phrases = syntax::phrases(expr).unwrap();
            assert_eq!(phrases.len(), parts.phrases(), "{expr}");
            let read = ShardStats::read(&conn, "main", "t", Some(&phrases)).unwrap();
            assert_eq!(read, parts.stats(), "{expr}");
            checked += usize::from(parts.stats().hits.is_some());
        }
        assert_eq!(checked, 8);
        for raw in ["NEAR(fn main)", "body : main", "^fn", "fn + main", "\"open"] {
            assert_eq!(syntax::phrases(raw), None, "{raw}");
        }
    }

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
