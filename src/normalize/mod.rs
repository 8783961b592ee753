//! Stage 4: turn one parsed JSON object into the rows that describe it.
//!
//! Pure: no IO, no SQL, never fails. Whatever the object holds, the result
//! keeps all of it: `raw` is the object re-serialized with image payloads cut
//! out (they travel separately as decoded bytes), so unknown types, roles,
//! blocks and fields stay queryable with `json_extract`, and an entry can be
//! written back out exactly. Known fields are lifted into typed rows, and
//! every searchable string is listed with its JSON path so the index can point
//! at it instead of copying it.
//!
//! `text` decides which strings are searchable and cuts them into chunks,
//! `payload` cuts image payloads out, `usage` reads token counts and costs,
//! `subagent` reads the runs a subagent tool result holds, `redact` takes
//! secrets out of every string when the index redacts.

pub mod payload;
pub mod redact;
pub mod shared;
pub mod subagent;
mod text;
mod usage;

use serde_json::Value;

use crate::secrets::Redactor;
use crate::time::parse_iso_ms;
pub use text::{
    CHUNK_BYTES, CHUNK_OVERLAP, child_path, chunk_spans, has_unspaced_script, is_unspaced_script,
    json_path_mut, pi_message_text,
};
use text::{push_leaves, push_string, push_text};
use usage::{parse_usage, push_usage};

/// Entry types that belong to `pi --mode json` event streams, not sessions.
const EVENT_TYPES: &[&str] = &[
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "auto_compaction_start",
    "auto_compaction_end",
    "auto_retry_start",
    "auto_retry_end",
];

/// True when an object is an AgentSession event rather than a session entry.
pub fn is_event(object: &Value) -> bool {
    object
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| EVENT_TYPES.contains(&kind))
}

/// Which coding agent wrote a session: `pi` (upstream Pi), `omp`
/// (oh-my-pi) or `pi_agent_rust` (the Rust port). See `agent_of_header`.
pub mod agent {
    pub const PI: &str = "pi";
    pub const OMP: &str = "omp";
    pub const PI_AGENT_RUST: &str = "pi_agent_rust";
    /// Every agent, in the order `--agent` lists them.
    pub const ALL: &[&str] = &[PI, OMP, PI_AGENT_RUST];
}

/// The facts of a `type: "session"` header line.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub session_id: String,
    /// See `agent`; set from the header's own fields here, refined by
    /// `ingest` from what surrounds it (an omp title slot, the port's file
    /// name).
    pub agent: &'static str,
    pub version: i64,
    pub cwd: String,
    pub timestamp: Option<String>,
    pub created_ms: Option<i64>,
    pub parent_session: Option<String>,
    pub raw: String,
}

/// Reads a header; `None` when the object is not a session header with a
/// string id (Pi's own test).
pub fn header(object: &Value) -> Option<Header> {
    if object.get("type").and_then(Value::as_str) != Some("session") {
        return None;
    }
    let session_id = object.get("id").and_then(Value::as_str)?.to_owned();
    let timestamp = str_field(object, "timestamp");
    Some(Header {
        session_id,
        agent: agent_of_header(object),
        version: object.get("version").and_then(as_int).unwrap_or(1),
        cwd: str_field(object, "cwd").unwrap_or_default(),
        created_ms: timestamp.as_deref().and_then(parse_iso_ms),
        timestamp,
        parent_session: str_field(object, "parentSession")
            .or_else(|| str_field(object, "branchedFrom")),
        raw: object.to_string(),
    })
}

/// The agent a header alone shows: fields only oh-my-pi writes (`title`,
/// `titleSource`, `additionalDirectories`, `previousSessionFiles`,
/// `providerPromptCacheKey`; omp 18 `session-entries.ts`) or a session id
/// only omp gives (`is_omp_session_id`: omp 1.5 to 13.x), fields only
/// pi_agent_rust writes (`branchedFrom`, `leafId`, `fallbackProvider`,
/// `fallbackModelId`, `fallbackThinkingLevel`; its `SessionHeader`), else Pi.
pub fn agent_of_header(object: &Value) -> &'static str {
    const OMP_KEYS: &[&str] = &[
        "title",
        "titleSource",
        "additionalDirectories",
        "previousSessionFiles",
        "providerPromptCacheKey",
    ];
    const PORT_KEYS: &[&str] = &[
        "branchedFrom",
        "leafId",
        "fallbackProvider",
        "fallbackModelId",
        "fallbackThinkingLevel",
    ];
    let has = |keys: &[&str]| keys.iter().any(|key| object.get(*key).is_some());
    // Pi's v1 headers had `branchedFrom` too; the port writes version 3 only.
    let v3 = object.get("version").and_then(as_int) == Some(3);
    let omp_id = object
        .get("id")
        .and_then(Value::as_str)
        .is_some_and(is_omp_session_id);
    if has(OMP_KEYS) || omp_id {
        agent::OMP
    } else if v3 && has(PORT_KEYS) {
        agent::PI_AGENT_RUST
    } else {
        agent::PI
    }
}

