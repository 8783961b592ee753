//! Pi-native views: `sessions` against Pi's own listAll() output, `export`
//! round trips, and `show`'s context building against an independent
//! re-implementation of Pi's buildSessionContext over the fixture JSONL.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use piidx::query::export::export;
use piidx::query::tree::{SessionTree, ViewError, resolve};
use piidx::store::Index;

use crate::util::{Env, fixtures, jsonl_files, largest_jsonl};

/// `piidx sessions --json [--all]` with the temp root replaced by `fake_root`.
fn sessions_json(env: &Env, fake_root: &str, all: bool) -> Vec<Value> {
    let mut args = vec!["sessions", "--json"];
    if all {
        args.push("--all");
    }
    let out = env.run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let root = env.root.to_string_lossy().into_owned();
    let mut sessions: Vec<Value> =
        serde_json::from_str(&text.replace(&root, fake_root)).expect("sessions --json");
    // piidx's one field beyond Pi's `SessionInfo`: these are Pi's files.
    for session in &mut sessions {
        let agent = session.as_object_mut().and_then(|s| s.remove("agent"));
        assert_eq!(agent, Some(Value::from("pi")), "{session}");
    }
    sessions
}

fn conformance(tree: &str, skip: &[&str]) {
    let env = Env::with_fixture(tree);
    env.sync();
    let fake_root = format!(
        "/tmp/pi-fixture-{}",
        if tree == "sessions" { "root" } else { tree }
    );
    let ours = sessions_json(&env, &fake_root, false);
    let expected_text =
        fs::read_to_string(fixtures().join(format!("expected/listall-{tree}.json")))
            .expect("expected");
    let mut expected: Vec<Value> = serde_json::from_str(&expected_text).expect("expected json");
    expected.retain(|info| {
        let path = info["path"].as_str().unwrap_or("");
        !skip.iter().any(|s| path.ends_with(s))
    });
    for info in &mut expected {
        info.as_object_mut()
            .expect("object")
            .remove("allMessagesText");
    }
    assert_eq!(ours.len(), expected.len(), "{tree}: number of sessions");
    for (ours, pi) in ours.iter().zip(&expected) {
        assert_eq!(
            ours, pi,
            "{tree}: session differs (order is Pi's modified-desc order)"
        );
    }
}

#[test]
fn sessions_match_pi_listall_on_pi_written_sessions() {
    conformance("sessions", &[]);
}

#[test]
fn sessions_match_pi_listall_on_v1_samples() {
    conformance("samples", &[]);
}

#[test]
fn sessions_match_pi_listall_on_subagent_tree() {
    conformance("subagents", &[]);
}

#[test]
fn sessions_match_pi_listall_on_damaged_tree() {
    // Pi lists `pi --mode json` event dumps (messageCount 0), and so does piidx.
    conformance("damaged", &[]);
}

#[test]
fn sessions_all_adds_the_nested_child_session_and_filters_work() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let fake = "/tmp/pi-fixture-subagents";
    assert_eq!(sessions_json(&env, fake, false).len(), 2);
    let all = sessions_json(&env, fake, true);
    assert_eq!(all.len(), 3);
    assert!(
        all.iter()
            .any(|s| s["path"].as_str().unwrap().ends_with("run-0/session.jsonl"))
    );

    let env = Env::with_fixture("sessions");
    env.sync();
    let out = env.run(&[
        "sessions",
        "--json",
        "--project=--home-user-proj-b--",
        "--limit",
        "2",
    ]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|s| s["cwd"] == "/home/user/proj-b"));
    let out = env.run(&["sessions", "--json", "--since", "2026-03-01"]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list.len(), 3, "S8 and the two 1.x sessions");
}

/// The objects of the lines Pi's JSON.parse accepts (lossy UTF-8, like Pi).
fn parsed_lines(path: &Path) -> Vec<Value> {
    let bytes = fs::read(path).expect("read");
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_str(&String::from_utf8_lossy(line)).ok())
        .collect()
}

