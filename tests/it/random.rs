//! Random trees written by the agents' own code, and what that code
//! computes on them: Pi 1.5.2's `SessionManager` (fixtures/random152, from
//! `fixtures/generate/gen-random152.mjs`; fixtures/expected/random152.json)
//! and oh-my-pi's (fixtures/random-omp, from
//! `fixtures/generate/omp/gen-random-omp.ts`;
//! fixtures/expected/random-omp.json) and pi_agent_rust's `Session`
//! (fixtures/random-port, from `fixtures/generate/port`;
//! fixtures/expected/random-port.json): every operation each has, in random
//! order. The lists, each file's current branch, Pi's model contexts and
//! totals must be theirs, file for file; search must find each word planted
//! in Pi's and the port's texts in exactly its entries; and the files, synced while they
//! grow, must end in what one fresh sync writes.

use std::fs;
use std::path::Path;

use serde_json::Value;

use piidx::query::tree::{SessionTree, build_context, resolve};
use piidx::store::Index;

use crate::util::{
    Env, assert_same_as_fresh_sync, assert_totals_are_pis, context_digests, copy_tree, db_sql,
    expected_context, fixtures, jsonl_files, string_list,
};

/// Where the generator wrote the tree (absolute paths inside it point there).
const FAKE_ROOT: &str = "/tmp/pi-fixture-random152";

fn expected() -> Value {
    read_expected("random152.json")
}

fn read_expected(name: &str) -> Value {
    let text = fs::read_to_string(fixtures().join("expected").join(name)).expect("expected");
    serde_json::from_str(&text).expect("expected JSON")
}