/// Entry types only oh-my-pi writes, in every version since it left Pi's
/// format (its git history and npm releases: `ttsr_injection` since 1.5,
/// January 2026; `service_tier_change`, `mcp_tool_selection`,
/// `session_init`, `mode_change` by 13.x; `title_change`, `model_usage`,
/// `credential_pin`, `reset_boundary` in 18.x).
const OMP_ENTRY_TYPES: &[&str] = &[
    "ttsr_injection",
    "service_tier_change",
    "mcp_tool_selection",
    "session_init",
    "mode_change",
    "title_change",
    "model_usage",
    "credential_pin",
    "reset_boundary",
];

/// True for an entry only oh-my-pi writes: one of `OMP_ENTRY_TYPES`, or a
/// `model_change` with one `model: "provider/id"` and no `provider` (omp
/// since 1.5's model roles; Pi writes `provider` + `modelId`). An omp
/// session whose header has no field of omp's own (before 17.2 an untitled
/// session's header is Pi's) is known by its entries.
pub fn is_omp_entry(object: &Value) -> bool {
    match object.get("type").and_then(Value::as_str) {
        Some("model_change") => {
            object.get("model").is_some_and(Value::is_string)
                && object.get("provider").is_none()
                && object.get("modelId").is_none()
        }
        Some(kind) => OMP_ENTRY_TYPES.contains(&kind),
        None => false,
    }
}

/// True for a session id only oh-my-pi gives: a 21-character nanoid
/// (`[A-Za-z0-9_-]`; omp 1.5 to 5.x, `nanoid()`) or a 16-digit lowercase
/// hex snowflake (omp 13.x, pi-utils `Snowflake.next()`). Pi and the port
/// write UUIDs (36 characters); omp 14 and later UUIDv7 too.
pub fn is_omp_session_id(id: &str) -> bool {
    let nanoid = id.len() == 21
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let snowflake = id.len() == 16 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    nanoid || snowflake
}

/// True for a file name only pi_agent_rust gives: its timestamp has a `.`
/// before the milliseconds (`2026-02-03T00-00-00.000Z_<id8>.jsonl`; Pi
/// and omp write `-000Z_`), from chrono's `%Y-%m-%dT%H-%M-%S%.3fZ`.
pub fn is_port_file_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > 25
        && bytes[19] == b'.'
        && bytes[23] == b'Z'
        && bytes[24] == b'_'
        && bytes[..19].iter().enumerate().all(|(i, b)| match i {
            4 | 7 | 13 | 16 => *b == b'-',
            10 => *b == b'T',
            _ => b.is_ascii_digit(),
        })
        && bytes[20..23].iter().all(u8::is_ascii_digit)
}

/// oh-my-pi's title slot: the first physical line of its session files, a
/// fixed-size `{"type":"title","v":1,"title","source"?,"updatedAt","pad"}`
/// object rewritten in place on every rename (omp 18
/// `session-title-slot.ts`).
#[derive(Debug, Clone, PartialEq)]
pub struct TitleSlot {
    /// `title` when it is a string (`""`: untitled).
    pub title: Option<String>,
    /// The slot as written, padding included.
    pub raw: String,
}

/// Reads a title slot; `None` when the object is not one.
pub fn title_slot(object: &Value) -> Option<TitleSlot> {
    if object.get("type").and_then(Value::as_str) != Some("title") {
        return None;
    }
    Some(TitleSlot {
        title: str_field(object, "title"),
        raw: object.to_string(),
    })
}

/// Where an object sits in its file and what came before it.
#[derive(Debug, Clone)]
pub struct EntryContext {
    pub line_no: i64,
    pub byte_offset: i64,
    pub byte_len: i64,
    /// 0 for the first object of a line; glued objects count up.
    pub obj_in_line: i64,
    /// Index among the objects Pi itself would parse, header = 0; `None` for
    /// objects Pi drops (glued lines). v1 `firstKeptEntryIndex` counts these.
    pub pi_index: Option<i64>,
    /// Pi's `listAll()` sees the object (it reads lines with readline, which
    /// also ends one at a lone `\r`), so it counts in the session list.
    pub listed: bool,
    /// v1 files have no ids: ids are synthesized and chained in file order.
    pub legacy_v1: bool,
    pub previous_entry_id: Option<String>,
}

