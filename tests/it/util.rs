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

    /// Runs `piidx --db <db> ARGS`.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_piidx"))
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .env_remove("PIIDX_DB")
            .env("HOME", self.dir.path())
            .output()
            .expect("run piidx")
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

pub fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk fixtures");
        let rel = entry.path().strip_prefix(from).expect("prefix");
        let dest = to.join(rel);
        if entry.file_type().is_dir() {
            fs::create_dir_all(&dest).expect("mkdir");
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
