//! `piidx push` and `--pg` against a real PostgreSQL server: a throw-away
//! cluster (initdb + pg_ctl) in a temporary directory, on a Unix socket
//! there, shared by these tests and stopped when the test process exits.
//! Every test makes its own databases in it.
//!
//! The expected values are the SQLite index's own answers (the CLI without
//! `--pg`), and a fresh push of the same index into an empty database.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::util::{Env, fixtures};

/// The tables a push fills.
const TABLES: &[&str] = &[
    "files",
    "sessions",
    "entries",
    "message_meta",
    "texts",
    "tool_call_meta",
    "usage_records",
    "subagent_runs",
];

struct Cluster {
    /// Holds the data directory and the socket.
    dir: PathBuf,
    pg_ctl: PathBuf,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

/// Where Debian's package (or a local build) keeps initdb and pg_ctl.
fn pg_bin(name: &str) -> PathBuf {
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| {
            dirs.filter_map(|dir| dir.ok())
                .map(|dir| dir.path().join("bin").join(name))
                .filter(|path| path.exists())
                .collect()
        })
        .unwrap_or_default();
    candidates.sort();
    if let Some(found) = candidates.pop() {
        return found;
    }
    for dir in ["/usr/local/bin", "/usr/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    panic!("{name} not found: install Debian's postgresql package (.ci/run does)");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as the cluster's owner: initdb refuses root, so as root
/// it runs as the `postgres` user.
fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn check(output: Output, what: &str) -> Output {
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

extern "C" fn stop_cluster() {
    if let Some(cluster) = CLUSTER.get() {
        let _ = as_owner(&cluster.pg_ctl)
            .arg("-D")
            .arg(cluster.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&cluster.dir);
    }
}

fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("piidx-pg-")
            .tempdir()
            .expect("tempdir")
            .keep();
        let data = dir.join("data");
        std::fs::create_dir_all(&data).expect("data dir");
        if is_root() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            check(
                Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(&dir)
                    .output()
                    .expect("chown"),
                "chown",
            );
        }
        check(
            as_owner(&pg_bin("initdb"))
                .arg("-D")
                .arg(&data)
                .args([
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                ])
                .output()
                .expect("run initdb"),
            "initdb",
        );
        let pg_ctl = pg_bin("pg_ctl");
        let options = format!(
            "-k {} -c listen_addresses='' -c fsync=off -c max_connections=50",
            dir.display()
        );
        check(
            as_owner(&pg_ctl)
                .arg("-D")
                .arg(&data)
                .args(["-o", &options, "-l"])
                .arg(data.join("log"))
                .args(["-w", "start"])
                .output()
                .expect("run pg_ctl"),
            "pg_ctl start",
        );
        // SAFETY: registering a plain extern "C" fn.
        unsafe {
            libc::atexit(stop_cluster);
        }
        Cluster { dir, pg_ctl }
    })
}

/// A new, empty database in the shared cluster: its connection string.
fn new_database() -> String {
    let cluster = cluster();
    let name = format!("t{}", NEXT_DB.fetch_add(1, Ordering::SeqCst));
    let admin = format!(
        "host={} user=postgres dbname=postgres",
        cluster.dir.display()
    );
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("connect");
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create database");
    format!("host={} user=postgres dbname={name}", cluster.dir.display())
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect")
}

fn push(env: &Env, url: &str) -> Value {
    let out = env.run(&["push", url, "--json"]);
    check(out.clone(), "piidx push");
    serde_json::from_slice(&out.stdout).expect("push --json")
}

fn json(env: &Env, args: &[&str]) -> Value {
    let out = env.run(args);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "piidx {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json output")
}

/// Every table's rows (without the store's machine id, and the texts
/// without the push transaction that wrote them), sorted, and the word
/// index as the postings that count (read with the store's own
/// `piidx_postings`): what a store holds, comparable between databases.
fn dump(url: &str) -> BTreeMap<&'static str, Vec<String>> {
    let mut client = connect(url);
    let mut out = BTreeMap::new();
    for table in TABLES.iter().chain(&["push_files"]) {
        let rows = client
            .query(
                &format!(
                    "SELECT (to_jsonb(t) - 'src' - 'pushed_at' - 'batch')::text FROM {table} t"
                ),
                &[],
            )
            .expect("dump");
        let mut rows: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
        rows.sort();
        out.insert(*table, rows);
    }
    let postings = client
        .query(
            "SELECT format('%s %s %s', u.word, p.chunk_id, p.positions)
               FROM words w
              CROSS JOIN LATERAL unnest(w.lexemes) WITH ORDINALITY AS u(word, i)
              CROSS JOIN LATERAL piidx_postings(
                  piidx_slice(w.lists, w.list_ends, u.i::integer),
                  piidx_slice(w.positions, w.position_ends, u.i::integer), w.batch) AS p
               JOIN texts t ON t.src = w.src AND t.chunk_id = p.chunk_id AND t.batch = p.batch",
            &[],
        )
        .expect("dump the word index");
    let mut postings: Vec<String> = postings.iter().map(|row| row.get(0)).collect();
    postings.sort();
    out.insert("words", postings);
    out
}

