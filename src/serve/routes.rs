//! Which handler answers a path: the pages, `/api/…`, the embedded assets.
//! Path segments are percent-decoded here (a session may be named by its
//! file path, `/` as `%2F`).

use super::api::{self, Failure};
use super::params::{Params, decode};
use super::server::Local;
use super::{assets, pages};

/// The pages' Content-Security-Policy: their own script and styles only,
/// no inline script, images from the server itself. Session text is
/// escaped anyway; this is the second wall.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the server sends back.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub cache: &'static str,
    /// Milliseconds spent in the query (a search), for `Server-Timing`.
    pub timing: Option<f64>,
    /// Milliseconds from the parsed request to the answer ready to send:
    /// query and rendering (`Server-Timing: app`).
    pub total: Option<f64>,
}

impl Answer {
    pub fn new(status: u16, content_type: &'static str, body: Vec<u8>) -> Answer {
        Answer {
            status,
            content_type,
            body,
            cache: "no-store",
            timing: None,
            total: None,
        }
    }

    pub fn text(status: u16, text: &str) -> Answer {
        Answer::new(
            status,
            "text/plain; charset=utf-8",
            text.as_bytes().to_vec(),
        )
    }

    pub fn html(body: String) -> Answer {
        Answer::new(200, "text/html; charset=utf-8", body.into_bytes())
    }
}

pub enum Reply {
    Answer(Answer),
    /// The connection becomes an event stream (`/api/events`).
    Events,
}

/// What every page is told besides its parameters.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// `serve --watch`: pages subscribe to `/api/events`.
    pub live: bool,
}

pub fn route(local: &mut Local, context: &Context, path: &str, params: &Params) -> Reply {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    let api = matches!(parts.first(), Some(&"api"));
    let result = match parts.as_slice() {
        ["api", "events"] => return Reply::Events,
        ["api", "search"] => api::search(local, params),
        ["api", "sessions"] => api::sessions(local, params),
        ["api", "sessions", id] => api::show(local, id, params),
        ["api", "sessions", id, "tree"] => api::tree(local, id),
        ["api", "subagents"] => api::subagents(local, params),
        ["api", "usage"] => api::usage(local, params),
        ["api", "tools"] => api::tools(local, params),
        ["api", ..] => Err(Failure::new(
            404,
            "no such API; see docs/serve.md: /api/search, /api/sessions, /api/sessions/ID, /api/sessions/ID/tree, /api/subagents, /api/usage, /api/tools, /api/events",
        )),
        ["assets", name] => {
            return Reply::Answer(match assets::get(name) {
                Some((content_type, body)) => {
                    let mut answer = Answer::new(200, content_type, body.to_vec());
                    answer.cache = "max-age=300";
                    answer
                }
                None => Answer::text(404, "no such asset\n"),
            });
        }
        [] => pages::search(local, context, params),
        ["search"] => pages::search(local, context, params),
        ["sessions"] => pages::sessions(local, context, params),
        ["s", id] => pages::session(local, context, id, params),
        ["s", id, "image"] => pages::image(local, id, params),
        ["subagents"] => pages::subagents(local, context, params),
        ["usage"] => pages::usage(local, context, params),
        _ => Err(Failure::new(404, format!("no page at {path}"))),
    };
    Reply::Answer(match result {
        Ok(answer) => answer,
        Err(failure) if api => api::error(&failure),
        Err(failure) => pages::error(context, &failure),
    })
}
