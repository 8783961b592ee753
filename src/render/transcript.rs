//! `piidx show`: a session's current branch as a readable transcript (the
//! context `query::tree::build_context` builds, as Pi does), or the whole
//! tree (`--all`), as text or Markdown, or the path's entries as JSON.
//!
//! Tool calls are printed with their results right under them (or folded:
//! `Tools`); labels and context edits are shown next to the entries they
//! mark; images become placeholders such as `[image image/png 12 KB]` (also
//! in `--json`, where the payload string is replaced by the placeholder).
//! Session text goes through `safe`; Markdown output is CommonMark.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{Theme, safe};
use crate::query::tree::{
    self, ContextItem, ContextKind, EditMark, SessionTree, active_set, build_context, describe,
    edits_by_target, image_placeholder, project,
};
use crate::time::format_iso_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Markdown,
}

/// How tool results are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tools {
    Full,
    /// At most this many lines of each result, then a marker.
    Lines(usize),
    /// Calls on one line each, no results.
    Hidden,
}

/// How a transcript is printed.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub style: Style,
    /// System prompts in full, not as a list of their sections and tools.
    pub full_system: bool,
    pub tools: Tools,
    pub theme: Theme,
}

/// The transcript of `path` as Pi's context sees it.
pub fn context(tree: &SessionTree, path: &[usize], options: Options) -> String {
    let items = build_context(tree, path);
    let mut out = Writer::new(tree, options);
    out.title();
    if let Some(&leaf) = path.last() {
        out.line(&format!(
            "branch: {} entries, leaf {}",
            path.len(),
            tree.nodes[leaf].id
        ));
        out.blank();
    }
    // Tool results are printed under the call they answer.
    let mut results: HashMap<&str, &ContextItem> = HashMap::new();
    for item in &items {
        if item.kind == ContextKind::Message
            && role(&item.message) == "toolResult"
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
        out.item(item, mark.as_deref(), &results, &mut printed);
    }
    out.finish()
}

