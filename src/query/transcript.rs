//! A branch as typed blocks: what every transcript renderer formats.
//!
//! `tree::build_context` gives Pi's context as messages (raw JSON, as Pi
//! puts them into the model's context); this module reads that JSON once
//! and turns each message into a `Block`: a user or developer message, an
//! assistant's answer with its tool calls (each with its result, when the
//! branch holds one), a bash or Python execution, a compaction or branch
//! summary, a custom message, a system prompt, a file mention, and a note
//! for an entry that gives the model no message (a label, a model or
//! thinking-level change, a title…). Images carry where their bytes are:
//! stored in the index, kept outside the session file (`crate::outside`),
//! or nowhere known.
//!
//! The terminal and Markdown transcript (`render::transcript`) and the web
//! page (`serve`) only format blocks, so a new role is added here, once:
//! a variant of `Body`, read in `message_body`. Roles of other Pi lines are
//! read here too: oh-my-pi's `developer`, `pythonExecution` and
//! `fileMention`, pi_agent_rust's `branchSummary` and `compactionSummary`
//! message roles.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::tree::{ContextItem, ContextKind, SessionTree, build_context, describe, project};

/// The session a transcript belongs to, from its header.
#[derive(Debug, Clone, Serialize)]
pub struct Head {
    pub session_id: String,
    pub path: String,
    /// `cwd` as written ("" when absent).
    pub cwd: String,
    /// The header's `timestamp`.
    pub created: Option<String>,
    /// `parentSession` as written.
    pub parent_session: Option<String>,
}

impl Head {
    pub fn of(tree: &SessionTree) -> Head {
        let header = &tree.header;
        Head {
            session_id: tree.session.session_id.clone(),
            path: tree.session.path.clone(),
            cwd: str_of(header, "cwd").to_owned(),
            created: string(header, "timestamp"),
            parent_session: string(header, "parentSession"),
        }
    }
}

/// One block of a transcript: what an entry gives (an entry can give two:
/// a compaction's kept system prompt and its summary).
#[derive(Debug, Clone, Serialize)]
pub struct Block {
    /// The entry's index in the tree's nodes.
    #[serde(skip)]
    pub node: usize,
    pub entry_id: String,
    /// The message's own time, else the entry's.
    pub time_ms: Option<i64>,
    /// The entry's latest label.
    pub label: Option<String>,
    /// The `context_edit` entry that replaced this message's content.
    pub edited_by: Option<String>,
    #[serde(flatten)]
    pub body: Body,
}

/// What a block holds.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Body {
    /// A system prompt; `checkpoint`: the one a compaction keeps.
    System(SystemPrompt),
    Compaction {
        summary: String,
        tokens_before: i64,
    },
    BranchSummary {
        summary: String,
    },
    User {
        content: Vec<Part>,
    },
    /// oh-my-pi's `developer` message.
    Developer {
        content: Vec<Part>,
    },
    /// A `custom_message` entry or a `custom` role message.
    Custom {
        custom_type: String,
        content: Vec<Part>,
    },
    Assistant(Assistant),
    /// A tool result that is not shown under its call.
    ToolResult(ToolResult),
    /// `bashExecution`: a command the user ran.
    Bash(Execution),
    /// oh-my-pi's `pythonExecution` (`code` in `command`).
    Python(Execution),
    /// oh-my-pi's `fileMention`: files put into the context.
    FileMention {
        files: Vec<MentionedFile>,
    },
    /// A message of a role no variant above knows.
    Other {
        role: String,
        content: Vec<Part>,
    },
    /// An entry on the branch that gives the model no message (a label, a
    /// context edit, a model or thinking-level change, a name, an entry
    /// type piidx does not know): its type and one-line summary.
    Note {
        entry_type: String,
        summary: String,
    },
}

/// A system prompt: its text, or its sections and tools (Pi 1.x).
#[derive(Debug, Clone, Serialize)]
pub struct SystemPrompt {
    pub checkpoint: bool,
    pub content: Option<String>,
    pub sections: Vec<Section>,
    pub tools_added: Vec<String>,
    /// The size of `toolsAdded` as JSON.
    pub tools_added_bytes: usize,
    pub tools_removed: Vec<String>,
}

