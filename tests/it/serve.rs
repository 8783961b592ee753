//! `piidx serve`: the JSON API against the CLI's `--json` on the same
//! database (byte for byte), the pages in a real headless Chromium driven
//! over the DevTools protocol (a small client on tungstenite: type a
//! query, open the hit, switch to the tree, see the usage chart, session
//! text with `<script>` shown as text), live updates with `--watch`, and
//! remote binding refused without a token.
//!
//! Every wait is a bounded poll for an expected outcome.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use crate::util::{Env, write_user_session};

/// The longest any expected outcome is waited for.
const PATIENCE: Duration = Duration::from_secs(30);

const CHROMIUM: &str = "/usr/bin/chromium";

/// A running `piidx serve`, killed on drop.
pub(crate) struct Served {
    child: Child,
    addr: String,
    /// What the server printed before serving: its address, and the token
    /// it made when given `--allow-remote` alone.
    banner: String,
}

impl Served {
    /// Starts `piidx serve --addr 127.0.0.1:0 ARGS` and reads the address
    /// it prints first.
    pub(crate) fn start(env: &Env, args: &[&str]) -> Served {
        Served::start_with(env, args, &[])
    }

    /// `start` with environment variables.
    fn start_with(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Served {
        let mut all = vec!["serve", "--addr", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut child = env
            .command(&all)
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start piidx serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the address");
        let addr = line
            .trim()
            .strip_prefix("piidx serve: listening on http://")
            .and_then(|rest| rest.strip_suffix('/'))
            .unwrap_or_else(|| panic!("first line: {line:?}"))
            .to_owned();
        let mut banner = line;
        if args.contains(&"--allow-remote") && !args.contains(&"--token") {
            stdout.read_line(&mut banner).expect("read the token");
        }
        std::thread::spawn(move || for _ in stdout.lines() {});
        Served {
            child,
            addr,
            banner,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `GET path`: status, head, body.
    pub(crate) fn get(&self, path: &str, headers: &[&str]) -> (u16, String, Vec<u8>) {
        http_get(&self.addr, path, headers)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET with `Connection: close`.
fn http_get(addr: &str, path: &str, headers: &[&str]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect to serve");
    stream
        .set_read_timeout(Some(PATIENCE))
        .expect("read timeout");
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).expect("send request");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read response");
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let body = bytes[split + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, head, body)
}

/// The CLI's stdout for ARGS (exit 0 or 1: `search` exits 1 on no hits).
fn cli(env: &Env, args: &[&str]) -> Vec<u8> {
    let out = env.run(args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "piidx {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The fixture sessions, the subagent fixtures and a session whose user
/// message holds a script, indexed.
fn indexed() -> (Env, String) {
    let env = Env::with_fixture("sessions");
    crate::util::copy_tree(&crate::util::fixtures().join("subagents"), &env.root);
    let xss = "019d0000-0000-7000-8000-00000000bad1";
    write_user_session(
        &env.root.join("--home-user-xss--"),
        xss,
        json!(
            "look at this xsstoken <script>window.pwned=1</script> <img src=x onerror=\"window.pwned=2\">"
        ),
    );
    env.sync();
    (env, xss.to_owned())
}

#[test]
fn api_answers_equal_the_cli_json() {
    let (env, _) = indexed();
    let served = Served::start(&env, &[]);
    let show_id = "019c3fae";
    let pairs: Vec<(&str, Vec<&str>)> = vec![
        ("/api/search?q=build", vec!["search", "build", "--json"]),
        (
            "/api/search?q=build&limit=3&sort=recent",
            vec!["search", "build", "-n", "3", "--sort", "recent", "--json"],
        ),
        (
            "/api/search?q=build&role=bash&role=user",
            vec![
                "search", "build", "--role", "bash", "--role", "user", "--json",
            ],
        ),
        (
            "/api/search?q=build&project=proj-b&since=2026-02-09",
            vec![
                "search",
                "build",
                "--project",
                "proj-b",
                "--since",
                "2026-02-09",
                "--json",
            ],
        ),
        (
            "/api/search?q=build&sessions=1",
            vec!["search", "build", "-l", "--json"],
        ),
        (
            "/api/search?q=pars&substring=1",
            vec!["search", "pars", "--substring", "--json"],
        ),
        (
            "/api/search?q=nothingmatchesthis",
            vec!["search", "nothingmatchesthis", "--json"],
        ),
        ("/api/sessions", vec!["sessions", "--json"]),
        (
            "/api/sessions?all=1&project=proj-a",
            vec!["sessions", "--all", "--project", "proj-a", "--json"],
        ),
        ("/api/sessions/019c3fae", vec!["show", show_id, "--json"]),
        (
            "/api/sessions/019c3fae/tree",
            vec!["tree", show_id, "--json"],
        ),
        ("/api/subagents", vec!["subagents", "--json"]),
        (
            "/api/subagents?subagent=worker&agent=pi",
            vec![
                "subagents",
                "--agent",
                "worker",
                "--coding-agent",
                "pi",
                "--json",
            ],
        ),
        ("/api/usage", vec!["usage", "--json"]),
        (
            "/api/usage?by=week",
            vec!["usage", "--by", "week", "--json"],
        ),
        (
            "/api/usage?by=month",
            vec!["usage", "--by", "month", "--json"],
        ),
        (
            "/api/usage?by=model",
            vec!["usage", "--by", "model", "--json"],
        ),
        (
            "/api/usage?by=project",
            vec!["usage", "--by", "project", "--json"],
        ),
        ("/api/tools", vec!["tools", "--json"]),
        (
            "/api/tools?by=project",
            vec!["tools", "--by", "project", "--json"],
        ),
    ];
    for (path, args) in pairs {
        let (status, head, body) = served.get(path, &[]);
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        assert!(head.contains("application/json"), "{path}: {head}");
        let expected = cli(&env, &args);
        assert!(
            !expected.is_empty() && body == expected,
            "{path} differs from piidx {args:?}:\n{}\n---\n{}",
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&expected)
        );
    }
    // A show of a branch, and a session named by its file path.
    let tree: Value = serde_json::from_slice(&cli(&env, &["tree", show_id, "--json"])).unwrap();
    let first = tree["entries"][0]["id"].as_str().unwrap().to_owned();
    let path = tree["path"].as_str().unwrap().to_owned();
    let (_, _, body) = served.get(&format!("/api/sessions/{show_id}?branch={first}"), &[]);
    assert_eq!(
        body,
        cli(&env, &["show", show_id, "--branch", &first, "--json"])
    );
    let encoded: String = form_encode(&path);
    let (status, _, body) = served.get(&format!("/api/sessions/{encoded}/tree"), &[]);
    assert_eq!(status, 200);
    assert_eq!(body, cli(&env, &["tree", &path, "--json"]));
    // The search's time is reported.
    let (_, head, _) = served.get("/api/search?q=build", &[]);
    assert!(head.contains("Server-Timing: query;dur="), "{head}");
    // Mistakes are the caller's, with a message.
    let (status, _, body) = served.get("/api/search?q=build&role=nobody", &[]);
    assert_eq!(status, 400);
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("unknown role"));
    let (status, _, _) = served.get("/api/sessions/ffffffff", &[]);
    assert_eq!(status, 404);
    let (status, _, _) = served.get("/api/search", &[]);
    assert_eq!(status, 400);
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn remote_addresses_need_a_token() {
    let (env, _) = indexed();
    let out = env.run(&["serve", "--addr", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    // Weak tokens are refused, whatever the address.
    for weak in [
        "a",
        " ",
        "s3cret",
        "aaaaaaaaaaaaaaaaaaaaaaaa",
        "correct horse battery staple",
    ] {
        let out = env.run(&["serve", "--addr", "127.0.0.1:0", "--token", weak]);
        assert_eq!(out.status.code(), Some(2), "{weak:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("too weak"), "{weak:?}: {stderr}");
    }
    let out = env
        .command(&["serve", "--addr", "127.0.0.1:0", "--allow-remote"])
        .env("PIIDX_SERVE_TOKEN", "short")
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(2));
    // --allow-remote without a token: piidx makes one, prints it, and
    // every request needs it.
    let made = Served::start(&env, &["--allow-remote"]);
    let token = made
        .banner
        .lines()
        .find_map(|line| line.strip_prefix("piidx serve: token "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the made token is printed")
        .to_owned();
    assert_eq!(token.len(), 64, "{}", made.banner);
    let (status, _, _) = made.get("/api/sessions", &[]);
    assert_eq!(status, 401);
    let (status, _, _) = made.get(
        "/api/sessions",
        &[&format!("Authorization: Bearer {token}")],
    );
    assert_eq!(status, 200);
    // With a token (on loopback here: the check is the same), every request
    // needs it; the scheme is case-insensitive (RFC 9110).
    let secret = "s3cret-Token-0123";
    let served = Served::start(&env, &["--token", secret]);
    let (status, _, _) = served.get("/api/sessions", &[]);
    assert_eq!(status, 401);
    let (status, _, _) = served.get("/api/sessions", &["Authorization: Bearer wrong"]);
    assert_eq!(status, 401);
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let header = format!("Authorization: {scheme} {secret}");
        let (status, _, _) = served.get("/api/sessions", &[&header]);
        assert_eq!(status, 200, "{header}");
    }
    let (status, _, _) = served.get(
        "/api/sessions",
        &[&format!("Authorization: Basic {secret}")],
    );
    assert_eq!(status, 401);
    let (status, head, _) = served.get(&format!("/sessions?token={secret}"), &[]);
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("Set-Cookie: piidx_token={secret}")),
        "{head}"
    );
    let (status, _, _) = served.get("/sessions", &[&format!("Cookie: piidx_token={secret}")]);
    assert_eq!(status, 200);
    // Without a token, only loopback host names are answered (DNS rebinding).
    let open = Served::start(&env, &[]);
    let (status, _, _) = open.get("/api/sessions", &["Host: evil.example:80"]);
    assert_eq!(status, 403);
    let (status, _, _) = open.get("/api/sessions", &["Host: localhost"]);
    assert_eq!(status, 200);
}

/// Headless Chromium and one page of it, driven over the DevTools protocol.
struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless",
                // Root in CI has no user namespaces for the sandbox.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium (apt-get install chromium)");
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = tx.send(line[at..].trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(PATIENCE)
            .expect("chromium printed its DevTools address");
        let (ws, _) = tungstenite::connect(url.as_str()).expect("connect to DevTools");
        if let MaybeTlsStream::Plain(stream) = ws.get_ref() {
            stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
        }
        let mut browser = Browser {
            child,
            ws,
            session: String::new(),
            next_id: 0,
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().expect("targetId").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("sessionId")
            .to_owned();
        browser.call("Page.enable", json!({}));
        browser.call("Runtime.enable", json!({}));
        browser
    }

    /// Sends a command (to the page once attached) and waits for its answer.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|error| panic!("{method}: {error}"))
    }

    /// `call`, its DevTools error returned.
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .expect("send to DevTools");
        loop {
            let reply = self.ws.read().expect("read from DevTools");
            let Message::Text(text) = reply else {
                continue;
            };
            let value: Value = serde_json::from_str(text.as_str()).expect("DevTools JSON");
            if value["id"] == json!(id) {
                return match value.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(value["result"].clone()),
                };
            }
        }
    }

    /// The value of a JavaScript expression in the page (promises awaited).
    fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression)
            .unwrap_or_else(|error| panic!("Runtime.evaluate: {error}"))
    }

    /// `eval`, with DevTools' error returned: an expression evaluated while
    /// the page navigates (after a click on a link) fails with "Inspected
    /// target navigated or closed", which `wait_for` waits past.
    fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        let result = self.try_call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("{expression}: {exception}");
        }
        Ok(result["result"]["value"].clone())
    }

