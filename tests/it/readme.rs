//! Every `piidx` command README.md shows, run on the database its first
//! command makes from the committed fixtures: the output a `console` block
//! shows must be what the command prints (at the 100 columns README says),
//! and every other command must succeed and find something (exit 0), so
//! that an example that drifted from the fixtures or from piidx fails here.

use std::path::Path;
use std::process::Command;

use crate::util::Env;

const README: &str = include_str!("../../README.md");

/// Subcommands that run until stopped, take the terminal, start another
/// program or need a server: shown, not run.
const NOT_RUN: &[&str] = &[
    "pick",
    "serve",
    "watch",
    "mcp",
    "push",
    "datasette",
    "resume",
    "redact",
];

/// One command of README and the output it shows (console blocks only).
struct Example {
    line: String,
    shown: Option<String>,
}

fn examples() -> Vec<Example> {
    let mut examples = Vec::new();
    let mut block: Option<&str> = None;
    let mut current: Option<Example> = None;
    for line in README.lines() {
        if let Some(kind) = line.strip_prefix("```") {
            match block {
                None => block = Some(kind.trim()),
                Some(_) => {
                    examples.extend(current.take());
                    block = None;
                }
            }
            continue;
        }
        match block {
            Some("console") => {
                if let Some(command) = line.strip_prefix("$ ") {
                    examples.extend(current.take());
                    current = Some(Example {
                        line: command.to_owned(),
                        shown: Some(String::new()),
                    });
                } else if let Some(Example {
                    shown: Some(shown), ..
                }) = &mut current
                {
                    shown.push_str(line);
                    shown.push('\n');
                }
            }
            Some("sh") if line.starts_with("piidx ") => examples.push(Example {
                line: line.to_owned(),
                shown: None,
            }),
            _ => {}
        }
    }
    examples
}

/// The words of a command line without its `# comment`; `None` for a line a
/// test cannot run as written (pipes, variables, redirections).
fn words(line: &str) -> Option<Vec<String>> {
    let code = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    };
    if code.contains(['|', '$', '>', '<', '`']) {
        return None;
    }
    shlex::split(code)
}

/// The roots README's first command syncs (`--root DIR`, relative to the
/// repository).
fn demo_roots() -> Vec<String> {
    let line = README
        .lines()
        .find(|line| line.contains("sync --root"))
        .expect("README's first command syncs the fixtures");
    let words = shlex::split(line.trim_end_matches(['\\', ';', ' '])).expect("shell words");
    words
        .windows(2)
        .filter(|pair| pair[0] == "--root")
        .map(|pair| pair[1].clone())
        .collect()
}

/// The JSON README shows under "`--prices FILE` prices it".
fn shown_prices() -> String {
    let mut lines = README
        .lines()
        .skip_while(|line| !line.contains("`--prices FILE` prices"))
        .skip_while(|line| line.trim() != "```json")
        .skip(1);
    let json: Vec<&str> = lines
        .by_ref()
        .take_while(|line| line.trim() != "```")
        .collect();
    let json = json.join("\n");
    serde_json::from_str::<serde_json::Value>(&json).expect("README's prices are JSON");
    json
}

#[test]
fn every_readme_command_runs_on_the_fixtures_as_shown() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let env = Env::new();
    let mut sync = vec!["sync".to_owned()];
    for root in demo_roots() {
        sync.push("--root".to_owned());
        sync.push(repo.join(root).to_string_lossy().into_owned());
    }
    let sync: Vec<&str> = sync.iter().map(String::as_str).collect();
    let out = env.run(&sync);
    // The damaged fixtures' bad lines make it exit 1, as README says.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The prices file README's usage example reads is the one it shows.
    std::fs::write(env.dir.path().join("prices.json"), shown_prices()).expect("prices.json");

    let mut ran = 0;
    let mut compared = 0;
    for example in examples() {
        let Some(words) = words(&example.line) else {
            continue;
        };
        let Some(command) = words.get(1) else {
            continue;
        };
        // The team store's examples need a server (tests/it/pg.rs runs them).
        let team_store = words.iter().any(|word| word == "--pg");
        if words[0] != "piidx" || NOT_RUN.contains(&command.as_str()) || team_store {
            continue;
        }
        // Files README writes or reads go to the test's directory, which is
        // also the home (`~`); a root it names is there (an empty tree).
        let args: Vec<String> = words[1..]
            .iter()
            .map(
                |word| match word.strip_prefix("/tmp/").or(word.strip_prefix("~/")) {
                    Some(name) => env.dir.path().join(name).to_string_lossy().into_owned(),
                    None => word.clone(),
                },
            )
            .collect();
        for pair in args.windows(2).filter(|pair| pair[0] == "--root") {
            std::fs::create_dir_all(&pair[1]).expect("a root README names");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_piidx"))
            .args(&args)
            .current_dir(env.dir.path())
            .env("PIIDX_DB", &env.db)
            .env("HOME", env.dir.path())
            .env("COLUMNS", "100")
            .env("TZ", "UTC")
            .env("NO_COLOR", "1")
            .env_remove("PAGER")
            .env_remove("PIIDX_PAGER")
            .output()
            .expect("run piidx");
        let stdout = String::from_utf8_lossy(&out.stdout)
            .replace(&*repo.to_string_lossy(), "/path/to/piidx");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "README's `{}` does not succeed on the fixtures: {stderr}",
            example.line
        );
        ran += 1;
        if let Some(shown) = example.shown.filter(|shown| !shown.trim().is_empty()) {
            // What a console block shows is stderr then stdout, as a
            // terminal would interleave them for these commands.
            let printed = format!("{stderr}{stdout}");
            assert_eq!(
                printed.trim_end(),
                shown.trim_end(),
                "README's `{}` prints otherwise",
                example.line
            );
            compared += 1;
        }
    }
    assert!(ran >= 20 && compared >= 5, "{ran} run, {compared} compared");
}
