//! The HTML pages, rendered on the server from the same `query` answers
//! the CLI prints: search, the session list, a session (its current
//! branch as a transcript, and its entry tree), subagent runs, usage with
//! charts (inline SVG) and tool statistics. Every session text goes
//! through `html::esc`. A page works without its script; the script
//! (`assets/app.js`) adds search as you type, the tab switch, copying and
//! the live updates of `serve --watch`.

use std::collections::HashSet;
use std::fmt::Write;

use serde_json::Value;

use super::api::{self, Failure};
use super::html::{self, Nav, cut, esc, minute, page, push_esc};
use super::params::{Params, encode};
use super::routes::{Answer, Context};
use super::server::Local;
use crate::query::scope::Scope;
use crate::query::search::{self, Hit, ROLES};
use crate::query::sessions::{self as session_query, SessionsQuery};
use crate::query::subagents::{self, SubagentRun, SubagentsQuery};
use crate::query::transcript::{
    self, Block, Body, Execution, Image, NestedMessage, Part, SystemPrompt, ToolCall, ToolResult,
    Usage,
};
use crate::query::tree::{self, SessionTree, outline};
use crate::query::usage::{GroupBy, UsageReport, UsageRow};
use crate::render::usage::{bytes, duration};
use crate::render::{group_digits, money};
use crate::resume::{Mode, Plan};

/// Sessions listed at once on the sessions page unless `limit` says more.
const SESSIONS_SHOWN: usize = 300;

pub fn error(context: &Context, failure: &Failure) -> Answer {
    let main = format!(
        "<section class=\"error\"><h1>{}</h1><p>{}</p></section>",
        failure.status,
        esc(&failure.message)
    );
    let mut answer = Answer::html(page("error", Nav::None, context.live, &main));
    answer.status = failure.status;
    answer
}

/// `/s/<id>?branch=ENTRY#e-ENTRY`: a hit's entry in its branch.
/// An entry in its whole branch (`at`: the branch through it, to its
/// leaf), scrolled to it: what a search hit opens.
fn entry_href(session: &str, entry: &str) -> String {
    format!(
        "/s/{}?at={}#e-{}",
        encode(session),
        encode(entry),
        esc(entry)
    )
}

/// The branch that ends at an entry (`branch`: the tree's rows, as Pi's
/// `/tree` moves the leaf there).
fn branch_href(session: &str, entry: &str) -> String {
    format!(
        "/s/{}?branch={}#e-{}",
        encode(session),
        encode(entry),
        esc(entry)
    )
}

fn session_href(session: &str) -> String {
    format!("/s/{}", encode(session))
}

fn input(name: &str, label: &str, value: Option<&str>, placeholder: &str) -> String {
    format!(
        "<label>{label}<input name=\"{name}\" value=\"{}\" placeholder=\"{}\"></label>",
        esc(value.unwrap_or("")),
        esc(placeholder)
    )
}

/// A drop-down of `choices`; with `any`, a first choice that sets nothing.
fn select(name: &str, label: &str, value: Option<&str>, choices: &[&str], any: bool) -> String {
    let mut out = format!("<label>{label}<select name=\"{name}\">");
    if any {
        out.push_str("<option value=\"\">any</option>");
    }
    for choice in choices {
        let selected = if Some(*choice) == value {
            " selected"
        } else {
            ""
        };
        let _ = write!(out, "<option{selected}>{choice}</option>");
    }
    out.push_str("</select></label>");
    out
}

// ---------------------------------------------------------------- search

/// `/search?q=…`: the form, and the hits when there is a query
/// (`partial=1`: the hits alone, for search as you type).
pub fn search(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    let q = params.get("q").unwrap_or("");
    let results = if q.trim().is_empty() {
        "<p class=\"hint\">Type words to search every session: <code>\"exact phrase\"</code>, <code>prefix*</code>, <code>OR</code>, <code>NOT</code>. The filters are the CLI's (<code>piidx search --help</code>).</p>".to_owned()
    } else {
        match hits_page(local, params) {
            Ok((hits, ms, more)) => hits_html(&hits, ms, more.as_deref()),
            Err(failure) if failure.status < 500 => {
                format!("<p class=\"problem\">{}</p>", esc(&failure.message))
            }
            Err(failure) => return Err(failure),
        }
    };
    if params.flag("partial").unwrap_or(false) {
        return Ok(Answer::html(results));
    }
    let mut main = String::new();
    main.push_str("<form id=\"search\" class=\"search\" action=\"/search\" autocomplete=\"off\">");
    let _ = write!(
        main,
        "<input id=\"q\" name=\"q\" type=\"search\" value=\"{}\" placeholder=\"Search sessions…\" autofocus>",
        esc(q)
    );
    main.push_str("<div class=\"filters\">");
    main.push_str(&select("role", "kind", params.get("role"), &ROLES, true));
    main.push_str(&select(
        "type",
        "entry",
        params.get("type"),
        &[
            "message",
            "compaction",
            "branch_summary",
            "custom",
            "custom_message",
            "usage",
            "context_edit",
        ],
        true,
    ));
    main.push_str(&input("tool", "tool", params.get("tool"), "bash"));
    main.push_str(&input("model", "model", params.get("model"), "sonnet"));
    main.push_str(&input(
        "project",
        "project",
        params.get("project"),
        "cwd or part",
    ));
    main.push_str(&input(
        "since",
        "since",
        params.get("since"),
        "7d, 2026-02-01",
    ));
    main.push_str(&input("until", "until", params.get("until"), "today"));
    main.push_str(&select(
        "sort",
        "order",
        params.get("sort"),
        &["rank", "recent"],
        false,
    ));
    let checked = if params.flag("substring").unwrap_or(false) {
        " checked"
    } else {
        ""
    };
    let _ = write!(
        main,
        "<label class=\"check\"><input type=\"checkbox\" name=\"substring\" value=\"1\"{checked}>substring</label>"
    );
    main.push_str("<button>Search</button></div></form>");
    let _ = write!(
        main,
        "<section id=\"results\" data-region>{results}</section>"
    );
    let title = if q.is_empty() { "Search" } else { q };
    Ok(Answer::html(page(title, Nav::Search, context.live, &main)))
}

