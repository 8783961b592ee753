//! Full-text search from every SQLite tool: each SQL example of
//! docs/schema.md and README.md run through the system `sqlite3`, Python's
//! `sqlite3` module and `piidx sql`; `search()` inside `piidx sql` against
//! `piidx search`; the real `sqlite-utils search` and Datasette (JSON API,
//! `_search=` and the canned queries) finding a known word's session; and
//! the roots the database remembers.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{Env, copy_tree, fixtures};

/// The database path the documentation's examples use.
const DOC_DB: &str = "/home/you/.local/share/piidx/piidx.db";

/// A word found in one assistant message of one fixture session.
const WORD: &str = "quokkaplume";

/// The sessions and subagents fixtures in one root, synced into two
/// shards, as the examples assume.
fn synced() -> Env {
    let env = Env::with_fixture("sessions");
    copy_tree(&fixtures().join("subagents"), &env.root);
    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root, "--fts-shards", "2", "-q"]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "sync: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    env
}

/// The session id of the fixture file holding `word`, read from the file
/// itself (its header line), not from the index.
fn session_with(root: &Path, word: &str) -> String {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(root) {
        let entry = entry.expect("walk fixture");
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if entry.path().extension().is_some_and(|e| e == "jsonl") && text.contains(word) {
            let header: Value =
                serde_json::from_str(text.lines().next().unwrap_or_default()).expect("header");
            found.push(header["id"].as_str().expect("session id").to_owned());
        }
    }
    assert_eq!(found.len(), 1, "{word} is in one session file: {found:?}");
    found.remove(0)
}

/// Every SQL example: the ```sql blocks and the `sql "..."` one-liners of
/// the two pages, as (where, text).
fn examples() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for page in ["docs/schema.md", "README.md"] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page))
            .expect("read page");
        let mut block: Option<(usize, String)> = None;
        for (n, line) in text.lines().enumerate() {
            match &mut block {
                Some((start, sql)) if line.trim_start().starts_with("```") => {
                    found.push((format!("{page}:{}", *start + 1), std::mem::take(sql)));
                    block = None;
                }
                Some((_, sql)) => {
                    sql.push_str(line);
                    sql.push('\n');
                }
                None if line.trim_start().starts_with("```sql") => block = Some((n, String::new())),
                None => {
                    if let Some(at) = line.find(" sql \"") {
                        let rest = &line[at + 6..];
                        if let Some(end) = rest.find('"').filter(|&end| !rest[..end].contains('…'))
                        {
                            found.push((format!("{page}:{}", n + 1), rest[..end].to_owned()));
                        }
                    }
                }
            }
        }
    }
    found
}

/// The statements of a script (split where SQLite would end one; no
/// example has a `;` inside a string).
fn statements(sql: &str) -> Vec<String> {
    sql.lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Rows of the last statement through the `sqlite3` program.
fn via_sqlite3(db: &Path, sql: &str) -> Result<Vec<Value>, String> {
    let mut child = Command::new("sqlite3")
        .arg("-json")
        .arg("-bail")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sqlite3 (the Debian package sqlite3; .ci/run installs it)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("write sql");
    let out = child.wait_with_output().expect("sqlite3");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    // One JSON array per statement that returned rows; the last one counts.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = text
        .rfind("\n[")
        .map_or(text.as_str(), |at| &text[at + 1..])
        .trim();
    if last.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(last).map_err(|err| format!("sqlite3 output: {err}: {text}"))
}

/// The number of rows of the last statement through Python's `sqlite3`.
fn via_python(db: &Path, sql: &str) -> Result<usize, String> {
    // The function docs/schema.md tells Python users to register (shared
    // texts are stored deflated, migration 0017).
    let script = "import sqlite3, sys, zlib\n\
        conn = sqlite3.connect(sys.argv[1])\n\
        conn.create_function('sqlar_uncompress', 2, lambda data, size: data \
        if data is None or size is None or size <= 0 or len(data) == size \
        else zlib.decompress(data), deterministic=True)\n\
        rows = []\n\
        for stmt in sys.argv[2:]:\n\
        \x20   rows = conn.execute(stmt).fetchall()\n\
        print(len(rows))\n";
    let mut command = Command::new("python3");
    command.arg("-c").arg(script).arg(db);
    command.args(statements(sql));
    let out = command.output().expect("run python3");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|err| format!("python output: {err}"))
}

