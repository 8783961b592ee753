//! Bounded answers: a byte budget per tool call, a cursor to go on, and
//! cutting what does not fit (long strings shortened, large values left
//! out) with a note of where, so `get_entry` can fetch it whole.
//!
//! A model's context is the scarce resource: a call answers with as many
//! items as fit the budget (at least one, cut to fit if it must be), and
//! the cursor starts the next call after the last one given. Answers are
//! recomputed for every page (the server keeps no state between calls), so
//! a sync committed between two pages may shift them.

use std::io::{self, Write};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::{Map, Value};

use super::protocol::RpcError;
use crate::normalize::child_path;

/// The budget when neither the call nor `piidx mcp --max-bytes` sets one:
/// about 10k tokens of JSON.
pub const DEFAULT_BUDGET: usize = 40_000;
/// The smallest and largest budgets a call may ask for.
pub const MIN_BUDGET: usize = 1_000;
pub const MAX_BUDGET: usize = 4 << 20;

/// Serialized JSON size in bytes, without building the text.
pub fn json_len(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Where the next page starts, bound to the call it continues: the tool
/// and a hash of its other arguments, so a cursor is not used by mistake
/// with different ones. Opaque to clients (base64url text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub offset: usize,
}

/// A hash of a call's arguments other than `cursor` and `max_bytes`, keys
/// sorted.
fn call_hash(tool: &str, args: &Map<String, Value>) -> u64 {
    let sorted: std::collections::BTreeMap<&String, &Value> = args
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "cursor" | "max_bytes"))
        .collect();
    let text = serde_json::to_string(&(tool, sorted)).unwrap_or_default();
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

impl Cursor {
    pub fn encode(&self, tool: &str, args: &Map<String, Value>) -> String {
        let text = format!("1:{}:{:016x}", self.offset, call_hash(tool, args));
        URL_SAFE_NO_PAD.encode(text)
    }

    /// The cursor in `args` (none: the first page).
    pub fn decode(tool: &str, args: &Map<String, Value>) -> Result<Cursor, RpcError> {
        let Some(value) = args.get("cursor") else {
            return Ok(Cursor { offset: 0 });
        };
        if value.is_null() {
            return Ok(Cursor { offset: 0 });
        }
        let bad = || {
            RpcError::invalid_params(format!(
                "`cursor` is not one this server gave for {tool}; pass the next_cursor of the previous answer unchanged, or leave it out to start over"
            ))
        };
        let text = value.as_str().ok_or_else(bad)?;
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = text.split(':');
        let (Some("1"), Some(offset), Some(hash), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let offset: usize = offset.parse().map_err(|_| bad())?;
        if hash != format!("{:016x}", call_hash(tool, args)) {
            return Err(RpcError::invalid_params(format!(
                "this cursor continues a {tool} call with other arguments; repeat that call's arguments with it, or leave `cursor` out to start over"
            )));
        }
        Ok(Cursor { offset })
    }
}

/// A part of a value that was shortened or left out to fit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cut {
    /// The entry it belongs to, when the items are entries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_id: Option<String>,
    /// Its JSON path in the item (`$.message.content[0].text`); `get_entry`
    /// with this `path` returns it whole, in pages.
    pub path: String,
    /// Its full size: characters of a string, bytes of other JSON.
    pub size: usize,
    /// What is left of it (0: replaced by a note).
    pub kept: usize,
}

/// The items from `start` that fit in `budget` bytes (at least one, cut to
/// fit), the cuts made, and where the next page starts.
pub struct Page {
    pub items: Vec<Value>,
    pub cuts: Vec<Cut>,
    pub next: Option<usize>,
}

/// Pages `items`; `entry_id` names an item's entry for its cuts.
pub fn page(
    items: Vec<Value>,
    start: usize,
    budget: usize,
    entry_id: impl Fn(&Value) -> Option<String>,
) -> Page {
    let total = items.len();
    let mut used = 0;
    let mut out = Vec::new();
    let mut cuts = Vec::new();
    for mut item in items.into_iter().skip(start) {
        let size = json_len(&item) + 1;
        if !out.is_empty() && used + size > budget {
            break;
        }
        if out.is_empty() && size > budget {
            let id = entry_id(&item);
            for mut cut in fit(&mut item, budget) {
                cut.entry_id = id.clone();
                cuts.push(cut);
            }
        }
        used += json_len(&item) + 1;
        out.push(item);
    }
    let end = start + out.len();
    Page {
        items: out,
        cuts,
        next: (end < total).then_some(end),
    }
}