/// A system prompt's section; `text` is `None` when a later one removed it.
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub name: String,
    pub text: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Assistant {
    pub model: String,
    /// Text, thinking and images (its tool calls are in `calls`).
    pub content: Vec<Part>,
    pub calls: Vec<ToolCall>,
    /// `errorMessage`.
    pub error: Option<String>,
    pub usage: Option<Usage>,
}

/// An answer's usage, as the page shows it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    pub total_tokens: i64,
    pub cost: f64,
}

/// A tool call with its result when the branch holds one.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Option<Value>,
    pub result: Option<ToolResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    #[serde(skip)]
    pub node: usize,
    pub entry_id: String,
    pub tool_name: String,
    pub is_error: bool,
    pub edited_by: Option<String>,
    /// Its content: text, images, and any other block by its type.
    pub content: Vec<Part>,
    /// The subagent runs it records (`details.results[]`) with their messages.
    pub runs: Vec<Run>,
}

/// A subagent run a tool result records, with its transcript.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Its place in `details.results` (from 0).
    pub position: usize,
    pub agent: Option<String>,
    pub task: String,
    pub messages: Vec<NestedMessage>,
}

/// A subagent's own message (no entry, no id).
#[derive(Debug, Clone, Serialize)]
pub struct NestedMessage {
    pub role: String,
    pub model: String,
    pub tool_name: String,
    /// Text, thinking and images (not for a tool result: see `output`).
    pub content: Vec<Part>,
    pub calls: Vec<ToolCall>,
    /// A tool result's text.
    pub output: String,
}

/// `bashExecution` or `pythonExecution`.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    pub command: String,
    pub exit_code: Option<i64>,
    pub output: String,
}

/// A file of a `fileMention`.
#[derive(Debug, Clone, Serialize)]
pub struct MentionedFile {
    pub path: String,
    pub content: Option<String>,
    pub skipped_reason: Option<String>,
}

/// A content block.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    /// Thinking (`[redacted thinking]` when redacted).
    Thinking {
        text: String,
    },
    Image(Image),
    /// A block of another type (`None`: no type), shown by its type.
    Other {
        block_type: Option<String>,
    },
}

/// An image block and where its bytes are.
#[derive(Debug, Clone, Serialize)]
pub struct Image {
    /// The block's `mimeType`.
    pub mime: Option<String>,
    /// Its payload, stored in the index.
    pub stored: Option<StoredImage>,
    /// Kept outside the session file (omp's blob store, the port's `.blobs/`).
    pub outside: Option<OutsideImage>,
}

/// An image payload the index keeps: entry rowid and JSON path find it.
#[derive(Debug, Clone, Serialize)]
pub struct StoredImage {
    pub rowid: i64,
    pub path: String,
    pub mime_type: Option<String>,
    pub byte_len: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OutsideImage {
    /// The sha256 digest that names it.
    pub hex: String,
    /// What it is shown as (size and file, or missing).
    pub placeholder: Option<String>,
    /// Its bytes are there to be read.
    pub found: bool,
}

/// The branch `path` (root → leaf) as Pi's context sees it: tool results
/// under their calls, and a note for each entry on the branch that gives
/// no message, after the message before it (those a compaction
/// summarises are left out with it).
pub fn branch(tree: &SessionTree, path: &[usize]) -> Vec<Block> {
    let items = build_context(tree, path);
    let mut results: HashMap<&str, &ContextItem> = HashMap::new();
    for item in &items {
        if item.kind == ContextKind::Message
            && role(&item.message) == "toolResult"
            && let Some(id) = item.message.get("toolCallId").and_then(Value::as_str)
        {
            results.entry(id).or_insert(item);
        }
    }
    let in_context: HashSet<usize> = items.iter().map(|i| i.node).collect();
    let position: HashMap<usize, usize> = path.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let silent_after = |from: usize, out: &mut Vec<Block>| {
        for &index in path[from..].iter().take_while(|i| !in_context.contains(i)) {
            if is_silent(&tree.nodes[index].kind) {
                out.push(note(tree, index));
            }
        }
    };
    let mut out = Vec::new();
    let compacted = items
        .first()
        .is_some_and(|i| i.kind != ContextKind::Message && i.kind != ContextKind::Custom);
    if !compacted {
        silent_after(0, &mut out);
    }
    let mut printed: HashSet<usize> = HashSet::new();
    let mut noted: HashSet<usize> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        // A result shown under its call is not shown again, but the notes
        // after it are still due.
        if !(printed.contains(&item.node) && item.kind == ContextKind::Message) {
            out.push(block(tree, item, Some(&results), &mut printed));
            printed.insert(item.node);
        }
        let last_of_node = items.get(i + 1).is_none_or(|next| next.node != item.node);
        if !last_of_node || !noted.insert(item.node) {
            continue;
        }
        if let Some(&at) = position.get(&item.node) {
            silent_after(at + 1, &mut out);
        }
    }
    out
}

