//! Subagent runs, child transcripts, artifacts and child sessions, checked
//! against values read from the fixture JSON here (not from piidx).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{Env, fts_match, non_blank_lines};

const DIR: &str = "--home-user-proj-sub--";
const OFFICIAL: &str = "2026-02-20T09-00-00-000Z_0191a0b0-0000-7000-8000-00000000a001.jsonl";
const PI_SUBAGENTS: &str = "2026-02-21T14-00-00-000Z_0191a0b0-0000-7000-8000-00000000a002.jsonl";

/// `(entry id, details)` of every subagent toolResult in a fixture file.
fn subagent_results(path: &Path) -> Vec<(String, Value)> {
    non_blank_lines(path)
        .into_iter()
        .filter_map(|line| serde_json::from_slice::<Value>(&line.bytes).ok())
        .filter(|entry| entry["message"]["role"] == "toolResult")
        .filter(|entry| entry["message"]["details"]["results"].is_array())
        .map(|entry| {
            (
                entry["id"].as_str().unwrap().to_owned(),
                entry["message"]["details"].clone(),
            )
        })
        .collect()
}

fn fixture_file(env: &Env, name: &str) -> PathBuf {
    env.root.join(DIR).join(name)
}

fn cost_of(usage: &Value) -> Option<f64> {
    match &usage["cost"] {
        Value::Object(map) => map.get("total").and_then(Value::as_f64),
        other => other.as_f64(),
    }
}

#[test]
fn every_result_becomes_a_run_with_its_fixture_values() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let mut expected_runs = 0;
    for name in [OFFICIAL, PI_SUBAGENTS] {
        for (entry_id, details) in subagent_results(&fixture_file(&env, name)) {
            for (position, result) in details["results"].as_array().unwrap().iter().enumerate() {
                expected_runs += 1;
                let rows = env.sql(&format!(
                    "SELECT * FROM subagent_runs WHERE entry_id = '{entry_id}' AND position = {position}"
                ));
                assert_eq!(rows.len(), 1, "{entry_id} #{position}");
                let row = &rows[0];
                assert_eq!(row["mode"], details["mode"]);
                assert_eq!(
                    row["run_id"],
                    details.get("runId").cloned().unwrap_or(Value::Null)
                );
                assert_eq!(row["agent"], result["agent"]);
                assert_eq!(row["task"], result["task"]);
                assert_eq!(row["exit_code"], result["exitCode"]);
                assert_eq!(
                    row["model"],
                    result.get("model").cloned().unwrap_or(Value::Null)
                );
                let usage = &result["usage"];
                assert_eq!(row["input_tokens"].as_i64(), usage["input"].as_i64());
                assert_eq!(row["output_tokens"].as_i64(), usage["output"].as_i64());
                assert_eq!(
                    row["cache_read_tokens"].as_i64(),
                    usage["cacheRead"].as_i64()
                );
                assert_eq!(row["turns"].as_i64(), usage["turns"].as_i64());
                assert_eq!(row["cost"].as_f64(), cost_of(usage));
                let progress = &result["progressSummary"];
                assert_eq!(row["tool_count"].as_i64(), progress["toolCount"].as_i64());
                assert_eq!(row["duration_ms"].as_i64(), progress["durationMs"].as_i64());
                assert_eq!(
                    row["session_file"],
                    result.get("sessionFile").cloned().unwrap_or(Value::Null)
                );
                assert_eq!(
                    row["artifact_jsonl_path"],
                    result["artifactPaths"]
                        .get("jsonlPath")
                        .cloned()
                        .unwrap_or(Value::Null)
                );
                let messages = result["messages"].as_array().map_or(0, Vec::len);
                assert_eq!(row["message_count"].as_i64(), Some(messages as i64));
                // The fixtures' results state no `status` (that is Pi 1.5's,
                // see pi152.rs): it follows from the exit code and stop reason.
                let expected_status = match result["exitCode"].as_i64() {
                    Some(0) if result["stopReason"] == "error" => "failed",
                    Some(0) => "completed",
                    Some(-2) => "detached",
                    Some(-1) => "running",
                    _ => "failed",
                };
                assert_eq!(row["status"], expected_status, "{entry_id} #{position}");
                let error = result.get("error").or(result.get("errorMessage"));
                assert_eq!(row["error"], error.cloned().unwrap_or(Value::Null));
                let child_messages = env.count(&format!(
                    "SELECT count(*) FROM subagent_messages m JOIN subagent_runs r USING (run_rowid)
                      WHERE r.entry_id = '{entry_id}' AND r.position = {position}"
                ));
                assert_eq!(child_messages, messages as i64);
            }
        }
    }
    assert_eq!(
        env.count("SELECT count(*) FROM subagent_runs"),
        expected_runs
    );
    assert!(expected_runs >= 8);
    // Both failure kinds are present.
    assert!(env.count("SELECT count(*) FROM subagent_runs WHERE status = 'detached'") >= 1);
    assert!(env.count("SELECT count(*) FROM subagent_runs WHERE status = 'failed'") >= 2);
}

