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

use std::path::{Path, PathBuf};

use walkdir::WalkDir;

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
    // times slower, and any fixed order will do for removing duplicates.
    found
        .files
        .sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    found.files.dedup_by(|a, b| a.path == b.path);
    found
}

fn walk_root(root_spec: &Root, found: &mut Discovery) {
    let root = root_spec.path.as_path();
    let listed_depth = root_spec.layout.listed_depth();
    let root_text = root.to_string_lossy().into_owned();
    let walker = WalkDir::new(root)
        .follow_links(true)
        .min_depth(1)
        .into_iter()
        .filter_entry(|entry| {
            !(entry.file_type().is_dir() && is_excluded_dir(&entry.file_name().to_string_lossy()))
        });
    for item in walker {
        let entry = match item {
            Ok(entry) => entry,
            Err(err) => {
                match err.path().filter(|_| hides_what_it_holds(&err)) {
                    Some(path) => {
                        let reason = err
                            .io_error()
                            .map_or_else(|| err.to_string(), ToString::to_string);
                        found.unreadable.push((path.to_owned(), reason));
                    }
                    None => found.warnings.push(describe_walk_error(&err)),
                }
                continue;
            }
        };
        if !is_session_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path().to_owned();
        let rel_path = path
            .strip_prefix(root)
            .map(|rel| rel.to_string_lossy().replace('\\', "/"))
            .unwrap_or_else(|_| path.to_string_lossy().into_owned());
        let mut target = Target {
            path,
            root: root_text.clone(),
            rel_path,
            depth: entry.depth() as i64,
            listed: entry.depth() as i64 == listed_depth,
            dev: 0,
            ino: 0,
            size: 0,
            mtime_ns: 0,
            seen_ns: 0,
        };
        let metadata = match entry.metadata() {
            Ok(metadata) => metadata,
            Err(err) if hides_what_it_holds(&err) => {
                let reason = err
                    .io_error()
                    .map_or_else(|| err.to_string(), ToString::to_string);
                found
                    .unreadable
                    .push((target.path, format!("cannot stat: {reason}")));
                continue;
            }
            // Gone since the directory was listed, or a dangling link.
            Err(err) => {
                found.warnings.push(describe_walk_error(&err));
                continue;
            }
        };
        fill_stat(&mut target, &metadata);
        let file_type = metadata.file_type();
        if file_type.is_file() {
            found.files.push(target);
        } else {
            let what = if file_type.is_dir() {
                "a directory"
            } else {
                "not a regular file (a FIFO, socket or device)"
            };
            found.unusable.push(Unusable {
                target,
                reason: format!("{what}; not read"),
            });
        }
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
fn hides_what_it_holds(err: &walkdir::Error) -> bool {
    if err.loop_ancestor().is_some() {
        return false;
    }
    match err.io_error() {
        Some(io) => {
            io.kind() != std::io::ErrorKind::NotFound && io.raw_os_error() != Some(libc::ELOOP)
        }
        None => true,
    }
}

fn describe_walk_error(err: &walkdir::Error) -> String {
    let path = err
        .path()
        .map(|path| path.display().to_string())
        .unwrap_or_else(|| "?".into());
    if err.loop_ancestor().is_some() {
        format!("{path}: symlink loop; not followed")
    } else {
        match err.io_error() {
            Some(io) => format!("{path}: {io}"),
            None => format!("{path}: {err}"),
        }
    }
}
