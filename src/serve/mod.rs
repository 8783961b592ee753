//! `piidx serve`: the index as a local web app and a JSON API, a front-end
//! like the CLI and `mcp`: it calls `query` and shows the same typed
//! answers, as HTML pages for a person and, under `/api/`, as exactly the
//! JSON the CLI's `--json` prints (docs/serve.md).
//!
//! * `server`: the HTTP server (tiny_http: synchronous, a few worker
//!   threads, no async runtime in a program that is otherwise synchronous),
//!   the token check, and the server-sent events `serve --watch` pushes;
//! * `routes`: a request's path and parameters → an answer;
//! * `api`: the JSON answers; `pages`: the HTML pages (`html` escapes every
//!   session text: it is untrusted); `assets`: the CSS and JS, embedded.
//!
//! Safe by default: the server binds to loopback unless told
//! `--allow-remote`, which needs a token; the index is opened read-only;
//! pages forbid inline scripts (Content-Security-Policy) on top of the
//! escaping.

pub mod api;
pub mod assets;
pub mod html;
pub mod pages;
pub mod params;
pub mod routes;
pub mod server;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use server::{Events, Server};

/// What the server is told at start.
#[derive(Debug, Clone)]
pub struct Options {
    pub db: PathBuf,
    pub addr: SocketAddr,
    /// Needed for any request when set: `Authorization: Bearer`, `?token=`
    /// (then a cookie) or the cookie.
    pub token: Option<String>,
    /// Requests answered at once.
    pub threads: usize,
    /// The server is told of syncs (`serve --watch`): pages subscribe.
    pub live: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "{addr} is not a loopback address: other machines could read every session; pass --allow-remote with --token TOKEN to serve it anyway"
    )]
    Remote { addr: SocketAddr },
    #[error(
        "--allow-remote needs --token TOKEN (or $PIIDX_SERVE_TOKEN): every request must then carry it"
    )]
    NoToken,
    #[error("cannot listen on {addr} (is another server using the port? pass --addr HOST:PORT)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the HTTP server on {addr}: {message}")]
    Start { addr: SocketAddr, message: String },
}

/// Refuses an address other machines can reach unless remote access was
/// asked for with a token.
pub fn check_addr(
    addr: SocketAddr,
    allow_remote: bool,
    token: Option<&str>,
) -> Result<(), ServeError> {
    if allow_remote && token.is_none_or(str::is_empty) {
        return Err(ServeError::NoToken);
    }
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(ServeError::Remote { addr });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_needs_a_token() {
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert!(check_addr(local, false, None).is_ok());
        assert!(matches!(
            check_addr(any, false, None),
            Err(ServeError::Remote { .. })
        ));
        assert!(matches!(
            check_addr(any, true, None),
            Err(ServeError::NoToken)
        ));
        assert!(check_addr(any, true, Some("t")).is_ok());
    }
}
