//! `piidx usage` and `piidx tools`: sums checked against totals this test
//! computes itself from the fixture JSONL (serde_json), fork dedupe,
//! unpriced usage, time zones, week and month boundaries.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::util::{Env, fixtures};

/// One usage record as read straight from a fixture file.
#[derive(Debug, Clone)]
struct Rec {
    key: String,
    ts: i64,
    model: String,
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
    total: i64,
    cost: f64,
}

fn int(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0)
}

/// Every usage record of every `.jsonl` under `dir` (no dedupe).
fn read_usage(dir: &Path) -> Vec<Rec> {
    let mut out = Vec::new();
    for file in walkdir::WalkDir::new(dir) {
        let file = file.expect("walk");
        if file.path().extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = fs::read_to_string(file.path()).expect("read");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let kind = entry["type"].as_str().unwrap_or("");
            let entry_ts = entry["timestamp"]
                .as_str()
                .and_then(piidx::time::parse_iso_ms);
            let (usage, ts, model, response, source) = match kind {
                "message" => {
                    let m = &entry["message"];
                    let role = m["role"].as_str().unwrap_or("");
                    if role != "assistant" && role != "toolResult" {
                        continue;
                    }
                    let ts = m["timestamp"].as_i64().or(entry_ts);
                    (
                        &m["usage"],
                        ts,
                        m["model"].as_str().unwrap_or("").to_owned(),
                        m["responseId"].as_str().map(str::to_owned),
                        role.to_owned(),
                    )
                }
                "compaction" | "branch_summary" => (
                    &entry["usage"],
                    entry_ts,
                    String::new(),
                    None,
                    kind.to_owned(),
                ),
                "usage" => (
                    &entry["usage"],
                    entry_ts,
                    entry["model"].as_str().unwrap_or("").to_owned(),
                    None,
                    kind.to_owned(),
                ),
                _ => continue,
            };
            if !usage.is_object() {
                continue;
            }
            let (input, output, cache_read, cache_write) = (
                int(usage, "input"),
                int(usage, "output"),
                int(usage, "cacheRead"),
                int(usage, "cacheWrite"),
            );
            let total = usage["totalTokens"]
                .as_i64()
                .unwrap_or(input + output + cache_read + cache_write);
            let cost = match &usage["cost"] {
                Value::Object(c) => c.get("total").and_then(Value::as_f64).unwrap_or(0.0),
                Value::Number(n) => n.as_f64().unwrap_or(0.0),
                _ => 0.0,
            };
            let ts = ts.expect("fixture usage has a timestamp");
            let key = match response {
                Some(r) => format!("r|{source}|{r}"),
                None => format!(
                    "e|{source}|{}|{ts}|{model}|{input}|{output}|{cache_read}|{cache_write}",
                    entry["id"].as_str().unwrap_or("")
                ),
            };
            out.push(Rec {
                key,
                ts,
                model,
                input,
                output,
                cache_read,
                cache_write,
                total,
                cost,
            });
        }
    }
    out
}

