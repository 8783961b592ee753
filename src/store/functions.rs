//! SQL functions piidx registers on every connection to an index, so that
//! its views work in piidx as they do in the `sqlite3` shell.
//!
//! `sqlar_uncompress(data, size)` is the shell's own function (SQL
//! archives, `sqlite3 -A`), built into every `sqlite3` with zlib: data of
//! `size` bytes is returned as it is, anything else is inflated from a
//! zlib stream. Shared texts are stored in that format (migration 0017), so
//! `v_shared_texts` and the views over it read them in the shell without an
//! extension; Python and Datasette register the same three lines
//! (docs/schema.md, `piidx datasette`).

use rusqlite::Connection;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};

/// Registers piidx's SQL functions on `conn`.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        "sqlar_uncompress",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        sqlar_uncompress,
    )
}

fn sqlar_uncompress(ctx: &Context<'_>) -> rusqlite::Result<Value> {
    let size = ctx.get::<Option<i64>>(1)?.unwrap_or(0);
    let stored = match ctx.get_raw(0) {
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => bytes,
        _ => return ctx.get::<Value>(0),
    };
    if size <= 0 || size as usize == stored.len() {
        return ctx.get::<Value>(0);
    }
    let mut out = Vec::with_capacity(size as usize);
    use std::io::Read;
    flate2::read::ZlibDecoder::new(stored)
        .read_to_end(&mut out)
        .map_err(|err| {
            rusqlite::Error::UserFunctionError(format!("sqlar_uncompress: {err}").into())
        })?;
    Ok(Value::Blob(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_compress_writes_and_passes_the_rest_through() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let text = "tool output line\n".repeat(100);
        let deflated = crate::normalize::shared::compress(&text).unwrap();
        let back: String = conn
            .query_row(
                "SELECT CAST(sqlar_uncompress(?1, ?2) AS TEXT)",
                rusqlite::params![deflated, text.len() as i64],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(back, text);
        let same: String = conn
            .query_row("SELECT sqlar_uncompress('abc', 3)", [], |row| row.get(0))
            .unwrap();
        assert_eq!(same, "abc");
    }
}