/// The note a shortened string ends with.
fn string_note(left: usize) -> String {
    format!(" …[piidx: {left} more characters; get_entry with this path returns them]")
}

/// The note a value left out is replaced by.
fn value_note(bytes: usize) -> String {
    format!("[piidx: {bytes} bytes of JSON left out; get_entry with this path returns them]")
}

/// Cuts strings longer than `max_chars` in `value` (0: none), recording
/// each under `path`.
pub fn truncate_strings(value: &mut Value, max_chars: usize, path: &str, cuts: &mut Vec<Cut>) {
    if max_chars == 0 {
        return;
    }
    match value {
        Value::String(text) => {
            let chars = text.chars().count();
            if chars > max_chars {
                let keep = text
                    .char_indices()
                    .nth(max_chars)
                    .map_or(text.len(), |(at, _)| at);
                text.truncate(keep);
                text.push_str(&string_note(chars - max_chars));
                cuts.push(Cut {
                    entry_id: None,
                    path: path.to_owned(),
                    size: chars,
                    kept: max_chars,
                });
            }
        }
        Value::Array(list) => {
            for (index, item) in list.iter_mut().enumerate() {
                truncate_strings(item, max_chars, &format!("{path}[{index}]"), cuts);
            }
        }
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if let Some(child) = child_path(path, key) {
                    truncate_strings(item, max_chars, &child, cuts);
                }
            }
        }
        _ => {}
    }
}

/// Shrinks `value` until its JSON fits `budget` bytes: again and again,
/// the smallest part whose removal is enough (or failing that the largest)
/// is cut: a string to what fits, anything else replaced by a note.
pub fn fit(value: &mut Value, budget: usize) -> Vec<Cut> {
    let mut cuts = Vec::new();
    for _ in 0..64 {
        let size = json_len(value);
        if size <= budget {
            break;
        }
        let excess = size - budget;
        let Some(cut) = cut_once(value, "$", excess) else {
            break;
        };
        cuts.push(cut);
    }
    cuts
}

/// Cuts one part of `value` (never `value` itself when it is a container)
/// to take off about `excess` bytes.
fn cut_once(value: &mut Value, path: &str, excess: usize) -> Option<Cut> {
    // The child to descend into: the smallest one larger than the excess
    // (plus room for a note), else the largest.
    let children: Vec<(String, usize)> = match value {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(index, item)| (format!("{path}[{index}]"), json_len(item)))
            .collect(),
        Value::Object(map) => map
            .iter()
            .filter_map(|(key, item)| Some((child_path(path, key)?, json_len(item))))
            .collect(),
        _ => return None,
    };
    let room = excess + 200;
    let (index, (child_path, child_size)) = children
        .iter()
        .enumerate()
        .filter(|(_, (_, size))| *size > room)
        .min_by_key(|(_, (_, size))| *size)
        .or_else(|| {
            children
                .iter()
                .enumerate()
                .max_by_key(|(_, (_, size))| *size)
        })
        .map(|(index, (path, size))| (index, (path.clone(), *size)))?;
    let child = match value {
        Value::Array(list) => list.get_mut(index)?,
        Value::Object(map) => map
            .iter_mut()
            .filter(|(key, _)| crate::normalize::child_path("$", key).is_some())
            .nth(index)
            .map(|(_, item)| item)?,
        _ => return None,
    };
    match child {
        Value::String(text) => {
            let chars = text.chars().count();
            // Bytes to keep, then back to a char boundary.
            let keep_bytes = text.len().saturating_sub(room);
            let keep = text
                .char_indices()
                .map(|(at, _)| at)
                .take_while(|at| *at <= keep_bytes)
                .last()
                .unwrap_or(0);
            let kept = text[..keep].chars().count();
            text.truncate(keep);
            text.push_str(&string_note(chars - kept));
            Some(Cut {
                entry_id: None,
                path: child_path,
                size: chars,
                kept,
            })
        }
        Value::Array(_) | Value::Object(_) if child_size > room => {
            cut_once(child, &child_path, excess)
        }
        _ => {
            *child = Value::String(value_note(child_size));
            Some(Cut {
                entry_id: None,
                path: child_path,
                size: child_size,
                kept: 0,
            })
        }
    }
}

