//! The torture tree: every hostile input at once, synced under a memory
//! limit, with every byte accounted for. Large inputs are generated here.
//! `PIIDX_SLOW_TESTS=1` uses the full sizes (a 200 MB line, a 2 GB file,
//! 100,000 files); by default a 48 MB line, a 64 MB file and 2,000 files, so
//! the suite stays within CI's budget on a debug build.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;

use crate::util::Env;

const HEADER: &str = r#"{"type":"session","version":3,"id":"SID","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/tmp"}"#;

fn header(id: &str) -> String {
    HEADER.replace("SID", id)
}

fn user(n: usize) -> String {
    format!(
        r#"{{"type":"message","id":"u{n}","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"line {n} hello"}}}}"#
    )
}

fn slow() -> bool {
    std::env::var("PIIDX_SLOW_TESTS").is_ok_and(|v| v == "1")
}

/// Size of the single huge line, in MiB of base64.
fn huge_mib() -> u64 {
    if slow() { 200 } else { 48 }
}

fn build_tree(root: &Path) {
    let proj = root.join("--tmp-proj--");
    fs::create_dir_all(&proj).expect("mkdir");
    // One huge line: a tool result with a base64 image plus text.
    {
        let mut out =
            BufWriter::new(fs::File::create(proj.join("huge-line.jsonl")).expect("create"));
        writeln!(out, "{}", header("huge")).expect("write");
        write!(out, r#"{{"type":"message","id":"t1","parentId":null,"timestamp":"2025-01-01T00:00:02.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{{"type":"text","text":"a picture"}},{{"type":"image","mimeType":"image/png","data":""#).expect("write");
        let chunk = "QUJDRA==".repeat(1 << 17).replace('=', "A"); // 1 MiB of base64
        for _ in 0..huge_mib() {
            out.write_all(chunk.as_bytes()).expect("write");
        }
        writeln!(out, r#""}}],"isError":false}}}}"#).expect("write");
        writeln!(out, "{}", user(2)).expect("write");
    }
    // A big file of real lines.
    {
        let target: u64 = if slow() { 2 << 30 } else { 64 << 20 };
        let mut out =
            BufWriter::new(fs::File::create(proj.join("big-file.jsonl")).expect("create"));
        writeln!(out, "{}", header("big")).expect("write");
        let pad = "x".repeat(4000);
        let mut written = 0u64;
        let mut n = 0;
        while written < target {
            let line = format!(
                r#"{{"type":"message","id":"m{n}","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{{"role":"user","content":"{pad} {n}"}}}}"#
            );
            writeln!(out, "{line}").expect("write");
            written += line.len() as u64 + 1;
            n += 1;
        }
    }
    // Many tiny files.
    let tiny = root.join("--tmp-tiny--");
    fs::create_dir_all(&tiny).expect("mkdir");
    let count = if slow() { 100_000 } else { 2_000 };
    for i in 0..count {
        fs::write(
            tiny.join(format!("t{i}.jsonl")),
            format!("{}\n{}\n", header(&format!("tiny{i}")), user(i)),
        )
        .expect("write tiny");
    }
    let odd = root.join("--tmp-odd--");
    fs::create_dir_all(&odd).expect("mkdir");
    let h = header("odd");
    let deep = format!(
        r#"{{"type":"custom","id":"d","x":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "deep.jsonl",
            format!("{h}\n{deep}\n{}\n", user(1)).into_bytes(),
        ),
        (
            "utf8.jsonl",
            [
                format!("{h}\n").into_bytes(),
                user(1).replace("hello", "h\u{0}").into_bytes(),
                b"\n{\"type\":\"x\xff\xfe\"}\n".to_vec(),
            ]
            .concat(),
        ),
        (
            "nul.jsonl",
            [
                format!("{h}\n").into_bytes(),
                vec![0u8; 100],
                b"\n".to_vec(),
                user(1).into_bytes(),
                b"\n".to_vec(),
            ]
            .concat(),
        ),
        ("crlf.jsonl", format!("{h}\r\n{}\r\n", user(1)).into_bytes()),
        (
            "u2028.jsonl",
            format!("{h}\n{}\n", user(1).replace("hello", "a\u{2028}b\u{2029}c")).into_bytes(),
        ),
        (
            "big-header.jsonl",
            format!(
                "{}\n{}\n",
                h.replace(
                    "\"cwd\"",
                    &format!("\"pad\":\"{}\",\"cwd\"", "p".repeat(2 << 20))
                ),
                user(1)
            )
            .into_bytes(),
        ),
        (
            "with space é ☃.jsonl",
            format!("{h}\n{}\n", user(1)).into_bytes(),
        ),
        (
            "--leading-dashes.jsonl",
            format!("{h}\n{}\n", user(1)).into_bytes(),
        ),
        (
            "torn.jsonl",
            format!("{h}\n{}\n{{\"type\":\"mess", user(1)).into_bytes(),
        ),
        (
            "unreadable.jsonl",
            format!("{h}\n{}\n", user(1)).into_bytes(),
        ),
    ];
    for (name, bytes) in cases.drain(..) {
        fs::write(odd.join(name), bytes).expect("write odd");
    }
    // chmod 000: root still reads it (documented); others get a skip reason.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        odd.join("unreadable.jsonl"),
        fs::Permissions::from_mode(0o000),
    )
    .expect("chmod");
    std::os::unix::fs::symlink(odd.join("crlf.jsonl"), odd.join("link.jsonl")).expect("symlink");
    fs::create_dir_all(odd.join("dir.jsonl")).expect("dir named x.jsonl");
    let fifo = odd.join("fifo.jsonl");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    assert!(made, "mkfifo");
}

