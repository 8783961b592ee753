//! Stages 2–4 for one file: read its new lines, parse them, normalize them,
//! and hand the results to the writer in bounded batches.
//!
//! A `Cursor` is everything needed to continue a file where the last sync
//! stopped; the writer stores it in the same transaction as the rows of the
//! batch that produced it, so a crash between batches resumes exactly there.

use std::fs::File;
use std::io;
use std::path::PathBuf;

use crate::normalize::{self, EntryContext};
use crate::parse::{self, ParsedLine};
pub use crate::pipeline::{Batch, Cursor, ExactLine, FileStatus, LineError, SessionFacts, Target};
use crate::read::{Fingerprint, Line, LineReader, read_title_slot};

pub use crate::pipeline::PARSER_VERSION;

/// Input bytes per batch sent to the writer; bounds memory per worker.
const BATCH_BYTES: u64 = 2 << 20;

/// How much of a bad line is kept in `parse_errors.excerpt`.
const EXCERPT_BYTES: usize = 160;

#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}")]
pub struct IngestError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Limits for one run, the redactor when the index redacts secrets, and
/// whether the entries are read to be stored.
#[derive(Clone, Default)]
pub struct IngestOptions {
    pub max_line_bytes: usize,
    pub redactor: Option<std::sync::Arc<crate::secrets::Redactor>>,
    /// Deflate each entry's shared values as the index stores them
    /// (`normalize::shared::deflate`), while they are still in the CPU's
    /// caches: sync's readers do, `doctor`'s comparing re-read does not.
    pub deflate: bool,
}

/// Where to start reading a file.
#[derive(Debug, Clone)]
pub enum Start {
    /// From byte 0, replacing whatever the file had in the index.
    Scratch,
    /// From the stored cursor, if the consumed prefix is still the same
    /// (checked against the fingerprint); otherwise from scratch.
    Resume(Cursor, Fingerprint),
}

/// Indexes the new part of one file, calling `emit` for every batch. The last
/// batch carries the final status; `emit` returning false stops early.
pub fn ingest(
    target: &Target,
    start: Start,
    options: IngestOptions,
    emit: &mut dyn FnMut(Batch) -> bool,
) -> Result<(), IngestError> {
    let wrap = |source| IngestError {
        path: target.path.clone(),
        source,
    };
    if is_port_sqlite(&target.path) {
        return ingest_port_sqlite(target, options, emit);
    }
    let file = File::open(&target.path).map_err(wrap)?;
    let mut cursor = match start {
        Start::Scratch => None,
        Start::Resume(cursor, fingerprint) => {
            resume_point(&file, cursor, fingerprint).map_err(wrap)?
        }
    };
    let reset = cursor.is_none();
    let max_line_bytes = options.max_line_bytes;
    // A resumed file's title slot is read again: omp rewrites it in place,
    // which the fingerprint leaves out (see `Fingerprint`).
    let title_slot = match &cursor {
        Some(cursor) => read_title_slot(&file, cursor.offset)
            .map_err(wrap)?
            .and_then(|bytes| match parse::parse_line(&bytes) {
                ParsedLine::Objects { objects, .. } => {
                    objects.first().and_then(normalize::title_slot)
                }
                _ => None,
            }),
        None => None,
    };
    let mut state = FileRun {
        target,
        options,
        cursor: cursor.take().unwrap_or_default(),
        batch: new_batch(target, reset),
        title_slot,
    };
    state.batch.title_slot = state.title_slot.clone();
    let reader_file = file.try_clone().map_err(wrap)?;
    let mut reader =
        LineReader::new(reader_file, state.cursor.offset, max_line_bytes).map_err(wrap)?;
    while let Some(line) = reader.next_line().map_err(wrap)? {
        match state.take(line) {
            Step::Next => {}
            Step::Pending => break,
            Step::Skip(reason) => {
                let batch = state.skip_batch(reason);
                emit(batch);
                return Ok(());
            }
        }
        if state.batch_bytes() >= crate::fault::batch_bytes(BATCH_BYTES) {
            let batch = state.finish_batch(&file, None).map_err(wrap)?;
            if !emit(batch) {
                return Ok(());
            }
        }
    }
    let status = if state.cursor.session.is_some() {
        FileStatus::Indexed
    } else {
        FileStatus::Pending
    };
    let batch = state.finish_batch(&file, Some(status)).map_err(wrap)?;
    emit(batch);
    Ok(())
}

