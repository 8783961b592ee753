//! Which index answers a search (`Plan`: an FTS5 table and its MATCH
//! expression, or a scan for terms), and the filters as SQL conditions with
//! their parameters (`Filters`: role, entry type, tool and model are
//! search's own; the sessions and the time are the shared `Scope`'s). Both
//! come from the options alone, before any row is read, so that the shard
//! readers can start scoring before the index is open; `stage` builds every
//! attempt's SQL from them.

use rusqlite::types::Value as SqlValue;

use super::syntax::{Translated, has_unspaced_script, translate};
use super::{SearchError, SearchOptions};
use crate::query::scope::Columns;

/// The most terms a query may have: FTS5's work grows faster than the terms
/// (each prefix term is its own scan of the index, and each is matched
/// against every candidate of the others), so a pasted page would keep a
/// core busy for minutes; no question a person asks needs more.
pub const MAX_TERMS: usize = 32;

/// The longest query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;

/// The most distinct `--type` values: each is a branch of the SQL
/// expression (repeated values, and `--role`'s, are merged first).
pub const MAX_VALUES: usize = 64;

/// The `--role` values by their canonical names, as front-ends offer them
/// (`role_condition` takes some aliases too).
pub const ROLES: [&str; 16] = [
    "user",
    "assistant",
    "thinking",
    "tool_call",
    "tool_result",
    "bash",
    "summary",
    "compaction",
    "branch_summary",
    "custom",
    "system",
    "usage",
    "context_edit",
    "label",
    "session_name",
    "other",
];

/// SQL condition for one `--role` value (fixed strings only, never user text).
pub(crate) fn role_condition(role: &str) -> Result<&'static str, SearchError> {
    let normalized = role.trim().to_lowercase().replace('-', "_");
    Ok(match normalized.as_str() {
        "user" => "c.kind = 'user'",
        "assistant" => "c.kind = 'assistant'",
        "thinking" => "c.kind = 'thinking'",
        "tool_call" | "toolcall" => "c.kind = 'tool_call'",
        "tool_result" | "toolresult" => "c.kind = 'tool_result'",
        "bash" | "bashexecution" | "bash_execution" => "c.kind = 'bash'",
        "summary" => "c.kind = 'summary'",
        "compaction" | "compactionsummary" | "compaction_summary" => {
            "(c.kind = 'summary' AND (e.type = 'compaction' OR mm.role = 'compactionSummary'))"
        }
        "branch_summary" | "branchsummary" | "branch" => {
            "(c.kind = 'summary' AND (e.type = 'branch_summary' OR mm.role = 'branchSummary'))"
        }
        "custom" | "custom_message" => "c.kind = 'custom'",
        "system" => "c.kind = 'system'",
        "usage" => "c.kind = 'usage'",
        "context_edit" | "contextedit" => "c.kind = 'context_edit'",
        "label" => "c.kind = 'label'",
        "session_name" | "name" | "session_info" => "c.kind = 'session_name'",
        "other" => "c.kind = 'other'",
        _ => return Err(SearchError::Role(role.to_owned())),
    })
}

/// Filters as SQL conditions plus their parameters (appended after the
/// query parameter, numbered from `first`).
pub(super) struct Filters {
    pub sql: Vec<String>,
    pub params: Vec<SqlValue>,
}

/// Whether some condition reads `alias.` columns (`e` entries, `s` sessions).
pub(super) fn mentions(conditions: &[String], alias: &str) -> bool {
    let needle = format!("{alias}.");
    conditions.iter().any(|condition| {
        condition.match_indices(&needle).any(|(at, _)| {
            at == 0
                || !condition.as_bytes()[at - 1].is_ascii_alphanumeric()
                    && condition.as_bytes()[at - 1] != b'_'
        })
    })
}

impl Filters {
    pub fn build(options: &SearchOptions, first: usize) -> Result<Filters, SearchError> {
        let mut filters = Filters {
            sql: Vec::new(),
            params: Vec::new(),
        };
        let param = |filters: &mut Filters, value: SqlValue| -> usize {
            filters.params.push(value);
            first + filters.params.len() - 1
        };
        if !options.roles.is_empty() {
            // Each condition once, however often a role (or an alias of it)
            // was repeated.
            let mut any: Vec<&str> = Vec::new();
            let parts = options.roles.iter().flat_map(|role| role.split(','));
            for part in parts.filter(|p| !p.trim().is_empty()) {
                let condition = role_condition(part)?;
                if !any.contains(&condition) {
                    any.push(condition);
                }
            }
            if !any.is_empty() {
                filters.sql.push(format!("({})", any.join(" OR ")));
            }
        }
        if !options.entry_types.is_empty() {
            let mut types: Vec<&str> = options.entry_types.iter().map(|t| t.trim()).collect();
            types.sort_unstable();
            types.dedup();
            if types.len() > MAX_VALUES {
                return Err(SearchError::TooManyValues {
                    what: "--type",
                    count: types.len(),
                    max: MAX_VALUES,
                });
            }
            let mut any = Vec::new();
            for entry_type in types {
                let n = param(&mut filters, entry_type.to_owned().into());
                any.push(format!("e.type = ?{n}"));
            }
            filters.sql.push(format!("({})", any.join(" OR ")));
        }
        // The sessions and the time (`--project`, `--cwd`, `--session`,
        // `--since`, `--until`) as every command reads them. Those of the
        // sessions read only `s.` columns, so `fts_restriction` can restrict
        // the shards' queries with them.
        let scope = options.scope.conditions(
            &Columns::sessions("e.timestamp_ms"),
            first + filters.params.len(),
        );
        filters.sql.extend(scope.sql);
        filters.params.extend(scope.params);
        if let Some(tool) = &options.tool {
            let n = param(&mut filters, tool.clone().into());
            filters
                .sql
                .push(format!("c.tool_name = ?{n} COLLATE NOCASE"));
        }
        if let Some(model) = &options.model {
            let n = param(&mut filters, model.to_lowercase().into());
            filters
                .sql
                .push(format!("instr(lower(mm.model), ?{n}) > 0"));
        }
        Ok(filters)
    }

