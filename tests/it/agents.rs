//! Pi's two other lines: oh-my-pi (`omp`) files written by omp 18.2.3's own
//! SessionManager (`fixtures/omp/`, expected values from omp's own code in
//! `fixtures/expected/omp-*.json`) and pi_agent_rust files in the port's
//! shapes (`fixtures/pi_agent_rust/`, `fixtures/expected/pi-agent-rust.json`):
//! nothing skipped, every planted word found in its own session, and
//! `sessions`, `show` and `usage` as each agent reads its files.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::util::{Env, assert_same_as_fresh_sync, copy_tree, fixtures, string_list};

fn expected(name: &str) -> Value {
    let text = fs::read_to_string(fixtures().join("expected").join(name)).expect("expected file");
    serde_json::from_str(&text).expect("expected JSON")
}

fn json(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    // `search` with no hit exits 1, as grep does.
    assert!(
        out.status.success() || (args[0] == "search" && out.status.code() == Some(1)),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn omp_env() -> Env {
    let env = Env::new();
    copy_tree(&fixtures().join("omp/sessions"), &env.root);
    env
}

fn port_env() -> Env {
    Env::with_fixture("pi_agent_rust")
}

#[test]
fn omp_tree_syncs_with_no_file_skipped() {
    let env = omp_env();
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["parse_errors"], 0, "{report}");
    assert_eq!(report["files_indexed"], 6, "{report}");
    assert_eq!(
        env.count("SELECT count(*) FROM sessions WHERE agent = 'omp'"),
        6
    );
}

/// `sessions --json` against omp's own `listAllSessions` (which lists
/// `*/*.jsonl`, so not the subagent transcripts): id, cwd, the name its
/// `/resume` shows, the parent as written, created; the message count is
/// the true one (omp's own list counts the first 4 KB only:
/// `omp-sessions.json` has the true count from `SessionManager.open`).
#[test]
fn omp_sessions_match_omps_own_listing() {
    let env = omp_env();
    env.sync();
    let ours = json(&env, &["sessions", "--json"]);
    let ours = ours.as_array().expect("array");
    let listing = expected("omp-listing.json");
    let opened = expected("omp-sessions.json");
    let listing = listing.as_array().expect("listing");
    assert_eq!(ours.len(), listing.len(), "{ours:#?}");
    for want in listing {
        let rel = want["path"].as_str().expect("path");
        let path = env.root.join(rel).to_string_lossy().into_owned();
        let got = ours
            .iter()
            .find(|s| s["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{rel} not listed"));
        assert_eq!(got["id"], want["id"], "{rel}");
        assert_eq!(got["cwd"], want["cwd"], "{rel}");
        assert_eq!(got["created"], want["created"], "{rel}");
        assert_eq!(got["firstMessage"], want["firstMessage"], "{rel}");
        assert_eq!(got["agent"], "omp", "{rel}");
        assert_eq!(
            got.get("name").unwrap_or(&Value::Null),
            &want["title"],
            "{rel}: the name omp's /resume shows"
        );
        assert_eq!(
            got.get("parentSessionPath").unwrap_or(&Value::Null),
            &want["parentSessionPath"],
            "{rel}"
        );
        let truth = opened
            .as_array()
            .and_then(|all| all.iter().find(|s| s["path"] == rel))
            .expect("opened session");
        assert_eq!(got["messageCount"], truth["messageCount"], "{rel}");
    }
}

/// `show --json` follows the branch omp resumes (its leaf is the last
/// entry), for every file, subagent transcripts included.
#[test]
fn omp_show_follows_omps_current_branch() {
    let env = omp_env();
    env.sync();
    for session in expected("omp-sessions.json").as_array().expect("array") {
        let rel = session["path"].as_str().expect("path");
        let path = env.root.join(rel).to_string_lossy().into_owned();
        assert_eq!(
            env.shown_branch(&path),
            string_list(&session["branch"]),
            "{rel}"
        );
    }
}

/// Cost as omp counts it: assistant usage in every file plus `model_usage`
/// side calls; the task tool's aggregated `details.usage` is not counted
/// again (the subagents' own files hold it). omp's per-session statistics
/// add the task usage, which `taskUsage` names.
#[test]
fn omp_usage_counts_model_usage_and_not_the_task_twice() {
    let env = omp_env();
    env.sync();
    let by_session = json(&env, &["usage", "--by", "session", "--json"]);
    let rows = by_session.as_array().expect("rows");
    let opened = expected("omp-sessions.json");
    // Forks repeat their source's entries (counted once, in the source);
    // the other sessions are their own.
    for session in opened.as_array().expect("array") {
        let id = session["id"].as_str().expect("id");
        if session["header"]["parentSession"].is_string()
            && !session["path"].as_str().is_some_and(|p| p.contains("/0-"))
        {
            continue;
        }
        let want = session["usage"]["cost"].as_f64().expect("cost")
            - session["taskUsage"]["cost"].as_f64().expect("task cost");
        let got = rows
            .iter()
            .find(|row| row["key"] == id)
            .and_then(|row| row["cost"].as_f64())
            .unwrap_or(0.0);
        assert!((got - want).abs() < 1e-9, "{id}: {got} != {want}");
        let subagent_cost = rows
            .iter()
            .find(|row| row["key"] == id)
            .and_then(|row| row["subagent_cost"].as_f64())
            .unwrap_or(0.0);
        assert_eq!(subagent_cost, 0.0, "{id}: the task's usage counted twice");
    }
    let by_model = json(&env, &["usage", "--by", "model", "--json"]);
    let haiku: f64 = by_model
        .as_array()
        .expect("rows")
        .iter()
        .filter(|row| {
            row["key"]
                .as_str()
                .is_some_and(|k| k.contains("claude-haiku-4-5"))
        })
        .filter_map(|row| row["cost"].as_f64())
        .sum();
    // The title call (model_usage, 0.00108) and both subagents' turns
    // (explore's: 0.0042 and its task call 0.0007; grep's: 0.001).
    assert!(
        (haiku - (0.00108 + 0.0042 + 0.0007 + 0.001)).abs() < 1e-9,
        "{haiku}"
    );
    // `model_change.model` ("provider/id") split for --model and the tables.
    assert_eq!(
        env.count(
            "SELECT count(*) FROM model_changes WHERE provider = 'anthropic' AND model_id = 'claude-sonnet-4-5'"
        ),
        1
    );
}

/// `subagents --json` lists the runs omp's task tool recorded
/// (`details.results[]`, nested runs in a subagent's own transcript
/// included), each with its usage as omp recorded it and linked to the
/// parent session and to the transcript omp wrote for it
/// (`<artifacts folder>/<id>.jsonl`; `runs` in omp-sessions.json, computed
/// with omp's own rules). The transcripts keep their own usage rows, so the
/// runs add nothing to `usage` (checked above).
#[test]
fn omp_subagent_runs_are_listed_and_linked_to_their_transcripts() {
    let env = omp_env();
    env.sync();
    let opened = expected("omp-sessions.json");
    let opened = opened.as_array().expect("array");
    let id_of = |rel: &str| {
        opened
            .iter()
            .find(|s| s["path"] == rel)
            .map(|s| s["id"].clone())
            .unwrap_or_else(|| panic!("{rel} not in omp-sessions.json"))
    };
    let ours = json(&env, &["subagents", "--json"]);
    let ours = ours.as_array().expect("runs");
    let mut want_runs = 0;
    for session in opened {
        for run in session["runs"].as_array().expect("runs") {
            want_runs += 1;
            let got = ours
                .iter()
                .find(|r| r["parent_session"] == session["id"] && r["task"] == run["task"])
                .unwrap_or_else(|| panic!("run {} not listed: {ours:#?}", run["id"]));
            assert_eq!(got["agent"], run["agent"], "{run}");
            assert_eq!(got["exit"], run["exitCode"], "{run}");
            assert_eq!(got["status"], "completed", "{run}");
            assert_eq!(got["cost"], run["cost"], "{run}");
            assert_eq!(got["tokens"], run["totalTokens"], "{run}");
            assert_eq!(
                got["duration_s"].as_f64(),
                run["durationMs"].as_f64().map(|ms| ms / 1000.0),
                "{run}"
            );
            let transcript = run["transcript"].as_str().expect("transcript");
            assert_eq!(got["child_session"], id_of(transcript), "{run}");
        }
    }
    assert_eq!(ours.len(), want_runs, "{ours:#?}");
    assert_eq!(want_runs, 2, "the fixture has a run and a nested run");
    // The link is re-derived from what the index holds: a second sync
    // writes nothing, and a fresh sync agrees.
    let again = env.sync();
    assert_eq!(again["files_indexed"], 0, "{again}");
    assert_eq!(
        json(&env, &["subagents", "--json"]),
        Value::Array(ours.clone())
    );
}

/// Sessions written by omp's whole agent (`fixtures/omp-agent`:
/// `createAgentSession` with its task tool, executor and async job manager,
/// driven by omp's own mock provider; `expected/omp-agent.json` from omp's
/// objects, see `generate/omp/gen-omp-agent.ts`). Every spawn is a run
/// linked to the transcript omp wrote for it, in the foreground
/// (`details.results`) or in the background, omp's default
/// (`details.progress`); a background run ends as omp's task tool says
/// once its `async-result` delivery (or a `hub` snapshot that consumed it)
/// is in the session, and stays `pending`, as the file wrote it, when none
/// came; a nested spawn's transcript is found in its parent transcript's
/// own folder (`<stem>/<stem>.<child>.jsonl`).
#[test]
fn omp_background_task_runs_end_as_omps_task_tool_says() {
    let env = Env::with_fixture("omp-agent/sessions");
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["parse_errors"], 0, "{report}");
    let want = expected("omp-agent.json");
    let runs = env.sql(
        "SELECT r.session_id, r.tool_call_id, r.child_location, r.agent, r.status, r.exit_code,
                r.mode, f.path AS child, r.model, coalesce(r.cost, 0) AS cost,
                -- omp's count (task/executor.ts getUsageTokens) leaves cache reads out
                coalesce(r.input_tokens + r.output_tokens + r.cache_write_tokens, 0) AS tokens
           FROM subagent_runs r LEFT JOIN files f ON f.file_id = r.child_file_id",
    );
    let mut spawns = 0;
    for session in want["sessions"].as_array().expect("sessions") {
        for spawn in session["spawns"].as_array().expect("spawns") {
            spawns += 1;
            // The file whose task call made it: the session, or a subagent's
            // transcript for a nested spawn.
            let file = spawn["file"].as_str().expect("file");
            let folder = file.strip_suffix(".jsonl").expect(".jsonl");
            let id = spawn["id"].as_str().expect("id");
            let run = runs
                .iter()
                .find(|r| {
                    r["session_id"] == spawn["session"]
                        && r["tool_call_id"] == spawn["toolCallId"]
                        && r["child_location"] == format!("{id}.jsonl")
                })
                .unwrap_or_else(|| panic!("{spawn} is no run: {runs:#?}"));
            assert_eq!(run["agent"], spawn["agent"], "{spawn}");
            // A background run's spend and model, which omp keeps in memory,
            // come from its transcript.
            assert_eq!(run["model"], spawn["model"], "{spawn}");
            assert_eq!(run["tokens"], spawn["tokens"], "{spawn}");
            let cost = |v: &Value| v.as_f64().expect("cost");
            assert!(
                (cost(&run["cost"]) - cost(&spawn["cost"])).abs() < 1e-12,
                "{spawn}: cost {}",
                run["cost"]
            );
            let transcript = format!("{folder}/{id}.jsonl");
            let child = run["child"].as_str().expect("linked transcript");
            assert!(
                child.ends_with(transcript.rsplit_once("/sessions/").expect("root").1),
                "{child} is not {transcript}"
            );
            if spawn["foreground"] == true {
                assert_eq!(run["mode"], Value::Null, "{spawn}");
                assert_eq!(run["exit_code"], spawn["exitCode"], "{spawn}");
                assert_eq!(run["status"], "completed", "{spawn}");
                continue;
            }
            assert_eq!(run["mode"], "background", "{spawn}");
            // omp moved a spawn never delivered to `running` in memory only:
            // the file's last word on it is the `pending` of its tool result.
            let status = match spawn["status"].as_str().expect("status") {
                "running" => "pending",
                settled => settled,
            };
            assert_eq!(run["status"], status, "{spawn}");
            if status == "completed" {
                assert_eq!(run["exit_code"], 0, "{spawn}");
            }
        }
    }
    assert_eq!(runs.len(), spawns, "{runs:#?}");
    for status in ["completed", "aborted", "pending"] {
        assert!(
            runs.iter().any(|run| run["status"] == status),
            "no {status} run: {runs:#?}"
        );
    }
}

