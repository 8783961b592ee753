//! The query layer's own error: every question a front-end asks (`search`,
//! `sessions`, `show`, `usage`, `tools`, `subagents`) fails with a
//! `QueryError`, and its `class` says whose fault it is, so the web app's
//! status codes and MCP's error codes are one mapping each, not one per
//! question.

use super::scope::ScopeTextError;
use super::search::SearchError;
use super::tree::ViewError;
use super::usage::UsageError;
use crate::store::StoreError;

/// Whose fault a failed question is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The request: a bad value, a query that cannot run, too much asked
    /// (HTTP 400, MCP "invalid params").
    Caller,
    /// The request names a session or entry the index does not hold (404;
    /// MCP "invalid params").
    NotFound,
    /// There is no index yet: sync first, then ask again (503; MCP
    /// "internal error").
    Unavailable,
    /// The index or the machine (500; MCP "internal error").
    Internal,
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A request's values that do not go together or cannot be read; the
    /// text names the value and what to send.
    #[error("{0}")]
    Request(String),
    #[error(transparent)]
    Scope(#[from] ScopeTextError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    View(#[from] ViewError),
    #[error(transparent)]
    Usage(#[from] UsageError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Sql(#[from] super::sql::SqlError),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    TeamSql(#[from] super::pg::sql::PgSqlError),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    Team(#[from] crate::store::pg::PgError),
    #[cfg(feature = "postgres")]
    #[error(transparent)]
    TeamSearch(#[from] super::pg::search::PgSearchError),
    #[error(
        "this piidx was built without PostgreSQL support (cargo feature `postgres`); rebuild with default features"
    )]
    NoTeamStore,
}

impl QueryError {
    /// The error of the output the answer was written to, when that is
    /// what failed (`piidx sql | head`): not the question's fault; else the
    /// error itself.
    pub fn into_output(self) -> Result<std::io::Error, QueryError> {
        match self {
            QueryError::Sql(super::sql::SqlError::Output(err)) => Ok(err),
            #[cfg(feature = "postgres")]
            QueryError::TeamSql(super::pg::sql::PgSqlError::Output(err)) => Ok(err),
            err => Err(err),
        }
    }

    pub fn class(&self) -> Class {
        match self {
            QueryError::Request(_) | QueryError::Scope(_) => Class::Caller,
            QueryError::Search(err) if err.is_callers() => Class::Caller,
            QueryError::View(err) => match err {
                ViewError::NotFound(_)
                | ViewError::UnknownEntry { .. }
                | ViewError::AmbiguousEntry { .. } => Class::NotFound,
                ViewError::Ambiguous { .. } => Class::Caller,
                _ => Class::Internal,
            },
            QueryError::Store(StoreError::Missing { .. }) => Class::Unavailable,
            #[cfg(feature = "postgres")]
            QueryError::TeamSearch(err) => {
                use super::pg::search::PgSearchError;
                match err {
                    PgSearchError::Empty(_)
                    | PgSearchError::Unsupported(_)
                    | PgSearchError::Query(_) => Class::Caller,
                    PgSearchError::Filter(err) if err.is_callers() => Class::Caller,
                    _ => Class::Internal,
                }
            }
            QueryError::NoTeamStore => Class::Caller,
            QueryError::Sql(err) => {
                use super::sql::SqlError;
                match err {
                    SqlError::Write(_)
                    | SqlError::Refused(_)
                    | SqlError::Timeout(_)
                    | SqlError::Memory(_) => Class::Caller,
                    _ => Class::Internal,
                }
            }
            #[cfg(feature = "postgres")]
            QueryError::TeamSql(err) => {
                use super::pg::sql::PgSqlError;
                match err {
                    PgSqlError::Several { .. }
                    | PgSqlError::NotAQuery { .. }
                    | PgSqlError::Refused { .. } => Class::Caller,
                    _ => Class::Internal,
                }
            }
            _ => Class::Internal,
        }
    }
}