/// `piidx sessions --json`, the temporary root written as `fake_root`
/// (where the generator wrote the tree).
fn sessions_json(env: &Env, fake_root: &str) -> Vec<Value> {
    let out = env.run(&["sessions", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = env.root.to_string_lossy().into_owned();
    let text = String::from_utf8(out.stdout)
        .expect("utf-8")
        .replace(&root, fake_root);
    serde_json::from_str(&text).expect("sessions --json")
}

/// `piidx export FILE` gives back the file's bytes.
pub(crate) fn assert_exports_as_written(env: &Env, file: &Path) {
    let out = env.run(&["export", &file.to_string_lossy()]);
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == fs::read(file).expect("read"),
        "{}: export differs from the file",
        file.display()
    );
}

/// `piidx sessions --json` equals Pi's `listAll()`, order included.
#[test]
fn the_list_is_pis_list_all() {
    let env = Env::with_fixture("random152");
    env.sync();
    let mut ours = sessions_json(&env, FAKE_ROOT);
    for session in &mut ours {
        session.as_object_mut().expect("object").remove("agent");
    }
    let mut theirs = expected()["listAll"].as_array().expect("listAll").clone();
    for info in &mut theirs {
        info.as_object_mut()
            .expect("object")
            .remove("allMessagesText");
    }
    assert!(theirs.len() >= 40, "a tree this small proves little");
    assert_eq!(ours.len(), theirs.len(), "number of sessions");
    for (ours, pi) in ours.iter().zip(&theirs) {
        assert_eq!(ours, pi);
    }
}

/// Each file's current branch (`getBranch()`) and the model context Pi
/// builds from it (`buildSessionProjection()`: each message's source entry,
/// role and exact JSON) are piidx's.
#[test]
fn every_branch_and_context_is_pis() {
    let env = Env::with_fixture("random152");
    env.sync();
    let store = Index::open(&env.db).expect("open");
    let expected = expected();
    let files = expected["files"].as_object().expect("files");
    assert!(files.len() >= 40, "a tree this small proves little");
    for (rel, want) in files {
        assert!(
            want.get("error").is_none(),
            "{rel}: Pi could not open it: {want}"
        );
        let path = env.root.join(rel).to_string_lossy().into_owned();
        let found = resolve(&store, &path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let loaded = SessionTree::load_whole(&store, found).expect("load");
        let leaf = loaded.leaf().expect("leaf");
        let branch = loaded.path_to(leaf);
        let ids: Vec<&str> = branch
            .iter()
            .map(|&node| loaded.nodes[node].id.as_str())
            .collect();
        let pi_ids: Vec<&str> = want["branch"]
            .as_array()
            .expect("branch")
            .iter()
            .map(|id| id.as_str().unwrap_or("?"))
            .collect();
        assert_eq!(ids, pi_ids, "{rel}: current branch");
        let ours = context_digests(&loaded, &branch);
        let theirs = expected_context(&want["messages"]);
        assert_eq!(ours, theirs, "{rel}: model context");
    }
}

/// Each file comes back from `piidx export` byte for byte, and its usage
/// records add up to Pi's own session totals (`getSessionStats`).
#[test]
fn every_file_exports_as_written_and_adds_up_to_pis_totals() {
    let env = Env::with_fixture("random152");
    env.sync();
    let expected = expected();
    let files = expected["files"].as_object().expect("files");
    assert!(files.len() >= 40, "a tree this small proves little");
    for (rel, want) in files {
        let path = env.root.join(rel);
        assert_exports_as_written(&env, &path);
        assert_totals_are_pis(&env, &path, &want["stats"]);
    }
}

/// Where gen-random-omp.ts wrote the omp tree's `agent/sessions`.
const OMP_FAKE_ROOT: &str = "/tmp/pi-fixture-romp/agent/sessions";

/// The omp tree as the root, its blob store beside it (as `~/.omp/agent`
/// holds `sessions/` and `blobs/`).
fn omp_env() -> Env {
    let env = Env::new();
    copy_tree(&fixtures().join("random-omp/sessions"), &env.root);
    let agent = env.root.parent().expect("parent");
    copy_tree(&fixtures().join("random-omp/blobs"), &agent.join("blobs"));
    env
}

/// Each row of a generator's `listing` (its `path` relative to the root)
/// beside piidx's row for that file (`sessions --json`, the root written
/// as `fake_root`), once both are seen to list as many sessions.
fn listed_beside<'a>(
    env: &Env,
    listing: &'a Value,
    fake_root: &str,
) -> Vec<(String, &'a Value, Value)> {
    let listing = listing.as_array().expect("listing");
    let mut ours = sessions_json(env, fake_root);
    assert_eq!(ours.len(), listing.len(), "number of sessions");
    listing
        .iter()
        .map(|want| {
            let rel = want["path"].as_str().expect("path").to_owned();
            let path = format!("{fake_root}/{rel}");
            let at = ours
                .iter()
                .position(|s| s["path"] == path.as_str())
                .unwrap_or_else(|| panic!("{rel} not listed"));
            (rel, want, ours.swap_remove(at))
        })
        .collect()
}

/// `piidx sessions --json` lists what omp's `/resume` lists, and each row
/// reads as omp reads the whole file (`messageCount`, `name` and
/// `firstMessage`: omp's own list looks at the first 4 KB only; the
/// expected values apply its rules to every entry).
fn assert_listed_as_omp_lists(env: &Env) {
    let expected = read_expected_listing("random-omp.json");
    assert_listed_as_omp_lists_in(env, &expected, OMP_FAKE_ROOT);
}

/// A generator's expected values (`read_expected`), whose `listing` is of
/// a tree large enough to prove something.
fn read_expected_listing(name: &str) -> Value {
    let expected = read_expected(name);
    assert!(
        expected["listing"].as_array().expect("listing").len() >= 40,
        "a tree this small proves little"
    );
    expected
}

/// `sessions --json` against the `listing` and `files` of an omp
/// generator's expected values (`generate/omp/omp-view.ts`), the tree
/// written under `fake_root`.
pub(crate) fn assert_listed_as_omp_lists_in(env: &Env, expected: &Value, fake_root: &str) {
    for (rel, want, got) in listed_beside(env, &expected["listing"], fake_root) {
        let file = &expected["files"][&rel];
        let field = |key: &str| got.get(key).unwrap_or(&Value::Null);
        assert_eq!(field("agent"), "omp", "{rel}");
        for key in ["id", "cwd", "created", "parentSessionPath"] {
            assert_eq!(field(key), &want[key], "{rel}: {key}");
        }
        for key in ["name", "messageCount", "firstMessage"] {
            assert_eq!(field(key), &file[key], "{rel}: {key}");
        }
    }
}

/// The list as omp's (above); `show --json` follows the branch omp
/// resumes, and `export` gives back every file byte for byte (images omp
/// moved to its blob store stay references), with no warning.
#[test]
fn an_omp_tree_lists_and_resumes_as_omp_does() {
    let env = omp_env();
    let summary = env.sync();
    assert_eq!(summary["warnings"], serde_json::json!([]), "{summary}");
    assert!(
        env.count("SELECT count(*) FROM entries WHERE raw LIKE '%blob:sha256:%'") > 0,
        "the tree lacks images in the blob store"
    );
    assert_listed_as_omp_lists(&env);
    let expected = read_expected("random-omp.json");
    for (rel, file) in expected["files"].as_object().expect("files") {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        assert_eq!(
            env.shown_branch(&path),
            string_list(&file["branch"]),
            "{rel}: current branch"
        );
        assert_exports_as_written(&env, Path::new(&path));
    }
}

/// An index made before schema 28 listed an omp session without user text
/// as "(no messages)"; the next sync reads such sessions again (and only
/// those), and lists them as omp does.
#[test]
fn an_older_index_gets_omps_first_message_at_the_next_sync() {
    let env = omp_env();
    env.sync();
    let shown_by_other_text =
        env.count("SELECT count(*) FROM sessions WHERE first_message = first_other_text");
    assert!(shown_by_other_text >= 1, "the tree lacks the case");
    let omp_files = env.count("SELECT count(*) FROM sessions WHERE agent = 'omp'");
    db_sql(
        &env.db,
        "UPDATE sessions SET first_message = NULL WHERE first_message = first_other_text;
         ALTER TABLE sessions DROP COLUMN first_other_text;
         DROP TABLE subagent_deliveries;
         PRAGMA user_version = 27;",
    );
    // Migration 0028 marks those sessions to be read again; 0030 (omp's
    // background runs) every omp session.
    let summary = env.sync();
    assert_eq!(summary["files_indexed"], omp_files, "{summary}");
    assert_listed_as_omp_lists(&env);
}

/// Each file of `tree` cut after its first `n` lines, where `keep(lines in
/// the file)` gives `(n, torn)`, written over `root` (`n` = 0: the file is
/// not there yet; `torn`: the cut ends halfway into the next line, as in a
/// file being written).
fn write_prefixes(tree: &Path, root: &Path, mut keep: impl FnMut(usize) -> (usize, bool)) {
    for file in jsonl_files(tree) {
        let bytes = fs::read(&file).expect("read");
        let ends: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(at, _)| at + 1)
            .collect();
        let (lines, torn) = keep(ends.len());
        let dest = root.join(file.strip_prefix(tree).expect("in tree"));
        if lines == 0 {
            let _ = fs::remove_file(&dest);
            continue;
        }
        let mut end = ends[lines - 1];
        if torn && lines < ends.len() {
            end += (ends[lines] - end) / 2;
        }
        fs::create_dir_all(dest.parent().expect("dir")).expect("mkdir");
        fs::write(&dest, &bytes[..end]).expect("write");
    }
}

