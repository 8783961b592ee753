//! `piidx subagents --pg`: the team store's delegated runs, newest first.
//! Artifact files are not in the store: `artifacts_missing` is none.

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::subagents::{SubagentRun, SubagentsQuery};
use crate::time::format_iso_ms;

pub fn run(
    pg: &mut Pg,
    query: &SubagentsQuery,
    machine: Option<&str>,
) -> Result<Vec<SubagentRun>, PgError> {
    pg.check_readable()?;
    let mut params = Params::default();
    let mut conds = conditions(
        &query.scope,
        machine,
        &Columns::sessions("r.timestamp_ms"),
        "s.machine",
        &mut params,
    );
    if let Some(agent) = &query.agent {
        let n = params.add(agent.clone());
        conds.push(format!("r.agent = ${n}"));
    }
    if query.failed {
        conds.push("r.status = 'failed'".to_owned());
    }
    let mut sql = format!(
        "SELECT r.timestamp_ms, r.agent, r.task, r.status, r.exit_code, r.model,
                coalesce(r.input_tokens, 0) + coalesce(r.output_tokens, 0)
                  + coalesce(r.cache_read_tokens, 0) + coalesce(r.cache_write_tokens, 0),
                r.cost, r.duration_ms, r.mode, r.run_id, r.session_id, s.name,
                r.child_session_id
           FROM subagent_runs r
           LEFT JOIN sessions s ON s.src = r.src AND s.file_id = r.file_id
          WHERE true{}
          ORDER BY r.timestamp_ms DESC NULLS LAST, r.src, r.run_rowid DESC",
        clause(&conds)
    );
    if let Some(limit) = query.limit {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    let rows = pg.client.query(&sql, &params.refs()).map_err(pg.err())?;
    rows.iter()
        .map(|row| {
            Ok(SubagentRun {
                time: row.try_get::<_, Option<i64>>(0)?.map(format_iso_ms),
                agent: row.try_get(1)?,
                task: row.try_get(2)?,
                status: row.try_get(3)?,
                exit: row.try_get(4)?,
                model: row.try_get(5)?,
                tokens: row.try_get(6)?,
                cost: row.try_get(7)?,
                duration_s: row
                    .try_get::<_, Option<i64>>(8)?
                    .map(|ms| ms as f64 / 1000.0),
                mode: row.try_get(9)?,
                run_id: row.try_get(10)?,
                parent_session: row.try_get(11)?,
                parent_name: row.try_get(12)?,
                child_session: row.try_get(13)?,
                artifacts_missing: None,
            })
        })
        .collect::<Result<_, postgres::Error>>()
        .map_err(pg.err())
}
