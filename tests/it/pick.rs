//! Back into Pi: `resume` (the command line, the file rebuilt when gone)
//! and `pick` driven through a real pseudo-terminal (tmux), with `pi`
//! replaced on `PATH` by a script that records its arguments and cwd.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::Env;

/// The fixture session holding the word `tapirnimbus` (in a 2 MB tool
/// result), whose cwd (`/home/user/proj-b`) does not exist here.
const BUILD_LOG_ID: &str = "019c47da-1300-74f8-8e3e-8e2ce99f293c";

/// A fixtures tree, indexed, plus a session of our own whose cwd exists
/// (`<tmp>/proj`), holding the word `zanzibarquux`.
fn indexed() -> (Env, PathBuf) {
    let env = Env::with_fixture("sessions");
    let proj = env.dir.path().join("proj");
    fs::create_dir_all(&proj).expect("mkdir proj");
    let dir = env.root.join(encode(&proj));
    fs::create_dir_all(&dir).expect("mkdir");
    let header = serde_json::json!({"type": "session", "version": 3,
        "id": "01a2b3c4-0000-7000-8000-000000000001",
        "timestamp": "2026-03-02T10:00:00.000Z", "cwd": proj});
    let user = serde_json::json!({"type": "message", "id": "u1", "parentId": null,
        "timestamp": "2026-03-02T10:00:01.000Z",
        "message": {"role": "user", "content": "Plan the zanzibarquux migration.",
                    "timestamp": 1_772_445_601_000_i64}});
    fs::write(
        dir.join("2026-03-02T10-00-00-000Z_01a2b3c4-0000-7000-8000-000000000001.jsonl"),
        format!("{header}\n{user}\n"),
    )
    .expect("write session");
    env.sync();
    (env, proj)
}

/// Pi's directory name for a cwd (`getDefaultSessionDirPath`).
fn encode(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    format!(
        "--{}--",
        text.trim_start_matches('/').replace(['/', '\\', ':'], "-")
    )
}

fn session_path(env: &Env, id: &str) -> PathBuf {
    let rows = env.sql(&format!(
        "SELECT file_path FROM sessions WHERE session_id = '{id}'"
    ));
    PathBuf::from(rows[0]["file_path"].as_str().expect("file_path"))
}

fn quote(text: &str) -> String {
    shlex::try_quote(text).expect("quotable").into_owned()
}