#[test]
fn child_tool_calls_are_joined_to_their_results() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let mut expected = Vec::new();
    for (entry_id, details) in subagent_results(&fixture_file(&env, OFFICIAL)) {
        for (position, result) in details["results"].as_array().unwrap().iter().enumerate() {
            let messages = result["messages"].as_array().cloned().unwrap_or_default();
            for message in &messages {
                for block in message["content"].as_array().cloned().unwrap_or_default() {
                    if block["type"] == "toolCall" {
                        let id = block["id"].as_str().unwrap().to_owned();
                        let result_error = messages
                            .iter()
                            .find(|m| m["role"] == "toolResult" && m["toolCallId"] == id.as_str())
                            .map(|m| m["isError"].as_bool().unwrap_or(false));
                        expected.push((entry_id.clone(), position, id, result_error));
                    }
                }
            }
        }
    }
    assert!(!expected.is_empty());
    for (entry_id, position, call_id, result_error) in &expected {
        let rows = env.sql(&format!(
            "SELECT c.name, c.result_position, c.is_error FROM subagent_tool_calls c
               JOIN subagent_runs r USING (run_rowid)
              WHERE r.entry_id = '{entry_id}' AND r.position = {position} AND c.call_id = '{call_id}'"
        ));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["is_error"].as_i64().map(|v| v != 0), *result_error);
        assert!(rows[0]["result_position"].is_i64());
    }
}

