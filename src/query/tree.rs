//! The id/parentId tree of one session, loaded from the index: resolving a
//! SESSION argument, the current branch, Pi's context building, and
//! `piidx tree`.
//!
//! Mirrors Pi 0.73.1 (`_buildIndex`, `getTree`, `buildSessionContext` in
//! `dist/core/session-manager.js`): duplicate ids resolve to the last
//! occurrence, the leaf is the last entry in file order, orphans and
//! self-parented entries are roots, children are sorted by timestamp. Unlike
//! Pi, parent walks are cycle-guarded. pi_agent_rust's header `leafId`
//! chooses its current branch (`SessionTree::leaf`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::OptionalExtension;
use serde::Serialize;
use serde_json::Value;

use crate::store::Index;

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("no indexed session matches `{0}`; see `piidx sessions --all` (or run `piidx sync`)")]
    NotFound(String),
    #[error(
        "`{arg}` matches several sessions; pass a longer id or the file path:\n{}{}",
        candidates.join("\n"),
        more_candidates(*more)
    )]
    Ambiguous {
        arg: String,
        /// The first few, as `  <id>  <path>`.
        candidates: Vec<String>,
        /// How many more match.
        more: usize,
    },
    #[error("session {session} has no entry `{leaf}`; see `piidx tree {session}`")]
    UnknownEntry { session: String, leaf: String },
    #[error(
        "entry `{leaf}` is ambiguous in session {session}: {}{}; pass a longer id",
        candidates.join(", "),
        more_candidates(*more).replace("\n  …", ",")
    )]
    AmbiguousEntry {
        session: String,
        leaf: String,
        candidates: Vec<String>,
        more: usize,
    },
    #[error("stored JSON of entry {entry} in {path} does not parse; run `piidx doctor --fix`")]
    BadRaw {
        path: String,
        entry: String,
        source: serde_json::Error,
    },
    #[error(
        "entry {entry} in {path}: image path {json_path} is not in its stored JSON; run `piidx doctor --fix`"
    )]
    BadImagePath {
        path: String,
        entry: String,
        json_path: String,
    },
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Candidates an ambiguous prefix lists; the rest are counted.
const CANDIDATES_SHOWN: usize = 5;

fn more_candidates(more: usize) -> String {
    match more {
        0 => String::new(),
        n => format!("\n  … and {n} more"),
    }
}

fn header_version(header: &Value) -> i64 {
    header.get("version").and_then(Value::as_i64).unwrap_or(1)
}

/// The indexed file a SESSION argument names.
#[derive(Debug, Clone)]
pub struct SessionRef {
    pub file_id: i64,
    pub session_id: String,
    pub path: String,
}