/// Files the agents' own code wrote, synced while they grow (each file cut
/// at two random points, some cuts inside a line, some files not there
/// yet), end in the same index as one fresh sync of the whole trees.
#[test]
fn agent_written_trees_synced_while_they_grow_equal_one_fresh_sync() {
    let env = Env::new();
    let trees = [
        (fixtures().join("random152"), env.root.join("pi")),
        (fixtures().join("random-omp/sessions"), env.root.join("omp")),
        (
            fixtures().join("random-port/sessions"),
            env.root.join("port"),
        ),
    ];
    // A fixed linear congruential sequence: the same cuts on every run.
    let mut state: u64 = 0x5eed_2026;
    let mut next = move |below: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        ((state >> 33) as usize) % below.max(1)
    };
    let mut first: Vec<usize> = Vec::new();
    for (tree, root) in &trees {
        write_prefixes(tree, root, |lines| {
            let keep = next(lines + 1);
            first.push(keep);
            (keep, next(3) == 0)
        });
    }
    env.sync();
    let mut cuts = first.into_iter();
    for (tree, root) in &trees {
        write_prefixes(tree, root, |lines| {
            let before = cuts.next().unwrap_or(0);
            (before + next(lines - before + 1), next(3) == 0)
        });
    }
    env.sync();
    for (tree, root) in &trees {
        copy_tree(tree, root);
    }
    env.sync();
    assert_same_as_fresh_sync(&env, "synced while growing");
}