#[test]
fn child_transcript_text_is_searchable_and_names_the_run() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let rows = env.sql(&format!(
        "SELECT c.json_path, c.kind, r.agent, r.session_id, r.entry_id, cr.message_position
           FROM chunks c
           JOIN chunk_runs cr ON cr.chunk_id = c.chunk_id
           JOIN subagent_runs r ON r.run_rowid = cr.run_rowid
          WHERE c.chunk_id IN {}",
        fts_match(&env.db, "capybarazest")
    ));
    assert_eq!(rows.len(), 1, "{rows:?}");
    // Where the token really is, found by walking the fixture JSON.
    let (entry_id, details) = subagent_results(&fixture_file(&env, OFFICIAL))
        .into_iter()
        .find(|(_, details)| details.to_string().contains("capybarazest"))
        .unwrap();
    let results = details["results"].as_array().unwrap();
    let (position, result) = results
        .iter()
        .enumerate()
        .find(|(_, r)| r.to_string().contains("capybarazest"))
        .unwrap();
    let messages = result["messages"].as_array().unwrap();
    let message_position = messages
        .iter()
        .position(|m| m.to_string().contains("capybarazest"))
        .unwrap();
    let row = &rows[0];
    assert_eq!(row["entry_id"], entry_id.as_str());
    assert_eq!(row["agent"], result["agent"]);
    assert_eq!(row["kind"], messages[message_position]["role"]);
    assert_eq!(
        row["message_position"].as_i64(),
        Some(message_position as i64)
    );
    assert!(row["json_path"].as_str().unwrap().starts_with(&format!(
        "$.message.details.results[{position}].messages[{message_position}]"
    )));
    assert_eq!(row["session_id"], "0191a0b0-0000-7000-8000-00000000a001");
    // The parent message's own text does not swallow the child transcript.
    let text = env.sql(&format!(
        "SELECT text FROM messages WHERE entry_id = '{entry_id}'"
    ));
    assert!(!text[0]["text"].as_str().unwrap().contains("capybarazest"));
    // `piidx search` names the run and the parent session.
    let out = env.run(&["search", "capybarazest", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hit = &hits[0];
    assert_eq!(hit["session_id"], "0191a0b0-0000-7000-8000-00000000a001");
    assert_eq!(hit["entry_id"], entry_id.as_str());
    assert_eq!(hit["run"]["agent"], result["agent"]);
    assert_eq!(hit["run"]["position"], position as i64);
    let text = env.run(&["search", "capybarazest"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("in subagent run #"), "{text}");
}

#[test]
fn artifacts_are_linked_searchable_and_missing_ones_flagged() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let artifacts = env.root.join(DIR).join("subagent-artifacts");
    let on_disk: Vec<String> = fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") || name.ends_with(".json") || name.ends_with(".jsonl"))
        .collect();
    assert_eq!(
        env.count("SELECT count(*) FROM subagent_artifacts") as usize,
        on_disk.len()
    );
    for name in &on_disk {
        let size = fs::metadata(artifacts.join(name)).unwrap().len() as i64;
        let rows = env.sql(&format!(
            "SELECT a.size, a.kind, r.run_id, r.agent FROM subagent_artifacts a
               LEFT JOIN subagent_runs r ON r.run_rowid = a.run_rowid WHERE a.name = '{name}'"
        ));
        assert_eq!(rows[0]["size"].as_i64(), Some(size), "{name}");
        assert_eq!(rows[0]["run_id"], "a1b2c3d4", "{name} linked to its run");
        assert_eq!(rows[0]["agent"], "worker");
    }
    // The artifact .jsonl starts with a session header then agent events.
    let jsonl = non_blank_lines(&artifacts.join("a1b2c3d4_worker.jsonl"));
    let first: Value = serde_json::from_slice(&jsonl[0].bytes).unwrap();
    let second: Value = serde_json::from_slice(&jsonl[1].bytes).unwrap();
    assert_eq!(first["type"], "session");
    assert_eq!(second["type"], "agent_start");
    assert_eq!(
        env.sql("SELECT kind FROM subagent_artifacts WHERE name = 'a1b2c3d4_worker.jsonl'")[0]["kind"],
        "event_stream"
    );
    let session_id = first["id"].as_str().unwrap();
    // Never a session: the only session with that id is the real child file.
    let paths = env.sql(&format!(
        "SELECT file_path FROM sessions WHERE session_id = '{session_id}'"
    ));
    assert_eq!(paths.len(), 1);
    assert!(paths[0]["file_path"].as_str().unwrap().contains("/run-0/"));
    // `_output.md` text is searchable.
    let hits = env.sql(
        "SELECT a.name FROM artifact_fts JOIN subagent_artifacts a ON a.artifact_id = artifact_fts.rowid
          WHERE artifact_fts MATCH 'axolotlvine'",
    );
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0]["name"], "a1b2c3d4_worker_output.md");
    // Runs whose recorded artifact files do not exist stay, flagged.
    for (_, details) in subagent_results(&fixture_file(&env, PI_SUBAGENTS)) {
        for (position, result) in details["results"].as_array().unwrap().iter().enumerate() {
            let recorded = result["artifactPaths"].as_object().map_or(0, |m| m.len()) as i64;
            let present = result["artifactPaths"].as_object().map_or(0, |m| {
                m.values()
                    .filter_map(Value::as_str)
                    .filter_map(|p| p.rsplit('/').next())
                    .filter(|name| artifacts.join(name).exists())
                    .count()
            }) as i64;
            let row = &env.sql(&format!(
                "SELECT artifacts_missing, session_file_missing FROM v_subagent_runs
                  WHERE run_id = '{}' AND position = {position}",
                details["runId"].as_str().unwrap()
            ))[0];
            assert_eq!(row["artifacts_missing"].as_i64(), Some(recorded - present));
            let child_exists = result["sessionFile"].as_str().is_some_and(|file| {
                let tail: Vec<&str> = file.rsplitn(5, '/').collect();
                let rel = format!("{}/{}/{}/{}", tail[3], tail[2], tail[1], tail[0]);
                env.root.join(DIR).join(rel).exists()
            });
            let expected_missing = result["sessionFile"].is_string() && !child_exists;
            assert_eq!(
                row["session_file_missing"].as_i64(),
                Some(expected_missing as i64)
            );
        }
    }
}

