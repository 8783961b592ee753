//! `piidx serve`: the index as a local web app and JSON API (`serve/`),
//! until interrupted; with `--watch`, the watcher runs in the same process
//! and open pages update after each sync. The first line on stdout is the
//! address it listens on (a port of 0 picks a free one).

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};

use super::Global;
use super::PgArgs;
use piidx::render::misc;
use piidx::serve::{self, Options, Server};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; anything but loopback needs --allow-remote
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8765")]
    pub addr: String,
    /// Allow an address other machines can reach (a token is then required: --token, or one piidx makes)
    #[arg(long)]
    pub allow_remote: bool,
    /// Every request must carry this token (at least 16 characters): `Authorization: Bearer TOKEN`, or `?token=TOKEN` once (then a cookie); with --allow-remote and none, piidx makes one and prints it [default: $PIIDX_SERVE_TOKEN]
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Keep the index current while serving (as `piidx watch`); open pages update after each sync
    #[arg(long)]
    pub watch: bool,
    /// With --watch: sessions root to watch and index; repeatable [default: as for `sync`]
    #[arg(long, value_name = "DIR", requires = "watch")]
    pub root: Vec<std::path::PathBuf>,
    /// With --watch: milliseconds without a new change before syncing
    #[arg(long, value_name = "MS", default_value_t = 150)]
    pub debounce: u64,
    /// Requests answered at the same time
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub threads: usize,
    /// Stop a search after this many seconds (0: no limit); a search also stops when its client goes away
    #[arg(long, value_name = "SECS", default_value_t = piidx::serve::api::SEARCH_BUDGET.as_secs_f64())]
    pub search_timeout: f64,
    /// With --pg the API's sessions, search, usage, tools and subagents answer from the team store (a session's page needs the index)
    #[command(flatten)]
    pub pg: PgArgs,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let addr = resolve(&args.addr)?;
    let given = args.token.or_else(|| {
        std::env::var("PIIDX_SERVE_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
    });
    let access = serve::check_access(addr, args.allow_remote, given)?;
    let watch = if args.watch {
        Some(super::watch::options(&args.root, args.debounce, global)?)
    } else {
        None
    };
    let server = Server::bind(Options {
        db: global.db.clone(),
        team: args.pg.team(),
        addr,
        token: access.token().map(str::to_owned),
        threads: args.threads.max(1),
        search_budget: super::time_limit(args.search_timeout),
        live: watch.is_some(),
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "piidx serve: listening on http://{}/",
        server.local_addr()
    )
    .and_then(|()| match &access {
        // Made here: the one place it is shown.
        serve::Access::Made(token) => writeln!(
            out,
            "piidx serve: token {token} (open http://{}/?token={token}, or send Authorization: Bearer {token})",
            server.local_addr()
        ),
        _ => Ok(()),
    })
    .and_then(|()| out.flush())
    .context("writing the address to stdout")?;
    drop(out);
    if let Some(options) = watch {
        let events = server.events();
        let term = global.term;
        std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || {
                let watched = piidx::watch::watch(&options, &mut |result| {
                    match result {
                        Ok(report) => {
                            for warning in &report.warnings {
                                misc::warn(warning, &term);
                            }
                            let data = serde_json::to_string(report).unwrap_or_default();
                            events.push(&data);
                        }
                        // Retried at the next change, as `watch` does.
                        Err(err) => misc::warn(&piidx::error_chain(err), &term),
                    }
                    true
                });
                if let Err(err) = watched {
                    misc::warn(
                        &format!("{}; serving without live updates", piidx::error_chain(&err)),
                        &term,
                    );
                }
            })
            .context("starting the watcher thread")?;
    }
    server.run();
    Ok(ExitCode::SUCCESS)
}

/// `HOST:PORT` as an address: an IP, or a name such as `localhost`.
fn resolve(text: &str) -> Result<SocketAddr> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    text.to_socket_addrs()
        .with_context(|| format!("--addr {text:?}: not HOST:PORT (e.g. 127.0.0.1:8765)"))?
        .next()
        .ok_or_else(|| anyhow!("--addr {text:?}: the name has no address; give an IP and port"))
}