    /// Waits until `expression` is truthy (through navigations); panics with
    /// `what` after PATIENCE.
    fn wait_for(&mut self, expression: &str, what: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = match self.try_eval(&format!(
                "(() => {{ try {{ return {expression}; }} catch (e) {{ return null; }} }})()"
            )) {
                Ok(value) => value,
                // The page is between two documents: not there yet.
                Err(error) if is_navigating(&error) => Value::Null,
                Err(error) => panic!("Runtime.evaluate: {error}"),
            };
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return value;
            }
            assert!(Instant::now() < deadline, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn open(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        let target = url.to_owned();
        self.wait_for(
            &format!(
                "document.readyState === 'complete' && location.href.startsWith({}) && document.body.dataset.live !== undefined",
                json!(target.split('#').next().unwrap_or(&target))
            ),
            &format!("{url} to load"),
        );
    }

    /// Types `text` into the focused field as keystrokes would.
    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.call("Input.insertText", json!({"text": c.to_string()}));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A DevTools error saying the page navigated away from the document an
/// evaluation ran in.
fn is_navigating(error: &Value) -> bool {
    let message = error["message"].as_str().unwrap_or_default();
    message.contains("navigated or closed")
        || message.contains("Execution context was destroyed")
        || message.contains("Cannot find context")
}

fn js(text: &str) -> String {
    json!(text).to_string()
}

#[test]
fn pages_in_a_headless_browser() {
    let (env, xss) = indexed();
    let served = Served::start(&env, &[]);
    let mut browser = Browser::start();

    // Search as you type: the CLI's best hit comes first.
    let expected: Vec<Value> =
        serde_json::from_slice(&cli(&env, &["search", "deprecation", "--json"])).unwrap();
    let best = &expected[0];
    let (session, entry) = (
        best["session_id"].as_str().unwrap(),
        best["entry_id"].as_str().unwrap(),
    );
    browser.open(&served.url("/search"));
    browser.eval("document.querySelector('#q').focus()");
    browser.type_text("deprecation");
    browser.wait_for(
        "document.querySelectorAll('#results .hit').length",
        "the hits",
    );
    let count = browser.eval("document.querySelectorAll('#results .hit').length");
    assert_eq!(count, json!(expected.len()));
    let href = browser.eval("document.querySelector('#results .hit a.title').getAttribute('href')");
    let href = href.as_str().unwrap().to_owned();
    assert!(
        href.starts_with(&format!("/s/{session}?at={entry}")),
        "{href}"
    );
    let marked = browser.eval("document.querySelector('#results .hit mark').textContent");
    assert_eq!(
        marked.as_str().map(str::to_lowercase).as_deref(),
        Some("deprecation")
    );
    assert!(
        browser
            .eval("location.search")
            .as_str()
            .unwrap()
            .contains("q=deprecation")
    );

    // Open the hit: its entry is on the page, in the transcript.
    browser.eval("document.querySelector('#results .hit a.title').click()");
    browser.wait_for(
        &format!(
            "location.pathname.startsWith('/s/') && document.getElementById({}) !== null",
            js(&format!("e-{entry}"))
        ),
        "the session page with the hit's entry",
    );
    assert_eq!(
        browser.eval("document.querySelector('#transcript').offsetParent !== null"),
        json!(true)
    );
    // Switch to the tree: every entry of `piidx tree` is a row.
    let tree: Value = serde_json::from_slice(&cli(&env, &["tree", session, "--json"])).unwrap();
    let entries = tree["entries"].as_array().unwrap().len();
    browser.eval("document.querySelector('[data-tab=tree]').click()");
    browser.wait_for(
        "document.querySelector('#tree').offsetParent !== null && document.querySelector('#transcript').offsetParent === null",
        "the tree tab",
    );
    browser.wait_for(
        &format!("document.querySelectorAll('#tree .node').length === {entries}"),
        "every entry of the tree",
    );
    assert!(
        browser
            .eval("location.search")
            .as_str()
            .unwrap()
            .contains("view=tree")
    );
    // Opened on its tree, the page fetches the transcript when asked.
    browser.open(&served.url(&format!("/s/{session}?view=tree")));
    assert_eq!(
        browser.eval("document.querySelectorAll('#tree .node').length"),
        json!(entries)
    );
    browser.eval("document.querySelector('[data-tab=transcript]').click()");
    browser.wait_for(
        "document.querySelectorAll('#transcript .msg').length > 0 && document.querySelector('#tree').offsetParent === null",
        "the transcript fetched on its tab",
    );

    // Usage: the charts are drawn with one bar per day of `usage --json`.
    let days: Vec<Value> = serde_json::from_slice(&cli(&env, &["usage", "--json"])).unwrap();
    assert!(!days.is_empty());
    browser.open(&served.url("/usage"));
    browser.wait_for(
        "document.querySelectorAll('svg.chart[data-chart=cost] rect').length",
        "the cost chart",
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('svg.chart[data-chart=cost] rect').length"),
        json!(days.len())
    );
    assert_eq!(
        browser.eval("document.querySelector('svg.chart[data-chart=cost]').getBoundingClientRect().height > 50"),
        json!(true)
    );
    // A real time axis: labels with their year, days without usage as gaps
    // (bars further apart than one slot where days are missing).
    let first_label = browser.eval(
        "document.querySelector('svg.chart[data-chart=cost] text[text-anchor=middle]').textContent",
    );
    assert!(
        first_label
            .as_str()
            .is_some_and(|l| l.len() == 10 && l.starts_with("20")),
        "{first_label}"
    );
    let xs = browser.eval("Array.from(document.querySelectorAll('svg.chart[data-chart=cost] rect')).map(r => Number(r.getAttribute('x')))");
    let xs: Vec<f64> = xs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let steps: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
    let smallest = steps.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        steps.iter().any(|step| *step > smallest * 1.5),
        "gaps between days without usage: {steps:?}"
    );
    assert!(
        browser
            .eval("document.querySelectorAll('table.tools tbody tr').length")
            .as_u64()
            .unwrap()
            > 0
    );

    // A message holding a script is shown as text, and nothing runs.
    browser.open(&served.url("/search?q=xsstoken"));
    browser.wait_for(
        "document.querySelectorAll('#results .hit').length",
        "the xss hit",
    );
    browser.open(&served.url(&format!("/s/{xss}")));
    let text = browser.wait_for(
        "document.querySelector('#transcript .msg.user .text').textContent",
        "the user message",
    );
    assert!(
        text.as_str()
            .unwrap()
            .contains("<script>window.pwned=1</script>"),
        "{text}"
    );
    assert_eq!(browser.eval("typeof window.pwned"), json!("undefined"));
    assert_eq!(
        browser.eval("document.querySelectorAll('main script, main img[src=x]').length"),
        json!(0)
    );
    browser.open(&served.url("/search?q=xsstoken"));
    browser.wait_for(
        "document.querySelectorAll('#results .hit').length",
        "the xss hit",
    );
    assert_eq!(browser.eval("typeof window.pwned"), json!("undefined"));
    assert!(
        browser
            .eval("document.querySelector('#results .snip').textContent")
            .as_str()
            .unwrap()
            .contains("<script>")
    );

    // Images are served from the index; subagent transcripts are nested
    // under their tool call.
    browser.open(&served.url("/s/019c165b"));
    browser.wait_for(
        "document.querySelector('#transcript img.img') && document.querySelector('#transcript img.img').complete && document.querySelector('#transcript img.img').naturalWidth > 0",
        "the session's image",
    );
    browser.open(&served.url("/s/0191a0b0-0000-7000-8000-00000000a001"));
    let nested = browser.eval("document.querySelectorAll('#transcript details.sub .msg').length");
    assert!(
        nested.as_u64().unwrap() > 0,
        "no nested subagent transcript"
    );

    // The session list is Pi's order (`sessions --json`).
    let sessions: Vec<Value> = serde_json::from_slice(&cli(&env, &["sessions", "--json"])).unwrap();
    browser.open(&served.url("/sessions"));
    let first =
        browser.eval("document.querySelector('table.sessions tbody tr a').getAttribute('href')");
    assert_eq!(
        first.as_str().unwrap(),
        format!("/s/{}", sessions[0]["id"].as_str().unwrap())
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('table.sessions tbody tr').length"),
        json!(sessions.len())
    );

    // A hit opens its whole branch, not the branch cut at the hit: the
    // tool call's result and what came after are on the page too.
    let hits: Vec<Value> =
        serde_json::from_slice(&cli(&env, &["search", "whole build log", "--json"])).unwrap();
    let (in_session, hit) = (
        hits[0]["session_id"].as_str().unwrap(),
        hits[0]["entry_id"].as_str().unwrap(),
    );
    let branch: Value =
        serde_json::from_slice(&cli(&env, &["show", in_session, "--json"])).unwrap();
    let ids: Vec<&str> = branch
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["id"].as_str())
        .collect();
    let at = ids
        .iter()
        .position(|id| *id == hit)
        .expect("the hit is on the branch");
    assert!(at + 1 < ids.len(), "the hit is not the branch's last entry");
    browser.open(&served.url("/search?q=whole+build+log"));
    browser.eval("document.querySelector('#results .hit a.title').click()");
    let last = ids[ids.len() - 1];
    browser.wait_for(
        &format!(
            "document.getElementById({}) !== null",
            js(&format!("e-{last}"))
        ),
        "the branch past the hit, to its last entry",
    );
    assert_eq!(
        browser.eval("document.querySelector('#transcript').textContent.includes('no result')"),
        json!(false)
    );

