//! Stage 1 of a search: which chunks hold the top `limit` entries, found
//! without reading any text. A search tries a list of `Attempt`s in order,
//! from the newest matches only to every match, and keeps the first that
//! yields `limit` entries (or the last). `Stage1` builds an attempt's SQL
//! from the plan and the filters and runs it: ranked words are found in
//! the shards and weighed (`weigh`), `--sort recent` is ordered by time in
//! SQL, and a scan tests text in Rust (`scan`).

use std::sync::Arc;

use rusqlite::types::Value as SqlValue;

use super::plan::{Filters, Plan, mentions, query_params, query_rows};
use super::scan::scan_chunks;
use super::weigh::{
    KIND_WEIGHTS, Ranked, Scoring, Weighing, best_per_entry, by_time, rank_sql, score_together,
    shard_matches, weigh,
};
use super::{HeadStart, SearchError, SearchOptions, Sort};
use crate::store::{Index, ShardReaders};

/// Matches beyond which a ranked query scores only the newest ones.
pub const RANK_WINDOW: i64 = 5_000;

/// Newest entries a `--sort recent` word search looks in first.
pub const RECENT_WINDOW: i64 = 10_000;

/// One try at settling the top `limit` entries: which matches stage 1
/// looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Attempt {
    /// Only the newest matches. Ranked words: each shard scores its share
    /// of the `RANK_WINDOW` newest matching chunks (chunks are dealt to the
    /// shards in id order; FTS5 walks the doclists newest first and stops
    /// there). `--sort recent`: the matches among the `RECENT_WINDOW`
    /// newest entries, walked by time (index `entries_time`). Otherwise
    /// every match.
    pub window: bool,
    /// Ranked words: the shards score only the chunks of the sessions that
    /// `--project`, `--cwd` and `--session` select
    /// (`Filters::fts_restriction`), rather than every match, most of which
    /// the lookup would then drop.
    pub restricted: bool,
}

/// Every match, scored or sorted at once.
const EVERY_MATCH: Attempt = Attempt {
    window: false,
    restricted: false,
};

/// The parts every attempt's SQL is made of, fixed for one search.
pub(super) struct Stage1<'a> {
    plan: &'a Plan,
    options: &'a SearchOptions,
    filters: &'a Filters,
    /// The attached shards (`fts0`, `fts1`, ...).
    shards: &'a [String],
    /// A word search's FTS table in each shard (`fts0.fts`, ...).
    sources: Vec<String>,
    /// `JOIN entries e`, `JOIN sessions s` and `LEFT JOIN message_meta mm`,
    /// or nothing where no filter or column needs the table.
    entries_join: &'static str,
    sessions_join: &'static str,
    meta_join: &'static str,
    /// `Filters::fts_restriction`: empty when no filter selects sessions.
    restriction: String,
}

