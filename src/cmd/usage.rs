//! `piidx usage`: tokens and cost grouped by time, model, provider, project
//! or session.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::Global;
use super::{FormatArgs, PgArgs};
use piidx::query::requests::UsageRequest;
use piidx::query::usage::{self, UsageOptions};
use piidx::render::{self, misc};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub request: UsageRequest,
    /// JSON file of prices per million tokens used for unpriced usage: {"model-id": {"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75}}
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// No bar chart column
    #[arg(long)]
    pub no_chart: bool,
    /// --json and --csv print one row per group, no total row
    #[command(flatten)]
    pub list: FormatArgs,
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let options = UsageOptions {
        prices: args.prices.as_deref().map(usage::load_prices).transpose()?,
        ..args.request.options("--")?
    };
    let by = options.by;
    let report = global.ask(&args.pg, "summing usage", |source| source.usage(&options))?;
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
