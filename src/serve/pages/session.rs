//! `/s/<id>`: one session: its head (title, project, file, the sessions
//! around it, the command that resumes it), its branch as a transcript
//! (`transcript`) and its entry tree, each a pane the page's script can
//! fetch alone. What the page shows is asked of `query` first (`About`),
//! then written as HTML, piece by piece.

use std::collections::HashSet;
use std::fmt::Write;

use super::transcript::Transcript;
use super::{branch_href, session_href};
use crate::query::scope::Scope;
use crate::query::sessions::{self as session_query, Related, SessionInfo, SessionsQuery};
use crate::query::subagents::{self, SubagentRun, SubagentsQuery};
use crate::query::transcript::Head;
use crate::query::tree::{SessionTree, outline};
use crate::resume::{Mode, Plan};
use crate::serve::api::{self, Failure};
use crate::serve::html::{Nav, cut, esc, minute, page, push_esc};
use crate::serve::http::{Answer, Context};
use crate::serve::local::Local;
use crate::serve::params::Params;

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
    let about = About::ask(local, &tree)?;
    let title = about.title();
    let mut main = String::with_capacity(tree.nodes.len() * 1200 + 4096);
    about.head_html(tree.nodes.len(), &mut main);
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

/// What a session's page says about it besides its entries: its header,
/// its row in the session list (title, agent), the sessions around it and
/// its subagent runs.
struct About {
    head: Head,
    info: Option<SessionInfo>,
    related: Related,
    runs: Vec<SubagentRun>,
}

impl About {
    fn ask(local: &mut Local, tree: &SessionTree) -> Result<About, Failure> {
        let index = local.index()?;
        let head = Head::of(tree);
        let scope = Scope {
            session: Some(head.path.clone()),
            ..Scope::default()
        };
        let info = session_query::list(
            index,
            &SessionsQuery {
                scope: scope.clone(),
                all: true,
                ..SessionsQuery::default()
            },
        )?
        .into_iter()
        .find(|info| info.path == head.path);
        let related = session_query::related(index, &head.session_id, &head.path)?;
        let runs = subagents::run(
            index,
            &SubagentsQuery {
                scope,
                ..SubagentsQuery::default()
            },
        )?;
        Ok(About {
            head,
            info,
            related,
            runs,
        })
    }

    /// The session list's title (`query::sessions::title`), else its id.
    fn title(&self) -> String {
        self.info
            .as_ref()
            .map(SessionInfo::title)
            .filter(|title| !title.trim().is_empty())
            .unwrap_or(&self.head.session_id)
            .to_owned()
    }

    /// The head of the page: title, facts, links, the resume command.
    fn head_html(&self, entries: usize, out: &mut String) {
        let head = &self.head;
        let _ = write!(
            out,
            "<section class=\"head\"><h1>{}</h1><dl><dt>id</dt><dd class=\"id\">{}</dd><dt>project</dt><dd>{}</dd><dt>file</dt><dd>{}</dd><dt>created</dt><dd>{}</dd><dt>entries</dt><dd>{entries}</dd></dl>",
            esc(&cut(&self.title(), 160)),
            esc(&head.session_id),
            esc(&head.cwd),
            esc(&head.path),
            esc(&minute(head.created.as_deref())),
        );
        self.links_html(out);
        self.resume_html(out);
        out.push_str("</section>");
    }

    /// Links to the sessions around this one.
    fn links_html(&self, out: &mut String) {
        let related = &self.related;
        let mut links = String::new();
        if let Some(parent) = &related.parent {
            let _ = write!(
                links,
                "<li>forked from <a href=\"{}\">{}</a></li>",
                session_href(&parent.id),
                esc(&cut(&parent.title, 80))
            );
        } else if let Some(parent) = &self.head.parent_session {
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
        for run in self.runs.iter().filter(|r| r.child_session.is_some()) {
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
            let _ = write!(out, "<ul class=\"links\">{links}</ul>");
        }
    }

    /// The command that resumes it in Pi (what `piidx resume --print`
    /// prints when the file is there; `piidx resume` rebuilds a gone one
    /// first), and why it is not the plain one when it is not.
    fn resume_html(&self, out: &mut String) {
        let (command, why) = self.resume_command();
        let _ = write!(
            out,
            "<div class=\"resume\"><span>Resume in Pi</span><code id=\"resume\">{}</code><button type=\"button\" data-copy=\"resume\">copy</button></div>",
            esc(&command)
        );
        if !why.is_empty() {
            let _ = write!(out, "<p class=\"hint\" id=\"resume-why\">{}</p>", esc(&why));
        }
    }

    fn resume_command(&self) -> (String, String) {
        let Head {
            session_id,
            path,
            cwd,
            ..
        } = &self.head;
        let cwd_here = !cwd.is_empty() && std::path::Path::new(cwd).is_dir();
        let plan = Plan {
            file: path.clone().into(),
            cwd: cwd.into(),
            mode: Mode::Resume,
            rebuilt: false,
            missing_cwd: None,
            program: "pi",
        };
        // oh-my-pi's sessions resume in `omp`.
        let agent = self.info.as_ref().map_or("pi", |info| info.agent.as_str());
        let program = session_query::program_of(agent);
        let file_here = std::path::Path::new(path).is_file();
        match (file_here, cwd_here) {
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
        }
    }
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
