//! The artifacts pass of `sync`: pi-subagents files in
//! `<root>/<dir>/subagent-artifacts/` (spec §1.4, §10.2).
//!
//! These are not sessions (discovery never enters that directory). Each
//! `*_input.md`, `*_output.md`, `*_meta.json` / `*_metadata.json`,
//! `*_transcript.jsonl` and `*.jsonl` becomes one `subagent_artifacts` row;
//! `_output.md` text is searchable through `artifact_fts`. An artifact
//! `.jsonl` whose header is followed by agent events is recorded as an
//! `event_stream`. A file is re-read only when its size or mtime changed, and
//! its row goes when the file goes. Afterwards the subagent links are
//! re-derived (`Store::link_subagents`) when rows changed since the last
//! time (`Writer::links_stale`). When the index redacts, an
//! artifact's text and metadata are redacted before they are stored (they
//! get no `redactions` rows: those point at session entries).
//!
//! The same pass reads oh-my-pi's full tool outputs: omp keeps a truncated
//! output in the session and the whole one in `<N>.<tool>.log` in the
//! session's artifact folder (the session file without `.jsonl`, shared
//! with its subagents), which the tool result names as `artifact://<N>`
//! and `details.meta.truncation.artifactId` (omp's `ArtifactManager`,
//! `session/artifacts.ts`). Each becomes a row of kind `tool_output`
//! (`base` = N, `session_path` = the session file), its text searchable,
//! linked to that tool result by `Store::link_subagents`; `search` finds
//! it as part of the tool result. The JSONL is never changed by it, so
//! export is untouched, and a `.log` that appears, changes or goes later
//! is read or dropped here like any artifact.

use std::collections::HashSet;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::normalize;
use crate::secrets::Redactor;
use crate::store::{ArtifactRow, StoreError, Writer};

/// Artifact text kept for search is cut at this many bytes.
const TEXT_CAP: u64 = 16 << 20;
/// Longest `.jsonl` line read to classify a file.
const PROBE_LINE_CAP: u64 = 4 << 20;

/// What one artifacts pass did.
#[derive(Debug, Default, Clone)]
pub struct ArtifactReport {
    pub seen: u64,
    pub read: u64,
    pub removed: u64,
    /// The session files whose omp full output (`<N>.<tool>.log`) went
    /// away in this pass: sync warns about the tool results left without.
    pub outputs_gone: Vec<String>,
}

/// Indexes the artifact directories of every root and relinks runs.
pub fn sync(
    store: &Writer,
    roots: &[PathBuf],
    full: bool,
    redactor: Option<&Redactor>,
) -> Result<ArtifactReport, StoreError> {
    let mut states = store.artifact_states()?;
    let mut report = ArtifactReport::default();
    for root in roots {
        let files = artifact_files(root)
            .into_iter()
            .map(|(file, metadata)| (file, metadata, None));
        let omp_sessions = store.omp_session_files(&root.to_string_lossy())?;
        let outputs = tool_output_files(&omp_sessions)
            .into_iter()
            .map(|(file, metadata, session)| (file, metadata, Some(session)));
        for (file, metadata, session) in files.chain(outputs) {
            report.seen += 1;
            let path = file.to_string_lossy().into_owned();
            let (size, mtime_ns) = stat(&metadata);
            let unchanged = states.get_mut(&path).is_some_and(|state| {
                state.seen = true;
                state.size == size && state.mtime_ns == mtime_ns
            });
            if unchanged && !full {
                continue;
            }
            let read = match &session {
                Some(session) => read_tool_output(root, &file, session, size, mtime_ns),
                None => read_artifact(root, &file, size, mtime_ns),
            };
            if let Some(mut row) = read {
                if let Some(redactor) = redactor {
                    redact_artifact(&mut row, redactor);
                }
                store.mark_links_stale(&path)?;
                store.upsert_artifact(&row)?;
                report.read += 1;
            }
        }
    }
    let synced: HashSet<String> = roots
        .iter()
        .map(|root| root.to_string_lossy().into_owned())
        .collect();
    for (path, state) in &states {
        if synced.contains(&state.root) && !state.seen {
            store.mark_links_stale(path)?;
            store.remove_artifact(state.artifact_id)?;
            report.removed += 1;
            let file = Path::new(path);
            if output_id(&name_of(file)).is_some()
                && let Some(folder) = file.parent()
            {
                report
                    .outputs_gone
                    .push(format!("{}.jsonl", folder.display()));
            }
        }
    }
    store.purge_artifact_text()?;
    // Links are derived from rows: only when some changed (here or in an
    // earlier sync that did not get this far).
    if store.links_stale()? {
        store.link_subagents()?;
        store.links_fresh()?;
    }
    Ok(report)
}

