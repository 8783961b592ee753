//! `piidx pick`: a full-screen picker over the index, in the manner of
//! fzf and atuin. Results follow each key (session titles, then full-text
//! hits), a preview pane shows the transcript at the hit, and the chosen
//! row comes back as a `Choice` for the caller to act on (resume, show,
//! export, print the path).
//!
//! `state` is what keys do (no terminal), `results` asks `query`,
//! `preview` renders the transcript, `view` draws. This file owns the
//! terminal: it draws on `/dev/tty` (so standard output stays free for what
//! the choice prints), and puts the terminal back on every way out: a
//! return, an error, a panic (a hook restores it before the message), and
//! SIGINT/SIGTERM/SIGHUP from outside (Ctrl-C itself is a key in raw mode).

mod preview;
mod results;
mod state;
mod view;

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::{cursor, execute, terminal};

use crate::query::scope::Scope;
use crate::query::search::SearchError;
use crate::store::Index;
use preview::Preview;
use results::{Found, Source};
pub use state::{Action, Reach};
use state::{Outcome, State};

#[derive(Debug, thiserror::Error)]
pub enum PickError {
    #[error(
        "piidx pick needs a terminal (/dev/tty could not be opened); use `piidx search` in scripts"
    )]
    NoTerminal(#[source] std::io::Error),
    #[error("the terminal failed")]
    Terminal(#[from] std::io::Error),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Query(#[from] crate::query::QueryError),
}

/// How the picker starts.
#[derive(Debug, Clone)]
pub struct PickOptions {
    /// The query line's first text (filters such as `role:user` included).
    pub query: String,
    pub scope: Scope,
    /// `None`: this directory's sessions when it has any, else all.
    pub reach: Option<Reach>,
    /// The directory "here" means.
    pub current_dir: PathBuf,
    /// Where a picker left before starts again (after Ctrl-O's transcript).
    pub back: Option<Place>,
}

/// Where the picker was when a choice was made: its query line, reach,
/// Ctrl-R role and selected row, to come back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub query: String,
    pub reach: Reach,
    pub role: Option<usize>,
    pub selected: usize,
}

/// The row the user chose and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub action: Action,
    pub session_id: String,
    pub session_path: String,
    /// The hit's entry, when a hit was chosen.
    pub entry_id: Option<String>,
    /// Where the picker was, to start it there again.
    pub place: Place,
}

/// Runs the picker until the user chooses (`Some`) or leaves (`None`).
pub fn pick(index: Index, options: PickOptions) -> Result<Option<Choice>, PickError> {
    let current_dir = options.current_dir.to_string_lossy().into_owned();
    let mut source = Source::new(index, options.scope, current_dir.clone());
    let reach = match options.reach {
        Some(reach) => reach,
        None if source.sessions(Reach::Here)?.is_empty() => Reach::All,
        None => Reach::Here,
    };
    let mut state = State::new(&options.query, reach);
    if let Some(place) = &options.back {
        state = State::new(&place.query, place.reach);
        state.role = place.role;
    }
    let mut app = App {
        state,
        found: Found::default(),
        preview: None,
        preview_id: 0,
        preview_asked: false,
        preview_height: 0,
        current_dir,
    };
    app.search(&mut source)?;
    if let Some(place) = &options.back {
        app.state.selected = place.selected.min(app.state.rows.saturating_sub(1));
    }

    let tty = File::options()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(PickError::NoTerminal)?;
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = RawScreen::enter(&stop)?;
    watch_for_hangup(tty.try_clone()?);
    let mut terminal = Terminal::new(CrosstermBackend::new(tty))?;
    let trace = Trace::from_env();
    let previewer = preview::Previewer::start(source.index().path().to_owned());
    let mut key_at: Option<Instant> = None;
    loop {
        if let Some((id, preview)) = previewer.ready()
            && id == app.preview_id
        {
            app.preview = Some(preview);
        }
        terminal.draw(|frame| {
            app.preview_height = view::draw(frame, &app.screen());
        })?;
        if let Some(at) = key_at.take() {
            trace.record(at.elapsed());
        }
        crate::fault::panic_if_due("pick");
        if !app.preview_asked
            && let Some(row) = app.found.rows.get(app.state.selected)
        {
            previewer.ask(app.preview_id, row.clone(), usize::from(app.preview_height));
            app.preview_asked = true;
        }
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // While a preview is being made, look for it between keys.
        let wait = if app.preview.is_none() && app.preview_asked {
            20
        } else {
            200
        };
        if !event::poll(Duration::from_millis(wait))? {
            continue;
        }
        key_at = Some(Instant::now());
        // Every key already typed is taken before searching once.
        let mut requery = false;
        loop {
            match event::read()? {
                Event::Key(key) => match app.state.key(key) {
                    Outcome::Done(action) => {
                        return Ok(action.and_then(|action| app.choice(action)));
                    }
                    Outcome::Requery => requery = true,
                    Outcome::Moved => app.forget_preview(),
                    Outcome::Nothing => {}
                },
                Event::Resize(..) => app.forget_preview(),
                _ => {}
            }
            if !event::poll(Duration::ZERO)? {
                break;
            }
        }
        if requery {
            app.search(&mut source)?;
        }
    }
}

