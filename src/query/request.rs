//! The search a front-end asks for, defined once: `SearchRequest` is what
//! `piidx search`'s flags (clap), serve's query parameters and MCP's tool
//! arguments (serde) all fill, and MCP's JSON schema for the `search` tool
//! is generated from it (schemars), so a new filter is one field here and
//! one line in `SearchRequest::options`. It holds the texts as the user
//! wrote them; `options` checks them once, for every front-end, and turns
//! them into the `SearchOptions` the search runs with.
//!
//! The doc comments are the CLI's `--help` text; `#[schemars(description)]`
//! gives MCP's wording where a flag's name would not fit an argument.

use clap::Args;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::QueryError;
use super::scope::ScopeText;
use super::search::{ROLES, SearchOptions, Sort};
use crate::store::Stop;

/// The number of hits a search gives when it is not told.
pub const DEFAULT_LIMIT: usize = 20;

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

/// The `--role` help: the role list is `search::ROLES`, said once.
fn role_help() -> String {
    format!("Only this kind of text; repeatable: {}", ROLES.join(", "))
}

#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, JsonSchema)]
pub struct SearchRequest {
    /// What to find, e.g. `SessionManager.listAll`, `"exact phrase"`, `pars* OR lexer`
    pub query: String,
    #[arg(long, value_name = "ROLE", help = role_help())]
    #[serde(default, deserialize_with = "one_or_many")]
    #[schemars(with = "OneOrMany", description = role_description())]
    pub role: Vec<String>,
    /// Only entries of this type; repeatable: message, compaction, branch_summary, custom, custom_message, usage, context_edit, or a type piidx does not know
    #[arg(long = "type", value_name = "TYPE")]
    #[serde(rename = "type", default, deserialize_with = "one_or_many")]
    #[schemars(
        with = "OneOrMany",
        description = "Only entries of this type (one or a list): message, compaction, branch_summary, custom, custom_message, usage, context_edit, …"
    )]
    pub entry_type: Vec<String>,
    /// Only tool calls/results of this tool (e.g. bash, read)
    #[arg(long, value_name = "NAME")]
    #[serde(default)]
    pub tool: Option<String>,
    /// Only entries whose message model contains M (case-insensitive)
    #[arg(long, value_name = "M")]
    #[serde(default)]
    #[schemars(description = "Only entries whose model contains this (case-insensitive)")]
    pub model: Option<String>,
    /// Entries of these sessions, written in --since/--until
    #[command(flatten)]
    #[serde(flatten)]
    pub scope: ScopeText,
    /// Number of hits (with -l: of sessions); 0 finds nothing
    #[arg(long, short = 'n', value_name = "N", default_value_t = DEFAULT_LIMIT)]
    #[serde(default = "default_limit")]
    #[schemars(description = "Number of hits (with sessions: of sessions)")]
    pub limit: usize,
    /// Best matches first, or newest first
    #[arg(long, value_enum, default_value_t = Sort::Rank)]
    #[serde(default)]
    pub sort: Sort,
    /// Print one line per session with hits (best first) instead of the hits
    #[arg(long = "sessions", short = 'l')]
    #[serde(default)]
    #[schemars(description = "One result per session with hits (best first) instead of the hits")]
    pub sessions: bool,
    /// Pass QUERY to SQLite FTS5 unchanged (FTS5 query syntax)
    #[arg(long, conflicts_with = "substring")]
    #[serde(default)]
    #[schemars(description = "Pass query to SQLite FTS5 unchanged")]
    pub raw: bool,
    /// Match QUERY's terms as substrings anywhere in the text (slow: scans text unless it is CJK)
    #[arg(long)]
    #[serde(default)]
    #[schemars(description = "Match the terms as substrings anywhere (slow)")]
    pub substring: bool,
}

fn role_description() -> String {
    format!(
        "Only this kind of text (one or a list): {}",
        ROLES.join(", ")
    )
}

// One value or a list of them, as serve's repeated parameters and MCP's
// arguments give a list (its schema: a string, or an array of strings).
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    Ok(match Option::<OneOrMany>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(OneOrMany::One(one)) => vec![one],
        Some(OneOrMany::Many(many)) => many,
    })
}

impl SearchRequest {
    /// The options the search runs with, the request checked once for
    /// every front-end: its scope parsed (a field's name in errors is
    /// `prefix` + its name: `--since`, `since`), `raw` and `substring` not
    /// both. `stop` is the front-end's budget and cancel flag.
    pub fn options(&self, stop: Stop, prefix: &str) -> Result<SearchOptions, QueryError> {
        if self.raw && self.substring {
            return Err(QueryError::Request(format!(
                "{prefix}raw and {prefix}substring do not go together; pass one"
            )));
        }
        Ok(SearchOptions {
            query: self.query.clone(),
            scope: self.scope.scope(super::scope::now_ms(), prefix)?,
            roles: self.role.clone(),
            entry_types: self.entry_type.clone(),
            tool: self.tool.clone(),
            model: self.model.clone(),
            limit: self.limit,
            sort: self.sort,
            raw: self.raw,
            substring: self.substring,
            stop,
        })
    }
}

/// The JSON schema of `T` as MCP's tools give their arguments: its
/// `properties` (inlined, no `$ref`; an optional value's type without
/// `null`, which every argument may be anyway; no integer `format`, no
/// empty default) and its `required` names.
pub fn argument_schema<T: JsonSchema>() -> (Map<String, Value>, Vec<String>) {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .for_deserialize()
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for property in properties.values_mut() {
        if let Some(property) = property.as_object_mut() {
            tidy(property);
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|name| name.as_str().map(str::to_owned))
        .collect();
    (properties, required)
}

/// One property as MCP's hand-written schemas had it.
fn tidy(property: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = property.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if let [one] = kept.as_slice() {
            property.insert("type".into(), one.clone());
        }
    }
    property.remove("format");
    let empty = match property.get("default") {
        Some(Value::Null) => true,
        Some(Value::String(text)) => text.is_empty(),
        Some(Value::Array(list)) => list.is_empty(),
        _ => false,
    };
    if empty {
        property.remove("default");
    }
    if let Some(Value::Array(any)) = property.get_mut("anyOf") {
        for one in any.iter_mut().filter_map(Value::as_object_mut) {
            tidy(one);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_and_mcp_values_fill_the_same_request() {
        let request: SearchRequest = serde_json::from_value(serde_json::json!({
            "query": "parser",
            "role": "user",
            "type": ["message", "compaction"],
            "since": "7d",
            "sort": "recent",
        }))
        .unwrap();
        assert_eq!(request.role, ["user"]);
        assert_eq!(request.entry_type, ["message", "compaction"]);
        assert_eq!(request.scope.since.as_deref(), Some("7d"));
        assert_eq!(request.limit, DEFAULT_LIMIT);
        assert_eq!(request.sort, Sort::Recent);
    }

    #[test]
    fn the_schema_has_every_field_and_needs_the_query() {
        let (properties, required) = argument_schema::<SearchRequest>();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "query",
                "role",
                "type",
                "tool",
                "model",
                "project",
                "cwd",
                "session",
                "agent",
                "since",
                "until",
                "tz",
                "limit",
                "sort",
                "sessions",
                "raw",
                "substring"
            ]
        );
        assert_eq!(required, ["query"]);
        assert_eq!(properties["limit"]["type"], "integer");
        assert_eq!(properties["limit"]["default"], 20);
        assert_eq!(properties["tool"]["type"], "string");
        assert_eq!(
            properties["sort"]["enum"],
            serde_json::json!(["rank", "recent"])
        );
        assert!(properties["role"]["anyOf"].is_array());
    }
}
