//! `piidx mcp`: serve the index to an MCP client over stdin/stdout until
//! the client closes stdin. Nothing else may reach stdout: it carries the
//! protocol.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use super::PgArgs;
use piidx::mcp::{Options, Server, page};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bytes of JSON per tool answer (a call may ask for another size with max_bytes); the rest comes with a cursor
    #[arg(long, value_name = "BYTES", default_value_t = page::DEFAULT_BUDGET as u64,
          value_parser = clap::value_parser!(u64).range(page::MIN_BUDGET as u64..=page::MAX_BUDGET as u64))]
    pub max_bytes: u64,
    /// With --pg the tools answer from the team store (get_session and get_entry need the index)
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let mut server = Server::new(Options {
        db: global.db.clone(),
        team: args.pg.team(),
        budget: usize::try_from(args.max_bytes).unwrap_or(page::MAX_BUDGET),
    });
    let mut input = std::io::BufReader::new(std::io::stdin());
    let mut output = std::io::stdout().lock();
    match server.serve(&mut input, &mut output) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // The client went away while an answer was written.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err).context("serving MCP over stdin/stdout"),
    }
}
