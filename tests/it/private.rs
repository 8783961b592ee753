//! The index is its user's alone: every file and directory any command
//! creates is owner-only whatever the umask, and an index left readable by
//! others is reported with the fix.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::Env;

/// `piidx --db <db> ARGS` started under `umask`.
fn run_with_umask(env: &Env, db: &Path, umask: u32, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_piidx"));
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("PIIDX_DB")
        .env("TZ", "UTC")
        .env("HOME", env.dir.path());
    // SAFETY: umask(2) is async-signal-safe and cannot fail.
    unsafe {
        command.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    command.output().expect("run piidx")
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn every_file_and_directory_piidx_creates_is_owner_only_under_any_umask() {
    for umask in [0o022, 0o000] {
        let env = Env::with_fixture("pi152");
        let data = env.dir.path().join("data");
        let db = data.join("piidx/index.db");
        let root = env.root.to_string_lossy().into_owned();
        let export = data.join("exported.jsonl").to_string_lossy().into_owned();
        let commands: &[&[&str]] = &[
            &["sync", "--root", &root],
            &["search", "listAll"],
            &["sessions"],
            &["show", "01a1b016"],
            &["tree", "01a1b016"],
            &["export", "01a1b016", "-o", &export],
            &["usage"],
            &["tools"],
            &["subagents"],
            &["sql", "SELECT count(*) FROM entries"],
            &["roots"],
            &["sync", "--root", &root, "--full"],
            &["doctor", "--fix"],
        ];
        for args in commands {
            let out = run_with_umask(&env, &db, umask, args);
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{args:?} under umask {umask:03o}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut seen = 0;
        for entry in walkdir::WalkDir::new(&data) {
            let entry = entry.expect("walk");
            let (path, want) = if entry.file_type().is_dir() {
                (entry.path(), 0o700)
            } else {
                (entry.path(), 0o600)
            };
            assert_eq!(
                mode(path),
                want,
                "{} under umask {umask:03o}",
                path.display()
            );
            seen += 1;
        }
        // The directories, the database, its shards, the lock and the export.
        assert!(seen >= 7, "only {seen} paths under {}", data.display());
    }
}

#[test]
fn an_index_others_can_read_is_reported_and_doctor_fix_makes_it_private() {
    let env = Env::with_fixture("pi152");
    env.sync();
    let shard = env.dir.path().join("index.db.fts0");
    for path in [&env.db, &shard] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod");
    }

    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("can be read or written by other users (mode 0644)")
            && stderr.contains("chmod go-rwx"),
        "{stderr}"
    );

    let out = env.run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("other users"), "{stdout}");

    // Found and fixed: exit 1, as for every repair.
    let out = env.run(&["doctor", "--fix"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("fixed: made"), "{stdout}");
    assert_eq!(mode(&env.db), 0o600);
    assert_eq!(mode(&shard), 0o600);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
    assert_eq!(env.run(&["sync", "--root", &root]).status.code(), Some(0));
}