/// The `sessions` fixture, synced and pushed into a new database.
fn pushed_sessions() -> (Env, String) {
    let env = Env::with_fixture("sessions");
    env.sync();
    let url = new_database();
    push(&env, &url);
    (env, url)
}

/// The store `url` holds what a fresh push of `env`'s index would (`dump`).
fn assert_holds_a_fresh_push(env: &Env, url: &str) {
    let fresh = new_database();
    push(env, &fresh);
    assert_eq!(dump(url), dump(&fresh));
}

/// Rows per table of one machine (by its label) in the store.
fn store_counts(url: &str, machine: &str) -> BTreeMap<&'static str, i64> {
    let mut client = connect(url);
    TABLES
        .iter()
        .map(|table| {
            let count: i64 = client
                .query_one(
                    &format!(
                        "SELECT count(*) FROM {table} t
                          WHERE (t.src, t.file_id) IN
                                (SELECT src, file_id FROM files WHERE machine = $1)"
                    ),
                    &[&machine],
                )
                .expect("count")
                .get(0);
            (*table, count)
        })
        .collect()
}

/// The same counts from the index, the files of `root` only.
fn index_counts(env: &Env, root: &str) -> BTreeMap<&'static str, i64> {
    TABLES
        .iter()
        .map(|table| {
            let source = match *table {
                "texts" => "chunks",
                other => other,
            };
            let sql = format!(
                "SELECT count(*) FROM {source} t WHERE t.file_id IN
                   (SELECT f.file_id FROM files f JOIN sessions s ON s.file_id = f.file_id
                     WHERE f.status = 'indexed' AND f.root = '{root}')"
            );
            (*table, env.count(&sql))
        })
        .collect()
}

fn root_of(env: &Env) -> String {
    env.root.to_string_lossy().into_owned()
}

