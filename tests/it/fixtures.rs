//! Rows checked against expectations computed here, independently of piidx:
//! per-file counts by entry type and message role, token and cost sums, ids
//! and parents, and the documented outcome of every damaged file.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::sync::assert_lines_accounted;
use crate::util::{Env, fixtures, non_blank_lines};

/// What a plain reading of one session file gives.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    types: BTreeMap<String, i64>,
    roles: BTreeMap<String, i64>,
    input_tokens: i64,
    output_tokens: i64,
    cost_total: f64,
    ids: Vec<(String, Option<String>)>,
}

/// Reads a session file line by line with serde_json: every object after the
/// first session header is an entry (glued objects each count).
fn read_expected(path: &Path) -> Option<Expected> {
    let mut expected = Expected::default();
    let mut header = None;
    for line in non_blank_lines(path) {
        let text = String::from_utf8_lossy(&line.bytes).into_owned();
        let objects: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect();
        for object in objects {
            let kind = object["type"].as_str().unwrap_or_default().to_owned();
            if header.is_none() {
                if kind != "session" || !object["id"].is_string() {
                    return None;
                }
                header = Some(object);
                continue;
            }
            if kind == "session" {
                continue;
            }
            *expected.types.entry(kind.clone()).or_default() += 1;
            if kind == "message" {
                let message = &object["message"];
                let role = match message["role"].as_str().unwrap_or_default() {
                    "hookMessage" => "custom",
                    role => role,
                };
                *expected.roles.entry(role.to_owned()).or_default() += 1;
                if role == "assistant" || role == "toolResult" {
                    let usage = &message["usage"];
                    expected.input_tokens += usage["input"].as_i64().unwrap_or(0);
                    expected.output_tokens += usage["output"].as_i64().unwrap_or(0);
                    expected.cost_total += usage["cost"]["total"].as_f64().unwrap_or(0.0);
                }
            }
            if let Some(id) = object["id"].as_str() {
                expected.ids.push((
                    id.to_owned(),
                    object["parentId"].as_str().map(str::to_owned),
                ));
            }
        }
    }
    let header = header?;
    // v1 files have no ids; piidx synthesizes them (checked elsewhere).
    if header["version"].as_i64().unwrap_or(1) < 2 {
        expected.ids.clear();
    }
    Some(expected)
}

fn indexed(env: &Env, rel_path: &str) -> Expected {
    let file = format!(
        "(SELECT file_id FROM files WHERE rel_path = '{}')",
        rel_path.replace('\'', "''")
    );
    let mut got = Expected::default();
    for row in env.sql(&format!(
        "SELECT type, count(*) AS n FROM entries WHERE file_id = {file} GROUP BY type"
    )) {
        got.types.insert(
            row["type"].as_str().unwrap_or_default().into(),
            row["n"].as_i64().unwrap_or(0),
        );
    }
    for row in env.sql(&format!(
        "SELECT role, count(*) AS n FROM message_meta WHERE file_id = {file} GROUP BY role"
    )) {
        got.roles.insert(
            row["role"].as_str().unwrap_or_default().into(),
            row["n"].as_i64().unwrap_or(0),
        );
    }
    let sums = env.sql(&format!(
        "SELECT coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o,
                coalesce(sum(cost_total), 0.0) AS c
         FROM usage_records WHERE file_id = {file} AND source IN ('assistant', 'tool_result')"
    ));
    got.input_tokens = sums[0]["i"].as_i64().unwrap_or(-1);
    got.output_tokens = sums[0]["o"].as_i64().unwrap_or(-1);
    got.cost_total = sums[0]["c"].as_f64().unwrap_or(-1.0);
    let version = env.count(&format!(
        "SELECT version FROM sessions WHERE file_id = {file}"
    ));
    if version >= 2 {
        for row in env.sql(&format!(
            "SELECT entry_id, parent_id FROM entries WHERE file_id = {file} ORDER BY line_no, obj_in_line"
        )) {
            got.ids.push((
                row["entry_id"].as_str().unwrap_or_default().into(),
                row["parent_id"].as_str().map(str::to_owned),
            ));
        }
    }
    got
}

fn check_tree(name: &str) {
    let env = Env::with_fixture(name);
    env.sync();
    assert_lines_accounted(&env);
    let mut checked = 0;
    for entry in walkdir::WalkDir::new(&env.root) {
        let entry = entry.expect("walk");
        let rel = entry
            .path()
            .strip_prefix(&env.root)
            .expect("rel")
            .to_string_lossy()
            .into_owned();
        if !rel.ends_with(".jsonl") || rel.contains("subagent-artifacts") {
            continue;
        }
        let Some(mut expected) = read_expected(entry.path()) else {
            continue;
        };
        let got = indexed(&env, &rel);
        assert!(
            (expected.cost_total - got.cost_total).abs() < 1e-9,
            "{rel}: cost {} != {}",
            got.cost_total,
            expected.cost_total
        );
        expected.cost_total = got.cost_total;
        assert_eq!(got, expected, "{rel}");
        checked += 1;
    }
    assert!(checked > 0, "no session files in fixtures/{name}");
}

#[test]
fn pi_written_sessions_match_a_plain_reading() {
    check_tree("sessions");
}

#[test]
fn pi_mono_samples_match_a_plain_reading() {
    check_tree("samples");
}

#[test]
fn subagent_sessions_match_a_plain_reading() {
    check_tree("subagents");
}