/// Every line of a session file that the index recovered an object from
/// (the header's, every entry's: glued objects, `\r\n`, lone surrogates,
/// invalid UTF-8 and a completed torn line included) comes back from
/// `export` byte for byte and in order; the lines that held nothing (blank,
/// unparsable, a duplicate header) are the only ones left out.
#[test]
fn export_gives_back_every_recovered_line_byte_for_byte() {
    let mut checked = 0;
    let mut lines_compared = 0;
    for tree in [
        "sessions",
        "samples",
        "damaged",
        "subagents",
        "pi152",
        "coverage",
        "shapes",
    ] {
        let env = Env::with_fixture(tree);
        env.sync();
        for row in env.sql("SELECT file_id, file_path FROM sessions") {
            let path = row["file_path"].as_str().expect("path").to_owned();
            let file_id = row["file_id"].as_i64().expect("file id");
            let mut wanted: HashSet<i64> = env
                .sql(&format!(
                    "SELECT DISTINCT byte_offset FROM entries WHERE file_id = {file_id}"
                ))
                .iter()
                .map(|row| row["byte_offset"].as_i64().expect("offset"))
                .collect();
            let lines = lines_with_offsets(&fs::read(&path).expect("read"));
            let header = lines
                .iter()
                .find(|(_, line)| {
                    let text = String::from_utf8_lossy(line);
                    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
                    matches!(stream.next(), Some(Ok(v)) if v["type"] == "session" && v["id"].is_string())
                })
                .map(|(offset, _)| *offset)
                .expect("header line");
            wanted.insert(header);
            // Not circular: every line that is one plain object, other
            // than a header, must be among the lines the index holds.
            for (offset, line) in &lines {
                if let Ok(value) = serde_json::from_slice::<Value>(line)
                    && value.is_object()
                    && value["type"] != "session"
                {
                    assert!(
                        wanted.contains(offset),
                        "{path}: line at {offset} not indexed"
                    );
                }
            }
            let mut expected = Vec::new();
            for (offset, line) in &lines {
                if wanted.contains(offset) {
                    expected.extend_from_slice(line);
                    expected.push(b'\n');
                    lines_compared += 1;
                }
            }
            let out = env.run(&["export", &path]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            if out.stdout != expected {
                let ours = lines_with_offsets(&out.stdout);
                let theirs = lines_with_offsets(&expected);
                let at = ours
                    .iter()
                    .zip(&theirs)
                    .position(|(a, b)| a.1 != b.1)
                    .unwrap_or(ours.len().min(theirs.len()));
                panic!(
                    "{path}: export differs at line {at} of {} (expected {} lines):\n ours: {:?}\ntheirs: {:?}",
                    ours.len(),
                    theirs.len(),
                    ours.get(at)
                        .map(|l| String::from_utf8_lossy(&l.1).into_owned()),
                    theirs
                        .get(at)
                        .map(|l| String::from_utf8_lossy(&l.1).into_owned()),
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} sessions checked");
    assert!(
        lines_compared >= 3000,
        "only {lines_compared} lines compared byte for byte"
    );
}

/// A file's lines (without `\n`) and where each starts; a last line
/// without `\n` counts when it is not empty.
fn lines_with_offsets(bytes: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    for line in bytes.split(|b| *b == b'\n') {
        if !(line.is_empty() && at + line.len() >= bytes.len()) {
            out.push((at as i64, line.to_vec()));
        }
        at += line.len() + 1;
    }
    out
}

/// What exporting `file` must give: its first header, then every
/// non-header object, each with the bytes of its line.
fn expected_export(file: &Path) -> Vec<(Vec<u8>, Value)> {
    let bytes = fs::read(file).expect("read");
    let source: Vec<(Vec<u8>, Value)> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let value = serde_json::from_str(&String::from_utf8_lossy(line)).ok()?;
            Some((line.to_vec(), value))
        })
        .collect();
    let header_at = source
        .iter()
        .position(|(_, v)| v["type"] == "session")
        .expect("header");
    let mut expected = vec![source[header_at].clone()];
    expected.extend(
        source[header_at + 1..]
            .iter()
            .filter(|(_, v)| v["type"] != "session")
            .cloned(),
    );
    expected
}

/// `show`, `tree` and `export` resolve the session, then load it, in one
/// snapshot: a sync that removes the session in between is not seen (it
/// made loading fail with "Query returned no rows").
#[test]
fn a_session_resolved_in_a_snapshot_loads_after_a_sync_removed_it() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let file = largest_jsonl(&env.root);
    let expected: Vec<Value> = expected_export(&file)
        .into_iter()
        .map(|(_, value)| value)
        .collect();
    let id = expected[0]["id"].as_str().expect("session id").to_owned();
    let store = Index::open(&env.db).expect("open");
    let (tree, exported) = store
        .in_snapshot(|store| -> Result<_, Box<dyn std::error::Error>> {
            let found = resolve(store, &id)?;
            fs::remove_file(&file)?;
            assert_eq!(env.sync()["files_removed"], 1);
            let tree = SessionTree::load(store, found.clone())?;
            let mut exported = Vec::new();
            export(store, &found, &mut exported)?;
            Ok((tree, exported))
        })
        .expect("the session as it was");
    let exported: Vec<Value> = exported
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).expect("exported line is JSON"))
        .collect();
    assert_eq!(exported, expected);
    assert_eq!(tree.nodes.len(), expected.len() - 1);
    assert!(matches!(resolve(&store, &id), Err(ViewError::NotFound(_))));
}

