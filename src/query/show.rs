//! `piidx show`: a session's current branch as a readable transcript,
//! built the way Pi builds the model's context (`build_context`), or the
//! whole tree (`--all`), or the path's entries as JSON.
//!
//! Tool calls are printed with their results right under them; labels are
//! shown next to the entries they mark; images become placeholders such as
//! `[image image/png 12 KB]` (also in `--json`, where the payload string is
//! replaced by the placeholder).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::tree::{ContextItem, ContextKind, SessionTree, build_context, describe};
use crate::normalize::json_path_mut;
use crate::time::format_iso_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Markdown,
}

/// How a transcript is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub style: Style,
    /// System prompts in full, not as a list of their sections and tools.
    pub full_system: bool,
}

/// The placeholder for an image payload.
pub fn image_placeholder(mime: Option<&str>, bytes: i64) -> String {
    let size = if bytes >= 1024 {
        format!("{} KB", (bytes + 512) / 1024)
    } else {
        format!("{bytes} B")
    };
    format!("[image {} {size}]", mime.unwrap_or("?"))
}

/// The entries of the path root → leaf, image payloads as placeholders.
pub fn path_json(tree: &SessionTree, path: &[usize]) -> Value {
    let entries = path
        .iter()
        .map(|&index| {
            let node = &tree.nodes[index];
            let mut raw = node.raw.clone();
            for ((rowid, json_path), info) in &tree.images {
                if *rowid != node.rowid {
                    continue;
                }
                if let Some(object) =
                    json_path_mut(&mut raw, json_path).and_then(Value::as_object_mut)
                {
                    object.insert(
                        info.payload_key.clone(),
                        Value::from(image_placeholder(info.mime_type.as_deref(), info.byte_len)),
                    );
                }
            }
            raw
        })
        .collect();
    Value::Array(entries)
}

/// The transcript of `path` as Pi's context sees it.
pub fn render_context(tree: &SessionTree, path: &[usize], options: Options) -> String {
    let items = build_context(tree, path);
    let mut out = String::new();
    title(tree, options.style, &mut out);
    if let Some(&leaf) = path.last() {
        out.push_str(&format!(
            "branch: {} entries, leaf {}\n\n",
            path.len(),
            tree.nodes[leaf].id
        ));
    }
    // Tool results are printed under the call they answer.
    let mut results: HashMap<&str, &ContextItem> = HashMap::new();
    for item in &items {
        if item.kind == ContextKind::Message
            && role(Some(&item.message)) == "toolResult"
            && let Some(id) = item.message.get("toolCallId").and_then(Value::as_str)
        {
            results.entry(id).or_insert(item);
        }
    }
    let mut printed: HashSet<usize> = HashSet::new();
    for item in &items {
        if printed.contains(&item.node) && item.kind == ContextKind::Message {
            continue;
        }
        let mark = item
            .edited_by
            .map(|edit| format!("✎ edited by {}", tree.nodes[edit].id));
        render_item(
            tree,
            item,
            options,
            mark.as_deref(),
            &results,
            &mut printed,
            &mut out,
        );
    }
    out
}

/// Every entry of the tree, depth first, branch points marked, and the
/// entries a `context_edit` changes in the model's context marked too.
pub fn render_all(tree: &SessionTree, options: Options) -> String {
    let (roots, children) = tree.children();
    let active = super::tree::active_set(tree);
    let edits = super::tree::edits_by_target(tree);
    let style = options.style;
    let mut out = String::new();
    title(tree, style, &mut out);
    let mut stack: Vec<(usize, Option<String>)> =
        roots.iter().rev().map(|&root| (root, None)).collect();
    if roots.len() > 1 {
        out.push_str(&format!("{} roots\n\n", roots.len()));
    }
    let mut printed = HashSet::new();
    while let Some((index, banner)) = stack.pop() {
        if let Some(banner) = banner {
            out.push_str(&banner);
        }
        let node = &tree.nodes[index];
        let items = super::tree::project(tree, index, true, None);
        if items.is_empty() {
            let marker = if active.contains(&index) { "•" } else { " " };
            out.push_str(&format!(
                "{marker} {} {}\n\n",
                node.id,
                describe(tree, index)
            ));
        }
        let mark = edits
            .get(node.id.as_str())
            .map(|list| edit_marks(tree, list));
        for item in &items {
            render_item(
                tree,
                item,
                options,
                mark.as_deref(),
                &HashMap::new(),
                &mut printed,
                &mut out,
            );
        }
        let kids = &children[index];
        for (i, &kid) in kids.iter().enumerate().rev() {
            let banner = (kids.len() > 1).then(|| {
                let rule = match style {
                    Style::Markdown => "---\n\n**",
                    Style::Text => "════ ",
                };
                let end = match style {
                    Style::Markdown => "**\n\n",
                    Style::Text => " ════\n\n",
                };
                format!(
                    "{rule}branch {}/{} from {}{}{end}",
                    i + 1,
                    kids.len(),
                    node.id,
                    if active.contains(&kid) {
                        " (current)"
                    } else {
                        ""
                    }
                )
            });
            stack.push((kid, banner));
        }
    }
    out
}

