//! What part of the index a question is about, parsed once for every
//! command: which sessions (`--project`, `--cwd`, `--session`, `--agent`)
//! and which time (`--since`, `--until`), turned into SQL in one place.
//!
//! Dates have one grammar everywhere: a day (`2026-02-01`, `20260201`), an
//! instant (`2026-02-01T10:00:00Z`, any ISO-8601 time), or relative to now
//! (`today`, `yesterday`, `7d`, `12h`, `30m`, `2w`). Days are whole days in
//! the command's time zone (`--tz`, else `$TZ`, else UTC): `--since` starts
//! at the day's first instant, `--until` includes the whole day.

use rusqlite::types::Value as SqlValue;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::tz::Tz;
use crate::time::{parse_day, parse_iso_ms};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScopeError {
    #[error(
        "cannot read the date {0:?}; use a day (2026-02-01), an ISO time (2026-02-01T10:00:00Z), or a time ago (today, yesterday, 7d, 12h, 30m, 2w)"
    )]
    Date(String),
    #[error("unknown agent {0:?}; use pi, omp or pi_agent_rust")]
    Agent(String),
}

/// A point in time as the user wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// A whole day (days since 1970-01-01) in the scope's time zone.
    Day(i64),
    /// An instant (Unix ms).
    Instant(i64),
}

impl When {
    /// Reads a date; `now_ms` and `tz` give meaning to `today` and `7d`.
    pub fn parse(text: &str, now_ms: i64, tz: &Tz) -> Result<When, ScopeError> {
        let trimmed = text.trim();
        let bad = || ScopeError::Date(text.to_owned());
        let today = tz.local_day(now_ms);
        match trimmed.to_ascii_lowercase().as_str() {
            "today" => return Ok(When::Day(today)),
            "yesterday" => return Ok(When::Day(today - 1)),
            _ => {}
        }
        if let Some(ms) = parse_iso_ms(trimmed) {
            return Ok(When::Instant(ms));
        }
        if let Some(day) = parse_day(trimmed) {
            return Ok(When::Day(day));
        }
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(bad)?;
        let (count, unit) = trimmed.split_at(split);
        let count: i64 = count.parse().map_err(|_| bad())?;
        let unit_ms: i64 = match unit.trim() {
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "h" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "w" | "week" | "weeks" => 7 * 86_400_000,
            _ => return Err(bad()),
        };
        Ok(When::Instant(now_ms - count.saturating_mul(unit_ms)))
    }

    /// The first instant it covers.
    pub fn start_ms(self, tz: &Tz) -> i64 {
        match self {
            When::Day(day) => tz.day_start_ms(day),
            When::Instant(ms) => ms,
        }
    }

    /// The first instant after it (a day includes its last millisecond).
    pub fn end_ms(self, tz: &Tz) -> i64 {
        match self {
            When::Day(day) => tz.day_start_ms(day + 1),
            When::Instant(ms) => ms + 1,
        }
    }
}

/// Now, in Unix ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The sessions and the time a question is about.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// A project: its cwd, a part of the cwd, or Pi's encoded directory
    /// name (`--home-user-proj--`).
    pub project: Option<String>,
    /// A cwd and everything below it.
    pub cwd: Option<String>,
    /// A session id, id prefix, or session file path.
    pub session: Option<String>,
    /// The agent that wrote the session (`pi`, `omp`, `pi_agent_rust`).
    pub agent: Option<&'static str>,
    pub since: Option<When>,
    pub until: Option<When>,
    pub tz: Tz,
}

