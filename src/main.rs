//! The `piidx` binary: parse arguments, call the library, map the outcome to
//! an exit code (see README "Exit codes").

mod cli;
mod commands;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(err) if commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("piidx: {}", commands::message(&err));
            ExitCode::from(commands::exit_code(&err))
        }
    }
}
