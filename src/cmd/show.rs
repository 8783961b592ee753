//! `piidx show`: a session's branch as a transcript, paged on a terminal.

use std::process::ExitCode;

use anyhow::Result;

use super::Global;
use piidx::query::requests::BranchRequest;
use piidx::query::tree::SessionTree;
use piidx::render::transcript::{self, Options, Style, Tools};
use piidx::render::{self, Pager};

#[derive(Debug, clap::Args)]
#[command(mut_arg("branch", |arg| arg.conflicts_with("all")))]
pub struct Args {
    #[command(flatten)]
    pub at: BranchRequest,
    /// Show every entry of the tree with its branch points
    #[arg(long)]
    pub all: bool,
    /// Print the branch's entries (root to leaf) as a JSON array; image payloads become placeholders
    #[arg(long, conflicts_with_all = ["markdown", "all"])]
    pub json: bool,
    /// Print CommonMark
    #[arg(long)]
    pub markdown: bool,
    /// Print system prompts in full (by default: their sections and tools, with sizes)
    #[arg(long)]
    pub system: bool,
    /// Tool calls on one line each, without their results
    #[arg(long, conflicts_with = "tool_lines")]
    pub no_tools: bool,
    /// At most N lines of each tool result, then a marker saying how many more (0: all)
    #[arg(long, value_name = "N")]
    pub tool_lines: Option<usize>,
    /// Also show the branch's entries that give the model no message (model and
    /// thinking changes, labels, names) as `·` lines, as the web page does
    #[arg(long)]
    pub notes: bool,
    /// Never page (by default a terminal pages through $PIIDX_PAGER, $PAGER or less)
    #[arg(long)]
    pub no_pager: bool,
    /// The pager stays until quit even when the transcript fits one screen
    /// (the picker's Ctrl-O: otherwise it would be gone at once).
    #[arg(skip)]
    pub stay: bool,
}

impl Args {
    /// `piidx show SESSION` with no other option.
    pub fn of(session: String) -> Args {
        Args {
            at: BranchRequest::of(session),
            all: false,
            json: false,
            markdown: false,
            system: false,
            no_tools: false,
            tool_lines: None,
            notes: false,
            no_pager: false,
            stay: false,
        }
    }
}

pub fn run(args: Args, global: &Global) -> Result<ExitCode> {
    let tree = load_tree(global, &args.at.session)?;
    let term = &global.term;
    let options = Options {
        style: if args.markdown {
            Style::Markdown
        } else {
            Style::Text
        },
        full_system: args.system,
        notes: args.notes,
        tools: match (args.no_tools, args.tool_lines) {
            (true, _) => Tools::Hidden,
            (false, None | Some(0)) => Tools::Full,
            (false, Some(n)) => Tools::Lines(n),
        },
        theme: if args.markdown || args.json {
            render::Term::plain().theme()
        } else {
            term.theme()
        },
    };
    let text = if args.all {
        transcript::whole_tree(&tree, options)
    } else {
        let path = args.at.path(&tree)?;
        if args.json {
            let mut text = serde_json::to_string_pretty(&tree.entries_json(&path))?;
            text.push('\n');
            text
        } else {
            transcript::context(&tree, &path, options)
        }
    };
    Pager::start(term, !args.no_pager && !args.json, args.stay).show(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The tree of the session `arg` names, read in one snapshot.
pub fn load_tree(global: &Global, arg: &str) -> Result<SessionTree> {
    Ok(SessionTree::named(&global.index()?, arg)?)
}
