//! `piidx sessions --pg`: the sessions of the team store, as `SessionInfo`s
//! in Pi's order (the same order function as the index's list).

use super::{Params, Pg, PgError, clause, conditions};
use crate::query::scope::Columns;
use crate::query::sessions::{SessionInfo, SessionsQuery, order, short_id};

/// Sessions newest first; `machine` keeps one machine's.
pub fn list(
    pg: &mut Pg,
    query: &SessionsQuery,
    machine: Option<&str>,
) -> Result<Vec<SessionInfo>, PgError> {
    pg.check_readable()?;
    let mut params = Params::default();
    let time = "coalesce(s.modified_ms, f.mtime_ns / 1000000)";
    let conds = conditions(
        &query.scope,
        machine,
        &Columns::sessions(time),
        "s.machine",
        &mut params,
    );
    let listed = if query.all {
        ""
    } else {
        " AND s.listed_by_pi = 1"
    };
    let sql = format!(
        "SELECT s.file_path, s.session_id,
                CASE WHEN json_typeof(s.header_raw::json -> 'cwd') = 'string'
                     THEN s.header_raw::json ->> 'cwd' ELSE '' END,
                s.name, (s.header_raw::json -> 'parentSession')::text, s.created_ms,
                {time}, s.message_count, s.first_message, s.listed_by_pi,
                CASE WHEN f.layout = 'flat' THEN 0 ELSE f.mtime_ns END
           FROM sessions s JOIN files f ON f.src = s.src AND f.file_id = s.file_id
          WHERE true{listed}{}",
        clause(&conds)
    );
    let rows = pg.client.query(&sql, &params.refs()).map_err(pg.err())?;
    let sessions = rows
        .iter()
        .map(|row| {
            let parent: Option<String> = row.try_get(4)?;
            let read_order: Option<i64> = row.try_get(10)?;
            Ok((
                read_order.unwrap_or(0),
                SessionInfo {
                    path: row.try_get(0)?,
                    id: row.try_get(1)?,
                    cwd: row.try_get(2)?,
                    name: row.try_get(3)?,
                    parent_session_path: parent.and_then(|text| serde_json::from_str(&text).ok()),
                    created_ms: row.try_get(5)?,
                    modified_ms: row.try_get(6)?,
                    message_count: row.try_get::<_, Option<i64>>(7)?.unwrap_or(0),
                    first_message: row
                        .try_get::<_, Option<String>>(8)?
                        .unwrap_or_else(|| "(no messages)".to_owned()),
                    listed_by_pi: row.try_get::<_, Option<i64>>(9)? == Some(1),
                    short_id: String::new(),
                    // The team store does not record agents yet.
                    agent: crate::normalize::agent::PI.to_owned(),
                    port_model: None,
                },
            ))
        })
        .collect::<Result<Vec<_>, postgres::Error>>()
        .map_err(pg.err())?;
    // Unique among the sessions the question is about (the store's ids
    // are each machine's own).
    let mut ids: Vec<String> = sessions.iter().map(|(_, info)| info.id.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut sessions = order(sessions, query.limit);
    for info in &mut sessions {
        info.short_id = short_id(&ids, &info.id);
    }
    Ok(sessions)
}
