//! piidx: every Pi coding-agent session in one SQLite database.
//!
//! The modules follow the data: `discover` finds files, `read` yields their
//! new lines, `parse` turns a line into JSON objects, `normalize` turns an
//! object into rows, `ingest` drives those three for one file, `store` (the
//! only module that speaks SQL) writes and reads the database, `sync`
//! orchestrates a run, and `query` + `output` answer the user's commands.

pub mod artifacts;
pub mod config;
pub mod discover;
pub mod doctor;
pub mod fault;
pub mod ingest;
pub mod normalize;
pub mod output;
pub mod parse;
pub mod pipeline;
pub mod query;
pub mod read;
pub mod roots;
pub mod store;

pub mod sync;
pub mod time;
