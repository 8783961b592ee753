//! `piidx mcp` driven by a real MCP client, the official Python SDK
//! (tests/mcp_client.py: its stdio client and ClientSession), in both
//! protocol eras; every answer is checked against the CLI's `--json` on the
//! same index. Then raw pipes: malformed JSON-RPC, unknown methods and
//! tools, oversized lines get errors and the server goes on; a sync
//! committed between two calls is seen by the second.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::util::{Env, copy_tree, fixtures, write_user_session};

const S2: &str = "019c1ba1-9420-7456-956c-109a4e81b1a6";
const S7: &str = "019c47da-1300-74f8-8e3e-8e2ce99f293c";
/// S7's ~2 MB tool result.
const BIG_RESULT: &str = "1aa49c78";

/// The fixture sessions and the subagent tree, synced.
fn env() -> Env {
    let env = Env::with_fixture("sessions");
    copy_tree(&fixtures().join("subagents"), &env.root);
    env.sync();
    env
}

/// `piidx ARGS --json` parsed (exit 0, or 1 for a search without hits).
fn cli(env: &Env, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let out = env.run(&args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "piidx {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json output")
}

/// Runs tests/mcp_client.py on `plan` in `mode` (`initialize`/`discover`).
fn client(env: &Env, plan: &Value, mode: &str, transcript: Option<&Path>) -> Value {
    let plan_path = env.dir.path().join(format!("plan-{mode}.json"));
    std::fs::write(&plan_path, plan.to_string()).expect("write plan");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_piidx"))
        .arg(&env.db)
        .arg(&plan_path)
        .arg(mode)
        .env("TZ", "UTC")
        .env("HOME", env.dir.path());
    if let Some(path) = transcript {
        command.arg(path);
    }
    let out = command
        .output()
        .expect("python3 (with the `mcp` package: .ci/run installs it)");
    assert!(
        out.status.success(),
        "tests/mcp_client.py failed (is PyPI `mcp` installed? `python3 -m pip install mcp`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("client output")
}

/// The items under `key` of every page of call `index`, in order.
fn items(calls: &Value, index: usize, key: &str) -> Vec<Value> {
    let call = &calls[index];
    assert!(call.get("error").is_none(), "call {index}: {call}");
    assert_eq!(
        call["text_matches"], true,
        "call {index}: text content differs"
    );
    let pages = call["pages"].as_array().expect("pages");
    assert!(!pages.is_empty(), "call {index}");
    let last = pages.last().expect("a page");
    assert!(
        last["next_cursor"].is_null(),
        "call {index}: not all pages fetched"
    );
    pages
        .iter()
        .flat_map(|page| page[key].as_array().cloned().unwrap_or_default())
        .collect()
}

fn page_count(calls: &Value, index: usize) -> usize {
    calls[index]["pages"].as_array().map_or(0, Vec::len)
}

fn without(mut value: Value, key: &str) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.remove(key);
    }
    value
}

