//! Integration tests: they run the real `piidx` binary on fixture trees.
//!
//! One binary for all of them (see Cargo.toml). Each module covers one
//! command or one property; `util` holds the shared `Env`.

mod util;

// `sync` on the committed fixture trees: every line accounted for, rows as expected.
mod sync;

// `doctor` detection and repair; hostile databases (foreign, newer, read-only, full disk).
mod doctor;

// Property fuzzing of parse/normalize/ingest; replays tests/data/fuzz/.
mod fuzz;

// The torture tree (huge line, big file, many files, odd files) under a memory limit.
mod torture;
