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
