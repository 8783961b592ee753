//! `/search`: the search form and its hits (`partial=1`: the hits alone,
//! for search as you type).

use std::fmt::Write;

use super::{entry_href, field, select, session_href};
use crate::query::search::{self, Hit, ROLES};
use crate::query::sessions::title;
use crate::serve::api::{self, Failure};
use crate::serve::html::{self, Nav, cut, esc, minute, page, push_esc};
use crate::serve::http::{Answer, Context};
use crate::serve::local::Local;
use crate::serve::params::Params;

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
    main.push_str(&field(params, "tool", "bash"));
    main.push_str(&field(params, "model", "sonnet"));
    main.push_str(&field(params, "project", "cwd or part"));
    main.push_str(&field(params, "since", "7d, 2026-02-01"));
    main.push_str(&field(params, "until", "today"));
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
        let title = title(hit.session_name.as_deref(), hit.first_message.as_deref())
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
