//! The incremental invariant: whatever happens to the files between syncs,
//! the database ends equal to one fresh sync of the final tree.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::util::{Env, assert_same_dump, canonical_dump, fts_integrity};

/// What can happen to a sessions tree between two syncs.
#[derive(Debug, Clone)]
enum Op {
    Add {
        file: u8,
        entries: u8,
    },
    Append {
        file: u8,
        entries: u8,
    },
    /// Writes the first part of a new line, as Pi does mid-`write`.
    AppendPartial {
        file: u8,
        cut: u8,
    },
    /// Finishes the partial line with its rest and `\n`.
    Complete {
        file: u8,
    },
    /// Rewrites the whole file with new entry ids (Pi's migration on open).
    Rewrite {
        file: u8,
    },
    /// Cuts the file to `keep` lines, or into the middle of the next line.
    Truncate {
        file: u8,
        keep: u8,
        mid_line: bool,
    },
    Delete {
        file: u8,
    },
    /// A new file copying another's entries, with `parentSession`.
    Fork {
        from: u8,
        into: u8,
    },
    Garbage {
        file: u8,
    },
    /// oh-my-pi's rename: its 256-byte title slot (line 1 of files 2 and
    /// 3) rewritten in place, same size.
    Retitle {
        file: u8,
        title: u8,
    },
    Glued {
        file: u8,
    },
    /// oh-my-pi's full output `<k>.bash.log` in an omp session's folder,
    /// written (anew) or, with `gone`, deleted. Its tool results name it
    /// by number (see `Tree::entry`).
    Output {
        file: u8,
        k: u8,
        gone: bool,
    },
    Sync,
    /// A sync killed (SIGKILL) at a deterministic point: after the `n`-th
    /// commit, inside the `n`-th batch's open transaction, or inside the
    /// `n`-th shard transaction. Batches are small, so files span several.
    Crash {
        point: u8,
        n: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let file = 0u8..4;
    prop_oneof![
        (file.clone(), 1u8..10).prop_map(|(file, entries)| Op::Add { file, entries }),
        (file.clone(), 1u8..4).prop_map(|(file, entries)| Op::Append { file, entries }),
        (file.clone(), any::<u8>()).prop_map(|(file, cut)| Op::AppendPartial { file, cut }),
        file.clone().prop_map(|file| Op::Complete { file }),
        file.clone().prop_map(|file| Op::Rewrite { file }),
        (file.clone(), 0u8..6, any::<bool>()).prop_map(|(file, keep, mid_line)| Op::Truncate {
            file,
            keep,
            mid_line
        }),
        file.clone().prop_map(|file| Op::Delete { file }),
        (file.clone(), file.clone()).prop_map(|(from, into)| Op::Fork { from, into }),
        file.clone().prop_map(|file| Op::Garbage { file }),
        file.clone().prop_map(|file| Op::Glued { file }),
        (file.clone(), any::<u8>()).prop_map(|(file, title)| Op::Retitle { file, title }),
        (file.clone(), any::<u8>()).prop_map(|(file, title)| Op::Retitle { file, title }),
        (2u8..4, 0u8..OUTPUTS, any::<bool>()).prop_map(|(file, k, gone)| Op::Output {
            file,
            k,
            gone
        }),
        (2u8..4, 0u8..OUTPUTS, Just(false)).prop_map(|(file, k, gone)| Op::Output {
            file,
            k,
            gone
        }),
        Just(Op::Sync),
        Just(Op::Sync),
        Just(Op::Sync),
        (0u8..3, 1u8..8).prop_map(|(point, n)| Op::Crash { point, n }),
        (0u8..3, 1u8..8).prop_map(|(point, n)| Op::Crash { point, n }),
    ]
}

/// Full outputs an omp session may have: a few, so that several of its
/// tool results name the same one (the first in the file is linked), and
/// some name one that is not there.
const OUTPUTS: u8 = 3;

/// Bytes per batch in a crashing sync: the test's files hold a few hundred
/// bytes per entry, so most span several committed batches.
const CRASH_BATCH_BYTES: &str = "600";

/// The test's own knowledge of each file: enough to write valid lines.
#[derive(Default)]
struct Tree {
    next_id: u64,
    last_id: HashMap<u8, String>,
    partial_rest: HashMap<u8, String>,
    /// Writes so far, for the mtimes (see `age`).
    writes: u64,
}

/// Gives every file an mtime a day in the past that still changes with
/// every write: syncs then trust the stat they recorded, as they do for a
/// real tree, instead of re-checking files modified within the last
/// seconds (which would hide a sync that wrongly calls a file unchanged).
fn age(file: &Path, writes: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400)
        + std::time::Duration::from_secs(writes);
    if let Ok(handle) = fs::File::options().write(true).open(file) {
        handle.set_modified(when).expect("set mtime");
    }
}

