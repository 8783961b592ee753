//! `piidx doctor [--fix]`: is the index sound, and does it still say what the
//! session files say?
//!
//! Checks, in order: the file opens as SQLite (`PRAGMA quick_check`), it is a
//! piidx database of a schema this build knows, the FTS5 index matches the
//! indexed text (`integrity-check`), the fork copies (`copies` columns) match
//! a recount, and every file's rows (entries, parse errors, session header)
//! match a fresh re-read of the file up to the stored offset. The re-read
//! reuses `ingest::ingest` and only counts; it writes nothing, so it does
//! not deflate what it reads. The files are read on rayon's workers, each
//! with a connection of its own, while the main thread runs the index's
//! own checks (and `fts_check` each shard's on a thread of its own); the
//! findings are put in path order, as a sequential check gave them.
//!
//! `--fix` repairs with the sync machinery: differing files are marked stale
//! (`parser_version = 0`) and their roots synced; a failing FTS index is
//! rebuilt; wrong `copies` are recounted; a database that is damaged or not
//! SQLite is rebuilt from all its roots into `<db>.rebuild-<pid>` and renamed
//! over the old one, which is kept as `<db>.broken-<unix time>`. At every
//! moment a database is at `<db>`.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rayon::prelude::*;
use serde::Serialize;

use crate::ingest::{self, FileStatus, IngestOptions, Start, Target};
use crate::read::Fingerprint;
use crate::roots::Root;
use crate::store::{APPLICATION_ID, FileState, SCHEMA_VERSION, StoreError, Writer};
use crate::sync::{self, SyncError, SyncOptions};

#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub db: PathBuf,
    pub fix: bool,
    /// Roots to rebuild from when the database cannot say (added to the ones it records).
    pub roots: Vec<PathBuf>,
    pub max_line_bytes: usize,
    pub lock_wait: Duration,
    /// Texts that must be nowhere in the index's files (`--absent`).
    pub absent: Vec<String>,
}

/// One file whose rows differ from its source.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileDiff {
    pub file_id: i64,
    pub path: String,
    pub root: String,
    pub reason: String,
    pub db_entries: i64,
    pub db_parse_errors: i64,
    pub file_entries: i64,
    pub file_parse_errors: i64,
}

/// What one pass of checks found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Findings {
    /// Files of the index that other users may read or write.
    pub exposed: Vec<ExposedFile>,
    /// Files (the database, its shards) left with the unfinished write of a
    /// killed piidx: nothing else is checked until they are rolled back.
    pub unfinished_writes: Vec<String>,
    /// The file cannot be used as a database (not SQLite, corrupt).
    pub broken: Option<String>,
    pub application_id: Option<i64>,
    pub schema_version: Option<i64>,
    /// The schema is older than this build's (sync upgrades it).
    pub schema_outdated: bool,
    /// `PRAGMA quick_check` findings; empty when sound.
    pub quick_check: Vec<String>,
    /// The FTS5 integrity-check error, if any.
    pub fts: Option<String>,
    /// Usage and tool-call rows whose `copies` (fork copies) is not what
    /// their rows say.
    pub stale_copies: i64,
    /// A first sync was cut short: the fork copies are counted when it
    /// ends (`stale_copies` is not checked until then).
    pub first_sync_unfinished: bool,
    pub files_checked: u64,
    pub files_differing: Vec<FileDiff>,
    /// `--absent` texts found in a file of the index.
    pub text_present: Vec<TextFound>,
    /// Files the index holds as skipped (not sessions), with why; not a
    /// problem, but never silent.
    pub skipped: Vec<crate::sync::SkippedFile>,
    /// What sessions name outside their JSONL that is not there (omp's full
    /// tool outputs, `N.<tool>.log`; images in omp's blob store or the
    /// port's `.blobs/`): warnings, not problems (the session is indexed
    /// whole; only that text is not searchable, that image not shown).
    pub missing_outside: Vec<String>,
}

