//! `piidx redact`: turn secret redaction on for an existing index, which
//! re-reads every file with it (the same as `piidx sync --redact`).

use std::process::ExitCode;

use anyhow::Result;

use super::Global;

#[derive(Debug, clap::Args)]
pub struct RedactArgs {
    #[command(flatten)]
    pub sync: super::sync::Args,
}

pub fn run(mut args: RedactArgs, global: &Global) -> Result<ExitCode> {
    args.sync.redact = true;
    super::sync::run(args.sync, global)
}
