//! Where sessions are kept: the roots a sync walks.
//!
//! Pi 1.5.2 writes sessions to its agent directory's `sessions/` (one
//! directory per cwd), or flat into a custom session directory: the one
//! `PI_CODING_AGENT_SESSION_DIR` names, else the `sessionDir` setting of a
//! project's `.pi/settings.json`, else of `<agent dir>/settings.json` (a
//! leading `~` is the home directory; a relative path is relative to the
//! directory Pi was started in, the project's cwd). A user's sessions may
//! sit in several of these over time, so a sync with no `--root` walks
//! every one that exists, for the cwds the index knows and the current
//! one, plus every root synced before (remembered in the database's
//! `roots` table).
//!
//! Each root has a layout, which says which files Pi's `listAll()` lists:
//! `<root>/*/*.jsonl` in the per-cwd layout, `<root>/*.jsonl` in a flat one.
//!
//! Pi's two other lines keep theirs elsewhere, and are synced too (`omp_roots`,
//! `port_roots`): oh-my-pi (omp 18, `pi-utils/src/dirs.ts`,
//! `session/session-paths.ts`) in `<agent dir>/sessions`, the agent dir being
//! `$PI_CODING_AGENT_DIR`, else `~/<$PI_CONFIG_DIR or .omp>/agent`, a
//! profile's `~/.omp/profiles/<name>/agent` (`$OMP_PROFILE`, else
//! `$PI_PROFILE`; every profile there is synced), or, once `omp config
//! init-xdg` made `$XDG_DATA_HOME/omp`, `$XDG_DATA_HOME/omp/sessions`; and a
//! session file it wrote elsewhere (`--session-dir`) is named by a marker
//! file in `custom-session-files/` (its content is the file's path: its
//! directory is synced, flat). pi_agent_rust writes to Pi's own tree, or to
//! `$PI_SESSIONS_DIR`. A root's origin says whose it is (`Root::agents`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{absolute, expand_tilde};

/// How a root holds its sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// `<root>/<encoded cwd>/<file>.jsonl` (Pi's default `sessions/`).
    PerCwd,
    /// `<root>/<file>.jsonl` (a custom session directory).
    Flat,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::PerCwd => "per_cwd",
            Layout::Flat => "flat",
        }
    }

    pub fn parse(text: &str) -> Option<Layout> {
        match text {
            "per_cwd" => Some(Layout::PerCwd),
            "flat" => Some(Layout::Flat),
            _ => None,
        }
    }

    /// The depth at which Pi's `listAll()` lists a root's files.
    pub fn listed_depth(self) -> i64 {
        match self {
            Layout::PerCwd => 2,
            Layout::Flat => 1,
        }
    }
}

/// One directory a sync walks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub path: PathBuf,
    pub layout: Layout,
    /// Why it is synced: `user` (`--root`), `env`, `settings`,
    /// `project_settings`, `default` (`<agent dir>/sessions`); oh-my-pi's
    /// `omp` (its agent dir's sessions), `omp_profile`, `omp_xdg`,
    /// `omp_custom` (a `custom-session-files/` marker's directory);
    /// pi_agent_rust's `port_env` (`$PI_SESSIONS_DIR`).
    pub origin: &'static str,
}

impl Root {
    /// The agents whose sessions a root of this origin holds by default
    /// (Pi's own tree is pi_agent_rust's default too).
    pub fn agents(origin: &str) -> &'static [&'static str] {
        match origin {
            "omp" | "omp_profile" | "omp_xdg" | "omp_custom" => &["omp"],
            "port_env" => &["pi_agent_rust"],
            "default" => &["pi", "pi_agent_rust"],
            "user" => &[],
            _ => &["pi"],
        }
    }
}