/// Where an `--absent` text still is; `text` masked past its first four
/// characters (it may be a secret).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TextFound {
    pub text: String,
    pub path: String,
    pub offset: u64,
}

impl Findings {
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for file in &self.exposed {
            out.push(format!(
                "{} can be read or written by other users (mode {}); `piidx doctor --fix` makes it private",
                file.path, file.mode
            ));
        }
        for path in &self.unfinished_writes {
            out.push(format!(
                "{path} holds the unfinished write of a piidx that was killed (a hot journal); `piidx doctor --fix` rolls it back (so does any piidx command that may write it)"
            ));
        }
        if let Some(broken) = &self.broken {
            out.push(format!("database is damaged: {broken}"));
        }
        if self.schema_outdated {
            out.push(format!(
                "schema {} is older than {SCHEMA_VERSION}; `piidx sync` upgrades it",
                self.schema_version.unwrap_or(0)
            ));
        }
        if let Some(fts) = &self.fts {
            out.push(format!("full-text index does not match the text: {fts}"));
        }
        if self.first_sync_unfinished {
            out.push(
                "the first sync was cut short: fork copies are counted when it ends; `piidx sync` finishes it"
                    .to_owned(),
            );
        }
        if self.stale_copies > 0 {
            out.push(format!(
                "{} usage or tool-call rows count fork copies wrongly (column `copies`)",
                self.stale_copies
            ));
        }
        for diff in &self.files_differing {
            out.push(format!("{}: {}", diff.path, diff.reason));
        }
        for found in &self.text_present {
            out.push(format!(
                "{} is still in {} (byte {}): a session the index holds has it, or one deleted while a reader held the index (the next `piidx sync` purges it)",
                found.text, found.path, found.offset
            ));
        }
        out
    }
}

/// A file of the index with group or other permission bits (`mode` is octal's value).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExposedFile {
    pub path: String,
    pub mode: String,
}

/// The outcome of `doctor`.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    pub db: String,
    /// Problems found by the first pass.
    pub problems: Vec<String>,
    pub findings: Findings,
    /// Repairs done (with --fix).
    pub fixed: Vec<String>,
    /// Problems a second pass still finds after the repairs.
    pub remaining: Vec<String>,
    /// Where the damaged database was kept, when it was rebuilt.
    pub backup: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error(
        "{db} must be rebuilt but no sessions root is known (none recorded in it, or none exists); pass --root DIR"
    )]
    NoRoots { db: PathBuf },
    #[error("cannot read the files of {path} to look for --absent texts")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot make {path} private; run chmod go-rwx on it yourself")]
    MakePrivate {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot {what} {path} (the old database is kept at {db})")]
    Io {
        what: &'static str,
        path: PathBuf,
        db: PathBuf,
        source: std::io::Error,
    },
}

