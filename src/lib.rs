//! piidx: every Pi coding-agent session in one SQLite database.
//!
//! The modules follow the data: `discover` finds files, `read` yields their
//! new lines, `parse` turns a line into JSON objects, `normalize` turns an
//! object into rows, `ingest` drives those three for one file, `store` (the
//! only module that speaks SQL) writes and reads the database, `sync`
//! orchestrates a run, `query` answers questions with typed values, and
//! `render` turns those into tables, JSON, CSV, transcripts and trees.

pub mod artifacts;
pub mod config;
pub mod discover;
pub mod doctor;
pub mod fault;
pub mod ingest;
pub mod mcp;
pub mod normalize;
pub mod outside;
pub mod parse;
pub mod pick;
pub mod pipeline;
pub mod private;
pub mod query;
pub mod read;
pub mod render;
pub mod resume;
pub mod roots;
pub mod secrets;
pub mod serve;
pub mod store;
pub mod sync;
pub mod time;
pub mod watch;

/// An error and its causes on one line (`a: b: c`), for reports that keep
/// errors as text. Every `Display` in piidx leaves its source out, so each
/// cause is said once.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}
