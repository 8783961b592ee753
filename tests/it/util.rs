//! A temporary sessions root plus database, and a way to run `piidx` on it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub db: PathBuf,
}

/// How many of the two indexes of fork copies' keys the index has (a
/// first load builds them at its end).
pub const FORK_KEY_INDEXES: &str = "SELECT count(*) FROM sqlite_master
    WHERE name IN ('usage_records_dedupe', 'tool_call_meta_call_id')";

/// Runs `sql` on the index directly (with piidx's SQL functions), as a
/// user or another program would change it behind piidx's back.
pub fn db_sql(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    conn.execute_batch(sql).expect("change db");
}

/// The repository's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

impl Env {
    /// An empty sessions root and no database yet.
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("sessions");
        fs::create_dir_all(&root).expect("create root");
        let db = dir.path().join("index.db");
        Env { dir, root, db }
    }

    /// A root holding a copy of `fixtures/<name>` (a sessions tree).
    pub fn with_fixture(name: &str) -> Env {
        let env = Env::new();
        copy_tree(&fixtures().join(name), &env.root);
        env
    }

    /// `piidx --db <db> ARGS`, isolated from the caller's `PIIDX_DB` and home.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_piidx"));
        command
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .env_remove("PIIDX_DB")
            // Output as for a program: no width, no colour, no pager.
            .env_remove("COLUMNS")
            .env_remove("NO_COLOR")
            .env_remove("PAGER")
            .env_remove("PIIDX_PAGER")
            // Days are UTC days, whatever the machine's zone.
            .env("TZ", "UTC")
            .env("HOME", self.dir.path());
        command
    }

    /// Runs `piidx --db <db> ARGS`.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run piidx")
    }

    /// `piidx sync --root <root> --json`, returning the summary; panics with
    /// stderr unless the exit code is 0 or 1.
    pub fn sync(&self) -> Value {
        let root = self.root.to_string_lossy().into_owned();
        let out = self.run(&["sync", "--root", &root, "--json"]);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0) | Some(1)),
            "sync failed ({code:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("sync --json output")
    }

    /// `piidx sql QUERY --json` as parsed rows.
    pub fn sql(&self, query: &str) -> Vec<Value> {
        let out = self.run(&["sql", query, "--json"]);
        assert!(
            out.status.success(),
            "sql failed: {query}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("sql --json output")
    }

    /// The ids of the entries `piidx show PATH --json` prints: the branch
    /// it resumes, root first.
    pub fn shown_branch(&self, path: &str) -> Vec<String> {
        let out = self.run(&["show", path, "--json"]);
        assert!(
            out.status.success(),
            "show {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown: Vec<Value> = serde_json::from_slice(&out.stdout).expect("show --json");
        shown
            .iter()
            .filter_map(|entry| entry["id"].as_str().map(str::to_owned))
            .collect()
    }

    /// A single integer from a query.
    pub fn count(&self, query: &str) -> i64 {
        let rows = self.sql(query);
        let first = rows.first().and_then(Value::as_object).expect("one row");
        first
            .values()
            .next()
            .and_then(Value::as_i64)
            .expect("an integer")
    }
}

/// The strings of a JSON array (a generator's list of entry ids).
pub fn string_list(list: &Value) -> Vec<String> {
    let items = list.as_array().expect("an array").iter();
    items
        .filter_map(|item| item.as_str().map(str::to_owned))
        .collect()
}

/// The `CREATE VIEW name` statement of a migration's SQL, with its `;`.
pub fn view_sql(migration: &str, name: &str) -> String {
    let start = migration
        .find(&format!("CREATE VIEW {name}"))
        .expect("view in migration");
    let len = migration[start..].find(";\n").expect("end of view") + 1;
    migration[start..start + len].to_owned()
}

/// Writes `<dir>/<id>.jsonl`: a session header and one user message whose
/// `content` is `content` (a string or an array of blocks).
pub fn write_user_session(dir: &Path, id: &str, content: Value) {
    let header = serde_json::json!({"type": "session", "version": 3, "id": id,
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/proj"});
    let entry = serde_json::json!({"type": "message", "id": "a1", "parentId": null,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": content}});
    fs::create_dir_all(dir).expect("mkdir");
    fs::write(
        dir.join(format!("{id}.jsonl")),
        format!("{header}\n{entry}\n"),
    )
    .expect("write session");
}

/// Every `*.jsonl` file under `root` (any depth), sorted.
pub fn jsonl_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .map(|entry| entry.into_path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    files.sort();
    files
}

/// Sets every file's mtime under `root` to a day ago, so syncs trust the
/// stat they record (a file modified within the last seconds is "racy" and
/// always looked at again).
pub fn age_files(root: &Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
    for path in jsonl_files(root) {
        fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(old))
            .expect("set mtime");
    }
}

/// The largest `*.jsonl` file under `root`.
pub fn largest_jsonl(root: &Path) -> PathBuf {
    jsonl_files(root)
        .into_iter()
        .max_by_key(|file| fs::metadata(file).map(|meta| meta.len()).unwrap_or(0))
        .expect("a session file")
}

pub fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk fixtures");
        let rel = entry.path().strip_prefix(from).expect("prefix");
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            fs::create_dir_all(&dest).expect("mkdir");
        } else if entry.file_type().is_symlink() {
            // Kept as links (relative targets stay valid in the copy).
            let target = fs::read_link(entry.path()).expect("read link");
            std::os::unix::fs::symlink(target, &dest).expect("symlink");
        } else {
            fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// A physical line: number (1-based), byte offset, bytes.
pub struct RawLine {
    pub line_no: i64,
    pub offset: i64,
    pub bytes: Vec<u8>,
}

/// Non-blank physical lines of a file, split on `\n` only.
pub fn non_blank_lines(path: &Path) -> Vec<RawLine> {
    let bytes = fs::read(path).expect("read fixture");
    let mut offset = 0;
    let mut lines = Vec::new();
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if !line.iter().all(u8::is_ascii_whitespace) {
            lines.push(RawLine {
                line_no: index as i64 + 1,
                offset,
                bytes: line.to_vec(),
            });
        }
        offset += line.len() as i64 + 1;
    }
    lines
}

/// Every table of a piidx database as sorted text rows, with surrogate keys
/// (file_id, entry rowids, chunk ids) replaced by what they stand for and
/// run-dependent columns (indexed_at, deleted_at) left out. Two databases
/// with equal dumps hold the same index.
pub fn canonical_dump(db: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let mut tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'
             AND name NOT LIKE 'fts%' AND name NOT LIKE '%fts_%' AND sql NOT LIKE 'CREATE VIRTUAL%'",
        )
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .expect("list tables");
    tables.sort();
    let mut dump = Vec::new();
    for table in tables {
        let columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .expect("columns");
        let select: Vec<String> = columns
            .iter()
            .filter(|c| {
                let surrogate = matches!(
                    (table.as_str(), c.as_str()),
                    ("shared_texts", "text_id") | ("shared_chunks", "fts_rowid")
                );
                let run_dependent = matches!(
                    c.as_str(),
                    "indexed_at"
                        | "deleted_at"
                        | "added_at"
                        | "seen_ns"
                        | "chunk_id"
                        | "run_rowid"
                        | "artifact_id"
                );
                !surrogate && !run_dependent
            })
            .map(|c| match c.as_str() {
                "file_id" | "child_file_id" => {
                    format!("(SELECT path FROM files f WHERE f.file_id = t.{c})")
                }
                // Surrogate keys of shared texts: the text's hash stands for them.
                "text_id" => {
                    format!("(SELECT hash FROM shared_texts x WHERE x.text_id = t.{c})")
                }
                "fts_rowid" => format!(
                    "(SELECT x.hash || ':' || sc.inner_path || ':' || sc.start
                        FROM shared_chunks sc JOIN shared_texts x ON x.text_id = sc.text_id
                       WHERE sc.fts_rowid = t.{c})"
                ),
                c if c.ends_with("entry_rowid") => format!(
                    "(SELECT f.path || ':' || e.byte_offset || ':' || e.obj_in_line FROM entries e
                      JOIN files f ON f.file_id = e.file_id WHERE e.entry_rowid = t.{c})"
                ),
                c => format!("t.{c}"),
            })
            .collect();
        // Each index makes its own random machine id (migration 0016).
        let skip = if table == "meta" {
            " WHERE t.key <> 'machine_uid'"
        } else {
            ""
        };
        let sql = format!("SELECT {} FROM {table} t{skip}", select.join(", "));
        let mut stmt = conn.prepare(&sql).expect("dump query");
        let count = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |row| {
                let mut cells = Vec::with_capacity(count);
                for index in 0..count {
                    cells.push(format!("{:?}", row.get_ref(index)?));
                }
                Ok(format!("{table}|{}", cells.join("|")))
            })
            .and_then(|rows| rows.collect())
            .expect("dump rows");
        rows.sort();
        dump.extend(rows);
    }
    dump
}

