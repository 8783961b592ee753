//! The "SQLite ceiling" for a piidx build: how fast can bare FTS5 ingest exactly
//! the text piidx indexed, with nothing else going on (no JSON parsing, no file
//! reading, no metadata tables)?
//!
//! ```text
//! cargo build --release --example fts_ceiling
//! target/release/examples/fts_ceiling --from PIIDX_DB --out NEW_DB [--keep]
//! ```
//!
//! 1. (untimed) read every FTS document from the piidx database
//!    (`SELECT chunk_id, body FROM fts_content ORDER BY chunk_id`) into a
//!    length-prefixed spill file next to NEW_DB;
//! 2. (timed) create NEW_DB with the same FTS5 table and insert all rows in
//!    transactions of ~32 MiB through one cached prepared statement.
//!
//! Prints one JSON object: `{"rows":..,"bytes":..,"seconds":..,"mb_per_s":..}`
//! (`bytes` = total UTF-8 bytes of the document bodies; MB = 10^6 bytes).
//! NEW_DB (and its -wal/-shm) is deleted at start; it is kept at the end only
//! with `--keep`.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::{Connection, OpenFlags, params, types::ValueRef};

// ---- adjust these if piidx's schema names change -----------------------------
/// Table or view in the piidx DB that holds one row per FTS document.
const SRC_TABLE: &str = "fts_content";
/// Its integer id column (becomes the rowid in the ceiling table).
const SRC_ID_COL: &str = "chunk_id";
/// Its text column.
const SRC_BODY_COL: &str = "body";
/// Name of the FTS5 table created in NEW_DB.
const DST_TABLE: &str = "fts";
/// Tokenizer; keep identical to piidx's.
const DST_TOKENIZE: &str = "unicode61 remove_diacritics 2";
/// Commit every this many body bytes.
const TXN_BYTES: u64 = 32 << 20;
/// Pragmas applied to NEW_DB before the timed part.
const DST_PRAGMAS: &[&str] = &["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"];
// ------------------------------------------------------------------------------

struct Options {
    keep: bool,
    /// Number of database files built at once, one thread each; row `id`
    /// goes to shard `id % shards` (piidx's own rule).
    shards: usize,
    /// `content=''` (piidx's shards, layout 3) instead of a
    /// table that stores its own copy of the text.
    contentless: bool,
    /// FTS5 `hashsize` in bytes (FTS5's default is 1 MB).
    hashsize: Option<u64>,
}

fn usage() -> ! {
    eprintln!(
        "usage: fts_ceiling --from PIIDX_DB --out NEW_DB [--shards N] [--contentless] [--hashsize BYTES] [--keep]"
    );
    std::process::exit(2);
}

fn remove_db(p: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        let _ = fs::remove_file(PathBuf::from(s));
    }
}

