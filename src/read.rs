//! Stage 2: read the new bytes of a file as complete lines.
//!
//! A `LineReader` starts at a byte offset (where the previous sync stopped)
//! and yields lines split on `\n` only, never on `\r`, U+2028 or U+2029. It
//! holds at most one line plus one read buffer in memory; a line longer than
//! the cap is skipped without being buffered and reported as oversized, so a
//! 2 GB line costs no more memory than a small one.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use xxhash_rust::xxh3::xxh3_64;

/// How many bytes one `read` call asks for.
const READ_SIZE: usize = 4 << 20;

/// How many bytes the head and anchor fingerprints cover.
pub const FINGERPRINT_LEN: u64 = 4096;

/// One item from the reader.
#[derive(Debug)]
pub enum Line<'a> {
    /// A line; `terminated` is false for trailing bytes with no `\n` after them.
    Text {
        offset: u64,
        bytes: &'a [u8],
        terminated: bool,
    },
    /// A line longer than the cap, skipped; `len` excludes the `\n`.
    Oversized {
        offset: u64,
        len: u64,
        terminated: bool,
    },
}

pub struct LineReader {
    file: File,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    buf_offset: u64,
    /// Start of the unconsumed part of `buf`.
    pos: usize,
    eof: bool,
    max_line: usize,
}

impl LineReader {
    pub fn new(mut file: File, start: u64, max_line: usize) -> io::Result<Self> {
        file.seek(SeekFrom::Start(start))?;
        Ok(Self {
            file,
            buf: Vec::new(),
            buf_offset: start,
            pos: 0,
            eof: false,
            max_line,
        })
    }

    /// The next line, or `None` at end of file.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        loop {
            if let Some(found) = memchr::memchr(b'\n', &self.buf[self.pos..]) {
                let start = self.pos;
                self.pos += found + 1;
                if found > self.max_line {
                    return Ok(Some(Line::Oversized {
                        offset: self.buf_offset + start as u64,
                        len: found as u64,
                        terminated: true,
                    }));
                }
                return Ok(Some(Line::Text {
                    offset: self.buf_offset + start as u64,
                    bytes: &self.buf[start..start + found],
                    terminated: true,
                }));
            }
            if self.eof {
                if self.pos == self.buf.len() {
                    return Ok(None);
                }
                let start = self.pos;
                self.pos = self.buf.len();
                if self.buf.len() - start > self.max_line {
                    return Ok(Some(Line::Oversized {
                        offset: self.buf_offset + start as u64,
                        len: (self.buf.len() - start) as u64,
                        terminated: false,
                    }));
                }
                return Ok(Some(Line::Text {
                    offset: self.buf_offset + start as u64,
                    bytes: &self.buf[start..],
                    terminated: false,
                }));
            }
            if self.buf.len() - self.pos > self.max_line {
                return self.skip_oversized().map(Some);
            }
            self.fill()?;
        }
    }

    /// Drops consumed bytes and appends the next read.
    fn fill(&mut self) -> io::Result<()> {
        self.buf.drain(..self.pos);
        self.buf_offset += self.pos as u64;
        self.pos = 0;
        let old_len = self.buf.len();
        // Read into the buffer's spare capacity: zeroing `READ_SIZE` bytes
        // first (`resize`) was done twice per file, and on a tree of small
        // files it was most of the parse workers' time.
        self.buf.reserve(READ_SIZE);
        match (&mut self.file)
            .take(READ_SIZE as u64)
            .read_to_end(&mut self.buf)
        {
            // Short of the limit only when a read returned 0: the end.
            Ok(n) => self.eof = n < READ_SIZE,
            Err(err) => {
                self.buf.truncate(old_len);
                return Err(err);
            }
        }
        Ok(())
    }

    /// Reads past the end of an over-cap line without keeping it.
    fn skip_oversized(&mut self) -> io::Result<Line<'static>> {
        let offset = self.buf_offset + self.pos as u64;
        let mut len = (self.buf.len() - self.pos) as u64;
        self.buf.clear();
        self.pos = 0;
        loop {
            self.buf_offset = offset + len;
            self.fill()?;
            if let Some(found) = memchr::memchr(b'\n', &self.buf) {
                len += found as u64;
                self.pos = found + 1;
                return Ok(Line::Oversized {
                    offset,
                    len,
                    terminated: true,
                });
            }
            len += self.buf.len() as u64;
            self.buf.clear();
            if self.eof {
                return Ok(Line::Oversized {
                    offset,
                    len,
                    terminated: false,
                });
            }
        }
    }
}