    pub fn clause(&self) -> String {
        self.sql
            .iter()
            .map(|condition| format!(" AND {condition}"))
            .collect()
    }

    /// For a ranked word search: the conditions on the session alone
    /// (`--project`, `--cwd`, `--session`) as a restriction of the FTS query
    /// to the chunks of those sessions' files, for when the newest matches
    /// of a common word hold too few of theirs: every match was then ranked
    /// and joined (`the --project auth`: 176 ms on 1 GB, 40 ms so). Not the
    /// first try: the set of a big project's chunk ids costs ~20 ms to build.
    pub fn fts_restriction(&self) -> String {
        let conditions: Vec<&str> = self
            .sql
            .iter()
            .filter(|condition| {
                let one = std::slice::from_ref(*condition);
                mentions(one, "s") && !["c", "e", "mm"].iter().any(|a| mentions(one, a))
            })
            .map(String::as_str)
            .collect();
        if conditions.is_empty() {
            return String::new();
        }
        // `+rowid`: a filter on each match, not a rowid lookup per member.
        format!(
            " AND +rowid IN (SELECT coalesce(c.fts_rowid, c.chunk_id) FROM sessions s
                              CROSS JOIN chunks c ON c.file_id = s.file_id WHERE {})",
            conditions.join(" AND ")
        )
    }
}

/// Which index answers the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// MATCH on an FTS table.
    Fts { table: &'static str, expr: String },
    /// Every term looked for in the chunk text (`scan_chunks`); `unspaced`
    /// limits the scan to the chunks in fts_trigram (all chunks with CJK & co).
    Scan { terms: Vec<String>, unspaced: bool },
}

pub(super) fn plan(options: &SearchOptions) -> Result<Plan, SearchError> {
    if options.query.len() > MAX_QUERY_BYTES {
        // Say the limit the person is likelier to have run into.
        let count = options.query.split_whitespace().count();
        return Err(if count > MAX_TERMS {
            SearchError::TooManyTerms {
                count,
                max: MAX_TERMS,
            }
        } else {
            SearchError::TooLong(options.query.len())
        });
    }
    if options.raw {
        // FTS5's own syntax: its words are counted as the terms.
        let count = options.query.split_whitespace().count();
        if count > MAX_TERMS {
            return Err(SearchError::TooManyTerms {
                count,
                max: MAX_TERMS,
            });
        }
        let table = if has_unspaced_script(&options.query) {
            "fts_trigram"
        } else {
            "fts"
        };
        return Ok(Plan::Fts {
            table,
            expr: options.query.clone(),
        });
    }
    let Translated { expr, terms } = translate(&options.query);
    if expr.is_empty() {
        return Err(SearchError::Empty(options.query.clone()));
    }
    if terms.len() > MAX_TERMS {
        return Err(SearchError::TooManyTerms {
            count: terms.len(),
            max: MAX_TERMS,
        });
    }
    let unspaced = has_unspaced_script(&options.query);
    if options.substring && !unspaced {
        // The trigram table only holds unspaced-script chunks (docs/search.md).
        return Ok(Plan::Scan {
            terms,
            unspaced: false,
        });
    }
    if options.substring || unspaced {
        if terms.iter().all(|term| term.chars().count() >= 3) {
            return Ok(Plan::Fts {
                table: "fts_trigram",
                expr,
            });
        }
        return Ok(Plan::Scan {
            terms,
            unspaced: true,
        });
    }
    Ok(Plan::Fts { table: "fts", expr })
}

/// A word query's parameters: the MATCH expression as ?1, the row limit as
/// ?2 (NULL when the query has none), then the filters from ?3.
pub(super) fn query_params(
    expr: &str,
    limit: Option<usize>,
    filters: &[SqlValue],
) -> Vec<SqlValue> {
    let limit = limit.map_or(SqlValue::Null, |limit| SqlValue::Integer(limit as i64));
    [SqlValue::Text(expr.to_owned()), limit]
        .into_iter()
        .chain(filters.iter().cloned())
        .collect()
}

