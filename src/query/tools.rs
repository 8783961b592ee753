//! `piidx tools`: per tool name, session or project: calls, errors, error
//! rate, median and p95 of the tool's time (from the assistant entry's own
//! `timestamp`, written when the message that issued the call ended, to the
//! result) and of the turn time (from the message's `timestamp`, when the
//! request started: the model's generation included), largest outputs.
//! Reads the fork-deduplicated `v_tool_calls_dedup` view (docs/schema.md).

use std::collections::HashMap;

use serde::Serialize;

use super::QueryError;
use super::scope::{Columns, Scope};
use crate::store::Index;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ToolsBy {
    #[default]
    Name,
    Session,
    #[value(help = "The session's cwd")]
    Project,
}

#[derive(Debug, Clone, Default)]
pub struct ToolsQuery {
    pub by: ToolsBy,
    /// The scope's time is the call's.
    pub scope: Scope,
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolStats {
    pub key: String,
    pub calls: i64,
    pub errors: i64,
    pub error_rate: f64,
    /// Calls with no result entry (still running, aborted, or lost).
    pub no_result: i64,
    /// Call issued (the assistant entry's `timestamp`) → result.
    pub median_ms: Option<i64>,
    pub p95_ms: Option<i64>,
    /// Request started (the assistant message's `timestamp`) → result.
    pub turn_median_ms: Option<i64>,
    pub turn_p95_ms: Option<i64>,
    pub max_result_len: Option<i64>,
    pub total_result_len: i64,
    /// Entry id and session of the largest result.
    pub largest: Option<String>,
}

/// Per group, most calls first.
pub fn run(store: &Index, query: &ToolsQuery) -> Result<Vec<ToolStats>, QueryError> {
    let key = match query.by {
        ToolsBy::Name => "t.name",
        ToolsBy::Session => "t.session_id",
        ToolsBy::Project => "s.cwd",
    };
    let scope = query
        .scope
        .conditions(&Columns::sessions("t.timestamp_ms"), 1);
    let sql = format!(
        "SELECT {key}, t.is_error, t.duration_ms, t.result_len, t.result_timestamp_ms IS NULL,
                t.session_id || ' ' || coalesce(t.result_entry_id, ''), t.timestamp_ms, t.turn_ms
           FROM v_tool_calls_dedup t LEFT JOIN sessions s ON s.file_id = t.file_id
          WHERE 1 = 1{}",
        scope.clause()
    );
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(scope.params), |row| {
        Ok(CallRow {
            key: row.get(0)?,
            is_error: row.get(1)?,
            duration: row.get(2)?,
            result_len: row.get(3)?,
            no_result: row.get(4)?,
            where_: row.get(5)?,
            called_at: row.get(6)?,
            turn: row.get(7)?,
        })
    })?;
    let rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(fold(rows, query.limit))
}

/// One tool call as `fold` counts it (the index's and the team store's
/// queries give the same).
pub(crate) struct CallRow {
    pub key: Option<String>,
    pub is_error: Option<i64>,
    /// Issued → result.
    pub duration: Option<i64>,
    /// Request started → result.
    pub turn: Option<i64>,
    pub result_len: Option<i64>,
    pub no_result: bool,
    /// `session_id result_entry_id`.
    pub where_: String,
    pub called_at: Option<i64>,
}

/// Calls → per group stats, most calls first, at most `limit`.
pub(crate) fn fold(rows: Vec<CallRow>, limit: Option<usize>) -> Vec<ToolStats> {
    struct Acc {
        stats: ToolStats,
        durations: Vec<i64>,
        turns: Vec<i64>,
        /// Call time of `stats.largest`: among equally large results, the
        /// earliest call's (then the smallest `largest`) is shown, whatever
        /// order the rows come in.
        largest_at: Option<i64>,
    }
    let mut groups: HashMap<String, Acc> = HashMap::new();
    for row in rows {
        let CallRow {
            key,
            is_error,
            duration,
            turn,
            result_len,
            no_result,
            where_,
            called_at,
        } = row;
        let key = key
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| "(none)".into());
        let acc = groups.entry(key.clone()).or_insert_with(|| Acc {
            stats: ToolStats {
                key,
                ..ToolStats::default()
            },
            durations: Vec::new(),
            turns: Vec::new(),
            largest_at: None,
        });
        let stats = &mut acc.stats;
        stats.calls += 1;
        stats.errors += i64::from(is_error == Some(1));
        stats.no_result += i64::from(no_result);
        if let Some(d) = duration.filter(|d| *d >= 0) {
            acc.durations.push(d);
        }
        if let Some(d) = turn.filter(|d| *d >= 0) {
            acc.turns.push(d);
        }
        if let Some(len) = result_len {
            stats.total_result_len += len;
            let larger = match stats.max_result_len {
                None => true,
                Some(max) if len != max => len > max,
                Some(_) => {
                    (called_at.unwrap_or(i64::MAX), where_.as_str())
                        < (
                            acc.largest_at.unwrap_or(i64::MAX),
                            stats.largest.as_deref().unwrap_or_default(),
                        )
                }
            };
            if larger {
                stats.max_result_len = Some(len);
                stats.largest = Some(where_);
                acc.largest_at = called_at;
            }
        }
    }
    let mut out: Vec<ToolStats> = groups
        .into_values()
        .map(|mut acc| {
            acc.durations.sort_unstable();
            acc.stats.median_ms = nearest_rank(&acc.durations, 50);
            acc.stats.p95_ms = nearest_rank(&acc.durations, 95);
            acc.turns.sort_unstable();
            acc.stats.turn_median_ms = nearest_rank(&acc.turns, 50);
            acc.stats.turn_p95_ms = nearest_rank(&acc.turns, 95);
            acc.stats.error_rate = if acc.stats.calls > 0 {
                (acc.stats.errors as f64 / acc.stats.calls as f64 * 1e4).round() / 1e4
            } else {
                0.0
            };
            acc.stats
        })
        .collect();
    out.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.key.cmp(&b.key)));
    if let Some(limit) = limit {
        out.truncate(limit);
    }
    out
}

/// Nearest-rank percentile of sorted values: the value at rank ⌈p/100·n⌉.
pub fn nearest_rank(sorted: &[i64], p: usize) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
        assert_eq!(nearest_rank(&v, 50), Some(50));
        assert_eq!(nearest_rank(&v, 95), Some(100));
        assert_eq!(nearest_rank(&[7], 95), Some(7));
        assert_eq!(nearest_rank(&[], 50), None);
    }
}