pub fn run(options: &DoctorOptions) -> Result<DoctorReport, DoctorError> {
    let db = &options.db;
    if !db.exists() {
        return Err(StoreError::Missing { path: db.clone() }.into());
    }
    let _lock = if options.fix {
        Some(sync::acquire_lock(db, options.lock_wait)?)
    } else {
        None
    };
    let mut findings = diagnose(db, options.max_line_bytes)?;
    findings.text_present = find_texts(db, &options.absent)?;
    let problems = findings.problems();
    let mut report = DoctorReport {
        db: db.display().to_string(),
        problems: problems.clone(),
        findings: findings.clone(),
        fixed: Vec::new(),
        remaining: problems.clone(),
        backup: None,
    };
    if !options.fix || problems.is_empty() {
        return Ok(report);
    }
    for file in &findings.exposed {
        make_private(Path::new(&file.path))?;
        report
            .fixed
            .push(format!("made {} private (chmod go-rwx)", file.path));
    }
    if !findings.unfinished_writes.is_empty() {
        for path in &findings.unfinished_writes {
            crate::store::roll_back(Path::new(path))?;
            report
                .fixed
                .push(format!("rolled back the unfinished write in {path}"));
        }
        findings = diagnose(db, options.max_line_bytes)?;
    }
    if findings.broken.is_some() {
        let backup = rebuild(options, &findings)?;
        report.fixed.push(format!(
            "rebuilt {} from its roots; the damaged file is kept at {}",
            db.display(),
            backup.display()
        ));
        report.backup = Some(backup.display().to_string());
    } else {
        if findings.schema_outdated {
            Writer::open(db)?;
            report
                .fixed
                .push(format!("upgraded the schema to {SCHEMA_VERSION}"));
        }
        if findings.schema_outdated {
            findings = diagnose(db, options.max_line_bytes)?;
        }
        if !findings.files_differing.is_empty() {
            reindex(options, &findings.files_differing)?;
            report.fixed.push(format!(
                "re-indexed {} file(s) whose rows differed from the file",
                findings.files_differing.len()
            ));
        }
        let store = Writer::open_for_doctor(db)?;
        if store.bulk_load_unfinished()? {
            store.end_bulk_load()?;
            report
                .fixed
                .push("counted the fork copies of the cut-short first sync".into());
        }
        if findings.fts.is_some() || store.fts_check().is_some() {
            store.rebuild_fts()?;
            report.fixed.push("rebuilt the full-text index".into());
        }
        let stale = store.stale_copies()?;
        if stale > 0 {
            store.recount_copies()?;
            report
                .fixed
                .push(format!("recounted the fork copies of {stale} rows"));
        }
    }
    let mut after = diagnose(db, options.max_line_bytes)?;
    after.text_present = find_texts(db, &options.absent)?;
    report.remaining = after.problems();
    Ok(report)
}

/// Every place one of `texts` is found in the index's files.
fn find_texts(db: &Path, texts: &[String]) -> Result<Vec<TextFound>, DoctorError> {
    let mut found = Vec::new();
    for text in texts {
        let places = crate::private::find_text(db, text).map_err(|source| DoctorError::Read {
            path: db.to_owned(),
            source,
        })?;
        let masked: String = text.chars().take(4).chain("…".chars()).collect();
        found.extend(places.into_iter().map(|(path, offset)| TextFound {
            text: masked.clone(),
            path: path.display().to_string(),
            offset,
        }));
    }
    Ok(found)
}

/// Takes group and other permissions off one of the index's files.
fn make_private(path: &Path) -> Result<(), DoctorError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| DoctorError::MakePrivate {
        path: path.to_owned(),
        source,
    };
    let mode = std::fs::metadata(path).map_err(io)?.permissions().mode();
    std::fs::set_permissions(
        path,
        std::fs::Permissions::from_mode(mode & !crate::private::UMASK),
    )
    .map_err(io)
}