/// Every entry of the tree, depth first, branch points marked, and the
/// entries a `context_edit` changes in the model's context marked too.
pub fn whole_tree(tree: &SessionTree, options: Options) -> String {
    let (roots, children) = tree.children();
    let active = active_set(tree);
    let edits = edits_by_target(tree);
    let mut out = Writer::new(tree, options);
    out.title();
    if roots.len() > 1 {
        out.line(&format!("{} roots", roots.len()));
        out.blank();
    }
    let mut stack: Vec<(usize, Option<String>)> =
        roots.iter().rev().map(|&root| (root, None)).collect();
    let mut printed = HashSet::new();
    while let Some((index, banner)) = stack.pop() {
        if let Some(banner) = banner {
            out.banner(&banner);
        }
        let node = &tree.nodes[index];
        let items = project(tree, index, true, None);
        let mark = edits
            .get(node.id.as_str())
            .map(|list| edit_marks(&tree::edit_marks(tree, Some(list))));
        if items.is_empty() {
            let marker = if active.contains(&index) { "•" } else { " " };
            let mut text = format!("{marker} {} {}", node.id, safe(&describe(tree, index)));
            if let Some(mark) = &mark {
                text.push_str(&format!("  {mark}"));
            }
            out.line(&text);
            out.blank();
        }
        for item in &items {
            out.item(item, mark.as_deref(), &HashMap::new(), &mut printed);
        }
        let kids = &children[index];
        for (i, &kid) in kids.iter().enumerate().rev() {
            let banner = (kids.len() > 1).then(|| {
                format!(
                    "branch {}/{} from {}{}",
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
    out.finish()
}

/// `✎ edited by <id>` / `✗ removed by <id>` for an entry's context edits.
pub fn edit_marks(edits: &[EditMark]) -> String {
    edits
        .iter()
        .map(|edit| {
            let verb = if edit.removes {
                "✗ removed"
            } else {
                "✎ edited"
            };
            format!("{verb} by {}", edit.by)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("?")
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Builds the text: blocks separated by blank lines (which Markdown needs
/// after a quote or a fence).
struct Writer<'a> {
    tree: &'a SessionTree,
    options: Options,
    out: String,
}

impl<'a> Writer<'a> {
    fn new(tree: &'a SessionTree, options: Options) -> Writer<'a> {
        Writer {
            tree,
            options,
            out: String::new(),
        }
    }

    fn markdown(&self) -> bool {
        self.options.style == Style::Markdown
    }

    fn line(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn blank(&mut self) {
        self.out.push('\n');
    }

    fn finish(self) -> String {
        self.out
    }

    fn title(&mut self) {
        let header = &self.tree.header;
        let cwd = safe(str_of(header, "cwd")).into_owned();
        let created = safe(str_of(header, "timestamp")).into_owned();
        let id = safe(&self.tree.session.session_id).into_owned();
        let path = safe(&self.tree.session.path).into_owned();
        if self.markdown() {
            self.line(&format!("# Session {id}"));
            self.blank();
            self.line(&format!("- file: `{path}`"));
            self.line(&format!("- cwd: `{cwd}`"));
            self.line(&format!("- created: {created}"));
            self.blank();
        } else {
            let theme = self.options.theme;
            self.line(&format!("{} {id}", theme.bold("session")));
            self.line(&format!("{} {path}", theme.dim("file   ")));
            self.line(&format!("{} {cwd}", theme.dim("cwd    ")));
            self.line(&format!("{} {created}", theme.dim("created")));
        }
    }

    fn banner(&mut self, text: &str) {
        if self.markdown() {
            self.line("---");
            self.blank();
            self.line(&format!("**{text}**"));
        } else {
            let theme = self.options.theme;
            self.line(&theme.bold(&format!("════ {text} ════")));
        }
        self.blank();
    }

    /// `── assistant (model) · time · id ──`, coloured by `role`.
    fn heading(&mut self, index: usize, role: &str, what: &str, mark: Option<&str>) {
        let node = &self.tree.nodes[index];
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
        let mut notes = String::new();
        if let Some(label) = self.tree.labels.get(&node.id) {
            notes.push_str(&format!("  🏷 {}", safe(label)));
        }
        if let Some(mark) = mark {
            notes.push_str(&format!("  {mark}"));
        }
        let what = safe(what);
        if self.markdown() {
            self.line(&format!("### {what} · {when} · `{}`{notes}", node.id));
            self.blank();
        } else {
            let theme = self.options.theme;
            let title = theme.role(role, &what);
            self.line(&format!("── {title} · {when} · {}{notes} ──", node.id));
        }
    }

    /// A block of session text.
    fn text(&mut self, text: &str) {
        let text = safe(text);
        if text.trim().is_empty() {
            return;
        }
        self.line(text.trim_end_matches('\n'));
        if self.markdown() {
            self.blank();
        }
    }

    /// Text set apart: a quote in Markdown, a bar in the terminal.
    fn quote(&mut self, text: &str) {
        let text = safe(text);
        if self.markdown() {
            for line in text.lines() {
                self.line(format!("> {line}").trim_end());
            }
            self.blank();
        } else {
            let theme = self.options.theme;
            for line in text.lines() {
                self.line(&theme.dim(&format!("  ┊ {line}")));
            }
        }
    }

    /// Verbatim text (tool output): fenced in Markdown, indented otherwise.
    fn verbatim(&mut self, text: &str) {
        let text = safe(text);
        let text = text.trim_end_matches('\n');
        if text.is_empty() {
            return;
        }
        if self.markdown() {
            // A fence longer than any run of backticks inside.
            let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
            let fence = "`".repeat(longest.max(2) + 1);
            self.line(&fence);
            self.line(text);
            self.line(&fence);
            self.blank();
        } else {
            for line in text.lines() {
                self.line(&format!("    {line}"));
            }
        }
    }

    /// A tool result's text, cut to `Tools::Lines` with a marker.
    fn tool_output(&mut self, text: &str) {
        match self.options.tools {
            Tools::Hidden => {}
            Tools::Full => self.verbatim(text),
            Tools::Lines(max) => {
                let lines: Vec<&str> = text.lines().collect();
                if lines.len() <= max {
                    self.verbatim(text);
                } else {
                    self.verbatim(&lines[..max].join("\n"));
                    let more = lines.len() - max;
                    let rest = format!(
                        "… {more} more line{} (piidx show --tool-lines 0 prints them)",
                        if more == 1 { "" } else { "s" }
                    );
                    let rest = self.options.theme.dim(&rest);
                    self.line(&rest);
                    if self.markdown() {
                        self.blank();
                    }
                }
            }
        }
    }

    /// Text and image blocks; thinking as a quote (tool calls are the caller's).
    fn content(&mut self, index: usize, value: Option<&Value>, base: &str) {
        match value {
            Some(Value::String(text)) => self.text(text),
            Some(Value::Array(blocks)) => {
                for (i, block) in blocks.iter().enumerate() {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => self.text(str_of(block, "text")),
                        Some("image") => {
                            let rowid = self.tree.nodes[index].rowid;
                            let info = self.tree.images.get(&(rowid, format!("{base}[{i}]")));
                            let mime = block.get("mimeType").and_then(Value::as_str);
                            let placeholder = match info {
                                Some(info) => image_placeholder(mime, info.byte_len),
                                None => self
                                    .tree
                                    .outside_placeholder(block)
                                    .unwrap_or_else(|| image_placeholder(mime, 0)),
                            };
                            self.text(&placeholder);
                        }
                        Some("thinking") => {
                            let redacted =
                                block.get("redacted").and_then(Value::as_bool) == Some(true);
                            let thinking = if redacted {
                                "[redacted thinking]"
                            } else {
                                str_of(block, "thinking")
                            };
                            if !thinking.is_empty() {
                                self.quote(&format!("thinking: {thinking}"));
                            }
                        }
                        Some("toolCall") => {}
                        Some(other) => self.text(&format!("[{other} block]")),
                        None => {}
                    }
                }
            }
            _ => {}
        }
    }

    /// One context message: `mark` says how a context edit changes it, and
    /// `results` holds the tool results to print under their calls.
    fn item(
        &mut self,
        item: &ContextItem,
        mark: Option<&str>,
        results: &HashMap<&str, &ContextItem>,
        printed: &mut HashSet<usize>,
    ) {
        let index = item.node;
        let message = &item.message;
        match item.kind {
            ContextKind::SystemCheckpoint => {
                self.heading(
                    index,
                    "system",
                    "system prompt kept by the compaction",
                    mark,
                );
                self.system_prompt(message);
            }
            ContextKind::CompactionSummary => {
                let tokens = message
                    .get("tokensBefore")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let what = format!("compaction summary ({tokens} tokens before)");
                self.heading(index, "summary", &what, mark);
                self.text(str_of(message, "summary"));
            }
            ContextKind::BranchSummary => {
                self.heading(index, "summary", "branch summary", mark);
                self.text(str_of(message, "summary"));
            }
            ContextKind::Custom => {
                let what = format!("custom: {}", str_of(message, "customType"));
                self.heading(index, "custom", &what, mark);
                self.content(index, message.get("content"), "$.content");
            }
            ContextKind::Message => self.message(item, mark, results, printed),
        }
        printed.insert(index);
        if !self.markdown() {
            self.blank();
        }
    }

    fn message(
        &mut self,
        item: &ContextItem,
        mark: Option<&str>,
        results: &HashMap<&str, &ContextItem>,
        printed: &mut HashSet<usize>,
    ) {
        let index = item.node;
        let message = &item.message;
        let who = role(message).to_owned();
        match who.as_str() {
            "system" => {
                self.heading(index, "system", "system prompt", mark);
                self.system_prompt(message);
            }
            "assistant" => {
                let what = format!("assistant ({})", str_of(message, "model"));
                self.heading(index, "assistant", &what, mark);
                self.content(index, message.get("content"), "$.message.content");
                let calls = message
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("toolCall"));
                for block in calls {
                    let name = str_of(block, "name");
                    let args = block
                        .get("arguments")
                        .map(Value::to_string)
                        .unwrap_or_default();
                    // Session text made safe first, then piidx's own colour
                    // around it (which `safe` would show as `^[`).
                    let call = format!("→ {} {}", safe(name), safe(&args));
                    let call = if self.markdown() {
                        format!("`{}`", call.replace('`', "'"))
                    } else {
                        self.options.theme.role("tool_call", &call)
                    };
                    self.line(&call);
                    if self.markdown() {
                        self.blank();
                    }
                    let Some(result) = results.get(str_of(block, "id")) else {
                        continue;
                    };
                    printed.insert(result.node);
                    if self.options.tools == Tools::Hidden {
                        continue;
                    }
                    let error =
                        result.message.get("isError").and_then(Value::as_bool) == Some(true);
                    let edited = result
                        .edited_by
                        .map(|edit| format!(" ✎ edited by {}", self.tree.nodes[edit].id))
                        .unwrap_or_default();
                    let answer = format!(
                        "← {}{} ({}){edited}",
                        safe(name),
                        if error { " ERROR" } else { "" },
                        self.tree.nodes[result.node].id,
                    );
                    let answer = if error {
                        self.options.theme.error(&answer)
                    } else {
                        self.options.theme.role("tool_result", &answer)
                    };
                    self.line(&answer);
                    if self.markdown() {
                        self.blank();
                    }
                    let text = block_text(self.tree, result.message.get("content"));
                    self.tool_output(&text);
                }
                if let Some(error) = message.get("errorMessage").and_then(Value::as_str) {
                    let text = self
                        .options
                        .theme
                        .error(&format!("[error: {}]", safe(error)));
                    self.line(&text);
                }
            }
            "toolResult" => {
                let what = format!("tool result: {}", str_of(message, "toolName"));
                self.heading(index, "toolResult", &what, mark);
                self.tool_output(&block_text(self.tree, message.get("content")));
            }
            "bashExecution" => {
                self.heading(index, "bash", "bash", mark);
                let code = message
                    .get("exitCode")
                    .and_then(Value::as_i64)
                    .map_or("none".to_owned(), |c| c.to_string());
                self.text(&format!("$ {}  (exit {code})", str_of(message, "command")));
                self.tool_output(str_of(message, "output"));
            }
            other => {
                let what = match other {
                    "custom" => format!("custom: {}", str_of(message, "customType")),
                    _ => other.to_owned(),
                };
                self.heading(index, other, &what, mark);
                self.content(index, message.get("content"), "$.message.content");
            }
        }
    }

    /// A system prompt: its sections and tools by name and size, or (with
    /// `full_system`) its whole text.
    fn system_prompt(&mut self, message: &Value) {
        let size = |bytes: usize| {
            if bytes >= 1024 {
                format!("{:.1} KB", bytes as f64 / 1024.0)
            } else {
                format!("{bytes} B")
            }
        };
        let full = self.options.full_system;
        let mut lines = Vec::new();
        if let Some(text) = message
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            lines.push(if full {
                text.to_owned()
            } else {
                format!("content: {}", size(text.len()))
            });
        }
        if let Some(sections) = message.get("sections").and_then(Value::as_object) {
            for (name, text) in sections {
                match text.as_str() {
                    Some(text) if full => lines.push(text.to_owned()),
                    Some(text) => lines.push(format!("§ {name}: {}", size(text.len()))),
                    None => lines.push(format!("§ {name}: removed")),
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
            lines.push(format!("tools: {} ({})", added.join(", "), size(bytes)));
        }
        let removed = names("toolsRemoved");
        if !removed.is_empty() {
            lines.push(format!("tools removed: {}", removed.join(", ")));
        }
        if !full && !lines.is_empty() {
            lines.push("(piidx show --system prints it in full)".to_owned());
        }
        if self.markdown() {
            for line in lines {
                self.text(&line);
            }
        } else {
            self.text(&lines.join("\n"));
        }
    }
}

/// The text blocks of a tool result, one per line (a string as it is).
fn block_text(tree: &SessionTree, content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => str_of(block, "text").to_owned(),
                Some("image") => tree.outside_placeholder(block).unwrap_or_else(|| {
                    image_placeholder(block.get("mimeType").and_then(Value::as_str), 0)
                }),
                Some(other) => format!("[{other} block]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
