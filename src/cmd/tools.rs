//! `piidx tools`: tool calls per tool, session or project.

use std::process::ExitCode;

use anyhow::Result;

use super::Global;
use super::{FormatArgs, PgArgs};
use piidx::query::requests::ToolsRequest;
use piidx::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub request: ToolsRequest,
    #[command(flatten)]
    pub list: FormatArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = args.request.query("--")?;
    let stats = global.ask(&args.pg, "asking for tool calls", |source| {
        source.tools(&query)
    })?;
    super::print(|out| render::usage::write_tools(out, &stats, args.list.format(), &global.term))
}