#[test]
fn two_machines_push_what_their_indexes_answer() {
    let url = new_database();
    // Machine alpha: its own sessions.
    let alpha = Env::with_fixture("sessions");
    let alpha_root = root_of(&alpha);
    check(
        alpha.run(&["sync", "--root", &alpha_root, "--machine", "alpha", "-q"]),
        "sync alpha",
    );
    // Machine beta: its own sessions, plus a tree copied from a laptop.
    let beta = Env::with_fixture("pi152");
    let beta_root = root_of(&beta);
    let laptop_root = beta.dir.path().join("laptop");
    crate::util::copy_tree(&fixtures().join("subagents"), &laptop_root);
    let laptop_root = laptop_root.to_string_lossy().into_owned();
    check(beta.run(&["sync", "--root", &beta_root, "-q"]), "sync beta");
    check(beta.run(&["sync", "--machine", "beta", "-q"]), "name beta");
    check(
        beta.run(&["sync", "--root", &laptop_root, "--machine", "laptop", "-q"]),
        "sync laptop",
    );

    push(&alpha, &url);
    push(&beta, &url);

    assert_eq!(
        store_counts(&url, "alpha"),
        index_counts(&alpha, &alpha_root)
    );
    assert_eq!(store_counts(&url, "beta"), index_counts(&beta, &beta_root));
    assert_eq!(
        store_counts(&url, "laptop"),
        index_counts(&beta, &laptop_root)
    );
    assert!(index_counts(&beta, &laptop_root)["subagent_runs"] > 0);

    // Usage: each machine's totals are its index's; the store's, the sum.
    let alpha_usage = json(&alpha, &["usage", "--by", "model", "--json"]);
    let beta_usage = json(&beta, &["usage", "--by", "model", "--json"]);
    let pg_alpha = json(
        &alpha,
        &[
            "usage",
            "--by",
            "model",
            "--json",
            "--pg",
            &url,
            "--machine",
            "alpha",
        ],
    );
    // Sums of dollars in another order may differ in the last digit.
    let without_cost = |rows: &Value| -> (Value, Vec<f64>) {
        let mut rows = rows.clone();
        let mut costs = Vec::new();
        for row in rows.as_array_mut().expect("usage rows") {
            for field in ["cost", "subagent_cost"] {
                costs.push(row[field].as_f64().unwrap_or(0.0));
                row[field] = Value::Null;
            }
        }
        (rows, costs)
    };
    let (pg_rows, pg_costs) = without_cost(&pg_alpha);
    let (index_rows, index_costs) = without_cost(&alpha_usage);
    assert_eq!(pg_rows, index_rows);
    for (a, b) in pg_costs.iter().zip(&index_costs) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
    let pg_all = json(&alpha, &["usage", "--by", "day", "--json", "--pg", &url]);
    // `--json` prints the rows: the total is their sum.
    let total = |rows: &Value, field: &str| -> i64 {
        rows.as_array()
            .expect("usage rows")
            .iter()
            .map(|row| row[field].as_i64().unwrap_or(0))
            .sum()
    };
    for field in [
        "records",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "subagent_runs",
    ] {
        assert_eq!(
            total(&pg_all, field),
            total(&alpha_usage, field) + total(&beta_usage, field),
            "{field}"
        );
    }
    assert!(total(&pg_all, "records") > 0);

    // Sessions: alpha's list is its index's, in the same order.
    let sessions = json(&alpha, &["sessions", "--all", "--json"]);
    let pg_sessions = json(
        &alpha,
        &[
            "sessions",
            "--all",
            "--json",
            "--pg",
            &url,
            "--machine",
            "alpha",
        ],
    );
    assert_eq!(pg_sessions, sessions);
    let laptop_sessions = json(
        &beta,
        &[
            "sessions",
            "--all",
            "--json",
            "--pg",
            &url,
            "--machine",
            "laptop",
        ],
    );
    assert_eq!(
        laptop_sessions.as_array().map(Vec::len),
        Some(index_counts(&beta, &laptop_root)["sessions"] as usize)
    );

    // Tools: alpha's statistics are its index's.
    assert_eq!(
        json(
            &alpha,
            &["tools", "--json", "--pg", &url, "--machine", "alpha"]
        ),
        json(&alpha, &["tools", "--json"])
    );
    // Subagent runs: beta's index holds beta's and the laptop's; the store
    // has no artifact files, so `artifacts_missing` is left out.
    let runs = |value: Value| -> Vec<String> {
        let mut runs: Vec<String> = value
            .as_array()
            .expect("runs")
            .iter()
            .map(|run| {
                let mut run = run.clone();
                run["artifacts_missing"] = Value::Null;
                run.to_string()
            })
            .collect();
        runs.sort();
        runs
    };
    let mut pg_runs = runs(json(
        &beta,
        &["subagents", "--json", "--pg", &url, "--machine", "laptop"],
    ));
    assert!(!pg_runs.is_empty());
    pg_runs.extend(runs(json(
        &beta,
        &["subagents", "--json", "--pg", &url, "--machine", "beta"],
    )));
    pg_runs.sort();
    assert_eq!(pg_runs, runs(json(&beta, &["subagents", "--json"])));

    // Search: the known words are found in the sessions the index finds
    // them in, whatever holds them (messages, thinking, tool output), and
    // with the same filters.
    for (word, filter) in [
        ("crate", &[][..]),
        ("Cargo.toml", &[]),
        ("parse_line_offset", &[]),
        ("桜餅テスト", &[]),
        ("crate", &["--role", "user", "--role", "assistant"]),
        ("ibexquartz", &["--role", "tool_result"]),
        ("edition", &["--tool", "read"]),
        ("compile", &["--role", "bash,tool_result"]),
    ] {
        let session_ids = |hits: &Value| -> std::collections::BTreeSet<String> {
            hits.as_array()
                .expect("hits")
                .iter()
                .map(|hit| hit["session_id"].as_str().unwrap_or("").to_owned())
                .collect()
        };
        let args = [&["search", word, "--json", "-n", "500"][..], filter].concat();
        let local = json(&alpha, &args);
        let remote = json(
            &alpha,
            &[&args[..], &["--pg", &url, "--machine", "alpha"]].concat(),
        );
        assert!(
            !session_ids(&local).is_empty(),
            "{word} {filter:?} is in the fixtures"
        );
        assert_eq!(
            session_ids(&remote),
            session_ids(&local),
            "{word} {filter:?}"
        );
        let kinds = |hits: &Value| -> std::collections::BTreeSet<String> {
            hits.as_array()
                .expect("hits")
                .iter()
                .map(|hit| format!("{} {}", hit["role"], hit["tool_name"]))
                .collect()
        };
        assert_eq!(kinds(&remote), kinds(&local), "{word} {filter:?}");
        let first = &remote[0];
        assert!(
            first["snippet"].as_str().unwrap_or("").contains('\u{ab}'),
            "{first}"
        );
    }

    // Read-only SQL.
    let out = alpha.run(&["sql", "--pg", &url, "DELETE FROM sessions"]);
    assert!(!out.status.success());
    let out = check(
        alpha.run(&[
            "sql",
            "--pg",
            &url,
            "--json",
            "SELECT machine, count(*) AS n FROM sessions GROUP BY machine ORDER BY machine",
        ]),
        "sql --pg",
    );
    let rows: Value = serde_json::from_slice(&out.stdout).expect("json");
    let machines: Vec<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|row| row["machine"].as_str())
        .collect();
    assert_eq!(machines, ["alpha", "beta", "laptop"]);
}

