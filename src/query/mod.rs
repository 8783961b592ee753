//! Stage 6: questions asked of the index. Each submodule answers one command
//! with typed rows; printing is `output`'s job.

pub mod export;
pub mod scope;
pub mod search;
pub mod sessions;
pub mod show;
pub mod sql;
pub mod subagents;
pub mod tools;
pub mod tree;
pub mod tz;
pub mod usage;
