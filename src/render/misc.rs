//! The smaller reports: `sync`'s summary, `doctor`'s findings, `roots`,
//! `subagents`, `secrets`, and warnings on standard error.

use std::io::{self, Write};

use super::{
    Cell, Column, Format, Table, Term, minute_of, money, one_line, safe, short_id, write_csv,
    write_json,
};
use crate::doctor::DoctorReport;
use crate::query::secrets::SecretFound;
use crate::query::subagents::SubagentRun;
use crate::store::RootInfo;
use crate::sync::{SkipGroup, SyncReport, skip_groups};

/// `piidx: warning: …` on standard error, in colour when it is a terminal.
pub fn warn(message: &str, term: &Term) {
    let theme = term.theme();
    eprintln!("piidx: {} {}", theme.warning("warning:"), safe(message));
}

/// `piidx: what was done` on standard error: a step the user should know of.
pub fn note(message: &str, term: &Term) {
    let theme = term.theme();
    eprintln!("piidx: {}", theme.dim(&safe(message)));
}

/// One reason files were skipped for: `3 files skipped: <reason> (e.g. <path>)`.
pub fn skip_line(group: &SkipGroup) -> String {
    let files = if group.count == 1 { "file" } else { "files" };
    format!(
        "{} {files} skipped: {} (e.g. {})",
        group.count, group.reason, group.example
    )
}

pub fn write_sync(out: &mut dyn Write, report: &SyncReport, term: &Term) -> io::Result<()> {
    writeln!(
        out,
        "{} files seen: {} indexed, {} unchanged, {} removed, {} skipped, {} pending; {} entries added, {} parse errors, {:.1} MB read in {:.2} s",
        report.files_seen,
        report.files_indexed,
        report.files_unchanged,
        report.files_removed,
        report.files_skipped,
        report.files_pending,
        report.entries_added,
        report.parse_errors,
        report.bytes_read as f64 / 1e6,
        report.elapsed_ms as f64 / 1000.0,
    )?;
    if report.parse_errors > 0 || report.files_skipped > 0 {
        let hint = "see: piidx sql \"SELECT * FROM v_parse_errors\" and \"SELECT path, skip_reason FROM files WHERE status = 'skipped'\"";
        writeln!(out, "{}", term.theme().dim(hint))?;
    }
    Ok(())
}

pub fn write_doctor(
    out: &mut dyn Write,
    report: &DoctorReport,
    fix: bool,
    term: &Term,
) -> io::Result<()> {
    let theme = term.theme();
    let findings = &report.findings;
    writeln!(
        out,
        "{}: schema {}, {} files checked",
        safe(&report.db),
        findings
            .schema_version
            .map_or_else(|| "?".to_owned(), |v| v.to_string()),
        findings.files_checked
    )?;
    for group in skip_groups(&findings.skipped) {
        writeln!(
            out,
            "{} {}",
            theme.dim("skipped:"),
            safe(&skip_line(&group))
        )?;
    }
    for missing in &findings.missing_outside {
        writeln!(out, "{} {}", theme.warning("warning:"), safe(missing))?;
    }
    for problem in &report.problems {
        writeln!(out, "{} {}", theme.warning("problem:"), safe(problem))?;
    }
    for fixed in &report.fixed {
        writeln!(out, "{} {}", theme.current("fixed:"), safe(fixed))?;
    }
    if fix {
        for problem in &report.remaining {
            writeln!(out, "{} {}", theme.error("still wrong:"), safe(problem))?;
        }
    }
    if report.problems.is_empty() {
        writeln!(out, "{}", theme.current("healthy"))?;
    } else if !fix {
        writeln!(out, "run `piidx doctor --fix` to repair")?;
    }
    Ok(())
}