#[test]
fn a_push_after_appends_rewrites_and_deletions_equals_a_fresh_push() {
    let (env, url) = pushed_sessions();

    let files = crate::util::jsonl_files(&env.root);
    assert!(files.len() >= 4);
    // Append a message to one file.
    let appended = &files[0];
    let mut text = std::fs::read_to_string(appended).expect("read");
    text.push_str(
        r#"{"type":"message","id":"pgappend1","parentId":null,"timestamp":"2026-11-01T00:00:00.000Z","message":{"role":"user","content":"zanzibar appended words","timestamp":1793491200000}}"#,
    );
    text.push('\n');
    std::fs::write(appended, text).expect("append");
    // Rewrite another (same length, other words: re-indexed from scratch).
    let rewritten = &files[1];
    let old = std::fs::read_to_string(rewritten).expect("read");
    std::fs::write(rewritten, old.replacen("a", "o", 40)).expect("rewrite");
    // Delete a third.
    std::fs::remove_file(&files[2]).expect("delete");
    env.sync();
    let report = push(&env, &url);
    assert_eq!(report["files_deleted"], 1, "{report}");
    assert!(report["files_sent"].as_u64() >= Some(2), "{report}");
    // The appended file keeps its entries in the store and gets the new one.
    assert_eq!(report["files_appended"], 1, "{report}");

    assert_holds_a_fresh_push(&env, &url);
    let hits = json(&env, &["search", "zanzibar", "--json", "--pg", &url]);
    assert_eq!(hits.as_array().map(Vec::len), Some(1));
    // Nothing changed: nothing sent.
    let again = push(&env, &url);
    assert_eq!(again["files_sent"], 0, "{again}");
}

/// An omp background run gets its outcome from a later delivery in its
/// session and its spend from its transcript, which may grow alone: a push
/// after each carries the run as the index has it.
#[test]
fn an_omp_background_run_is_pushed_again_as_its_transcript_grows() {
    let env = Env::with_fixture("omp-agent/sessions");
    let transcripts: Vec<_> = crate::util::jsonl_files(&env.root)
        .into_iter()
        .filter(|path| {
            path.parent()
                .and_then(|dir| dir.parent())
                .is_some_and(|dir| dir.ends_with("-tmp-pi-fixture-oagent-home-proj-two"))
        })
        .collect();
    assert_eq!(transcripts.len(), 2, "{transcripts:?}");
    let whole: Vec<String> = transcripts
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("read"))
        .collect();
    for (path, text) in transcripts.iter().zip(&whole) {
        let header_and_prompt = text.match_indices('\n').nth(5).expect("lines").0 + 1;
        std::fs::write(path, &text[..header_and_prompt]).expect("cut");
    }
    env.sync();
    let url = new_database();
    push(&env, &url);
    for (path, text) in transcripts.iter().zip(&whole) {
        std::fs::write(path, text).expect("the transcript's end");
    }
    env.sync();
    let report = push(&env, &url);
    assert!(report["files_sent"].as_u64() >= Some(3), "{report}");
    assert_holds_a_fresh_push(&env, &url);
    // The store keeps no artifact files: it says nothing of missing ones.
    let mut local = json(&env, &["subagents", "--json"]);
    for run in local.as_array_mut().expect("runs") {
        run["artifacts_missing"] = Value::Null;
    }
    assert_eq!(json(&env, &["subagents", "--json", "--pg", &url]), local);
}

/// A store written at schema 2, where PostgreSQL generated `texts.tsv`
/// with `to_tsvector('simple', text)` (pg-migrations 0001), is refused by
/// questions until a push upgrades it in place (schemas 3 and 4); that push
/// sends every file again with the client's word index, and the store then
/// equals a fresh one.
#[test]
fn a_schema_2_store_is_upgraded_in_place_by_the_next_push() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let url = new_database();
    let first = push(&env, &url);
    let files = first["files_sent"].as_u64().expect("files_sent");
    assert!(files > 0, "{first}");
    // Back to schema 2's shape, as 0001 made it: no word index of the
    // client's, the column generated by PostgreSQL (which fills it again
    // for every row), its GIN index.
    connect(&url)
        .batch_execute(
            "DROP FUNCTION piidx_matches; DROP FUNCTION piidx_postings; DROP FUNCTION piidx_slice;
             DROP FUNCTION piidx_varints;
             DROP TABLE words; DROP TABLE word_batches; DROP SEQUENCE word_batch_ids;
             ALTER TABLE texts DROP CONSTRAINT texts_pkey, ADD PRIMARY KEY (src, chunk_id);
             ALTER TABLE texts DROP COLUMN batch, DROP COLUMN words;
             ALTER TABLE texts ADD COLUMN tsv tsvector
               GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED;
             CREATE INDEX texts_tsv ON texts USING gin (tsv);
             UPDATE piidx_schema SET version = 2;",
        )
        .expect("schema 2");

    let refused = env.run(&["search", "Cargo.toml", "--pg", &url]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("has schema 2") && stderr.contains("run `piidx push`"),
        "{stderr}"
    );

    let upgrade = push(&env, &url);
    assert_eq!(upgrade["files_sent"].as_u64(), Some(files), "{upgrade}");
    let gone: i64 = connect(&url)
        .query_one(
            "SELECT count(*) FROM pg_attribute
              WHERE attrelid = 'texts'::regclass AND attname = 'tsv' AND NOT attisdropped",
            &[],
        )
        .expect("tsv column")
        .get(0);
    assert_eq!(gone, 0, "the word index replaced tsv and its GIN index");
    assert_holds_a_fresh_push(&env, &url);
    let from_store = json(&env, &["search", "Cargo.toml", "--json", "--pg", &url]);
    let from_index = json(&env, &["search", "Cargo.toml", "--json"]);
    assert!(from_index.as_array().is_some_and(|hits| !hits.is_empty()));
    assert_eq!(
        ids_of(&from_store, "entry_id"),
        ids_of(&from_index, "entry_id")
    );
    let again = push(&env, &url);
    assert_eq!(again["files_sent"], 0, "{again}");
}

