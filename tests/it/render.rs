//! What each command prints: snapshots (insta, `tests/it/snapshots/`) of
//! tables at 60 and 120 columns, JSON, CSV and Markdown, on the fixture
//! trees (with a Japanese session, so CJK rows must line up); `show
//! --markdown` parsed as CommonMark; and the layer boundary (`query/`
//! never imports `render`).
//!
//! A changed snapshot fails the test; review it with `cargo insta review`
//! (or rerun with `INSTA_UPDATE=always` and read the diff in git).

use std::path::Path;
use std::sync::OnceLock;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr;

use crate::util::{Env, copy_tree, fixtures};

/// The sessions, pi152 and subagents trees in one root, synced.
fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let env = Env::new();
        for tree in ["sessions", "pi152", "subagents"] {
            copy_tree(&fixtures().join(tree), &env.root);
        }
        // One shard: bm25's statistics are each shard's, and which shard a
        // chunk goes to depends on the order parallel readers finish in.
        // One reader: rows are numbered in the order files are written, the
        // order readers finish in, and `--sort recent` orders hits of one
        // time by their numbers; one reader writes in the sync's own order.
        let root = env.root.to_string_lossy().into_owned();
        let out = env
            .command(&["sync", "--root", &root, "--fts-shards", "1", "-q"])
            .env("RAYON_NUM_THREADS", "1")
            .output()
            .expect("run piidx");
        assert!(out.status.code().is_some_and(|code| code <= 1), "sync");
        env
    })
}

