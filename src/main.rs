//! The `piidx` binary: parse the arguments, run the subcommand (`cmd/`),
//! print an error once with its causes, and exit with the command's code
//! (see README "Exit codes").

mod cli;
mod cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Before anything is created: every file piidx writes is the user's alone.
    piidx::private::owner_only();
    let cli = cli::Cli::parse();
    match cli.run() {
        Ok(code) => code,
        Err(err) if cmd::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("piidx: {}", cmd::message(&err));
            ExitCode::from(cmd::exit_code(&err))
        }
    }
}