fn dedupe(recs: &[Rec]) -> Vec<Rec> {
    let mut seen = HashSet::new();
    recs.iter()
        .filter(|r| seen.insert(r.key.clone()))
        .cloned()
        .collect()
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Sums {
    records: i64,
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
    total: i64,
    cost: f64,
    unpriced: i64,
}

fn sum_by(recs: &[Rec], key: impl Fn(&Rec) -> String) -> BTreeMap<String, Sums> {
    let mut map: BTreeMap<String, Sums> = BTreeMap::new();
    for r in recs {
        let s = map.entry(key(r)).or_default();
        s.records += 1;
        s.input += r.input;
        s.output += r.output;
        s.cache_read += r.cache_read;
        s.cache_write += r.cache_write;
        s.total += r.total;
        s.cost += r.cost;
        if r.total > 0 && r.cost == 0.0 {
            s.unpriced += r.total;
        }
    }
    map
}

/// `YYYY-MM-DD` of a UTC ms instant shifted by `offset_s`.
fn day_of(ms: i64, offset_s: i64) -> String {
    let days = (ms / 1000 + offset_s).div_euclid(86_400);
    // Civil-from-days (Hinnant), written out again here on purpose.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// America/New_York for the fixture dates: EDT (-4) from the second Sunday
/// of March to the first Sunday of November, EST (-5) otherwise. No fixture
/// timestamp lies within a day of either switch (asserted).
fn new_york_offset(ms: i64) -> i64 {
    let day = day_of(ms, 0);
    let month: i64 = day[5..7].parse().unwrap();
    assert!(
        month != 3 && month != 11 || &day[8..] < "07",
        "near DST: {day}"
    );
    if (4..=10).contains(&month) {
        -4 * 3600
    } else {
        -5 * 3600
    }
}

fn usage_json(env: &Env, args: &[&str]) -> BTreeMap<String, Value> {
    let mut full = vec!["usage", "--json"];
    if !args.contains(&"--tz") {
        full.extend(["--tz", "UTC"]);
    }
    full.extend_from_slice(args);
    let out = env.run(&full);
    assert!(
        out.status.success(),
        "usage {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("usage --json");
    rows.into_iter()
        .map(|row| (row["key"].as_str().unwrap_or("").to_owned(), row))
        .collect()
}

fn assert_matches(got: &BTreeMap<String, Value>, want: &BTreeMap<String, Sums>, what: &str) {
    let got_keys: Vec<&String> = got.keys().collect();
    let want_keys: Vec<&String> = want.keys().collect();
    assert_eq!(got_keys, want_keys, "{what}: keys");
    for (key, w) in want {
        let g = &got[key];
        let n = |c: &str| g[c].as_i64().unwrap_or(-1);
        assert_eq!(n("records"), w.records, "{what} {key} records");
        assert_eq!(n("input_tokens"), w.input, "{what} {key} input");
        assert_eq!(n("output_tokens"), w.output, "{what} {key} output");
        assert_eq!(
            n("cache_read_tokens"),
            w.cache_read,
            "{what} {key} cache read"
        );
        assert_eq!(
            n("cache_write_tokens"),
            w.cache_write,
            "{what} {key} cache write"
        );
        assert_eq!(n("total_tokens"), w.total, "{what} {key} total");
        assert_eq!(n("unpriced_tokens"), w.unpriced, "{what} {key} unpriced");
        let cost = g["cost"].as_f64().unwrap_or(-1.0);
        assert!(
            (cost - w.cost).abs() < 1e-5,
            "{what} {key} cost {cost} vs {}",
            w.cost
        );
    }
}

fn sessions_env() -> (Env, Vec<Rec>) {
    let env = Env::with_fixture("sessions");
    env.sync();
    let recs = read_usage(&fixtures().join("sessions"));
    (env, recs)
}

#[test]
fn sums_by_model_and_day_match_the_fixture_files() {
    let (env, recs) = sessions_env();
    let unique = dedupe(&recs);
    let model_key = |r: &Rec| {
        if r.model.is_empty() {
            "(none)".to_owned()
        } else {
            r.model.clone()
        }
    };
    assert_matches(
        &usage_json(&env, &["--by", "model"]),
        &sum_by(&unique, model_key),
        "by model",
    );
    assert_matches(
        &usage_json(&env, &["--by", "day"]),
        &sum_by(&unique, |r| day_of(r.ts, 0)),
        "by day UTC",
    );
    assert_matches(
        &usage_json(&env, &["--by", "day", "--tz", "+09:00"]),
        &sum_by(&unique, |r| day_of(r.ts, 9 * 3600)),
        "by day +09:00",
    );
    if Path::new("/usr/share/zoneinfo/America/New_York").exists() {
        assert_matches(
            &usage_json(&env, &["--by", "day", "--tz", "America/New_York"]),
            &sum_by(&unique, |r| day_of(r.ts, new_york_offset(r.ts))),
            "by day America/New_York",
        );
    }
    // The time zone really moves usage between days in this fixture.
    assert_ne!(
        sum_by(&unique, |r| day_of(r.ts, 0))
            .keys()
            .collect::<Vec<_>>(),
        sum_by(&unique, |r| day_of(r.ts, 9 * 3600))
            .keys()
            .collect::<Vec<_>>()
    );
}

#[test]
fn fork_copies_are_counted_once() {
    let (env, recs) = sessions_env();
    let unique = dedupe(&recs);
    assert!(unique.len() < recs.len(), "the fixture has fork copies");
    let raw_rows = env.count("SELECT count(*) FROM usage_records");
    assert_eq!(raw_rows, recs.len() as i64);
    let rows = usage_json(&env, &["--by", "month"]);
    let records: i64 = rows
        .values()
        .map(|r| r["records"].as_i64().unwrap_or(0))
        .sum();
    let tokens: i64 = rows
        .values()
        .map(|r| r["total_tokens"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(records, unique.len() as i64);
    assert_eq!(tokens, unique.iter().map(|r| r.total).sum::<i64>());
    // The kept copy belongs to the original session, not the fork.
    let fork_only = env.count(
        "SELECT count(*) FROM v_usage_records u JOIN sessions s USING(file_id)
          WHERE s.parent_session IS NOT NULL AND u.copies > 1",
    );
    assert_eq!(fork_only, 0);
}

/// Copies without `responseId` (re-flushed lines, forks of old files) are
/// matched on entry id, timestamp, model and token counts.
#[test]
fn copies_without_response_id_are_counted_once() {
    let env = Env::new();
    let dir = env.root.join("--tmp-dedupe--");
    fs::create_dir_all(&dir).unwrap();
    let header = |id: &str, ts: &str| {
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"{ts}","cwd":"/tmp/dedupe"}}"#
        )
    };
    let msg = |id: &str, parent: &str, ts: &str, input: i64, cost: f64| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"assistant","content":[],"provider":"p","model":"m","usage":{{"input":{input},"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":{},"cost":{{"total":{cost}}}}},"stopReason":"stop","timestamp":1767225600000}}}}"#,
            input + 10
        )
    };
    let a1 = msg("a1", "null", "2026-01-01T00:00:00.000Z", 100, 0.5);
    let a2 = msg("a2", "\"a1\"", "2026-01-01T00:00:00.000Z", 200, 0.0);
    // Original: a1, a2, and a re-flushed duplicate line of a1 (#1672).
    let original = [
        header("s-orig", "2026-01-01T00:00:00.000Z"),
        a1.clone(),
        a2.clone(),
        a1.clone(),
    ];
    // Fork: the same two entries copied verbatim.
    let fork = [header("s-fork", "2026-01-02T00:00:00.000Z"), a1, a2];
    fs::write(dir.join("a.jsonl"), original.join("\n") + "\n").unwrap();
    fs::write(dir.join("b.jsonl"), fork.join("\n") + "\n").unwrap();
    env.sync();
    assert_eq!(env.count("SELECT count(*) FROM usage_records"), 5);
    let rows = usage_json(&env, &["--by", "model"]);
    let m = &rows["m"];
    assert_eq!(m["records"], 2);
    assert_eq!(m["total_tokens"], 110 + 210);
    assert_eq!(m["unpriced_tokens"], 210);
    assert!((m["cost"].as_f64().unwrap() - 0.5).abs() < 1e-9);
}