/// The word-index shard files of a database, as recorded in it.
pub fn shard_paths(db: &Path) -> Vec<PathBuf> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let shards: i64 = conn
        .query_row("SELECT shards FROM fts_shards", [], |row| row.get(0))
        .expect("shard configuration");
    (0..shards)
        .map(|k| {
            let mut name = db.as_os_str().to_owned();
            name.push(format!(".fts{k}"));
            PathBuf::from(name)
        })
        .collect()
}

/// `select` (with `{shard}` for the schema name) over every shard, as one
/// parenthesised UNION ALL, for `piidx sql` (which attaches the shards as
/// fts0, fts1, ...).
pub fn each_shard(db: &Path, select: &str) -> String {
    let arms: Vec<String> = (0..shard_paths(db).len())
        .map(|k| select.replace("{shard}", &format!("fts{k}")))
        .collect();
    format!("({})", arms.join(" UNION ALL "))
}

/// How many segments a shard file's word index has (`fts_idx`, one row
/// per segment and leaf range).
pub fn word_segments(shard: &Path) -> i64 {
    rusqlite::Connection::open(shard)
        .and_then(|conn| {
            conn.query_row("SELECT count(DISTINCT segid) FROM fts_idx", [], |row| {
                row.get(0)
            })
        })
        .expect("count a shard's segments")
}

