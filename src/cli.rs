//! Command-line interface: clap types only, no logic. The doc comments are
//! the `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// Check the index (SQLite, FTS, schema, rows vs. files) and with --fix repair it
    Doctor(DoctorArgs),
    /// Full-text search over all sessions (words AND-ed; "phrases", prefix*, OR/NOT, parentheses)
    Search(SearchArgs),
    /// List subagent runs (delegations recorded by subagent tool results)
    Subagents(SubagentsArgs),
    /// List sessions newest first, as Pi's /resume does (Pi's SessionInfo)
    Sessions(SessionsArgs),
    /// Print a session's current branch as a transcript (as Pi builds context)
    Show(ShowArgs),
    /// Print a session's entry tree, one line per entry (like Pi's /tree)
    Tree(TreeArgs),
    /// Write a Pi session file rebuilt from the index alone
    Export(ExportArgs),
    /// Tokens and cost by day, week, month, model, provider, project or session
    Usage(UsageArgs),
    /// Tool call counts, error rates, call -> result times and largest outputs
    Tools(ToolsArgs),
    /// The session roots the index syncs (remembered from earlier syncs), or forget one
    Roots(RootsArgs),
}

#[derive(Debug, Args)]
pub struct RootsArgs {
    /// Forget this root: remove it and every row of its files from the index
    #[arg(long, value_name = "DIR")]
    pub forget: Option<PathBuf>,
    /// Print a JSON array of objects
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Only this project: its per-cwd directory name or the cwd's last component
    #[arg(long, value_name = "P")]
    pub project: Option<String>,
    /// Only sessions whose cwd is exactly PATH
    #[arg(long, value_name = "PATH")]
    pub cwd: Option<String>,
    /// Only sessions modified on or after DATE (YYYY-MM-DD or ISO-8601, UTC)
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// At most N sessions
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Also list files Pi's listAll() does not see (nested child sessions, flat root files); marked * in the table
    #[arg(long)]
    pub all: bool,
    /// Print Pi's SessionInfo objects as a JSON array (path, id, cwd, name, parentSessionPath, created, modified, messageCount, firstMessage)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Show the branch ending at this entry id (or unique prefix) instead of the last entry
    #[arg(long, value_name = "LEAF", conflicts_with = "all")]
    pub branch: Option<String>,
    /// Show every entry of the tree with its branch points
    #[arg(long)]
    pub all: bool,
    /// Print the branch's entries (root to leaf) as a JSON array; image payloads become placeholders
    #[arg(long, conflicts_with_all = ["markdown", "all"])]
    pub json: bool,
    /// Render Markdown
    #[arg(long)]
    pub markdown: bool,
    /// Print system prompts in full (by default: their sections and tools, with sizes)
    #[arg(long)]
    pub system: bool,
}

#[derive(Debug, Args)]
pub struct TreeArgs {
    /// Session id, unique id prefix, or session file path
    pub session: String,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Write to FILE instead of standard output
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    /// Sessions root to index; repeatable, and remembered [default: every root synced before, and wherever Pi keeps sessions: $PI_CODING_AGENT_SESSION_DIR, sessionDir in ~/.pi/agent/settings.json or a project's .pi/settings.json, $PI_CODING_AGENT_DIR/sessions or ~/.pi/agent/sessions]
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
    /// Split the full-text index over N files written in parallel [default: the database's count; one per core (at most 8) for a new database]. A new count re-indexes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub fts_shards: Option<u16>,
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
pub struct SubagentsArgs {
    /// Only runs of this agent (e.g. worker, reviewer, scout)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only runs started on or after this date (YYYY-MM-DD, UTC) or ISO timestamp
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only failed runs (non-zero exit code, or an error stop reason)
    #[arg(long)]
    pub failed: bool,
    /// Print a JSON array of objects (full task text)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageBy {
    Day,
    /// ISO weeks (Monday to Sunday), keyed `YYYY-Www`
    Week,
    Month,
    Model,
    Provider,
    Project,
    Session,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = UsageBy::Day)]
    pub by: UsageBy,
    /// First day to include (YYYY-MM-DD, in --tz)
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Last day to include (YYYY-MM-DD, in --tz)
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// Only this project (project directory name, cwd, or part of the cwd)
    #[arg(long, value_name = "P")]
    pub project: Option<String>,
    /// Only models whose id contains M
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Time zone for days, weeks and months: UTC, +02:00, -0530, or an IANA name such as Europe/Berlin [default: $TZ if valid, else UTC]
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// JSON file of prices per million tokens used for unpriced usage: {"model-id": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}}
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// No bar chart column
    #[arg(long)]
    pub no_chart: bool,
    /// Print a JSON array of objects (one per group, no total row)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row (one line per group, no total row)
    #[arg(long)]
    pub csv: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolsBy {
    Name,
    Session,
    Project,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = ToolsBy::Name)]
    pub by: ToolsBy,
    /// Only calls made on or after this day (YYYY-MM-DD, UTC)
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
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
    /// Only this kind of text; repeatable: user, assistant, thinking, tool_call, tool_result, bash, summary, compaction, branch_summary, custom, system, usage, context_edit, label, session_name, other
    #[arg(long, value_name = "ROLE")]
    pub role: Vec<String>,
    /// Only entries of this type; repeatable: message, compaction, branch_summary, custom, custom_message, usage, context_edit, or a type piidx does not know
    #[arg(long = "type", value_name = "TYPE")]
    pub entry_type: Vec<String>,
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

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repair: re-index differing files, rebuild the FTS index, rebuild a damaged database (the old file is kept as <db>.broken-<time>)
    #[arg(long)]
    pub fix: bool,
    /// Print the report as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Sessions root to rebuild from when the database cannot tell; repeatable
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// The line cap the index was built with (see `sync --max-line-bytes`)
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub max_line_bytes: usize,
    /// Seconds to wait for a running sync before giving up (exit code 3; only with --fix)
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub wait: f64,
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
