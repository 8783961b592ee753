//! Forward-only migrations, tracked in `PRAGMA user_version`.
//!
//! Every file in `migrations/` is embedded here in order; a shipped file is
//! never edited, only followed by a new one. All pending migrations run in
//! one transaction together with the version bump, so a failed upgrade leaves
//! the database as it was.

use std::path::Path;

use rusqlite::Connection;

use super::{APPLICATION_ID, Identity, Result, StoreError, copies, sqlite_error};

const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_subagents.sql"),
    include_str!("../../migrations/0003_tree.sql"),
    include_str!("../../migrations/0004_usage.sql"),
    include_str!("../../migrations/0005_search.sql"),
    include_str!("../../migrations/0006_fts_shards.sql"),
    include_str!("../../migrations/0007_trigram_shards.sql"),
    include_str!("../../migrations/0008_entries_time.sql"),
    include_str!("../../migrations/0009_copies.sql"),
    include_str!("../../migrations/0010_exact.sql"),
    include_str!("../../migrations/0011_shared_texts.sql"),
    include_str!("../../migrations/0012_pi15.sql"),
    include_str!("../../migrations/0013_roots.sql"),
    include_str!("../../migrations/0014_redactions.sql"),
    include_str!("../../migrations/0015_any_sqlite.sql"),
    include_str!("../../migrations/0016_machines.sql"),
    include_str!("../../migrations/0017_lean.sql"),
    include_str!("../../migrations/0018_exact_lines.sql"),
    include_str!("../../migrations/0019_agents.sql"),
    include_str!("../../migrations/0020_tool_outputs.sql"),
    include_str!("../../migrations/0021_views_anywhere.sql"),
    include_str!("../../migrations/0022_push_signatures.sql"),
    include_str!("../../migrations/0023_tool_outputs_by_id.sql"),
    include_str!("../../migrations/0024_unlinked_children.sql"),
    include_str!("../../migrations/0025_linked_children.sql"),
    include_str!("../../migrations/0026_path_tails.sql"),
    include_str!("../../migrations/0027_message_text_once.sql"),
    include_str!("../../migrations/0028_omp_first_message.sql"),
    include_str!("../../migrations/0029_port_names.sql"),
    include_str!("../../migrations/0030_omp_background_runs.sql"),
];

/// Schema 9 added `copies` columns; their values for the rows already there
/// are computed in Rust, by the code that keeps them current afterwards.
const COPIES_ADDED: i64 = 9;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What a database file says it is: the application id, the schema version
/// and whether it holds any tables at all.
pub(super) fn identity(conn: &Connection, path: &Path) -> Result<Identity> {
    let err = sqlite_error(path);
    let application_id = conn
        .query_row("PRAGMA application_id", [], |row| row.get(0))
        .map_err(&err)?;
    let user_version = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(&err)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(&err)?;
    Ok(Identity {
        application_id,
        user_version,
        has_tables: tables > 0,
    })
}

fn check_ours(found: &Identity, path: &Path) -> Result<()> {
    let foreign = if found.application_id == 0 {
        found.has_tables
    } else {
        found.application_id != APPLICATION_ID
    };
    if foreign {
        return Err(StoreError::Foreign {
            path: path.to_owned(),
        });
    }
    if found.user_version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_owned(),
            found: found.user_version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Refuses a database of another program or a newer piidx before anything
/// (even `journal_mode`) is written to it.
pub fn check_identity(conn: &Connection, path: &Path) -> Result<()> {
    check_ours(&identity(conn, path)?, path)
}

/// Brings the database to `SCHEMA_VERSION`.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    let found = identity(conn, path)?;
    check_ours(&found, path)?;
    if found.user_version == SCHEMA_VERSION {
        return Ok(());
    }
    let err = sqlite_error(path);
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(&err)?;
    for (index, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(found.user_version as usize)
    {
        tx.execute_batch(sql).map_err(&err)?;
        if index as i64 + 1 == COPIES_ADDED {
            copies::refresh(&tx, copies::Scope::All).map_err(&err)?;
        }
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(&err)?;
    tx.commit().map_err(&err)
}

/// For read-only commands: the database must be ours and current.
pub fn check_readable(conn: &Connection, path: &Path) -> Result<()> {
    let found = identity(conn, path)?;
    check_ours(&found, path)?;
    if found.user_version < SCHEMA_VERSION {
        return Err(StoreError::TooOld {
            path: path.to_owned(),
            found: found.user_version,
            known: SCHEMA_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_to_an_empty_database() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, Path::new(":memory:")).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        migrate(&mut conn, Path::new(":memory:")).unwrap();
    }

    #[test]
    fn foreign_databases_are_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t(x)").unwrap();
        assert!(matches!(
            migrate(&mut conn, Path::new("x.db")),
            Err(StoreError::Foreign { .. })
        ));
    }
}