impl Tree {
    fn path(root: &Path, file: u8) -> PathBuf {
        root.join(format!("--home-user-p{}--", file % 2))
            .join(format!(
                "2026-01-0{}T00-00-00-000Z_s{file}.jsonl",
                file % 9 + 1
            ))
    }

    fn entry(&mut self, file: u8, salt: u64) -> String {
        self.next_id += 1;
        let id = format!("{:08x}", self.next_id.wrapping_mul(2_654_435_761) ^ salt);
        let parent = self
            .last_id
            .insert(file, id.clone())
            .map_or("null".to_owned(), |parent| format!("\"{parent}\""));
        let n = self.next_id;
        let ts = format!(
            "2026-01-{:02}T{:02}:{:02}:00.000Z",
            n % 28 + 1,
            n % 24,
            n % 60
        );
        match n % 5 {
            // A system message whose sections other files repeat (shared
            // texts: stored and indexed once, dropped with their last user).
            4 => format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"system","content":"","sections":{{"preamble":"{p}","tools":"{t}"}},"timestamp":{ms}}}}}"#,
                p = format!("You are a coding agent, prompt {} ", n % 2).repeat(12),
                t = format!("tool schema {} ", n % 3).repeat(25),
                ms = 1_767_225_600_000 + n * 1000
            ),
            0 => format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"user","content":"word{n} about src/lib.rs","timestamp":{ms}}}}}"#,
                ms = 1_767_225_600_000 + n * 1000
            ),
            1 => format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"think{n}"}},{{"type":"text","text":"reply{n}"}},{{"type":"toolCall","id":"call{n}","name":"bash","arguments":{{"command":"ls {n}"}}}}],"provider":"p","model":"m{m}","usage":{{"input":{n},"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":{t},"cost":{{"total":0.25}}}},"stopReason":"toolUse","timestamp":{ms}}}}}"#,
                m = n % 3,
                t = n + 2,
                ms = 1_767_225_600_000 + n * 1000
            ),
            // omp's results name a full output by number (`Op::Output`).
            2 if Self::is_omp(file) => format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"toolResult","toolCallId":"call{p}","toolName":"bash","content":[{{"type":"text","text":"out{n} [full output: artifact://{k}]"}}],"details":{{"meta":{{"truncation":{{"artifactId":"{k}"}}}}}},"isError":false,"timestamp":{ms}}}}}"#,
                p = n - 1,
                k = n % u64::from(OUTPUTS),
                ms = 1_767_225_600_000 + n * 1000
            ),
            2 => format!(
                r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{ts}","message":{{"role":"toolResult","toolCallId":"call{p}","toolName":"bash","content":[{{"type":"text","text":"out{n}"}},{{"type":"image","data":"aGVsbG8{n}","mimeType":"image/png"}}],"isError":false,"timestamp":{ms}}}}}"#,
                p = n - 1,
                ms = 1_767_225_600_000 + n * 1000
            ),
            _ => format!(
                r#"{{"type":"session_info","id":"{id}","parentId":{parent},"timestamp":"{ts}","name":"name{n}"}}"#
            ),
        }
    }

    /// Files 2 and 3 are oh-my-pi's: a title slot comes before the header.
    fn is_omp(file: u8) -> bool {
        file % 4 >= 2
    }

    /// omp's title slot line, exactly 256 bytes with its `\n`
    /// (`serializeTitleSlot`); an empty title for `title` 0.
    fn title_slot(title: u8) -> String {
        let name = if title == 0 {
            String::new()
        } else {
            format!("title {title}")
        };
        let head = format!(
            r#"{{"type":"title","v":1,"title":"{name}","source":"user","updatedAt":"2026-01-01T00:00:00.000Z","pad":"#
        );
        let pad = " ".repeat(255 - head.len() - 3);
        format!("{head}\"{pad}\"}}\n")
    }

    /// The lines before the first entry: the slot (omp) and the header.
    fn header(file: u8, salt: u64, parent: Option<&Path>) -> String {
        let parent = parent.map_or(String::new(), |path| {
            format!(r#","parentSession":"{}""#, path.display())
        });
        let slot = if Self::is_omp(file) {
            Self::title_slot(salt as u8 | 1)
        } else {
            String::new()
        };
        format!(
            r#"{slot}{{"type":"session","version":3,"id":"sess-{file}-{salt}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/user/p{}"{parent}}}"#,
            file % 2
        )
    }

    fn apply(&mut self, root: &Path, op: &Op, env: &Env) {
        self.change(root, op, env);
        if let Some(file) = op.file() {
            self.writes += 1;
            age(&Self::path(root, file), self.writes);
        }
    }

    fn change(&mut self, root: &Path, op: &Op, env: &Env) {
        match *op {
            Op::Add { file, entries } => {
                let path = Self::path(root, file);
                if path.exists() {
                    return;
                }
                self.last_id.remove(&file);
                self.partial_rest.remove(&file);
                let mut text = Self::header(file, self.next_id, None) + "\n";
                for _ in 0..entries {
                    text += &(self.entry(file, 0) + "\n");
                }
                write_new(&path, &text);
            }
            Op::Append { file, entries } => {
                let mut text = String::new();
                for _ in 0..entries {
                    text += &(self.entry(file, 0) + "\n");
                }
                append(&Self::path(root, file), &text);
            }
            Op::AppendPartial { file, cut } => {
                if self.partial_rest.contains_key(&file) {
                    return;
                }
                let line = self.entry(file, 0);
                let at = (cut as usize % (line.len() - 1)) + 1;
                if append(&Self::path(root, file), &line[..at]) {
                    self.partial_rest.insert(file, line[at..].to_owned() + "\n");
                }
            }
            Op::Complete { file } => {
                if let Some(rest) = self.partial_rest.remove(&file) {
                    append(&Self::path(root, file), &rest);
                }
            }
            Op::Rewrite { file } => {
                let path = Self::path(root, file);
                let Ok(old) = fs::read_to_string(&path) else {
                    return;
                };
                let count = old
                    .lines()
                    .count()
                    .saturating_sub(1 + usize::from(Self::is_omp(file)));
                self.last_id.remove(&file);
                self.partial_rest.remove(&file);
                let mut text = Self::header(file, 7, None) + "\n";
                for _ in 0..count {
                    text += &(self.entry(file, 0xabcd) + "\n");
                }
                fs::write(&path, text).expect("rewrite");
            }
            Op::Truncate {
                file,
                keep,
                mid_line,
            } => {
                let path = Self::path(root, file);
                let Ok(old) = fs::read(&path) else { return };
                let mut end = 0;
                for (index, byte) in old.iter().enumerate() {
                    if *byte == b'\n' {
                        if keep as usize == 0 {
                            break;
                        }
                        end = index + 1;
                        if old[..=index].iter().filter(|b| **b == b'\n').count()
                            == keep as usize + 1
                        {
                            break;
                        }
                    }
                }
                if mid_line && end + 5 < old.len() {
                    end += 5;
                }
                fs::write(&path, &old[..end]).expect("truncate");
                self.partial_rest.remove(&file);
                self.last_id.remove(&file);
            }
            Op::Delete { file } => {
                let _ = fs::remove_file(Self::path(root, file));
                self.partial_rest.remove(&file);
                self.last_id.remove(&file);
            }
            Op::Fork { from, into } => {
                let source = Self::path(root, from);
                let target = Self::path(root, into);
                if from == into || target.exists() {
                    return;
                }
                let Ok(old) = fs::read_to_string(&source) else {
                    return;
                };
                let body: Vec<&str> = old
                    .lines()
                    .skip(1 + usize::from(Self::is_omp(from)))
                    .collect();
                let mut text = Self::header(into, 99, Some(&source)) + "\n";
                for line in body {
                    text += line;
                    text += "\n";
                }
                write_new(&target, &text);
                self.last_id.remove(&into);
                self.partial_rest.remove(&into);
            }
            Op::Garbage { file } => {
                append(&Self::path(root, file), "{\"type\": not json\n");
            }
            Op::Glued { file } => {
                let first = self.entry(file, 1);
                let second = self.entry(file, 2);
                append(&Self::path(root, file), &format!("{first}{second}\n"));
            }
            Op::Retitle { file, title } => {
                let path = Self::path(root, file);
                let Ok(old) = fs::read(&path) else { return };
                if !old.starts_with(br#"{"type":"title""#) || old.len() < 256 || old[255] != b'\n' {
                    return;
                }
                let handle = OpenOptions::new().write(true).open(&path).expect("open");
                std::os::unix::fs::FileExt::write_all_at(
                    &handle,
                    Self::title_slot(title).as_bytes(),
                    0,
                )
                .expect("retitle");
            }
            Op::Output { file, k, gone } => {
                let session = Self::path(root, file);
                let output = session.with_extension("").join(format!("{k}.bash.log"));
                if gone {
                    let _ = fs::remove_file(&output);
                } else {
                    self.writes += 1;
                    write_new(
                        &output,
                        &format!("full output {k}, write {}\n", self.writes),
                    );
                    age(&output, self.writes);
                }
            }
            Op::Sync => {
                env.sync();
            }
            Op::Crash { point, n } => {
                let point = ["commit", "batch", "shard"][point as usize % 3];
                let out = env
                    .command(&["sync", "--quiet", "--root"])
                    .arg(root)
                    .env("PIIDX_TEST_KILL_AT", format!("{point}:{n}"))
                    .env("PIIDX_TEST_BATCH_BYTES", CRASH_BATCH_BYTES)
                    .output()
                    .expect("run sync");
                // Killed, or done before reaching the point.
                assert!(
                    matches!(out.status.code(), None | Some(0 | 1)),
                    "crashing sync failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

impl Op {
    /// The file an operation writes (the target of a fork).
    fn file(&self) -> Option<u8> {
        match *self {
            Op::Add { file, .. }
            | Op::Append { file, .. }
            | Op::AppendPartial { file, .. }
            | Op::Complete { file }
            | Op::Rewrite { file }
            | Op::Truncate { file, .. }
            | Op::Garbage { file }
            | Op::Glued { file }
            | Op::Retitle { file, .. } => Some(file),
            Op::Fork { into, .. } => Some(into),
            Op::Delete { .. } | Op::Output { .. } | Op::Sync | Op::Crash { .. } => None,
        }
    }
}

fn write_new(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

/// Appends to an existing file; false if it does not exist.
fn append(path: &Path, text: &str) -> bool {
    match OpenOptions::new().append(true).open(path) {
        Ok(mut file) => {
            file.write_all(text.as_bytes()).expect("append");
            true
        }
        Err(_) => false,
    }
}

fn check(ops: &[Op]) {
    let env = Env::new();
    let mut tree = Tree::default();
    for op in ops {
        tree.apply(&env.root, op, &env);
    }
    env.sync();
    let fresh = Env::new();
    let fresh_db = fresh.db.clone();
    let root = env.root.to_string_lossy().into_owned();
    let out = fresh.run(&["sync", "--root", &root, "--json"]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "fresh sync failed"
    );
    fts_integrity(&env.db);
    assert_copies_are_current(&env.db);
    assert_same_dump(
        &canonical_dump(&env.db),
        &canonical_dump(&fresh_db),
        "incremental",
    );
}

/// Sorts the rows of one file's session before those of another, the way
/// the kept copy is chosen: oldest session, then path, then position.
const ORDER: &str =
    "(s{a}.created_ms IS NULL, coalesce(s{a}.created_ms, 0), f{a}.path, {a}.entry_rowid)";

/// `copies` as sync keeps it equals what it means, computed from scratch
/// (a subquery per row, not the window sync uses): 0 for a row with an
/// earlier copy, else the number of rows sharing its key.
fn assert_copies_are_current(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("open db");
    piidx::store::register_functions(&conn).expect("sql functions");
    let order = |a: &str| ORDER.replace("{a}", a);
    let joins = |a: &str, table: &str| {
        format!(
            "{table} {a} JOIN files f{a} ON f{a}.file_id = {a}.file_id
             LEFT JOIN sessions s{a} ON s{a}.file_id = {a}.file_id"
        )
    };
    let usage = format!(
        "SELECT count(*) FROM {} WHERE u.copies <>
           CASE WHEN EXISTS (SELECT 1 FROM {} WHERE o.dedupe_key = u.dedupe_key AND {} < {})
                THEN 0
                ELSE (SELECT count(*) FROM usage_records c WHERE c.dedupe_key = u.dedupe_key) END",
        joins("u", "usage_records"),
        joins("o", "usage_records"),
        order("o"),
        order("u"),
    );
    let same_call =
        "o.call_id = u.call_id AND o.name IS u.name AND o.timestamp_ms IS u.timestamp_ms";
    let tools = format!(
        "SELECT count(*) FROM {} WHERE u.copies <>
           CASE WHEN u.call_id IS NULL THEN 1
                WHEN EXISTS (SELECT 1 FROM {} WHERE {same_call} AND {} < {}) THEN 0
                ELSE (SELECT count(*) FROM tool_call_meta o WHERE {same_call}) END",
        joins("u", "tool_call_meta"),
        joins("o", "tool_call_meta"),
        order("o"),
        order("u"),
    );
    for (table, sql) in [("usage_records", usage), ("tool_call_meta", tools)] {
        let wrong: i64 = conn
            .query_row(&sql, [], |row| row.get(0))
            .expect("check copies");
        assert_eq!(wrong, 0, "{table}: rows whose `copies` is not current");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_history_synced_at_any_points_equals_a_fresh_sync(ops in prop::collection::vec(op(), 1..14)) {
        check(&ops);
    }
}

/// The cases that matter most, always run.
#[test]
fn torn_tail_then_completion_is_indexed_once() {
    check(&[
        Op::Add {
            file: 0,
            entries: 2,
        },
        Op::Sync,
        Op::AppendPartial { file: 0, cut: 40 },
        Op::Sync,
        Op::Complete { file: 0 },
        Op::Sync,
        Op::Append {
            file: 0,
            entries: 1,
        },
    ]);
}

#[test]
fn rewrite_with_new_ids_replaces_rows() {
    check(&[
        Op::Add {
            file: 1,
            entries: 4,
        },
        Op::Sync,
        Op::Rewrite { file: 1 },
        Op::Sync,
        Op::Truncate {
            file: 1,
            keep: 2,
            mid_line: true,
        },
        Op::Sync,
        Op::Fork { from: 1, into: 2 },
        Op::Delete { file: 1 },
    ]);
}

/// oh-my-pi's full outputs appear and go between syncs, apart from the
/// sessions that name them, and a session comes to name an output that was
/// there before: a sync links again the outputs of the sessions whose
/// files it changed, outputs included.
#[test]
fn omp_outputs_linked_again_by_session() {
    let output = |file, k, gone| Op::Output { file, k, gone };
    // Entry n is a tool result when n % 5 = 2, naming output n % 3: file 2
    // holds entries 1-9 (results naming 2 and 1), file 3 entries 10-18
    // (naming 0 and 2) and then 19-24 (naming 1).
    check(&[
        Op::Add {
            file: 2,
            entries: 9,
        },
        Op::Add {
            file: 3,
            entries: 9,
        },
        Op::Sync,
        output(2, 2, false),
        output(2, 0, false),
        output(3, 1, false),
        Op::Sync,
        Op::Append {
            file: 3,
            entries: 6,
        },
        Op::Sync,
        output(2, 1, false),
        output(2, 0, true),
    ]);
}

/// oh-my-pi renames: the title slot rewritten in place between syncs, with
/// appends and a full rewrite around it.
#[test]
fn omp_title_slot_rewritten_in_place() {
    check(&[
        Op::Add {
            file: 2,
            entries: 3,
        },
        Op::Sync,
        Op::Retitle { file: 2, title: 9 },
        Op::Sync,
        Op::Append {
            file: 2,
            entries: 2,
        },
        Op::Retitle { file: 2, title: 0 },
        Op::Sync,
        Op::Retitle { file: 2, title: 4 },
        Op::Crash { point: 1, n: 1 },
        Op::Rewrite { file: 2 },
        Op::Sync,
        Op::Retitle { file: 2, title: 5 },
    ]);
}

/// A sync killed inside a file bigger than a batch, then the file grows:
/// the next syncs must finish it, not call it unchanged.
#[test]
fn a_crash_inside_a_multi_batch_file_is_finished_later() {
    check(&[
        Op::Add {
            file: 0,
            entries: 12,
        },
        Op::Crash { point: 0, n: 2 },
        Op::Sync,
        Op::Add {
            file: 1,
            entries: 12,
        },
        Op::Crash { point: 1, n: 3 },
        Op::Append {
            file: 0,
            entries: 2,
        },
        Op::Crash { point: 2, n: 1 },
    ]);
}