/// Kinds of searchable text, used by `search --role`.
pub mod kind {
    pub const USER: &str = "user";
    pub const ASSISTANT: &str = "assistant";
    pub const THINKING: &str = "thinking";
    pub const TOOL_CALL: &str = "tool_call";
    pub const TOOL_RESULT: &str = "tool_result";
    pub const BASH: &str = "bash";
    pub const SUMMARY: &str = "summary";
    pub const CUSTOM: &str = "custom";
    pub const SYSTEM: &str = "system";
    /// `usage` entries (`note`, `kind`).
    pub const USAGE: &str = "usage";
    /// `context_edit` replacements.
    pub const CONTEXT_EDIT: &str = "context_edit";
    pub const LABEL: &str = "label";
    /// `session_info` names.
    pub const SESSION_NAME: &str = "session_name";
    /// Strings outside any message in entry types piidx does not know
    /// (`search --role other --type <type>`), and in unknown roles.
    pub const OTHER: &str = "other";
}

/// One searchable string field, with the spans it is cut into.
#[derive(Debug, Clone, PartialEq)]
pub struct TextField {
    pub json_path: String,
    pub kind: &'static str,
    pub tool_name: Option<String>,
    pub text: String,
    /// `(start, len)` byte spans, each at most `CHUNK_BYTES`, on char boundaries.
    pub spans: Vec<(usize, usize)>,
    /// For text inside a shared value (`Entry::shared[index]`): that index
    /// and the path of the string inside the value (`$` for the value itself).
    pub shared: Option<(usize, String)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageRow {
    pub role: String,
    pub timestamp_ms: Option<i64>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub api: Option<String>,
    pub stop_reason: Option<String>,
    pub error_message: Option<String>,
    pub response_id: Option<String>,
    pub usage: Option<Usage>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub is_error: Option<bool>,
    pub exit_code: Option<i64>,
    pub custom_type: Option<String>,
    /// oh-my-pi's `attribution` (`user` or `agent`: who initiated it).
    pub attribution: Option<String>,
    pub text_len: i64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub total: i64,
    pub cost_input: Option<f64>,
    pub cost_output: Option<f64>,
    pub cost_cache_read: Option<f64>,
    pub cost_cache_write: Option<f64>,
    pub cost_total: Option<f64>,
    /// Parts Pi 1.5 reports and never adds again: reasoning is part of
    /// `output`, the 1-hour cache writes part of `cache_write`.
    pub reasoning: Option<i64>,
    pub cache_write_1h: Option<i64>,
    /// `cost.totalFromProvider`: the provider billed `cost_total`.
    pub cost_from_provider: Option<bool>,
}

/// A usage record from any source (see `usage_records` in docs/schema.md).
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub source: &'static str,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub response_id: Option<String>,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlockRow {
    pub json_path: String,
    pub block_index: i64,
    pub block_type: String,
    pub text_len: Option<i64>,
    pub redacted: Option<bool>,
    pub tool_call_id: Option<String>,
    pub image_hash: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRow {
    pub json_path: String,
    pub block_index: i64,
    pub call_id: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImageRow {
    /// Path of the object that held the payload (the image block).
    pub json_path: String,
    /// The key the payload was cut from (`data`, or `content` for v1 attachments).
    pub key: String,
    /// Its position among the object's keys, so the payload goes back where
    /// it was.
    pub key_index: i64,
    pub mime_type: Option<String>,
    pub hash: String,
    /// `base64` when `bytes` are the decoded payload (re-encoding gives the
    /// original back exactly), `raw` when they are the original string's bytes.
    pub encoding: &'static str,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Detail {
    #[default]
    None,
    Compaction {
        first_kept_entry_id: Option<String>,
        first_kept_entry_index: Option<i64>,
        tokens_before: Option<i64>,
        from_hook: Option<bool>,
        /// oh-my-pi's `shortSummary` (its `/resume` name when there is no title).
        short_summary: Option<String>,
    },
    BranchSummary {
        from_id: Option<String>,
        from_hook: Option<bool>,
    },
    Label {
        target_id: Option<String>,
        label: Option<String>,
    },
    ModelChange {
        kind: &'static str,
        provider: Option<String>,
        model_id: Option<String>,
        thinking_level: Option<String>,
    },
}

/// Everything one session entry becomes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entry {
    pub entry_id: String,
    pub parent_id: Option<String>,
    pub synthetic_id: bool,
    pub entry_type: String,
    pub timestamp: Option<String>,
    pub timestamp_ms: Option<i64>,
    pub line_no: i64,
    pub byte_offset: i64,
    pub byte_len: i64,
    pub obj_in_line: i64,
    pub pi_index: Option<i64>,
    pub glued: bool,
    /// See `EntryContext::listed`.
    pub listed: bool,
    pub raw: String,
    pub message: Option<MessageRow>,
    pub blocks: Vec<BlockRow>,
    pub tool_calls: Vec<ToolCallRow>,
    pub usage: Vec<UsageRow>,
    pub detail: Detail,
    pub images: Vec<ImageRow>,
    pub texts: Vec<TextField>,
    /// `Some(name)` for `session_info` entries (`Some(None)`: name cleared).
    pub session_name: Option<Option<String>>,
    /// For user messages: the text as Pi computes it for `firstMessage`.
    pub user_text: Option<String>,
    /// For developer and assistant messages: which of `texts` is their
    /// first text, what oh-my-pi's list shows for a session that has no
    /// user text (`session-listing.ts`, `extractFirstDisplayMessageFromPrefix`).
    pub other_text: Option<usize>,
    /// Subagent runs held in a toolResult's `details.results` (see `subagent`).
    pub subagent_runs: Vec<subagent::SubagentRun>,
    /// Background jobs an omp `async-result` custom message delivers, or a
    /// `hub` tool result reports settled (see `subagent::deliveries`).
    pub subagent_deliveries: Vec<subagent::Delivery>,
    /// Values cut out of `raw` to be stored once (see `shared`).
    pub shared: Vec<shared::SharedValue>,
    /// Secrets replaced by a mark everywhere in the entry (see `redact`).
    pub redactions: Vec<redact::RedactionRow>,
    /// A shape only oh-my-pi writes (`is_omp_entry`): its session is omp's
    /// whatever its header says.
    pub omp_only: bool,
}

/// Normalizes one non-header object.
pub fn entry(object: Value, ctx: &EntryContext) -> Entry {
    entry_redacted(object, ctx, None)
}

/// `entry`, with the secrets in its strings replaced first when
/// `redactor` is given (image payloads are cut out before: they are not
/// text).
pub fn entry_redacted(mut object: Value, ctx: &EntryContext, redactor: Option<&Redactor>) -> Entry {
    let (entry_id, parent_id, synthetic_id) = identity(&object, ctx);
    let entry_type = str_field(&object, "type").unwrap_or_default();
    let timestamp = str_field(&object, "timestamp");
    let timestamp_ms = timestamp.as_deref().and_then(parse_iso_ms);

    let mut images = Vec::new();
    payload::extract_images(&mut object, &mut String::from("$"), &mut images);
    let mut redactions = Vec::new();
    if let Some(redactor) = redactor {
        redact::redact(&mut object, "$", redactor, &mut redactions);
    }
    let mut shared_values = Vec::new();
    shared::cut(&mut object, &mut shared_values);

    let mut out = Entry {
        entry_id,
        parent_id,
        synthetic_id,
        entry_type,
        timestamp,
        timestamp_ms,
        line_no: ctx.line_no,
        byte_offset: ctx.byte_offset,
        byte_len: ctx.byte_len,
        obj_in_line: ctx.obj_in_line,
        pi_index: ctx.pi_index,
        glued: ctx.pi_index.is_none(),
        listed: ctx.listed,
        raw: String::new(),
        message: None,
        blocks: Vec::new(),
        tool_calls: Vec::new(),
        usage: Vec::new(),
        detail: Detail::None,
        images,
        texts: Vec::new(),
        session_name: None,
        user_text: None,
        other_text: None,
        subagent_runs: Vec::new(),
        subagent_deliveries: Vec::new(),
        shared: shared_values,
        redactions,
        omp_only: is_omp_entry(&object),
    };
    describe(&object, &mut out);
    text::push_rest(&object, &mut out);
    shared::push_texts(&mut out);
    shared::cut_large(&mut object, &mut out);
    out.raw = object.to_string();
    out
}

fn identity(object: &Value, ctx: &EntryContext) -> (String, Option<String>, bool) {
    let suffix = if ctx.obj_in_line > 0 {
        format!(".{}", ctx.obj_in_line)
    } else {
        String::new()
    };
    if ctx.legacy_v1 {
        let id = format!("v1-{}{suffix}", ctx.line_no);
        return (id, ctx.previous_entry_id.clone(), true);
    }
    // An empty string is no id: Pi tests ids and parents for truthiness (a
    // `""` parent ends a branch walk, a `""` leaf falls back to the last
    // entry), so it behaves like a missing one there too.
    let non_empty = |key| str_field(object, key).filter(|value| !value.is_empty());
    let parent = non_empty("parentId");
    match non_empty("id") {
        Some(id) => (id, parent, false),
        None => (format!("L{}{suffix}", ctx.line_no), parent, true),
    }
}

/// Fills the typed rows from the (image-free) object.
fn describe(object: &Value, out: &mut Entry) {
    match out.entry_type.as_str() {
        "message" => {
            if let Some(message) = object.get("message") {
                describe_message(message, "$.message", out);
                out.subagent_runs = subagent::describe(message, "$.message", out);
                out.subagent_deliveries = subagent::hub_deliveries(message);
            }
        }
        "compaction" => {
            push_text(out, object, "summary", "$.summary", kind::SUMMARY, None);
            push_usage(out, object.get("usage"), "compaction", None, None);
            out.detail = Detail::Compaction {
                first_kept_entry_id: str_field(object, "firstKeptEntryId"),
                first_kept_entry_index: object.get("firstKeptEntryIndex").and_then(as_int),
                tokens_before: object.get("tokensBefore").and_then(as_int),
                from_hook: object
                    .get("fromHook")
                    .or_else(|| object.get("fromExtension"))
                    .and_then(Value::as_bool),
                short_summary: str_field(object, "shortSummary"),
            };
        }
        "branch_summary" => {
            push_text(out, object, "summary", "$.summary", kind::SUMMARY, None);
            push_usage(out, object.get("usage"), "branch_summary", None, None);
            out.detail = Detail::BranchSummary {
                from_id: str_field(object, "fromId"),
                from_hook: object
                    .get("fromHook")
                    .or_else(|| object.get("fromExtension"))
                    .and_then(Value::as_bool),
            };
        }
        "custom_message" => {
            if let Some(content) = object.get("content") {
                describe_content(content, "$.content", kind::CUSTOM, out);
            }
            out.subagent_deliveries = subagent::deliveries(object);
        }
        "label" => {
            out.detail = Detail::Label {
                target_id: str_field(object, "targetId"),
                label: str_field(object, "label"),
            };
        }
        "session_info" => {
            out.session_name = Some(str_field(object, "name"));
        }
        "model_change" => {
            // The model's name is what one types to find a switch to it; its
            // key ends in `Id`, which is otherwise left out as an identifier.
            push_text(out, object, "modelId", "$.modelId", kind::OTHER, None);
            // oh-my-pi writes one `model: "provider/id"` (split at the first
            // `/`, as its `parseModelString` does) instead of the two fields.
            let (provider, model_id) = match str_field(object, "model") {
                Some(model) if object.get("modelId").is_none() => match model.split_once('/') {
                    Some((provider, id)) if !provider.is_empty() => {
                        (Some(provider.to_owned()), Some(id.to_owned()))
                    }
                    _ => (str_field(object, "provider"), Some(model)),
                },
                _ => (str_field(object, "provider"), str_field(object, "modelId")),
            };
            out.detail = Detail::ModelChange {
                kind: "model",
                provider,
                model_id,
                thinking_level: None,
            };
        }
        "title_change" => {
            push_text(out, object, "title", "$.title", kind::SESSION_NAME, None);
        }
        // oh-my-pi's side calls (titles, compaction, …): spend that no
        // assistant message records.
        "model_usage" => {
            let provider = str_field(object, "provider");
            let model = str_field(object, "model");
            push_usage(out, object.get("usage"), "model_usage", provider, model);
        }
        "thinking_level_change" => {
            out.detail = Detail::ModelChange {
                kind: "thinking_level",
                provider: None,
                model_id: None,
                thinking_level: str_field(object, "thinkingLevel"),
            };
        }
        "usage" => {
            let provider = str_field(object, "provider");
            let model = str_field(object, "model");
            push_usage(out, object.get("usage"), "usage_entry", provider, model);
        }
        _ => {}
    }
}

/// A message's role as piidx names it: v2 files call extension messages
/// `hookMessage`, which v3 renamed `custom`.
fn role_of(message: &Value) -> String {
    let role = str_field(message, "role").unwrap_or_default();
    if role == "hookMessage" {
        "custom".to_owned()
    } else {
        role
    }
}

/// The kind of the text a message of `role` holds.
pub(crate) fn role_kind(role: &str) -> &'static str {
    match role {
        "user" => kind::USER,
        "assistant" => kind::ASSISTANT,
        "toolResult" => kind::TOOL_RESULT,
        "bashExecution" => kind::BASH,
        "custom" => kind::CUSTOM,
        "system" | "developer" => kind::SYSTEM,
        "pythonExecution" => kind::BASH,
        "fileMention" => kind::USER,
        "branchSummary" | "compactionSummary" => kind::SUMMARY,
        _ => kind::OTHER,
    }
}