/// Runs `sql` with as many of `params` as it has parameters: a restriction
/// or lookup refers to some of the filters only.
pub(super) fn query_rows<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[SqlValue],
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let used = stmt.parameter_count().min(params.len());
    stmt.query_map(rusqlite::params_from_iter(&params[..used]), row)?
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::scope::{Scope, When};

    #[test]
    fn every_role_offered_has_a_condition() {
        for role in ROLES {
            assert!(role_condition(role).is_ok(), "{role}");
        }
    }

    #[test]
    fn roles_and_aliases() {
        for role in ["toolResult", "tool-result", "tool_result", "TOOL_RESULT"] {
            assert_eq!(role_condition(role).unwrap(), "c.kind = 'tool_result'");
        }
        assert!(role_condition("nope").is_err());
    }

    #[test]
    fn plans() {
        let options = |query: &str, substring: bool| SearchOptions {
            query: query.to_owned(),
            substring,
            ..SearchOptions::default()
        };
        assert!(matches!(
            plan(&options("foo", false)),
            Ok(Plan::Fts { table: "fts", .. })
        ));
        assert!(matches!(
            plan(&options("桜餅テスト", false)),
            Ok(Plan::Fts {
                table: "fts_trigram",
                ..
            })
        ));
        assert!(matches!(
            plan(&options("桜餅", false)),
            Ok(Plan::Scan { .. })
        ));
        assert!(matches!(
            plan(&options("istAl", true)),
            Ok(Plan::Scan { .. })
        ));
        assert!(matches!(
            plan(&options("()", false)),
            Err(SearchError::Empty(_))
        ));
    }

    #[test]
    fn queries_and_filters_are_bounded() {
        let many = vec!["a*"; MAX_TERMS + 1].join(" ");
        let options = SearchOptions {
            query: many,
            ..SearchOptions::default()
        };
        assert!(matches!(
            plan(&options),
            Err(SearchError::TooManyTerms { count: 33, .. })
        ));
        let options = SearchOptions {
            query: vec!["word"; MAX_TERMS].join(" "),
            ..SearchOptions::default()
        };
        assert!(plan(&options).is_ok());
        let options = SearchOptions {
            query: "x".repeat(MAX_QUERY_BYTES + 1),
            ..SearchOptions::default()
        };
        assert!(matches!(plan(&options), Err(SearchError::TooLong(_))));
        // A thousand repeated roles are one condition.
        let options = SearchOptions {
            query: "x".to_owned(),
            roles: vec!["user".to_owned(); 1000],
            entry_types: vec!["message".to_owned(); 1000],
            ..SearchOptions::default()
        };
        let filters = Filters::build(&options, 3).unwrap();
        assert_eq!(filters.sql[0], "(c.kind = 'user')");
        assert_eq!(filters.sql[1], "(e.type = ?3)");
        let options = SearchOptions {
            query: "x".to_owned(),
            entry_types: (0..=MAX_VALUES).map(|n| format!("t{n}")).collect(),
            ..SearchOptions::default()
        };
        assert!(matches!(
            Filters::build(&options, 3),
            Err(SearchError::TooManyValues { .. })
        ));
    }

    #[test]
    fn filters_name_the_tables_they_read() {
        let conditions = vec![
            "c.kind = 'user'".to_owned(),
            "instr(lower(mm.model), ?3) > 0".to_owned(),
        ];
        assert!(!mentions(&conditions, "e") && !mentions(&conditions, "s"));
        assert!(mentions(&["(e.type = 'compaction')".to_owned()], "e"));
        assert!(mentions(&["s.cwd = ?3".to_owned()], "s"));
    }

    #[test]
    fn session_conditions_restrict_the_shards_and_times_do_not() {
        let options = SearchOptions {
            query: "x".to_owned(),
            roles: vec!["user".to_owned()],
            scope: Scope {
                project: Some("proj".to_owned()),
                cwd: Some("/".to_owned()),
                session: Some("0a1b".to_owned()),
                since: Some(When::Instant(5)),
                ..Scope::default()
            },
            tool: Some("bash".to_owned()),
            ..SearchOptions::default()
        };
        let filters = Filters::build(&options, 3).unwrap();
        // The role, three of the sessions, the time, the tool.
        assert_eq!(filters.sql.len(), 6);
        assert_eq!(filters.params.len(), 5);
        assert_eq!(filters.sql[4], "e.timestamp_ms >= ?6");
        assert_eq!(filters.sql[5], "c.tool_name = ?7 COLLATE NOCASE");
        let restriction = filters.fts_restriction();
        for condition in &filters.sql[1..4] {
            assert!(restriction.contains(condition.as_str()), "{condition}");
        }
        for other in ["c.kind", "timestamp_ms", "?6", "tool_name"] {
            assert!(!restriction.contains(other), "{other}");
        }
    }
}