/// The blocks one entry gives on its own (`piidx show --all`): its
/// messages as a first compaction would give them, calls without results
/// (each result is its own block), or a note when it gives none.
pub fn entry(tree: &SessionTree, index: usize) -> Vec<Block> {
    let items = project(tree, index, true, None);
    if items.is_empty() {
        return vec![note(tree, index)];
    }
    let mut printed = HashSet::new();
    items
        .iter()
        .map(|item| block(tree, item, None, &mut printed))
        .collect()
}

/// Entries that give no message but are shown on the branch.
fn is_silent(kind: &str) -> bool {
    !matches!(
        kind,
        "message" | "compaction" | "branch_summary" | "custom_message"
    )
}

fn note(tree: &SessionTree, index: usize) -> Block {
    let node = &tree.nodes[index];
    let body = Body::Note {
        entry_type: node.kind.clone(),
        summary: describe(tree, index),
    };
    meta(tree, index, None, body)
}

fn meta(tree: &SessionTree, index: usize, edited_by: Option<usize>, body: Body) -> Block {
    let node = &tree.nodes[index];
    Block {
        node: index,
        entry_id: node.id.clone(),
        time_ms: node
            .raw
            .pointer("/message/timestamp")
            .and_then(Value::as_i64)
            .or(node.timestamp_ms),
        label: tree.labels.get(&node.id).cloned(),
        edited_by: edited_by.map(|edit| tree.nodes[edit].id.clone()),
        body,
    }
}

/// One context item as a block; `results` (tool results by call id) puts
/// results under their calls and marks them `printed`.
fn block(
    tree: &SessionTree,
    item: &ContextItem,
    results: Option<&HashMap<&str, &ContextItem>>,
    printed: &mut HashSet<usize>,
) -> Block {
    let message = &item.message;
    let body = match item.kind {
        ContextKind::SystemCheckpoint => Body::System(system_prompt(message, true)),
        ContextKind::CompactionSummary => compaction(message),
        ContextKind::BranchSummary => Body::BranchSummary {
            summary: str_of(message, "summary").to_owned(),
        },
        ContextKind::Custom => custom(tree, item.node, message, "$.content"),
        ContextKind::Message => message_body(tree, item, results, printed),
    };
    meta(tree, item.node, item.edited_by, body)
}

/// A `message` entry's message, by role: the one place a role is read.
fn message_body(
    tree: &SessionTree,
    item: &ContextItem,
    results: Option<&HashMap<&str, &ContextItem>>,
    printed: &mut HashSet<usize>,
) -> Body {
    let message = &item.message;
    let node = Some(item.node);
    let content = || parts(tree, node, message.get("content"), "$.message.content");
    match role(message) {
        "system" => Body::System(system_prompt(message, false)),
        "assistant" => Body::Assistant(assistant(tree, item, results, printed)),
        "toolResult" => Body::ToolResult(tool_result(tree, item)),
        "bashExecution" => Body::Bash(execution(message, "command")),
        "pythonExecution" => Body::Python(execution(message, "code")),
        "fileMention" => Body::FileMention {
            files: mentioned_files(message),
        },
        "compactionSummary" => compaction(message),
        "branchSummary" => Body::BranchSummary {
            summary: str_of(message, "summary").to_owned(),
        },
        "custom" => custom(tree, item.node, message, "$.message.content"),
        "user" => Body::User { content: content() },
        "developer" => Body::Developer { content: content() },
        other => Body::Other {
            role: other.to_owned(),
            content: content(),
        },
    }
}

