//! `piidx sql`: one read-only statement, any result shape.

use rusqlite::types::ValueRef;
use serde_json::Value;

use crate::output::Rows;
use crate::store::Index;

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("piidx sql only reads; `{0}` would change the database (use sqlite3 if you mean it)")]
    Write(String),
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// Runs `query` and returns every row.
/// The full-text shards are attached as `fts0`, `fts1`, ... when they
/// exist; a query that does not use them runs without them.
pub fn run(store: &Index, query: &str) -> Result<Rows, SqlError> {
    let _ = store.attach_fts();
    let conn = store.connection();
    let mut stmt = conn.prepare(query)?;
    if !stmt.readonly() {
        let verb = query
            .split_whitespace()
            .next()
            .unwrap_or(query)
            .to_uppercase();
        return Err(SqlError::Write(verb));
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let count = columns.len();
    let mut rows = Rows {
        columns,
        rows: Vec::new(),
    };
    let mut result = stmt.query([])?;
    while let Some(row) = result.next()? {
        let mut values = Vec::with_capacity(count);
        for index in 0..count {
            values.push(to_json(row.get_ref(index)?));
        }
        rows.rows.push(values);
    }
    Ok(rows)
}

/// SQLite values as JSON; blobs become `"<blob N bytes>"` (never raw bytes).
pub fn to_json(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(bytes) => Value::String(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => Value::String(format!("<blob {} bytes>", bytes.len())),
    }
}
