//! `piidx subagents`: delegated runs, newest first.

use std::process::ExitCode;

use anyhow::Result;

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
    let runs = global.ask(&args.pg, "listing subagent runs", |source| {
        source.subagents(&query)
    })?;
    super::print(|out| misc::write_subagents(out, &runs, args.list.format(), &global.term))
}
