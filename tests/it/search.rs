//! `piidx search`: known-item tokens planted in the fixtures (see
//! fixtures/README.md), filters, identifiers, CJK, v1 files, and punctuation
//! that must never reach FTS5 as a syntax error.
//!
//! Expected sessions/entries are found by reading the fixture JSONL here,
//! not from piidx's output.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use piidx::store::rank;
use piidx::time::format_iso_ms;
use proptest::prelude::*;
use serde_json::Value;

use crate::util::{
    Env, each_shard, fixtures, jsonl_files, largest_jsonl, non_blank_lines, write_user_session,
};

/// Where a token occurs in the raw files: (session id, entry id, line number).
#[derive(Debug, Clone, PartialEq)]
struct Place {
    session_id: String,
    entry_id: String,
    line_no: i64,
}

/// Every line of `tree` whose JSON text contains `token` (exactly one expected).
fn places(tree: &str, token: &str) -> Vec<Place> {
    let mut found = Vec::new();
    for file in jsonl_files(&fixtures().join(tree)) {
        let lines = non_blank_lines(&file);
        let header: Value = serde_json::from_slice(&lines[0].bytes).expect("header");
        for line in &lines {
            let text = String::from_utf8_lossy(&line.bytes);
            if text.contains(token) {
                let value: Value = serde_json::from_str(&text).expect("token line is JSON");
                found.push(Place {
                    session_id: header["id"].as_str().unwrap_or_default().to_owned(),
                    entry_id: value["id"].as_str().unwrap_or_default().to_owned(),
                    line_no: line.line_no,
                });
            }
        }
    }
    found
}

fn sessions_env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let env = Env::with_fixture("sessions");
        env.sync();
        env
    })
}

