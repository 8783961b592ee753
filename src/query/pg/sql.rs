//! `piidx sql --pg`: one statement in a read-only transaction of the team
//! store, its values as PostgreSQL prints them (text), to the same
//! `RowSink` as the index's.

use super::{Pg, PgError};
use crate::query::sql::RowSink;

#[derive(Debug, thiserror::Error)]
pub enum PgSqlError {
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error("writing the output")]
    Output(#[source] std::io::Error),
}

/// Runs `sql` read-only: the transaction is `READ ONLY`, so a statement
/// that writes fails, whatever the role may do; `timeout_ms` (0: none) is
/// its `statement_timeout`.
pub fn run(
    pg: &mut Pg,
    sql: &str,
    timeout_ms: u64,
    sink: &mut dyn RowSink,
) -> Result<(), PgSqlError> {
    let err = pg.err_owned();
    let mut tx = pg
        .client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(&err)?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {timeout_ms}"))
        .map_err(&err)?;
    // The simple protocol gives every value as text, whatever its type.
    let messages = tx.simple_query(sql).map_err(&err)?;
    let mut named = false;
    for message in messages {
        match message {
            postgres::SimpleQueryMessage::RowDescription(columns) if !named => {
                let names: Vec<String> = columns.iter().map(|c| c.name().to_owned()).collect();
                sink.columns(&names).map_err(PgSqlError::Output)?;
                named = true;
            }
            postgres::SimpleQueryMessage::Row(row) => {
                if !named {
                    let names: Vec<String> =
                        row.columns().iter().map(|c| c.name().to_owned()).collect();
                    sink.columns(&names).map_err(PgSqlError::Output)?;
                    named = true;
                }
                let values = (0..row.len())
                    .map(|i| row.get(i).map_or(serde_json::Value::Null, |v| v.into()))
                    .collect();
                sink.row(values).map_err(PgSqlError::Output)?;
            }
            _ => {}
        }
    }
    if !named {
        sink.columns(&[]).map_err(PgSqlError::Output)?;
    }
    sink.finish().map_err(PgSqlError::Output)?;
    tx.rollback().map_err(&err)?;
    Ok(())
}
