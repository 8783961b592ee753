//! `piidx subagents`: delegated runs, newest first.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use super::{ListArgs, PgArgs};
use piidx::query::scope::ScopeText;
use piidx::query::subagents::SubagentsQuery;
use piidx::render::misc;

// `--agent` here is the subagent's name (as before); the coding agent of the
// sessions is `--coding-agent`.
#[derive(Debug, clap::Args)]
#[command(mut_arg("coding_agent", |arg| arg.long("coding-agent")))]
pub struct Args {
    /// Only runs of this agent (e.g. worker, reviewer, scout)
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Only failed runs (non-zero exit code, or an error stop reason)
    #[arg(long)]
    pub failed: bool,
    /// Runs delegated by these sessions, started in --since/--until
    #[command(flatten)]
    pub scope: ScopeText,
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = SubagentsQuery {
        scope: super::scope(&args.scope)?,
        agent: args.agent,
        failed: args.failed,
        limit: args.list.limit,
    };
    let mut source = global.source(&args.pg)?;
    let runs = source
        .subagents(&query)
        .with_context(|| format!("listing subagent runs in {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    misc::write_subagents(&mut out, &runs, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
