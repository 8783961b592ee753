//! `piidx mcp`: a read-only Model Context Protocol server over stdio, a
//! front-end like the CLI: it calls `query` and shapes the answers as the
//! CLI's `--json` does (`render`), for a model instead of a terminal.
//!
//! `protocol` holds JSON-RPC and the revisions served, `tools` the tools
//! and their schemas, `page` the byte budget and cursors. This file is the
//! session: it reads one message per line (lines longer than
//! `MAX_LINE` are skipped unread and answered with an error), answers each
//! in turn, and ends when the client closes stdin. The lines are read on a
//! thread of their own, so that a `notifications/cancelled` for the call
//! being answered stops it at once (its search is interrupted, and no
//! answer is sent, as the protocol asks); every call also stops at its time
//! budget (`CALL_BUDGET`), so one call never holds the ones after it for
//! long.
//!
//! Hand-written on serde_json rather than an MCP crate: the protocol part
//! is a few hundred lines, and the crates (rmcp and others) bring tokio and
//! async plumbing into a program that is otherwise synchronous, for one
//! client at a time over a pipe. The server never writes to the index: it
//! opens it read-only for each call (see `tools`).

pub mod page;
pub mod protocol;
pub mod tools;

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::store::Stop;
use protocol::{
    HANDSHAKE_VERSIONS, INVALID_REQUEST, METHOD_NOT_FOUND, MODERN_VERSIONS, Message, PARSE_ERROR,
    RpcError,
};

/// How long one call may run before it is stopped with an error.
pub const CALL_BUDGET: Duration = crate::query::search::SEARCH_BUDGET;

/// The longest request line read: requests are small (tool arguments);
/// anything longer is skipped without being held in memory.
pub const MAX_LINE: usize = 1 << 20;

/// What the server is told at start.
#[derive(Debug, Clone)]
pub struct Options {
    pub db: PathBuf,
    /// Answer from this team store instead of the index (`mcp --pg`).
    pub team: Option<crate::query::source::Team>,
    /// Bytes of JSON per answer unless a call asks for another budget.
    pub budget: usize,
}

/// The protocol era a connection speaks, fixed by its first request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Era {
    /// `initialize` negotiated this revision.
    Handshake(String),
    /// Every request names 2026-07-28 in its `_meta`.
    Modern,
}

/// One client's connection.
pub struct Server {
    options: Options,
    era: Option<Era>,
    /// What the line reader and the answering share to cancel requests.
    cancels: Arc<Mutex<Cancels>>,
}

/// The request being answered and how to stop it, and the requests the
/// client cancelled before they were answered (the reader reads ahead).
#[derive(Default)]
struct Cancels {
    running: Option<(Value, Stop)>,
    early: std::collections::VecDeque<Value>,
}

/// Cancellations of requests not yet started that are remembered.
const EARLY_CANCELS: usize = 64;

impl Cancels {
    /// The client cancelled request `id`.
    fn cancel(&mut self, id: &Value) {
        match &self.running {
            Some((running, stop)) if running == id => stop.cancel(),
            _ => {
                if self.early.len() == EARLY_CANCELS {
                    self.early.pop_front();
                }
                self.early.push_back(id.clone());
            }
        }
    }

    /// Request `id` starts (`None`: it ended); cancelled already if the
    /// client said so before.
    fn start(&mut self, request: Option<(Value, Stop)>) {
        if let Some((id, stop)) = &request
            && let Some(at) = self.early.iter().position(|early| early == id)
        {
            self.early.remove(at);
            stop.cancel();
        }
        self.running = request;
    }
}

/// What the server tells a model about itself (`instructions`).
const INSTRUCTIONS: &str = "piidx indexes every Pi coding-agent session on this machine. Use `search` to find past work (words, \"phrases\", prefix*), then `get_session` (a session's branch or whole tree) or `get_entry` (one entry, or one long value by path) to read it; `list_sessions` lists sessions newest first; `usage` sums tokens and cost; `subagent_runs` lists delegated runs. Answers are bounded: pass `next_cursor` back as `cursor` for more.";

impl Server {
    pub fn new(options: Options) -> Server {
        Server {
            options,
            era: None,
            cancels: Arc::default(),
        }
    }

    /// Serves `input` until it ends; a failed write (the client went away)
    /// ends it too. `input` is read on a thread of its own (`read_lines`).
    pub fn serve(
        &mut self,
        input: &mut (impl BufRead + Send),
        output: &mut impl Write,
    ) -> io::Result<()> {
        // Few lines wait: a client that floods is slowed, not buffered.
        let (lines, received) = mpsc::sync_channel(16);
        let cancels = self.cancels.clone();
        std::thread::scope(|scope| {
            scope.spawn(move || read_lines(input, &lines, &cancels));
            let answered = self.answer_lines(&received, output);
            // Unblocks the reader if it waits to hand over a line.
            drop(received);
            answered
        })
    }