#[test]
fn every_sql_example_in_the_docs_runs_in_sqlite3_python_and_piidx_sql() {
    let env = synced();
    let db = env.db.to_string_lossy().into_owned();
    let examples = examples();
    assert!(examples.len() >= 8, "{examples:?}");
    let version = Command::new("sqlite3")
        .arg("--version")
        .output()
        .expect("sqlite3 --version");
    eprintln!("sqlite3 {}", String::from_utf8_lossy(&version.stdout));
    for (place, example) in examples {
        let sql = example.replace(DOC_DB, &db);
        assert!(
            !sql.contains(".db.fts") || sql.contains(&db),
            "{place}: attach the shards by absolute path ({DOC_DB}.fts0)"
        );
        // piidx sql runs one statement and attaches the shards itself.
        let main: Vec<String> = statements(&sql)
            .into_iter()
            .filter(|s| !s.to_uppercase().starts_with("ATTACH"))
            .collect();
        assert_eq!(main.len(), 1, "{place}: one statement besides ATTACH");
        let piidx = env.run(&["sql", &main[0], "--json"]);
        assert!(
            piidx.status.success(),
            "{place}: piidx sql: {}",
            String::from_utf8_lossy(&piidx.stderr)
        );
        let rows: Vec<Value> = serde_json::from_slice(&piidx.stdout).expect("piidx sql --json");
        assert!(!rows.is_empty(), "{place}: no rows on the fixtures");
        // `search()` is piidx's own function.
        if example.contains("-- piidx sql only") || example.contains("search('") {
            continue;
        }
        let plain =
            via_sqlite3(&env.db, &sql).unwrap_or_else(|err| panic!("{place}: sqlite3: {err}"));
        assert_eq!(plain.len(), rows.len(), "{place}: sqlite3 and piidx sql");
        let first = |rows: &[Value]| rows[0].as_object().and_then(|o| o.values().next()).cloned();
        assert_eq!(first(&plain), first(&rows), "{place}: first value");
        let python =
            via_python(&env.db, &sql).unwrap_or_else(|err| panic!("{place}: python: {err}"));
        assert_eq!(python, rows.len(), "{place}: python sqlite3 and piidx sql");
    }
}

