//! Glue between the clap types and the library: resolves defaults, runs the
//! command, prints its result, and chooses the exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use crate::cli::{Cli, Command, SqlArgs, SyncArgs, ToolsArgs, UsageArgs, UsageBy};
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
        Command::Usage(args) => usage(db, args),
        Command::Tools(args) => tools(db, args),
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

fn usage(db: PathBuf, args: UsageArgs) -> Result<ExitCode> {
    use piidx::query::usage::{self, GroupBy, UsageOptions};
    let by = match args.by {
        UsageBy::Day => GroupBy::Day,
        UsageBy::Week => GroupBy::Week,
        UsageBy::Month => GroupBy::Month,
        UsageBy::Model => GroupBy::Model,
        UsageBy::Provider => GroupBy::Provider,
        UsageBy::Project => GroupBy::Project,
        UsageBy::Session => GroupBy::Session,
    };
    // --tz must be valid; $TZ is only a default and falls back to UTC.
    let tz = match &args.tz {
        Some(name) => query::tz::Tz::parse(name)?,
        None => std::env::var("TZ")
            .ok()
            .and_then(|tz| query::tz::Tz::parse(tz.trim_start_matches(':')).ok())
            .unwrap_or(query::tz::Tz::Utc),
    };
    let prices = args.prices.as_deref().map(usage::load_prices).transpose()?;
    let has_prices = prices.is_some();
    let options = UsageOptions {
        by,
        since: args.since,
        until: args.until,
        project: args.project,
        model: args.model,
        tz,
        prices,
    };
    let store = Store::open_read_only(&db)?;
    let report = usage::run(&store, &options)
        .with_context(|| format!("usage query failed on {}", db.display()))?;
    for warning in &report.warnings {
        eprintln!("piidx: warning: {warning}");
    }
    if let Some(warning) = usage::unpriced_warning(&report) {
        eprintln!("piidx: warning: {warning}");
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        output::print(&mut out, &usage::to_rows(&report, has_prices), Format::Json)?;
    } else if args.csv {
        output::print(&mut out, &usage::to_rows(&report, has_prices), Format::Csv)?;
    } else {
        let chart = by.is_time() && !args.no_chart && std::io::stdout().is_terminal();
        let table = usage::to_table(&report, has_prices, chart);
        output::print(&mut out, &table, Format::Table)?;
        if options.by.is_time() && options.tz != query::tz::Tz::Utc {
            writeln!(out, "(days in {})", options.tz.name())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn tools(db: PathBuf, args: ToolsArgs) -> Result<ExitCode> {
    use piidx::query::tools::{self, ToolsBy};
    let by = match args.by {
        crate::cli::ToolsBy::Name => ToolsBy::Name,
        crate::cli::ToolsBy::Session => ToolsBy::Session,
        crate::cli::ToolsBy::Project => ToolsBy::Project,
    };
    let store = Store::open_read_only(&db)?;
    let stats = tools::run(&store, by, args.since.as_deref())
        .with_context(|| format!("tools query failed on {}", db.display()))?;
    let format = if args.json {
        Format::Json
    } else if args.csv {
        Format::Csv
    } else {
        Format::Table
    };
    let mut out = std::io::stdout().lock();
    output::print(&mut out, &tools::to_rows(&stats), format)?;
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
