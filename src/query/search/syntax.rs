//! Turning what a person types into an FTS5 MATCH expression that is always
//! valid (pure, no SQL).
//!
//! Rules (docs/search.md):
//! * whitespace-separated words are ANDed;
//! * every word is emitted as a quoted FTS5 string, so punctuation inside it
//!   (`foo-bar`, `a.b()`, `C++`, `src/lib.rs`) is left to the tokenizer,
//!   which turns it into a phrase of the word's tokens (`"src lib rs"`);
//! * `"quoted phrases"` are kept; an unbalanced quote is closed at the end;
//! * `word*` and `"phrase"*` are prefix queries;
//! * uppercase `AND`, `OR`, `NOT` are operators where they have an operand
//!   on both sides, otherwise plain words;
//! * `(` at the start and `)` at the end of words group when all of them are
//!   balanced and a group is not empty, otherwise they are punctuation;
//!   groups nested deeper than `MAX_GROUP_DEPTH` are read as part of the
//!   group around them;
//! * words without a letter or digit (`()`, `--`, `+`) are dropped.

/// The words searched while typing: the last word, unless a space ended
/// it, is a prefix (`pars` finds `parser`) once it has three letters
/// (shorter prefixes match too much to rank).
pub fn as_you_type(words: &str, open: bool) -> String {
    let last = words.rsplit(char::is_whitespace).next().unwrap_or("");
    let typing =
        open && last.chars().count() >= 3 && last.chars().all(|c| c.is_alphanumeric() || c == '_');
    if typing {
        format!("{words}*")
    } else {
        words.to_owned()
    }
}

/// One lexed item.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lexeme {
    Term { text: String, prefix: bool },
    Op(&'static str),
    Open,
    Close,
}

/// A parsed node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Term { text: String, prefix: bool },
    Op(&'static str),
    Group(Vec<Node>),
}

/// The translated query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The FTS5 MATCH expression (empty when nothing searchable was left).
    pub expr: String,
    /// The search terms, in order, without operators (for substring scans).
    pub terms: Vec<String>,
}

impl Translated {
    pub fn is_empty(&self) -> bool {
        self.expr.is_empty()
    }
}

/// True for characters the tokenizers keep (letters, digits, marks).
fn is_token_char(c: char) -> bool {
    c.is_alphanumeric() || is_mark(c)
}

fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

pub use crate::normalize::{has_unspaced_script, is_unspaced_script};

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// One item of an FTS5 MATCH expression, as `translate` writes them and
/// `--raw` may: a quoted string (`quote`), a prefix when a `*` follows it;
/// a bareword, operators (`AND`, `OR`, `NOT`) included: what a bareword
/// stands for is its reader's to say; a parenthesis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchItem {
    Phrase { text: String, prefix: bool },
    Bareword(String),
    Open,
    Close,
}

/// The items of `expr`, or `None` when a string is left open (FTS5 refuses
/// it). The readers of `translate`'s expressions outside FTS5 (the team
/// store's search, snippets marked without a table) read them here, so
/// that they read what FTS5 reads. A bareword runs to the next space, quote
/// or parenthesis.
pub fn match_items(expr: &str) -> Option<Vec<MatchItem>> {
    let mut items = Vec::new();
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        '"' if chars.peek() == Some(&'"') => {
                            chars.next();
                            text.push('"');
                        }
                        '"' => break,
                        c => text.push(c),
                    }
                }
                let prefix = chars.next_if_eq(&'*').is_some();
                items.push(MatchItem::Phrase { text, prefix });
            }
            '(' => items.push(MatchItem::Open),
            ')' => items.push(MatchItem::Close),
            c if is_fts5_space(c) => {}
            _ => {
                let mut word = String::from(c);
                while let Some(c) = chars.next_if(|c| !is_fts5_space(*c) && !"\"()".contains(*c)) {
                    word.push(c);
                }
                items.push(MatchItem::Bareword(word));
            }
        }
    }
    Some(items)
}

