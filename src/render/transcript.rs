//! `piidx show`: a session's current branch as a readable transcript (the
//! context `query::tree::build_context` builds, as Pi does), or the whole
//! tree (`--all`), as text or Markdown, or the path's entries as JSON.
//!
//! Only formatting lives here: `query::transcript` reads the entries into
//! typed blocks. Tool calls are printed with their results right under
//! them (or folded: `Tools`); labels and context edits are shown next to
//! the entries they mark; an entry that gives no message (a model change,
//! a label, a name) is a note line: always in `--all`, and in the branch
//! view when asked (`--notes`, as the web page shows them), since Pi's
//! context, which that view prints, holds no such entry; images become placeholders such as
//! `[image image/png 12 KB]` (also in `--json`, where the payload string is
//! replaced by the placeholder). Session text goes through `safe`;
//! Markdown output is CommonMark.

use serde_json::Value;

use super::{Theme, safe};
use crate::query::transcript::{
    self, Assistant, Block, Body, Execution, Head, Image, Part, SystemPrompt,
};
use crate::query::tree::{
    self, EditMark, SessionTree, active_set, edits_by_target, image_placeholder,
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
    /// The branch view also prints the entries that give no message.
    pub notes: bool,
    pub theme: Theme,
}

/// The transcript of `path` as Pi's context sees it.
pub fn context(tree: &SessionTree, path: &[usize], options: Options) -> String {
    let blocks = transcript::branch(tree, path);
    let mut out = Writer::new(options);
    out.title(&Head::of(tree));
    if let Some(&leaf) = path.last() {
        out.line(&format!(
            "branch: {} entries, leaf {}",
            path.len(),
            tree.nodes[leaf].id
        ));
        out.blank();
    }
    for block in &blocks {
        if !options.notes && matches!(block.body, Body::Note { .. }) {
            continue;
        }
        let mark = block
            .edited_by
            .as_ref()
            .map(|edit| format!("✎ edited by {edit}"));
        out.block(block, mark.as_deref(), "·");
    }
    out.finish()
}

