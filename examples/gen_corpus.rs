//! Synthetic Pi coding-agent session corpus for piidx benchmarks.
//!
//! ```text
//! cargo run --release --example gen_corpus -- --out DIR --size 1GB [--sessions N] [--seed S] [--no-registry] [--system-prompts]
//! ```
//!
//! Writes `DIR/--home-user-<project>--/<ISO-ts-with-dashes>_<uuid>.jsonl` (20–60 projects).
//! Output is a function of (`--seed`, `--size`, `--sessions`, code pool). The code pool is the
//! embedded snippets plus, unless `--no-registry`, source files from `~/.cargo/registry/src`
//! (picked from the sorted path list, so a given registry gives the same corpus every time).
//!
//! Content model (see /work/shared/spec/pi-session-format.md):
//! * v3 sessions: header, model_change, thinking_level_change, then user / assistant /
//!   toolResult messages (thinking + signature, text, toolCall blocks, usage with cost),
//!   compactions, branches (+ branch_summary), labels, session_info, occasional mid-session
//!   model changes, subagent tool results with nested child transcripts.
//! * ~3 % legacy v1 sessions (no version, no ids, `firstKeptEntryIndex`).
//! * ~4 % forks: a new file whose header has `parentSession` and which copies the
//!   entries of the previous session verbatim before continuing.
//! * tool outputs 0.2–40 KB (log-normal), ≈0.3 % of tool results 1–4 MB; ~35 % of
//!   tool output is high-entropy log text; inline base64 PNG-ish images (50 KB–2.5 MB)
//!   steered to ~22 % of all bytes.
//! * with `--system-prompts`, every v3 session starts with a Pi 1.x system message (sections
//!   and tool list, 20-60 KB), repeated across sessions of a prompt version and project.
//!
//! Only std + serde_json (for nothing but the final summary) are used.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

// ------------------------------------------------------------------------------------------
// PRNG (splitmix64)
// ------------------------------------------------------------------------------------------

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((self.next() >> 32) * n) >> 32
    }
    #[inline]
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    #[inline]
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    #[inline]
    fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-12);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    /// Log-normal with the given median, clamped to [lo, hi].
    fn lognormal(&mut self, median: f64, sigma: f64, lo: f64, hi: f64) -> usize {
        (median * (sigma * self.normal()).exp()).clamp(lo, hi) as usize
    }
    /// Log-uniform in [lo, hi].
    fn loguniform(&mut self, lo: f64, hi: f64) -> usize {
        (lo * (hi / lo).powf(self.f64())) as usize
    }
}

// ------------------------------------------------------------------------------------------
// Embedded text
// ------------------------------------------------------------------------------------------

const ENGLISH: &str = "The session manager keeps every entry in an append-only file, so the indexer only has to read the new bytes at the end. \
When the user asks to fix the failing test, the agent first reads the file, then runs the test suite and looks at the error output. \
I think the problem is that the parser assumes every line is complete, but a crash can leave a torn line at the end of the file. \
Let me check how the configuration is loaded before we change anything, because the defaults are set in two different places. \
This is a good point to write a small regression test that reproduces the bug with a minimal input. \
The build is green again; the remaining warning comes from an unused import in the benchmark module. \
We should keep the public API stable and move the helper into a private module instead of exporting it. \
Please review the diff and tell me whether the naming makes sense to you before I commit it. \
The error message says the file was not found, which usually means the working directory is different from what we expect. \
Can you summarize what changed in this branch compared to main, and list the files that were modified? \
Performance looks fine for small inputs, but with a few gigabytes of logs the memory usage grows linearly with the number of sessions. \
Next, update the documentation so that it explains how the cache is invalidated when a file is rewritten in place. \
It seems the timeout is too short on slower machines; the request is retried three times and then the whole job fails. \
I renamed the struct and updated every call site, and the compiler is happy now. \
The migration rewrites the whole file, so any offsets stored before the migration are no longer valid. ";

const WORDS: &[&str] = &[
    "the",
    "the",
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "to",
    "of",
    "in",
    "on",
    "for",
    "with",
    "from",
    "by",
    "is",
    "are",
    "was",
    "be",
    "it",
    "this",
    "that",
    "we",
    "you",
    "I",
    "should",
    "can",
    "will",
    "not",
    "file",
    "files",
    "error",
    "errors",
    "test",
    "tests",
    "function",
    "module",
    "crate",
    "package",
    "index",
    "database",
    "query",
    "session",
    "sessions",
    "entry",
    "entries",
    "line",
    "lines",
    "parser",
    "config",
    "build",
    "release",
    "debug",
    "value",
    "type",
    "struct",
    "field",
    "method",
    "return",
    "result",
    "option",
    "string",
    "bytes",
    "buffer",
    "cache",
    "memory",
    "thread",
    "lock",
    "async",
    "await",
    "future",
    "stream",
    "request",
    "response",
    "server",
    "client",
    "handler",
    "router",
    "token",
    "tokens",
    "search",
    "sync",
    "append",
    "offset",
    "schema",
    "table",
    "column",
    "row",
    "commit",
    "branch",
    "merge",
    "diff",
    "patch",
    "review",
    "fix",
    "bug",
    "issue",
    "feature",
    "refactor",
    "rename",
    "update",
    "remove",
    "add",
    "check",
    "run",
    "read",
    "write",
    "open",
    "close",
    "path",
    "directory",
    "output",
    "input",
    "timeout",
    "retry",
    "performance",
    "benchmark",
    "latency",
    "throughput",
    "slow",
    "fast",
    "correct",
    "wrong",
    "missing",
    "unexpected",
    "deserialize",
    "serialize",
    "serde_json",
    "tokio",
    "rusqlite",
    "walkdir",
    "compile",
    "warning",
    "panic",
    "unwrap",
    "closure",
    "iterator",
    "vector",
    "hashmap",
    "trait",
    "impl",
    "generic",
    "lifetime",
    "borrow",
    "reference",
    "clone",
    "because",
    "however",
    "therefore",
    "instead",
    "actually",
    "probably",
    "maybe",
    "first",
    "then",
    "finally",
    "now",
    "again",
    "still",
    "already",
    "only",
    "also",
    "just",
    "every",
    "each",
    "some",
    "all",
    "none",
    "both",
    "other",
    "works",
    "fails",
    "looks",
    "seems",
    "means",
    "needs",
    "makes",
    "uses",
    "keeps",
    "shows",
    "gives",
    "takes",
    "small",
    "large",
    "new",
    "old",
    "same",
    "different",
    "simple",
    "clear",
    "safe",
    "whole",
    "empty",
    "valid",
    "user",
    "agent",
    "model",
    "tool",
    "call",
    "message",
    "thinking",
    "summary",
    "context",
    "prompt",
    "workflow",
];

