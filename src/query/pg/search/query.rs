//! A search of the team store as its word index answers it: the query
//! (piidx's language, or with `--raw` a `tsquery` of the store's lexemes)
//! parsed into an expression over phrases of lexemes (`Expr`), and the
//! lexemes to look up (`Query::terms`).

use crate::query::search::syntax::{self, MatchItem, has_unspaced_script, translate};
use crate::store::pg::lexemes::{TRIGRAM_MARK, Tokenizers};
use crate::store::tokenizer::TokenizerError;

/// A lexeme to look up: exactly, or every lexeme it starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Term {
    pub lexeme: String,
    pub prefix: bool,
}

/// An expression over phrases.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Terms (indexes into `Query::terms`) at these offsets from the
    /// first: a word is a phrase of one.
    Phrase(Vec<(usize, u32)>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    /// The left, without the right.
    Not(Box<Expr>, Box<Expr>),
    /// An operand without tokens: as FTS5's empty phrase, it matches
    /// nothing.
    Nothing,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub terms: Vec<Term>,
    pub expr: Expr,
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    Lexemes(#[from] TokenizerError),
    #[error("the tsquery {0:?} cannot be read: {1}")]
    Raw(String, &'static str),
    #[error("the query nests parentheses more than {MAX_DEPTH} deep; flatten it")]
    TooDeep,
}

/// Parentheses nested deeper than this are refused (the parser recurses).
const MAX_DEPTH: usize = 64;

impl Query {
    /// piidx's query language, read as the index reads it
    /// (`syntax::translate`: words AND-ed, "phrases", prefix*, OR, NOT,
    /// parentheses), each operand split by the tokenizers that made the
    /// store's lexemes into a phrase of its tokens; a query with unspaced
    /// script (CJK & co.) into trigrams, as the index looks in its trigram
    /// table. `None` when it has no word.
    pub fn parse(tokenizers: &Tokenizers, query: &str) -> Result<Option<Query>, ParseError> {
        let expr = translate(query).expr;
        if expr.is_empty() {
            return Ok(None);
        }
        let items = match_items(&expr);
        let mut parser = Parser {
            source: query.to_owned(),
            items,
            at: 0,
            depth: 0,
            terms: Vec::new(),
            operand: Operand::Words {
                tokenizers,
                trigrams: has_unspaced_script(query),
            },
        };
        let expr = parser.or()?;
        Ok(Some(Query {
            terms: parser.terms,
            expr,
        }))
    }

    /// For each term, whether a check needs its positions: the words of a
    /// phrase of two or more.
    pub fn positional(&self) -> Vec<bool> {
        fn mark(expr: &Expr, out: &mut [bool]) {
            match expr {
                Expr::Phrase(parts) if parts.len() > 1 => {
                    for (term, _) in parts {
                        out[*term] = true;
                    }
                }
                Expr::Phrase(_) | Expr::Nothing => {}
                Expr::And(parts) | Expr::Or(parts) => parts.iter().for_each(|p| mark(p, out)),
                Expr::Not(left, right) => {
                    mark(left, out);
                    mark(right, out);
                }
            }
        }
        let mut out = vec![false; self.terms.len()];
        mark(&self.expr, &mut out);
        out
    }

    /// A `tsquery` of the store's lexemes (`--raw`): `'lexeme'`, `'pre':*`,
    /// `&`, `|`, `!`, `<->` and `<N>` between lexemes, parentheses.
    pub fn parse_raw(tsquery: &str) -> Result<Query, ParseError> {
        let items = tsquery_items(tsquery)?;
        let mut parser = Parser {
            source: tsquery.to_owned(),
            items,
            at: 0,
            depth: 0,
            terms: Vec::new(),
            operand: Operand::Lexemes,
        };
        let expr = parser.or()?;
        if parser.at < parser.items.len() {
            return Err(parser.raw_error("an operator or parenthesis is out of place"));
        }
        Ok(Query {
            terms: parser.terms,
            expr,
        })
    }
}

/// One item of a query.
#[derive(Debug, Clone, PartialEq)]
enum Item {
    Operand {
        text: String,
        prefix: bool,
    },
    And,
    Or,
    Not,
    /// `tsquery`'s `<N>`.
    Followed(u32),
    Open,
    Close,
}

/// The items of an FTS5 MATCH expression as `translate` writes it (which
/// closes every string it opens: an expression FTS5 would refuse has none).
fn match_items(expr: &str) -> Vec<Item> {
    syntax::match_items(expr)
        .unwrap_or_default()
        .into_iter()
        .map(|item| match item {
            MatchItem::Phrase { text, prefix } => Item::Operand { text, prefix },
            MatchItem::Bareword(word) => match word.as_str() {
                "AND" => Item::And,
                "OR" => Item::Or,
                "NOT" => Item::Not,
                _ => Item::Operand {
                    text: word,
                    prefix: false,
                },
            },
            MatchItem::Open => Item::Open,
            MatchItem::Close => Item::Close,
        })
        .collect()
}

/// The rest of a `tsquery` lexeme opened by `'`: up to the next `'` alone
/// (a doubled one stands for itself; `\\` escapes the character after it).
fn quoted(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut text = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\'' if chars.next_if_eq(&'\'').is_none() => break,
            '\\' => {
                if let Some(next) = chars.next() {
                    text.push(next);
                }
                continue;
            }
            _ => {}
        }
        text.push(c);
    }
    text
}

