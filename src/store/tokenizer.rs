//! SQLite's own FTS5 tokenizers, called directly through FTS5's C API
//! (`fts5_api`, `xFindTokenizer`): the same code and Unicode tables that
//! index the shards, with no copy of them to keep in step. The team store
//! makes its lexemes with them (`pg::lexemes`), and a search's snippets
//! find their matches with them (`query::search::fts5_snippet`).
//!
//! An instance is only used on the thread that holds it (FTS5's tokenizers
//! keep a buffer each). It owns the in-memory connection it was found on,
//! and drops it after itself.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use rusqlite::ffi;

/// The shards' word tokenizer, name and arguments (`fts::SHARD_SCHEMA`'s
/// `tokenize = 'unicode61 remove_diacritics 2'`).
pub const WORDS: (&str, &[&str]) = ("unicode61", &["remove_diacritics", "2"]);

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("opening SQLite's FTS5 tokenizers")]
    Open(#[source] rusqlite::Error),
    #[error("SQLite's FTS5 tokenizer {0} is missing or failed (code {1})")]
    Tokenizer(&'static str, i32),
}

/// One token as FTS5 hands it out: its folded text, and where it is in the
/// text tokenized (byte offsets, end excluded).
pub struct Token<'a> {
    pub text: &'a [u8],
    pub start: usize,
    pub end: usize,
    /// FTS5_TOKEN_COLOCATED: a synonym at the previous token's position.
    pub colocated: bool,
}

/// What a text is tokenized as (FTS5 tells its tokenizers, which may cut
/// differently; unicode61 and trigram do not).
#[derive(Clone, Copy)]
pub enum Purpose {
    Document,
    Query { prefix: bool },
}

/// One FTS5 tokenizer instance.
pub struct Tokenizer {
    api: ffi::fts5_tokenizer,
    handle: *mut ffi::Fts5Tokenizer,
    name: &'static str,
    // Dropped after `handle` is deleted (in `drop`).
    _conn: rusqlite::Connection,
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        if let Some(delete) = self.api.xDelete {
            // SAFETY: `handle` came from this tokenizer's `xCreate`, once.
            unsafe { delete(self.handle) };
        }
    }
}

impl Tokenizer {
    /// An instance of FTS5's tokenizer `name` with `args`, e.g.
    /// `("unicode61", &["remove_diacritics", "2"])`.
    pub fn new(name: &'static str, args: &[&str]) -> Result<Tokenizer, TokenizerError> {
        let conn = rusqlite::Connection::open_in_memory().map_err(TokenizerError::Open)?;
        // SAFETY: the handle is the open connection's, used on this thread.
        let api = unsafe { fts5_api(conn.handle()) }
            .ok_or(TokenizerError::Tokenizer("fts5", ffi::SQLITE_ERROR))?;
        // SAFETY: `api` is the open connection's, which the tokenizer keeps.
        let (api, handle) = unsafe { create(api, name, args) }?;
        Ok(Tokenizer {
            api,
            handle,
            name,
            _conn: conn,
        })
    }

    /// Runs the tokenizer over `text`, calling `each` with every token.
    pub fn tokenize(
        &self,
        text: &str,
        purpose: Purpose,
        each: &mut dyn FnMut(Token<'_>),
    ) -> Result<(), TokenizerError> {
        unsafe extern "C" fn token(
            ctx: *mut c_void,
            flags: c_int,
            token: *const c_char,
            len: c_int,
            start: c_int,
            end: c_int,
        ) -> c_int {
            // SAFETY: `ctx` is the `&mut dyn FnMut` below, alive for the
            // call; FTS5 hands a token of `len` bytes.
            let each = unsafe { &mut *ctx.cast::<&mut dyn FnMut(Token<'_>)>() };
            let text =
                unsafe { std::slice::from_raw_parts(token.cast::<u8>(), len.max(0) as usize) };
            each(Token {
                text,
                start: start.max(0) as usize,
                end: end.max(0) as usize,
                colocated: flags & ffi::FTS5_TOKEN_COLOCATED != 0,
            });
            ffi::SQLITE_OK
        }
        let Ok(len) = c_int::try_from(text.len()) else {
            return Err(TokenizerError::Tokenizer(self.name, ffi::SQLITE_TOOBIG));
        };
        let flags = match purpose {
            Purpose::Document => ffi::FTS5_TOKENIZE_DOCUMENT,
            Purpose::Query { prefix: false } => ffi::FTS5_TOKENIZE_QUERY,
            Purpose::Query { prefix: true } => ffi::FTS5_TOKENIZE_QUERY | ffi::FTS5_TOKENIZE_PREFIX,
        };
        let run = self
            .api
            .xTokenize
            .ok_or(TokenizerError::Tokenizer(self.name, 0))?;
        let mut ctx: &mut dyn FnMut(Token<'_>) = each;
        // SAFETY: the handle is live (dropped with `self`), the text is
        // `len` bytes, and `ctx` outlives the call.
        let rc = unsafe {
            run(
                self.handle,
                (&raw mut ctx).cast::<c_void>(),
                flags,
                text.as_ptr().cast::<c_char>(),
                len,
                Some(token),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(TokenizerError::Tokenizer(self.name, rc));
        }
        Ok(())
    }
}

/// FTS5's API of connection `db` (`SELECT fts5(?1)` with a pointer, as
/// SQLite's documentation has it), or `None` when FTS5 is missing.
///
/// # Safety
/// `db` must be an open connection used by no other thread meanwhile.
pub(crate) unsafe fn fts5_api(db: *mut ffi::sqlite3) -> Option<*mut ffi::fts5_api> {
    let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    let sql = c"SELECT fts5(?1)";
    // SAFETY: `db` is open (the caller's contract); `api` outlives the
    // statement, which FTS5 fills in during the step.
    unsafe {
        let rc = ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, ptr::null_mut());
        if rc == ffi::SQLITE_OK {
            ffi::sqlite3_bind_pointer(
                stmt,
                1,
                (&raw mut api).cast::<c_void>(),
                c"fts5_api_ptr".as_ptr(),
                None,
            );
            ffi::sqlite3_step(stmt);
        }
        ffi::sqlite3_finalize(stmt);
    }
    (!api.is_null()).then_some(api)
}

/// A new instance of FTS5's tokenizer `name` with `args`: its methods and
/// handle.
///
/// # Safety
/// `api` must be the `fts5_api` of an open connection.
unsafe fn create(
    api: *mut ffi::fts5_api,
    name: &'static str,
    args: &[&str],
) -> Result<(ffi::fts5_tokenizer, *mut ffi::Fts5Tokenizer), TokenizerError> {
    let c_name = std::ffi::CString::new(name).map_err(|_| TokenizerError::Tokenizer(name, 0))?;
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
    // SAFETY: `api` is live (the caller's contract); the name and
    // arguments outlive the calls.
    unsafe {
        let find = (*api)
            .xFindTokenizer
            .ok_or(TokenizerError::Tokenizer(name, 0))?;
        let rc = find(api, c_name.as_ptr(), &mut user, &mut api_tok);
        if rc != ffi::SQLITE_OK {
            return Err(TokenizerError::Tokenizer(name, rc));
        }
        let make = api_tok.xCreate.ok_or(TokenizerError::Tokenizer(name, 0))?;
        let mut handle: *mut ffi::Fts5Tokenizer = ptr::null_mut();
        let rc = make(user, argv.as_mut_ptr(), argv.len() as c_int, &mut handle);
        if rc != ffi::SQLITE_OK || handle.is_null() {
            return Err(TokenizerError::Tokenizer(name, rc));
        }
        Ok((api_tok, handle))
    }
}