/// The same sessions as omp lists and resumes them (`listing` and `files`
/// in `expected/omp-agent.json`, from omp's own code), each exported byte
/// for byte: what the whole agent writes (title slots, tool-execution
/// marks, developer reminders, subagent transcripts beside their
/// `.md`/`.json` outputs) reads as the SessionManager-written trees do.
#[test]
fn omps_whole_agent_sessions_list_and_resume_as_omp_does() {
    let env = Env::with_fixture("omp-agent/sessions");
    let report = env.sync();
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
    let want = expected("omp-agent.json");
    let fake_root = want["root"].as_str().expect("root");
    crate::random::assert_listed_as_omp_lists_in(&env, &want, fake_root);
    for (rel, file) in want["files"].as_object().expect("files") {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        assert_eq!(
            env.shown_branch(&path),
            string_list(&file["branch"]),
            "{rel}: current branch"
        );
        crate::random::assert_exports_as_written(&env, Path::new(&path));
    }
}

/// A background run's delivery comes in a later append, and its
/// transcript grows while it runs: the sync that reads the delivery ends
/// the run, the one that reads the transcript's end gives its spend, and
/// the index equals a fresh sync of the tree.
#[test]
fn an_omp_delivery_read_later_ends_its_run() {
    let env = Env::with_fixture("omp-agent/sessions");
    let session = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| {
            path.parent()
                .is_some_and(|dir| dir.ends_with("-tmp-pi-fixture-oagent-home-proj-background"))
        })
        .expect("the background session");
    let transcript = crate::util::jsonl_files(&session.with_extension(""))
        .into_iter()
        .next()
        .expect("its subagent's transcript");
    let whole = fs::read_to_string(&session).expect("read");
    let whole_transcript = fs::read_to_string(&transcript).expect("read");
    let cut = whole
        .find("{\"type\":\"custom_message\",\"customType\":\"async-result\"")
        .expect("a delivery");
    fs::write(&session, &whole[..cut]).expect("cut");
    // The transcript as it is before its first answer: header, model, prompt.
    let first_answer = whole_transcript
        .find("{\"type\":\"message\",\"id\"")
        .and_then(|prompt| {
            whole_transcript[prompt + 1..]
                .find("{\"type\":\"message\",\"id\"")
                .map(|at| prompt + 1 + at)
        })
        .expect("an answer");
    fs::write(&transcript, &whole_transcript[..first_answer]).expect("cut");
    let run = || {
        env.sql(
            "SELECT status, input_tokens FROM subagent_runs WHERE mode = 'background'
               AND session_id IN (SELECT session_id FROM sessions WHERE cwd LIKE '%/proj/background')",
        )
        .remove(0)
    };
    env.sync();
    assert_eq!(run()["status"], "pending");
    assert_eq!(run()["input_tokens"], Value::Null);
    fs::write(&transcript, &whole_transcript).expect("the transcript's end");
    let report = env.sync();
    assert_eq!(report["files_indexed"], 1, "{report}");
    assert_eq!(run()["status"], "pending");
    assert!(run()["input_tokens"].as_i64() > Some(0), "{}", run());
    fs::write(&session, &whole).expect("append the delivery");
    let report = env.sync();
    assert_eq!(report["files_indexed"], 1, "{report}");
    assert_eq!(run()["status"], "completed");
    assert_same_as_fresh_sync(&env, "a delivery and a transcript read after the spawn");
}

/// An index of schema 29 knew no background run: the next sync reads omp's
/// sessions again and holds what a fresh sync writes.
#[test]
fn an_older_index_gets_omps_background_runs_at_the_next_sync() {
    let env = Env::with_fixture("omp-agent/sessions");
    env.sync();
    let omp_files = env.count("SELECT count(*) FROM sessions WHERE agent = 'omp'");
    crate::util::db_sql(
        &env.db,
        "DELETE FROM subagent_runs WHERE mode = 'background';
         DROP TABLE subagent_deliveries;
         PRAGMA user_version = 29;",
    );
    let report = env.sync();
    assert_eq!(report["files_indexed"], omp_files, "{report}");
    let background = expected("omp-agent.json")["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .flat_map(|session| session["spawns"].as_array().expect("spawns"))
        .filter(|spawn| spawn["foreground"] == false)
        .count();
    assert_eq!(
        env.count("SELECT count(*) FROM subagent_runs WHERE mode = 'background'"),
        background as i64
    );
    assert_same_as_fresh_sync(&env, "an index upgraded from schema 29");
}

/// omp renames a session by rewriting the 256-byte title slot in place:
/// the next sync reads the slot again, not the file, and the name follows.
#[test]
fn omp_rename_in_place_is_read_without_reindexing() {
    let env = omp_env();
    env.sync();
    let file = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with("66515f90587b.jsonl"))
        .expect("alpha session");
    let head = r#"{"type":"title","v":1,"title":"Renamed walrusly","source":"user","updatedAt":"2026-11-21T00:00:00.000Z","pad":"#;
    let slot = format!("{head}\"{}\"}}\n", " ".repeat(252 - head.len()));
    assert_eq!(slot.len(), 256);
    let before = fs::read(&file).expect("read");
    let handle = fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&handle, slot.as_bytes(), 0).expect("rewrite slot");
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    handle.set_modified(when).expect("mtime");
    assert_eq!(fs::read(&file).expect("read").len(), before.len());
    let report = env.sync();
    assert_eq!(report["bytes_read"], 0, "the file was read again: {report}");
    assert_eq!(report["entries_added"], 0, "{report}");
    let names = env.sql("SELECT name FROM sessions WHERE session_id LIKE '01a1f82f-1e80%'");
    assert_eq!(names[0]["name"], "Renamed walrusly");
    // A blank slot title hides header.title: the compaction's shortSummary names it.
    let head = r#"{"type":"title","v":1,"title":"","updatedAt":"2026-11-21T00:00:00.000Z","pad":"#;
    let slot = format!("{head}\"{}\"}}\n", " ".repeat(252 - head.len()));
    std::os::unix::fs::FileExt::write_all_at(&handle, slot.as_bytes(), 0).expect("rewrite slot");
    handle
        .set_modified(when + std::time::Duration::from_secs(1))
        .expect("mtime");
    env.sync();
    let names = env.sql("SELECT name FROM sessions WHERE session_id LIKE '01a1f82f-1e80%'");
    assert_eq!(names[0]["name"], "Flamingo fix summary");
}

/// (word, file it is planted in, the kind of field) for every planted word.
const OMP_WORDS: &[(&str, &str, &str)] = &[
    ("walrusgate", "01a1f82f-1e80", "toolCall argument"),
    ("zebra", "01a1f82f-1e80", "thinking, assistant text"),
    ("flamingoLoader", "01a1f82f-1e80", "toolResult text"),
    ("heronmark", "01a1f82f-1e80", "label"),
    ("moosequill", "01a1f82f-1e80", "mode_change data"),
    ("lynxward", "01a1f82f-1e80", "ttsr_injection rules"),
    ("gecko", "01a1f82f-1e80", "developer message"),
    ("marmosetLevel", "01a1f82f-1e80", "fileMention file content"),
    ("ibisloop", "01a1f82f-1e80", "pythonExecution code/output"),
    ("okapidrum", "01a1f82f-1e80", "bashExecution"),
    ("koalabrisk", "01a1f82f-1e80", "compaction summary"),
    ("yakfjord", "01a1f82f-1e80", "full tool output (0.bash.log)"),
    (
        "\"fix summary\"",
        "01a1f82f-1e80",
        "compaction shortSummary",
    ),
    ("\"Alpha flamingo rename\"", "01a1f82f-1e80", "title_change"),
    (
        "quokkalane",
        "01a1f82f-5148",
        "subagent transcript (and the task result)",
    ),
    (
        "\"You are the explore subagent\"",
        "01a1f82f-5148",
        "session_init systemPrompt",
    ),
    ("tapirwell", "01a1f82f-5918", "nested subagent transcript"),
    ("octopus", "01a1f867-4198", "user text"),
    ("penguin", "01a1f867-4198", "user text beside a blob image"),
    ("gannetfold", "01a1f867-4198", "custom entry data"),
    ("puffinrest", "01a1f867-4198", "custom_message"),
    ("albatrossine", "01a1f867-4198", "branch_summary"),
    ("seahorsewick", "01a1f867-4198", "user text on a branch"),
    (
        "squidline",
        "01a1f868-5308",
        "copied into the createBranchedSession fork",
    ),
    ("narwhalspoke", "01a1f868-5308", "fork's own text"),
    ("lemurquill", "01a1f869-4538", "fork() copy's own text"),
];

const PORT_WORDS: &[(&str, &str, &str)] = &[
    ("capybara", "a1b2c3d4", "user text"),
    ("axolotl", "a1b2c3d4", "toolCall argument"),
    (
        "\"ocelot chart\"",
        "a1b2c3d4",
        "user text beside a $piBlob image",
    ),
    ("\"ocelot-mark\"", "a1b2c3d4", "label"),
    ("jaguarundi", "a1b2c3d4", "id-less custom entry"),
    ("pangolin", "a1b2c3d4", "user text, bashExecution"),
    ("tapir", "a1b2c3d4", "branchSummary role"),
    ("kinkajou", "a1b2c3d4", "custom role"),
    ("binturong", "a1b2c3d4", "compaction summary"),
    ("margay", "a1b2c3d4", "compactionSummary role"),
    ("\"Rust port demo\"", "a1b2c3d4", "session_info"),
    ("quetzal", "0f0f0f0f", "user and assistant text"),
    ("Hello", "sess-123", "user text (id-less, parentId root)"),
    ("compacted", "sess-123", "compaction summary (id-less)"),
    ("\"branch summary\"", "sess-123", "branch_summary (id-less)"),
    ("\"demo session\"", "sess-123", "session_info (id-less)"),
    (
        "dugongwell",
        "5a5a5a5a",
        "user and assistant text in a SQLite session",
    ),
    (
        "\"SQLite store demo\"",
        "5a5a5a5a",
        "session_info in a SQLite session",
    ),
];