#[test]
fn child_session_links_both_ways_regardless_of_order() {
    let env = Env::with_fixture("subagents");
    let parent = fixture_file(&env, PI_SUBAGENTS);
    let child_dir = parent.with_extension("");
    let child = child_dir.join("a1b2c3d4/run-0/session.jsonl");
    let header: Value = serde_json::from_slice(&non_blank_lines(&child)[0].bytes).unwrap();
    let child_id = header["id"].as_str().unwrap().to_owned();
    let parent_header: Value = serde_json::from_slice(&non_blank_lines(&parent)[0].bytes).unwrap();
    let parent_id = parent_header["id"].as_str().unwrap().to_owned();

    let check = |env: &Env| {
        let run = env.sql(
            "SELECT child_session_id, child_file_id FROM subagent_runs WHERE run_id = 'a1b2c3d4'",
        );
        assert_eq!(run[0]["child_session_id"], child_id.as_str());
        let session = env.sql(&format!(
            "SELECT parent_session_id, listed_by_pi FROM sessions WHERE session_id = '{child_id}'"
        ));
        assert_eq!(session[0]["parent_session_id"], parent_id.as_str());
        assert_eq!(session[0]["listed_by_pi"], 0);
    };

    // Child first, parent later.
    let held = env.dir.path().join("held.jsonl");
    fs::rename(&parent, &held).unwrap();
    env.sync();
    assert_eq!(
        env.count("SELECT count(*) FROM subagent_runs WHERE run_id = 'a1b2c3d4'"),
        0
    );
    fs::rename(&held, &parent).unwrap();
    env.sync();
    check(&env);

    // Parent first, child later.
    let held_child = env.dir.path().join("child.jsonl");
    fs::rename(&child, &held_child).unwrap();
    env.sync();
    assert_eq!(
        env.sql("SELECT child_session_id FROM subagent_runs WHERE run_id = 'a1b2c3d4'")[0]["child_session_id"],
        Value::Null
    );
    fs::rename(&held_child, &child).unwrap();
    env.sync();
    check(&env);
}

#[test]
fn artifacts_are_reread_only_when_changed_and_removed_when_gone() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let output = env
        .root
        .join(DIR)
        .join("subagent-artifacts/a1b2c3d4_worker_output.md");
    let before = env
        .sql("SELECT indexed_at FROM subagent_artifacts WHERE name = 'a1b2c3d4_worker_output.md'");
    std::thread::sleep(std::time::Duration::from_millis(20));
    env.sync();
    let same = env
        .sql("SELECT indexed_at FROM subagent_artifacts WHERE name = 'a1b2c3d4_worker_output.md'");
    assert_eq!(before, same, "unchanged artifact not re-read");
    fs::write(&output, "now it says pangolinwisp instead\n").unwrap();
    env.sync();
    let hits = |token: &str| {
        env.count(&format!(
            "SELECT count(*) FROM artifact_fts WHERE artifact_fts MATCH '{token}'"
        ))
    };
    assert_eq!(hits("pangolinwisp"), 1);
    assert_eq!(hits("axolotlvine"), 0);
    fs::remove_file(&output).unwrap();
    env.sync();
    assert_eq!(hits("pangolinwisp"), 0);
    assert_eq!(
        env.count(
            "SELECT count(*) FROM subagent_artifacts WHERE name = 'a1b2c3d4_worker_output.md'"
        ),
        0
    );
    let missing =
        env.sql("SELECT artifacts_missing FROM v_subagent_runs WHERE run_id = 'a1b2c3d4'");
    assert_eq!(missing[0]["artifacts_missing"], 1);
}

#[test]
fn subagents_command_filters_runs() {
    let env = Env::with_fixture("subagents");
    env.sync();
    let run = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["subagents", "--json"];
        all.extend_from_slice(args);
        let out = env.run(&all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Expectations from the fixture files.
    let mut all_results = Vec::new();
    for name in [OFFICIAL, PI_SUBAGENTS] {
        for (_, details) in subagent_results(&fixture_file(&env, name)) {
            all_results.extend(details["results"].as_array().unwrap().clone());
        }
    }
    assert_eq!(run(&[]).len(), all_results.len());
    let scouts = all_results.iter().filter(|r| r["agent"] == "scout").count();
    assert_eq!(run(&["--agent", "scout"]).len(), scouts);
    let failed = all_results
        .iter()
        .filter(|r| !matches!(r["exitCode"].as_i64(), Some(-2..=0)))
        .count();
    let failed_rows = run(&["--failed"]);
    assert_eq!(failed_rows.len(), failed);
    assert!(failed_rows.iter().all(|r| r["status"] == "failed"));
    let pi_subagents = subagent_results(&fixture_file(&env, PI_SUBAGENTS))
        .iter()
        .map(|(_, d)| d["results"].as_array().unwrap().len())
        .sum::<usize>();
    assert_eq!(run(&["--since", "2026-02-21"]).len(), pi_subagents);
    let table = env.run(&["subagents"]);
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("Summarize README.md"));
    let bad = env.run(&["subagents", "--since", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
}
