//! `piidx subagents`: every delegated run, newest first.

use serde_json::Value;

use crate::output::{Rows, shorten};
use crate::query::sql::to_json;
use crate::store::Index;
use crate::time::format_iso_ms;

/// Tasks are cut to this many characters in table output.
const TASK_CHARS: usize = 60;

#[derive(Debug, Clone, Default)]
pub struct SubagentsQuery {
    pub agent: Option<String>,
    /// `YYYY-MM-DD` (UTC midnight) or an ISO timestamp.
    pub since: Option<String>,
    /// Only runs whose status is `failed` (non-zero exit or error stop).
    pub failed: bool,
    /// Keep full task text (JSON output); the table shortens it.
    pub full_task: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SubagentsError {
    #[error("--since {0:?} is not a date; use YYYY-MM-DD or 2026-02-21T14:00:00Z")]
    BadDate(String),
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// The runs matching `query`, newest first.
pub fn run(store: &Index, query: &SubagentsQuery) -> Result<Rows, SubagentsError> {
    let since = match &query.since {
        Some(text) => Some(
            crate::time::parse_date_ms(text)
                .ok_or_else(|| SubagentsError::BadDate(text.clone()))?,
        ),
        None => None,
    };
    let sql = "SELECT r.timestamp_ms, r.agent, r.task, r.status, r.exit_code, r.model,
                      coalesce(r.input_tokens, 0) + coalesce(r.output_tokens, 0)
                        + coalesce(r.cache_read_tokens, 0) + coalesce(r.cache_write_tokens, 0),
                      r.cost, r.duration_ms, r.mode, r.run_id, r.session_id, s.name,
                      r.child_session_id, v.artifacts_missing
                 FROM subagent_runs r
                 LEFT JOIN sessions s ON s.file_id = r.file_id
                 JOIN v_subagent_runs v ON v.run_rowid = r.run_rowid
                WHERE (?1 IS NULL OR r.agent = ?1)
                  AND (?2 IS NULL OR r.timestamp_ms >= ?2)
                  AND (?3 = 0 OR r.status = 'failed')
                ORDER BY r.timestamp_ms DESC, r.run_rowid DESC";
    let conn = store.connection();
    let mut stmt = conn.prepare(sql)?;
    let mut result = stmt.query(rusqlite::params![query.agent, since, query.failed])?;
    let columns = [
        "time",
        "agent",
        "task",
        "status",
        "exit",
        "model",
        "tokens",
        "cost",
        "duration_s",
        "mode",
        "run_id",
        "parent_session",
        "parent_name",
        "child_session",
        "artifacts_missing",
    ];
    let mut rows = Rows {
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        rows: Vec::new(),
    };
    while let Some(row) = result.next()? {
        let mut values = Vec::with_capacity(columns.len());
        for index in 0..columns.len() {
            let value = to_json(row.get_ref(index)?);
            let value = match index {
                0 => match row.get::<_, Option<i64>>(0)? {
                    Some(ms) => Value::String(format_iso_ms(ms)),
                    None => Value::Null,
                },
                2 if !query.full_task => match value {
                    Value::String(task) => {
                        Value::String(shorten(&task.replace(['\n', '\t'], " "), TASK_CHARS))
                    }
                    other => other,
                },
                8 => match row.get::<_, Option<i64>>(8)? {
                    Some(ms) => serde_json::Number::from_f64(ms as f64 / 1000.0)
                        .map_or(Value::Null, Value::Number),
                    None => Value::Null,
                },
                _ => value,
            };
            values.push(value);
        }
        rows.rows.push(values);
    }
    Ok(rows)
}