const RUST_SNIPPETS: &str = r#"use std::collections::HashMap;
use std::path::{Path, PathBuf};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionHeader {
    pub id: String,
    pub timestamp: String,
    pub cwd: String,
    #[serde(default)]
    pub version: Option<u32>,
    #[serde(rename = "parentSession")]
    pub parent_session: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let root = PathBuf::from(args.get(1).map(String::as_str).unwrap_or("."));
    let mut counts: HashMap<String, usize> = HashMap::new();
    for entry in walkdir::WalkDir::new(&root) {
        let entry = entry?;
        if entry.path().extension().and_then(|e| e.to_str()) == Some("jsonl") {
            let text = std::fs::read_to_string(entry.path())?;
            for line in text.lines() {
                let v: serde_json::Value = match serde_json::from_str(line) {
                    Ok(v) => v,
                    Err(e) => { eprintln!("skip bad line: {e}"); continue; }
                };
                let ty = v.get("type").and_then(|t| t.as_str()).unwrap_or("?");
                *counts.entry(ty.to_string()).or_default() += 1;
            }
        }
    }
    println!("{}", serde_json::to_string_pretty(&counts)?);
    Ok(())
}

impl Index {
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        let conn = rusqlite::Connection::open(path)?;
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")?;
        Ok(Self { conn })
    }

    pub fn search(&self, query: &str, limit: usize) -> rusqlite::Result<Vec<Hit>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT rowid, snippet(fts, 0, '[', ']', '…', 12) FROM fts WHERE fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![query, limit as i64], |r| {
            Ok(Hit { rowid: r.get(0)?, snippet: r.get(1)? })
        })?;
        rows.collect()
    }
}

fn deserialize_entry<'de, D>(deserializer: D) -> Result<Entry, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let raw = serde_json::Value::deserialize(deserializer)?;
    Entry::try_from(raw).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_torn_tail() {
        let input = b"{\"type\":\"session\",\"id\":\"x\"}\n{\"type\":\"mess";
        let (entries, end) = parse_complete_lines(input);
        assert_eq!(entries.len(), 1);
        assert_eq!(end, 28);
    }
}

pub fn parse_complete_lines(buf: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut out = Vec::new();
    let mut start = 0;
    while let Some(pos) = memchr::memchr(b'\n', &buf[start..]) {
        out.push(&buf[start..start + pos]);
        start += pos + 1;
    }
    (out, start)
}
"#;

const TS_SNIPPETS: &str = r#"import { readFileSync, existsSync, appendFileSync } from "node:fs";
import { join, dirname } from "node:path";
import type { AgentMessage, SessionEntry } from "./types.js";

export interface SessionInfo {
	path: string;
	id: string;
	cwd: string;
	name?: string;
	created: Date;
	modified: Date;
	messageCount: number;
	firstMessage: string;
}

export function parseSessionEntries(content: string): SessionEntry[] {
	const entries: SessionEntry[] = [];
	for (const line of content.trim().split("\n")) {
		if (!line.trim()) continue;
		try {
			entries.push(JSON.parse(line) as SessionEntry);
		} catch {
			// skip malformed lines
		}
	}
	return entries;
}

export class SessionManager {
	private byId = new Map<string, SessionEntry>();
	private leafId: string | null = null;

	constructor(private readonly sessionFile: string) {}

	appendMessage(message: AgentMessage): string {
		const entry = { type: "message", id: this.generateId(), parentId: this.leafId, timestamp: new Date().toISOString(), message };
		appendFileSync(this.sessionFile, `${JSON.stringify(entry)}\n`);
		this.byId.set(entry.id, entry as SessionEntry);
		this.leafId = entry.id;
		return entry.id;
	}

	private generateId(): string {
		for (let i = 0; i < 100; i++) {
			const id = crypto.randomUUID().slice(0, 8);
			if (!this.byId.has(id)) return id;
		}
		return crypto.randomUUID();
	}
}

export async function runCommand(cmd: string, cwd: string, timeoutMs = 120_000): Promise<{ stdout: string; code: number }> {
	const { spawn } = await import("node:child_process");
	return new Promise((resolve, reject) => {
		const child = spawn("bash", ["-c", cmd], { cwd });
		let stdout = "";
		const timer = setTimeout(() => { child.kill("SIGTERM"); reject(new Error(`timeout after ${timeoutMs}ms`)); }, timeoutMs);
		child.stdout.on("data", (d) => (stdout += d.toString()));
		child.on("close", (code) => { clearTimeout(timer); resolve({ stdout, code: code ?? 1 }); });
	});
}
"#;

const PROJECT_A: &[&str] = &[
    "api", "web", "core", "data", "auth", "cli", "infra", "ml", "docs", "mobile", "billing",
    "search", "chat", "edge", "sync", "media", "admin", "notify", "geo", "ledger",
];
const PROJECT_B: &[&str] = &[
    "server", "client", "tools", "pipeline", "service", "ui", "lib", "bench", "sdk", "gateway",
    "worker", "app", "kit", "engine", "store",
];
const MODELS: &[(&str, &str, &str)] = &[
    ("anthropic-messages", "anthropic", "claude-sonnet-4-5"),
    ("anthropic-messages", "anthropic", "claude-sonnet-4-5"),
    ("anthropic-messages", "anthropic", "claude-opus-4-5"),
    ("openai-responses", "openai", "gpt-5.1-codex"),
    ("google-generative-ai", "google", "gemini-2.5-pro"),
];
const THINKING: &[&str] = &["off", "minimal", "low", "medium", "high"];
const AGENTS: &[&str] = &["scout", "planner", "reviewer", "worker", "tester"];
const LABELS: &[&str] = &[
    "checkpoint",
    "good state",
    "before refactor",
    "bug repro",
    "todo",
    "important",
];
const LOG_WORDS: &[&str] = &[
    "INFO",
    "DEBUG",
    "WARN",
    "ERROR",
    "request",
    "completed",
    "started",
    "worker",
    "conn",
    "retry",
    "cache",
    "miss",
    "hit",
    "flush",
    "compaction",
    "shard",
    "lease",
    "acquired",
    "released",
    "timeout",
    "status",
    "latency",
];
const EXTS: &[&str] = &[
    "rs", "ts", "md", "toml", "json", "py", "go", "tsx", "yaml", "lock",
];
const RARE_TOKEN: &str = "zyzzyvarium";

// ------------------------------------------------------------------------------------------
// Pools
// ------------------------------------------------------------------------------------------

struct Pools {
    prose: String,
    code: String,
    registry_files: usize,
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 12 {
        return;
    }
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let p = e.path();
        if ft.is_dir() {
            collect_files(&p, out, depth + 1);
        } else if ft.is_file() {
            let ok = matches!(
                p.extension().and_then(|x| x.to_str()),
                Some("rs" | "md" | "ts" | "js" | "toml" | "c" | "h" | "py")
            );
            if ok {
                out.push(p);
            }
        }
    }
}