/// The agent directory as Pi resolves it: `$PI_CODING_AGENT_DIR`, else
/// `~/.pi/agent`.
pub fn agent_dir() -> Option<PathBuf> {
    match std::env::var("PI_CODING_AGENT_DIR") {
        Ok(dir) if !dir.is_empty() => Some(expand_tilde(&dir)),
        _ => home().map(|home| home.join(".pi/agent")),
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
}

/// The `sessionDir` of a settings file, if it sets one.
fn session_dir_setting(settings: &Path) -> Option<String> {
    let text = std::fs::read_to_string(settings).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value
        .get("sessionDir")
        .and_then(serde_json::Value::as_str)
        .filter(|dir| !dir.trim().is_empty())
        .map(str::to_owned)
}

/// A `sessionDir` value as Pi resolves it when started in `cwd`.
fn resolve_setting(value: &str, cwd: &Path) -> PathBuf {
    let path = expand_tilde(value);
    if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    }
}

/// Where Pi 1.5.2 puts a new session of a project started in `cwd`: the
/// `PI_CODING_AGENT_SESSION_DIR` or the `sessionDir` setting (project's,
/// then the agent directory's) when one is set, flat; else
/// `<agent dir>/sessions/<encoded cwd>/` (`getDefaultSessionDirPath`).
pub fn session_dir_for(cwd: &Path) -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("PI_CODING_AGENT_SESSION_DIR")
        && !dir.is_empty()
    {
        return Some(absolute(&expand_tilde(&dir)));
    }
    let agent = agent_dir()?;
    let setting = session_dir_setting(&cwd.join(".pi/settings.json"))
        .or_else(|| session_dir_setting(&agent.join("settings.json")));
    Some(match setting {
        Some(dir) => absolute(&resolve_setting(&dir, cwd)),
        None => absolute(&agent).join("sessions").join(encode_cwd(cwd)),
    })
}

/// Pi's directory name for a cwd: one leading separator dropped, every
/// `/`, `\` and `:` made `-`, wrapped in `--`.
pub fn encode_cwd(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let text = text
        .strip_prefix(['/', '\\'])
        .unwrap_or(&text)
        .replace(['/', '\\', ':'], "-");
    format!("--{text}--")
}

/// Every place Pi 1.5.2 may have written sessions that exists, for the
/// project `cwds` (the index's and the current directory).
pub fn defaults(cwds: &[PathBuf]) -> Vec<Root> {
    let mut roots = Vec::new();
    let mut add = |path: PathBuf, layout, origin| {
        let path = absolute(&path);
        if path.is_dir() && !roots.iter().any(|root: &Root| root.path == path) {
            roots.push(Root {
                path,
                layout,
                origin,
            });
        }
    };
    if let Ok(dir) = std::env::var("PI_CODING_AGENT_SESSION_DIR")
        && !dir.is_empty()
    {
        add(expand_tilde(&dir), Layout::Flat, "env");
    }
    let agent = agent_dir();
    let global = agent
        .as_ref()
        .and_then(|agent| session_dir_setting(&agent.join("settings.json")));
    for cwd in cwds {
        if let Some(dir) = session_dir_setting(&cwd.join(".pi/settings.json")) {
            add(resolve_setting(&dir, cwd), Layout::Flat, "project_settings");
        }
        if let Some(dir) = &global {
            add(resolve_setting(dir, cwd), Layout::Flat, "settings");
        }
    }
    if let Some(agent) = agent {
        add(agent.join("sessions"), Layout::PerCwd, "default");
    }
    for (path, layout, origin) in port_roots().into_iter().chain(omp_roots()) {
        add(path, layout, origin);
    }
    roots
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .map(|value| expand_tilde(&value))
}

/// pi_agent_rust's own sessions root: `$PI_SESSIONS_DIR` (its
/// `config.rs` `sessions_dir_from_env`), per cwd like Pi's.
fn port_roots() -> Vec<(PathBuf, Layout, &'static str)> {
    env_path("PI_SESSIONS_DIR")
        .map(|dir| (dir, Layout::PerCwd, "port_env"))
        .into_iter()
        .collect()
}