pub(crate) fn describe_message(message: &Value, path: &str, out: &mut Entry) {
    let role = role_of(message);
    let text_kind = role_kind(&role);
    let tool_name = str_field(message, "toolName");
    let mut row = MessageRow {
        timestamp_ms: message
            .get("timestamp")
            .and_then(as_int)
            .or(out.timestamp_ms),
        provider: str_field(message, "provider"),
        model: str_field(message, "model"),
        api: str_field(message, "api"),
        stop_reason: str_field(message, "stopReason"),
        error_message: str_field(message, "errorMessage"),
        response_id: str_field(message, "responseId"),
        usage: message.get("usage").and_then(parse_usage),
        tool_call_id: str_field(message, "toolCallId"),
        tool_name: tool_name.clone(),
        is_error: message.get("isError").and_then(Value::as_bool),
        exit_code: message.get("exitCode").and_then(as_int),
        custom_type: str_field(message, "customType"),
        attribution: str_field(message, "attribution"),
        role,
        text_len: 0,
    };
    let texts_before = out.texts.len();
    if let Some(content) = message.get("content") {
        let result_tool = if text_kind == kind::TOOL_RESULT {
            tool_name.clone()
        } else {
            None
        };
        let content_path = format!("{path}.content");
        describe_content_with_tool(content, &content_path, text_kind, result_tool, out);
        if matches!(row.role.as_str(), "developer" | "assistant") {
            out.other_text = out.texts[texts_before..]
                .iter()
                .position(|text| {
                    text.kind != kind::THINKING
                        && text.kind != kind::TOOL_CALL
                        && !text.text.is_empty()
                })
                .map(|index| texts_before + index);
        }
    }
    match row.role.as_str() {
        "pythonExecution" => {
            for key in ["code", "output"] {
                push_text(
                    out,
                    message,
                    key,
                    &format!("{path}.{key}"),
                    kind::BASH,
                    None,
                );
            }
        }
        "branchSummary" | "compactionSummary" => {
            push_text(
                out,
                message,
                "summary",
                &format!("{path}.summary"),
                kind::SUMMARY,
                None,
            );
        }
        "bashExecution" => {
            push_text(
                out,
                message,
                "command",
                &format!("{path}.command"),
                kind::BASH,
                None,
            );
            push_text(
                out,
                message,
                "output",
                &format!("{path}.output"),
                kind::BASH,
                None,
            );
        }
        "toolResult" => {
            // Before 2025-11-12 tool results carried `output` instead of `content`.
            push_text(
                out,
                message,
                "output",
                &format!("{path}.output"),
                kind::TOOL_RESULT,
                tool_name,
            );
        }
        "user" => out.user_text = Some(pi_message_text(message.get("content"))),
        _ => {}
    }
    row.text_len = out.texts[texts_before..]
        .iter()
        .filter(|text| text.kind != kind::THINKING && text.kind != kind::TOOL_CALL)
        .map(|text| text.text.len() as i64)
        .sum();
    let source = match row.role.as_str() {
        "assistant" => Some("assistant"),
        "toolResult" => Some("tool_result"),
        _ => None,
    };
    if let (Some(source), Some(usage)) = (source, row.usage.clone()) {
        out.usage.push(UsageRow {
            source,
            provider: row.provider.clone(),
            model: row.model.clone(),
            response_id: row.response_id.clone(),
            usage,
        });
    }
    out.message = Some(row);
}

