//! A `Query` answered from the word index's postings: the chunks that may
//! match (`Found::candidates`: phrases as their words, nothing under NOT,
//! any batch), those the postings say match in the batch they name
//! (`Found::may_match`), then each one checked exactly once `texts` says
//! which batch wrote it (`Found::matches`: positions for phrases, NOT), and
//! scored with bm25 as the index scores (`Found::bm25`).

use super::query::{Expr, Query};
use crate::store::pg::words::{Malformed, Posting, Postings};
use crate::store::rank::{Scorer, ShardStats};

/// A chunk of one machine: (`src`, `chunk_id`).
pub type Key = (i32, i64);

/// Every term's postings, by chunk.
pub struct Found<'a> {
    /// Per term of the query: its postings sorted by chunk (several for a
    /// chunk when batches listed it more than once, or for a prefix).
    terms: Vec<Vec<(Key, Posting<'a>)>>,
    /// Per term, its chunks, sorted.
    keys: Vec<Vec<Key>>,
}

impl<'a> Found<'a> {
    /// `postings`: (term index, src, a list of the term's lexeme, its
    /// positions if they were read, its row's batch), as the store returned
    /// them.
    pub fn new(
        terms: usize,
        postings: impl IntoIterator<Item = (usize, i32, &'a [u8], Option<&'a [u8]>, i64)>,
    ) -> Result<Found<'a>, Malformed> {
        let postings: Vec<_> = postings.into_iter().collect();
        let mut all: Vec<Vec<(Key, Posting<'a>)>> = (0..terms)
            .map(|term| {
                // A posting takes 3 bytes or more.
                let bytes: usize = postings
                    .iter()
                    .filter(|p| p.0 == term)
                    .map(|p| p.2.len())
                    .sum();
                Vec::with_capacity(bytes / 3)
            })
            .collect();
        for (term, src, list, positions, batch) in postings {
            let Some(all) = all.get_mut(term) else {
                continue;
            };
            for posting in Postings::new(list, positions, batch) {
                let posting = posting?;
                all.push(((src, posting.chunk_id), posting));
            }
        }
        let keys = all
            .iter_mut()
            .map(|postings| {
                // Each list is in chunk order already: the sort merges them.
                postings.sort_by_key(|(key, _)| *key);
                let mut keys: Vec<Key> = postings.iter().map(|(key, _)| *key).collect();
                keys.dedup();
                keys
            })
            .collect();
        Ok(Found { terms: all, keys })
    }