/// Resolves a file path, a session id, or a unique session id prefix.
pub fn resolve(store: &Index, arg: &str) -> Result<SessionRef, ViewError> {
    let conn = store.connection();
    let by_path = |path: &str| -> rusqlite::Result<Option<SessionRef>> {
        conn.query_row(
            "SELECT file_id, session_id, file_path FROM sessions WHERE file_path = ?1",
            [path],
            |row| {
                Ok(SessionRef {
                    file_id: row.get(0)?,
                    session_id: row.get(1)?,
                    path: row.get(2)?,
                })
            },
        )
        .optional()
    };
    if arg.contains('/') || arg.ends_with(".jsonl") {
        if let Some(found) = by_path(arg)? {
            return Ok(found);
        }
        let absolute = std::path::absolute(Path::new(arg))
            .ok()
            .and_then(|p| std::fs::canonicalize(&p).ok().or(Some(p)));
        if let Some(found) = absolute
            .as_deref()
            .and_then(Path::to_str)
            .map(by_path)
            .transpose()?
            .flatten()
        {
            return Ok(found);
        }
        return Err(ViewError::NotFound(arg.to_owned()));
    }
    let mut stmt = conn.prepare(
        "SELECT file_id, session_id, file_path FROM sessions
          WHERE session_id = ?1 OR (substr(session_id, 1, length(?1)) = ?1)
          ORDER BY session_id = ?1 DESC, file_path",
    )?;
    let found: Vec<SessionRef> = stmt
        .query_map([arg], |row| {
            Ok(SessionRef {
                file_id: row.get(0)?,
                session_id: row.get(1)?,
                path: row.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let exact: Vec<&SessionRef> = found.iter().filter(|s| s.session_id == arg).collect();
    match (exact.len(), found.len()) {
        (1, _) => Ok(exact[0].clone()),
        (0, 1) => Ok(found[0].clone()),
        (_, 0) => Err(ViewError::NotFound(arg.to_owned())),
        _ => {
            let matching: Vec<&SessionRef> = found
                .iter()
                .filter(|s| exact.is_empty() || s.session_id == arg)
                .collect();
            Err(ViewError::Ambiguous {
                arg: arg.to_owned(),
                candidates: matching
                    .iter()
                    .take(CANDIDATES_SHOWN)
                    .map(|s| format!("  {}  {}", s.session_id, s.path))
                    .collect(),
                more: matching.len().saturating_sub(CANDIDATES_SHOWN),
            })
        }
    }
}

/// One entry of the session, in file order.
#[derive(Debug, Clone)]
pub struct Node {
    pub rowid: i64,
    pub id: String,
    pub parent: Option<String>,
    pub kind: String,
    pub timestamp: Option<String>,
    pub timestamp_ms: Option<i64>,
    pub line_no: i64,
    /// The stored entry (image payloads removed).
    pub raw: Value,
}

/// A stored image payload: where it sits and how big it is.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    pub mime_type: Option<String>,
    pub byte_len: i64,
    pub payload_key: String,
}

/// What an image payload is shown as: `[image image/png 12 KB]`.
pub fn image_placeholder(mime: Option<&str>, bytes: i64) -> String {
    let size = if bytes >= 1024 {
        format!("{} KB", (bytes + 512) / 1024)
    } else {
        format!("{bytes} B")
    };
    format!("[image {} {size}]", mime.unwrap_or("?"))
}

/// What an image kept outside the session file is shown as: oh-my-pi's
/// `blob:sha256:<hex>` (bytes in `~/.omp/agent/blobs/`) and pi_agent_rust's
/// `{"$piBlob":"sha256:<hex>","sizeBytes":N}` (bytes in
/// `<file>.jsonl.blobs/`). `None` for an image whose payload is inline.
pub fn external_image_placeholder(block: &Value) -> Option<String> {
    let mime = block.get("mimeType").and_then(Value::as_str);
    match block.get("data")? {
        Value::String(data) => {
            let hex = data.strip_prefix("blob:sha256:")?;
            Some(format!(
                "[image {} in omp's blob store, sha256 {}…]",
                mime.unwrap_or("?"),
                hex.get(..12).unwrap_or(hex)
            ))
        }
        Value::Object(reference) => {
            let digest = reference.get("$piBlob").and_then(Value::as_str)?;
            let bytes = reference
                .get("sizeBytes")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let placeholder = image_placeholder(mime, bytes);
            let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
            Some(format!(
                "{} in the session's .blobs/, sha256 {}…]",
                placeholder.trim_end_matches(']'),
                hex.get(..12).unwrap_or(hex)
            ))
        }
        _ => None,
    }
}

impl SessionTree {
    /// What an image block kept outside the session file is shown as, with
    /// its size and file, or as missing (`crate::outside::placeholder`);
    /// `None` for an image whose payload is inline.
    pub fn outside_placeholder(&self, block: &Value) -> Option<String> {
        let reference = crate::outside::blob_ref(block)?;
        let mime = block.get("mimeType").and_then(Value::as_str);
        match self.outside.get(reference.hex()) {
            Some(located) => Some(crate::outside::placeholder(mime, &reference, located)),
            None => external_image_placeholder(block),
        }
    }
}

/// The loaded tree of one session file.
#[derive(Debug)]
pub struct SessionTree {
    pub session: SessionRef,
    pub header: Value,
    pub nodes: Vec<Node>,
    /// id → index of its last occurrence.
    pub by_id: HashMap<String, usize>,
    /// Latest label per target id (labels cleared by an empty label are absent).
    pub labels: HashMap<String, String>,
    /// (entry rowid, json path of the image object) → payload facts.
    pub images: HashMap<(i64, String), ImageInfo>,
    /// Compaction rowid → resolved first kept entry id (v1 index resolved).
    pub first_kept: HashMap<i64, String>,
    /// Images kept outside the session file (omp's blob store, the port's
    /// `.blobs/`): digest → where their bytes are, looked up when the tree
    /// is loaded (`crate::outside`; the index keeps no copy).
    pub outside: HashMap<String, crate::outside::Located>,
}

impl SessionTree {
    /// The tree of the session `arg` names (id, id prefix or file path),
    /// found and read in one snapshot: what every front-end shows.
    pub fn named(store: &Index, arg: &str) -> Result<SessionTree, ViewError> {
        store.in_snapshot(|store| {
            let found = resolve(store, arg)?;
            Self::load(store, found)
        })
    }

    /// The session's tree; image payloads stay out (see `images`).
    pub fn load(store: &Index, session: SessionRef) -> Result<SessionTree, ViewError> {
        Self::load_entries(store, session, false)
    }

    /// The session's tree with every entry whole, image payloads included:
    /// the entries Pi has.
    pub fn load_whole(store: &Index, session: SessionRef) -> Result<SessionTree, ViewError> {
        Self::load_entries(store, session, true)
    }

    fn load_entries(
        store: &Index,
        session: SessionRef,
        with_images: bool,
    ) -> Result<SessionTree, ViewError> {
        let conn = store.connection();
        let header_raw: String = conn.query_row(
            "SELECT header_raw FROM sessions WHERE file_id = ?1",
            [session.file_id],
            |row| row.get(0),
        )?;
        let header = serde_json::from_str(&header_raw).map_err(|source| ViewError::BadRaw {
            path: session.path.clone(),
            entry: "header".into(),
            source,
        })?;
        // Glued objects are invisible to Pi. In v1 files Pi's migration chains
        // the entries it parsed, so a synthetic parent that names a glued
        // object is replaced by that object's own parent.
        let v1 = header_version(&header) < 2;
        let mut glued_parent: HashMap<String, Option<String>> = HashMap::new();
        if v1 {
            let mut stmt = conn.prepare(
                "SELECT entry_id, parent_id FROM entries WHERE file_id = ?1 AND glued = 1",
            )?;
            let mut rows = stmt.query([session.file_id])?;
            while let Some(row) = rows.next()? {
                glued_parent.insert(row.get(0)?, row.get(1)?);
            }
        }
        let mut stmt = conn.prepare(
            "SELECT entry_rowid, entry_id, parent_id, type, timestamp, timestamp_ms, line_no, raw
               FROM entries WHERE file_id = ?1 AND glued = 0
              ORDER BY line_no, obj_in_line",
        )?;
        let mut nodes = Vec::new();
        let mut rows = stmt.query([session.file_id])?;
        while let Some(row) = rows.next()? {
            let raw: String = row.get(7)?;
            let id: String = row.get(1)?;
            let mut parent: Option<String> = row.get(2)?;
            let mut hops = 0;
            while let Some(up) = parent.as_ref().and_then(|p| glued_parent.get(p)) {
                parent = up.clone();
                hops += 1;
                if hops > glued_parent.len() {
                    break;
                }
            }
            let mut raw = serde_json::from_str(&raw).map_err(|source| ViewError::BadRaw {
                path: session.path.clone(),
                entry: id.clone(),
                source,
            })?;
            let rowid: i64 = row.get(0)?;
            crate::store::restore_entry(conn, rowid, &mut raw, with_images)?.map_err(|err| {
                ViewError::BadImagePath {
                    path: session.path.clone(),
                    entry: id.clone(),
                    json_path: err.json_path,
                }
            })?;
            nodes.push(Node {
                rowid,
                id,
                parent,
                kind: row.get(3)?,
                timestamp: row.get(4)?,
                timestamp_ms: row.get(5)?,
                line_no: row.get(6)?,
                raw,
            });
        }
        let mut by_id = HashMap::new();
        let mut labels = HashMap::new();
        for (index, node) in nodes.iter().enumerate() {
            by_id.insert(node.id.clone(), index);
            if node.kind == "label"
                && let Some(target) = node.raw.get("targetId").and_then(Value::as_str)
            {
                match node.raw.get("label").and_then(Value::as_str) {
                    Some(label) if !label.is_empty() => {
                        labels.insert(target.to_owned(), label.to_owned());
                    }
                    _ => {
                        labels.remove(target);
                    }
                }
            }
        }
        let mut images = HashMap::new();
        let mut stmt = conn.prepare(
            "SELECT entry_rowid, json_path, mime_type, byte_len, payload_key FROM images WHERE file_id = ?1",
        )?;
        let mut rows = stmt.query([session.file_id])?;
        while let Some(row) = rows.next()? {
            images.insert(
                (row.get(0)?, row.get(1)?),
                ImageInfo {
                    mime_type: row.get(2)?,
                    byte_len: row.get(3)?,
                    payload_key: row.get(4)?,
                },
            );
        }
        let mut first_kept = HashMap::new();
        let mut stmt = conn.prepare(
            "SELECT entry_rowid, first_kept_entry_id FROM compactions
              WHERE file_id = ?1 AND first_kept_entry_id IS NOT NULL",
        )?;
        let mut rows = stmt.query([session.file_id])?;
        while let Some(row) = rows.next()? {
            first_kept.insert(row.get(0)?, row.get(1)?);
        }
        let mut outside = HashMap::new();
        let file = std::path::Path::new(&session.path);
        for node in &nodes {
            for (_, reference) in crate::outside::entry_refs(&node.raw) {
                if !outside.contains_key(reference.hex()) {
                    let located = crate::outside::locate(file, &reference);
                    outside.insert(reference.hex().to_owned(), located);
                }
            }
        }
        Ok(SessionTree {
            session,
            header,
            nodes,
            by_id,
            labels,
            images,
            first_kept,
            outside,
        })
    }

    /// The stored entries of `path` (session text exact), each image
    /// payload replaced by its placeholder (`show --json`).
    pub fn entries_json(&self, path: &[usize]) -> Vec<Value> {
        path.iter()
            .map(|&index| {
                let node = &self.nodes[index];
                let mut raw = node.raw.clone();
                for ((rowid, json_path), info) in &self.images {
                    if *rowid != node.rowid {
                        continue;
                    }
                    if let Some(object) = crate::normalize::json_path_mut(&mut raw, json_path)
                        .and_then(Value::as_object_mut)
                    {
                        let placeholder =
                            image_placeholder(info.mime_type.as_deref(), info.byte_len);
                        object.insert(info.payload_key.clone(), Value::from(placeholder));
                    }
                }
                raw
            })
            .collect()
    }

    /// Index of the default leaf: the last entry in file order, except
    /// where pi_agent_rust's header names it (`leafId`, when that entry
    /// exists; `""` is "before the first entry": no leaf).
    pub fn leaf(&self) -> Option<usize> {
        match self.header.get("leafId").and_then(Value::as_str) {
            Some("") => None,
            Some(id) if self.by_id.contains_key(id) => self.by_id.get(id).copied(),
            _ => self.nodes.len().checked_sub(1),
        }
    }

    /// Finds an entry by id or unique id prefix.
    pub fn find(&self, id: &str) -> Result<usize, ViewError> {
        if let Some(&index) = self.by_id.get(id) {
            return Ok(index);
        }
        let mut matches: Vec<&String> = self.by_id.keys().filter(|k| k.starts_with(id)).collect();
        matches.sort();
        match matches.as_slice() {
            [one] => Ok(self.by_id[*one]),
            [] => Err(ViewError::UnknownEntry {
                session: self.session.session_id.clone(),
                leaf: id.to_owned(),
            }),
            many => Err(ViewError::AmbiguousEntry {
                session: self.session.session_id.clone(),
                leaf: id.to_owned(),
                candidates: many
                    .iter()
                    .take(CANDIDATES_SHOWN)
                    .map(|s| (*s).clone())
                    .collect(),
                more: many.len().saturating_sub(CANDIDATES_SHOWN),
            }),
        }
    }

    /// The parent index of a node (none for roots, orphans and self-loops).
    pub fn parent_of(&self, index: usize) -> Option<usize> {
        let node = &self.nodes[index];
        let parent = node.parent.as_deref()?;
        if parent == node.id {
            return None;
        }
        self.by_id.get(parent).copied()
    }

    /// Root → `leaf` (Pi's walk), stopping if an entry repeats (a cycle).
    pub fn path_to(&self, leaf: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut current = Some(leaf);
        while let Some(index) = current {
            if !seen.insert(index) {
                break;
            }
            path.push(index);
            current = self.parent_of(index);
        }
        path.reverse();
        path
    }

    /// The leaf of the branch that goes through `node`: the session's own
    /// leaf when its branch does, else the last entry written below `node`
    /// (a leaf: anything below it would have been written later), so that
    /// an entry opened from a search hit is shown in its whole branch, with
    /// what came after it.
    pub fn leaf_through(&self, node: usize) -> usize {
        if let Some(leaf) = self.leaf()
            && self.path_to(leaf).contains(&node)
        {
            return leaf;
        }
        let mut below = vec![false; self.nodes.len()];
        below[node] = true;
        let mut last = node;
        for index in node + 1..self.nodes.len() {
            if self.parent_of(index).is_some_and(|parent| below[parent]) {
                below[index] = true;
                last = index;
            }
        }
        last
    }

    /// Children of every node plus the roots, each sorted by timestamp as
    /// in Pi's `getTree()` (stable: equal times keep file order).
    pub fn children(&self) -> (Vec<usize>, Vec<Vec<usize>>) {
        let mut children = vec![Vec::new(); self.nodes.len()];
        let mut roots = Vec::new();
        for index in 0..self.nodes.len() {
            // Only the last occurrence of a duplicated id is a tree node.
            if self.by_id.get(&self.nodes[index].id) != Some(&index) {
                continue;
            }
            match self.parent_of(index) {
                Some(parent) if parent != index => children[parent].push(index),
                _ => roots.push(index),
            }
        }
        let key = |i: &usize| self.nodes[*i].timestamp_ms.unwrap_or(i64::MIN);
        for list in &mut children {
            list.sort_by_key(key);
        }
        roots.sort_by_key(key);
        (roots, children)
    }
}

/// What one context item is, in Pi's `buildSessionContext` terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKind {
    /// The system message a Pi 1.x compaction keeps (`systemMessage`),
    /// before its summary.
    SystemCheckpoint,
    /// The compaction's summary (first, or right after the checkpoint).
    CompactionSummary,
    /// A `message` entry's stored message.
    Message,
    /// A `custom_message` entry (a `custom` role message).
    Custom,
    /// A `branch_summary` entry with a non-empty summary.
    BranchSummary,
}

/// One message of the context, pointing at its entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextItem {
    pub node: usize,
    pub kind: ContextKind,
    /// The message as Pi puts it into the model's context: the stored one
    /// (with a context edit applied), or the one Pi makes of a summary or a
    /// custom message.
    pub message: Value,
    /// The `context_edit` entry that replaced this message's content.
    pub edited_by: Option<usize>,
}

/// Pi's `buildSessionProjection` (1.5.2) over `path` (root → leaf). The
/// entries: without a compaction, the path; with one, the last compaction,
/// then the path entries from its `firstKeptEntryId` up to it (system
/// messages left out: the compaction keeps its own), then everything after
/// it. Each gives its messages: a compaction (only that first one) its
/// `systemMessage` checkpoint and summary; a message the stored one, with
/// the latest `context_edit` of it among those entries applied (removed
/// when the replacement is null). Pi 0.x files hold neither checkpoints
/// nor edits, so this is also 0.x's `buildSessionContext`.
pub fn build_context(tree: &SessionTree, path: &[usize]) -> Vec<ContextItem> {
    let entries = context_entries(tree, path);
    let mut edits: HashMap<&str, usize> = HashMap::new();
    for &index in &entries {
        let node = &tree.nodes[index];
        if node.kind == "context_edit"
            && let Some(target) = node.raw.get("targetId").and_then(Value::as_str)
        {
            edits.insert(target, index);
        }
    }
    let mut out = Vec::new();
    for (position, &index) in entries.iter().enumerate() {
        let edit = edits.get(tree.nodes[index].id.as_str()).copied();
        out.extend(project(tree, index, position == 0, edit));
    }
    out
}

/// The messages one entry gives (`projectContextEntry`): `first` tells
/// whether a compaction is the one the context starts with (only that one
/// gives its checkpoint and summary); `edit` is the `context_edit` entry
/// that applies to it.
pub fn project(
    tree: &SessionTree,
    index: usize,
    first: bool,
    edit: Option<usize>,
) -> Vec<ContextItem> {
    let node = &tree.nodes[index];
    let raw = &node.raw;
    let time = || Value::from(node.timestamp_ms.unwrap_or(0));
    let mut out = Vec::new();
    let mut push = |kind, message: Value, edited_by| {
        out.push(ContextItem {
            node: index,
            kind,
            message,
            edited_by,
        })
    };
    {
        match node.kind.as_str() {
            "compaction" if first => {
                if let Some(system) = raw.get("systemMessage").filter(|m| m.is_object()) {
                    push(ContextKind::SystemCheckpoint, system.clone(), None);
                }
                let summary = serde_json::json!({
                    "role": "compactionSummary",
                    "summary": raw.get("summary").cloned().unwrap_or(Value::Null),
                    "tokensBefore": raw.get("tokensBefore").cloned().unwrap_or(Value::Null),
                    "timestamp": time(),
                });
                push(ContextKind::CompactionSummary, summary, None);
            }
            "message" => {
                let message = raw.get("message").cloned().unwrap_or(Value::Null);
                if let Some(message) = edited(message, edit.map(|e| &tree.nodes[e].raw)) {
                    push(ContextKind::Message, message, edit);
                }
            }
            "custom_message" => {
                let mut message = serde_json::Map::new();
                message.insert("role".into(), "custom".into());
                for key in ["customType", "content", "display", "details"] {
                    match (key, raw.get(key)) {
                        (_, Some(value)) => {
                            message.insert(key.into(), value.clone());
                        }
                        ("content", None) => {
                            message.insert(key.into(), Value::Array(Vec::new()));
                        }
                        _ => {}
                    }
                }
                message.insert("timestamp".into(), time());
                if let Some(message) =
                    edited(Value::Object(message), edit.map(|e| &tree.nodes[e].raw))
                {
                    push(ContextKind::Custom, message, edit);
                }
            }
            "branch_summary" if truthy(raw.get("summary")) => {
                let summary = serde_json::json!({
                    "role": "branchSummary",
                    "summary": raw.get("summary").cloned().unwrap_or(Value::Null),
                    "fromId": raw.get("fromId").cloned().unwrap_or(Value::Null),
                    "timestamp": time(),
                });
                push(ContextKind::BranchSummary, summary, None);
            }
            _ => {}
        }
    }
    out
}

/// Every `context_edit` of the tree by its target's id, in file order:
/// `(edit entry, whether it removes the target)`.
pub fn edits_by_target(tree: &SessionTree) -> HashMap<&str, Vec<(usize, bool)>> {
    let mut edits: HashMap<&str, Vec<(usize, bool)>> = HashMap::new();
    for (index, node) in tree.nodes.iter().enumerate() {
        if node.kind == "context_edit"
            && let Some(target) = node.raw.get("targetId").and_then(Value::as_str)
        {
            let removes = node.raw.get("replacement").is_none_or(Value::is_null);
            edits.entry(target).or_default().push((index, removes));
        }
    }
    edits
}

/// The entries whose messages form the context (`buildContextEntries`).
fn context_entries(tree: &SessionTree, path: &[usize]) -> Vec<usize> {
    let Some(at) = path
        .iter()
        .rposition(|&index| tree.nodes[index].kind == "compaction")
    else {
        return path.to_vec();
    };
    let compaction = &tree.nodes[path[at]];
    let first_kept = first_kept_id(tree, compaction);
    let mut entries = vec![path[at]];
    let mut found = false;
    for &index in &path[..at] {
        let node = &tree.nodes[index];
        if Some(node.id.as_str()) == first_kept.as_deref() {
            found = true;
        }
        let system = node.kind == "message"
            && node.raw.pointer("/message/role").and_then(Value::as_str) == Some("system");
        if found && !system {
            entries.push(index);
        }
    }
    entries.extend_from_slice(&path[at + 1..]);
    entries
}

/// A message with a context edit's replacement (`projectContextEntry`):
/// `None` when the edit removes it. A string replacement of an assistant
/// or tool result becomes one text block.
fn edited(mut message: Value, edit: Option<&Value>) -> Option<Value> {
    let Some(edit) = edit else {
        return Some(message);
    };
    let replacement = edit.get("replacement").unwrap_or(&Value::Null);
    if replacement.is_null() {
        return None;
    }
    let role = message.get("role").and_then(Value::as_str).unwrap_or("");
    if !matches!(role, "user" | "assistant" | "toolResult" | "custom") {
        return Some(message);
    }
    let content = replacement.get("content").cloned().unwrap_or(Value::Null);
    let content = match content {
        Value::String(text) if matches!(role, "assistant" | "toolResult") => {
            serde_json::json!([{"type": "text", "text": text}])
        }
        other => other,
    };
    if let Some(object) = message.as_object_mut() {
        object.insert("content".into(), content);
    }
    Some(message)
}

/// JavaScript truthiness of a JSON value.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(_) => true,
    }
}