/// One pass of checks. Errors only for what doctor cannot judge or must not
/// touch: a database of another program or of a newer piidx.
pub fn diagnose(db: &Path, max_line_bytes: usize) -> Result<Findings, DoctorError> {
    // Reading past a hot journal would roll it back: look, and stop there.
    let mut findings = Findings {
        exposed: crate::private::exposed(db)
            .into_iter()
            .map(|(path, mode)| ExposedFile {
                path: path.display().to_string(),
                mode: format!("{mode:04o}"),
            })
            .collect(),
        unfinished_writes: crate::store::unfinished_writes(db)
            .iter()
            .map(|path| path.display().to_string())
            .collect(),
        ..Findings::default()
    };
    if !findings.unfinished_writes.is_empty() {
        return Ok(findings);
    }
    let broken = |err: StoreError, findings: &mut Findings| -> Result<(), DoctorError> {
        if err.is_broken_database() {
            findings.broken = Some(crate::error_chain(&err));
            Ok(())
        } else {
            Err(err.into())
        }
    };
    let store = match Writer::open_for_doctor(db) {
        Ok(store) => store,
        Err(err) => {
            broken(err, &mut findings)?;
            return Ok(findings);
        }
    };
    let identity = match store.identity() {
        Ok(identity) => identity,
        Err(err) => {
            broken(err, &mut findings)?;
            return Ok(findings);
        }
    };
    findings.application_id = Some(identity.application_id);
    findings.schema_version = Some(identity.user_version);
    let foreign = if identity.application_id == 0 {
        identity.has_tables
    } else {
        identity.application_id != APPLICATION_ID
    };
    if foreign {
        return Err(StoreError::Foreign {
            path: db.to_owned(),
        }
        .into());
    }
    if identity.user_version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: db.to_owned(),
            found: identity.user_version,
            known: SCHEMA_VERSION,
        }
        .into());
    }
    match store.quick_check() {
        Ok(found) if found.is_empty() => {}
        Ok(found) => {
            findings.broken = Some(format!("quick_check: {}", found.join("; ")));
            findings.quick_check = found;
            return Ok(findings);
        }
        Err(err) => {
            broken(err, &mut findings)?;
            return Ok(findings);
        }
    }
    if identity.user_version < SCHEMA_VERSION {
        findings.schema_outdated = true;
        return Ok(findings);
    }
    let states = store.file_states()?;
    let counts = store.file_counts()?;
    // A file is read again as sync read it: with the index's redaction.
    let read_options = IngestOptions {
        max_line_bytes,
        redactor: sync::redactor_for(store.redaction(false)?),
        // Only `raw` is compared: how a shared value is stored is not.
        deflate: false,
    };
    let mut states: Vec<FileState> = states
        .into_values()
        .filter(|state| state.stat.status != FileStatus::Deleted)
        .collect();
    states.sort_by(|a, b| Path::new(&a.stat.path).cmp(Path::new(&b.stat.path)));
    // The files are read again on the rayon workers while this thread runs
    // the index's own checks: the two are independent, and each takes
    // seconds of one core on a large index.
    let recounts = std::thread::scope(|scope| {
        let recounts = scope.spawn(|| recount_all(db, &states, &read_options));
        let checked = check_index(&store, &mut findings);
        let recounts = recounts
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        checked.map(|()| recounts)
    })?;
    for (state, recounted) in states.iter().zip(recounts) {
        let stat = &state.stat;
        findings.files_checked += 1;
        let have = counts.get(&stat.file_id).copied().unwrap_or_default();
        let diff = |reason: String, want: Recount| FileDiff {
            file_id: stat.file_id,
            path: Path::new(&stat.path).display().to_string(),
            root: stat.root.to_string(),
            reason,
            db_entries: have.entries,
            db_parse_errors: have.parse_errors,
            file_entries: want.entries,
            file_parse_errors: want.parse_errors,
        };
        let want = match recounted {
            Recounted::Skipped(reason) => {
                findings.skipped.push(crate::sync::SkippedFile {
                    path: Path::new(&stat.path).display().to_string(),
                    reason,
                });
                if have.entries + have.parse_errors > 0 || have.has_session {
                    findings.files_differing.push(diff(
                        "skipped, but rows are indexed for it".into(),
                        Recount::default(),
                    ));
                }
                continue;
            }
            Recounted::Differs(reason) => {
                findings
                    .files_differing
                    .push(diff(reason, Recount::default()));
                continue;
            }
            Recounted::Read(want) => want,
        };
        let mut wrong = Vec::new();
        if want.entries != have.entries {
            wrong.push(format!(
                "{} entries (file has {})",
                have.entries, want.entries
            ));
        }
        if want.parse_errors != have.parse_errors {
            wrong.push(format!(
                "{} parse errors (file has {})",
                have.parse_errors, want.parse_errors
            ));
        }
        if want.header != have.has_session {
            wrong.push(if have.has_session {
                "a session row, but the file has no header".into()
            } else {
                "no session row, but the file has a header".into()
            });
        }
        if let Some(line) = want.first_raw_difference {
            wrong.push(format!(
                "{} entries whose stored JSON differs from the file (the first on line {line})",
                want.raw_differences
            ));
        }
        if want.unindexed > 0 {
            let size = want.size;
            wrong.push(format!(
                "only bytes 0..{} of {size} indexed: {} complete line(s) after them are not in the index; {}",
                state.cursor.offset,
                want.unindexed,
                if same_stat(state, want.size, want.mtime_ns) {
                    "`piidx doctor --fix` indexes them"
                } else {
                    "`piidx sync` indexes them"
                }
            ));
        }
        if !wrong.is_empty() {
            findings.files_differing.push(diff(
                format!("index differs: it has {}", wrong.join(", ")),
                want,
            ));
        }
    }
    Ok(findings)
}

