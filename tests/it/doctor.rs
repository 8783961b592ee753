//! `piidx doctor` finds and repairs damage; hostile databases (foreign,
//! newer, not SQLite, read-only, on a full disk) fail cleanly and stay intact.

use std::path::Path;
use std::process::Command;

use crate::util::{Env, db_sql, fts_integrity, fts_match, shard_paths};

/// Cheap identity of a file's bytes (assert_eq on megabytes is unreadable).
fn digest(path: &Path) -> (usize, u64) {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).expect("read");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    (bytes.len(), hasher.finish())
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn doctor_detects_and_repairs_deleted_rows_and_corrupt_fts() {
    let env = Env::with_fixture("samples");
    env.sync();
    let before = env.count("SELECT count(*) FROM entries");
    let healthy = env.run(&["doctor"]);
    assert_eq!(healthy.status.code(), Some(0), "{}", stderr(&healthy));

    db_sql(
        &env.db,
        "DELETE FROM entries WHERE file_id = (SELECT min(file_id) FROM files) AND line_no < 30;",
    );
    // A row no chunk stands for, in the first shard.
    db_sql(
        &shard_paths(&env.db)[0],
        "INSERT INTO fts(rowid, body) VALUES(987654360, 'ghostword');",
    );
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(report["findings"]["fts"].is_string(), "{report}");
    assert_eq!(
        report["findings"]["files_differing"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    let fixed = env.run(&["doctor", "--fix", "--json"]);
    assert_eq!(fixed.status.code(), Some(1), "{}", stderr(&fixed));
    let report: serde_json::Value = serde_json::from_slice(&fixed.stdout).expect("json");
    assert_eq!(report["remaining"], serde_json::json!([]), "{report}");
    assert_eq!(env.count("SELECT count(*) FROM entries"), before);
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM {}",
            fts_match(&env.db, "ghostword")
        )),
        0
    );
    fts_integrity(&env.db);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
}

#[test]
fn doctor_rebuilds_a_destroyed_database_and_keeps_the_old_file() {
    let env = Env::with_fixture("samples");
    env.sync();
    let before = env.count("SELECT count(*) FROM entries");
    // Destroy the header page: the file is no longer SQLite.
    let mut bytes = std::fs::read(&env.db).expect("read db");
    bytes[..100].fill(0x5a);
    std::fs::write(&env.db, &bytes).expect("write db");

    let out = env.run(&["sync", "--root", env.root.to_str().unwrap_or_default()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a SQLite database"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains(&env.db.display().to_string()));

    // The roots cannot be read from the damaged file: --root is needed.
    let no_root = env.run(&["doctor", "--fix"]);
    assert_eq!(no_root.status.code(), Some(2));
    assert!(stderr(&no_root).contains("--root"), "{}", stderr(&no_root));
    assert!(std::fs::read(&env.db).expect("db") == bytes, "db untouched");

    let root = env.root.to_string_lossy().into_owned();
    let fixed = env.run(&["doctor", "--fix", "--root", &root, "--json"]);
    assert_eq!(fixed.status.code(), Some(1), "{}", stderr(&fixed));
    let report: serde_json::Value = serde_json::from_slice(&fixed.stdout).expect("json");
    let backup = report["backup"].as_str().expect("backup path").to_owned();
    assert!(
        std::fs::read(&backup).expect("backup") == bytes,
        "backup is the old file"
    );
    assert_eq!(env.count("SELECT count(*) FROM entries"), before);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
    let litter: Vec<String> = std::fs::read_dir(env.dir.path())
        .expect("list")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".rebuild-"))
        .collect();
    assert!(litter.is_empty(), "left behind: {litter:?}");
}

