//! The team store's words, made by the client: each text's lexemes are the
//! tokens of SQLite's own FTS5 tokenizers, the ones the index's full-text
//! shards use (`unicode61 remove_diacritics 2` for words, and for texts
//! with unspaced scripts, CJK & co., `trigram` too), so `search --pg` finds
//! what the index finds by construction. They go into the store's word
//! index (`words`), and `search --pg` splits a query with the same
//! tokenizers.
//!
//! The tokenizers are FTS5's, called through its C API (`fts5_api`,
//! `xFindTokenizer`) on a private in-memory connection of the bundled
//! SQLite: the same code and Unicode tables that index the shards, with no
//! copy of them to keep in step.
//!
//! A text's lexemes come each once, sorted bytewise, with their positions
//! (token numbers from 0; words and trigrams are numbered apart). Words
//! over 2,046 bytes are left out (a `words` row is keyed by its first
//! lexeme, and a b-tree key must fit in a page). Trigram lexemes start with
//! `TRIGRAM_MARK`, which no word token holds, and the last one or two
//! characters of a text are kept as shorter "trigrams", so a one- or
//! two-character term is a prefix query that finds every place it occurs.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use rusqlite::ffi;

/// What starts a trigram lexeme: not a token character of unicode61, so no
/// word is ever one.
pub const TRIGRAM_MARK: char = '#';
/// The longest lexeme kept, in bytes.
const MAX_LEXEME: usize = 2_046;

#[derive(Debug, thiserror::Error)]
pub enum LexemeError {
    #[error("opening SQLite's FTS5 tokenizers for the team store's word index")]
    Open(#[source] rusqlite::Error),
    #[error("SQLite's FTS5 tokenizer {0} is missing or failed (code {1})")]
    Tokenizer(&'static str, i32),
}

/// One FTS5 tokenizer instance.
struct Tokenizer {
    api: ffi::fts5_tokenizer,
    handle: *mut ffi::Fts5Tokenizer,
    name: &'static str,
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        if let Some(delete) = self.api.xDelete {
            // SAFETY: `handle` came from this tokenizer's `xCreate`, once.
            unsafe { delete(self.handle) };
        }
    }
}

/// The index's two tokenizers, ready to use (one per thread: FTS5's
/// tokenizers keep a buffer each).
pub struct Tokenizers {
    words: Tokenizer,
    trigrams: Tokenizer,
    // Declared last: dropped after the tokenizers it owns.
    _conn: rusqlite::Connection,
}

impl Tokenizers {
    pub fn new() -> Result<Tokenizers, LexemeError> {
        let conn = rusqlite::Connection::open_in_memory().map_err(LexemeError::Open)?;
        // SAFETY: the handle is the open connection's and lives as long as
        // `conn`, which `Tokenizers` keeps.
        let api = unsafe { fts5_api(conn.handle()) }?;
        let words = unsafe { create(api, "unicode61", &["remove_diacritics", "2"]) }?;
        let trigrams = unsafe { create(api, "trigram", &[]) }?;
        Ok(Tokenizers {
            words,
            trigrams,
            _conn: conn,
        })
    }

    /// The word tokens of `text`, in order (folded: lower case, no
    /// diacritics), as unicode61 gives them to the index.
    pub fn words(&self, text: &str, mut each: impl FnMut(&str)) -> Result<(), LexemeError> {
        tokenize(&self.words, text, &mut |token| each(token))
    }

    /// The trigrams of `text`, in order, as the index's trigram tokenizer
    /// gives them (folded to lower case), each with `TRIGRAM_MARK` before.
    pub fn trigrams(&self, text: &str, mut each: impl FnMut(&str)) -> Result<(), LexemeError> {
        let mut mark = String::new();
        tokenize(&self.trigrams, text, &mut |token| {
            mark.clear();
            mark.push(TRIGRAM_MARK);
            mark.push_str(token);
            each(&mark)
        })
    }