/// Stage 1's queries for one attempt, by plan and sort.
enum Stage<'a> {
    /// Ranked words: one scoring query per shard (`shard_matches`), then a
    /// lookup of each chunk's weight, time and filters (`weigh`).
    Rank {
        scorings: Vec<Scoring>,
        expr: &'a str,
        lookup: String,
    },
    /// Words, newest first: one query per shard, joined in SQL (`run_recent`).
    Recent { sqls: Vec<String>, expr: &'a str },
    /// Chunk text tested in Rust (`scan_chunks`).
    Scan { sql: String, terms: &'a [String] },
}

/// Newest first, for `--sort recent` and scans (ranked words are ordered
/// in `weigh`).
const ORDER: &str = "e.timestamp_ms DESC, c.chunk_id DESC";

impl<'a> Stage1<'a> {
    pub fn new(
        plan: &'a Plan,
        options: &'a SearchOptions,
        filters: &'a Filters,
        shards: &'a [String],
    ) -> Stage1<'a> {
        let sources: Vec<String> = match plan {
            Plan::Fts { table, .. } => shards.iter().map(|s| format!("{s}.{table}")).collect(),
            Plan::Scan { .. } => Vec::new(),
        };
        let meta_join = if options.model.is_some() || !options.roles.is_empty() {
            "LEFT JOIN message_meta mm ON mm.entry_rowid = c.entry_rowid"
        } else {
            ""
        };
        // A ranked word search joins entries and sessions only for the
        // filters that read them: for a query matching thousands of chunks,
        // those row lookups cost more than the FTS query (ties then go
        // newest chunk first).
        let lean = options.sort == Sort::Rank && matches!(plan, Plan::Fts { .. });
        let entries_join = if lean && !mentions(&filters.sql, "e") {
            ""
        } else {
            "JOIN entries e ON e.entry_rowid = c.entry_rowid"
        };
        let sessions_join = if lean && !mentions(&filters.sql, "s") {
            ""
        } else {
            "JOIN sessions s ON s.file_id = c.file_id"
        };
        Stage1 {
            plan,
            options,
            filters,
            shards,
            sources,
            entries_join,
            sessions_join,
            meta_join,
            restriction: filters.fts_restriction(),
        }
    }

    /// How many shards a word search queries (none for a scan).
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// The attempts, in the order they are tried. bm25 costs ~1 µs per
    /// matching chunk and sorting by time needs every match's entry, so a
    /// stop-word-like query (most chunks match) took 100s of ms; its newest
    /// matches are looked at first, and more only when they hold fewer than
    /// `limit` entries, so that a filter never hides an older hit.
    pub fn attempts(&self) -> Vec<Attempt> {
        match self.plan {
            // A scan walks its candidates newest first and stops once it
            // has enough hits: it has no window to widen.
            Plan::Scan { .. } => vec![EVERY_MATCH],
            // `--raw`: FTS5 gets the query as typed, every match ranked.
            Plan::Fts { .. } if self.options.raw => vec![EVERY_MATCH],
            // The newest entries first: exact when they hold enough hits,
            // as every entry outside them is older. Then every match sorted.
            Plan::Fts { .. } if self.options.sort == Sort::Recent => vec![
                Attempt {
                    window: true,
                    restricted: false,
                },
                EVERY_MATCH,
            ],
            // The window of the newest matches; then, when filters select
            // sessions, the window again among those sessions' chunks only
            // (a small project's hits are older than a common word's newest
            // matches), and every match of those sessions; otherwise every
            // match. The restriction is not the first try: the set of a big
            // project's chunk ids costs ~20 ms to build.
            Plan::Fts { .. } if self.restriction.is_empty() => vec![
                Attempt {
                    window: true,
                    restricted: false,
                },
                EVERY_MATCH,
            ],
            Plan::Fts { .. } => vec![
                Attempt {
                    window: true,
                    restricted: false,
                },
                Attempt {
                    window: true,
                    restricted: true,
                },
                Attempt {
                    window: false,
                    restricted: true,
                },
            ],
        }
    }

    /// Runs one attempt: the best `limit` entries it finds (each entry's
    /// best chunk, as chunk id and score), best first. The shards after
    /// the first are queried on `head`'s readers, and the scoring queries
    /// it started are used when they are this attempt's.
    pub fn run(
        &self,
        attempt: Attempt,
        store: &Index,
        head: &mut HeadStart,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, SearchError> {
        let params = &self.filters.params;
        let best = match self.stage(attempt) {
            Stage::Rank {
                scorings,
                expr,
                lookup,
            } => {
                let shards = match head.started_scoring(&scorings, expr) {
                    Some(shards) => shards?,
                    None => {
                        let params = query_params(expr, None, params);
                        let restricted = attempt.restricted;
                        shard_matches(store, &head.readers, &scorings, &params, restricted)?
                    }
                };
                let matches = score_together(store, &head.readers, &scorings, expr, shards)?;
                let mut weighing = Weighing::new(matches);
                weigh(store, &head.readers, &lookup, &mut weighing, params, limit)?
            }
            Stage::Recent { sqls, expr } => fetching(limit, |fetch| {
                let params = query_params(expr, Some(fetch), params);
                run_recent(store, &head.readers, &sqls, &params, fetch)
            })?,
            Stage::Scan { sql, terms } => fetching(limit, |fetch| {
                scan_chunks(store.connection(), &sql, params, terms, fetch)
            })?,
        };
        Ok(best.iter().map(|row| (row.chunk_id, row.score)).collect())
    }

    /// The attempt's SQL. Stage 1 ranks chunks without touching their text
    /// (no GROUP BY: one entry's several chunks are merged by
    /// `best_per_entry`, fetching more rows if needed).
    fn stage(&self, attempt: Attempt) -> Stage<'a> {
        let Stage1 {
            entries_join,
            sessions_join,
            meta_join,
            ..
        } = *self;
        let filters = self.filters.clause();
        let ts = if entries_join.is_empty() {
            "NULL"
        } else {
            "e.timestamp_ms"
        };
        match self.plan {
            Plan::Fts { table, expr } if self.options.sort == Sort::Rank => {
                let window = if attempt.window {
                    rank_window(self.sources.len())
                } else {
                    String::new()
                };
                let restriction = if attempt.restricted {
                    self.restriction.as_str()
                } else {
                    ""
                };
                let scorings = self
                    .sources
                    .iter()
                    .map(|source| rank_sql(table, source, restriction, &window))
                    .collect();
                // ?1: a JSON array of full-text row ids (`weigh`): a chunk's
                // own row, or the row of the shared text it points at,
                // which every chunk pointing there matches.
                let lookup = format!(
                    "SELECT j.value, c.chunk_id, c.entry_rowid, {KIND_WEIGHTS}, {ts}
                     FROM json_each(?1) j JOIN chunks c
                       ON (c.chunk_id = j.value AND c.fts_rowid IS NULL) OR c.fts_rowid = j.value
                     {entries_join} {sessions_join} {meta_join}
                     WHERE 1 {filters}"
                );
                Stage::Rank {
                    scorings,
                    expr,
                    lookup,
                }
            }
            Plan::Fts { table, expr } => {
                let sql = |source: &String| {
                    if attempt.window {
                        // The `+` keeps the match list a filter: as an index
                        // constraint, each entry would probe every match.
                        return format!(
                            "SELECT c.chunk_id, c.entry_rowid, 0.0 AS score, e.timestamp_ms
                             FROM entries e CROSS JOIN chunks c ON c.entry_rowid = e.entry_rowid
                             {sessions_join} {meta_join}
                             WHERE e.timestamp_ms >= coalesce((SELECT timestamp_ms FROM entries
                                     ORDER BY timestamp_ms DESC LIMIT 1 OFFSET {RECENT_WINDOW}),
                                   -9223372036854775808)
                               AND +coalesce(c.fts_rowid, c.chunk_id)
                                   IN (SELECT rowid FROM {source} WHERE {table} MATCH ?1)
                               {filters}
                             ORDER BY {ORDER} LIMIT ?2"
                        );
                    }
                    // Materialized: the match list is read once, then joined.
                    format!(
                        "WITH m AS MATERIALIZED (SELECT rowid FROM {source} WHERE {table} MATCH ?1)
                         SELECT c.chunk_id, c.entry_rowid, 0.0 AS score, {ts}
                         FROM m JOIN chunks c
                           ON (c.chunk_id = m.rowid AND c.fts_rowid IS NULL) OR c.fts_rowid = m.rowid
                         {entries_join} {sessions_join} {meta_join}
                         WHERE 1 {filters}
                         ORDER BY {ORDER} LIMIT ?2"
                    )
                };
                Stage::Recent {
                    sqls: self.sources.iter().map(sql).collect(),
                    expr,
                }
            }
            Plan::Scan { terms, unspaced } => {
                // A query with CJK can only match chunks holding CJK, and those
                // are exactly the rows of fts_trigram (listed in its docsize).
                // Those few chunks lead; any other scan walks the entries
                // newest first (index `entries_time`), so that the rows come
                // without a sort of every chunk and the scan can stop early.
                let from = if *unspaced {
                    let members = self
                        .shards
                        .iter()
                        .map(|s| format!("SELECT id FROM {s}.fts_trigram_docsize"))
                        .collect::<Vec<_>>()
                        .join(" UNION ALL ");
                    format!(
                        "chunks c JOIN ({members}) d
                           ON (d.id = c.chunk_id AND c.fts_rowid IS NULL) OR d.id = c.fts_rowid
                         JOIN entries e ON e.entry_rowid = c.entry_rowid"
                    )
                } else {
                    "entries e CROSS JOIN chunks c ON c.entry_rowid = e.entry_rowid".to_owned()
                };
                // The terms are looked for by `scan_chunks`, which reads each
                // entry once; no LIMIT: it stops at `fetch` matches itself.
                Stage::Scan {
                    sql: format!(
                        "SELECT c.chunk_id, c.entry_rowid, e.timestamp_ms, c.json_path, c.start, c.len,
                                c.fts_rowid IS NOT NULL
                         FROM {from} JOIN sessions s ON s.file_id = c.file_id {meta_join}
                         WHERE 1 {filters}
                         ORDER BY {ORDER}"
                    ),
                    terms,
                }
            }
        }
    }
}