#[test]
fn quick_check_damage_is_rebuilt_from_recorded_roots() {
    let env = Env::with_fixture("samples");
    env.sync();
    assert!(
        env.run(&["sync", "--machine", "desk-a", "-q"])
            .status
            .success()
    );
    let machine = "SELECT key, value FROM meta WHERE key LIKE 'machine%' ORDER BY key";
    let identity = env.sql(machine);
    let before = env.count("SELECT count(*) FROM entries");
    // Overwrite a page in the middle of the file (not the header).
    let mut bytes = std::fs::read(&env.db).expect("read db");
    let page = 4096 * 5;
    bytes[page..page + 4096].fill(0xff);
    std::fs::write(&env.db, &bytes).expect("write db");
    let out = env.run(&["doctor", "--fix", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(report["findings"]["broken"].is_string(), "{report}");
    assert_eq!(env.count("SELECT count(*) FROM entries"), before);
    // The same machine to a team store (`piidx push`).
    assert_eq!(env.sql(machine), identity);
}

#[test]
fn foreign_and_newer_databases_are_refused_and_left_intact() {
    let env = Env::with_fixture("samples");
    let root = env.root.to_string_lossy().into_owned();
    db_sql(
        &env.db,
        "CREATE TABLE notes(x); INSERT INTO notes VALUES (1);",
    );
    let bytes = digest(&env.db);
    for args in [vec!["sync", "--root", &root], vec!["doctor", "--fix"]] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("not a piidx database"),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(&env.db.display().to_string()));
    }
    assert_eq!(digest(&env.db), bytes);

    let newer = Env::with_fixture("samples");
    newer.sync();
    db_sql(&newer.db, "PRAGMA user_version = 999;");
    let bytes = digest(&newer.db);
    let root = newer.root.to_string_lossy().into_owned();
    for args in [
        vec!["sync", "--root", &root],
        vec!["doctor", "--fix"],
        vec!["sql", "SELECT 1"],
    ] {
        let out = newer.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains("newer piidx"), "{}", stderr(&out));
    }
    assert_eq!(digest(&newer.db), bytes);
}

/// A scratch tmpfs of `size`, unmounted on drop. Mounting needs root (CI
/// runs as root); elsewhere the test fails and says so, unless
/// `PIIDX_TEST_SKIP_ROOT=1` asks to skip it, which is then printed.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).expect("tmpfs mount point");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(Tmpfs(dir.to_owned()));
        }
        let why = format!("cannot mount a tmpfs at {} (needs root)", dir.display());
        assert!(
            std::env::var("PIIDX_TEST_SKIP_ROOT").is_ok_and(|v| v == "1"),
            "{why}; run the tests as root, or set PIIDX_TEST_SKIP_ROOT=1 to skip this one"
        );
        eprintln!("SKIPPED (PIIDX_TEST_SKIP_ROOT=1): {why}");
        None
    }

    fn remount(&self, opts: &str) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Root ignores file modes, so a read-only database is made with a
/// read-only mount: a remounted tmpfs (directory and file read-only) and a
/// read-only bind mount of the file alone (directory writable). Sync says
/// what to do; queries, doctor and searches (those whose shard connections
/// attach the index too) still work.
#[test]
fn read_only_database_fails_cleanly_and_stays_readable() {
    let env = Env::with_fixture("samples");
    let Some(fs) = Tmpfs::mount(&env.dir.path().join("ro"), "64m") else {
        return;
    };
    let db = fs.0.join("index.db");
    let root = env.root.to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_piidx"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .expect("run")
    };
    // Two shards: a search's extra connection attaches its shard, and the
    // index for some queries, on its own.
    assert!(matches!(
        run(&["sync", "--root", &root, "--fts-shards", "2", "-q"])
            .status
            .code(),
        Some(0 | 1)
    ));
    std::fs::write(env.root.join("new.jsonl"), "").expect("touch");
    let bytes = digest(&db);

    assert!(fs.remount("ro"));
    let out = run(&["sync", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("writable"), "{}", stderr(&out));
    assert!(stderr(&out).contains(&db.display().to_string()));
    let sql = run(&["sql", "SELECT count(*) AS n FROM files", "--json"]);
    assert!(sql.status.success(), "read-only query: {}", stderr(&sql));
    for extra in [&[][..], &["--sort", "recent"], &["--project", "proj"]] {
        let search = run(&[&["search", "the", "--json"], extra].concat());
        // 1: no hits (`--project proj` may hold none).
        assert!(
            matches!(search.status.code(), Some(0 | 1)) && stderr(&search).is_empty(),
            "read-only search {extra:?}: {}",
            stderr(&search)
        );
    }
    assert_eq!(run(&["doctor"]).status.code(), Some(0));
    assert_eq!(digest(&db), bytes);

    assert!(fs.remount("rw"));
    let bind = Command::new("sh")
        .arg("-c")
        .arg(r#"mount --bind "$1" "$1" && mount -o remount,ro,bind "$1""#)
        .arg("sh")
        .arg(&db)
        .status()
        .is_ok_and(|s| s.success());
    if bind {
        let out = run(&["sync", "--root", &root]);
        let _ = Command::new("umount").arg(&db).status();
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("is read-only"), "{}", stderr(&out));
        assert_eq!(digest(&db), bytes);
    }
}