/// The index's checks beyond `quick_check`: its full-text indexes, the
/// fork copies, the full outputs and images kept beside the sessions.
fn check_index(store: &Writer, findings: &mut Findings) -> Result<(), DoctorError> {
    findings.fts = store.fts_check();
    findings.first_sync_unfinished = store.bulk_load_unfinished()?;
    if !findings.first_sync_unfinished {
        findings.stale_copies = store.stale_copies()?;
    }
    for (path, line, id) in store.missing_tool_outputs()? {
        findings
            .missing_outside
            .push(crate::outside::missing_output_message(&path, line, &id));
    }
    for (path, line, raw) in store.outside_image_entries()? {
        let Ok(raw) = serde_json::from_str::<serde_json::Value>(&raw) else {
            continue;
        };
        for (_, reference) in crate::outside::entry_refs(&raw) {
            let located = crate::outside::locate(Path::new(&path), &reference);
            if located.size.is_none() {
                findings
                    .missing_outside
                    .push(crate::outside::missing_image_message(
                        &path, line, &reference, &located,
                    ));
            }
        }
    }
    Ok(())
}

/// What reading one indexed file again gave.
enum Recounted {
    /// The last sync skipped it (the reason); it is not read.
    Skipped(String),
    /// It could not be compared (the reason, for `FileDiff`).
    Differs(String),
    Read(Recount),
}

/// Reads every file of `states` again, in parallel, each worker comparing
/// rows on a connection of its own; the results in the order of `states`.
fn recount_all(db: &Path, states: &[FileState], options: &IngestOptions) -> Vec<Recounted> {
    states
        .par_iter()
        .map_init(
            || Writer::open_for_doctor(db),
            |store, state| match (&state.stat.status, store) {
                (FileStatus::Skipped(reason), _) => Recounted::Skipped(reason.clone()),
                (_, Ok(store)) => match recount(store, state, options) {
                    Ok(want) => Recounted::Read(want),
                    Err(reason) => Recounted::Differs(reason),
                },
                (_, Err(err)) => Recounted::Differs(format!(
                    "cannot compare its rows: {}",
                    crate::error_chain(err)
                )),
            },
        )
        .collect()
}

/// What a fresh read of a file yields, compared with its rows.
#[derive(Debug, Clone, Copy, Default)]
struct Recount {
    /// Entries and parse errors in `[0, offset)`.
    entries: i64,
    parse_errors: i64,
    header: bool,
    /// Entries whose stored `raw` is not what the file's line gives now.
    raw_differences: i64,
    first_raw_difference: Option<i64>,
    /// Entries and bad lines at or after the stored offset: complete lines
    /// the index has not taken in.
    unindexed: i64,
    size: u64,
    mtime_ns: i64,
}

/// Whether `files` records this size and mtime (a sync then skips the file).
fn same_stat(state: &FileState, size: u64, mtime_ns: i64) -> bool {
    state.stat.size == size && state.stat.mtime_ns == mtime_ns
}

