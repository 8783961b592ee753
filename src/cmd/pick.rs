//! `piidx pick`: the interactive picker; the chosen session is resumed in
//! Pi (Enter), exported, or its path printed; Ctrl-O shows its transcript
//! (in the pager, which stays until quit) and comes back to the picker
//! where it was. Leaving without a choice exits 130, as fzf does.

use std::process::ExitCode;

use anyhow::Result;

use super::{EXIT_CANCELLED, Global, export, resume, show};
use piidx::pick::{self, Action, PickOptions, Reach};
use piidx::query::scope::ScopeText;
use piidx::query::tree;
use piidx::resume::Mode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Words to start with; filters can be typed among them: role:user model:opus since:7d
    pub query: Vec<String>,
    /// Start with every session (Tab toggles; by default this directory's when it has any)
    #[arg(long, conflicts_with = "here")]
    pub all: bool,
    /// Start with the sessions of this directory and below
    #[arg(long)]
    pub here: bool,
    /// Only hits of this kind of text (typed as role:ROLE; Ctrl-R cycles roles)
    #[arg(long, value_name = "ROLE")]
    pub role: Vec<String>,
    /// Only hits whose model contains M (typed as model:M)
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// Enter forks the session into the current directory instead of resuming it
    #[arg(long)]
    pub fork: bool,
    /// Sessions searched
    #[command(flatten)]
    pub scope: ScopeText,
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let mut query: Vec<String> = args.query.clone();
    query.extend(args.role.iter().map(|role| format!("role:{role}")));
    query.extend(args.model.iter().map(|model| format!("model:{model}")));
    let mut text = query.join(" ");
    if !text.is_empty() {
        text.push(' ');
    }
    let mut options = PickOptions {
        query: text,
        scope: super::scope(&args.scope)?,
        reach: match (args.all, args.here) {
            (true, _) => Some(Reach::All),
            (_, true) => Some(Reach::Here),
            _ => None,
        },
        current_dir: resume::current_dir()?,
        back: None,
    };
    loop {
        let Some(choice) = pick::pick(global.index()?, options.clone())? else {
            return Ok(ExitCode::from(EXIT_CANCELLED));
        };
        let session = choice.session_path.clone();
        return match choice.action {
            Action::Show => {
                let mut show = show::Args::of(session);
                show.stay = true;
                show::run(show, global)?;
                options.back = Some(choice.place);
                continue;
            }
            Action::Resume => {
                let index = global.index()?;
                let found = tree::resolve(&index, &session)?;
                let mode = if args.fork { Mode::Fork } else { Mode::Resume };
                resume::launch(&index, &found, mode, false, global)
            }
            Action::Export => export::run(
                export::Args {
                    session,
                    output: None,
                },
                global,
            ),
            Action::PrintPath => {
                println!("{session}");
                Ok(ExitCode::SUCCESS)
            }
        };
    }
}