fn build_pools(rng: &mut Rng, use_registry: bool) -> Pools {
    // Prose: embedded English + random sentences from the vocabulary.
    let mut prose = String::with_capacity(6 << 20);
    let eng: Vec<&str> = ENGLISH.split(". ").collect();
    while prose.len() < (6 << 20) {
        if rng.chance(0.3) {
            prose.push_str(eng[rng.below(eng.len() as u64) as usize]);
            prose.push_str(". ");
        } else {
            let n = rng.range(6, 22);
            for i in 0..n {
                let w = rng.pick(WORDS);
                if i == 0 {
                    let mut c = w.chars();
                    if let Some(f) = c.next() {
                        prose.extend(f.to_uppercase());
                        prose.push_str(c.as_str());
                    }
                } else {
                    prose.push_str(w);
                }
                prose.push(if i + 1 == n { '.' } else { ' ' });
            }
            prose.push(if rng.chance(0.15) { '\n' } else { ' ' });
        }
    }
    // Code: embedded snippets + registry sources (sorted paths, seeded picks, ≤ 24 MB).
    let mut code = String::with_capacity(26 << 20);
    for _ in 0..4 {
        code.push_str(RUST_SNIPPETS);
        code.push_str(TS_SNIPPETS);
    }
    let mut registry_files = 0;
    if use_registry && let Some(home) = std::env::var_os("HOME") {
        let root = Path::new(&home).join(".cargo/registry/src");
        let mut files = Vec::new();
        collect_files(&root, &mut files, 0);
        files.sort();
        let mut idx: Vec<usize> = (0..files.len()).collect();
        // Fisher-Yates with the seeded rng → deterministic for a given registry.
        for i in (1..idx.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            idx.swap(i, j);
        }
        for i in idx {
            if code.len() >= (24 << 20) {
                break;
            }
            let Ok(md) = fs::metadata(&files[i]) else {
                continue;
            };
            if md.len() < 512 || md.len() > 96 * 1024 {
                continue;
            }
            if let Ok(s) = fs::read_to_string(&files[i]) {
                code.push_str(&s);
                if !s.ends_with('\n') {
                    code.push('\n');
                }
                registry_files += 1;
            }
        }
    }
    Pools {
        prose,
        code,
        registry_files,
    }
}

/// A random slice of `pool` of about `len` bytes, starting after a `sep` and on char boundaries.
fn slice<'a>(rng: &mut Rng, pool: &'a str, len: usize, sep: u8) -> &'a str {
    let b = pool.as_bytes();
    let len = len.min(pool.len() / 2).max(1);
    let mut s = rng.below((pool.len() - len) as u64) as usize;
    let lim = (s + 400).min(b.len());
    while s < lim && b[s] != sep {
        s += 1;
    }
    if s < b.len() && b[s] == sep {
        s += 1;
    }
    let mut e = (s + len).min(b.len());
    while !pool.is_char_boundary(s) {
        s += 1;
    }
    while !pool.is_char_boundary(e) {
        e -= 1;
    }
    &pool[s..e.max(s)]
}

// ------------------------------------------------------------------------------------------
// Output helpers
// ------------------------------------------------------------------------------------------

const HEX: &[u8; 16] = b"0123456789abcdef";
const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B62: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn json_string(text: &str) -> String {
    let mut buf = Vec::new();
    push_str_json(&mut buf, text.as_bytes());
    String::from_utf8(buf).unwrap_or_default()
}

fn push_str_json(buf: &mut Vec<u8>, s: &[u8]) {
    buf.push(b'"');
    let mut start = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            b'\r' => b"\\r",
            0..=0x1f => {
                buf.extend_from_slice(&s[start..i]);
                buf.extend_from_slice(b"\\u00");
                buf.push(HEX[(c >> 4) as usize]);
                buf.push(HEX[(c & 15) as usize]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        buf.extend_from_slice(&s[start..i]);
        buf.extend_from_slice(esc);
        start = i + 1;
    }
    buf.extend_from_slice(&s[start..]);
    buf.push(b'"');
}

fn hex_n(rng: &mut Rng, n: usize, out: &mut Vec<u8>) {
    let mut v = 0u64;
    for i in 0..n {
        if i % 16 == 0 {
            v = rng.next();
        }
        out.push(HEX[(v & 15) as usize]);
        v >>= 4;
    }
}

fn uuid(rng: &mut Rng) -> String {
    let mut o = Vec::with_capacity(36);
    hex_n(rng, 8, &mut o);
    o.push(b'-');
    hex_n(rng, 4, &mut o);
    o.extend_from_slice(b"-4");
    hex_n(rng, 3, &mut o);
    o.push(b'-');
    o.push(b"89ab"[rng.below(4) as usize]);
    hex_n(rng, 3, &mut o);
    o.push(b'-');
    hex_n(rng, 12, &mut o);
    String::from_utf8(o).unwrap()
}

fn b64_random(rng: &mut Rng, raw_len: usize, prefix: &[u8], out: &mut Vec<u8>) {
    // Encode prefix + random bytes; raw_len includes the prefix.
    let mut raw = Vec::with_capacity(raw_len + 8);
    raw.extend_from_slice(prefix);
    while raw.len() < raw_len {
        raw.extend_from_slice(&rng.next().to_le_bytes());
    }
    raw.truncate(raw_len.max(prefix.len()));
    out.reserve(raw.len() / 3 * 4 + 4);
    let mut ch = raw.chunks_exact(3);
    for c in &mut ch {
        let n = (c[0] as u32) << 16 | (c[1] as u32) << 8 | c[2] as u32;
        out.extend_from_slice(&[
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            B64[(n >> 6) as usize & 63],
            B64[n as usize & 63],
        ]);
    }
    let r = ch.remainder();
    if !r.is_empty() {
        let n = (r[0] as u32) << 16 | (*r.get(1).unwrap_or(&0) as u32) << 8;
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if r.len() == 2 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(b'=');
    }
}

/// civil-from-days (Howard Hinnant), epoch ms → ISO-8601 with millis and Z.
fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86400);
    let sod = secs.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

// ------------------------------------------------------------------------------------------
// Generator
// ------------------------------------------------------------------------------------------

struct Stats {
    files: u64,
    bytes: u64,
    lines: u64,
    img_bytes: u64,
    big_results: u64,
    tool_results: u64,
    v1: u64,
    forks: u64,
    entries: u64,
}

struct Gen<'p> {
    rng: Rng,
    pools: &'p Pools,
    stats: Stats,
    img_target: f64,
}

/// State of one session being written.
struct Sess {
    buf: Vec<u8>,
    v1: bool,
    now: i64,
    ids: Vec<u32>,
    ids_set: std::collections::HashSet<u32>,
    msg_ids: Vec<u32>,
    leaf: Option<u32>,
    lines: u64,
    model: usize,
}

impl Sess {
    fn new(v1: bool, now: i64, model: usize) -> Self {
        Sess {
            buf: Vec::with_capacity(1 << 20),
            v1,
            now,
            ids: Vec::new(),
            ids_set: Default::default(),
            msg_ids: Vec::new(),
            leaf: None,
            lines: 0,
            model,
        }
    }
}

fn push_id(buf: &mut Vec<u8>, id: u32) {
    buf.push(b'"');
    for i in (0..8).rev() {
        buf.push(HEX[((id >> (i * 4)) & 15) as usize]);
    }
    buf.push(b'"');
}

impl<'p> Gen<'p> {
    fn tick(&mut self, s: &mut Sess, lo: u64, hi: u64) {
        s.now += self.rng.range(lo, hi) as i64;
    }