/// An entry as the test sees it: id (synthetic `v1-<line>` for v1 files).
struct TestEntry {
    id: String,
    parent: Option<String>,
    value: Value,
    line_no: usize,
}

fn test_entries(path: &Path) -> Vec<TestEntry> {
    let bytes = fs::read(path).expect("read");
    let mut out: Vec<TestEntry> = Vec::new();
    let mut v1 = false;
    let mut seen_header = false;
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let Ok(value) = serde_json::from_str::<Value>(&String::from_utf8_lossy(line)) else {
            continue;
        };
        if value["type"] == "session" {
            if !seen_header {
                v1 = value.get("version").is_none();
                seen_header = true;
            }
            continue;
        }
        let (id, parent) = if v1 {
            (
                format!("v1-{}", index + 1),
                out.last().map(|e: &TestEntry| e.id.clone()),
            )
        } else {
            (
                value["id"].as_str().expect("id").to_owned(),
                value["parentId"].as_str().map(str::to_owned),
            )
        };
        out.push(TestEntry {
            id,
            parent,
            value,
            line_no: index + 1,
        });
    }
    out
}

/// Independent buildSessionContext: ids of context items, in order.
fn expected_context(entries: &[TestEntry], leaf: Option<&str>) -> Vec<String> {
    let by_id: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut index = match leaf {
        Some(id) => by_id[id],
        None => entries.len() - 1,
    };
    let mut path = vec![index];
    while let Some(parent) = entries[index].parent.as_deref().and_then(|p| by_id.get(p)) {
        index = *parent;
        path.push(index);
    }
    path.reverse();
    let emits = |e: &TestEntry| match e.value["type"].as_str() {
        Some("message") | Some("custom_message") => true,
        Some("branch_summary") => e.value["summary"].as_str().is_some_and(|s| !s.is_empty()),
        _ => false,
    };
    let mut out = Vec::new();
    match path
        .iter()
        .rposition(|&i| entries[i].value["type"] == "compaction")
    {
        None => out.extend(
            path.iter()
                .filter(|&&i| emits(&entries[i]))
                .map(|&i| entries[i].id.clone()),
        ),
        Some(at) => {
            let compaction = &entries[path[at]];
            out.push(compaction.id.clone());
            let first_kept = match compaction.value["firstKeptEntryId"].as_str() {
                Some(id) => Some(id.to_owned()),
                // v1: index into parsed lines, header = 0 (all test entries are parsed lines).
                None => compaction.value["firstKeptEntryIndex"]
                    .as_u64()
                    .and_then(|n| entries.get(n as usize - 1))
                    .map(|e| e.id.clone()),
            };
            let mut found = false;
            for &i in &path[..at] {
                found |= Some(&entries[i].id) == first_kept.as_ref();
                if found && emits(&entries[i]) {
                    out.push(entries[i].id.clone());
                }
            }
            out.extend(
                path[at + 1..]
                    .iter()
                    .filter(|&&i| emits(&entries[i]))
                    .map(|&i| entries[i].id.clone()),
            );
        }
    }
    out
}

