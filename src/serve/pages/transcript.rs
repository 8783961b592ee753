//! A session's branch as HTML: the blocks `query::transcript` makes of it,
//! formatted as `render::transcript` formats them for a terminal (tool
//! results under their calls, thinking folded, images shown, subagent
//! transcripts nested). Every session text goes through `html::esc`, and
//! an assistant's Markdown through `html::markdown`.

use std::fmt::Write;

use serde_json::Value;

use super::entry_href;
use crate::query::transcript::{
    self, Block, Body, Execution, Image, NestedMessage, Part, SystemPrompt, ToolCall, ToolResult,
    Usage,
};
use crate::query::tree::{self, SessionTree};
use crate::render::{group_digits, money};
use crate::serve::html::{self, cut, esc, push_esc};
use crate::serve::params::encode;

/// Turns a branch's blocks (`query::transcript`) into HTML as
/// `render::transcript` turns them into text: tool results under their
/// calls, thinking folded, images shown, subagent transcripts nested.
pub(super) struct Transcript<'a> {
    session: &'a str,
    out: &'a mut String,
    /// Where the page shows every output whole; `None`: it does.
    full_href: Option<String>,
    /// Text blocks are Markdown (an assistant's answer), rendered as such.
    markdown: bool,
}

/// Bytes of a tool output (or system prompt) shown before it is cut: a
/// few outputs of megabytes would otherwise make the page slow to send and
/// to lay out. `?full=1` shows them whole.
const OUTPUT_SHOWN: usize = 8 * 1024;

