//! Command-line interface: the global options and the list of subcommands
//! (each one's own options live in its file under `cmd/`, the option groups
//! they share in `cmd/mod.rs`), and running the one given. The doc comments
//! are the `--help` text. `cmd/` never imports this file: `completions` and
//! `man` are handed the clap definition.

use std::path::PathBuf;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::cmd;
use piidx::render::ColorChoice;

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

// Each subcommand's arguments are built only when it runs (`defer`): building
// every subcommand's was work each command did before anything else could
// start (docs/performance.md). A deferred subcommand gets its arguments after
// its own about text, so the structs it flattens keep their descriptions in
// plain comments: a doc comment there would become its about
// (`subcommands_keep_their_about`).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
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

impl From<Color> for ColorChoice {
    fn from(color: Color) -> ColorChoice {
        match color {
            Color::Auto => ColorChoice::Auto,
            Color::Always => ColorChoice::Always,
            Color::Never => ColorChoice::Never,
        }
    }
}

impl Cli {
    /// Runs the subcommand with the global options.
    pub fn run(self) -> Result<ExitCode> {
        let global = &cmd::Global::new(self.db, self.color.into())?;
        match self.command {
            Command::Sync(args) => cmd::sync::run(args, global),
            Command::Watch(args) => cmd::watch::run(args, global),
            Command::Search(args) => cmd::search::run(args, global),
            Command::Sessions(args) => cmd::sessions::run(args, global),
            Command::Show(args) => cmd::show::run(args, global),
            Command::Tree(args) => cmd::tree::run(args, global),
            Command::Export(args) => cmd::export::run(args, global),
            Command::Pick(args) => cmd::pick::run(args, global),
            Command::Resume(args) => cmd::resume::run(args, global),
            Command::Usage(args) => cmd::usage::run(args, global),
            Command::Tools(args) => cmd::tools::run(args, global),
            Command::Subagents(args) => cmd::subagents::run(args, global),
            Command::Secrets(args) => cmd::secrets::run(args, global),
            Command::Redact(args) => cmd::redact::run(args, global),
            Command::Sql(args) => cmd::sql::run(args, global),
            Command::Push(args) => cmd::push::run(args, global),
            Command::Datasette(args) => cmd::datasette::run(args, global),
            Command::Doctor(args) => cmd::doctor::run(args, global),
            Command::Roots(args) => cmd::roots::run(args, global),
            Command::Completions(args) => cmd::completions::run(args, Cli::command()),
            Command::Man(args) => cmd::man::run(args, Cli::command()),
            Command::Mcp(args) => cmd::mcp::run(args, global),
            Command::Serve(args) => cmd::serve::run(args, global),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn subcommands_keep_their_about() {
        for sub in Cli::command().get_subcommands() {
            let (about, long_about) = (sub.get_about().cloned(), sub.get_long_about().cloned());
            let mut built = sub.clone();
            built.build();
            let name = sub.get_name();
            let replaced = format!(
                "{name}'s about was replaced by the doc comment of a struct it flattens: \
                 make that a plain comment (see `Command`)"
            );
            assert!(about.is_some(), "{name} has no about");
            assert_eq!(built.get_about(), about.as_ref(), "{replaced}");
            assert_eq!(built.get_long_about(), long_about.as_ref(), "{replaced}");
        }
    }
}
