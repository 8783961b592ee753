//! The HTTP server: tiny_http's listener, a few worker threads each with
//! its own read-only `Index` (kept between requests, so a search reuses
//! its connection and its shard readers as the picker does), the token
//! check, and the server-sent-events subscribers.
//!
//! tiny_http rather than axum/hyper: the server answers a handful of
//! local requests at a time from SQLite, which is synchronous; an async
//! runtime would add a large dependency tree and block_in_place around
//! every query for nothing. An event stream does not hold a worker: its
//! connection is handed to `Events`, which writes to it after each sync.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiny_http::Request;

use super::http::{Answer, COOKIE, Context, Reply, respond};
use super::local::{Local, Searches};
use super::routes;
use super::{Options, ServeError};

/// How often an idle event stream gets a comment: a closed page's
/// connection is noticed and dropped then.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// A bound server, ready to run.
pub struct Server {
    http: Arc<tiny_http::Server>,
    addr: SocketAddr,
    options: Options,
    events: Events,
}

/// The open event streams (`/api/events`) and the number of syncs so far.
#[derive(Clone, Default)]
pub struct Events {
    streams: Arc<Mutex<Vec<Box<dyn Write + Send>>>>,
    syncs: Arc<AtomicU64>,
}

impl Events {
    /// Tells every open page that the index changed: `data` is a JSON
    /// object (the sync's summary). Streams that fail are dropped.
    pub fn push(&self, data: &str) {
        let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
        let message = format!("id: {n}\nevent: sync\ndata: {data}\n\n");
        self.send(message.as_bytes());
    }

    /// Syncs pushed so far.
    pub fn count(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    fn send(&self, bytes: &[u8]) {
        let Ok(mut streams) = self.streams.lock() else {
            return;
        };
        streams.retain_mut(|stream| {
            stream
                .write_all(bytes)
                .and_then(|()| stream.flush())
                .is_ok()
        });
    }

    fn subscribe(&self, request: Request) {
        let mut stream = request.into_writer();
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: keep-alive\r\n\r\n";
        // `retry` makes a browser reconnect quickly after a restart.
        let hello = format!("{head}retry: 1000\n: {} syncs so far\n\n", self.count());
        // The stream joins the list in the same lock as its head is sent:
        // a page that saw its stream open gets every later sync.
        let Ok(mut streams) = self.streams.lock() else {
            return;
        };
        if stream
            .write_all(hello.as_bytes())
            .and_then(|()| stream.flush())
            .is_ok()
        {
            streams.push(stream);
        }
    }

    /// Open streams.
    pub fn subscribers(&self) -> usize {
        self.streams.lock().map_or(0, |streams| streams.len())
    }
}

impl Server {
    /// Binds the address (port 0: any free port) after checking it.
    pub fn bind(options: Options) -> Result<Server, ServeError> {
        let listener = TcpListener::bind(options.addr).map_err(|source| ServeError::Bind {
            addr: options.addr,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind {
            addr: options.addr,
            source,
        })?;
        no_delay(&listener);
        let http =
            tiny_http::Server::from_listener(listener, None).map_err(|err| ServeError::Start {
                addr,
                message: err.to_string(),
            })?;
        Ok(Server {
            http: Arc::new(http),
            addr,
            options,
            events: Events::default(),
        })
    }

    /// The address it listens on (the port chosen when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where syncs are announced to the open pages.
    pub fn events(&self) -> Events {
        self.events.clone()
    }

    /// Answers requests until the process ends.
    pub fn run(self) {
        let keepalive = self.events.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(KEEPALIVE);
                keepalive.send(b": keepalive\n\n");
            }
        });
        let threads = self.options.threads.max(1);
        let searches = Searches::new(threads, self.options.search_budget);
        let shared = Arc::new(self);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (shared, searches) = (Arc::clone(&shared), searches.clone());
                std::thread::spawn(move || shared.work(searches))
            })
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
    }

    fn work(&self, searches: Searches) {
        let mut local = Local::new(self.options.db.clone(), self.options.team.clone(), searches);
        while let Ok(request) = self.http.recv() {
            self.handle(&mut local, request);
        }
    }

    fn handle(&self, local: &mut Local, request: Request) {
        local.client = request.remote_addr().copied();
        let url = request.url().to_owned();
        let (path, query) = url.split_once('?').unwrap_or((&url, ""));
        let params = super::params::Params::parse(query);
        let mut set_cookie = false;
        if let Some(token) = &self.options.token {
            match authorized(&request, &params, token) {
                Auth::Yes => {}
                Auth::ByQuery => set_cookie = true,
                Auth::No => {
                    let answer = Answer::text(
                        401,
                        "piidx serve: this server needs its token: open the URL with ?token=TOKEN, or send Authorization: Bearer TOKEN\n",
                    );
                    respond(request, answer, None);
                    return;
                }
            }
        } else if !local_host(&request) {
            // Without a token only loopback names are answered, so a web page
            // elsewhere cannot reach the server through DNS rebinding.
            respond(
                request,
                Answer::text(
                    403,
                    "piidx serve: requests must name a loopback host (127.0.0.1, localhost)\n",
                ),
                None,
            );
            return;
        }
        if request.method() != &tiny_http::Method::Get
            && request.method() != &tiny_http::Method::Head
        {
            respond(
                request,
                Answer::text(405, "piidx serve is read-only: only GET\n"),
                None,
            );
            return;
        }
        let cookie = set_cookie.then(|| self.options.token.clone()).flatten();
        let context = Context {
            live: self.options.live,
        };
        let start = std::time::Instant::now();
        match routes::route(local, &context, path, &params) {
            Reply::Answer(mut answer) => {
                answer.total = Some(start.elapsed().as_secs_f64() * 1000.0);
                if answer.status >= 500 {
                    local.reset();
                }
                respond(request, answer, cookie.as_deref());
            }
            Reply::Events => self.events.subscribe(request),
        }
    }
}