fn search(env: &Env, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search", "--json"];
    all.extend_from_slice(args);
    let out = env.run(&all);
    let hits = match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(Value::Array(hits)) => hits,
        _ => panic!(
            "search {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    // Like grep and rg: 1 when nothing matches.
    let expected = if hits.is_empty() { 1 } else { 0 };
    assert_eq!(
        out.status.code(),
        Some(expected),
        "search {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    hits
}

fn hit_place(hit: &Value) -> Place {
    Place {
        session_id: hit["session_id"].as_str().unwrap_or_default().to_owned(),
        entry_id: hit["entry_id"].as_str().unwrap_or_default().to_owned(),
        line_no: hit["line_no"].as_i64().unwrap_or_default(),
    }
}

/// Planted tokens and the kind of text each sits in (fixtures/README.md).
const TOKENS: &[(&str, &str)] = &[
    ("zebrafrost", "user"),
    ("quokkaplume", "assistant"),
    ("marmotglyph", "thinking"),
    ("ocelotrune", "tool_call"),
    ("ibexquartz", "tool_result"),
    ("tapirnimbus", "tool_result"),
    ("lemurcobalt", "summary"),
    ("narwhalsable", "summary"),
    ("dingoember", "custom"),
    ("桜餅テスト", "user"),
    ("wombatflux", "bash"),
];

#[test]
fn planted_tokens_are_found_in_the_right_entry_with_the_right_role() {
    let env = sessions_env();
    for &(token, role) in TOKENS {
        let expected = places("sessions", token);
        assert_eq!(expected.len(), 1, "{token} planted once");
        let hits = search(env, &[token]);
        assert_eq!(hits.len(), 1, "{token}: {hits:#?}");
        let hit = &hits[0];
        assert_eq!(hit_place(hit), expected[0], "{token}");
        assert_eq!(hit["role"], role, "{token}");
        let snippet = hit["snippet"].as_str().unwrap_or_default();
        assert!(
            snippet.contains(&format!("«{token}»")),
            "{token} highlighted: {snippet}"
        );
        for key in ["session_path", "timestamp", "score", "json_path", "cwd"] {
            assert!(!hit[key].is_null(), "{token}: {key} missing");
        }
        assert!(hit.get("run").is_some(), "run field present (null for now)");
        // The role filter keeps it, and excludes it under another role.
        assert_eq!(search(env, &[token, "--role", role]).len(), 1, "{token}");
        let other = if role == "user" { "assistant" } else { "user" };
        assert!(search(env, &[token, "--role", other]).is_empty(), "{token}");
    }
}

#[test]
fn role_aliases_and_summary_kinds() {
    let env = sessions_env();
    for alias in ["toolResult", "tool-result", "tool_result"] {
        assert_eq!(search(env, &["ibexquartz", "--role", alias]).len(), 1);
    }
    assert_eq!(search(env, &["ocelotrune", "--role", "toolCall"]).len(), 1);
    assert_eq!(
        search(env, &["lemurcobalt", "--role", "compaction"]).len(),
        1
    );
    assert!(search(env, &["lemurcobalt", "--role", "branch_summary"]).is_empty());
    assert_eq!(
        search(env, &["narwhalsable", "--role", "branch_summary"]).len(),
        1
    );
    assert!(search(env, &["narwhalsable", "--role", "compaction"]).is_empty());
    // Repeated --role is an OR.
    assert_eq!(
        search(
            env,
            &["zebrafrost", "--role", "assistant", "--role", "user"]
        )
        .len(),
        1
    );
    let out = env.run(&["search", "zebrafrost", "--role", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown role"));
}

#[test]
fn filters_include_and_exclude() {
    let env = sessions_env();
    let s1 = places("sessions", "zebrafrost").remove(0);
    let cases: &[(&[&str], usize)] = &[
        (&["ibexquartz", "--tool", "read"], 1),
        (&["ibexquartz", "--tool", "bash"], 0),
        (&["zebrafrost", "--project", "--home-user-proj-a--"], 1),
        (&["zebrafrost", "--project", "proj-a"], 1),
        (&["zebrafrost", "--project", "proj-b"], 0),
        (&["zebrafrost", "--cwd", "/home/user/proj-a"], 1),
        (&["zebrafrost", "--cwd", "/home/user/proj-a/"], 1),
        (&["zebrafrost", "--cwd", "/home/user"], 1),
        (&["zebrafrost", "--cwd", "/home/user/proj"], 0),
        (&["zebrafrost", "--cwd", "/"], 1),
        (&["zebrafrost", "--since", "2026-02-01"], 0),
        (&["zebrafrost", "--since", "2026-01-31"], 1),
        (&["zebrafrost", "--until", "2026-01-31"], 1),
        (&["zebrafrost", "--until", "2026-01-30"], 0),
        (&["zebrafrost", "--since", "2026-01-31T23:21:00Z"], 0),
        (&["quokkaplume", "--model", "claude"], 1),
        (&["quokkaplume", "--model", "gpt"], 0),
        (&["wombatflux", "--project", "proj-b"], 1),
    ];
    for (args, expected) in cases {
        assert_eq!(search(env, args).len(), *expected, "{args:?}");
    }
    let prefix = &s1.session_id[..8];
    assert_eq!(search(env, &["zebrafrost", "--session", prefix]).len(), 1);
    assert_eq!(
        search(env, &["zebrafrost", "--session", &s1.session_id]).len(),
        1
    );
    let other = places("sessions", "wombatflux").remove(0);
    assert!(search(env, &["zebrafrost", "--session", &other.session_id]).is_empty());
    let out = env.run(&["search", "zebrafrost", "--since", "last week"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--since: cannot read the date \"last week\"")
    );
}

#[test]
fn identifiers_and_paths_are_found() {
    let env = sessions_env();
    let s1 = places("sessions", "zebrafrost").remove(0);
    for query in [
        "SessionManager.listAll",
        "listAll",
        "sessionmanager",
        "src/lib.rs",
        "lib.rs",
        "parse_line_offset",
        "parse_line*",
        "\"parse line offset\"",
    ] {
        let hits = search(env, &[query, "--session", &s1.session_id, "--role", "user"]);
        assert_eq!(hits.len(), 1, "{query}");
        assert_eq!(hit_place(&hits[0]), s1, "{query}");
    }
    // Operators.
    assert_eq!(search(env, &["zebrafrost OR quokkaplume"]).len(), 2);
    assert_eq!(
        search(env, &["(zebrafrost OR quokkaplume) NOT listAll"]).len(),
        0
    );
    assert_eq!(search(env, &["zebrafrost quokkaplume"]).len(), 0);
}

#[test]
fn cjk_and_substring_search() {
    let env = sessions_env();
    let place = places("sessions", "桜餅テスト").remove(0);
    // Two characters: below the trigram minimum, answered by a scan.
    let hits = search(env, &["桜餅"]);
    assert!(hits.iter().any(|hit| hit_place(hit) == place), "{hits:#?}");
    let hits = search(env, &["テスト", "--role", "user"]);
    assert!(hits.iter().any(|hit| hit_place(hit) == place), "{hits:#?}");
    // Substring inside an identifier (not a token of its own).
    let s1 = places("sessions", "zebrafrost").remove(0);
    assert!(search(env, &["istAl", "--role", "user"]).is_empty());
    let hits = search(env, &["istAl", "--substring", "--role", "user"]);
    assert!(hits.iter().any(|hit| hit_place(hit) == s1), "{hits:#?}");
    let hits = search(env, &["ebrafro", "--substring"]);
    assert_eq!(hits.len(), 1);
    // A scan binds only its filters' values.
    let session = hits[0]["session_id"].as_str().expect("session id");
    let since = &hits[0]["timestamp"].as_str().expect("timestamp")[..10];
    let filtered = |args: &[&str]| search(env, &[&["ebrafro", "--substring"], args].concat());
    assert_eq!(filtered(&["--session", session, "--since", since]), hits);
    assert!(filtered(&["--session", session, "--until", "2000-01-01"]).is_empty());
    assert!(
        hits[0]["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains("«ebrafro»")
    );
}

/// A scan (`--substring`) finds exactly the entries whose chunk text holds
/// every term, ASCII case folded: the oracle is the old SQL form of the
/// scan, `instr(lower(body), lower(term))` over the `fts_content` view.
/// Terms deep inside a 2 MB tool output and in several chunks of it included.
#[test]
fn substring_scans_find_what_fts_content_holds() {
    let env = sessions_env();
    for terms in [
        &["istAl"][..],
        &["ebrafro"],
        &["MODULE_490"],
        &["[017825]", "crate_73"],
        &["hash=d678c3a0"],
        &["Compile", "crate_1"],
        // JSON escapes `\\`: the scan cannot rule entries out by their JSON.
        &["b'\\n'"],
    ] {
        let conditions: String = terms
            .iter()
            .map(|term| {
                let quoted = term.replace('\'', "''");
                format!(" AND instr(lower(f.body), lower('{quoted}')) > 0")
            })
            .collect();
        let mut expected: Vec<String> = env
            .sql(&format!(
                "SELECT DISTINCT e.session_id || ' ' || e.entry_id AS id
                 FROM chunks c JOIN fts_content f ON f.chunk_id = c.chunk_id
                 JOIN entries e ON e.entry_rowid = c.entry_rowid WHERE 1 {conditions}"
            ))
            .iter()
            .map(|row| row["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        let query = terms.join(" ");
        let mut found: Vec<String> = search(env, &[&query, "--substring", "--limit", "1000"])
            .iter()
            .map(|hit| {
                let place = hit_place(hit);
                format!("{} {}", place.session_id, place.entry_id)
            })
            .collect();
        expected.sort();
        found.sort();
        assert!(!expected.is_empty(), "{terms:?} occurs in the fixtures");
        assert_eq!(found, expected, "{terms:?}");
    }
}

#[test]
fn sort_recent_is_newest_first() {
    let env = sessions_env();
    let hits = search(env, &["the", "--sort", "recent", "--limit", "50"]);
    assert!(hits.len() > 5);
    let times: Vec<&str> = hits
        .iter()
        .map(|hit| hit["timestamp"].as_str().unwrap_or_default())
        .collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted);
    assert_eq!(search(env, &["the", "--limit", "3"]).len(), 3);
}

#[test]
fn empty_queries_and_raw_errors_are_clear() {
    let env = sessions_env();
    for query in ["()", "-- ++", "\"\""] {
        let out = env.run(&["search", "--", query]);
        assert_eq!(out.status.code(), Some(2), "{query}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no searchable words"), "{query}: {stderr}");
    }
    let out = env.run(&["search", "--raw", "zebrafrost AND ("]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("FTS5 syntax error in --raw query"),
        "{stderr}"
    );
    assert_eq!(search(env, &["--raw", "zebra*"]).len(), 1);
    assert_eq!(
        search(env, &["--raw", "NEAR(zebrafrost listAll, 20)"]).len(),
        1
    );
}

#[test]
fn full_resync_keeps_the_trigram_index_consistent() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let count = &format!(
        "SELECT count(*) FROM {}",
        each_shard(&env.db, "SELECT id FROM {shard}.fts_trigram_docsize")
    );
    let before = env.count(count);
    assert!(before > 0);
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--full", "--json"]);
    assert!(matches!(out.status.code(), Some(0) | Some(1)));
    assert_eq!(env.count(count), before);
    assert_eq!(search(&env, &["桜餅テスト"]).len(), 1);
    // Removing the file removes its trigram rows too.
    for file in jsonl_files(&env.root) {
        if fs::read_to_string(&file).is_ok_and(|text| text.contains("桜餅テスト")) {
            fs::remove_file(&file).expect("remove");
        }
    }
    env.sync();
    assert!(search(&env, &["桜餅テスト"]).is_empty());
    assert!(env.count(count) < before);
}

/// Search cuts a hit's text out of `entries.raw` with a scan
/// (`query::search::chunk_text`) instead of the `fts_content` view, which parses the
/// whole entry: both must give the same text for every chunk of every
/// fixture tree, multi-MB fields cut into many chunks included.
#[test]
fn scanned_chunk_text_is_what_fts_content_gives() {
    for tree in ["sessions", "samples", "damaged", "subagents"] {
        let env = Env::with_fixture(tree);
        env.sync();
        let conn = rusqlite::Connection::open(&env.db).expect("open db");
        piidx::store::register_functions(&conn).expect("sql functions");
        let mut stmt = conn
            .prepare(
                // Chunks of shared texts are not in `raw` (fts_content
                // reads them from `shared_texts`).
                "SELECT c.chunk_id, e.raw, c.json_path, c.start, c.len, f.body
                 FROM chunks c JOIN entries e ON e.entry_rowid = c.entry_rowid
                 JOIN fts_content f ON f.chunk_id = c.chunk_id
                 WHERE c.fts_rowid IS NULL",
            )
            .expect("prepare");
        let rows = stmt
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, u32>(3)? as usize,
                    row.get::<_, u32>(4)? as usize,
                    row.get::<_, String>(5)?,
                ))
            })
            .expect("query")
            .map(|row| row.expect("row"))
            .collect::<Vec<_>>();
        assert!(rows.len() > 30, "{tree}: {} chunks", rows.len());
        for (chunk_id, raw, path, start, len, body) in rows {
            let scanned =
                piidx::query::search::chunk_text::span_text(raw.as_bytes(), &path, start, len);
            assert_eq!(scanned, Some(body), "{tree}: chunk {chunk_id} at {path}");
        }
    }
}