/// A pi_agent_rust SQLite session file (`*.sqlite`, not its session index).
pub fn is_port_sqlite(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|ext| ext == "sqlite")
        && path
            .file_name()
            .is_some_and(|name| name != crate::store::port_sqlite::SESSION_INDEX)
}

/// A pi_agent_rust SQLite session, read from its start (the port rewrites
/// it whole on every save) as the lines of its JSONL equivalent: offsets
/// and line numbers are those lines', and no fingerprint is kept (any
/// change of the file's stat reads it again from scratch).
fn ingest_port_sqlite(
    target: &Target,
    options: IngestOptions,
    emit: &mut dyn FnMut(Batch) -> bool,
) -> Result<(), IngestError> {
    let max_line_bytes = options.max_line_bytes;
    let mut state = FileRun {
        target,
        options,
        cursor: Cursor::default(),
        batch: new_batch(target, true),
        title_slot: None,
    };
    let mut skipped = None;
    let mut stopped = false;
    let read = crate::store::port_sqlite::each_line(&target.path, max_line_bytes, &mut |line| {
        if let Step::Skip(reason) = state.take(line) {
            skipped = Some(reason);
            return false;
        }
        if state.batch_bytes() >= crate::fault::batch_bytes(BATCH_BYTES) {
            let batch = state.finish_virtual_batch(None);
            stopped = !emit(batch);
        }
        !stopped
    });
    if let Err(err) = read {
        skipped = Some(crate::error_chain(&err));
    }
    if let Some(reason) = skipped {
        emit(state.skip_batch(reason));
        return Ok(());
    }
    if stopped {
        return Ok(());
    }
    let status = if state.cursor.session.is_some() {
        FileStatus::Indexed
    } else {
        FileStatus::Skipped("an empty pi_agent_rust session database (no header)".into())
    };
    let batch = state.finish_virtual_batch(Some(status));
    emit(batch);
    Ok(())
}

/// Decides whether a stored cursor still describes the file's prefix.
fn resume_point(
    file: &File,
    mut cursor: Cursor,
    stored: Fingerprint,
) -> io::Result<Option<Cursor>> {
    let size = file.metadata()?.len();
    if size < cursor.offset || Fingerprint::of_prefix(file, cursor.offset)? != stored {
        return Ok(None);
    }
    if cursor.tail_open && size > cursor.offset {
        // The last consumed line had no newline. If the writer completed it
        // with '\n', go on; if it glued more bytes onto it, the line we
        // indexed was not the line that is there now.
        let mut next = [0u8; 1];
        std::os::unix::fs::FileExt::read_exact_at(file, &mut next, cursor.offset)?;
        if next[0] != b'\n' {
            return Ok(None);
        }
        cursor.offset += 1;
        cursor.tail_open = false;
    }
    Ok(Some(cursor))
}

enum Step {
    Next,
    /// An unterminated tail that is not complete JSON: leave it for later.
    Pending,
    Skip(String),
}

struct FileRun<'a> {
    target: &'a Target,
    options: IngestOptions,
    cursor: Cursor,
    batch: Batch,
    /// The file's title slot (omp), carried by every batch.
    title_slot: Option<normalize::TitleSlot>,
}

fn new_batch(target: &Target, reset: bool) -> Batch {
    Batch {
        target: target.clone(),
        reset,
        header: None,
        title_slot: None,
        entries: Vec::new(),
        errors: Vec::new(),
        exact_lines: Vec::new(),
        cursor: Cursor::default(),
        fingerprint: Fingerprint::default(),
        status: FileStatus::Indexed,
        bytes: 0,
        last: false,
    }
}

