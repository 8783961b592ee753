//! Where a question is asked: the index (SQLite, `store::Index`) or the
//! team store (PostgreSQL, `query::pg`, cargo feature `postgres`). Every
//! front-end (the commands, `serve`, `mcp`) asks its `Source` and gets the
//! same typed answers (and `sql` the same rows) and the same `QueryError`
//! from either, so the
//! "`--pg` or the index" choice is made once, here, not in each of them.

use std::path::Path;

use super::QueryError;
use super::scope::Scope;
use super::search::sessions::{SessionHits, search_sessions};
use super::search::{self, HeadStart, Hit, SearchOptions};
use super::sessions::{self, SessionInfo, SessionsQuery};
use super::sql::{Limits, RowSink};
use super::subagents::{self, SubagentRun, SubagentsQuery};
use super::tools::{self, ToolStats, ToolsQuery};
use super::usage::{self, UsageOptions, UsageReport};
use crate::store::Index;

/// The team store a front-end asks instead of the index (`--pg URL`,
/// `--machine NAME`).
#[derive(Debug, Clone)]
pub struct Team {
    pub url: String,
    /// Only this machine's sessions (its label).
    pub machine: Option<String>,
}

/// Where questions are answered from, open.
pub enum Source {
    Index(Index),
    #[cfg(feature = "postgres")]
    Team {
        pg: super::pg::Pg,
        machine: Option<String>,
    },
}

impl Source {
    /// The team store when `team` names one, else the index at `db`.
    pub fn open(db: &Path, team: Option<&Team>) -> Result<Source, QueryError> {
        match team {
            None => Ok(Source::Index(Index::open(db)?)),
            #[cfg(feature = "postgres")]
            Some(team) => Ok(Source::Team {
                pg: super::pg::Pg::connect(&team.url)?,
                machine: team.machine.clone(),
            }),
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(QueryError::NoTeamStore),
        }
    }

    /// The index, when this is one (a session's tree, the picker, `-l`).
    pub fn index(&self) -> Option<&Index> {
        match self {
            Source::Index(index) => Some(index),
            #[cfg(feature = "postgres")]
            Source::Team { .. } => None,
        }
    }

    /// Runs one read-only SQL statement (`piidx sql`), its rows streamed to
    /// `sink`: on the index at `db` (its own guarded connection, `limits`
    /// in SQLite), or on the team store `team` names (a read-only
    /// transaction, `limits.timeout` as its `statement_timeout`).
    pub fn sql(
        db: &Path,
        team: Option<&Team>,
        statement: &str,
        limits: Limits,
        sink: &mut dyn RowSink,
    ) -> Result<(), QueryError> {
        match team {
            None => Ok(super::sql::run(db, statement, limits, sink)?),
            #[cfg(feature = "postgres")]
            Some(team) => {
                let mut pg = super::pg::Pg::connect(&team.url)?;
                let timeout_ms = limits.timeout.map_or(0, |t| t.as_millis() as u64);
                Ok(super::pg::sql::run(&mut pg, statement, timeout_ms, sink)?)
            }
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(QueryError::NoTeamStore),
        }
    }

    /// The team store does not record which agent wrote a session: a scope
    /// naming one is refused there rather than ignored.
    fn check(&self, scope: &Scope) -> Result<(), QueryError> {
        let team = !matches!(self, Source::Index(_));
        if team && scope.agent.is_some() {
            return Err(QueryError::Request(
                "--agent works on the local index only: the team store (--pg) does not record which agent wrote a session".into(),
            ));
        }
        Ok(())
    }

    pub fn sessions(&mut self, query: &SessionsQuery) -> Result<Vec<SessionInfo>, QueryError> {
        self.check(&query.scope)?;
        match self {
            Source::Index(index) => Ok(sessions::list(index, query)?),
            #[cfg(feature = "postgres")]
            Source::Team { pg, machine } => {
                Ok(super::pg::sessions::list(pg, query, machine.as_deref())?)
            }
        }
    }

    /// The hits; `head` holds the index's shard readers (started early,
    /// kept between searches); the team store does without.
    pub fn search(
        &mut self,
        head: &mut HeadStart,
        options: &SearchOptions,
    ) -> Result<Vec<Hit>, QueryError> {
        self.check(&options.scope)?;
        // No hits asked for: nothing is read, whichever front-end or
        // back-end (the one place limit 0 is handled).
        if options.limit == 0 {
            return Ok(Vec::new());
        }
        match self {
            Source::Index(index) => Ok(search::search_again(index, head, options)?),
            #[cfg(feature = "postgres")]
            Source::Team { pg, machine } => {
                Ok(super::pg::search::search(pg, options, machine.as_deref())?)
            }
        }
    }

    /// The first `max` sessions with hits (`search -l`): the index's only.
    pub fn search_sessions(
        &mut self,
        head: HeadStart,
        options: &SearchOptions,
        max: usize,
    ) -> Result<Vec<SessionHits>, QueryError> {
        match self {
            Source::Index(index) => Ok(search_sessions(index, head, options, max)?),
            #[cfg(feature = "postgres")]
            Source::Team { .. } => Err(QueryError::Request(
                "--sessions (-l) is not available with --pg; search for hits".into(),
            )),
        }
    }

    pub fn usage(&mut self, options: &UsageOptions) -> Result<UsageReport, QueryError> {
        self.check(&options.scope)?;
        match self {
            Source::Index(index) => Ok(usage::run(index, options)?),
            #[cfg(feature = "postgres")]
            Source::Team { pg, machine } => {
                Ok(super::pg::usage::run(pg, options, machine.as_deref())?)
            }
        }
    }

    pub fn tools(&mut self, query: &ToolsQuery) -> Result<Vec<ToolStats>, QueryError> {
        self.check(&query.scope)?;
        match self {
            Source::Index(index) => Ok(tools::run(index, query)?),
            #[cfg(feature = "postgres")]
            Source::Team { pg, machine } => {
                Ok(super::pg::tools::run(pg, query, machine.as_deref())?)
            }
        }
    }

    pub fn subagents(&mut self, query: &SubagentsQuery) -> Result<Vec<SubagentRun>, QueryError> {
        self.check(&query.scope)?;
        match self {
            Source::Index(index) => Ok(subagents::run(index, query)?),
            #[cfg(feature = "postgres")]
            Source::Team { pg, machine } => {
                Ok(super::pg::subagents::run(pg, query, machine.as_deref())?)
            }
        }
    }
}
