//! FTS5's `snippet()`, computed without a table, for the queries search
//! makes (`syntax::translate`) when they are phrases joined by AND and OR.
//!
//! `Marking` used to index the chosen chunks again in a scratch FTS5 table
//! and ask it for `snippet(…)`: a connection, a virtual table and its five
//! shadow tables, an insert per chunk that FTS5 tokenized and wrote out as
//! a segment, then a query that tokenized every chunk twice more. Most of
//! stage 2 of a search. Here each chunk is tokenized once, by FTS5's own
//! tokenizer (`store::tokenizer`), the query's phrases are found among its
//! tokens, and the window and its marks are chosen as `fts5SnippetFunction`
//! and `fts5HighlightCb` (SQLite's fts5_aux.c) choose them, step for step;
//! a property test holds the two to the same output.
//!
//! FTS5 gives `snippet()` the instances of the phrases whose iterator
//! stands on the row. For one phrase, an AND of phrases and of ORs of
//! phrases, or an OR of phrases, that is every place each phrase occurs
//! in the row. Anything else (NOT, an AND inside an OR, NEAR, columns, a
//! word FTS5 would read as a bareword, a phrase without a token) is left to
//! the scratch table: `Query::parse` says `None`.

use std::collections::HashMap;

use super::syntax::{MatchItem, match_items};
use crate::store::tokenizer::{Purpose, Token, Tokenizer, TokenizerError, WORDS};

/// FTS5's longest token (`FTS5_MAX_TOKEN_SIZE`): longer ones are cut, in
/// documents and queries alike.
const MAX_TOKEN: usize = 32_768;

/// A token as FTS5 indexes and queries it: cut at `MAX_TOKEN` bytes.
fn cut(token: &[u8]) -> &[u8] {
    &token[..token.len().min(MAX_TOKEN)]
}

/// A phrase: its tokens, the last one a prefix when `prefix`.
struct Phrase {
    tokens: Vec<Vec<u8>>,
    prefix: bool,
}

/// The query's shape, in FTS5's terms once it merges nested ANDs and ORs.
enum Tree {
    Phrase(usize),
    And(Vec<Tree>),
    Or(Vec<Tree>),
}

impl Tree {
    /// Whether a row where each phrase occurs at `found[phrase]` matches.
    fn matches(&self, found: &[Vec<usize>]) -> bool {
        match self {
            Tree::Phrase(phrase) => !found[*phrase].is_empty(),
            Tree::And(parts) => parts.iter().all(|p| p.matches(found)),
            Tree::Or(parts) => parts.iter().any(|p| p.matches(found)),
        }
    }
}

/// A query `snippet` can mark: its phrases in the order FTS5 numbers them
/// (as written), and how they combine.
struct Query {
    phrases: Vec<Phrase>,
    tree: Tree,
}

/// One item of a MATCH expression, as the parser below reads it.
#[derive(Debug, PartialEq)]
enum Item {
    Phrase { text: String, prefix: bool },
    And,
    Or,
    Open,
    Close,
}

/// The items of `expr`, or `None` for anything but quoted phrases (a `*`
/// right after one), `AND`, `OR` and parentheses.
fn items(expr: &str) -> Option<Vec<Item>> {
    match_items(expr)?
        .into_iter()
        .map(|item| match item {
            MatchItem::Phrase { text, prefix } => Some(Item::Phrase { text, prefix }),
            MatchItem::Bareword(word) => match word.as_str() {
                "AND" => Some(Item::And),
                "OR" => Some(Item::Or),
                _ => None,
            },
            MatchItem::Open => Some(Item::Open),
            MatchItem::Close => Some(Item::Close),
        })
        .collect()
}

/// A recursive-descent reading of the items: OR binds loosest, then AND
/// (written, or implied between two phrases, as FTS5 allows it).
struct Parser<'a> {
    items: &'a [Item],
    at: usize,
    tokenizer: &'a Tokenizer,
    phrases: Vec<Phrase>,
    /// The last operand read was a phrase, not a group.
    after_phrase: bool,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Item> {
        self.items.get(self.at)
    }

    fn or(&mut self, depth: usize) -> Option<Tree> {
        let mut parts = vec![self.and(depth)?];
        while self.peek() == Some(&Item::Or) {
            self.at += 1;
            parts.push(self.and(depth)?);
        }
        Some(merged(parts, false))
    }

    fn and(&mut self, depth: usize) -> Option<Tree> {
        let mut parts = vec![self.operand(depth)?];
        loop {
            match self.peek() {
                Some(Item::And) => self.at += 1,
                // An implied AND joins two phrases only.
                Some(Item::Phrase { .. }) if self.after_phrase => {}
                _ => break,
            }
            parts.push(self.operand(depth)?);
        }
        Some(merged(parts, true))
    }

    fn operand(&mut self, depth: usize) -> Option<Tree> {
        match self.items.get(self.at)? {
            Item::Phrase { text, prefix } => {
                self.at += 1;
                let phrase = phrase(self.tokenizer, text, *prefix)?;
                self.phrases.push(phrase);
                self.after_phrase = true;
                Some(Tree::Phrase(self.phrases.len() - 1))
            }
            // Deeper than search's own queries go (`syntax`): FTS5's.
            Item::Open if depth < 64 => {
                self.at += 1;
                let inner = self.or(depth + 1)?;
                (self.items.get(self.at) == Some(&Item::Close)).then(|| {
                    self.at += 1;
                    self.after_phrase = false;
                    inner
                })
            }
            _ => None,
        }
    }
}

