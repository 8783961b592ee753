//! Stage 6: questions asked of the index. Each submodule answers one command
//! with typed rows; printing is `output`'s job.

pub mod search;
pub mod search_query;
pub mod sql;
