//! `piidx watch`: the index kept current as Pi writes, by file-system
//! notifications (the `notify` crate: inotify, FSEvents, kqueue).
//!
//! Every change is answered by one ordinary incremental sync, after the
//! notifications have been quiet for a moment (`debounce`) or a change has
//! waited `max_delay`: a sync reads only new bytes and does not open an
//! unchanged file, so syncing everything is as cheap as syncing the files
//! named, and it cannot miss what a notification did not say (a queue
//! overflow, a rename, a directory made before its watch). Between changes
//! the thread sleeps in the notification channel: no CPU.
//!
//! A root that does not exist yet is watched through its nearest existing
//! ancestor and armed when it appears. A folder the sync's walk entered
//! through a link is watched where it is; the watches follow no link
//! themselves, so a link to `/` or to the home folder (a loop, which the
//! walk does not follow either) does not watch everything there.
//!
//! The sync lock is taken per sync, as `piidx sync` takes it, so a cron or
//! manual sync still runs beside the watcher; when one holds the lock, the
//! watcher tries again shortly.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use crate::sync::{SyncError, SyncOptions, SyncReport};

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(
        "cannot watch {path} for changes; check its permissions, or the inotify limits (fs.inotify.max_user_watches)"
    )]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
    #[error("cannot start watching for file changes")]
    Start(#[source] notify::Error),
}

/// How the watcher syncs.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub sync: SyncOptions,
    /// Quiet time after a notification before the sync starts.
    pub debounce: Duration,
    /// The longest a change waits for its sync while notifications go on.
    pub max_delay: Duration,
}

/// What the caller hears after each sync; it returns false to stop.
pub type OnSync<'a> = dyn FnMut(Result<&SyncReport, &SyncError>) -> bool + 'a;

/// After a sync another process held the lock for, the next try.
const BUSY_RETRY: Duration = Duration::from_millis(500);

/// Syncs once, then after every change, until `on_sync` returns false.
pub fn watch(options: &WatchOptions, on_sync: &mut OnSync<'_>) -> Result<(), WatchError> {
    let (events, changes) = channel();
    // Links are not followed by the watches: a link to `/` or to the home
    // folder would watch (and wake on) everything there. The directories
    // the sync's walk entered through links are watched instead.
    let config = notify::Config::default().with_follow_symlinks(false);
    let mut watcher = RecommendedWatcher::new(events, config).map_err(WatchError::Start)?;
    let mut armed: Vec<Armed> = Vec::new();
    let mut linked: Vec<PathBuf> = Vec::new();
    arm(&mut watcher, &options.sync, &linked, &mut armed)?;
    loop {
        let result = crate::sync::run(&options.sync);
        let busy = matches!(result, Err(SyncError::Busy { .. }));
        if let Ok(report) = &result {
            linked.clone_from(&report.linked);
        }
        // A root may have appeared, or gone, while it synced; a link too.
        // Armed before the caller hears of the sync: whoever writes after
        // that is heard.
        let widened = arm(&mut watcher, &options.sync, &linked, &mut armed)?;
        if !busy && !on_sync(result.as_ref()) {
            return Ok(());
        }
        if busy {
            std::thread::sleep(BUSY_RETRY);
            continue;
        }
        // What was written in a newly watched folder between the sync's
        // walk and its watch was heard by neither: sync again.
        if widened {
            continue;
        }
        if !wait_for_change(&changes, options) {
            return Ok(());
        }
    }
}

/// How one root is watched.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Armed {
    /// The root itself, and everything below it.
    Root(PathBuf),
    /// Its nearest existing ancestor, for the root to appear in.
    Ancestor(PathBuf),
    /// Where a link below a root leads, and everything below it.
    Linked(PathBuf),
}