/// Phrases, NOT and OR find in the store the entries the index finds: the
/// store looks for candidates with the phrases' words AND-ed and without
/// what is under NOT, then checks each with the query itself.
#[test]
fn phrases_and_negations_find_the_entries_the_index_finds() {
    let (env, url) = pushed_sessions();
    let words = |query: &str| {
        let hits = json(&env, &["search", query, "--json", "-n", "500"]);
        ids_of(&hits, "entry_id")
    };
    // `crate` is in more entries than `crate NOT Cargo.toml`, which the
    // candidates (all `crate` entries) must not return.
    assert!(words("crate").len() > words("crate NOT Cargo.toml").len());
    for query in [
        "Cargo.toml",
        "\"the crate\"",
        "crate NOT Cargo.toml",
        "crate -edition",
        "parse_line_offset OR \"Cargo.toml\"",
        "(crate OR compile) NOT (edition OR \"Cargo.toml\")",
    ] {
        let args = ["search", query, "--json", "-n", "500"];
        let local = json(&env, &args);
        let remote = json(&env, &[&args[..], &["--pg", &url]].concat());
        assert!(
            !ids_of(&local, "entry_id").is_empty(),
            "{query} is in the fixtures"
        );
        assert_eq!(
            ids_of(&remote, "entry_id"),
            ids_of(&local, "entry_id"),
            "{query}"
        );
    }
}

/// The store scores a hit as the index does: bm25 over the same
/// statistics (every chunk pushed, their tokens), no IDF for a query of one
/// phrase and each phrase's for several, times the same weight per kind of
/// text. So the same query gives the same scores, in the same order.
#[test]
fn the_store_scores_each_hit_as_the_index_does() {
    let (env, url) = pushed_sessions();
    let scores = |hits: &Value| -> Vec<(String, f64)> {
        hits.as_array()
            .expect("hits")
            .iter()
            .map(|hit| {
                let entry = hit["entry_id"].as_str().unwrap_or("").to_owned();
                (entry, hit["score"].as_f64().expect("a score"))
            })
            .collect()
    };
    for query in [
        "crate",
        "Cargo.toml",
        "\"the crate\"",
        "pars*",
        "crate OR compile",
        "crate edition",
    ] {
        let args = ["search", query, "--json", "-n", "500"];
        let local = scores(&json(&env, &args));
        let remote = scores(&json(&env, &[&args[..], &["--pg", &url]].concat()));
        assert!(!local.is_empty(), "{query} is in the fixtures");
        assert_eq!(local.len(), remote.len(), "{query}: {local:?} {remote:?}");
        for ((entry, score), (remote_entry, remote_score)) in local.iter().zip(&remote) {
            assert_eq!(entry, remote_entry, "{query}: {local:?} {remote:?}");
            assert!(
                (score - remote_score).abs() <= 1e-9 * score.abs().max(1.0),
                "{query}: {entry} scores {score} in the index, {remote_score} in the store"
            );
        }
    }
}

/// Many small pushes leave a bounded number of batches in the word index
/// (small ones are merged, LSM-style, without the postings that no longer
/// count), every pushed word is found, and the index equals a fresh push's.
#[test]
fn small_pushes_are_merged_in_the_word_index() {
    let (env, url) = pushed_sessions();
    let file = crate::util::jsonl_files(&env.root)[0].clone();
    let pushes = 20;
    for i in 0..pushes {
        let mut text = std::fs::read_to_string(&file).expect("read");
        text.push_str(&format!(
            r#"{{"type":"message","id":"merge{i:03}","parentId":null,"timestamp":"2026-11-01T00:00:{i:02}.000Z","message":{{"role":"user","content":"quokkaword{i} pushed","timestamp":1793491200000}}}}"#
        ));
        text.push('\n');
        std::fs::write(&file, text).expect("append");
        env.sync();
        push(&env, &url);
    }
    let batches: i64 = connect(&url)
        .query_one("SELECT count(*) FROM word_batches", &[])
        .expect("batches")
        .get(0);
    assert!(
        batches < pushes,
        "{batches} batches after {pushes} small pushes"
    );
    for i in [0, 7, 8, pushes - 1] {
        let word = format!("quokkaword{i}");
        let hits = json(&env, &["search", &word, "--json", "--pg", &url]);
        assert_eq!(hits.as_array().map(Vec::len), Some(1), "{word}");
    }
    assert_holds_a_fresh_push(&env, &url);
}