impl<'a> Transcript<'a> {
    pub(super) fn new(
        session: &'a str,
        out: &'a mut String,
        full_href: Option<String>,
    ) -> Transcript<'a> {
        Transcript {
            session,
            out,
            full_href,
            markdown: false,
        }
    }

    /// The branch `path` of `tree`, as Pi's context sees it.
    pub(super) fn context(&mut self, tree: &SessionTree, path: &[usize]) {
        for block in &transcript::branch(tree, path) {
            self.block(block);
        }
    }

    /// A tool output, cut after `OUTPUT_SHOWN` bytes unless the page shows
    /// them whole.
    fn output(&mut self, text: &str) {
        let Some(href) = self.full_href.clone().filter(|_| text.len() > OUTPUT_SHOWN) else {
            self.pre("out", text);
            return;
        };
        let mut end = OUTPUT_SHOWN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.pre("out", &text[..end]);
        let _ = write!(
            self.out,
            "<div class=\"cutnote\">… {} more bytes · <a href=\"{}\">show outputs in full</a></div>",
            group_digits((text.len() - end) as i64),
            esc(&href)
        );
    }

    fn anchor(&mut self, block: &Block, class: &str, what: &str) {
        let id = &block.entry_id;
        let when = block.time_ms.map(crate::render::minute).unwrap_or_default();
        let _ = write!(
            self.out,
            "<article class=\"msg {class}\" id=\"e-{}\"><header><span class=\"who\">{}</span><time>{}</time><a class=\"id\" href=\"{}\">{}</a>",
            esc(id),
            esc(what),
            esc(&when),
            entry_href(self.session, id),
            esc(&id.chars().take(8).collect::<String>())
        );
        if let Some(label) = &block.label {
            let _ = write!(self.out, "<span class=\"label\">{}</span>", esc(label));
        }
    }

    /// An entry on the branch that gives the model no message: a label, a
    /// context edit, a model or thinking-level change, a session name.
    fn note(&mut self, block: &Block, entry_type: &str, summary: &str) {
        let _ = write!(
            self.out,
            "<div class=\"note\" id=\"e-{}\"><span class=\"ty\">{}</span> ",
            esc(&block.entry_id),
            esc(entry_type)
        );
        push_esc(self.out, &cut(summary, 200));
        self.out.push_str("</div>");
    }

    /// The header of a block that shows whether a context edit changed it.
    fn head(&mut self, block: &Block, class: &str, what: &str) {
        self.anchor(block, class, what);
        self.edit_mark(block.edited_by.as_deref());
        self.out.push_str("</header>");
    }

    fn block(&mut self, block: &Block) {
        match &block.body {
            Body::Note {
                entry_type,
                summary,
            } => return self.note(block, entry_type, summary),
            Body::System(prompt) => {
                let what = if prompt.checkpoint {
                    "system prompt kept by the compaction"
                } else {
                    "system prompt"
                };
                self.head(block, "system", what);
                self.system(prompt);
            }
            Body::Compaction {
                summary,
                tokens_before,
            } => {
                let what = format!(
                    "compaction · {} tokens before",
                    group_digits(*tokens_before)
                );
                self.anchor(block, "compaction", &what);
                self.out.push_str("</header>");
                self.text(summary);
            }
            Body::BranchSummary { summary } => {
                self.anchor(block, "compaction", "branch summary");
                self.out.push_str("</header>");
                self.text(summary);
            }
            Body::Custom {
                custom_type,
                content,
            } => {
                self.head(block, "custom", &format!("custom: {custom_type}"));
                self.content(content);
            }
            Body::User { content } => {
                self.head(block, "user", "user");
                self.content(content);
            }
            Body::Developer { content } => {
                self.head(block, "custom", "developer");
                self.content(content);
            }
            Body::Other { role, content } => {
                self.head(block, "custom", role);
                self.content(content);
            }
            Body::Assistant(assistant) => {
                let what = format!("assistant · {}", assistant.model);
                self.anchor(block, "assistant", &what);
                self.edit_mark(block.edited_by.as_deref());
                self.usage(assistant.usage);
                self.out.push_str("</header>");
                self.markdown = true;
                self.content(&assistant.content);
                self.markdown = false;
                for call in &assistant.calls {
                    self.tool_call(call);
                }
                if let Some(error) = &assistant.error {
                    self.pre("error", &format!("error: {error}"));
                }
            }
            Body::ToolResult(result) => {
                self.head(
                    block,
                    "tool",
                    &format!("tool result · {}", result.tool_name),
                );
                self.tool_output(result);
            }
            Body::Bash(run) => {
                self.head(block, "bash", "bash (user)");
                self.execution("$ ", run);
            }
            Body::Python(run) => {
                self.head(block, "bash", "python");
                self.execution(">>> ", run);
            }
            Body::FileMention { files } => {
                self.head(block, "custom", "file mention");
                for file in files {
                    match &file.skipped_reason {
                        Some(why) => self.pre("cmd", &format!("@{} (skipped: {why})", file.path)),
                        None => {
                            self.pre("cmd", &format!("@{}", file.path));
                            self.output(file.content.as_deref().unwrap_or(""));
                        }
                    }
                }
            }
        }
        self.out.push_str("</article>");
    }

    /// `$ command   (exit N)` and its output.
    fn execution(&mut self, prompt: &str, run: &Execution) {
        let code = run
            .exit_code
            .map_or("none".to_owned(), |code| code.to_string());
        self.pre("cmd", &format!("{prompt}{}   (exit {code})", run.command));
        self.output(&run.output);
    }

    fn edit_mark(&mut self, edited_by: Option<&str>) {
        if let Some(edit) = edited_by {
            let _ = write!(
                self.out,
                "<span class=\"edit\">edited by {}</span>",
                esc(edit)
            );
        }
    }

    fn text(&mut self, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        if self.markdown {
            self.out.push_str("<div class=\"text md\">");
            self.out.push_str(&html::markdown(text.trim_end()));
        } else {
            self.out.push_str("<div class=\"text\">");
            push_esc(self.out, text.trim_end());
        }
        self.out.push_str("</div>");
    }

    fn pre(&mut self, class: &str, text: &str) {
        let text = text.trim_end_matches('\n');
        if text.is_empty() {
            return;
        }
        let _ = write!(self.out, "<pre class=\"{class}\">");
        push_esc(self.out, text);
        self.out.push_str("</pre>");
    }

    fn image(&mut self, image: &Image) {
        let mime = image.mime.as_deref().unwrap_or("");
        // Kept outside the session file: from the agent's store when there.
        if let Some(outside) = &image.outside {
            let placeholder = outside
                .placeholder
                .clone()
                .unwrap_or_else(|| format!("[image {mime}]"));
            if outside.found {
                let _ = write!(
                    self.out,
                    "<img class=\"img\" loading=\"lazy\" alt=\"{}\" title=\"{}\" src=\"/s/{}/image?b={}&amp;m={}\">",
                    esc(&placeholder),
                    esc(&placeholder),
                    encode(self.session),
                    outside.hex,
                    encode(mime)
                );
            } else {
                let _ = write!(
                    self.out,
                    "<div class=\"img note\">{}</div>",
                    esc(&placeholder)
                );
            }
            return;
        }
        match &image.stored {
            Some(stored) => {
                let _ = write!(
                    self.out,
                    "<img class=\"img\" loading=\"lazy\" alt=\"{}\" src=\"/s/{}/image?e={}&amp;p={}&amp;m={}\">",
                    esc(&tree::image_placeholder(
                        stored.mime_type.as_deref(),
                        stored.byte_len
                    )),
                    encode(self.session),
                    stored.rowid,
                    encode(&stored.path),
                    encode(stored.mime_type.as_deref().unwrap_or(mime))
                );
            }
            None => {
                let _ = write!(self.out, "<div class=\"img\">[image {}]</div>", esc(mime));
            }
        }
    }

    /// Text, image and thinking parts.
    fn content(&mut self, parts: &[Part]) {
        for part in parts {
            match part {
                Part::Text { text } => self.text(text),
                Part::Image(image) => self.image(image),
                Part::Thinking { text } => {
                    if !text.trim().is_empty() {
                        self.out.push_str(
                            "<details class=\"thinking\"><summary>thinking</summary><div class=\"text\">",
                        );
                        push_esc(self.out, text.trim_end());
                        self.out.push_str("</div></details>");
                    }
                }
                Part::Other {
                    block_type: Some(other),
                } => {
                    let _ = write!(self.out, "<div class=\"note\">[{} block]</div>", esc(other));
                }
                Part::Other { block_type: None } => {}
            }
        }
    }

    fn usage(&mut self, usage: Option<Usage>) {
        let Some(Usage { total_tokens, cost }) = usage else {
            return;
        };
        if total_tokens > 0 || cost > 0.0 {
            let _ = write!(
                self.out,
                "<span class=\"usage\">{} tok · {}</span>",
                group_digits(total_tokens),
                money(cost)
            );
        }
    }

    /// A tool call with its result under it.
    fn tool_call(&mut self, call: &ToolCall) {
        let result = call.result.as_ref();
        let error = result.is_some_and(|r| r.is_error);
        let args_text = arguments_text(call.arguments.as_ref());
        let _ = write!(
            self.out,
            "<div class=\"call{}\"><div class=\"callhead\"><span class=\"tool\">{}</span>",
            if error { " err" } else { "" },
            esc(&call.name)
        );
        match result {
            Some(result) => {
                let id = &result.entry_id;
                let _ = write!(
                    self.out,
                    "<span class=\"res\" id=\"e-{}\">{} · {}</span>",
                    esc(id),
                    if error { "error" } else { "result" },
                    esc(&id.chars().take(8).collect::<String>())
                );
                self.edit_mark(result.edited_by.as_deref());
            }
            None => self
                .out
                .push_str("<span class=\"res none\">no result</span>"),
        }
        self.out.push_str("</div>");
        self.pre("args", &args_text);
        if let Some(result) = result {
            self.tool_output(result);
        }
        self.out.push_str("</div>");
    }

    /// A tool result's content, and the transcripts of the subagent runs
    /// it records, nested.
    fn tool_output(&mut self, result: &ToolResult) {
        let mut text = String::new();
        for part in &result.content {
            match part {
                Part::Text { text: more } => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(more);
                }
                Part::Image(image) => {
                    self.output(&std::mem::take(&mut text));
                    self.image(image);
                }
                _ => {}
            }
        }
        self.output(&text);
        for run in &result.runs {
            let _ = write!(
                self.out,
                "<details class=\"sub\"{}><summary>subagent run #{} · {} · {} messages · {}</summary>",
                // A short run is shown open; a long one stays folded.
                if run.messages.len() <= 4 { " open" } else { "" },
                run.position,
                esc(run.agent.as_deref().unwrap_or("?")),
                run.messages.len(),
                esc(&cut(&run.task, 120))
            );
            self.nested(&run.messages);
            self.out.push_str("</details>");
        }
    }

    /// A subagent's own messages (not entries: no ids, no tree).
    fn nested(&mut self, messages: &[NestedMessage]) {
        for message in messages {
            let role = message.role.as_str();
            let class = match role {
                "assistant" => "assistant",
                "user" => "user",
                "toolResult" => "tool",
                _ => "custom",
            };
            let what = match role {
                "assistant" => format!("assistant · {}", message.model),
                "toolResult" => format!("tool result · {}", message.tool_name),
                other => other.to_owned(),
            };
            let _ = write!(
                self.out,
                "<article class=\"msg {class}\"><header><span class=\"who\">{}</span></header>",
                esc(&what)
            );
            if role == "toolResult" {
                self.output(&message.output);
            } else {
                self.content(&message.content);
                for call in &message.calls {
                    let args = arguments_text(call.arguments.as_ref());
                    let _ = write!(
                        self.out,
                        "<div class=\"call\"><div class=\"callhead\"><span class=\"tool\">{}</span></div>",
                        esc(&call.name)
                    );
                    self.pre("args", &args);
                    self.out.push_str("</div>");
                }
            }
            self.out.push_str("</article>");
        }
    }

    /// A system prompt, folded.
    fn system(&mut self, prompt: &SystemPrompt) {
        let mut text = prompt.content.clone().unwrap_or_default();
        for section in &prompt.sections {
            let _ = write!(
                text,
                "\n\n§ {}\n{}",
                section.name,
                section.text.as_deref().unwrap_or("(removed)")
            );
        }
        let _ = write!(
            self.out,
            "<details class=\"system\"><summary>{} characters</summary>",
            text.chars().count()
        );
        self.output(text.trim());
        self.out.push_str("</details>");
    }
}

/// A tool call's arguments as shown: a shell command as `$ command` (its
/// other arguments after it, as `# key: value`), one string argument as it
/// is (a path), else pretty JSON.
fn arguments_text(args: Option<&Value>) -> String {
    let args = args.unwrap_or(&Value::Null);
    if let Some(command) = args.get("command").and_then(Value::as_str) {
        let mut text = format!("$ {command}");
        for (key, value) in args.as_object().into_iter().flatten() {
            if key != "command" {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                let _ = write!(text, "\n# {key}: {value}");
            }
        }
        return text;
    }
    match args {
        Value::Object(map) if map.len() == 1 => match map.values().next() {
            Some(Value::String(s)) => s.clone(),
            _ => serde_json::to_string_pretty(args).unwrap_or_default(),
        },
        _ => serde_json::to_string_pretty(args).unwrap_or_default(),
    }
}
