//! `piidx sessions`: the sessions Pi's `/resume` lists, newest first.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use super::{ListArgs, PgArgs};
use piidx::query::scope::ScopeText;
use piidx::query::sessions::SessionsQuery;
use piidx::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Sessions whose modified time is in --since/--until
    #[command(flatten)]
    pub scope: ScopeText,
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
    let mut source = global.source(&args.pg)?;
    let list = source
        .sessions(&query)
        .with_context(|| format!("listing sessions from {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    render::sessions::write(&mut out, &list, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
