//! Which handler answers a path: the pages, `/api/…`, the embedded assets.
//! Path segments are percent-decoded here (a session may be named by its
//! file path, `/` as `%2F`).

use super::api::{self, Failure};
use super::http::{Answer, Context, Reply};
use super::local::Local;
use super::params::{Params, decode};
use super::{assets, pages};

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