pub fn write_roots(
    out: &mut dyn Write,
    roots: &[RootInfo],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &roots),
        Format::Csv => write_csv(out, roots, term),
        Format::Table => {
            let mut table = Table::new(vec![
                Column::path("root"),
                Column::fixed("layout"),
                Column::text("origin").droppable(1),
                Column::text("agents"),
                Column::number("files"),
                Column::number("sessions"),
                Column::fixed("added").droppable(2),
            ]);
            for root in roots {
                table.push(vec![
                    one_line(&root.path).into(),
                    root.layout.name().into(),
                    one_line(&root.origin).into(),
                    root.agents.join(",").into(),
                    root.files.to_string().into(),
                    root.sessions.to_string().into(),
                    root.added_at
                        .chars()
                        .take(16)
                        .collect::<String>()
                        .replace('T', " ")
                        .into(),
                ]);
            }
            table.write(out, term)
        }
    }
}

pub fn write_subagents(
    out: &mut dyn Write,
    runs: &[SubagentRun],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &runs),
        Format::Csv => write_csv(out, runs, term),
        Format::Table => {
            let mut table = Table::new(vec![
                Column::fixed("time"),
                Column::fixed("agent"),
                Column::fixed("status"),
                Column::text("task"),
                Column::text("model").droppable(3),
                Column::number("tokens").droppable(2),
                Column::number("cost"),
                Column::number("time (s)").droppable(4),
                Column::fixed("parent").droppable(5),
            ]);
            let text = |value: &Option<String>| one_line(value.as_deref().unwrap_or(""));
            for run in runs {
                let status = text(&run.status);
                let status = match run.status.as_deref() {
                    Some("failed") => Cell::styled(status, anstyle::AnsiColor::Red.on_default()),
                    _ => status.into(),
                };
                table.push(vec![
                    text(&run.time)
                        .replace('T', " ")
                        .chars()
                        .take(16)
                        .collect::<String>()
                        .into(),
                    text(&run.agent).into(),
                    status,
                    text(&run.task).into(),
                    text(&run.model).into(),
                    super::group_digits(run.tokens).into(),
                    run.cost.map(money).unwrap_or_default().into(),
                    run.duration_s
                        .map(|s| format!("{s:.1}"))
                        .unwrap_or_default()
                        .into(),
                    text(&run.parent_session)
                        .chars()
                        .take(8)
                        .collect::<String>()
                        .into(),
                ]);
            }
            table.write(out, term)
        }
    }
}

/// `piidx secrets`: what looks like a credential, masked.
pub fn write_secrets(
    out: &mut dyn Write,
    found: &[SecretFound],
    format: Format,
    term: &Term,
) -> io::Result<()> {
    match format {
        Format::Json => write_json(out, &found),
        Format::Csv => write_csv(out, found, term),
        Format::Table => {
            let mut table = Table::new(vec![
                Column::fixed("time"),
                Column::fixed("session"),
                Column::fixed("entry"),
                Column::fixed("kind"),
                Column::text("preview"),
                Column::fixed("role").droppable(2),
                Column::text("where").droppable(1),
            ]);
            for secret in found {
                table.push(vec![
                    minute_of(secret.timestamp.as_deref()).into(),
                    short_id(&secret.session_id).into(),
                    one_line(&secret.entry_id).into(),
                    Cell::styled(one_line(&secret.kind), anstyle::AnsiColor::Red.on_default()),
                    one_line(&secret.preview).into(),
                    one_line(&secret.role).into(),
                    one_line(&secret.json_path).into(),
                ]);
            }
            table.write(out, term)
        }
    }
}

/// `piidx push`'s summary line.
#[cfg(feature = "postgres")]
pub fn write_push(out: &mut dyn Write, report: &crate::store::pg::PushReport) -> io::Result<()> {
    writeln!(
        out,
        "pushed as {} (store id {}): {} files sent ({} grown), {} deleted, {} unchanged; {} rows, {:.1} MB of sessions in {} batches, {:.2} s",
        crate::render::safe(&report.machine),
        report.src,
        report.files_sent,
        report.files_appended,
        report.files_deleted,
        report.files_unchanged,
        report.rows_sent,
        report.source_bytes as f64 / 1e6,
        report.batches,
        report.seconds,
    )
}
