//! Stage 3: parse one line of a session file into JSON objects.
//!
//! Pure and infallible: every outcome, including garbage, is a value. The
//! caller decides what to record. Mirrors what Pi accepts (`JSON.parse` of the
//! line, surrounding whitespace allowed) and recovers more than Pi does: two
//! objects glued on one line (`}{`, a real corruption in Pi's own repository)
//! are both returned, and invalid UTF-8 is replaced instead of losing the line.
//!
//! A lone UTF-16 surrogate escape (`"\ud83d"`, which `JSON.stringify` writes
//! for a string cut between the two halves of an emoji) is valid JSON text
//! that Pi's `JSON.parse` reads, but no Rust string can hold it: the value is
//! read with U+FFFD in its place, as `TextDecoder` would show it, and the
//! line is marked `rewritten` so that its exact bytes are kept for export.

use serde_json::Value;

/// What one physical line holds.
#[derive(Debug)]
pub enum ParsedLine {
    /// Only whitespace: not an entry, not an error.
    Blank,
    /// One or more objects. `note` is set when the line needed repair
    /// (glued objects, invalid UTF-8); the objects are still indexed.
    Objects {
        objects: Vec<Value>,
        note: Option<String>,
        /// The objects were read from a copy of the line with lone
        /// surrogate escapes replaced by `\ufffd`: written back out they
        /// are not the line's bytes. Not a note: Pi reads such a line.
        rewritten: bool,
    },
    /// Nothing usable; the reason names what is wrong.
    Invalid(String),
}

/// Parses one line (without its `\n`).
pub fn parse_line(bytes: &[u8]) -> ParsedLine {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return ParsedLine::Blank;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_text(text, None),
        Err(err) => {
            let lossy = String::from_utf8_lossy(bytes);
            let note = format!(
                "invalid UTF-8 at byte {} of the line; replaced with U+FFFD",
                err.valid_up_to()
            );
            parse_text(&lossy, Some(note))
        }
    }
}

fn parse_text(text: &str, note: Option<String>) -> ParsedLine {
    let first = parse_plain(text, note.clone());
    if matches!(first, ParsedLine::Objects { note: None, .. }) {
        return first;
    }
    // Only a line that failed, or was repaired, is looked at again.
    match without_lone_surrogates(text) {
        Some(copy) => match parse_plain(&copy, note) {
            ParsedLine::Objects { objects, note, .. } => ParsedLine::Objects {
                objects,
                note,
                rewritten: true,
            },
            _ => first,
        },
        None => first,
    }
}

fn parse_plain(text: &str, note: Option<String>) -> ParsedLine {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => objects_or_invalid(vec![value], note),
        Err(err) if err.to_string().starts_with("trailing characters") => recover_glued(text, note),
        Err(err) => ParsedLine::Invalid(format!("invalid JSON: {err}")),
    }
}