    // The word being typed is a prefix, as in the picker; `/` focuses the
    // box, j and Enter open the first hit.
    browser.open(&served.url("/search"));
    browser.eval("document.querySelector('#q').blur()");
    browser.eval("document.dispatchEvent(new KeyboardEvent('keydown', {key: '/', bubbles: true}))");
    assert_eq!(browser.eval("document.activeElement.id"), json!("q"));
    browser.type_text("deprecat");
    let prefixed: Vec<Value> =
        serde_json::from_slice(&cli(&env, &["search", "deprecat*", "--json"])).unwrap();
    assert!(!prefixed.is_empty());
    browser.wait_for(
        &format!(
            "document.querySelectorAll('#results .hit').length === {}",
            prefixed.len()
        ),
        "the hits of the word being typed",
    );
    browser.eval("document.querySelector('#q').blur()");
    browser.eval("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'j', bubbles: true}))");
    assert_eq!(
        browser.eval("document.querySelectorAll('#results .hit.sel').length"),
        json!(1)
    );
    let first =
        browser.eval("document.querySelector('#results .hit.sel a.title').getAttribute('href')");
    browser.eval(
        "document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true}))",
    );
    browser.wait_for(
        &format!(
            "location.pathname + location.search === {}",
            js(first.as_str().unwrap().split('#').next().unwrap())
        ),
        "the chosen hit opened",
    );

