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

use rusqlite::types::Value as SqlValue;

use super::scope::{Columns, Dialect, Scope};
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
/// to be AND-ed: the scope's one translation (`Scope::conditions_in`) in
/// PostgreSQL's dialect, then `machine_column` = `machine`.
pub fn conditions(
    scope: &Scope,
    machine: Option<&str>,
    columns: &Columns<'_>,
    machine_column: &str,
    params: &mut Params,
) -> Vec<String> {
    let scoped = scope.conditions_in(Dialect::Postgres, columns, params.0.len() + 1);
    for value in scoped.params {
        match value {
            SqlValue::Integer(n) => params.add(n),
            SqlValue::Text(text) => params.add(text),
            // A scope binds only texts and times.
            _ => params.add(Option::<String>::None),
        };
    }
    let mut out = scoped.sql;
    if let Some(machine) = machine {
        let n = params.add(machine.to_owned());
        out.push(format!("{machine_column} = ${n}"));
    }
    out
}

/// ` AND a AND b`, or nothing.
pub fn clause(conditions: &[String]) -> String {
    conditions.iter().map(|c| format!(" AND {c}")).collect()
}
