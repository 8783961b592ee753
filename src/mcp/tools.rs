//! The tools `piidx mcp` offers: their JSON schemas, their arguments turned
//! into the library's options (the same ones the CLI's flags become), and
//! their answers, paged to the call's byte budget (`page`).
//!
//! Every call opens the index afresh and drops it when done: no read
//! transaction outlives a call, so the next call sees whatever a sync has
//! committed since (and a database that appeared or was rebuilt meanwhile).
//! The answers' items are the CLI's `--json` objects, so docs/json.md
//! describes them too; docs/mcp.md lists what the tools add.

use std::path::Path;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::page::{self, Cursor, Cut, MAX_BUDGET, MIN_BUDGET, Page};
use super::protocol::RpcError;
use crate::query::request::{SearchRequest, argument_schema};
use crate::query::requests::{BranchRequest, SessionsRequest, SubagentsRequest, UsageRequest};
use crate::query::search::HeadStart;
use crate::query::source::{Source, Team};
use crate::query::tree::{self, SessionTree};
use crate::query::{Class, QueryError};
use crate::render;
use crate::store::Index;

/// What every call gets: the database and the default budget.
pub struct Context<'a> {
    pub db: &'a Path,
    /// The team store asked instead of the index (`mcp --pg`).
    pub team: Option<&'a Team>,
    pub budget: usize,
    /// When the call stops (its time budget, or the client cancelled it).
    pub stop: crate::store::Stop,
}

/// Tool outputs in `get_session` are cut to this many characters unless the
/// call says otherwise.
const TOOL_OUTPUT_CHARS: usize = 2_000;

/// `get_session`'s arguments: a session's branch (as `show` takes it), or
/// its whole tree, with long tool outputs cut.
#[derive(Deserialize, JsonSchema)]
struct GetSession {
    #[serde(flatten)]
    at: BranchRequest,
    /// The current branch, or the whole tree
    #[serde(default)]
    view: View,
    /// Cut each string of a tool result or bash output to this many characters (0: whole)
    #[serde(default = "tool_output_chars")]
    tool_output_chars: usize,
}

#[derive(Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum View {
    #[default]
    Branch,
    Tree,
}

fn tool_output_chars() -> usize {
    TOOL_OUTPUT_CHARS
}

/// `get_entry`'s arguments.
#[derive(Deserialize, JsonSchema)]
struct GetEntry {
    /// Session id, unique id prefix, or session file path
    session: String,
    /// Entry id or unique prefix
    entry: String,
    /// JSON path of one value in the entry ($.message.content[0].text): return it as text, paged
    #[serde(default)]
    path: Option<String>,
}

