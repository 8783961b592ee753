//! `piidx sync`: discover → plan → read/parse/normalize in parallel → write.
//!
//! Planning needs only `stat`: a file whose identity, size and mtime match
//! the database is not opened. Changed files are handed to rayon workers,
//! which check the stored fingerprint, read only new bytes, and send bounded
//! batches over a channel to the one writer (this thread). The writer commits
//! every ~32 MB or second; each batch carries its file's cursor, so whatever
//! is committed when the process dies is a consistent prefix.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde::Serialize;

use crate::discover::{self, Discovery};
use crate::ingest::{self, Batch, FileStatus, IngestOptions, PARSER_VERSION, Start, Target};
use crate::read::Fingerprint;
use crate::roots::Root;
use crate::secrets::Redactor;
use crate::store::{FileStat, RedactionState, StoreError, Writer};

/// A file modified less than this long before it was last seen is checked
/// again (by fingerprint) even if its stat is unchanged: filesystems with
/// coarse mtimes let a same-size rewrite keep the same mtime ("racy clean",
/// as git calls it).
const RACY_NS: i64 = 2_000_000_000;

/// Commit after this many input bytes…
const COMMIT_BYTES: u64 = 32 << 20;
/// …or after this long, whichever comes first.
const COMMIT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct SyncOptions {
    pub roots: Vec<Root>,
    /// The roots were named by the user (`--root`): one that does not exist
    /// is an error. Otherwise (remembered roots) it is reported, its rows kept.
    pub explicit_roots: bool,
    pub db: PathBuf,
    /// Re-read every file from scratch.
    pub full: bool,
    /// Keep the rows of deleted files (marked `deleted`) instead of removing them.
    pub keep_deleted: bool,
    /// Remove rows kept for deleted files by earlier `--keep-deleted` runs.
    pub prune: bool,
    pub progress: bool,
    /// How long to wait for another sync to finish.
    pub lock_wait: Duration,
    pub max_line_bytes: usize,
    /// Split the full-text index over this many files (re-indexing it when the
    /// count changes); `None` keeps the database's count.
    pub fts_shards: Option<usize>,
    /// Turn secret redaction on (it stays on: the database remembers it).
    pub redact: bool,
    /// `--machine NAME`: with `--root`, the roots are copies of machine
    /// NAME's sessions (labelled so); without, NAME is this index's label.
    pub machine: Option<String>,
}

/// The summary `sync` prints.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SyncReport {
    pub files_seen: u64,
    pub files_indexed: u64,
    pub files_unchanged: u64,
    pub files_removed: u64,
    pub files_skipped: u64,
    pub files_pending: u64,
    pub entries_added: u64,
    pub parse_errors: u64,
    pub bytes_read: u64,
    pub elapsed_ms: u64,
    pub warnings: Vec<String>,
    /// How many of `warnings` say a file a session names outside itself is
    /// missing (`missing_outside`): they leave the exit code alone, since
    /// the index holds everything there is to hold.
    #[serde(skip)]
    pub missing_outside: usize,
    /// Directories and files that could not be read ("path: reason"); what
    /// the index holds for them is kept as it was. Exit code 4.
    pub unreadable: Vec<String>,
    /// The files skipped by this sync (`files_skipped`), each with why.
    pub skipped: Vec<SkippedFile>,
    /// Directories the walk entered through a link (`Discovery::linked`).
    #[serde(skip)]
    pub linked: Vec<PathBuf>,
}

/// A file that is not indexed as a session, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
}

/// Skipped files with the same reason: how many, and the first by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkipGroup {
    pub reason: String,
    pub count: usize,
    pub example: String,
}

