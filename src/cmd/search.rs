//! `piidx search`: ranked full-text search; exits 1 when nothing matches.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;

use super::{EXIT_PARTIAL, Global};
use crate::cli::{PgArgs, ScopeArgs};
use piidx::query::search::sessions::search_sessions;
use piidx::query::search::{self, HeadStart, SearchError, SearchOptions, Sort};
use piidx::render::{self, Format};
use piidx::store::Stop;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// Best matches first
    Rank,
    /// Newest first
    Recent,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to find, e.g. `SessionManager.listAll`, `"exact phrase"`, `pars* OR lexer`
    pub query: String,
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
    /// Entries of these sessions, written in --since/--until
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Number of hits (with -l: of sessions); 0 finds nothing
    #[arg(long, short = 'n', value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Print one line per session with hits (best first) instead of the hits
    #[arg(long = "sessions", short = 'l')]
    pub sessions: bool,
    /// Best matches first, or newest first
    #[arg(long, value_enum, default_value_t = SortBy::Rank)]
    pub sort: SortBy,
    /// Pass QUERY to SQLite FTS5 unchanged (FTS5 query syntax)
    #[arg(long, conflicts_with = "substring")]
    pub raw: bool,
    /// Match QUERY's terms as substrings anywhere in the text (slow: scans text unless it is CJK)
    #[arg(long)]
    pub substring: bool,
    /// Stop the search after this many seconds (0: no limit)
    #[arg(long, value_name = "SECS", default_value_t = search::SEARCH_BUDGET.as_secs_f64())]
    pub timeout: f64,
    /// Print a JSON array of hits (matches between « and »)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
    /// With --pg the team store's user and assistant messages are searched (ts_rank_cd, ts_headline); --raw passes a PostgreSQL tsquery
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let options = SearchOptions {
        query: args.query,
        scope: args.scope.scope()?,
        roles: args.role,
        entry_types: args.entry_type,
        tool: args.tool,
        model: args.model,
        limit: args.limit,
        sort: match args.sort {
            SortBy::Rank => Sort::Rank,
            SortBy::Recent => Sort::Recent,
        },
        raw: args.raw,
        substring: args.substring,
        stop: super::time_limit(args.timeout).map_or_else(Stop::never, Stop::after),
    };
    let format = Format::choose(args.json, args.csv);
    let term = &global.term;
    #[cfg(feature = "postgres")]
    if let Some(mut pg) = super::team_store(&args.pg, &args.scope)? {
        if args.sessions {
            anyhow::bail!("--sessions (-l) is not available with --pg; search for hits");
        }
        let hits = piidx::query::pg::search::search(&mut pg, &options, args.pg.machine.as_deref())?;
        let mut out = super::stdout();
        render::hits::write(&mut out, &hits, format, term)?;
        out.flush()?;
        return Ok(if hits.is_empty() {
            ExitCode::from(EXIT_PARTIAL)
        } else {
            ExitCode::SUCCESS
        });
    }
    #[cfg(not(feature = "postgres"))]
    super::refuse_pg(&args.pg)?;
    // The shards' readers open, and start scoring, while this thread opens
    // the index.
    let head = HeadStart::open(&global.db, &options);
    let index = global.index()?;
    let mut out = super::stdout();
    // Only here is there a flag to give a search more time.
    let more_time = |err: SearchError| match err {
        SearchError::Timeout(_) => {
            anyhow::Error::new(err).context("pass a larger --timeout (0: none) to let it run")
        }
        err => err.into(),
    };
    let found = if args.sessions {
        let sessions = search_sessions(&index, head, &options, args.limit).map_err(more_time)?;
        render::hits::write_sessions(&mut out, &sessions, format, term)?;
        sessions.len()
    } else {
        let hits = if args.limit == 0 {
            Vec::new()
        } else {
            search::search(&index, head, &options).map_err(more_time)?
        };
        render::hits::write(&mut out, &hits, format, term)?;
        hits.len()
    };
    out.flush()?;
    Ok(if found == 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