fn found_in_own_session(env: &Env, words: &[(&str, &str, &str)]) {
    let mut missing = Vec::new();
    for (word, session, kind) in words {
        let hits = json(env, &["search", word, "--session", session, "--json"]);
        if hits.as_array().is_none_or(Vec::is_empty) {
            missing.push(format!("{word} ({kind}) in {session}"));
        }
    }
    assert!(
        missing.is_empty(),
        "not found in their own session: {missing:#?}"
    );
}

#[test]
fn every_planted_omp_word_is_found_in_its_own_session() {
    let env = omp_env();
    env.sync();
    found_in_own_session(&env, OMP_WORDS);
    let doctor = json(&env, &["doctor", "--json"]);
    assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    // A blob reference is no image payload and no text.
    assert_eq!(env.count("SELECT count(*) FROM images"), 0);
    let hits = json(&env, &["search", "73f66894d05ef479", "--json"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(0), "{hits}");
}

#[test]
fn port_tree_syncs_with_no_file_skipped_and_every_word_found() {
    let env = port_env();
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    // Three JSONL files and a SQLite session database.
    assert_eq!(report["files_indexed"], 4, "{report}");
    assert_eq!(
        env.count("SELECT count(*) FROM sessions WHERE agent = 'pi_agent_rust'"),
        4
    );
    found_in_own_session(&env, PORT_WORDS);
    // doctor's re-read agrees with what sync stored (the SQLite file included).
    let doctor = json(&env, &["doctor", "--json"]);
    assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    // `$piBlob` references are not text.
    let hits = json(&env, &["search", "d14a6fe09e3f9b0f", "--json"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(0), "{hits}");
}

/// Names, counts, parents and the current branch as the port reads them:
/// the header's `leafId` picks a branch that is not the file's last one.
#[test]
fn port_sessions_and_show_follow_the_ports_reading() {
    let env = port_env();
    env.sync();
    let ours = json(&env, &["sessions", "--json"]);
    for want in expected("pi-agent-rust.json").as_array().expect("array") {
        let Some(rel) = want["path"].as_str() else {
            continue;
        };
        let path = env.root.join(rel).to_string_lossy().into_owned();
        let got = ours
            .as_array()
            .and_then(|all| all.iter().find(|s| s["path"] == path.as_str()))
            .unwrap_or_else(|| panic!("{rel} not listed"));
        assert_eq!(got["id"], want["id"], "{rel}");
        assert_eq!(got["agent"], "pi_agent_rust", "{rel}");
        assert_eq!(
            got.get("name").unwrap_or(&Value::Null),
            &want["name"],
            "{rel}"
        );
        assert_eq!(got["messageCount"], want["messageCount"], "{rel}");
        assert_eq!(
            got.get("parentSessionPath").unwrap_or(&Value::Null),
            &want["parentSession"],
            "{rel}"
        );
        // The model and thinking level the port resumes with.
        assert_eq!(
            got.get("model").unwrap_or(&Value::Null),
            &want["model"],
            "{rel}"
        );
        assert_eq!(
            got.get("thinkingLevel").unwrap_or(&Value::Null),
            &want["thinkingLevel"],
            "{rel}"
        );
        if want["branch"].as_array().is_some_and(|b| !b.is_empty()) {
            assert_eq!(
                env.shown_branch(&path),
                string_list(&want["branch"]),
                "{rel}"
            );
        }
    }
    // The demo session's parent (`branchedFrom`) is linked.
    let parents =
        env.sql("SELECT parent_session_id FROM sessions WHERE session_id LIKE 'a1b2c3d4%'");
    assert_eq!(
        parents[0]["parent_session_id"],
        "0f0f0f0f-1111-4222-8333-444455556666"
    );
    // Cost: every assistant message, as the port has no other usage.
    let usage = json(&env, &["usage", "--session", "a1b2c3d4", "--json"]);
    let cost: f64 = usage
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["cost"].as_f64())
        .sum();
    assert!((cost - 0.0466).abs() < 1e-9, "{cost}");
}

/// A session of an older omp (13.19.0, written by its own SessionManager:
/// `fixtures/omp13/`), untitled, so its header has no field of omp's own:
/// it is omp's by its snowflake session id and by its entries
/// (`model_change.model`, `ttsr_injection`); and with a UUID for an id, as
/// omp 14 to 17 give, by its entries alone. Listed, shown, counted and
/// searched as omp 13 reads it (`expected/omp13.json`).
#[test]
fn older_omp_files_are_omps() {
    let env = Env::new();
    copy_tree(&fixtures().join("omp13/sessions"), &env.root);
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    let want = expected("omp13.json");
    let listed = &want["listing"][0];
    let ours = json(&env, &["sessions", "--json"]);
    let got = &ours[0];
    assert_eq!(ours.as_array().map(Vec::len), Some(1), "{ours}");
    assert_eq!(got["agent"], "omp", "{got}");
    assert_eq!(got["id"], listed["id"]);
    assert_eq!(got["cwd"], listed["cwd"]);
    assert_eq!(got.get("name").unwrap_or(&Value::Null), &listed["title"]);
    assert_eq!(got["created"], listed["created"]);
    assert_eq!(got["messageCount"], listed["messageCount"]);
    assert_eq!(got["firstMessage"], listed["firstMessage"]);
    let id = listed["id"].as_str().expect("id");
    let shown = json(&env, &["show", id, "--json"]);
    let ids: Vec<&Value> = shown
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| &e["id"])
        .collect();
    let branch: Vec<&Value> = want["open"]["branch"]
        .as_array()
        .expect("branch")
        .iter()
        .collect();
    assert_eq!(ids, branch);
    let usage = json(&env, &["usage", "--session", id, "--json"]);
    let cost: f64 = usage
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["cost"].as_f64())
        .sum();
    let want_cost = want["open"]["usage"]["cost"].as_f64().expect("cost");
    assert!((cost - want_cost).abs() < 1e-9, "{cost} != {want_cost}");
    for word in ["wapitiquill", "gharialnote"] {
        let hits = json(
            &env,
            &["search", word, "--agent", "omp", "--session", id, "--json"],
        );
        assert!(!hits.as_array().expect("hits").is_empty(), "{word}");
    }

    // The same file with a UUID for its session id (omp 14 and later):
    // its header is Pi's to the letter; its entries are omp's.
    let file = crate::util::jsonl_files(&env.root).remove(0);
    let text = fs::read_to_string(&file).expect("read");
    let uuid = "019d4d9c-8e00-7000-8000-0000000000aa";
    fs::write(&file, text.replace(id, uuid)).expect("write");
    let report = env.sync();
    assert_eq!(report["files_indexed"], 1, "{report}");
    let agents = env.sql("SELECT session_id, agent FROM sessions");
    assert_eq!(agents.len(), 1, "{agents:?}");
    assert_eq!(agents[0]["session_id"], uuid);
    assert_eq!(agents[0]["agent"], "omp");
    assert_same_as_fresh_sync(&env, "synced again");
}

/// The port's `fallback*` header fields are what it resumes a branch
/// with that has no model or thinking change of its own while another
/// branch has one (`effective_model_for_current_path`,
/// `effective_thinking_level_for_current_path` in its `session.rs`):
/// `sessions --json` shows them as written and the model they give. Pi's
/// and omp's rows have none of these fields.
#[test]
fn port_fallback_header_fields_give_the_model_of_a_branch_without_a_change() {
    let env = port_env();
    let dir = env.root.join("--home-u-work-rsdemo--");
    // In the shape the port's serde structs write (see the generator):
    // the leaf is on the branch without changes; the other branch has both.
    let lines = [
        r#"{"type":"session","version":3,"id":"f4f4f4f4-0000-4000-8000-000000000001","timestamp":"2026-11-22T08:00:00.000Z","cwd":"/home/u/work/rsdemo","provider":"anthropic","modelId":"claude-opus-4-1","thinkingLevel":"high","fallbackProvider":"openai","fallbackModelId":"gpt-5","fallbackThinkingLevel":"low","leafId":"f0000002"}"#,
        r#"{"type":"message","id":"f0000001","timestamp":"2026-11-22T08:00:01.000Z","message":{"role":"user","content":"Which fallback, said the okapi?","timestamp":1795334401000}}"#,
        r#"{"type":"message","id":"f0000002","parentId":"f0000001","timestamp":"2026-11-22T08:00:02.000Z","message":{"role":"user","content":"This branch has no change.","timestamp":1795334402000}}"#,
        r#"{"type":"model_change","id":"f0000003","parentId":"f0000001","timestamp":"2026-11-22T08:00:03.000Z","provider":"anthropic","modelId":"claude-opus-4-1"}"#,
        r#"{"type":"thinking_level_change","id":"f0000004","parentId":"f0000003","timestamp":"2026-11-22T08:00:04.000Z","thinkingLevel":"high"}"#,
    ];
    fs::write(
        dir.join("2026-11-22T08-00-00.000Z_f4f4f4f4.jsonl"),
        lines.join("\n") + "\n",
    )
    .expect("write");
    env.sync();
    let ours = json(&env, &["sessions", "--json"]);
    let got = ours
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|s| s["id"] == "f4f4f4f4-0000-4000-8000-000000000001")
        })
        .expect("listed");
    assert_eq!(
        got["model"],
        serde_json::json!({"provider": "openai", "id": "gpt-5"})
    );
    assert_eq!(got["thinkingLevel"], "low");
    assert_eq!(got["fallbackProvider"], "openai");
    assert_eq!(got["fallbackModelId"], "gpt-5");
    assert_eq!(got["fallbackThinkingLevel"], "low");

    let env = omp_env();
    env.sync();
    for row in json(&env, &["sessions", "--json"])
        .as_array()
        .expect("rows")
    {
        for key in ["model", "thinkingLevel", "fallbackProvider"] {
            assert!(row.get(key).is_none(), "{row}");
        }
    }
}

