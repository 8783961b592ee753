//! `piidx subagents`: delegated runs, newest first.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use super::{FormatArgs, PgArgs};
use piidx::query::requests::SubagentsRequest;
use piidx::render::misc;

// `--agent` here is the subagent's name (as before); the coding agent of the
// sessions is `--coding-agent`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("coding_agent", |arg| arg.long("coding-agent")))]
pub struct Args {
    #[command(flatten)]
    pub request: SubagentsRequest,
    #[command(flatten)]
    pub list: FormatArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = args.request.query("--")?;
    let mut source = global.source(&args.pg)?;
    let runs = source
        .subagents(&query)
        .with_context(|| format!("listing subagent runs in {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    misc::write_subagents(&mut out, &runs, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
