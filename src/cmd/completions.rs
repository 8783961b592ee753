//! `piidx completions SHELL`: a completion script from the clap definitions.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "piidx", &mut super::stdout());
    Ok(ExitCode::SUCCESS)
}
