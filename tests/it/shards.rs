//! The word index's shard files: a shard that is behind, missing or holds
//! rows it should not is repaired by the next sync; changing the shard count
//! re-indexes without changing what search finds, and a stray shard file
//! changes nothing; new shards have 16 KB pages, and older ones keep their
//! 4 KB; long texts are spread over the shards; shards without
//! the row lengths (an earlier piidx's) rank alike and get them from the
//! next sync; a schema-5 database (one FTS table inside the main file) and
//! a schema-6 one (the trigram index still inside it, shards without one)
//! are upgraded in place.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::util::{
    Env, canonical_dump, db_sql, fts_integrity, shard_paths, shard_rows, unspaced, view_sql,
    word_segments,
};

/// `(session_id, entry_id)` of every hit of `query`.
fn hits(env: &Env, query: &str) -> BTreeSet<(String, String)> {
    let out = env.run(&["search", query, "--json", "--limit", "1000"]);
    assert!(
        out.status.success(),
        "search {query}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hits: Vec<Value> = serde_json::from_slice(&out.stdout).expect("search --json");
    hits.iter()
        .map(|hit| {
            (
                hit["session_id"].as_str().unwrap_or_default().to_owned(),
                hit["entry_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

const QUERIES: &[&str] = &[
    "session",
    "function",
    "\"cwd into\"",
    "bench*",
    "the",
    "read",
    "桜餅テスト",
    "read OR function",
    "file OR session",
    "in the",
    "a the",
];

#[test]
fn shards_behind_missing_or_with_extra_rows_are_repaired_by_sync() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let expected: Vec<_> = QUERIES.iter().map(|q| hits(&env, q)).collect();
    assert!(expected.iter().all(|found| !found.is_empty()));
    let shards = shard_paths(&env.db);

    // A missing shard: search says what to do; sync rebuilds it.
    std::fs::remove_file(&shards[0]).expect("remove shard");
    let out = env.run(&["search", "session"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("piidx sync") && stderr.contains(".fts0"),
        "{stderr}"
    );
    env.sync();
    fts_integrity(&env.db);

    // A shard that lost its last commits (a crash between the main commit
    // and the shard's), and a deletion it never applied.
    // (Contentless shards forget a row given the text it was indexed with.)
    let count = shards.len() as i64;
    let lost: Vec<(i64, String)> = shard_rows(&env.db)
        .into_iter()
        .filter(|(id, _)| *id > 20 && id.rem_euclid(count) == 0)
        .collect();
    assert!(!lost.is_empty());
    let shard = rusqlite::Connection::open(&shards[0]).expect("open shard");
    for (id, body) in &lost {
        shard
            .execute(
                "INSERT INTO fts(fts, rowid, body) VALUES ('delete', ?1, ?2)",
                (id, body),
            )
            .expect("delete row");
        if unspaced(body) {
            shard
                .execute(
                    "INSERT INTO fts_trigram(fts_trigram, rowid, body) VALUES ('delete', ?1, ?2)",
                    (id, body),
                )
                .expect("delete trigram row");
        }
    }
    drop(shard);
    db_sql(
        &shards[0],
        "UPDATE shard SET indexed_upto = 20;
         INSERT INTO fts(rowid, body) VALUES (987654360, 'ghostword');",
    );
    db_sql(
        &env.db,
        "INSERT INTO fts_deletes(chunk_id) VALUES (987654360);",
    );
    let summary = env.sync();
    assert_eq!(summary["entries_added"], 0);
    fts_integrity(&env.db);
    assert_eq!(env.count("SELECT count(*) FROM fts_deletes"), 0);
    let now: Vec<_> = QUERIES.iter().map(|q| hits(&env, q)).collect();
    assert_eq!(now, expected);
}

/// `sync --fts-shards <shards>` of `env`'s root, which must succeed and
/// leave that many shard files.
fn sync_with_shards(env: &Env, shards: usize) {
    let root = env.root.to_string_lossy().into_owned();
    let count = shards.to_string();
    let out = env.run(&["sync", "--root", &root, "--fts-shards", &count, "-q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(shard_paths(&env.db).len(), shards);
}

#[test]
fn changing_the_shard_count_reindexes_and_search_finds_the_same() {
    let env = Env::with_fixture("sessions");
    sync_with_shards(&env, 1);
    fts_integrity(&env.db);
    let one: Vec<_> = QUERIES.iter().map(|q| hits(&env, q)).collect();

    sync_with_shards(&env, 3);
    let three = shard_paths(&env.db);
    fts_integrity(&env.db);
    assert_eq!(
        QUERIES.iter().map(|q| hits(&env, q)).collect::<Vec<_>>(),
        one
    );

    // Back to 2: the third file goes; a plain sync keeps the count.
    sync_with_shards(&env, 2);
    assert!(!three[2].exists());
    env.sync();
    assert_eq!(shard_paths(&env.db).len(), 2);
    fts_integrity(&env.db);
    assert_eq!(
        QUERIES.iter().map(|q| hits(&env, q)).collect::<Vec<_>>(),
        one
    );
}

/// bm25 is computed with every shard's statistics together, so a chunk
/// scores the same whichever shard holds it and however many there are:
/// the same hits in the same order with the same scores, with one shard or
/// three. Scored in its own shard, a chunk's score depended on which other
/// chunks the sync had dealt there (by chunk id, in the order the workers
/// finished their files), and the order of near ties changed from one
/// fresh sync of a tree to the next.
#[test]
fn ranking_is_the_same_whichever_shard_holds_a_chunk() {
    let env = Env::with_fixture("sessions");
    sync_with_shards(&env, 1);
    let one = ranked(&env);
    let many_hits = one
        .iter()
        .filter(|hits| hits.matches("\"score\"").count() > 5);
    assert!(many_hits.count() >= 3, "{one:?}");
    for shards in [3, 2] {
        sync_with_shards(&env, shards);
        assert_ranked_alike(&env, &one, &format!("with {shards} shards"));
    }
}

/// A session of long tool outputs, each a shared text cut into several
/// chunks. A chunk of a shared text takes two ids (its own, then its
/// row's), so with ids handed out in turn every row of one output got the
/// same parity: here all of them landed in one shard of two, and a cold
/// sync waited for that shard alone. Rows now go where the text is least.
#[test]
fn long_tool_outputs_are_spread_over_the_shards() {
    let env = Env::new();
    let words: Vec<String> = (0..400).map(|k| format!("word{k}")).collect();
    let mut lines = vec![
        serde_json::json!({"type": "session", "version": 3, "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/proj"}),
    ];
    let mut parent = Value::Null;
    let mut push = |lines: &mut Vec<Value>, message: Value| {
        let id = format!("e{}", lines.len());
        lines.push(
            serde_json::json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z", "message": message}),
        );
        parent = Value::String(id);
    };
    push(
        &mut lines,
        serde_json::json!({"role": "user", "content": "read the files"}),
    );
    for k in 0..8 {
        // Two chunks of the assistant's own (its text and the call) keep
        // the outputs' first ids of one parity.
        push(
            &mut lines,
            serde_json::json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("Reading file {k}.")},
                {"type": "toolCall", "id": format!("c{k}"), "name": "read",
                 "arguments": {"path": format!("src/f{k}.rs")}}]}),
        );
        let output: Vec<&str> = (0..15_000)
            .map(|n| words[(n * 7 + k * 13) % words.len()].as_str())
            .collect();
        push(
            &mut lines,
            serde_json::json!({"role": "toolResult", "toolCallId": format!("c{k}"),
                "toolName": "read", "isError": false,
                "content": [{"type": "text", "text": output.join(" ")}]}),
        );
    }
    let dir = env.root.join("--proj--");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(dir.join("s1.jsonl"), text.join("\n") + "\n").expect("write session");
    sync_with_shards(&env, 2);

    let mut bytes = [0usize; 2];
    for (id, text) in shard_rows(&env.db) {
        bytes[id.rem_euclid(2) as usize] += text.len();
    }
    let chunk = piidx::normalize::CHUNK_BYTES;
    assert!(bytes.iter().sum::<usize>() > 16 * chunk, "{bytes:?}");
    assert!(
        bytes[0].abs_diff(bytes[1]) <= 2 * chunk,
        "text per shard: {bytes:?}"
    );
    fts_integrity(&env.db);
}

/// A shard file beyond the recorded shard count (left by a sync that
/// stopped before removing it, or copied there) changes no hit: search
/// starts scoring the shard files it finds before it has read the count
/// from the index, and drops that work when the two differ.
#[test]
fn a_stray_shard_file_changes_no_hit() {
    let env = Env::with_fixture("sessions");
    sync_with_shards(&env, 1);
    let shards = shard_paths(&env.db);
    let expected: Vec<_> = QUERIES.iter().map(|q| hits(&env, q)).collect();
    // Shard 0's file where shard 1 would be: not shard 1 of anything.
    let mut stray = env.db.as_os_str().to_owned();
    stray.push(".fts1");
    std::fs::copy(&shards[0], &stray).expect("copy shard");
    assert_eq!(
        QUERIES.iter().map(|q| hits(&env, q)).collect::<Vec<_>>(),
        expected
    );
}

/// `PRAGMA page_size` of `shard`, and the `pgsz` both its indexes were
/// given (`None`: none, or not a number; FTS5's default).
fn page_layout(shard: &std::path::Path) -> (i64, [Option<i64>; 2]) {
    let conn = rusqlite::Connection::open(shard).expect("open shard");
    let pgsz = |table: &str| {
        conn.query_row(
            &format!("SELECT v FROM {table}_config WHERE k = 'pgsz'"),
            [],
            |row| row.get(0),
        )
        .ok()
    };
    let page_size = conn
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .expect("page size");
    (page_size, [pgsz("fts"), pgsz("fts_trigram")])
}

/// A new shard has 16 KB pages and FTS5 leaves to match; a shard of an
/// earlier piidx (4 KB pages, FTS5's default leaves) keeps its layout
/// through a sync that deletes rows (its merge counts leaves of its own
/// size, and its copy keeps the page size) and finds what a fresh sync of
/// the same tree finds.
#[test]
fn new_shards_have_16_kb_pages_and_older_shards_keep_theirs() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let shards = shard_paths(&env.db);
    for shard in &shards {
        assert_eq!(
            page_layout(shard),
            (16384, [Some(16338), Some(16338)]),
            "{}",
            shard.display()
        );
        // `fts` is left a value FTS5 ignores (a damaged or hand-edited
        // config): its leaves are the default size all the same.
        db_sql(
            shard,
            "UPDATE fts_config SET v = 'sixteen' WHERE k = 'pgsz';
             DELETE FROM fts_trigram_config WHERE k = 'pgsz';
             PRAGMA page_size = 4096; VACUUM;",
        );
        assert_eq!(page_layout(shard), (4096, [None, None]));
    }

    std::fs::remove_file(env.root.join(LARGE_OUTPUT)).expect("remove session");
    let summary = env.sync();
    assert_eq!(summary["files_removed"], 1, "{summary}");
    for shard in &shards {
        assert_eq!(page_layout(shard), (4096, [None, None]));
        // The purge merged each index whole.
        assert_eq!(word_segments(shard), 1, "{}", shard.display());
    }
    fts_integrity(&env.db);

    let fresh = Env::with_fixture("sessions");
    std::fs::remove_file(fresh.root.join(LARGE_OUTPUT)).expect("remove session");
    fresh.sync();
    for query in QUERIES {
        assert_eq!(hits(&env, query), hits(&fresh, query), "search {query}");
    }
}

/// Shard files of another index (the same sessions, synced elsewhere) are
/// refused, whichever connection reads them: a ranked search reads every
/// shard on readers of their own, which must check what the index's
/// connection checks when it attaches them.
#[test]
fn shards_of_another_index_are_refused() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let other = Env::with_fixture("sessions");
    other.sync();
    let (ours, theirs) = (shard_paths(&env.db), shard_paths(&other.db));
    assert_eq!(ours.len(), theirs.len());
    for query in ["session", "the"] {
        assert!(!hits(&env, query).is_empty());
    }
    // Only the last shard, then every one.
    for swapped in [ours.len() - 1, 0] {
        for k in swapped..ours.len() {
            std::fs::copy(&theirs[k], &ours[k]).expect("copy shard");
        }
        for args in [&["search", "session"][..], &["search", "the", "--raw"]] {
            let out = env.run(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("piidx sync"), "{args:?}: {stderr}");
        }
    }
}

/// `search --json` of each query, scores included.
fn ranked(env: &Env) -> Vec<String> {
    QUERIES
        .iter()
        .map(|query| {
            let out = env.run(&["search", query, "--json", "--limit", "1000"]);
            assert!(out.status.success(), "search {query}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .collect()
}

fn assert_ranked_alike(env: &Env, expected: &[String], when: &str) {
    for ((query, now), before) in QUERIES.iter().zip(ranked(env)).zip(expected) {
        assert!(&now == before, "{when}: search {query} ranks otherwise");
    }
}

#[test]
fn shards_without_row_lengths_rank_alike_and_get_them_from_the_next_sync() {
    let env = Env::with_fixture("sessions");
    env.sync();
    let expected = ranked(&env);
    assert!(expected.iter().all(|hits| hits.contains("\"score\"")));
    let shards = shard_paths(&env.db);

    // A slot that disagrees with FTS5 is a finding, which `--fix` repairs.
    let shard = rusqlite::Connection::open(&shards[0]).expect("open shard");
    let id: i64 = shard
        .query_row("SELECT min(id) FROM fts_docsize", [], |row| row.get(0))
        .expect("a row");
    let (block, slot) = piidx::store::lengths::locate(id, shards.len() as i64);
    shard
        .execute(
            "UPDATE fts_lengths
                SET sizes = CAST(substr(sizes, 1, ?2) || x'ffff' || substr(sizes, ?2 + 3) AS BLOB)
              WHERE block = ?1",
            (block, 2 * slot as i64),
        )
        .expect("change a length");
    drop(shard);
    let out = env.run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor --json");
    let finding = report["findings"]["fts"].as_str().unwrap_or_default();
    assert!(finding.contains("row length(s) of fts differ"), "{report}");
    assert_eq!(env.run(&["doctor", "--fix"]).status.code(), Some(1));
    fts_integrity(&env.db);
    assert_ranked_alike(&env, &expected, "after doctor --fix");

    // Shards of an earlier piidx (layout 4 without the lengths): the same
    // scores, from FTS5's own lookups, until a sync adds them.
    for shard in &shards {
        db_sql(
            shard,
            "DROP TABLE fts_lengths; DROP TABLE fts_trigram_lengths;",
        );
    }
    assert_ranked_alike(&env, &expected, "without the lengths");
    let out = env.run(&["doctor"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a shard without lengths is sound"
    );
    let summary = env.sync();
    assert_eq!(summary["entries_added"], 0);
    fts_integrity(&env.db);
    assert_ranked_alike(&env, &expected, "with the lengths added");
}

/// The fixture session with a tool result of 2 MB.
const LARGE_OUTPUT: &str =
    "--home-user-proj-b--/2026-02-10T14-00-00-000Z_019c47da-1300-74f8-8e3e-8e2ce99f293c.jsonl";

/// What the index of `sessions` answers before an old schema is faked.
struct Before {
    env: Env,
    fresh: Vec<String>,
    hits: Vec<BTreeSet<(String, String)>>,
}

/// The `sessions` tree without its 1.x sessions: their system messages
/// need schema 11's tables, which the fakes of older schemas drop (the
/// schema 9 fake re-indexes, so it keeps them); and without the session
/// whose 2 MB tool output is a deflated shared text (schema 17).
fn synced_sessions() -> Before {
    let env = Env::with_fixture("sessions");
    std::fs::remove_dir_all(env.root.join("--home-user-proj-1x--")).expect("remove 1.x sessions");
    std::fs::remove_file(env.root.join(LARGE_OUTPUT)).expect("remove the large tool output");
    env.sync();
    let fresh = canonical_dump(&env.db);
    let hits = QUERIES.iter().map(|q| hits(&env, q)).collect();
    Before { env, fresh, hits }
}

/// A schema-8 database made from a current one: undoes migrations 0014 to
/// 0009 (see `undo`).
fn schema_8_sql() -> String {
    undo_down_to(8)
}

/// A schema-9 database made from a current one.
fn schema_9_sql() -> String {
    undo_down_to(9)
}

/// SQL that turns a current database into one of schema `version`: each
/// later migration undone, newest first. The data must need none of what
/// they added (`synced_sessions` has no 1.x sessions).
fn undo_down_to(version: usize) -> String {
    (version + 1..=piidx::store::SCHEMA_VERSION as usize)
        .rev()
        .map(undo)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Undoes one migration.
fn undo(migration: usize) -> String {
    let init = include_str!("../../migrations/0001_init.sql");
    let subagents = include_str!("../../migrations/0002_subagents.sql");
    let usage = include_str!("../../migrations/0004_usage.sql");
    let tree = include_str!("../../migrations/0003_tree.sql");
    let shared = include_str!("../../migrations/0011_shared_texts.sql");
    let lean = include_str!("../../migrations/0017_lean.sql");
    let copies = include_str!("../../migrations/0009_copies.sql");
    let exact = include_str!("../../migrations/0018_exact_lines.sql");
    let any_sqlite = include_str!("../../migrations/0015_any_sqlite.sql");
    match migration {
        // omp's background runs and their deliveries (0030_omp_background_runs.sql).
        30 => "DROP TABLE subagent_deliveries;".to_owned(),
        // The port's names (0029_port_names.sql) change rows, not the schema.
        29 => String::new(),
        // omp's first message without user text (0028_omp_first_message.sql).
        28 => "ALTER TABLE sessions DROP COLUMN first_other_text;".to_owned(),
        // The message text computed once (0027_message_text_once.sql).
        27 => format!(
            "DROP VIEW v_message_text; {}",
            view_sql(any_sqlite, "v_message_text")
        ),
        // Path tails kept and indexed (0026_path_tails.sql).
        26 => "DROP INDEX sessions_file_tail; DROP INDEX sessions_unlinked_tail;
               ALTER TABLE sessions DROP COLUMN file_tail;
               ALTER TABLE sessions DROP COLUMN parent_tail;"
            .to_owned(),
        // Linked children indexed (0025_linked_children.sql).
        25 => "DROP INDEX sessions_parent_id;".to_owned(),
        // Unlinked children indexed (0024_unlinked_children.sql).
        24 => "DROP INDEX sessions_unlinked;".to_owned(),
        // Full outputs found by number (0023_tool_outputs_by_id.sql).
        23 => "DROP INDEX subagent_artifacts_output;".to_owned(),
        // Push signatures from indexes alone (0022_push_signatures.sql).
        22 => "DROP INDEX usage_records_file;
               CREATE INDEX usage_records_file ON usage_records(file_id);
               DROP INDEX tool_call_meta_call;
               CREATE INDEX tool_call_meta_call ON tool_call_meta(file_id, call_id);"
            .to_owned(),
        // The core views readable anywhere (0021_views_anywhere.sql): back to
        // 0017's and 0018's inflating ones.
        21 => format!(
            "DROP VIEW tool_calls; DROP VIEW messages; DROP VIEW texts; DROP VIEW v_entries;
             DROP VIEW tool_calls_full; DROP VIEW messages_full; DROP VIEW texts_full;
             DROP VIEW v_entries_full; {} {} {} {}",
            view_sql(lean, "v_entries"),
            view_sql(lean, "texts"),
            view_sql(lean, "messages"),
            view_sql(exact, "tool_calls"),
        ),
        // omp's full tool outputs (0020_tool_outputs.sql).
        20 => "DROP INDEX subagent_artifacts_entry;
               ALTER TABLE subagent_artifacts DROP COLUMN session_path;
               ALTER TABLE subagent_artifacts DROP COLUMN entry_rowid;"
            .to_owned(),
        // Agents (0019_agents.sql).
        19 => "DROP INDEX sessions_agent;
               ALTER TABLE sessions DROP COLUMN agent;
               ALTER TABLE sessions DROP COLUMN title_slot;
               ALTER TABLE sessions DROP COLUMN short_summary;
               ALTER TABLE message_meta DROP COLUMN attribution;"
            .to_owned(),
        // Exact lines, and tool times from the entry's timestamp (back to
        // 0017's and 0009's views).
        18 => format!(
            "DROP TABLE exact_lines; DROP VIEW tool_calls; DROP VIEW v_tool_calls_dedup; {} {}",
            view_sql(lean, "tool_calls"),
            view_sql(copies, "v_tool_calls_dedup"),
        ),
        // Deflated shared texts and the views over them (back to 0011's,
        // 0003's and 0001's).
        17 => format!(
            "DROP VIEW tool_calls; DROP VIEW v_fork_copies; DROP VIEW messages; DROP VIEW texts;
             DROP VIEW fts_content; DROP VIEW v_entries; DROP VIEW v_shared_values;
             DROP VIEW v_shared_texts;
             ALTER TABLE shared_texts DROP COLUMN deflated;
             ALTER TABLE shared_texts DROP COLUMN text_len;
             CREATE INDEX content_blocks_file ON content_blocks(file_id);
             CREATE INDEX entries_file_pi_index ON entries(file_id, pi_index);
             {} {} {} {} {} {}",
            view_sql(shared, "v_shared_values"),
            view_sql(shared, "fts_content"),
            view_sql(shared, "texts"),
            view_sql(shared, "messages"),
            view_sql(tree, "v_fork_copies"),
            view_sql(init, "tool_calls"),
        ),
        // Machines: the index's id and name, root labels, the push record.
        16 => "DELETE FROM meta WHERE key IN ('machine_uid', 'machine_name');
               ALTER TABLE roots DROP COLUMN machine; DROP TABLE push_files;"
            .to_owned(),
        // Search for every SQLite tool: `message_fts` and its views, and
        // `artifact_fts` declared as 0002 did.
        15 => {
            let start = subagents
                .find("CREATE VIRTUAL TABLE artifact_fts")
                .expect("artifact_fts in 0002");
            let len = subagents[start..].find(";\n").expect("end of table") + 1;
            format!(
                "DROP VIEW v_sessions; DROP TABLE message_fts; DROP VIEW v_message_text;
                 DROP TABLE artifact_fts; {}
                 INSERT INTO artifact_fts(artifact_fts) VALUES ('rebuild');",
                &subagents[start..start + len]
            )
        }
        // Redaction's table.
        14 => "DROP TABLE redactions;".to_owned(),
        // The roots table.
        13 => "DROP TABLE roots;".to_owned(),
        // The columns Pi 1.5's subagent runs and usage gave.
        12 => "ALTER TABLE subagent_runs DROP COLUMN termination_signal;
               ALTER TABLE usage_records DROP COLUMN reasoning_tokens;
               ALTER TABLE usage_records DROP COLUMN cache_write_1h_tokens;
               ALTER TABLE usage_records DROP COLUMN cost_from_provider;"
            .to_owned(),
        // Shared texts: their tables, `chunks.fts_rowid`, and the views
        // replaced (back to 0001's and 0002's).
        11 => format!(
            "DROP VIEW fts_rows; DROP VIEW v_shared_values; DROP VIEW fts_content; DROP VIEW texts;
             DROP VIEW messages; DROP TABLE shared_texts; DROP TABLE shared_refs;
             DROP TABLE shared_chunks; DROP INDEX chunks_fts_rowid;
             ALTER TABLE chunks DROP COLUMN fts_rowid;
             {} {} {}",
            view_sql(init, "fts_content"),
            view_sql(init, "texts"),
            view_sql(subagents, "messages"),
        ),
        10 => "ALTER TABLE images DROP COLUMN payload_index;".to_owned(),
        // The `copies` columns, `usage_records.dedupe_key`, their indexes and
        // the views reading them (back to 0004's).
        9 => format!(
            "DROP VIEW v_usage_records; DROP VIEW v_tool_calls_dedup;
             {}\n{}
             DROP INDEX usage_records_dedupe; DROP INDEX tool_call_meta_call_id;
             ALTER TABLE usage_records DROP COLUMN copies;
             ALTER TABLE usage_records DROP COLUMN dedupe_key;
             ALTER TABLE tool_call_meta DROP COLUMN copies;",
            view_sql(usage, "v_usage_records"),
            view_sql(usage, "v_tool_calls_dedup")
        ),
        other => panic!("no undo for migration {other}"),
    }
}

/// An old-schema database is refused by queries until `sync` upgrades it in
/// place: nothing re-read, `gone` tables dropped from the main file, and the
/// same rows and answers as before, with the index migration 0008 adds and
/// the fork copies 0009 counts.
fn assert_upgraded_in_place(before: Before, gone: &str) {
    let Before {
        env,
        mut fresh,
        hits: expected,
    } = before;
    let out = env.run(&["search", "session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `piidx sync` to upgrade"));

    let summary = env.sync();
    assert_eq!(summary["entries_added"], 0);
    assert_eq!(
        env.count("PRAGMA user_version"),
        piidx::store::SCHEMA_VERSION
    );
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM sqlite_master WHERE name IN ({gone})"
        )),
        0
    );
    fts_integrity(&env.db);
    let mut upgraded = canonical_dump(&env.db);
    // `fts_shards` is configuration (a random db_id), not index content;
    // `images.payload_index` is filled by re-indexing, which these fakes
    // (written by the current parser) do not need (see the schema 9 test).
    let kept = |row: &String| !row.starts_with("fts_shards|") && !row.starts_with("images|");
    upgraded.retain(kept);
    fresh.retain(kept);
    assert!(
        upgraded == fresh,
        "the upgraded index differs from a fresh one"
    );
    assert_eq!(
        QUERIES.iter().map(|q| hits(&env, q)).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(
        env.count(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'entries_time'"
        ),
        1
    );
}

#[test]
fn a_schema_5_database_is_upgraded_in_place() {
    let before = synced_sessions();
    let env = &before.env;
    // Schema 5 as 0001-0005 left it: the word index inside the main file.
    for shard in shard_paths(&env.db) {
        std::fs::remove_file(shard).expect("remove shard");
    }
    db_sql(
        &env.db,
        "DROP TABLE fts_shards; DROP TABLE fts_deletes;
         CREATE VIRTUAL TABLE fts USING fts5(body, content = 'fts_content',
           content_rowid = 'chunk_id', tokenize = 'unicode61 remove_diacritics 2');
         INSERT INTO fts(fts) VALUES ('rebuild');
         CREATE VIRTUAL TABLE fts_trigram USING fts5(body, content = 'fts_content',
           content_rowid = 'chunk_id', tokenize = 'trigram');
         INSERT INTO fts_trigram(rowid, body) SELECT chunk_id, body FROM fts_content
          WHERE body GLOB '*[぀-ヿ一-鿿]*';
         DROP INDEX entries_time;
         PRAGMA user_version = 5;",
    );
    db_sql(&env.db, &schema_8_sql());
    assert_upgraded_in_place(before, "'fts', 'fts_trigram'");
}

#[test]
fn a_schema_6_database_is_upgraded_in_place() {
    let before = synced_sessions();
    let env = &before.env;
    // Schema 6: the trigram index inside the main file, version-1 shards
    // holding only the word index.
    db_sql(
        &env.db,
        "CREATE VIRTUAL TABLE fts_trigram USING fts5(body, content = 'fts_content',
           content_rowid = 'chunk_id', tokenize = 'trigram');
         INSERT INTO fts_trigram(rowid, body) SELECT chunk_id, body FROM fts_content
          WHERE body GLOB '*[぀-ヿ一-鿿]*';
         DROP INDEX entries_time;
         PRAGMA user_version = 6;",
    );
    db_sql(&env.db, &schema_8_sql());
    for shard in shard_paths(&env.db) {
        db_sql(&shard, "DROP TABLE fts_trigram; PRAGMA user_version = 1;");
    }
    assert_upgraded_in_place(before, "'fts_trigram'");
}

#[test]
fn a_schema_7_database_is_upgraded_in_place() {
    let before = synced_sessions();
    // Schema 7: no index on entries.timestamp_ms yet.
    db_sql(
        &before.env.db,
        "DROP INDEX entries_time; PRAGMA user_version = 7;",
    );
    db_sql(&before.env.db, &schema_8_sql());
    assert_upgraded_in_place(before, "''");
}

#[test]
fn a_schema_8_database_is_upgraded_in_place() {
    let before = synced_sessions();
    let copies = before
        .env
        .count("SELECT count(*) FROM usage_records WHERE copies = 0");
    assert!(copies > 0, "the fixture has fork copies to fold");
    db_sql(
        &before.env.db,
        &format!("{} PRAGMA user_version = 8;", schema_8_sql()),
    );
    assert_upgraded_in_place(before, "''");
}

/// Schema 9 stored numbers rounded (0.0024720000000000002 as 0.002472) and
/// image payloads without their place; the upgrade re-indexes every file
/// (parser version 3), which gives the exact copy a fresh sync makes.
#[test]
fn a_schema_9_database_is_upgraded_and_re_indexed() {
    let before = synced_sessions();
    let env = &before.env;
    let exact = "SELECT count(*) FROM entries WHERE raw LIKE '%0.018966000000000004%'";
    assert_eq!(
        env.count(exact),
        1,
        "the fixture has a number rounding changes"
    );
    // What schema 9 stored: the float printed back, and `0.00003` as `3e-5`.
    db_sql(
        &env.db,
        &format!(
            "{} UPDATE entries SET raw = replace(replace(raw, '0.018966000000000004', '0.018966'),
                 ':0.00003,', ':3e-5,');
             UPDATE files SET parser_version = 2; PRAGMA user_version = 9;",
            schema_9_sql()
        ),
    );
    let conn = rusqlite::Connection::open(&env.db).expect("open");
    let left: i64 = conn.query_row(exact, [], |row| row.get(0)).expect("count");
    assert_eq!(left, 0, "the fake rounded the number");
    assert_ne!(
        canonical_dump(&env.db),
        before.fresh,
        "the fake changed raw"
    );
    let summary = env.sync();
    assert!(summary["files_indexed"].as_u64() > Some(0), "{summary}");
    let mut upgraded = canonical_dump(&env.db);
    let mut fresh = before.fresh;
    upgraded.retain(|row| !row.starts_with("fts_shards|"));
    fresh.retain(|row| !row.starts_with("fts_shards|"));
    assert!(
        upgraded == fresh,
        "the upgraded index differs from a fresh one"
    );
    fts_integrity(&env.db);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
}

/// Schema 15 kept tool output whole in `entries.raw`; the upgrade to 17
/// re-indexes every file (parser version 6), and tool output is then a
/// deflated shared text: the same index a fresh sync makes, and `export`
/// gives the session file back byte for byte. (The fake of schema 15 is
/// made without the large output, which its tables could not hold; the
/// file arrives with the upgrading sync.)
#[test]
fn a_schema_15_database_is_upgraded_and_re_indexed() {
    let before = synced_sessions();
    let env = &before.env;
    db_sql(
        &env.db,
        &format!(
            "{} UPDATE files SET parser_version = 5; PRAGMA user_version = 15;",
            undo_down_to(15)
        ),
    );
    let out = env.run(&["search", "session"]);
    assert_eq!(out.status.code(), Some(2), "queries refuse schema 15");
    let original = std::fs::read(crate::util::fixtures().join("sessions").join(LARGE_OUTPUT))
        .expect("read the fixture");
    std::fs::write(env.root.join(LARGE_OUTPUT), &original).expect("copy the large output");
    let summary = env.sync();
    assert!(summary["files_indexed"].as_u64() > Some(1), "{summary}");
    assert_eq!(
        env.count("PRAGMA user_version"),
        piidx::store::SCHEMA_VERSION
    );
    assert!(
        env.count("SELECT count(*) FROM shared_texts WHERE deflated IS NOT NULL") > 0,
        "the tool output is a deflated shared text"
    );
    assert_eq!(env.run(&["export", "019c47da"]).stdout, original);
    fts_integrity(&env.db);
    assert_eq!(env.run(&["doctor"]).status.code(), Some(0));
    let upgraded = canonical_dump(&env.db);
    piidx::store::remove_database(&env.db);
    env.sync();
    let fresh = canonical_dump(&env.db);
    let kept = |rows: Vec<String>| -> Vec<String> {
        rows.into_iter()
            .filter(|row| !row.starts_with("fts_shards|"))
            .collect()
    };
    assert!(
        kept(upgraded) == kept(fresh),
        "the upgraded index differs from a fresh one"
    );
}