/// A subquery of the chunk ids whose text matches an FTS5 expression.
pub fn fts_match(db: &Path, expr: &str) -> String {
    each_shard(
        db,
        &format!("SELECT rowid FROM {{shard}}.fts WHERE fts MATCH '{expr}'"),
    )
}

/// Every row the shards should hold, `(id, text)`, read from the main
/// database with SQL (the chunk's byte span of its field).
pub fn shard_rows(db: &Path) -> Vec<(i64, String)> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    conn.prepare(
        "SELECT f.chunk_id, f.body FROM fts_content f JOIN chunks c ON c.chunk_id = f.chunk_id
          WHERE c.fts_rowid IS NULL
         UNION ALL
         SELECT sc.fts_rowid,
                CAST(substr(CAST(CASE WHEN sc.inner_path = '$' THEN st.text
                                      ELSE json_extract(st.text, sc.inner_path) END AS BLOB),
                            sc.start + 1, sc.len) AS TEXT)
           FROM shared_chunks sc JOIN v_shared_texts st ON st.text_id = sc.text_id
         ORDER BY 1",
    )
    .and_then(|mut stmt| {
        stmt.query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })?
        .collect()
    })
    .expect("shard rows")
}

/// Whether a text goes into the trigram index too (scripts written without
/// spaces; the same ranges as `normalize::has_unspaced_script`).
pub fn unspaced(text: &str) -> bool {
    piidx::normalize::has_unspaced_script(text)
}

