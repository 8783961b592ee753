//! Questions asked of the team store (PostgreSQL, `store::pg`), answered
//! with the same typed values as the SQLite index's (`query::sessions`,
//! `usage`, `search`, `tools`, `subagents`), so the same renderers print
//! them. Only what differs lives here: the SQL, and the filters' PostgreSQL
//! spelling (`conditions`), plus `--machine`.

pub mod search;
pub mod sessions;
pub mod sql;
pub mod subagents;
pub mod tools;
pub mod usage;

use postgres::types::ToSql;

use super::scope::{Columns, Scope};
pub use crate::store::pg::{Pg, PgError};

/// Parameters of a query, numbered `$1`… in order.
#[derive(Default)]
pub struct Params(pub Vec<Box<dyn ToSql + Sync>>);

impl Params {
    /// Adds a value; returns its `$n` number.
    pub fn add(&mut self, value: impl ToSql + Sync + 'static) -> usize {
        self.0.push(Box::new(value));
        self.0.len()
    }

    pub fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0.iter().map(|value| value.as_ref() as _).collect()
    }
}

/// The scope (and machine) as PostgreSQL conditions over `columns`, each
/// to be AND-ed; `machine` is the SQL of the machine label column.
pub fn conditions(
    scope: &Scope,
    machine: Option<&str>,
    columns: &Columns<'_>,
    machine_column: &str,
    params: &mut Params,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(project) = &scope.project {
        let n = params.add(project.clone());
        out.push(format!(
            "({} = $%{n} OR strpos({}, $%{n}) > 0)",
            columns.project_dir, columns.cwd
        ));
    }
    if let Some(cwd) = &scope.cwd {
        let trimmed = if cwd.len() > 1 {
            cwd.trim_end_matches('/')
        } else {
            cwd.as_str()
        };
        let n = params.add(trimmed.to_owned());
        out.push(format!(
            "({c} = $%{n} OR left({c}, length(rtrim($%{n}, '/')) + 1) = rtrim($%{n}, '/') || '/')",
            c = columns.cwd
        ));
    }
    if let Some(session) = &scope.session {
        let n = params.add(session.clone());
        out.push(format!(
            "(left({id}, length($%{n})) = $%{n} OR {path} = $%{n})",
            id = columns.session_id,
            path = columns.file_path
        ));
    }
    if let Some(since) = scope.since {
        let n = params.add(since.start_ms(&scope.tz));
        out.push(format!("{} >= $%{n}", columns.time_ms));
    }
    if let Some(until) = scope.until {
        let n = params.add(until.end_ms(&scope.tz));
        out.push(format!("{} < $%{n}", columns.time_ms));
    }
    if let Some(machine) = machine {
        let n = params.add(machine.to_owned());
        out.push(format!("{machine_column} = $%{n}"));
    }
    // `$%n` keeps `format!` from reading `$n` as anything; made `$n` here.
    out.into_iter().map(|sql| sql.replace("$%", "$")).collect()
}

/// ` AND a AND b`, or nothing.
pub fn clause(conditions: &[String]) -> String {
    conditions.iter().map(|c| format!(" AND {c}")).collect()
}
