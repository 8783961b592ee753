//! `piidx export`: a session file rebuilt from the index alone.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Global;
use piidx::query::{export, secrets, tree};
use piidx::render::misc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Write to FILE instead of standard output
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let index = global.index()?;
    index.in_snapshot(|index| -> Result<()> {
        let found = tree::resolve(index, &args.session)?;
        let redacted = secrets::redacted_in_file(index, found.file_id)?;
        if redacted > 0 {
            misc::warn(
                &format!(
                    "{redacted} secret(s) of this session were redacted by `sync --redact`: the file written is not the original ([REDACTED:<kind>] stands in their place)"
                ),
                &global.term,
            );
        }
        match &args.output {
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let mut out = std::io::BufWriter::new(file);
                export::export(index, &found, &mut out)?;
                out.flush()
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            None => {
                let mut out = super::stdout();
                export::export(index, &found, &mut out)?;
                out.flush()?;
            }
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
