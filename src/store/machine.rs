//! Machine ids (migration 0016): the index's own stable id and label, and
//! the labels of roots copied from other machines.
//!
//! The id (`meta.machine_uid`, random, made by the migration) never changes,
//! so a team store keeps one machine's rows together however its host is
//! renamed; the label (`meta.machine_name`) is what people read and filter
//! on: the host name unless `sync --machine NAME` set another.

use rusqlite::OptionalExtension;

use super::{Index, Result, Writer};

/// Who an index is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Machine {
    pub uid: String,
    pub name: String,
}

/// This host's name (`gethostname`), or `localhost` when it has none.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the name is cut to it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_owned();
    if rc != 0 || name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

fn read_machine(conn: &rusqlite::Connection) -> rusqlite::Result<Machine> {
    let get = |key: &str| -> rusqlite::Result<Option<String>> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .optional()
    };
    Ok(Machine {
        uid: get("machine_uid")?.unwrap_or_default(),
        name: get("machine_name")?.unwrap_or_else(host_name),
    })
}

impl Index {
    /// The index's machine id and label.
    pub fn machine(&self) -> Result<Machine> {
        read_machine(&self.conn).map_err(self.err())
    }
}

impl Writer {
    /// The index's machine id and label.
    pub fn machine(&self) -> Result<Machine> {
        read_machine(&self.conn).map_err(self.err())
    }

    /// Stores the label: `name`, or (when none is stored yet) the host name,
    /// so that the label stays what it was when the host is renamed.
    pub fn name_machine(&self, name: Option<&str>) -> Result<()> {
        let sql = if name.is_some() {
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('machine_name', ?1)"
        } else {
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('machine_name', ?1)"
        };
        let name = name.map_or_else(host_name, str::to_owned);
        self.conn.execute(sql, [name]).map_err(self.err())?;
        Ok(())
    }

    /// Labels roots as copies of another machine's sessions (`sync --root
    /// DIR --machine NAME`); the roots must be remembered already.
    pub fn label_roots(&self, paths: &[String], name: &str) -> Result<()> {
        for path in paths {
            self.conn
                .execute(
                    "UPDATE roots SET machine = ?2 WHERE path = ?1",
                    [path.as_str(), name],
                )
                .map_err(self.err())?;
        }
        Ok(())
    }
}

impl Writer {
    /// The labels of roots copied from other machines: (root, label).
    pub fn root_labels(&self) -> Result<Vec<(String, String)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, machine FROM roots WHERE machine IS NOT NULL")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(self.err())?;
        rows.collect::<rusqlite::Result<_>>().map_err(self.err())
    }

    /// Takes on another index's machine id, label and root labels: a
    /// database rebuilt from the same roots (`doctor --fix`) is the same
    /// machine to a team store.
    pub fn adopt_machine(&self, machine: &Machine, labels: &[(String, String)]) -> Result<()> {
        if !machine.uid.is_empty() {
            self.conn
                .execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('machine_uid', ?1)",
                    [&machine.uid],
                )
                .map_err(self.err())?;
        }
        self.name_machine(Some(&machine.name))?;
        for (path, label) in labels {
            self.label_roots(std::slice::from_ref(path), label)?;
        }
        Ok(())
    }
}
