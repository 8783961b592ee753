//! `piidx sql --pg`: one query in a read-only transaction of the team store
//! that the query cannot end, its values as PostgreSQL prints them (text),
//! to the same `RowSink` as the index's.
//!
//! What keeps it read-only, whatever role the URL logs in as (a superuser
//! or the pushers' own role included):
//! * the text is parsed by the server as exactly one statement (the
//!   extended protocol's Parse refuses two), so `COMMIT; DELETE …` is
//!   refused before anything runs;
//! * it runs as the query of a cursor (`DECLARE … CURSOR FOR`), which takes
//!   only `SELECT`, `VALUES`, `TABLE` and `WITH` without data-modifying
//!   parts: no `COMMIT`, `SET`, `COPY`, `DELETE` or `DROP` can be one;
//! * inside a `READ ONLY` transaction that is rolled back afterwards;
//! * and functions that reach outside the database (the server's files and
//!   programs, other sessions, the server's settings, SQL run from a
//!   string) are refused by name, as they appear in the server's own plan
//!   of the query (`EXPLAIN VERBOSE`), which has resolved quoting, schemas,
//!   views and inlined functions: the class, not one spelling.
//!
//! Rows are fetched from the cursor in batches, so the first is printed at
//! once and memory does not grow with the result.

use postgres::Transaction;
use serde_json::Value;

use super::{Pg, PgError};
use crate::query::sql::RowSink;

#[derive(Debug, thiserror::Error)]
pub enum PgSqlError {
    #[error(transparent)]
    Pg(#[from] PgError),
    #[error(
        "piidx sql --pg runs exactly one statement; the text holds several ({reason}). Send one SELECT, or run the others one at a time"
    )]
    Several { reason: String },
    #[error(
        "piidx sql --pg only reads: one SELECT, VALUES, TABLE or WITH … SELECT, without data-modifying parts ({reason}); use psql as the store's owner if you mean to change it"
    )]
    NotAQuery { reason: String },
    #[error(
        "piidx sql --pg refuses {function}(): it reaches outside the team store's tables (the server's files, programs, settings or other sessions); ask for the tables instead"
    )]
    Refused { function: String },
    #[error("writing the output")]
    Output(#[source] std::io::Error),
}

/// Functions a reader never needs and that reach outside the store's rows:
/// the server's files and directories, programs and other backends, its
/// configuration and logs, locks other sessions wait on, and SQL run from
/// a string (which would hide any of these from the plan).
const REFUSED: &[&str] = &[
    // The server's files.
    "pg_read_file",
    "pg_read_binary_file",
    "pg_stat_file",
    "pg_ls_dir",
    "pg_ls_logdir",
    "pg_ls_waldir",
    "pg_ls_tmpdir",
    "pg_ls_archive_statusdir",
    "pg_ls_logicalsnapdir",
    "pg_ls_logicalmapdir",
    "pg_ls_replslotdir",
    "pg_current_logfile",
    "pg_file_write",
    "pg_file_rename",
    "pg_file_unlink",
    "pg_file_sync",
    "pg_logdir_ls",
    "lo_import",
    "lo_export",
    // Other backends and the server itself.
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_signal_backend",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
    "pg_switch_wal",
    "pg_create_restore_point",
    "pg_backup_start",
    "pg_backup_stop",
    "pg_log_backend_memory_contexts",
    "pg_notify",
    "pg_logical_emit_message",
    "set_config",
    // Locks pushers take.
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_advisory_xact_lock",
    "pg_advisory_xact_lock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
    "pg_try_advisory_xact_lock",
    "pg_try_advisory_xact_lock_shared",
    // SQL from a string, and other servers.
    "query_to_xml",
    "query_to_xmlschema",
    "query_to_xml_and_xmlschema",
    "cursor_to_xml",
    "cursor_to_xmlschema",
    "dblink",
    "dblink_exec",
    "dblink_connect",
    "dblink_connect_u",
    "dblink_open",
    "dblink_send_query",
];

/// Rows fetched from the cursor at a time.
const BATCH: usize = 500;