/// oh-my-pi's session roots (see the module doc); those that do not exist
/// are left out by the caller.
fn omp_roots() -> Vec<(PathBuf, Layout, &'static str)> {
    let mut roots = Vec::new();
    let config_name = std::env::var("PI_CONFIG_DIR")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| ".omp".to_owned());
    let mut agent_dirs = Vec::new();
    if let Some(home) = home() {
        let config = home.join(&config_name);
        agent_dirs.push((config.join("agent"), "omp"));
        if let Ok(profiles) = std::fs::read_dir(config.join("profiles")) {
            let mut names: Vec<PathBuf> = profiles.flatten().map(|entry| entry.path()).collect();
            names.sort();
            agent_dirs.extend(
                names
                    .into_iter()
                    .map(|dir| (dir.join("agent"), "omp_profile")),
            );
        }
    }
    let xdg = |name: &str| env_path(name).map(|dir| dir.join("omp"));
    if let Some(data) = xdg("XDG_DATA_HOME").filter(|dir| dir.is_dir()) {
        roots.push((data.join("sessions"), Layout::PerCwd, "omp_xdg"));
        if let Ok(profiles) = std::fs::read_dir(data.join("profiles")) {
            let mut names: Vec<PathBuf> = profiles.flatten().map(|entry| entry.path()).collect();
            names.sort();
            roots.extend(
                names
                    .into_iter()
                    .map(|dir| (dir.join("sessions"), Layout::PerCwd, "omp_xdg")),
            );
        }
    }
    let mut marker_dirs: Vec<PathBuf> = agent_dirs
        .iter()
        .map(|(dir, _)| dir.join("custom-session-files"))
        .collect();
    marker_dirs.extend(xdg("XDG_STATE_HOME").map(|dir| dir.join("custom-session-files")));
    if let Some(agent) = env_path("PI_CODING_AGENT_DIR") {
        marker_dirs.push(agent.join("custom-session-files"));
    }
    for (dir, origin) in &agent_dirs {
        roots.push((dir.join("sessions"), Layout::PerCwd, *origin));
    }
    for markers in marker_dirs {
        roots.extend(
            custom_session_dirs(&markers)
                .into_iter()
                .map(|dir| (dir, Layout::Flat, "omp_custom")),
        );
    }
    roots
}

/// The directories of the session files omp's `custom-session-files/`
/// markers name (each marker's content is an absolute `.jsonl` path).
fn custom_session_dirs(markers: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(markers) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .map(|text| PathBuf::from(text.trim()))
        .filter(|file| file.is_absolute() && file.extension().is_some_and(|ext| ext == "jsonl"))
        .filter_map(|file| file.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// A root the user names: flat when it holds `*.jsonl` files itself (a
/// custom session directory, which may also hold other directories), else
/// Pi's per-cwd layout, whose sessions are never directly in the root.
pub fn user_root(path: &Path) -> Root {
    let path = absolute(path);
    let flat = std::fs::read_dir(&path).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            entry.file_name().to_string_lossy().ends_with(".jsonl") && entry.path().is_file()
        })
    });
    Root {
        path,
        layout: if flat { Layout::Flat } else { Layout::PerCwd },
        origin: "user",
    }
}

/// An origin as stored in the `roots` table, as the name this build uses
/// (an unknown one reads as `user`).
pub fn origin_name(origin: &str) -> &'static str {
    match origin {
        "env" => "env",
        "settings" => "settings",
        "project_settings" => "project_settings",
        "default" => "default",
        "omp" => "omp",
        "omp_profile" => "omp_profile",
        "omp_xdg" => "omp_xdg",
        "omp_custom" => "omp_custom",
        "port_env" => "port_env",
        _ => "user",
    }
}

/// The roots of a sync with no `--root`: those the index remembers
/// (`store::remembered`: its roots and its sessions' cwds), then every
/// place Pi may have written sessions that exists (cwds: the index's and
/// `current_dir`).
pub fn for_sync(remembered: (Vec<Root>, Vec<PathBuf>), current_dir: Option<PathBuf>) -> Vec<Root> {
    let (mut roots, mut cwds) = remembered;
    cwds.extend(current_dir);
    cwds.sort();
    cwds.dedup();
    for root in defaults(&cwds) {
        if !roots.iter().any(|known| known.path == root.path) {
            roots.push(root);
        }
    }
    roots
}
