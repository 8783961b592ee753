//! Image payloads leave the entry's JSON: they are kept decoded, by hash,
//! and put back at their place on export.

use base64::Engine;
use serde_json::{Map, Value};
use xxhash_rust::xxh3::xxh3_128;

use super::{ImageRow, child_path};

/// Cuts base64 payloads out of every image object in the entry.
pub(super) fn extract_images(value: &mut Value, path: &mut String, out: &mut Vec<ImageRow>) {
    match value {
        Value::Object(map) => {
            if let Some(image) = take_image(map, path) {
                out.push(image);
            }
            for (key, child) in map.iter_mut() {
                if !(child.is_object() || child.is_array()) {
                    continue;
                }
                let Some(child_path) = child_path(path, key) else {
                    continue;
                };
                let mut child_path = child_path;
                extract_images(child, &mut child_path, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                if item.is_object() || item.is_array() {
                    let mut child_path = format!("{path}[{index}]");
                    extract_images(item, &mut child_path, out);
                }
            }
        }
        _ => {}
    }
}

/// An image block (`{type:"image", data, mimeType}`) or a v1 attachment
/// (`{type:"image", content, mimeType, fileName}`).
fn take_image(map: &mut Map<String, Value>, path: &str) -> Option<ImageRow> {
    if map.get("type").and_then(Value::as_str) != Some("image") {
        return None;
    }
    let key = if map.get("data").is_some_and(Value::is_string) {
        "data"
    } else if map.contains_key("fileName") && map.get("content").is_some_and(Value::is_string) {
        "content"
    } else {
        return None;
    };
    let key_index = map.keys().position(|k| k == key)? as i64;
    // `shift_remove` keeps the other keys in their order (`remove` swaps the
    // last key into the gap).
    let Some(Value::String(payload)) = map.shift_remove(key) else {
        return None;
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let (encoding, bytes) = match engine.decode(payload.as_bytes()) {
        Ok(decoded) if engine.encode(&decoded) == payload => ("base64", decoded),
        _ => ("raw", payload.into_bytes()),
    };
    Some(ImageRow {
        json_path: path.to_owned(),
        key: key.to_owned(),
        key_index,
        mime_type: map
            .get("mimeType")
            .and_then(Value::as_str)
            .map(str::to_owned),
        hash: format!("{:032x}", xxh3_128(&bytes)),
        encoding,
        bytes,
    })
}
