//! Integration tests: they run the real `piidx` binary on fixture trees.
//!
//! One binary for all of them (see Cargo.toml). Each module covers one
//! command or one property; `util` holds the shared `Env`.

mod util;

// `sync` on the committed fixture trees: every line accounted for, rows as expected.
mod sync;
// Incremental sync equals a fresh sync, whatever happened between runs.
mod incremental;
// kill -9 mid-sync, concurrent syncs, readers during a sync.
mod crash;
// Unreadable paths and read-only indexes, as an ordinary user.
mod permissions;
// Owner-only files under any umask; an index others can read is reported.
mod private;
// Pi 1.5.x written by Pi's own code: coverage, listAll, context, usage.
mod pi152;
// Random trees written by Pi 1.5.2's and oh-my-pi's own code: lists, branches, contexts.
mod random;
// Rows against counts computed independently from the fixture files.
mod fixtures;
// `piidx sql`, output formats, and opening databases that are not ours.
mod sql;
// Subagent runs, child transcripts, artifacts and child sessions.
mod subagents;
// oh-my-pi and pi_agent_rust files, written by (or field for field from) their own code.
mod agents;
// Pi-native views: sessions (vs Pi listAll), show, tree, export, fork and tree views.
mod views;
// Shapes of real files: lone surrogates, glued lines, tool times, skipped files, chunk cuts.
mod shapes;
// `usage` and `tools`: sums against totals computed from the fixture files.
mod usage;

// What each command prints (snapshots at two widths), Markdown, layers.
mod render;

// `piidx mcp` driven by the official MCP Python client, against the CLI's answers.
mod mcp;

// `search`: known-item tokens, filters, identifiers, CJK, punctuation fuzz.
mod search;

// The word index's shard files: catch-up, re-sharding, upgrade from schema 5.
mod shards;

// Search from every SQLite tool: the docs' SQL in sqlite3, search() in
// piidx sql, sqlite-utils, Datasette; remembered roots.
mod anysql;

// `doctor` detection and repair; hostile databases (foreign, newer, read-only, full disk).
mod doctor;

// Property fuzzing of parse/normalize/ingest; replays tests/data/fuzz/.
mod fuzz;

// The torture tree (huge line, big file, many files, odd files) under a memory limit.
mod torture;

// `resume` and `pick` (through tmux): back into Pi, terminal restored.
mod pick;

// `push` and `--pg` on a throw-away PostgreSQL cluster.
#[cfg(feature = "postgres")]
mod pg;

// `watch`: notifications to a current index, equal to a fresh sync.
mod watch;

// `serve`: the JSON API against the CLI, the pages in headless Chromium, live updates.
mod serve;

// README.md: every command it shows, run on the fixtures as shown.
mod readme;
