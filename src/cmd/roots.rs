//! `piidx roots`: the roots the index syncs, or forget one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};

use super::Global;
use super::ListArgs;
use piidx::config;
use piidx::render::misc;
use piidx::store::Writer;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Forget this root: remove it and every row of its files from the index
    #[arg(long, value_name = "DIR")]
    pub forget: Option<PathBuf>,
    #[command(flatten)]
    pub list: ListArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    if let Some(path) = &args.forget {
        return forget(&config::absolute(path), global);
    }
    let mut roots = global.index()?.root_infos()?;
    if let Some(limit) = args.list.limit {
        roots.truncate(limit);
    }
    let mut out = super::stdout();
    misc::write_roots(&mut out, &roots, args.list.format(), &global.term)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn forget(path: &std::path::Path, global: &Global) -> Result<ExitCode> {
    let db = &global.db;
    let _lock = piidx::sync::acquire_lock(db, super::sync::wait(10.0))?;
    let store = Writer::open(db)?;
    store.start_fts(None)?;
    store.begin()?;
    let known = store.forget_root(&path.to_string_lossy())?;
    store.purge_artifact_text()?;
    store.commit()?;
    store.finish_fts()?;
    store.scrub_wal()?;
    if !known {
        return Err(anyhow!(
            "{} is not a root of {}; see `piidx roots`",
            path.display(),
            db.display()
        ));
    }
    println!("forgot {} and its rows", path.display());
    Ok(ExitCode::SUCCESS)
}
