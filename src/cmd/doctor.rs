//! `piidx doctor`: check the index against the files, and repair it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::{EXIT_FATAL, EXIT_PARTIAL, Global};
use piidx::config;
use piidx::doctor::{self, DoctorOptions};
use piidx::render::misc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Repair: re-index differing files, rebuild the FTS index, rebuild a damaged database (the old file is kept as <db>.broken-<time>)
    #[arg(long)]
    pub fix: bool,
    /// Print the report as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Sessions root to rebuild from when the database cannot tell; repeatable
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// The line cap the index was built with (see `sync --max-line-bytes`)
    #[arg(long, value_name = "BYTES", default_value_t = 256 << 20)]
    pub max_line_bytes: usize,
    /// Check that TEXT (a secret, say) is nowhere in the index's files, as given or lowercased; repeatable
    #[arg(long, value_name = "TEXT")]
    pub absent: Vec<String>,
    /// Seconds to wait for a running sync before giving up (exit code 3; only with --fix)
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub wait: f64,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let options = DoctorOptions {
        db: global.db.clone(),
        fix: args.fix,
        roots: args
            .root
            .iter()
            .map(|root| config::absolute(root))
            .collect(),
        max_line_bytes: args.max_line_bytes.max(1024),
        lock_wait: super::sync::wait(args.wait),
        absent: args.absent,
    };
    let report = doctor::run(&options)?;
    let mut out = super::stdout();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        misc::write_doctor(&mut out, &report, args.fix, &global.term)?;
    }
    out.flush()?;
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else if args.fix && !report.remaining.is_empty() {
        ExitCode::from(EXIT_FATAL)
    } else {
        ExitCode::from(EXIT_PARTIAL)
    })
}
