//! `piidx resume`: a session (or the one session a query finds) back in Pi,
//! rebuilt from the index first when its file is gone. Several sessions
//! found open the picker.

use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::{EXIT_CANCELLED, Global};
use piidx::pick::{self, PickOptions};
use piidx::query::scope::ScopeText;
use piidx::query::search::sessions::search_sessions;
use piidx::query::search::{HeadStart, SearchOptions};
use piidx::query::secrets;
use piidx::query::tree::{self, SessionRef, ViewError};
use piidx::render::misc;
use piidx::resume::{self, Mode, Plan};
use piidx::store::Index;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Session id, unique id prefix, file path, or words to search for
    #[arg(required = true, value_name = "SESSION|QUERY")]
    pub target: Vec<String>,
    /// Print the command line instead of running Pi (the file is still rebuilt when gone)
    #[arg(long)]
    pub print: bool,
    /// Fork the session into the current directory (`pi --fork`) instead of resuming it
    #[arg(long)]
    pub fork: bool,
    /// Sessions a query searches
    #[command(flatten)]
    pub scope: ScopeText,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let index = global.index()?;
    let arg = args.target.join(" ");
    let mode = if args.fork { Mode::Fork } else { Mode::Resume };
    let found = match tree::resolve(&index, &arg) {
        Ok(found) => found,
        Err(ViewError::NotFound(_)) => match one_session_matching(&index, &arg, &args)? {
            Some(found) => found,
            None => {
                let options = PickOptions {
                    query: arg,
                    scope: super::scope(&args.scope)?,
                    reach: Some(pick::Reach::All),
                    current_dir: current_dir()?,
                    back: None,
                };
                // The picker keeps the index it is given until it returns.
                let Some(choice) = pick::pick(index, options)? else {
                    return Ok(ExitCode::from(EXIT_CANCELLED));
                };
                let index = global.index()?;
                let found = tree::resolve(&index, &choice.session_path)?;
                return launch(&index, &found, mode, args.print, global);
            }
        },
        Err(err) => return Err(err.into()),
    };
    launch(&index, &found, mode, args.print, global)
}

/// The session `query` finds when it finds exactly one; `None` when it
/// finds several (for the picker to choose); an error when none.
fn one_session_matching(index: &Index, query: &str, args: &Args) -> Result<Option<SessionRef>> {
    let options = SearchOptions {
        query: query.to_owned(),
        scope: super::scope(&args.scope)?,
        ..SearchOptions::default()
    };
    let sessions =
        search_sessions(index, HeadStart::default(), &options, 2).with_context(|| {
            format!("{query:?} is not a session id or path, and searching for it failed")
        })?;
    match sessions.as_slice() {
        [] => bail!(
            "no session has the id or path {query:?}, and no session holds those words; try `piidx sessions` or `piidx search`"
        ),
        [one] => Ok(Some(tree::resolve(index, &one.session_path)?)),
        _ if !std::io::stdin().is_terminal() => bail!(
            "several sessions match {query:?} and there is no terminal to choose in; use `piidx search -l {query:?}` and resume by id, or run `piidx pick` in a terminal"
        ),
        _ => Ok(None),
    }
}

pub fn current_dir() -> Result<std::path::PathBuf> {
    std::env::current_dir().context("cannot read the current directory")
}

/// Prepares the session file and runs Pi on it (replacing this process),
/// or prints the command line.
pub fn launch(
    index: &Index,
    found: &SessionRef,
    mode: Mode,
    print: bool,
    global: &Global,
) -> Result<ExitCode> {
    let plan = resume::prepare(index, found, mode, &current_dir()?)?;
    tell(index, found, &plan, global)?;
    let program = plan.program;
    if print {
        println!("{}", plan.shell_line(program));
        return Ok(ExitCode::SUCCESS);
    }
    let err = std::process::Command::new(program)
        .args(plan.args())
        .current_dir(&plan.cwd)
        .exec();
    let install = if program == "omp" {
        "install oh-my-pi (npm install -g @oh-my-pi/pi-coding-agent)"
    } else {
        "install Pi (npm install -g @earendil-works/pi-coding-agent)"
    };
    Err(err).with_context(|| {
        format!(
            "cannot run `{program}`; {install} or run: {}",
            plan.shell_line(program)
        )
    })
}

/// Says on standard error what was done to the session file, and why Pi
/// starts where it does.
fn tell(index: &Index, found: &SessionRef, plan: &Plan, global: &Global) -> Result<()> {
    let term = &global.term;
    if plan.rebuilt {
        misc::note(
            &format!(
                "{} was gone: rebuilt from the index as {}",
                found.path,
                plan.file.display()
            ),
            term,
        );
        let redacted = secrets::redacted_in_file(index, found.file_id)?;
        if redacted > 0 {
            misc::warn(
                &format!(
                    "{redacted} secret(s) of this session were redacted by `sync --redact`: the rebuilt file holds [REDACTED:<kind>] in their place"
                ),
                term,
            );
        }
    }
    if let Some(cwd) = &plan.missing_cwd {
        let what = if plan.rebuilt {
            "the rebuilt file names"
        } else {
            "Pi will ask where to continue; starting in"
        };
        misc::note(
            &format!(
                "the session's directory {cwd} does not exist here; {what} {}",
                plan.cwd.display()
            ),
            term,
        );
    }
    Ok(())
}
