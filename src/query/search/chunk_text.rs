//! The text of one search chunk, cut out of its entry's JSON by a scan.
//!
//! A chunk is a byte span of the decoded string at `chunks.json_path` inside
//! `entries.raw`. The `fts_content` view gets it with `json_extract`, which
//! parses the whole entry and decodes the whole string. For a chunk of a
//! multi-MB tool output that is several milliseconds per hit, and such
//! outputs (logs, dumps) are where error messages are searched for. Here
//! the JSON is only scanned: values on the way are skipped (strings with
//! `memchr`), and only the chunk's window of the string is decoded.
//!
//! `raw` is written by serde_json (compact, each key once), but nothing is
//! assumed: whatever the scanner does not expect gives `None`, and the
//! caller falls back to `fts_content`.

use memchr::memchr2;

/// One step of a JSON path as `normalize::child_path` writes them.
#[derive(Debug, PartialEq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The bytes `[start, start + len)` of the string at `json_path` in `raw`,
/// as `substr(CAST(json_extract(raw, json_path) AS BLOB), start + 1, len)`
/// gives them; `None` when the path or the JSON is not as expected.
pub fn span_text(raw: &[u8], json_path: &str, start: usize, len: usize) -> Option<String> {
    let mut cursor = Cursor { bytes: raw, pos: 0 };
    for step in parse_path(json_path)? {
        match step {
            Step::Key(key) => cursor.enter_member(key)?,
            Step::Index(index) => cursor.enter_element(index)?,
        }
    }
    cursor.expect(b'"')?;
    decode_window(raw.get(cursor.pos..)?, start, start.checked_add(len)?)
}

/// Splits `$.a."b c"[2]` into steps; `None` for any other form.
fn parse_path(path: &str) -> Option<Vec<Step<'_>>> {
    let mut rest = path.strip_prefix('$')?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[") {
            let close = after.find(']')?;
            steps.push(Step::Index(after[..close].parse().ok()?));
            rest = &after[close + 1..];
        } else if let Some(after) = rest.strip_prefix(".\"") {
            let close = after.find('"')?;
            steps.push(Step::Key(&after[..close]));
            rest = &after[close + 1..];
        } else {
            let after = rest.strip_prefix('.')?;
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Key(&after[..end]));
            rest = &after[end..];
        }
    }
    Some(steps)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&mut self) -> Option<u8> {
        while self.bytes.get(self.pos)?.is_ascii_whitespace() {
            self.pos += 1;
        }
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// At a string: its escaped content, and the cursor moves past it.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.pos;
        loop {
            let at = self.pos + memchr2(b'"', b'\\', self.bytes.get(self.pos..)?)?;
            if self.bytes[at] == b'"' {
                self.pos = at + 1;
                return Some(&self.bytes[start..at]);
            }
            self.pos = at + 2;
        }
    }

    /// Moves past one value of any kind.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                        }
                        b'{' | b'[' => {
                            depth += 1;
                            self.pos += 1;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            self.pos += 1;
                            if depth == 0 {
                                return Some(());
                            }
                        }
                        _ => self.pos += 1,
                    }
                }
            }
            _ => {
                while !matches!(self.peek()?, b',' | b'}' | b']') {
                    self.pos += 1;
                }
                Some(())
            }
        }
    }

    /// At an object: moves to the value of its first member named `key`
    /// (SQLite's `json_extract` also takes the first).
    fn enter_member(&mut self, key: &str) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            return None;
        }
        loop {
            let name = self.string()?;
            self.expect(b':')?;
            if name == key.as_bytes() {
                return Some(());
            }
            self.skip_value()?;
            self.expect(b',')?;
        }
    }

    /// At an array: moves to its element `index`.
    fn enter_element(&mut self, index: usize) -> Option<()> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            return None;
        }
        for _ in 0..index {
            self.skip_value()?;
            self.expect(b',')?;
        }
        Some(())
    }
}

/// Decodes the bytes `[start, end)` of the JSON string whose escaped content
/// `escaped` starts with, up to its closing quote: nothing before `start` is
/// decoded but the escapes it must count, and nothing after `end` is read.
fn decode_window(escaped: &[u8], start: usize, end: usize) -> Option<String> {
    let mut out = Vec::with_capacity(end.saturating_sub(start).min(escaped.len()));
    let mut keep = |piece: &[u8], at: usize| {
        let from = start.clamp(at, at + piece.len()) - at;
        let to = end.clamp(at, at + piece.len()) - at;
        out.extend_from_slice(&piece[from..to]);
    };
    let mut decoded = 0;
    let mut pos = 0;
    while decoded < end {
        // Unescaped bytes decode to themselves: look no further than the
        // window's end for the next escape or the closing quote.
        let rest = escaped.get(pos..)?;
        let ahead = &rest[..rest.len().min(end - decoded)];
        let run = memchr2(b'\\', b'"', ahead).unwrap_or(ahead.len());
        keep(&rest[..run], decoded);
        decoded += run;
        pos += run;
        match escaped.get(pos) {
            Some(b'"') => break,
            Some(b'\\') if decoded < end => {
                let (char_bytes, used) = unescape(&escaped[pos..])?;
                let mut buf = [0; 4];
                let piece = char_bytes.encode_utf8(&mut buf).as_bytes();
                keep(piece, decoded);
                decoded += piece.len();
                pos += used;
            }
            Some(_) => {}
            None => return None,
        }
    }
    String::from_utf8(out).ok()
}