    /// Answers the lines `read_lines` hands over until the input ends.
    fn answer_lines(
        &mut self,
        received: &mpsc::Receiver<io::Result<(Line, Vec<u8>)>>,
        output: &mut impl Write,
    ) -> io::Result<()> {
        loop {
            let Ok(read) = received.recv() else {
                return Ok(());
            };
            let (read, line) = read?;
            let reply = match read {
                Line::End => return Ok(()),
                Line::TooLong(bytes) => Some(protocol::error_response(
                    &Value::Null,
                    &RpcError::new(
                        INVALID_REQUEST,
                        format!(
                            "a message of {bytes} bytes or more was skipped: the limit is {MAX_LINE} bytes per line"
                        ),
                    ),
                )),
                Line::Text => self.handle_line(&line),
            };
            if let Some(reply) = reply {
                serde_json::to_writer(&mut *output, &reply)?;
                output.write_all(b"\n")?;
                output.flush()?;
            }
        }
    }

    /// The reply to one line, if it needs one.
    pub fn handle_line(&mut self, line: &[u8]) -> Option<Value> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(err) => {
                return Some(protocol::error_response(
                    &Value::Null,
                    &RpcError::new(
                        PARSE_ERROR,
                        format!("not JSON ({err}); send one JSON-RPC message per line"),
                    ),
                ));
            }
        };
        match value {
            Value::Array(batch) if batch.is_empty() => Some(protocol::error_response(
                &Value::Null,
                &RpcError::new(INVALID_REQUEST, "an empty batch; send at least one message"),
            )),
            // 2025-03-26 allows batches; answer each message in one array.
            Value::Array(batch) => {
                let replies: Vec<Value> = batch
                    .into_iter()
                    .filter_map(|message| self.handle(message))
                    .collect();
                (!replies.is_empty()).then_some(Value::Array(replies))
            }
            message => self.handle(message),
        }
    }

    fn handle(&mut self, message: Value) -> Option<Value> {
        match protocol::parse(message) {
            Err(invalid) => Some(protocol::error_response(&invalid.0, &invalid.1)),
            // Notifications (initialized, cancelled, …) need no answer, and
            // requests are answered in order, so there is nothing to cancel.
            Ok(Message::Notification { .. } | Message::Response) => None,
            Ok(Message::Request { id, method, params }) => {
                let stop = Stop::after(CALL_BUDGET);
                self.set_running(Some((id.clone(), stop.clone())));
                let answer = self.request(&method, params, &stop);
                self.set_running(None);
                // A cancelled request gets no answer (the client has
                // forgotten it).
                if stop.is_cancelled() {
                    return None;
                }
                Some(match answer {
                    Ok(result) => protocol::response(&id, result),
                    Err(error) => protocol::error_response(&id, &error),
                })
            }
        }
    }

    fn set_running(&self, request: Option<(Value, Stop)>) {
        if let Ok(mut cancels) = self.cancels.lock() {
            cancels.start(request);
        }
    }

    fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        stop: &Stop,
    ) -> Result<Value, RpcError> {
        let modern = method != "initialize" && protocol::envelope(params.as_ref()).is_some();
        match (&self.era, modern) {
            (Some(Era::Handshake(_)), true) => {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    "this connection began with initialize; send requests without the 2026-07-28 _meta envelope, or open a new connection for that revision",
                ));
            }
            (Some(Era::Modern), false) if method == "initialize" => {
                let requested = params
                    .as_ref()
                    .and_then(|p| p.get("protocolVersion"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(RpcError::unsupported_version(
                    &requested,
                    &MODERN_VERSIONS,
                    "this connection speaks 2026-07-28 (per-request _meta), which has no initialize; keep sending _meta, or open a new connection to use initialize".into(),
                ));
            }
            (Some(Era::Modern), false) => {
                return Err(RpcError::invalid_params(format!(
                    "params._meta must name {:?} with {:?}: this connection speaks 2026-07-28",
                    protocol::META_PROTOCOL_VERSION,
                    MODERN_VERSIONS[0]
                )));
            }
            _ => {}
        }
        if modern {
            if let Some(meta) = protocol::envelope(params.as_ref()) {
                protocol::check_envelope(meta)?;
            }
            self.era = Some(Era::Modern);
        }
        let mut result = match method {
            "initialize" => self.initialize(params.as_ref())?,
            "ping" => json!({}),
            "server/discover" => self.discover(),
            "tools/list" => {
                let mut tools = tools::list();
                // Before 2025-06-18 there is no structuredContent, so no
                // output schema for a client to hold the answers to.
                if !self.structured() {
                    for tool in &mut tools {
                        if let Some(tool) = tool.as_object_mut() {
                            tool.remove("outputSchema");
                        }
                    }
                }
                let mut result = json!({"tools": tools});
                if modern {
                    result["ttlMs"] = json!(0);
                    result["cacheScope"] = json!("private");
                }
                result
            }
            "tools/call" => self.call_tool(params, stop)?,
            _ => {
                return Err(RpcError::new(
                    METHOD_NOT_FOUND,
                    format!(
                        "unknown method {method:?}; piidx mcp answers initialize, ping, server/discover, tools/list and tools/call (it has tools only, no resources or prompts)"
                    ),
                ));
            }
        };
        if modern && let Some(object) = result.as_object_mut() {
            object.insert("resultType".into(), "complete".into());
        }
        Ok(result)
    }

    fn server_info() -> Value {
        json!({
            "name": "piidx",
            "title": "piidx: Pi session history",
            "version": env!("CARGO_PKG_VERSION"),
        })
    }

    fn capabilities() -> Value {
        json!({"tools": {"listChanged": false}})
    }

    /// Answers the client's revision when it is one of ours, else our
    /// latest (the client then decides whether it can speak it).
    fn initialize(&mut self, params: Option<&Value>) -> Result<Value, RpcError> {
        let requested = params
            .and_then(|params| params.get("protocolVersion"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "initialize needs params.protocolVersion, one of {}",
                    HANDSHAKE_VERSIONS.join(", ")
                ))
            })?;
        let version = if HANDSHAKE_VERSIONS.contains(&requested) {
            requested
        } else {
            protocol::latest_handshake()
        };
        self.era = Some(Era::Handshake(version.to_owned()));
        Ok(json!({
            "protocolVersion": version,
            "capabilities": Self::capabilities(),
            "serverInfo": Self::server_info(),
            "instructions": INSTRUCTIONS,
        }))
    }

    fn discover(&self) -> Value {
        let versions: Vec<&str> = HANDSHAKE_VERSIONS
            .iter()
            .chain(MODERN_VERSIONS.iter())
            .copied()
            .collect();
        json!({
            "supportedVersions": versions,
            "capabilities": Self::capabilities(),
            "instructions": INSTRUCTIONS,
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {protocol::META_SERVER_INFO: Self::server_info()},
        })
    }

    /// Whether tool results carry `structuredContent` in this era.
    fn structured(&self) -> bool {
        match &self.era {
            Some(Era::Handshake(version)) => protocol::has_structured_content(version),
            _ => true,
        }
    }

    fn call_tool(&self, params: Option<Value>, stop: &Stop) -> Result<Value, RpcError> {
        let mut params = match params {
            Some(Value::Object(params)) => params,
            _ => Map::new(),
        };
        let name = match params.remove("name") {
            Some(Value::String(name)) => name,
            _ => {
                return Err(RpcError::invalid_params(
                    "tools/call needs params.name, a tool from tools/list",
                ));
            }
        };
        let context = tools::Context {
            db: &self.options.db,
            team: self.options.team.as_ref(),
            budget: self.options.budget,
            stop: stop.clone(),
        };
        let answer = tools::call(&context, &name, params.remove("arguments"))?;
        let text = serde_json::to_string(&answer).unwrap_or_default();
        let structured = self.structured();
        let mut result = json!({
            "content": [{"type": "text", "text": text}],
            "isError": false,
        });
        if structured {
            result["structuredContent"] = answer;
        }
        Ok(result)
    }
}