fn json_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .expect("read session")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// `piidx resume ARGS --print` run in `cwd`: (stdout, stderr, exit code).
fn resume_print(env: &Env, cwd: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    let mut all = vec!["resume"];
    all.extend(args);
    all.push("--print");
    let out = env
        .command(&all)
        .current_dir(cwd)
        .env_remove("PI_CODING_AGENT_DIR")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .output()
        .expect("run resume");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn resume_prints_the_command_line_in_the_sessions_cwd() {
    let (env, proj) = indexed();
    let path = session_path(&env, "01a2b3c4-0000-7000-8000-000000000001");
    let (stdout, stderr, code) = resume_print(&env, env.dir.path(), &["01a2b3c4"]);
    assert_eq!(code, Some(0), "{stderr}");
    let expected = format!(
        "cd {} && pi --session {}\n",
        quote(&proj.to_string_lossy()),
        quote(&path.to_string_lossy())
    );
    assert_eq!(stdout, expected);
    assert_eq!(stderr, "", "nothing to say for a file that exists");

    // A query that finds one session resumes it.
    let (stdout, _, code) = resume_print(&env, env.dir.path(), &["zanzibarquux", "migration"]);
    assert_eq!((stdout.as_str(), code), (expected.as_str(), Some(0)));

    // --fork forks into the current directory.
    let here = env.dir.path().join("elsewhere");
    fs::create_dir_all(&here).expect("mkdir");
    let (stdout, _, _) = resume_print(&env, &here, &["01a2b3c4", "--fork"]);
    assert_eq!(
        stdout,
        format!(
            "cd {} && pi --fork {}\n",
            quote(&here.to_string_lossy()),
            quote(&path.to_string_lossy())
        )
    );
}

#[test]
fn resume_of_a_session_whose_cwd_is_gone_starts_here() {
    let (env, _) = indexed();
    let path = session_path(&env, BUILD_LOG_ID);
    let (stdout, stderr, code) = resume_print(&env, env.dir.path(), &[BUILD_LOG_ID]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        format!(
            "cd {} && pi --session {}\n",
            quote(&env.dir.path().to_string_lossy()),
            quote(&path.to_string_lossy())
        )
    );
    assert!(
        stderr.contains("/home/user/proj-b does not exist here"),
        "{stderr}"
    );
}

#[test]
fn resume_rebuilds_a_deleted_file_json_equal_to_the_original() {
    let (env, proj) = indexed();
    let id = "01a2b3c4-0000-7000-8000-000000000001";
    let path = session_path(&env, id);
    let original = json_lines(&path);
    fs::remove_file(&path).expect("delete the session");
    let (stdout, stderr, code) = resume_print(&env, env.dir.path(), &[id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("was gone: rebuilt from the index"),
        "{stderr}"
    );
    assert_eq!(
        stdout,
        format!(
            "cd {} && pi --session {}\n",
            quote(&proj.to_string_lossy()),
            quote(&path.to_string_lossy())
        )
    );
    assert_eq!(json_lines(&path), original);
}

#[test]
fn resume_rebuilds_where_pi_looks_when_the_directory_is_gone_too() {
    // As with an index copied from another machine: neither the file's
    // directory nor the session's cwd exists here.
    let (env, _) = indexed();
    let path = session_path(&env, BUILD_LOG_ID);
    let original = json_lines(&path);
    fs::remove_dir_all(path.parent().expect("dir")).expect("delete the project dir");
    let here = env.dir.path().join("work");
    fs::create_dir_all(&here).expect("mkdir");
    let (stdout, stderr, code) = resume_print(&env, &here, &[BUILD_LOG_ID]);
    assert_eq!(code, Some(0), "{stderr}");
    // Pi's default session directory for the cwd it runs in, under $HOME.
    let rebuilt = env
        .dir
        .path()
        .join(".pi/agent/sessions")
        .join(encode(&here))
        .join(path.file_name().expect("name"));
    assert_eq!(
        stdout,
        format!(
            "cd {} && pi --session {}\n",
            quote(&here.to_string_lossy()),
            quote(&rebuilt.to_string_lossy())
        )
    );
    assert!(stderr.contains("rebuilt from the index"), "{stderr}");
    assert!(stderr.contains("the rebuilt file names"), "{stderr}");
    let mut lines = json_lines(&rebuilt);
    assert_eq!(
        lines[0]["cwd"],
        Value::from(here.to_string_lossy().as_ref())
    );
    lines[0]["cwd"] = original[0]["cwd"].clone();
    assert_eq!(lines, original, "only the header's cwd differs");
}

#[test]
fn resume_without_a_match_or_a_terminal_says_what_to_do() {
    let (env, _) = indexed();
    let (_, stderr, code) = resume_print(&env, env.dir.path(), &["nosuchwordanywhere"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("no session holds those words"), "{stderr}");
    // Several sessions match and there is no terminal to pick from.
    let (_, stderr, code) = resume_print(&env, env.dir.path(), &["README"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("several sessions match"), "{stderr}");
    assert!(stderr.contains("piidx pick"), "{stderr}");
}

/// A tmux server of the test's own, with one window running a shell
/// command; killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn start(env: &Env, shell: &str) -> Tmux {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = env.dir.path().join(format!("tmux-{n}.sock"));
        let tmux = Tmux { socket };
        let status = tmux
            .command()
            .args(["new-session", "-d", "-x", "130", "-y", "32", shell])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command.arg("-S").arg(&self.socket).env_remove("TMUX");
        command
    }

    fn keys(&self, keys: &[&str]) {
        let status = self
            .command()
            .arg("send-keys")
            .args(keys)
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` into the picker's query line one key at a time, each
    /// key's search drawn before the next key is sent (so every key runs
    /// a search of its own on the same connection).
    fn type_slowly(&self, text: &str) {
        let before = self.screen();
        // The capture drops trailing spaces: "> " reads as ">".
        let mut typed = before
            .lines()
            .find(|line| line.starts_with('>'))
            .map_or("> ".to_owned(), |line| format!("{:<2}", line.trim_end()));
        for c in text.chars() {
            self.keys(&["-l", &c.to_string()]);
            typed.push(c);
            self.wait_for(typed.trim_end());
        }
    }

    /// Waits (boundedly) until the screen shows `text`; returns the screen.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {text:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

/// A shell line that records the terminal's settings, runs `piidx pick`
/// with `pi` replaced by a recorder, and says whether the terminal came
/// back as it was, and the exit code.
fn pick_shell(env: &Env, extra_env: &str, args: &str) -> (String, PathBuf) {
    let bin = env.dir.path().join("bin");
    fs::create_dir_all(&bin).expect("mkdir bin");
    let record = env.dir.path().join("pi-record");
    let pi = bin.join("pi");
    fs::write(
        &pi,
        format!(
            "#!/bin/sh\n{{ printf 'cwd=%s\\n' \"$PWD\"; for a in \"$@\"; do printf 'arg=%s\\n' \"$a\"; done; }} > {}\n",
            quote(&record.to_string_lossy())
        ),
    )
    .expect("write pi");
    fs::set_permissions(&pi, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod pi");
    let work = env.dir.path().join("work");
    fs::create_dir_all(&work).expect("mkdir work");
    let shell = format!(
        "cd {work} && stty -g > {dir}/tty-before; env PATH={bin}:\"$PATH\" TZ=UTC HOME={dir} {extra_env} {piidx} --db {db} pick {args} > {dir}/stdout; \
         echo EXIT=$?; stty -g > {dir}/tty-after; cmp -s {dir}/tty-before {dir}/tty-after && echo TTY-RESTORED; sleep 600",
        work = quote(&work.to_string_lossy()),
        dir = quote(&env.dir.path().to_string_lossy()),
        bin = quote(&bin.to_string_lossy()),
        piidx = quote(env!("CARGO_BIN_EXE_piidx")),
        db = quote(&env.db.to_string_lossy()),
    );
    (shell, record)
}

#[test]
fn pick_finds_as_you_type_and_enter_resumes_in_pi() {
    let (env, proj) = indexed();
    let (shell, record) = pick_shell(&env, "", "--all");
    let tmux = Tmux::start(&env, &shell);
    tmux.wait_for("Enter resume");
    // A prefix finds the word as it is typed; the preview shows the text.
    tmux.type_slowly("zanzibarq");
    tmux.wait_for("1 sessions · 1 hits");
    // The preview (made on its own thread) shows the whole message.
    tmux.wait_for("Plan the zanzibarquux migration.");
    // The session's title row comes first; the hit under it.
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=0"), "{screen}");
    let recorded = fs::read_to_string(&record).expect("pi was run");
    let path = session_path(&env, "01a2b3c4-0000-7000-8000-000000000001");
    assert_eq!(
        recorded,
        format!(
            "cwd={}\narg=--session\narg={}\n",
            proj.display(),
            path.display()
        )
    );
}

#[test]
fn pick_of_a_hit_deep_in_a_tool_result_resumes_here_when_its_cwd_is_gone() {
    let (env, _) = indexed();
    let (shell, record) = pick_shell(&env, "", "--all");
    let tmux = Tmux::start(&env, &shell);
    tmux.wait_for("Enter resume");
    tmux.type_slowly("tapirnimbus");
    let screen = tmux.wait_for("0 sessions · 1 hits");
    assert!(screen.contains("tool_result"), "{screen}");
    // The preview opens at the matched line of the 2 MB output.
    tmux.wait_for("[warn] tapirnimbus: deprecated field");
    tmux.keys(&["Enter"]);
    tmux.wait_for("TTY-RESTORED");
    let recorded = fs::read_to_string(&record).expect("pi was run");
    let work = env.dir.path().join("work");
    let path = session_path(&env, BUILD_LOG_ID);
    assert_eq!(
        recorded,
        format!(
            "cwd={}\narg=--session\narg={}\n",
            work.display(),
            path.display()
        )
    );
}

#[test]
fn pick_prints_the_path_and_toggles_here_and_all() {
    let (env, _) = indexed();
    let (shell, _) = pick_shell(&env, "", "");
    let tmux = Tmux::start(&env, &shell);
    // The current directory has no sessions: all of them are listed.
    let screen = tmux.wait_for("all sessions · 12 sessions · 0 hits");
    assert!(screen.contains("Indexer: design & schema"), "{screen}");
    tmux.keys(&["Tab"]);
    tmux.wait_for("here: ");
    tmux.wait_for("0 sessions · 0 hits");
    tmux.keys(&["Tab"]);
    tmux.wait_for("all sessions · 12 sessions");
    tmux.type_slowly("role:user build");
    let screen = tmux.wait_for("role user");
    assert!(
        screen.contains("0 sessions"),
        "role: filters hits only: {screen}"
    );
    tmux.keys(&["C-y"]);
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=0"), "{screen}");
    let printed = fs::read_to_string(env.dir.path().join("stdout")).expect("stdout");
    let paths: Vec<String> = env
        .sql("SELECT file_path FROM sessions")
        .iter()
        .map(|row| row["file_path"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        paths.contains(&printed.trim_end().to_owned()),
        "printed {printed:?}"
    );
}

#[test]
fn pick_restores_the_terminal_on_ctrl_c_a_signal_and_a_panic() {
    let (env, _) = indexed();
    let (shell, _) = pick_shell(&env, "", "--all");
    let tmux = Tmux::start(&env, &shell);
    tmux.wait_for("Enter resume");
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=130"), "{screen}");
    drop(tmux);

    let (shell, _) = pick_shell(&env, "PIIDX_TEST_PANIC=pick", "--all");
    let tmux = Tmux::start(&env, &shell);
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=101"), "{screen}");
    assert!(screen.contains("PIIDX_TEST_PANIC=pick"), "{screen}");
    drop(tmux);

    let (shell, _) = pick_shell(&env, "", "--all");
    let tmux = Tmux::start(&env, &shell);
    tmux.wait_for("Enter resume");
    // The pane's shell runs the picker as its one child.
    let shell_pid = tmux
        .command()
        .args(["display-message", "-p", "#{pane_pid}"])
        .output()
        .expect("tmux display-message");
    let shell_pid = String::from_utf8_lossy(&shell_pid.stdout).trim().to_owned();
    let status = Command::new("pkill")
        .args(["-TERM", "-P", &shell_pid])
        .status()
        .expect("pkill");
    assert!(status.success(), "the picker was not found to signal");
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=130"), "{screen}");
}

/// Ctrl-O shows the transcript and comes back to the picker where it was:
/// the same query and row; the divider meets the preview's line in a
/// junction.
#[test]
fn ctrl_o_shows_the_transcript_and_comes_back_to_the_picker() {
    let (env, _) = indexed();
    let (shell, _) = pick_shell(&env, "", "--all");
    let tmux = Tmux::start(&env, &shell);
    tmux.wait_for("Enter resume");
    tmux.type_slowly("zanzibarq");
    tmux.wait_for("1 sessions · 1 hits");
    tmux.keys(&["Down"]);
    tmux.wait_for("Plan the zanzibarquux migration.");
    let before = tmux.screen();
    assert!(before.contains('┴') && !before.contains('┘'), "{before}");
    tmux.keys(&["C-o"]);
    // The transcript went to stdout (a file here, so no pager), and the
    // picker is back with the query and the hit selected.
    let printed = env.dir.path().join("stdout");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fs::read_to_string(&printed)
        .unwrap_or_default()
        .contains("Plan the zanzibarquux migration.")
    {
        assert!(Instant::now() < deadline, "the transcript was not shown");
        std::thread::sleep(Duration::from_millis(50));
    }
    let screen = tmux.wait_for("1 sessions · 1 hits");
    assert!(screen.contains("> zanzibarq"), "{screen}");
    tmux.wait_for("Plan the zanzibarquux migration.");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("TTY-RESTORED");
    assert!(screen.contains("EXIT=130"), "{screen}");
}
