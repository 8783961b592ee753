//! `piidx watch`: appends, new project directories, deletions, rewrites and
//! a root that appears later reach the index through notifications alone;
//! the database it ends with equals a fresh sync of the final tree.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crate::util::{Env, canonical_dump, fts_integrity, jsonl_files};

/// A running `piidx watch`, killed on drop.
struct Watching {
    child: Child,
    /// Its first sync's summary line.
    first: String,
    /// The summary line of each later sync, as it comes.
    lines: Receiver<String>,
}

impl Watching {
    /// Starts watching `root` and waits for its first sync's line.
    fn start(env: &Env, root: &Path) -> Watching {
        let root = root.to_string_lossy().into_owned();
        let mut child = env
            .command(&["watch", "--root", &root, "--json", "--debounce", "50"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start piidx watch");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        // Every line is read: a watcher whose output is closed stops, as
        // any program writing to a closed pipe.
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the first sync");
        assert!(first.contains("files_seen"), "first line: {first:?}");
        Watching {
            child,
            first,
            lines,
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 30 s) until `piidx search WORD` finds it, or, with
/// `gone`, until it finds nothing.
fn until_search(env: &Env, word: &str, found: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.run(&["search", word, "--json"]);
        let hits: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if hits.is_empty() != found {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "watch never made {word:?} {}",
            if found { "searchable" } else { "go away" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn entry(id: &str, text: &str) -> String {
    serde_json::json!({"type": "message", "id": id, "parentId": null,
        "timestamp": "2026-03-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1_772_323_201_000_i64}})
    .to_string()
}

fn session(path: &Path, id: &str, text: &str) {
    fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let header = serde_json::json!({"type": "session", "version": 3, "id": id,
        "timestamp": "2026-03-01T00:00:00.000Z", "cwd": "/home/user/watched"});
    fs::write(path, format!("{header}\n{}\n", entry("m1", text))).expect("write session");
}

#[test]
fn changes_reach_the_index_and_end_equal_to_a_fresh_sync() {
    let env = Env::with_fixture("sessions");
    let watching = Watching::start(&env, &env.root);
    let files = jsonl_files(&env.root);

    // An append to a session Pi is writing.
    let mut line = entry("w1", "quetzalflurb appended while watching");
    line.push('\n');
    fs::OpenOptions::new()
        .append(true)
        .open(&files[0])
        .and_then(|mut file| std::io::Write::write_all(&mut file, line.as_bytes()))
        .expect("append");
    until_search(&env, "quetzalflurb", true);

    // A new project directory, made after the watch started.
    session(
        &env.root
            .join("--home-user-watched--/2026-03-01T00-00-00-000Z_w2.jsonl"),
        "w2",
        "brandnewdirword in a new project",
    );
    until_search(&env, "brandnewdirword", true);

    // A deletion, and a rewrite of another file from scratch.
    fs::remove_file(&files[1]).expect("delete");
    let rewritten = &files[2];
    let header = fs::read_to_string(rewritten)
        .expect("read")
        .lines()
        .next()
        .expect("header")
        .to_owned();
    fs::write(
        rewritten,
        format!("{header}\n{}\n", entry("r1", "zebrafinch rewritten")),
    )
    .expect("rewrite");
    until_search(&env, "zebrafinch", true);
    let deadline = Instant::now() + Duration::from_secs(30);
    while env.count(&format!(
        "SELECT count(*) FROM files WHERE path = '{}'",
        files[1].display()
    )) > 0
    {
        assert!(
            Instant::now() < deadline,
            "the deletion never reached the index"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(watching);

    let fresh = Env::new();
    let root = env.root.to_string_lossy().into_owned();
    let out = fresh.run(&["sync", "--root", &root, "-q"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "fresh sync");
    fts_integrity(&env.db);
    assert!(
        canonical_dump(&env.db) == canonical_dump(&fresh.db),
        "the watched index differs from a fresh sync of the same tree"
    );
}

#[test]
fn a_root_that_appears_later_is_watched_once_it_exists() {
    let env = Env::new();
    let later = env.dir.path().join("later/sessions");
    let _watching = Watching::start(&env, &later);
    session(
        &later.join("--home-user-watched--/2026-03-01T00-00-00-000Z_w3.jsonl"),
        "w3",
        "latecomerword arrives",
    );
    until_search(&env, "latecomerword", true);
}

/// Links in the tree: where a link to a folder elsewhere leads is watched
/// (a session written there reaches the index), and a link to the folder
/// holding the root and the index is not followed. Watching that folder
/// would wake the watcher at each of its own syncs' writes to the index,
/// and sync again, forever.
#[test]
fn a_linked_folder_is_watched_and_a_link_above_the_root_is_not() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let project = env.root.join("--home-user-watched--");
    session(
        &project.join("2026-03-01T00-00-00-000Z_w4.jsonl"),
        "w4",
        "first",
    );
    let elsewhere = env.dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).expect("mkdir elsewhere");
    symlink(&elsewhere, project.join("linked")).expect("link to a folder elsewhere");
    symlink(env.dir.path(), project.join("up")).expect("link to the root's parent");

    let watching = Watching::start(&env, &env.root);
    assert!(
        watching.first.contains("symlink loop"),
        "first sync: {}",
        watching.first
    );

    session(
        &elsewhere.join("2026-03-01T00-00-00-000Z_w5.jsonl"),
        "w5",
        "farawayword behind a link",
    );
    until_search(&env, "farawayword", true);
    // The change's syncs, then quiet: no sync wakes the next one.
    let deadline = Instant::now() + Duration::from_secs(20);
    while watching.lines.recv_timeout(Duration::from_secs(2)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "the watcher keeps syncing with nothing changed"
        );
    }
    drop(watching);
}