/// The hits the search page shows, the time taken, and the link to more
/// when there are more (one hit beyond the page is asked for to know).
/// `typing=1` (the script's search as you type): the word being typed is a
/// prefix, as in the picker.
fn hits_page(
    local: &mut Local,
    params: &Params,
) -> Result<(Vec<Hit>, f64, Option<String>), Failure> {
    let mut options = api::search_options(params, local)?;
    if params.flag("typing")? {
        let open = !options.query.ends_with(char::is_whitespace);
        options.query = search::as_you_type(&options.query, open);
    }
    let shown = options.limit;
    options.limit = shown.saturating_add(1);
    let (mut hits, ms) = api::run_search(local, &options)?;
    let more = (hits.len() > shown).then(|| {
        let next = (shown + 20).to_string();
        format!("/search?{}", params.with(&[("limit", &next)], &["partial"]))
    });
    hits.truncate(shown);
    Ok((hits, ms, more))
}

fn hits_html(hits: &[Hit], ms: f64, more: Option<&str>) -> String {
    let mut out = String::with_capacity(hits.len() * 600 + 64);
    let _ = write!(
        out,
        "<p class=\"count\">{}{} hit{} <span class=\"ms\">{ms:.1} ms</span></p>",
        hits.len(),
        if more.is_some() { "+" } else { "" },
        if hits.len() == 1 && more.is_none() {
            ""
        } else {
            "s"
        }
    );
    for hit in hits {
        let title = hit
            .session_name
            .as_deref()
            .or(hit.first_message.as_deref())
            .unwrap_or("(untitled)");
        out.push_str("<article class=\"hit\"><div class=\"meta\">");
        let _ = write!(
            out,
            "<time>{}</time> <span class=\"role r-{}\">{}</span>",
            esc(&minute(hit.timestamp.as_deref())),
            esc(&hit.role),
            esc(&hit.role)
        );
        if let Some(tool) = &hit.tool_name {
            let _ = write!(out, " <span class=\"tool\">{}</span>", esc(tool));
        }
        let _ = write!(
            out,
            " <a class=\"title\" href=\"{}\">{}</a></div>",
            entry_href(&hit.session_id, &hit.entry_id),
            esc(&cut(title, 120))
        );
        let _ = write!(out, "<p class=\"snip\">{}</p>", html::snippet(&hit.snippet));
        out.push_str("<div class=\"where\">");
        push_esc(&mut out, &hit.cwd);
        let _ = write!(
            out,
            " · <span class=\"id\">{}</span> · line {}",
            esc(&hit.session_id.chars().take(8).collect::<String>()),
            hit.line_no
        );
        if let Some(run) = &hit.run {
            let _ = write!(
                out,
                " · subagent run #{} of {}",
                run.position,
                esc(run.agent.as_deref().unwrap_or("?"))
            );
            if run.child_session {
                let _ = write!(
                    out,
                    " (delegated by <a href=\"{}\">{}</a>)",
                    session_href(&run.parent_session_id),
                    esc(&run.parent_session_id.chars().take(8).collect::<String>())
                );
            }
        }
        out.push_str("</div></article>");
    }
    if let Some(href) = more {
        let _ = write!(
            out,
            "<p class=\"more\"><a id=\"more\" href=\"{}\">More hits</a></p>",
            esc(href)
        );
    }
    out
}

// ---------------------------------------------------------------- sessions