fn compaction(message: &Value) -> Body {
    Body::Compaction {
        summary: str_of(message, "summary").to_owned(),
        tokens_before: message
            .get("tokensBefore")
            .and_then(Value::as_i64)
            .unwrap_or(0),
    }
}

fn custom(tree: &SessionTree, index: usize, message: &Value, base: &str) -> Body {
    Body::Custom {
        custom_type: str_of(message, "customType").to_owned(),
        content: parts(tree, Some(index), message.get("content"), base),
    }
}

fn assistant(
    tree: &SessionTree,
    item: &ContextItem,
    results: Option<&HashMap<&str, &ContextItem>>,
    printed: &mut HashSet<usize>,
) -> Assistant {
    let message = &item.message;
    let content = message.get("content");
    let calls = tool_calls(content)
        .map(|mut call| {
            if let Some(result) = results.and_then(|r| r.get(call.id.as_str())) {
                printed.insert(result.node);
                call.result = Some(tool_result(tree, result));
            }
            call
        })
        .collect();
    let usage = message.get("usage").map(|usage| Usage {
        total_tokens: usage
            .get("totalTokens")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        cost: usage
            .pointer("/cost/total")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
    });
    Assistant {
        model: str_of(message, "model").to_owned(),
        content: parts(tree, Some(item.node), content, "$.message.content"),
        calls,
        error: string(message, "errorMessage"),
        usage,
    }
}

/// The `toolCall` blocks of a content array, without results.
fn tool_calls(content: Option<&Value>) -> impl Iterator<Item = ToolCall> + '_ {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|block| block_type(block) == Some("toolCall"))
        .map(|block| ToolCall {
            id: str_of(block, "id").to_owned(),
            name: str_of(block, "name").to_owned(),
            arguments: block.get("arguments").cloned(),
            result: None,
        })
}

fn tool_result(tree: &SessionTree, item: &ContextItem) -> ToolResult {
    let message = &item.message;
    let runs = message
        .pointer("/details/results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(position, run)| {
            let messages = run.get("messages").and_then(Value::as_array)?;
            Some(Run {
                position,
                agent: string(run, "agent"),
                task: str_of(run, "task").to_owned(),
                messages: messages.iter().map(|m| nested(tree, m)).collect(),
            })
        })
        .collect();
    ToolResult {
        node: item.node,
        entry_id: tree.nodes[item.node].id.clone(),
        tool_name: str_of(message, "toolName").to_owned(),
        is_error: message.get("isError").and_then(Value::as_bool) == Some(true),
        edited_by: item.edited_by.map(|edit| tree.nodes[edit].id.clone()),
        content: result_parts(tree, item.node, message.get("content")),
        runs,
    }
}

/// A subagent's message: its content, calls, or a tool result's text.
fn nested(tree: &SessionTree, message: &Value) -> NestedMessage {
    let role = role(message).to_owned();
    let content = message.get("content");
    let output = match (role.as_str(), content) {
        ("toolResult", Some(Value::String(text))) => text.clone(),
        ("toolResult", other) => super::tree::content_text(other),
        _ => String::new(),
    };
    let (content, calls) = if role == "toolResult" {
        (Vec::new(), Vec::new())
    } else {
        (
            parts(tree, None, content, ""),
            tool_calls(content).collect(),
        )
    };
    NestedMessage {
        model: str_of(message, "model").to_owned(),
        tool_name: str_of(message, "toolName").to_owned(),
        role,
        content,
        calls,
        output,
    }
}

fn execution(message: &Value, command: &str) -> Execution {
    Execution {
        command: str_of(message, command).to_owned(),
        exit_code: message.get("exitCode").and_then(Value::as_i64),
        output: str_of(message, "output").to_owned(),
    }
}

fn mentioned_files(message: &Value) -> Vec<MentionedFile> {
    message
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|file| MentionedFile {
            path: str_of(file, "path").to_owned(),
            content: string(file, "content"),
            skipped_reason: string(file, "skippedReason"),
        })
        .collect()
}