/// Scores are floats from bm25: their last digits are not the point.
fn without_scores(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("\"score\": ") {
            Some(at) => format!("{}\"score\": [score],", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `piidx ARGS` at `columns` wide (0: not a terminal), stdout with the
/// temporary paths replaced by `[ROOT]`; the exit code must be 0. Tables
/// must fit the width; transcripts, trees' paths and search hits hold
/// text that may not be cut (commands, paths) and wrap in the terminal.
fn output(columns: usize, args: &[&str]) -> String {
    let env = env();
    let mut command = env.command(args);
    if columns > 0 {
        command.env("COLUMNS", columns.to_string());
    }
    let out = command.output().expect("run piidx");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 output");
    let text = text.replace(&*env.root.to_string_lossy(), "[ROOT]");
    let table = !matches!(args[0], "show" | "search") || args.contains(&"-l");
    if columns > 0 && table {
        // A tree's second line is its file's path, whole.
        for line in text
            .lines()
            .enumerate()
            .filter(|(n, _)| args[0] != "tree" || *n != 1)
            .map(|(_, l)| l)
        {
            assert!(
                line.width() <= columns,
                "{args:?} at {columns} columns: {line:?} is {} wide",
                line.width()
            );
        }
    }
    text
}

/// Snapshots of `args` at 60 and 120 columns.
fn tables(name: &str, args: &[&str]) {
    for columns in [60, 120] {
        insta::assert_snapshot!(format!("{name}@{columns}"), output(columns, args));
    }
}

const PROJ_B: &str = "019c3fae";
const JAPANESE: &str = "019ca7fb";
const SUBAGENT_RUNS: &str = "01a1b016";

#[test]
fn sessions_output() {
    tables("sessions", &["sessions"]);
    insta::assert_snapshot!(
        "sessions.json",
        output(0, &["sessions", "--json", "--limit", "3"])
    );
    insta::assert_snapshot!("sessions.csv", output(0, &["sessions", "--csv"]));
}

#[test]
fn search_output() {
    // Newest first: ties in rank would be broken by chunk ids, which
    // depend on the order files were read in.
    tables(
        "search",
        &["search", "build", "-n", "3", "--sort", "recent"],
    );
    tables("search-cjk", &["search", "日本語"]);
    tables(
        "search-sessions",
        &["search", "build", "-l", "--sort", "recent"],
    );
    insta::assert_snapshot!(
        "search.json",
        without_scores(&output(
            0,
            &["search", "build", "-n", "2", "--sort", "recent", "--json"]
        ))
    );
}

#[test]
fn usage_and_tools_output() {
    tables("usage-month", &["usage", "--by", "month"]);
    tables("usage-project", &["usage", "--by", "project"]);
    insta::assert_snapshot!(
        "usage.json",
        output(0, &["usage", "--by", "model", "--json"])
    );
    insta::assert_snapshot!("usage.csv", output(0, &["usage", "--by", "day", "--csv"]));
    tables("tools", &["tools"]);
    insta::assert_snapshot!(
        "tools.json",
        output(0, &["tools", "--json", "--limit", "2"])
    );
    tables("subagents", &["subagents", "--limit", "6"]);
    insta::assert_snapshot!("subagents.csv", output(0, &["subagents", "--csv"]));
    insta::assert_snapshot!(
        "subagents.json",
        output(0, &["subagents", "--json", "--limit", "3"])
    );
}

#[test]
fn tree_and_show_output() {
    tables("tree", &["tree", SUBAGENT_RUNS]);
    tables("tree-cjk", &["tree", JAPANESE]);
    insta::assert_snapshot!("tree.json", output(0, &["tree", PROJ_B, "--json"]));
    tables("show", &["show", PROJ_B, "--all", "--tool-lines", "2"]);
    insta::assert_snapshot!("show-cjk", output(0, &["show", JAPANESE]));
    insta::assert_snapshot!("show.json", output(0, &["show", JAPANESE, "--json"]));
    insta::assert_snapshot!(
        "show.md",
        output(0, &["show", PROJ_B, "--all", "--markdown"])
    );
    insta::assert_snapshot!(
        "show-no-tools",
        output(0, &["show", SUBAGENT_RUNS, "--no-tools"])
    );
}

/// The JSON contract (docs/json.md): every field each command prints is
/// named in that command's section, so a new field cannot ship
/// undocumented (the snapshots above catch renamed and removed ones).
#[test]
fn every_json_field_is_documented() {
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md"))
        .expect("read docs/json.md");
    let commands: [(&str, &[&str]); 7] = [
        ("sessions --json", &["sessions", "--json"]),
        ("search --json", &["search", "build", "--json"]),
        ("usage --json", &["usage", "--json"]),
        ("tools --json", &["tools", "--json"]),
        ("subagents --json", &["subagents", "--json"]),
        ("tree --json", &["tree", PROJ_B, "--json"]),
        ("roots --json", &["roots", "--json"]),
    ];
    for (section, args) in commands {
        let heading = format!("## `{section}`");
        let start = docs
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/json.md has no section {heading}"));
        let body = &docs[start + heading.len()..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        let value: serde_json::Value = serde_json::from_str(&output(0, args)).expect("JSON output");
        let mut keys = std::collections::BTreeSet::new();
        collect_keys(&value, &mut keys);
        let missing: Vec<&String> = keys
            .iter()
            .filter(|key| !body.contains(&format!("`{key}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "`{section}` prints fields docs/json.md does not name: {missing:?}"
        );
    }
}

/// The keys of the objects of an answer: an array's objects, an object's
/// own keys and those of objects (or arrays of objects) inside it.
fn collect_keys(value: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
    match value {
        serde_json::Value::Array(items) => {
            for item in items {
                collect_keys(item, keys);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                keys.insert(key.clone());
                collect_keys(inner, keys);
            }
        }
        _ => {}
    }
}

#[test]
fn sql_output() {
    let query =
        "SELECT session_id, name, message_count, cwd FROM sessions ORDER BY session_id LIMIT 6";
    tables("sql", &["sql", query]);
    insta::assert_snapshot!("sql.json", output(0, &["sql", query, "--json"]));
    insta::assert_snapshot!("sql.csv", output(0, &["sql", query, "--csv"]));
}

/// Every session's `show --markdown` is CommonMark whose quotes hold only
/// thinking: a reply after a thinking block is not pulled into the quote,
/// and tool output stays in its fence.
#[test]
fn markdown_is_commonmark() {
    let ids = output(0, &["sql", "SELECT session_id FROM sessions", "--csv"]);
    let mut checked = 0;
    for id in ids.lines().skip(1) {
        let text = output(0, &["show", id, "--all", "--markdown"]);
        let mut quote_depth = 0;
        let mut in_quote_text = String::new();
        for event in Parser::new(&text) {
            match event {
                Event::Start(Tag::BlockQuote(_)) => {
                    quote_depth += 1;
                    in_quote_text.clear();
                }
                Event::End(TagEnd::BlockQuote(_)) => {
                    quote_depth -= 1;
                    assert!(
                        in_quote_text.starts_with("thinking:"),
                        "{id}: a quote holds {in_quote_text:?}"
                    );
                }
                Event::Text(t) | Event::Code(t) if quote_depth > 0 => in_quote_text.push_str(&t),
                _ => {}
            }
        }
        assert_eq!(quote_depth, 0, "{id}");
        checked += 1;
    }
    assert!(checked > 20, "{checked} sessions");
    // The reply after the thinking is a paragraph of its own.
    let text = output(0, &["show", PROJ_B, "--all", "--markdown"]);
    let mut depth = 0;
    let mut reply_outside = false;
    for event in Parser::new(&text) {
        match event {
            Event::Start(Tag::BlockQuote(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_)) => depth -= 1,
            Event::Code(code) if &*code == "cargo build --release" => reply_outside = depth == 0,
            _ => {}
        }
    }
    assert!(reply_outside, "{text}");
}

/// Invariant 1 (ARCHITECTURE.md): only `store/` and `query/` speak SQL. No
/// other module opens a connection, reaches for one, or prepares, runs or
/// steps a statement; they call `Index`/`Writer` methods and `query`.
#[test]
fn only_store_and_query_speak_sql() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let speaking = [
        "Connection::open",
        ".connection()",
        ".prepare(",
        ".prepare_cached(",
        ".query_row(",
        ".query_map(",
        ".execute(",
        ".execute_batch(",
    ];
    let mut files = 0;
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.expect("walk src");
        let path = entry.path();
        let inside = ["store", "query"]
            .iter()
            .any(|layer| path.starts_with(src.join(layer)));
        if inside || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(path).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(call) = speaking.iter().find(|call| code.contains(*call)) {
                panic!(
                    "{}:{}: only store/ and query/ speak SQL ({call}): {line}",
                    path.display(),
                    n + 1
                );
            }
        }
    }
    assert!(files > 20);
}

/// `query/` returns typed answers; only `render/` and the binary print.
#[test]
fn query_never_imports_render() {
    let query = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/query");
    let mut files = 0;
    for entry in walkdir::WalkDir::new(&query) {
        let entry = entry.expect("walk src/query");
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(entry.path()).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains("render::")
                    && !code.contains("render::{")
                    && !code.contains("crate::render"),
                "{}:{}: query/ must not use the render layer: {line}",
                entry.path().display(),
                n + 1
            );
        }
    }
    assert!(files > 5);
}

/// `--color always|never` decide; `NO_COLOR` only turns `auto` off.
#[test]
fn colour_follows_the_flag() {
    let env = env();
    let run = |args: &[&str], no_color: bool| {
        let mut command = env.command(args);
        if no_color {
            command.env("NO_COLOR", "1");
        }
        let out = command.output().expect("run piidx");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = |text: &str| text.contains("\u{1b}[");
    assert!(coloured(&run(
        &["--color", "always", "show", PROJ_B],
        false
    )));
    assert!(coloured(&run(&["--color", "always", "sessions"], true)));
    assert!(!coloured(&run(
        &["--color", "never", "tree", PROJ_B],
        false
    )));
    // Not a terminal: no colour, and matches marked for a program.
    let piped = run(&["search", "build", "-n", "1"], false);
    assert!(!coloured(&piped) && piped.contains('«'), "{piped}");
    let painted = run(&["--color", "always", "search", "build", "-n", "1"], false);
    assert!(coloured(&painted) && !painted.contains('«'), "{painted}");
}

/// On a real pseudo-terminal (`script`), `show` goes through the pager,
/// tables take the terminal's width, and colour is on.
#[test]
fn a_terminal_gets_the_pager_its_width_and_colour() {
    let env = env();
    let paged = env.dir.path().join("paged.txt");
    let piidx = env!("CARGO_BIN_EXE_piidx");
    let db = env.db.to_string_lossy();
    let script = |inner: &str, pager: &str| {
        let out = std::process::Command::new("script")
            .args(["-qec", inner, "/dev/null"])
            .env("PIIDX_PAGER", pager)
            .env_remove("COLUMNS")
            .env_remove("NO_COLOR")
            .env("TERM", "xterm")
            .output()
            .expect("run script(1)");
        assert!(out.status.success(), "{inner}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = script(
        &format!("{piidx} --db {db} show {PROJ_B} --no-pager"),
        "false",
    );
    script(
        &format!("{piidx} --db {db} show {PROJ_B}"),
        &format!("tee {}", paged.display()),
    );
    let through_pager = std::fs::read_to_string(&paged).expect("the pager got the transcript");
    assert!(through_pager.contains("Run `cargo test`."));
    assert!(through_pager.contains("\u{1b}["), "colour on a terminal");
    assert!(shown.contains("Run `cargo test`."));
    // Tool calls in colour: piidx's own escape codes are sent, not shown
    // as `^[` the way a session's control characters are.
    let calls = script(
        &format!("{piidx} --db {db} show 019c47da --no-pager"),
        "false",
    );
    let call = calls
        .lines()
        .find(|line| line.contains("→ "))
        .unwrap_or_else(|| panic!("a tool call line: {calls}"));
    assert!(call.contains("\u{1b}["), "{call:?}");
    assert!(!calls.contains("^["), "{calls}");
    let table = script(
        &format!("stty rows 24 cols 60; {piidx} --db {db} sessions"),
        "cat",
    );
    let widest = table
        .lines()
        .map(|line| strip_ansi(line).trim_end_matches('\r').width())
        .max()
        .unwrap_or(0);
    assert!((40..=60).contains(&widest), "{widest}: {table}");
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn man_page_and_completions_come_from_the_definitions() {
    let man = output(0, &["man"]);
    assert!(man.contains(".TH piidx 1"));
    assert!(man.contains("PIIDX SEARCH") && man.contains("\\-\\-tool\\-lines"));
    for (shell, mark) in [
        ("bash", "_piidx()"),
        ("zsh", "#compdef piidx"),
        ("fish", "complete -c piidx"),
    ] {
        let script = output(0, &["completions", shell]);
        assert!(script.contains(mark), "{shell}");
        assert!(script.contains("subagents"), "{shell}");
    }
}

/// Piped (no width), a table cuts nothing and pads no column past a line
/// of prose: a session whose first message is long has it whole on its own
/// line, and the other sessions' lines are not padded to it.
#[test]
fn a_long_cell_piped_is_whole_and_pads_no_other_row() {
    let env = Env::new();
    let long: String = (0..120).map(|n| format!("word{n} ")).collect();
    let long = long.trim_end();
    crate::util::write_user_session(&env.root.join("--proj--"), "long", long.into());
    crate::util::write_user_session(&env.root.join("--proj--"), "short", "short one".into());
    env.sync();
    let out = env.run(&["sessions", "--all"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let row = |word: &str| {
        text.lines()
            .find(|line| line.contains(word))
            .unwrap_or_else(|| panic!("a row with {word}: {text}"))
    };
    assert!(row("word119").contains(long), "{text}");
    assert!(row("short one").width() < 200, "{}", row("short one"));
    assert!(
        text.lines()
            .all(|line| !line.contains("─") || line.width() < 200),
        "{text}"
    );
}