/// `/sessions`: newest first in Pi's order, filtered by project and date.
pub fn sessions(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    let mut list = api::session_list(local, params)?;
    // The projects to pick from: every cwd of the unfiltered list.
    let every = session_query::list(
        local.index()?,
        &SessionsQuery {
            all: params.flag("all")?,
            ..SessionsQuery::default()
        },
    )?;
    let mut cwds: Vec<&str> = every.iter().map(|s| s.cwd.as_str()).collect();
    cwds.sort_unstable();
    cwds.dedup();
    let total = list.len();
    let shown = params.count("limit")?.unwrap_or(SESSIONS_SHOWN);
    list.truncate(shown);
    let mut main = String::new();
    main.push_str("<form class=\"filters bar\" action=\"/sessions\">");
    let _ = write!(
        main,
        "<label>project<input name=\"project\" list=\"cwds\" value=\"{}\" placeholder=\"cwd or part\"></label><datalist id=\"cwds\">",
        esc(params.get("project").unwrap_or(""))
    );
    for cwd in &cwds {
        let _ = write!(main, "<option value=\"{}\">", esc(cwd));
    }
    main.push_str("</datalist>");
    main.push_str(&input(
        "since",
        "since",
        params.get("since"),
        "7d, 2026-02-01",
    ));
    main.push_str(&input("until", "until", params.get("until"), "today"));
    // The coding agents, as a facet, when the index holds more than Pi's.
    let mut agents: Vec<(&str, usize)> = Vec::new();
    for info in &every {
        match agents.iter_mut().find(|(agent, _)| *agent == info.agent) {
            Some((_, count)) => *count += 1,
            None => agents.push((info.agent.as_str(), 1)),
        }
    }
    if agents.len() > 1 || agents.first().is_some_and(|(agent, _)| *agent != "pi") {
        agents.sort_unstable();
        let chosen = params.get("agent").unwrap_or("");
        main.push_str("<label>agent<select name=\"agent\"><option value=\"\">any</option>");
        for (agent, count) in &agents {
            let selected = if *agent == chosen { " selected" } else { "" };
            let _ = write!(
                main,
                "<option value=\"{}\"{selected}>{} ({count})</option>",
                esc(agent),
                esc(agent)
            );
        }
        main.push_str("</select></label>");
    }
    let checked = if params.flag("all")? { " checked" } else { "" };
    let _ = write!(
        main,
        "<label class=\"check\"><input type=\"checkbox\" name=\"all\" value=\"1\"{checked}>also files Pi does not list</label><button>Filter</button></form>"
    );
    let _ = write!(
        main,
        "<section data-region id=\"list\"><p class=\"count\">{total} session{}</p><table class=\"sessions\"><thead><tr><th>modified</th><th>session</th><th class=\"num\">msgs</th><th>project</th></tr></thead><tbody>",
        if total == 1 { "" } else { "s" }
    );
    for info in &list {
        let title = info.name.as_deref().unwrap_or(&info.first_message);
        let modified = info
            .modified_ms
            .map(crate::render::minute)
            .unwrap_or_default();
        let _ = write!(
            main,
            "<tr><td class=\"when\">{}</td><td><a href=\"{}\">{}</a> <span class=\"id\">{}</span>{}{}{}</td><td class=\"num\">{}</td><td class=\"cwd\">{}</td></tr>",
            esc(&modified),
            session_href(&info.id),
            esc(&cut(title, 100)),
            esc(&info.id.chars().take(8).collect::<String>()),
            if info.parent_session_path.is_some() {
                " <span class=\"tag\">fork</span>"
            } else {
                ""
            },
            if info.listed_by_pi {
                ""
            } else {
                " <span class=\"tag\">not listed by Pi</span>"
            },
            if info.agent == "pi" {
                String::new()
            } else {
                format!(" <span class=\"tag\">{}</span>", esc(&info.agent))
            },
            info.message_count,
            esc(&info.cwd)
        );
    }
    main.push_str("</tbody></table>");
    if total > shown {
        let _ = write!(
            main,
            "<p><a href=\"/sessions?{}\">show all {total}</a></p>",
            esc(&params.with(&[("limit", &total.to_string())], &[]))
        );
    }
    main.push_str("</section>");
    Ok(Answer::html(page(
        "Sessions",
        Nav::Sessions,
        context.live,
        &main,
    )))
}

// ---------------------------------------------------------------- session