#[test]
fn torture_tree_syncs_bounded_with_every_byte_accounted() {
    let env = Env::new();
    let started = std::time::Instant::now();
    build_tree(&env.root);
    eprintln!(
        "torture tree generated in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Address-space cap (prlimit --as) plus peak RSS from GNU time.
    let limit_mb: u64 = 1536;
    let time_out = env.dir.path().join("time.txt");
    let root = env.root.to_string_lossy().into_owned();
    let started = std::time::Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M %e")
        .arg("-o")
        .arg(&time_out)
        .arg("prlimit")
        .arg(format!("--as={}", limit_mb << 20))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_piidx"))
        .arg("--db")
        .arg(&env.db)
        .args(["sync", "--root", &root, "--json"])
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("run sync under /usr/bin/time and prlimit");
    let elapsed = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "sync failed ({:?}): {stderr}",
        out.status.code()
    );
    let timing = fs::read_to_string(&time_out).unwrap_or_default();
    // GNU time prefixes "Command exited with non-zero status 1" when sync exits 1.
    let last = timing.lines().last().unwrap_or_default();
    let peak_kb: u64 = last
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    eprintln!(
        "torture sync: peak RSS {} MB, {elapsed:.1} s, limit --as {limit_mb} MB",
        peak_kb / 1024
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json summary");
    eprintln!("summary: {summary}");

    // Nothing aborted: every indexed file's bytes are accounted for.
    crate::sync::assert_lines_accounted(&env);
    // The huge line is under the 256 MiB cap: indexed, its image in blobs.
    assert_eq!(
        env.count("SELECT count(*) FROM entries e JOIN files f USING(file_id) WHERE f.path LIKE '%huge-line.jsonl'"),
        2
    );
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM images WHERE byte_len > {}",
            (huge_mib() << 20) / 2
        )),
        1
    );
    let skipped = env
        .sql("SELECT rel_path, skip_reason FROM files WHERE status = 'skipped' ORDER BY rel_path");
    let names: Vec<&str> = skipped
        .iter()
        .filter_map(|r| r["rel_path"].as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("fifo.jsonl")),
        "{skipped:?}"
    );
    assert!(
        names.iter().any(|n| n.ends_with("dir.jsonl")),
        "{skipped:?}"
    );
    for name in [
        "deep.jsonl",
        "utf8.jsonl",
        "nul.jsonl",
        "crlf.jsonl",
        "u2028.jsonl",
        "big-header.jsonl",
        "with space é ☃.jsonl",
        "--leading-dashes.jsonl",
        "link.jsonl",
        "torn.jsonl",
    ] {
        let n = env.count(&format!(
            "SELECT count(*) FROM files WHERE status = 'indexed' AND rel_path LIKE '%/{}'",
            name.replace('\'', "''")
        ));
        assert_eq!(n, 1, "{name} indexed");
    }
    let tiny = if slow() { 100_000 } else { 2_000 };
    assert_eq!(
        env.count("SELECT count(*) FROM sessions WHERE session_id LIKE 'tiny%'"),
        tiny
    );
    assert!(
        peak_kb > 0 && peak_kb < limit_mb * 1024,
        "peak RSS {peak_kb} kB"
    );

    // Over the cap: a lower --max-line-bytes records the line, keeps nothing else.
    let capped = env.run(&[
        "sync",
        "--root",
        &root,
        "--full",
        "--max-line-bytes",
        &((huge_mib() << 20) / 2).to_string(),
        "--json",
    ]);
    assert!(
        matches!(capped.status.code(), Some(1)),
        "{}",
        String::from_utf8_lossy(&capped.stderr)
    );
    assert_eq!(
        env.count(&format!(
            "SELECT count(*) FROM parse_errors WHERE byte_len > {} AND reason LIKE '%--max-line-bytes%' AND excerpt IS NULL",
            huge_mib() << 20
        )),
        1
    );
}
