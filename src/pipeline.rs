//! The values that flow between the stages of a sync: what discovery found
//! (`Target`), how far a file is indexed (`Cursor`), and what one file's
//! reader hands the writer (`Batch`), and the parser version rows are read
//! with (`PARSER_VERSION`, which the files table records). Their own
//! module, so that no stage imports another stage to name them.

use std::path::PathBuf;

use crate::normalize::{Entry, Header, TitleSlot};
use crate::read::Fingerprint;

/// Bump when extraction changes: files indexed by an older parser are
/// re-indexed automatically on the next sync. 2: an `id` or `parentId` of
/// `""` counts as missing. 3: numbers are kept as written (they were parsed
/// into floats and printed back, rounded) and image payloads keep their
/// place among their object's keys. 4: every string is searchable, and
/// system messages' large values are stored once (`shared_texts`). 5:
/// subagent statuses in Pi 1.5's words, usage parts (reasoning, 1h cache).
/// 6: large strings of tool results are shared texts too, stored deflated.
/// 7: lone surrogate escapes read (as U+FFFD), lines export cannot rebuild
/// kept in `exact_lines`, chunks cut at token boundaries, `model_change`
/// model ids searchable, event streams indexed as Pi lists them; oh-my-pi
/// and pi_agent_rust: the agent of each session, omp's title slot,
/// `model_change.model`, `model_usage`, omp's and the port's roles. 8:
/// omp's task runs name their transcript (`<id>.jsonl`), older omp
/// sessions known by their ids and entries.
pub const PARSER_VERSION: i64 = 8;

/// Where the indexed part of a file ends and what is known about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cursor {
    /// Byte offset after the last consumed line.
    pub offset: u64,
    pub line_count: i64,
    /// Objects Pi itself would parse so far (header included).
    pub object_count: i64,
    /// The last consumed line had no `\n` (it parsed as complete JSON).
    pub tail_open: bool,
    pub last_entry_id: Option<String>,
    pub session: Option<SessionFacts>,
    pub entry_count: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionFacts {
    pub session_id: String,
    pub legacy_v1: bool,
}

/// A file on disk as discovery saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub path: PathBuf,
    pub root: String,
    pub rel_path: String,
    /// 1: directly in the root; 2: `<root>/<dir>/x.jsonl`.
    pub depth: i64,
    /// Pi's `listAll()` lists it: at the depth its root's layout lists.
    pub listed: bool,
    pub dev: i64,
    pub ino: i64,
    pub size: u64,
    pub mtime_ns: i64,
    /// Wall-clock time of the `stat` (Unix ns): a file modified shortly
    /// before it was seen may change again within the same mtime tick.
    pub seen_ns: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FileStatus {
    /// A session; rows are being or have been written.
    Indexed,
    /// No complete JSON object yet (empty, or only a torn line).
    Pending,
    /// Not a session; the reason says why.
    Skipped(String),
    /// Could not be read this time (permissions, I/O): what the index holds
    /// for it is left as it was.
    Unreadable(String),
    /// Gone from disk, its rows kept (`sync --keep-deleted`).
    Deleted,
}

impl FileStatus {
    pub fn name(&self) -> &'static str {
        match self {
            FileStatus::Indexed => "indexed",
            FileStatus::Pending => "pending",
            FileStatus::Skipped(_) => "skipped",
            FileStatus::Unreadable(_) => "unreadable",
            FileStatus::Deleted => "deleted",
        }
    }

    /// The status stored in `files` (`skip_reason` completes `skipped`).
    pub fn stored(name: &str, skip_reason: Option<String>) -> FileStatus {
        match name {
            "indexed" => FileStatus::Indexed,
            "pending" => FileStatus::Pending,
            "deleted" => FileStatus::Deleted,
            _ => FileStatus::Skipped(skip_reason.unwrap_or_default()),
        }
    }
}

/// A line that could not be indexed (or needed repair).
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line_no: i64,
    pub byte_offset: i64,
    pub byte_len: i64,
    pub reason: String,
    pub excerpt: Option<String>,
}

/// A line kept byte for byte, for export: its objects written back out
/// (`JSON.stringify`'s form, which serde_json's matches) would not give it
/// back. Glued objects with something between them, a `\r` before the
/// `\n`, lone surrogate escapes, invalid UTF-8.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactLine {
    pub byte_offset: i64,
    /// The line holds the session header (and maybe entries glued to it).
    pub header: bool,
    pub bytes: Vec<u8>,
}

/// What the writer applies in one go: rows plus the cursor after them.
#[derive(Debug)]
pub struct Batch {
    pub target: Target,
    /// Replace every row the file had before this batch.
    pub reset: bool,
    pub header: Option<Header>,
    /// An oh-my-pi title slot, as it is now: in every batch of a file that
    /// has one (a resumed file's is read again: omp rewrites it in place).
    pub title_slot: Option<TitleSlot>,
    pub entries: Vec<Entry>,
    pub errors: Vec<LineError>,
    /// The bytes of lines whose objects, written back out, are not the
    /// line (see `ExactLine`).
    pub exact_lines: Vec<ExactLine>,
    pub cursor: Cursor,
    pub fingerprint: Fingerprint,
    pub status: FileStatus,
    /// Bytes of the file this batch covers.
    pub bytes: u64,
    /// The file's last batch of this sync.
    pub last: bool,
}