fn describe_content(content: &Value, path: &str, text_kind: &'static str, out: &mut Entry) {
    describe_content_with_tool(content, path, text_kind, None, out);
}

/// `content` is a string or an array of blocks (text, thinking, toolCall,
/// image, or anything else).
fn describe_content_with_tool(
    content: &Value,
    path: &str,
    text_kind: &'static str,
    tool_name: Option<String>,
    out: &mut Entry,
) {
    match content {
        Value::String(text) => {
            push_string(out, path.to_owned(), text_kind, tool_name, text);
        }
        Value::Array(blocks) => {
            for (index, block) in blocks.iter().enumerate() {
                let block_path = format!("{path}[{index}]");
                describe_block(block, block_path, index as i64, text_kind, &tool_name, out);
            }
        }
        _ => {}
    }
}

fn describe_block(
    block: &Value,
    path: String,
    index: i64,
    text_kind: &'static str,
    tool_name: &Option<String>,
    out: &mut Entry,
) {
    let block_type = str_field(block, "type").unwrap_or_default();
    let mut row = BlockRow {
        json_path: path.clone(),
        block_index: index,
        block_type: block_type.clone(),
        text_len: None,
        redacted: None,
        tool_call_id: None,
        image_hash: None,
    };
    match block_type.as_str() {
        "thinking" => {
            row.redacted = block.get("redacted").and_then(Value::as_bool);
            row.text_len = text_len(block, "thinking");
            push_text(
                out,
                block,
                "thinking",
                &format!("{path}.thinking"),
                kind::THINKING,
                None,
            );
        }
        "toolCall" => {
            let name = str_field(block, "name");
            row.tool_call_id = str_field(block, "id");
            out.tool_calls.push(ToolCallRow {
                json_path: path.clone(),
                block_index: index,
                call_id: row.tool_call_id.clone(),
                name: name.clone(),
            });
            if let Some(arguments) = block.get("arguments") {
                push_leaves(out, arguments, format!("{path}.arguments"), &name);
            }
        }
        "image" => {
            row.image_hash = out
                .images
                .iter()
                .find(|image| image.json_path == path)
                .map(|image| image.hash.clone());
        }
        // Text blocks and unknown blocks that carry a `text` string.
        _ => {
            row.text_len = text_len(block, "text");
            push_text(
                out,
                block,
                "text",
                &format!("{path}.text"),
                text_kind,
                tool_name.clone(),
            );
        }
    }
    out.blocks.push(row);
}

