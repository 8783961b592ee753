//! `/sessions`: the session list in Pi's order, filtered by project, date
//! and agent.

use std::fmt::Write;

use super::{field, session_href};
use crate::query::sessions::SessionsQuery;
use crate::serve::api::{self, Failure};
use crate::serve::html::{Nav, cut, esc, page};
use crate::serve::http::{Answer, Context};
use crate::serve::local::Local;
use crate::serve::params::Params;

/// Sessions listed at once on the sessions page unless `limit` says more.
const SESSIONS_SHOWN: usize = 300;

/// `/sessions`: newest first in Pi's order, filtered by project and date.
pub fn sessions(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    let mut list = api::session_list(local, params)?;
    // The projects to pick from: every cwd of the unfiltered list.
    let every = local.source()?.sessions(&SessionsQuery {
        all: params.flag("all")?,
        ..SessionsQuery::default()
    })?;
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
    main.push_str(&field(params, "since", "7d, 2026-02-01"));
    main.push_str(&field(params, "until", "today"));
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
        let title = info.title();
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