// A scope as a front-end receives it: the texts the user wrote (command-line
// options, serve's query parameters, MCP tool arguments), parsed here so
// every front-end reads dates, zones and cwds the same way. The options are
// defined here once: the doc comments are the CLI's `--help`, the
// `schemars` descriptions MCP's.
#[derive(Debug, Clone, Default, clap::Args, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScopeText {
    /// Only this project: its cwd, a part of the cwd, or Pi's directory name for it (--home-me-proj--)
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    #[schemars(
        description = "Only this project: its cwd, a part of the cwd, or Pi's directory name for it"
    )]
    pub project: Option<String>,
    /// Only sessions whose cwd is PATH or below it
    #[arg(long, value_name = "PATH")]
    #[schemars(description = "Only sessions whose cwd is this absolute path or below it")]
    pub cwd: Option<String>,
    /// Only this session (id, id prefix, or file path)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only sessions this coding agent wrote: pi, omp (oh-my-pi) or pi_agent_rust
    #[arg(long = "agent", id = "coding_agent", value_name = "AGENT")]
    #[schemars(
        description = "Only sessions this coding agent wrote",
        extend("enum" = ["pi", "omp", "pi_agent_rust"])
    )]
    pub agent: Option<String>,
    /// From DATE on: a day (2026-02-01), an ISO time, or a time ago (today, yesterday, 7d, 12h)
    #[arg(long, value_name = "DATE")]
    #[schemars(
        description = "from this date on: a day (2026-02-01), an ISO time, or a time ago (today, yesterday, 7d, 12h)"
    )]
    pub since: Option<String>,
    /// Up to DATE (a day includes the whole day)
    #[arg(long, value_name = "DATE")]
    #[schemars(description = "Up to this date (a day includes the whole day)")]
    pub until: Option<String>,
    /// Time zone for days, weeks and months: UTC, +02:00, -0530, or an IANA name such as Europe/Berlin [default: $TZ if valid, else UTC]
    #[arg(long, value_name = "ZONE")]
    #[schemars(
        description = "Time zone for days, weeks and months: UTC, +02:00, or an IANA name such as Europe/Berlin (default: the server's $TZ, else UTC)"
    )]
    pub tz: Option<String>,
}

/// A `ScopeText` that does not parse; `option` names the field as the
/// front-end calls it (`--since`, `since`).
#[derive(Debug, thiserror::Error)]
pub enum ScopeTextError {
    #[error("{option}")]
    Date { option: String, source: ScopeError },
    #[error("{option}")]
    Agent { option: String, source: ScopeError },
    #[error("{option}")]
    Tz {
        option: String,
        source: super::tz::TzError,
    },
}

impl ScopeText {
    /// The scope these texts name; dates are read in the time zone, relative
    /// ones from `now_ms`. A field's name in errors is `prefix` + its name.
    pub fn scope(&self, now_ms: i64, prefix: &str) -> Result<Scope, ScopeTextError> {
        let tz = Tz::choose(self.tz.as_deref()).map_err(|source| ScopeTextError::Tz {
            option: format!("{prefix}tz"),
            source,
        })?;
        let date = |option: &str, text: &Option<String>| -> Result<Option<When>, ScopeTextError> {
            text.as_deref()
                .map(|text| {
                    When::parse(text, now_ms, &tz).map_err(|source| ScopeTextError::Date {
                        option: format!("{prefix}{option}"),
                        source,
                    })
                })
                .transpose()
        };
        Ok(Scope {
            project: self.project.clone(),
            cwd: self.cwd.as_deref().map(|cwd| {
                crate::config::absolute(std::path::Path::new(cwd))
                    .to_string_lossy()
                    .into_owned()
            }),
            session: self.session.clone(),
            agent: self
                .agent
                .as_deref()
                .map(|text| {
                    parse_agent(text).ok_or_else(|| ScopeTextError::Agent {
                        option: format!("{prefix}agent"),
                        source: ScopeError::Agent(text.to_owned()),
                    })
                })
                .transpose()?,
            since: date("since", &self.since)?,
            until: date("until", &self.until)?,
            tz,
        })
    }
}