/// Sets TCP_NODELAY on the listener; Linux copies it to every accepted
/// connection. tiny_http writes an answer's head and body in separate
/// writes, and Nagle's algorithm held the last one back until the client's
/// delayed ACK: 40 ms added to every kept-alive request.
fn no_delay(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor, an int option and its size.
    unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

enum Auth {
    Yes,
    ByQuery,
    No,
}

fn authorized(request: &Request, params: &super::params::Params, token: &str) -> Auth {
    let header = |name: &'static str| {
        request
            .headers()
            .iter()
            .filter(move |h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    };
    // RFC 9110: the scheme is case-insensitive, and blanks may follow it.
    let bearer = header("authorization").any(|value| {
        let value = value.trim_start();
        value
            .split_once([' ', '\t'])
            .is_some_and(|(scheme, given)| {
                scheme.eq_ignore_ascii_case("bearer") && same(given.trim(), token)
            })
    });
    let cookie = header("cookie").any(|value| {
        value.split(';').any(|pair| {
            pair.trim()
                .strip_prefix(COOKIE)
                .and_then(|rest| rest.strip_prefix('='))
                .is_some_and(|given| same(given, token))
        })
    });
    if bearer || cookie {
        Auth::Yes
    } else if params.get("token").is_some_and(|given| same(given, token)) {
        Auth::ByQuery
    } else {
        Auth::No
    }
}

/// Compares in time independent of where the texts differ.
fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, &byte) in b.iter().enumerate() {
        diff |= usize::from(byte ^ a.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// The request's Host names this machine (or there is none: HTTP/1.0).
fn local_host(request: &Request) -> bool {
    let Some(host) = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Host"))
        .map(|h| h.value.as_str().to_ascii_lowercase())
    else {
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("").to_owned()
    } else {
        host.rsplit_once(':')
            .map_or(host.clone(), |(name, _)| name.to_owned())
    };
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare() {
        assert!(same("abc", "abc"));
        assert!(!same("abd", "abc"));
        assert!(!same("ab", "abc"));
        assert!(!same("abcd", "abc"));
    }
}
