//! Crashes and concurrency: `kill -9` mid-sync, two syncs at once, and
//! readers during a sync. The database must always end equal to a fresh sync.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{Env, canonical_dump, copy_tree, fixtures, fts_integrity};

/// A root with enough data (~18 MB) that a sync takes a while.
fn big_env() -> Env {
    let env = Env::new();
    for copy in 0..3 {
        let dir = env.root.join(format!("copy{copy}"));
        copy_tree(&fixtures().join("samples"), &dir);
    }
    copy_tree(&fixtures().join("sessions"), &env.root.join("sessions"));
    env
}

fn spawn_sync(env: &Env, extra: &[&str]) -> std::process::Child {
    env.command(&["sync", "--quiet", "--root"])
        .arg(&env.root)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sync")
}

fn fresh_dump(env: &Env) -> Vec<String> {
    let fresh = Env::new();
    let root = env.root.to_string_lossy().into_owned();
    let out = fresh.run(&["sync", "--root", &root, "--quiet"]);
    assert!(matches!(out.status.code(), Some(0) | Some(1)));
    canonical_dump(&fresh.db)
}

#[test]
fn sigkill_at_any_point_then_resume_equals_fresh_sync() {
    let env = big_env();
    let expected = fresh_dump(&env);
    for delay_ms in [20, 80, 200, 450] {
        let mut child = spawn_sync(&env, &[]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        if env.db.exists() {
            let conn = rusqlite::Connection::open(&env.db).expect("open after crash");
            let check: String = conn
                .query_row("PRAGMA quick_check", [], |row| row.get(0))
                .expect("quick_check");
            assert_eq!(check, "ok", "database damaged after kill at {delay_ms} ms");
        }
    }
    env.sync();
    fts_integrity(&env.db);
    assert!(
        canonical_dump(&env.db) == expected,
        "resumed sync differs from a fresh sync"
    );
}

#[test]
fn a_second_sync_waits_then_gives_up_with_exit_code_3() {
    let env = big_env();
    let mut first = spawn_sync(&env, &[]);
    // Wait until the first sync holds the lock (its database exists).
    let started = Instant::now();
    while !env.db.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = spawn_sync(&env, &["--wait", "0"])
        .wait_with_output()
        .expect("second");
    let first_status = first.wait().expect("first");
    assert!(matches!(first_status.code(), Some(0) | Some(1)));
    if second.status.code() == Some(3) {
        let message = String::from_utf8_lossy(&second.stderr);
        assert!(message.contains("another `piidx sync`"), "{message}");
    } else {
        // The first finished before the second looked: it must have found nothing to do.
        assert!(matches!(second.status.code(), Some(0) | Some(1)));
    }
    // A waiting sync (default --wait) succeeds once the lock is free.
    let mut third = spawn_sync(&env, &[]);
    let mut fourth = spawn_sync(&env, &[]);
    assert!(matches!(
        third.wait().expect("third").code(),
        Some(0) | Some(1)
    ));
    assert!(matches!(
        fourth.wait().expect("fourth").code(),
        Some(0) | Some(1)
    ));
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
}

#[test]
fn readers_keep_working_during_a_sync() {
    let env = big_env();
    env.sync();
    // Force a full re-read so the writer is busy for a while.
    let mut writer = spawn_sync(&env, &["--full"]);
    let mut queries = 0;
    loop {
        let out = env.run(&["sql", "SELECT count(*) FROM entries"]);
        assert!(
            out.status.success(),
            "reader failed during sync: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        queries += 1;
        if writer.try_wait().expect("poll writer").is_some() {
            break;
        }
    }
    assert!(queries > 0);
}
