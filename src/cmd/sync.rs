//! `piidx sync`: index new and changed session files.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};

use super::{EXIT_INCOMPLETE, EXIT_PARTIAL, Global};
use piidx::render::misc;
use piidx::roots;
use piidx::sync::SyncOptions;

#[derive(Debug, clap::Args)]
pub struct Args {
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
    /// Replace every secret (API keys, tokens, private keys: `piidx secrets --rules`) with [REDACTED:<kind>] before it is stored or indexed. The index remembers it; turning it on re-reads every file
    #[arg(long)]
    pub redact: bool,
    /// Machine label: with --root, the roots hold a copy of machine NAME's sessions (its label in a team store, `piidx push`); without --root, NAME becomes this index's own label [default: the host name]
    #[arg(long, value_name = "NAME")]
    pub machine: Option<String>,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let explicit_roots = !args.root.is_empty();
    let roots = roots_to_sync(&args.root, global)?;
    let options = SyncOptions {
        roots,
        explicit_roots,
        db: global.db.clone(),
        full: args.full,
        keep_deleted: args.keep_deleted,
        prune: args.prune,
        progress: !args.quiet && !args.json && std::io::stderr().is_terminal(),
        lock_wait: wait(args.wait),
        max_line_bytes: args.max_line_bytes.max(1024),
        fts_shards: args.fts_shards.map(usize::from),
        redact: args.redact,
        machine: args.machine,
    };
    let report = piidx::sync::run(&options)?;
    for warning in &report.warnings {
        misc::warn(warning, &global.term);
    }
    for path in &report.unreadable {
        misc::warn(
            &format!("cannot read {path}; what the index holds for it is kept as it was"),
            &global.term,
        );
    }
    for group in piidx::sync::skip_groups(&report.skipped) {
        misc::warn(&misc::skip_line(&group), &global.term);
    }
    let mut out = super::stdout();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else if !args.quiet {
        misc::write_sync(&mut out, &report, &global.term)?;
    }
    out.flush()?;
    let partial = report.parse_errors > 0
        || report.files_skipped > 0
        || report.warnings.len() > report.missing_outside;
    Ok(if !report.unreadable.is_empty() {
        ExitCode::from(EXIT_INCOMPLETE)
    } else if partial {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// The roots named by `--root`, else every root synced before and wherever
/// Pi keeps sessions (`sync` and `watch`).
pub fn roots_to_sync(named: &[PathBuf], global: &Global) -> Result<Vec<roots::Root>> {
    let roots = if named.is_empty() {
        roots::for_sync(
            piidx::store::remembered(&global.db),
            std::env::current_dir().ok(),
        )
    } else {
        named.iter().map(|root| roots::user_root(root)).collect()
    };
    if roots.is_empty() {
        return Err(anyhow!(
            "cannot find where Pi keeps sessions (no ~/.pi/agent/sessions, no sessionDir setting, no PI_CODING_AGENT_SESSION_DIR, no root synced before); pass --root DIR"
        ));
    }
    Ok(roots)
}

/// `--wait` seconds as a duration (negative or absurd values: no wait).
pub fn wait(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::ZERO)
}
