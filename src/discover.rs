//! Stage 1: find the files under the session roots.
//!
//! Pi lists `<root>/*/*.jsonl`; piidx walks deeper too, because pi-subagents
//! keeps child sessions at `<root>/<cwd>/<session>/<run>/run-N/*.jsonl` and a
//! custom session dir holds sessions flat in the root, and oh-my-pi keeps
//! subagent transcripts at `<root>/<cwd>/<session>/<id>.jsonl`.
//! `subagent-artifacts/` and the Rust port's `*.v2/` sidecars and
//! `<file>.jsonl.blobs/` attachment stores are never sessions and are not
//! entered; only `*.jsonl` files and the port's `*.sqlite` session databases
//! are read (so not the port's `.lock` files and `session-index.sqlite`, nor
//! omp's `<file>.jsonl.<id>.bak` backups). Whether a file really is a session is decided later, from its
//! first JSON object, not from its name or place.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::pipeline::Target;
use crate::roots::Root;

/// A `.jsonl` path that cannot be read as a file, with the reason.
#[derive(Debug, Clone)]
pub struct Unusable {
    pub target: Target,
    pub reason: String,
}

/// What one walk found.
#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<Target>,
    pub unusable: Vec<Unusable>,
    /// Directories that could not be listed and files that could not be
    /// `stat`ed (permissions, I/O errors), with the reason: what the index
    /// holds under them is kept, since nobody knows whether it is gone.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Links the walk did not follow (loops).
    pub warnings: Vec<String>,
    /// Directories the walk entered through a link (the link's path), for
    /// `watch` to watch beside the roots.
    pub linked: Vec<PathBuf>,
}

impl Discovery {
    /// True when `path` lies in (or is) something the walk could not read.
    pub fn hides(&self, path: &Path) -> bool {
        self.unreadable
            .iter()
            .any(|(unreadable, _)| path.starts_with(unreadable))
    }
}

/// Directory names that never hold sessions.
fn is_excluded_dir(name: &str) -> bool {
    name == "subagent-artifacts"
        || name.ends_with(".v2")
        || name.ends_with(".jsonl.blobs")
        || name == "node_modules"
        || name == ".git"
}

/// A file name sessions have: `*.jsonl`, or pi_agent_rust's `*.sqlite`
/// session databases (not its `session-index.sqlite`).
fn is_session_name(name: &str) -> bool {
    name.ends_with(".jsonl")
        || (name.ends_with(".sqlite") && name != crate::store::port_sqlite::SESSION_INDEX)
}

/// Walks every root. Roots must exist (checked by the caller).
pub fn discover(roots: &[Root]) -> Discovery {
    let mut found = Discovery::default();
    for root in roots {
        walk_root(root, &mut found);
    }
    // By bytes: `Path`'s `Ord` compares component by component, several
    // times slower. The sync's plan relies on this order: it merges the list
    // with the index's, which `Writer::file_stats` sorts by the same bytes.
    found
        .files
        .sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    found.files.dedup_by(|a, b| a.path == b.path);
    found
}

/// A directory waiting to be listed: its path, its `(dev, ino)`, its depth
/// below the root, and the `(dev, ino)` of itself and every directory above
/// it (a link back to one of them is a loop).
struct Pending {
    path: PathBuf,
    id: (u64, u64),
    /// Reached through a symlink.
    via_link: bool,
    depth: usize,
    ancestors: Vec<(u64, u64)>,
}

/// The depth of the folders Pi lists sessions in (`<root>/<project>/`):
/// every link there is followed, as Pi 1.5.2 follows them, even two to one
/// folder. Below it, a folder reached through a link is entered only if the
/// walk has not entered it yet by another path: two links in each folder
/// of a chain to the next made the walk enter the last one 2^n times, and
/// index its sessions as many times under as many paths. A folder reached
/// by its own path is always entered, so a session keeps its real path when
/// a link to its folder is met first.
const PROJECT_DEPTH: usize = 1;