/// Secrets out of an artifact's text and metadata.
fn redact_artifact(row: &mut ArtifactRow, redactor: &Redactor) {
    for text in [&mut row.text, &mut row.meta_json].into_iter().flatten() {
        if let Some((redacted, _)) = redactor.redact(text) {
            *text = redacted;
        }
    }
}

/// Regular files directly inside `<root>/*/subagent-artifacts/` whose
/// names say they are artifacts, with their `stat` (one per file: a sync
/// that finds nothing new must cost no more).
fn artifact_files(root: &Path) -> Vec<(PathBuf, fs::Metadata)> {
    let mut files = Vec::new();
    let Ok(dirs) = fs::read_dir(root) else {
        return files;
    };
    for dir in dirs.flatten() {
        let artifacts = dir.path().join("subagent-artifacts");
        files.extend(files_named(&artifacts, |name| kind_of(name).is_some()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// omp's full tool outputs: `<N>.<tool>.log` files in the folder `D` of
/// each omp session file `D.jsonl`, each with its `stat` and the session
/// file. The folders come from the sessions the index knows, so they are
/// found at any depth below the root, and only omp's are listed. In the
/// order of `sessions` (the index's), each folder's by name: sorting every
/// output's path at once, component by component, was a large part of a
/// sync that found nothing new among many outputs (docs/performance.md).
fn tool_output_files(sessions: &[String]) -> Vec<(PathBuf, fs::Metadata, PathBuf)> {
    let mut files = Vec::new();
    for session in sessions {
        let Some(folder) = session.strip_suffix(".jsonl") else {
            continue;
        };
        let session = PathBuf::from(session);
        let mut outputs = files_named(Path::new(folder), |name| output_id(name).is_some());
        outputs.sort_by(|a, b| a.0.cmp(&b.0));
        files.extend(
            outputs
                .into_iter()
                .map(|(path, metadata)| (path, metadata, session.clone())),
        );
    }
    files
}

/// The regular files directly in `dir` whose names `keep` accepts, with
/// their `stat`; none when `dir` cannot be listed. Links are followed, as
/// the sessions' walk follows them.
fn files_named(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<(PathBuf, fs::Metadata)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| keep(&entry.file_name().to_string_lossy()))
        .filter_map(|entry| {
            // Stated through the directory (`fstatat`): a lookup of the
            // whole path per file was most of a sync that found nothing
            // new among many outputs. A link is stated by its path, to
            // follow it.
            let linked = entry.file_type().ok()?.is_symlink();
            let metadata = if linked {
                fs::metadata(entry.path())
            } else {
                entry.metadata()
            };
            metadata
                .ok()
                .filter(fs::Metadata::is_file)
                .map(|metadata| (entry.path(), metadata))
        })
        .collect()
}

/// The artifact number of an omp full output's file name,
/// `<N>.<tool>.log` (omp's own test: `^(\d+)\..*\.log$`).
pub fn output_id(name: &str) -> Option<&str> {
    let (id, rest) = name.split_once('.')?;
    let tool = rest.strip_suffix(".log")?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !tool.is_empty()).then_some(id)
}

/// The output numbers `text` names as `artifact://<N>`, where the entry's
/// JSON, as written, has the number followed by `]`, `"`, `\`, a space,
/// `:` or `)`. `json` says `text` is JSON text (a line); otherwise it is a
/// string's own text, whose JSON form ends with `"` and writes `"`, `\` and
/// control characters with a `\` first.
pub fn named_outputs(text: &[u8], json: bool) -> impl Iterator<Item = &str> {
    const NAME: &[u8] = b"artifact://";
    memchr::memmem::find_iter(text, NAME).filter_map(move |at| {
        let rest = &text[at + NAME.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let ended = match rest.get(digits) {
            Some(b']' | b'"' | b'\\' | b' ' | b':' | b')') => true,
            Some(&byte) => !json && byte < 0x20,
            None => !json,
        };
        (digits > 0 && ended)
            .then(|| std::str::from_utf8(&rest[..digits]).ok())
            .flatten()
    })
}

fn read_tool_output(
    root: &Path,
    file: &Path,
    session: &Path,
    size: u64,
    mtime_ns: i64,
) -> Option<ArtifactRow> {
    let name = name_of(file);
    let id = output_id(&name)?.to_owned();
    let project_dir = file
        .strip_prefix(root)
        .ok()
        .and_then(|rel| rel.components().next())
        .map(|dir| dir.as_os_str().to_string_lossy().into_owned());
    let mut row = ArtifactRow {
        path: file.to_string_lossy().into_owned(),
        root: root.to_string_lossy().into_owned(),
        project_dir,
        name,
        base: Some(id),
        kind: "tool_output",
        size,
        mtime_ns,
        session_path: Some(session.to_string_lossy().into_owned()),
        ..ArtifactRow::default()
    };
    match read_text(file) {
        Ok(text) => row.text = Some(text),
        Err(err) => row.note = Some(format!("cannot read: {err}")),
    }
    Some(row)
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn stat(metadata: &fs::Metadata) -> (u64, i64) {
    use std::os::unix::fs::MetadataExt;
    (
        metadata.len(),
        metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec(),
    )
}

/// `(kind, base)` from a file name; `None` for files that are not artifacts.
/// `.jsonl` files come back as `jsonl` and are refined by their content.
pub fn kind_of(name: &str) -> Option<(&'static str, &str)> {
    const SUFFIXES: &[(&str, &str)] = &[
        ("_input.md", "input"),
        ("_output.md", "output"),
        ("_meta.json", "meta"),
        ("_metadata.json", "meta"),
        ("_transcript.jsonl", "transcript"),
        (".jsonl", "jsonl"),
    ];
    SUFFIXES.iter().find_map(|(suffix, kind)| {
        name.strip_suffix(suffix)
            .filter(|base| !base.is_empty())
            .map(|base| (*kind, base))
    })
}

/// `<runId>_<agent>[_<index>]` → `(runId, agent)`.
pub fn split_base(base: &str) -> (Option<String>, Option<String>) {
    let Some((run_id, rest)) = base.split_once('_') else {
        return (None, None);
    };
    let agent = match rest.rsplit_once('_') {
        Some((agent, index)) if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) => {
            agent
        }
        _ => rest,
    };
    let agent = (!agent.is_empty()).then(|| agent.to_owned());
    (Some(run_id.to_owned()), agent)
}

fn read_artifact(root: &Path, file: &Path, size: u64, mtime_ns: i64) -> Option<ArtifactRow> {
    let name = name_of(file);
    let (mut kind, base) = kind_of(&name)?;
    let (mut run_id, mut agent) = split_base(base);
    let project_dir = file
        .strip_prefix(root)
        .ok()
        .and_then(|rel| rel.components().next())
        .map(|dir| dir.as_os_str().to_string_lossy().into_owned());
    let mut row = ArtifactRow {
        path: file.to_string_lossy().into_owned(),
        root: root.to_string_lossy().into_owned(),
        project_dir,
        name: name.clone(),
        base: Some(base.to_owned()),
        size,
        mtime_ns,
        ..ArtifactRow::default()
    };
    match kind {
        "output" => match read_text(file) {
            Ok(text) => row.text = Some(text),
            Err(err) => row.note = Some(format!("cannot read: {err}")),
        },
        "meta" => match read_text(file) {
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(meta) => {
                    run_id = normalize::str_field(&meta, "runId").or(run_id);
                    agent = normalize::str_field(&meta, "agent").or(agent);
                    row.meta_json = Some(meta.to_string());
                }
                Err(err) => row.note = Some(format!("not JSON: {err}")),
            },
            Err(err) => row.note = Some(format!("cannot read: {err}")),
        },
        "jsonl" => {
            let (probed, note) = probe_jsonl(file);
            kind = probed;
            row.note = note;
        }
        _ => {}
    }
    row.kind = kind;
    row.run_id = run_id;
    row.agent = agent;
    Some(row)
}

fn read_text(file: &Path) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    fs::File::open(file)?
        .take(TEXT_CAP)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Classifies an artifact `.jsonl` from its first two JSON lines:
/// `event_stream` (session header, then an agent event: `pi --mode json`
/// output), `session_copy` (header then entries), or `jsonl`.
fn probe_jsonl(file: &Path) -> (&'static str, Option<String>) {
    let Ok(handle) = fs::File::open(file) else {
        return ("jsonl", Some("cannot open".into()));
    };
    let mut reader = BufReader::new(handle);
    let mut objects = Vec::new();
    while objects.len() < 2 {
        let mut line = Vec::new();
        match (&mut reader)
            .take(PROBE_LINE_CAP)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(object) => objects.push(object),
            Err(_) => break,
        }
    }
    let header = objects.first().and_then(normalize::header);
    match (header, objects.get(1)) {
        (Some(_), Some(next)) if normalize::is_event(next) => ("event_stream", None),
        (Some(_), Some(_)) => (
            "session_copy",
            Some("starts like a session; not indexed as one (artifact directory)".into()),
        ),
        _ => ("jsonl", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A number is named where `instr` over the entry's JSON would find it
    /// with one of the six characters after it; a string's own text is read
    /// as its JSON form (`"` at its end, `\` before a control character).
    #[test]
    fn outputs_are_named_as_the_json_says() {
        fn named(text: &str, json: bool) -> Vec<&str> {
            named_outputs(text.as_bytes(), json).collect()
        }
        let json = r#"{"text":"cut [full: artifact://12] see artifact://3\n and artifact://4.x artifact://5""#;
        assert_eq!(named(json, true), ["12", "3", "5"]);
        assert_eq!(named("artifact://7", true), Vec::<&str>::new());
        assert_eq!(
            named(
                "a artifact://1\nb artifact://2\"c artifact://3)d artifact://x] artifact://4",
                false
            ),
            ["1", "2", "3", "4"]
        );
        assert_eq!(
            named("artifact://8. artifact://9a", false),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn names_give_kind_base_run_and_agent() {
        assert_eq!(
            kind_of("a1b2c3d4_worker_output.md"),
            Some(("output", "a1b2c3d4_worker"))
        );
        assert_eq!(
            kind_of("e5f6a7b8_tester_1_transcript.jsonl"),
            Some(("transcript", "e5f6a7b8_tester_1"))
        );
        assert_eq!(kind_of("x_meta.json"), Some(("meta", "x")));
        assert_eq!(kind_of(".last-cleanup"), None);
        assert_eq!(output_id("0.bash.log"), Some("0"));
        assert_eq!(output_id("12.mcp_x.y.log"), Some("12"));
        assert_eq!(output_id("draft.txt"), None);
        assert_eq!(output_id("0-Explore.jsonl"), None);
        assert_eq!(output_id("3.log"), None);
        assert_eq!(
            split_base("e5f6a7b8_code_reviewer_0"),
            (Some("e5f6a7b8".into()), Some("code_reviewer".into()))
        );
        assert_eq!(
            split_base("a1b2c3d4_worker"),
            (Some("a1b2c3d4".into()), Some("worker".into()))
        );
    }
}