/// Search reads an entry only as far as a hit's window needs, guessing
/// from the window's offset; heavy escaping (every `"` and `\\` doubles)
/// puts the window further in than the guess, and the rest is read then.
#[test]
fn hits_deep_in_heavily_escaped_text_get_their_snippet() {
    let env = Env::new();
    let text = format!(
        "{} needlewombat {} secondtoken end",
        "\"".repeat(400_000),
        "\\".repeat(100_000)
    );
    let blocks = serde_json::json!([{"type": "text", "text": text}]);
    write_user_session(&env.root.join("--proj--"), "escaped", blocks);
    env.sync();
    for token in ["needlewombat", "secondtoken"] {
        let hits = search(&env, &[token]);
        assert_eq!(hits.len(), 1, "{token}");
        let snippet = hits[0]["snippet"].as_str().unwrap_or_default();
        assert!(
            snippet.contains(&format!("«{token}»")),
            "{token}: {snippet}"
        );
    }
}

/// Search ranks chunks, then reads their details in further statements,
/// each with its own snapshot. A sync that shrinks a file in between
/// deletes ranked chunks; the search must drop those hits, not fail (it
/// did, with "Query returned no rows", in about 1 search in 100 here).
#[test]
fn search_while_a_sync_rewrites_the_hit_file_never_fails() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = Env::with_fixture("sessions");
    env.sync();
    let file = largest_jsonl(&env.root);
    let whole = fs::read(&file).expect("read");
    let lines: Vec<&[u8]> = whole.split_inclusive(|&b| b == b'\n').collect();
    let half = lines[..lines.len() / 2].concat();
    let syncing = AtomicBool::new(true);
    let (searches, failures) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for _ in 0..25 {
                fs::write(&file, &half).expect("shrink");
                env.sync();
                fs::write(&file, &whole).expect("restore");
                env.sync();
            }
            syncing.store(false, Ordering::SeqCst);
        });
        let mut searches = 0;
        let mut failures = Vec::new();
        while syncing.load(Ordering::SeqCst) || searches < 200 {
            let out = env.run(&["search", "--json", "--limit", "50", "session OR the"]);
            if !out.status.success() {
                failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
            }
            searches += 1;
        }
        (searches, failures)
    });
    assert!(
        failures.is_empty(),
        "{} of {searches} searches failed: {failures:?}",
        failures.len()
    );
}

