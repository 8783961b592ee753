//! `piidx sql` and how the database is opened: read-only, three output
//! formats, and clear errors for databases that are missing, foreign or newer.

use crate::util::{Env, write_user_session};

#[test]
fn write_statements_are_refused_and_change_nothing() {
    let env = Env::with_fixture("samples");
    env.sync();
    let before = env.count("SELECT count(*) FROM entries");
    for statement in [
        "DELETE FROM entries",
        "DROP TABLE files",
        "UPDATE sessions SET name = 'x'",
    ] {
        let out = env.run(&["sql", statement]);
        assert_eq!(out.status.code(), Some(2), "{statement}");
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(message.contains("only reads"), "{message}");
    }
    assert_eq!(env.count("SELECT count(*) FROM entries"), before);
}

#[test]
fn table_json_and_csv_show_the_same_rows() {
    let env = Env::with_fixture("samples");
    env.sync();
    let query = "SELECT session_id, message_count FROM sessions ORDER BY session_id";
    let json = env.sql(query);
    assert_eq!(json.len(), 4);
    let csv = env.run(&["sql", query, "--csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout).into_owned();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "session_id,message_count");
    assert_eq!(lines.len(), 5);
    for (line, row) in lines[1..].iter().zip(&json) {
        assert_eq!(
            *line,
            format!(
                "{},{}",
                row["session_id"].as_str().unwrap_or(""),
                row["message_count"]
            )
        );
    }
    let table = env.run(&["sql", query]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.starts_with("session_id"));
    assert_eq!(table.lines().count(), 6);
}

#[test]
fn missing_foreign_and_newer_databases_get_clear_errors() {
    let env = Env::new();
    let out = env.run(&["sql", "SELECT 1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `piidx sync` first"));

    let conn = rusqlite::Connection::open(&env.db).expect("create");
    conn.execute_batch("CREATE TABLE notes(x); INSERT INTO notes VALUES (1);")
        .expect("foreign");
    drop(conn);
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a piidx database"));
    let conn = rusqlite::Connection::open(&env.db).expect("reopen");
    let kept: i64 = conn
        .query_row("SELECT x FROM notes", [], |row| row.get(0))
        .expect("intact");
    assert_eq!(kept, 1);
    drop(conn);

    std::fs::remove_file(&env.db).expect("rm");
    env.sync();
    let conn = rusqlite::Connection::open(&env.db).expect("reopen");
    conn.execute_batch("PRAGMA user_version = 999")
        .expect("bump");
    drop(conn);
    let out = env.run(&["sync", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("newer piidx"));
}

#[test]
fn a_missing_root_is_a_clear_fatal_error() {
    let env = Env::new();
    let missing = env.dir.path().join("nope");
    let out = env.run(&["sync", "--root", &missing.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains("does not exist") && message.contains("nope"),
        "{message}"
    );
}

/// `piidx … | head`: when the reader of stdout leaves early, every command
/// stops quietly with exit code 0, as ripgrep does. JSON output goes
/// through serde_json, whose error hid the broken pipe: `sessions --json`
/// and `search --json` printed "Broken pipe" and exited with 2.
#[test]
fn a_reader_that_leaves_early_ends_every_output_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let env = Env::new();
    // Every output below is larger than a pipe's buffer (64 KiB), so the
    // command is still writing when its reader leaves.
    for n in 0..400 {
        let content = format!("pipeword {n} {}", "filler ".repeat(40));
        write_user_session(&env.root.join("--proj--"), &format!("s{n}"), content.into());
    }
    env.sync();
    let commands: &[&[&str]] = &[
        &["sessions", "--json"],
        &["sessions"],
        &["search", "pipeword", "--json", "--limit", "400"],
        &["search", "pipeword", "--limit", "400"],
        &["sql", "SELECT * FROM entries", "--json"],
        &["sql", "SELECT * FROM entries"],
    ];
    for args in commands {
        let mut child = env
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn piidx");
        let mut first = [0; 16];
        let mut stdout = child.stdout.take().expect("stdout");
        stdout.read_exact(&mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// A statement that would run forever or eat the machine is stopped with a
/// message naming the option that allows more; nothing is half-printed as
/// success.
#[test]
fn runaway_statements_stop_at_the_timeout_and_the_memory_cap() {
    let env = Env::with_fixture("samples");
    env.sync();
    let endless =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let out = env.run(&["sql", endless, "--timeout", "0.5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("was stopped") && stderr.contains("--timeout"),
        "{stderr}"
    );

    let doubling = "WITH RECURSIVE c(x) AS (SELECT 'a' UNION ALL SELECT x || x FROM c) SELECT length(x) FROM c";
    let out = env.run(&["sql", doubling, "--max-memory", "64", "--timeout", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("64 MiB") && stderr.contains("--max-memory"),
        "{stderr}"
    );

    // Within the limits the same kind of statement answers.
    let out = env.run(&["sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) SELECT count(*) AS n FROM c", "--json", "--max-memory", "64"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1000"));
}

/// Statements that reach past the index or change the connection are
/// refused with a message naming them, before they run: an `ATTACH` of a
/// FIFO (which would block the open forever) among them. Pragmas that only
/// describe the database still answer.
#[test]
fn attach_detach_and_setting_pragmas_are_refused() {
    let env = Env::with_fixture("samples");
    env.sync();
    let fifo = env.dir.path().join("fifo.db");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let other = env.dir.path().join("other.db");
    let attach_fifo = format!("ATTACH '{}' AS f", fifo.display());
    let attach_other = format!("ATTACH '{}' AS o", other.display());
    let attach_in_select = format!(
        "SELECT * FROM pragma_database_list, (SELECT 1) WHERE 0; ATTACH '{}' AS x",
        other.display()
    );
    for statement in [
        attach_fifo.as_str(),
        attach_other.as_str(),
        "DETACH fts0",
        "PRAGMA query_only = OFF",
        "PRAGMA query_only=0",
        "PRAGMA writable_schema = ON",
        "pragma Writable_Schema(1)",
        "PRAGMA journal_mode = DELETE",
        "PRAGMA user_version = 7",
        "PRAGMA main.cache_size = 1",
        "PRAGMA trusted_schema = 1",
    ] {
        let out = env.run(&["sql", statement, "--timeout", "2"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{statement}: {stderr}");
        assert!(stderr.contains("refuses"), "{statement}: {stderr}");
    }
    let out = env.run(&["sql", &attach_in_select]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!other.exists(), "nothing was created");
    for statement in [
        "PRAGMA table_info(sessions)",
        "PRAGMA user_version",
        "SELECT name FROM pragma_table_info('entries')",
        "SELECT count(*) FROM fts0.fts WHERE fts MATCH 'the'",
    ] {
        let out = env.run(&["sql", statement, "--json"]);
        assert!(
            out.status.success(),
            "{statement}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
