//! What `piidx sql` refuses when a statement is prepared, beyond writing
//! (which the read-only connection and `Statement::readonly` refuse): the
//! statements that reach past the index or change the connection itself.
//! SQLite's authorizer sees every action a statement would take, so the
//! class is closed whatever the spelling: `ATTACH` of any file (a FIFO
//! would block the open, before any time limit runs), `DETACH`, and every
//! `PRAGMA` that is not a plain read (`query_only = OFF`,
//! `writable_schema = ON`, `journal_mode = …`, …). `PRAGMA table_info(t)`
//! and the other pragmas that only describe the database stay allowed.

use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

use super::{Index, Result, sqlite_error};

/// Pragmas that read the schema or the file and take a table, an index or
/// a schema name as their argument.
const DESCRIBING: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "integrity_check",
    "quick_check",
];

/// Pragmas that only read a value when given none.
const READING: &[&str] = &[
    "application_id",
    "auto_vacuum",
    "collation_list",
    "compile_options",
    "data_version",
    "database_list",
    "encoding",
    "freelist_count",
    "function_list",
    "journal_mode",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "schema_version",
    "user_version",
];

/// What the guard refused last, to say it in the error.
#[derive(Clone, Default)]
pub struct Refusals(Arc<Mutex<Option<String>>>);

impl Refusals {
    /// The last refused action, as the statement would have written it.
    pub fn last(&self) -> Option<String> {
        self.0.lock().ok().and_then(|last| last.clone())
    }

    fn record(&self, what: String) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some(what);
        }
    }
}

impl Index {
    /// From now on, statements prepared on this connection that attach,
    /// detach or set a pragma fail with `SQLITE_AUTH`; `Refusals::last`
    /// says which. Call it after piidx's own attachments.
    pub fn refuse_side_doors(&mut self) -> Result<Refusals> {
        let refusals = Refusals::default();
        let recorded = refusals.clone();
        self.conn
            .authorizer(Some(move |context: AuthContext<'_>| {
                match refused(&context.action) {
                    Some(what) => {
                        recorded.record(what);
                        Authorization::Deny
                    }
                    None => Authorization::Allow,
                }
            }))
            .map_err(sqlite_error(&self.path))?;
        Ok(refusals)
    }
}

/// The action as text when it is refused.
fn refused(action: &AuthAction<'_>) -> Option<String> {
    match *action {
        AuthAction::Attach { filename } => Some(format!("ATTACH {filename:?}")),
        AuthAction::Detach { database_name } => Some(format!("DETACH {database_name}")),
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => {
            let name = pragma_name.to_ascii_lowercase();
            let allowed = DESCRIBING.contains(&name.as_str())
                || (pragma_value.is_none() && READING.contains(&name.as_str()));
            (!allowed).then(|| match pragma_value {
                Some(value) => format!("PRAGMA {pragma_name} = {value}"),
                None => format!("PRAGMA {pragma_name}"),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pragmas_that_describe_pass_and_the_rest_are_refused() {
        let pragma = |name, value| {
            refused(&AuthAction::Pragma {
                pragma_name: name,
                pragma_value: value,
            })
        };
        assert_eq!(pragma("table_info", Some("sessions")), None);
        assert_eq!(pragma("user_version", None), None);
        assert!(pragma("user_version", Some("3")).is_some());
        assert!(pragma("query_only", Some("OFF")).is_some());
        assert!(pragma("WRITABLE_SCHEMA", Some("ON")).is_some());
        assert!(pragma("query_only", None).is_some());
        assert!(refused(&AuthAction::Attach { filename: "/x.db" }).is_some());
    }
}