/// Groups skipped files by reason, most files first (then by reason).
pub fn skip_groups(files: &[SkippedFile]) -> Vec<SkipGroup> {
    let mut groups: std::collections::BTreeMap<&str, (usize, &str)> = Default::default();
    for file in files {
        let group = groups.entry(&file.reason).or_insert((0, &file.path));
        group.0 += 1;
        if file.path.as_str() < group.1 {
            group.1 = &file.path;
        }
    }
    let mut out: Vec<SkipGroup> = groups
        .into_iter()
        .map(|(reason, (count, example))| SkipGroup {
            reason: reason.to_owned(),
            count,
            example: example.to_owned(),
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    out
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("another `piidx sync` holds {lock} (waited {waited:?}); try again later")]
    Busy { lock: PathBuf, waited: Duration },
    #[error(
        "cannot create or lock {lock} (the directory of the database must be writable, or pass --db with another path)"
    )]
    Lock {
        lock: PathBuf,
        source: std::io::Error,
    },
    #[error("session root {root} does not exist; pass --root with a sessions directory")]
    RootMissing { root: PathBuf },
    #[error("session root {root} is not a directory; pass --root with the sessions directory")]
    RootNotDirectory { root: PathBuf },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What to do with one discovered file.
enum Job {
    /// Read from `Start`; `known` when the index holds rows for the file.
    Read {
        target: Target,
        start: Start,
        known: bool,
    },
    Unusable(Target, String),
}

pub fn run(options: &SyncOptions) -> Result<SyncReport, SyncError> {
    let _lock = acquire_lock(&options.db, options.lock_wait)?;
    run_locked(options)
}