/// Fingerprints of a consumed prefix `[0, offset)`: a hash of its head and of
/// its last bytes (the anchor). Together they catch in-place rewrites that
/// keep the size growing, such as Pi's migration rewrite on open.
///
/// An oh-my-pi title slot (`title_slot_len`) is left out of both: omp
/// rewrites it in place on every rename, and the slot alone is read again
/// then (`ingest`), not the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fingerprint {
    pub head_len: u64,
    pub head_hash: i64,
    pub anchor_hash: i64,
}

impl Fingerprint {
    /// Reads at most 8 KiB of `file` to fingerprint `[0, offset)`.
    pub fn of_prefix(file: &File, offset: u64) -> io::Result<Self> {
        let head_len = offset.min(FINGERPRINT_LEN);
        let head = read_at(file, 0, head_len)?;
        let slot = title_slot_len(&head);
        let anchor_start = offset.saturating_sub(FINGERPRINT_LEN).max(slot);
        let anchor = read_at(file, anchor_start, offset - anchor_start)?;
        Ok(Self {
            head_len,
            head_hash: xxh3_64(&head[slot as usize..]) as i64,
            anchor_hash: xxh3_64(&anchor) as i64,
        })
    }
}

/// How far an oh-my-pi title slot runs: `head` (a file's first bytes)
/// starts with a complete line that is a `{"type":"title",…}` object (omp
/// writes it first, 256 bytes with its `\n`, and rewrites it in place with
/// the same size). 0 for every other file.
pub fn title_slot_len(head: &[u8]) -> u64 {
    const START: &[u8] = br#"{"type":"title""#;
    if !head.starts_with(START) {
        return 0;
    }
    match memchr::memchr(b'\n', head) {
        Some(end) => end as u64 + 1,
        None => 0,
    }
}

/// The title slot's line (without its `\n`) when the file has one that
/// ends within `[0, offset)`: read again on every resume, since omp
/// rewrites it in place.
pub fn read_title_slot(file: &File, offset: u64) -> io::Result<Option<Vec<u8>>> {
    let head = read_at(file, 0, offset.min(FINGERPRINT_LEN))?;
    let len = title_slot_len(&head);
    if len == 0 {
        return Ok(None);
    }
    Ok(Some(head[..len as usize - 1].to_vec()))
}

/// Positional read: leaves the file's cursor alone, so a `LineReader` on a
/// clone of the same handle is not disturbed.
fn read_at(file: &File, start: u64, len: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0; len as usize];
    file.read_exact_at(&mut out, start)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines(content: &[u8], start: u64, cap: usize) -> Vec<String> {
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(content).unwrap();
        let mut reader = LineReader::new(tmp, start, cap).unwrap();
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().unwrap() {
            out.push(match line {
                Line::Text {
                    offset,
                    bytes,
                    terminated,
                } => format!("{offset}:{}:{terminated}", String::from_utf8_lossy(bytes)),
                Line::Oversized {
                    offset,
                    len,
                    terminated,
                } => format!("{offset}:big{len}:{terminated}"),
            });
        }
        out
    }

    #[test]
    fn splits_on_newline_only_and_reports_tail() {
        let text = "a\r\nb\u{2028}c\n\ntail".as_bytes();
        assert_eq!(
            lines(text, 0, 100),
            [
                "0:a\r:true",
                "3:b\u{2028}c:true",
                "9::true",
                "10:tail:false"
            ]
        );
        assert_eq!(lines(text, 3, 100)[0], "3:b\u{2028}c:true");
    }

    #[test]
    fn oversized_lines_are_skipped_with_their_length() {
        let text = b"short\nxxxxxxxxxx\nok\nyyyyyyyyyyyy";
        assert_eq!(
            lines(text, 0, 8),
            [
                "0:short:true",
                "6:big10:true",
                "17:ok:true",
                "20:big12:false"
            ]
        );
    }
}