    /// `{"type":T,"id":..,"parentId":..,"timestamp":..` — caller continues with `,...}` and calls `end`.
    fn begin(&mut self, s: &mut Sess, ty: &str) -> u32 {
        self.tick(s, 200, 4000);
        s.buf.extend_from_slice(b"{\"type\":\"");
        s.buf.extend_from_slice(ty.as_bytes());
        s.buf.push(b'"');
        let mut id = 0;
        if !s.v1 {
            loop {
                id = self.rng.next() as u32;
                if s.ids_set.insert(id) {
                    break;
                }
            }
            s.buf.extend_from_slice(b",\"id\":");
            push_id(&mut s.buf, id);
            s.buf.extend_from_slice(b",\"parentId\":");
            match s.leaf {
                Some(p) => push_id(&mut s.buf, p),
                None => s.buf.extend_from_slice(b"null"),
            }
            s.ids.push(id);
            s.leaf = Some(id);
        }
        s.buf.extend_from_slice(b",\"timestamp\":\"");
        s.buf.extend_from_slice(iso(s.now).as_bytes());
        s.buf.push(b'"');
        id
    }

    fn end(&mut self, s: &mut Sess) {
        s.buf.extend_from_slice(b"}\n");
        s.lines += 1;
    }

    fn prose(&mut self, len: usize) -> String {
        let mut t = slice(&mut self.rng, &self.pools.prose, len, b' ').to_string();
        if self.rng.chance(0.002) {
            t.push(' ');
            t.push_str(RARE_TOKEN);
        }
        t
    }