    /// The chunks that may match `expr`, whatever batch wrote them:
    /// phrases as their words, what is under NOT left out. Sorted.
    pub fn candidates(&self, expr: &Expr) -> Vec<Key> {
        match expr {
            Expr::Phrase(parts) => {
                let mut sets = parts.iter().map(|(term, _)| self.keys(*term));
                let first = sets.next().unwrap_or_default().to_vec();
                sets.fold(first, |a, b| intersect(&a, b))
            }
            Expr::And(parts) => {
                let mut sets = parts.iter().map(|part| self.candidates(part));
                let first = sets.next().unwrap_or_default();
                sets.fold(first, |a, b| intersect(&a, &b))
            }
            Expr::Or(parts) => {
                let mut all: Vec<Key> = parts.iter().flat_map(|p| self.candidates(p)).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            Expr::Not(left, _) => self.candidates(left),
            Expr::Nothing => Vec::new(),
        }
    }

    /// A term's chunks, sorted.
    fn keys(&self, term: usize) -> &[Key] {
        self.keys.get(term).map_or(&[], Vec::as_slice)
    }

    /// Whether chunk `key`, as batch `batch` wrote it, matches `expr`.
    pub fn matches(&self, expr: &Expr, key: Key, batch: i64) -> Result<bool, Malformed> {
        Ok(match expr {
            Expr::Phrase(parts) => self.phrase_hits(parts, key, batch)? > 0,
            Expr::And(parts) => {
                for part in parts {
                    if !self.matches(part, key, batch)? {
                        return Ok(false);
                    }
                }
                true
            }
            Expr::Or(parts) => {
                for part in parts {
                    if self.matches(part, key, batch)? {
                        return Ok(true);
                    }
                }
                false
            }
            Expr::Not(left, right) => {
                self.matches(left, key, batch)? && !self.matches(right, key, batch)?
            }
            Expr::Nothing => false,
        })
    }

    /// Whether chunk `key` may match `expr`, before `texts` says which
    /// batch wrote it: when all its postings name one batch (nearly
    /// always), the answer for that batch, which is exact if `texts` agrees
    /// and else changes nothing (with none of its postings counting, a
    /// chunk matches nothing); true when they name several.
    pub fn may_match(&self, expr: &Expr, key: Key) -> Result<bool, Malformed> {
        let mut batch = None;
        for term in 0..self.terms.len() {
            for posting in self.all_postings(term, key) {
                match batch {
                    None => batch = Some(posting.batch),
                    Some(one) if one != posting.batch => return Ok(true),
                    Some(_) => {}
                }
            }
        }
        match batch {
            Some(batch) => self.matches(expr, key, batch),
            None => Ok(false),
        }
    }

    /// The term's postings of the chunk, whichever batch wrote them.
    fn all_postings(&self, term: usize, key: Key) -> impl Iterator<Item = &Posting<'a>> {
        let all = self.terms.get(term).map_or(&[][..], Vec::as_slice);
        let start = all.partition_point(|(k, _)| *k < key);
        all[start..]
            .iter()
            .take_while(move |(k, _)| *k == key)
            .map(|(_, posting)| posting)
    }

    /// The term's postings of the chunk as `batch` wrote it.
    fn postings(&self, term: usize, key: Key, batch: i64) -> impl Iterator<Item = &Posting<'a>> {
        self.all_postings(term, key)
            .filter(move |p| p.batch == batch)
    }

    /// How many times the phrase occurs in the chunk as `batch` wrote it.
    fn phrase_hits(&self, parts: &[(usize, u32)], key: Key, batch: i64) -> Result<u32, Malformed> {
        if let [(term, _)] = parts {
            return Ok(self.postings(*term, key, batch).map(|p| p.count).sum());
        }
        // Each part's positions, moved back by its offset: the phrase
        // starts where all of them have one.
        let mut starts: Option<Vec<u32>> = None;
        for (term, offset) in parts {
            let mut positions = Vec::new();
            for posting in self.postings(*term, key, batch) {
                positions.extend(
                    posting
                        .positions()?
                        .into_iter()
                        .filter_map(|p| p.checked_sub(*offset)),
                );
            }
            positions.sort_unstable();
            positions.dedup();
            starts = Some(match starts {
                None => positions,
                Some(before) => before
                    .into_iter()
                    .filter(|p| positions.binary_search(p).is_ok())
                    .collect(),
            });
            if starts.as_ref().is_some_and(Vec::is_empty) {
                return Ok(0);
            }
        }
        Ok(starts.map_or(0, |s| s.len() as u32))
    }

    /// FTS5's bm25 of a matching chunk (negative: lower is better) over
    /// the phrases of `expr` (`phrases`), as the index scores it
    /// (`scorer`); `tokens` is the chunk's length.
    pub fn bm25(
        &self,
        phrases: &[Vec<(usize, u32)>],
        scorer: &Scorer,
        key: Key,
        batch: i64,
        tokens: u32,
    ) -> Result<f64, Malformed> {
        let freq = phrases
            .iter()
            .map(|parts| self.phrase_hits(parts, key, batch))
            .collect::<Result<Vec<u32>, _>>()?;
        Ok(scorer.score(tokens, freq.into_iter()))
    }

    /// Every phrase of `expr`, and the index's bm25 (`rank::Scorer`) over
    /// `collection`: the store's chunks and tokens, and with several
    /// phrases each one's document frequency, counted from its candidates
    /// (any batch).
    pub fn phrases(
        &self,
        query: &Query,
        mut collection: ShardStats,
    ) -> (Vec<Vec<(usize, u32)>>, Scorer) {
        let mut phrases = Vec::new();
        each_phrase(&query.expr, &mut |parts| phrases.push(parts.to_vec()));
        if phrases.len() > 1 {
            let hits = phrases.iter().map(|parts| match parts.as_slice() {
                [(term, _)] => self.keys(*term).len(),
                _ => self.candidates(&Expr::Phrase(parts.clone())).len(),
            });
            collection.hits = Some(hits.map(|hits| hits as i64).collect());
        }
        let scorer = Scorer::new([&collection], phrases.len());
        (phrases, scorer)
    }
}