/// `piidx_matches`, the word index for SQL, finds the texts that have a
/// word (and, as a prefix, the texts with a word that starts so), as a
/// regular expression over the texts finds them (ASCII words, so the
/// tokenizer's folding is plain lower case).
#[test]
fn the_sql_function_finds_the_texts_with_a_word() {
    let (_env, url) = pushed_sessions();
    let mut client = connect(&url);
    for (word, prefix) in [("crate", false), ("edit", true), ("toml", false)] {
        let mut ids = |sql: &str| -> Vec<(i32, i64)> {
            let mut ids: Vec<(i32, i64)> = client
                .query(sql, &[&word, &prefix])
                .expect("query")
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect();
            ids.sort_unstable();
            ids
        };
        let found = ids("SELECT src, chunk_id FROM piidx_matches($1, $2)");
        let expected = ids(
            "SELECT src, chunk_id FROM texts
              WHERE text ~* ('(^|[^[:alnum:]])' || $1 || CASE WHEN $2 THEN '' ELSE '([^[:alnum:]]|$)' END)",
        );
        assert!(!expected.is_empty(), "{word} is in the fixtures");
        assert_eq!(found, expected, "{word} prefix {prefix}");
    }
    // docs/postgres.md's example runs as written.
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/postgres.md"),
    )
    .expect("docs/postgres.md");
    let example = docs
        .split("```sql")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .find(|block| block.contains("piidx_matches"))
        .expect("an example of piidx_matches");
    client.query(example, &[]).expect("the docs' example runs");
}

/// An index restored from a backup gives new texts the chunk ids of texts
/// it had pushed since: those texts' postings stay in the store's word
/// index (until a merge drops them), and must not count for the new texts
/// (`texts.batch`).
#[test]
fn postings_of_replaced_texts_do_not_count() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let url = new_database();
    // A backup of the index (and its shards), before file X.
    let index_files = |env: &Env| -> Vec<PathBuf> {
        let name = env
            .db
            .file_name()
            .expect("db name")
            .to_string_lossy()
            .into_owned();
        std::fs::read_dir(env.db.parent().expect("db dir"))
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&name))
            })
            .collect()
    };
    let backup = env.dir.path().join("backup");
    std::fs::create_dir_all(&backup).expect("backup dir");
    for file in index_files(&env) {
        std::fs::copy(&file, backup.join(file.file_name().expect("name"))).expect("backup");
    }
    let x = env.root.join("x.jsonl");
    let y = env.root.join("y.jsonl");
    let session = |word: &str| {
        format!(
            concat!(
                r#"{{"type":"session","version":3,"id":"0196a000-0000-7000-8000-00000000{}","timestamp":"2026-11-02T00:00:00.000Z","cwd":"/w"}}"#,
                "\n",
                r#"{{"type":"message","id":"m1","parentId":null,"timestamp":"2026-11-02T00:00:01.000Z","message":{{"role":"user","content":"{} here","timestamp":1793577601000}}}}"#,
                "\n"
            ),
            if word.starts_with('w') {
                "0001"
            } else {
                "0002"
            },
            word
        )
    };
    std::fs::write(&x, session("wombatpostings")).expect("x");
    env.sync();
    push(&env, &url);
    let stored = |word: &str| json(&env, &["search", word, "--json", "--pg", &url]);
    assert_eq!(stored("wombatpostings").as_array().map(Vec::len), Some(1));
    // The backup comes back; X is gone, Y new: Y's texts get X's ids.
    for file in index_files(&env) {
        std::fs::remove_file(file).expect("remove");
    }
    for file in std::fs::read_dir(&backup).expect("backup").flatten() {
        std::fs::copy(file.path(), env.db.with_file_name(file.file_name())).expect("restore");
    }
    std::fs::remove_file(&x).expect("remove x");
    std::fs::write(&y, session("numbatpostings")).expect("y");
    env.sync();
    push(&env, &url);
    let reused: i64 = connect(&url)
        .query_one(
            "SELECT count(*) FROM words w
              CROSS JOIN LATERAL unnest(w.lexemes) WITH ORDINALITY AS u(word, i)
              CROSS JOIN LATERAL piidx_postings(
                  piidx_slice(w.lists, w.list_ends, u.i::integer),
                  piidx_slice(w.positions, w.position_ends, u.i::integer), w.batch) AS p
               JOIN texts t ON t.src = w.src AND t.chunk_id = p.chunk_id
              WHERE u.word = 'wombatpostings'",
            &[],
        )
        .expect("count")
        .get(0);
    assert!(
        reused > 0,
        "X's postings name chunk ids that Y's texts have now"
    );
    assert_eq!(stored("wombatpostings").as_array().map(Vec::len), Some(0));
    assert_eq!(stored("numbatpostings").as_array().map(Vec::len), Some(1));
    assert_holds_a_fresh_push(&env, &url);
}

