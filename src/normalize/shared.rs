//! Values that many sessions repeat leave the entry's JSON and are stored
//! once, by hash (`shared_texts`; migration 0011): the sections, string
//! content and tool list of Pi 1.x system messages, and of the system
//! message a compaction keeps. Each keeps its key and its place among its
//! object's keys, so export puts it back exactly.
//!
//! Since migration 0017 the large strings of tool results (and of the other
//! messages that are not conversation: bash executions, custom messages)
//! leave it too (`cut_large`): a file read twice, a fork's copy of an
//! output, is then stored and indexed once, and a value of `COMPRESS_MIN`
//! bytes or more is stored deflated (`compress`) in the format of SQLite's
//! SQL archives, which the `sqlite3` shell reads with `sqlar_uncompress`.
//! Tool output is most of a session's bytes and deflates to about a third.
//! Cutting leaves `deflated` empty: deflating is how the index stores a
//! value, not what the entry says, so only a read that stores the entries
//! pays for it (`deflate`, on sync's parse workers); `doctor`'s re-read
//! compares them without it.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use libdeflater::{CompressionLvl, Compressor, Decompressor};

use serde_json::{Map, Value};
use xxhash_rust::xxh3::Xxh3Default;

use super::{Entry, child_path, kind, text};

/// Smaller values stay in `raw`: a reference costs more than they do.
pub const SHARE_MIN: usize = 256;

/// Strings of tool results this long or longer leave `raw` (`cut_large`):
/// a reference and its text row cost about 200 bytes, and deflating a
/// value this size saves more than that.
pub const LARGE_MIN: usize = 1024;

/// Values this long or longer are stored deflated when that is smaller.
pub const COMPRESS_MIN: usize = 512;

/// Deflate level (libdeflate's). On the bench corpus's shared texts (161
/// MB, one core): zlib-rs's level 4 kept 34.0 % of the bytes in 1.57 s;
/// libdeflate's 4 keeps 34.0 % in 1.07 s, its 1 keeps 34.9 % in 0.75 s.
/// The sync's parse workers pay it, and a cold sync's CPU is what is
/// short: 1 % more index bytes (about 0.5 % of the index) for 4 % less
/// CPU. (zlib-rs had replaced miniz_oxide, whose level 1 kept 38 %.)
const COMPRESS_LEVEL: i32 = 1;

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
    /// `text` deflated (zlib format), when that is smaller: `None` until
    /// `deflate` is called.
    pub deflated: Option<Vec<u8>>,
}

/// Deflates each of `values` that `compress` finds worth it, for storing.
pub fn deflate(values: &mut [SharedValue]) {
    for value in values {
        value.deflated = compress(&value.text);
    }
}

/// `text` as a zlib stream, as SQLite's `sqlar_compress` writes it, when
/// it is at least `COMPRESS_MIN` bytes and the stream is shorter (the
/// shell's `sqlar_uncompress(data, size)` takes data of `size` bytes as not
/// compressed, so a stream must be strictly shorter).
pub fn compress(text: &str) -> Option<Vec<u8>> {
    if text.len() < COMPRESS_MIN {
        return None;
    }
    // One compressor per thread: making one allocates and clears its
    // match finder's tables, which cost more than a short value's deflate.
    thread_local! {
        static COMPRESSOR: RefCell<Option<Compressor>> = const { RefCell::new(None) };
    }
    COMPRESSOR.with_borrow_mut(|compressor| {
        let compressor = match compressor {
            Some(compressor) => compressor,
            None => compressor.insert(Compressor::new(CompressionLvl::new(COMPRESS_LEVEL).ok()?)),
        };
        // Room for one byte less than the text: a stream that does not fit
        // is not worth keeping, and libdeflate says so (an error) early.
        let mut deflated = vec![0; text.len() - 1];
        let len = compressor
            .zlib_compress(text.as_bytes(), &mut deflated)
            .ok()?;
        deflated.truncate(len);
        deflated.shrink_to_fit();
        Some(deflated)
    })
}

/// The length `sqlar_uncompress(data, size)` inflates data of `stored`
/// bytes to, or `None` when the data is the text itself: a `size` that is
/// missing, not positive, or the data's own length (SQLite's SQL archives
/// store a value that would not shrink as it is).
pub fn inflated_len(stored: usize, size: Option<i64>) -> Option<usize> {
    usize::try_from(size.unwrap_or(0))
        .ok()
        .filter(|&len| len > 0 && len != stored)
}