/// Watches every root (or, for a missing one, its nearest ancestor) and
/// where the links the last sync followed lead, changing only what changed
/// since the last call. True when it began to watch a folder of sessions
/// (a root or a link's target) it did not watch before.
fn arm(
    watcher: &mut RecommendedWatcher,
    options: &SyncOptions,
    linked: &[PathBuf],
    armed: &mut Vec<Armed>,
) -> Result<bool, WatchError> {
    let mut wanted: Vec<Armed> = options.roots.iter().map(|root| plan(&root.path)).collect();
    let roots: Vec<&Path> = wanted
        .iter()
        .filter_map(|armed| match armed {
            Armed::Root(path) => Some(path.as_path()),
            _ => None,
        })
        .collect();
    let targets = link_targets(&roots, linked);
    wanted.extend(targets.into_iter().map(Armed::Linked));
    for old in armed.iter().filter(|old| !wanted.contains(old)) {
        let _ = watcher.unwatch(path_of(old));
    }
    let mut widened = false;
    for new in wanted.iter().filter(|new| !armed.contains(new)) {
        widened |= !matches!(new, Armed::Ancestor(_));
        let (path, mode) = match new {
            Armed::Root(path) | Armed::Linked(path) => (path, RecursiveMode::Recursive),
            Armed::Ancestor(path) => (path, RecursiveMode::NonRecursive),
        };
        watcher
            .watch(path, mode)
            .map_err(|source| WatchError::Watch {
                path: path.clone(),
                source,
            })?;
    }
    *armed = wanted;
    Ok(widened)
}

fn plan(root: &Path) -> Armed {
    if root.is_dir() {
        return Armed::Root(root.to_owned());
    }
    let mut ancestor = root.parent();
    while let Some(dir) = ancestor {
        if dir.is_dir() {
            return Armed::Ancestor(dir.to_owned());
        }
        ancestor = dir.parent();
    }
    Armed::Ancestor(PathBuf::from("/"))
}

/// Where the `linked` directories lead, each once, leaving out those a
/// root's watch or another target's already holds: one directory watched
/// under two paths has one kernel watch, which unwatching either removes.
fn link_targets(roots: &[&Path], linked: &[PathBuf]) -> Vec<PathBuf> {
    let roots: Vec<PathBuf> = roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .collect();
    let mut targets: Vec<PathBuf> = linked
        .iter()
        .filter_map(|link| std::fs::canonicalize(link).ok())
        .collect();
    // A directory sorts before everything below it.
    targets.sort();
    let mut kept: Vec<PathBuf> = Vec::new();
    for target in targets {
        if !roots
            .iter()
            .chain(&kept)
            .any(|held| target.starts_with(held))
        {
            kept.push(target);
        }
    }
    kept
}

fn path_of(armed: &Armed) -> &Path {
    match armed {
        Armed::Root(path) | Armed::Ancestor(path) | Armed::Linked(path) => path,
    }
}

/// Blocks until something changed, then until the notifications have been
/// quiet for `debounce` (at most `max_delay`). Every change counts, errors
/// and overflows too (the sync looks at everything anyway); a file opened
/// or read does not (the sync's own reads would wake it again). False when
/// the watcher is gone.
fn wait_for_change(
    changes: &Receiver<notify::Result<notify::Event>>,
    options: &WatchOptions,
) -> bool {
    loop {
        match changes.recv() {
            Ok(event) if is_change(&event) => break,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    let first = Instant::now();
    loop {
        let left = options.max_delay.saturating_sub(first.elapsed());
        if left.is_zero() {
            return true;
        }
        match changes.recv_timeout(options.debounce.min(left)) {
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

fn is_change(event: &notify::Result<notify::Event>) -> bool {
    match event {
        Ok(event) => !matches!(event.kind, notify::EventKind::Access(_)),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Each target once; none that a root or another target already holds.
    #[test]
    fn link_targets_leave_out_what_is_watched_already() {
        let dir = tempfile::tempdir().expect("temp dir");
        let base = dir.path().canonicalize().expect("canonical temp dir");
        let root = base.join("root");
        let data = base.join("data");
        for folder in [
            root.join("a"),
            root.join("b"),
            data.join("sub"),
            base.join("other"),
        ] {
            std::fs::create_dir_all(folder).expect("mkdir");
        }
        let link = |name: &str, to: &Path| {
            let path = root.join("a").join(name);
            symlink(to, &path).expect("symlink");
            path
        };
        let linked = [
            link("to-sub", &data.join("sub")),
            link("to-data", &data),
            link("to-data-again", &data),
            link("to-b", &root.join("b")),
            link("to-other", &base.join("other")),
            root.join("a").join("gone"),
        ];
        assert_eq!(
            link_targets(&[root.as_path()], &linked),
            [data, base.join("other")]
        );
    }
}