fn system_prompt(message: &Value, checkpoint: bool) -> SystemPrompt {
    let sections = message
        .get("sections")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, text)| Section {
            name: name.clone(),
            text: text.as_str().map(str::to_owned),
        })
        .collect();
    let names = |key: &str| -> Vec<String> {
        message
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| string(tool, "name"))
            .collect()
    };
    SystemPrompt {
        checkpoint,
        content: string(message, "content"),
        sections,
        tools_added: names("toolsAdded"),
        tools_added_bytes: message
            .get("toolsAdded")
            .map_or(0, |tools| tools.to_string().len()),
        tools_removed: names("toolsRemoved"),
    }
}

/// Message content (a string, or blocks at `base[i]`) as parts: text,
/// thinking and images; tool calls left out (they are the message's
/// `calls`), blocks without a type too.
fn parts(
    tree: &SessionTree,
    node: Option<usize>,
    content: Option<&Value>,
    base: &str,
) -> Vec<Part> {
    match content {
        Some(Value::String(text)) => vec![Part::Text { text: text.clone() }],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .filter_map(|(i, block)| match block_type(block)? {
                "text" => Some(text_part(block)),
                "image" => Some(Part::Image(image(
                    tree,
                    node,
                    block,
                    &format!("{base}[{i}]"),
                ))),
                "thinking" => {
                    let redacted = block.get("redacted").and_then(Value::as_bool) == Some(true);
                    let text = if redacted {
                        "[redacted thinking]"
                    } else {
                        str_of(block, "thinking")
                    };
                    Some(Part::Thinking {
                        text: text.to_owned(),
                    })
                }
                "toolCall" => None,
                other => Some(Part::Other {
                    block_type: Some(other.to_owned()),
                }),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A tool result's content: text and images; every other block by its
/// type (a block without one as `Other { None }`).
fn result_parts(tree: &SessionTree, node: usize, content: Option<&Value>) -> Vec<Part> {
    let base = "$.message.content";
    match content {
        Some(Value::String(text)) => vec![Part::Text { text: text.clone() }],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(i, block)| match block_type(block) {
                Some("text") => text_part(block),
                Some("image") => {
                    Part::Image(image(tree, Some(node), block, &format!("{base}[{i}]")))
                }
                other => Part::Other {
                    block_type: other.map(str::to_owned),
                },
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn text_part(block: &Value) -> Part {
    Part::Text {
        text: str_of(block, "text").to_owned(),
    }
}

/// An image block at `path` of entry `node` (`None`: a subagent's message,
/// whose images the index does not keep apart).
fn image(tree: &SessionTree, node: Option<usize>, block: &Value, path: &str) -> Image {
    let mime = string(block, "mimeType");
    let Some(node) = node else {
        return Image {
            mime,
            stored: None,
            outside: None,
        };
    };
    let rowid = tree.nodes[node].rowid;
    let stored = tree
        .images
        .get(&(rowid, path.to_owned()))
        .map(|info| StoredImage {
            rowid,
            path: path.to_owned(),
            mime_type: info.mime_type.clone(),
            byte_len: info.byte_len,
        });
    let outside = crate::outside::blob_ref(block).map(|reference| OutsideImage {
        hex: reference.hex().to_owned(),
        placeholder: tree.outside_placeholder(block),
        found: tree
            .outside
            .get(reference.hex())
            .is_some_and(|located| located.size.is_some()),
    });
    Image {
        mime,
        stored,
        outside,
    }
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("?")
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::{Value, json};

    use super::*;
    use crate::query::tree::{Node, SessionRef};

    /// A tree of `entries` (each an entry object with `type` and `id`), in
    /// file order, one chain.
    fn tree(entries: &[Value]) -> SessionTree {
        let nodes: Vec<Node> = entries
            .iter()
            .enumerate()
            .map(|(i, raw)| Node {
                rowid: i as i64 + 1,
                id: raw["id"].as_str().unwrap_or_default().to_owned(),
                parent: None,
                kind: raw["type"].as_str().unwrap_or_default().to_owned(),
                timestamp: None,
                timestamp_ms: Some(1_000 * i as i64),
                line_no: i as i64 + 2,
                raw: raw.clone(),
            })
            .collect();
        SessionTree {
            session: SessionRef {
                file_id: 1,
                session_id: "s".into(),
                path: "/s.jsonl".into(),
            },
            header: json!({"type": "session", "cwd": "/w"}),
            by_id: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id.clone(), i))
                .collect(),
            nodes,
            labels: HashMap::new(),
            images: HashMap::new(),
            first_kept: HashMap::new(),
            outside: HashMap::new(),
        }
    }

    fn message(id: &str, message: Value) -> Value {
        json!({"type": "message", "id": id, "message": message})
    }

    fn kinds(blocks: &[Block]) -> Vec<String> {
        blocks
            .iter()
            .map(|b| {
                let value = serde_json::to_value(b).unwrap_or_default();
                format!("{}:{}", value["kind"].as_str().unwrap_or("?"), b.entry_id)
            })
            .collect()
    }

    #[test]
    fn results_sit_under_their_calls_and_silent_entries_are_notes() {
        let tree = tree(&[
            json!({"type": "model_change", "id": "m", "provider": "p", "modelId": "x"}),
            message("u", json!({"role": "user", "content": "hi"})),
            message(
                "a",
                json!({"role": "assistant", "model": "x", "content": [
                    {"type": "thinking", "thinking": "hmm"},
                    {"type": "text", "text": "reading"},
                    {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "f"}}
                ]}),
            ),
            message(
                "r",
                json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "body"}], "isError": true}),
            ),
            json!({"type": "label", "id": "l", "targetId": "a", "label": "here"}),
            message(
                "o",
                json!({"role": "toolResult", "toolCallId": "nobody", "toolName": "bash", "content": "late"}),
            ),
        ]);
        let blocks = branch(&tree, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(
            kinds(&blocks),
            ["note:m", "user:u", "assistant:a", "note:l", "tool_result:o"]
        );
        let Body::Assistant(assistant) = &blocks[2].body else {
            panic!("{:?}", blocks[2]);
        };
        assert_eq!(assistant.content.len(), 2);
        let result = assistant.calls[0].result.as_ref().expect("paired");
        assert_eq!((result.entry_id.as_str(), result.is_error), ("r", true));
        let Body::Note { summary, .. } = &blocks[0].body else {
            panic!("{:?}", blocks[0]);
        };
        assert_eq!(summary, "model → p/x");
        // `--all` gives each entry alone: the call without its result.
        let alone = entry(&tree, 2);
        let Body::Assistant(assistant) = &alone[0].body else {
            panic!("{alone:?}");
        };
        assert!(assistant.calls[0].result.is_none());
    }

    #[test]
    fn other_agents_roles_have_their_own_blocks() {
        let tree = tree(&[
            message("d", json!({"role": "developer", "content": "note"})),
            message(
                "p",
                json!({"role": "pythonExecution", "code": "print(1)", "output": "1\n", "exitCode": 0}),
            ),
            message(
                "f",
                json!({"role": "fileMention", "files": [{"path": "a.ts", "content": "x"}]}),
            ),
            message(
                "c",
                json!({"role": "compactionSummary", "summary": "s", "tokensBefore": 9}),
            ),
            message("b", json!({"role": "branchSummary", "summary": "t"})),
            message("x", json!({"role": "somethingNew", "content": "y"})),
        ]);
        let blocks = branch(&tree, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(
            kinds(&blocks),
            [
                "developer:d",
                "python:p",
                "file_mention:f",
                "compaction:c",
                "branch_summary:b",
                "other:x"
            ]
        );
        let Body::Compaction { tokens_before, .. } = &blocks[3].body else {
            panic!("{:?}", blocks[3]);
        };
        assert_eq!(*tokens_before, 9);
    }

    #[test]
    fn a_compaction_leaves_out_the_notes_it_summarises() {
        let tree = tree(&[
            json!({"type": "thinking_level_change", "id": "t", "thinkingLevel": "high"}),
            message("u", json!({"role": "user", "content": "old"})),
            message("k", json!({"role": "user", "content": "kept"})),
            json!({"type": "compaction", "id": "c", "summary": "sum", "firstKeptEntryId": "k", "tokensBefore": 5}),
            json!({"type": "session_info", "id": "n", "name": "named"}),
        ]);
        let blocks = branch(&tree, &[0, 1, 2, 3, 4]);
        // A note follows the entry before it on the branch: the compaction.
        assert_eq!(kinds(&blocks), ["compaction:c", "note:n", "user:k"]);
    }
}