/// `firstKeptEntryId`, or for v1 files the entry the writer resolved from
/// `firstKeptEntryIndex` (Pi's migration: parsed-line index, header = 0).
fn first_kept_id(tree: &SessionTree, compaction: &Node) -> Option<String> {
    compaction
        .raw
        .get("firstKeptEntryId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| tree.first_kept.get(&compaction.rowid).cloned())
}

/// Indexes of the current branch (root → leaf) as a set.
pub fn active_set(tree: &SessionTree) -> HashSet<usize> {
    tree.leaf()
        .map(|leaf| tree.path_to(leaf).into_iter().collect())
        .unwrap_or_default()
}

/// `piidx tree`'s answer: every entry in file order with what a drawing
/// of the tree needs (its children, whether it is on the current branch)
/// and a one-line summary. Drawn by `render::tree`, printed by `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct TreeOutline {
    pub session_id: String,
    pub path: String,
    /// The current leaf (the last entry in file order).
    pub leaf_id: Option<String>,
    /// Indexes into `entries` of the roots, in Pi's order.
    #[serde(skip)]
    pub roots: Vec<usize>,
    pub entries: Vec<OutlineEntry>,
}

/// One entry of a `TreeOutline`.
#[derive(Debug, Clone, Serialize)]
pub struct OutlineEntry {
    pub id: String,
    pub parent_id: Option<String>,
    #[serde(rename = "type")]
    pub entry_type: String,
    pub timestamp: Option<String>,
    pub line_no: i64,
    /// Indexes into `entries` of its children, sorted as Pi's `getTree()`
    /// sorts them (a duplicated id's earlier occurrences have none and are
    /// no one's child: Pi keeps the last).
    #[serde(skip)]
    pub children: Vec<usize>,
    pub child_count: usize,
    /// On the path root → current leaf.
    pub on_branch: bool,
    pub is_leaf: bool,
    /// The entry's latest label.
    pub label: Option<String>,
    /// The `context_edit` entries that change this entry in the context.
    pub edits: Vec<EditMark>,
    /// Type or role, then a text excerpt, on one line.
    pub summary: String,
}

