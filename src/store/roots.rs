//! The roots table (migration 0013): what `sync` walked, in which layout.

use rusqlite::params;

use std::path::{Path, PathBuf};

use super::{Index, Result, Writer};
use crate::roots::{Layout, Root, origin_name};

/// What an index remembers: the roots synced before, and the cwds of its
/// sessions (where project settings may name session directories). Read
/// without opening the index for writing; nothing for a database that is
/// missing or older than the `roots` table.
pub fn remembered(db: &Path) -> (Vec<Root>, Vec<PathBuf>) {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let Ok(conn) = rusqlite::Connection::open_with_flags(db, flags) else {
        return (Vec::new(), Vec::new());
    };
    let roots = conn
        .prepare("SELECT path, layout, origin FROM roots ORDER BY path")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(path, layout, origin)| {
            Some(Root {
                path: PathBuf::from(path),
                layout: Layout::parse(&layout)?,
                origin: origin_name(&origin),
            })
        })
        .collect();
    let cwds = conn
        .prepare("SELECT DISTINCT cwd FROM sessions WHERE cwd <> ''")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .unwrap_or_default()
        .into_iter()
        .map(PathBuf::from)
        .collect();
    (roots, cwds)
}

/// One remembered root with how much the index holds of it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RootInfo {
    pub path: String,
    pub layout: Layout,
    pub origin: String,
    /// The agents whose sessions it holds (`sessions.agent`), else those a
    /// root of its origin holds by default (`Root::agents`).
    pub agents: Vec<String>,
    pub added_at: String,
    pub files: i64,
    pub sessions: i64,
}

impl Writer {
    /// Records the roots a sync walks (their first layout and origin stay).
    pub fn remember_roots(&self, roots: &[Root]) -> Result<()> {
        for root in roots {
            self.conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO roots(path, layout, origin, added_at)
                     VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        root.path.to_string_lossy(),
                        root.layout.name(),
                        root.origin
                    ])
                })
                .map_err(self.err())?;
        }
        Ok(())
    }

    /// Forgets a root and every row of its files; false when it is not one.
    pub fn forget_root(&self, path: &str) -> Result<bool> {
        let known: bool = self
            .conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM roots WHERE path = ?1)
                     OR EXISTS (SELECT 1 FROM files WHERE root = ?1)",
                [path],
                |row| row.get(0),
            )
            .map_err(self.err())?;
        if !known {
            return Ok(false);
        }
        let files: Vec<i64> = self
            .conn
            .prepare("SELECT file_id FROM files WHERE root = ?1")
            .and_then(|mut stmt| stmt.query_map([path], |row| row.get(0))?.collect())
            .map_err(self.err())?;
        for file_id in files {
            self.remove_file(file_id, false)?;
        }
        self.conn
            .execute("DELETE FROM roots WHERE path = ?1", [path])
            .map_err(self.err())?;
        Ok(true)
    }
}

impl Index {
    /// Every remembered root, with its file and session counts.
    pub fn root_infos(&self) -> Result<Vec<RootInfo>> {
        self.conn
            .prepare(
                "SELECT r.path, r.layout, r.origin, r.added_at,
                        (SELECT count(*) FROM files f WHERE f.root = r.path),
                        (SELECT count(*) FROM files f JOIN sessions s ON s.file_id = f.file_id
                          WHERE f.root = r.path),
                        (SELECT group_concat(agent, ',') FROM (
                            SELECT DISTINCT s.agent FROM files f JOIN sessions s ON s.file_id = f.file_id
                             WHERE f.root = r.path ORDER BY s.agent))
                   FROM roots r ORDER BY r.path",
            )
            .and_then(|mut stmt| {
                stmt.query_map([], |row| {
                    let layout: String = row.get(1)?;
                    let origin: String = row.get(2)?;
                    let held: Option<String> = row.get(6)?;
                    let agents = match held {
                        Some(list) => list.split(',').map(str::to_owned).collect(),
                        None => Root::agents(&origin)
                            .iter()
                            .map(|agent| (*agent).to_owned())
                            .collect(),
                    };
                    Ok(RootInfo {
                        path: row.get(0)?,
                        layout: Layout::parse(&layout).unwrap_or(Layout::PerCwd),
                        origin,
                        agents,
                        added_at: row.get(3)?,
                        files: row.get(4)?,
                        sessions: row.get(5)?,
                    })
                })?
                .collect()
            })
            .map_err(self.err())
    }
}