    fn code(&mut self, len: usize) -> &'p str {
        slice(&mut self.rng, &self.pools.code, len, b'\n')
    }

    fn path(&mut self) -> String {
        let dirs = [
            "src",
            "src/core",
            "src/cli",
            "tests",
            "docs",
            "packages/agent/src",
            "crates/index/src",
            "lib",
        ];
        let d = self.rng.pick(&dirs);
        let w = self.rng.pick(WORDS).replace(' ', "_");
        let w2 = self.rng.pick(WORDS);
        let e = self.rng.pick(EXTS);
        format!("{d}/{w}_{w2}.{e}")
    }

    /// High-entropy log text of about `len` bytes.
    fn log_text(&mut self, len: usize, s_now: i64) -> Vec<u8> {
        let mut o = Vec::with_capacity(len + 200);
        let mut t = s_now - 3_600_000;
        while o.len() < len {
            t += self.rng.range(1, 5000) as i64;
            match self.rng.below(6) {
                0 | 1 => {
                    o.extend_from_slice(iso(t).as_bytes());
                    o.push(b' ');
                    o.extend_from_slice(self.rng.pick(LOG_WORDS).as_bytes());
                    o.extend_from_slice(format!(" [worker-{}] ", self.rng.below(16)).as_bytes());
                    o.extend_from_slice(self.rng.pick(LOG_WORDS).as_bytes());
                    o.extend_from_slice(b" id=");
                    o.extend_from_slice(uuid(&mut self.rng).as_bytes());
                    o.extend_from_slice(
                        format!(
                            " took={}ms status={} path=/api/v1/{}/{}\n",
                            self.rng.below(3000),
                            [200, 200, 201, 404, 500][self.rng.below(5) as usize],
                            self.rng.pick(WORDS),
                            self.rng.below(1_000_000)
                        )
                        .as_bytes(),
                    );
                }
                2 => {
                    let sz = self.rng.loguniform(10.0, 5e7);
                    let p = self.path();
                    o.extend_from_slice(
                        format!(
                            "-rw-r--r--  1 user user {sz:>10} Mar {:>2} {:02}:{:02} {p}\n",
                            self.rng.range(1, 28),
                            self.rng.below(24),
                            self.rng.below(60)
                        )
                        .as_bytes(),
                    );
                }
                3 => {
                    o.extend_from_slice(b"commit ");
                    hex_n(&mut self.rng, 40, &mut o);
                    o.extend_from_slice(b"\nAuthor: dev <dev@example.com>\n    ");
                    let n = self.rng.range(20, 70) as usize;
                    let m = self.prose(n);
                    o.extend_from_slice(m.as_bytes());
                    o.push(b'\n');
                }
                4 => {
                    hex_n(&mut self.rng, 64, &mut o);
                    o.extend_from_slice(b"  ");
                    let p = self.path();
                    o.extend_from_slice(p.as_bytes());
                    o.push(b'\n');
                }
                _ => {
                    let w1 = self.rng.pick(WORDS);
                    let w2 = self.rng.pick(WORDS);
                    let r = if self.rng.chance(0.9) { "ok" } else { "FAILED" };
                    o.extend_from_slice(
                        format!(
                            "test {w1}::tests::{w2}_{:x} ... {r}\n",
                            self.rng.next() & 0xffffff
                        )
                        .as_bytes(),
                    );
                }
            }
        }
        o.truncate(len.max(1));
        while std::str::from_utf8(&o).is_err() {
            o.pop();
        }
        o
    }

    fn usage(&mut self, s: &mut Sess, with_total: bool) {
        let input = self.rng.loguniform(50.0, 60000.0) as u64;
        let output = self.rng.loguniform(10.0, 8000.0) as u64;
        let cr = if self.rng.chance(0.8) {
            self.rng.loguniform(1000.0, 180000.0) as u64
        } else {
            0
        };
        let cw = if self.rng.chance(0.5) {
            self.rng.loguniform(100.0, 20000.0) as u64
        } else {
            0
        };
        let (ci, co, ccr, ccw) = (
            input as f64 * 3e-6,
            output as f64 * 15e-6,
            cr as f64 * 0.3e-6,
            cw as f64 * 3.75e-6,
        );
        let total = if with_total {
            format!(",\"totalTokens\":{}", input + output + cr + cw)
        } else {
            String::new()
        };
        s.buf.extend_from_slice(
            format!(
                "\"usage\":{{\"input\":{input},\"output\":{output},\"cacheRead\":{cr},\"cacheWrite\":{cw}{total},\"cost\":{{\"input\":{ci},\"output\":{co},\"cacheRead\":{ccr},\"cacheWrite\":{ccw},\"total\":{}}}}}",
                ci + co + ccr + ccw
            )
            .as_bytes(),
        );
    }

    fn want_image(&mut self, p: f64) -> bool {
        let cur = self.stats.img_bytes as f64;
        let tot = (self.stats.bytes + 1) as f64;
        cur < self.img_target * tot && self.rng.chance(p)
    }

    fn image_block(&mut self, s: &mut Sess) {
        let raw = self.rng.loguniform(37_000.0, 1_850_000.0);
        const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x05\x00\x00\x00\x03\x20\x08\x06\x00\x00\x00";
        s.buf.extend_from_slice(b"{\"type\":\"image\",\"data\":\"");
        let before = s.buf.len();
        b64_random(&mut self.rng, raw, PNG, &mut s.buf);
        self.stats.img_bytes += (s.buf.len() - before) as u64;
        s.buf.extend_from_slice(b"\",\"mimeType\":\"image/png\"}");
    }

    /// Writes a `message` object body (without the entry wrapper): user.
    fn user_msg(&mut self, s: &mut Sess, allow_image: bool) {
        let len = self.rng.lognormal(160.0, 1.2, 8.0, 12000.0);
        let mut text = self.prose(len);
        if self.rng.chance(0.15) {
            text.push_str("\n\n```\n");
            let n = self.rng.lognormal(600.0, 1.0, 50.0, 8000.0);
            text.push_str(self.code(n));
            text.push_str("\n```");
        }
        s.buf
            .extend_from_slice(b"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":");
        push_str_json(&mut s.buf, text.as_bytes());
        s.buf.push(b'}');
        if allow_image && self.want_image(0.02) {
            s.buf.push(b',');
            self.image_block(s);
        }
        s.buf
            .extend_from_slice(format!("],\"timestamp\":{}}}", s.now).as_bytes());
    }

    /// Assistant message; returns the tool calls it made as (call id, tool name).
    fn assistant_msg(&mut self, s: &mut Sess, ncalls: usize) -> Vec<(String, &'static str)> {
        let mut calls = Vec::new();
        s.buf
            .extend_from_slice(b"{\"role\":\"assistant\",\"content\":[");
        let mut first = true;
        let (api, provider, model) = MODELS[s.model];
        if provider != "openai" && self.rng.chance(0.6) {
            let n = self.rng.lognormal(400.0, 1.0, 20.0, 12000.0);
            let t = self.prose(n);
            s.buf
                .extend_from_slice(b"{\"type\":\"thinking\",\"thinking\":");
            push_str_json(&mut s.buf, t.as_bytes());
            s.buf.extend_from_slice(b",\"thinkingSignature\":\"");
            let sig = self.rng.range(200, 1400) as usize;
            b64_random(&mut self.rng, sig, b"", &mut s.buf);
            s.buf.extend_from_slice(b"\"}");
            first = false;
        }
        if ncalls == 0 || self.rng.chance(0.6) {
            if !first {
                s.buf.push(b',');
            }
            let n = self.rng.lognormal(300.0, 1.1, 10.0, 10000.0);
            let mut t = self.prose(n);
            if self.rng.chance(0.2) {
                t.push_str("\n\n```rust\n");
                let n = self.rng.lognormal(800.0, 0.9, 50.0, 8000.0);
                t.push_str(self.code(n));
                t.push_str("\n```\n");
            }
            s.buf.extend_from_slice(b"{\"type\":\"text\",\"text\":");
            push_str_json(&mut s.buf, t.as_bytes());
            s.buf.push(b'}');
            first = false;
        }
        for _ in 0..ncalls {
            if !first {
                s.buf.push(b',');
            }
            first = false;
            let mut id = String::from("toolu_01");
            for _ in 0..22 {
                id.push(B62[self.rng.below(62) as usize] as char);
            }
            let r = self.rng.below(1000);
            let name: &'static str = match r {
                0..=379 => "bash",
                380..=679 => "read",
                680..=829 => "edit",
                830..=889 => "write",
                890..=979 => "grep",
                _ => "subagent",
            };
            s.buf.extend_from_slice(b"{\"type\":\"toolCall\",\"id\":\"");
            s.buf.extend_from_slice(id.as_bytes());
            s.buf.extend_from_slice(b"\",\"name\":\"");
            s.buf.extend_from_slice(name.as_bytes());
            s.buf.extend_from_slice(b"\",\"arguments\":{");
            match name {
                "bash" => {
                    let cmds = [
                        "cargo test",
                        "cargo build --release",
                        "git status",
                        "ls -la",
                        "rg -n",
                        "npm run check",
                        "git log --oneline -20",
                        "cat",
                    ];
                    let c = format!(
                        "cd /home/user/proj && {} {}",
                        self.rng.pick(&cmds),
                        self.path()
                    );
                    s.buf.extend_from_slice(b"\"command\":");
                    push_str_json(&mut s.buf, c.as_bytes());
                }
                "read" | "grep" => {
                    let p = self.path();
                    s.buf.extend_from_slice(b"\"path\":");
                    push_str_json(&mut s.buf, p.as_bytes());
                    if name == "grep" {
                        let w = self.rng.pick(WORDS);
                        s.buf.extend_from_slice(b",\"pattern\":");
                        push_str_json(&mut s.buf, w.as_bytes());
                    }
                }
                "edit" | "write" => {
                    let p = self.path();
                    s.buf.extend_from_slice(b"\"path\":");
                    push_str_json(&mut s.buf, p.as_bytes());
                    if name == "edit" {
                        let n = self.rng.lognormal(300.0, 1.0, 20.0, 6000.0);
                        let old = self.code(n);
                        let n = self.rng.lognormal(300.0, 1.0, 20.0, 6000.0);
                        let new = self.code(n);
                        s.buf.extend_from_slice(b",\"oldText\":");
                        push_str_json(&mut s.buf, old.as_bytes());
                        s.buf.extend_from_slice(b",\"newText\":");
                        push_str_json(&mut s.buf, new.as_bytes());
                    } else {
                        let n = self.rng.lognormal(2500.0, 1.0, 100.0, 30000.0);
                        let c = self.code(n);
                        s.buf.extend_from_slice(b",\"content\":");
                        push_str_json(&mut s.buf, c.as_bytes());
                    }
                }
                _ => {
                    let a = self.rng.pick(AGENTS);
                    let n = self.rng.lognormal(200.0, 0.8, 30.0, 2000.0);
                    let t = self.prose(n);
                    s.buf.extend_from_slice(b"\"agent\":");
                    push_str_json(&mut s.buf, a.as_bytes());
                    s.buf.extend_from_slice(b",\"task\":");
                    push_str_json(&mut s.buf, t.as_bytes());
                }
            }
            s.buf.extend_from_slice(b"}}");
            calls.push((id, name));
        }
        let stop = if ncalls > 0 {
            "toolUse"
        } else if self.rng.chance(0.02) {
            "aborted"
        } else {
            "stop"
        };
        s.buf.extend_from_slice(
            format!("],\"api\":\"{api}\",\"provider\":\"{provider}\",\"model\":\"{model}\",")
                .as_bytes(),
        );
        let v1 = s.v1;
        self.usage(s, !v1);
        s.buf.extend_from_slice(
            format!(",\"stopReason\":\"{stop}\",\"timestamp\":{}}}", s.now).as_bytes(),
        );
        calls
    }

    /// Tool output text of a plausible size and kind.
    fn tool_output(&mut self, s_now: i64, name: &str) -> Vec<u8> {
        self.stats.tool_results += 1;
        let big = self.rng.chance(0.003);
        let len = if big {
            self.stats.big_results += 1;
            self.rng.range(1_000_000, 4_000_000) as usize
        } else {
            match name {
                "edit" | "write" => self.rng.range(40, 200) as usize,
                _ => self.rng.lognormal(1800.0, 1.25, 200.0, 40_000.0),
            }
        };
        if name == "edit" || name == "write" {
            return format!(
                "Successfully wrote {} bytes to {}",
                self.rng.below(40000),
                self.path()
            )
            .into_bytes();
        }
        let kind = self.rng.f64();
        if kind < 0.35 || (name == "bash" && kind < 0.6) {
            self.log_text(len, s_now)
        } else if kind < 0.85 || name == "read" {
            self.code(len).as_bytes().to_vec()
        } else {
            self.prose(len).into_bytes()
        }
    }

    fn tool_result_msg(&mut self, s: &mut Sess, call_id: &str, name: &str) {
        s.buf
            .extend_from_slice(b"{\"role\":\"toolResult\",\"toolCallId\":\"");
        s.buf.extend_from_slice(call_id.as_bytes());
        s.buf.extend_from_slice(b"\",\"toolName\":\"");
        s.buf.extend_from_slice(name.as_bytes());
        s.buf.extend_from_slice(b"\",\"content\":[");
        if name == "read" && self.want_image(0.025) {
            s.buf.extend_from_slice(
                b"{\"type\":\"text\",\"text\":\"Read image file [image/png]\"},",
            );
            self.image_block(s);
            s.buf.extend_from_slice(
                format!("],\"isError\":false,\"timestamp\":{}}}", s.now).as_bytes(),
            );
            return;
        }
        if name == "subagent" {
            let n = self.rng.lognormal(600.0, 1.0, 50.0, 6000.0);
            let t = self.prose(n);
            s.buf.extend_from_slice(b"{\"type\":\"text\",\"text\":");
            push_str_json(&mut s.buf, t.as_bytes());
            s.buf.extend_from_slice(b"}],\"details\":{\"mode\":\"");
            let mode = *self.rng.pick(&["single", "single", "parallel", "chain"]);
            s.buf.extend_from_slice(mode.as_bytes());
            s.buf.extend_from_slice(
                b"\",\"agentScope\":\"user\",\"projectAgentsDir\":null,\"results\":[",
            );
            let nres = if mode == "single" {
                1
            } else {
                self.rng.range(2, 4)
            };
            for r in 0..nres {
                if r > 0 {
                    s.buf.push(b',');
                }
                let agent = self.rng.pick(AGENTS);
                let n = self.rng.lognormal(200.0, 0.8, 30.0, 2000.0);
                let task = self.prose(n);
                s.buf.extend_from_slice(b"{\"agent\":\"");
                s.buf.extend_from_slice(agent.as_bytes());
                s.buf
                    .extend_from_slice(b"\",\"agentSource\":\"user\",\"task\":");
                push_str_json(&mut s.buf, task.as_bytes());
                s.buf.extend_from_slice(b",\"exitCode\":0,\"messages\":[");
                // child transcript: user, then assistant/toolResult pairs, final assistant
                let saved_v1 = s.v1;
                s.v1 = false;
                self.user_msg(s, false);
                let turns = self.rng.range(1, 6);
                for _ in 0..turns {
                    s.buf.push(b',');
                    let calls = self.assistant_msg(s, 1);
                    for (cid, cname) in calls {
                        let cname = if cname == "subagent" { "bash" } else { cname };
                        s.buf.push(b',');
                        self.tool_result_msg(s, &cid, cname);
                    }
                }
                s.buf.push(b',');
                self.assistant_msg(s, 0);
                s.v1 = saved_v1;
                let (_, _, model) = MODELS[s.model];
                s.buf.extend_from_slice(
                    format!(
                        "],\"stderr\":\"\",\"usage\":{{\"input\":{},\"output\":{},\"cacheRead\":{},\"cacheWrite\":0,\"cost\":{},\"contextTokens\":{},\"turns\":{}}},\"model\":\"{model}\",\"stopReason\":\"stop\"}}",
                        self.rng.below(90000), self.rng.below(9000), self.rng.below(200000),
                        self.rng.below(2000) as f64 / 1000.0, self.rng.below(150000), turns + 1
                    )
                    .as_bytes(),
                );
            }
            s.buf.extend_from_slice(
                format!("]}},\"isError\":false,\"timestamp\":{}}}", s.now).as_bytes(),
            );
            return;
        }
        let out = self.tool_output(s.now, name);
        s.buf.extend_from_slice(b"{\"type\":\"text\",\"text\":");
        push_str_json(&mut s.buf, &out);
        let is_err = self.rng.chance(0.05);
        s.buf.extend_from_slice(
            format!("}}],\"isError\":{is_err},\"timestamp\":{}}}", s.now).as_bytes(),
        );
    }

    fn message_entry(&mut self, s: &mut Sess, f: impl FnOnce(&mut Self, &mut Sess)) {
        let id = self.begin(s, "message");
        s.buf.extend_from_slice(b",\"message\":");
        f(self, s);
        self.end(s);
        if !s.v1 {
            s.msg_ids.push(id);
        }
    }

    /// One user turn: user message, tool loop, final answer.
    fn turn(&mut self, s: &mut Sess) {
        self.message_entry(s, |g, s| g.user_msg(s, true));
        let steps = self.rng.loguniform(1.0, 14.0);
        for _ in 0..steps {
            self.tick(s, 1000, 30000);
            let n = if self.rng.chance(0.8) {
                1
            } else {
                self.rng.range(2, 3) as usize
            };
            let mut calls = Vec::new();
            self.message_entry(s, |g, s| calls = g.assistant_msg(s, n));
            for (cid, name) in calls {
                self.tick(s, 100, 20000);
                self.message_entry(s, |g, s| g.tool_result_msg(s, &cid, name));
            }
        }
        self.message_entry(s, |g, s| {
            g.assistant_msg(s, 0);
        });
    }

    fn header(&mut self, s: &mut Sess, id: &str, cwd: &str, parent: Option<&str>) {
        let ts = iso(s.now);
        if s.v1 {
            let (_, provider, model) = MODELS[s.model];
            s.buf.extend_from_slice(
                format!(
                    "{{\"type\":\"session\",\"id\":\"{id}\",\"timestamp\":\"{ts}\",\"cwd\":\"{cwd}\",\"provider\":\"{provider}\",\"modelId\":\"{model}\",\"thinkingLevel\":\"off\"}}\n"
                )
                .as_bytes(),
            );
        } else {
            s.buf.extend_from_slice(format!("{{\"type\":\"session\",\"version\":3,\"id\":\"{id}\",\"timestamp\":\"{ts}\",\"cwd\":\"{cwd}\"").as_bytes());
            if let Some(p) = parent {
                s.buf.extend_from_slice(b",\"parentSession\":");
                push_str_json(&mut s.buf, p.as_bytes());
            }
            s.buf.extend_from_slice(b"}\n");
        }
        s.lines += 1;
    }

    fn model_change(&mut self, s: &mut Sess) {
        let (_, provider, model) = MODELS[s.model];
        self.begin(s, "model_change");
        s.buf.extend_from_slice(
            format!(",\"provider\":\"{provider}\",\"modelId\":\"{model}\"").as_bytes(),
        );
        self.end(s);
    }

    /// A Pi 1.x system message (prompt sections and the tool list), as the
    /// session's first message: the sections shared by every session of one
    /// prompt version, a project context file per project, the tool list of
    /// the version. 20-60 KB, as Pi 1.5 writes them. Its text comes from its
    /// own generator seeded by (version, project), so sessions repeat it.
    fn system_prompt(&mut self, s: &mut Sess, project: usize) {
        let version = self.rng.below(3) as usize;
        let mut text_rng = Rng::new(0x0051_57e3 ^ version as u64);
        let prose = |rng: &mut Rng, len: usize| slice(rng, &self.pools.prose, len, b' ').to_owned();
        let mut sections: Vec<(&str, String)> = vec![
            ("preamble", prose(&mut text_rng, 400)),
            (
                "tools",
                format!("<tools>\n{}\n</tools>", prose(&mut text_rng, 1500)),
            ),
            (
                "rules",
                format!("<rules>\n{}\n</rules>", prose(&mut text_rng, 1800)),
            ),
            (
                "docs",
                format!("<docs>\n{}\n</docs>", prose(&mut text_rng, 1200)),
            ),
            (
                "skills",
                format!("<skills>\n{}\n</skills>", prose(&mut text_rng, 2500)),
            ),
        ];
        let tools: Vec<String> = (0..10)
            .map(|_| {
                format!(
                    "{{\"name\":\"{}\",\"description\":{},\"parameters\":{{\"type\":\"object\",\"properties\":{{\"path\":{{\"type\":\"string\",\"description\":{}}},\"content\":{{\"type\":\"string\",\"description\":{}}}}},\"required\":[\"path\"]}}}}",
                    ["read", "bash", "edit", "write", "grep", "find", "ls", "subagent"]
                        [text_rng.below(8) as usize],
                    json_string(&prose(&mut text_rng, 600)),
                    json_string(&prose(&mut text_rng, 150)),
                    json_string(&prose(&mut text_rng, 150)),
                )
            })
            .collect();
        let mut project_rng = Rng::new(0x00a9_e775 ^ project as u64);
        let context_len = project_rng.range(4_000, 35_000) as usize;
        sections.push((
            "project_context",
            format!(
                "<project_context>\n{}\n</project_context>",
                prose(&mut project_rng, context_len)
            ),
        ));
        self.begin(s, "message");
        s.buf.extend_from_slice(
            b",\"message\":{\"role\":\"system\",\"content\":\"\",\"sections\":{",
        );
        for (index, (name, text)) in sections.iter().enumerate() {
            if index > 0 {
                s.buf.push(b',');
            }
            s.buf.extend_from_slice(format!("\"{name}\":").as_bytes());
            push_str_json(&mut s.buf, text.as_bytes());
        }
        s.buf.extend_from_slice(
            format!(
                "}},\"timestamp\":{},\"toolsAdded\":[{}]}}",
                s.now,
                tools.join(",")
            )
            .as_bytes(),
        );
        self.end(s);
    }

    fn thinking_change(&mut self, s: &mut Sess) {
        let t = self.rng.pick(THINKING);
        self.begin(s, "thinking_level_change");
        s.buf
            .extend_from_slice(format!(",\"thinkingLevel\":\"{t}\"").as_bytes());
        self.end(s);
    }

    fn compaction(&mut self, s: &mut Sess) {
        let n = self.rng.lognormal(3000.0, 0.6, 500.0, 20000.0);
        let summary = format!(
            "# Context Checkpoint Summary\n\n## Progress\n{}",
            self.prose(n)
        );
        let tokens = self.rng.range(80_000, 190_000);
        if s.v1 {
            let idx = (s.lines.saturating_sub(self.rng.range(5, 40))).max(1);
            self.begin(s, "compaction");
            s.buf.extend_from_slice(b",\"summary\":");
            push_str_json(&mut s.buf, summary.as_bytes());
            s.buf.extend_from_slice(
                format!(",\"firstKeptEntryIndex\":{idx},\"tokensBefore\":{tokens}}}\n").as_bytes(),
            );
            s.lines += 1;
            return;
        }
        let k = s.msg_ids.len();
        let keep = s.msg_ids[k - 1 - (self.rng.below(20.min(k as u64))) as usize];
        self.begin(s, "compaction");
        s.buf.extend_from_slice(b",\"summary\":");
        push_str_json(&mut s.buf, summary.as_bytes());
        s.buf.extend_from_slice(b",\"firstKeptEntryId\":");
        push_id(&mut s.buf, keep);
        s.buf.extend_from_slice(
            format!(",\"tokensBefore\":{tokens},\"details\":{{\"readFiles\":[").as_bytes(),
        );
        for i in 0..self.rng.range(1, 6) {
            if i > 0 {
                s.buf.push(b',');
            }
            let p = self.path();
            push_str_json(&mut s.buf, p.as_bytes());
        }
        s.buf.extend_from_slice(b"],\"modifiedFiles\":[");
        let p = self.path();
        push_str_json(&mut s.buf, p.as_bytes());
        s.buf.extend_from_slice(b"]}");
        self.end(s);
    }

    fn branch(&mut self, s: &mut Sess) {
        let k = s.msg_ids.len();
        let back = s.msg_ids[self.rng.below(k as u64) as usize];
        let old_leaf = s.leaf;
        s.leaf = Some(back);
        if self.rng.chance(0.5) {
            let n = self.rng.lognormal(600.0, 0.8, 80.0, 6000.0);
            let summary = self.prose(n);
            self.begin(s, "branch_summary");
            s.buf.extend_from_slice(b",\"fromId\":");
            match old_leaf {
                Some(l) => push_id(&mut s.buf, l),
                None => s.buf.extend_from_slice(b"\"root\""),
            }
            s.buf.extend_from_slice(b",\"summary\":");
            push_str_json(&mut s.buf, summary.as_bytes());
            self.end(s);
        }
    }

    fn label(&mut self, s: &mut Sess) {
        let target = s.msg_ids[self.rng.below(s.msg_ids.len() as u64) as usize];
        let l = self.rng.pick(LABELS);
        self.begin(s, "label");
        s.buf.extend_from_slice(b",\"targetId\":");
        push_id(&mut s.buf, target);
        s.buf
            .extend_from_slice(format!(",\"label\":\"{l}\"").as_bytes());
        self.end(s);
    }

    fn session_info(&mut self, s: &mut Sess) {
        let n = self.rng.range(15, 60) as usize;
        let name = self.prose(n).replace('\n', " ");
        self.begin(s, "session_info");
        s.buf.extend_from_slice(b",\"name\":");
        push_str_json(&mut s.buf, name.trim().as_bytes());
        self.end(s);
    }

    /// Body of a session until `target_entries` or `byte_budget` is reached.
    fn body(&mut self, s: &mut Sess, target_entries: u64, byte_budget: u64) {
        let start_lines = s.lines;
        let mut named = false;
        while s.lines - start_lines < target_entries && (s.buf.len() as u64) < byte_budget {
            self.tick(s, 5_000, 600_000);
            let can_tree = !s.v1 && s.msg_ids.len() > 6;
            let r = self.rng.f64();
            if can_tree && r < 0.03 {
                self.branch(s);
            } else if can_tree && r < 0.045 {
                self.label(s);
            } else if !s.v1 && !named && r < 0.07 && s.lines > 4 {
                self.session_info(s);
                named = true;
            } else if r < 0.085 {
                s.model = self.rng.below(MODELS.len() as u64) as usize;
                self.model_change(s);
                if self.rng.chance(0.5) {
                    self.thinking_change(s);
                }
            } else if (s.v1 || s.msg_ids.len() > 30) && s.lines > 40 && r < 0.10 {
                self.compaction(s);
            }
            self.turn(s);
        }
    }
}