#[test]
fn search_in_piidx_sql_ranks_as_piidx_search_and_joins() {
    let env = synced();
    for query in ["session", "offset OR parse*", "\"byte offset\"", WORD] {
        let out = env.run(&["search", query, "--json", "--limit", "7"]);
        let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("search --json");
        let want: Vec<(Value, Value, Value)> = hits
            .iter()
            .map(|h| {
                (
                    h["session_id"].clone(),
                    h["entry_id"].clone(),
                    h["role"].clone(),
                )
            })
            .collect();
        let rows = env.sql(&format!(
            "SELECT h.session_id, h.entry_id, h.kind, h.rank, h.snippet, s.file_path
               FROM search('{}', 7) h JOIN sessions s ON s.file_id = h.file_id",
            query.replace('\'', "''")
        ));
        let have: Vec<(Value, Value, Value)> = rows
            .iter()
            .map(|r| {
                (
                    r["session_id"].clone(),
                    r["entry_id"].clone(),
                    r["kind"].clone(),
                )
            })
            .collect();
        assert_eq!(have, want, "{query}");
        let ranks: Vec<f64> = hits
            .iter()
            .map(|h| h["score"].as_f64().unwrap_or(0.0))
            .collect();
        let sql_ranks: Vec<f64> = rows
            .iter()
            .map(|r| r["rank"].as_f64().unwrap_or(0.0))
            .collect();
        assert_eq!(ranks, sql_ranks, "{query}");
    }
    // Named arguments, a filter, and the snippet's marks.
    let rows = env.sql(&format!(
        "SELECT session_id, snippet FROM search WHERE query = '{WORD}' AND role = 'assistant'"
    ));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0]["session_id"],
        session_with(&env.root, WORD).as_str()
    );
    assert!(
        rows[0]["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("«{WORD}»"))
    );
    assert!(
        env.sql(&format!(
            "SELECT * FROM search('{WORD}', 5, NULL, NULL, NULL, 'user')"
        ))
        .is_empty()
    );
    // Without a query: an error that says how to call it.
    let out = env.run(&["sql", "SELECT * FROM search"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("search('words')"));
}

#[test]
fn sqlite_utils_searches_the_message_text() {
    let env = synced();
    let out = Command::new("sqlite-utils")
        .args(["search"])
        .arg(&env.db)
        .args(["message_fts", WORD])
        .output()
        .expect("run sqlite-utils (pip install sqlite-utils; .ci/run installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("sqlite-utils JSON");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        rows[0]["session_id"],
        session_with(&env.root, WORD).as_str()
    );
    assert!(rows[0]["text"].as_str().unwrap_or_default().contains(WORD));
    // Artifact text too (the subagents fixture's output file).
    let out = Command::new("sqlite-utils")
        .arg("search")
        .arg(&env.db)
        .args(["subagent_artifacts", "axolotlvine"])
        .output()
        .expect("run sqlite-utils");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("sqlite-utils JSON");
    assert!(!rows.is_empty());
}

/// GET `path` from the server at `port` (HTTP/1.0, whole body).
fn get(port: u16, path: &str) -> (String, String) {
    get_as(port, path, "127.0.0.1")
}

/// `get` naming `host` in the Host header.
fn get_as(port: u16, path: &str, host: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_owned(), body.to_owned())
}

fn get_json(port: u16, path: &str) -> Vec<Value> {
    let (head, body) = get(port, path);
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{path}: {head}\n{body}"
    );
    serde_json::from_str(&body).unwrap_or_else(|err| panic!("{path}: {err}: {body}"))
}

/// Starts `command` (a Datasette server on port 0), waits until it listens
/// and returns it with its port; its log is read on, so it never blocks.
fn serve_datasette(mut command: Command) -> (Server, u16) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run datasette");
    let stderr = child.stderr.take().expect("stderr");
    let mut server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let mut port = None;
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.expect("datasette output");
        said.push_str(&line);
        said.push('\n');
        if let Some(at) = line.find("http://127.0.0.1:") {
            let digits: String = line[at + 17..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            port = digits.parse::<u16>().ok();
            break;
        }
    }
    let Some(port) = port else {
        let _ = server.0.wait();
        panic!("datasette did not start: {said}");
    };
    std::thread::spawn(move || for _ in lines {});
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no server on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (server, port)
}

/// Kills the server (the `piidx datasette` process became `datasette`).
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn datasette_searches_from_the_browser_with_canned_queries() {
    let env = synced();
    let session = session_with(&env.root, WORD);
    // Port 0: the server picks a free port and says which.
    let (_server, port) = serve_datasette(env.command(&["datasette", "--port", "0"]));
    let db = "index";
    // The search box of the view (metadata: fts_table message_fts).
    let rows = get_json(
        port,
        &format!("/{db}/v_message_text.json?_search={WORD}&_shape=array"),
    );
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["session_id"], session.as_str());
    assert!(
        rows[0]["time"]
            .as_str()
            .unwrap_or_default()
            .starts_with("20")
    );
    // The canned queries.
    let rows = get_json(port, &format!("/{db}/search.json?q={WORD}&_shape=array"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["session_id"], session.as_str());
    assert!(
        rows[0]["snippet"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("«{WORD}»"))
    );
    let rows = get_json(port, &format!("/{db}/recent_sessions.json?_shape=array"));
    assert_eq!(
        rows.len() as i64,
        env.count("SELECT count(*) FROM sessions")
    );
    let rows = get_json(port, &format!("/{db}/usage_by_day.json?_shape=array"));
    assert!(!rows.is_empty());
    let rows = get_json(
        port,
        &format!("/{db}/transcript.json?session_id={session}&_shape=array"),
    );
    assert!(
        rows.iter()
            .any(|r| r["text"].as_str().unwrap_or_default().contains(WORD))
    );
    // The HTML page a browser gets shows the hit.
    let (head, body) = get(port, &format!("/{db}/search?q={WORD}"));
    assert!(head.contains("200"), "{head}");
    assert!(body.contains(WORD));
    // A request naming another host (DNS rebinding) gets nothing.
    for host in [
        "evil.com",
        "evil.com:8001",
        "127.0.0.1.evil.com",
        "localhost.evil.com",
    ] {
        for path in [
            format!("/{db}/search.json?q={WORD}&_shape=array"),
            format!("/{db}.json?sql=select+1"),
            "/".to_owned(),
        ] {
            let (head, body) = get_as(port, &path, host);
            assert!(head.contains(" 403"), "{host} {path}: {head}");
            assert!(!body.contains(WORD), "{host} {path}: {body}");
        }
    }
    for host in ["localhost", "[::1]:8001", "app.localhost"] {
        let (head, _) = get_as(port, &format!("/{db}/search.json?q={WORD}"), host);
        assert!(head.contains(" 200"), "{host}: {head}");
    }
}

