//! A random tree written by Pi 1.5.2's own `SessionManager`
//! (fixtures/random152, from `fixtures/generate/gen-random152.mjs`): every
//! operation Pi has, in random order, and what Pi's code computes on it
//! (fixtures/expected/random152.json). The list, each file's current branch
//! and each branch's model context must be Pi's, file for file.

use std::fs;

use serde_json::Value;

use piidx::query::tree::{SessionTree, build_context, resolve};
use piidx::store::Index;

use crate::util::{Env, fixtures};

/// Where the generator wrote the tree (absolute paths inside it point there).
const FAKE_ROOT: &str = "/tmp/pi-fixture-random152";

fn expected() -> Value {
    let text = fs::read_to_string(fixtures().join("expected/random152.json")).expect("expected");
    serde_json::from_str(&text).expect("expected JSON")
}

/// `piidx sessions --json` equals Pi's `listAll()`, order included.
#[test]
fn the_list_is_pis_list_all() {
    let env = Env::with_fixture("random152");
    env.sync();
    let out = env.run(&["sessions", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = env.root.to_string_lossy().into_owned();
    let text = String::from_utf8(out.stdout)
        .expect("utf-8")
        .replace(&root, FAKE_ROOT);
    let mut ours: Vec<Value> = serde_json::from_str(&text).expect("sessions --json");
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
    use sha2::{Digest, Sha256};
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
        let ours: Vec<(String, String, String)> = build_context(&loaded, &branch)
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
        let theirs: Vec<(String, String, String)> = want["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| {
                let field = |key: &str| m[key].as_str().unwrap_or("?").to_owned();
                (field("entryId"), field("role"), field("message_sha256"))
            })
            .collect();
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
        let out = env.run(&["export", &path.to_string_lossy()]);
        assert!(
            out.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stdout == fs::read(&path).expect("read"),
            "{rel}: export differs from the file"
        );
        let rows = env.sql(&format!(
            "SELECT coalesce(sum(u.input_tokens), 0) AS input,
                    coalesce(sum(u.output_tokens), 0) AS output,
                    coalesce(sum(u.cache_read_tokens), 0) AS cache_read,
                    coalesce(sum(u.cache_write_tokens), 0) AS cache_write,
                    coalesce(sum(u.cost_total), 0) AS cost
               FROM files f
               JOIN entries e ON e.file_id = f.file_id
               JOIN usage_records u ON u.entry_rowid = e.entry_rowid
              WHERE f.path = '{}'",
            path.to_string_lossy().replace('\'', "''")
        ));
        let tokens = &want["stats"]["tokens"];
        for (column, key) in [
            ("input", "input"),
            ("output", "output"),
            ("cache_read", "cacheRead"),
            ("cache_write", "cacheWrite"),
        ] {
            assert_eq!(rows[0][column], tokens[key], "{rel}: {key}");
        }
        let cost = rows[0]["cost"].as_f64().unwrap_or(0.0);
        let pi = want["stats"]["cost"].as_f64().unwrap_or(0.0);
        assert!(
            (cost - pi).abs() < 1e-9,
            "{rel}: cost {cost} against Pi's {pi}"
        );
    }
}