/// Walks one root depth first, links followed. A file is `stat`ed through
/// its directory (`fstatat` on the listing's descriptor, as std's
/// `DirEntry::metadata` does): the kernel then looks up one name instead
/// of every component of the path, which was most of the system time of a
/// sync that finds nothing new (walkdir stats the whole path, and opens
/// each directory a second time to check for loops). Only symlinks are
/// `stat`ed by their path, to follow them.
fn walk_root(root_spec: &Root, found: &mut Discovery) {
    use std::os::unix::fs::MetadataExt;
    let root = root_spec.path.as_path();
    let root_text = root.to_string_lossy().into_owned();
    let root_id = match std::fs::metadata(root) {
        Ok(metadata) => (metadata.dev(), metadata.ino()),
        Err(err) => {
            note_error(found, root, &err, None);
            return;
        }
    };
    let mut ancestors = directories_above(root);
    ancestors.push(root_id);
    let mut entered = HashSet::from([root_id]);
    let mut stack = vec![Pending {
        path: root.to_owned(),
        id: root_id,
        via_link: false,
        depth: 0,
        ancestors,
    }];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir.path) {
            Ok(entries) => entries,
            Err(err) => {
                note_error(found, &dir.path, &err, None);
                continue;
            }
        };
        let depth = dir.depth + 1;
        let mut subdirs = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    note_error(found, &dir.path, &err, None);
                    continue;
                }
            };
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            // A link is followed: what it points to decides. A link that
            // points nowhere is reported (and its rows kept, if unreadable).
            let metadata = if file_type.is_symlink() {
                match std::fs::metadata(&path) {
                    Ok(metadata) => Some(metadata),
                    Err(err) => {
                        note_error(found, &path, &err, None);
                        continue;
                    }
                }
            } else {
                None
            };
            let is_dir = metadata
                .as_ref()
                .map_or(file_type.is_dir(), std::fs::Metadata::is_dir);
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if is_dir {
                if is_excluded_dir(&name) {
                    continue;
                }
                let metadata = match metadata.map_or_else(|| entry.metadata(), Ok) {
                    Ok(metadata) => metadata,
                    Err(err) => {
                        note_error(found, &path, &err, None);
                        continue;
                    }
                };
                let id = (metadata.dev(), metadata.ino());
                if dir.ancestors.contains(&id) {
                    found
                        .warnings
                        .push(format!("{}: symlink loop; not followed", path.display()));
                    continue;
                }
                if is_session_name(&name) {
                    found.unusable.push(Unusable {
                        target: target(root_spec, &root_text, path.clone(), depth, &metadata),
                        reason: "a directory; not read".into(),
                    });
                }
                let mut ancestors = dir.ancestors.clone();
                ancestors.push(id);
                subdirs.push(Pending {
                    path,
                    id,
                    via_link: file_type.is_symlink(),
                    depth,
                    ancestors,
                });
                continue;
            }
            if !is_session_name(&name) {
                continue;
            }
            let metadata = match metadata.map_or_else(|| entry.metadata(), Ok) {
                Ok(metadata) => metadata,
                Err(err) => {
                    note_error(found, &path, &err, Some("cannot stat: "));
                    continue;
                }
            };
            let target = target(root_spec, &root_text, path, depth, &metadata);
            let file_type = metadata.file_type();
            if file_type.is_file() {
                found.files.push(target);
            } else {
                found.unusable.push(Unusable {
                    target,
                    reason: "not a regular file (a FIFO, socket or device); not read".into(),
                });
            }
        }
        // Taken and entered depth first in the order of their names, so
        // that which of several links to one folder is followed
        // (`PROJECT_DEPTH`) does not change with `readdir`'s order.
        subdirs.sort_unstable_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
        subdirs.retain(|sub| {
            let again = sub.via_link && depth > PROJECT_DEPTH && entered.contains(&sub.id);
            entered.insert(sub.id);
            !again
        });
        found.linked.extend(
            subdirs
                .iter()
                .filter(|sub| sub.via_link)
                .map(|sub| sub.path.clone()),
        );
        stack.extend(subdirs.into_iter().rev());
    }
}

/// The `(dev, ino)` of every directory that holds `root`, up to `/`, on its
/// path as given and on the path it resolves to (the root may be a link).
/// A link to one of them (`/`, the home folder, the root's parent) leads
/// back to the root after walking everything beside it: a loop, not
/// followed.
fn directories_above(root: &Path) -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(root).ok();
    let mut ids: Vec<(u64, u64)> = root
        .ancestors()
        .skip(1)
        .chain(real.iter().flat_map(|real| real.ancestors().skip(1)))
        .filter(|dir| !dir.as_os_str().is_empty())
        .filter_map(|dir| std::fs::metadata(dir).ok())
        .map(|metadata| (metadata.dev(), metadata.ino()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A file found `depth` levels below `root_spec`'s directory, with its `stat`.
fn target(
    root_spec: &Root,
    root_text: &str,
    path: PathBuf,
    depth: usize,
    metadata: &std::fs::Metadata,
) -> Target {
    let depth = depth as i64;
    let mut target = Target {
        rel_path: relative(&root_spec.path, &path),
        path,
        root: root_text.to_owned(),
        depth,
        listed: depth == root_spec.layout.listed_depth(),
        dev: 0,
        ino: 0,
        size: 0,
        mtime_ns: 0,
        seen_ns: 0,
    };
    fill_stat(&mut target, metadata);
    target
}

/// `path` below `root`, with `/` between its parts.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .map(|rel| rel.to_string_lossy().replace('\\', "/"))
        .unwrap_or_else(|_| path.to_string_lossy().into_owned())
}

/// Records what could not be listed or `stat`ed: under `unreadable` when
/// it may hide files (no permission, an I/O error), so that their rows are
/// kept; as a warning when it is known to be gone (a link to nowhere, a
/// file deleted meanwhile) or a link loop the kernel stopped.
fn note_error(found: &mut Discovery, path: &Path, err: &std::io::Error, prefix: Option<&str>) {
    if hides_what_it_holds(err) {
        found
            .unreadable
            .push((path.to_owned(), format!("{}{err}", prefix.unwrap_or(""))));
    } else {
        found.warnings.push(format!("{}: {err}", path.display()));
    }
}

fn fill_stat(target: &mut Target, metadata: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    target.dev = metadata.dev() as i64;
    target.ino = metadata.ino() as i64;
    target.size = metadata.len();
    target.mtime_ns = metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec();
    target.seen_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i64);
}

/// True for an error that leaves it unknown what is there (no permission,
/// an I/O error); false for what is known to be gone (a dangling link, a
/// file deleted meanwhile) and for symlink loops.
fn hides_what_it_holds(err: &std::io::Error) -> bool {
    err.kind() != std::io::ErrorKind::NotFound && err.raw_os_error() != Some(libc::ELOOP)
}
