//! `piidx sql`: one read-only statement, rows printed as they come.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use piidx::query::source::{Source, Team};
use piidx::query::sql::Limits;
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
    /// Stop the statement after this many seconds in SQLite (0: no limit)
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Stop the statement when SQLite needs more than this much memory, in MiB (0: no limit)
    #[arg(long, value_name = "MIB", default_value_t = 2048)]
    pub max_memory: u64,
    /// Run the statement on the team store at this postgres:// URL instead, in a read-only transaction (docs/postgres.md)
    #[arg(long, value_name = "URL")]
    pub pg: Option<String>,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let limits = Limits {
        timeout: super::time_limit(args.timeout),
        memory: (args.max_memory > 0).then(|| args.max_memory.saturating_mul(1 << 20)),
    };
    let mut out = super::stdout();
    let mut printer = Printer::new(&mut out, Format::choose(args.json, args.csv), global.term);
    let team = args.pg.as_ref().map(|url| Team {
        url: url.clone(),
        machine: None,
    });
    match Source::sql(&global.db, team.as_ref(), &args.query, limits, &mut printer) {
        Ok(()) => {}
        Err(err) => match err.into_output() {
            // Not the query's fault: the output went away or failed.
            Ok(output) => return Err(output.into()),
            Err(err) => {
                let place = match &args.pg {
                    Some(_) => "the team store".to_owned(),
                    None => global.db.display().to_string(),
                };
                return Err(err).with_context(|| format!("query failed on {place}"));
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
