//! Where things are: the default session root and database, resolved from
//! the environment the way Pi and the XDG conventions do.

use std::path::PathBuf;

/// Database path: `$PIIDX_DB`, else `$XDG_DATA_HOME/piidx/piidx.db`, else
/// `~/.local/share/piidx/piidx.db`.
pub fn default_db() -> Option<PathBuf> {
    if let Some(db) = env_path("PIIDX_DB") {
        return Some(db);
    }
    if let Some(data) = env_path("XDG_DATA_HOME") {
        return Some(data.join("piidx/piidx.db"));
    }
    home().map(|home| home.join(".local/share/piidx/piidx.db"))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
}

/// An environment path; a leading `~` or `~/` means the home directory, as
/// Pi expands it.
fn env_path(name: &str) -> Option<PathBuf> {
    let value = std::env::var(name).ok().filter(|value| !value.is_empty())?;
    Some(expand_tilde(&value))
}

pub fn expand_tilde(value: &str) -> PathBuf {
    match (value, home()) {
        ("~", Some(home)) => home,
        (_, Some(home)) if value.starts_with("~/") => home.join(&value[2..]),
        _ => PathBuf::from(value),
    }
}

/// Makes a path absolute without resolving symlinks, so stored paths match
/// the ones Pi writes into `parentSession`.
pub fn absolute(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}