/// The items of a `tsquery`.
fn tsquery_items(tsquery: &str) -> Result<Vec<Item>, ParseError> {
    let bad = |why| ParseError::Raw(tsquery.to_owned(), why);
    let mut items = Vec::new();
    let mut chars = tsquery.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => items.push(Item::And),
            '|' => items.push(Item::Or),
            '!' => items.push(Item::Not),
            '(' => items.push(Item::Open),
            ')' => items.push(Item::Close),
            '<' => {
                let mut inside = String::new();
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                    inside.push(c);
                }
                let distance = match inside.as_str() {
                    "-" => 1,
                    n => n.parse().map_err(|_| bad("<N> needs a number"))?,
                };
                items.push(Item::Followed(distance));
            }
            c if c.is_whitespace() => {}
            _ => {
                let text = if c == '\'' {
                    quoted(&mut chars)
                } else {
                    let mut text = String::from(c);
                    while let Some(&c) = chars.peek() {
                        if c.is_whitespace() || "&|!()<:".contains(c) {
                            break;
                        }
                        text.push(c);
                        chars.next();
                    }
                    text
                };
                let mut prefix = false;
                if chars.peek() == Some(&':') {
                    chars.next();
                    // Weights (A–D) say nothing here; `*` is a prefix.
                    while let Some(&c) = chars.peek() {
                        if c == '*' {
                            prefix = true;
                        } else if !c.is_ascii_alphabetic() {
                            break;
                        }
                        chars.next();
                    }
                }
                items.push(Item::Operand { text, prefix });
            }
        }
    }
    Ok(items)
}

/// How an operand becomes lexemes.
enum Operand<'a> {
    /// Split by the index's tokenizers (`trigrams`: into trigrams).
    Words {
        tokenizers: &'a Tokenizers,
        trigrams: bool,
    },
    /// Taken as it is (`--raw`).
    Lexemes,
}