/// `parts` as one node, ANDs in ANDs and ORs in ORs merged, as FTS5 merges
/// them.
fn merged(parts: Vec<Tree>, and: bool) -> Tree {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or(Tree::And(Vec::new()));
    }
    let mut children = Vec::new();
    for part in parts {
        match (part, and) {
            (Tree::And(inner), true) | (Tree::Or(inner), false) => children.extend(inner),
            (other, _) => children.push(other),
        }
    }
    if and {
        Tree::And(children)
    } else {
        Tree::Or(children)
    }
}

/// The phrase `text`, tokenized as FTS5 tokenizes a query's; `None` when it
/// has no token (FTS5's empty phrase) or the tokenizer fails.
fn phrase(tokenizer: &Tokenizer, text: &str, prefix: bool) -> Option<Phrase> {
    let mut tokens = Vec::new();
    tokenizer
        .tokenize(text, Purpose::Query { prefix }, &mut |token| {
            if !token.colocated {
                tokens.push(cut(token.text).to_vec());
            }
        })
        .ok()?;
    (!tokens.is_empty()).then_some(Phrase { tokens, prefix })
}

/// True when every phrase of the tree stands on a row that holds it: no AND
/// under an OR (FTS5 moves an AND's phrases together, past rows where one
/// of them is missing).
fn marks_every_occurrence(tree: &Tree, under_or: bool) -> bool {
    match tree {
        Tree::Phrase(_) => true,
        Tree::And(parts) => !under_or && parts.iter().all(|p| marks_every_occurrence(p, false)),
        Tree::Or(parts) => parts.iter().all(|p| marks_every_occurrence(p, true)),
    }
}

impl Query {
    /// `expr` as `snippet` marks it, or `None` when only FTS5 itself can.
    fn parse(expr: &str, tokenizer: &Tokenizer) -> Option<Query> {
        let items = items(expr)?;
        let mut parser = Parser {
            items: &items,
            at: 0,
            tokenizer,
            phrases: Vec::new(),
            after_phrase: false,
        };
        let tree = parser.or(0)?;
        let whole = parser.at == items.len();
        (whole && marks_every_occurrence(&tree, false)).then_some(Query {
            phrases: parser.phrases,
            tree,
        })
    }
}

/// A document's tokens (FTS5 numbers them from 0, colocated ones aside).
struct Tokens {
    /// Every token's folded text, one after another.
    text: Vec<u8>,
    /// Each token's end in `text`, and its start and end byte in the
    /// document.
    list: Vec<(usize, usize, usize)>,
}

impl Tokens {
    fn of(tokenizer: &Tokenizer, doc: &str) -> Result<Tokens, TokenizerError> {
        let mut tokens = Tokens {
            text: Vec::new(),
            list: Vec::new(),
        };
        tokenizer.tokenize(doc, Purpose::Document, &mut |token: Token<'_>| {
            if !token.colocated {
                tokens.text.extend_from_slice(cut(token.text));
                tokens
                    .list
                    .push((tokens.text.len(), token.start, token.end));
            }
        })?;
        Ok(tokens)
    }

    /// The folded text of token `at`.
    fn text(&self, at: usize) -> &[u8] {
        let from = at.checked_sub(1).map_or(0, |before| self.list[before].0);
        &self.text[from..self.list[at].0]
    }

    /// Where `phrase` starts, in order.
    fn find(&self, phrase: &Phrase) -> Vec<usize> {
        let last = phrase.tokens.len() - 1;
        (0..self.list.len().saturating_sub(last))
            .filter(|&at| {
                phrase.tokens.iter().enumerate().all(|(k, want)| {
                    let got = self.text(at + k);
                    if k == last && phrase.prefix {
                        got.starts_with(want)
                    } else {
                        got == want.as_slice()
                    }
                })
            })
            .collect()
    }
}

