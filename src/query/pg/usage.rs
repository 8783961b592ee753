//! `piidx usage --pg`: the team store's usage, folded into the same rows as
//! the index's (`query::usage::Fold`). Fork copies count once per machine
//! (`v_usage_records`); a child session's own records count in its run's
//! subagent columns, as in the index.

use rusqlite::types::Value as SqlValue;

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::usage::{Fold, GroupBy, UsageOptions, UsageReport, UsageRow, key_sql};

fn filters(options: &UsageOptions, machine: Option<&str>, a: &str, params: &mut Params) -> String {
    let names = [
        "cwd",
        "project_dir",
        "session_id",
        "file_path",
        "timestamp_ms",
    ]
    .map(|column| format!("{a}.{column}"));
    let columns = Columns {
        cwd: &names[0],
        project_dir: &names[1],
        session_id: &names[2],
        file_path: &names[3],
        time_ms: &names[4],
    };
    let mut conds = conditions(
        &options.scope,
        machine,
        &columns,
        &format!("{a}.machine"),
        params,
    );
    if let Some(model) = &options.model {
        let n = params.add(model.clone());
        conds.push(format!("strpos({a}.model, ${n}) > 0"));
    }
    clause(&conds)
}

/// The key as the index's query gives it to `Fold`.
fn raw_key(by: GroupBy, row: &postgres::Row) -> Result<Option<SqlValue>, postgres::Error> {
    Ok(if by.is_time() {
        row.try_get::<_, Option<i64>>(0)?.map(SqlValue::Integer)
    } else {
        row.try_get::<_, Option<String>>(0)?.map(SqlValue::Text)
    })
}

pub fn run(
    pg: &mut Pg,
    options: &UsageOptions,
    machine: Option<&str>,
) -> Result<UsageReport, PgError> {
    pg.check_readable()?;
    let err = pg.err_owned();
    let report = UsageReport {
        by: options.by,
        repriced: options.prices.is_some(),
        subagents: true,
        ..UsageReport::default()
    };
    let mut fold = Fold::new(options);
    let mut params = Params::default();
    let where_sql = filters(options, machine, "u", &mut params);
    let sql = format!(
        "SELECT {} AS k, u.provider, u.model, u.unpriced, count(*),
                sum(u.input_tokens)::bigint, sum(u.output_tokens)::bigint,
                sum(u.cache_read_tokens)::bigint, sum(u.cache_write_tokens)::bigint,
                sum(u.total_tokens)::bigint, coalesce(sum(u.cost_total), 0)::float8
           FROM v_usage_records u
          WHERE NOT EXISTS (SELECT 1 FROM subagent_runs r
                             WHERE r.src = u.src AND r.child_file_id = u.file_id){where_sql}
          GROUP BY 1, 2, 3, 4",
        key_sql(options.by, "u")
    );
    for row in pg.client.query(&sql, &params.refs()).map_err(pg.err())? {
        let part = UsageRow {
            records: row.try_get(4).map_err(&err)?,
            input_tokens: row.try_get::<_, Option<i64>>(5).map_err(&err)?.unwrap_or(0),
            output_tokens: row.try_get::<_, Option<i64>>(6).map_err(&err)?.unwrap_or(0),
            cache_read_tokens: row.try_get::<_, Option<i64>>(7).map_err(&err)?.unwrap_or(0),
            cache_write_tokens: row.try_get::<_, Option<i64>>(8).map_err(&err)?.unwrap_or(0),
            total_tokens: row.try_get::<_, Option<i64>>(9).map_err(&err)?.unwrap_or(0),
            cost: row.try_get(10).map_err(&err)?,
            ..UsageRow::default()
        };
        let unpriced: i32 = row.try_get(3).map_err(&err)?;
        fold.group(
            raw_key(options.by, &row).map_err(&err)?,
            row.try_get(1).map_err(&err)?,
            row.try_get(2).map_err(&err)?,
            i64::from(unpriced),
            part,
        );
    }

    let mut params = Params::default();
    let where_sql = filters(options, machine, "r", &mut params);
    let sql = format!(
        "WITH runs AS (
           SELECT sr.*, EXISTS (SELECT 1 FROM usage_records u
                                 WHERE u.src = sr.src AND u.entry_rowid = sr.entry_rowid
                                   AND u.source = 'tool_result') AS counted
             FROM subagent_runs sr),
         r AS (
           SELECT sr.timestamp_ms, sr.model, NULL::text AS provider, sr.session_id,
                  s.project_dir, s.cwd, f.path AS file_path, f.machine,
                  CASE WHEN sr.counted THEN 0
                       WHEN coalesce(sr.input_tokens, sr.output_tokens, sr.cache_read_tokens,
                                     sr.cache_write_tokens) IS NOT NULL
                       THEN coalesce(sr.input_tokens, 0) + coalesce(sr.output_tokens, 0)
                            + coalesce(sr.cache_read_tokens, 0) + coalesce(sr.cache_write_tokens, 0)
                       ELSE (SELECT sum(c.total_tokens) FROM usage_records c
                              WHERE c.src = sr.src AND c.file_id = sr.child_file_id) END AS tokens,
                  CASE WHEN sr.counted THEN 0
                       ELSE coalesce(sr.cost, (SELECT sum(c.cost_total) FROM usage_records c
                                                WHERE c.src = sr.src
                                                  AND c.file_id = sr.child_file_id), 0) END AS cost,
                  row_number() OVER (
                    PARTITION BY sr.src, coalesce(sr.tool_call_id, sr.file_id || '|' || sr.entry_id),
                                 sr.position, sr.timestamp_ms
                    ORDER BY s.created_ms IS NULL, s.created_ms, f.path) AS copy_no
             FROM runs sr JOIN files f ON f.src = sr.src AND f.file_id = sr.file_id
             LEFT JOIN sessions s ON s.src = sr.src AND s.file_id = sr.file_id)
         SELECT {} AS k, count(*), sum(r.tokens)::bigint, sum(r.cost)::float8
           FROM r WHERE r.copy_no = 1{where_sql} GROUP BY 1",
        key_sql(options.by, "r")
    );
    for row in pg.client.query(&sql, &params.refs()).map_err(pg.err())? {
        let part = UsageRow {
            subagent_runs: row.try_get(1).map_err(&err)?,
            subagent_tokens: row.try_get::<_, Option<i64>>(2).map_err(&err)?.unwrap_or(0),
            subagent_cost: row
                .try_get::<_, Option<f64>>(3)
                .map_err(&err)?
                .unwrap_or(0.0),
            ..UsageRow::default()
        };
        fold.add(raw_key(options.by, &row).map_err(&err)?, &part);
    }
    Ok(fold.finish(report))
}