/// A `context_edit` of an entry.
#[derive(Debug, Clone, Serialize)]
pub struct EditMark {
    /// The `context_edit` entry's id.
    pub by: String,
    /// It removes the entry (a null replacement) rather than replacing it.
    pub removes: bool,
}

/// The outline of the whole tree.
pub fn outline(tree: &SessionTree) -> TreeOutline {
    let (roots, mut children) = tree.children();
    let active = active_set(tree);
    let edits = edits_by_target(tree);
    let leaf = tree.leaf();
    let entries = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let kids = std::mem::take(&mut children[index]);
            OutlineEntry {
                id: node.id.clone(),
                parent_id: node.parent.clone(),
                entry_type: node.kind.clone(),
                timestamp: node.timestamp.clone(),
                line_no: node.line_no,
                child_count: kids.len(),
                children: kids,
                on_branch: active.contains(&index),
                is_leaf: Some(index) == leaf,
                label: tree.labels.get(&node.id).cloned(),
                edits: edit_marks(tree, edits.get(node.id.as_str())),
                summary: describe(tree, index),
            }
        })
        .collect();
    TreeOutline {
        session_id: tree.session.session_id.clone(),
        path: tree.session.path.clone(),
        leaf_id: leaf.map(|leaf| tree.nodes[leaf].id.clone()),
        roots,
        entries,
    }
}