    // A page of hits says when there are more, and links to them.
    let all: Vec<Value> =
        serde_json::from_slice(&cli(&env, &["search", "the", "--json", "-n", "500"])).unwrap();
    assert!(all.len() > 3);
    browser.open(&served.url("/search?q=the&limit=2"));
    assert_eq!(
        browser.eval("document.querySelectorAll('#results .hit').length"),
        json!(2)
    );
    assert!(
        browser
            .eval("document.querySelector('#results .count').textContent")
            .as_str()
            .unwrap()
            .starts_with("2+ hits")
    );
    browser.eval("document.querySelector('#more').click()");
    browser.wait_for(
        &format!(
            "document.querySelectorAll('#results .hit').length === {}",
            all.len().min(22)
        ),
        "more hits",
    );
}

/// The last entry id of a session file.
fn last_id(file: &Path) -> String {
    let text = fs::read_to_string(file).expect("read fixture");
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .expect("a line");
    let value: Value = serde_json::from_str(last).expect("a JSON line");
    value["id"].as_str().expect("an id").to_owned()
}

#[test]
fn watch_pushes_new_hits_to_open_pages() {
    let (env, _) = indexed();
    let root = env.root.to_string_lossy().into_owned();
    let served = Served::start(&env, &["--watch", "--root", &root, "--debounce", "50"]);
    let mut browser = Browser::start();
    browser.open(&served.url("/search?q=zebracorn"));
    browser.wait_for(
        "document.body.dataset.subscribed === '1'",
        "the page to subscribe to events",
    );
    assert_eq!(
        browser.eval("document.querySelectorAll('#results .hit').length"),
        json!(0)
    );
    let file: PathBuf = env
        .root
        .join("--home-user-proj-b--")
        .join("2026-02-10T14-00-00-000Z_019c47da-1300-74f8-8e3e-8e2ce99f293c.jsonl");
    let parent = last_id(&file);
    let line = json!({"type": "message", "id": "feed0001", "parentId": parent,
        "timestamp": "2026-02-10T15:00:00.000Z",
        "message": {"role": "user", "content": "did the zebracorn build pass?", "timestamp": 1770735600000_i64}});
    let mut handle = fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("open fixture");
    writeln!(handle, "{line}").expect("append");
    drop(handle);
    browser.wait_for(
        "document.querySelectorAll('#results .hit').length === 1",
        "the appended line's hit on the open page",
    );
    let snippet = browser.eval("document.querySelector('#results .hit .snip').textContent");
    assert!(snippet.as_str().unwrap().contains("zebracorn"), "{snippet}");
    // The API sees it too, as the CLI does.
    let (_, _, body) = served.get("/api/search?q=zebracorn", &[]);
    assert_eq!(body, cli(&env, &["search", "zebracorn", "--json"]));
}