/// `/s/<id>`: the session's branch as a transcript and its tree (`view=tree`
/// shows the tree first; `branch=ENTRY` the branch ending there).
pub fn session(
    local: &mut Local,
    context: &Context,
    id: &str,
    params: &Params,
) -> Result<Answer, Failure> {
    let tree = api::load_tree(local, id)?;
    let session_id = tree.session.session_id.clone();
    let leaf = match (params.get("branch"), params.get("at")) {
        (Some(entry), _) => Some(tree.find(entry)?),
        (None, Some(entry)) => Some(tree.leaf_through(tree.find(entry)?)),
        (None, None) => tree.leaf(),
    };
    let path = leaf.map(|leaf| tree.path_to(leaf)).unwrap_or_default();
    let full_href =
        (!params.flag("full")?).then(|| format!("?{}", params.with(&[("full", "1")], &[])));
    // `pane=…`: one pane alone, which the page's script fetches when its
    // tab is first shown.
    match params.get("pane") {
        Some("tree") => {
            let mut out = String::new();
            tree_html(&tree, &session_id, leaf, &mut out);
            return Ok(Answer::html(out));
        }
        Some("transcript") => {
            let mut out = String::new();
            Transcript::new(&session_id, &mut out, full_href).context(&tree, &path);
            return Ok(Answer::html(out));
        }
        _ => {}
    }
    let index = local.index()?;
    let related = session_query::related(index, &session_id, &tree.session.path)?;
    let runs = subagents::run(
        index,
        &SubagentsQuery {
            scope: Scope {
                session: Some(tree.session.path.clone()),
                ..Scope::default()
            },
            ..SubagentsQuery::default()
        },
    )?;
    let header = &tree.header;
    let cwd = header.get("cwd").and_then(Value::as_str).unwrap_or("");
    let name = tree
        .nodes
        .iter()
        .rev()
        .find(|n| n.kind == "session_info")
        .and_then(|n| n.raw.get("name").and_then(Value::as_str))
        .filter(|n| !n.trim().is_empty());
    let first_user = tree.nodes.iter().find_map(|n| {
        (n.raw.pointer("/message/role").and_then(Value::as_str) == Some("user"))
            .then(|| tree::content_text(n.raw.pointer("/message/content")))
            .filter(|t| !t.trim().is_empty())
    });
    let title = name
        .map(str::to_owned)
        .or(first_user)
        .unwrap_or_else(|| session_id.clone());
    let mut main = String::with_capacity(tree.nodes.len() * 1200 + 4096);
    let _ = write!(
        main,
        "<section class=\"head\"><h1>{}</h1><dl><dt>id</dt><dd class=\"id\">{}</dd><dt>project</dt><dd>{}</dd><dt>file</dt><dd>{}</dd><dt>created</dt><dd>{}</dd><dt>entries</dt><dd>{}</dd></dl>",
        esc(&cut(&title, 160)),
        esc(&session_id),
        esc(cwd),
        esc(&tree.session.path),
        esc(&minute(header.get("timestamp").and_then(Value::as_str))),
        tree.nodes.len()
    );
    // Links to the sessions around this one.
    let mut links = String::new();
    if let Some(parent) = &related.parent {
        let _ = write!(
            links,
            "<li>forked from <a href=\"{}\">{}</a></li>",
            session_href(&parent.id),
            esc(&cut(&parent.title, 80))
        );
    } else if let Some(parent) = header.get("parentSession").and_then(Value::as_str) {
        let _ = write!(links, "<li>forked from {} (not indexed)</li>", esc(parent));
    }
    if let Some(by) = &related.delegated_by {
        let _ = write!(
            links,
            "<li>subagent session delegated by <a href=\"{}\">{}</a></li>",
            session_href(&by.id),
            esc(&cut(&by.title, 80))
        );
    }
    for fork in &related.forks {
        let _ = write!(
            links,
            "<li>fork: <a href=\"{}\">{}</a></li>",
            session_href(&fork.id),
            esc(&cut(&fork.title, 80))
        );
    }
    for run in runs.iter().filter(|r| r.child_session.is_some()) {
        let child = run.child_session.as_deref().unwrap_or("");
        let _ = write!(
            links,
            "<li>subagent {}: <a href=\"{}\">{}</a> ({})</li>",
            esc(run.agent.as_deref().unwrap_or("?")),
            session_href(child),
            esc(&cut(run.task.as_deref().unwrap_or(child), 80)),
            esc(run.status.as_deref().unwrap_or("?"))
        );
    }
    if !links.is_empty() {
        let _ = write!(main, "<ul class=\"links\">{links}</ul>");
    }
    // The command that resumes it in Pi (what `piidx resume --print` prints
    // when the file is there; `piidx resume` rebuilds a gone one first).
    let cwd_here = !cwd.is_empty() && std::path::Path::new(cwd).is_dir();
    let plan = Plan {
        file: tree.session.path.clone().into(),
        cwd: cwd.into(),
        mode: Mode::Resume,
        rebuilt: false,
        missing_cwd: None,
        program: "pi",
    };
    // oh-my-pi's sessions resume in `omp`.
    let program = session_query::program_of(&session_query::agent_of(index, tree.session.file_id)?);
    let file_here = std::path::Path::new(&tree.session.path).is_file();
    let (command, why) = match (file_here, cwd_here) {
        (true, true) => (plan.shell_line(program), String::new()),
        // Pi starts where it is run: say so rather than `cd .`.
        (true, false) => (
            plan.command_line(program),
            format!(
                "The session's directory {} is not on this machine: Pi starts in the directory you run this from.",
                if cwd.is_empty() {
                    "(none recorded)"
                } else {
                    cwd
                }
            ),
        ),
        (false, _) => (
            format!("piidx resume {session_id}"),
            "The session file is gone: piidx resume writes it back from the index first."
                .to_owned(),
        ),
    };
    let _ = write!(
        main,
        "<div class=\"resume\"><span>Resume in Pi</span><code id=\"resume\">{}</code><button type=\"button\" data-copy=\"resume\">copy</button></div>",
        esc(&command)
    );
    if !why.is_empty() {
        let _ = write!(
            main,
            "<p class=\"hint\" id=\"resume-why\">{}</p>",
            esc(&why)
        );
    }
    main.push_str("</section>");
    let tree_first = params.get("view") == Some("tree");
    let (t_on, r_on) = if tree_first { ("", " on") } else { (" on", "") };
    let branch_note = match leaf {
        Some(leaf) if Some(leaf) != tree.leaf() => format!(
            " <span class=\"tag\">branch ending at {}</span> <a href=\"{}\">current branch</a>",
            esc(&tree.nodes[leaf].id),
            session_href(&session_id)
        ),
        _ => String::new(),
    };
    let _ = write!(
        main,
        "<nav class=\"tabs\" data-region id=\"tabs\"><a href=\"?{}\" data-tab=\"transcript\" class=\"tab{t_on}\">Transcript ({} entries)</a><a href=\"?{}\" data-tab=\"tree\" class=\"tab{r_on}\">Tree ({} entries)</a>{branch_note}</nav>",
        esc(&params.with(&[("view", "transcript")], &[])),
        path.len(),
        esc(&params.with(&[("view", "tree")], &[])),
        tree.nodes.len()
    );
    // The pane shown is rendered; the other is fetched when its tab is
    // first shown (a long session's page is then about half the size).
    let placeholder = |pane: &str| {
        format!(
            " data-src=\"?{}\"><p class=\"hint\">loading…</p>",
            esc(&params.with(&[("pane", pane)], &[]))
        )
    };
    let _ = write!(
        main,
        "<section id=\"transcript\" data-region class=\"pane{t_on}\""
    );
    if tree_first {
        main.push_str(&placeholder("transcript"));
    } else {
        main.push('>');
        Transcript::new(&session_id, &mut main, full_href).context(&tree, &path);
    }
    main.push_str("</section>");
    let _ = write!(
        main,
        "<section id=\"tree\" data-region class=\"pane{r_on}\""
    );
    if tree_first {
        main.push('>');
        tree_html(&tree, &session_id, leaf, &mut main);
    } else {
        main.push_str(&placeholder("tree"));
    }
    main.push_str("</section>");
    Ok(Answer::html(page(&title, Nav::None, context.live, &main)))
}

