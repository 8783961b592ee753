//! `piidx datasette`: Datasette on the index, with text search, dates and
//! canned queries: writes the metadata file (`query::datasette`) next to
//! the database and runs `datasette serve` in this process's place (or,
//! with `--print`, prints that one-line command instead).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};

use super::Global;
use piidx::query::datasette;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write Datasette's metadata file [default: <db>.datasette.json]
    #[arg(long, value_name = "FILE")]
    pub metadata: Option<PathBuf>,
    /// Write the metadata file and print the `datasette` command instead of running it
    #[arg(long)]
    pub print: bool,
    /// The address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on
    #[arg(long, default_value_t = 8001)]
    pub port: u16,
    /// More `datasette serve` options, after `--` (e.g. `-- --open`)
    #[arg(last = true, value_name = "DATASETTE_ARGS")]
    pub extra: Vec<String>,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    // The index must be there and current (its views are what Datasette shows).
    drop(global.index()?);
    let db = &global.db;
    let metadata_path = args.metadata.clone().unwrap_or_else(|| {
        let mut name = db.as_os_str().to_owned();
        name.push(".datasette.json");
        PathBuf::from(name)
    });
    let database = db
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "piidx".into());
    let text = serde_json::to_string_pretty(&datasette::metadata(&database))?;
    std::fs::write(&metadata_path, text + "\n")
        .with_context(|| format!("cannot write {}", metadata_path.display()))?;
    let plugins = {
        let mut name = db.as_os_str().to_owned();
        name.push(".datasette-plugins");
        PathBuf::from(name)
    };
    std::fs::create_dir_all(&plugins)
        .and_then(|()| std::fs::write(plugins.join("piidx_sqlar.py"), SQLAR_PLUGIN))
        .and_then(|()| std::fs::write(plugins.join("piidx_host.py"), host_plugin(&args.host)))
        .with_context(|| format!("cannot write the Datasette plugin in {}", plugins.display()))?;
    let mut command = vec![
        "datasette".to_owned(),
        "serve".to_owned(),
        db.to_string_lossy().into_owned(),
        "--metadata".to_owned(),
        metadata_path.to_string_lossy().into_owned(),
        "--plugins-dir".to_owned(),
        plugins.to_string_lossy().into_owned(),
        "--host".to_owned(),
        args.host.clone(),
        "--port".to_owned(),
        args.port.to_string(),
        // Search and transcripts of a large index take more than the
        // default second.
        "--setting".to_owned(),
        "sql_time_limit_ms".to_owned(),
        "10000".to_owned(),
    ];
    command.extend(args.extra.iter().cloned());
    if args.print {
        let quoted: Vec<String> = command.iter().map(|word| shell_quote(word)).collect();
        println!("{}", quoted.join(" "));
        return Ok(ExitCode::SUCCESS);
    }
    let err = std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec();
    if err.kind() == std::io::ErrorKind::NotFound {
        return Err(anyhow!(
            "datasette is not installed; install it (`pipx install datasette` or `pip install datasette`), or run `piidx datasette --print` for the command"
        ));
    }
    Err(err).context("cannot run datasette")
}

/// A Datasette plugin giving its connections `sqlar_uncompress`, which the
/// `sqlite3` shell has built in and the views over deflated shared texts
/// read with (migration 0017, docs/schema.md).
const SQLAR_PLUGIN: &str = r#""""Written by `piidx datasette`: sqlar_uncompress for piidx's views (docs/schema.md)."""
import zlib

from datasette import hookimpl


def sqlar_uncompress(data, size):
    if data is None or size is None or size <= 0 or len(data) == size:
        return data
    return zlib.decompress(data)


@hookimpl
def prepare_connection(conn):
    conn.create_function("sqlar_uncompress", 2, sqlar_uncompress, deterministic=True)
"#;

/// A Datasette plugin that answers only requests whose `Host` names this
/// machine, as `piidx serve` does without a token: Datasette itself checks
/// no Host header, so a web page elsewhere could reach it through a name it
/// controls that resolves to 127.0.0.1 (DNS rebinding) and read every
/// session and the SQL interface. `host` (the `--host` it listens on) is
/// allowed as well when it is a specific address.
fn host_plugin(host: &str) -> String {
    let extra = match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => String::new(),
        _ => host.to_ascii_lowercase(),
    };
    let extra = serde_json::to_string(&extra).unwrap_or_else(|_| "\"\"".to_owned());
    HOST_PLUGIN.replace("__PIIDX_EXTRA_HOST__", &extra)
}

const HOST_PLUGIN: &str = r#""""Written by `piidx datasette`: answers only requests naming this machine (DNS rebinding)."""
import ipaddress

from datasette import hookimpl

EXTRA_HOST = __PIIDX_EXTRA_HOST__


def _name(host):
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        return host.rsplit(":", 1)[0]
    return host


def allowed(host):
    if host is None:
        return True  # HTTP/1.0 sends none
    name = _name(host)
    if name == "localhost" or name.endswith(".localhost") or (EXTRA_HOST and name == EXTRA_HOST):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        async def checked(scope, receive, send):
            if scope.get("type") in ("http", "websocket"):
                hosts = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"host"]
                if len(hosts) > 1 or not allowed(hosts[0] if hosts else None):
                    await send({
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [[b"content-type", b"text/plain; charset=utf-8"]],
                    })
                    await send({
                        "type": "http.response.body",
                        "body": b"piidx datasette answers only requests that name this machine (localhost, 127.0.0.1, [::1]); open it by one of those names\n",
                    })
                    return
            await app(scope, receive, send)

        return checked

    return wrap
"#;

/// A word as a POSIX shell reads it back.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