/// The bytes of a value stored deflated (`compress`), `len` of them as the
/// row says. libdeflate inflates a whole buffer of known size at once, in
/// less time than a streaming decoder. A stream that is not `len` bytes
/// long (a row written by hand) is read by the streaming decoder, which
/// needs no size; so is a `len` no deflate stream of this size could
/// hold, which is never allocated.
pub fn inflate(deflated: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    /// Deflate's densest: 258 bytes from a code of a few bits.
    const MOST_PER_BYTE: usize = 1032;
    thread_local! {
        static DECOMPRESSOR: RefCell<Decompressor> = RefCell::new(Decompressor::new());
    }
    if len <= deflated.len().saturating_mul(MOST_PER_BYTE) {
        let mut out = vec![0; len];
        let inflated = DECOMPRESSOR.with_borrow_mut(|d| d.zlib_decompress(deflated, &mut out));
        if inflated.is_ok_and(|written| written == len) {
            return Ok(out);
        }
    }
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(deflated).read_to_end(&mut out)?;
    Ok(out)
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
            deflated: None,
            text,
        });
    }
}

/// xxh3-128 of the byte `is_json` followed by `text`, hex: the value of
/// `shared_texts.hash`. Streamed, so that a tool output of megabytes is not
/// copied (and its fresh pages touched) only to be hashed.
fn hash(is_json: bool, text: &str) -> String {
    let mut hasher = Xxh3Default::new();
    hasher.update(&[u8::from(is_json)]);
    hasher.update(text.as_bytes());
    format!("{:032x}", hasher.digest128())
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

/// Cuts the large strings of a message out of `object`, after its
/// searchable fields were found: each such field then reads its text from
/// the shared value (`TextField::shared`). Not the conversation: the text
/// of user and assistant messages (what `v_message_text` and `message_fts`
/// read from `raw`) stays, and user and system messages keep everything;
/// an assistant message's thinking, tool-call arguments and signatures go.
pub(super) fn cut_large(object: &mut Value, out: &mut Entry) {
    if out.entry_type != "message" {
        return;
    }
    let Some(message) = object.get_mut("message").filter(|m| m.is_object()) else {
        return;
    };
    let role = super::role_of(message);
    if matches!(role.as_str(), "user" | "system" | "developer") {
        return;
    }
    let conversation: HashSet<&str> = out
        .texts
        .iter()
        .filter(|field| matches!(field.kind, kind::USER | kind::ASSISTANT))
        .map(|field| field.json_path.as_str())
        .collect();
    let first = out.shared.len();
    let mut cut = Vec::new();
    cut_strings(
        message,
        &mut String::from("$.message"),
        &conversation,
        &mut cut,
    );
    out.shared.extend(cut);
    if out.shared.len() == first {
        return;
    }
    let at: HashMap<String, usize> = out.shared[first..]
        .iter()
        .enumerate()
        .filter_map(|(n, value)| Some((child_path(&value.json_path, &value.key)?, first + n)))
        .collect();
    for field in out.texts.iter_mut().filter(|field| field.shared.is_none()) {
        if let Some(&index) = at.get(&field.json_path) {
            field.shared = Some((index, "$".to_owned()));
        }
    }
}

/// `cut_large` below one value: every object member that is a string of
/// `LARGE_MIN` bytes or more and has a JSON path.
fn cut_strings(
    value: &mut Value,
    path: &mut String,
    keep: &HashSet<&str>,
    out: &mut Vec<SharedValue>,
) {
    match value {
        Value::Object(map) => {
            let large = |key: &str, value: &Value| {
                value.as_str().is_some_and(|s| s.len() >= LARGE_MIN)
                    && child_path(path, key).is_some_and(|at| !keep.contains(at.as_str()))
            };
            take_keys(map, path, large, out);
            let len = path.len();
            for (key, item) in map.iter_mut() {
                if !(item.is_object() || item.is_array()) {
                    continue;
                }
                let Some(child) = child_path(path, key) else {
                    continue;
                };
                *path = child;
                cut_strings(item, path, keep, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            let len = path.len();
            for (index, item) in items.iter_mut().enumerate() {
                if !(item.is_object() || item.is_array()) {
                    continue;
                }
                use std::fmt::Write as _;
                let _ = write!(path, "[{index}]");
                cut_strings(item, path, keep, out);
                path.truncate(len);
            }
        }
        _ => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `shared_texts.hash` is stored: the streamed hash must equal the
    /// one-shot hash of the same bytes, at every length XXH3 treats apart
    /// (up to 16, 128 and 240 bytes, one stripe, one block, beyond).
    #[test]
    fn the_streamed_hash_is_the_one_shot_hash() {
        for len in [
            0, 1, 15, 16, 17, 127, 128, 129, 239, 240, 241, 1023, 1024, 1025, 70_000,
        ] {
            let text: String = "fn main() { println!(\"é\"); }\n"
                .chars()
                .cycle()
                .take(len)
                .collect();
            for is_json in [false, true] {
                let mut bytes = vec![u8::from(is_json)];
                bytes.extend_from_slice(text.as_bytes());
                let one_shot = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes));
                assert_eq!(
                    hash(is_json, &text),
                    one_shot,
                    "{len} chars, is_json {is_json}"
                );
            }
        }
    }
}
