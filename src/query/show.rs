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

use super::export::json_path_mut;
use super::tree::{ContextKind, SessionTree, build_context, describe};
use crate::time::format_iso_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Markdown,
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
pub fn render_context(tree: &SessionTree, path: &[usize], style: Style) -> String {
    let items = build_context(tree, path);
    let mut out = String::new();
    title(tree, style, &mut out);
    if let Some(&leaf) = path.last() {
        out.push_str(&format!(
            "branch: {} entries, leaf {}\n\n",
            path.len(),
            tree.nodes[leaf].id
        ));
    }
    // Pair tool calls with their results inside the context.
    let mut results: HashMap<String, usize> = HashMap::new();
    for item in &items {
        let message = tree.nodes[item.node].raw.get("message");
        if item.kind == ContextKind::Message
            && role(message) == "toolResult"
            && let Some(id) = message
                .and_then(|m| m.get("toolCallId"))
                .and_then(Value::as_str)
        {
            results.entry(id.to_owned()).or_insert(item.node);
        }
    }
    let mut printed: HashSet<usize> = HashSet::new();
    for item in &items {
        if printed.contains(&item.node) && item.kind == ContextKind::Message {
            continue;
        }
        render_item(
            tree,
            item.node,
            item.kind,
            style,
            &results,
            &mut printed,
            &mut out,
        );
    }
    out
}

/// Every entry of the tree, depth first, branch points marked.
pub fn render_all(tree: &SessionTree, style: Style) -> String {
    let (roots, children) = tree.children();
    let active = super::tree::active_set(tree);
    let mut out = String::new();
    title(tree, style, &mut out);
    let mut stack: Vec<(usize, Option<String>)> =
        roots.iter().rev().map(|&root| (root, None)).collect();
    if roots.len() > 1 {
        out.push_str(&format!("{} roots\n\n", roots.len()));
    }
    let no_results = HashMap::new();
    let mut printed = HashSet::new();
    while let Some((index, banner)) = stack.pop() {
        if let Some(banner) = banner {
            out.push_str(&banner);
        }
        let node = &tree.nodes[index];
        let kind = match node.kind.as_str() {
            "message" => Some(ContextKind::Message),
            "custom_message" => Some(ContextKind::Custom),
            "branch_summary" => Some(ContextKind::BranchSummary),
            "compaction" => Some(ContextKind::CompactionSummary),
            _ => None,
        };
        match kind {
            Some(kind) => render_item(
                tree,
                index,
                kind,
                style,
                &no_results,
                &mut printed,
                &mut out,
            ),
            None => {
                let marker = if active.contains(&index) { "•" } else { " " };
                out.push_str(&format!(
                    "{marker} {} {}\n\n",
                    node.id,
                    describe(tree, index)
                ));
            }
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

fn heading(tree: &SessionTree, index: usize, what: &str, style: Style, out: &mut String) {
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
    let label = tree
        .labels
        .get(&node.id)
        .map(|l| format!("  🏷 {l}"))
        .unwrap_or_default();
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

#[allow(clippy::too_many_arguments)]
fn render_item(
    tree: &SessionTree,
    index: usize,
    kind: ContextKind,
    style: Style,
    results: &HashMap<String, usize>,
    printed: &mut HashSet<usize>,
    out: &mut String,
) {
    let node = &tree.nodes[index];
    let raw = &node.raw;
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    match kind {
        ContextKind::CompactionSummary => {
            let tokens = raw.get("tokensBefore").and_then(Value::as_i64).unwrap_or(0);
            heading(
                tree,
                index,
                &format!("compaction summary ({tokens} tokens before)"),
                style,
                out,
            );
            out.push_str(&str_of(raw, "summary"));
        }
        ContextKind::BranchSummary => {
            heading(tree, index, "branch summary", style, out);
            out.push_str(&str_of(raw, "summary"));
        }
        ContextKind::Custom => {
            heading(
                tree,
                index,
                &format!("custom: {}", str_of(raw, "customType")),
                style,
                out,
            );
            out.push_str(&content(
                tree,
                index,
                raw.get("content"),
                "$.content",
                style,
            ));
        }
        ContextKind::Message => {
            let message = raw.get("message").cloned().unwrap_or(Value::Null);
            let who = role(Some(&message)).to_owned();
            match who.as_str() {
                "assistant" => {
                    let model = str_of(&message, "model");
                    heading(tree, index, &format!("assistant ({model})"), style, out);
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
                        if let Some(&result) = results.get(&call_id) {
                            printed.insert(result);
                            let result_raw = tree.nodes[result].raw.get("message");
                            let error = result_raw
                                .and_then(|m| m.get("isError"))
                                .and_then(Value::as_bool)
                                == Some(true);
                            let text = content(
                                tree,
                                result,
                                result_raw.and_then(|m| m.get("content")),
                                "$.message.content",
                                style,
                            );
                            out.push_str(&format!(
                                "\n← {name}{} ({})\n{}",
                                if error { " ERROR" } else { "" },
                                tree.nodes[result].id,
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
                        &format!("tool result: {}", str_of(&message, "toolName")),
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
                    heading(tree, index, "bash", style, out);
                    let code = message
                        .get("exitCode")
                        .and_then(Value::as_i64)
                        .map_or("none".to_owned(), |c| c.to_string());
                    out.push_str(&format!(
                        "$ {}  (exit {code})\n",
                        str_of(&message, "command")
                    ));
                    out.push_str(&fenced(&str_of(&message, "output"), style));
                }
                other => {
                    let what = match other {
                        "custom" => format!("custom: {}", str_of(&message, "customType")),
                        _ => other.to_owned(),
                    };
                    heading(tree, index, &what, style, out);
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
