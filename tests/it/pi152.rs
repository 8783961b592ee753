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