/// An agent's name as `--agent` takes it.
pub fn parse_agent(text: &str) -> Option<&'static str> {
    use crate::normalize::agent;
    match text.trim().to_ascii_lowercase().replace('-', "_").as_str() {
        "pi" => Some(agent::PI),
        "omp" | "oh_my_pi" => Some(agent::OMP),
        "pi_agent_rust" | "port" => Some(agent::PI_AGENT_RUST),
        _ => None,
    }
}

/// Where a query keeps what a scope filters on: SQL expressions (usually
/// `alias.column`) for the session's cwd, its per-cwd directory name, its
/// id and file path, and the time in Unix ms. The agent is read from
/// `sessions` by file path.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    pub cwd: &'a str,
    pub project_dir: &'a str,
    pub session_id: &'a str,
    pub file_path: &'a str,
    pub time_ms: &'a str,
}

impl Columns<'static> {
    /// `sessions s`, with the time in `time`.
    pub const fn sessions(time_ms: &'static str) -> Columns<'static> {
        Columns {
            cwd: "s.cwd",
            project_dir: "s.project_dir",
            session_id: "s.session_id",
            file_path: "s.file_path",
            time_ms,
        }
    }
}

/// SQL conditions (to be AND-ed) and the parameters they use, numbered
/// from the first one given to `Scope::conditions`.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    pub sql: Vec<String>,
    pub params: Vec<SqlValue>,
}

impl Conditions {
    /// ` AND cond AND cond`, or nothing.
    pub fn clause(&self) -> String {
        self.sql
            .iter()
            .map(|condition| format!(" AND {condition}"))
            .collect()
    }
}

/// Which SQL a scope is written in: the index's (SQLite) or the team
/// store's (PostgreSQL). They differ in how a parameter is written (`?1`,
/// `$1`) and in the name of the function that finds a text in another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// Parameter `n`.
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// Whether `needle` occurs in `haystack`.
    fn contains(self, haystack: &str, needle: &str) -> String {
        match self {
            Dialect::Sqlite => format!("instr({haystack}, {needle}) > 0"),
            Dialect::Postgres => format!("strpos({haystack}, {needle}) > 0"),
        }
    }
}

impl Scope {
    /// The scope as SQLite over `columns`; parameters are numbered from `first`.
    pub fn conditions(&self, columns: &Columns<'_>, first: usize) -> Conditions {
        self.conditions_in(Dialect::Sqlite, columns, first)
    }

    /// The scope as SQL of `dialect` over `columns`, the one translation of
    /// a scope; parameters are numbered from `first`. The team store does
    /// not record agents: its sources refuse a scope with one before asking.
    pub fn conditions_in(
        &self,
        dialect: Dialect,
        columns: &Columns<'_>,
        first: usize,
    ) -> Conditions {
        let mut out = Conditions::default();
        let param = |out: &mut Conditions, value: SqlValue| -> String {
            out.params.push(value);
            dialect.param(first + out.params.len() - 1)
        };
        if let Some(project) = &self.project {
            let p = param(&mut out, project.clone().into());
            out.sql.push(format!(
                "({} = {p} OR {})",
                columns.project_dir,
                dialect.contains(columns.cwd, &p)
            ));
        }
        if let Some(cwd) = &self.cwd {
            let trimmed = if cwd.len() > 1 {
                cwd.trim_end_matches('/')
            } else {
                cwd.as_str()
            };
            let p = param(&mut out, trimmed.to_owned().into());
            // Below it: its path and a `/` start the cwd (for `/`, the `/`).
            out.sql.push(format!(
                "({c} = {p} OR substr({c}, 1, length(rtrim({p}, '/')) + 1) = rtrim({p}, '/') || '/')",
                c = columns.cwd
            ));
        }
        if let Some(session) = &self.session {
            let p = param(&mut out, session.clone().into());
            out.sql.push(format!(
                "(substr({id}, 1, length({p})) = {p} OR {path} = {p})",
                id = columns.session_id,
                path = columns.file_path
            ));
        }
        if let (Some(agent), Dialect::Sqlite) = (self.agent, dialect) {
            let p = param(&mut out, agent.to_owned().into());
            out.sql.push(format!(
                "(SELECT a.agent FROM sessions a WHERE a.file_path = {path}) = {p}",
                path = columns.file_path
            ));
        }
        if let Some(since) = self.since {
            let p = param(&mut out, since.start_ms(&self.tz).into());
            out.sql.push(format!("{} >= {p}", columns.time_ms));
        }
        if let Some(until) = self.until {
            let p = param(&mut out, until.end_ms(&self.tz).into());
            out.sql.push(format!("{} < {p}", columns.time_ms));
        }
        out
    }

