//! `piidx sql`: one read-only statement, any result shape, its rows handed
//! one at a time to a `RowSink` as SQLite steps through them: the first row
//! is printed at once, and memory does not grow with the result.

use rusqlite::types::ValueRef;
use serde_json::Value;

use crate::store::Index;

#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    #[error("piidx sql only reads; `{0}` would change the database (use sqlite3 if you mean it)")]
    Write(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The sink could not take a row (its output went away or failed).
    #[error(transparent)]
    Output(#[from] std::io::Error),
}

/// Where rows go: the column names once, then each row.
pub trait RowSink {
    fn columns(&mut self, names: &[String]) -> std::io::Result<()>;
    fn row(&mut self, values: Vec<Value>) -> std::io::Result<()>;
    /// After the last row.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// Runs `query` and hands its rows to `sink` as they come.
/// The full-text shards are attached as `fts0`, `fts1`, ... when they
/// exist; a query that does not use them runs without them.
pub fn run(store: &Index, query: &str, sink: &mut dyn RowSink) -> Result<(), SqlError> {
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
    sink.columns(&columns)?;
    let count = columns.len();
    let mut result = stmt.query([])?;
    while let Some(row) = result.next()? {
        let mut values = Vec::with_capacity(count);
        for index in 0..count {
            values.push(to_json(row.get_ref(index)?));
        }
        sink.row(values)?;
    }
    sink.finish()?;
    Ok(())
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