/// Each phrase of `expr` as an expression of its own, in FTS5's order
/// (the order they are written in), for counting one phrase's matches;
/// `None` when `expr` has items of which that cannot be told without
/// FTS5's parser (`NEAR`, column filters, `^`, `+`: a `--raw` query's),
/// or a string left open. Each of `translate`'s words and phrases is one.
pub fn phrases(expr: &str) -> Option<Vec<String>> {
    let mut phrases = Vec::new();
    for item in match_items(expr)? {
        match item {
            MatchItem::Phrase { text, prefix } => {
                phrases.push(format!("{}{}", quote(&text), if prefix { "*" } else { "" }));
            }
            MatchItem::Bareword(word) if matches!(word.as_str(), "AND" | "OR" | "NOT") => {}
            MatchItem::Bareword(word) => {
                let (text, prefix) = match word.strip_suffix('*') {
                    Some(text) => (text, true),
                    None => (word.as_str(), false),
                };
                if text.is_empty() || text == "NEAR" || !text.chars().all(is_fts5_bareword) {
                    return None;
                }
                phrases.push(format!("{}{}", quote(text), if prefix { "*" } else { "" }));
            }
            MatchItem::Open | MatchItem::Close => {}
        }
    }
    Some(phrases)
}

/// A character FTS5 reads as part of a bareword (`sqlite3Fts5IsBareword`).
fn is_fts5_bareword(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '\x1a' || !c.is_ascii()
}