/// A recursive-descent parser of either language. Precedence, lowest
/// first: OR, AND (or nothing between two operands), NOT (FTS5's binary
/// "and not"; `tsquery`'s `& !`), `<N>`.
struct Parser<'a> {
    /// The query, for errors.
    source: String,
    items: Vec<Item>,
    at: usize,
    /// Parentheses open around the item being read.
    depth: usize,
    terms: Vec<Term>,
    operand: Operand<'a>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Item> {
        self.items.get(self.at)
    }

    fn raw_error(&self, why: &'static str) -> ParseError {
        ParseError::Raw(self.source.clone(), why)
    }

    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut parts = vec![self.and()?];
        while self.peek() == Some(&Item::Or) {
            self.at += 1;
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Expr::Or(parts)
        })
    }

    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut parts = vec![self.not()?];
        loop {
            match self.peek() {
                Some(Item::And) => {
                    self.at += 1;
                    // `tsquery`'s `a & !b`: a without b.
                    if self.peek() == Some(&Item::Not) {
                        self.at += 1;
                        let without = self.followed()?;
                        let left = and_of(std::mem::take(&mut parts));
                        parts.push(Expr::Not(Box::new(left), Box::new(without)));
                        continue;
                    }
                    parts.push(self.not()?);
                }
                Some(Item::Operand { .. } | Item::Open) => parts.push(self.not()?),
                _ => break,
            }
        }
        Ok(and_of(parts))
    }

    fn not(&mut self) -> Result<Expr, ParseError> {
        if self.peek() == Some(&Item::Not) {
            // A NOT with nothing before it: no text is found by what it
            // lacks alone.
            return Err(self.raw_error("a ! needs a lexeme before it, joined with &"));
        }
        let mut left = self.followed()?;
        while self.peek() == Some(&Item::Not) && matches!(self.operand, Operand::Words { .. }) {
            self.at += 1;
            let right = self.followed()?;
            left = Expr::Not(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn followed(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.primary()?;
        while let Some(&Item::Followed(distance)) = self.peek() {
            self.at += 1;
            let right = self.primary()?;
            let (Expr::Phrase(mut terms), Expr::Phrase(more)) = (left, right) else {
                return Err(self.raw_error("<-> and <N> join lexemes and phrases only"));
            };
            let shift = terms.last().map_or(0, |(_, at)| *at) + distance;
            terms.extend(more.into_iter().map(|(term, at)| (term, at + shift)));
            left = Expr::Phrase(terms);
        }
        Ok(left)
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        match self.items.get(self.at).cloned() {
            Some(Item::Open) => {
                self.at += 1;
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(ParseError::TooDeep);
                }
                let inner = self.or()?;
                self.depth -= 1;
                if self.peek() == Some(&Item::Close) {
                    self.at += 1;
                }
                Ok(inner)
            }
            Some(Item::Operand { text, prefix }) => {
                self.at += 1;
                self.phrase(&text, prefix)
            }
            _ => Err(self.raw_error("an operator has no lexeme after it")),
        }
    }

    /// An operand as a phrase of its lexemes.
    fn phrase(&mut self, text: &str, prefix: bool) -> Result<Expr, ParseError> {
        let mut lexemes: Vec<Term> = Vec::new();
        match self.operand {
            Operand::Lexemes => lexemes.push(Term {
                lexeme: text.to_owned(),
                prefix,
            }),
            Operand::Words {
                tokenizers,
                trigrams: true,
            } => {
                tokenizers.trigrams(text, |token| {
                    lexemes.push(Term {
                        lexeme: token.to_owned(),
                        prefix: false,
                    })
                })?;
                if lexemes.is_empty() && !text.is_empty() {
                    // Under three characters: a prefix of the texts'
                    // trigrams (each text keeps its last one and two
                    // characters too), so found anywhere.
                    lexemes.push(Term {
                        lexeme: format!("{TRIGRAM_MARK}{}", text.to_lowercase()),
                        prefix: true,
                    });
                }
            }
            Operand::Words {
                tokenizers,
                trigrams: false,
            } => {
                tokenizers.words(text, |token| {
                    lexemes.push(Term {
                        lexeme: token.to_owned(),
                        prefix: false,
                    })
                })?;
                if let Some(last) = lexemes.last_mut() {
                    last.prefix = prefix;
                }
            }
        }
        if lexemes.is_empty() {
            return Ok(Expr::Nothing);
        }
        let phrase = lexemes
            .into_iter()
            .zip(0..)
            .map(|(term, at)| (self.term(term), at))
            .collect();
        Ok(Expr::Phrase(phrase))
    }

    /// The index of `term` in `terms`, added when new.
    fn term(&mut self, term: Term) -> usize {
        match self.terms.iter().position(|t| *t == term) {
            Some(at) => at,
            None => {
                self.terms.push(term);
                self.terms.len() - 1
            }
        }
    }
}

fn and_of(mut parts: Vec<Expr>) -> Expr {
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        Expr::And(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query written back, lexemes in place of their indexes.
    fn show(query: &Query) -> String {
        fn go(expr: &Expr, terms: &[Term]) -> String {
            match expr {
                Expr::Phrase(parts) => {
                    let words: Vec<String> = parts
                        .iter()
                        .map(|(t, at)| {
                            let star = if terms[*t].prefix { "*" } else { "" };
                            format!("{}{star}@{at}", terms[*t].lexeme)
                        })
                        .collect();
                    words.join(" ")
                }
                Expr::And(parts) => {
                    let parts: Vec<String> = parts.iter().map(|p| go(p, terms)).collect();
                    format!("AND({})", parts.join(", "))
                }
                Expr::Or(parts) => {
                    let parts: Vec<String> = parts.iter().map(|p| go(p, terms)).collect();
                    format!("OR({})", parts.join(", "))
                }
                Expr::Not(a, b) => format!("NOT({}, {})", go(a, terms), go(b, terms)),
                Expr::Nothing => "NOTHING".into(),
            }
        }
        go(&query.expr, &query.terms)
    }

    fn t(query: &str) -> Option<String> {
        Query::parse(&Tokenizers::new().unwrap(), query)
            .unwrap()
            .map(|q| show(&q))
    }

    fn raw(tsquery: &str) -> String {
        show(&Query::parse_raw(tsquery).unwrap())
    }

    #[test]
    fn the_query_language_becomes_phrases_of_the_index_tokens() {
        assert_eq!(t("foo bar").as_deref(), Some("AND(foo@0, bar@0)"));
        assert_eq!(t("pars* OR lexer").as_deref(), Some("OR(pars*@0, lexer@0)"));
        assert_eq!(
            t("\"exact phrase\" NOT x").as_deref(),
            Some("NOT(exact@0 phrase@1, x@0)")
        );
        assert_eq!(
            t("SessionManager.listAll").as_deref(),
            Some("sessionmanager@0 listall@1")
        );
        assert_eq!(t("(a OR b) c").as_deref(), Some("AND(OR(a@0, b@0), c@0)"));
        assert_eq!(t("a NOT b OR c").as_deref(), Some("OR(NOT(a@0, b@0), c@0)"));
        assert_eq!(t("Café").as_deref(), Some("cafe@0"));
        assert_eq!(t("-- ()"), None);
    }

    #[test]
    fn a_term_found_twice_is_looked_up_once() {
        let query = Query::parse(&Tokenizers::new().unwrap(), "a b OR a")
            .unwrap()
            .unwrap();
        assert_eq!(query.terms.len(), 2);
    }

    #[test]
    fn only_the_words_of_phrases_need_their_positions() {
        let query = Query::parse(&Tokenizers::new().unwrap(), "serde_json x NOT \"y z\"")
            .unwrap()
            .unwrap();
        let words: Vec<&str> = query.terms.iter().map(|t| t.lexeme.as_str()).collect();
        assert_eq!(words, ["serde", "json", "x", "y", "z"]);
        assert_eq!(query.positional(), [true, true, false, true, true]);
    }

    #[test]
    fn unspaced_scripts_are_looked_for_in_trigrams() {
        assert_eq!(
            t("桜餅テスト").as_deref(),
            Some("#桜餅テ@0 #餅テス@1 #テスト@2")
        );
        assert_eq!(t("桜餅").as_deref(), Some("#桜餅*@0"));
    }

    #[test]
    fn deep_parentheses_are_refused_not_a_stack_overflow() {
        let deep = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(matches!(Query::parse_raw(&deep), Err(ParseError::TooDeep)));
        let nested = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(Query::parse_raw(&nested).is_ok());
    }

    #[test]
    fn raw_tsqueries_are_read_with_their_precedence() {
        assert_eq!(raw("'foo' & !'b''ar':*"), "NOT(foo@0, b'ar*@0)");
        assert_eq!(raw("a <-> b <2> c"), "a@0 b@1 c@3");
        assert_eq!(raw("a | b & c"), "OR(a@0, AND(b@0, c@0))");
        assert_eq!(
            raw("(a | b) & !(c | d) & e"),
            "AND(NOT(OR(a@0, b@0), OR(c@0, d@0)), e@0)"
        );
        assert!(Query::parse_raw("!foo").is_err());
        assert!(Query::parse_raw("(a | b) <-> c").is_err());
        assert!(Query::parse_raw("a & ").is_err());
    }
}
