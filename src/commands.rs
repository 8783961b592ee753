//! Glue between the clap types and the library: resolves defaults, runs the
//! command, prints its result, and chooses the exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use crate::cli::{
    Cli, Command, DoctorArgs, ExportArgs, SearchArgs, SessionsArgs, ShowArgs, SortArg, SqlArgs,
    SubagentsArgs, SyncArgs, ToolsArgs, TreeArgs, UsageArgs, UsageBy,
};
use piidx::output::{self, Format};
use piidx::store::{Index, Writer};
use piidx::sync::{SyncError, SyncOptions};
use piidx::{config, query, roots};

/// Exit codes (documented in README.md).
pub const EXIT_PARTIAL: u8 = 1;
pub const EXIT_FATAL: u8 = 2;
pub const EXIT_BUSY: u8 = 3;
pub const EXIT_INCOMPLETE: u8 = 4;

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
        Command::Subagents(args) => subagents(db, args),
        Command::Sessions(args) => sessions(db, args),
        Command::Show(args) => show(db, args),
        Command::Tree(args) => tree(db, args),
        Command::Export(args) => export(db, args),
        Command::Usage(args) => usage(db, args),
        Command::Tools(args) => tools(db, args),
        Command::Doctor(args) => doctor(db, args),
        Command::Roots(args) => roots_command(db, args),
    }
}