/// A search is bounded on the server too: 2,000 terms and 1,000 repeated
/// roles are a 400 (not a 500), parentheses nested 8,000 deep are
/// answered, and a search that runs to its budget (held
/// by `PIIDX_TEST_HOLD` until then) ends in a 400 naming the limit while
/// the worker left for pages answers one meanwhile (how many searches may
/// run at once: `serve::server`'s unit test).
#[test]
fn slow_or_huge_searches_do_not_hold_the_server() {
    let (env, _) = indexed();
    let served = Served::start(&env, &[]);
    let many = vec!["a*"; 2000].join("+");
    let (status, _, body) = served.get(&format!("/api/search?q={many}"), &[]);
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("at most 32"));
    let roles = "&role=user".repeat(1000);
    let (status, _, body) = served.get(&format!("/api/search?q=the{roles}"), &[]);
    assert!(
        status == 200 || status == 404,
        "{}",
        String::from_utf8_lossy(&body)
    );
    // The page says it where the hits would be.
    let (status, _, body) = served.get(&format!("/search?q={many}"), &[]);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("at most 32"));
    // Parentheses nested as deep as the longest query allows: once a
    // stack overflow that took the whole server down.
    let deep = format!("{}crate+name{}", "%28".repeat(8_000), "%29".repeat(8_000));
    let (status, _, body) = served.get(&format!("/api/search?q={deep}"), &[]);
    assert!(
        status == 200 || status == 404,
        "{status}: {}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, _) = served.get("/sessions", &[]);
    assert_eq!(status, 200, "the server still answers");

    let held = Served::start_with(&env, &["--threads", "3"], &[("PIIDX_TEST_HOLD", "search")]);
    let addr = held.addr.clone();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || http_get(&addr, "/api/search?q=the", &[]))
        })
        .collect();
    let (status, _, _) = held.get("/sessions", &[]);
    assert_eq!(status, 200);
    assert!(
        slow.iter().all(|s| !s.is_finished()),
        "the page was answered while both searches ran"
    );
    for search in slow {
        let (status, _, body) = search.join().expect("search thread");
        assert_eq!(status, 400);
        assert!(String::from_utf8_lossy(&body).contains("time limit"));
    }
}