/// One instance (`xInst`): a phrase at a token position.
#[derive(Clone, Copy)]
struct Inst {
    phrase: usize,
    at: i64,
}

/// The instances of a row, as `fts5CacheInstArray` orders them: by
/// position, then by phrase.
fn instances(found: &[Vec<usize>]) -> Vec<Inst> {
    let mut all: Vec<Inst> = found
        .iter()
        .enumerate()
        .flat_map(|(phrase, at)| {
            at.iter().map(move |&at| Inst {
                phrase,
                at: at as i64,
            })
        })
        .collect();
    all.sort_by_key(|inst| (inst.at, inst.phrase));
    all
}

/// The snippet FTS5 makes of `doc` for `query` with `snippet(t, 0, open,
/// close, ellipsis, n_token)`, or `None` when the row would not match.
fn snippet(
    query: &Query,
    tokenizer: &Tokenizer,
    doc: &str,
    marks: (&str, &str, &str),
    n_token: i64,
) -> Result<Option<String>, TokenizerError> {
    let tokens = Tokens::of(tokenizer, doc)?;
    let found: Vec<Vec<usize>> = query.phrases.iter().map(|p| tokens.find(p)).collect();
    if !query.tree.matches(&found) {
        return Ok(None);
    }
    let sizes: Vec<i64> = query
        .phrases
        .iter()
        .map(|p| p.tokens.len() as i64)
        .collect();
    let inst = instances(&found);
    let doc_size = tokens.list.len() as i64;
    let n_token = n_token.clamp(0, 64);
    let window = Window {
        inst: &inst,
        sizes: &sizes,
        doc_size,
        n_token,
    };
    let start = window.best_start(&sentence_starts(doc.as_bytes(), &tokens));
    Ok(Some(highlight(doc, &tokens, &window, start, marks)))
}

/// The first token of each sentence (`fts5SentenceFinderCb`): token 0, and
/// each token after whitespace that follows a `.` or `:`.
fn sentence_starts(doc: &[u8], tokens: &Tokens) -> Vec<i64> {
    let mut firsts = Vec::new();
    for (pos, (_, start, _)) in tokens.list.iter().enumerate() {
        if pos == 0 {
            firsts.push(0);
            continue;
        }
        let before = &doc[..(*start).min(doc.len())];
        let text = trim_sentence_space(before);
        if text.len() < before.len() && matches!(text.last(), Some(b'.' | b':')) {
            firsts.push(pos as i64);
        }
    }
    firsts
}

/// `text` without the spaces, tabs, newlines and carriage returns it ends
/// with (what `fts5SentenceFinderCb` skips; not every ASCII whitespace).
fn trim_sentence_space(text: &[u8]) -> &[u8] {
    let kept = text
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .map_or(0, |at| at + 1);
    &text[..kept]
}

/// The instances of a row and what `fts5SnippetScore` scores them with.
struct Window<'a> {
    inst: &'a [Inst],
    sizes: &'a [i64],
    doc_size: i64,
    n_token: i64,
}

impl Window<'_> {
    /// `fts5SnippetScore`: the score of the `n_token` tokens from `from`
    /// (1,000 for each phrase's first instance, 1 for the others), and the
    /// start that centres its instances.
    fn score(&self, from: i64) -> (i64, i64) {
        let end = from + self.n_token;
        let mut seen = vec![false; self.sizes.len()];
        let (mut score, mut first, mut last) = (0, -1i64, 0i64);
        for inst in self.inst.iter().filter(|i| i.at >= from && i.at < end) {
            score += if seen[inst.phrase] { 1 } else { 1000 };
            seen[inst.phrase] = true;
            if first < 0 {
                first = inst.at;
            }
            last = inst.at + self.sizes[inst.phrase];
        }
        let mut adjusted = first - (self.n_token - (last - first)) / 2;
        if adjusted + self.n_token > self.doc_size {
            adjusted = self.doc_size - self.n_token;
        }
        (score, adjusted.max(0))
    }

    /// `fts5SnippetFunction`'s choice of the first token shown: the best
    /// scoring window around each instance, or from the start of its
    /// sentence (worth 100 more, 120 for the first sentence).
    fn best_start(&self, firsts: &[i64]) -> i64 {
        let (mut best_score, mut best_start) = (0, 0);
        for inst in self.inst {
            let (score, start) = self.score(inst.at);
            if score > best_score {
                (best_score, best_start) = (score, start);
            }
            if !firsts.is_empty() && self.doc_size > self.n_token {
                let mut jj = 0;
                while jj + 1 < firsts.len() && firsts[jj + 1] <= inst.at {
                    jj += 1;
                }
                if firsts[jj] < inst.at {
                    let bonus = if firsts[jj] == 0 { 120 } else { 100 };
                    let score = self.score(firsts[jj]).0 + bonus;
                    if score > best_score {
                        (best_score, best_start) = (score, firsts[jj]);
                    }
                }
            }
        }
        best_start
    }
}

