//! An ordinary user's view: what cannot be read is not a deletion, and a
//! hot journal this user may not roll back gets a message that says so.
//! As root (which ignores file modes) every `piidx` runs as `nobody`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::{Env, canonical_dump, jsonl_files};

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

const NOBODY: u32 = 65534;

/// `piidx --db <db> ARGS` as an ordinary user.
fn run_as_user(env: &Env, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
    let mut command = if is_root() {
        let mut command = Command::new("setpriv");
        command.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "--",
            env!("CARGO_BIN_EXE_piidx"),
        ]);
        command
    } else {
        Command::new(env!("CARGO_BIN_EXE_piidx"))
    };
    command
        .arg("--db")
        .arg(&env.db)
        .args(args)
        .env_remove("PIIDX_DB")
        .env("HOME", env.dir.path());
    for (key, value) in extra_env {
        command.env(key, value);
    }
    command.output().expect("run piidx as a user")
}

/// Gives the whole test directory to the user the commands run as.
fn hand_over(env: &Env) {
    if !is_root() {
        return;
    }
    for entry in walkdir::WalkDir::new(env.dir.path()) {
        let entry = entry.expect("walk");
        std::os::unix::fs::chown(entry.path(), Some(NOBODY), Some(NOBODY)).expect("chown");
    }
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

fn sync_json(env: &Env) -> (Option<i32>, serde_json::Value, String) {
    let root = env.root.to_string_lossy().into_owned();
    let out = run_as_user(env, &["sync", "--root", &root, "--json"], &[]);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code(),
        report,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unreadable_directories_and_files_keep_their_rows_and_exit_4() {
    let env = Env::with_fixture("sessions");
    hand_over(&env);
    let (code, _, stderr) = sync_json(&env);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    let before = canonical_dump(&env.db);

    let project = env.root.join("--home-user-proj-a--");
    let file = jsonl_files(&env.root.join("--home-user-proj-b--"))
        .into_iter()
        .next()
        .expect("a proj-b session");
    for (what, path, mode) in [
        ("a project directory", project.as_path(), 0o755),
        ("the root", env.root.as_path(), 0o755),
        ("an indexed file", file.as_path(), 0o644),
    ] {
        chmod(path, 0o000);
        let (code, report, stderr) = sync_json(&env);
        chmod(path, mode);
        assert_eq!(code, Some(4), "{what}: {stderr}");
        assert_eq!(report["files_removed"], 0, "{what}: {report}");
        assert!(
            stderr.contains(&path.display().to_string()),
            "{what}: the message names it: {stderr}"
        );
        assert!(
            canonical_dump(&env.db) == before,
            "{what}: rows changed while it could not be read"
        );
    }
    let (code, report, stderr) = sync_json(&env);
    assert!(matches!(code, Some(0 | 1)), "{stderr}");
    assert_eq!(report["unreadable"], serde_json::json!([]));
    assert!(canonical_dump(&env.db) == before);
}

#[test]
fn a_hot_journal_the_user_may_not_roll_back_gets_a_clear_message() {
    let env = Env::with_fixture("sessions");
    hand_over(&env);
    let root = env.root.to_string_lossy().into_owned();
    let killed = run_as_user(
        &env,
        &["sync", "--quiet", "--root", &root],
        &[
            ("PIIDX_TEST_KILL_AT", "batch:4"),
            ("PIIDX_TEST_BATCH_BYTES", "4096"),
        ],
    );
    assert!(killed.status.code().is_none(), "the sync was not killed");
    // The index is now read-only for this user (the file and its directory).
    chmod(&env.db, 0o444);
    chmod(env.dir.path(), 0o555);
    let read = run_as_user(&env, &["sql", "SELECT count(*) FROM entries"], &[]);
    chmod(env.dir.path(), 0o755);
    chmod(&env.db, 0o644);
    let message = String::from_utf8_lossy(&read.stderr);
    assert_eq!(read.status.code(), Some(2), "{message}");
    assert!(
        message.contains("unfinished write") && message.contains("piidx sync"),
        "{message}"
    );
    assert!(!message.contains("make it writable"), "{message}");
    // Writable again: any read rolls it back.
    let read = run_as_user(&env, &["sql", "SELECT count(*) FROM entries"], &[]);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
}