#[test]
fn a_real_client_gets_the_clis_answers_in_both_eras() {
    let env = env();
    let show_s2 = cli(&env, &["show", S2]);
    let on_branch = show_s2[3]["id"].as_str().expect("an entry id").to_owned();
    let tree_s2 = cli(&env, &["tree", S2]);
    let other_leaf = tree_s2["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["on_branch"] == false && e["child_count"] == 0)
        .and_then(|e| e["id"].as_str())
        .expect("a leaf off the branch")
        .to_owned();
    let plan = json!([
        // 0..=3: search
        {"name": "search", "arguments": {"query": "tapirnimbus"}},
        {"name": "search", "arguments": {"query": "the", "limit": 40, "max_bytes": 1000}, "pages": 100},
        {"name": "search", "arguments": {"query": "the", "sessions": true, "limit": 5}},
        {"name": "search", "arguments": {"query": "the OR FTS5", "role": ["user", "assistant"], "project": "proj-a",
            "since": "2026-02-01", "until": "2026-02-03", "sort": "recent"}},
        // 4, 5: list_sessions
        {"name": "list_sessions", "arguments": {"max_bytes": 1000}, "pages": 100},
        {"name": "list_sessions", "arguments": {"all": false, "project": "proj-a"}},
        // 6..=9: get_session, get_entry
        {"name": "get_session", "arguments": {"session": S2, "tool_output_chars": 0, "max_bytes": 2000}, "pages": 100},
        {"name": "get_session", "arguments": {"session": S2, "branch": other_leaf, "tool_output_chars": 0}, "pages": 100},
        {"name": "get_session", "arguments": {"session": S2, "view": "tree", "tool_output_chars": 0, "max_bytes": 3000}, "pages": 100},
        {"name": "get_entry", "arguments": {"session": &S2[..8], "entry": on_branch}},
        // 10, 11: a cut tool output, fetched whole by its path
        {"name": "get_session", "arguments": {"session": S7}, "pages": 100},
        {"name": "get_entry", "arguments": {"session": S7, "entry": BIG_RESULT,
            "path": "$.message.content[0].text", "max_bytes": 1000000}, "pages": 10},
        // 12..=15: usage, subagent_runs
        {"name": "usage", "arguments": {"by": "model"}},
        {"name": "usage", "arguments": {"since": "2026-02-01", "until": "2026-02-09", "max_bytes": 1000}, "pages": 100},
        {"name": "subagent_runs", "arguments": {}},
        {"name": "subagent_runs", "arguments": {"failed": true}},
        // 16..: errors, as JSON-RPC errors
        {"name": "no_such_tool", "arguments": {}},
        {"name": "search", "arguments": {}},
        {"name": "search", "arguments": {"query": "x", "since": "last week"}},
        {"name": "get_session", "arguments": {"session": "ffffffff"}},
        {"name": "search", "arguments": {"query": "x", "cursor": "bm90IGEgY3Vyc29y"}},
        {"name": "list_sessions", "arguments": {"colour": "blue"}},
        {"name": "get_entry", "arguments": {"session": S2, "entry": on_branch, "path": "$.nope"}},
        // 23: an entry larger than the budget, cut to fit
        {"name": "get_entry", "arguments": {"session": S7, "entry": BIG_RESULT, "max_bytes": 5000}},
    ]);
    let transcript = std::env::var_os("PIIDX_MCP_TRANSCRIPT");
    let handshake = client(
        &env,
        &plan,
        "initialize",
        transcript.as_deref().map(Path::new),
    );
    assert_eq!(handshake["protocol_version"], "2025-11-25");
    assert_eq!(handshake["server_info"]["name"], "piidx");
    let names: Vec<&str> = handshake["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "search",
            "list_sessions",
            "get_session",
            "get_entry",
            "usage",
            "subagent_runs"
        ]
    );
    for tool in handshake["tools"].as_array().expect("tools") {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    let calls = &handshake["calls"];

    // search
    assert_eq!(
        Value::Array(items(calls, 0, "hits")),
        cli(&env, &["search", "tapirnimbus"])
    );
    let many = cli(&env, &["search", "the", "-n", "40"]);
    assert!(many.as_array().expect("hits").len() > 20);
    assert_eq!(Value::Array(items(calls, 1, "hits")), many);
    assert!(page_count(calls, 1) > 3, "a small budget pages");
    assert_eq!(
        Value::Array(items(calls, 2, "sessions")),
        cli(&env, &["search", "the", "-l", "-n", "5"])
    );
    let filtered = cli(
        &env,
        &[
            "search",
            "the OR FTS5",
            "--role",
            "user",
            "--role",
            "assistant",
            "--project",
            "proj-a",
            "--since",
            "2026-02-01",
            "--until",
            "2026-02-03",
            "--sort",
            "recent",
        ],
    );
    assert!(!filtered.as_array().expect("hits").is_empty());
    assert_eq!(Value::Array(items(calls, 3, "hits")), filtered);

    // list_sessions: Pi's SessionInfo, plus listedByPi; all by default
    let listed = items(calls, 4, "sessions");
    assert!(listed.iter().any(|s| s["listedByPi"] == false));
    let listed: Vec<Value> = listed
        .into_iter()
        .map(|s| without(s, "listedByPi"))
        .collect();
    assert_eq!(Value::Array(listed), cli(&env, &["sessions", "--all"]));
    assert!(page_count(calls, 4) > 3);
    let pi_only = items(calls, 5, "sessions");
    assert!(pi_only.iter().all(|s| s["listedByPi"] == true));
    let pi_only: Vec<Value> = pi_only
        .into_iter()
        .map(|s| without(s, "listedByPi"))
        .collect();
    assert_eq!(
        Value::Array(pi_only),
        cli(&env, &["sessions", "--project", "proj-a"])
    );

    // get_session: the branch, another branch, the tree; get_entry
    assert_eq!(Value::Array(items(calls, 6, "entries")), show_s2);
    assert!(page_count(calls, 6) > 1);
    assert_eq!(
        Value::Array(items(calls, 7, "entries")),
        cli(&env, &["show", S2, "--branch", &other_leaf])
    );
    let tree_items = items(calls, 8, "entries");
    let outline: Vec<Value> = tree_items
        .iter()
        .cloned()
        .map(|e| without(e, "entry"))
        .collect();
    assert_eq!(Value::Array(outline), tree_s2["entries"]);
    for stored in show_s2.as_array().expect("entries") {
        let item = tree_items
            .iter()
            .find(|item| item["id"] == stored["id"])
            .expect("every branch entry in the tree");
        assert_eq!(&item["entry"], stored);
    }
    let page = &calls[8]["pages"][0];
    assert_eq!(page["total_entries"], tree_items.len());
    let entry = &calls[9]["pages"][0];
    assert_eq!(entry["entry"], show_s2[3]);
    assert_eq!(entry["on_branch"], true);
    assert_eq!(entry["session_id"], S2);

    // the 2 MB tool output: cut in get_session, whole through get_entry
    let show_s7 = cli(&env, &["show", S7]);
    let full_text = show_s7
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["id"] == BIG_RESULT)
        .and_then(|e| e["message"]["content"][0]["text"].as_str())
        .expect("the big tool result")
        .to_owned();
    let pages = calls[10]["pages"].as_array().expect("pages");
    let cuts: Vec<&Value> = pages
        .iter()
        .flat_map(|p| p["truncated"].as_array().into_iter().flatten())
        .collect();
    assert!(
        cuts.iter().any(|c| c["entry_id"] == BIG_RESULT
            && c["path"] == "$.message.content[0].text"
            && c["size"] == full_text.chars().count()),
        "{cuts:?}"
    );
    for page in pages {
        let size = serde_json::to_string(&page["entries"]).expect("json").len();
        assert!(size < 45_000, "a page of {size} bytes");
    }
    let slices = &calls[11]["pages"];
    assert!(slices.as_array().expect("pages").len() > 1);
    let joined: String = slices
        .as_array()
        .expect("pages")
        .iter()
        .map(|p| p["text"].as_str().expect("text"))
        .collect();
    assert_eq!(joined, full_text);

    // usage and subagent runs
    assert_eq!(
        Value::Array(items(calls, 12, "rows")),
        cli(&env, &["usage", "--by", "model"])
    );
    let days = cli(
        &env,
        &["usage", "--since", "2026-02-01", "--until", "2026-02-09"],
    );
    assert!(days.as_array().expect("rows").len() > 2);
    assert_eq!(Value::Array(items(calls, 13, "rows")), days);
    let runs = cli(&env, &["subagents"]);
    assert!(!runs.as_array().expect("runs").is_empty());
    assert_eq!(Value::Array(items(calls, 14, "runs")), runs);
    assert_eq!(
        Value::Array(items(calls, 15, "runs")),
        cli(&env, &["subagents", "--failed"])
    );

    // errors: JSON-RPC errors saying what to do
    let error = |index: usize| -> (i64, String) {
        let error = &calls[index]["error"];
        (
            error["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("call {index}: {}", calls[index])),
            error["message"].as_str().unwrap_or_default().to_owned(),
        )
    };
    let expected = [
        (16, "unknown tool \"no_such_tool\""),
        (17, "search needs the argument \"query\""),
        (18, "since: cannot read the date \"last week\""),
        (19, "no indexed session matches `ffffffff`"),
        (20, "pass the next_cursor of the previous answer unchanged"),
        (21, "list_sessions has no argument \"colour\""),
        (22, "has no value at \"$.nope\""),
    ];
    for (index, text) in expected {
        let (code, message) = error(index);
        assert_eq!(code, -32602, "call {index}: {message}");
        assert!(message.contains(text), "call {index}: {message}");
    }

    // get_entry: an entry over the budget is cut, saying where
    let cut = &calls[23]["pages"][0];
    assert_eq!(cut["entry"]["id"], BIG_RESULT);
    assert!(serde_json::to_string(cut).expect("json").len() < 6_000);
    assert_eq!(cut["truncated"][0]["path"], "$.message.content[0].text");
    assert_eq!(cut["truncated"][0]["size"], full_text.chars().count());

    // 2026-07-28: server/discover and the per-request envelope give the
    // same answers.
    let modern = client(&env, &plan, "discover", None);
    assert_eq!(modern["protocol_version"], "2026-07-28");
    assert!(
        modern["supported_versions"]
            .as_array()
            .expect("versions")
            .contains(&json!("2025-06-18"))
    );
    assert_eq!(modern["tools"], handshake["tools"]);
    assert_eq!(modern["calls"], handshake["calls"]);
}

/// A server on raw pipes.
struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Raw {
    fn start(env: &Env) -> Raw {
        Raw::spawn(env.command(&["mcp"]))
    }

    fn spawn(mut command: Command) -> Raw {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start piidx mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Raw {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read a reply");
        assert!(!line.is_empty(), "the server ended");
        serde_json::from_str(&line).expect("a JSON reply")
    }

    fn ask(&mut self, message: Value) -> Value {
        self.send(message.to_string().as_bytes());
        self.reply()
    }

    /// Closes stdin and waits: the server must end on its own, cleanly.
    fn finish(mut self) {
        drop(self.stdin.take());
        let out = self.child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "exit {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

#[test]
fn bad_messages_get_errors_and_the_server_goes_on() {
    let env = env();
    let mut raw = Raw::start(&env);
    let init = raw.ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let code = |reply: &Value| reply["error"]["code"].as_i64();

    raw.send(b"{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": ");
    let reply = raw.reply();
    assert_eq!((code(&reply), &reply["id"]), (Some(-32700), &Value::Null));
    raw.send(b"\xff\xfe not utf-8");
    assert_eq!(code(&raw.reply()), Some(-32700));
    // A batch (2025-03-26) of two bad messages: two errors.
    let batch = raw.ask(json!([1, 2]));
    let codes: Vec<Option<i64>> = batch
        .as_array()
        .expect("a batch")
        .iter()
        .map(code)
        .collect();
    assert_eq!(codes, [Some(-32600), Some(-32600)]);
    assert_eq!(code(&raw.ask(json!("ping"))), Some(-32600));
    assert_eq!(
        code(&raw.ask(json!({"jsonrpc": "1.0", "id": 3, "method": "ping"}))),
        Some(-32600)
    );
    let reply = raw.ask(json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list"}));
    assert_eq!((code(&reply), &reply["id"]), (Some(-32601), &json!(4)));
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tools/call"))
    );
    let reply = raw.ask(call(5, "drop_tables", json!({})));
    assert_eq!(code(&reply), Some(-32602));
    let reply = raw.ask(
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"arguments": {}}}),
    );
    assert_eq!(code(&reply), Some(-32602));
    let reply = raw.ask(call(7, "search", json!({"query": 42})));
    assert_eq!(code(&reply), Some(-32602));
    let reply = raw.ask(call(8, "search", json!({"query": "x", "max_bytes": 10})));
    assert_eq!(code(&reply), Some(-32602));
    let reply = raw.ask(call(9, "search", json!({"query": "((("})));
    assert_eq!(code(&reply), Some(-32602), "{reply}");

    // A 3 MiB line is skipped unread and answered; the server goes on.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{{"name":"search","arguments":{{"query":"{}"}}}}}}"#,
        "a".repeat(3 << 20)
    );
    raw.send(huge.as_bytes());
    let reply = raw.reply();
    assert_eq!(code(&reply), Some(-32600));
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit")),
        "{reply}"
    );
    // 2025-03-26 has no structuredContent: the answer is the text block,
    // and the tools have no output schema.
    let listed = raw.ask(json!({"jsonrpc": "2.0", "id": 12, "method": "tools/list"}));
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 6);
    assert!(tools.iter().all(|t| t.get("outputSchema").is_none()));
    let reply = raw.ask(call(11, "search", json!({"query": "tapirnimbus"})));
    assert!(reply["result"].get("structuredContent").is_none());
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    let answer: Value = serde_json::from_str(text).expect("JSON text");
    assert_eq!(answer["hits"], cli(&env, &["search", "tapirnimbus"]));
    let pong = raw.ask(json!({"jsonrpc": "2.0", "id": "last", "method": "ping"}));
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": "last", "result": {}}));
    raw.finish();
}