/// Each shard's words, as FTS5 lists them (`fts5vocab`, one row per
/// occurrence), equal those of the same rows indexed afresh from the main
/// database's text: a row deleted with other words than it was indexed with
/// would leave some behind (FTS5's integrity check cannot see that in a
/// contentless table).
fn shard_words_match(db: &Path, shards: &[PathBuf]) {
    let rows = shard_rows(db);
    for (k, path) in shards.iter().enumerate() {
        let fresh = rusqlite::Connection::open_in_memory().expect("memory db");
        fresh
            .execute_batch(
                "CREATE VIRTUAL TABLE fts USING fts5(body, content = '',
                     tokenize = 'unicode61 remove_diacritics 2');
                 CREATE VIRTUAL TABLE fts_trigram USING fts5(body, content = '', tokenize = 'trigram');",
            )
            .expect("fresh tables");
        for (id, body) in rows
            .iter()
            .filter(|(id, _)| id.rem_euclid(shards.len() as i64) == k as i64)
        {
            fresh
                .execute("INSERT INTO fts(rowid, body) VALUES (?1, ?2)", (id, body))
                .expect("fresh row");
            if unspaced(body) {
                fresh
                    .execute(
                        "INSERT INTO fts_trigram(rowid, body) VALUES (?1, ?2)",
                        (id, body),
                    )
                    .expect("fresh trigram row");
            }
        }
        fresh
            .execute("ATTACH DATABASE ?1 AS shard", [path.to_string_lossy()])
            .expect("attach shard");
        for table in ["fts", "fts_trigram"] {
            let words = |schema: &str| -> Vec<(String, i64, i64)> {
                fresh
                    .execute_batch(&format!(
                        "DROP TABLE IF EXISTS temp.words;
                         CREATE VIRTUAL TABLE temp.words USING fts5vocab({schema}, {table}, instance);"
                    ))
                    .expect("vocab table");
                fresh
                    .prepare("SELECT term, doc, offset FROM temp.words ORDER BY 1, 2, 3")
                    .and_then(|mut stmt| {
                        stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                            .collect()
                    })
                    .expect("shard words")
            };
            let want = words("main");
            let have = words("shard");
            assert!(
                want == have,
                "shard {} {table}: its words differ from its rows' text ({} vs {} occurrences)",
                path.display(),
                have.len(),
                want.len()
            );
        }
    }
}

/// FTS5's own integrity check on both indexes of every shard; each shard's
/// word index holds exactly the chunk ids `id % shards == k`, and its
/// trigram index only some of those; and its words are its rows' words.
pub fn fts_integrity(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let chunk_ids: Vec<i64> = conn
        .prepare("SELECT fts_rowid FROM fts_rows ORDER BY 1")
        .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
        .expect("chunk ids");
    let shards = shard_paths(db);
    for (k, path) in shards.iter().enumerate() {
        let shard = rusqlite::Connection::open(path).expect("open shard");
        for table in ["fts", "fts_trigram"] {
            shard
                .execute(
                    &format!("INSERT INTO {table}({table}) VALUES('integrity-check')"),
                    [],
                )
                .expect("shard index is sound");
        }
        let strays: i64 = shard
            .query_row(
                "SELECT count(*) FROM fts_trigram_docsize WHERE id NOT IN (SELECT rowid FROM fts)",
                [],
                |row| row.get(0),
            )
            .expect("trigram ids");
        assert_eq!(strays, 0, "trigram rows without a chunk");
        let have: Vec<i64> = shard
            .prepare("SELECT rowid FROM fts ORDER BY 1")
            .and_then(|mut stmt| stmt.query_map([], |row| row.get(0))?.collect())
            .expect("shard rowids");
        let want: Vec<i64> = chunk_ids
            .iter()
            .copied()
            .filter(|id| id.rem_euclid(shards.len() as i64) == k as i64)
            .collect();
        assert_eq!(
            have,
            want,
            "shard {} holds exactly its chunks",
            path.display()
        );
        for table in ["fts", "fts_trigram"] {
            let wrong = piidx::store::lengths::mismatches(&shard, table, shards.len() as i64)
                .expect("read the lengths");
            assert_eq!(
                wrong,
                Some(0),
                "{table}_lengths of {} holds every row's docsize",
                path.display()
            );
        }
        let weights = piidx::store::weights::of_chunks(&conn, k, shards.len(), i64::MAX)
            .expect("the chunks' weights");
        assert_eq!(
            piidx::store::weights::below(&shard, shards.len() as i64, &weights)
                .expect("read the weights"),
            Some(0),
            "{} weighs every row as its weightiest chunk at least",
            path.display()
        );
    }
    shard_words_match(db, &shards);
    // `message_fts` (external content) against the text of its view.
    conn.execute(
        "INSERT INTO message_fts(message_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .expect("message_fts matches v_message_text");
}

/// A model context as (source entry id, role, sha256 of the message's
/// JSON): piidx's, for `branch` of `loaded`.
pub fn context_digests(
    loaded: &piidx::query::tree::SessionTree,
    branch: &[usize],
) -> Vec<(String, String, String)> {
    use sha2::{Digest, Sha256};
    piidx::query::tree::build_context(loaded, branch)
        .iter()
        .map(|item| {
            let json = serde_json::to_string(&item.message).expect("JSON");
            (
                loaded.nodes[item.node].id.clone(),
                item.message["role"].as_str().unwrap_or("?").to_owned(),
                format!("{:x}", Sha256::digest(json.as_bytes())),
            )
        })
        .collect()
}

/// The same, from a generator's expected `messages` (`entryId`, `role`,
/// `message_sha256`, as Pi's code computed them).
pub fn expected_context(messages: &Value) -> Vec<(String, String, String)> {
    messages
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            let field = |key: &str| m[key].as_str().unwrap_or("?").to_owned();
            (field("entryId"), field("role"), field("message_sha256"))
        })
        .collect()
}

