//! Stage 6: questions asked of the index. Each submodule answers one kind of
//! question with typed values that derive `Serialize`; how they look is
//! `render`'s job, and nothing here imports it (tests/it/render.rs).

pub mod datasette;
mod error;
pub mod export;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod request;
pub mod requests;
pub mod scope;
pub mod search;
pub mod search_fn;
pub mod secrets;
pub mod sessions;
pub mod source;
pub mod sql;
pub mod subagents;
pub mod tools;
pub mod transcript;
pub mod tree;
pub mod tz;
pub mod usage;

pub use error::{Class, QueryError};