/// One root with all three agents' files: nothing skipped, `--agent` keeps
/// each one's sessions on the scope commands, the JSON says which.
#[test]
fn a_mixed_tree_keeps_each_agent_apart() {
    let env = Env::new();
    copy_tree(&fixtures().join("omp/sessions"), &env.root);
    copy_tree(&fixtures().join("pi_agent_rust"), &env.root);
    copy_tree(&fixtures().join("sessions"), &env.root);
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    let count = |agent: &str| -> usize {
        json(&env, &["sessions", "--all", "--agent", agent, "--json"])
            .as_array()
            .map_or(0, Vec::len)
    };
    let pi_files = crate::util::jsonl_files(&fixtures().join("sessions")).len();
    assert_eq!(count("omp"), 6);
    assert_eq!(count("pi_agent_rust"), 4);
    assert_eq!(count("pi"), pi_files);
    let all = json(&env, &["sessions", "--all", "--json"]);
    assert!(
        all.as_array()
            .expect("array")
            .iter()
            .all(|s| ["pi", "omp", "pi_agent_rust"].contains(&s["agent"].as_str().unwrap_or(""))),
        "every session names its agent"
    );
    // Search, usage and tools take it too.
    let hits = json(&env, &["search", "capybara", "--agent", "omp", "--json"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(0));
    let hits = json(
        &env,
        &["search", "capybara", "--agent", "pi_agent_rust", "--json"],
    );
    assert!(hits.as_array().is_some_and(|h| !h.is_empty()));
    let usage = json(
        &env,
        &[
            "usage",
            "--agent",
            "pi_agent_rust",
            "--by",
            "session",
            "--json",
        ],
    );
    assert!(
        usage.as_array().expect("rows").iter().all(|row| {
            let key = row["key"].as_str().unwrap_or("");
            key.starts_with("a1b2c3d4")
                || key.starts_with("0f0f0f0f")
                || key.starts_with("5a5a5a5a")
                || key == "sess-123"
        }),
        "{usage}"
    );
    let tools = env.run(&["tools", "--agent", "omp", "--json"]);
    assert!(tools.status.success());
    let bad = env.run(&["sessions", "--agent", "codex"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown agent is a usage error"
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("pi, omp or pi_agent_rust"));
}

/// `sync` with no `--root` finds oh-my-pi's and the port's own places, and
/// `roots` says whose each one is; files that are not sessions are not read.
#[test]
fn default_roots_of_every_agent_are_synced_and_named() {
    let env = Env::new();
    let home = env.dir.path();
    let omp_file = fs::read_dir(fixtures().join("omp/sessions/-tmp-pi-fixture-omp-home-proj-beta"))
        .expect("omp fixtures")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("an omp session");
    let place = |dir: &Path, name: &str| {
        fs::create_dir_all(dir).expect("mkdir");
        fs::copy(&omp_file, dir.join(name)).expect("copy");
    };
    place(&home.join(".omp/agent/sessions/-proj"), "a.jsonl");
    place(
        &home.join(".omp/profiles/work/agent/sessions/-proj"),
        "b.jsonl",
    );
    place(&home.join("xdg/omp/sessions/-proj"), "c.jsonl");
    // A session omp wrote outside its root, named by a marker file.
    let custom = home.join("elsewhere");
    place(&custom, "d.jsonl");
    fs::create_dir_all(home.join(".omp/agent/custom-session-files")).expect("mkdir");
    fs::write(
        home.join(".omp/agent/custom-session-files/0123abcd"),
        custom.join("d.jsonl").to_string_lossy().as_bytes(),
    )
    .expect("marker");
    // The port's own root, with what it keeps beside its sessions.
    let port = home.join("port-sessions");
    copy_tree(&fixtures().join("pi_agent_rust"), &port);
    fs::write(port.join("session-index.sqlite"), b"not a session").expect("index");
    let demo = port.join("--home-u-work-rsdemo--/2026-11-20T09-00-00.123Z_a1b2c3d4.jsonl");
    let mut lock = demo.clone().into_os_string();
    lock.push(".lock");
    fs::write(&lock, b"").expect("lock");
    let mut bak = demo.clone().into_os_string();
    bak.push(".1234.bak");
    fs::copy(&demo, &bak).expect("bak");
    fs::create_dir_all(
        port.join("--home-u-work-rsdemo--/2026-11-20T09-00-00.123Z_a1b2c3d4.v2/index"),
    )
    .expect("v2");
    fs::write(
        port.join(
            "--home-u-work-rsdemo--/2026-11-20T09-00-00.123Z_a1b2c3d4.v2/index/offsets.jsonl",
        ),
        b"{\"offset\":0}\n",
    )
    .expect("offsets");

    let out = env
        .command(&["sync", "--json"])
        .env("XDG_DATA_HOME", home.join("xdg"))
        .env("PI_SESSIONS_DIR", &port)
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("PI_CONFIG_DIR")
        .env_remove("XDG_STATE_HOME")
        .output()
        .expect("sync");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["files_indexed"], 8, "{report}");
    let roots = json(&env, &["roots", "--json"]);
    let origin_of = |path: &Path| -> (String, Vec<String>) {
        let path = path.to_string_lossy();
        let root = roots
            .as_array()
            .and_then(|all| all.iter().find(|r| r["path"] == path.as_ref()))
            .unwrap_or_else(|| panic!("{path} is not a root: {roots}"));
        let agents = root["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        (root["origin"].as_str().unwrap_or("").to_owned(), agents)
    };
    let omp = vec!["omp".to_owned()];
    assert_eq!(
        origin_of(&home.join(".omp/agent/sessions")),
        ("omp".into(), omp.clone())
    );
    assert_eq!(
        origin_of(&home.join(".omp/profiles/work/agent/sessions")),
        ("omp_profile".into(), omp.clone())
    );
    assert_eq!(
        origin_of(&home.join("xdg/omp/sessions")),
        ("omp_xdg".into(), omp.clone())
    );
    assert_eq!(origin_of(&custom), ("omp_custom".into(), omp));
    assert_eq!(
        origin_of(&port),
        ("port_env".into(), vec!["pi_agent_rust".to_owned()])
    );
}

/// `export` writes each agent's own format back: omp's title slot (as it is
/// now) before the header, the port's id-less entries and `$piBlob`
/// references as written; byte for byte for these files.
#[test]
fn export_gives_each_agents_file_back() {
    for env in [omp_env(), port_env()] {
        env.sync();
        for file in crate::util::jsonl_files(&env.root) {
            let path = file.to_string_lossy().into_owned();
            let out = env.run(&["export", &path]);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.stdout == fs::read(&file).expect("read"),
                "{path}: export differs from the file"
            );
        }
    }
}

/// `resume` runs the agent's own program with its flags: `omp --session`
/// for oh-my-pi, `pi --session` for the port (its binary is `pi` too).
#[test]
fn resume_runs_each_agents_program() {
    let omp = omp_env();
    omp.sync();
    let out = omp.run(&["resume", "01a1f867", "--print"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(line.contains(" omp --session "), "{line}");
    let fork = omp.run(&["resume", "01a1f867", "--print", "--fork"]);
    assert!(String::from_utf8_lossy(&fork.stdout).contains(" omp --fork "));
    let port = port_env();
    port.sync();
    let out = port.run(&["resume", "a1b2c3d4", "--print"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(line.contains(" pi --session "), "{line}");
}

/// The port's SQLite session files are read read-only; a save (the port
/// replaces the whole content) is read again, and the index ends as a fresh
/// sync of the same tree.
#[test]
fn port_sqlite_sessions_are_read_again_when_saved() {
    let env = port_env();
    env.sync();
    let db = env
        .root
        .join("--home-u-work-rsdemo--/2026-11-21T10-00-00.000Z_5a5a5a5a.sqlite");
    let before = fs::read(&db).expect("read");
    {
        let conn = rusqlite::Connection::open(&db).expect("open");
        conn.execute(
            "INSERT INTO pi_session_entries (seq, json) VALUES (4, ?1)",
            [r#"{"type":"message","id":"s0000004","parentId":"s0000003","timestamp":"2026-11-21T10:00:04.000Z","message":{"role":"user","content":"one more: manateequay","timestamp":1795255204000}}"#],
        )
        .expect("save");
    }
    let after = fs::metadata(&db).expect("stat");
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(30);
    fs::File::options()
        .write(true)
        .open(&db)
        .and_then(|file| file.set_modified(when))
        .expect("mtime");
    assert!(after.len() >= before.len() as u64);
    env.sync();
    let hits = json(
        &env,
        &["search", "manateequay", "--session", "5a5a5a5a", "--json"],
    );
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");
    assert_same_as_fresh_sync(&env, "the port's SQLite session saved again");
}

/// The alpha session's truncated `read` result and its full output.
fn alpha_output(env: &Env) -> std::path::PathBuf {
    let folder = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with("66515f90587b.jsonl"))
        .expect("alpha session")
        .with_extension("");
    folder.join("0.bash.log")
}

/// One line of an omp session: the tool result `id`, whose output omp
/// truncated and kept whole in `<k>.bash.log` (`artifact://<k>`).
fn omp_truncated_result(id: &str, k: u32) -> String {
    let result = serde_json::json!({
        "type": "message", "id": id, "parentId": null, "timestamp": "2026-11-20T09:00:03.000Z",
        "message": {
            "role": "toolResult", "toolCallId": format!("call-{id}"), "toolName": "bash",
            "content": [{"type": "text", "text": format!("step ok\n[full output: artifact://{k}]")}],
            "details": {"meta": {"truncation": {"artifactId": k.to_string()}}},
            "isError": false, "timestamp": 1_795_165_203_000_u64
        }
    });
    format!("{result}\n")
}

/// A new omp session file under `env`'s root, holding omp's title slot,
/// its header and a tool result `r0` that names output 0; and its folder,
/// where omp keeps full outputs.
fn omp_session_naming_output_0(env: &Env) -> (std::path::PathBuf, std::path::PathBuf) {
    let session = env
        .root
        .join("--tmp-p--")
        .join("2026-11-20T09-00-00-000Z_01a1f82f-1e80-765c-bda8-000000000001.jsonl");
    let folder = session.with_extension("");
    fs::create_dir_all(&folder).expect("mkdir");
    let header = serde_json::json!({
        "type": "session", "version": 3, "id": "01a1f82f-1e80-765c-bda8-000000000001",
        "timestamp": "2026-11-20T09:00:00.000Z", "cwd": "/tmp/p"
    });
    // omp's title slot first: 256 bytes with its newline.
    let slot = serde_json::json!({"type": "title", "v": 1, "title": "", "pad": ""}).to_string();
    let slot = format!(
        "{}\n",
        slot.replace(
            r#""pad":"""#,
            &format!(r#""pad":"{}""#, " ".repeat(255 - slot.len()))
        )
    );
    assert_eq!(slot.len(), 256);
    let first = format!("{slot}{header}\n{}", omp_truncated_result("r0", 0));
    fs::write(&session, first).expect("write");
    (session, folder)
}

/// A full output that is a link to a file elsewhere is read through it,
/// as the sessions' walk follows links.
#[test]
fn omp_full_output_behind_a_link_is_followed() {
    let env = Env::new();
    let (_session, folder) = omp_session_naming_output_0(&env);
    let elsewhere = env.root.parent().expect("dir").join("kept.log");
    fs::write(&elsewhere, "qorvantic full output\n").expect("write output");
    std::os::unix::fs::symlink(&elsewhere, folder.join("0.bash.log")).expect("symlink");
    env.sync();
    let hits = json(&env, &["search", "qorvantic", "--json"]);
    let hits = hits.as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0]["entry_id"], "r0");
    assert_eq!(hits[0]["json_path"], "artifact://0");
}

/// A sync killed after it committed a session's new rows, before it linked
/// the outputs they name, leaves its mark to the next sync. That one finds
/// nothing new on disk and cannot know which sessions the killed one read:
/// it links every output again, not only those of the files it reads.
#[test]
fn a_sync_killed_before_linking_leaves_every_output_to_the_next() {
    let env = Env::new();
    let (session, folder) = omp_session_naming_output_0(&env);
    for k in [0, 1] {
        fs::write(
            folder.join(format!("{k}.bash.log")),
            format!("full output {k}\n"),
        )
        .expect("write output");
    }
    crate::util::age_files(&env.root);
    env.sync();
    let linked = "SELECT count(*) FROM subagent_artifacts WHERE entry_rowid IS NOT NULL";
    assert_eq!(env.count(linked), 1, "only output 0 is named");

    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&session)
        .expect("open");
    std::io::Write::write_all(&mut file, omp_truncated_result("r1", 1).as_bytes()).expect("append");
    crate::util::age_files(&env.root);
    let root = env.root.to_string_lossy().into_owned();
    let killed = env
        .command(&["sync", "--quiet", "--root", &root])
        .env("PIIDX_TEST_KILL_AT", "commit:1")
        .env("PIIDX_TEST_BATCH_BYTES", "1")
        .output()
        .expect("run sync");
    assert_eq!(killed.status.code(), None, "the sync was killed");
    // What the kill left: the result that names output 1, not its link.
    assert_eq!(
        env.count("SELECT count(*) FROM entries WHERE entry_id = 'r1'"),
        1
    );
    assert_eq!(
        env.count("SELECT count(*) FROM meta WHERE key = 'links_stale'"),
        1
    );
    assert_eq!(env.count(linked), 1);

    let report = env.sync();
    assert_eq!(report["files_indexed"], 0, "{report}");
    assert_eq!(env.count(linked), 2, "output 1 is linked to r1");
    assert_same_as_fresh_sync(&env, "synced again");
}

/// A root above omp's sessions folder (`--root ~/.omp`, say) puts the
/// session folders deeper than omp's own layout: their full outputs are
/// found all the same, and no warning calls them missing.
#[test]
fn omp_full_outputs_are_found_at_any_depth_below_the_root() {
    let env = Env::new();
    copy_tree(
        &fixtures().join("omp/sessions"),
        &env.root.join("agent/sessions"),
    );
    let report = env.sync();
    assert!(
        !report["warnings"].to_string().contains("full output"),
        "{report:#}"
    );
    let hits = json(&env, &["search", "yakfjord", "--json"]);
    let hits = hits.as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0]["json_path"], "artifact://0");
}

/// omp's full output of a truncated tool result (`<session>/0.bash.log`,
/// named `artifact://0` by the result) is searched as part of that result,
/// and the hit says which file it is in; a `.log` that goes, comes back or
/// changes converges to what a fresh sync gives; a missing one is a doctor
/// warning, never a failure, and the JSONL exports unchanged.
#[test]
fn omp_full_tool_output_is_searched_with_its_tool_result() {
    let (env, _blobs) = omp_env_with_blobs();
    env.sync();
    let log = alpha_output(&env);
    let hits = json(
        &env,
        &["search", "yakfjord", "--session", "01a1f82f-1e80", "--json"],
    );
    let hits = hits.as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let hit = &hits[0];
    assert_eq!(hit["entry_id"], "12b3e3bc");
    assert_eq!(hit["role"], "tool_result");
    assert_eq!(hit["tool_name"], "read");
    assert_eq!(hit["json_path"], "artifact://0");
    assert_eq!(hit["full_output"], log.to_string_lossy().as_ref());
    assert!(
        hit["snippet"]
            .as_str()
            .is_some_and(|s| s.contains("yakfjord")),
        "{hit}"
    );
    let text = env.run(&["search", "yakfjord"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("in the full output of the tool result (artifact://0)"),
        "{text}"
    );
    assert!(text.contains("0.bash.log"), "{text}");
    // Only in its own session, and not in a --raw search of the shards.
    let elsewhere = json(
        &env,
        &["search", "yakfjord", "--session", "01a1f867", "--json"],
    );
    assert_eq!(elsewhere.as_array().map(Vec::len), Some(0), "{elsewhere}");
    // Export is the JSONL, byte for byte (the .log is not part of it).
    let session = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with("66515f90587b.jsonl"))
        .expect("alpha session");
    let exported = env.run(&["export", "01a1f82f-1e80-765c-bda8-66515f90587b"]);
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    assert_eq!(exported.stdout, fs::read(&session).expect("read session"));

    // Gone: a warning from doctor, no failure, no hit.
    let saved = fs::read(&log).expect("read log");
    fs::remove_file(&log).expect("remove log");
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    let hits = json(&env, &["search", "yakfjord", "--json"]);
    assert_eq!(hits.as_array().map(Vec::len), Some(0), "{hits}");
    let doctor = env.run(&["doctor", "--json"]);
    assert!(
        doctor.status.success(),
        "{}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    let doctor: Value = serde_json::from_slice(&doctor.stdout).expect("doctor JSON");
    assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    let missing = doctor["findings"]["missing_outside"]
        .as_array()
        .expect("missing_outside");
    assert_eq!(missing.len(), 1, "{doctor}");
    assert!(
        missing[0]
            .as_str()
            .is_some_and(|m| m.contains(":8:") && m.contains("artifact://0")),
        "{doctor}"
    );
    assert_same_as_fresh_sync(&env, "synced again");

    // Back, then changed: found again, and the new text replaces the old.
    fs::write(&log, &saved).expect("restore log");
    env.sync();
    let hits = json(
        &env,
        &["search", "yakfjord", "--session", "01a1f82f-1e80", "--json"],
    );
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{hits}");
    assert_same_as_fresh_sync(&env, "synced again");
    let changed = String::from_utf8_lossy(&saved).replace("yakfjord", "bisonreach");
    fs::write(&log, changed).expect("change log");
    let when = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    fs::File::options()
        .write(true)
        .open(&log)
        .and_then(|file| file.set_modified(when))
        .expect("mtime");
    env.sync();
    let old = json(&env, &["search", "yakfjord", "--json"]);
    assert_eq!(old.as_array().map(Vec::len), Some(0), "{old}");
    let new = json(
        &env,
        &[
            "search",
            "bisonreach",
            "--session",
            "01a1f82f-1e80",
            "--json",
        ],
    );
    assert_eq!(new.as_array().map(Vec::len), Some(1), "{new}");
    let doctor = json(&env, &["doctor", "--json"]);
    assert_eq!(
        doctor["findings"]["missing_outside"],
        serde_json::json!([]),
        "{doctor}"
    );
    assert_same_as_fresh_sync(&env, "synced again");
}

/// An omp tool result that names its full output only in its text (omp
/// before `details.meta.truncation`), in a text long enough to be kept
/// apart from the line (the lean layout's shared texts, deflated), is the
/// result the output is searched with.
#[test]
fn omp_full_output_named_in_a_long_text_is_linked_to_its_result() {
    let (env, _blobs) = omp_env_with_blobs();
    let session = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with("66515f90587b.jsonl"))
        .expect("alpha session");
    let lines = fs::read_to_string(&session).expect("read session");
    let mut rewritten = String::new();
    for line in lines.lines() {
        let mut entry: Value = serde_json::from_str(line).expect("line");
        if entry["id"] == "12b3e3bc" {
            let message = &mut entry["message"];
            message.as_object_mut().expect("message").remove("details");
            let text = message["content"][0]["text"].as_str().expect("text");
            let long = "export const placeholder = 1;\n".repeat(80) + text;
            message["content"][0]["text"] = long.into();
        }
        rewritten.push_str(&entry.to_string());
        rewritten.push('\n');
    }
    fs::write(&session, rewritten).expect("write session");
    env.sync();
    let deflated = json(
        &env,
        &[
            "sql",
            "--json",
            "SELECT count(*) AS n FROM shared_texts WHERE deflated IS NOT NULL",
        ],
    );
    assert_ne!(deflated[0]["n"], 0, "{deflated}");
    let hits = json(
        &env,
        &["search", "yakfjord", "--session", "01a1f82f-1e80", "--json"],
    );
    let hits = hits.as_array().expect("hits");
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(hits[0]["entry_id"], "12b3e3bc", "{hits:#?}");
    assert_eq!(hits[0]["json_path"], "artifact://0", "{hits:#?}");
    assert_eq!(
        hits[0]["full_output"],
        alpha_output(&env).to_string_lossy().as_ref()
    );
    assert_same_as_fresh_sync(&env, "synced again");
}

/// A file a session names outside itself but that is not there (omp's
/// `<N>.<tool>.log` full output, an image in omp's blob store or the
/// port's `.blobs/` folder) is a warning of the sync that reads the
/// session, in `sync --json`'s `warnings`: the file and line, what is
/// missing, what to do. Never a failure, a skipped file or a changed exit
/// code; a sync that reads nothing new says nothing again, and a `.log`
/// that goes later is noticed by the sync that sees it go.
#[test]
fn missing_blobs_and_full_outputs_are_sync_warnings() {
    // omp's sessions without omp's blob store beside them.
    let env = omp_env();
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("report");
    assert_eq!(report["files_skipped"], 0, "{report}");
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(warnings.len(), 1, "{report}");
    let beta = "01a1f867-4198-7ac9-bc4e-c9c7c5896ef1.jsonl:5: image sha256 ";
    assert!(
        warnings[0].contains(beta)
            && warnings[0].contains(OMP_BLOB)
            && warnings[0].contains("missing from omp's blob store")
            && warnings[0].contains("copy omp's blobs/ folder back"),
        "{report}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(beta),
        "printed as a warning"
    );
    let again = env.sync();
    assert_eq!(again["warnings"], serde_json::json!([]), "{again}");

    // The full output goes: the sync that sees it go says so.
    fs::remove_file(alpha_output(&env)).expect("remove log");
    let gone = env.sync();
    let warnings = gone["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{gone}");
    let text = warnings[0].as_str().expect("text");
    assert!(
        text.contains("66515f90587b.jsonl:8: ")
            && text.contains("artifact://0")
            && text.contains("put the file back and run `piidx sync`"),
        "{gone}"
    );

    // The port: a `$piBlob` whose `.blobs/` folder is gone.
    let env = port_env();
    let blobs = env
        .root
        .join("--home-u-work-rsdemo--/2026-11-20T09-00-00.123Z_a1b2c3d4.jsonl.blobs");
    fs::remove_dir_all(&blobs).expect("remove .blobs");
    let report = env.sync();
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report}");
    let text = warnings[0].as_str().expect("text");
    assert!(
        text.contains("a1b2c3d4.jsonl:")
            && text.contains("missing from the session's .blobs/ folder"),
        "{report}"
    );
}

