//! Glue between the clap types and the library: resolves defaults, runs the
//! command, prints its result, and chooses the exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use crate::cli::{Cli, Command, SearchArgs, SortArg, SqlArgs, SyncArgs};
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
        Command::Search(args) => search(db, args),
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

fn search(db: PathBuf, args: SearchArgs) -> Result<ExitCode> {
    use piidx::query::search::{MARK_CLOSE, MARK_OPEN, SearchOptions, Sort};
    let store = Store::open_read_only(&db)?;
    let options = SearchOptions {
        query: args.query,
        project: args.project,
        cwd: args
            .cwd
            .map(|cwd| config::absolute(&cwd).to_string_lossy().into_owned()),
        session: args.session,
        roles: args.role,
        tool: args.tool,
        model: args.model,
        since: args.since,
        until: args.until,
        limit: args.limit,
        sort: match args.sort {
            SortArg::Rank => Sort::Rank,
            SortArg::Recent => Sort::Recent,
        },
        raw: args.raw,
        substring: args.substring,
    };
    let mut hits = query::search::search(&store, &options)?;
    let mut out = std::io::stdout().lock();
    let colour = !args.json && std::io::stdout().is_terminal();
    let (open, close) = if colour {
        ("\x1b[1;31m", "\x1b[0m")
    } else {
        ("«", "»")
    };
    for hit in &mut hits {
        hit.snippet = hit
            .snippet
            .replace(MARK_OPEN, open)
            .replace(MARK_CLOSE, close);
    }
    if args.json {
        serde_json::to_writer_pretty(&mut out, &hits)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if hits.is_empty() {
        eprintln!("piidx: no hits");
        return Ok(ExitCode::SUCCESS);
    }
    let (dim, reset) = if colour {
        ("\x1b[2m", "\x1b[0m")
    } else {
        ("", "")
    };
    for hit in &hits {
        let title = hit
            .session_name
            .as_deref()
            .or(hit.first_message.as_deref())
            .unwrap_or("");
        let title = output::shorten(&title.replace('\n', " "), 60);
        let tool = hit
            .tool_name
            .as_deref()
            .map(|tool| format!(" [{tool}]"))
            .unwrap_or_default();
        writeln!(
            out,
            "{}  {}{tool}  {}  {}  {}",
            hit.timestamp.as_deref().unwrap_or("-"),
            hit.role,
            hit.session_id,
            hit.entry_id,
            title
        )?;
        writeln!(
            out,
            "{dim}  {} (line {}) · {}{reset}",
            hit.session_path, hit.line_no, hit.cwd
        )?;
        let snippet = hit.snippet.replace(['\n', '\r', '\t'], " ");
        writeln!(out, "  {snippet}\n")?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn exit_code(err: &anyhow::Error) -> u8 {
    match err.downcast_ref::<SyncError>() {
        Some(SyncError::Busy { .. }) => EXIT_BUSY,
        _ => EXIT_FATAL,
    }
}

pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
