//! Property fuzzing of the line parser, the normalizer and whole-file
//! ingest on arbitrary bytes: nothing panics, and every byte is accounted
//! for — each consumed line is blank, the header, an entry or a recorded
//! error; only a tail after the last `\n` may stay unconsumed (pending).
//! `tests/data/fuzz/` keeps interesting inputs; they are replayed here too.
//! (cargo-fuzz needs nightly, which this machine does not have; proptest
//! runs on stable inside the normal `cargo test`.)

use std::io::Write;
use std::path::Path;

use piidx::ingest::{self, FileStatus, IngestOptions, Start, Target};
use piidx::normalize::{self, EntryContext};
use piidx::parse::{self, ParsedLine};
use proptest::prelude::*;
use serde_json::Value;

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/tmp"}"#;
const USER: &str = r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}}"#;
const ASSISTANT: &str = r#"{"type":"message","id":"b2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],"usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"total":0.1}},"provider":"p","model":"m"}}"#;
const RESULT: &str = r#"{"type":"message","id":"c3","parentId":"b2","timestamp":"2025-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out"}],"isError":false}}"#;
const OTHERS: &[&str] = &[
    r#"{"type":"compaction","id":"d4","parentId":"c3","timestamp":"2025-01-01T00:00:04.000Z","summary":"s","firstKeptEntryId":"a1","tokensBefore":10}"#,
    r#"{"type":"label","id":"e5","parentId":"d4","timestamp":"2025-01-01T00:00:05.000Z","targetId":"a1","label":"x"}"#,
    r#"{"type":"session_info","id":"f6","parentId":"e5","timestamp":"x","name":"n"}"#,
    r#"{"type":"message","timestamp":1,"message":{"role":"bashExecution","command":"ls","output":"o"}}"#,
];

/// Ingests `bytes` as one file and checks the accounting; panics say why.
fn check_accounted(bytes: &[u8], max_line_bytes: usize) {
    let mut file = tempfile::NamedTempFile::new().expect("tempfile");
    file.write_all(bytes).expect("write");
    let target = Target {
        path: file.path().to_owned(),
        root: "/".into(),
        rel_path: "x.jsonl".into(),
        depth: 1,
        listed: true,
        dev: 0,
        ino: 0,
        size: bytes.len() as u64,
        mtime_ns: 0,
        seen_ns: 0,
    };
    let mut covered = Vec::new();
    let mut last = None;
    let mut emit = |batch: ingest::Batch| {
        covered.extend(
            batch
                .entries
                .iter()
                .map(|e| (e.line_no, e.byte_offset, e.byte_len)),
        );
        covered.extend(
            batch
                .errors
                .iter()
                .map(|e| (e.line_no, e.byte_offset, e.byte_len)),
        );
        last = Some((batch.status.clone(), batch.cursor.clone()));
        true
    };
    ingest::ingest(
        &target,
        Start::Scratch,
        IngestOptions {
            max_line_bytes,
            redactor: None,
            deflate: true,
        },
        &mut emit,
    )
    .expect("ingest");
    let (status, cursor) = last.expect("a last batch");
    if let FileStatus::Skipped(reason) = status {
        assert!(!reason.is_empty(), "a skip has a reason");
        return;
    }
    let offset = cursor.offset as usize;
    assert!(offset <= bytes.len());
    assert!(
        !bytes[offset..].contains(&b'\n'),
        "only a tail without newline may be unconsumed (offset {offset} of {})",
        bytes.len()
    );
    let mut start = 0usize;
    let mut header_lines = 0;
    for (index, line) in bytes[..offset].split(|b| *b == b'\n').enumerate() {
        let line_no = index as i64 + 1;
        let here = (line_no, start as i64, line.len() as i64);
        let consumed = start + line.len() <= offset && !(start == offset && line.is_empty());
        if consumed
            && !covered.contains(&here)
            && !matches!(parse::parse_line(line), ParsedLine::Blank)
        {
            header_lines += 1;
            assert!(
                header_lines == 1 && !matches!(parse::parse_line(line), ParsedLine::Invalid(_)),
                "line {line_no} at {start} is neither blank, header, entry nor error"
            );
        }
        start += line.len() + 1;
    }
}

fn piece() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static str> = [HEADER, USER, ASSISTANT, RESULT]
        .into_iter()
        .chain(OTHERS.iter().copied())
        .collect();
    prop_oneof![
        4 => proptest::sample::select(fixed.clone()).prop_map(|s| s.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => (proptest::sample::select(fixed.clone()), 0usize..200)
            .prop_map(|(s, cut)| s.as_bytes()[..cut.min(s.len())].to_vec()),
        1 => (proptest::sample::select(fixed), proptest::sample::select(vec!["\r", "\u{2028}", "\0", " ", "\u{feff}"]))
            .prop_map(|(s, extra)| format!("{s}{extra}").into_bytes()),
        1 => (1usize..400).prop_map(|n| format!("{{\"type\":\"x\",\"d\":{}{}}}", "[".repeat(n), "]".repeat(n)).into_bytes()),
    ]
}

fn file_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec((piece(), any::<bool>()), 0..12),
        any::<bool>(),
        proptest::option::of((any::<proptest::sample::Index>(), any::<u8>())),
    )
        .prop_map(|(pieces, header_first, flip)| {
            let mut out = Vec::new();
            if header_first {
                out.extend_from_slice(HEADER.as_bytes());
                out.push(b'\n');
            }
            for (piece, glue) in pieces {
                out.extend(piece);
                if !glue {
                    out.push(b'\n');
                }
            }
            if let (Some((index, byte)), false) = (flip, out.is_empty()) {
                let at = index.index(out.len());
                out[at] = byte;
            }
            out
        })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z\\u{2028}\\u{0}é]{0,8}".prop_map(Value::from),
        proptest::sample::select(vec![
            "message",
            "image",
            "text",
            "toolCall",
            "toolResult",
            "user",
            "assistant",
            "data",
            "content",
            "compaction"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "type",
                        "role",
                        "content",
                        "message",
                        "data",
                        "id",
                        "parentId",
                        "arguments",
                        "usage",
                        "text",
                        "timestamp",
                        "cost",
                        "x"
                    ]),
                    inner
                ),
                0..6
            )
            .prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn parse_line_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let ParsedLine::Objects { objects, .. } = parse::parse_line(&bytes) {
            prop_assert!(objects.iter().all(Value::is_object));
        }
    }

    #[test]
    fn normalize_never_panics(value in json_value(), v1 in any::<bool>()) {
        let mut object = match value {
            Value::Object(map) => map,
            other => [("message".to_owned(), other)].into_iter().collect(),
        };
        object.entry("type").or_insert(Value::from("message"));
        let ctx = EntryContext {
            line_no: 2,
            byte_offset: 10,
            byte_len: 5,
            obj_in_line: 0,
            pi_index: Some(1),
            listed: true,
            legacy_v1: v1,
            previous_entry_id: None,
        };
        let entry = normalize::entry(Value::Object(object), &ctx);
        prop_assert!(!entry.entry_id.is_empty());
    }

    #[test]
    fn ingest_accounts_for_every_byte(bytes in file_bytes(), cap in proptest::sample::select(vec![40usize, 300, 1 << 20])) {
        check_accounted(&bytes, cap);
    }
}

#[test]
fn corpus_replays_with_every_byte_accounted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/data/fuzz") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read corpus file");
        for cap in [64, 1 << 20] {
            check_accounted(&bytes, cap);
        }
        seen += 1;
    }
    assert!(seen >= 10, "corpus has {seen} files");
}
