//! The team store's words, made by the client: each text's lexemes are the
//! tokens of SQLite's own FTS5 tokenizers, the ones the index's full-text
//! shards use (`unicode61 remove_diacritics 2` for words, and for texts
//! with unspaced scripts, CJK & co., `trigram` too), so `search --pg` finds
//! what the index finds by construction. They go into the store's word
//! index (`words`), and `search --pg` splits a query with the same
//! tokenizers.
//!
//! The tokenizers are FTS5's own (`store::tokenizer`): the same code and
//! Unicode tables that index the shards, with no copy of them to keep in
//! step.
//!
//! A text's lexemes come each once, sorted bytewise, with their positions
//! (token numbers from 0; words and trigrams are numbered apart). Words
//! over 2,046 bytes are left out (a `words` row is keyed by its first
//! lexeme, and a b-tree key must fit in a page). Trigram lexemes start with
//! `TRIGRAM_MARK`, which no word token holds, and the last one or two
//! characters of a text are kept as shorter "trigrams", so a one- or
//! two-character term is a prefix query that finds every place it occurs.

use crate::store::tokenizer::TokenizerError;
use crate::store::tokenizer::{Purpose, Tokenizer, WORDS};

/// What starts a trigram lexeme: not a token character of unicode61, so no
/// word is ever one.
pub const TRIGRAM_MARK: char = '#';
/// The longest lexeme kept, in bytes.
const MAX_LEXEME: usize = 2_046;

/// The index's two tokenizers, ready to use (one per thread: FTS5's
/// tokenizers keep a buffer each).
pub struct Tokenizers {
    words: Tokenizer,
    trigrams: Tokenizer,
}

impl Tokenizers {
    pub fn new() -> Result<Tokenizers, TokenizerError> {
        Ok(Tokenizers {
            words: Tokenizer::new(WORDS.0, WORDS.1)?,
            trigrams: Tokenizer::new("trigram", &[])?,
        })
    }

    /// The word tokens of `text`, in order (folded: lower case, no
    /// diacritics), as unicode61 gives them to the index.
    pub fn words(&self, text: &str, mut each: impl FnMut(&str)) -> Result<(), TokenizerError> {
        tokenize(&self.words, text, &mut |token| each(token))
    }

    /// The trigrams of `text`, in order, as the index's trigram tokenizer
    /// gives them (folded to lower case), each with `TRIGRAM_MARK` before.
    pub fn trigrams(&self, text: &str, mut each: impl FnMut(&str)) -> Result<(), TokenizerError> {
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
    ) -> Result<u32, TokenizerError> {
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

/// Runs `tokenizer` over `text` as for a document, calling `each` with
/// every token.
fn tokenize(
    tokenizer: &Tokenizer,
    text: &str,
    each: &mut dyn FnMut(&str),
) -> Result<(), TokenizerError> {
    tokenizer.tokenize(text, Purpose::Document, &mut |token| {
        // Tokens are cut at character boundaries of valid UTF-8; anything
        // else is not a token the index holds either.
        if let Ok(token) = std::str::from_utf8(token.text) {
            each(token);
        }
    })
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
