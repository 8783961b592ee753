//! `piidx secrets`: credentials the index holds, masked, to know what to rotate.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::ListArgs;
use super::{EXIT_PARTIAL, Global};
use piidx::query::scope::ScopeText;
use piidx::query::secrets;
use piidx::render::misc;
use piidx::secrets::{Detector, RULE_SOURCE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Entries of these sessions, written in --since/--until
    #[command(flatten)]
    pub scope: ScopeText,
    #[command(flatten)]
    pub list: ListArgs,
    /// Print the detection rules and where they come from, and exit
    #[arg(long)]
    pub rules: bool,
    /// Where this value was redacted (`sync --redact` keeps a keyed hash of each secret)
    #[arg(long, value_name = "VALUE")]
    pub find: Option<String>,
}

/// Exit 0 when something was found, 1 when nothing was (as `search`).
pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let mut out = super::stdout();
    if args.rules {
        writeln!(out, "# {RULE_SOURCE}")?;
        for id in Detector::rule_ids() {
            writeln!(out, "{id}")?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let scope = super::scope(&args.scope)?;
    let index = global.index()?;
    let found = match &args.find {
        Some(value) => secrets::find(&index, value),
        None => secrets::list(&index, &scope, args.list.limit),
    }
    .with_context(|| format!("looking for secrets in {}", global.db.display()))?;
    misc::write_secrets(&mut out, &found, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(if found.is_empty() {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