/// The tools, as `tools/list` gives them.
pub fn list() -> Vec<Value> {
    vec![
        tool(
            "search",
            "Search session history",
            "Full-text search over every indexed Pi session (messages, thinking, tool calls and outputs, summaries, subagent transcripts). Words are AND-ed; \"exact phrase\", prefix*, OR, NOT and parentheses work. Returns hits best first, each with a snippet (matches between « and »), session_id, entry_id, cwd and timestamp; open one with get_session (its branch) or get_entry.",
            {
                // Generated from the request every front-end fills.
                let (mut properties, _) = argument_schema::<SearchRequest>();
                timed(
                    &mut properties,
                    "Entries of these sessions, written in since/until",
                );
                properties.extend(paging_properties());
                properties
            },
            &["query"],
            json!({"hits": {"type": "array", "items": {"type": "object"}}, "sessions": {"type": "array", "items": {"type": "object"}}}),
        ),
        tool(
            "list_sessions",
            "List sessions",
            "Sessions newest first, in the order Pi's /resume lists them, as Pi's SessionInfo (path, id, cwd, name, parentSessionPath, created, modified, messageCount, firstMessage) plus listedByPi. Includes one-shot and subagent child sessions Pi's own list leaves out (listedByPi false) unless all is false.",
            {
                let mut properties = request_properties::<SessionsRequest>(
                    "Sessions whose modified time is in since/until",
                );
                // MCP lists every session unless told (see list_sessions).
                properties["all"]["default"] = true.into();
                properties.extend(paging_properties());
                properties
            },
            &[],
            json!({"sessions": {"type": "array", "items": {"type": "object"}}}),
        ),
        tool(
            "get_session",
            "Read a session",
            "A session's entries, paged: view \"branch\" (default) gives the current branch root to leaf (or the branch ending at `branch`), the entries exactly as stored, as Pi builds its context from them; view \"tree\" gives every entry in file order with its place in the tree (parent_id, child_count, on_branch, is_leaf, label, summary) and the entry. Long tool outputs are cut (tool_output_chars); `truncated` lists each cut with the path get_entry takes to return it whole.",
            {
                let (mut properties, _) = argument_schema::<GetSession>();
                properties.extend(paging_properties());
                properties
            },
            &["session"],
            json!({
                "session_id": {"type": "string"},
                "path": {"type": "string"},
                "leaf_id": {"type": ["string", "null"]},
                "view": {"type": "string"},
                "total_entries": {"type": "integer"},
                "entries": {"type": "array", "items": {"type": "object"}}
            }),
        ),
        tool(
            "get_entry",
            "Read one entry",
            "One entry of a session, whole (image payloads replaced by a placeholder), with its place in the tree. With `path` (a JSON path from a `truncated` list, e.g. $.message.content[0].text): that value alone as text, paged with the cursor, for tool outputs too long for one answer.",
            {
                let (mut properties, _) = argument_schema::<GetEntry>();
                properties.extend(paging_properties());
                properties
            },
            &["session", "entry"],
            json!({"session_id": {"type": "string"}, "entry_id": {"type": "string"}}),
        ),
        tool(
            "usage",
            "Token usage and cost",
            "Tokens and cost grouped like `piidx usage`: by day (default), week, month, model, provider, project or session; time groups ascending, others by cost. Each row: key, records, input/output/cache tokens, total_tokens, cost (dollars), unpriced_tokens, and subagent figures when there are runs; plus the total.",
            {
                let mut properties = request_properties::<UsageRequest>(
                    "Usage recorded in since/until by these sessions",
                );
                properties.extend(paging_properties());
                properties
            },
            &[],
            json!({"by": {"type": "string"}, "rows": {"type": "array", "items": {"type": "object"}}, "total": {"type": "object"}}),
        ),
        tool(
            "subagent_runs",
            "List subagent runs",
            "Delegated subagent runs newest first (`subagent` filters by the subagent's name): time, agent, task, status, exit, model, tokens, cost, duration_s, mode, run_id, parent_session, parent_name, child_session.",
            {
                let mut properties = request_properties::<SubagentsRequest>(
                    "Runs delegated by these sessions, started in since/until",
                );
                properties.extend(paging_properties());
                properties
            },
            &[],
            json!({"runs": {"type": "array", "items": {"type": "object"}}}),
        ),
    ]
}

fn tool(
    name: &str,
    title: &str,
    description: &str,
    properties: Map<String, Value>,
    required: &[&str],
    output: Value,
) -> Value {
    let mut output_properties = output.as_object().cloned().unwrap_or_default();
    output_properties.insert(
        "next_cursor".into(),
        json!({"type": ["string", "null"], "description": "Pass as `cursor` with the same arguments for the next page; null at the end"}),
    );
    output_properties.insert(
        "truncated".into(),
        json!({"type": "array", "items": {"type": "object"}, "description": "Parts cut to fit: entry_id, path, size, kept"}),
    );
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        },
        "outputSchema": {
            "type": "object",
            "properties": output_properties,
        },
        "annotations": {
            "title": title,
            "readOnlyHint": true,
            "openWorldHint": false,
        },
    })
}

/// A request type's arguments (its schema); `time` says what since/until
/// apply to for this tool.
fn request_properties<T: JsonSchema>(time: &str) -> Map<String, Value> {
    let (mut properties, _) = argument_schema::<T>();
    timed(&mut properties, time);
    properties
}

/// `since`'s description, prefixed with what the tool's time is.
fn timed(properties: &mut Map<String, Value>, time: &str) {
    if let Some(since) = properties.get_mut("since").and_then(Value::as_object_mut) {
        let text = since
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = format!("{time}: {text}");
        since.insert("description".into(), text.into());
    }
}