#[test]
fn damaged_files_have_the_documented_outcomes() {
    let env = Env::with_fixture("damaged");
    env.sync();
    assert_lines_accounted(&env);
    let outcomes: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join("expected/damaged-outcomes.json")).expect("outcomes"),
    )
    .expect("outcomes JSON");
    let files = outcomes["files"].as_object().expect("files");
    for (name, outcome) in files {
        let rel = format!("--tmp-damaged--/{name}");
        let rows = env.sql(&format!(
            "SELECT file_id, status, skip_reason, offset FROM files WHERE rel_path = '{rel}'"
        ));
        let file = &rows[0];
        let file_id = file["file_id"].as_i64().unwrap_or(-1);
        let is_session = file["status"] == "indexed";
        assert_eq!(
            Some(is_session),
            outcome["is_session"].as_bool(),
            "{name}: {file}"
        );
        let entries = env.count(&format!(
            "SELECT count(*) FROM entries WHERE file_id = {file_id}"
        ));
        // piidx recovers both objects of a glued line, where Pi drops the line.
        let recovered = if name == "glued-objects.jsonl" { 2 } else { 0 };
        assert_eq!(
            Some(entries),
            outcome["entries"].as_i64().map(|n| n + recovered),
            "{name}"
        );
        // Repairs (invalid UTF-8 replaced) and duplicate headers are recorded
        // as notes in parse_errors, apart from real errors.
        let errors: Vec<i64> = env
            .sql(&format!(
                "SELECT line_no FROM parse_errors WHERE file_id = {file_id}
                 AND reason NOT LIKE 'invalid UTF-8%' AND reason NOT LIKE 'duplicate session header%'
                 ORDER BY line_no"
            ))
            .iter()
            .filter_map(|row| row["line_no"].as_i64())
            .collect();
        let expected: Vec<i64> = outcome["parse_errors"]
            .as_array()
            .map(|lines| lines.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default();
        assert_eq!(errors, expected, "{name}");
        if let Some(lines) = outcome["duplicate_header_lines"].as_array() {
            let dup: Vec<i64> = env
                .sql(&format!(
                    "SELECT line_no FROM parse_errors WHERE file_id = {file_id}
                     AND reason LIKE 'duplicate session header%'"
                ))
                .iter()
                .filter_map(|row| row["line_no"].as_i64())
                .collect();
            assert_eq!(
                dup,
                lines.iter().filter_map(Value::as_i64).collect::<Vec<_>>(),
                "{name}"
            );
        }
        if let Some(tail) = outcome.get("pending_tail") {
            assert_eq!(
                file["offset"], tail["byte_offset"],
                "{name}: torn tail stays unconsumed"
            );
        }
        if let Some(version) = outcome["version"].as_i64() {
            assert_eq!(
                env.count(&format!(
                    "SELECT version FROM sessions WHERE file_id = {file_id}"
                )),
                version,
                "{name}"
            );
        }
    }
    // v1: synthetic ids form one chain, and firstKeptEntryIndex is resolved.
    let chain = env.sql(
        "SELECT e.entry_id, e.parent_id FROM entries e JOIN files f USING(file_id)
         WHERE f.rel_path LIKE '%v1-tiny.jsonl' ORDER BY e.line_no",
    );
    for pair in chain.windows(2) {
        assert_eq!(pair[1]["parent_id"], pair[0]["entry_id"]);
    }
    assert_eq!(
        env.count(
            "SELECT count(*) FROM compactions c JOIN files f USING(file_id)
             WHERE f.rel_path LIKE '%v1-tiny.jsonl' AND c.first_kept_entry_id LIKE 'v1-%'"
        ),
        1
    );
    // v2 hookMessage is normalised to the custom role.
    assert!(env.count("SELECT count(*) FROM message_meta WHERE role = 'custom'") >= 1);
    assert_eq!(
        env.count("SELECT count(*) FROM message_meta WHERE role = 'hookMessage'"),
        0
    );
}

#[test]
fn unknown_types_roles_blocks_and_fields_stay_queryable() {
    let env = Env::with_fixture("damaged");
    env.sync();
    assert_eq!(
        env.count("SELECT count(*) FROM entries WHERE type = 'future_entry'"),
        1
    );
    // Unknown fields on known entries, on messages and on the header.
    assert_eq!(
        env.count("SELECT json_extract(raw, '$.futureField.a') FROM entries WHERE entry_id = 'k1'"),
        1
    );
    assert_eq!(
        env.count(
            "SELECT count(*) FROM messages WHERE json_extract(raw, '$.message.verdict') = 'approve'"
        ),
        1
    );
    assert_eq!(
        env.count("SELECT count(*) FROM sessions WHERE json_extract(header_raw, '$.harnessMeta.team') = 'x'"),
        1
    );
    // A line without an id is still an entry, with a synthetic id.
    assert_eq!(
        env.count("SELECT count(*) FROM entries WHERE type = 'leaf' AND synthetic_id"),
        1
    );
    assert!(env.count("SELECT count(*) FROM content_blocks WHERE type NOT IN ('text','thinking','toolCall','image')") >= 1);
    assert!(env.count("SELECT count(*) FROM message_meta WHERE role NOT IN ('user','assistant','toolResult','bashExecution','custom','system')") >= 1);
}

#[test]
fn image_payloads_are_blobs_never_text() {
    let env = Env::with_fixture("samples");
    env.sync();
    // compact_705ba5d4.jsonl holds three inline base64 images.
    assert_eq!(env.count("SELECT count(*) FROM images"), 3);
    assert_eq!(
        env.count("SELECT count(*) FROM entries WHERE raw LIKE '%iVBORw0KGgo%'"),
        0
    );
    assert_eq!(
        env.count("SELECT count(*) FROM images i JOIN blobs b USING(hash) WHERE b.encoding = 'base64' AND length(b.data) = i.byte_len"),
        3
    );
}