/// `✎ edited by <id>` / `✗ removed by <id>` for an entry's context edits.
pub fn edit_marks(tree: &SessionTree, edits: &[(usize, bool)]) -> String {
    edits
        .iter()
        .map(|&(edit, removes)| {
            let verb = if removes { "✗ removed" } else { "✎ edited" };
            format!("{verb} by {}", tree.nodes[edit].id)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn title(tree: &SessionTree, style: Style, out: &mut String) {
    let header = &tree.header;
    let cwd = header.get("cwd").and_then(Value::as_str).unwrap_or("");
    let created = header
        .get("timestamp")
        .and_then(Value::as_str)
        .unwrap_or("");
    match style {
        Style::Markdown => out.push_str(&format!(
            "# Session {}\n\n- file: `{}`\n- cwd: `{cwd}`\n- created: {created}\n\n",
            tree.session.session_id, tree.session.path
        )),
        Style::Text => out.push_str(&format!(
            "session {}\nfile    {}\ncwd     {cwd}\ncreated {created}\n",
            tree.session.session_id, tree.session.path
        )),
    }
}

fn role(message: Option<&Value>) -> &str {
    message
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        .unwrap_or("?")
}

fn heading(
    tree: &SessionTree,
    index: usize,
    what: &str,
    mark: Option<&str>,
    style: Style,
    out: &mut String,
) {
    let node = &tree.nodes[index];
    let when = node
        .raw
        .get("message")
        .and_then(|m| m.get("timestamp"))
        .and_then(Value::as_i64)
        .or(node.timestamp_ms)
        .map(|ms| {
            format_iso_ms(ms)
                .replace('T', " ")
                .chars()
                .take(19)
                .collect::<String>()
        })
        .unwrap_or_default();
    let mut label = tree
        .labels
        .get(&node.id)
        .map(|l| format!("  🏷 {l}"))
        .unwrap_or_default();
    if let Some(mark) = mark {
        label.push_str(&format!("  {mark}"));
    }
    match style {
        Style::Markdown => out.push_str(&format!("### {what} · {when} · `{}`{label}\n\n", node.id)),
        Style::Text => out.push_str(&format!("── {what} · {when} · {}{label} ──\n", node.id)),
    }
}

/// Text and image blocks (thinking and tool calls are handled by the caller).
fn content(
    tree: &SessionTree,
    index: usize,
    value: Option<&Value>,
    base: &str,
    style: Style,
) -> String {
    let node = &tree.nodes[index];
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for (i, block) in blocks.iter().enumerate() {
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => parts.push(
                        block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    ),
                    Some("image") => {
                        let path = format!("{base}[{i}]");
                        let info = tree.images.get(&(node.rowid, path));
                        let mime = block.get("mimeType").and_then(Value::as_str);
                        parts.push(image_placeholder(mime, info.map_or(0, |i| i.byte_len)));
                    }
                    Some("thinking") => {
                        let text = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                        let redacted = block.get("redacted").and_then(Value::as_bool) == Some(true);
                        let text = if redacted {
                            "[redacted thinking]"
                        } else {
                            text
                        };
                        if !text.is_empty() {
                            parts.push(quote(&format!("thinking: {text}"), style));
                        }
                    }
                    Some("toolCall") => {}
                    Some(other) => parts.push(format!("[{other} block]")),
                    None => {}
                }
            }
            parts.join("\n")
        }
        _ => String::new(),
    }
}