fn paging_properties() -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        "cursor".into(),
        json!({"type": "string", "description": "next_cursor of the previous answer, to continue it"}),
    );
    properties.insert("max_bytes".into(), json!({"type": "integer", "minimum": MIN_BUDGET, "maximum": MAX_BUDGET, "description": "Size of this answer's items in bytes of JSON (default: the server's budget); the rest comes with the cursor"}));
    properties
}

/// Runs tool `name`; its answer is a JSON object.
pub fn call(
    context: &Context<'_>,
    name: &str,
    arguments: Option<Value>,
) -> Result<Value, RpcError> {
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "tool arguments must be an object of named arguments",
            ));
        }
    };
    let tools = list();
    let Some(spec) = tools.iter().find(|tool| tool["name"] == name) else {
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        return Err(RpcError::invalid_params(format!(
            "unknown tool {name:?}; this server has {} (see tools/list)",
            names.join(", ")
        )));
    };
    let args = Args::new(name, &arguments, &spec["inputSchema"])?;
    match name {
        "search" => search_tool(context, &args),
        "list_sessions" => list_sessions(context, &args),
        "get_session" => get_session(context, &args),
        "get_entry" => get_entry(context, &args),
        "usage" => usage_tool(context, &args),
        "subagent_runs" => subagent_runs(context, &args),
        _ => Err(RpcError::internal(format!(
            "tool {name} is listed but not served"
        ))),
    }
}