/// What FTS5's expression parser skips between items (fts5_expr.c).
fn is_fts5_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn lex(input: &str) -> Vec<Lexeme> {
    let mut out = Vec::new();
    let mut chars = input.chars().peekable();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<Lexeme>| {
        if word.is_empty() {
            return;
        }
        let text = std::mem::take(word);
        let mut body = text.as_str();
        let opens = body.len() - body.trim_start_matches('(').len();
        body = &body[opens..];
        out.extend(std::iter::repeat_n(Lexeme::Open, opens));
        let closes = body.len() - body.trim_end_matches(')').len();
        body = &body[..body.len() - closes];
        let trimmed = body.trim_end_matches('*');
        let prefix = trimmed.len() < body.len();
        match (trimmed, prefix) {
            ("AND", false) => out.push(Lexeme::Op("AND")),
            ("OR", false) => out.push(Lexeme::Op("OR")),
            ("NOT", false) => out.push(Lexeme::Op("NOT")),
            _ => out.push(Lexeme::Term {
                text: trimmed.to_owned(),
                prefix,
            }),
        }
        out.extend(std::iter::repeat_n(Lexeme::Close, closes));
    };
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            flush(&mut word, &mut out);
        } else if c == '"' {
            flush(&mut word, &mut out);
            let mut phrase = String::new();
            for inner in chars.by_ref() {
                if inner == '"' {
                    break;
                }
                phrase.push(inner);
            }
            let mut prefix = false;
            while chars.peek() == Some(&'*') {
                chars.next();
                prefix = true;
            }
            out.push(Lexeme::Term {
                text: phrase,
                prefix,
            });
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Parens count only when every one of them is matched.
fn parens_balanced(lexemes: &[Lexeme]) -> bool {
    let mut depth = 0i64;
    for lexeme in lexemes {
        match lexeme {
            Lexeme::Open => depth += 1,
            Lexeme::Close => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// Groups nested deeper than this are read as the group around them:
/// `emit` recurses once per level, and a worker thread's stack (serve's,
/// MCP's) must hold any query that fits in `MAX_QUERY_BYTES`.
const MAX_GROUP_DEPTH: usize = 32;

fn parse(lexemes: Vec<Lexeme>) -> Vec<Node> {
    let use_parens = parens_balanced(&lexemes);
    let mut stack: Vec<Vec<Node>> = vec![Vec::new()];
    // Parentheses past `MAX_GROUP_DEPTH` still open.
    let mut flattened = 0usize;
    for lexeme in lexemes {
        match lexeme {
            Lexeme::Term { text, prefix } => {
                if text.chars().any(is_token_char)
                    && let Some(top) = stack.last_mut()
                {
                    top.push(Node::Term { text, prefix });
                }
            }
            Lexeme::Op(op) => {
                if let Some(top) = stack.last_mut() {
                    top.push(Node::Op(op));
                }
            }
            Lexeme::Open if use_parens && stack.len() > MAX_GROUP_DEPTH => flattened += 1,
            Lexeme::Open if use_parens => stack.push(Vec::new()),
            Lexeme::Close if use_parens && flattened > 0 => flattened -= 1,
            Lexeme::Close if use_parens && stack.len() > 1 => {
                if let Some(group) = stack.pop()
                    && let Some(top) = stack.last_mut()
                {
                    top.push(Node::Group(group));
                }
            }
            Lexeme::Open | Lexeme::Close => {}
        }
    }
    // Balanced parens leave exactly one level; be defensive anyway.
    while stack.len() > 1 {
        if let Some(group) = stack.pop()
            && let Some(top) = stack.last_mut()
        {
            top.extend(group);
        }
    }
    stack.pop().unwrap_or_default()
}

/// Emitted pieces of one level: operands and valid operators.
enum Piece {
    Operand(String),
    Op(&'static str),
}

fn emit(nodes: Vec<Node>, terms: &mut Vec<String>) -> String {
    // Resolve groups first (an empty group disappears).
    let mut items: Vec<Node> = Vec::new();
    let mut emitted: Vec<Option<String>> = Vec::new();
    for node in nodes {
        match node {
            Node::Group(inner) => {
                let text = emit(inner, terms);
                if !text.is_empty() {
                    items.push(Node::Group(Vec::new()));
                    emitted.push(Some(format!("({text})")));
                }
            }
            other => {
                if let Node::Term { text, .. } = &other {
                    terms.push(text.clone());
                }
                items.push(other);
                emitted.push(None);
            }
        }
    }
    let mut pieces: Vec<Piece> = Vec::new();
    for (index, node) in items.iter().enumerate() {
        match node {
            Node::Op(op) => {
                let after_operand = matches!(pieces.last(), Some(Piece::Operand(_)));
                let before_operand = matches!(
                    items.get(index + 1),
                    Some(Node::Term { .. } | Node::Group(_))
                );
                if after_operand && before_operand {
                    pieces.push(Piece::Op(op));
                } else {
                    terms.push(op.to_lowercase());
                    pieces.push(Piece::Operand(quote(&op.to_lowercase())));
                }
            }
            Node::Term { text, prefix } => {
                let star = if *prefix { "*" } else { "" };
                pieces.push(Piece::Operand(format!("{}{star}", quote(text))));
            }
            Node::Group(_) => {
                if let Some(Some(text)) = emitted.get(index) {
                    pieces.push(Piece::Operand(text.clone()));
                }
            }
        }
    }
    // FTS5 only allows implicit AND between phrases, not next to a group, so
    // adjacent operands are always joined with an explicit AND.
    let mut out = String::new();
    let mut previous_operand = false;
    for piece in pieces {
        match piece {
            Piece::Operand(text) => {
                if previous_operand {
                    out.push_str(" AND ");
                } else if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(&text);
                previous_operand = true;
            }
            Piece::Op(op) => {
                out.push(' ');
                out.push_str(op);
                previous_operand = false;
            }
        }
    }
    out
}

/// Translates user input into a valid FTS5 expression.
pub fn translate(input: &str) -> Translated {
    let mut terms = Vec::new();
    let expr = emit(parse(lex(input)), &mut terms);
    Translated { expr, terms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_being_typed_is_a_prefix() {
        assert_eq!(as_you_type("fix pars", true), "fix pars*");
        assert_eq!(as_you_type("fix pars", false), "fix pars");
        assert_eq!(as_you_type("fix pa", true), "fix pa");
        assert_eq!(as_you_type("\"a phrase\"", true), "\"a phrase\"");
        assert_eq!(as_you_type("std::io", true), "std::io");
    }
    use proptest::prelude::*;

    fn t(input: &str) -> String {
        translate(input).expr
    }

    #[test]
    fn deep_groups_are_flattened_not_a_stack_overflow() {
        // On a thread with a small stack, as serve's and MCP's workers.
        let deep = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| t(&format!("{}a b{}", "(".repeat(8_000), ")".repeat(8_000))))
            .unwrap()
            .join()
            .unwrap();
        let depth = deep.chars().take_while(|c| *c == '(').count();
        assert_eq!(depth, MAX_GROUP_DEPTH);
        assert!(deep.contains(r#""a" AND "b""#), "{deep}");
        assert_eq!(t("((a) b) c"), r#"(("a") AND "b") AND "c""#);
    }

    #[test]
    fn plain_words_are_anded_and_quoted() {
        assert_eq!(t("hello world"), r#""hello" AND "world""#);
        assert_eq!(t("  spaced   out "), r#""spaced" AND "out""#);
    }

    #[test]
    fn punctuated_words_become_quoted_strings() {
        assert_eq!(t("foo-bar"), r#""foo-bar""#);
        assert_eq!(t("a.b()"), r#""a.b(""#);
        assert_eq!(t("C++"), r#""C++""#);
        assert_eq!(t("src/lib.rs"), r#""src/lib.rs""#);
        assert_eq!(t("SessionManager.listAll"), r#""SessionManager.listAll""#);
        assert_eq!(t("parse_line_offset"), r#""parse_line_offset""#);
        assert_eq!(t("foo(bar)"), r#""foo(bar""#);
        assert_eq!(t("it's"), r#""it's""#);
    }

    #[test]
    fn quoted_phrases_are_kept_and_closed() {
        assert_eq!(t(r#""exact phrase" more"#), r#""exact phrase" AND "more""#);
        assert_eq!(t(r#""unbalanced"#), r#""unbalanced""#);
        assert_eq!(t(r#"say"hi"there"#), r#""say" AND "hi" AND "there""#);
        assert_eq!(t(r#""""#), "");
    }

    #[test]
    fn prefixes() {
        assert_eq!(t("pars*"), r#""pars"*"#);
        assert_eq!(t(r#""src lib"*"#), r#""src lib"*"#);
        assert_eq!(t("**"), "");
        assert_eq!(t("*foo"), r#""*foo""#);
    }

    /// `expr` written back from its items, spaced as `translate` spaces
    /// them.
    fn written(items: &[MatchItem]) -> String {
        let mut out = String::new();
        let mut after_open = true;
        for item in items {
            if !after_open && *item != MatchItem::Close {
                out.push(' ');
            }
            match item {
                MatchItem::Phrase { text, prefix } => {
                    out += &quote(text);
                    if *prefix {
                        out.push('*');
                    }
                }
                MatchItem::Bareword(word) => out += word,
                MatchItem::Open => out.push('('),
                MatchItem::Close => out.push(')'),
            }
            after_open = *item == MatchItem::Open;
        }
        out
    }

    #[test]
    fn match_items_read_what_fts5_reads() {
        use MatchItem::*;
        let phrase = |text: &str, prefix| Phrase {
            text: text.to_owned(),
            prefix,
        };
        let word = |text: &str| Bareword(text.to_owned());
        assert_eq!(
            match_items(r#"("a b" OR "c""d"*) NOT x"#),
            Some(vec![
                Open,
                phrase("a b", false),
                word("OR"),
                phrase("c\"d", true),
                Close,
                word("NOT"),
                word("x"),
            ])
        );
        assert_eq!(match_items(r#""a" "open"#), None);
        assert_eq!(match_items(""), Some(vec![]));
        // FTS5 skips spaces, tabs and line ends only: a no-break space is
        // part of a bareword.
        assert_eq!(
            match_items("a\u{a0}b\tc\r\n(d)"),
            Some(vec![word("a\u{a0}b"), word("c"), Open, word("d"), Close])
        );
    }

    #[test]
    fn operators_need_operands_on_both_sides() {
        assert_eq!(t("a OR b"), r#""a" OR "b""#);
        assert_eq!(t("a AND b NOT c"), r#""a" AND "b" NOT "c""#);
        assert_eq!(t("OR a"), r#""or" AND "a""#);
        assert_eq!(t("a OR"), r#""a" AND "or""#);
        assert_eq!(t("NOT a"), r#""not" AND "a""#);
        assert_eq!(t("a OR OR b"), r#""a" AND "or" OR "b""#);
        assert_eq!(t("a or b"), r#""a" AND "or" AND "b""#);
        assert_eq!(t("OR"), r#""or""#);
        assert_eq!(t("NEAR(a b)"), r#""NEAR(a" AND "b""#);
    }

    #[test]
    fn parens_group_only_when_balanced() {
        assert_eq!(t("(a OR b) c"), r#"("a" OR "b") AND "c""#);
        assert_eq!(t("((a))"), r#"(("a"))"#);
        assert_eq!(t("(a OR b"), r#""a" OR "b""#);
        assert_eq!(t("a) OR (b"), r#""a" OR "b""#);
        assert_eq!(t("a OR () b"), r#""a" OR "b""#);
        assert_eq!(t("(OR)"), r#"("or")"#);
        assert_eq!(t("a (OR) b"), r#""a" AND ("or") AND "b""#);
        assert_eq!(t("x NOT (y)"), r#""x" NOT ("y")"#);
        assert_eq!(t("x NOT ()"), r#""x" AND "not""#);
    }

    #[test]
    fn nothing_searchable() {
        assert!(translate("()").is_empty());
        assert!(translate("  -- ++ ...  ").is_empty());
        assert!(translate("").is_empty());
    }

    #[test]
    fn column_filters_and_specials_are_literal() {
        assert_eq!(t("body:foo"), r#""body:foo""#);
        assert_eq!(t("^start"), r#""^start""#);
        assert_eq!(t("{a b}: c"), r#""{a" AND "b}:" AND "c""#);
    }

    #[test]
    fn terms_list_excludes_operators() {
        let out = translate("(a OR b) NOT c \"d e\"");
        assert_eq!(out.terms, vec!["a", "b", "c", "d e"]);
    }

    #[test]
    fn cjk_detection() {
        assert!(has_unspaced_script("桜餅テスト"));
        assert!(has_unspaced_script("abc 한국어"));
        assert!(!has_unspaced_script("zebrafrost café"));
        assert!(!has_unspaced_script("an em dash — and “quotes” € ✓"));
        assert!(!has_unspaced_script(""));
        // The scan works in 64-byte blocks: a character may start in one
        // block and end in the next, or sit past many blocks of ASCII.
        for lead in [0, 1, 62, 63, 64, 200] {
            let text = format!("{}ไทย{}", "a".repeat(lead), "b".repeat(70));
            assert!(has_unspaced_script(&text), "Thai after {lead} bytes");
            let text = format!("{}—{}", "a".repeat(lead), "b".repeat(70));
            assert!(!has_unspaced_script(&text), "dash after {lead} bytes");
        }
        assert!(has_unspaced_script(&format!("{}𠀀", "—".repeat(40))));
    }

    fn fts_ok(conn: &rusqlite::Connection, expr: &str) -> Result<(), String> {
        conn.query_row("SELECT count(*) FROM t WHERE t MATCH ?1", [expr], |row| {
            row.get::<_, i64>(0)
        })
        .map(|_| ())
        .map_err(|err| format!("{expr:?}: {err}"))
    }

    fn fts_tables() -> rusqlite::Connection {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'unicode61 remove_diacritics 2');
             INSERT INTO t VALUES ('SessionManager.listAll src/lib.rs foo-bar C++ a.b()');",
        )
        .unwrap();
        conn
    }

    #[test]
    fn identifiers_match_their_text() {
        let conn = fts_tables();
        for query in [
            "SessionManager.listAll",
            "listAll",
            "src/lib.rs",
            "lib.rs",
            "foo-bar",
            "C++",
            "a.b()",
            "sessionmanager",
            "list*",
        ] {
            let count: i64 = conn
                .query_row(
                    "SELECT count(*) FROM t WHERE t MATCH ?1",
                    [translate(query).expr],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(count, 1, "{query}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn never_a_syntax_error(input in r#"[ a-zA-Z0-9"()*:^{}+\-.,;/\\_'<>|&!?#@$%~`=\[\]桜餅éß\t]{0,40}"#) {
            let conn = fts_tables();
            let out = translate(&input);
            if !out.is_empty() {
                prop_assert!(fts_ok(&conn, &out.expr).is_ok(), "{}", fts_ok(&conn, &out.expr).unwrap_err());
            }
            let read = match_items(&out.expr).map(|items| written(&items));
            prop_assert_eq!(read.as_deref(), Some(out.expr.as_str()));
        }

        #[test]
        fn operators_and_parens_never_break(words in proptest::collection::vec(
            prop_oneof![Just("AND"), Just("OR"), Just("NOT"), Just("("), Just(")"), Just("x"), Just("y*"), Just("\""), Just("()"), Just("NEAR")], 0..12)) {
            let conn = fts_tables();
            let input = words.join(" ");
            let out = translate(&input);
            if !out.is_empty() {
                prop_assert!(fts_ok(&conn, &out.expr).is_ok(), "{}", fts_ok(&conn, &out.expr).unwrap_err());
            }
            let read = match_items(&out.expr).map(|items| written(&items));
            prop_assert_eq!(read.as_deref(), Some(out.expr.as_str()));
            let glued = words.concat();
            let out = translate(&glued);
            if !out.is_empty() {
                prop_assert!(fts_ok(&conn, &out.expr).is_ok(), "{}", fts_ok(&conn, &out.expr).unwrap_err());
            }
        }

        #[test]
        fn any_unicode_is_safe(input in "\\PC{0,30}") {
            let conn = fts_tables();
            let out = translate(&input);
            if !out.is_empty() {
                prop_assert!(fts_ok(&conn, &out.expr).is_ok(), "{}", fts_ok(&conn, &out.expr).unwrap_err());
            }
        }
    }
}