#[test]
fn unpriced_usage_is_flagged_and_can_be_repriced() {
    let (env, recs) = sessions_env();
    let unique = dedupe(&recs);
    let unpriced: BTreeMap<String, Sums> = sum_by(
        &unique
            .iter()
            .filter(|r| r.total > 0 && r.cost == 0.0)
            .cloned()
            .collect::<Vec<_>>(),
        |r| r.model.clone(),
    );
    assert!(
        unpriced.len() >= 2,
        "the fixture has unpriced models: {unpriced:?}"
    );
    let out = env.run(&["usage", "--by", "model"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected_total: i64 = unpriced.values().map(|s| s.total).sum();
    assert!(stderr.contains("no price"), "warning missing: {stderr}");
    for model in unpriced.keys() {
        assert!(
            stderr.contains(model.as_str()),
            "{model} not named: {stderr}"
        );
    }
    let table = String::from_utf8_lossy(&out.stdout);
    let total_line = table
        .lines()
        .find(|l| l.starts_with("TOTAL"))
        .expect("total row");
    let grouped = expected_total
        .to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    assert!(total_line.contains(&format!("{grouped} !")), "{total_line}");

    // Reprice one of the two unpriced models.
    let (model, sums) = unpriced.iter().next().unwrap();
    let prices = env.dir.path().join("prices.json");
    fs::write(
        &prices,
        format!(
            r#"{{"{model}": {{"input": 2.0, "output": 8.0, "cacheRead": 0.5, "cacheWrite": 4.0}}}}"#
        ),
    )
    .unwrap();
    let rows = usage_json(
        &env,
        &["--by", "model", "--prices", prices.to_str().unwrap()],
    );
    let row = &rows[model.as_str()];
    let want = (sums.input as f64 * 2.0
        + sums.output as f64 * 8.0
        + sums.cache_read as f64 * 0.5
        + sums.cache_write as f64 * 4.0)
        / 1e6;
    assert!((row["cost"].as_f64().unwrap() - want).abs() < 1e-6, "{row}");
    assert_eq!(row["unpriced_tokens"], 0);
    assert_eq!(row["repriced_tokens"], sums.total);
    let other: i64 = rows
        .values()
        .map(|r| r["unpriced_tokens"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(other, expected_total - sums.total);

    let bad = env.dir.path().join("bad.json");
    fs::write(&bad, "{\"m\": {\"inptu\": 1}}").unwrap();
    let out = env.run(&["usage", "--prices", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.json"));
}

/// ISO weeks start on Monday; the fixtures cross Sunday → Monday midnight
/// (S2, S6) and January → February (S1).
#[test]
fn week_and_month_boundaries() {
    let (env, recs) = sessions_env();
    let unique = dedupe(&recs);
    // Hand-checked calendar for the fixture days (2026-02-01 and -08 are Sundays).
    let week_of = |day: &str| -> String {
        match day {
            "2026-01-31" | "2026-02-01" => "2026-W05",
            "2026-02-02" | "2026-02-03" | "2026-02-05" | "2026-02-06" | "2026-02-08" => "2026-W06",
            "2026-02-09" | "2026-02-10" => "2026-W07",
            "2026-03-01" => "2026-W09",
            "2026-10-05" | "2026-10-06" => "2026-W41",
            other => panic!("add {other} to the calendar"),
        }
        .to_owned()
    };
    let weeks = sum_by(&unique, |r| week_of(&day_of(r.ts, 0)));
    assert_matches(&usage_json(&env, &["--by", "week"]), &weeks, "by week");
    let months = sum_by(&unique, |r| day_of(r.ts, 0)[..7].to_owned());
    assert_matches(&usage_json(&env, &["--by", "month"]), &months, "by month");
    assert!(months.contains_key("2026-01") && months.contains_key("2026-02"));

    // --since/--until are whole days, inclusive.
    let feb1 = sum_by(
        &unique
            .iter()
            .filter(|r| day_of(r.ts, 0) == "2026-02-01")
            .cloned()
            .collect::<Vec<_>>(),
        |r| day_of(r.ts, 0),
    );
    assert_matches(
        &usage_json(
            &env,
            &[
                "--by",
                "day",
                "--since",
                "2026-02-01",
                "--until",
                "2026-02-01",
            ],
        ),
        &feb1,
        "one day",
    );
}

#[test]
fn table_has_total_row_and_chart_only_on_request() {
    let (env, _) = sessions_env();
    let out = env.run(&["usage", "--by", "day", "--tz", "UTC"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().last().unwrap_or("").starts_with("TOTAL"));
    // stdout is a pipe here: no bars.
    assert!(!text.contains('█'));
    // On a terminal (`script`'s pseudo-terminal) a time grouping gets its
    // bars, unless --no-chart; a grouping that is not time never does.
    let on_terminal = |args: &str| {
        let inner = format!(
            "{} --db {} usage {args} --tz UTC",
            env!("CARGO_BIN_EXE_piidx"),
            env.db.display()
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &inner, "/dev/null"])
            .env("PIIDX_PAGER", "cat")
            .env("TERM", "xterm")
            .env("COLUMNS", "120")
            .env_remove("NO_COLOR")
            .output()
            .expect("run script(1)");
        assert!(out.status.success(), "{inner}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let charted = on_terminal("--by day");
    let bars: Vec<&str> = charted.lines().filter(|l| l.contains('█')).collect();
    assert!(!bars.is_empty(), "no bars on a terminal: {charted}");
    assert!(
        bars.iter().all(|l| !l.contains("TOTAL")),
        "the total row has no bar: {charted}"
    );
    assert!(!on_terminal("--by day --no-chart").contains('█'));
    assert!(!on_terminal("--by provider").contains('█'));
    let csv = env.run(&["usage", "--by", "provider", "--csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(csv.starts_with("key,records,input_tokens,"));
    assert!(csv.lines().any(|l| l.starts_with("openai,")));
}

/// Per tool name: calls, errors and nearest-rank median/p95 of call → result
/// time, computed from the files.
#[test]
fn tool_stats_match_the_fixture_files() {
    let (env, _) = sessions_env();
    // call id -> (name, call time); result id -> (is_error, result time)
    let mut calls: HashMap<(String, String, i64), ()> = HashMap::new();
    let mut results: HashMap<String, (bool, i64)> = HashMap::new();
    for file in walkdir::WalkDir::new(fixtures().join("sessions")) {
        let file = file.unwrap();
        if file.path().extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for line in fs::read_to_string(file.path()).unwrap().lines() {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let m = &entry["message"];
            let ts = m["timestamp"].as_i64().unwrap_or(0);
            match m["role"].as_str() {
                Some("assistant") => {
                    for block in m["content"].as_array().into_iter().flatten() {
                        if block["type"] == "toolCall" {
                            let id = block["id"].as_str().unwrap_or("").to_owned();
                            let name = block["name"].as_str().unwrap_or("").to_owned();
                            calls.insert((id, name, ts), ());
                        }
                    }
                }
                Some("toolResult") => {
                    let id = m["toolCallId"].as_str().unwrap_or("").to_owned();
                    results.insert(id, (m["isError"] == true, ts));
                }
                _ => {}
            }
        }
    }
    let mut by_name: BTreeMap<String, (i64, i64, Vec<i64>)> = BTreeMap::new();
    for (id, name, ts) in calls.keys() {
        let e = by_name.entry(name.clone()).or_default();
        e.0 += 1;
        if let Some((is_error, rts)) = results.get(id) {
            e.1 += i64::from(*is_error);
            e.2.push(rts - ts);
        }
    }
    let out = env.run(&["tools", "--json"]);
    assert!(out.status.success());
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), by_name.len());
    for row in rows {
        let name = row["key"].as_str().unwrap();
        let (n, errors, mut durations) = by_name[name].clone();
        durations.sort_unstable();
        let rank = |p: usize| durations[(durations.len() * p).div_ceil(100).max(1) - 1];
        assert_eq!(row["calls"], n, "{name}");
        assert_eq!(row["errors"], errors, "{name}");
        assert_eq!(row["median_ms"], rank(50), "{name}");
        assert_eq!(row["p95_ms"], rank(95), "{name}");
    }
    // The view gives the same per-name counts.
    let view = env.sql("SELECT name, calls, errors FROM v_tool_stats ORDER BY name");
    for row in view {
        let (n, errors, _) = &by_name[row["name"].as_str().unwrap()];
        assert_eq!(row["calls"], *n);
        assert_eq!(row["errors"], *errors);
    }
}

/// With rows in `subagent_runs` (migration 0002), runs get their own columns, fork copies of
/// a run count once, and an indexed child session is not counted twice.
#[test]
fn subagent_runs_are_separate_and_not_double_counted() {
    let (env, recs) = sessions_env();
    let unique = dedupe(&recs);
    let child = env.sql("SELECT file_id, session_id FROM sessions WHERE cwd LIKE '%日本語%'");
    let child_file = child[0]["file_id"].as_i64().unwrap();
    let child_session = child[0]["session_id"].as_str().unwrap().to_owned();
    let parents = env.sql("SELECT file_id, session_id FROM sessions ORDER BY file_id LIMIT 2");
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    // subagent_runs is migration 0002's table; the rows are hand-made here.

    let ts = 1_770_000_000_000_i64; // 2026-02-02
    for parent in &parents {
        // The same run in two files (a fork copy): counted once.
        conn.execute(
            "INSERT INTO subagent_runs(entry_rowid, json_path, status, file_id, session_id, entry_id, tool_call_id,
               timestamp_ms, position, model, input_tokens, output_tokens, cost)
             VALUES (-?1, '$.x', 'ok', ?1, ?2, 'e1', 'call-1', ?3, 0, 'x/y', 1000, 200, 0.05)",
            rusqlite::params![parent["file_id"].as_i64(), parent["session_id"].as_str(), ts],
        )
        .unwrap();
    }
    // A run without usage whose child session is indexed: the child's usage.
    conn.execute(
        "INSERT INTO subagent_runs(entry_rowid, json_path, status, file_id, session_id, entry_id, tool_call_id,
           timestamp_ms, position, child_file_id)
         VALUES (-1000, '$.y', 'ok', ?1, ?2, 'e2', 'call-2', ?3, 0, ?4)",
        rusqlite::params![parents[0]["file_id"].as_i64(), parents[0]["session_id"].as_str(), ts, child_file],
    )
    .unwrap();
    drop(conn);
    let child_recs: Vec<&Rec> = unique
        .iter()
        .filter(|r| r.model == "moonshotai/kimi-k2" && r.ts >= 1_772_000_000_000)
        .collect();
    let child_tokens: i64 = child_recs.iter().map(|r| r.total).sum();
    let child_cost: f64 = child_recs.iter().map(|r| r.cost).sum();
    assert!(child_tokens > 0, "{child_session}");
    let rows = usage_json(&env, &["--by", "month"]);
    let sum = |c: &str| -> f64 { rows.values().map(|r| r[c].as_f64().unwrap_or(0.0)).sum() };
    let main_tokens: i64 = unique.iter().map(|r| r.total).sum::<i64>() - child_tokens;
    assert_eq!(sum("total_tokens") as i64, main_tokens);
    assert_eq!(sum("subagent_runs") as i64, 2);
    assert_eq!(sum("subagent_tokens") as i64, 1200 + child_tokens);
    assert!((sum("subagent_cost") - (0.05 + child_cost)).abs() < 1e-6);
    assert_eq!(rows["2026-02"]["subagent_runs"], 2);
}
