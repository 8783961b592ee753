//! `piidx sessions`: the sessions Pi's `/resume` lists, newest first.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use crate::cli::{ListArgs, PgArgs, ScopeArgs};
use piidx::query::sessions::{self, SessionsQuery};
use piidx::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Sessions whose modified time is in --since/--until
    #[command(flatten)]
    pub scope: ScopeArgs,
    /// Also list files Pi's listAll() does not see (nested child sessions, flat root files); marked * in the table
    #[arg(long)]
    pub all: bool,
    /// --json prints Pi's SessionInfo objects (path, id, cwd, name, parentSessionPath, created, modified, messageCount, firstMessage)
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = SessionsQuery {
        scope: super::scope(&args.scope)?,
        limit: args.list.limit,
        all: args.all,
    };
    #[cfg(feature = "postgres")]
    let store = super::team_store(&args.pg, &args.scope)?;
    #[cfg(not(feature = "postgres"))]
    let store: Option<std::convert::Infallible> = super::refuse_pg(&args.pg).map(|()| None)?;
    let list = match store {
        #[cfg(feature = "postgres")]
        Some(mut pg) => {
            piidx::query::pg::sessions::list(&mut pg, &query, args.pg.machine.as_deref())?
        }
        #[cfg(not(feature = "postgres"))]
        Some(never) => match never {},
        None => {
            let index = global.index()?;
            sessions::list(&index, &query)
                .with_context(|| format!("listing sessions from {}", global.db.display()))?
        }
    };
    let mut out = super::stdout();
    render::sessions::write(&mut out, &list, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
