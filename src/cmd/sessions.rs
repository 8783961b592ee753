//! `piidx sessions`: the sessions Pi's `/resume` lists, newest first.

use std::process::ExitCode;

use anyhow::Result;

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
    let list = global.ask(&args.pg, "listing sessions", |source| {
        source.sessions(&query)
    })?;
    super::print(|out| render::sessions::write(out, &list, args.list.format(), &global.term))
}