/// Re-reads a whole file; `Err` says why it cannot be compared (gone,
/// rewritten, unreadable).
fn recount(store: &Writer, state: &FileState, options: &IngestOptions) -> Result<Recount, String> {
    use std::os::unix::fs::MetadataExt;
    let stop = state.cursor.offset;
    let stat = &state.stat;
    let file = match File::open(&stat.path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err("missing on disk; `piidx sync` removes its rows".into());
        }
        Err(err) => return Err(format!("cannot read it: {err}")),
    };
    let (size, mtime_ns) = file
        .metadata()
        .map(|m| (m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()))
        .unwrap_or((0, 0));
    // pi_agent_rust's SQLite sessions have no byte prefix to compare: their
    // stat says whether they changed, and the re-read below their rows.
    let sqlite = ingest::is_port_sqlite(Path::new(&stat.path));
    let prefix = Fingerprint::of_prefix(&file, stop.min(size));
    let rewritten = if sqlite {
        !same_stat(state, size, mtime_ns)
    } else {
        size < stop || prefix.ok() != Some(state.fingerprint)
    };
    if rewritten {
        // A sync that finds the stat it recorded does not look again.
        let who = if same_stat(state, size, mtime_ns) {
            "`piidx doctor --fix`"
        } else {
            "`piidx sync`"
        };
        return Err(format!(
            "rewritten on disk since it was indexed; {who} re-reads it"
        ));
    }
    let target = Target {
        path: PathBuf::from(&stat.path),
        root: stat.root.to_string(),
        rel_path: String::new(),
        depth: 0,
        listed: false,
        dev: stat.dev,
        ino: stat.ino,
        size,
        mtime_ns,
        seen_ns: stat.seen_ns,
    };
    let mut found = Recount {
        size,
        mtime_ns,
        ..Recount::default()
    };
    let mut skipped = None;
    let mut failed = None;
    let mut emit = |batch: ingest::Batch| {
        let before = |offset: i64| (offset as u64) < stop;
        let (indexed, beyond): (Vec<_>, Vec<_>) =
            batch.entries.iter().partition(|e| before(e.byte_offset));
        found.entries += indexed.len() as i64;
        found.unindexed += beyond.len() as i64;
        for error in &batch.errors {
            if before(error.byte_offset) {
                found.parse_errors += 1;
            } else {
                found.unindexed += 1;
            }
        }
        found.header |= batch.header.is_some();
        if let FileStatus::Skipped(reason) = batch.status {
            skipped = Some(reason);
        }
        if let (Some(first), Some(last)) = (indexed.first(), indexed.last()) {
            match store.entry_raws(stat.file_id, first.byte_offset, last.byte_offset) {
                Ok(stored) => {
                    let stored: std::collections::HashMap<(i64, i64), String> = stored
                        .into_iter()
                        .map(|(offset, obj, raw)| ((offset, obj), raw))
                        .collect();
                    for entry in &indexed {
                        let key = (entry.byte_offset, entry.obj_in_line);
                        if stored.get(&key).is_some_and(|raw| *raw != entry.raw) {
                            found.raw_differences += 1;
                            found.first_raw_difference.get_or_insert(entry.line_no);
                        }
                    }
                }
                Err(err) => {
                    failed = Some(crate::error_chain(&err));
                    return false;
                }
            }
        }
        true
    };
    ingest::ingest(&target, Start::Scratch, options.clone(), &mut emit)
        .map_err(|err| format!("cannot read it: {}", err.source))?;
    if let Some(err) = failed {
        return Err(format!("cannot compare its rows: {err}"));
    }
    if let Some(reason) = skipped {
        return Err(format!("indexed, but a re-read skips it: {reason}"));
    }
    Ok(found)
}

/// `redact` turns redaction on in `db` (an index that has it keeps it anyway).
fn sync_options(options: &DoctorOptions, db: &Path, roots: Vec<Root>, redact: bool) -> SyncOptions {
    SyncOptions {
        roots,
        explicit_roots: true,
        db: db.to_owned(),
        full: false,
        keep_deleted: true,
        prune: false,
        progress: false,
        lock_wait: Duration::ZERO,
        max_line_bytes: options.max_line_bytes,
        fts_shards: None,
        redact,
        machine: None,
    }
}

/// Marks the files stale and syncs their roots (we hold the lock).
fn reindex(options: &DoctorOptions, diffs: &[FileDiff]) -> Result<(), DoctorError> {
    let store = Writer::open_for_doctor(&options.db)?;
    let ids: Vec<i64> = diffs.iter().map(|diff| diff.file_id).collect();
    store.mark_for_reindex(&ids)?;
    drop(store);
    let roots: BTreeSet<PathBuf> = diffs
        .iter()
        .map(|diff| PathBuf::from(&diff.root))
        .filter(|root| root.is_dir())
        .collect();
    if roots.is_empty() {
        return Ok(());
    }
    let roots = with_layouts(&options.db, roots);
    sync::run_locked(&sync_options(options, &options.db, roots, false))?;
    Ok(())
}

