//! Pi 1.5.x as its own code writes it (fixtures/pi152, fixtures/coverage,
//! fixtures/pi152-dirs; expected values in fixtures/expected/pi152-*.json
//! and coverage-manifest.json, all computed by Pi 1.5.2's code).

use std::collections::BTreeMap;
use std::fs;

use serde_json::Value;

use crate::util::{Env, assert_totals_are_pis, context_digests, expected_context, fixtures};

fn manifest() -> Value {
    let text = fs::read_to_string(fixtures().join("expected/coverage-manifest.json"))
        .expect("coverage manifest");
    serde_json::from_str(&text).expect("manifest JSON")
}

/// `piidx search WORD --json`'s hits as (session id, file path).
fn sessions_found(env: &Env, word: &str) -> Vec<(String, String)> {
    let out = env.run(&["search", word, "--json", "-n", "100"]);
    let hits: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    hits.iter()
        .map(|hit| {
            (
                hit["session_id"].as_str().unwrap_or_default().to_owned(),
                hit["session_path"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Every planted word is found in its own session (its file), whatever
/// field Pi (or an extension) wrote it in. On failure, the list of fields
/// that were not found, grouped by field.
#[test]
fn every_text_pi_wrote_is_found_in_its_own_session() {
    let env = Env::with_fixture("coverage");
    env.sync();
    let manifest = manifest();
    let words = manifest["words"].as_array().expect("words");
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for word in words {
        let text = word["word"].as_str().expect("word");
        let file = env.root.join(word["file"].as_str().expect("file"));
        let session = word["session_id"].as_str().expect("session id");
        let found = sessions_found(&env, text);
        let own = found
            .iter()
            .any(|(id, path)| id == session && *path == file.to_string_lossy());
        if !own {
            missing
                .entry(word["field"].as_str().unwrap_or("?").to_owned())
                .or_default()
                .push(format!(
                    "{text} at {} (found in: {found:?})",
                    word["json_path"].as_str().unwrap_or("?")
                ));
        }
    }
    let lost: usize = missing.values().map(Vec::len).sum();
    assert!(
        missing.is_empty(),
        "{lost} of {} words not found in their own session:\n{}",
        words.len(),
        missing
            .iter()
            .map(|(field, words)| format!("- {field}: {}", words.join("; ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Sessions with the same system prompt share its text: stored once,
/// indexed once, and found in each of them (`--role system`); `show`
/// and `export` see the whole prompt.
#[test]
fn system_prompts_are_stored_and_indexed_once_and_found_in_every_session() {
    let env = Env::with_fixture("pi152");
    env.sync();
    let refs = env.count("SELECT count(*) FROM shared_refs");
    let texts = env.count("SELECT count(*) FROM shared_texts");
    assert!(
        texts > 0 && refs > texts,
        "{refs} references to {texts} texts"
    );
    // No text twice, and each shared text's words once in the shards.
    assert_eq!(
        env.count("SELECT count(*) - count(DISTINCT text) FROM v_shared_texts"),
        0
    );
    assert_eq!(
        env.count(
            "SELECT count(*) FROM (SELECT text_id, inner_path, start FROM shared_chunks
              GROUP BY 1, 2, 3 HAVING count(*) > 1)"
        ),
        0
    );
    crate::util::fts_integrity(&env.db);
    // A section's word, in every session whose prompt holds it.
    let word = "precise";
    let sessions = env.count(&format!(
        "SELECT count(DISTINCT r.file_id) FROM shared_refs r JOIN v_shared_texts t USING(text_id)
          WHERE t.text LIKE '%{word}%'"
    ));
    let out = env.run(&["search", word, "--role", "system", "--json", "-n", "50"]);
    let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("hits");
    let found: std::collections::HashSet<&str> = hits
        .iter()
        .filter_map(|hit| hit["session_path"].as_str())
        .collect();
    assert!(sessions >= 2, "the word is in {sessions} prompts");
    assert_eq!(found.len() as i64, sessions, "{hits:?}");
}

/// piidx builds the context of every session as Pi 1.5.2's
/// `buildSessionProjection` does (fixtures/expected/pi152-context.json):
/// the same messages, from the same entries, and each message the same
/// object (sha256 of its JSON text), context edits and compaction
/// checkpoints included.
#[test]
fn the_context_of_every_session_is_pis() {
    use piidx::query::tree::{SessionTree, resolve};
    use piidx::store::Index;
    let expected: Value = serde_json::from_str(
        &fs::read_to_string(fixtures().join("expected/pi152-context.json")).expect("expected"),
    )
    .expect("JSON");
    let mut compared = 0;
    for (tree, want) in expected["trees"].as_object().expect("trees") {
        let env = Env::with_fixture(tree);
        env.sync();
        let store = Index::open(&env.db).expect("open");
        for (rel, session) in want["sessions"].as_object().expect("sessions") {
            if session.get("error").is_some_and(|e| !e.is_null()) {
                continue;
            }
            let path = env.root.join(rel).to_string_lossy().into_owned();
            let found = resolve(&store, &path).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let loaded = SessionTree::load_whole(&store, found).expect("load");
            let leaf = loaded.leaf().expect("leaf");
            let ours = context_digests(&loaded, &loaded.path_to(leaf));
            let theirs = expected_context(&session["messages"]);
            assert_eq!(ours, theirs, "{tree}/{rel}");
            compared += 1;
        }
    }
    assert!(compared >= 40, "only {compared} sessions compared");
}

/// Each session's usage records add up to Pi 1.5.2's own totals
/// (`AgentSession.getSessionStats`, fixtures/expected/pi152-usage.json):
/// assistant, tool result, compaction, branch summary and `usage` entries
/// (any kind), `reasoning` and `cacheWrite1h` never added again. Objects
/// piidx recovers from lines Pi cannot parse (glued, or split by a lone
/// `\r`) are left out here: Pi's totals never see them; piidx's count them.
#[test]
fn usage_records_add_up_to_pis_session_totals() {
    let expected: Value = serde_json::from_str(
        &fs::read_to_string(fixtures().join("expected/pi152-usage.json")).expect("expected"),
    )
    .expect("JSON");
    let mut compared = 0;
    for (tree, want) in expected["trees"].as_object().expect("trees") {
        let env = Env::with_fixture(tree);
        env.sync();
        for (rel, session) in want["sessions"].as_object().expect("sessions") {
            let Some(stats) = session.get("getSessionStats").filter(|s| s.is_object()) else {
                continue;
            };
            assert_totals_are_pis(&env, &env.root.join(rel), stats);
            compared += 1;
        }
    }
    assert!(compared >= 40, "only {compared} sessions compared");
}

/// Subagent runs as Pi 1.5.2's example extension and pi-subagents write
/// them: the status each result states (never `failed` for `aborted`),
/// child session files under the parent's directory linked to their run,
/// and a hit in a child session names the run and the parent session.
#[test]
fn subagent_runs_keep_their_status_and_child_sessions_name_their_parent() {
    let env = Env::with_fixture("pi152");
    env.sync();
    // Every result that states a status keeps it.
    let stated = env.sql(
        "SELECT r.status, json_extract(e.raw, r.json_path || '.status') AS written
           FROM subagent_runs r JOIN entries e ON e.entry_rowid = r.entry_rowid
          WHERE json_extract(e.raw, r.json_path || '.status') IS NOT NULL",
    );
    assert!(stated.len() >= 10, "{stated:?}");
    for row in &stated {
        assert_eq!(row["status"], row["written"], "{row}");
    }
    let statuses: std::collections::BTreeSet<String> = stated
        .iter()
        .filter_map(|row| row["status"].as_str().map(str::to_owned))
        .collect();
    for status in ["completed", "failed", "aborted", "pending", "running"] {
        assert!(statuses.contains(status), "no {status} run in {statuses:?}");
    }
    let out = env.run(&["subagents", "--json"]);
    let runs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("runs");
    assert!(
        runs.iter().any(|run| run["status"] == "aborted"),
        "subagents shows aborted runs as such"
    );
    // pi-subagents children: <parent>/<runId>/run-N/session.jsonl, nested
    // ones under the child's own directory; each linked to its run.
    let linked = env.count(
        "SELECT count(*) FROM subagent_runs r JOIN files f ON f.file_id = r.child_file_id
          WHERE f.path LIKE '%/run-%/session.jsonl'",
    );
    assert!(linked >= 3, "{linked} runs linked to their child session");
    assert_eq!(
        env.count(
            "SELECT count(*) FROM files f JOIN sessions s USING(file_id)
              WHERE f.path LIKE '%/run-%/session.jsonl' AND s.parent_session_id IS NULL"
        ),
        0,
        "every child session knows its parent"
    );

    let coverage = Env::with_fixture("coverage");
    coverage.sync();
    let manifest = manifest();
    let child = manifest["words"]
        .as_array()
        .expect("words")
        .iter()
        .find(|w| {
            w["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("/session.jsonl"))
        })
        .expect("a word in a child session");
    let out = coverage.run(&[
        "search",
        child["word"].as_str().unwrap_or_default(),
        "--json",
    ]);
    let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("hits");
    let hit = hits
        .iter()
        .find(|hit| hit["session_id"] == child["session_id"])
        .expect("the hit in the child session");
    assert_eq!(hit["run"]["child_session"], true, "{hit}");
    let parent = coverage.sql(&format!(
        "SELECT parent_session_id FROM sessions WHERE session_id = '{}'",
        child["session_id"].as_str().unwrap_or_default()
    ));
    assert_eq!(
        hit["run"]["parent_session_id"],
        parent[0]["parent_session_id"]
    );
    assert!(hit["run"]["agent"].is_string(), "{hit}");
}

/// A subagent run's spend counts once: when the tool result carries it as
/// `usage` (pi-subagents), in the main columns; when only the run's details
/// hold it (the example extension), in the subagent columns.
#[test]
fn subagent_spend_is_counted_once() {
    let env = Env::with_fixture("pi152");
    env.sync();
    let out = env.run(&["usage", "--by", "session", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("usage");
    let row = |id: &str| {
        rows.iter()
            .find(|row| row["key"].as_str().is_some_and(|k| k.starts_with(id)))
            .unwrap_or_else(|| panic!("no usage row for {id}: {rows:?}"))
            .clone()
    };
    // pi-subagents (SA2): its tool results carry the runs' usage.
    let sa2 = row("01a1b573-6100");
    assert!(sa2["subagent_runs"].as_i64() > Some(0));
    assert_eq!(sa2["subagent_tokens"], 0, "{sa2}");
    let tool_result_tokens = env.count(
        "SELECT coalesce(sum(u.total_tokens), 0) FROM usage_records u JOIN sessions s USING(file_id)
          WHERE s.session_id LIKE '01a1b573-6100%' AND u.source = 'tool_result'",
    );
    assert!(tool_result_tokens > 0);
    // The example extension (SA1): only the details hold the spend.
    let sa1 = row("01a1b016");
    assert!(sa1["subagent_tokens"].as_i64() > Some(0), "{sa1}");
    assert_eq!(
        env.count(
            "SELECT count(*) FROM usage_records u JOIN sessions s USING(file_id)
              WHERE s.session_id LIKE '01a1b016%' AND u.source = 'tool_result'"
        ),
        0
    );
}

/// `piidx sessions` lists what Pi 1.5.2's `listAll()` lists, in its order,
/// wherever Pi keeps sessions: a `sessionDir` setting (global, or a
/// project's, relative), `PI_CODING_AGENT_SESSION_DIR`, a flat directory,
/// symlinked project directories, custom ids, prompt-only files, repaired
/// torn tails, ties in `modified`, a BOM header, a lone `\r`
/// (fixtures/pi152-dirs; expected in fixtures/expected/pi152-dirs-listall.json).
/// `sync` runs with no `--root` (except for Pi's `--session-dir` flag, which
/// only the user knows), as the case's user would, to find them itself.
#[test]
fn sessions_are_listed_as_pi_lists_them_wherever_pi_keeps_them() {
    let read = |rel: &str| -> Value {
        serde_json::from_str(&fs::read_to_string(fixtures().join(rel)).expect(rel)).expect(rel)
    };
    let expected = read("expected/pi152-dirs-listall.json");
    let cases = read("pi152-dirs/cases.json");
    let mtimes = read("pi152-dirs/mtimes.json");
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("pi152-dirs");
    crate::util::copy_tree(&fixtures().join("pi152-dirs"), &root);
    for (rel, iso) in mtimes["mtimes"].as_object().expect("mtimes") {
        let ms = piidx::time::parse_iso_ms(iso.as_str().expect("time")).expect("ISO time");
        let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
        fs::File::options()
            .write(true)
            .open(root.join(rel))
            .and_then(|file| file.set_modified(when))
            .expect("set mtime");
    }
    let fake = cases["root"].as_str().expect("fake root");
    let here = root.to_string_lossy().into_owned();
    let map = |path: &str| path.replacen(fake, &here, 1);
    let mut checked = 0;
    for case in cases["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let want = &expected["cases"][name];
        let db = tmp.path().join(format!("{name}.db"));
        let mut sync = std::process::Command::new(env!("CARGO_BIN_EXE_piidx"));
        sync.arg("--db").arg(&db).arg("sync").arg("--json");
        let argv: Vec<&str> = case["argv"]
            .as_array()
            .expect("argv")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if let Some(at) = argv.iter().position(|arg| *arg == "--session-dir") {
            sync.arg("--root").arg(map(argv[at + 1]));
        }
        sync.env_remove("PIIDX_DB")
            .env_remove("PI_CODING_AGENT_DIR")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .current_dir(map(case["cwd"].as_str().expect("cwd")));
        for (key, value) in case["env"].as_object().expect("env") {
            sync.env(key, map(value.as_str().expect("env value")));
        }
        let out = sync.output().expect("run sync");
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let process_cwd = map(want["processCwd"].as_str().expect("processCwd"));
        let absolute = |path: &str| {
            if path.starts_with('/') {
                map(path)
            } else {
                format!("{process_cwd}/{path}")
            }
        };
        let scope = match want["resolvedSessionDir"].as_str() {
            Some(dir) => absolute(dir),
            None => map(want["sessionsDirIfDefault"].as_str().expect("sessions dir")),
        };
        let listed = std::process::Command::new(env!("CARGO_BIN_EXE_piidx"))
            .arg("--db")
            .arg(&db)
            .args(["sessions", "--json"])
            .output()
            .expect("run sessions");
        let ours: Vec<Value> = serde_json::from_slice::<Vec<Value>>(&listed.stdout)
            .expect("sessions JSON")
            .into_iter()
            .filter(|s| {
                s["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(&format!("{scope}/")))
            })
            .map(|mut s| {
                // piidx's one field beyond Pi's `SessionInfo`.
                let agent = s.as_object_mut().and_then(|o| o.remove("agent"));
                assert_eq!(agent, Some(Value::from("pi")));
                s
            })
            .collect();
        let theirs: Vec<Value> = want["listAll"]
            .as_array()
            .expect("listAll")
            .iter()
            .map(|info| {
                let mut info = info.clone();
                let object = info.as_object_mut().expect("object");
                object.remove("allMessagesText");
                // Where the file is now; what is inside it (cwd,
                // parentSession) stays as written.
                let path = absolute(object["path"].as_str().expect("path"));
                object.insert("path".into(), path.into());
                info
            })
            .collect();
        assert_eq!(ours, theirs, "{name}");
        checked += 1;
    }
    assert_eq!(checked, 11);
}

/// Pi 1.5.2 appends the missing `\n` to a file whose last line has none
/// when it opens it: the next sync reads that one byte (and, after a torn
/// line, the line it completes), not the whole file again.
#[test]
fn the_newline_pi_appends_on_open_is_a_cheap_resume() {
    let env = Env::new();
    let dir = env.root.join("--proj--");
    fs::create_dir_all(&dir).expect("mkdir");
    let header = r#"{"type":"session","version":3,"id":"s","timestamp":"2026-11-01T00:00:00.000Z","cwd":"/proj"}"#;
    let message = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-11-01T00:00:01.000Z","message":{{"role":"user","content":"hello {id}","timestamp":1793491201000}}}}"#
        )
    };
    let complete = dir.join("complete.jsonl");
    fs::write(
        &complete,
        format!(
            "{header}\n{}\n{}",
            message("a1", "null"),
            message("a2", "\"a1\"")
        ),
    )
    .expect("write");
    let torn = dir.join("torn.jsonl");
    let tail = r#"{"type":"message","id":"b2","par"#;
    fs::write(
        &torn,
        format!("{header}\n{}\n{tail}", message("b1", "null")),
    )
    .expect("write");
    crate::util::age_files(&env.root);
    let first = env.sync();
    assert_eq!(first["entries_added"], 3, "{first}");
    for file in [&complete, &torn] {
        let mut handle = fs::OpenOptions::new()
            .append(true)
            .open(file)
            .expect("open");
        std::io::Write::write_all(&mut handle, b"\n").expect("append");
    }
    let second = env.sync();
    // Nothing re-read from the start: no entry added again; the torn line
    // (now complete, and invalid) and its newline read, and recorded.
    assert_eq!(second["entries_added"], 0, "{second}");
    assert_eq!(second["bytes_read"], tail.len() as u64 + 1, "{second}");
    assert_eq!(second["parse_errors"], 1, "{second}");
    // The first file's cursor took the newline in.
    let size = fs::metadata(&complete).expect("stat").len() as i64;
    assert_eq!(
        env.count("SELECT offset FROM files WHERE path LIKE '%/complete.jsonl'"),
        size
    );
    let third = env.sync();
    assert_eq!(third["files_unchanged"], 2, "{third}");
}
