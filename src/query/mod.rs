//! Stage 6: questions asked of the index. Each submodule answers one command
//! with typed rows; printing is `output`'s job.

pub mod sql;
pub mod tools;
pub mod tz;
pub mod usage;