impl FileRun<'_> {
    fn batch(&mut self) -> &mut Batch {
        &mut self.batch
    }

    fn batch_bytes(&self) -> u64 {
        self.batch.bytes
    }

    /// Hands out the current batch, stamped with the cursor after it, and
    /// starts the next one.
    fn finish_batch(&mut self, file: &File, status: Option<FileStatus>) -> io::Result<Batch> {
        let mut next = new_batch(self.target, false);
        next.title_slot = self.title_slot.clone();
        let mut batch = std::mem::replace(&mut self.batch, next);
        batch.cursor = self.cursor.clone();
        batch.fingerprint = Fingerprint::of_prefix(file, self.cursor.offset)?;
        if let Some(status) = status {
            batch.status = status;
            batch.last = true;
        }
        Ok(batch)
    }

    /// `finish_batch` for a file read as virtual lines (no fingerprint).
    fn finish_virtual_batch(&mut self, status: Option<FileStatus>) -> Batch {
        let mut batch = std::mem::replace(&mut self.batch, new_batch(self.target, false));
        batch.cursor = self.cursor.clone();
        if let Some(status) = status {
            batch.status = status;
            batch.last = true;
        }
        batch
    }

    fn skip_batch(&mut self, reason: String) -> Batch {
        let mut batch = new_batch(self.target, true);
        batch.status = FileStatus::Skipped(reason);
        batch.last = true;
        batch
    }

    /// Indexes one line of the file, or records it (over the cap, or not
    /// JSON); `Pending` for an unterminated tail to read again later.
    fn take(&mut self, line: Line<'_>) -> Step {
        match line {
            Line::Text {
                offset,
                bytes,
                terminated,
            } => self.take_line(offset, bytes, terminated),
            Line::Oversized {
                offset,
                len,
                terminated,
            } => self.take_oversized(offset, len, terminated),
        }
    }

    fn take_oversized(&mut self, offset: u64, len: u64, terminated: bool) -> Step {
        if !terminated {
            return Step::Pending;
        }
        let line_no = self.cursor.line_count + 1;
        let reason = format!(
            "line of {len} bytes is longer than the {} byte cap (--max-line-bytes); skipped",
            self.options.max_line_bytes
        );
        self.batch().errors.push(LineError {
            line_no,
            byte_offset: offset as i64,
            byte_len: len as i64,
            reason,
            excerpt: None,
        });
        self.consume(offset, len, true);
        Step::Next
    }

    fn take_line(&mut self, offset: u64, bytes: &[u8], terminated: bool) -> Step {
        let parsed = parse::parse_line(bytes);
        if !terminated && !matches!(parsed, ParsedLine::Objects { .. }) {
            return Step::Pending;
        }
        let line_no = self.cursor.line_count + 1;
        let error = |reason: String| LineError {
            line_no,
            byte_offset: offset as i64,
            byte_len: bytes.len() as i64,
            reason,
            excerpt: Some(excerpt(bytes)),
        };
        match parsed {
            ParsedLine::Blank => {}
            ParsedLine::Invalid(reason) => self.batch().errors.push(error(reason)),
            ParsedLine::Objects {
                objects,
                note,
                rewritten,
            } => {
                // Pi's JSON.parse accepts a line only when it holds one object.
                let pi_parsable = objects.len() == 1;
                let listed = pi_parsable || split_by_lone_cr(bytes, objects.len());
                // Decided before the objects are taken apart; an index that
                // redacts keeps no bytes a secret could be in.
                let exact = (self.options.redactor.is_none()
                    && needs_exact(bytes, &objects, note.is_some() || rewritten))
                .then(|| bytes.to_vec());
                if let Some(note) = note {
                    self.batch().errors.push(error(note));
                }
                let before = (self.batch.entries.len(), self.batch.header.is_some());
                for (index, object) in objects.into_iter().enumerate() {
                    let ctx = EntryContext {
                        line_no,
                        byte_offset: offset as i64,
                        byte_len: bytes.len() as i64,
                        obj_in_line: index as i64,
                        pi_index: pi_parsable.then_some(self.cursor.object_count),
                        listed,
                        legacy_v1: false,
                        previous_entry_id: None,
                    };
                    if pi_parsable {
                        self.cursor.object_count += 1;
                    }
                    if let Some(step) = self.take_object(object, ctx, &error) {
                        return step;
                    }
                }
                let header_taken = !before.1 && self.batch.header.is_some();
                let kept = self.batch.entries.len() > before.0 || header_taken;
                if let (Some(bytes), true) = (exact, kept) {
                    self.batch.exact_lines.push(ExactLine {
                        byte_offset: offset as i64,
                        header: header_taken,
                        bytes,
                    });
                }
            }
        }
        self.consume(offset, bytes.len() as u64, terminated);
        Step::Next
    }

    /// Returns `Some` when the object decides the file is not a session.
    fn take_object(
        &mut self,
        object: serde_json::Value,
        mut ctx: EntryContext,
        error: &dyn Fn(String) -> LineError,
    ) -> Option<Step> {
        let Some(session) = &self.cursor.session else {
            // oh-my-pi's title slot: the first line, before the header.
            if ctx.line_no == 1
                && ctx.obj_in_line == 0
                && let Some(slot) = normalize::title_slot(&object)
            {
                self.title_slot = Some(slot.clone());
                self.batch().title_slot = Some(slot);
                return None;
            }
            return match normalize::header(&object) {
                Some(mut header) => {
                    header.agent = self.agent_of(header.agent);
                    self.cursor.session = Some(SessionFacts {
                        session_id: header.session_id.clone(),
                        legacy_v1: header.version < 2,
                    });
                    self.batch().header = Some(header);
                    None
                }
                None => Some(Step::Skip(not_a_header(&object))),
            };
        };
        if object.get("type").and_then(serde_json::Value::as_str) == Some("session") {
            self.batch()
                .errors
                .push(error("duplicate session header; ignored as Pi does".into()));
            return None;
        }
        ctx.legacy_v1 = session.legacy_v1;
        ctx.previous_entry_id = self.cursor.last_entry_id.clone();
        let mut entry = normalize::entry_redacted(object, &ctx, self.options.redactor.as_deref());
        if self.options.deflate {
            normalize::shared::deflate(&mut entry.shared);
        }
        self.cursor.last_entry_id = Some(entry.entry_id.clone());
        self.cursor.entry_count += 1;
        self.batch().entries.push(entry);
        None
    }

    /// The agent of the file, from its header's own guess (`header_agent`)
    /// and what surrounds the header: a title slot only omp writes, a file
    /// name only the port gives.
    fn agent_of(&self, header_agent: &'static str) -> &'static str {
        use normalize::agent;
        if self.title_slot.is_some() {
            return agent::OMP;
        }
        if is_port_sqlite(&self.target.path) {
            return agent::PI_AGENT_RUST;
        }
        let port_name = self
            .target
            .path
            .file_name()
            .is_some_and(|name| normalize::is_port_file_name(&name.to_string_lossy()));
        if header_agent == agent::PI && port_name {
            agent::PI_AGENT_RUST
        } else {
            header_agent
        }
    }

    fn consume(&mut self, offset: u64, len: u64, terminated: bool) {
        let end = offset + len + u64::from(terminated);
        let consumed = end - self.cursor.offset;
        self.cursor.offset = end;
        self.cursor.line_count += 1;
        self.cursor.tail_open = !terminated;
        self.batch().bytes += consumed;
    }
}