struct App {
    state: State,
    found: Found,
    /// The selected row's preview, once the previewer made it.
    preview: Option<Preview>,
    /// Which selection the preview wanted now is for; older ones are dropped.
    preview_id: u64,
    preview_asked: bool,
    preview_height: u16,
    current_dir: String,
}

impl App {
    fn screen(&self) -> view::Screen<'_> {
        view::Screen {
            state: &self.state,
            found: &self.found,
            preview: self.preview.as_ref(),
            current_dir: &self.current_dir,
        }
    }

    fn search(&mut self, source: &mut Source) -> Result<(), PickError> {
        self.found = source.find(&self.state.query(), self.state.reach)?;
        self.state.set_rows(self.found.rows.len());
        self.forget_preview();
        Ok(())
    }

    /// The selection changed: its preview is to be made.
    fn forget_preview(&mut self) {
        self.preview = None;
        self.preview_id += 1;
        self.preview_asked = false;
    }

    fn choice(&self, action: Action) -> Option<Choice> {
        let row = self.found.rows.get(self.state.selected)?;
        Some(Choice {
            action,
            session_id: row.session_id.clone(),
            session_path: row.session_path.clone(),
            entry_id: row.hit.as_ref().map(|hit| hit.entry_id.clone()),
            place: Place {
                query: self.state.line.text().to_owned(),
                reach: self.state.reach,
                role: self.state.role,
                selected: self.state.selected,
            },
        })
    }
}

/// Raw mode and the alternate screen, left on drop and by the panic hook;
/// while it lasts, SIGINT, SIGTERM and SIGHUP set `stop` instead of
/// killing the process with the terminal still raw.
struct RawScreen {
    signals: Vec<signal_hook::SigId>,
}

impl RawScreen {
    fn enter(stop: &Arc<AtomicBool>) -> std::io::Result<RawScreen> {
        install_panic_hook();
        let mut guard = RawScreen {
            signals: Vec::new(),
        };
        for signal in [
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ] {
            guard
                .signals
                .push(signal_hook::flag::register(signal, Arc::clone(stop))?);
        }
        terminal::enable_raw_mode()?;
        let mut tty = File::options().write(true).open("/dev/tty")?;
        execute!(tty, terminal::EnterAlternateScreen)?;
        Ok(guard)
    }
}

impl Drop for RawScreen {
    fn drop(&mut self) {
        restore_terminal();
        for id in self.signals.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Ends the process when the terminal goes away (its window closed, the
/// tmux server killed). crossterm's reader then sees end-of-file, which it
/// reads again and again without returning, and the kernel's SIGHUP does
/// not always reach a process started by a shell without job control; so
/// a thread asks the terminal every fraction of a second. There is no
/// terminal left to restore.
fn watch_for_hangup(tty: File) {
    use std::os::fd::AsRawFd;
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(250));
            // SAFETY: `termios` is plain data that tcgetattr fills in, and
            // the descriptor is owned by `tty`, alive for the whole loop.
            let gone = unsafe {
                let mut termios = std::mem::zeroed::<libc::termios>();
                libc::tcgetattr(tty.as_raw_fd(), &mut termios) != 0
            };
            if gone {
                std::process::exit(HANGUP_EXIT);
            }
        }
    });
}

/// 128 + SIGHUP, as a shell reports a process that a hangup ended.
const HANGUP_EXIT: i32 = 129;

/// Puts the terminal back as it was; harmless when it already is.
fn restore_terminal() {
    if let Ok(mut tty) = File::options().write(true).open("/dev/tty") {
        let _ = execute!(tty, terminal::LeaveAlternateScreen, cursor::Show);
        let _ = tty.flush();
    }
    let _ = terminal::disable_raw_mode();
}

fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
    });
}

/// `PIIDX_PICK_TRACE=FILE`: the time from each key to the frame drawn
/// after it, one line of microseconds per key (for `bench/pick-latency`).
struct Trace {
    file: Option<File>,
}

impl Trace {
    fn from_env() -> Trace {
        let file = std::env::var_os("PIIDX_PICK_TRACE")
            .and_then(|path| File::options().create(true).append(true).open(path).ok());
        Trace { file }
    }

    fn record(&self, elapsed: Duration) {
        if let Some(mut file) = self.file.as_ref() {
            let _ = writeln!(file, "{}", elapsed.as_micros());
        }
    }
}