/// Roots with the layout the index remembers for them (else inferred).
fn with_layouts(db: &Path, paths: impl IntoIterator<Item = PathBuf>) -> Vec<Root> {
    let (remembered, _) = crate::store::remembered(db);
    paths
        .into_iter()
        .map(|path| {
            remembered
                .iter()
                .find(|root| root.path == path)
                .cloned()
                .unwrap_or_else(|| crate::roots::user_root(&path))
        })
        .collect()
}

/// Rebuilds a damaged database next to it and swaps it in; returns where
/// the damaged file is kept.
fn rebuild(options: &DoctorOptions, findings: &Findings) -> Result<PathBuf, DoctorError> {
    let db = &options.db;
    let _ = findings;
    let mut roots: BTreeSet<PathBuf> = options.roots.iter().cloned().collect();
    // What can still be read of the damaged file: its roots, and whether it
    // redacted secrets (the rebuild does too; its hashes get a new key).
    let mut redact = false;
    // And who it is: the rebuilt index keeps its machine id and labels.
    let mut identity = None;
    if let Ok(store) = Writer::open_for_doctor(db) {
        if let Ok(recorded) = store.roots() {
            roots.extend(recorded.into_iter().map(PathBuf::from));
        }
        redact = store.redaction(false).is_ok_and(|state| state.is_some());
        identity = store.machine().ok().zip(store.root_labels().ok());
    }
    let roots: Vec<PathBuf> = roots.into_iter().filter(|root| root.is_dir()).collect();
    if roots.is_empty() {
        return Err(DoctorError::NoRoots { db: db.clone() });
    }
    let roots = with_layouts(db, roots);
    let tmp = with_suffix(db, &format!(".rebuild-{}", std::process::id()));
    let remove_tmp = || crate::store::remove_database(&tmp);
    remove_tmp();
    let built = sync::run_locked(&sync_options(options, &tmp, roots, redact)).and_then(|_| {
        let store = Writer::open_for_doctor(&tmp)?;
        if let Some((machine, labels)) = &identity {
            store.adopt_machine(machine, labels)?;
        }
        store.checkpoint()?;
        Ok(())
    });
    if let Err(err) = built {
        remove_tmp();
        return Err(err.into());
    }
    let io = |what: &'static str, path: &Path| {
        let path = path.to_owned();
        let db = db.clone();
        move |source| DoctorError::Io {
            what,
            path,
            db,
            source,
        }
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let backup = with_suffix(db, &format!(".broken-{stamp}"));
    // Keep the old file under a second name first, so <db> never vanishes.
    if std::fs::hard_link(db, &backup).is_err() {
        std::fs::copy(db, &backup).map_err(io("copy the damaged database to", &backup))?;
    }
    // A stale WAL next to the new file would be replayed into it.
    for suffix in ["-wal", "-shm", "-journal"] {
        let old = with_suffix(db, suffix);
        if old.exists() {
            std::fs::rename(&old, with_suffix(&backup, suffix)).map_err(io("move away", &old))?;
        }
    }
    std::fs::rename(&tmp, db).map_err(io("rename the rebuilt database to", db))?;
    // Its full-text shards follow it (closed, so without -wal/-shm); an old
    // shard's journal would be replayed into the new file.
    for shard in 0.. {
        let built = crate::store::shard_path(&tmp, shard);
        if !built.exists() {
            break;
        }
        let target = crate::store::shard_path(db, shard);
        for suffix in ["-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(with_suffix(&target, suffix));
        }
        std::fs::rename(&built, &target).map_err(io("rename the rebuilt shard to", &target))?;
    }
    remove_tmp();
    Ok(backup)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