const OMP_BLOB: &str = "73f66894d05ef479d1019497f3fb035c79e7460bad36e960feefc2a2ebaa3ea9";
/// An omp tree with its blob store where omp keeps it: `sessions/`'s
/// sibling `blobs/`.
fn omp_env_with_blobs() -> (Env, std::path::PathBuf) {
    let env = omp_env();
    let blobs = env.root.parent().expect("parent").join("blobs");
    copy_tree(&fixtures().join("omp/blobs"), &blobs);
    (env, blobs)
}

fn show(env: &Env, args: &[&str]) -> String {
    let out = env.run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Images kept outside the JSONL (omp's `blob:sha256:` in `~/.omp/agent/
/// blobs/`, the port's `$piBlob` in `<file>.jsonl.blobs/`) are shown with
/// their size and file, read from the store when asked; a missing blob is
/// shown as missing and is a doctor warning, never a failure.
#[test]
fn images_outside_the_jsonl_are_shown_from_their_store() {
    let (env, blobs) = omp_env_with_blobs();
    env.sync();
    let text = show(&env, &["show", "01a1f867", "--all"]);
    let blob = blobs.join(OMP_BLOB);
    let want = format!(
        "[image image/png 1 KB, sha256 73f66894d05e… in omp's blob store: {}]",
        blob.display()
    );
    assert!(text.contains(&want), "{text}");
    // No copy in the index.
    assert_eq!(env.count("SELECT count(*) FROM blobs"), 0);

    fs::rename(&blobs, blobs.with_extension("gone")).expect("hide blobs");
    let text = show(&env, &["show", "01a1f867", "--all"]);
    assert!(
        text.contains("[image image/png, sha256 73f66894d05e…: missing from omp's blob store ("),
        "{text}"
    );
    let doctor = env.run(&["doctor", "--json"]);
    assert!(
        doctor.status.success(),
        "{}",
        String::from_utf8_lossy(&doctor.stderr)
    );
    let doctor: Value = serde_json::from_slice(&doctor.stdout).expect("doctor JSON");
    assert_eq!(doctor["problems"], serde_json::json!([]), "{doctor}");
    let missing = doctor["findings"]["missing_outside"]
        .as_array()
        .expect("list");
    assert!(
        missing
            .iter()
            .any(|m| m.as_str().is_some_and(|m| m.contains(OMP_BLOB))),
        "{doctor}"
    );
    // Export is the file as written, blob or not.
    let session = crate::util::jsonl_files(&env.root)
        .into_iter()
        .find(|path| path.to_string_lossy().ends_with("c9c7c5896ef1.jsonl"))
        .expect("beta session");
    let exported = env.run(&["export", "01a1f867-4198-7ac9-bc4e-c9c7c5896ef1"]);
    assert_eq!(exported.stdout, fs::read(&session).expect("read"));

    let env = port_env();
    env.sync();
    let text = show(&env, &["show", "a1b2c3d4"]);
    assert!(
        text.contains(
            "[image image/png 64 KB, sha256 d14a6fe09e3f… in the session's .blobs/ folder: "
        ),
        "{text}"
    );
    let doctor = json(&env, &["doctor", "--json"]);
    assert_eq!(
        doctor["findings"]["missing_outside"],
        serde_json::json!([]),
        "{doctor}"
    );
}

/// A pi_agent_rust SQLite session keeps an image over 64 KiB as a row of
/// its own `pi_session_blobs(digest, byte_length, data)` table, the entry
/// naming it `{"$piBlob":"sha256:<hex>",…}` (the port's
/// `session_sqlite/attachments.rs`; not a `.blobs/` folder, which only its
/// JSONL sessions have): `show` finds it there, `sync` and `doctor` say
/// nothing is missing; without the row, `sync` warns.
#[test]
fn port_sqlite_images_are_read_from_their_database() {
    let env = port_env();
    let dir = env.root.join("--home-u-work-rsdemo--");
    let path = port_sqlite_with_image(&dir);
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");
    let text = show(&env, &["show", "7c7c7c7c"]);
    let want = format!(
        "[image image/png 64 KB, sha256 d14a6fe09e3f… in the session database's pi_session_blobs table: {}]",
        path.display()
    );
    assert!(text.contains(&want), "{text}");
    let doctor = json(&env, &["doctor", "--json"]);
    assert_eq!(
        doctor["findings"]["missing_outside"],
        serde_json::json!([]),
        "{doctor}"
    );

    // Without the row (a save the port would never make): a warning.
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.execute("DELETE FROM pi_session_blobs", [])
            .expect("delete");
        conn.execute(
            "UPDATE pi_session_entries SET json = replace(json, 'tamarin', 'tamarins')",
            [],
        )
        .expect("touch");
    }
    let report = env.sync();
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(
        warnings[0].as_str().is_some_and(|w| w
            .contains("missing from the session database's pi_session_blobs table")
            && w.contains("7c7c7c7c.sqlite:")),
        "{report}"
    );
}

const PORT_BLOB: &str = "d14a6fe09e3f9b0fb0ea6784ce054690a3088f45b4a266c1b5406a6cd3bf4785";

/// A pi_agent_rust session read as the port reads it: the header, the
/// entries with every `$piBlob` attachment put back as base64 in its
/// `encoding` (from the database's `pi_session_blobs` for a `.sqlite`,
/// `session_sqlite/attachments.rs` `decode_entry`; from `<file>.blobs/`
/// for a JSONL, `session/attachments.rs`), and for a SQLite session its
/// `pi_session_meta` rows.
fn port_reading(path: &Path) -> (Value, Vec<Value>, Vec<(String, String)>) {
    use base64::Engine;
    let sqlite = path.extension().is_some_and(|ext| ext == "sqlite");
    let (header, entries, meta, conn) = if sqlite {
        let conn =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .expect("open");
        let header: String = conn
            .query_row("SELECT json FROM pi_session_header", [], |r| r.get(0))
            .expect("header");
        let entries: Vec<String> = conn
            .prepare("SELECT json FROM pi_session_entries ORDER BY seq")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .expect("entries");
        let meta: Vec<(String, String)> = conn
            .prepare("SELECT key, value FROM pi_session_meta ORDER BY key")
            .and_then(|mut st| st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .expect("meta");
        (header, entries, meta, Some(conn))
    } else {
        let text = fs::read_to_string(path).expect("read");
        let mut lines = text.lines().map(str::to_owned);
        let header = lines.next().expect("header");
        (header, lines.collect(), Vec::new(), None)
    };
    let header: Value = serde_json::from_str(&header).expect("header JSON");
    let entries = entries
        .iter()
        .map(|line| {
            let mut entry: Value = serde_json::from_str(line).expect("entry JSON");
            if let Some(Value::Array(blocks)) = entry.pointer_mut("/message/content") {
                for block in blocks {
                    let Some(reference) = block.get("data").filter(|d| d.is_object()).cloned()
                    else {
                        continue;
                    };
                    let digest = reference["$piBlob"].as_str().expect("digest").to_owned();
                    let bytes: Vec<u8> = match &conn {
                        Some(conn) => conn
                            .query_row(
                                "SELECT data FROM pi_session_blobs WHERE digest = ?1",
                                [&digest],
                                |r| r.get(0),
                            )
                            .expect("blob row"),
                        None => {
                            let mut folder = path.as_os_str().to_owned();
                            folder.push(".blobs");
                            fs::read(
                                std::path::PathBuf::from(folder)
                                    .join(digest.trim_start_matches("sha256:")),
                            )
                            .expect("blob file")
                        }
                    };
                    let text = if reference["encoding"] == "base64NoPad" {
                        base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes)
                    } else {
                        base64::engine::general_purpose::STANDARD.encode(&bytes)
                    };
                    block["data"] = Value::String(text);
                }
            }
            entry
        })
        .collect();
    (header, entries, meta)
}

/// `export` writes a pi_agent_rust session back in the port's own
/// formats: to a path ending in `.sqlite`, a SQLite session (the port's
/// tables, attachments as `pi_session_blobs` rows, `pi_session_meta` as the
/// port computes it); else JSONL, a SQLite session's attachments put back
/// inline. Each reads back, the port's way, JSON-equal to its source.
#[test]
fn export_writes_the_ports_own_formats_back() {
    let env = port_env();
    let dir = env.root.join("--home-u-work-rsdemo--");
    let with_image = port_sqlite_with_image(&dir);
    env.sync();
    let out = env.dir.path().join("out");
    fs::create_dir_all(&out).expect("mkdir");
    let sources = [
        dir.join("2026-11-21T10-00-00.000Z_5a5a5a5a.sqlite"),
        with_image,
        dir.join("2026-11-20T09-00-00.123Z_a1b2c3d4.jsonl"),
    ];
    for (n, source) in sources.iter().enumerate() {
        let (header, entries, meta) = port_reading(source);
        let source_arg = source.to_string_lossy().into_owned();
        for target in [format!("{n}.sqlite"), format!("{n}.jsonl")] {
            let target = out.join(target);
            let run = env.run(&["export", &source_arg, "-o", &target.to_string_lossy()]);
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            let (got_header, got_entries, got_meta) = port_reading(&target);
            assert_eq!(got_header, header, "{}", target.display());
            assert_eq!(got_entries, entries, "{}", target.display());
            if source.extension().is_some_and(|ext| ext == "sqlite")
                && target.extension().is_some_and(|ext| ext == "sqlite")
            {
                assert_eq!(got_meta, meta, "{}", target.display());
            }
        }
        // Standard output has no `.blobs/` beside it: a SQLite session's
        // attachments come inline (a JSONL session's stay beside it).
        let run = env.run(&["export", &source_arg]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let printed = if source.extension().is_some_and(|ext| ext == "sqlite") {
            out.join(format!("{n}-stdout.jsonl"))
        } else {
            source.clone()
        };
        if printed != *source {
            fs::write(&printed, &run.stdout).expect("write");
            assert!(!String::from_utf8_lossy(&run.stdout).contains("$piBlob"));
        } else {
            assert_eq!(run.stdout, fs::read(source).expect("read"));
        }
        let (got_header, got_entries, _) = port_reading(&printed);
        assert_eq!(got_header, header);
        assert_eq!(got_entries, entries);
    }
    // A JSONL session with a `.blobs/` image, as the port's SQLite: the
    // bytes are a row of the new file (the reading above found them).
    // The written file is indexed as the port's own.
    fs::copy(
        out.join("2.sqlite"),
        dir.join("2026-11-24T08-00-00.000Z_a1b2c3d4.sqlite"),
    )
    .expect("copy");
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["warnings"], serde_json::json!([]), "{report}");

    // Only the port has a SQLite format.
    let omp = omp_env();
    omp.sync();
    let target = omp.dir.path().join("x.sqlite");
    let run = omp.run(&["export", "01a1f867", "-o", &target.to_string_lossy()]);
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("only pi_agent_rust sessions"));
}

