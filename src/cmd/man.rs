//! `piidx man`: the man page (roff) from the clap definitions, with a
//! section per subcommand.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;

#[derive(Debug, clap::Args)]
pub struct Args {}

/// `command`: the whole command line's clap definition.
pub fn run(_args: Args, command: clap::Command) -> Result<ExitCode> {
    let mut out = super::stdout();
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        let name = format!("piidx {}", sub.get_name());
        writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
        let sub_man = clap_mangen::Man::new(sub.clone().bin_name(name));
        sub_man.render_synopsis_section(&mut out)?;
        sub_man.render_description_section(&mut out)?;
        sub_man.render_options_section(&mut out)?;
    }
    man.render_version_section(&mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
