//! `piidx usage`: tokens and cost grouped by time, model, provider, project
//! or session.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;

use super::Global;
use super::{ListArgs, PgArgs};
use piidx::query::scope::ScopeText;
use piidx::query::usage::{self, GroupBy, UsageOptions};
use piidx::render::{self, misc};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Day,
    /// ISO weeks (Monday to Sunday), keyed `YYYY-Www`
    Week,
    Month,
    Model,
    Provider,
    /// The session's cwd
    Project,
    Session,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Group rows by
    #[arg(long, value_enum, default_value_t = By::Day)]
    pub by: By,
    /// Only models whose id contains M
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// JSON file of prices per million tokens used for unpriced usage: {"model-id": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}}
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// No bar chart column
    #[arg(long)]
    pub no_chart: bool,
    /// Usage recorded in --since/--until by these sessions
    #[command(flatten)]
    pub scope: ScopeText,
    /// --json and --csv print one row per group, no total row
    #[command(flatten)]
    pub list: ListArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let by = match args.by {
        By::Day => GroupBy::Day,
        By::Week => GroupBy::Week,
        By::Month => GroupBy::Month,
        By::Model => GroupBy::Model,
        By::Provider => GroupBy::Provider,
        By::Project => GroupBy::Project,
        By::Session => GroupBy::Session,
    };
    let options = UsageOptions {
        by,
        scope: super::scope(&args.scope)?,
        model: args.model,
        prices: args.prices.as_deref().map(usage::load_prices).transpose()?,
        limit: args.list.limit,
    };
    let mut source = global.source(&args.pg)?;
    let report = source
        .usage(&options)
        .with_context(|| format!("usage query failed on {}", global.place(&args.pg)))?;
    for warning in &report.warnings {
        misc::warn(warning, &global.term);
    }
    if let Some(warning) = render::usage::unpriced_warning(&report) {
        misc::warn(&warning, &global.term);
    }
    let term = &global.term;
    let chart = by.is_time() && !args.no_chart && term.is_terminal;
    let mut out = super::stdout();
    render::usage::write(&mut out, &report, args.list.format(), chart, term)?;
    if args.list.format() == render::Format::Table && by.is_time() && !options.scope.tz.is_utc() {
        writeln!(out, "(days in {})", options.scope.tz.name())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