fn main() -> anyhow::Result<()> {
    let mut from: Option<PathBuf> = None;
    let mut out: Option<PathBuf> = None;
    let mut opts = Options {
        keep: false,
        shards: 1,
        contentless: false,
        hashsize: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--from" => from = Some(args.next().unwrap_or_else(|| usage()).into()),
            "--out" => out = Some(args.next().unwrap_or_else(|| usage()).into()),
            "--keep" => opts.keep = true,
            "--contentless" => opts.contentless = true,
            "--shards" => {
                opts.shards = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage())
            }
            "--hashsize" => {
                opts.hashsize = Some(
                    args.next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| usage()),
                )
            }
            _ => usage(),
        }
    }
    let (from, out) = match (from, out) {
        (Some(f), Some(o)) => (f, o),
        _ => usage(),
    };

    // ---- 1. extract (untimed) ----
    let mut spill_path = out.as_os_str().to_owned();
    spill_path.push(".spill");
    let spill_path = PathBuf::from(spill_path);
    let (rows, bytes) = {
        let src = Connection::open_with_flags(&from, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        // Shared texts may be stored deflated (schema 17): the views read
        // them with the function piidx registers.
        piidx::store::register_functions(&src)?;
        let shared: bool = src.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE name = 'v_shared_texts'",
            [],
            |row| row.get(0),
        )?;
        // The rows the shards hold: each chunk that is its own row, and each
        // shared text's rows once (schema 17 shares tool output too).
        let sql = if shared {
            format!(
                "SELECT f.{SRC_ID_COL}, f.{SRC_BODY_COL} FROM {SRC_TABLE} f
                   JOIN chunks c ON c.chunk_id = f.{SRC_ID_COL} WHERE c.fts_rowid IS NULL
                 UNION ALL
                 SELECT sc.fts_rowid,
                        CAST(substr(CAST(CASE WHEN sc.inner_path = '$' THEN st.text
                                              ELSE json_extract(st.text, sc.inner_path) END AS BLOB),
                                    sc.start + 1, sc.len) AS TEXT)
                   FROM shared_chunks sc JOIN v_shared_texts st ON st.text_id = sc.text_id
                 ORDER BY 1"
            )
        } else {
            format!("SELECT {SRC_ID_COL}, {SRC_BODY_COL} FROM {SRC_TABLE} ORDER BY {SRC_ID_COL}")
        };
        let mut stmt = src.prepare(&sql)?;
        let mut q = stmt.query([])?;
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&spill_path)?);
        let (mut rows, mut bytes) = (0u64, 0u64);
        while let Some(r) = q.next()? {
            let id: i64 = r.get(0)?;
            let body: &[u8] = match r.get_ref(1)? {
                ValueRef::Text(t) | ValueRef::Blob(t) => t,
                _ => b"",
            };
            w.write_all(&id.to_le_bytes())?;
            w.write_all(&(body.len() as u64).to_le_bytes())?;
            w.write_all(body)?;
            rows += 1;
            bytes += body.len() as u64;
        }
        w.flush()?;
        (rows, bytes)
    };

    // ---- 2. build (timed) ----
    let shard_paths: Vec<PathBuf> = (0..opts.shards)
        .map(|k| shard_path(&out, k, opts.shards))
        .collect();
    for p in &shard_paths {
        remove_db(p);
    }
    let t0 = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = shard_paths
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let spill_path = &spill_path;
                let opts = &opts;
                scope.spawn(move || build_shard(spill_path, p, k as i64, rows, opts))
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("shard thread panicked"))??;
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let _ = fs::remove_file(&spill_path);
    if !opts.keep {
        for p in &shard_paths {
            remove_db(p);
        }
    }
    let mbps = if secs > 0.0 {
        bytes as f64 / 1e6 / secs
    } else {
        0.0
    };
    println!(
        "{}",
        serde_json::json!({
            "rows": rows,
            "bytes": bytes,
            "seconds": (secs * 1000.0).round() / 1000.0,
            "mb_per_s": (mbps * 10.0).round() / 10.0,
        })
    );
    Ok(())
}

/// `NEW_DB` itself for one shard, `NEW_DB.K` for shard K of several.
fn shard_path(out: &Path, k: usize, shards: usize) -> PathBuf {
    if shards == 1 {
        return out.to_owned();
    }
    let mut name = out.as_os_str().to_owned();
    name.push(format!(".{k}"));
    PathBuf::from(name)
}

/// Inserts the spilled rows with `id % shards == shard` into a new FTS5
/// database at `path`, committing every `TXN_BYTES` of text.
fn build_shard(
    spill_path: &Path,
    path: &Path,
    shard: i64,
    rows: u64,
    opts: &Options,
) -> anyhow::Result<()> {
    let mut rd = BufReader::with_capacity(8 << 20, File::open(spill_path)?);
    let mut db = Connection::open(path)?;
    for p in DST_PRAGMAS {
        // journal_mode returns a row; execute_batch works for both kinds.
        db.execute_batch(p)?;
    }
    let content = if opts.contentless { ", content=''" } else { "" };
    db.execute_batch(&format!(
        "CREATE VIRTUAL TABLE {DST_TABLE} USING fts5(body, tokenize='{DST_TOKENIZE}'{content})"
    ))?;
    if let Some(size) = opts.hashsize {
        db.execute(
            &format!("INSERT INTO {DST_TABLE}({DST_TABLE}, rank) VALUES ('hashsize', ?1)"),
            [size as i64],
        )?;
    }
    let insert_sql = format!("INSERT INTO {DST_TABLE}(rowid, body) VALUES (?1, ?2)");
    let shards = opts.shards as i64;
    let mut buf: Vec<u8> = Vec::new();
    let mut hdr = [0u8; 16];
    let mut done = 0u64;
    while done < rows {
        let tx = db.transaction()?;
        {
            let mut stmt = tx.prepare_cached(&insert_sql)?;
            let mut in_txn = 0u64;
            while done < rows && in_txn < TXN_BYTES {
                rd.read_exact(&mut hdr)?;
                let id = i64::from_le_bytes(hdr[..8].try_into()?);
                let len = u64::from_le_bytes(hdr[8..].try_into()?) as usize;
                buf.resize(len, 0);
                rd.read_exact(&mut buf)?;
                done += 1;
                if id.rem_euclid(shards) != shard {
                    continue;
                }
                // Bodies came out of SQLite as TEXT, so they are valid UTF-8 in practice.
                let s = std::str::from_utf8(&buf).unwrap_or("");
                stmt.execute(params![id, s])?;
                in_txn += len as u64;
            }
        }
        tx.commit()?;
    }
    Ok(())
}
