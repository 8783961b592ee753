//! Random trees written by the agents' own code, and what that code
//! computes on them: Pi 1.5.2's `SessionManager` (fixtures/random152, from
//! `fixtures/generate/gen-random152.mjs`; fixtures/expected/random152.json)
//! and oh-my-pi's (fixtures/random-omp, from
//! `fixtures/generate/omp/gen-random-omp.ts`;
//! fixtures/expected/random-omp.json): every operation each has, in random
//! order. The lists, each file's current branch, Pi's model contexts and
//! totals must be theirs, file for file.

use std::fs;

use serde_json::Value;

use piidx::query::tree::{SessionTree, build_context, resolve};
use piidx::store::Index;

use crate::util::{Env, db_sql, fixtures};

/// Where the generator wrote the tree (absolute paths inside it point there).
const FAKE_ROOT: &str = "/tmp/pi-fixture-random152";

fn expected() -> Value {
    read_expected("random152.json")
}

fn read_expected(name: &str) -> Value {
    let text = fs::read_to_string(fixtures().join("expected").join(name)).expect("expected");
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

/// Where gen-random-omp.ts wrote the omp tree's `agent/sessions`.
const OMP_FAKE_ROOT: &str = "/tmp/pi-fixture-romp/agent/sessions";

/// `piidx sessions --json` lists what omp's `/resume` lists, and each row
/// reads as omp reads the whole file (`messageCount`, `name` and
/// `firstMessage`: omp's own list looks at the first 4 KB only; the
/// expected values apply its rules to every entry).
fn assert_listed_as_omp_lists(env: &Env) {
    let expected = read_expected("random-omp.json");
    let files = &expected["files"];
    let listing = expected["listing"].as_array().expect("listing");
    assert!(listing.len() >= 40, "a tree this small proves little");
    let out = env.run(&["sessions", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = env.root.to_string_lossy().into_owned();
    let text = String::from_utf8(out.stdout)
        .expect("utf-8")
        .replace(&root, OMP_FAKE_ROOT);
    let ours: Vec<Value> = serde_json::from_str(&text).expect("sessions --json");
    assert_eq!(ours.len(), listing.len(), "number of sessions");
    for want in listing {
        let rel = want["path"].as_str().expect("path");
        let path = format!("{OMP_FAKE_ROOT}/{rel}");
        let got = ours
            .iter()
            .find(|s| s["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{rel} not listed"));
        let file = &files[rel];
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

/// The list as omp's (above), and `show --json` follows the branch omp
/// resumes, for every file.
#[test]
fn an_omp_tree_lists_and_resumes_as_omp_does() {
    let env = Env::with_fixture("random-omp");
    env.sync();
    assert_listed_as_omp_lists(&env);
    let expected = read_expected("random-omp.json");
    for (rel, file) in expected["files"].as_object().expect("files") {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        let out = env.run(&["show", &path, "--json"]);
        assert!(
            out.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown: Vec<Value> = serde_json::from_slice(&out.stdout).expect("show --json");
        let ids: Vec<&str> = shown.iter().filter_map(|e| e["id"].as_str()).collect();
        let want: Vec<&str> = file["branch"]
            .as_array()
            .expect("branch")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(ids, want, "{rel}: current branch");
    }
}

/// An index made before schema 28 listed an omp session without user text
/// as "(no messages)"; the next sync reads such sessions again (and only
/// those), and lists them as omp does.
#[test]
fn an_older_index_gets_omps_first_message_at_the_next_sync() {
    let env = Env::with_fixture("random-omp");
    env.sync();
    let shown_by_other_text =
        env.count("SELECT count(*) FROM sessions WHERE first_message_other = 1");
    assert!(shown_by_other_text >= 1, "the tree lacks the case");
    db_sql(
        &env.db,
        "UPDATE sessions SET first_message = NULL WHERE first_message_other = 1;
         ALTER TABLE sessions DROP COLUMN first_other_text;
         ALTER TABLE sessions DROP COLUMN first_message_other;
         PRAGMA user_version = 27;",
    );
    let summary = env.sync();
    assert_eq!(summary["files_indexed"], shown_by_other_text, "{summary}");
    assert_listed_as_omp_lists(&env);
}