/// An omp session listed by its first assistant text (it has no user text)
/// is listed by its first user text once one is appended, as one fresh sync
/// lists it.
#[test]
fn an_omp_session_takes_its_first_user_text_when_it_comes() {
    let env = omp_env();
    env.sync();
    let (id, path): (String, String) = {
        let rows = env.sql(
            "SELECT session_id AS id, file_path AS path FROM sessions
              WHERE first_message = first_other_text ORDER BY file_path LIMIT 1",
        );
        let row = rows.first().expect("a session shown by its assistant text");
        let field = |key: &str| row[key].as_str().expect("text").to_owned();
        (field("id"), field("path"))
    };
    let first_message = |env: &Env| {
        env.sql(&format!(
            "SELECT first_message AS m FROM sessions WHERE session_id = '{id}'"
        ))[0]["m"]
            .clone()
    };
    let before = first_message(&env);
    assert!(before.is_string(), "{before}");
    let leaf = env.sql(&format!(
        "SELECT leaf_entry_id AS leaf FROM sessions WHERE session_id = '{id}'"
    ))[0]["leaf"]
        .clone();
    let user = serde_json::json!({"type": "message", "id": "feed0001", "parentId": leaf,
        "timestamp": "2026-12-31T00:00:00.000Z",
        "message": {"role": "user", "content": "the first user words, appended",
                    "attribution": "user", "timestamp": 1798675200000_i64}});
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    std::io::Write::write_all(&mut file, format!("{user}\n").as_bytes()).expect("append");
    env.sync();
    assert_eq!(first_message(&env), "the first user words, appended");
    assert_same_as_fresh_sync(&env, "appended");
}

/// Every text in the Pi tree holds a word no other text has, somewhere in
/// it (in long texts across chunk cuts too): `search WORD` finds exactly
/// the entries whose line holds it, fork copies included, for one word in
/// ten (each search is a process).
#[test]
fn planted_words_are_found_in_exactly_their_entries() {
    let env = Env::with_fixture("random152");
    env.sync();
    assert_planted_words_found(&env, &expected()["planted"]);
}

