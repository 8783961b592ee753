//! `piidx tools`: tool calls per tool, session or project.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;

use super::Global;
use super::{ListArgs, PgArgs};
use piidx::query::scope::ScopeText;
use piidx::query::tools::{ToolsBy, ToolsQuery};
use piidx::render;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Name,
    Session,
    /// The session's cwd
    Project,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = By::Name)]
    pub by: By,
    /// Calls made in --since/--until by these sessions
    #[command(flatten)]
    pub scope: ScopeText,
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let query = ToolsQuery {
        by: match args.by {
            By::Name => ToolsBy::Name,
            By::Session => ToolsBy::Session,
            By::Project => ToolsBy::Project,
        },
        scope: super::scope(&args.scope)?,
        limit: args.list.limit,
    };
    let mut source = global.source(&args.pg)?;
    let stats = source
        .tools(&query)
        .with_context(|| format!("tools query failed on {}", global.place(&args.pg)))?;
    let mut out = super::stdout();
    render::usage::write_tools(&mut out, &stats, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
