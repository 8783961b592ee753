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

use crate::normalize::CHUNK_BYTES;
use crate::normalize::shared::{inflate, inflated_len};

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
    let size = ctx.get::<Option<i64>>(1)?;
    let stored = match ctx.get_raw(0) {
        ValueRef::Blob(bytes) | ValueRef::Text(bytes) => bytes,
        _ => return ctx.get::<Value>(0),
    };
    let Some(size) = inflated_len(stored.len(), size) else {
        return ctx.get::<Value>(0);
    };
    // A text of one chunk is read once per row: only a longer one, read
    // chunk by chunk, is worth remembering (copying it costs a few percent
    // of a scan over every text).
    let remember = size > CHUNK_BYTES;
    if remember
        && let Some(out) = RECENT.with(|recent| {
            let recent = recent.borrow();
            recent
                .iter()
                .find(|(data, _)| data.as_slice() == stored)
                .map(|(_, out)| out.clone())
        })
    {
        return Ok(Value::Blob(out));
    }
    let out = inflate(stored, size).map_err(|err| {
        rusqlite::Error::UserFunctionError(format!("sqlar_uncompress: {err}").into())
    })?;
    if remember {
        RECENT.with(|recent| {
            let mut recent = recent.borrow_mut();
            if recent.len() == RECENT_TEXTS {
                recent.pop_back();
            }
            recent.push_front((stored.to_vec(), out.clone()));
        });
    }
    Ok(Value::Blob(out))
}

/// How many inflated texts `sqlar_uncompress` keeps per thread.
const RECENT_TEXTS: usize = 4;

thread_local! {
    /// The last texts `sqlar_uncompress` inflated, by their stored bytes: a
    /// large shared text is cut into chunks of 32 KiB, and `fts_content`
    /// reads each chunk from the whole text, so without these a push (or a
    /// rebuild) inflated a text once per chunk, quadratic in its size.
    /// Comparing the stored bytes costs a fraction of inflating them.
    static RECENT: std::cell::RefCell<std::collections::VecDeque<(Vec<u8>, Vec<u8>)>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
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

    /// A row whose size is wrong, even absurd, still reads as its stream
    /// says (nothing of that size is allocated); bytes that are no zlib
    /// stream are an error, not a panic.
    #[test]
    fn a_wrong_size_reads_the_stream_and_garbage_is_an_error() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let text = "tool output line\n".repeat(100);
        let deflated = crate::normalize::shared::compress(&text).unwrap();
        for size in [text.len() as i64 - 1, text.len() as i64 + 1, i64::MAX] {
            let back: String = conn
                .query_row(
                    "SELECT CAST(sqlar_uncompress(?1, ?2) AS TEXT)",
                    rusqlite::params![deflated, size],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(back, text, "size {size}");
        }
        let garbage = conn.query_row("SELECT sqlar_uncompress(x'0102030405', 100)", [], |row| {
            row.get::<_, Vec<u8>>(0)
        });
        assert!(garbage.is_err());
    }
}