/// Reads `input` line by line and hands each to `lines`, until the input
/// ends, fails, or nobody receives; on the way, a `notifications/cancelled`
/// stops the request it names, running or still to come.
fn read_lines(
    input: &mut impl BufRead,
    lines: &mpsc::SyncSender<io::Result<(Line, Vec<u8>)>>,
    cancels: &Mutex<Cancels>,
) {
    loop {
        let mut line = Vec::new();
        let read = read_line(input, &mut line, MAX_LINE);
        let end = !matches!(read, Ok(Line::Text | Line::TooLong(_)));
        if matches!(read, Ok(Line::Text)) {
            cancel_if_asked(&line, cancels);
        }
        if lines.send(read.map(|read| (read, line))).is_err() || end {
            return;
        }
    }
}

/// Cancels the request `line` names if it is the client's
/// `notifications/cancelled`.
fn cancel_if_asked(line: &[u8], cancels: &Mutex<Cancels>) {
    // Cheap test first: most lines are not cancellations.
    if memchr::memmem::find(line, b"notifications/cancelled").is_none() {
        return;
    }
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let messages = match message {
        Value::Array(batch) => batch,
        one => vec![one],
    };
    let Ok(mut cancels) = cancels.lock() else {
        return;
    };
    for message in messages {
        if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
            continue;
        }
        if let Some(id) = message.get("params").and_then(|p| p.get("requestId")) {
            cancels.cancel(id);
        }
    }
}

