//! `piidx tools`: tool calls per tool, session or project.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

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
    let mut source = global.source(&args.pg)?;
    let stats = source
        .tools(&query)
        .with_context(|| format!("tools query failed on {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    render::usage::write_tools(&mut out, &stats, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
