//! Images kept outside the session file, found where their agent keeps them.
//!
//! oh-my-pi replaces a large image's base64 with `"blob:sha256:<hex>"` and
//! writes the raw bytes to its content-addressed store `<agent dir>/blobs/
//! <hex>` (omp's `BlobStore`, `getBlobsDir()`: the `sessions` folder's
//! sibling, shared by every session). pi_agent_rust replaces it with
//! `{"$piBlob":"sha256:<hex>","sizeBytes":N,…}` and writes the bytes to
//! `<session file>.blobs/<hex>` (its `session/attachments.rs`), or, for its
//! SQLite sessions, to a row of the same file's `pi_session_blobs` table
//! (`session_sqlite/attachments.rs`; read by `store::port_sqlite`). All
//! store the decoded bytes.
//!
//! The index keeps the reference as written (export gives it back byte for
//! byte) and never a copy of the bytes: `show`, `serve` and `doctor` look
//! them up here when they are asked, so a blob that appears or goes later
//! needs no sync. A reference whose bytes are not there is reported as
//! missing, never an error: by `doctor`, and as a warning by the `sync`
//! that reads its session. A digest is accepted only as 64 hex digits, so a
//! reference can never name a path outside the store.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A reference to an image's bytes outside the session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobRef {
    /// oh-my-pi: `blob:sha256:<hex>`.
    Omp { hex: String },
    /// pi_agent_rust: `{"$piBlob":"sha256:<hex>","sizeBytes":N}`.
    Port {
        hex: String,
        size_bytes: Option<u64>,
    },
}

impl BlobRef {
    pub fn hex(&self) -> &str {
        match self {
            BlobRef::Omp { hex } | BlobRef::Port { hex, .. } => hex,
        }
    }

    /// Where the agent keeps the bytes, in words (`omp's blob store`), for
    /// the session file `session`.
    pub fn store_name(&self, session: &Path) -> &'static str {
        match self {
            BlobRef::Omp { .. } => "omp's blob store",
            BlobRef::Port { .. } if is_sqlite_session(session) => {
                "the session database's pi_session_blobs table"
            }
            BlobRef::Port { .. } => "the session's .blobs/ folder",
        }
    }
}

/// The blob reference of an image block's `data`, if it is one.
pub fn blob_ref(block: &Value) -> Option<BlobRef> {
    match block.get("data")? {
        Value::String(data) => {
            let hex = data.strip_prefix("blob:sha256:")?;
            is_digest(hex).then(|| BlobRef::Omp {
                hex: hex.to_ascii_lowercase(),
            })
        }
        Value::Object(reference) => {
            let digest = reference.get("$piBlob").and_then(Value::as_str)?;
            let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
            is_digest(hex).then(|| BlobRef::Port {
                hex: hex.to_ascii_lowercase(),
                size_bytes: reference.get("sizeBytes").and_then(Value::as_u64),
            })
        }
        _ => None,
    }
}

fn is_digest(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where a referenced image's bytes are, or were looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file holding the bytes, or the first place looked when missing.
    pub path: PathBuf,
    /// Its size; `None` when it is missing.
    pub size: Option<u64>,
}

/// The places the bytes of `reference` in the session file `session` may
/// be, in the agent's order: for omp, `blobs/<hex>` in each folder above the
/// session file (the agent dir holds `sessions/` and `blobs/`; a subagent's
/// transcript sits deeper), nearest first; for the port, `<file>.blobs/<hex>`.
pub fn candidates(session: &Path, reference: &BlobRef) -> Vec<PathBuf> {
    match reference {
        BlobRef::Omp { hex } => session
            .ancestors()
            .skip(1)
            .take(6)
            .map(|dir| dir.join("blobs").join(hex))
            .collect(),
        BlobRef::Port { hex, .. } => {
            let mut folder = session.as_os_str().to_owned();
            folder.push(".blobs");
            vec![PathBuf::from(folder).join(hex)]
        }
    }
}

/// True for a pi_agent_rust SQLite session file, whose attachments are
/// rows of its own `pi_session_blobs` table.
fn is_sqlite_session(session: &Path) -> bool {
    session.extension().is_some_and(|ext| ext == "sqlite")
}

/// Finds the bytes of `reference` (a `stat` per place looked; for a port
/// SQLite session, a read-only look in its `pi_session_blobs` table, whose
/// place is the session file itself).
pub fn locate(session: &Path, reference: &BlobRef) -> Located {
    if let BlobRef::Port { hex, .. } = reference
        && is_sqlite_session(session)
    {
        return Located {
            path: session.to_path_buf(),
            size: crate::store::port_sqlite::blob_len(session, hex),
        };
    }
    let places = candidates(session, reference);
    for place in &places {
        if let Ok(metadata) = fs::metadata(place)
            && metadata.is_file()
        {
            return Located {
                path: place.clone(),
                size: Some(metadata.len()),
            };
        }
    }
    // Missing: name where the agent itself would have put it.
    let expected = match reference {
        // `<agent dir>/sessions/<project>/<file>.jsonl` → `<agent dir>/blobs`.
        BlobRef::Omp { hex } => session
            .ancestors()
            .nth(3)
            .map(|agent| agent.join("blobs").join(hex)),
        BlobRef::Port { .. } => None,
    };
    Located {
        path: expected
            .or_else(|| places.into_iter().next())
            .unwrap_or_default(),
        size: None,
    }
}