/// The entry tree as Pi's /tree draws it: one row per entry, indented
/// only where the tree branches; the current branch marked, labels and
/// context edits shown, each entry a link to the branch ending there.
fn tree_html(tree: &SessionTree, session_id: &str, leaf: Option<usize>, out: &mut String) {
    let outline = outline(tree);
    let shown: HashSet<usize> = leaf
        .map(|l| tree.path_to(l))
        .unwrap_or_default()
        .into_iter()
        .collect();
    out.push_str("<div class=\"tree\">");
    let mut stack: Vec<(usize, usize, bool)> =
        outline.roots.iter().rev().map(|&r| (r, 0, false)).collect();
    while let Some((index, depth, fork)) = stack.pop() {
        let entry = &outline.entries[index];
        let mut class = format!("node d{}", depth.min(30));
        if entry.on_branch {
            class.push_str(" cur");
        }
        if shown.contains(&index) {
            class.push_str(" shown");
        }
        let _ = write!(
            out,
            "<div class=\"{class}\" id=\"t-{}\">{}<a href=\"{}\" class=\"id\">{}</a> <span class=\"ty\">{}</span> ",
            esc(&entry.id),
            if fork {
                "<span class=\"fork\">├</span>"
            } else {
                ""
            },
            branch_href(session_id, &entry.id),
            esc(&entry.id.chars().take(8).collect::<String>()),
            esc(&entry.entry_type)
        );
        push_esc(out, &cut(&entry.summary, 160));
        if let Some(label) = &entry.label {
            let _ = write!(out, " <span class=\"label\">{}</span>", esc(label));
        }
        for edit in &entry.edits {
            let _ = write!(
                out,
                " <span class=\"edit\">{} by {}</span>",
                if edit.removes { "removed" } else { "edited" },
                esc(&edit.by)
            );
        }
        if entry.is_leaf {
            out.push_str(" <span class=\"tag\">leaf</span>");
        }
        if entry.children.len() > 1 {
            let _ = write!(
                out,
                " <span class=\"tag\">{} branches</span>",
                entry.children.len()
            );
        }
        out.push_str("</div>");
        let kids = &entry.children;
        let branches = kids.len() > 1;
        for &kid in kids.iter().rev() {
            stack.push((kid, depth + usize::from(branches), branches));
        }
    }
    out.push_str("</div>");
}

/// Turns a branch's blocks (`query::transcript`) into HTML as
/// `render::transcript` turns them into text: tool results under their
/// calls, thinking folded, images shown, subagent transcripts nested.
struct Transcript<'a> {
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
    fn new(session: &'a str, out: &'a mut String, full_href: Option<String>) -> Transcript<'a> {
        Transcript {
            session,
            out,
            full_href,
            markdown: false,
        }
    }

    /// The branch `path` of `tree`, as Pi's context sees it.
    fn context(&mut self, tree: &SessionTree, path: &[usize]) {
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

/// `/s/<id>/image?e=ROWID&p=PATH&m=MIME`: an image payload, decoded.
pub fn image(local: &mut Local, id: &str, params: &Params) -> Result<Answer, Failure> {
    if let Some(hex) = params.get("b") {
        return outside_image(local, id, hex, params);
    }
    let rowid: i64 = params
        .get("e")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| Failure::new(400, "e=ENTRY_ROWID is missing"))?;
    let path = params.get("p").unwrap_or("");
    let index = local.index()?;
    let images = index.stored_images(rowid)?;
    let Some(image) = images.into_iter().find(|i| i.json_path == path) else {
        return Err(Failure::new(404, "no image there"));
    };
    let bytes = if image.encoding == "base64" {
        image.data
    } else {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&image.data)
            .unwrap_or(image.data)
    };
    let mut answer = Answer::new(200, image_type(params), bytes);
    answer.cache = "max-age=3600";
    Ok(answer)
}

/// Only raster types are shown inline: an SVG could carry script.
fn image_type(params: &Params) -> &'static str {
    match params.get("m") {
        Some("image/png") => "image/png",
        Some("image/jpeg") => "image/jpeg",
        Some("image/gif") => "image/gif",
        Some("image/webp") => "image/webp",
        _ => "application/octet-stream",
    }
}

/// `GET /s/<id>/image?b=<sha256>&m=<type>`: an image the session keeps
/// outside its file (omp's blob store, the port's `.blobs/`), read from
/// there now (`crate::outside`). Only a digest the session's entries name
/// is served; a missing blob is a 404 that says so.
fn outside_image(
    local: &mut Local,
    id: &str,
    hex: &str,
    params: &Params,
) -> Result<Answer, Failure> {
    let index = local.index()?;
    let session = tree::resolve(index, id)?;
    let named = index.entries_mention(session.file_id, hex)?;
    // Either agent's store: the digest alone does not say whose it is.
    let references: Vec<crate::outside::BlobRef> = [
        serde_json::json!({ "data": format!("blob:sha256:{hex}") }),
        serde_json::json!({ "data": { "$piBlob": format!("sha256:{hex}") } }),
    ]
    .iter()
    .filter_map(crate::outside::blob_ref)
    .collect();
    if !named || references.is_empty() {
        return Err(Failure::new(404, "no such image in this session"));
    }
    let file = std::path::Path::new(&session.path);
    let Some(bytes) = references
        .iter()
        .find_map(|reference| crate::outside::read(file, reference))
    else {
        return Err(Failure::new(
            404,
            "the image's blob is missing from its agent's store",
        ));
    };
    let mut answer = Answer::new(200, image_type(params), bytes);
    answer.cache = "max-age=3600";
    Ok(answer)
}

// ---------------------------------------------------------------- subagents

