//! Crashes and concurrency: `kill -9` mid-sync, two syncs at once, and
//! readers during a sync. The database must always end equal to a fresh sync.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{
    Env, canonical_dump, copy_tree, fixtures, fts_integrity, word_segments, write_user_session,
};

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
    // Each run dies at a crash point it is sure to reach (small batches
    // give every run many commits) and the next resumes from what it left:
    // inside a batch, after a commit, inside a shard's transaction.
    for kill_at in [
        "batch:2", "commit:1", "shard:1", "commit:4", "batch:9", "shard:3",
    ] {
        let out = sync_killed_at(&env, kill_at, 64 << 10);
        assert!(
            was_killed(&out),
            "the sync was not killed at {kill_at}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conn = rusqlite::Connection::open(&env.db).expect("open after crash");
        piidx::store::register_functions(&conn).expect("sql functions");
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .expect("quick_check");
        assert_eq!(check, "ok", "database damaged after a kill at {kill_at}");
    }
    env.sync();
    fts_integrity(&env.db);
    assert!(
        canonical_dump(&env.db) == expected,
        "resumed sync differs from a fresh sync"
    );
}

/// A sync held right after its first commit, with the lock taken
/// (`PIIDX_TEST_HOLD=commit`), until the test creates `<dir>/release`.
struct HeldSync {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl HeldSync {
    fn start(env: &Env, extra: &[&str]) -> HeldSync {
        let dir = tempfile::tempdir().expect("tempdir");
        let child = env
            .command(&["sync", "--quiet", "--root"])
            .arg(&env.root)
            .args(extra)
            .env("PIIDX_TEST_HOLD", "commit")
            .env("PIIDX_TEST_HOLD_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sync");
        let started = Instant::now();
        while !dir.path().join("held").exists() {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the sync never reached its first commit"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        HeldSync { child, dir }
    }

    fn release(mut self) -> std::process::ExitStatus {
        std::fs::write(self.dir.path().join("release"), "").expect("release the sync");
        self.child.wait().expect("wait for the held sync")
    }
}

#[test]
fn a_second_sync_waits_then_gives_up_with_exit_code_3() {
    let env = big_env();
    let first = HeldSync::start(&env, &[]);
    // The first sync holds the lock until released: the second cannot wait.
    let second = spawn_sync(&env, &["--wait", "0"])
        .wait_with_output()
        .expect("second");
    assert_eq!(second.status.code(), Some(3));
    let message = String::from_utf8_lossy(&second.stderr);
    assert!(message.contains("another `piidx sync`"), "{message}");
    assert!(matches!(first.release().code(), Some(0) | Some(1)));
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
    // A full re-read, held inside its run (lock taken, one batch committed,
    // the rest to come): readers are served meanwhile, from committed data.
    let writer = HeldSync::start(&env, &["--full"]);
    for question in [
        vec!["sql", "SELECT count(*) FROM entries"],
        vec!["sessions", "--json"],
        vec!["search", "the", "--json"],
    ] {
        let out = env.run(&question);
        assert!(
            out.status.success(),
            "{question:?} failed during a sync: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stdout.is_empty(), "{question:?} answered nothing");
    }
    assert!(env.count("SELECT count(*) FROM entries") > 0);
    assert!(matches!(writer.release().code(), Some(0) | Some(1)));
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
}

/// `piidx sync --root <root>` with a crash point set (see `src/fault.rs`):
/// batches of `batch_bytes`, each committed, and SIGKILL at `kill_at`.
fn sync_killed_at(env: &Env, kill_at: &str, batch_bytes: u64) -> std::process::Output {
    env.command(&["sync", "--quiet", "--root"])
        .arg(&env.root)
        .env("PIIDX_TEST_KILL_AT", kill_at)
        .env("PIIDX_TEST_BATCH_BYTES", batch_bytes.to_string())
        .output()
        .expect("run sync")
}

/// `piidx sync --full` in small batches, killed at `kill_at`.
fn full_resync_killed_at(env: &Env, kill_at: &str) -> std::process::Output {
    env.command(&["sync", "--quiet", "--full", "--root"])
        .arg(&env.root)
        .env("PIIDX_TEST_KILL_AT", kill_at)
        .env("PIIDX_TEST_BATCH_BYTES", "4096")
        .output()
        .expect("run sync")
}

fn was_killed(out: &std::process::Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    out.status.signal() == Some(9)
}

#[test]
fn a_sync_killed_inside_a_large_file_resumes_it_and_doctor_sees_the_gap() {
    let env = Env::with_fixture("samples");
    // Files written long ago: a sync trusts their stat (a file modified
    // within the last seconds is always looked at again).
    crate::util::age_files(&env.root);
    let expected = fresh_dump(&env);
    // The samples hold ~1–2.4 MB files: 64 KB batches give each of them
    // many committed batches, and the third commit falls inside the first.
    let out = sync_killed_at(&env, "commit:3", 64 << 10);
    assert!(
        was_killed(&out),
        "the sync was not killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let short =
        env.count("SELECT count(*) FROM files WHERE status = 'indexed' AND offset < 900000");
    assert!(short > 0, "no file was left partly indexed");

    let doctor = env.run(&["doctor", "--json"]);
    assert_eq!(
        doctor.status.code(),
        Some(1),
        "doctor must not call a partly indexed file healthy: {}",
        String::from_utf8_lossy(&doctor.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("json");
    let problems = report["problems"].to_string();
    assert!(problems.contains("not in the index"), "{problems}");

    env.sync();
    env.sync();
    fts_integrity(&env.db);
    assert!(
        canonical_dump(&env.db) == expected,
        "a resumed sync differs from a fresh sync"
    );
    let healthy = env.run(&["doctor"]);
    assert_eq!(
        healthy.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&healthy.stdout)
    );
}

#[test]
fn readers_recover_a_hot_journal_left_by_a_killed_first_sync() {
    // A first sync loads with a rollback journal; killed with pages of an
    // open transaction in the file, it leaves a hot journal behind.
    let env = Env::with_fixture("sessions");
    let out = sync_killed_at(&env, "batch:4", 4 << 10);
    assert!(was_killed(&out));
    let mut journal = env.db.as_os_str().to_owned();
    journal.push("-journal");
    assert!(
        std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0),
        "no hot journal was left to test with"
    );
    let doctor = env.run(&["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    assert!(report.contains("unfinished write"), "{report}");
    let sql = env.run(&["sql", "SELECT count(*) AS n FROM entries"]);
    assert!(
        sql.status.success(),
        "a read after the crash failed: {}",
        String::from_utf8_lossy(&sql.stderr)
    );
    env.sync();
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
}

#[test]
fn search_recovers_a_hot_journal_left_in_a_shard() {
    let env = Env::with_fixture("sessions");
    env.sync();
    // Re-index everything; die inside the first shard transaction.
    let out = env
        .command(&["sync", "--quiet", "--full", "--root"])
        .arg(&env.root)
        .env("PIIDX_TEST_KILL_AT", "shard:1")
        .output()
        .expect("run sync");
    assert!(was_killed(&out));
    // Shard writers never spill before their commit, so a kill leaves a
    // hot journal only inside SQLite's commit, which no hook reaches: the
    // first shard is made to look like that.
    leave_hot_journal(&crate::util::shard_paths(&env.db).remove(0));
    let fixed = env.run(&["doctor", "--fix"]);
    let report = String::from_utf8_lossy(&fixed.stdout);
    assert!(
        report.contains("rolled back the unfinished write"),
        "{report}"
    );
    let search = env.run(&["search", "zebrafrost", "--json"]);
    assert!(
        search.status.success(),
        "search after the crash failed: {}",
        String::from_utf8_lossy(&search.stderr)
    );
    env.sync();
    fts_integrity(&env.db);
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
}

/// Leaves `shard` as a process that died inside a write transaction does:
/// pages of the unfinished transaction in the file, their originals in a
/// hot journal. A copy is written with a one-page cache (so SQLite spills
/// to the file before the commit), and the copy's file and journal, taken
/// in that state, replace the shard's.
fn leave_hot_journal(shard: &std::path::Path) {
    let scratch = tempfile::tempdir().expect("tempdir");
    let copy = scratch.path().join("shard");
    std::fs::copy(shard, &copy).expect("copy the shard");
    let conn = rusqlite::Connection::open(&copy).expect("open the copy");
    conn.execute_batch(
        "PRAGMA journal_mode = TRUNCATE; PRAGMA cache_size = 1; PRAGMA cache_spill = ON; BEGIN;
         CREATE TABLE unfinished(x);
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO unfinished SELECT randomblob(1000) FROM n;
         UPDATE shard SET indexed_upto = -1;",
    )
    .expect("write without committing");
    let mut journal = copy.clone().into_os_string();
    journal.push("-journal");
    let mut shard_journal = shard.to_owned().into_os_string();
    shard_journal.push("-journal");
    assert!(
        std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0),
        "the copy has a hot journal"
    );
    std::fs::copy(&copy, shard).expect("replace the shard");
    std::fs::copy(&journal, &shard_journal).expect("leave the journal");
}

/// A long read transaction on every shard (rollback journal: a writer
/// must wait for it to end before it can commit).
fn hold_shards(db: &std::path::Path) -> Vec<rusqlite::Connection> {
    crate::util::shard_paths(db)
        .iter()
        .map(|shard| {
            let reader = rusqlite::Connection::open(shard).expect("open shard");
            reader.execute_batch("BEGIN").expect("begin");
            let _: i64 = reader
                .query_row("SELECT count(*) FROM fts", [], |row| row.get(0))
                .expect("read shard");
            reader
        })
        .collect()
}

/// `piidx sync --full`, which must succeed.
fn full_resync(env: &Env) {
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--full", "--root", &root, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The shards hold exactly the index's chunks, `doctor` is content, no
/// shard written anew is left beside them, and `word` is found.
fn sound_and_finds(env: &Env, word: &str) {
    fts_integrity(&env.db);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
    let dir = env.db.parent().expect("the index's folder");
    let left: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".new"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let hit = env.run(&["search", word, "--json"]);
    assert!(
        String::from_utf8_lossy(&hit.stdout).contains(word),
        "{word}"
    );
}

#[test]
fn a_reader_holding_a_shard_delays_its_text_but_never_fails_the_sync() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let readers = hold_shards(&env.db);
    let text = serde_json::json!("the glacierwick notes");
    write_user_session(&env.root.join("--held--"), "held", text);
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("held open by another process"), "{stderr}");
    // The main database committed; doctor sees the shard behind.
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    let doctor = env.run(&["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert_eq!(doctor.status.code(), Some(1), "{report}");
    assert!(report.contains("is behind"), "{report}");
    drop(readers);
    env.sync();
    sound_and_finds(&env, "glacierwick");
}

#[test]
fn a_full_resync_writes_new_shards_beside_those_readers_hold() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let readers = hold_shards(&env.db);
    let rows = |reader: &rusqlite::Connection| -> i64 {
        reader
            .query_row("SELECT count(*) FROM fts_docsize", [], |row| row.get(0))
            .expect("count rows")
    };
    let before: Vec<i64> = readers.iter().map(rows).collect();
    full_resync(&env);
    // The readers still see the shards as they were, in their transactions.
    assert_eq!(readers.iter().map(rows).collect::<Vec<_>>(), before);
    drop(readers);
    // The files at the shards' paths are new ones, holding this sync's
    // rows only.
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    sound_and_finds(&env, "zebrafrost");
}

/// The first sync after an upgrade that changed the parser reads every
/// file again, as `--full` does, and like it writes new shard files beside
/// the old ones (killed in a shard's transaction, it has left them there,
/// and the next sync makes it good); a sync that reads only a small file
/// again writes the shards in place.
#[test]
fn a_sync_after_a_parser_upgrade_writes_the_shards_anew() {
    let written_beside = |env: &Env| -> usize {
        let dir = env.db.parent().expect("the index's folder");
        std::fs::read_dir(dir)
            .expect("list")
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".new"))
            .count()
    };
    let older_parser = |env: &Env, files: &str| {
        let conn = rusqlite::Connection::open(&env.db).expect("open");
        conn.execute_batch(&format!("UPDATE files SET parser_version = 1 {files}"))
            .expect("make files stale");
    };
    let env = Env::with_fixture("sessions");
    env.sync();
    older_parser(&env, "");
    assert!(was_killed(&sync_killed_at(&env, "shard:1", 4 << 10)));
    assert!(written_beside(&env) > 0, "the shards were written in place");
    env.sync();
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    sound_and_finds(&env, "zebrafrost");
    older_parser(
        &env,
        "WHERE file_id = (SELECT file_id FROM files WHERE status = 'indexed' ORDER BY size LIMIT 1)",
    );
    assert!(was_killed(&sync_killed_at(&env, "shard:1", 4 << 10)));
    assert_eq!(written_beside(&env), 0, "one small file read again");
    env.sync();
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    sound_and_finds(&env, "zebrafrost");
}

/// A first sync cut short is resumed as a bulk load (rollback journal), not
/// in WAL mode: killed again inside a batch, the resumed sync too leaves a
/// hot journal on the main file. Then a sync finishes it, equal to a fresh one.
#[test]
fn a_first_sync_cut_short_is_resumed_as_a_bulk_load() {
    let env = Env::with_fixture("sessions");
    let expected = fresh_dump(&env);
    let mut journal = env.db.as_os_str().to_owned();
    journal.push("-journal");
    let hot = || std::fs::metadata(&journal).is_ok_and(|m| m.len() > 0);
    assert!(was_killed(&sync_killed_at(&env, "commit:2", 4 << 10)));
    assert!(!hot(), "killed after a commit: no open transaction");
    assert!(was_killed(&sync_killed_at(&env, "batch:2", 4 << 10)));
    assert!(hot(), "the resumed load wrote with a rollback journal");
    env.sync();
    assert!(canonical_dump(&env.db) == expected);
}

/// A first load counts fork copies once, at its end, and goes without the
/// two indexes of random keys meanwhile (each commit rewrote most of their
/// pages). Cut short, it has neither: `doctor` says the first sync is
/// unfinished rather than calling every copy wrong, and the sync that
/// finishes it (or `doctor --fix`) builds the indexes and counts the
/// copies as a fresh sync does.
#[test]
fn a_first_sync_cut_short_counts_fork_copies_when_it_ends() {
    for finish in ["sync", "doctor --fix"] {
        let env = Env::with_fixture("sessions");
        let expected = fresh_dump(&env);
        assert!(was_killed(&sync_killed_at(&env, "commit:3", 4 << 10)));
        assert!(
            env.count("SELECT count(*) FROM usage_records") > 0,
            "{finish}: nothing was loaded before the kill"
        );
        assert_eq!(
            env.count(crate::util::FORK_KEY_INDEXES),
            0,
            "{finish}: indexes during the load"
        );

        let doctor = env.run(&["doctor", "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("json");
        assert_eq!(
            report["findings"]["first_sync_unfinished"], true,
            "{report}"
        );
        assert_eq!(report["findings"]["stale_copies"], 0, "{report}");
        assert!(
            report["problems"]
                .to_string()
                .contains("the first sync was cut short"),
            "{report}"
        );

        match finish {
            "sync" => {
                env.sync();
            }
            _ => {
                let fixed = env.run(&["doctor", "--fix", "--json"]);
                let report: serde_json::Value = serde_json::from_slice(&fixed.stdout)
                    .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&fixed.stderr)));
                assert_eq!(report["remaining"], serde_json::json!([]), "{report}");
            }
        }
        assert_eq!(
            env.count(crate::util::FORK_KEY_INDEXES),
            2,
            "{finish}: indexes after the load"
        );
        assert!(canonical_dump(&env.db) == expected, "{finish}");
        assert_eq!(env.run(&["doctor"]).status.code(), Some(0), "{finish}");
    }
}

#[test]
fn a_full_resync_killed_on_its_way_is_made_good_by_the_next_sync() {
    // After a main commit (the new shards half written, the old ones
    // holding rows the index no longer has), and inside a new shard's
    // transaction.
    for kill_at in ["commit:2", "shard:2"] {
        let env = Env::with_fixture("sessions");
        env.sync();
        assert!(
            was_killed(&full_resync_killed_at(&env, kill_at)),
            "{kill_at}: the sync was not killed"
        );
        env.sync();
        assert!(canonical_dump(&env.db) == fresh_dump(&env), "{kill_at}");
        sound_and_finds(&env, "zebrafrost");
    }
}

/// A full re-read killed after it emptied `message_fts` and before it put
/// back the messages it had not written again: `doctor` says so, and the
/// next sync puts them back before it deletes any message (FTS5 must be
/// told a deleted row's text, which it cannot be for a row it lacks), here
/// those of every file, each cut by its last line.
#[test]
fn a_full_resync_killed_leaves_message_fts_behind_until_the_next_sync() {
    let env = Env::with_fixture("sessions");
    env.sync();
    assert!(
        was_killed(&full_resync_killed_at(&env, "commit:2")),
        "the sync was not killed"
    );
    let doctor = env.run(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("json");
    assert!(
        report["findings"]["fts"]
            .as_str()
            .is_some_and(|found| found.contains("message_fts lacks the messages")),
        "{report}"
    );
    for file in crate::util::jsonl_files(&env.root) {
        let text = std::fs::read_to_string(&file).expect("read");
        let kept = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .map_or("", |(head, _)| head);
        std::fs::write(&file, format!("{kept}\n")).expect("cut the last line");
    }
    env.sync();
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    fts_integrity(&env.db);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
}

#[test]
fn a_full_resync_indexes_the_rows_kept_of_deleted_files_again() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let root = env.root.to_string_lossy().into_owned();
    let gone = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|file| std::fs::read_to_string(file).is_ok_and(|text| text.contains("zebrafrost")))
        .expect("a fixture with the word");
    std::fs::remove_file(&gone).expect("remove");
    let kept = env.run(&["sync", "--keep-deleted", "--root", &root, "--json"]);
    assert!(matches!(kept.status.code(), Some(0) | Some(1)));
    let chunks =
        "SELECT count(*) FROM chunks c JOIN files f USING (file_id) WHERE f.status = 'deleted'";
    assert!(env.count(chunks) > 0, "no rows kept");
    // The re-read rewrites every file there is; the kept rows stay, and
    // the new shards index them too.
    let full = env.run(&[
        "sync",
        "--full",
        "--keep-deleted",
        "--root",
        &root,
        "--json",
    ]);
    assert!(matches!(full.status.code(), Some(0) | Some(1)));
    assert!(env.count(chunks) > 0, "kept rows lost");
    sound_and_finds(&env, "zebrafrost");
}

#[test]
fn a_full_resync_over_a_shard_left_with_a_hot_journal_ends_sound() {
    let env = Env::with_fixture("sessions");
    env.sync();
    // A shard writer died inside its commit and nothing has opened the
    // shard since. The re-read plays the journal back into the old file
    // before the new one takes its name (`replace_shard`).
    leave_hot_journal(&crate::util::shard_paths(&env.db).remove(0));
    full_resync(&env);
    // The shards go on taking rows.
    write_user_session(
        &env.root.join("--after--"),
        "after",
        serde_json::json!("emberlode"),
    );
    env.sync();
    assert!(canonical_dump(&env.db) == fresh_dump(&env));
    sound_and_finds(&env, "emberlode");
}

/// A shard's first load does not merge as it goes: when it gathers
/// `PIIDX_TEST_LOAD_SEGMENTS` segments it merges them, in steps, and at
/// its end each index is one segment and FTS5 merges as it goes again. A
/// load killed on the way is finished (merged, settings back) by the next
/// sync, which equals a fresh one.
#[test]
fn a_first_load_merges_its_shards_once_at_its_end() {
    /// `purge_pending`, `automerge` and the word index's segments.
    fn shard_state(path: &std::path::Path) -> (i64, Option<i64>, i64) {
        let conn = rusqlite::Connection::open(path).expect("open shard");
        let pending = conn
            .query_row("SELECT purge_pending FROM shard", [], |row| row.get(0))
            .expect("purge_pending");
        let automerge = conn
            .query_row(
                "SELECT v FROM fts_config WHERE k = 'automerge'",
                [],
                |row| row.get(0),
            )
            .ok();
        (pending, automerge, word_segments(path))
    }
    let env = Env::with_fixture("sessions");
    let expected = fresh_dump(&env);
    let out = env
        .command(&["sync", "--quiet", "--root"])
        .arg(&env.root)
        .env("PIIDX_TEST_KILL_AT", "shard:20")
        .env("PIIDX_TEST_BATCH_BYTES", "2048")
        .env("PIIDX_TEST_LOAD_SEGMENTS", "3")
        .output()
        .expect("run sync");
    assert!(was_killed(&out), "{}", String::from_utf8_lossy(&out.stderr));
    // Listed, not read from the index: the kill may leave its journal hot.
    let name = env
        .db
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let shards: Vec<_> = (0..)
        .map(|k| env.db.with_file_name(format!("{name}.fts{k}")))
        .take_while(|path| path.exists())
        .collect();
    assert!(!shards.is_empty());
    for shard in &shards {
        let (pending, automerge, segments) = shard_state(shard);
        assert_eq!((pending, automerge), (1, Some(0)), "{}", shard.display());
        // About 18 commits each in all, and 8 or more committed by the
        // kill (the shards keep within two of one another), a segment or
        // more apiece: merged at three, so at most three, which the kill
        // may catch between a commit and its merge.
        assert!((1..=3).contains(&segments), "{segments}");
    }
    env.sync();
    assert!(canonical_dump(&env.db) == expected);
    for shard in &shards {
        assert_eq!(shard_state(shard), (0, Some(4), 1), "{}", shard.display());
    }
    sound_and_finds(&env, "zebrafrost");
}