/// A pi_agent_rust SQLite session with a `$piBlob` image in `dir`, its
/// bytes (the demo's blob) a row of its `pi_session_blobs` table: the
/// port's `INIT_SQL` and `INIT_BLOBS`, and rows as it writes them.
fn port_sqlite_with_image(dir: &Path) -> std::path::PathBuf {
    let bytes = fs::read(
        dir.join("2026-11-20T09-00-00.123Z_a1b2c3d4.jsonl.blobs")
            .join(PORT_BLOB),
    )
    .expect("blob");
    let path = dir.join("2026-11-23T08-00-00.000Z_7c7c7c7c.sqlite");
    {
        // The port's INIT_SQL and INIT_BLOBS, and rows as it writes them.
        let conn = rusqlite::Connection::open(&path).expect("create");
        conn.execute_batch(
            "CREATE TABLE pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL);
             CREATE TABLE pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL);
             CREATE TABLE pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE pi_session_blobs (digest TEXT PRIMARY KEY NOT NULL,
                 byte_length INTEGER NOT NULL, data BLOB NOT NULL);",
        )
        .expect("schema");
        let id = "7c7c7c7c-1d1d-4e2e-8f3f-404040404040";
        let header = format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-11-23T08:00:00.000Z","cwd":"/home/u/work/rsdemo"}}"#
        );
        let image = format!(
            r#"{{"type":"message","id":"i0000001","timestamp":"2026-11-23T08:00:01.000Z","message":{{"role":"user","content":[{{"type":"text","text":"What does this tamarin plot say?"}},{{"type":"image","data":{{"$piBlob":"sha256:{PORT_BLOB}","sizeBytes":{},"encoding":"base64"}},"mimeType":"image/png"}}],"timestamp":1795420801000}}}}"#,
            bytes.len()
        );
        conn.execute(
            "INSERT INTO pi_session_header (id, json) VALUES (?1, ?2)",
            [id, header.as_str()],
        )
        .expect("header");
        conn.execute(
            "INSERT INTO pi_session_entries (seq, json) VALUES (1, ?1)",
            [image.as_str()],
        )
        .expect("entry");
        conn.execute(
            "INSERT INTO pi_session_blobs (digest, byte_length, data) VALUES (?1, ?2, ?3)",
            rusqlite::params![format!("sha256:{PORT_BLOB}"), bytes.len() as i64, bytes],
        )
        .expect("blob row");
        conn.execute(
            "INSERT INTO pi_session_meta (key, value) VALUES ('message_count', '1')",
            [],
        )
        .expect("meta");
    }
    path
}