/// Entry ids in `show` output: headings and paired tool results, in order.
fn shown_ids(text: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("── ").and_then(|l| l.strip_suffix(" ──")) {
            let id = rest.rsplit(" · ").next().unwrap_or("");
            ids.push(id.split_whitespace().next().unwrap_or("").to_owned());
        } else if line.starts_with("← ") {
            let id = line.rsplit('(').next().unwrap_or("").trim_end_matches(')');
            ids.push(id.to_owned());
        }
    }
    ids
}

fn check_context(env: &Env, file: &Path, leaf: Option<&str>) {
    let entries = test_entries(file);
    let expected = expected_context(&entries, leaf);
    let path = file.to_string_lossy().into_owned();
    let mut args = vec!["show", path.as_str()];
    if let Some(leaf) = leaf {
        args.extend(["--branch", leaf]);
    }
    let out = env.run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut shown = shown_ids(&text);
    // Paired results are printed under their call, so compare as sets of
    // positions: same ids, and non-result items in the same order.
    let mut sorted_expected = expected.clone();
    sorted_expected.sort();
    shown.sort();
    assert_eq!(
        shown, sorted_expected,
        "{path} leaf {leaf:?}: context entries"
    );
}

#[test]
fn show_builds_context_like_pi_on_every_fixture_session() {
    for tree in ["sessions", "samples"] {
        let env = Env::with_fixture(tree);
        env.sync();
        // This test's own reading of context is 0.x's; the 1.x files (context
        // edits, compaction checkpoints) are compared with Pi 1.5.2's own
        // output in pi152::the_context_of_every_session_is_pis.
        for file in jsonl_files(&env.root)
            .into_iter()
            .filter(|file| !file.to_string_lossy().contains("--home-user-proj-1x--"))
        {
            check_context(&env, &file, None);
        }
    }
    let env = Env::with_fixture("damaged");
    env.sync();
    check_context(&env, &env.root.join("--tmp-damaged--/v1-tiny.jsonl"), None);
}

fn s2(env: &Env) -> PathBuf {
    jsonl_files(&env.root)
        .into_iter()
        .find(|p| p.to_string_lossy().contains("019c1ba1"))
        .expect("S2")
}

