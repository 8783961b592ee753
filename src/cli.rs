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
    /// Check the index (SQLite, FTS, schema, rows vs. files) and with --fix repair it
    Doctor(DoctorArgs),
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
