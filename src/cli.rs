//! Command-line interface: clap types only, no logic. The doc comments are
//! the `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "piidx",
    version,
    about = "Index every Pi coding-agent session into one SQLite database"
)]
pub struct Cli {
    /// Database file [default: $PIIDX_DB, else $XDG_DATA_HOME/piidx/piidx.db, else ~/.local/share/piidx/piidx.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index new and changed session files (only new bytes are read)
    Sync(SyncArgs),
    /// Run one read-only SQL statement against the index
    Sql(SqlArgs),
    /// Full-text search over all sessions (words AND-ed; "phrases", prefix*, OR/NOT, parentheses)
    Search(SearchArgs),
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Sessions root to index; repeatable [default: $PI_CODING_AGENT_SESSION_DIR, else $PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions]
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// Print the summary as one JSON object
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no summary line
    #[arg(long, short)]
    pub quiet: bool,
    /// Re-read every file from the start
    #[arg(long)]
    pub full: bool,
    /// Keep the rows of deleted session files (marked deleted) instead of removing them
    #[arg(long)]
    pub keep_deleted: bool,
    /// Remove the rows kept by earlier --keep-deleted runs
    #[arg(long, conflicts_with = "keep_deleted")]
    pub prune: bool,
    /// Seconds to wait for another running sync before giving up (exit code 3)
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub wait: f64,
    /// Lines longer than this are skipped and recorded in parse_errors
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub max_line_bytes: usize,
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    /// The statement, e.g. "SELECT session_id, name FROM sessions"
    pub query: String,
    /// Print a JSON array of objects
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to find, e.g. `SessionManager.listAll`, `"exact phrase"`, `pars* OR lexer`
    pub query: String,
    /// Only sessions of this project (its sessions directory name, or part of its cwd)
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub project: Option<String>,
    /// Only sessions whose cwd is PATH or below it
    #[arg(long, value_name = "PATH")]
    pub cwd: Option<PathBuf>,
    /// Only this session (id, id prefix, or file path)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only this kind of text; repeatable: user, assistant, thinking, tool_call, tool_result, bash, summary, compaction, branch_summary, custom, system, other
    #[arg(long, value_name = "ROLE")]
    pub role: Vec<String>,
    /// Only tool calls/results of this tool (e.g. bash, read)
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Only entries whose message model contains M (case-insensitive)
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Only entries at or after DATE (YYYY-MM-DD, UTC, or an ISO time)
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only entries up to DATE (a YYYY-MM-DD date includes that whole UTC day)
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// Number of hits
    #[arg(long, short = 'n', value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Best matches first, or newest first
    #[arg(long, value_enum, default_value = "rank")]
    pub sort: SortArg,
    /// Pass QUERY to SQLite FTS5 unchanged (FTS5 query syntax)
    #[arg(long, conflicts_with = "substring")]
    pub raw: bool,
    /// Match QUERY's terms as substrings anywhere in the text (slow: scans text unless it is CJK)
    #[arg(long)]
    pub substring: bool,
    /// Print a JSON array of hits
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SortArg {
    Rank,
    Recent,
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
