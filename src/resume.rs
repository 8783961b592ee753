//! Back into Pi: the command line that resumes (or forks) an indexed
//! session, and the session file rebuilt from the index when it is gone.
//!
//! Pi 1.5.2 opens `pi --session <path>` as it is, whatever project it
//! belongs to, and runs in the header's `cwd`; when that directory does not
//! exist an interactive Pi asks where to continue. `pi --fork <path>` copies
//! the session into a new one of the directory Pi is started in. So a
//! resume runs Pi in the session's cwd when it exists (else the current
//! directory), and a fork in the current directory.
//!
//! oh-my-pi's sessions are resumed by `omp`, which takes the same flags.
//!
//! A file that is gone (deleted, or an index copied from another machine)
//! is first written back with `export` where Pi would look for it: its old
//! path when that directory still exists, else Pi's session directory for
//! the cwd it is resumed in. If the header's cwd does not exist here, the
//! rebuilt header names the current directory instead, and the plan says so.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::query::export::{self, ExportError};
use crate::query::sessions;
use crate::query::tree::SessionRef;
use crate::roots;
use crate::store::Index;

#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(
        "{path} is gone and no session directory is known to rebuild it in; set PI_CODING_AGENT_DIR or HOME"
    )]
    NoSessionDir { path: String },
    #[error("cannot rebuild the session file {path}; check that its directory is writable")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot rebuild the session file {path} from the index")]
    Export { path: PathBuf, source: ExportError },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
}

/// Resume the session, or fork it into the current directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Resume,
    Fork,
}

/// What `pi` is run with, and what was done to make it possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The session file Pi opens.
    pub file: PathBuf,
    /// The directory Pi is started in.
    pub cwd: PathBuf,
    pub mode: Mode,
    /// The file was gone and has been written back from the index.
    pub rebuilt: bool,
    /// The session's own cwd, when it does not exist here (Pi is started
    /// in the current directory instead; a rebuilt header names it).
    pub missing_cwd: Option<String>,
    /// The agent's program: `pi`, or `omp` for oh-my-pi's sessions.
    pub program: &'static str,
}

impl Plan {
    /// `pi`'s arguments.
    pub fn args(&self) -> Vec<String> {
        let flag = match self.mode {
            Mode::Resume => "--session",
            Mode::Fork => "--fork",
        };
        vec![flag.to_owned(), self.file.to_string_lossy().into_owned()]
    }

    /// The command line to type in a shell: `cd <cwd> && pi --session <file>`.
    pub fn shell_line(&self, program: &str) -> String {
        format!(
            "cd {} && {}",
            quote(&self.cwd.to_string_lossy()),
            self.command_line(program)
        )
    }

    /// `pi --session <file>` alone, to run where the shell is (the
    /// session's directory being gone).
    pub fn command_line(&self, program: &str) -> String {
        let mut line = quote(program);
        for arg in self.args() {
            line.push(' ');
            line.push_str(&quote(&arg));
        }
        line
    }
}

/// A word as a POSIX shell reads it back.
fn quote(text: &str) -> String {
    shlex::try_quote(text).map_or_else(|_| format!("{text:?}"), |quoted| quoted.into_owned())
}

/// Plans the resume of `session`, started from `current_dir`, rebuilding
/// the session file from `index` when it is gone.
pub fn prepare(
    index: &Index,
    session: &SessionRef,
    mode: Mode,
    current_dir: &Path,
) -> Result<Plan, ResumeError> {
    let header_cwd = sessions::header_cwd(index, session.file_id)?;
    let cwd_exists = header_cwd
        .as_deref()
        .is_some_and(|cwd| !cwd.is_empty() && Path::new(cwd).is_dir());
    let missing_cwd = header_cwd.clone().filter(|_| !cwd_exists);
    let run_in = match (mode, &header_cwd) {
        (Mode::Resume, Some(cwd)) if cwd_exists => PathBuf::from(cwd),
        _ => current_dir.to_owned(),
    };
    let program = sessions::program_of(&sessions::agent_of(index, session.file_id)?);
    let recorded = PathBuf::from(&session.path);
    if recorded.is_file() {
        return Ok(Plan {
            file: recorded,
            cwd: run_in,
            mode,
            rebuilt: false,
            missing_cwd,
            program,
        });
    }
    let file = rebuild_path(&recorded, &run_in)?;
    let new_cwd = missing_cwd.as_ref().map(|_| run_in.to_string_lossy());
    write_rebuilt(index, session, new_cwd.as_deref(), &file)?;
    Ok(Plan {
        file,
        cwd: run_in,
        mode,
        rebuilt: true,
        missing_cwd,
        program,
    })
}

/// Where a gone file is written back: its own path when its directory is
/// still there, else Pi's session directory for `cwd` under the same name.
fn rebuild_path(recorded: &Path, cwd: &Path) -> Result<PathBuf, ResumeError> {
    if recorded.parent().is_some_and(Path::is_dir) {
        return Ok(recorded.to_owned());
    }
    let dir = roots::session_dir_for(cwd).ok_or_else(|| ResumeError::NoSessionDir {
        path: recorded.display().to_string(),
    })?;
    let name = recorded
        .file_name()
        .map_or_else(|| "session.jsonl".into(), ToOwned::to_owned);
    Ok(dir.join(name))
}

/// Exports the session into `file` through a temporary file beside it, so
/// that Pi never sees half a session.
fn write_rebuilt(
    index: &Index,
    session: &SessionRef,
    cwd: Option<&str>,
    file: &Path,
) -> Result<(), ResumeError> {
    let write_err = |source| ResumeError::Write {
        path: file.to_owned(),
        source,
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(write_err)?;
    }
    let mut temp = file.as_os_str().to_owned();
    temp.push(".piidx-rebuild");
    let temp = PathBuf::from(temp);
    let result = (|| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&temp).map_err(write_err)?);
        index
            .in_snapshot(|index| export::export_in(index, session, cwd, &mut out))
            .map_err(|source| ResumeError::Export {
                path: file.to_owned(),
                source,
            })?;
        out.flush().map_err(write_err)?;
        std::fs::rename(&temp, file).map_err(write_err)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