    /// The lexemes of `text` (see the module doc), each once, sorted
    /// bytewise, with its positions, ascending; `scratch` is reused between
    /// calls. Returns the number of word tokens.
    pub fn lexemes(
        &self,
        text: &str,
        scratch: &mut Scratch,
        mut each: impl FnMut(&str, &[u32]),
    ) -> Result<u32, LexemeError> {
        scratch.clear();
        let mut words = 0u32;
        self.words(text, |token| {
            scratch.push(token, words);
            words += 1;
        })?;
        if crate::normalize::has_unspaced_script(text) {
            let mut pos = 0u32;
            let mut last = String::new();
            self.trigrams(text, |token| {
                scratch.push(token, pos);
                pos += 1;
                last.clear();
                last.push_str(token);
            })?;
            if pos == 0 {
                // Under three characters: no trigram, the text is its own
                // (folded as the trigram tokenizer folds: lower case).
                last = format!("{TRIGRAM_MARK}{}", text.to_lowercase());
                scratch.push(&last, 0);
                pos = 1;
            }
            // The text's last one and two characters, for shorter terms.
            for (at, _) in last.char_indices().skip(2) {
                let short = format!("{TRIGRAM_MARK}{}", &last[at..]);
                scratch.push(&short, pos - 1);
            }
        }
        scratch.each(&mut each);
        Ok(words)
    }
}

/// The tokens of one text while its lexemes are gathered: every token's
/// bytes in one buffer, with (start, length, position) triples.
#[derive(Default)]
pub struct Scratch {
    bytes: Vec<u8>,
    tokens: Vec<(u32, u32, u32)>,
    positions: Vec<u32>,
}

impl Scratch {
    fn clear(&mut self) {
        self.bytes.clear();
        self.tokens.clear();
    }

    fn push(&mut self, token: &str, pos: u32) {
        if token.is_empty() || token.len() > MAX_LEXEME {
            return;
        }
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(token.as_bytes());
        self.tokens.push((start, token.len() as u32, pos));
    }

