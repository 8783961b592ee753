//! `piidx serve`: the index as a local web app and a JSON API, a front-end
//! like the CLI and `mcp`: it calls `query` and shows the same typed
//! answers, as HTML pages for a person and, under `/api/`, as exactly the
//! JSON the CLI's `--json` prints (docs/serve.md).
//!
//! * `server`: the HTTP server (tiny_http: synchronous, a few worker
//!   threads, no async runtime in a program that is otherwise synchronous),
//!   the token check, and the server-sent events `serve --watch` pushes;
//! * `routes`: a request's path and parameters → an answer;
//! * `pages`: the HTML pages, one module a page (`html` escapes every
//!   session text: it is untrusted); `api`: the JSON answers;
//! * below them all: `http` (the answer types and how one is sent),
//!   `local` (what a worker keeps between requests), `params`, `client`,
//!   `assets` (the CSS and JS, embedded). Each module imports only those
//!   below it.
//!
//! Safe by default: the server binds to loopback unless told
//! `--allow-remote`, which needs a token; the index is opened read-only;
//! pages forbid inline scripts (Content-Security-Policy) on top of the
//! escaping.

pub mod api;
pub mod assets;
mod client;
pub mod html;
pub mod http;
pub mod local;
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
    /// Answer from this team store instead of the index (`serve --pg`).
    pub team: Option<crate::query::source::Team>,
    pub addr: SocketAddr,
    /// Needed for any request when set: `Authorization: Bearer`, `?token=`
    /// (then a cookie) or the cookie.
    pub token: Option<String>,
    /// Requests answered at once.
    pub threads: usize,
    /// How long one search may run (`None`: no limit).
    pub search_budget: Option<std::time::Duration>,
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
        "the token is too weak ({why}): anyone who can reach the port could guess it. Give at least {MIN_TOKEN_CHARS} characters with no spaces, several of them different (e.g. `openssl rand -hex 16`), or leave --token out and piidx makes one"
    )]
    WeakToken { why: &'static str },
    #[error("cannot make a token from /dev/urandom; pass --token TOKEN")]
    NoRandom(#[source] std::io::Error),
    #[error("cannot listen on {addr} (is another server using the port? pass --addr HOST:PORT)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot start the HTTP server on {addr}: {message}")]
    Start { addr: SocketAddr, message: String },
}

/// The fewest characters a token given with `--token` may have.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The token a server needs, if any: `given` when it is strong enough, a
/// new random one when remote access is asked for without one (the caller
/// prints it), none on loopback without one. Refuses an address other
/// machines can reach unless remote access was asked for.
pub fn check_access(
    addr: SocketAddr,
    allow_remote: bool,
    given: Option<String>,
) -> Result<Access, ServeError> {
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(ServeError::Remote { addr });
    }
    match given {
        Some(token) => {
            check_strength(&token)?;
            Ok(Access::Token(token))
        }
        None if allow_remote => Ok(Access::Made(new_token().map_err(ServeError::NoRandom)?)),
        None => Ok(Access::Open),
    }
}

/// Who may ask the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Anyone on this machine (loopback, with the Host check).
    Open,
    /// Those with the token given.
    Token(String),
    /// Those with this token, made by piidx: print it.
    Made(String),
}

impl Access {
    pub fn token(&self) -> Option<&str> {
        match self {
            Access::Open => None,
            Access::Token(token) | Access::Made(token) => Some(token),
        }
    }
}

/// A token is refused when it is short, holds blanks or control
/// characters (a header would not carry it as typed), or repeats a few
/// characters (`aaaaaaaaaaaaaaaa`).
fn check_strength(token: &str) -> Result<(), ServeError> {
    let why = if token.chars().count() < MIN_TOKEN_CHARS {
        "shorter than 16 characters"
    } else if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "it holds blanks or control characters"
    } else if token
        .chars()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        < 6
    {
        "fewer than 6 different characters"
    } else {
        return Ok(());
    };
    Err(ServeError::WeakToken { why })
}

/// 32 random bytes as 64 hex digits.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_needs_a_strong_token_or_gets_one() {
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert_eq!(check_access(local, false, None).unwrap(), Access::Open);
        assert!(matches!(
            check_access(any, false, None),
            Err(ServeError::Remote { .. })
        ));
        let Ok(Access::Made(made)) = check_access(any, true, None) else {
            panic!("a token is made");
        };
        assert_eq!(made.len(), 64);
        assert!(check_strength(&made).is_ok());
        for weak in [
            "a",
            " ",
            "",
            "aaaaaaaaaaaaaaaaaaaa",
            "abcdefgh ijklmnopq",
            "abcabcabcabcabcabc",
        ] {
            assert!(
                matches!(
                    check_access(any, true, Some(weak.to_owned())),
                    Err(ServeError::WeakToken { .. })
                ),
                "{weak:?}"
            );
        }
        let strong = "k3Jd9-xQ2pLm7vRt".to_owned();
        assert_eq!(
            check_access(any, true, Some(strong.clone())).unwrap(),
            Access::Token(strong)
        );
    }
}
