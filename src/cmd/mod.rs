//! One file per subcommand: its options, turning them into the library's
//! options, calling the library, rendering the answer, and the exit code.
//! This file holds what they share: the global options, the option groups
//! (`PgArgs`, `ListArgs`; the scope's is `query::scope::ScopeText`), and the
//! exit codes (documented in README.md). The command list is `cli`'s; nothing
//! here imports it.

pub mod completions;
pub mod datasette;
pub mod doctor;
pub mod export;
pub mod man;
pub mod mcp;
pub mod pick;
pub mod push;
pub mod redact;
pub mod resume;
pub mod roots;
pub mod search;
pub mod secrets;
pub mod serve;
pub mod sessions;
pub mod show;
pub mod sql;
pub mod subagents;
pub mod sync;
pub mod tools;
pub mod tree;
pub mod usage;
pub mod watch;

use std::io::{BufWriter, StdoutLock, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};

use piidx::config;
use piidx::query::QueryError;
use piidx::query::scope::{Scope, ScopeText, now_ms};
use piidx::query::source::{Source, Team};
use piidx::render::{ColorChoice, Format, Term};
use piidx::store::Index;
use piidx::sync::SyncError;

/// Some input could not be read in full (parse errors, skipped files,
/// warnings); or, for `search`, nothing matched; or `doctor` found problems.
pub const EXIT_PARTIAL: u8 = 1;
pub const EXIT_FATAL: u8 = 2;
/// Another sync held the lock for longer than `--wait`.
pub const EXIT_BUSY: u8 = 3;
/// A session root or file could not be read: what the index holds for it is kept.
pub const EXIT_INCOMPLETE: u8 = 4;
/// The picker was left without a choice (Esc, Ctrl-C), as fzf exits.
pub const EXIT_CANCELLED: u8 = 130;

/// What every command gets besides its own options.
pub struct Global {
    pub db: PathBuf,
    pub term: Term,
}

impl Global {
    /// The index, for reading.
    pub fn index(&self) -> Result<Index> {
        Ok(Index::open(&self.db)?)
    }

    /// Where the questions go: the team store `--pg` names, else the index.
    pub fn source(&self, pg: &PgArgs) -> Result<Source> {
        Ok(Source::open(&self.db, pg.team().as_ref())?)
    }

    /// Asks the index, or with `--pg` the team store, one question; an error
    /// says `what` failed and where.
    pub fn ask<T>(
        &self,
        pg: &PgArgs,
        what: &str,
        question: impl FnOnce(&mut Source) -> Result<T, QueryError>,
    ) -> Result<T> {
        let mut source = self.source(pg)?;
        question(&mut source).with_context(|| format!("{what} from {}", self.place(pg)))
    }

    /// The database or store `source` asks, for messages.
    pub fn place(&self, pg: &PgArgs) -> String {
        match &pg.pg {
            Some(_) => "the team store".to_owned(),
            None => self.db.display().to_string(),
        }
    }
}

impl PgArgs {
    /// The team store these options name, if any.
    pub fn team(&self) -> Option<Team> {
        self.pg.as_ref().map(|url| Team {
            url: url.clone(),
            machine: self.machine.clone(),
        })
    }
}

impl Global {
    /// What the global options say: the database (absolute; `None`: the
    /// default one) and when to colour.
    pub fn new(db: Option<PathBuf>, color: ColorChoice) -> Result<Global> {
        let db = match db {
            Some(db) => db,
            None => config::default_db().ok_or_else(|| {
                anyhow!("cannot find a home directory for the database; pass --db PATH")
            })?,
        };
        Ok(Global {
            db: config::absolute(&db),
            term: Term::stdout(color),
        })
    }
}

// Asking the team store in PostgreSQL instead of the index (`piidx push`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PgArgs {
    /// Answer from the team store at this postgres:// URL (what `piidx push` sent there) instead of the index
    #[arg(long, value_name = "URL")]
    pub pg: Option<String>,
    /// With --pg: only sessions of this machine (its label: `piidx sync --machine`, else its host name)
    #[arg(long, value_name = "NAME", requires = "pg")]
    pub machine: Option<String>,
}

// How a listing command prints.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ListArgs {
    /// Print a JSON array
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
    /// At most N rows
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// The scope the scope options name; dates are read in the time zone.
pub fn scope(args: &ScopeText) -> Result<Scope> {
    Ok(args.scope(now_ms(), "--")?)
}

impl ListArgs {
    pub fn format(&self) -> Format {
        Format::choose(self.json, self.csv)
    }
}

// `--json` and `--csv`, for a command whose `--limit` is in its request.
#[derive(Debug, clap::Args)]
pub struct FormatArgs {
    /// Print a JSON array
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV with a header row
    #[arg(long)]
    pub csv: bool,
}

impl FormatArgs {
    pub fn format(&self) -> Format {
        Format::choose(self.json, self.csv)
    }
}

/// A time limit given in seconds (`--timeout`, `--search-timeout`): `None`
/// for 0 (no limit).
pub fn time_limit(seconds: f64) -> Option<std::time::Duration> {
    (seconds > 0.0).then(|| std::time::Duration::from_secs_f64(seconds.min(1e9)))
}

/// Standard output, buffered: a locked stdout alone makes one `write` per
/// line. Callers flush, so a failed write is seen.
pub fn stdout() -> BufWriter<StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

/// Writes an answer to stdout with `write`, flushed.
pub fn print(
    write: impl FnOnce(&mut BufWriter<StdoutLock<'static>>) -> std::io::Result<()>,
) -> Result<ExitCode> {
    let mut out = stdout();
    write(&mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The error of a `--pg` option or `push` in a build without PostgreSQL.
#[cfg(not(feature = "postgres"))]
pub fn no_postgres() -> anyhow::Error {
    anyhow!(
        "this piidx was built without PostgreSQL support (cargo feature `postgres`); rebuild with default features"
    )
}

pub fn exit_code(err: &anyhow::Error) -> u8 {
    use piidx::doctor::DoctorError;
    let busy = err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<SyncError>(),
            Some(SyncError::Busy { .. })
        ) || matches!(
            cause.downcast_ref::<DoctorError>(),
            Some(DoctorError::Sync(SyncError::Busy { .. }))
        )
    });
    if busy { EXIT_BUSY } else { EXIT_FATAL }
}

/// The error and its causes, each once: a `Display` in piidx never repeats
/// its source, so the chain reads as one sentence.
pub fn message(err: &anyhow::Error) -> String {
    err.chain()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// True when the reader of stdout went away (`piidx … | head`): like other
/// CLIs, piidx then stops quietly. serde_json's writer wraps the IO error
/// in its own, whose `source()` skips it, so that one is asked directly.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let kind = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => Some(io.kind()),
            None => cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
