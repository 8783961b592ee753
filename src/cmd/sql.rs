//! `piidx sql`: one read-only statement, rows printed as they come.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use piidx::query::sql::{self, SqlError};
use piidx::render::{Format, sql::Printer};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The statement, e.g. "SELECT session_id, name FROM sessions"
    pub query: String,
    /// Print a JSON array of objects
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let index = global.index()?;
    let mut out = super::stdout();
    let mut printer = Printer::new(&mut out, Format::choose(args.json, args.csv), global.term);
    match sql::run(&index, &args.query, &mut printer) {
        Ok(()) => {}
        // Not the query's fault: the output went away or failed.
        Err(SqlError::Output(err)) => return Err(err.into()),
        Err(err) => {
            return Err(err).with_context(|| format!("query failed on {}", global.db.display()));
        }
    }
    Ok(ExitCode::SUCCESS)
}
