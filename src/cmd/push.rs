//! `piidx push`: send the index's changes to a team store in PostgreSQL.

use std::process::ExitCode;

use anyhow::Result;

use super::Global;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The team store: a postgres:// URL (or a libpq key=value string). The schema is created or upgraded first
    #[arg(value_name = "URL")]
    pub url: String,
    /// Print the summary as one JSON object
    #[arg(long)]
    pub json: bool,
    /// No summary line
    #[arg(long, short)]
    pub quiet: bool,
    /// Seconds to wait for a running sync of this index before giving up (exit code 3)
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub wait: f64,
}

#[cfg(feature = "postgres")]
pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    use anyhow::Context;
    use piidx::store::Writer;
    use piidx::store::pg::{Pg, push};
    use std::io::Write;

    // The sync lock: the index does not change under the push.
    let _lock = piidx::sync::acquire_lock(&global.db, super::sync::wait(args.wait))?;
    if !global.db.exists() {
        return Err(piidx::store::StoreError::Missing {
            path: global.db.clone(),
        }
        .into());
    }
    let writer = Writer::open(&global.db)?;
    let mut pg = Pg::connect(&args.url)?;
    let report = push(&writer, &mut pg)
        .with_context(|| format!("pushing {} to {}", global.db.display(), pg.url))?;
    let mut out = super::stdout();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else if !args.quiet {
        piidx::render::misc::write_push(&mut out, &report)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(not(feature = "postgres"))]
pub fn run(_args: Args, _global: &Global) -> Result<ExitCode> {
    Err(super::no_postgres())
}