#[test]
fn the_database_remembers_its_roots_until_one_is_forgotten() {
    let env = Env::with_fixture("sessions");
    let root = env.root.to_string_lossy().into_owned();
    env.sync();
    let sessions = env.count("SELECT count(*) FROM sessions");
    // A new session under the root: a plain `sync` (no --root) finds it.
    let dir = env.root.join("--home-user-proj-a--");
    let source = std::fs::read_dir(&dir)
        .expect("project dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .expect("a session");
    std::fs::copy(&source, dir.join("2026-03-01T00-00-00-000Z_copy.jsonl")).expect("copy");
    let out = env.run(&["sync", "-q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.count("SELECT count(*) FROM sessions"), sessions + 1);
    // Forgotten: its rows go, and a plain sync does not bring them back.
    let out = env.run(&["roots", "--forget", &root]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.count("SELECT count(*) FROM sessions"), 0);
    assert_eq!(env.count("SELECT count(*) FROM message_fts_docsize"), 0);
    let _ = env.run(&["sync", "-q"]);
    assert_eq!(env.count("SELECT count(*) FROM sessions"), 0);
}

/// The views that read deflated text and so need `sqlar_uncompress`
/// (docs/schema.md, migration 0021); every other table and view opens in
/// any SQLite.
const NEED_THE_FUNCTION: &[&str] = &[
    "v_shared_texts",
    "v_shared_values",
    "fts_content",
    "v_entries_full",
    "texts_full",
    "messages_full",
    "tool_calls_full",
];

/// Every table and view but those, in Python's `sqlite3` with nothing
/// registered, and the core views through a plain Datasette (no plugin):
/// they open, and say where a value is deflated (the subagents fixture
/// holds a 2 MB tool output, stored deflated).
#[test]
fn every_core_view_opens_without_piidx_in_python_and_datasette() {
    let env = synced();
    let names: Vec<String> = env
        .sql("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .iter()
        .filter_map(|row| row["name"].as_str().map(str::to_owned))
        .filter(|name| !NEED_THE_FUNCTION.contains(&name.as_str()))
        .collect();
    assert!(
        names.iter().any(|n| n == "messages") && names.len() > 30,
        "{names:?}"
    );
    let script = "import sqlite3, sys\n\
        conn = sqlite3.connect(sys.argv[1])\n\
        for name in sys.argv[2:]:\n\
        \x20   conn.execute('SELECT * FROM \"%s\" LIMIT 5' % name).fetchall()\n\
        print(conn.execute(\"SELECT count(*) FROM texts WHERE deflated = 1 AND text IS NULL\").fetchone()[0])\n\
        print(conn.execute(\"SELECT count(*) FROM messages WHERE complete = 0 AND text LIKE '%[deflated: %'\").fetchone()[0])\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&env.db)
        .args(&names)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: Vec<&str> = stdout.lines().collect();
    assert!(
        counts.iter().all(|n| *n != "0"),
        "deflated values named: {counts:?}"
    );

    // A plain Datasette: no metadata, no plugin.
    let mut plain = Command::new("datasette");
    plain
        .arg("serve")
        .arg(&env.db)
        .args(["--port", "0", "--host", "127.0.0.1"]);
    let (_server, port) = serve_datasette(plain);
    for view in ["messages", "texts", "tool_calls", "v_entries"] {
        let rows = get_json(port, &format!("/index/{view}.json?_shape=array&_size=5"));
        assert!(!rows.is_empty(), "{view}");
    }
}

/// `v_message_text` since migration 0027 (a message has text when it has a
/// first chunk of a text block, the text computed once) gives exactly the
/// rows and texts of 0015's view (kept when its computed text was not
/// empty), over every kind of fixture and the blank and odd blocks around
/// them; `message_fts`, an index of the view, still matches it.
#[test]
fn the_message_text_view_gives_the_rows_it_gave_before_migration_27() {
    let env = Env::new();
    for tree in [
        "sessions",
        "samples",
        "damaged",
        "subagents",
        "pi152",
        "shapes",
        "omp/sessions",
        "pi_agent_rust",
    ] {
        copy_tree(
            &fixtures().join(tree),
            &env.root.join(tree.replace('/', "-")),
        );
    }
    let odd = env.root.join("--home-u-odd--");
    for (id, content) in [
        ("empty", serde_json::json!("")),
        ("blank", serde_json::json!(" \n\t ")),
        (
            "blocks",
            serde_json::json!([{"type": "text", "text": ""},
            {"type": "text", "text": "  "}, {"type": "text", "text": "kept"},
            {"type": "text", "text": 7}, {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "and this"}]),
        ),
        (
            "blanks",
            serde_json::json!([{"type": "text", "text": ""}, {"type": "text", "text": " "}]),
        ),
        (
            "image",
            serde_json::json!([{"type": "image", "data": "AAAA", "mimeType": "image/png"}]),
        ),
        ("number", serde_json::json!(42)),
    ] {
        crate::util::write_user_session(&odd, id, content);
    }
    // A lone surrogate escape and a pair, as JavaScript's JSON.stringify
    // writes them.
    std::fs::write(
        odd.join("surrogate.jsonl"),
        concat!(
            r#"{"type":"session","version":3,"id":"surrogate","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/proj"}"#,
            "\n",
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"lone \ud83d and \ud83d\ude00"}}"#,
            "\n"
        ),
    )
    .expect("write session");
    env.sync();
    let conn = rusqlite::Connection::open(&env.db).expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let old = crate::util::view_sql(
        include_str!("../../migrations/0015_any_sqlite.sql"),
        "v_message_text",
    )
    .replace("CREATE VIEW v_message_text", "CREATE TEMP VIEW old_text");
    conn.execute_batch(&old).expect("0015's view");
    let count = |sql: &str| -> i64 {
        conn.query_row(sql, [], |row| row.get(0))
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    };
    let rows = count("SELECT count(*) FROM v_message_text");
    assert!(rows > 100, "{rows} messages with text");
    assert_eq!(rows, count("SELECT count(*) FROM temp.old_text"));
    for (a, b) in [
        ("v_message_text", "temp.old_text"),
        ("temp.old_text", "v_message_text"),
    ] {
        let only = count(&format!(
            "SELECT count(*) FROM (SELECT * FROM {a} EXCEPT SELECT * FROM {b})"
        ));
        assert_eq!(only, 0, "rows of {a} that {b} does not have");
    }
    let odd_texts: Vec<String> = conn
        .prepare(
            "SELECT s.session_id || ': ' || v.text FROM v_message_text v
               JOIN sessions s ON s.file_id = v.file_id
              WHERE s.file_path LIKE '%--home-u-odd--%' ORDER BY 1",
        )
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .expect("the odd sessions' texts");
    assert_eq!(
        odd_texts,
        [
            "blocks: kept\nand this",
            "surrogate: lone \u{fffd} and \u{1F600}"
        ],
        "{odd_texts:#?}"
    );
    crate::util::fts_integrity(&env.db);
}
