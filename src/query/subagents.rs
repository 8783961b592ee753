//! `piidx subagents`: every delegated run, newest first.

use serde::Serialize;

use super::QueryError;
use super::scope::{Columns, Scope};
use crate::store::Index;
use crate::time::format_iso_ms;

/// Which runs. The scope's sessions are the delegating (parent) sessions;
/// its time is the run's.
#[derive(Debug, Clone, Default)]
pub struct SubagentsQuery {
    pub scope: Scope,
    pub agent: Option<String>,
    /// Only runs whose status is `failed` (non-zero exit or error stop).
    pub failed: bool,
    pub limit: Option<usize>,
}

/// One delegated run (`docs/schema.md`, `subagent_runs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubagentRun {
    /// When the run was recorded (ISO-8601, UTC).
    pub time: Option<String>,
    pub agent: Option<String>,
    pub task: Option<String>,
    /// In Pi's words: `completed`, `failed`, `running`, `detached`, …
    pub status: Option<String>,
    pub exit: Option<i64>,
    pub model: Option<String>,
    /// Input, output and cache tokens together.
    pub tokens: i64,
    pub cost: Option<f64>,
    pub duration_s: Option<f64>,
    pub mode: Option<String>,
    pub run_id: Option<String>,
    pub parent_session: Option<String>,
    pub parent_name: Option<String>,
    pub child_session: Option<String>,
    /// Recorded artifact paths with no linked file.
    pub artifacts_missing: Option<i64>,
}

/// The runs matching `query`, newest first.
pub fn run(store: &Index, query: &SubagentsQuery) -> Result<Vec<SubagentRun>, QueryError> {
    let scope = query
        .scope
        .conditions(&Columns::sessions("r.timestamp_ms"), 3);
    let mut sql = format!(
        "SELECT r.timestamp_ms, r.agent, r.task, r.status, r.exit_code, r.model,
                coalesce(r.input_tokens, 0) + coalesce(r.output_tokens, 0)
                  + coalesce(r.cache_read_tokens, 0) + coalesce(r.cache_write_tokens, 0),
                r.cost, r.duration_ms, r.mode, r.run_id, r.session_id, s.name,
                r.child_session_id, v.artifacts_missing
           FROM subagent_runs r
           LEFT JOIN sessions s ON s.file_id = r.file_id
           JOIN v_subagent_runs v ON v.run_rowid = r.run_rowid
          WHERE (?1 IS NULL OR r.agent = ?1)
            AND (?2 = 0 OR r.status = 'failed'){}
          ORDER BY r.timestamp_ms DESC, r.run_rowid DESC",
        scope.clause()
    );
    if let Some(limit) = query.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let mut params: Vec<rusqlite::types::Value> =
        vec![query.agent.clone().into(), i64::from(query.failed).into()];
    params.extend(scope.params);
    let conn = store.connection();
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(params), |row| {
        Ok(SubagentRun {
            time: row.get::<_, Option<i64>>(0)?.map(format_iso_ms),
            agent: row.get(1)?,
            task: row.get(2)?,
            status: row.get(3)?,
            exit: row.get(4)?,
            model: row.get(5)?,
            tokens: row.get(6)?,
            cost: row.get(7)?,
            duration_s: row.get::<_, Option<i64>>(8)?.map(|ms| ms as f64 / 1000.0),
            mode: row.get(9)?,
            run_id: row.get(10)?,
            parent_session: row.get(11)?,
            parent_name: row.get(12)?,
            child_session: row.get(13)?,
            artifacts_missing: row.get(14)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