pub fn subagents(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    let runs = api::subagent_runs(local, params)?;
    let mut main = String::new();
    main.push_str("<form class=\"filters bar\" action=\"/subagents\">");
    main.push_str(&input("agent", "agent", params.get("agent"), "worker"));
    main.push_str(&input(
        "project",
        "project",
        params.get("project"),
        "cwd or part",
    ));
    main.push_str(&input("since", "since", params.get("since"), "7d"));
    let checked = if params.flag("failed")? {
        " checked"
    } else {
        ""
    };
    let _ = write!(
        main,
        "<label class=\"check\"><input type=\"checkbox\" name=\"failed\" value=\"1\"{checked}>failed only</label><button>Filter</button></form>"
    );
    let _ = write!(
        main,
        "<section data-region id=\"runs\"><p class=\"count\">{} run{}</p><table class=\"runs\"><thead><tr><th>started</th><th>agent</th><th>status</th><th>task</th><th>model</th><th class=\"num\">tokens</th><th class=\"num\">cost</th><th class=\"num\">s</th><th>delegated by</th><th>child session</th></tr></thead><tbody>",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    for run in &runs {
        run_row(run, &mut main);
    }
    main.push_str("</tbody></table><p class=\"hint\">A run's transcript is nested under its tool call on the delegating session's page.</p></section>");
    Ok(Answer::html(page(
        "Subagents",
        Nav::Subagents,
        context.live,
        &main,
    )))
}

fn run_row(run: &SubagentRun, out: &mut String) {
    let status = run.status.as_deref().unwrap_or("?");
    let _ = write!(
        out,
        "<tr><td class=\"when\">{}</td><td>{}</td><td><span class=\"st st-{}\">{}</span></td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
        esc(&minute(run.time.as_deref())),
        esc(run.agent.as_deref().unwrap_or("?")),
        esc(status),
        esc(status),
        esc(&cut(run.task.as_deref().unwrap_or(""), 140)),
        esc(run.model.as_deref().unwrap_or("")),
        group_digits(run.tokens),
        run.cost.map(money).unwrap_or_default(),
        run.duration_s
            .map(|s| format!("{s:.0}"))
            .unwrap_or_default()
    );
    match &run.parent_session {
        Some(parent) => {
            let _ = write!(
                out,
                "<td><a href=\"{}\">{}</a></td>",
                session_href(parent),
                esc(&cut(
                    run.parent_name
                        .as_deref()
                        .unwrap_or(&parent.chars().take(8).collect::<String>()),
                    40
                ))
            );
        }
        None => out.push_str("<td></td>"),
    }
    match &run.child_session {
        Some(child) => {
            let _ = write!(
                out,
                "<td><a href=\"{}\">{}</a></td></tr>",
                session_href(child),
                esc(&child.chars().take(8).collect::<String>())
            );
        }
        None => out.push_str("<td></td></tr>"),
    }
}

// ---------------------------------------------------------------- usage

/// `/usage`: cost and tokens over time (day, week or month), by model and
/// by project (each a link that filters the page), and tool statistics.
pub fn usage(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    // `by` takes every grouping the CLI and the API take: a period is the
    // charts' step; any other grouping is shown first, by day.
    let by = params.choice("by", &GroupBy::NAMES)?;
    let grouping = GroupBy::named(by).unwrap_or_default();
    let period = if grouping.is_time() { by } else { "day" };
    let over_time = api::usage_report(local, params, GroupBy::named(period).unwrap_or_default())?;
    let by_model = api::usage_report(local, params, GroupBy::Model)?;
    let by_project = api::usage_report(local, params, GroupBy::Project)?;
    let first = match grouping {
        GroupBy::Provider | GroupBy::Session => Some(api::usage_report(local, params, grouping)?),
        _ => None,
    };
    let tool_params = Params::parse(&params.with(&[], &["by", "model", "limit"]));
    let tools = api::tool_stats(local, &tool_params)?;
    let mut main = String::new();
    main.push_str("<form class=\"filters bar\" action=\"/usage\">");
    main.push_str(&select(
        "by",
        "per",
        Some(period),
        &["day", "week", "month"],
        false,
    ));
    main.push_str(&input("model", "model", params.get("model"), "sonnet"));
    main.push_str(&input(
        "project",
        "project",
        params.get("project"),
        "cwd or part",
    ));
    main.push_str(&input("since", "since", params.get("since"), "30d"));
    main.push_str(&input("until", "until", params.get("until"), "today"));
    main.push_str("<button>Show</button></form>");
    main.push_str("<section data-region id=\"usage\">");
    let total = &over_time.total;
    let _ = write!(
        main,
        "<div class=\"totals\"><div><b>{}</b><span>cost</span></div><div><b>{}</b><span>tokens</span></div><div><b>{}</b><span>records</span></div><div><b>{}</b><span>models</span></div></div>",
        money(total.cost),
        group_digits(total.total_tokens),
        group_digits(total.records),
        by_model.rows.len()
    );
    if !over_time.unpriced_models.is_empty() {
        let _ = write!(
            main,
            "<p class=\"problem\">{} tokens have no price and are not in the cost: {}</p>",
            group_digits(over_time.total.unpriced_tokens),
            esc(&over_time.unpriced_models.join(", "))
        );
    }
    if let Some(report) = &first {
        let _ = write!(main, "<h2>By {by}</h2>");
        key_chart(report, by, params, &mut main);
    }
    let _ = write!(main, "<h2>Cost per {period}</h2>");
    time_chart(&over_time, period, &mut main, Series::Cost);
    let _ = write!(main, "<h2>Tokens per {period}</h2>");
    time_chart(&over_time, period, &mut main, Series::Tokens);
    // The grouping asked for comes first.
    let (left, right) = if grouping == GroupBy::Project {
        ((&by_project, "project"), (&by_model, "model"))
    } else {
        ((&by_model, "model"), (&by_project, "project"))
    };
    let _ = write!(main, "<div class=\"cols\"><div><h2>By {}</h2>", left.1);
    key_chart(left.0, left.1, params, &mut main);
    let _ = write!(main, "</div><div><h2>By {}</h2>", right.1);
    key_chart(right.0, right.1, params, &mut main);
    main.push_str("</div></div>");
    main.push_str("<h2>Tools</h2><table class=\"tools\"><thead><tr><th>tool</th><th class=\"num\">calls</th><th class=\"num\">errors</th><th class=\"num\">error rate</th><th class=\"num\">no result</th><th class=\"num\">median</th><th class=\"num\">p95</th><th class=\"num\">largest output</th></tr></thead><tbody>");
    for tool in &tools {
        let _ = write!(
            main,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}%</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&tool.key),
            group_digits(tool.calls),
            group_digits(tool.errors),
            tool.error_rate * 100.0,
            group_digits(tool.no_result),
            tool.median_ms.map(duration).unwrap_or_default(),
            tool.p95_ms.map(duration).unwrap_or_default(),
            tool.max_result_len.map(bytes).unwrap_or_default()
        );
    }
    main.push_str("</tbody></table></section>");
    Ok(Answer::html(page("Usage", Nav::Usage, context.live, &main)))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Series {
    Cost,
    Tokens,
}

