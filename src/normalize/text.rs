//! Which strings of an entry are searchable, and how they are cut into
//! full-text chunks.

use std::collections::HashSet;

use serde_json::Value;

use super::{Entry, TextField, kind, role_kind};

/// FTS documents are at most this many bytes: ranking and `snippet()` over
/// multi-MB documents is slow (see docs/search.md).
pub const CHUNK_BYTES: usize = 32 * 1024;

/// How far a span starts before the cut that ended the previous one, when
/// that cut had to fall inside a word (see `chunk_spans`).
pub const CHUNK_OVERLAP: usize = 1024;

/// Indexes every string inside tool-call arguments, each as its own field.
pub(super) fn push_leaves(
    out: &mut Entry,
    value: &Value,
    path: String,
    tool_name: &Option<String>,
) {
    match value {
        Value::String(text) => {
            push_string(out, path, kind::TOOL_CALL, tool_name.clone(), text);
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                push_leaves(out, item, format!("{path}[{index}]"), tool_name);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if let Some(child) = child_path(&path, key) {
                    push_leaves(out, item, child, tool_name);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn push_text(
    out: &mut Entry,
    object: &Value,
    key: &str,
    path: &str,
    text_kind: &'static str,
    tool_name: Option<String>,
) {
    if let Some(text) = object.get(key).and_then(Value::as_str) {
        push_string(out, path.to_owned(), text_kind, tool_name, text);
    }
}

/// Adds a searchable field; false when `text` is blank (nothing to find).
pub(super) fn push_string(
    out: &mut Entry,
    json_path: String,
    text_kind: &'static str,
    tool_name: Option<String>,
    text: &str,
) -> bool {
    if text.trim().is_empty() {
        return false;
    }
    out.texts.push(TextField {
        spans: chunk_spans(text, CHUNK_BYTES),
        json_path,
        kind: text_kind,
        tool_name,
        text: text.to_owned(),
        shared: None,
    });
    true
}

/// Scripts written without spaces between words, which unicode61 cannot
/// split: CJK ideographs, kana, hangul, Thai, Lao, Khmer, Myanmar.
pub fn is_unspaced_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3100..=0x312F // Bopomofo
        | 0x3400..=0x4DBF // CJK Ext A
        | 0x4E00..=0x9FFF // CJK Unified
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility
        | 0xFF66..=0xFF9F // half-width katakana
        | 0x20000..=0x3FFFF // CJK Ext B..
    )
}

/// True when `text` holds any character of an unspaced script.
pub fn has_unspaced_script(text: &str) -> bool {
    // Every such script lies at U+0E00 or above: three or four UTF-8 bytes,
    // led by a byte >= 0xE0, which is never a continuation byte. Blocks
    // without such a byte are skipped by a max-reduction, which vectorises
    // where an early-exit scan of the bytes does not (8x faster on ASCII,
    // 3.6x on English text with a few dashes or quotes); only the lead bytes
    // of the other blocks are decoded.
    const BLOCK: usize = 64;
    text.as_bytes().chunks(BLOCK).enumerate().any(|(n, block)| {
        block.iter().fold(0, |max, &byte| max.max(byte)) >= 0xE0
            && block.iter().enumerate().any(|(i, &byte)| {
                byte >= 0xE0
                    && text
                        .get(n * BLOCK + i..)
                        .and_then(|rest| rest.chars().next())
                        .is_some_and(is_unspaced_script)
            })
    })
}

/// Pi's "text of a message": a string as-is, or text blocks joined by " ".
pub fn pi_message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Cuts `text` into spans of at most `max` bytes, so that every word lies
/// whole inside one span wherever the cuts fall (a word cut in two could be
/// found by neither the word index nor `search --substring`).
///
/// A cut goes after a newline, then after a space, in the last quarter of
/// the window; failing both, after the last ASCII byte that is neither a
/// letter nor a digit (a token boundary for unicode61, which splits at
/// every such byte: `a.b`, `x_y`, `{"k":1}`), anywhere in the window. Only
/// a run of letters and digits longer than the whole window (a word of more
/// than `max` bytes, or unspaced script without punctuation) is cut inside:
/// then the next span starts `CHUNK_OVERLAP` bytes before the cut, so a
/// substring of up to that length is still whole in one of the two.
pub fn chunk_spans(text: &str, max: usize) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let overlap = CHUNK_OVERLAP.min(max / 4);
    let mut spans = Vec::new();
    let mut start = 0;
    while bytes.len() - start > max {
        let mut end = start + max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let quarter = start + (end - start) * 3 / 4;
        let window = &bytes[quarter..end];
        let spaced = memchr::memrchr(b'\n', window).or_else(|| memchr::memrchr(b' ', window));
        let next = if let Some(found) = spaced {
            end = quarter + found + 1;
            end
        } else if let Some(found) = bytes[start + 1..end]
            .iter()
            .rposition(|b| b.is_ascii() && !b.is_ascii_alphanumeric())
        {
            end = start + 1 + found + 1;
            end
        } else {
            // One run of letters and digits fills the window.
            let mut back = end - overlap;
            while !text.is_char_boundary(back) {
                back -= 1;
            }
            if back <= start { end } else { back }
        };
        spans.push((start, end - start));
        start = next;
    }
    spans.push((start, bytes.len() - start));
    spans
}

/// The SQLite JSON path of `key` under `parent`, or `None` when the key
/// cannot be written as a quoted label (it holds `"` or `\`).
pub fn child_path(parent: &str, key: &str) -> Option<String> {
    let plain = !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !key.as_bytes()[0].is_ascii_digit();
    if plain {
        Some(format!("{parent}.{key}"))
    } else if key.contains(['"', '\\']) || key.chars().any(char::is_control) {
        None
    } else {
        Some(format!("{parent}.\"{key}\""))
    }
}

/// Keys whose string values are not prose, by design: discriminators and
/// enum values (kept in columns, and filters in `search`), and times. Keys
/// ending in `Id` (identifiers) or `Signature` (opaque provider payloads)
/// are left out too; see `is_noise`. Listed in docs/search.md.
const NOISE_KEYS: &[&str] = &[
    "type",
    "role",
    "id",
    "timestamp",
    "api",
    "provider",
    "model",
    "responseModel",
    "stopReason",
    "rawStopReason",
    "thinkingLevel",
    "providerThinkingLevel",
    "mimeType",
    "customType",
    "toolName",
    "status",
    "agentSource",
    "mode",
    "encoding",
    "hash",
    "signature",
    // pi_agent_rust's attachment references (`{"$piBlob":"sha256:…"}`).
    "$piBlob",
    // oh-my-pi's `attribution` (`user` or `agent`), a column.
    "attribution",
];

/// Strings shorter than this are never taken for a payload.
const PAYLOAD_MIN: usize = 256;

/// True when a string at `key` is noise by design: an identifier, an enum,
/// a signature, or a base64 payload (images are cut out before; this
/// catches payloads in fields piidx does not know).
fn is_noise(key: Option<&str>, text: &str) -> bool {
    if let Some(key) = key
        && (NOISE_KEYS.contains(&key)
            || key.ends_with("Id")
            || key.ends_with("_id")
            || key.ends_with("Signature"))
    {
        return true;
    }
    is_payload(text) || super::payload::is_blob_ref(text)
}

/// A long string of only base64 characters (no spaces), or a base64 data URI.
fn is_payload(text: &str) -> bool {
    if text.len() < PAYLOAD_MIN {
        return false;
    }
    let body = match text.strip_prefix("data:") {
        Some(uri) => match uri.split_once(";base64,") {
            Some((_, body)) => body,
            None => return false,
        },
        None => text,
    };
    body.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// The kind of a string outside the fields piidx reads itself, from where
/// it sits: in a message, the message's role; in a known entry type, that
/// type's; anywhere else `other` (the hit's entry type says which).
fn rest_kind(entry_type: &str, in_message: Option<&'static str>) -> &'static str {
    if let Some(role) = in_message {
        return role;
    }
    match entry_type {
        "compaction" | "branch_summary" => kind::SUMMARY,
        "custom" | "custom_message" => kind::CUSTOM,
        "usage" => kind::USAGE,
        "context_edit" => kind::CONTEXT_EDIT,
        "label" => kind::LABEL,
        "session_info" | "title_change" => kind::SESSION_NAME,
        "model_usage" => kind::USAGE,
        "session_init" => kind::SYSTEM,
        _ => kind::OTHER,
    }
}

/// Makes every string of the entry searchable that the typed readers did
/// not take and that is not noise by design: unknown entry types, unknown
/// fields of known types, unknown block types, tool result `details`, at
/// any depth, each under its own JSON path. Coverage is thus a property of
/// the walk, not of a list of fields.
pub(super) fn push_rest(object: &Value, out: &mut Entry) {
    let covered: HashSet<String> = out.texts.iter().map(|t| t.json_path.clone()).collect();
    let message = object
        .get("message")
        .filter(|_| out.entry_type == "message");
    let message_kind = message.map(|m| role_kind(&super::role_of(m)));
    let tool_name = message
        .filter(|_| message_kind == Some(kind::TOOL_RESULT))
        .and_then(|m| super::str_field(m, "toolName"));
    let outside_kind = rest_kind(&out.entry_type, None);
    let mut found = Vec::new();
    visit_strings(object, &mut String::from("$"), None, &mut |path, text| {
        if covered.contains(path) {
            return;
        }
        let in_message = path.starts_with("$.message.") || path.starts_with("$.message[");
        match message_kind.filter(|_| in_message) {
            Some(kind) => found.push((path.to_owned(), kind, tool_name.clone(), text.to_owned())),
            None => found.push((path.to_owned(), outside_kind, None, text.to_owned())),
        }
    });
    for (json_path, kind, tool_name, text) in found {
        push_string(out, json_path, kind, tool_name, &text);
    }
}

/// Calls `visit(path, text)` for every string below `value` that is not
/// noise by design (`is_noise`), `path` being its SQLite JSON path.
pub(super) fn visit_strings(
    value: &Value,
    path: &mut String,
    key: Option<&str>,
    visit: &mut dyn FnMut(&str, &str),
) {
    match value {
        Value::String(text) if !is_noise(key, text) => visit(path, text),
        Value::Array(items) => {
            let len = path.len();
            for (index, item) in items.iter().enumerate() {
                use std::fmt::Write;
                let _ = write!(path, "[{index}]");
                visit_strings(item, path, key, visit);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            let len = path.len();
            // A tool call's name is in `tool_call_meta` (and `--tool`).
            let tool_call = map.get("type").and_then(Value::as_str) == Some("toolCall");
            for (child, item) in map {
                if !(item.is_string() || item.is_array() || item.is_object())
                    || (tool_call && child == "name")
                {
                    continue;
                }
                let Some(child_path) = child_path(path, child) else {
                    continue;
                };
                *path = child_path;
                visit_strings(item, path, Some(child), visit);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// The value at a SQLite JSON path as the normalizer writes them: `$`, then
/// `.key`, `."quoted key"` or `[index]` steps.
pub fn json_path_mut<'a>(value: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    let mut rest = path.strip_prefix('$')?;
    let mut current = value;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let index: usize = after[..end].parse().ok()?;
            current = current.get_mut(index)?;
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix(".\"") {
            let end = after.find('"')?;
            current = current.get_mut(&after[..end])?;
            rest = &after[end + 1..];
        } else if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get_mut(&after[..end])?;
            rest = &after[end..];
        } else {
            return None;
        }
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_resolve() {
        let mut value: Value =
            serde_json::json!({"message": {"content": [{"a": 1}, {"x y": {"k": 2}}]}});
        assert_eq!(
            json_path_mut(&mut value, "$.message.content[1].\"x y\".k"),
            Some(&mut Value::from(2))
        );
        assert!(json_path_mut(&mut value, "$.message.content[5]").is_none());
    }
}