fn each_phrase(expr: &Expr, each: &mut impl FnMut(&[(usize, u32)])) {
    match expr {
        Expr::Phrase(parts) => each(parts),
        Expr::And(parts) | Expr::Or(parts) => parts.iter().for_each(|p| each_phrase(p, each)),
        Expr::Not(left, right) => {
            each_phrase(left, each);
            each_phrase(right, each);
        }
        Expr::Nothing => {}
    }
}

/// The keys in both sorted lists.
fn intersect(a: &[Key], b: &[Key]) -> Vec<Key> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pg::words::BatchWords;

    /// Chunks of batch 5 (src 1), one text each, words by position: each
    /// lexeme with its list and positions.
    fn store(texts: &[(i64, &str)]) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        let mut words = BatchWords::default();
        let mut all: Vec<(String, i64, Vec<u32>)> = Vec::new();
        for (chunk, text) in texts {
            for (pos, word) in text.split(' ').enumerate() {
                match all.iter_mut().find(|(w, c, _)| w == word && c == chunk) {
                    Some(entry) => entry.2.push(pos as u32),
                    None => all.push((word.to_owned(), *chunk, vec![pos as u32])),
                }
            }
        }
        all.sort_by_key(|(_, chunk, _)| *chunk);
        for (word, chunk, positions) in &all {
            words.add(word, *chunk, 0, positions);
        }
        let (blocks, _) = words.into_blocks();
        blocks
            .iter()
            .flat_map(|b| {
                b.lexemes.iter().enumerate().map(|(i, lexeme)| {
                    let (list, positions) = b.get(i).unwrap();
                    (lexeme.clone(), list.to_vec(), positions.to_vec())
                })
            })
            .collect()
    }

    fn answer(texts: &[(i64, &str)], tsquery: &str) -> Vec<i64> {
        let query = Query::parse_raw(tsquery).unwrap();
        let lists = store(texts);
        let rows = query.terms.iter().enumerate().flat_map(|(n, term)| {
            lists
                .iter()
                .filter(move |(lexeme, _, _)| {
                    *lexeme == term.lexeme || (term.prefix && lexeme.starts_with(&term.lexeme))
                })
                .map(move |(_, list, positions)| {
                    (n, 1, list.as_slice(), Some(positions.as_slice()), 5)
                })
        });
        let found = Found::new(query.terms.len(), rows).unwrap();
        found
            .candidates(&query.expr)
            .into_iter()
            .filter(|key| found.matches(&query.expr, *key, 5).unwrap())
            .map(|(_, chunk)| chunk)
            .collect()
    }

    #[test]
    fn phrases_negations_and_prefixes_are_checked_exactly() {
        let texts = [
            (1, "connection refused by peer"),
            (2, "refused connection"),
            (3, "connection was refused"),
            (4, "retry retrying connection refused"),
        ];
        assert_eq!(answer(&texts, "connection <-> refused"), [1, 4]);
        assert_eq!(answer(&texts, "connection & refused"), [1, 2, 3, 4]);
        assert_eq!(answer(&texts, "connection <2> refused"), [3]);
        assert_eq!(answer(&texts, "connection & !peer"), [2, 3, 4]);
        assert_eq!(answer(&texts, "retr:* <-> connection"), [4]);
        assert_eq!(answer(&texts, "peer | was"), [1, 3]);
    }

    #[test]
    fn a_posting_of_another_batch_does_not_count() {
        let query = Query::parse_raw("a").unwrap();
        let lists = store(&[(1, "a")]);
        let found = Found::new(1, [(0, 1, lists[0].1.as_slice(), None, 5)]).unwrap();
        assert_eq!(found.candidates(&query.expr), [(1, 1)]);
        assert!(found.matches(&query.expr, (1, 1), 5).unwrap());
        assert!(!found.matches(&query.expr, (1, 1), 6).unwrap());
    }

    #[test]
    fn may_match_decides_by_the_postings_own_batch_unless_they_differ() {
        let query = Query::parse_raw("a <-> b").unwrap();
        let lists = store(&[(1, "a b"), (2, "b a")]);
        let list = |word: &str| {
            let (_, list, positions) = lists.iter().find(|(w, _, _)| w == word).unwrap();
            (list.as_slice(), positions.as_slice())
        };
        let (a, a_at) = list("a");
        let (b, b_at) = list("b");
        let found = Found::new(2, [(0, 1, a, Some(a_at), 5), (1, 1, b, Some(b_at), 5)]).unwrap();
        assert!(found.may_match(&query.expr, (1, 1)).unwrap());
        assert!(
            !found.may_match(&query.expr, (1, 2)).unwrap(),
            "not a phrase there"
        );
        // Chunk 2 listed again by batch 7 (its postings' batches differ):
        // only `texts` can tell.
        let again = store(&[(2, "a b")]);
        let (a7, a7_at) = (again[0].1.as_slice(), again[0].2.as_slice());
        let found = Found::new(
            2,
            [
                (0, 1, a, Some(a_at), 5),
                (1, 1, b, Some(b_at), 5),
                (0, 1, a7, Some(a7_at), 7),
            ],
        )
        .unwrap();
        assert!(found.may_match(&query.expr, (1, 2)).unwrap());
    }

    #[test]
    fn bm25_rewards_frequency_and_rarity() {
        let query = Query::parse_raw("a | b").unwrap();
        let lists = store(&[(1, "a a a x"), (2, "a x x x"), (3, "b x x x")]);
        let rows = lists.iter().filter_map(|(lexeme, list, _)| {
            let n = query.terms.iter().position(|t| t.lexeme == *lexeme)?;
            Some((n, 1, list.as_slice(), None, 5))
        });
        let found = Found::new(2, rows).unwrap();
        let collection = ShardStats {
            rows: 3,
            tokens: 12,
            hits: None,
        };
        let (phrases, scorer) = found.phrases(&query, collection);
        let score = |chunk| found.bm25(&phrases, &scorer, (1, chunk), 5, 4).unwrap();
        assert!(score(1) < score(2), "more occurrences score better");
        assert!(score(3) < score(2), "a rarer word scores better");
    }
}