fn parse_size(s: &str) -> u64 {
    let t = s.trim().to_ascii_uppercase();
    let (num, mul) = if let Some(n) = t.strip_suffix("GB") {
        (n, 1u64 << 30)
    } else if let Some(n) = t.strip_suffix("MB") {
        (n, 1 << 20)
    } else if let Some(n) = t.strip_suffix("KB") {
        (n, 1 << 10)
    } else if let Some(n) = t.strip_suffix('B') {
        (n, 1)
    } else {
        (t.as_str(), 1)
    };
    let v: f64 = num.trim().parse().unwrap_or_else(|_| {
        eprintln!("bad --size {s}");
        std::process::exit(2)
    });
    (v * mul as f64) as u64
}

fn usage() -> ! {
    eprintln!(
        "usage: gen_corpus --out DIR --size 1GB [--sessions N] [--seed S] [--no-registry] [--system-prompts]"
    );
    std::process::exit(2)
}

/// What a fork copies from the previous session: path, body, leaf, ids,
/// message ids, model index, line count.
type ForkSource = (String, Vec<u8>, Option<u32>, Vec<u32>, Vec<u32>, usize, u64);

fn main() -> std::io::Result<()> {
    let mut out: Option<PathBuf> = None;
    let mut size = 100u64 << 20;
    let mut sessions: Option<u64> = None;
    let mut seed = 1u64;
    let mut use_registry = true;
    let mut system_prompts = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--out" => out = Some(val().into()),
            "--size" => size = parse_size(&val()),
            "--sessions" => sessions = Some(val().parse().unwrap_or_else(|_| usage())),
            "--seed" => seed = val().parse().unwrap_or_else(|_| usage()),
            "--no-registry" => use_registry = false,
            "--system-prompts" => system_prompts = true,
            _ => usage(),
        }
    }
    let out = out.unwrap_or_else(|| usage());
    let t0 = Instant::now();
    fs::create_dir_all(&out)?;
    let out_abs = fs::canonicalize(&out)?;

    let mut rng = Rng::new(seed);
    let pools = build_pools(&mut rng.clone(), use_registry);
    rng.next();

    // Projects
    let nproj = rng.range(20, 60) as usize;
    let mut projects: Vec<String> = Vec::new();
    while projects.len() < nproj {
        let mut p = format!("{}-{}", rng.pick(PROJECT_A), rng.pick(PROJECT_B));
        if projects.contains(&p) {
            p = format!("{p}-{}", projects.len());
        }
        projects.push(p);
    }
    for p in &projects {
        fs::create_dir_all(out_abs.join(format!("--home-user-{p}--")))?;
    }

    let mut g = Gen {
        rng,
        pools: &pools,
        stats: Stats {
            files: 0,
            bytes: 0,
            lines: 0,
            img_bytes: 0,
            big_results: 0,
            tool_results: 0,
            v1: 0,
            forks: 0,
            entries: 0,
        },
        img_target: 0.22,
    };
    let mut clock: i64 = 1_767_657_600_000; // 2026-01-06
    // previous session (for forks): (abs path, bytes after header, last entry id, msg ids, model)
    let mut prev: Option<ForkSource> = None;

    // With --sessions N exactly N files are written (sizes steer towards --size); otherwise
    // sessions are generated until --size bytes are reached.
    while match sessions {
        Some(n) => g.stats.files < n,
        None => g.stats.bytes < size,
    } {
        let remaining = size.saturating_sub(g.stats.bytes).max(16 << 10);
        let (target_entries, budget) = match sessions {
            Some(n) => {
                let left = (n - g.stats.files).max(1);
                let f = if left == 1 {
                    1.0
                } else {
                    0.3 + 1.4 * g.rng.f64()
                };
                (
                    u64::MAX,
                    ((remaining as f64 / left as f64) * f).max(1.0) as u64,
                )
            }
            None => {
                // 10..2000 entries, skewed towards short sessions (mean ≈ 200 lines).
                let u = g.rng.f64().powf(1.6);
                ((10.0 * 200f64.powf(u)) as u64, remaining)
            }
        };
        clock += g.rng.range(60_000, 40_000_000) as i64;
        let pi = ((projects.len() as f64) * g.rng.f64().powi(2)) as usize;
        let cwd = format!("/home/user/{}", projects[pi]);
        let id = uuid(&mut g.rng);
        let model = g.rng.below(MODELS.len() as u64) as usize;
        let fork = prev.is_some() && g.rng.chance(0.04);
        let v1 = !fork && g.rng.chance(0.03);
        let mut s = Sess::new(v1, clock, model);
        let fname = format!("{}_{id}.jsonl", iso(clock).replace([':', '.'], "-"));
        let path = out_abs
            .join(format!("--home-user-{}--", projects[pi]))
            .join(&fname);
        if fork {
            let (ppath, pbody, pleaf, pids, pmsg, pmodel, plines) = prev.take().unwrap();
            g.header(&mut s, &id, &cwd, Some(&ppath));
            s.buf.extend_from_slice(&pbody);
            s.lines += plines;
            s.leaf = pleaf;
            s.ids_set.extend(pids.iter().copied());
            s.ids = pids;
            s.msg_ids = pmsg;
            s.model = pmodel;
            let extra = g.rng.range(5, 60);
            // a fork is the copied body plus a few turns; in --sessions mode it counts against the budget
            let cap = if sessions.is_some() {
                budget.max(s.buf.len() as u64 + (16 << 10))
            } else {
                s.buf.len() as u64 + remaining
            };
            g.body(&mut s, extra, cap);
            g.stats.forks += 1;
        } else {
            g.header(&mut s, &id, &cwd, None);
            if !v1 {
                g.model_change(&mut s);
                g.thinking_change(&mut s);
                if system_prompts {
                    g.system_prompt(&mut s, pi);
                }
            } else {
                g.stats.v1 += 1;
            }
            g.body(&mut s, target_entries.max(10), budget);
        }
        fs::File::create(&path)?.write_all(&s.buf)?;
        g.stats.files += 1;
        g.stats.bytes += s.buf.len() as u64;
        g.stats.lines += s.lines;
        g.stats.entries += s.lines - 1;
        if !s.v1 {
            let nl = s.buf.iter().position(|&b| b == b'\n').unwrap() + 1;
            let body = s.buf[nl..].to_vec();
            prev = Some((
                path.to_string_lossy().into_owned(),
                body,
                s.leaf,
                s.ids,
                s.msg_ids,
                s.model,
                s.lines - 1,
            ));
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let st = &g.stats;
    eprintln!(
        "gen_corpus: {} files, {} lines, {:.1} MB in {:.2}s ({:.0} MB/s); images {:.1}%, {} v1, {} forks, {} tool results ({} multi-MB), {} projects, code pool {:.1} MB ({} registry files)",
        st.files,
        st.lines,
        st.bytes as f64 / 1e6,
        secs,
        st.bytes as f64 / 1e6 / secs,
        100.0 * st.img_bytes as f64 / st.bytes.max(1) as f64,
        st.v1,
        st.forks,
        st.tool_results,
        st.big_results,
        projects.len(),
        pools.code.len() as f64 / 1e6,
        pools.registry_files
    );
    println!(
        "{}",
        serde_json::json!({
            "files": st.files, "bytes": st.bytes, "lines": st.lines, "entries": st.entries,
            "image_bytes": st.img_bytes, "v1_files": st.v1, "forks": st.forks, "projects": projects.len(),
            "tool_results": st.tool_results, "multi_mb_tool_results": st.big_results,
            "seed": seed, "seconds": (secs * 100.0).round() / 100.0,
        })
    );
    Ok(())
}