/// `run` for a caller that already holds the lock of `options.db` (or owns
/// the database alone, like `doctor` rebuilding into a temporary file).
pub fn run_locked(options: &SyncOptions) -> Result<SyncReport, SyncError> {
    let started = Instant::now();
    let mut gone = Vec::new();
    for root in &options.roots {
        let path = &root.path;
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(SyncError::RootNotDirectory { root: path.clone() }),
            // Unreadable (its parent, say): the walk reports it, nothing is removed.
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {}
            Err(_) if options.explicit_roots => {
                return Err(SyncError::RootMissing { root: path.clone() });
            }
            // A remembered root that is not there (an unmounted disk, say):
            // its rows stay, as for a directory that cannot be read.
            Err(err) => gone.push((
                path.clone(),
                format!(
                    "{err}; `piidx roots --forget {}` removes its rows",
                    path.display()
                ),
            )),
        }
    }
    // The walk (a stat per file) and opening the index (migrations, shard
    // marks, the file map) do not depend on each other: run them at once.
    let present: Vec<Root> = options
        .roots
        .iter()
        .filter(|root| !gone.iter().any(|(path, _)| *path == root.path))
        .cloned()
        .collect();
    let (opened, discovery) = std::thread::scope(|scope| {
        let walk = scope.spawn(|| {
            let mut discovery = discover::discover(&present);
            discovery.unreadable.extend(gone);
            discovery
        });
        let opened = open_index(options);
        match walk.join() {
            Ok(discovery) => (opened, discovery),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let (store, states, redaction) = opened?;
    let redact_all = redacts_all(redaction);
    let full_options;
    let options = if redact_all && !options.full {
        full_options = SyncOptions {
            full: true,
            ..options.clone()
        };
        &full_options
    } else {
        options
    };
    let redactor = redactor_for(redaction);
    let mut report = SyncReport {
        files_seen: (discovery.files.len() + discovery.unusable.len()) as u64,
        warnings: discovery
            .warnings
            .iter()
            .cloned()
            .chain(crate::private::exposed_warning(&options.db))
            .collect(),
        unreadable: discovery
            .unreadable
            .iter()
            .map(|(path, reason)| format!("{}: {reason}", path.display()))
            .collect(),
        linked: discovery.linked.clone(),
        ..SyncReport::default()
    };
    let plan = plan(options, &store, &states, discovery, &mut report)?;
    // A first sync, or one that a kill cut short, loads with a rollback
    // journal (see `begin_bulk_load`); only when there is something to
    // load: switching the journal mode writes the file, and a root with no
    // sessions yet would pay for it on every run.
    let unfinished = store.bulk_load_unfinished()?;
    let bulk_load = (states.is_empty() || unfinished) && !plan.jobs.is_empty();
    if bulk_load {
        store.begin_bulk_load()?;
        store.relink_all();
    }

    store.begin()?;
    store.remember_roots(&present)?;
    match &options.machine {
        Some(name) if options.explicit_roots => {
            store.name_machine(None)?;
            let paths: Vec<String> = present
                .iter()
                .map(|root| root.path.to_string_lossy().into_owned())
                .collect();
            store.label_roots(&paths, name)?;
        }
        name => store.name_machine(name.as_deref())?,
    }
    for file_id in &plan.removals {
        store.remove_file(*file_id, options.keep_deleted)?;
        report.files_removed += 1;
    }
    let progress = progress_bar(options.progress, plan.bytes_to_read);
    let ingest_options = IngestOptions {
        max_line_bytes: options.max_line_bytes,
        redactor: redactor.clone(),
        deflate: true,
    };
    let (sender, receiver) = sync_channel::<Batch>(1);
    let stop = AtomicBool::new(false);
    let written = std::thread::scope(|scope| {
        let stop = &stop;
        let jobs = plan.jobs;
        let total_files = jobs.len();
        // Nothing to read: no rayon pool is started (its threads cost more
        // than a sync that finds nothing new does otherwise).
        if jobs.is_empty() {
            drop(sender);
        } else {
            scope.spawn(move || run_jobs(jobs, sender, ingest_options, stop));
        }
        let written = write_all(&store, receiver, &progress, total_files, &mut report);
        if written.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        written
    });
    progress.finish_and_clear();
    let touched = written?;
    // Subagent artifact files and run links (see `artifacts`).
    let root_paths: Vec<PathBuf> = present.iter().map(|root| root.path.clone()).collect();
    let artifacts = crate::artifacts::sync(&store, &root_paths, options.full, redactor.as_deref())?;
    let missing = missing_outside(&store, &touched, &artifacts.outputs_gone)?;
    report.missing_outside = missing.len();
    report.warnings.extend(missing);
    if redact_all {
        store.redaction_done()?;
    }
    store.catch_up_message_text()?;
    store.commit()?;
    // The shards merge and compact their files (after a first load, the
    // longest part of its end) while this thread ends the main file's load.
    store.close_fts()?;
    if bulk_load || unfinished {
        store.end_bulk_load()?;
    }
    for shard in store.finish_fts()? {
        report.warnings.push(format!(
            "full-text shard {} was held open by another process past the wait; what this run indexed becomes searchable at the next sync",
            shard.display()
        ));
    }
    store.scrub_wal()?;
    report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Redaction just turned on (or a sync that turned it on was cut short):
/// every file is read again, so that no secret stays in what was there.
fn redacts_all(redaction: Option<RedactionState>) -> bool {
    redaction.is_some_and(|state| state.pending)
}

/// The redactor files are read with, when the index redacts (`state`).
pub fn redactor_for(state: Option<RedactionState>) -> Option<Arc<Redactor>> {
    state.map(|state| Arc::new(Redactor::new(state.key)))
}

/// The database ready for writing, with what it knows of every file and
/// its redaction state. A sync that reads most of the index again writes
/// the shards anew (`Writer::start_fts_anew`).
fn open_index(
    options: &SyncOptions,
) -> Result<(Writer, Vec<FileStat>, Option<RedactionState>), SyncError> {
    let store = Writer::open(&options.db)?;
    let redaction = store.redaction(options.redact)?;
    let states = store.file_stats()?;
    if options.full || redacts_all(redaction) || mostly_stale(&states) {
        store.start_fts_anew(options.fts_shards)?;
        store.relink_all();
    } else {
        store.start_fts(options.fts_shards)?;
    }
    Ok((store, states, redaction))
}

/// Files an older parser indexed (`PARSER_VERSION`), which this sync reads
/// again from scratch, hold at least half of the indexed bytes: the first
/// sync after an upgrade that changed the parser. Deleting their rows from
/// the shards one by one and purging them costs more than writing every
/// row into new shards, as `--full` does (twice the time at 1 GB,
/// docs/performance.md).
fn mostly_stale(states: &[FileStat]) -> bool {
    let indexed = states
        .iter()
        .filter(|state| state.status == FileStatus::Indexed);
    let (stale, all) = indexed.fold((0u64, 0u64), |(stale, all), state| {
        let old = state.parser_version != PARSER_VERSION;
        (stale + if old { state.size } else { 0 }, all + state.size)
    });
    stale > 0 && stale >= all - stale
}

struct Plan {
    jobs: Vec<Job>,
    removals: Vec<i64>,
    bytes_to_read: u64,
}

/// Compares the walk with the index: both lists are sorted by the bytes of
/// their paths, so one merge pairs them (no hashing of 10,000 paths, no set
/// of paths seen). Only the files that grew have their cursor read.
fn plan(
    options: &SyncOptions,
    store: &Writer,
    states: &[FileStat],
    discovery: Discovery,
    report: &mut SyncReport,
) -> Result<Plan, StoreError> {
    let mut jobs = Vec::new();
    let mut bytes_to_read = 0;
    let mut seen = vec![false; states.len()];
    // Whatever lies in a directory that could not be listed may still be
    // there: it is not removed.
    if !discovery.unreadable.is_empty() {
        for (state, seen) in states.iter().zip(seen.iter_mut()) {
            if discovery.hides(Path::new(&state.path)) {
                *seen = true;
            }
        }
    }
    let mut next = 0;
    for target in discovery.files {
        let path = target.path.as_os_str().as_encoded_bytes();
        while next < states.len() && states[next].path.as_encoded_bytes() < path {
            next += 1;
        }
        let state = match states.get(next) {
            Some(state) if state.path.as_encoded_bytes() == path => {
                seen[next] = true;
                Some(state)
            }
            _ => None,
        };
        let start = match start_for(options, state, &target) {
            Planned::Unchanged => {
                report.files_unchanged += 1;
                continue;
            }
            Planned::Scratch => Start::Scratch,
            Planned::Resume(file_id) => match store.resume_point(file_id)? {
                Some((cursor, fingerprint)) => Start::Resume(cursor, fingerprint),
                None => Start::Scratch,
            },
        };
        let from = match &start {
            Start::Resume(cursor, _) => cursor.offset,
            Start::Scratch => 0,
        };
        bytes_to_read += target.size.saturating_sub(from);
        let known = state.is_some_and(|state| state.status == FileStatus::Indexed);
        jobs.push(Job::Read {
            target,
            start,
            known,
        });
    }
    for unusable in discovery.unusable {
        let path = unusable.target.path.as_os_str().as_encoded_bytes();
        let found = states.binary_search_by(|state| state.path.as_encoded_bytes().cmp(path));
        let state = found.ok().map(|at| {
            seen[at] = true;
            &states[at]
        });
        if state.is_some_and(|state| {
            matches!(state.status, FileStatus::Skipped(_)) && same_stat(state, &unusable.target)
        }) {
            report.files_unchanged += 1;
        } else {
            jobs.push(Job::Unusable(unusable.target, unusable.reason));
        }
    }
    // Files last written longest ago first, and taken in that order
    // (`run_jobs`): chunk ids then follow time, which is what a ranked
    // search's window of the newest matches (the highest ids) relies on.
    // Biggest first, as before, gave the smallest files the highest ids of
    // a first sync, and the window was a sample of every month.
    let read_order = |job: &Job| match job {
        Job::Read { target, .. } => Some((target.mtime_ns, target.path.clone())),
        Job::Unusable(..) => None,
    };
    jobs.sort_by_cached_key(read_order);
    let synced_roots: HashSet<String> = options
        .roots
        .iter()
        .map(|root| root.path.to_string_lossy().into_owned())
        .collect();
    let mut removals: Vec<i64> = states
        .iter()
        .zip(&seen)
        .filter(|(state, seen)| !**seen && synced_roots.contains(&*state.root))
        .map(|(state, _)| state)
        .filter(|state| options.prune || state.status != FileStatus::Deleted)
        .map(|state| state.file_id)
        .collect();
    removals.sort_unstable();
    Ok(Plan {
        jobs,
        removals,
        bytes_to_read,
    })
}

/// What a discovered file needs.
enum Planned {
    /// Unchanged since the last sync: not opened.
    Unchanged,
    Scratch,
    /// Read on from where the file with this id stopped.
    Resume(i64),
}

fn start_for(options: &SyncOptions, state: Option<&FileStat>, target: &Target) -> Planned {
    let Some(state) = state else {
        return Planned::Scratch;
    };
    let stale = options.full
        || state.parser_version != PARSER_VERSION
        || state.status == FileStatus::Deleted;
    if stale {
        return Planned::Scratch;
    }
    if same_stat(state, target) && state.mtime_ns + RACY_NS < state.seen_ns {
        return Planned::Unchanged;
    }
    if state.status != FileStatus::Indexed {
        return Planned::Scratch;
    }
    Planned::Resume(state.file_id)
}

fn same_stat(state: &FileStat, target: &Target) -> bool {
    state.dev == target.dev
        && state.ino == target.ino
        && state.size == target.size
        && state.mtime_ns == target.mtime_ns
}

/// Runs every job on the rayon pool, sending batches to the writer. Each
/// worker takes the next job in the list when it is free (`par_bridge`),
/// so files are read in the plan's order; an indexed parallel iterator
/// splits the list in halves, one per worker, and the ids of the two
/// halves' chunks would interleave.
fn run_jobs(jobs: Vec<Job>, sender: SyncSender<Batch>, options: IngestOptions, stop: &AtomicBool) {
    jobs.into_iter()
        .par_bridge()
        .for_each_with(sender, |sender, job| {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let mut emit = |batch: Batch| sender.send(batch).is_ok();
            match job {
                Job::Read {
                    target,
                    start,
                    known,
                } => {
                    if let Err(err) = ingest::ingest(&target, start, options.clone(), &mut emit) {
                        let reason = format!("cannot read: {}", err.source);
                        // Rows already indexed stay until the file can be read
                        // again (or is gone); a new file is recorded as skipped.
                        let status = if known {
                            FileStatus::Unreadable(reason)
                        } else {
                            FileStatus::Skipped(reason)
                        };
                        emit(last_batch(target, status));
                    }
                }
                Job::Unusable(target, reason) => {
                    emit(last_batch(target, FileStatus::Skipped(reason)));
                }
            }
        });
}

/// A file's last batch with no rows: `Skipped` drops any rows it had,
/// `Unreadable` leaves them alone.
fn last_batch(target: Target, status: FileStatus) -> Batch {
    Batch {
        target,
        reset: true,
        header: None,
        title_slot: None,
        entries: Vec::new(),
        errors: Vec::new(),
        exact_lines: Vec::new(),
        cursor: ingest::Cursor::default(),
        fingerprint: Fingerprint::default(),
        status,
        bytes: 0,
        last: true,
    }
}

fn write_all(
    store: &Writer,
    receiver: Receiver<Batch>,
    progress: &ProgressBar,
    total_files: usize,
    report: &mut SyncReport,
) -> Result<HashSet<PathBuf>, StoreError> {
    let mut since_commit = 0u64;
    let mut last_commit = Instant::now();
    let mut counted: HashSet<PathBuf> = HashSet::new();
    // Files whose rows changed this run; a re-check that found nothing new
    // (a "racy" file) counts as unchanged.
    let mut touched: HashSet<PathBuf> = HashSet::new();
    let commit_bytes = crate::fault::batch_bytes(COMMIT_BYTES);
    for batch in receiver {
        let stats = store.apply(&batch)?;
        if crate::fault::due(crate::fault::Point::Batch) {
            store.flush_cache()?;
            crate::fault::kill_now();
        }
        report.entries_added += stats.entries;
        report.parse_errors += stats.errors;
        report.bytes_read += batch.bytes;
        progress.inc(batch.bytes);
        if counted.insert(batch.target.path.clone()) {
            progress.set_message(format!("{}/{total_files} files", counted.len()));
        }
        if batch.reset || batch.bytes > 0 {
            touched.insert(batch.target.path.clone());
        }
        if batch.last {
            match &batch.status {
                FileStatus::Skipped(reason) => {
                    report.files_skipped += 1;
                    report.skipped.push(SkippedFile {
                        path: batch.target.path.display().to_string(),
                        reason: reason.clone(),
                    });
                }
                FileStatus::Unreadable(reason) => report
                    .unreadable
                    .push(format!("{}: {reason}", batch.target.path.display())),
                FileStatus::Pending => report.files_pending += 1,
                FileStatus::Indexed if touched.contains(&batch.target.path) => {
                    report.files_indexed += 1
                }
                FileStatus::Indexed => report.files_unchanged += 1,
                // Only the index says a file was deleted.
                FileStatus::Deleted => {}
            }
        }
        since_commit += batch.bytes + 1;
        if since_commit >= commit_bytes || last_commit.elapsed() >= COMMIT_INTERVAL {
            store.commit()?;
            store.begin()?;
            since_commit = 0;
            last_commit = Instant::now();
        }
    }
    Ok(touched)
}

/// At most this many missing-file warnings per sync; `doctor` lists all.
const MISSING_WARNINGS: usize = 20;

/// Warnings for what the sessions this sync read (and those whose omp full
/// output went away) name outside their file and is not there: omp's
/// `<N>.<tool>.log` full outputs, images in omp's blob store or the port's
/// `.blobs/` folder. Never a failure: the session is indexed all the same.
/// A blob that goes later, with its session unchanged, is `doctor`'s to find
/// (images are looked up when shown, not at sync).
fn missing_outside(
    store: &Writer,
    touched: &HashSet<PathBuf>,
    outputs_gone: &[String],
) -> Result<Vec<String>, StoreError> {
    let read: Vec<String> = touched
        .iter()
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    let mut outputs_checked = read.clone();
    outputs_checked.extend(outputs_gone.iter().cloned());
    let mut messages: Vec<String> = store
        .missing_tool_outputs_of(&outputs_checked)?
        .into_iter()
        .map(|(path, line, id)| crate::outside::missing_output_message(&path, line, &id))
        .collect();
    for (path, line, raw) in store.outside_image_entries_of(&read)? {
        let Ok(raw) = serde_json::from_str::<serde_json::Value>(&raw) else {
            continue;
        };
        for (_, reference) in crate::outside::entry_refs(&raw) {
            let located = crate::outside::locate(Path::new(&path), &reference);
            if located.size.is_none() {
                messages.push(crate::outside::missing_image_message(
                    &path, line, &reference, &located,
                ));
            }
        }
    }
    if messages.len() > MISSING_WARNINGS {
        let more = messages.len() - MISSING_WARNINGS;
        messages.truncate(MISSING_WARNINGS);
        messages.push(format!(
            "… and {more} more files named by sessions and missing; `piidx doctor` lists them all"
        ));
    }
    Ok(messages)
}

fn progress_bar(enabled: bool, total: u64) -> ProgressBar {
    if !enabled || total == 0 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}) {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Holds `<db>.lock` for the whole sync: the kernel drops it if we die.
pub struct SyncLock {
    _file: File,
}

pub fn acquire_lock(db: &Path, wait: Duration) -> Result<SyncLock, SyncError> {
    let mut lock = db.as_os_str().to_owned();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    if let Some(dir) = lock.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SyncError::Lock {
            lock: lock.clone(),
            source,
        })?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|source| SyncError::Lock {
            lock: lock.clone(),
            source,
        })?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(SyncLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(SyncError::Busy { lock, waited: wait });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(SyncError::Lock { lock, source });
            }
        }
    }
}