const CHART_W: f64 = 960.0;
const CHART_H: f64 = 220.0;
const PAD_L: f64 = 64.0;
const PAD_B: f64 = 28.0;
/// Room above the highest bar for its axis label.
const PAD_T: f64 = 16.0;

/// Bars per period, as inline SVG: cost, or tokens stacked by kind.
fn time_chart(report: &UsageReport, period: &str, out: &mut String, series: Series) {
    let rows = &report.rows;
    if rows.is_empty() {
        out.push_str("<p class=\"hint\">No usage recorded in this selection.</p>");
        return;
    }
    let parts = |row: &UsageRow| -> Vec<f64> {
        match series {
            Series::Cost => vec![row.cost],
            Series::Tokens => vec![
                row.input_tokens as f64,
                row.output_tokens as f64,
                row.cache_read_tokens as f64,
                row.cache_write_tokens as f64,
            ],
        }
    };
    let max = rows
        .iter()
        .map(|r| parts(r).iter().sum::<f64>())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_w = CHART_W - PAD_L - 8.0;
    let plot_h = CHART_H - PAD_B - PAD_T;
    // A real time axis: each period at its place from the first to the
    // last, empty ones as gaps (a key that is not a period: one slot each).
    let axis = Axis::of(rows, period);
    let slot = plot_w / axis.slots as f64;
    let bar = (slot * 0.8).max(1.0);
    let label = |v: f64| match series {
        Series::Cost => money(v),
        Series::Tokens => compact(v),
    };
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"{}\" data-points=\"{}\" viewBox=\"0 0 {CHART_W} {CHART_H}\" role=\"img\" aria-label=\"{}\">",
        if series == Series::Cost {
            "cost"
        } else {
            "tokens"
        },
        rows.len(),
        if series == Series::Cost {
            "cost over time"
        } else {
            "tokens over time"
        }
    );
    // Grid lines at quarters of the maximum.
    for q in 0..=4 {
        let v = max * f64::from(q) / 4.0;
        let y = PAD_T + plot_h - plot_h * f64::from(q) / 4.0;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{PAD_L}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/><text class=\"axis\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            CHART_W - 8.0,
            PAD_L - 6.0,
            y + 4.0,
            esc(&label(v))
        );
    }
    // Labels with their year, as many as fit (7 units a character),
    // every `every` slots along the axis.
    let widest = rows
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(1) as f64
        * 7.0
        + 10.0;
    let every = ((widest / slot).ceil() as usize).max(1);
    // Every other label is `alt`: a narrow screen shows half of them, larger.
    for (n, at) in (0..axis.slots).step_by(every).enumerate() {
        let _ = write!(
            out,
            "<text class=\"axis{}\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            if n % 2 == 1 { " alt" } else { "" },
            PAD_L + slot * at as f64 + slot / 2.0,
            CHART_H - 8.0,
            esc(&axis.label(at, rows))
        );
    }
    for (i, row) in rows.iter().enumerate() {
        let x = PAD_L + slot * axis.slot(i) as f64 + (slot - bar) / 2.0;
        let mut y = PAD_T + plot_h;
        let values = parts(row);
        for (k, value) in values.iter().enumerate() {
            let h = plot_h * value / max;
            y -= h;
            let _ = write!(
                out,
                "<rect class=\"s{k}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bar:.1}\" height=\"{h:.1}\"><title>{} · {}</title></rect>",
                esc(&row.key),
                esc(&match series {
                    Series::Cost => money(*value),
                    Series::Tokens => format!(
                        "{} {} tokens",
                        group_digits(*value as i64),
                        ["input", "output", "cache read", "cache write"][k]
                    ),
                })
            );
        }
    }
    out.push_str("</svg>");
    if series == Series::Tokens {
        out.push_str("<p class=\"legend\"><i class=\"s0\"></i>input <i class=\"s1\"></i>output <i class=\"s2\"></i>cache read <i class=\"s3\"></i>cache write</p>");
    }
}

/// Where a report's periods fall on a time axis running from the first to
/// the last: each row's slot, and the first period as a number (`position`:
/// a day, a week's Monday less 4 over 7, a month); `first` is `None` when a
/// key is not a period of `step` (then each row is a slot, in order).
struct Axis {
    step: &'static str,
    first: Option<i64>,
    row_slots: Vec<usize>,
    slots: usize,
}

/// The most slots an axis spreads over (ten years of days); a longer span
/// is drawn a row a slot.
const MAX_SLOTS: i64 = 3660;