/// Runs `sql` read-only (see the module doc); `timeout_ms` (0: none) is
/// its `statement_timeout`.
pub fn run(
    pg: &mut Pg,
    sql: &str,
    timeout_ms: u64,
    sink: &mut dyn RowSink,
) -> Result<(), PgSqlError> {
    let err = pg.err_owned();
    let statement = trim_statement(sql);
    let mut tx = pg
        .client
        .build_transaction()
        .read_only(true)
        .start()
        .map_err(&err)?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {timeout_ms}"))
        .map_err(&err)?;
    // Parse (extended protocol): one statement or an error, nothing run.
    if let Err(error) = tx.prepare(statement) {
        return Err(match db_message(&error) {
            Some(message) if message.contains("multiple commands") => {
                PgSqlError::Several { reason: message }
            }
            _ => err(error).into(),
        });
    }
    check_functions(&mut tx, statement, &err)?;
    if let Err(error) = tx.execute(
        &format!("DECLARE piidx_sql NO SCROLL CURSOR FOR {statement}"),
        &[],
    ) {
        return Err(match db_message(&error) {
            // The statement parsed on its own, so what the cursor refuses
            // is its kind (or a data-modifying WITH).
            Some(reason) if is_syntax_or_feature(&error) => PgSqlError::NotAQuery { reason },
            _ => err(error).into(),
        });
    }
    let mut named = false;
    loop {
        let messages = tx
            .simple_query(&format!("FETCH FORWARD {BATCH} FROM piidx_sql"))
            .map_err(&err)?;
        let mut rows = 0;
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
                        .map(|i| row.get(i).map_or(Value::Null, |v| v.into()))
                        .collect();
                    sink.row(values).map_err(PgSqlError::Output)?;
                    rows += 1;
                }
                _ => {}
            }
        }
        if rows < BATCH {
            break;
        }
    }
    if !named {
        sink.columns(&[]).map_err(PgSqlError::Output)?;
    }
    sink.finish().map_err(PgSqlError::Output)?;
    tx.rollback().map_err(&err)?;
    Ok(())
}

/// The statement without the trailing semicolons and blanks a person
/// types (`SELECT 1;`), which would otherwise end the cursor's text.
fn trim_statement(sql: &str) -> &str {
    sql.trim_end_matches(|c: char| c == ';' || c.is_whitespace())
}

/// Refuses the statement if its plan calls one of `REFUSED`.
fn check_functions(
    tx: &mut Transaction<'_>,
    statement: &str,
    err: &impl Fn(postgres::Error) -> PgError,
) -> Result<(), PgSqlError> {
    // The simple protocol gives the plan as text; `statement` is known to
    // be one statement (it was parsed alone), so this runs one EXPLAIN.
    let messages = match tx.simple_query(&format!("EXPLAIN (VERBOSE, FORMAT JSON) {statement}")) {
        Ok(messages) => messages,
        Err(error) => {
            return Err(match db_message(&error) {
                Some(reason) if is_syntax_or_feature(&error) => PgSqlError::NotAQuery { reason },
                _ => err(error).into(),
            });
        }
    };
    let plan: String = messages
        .iter()
        .filter_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => row.try_get(0).ok().flatten(),
            _ => None,
        })
        .collect();
    match refused_function(&plan) {
        Some(function) => Err(PgSqlError::Refused { function }),
        None => Ok(()),
    }
}

/// The first refused function a plan calls: a name followed by `(` in a
/// deparsed expression, or a function scan's `"Function Name"`.
fn refused_function(plan: &str) -> Option<String> {
    let bytes = plan.as_bytes();
    let mut start = None;
    for (at, &byte) in bytes.iter().enumerate() {
        let word = byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$';
        match (word, start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                start = None;
                let name = plan[from..at].to_ascii_lowercase();
                let called = byte == b'(' || plan[..from].ends_with("\"Function Name\": \"");
                if called && REFUSED.contains(&name.as_str()) {
                    return Some(name);
                }
            }
            _ => {}
        }
    }
    None
}

/// The server's message of a failed statement.
fn db_message(error: &postgres::Error) -> Option<String> {
    error.as_db_error().map(|db| db.message().to_owned())
}

/// A syntax error or a feature the cursor does not support: what the
/// server says of a statement that is not a plain query.
fn is_syntax_or_feature(error: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    matches!(
        error.code(),
        Some(code) if *code == SqlState::SYNTAX_ERROR
            || *code == SqlState::FEATURE_NOT_SUPPORTED
            || *code == SqlState::READ_ONLY_SQL_TRANSACTION
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_lose_their_trailing_semicolons() {
        assert_eq!(trim_statement("SELECT 1; \n;"), "SELECT 1");
        assert_eq!(trim_statement("SELECT ';'"), "SELECT ';'");
    }

    #[test]
    fn refused_functions_are_found_where_a_plan_calls_them() {
        let plan = r#"[{"Plan": {"Node Type": "Result", "Output": ["pg_catalog.pg_read_file('/etc/passwd'::text)"]}}]"#;
        assert_eq!(refused_function(plan).as_deref(), Some("pg_read_file"));
        let plan = r#"[{"Plan": {"Node Type": "Function Scan", "Function Name": "pg_ls_dir", "Output": ["x"]}}]"#;
        assert_eq!(refused_function(plan).as_deref(), Some("pg_ls_dir"));
        let plan = r#"[{"Plan": {"Output": ["count(*)", "'pg_read_file'::text"]}}]"#;
        assert_eq!(refused_function(plan), None);
    }
}