/// `ORDER BY rowid DESC LIMIT n`: one shard's share of the `RANK_WINDOW`
/// newest matches, when there are `shards`.
pub(super) fn rank_window(shards: usize) -> String {
    let share = RANK_WINDOW / shards.max(1) as i64;
    format!(" ORDER BY rowid DESC LIMIT {share}")
}

/// The best `limit` entries of `rows(fetch)`, fetching four times as many
/// rows each time until they hold `limit` entries or there are no more
/// (one entry's several chunks count once).
fn fetching(
    limit: usize,
    mut rows: impl FnMut(usize) -> Result<Vec<Ranked>, SearchError>,
) -> Result<Vec<Ranked>, SearchError> {
    let mut fetch = limit * 4 + 16;
    loop {
        let rows = rows(fetch)?;
        let best = best_per_entry(&rows, limit);
        if best.len() == limit || rows.len() < fetch {
            return Ok(best);
        }
        fetch *= 4;
    }
}

/// `--sort recent`'s stage 1: every shard's query, merged newest first,
/// `fetch` kept.
fn run_recent(
    store: &Index,
    readers: &ShardReaders,
    sqls: &[String],
    params: &[SqlValue],
    fetch: usize,
) -> Result<Vec<Ranked>, SearchError> {
    let params: Arc<[SqlValue]> = params.into();
    let mut rows = readers.run(store, sqls.to_vec(), true, move |conn, sql| {
        query_rows(conn, sql, &params, |row| {
            Ok(Ranked {
                chunk_id: row.get(0)?,
                entry_rowid: row.get(1)?,
                score: row.get(2)?,
                timestamp_ms: row.get(3)?,
            })
        })
    })?;
    rows.sort_by(by_time);
    rows.truncate(fetch);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::scope::Scope;
    use crate::query::search::plan::plan;

    /// The attempts of a search for `query` with `flags` (`--raw`,
    /// `--substring`, `--sort recent`, `--project`) and two shards.
    fn attempts(query: &str, flags: &[&str]) -> Vec<(bool, bool)> {
        let options = SearchOptions {
            query: query.to_owned(),
            raw: flags.contains(&"raw"),
            substring: flags.contains(&"substring"),
            sort: if flags.contains(&"recent") {
                Sort::Recent
            } else {
                Sort::Rank
            },
            scope: Scope {
                project: flags.contains(&"project").then(|| "proj".to_owned()),
                ..Scope::default()
            },
            limit: 20,
            ..SearchOptions::default()
        };
        let plan = plan(&options).unwrap();
        let filters = Filters::build(&options, 3).unwrap();
        let shards = ["fts0".to_owned(), "fts1".to_owned()];
        Stage1::new(&plan, &options, &filters, &shards)
            .attempts()
            .iter()
            .map(|attempt| (attempt.window, attempt.restricted))
            .collect()
    }

    #[test]
    fn attempts_widen_from_the_newest_matches_to_every_match() {
        // (window, restricted)
        assert_eq!(attempts("the", &[]), [(true, false), (false, false)]);
        assert_eq!(
            attempts("the", &["project"]),
            [(true, false), (true, true), (false, true)]
        );
        assert_eq!(
            attempts("the", &["recent", "project"]),
            [(true, false), (false, false)]
        );
        assert_eq!(attempts("the", &["raw", "project"]), [(false, false)]);
        assert_eq!(attempts("istAl", &["substring"]), [(false, false)]);
        assert_eq!(attempts("桜餅", &[]), [(false, false)]);
    }
}