/// The bytes of `reference`, or `None` when they are not there.
pub fn read(session: &Path, reference: &BlobRef) -> Option<Vec<u8>> {
    if let BlobRef::Port { hex, .. } = reference
        && is_sqlite_session(session)
    {
        return crate::store::port_sqlite::blob(session, hex);
    }
    let located = locate(session, reference);
    located.size?;
    fs::read(&located.path).ok()
}

/// What an image kept outside the session file is shown as:
/// `[image image/png 1 KB, sha256 73f66894d05e… in omp's blob store: PATH]`,
/// or `[image image/png, sha256 … missing from omp's blob store (PATH)]`.
pub fn placeholder(mime: Option<&str>, reference: &BlobRef, located: &Located) -> String {
    let hex = reference.hex();
    let short = hex.get(..12).unwrap_or(hex);
    let mime = mime.unwrap_or("?");
    match located.size {
        Some(size) => format!(
            "[image {mime} {}, sha256 {short}… in {}: {}]",
            size_text(size),
            reference.store_name(&located.path),
            located.path.display()
        ),
        None => format!(
            "[image {mime}, sha256 {short}…: missing from {} ({})]",
            reference.store_name(&located.path),
            located.path.display()
        ),
    }
}

fn size_text(bytes: u64) -> String {
    if bytes >= 1024 {
        format!("{} KB", (bytes + 512) / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// What `doctor` and `sync` say about an image whose bytes are not where
/// its agent keeps them: the file and line, what is missing, what to do.
pub fn missing_image_message(
    session: &str,
    line: i64,
    reference: &BlobRef,
    located: &Located,
) -> String {
    let file = Path::new(session);
    let fix = match reference {
        BlobRef::Omp { .. } => "copy omp's blobs/ folder back beside the sessions to see it",
        BlobRef::Port { .. } if is_sqlite_session(file) => {
            "the port writes the row with the entry: a copy of the database without it cannot show it"
        }
        BlobRef::Port { .. } => "copy the session's .blobs/ folder back beside it to see it",
    };
    format!(
        "{session}:{line}: image sha256 {} is missing from {} ({}); show, serve and export name it without its bytes: {fix}",
        reference.hex(),
        reference.store_name(file),
        located.path.display(),
    )
}

/// The same for an omp tool result whose full output (`artifact://<id>`,
/// `<id>.<tool>.log` in the session's folder) is not there.
pub fn missing_output_message(session: &str, line: i64, id: &str) -> String {
    let folder = session.strip_suffix(".jsonl").unwrap_or(session);
    format!(
        "{session}:{line}: the tool result's full output (artifact://{id}, {id}.<tool>.log in {folder}/) is missing; only the truncated output in the session is searchable: put the file back and run `piidx sync`"
    )
}

/// Every image block's reference in an entry: the image blocks of
/// `message.content` (user messages, tool results and the rest).
pub fn entry_refs(raw: &Value) -> Vec<(Option<String>, BlobRef)> {
    let Some(Value::Array(blocks)) = raw.get("message").and_then(|m| m.get("content")) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("image"))
        .filter_map(|block| {
            let mime = block
                .get("mimeType")
                .and_then(Value::as_str)
                .map(str::to_owned);
            blob_ref(block).map(|reference| (mime, reference))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "73f66894d05ef479d1019497f3fb035c79e7460bad36e960feefc2a2ebaa3ea9";

    #[test]
    fn references_of_both_agents_and_nothing_else() {
        let omp = serde_json::json!({"type": "image", "data": format!("blob:sha256:{HEX}")});
        assert_eq!(blob_ref(&omp), Some(BlobRef::Omp { hex: HEX.into() }));
        let port =
            serde_json::json!({"data": {"$piBlob": format!("sha256:{HEX}"), "sizeBytes": 5}});
        assert_eq!(
            blob_ref(&port),
            Some(BlobRef::Port {
                hex: HEX.into(),
                size_bytes: Some(5)
            })
        );
        let escape = serde_json::json!({"data": "blob:sha256:../../etc/passwd"});
        assert_eq!(blob_ref(&escape), None);
        let inline = serde_json::json!({"data": "iVBORw0KGgo="});
        assert_eq!(blob_ref(&inline), None);
    }

    #[test]
    fn omp_blobs_are_looked_for_above_the_session() {
        let places = candidates(
            Path::new("/h/.omp/agent/sessions/-p-/s.jsonl"),
            &BlobRef::Omp { hex: HEX.into() },
        );
        assert!(places.contains(&PathBuf::from(format!("/h/.omp/agent/blobs/{HEX}"))));
        let port = candidates(
            Path::new("/r/--p--/s.jsonl"),
            &BlobRef::Port {
                hex: HEX.into(),
                size_bytes: None,
            },
        );
        assert_eq!(
            port,
            vec![PathBuf::from(format!("/r/--p--/s.jsonl.blobs/{HEX}"))]
        );
    }
}
