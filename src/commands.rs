//! Glue between the clap types and the library: resolves defaults, runs the
//! command, prints its result, and chooses the exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use crate::cli::{Cli, Command, DoctorArgs, SqlArgs, SyncArgs};
use piidx::output::{self, Format};
use piidx::store::Store;
use piidx::sync::{SyncError, SyncOptions};
use piidx::{config, query};

/// Exit codes (documented in README.md).
pub const EXIT_PARTIAL: u8 = 1;
pub const EXIT_FATAL: u8 = 2;
pub const EXIT_BUSY: u8 = 3;

pub fn run(cli: Cli) -> Result<ExitCode> {
    let db = match cli.db {
        Some(db) => db,
        None => config::default_db().ok_or_else(|| {
            anyhow!("cannot find a home directory for the database; pass --db PATH")
        })?,
    };
    let db = config::absolute(&db);
    match cli.command {
        Command::Sync(args) => sync(db, args),
        Command::Sql(args) => sql(db, args),
        Command::Doctor(args) => doctor(db, args),
    }
}

fn sync(db: PathBuf, args: SyncArgs) -> Result<ExitCode> {
    let roots = if args.root.is_empty() {
        vec![
            config::default_session_root()
                .ok_or_else(|| anyhow!("cannot find the Pi sessions directory; pass --root DIR"))?,
        ]
    } else {
        args.root
    };
    let options = SyncOptions {
        roots: roots.iter().map(|root| config::absolute(root)).collect(),
        db,
        full: args.full,
        keep_deleted: args.keep_deleted,
        prune: args.prune,
        progress: !args.quiet && !args.json && std::io::stderr().is_terminal(),
        lock_wait: Duration::try_from_secs_f64(args.wait.max(0.0)).unwrap_or(Duration::ZERO),
        max_line_bytes: args.max_line_bytes.max(1024),
    };
    let report = piidx::sync::run(&options)?;
    let mut out = std::io::stdout().lock();
    for warning in &report.warnings {
        eprintln!("piidx: warning: {warning}");
    }
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else if !args.quiet {
        writeln!(
            out,
            "{} files seen: {} indexed, {} unchanged, {} removed, {} skipped, {} pending; {} entries added, {} parse errors, {:.1} MB read in {:.2} s",
            report.files_seen,
            report.files_indexed,
            report.files_unchanged,
            report.files_removed,
            report.files_skipped,
            report.files_pending,
            report.entries_added,
            report.parse_errors,
            report.bytes_read as f64 / 1e6,
            report.elapsed_ms as f64 / 1000.0,
        )?;
        if report.parse_errors > 0 || report.files_skipped > 0 {
            writeln!(
                out,
                "see: piidx sql \"SELECT * FROM v_parse_errors\" and \"SELECT path, skip_reason FROM files WHERE status = 'skipped'\""
            )?;
        }
    }
    let partial =
        report.parse_errors > 0 || report.files_skipped > 0 || !report.warnings.is_empty();
    Ok(if partial {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

fn sql(db: PathBuf, args: SqlArgs) -> Result<ExitCode> {
    let store = Store::open_read_only(&db)?;
    let rows = query::sql::run(&store, &args.query)
        .with_context(|| format!("query failed on {}", db.display()))?;
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        Format::Table
    };
    let mut out = std::io::stdout().lock();
    output::print(&mut out, &rows, format)?;
    Ok(ExitCode::SUCCESS)
}

fn doctor(db: PathBuf, args: DoctorArgs) -> Result<ExitCode> {
    use piidx::doctor::{self, DoctorOptions};
    let options = DoctorOptions {
        db,
        fix: args.fix,
        roots: args
            .root
            .iter()
            .map(|root| config::absolute(root))
            .collect(),
        max_line_bytes: args.max_line_bytes.max(1024),
        lock_wait: Duration::try_from_secs_f64(args.wait.max(0.0)).unwrap_or(Duration::ZERO),
    };
    let report = doctor::run(&options)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let findings = &report.findings;
        writeln!(
            out,
            "{}: schema {}, {} files checked",
            report.db,
            findings
                .schema_version
                .map_or_else(|| "?".to_owned(), |v| v.to_string()),
            findings.files_checked
        )?;
        for problem in &report.problems {
            writeln!(out, "problem: {problem}")?;
        }
        for fixed in &report.fixed {
            writeln!(out, "fixed: {fixed}")?;
        }
        if args.fix {
            for problem in &report.remaining {
                writeln!(out, "still wrong: {problem}")?;
            }
        }
        if report.problems.is_empty() {
            writeln!(out, "healthy")?;
        } else if !args.fix {
            writeln!(out, "run `piidx doctor --fix` to repair")?;
        }
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else if args.fix && !report.remaining.is_empty() {
        ExitCode::from(EXIT_FATAL)
    } else {
        ExitCode::from(EXIT_PARTIAL)
    })
}

pub fn exit_code(err: &anyhow::Error) -> u8 {
    match err.downcast_ref::<SyncError>() {
        Some(SyncError::Busy { .. }) => EXIT_BUSY,
        _ => match err.downcast_ref::<piidx::doctor::DoctorError>() {
            Some(piidx::doctor::DoctorError::Sync(SyncError::Busy { .. })) => EXIT_BUSY,
            _ => EXIT_FATAL,
        },
    }
}

/// The error and its causes on one line, leaving out a cause whose text the
/// message already contains (our messages embed the I/O or SQLite error).
pub fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
