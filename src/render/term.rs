//! What the output goes to: whether it takes colour, how wide it is, and a
//! pager for long output, as git and ripgrep decide them.

use std::io::{self, IsTerminal, Write};
use std::process::{Child, Command, Stdio};

use anstyle::{AnsiColor, Effects, Style};

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (to anything non-empty).
    #[default]
    Auto,
    Always,
    Never,
}

/// The standard output as the renderers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub color: bool,
    /// Columns to fit tables into: `$COLUMNS` when set, else the terminal's
    /// width; `None` (never cut) when the output is not a terminal.
    pub width: Option<usize>,
    pub is_terminal: bool,
}

impl Term {
    /// The process's standard output.
    pub fn stdout(choice: ColorChoice) -> Term {
        let is_terminal = io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color,
        };
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|c| *c > 0);
        let width = columns.or_else(|| {
            is_terminal
                .then(terminal_size::terminal_size)
                .flatten()
                .map(|(terminal_size::Width(w), _)| w as usize)
        });
        Term {
            color,
            width,
            is_terminal,
        }
    }

    /// Plain output for programs: no colour, no width.
    pub fn plain() -> Term {
        Term {
            color: false,
            width: None,
            is_terminal: false,
        }
    }

    pub fn theme(&self) -> Theme {
        Theme { on: self.color }
    }
}

/// Styles, or nothing when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    on: bool,
}

impl Theme {
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// `text` in `style` (with the reset after it), or as it is.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.on && !text.is_empty() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    pub fn matched(&self, text: &str) -> String {
        self.paint(AnsiColor::Red.on_default().effects(Effects::BOLD), text)
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint(Style::new().effects(Effects::DIMMED), text)
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint(Style::new().effects(Effects::BOLD), text)
    }

    pub fn warning(&self, text: &str) -> String {
        self.paint(AnsiColor::Yellow.on_default().effects(Effects::BOLD), text)
    }

    pub fn error(&self, text: &str) -> String {
        self.paint(AnsiColor::Red.on_default(), text)
    }

    /// The current branch in trees.
    pub fn current(&self, text: &str) -> String {
        self.paint(AnsiColor::Green.on_default(), text)
    }

    /// A role name (or a kind of text), each in its colour.
    pub fn role(&self, role: &str, text: &str) -> String {
        let color = match role {
            "user" => AnsiColor::Green,
            "assistant" => AnsiColor::Blue,
            "thinking" => AnsiColor::Magenta,
            "tool_call" | "toolCall" | "tool_result" | "toolResult" | "bash" | "bashExecution" => {
                AnsiColor::Yellow
            }
            "system" | "developer" => AnsiColor::Cyan,
            _ => return self.bold(text),
        };
        self.paint(color.on_default().effects(Effects::BOLD), text)
    }
}

/// Long output on a terminal goes through `$PAGER` (else `less`), as git
/// does: `less` gets `-FRX` (quit when it fits one screen, pass colours,
/// leave the screen as it is). Writing to `Pager::stdout()`-less output
/// (a pipe, `--no-pager`) goes straight to standard output.
pub struct Pager {
    child: Option<Child>,
}

impl Pager {
    /// Starts the pager when `term` is a terminal and `enabled`; when it
    /// cannot start, output goes to standard output. `stay`: `less` does not
    /// quit by itself when the text fits one screen.
    pub fn start(term: &Term, enabled: bool, stay: bool) -> Pager {
        if !(enabled && term.is_terminal) {
            return Pager { child: None };
        }
        let command = std::env::var("PIIDX_PAGER")
            .or_else(|_| std::env::var("PAGER"))
            .ok()
            .filter(|pager| !pager.trim().is_empty())
            .unwrap_or_else(|| "less".to_owned());
        if command == "cat" {
            return Pager { child: None };
        }
        let mut parts = command.split_whitespace();
        let Some(program) = parts.next() else {
            return Pager { child: None };
        };
        let mut cmd = Command::new(program);
        cmd.args(parts).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            cmd.env("LESS", if stay { "RX" } else { "FRX" });
        }
        Pager {
            child: cmd.spawn().ok(),
        }
    }

    /// Writes `text` to the pager (or standard output) and waits for the
    /// pager to end. A reader that went away is not an error.
    pub fn show(mut self, text: &str) -> io::Result<()> {
        let written = match self.child.as_mut().and_then(|child| child.stdin.take()) {
            Some(mut stdin) => stdin.write_all(text.as_bytes()),
            None => {
                let mut out = io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
        };
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        match written {
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    }
}
