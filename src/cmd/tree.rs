//! `piidx tree`: a session's entries as a tree.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

use super::Global;
use piidx::query::tree;
use piidx::render;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id, unique id prefix, or session file path
    pub session: String,
    /// Print every entry (file order) as JSON: id, parent_id, type, on_branch, is_leaf, label, edits, summary, …
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let tree = super::show::load_tree(global, &args.session)?;
    let outline = tree::outline(&tree);
    let mut out = super::stdout();
    if args.json {
        render::write_json(&mut out, &outline)?;
    } else {
        render::tree::write(&mut out, &outline, &global.term)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