/// `serve` shows an image kept outside the JSONL and its image route
/// returns the blob's bytes with their type; a blob that is missing, or
/// that the session does not name, is a 404.
#[test]
fn serve_returns_outside_images_from_their_store() {
    let (env, blobs) = omp_env_with_blobs();
    env.sync();
    let served = crate::serve::Served::start(&env, &[]);
    let (status, _, page) = served.get("/s/01a1f867?branch=4b5e5b85", &[]);
    assert_eq!(status, 200);
    let page = String::from_utf8_lossy(&page);
    let src = format!("image?b={OMP_BLOB}&amp;m=image%2Fpng");
    assert!(page.contains(&src), "{page}");
    let url = format!("/s/01a1f867-4198-7ac9-bc4e-c9c7c5896ef1/image?b={OMP_BLOB}&m=image%2Fpng");
    let (status, head, body) = served.get(&url, &[]);
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: image/png"),
        "{head}"
    );
    assert_eq!(
        dechunked(&head, body),
        fs::read(blobs.join(OMP_BLOB)).expect("blob")
    );
    // Not named by that session, or not a digest: nothing.
    let other = format!("/s/01a1f82f-1e80/image?b={OMP_BLOB}&m=image%2Fpng");
    assert_eq!(served.get(&other, &[]).0, 404);
    assert_eq!(
        served.get("/s/01a1f867/image?b=../../etc/passwd", &[]).0,
        404
    );
    fs::remove_file(blobs.join(OMP_BLOB)).expect("remove blob");
    assert_eq!(served.get(&url, &[]).0, 404);
    let (status, _, page) = served.get("/s/01a1f867?branch=4b5e5b85", &[]);
    assert_eq!(status, 200);
    assert!(
        String::from_utf8_lossy(&page).contains("missing from omp"),
        "page"
    );
    drop(served);

    let env = port_env();
    env.sync();
    let served = crate::serve::Served::start(&env, &[]);
    let url = format!("/s/a1b2c3d4/image?b={PORT_BLOB}&m=image%2Fpng");
    let (status, head, body) = served.get(&url, &[]);
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: image/png"),
        "{head}"
    );
    let blob = env
        .root
        .join("--home-u-work-rsdemo--/2026-11-20T09-00-00.123Z_a1b2c3d4.jsonl.blobs")
        .join(PORT_BLOB);
    assert_eq!(dechunked(&head, body), fs::read(blob).expect("blob"));
}

/// An HTTP/1.1 body as sent: chunked (a large answer) or whole.
fn dechunked(head: &str, body: Vec<u8>) -> Vec<u8> {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body;
    }
    let mut out = Vec::new();
    let mut rest = &body[..];
    loop {
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..end]).expect("hex").trim(), 16)
                .expect("chunk size");
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&rest[end + 2..end + 2 + size]);
        rest = &rest[end + 2 + size + 2..];
    }
}

/// The roles oh-my-pi and the port add are shown with their content, and
/// the entries that give no message are the same notes in `show` and on
/// the web page (one typed transcript under both).
#[test]
fn other_agents_roles_and_notes_are_shown_alike_in_show_and_serve() {
    let env = omp_env();
    env.sync();
    let session = "01a1f82f-1e80-765c";
    let text = show(&env, &["show", "--notes", session]);
    for want in [
        "── developer ·",
        "Developer note: keep the gecko flag on.",
        "── file mention ·",
        "@src/cfg.ts",
        "export const marmosetLevel = 3;",
        "── python ·",
        ">>> print('ibisloop')",
        "· e916e2a8 title = Alpha flamingo rename",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    let served = crate::serve::Served::start(&env, &[]);
    let (status, _, page) = served.get(&format!("/s/{session}"), &[]);
    assert_eq!(status, 200);
    let page = String::from_utf8_lossy(&page);
    assert!(
        page.contains("<span class=\"ty\">title_change</span> title = Alpha flamingo rename"),
        "{page}"
    );
    assert!(page.contains("marmosetLevel"), "{page}");
    // The same notes, in the same order.
    let on_page: Vec<&str> = page
        .split("<div class=\"note\" id=\"e-")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    let in_show: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("· "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert!(!in_show.is_empty());
    assert_eq!(on_page, in_show);
    drop(served);

    let env = port_env();
    env.sync();
    let text = show(&env, &["show", "a1b2c3d4", "--all"]);
    for want in [
        "── branch summary ·",
        "Branch summary: tried the tapir path.",
        "── compaction summary (4200 tokens before) ·",
        "Compacted: margay notes.",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// Strings that are not prose by design (docs/search.md): discriminators,
/// enums, times, identifiers, signatures, payloads and blob references.
/// Written here from the docs, not taken from piidx.
fn is_noise(key: &str, text: &str) -> bool {
    const KEYS: &[&str] = &[
        "type",
        "role",
        "id",
        "timestamp",
        "api",
        "provider",
        "model",
        "responseModel",
        "stopReason",
        "rawStopReason",
        "thinkingLevel",
        "providerThinkingLevel",
        "mimeType",
        "customType",
        "toolName",
        "status",
        "agentSource",
        "mode",
        "encoding",
        "hash",
        "signature",
        "$piBlob",
        "attribution",
    ];
    let payload = text.len() >= 256
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'));
    KEYS.contains(&key)
        || key.ends_with("Id")
        || key.ends_with("_id")
        || key.ends_with("Signature")
        || payload
        || text.starts_with("blob:sha256:")
}

/// Every non-noise string below `value`, with the key that holds it.
fn strings<'a>(value: &'a Value, key: &'a str, out: &mut Vec<(&'a str, &'a str)>) {
    match value {
        Value::String(text) if !is_noise(key, text) => out.push((key, text)),
        Value::Array(items) => items.iter().for_each(|item| strings(item, key, out)),
        Value::Object(map) => {
            let tool_call = map.get("type").and_then(Value::as_str) == Some("toolCall");
            for (child, item) in map {
                if !(tool_call && child == "name") {
                    strings(item, child, out);
                }
            }
        }
        _ => {}
    }
}

/// The entries of a session file as its agent wrote them (a port SQLite
/// session's rows included), with its session id.
fn fixture_entries(path: &Path) -> (String, Vec<Value>) {
    let lines: Vec<String> = if path.extension().is_some_and(|ext| ext == "sqlite") {
        let conn =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .expect("open");
        let header: String = conn
            .query_row("SELECT json FROM pi_session_header", [], |r| r.get(0))
            .expect("header");
        let mut lines = vec![header];
        let entries: Vec<String> = conn
            .prepare("SELECT json FROM pi_session_entries ORDER BY seq")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
            .expect("entries");
        lines.extend(entries);
        lines
    } else {
        fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let objects: Vec<Value> = lines
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|object: &Value| object["type"] != "title")
        .collect();
    let id = objects[0]["id"].as_str().expect("session id").to_owned();
    (id, objects.into_iter().skip(1).collect())
}

/// The end-to-end check of issue 35: one root holding all three agents'
/// files (Pi's, omp 18's and 13's, the port's JSONL and SQLite sessions)
/// syncs with no file skipped and no parse error; every string of every
/// omp and port fixture is found in its own session (the longest word of
/// each, searched with `--session`); `sessions`, `show`, `usage`,
/// `subagents` and `export` agree with each agent's own reading (the
/// expected files, computed by omp's code and by the port's rules).
/// `--nocapture` prints the found-in-own-session table per agent and kind
/// of field.
#[test]
fn every_agent_in_one_tree_end_to_end() {
    let env = Env::new();
    for tree in [
        "omp/sessions",
        "omp13/sessions",
        "pi_agent_rust",
        "sessions",
    ] {
        copy_tree(&fixtures().join(tree), &env.root);
    }
    let report = env.sync();
    assert_eq!(report["files_skipped"], 0, "{report}");
    assert_eq!(report["skipped"], serde_json::json!([]), "{report}");
    assert_eq!(report["parse_errors"], 0, "{report}");
    assert_eq!(report["unreadable"], serde_json::json!([]), "{report}");
    // omp's blob store is not in this root: its one image is a recorded
    // warning, nothing else is.
    let warnings = report["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{report}");
    assert!(warnings[0].as_str().is_some_and(|w| w.contains(OMP_BLOB)));

    // Every string of every omp and port fixture, in its own session.
    let mut table: std::collections::BTreeMap<(String, String), (usize, usize)> =
        Default::default();
    let mut missing = Vec::new();
    let mut searched = std::collections::HashSet::new();
    for (agent, tree) in [
        ("omp", "omp/sessions"),
        ("omp", "omp13/sessions"),
        ("pi_agent_rust", "pi_agent_rust"),
    ] {
        let files: Vec<std::path::PathBuf> = walkdir::WalkDir::new(fixtures().join(tree))
            .into_iter()
            .filter_map(Result::ok)
            .map(|entry| entry.into_path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|ext| ext == "jsonl" || ext == "sqlite")
            })
            .collect();
        for file in files {
            let (session, entries) = fixture_entries(&file);
            for entry in &entries {
                let mut found = Vec::new();
                strings(entry, "", &mut found);
                let kind_of_entry = match entry["message"]["role"].as_str() {
                    Some(role) => format!("message {role}"),
                    None => entry["type"].as_str().unwrap_or("?").to_owned(),
                };
                for (key, text) in found {
                    let word = text
                        .split(|c: char| !c.is_alphanumeric())
                        .max_by_key(|w| w.chars().count())
                        .unwrap_or("");
                    if word.chars().count() < 3 {
                        continue;
                    }
                    let row = table
                        .entry((agent.to_owned(), format!("{kind_of_entry} · {key}")))
                        .or_default();
                    row.1 += 1;
                    let query = format!("\"{word}\"");
                    if !searched.insert((query.clone(), session.clone())) {
                        row.0 += 1;
                        continue;
                    }
                    let hits = json(&env, &["search", &query, "--session", &session, "--json"]);
                    if hits.as_array().is_some_and(|h| !h.is_empty()) {
                        row.0 += 1;
                    } else {
                        missing.push(format!("{word} ({kind_of_entry} · {key}) in {session}"));
                    }
                }
            }
        }
    }
    eprintln!("| agent | kind of field | found in own session |\n|---|---|---|");
    for ((agent, kind), (found, total)) in &table {
        eprintln!("| {agent} | {kind} | {found}/{total} |");
    }
    assert!(
        missing.is_empty(),
        "not found in their own session: {missing:#?}"
    );

    // sessions: each agent's own list.
    let ours = json(&env, &["sessions", "--all", "--json"]);
    let ours = ours.as_array().expect("sessions");
    let row = |rel: &str| {
        let path = env.root.join(rel).to_string_lossy().into_owned();
        ours.iter()
            .find(|s| s["path"] == path.as_str())
            .unwrap_or_else(|| panic!("{rel} not listed"))
            .clone()
    };
    for want in expected("omp-listing.json").as_array().expect("omp") {
        let got = row(want["path"].as_str().expect("path"));
        assert_eq!(got["agent"], "omp");
        assert_eq!(got.get("name").unwrap_or(&Value::Null), &want["title"]);
        assert_eq!(got["firstMessage"], want["firstMessage"]);
    }
    let omp13 = expected("omp13.json");
    let got = row(omp13["listing"][0]["path"].as_str().expect("path"));
    assert_eq!(got["agent"], "omp");
    assert_eq!(got["messageCount"], omp13["listing"][0]["messageCount"]);
    for want in expected("pi-agent-rust.json").as_array().expect("port") {
        let Some(rel) = want["path"].as_str() else {
            continue;
        };
        let got = row(rel);
        assert_eq!(got["agent"], "pi_agent_rust");
        assert_eq!(got.get("name").unwrap_or(&Value::Null), &want["name"]);
        assert_eq!(got["messageCount"], want["messageCount"]);
        assert_eq!(got.get("model").unwrap_or(&Value::Null), &want["model"]);
    }
    for want in expected("listall-sessions.json").as_array().expect("pi") {
        let path = want["path"].as_str().expect("path");
        let rel = path
            .strip_prefix("/tmp/pi-fixture-root/")
            .expect("fake root");
        let got = row(rel);
        assert_eq!(got["agent"], "pi", "{rel}");
        assert_eq!(got["messageCount"], want["messageCount"], "{rel}");
        assert_eq!(got.get("name"), want.get("name"), "{rel}");
    }

    // show: the branch each agent resumes.
    let mut branches: Vec<(String, Value)> = expected("omp-sessions.json")
        .as_array()
        .expect("omp")
        .iter()
        .map(|s| {
            (
                s["path"].as_str().expect("path").to_owned(),
                s["branch"].clone(),
            )
        })
        .collect();
    branches.push((
        omp13["open"]["path"].as_str().expect("path").to_owned(),
        omp13["open"]["branch"].clone(),
    ));
    for want in expected("pi-agent-rust.json").as_array().expect("port") {
        if let Some(rel) = want["path"].as_str()
            && want["branch"].as_array().is_some_and(|b| !b.is_empty())
        {
            branches.push((rel.to_owned(), want["branch"].clone()));
        }
    }
    for (rel, branch) in branches {
        let path = env.root.join(&rel).to_string_lossy().into_owned();
        assert_eq!(env.shown_branch(&path), string_list(&branch), "{rel}");
    }

    // usage: omp's statistics without the task's aggregate; the port's
    // assistant costs.
    let by_session = json(&env, &["usage", "--by", "session", "--json"]);
    let cost_of = |id: &str| -> f64 {
        by_session
            .as_array()
            .expect("rows")
            .iter()
            .filter(|row| row["key"] == id)
            .filter_map(|row| row["cost"].as_f64())
            .sum()
    };
    for session in expected("omp-sessions.json").as_array().expect("omp") {
        let own = session["header"]["parentSession"].is_null()
            || session["path"].as_str().is_some_and(|p| p.contains("/0-"));
        if own {
            let want = session["usage"]["cost"].as_f64().expect("cost")
                - session["taskUsage"]["cost"].as_f64().expect("task");
            let got = cost_of(session["id"].as_str().expect("id"));
            assert!(
                (got - want).abs() < 1e-9,
                "{}: {got} != {want}",
                session["id"]
            );
        }
    }
    let want = omp13["open"]["usage"]["cost"].as_f64().expect("cost");
    let got = cost_of(omp13["open"]["id"].as_str().expect("id"));
    assert!((got - want).abs() < 1e-9, "omp 13: {got} != {want}");
    for want in expected("pi-agent-rust.json").as_array().expect("port") {
        if let (Some(id), Some(cost)) = (want["id"].as_str(), want["cost"].as_f64())
            && want["parentSession"].is_null()
        {
            let got = cost_of(id);
            assert!((got - cost).abs() < 1e-9, "{id}: {got} != {cost}");
        }
    }

    // subagents: omp's runs, linked to their transcripts.
    let runs = json(&env, &["subagents", "--json"]);
    let runs: Vec<&Value> = runs
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| {
            r["parent_session"]
                .as_str()
                .is_some_and(|p| p.starts_with("01a1f82f"))
        })
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs.iter().all(|r| r["child_session"].is_string()),
        "{runs:?}"
    );

    // export: every JSONL file back byte for byte.
    for file in crate::util::jsonl_files(&env.root) {
        let path = file.to_string_lossy().into_owned();
        let out = env.run(&["export", &path]);
        assert!(out.status.success(), "{path}");
        assert!(
            out.stdout == fs::read(&file).expect("read"),
            "{path}: export differs"
        );
    }
}

