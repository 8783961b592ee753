//! `/subagents`: subagent runs, filtered by agent, project, date and
//! outcome, each linked to the sessions that delegated and ran it.

use std::fmt::Write;

use super::{field, session_href};
use crate::query::subagents::SubagentRun;
use crate::render::{group_digits, money};
use crate::serve::api::{self, Failure};
use crate::serve::html::{Nav, cut, esc, minute, page};
use crate::serve::http::{Answer, Context};
use crate::serve::local::Local;
use crate::serve::params::Params;

pub fn subagents(local: &mut Local, context: &Context, params: &Params) -> Result<Answer, Failure> {
    let runs = api::subagent_runs(local, params)?;
    let mut main = String::new();
    main.push_str("<form class=\"filters bar\" action=\"/subagents\">");
    main.push_str(&field(params, "subagent", "worker"));
    main.push_str(&field(params, "project", "cwd or part"));
    main.push_str(&field(params, "since", "7d"));
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
