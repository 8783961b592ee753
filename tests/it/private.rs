//! The index is its user's alone: every file and directory any command
//! creates is owner-only whatever the umask, and an index left readable by
//! others is reported with the fix.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use crate::util::{Env, write_user_session};

/// `piidx --db <db> ARGS` started under `umask`.
fn run_with_umask(env: &Env, db: &Path, umask: u32, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_piidx"));
    command
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("PIIDX_DB")
        .env("TZ", "UTC")
        .env("HOME", env.dir.path());
    // SAFETY: umask(2) is async-signal-safe and cannot fail.
    unsafe {
        command.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    command.output().expect("run piidx")
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

#[test]
fn every_file_and_directory_piidx_creates_is_owner_only_under_any_umask() {
    for umask in [0o022, 0o000] {
        let env = Env::with_fixture("pi152");
        let data = env.dir.path().join("data");
        let db = data.join("piidx/index.db");
        let root = env.root.to_string_lossy().into_owned();
        let export = data.join("exported.jsonl").to_string_lossy().into_owned();
        let commands: &[&[&str]] = &[
            &["sync", "--root", &root],
            &["search", "listAll"],
            &["sessions"],
            &["show", "01a1b016"],
            &["tree", "01a1b016"],
            &["export", "01a1b016", "-o", &export],
            &["usage"],
            &["tools"],
            &["subagents"],
            &["sql", "SELECT count(*) FROM entries"],
            &["roots"],
            &["secrets"],
            &["redact", "--root", &root],
            &["sync", "--root", &root, "--full"],
            &["doctor", "--fix"],
        ];
        for args in commands {
            let out = run_with_umask(&env, &db, umask, args);
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "{args:?} under umask {umask:03o}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut seen = 0;
        for entry in walkdir::WalkDir::new(&data) {
            let entry = entry.expect("walk");
            let (path, want) = if entry.file_type().is_dir() {
                (entry.path(), 0o700)
            } else {
                (entry.path(), 0o600)
            };
            assert_eq!(
                mode(path),
                want,
                "{} under umask {umask:03o}",
                path.display()
            );
            seen += 1;
        }
        // The directories, the database, its shards, the lock and the export.
        assert!(seen >= 7, "only {seen} paths under {}", data.display());
    }
}

#[test]
fn an_index_others_can_read_is_reported_and_doctor_fix_makes_it_private() {
    let env = Env::with_fixture("pi152");
    env.sync();
    let shard = env.dir.path().join("index.db.fts0");
    for path in [&env.db, &shard] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod");
    }

    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["sync", "--root", &root]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("can be read or written by other users (mode 0644)")
            && stderr.contains("chmod go-rwx"),
        "{stderr}"
    );

    let out = env.run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("other users"), "{stdout}");

    // Found and fixed: exit 1, as for every repair.
    let out = env.run(&["doctor", "--fix"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("fixed: made"), "{stdout}");
    assert_eq!(mode(&env.db), 0o600);
    assert_eq!(mode(&shard), 0o600);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
    assert_eq!(env.run(&["sync", "--root", &root]).status.code(), Some(0));
}

/// A session whose text carries terminal escapes: OSC 52 (writes the
/// clipboard), OSC 0 (window title), CSI 2J (clears the screen), BEL.
fn hostile_session(env: &Env) {
    let dir = env.root.join("--home-user-evil--");
    fs::create_dir_all(&dir).expect("mkdir");
    let esc = "\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let lines = [
        serde_json::json!({"type": "session", "version": 3, "id": "0e5c0000-0000-4000-8000-000000000001",
            "timestamp": "2026-11-01T10:00:00.000Z", "cwd": format!("/home/user/evil{esc}")}),
        serde_json::json!({"type": "session_info", "id": "a0000001", "parentId": null,
            "timestamp": "2026-11-01T10:00:00.500Z", "name": format!("named {esc} zapword")}),
        serde_json::json!({"type": "message", "id": "a0000002", "parentId": "a0000001",
            "timestamp": "2026-11-01T10:00:01.000Z",
            "message": {"role": "user", "content": format!("zapword please {esc} run it"), "timestamp": 1}}),
        serde_json::json!({"type": "message", "id": "a0000003", "parentId": "a0000002",
            "timestamp": "2026-11-01T10:00:02.000Z",
            "message": {"role": "assistant", "content": [
                {"type": "text", "text": format!("sure {esc}")},
                {"type": "toolCall", "id": "call1", "name": format!("bash{esc}"), "arguments": {"command": format!("echo {esc}")}}],
                "api": "anthropic-messages", "provider": "anthropic", "model": format!("m{esc}"),
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": "toolUse", "timestamp": 2}}),
        serde_json::json!({"type": "message", "id": "a0000004", "parentId": "a0000003",
            "timestamp": "2026-11-01T10:00:03.000Z",
            "message": {"role": "toolResult", "toolCallId": "call1", "toolName": format!("bash{esc}"),
                "content": [{"type": "text", "text": format!("zapword output {esc}")}], "isError": false, "timestamp": 3}}),
        serde_json::json!({"type": "label", "id": "a0000005", "parentId": "a0000004",
            "timestamp": "2026-11-01T10:00:04.000Z", "targetId": "a0000002", "label": format!("lbl{esc}")}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    fs::write(
        dir.join("2026-11-01T10-00-00-000Z_0e5c0000-0000-4000-8000-000000000001.jsonl"),
        text,
    )
    .expect("write session");
}

/// No ESC or BEL from session text reaches the output of any command meant
/// for people; JSON keeps the text exactly.
#[test]
fn terminal_escapes_in_session_text_never_reach_the_output_raw() {
    let env = Env::new();
    hostile_session(&env);
    env.sync();
    let commands: &[&[&str]] = &[
        &["sessions"],
        &["sessions", "--all"],
        &["search", "zapword"],
        &["search", "zapword", "-l"],
        &["show", "0e5c0000"],
        &["show", "0e5c0000", "--all"],
        &["show", "0e5c0000", "--markdown"],
        &["tree", "0e5c0000"],
        &["usage", "--by", "model"],
        &["usage", "--by", "project"],
        &["usage", "--by", "session"],
        &["tools"],
        &["subagents"],
        &["roots"],
        &["doctor"],
        &["sql", "SELECT name, cwd FROM sessions"],
    ];
    for args in commands {
        let out = env.run(args);
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.iter().any(|b| *b == 0x1b || *b == 0x07),
                "{args:?} wrote a raw escape to {stream}: {}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}");
    }
    let shown = env.run(&["show", "0e5c0000"]);
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("^[]52;c;ZXZpbA==^G"),
        "escapes are shown, not dropped"
    );
    // CSV and JSON are data for programs (here a pipe): the text is exact.
    for args in [
        &["sessions", "--csv"][..],
        &["sql", "SELECT name FROM sessions", "--csv"],
    ] {
        let out = env.run(args);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\u{1b}]0;pwned\u{7}"),
            "{args:?}"
        );
    }
    // The same CSV on a real pseudo-terminal (script(1)) shows them instead.
    let out = Command::new("script")
        .args([
            "-qec",
            &format!(
                "{} --db {} --color never sessions --csv",
                env!("CARGO_BIN_EXE_piidx"),
                env.db.display()
            ),
            "/dev/null",
        ])
        .env_remove("PIIDX_DB")
        .output()
        .expect("run script(1)");
    let on_terminal = String::from_utf8_lossy(&out.stdout);
    assert!(
        on_terminal.contains("named ^[]52;c;ZXZpbA==^G") && !on_terminal.contains('\u{7}'),
        "{on_terminal}"
    );
    let out = env.run(&["search", "zapword", "--json"]);
    let hits: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        hits.iter().any(|hit| hit["session_name"]
            .as_str()
            .is_some_and(|name| name.contains("\u{1b}]0;pwned\u{7}"))),
        "--json keeps the exact text: {hits:?}"
    );
}