/// A slice of `text` from char `offset` whose JSON fits `budget` bytes (at
/// least one character), and the offset after it if text is left.
pub fn text_slice(text: &str, offset: usize, budget: usize) -> (String, Option<usize>) {
    let mut used = 0;
    let mut out = String::new();
    let mut taken = 0;
    let mut chars = text.chars().skip(offset).peekable();
    while let Some(&c) = chars.peek() {
        let size = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if taken > 0 && used + size > budget {
            break;
        }
        used += size;
        out.push(c);
        taken += 1;
        chars.next();
    }
    let next = chars.peek().is_some().then_some(offset + taken);
    (out, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cursors_belong_to_their_call() {
        let args = json!({"query": "x", "limit": 5})
            .as_object()
            .unwrap()
            .clone();
        let text = Cursor { offset: 12 }.encode("search", &args);
        let mut with = args.clone();
        with.insert("cursor".into(), text.clone().into());
        with.insert("max_bytes".into(), 5000.into());
        assert_eq!(Cursor::decode("search", &with), Ok(Cursor { offset: 12 }));
        let mut other = with.clone();
        other.insert("limit".into(), 6.into());
        assert!(Cursor::decode("search", &other).is_err());
        assert!(Cursor::decode("usage", &with).is_err());
        let mut junk = args;
        junk.insert("cursor".into(), "%%".into());
        assert!(Cursor::decode("search", &junk).is_err());
    }

    #[test]
    fn pages_fit_the_budget_and_go_on() {
        let items: Vec<Value> = (0..10)
            .map(|i| json!({"n": i, "pad": "x".repeat(90)}))
            .collect();
        let first = page(items.clone(), 0, 350, |_| None);
        assert_eq!(first.items.len(), 3);
        assert_eq!(first.next, Some(3));
        let last = page(items, 9, 350, |_| None);
        assert_eq!((last.items.len(), last.next), (1, None));
    }

    #[test]
    fn a_big_item_is_cut_to_fit() {
        let item = json!({"id": "e1", "message": {"content": [{"type": "text", "text": "é".repeat(50_000)}], "details": {"log": ["y".repeat(30_000)]}}});
        let got = page(vec![item], 0, 4_000, |v| {
            v["id"].as_str().map(str::to_owned)
        });
        assert!(
            json_len(&got.items[0]) <= 4_000,
            "{}",
            json_len(&got.items[0])
        );
        assert!(!got.cuts.is_empty());
        assert!(
            got.cuts
                .iter()
                .all(|cut| cut.entry_id.as_deref() == Some("e1"))
        );
        assert_eq!(got.items[0]["id"], "e1");
    }

    #[test]
    fn strings_are_truncated_with_their_paths() {
        let mut value = json!({"message": {"content": [{"text": "abcdef"}], "x y": "123456"}});
        let mut cuts = Vec::new();
        truncate_strings(&mut value, 3, "$", &mut cuts);
        let paths: Vec<&str> = cuts.iter().map(|cut| cut.path.as_str()).collect();
        assert_eq!(paths, ["$.message.content[0].text", "$.message.\"x y\""]);
        assert!(
            value["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("abc …")
        );
    }

    #[test]
    fn text_slices_cover_the_text() {
        let text = "a\"b\ncé";
        let (one, next) = text_slice(text, 0, 4);
        assert_eq!((one.as_str(), next), ("a\"b", Some(3)));
        let (two, next) = text_slice(text, 3, 100);
        assert_eq!((two.as_str(), next), ("\ncé", None));
    }
}