/// A column the store answers with another type than this piidx reads
/// (altered by hand, or another server) is an error naming the store,
/// never a crash.
#[test]
fn a_store_answering_other_types_is_an_error_not_a_crash() {
    let (env, url) = pushed_sessions();
    connect(&url)
        .batch_execute("ALTER TABLE sessions ALTER COLUMN message_count TYPE text")
        .expect("alter");
    let out = env.run(&["sessions", "--pg", &url]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("team store"), "{stderr}");
}

#[test]
fn a_killed_push_converges_on_the_next_without_duplicates() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let fresh = new_database();
    push(&env, &fresh);
    let expected = dump(&fresh);
    // One file per batch: the kill points fall between files.
    for point in ["push_copy", "push"] {
        for n in [1, 2, 5] {
            let url = new_database();
            let out = env
                .command(&["push", &url, "--json"])
                .env("PIIDX_TEST_BATCH_BYTES", "1")
                .env("PIIDX_TEST_KILL_AT", format!("{point}:{n}"))
                .output()
                .expect("run push");
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&out.status),
                Some(libc::SIGKILL),
                "{point}:{n} was reached"
            );
            let report = push(&env, &url);
            let committed = if point == "push" { n } else { n - 1 };
            let total = report["files_sent"].as_u64().unwrap_or(0)
                + report["files_unchanged"].as_u64().unwrap_or(0);
            assert_eq!(
                report["files_unchanged"].as_u64(),
                Some(committed),
                "{point}:{n}: {report}"
            );
            assert!(total > committed);
            assert_eq!(dump(&url), expected, "{point}:{n}");
        }
    }
}

#[test]
fn three_machines_push_into_one_store_at_once() {
    let url = new_database();
    let envs: Vec<(Env, &str)> = [("sessions", "m1"), ("pi152", "m2"), ("subagents", "m3")]
        .into_iter()
        .map(|(fixture, machine)| {
            let env = Env::with_fixture(fixture);
            let root = root_of(&env);
            check(
                env.run(&["sync", "--root", &root, "--machine", machine, "-q"]),
                "sync",
            );
            (env, machine)
        })
        .collect();
    // Small batches, so the pushes' transactions interleave.
    let children: Vec<_> = envs
        .iter()
        .map(|(env, _)| {
            env.command(&["push", &url, "--json"])
                .env("PIIDX_TEST_BATCH_BYTES", "1")
                .spawn()
                .expect("spawn push")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success());
    }
    for (env, machine) in &envs {
        assert_eq!(
            store_counts(&url, machine),
            index_counts(env, &root_of(env)),
            "{machine}"
        );
    }
    let mut client = connect(&url);
    let machines: i64 = client
        .query_one("SELECT count(*) FROM machines", &[])
        .expect("machines")
        .get(0);
    assert_eq!(machines, 3);
}

/// `sql --pg` cannot write, end the read-only transaction, or reach the
/// server's files, whatever role the URL logs in as: here the pushers' own
/// role (the owner of every table) and a superuser.
#[test]
fn sql_on_the_team_store_never_writes_nor_reads_the_servers_files() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let superuser = new_database();
    push(&env, &superuser);
    // The pushers' role owns every table, as in README's team set-up.
    connect(&superuser)
        .batch_execute(
            "DO $$ DECLARE t record; BEGIN
               CREATE ROLE piidx_push_t LOGIN;
               FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' LOOP
                 EXECUTE format('ALTER TABLE %I OWNER TO piidx_push_t', t.tablename);
               END LOOP;
             END $$",
        )
        .expect("the pushers' role");
    let pusher = superuser.replace("user=postgres", "user=piidx_push_t");
    let count = |table: &str| -> i64 {
        connect(&superuser)
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .expect("count")
            .get(0)
    };
    let texts = count("texts");
    assert!(texts > 0);
    let writes = [
        "COMMIT; DELETE FROM texts WHERE src = 1",
        "COMMIT; DROP TABLE texts",
        "ROLLBACK; DELETE FROM texts",
        "SELECT 1; DELETE FROM texts",
        "DELETE FROM texts",
        "DROP TABLE texts",
        "WITH gone AS (DELETE FROM texts RETURNING 1) SELECT count(*) FROM gone",
        "SET transaction_read_only = off",
        "SELECT set_config('transaction_read_only', 'off', true)",
        "COPY texts TO '/tmp/piidx-pg-copy'",
        "CALL nothing()",
        "END",
    ];
    let files = [
        "SELECT pg_read_file('/etc/hostname')",
        "SELECT \"pg_read_file\"('/etc/hostname')",
        "SELECT pg_catalog.pg_read_file('/etc/hostname')",
        "SELECT PG_READ_BINARY_FILE('/etc/hostname')",
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT lo_import('/etc/hostname')",
        "SELECT length(x) FROM (SELECT pg_read_file('/etc/hostname') AS x) s WHERE true",
        "SELECT query_to_xml('SELECT pg_read_file(''/etc/hostname'')', true, true, '')",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
    ];
    for url in [&pusher, &superuser] {
        for statement in writes.iter().chain(&files) {
            let out = env.run(&["sql", "--pg", url, statement]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{statement} ran: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                stderr.contains("only reads")
                    || stderr.contains("exactly one statement")
                    || stderr.contains("refuses")
                    || stderr.contains("does not exist")
                    || stderr.contains("permission denied"),
                "{statement}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{statement}: {stderr}");
        }
        assert_eq!(count("texts"), texts);
        // What a reader asks still runs: a trailing semicolon, a CTE, a
        // string that names a refused function, many rows in batches.
        let out = check(
            env.run(&[
                "sql",
                "--pg",
                url,
                "--json",
                "WITH t AS (SELECT src FROM texts) SELECT count(*) AS n, 'pg_read_file' AS s FROM t;",
            ]),
            "sql --pg CTE",
        );
        let rows: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(rows[0]["n"], Value::from(texts.to_string()));
        let out = check(
            env.run(&[
                "sql",
                "--pg",
                url,
                "--csv",
                "SELECT generate_series(1, 1234) AS n",
            ]),
            "sql --pg batches",
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1235);
    }
    // And the next push finds the store as it left it.
    let report = push(&env, &superuser);
    assert_eq!(report["files_sent"].as_u64(), Some(0), "{report}");
}