#[test]
fn show_branch_back_and_compactions() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let file = s2(&env);
    // Every leaf of S2: the abandoned branches (with two compactions) and the current one.
    let entries = test_entries(&file);
    let parents: HashSet<&str> = entries.iter().filter_map(|e| e.parent.as_deref()).collect();
    let leaves: Vec<&str> = entries
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| !parents.contains(id))
        .collect();
    assert!(leaves.len() >= 3);
    for leaf in leaves {
        check_context(&env, &file, Some(leaf));
    }
    // The first compaction's summary is hidden by the second one on that branch.
    let out = env.run(&["show", &file.to_string_lossy(), "--branch", "bcee1313"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Second compaction"));
    assert!(!text.contains("lemurcobalt"));
    let out = env.run(&["show", &file.to_string_lossy(), "--branch", "nope"]);
    assert!(!out.status.success());
}

#[test]
fn show_marks_labels_and_images_and_json_path() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let file = jsonl_files(&env.root)
        .into_iter()
        .find(|p| p.to_string_lossy().contains("019c165b"))
        .expect("S1");
    let entries = test_entries(&file);
    let mut labels: HashMap<String, Option<String>> = HashMap::new();
    for e in &entries {
        if e.value["type"] == "label" {
            labels.insert(
                e.value["targetId"].as_str().unwrap().to_owned(),
                e.value["label"].as_str().map(str::to_owned),
            );
        }
    }
    let out = env.run(&["show", &file.to_string_lossy()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let on_path: HashSet<String> = shown_ids(&text).into_iter().collect();
    let mut seen = 0;
    for (target, label) in &labels {
        match label {
            Some(label) if on_path.contains(target) => {
                assert!(text.contains(&format!("🏷 {label}")), "label {label}");
                seen += 1;
            }
            None => {}
            _ => {}
        }
    }
    assert!(seen >= 1, "some label on the path");
    assert!(text.contains("[image image/png "), "image placeholder");
    // --json: the path's entries, image data replaced by the placeholder.
    let out = env.run(&["show", &file.to_string_lossy(), "--json"]);
    let path: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        path.last().unwrap()["id"],
        entries.last().unwrap().value["id"]
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("[image image/png"));
    // The tree marks the leaf.
    let out = env.run(&["tree", &file.to_string_lossy()]);
    let tree = String::from_utf8_lossy(&out.stdout);
    let leaf = entries.last().unwrap().id.as_str();
    assert!(tree.lines().any(|l| l.starts_with('◀') && l.contains(leaf)));
    // Two title lines: the session id, then its file.
    assert_eq!(tree.lines().count(), entries.len() + 2);
}

#[test]
fn forks_copies_orphans_and_parent_links() {
    let env = Env::with_fixture("sessions");
    env.sync();
    // Parents are recorded under /tmp/pi-fixture-root; the copy lives elsewhere,
    // so they resolve by their trailing <dir>/<file> components.
    let files = jsonl_files(&env.root);
    for file in &files {
        let entries = parsed_lines(file);
        let header = &entries[0];
        let Some(parent) = header["parentSession"].as_str() else {
            continue;
        };
        let tail: Vec<&str> = parent.rsplit('/').take(2).collect();
        let parent_file = env.root.join(tail[1]).join(tail[0]);
        let parent_entries = parsed_lines(&parent_file);
        let parent_id = parent_entries[0]["id"].as_str().unwrap();
        let child_id = header["id"].as_str().unwrap();
        let linked = env.sql(&format!(
            "SELECT parent_session_id FROM sessions WHERE session_id = '{child_id}'"
        ));
        assert_eq!(linked[0]["parent_session_id"], parent_id);
        let parent_by_id: HashMap<&str, &Value> = parent_entries
            .iter()
            .filter_map(|v| Some((v["id"].as_str()?, v)))
            .collect();
        let copies = entries[1..]
            .iter()
            .filter(|v| parent_by_id.get(v["id"].as_str().unwrap_or("")) == Some(v))
            .count() as i64;
        assert!(copies > 0);
        assert_eq!(
            env.count(&format!(
                "SELECT count(*) FROM v_fork_copies WHERE session_id = '{child_id}'"
            )),
            copies,
            "{child_id}: copied entries"
        );
        // Orphans: parentId not found in the same file.
        let ids: HashSet<&str> = entries.iter().filter_map(|v| v["id"].as_str()).collect();
        let orphans = entries[1..]
            .iter()
            .filter(|v| v["parentId"].as_str().is_some_and(|p| !ids.contains(p)))
            .count() as i64;
        assert_eq!(
            env.count(&format!(
                "SELECT count(*) FROM v_orphans WHERE session_id = '{child_id}'"
            )),
            orphans
        );
    }
    assert_eq!(env.count("SELECT count(*) FROM v_fork_copies WHERE session_id IN (SELECT session_id FROM sessions WHERE parent_session IS NULL)"), 0);
    // v_active_path agrees with the walk from the last entry for S2.
    let s2_file = s2(&env);
    let entries = test_entries(&s2_file);
    let by_id: HashMap<&str, &TestEntry> = entries.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut count = 0;
    let mut current = entries.last();
    while let Some(e) = current {
        count += 1;
        current = e.parent.as_deref().and_then(|p| by_id.get(p).copied());
    }
    assert_eq!(
        env.count("SELECT count(*) FROM v_active_path WHERE session_id LIKE '019c1ba1%'"),
        count
    );
    assert!(
        env.count("SELECT branch_points FROM v_session_branches WHERE session_id LIKE '019c1ba1%'")
            >= 1
    );
    let _ = entries.iter().map(|e| e.line_no).max();
}