/// What `read_line` found.
enum Line {
    /// A line (without its `\n`) is in the buffer.
    Text,
    /// A line of at least this many bytes was skipped.
    TooLong(usize),
    /// The input ended.
    End,
}

/// Reads the next line into `line`, or skips it (reading on to its end,
/// keeping nothing) when it is longer than `max` bytes. A last line without
/// `\n` counts.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    line.clear();
    let mut skipped: Option<usize> = None;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buffer.is_empty() {
            return Ok(match skipped {
                Some(bytes) => Line::TooLong(bytes),
                None if line.is_empty() => Line::End,
                None => Line::Text,
            });
        }
        let (part, used, done) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (&buffer[..at], at + 1, true),
            None => (buffer, buffer.len(), false),
        };
        match &mut skipped {
            Some(bytes) => *bytes += part.len(),
            None if line.len() + part.len() > max => {
                skipped = Some(line.len() + part.len());
                line.clear();
                line.shrink_to(4096);
            }
            None => line.extend_from_slice(part),
        }
        input.consume(used);
        if done {
            return Ok(match skipped {
                Some(bytes) => Line::TooLong(bytes),
                None => Line::Text,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Server {
        Server::new(Options {
            db: PathBuf::from("/nonexistent/piidx-test.db"),
            team: None,
            budget: page::DEFAULT_BUDGET,
        })
    }

    fn reply(server: &mut Server, line: &str) -> Value {
        server.handle_line(line.as_bytes()).expect("a reply")
    }

    #[test]
    fn lines_are_bounded() {
        let input = format!("{}\n{{\"a\":1}}\nlast", "x".repeat(100));
        let mut reader = io::BufReader::with_capacity(16, input.as_bytes());
        let mut line = Vec::new();
        assert!(matches!(
            read_line(&mut reader, &mut line, 50),
            Ok(Line::TooLong(100))
        ));
        assert!(matches!(
            read_line(&mut reader, &mut line, 50),
            Ok(Line::Text)
        ));
        assert_eq!(line, b"{\"a\":1}");
        assert!(matches!(
            read_line(&mut reader, &mut line, 50),
            Ok(Line::Text)
        ));
        assert_eq!(line, b"last");
        assert!(matches!(
            read_line(&mut reader, &mut line, 50),
            Ok(Line::End)
        ));
    }

    #[test]
    fn initialize_negotiates() {
        for (asked, got) in [
            ("2025-06-18", "2025-06-18"),
            ("2024-11-05", "2024-11-05"),
            ("2026-07-28", "2025-11-25"),
            ("1999-01-01", "2025-11-25"),
        ] {
            let mut server = server();
            let answer = reply(
                &mut server,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{asked}","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
                ),
            );
            assert_eq!(answer["result"]["protocolVersion"], got, "{asked}");
        }
    }

    #[test]
    fn eras_do_not_mix() {
        let mut server = server();
        let modern = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let answer = reply(&mut server, modern);
        assert_eq!(answer["result"]["resultType"], "complete");
        let init = r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#;
        assert_eq!(
            reply(&mut server, init)["error"]["code"],
            protocol::UNSUPPORTED_PROTOCOL_VERSION
        );
        let mut server = self::server();
        reply(&mut server, init);
        assert_eq!(reply(&mut server, modern)["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn bad_messages_get_errors() {
        let mut server = server();
        assert_eq!(reply(&mut server, "{nope")["error"]["code"], PARSE_ERROR);
        assert_eq!(reply(&mut server, "[]")["error"]["code"], INVALID_REQUEST);
        assert_eq!(
            reply(&mut server, r#"{"jsonrpc":"2.0","id":1,"method":"nope"}"#)["error"]["code"],
            METHOD_NOT_FOUND
        );
        assert!(
            server
                .handle_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .is_none()
        );
        let batch = reply(
            &mut server,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]"#,
        );
        assert_eq!(batch, json!([{"jsonrpc": "2.0", "id": 1, "result": {}}]));
    }
}