#[test]
fn v1_sample_files_are_searchable() {
    let env = Env::with_fixture("samples");
    env.sync();
    let word = "turnStartIndex";
    let hits = search(&env, &[word, "--limit", "100"]);
    assert!(!hits.is_empty());
    for hit in &hits {
        // Each hit points at a raw line that really contains the word.
        let path = hit["session_path"].as_str().unwrap_or_default();
        let rel = Path::new(path).strip_prefix(&env.root).expect("under root");
        let line_no = hit["line_no"].as_i64().unwrap_or_default();
        let lines = non_blank_lines(&fixtures().join("samples").join(rel));
        let line = lines
            .iter()
            .find(|line| line.line_no == line_no)
            .expect("line exists");
        let text = String::from_utf8_lossy(&line.bytes).to_lowercase();
        assert!(text.contains(&word.to_lowercase()), "{path}:{line_no}");
        assert!(
            hit["entry_id"]
                .as_str()
                .unwrap_or_default()
                .starts_with("v1-")
        );
    }
    // Every v1 line mentioning it is found (one hit per entry).
    let expected: usize = jsonl_files(&fixtures().join("samples"))
        .iter()
        .map(|file| {
            non_blank_lines(file)
                .iter()
                .filter(|line| String::from_utf8_lossy(&line.bytes).contains(word))
                .count()
        })
        .sum();
    assert!(
        hits.len() <= expected && hits.len() * 2 >= expected,
        "{} vs {expected}",
        hits.len()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn punctuation_never_reaches_fts5_as_a_syntax_error(
        query in r#"[ a-z"()*:^{}+\-.,;/\\_'<>|&!?#@$%~`=\[\]桜é]{1,24}|(AND|OR|NOT|NEAR|\(|\)|"|\*| |x){1,10}"#
    ) {
        let env = sessions_env();
        let out = env.run(&["search", "--json", "--", &query]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // 0: hits, 1: none (stderr empty), 2: a clear error.
        let ok = (out.status.code() == Some(0))
            || (out.status.code() == Some(1) && stderr.is_empty())
            || (out.status.code() == Some(2) && stderr.contains("no searchable words"));
        prop_assert!(ok, "{query:?}: {stderr}");
        prop_assert!(!stderr.contains("syntax error"), "{query:?}: {stderr}");
    }
}

/// A word in more chunks than the rank window: ranking looks at the newest
/// matches only, but a filter that excludes all of them still finds the old
/// match (the search falls back to ranking everything).
#[test]
fn very_common_words_rank_a_window_but_never_lose_filtered_hits() {
    let env = Env::new();
    let (dir, mut text) = session_start(&env, "many");
    text.push_str(r#"{"type":"message","id":"old","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"commonword from long ago","timestamp":1767225601000}}"#);
    text.push('\n');
    let count = piidx::query::search::RANK_WINDOW + 500;
    for n in 0..count {
        text.push_str(&format!(
            r#"{{"type":"message","id":"m{n}","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{{"role":"user","content":"commonword number {n}","timestamp":1769904000000}}}}"#
        ));
        text.push('\n');
    }
    fs::write(dir.join("many.jsonl"), text).expect("write");
    env.sync();
    assert_eq!(search(&env, &["commonword", "--limit", "5"]).len(), 5);
    let old = search(&env, &["commonword", "--until", "2026-01-15"]);
    assert_eq!(old.len(), 1, "{old:?}");
    assert_eq!(old[0]["entry_id"], "old");
}

/// `--project`, `--cwd` and `--session` narrow a common word's matches
/// before the newest RANK_WINDOW are ranked: a small, older project's hits
/// are all found, never crowded out by a big project's newer ones.
#[test]
fn session_filters_rank_the_matches_of_their_sessions_only() {
    let env = Env::new();
    let (small_dir, mut small) = session_start(&env, "small");
    for n in 0..30 {
        let role = if n % 2 == 0 { "user" } else { "assistant" };
        let content = if role == "user" {
            format!(r#""commonword small {n}""#)
        } else {
            format!(r#"[{{"type":"text","text":"commonword small {n}"}}]"#)
        };
        small.push_str(&format!(
            r#"{{"type":"message","id":"s{n}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"{role}","content":{content},"timestamp":1767225601000}}}}"#
        ));
        small.push('\n');
    }
    fs::write(small_dir.join("small.jsonl"), small).expect("write");
    env.sync();
    let (big_dir, mut big) = session_start(&env, "big");
    for n in 0..piidx::query::search::RANK_WINDOW + 500 {
        big.push_str(&format!(
            r#"{{"type":"message","id":"b{n}","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{{"role":"user","content":"commonword big {n}","timestamp":1769904000000}}}}"#
        ));
        big.push('\n');
    }
    fs::write(big_dir.join("big.jsonl"), big).expect("write");
    env.sync();

    let ids = |args: &[&str]| -> BTreeSet<String> {
        let mut all = vec!["commonword", "--limit", "100"];
        all.extend_from_slice(args);
        search(&env, &all)
            .iter()
            .map(|hit| hit["entry_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let all_small: BTreeSet<String> = (0..30).map(|n| format!("s{n}")).collect();
    assert_eq!(ids(&["--project", "small"]), all_small);
    assert_eq!(ids(&["--cwd", "/home/user/small"]), all_small);
    assert_eq!(ids(&["--session", "small"]), all_small);
    let small_users: BTreeSet<String> = (0..30).step_by(2).map(|n| format!("s{n}")).collect();
    assert_eq!(ids(&["--project", "small", "--role", "user"]), small_users);
    assert_eq!(ids(&["--project", "big"]).len(), 100);
}

/// A project folder for a session `name` under the test root, and the
/// session's header line.
fn session_start(env: &Env, name: &str) -> (PathBuf, String) {
    let dir = env.root.join(format!("--home-user-{name}--"));
    fs::create_dir_all(&dir).expect("mkdir");
    let header = format!(
        r#"{{"type":"session","version":3,"id":"{name}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/user/{name}"}}"#
    );
    (dir, header + "\n")
}

/// A ranked search of a word with more matches than the rank window scores
/// the newest ones (the highest chunk ids), and after a first sync of a
/// whole history those are the matches of the files written last: a sync
/// reads files in the order they were last written. Here the newest
/// session is the biggest, which a sync reading the biggest files first
/// gave the lowest ids, and it holds the best match of all: outside the
/// window, it was not even scored. (Which of the last two files, read at
/// once by the two workers, gets the higher ids is left to chance: both
/// are in the window.)
#[test]
fn the_rank_window_of_a_first_sync_holds_the_newest_files_matches() {
    let env = Env::new();
    let files: i64 = 20;
    let day_ms = 86_400_000;
    let mut total = 0;
    for k in 0..files {
        let (dir, mut text) = session_start(&env, &format!("s{k:02}"));
        let count = 125 + 25 * k;
        total += count;
        let start_ms = 1_767_225_600_000 + k * day_ms;
        for n in 0..count {
            let ms = start_ms + n * 1000;
            let best = k == files - 1 && n == count / 2;
            let content = if best {
                "commonword commonword alpha"
            } else {
                "commonword alpha"
            };
            let line = serde_json::json!({"type": "message", "id": format!("s{k:02}m{n}"),
                "parentId": null, "timestamp": format_iso_ms(ms),
                "message": {"role": "user", "content": content, "timestamp": ms}});
            text.push_str(&format!("{line}\n"));
        }
        let path = dir.join("session.jsonl");
        fs::write(&path, text).expect("write");
        let last = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis((start_ms + count * 1000) as u64);
        fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(last))
            .expect("set mtime");
    }
    assert!(total > piidx::query::search::RANK_WINDOW);
    env.sync();
    let best = format!("s{:02}m{}", files - 1, (125 + 25 * (files - 1)) / 2);
    let hits = search(&env, &["commonword", "--limit", "3"]);
    assert_eq!(hits[0]["entry_id"], best.as_str(), "{hits:?}");
}

/// `--sort recent` looks in the newest RECENT_WINDOW entries first; what it
/// prints is still the newest matches of all entries, also when the window
/// holds too few of them.
#[test]
fn sort_recent_looks_at_the_newest_entries_first_but_never_loses_older_hits() {
    let env = Env::new();
    let (dir, mut text) = session_start(&env, "recent");
    let count = piidx::query::search::RECENT_WINDOW + 500;
    // Entry n is n seconds after the session start: the last is the newest.
    // Every entry says `commonword`; every 100th from the user, the rest from
    // the assistant; only n = 3 and n = 7 (far outside the window) `rareword`.
    for n in 0..count {
        let ms = 1_767_225_600_000 + n * 1000;
        let rare = if n == 3 || n == 7 { " rareword" } else { "" };
        let line = if n % 100 == 0 {
            format!(
                r#"{{"type":"message","id":"m{n}","parentId":null,"timestamp":"{}","message":{{"role":"user","content":"commonword {n}{rare}","timestamp":{ms}}}}}"#,
                format_iso_ms(ms)
            )
        } else {
            format!(
                r#"{{"type":"message","id":"m{n}","parentId":null,"timestamp":"{}","message":{{"role":"assistant","content":[{{"type":"text","text":"commonword {n}{rare}"}}],"timestamp":{ms}}}}}"#,
                format_iso_ms(ms)
            )
        };
        text.push_str(&line);
        text.push('\n');
    }
    fs::write(dir.join("recent.jsonl"), text).expect("write");
    env.sync();
    let ids = |args: &[&str]| -> Vec<String> {
        search(&env, &[args, &["--sort", "recent"]].concat())
            .iter()
            .map(|hit| hit["entry_id"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let newest = |step: i64, take: i64| -> Vec<String> {
        (0..count)
            .rev()
            .filter(|n| n % step == 0)
            .take(take as usize)
            .map(|n| format!("m{n}"))
            .collect()
    };
    assert_eq!(ids(&["commonword", "--limit", "5"]), newest(1, 5));
    assert_eq!(ids(&["rareword"]), ["m7", "m3"]);
    // 105 user entries, 100 of them in the window: 3 more from outside it.
    assert_eq!(
        ids(&["commonword", "--role", "user", "--limit", "103"]),
        newest(100, 103)
    );
}

/// Entry ids and their scores, best first.
type Ranking = Vec<(String, f64)>;

/// A shared text is one full-text row for every chunk whose text it is; its
/// shard records the weight of the weightiest (`store::weights`), which
/// ranking takes for the most the row can score. Here a long output is
/// first a tool result's (weight 0.5), outranked by short user messages,
/// and later a bash execution's (weight 0.7), which then enters the top
/// ten: when it came in a sync of its own, through the catch-up after a
/// sync killed before its shards got it, and into shards of an earlier
/// piidx, which the next sync gives their weights. Weighed 0.5, the row
/// would be looked up only after every user message (`weigh`).
#[test]
fn a_shared_text_weighs_as_its_weightiest_chunk() {
    let long = "zebraword ".repeat(110);
    let line = |id: &str, n: i64, role: &str, body: &str| {
        let ms = 1_767_225_600_000 + n * 1000;
        let message = match role {
            "toolResult" => serde_json::json!({"role": role, "toolCallId": "c1",
                "toolName": "bash", "isError": false,
                "content": [{"type": "text", "text": body}], "timestamp": ms}),
            "bashExecution" => serde_json::json!({"role": role, "command": "cat notes",
                "output": body, "exitCode": 0, "cancelled": false, "truncated": false,
                "timestamp": ms}),
            _ => serde_json::json!({"role": role, "content": body, "timestamp": ms}),
        };
        let entry = serde_json::json!({"type": "message", "id": id, "parentId": null,
            "timestamp": format_iso_ms(ms), "message": message});
        format!("{entry}\n")
    };
    let write_first = |env: &Env| {
        let (dir, mut text) = session_start(env, "first");
        // Nine that outrank the output however weighed, and many that
        // outrank it only as a tool result's.
        for n in 0..209 {
            let body = if n < 9 {
                "zebraword zebraword zebraword".to_owned()
            } else {
                format!("zebraword x{n} y{n}")
            };
            text.push_str(&line(&format!("u{n}"), n, "user", &body));
        }
        text.push_str(&line("output", 209, "toolResult", &long));
        fs::write(dir.join("first.jsonl"), text).expect("write");
    };
    let write_later = |env: &Env| {
        let (dir, text) = session_start(env, "later");
        let text = text + &line("said", 300, "bashExecution", &long);
        fs::write(dir.join("later.jsonl"), text).expect("write");
    };
    // The tenth hit.
    let top = |env: &Env| -> String {
        search(env, &["zebraword", "--limit", "10"])[9]["entry_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    // In a sync of its own.
    let env = Env::new();
    write_first(&env);
    env.sync();
    assert!(top(&env).starts_with('u'), "{}", top(&env));
    write_later(&env);
    env.sync();
    assert_eq!(top(&env), "said");
    crate::util::fts_integrity(&env.db);

    // Through the catch-up: the sync dies right after the main file took
    // the later session, before the shards heard of it.
    let env = Env::new();
    write_first(&env);
    env.sync();
    write_later(&env);
    let out = env
        .command(&["sync", "--quiet", "--root"])
        .arg(&env.root)
        .env("PIIDX_TEST_KILL_AT", "commit:1")
        .output()
        .expect("run sync");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9),
        "the sync was to be killed"
    );
    env.sync();
    assert_eq!(top(&env), "said");
    crate::util::fts_integrity(&env.db);

    // Shards of an earlier piidx, without weights: a search takes every
    // row's weight for 1 (the same hits), and a sync adds them.
    let env = Env::new();
    write_first(&env);
    write_later(&env);
    env.sync();
    for path in crate::util::shard_paths(&env.db) {
        rusqlite::Connection::open(&path)
            .and_then(|shard| shard.execute_batch("DROP TABLE weights"))
            .expect("drop the weights");
    }
    assert_eq!(top(&env), "said");
    env.sync();
    assert_eq!(top(&env), "said");
    crate::util::fts_integrity(&env.db);
}

/// Ranking looks chunks up lazily, in bm25 order, until no later match can
/// make the top (`weigh`). Whatever the kind weights and filters, the hits
/// must be exactly those of ranking every match: here tool results match
/// best by bm25 but weigh 0.5, and user entries match worst, so `--role
/// user` weighs every match, the last batch split over both shards'
/// connections.
#[test]
fn lazy_weighing_returns_exactly_the_full_ranking() {
    let env = Env::new();
    let (dir, mut text) = session_start(&env, "weights");
    // Fewer matches than the rank window: every one of them is ranked.
    let count = 4_900;
    assert!(count < piidx::query::search::RANK_WINDOW);
    for n in 0..count {
        let ms = 1_767_225_600_000 + n * 1000;
        let filler = "alpha beta gamma ".repeat((n * 7 % 13) as usize);
        let (id, timestamp) = (format!("m{n}"), format_iso_ms(ms));
        let line = match n % 10 {
            9 => {
                let body = format!("commonword {filler}{}", "delta epsilon ".repeat(20));
                serde_json::json!({"type": "message", "id": id, "parentId": null,
                    "timestamp": timestamp,
                    "message": {"role": "user", "content": body, "timestamp": ms}})
            }
            7 | 8 => {
                let body = format!("commonword commonword {filler}");
                serde_json::json!({"type": "message", "id": id, "parentId": null,
                    "timestamp": timestamp, "message": {"role": "assistant",
                    "content": [{"type": "thinking", "thinking": body}], "timestamp": ms}})
            }
            _ => {
                let body = format!("{}{filler}", "commonword ".repeat(1 + (n % 4) as usize));
                serde_json::json!({"type": "message", "id": id, "parentId": null,
                    "timestamp": timestamp, "message": {"role": "toolResult",
                    "toolCallId": format!("c{n}"), "toolName": "bash", "isError": false,
                    "content": [{"type": "text", "text": body}], "timestamp": ms}})
            }
        };
        text.push_str(&format!("{line}\n"));
    }
    fs::write(dir.join("weights.jsonl"), text).expect("write");
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--fts-shards", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Every match, scored and weighed as docs/search.md defines it, best
    // chunk per entry, ties newest first.
    // The index's files opened here, as `piidx sql` attaches them: the
    // library keeps its connection to itself.
    let paths = crate::util::shard_paths(&env.db);
    assert_eq!(paths.len(), 2);
    let conn = &rusqlite::Connection::open(&env.db).expect("open");
    piidx::store::register_functions(conn).expect("sql functions");
    let shards: Vec<String> = paths
        .iter()
        .enumerate()
        .map(|(k, path)| {
            let schema = format!("fts{k}");
            conn.execute(
                &format!("ATTACH DATABASE ?1 AS {schema}"),
                [path.to_string_lossy()],
            )
            .expect("attach");
            schema
        })
        .collect();
    rank::register(conn).expect("register");
    // bm25 over both shards' statistics together (docs/search.md), from
    // the parts of every match.
    let scored = |expr: &str, kinds: &[&str], since_ms: i64, weights: &str| {
        let phrases: Vec<String> = expr.split(" AND ").map(|w| format!("\"{w}\"")).collect();
        let mut stats = Vec::new();
        let mut found: Vec<(rusqlite::types::Value, f64, i64, i64, String, String)> = Vec::new();
        for shard in &shards {
            let sql = format!(
                "SELECT m.parts, {weights}, e.timestamp_ms, c.chunk_id, e.entry_id, c.kind
                 FROM (SELECT rowid, piidx_bm25_parts(fts) AS parts FROM {shard}.fts
                       WHERE fts MATCH ?1) m
                 JOIN chunks c ON c.chunk_id = m.rowid
                 JOIN entries e ON e.entry_rowid = c.entry_rowid
                 WHERE e.timestamp_ms >= ?2"
            );
            let mut stmt = conn.prepare(&sql).expect("prepare");
            found.extend(
                stmt.query_map(rusqlite::params![expr, since_ms], |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                    ))
                })
                .expect("query")
                .collect::<rusqlite::Result<Vec<_>>>()
                .expect("rows"),
            );
            let with_phrases = (phrases.len() > 1).then_some(phrases.as_slice());
            stats.push(rank::ShardStats::read(conn, shard, "fts", with_phrases).expect("stats"));
        }
        let scorer = rank::Scorer::new(&stats, phrases.len());
        let mut rows: Vec<(f64, i64, i64, String)> = found
            .into_iter()
            .filter(|row| kinds.is_empty() || kinds.contains(&row.5.as_str()))
            .map(|(parts, weight, ts, chunk, entry, _)| {
                let parts = rank::RowValue::read((&parts).into()).expect("parts");
                let mut freq = Vec::new();
                parts.push_freq(&mut freq);
                let bm25 = scorer.score(parts.tokens(), freq.into_iter());
                (weight * bm25, ts, chunk, entry)
            })
            .collect();
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
        let mut seen = BTreeSet::new();
        rows.into_iter()
            .filter(|row| seen.insert(row.3.clone()))
            .map(|(score, _, _, entry)| (entry, score))
            .collect::<Ranking>()
    };
    let weights = "CASE c.kind WHEN 'user' THEN 1.0 WHEN 'tool_result' THEN 0.5 ELSE 0.7 END";
    let ranked = |expr: &str, kinds: &[&str], since_ms: i64| scored(expr, kinds, since_ms, weights);
    let hits = |args: &[&str]| -> Ranking {
        search(&env, args)
            .iter()
            .map(|hit| {
                let entry = hit["entry_id"].as_str().unwrap_or_default().to_owned();
                (entry, hit["score"].as_f64().unwrap_or_default())
            })
            .collect()
    };
    let mid_ms = 1_767_225_600_000 + count / 2 * 1000;
    let mid = format_iso_ms(mid_ms);
    let cases: Vec<(Vec<&str>, Ranking)> = vec![
        (
            vec!["commonword", "--limit", "10"],
            ranked("commonword", &[], 0),
        ),
        (
            vec!["commonword", "--role", "user", "--limit", "200"],
            ranked("commonword", &["user"], 0),
        ),
        (
            vec![
                "commonword",
                "--role",
                "thinking",
                "--since",
                &mid,
                "--limit",
                "7",
            ],
            ranked("commonword", &["thinking"], mid_ms),
        ),
        (
            vec!["commonword delta", "--limit", "10"],
            ranked("commonword AND delta", &[], 0),
        ),
    ];
    for (args, all) in cases {
        let limit: usize = args[args.len() - 1].parse().expect("limit");
        let want: Ranking = all.into_iter().take(limit).collect();
        let got = hits(&args);
        assert_eq!(got.len(), want.len(), "{args:?}");
        for ((got_id, got_score), (want_id, want_score)) in got.iter().zip(&want) {
            assert_eq!(got_id, want_id, "{args:?}: {got:?}\nwant {want:?}");
            assert!((got_score - want_score).abs() < 1e-9, "{args:?} {got_id}");
        }
    }
    // The weights matter here: ranked by bm25 alone, the top is another.
    let top = |ranking: Ranking| -> Vec<String> {
        ranking
            .into_iter()
            .take(10)
            .map(|(entry, _)| entry)
            .collect()
    };
    assert_ne!(
        top(scored("commonword", &[], 0, "1.0")),
        top(ranked("commonword", &[], 0))
    );
}

/// Every search is bounded: too many terms or too long a text is refused
/// with the limit named, a search past its time stops with a message
/// naming `--timeout` (interrupted inside SQLite, or held until its
/// deadline by `PIIDX_TEST_HOLD`), and a thousand repeated roles are one.
#[test]
fn searches_are_bounded_in_terms_length_and_time() {
    let env = sessions_env();
    let refused = |args: &[&str], needle: &str| {
        let out = env.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    };
    let many = vec!["a*"; 2000].join(" ");
    refused(&["search", &many], "at most 32");
    refused(&["search", "--raw", &many], "at most 32");
    refused(&["search", &"x".repeat(20_000)], "at most 16384");
    // A budget long gone when SQLite first looks: interrupted in a query.
    let prefixes: Vec<String> = ('a'..='z').map(|c| format!("{c}*")).collect();
    let heavy = prefixes.join(" OR ");
    refused(&["search", &heavy, "--timeout", "0.000001"], "time limit");
    let mut held = env.command(&["search", "crate", "--timeout", "0.2"]);
    let out = held
        .env("PIIDX_TEST_HOLD", "search")
        .output()
        .expect("search");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("time limit") && stderr.contains("--timeout"),
        "{stderr}"
    );
    // Within the limits the same searches answer.
    assert!(!search(env, &["crate", "--timeout", "0"]).is_empty());
    let roles: Vec<&str> = std::iter::repeat_n(["--role", "user"], 1000)
        .flatten()
        .collect();
    let mut args = vec!["crate"];
    args.extend(roles);
    assert_eq!(
        search(env, &args),
        search(env, &["crate", "--role", "user"])
    );
}
