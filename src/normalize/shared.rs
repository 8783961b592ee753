//! Values that many sessions repeat leave the entry's JSON and are stored
//! once, by hash (`shared_texts`; migration 0011): the sections, string
//! content and tool list of Pi 1.x system messages, and of the system
//! message a compaction keeps. Each keeps its key and its place among its
//! object's keys, so export puts it back exactly.

use serde_json::{Map, Value};
use xxhash_rust::xxh3::xxh3_128;

use super::{Entry, child_path, kind, text};

/// Smaller values stay in `raw`: a reference costs more than they do.
pub const SHARE_MIN: usize = 256;

/// One value cut out of an entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedValue {
    /// The object it was cut from (`$.message.sections`), and its key there.
    pub json_path: String,
    pub key: String,
    pub key_index: i64,
    /// xxh3-128 of `is_json` and `text`, hex.
    pub hash: String,
    /// `text` is a JSON value (a tool list) rather than the string itself.
    pub is_json: bool,
    pub text: String,
}

/// Where a system message sits in an entry, if it holds one.
fn system_message_path(object: &Value) -> Option<&'static str> {
    match object.get("type").and_then(Value::as_str) {
        Some("message")
            if object.pointer("/message/role").and_then(Value::as_str) == Some("system") =>
        {
            Some("message")
        }
        Some("compaction") if object.get("systemMessage").is_some_and(Value::is_object) => {
            Some("systemMessage")
        }
        _ => None,
    }
}

/// Cuts the shareable values out of `object` into `out`.
pub(super) fn cut(object: &mut Value, out: &mut Vec<SharedValue>) {
    let Some(field) = system_message_path(object) else {
        return;
    };
    let base = format!("$.{field}");
    let Some(message) = object.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(sections) = message.get_mut("sections").and_then(Value::as_object_mut) {
        let long = |value: &Value| value.as_str().is_some_and(|s| s.len() >= SHARE_MIN);
        take(sections, &format!("{base}.sections"), long, out);
    }
    let shared = |key: &str, value: &Value| match key {
        "content" => value.as_str().is_some_and(|s| s.len() >= SHARE_MIN),
        "toolsAdded" => !value.is_string() && value.to_string().len() >= SHARE_MIN,
        _ => false,
    };
    take_keys(message, &base, shared, out);
}

fn take(
    map: &mut Map<String, Value>,
    path: &str,
    wanted: impl Fn(&Value) -> bool,
    out: &mut Vec<SharedValue>,
) {
    take_keys(map, path, |_, value| wanted(value), out);
}

/// Cuts the values `wanted` picks out of `map`. Each keeps its position in
/// the map as it was, so putting them back in that order restores it.
fn take_keys(
    map: &mut Map<String, Value>,
    path: &str,
    wanted: impl Fn(&str, &Value) -> bool,
    out: &mut Vec<SharedValue>,
) {
    let picked: Vec<(usize, String)> = map
        .iter()
        .enumerate()
        .filter(|(_, (key, value))| wanted(key, value))
        .map(|(index, (key, _))| (index, key.clone()))
        .collect();
    for (key_index, key) in picked {
        let Some(value) = map.shift_remove(&key) else {
            continue;
        };
        let (is_json, text) = match value {
            Value::String(text) => (false, text),
            other => (true, other.to_string()),
        };
        out.push(SharedValue {
            json_path: path.to_owned(),
            key,
            key_index: key_index as i64,
            hash: hash(is_json, &text),
            is_json,
            text,
        });
    }
}

fn hash(is_json: bool, text: &str) -> String {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.push(u8::from(is_json));
    bytes.extend_from_slice(text.as_bytes());
    format!("{:032x}", xxh3_128(&bytes))
}

/// The searchable strings of the entry's shared values, as system text.
pub(super) fn push_texts(out: &mut Entry) {
    let mut fields = Vec::new();
    for (index, value) in out.shared.iter().enumerate() {
        let Some(at) = child_path(&value.json_path, &value.key) else {
            continue;
        };
        if !value.is_json {
            fields.push((at, index, "$".to_owned(), value.text.clone()));
            continue;
        }
        let Ok(parsed) = serde_json::from_str::<Value>(&value.text) else {
            continue;
        };
        text::visit_strings(&parsed, &mut String::from("$"), None, &mut |inner, text| {
            let path = format!("{at}{}", &inner[1..]);
            fields.push((path, index, inner.to_owned(), text.to_owned()));
        });
    }
    for (json_path, index, inner, text) in fields {
        if text::push_string(out, json_path, kind::SYSTEM, None, &text)
            && let Some(field) = out.texts.last_mut()
        {
            field.shared = Some((index, inner));
        }
    }
}

/// Puts cut values back into an entry's JSON, each at its place: by
/// object, in the order of their positions there.
pub fn restore(object: &mut Value, mut values: Vec<SharedValue>) {
    values.sort_by(|a, b| (&a.json_path, a.key_index).cmp(&(&b.json_path, b.key_index)));
    for value in values {
        let Some(target) =
            text::json_path_mut(object, &value.json_path).and_then(Value::as_object_mut)
        else {
            continue;
        };
        let restored = if value.is_json {
            match serde_json::from_str(&value.text) {
                Ok(parsed) => parsed,
                Err(_) => continue,
            }
        } else {
            Value::String(value.text)
        };
        let index = (value.key_index.max(0) as usize).min(target.len());
        target.shift_insert(index, value.key, restored);
    }
}
