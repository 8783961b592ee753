//! Pi 1.5.x as its own code writes it (fixtures/pi152, fixtures/coverage,
//! fixtures/pi152-dirs; expected values in fixtures/expected/pi152-*.json
//! and coverage-manifest.json, all computed by Pi 1.5.2's code).

use std::collections::BTreeMap;
use std::fs;

use serde_json::Value;

use crate::util::{Env, fixtures};

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
        env.count("SELECT count(*) - count(DISTINCT text) FROM shared_texts"),
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
        "SELECT count(DISTINCT r.file_id) FROM shared_refs r JOIN shared_texts t USING(text_id)
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
    use piidx::query::tree::{SessionTree, build_context, resolve};
    use piidx::store::Store;
    use sha2::{Digest, Sha256};
    let expected: Value = serde_json::from_str(
        &fs::read_to_string(fixtures().join("expected/pi152-context.json")).expect("expected"),
    )
    .expect("JSON");
    let mut compared = 0;
    for (tree, want) in expected["trees"].as_object().expect("trees") {
        let env = Env::with_fixture(tree);
        env.sync();
        let store = Store::open_read_only(&env.db).expect("open");
        for (rel, session) in want["sessions"].as_object().expect("sessions") {
            if session.get("error").is_some_and(|e| !e.is_null()) {
                continue;
            }
            let path = env.root.join(rel).to_string_lossy().into_owned();
            let found = resolve(&store, &path).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let loaded = SessionTree::load_whole(&store, found).expect("load");
            let leaf = loaded.leaf().expect("leaf");
            let items = build_context(&loaded, &loaded.path_to(leaf));
            let ours: Vec<(String, String, String)> = items
                .iter()
                .map(|item| {
                    let json = serde_json::to_string(&item.message).expect("JSON");
                    (
                        loaded.nodes[item.node].id.clone(),
                        item.message["role"].as_str().unwrap_or("?").to_owned(),
                        format!("{:x}", Sha256::digest(json.as_bytes())),
                    )
                })
                .collect();
            let theirs: Vec<(String, String, String)> = session["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| {
                    (
                        m["entryId"].as_str().unwrap_or("?").to_owned(),
                        m["role"].as_str().unwrap_or("?").to_owned(),
                        m["message_sha256"].as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect();
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
            let path = env.root.join(rel).to_string_lossy().replace('\'', "''");
            let rows = env.sql(&format!(
                "SELECT coalesce(sum(u.input_tokens), 0) AS input,
                        coalesce(sum(u.output_tokens), 0) AS output,
                        coalesce(sum(u.cache_read_tokens), 0) AS cache_read,
                        coalesce(sum(u.cache_write_tokens), 0) AS cache_write,
                        coalesce(sum(u.cost_total), 0) AS cost
                   FROM files f
                   LEFT JOIN entries e ON e.file_id = f.file_id AND e.glued = 0
                   LEFT JOIN usage_records u ON u.entry_rowid = e.entry_rowid
                  WHERE f.path = '{path}'"
            ));
            let ours = &rows[0];
            let tokens = &stats["tokens"];
            for (column, key) in [
                ("input", "input"),
                ("output", "output"),
                ("cache_read", "cacheRead"),
                ("cache_write", "cacheWrite"),
            ] {
                assert_eq!(ours[column], tokens[key], "{tree}/{rel}: {key}");
            }
            let cost = ours["cost"].as_f64().unwrap_or(0.0);
            let pi = stats["cost"].as_f64().unwrap_or(0.0);
            assert!(
                (cost - pi).abs() < 1e-9,
                "{tree}/{rel}: cost {cost} vs Pi's {pi}"
            );
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
