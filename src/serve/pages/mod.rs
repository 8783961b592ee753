//! The HTML pages, rendered on the server from the same `query` answers
//! the CLI prints, one module a page: `search`, `sessions`, `session` (a
//! session's head and entry tree; `transcript` its branch; `image` its
//! images), `subagents`, `usage` (charts as inline SVG, tool statistics).
//! This module holds what pages share: links, form fields, the error page.
//! Every session text goes through `html::esc`. A page works without its
//! script; the script (`assets/app.js`) adds search as you type, the tab
//! switch, copying and the live updates of `serve --watch`.

mod image;
mod search;
mod session;
mod sessions;
mod subagents;
mod transcript;
mod usage;

use std::fmt::Write;

pub use image::image;
pub use search::search;
pub use session::session;
pub use sessions::sessions;
pub use subagents::subagents;
pub use usage::usage;

use super::api::Failure;
use super::html::{Nav, esc, page};
use super::http::{Answer, Context};
use super::params::{Params, encode};

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

/// A text field named and labelled `name`, holding the parameter's value.
fn field(params: &Params, name: &str, placeholder: &str) -> String {
    input(name, name, params.get(name), placeholder)
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
