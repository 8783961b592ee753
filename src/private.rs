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
//! fixes it; `find_text` checks that deleted text is really gone from every
//! file of the index (the deletion itself: `store`, `secure_delete` and the
//! shards' purge).

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

/// The files of the index at `db` that others may read or write, with
/// their modes.
pub fn exposed(db: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    index_files(db)
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::metadata(&path).ok()?;
            let mode = meta.permissions().mode() & 0o777;
            (mode & UMASK != 0).then_some((path, mode))
        })
        .collect()
}

/// Where the bytes of `text` (as given, or lowercased, as the word index
/// keeps words) still are in the index's files: each file with the offset of
/// the first match. What `doctor --absent` checks after a deletion.
pub fn find_text(db: &Path, text: &str) -> std::io::Result<Vec<(PathBuf, u64)>> {
    let mut needles = vec![text.as_bytes().to_vec()];
    let lower = text.to_lowercase();
    if lower != text {
        needles.push(lower.into_bytes());
    }
    let mut found = Vec::new();
    for path in index_files(db) {
        if let Some(offset) = first_match(&path, &needles)? {
            found.push((path, offset));
        }
    }
    Ok(found)
}

/// The offset of the first of `needles` in the file, read in blocks (an
/// index can be larger than memory should hold).
fn first_match(path: &Path, needles: &[Vec<u8>]) -> std::io::Result<Option<u64>> {
    use std::io::Read;
    let longest = needles.iter().map(Vec::len).max().unwrap_or(0);
    if longest == 0 {
        return Ok(None);
    }
    let finders: Vec<_> = needles.iter().map(memchr::memmem::Finder::new).collect();
    let mut file = std::fs::File::open(path)?;
    let mut buffer = Vec::new();
    let mut block = vec![0u8; 8 << 20];
    let mut buffer_start = 0u64;
    loop {
        let read = file.read(&mut block)?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&block[..read]);
        if let Some(at) = finders.iter().filter_map(|f| f.find(&buffer)).min() {
            return Ok(Some(buffer_start + at as u64));
        }
        // Keep what a match across the block boundary needs.
        let keep = buffer.len().min(longest - 1);
        let drop = buffer.len() - keep;
        buffer.drain(..drop);
        buffer_start += drop as u64;
    }
}

/// The database and its side files (`-wal`, `-shm`, `-journal`, `.lock`,
/// the shards `.fts<N>` and their journals) that exist, sorted.
fn index_files(db: &Path) -> Vec<PathBuf> {
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
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| is_side_file(&name, &entry.file_name().to_string_lossy()))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .map(|entry| dir.join(entry.file_name()))
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
    fn text_is_found_across_block_boundaries_and_lowercased() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("x.db");
        let mut bytes = vec![b'.'; (8 << 20) - 3];
        bytes.extend_from_slice(b"SeCrEt");
        std::fs::write(&db, &bytes).expect("write");
        std::fs::write(dir.path().join("x.db.fts0"), b"..secret..").expect("write");
        std::fs::write(dir.path().join("other.db"), b"SeCrEt").expect("write");
        let found = find_text(&db, "SeCrEt").expect("search");
        assert_eq!(
            found,
            vec![
                (db.clone(), (8 << 20) - 3),
                (dir.path().join("x.db.fts0"), 2)
            ]
        );
        assert!(find_text(&db, "absent").expect("search").is_empty());
    }

    #[test]
    fn quoted_paths_survive_a_shell() {
        assert_eq!(shell_quote("/home/me/piidx.db"), "/home/me/piidx.db");
        assert_eq!(shell_quote("/tmp/my db"), "'/tmp/my db'");
        assert_eq!(shell_quote("/tmp/it's"), r"'/tmp/it'\''s'");
    }
}
