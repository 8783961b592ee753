//! `piidx sync` on real Pi files: counts, accounting, idempotence.

use crate::util::{Env, db_sql, non_blank_lines, shard_paths};

/// Real v1 session files from Pi's own repository (fixtures/samples).
#[test]
fn pi_mono_samples_account_for_every_line() {
    let env = Env::with_fixture("samples");
    let summary = env.sync();
    assert_eq!(summary["files_indexed"], 4);
    // Two real lines hold two glued objects each: both recovered and flagged.
    assert_eq!(summary["parse_errors"], 2);
    assert_eq!(
        env.count("SELECT count(*) FROM parse_errors WHERE reason LIKE '2 JSON objects glued%'"),
        2
    );
    assert_eq!(env.count("SELECT count(*) FROM entries WHERE glued"), 4);
    assert_lines_accounted(&env);

    // large-session.jsonl: 914 messages (88 user, 453 assistant, 373 toolResult).
    let roles = env.sql(
        "SELECT m.role, count(*) AS n FROM message_meta m JOIN sessions s USING(file_id)
         WHERE s.file_path LIKE '%large-session.jsonl' GROUP BY m.role ORDER BY m.role",
    );
    let got: Vec<(String, i64)> = roles
        .iter()
        .map(|row| {
            (
                row["role"].as_str().unwrap_or("").to_owned(),
                row["n"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("assistant".into(), 453),
            ("toolResult".into(), 373),
            ("user".into(), 88)
        ]
    );
}

#[test]
fn second_sync_with_nothing_changed_adds_nothing() {
    let env = Env::with_fixture("samples");
    env.sync();
    let again = env.sync();
    assert_eq!(again["files_indexed"], 0);
    assert_eq!(again["files_unchanged"], 4);
    assert_eq!(again["entries_added"], 0);
    assert_eq!(again["bytes_read"], 0);
}

/// A sync that finds nothing new writes nothing, to the database or to its
/// shards: cron runs it every few minutes, and a write is a commit with its
/// fsyncs. (Clearing the empty `fts_deletes` table used to write a page.)
#[test]
fn a_sync_with_nothing_new_writes_nothing() {
    let env = Env::with_fixture("samples");
    // Files changed within 2 s of a sync are read again by the next one
    // (their mtime cannot tell a later write apart): age them.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for entry in walkdir::WalkDir::new(&env.root) {
        let entry = entry.expect("walk root");
        if entry.file_type().is_file() {
            let file = std::fs::File::options()
                .append(true)
                .open(entry.path())
                .expect("open fixture copy");
            file.set_modified(hour_ago).expect("set mtime");
        }
    }
    env.sync();
    let before = file_stamps(&env);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let again = env.sync();
    assert_eq!(again["files_unchanged"], 4);
    assert_eq!(file_stamps(&env), before);
}

/// Nor does a sync of a root with no sessions yet (it used to switch the
/// empty database to a rollback journal for a bulk load and back, every run).
#[test]
fn a_sync_of_an_empty_root_writes_nothing_the_second_time() {
    let env = Env::new();
    env.sync();
    let before = file_stamps(&env);
    std::thread::sleep(std::time::Duration::from_millis(50));
    env.sync();
    assert_eq!(file_stamps(&env), before);
}

/// Modification time and size of the database and of each shard file.
fn file_stamps(env: &Env) -> Vec<(std::path::PathBuf, std::time::SystemTime, u64)> {
    let mut files = shard_paths(&env.db);
    files.push(env.db.clone());
    files
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).expect("metadata");
            (path, meta.modified().expect("mtime"), meta.len())
        })
        .collect()
}