/// `subagent` filters runs by the subagent's name (`subagents --agent`),
/// while `agent` stays the scope's coding agent, as in every tool.
#[test]
fn subagent_runs_filter_by_subagent_and_by_coding_agent() {
    let env = env();
    let mut raw = Raw::start(&env);
    let runs = |raw: &mut Raw, id: i64, arguments: Value| -> Value {
        let reply = raw.ask(call(id, "subagent_runs", arguments));
        reply["result"]["structuredContent"]["runs"].clone()
    };
    let workers = cli(&env, &["subagents", "--agent", "worker"]);
    assert!(!workers.as_array().expect("runs").is_empty());
    assert_eq!(runs(&mut raw, 1, json!({"subagent": "worker"})), workers);
    assert_eq!(
        runs(&mut raw, 2, json!({"subagent": "worker", "agent": "pi"})),
        workers
    );
    assert_eq!(
        runs(&mut raw, 3, json!({"subagent": "worker", "agent": "omp"})),
        json!([])
    );
    raw.finish();
}

#[test]
fn a_call_sees_what_a_sync_committed_since_the_last_one() {
    let env = env();
    let mut raw = Raw::start(&env);
    let count = |raw: &mut Raw, id: i64| -> usize {
        let reply = raw.ask(call(id, "list_sessions", json!({"max_bytes": 4_000_000})));
        reply["result"]["structuredContent"]["sessions"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let before = count(&mut raw, 1);
    assert!(before > 0);
    let none = raw.ask(call(2, "search", json!({"query": "quokkafresh"})));
    assert_eq!(none["result"]["structuredContent"]["hits"], json!([]));
    let dir = env.root.join("--home-user-proj-new--");
    std::fs::create_dir_all(&dir).expect("dir");
    write_user_session(
        &dir,
        "019cbd00-0000-7000-8000-000000000001",
        json!("a quokkafresh question"),
    );
    env.sync();
    assert_eq!(count(&mut raw, 3), before + 1);
    let found = raw.ask(call(4, "search", json!({"query": "quokkafresh"})));
    let hits = &found["result"]["structuredContent"]["hits"];
    assert_eq!(hits.as_array().map(Vec::len), Some(1), "{found}");
    raw.finish();
}

#[test]
fn without_an_index_a_call_says_to_sync() {
    let env = Env::new();
    let mut raw = Raw::start(&env);
    let reply = raw.ask(call(1, "list_sessions", json!({})));
    assert_eq!(reply["error"]["code"], -32603);
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("piidx sync")),
        "{reply}"
    );
    assert!(!env.db.exists(), "the server never creates the index");
    raw.finish();
}

/// A call is bounded: a query of 2,000 terms is refused at once with the
/// limit named, and a call the client cancels (here a search held until it
/// is told to stop: `PIIDX_TEST_HOLD`) gets no answer while the next
/// request is answered; the search after it runs as usual.
#[test]
fn a_huge_query_is_refused_and_a_cancelled_call_stops_for_the_next() {
    let env = env();
    let mut command = env.command(&["mcp"]);
    command.env("PIIDX_TEST_HOLD", "search");
    let mut raw = Raw::spawn(command);
    let init = raw.ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let many = vec!["a*"; 2000].join(" ");
    let reply = raw.ask(call(2, "search", json!({"query": many})));
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 32")),
        "{reply}"
    );
    // Held until cancelled (or its budget, 10 s, when cancelling fails:
    // then its error would come before the pong).
    raw.send(
        call(3, "search", json!({"query": "tapirnimbus"}))
            .to_string()
            .as_bytes(),
    );
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 3, "reason": "the user moved on"}})
        .to_string()
        .as_bytes(),
    );
    let pong = raw.ask(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}));
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 4, "result": {}}));
    raw.finish();
}