fn quote(text: &str, style: Style) -> String {
    match style {
        Style::Markdown => text
            .lines()
            .map(|l| format!("> {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
        Style::Text => text
            .lines()
            .map(|l| format!("  ┊ {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn fenced(text: &str, style: Style) -> String {
    match style {
        Style::Markdown => {
            let fence = if text.contains("```") { "~~~~" } else { "```" };
            format!("{fence}\n{text}\n{fence}")
        }
        Style::Text => text
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// One context message: `mark` says how a context edit changes it, and
/// `results` holds the tool results to print under their calls.
fn render_item(
    tree: &SessionTree,
    item: &ContextItem,
    options: Options,
    mark: Option<&str>,
    results: &HashMap<&str, &ContextItem>,
    printed: &mut HashSet<usize>,
    out: &mut String,
) {
    let index = item.node;
    let style = options.style;
    let message = &item.message;
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    match item.kind {
        ContextKind::SystemCheckpoint => {
            heading(
                tree,
                index,
                "system prompt kept by the compaction",
                mark,
                style,
                out,
            );
            out.push_str(&system_prompt(message, options.full_system));
        }
        ContextKind::CompactionSummary => {
            let tokens = message
                .get("tokensBefore")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            heading(
                tree,
                index,
                &format!("compaction summary ({tokens} tokens before)"),
                mark,
                style,
                out,
            );
            out.push_str(&str_of(message, "summary"));
        }
        ContextKind::BranchSummary => {
            heading(tree, index, "branch summary", mark, style, out);
            out.push_str(&str_of(message, "summary"));
        }
        ContextKind::Custom => {
            heading(
                tree,
                index,
                &format!("custom: {}", str_of(message, "customType")),
                mark,
                style,
                out,
            );
            out.push_str(&content(
                tree,
                index,
                message.get("content"),
                "$.content",
                style,
            ));
        }
        ContextKind::Message => {
            let who = role(Some(message)).to_owned();
            match who.as_str() {
                "system" => {
                    heading(tree, index, "system prompt", mark, style, out);
                    out.push_str(&system_prompt(message, options.full_system));
                }
                "assistant" => {
                    let model = str_of(message, "model");
                    heading(
                        tree,
                        index,
                        &format!("assistant ({model})"),
                        mark,
                        style,
                        out,
                    );
                    let body = content(
                        tree,
                        index,
                        message.get("content"),
                        "$.message.content",
                        style,
                    );
                    out.push_str(&body);
                    for block in message
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        if block.get("type").and_then(Value::as_str) != Some("toolCall") {
                            continue;
                        }
                        let name = str_of(block, "name");
                        let args = block
                            .get("arguments")
                            .map(Value::to_string)
                            .unwrap_or_default();
                        out.push_str(&format!("\n→ {name} {args}"));
                        let call_id = str_of(block, "id");
                        if let Some(result) = results.get(call_id.as_str()) {
                            printed.insert(result.node);
                            let error = result.message.get("isError").and_then(Value::as_bool)
                                == Some(true);
                            let text = content(
                                tree,
                                result.node,
                                result.message.get("content"),
                                "$.message.content",
                                style,
                            );
                            let edited = result
                                .edited_by
                                .map(|edit| format!(" ✎ edited by {}", tree.nodes[edit].id))
                                .unwrap_or_default();
                            out.push_str(&format!(
                                "\n← {name}{} ({}){edited}\n{}",
                                if error { " ERROR" } else { "" },
                                tree.nodes[result.node].id,
                                fenced(&text, style)
                            ));
                        }
                    }
                    if let Some(error) = message.get("errorMessage").and_then(Value::as_str) {
                        out.push_str(&format!("\n[error: {error}]"));
                    }
                }
                "toolResult" => {
                    heading(
                        tree,
                        index,
                        &format!("tool result: {}", str_of(message, "toolName")),
                        mark,
                        style,
                        out,
                    );
                    let text = content(
                        tree,
                        index,
                        message.get("content"),
                        "$.message.content",
                        style,
                    );
                    out.push_str(&fenced(&text, style));
                }
                "bashExecution" => {
                    heading(tree, index, "bash", mark, style, out);
                    let code = message
                        .get("exitCode")
                        .and_then(Value::as_i64)
                        .map_or("none".to_owned(), |c| c.to_string());
                    out.push_str(&format!(
                        "$ {}  (exit {code})\n",
                        str_of(message, "command")
                    ));
                    out.push_str(&fenced(&str_of(message, "output"), style));
                }
                other => {
                    let what = match other {
                        "custom" => format!("custom: {}", str_of(message, "customType")),
                        _ => other.to_owned(),
                    };
                    heading(tree, index, &what, mark, style, out);
                    out.push_str(&content(
                        tree,
                        index,
                        message.get("content"),
                        "$.message.content",
                        style,
                    ));
                }
            }
        }
    }
    printed.insert(index);
    out.push_str("\n\n");
}

/// A system prompt: its sections and tools by name and size, or (`full`)
/// its whole text.
fn system_prompt(message: &Value, full: bool) -> String {
    let size = |bytes: usize| {
        if bytes >= 1024 {
            format!("{:.1} KB", bytes as f64 / 1024.0)
        } else {
            format!("{bytes} B")
        }
    };
    let mut out = Vec::new();
    if let Some(text) = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        out.push(if full {
            text.to_owned()
        } else {
            format!("content: {}", size(text.len()))
        });
    }
    if let Some(sections) = message.get("sections").and_then(Value::as_object) {
        for (name, text) in sections {
            match text.as_str() {
                Some(text) if full => out.push(text.to_owned()),
                Some(text) => out.push(format!("§ {name}: {}", size(text.len()))),
                None => out.push(format!("§ {name}: removed")),
            }
        }
    }
    let names = |key: &str| -> Vec<String> {
        message
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| tool.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    let added = names("toolsAdded");
    if !added.is_empty() {
        let bytes = message.get("toolsAdded").map_or(0, |t| t.to_string().len());
        out.push(format!("tools: {} ({})", added.join(", "), size(bytes)));
    }
    let removed = names("toolsRemoved");
    if !removed.is_empty() {
        out.push(format!("tools removed: {}", removed.join(", ")));
    }
    if !full && !out.is_empty() {
        out.push("(piidx show --system prints it in full)".to_owned());
    }
    out.join("\n")
}