/// True when a line holds `objects` objects separated by lone `\r`s: Pi's
/// `listAll()` reads lines with readline, which ends a line there too, and
/// so counts each (its loader, which splits on `\n` only, drops them all).
fn split_by_lone_cr(bytes: &[u8], objects: usize) -> bool {
    let body = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if objects < 2 || !body.contains(&b'\r') {
        return false;
    }
    let parts: Vec<&[u8]> = body
        .split(|b| *b == b'\r')
        .filter(|part| !part.iter().all(u8::is_ascii_whitespace))
        .collect();
    parts.len() == objects
        && parts.iter().all(|part| {
            matches!(parse::parse_line(part), ParsedLine::Objects { objects, note: None, .. } if objects.len() == 1)
        })
}

/// True when writing `objects` back out one after another does not give
/// `bytes`. Only lines that were repaired or that have anything around
/// their objects are compared: a line `JSON.stringify` wrote starts with
/// `{` and ends with `}`, and comes back as it was.
fn needs_exact(bytes: &[u8], objects: &[serde_json::Value], repaired: bool) -> bool {
    if !repaired && bytes.first() == Some(&b'{') && bytes.last() == Some(&b'}') {
        return false;
    }
    let mut written = Vec::with_capacity(bytes.len());
    for object in objects {
        if serde_json::to_writer(&mut written, object).is_err() {
            return true;
        }
    }
    written != bytes
}

fn not_a_header(object: &serde_json::Value) -> String {
    match object.get("type").and_then(serde_json::Value::as_str) {
        Some("session") => "the session header has no string `id`".into(),
        Some(kind) => format!("the first JSON object is a `{kind}` entry, not a session header"),
        None => "the first JSON object has no `type`; not a session header".into(),
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let mut end = bytes.len().min(EXCERPT_BYTES);
    let text = String::from_utf8_lossy(&bytes[..end]);
    if bytes.len() > end {
        end = text.len();
        format!("{}…", &text[..end])
    } else {
        text.into_owned()
    }
}