/// The lines of a small port session: a header, a user message, a long
/// assistant answer (`long` bytes of text), and a last user message.
fn port_lines(long: usize) -> Vec<String> {
    let message = |id: &str, parent: Option<&str>, second: u32, role: &str, text: &str| {
        serde_json::json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": format!("2026-11-21T10:00:0{second}.000Z"),
            "message": {"role": role, "content": [{"type": "text", "text": text}],
                        "timestamp": 1_795_255_200_000_i64 + i64::from(second) * 1000}})
        .to_string()
    };
    vec![
        serde_json::json!({"type": "session", "version": 3, "id": "cap-port",
            "timestamp": "2026-11-21T10:00:00.000Z", "cwd": "/home/u/work/capped"})
        .to_string(),
        message("c1", None, 1, "user", "first question, quokkaword"),
        message("c2", Some("c1"), 2, "assistant", &"x".repeat(long)),
        message(
            "c3",
            Some("c2"),
            3,
            "user",
            "after the long answer, wombatword",
        ),
    ]
}

/// A port session's entry longer than `--max-line-bytes` is recorded as
/// the JSONL reader records such a line (its number, offset and length,
/// never read) and the rest is indexed: the same rows as the same session
/// written as JSONL.
#[test]
fn a_port_entry_over_the_line_cap_is_recorded_as_a_jsonl_line_is() {
    let lines = port_lines(20_000);
    let as_port = Env::new();
    let port_dir = as_port.root.join("--home-u-work-capped--");
    fs::create_dir_all(&port_dir).expect("mkdir");
    let conn =
        rusqlite::Connection::open(port_dir.join("2026-11-21T10-00-00.000Z_cafe0001.sqlite"))
            .expect("create");
    conn.execute_batch(
        "CREATE TABLE pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL);
         CREATE TABLE pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL);",
    )
    .expect("schema");
    conn.execute(
        "INSERT INTO pi_session_header VALUES ('cap-port', ?1)",
        [&lines[0]],
    )
    .expect("header");
    for (seq, line) in lines[1..].iter().enumerate() {
        conn.execute(
            "INSERT INTO pi_session_entries VALUES (?1, ?2)",
            rusqlite::params![seq as i64 + 1, line],
        )
        .expect("entry");
    }
    drop(conn);
    let as_jsonl = Env::new();
    let jsonl_dir = as_jsonl.root.join("--home-u-work-capped--");
    fs::create_dir_all(&jsonl_dir).expect("mkdir");
    fs::write(
        jsonl_dir.join("2026-11-21T10-00-00-000Z_cafe0001.jsonl"),
        lines.join("\n") + "\n",
    )
    .expect("write jsonl");

    let rows = |env: &Env| {
        let root = env.root.to_string_lossy().into_owned();
        let out = env.run(&[
            "sync",
            "--root",
            &root,
            "--max-line-bytes",
            "10000",
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(1), "a parse error recorded");
        let errors =
            env.sql("SELECT line_no, byte_offset, byte_len, reason, excerpt FROM parse_errors");
        let entries =
            env.sql("SELECT entry_id, line_no, byte_offset FROM entries ORDER BY line_no");
        (errors, entries)
    };
    let (port_errors, port_entries) = rows(&as_port);
    assert_eq!((port_errors.clone(), port_entries), rows(&as_jsonl));
    assert_eq!(port_errors.len(), 1, "{port_errors:?}");
    assert_eq!(port_errors[0]["line_no"], 3);
    assert_eq!(port_errors[0]["byte_len"], lines[2].len());
    for word in ["quokkaword", "wombatword"] {
        let hits = json(&as_port, &["search", word, "--json"]);
        assert_eq!(hits.as_array().map(Vec::len), Some(1), "{word}: {hits}");
    }
}

/// A `.sqlite` whose session tables compute a column when read (a
/// generated column: a billion-byte `printf` on each row would be read
/// into memory) is not the port's, and is skipped unread.
#[test]
fn a_port_file_with_a_computed_column_is_skipped() {
    let env = Env::new();
    let dir = env.root.join("--home-u-work-hostile--");
    fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("2026-11-21T10-00-00.000Z_bad00001.sqlite");
    let lines = port_lines(10);
    let conn = rusqlite::Connection::open(&path).expect("create");
    conn.execute_batch(&format!(
        "CREATE TABLE pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL);
         CREATE TABLE pi_session_entries (seq INTEGER PRIMARY KEY,
             json TEXT GENERATED ALWAYS AS ('{}') VIRTUAL);
         INSERT INTO pi_session_entries (seq) VALUES (1);",
        lines[1].replace('\'', "''")
    ))
    .expect("schema");
    conn.execute(
        "INSERT INTO pi_session_header VALUES ('cap-port', ?1)",
        [&lines[0]],
    )
    .expect("header");
    drop(conn);
    let report = env.sync();
    assert_eq!(report["files_skipped"], 1, "{report}");
    assert_eq!(
        env.count("SELECT count(*) FROM files WHERE skip_reason LIKE 'not a pi_agent_rust session database%'"),
        1
    );
    assert_eq!(env.count("SELECT count(*) FROM entries"), 0);
}