/// A call's arguments, checked against its schema's names and read with
/// messages that name the argument and what it takes. `null` is absent.
struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(
        tool: &'a str,
        map: &'a Map<String, Value>,
        schema: &Value,
    ) -> Result<Args<'a>, RpcError> {
        let known = schema["properties"].as_object();
        for key in map.keys() {
            if !known.is_some_and(|known| known.contains_key(key)) {
                let names: Vec<&String> = known.into_iter().flat_map(|k| k.keys()).collect();
                return Err(RpcError::invalid_params(format!(
                    "{tool} has no argument {key:?}; it takes {}",
                    names
                        .iter()
                        .map(|n| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            if map.get(key).is_none_or(Value::is_null) {
                return Err(RpcError::invalid_params(format!(
                    "{tool} needs the argument {key:?}"
                )));
            }
        }
        Ok(Args { tool, map })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    fn wrong(&self, name: &str, takes: &str) -> RpcError {
        RpcError::invalid_params(format!("{}: argument {name:?} must be {takes}", self.tool))
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool, RpcError> {
        match self.get(name) {
            None => Ok(default),
            Some(Value::Bool(value)) => Ok(*value),
            Some(_) => Err(self.wrong(name, "true or false")),
        }
    }

    fn count(&self, name: &str) -> Result<Option<usize>, RpcError> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| self.wrong(name, "a whole number, 0 or more")),
        }
    }

    /// A request type of `query` filled from the arguments, each checked
    /// first against its schema's type (so the message names it).
    fn request<T: DeserializeOwned + JsonSchema>(&self) -> Result<T, RpcError> {
        let (properties, _) = argument_schema::<T>();
        let mut object = Map::new();
        for (name, schema) in &properties {
            let Some(value) = self.get(name) else {
                continue;
            };
            let fits = if schema.get("anyOf").is_some() {
                value.is_string()
                    || value
                        .as_array()
                        .is_some_and(|list| list.iter().all(Value::is_string))
            } else {
                match schema["type"].as_str() {
                    Some("boolean") => value.is_boolean(),
                    Some("integer") => value.as_u64().is_some(),
                    _ => value.is_string(),
                }
            };
            if !fits {
                let takes = if schema.get("anyOf").is_some() {
                    "a string or a list of strings"
                } else {
                    match schema["type"].as_str() {
                        Some("boolean") => "true or false",
                        Some("integer") => "a whole number, 0 or more",
                        _ => "a string",
                    }
                };
                return Err(self.wrong(name, takes));
            }
            object.insert(name.clone(), value.clone());
        }
        serde_json::from_value(Value::Object(object)).map_err(|err| {
            RpcError::invalid_params(format!(
                "{}: an argument is not what it takes: {err}",
                self.tool
            ))
        })
    }

    fn budget(&self, default: usize) -> Result<usize, RpcError> {
        match self.count("max_bytes")? {
            None => Ok(default),
            Some(n) if (MIN_BUDGET..=MAX_BUDGET).contains(&n) => Ok(n),
            Some(_) => Err(self.wrong(
                "max_bytes",
                &format!("between {MIN_BUDGET} and {MAX_BUDGET}"),
            )),
        }
    }

    fn cursor(&self) -> Result<usize, RpcError> {
        Ok(Cursor::decode(self.tool, self.map)?.offset)
    }

    /// The answer: `fields`, then the page's items under `key`, the cursor
    /// and what was cut.
    fn answer(&self, mut fields: Map<String, Value>, key: &str, page: Page) -> Value {
        fields.insert(key.into(), Value::Array(page.items));
        fields.insert(
            "next_cursor".into(),
            page.next.map_or(Value::Null, |offset| {
                Cursor { offset }.encode(self.tool, self.map).into()
            }),
        );
        if !page.cuts.is_empty() {
            fields.insert("truncated".into(), to_value(&page.cuts));
        }
        Value::Object(fields)
    }
}

fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Where this call's question is answered (the index, or the team store
/// with `--pg`), opened for this call only.
fn source(context: &Context<'_>) -> Result<Source, RpcError> {
    Source::open(context.db, context.team).map_err(query_error)
}

/// The index, opened for this call only.
fn open(db: &Path) -> Result<Index, RpcError> {
    Index::open(db).map_err(|err| RpcError::internal(crate::error_chain(&err)))
}

/// A query error as the caller's fault (`-32602`: a bad request, a
/// session or entry not found) or the index's: one mapping, the one serve
/// makes into status codes.
fn query_error(err: impl Into<QueryError>) -> RpcError {
    let err = err.into();
    let message = crate::error_chain(&err);
    match err.class() {
        Class::Caller | Class::NotFound => RpcError::invalid_params(message),
        Class::Unavailable | Class::Internal => RpcError::internal(message),
    }
}

fn search_tool(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let request: SearchRequest = args.request()?;
    let options = request
        .options(context.stop.clone(), "")
        .map_err(query_error)?;
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let mut head = match context.team {
        None => HeadStart::open(context.db, &options),
        Some(_) => HeadStart::default(),
    };
    let mut source = source(context)?;
    if request.sessions {
        let found = source
            .search_sessions(head, &options, options.limit)
            .map_err(query_error)?;
        let items = found.iter().map(to_value).collect();
        let page = page::page(items, start, budget, |_| None);
        return Ok(args.answer(Map::new(), "sessions", page));
    }
    let hits = source.search(&mut head, &options).map_err(query_error)?;
    let items = render::hits::with_marks(hits)
        .iter()
        .map(to_value)
        .collect();
    let page = page::page(items, start, budget, |_| None);
    Ok(args.answer(Map::new(), "hits", page))
}

fn list_sessions(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let mut request: SessionsRequest = args.request()?;
    // Unlike `piidx sessions`, MCP lists every session unless told: an
    // agent looking for one should not miss a subagent's child session.
    request.all = args.flag("all", true)?;
    let query = request.query("").map_err(query_error)?;
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let list = source(context)?.sessions(&query).map_err(query_error)?;
    let items = list
        .iter()
        .map(|info| {
            let mut value = info.to_pi_json();
            if let Some(map) = value.as_object_mut() {
                map.insert("listedByPi".into(), info.listed_by_pi.into());
            }
            value
        })
        .collect();
    Ok(args.answer(
        Map::new(),
        "sessions",
        page::page(items, start, budget, |_| None),
    ))
}

/// The tree of the session `arg` names, read in one snapshot: from the
/// index only (the team store holds no session's entries).
fn load_tree(context: &Context<'_>, arg: &str) -> Result<SessionTree, RpcError> {
    if context.team.is_some() {
        return Err(RpcError::invalid_params(
            "mcp --pg answers from the team store, which holds no session's entries; read sessions with an mcp server on the index",
        ));
    }
    SessionTree::named(&open(context.db)?, arg).map_err(query_error)
}

/// A tool result or a bash execution: the outputs `get_session` cuts.
fn is_tool_output(entry: &Value) -> bool {
    entry["type"] == "message"
        && matches!(
            entry["message"]["role"].as_str(),
            Some("toolResult" | "bashExecution")
        )
}

fn get_session(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let GetSession {
        at,
        view,
        tool_output_chars: tool_chars,
    } = args.request()?;
    if at.branch.is_some() && view == View::Tree {
        return Err(RpcError::invalid_params(
            "get_session: branch picks a branch for view \"branch\"; leave it out with view \"tree\"",
        ));
    }
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let tree = load_tree(context, &at.session)?;
    let mut cuts: Vec<Cut> = Vec::new();
    // Each stored entry, its tool outputs cut.
    let mut entry_of = |index: usize, raw: &mut Value| {
        if is_tool_output(raw) {
            let mut cut = Vec::new();
            page::truncate_strings(&mut raw["message"], tool_chars, "$.message", &mut cut);
            for mut one in cut {
                one.entry_id = Some(tree.nodes[index].id.clone());
                cuts.push(one);
            }
        }
    };
    let (items, leaf) = if view == View::Tree {
        let outline = tree::outline(&tree);
        let all: Vec<usize> = (0..tree.nodes.len()).collect();
        let raws = tree.entries_json(&all);
        let items = outline
            .entries
            .iter()
            .zip(raws)
            .enumerate()
            .map(|(index, (entry, mut raw))| {
                entry_of(index, &mut raw);
                let mut value = to_value(entry);
                if let Some(map) = value.as_object_mut() {
                    map.insert("entry".into(), raw);
                }
                value
            })
            .collect::<Vec<_>>();
        (items, tree.leaf())
    } else {
        let leaf = at.leaf(&tree).map_err(query_error)?;
        let path = leaf.map(|leaf| tree.path_to(leaf)).unwrap_or_default();
        let raws = tree.entries_json(&path);
        let items = path
            .iter()
            .zip(raws)
            .map(|(&index, mut raw)| {
                entry_of(index, &mut raw);
                raw
            })
            .collect::<Vec<_>>();
        (items, leaf)
    };
    let total = items.len();
    let id_of = |item: &Value| item.get("id").and_then(Value::as_str).map(str::to_owned);
    let mut page = page::page(items, start, budget, id_of);
    // Cuts of the items shown: those made here, and those made to fit,
    // whose paths (in a tree item, under `entry`) become the entry's own.
    let shown: std::collections::HashSet<String> = page.items.iter().filter_map(id_of).collect();
    let mut all_cuts: Vec<Cut> = cuts
        .into_iter()
        .filter(|cut| cut.entry_id.as_ref().is_some_and(|id| shown.contains(id)))
        .collect();
    for mut cut in std::mem::take(&mut page.cuts) {
        if view == View::Tree {
            match cut.path.strip_prefix("$.entry") {
                Some(rest) => cut.path = format!("${rest}"),
                None => continue,
            }
        }
        all_cuts.push(cut);
    }
    page.cuts = all_cuts;
    let mut fields = Map::new();
    fields.insert("session_id".into(), tree.session.session_id.clone().into());
    fields.insert("path".into(), tree.session.path.clone().into());
    fields.insert(
        "leaf_id".into(),
        tree.leaf()
            .map_or(Value::Null, |leaf| tree.nodes[leaf].id.clone().into()),
    );
    fields.insert("view".into(), to_value(&view));
    if view == View::Branch {
        fields.insert(
            "branch_leaf_id".into(),
            leaf.map_or(Value::Null, |leaf| tree.nodes[leaf].id.clone().into()),
        );
    }
    fields.insert("total_entries".into(), total.into());
    Ok(args.answer(fields, "entries", page))
}

fn get_entry(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let GetEntry {
        session,
        entry,
        path,
    } = args.request()?;
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let tree = load_tree(context, &session)?;
    let index = tree.find(&entry).map_err(query_error)?;
    let mut raw = tree.entries_json(&[index]).pop().unwrap_or(Value::Null);
    let node = &tree.nodes[index];
    let mut fields = Map::new();
    fields.insert("session_id".into(), tree.session.session_id.clone().into());
    fields.insert("session_path".into(), tree.session.path.clone().into());
    fields.insert("entry_id".into(), node.id.clone().into());
    if let Some(path) = path {
        let Some(value) = crate::normalize::json_path_mut(&mut raw, &path) else {
            return Err(RpcError::invalid_params(format!(
                "entry {} has no value at {path:?}; a path looks like $.message.content[0].text (get_session's `truncated` lists them)",
                node.id
            )));
        };
        let (text, is_json) = match value {
            Value::String(text) => (std::mem::take(text), false),
            other => (serde_json::to_string(other).unwrap_or_default(), true),
        };
        let total = text.chars().count();
        let (slice, next) = page::text_slice(&text, start.min(total), budget);
        fields.insert("path".into(), path.into());
        fields.insert("is_json".into(), is_json.into());
        fields.insert("total_chars".into(), total.into());
        fields.insert("offset".into(), start.min(total).into());
        fields.insert("text".into(), slice.into());
        fields.insert(
            "next_cursor".into(),
            next.map_or(Value::Null, |offset| {
                Cursor { offset }.encode(args.tool, args.map).into()
            }),
        );
        return Ok(Value::Object(fields));
    }
    let outline = tree::outline(&tree);
    let facts = &outline.entries[index];
    fields.insert("parent_id".into(), to_value(&facts.parent_id));
    fields.insert("type".into(), facts.entry_type.clone().into());
    fields.insert("timestamp".into(), to_value(&facts.timestamp));
    fields.insert("line_no".into(), facts.line_no.into());
    fields.insert("on_branch".into(), facts.on_branch.into());
    fields.insert("is_leaf".into(), facts.is_leaf.into());
    fields.insert("label".into(), to_value(&facts.label));
    fields.insert("edits".into(), to_value(&facts.edits));
    fields.insert(
        "children".into(),
        facts
            .children
            .iter()
            .map(|&child| Value::from(tree.nodes[child].id.clone()))
            .collect(),
    );
    let room = budget.saturating_sub(page::json_len(&fields) + 32);
    let mut cuts = page::fit(&mut raw, room);
    for cut in &mut cuts {
        cut.entry_id = Some(node.id.clone());
    }
    fields.insert("entry".into(), raw);
    fields.insert("next_cursor".into(), Value::Null);
    if !cuts.is_empty() {
        fields.insert("truncated".into(), to_value(&cuts));
    }
    Ok(Value::Object(fields))
}

fn usage_tool(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let request: UsageRequest = args.request()?;
    let options = request.options("").map_err(query_error)?;
    let by = options.by;
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let report = source(context)?.usage(&options).map_err(query_error)?;
    let mut fields = Map::new();
    fields.insert("by".into(), to_value(&report.by));
    if by.is_time() {
        fields.insert("time_zone".into(), options.scope.tz.name().into());
    }
    fields.insert(
        "total".into(),
        render::usage::object(&report, &report.total),
    );
    fields.insert("unpriced_models".into(), to_value(&report.unpriced_models));
    fields.insert("warnings".into(), to_value(&report.warnings));
    let rows = render::usage::objects(&report);
    Ok(args.answer(fields, "rows", page::page(rows, start, budget, |_| None)))
}

fn subagent_runs(context: &Context<'_>, args: &Args<'_>) -> Result<Value, RpcError> {
    let request: SubagentsRequest = args.request()?;
    let query = request.query("").map_err(query_error)?;
    let budget = args.budget(context.budget)?;
    let start = args.cursor()?;
    let runs = source(context)?.subagents(&query).map_err(query_error)?;
    let items = runs.iter().map(to_value).collect();
    Ok(args.answer(
        Map::new(),
        "runs",
        page::page(items, start, budget, |_| None),
    ))
}