/// The files of the index in the test directory (database, WAL, shards,
/// journals, lock) holding `needle`.
fn index_files_holding(env: &Env, needle: &[u8]) -> Vec<String> {
    let mut holding = Vec::new();
    for entry in fs::read_dir(env.dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if !name.starts_with("index.db") || !path.is_file() {
            continue;
        }
        let bytes = fs::read(&path).expect("read");
        if bytes.windows(needle.len()).any(|window| window == needle) {
            holding.push(name.into_owned());
        }
    }
    holding.sort();
    holding
}

/// A session deleted from disk leaves no byte of its text in any file of
/// the index: not in the main file's free pages or WAL, not in the word
/// index's segments; `doctor --absent` says so.
#[test]
fn a_deleted_session_leaves_no_trace_in_any_file() {
    let env = Env::new();
    let dir = env.root.join("--proj--");
    let secret = "ghp_Zq7XmPLUTONIUMwv93kdQ8 is the token";
    write_user_session(
        &dir,
        "0e5c0000-0000-4000-8000-00000000aaaa",
        serde_json::json!(secret),
    );
    write_user_session(
        &dir,
        "0e5c0000-0000-4000-8000-00000000bbbb",
        serde_json::json!("keepword stays"),
    );
    env.sync();
    // The stored text, and the word as the word index keeps it.
    let (text, word) = (&b"PLUTONIUMwv93kdQ8"[..], &b"plutoniumwv93kdq8"[..]);
    assert_eq!(index_files_holding(&env, text), vec!["index.db"]);
    assert!(!index_files_holding(&env, word).is_empty());
    let out = env.run(&["doctor", "--absent", "PLUTONIUMwv93kdQ8"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("PLUT… is still in"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A purge's copy left by a sync killed on its way is removed.
    let shards = crate::util::shard_paths(&env.db);
    let stale = format!("{}.purged", shards[0].display());
    fs::write(&stale, "not a shard").expect("write");
    fs::remove_file(dir.join("0e5c0000-0000-4000-8000-00000000aaaa.jsonl")).expect("rm");
    env.sync();
    assert!(!std::path::Path::new(&stale).exists(), "{stale} left");
    // Each shard is the purged copy, which says so.
    for shard in &shards {
        let pending: i64 = rusqlite::Connection::open(shard)
            .and_then(|conn| conn.query_row("SELECT purge_pending FROM shard", [], |r| r.get(0)))
            .expect("read the shard");
        assert_eq!(pending, 0, "{}", shard.display());
    }
    assert_eq!(index_files_holding(&env, text), Vec::<String>::new());
    assert_eq!(index_files_holding(&env, word), Vec::<String>::new());
    let out = env.run(&["doctor", "--absent", "PLUTONIUMwv93kdQ8"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The rest is still there and searchable.
    let out = env.run(&["search", "keepword"]);
    assert!(out.status.success());
    assert_eq!(
        env.run(&["search", "plutoniumwv93kdq8"]).status.code(),
        Some(1)
    );
}

/// `piidx secrets` lists every planted credential with its session, entry
/// and kind, masked: the full secret is in none of its outputs.
#[test]
fn secrets_are_listed_masked_with_where_they_are() {
    let env = Env::new();
    let dir = env.root.join("--proj--");
    let mixed = "aZ3kQ9xW2mP7vB4nL8cR5tY1hJ6gD0fS";
    let token = format!("ghp_{}{}", mixed, &mixed[..4]);
    let pem = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{mixed}{mixed}{mixed}\n-----END OPENSSH PRIVATE KEY-----"
    );
    let aws = "AKIAQ2WXE3RT4YU5IOPA";
    write_user_session(
        &dir,
        "5ec00000-0000-4000-8000-000000000001",
        serde_json::json!(format!("use my token {token} please")),
    );
    write_user_session(
        &dir,
        "5ec00000-0000-4000-8000-000000000002",
        serde_json::json!([{"type": "text", "text": format!("$ cat key\n{pem}\nAWS_ACCESS_KEY_ID={aws}\n")}]),
    );
    write_user_session(
        &dir,
        "5ec00000-0000-4000-8000-000000000003",
        serde_json::json!("the api_key = \"your-api-key-here\" placeholder is fine"),
    );
    env.sync();
    let out = env.run(&["secrets", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let found: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let kinds: Vec<(String, String)> = found
        .iter()
        .map(|f| {
            (
                f["session_id"].as_str().unwrap_or_default()[33..].to_owned(),
                f["kind"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("001", "github-pat"),
            ("002", "private-key"),
            ("002", "aws-access-token")
        ]
        .map(|(s, k)| (s.to_owned(), k.to_owned()))
    );
    assert_eq!(found[0]["preview"], "ghp_…(40 chars)");
    assert_eq!(found[0]["entry_id"], "a1");
    for args in [
        &["secrets"][..],
        &["secrets", "--json"],
        &["secrets", "--csv"],
    ] {
        let out = String::from_utf8_lossy(&env.run(args).stdout).into_owned();
        for secret in [&token[..], mixed, aws] {
            assert!(!out.contains(secret), "{args:?} shows a secret: {out}");
        }
    }
    // Scoped to the clean session: nothing, exit 1 as for search.
    let out = env.run(&[
        "secrets",
        "--session",
        "5ec00000-0000-4000-8000-000000000003",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

/// `secrets` reads the texts in batches of a few MiB and scans each batch
/// while it reads the next: a secret at the end of each text, two texts to
/// a batch and one in the last, is found, in order, and nothing twice.
#[test]
fn secrets_are_found_in_every_batch_of_a_large_index() {
    let env = Env::new();
    let dir = env.root.join("--proj--");
    let filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit\n".repeat(45_000);
    let tokens: Vec<String> = (0..5)
        .map(|n| format!("ghp_{n}Z3kQ9xW2mP7vB4nL8cR5tY1hJ6gD0fSaZ3k"))
        .collect();
    for (n, token) in tokens.iter().enumerate() {
        write_user_session(
            &dir,
            &format!("5ec00000-0000-4000-8000-00000000010{n}"),
            serde_json::json!(format!("{filler}use my token {token} please")),
        );
    }
    env.sync();
    let found: Vec<serde_json::Value> =
        serde_json::from_slice(&env.run(&["secrets", "--json"]).stdout).expect("json");
    let sessions: Vec<&str> = found
        .iter()
        .map(|f| f["session_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        sessions,
        (0..5)
            .map(|n| format!("5ec00000-0000-4000-8000-00000000010{n}"))
            .collect::<Vec<_>>()
    );
    assert!(found.iter().all(|f| f["kind"] == "github-pat"));
}

/// `piidx redact` on an index that holds secrets: afterwards no file of the
/// index holds one (text or indexed word), search cannot find them,
/// `secrets` lists them as redacted and `--find` names where a value was,
/// export says the file is not the original, doctor is content, and later
/// syncs redact what is appended (the index remembers).
#[test]
fn redaction_takes_every_secret_out_of_every_file_and_stays_on() {
    let env = Env::new();
    let dir = env.root.join("--proj--");
    let mixed = "aZ3kQ9xW2mP7vB4nL8cR5tY1hJ6gD0fS";
    let token = format!("ghp_{mixed}{}", &mixed[..4]);
    let id = "5ec00000-0000-4000-8000-00000000000a";
    write_user_session(
        &dir,
        id,
        serde_json::json!(format!("use my token {token} please")),
    );
    // A pi-subagents output artifact: stored and searchable text too.
    let artifacts = dir.join("subagent-artifacts");
    fs::create_dir_all(&artifacts).expect("mkdir");
    let stripe = format!("sk_live_{}", &mixed[..24]);
    fs::write(
        artifacts.join("a1b2c3d4_worker_output.md"),
        format!("Done. The key was {stripe} .\n"),
    )
    .expect("write artifact");
    env.sync();
    let (text, word) = (mixed.as_bytes(), mixed.to_lowercase().into_bytes());
    assert!(!index_files_holding(&env, text).is_empty());

    let root = env.root.to_string_lossy().into_owned();
    let out = env.run(&["redact", "--root", &root]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(index_files_holding(&env, text), Vec::<String>::new());
    assert_eq!(index_files_holding(&env, &word), Vec::<String>::new());
    assert_eq!(
        index_files_holding(&env, stripe.as_bytes()),
        Vec::<String>::new()
    );
    assert_eq!(env.run(&["search", mixed]).status.code(), Some(1));
    assert_eq!(env.run(&["search", "REDACTED"]).status.code(), Some(0));

    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&env.run(&["secrets", "--json"]).stdout).expect("json");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["kind"], "github-pat");
    assert_eq!(listed[0]["redacted"], true);
    let found: Vec<serde_json::Value> =
        serde_json::from_slice(&env.run(&["secrets", "--find", &token, "--json"]).stdout)
            .expect("json");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["session_id"], id);
    let other = env.run(&["secrets", "--find", "ghp_not-that-one", "--json"]);
    assert_eq!(other.status.code(), Some(1));

    let export = env.run(&["export", id]);
    assert!(
        String::from_utf8_lossy(&export.stdout)
            .contains("use my token [REDACTED:github-pat] please")
    );
    assert!(String::from_utf8_lossy(&export.stderr).contains("not the original"));
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));

    // Appended later, synced without the flag: redacted too.
    let file = dir.join(format!("{id}.jsonl"));
    let line = serde_json::json!({"type": "message", "id": "a2", "parentId": "a1",
        "timestamp": "2026-01-01T00:00:02.000Z",
        "message": {"role": "user", "content": "and AKIAQ2WXE3RT4YU5IOPA too"}});
    let mut content = fs::read_to_string(&file).expect("read");
    content.push_str(&format!("{line}\n"));
    fs::write(&file, content).expect("append");
    env.sync();
    assert_eq!(
        index_files_holding(&env, b"Q2WXE3RT4YU5IOPA"),
        Vec::<String>::new()
    );
    let listed: Vec<serde_json::Value> =
        serde_json::from_slice(&env.run(&["secrets", "--json"]).stdout).expect("json");
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[1]["kind"], "aws-access-token");
    // A fresh index of the same tree, with --redact from the start, is the same.
    let fresh = Env::new();
    crate::util::copy_tree(&env.root, &fresh.root);
    let fresh_root = fresh.root.to_string_lossy().into_owned();
    assert!(
        fresh
            .run(&["sync", "--redact", "--root", &fresh_root])
            .status
            .success()
    );
    let fresh_listed: Vec<serde_json::Value> =
        serde_json::from_slice(&fresh.run(&["secrets", "--json"]).stdout).expect("json");
    let places = |list: &[serde_json::Value]| -> Vec<(String, String)> {
        list.iter()
            .map(|s| (s["entry_id"].to_string(), s["kind"].to_string()))
            .collect()
    };
    assert_eq!(places(&listed), places(&fresh_listed));
}