/// Every non-blank line of every indexed file is a header, one or more
/// entries, a recorded parse error, or the pending torn tail.
pub fn assert_lines_accounted(env: &Env) {
    let files = env.sql("SELECT file_id, path, status, offset, size FROM files");
    for file in files {
        let path = std::path::PathBuf::from(file["path"].as_str().unwrap_or_default());
        if file["status"] != "indexed" {
            continue;
        }
        let file_id = file["file_id"].as_i64().unwrap_or(-1);
        let covered = env.sql(&format!(
            "SELECT line_no FROM entries WHERE file_id = {file_id}
             UNION SELECT line_no FROM parse_errors WHERE file_id = {file_id}"
        ));
        let covered: std::collections::HashSet<i64> = covered
            .iter()
            .filter_map(|row| row["line_no"].as_i64())
            .collect();
        let offset = file["offset"].as_i64().unwrap_or(0);
        let mut header_seen = false;
        for line in non_blank_lines(&path) {
            if covered.contains(&line.line_no) {
                continue;
            }
            if !header_seen && String::from_utf8_lossy(&line.bytes).contains("\"type\":\"session\"")
            {
                header_seen = true;
                continue;
            }
            assert!(
                line.offset >= offset,
                "{}: line {} is neither header, entry, error nor pending tail",
                path.display(),
                line.line_no
            );
        }
    }
}

/// A first sync loads with a rollback journal (see `Store::begin_bulk_load`)
/// and leaves the file in WAL mode, so readers never block later syncs.
#[test]
fn a_first_sync_leaves_the_database_in_wal_mode() {
    let env = Env::with_fixture("samples");
    env.sync();
    let conn = rusqlite::Connection::open(&env.db).expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    let mut leftover = env.db.as_os_str().to_owned();
    leftover.push("-journal");
    assert!(!std::path::Path::new(&leftover).exists());
}

/// The indexes of fork copies' keys come back when a load's end never
/// built them (an older piidx finished the load, or a user dropped them),
/// with the copies still right.
#[test]
fn a_sync_makes_the_fork_key_indexes_again() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let kept = env.count("SELECT count(*) FROM usage_records WHERE copies = 0");
    assert!(kept > 0, "the fixture has fork copies");
    db_sql(
        &env.db,
        "DROP INDEX usage_records_dedupe; DROP INDEX tool_call_meta_call_id;",
    );
    assert_eq!(env.count(crate::util::FORK_KEY_INDEXES), 0);
    env.sync();
    assert_eq!(env.count(crate::util::FORK_KEY_INDEXES), 2);
    assert_eq!(
        env.count("SELECT count(*) FROM usage_records WHERE copies = 0"),
        kept
    );
}

#[test]
fn a_root_that_is_a_file_or_missing_is_named_as_such() {
    let env = Env::new();
    let file = env.dir.path().join("sessions.jsonl");
    std::fs::write(&file, "{}\n").expect("write");
    let out = env.run(&["sync", "--root", &file.to_string_lossy()]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(message.contains("is not a directory"), "{message}");
    let missing = env.dir.path().join("nowhere");
    let out = env.run(&["sync", "--root", &missing.to_string_lossy()]);
    let message = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(message.contains("does not exist"), "{message}");
}

/// `PIIDX_SQL_PROFILE=FILE` (docs/performance.md): one line per statement
/// of the writer, most expensive first; `INSERT INTO entries` ran once per
/// entry added, and nothing else changes.
#[test]
fn the_sql_profile_counts_the_writers_statements() {
    let env = Env::with_fixture("samples");
    let profile = env.dir.path().join("statements.tsv");
    let root = env.root.to_string_lossy().into_owned();
    let out = env
        .command(&["sync", "--root", &root, "--json"])
        .env("PIIDX_SQL_PROFILE", &profile)
        .output()
        .expect("run piidx");
    assert_eq!(out.status.code(), Some(1), "parse errors make it partial");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sync --json");
    let text = std::fs::read_to_string(&profile).expect("the profile was written");
    let rows: Vec<(f64, u64, &str)> = text
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.splitn(4, '\t').collect();
            assert_eq!(fields.len(), 4, "ms, calls, µs per call, SQL: {line}");
            let ms = fields[0].parse().expect("milliseconds");
            let calls = fields[1].parse().expect("calls");
            (ms, calls, fields[3])
        })
        .collect();
    let entries = rows
        .iter()
        .find(|(_, _, sql)| sql.starts_with("INSERT INTO entries("))
        .expect("the entries' insert is in the profile");
    assert_eq!(
        serde_json::json!(entries.1),
        summary["entries_added"],
        "one run per entry"
    );
    assert!(rows.iter().any(|(_, _, sql)| *sql == "COMMIT"));
    assert!(
        rows.windows(2).all(|pair| pair[0].0 >= pair[1].0),
        "most expensive first"
    );
    assert!(rows.iter().all(|(_, _, sql)| !sql.contains('\n')));
    assert_eq!(
        summary["entries_added"],
        env.count("SELECT count(*) FROM entries")
    );
}

