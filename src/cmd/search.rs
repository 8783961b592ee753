//! `piidx search`: ranked full-text search; exits 1 when nothing matches.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::PgArgs;
use super::{EXIT_PARTIAL, Global};
use piidx::query::QueryError;
use piidx::query::request::SearchRequest;
use piidx::query::search::{self, HeadStart, SearchError};
use piidx::render::{self, Format};
use piidx::store::Stop;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to search for and where (the same request serve and MCP take)
    #[command(flatten)]
    pub request: SearchRequest,
    /// Stop the search after this many seconds (0: no limit)
    #[arg(long, value_name = "SECS", default_value_t = search::SEARCH_BUDGET.as_secs_f64())]
    pub timeout: f64,
    /// Print a JSON array of hits (matches between « and »)
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
    /// With --pg the team store's word index is searched (bm25, as the index ranks); --raw takes a tsquery of its lexemes
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let stop = super::time_limit(args.timeout).map_or_else(Stop::never, Stop::after);
    let options = args.request.options(stop, "--")?;
    let format = Format::choose(args.json, args.csv);
    let term = &global.term;
    // The shards' readers open, and start scoring, while this thread opens
    // the index (the team store has none).
    let mut head = match args.pg.pg {
        None => HeadStart::open(&global.db, &options),
        Some(_) => HeadStart::default(),
    };
    let mut source = global.source(&args.pg)?;
    let mut out = super::stdout();
    // Only here is there a flag to give a search more time.
    let more_time = |err: QueryError| match err {
        QueryError::Search(SearchError::Timeout(_)) => {
            anyhow::Error::new(err).context("pass a larger --timeout (0: none) to let it run")
        }
        err => err.into(),
    };
    let found = if args.request.sessions {
        let sessions = source
            .search_sessions(head, &options, options.limit)
            .map_err(more_time)?;
        render::hits::write_sessions(&mut out, &sessions, format, term)?;
        sessions.len()
    } else {
        let hits = source.search(&mut head, &options).map_err(more_time)?;
        render::hits::write(&mut out, &hits, format, term)?;
        // See `source` below.
        std::mem::forget(head);
        hits.len()
    };
    out.flush()?;
    // The process ends next: closing the connections (freeing their page
    // caches and schemas, ending the shard readers' threads) only costs time,
    // ~0.4 ms of a search (docs/performance.md). They only read, so nothing
    // is left to write back; the operating system releases their locks and
    // maps at exit.
    std::mem::forget(source);
    Ok(if found == 0 {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