    /// Each lexeme once, sorted bytewise, with its positions (ascending,
    /// each once).
    fn each(&mut self, each: &mut impl FnMut(&str, &[u32])) {
        let mut tokens = std::mem::take(&mut self.tokens);
        let mut positions = std::mem::take(&mut self.positions);
        let bytes = &self.bytes;
        let token =
            |(start, len, _): (u32, u32, u32)| &bytes[start as usize..(start + len) as usize];
        tokens.sort_unstable_by(|a, b| token(*a).cmp(token(*b)).then(a.2.cmp(&b.2)));
        let mut i = 0;
        while i < tokens.len() {
            let lexeme = token(tokens[i]);
            positions.clear();
            while i < tokens.len() && token(tokens[i]) == lexeme {
                if positions.last() != Some(&tokens[i].2) {
                    positions.push(tokens[i].2);
                }
                i += 1;
            }
            // Tokens are whole UTF-8 strings (FTS5 cuts at characters).
            if let Ok(lexeme) = std::str::from_utf8(lexeme) {
                each(lexeme, &positions);
            }
        }
        self.positions = positions;
        self.tokens = tokens;
    }
}

/// FTS5's API of connection `db` (`SELECT fts5(?1)` with a pointer, as
/// SQLite's documentation has it).
///
/// SAFETY: `db` must be an open connection.
unsafe fn fts5_api(db: *mut ffi::sqlite3) -> Result<*mut ffi::fts5_api, LexemeError> {
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    let sql = c"SELECT fts5(?1)";
    unsafe {
        let rc = ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, ptr::null_mut());
        if rc != ffi::SQLITE_OK {
            return Err(LexemeError::Tokenizer("fts5", rc));
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&raw mut api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
    }
    if api.is_null() {
        return Err(LexemeError::Tokenizer("fts5", ffi::SQLITE_ERROR));
    }
    Ok(api)
}

/// A new instance of FTS5's tokenizer `name` with `args`.
///
/// SAFETY: `api` must be the `fts5_api` of an open connection.
unsafe fn create(
    api: *mut ffi::fts5_api,
    name: &'static str,
    args: &[&str],
) -> Result<Tokenizer, LexemeError> {
    let c_name = std::ffi::CString::new(name).map_err(|_| LexemeError::Tokenizer(name, 0))?;
    let c_args: Vec<std::ffi::CString> = args
        .iter()
        .filter_map(|arg| std::ffi::CString::new(*arg).ok())
        .collect();
    let mut argv: Vec<*const c_char> = c_args.iter().map(|arg| arg.as_ptr()).collect();
    let mut user: *mut c_void = ptr::null_mut();
    let mut api_tok = ffi::fts5_tokenizer {
        xCreate: None,
        xDelete: None,
        xTokenize: None,
    };
    unsafe {
        let find = (*api)
            .xFindTokenizer
            .ok_or(LexemeError::Tokenizer(name, 0))?;
        let rc = find(api, c_name.as_ptr(), &mut user, &mut api_tok);
        if rc != ffi::SQLITE_OK {
            return Err(LexemeError::Tokenizer(name, rc));
        }
        let make = api_tok.xCreate.ok_or(LexemeError::Tokenizer(name, 0))?;
        let mut handle: *mut ffi::Fts5Tokenizer = ptr::null_mut();
        let rc = make(user, argv.as_mut_ptr(), argv.len() as c_int, &mut handle);
        if rc != ffi::SQLITE_OK || handle.is_null() {
            return Err(LexemeError::Tokenizer(name, rc));
        }
        Ok(Tokenizer {
            api: api_tok,
            handle,
            name,
        })
    }
}

/// Runs `tokenizer` over `text` as for a document, calling `each` with
/// every token.
fn tokenize(
    tokenizer: &Tokenizer,
    text: &str,
    each: &mut dyn FnMut(&str),
) -> Result<(), LexemeError> {
    unsafe extern "C" fn token(
        ctx: *mut c_void,
        _flags: c_int,
        token: *const c_char,
        len: c_int,
        _start: c_int,
        _end: c_int,
    ) -> c_int {
        // SAFETY: `ctx` is the `&mut dyn FnMut` below, alive for the call;
        // FTS5 hands a token of `len` bytes.
        let each = unsafe { &mut *ctx.cast::<&mut dyn FnMut(&str)>() };
        let bytes = unsafe { std::slice::from_raw_parts(token.cast::<u8>(), len.max(0) as usize) };
        // Tokens are cut at character boundaries of valid UTF-8; anything
        // else is not a token the index holds either.
        if let Ok(token) = std::str::from_utf8(bytes) {
            each(token);
        }
        ffi::SQLITE_OK
    }
    let Ok(len) = c_int::try_from(text.len()) else {
        return Err(LexemeError::Tokenizer(tokenizer.name, ffi::SQLITE_TOOBIG));
    };
    let run = tokenizer
        .api
        .xTokenize
        .ok_or(LexemeError::Tokenizer(tokenizer.name, 0))?;
    let mut ctx: &mut dyn FnMut(&str) = each;
    // SAFETY: the handle is live (dropped with `tokenizer`), the text is
    // `len` bytes, and `ctx` outlives the call.
    let rc = unsafe {
        run(
            tokenizer.handle,
            (&raw mut ctx).cast::<c_void>(),
            ffi::FTS5_TOKENIZE_DOCUMENT,
            text.as_ptr().cast::<c_char>(),
            len,
            Some(token),
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(LexemeError::Tokenizer(tokenizer.name, rc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lexemes(text: &str) -> String {
        let tokenizers = Tokenizers::new().unwrap();
        let mut out = Vec::new();
        let words = tokenizers
            .lexemes(text, &mut Scratch::default(), |lexeme, positions| {
                out.push(format!("{lexeme}:{positions:?}"))
            })
            .unwrap();
        format!("{words} {}", out.join(" "))
    }

    #[test]
    fn words_are_unicode61s() {
        assert_eq!(
            lexemes("Cargo.toml: Café it's café"),
            "6 cafe:[2, 5] cargo:[0] it:[3] s:[4] toml:[1]"
        );
    }

    #[test]
    fn unspaced_scripts_get_trigrams_and_the_last_shorter_ones() {
        assert_eq!(
            lexemes("桜餅テ"),
            "1 #テ:[0] #桜餅テ:[0] #餅テ:[0] 桜餅テ:[0]"
        );
        assert_eq!(lexemes("桜餅"), "1 #桜餅:[0] #餅:[0] 桜餅:[0]");
    }
}