/// One escape sequence at the start of `bytes`: the character and the
/// number of bytes it took.
fn unescape(bytes: &[u8]) -> Option<(char, usize)> {
    let simple = match bytes.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(bytes.get(2..6)?)?;
            if !(0xD800..0xDC00).contains(&high) {
                return Some((char::from_u32(high)?, 6));
            }
            if bytes.get(6..8)? != b"\\u" {
                return None;
            }
            let low = hex4(bytes.get(8..12)?)?;
            if !(0xDC00..0xE000).contains(&low) {
                return None;
            }
            let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            return Some((char::from_u32(code)?, 12));
        }
        _ => return None,
    };
    Some((simple, 2))
}

fn hex4(digits: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn text(raw: &Value, path: &str, start: usize, len: usize) -> Option<String> {
        span_text(raw.to_string().as_bytes(), path, start, len)
    }

    #[test]
    fn paths_of_every_form() {
        assert_eq!(
            parse_path("$.message.content[12].\"a b.c\"[0]"),
            Some(vec![
                Step::Key("message"),
                Step::Key("content"),
                Step::Index(12),
                Step::Key("a b.c"),
                Step::Index(0),
            ])
        );
        assert_eq!(parse_path("$"), Some(vec![]));
        for bad in ["", "message", "$.", "$..a", "$[x]", "$[1", "$.\"open"] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn finds_the_string_past_other_values() {
        let raw = json!({
            "type": "message",
            "n": -1.5e3,
            "skip": {"text": "not this", "deep": [[{"x": "]}\"\\"}], true, null]},
            "message": {"content": [{"type": "image"}, {"type": "text", "text": "hello\nworld"}]},
        });
        let path = "$.message.content[1].text";
        assert_eq!(text(&raw, path, 0, 11).as_deref(), Some("hello\nworld"));
        assert_eq!(text(&raw, path, 3, 5).as_deref(), Some("lo\nwo"));
        assert_eq!(text(&raw, path, 8, 100).as_deref(), Some("rld"));
        assert_eq!(text(&raw, "$.skip.text", 0, 3).as_deref(), Some("not"));
        assert_eq!(text(&raw, "$.message.content[2].text", 0, 3), None);
        assert_eq!(text(&raw, "$.n", 0, 3), None);
        assert_eq!(text(&raw, "$.missing", 0, 3), None);
    }

    #[test]
    fn escapes_count_as_the_bytes_they_decode_to() {
        let raw = br#"{"t":"a\u00e9\ud83d\ude00\/\"b\u0001"}"#;
        assert_eq!(
            span_text(raw, "$.t", 0, 100).as_deref(),
            Some("aé😀/\"b\u{1}")
        );
        assert_eq!(span_text(raw, "$.t", 3, 4).as_deref(), Some("😀"));
        assert_eq!(span_text(raw, "$.t", 7, 2).as_deref(), Some("/\""));
        // A lone surrogate or a window that cuts a character: not guessed at.
        assert_eq!(span_text(br#"{"t":"\ud83dx"}"#, "$.t", 0, 2), None);
        assert_eq!(span_text(raw, "$.t", 4, 1), None);
    }

    #[test]
    fn garbage_gives_none_not_a_panic() {
        for raw in [
            &b""[..],
            b"{",
            b"{\"t\":",
            b"{\"t\":\"ab",
            b"[1,2",
            b"{\"t\":\"\\",
        ] {
            assert_eq!(span_text(raw, "$.t", 0, 3), None);
            assert_eq!(span_text(raw, "$[1]", 0, 1), None);
        }
        // Nothing past the window is read, so a cut-off tail is not noticed.
        assert_eq!(
            span_text(b"{\"t\":\"abc", "$.t", 0, 2).as_deref(),
            Some("ab")
        );
    }

    /// Any JSON string value, in any position, with any character in it.
    fn any_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('"'),
                Just('\\'),
                Just('\n'),
                Just('\u{1}'),
                Just('/'),
                Just('é'),
                Just('漢'),
                Just('😀'),
                proptest::char::any(),
                proptest::char::range('a', 'z'),
            ],
            0..60,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn agrees_with_the_parsed_value(
            target in any_text(),
            noise in any_text(),
            before in 0usize..3,
            cut in any::<(usize, usize)>(),
        ) {
            let mut list: Vec<Value> = (0..before).map(|n| json!({"k": noise, "n": n})).collect();
            list.push(json!({"other": [noise], "text": target}));
            let raw = json!({"x": {"text": noise}, "list": list});
            let path = format!("$.list[{before}].text");
            // Writers cut chunks on character boundaries; a window may
            // reach past the end of the string, as `substr` allows.
            let bounds: Vec<usize> = target
                .char_indices()
                .map(|(at, _)| at)
                .chain([target.len(), target.len() + 7])
                .collect();
            let start = bounds[cut.0 % (bounds.len() - 1)];
            let end = bounds[cut.1 % bounds.len()].max(start);
            let expected = &target[start..end.min(target.len())];
            let found = text(&raw, &path, start, end - start);
            prop_assert_eq!(found.as_deref(), Some(expected));
        }
    }
}