/// The ids of the sessions in a `sessions --json` answer (Pi's `id`) or a
/// search's hits (`session_id`).
fn ids_of(list: &Value, key: &str) -> std::collections::BTreeSet<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| item[key].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn serve_and_mcp_answer_from_the_team_store_as_the_cli_does() {
    use std::io::{BufRead, Write};
    let (env, url) = pushed_sessions();
    let sessions = json(&env, &["sessions", "--all", "--json"]);
    let hits = json(&env, &["search", "crate", "--json", "-n", "500"]);
    assert!(!ids_of(&sessions, "id").is_empty());
    assert!(!ids_of(&hits, "session_id").is_empty());
    // The index is gone: every answer below comes from the team store.
    for file in std::fs::read_dir(env.db.parent().expect("a directory")).expect("list") {
        let path = file.expect("an entry").path();
        if path
            .to_string_lossy()
            .starts_with(&*env.db.to_string_lossy())
        {
            std::fs::remove_file(&path).expect("remove an index file");
        }
    }
    assert!(!env.db.exists());

    // serve --pg: the API's sessions and hits are the index's; a page that
    // needs the index's entries says so.
    let served = crate::serve::Served::start(&env, &["--pg", &url]);
    let (status, _, body) = served.get("/api/sessions?all=1", &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let served_sessions: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(served_sessions, sessions);
    let (status, _, body) = served.get("/api/search?q=crate&limit=500", &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let served_hits: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        ids_of(&served_hits, "session_id"),
        ids_of(&hits, "session_id")
    );
    let id = sessions[0]["id"].as_str().expect("an id");
    let (status, _, _) = served.get(&format!("/api/sessions/{id}"), &[]);
    assert_eq!(status, 400);
    drop(served);

    // mcp --pg: list_sessions and search find the same sessions.
    let mut child = env
        .command(&["mcp", "--pg", &url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start piidx mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let call = |id: i64, name: &str, arguments: Value| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}})
    };
    for message in [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "pg-test", "version": "0"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(
            2,
            "list_sessions",
            serde_json::json!({"max_bytes": 4_194_304}),
        ),
        call(
            3,
            "search",
            serde_json::json!({"query": "crate", "limit": 500, "max_bytes": 4_194_304}),
        ),
    ] {
        writeln!(stdin, "{message}").expect("send");
    }
    // The server answers every line, then ends when stdin closes.
    drop(stdin);
    let replies: Vec<Value> = std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|line| serde_json::from_str(&line.expect("a line")).expect("JSON"))
        .collect();
    assert!(child.wait().expect("mcp exits").success());
    let answer = |id: i64| -> &Value {
        let reply = replies
            .iter()
            .find(|reply| reply["id"] == id)
            .unwrap_or_else(|| panic!("a reply to {id}: {replies:?}"));
        &reply["result"]["structuredContent"]
    };
    assert_eq!(answer(2)["next_cursor"], Value::Null);
    assert_eq!(
        ids_of(&answer(2)["sessions"], "id"),
        ids_of(&sessions, "id")
    );
    assert_eq!(answer(3)["next_cursor"], Value::Null);
    assert_eq!(
        ids_of(&answer(3)["hits"], "session_id"),
        ids_of(&hits, "session_id")
    );
}