impl Axis {
    fn of(rows: &[UsageRow], period: &str) -> Axis {
        let step = match period {
            "week" => "week",
            "month" => "month",
            _ => "day",
        };
        let positions: Option<Vec<i64>> = rows.iter().map(|row| position(step, &row.key)).collect();
        let range = positions
            .as_ref()
            .and_then(|p| Some((*p.iter().min()?, *p.iter().max()?)))
            .filter(|(first, last)| (1..=MAX_SLOTS).contains(&(last - first + 1)));
        match (positions, range) {
            (Some(positions), Some((first, last))) => Axis {
                step,
                first: Some(first),
                row_slots: positions.iter().map(|p| (p - first) as usize).collect(),
                slots: (last - first + 1) as usize,
            },
            _ => Axis {
                step,
                first: None,
                row_slots: (0..rows.len()).collect(),
                slots: rows.len().max(1),
            },
        }
    }

    /// Row `i`'s slot.
    fn slot(&self, i: usize) -> usize {
        self.row_slots[i]
    }

    /// The label of slot `at`: its period, year included.
    fn label(&self, at: usize, rows: &[UsageRow]) -> String {
        let Some(first) = self.first else {
            return rows.get(at).map(|row| row.key.clone()).unwrap_or_default();
        };
        let n = first + at as i64;
        match self.step {
            "week" => crate::query::tz::format_iso_week(n * 7 + 4),
            "month" => format!("{:04}-{:02}", n.div_euclid(12), n.rem_euclid(12) + 1),
            _ => crate::query::tz::format_day(n),
        }
    }
}

/// A period key as a number: `YYYY-MM-DD` its day, `YYYY-Www` its Monday's
/// day less 4, over 7 (1970-01-05 was a Monday), `YYYY-MM` months since
/// year 0.
fn position(step: &str, key: &str) -> Option<i64> {
    match step {
        "day" => crate::time::parse_day(key).filter(|_| key.len() == 10),
        "week" => {
            let (year, week) = key.split_once("-W")?;
            let (year, week): (i64, i64) = (year.parse().ok()?, week.parse().ok()?);
            // Week 1 holds January 4th.
            let jan4 = crate::time::days_from_civil(year, 1, 4);
            let monday = jan4 - (jan4 + 3).rem_euclid(7) + (week - 1) * 7;
            Some((monday - 4).div_euclid(7))
        }
        _ => {
            let (year, month) = key.split_once('-')?;
            let (year, month): (i64, i64) = (year.parse().ok()?, month.parse().ok()?);
            (1..=12).contains(&month).then_some(year * 12 + month - 1)
        }
    }
}

/// Horizontal bars of cost per key (model or project), each a link that
/// filters the page by it.
fn key_chart(report: &UsageReport, param: &str, params: &Params, out: &mut String) {
    let rows: Vec<&UsageRow> = report.rows.iter().take(12).collect();
    if rows.is_empty() {
        out.push_str("<p class=\"hint\">None.</p>");
        return;
    }
    let max = rows
        .iter()
        .map(|r| r.cost.max(0.0))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let row_h = 26.0;
    let height = row_h * rows.len() as f64 + 4.0;
    let _ = write!(
        out,
        "<svg class=\"chart bars\" data-chart=\"{param}\" data-points=\"{}\" viewBox=\"0 0 460 {height}\" role=\"img\" aria-label=\"cost by {param}\">",
        rows.len()
    );
    for (i, row) in rows.iter().enumerate() {
        let y = row_h * i as f64 + 2.0;
        let w = 200.0 * row.cost.max(0.0) / max;
        let href = format!("/usage?{}", params.with(&[(param, &row.key)], &[]));
        let _ = write!(
            out,
            "<a href=\"{}\"><text class=\"key\" x=\"0\" y=\"{:.1}\">{}</text><rect class=\"s0\" x=\"190\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\"><title>{} · {} · {} tokens</title></rect><text class=\"val\" x=\"{:.1}\" y=\"{:.1}\">{}</text></a>",
            esc(&href),
            y + 17.0,
            esc(&cut(&tail(&row.key, 28), 28)),
            y + 4.0,
            row_h - 8.0,
            esc(&row.key),
            money(row.cost),
            group_digits(row.total_tokens),
            194.0 + w,
            y + 17.0,
            money(row.cost)
        );
    }
    out.push_str("</svg>");
}

/// The end of a long key (a project's path ends with its name).
fn tail(key: &str, n: usize) -> String {
    let count = key.chars().count();
    if count <= n {
        key.to_owned()
    } else {
        let rest: String = key.chars().skip(count - n + 1).collect();
        format!("…{rest}")
    }
}

/// `12345678` as `12.3M`.
fn compact(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.1}B", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_numbers_on_a_time_axis() {
        let day = |key| position("day", key).unwrap();
        assert_eq!(day("2026-03-01") - day("2026-02-28"), 1);
        assert_eq!(day("2025-01-01") - day("2024-12-31"), 1);
        let week = |key| position("week", key).unwrap();
        assert_eq!(week("2026-W01") - week("2025-W52"), 1);
        assert_eq!(week("2026-W10") - week("2026-W01"), 9);
        // Labels give the keys back, year included.
        let axis = Axis {
            step: "week",
            first: Some(week("2025-W52")),
            row_slots: vec![0, 2],
            slots: 3,
        };
        assert_eq!(axis.label(0, &[]), "2025-W52");
        assert_eq!(axis.label(1, &[]), "2026-W01");
        let month = |key| position("month", key).unwrap();
        assert_eq!(month("2026-01") - month("2025-12"), 1);
        let axis = Axis {
            step: "month",
            first: Some(month("2025-11")),
            row_slots: vec![0],
            slots: 1,
        };
        assert_eq!(axis.label(0, &[]), "2025-11");
        assert_eq!(position("day", "claude-opus"), None);
        assert_eq!(position("month", "2026-13"), None);
    }
}