#[test]
fn full_disk_fails_cleanly_and_keeps_the_index_consistent() {
    let env = Env::with_fixture("samples");
    let Some(fs) = Tmpfs::mount(&env.dir.path().join("full"), "3m") else {
        return;
    };
    let db = fs.0.join("index.db");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_piidx"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .output()
            .expect("run")
    };
    // A small first root fits.
    let small = env.dir.path().join("small");
    std::fs::create_dir_all(small.join("p")).expect("mkdir");
    let sample = std::fs::read_to_string(
        walkdir::WalkDir::new(&env.root)
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .expect("a sample")
            .path(),
    )
    .expect("read sample");
    let head: String = sample.lines().take(20).map(|l| format!("{l}\n")).collect();
    std::fs::write(small.join("p/a.jsonl"), head).expect("write");
    let small = small.to_string_lossy().into_owned();
    assert_eq!(
        run(&["sync", "--root", &small, "-q"]).status.code(),
        Some(0)
    );
    let entries = |run: &dyn Fn(&[&str]) -> std::process::Output| {
        let out = run(&["sql", "SELECT count(*) AS n FROM entries", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        rows[0]["n"].as_i64().expect("n")
    };
    let before = entries(&run);

    // The samples (6 MB of JSONL) do not fit in 3 MB.
    let root = env.root.to_string_lossy().into_owned();
    let out = run(&["sync", "--root", &root]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("disk full writing"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains(&db.display().to_string()));
    assert!(entries(&run) >= before);
    let doctor = run(&["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).expect("json");
    assert!(report["findings"]["broken"].is_null(), "{report}");
    assert!(report["findings"]["fts"].is_null(), "{report}");
}

#[test]
fn doctor_recounts_fork_copies_changed_behind_its_back() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let usage = |env: &Env| env.run(&["usage", "--by", "session", "--json"]).stdout;
    let before = usage(&env);
    assert!(env.count("SELECT count(*) FROM usage_records WHERE copies = 0") > 0);

    // Every fork copy counted, as if the column had never been kept.
    db_sql(
        &env.db,
        "UPDATE usage_records SET copies = 1; UPDATE tool_call_meta SET copies = 1;",
    );
    assert_ne!(usage(&env), before);
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        report["findings"]["stale_copies"].as_i64() > Some(0),
        "{report}"
    );

    let fixed = env.run(&["doctor", "--fix", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&fixed.stdout).expect("json");
    assert_eq!(report["remaining"], serde_json::json!([]), "{report}");
    assert_eq!(usage(&env), before);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
}

#[test]
fn doctor_finds_stored_json_that_differs_from_the_file() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let expected = crate::util::canonical_dump(&env.db);
    // What schema 9 did to numbers: 0.018966000000000004 stored as 0.018966.
    db_sql(
        &env.db,
        "UPDATE entries SET raw = replace(raw, '0.018966000000000004', '0.018966')
          WHERE raw LIKE '%0.018966000000000004%';",
    );
    let out = env.run(&["doctor"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("stored JSON differs from the file"),
        "{report}"
    );
    let fixed = env.run(&["doctor", "--fix"]);
    assert_eq!(fixed.status.code(), Some(1), "{}", stderr(&fixed));
    assert!(crate::util::canonical_dump(&env.db) == expected);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
}

/// Files are read again on several threads, and the shards checked at
/// once: the report still names every damaged file, in the order of their
/// paths, and every damaged shard, in the order of the shards.
#[test]
fn doctor_names_every_damaged_file_and_shard_in_order() {
    let env = Env::with_fixture("pi152-dirs");
    env.sync();
    let files = env.count("SELECT count(DISTINCT file_id) FROM entries");
    assert!(files > 20, "{files} files: too few to spread over threads");
    db_sql(
        &env.db,
        "DELETE FROM entries WHERE entry_rowid IN (SELECT min(entry_rowid) FROM entries GROUP BY file_id);",
    );
    let shards = shard_paths(&env.db);
    for (shard, path) in shards.iter().enumerate() {
        db_sql(
            path,
            &format!(
                "INSERT INTO fts(rowid, body) VALUES({}, 'ghostword');",
                987_654_360 + shard
            ),
        );
    }
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let paths: Vec<&str> = report["findings"]["files_differing"]
        .as_array()
        .expect("files_differing")
        .iter()
        .map(|diff| diff["path"].as_str().expect("path"))
        .collect();
    assert_eq!(paths.len() as i64, files, "{report}");
    let mut sorted = paths.clone();
    sorted.sort_by(|a, b| Path::new(a).cmp(Path::new(b)));
    assert_eq!(paths, sorted);
    let fts = report["findings"]["fts"].as_str().expect("fts findings");
    let at: Vec<usize> = shards
        .iter()
        .map(|path| {
            fts.find(&format!("shard {}:", path.display()))
                .unwrap_or_else(|| panic!("{} not named in {fts}", path.display()))
        })
        .collect();
    assert!(at.windows(2).all(|pair| pair[0] < pair[1]), "{fts}");
}
