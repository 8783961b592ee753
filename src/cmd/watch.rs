//! `piidx watch`: sync now, then again whenever session files change, until
//! interrupted. One line per sync (the `sync` summary, or `--json`).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow};

use super::Global;
use piidx::render::misc;
use piidx::sync::SyncOptions;
use piidx::watch::{self, WatchOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Sessions root to watch and index; repeatable, and remembered [default: as for `sync`]
    #[arg(long, value_name = "DIR")]
    pub root: Vec<std::path::PathBuf>,
    /// Print each sync's summary as one JSON object per line
    #[arg(long)]
    pub json: bool,
    /// Print nothing but warnings and errors
    #[arg(long, short)]
    pub quiet: bool,
    /// Milliseconds without a new change before syncing
    #[arg(long, value_name = "MS", default_value_t = 150)]
    pub debounce: u64,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let options = options(&args.root, args.debounce, global)?;
    let term = global.term;
    let mut first = true;
    let mut failure = None;
    watch::watch(&options, &mut |result| {
        let was_first = std::mem::replace(&mut first, false);
        match result {
            Ok(report) => {
                for warning in &report.warnings {
                    misc::warn(warning, &term);
                }
                let mut out = super::stdout();
                let written = if args.json {
                    serde_json::to_writer(&mut out, report)
                        .map_err(std::io::Error::from)
                        .and_then(|()| writeln!(out))
                } else if args.quiet {
                    Ok(())
                } else {
                    misc::write_sync(&mut out, report, &term)
                };
                // Standard output gone (a closed pipe): stop watching.
                written.and_then(|()| out.flush()).is_ok()
            }
            // The first sync must work (a bad root, a newer database); a
            // later one may fail for a while (a full disk) and is retried
            // at the next change.
            Err(err) if was_first => {
                failure = Some(piidx::error_chain(err));
                false
            }
            Err(err) => {
                misc::warn(&piidx::error_chain(err), &term);
                true
            }
        }
    })?;
    match failure {
        Some(message) => Err(anyhow!(message)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The watcher's options for these roots (as `sync` finds them) and
/// debounce; missing roots are noted, to be watched for (`serve --watch`
/// uses it too).
pub fn options(
    root: &[std::path::PathBuf],
    debounce: u64,
    global: &Global,
) -> Result<WatchOptions> {
    let roots = super::sync::roots_to_sync(root, global)?;
    for root in roots.iter().filter(|root| !root.path.exists()) {
        misc::note(
            &format!(
                "{} does not exist yet; watching for it to appear",
                root.path.display()
            ),
            &global.term,
        );
    }
    Ok(WatchOptions {
        sync: SyncOptions {
            roots,
            // A root named here may appear later (Pi makes it on its
            // first session): not an error, as for a remembered one.
            explicit_roots: false,
            db: global.db.clone(),
            full: false,
            keep_deleted: false,
            prune: false,
            progress: false,
            lock_wait: Duration::ZERO,
            max_line_bytes: 256 << 20,
            fts_shards: None,
            redact: false,
            machine: None,
        },
        debounce: Duration::from_millis(debounce),
        max_delay: Duration::from_secs(1).max(Duration::from_millis(debounce)),
    })
}