/// `text` with every `\u` escape of a lone UTF-16 surrogate replaced by
/// `\ufffd`; `None` when it has none. A `\` only occurs inside strings in
/// JSON, so escapes are found without tracking strings: `\\` is skipped
/// whole, so the `u` of `\\u` is not taken for an escape.
fn without_lone_surrogates(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex_at = |at: usize| -> Option<u32> {
        let digits = bytes.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let escape_at = |at: usize| -> Option<u32> {
        (bytes.get(at) == Some(&b'\\') && bytes.get(at + 1) == Some(&b'u'))
            .then(|| hex_at(at + 2))
            .flatten()
    };
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(found) = bytes.get(at..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        at += found;
        let Some(unit) = escape_at(at) else {
            at += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match escape_at(at + 6) {
                Some(0xDC00..=0xDFFF) => {
                    at += 12;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let copy = out.get_or_insert_with(|| String::with_capacity(text.len()));
            copy.push_str(&text[copied..at]);
            copy.push_str("\\ufffd");
            copied = at + 6;
        }
        at += 6;
    }
    let mut copy = out?;
    copy.push_str(&text[copied..]);
    Some(copy)
}

/// Splits `{...}{...}` (and `{...} {...}`) into its objects.
fn recover_glued(text: &str, note: Option<String>) -> ParsedLine {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut objects = Vec::new();
    let mut failure = None;
    for item in stream.by_ref() {
        match item {
            Ok(value) => objects.push(value),
            Err(err) => {
                failure = Some(err.to_string());
                break;
            }
        }
    }
    let consumed = stream.byte_offset();
    let mut message = format!(
        "{} JSON objects glued on one line; recovered",
        objects.len()
    );
    if let Some(err) = failure {
        message =
            format!("{message} those before byte {consumed}; the rest is invalid JSON: {err}");
    }
    let note = Some(match note {
        Some(previous) => format!("{previous}; {message}"),
        None => message,
    });
    objects_or_invalid(objects, note)
}

fn objects_or_invalid(objects: Vec<Value>, note: Option<String>) -> ParsedLine {
    if objects.is_empty() {
        return ParsedLine::Invalid(note.unwrap_or_else(|| "no JSON object".into()));
    }
    if let Some(bad) = objects.iter().find(|value| !value.is_object()) {
        return ParsedLine::Invalid(format!(
            "a JSON {} where a JSON object was expected",
            json_kind(bad)
        ));
    }
    ParsedLine::Objects {
        objects,
        note,
        rewritten: false,
    }
}

/// A short English name for a JSON value's type, for messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(line: &[u8]) -> usize {
        match parse_line(line) {
            ParsedLine::Objects { objects, .. } => objects.len(),
            _ => 0,
        }
    }

    #[test]
    fn plain_crlf_and_blank_lines() {
        assert_eq!(count(br#"{"type":"x"}"#), 1);
        assert_eq!(count(b"{\"type\":\"x\"}\r"), 1);
        assert!(matches!(parse_line(b"  \r"), ParsedLine::Blank));
    }

    #[test]
    fn glued_objects_are_recovered_and_flagged() {
        match parse_line(br#"{"a":1}{"b":2}"#) {
            ParsedLine::Objects { objects, note, .. } => {
                assert_eq!(objects.len(), 2);
                assert!(note.unwrap_or_default().contains("2 JSON objects glued"));
            }
            other => panic!("unexpected {other:?}"),
        }
        match parse_line(br#"{"a":1}{"b":"#) {
            ParsedLine::Objects { objects, note, .. } => {
                assert_eq!(objects.len(), 1);
                assert!(note.unwrap_or_default().contains("rest is invalid"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        match parse_line(b"{\"t\":\"a\xffb\"}") {
            ParsedLine::Objects { objects, note, .. } => {
                assert_eq!(objects[0]["t"], "a\u{fffd}b");
                assert!(note.unwrap_or_default().contains("invalid UTF-8"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        // As JSON.stringify writes "ab" + the first half of an emoji, a lone
        // second half, and a proper pair; `\\ud83d` is no escape.
        let line = br#"{"a":"ab\ud83d","b":"\ude00x","c":"\ud83d\ude00","d":"\\ud83d"}"#;
        match parse_line(line) {
            ParsedLine::Objects {
                objects,
                note,
                rewritten,
            } => {
                assert_eq!(objects[0]["a"], "ab\u{fffd}");
                assert_eq!(objects[0]["b"], "\u{fffd}x");
                assert_eq!(objects[0]["c"], "😀");
                assert_eq!(objects[0]["d"], "\\ud83d");
                assert!(rewritten);
                assert!(note.is_none());
            }
            other => panic!("unexpected {other:?}"),
        }
        // A high half before another high half, and at the end of a glued line.
        match parse_line(br#"{"a":"\ud83d\ud83d\ude00"}{"b":"\udbff"}"#) {
            ParsedLine::Objects {
                objects, rewritten, ..
            } => {
                assert_eq!(objects[0]["a"], "\u{fffd}😀");
                assert_eq!(objects[1]["b"], "\u{fffd}");
                assert!(rewritten);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            parse_line(br#"{"a":"x"}"#),
            ParsedLine::Objects {
                rewritten: false,
                ..
            }
        ));
    }

    #[test]
    fn non_objects_and_garbage_are_invalid() {
        assert!(matches!(parse_line(b"[1,2]"), ParsedLine::Invalid(_)));
        assert!(matches!(parse_line(b"{\"a\":"), ParsedLine::Invalid(_)));
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        assert!(matches!(
            parse_line(deep.as_bytes()),
            ParsedLine::Invalid(_)
        ));
    }
}
