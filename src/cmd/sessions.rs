//! `piidx sessions`: the sessions Pi's `/resume` lists, newest first.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use super::{FormatArgs, PgArgs};
use piidx::query::requests::SessionsRequest;
use piidx::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub request: SessionsRequest,
    /// --json prints Pi's SessionInfo objects (path, id, cwd, name, parentSessionPath, created, modified, messageCount, firstMessage)
    #[command(flatten)]
    pub list: FormatArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = args.request.query("--")?;
    let mut source = global.source(&args.pg)?;
    let list = source
        .sessions(&query)
        .with_context(|| format!("listing sessions from {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    render::sessions::write(&mut out, &list, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