/// `CInstIter`: the instances, overlapping ones merged into one range of
/// tokens.
struct Coalesced<'a> {
    window: &'a Window<'a>,
    next: usize,
    start: i64,
    end: i64,
}

impl<'a> Coalesced<'a> {
    fn new(window: &'a Window<'a>) -> Self {
        let mut iter = Coalesced {
            window,
            next: 0,
            start: -1,
            end: -1,
        };
        iter.advance();
        iter
    }

    fn advance(&mut self) {
        (self.start, self.end) = (-1, -1);
        while let Some(inst) = self.window.inst.get(self.next) {
            let end = inst.at - 1 + self.window.sizes[inst.phrase];
            if self.start < 0 {
                (self.start, self.end) = (inst.at, end);
            } else if inst.at <= self.end {
                self.end = self.end.max(end);
            } else {
                break;
            }
            self.next += 1;
        }
    }
}

/// `fts5HighlightCb` over the tokens from `start`, `n_token` of them, with
/// the ellipses `fts5SnippetFunction` adds. Text is appended as SQLite's
/// `%.*s` appends it: up to its first NUL.
fn highlight(
    doc: &str,
    tokens: &Tokens,
    window: &Window<'_>,
    start: i64,
    (open, close, ellipsis): (&str, &str, &str),
) -> String {
    let bytes = doc.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut append = |text: &[u8]| {
        let upto = text.iter().position(|b| *b == 0).unwrap_or(text.len());
        out.extend_from_slice(&text[..upto]);
    };
    // FTS5's offsets are inside the text; clamped all the same, as
    // `sentence_starts` clamps them.
    let piece = |from: usize, to: usize| {
        let to = to.min(bytes.len());
        &bytes[from.min(to)..to]
    };
    let range_end = start + window.n_token - 1;
    if start > 0 {
        append(ellipsis.as_bytes());
    }
    let mut iter = Coalesced::new(window);
    while iter.start >= 0 && iter.start < start {
        iter.advance();
    }
    let (mut off, mut is_open) = (0usize, false);
    for (pos, (_, token_start, token_end)) in tokens.list.iter().enumerate() {
        let (pos, token_start, token_end) = (pos as i64, *token_start, *token_end);
        if pos < start || pos > range_end {
            continue;
        }
        if start > 0 && pos == start {
            off = token_start;
        }
        if is_open && (pos <= iter.start || iter.start < 0) && token_start > off {
            append(close.as_bytes());
            is_open = false;
        }
        if pos == iter.start && !is_open {
            append(piece(off, token_start));
            append(open.as_bytes());
            off = token_start;
            is_open = true;
        }
        if pos == iter.end {
            if !is_open {
                append(open.as_bytes());
                is_open = true;
            }
            append(piece(off, token_end));
            off = token_end;
            iter.advance();
        }
        if pos == range_end {
            if is_open {
                if iter.start >= 0 && pos >= iter.start {
                    append(piece(off, token_end));
                    off = token_end;
                }
                append(close.as_bytes());
                is_open = false;
            }
            append(piece(off, token_end));
            off = token_end;
        }
    }
    if is_open {
        append(close.as_bytes());
    }
    if range_end >= window.doc_size - 1 {
        append(piece(off, bytes.len()));
    } else {
        append(ellipsis.as_bytes());
    }
    // Cut at token boundaries and NULs of valid UTF-8: still valid.
    String::from_utf8(out)
        .unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

/// Each body's snippet by chunk id, tokenized as the shards' words are, or
/// `None` when `expr` is not a query this module marks (the caller asks
/// FTS5). A body the query does not match gets none, as FTS5's query
/// returns no row for it.
pub(super) fn snippets(
    expr: &str,
    bodies: &[(i64, String)],
    marks: (&str, &str, &str),
    n_token: i64,
) -> Option<HashMap<i64, String>> {
    let tokenizer = Tokenizer::new(WORDS.0, WORDS.1).ok()?;
    let query = Query::parse(expr, &tokenizer)?;
    let mut out = HashMap::with_capacity(bodies.len());
    for (chunk_id, body) in bodies {
        if let Some(snippet) = snippet(&query, &tokenizer, body, marks, n_token).ok()? {
            out.insert(*chunk_id, snippet);
        }
    }
    Some(out)
}