/// Every entry of the tree, depth first, branch points marked, and the
/// entries a `context_edit` changes in the model's context marked too.
pub fn whole_tree(tree: &SessionTree, options: Options) -> String {
    let (roots, children) = tree.children();
    let active = active_set(tree);
    let edits = edits_by_target(tree);
    let mut out = Writer::new(options);
    out.title(&Head::of(tree));
    if roots.len() > 1 {
        out.line(&format!("{} roots", roots.len()));
        out.blank();
    }
    let mut stack: Vec<(usize, Option<String>)> =
        roots.iter().rev().map(|&root| (root, None)).collect();
    while let Some((index, banner)) = stack.pop() {
        if let Some(banner) = banner {
            out.banner(&banner);
        }
        let node = &tree.nodes[index];
        let mark = edits
            .get(node.id.as_str())
            .map(|list| edit_marks(&tree::edit_marks(tree, Some(list))));
        let marker = if active.contains(&index) { "•" } else { " " };
        for block in &transcript::entry(tree, index) {
            out.block(block, mark.as_deref(), marker);
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

/// Builds the text: blocks separated by blank lines (which Markdown needs
/// after a quote or a fence).
struct Writer {
    options: Options,
    out: String,
}

impl Writer {
    fn new(options: Options) -> Writer {
        Writer {
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

    fn title(&mut self, head: &Head) {
        let cwd = safe(&head.cwd).into_owned();
        let created = safe(head.created.as_deref().unwrap_or("")).into_owned();
        let id = safe(&head.session_id).into_owned();
        let path = safe(&head.path).into_owned();
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
    fn heading(&mut self, block: &Block, role: &str, what: &str, mark: Option<&str>) {
        let when = block
            .time_ms
            .map(|ms| {
                format_iso_ms(ms)
                    .replace('T', " ")
                    .chars()
                    .take(19)
                    .collect::<String>()
            })
            .unwrap_or_default();
        let mut notes = String::new();
        if let Some(label) = &block.label {
            notes.push_str(&format!("  🏷 {}", safe(label)));
        }
        if let Some(mark) = mark {
            notes.push_str(&format!("  {mark}"));
        }
        let what = safe(what);
        let id = &block.entry_id;
        if self.markdown() {
            self.line(&format!("### {what} · {when} · `{id}`{notes}"));
            self.blank();
        } else {
            let theme = self.options.theme;
            let title = theme.role(role, &what);
            self.line(&format!("── {title} · {when} · {id}{notes} ──"));
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

    /// Text and image parts; thinking as a quote.
    fn content(&mut self, parts: &[Part]) {
        for part in parts {
            match part {
                Part::Text { text } => self.text(text),
                Part::Image(image) => {
                    let placeholder = match &image.stored {
                        Some(stored) => image_placeholder(image.mime.as_deref(), stored.byte_len),
                        None => outside_or_unknown(image),
                    };
                    self.text(&placeholder);
                }
                Part::Thinking { text } => {
                    if !text.is_empty() {
                        self.quote(&format!("thinking: {text}"));
                    }
                }
                Part::Other {
                    block_type: Some(other),
                } => self.text(&format!("[{other} block]")),
                Part::Other { block_type: None } => {}
            }
        }
    }

    /// One block: `mark` says how a context edit changes it; `marker` marks
    /// a note (`•`: on the current branch of `--all`).
    fn block(&mut self, block: &Block, mark: Option<&str>, marker: &str) {
        match &block.body {
            Body::Note { summary, .. } => {
                let mut text = format!("{marker} {} {}", block.entry_id, safe(summary));
                if let Some(mark) = mark {
                    text.push_str(&format!("  {mark}"));
                }
                self.line(&text);
                self.blank();
                return;
            }
            Body::System(prompt) => {
                let what = if prompt.checkpoint {
                    "system prompt kept by the compaction"
                } else {
                    "system prompt"
                };
                self.heading(block, "system", what, mark);
                self.system_prompt(prompt);
            }
            Body::Compaction {
                summary,
                tokens_before,
            } => {
                let what = format!("compaction summary ({tokens_before} tokens before)");
                self.heading(block, "summary", &what, mark);
                self.text(summary);
            }
            Body::BranchSummary { summary } => {
                self.heading(block, "summary", "branch summary", mark);
                self.text(summary);
            }
            Body::Custom {
                custom_type,
                content,
            } => {
                self.heading(block, "custom", &format!("custom: {custom_type}"), mark);
                self.content(content);
            }
            Body::User { content } => {
                self.heading(block, "user", "user", mark);
                self.content(content);
            }
            Body::Developer { content } => {
                self.heading(block, "developer", "developer", mark);
                self.content(content);
            }
            Body::Other { role, content } => {
                self.heading(block, role, role, mark);
                self.content(content);
            }
            Body::Assistant(assistant) => {
                let what = format!("assistant ({})", assistant.model);
                self.heading(block, "assistant", &what, mark);
                self.assistant(assistant);
            }
            Body::ToolResult(result) => {
                let what = format!("tool result: {}", result.tool_name);
                self.heading(block, "toolResult", &what, mark);
                self.tool_output(&result_text(&result.content));
            }
            Body::Bash(run) => {
                self.heading(block, "bash", "bash", mark);
                self.bash(run);
            }
            Body::Python(run) => {
                self.heading(block, "bash", "python", mark);
                // The code set apart, as `>>>` lines (a Markdown quote
                // otherwise), then its exit code and output.
                let code: Vec<String> = run.command.lines().map(|l| format!(">>> {l}")).collect();
                self.verbatim(&code.join("\n"));
                self.text(&format!("(exit {})", exit_code(run)));
                self.tool_output(&run.output);
            }
            Body::FileMention { files } => {
                self.heading(block, "custom", "file mention", mark);
                for file in files {
                    match &file.skipped_reason {
                        Some(why) => self.text(&format!("@{} (skipped: {why})", file.path)),
                        None => {
                            self.text(&format!("@{}", file.path));
                            self.tool_output(file.content.as_deref().unwrap_or(""));
                        }
                    }
                }
            }
        }
        if !self.markdown() {
            self.blank();
        }
    }

    /// `$ command  (exit N)` and its output.
    fn bash(&mut self, run: &Execution) {
        let prompt = "$ ";
        let code = exit_code(run);
        self.text(&format!("{prompt}{}  (exit {code})", run.command));
        self.tool_output(&run.output);
    }

    /// An answer: its content, then each call with its result under it.
    fn assistant(&mut self, assistant: &Assistant) {
        self.content(&assistant.content);
        for call in &assistant.calls {
            let args = call
                .arguments
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default();
            // Session text made safe first, then piidx's own colour
            // around it (which `safe` would show as `^[`).
            let line = format!("→ {} {}", safe(&call.name), safe(&args));
            let line = if self.markdown() {
                format!("`{}`", line.replace('`', "'"))
            } else {
                self.options.theme.role("tool_call", &line)
            };
            self.line(&line);
            if self.markdown() {
                self.blank();
            }
            let Some(result) = &call.result else {
                continue;
            };
            if self.options.tools == Tools::Hidden {
                continue;
            }
            let edited = result
                .edited_by
                .as_ref()
                .map(|edit| format!(" ✎ edited by {edit}"))
                .unwrap_or_default();
            let answer = format!(
                "← {}{} ({}){edited}",
                safe(&call.name),
                if result.is_error { " ERROR" } else { "" },
                result.entry_id,
            );
            let answer = if result.is_error {
                self.options.theme.error(&answer)
            } else {
                self.options.theme.role("tool_result", &answer)
            };
            self.line(&answer);
            if self.markdown() {
                self.blank();
            }
            self.tool_output(&result_text(&result.content));
        }
        if let Some(error) = &assistant.error {
            let text = self
                .options
                .theme
                .error(&format!("[error: {}]", safe(error)));
            self.line(&text);
        }
    }

    /// A system prompt: its sections and tools by name and size, or (with
    /// `full_system`) its whole text.
    fn system_prompt(&mut self, prompt: &SystemPrompt) {
        let size = |bytes: usize| {
            if bytes >= 1024 {
                format!("{:.1} KB", bytes as f64 / 1024.0)
            } else {
                format!("{bytes} B")
            }
        };
        let full = self.options.full_system;
        let mut lines = Vec::new();
        if let Some(text) = prompt.content.as_deref().filter(|t| !t.is_empty()) {
            lines.push(if full {
                text.to_owned()
            } else {
                format!("content: {}", size(text.len()))
            });
        }
        for section in &prompt.sections {
            match &section.text {
                Some(text) if full => lines.push(text.clone()),
                Some(text) => lines.push(format!("§ {}: {}", section.name, size(text.len()))),
                None => lines.push(format!("§ {}: removed", section.name)),
            }
        }
        if !prompt.tools_added.is_empty() {
            lines.push(format!(
                "tools: {} ({})",
                prompt.tools_added.join(", "),
                size(prompt.tools_added_bytes)
            ));
        }
        if !prompt.tools_removed.is_empty() {
            lines.push(format!(
                "tools removed: {}",
                prompt.tools_removed.join(", ")
            ));
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

fn exit_code(run: &Execution) -> String {
    run.exit_code
        .map_or("none".to_owned(), |code| code.to_string())
}

/// An image the index does not keep: where it is kept, or its type alone.
fn outside_or_unknown(image: &Image) -> String {
    image
        .outside
        .as_ref()
        .and_then(|outside| outside.placeholder.clone())
        .unwrap_or_else(|| image_placeholder(image.mime.as_deref(), 0))
}

/// The parts of a tool result, one per line.
fn result_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.clone(),
            Part::Image(image) => outside_or_unknown(image),
            Part::Thinking { .. } => "[thinking block]".to_owned(),
            Part::Other { block_type } => block_type
                .as_ref()
                .map(|other| format!("[{other} block]"))
                .unwrap_or_default(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
