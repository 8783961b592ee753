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

/// True for a reference to bytes kept outside the session file instead of
/// the bytes: oh-my-pi's `blob:sha256:<hex>` (its `~/.omp/agent/blobs/`).
/// pi_agent_rust's `{"$piBlob": …}` objects are not strings, so never taken
/// for a payload either. A reference stays in `raw` as written.
pub fn is_blob_ref(data: &str) -> bool {
    data.strip_prefix("blob:sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An image block (`{type:"image", data, mimeType}`) or a v1 attachment
/// (`{type:"image", content, mimeType, fileName}`).
fn take_image(map: &mut Map<String, Value>, path: &str) -> Option<ImageRow> {
    if map.get("type").and_then(Value::as_str) != Some("image") {
        return None;
    }
    let key = if map
        .get("data")
        .and_then(Value::as_str)
        .is_some_and(|data| !is_blob_ref(data))
    {
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

/// An image payload as the index keeps it, to be put back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredImage {
    /// The image object, the payload's key and its position there (`None`
    /// for rows indexed before positions were kept: then it goes last).
    pub json_path: String,
    pub key: String,
    pub key_index: Option<i64>,
    /// `base64` (the bytes are the decoded payload) or `raw`.
    pub encoding: String,
    pub data: Vec<u8>,
}

/// An image's place that is not an object in the entry's JSON (the stored
/// JSON and its `blobs` rows disagree: `doctor --fix` rebuilds them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("image path {json_path} is not an object in the entry's stored JSON")]
pub struct ImagePathError {
    pub json_path: String,
}

/// Puts image payloads back into an entry's JSON; `Err` names a path that
/// is not an object in it.
pub fn restore_images(object: &mut Value, images: Vec<StoredImage>) -> Result<(), ImagePathError> {
    for image in images {
        let payload = if image.encoding == "base64" {
            base64::engine::general_purpose::STANDARD.encode(&image.data)
        } else {
            String::from_utf8_lossy(&image.data).into_owned()
        };
        let target = super::json_path_mut(object, &image.json_path)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| ImagePathError {
                json_path: image.json_path.clone(),
            })?;
        let index = image
            .key_index
            .map_or(target.len(), |i| (i.max(0) as usize).min(target.len()));
        target.shift_insert(index, image.key, Value::String(payload));
    }
    Ok(())
}
