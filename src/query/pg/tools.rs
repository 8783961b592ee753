//! `piidx tools --pg`: tool-call statistics of the team store, counted by
//! the index's own `query::tools::fold` (fork copies once per machine).

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::tools::{CallRow, ToolStats, ToolsBy, ToolsQuery, fold};

pub fn run(
    pg: &mut Pg,
    query: &ToolsQuery,
    machine: Option<&str>,
) -> Result<Vec<ToolStats>, PgError> {
    pg.check_readable()?;
    let key = match query.by {
        ToolsBy::Name => "t.name",
        ToolsBy::Session => "t.session_id",
        ToolsBy::Project => "s.cwd",
    };
    let mut params = Params::default();
    let conds = conditions(
        &query.scope,
        machine,
        &Columns::sessions("t.timestamp_ms"),
        "s.machine",
        &mut params,
    );
    let sql = format!(
        "SELECT {key}, t.is_error, t.result_timestamp_ms - e.timestamp_ms, t.result_len,
                t.result_timestamp_ms IS NULL,
                t.session_id || ' ' || coalesce(t.result_entry_id, ''), t.timestamp_ms,
                t.result_timestamp_ms - t.timestamp_ms
           FROM tool_call_meta t LEFT JOIN sessions s ON s.src = t.src AND s.file_id = t.file_id
           LEFT JOIN entries e ON e.src = t.src AND e.entry_rowid = t.entry_rowid
          WHERE t.copies > 0{}",
        clause(&conds)
    );
    let rows = pg.client.query(&sql, &params.refs()).map_err(pg.err())?;
    let rows = rows
        .iter()
        .map(|row| {
            Ok(CallRow {
                key: row.try_get(0)?,
                is_error: row.try_get(1)?,
                duration: row.try_get(2)?,
                result_len: row.try_get(3)?,
                no_result: row.try_get(4)?,
                where_: row.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
                called_at: row.try_get(6)?,
                turn: row.try_get(7)?,
            })
        })
        .collect::<Result<_, postgres::Error>>()
        .map_err(pg.err())?;
    Ok(fold(rows, query.limit))
}