/// `search WORD` finds exactly the entries `planted` gives for each tenth
/// word (relative path and entry id).
fn assert_planted_words_found(env: &Env, planted: &Value) {
    let planted = planted.as_object().expect("planted");
    assert!(planted.len() >= 1000, "a tree this small proves little");
    for (word, places) in planted.iter().step_by(10) {
        let out = env.run(&["search", word, "--json", "-n", "1000"]);
        assert!(
            out.status.success(),
            "{word}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("search --json");
        let mut found: Vec<(String, String)> = hits
            .iter()
            .map(|hit| {
                let path = Path::new(hit["session_path"].as_str().expect("path"));
                let rel = path.strip_prefix(&env.root).expect("under the root");
                let id = hit["entry_id"].as_str().expect("entry id");
                (rel.to_string_lossy().into_owned(), id.to_owned())
            })
            .collect();
        let mut want: Vec<(String, String)> = places
            .as_array()
            .expect("places")
            .iter()
            .map(|place| {
                let field = |at: usize| place[at].as_str().expect("text").to_owned();
                (field(0), field(1))
            })
            .collect();
        found.sort();
        want.sort();
        want.dedup();
        assert_eq!(found, want, "{word}");
    }
}

/// Where gen-random-port wrote the port's tree.
const PORT_FAKE_ROOT: &str = "/tmp/pi-fixture-rport/sessions";

/// The port's tree as the root (its own session index beside the files).
fn port_env() -> Env {
    let env = Env::new();
    copy_tree(&fixtures().join("random-port/sessions"), &env.root);
    env
}

/// `piidx sessions --json` lists what the port's session index lists, with
/// its id, cwd, name and message count, and the parent it was forked from.
/// The model and thinking level are the ones the port resumes with where
/// its versions agree (the generator's version resumes with the header's,
/// later ones with the branch's last change, as piidx does: they differ
/// where that change is not the header's value).
fn assert_listed_as_the_port_lists(env: &Env) {
    let expected = read_expected_listing("random-port.json");
    for (rel, want, got) in listed_beside(env, &expected["listing"], PORT_FAKE_ROOT) {
        let file = &expected["files"][&rel];
        let field = |key: &str| got.get(key).unwrap_or(&Value::Null);
        assert_eq!(field("agent"), "pi_agent_rust", "{rel}");
        for key in ["id", "cwd", "name", "messageCount"] {
            assert_eq!(field(key), &want[key], "{rel}: {key}");
        }
        assert_eq!(field("parentSessionPath"), &file["parentSession"], "{rel}");
        if file["sameInLaterVersions"] == true {
            assert_eq!(field("model"), &file["model"], "{rel}: model");
            assert_eq!(field("thinkingLevel"), &file["thinkingLevel"], "{rel}");
        }
    }
}

/// The list as the port's (above); `show --json` follows the branch the
/// port resumes (`Session::open`), and `export` gives back every JSONL file
/// byte for byte and every SQLite session's rows, with no warning and no
/// file skipped (the port's own index database sits in the root).
#[test]
fn a_port_tree_lists_and_resumes_as_the_port_does() {
    let env = port_env();
    let summary = env.sync();
    assert_eq!(summary["warnings"], serde_json::json!([]), "{summary}");
    assert_eq!(summary["files_skipped"], 0, "{summary}");
    assert_listed_as_the_port_lists(&env);
    let expected = read_expected("random-port.json");
    let mut sqlite_sessions = 0;
    for (rel, file) in expected["files"].as_object().expect("files") {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        assert_eq!(
            env.shown_branch(&path),
            string_list(&file["branch"]),
            "{rel}: current branch"
        );
        if rel.ends_with(".sqlite") {
            sqlite_sessions += 1;
            assert_port_sqlite_exports_as_written(&env, Path::new(&path));
        } else {
            assert_exports_as_written(&env, Path::new(&path));
        }
    }
    assert!(sqlite_sessions >= 3, "the tree lacks SQLite sessions");
}

/// `piidx export FILE -o X.sqlite` of a session in the port's SQLite store
/// writes the port's tables back: the header and each entry JSON-equal to
/// the source's rows, in order, and the same `pi_session_meta`.
fn assert_port_sqlite_exports_as_written(env: &Env, file: &Path) {
    let target = env.dir.path().join("export.sqlite");
    let _ = fs::remove_file(&target);
    let out = env.run(&[
        "export",
        &file.to_string_lossy(),
        "-o",
        &target.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = |path: &Path| {
        let conn =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .expect("open");
        let strings = |sql: &str| -> Vec<String> {
            conn.prepare(sql)
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
                .expect(sql)
        };
        let json = |sql: &str| -> Vec<Value> {
            let rows = strings(sql).into_iter();
            rows.map(|text| serde_json::from_str(&text).expect("JSON"))
                .collect()
        };
        (
            json("SELECT json FROM pi_session_header"),
            json("SELECT json FROM pi_session_entries ORDER BY seq"),
            strings("SELECT key || '=' || value FROM pi_session_meta ORDER BY key"),
        )
    };
    assert!(
        rows(&target) == rows(file),
        "{}: export differs",
        file.display()
    );
}

/// The model context the port builds from each file's branch
/// (`to_messages_for_current_path`: the last compaction's summary, then
/// from its first kept entry on) is piidx's, message for message: the same
/// role and the same planted words, in order. The port sends bash
/// executions and both kinds of summary as user messages, and leaves out a
/// bash execution marked `excludeFromContext`.
#[test]
fn every_port_context_is_the_ports() {
    let env = port_env();
    env.sync();
    let store = Index::open(&env.db).expect("open");
    let expected = read_expected("random-port.json");
    let prefix = format!("qzp{}x", expected["seed"]);
    let files = expected["files"].as_object().expect("files");
    let mut compacted = 0;
    for (rel, want) in files {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        let found = resolve(&store, &path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let loaded = SessionTree::load_whole(&store, found).expect("load");
        let Some(leaf) = loaded.leaf() else {
            assert_eq!(want["context"], serde_json::json!([]), "{rel}");
            continue;
        };
        let branch = loaded.path_to(leaf);
        let ours: Vec<(String, Vec<String>)> = build_context(&loaded, &branch)
            .iter()
            .map(|item| &item.message)
            .filter(|message| message["excludeFromContext"] != true)
            .map(|message| {
                let role = match message["role"].as_str().unwrap_or("?") {
                    "bashExecution" | "branchSummary" | "compactionSummary" => "user",
                    role => role,
                };
                (role.to_owned(), words_in(&message.to_string(), &prefix))
            })
            .collect();
        let theirs: Vec<(String, Vec<String>)> = want["context"]
            .as_array()
            .expect("context")
            .iter()
            .map(|m| {
                let words = m["words"].as_array().expect("words").iter();
                let words = words.map(|w| w.as_str().expect("word").to_owned());
                (
                    m["role"].as_str().expect("role").to_owned(),
                    words.collect(),
                )
            })
            .collect();
        compacted += usize::from(branch.iter().any(|&n| loaded.nodes[n].kind == "compaction"));
        assert_eq!(ours, theirs, "{rel}: model context");
    }
    assert!(compacted >= 5, "the tree lacks compacted branches");
}

/// The words planted by a generator (`prefix` digits `k`) in `text`, in
/// order, each once.
fn words_in(text: &str, prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let tail = &text[at + prefix.len()..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let word = format!("{prefix}{}k", &tail[..digits]);
        if digits > 0 && tail[digits..].starts_with('k') && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Every word planted in the port's texts is found in exactly the entries
/// whose line holds it, fork copies included.
#[test]
fn planted_words_are_found_in_exactly_the_ports_entries() {
    let env = port_env();
    env.sync();
    assert_planted_words_found(&env, &read_expected("random-port.json")["planted"]);
}

/// An index made before schema 29 named the port's sessions by Pi's rule
/// (a `session_info` without a name cleared it); the next sync reads the
/// port's sessions again (and only those), and names them as the port does.
#[test]
fn an_older_index_names_the_ports_sessions_at_the_next_sync() {
    let env = port_env();
    env.sync();
    let port_sessions = env.count("SELECT count(*) FROM sessions WHERE agent = 'pi_agent_rust'");
    assert!(port_sessions >= 40, "{port_sessions}");
    db_sql(
        &env.db,
        "UPDATE sessions SET name = NULL; DROP TABLE subagent_deliveries; PRAGMA user_version = 28;",
    );
    let summary = env.sync();
    assert_eq!(summary["files_indexed"], port_sessions, "{summary}");
    assert_listed_as_the_port_lists(&env);
}