fn text_len(object: &Value, key: &str) -> Option<i64> {
    object
        .get(key)
        .and_then(Value::as_str)
        .map(|text| text.len() as i64)
}

pub fn str_field(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Integers may be written as floats by some writers (`3.0`).
pub fn as_int(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_only_omp_writes() {
        assert!(is_omp_session_id("V1StGXR8_Z5jdHi6B-myT"));
        assert!(is_omp_session_id("14aa9a8800000001"));
        assert!(!is_omp_session_id("019c165b-2d00-7797-8064-8eb6a53576c1"));
        assert!(!is_omp_session_id("sess-123"));
        assert!(!is_omp_session_id("14AA9A8800000001"));
        assert!(is_omp_entry(
            &json!({"type":"model_change","model":"anthropic/claude-sonnet-4-5"})
        ));
        assert!(!is_omp_entry(
            &json!({"type":"model_change","provider":"anthropic","modelId":"claude-sonnet-4-5"})
        ));
        assert!(is_omp_entry(
            &json!({"type":"ttsr_injection","injectedRules":[]})
        ));
        assert!(!is_omp_entry(&json!({"type":"session_info","name":"x"})));
        assert_eq!(
            agent_of_header(&json!({"type":"session","version":3,"id":"14aa9a8800000001"})),
            agent::OMP
        );
    }

    fn ctx() -> EntryContext {
        EntryContext {
            line_no: 2,
            byte_offset: 10,
            byte_len: 5,
            obj_in_line: 0,
            pi_index: Some(1),
            listed: true,
            legacy_v1: false,
            previous_entry_id: None,
        }
    }

    #[test]
    fn empty_ids_are_missing_ids() {
        let entry = entry(json!({"type":"label","id":"","parentId":""}), &ctx());
        assert_eq!(entry.entry_id, "L2");
        assert!(entry.synthetic_id);
        assert_eq!(entry.parent_id, None);
    }

    #[test]
    fn assistant_message_becomes_rows_and_text_fields() {
        let object = json!({"type":"message","id":"a1","parentId":"p0","timestamp":"2026-01-01T00:00:00Z",
            "message":{"role":"assistant","content":[
                {"type":"thinking","thinking":"hmm","redacted":true},
                {"type":"text","text":"hello"},
                {"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls","opts":{"x y":"deep"}}}],
            "provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":{"total":0.5}},
            "stopReason":"toolUse","timestamp":1767225600001u64}});
        let entry = entry(object, &ctx());
        assert_eq!(entry.entry_id, "a1");
        assert_eq!(entry.parent_id.as_deref(), Some("p0"));
        let message = entry.message.as_ref().unwrap();
        assert_eq!(message.timestamp_ms, Some(1767225600001));
        assert_eq!(message.usage.as_ref().unwrap().total, 10);
        let paths: Vec<_> = entry
            .texts
            .iter()
            .map(|t| (t.json_path.as_str(), t.kind))
            .collect();
        assert_eq!(
            paths,
            [
                ("$.message.content[0].thinking", kind::THINKING),
                ("$.message.content[1].text", kind::ASSISTANT),
                ("$.message.content[2].arguments.command", kind::TOOL_CALL),
                (
                    "$.message.content[2].arguments.opts.\"x y\"",
                    kind::TOOL_CALL
                ),
            ]
        );
        assert_eq!(entry.tool_calls[0].call_id.as_deref(), Some("c1"));
        assert_eq!(entry.usage[0].source, "assistant");
    }

    #[test]
    fn image_payloads_leave_raw_and_come_back_decoded() {
        let object = json!({"type":"message","id":"u","message":{"role":"user","content":[
            {"type":"text","text":"look"},{"type":"image","data":"aGVsbG8=","mimeType":"image/png"}]}});
        let entry = entry(object, &ctx());
        assert!(!entry.raw.contains("aGVsbG8="));
        assert_eq!(entry.images[0].bytes, b"hello");
        assert_eq!(entry.images[0].json_path, "$.message.content[1]");
        assert_eq!(entry.user_text.as_deref(), Some("look"));
        assert!(entry.blocks[1].image_hash.is_some());
    }

    #[test]
    fn an_assistant_or_developer_message_names_its_first_text() {
        let text_of = |message: Value| {
            let entry = entry(json!({"type":"message","id":"m","message":message}), &ctx());
            entry
                .other_text
                .map(|index| entry.texts[index].text.clone())
        };
        let answer = json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"hmm"},
            {"type":"toolCall","id":"c","name":"read","arguments":{"text":"arg"}},
            {"type":"text","text":""},
            {"type":"text","text":"first"},
            {"type":"text","text":"second"}]});
        assert_eq!(text_of(answer).as_deref(), Some("first"));
        let note = json!({"role":"developer","content":"keep the flag on"});
        assert_eq!(text_of(note).as_deref(), Some("keep the flag on"));
        assert_eq!(text_of(json!({"role":"user","content":"hi"})), None);
        assert_eq!(text_of(json!({"role":"assistant","content":[]})), None);
    }

    #[test]
    fn v1_entries_get_synthetic_chained_ids() {
        let mut context = ctx();
        context.legacy_v1 = true;
        context.previous_entry_id = Some("v1-1".into());
        let entry = entry(
            json!({"type":"message","message":{"role":"user","content":"hi"}}),
            &context,
        );
        assert_eq!(entry.entry_id, "v1-2");
        assert_eq!(entry.parent_id.as_deref(), Some("v1-1"));
        assert!(entry.synthetic_id);
    }

    #[test]
    fn chunks_cover_the_text_on_char_boundaries() {
        let text = "αβγ ".repeat(20_000);
        let spans = chunk_spans(&text, 1000);
        let mut next = 0;
        for (start, len) in &spans {
            assert_eq!(*start, next);
            assert!(*len <= 1000 && *len > 0);
            assert!(text.is_char_boundary(start + len));
            next = start + len;
        }
        assert_eq!(next, text.len());
    }

    #[test]
    fn chunks_are_cut_between_words_without_whitespace() {
        // Minified JSON: no space or newline anywhere.
        let text = (0..4000)
            .map(|n| format!("{{\"key{n}\":\"value{n}abcdef\"}}"))
            .collect::<String>();
        let spans = chunk_spans(&text, 1000);
        assert!(spans.len() > 50);
        let mut next = 0;
        for (start, len) in &spans {
            assert_eq!(*start, next, "contiguous when a boundary exists");
            let end = start + len;
            let bytes = text.as_bytes();
            if end < text.len() {
                assert!(
                    !(bytes[end - 1].is_ascii_alphanumeric() && bytes[end].is_ascii_alphanumeric()),
                    "cut inside a word at {end}"
                );
            }
            next = end;
        }
        assert_eq!(next, text.len());
    }

    #[test]
    fn a_word_longer_than_a_chunk_is_cut_with_an_overlap() {
        let text = format!("intro {}", "x".repeat(10_000));
        let spans = chunk_spans(&text, 1000);
        let overlap = CHUNK_OVERLAP.min(1000 / 4);
        for pair in spans.windows(2) {
            let (start, len) = pair[0];
            assert!(len <= 1000);
            let end = start + len;
            // The space ends the first span; after it every cut is inside
            // the run, and the next span starts `overlap` bytes back.
            if start > 0 {
                assert_eq!(pair[1].0, end - overlap);
            }
        }
        let (last_start, last_len) = spans[spans.len() - 1];
        assert_eq!(last_start + last_len, text.len());
    }

    #[test]
    fn header_rules_follow_pi() {
        assert!(header(&json!({"type":"session","id":5})).is_none());
        let h = header(&json!({"type":"session","id":"s","branchedFrom":"/x.jsonl"})).unwrap();
        assert_eq!(h.version, 1);
        assert_eq!(h.parent_session.as_deref(), Some("/x.jsonl"));
    }
}