/// The edits of one entry (`edits_by_target`'s list) by entry id.
pub fn edit_marks(tree: &SessionTree, edits: Option<&Vec<(usize, bool)>>) -> Vec<EditMark> {
    edits
        .into_iter()
        .flatten()
        .map(|&(edit, removes)| EditMark {
            by: tree.nodes[edit].id.clone(),
            removes,
        })
        .collect()
}

/// A one-line description of an entry: type or role, then a text excerpt.
pub fn describe(tree: &SessionTree, index: usize) -> String {
    let node = &tree.nodes[index];
    let raw = &node.raw;
    let text = |v: Option<&Value>| one_line(&content_text(v));
    match node.kind.as_str() {
        "message" => {
            let message = raw.get("message");
            let role = message
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let field = |key: &str| {
                one_line(
                    message
                        .and_then(|m| m.get(key))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                )
            };
            let body = match role {
                "bashExecution" => format!("$ {}", field("command")),
                "pythonExecution" => format!(">>> {}", field("code")),
                "fileMention" => message
                    .and_then(|m| m.get("files"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|file| file.get("path").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(", "),
                "toolResult" => format!(
                    "{} → {}",
                    message
                        .and_then(|m| m.get("toolName"))
                        .and_then(Value::as_str)
                        .unwrap_or("?"),
                    text(message.and_then(|m| m.get("content")))
                ),
                "assistant" => {
                    let content = message.and_then(|m| m.get("content"));
                    let mut body = text(content);
                    let calls: Vec<&str> = content
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
                        .filter_map(|b| b.get("name").and_then(Value::as_str))
                        .collect();
                    if !calls.is_empty() {
                        body = format!("{body} [calls {}]", calls.join(", "));
                    }
                    body
                }
                "system" => {
                    let count = |key: &str| match message.and_then(|m| m.get(key)) {
                        Some(Value::Object(map)) => map.len(),
                        Some(Value::Array(list)) => list.len(),
                        _ => 0,
                    };
                    let mut body = text(message.and_then(|m| m.get("content")));
                    let (sections, tools) = (count("sections"), count("toolsAdded"));
                    if sections + tools > 0 {
                        body = format!("{body} [{sections} sections, {tools} tools]");
                    }
                    body
                }
                _ => text(message.and_then(|m| m.get("content"))),
            };
            format!("{role}: {}", body.trim())
        }
        "compaction" | "branch_summary" => format!(
            "{}: {}",
            node.kind,
            one_line(raw.get("summary").and_then(Value::as_str).unwrap_or(""))
        ),
        "custom_message" => format!(
            "custom_message {}: {}",
            raw.get("customType").and_then(Value::as_str).unwrap_or(""),
            text(raw.get("content"))
        ),
        // oh-my-pi writes `model: "provider/id"`, Pi `provider` and `modelId`.
        "model_change" => match raw.get("model").and_then(Value::as_str) {
            Some(model) => format!("model → {model}"),
            None => format!(
                "model → {}/{}",
                raw.get("provider").and_then(Value::as_str).unwrap_or("?"),
                raw.get("modelId").and_then(Value::as_str).unwrap_or("?")
            ),
        },
        "title_change" => format!(
            "title = {}",
            one_line(raw.get("title").and_then(Value::as_str).unwrap_or(""))
        ),
        "mode_change" => format!(
            "mode → {}",
            raw.get("mode").and_then(Value::as_str).unwrap_or("?")
        ),
        "ttsr_injection" => format!(
            "rules injected: {}",
            one_line(
                &raw.get("injectedRules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        ),
        "thinking_level_change" => format!(
            "thinking → {}",
            raw.get("thinkingLevel")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        "label" => format!(
            "label {} = {}",
            raw.get("targetId").and_then(Value::as_str).unwrap_or("?"),
            raw.get("label")
                .and_then(Value::as_str)
                .unwrap_or("(cleared)")
        ),
        "session_info" => format!(
            "name = {}",
            raw.get("name")
                .and_then(Value::as_str)
                .unwrap_or("(cleared)")
        ),
        "custom" => format!(
            "custom {}",
            raw.get("customType").and_then(Value::as_str).unwrap_or("")
        ),
        "context_edit" => {
            let target = raw.get("targetId").and_then(Value::as_str).unwrap_or("?");
            match raw.get("replacement") {
                None | Some(Value::Null) => format!("context_edit {target}: removed"),
                Some(replacement) => format!(
                    "context_edit {target} → {}",
                    text(replacement.get("content"))
                ),
            }
        }
        "usage" => format!(
            "usage {} {}{}",
            raw.get("kind").and_then(Value::as_str).unwrap_or(""),
            raw.get("model").and_then(Value::as_str).unwrap_or(""),
            raw.get("note")
                .and_then(Value::as_str)
                .map(|note| format!(": {}", one_line(note)))
                .unwrap_or_default()
        ),
        other => other.to_owned(),
    }
}

/// String content as-is, or the text blocks joined with " " (Pi's rule).
pub fn content_text(content: Option<&Value>) -> String {
    crate::normalize::pi_message_text(content)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