/// The details a user meets on the pages: `/usage?by=model` (any grouping
/// the CLI takes) is a page, not a 400; tool times and sizes read as the
/// CLI prints them; a bash call reads `$ command`; a session whose cwd is
/// not on this machine says where Pi will start instead of `cd .`.
#[test]
fn pages_read_as_the_cli_does() {
    let (env, _) = indexed();
    let served = Served::start(&env, &[]);
    for by in ["model", "provider", "project", "session", "week"] {
        let (status, _, body) = served.get(&format!("/usage?by={by}"), &[]);
        assert_eq!(status, 200, "by={by}: {}", String::from_utf8_lossy(&body));
    }
    let (_, _, body) = served.get("/usage", &[]);
    let body = String::from_utf8_lossy(&body);
    let tools = &body[body
        .find("<table class=\"tools\"")
        .expect("the tools table")..];
    assert!(!tools.contains("median ms"), "{tools}");
    assert!(
        tools.contains(" ms<") || tools.contains(" s<"),
        "durations with units: {tools}"
    );
    assert!(
        tools.contains(" B<") || tools.contains(" KB<") || tools.contains(" MB<"),
        "{tools}"
    );

    let (_, _, body) = served.get("/s/019c165b", &[]);
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("$ ls tests/"),
        "a bash call as a command line"
    );
    // The fixtures' cwds (/home/user/…) are not on this machine.
    assert!(!body.contains("cd . &amp;&amp;"), "{body}");
    assert!(
        body.contains("id=\"resume-why\""),
        "the resume box says why"
    );
    let resume = &body[body.find("id=\"resume\"").expect("resume box")..];
    assert!(
        resume.starts_with("id=\"resume\">pi --session "),
        "{}",
        &resume[..80]
    );
}

/// A search whose client goes away stops then, not at its budget: with no
/// budget at all (`--search-timeout 0`) and one worker, the held search
/// (`PIIDX_TEST_HOLD`) can free the worker only because its client closed
/// the connection; the next request is then answered (else it would wait
/// forever, and the read below gives up).
#[test]
fn a_search_stops_when_its_client_goes_away() {
    let (env, _) = indexed();
    let served = Served::start_with(
        &env,
        &["--threads", "1", "--search-timeout", "0"],
        &[("PIIDX_TEST_HOLD", "search")],
    );
    let mut gone = TcpStream::connect(&served.addr).expect("connect");
    write!(
        gone,
        "GET /api/search?q=the HTTP/1.1\r\nHost: {}\r\n\r\n",
        served.addr
    )
    .expect("send");
    gone.shutdown(std::net::Shutdown::Both).expect("hang up");
    drop(gone);
    let (status, _, _) = served.get("/sessions", &[]);
    assert_eq!(status, 200);
}
