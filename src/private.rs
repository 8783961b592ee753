//! The index is its user's alone. It copies every session, secrets
//! included, so it must be at least as private as the sessions it reads.
//!
//! Every file and directory piidx creates (database, WAL, shared memory,
//! journals, full-text shards, lock, doctor's rebuilds, `export -o`) is
//! created while the process umask is 077, so files are 0600 and
//! directories 0700 whatever umask the user runs with. One umask set at start
//! covers them all, including the files SQLite creates on its own (it gives
//! journals the database's mode); setting modes file by file would miss the
//! next one someone adds. `exposed` finds an index that an older piidx, or
//! a `cp`, left readable by others, for a warning with the `chmod` that
//! fixes it.

use std::path::{Path, PathBuf};

/// The umask under which piidx creates files: nothing for group or others.
pub const UMASK: u32 = 0o077;

/// Makes every file and directory this process creates from now on
/// owner-only. Call it first thing in `main`, before any thread starts:
/// the umask is per process.
pub fn owner_only() {
    // SAFETY: umask(2) cannot fail and touches no memory.
    unsafe {
        libc::umask(UMASK as libc::mode_t);
    }
}

/// The files of the index at `db` that others may read or write: the
/// database and its side files (`-wal`, `-shm`, `-journal`, `.lock`, the
/// shards `.fts<N>` and their journals), with their modes.
pub fn exposed(db: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let (Some(dir), Some(name)) = (db.parent(), db.file_name()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let name = name.to_string_lossy();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, u32)> = entries
        .filter_map(Result::ok)
        .filter(|entry| is_side_file(&name, &entry.file_name().to_string_lossy()))
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            let mode = meta.permissions().mode() & 0o777;
            (meta.is_file() && mode & UMASK != 0).then(|| (dir.join(entry.file_name()), mode))
        })
        .collect();
    found.sort();
    found
}

/// `file` is the database `db` itself or one of the files piidx keeps next
/// to it.
fn is_side_file(db: &str, file: &str) -> bool {
    let Some(rest) = file.strip_prefix(db) else {
        return false;
    };
    let rest = rest
        .strip_suffix("-journal")
        .or_else(|| rest.strip_suffix("-wal"))
        .or_else(|| rest.strip_suffix("-shm"))
        .unwrap_or(rest);
    rest.is_empty()
        || rest == ".lock"
        || rest
            .strip_prefix(".fts")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The warning for an index others can read, with the command that fixes
/// it; `None` when every file is private.
pub fn exposed_warning(db: &Path) -> Option<String> {
    let files = exposed(db);
    let (first, mode) = files.first()?;
    let others = match files.len() {
        1 => String::new(),
        n => format!(" and {} more of its files", n - 1),
    };
    Some(format!(
        "{}{others} can be read or written by other users (mode {mode:04o}); the index holds everything your sessions hold. Make it private: chmod go-rwx {}*",
        first.display(),
        shell_quote(&db.to_string_lossy()),
    ))
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@%".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_files_are_the_database_and_what_piidx_keeps_next_to_it() {
        for file in [
            "piidx.db",
            "piidx.db-wal",
            "piidx.db-shm",
            "piidx.db-journal",
            "piidx.db.lock",
            "piidx.db.fts0",
            "piidx.db.fts12-journal",
        ] {
            assert!(is_side_file("piidx.db", file), "{file}");
        }
        for file in [
            "piidx.db.bak",
            "piidx.dbx",
            "piidx.db.fts",
            "piidx.db.ftsx",
            "other.db",
        ] {
            assert!(!is_side_file("piidx.db", file), "{file}");
        }
    }

    #[test]
    fn quoted_paths_survive_a_shell() {
        assert_eq!(shell_quote("/home/me/piidx.db"), "/home/me/piidx.db");
        assert_eq!(shell_quote("/tmp/my db"), "'/tmp/my db'");
        assert_eq!(shell_quote("/tmp/it's"), r"'/tmp/it'\''s'");
    }
}