/// The postings' answer against a plain reading of the texts, for any
/// expression over a small vocabulary: words, phrases with gaps,
/// prefixes, AND, OR, NOT.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::super::query::{Expr, Query, Term};
    use super::Found;
    use crate::store::pg::words::BatchWords;

    const WORDS: [&str; 5] = ["a", "ab", "abc", "b", "c"];

    /// Whether `text`'s words match `expr`, read plainly.
    fn plain(expr: &Expr, terms: &[Term], text: &[&str]) -> bool {
        let is = |term: &Term, word: &str| {
            word == term.lexeme || (term.prefix && word.starts_with(&term.lexeme))
        };
        match expr {
            Expr::Phrase(parts) => (0..text.len()).any(|start| {
                parts.iter().all(|(term, offset)| {
                    text.get(start + *offset as usize)
                        .is_some_and(|word| is(&terms[*term], word))
                })
            }),
            Expr::And(parts) => parts.iter().all(|p| plain(p, terms, text)),
            Expr::Or(parts) => parts.iter().any(|p| plain(p, terms, text)),
            Expr::Not(left, right) => plain(left, terms, text) && !plain(right, terms, text),
            Expr::Nothing => false,
        }
    }

    fn terms() -> impl Strategy<Value = Vec<Term>> {
        proptest::collection::vec(
            (0..WORDS.len(), any::<bool>()).prop_map(|(w, prefix)| Term {
                lexeme: WORDS[w].to_owned(),
                prefix,
            }),
            1..4,
        )
    }

    fn expr(terms: usize) -> impl Strategy<Value = Expr> {
        let phrase = proptest::collection::vec((0..terms, 0u32..3), 1..3).prop_map(|parts| {
            // Offsets from the first part, ascending.
            let mut at = 0;
            Expr::Phrase(
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(i, (term, gap))| {
                        if i > 0 {
                            at += 1 + gap;
                        }
                        (term, at)
                    })
                    .collect(),
            )
        });
        phrase.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 2..3).prop_map(Expr::And),
                proptest::collection::vec(inner.clone(), 2..3).prop_map(Expr::Or),
                (inner.clone(), inner).prop_map(|(a, b)| Expr::Not(Box::new(a), Box::new(b))),
            ]
        })
    }

    fn query() -> impl Strategy<Value = Query> {
        terms().prop_flat_map(|terms| {
            let n = terms.len();
            expr(n).prop_map(move |expr| Query {
                terms: terms.clone(),
                expr,
            })
        })
    }

    proptest! {
        #[test]
        fn the_postings_answer_as_the_texts_read(
            texts in proptest::collection::vec(
                proptest::collection::vec(0..WORDS.len(), 0..10), 1..8),
            query in query(),
        ) {
            let texts: Vec<Vec<&str>> = texts
                .iter()
                .map(|words| words.iter().map(|w| WORDS[*w]).collect())
                .collect();
            let mut words = BatchWords::default();
            for (chunk, text) in texts.iter().enumerate() {
                for word in WORDS {
                    let positions: Vec<u32> = (0..text.len() as u32)
                        .filter(|at| text[*at as usize] == word)
                        .collect();
                    if !positions.is_empty() {
                        words.add(word, chunk as i64 + 1, 0, &positions);
                    }
                }
            }
            let (blocks, _) = words.into_blocks();
            let lists: Vec<(&str, &[u8], &[u8])> = blocks
                .iter()
                .flat_map(|b| {
                    (0..b.lexemes.len()).map(move |i| {
                        let (list, positions) = b.get(i).unwrap();
                        (b.lexemes[i].as_str(), list, positions)
                    })
                })
                .collect();
            // What the store's lookup returns for each term.
            let rows = query.terms.iter().enumerate().flat_map(|(n, term)| {
                lists
                    .iter()
                    .filter(move |(lexeme, _, _)| {
                        *lexeme == term.lexeme || (term.prefix && lexeme.starts_with(&term.lexeme))
                    })
                    .map(move |(_, list, positions)| (n, 1, *list, Some(*positions), 5))
            });
            let found = Found::new(query.terms.len(), rows).unwrap();
            let by_postings: Vec<i64> = found
                .candidates(&query.expr)
                .into_iter()
                .filter(|key| found.may_match(&query.expr, *key).unwrap())
                .filter(|key| found.matches(&query.expr, *key, 5).unwrap())
                .map(|(_, chunk)| chunk)
                .collect();
            let by_reading: Vec<i64> = texts
                .iter()
                .enumerate()
                .filter(|(_, text)| plain(&query.expr, &query.terms, text))
                .map(|(chunk, _)| chunk as i64 + 1)
                .collect();
            prop_assert_eq!(by_postings, by_reading);
        }
    }
}