fn roots_command(db: PathBuf, args: crate::cli::RootsArgs) -> Result<ExitCode> {
    if let Some(path) = &args.forget {
        let path = config::absolute(path);
        let _lock = piidx::sync::acquire_lock(&db, Duration::from_secs(10))?;
        let store = Writer::open(&db)?;
        store.start_fts(None)?;
        store.begin()?;
        let known = store.forget_root(&path.to_string_lossy())?;
        store.commit()?;
        store.finish_fts()?;
        if !known {
            return Err(anyhow!(
                "{} is not a root of {}; see `piidx roots`",
                path.display(),
                db.display()
            ));
        }
        println!("forgot {} and its rows", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let store = Index::open(&db)?;
    let roots = store.root_infos()?;
    let mut out = buffered_stdout();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &roots)?;
        writeln!(out)?;
    } else {
        let rows = output::Rows {
            columns: ["root", "layout", "origin", "files", "sessions", "added"]
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            rows: roots
                .iter()
                .map(|root| {
                    vec![
                        root.path.clone().into(),
                        root.layout.name().into(),
                        root.origin.clone().into(),
                        root.files.into(),
                        root.sessions.into(),
                        root.added_at.clone().into(),
                    ]
                })
                .collect(),
        };
        output::print(&mut out, &rows, Format::Table)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn sync(db: PathBuf, args: SyncArgs) -> Result<ExitCode> {
    let explicit_roots = !args.root.is_empty();
    let roots = if explicit_roots {
        args.root
            .iter()
            .map(|root| roots::user_root(root))
            .collect()
    } else {
        roots::for_sync(&db, std::env::current_dir().ok())
    };
    if roots.is_empty() {
        return Err(anyhow!(
            "cannot find where Pi keeps sessions (no ~/.pi/agent/sessions, no sessionDir setting, no PI_CODING_AGENT_SESSION_DIR, no root synced before); pass --root DIR"
        ));
    }
    let options = SyncOptions {
        roots,
        explicit_roots,
        db,
        full: args.full,
        keep_deleted: args.keep_deleted,
        prune: args.prune,
        progress: !args.quiet && !args.json && std::io::stderr().is_terminal(),
        lock_wait: Duration::try_from_secs_f64(args.wait.max(0.0)).unwrap_or(Duration::ZERO),
        max_line_bytes: args.max_line_bytes.max(1024),
        fts_shards: args.fts_shards.map(usize::from),
    };
    let report = piidx::sync::run(&options)?;
    let mut out = std::io::stdout().lock();
    for warning in &report.warnings {
        eprintln!("piidx: warning: {warning}");
    }
    for path in &report.unreadable {
        eprintln!("piidx: cannot read {path}; what the index holds for it is kept as it was");
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
    Ok(if !report.unreadable.is_empty() {
        ExitCode::from(EXIT_INCOMPLETE)
    } else if partial {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

fn sql(db: PathBuf, args: SqlArgs) -> Result<ExitCode> {
    let store = Index::open(&db)?;
    let rows = query::sql::run(&store, &args.query)
        .with_context(|| format!("query failed on {}", db.display()))?;
    let format = Format::choose(args.json, args.csv);
    let mut out = buffered_stdout();
    output::print(&mut out, &rows, format)?;
    out.flush()?;
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

fn subagents(db: PathBuf, args: SubagentsArgs) -> Result<ExitCode> {
    let store = Index::open(&db)?;
    let query = query::subagents::SubagentsQuery {
        agent: args.agent,
        since: args.since,
        failed: args.failed,
        full_task: args.json,
    };
    let rows = query::subagents::run(&store, &query)
        .with_context(|| format!("listing subagent runs in {}", db.display()))?;
    let format = Format::choose(args.json, false);
    let mut out = buffered_stdout();
    output::print(&mut out, &rows, format)?;
    out.flush()?;
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
    let store = Index::open(&db)?;
    let report = usage::run(&store, &options)
        .with_context(|| format!("usage query failed on {}", db.display()))?;
    for warning in &report.warnings {
        eprintln!("piidx: warning: {warning}");
    }

    if let Some(warning) = usage::unpriced_warning(&report) {
        eprintln!("piidx: warning: {warning}");
    }
    let mut out = buffered_stdout();
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
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn tools(db: PathBuf, args: ToolsArgs) -> Result<ExitCode> {
    use piidx::query::tools::{self, ToolsBy};
    let by = match args.by {
        crate::cli::ToolsBy::Name => ToolsBy::Name,
        crate::cli::ToolsBy::Session => ToolsBy::Session,
        crate::cli::ToolsBy::Project => ToolsBy::Project,
    };
    let store = Index::open(&db)?;
    let stats = tools::run(&store, by, args.since.as_deref())
        .with_context(|| format!("tools query failed on {}", db.display()))?;
    let format = Format::choose(args.json, args.csv);
    let mut out = buffered_stdout();
    output::print(&mut out, &tools::to_rows(&stats), format)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn sessions(db: PathBuf, args: SessionsArgs) -> Result<ExitCode> {
    let store = Index::open(&db)?;
    let since_ms = match &args.since {
        None => None,
        Some(text) => Some(piidx::time::parse_date_ms(text).ok_or_else(|| {
            anyhow!("--since {text}: expected YYYY-MM-DD or an ISO-8601 timestamp")
        })?),
    };
    let filters = query::sessions::SessionsQuery {
        project: args.project,
        cwd: args.cwd,
        since_ms,
        limit: args.limit,
        all: args.all,
    };
    let list = query::sessions::list(&store, &filters)
        .with_context(|| format!("listing sessions from {}", db.display()))?;
    let mut out = buffered_stdout();
    if args.json {
        let values: Vec<serde_json::Value> = list.iter().map(|s| s.to_pi_json()).collect();
        serde_json::to_writer_pretty(&mut out, &values)?;
        writeln!(out)?;
    } else {
        output::print(&mut out, &query::sessions::table(&list), Format::Table)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn load_tree(db: &std::path::Path, session: &str) -> Result<query::tree::SessionTree> {
    let store = Index::open(db)?;
    Ok(store.in_snapshot(|store| {
        let found = query::tree::resolve(store, session)?;
        query::tree::SessionTree::load(store, found)
    })?)
}

fn show(db: PathBuf, args: ShowArgs) -> Result<ExitCode> {
    use query::show::{self as render, Style};
    let tree = load_tree(&db, &args.session)?;
    let options = render::Options {
        style: if args.markdown {
            Style::Markdown
        } else {
            Style::Text
        },
        full_system: args.system,
    };
    let text = if args.all {
        render::render_all(&tree, options)
    } else {
        let leaf = match &args.branch {
            Some(id) => Some(tree.find(id)?),
            None => tree.leaf(),
        };
        let path = leaf.map(|leaf| tree.path_to(leaf)).unwrap_or_default();
        if args.json {
            let mut text = serde_json::to_string_pretty(&render::path_json(&tree, &path))?;
            text.push('\n');
            text
        } else {
            render::render_context(&tree, &path, options)
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn tree(db: PathBuf, args: TreeArgs) -> Result<ExitCode> {
    let tree = load_tree(&db, &args.session)?;
    let text = query::tree::render_tree(&tree);
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn export(db: PathBuf, args: ExportArgs) -> Result<ExitCode> {
    let store = Index::open(&db)?;
    store.in_snapshot(|store| -> Result<()> {
        let found = query::tree::resolve(store, &args.session)?;
        match &args.output {
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let mut out = std::io::BufWriter::new(file);
                query::export::export(store, &found, &mut out)?;
                out.flush()
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                query::export::export(store, &found, &mut out)?;
                out.flush()?;
            }
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn search(db: PathBuf, args: SearchArgs) -> Result<ExitCode> {
    use piidx::query::scope::{self, Scope, When};
    use piidx::query::search::{HeadStart, MARK_CLOSE, MARK_OPEN, SearchOptions, Sort};
    use piidx::query::tz::Tz;
    let tz = Tz::choose(None)?;
    let now = scope::now_ms();
    let when = |date: Option<String>| date.map(|date| When::parse(&date, now, &tz)).transpose();
    let (since, until) = (when(args.since)?, when(args.until)?);
    let options = SearchOptions {
        query: args.query,
        scope: Scope {
            project: args.project,
            cwd: args
                .cwd
                .map(|cwd| config::absolute(&cwd).to_string_lossy().into_owned()),
            session: args.session,
            since,
            until,
            tz,
        },
        roles: args.role,
        entry_types: args.entry_type,
        tool: args.tool,
        model: args.model,
        limit: args.limit,
        sort: match args.sort {
            SortArg::Rank => Sort::Rank,
            SortArg::Recent => Sort::Recent,
        },
        raw: args.raw,
        substring: args.substring,
    };
    // The shards' readers open (and start scoring) while this thread opens
    // the main connection.
    let head_start = HeadStart::open(&db, &options);
    let store = Index::open(&db)?;
    let mut hits = query::search::search(&store, head_start, &options)?;
    let mut out = buffered_stdout();
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
        out.flush()?;
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
        if let Some(run) = &hit.run {
            let place = if run.child_session {
                format!(
                    "in the child session of subagent run #{} of {} ({}, {}) delegated by session {}",
                    run.position,
                    run.agent.as_deref().unwrap_or("?"),
                    run.mode.as_deref().unwrap_or("?"),
                    run.run_id.as_deref().unwrap_or("no run id"),
                    run.parent_session_id,
                )
            } else {
                format!(
                    "in subagent run #{} of {} ({}, {})",
                    run.position,
                    run.agent.as_deref().unwrap_or("?"),
                    run.mode.as_deref().unwrap_or("?"),
                    run.run_id.as_deref().unwrap_or("no run id"),
                )
            };
            writeln!(out, "{dim}  {place}{reset}")?;
        }
        let snippet = hit.snippet.replace(['\n', '\r', '\t'], " ");
        writeln!(out, "  {snippet}\n")?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Standard output, buffered: JSON is pretty-printed one line at a time,
/// and a locked stdout alone makes one `write` per line (379 for 20 search
/// hits, 9 through this buffer). Callers flush, so a failed write is seen.
fn buffered_stdout() -> std::io::BufWriter<std::io::StdoutLock<'static>> {
    std::io::BufWriter::new(std::io::stdout().lock())
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

/// True when the reader of stdout went away (`piidx … | head`): like other
/// CLIs, piidx then stops quietly. serde_json's writer wraps the IO error
/// in its own, whose `source()` skips it, so that one is asked directly.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let kind = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => Some(io.kind()),
            None => cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