/// Below the project folders, a folder reached through links is walked
/// once, whatever the number of paths to it: a chain of folders that each
/// hold two links to the next made the walk enter the last one 2^n times
/// and index its session under each path. A folder walked by its own path
/// is not walked again through a link to it.
#[test]
fn a_folder_reached_through_several_links_is_walked_once() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let project = env.root.join("--proj--");
    let chain = env.dir.path().join("chain");
    let levels = 10;
    let level = |k: usize| chain.join(format!("d{k}"));
    for k in 0..levels {
        std::fs::create_dir_all(level(k)).expect("mkdir");
    }
    for k in 0..levels - 1 {
        symlink(level(k + 1), level(k).join("a")).expect("link a");
        symlink(level(k + 1), level(k).join("b")).expect("link b");
    }
    crate::util::write_user_session(&level(levels - 1), "deep", serde_json::json!("chained"));
    crate::util::write_user_session(&project.join("real"), "real", serde_json::json!("real"));
    symlink(level(0), project.join("chain")).expect("link to the chain");
    symlink(project.join("real"), project.join("zlink")).expect("link to a folder walked");

    let summary = env.sync();
    assert_eq!(summary["warnings"], serde_json::json!([]), "{summary}");
    let paths: Vec<String> = env
        .sql("SELECT file_path FROM sessions ORDER BY file_path")
        .iter()
        .filter_map(|row| row["file_path"].as_str().map(str::to_owned))
        .collect();
    let deep = project
        .join("chain")
        .join(vec!["a"; levels - 1].join("/"))
        .join("deep.jsonl");
    let real = project.join("real").join("real.jsonl");
    assert_eq!(
        paths,
        [deep.display().to_string(), real.display().to_string()]
    );
}

/// A link inside the tree to a directory that holds the root (`/`, the home
/// folder, the root's parent) would walk everything above the sessions and
/// come back to them: it is a loop, reported and not followed, like a link
/// back to a directory inside the tree. A link elsewhere is still followed.
#[test]
fn a_link_to_a_directory_above_the_root_is_not_followed() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let project = env.root.join("--proj--");
    crate::util::write_user_session(&project, "inside", serde_json::json!("inside the root"));
    // Beside the root: reached only through a link to their common parent.
    let beside = env.dir.path().join("beside");
    crate::util::write_user_session(&beside, "beside", serde_json::json!("beside the root"));
    // Elsewhere, not above the root: a link to it is followed.
    let elsewhere = env.dir.path().join("elsewhere");
    crate::util::write_user_session(&elsewhere, "elsewhere", serde_json::json!("linked in"));
    symlink(env.dir.path(), project.join("up")).expect("link to the root's parent");
    symlink(&env.root, project.join("root-again")).expect("link to the root");
    symlink(&project, project.join("here-again")).expect("link to its own folder");
    symlink(&elsewhere, project.join("linked")).expect("link to a folder elsewhere");

    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A symlink loop is a warning: exit code 1 (README, "Exit codes").
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let mut ids: Vec<String> = env
        .sql("SELECT session_id FROM sessions ORDER BY session_id")
        .iter()
        .filter_map(|row| row["session_id"].as_str().map(str::to_owned))
        .collect();
    ids.dedup();
    assert_eq!(ids, ["elsewhere", "inside"], "{stderr}");
    for link in ["up", "root-again", "here-again"] {
        let path = project.join(link);
        assert!(
            stderr.contains(&format!("{}: symlink loop; not followed", path.display())),
            "{link} reported: {stderr}"
        );
    }
}
