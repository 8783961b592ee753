//! `piidx completions SHELL`: a completion script from the clap definitions.

use std::process::ExitCode;

use anyhow::Result;
use clap_complete::Shell;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `cli`: the whole command line's clap definition.
pub fn run(args: Args, cli: clap::Command) -> Result<ExitCode> {
    let mut command = cli;
    clap_complete::generate(args.shell, &mut command, "piidx", &mut super::stdout());
    Ok(ExitCode::SUCCESS)
}