/// The index of `env` equals what one fresh sync of its root writes into a
/// database of its own (what any history of syncs of that tree must end
/// in); `what` names the history in the message.
pub fn assert_same_as_fresh_sync(env: &Env, what: &str) {
    let fresh = Env::new();
    let root = env.root.to_string_lossy().into_owned();
    let out = fresh.run(&["sync", "--root", &root, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_dump(&canonical_dump(&env.db), &canonical_dump(&fresh.db), what);
}

/// The usage records of one session file add up to Pi's own totals
/// (`AgentSession.getSessionStats()`: `tokens` and `cost`). Objects piidx
/// recovers from glued lines are left out: Pi's totals never see them.
pub fn assert_totals_are_pis(env: &Env, file: &Path, stats: &Value) {
    let path = file.to_string_lossy().replace('\'', "''");
    let rows = env.sql(&format!(
        "SELECT coalesce(sum(u.input_tokens), 0) AS input,
                coalesce(sum(u.output_tokens), 0) AS output,
                coalesce(sum(u.cache_read_tokens), 0) AS cache_read,
                coalesce(sum(u.cache_write_tokens), 0) AS cache_write,
                coalesce(sum(u.cost_total), 0) AS cost
           FROM files f
           LEFT JOIN entries e ON e.file_id = f.file_id AND e.glued = 0
           LEFT JOIN usage_records u ON u.entry_rowid = e.entry_rowid
          WHERE f.path = '{path}'"
    ));
    let ours = &rows[0];
    let tokens = &stats["tokens"];
    for (column, key) in [
        ("input", "input"),
        ("output", "output"),
        ("cache_read", "cacheRead"),
        ("cache_write", "cacheWrite"),
    ] {
        assert_eq!(ours[column], tokens[key], "{}: {key}", file.display());
    }
    let cost = ours["cost"].as_f64().unwrap_or(0.0);
    let pi = stats["cost"].as_f64().unwrap_or(0.0);
    assert!(
        (cost - pi).abs() < 1e-9,
        "{}: cost {cost} against Pi's {pi}",
        file.display()
    );
}

/// Two canonical dumps are equal; if not, the first rows only each has.
pub fn assert_same_dump(ours: &[String], fresh: &[String], what: &str) {
    if ours != fresh {
        let only = |a: &[String], b: &[String]| -> Vec<String> {
            a.iter()
                .filter(|row| !b.contains(row))
                .take(8)
                .cloned()
                .collect()
        };
        panic!(
            "{what} != fresh\nonly {what}: {:#?}\nonly fresh: {:#?}",
            only(ours, fresh),
            only(fresh, ours)
        );
    }
}
