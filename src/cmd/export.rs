//! `piidx export`: a session file rebuilt from the index alone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::Global;
use piidx::normalize::agent;
use piidx::query::{export, secrets, sessions, tree};
use piidx::render::misc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Write to FILE instead of standard output (a pi_agent_rust session:
    /// its images to FILE.blobs/, or to a FILE ending in .sqlite, the port's
    /// SQLite session format)
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// A pi_agent_rust session's attachments where the port keeps them for a
/// JSONL file: `<path>.blobs/<hex>` (its `session/attachments.rs`), so the
/// file written is whole. Returns how many were missing from the source.
fn write_blobs(index: &piidx::store::Index, found: &tree::SessionRef, path: &Path) -> Result<u64> {
    let attachments = export::port_attachments(index, found)?;
    if attachments.is_empty() {
        return Ok(0);
    }
    let mut folder = path.as_os_str().to_owned();
    folder.push(".blobs");
    let folder = PathBuf::from(folder);
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let mut missing = 0;
    for (hex, bytes) in attachments {
        match bytes {
            Some(bytes) => std::fs::write(folder.join(&hex), bytes)
                .with_context(|| format!("writing {}", folder.join(&hex).display()))?,
            None => missing += 1,
        }
    }
    Ok(missing)
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
        let port = sessions::agent_of(index, found.file_id)? == agent::PI_AGENT_RUST;
        let missing = match &args.output {
            Some(path) if path.extension().is_some_and(|ext| ext == "sqlite") => {
                if !port {
                    bail!(
                        "only pi_agent_rust sessions have a SQLite format; give an output path that does not end in .sqlite for this session's JSONL"
                    );
                }
                export::export_port_sqlite(index, &found, path)
                    .with_context(|| format!("writing {}", path.display()))?
                    .1
            }
            Some(path) => {
                let file = std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
                let mut out = std::io::BufWriter::new(file);
                export::export(index, &found, &mut out)?;
                out.flush()
                    .with_context(|| format!("writing {}", path.display()))?;
                if port {
                    write_blobs(index, &found, path)?
                } else {
                    0
                }
            }
            None => {
                let mut out = super::stdout();
                let missing = if port && export::is_port_sqlite(&found) {
                    export::export_port_jsonl(index, &found, &mut out)?.1
                } else {
                    export::export(index, &found, &mut out)?;
                    0
                };
                out.flush()?;
                missing
            }
        };
        if missing > 0 {
            misc::warn(
                &format!(
                    "{missing} image(s) of this session are missing from its agent's store: they are written as the references the session holds"
                ),
                &global.term,
            );
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
