//! HTTP plumbing shared by every handler: the answer a handler gives
//! (`Answer`: status, type, body, caching, timings), what a route may turn
//! a connection into (`Reply`), what every page is told (`Context`), and
//! how an answer is sent (`respond`: the security headers, the token's
//! cookie, `Server-Timing`). It imports nothing else of `serve`, so the
//! server, the routes, the API and the pages all stand on it without a
//! circle.

use tiny_http::{Header, Request, Response};

/// The cookie a `?token=` sets, so the pages' own requests carry it.
pub const COOKIE: &str = "piidx_token";

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

pub fn respond(request: Request, answer: Answer, cookie: Option<&str>) {
    let mut response = Response::from_data(answer.body).with_status_code(answer.status);
    let mut headers = vec![
        ("Content-Type", answer.content_type.to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        ("Referrer-Policy", "no-referrer".to_owned()),
        ("Cache-Control", answer.cache.to_owned()),
    ];
    if answer.content_type.starts_with("text/html") {
        headers.push(("Content-Security-Policy", CSP.to_owned()));
        headers.push(("X-Frame-Options", "DENY".to_owned()));
    }
    let mut timing = Vec::new();
    if let Some(ms) = answer.timing {
        timing.push(format!("query;dur={ms:.3}"));
    }
    if let Some(ms) = answer.total {
        timing.push(format!("app;dur={ms:.3}"));
    }
    if !timing.is_empty() {
        headers.push(("Server-Timing", timing.join(", ")));
    }
    if let Some(token) = cookie {
        headers.push((
            "Set-Cookie",
            format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"),
        ));
    }
    for (name, value) in headers {
        if let Ok(header) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(header);
        }
    }
    // The browser may have gone away: nothing to do about it.
    let _ = request.respond(response);
}
