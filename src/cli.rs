//! Command-line interface: the global options, the list of subcommands
//! (each one's own options live in its file under `cmd/`), and the option
//! groups several commands share. clap types only; the doc comments are the
//! `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cmd;

#[derive(Debug, Parser)]
#[command(
    name = "piidx",
    version,
    long_version = concat!(env!("CARGO_PKG_VERSION"), " (json 1: docs/json.md)"),
    about = "Index every Pi coding-agent session into one SQLite database",
    max_term_width = 100
)]
pub struct Cli {
    /// Database file [default: $PIIDX_DB, else $XDG_DATA_HOME/piidx/piidx.db, else ~/.local/share/piidx/piidx.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// When to colour the output (auto: on a terminal, unless NO_COLOR is set)
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = Color::Auto)]
    pub color: Color,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index new and changed session files (only new bytes are read)
    Sync(cmd::sync::Args),
    /// Sync, then again whenever session files change (file-system notifications), until stopped
    Watch(cmd::watch::Args),
    /// Full-text search over all sessions (words AND-ed; "phrases", prefix*, OR/NOT, parentheses)
    Search(cmd::search::Args),
    /// List sessions newest first, as Pi's /resume does (Pi's SessionInfo)
    Sessions(cmd::sessions::Args),
    /// Print a session's current branch as a transcript (as Pi builds context)
    Show(cmd::show::Args),
    /// Print a session's entry tree, one line per entry (like Pi's /tree)
    Tree(cmd::tree::Args),
    /// Write a Pi session file rebuilt from the index alone
    Export(cmd::export::Args),
    /// Find a session interactively (search as you type) and resume it in Pi, show, export it
    Pick(cmd::pick::Args),
    /// Resume a session in Pi (`pi --session`), rebuilding its file from the index if it is gone
    Resume(cmd::resume::Args),
    /// Tokens and cost by day, week, month, model, provider, project or session
    Usage(cmd::usage::Args),
    /// Tool call counts, error rates, tool times and largest outputs
    ///
    /// A call's time ("median", "p95") runs from when it was issued (the
    /// assistant entry's own `timestamp`, written when the message holding
    /// the call ended) to its result, so it is the tool's time. The turn
    /// time, from the assistant message's `timestamp` (when the request
    /// started: the model's generation included) to the result, is in
    /// `--json` and `--csv` (`turn_median_ms`, `turn_p95_ms`).
    Tools(cmd::tools::Args),
    /// List subagent runs (delegations recorded by subagent tool results)
    Subagents(cmd::subagents::Args),
    /// List what looks like a credential in the index (masked), to know what to rotate
    Secrets(cmd::secrets::Args),
    /// Redact secrets in the index from now on, re-reading every file (sync --redact)
    Redact(cmd::redact::RedactArgs),
    /// Run one read-only SQL statement against the index
    Sql(cmd::sql::Args),
    /// Send what changed since the last push to a team store in PostgreSQL (docs/postgres.md)
    Push(cmd::push::Args),
    /// Browse and search the index in Datasette (text search, dates, canned queries)
    Datasette(cmd::datasette::Args),
    /// Check the index (SQLite, FTS, schema, rows vs. files) and with --fix repair it
    Doctor(cmd::doctor::Args),
    /// The session roots the index syncs (remembered from earlier syncs), or forget one
    Roots(cmd::roots::Args),
    /// Serve the index read-only to an MCP client (Claude, Pi, editors) over stdin/stdout
    Mcp(cmd::mcp::Args),
    /// Browse and search the index in a web browser (local web app and JSON API; --watch keeps it live)
    Serve(cmd::serve::Args),
    /// Print a shell completion script: `piidx completions bash > ~/.local/share/bash-completion/completions/piidx`
    Completions(cmd::completions::Args),
    /// Print the man page (roff): `piidx man > ~/.local/share/man/man1/piidx.1`
    Man(cmd::man::Args),
}

/// Which sessions and which time a command is about: defined once, in
/// `query::scope`, for the CLI, serve and MCP alike.
pub use piidx::query::scope::ScopeText as ScopeArgs;

/// Asking the team store in PostgreSQL instead of the index (`piidx push`).
#[derive(Debug, Clone, Default, Args)]
pub struct PgArgs {
    /// Answer from the team store at this postgres:// URL (what `piidx push` sent there) instead of the index
    #[arg(long, value_name = "URL")]
    pub pg: Option<String>,
    /// With --pg: only sessions of this machine (its label: `piidx sync --machine`, else its host name)
    #[arg(long, value_name = "NAME", requires = "pg")]
    pub machine: Option<String>,
}

/// How a listing command prints.
#[derive(Debug, Clone, Default, Args)]
pub struct ListArgs {
    /// Print a JSON array
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
    /// At most N rows
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }
}