    /// Whether the scope names sessions (rather than only a time).
    pub fn selects_sessions(&self) -> bool {
        self.project.is_some()
            || self.cwd.is_some()
            || self.session.is_some()
            || self.agent.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_769_990_400_000; // 2026-02-02T00:00:00Z

    #[test]
    fn one_date_grammar() {
        let utc = Tz::Utc;
        let day = |d| When::Day(parse_day(d).unwrap());
        assert_eq!(When::parse("2026-02-01", NOW, &utc), Ok(day("2026-02-01")));
        assert_eq!(When::parse("20260201", NOW, &utc), Ok(day("2026-02-01")));
        assert_eq!(
            When::parse("2026-02-01T10:00:00Z", NOW, &utc),
            Ok(When::Instant(1_769_940_000_000))
        );
        assert_eq!(When::parse("today", NOW, &utc), Ok(day("2026-02-02")));
        assert_eq!(When::parse("Yesterday", NOW, &utc), Ok(day("2026-02-01")));
        assert_eq!(
            When::parse("7d", NOW, &utc),
            Ok(When::Instant(NOW - 7 * 86_400_000))
        );
        assert_eq!(
            When::parse("12h", NOW, &utc),
            Ok(When::Instant(NOW - 12 * 3_600_000))
        );
        assert!(When::parse("soon", NOW, &utc).is_err());
        assert!(When::parse("7y", NOW, &utc).is_err());
    }

    #[test]
    fn a_day_until_includes_the_whole_day() {
        let utc = Tz::Utc;
        let day = When::parse("2026-02-01", NOW, &utc).unwrap();
        assert_eq!(day.start_ms(&utc), 1_769_904_000_000);
        assert_eq!(day.end_ms(&utc), 1_769_990_400_000);
    }

    #[test]
    fn a_cwd_keeps_itself_and_what_is_below_it_root_included() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE s(cwd TEXT);
             INSERT INTO s(cwd) VALUES ('/'), ('/home/u'), ('/home/u/p'), ('/home/up');",
        )
        .unwrap();
        let kept = |cwd: &str| -> Vec<String> {
            let scope = Scope {
                cwd: Some(cwd.to_owned()),
                ..Scope::default()
            };
            let conditions = scope.conditions(&Columns::sessions("0"), 1);
            let sql = format!(
                "SELECT cwd FROM s WHERE 1{} ORDER BY cwd",
                conditions.clause()
            );
            let mut stmt = conn.prepare(&sql).unwrap();
            stmt.query_map(rusqlite::params_from_iter(&conditions.params), |row| {
                row.get(0)
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
        };
        assert_eq!(kept("/home/u"), ["/home/u", "/home/u/p"]);
        assert_eq!(kept("/home/u/"), ["/home/u", "/home/u/p"]);
        assert_eq!(kept("/"), ["/", "/home/u", "/home/u/p", "/home/up"]);
    }

    #[test]
    fn conditions_number_their_parameters_from_first() {
        let scope = Scope {
            project: Some("proj".into()),
            since: Some(When::Instant(5)),
            ..Scope::default()
        };
        let conditions = scope.conditions(&Columns::sessions("e.timestamp_ms"), 3);
        assert_eq!(conditions.params.len(), 2);
        assert!(conditions.sql[0].contains("?3"));
        assert_eq!(conditions.sql[1], "e.timestamp_ms >= ?4");
    }
}
