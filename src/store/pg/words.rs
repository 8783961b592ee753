//! The team store's word index (schema 4, docs/postgres.md "The word
//! index"): posting lists made by the pushing client and loaded with
//! `COPY`, instead of a GIN index the server would build. This module is
//! their format: what a push gathers for a batch (`BatchWords`), the rows
//! it packs them into (`Block`: the lexemes of about 32 KB of lists, sorted
//! bytewise, keyed by the first), and how a list is read back (`Postings`).
//!
//! A lexeme's list is varints, per chunk in chunk id order: the chunk id
//! minus the previous one's (the first: minus 0), the batch that wrote the
//! chunk counted back from the row's batch (0 but in merged rows), and the
//! number of positions. Its positions are apart, in the same order: per
//! chunk, the positions (token numbers from 0), each minus the previous
//! one. A search reads the positions of a phrase's words only. A block
//! holds its lists end to end in one `bytea`, and their ends in an array,
//! so that the server reads a list's bytes alone (`substring` of an
//! uncompressed value reads only the pages it needs); its positions the
//! same way. The store's `piidx_postings` reads the same in SQL.

use std::collections::HashMap;

/// A block ends once its lists reach this many bytes.
pub const BLOCK_BYTES: usize = 32 << 10;

#[derive(Debug, thiserror::Error)]
#[error(
    "a posting list in the team store's word index (`words`) is cut short or malformed; if the table was altered, delete the machine's `push_files` rows and push again to rewrite it"
)]
pub struct Malformed;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, Malformed> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at).ok_or(Malformed)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(Malformed)
}

/// One posting as a list holds it, positions still encoded.
#[derive(Debug, Clone, Copy)]
pub struct Posting<'a> {
    pub chunk_id: i64,
    /// The batch that wrote the chunk: the posting counts only while
    /// `texts` has the chunk with this batch.
    pub batch: i64,
    /// How many times the lexeme occurs in the chunk.
    pub count: u32,
    /// Its positions, when they were read.
    positions: Option<&'a [u8]>,
}

impl Posting<'_> {
    /// The lexeme's positions in the chunk, ascending (none when they
    /// were not read).
    pub fn positions(&self) -> Result<Vec<u32>, Malformed> {
        let Some(bytes) = self.positions else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(self.count as usize);
        let (mut at, mut pos) = (0, 0u64);
        for _ in 0..self.count {
            pos += varint(bytes, &mut at)?;
            out.push(u32::try_from(pos).map_err(|_| Malformed)?);
        }
        Ok(out)
    }
}

/// The postings of one list of a row of batch `batch`, with the list's
/// positions when they were read.
pub struct Postings<'a> {
    list: &'a [u8],
    at: usize,
    positions: Option<&'a [u8]>,
    at_position: usize,
    chunk: i64,
    batch: i64,
}

impl<'a> Postings<'a> {
    pub fn new(list: &'a [u8], positions: Option<&'a [u8]>, batch: i64) -> Self {
        Postings {
            list,
            at: 0,
            positions,
            at_position: 0,
            chunk: 0,
            batch,
        }
    }

    fn next_posting(&mut self) -> Result<Posting<'a>, Malformed> {
        let delta = varint(self.list, &mut self.at)?;
        let back = varint(self.list, &mut self.at)?;
        let count = u32::try_from(varint(self.list, &mut self.at)?).map_err(|_| Malformed)?;
        let positions = match self.positions {
            Some(bytes) => {
                // This chunk's positions: `count` varints, each ending at a
                // byte under 0x80.
                let start = self.at_position;
                let mut left = count;
                while left > 0 {
                    let b = *bytes.get(self.at_position).ok_or(Malformed)?;
                    self.at_position += 1;
                    if b < 0x80 {
                        left -= 1;
                    }
                }
                Some(&bytes[start..self.at_position])
            }
            None => None,
        };
        self.chunk = i64::try_from(delta)
            .ok()
            .and_then(|d| self.chunk.checked_add(d))
            .ok_or(Malformed)?;
        let back = i64::try_from(back).map_err(|_| Malformed)?;
        Ok(Posting {
            chunk_id: self.chunk,
            batch: self.batch - back,
            count,
            positions,
        })
    }
}

impl<'a> Iterator for Postings<'a> {
    type Item = Result<Posting<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.list.len() {
            return None;
        }
        let next = self.next_posting();
        if next.is_err() {
            // Nothing after a malformed posting can be read.
            self.at = self.list.len();
        }
        Some(next)
    }
}

/// One lexeme's postings while a batch is gathered: encoded as they come
/// while chunk ids rise (a push sends each file's chunks in order), kept
/// apart and sorted at the end when they do not (chunks of files that grew
/// in turn, a merge of batches).
enum List {
    Encoded {
        list: Vec<u8>,
        positions: Vec<u8>,
        last: i64,
    },
    Unordered(Vec<(i64, u64, Vec<u32>)>),
}

impl List {
    fn add(&mut self, chunk_id: i64, back: u64, positions: &[u32]) {
        match self {
            List::Encoded {
                list,
                positions: encoded,
                last,
            } if chunk_id > *last => {
                put_varint(list, (chunk_id - *last) as u64);
                *last = chunk_id;
                encode_rest(list, encoded, back, positions);
            }
            List::Encoded {
                list,
                positions: encoded,
                ..
            } => {
                let mut owned: Vec<(i64, u64, Vec<u32>)> = Postings::new(list, Some(encoded), 0)
                    .filter_map(Result::ok)
                    .map(|p| {
                        let positions = p.positions().unwrap_or_default();
                        (p.chunk_id, (-p.batch) as u64, positions)
                    })
                    .collect();
                owned.push((chunk_id, back, positions.to_vec()));
                *self = List::Unordered(owned);
            }
            List::Unordered(owned) => owned.push((chunk_id, back, positions.to_vec())),
        }
    }

    /// The list and its positions.
    fn into_bytes(self) -> (Vec<u8>, Vec<u8>) {
        match self {
            List::Encoded {
                list, positions, ..
            } => (list, positions),
            List::Unordered(mut owned) => {
                owned.sort_unstable_by_key(|(chunk, back, _)| (*chunk, *back));
                let (mut list, mut encoded, mut last) = (Vec::new(), Vec::new(), 0);
                for (chunk, back, positions) in owned {
                    put_varint(&mut list, (chunk - last) as u64);
                    last = chunk;
                    encode_rest(&mut list, &mut encoded, back, &positions);
                }
                (list, encoded)
            }
        }
    }
}

/// A posting after its chunk id: batch back and count in the list, the
/// positions apart.
fn encode_rest(list: &mut Vec<u8>, encoded: &mut Vec<u8>, back: u64, positions: &[u32]) {
    put_varint(list, back);
    put_varint(list, positions.len() as u64);
    let mut last = 0;
    for &pos in positions {
        put_varint(encoded, u64::from(pos - last));
        last = pos;
    }
}

/// The word index of one batch while it is gathered.
#[derive(Default)]
pub struct BatchWords {
    lists: HashMap<String, List>,
    /// Texts and word tokens indexed (for `word_batches`).
    pub chunks: i64,
    pub tokens: i64,
}

impl BatchWords {
    /// Adds that `lexeme` occurs at `positions` (ascending) in chunk
    /// `chunk_id`, written `back` batches before this one (0 in a push).
    pub fn add(&mut self, lexeme: &str, chunk_id: i64, back: u64, positions: &[u32]) {
        match self.lists.get_mut(lexeme) {
            Some(list) => list.add(chunk_id, back, positions),
            None => {
                let mut list = List::Encoded {
                    list: Vec::new(),
                    positions: Vec::new(),
                    last: 0,
                };
                list.add(chunk_id, back, positions);
                self.lists.insert(lexeme.to_owned(), list);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The lists packed into blocks: lexemes sorted bytewise (as
    /// `COLLATE "C"` sorts them), a block ending once its lists and
    /// positions reach `BLOCK_BYTES`. Also their total size.
    pub fn into_blocks(self) -> (Vec<Block>, usize) {
        let mut lists: Vec<(String, List)> = self.lists.into_iter().collect();
        lists.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let (mut blocks, mut total) = (Vec::new(), 0);
        let mut block = Block::default();
        for (lexeme, list) in lists {
            let (list, positions) = list.into_bytes();
            total += list.len() + positions.len();
            block.push(lexeme, &list, &positions);
            if block.lists.len() + block.positions.len() >= BLOCK_BYTES {
                blocks.push(std::mem::take(&mut block));
            }
        }
        if !block.lexemes.is_empty() {
            blocks.push(block);
        }
        (blocks, total)
    }
}

/// One row of `words`: `lexemes[i]`'s list is `lists[list_ends[i - 1]..
/// list_ends[i]]` (from 0 for the first), its positions the same in
/// `positions` and `position_ends`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Block {
    pub lexemes: Vec<String>,
    pub lists: Vec<u8>,
    pub list_ends: Vec<i32>,
    pub positions: Vec<u8>,
    pub position_ends: Vec<i32>,
}

impl Block {
    /// The row's key: its first lexeme.
    pub fn first(&self) -> &str {
        self.lexemes.first().map_or("", String::as_str)
    }

    fn push(&mut self, lexeme: String, list: &[u8], positions: &[u8]) {
        self.lexemes.push(lexeme);
        self.lists.extend_from_slice(list);
        self.list_ends.push(self.lists.len() as i32);
        self.positions.extend_from_slice(positions);
        self.position_ends.push(self.positions.len() as i32);
    }

    /// Lexeme `i`'s postings, with their positions, in a row of batch
    /// `batch` (an error when the row's ends do not give them).
    pub fn postings(&self, i: usize, batch: i64) -> Result<Postings<'_>, Malformed> {
        let (list, positions) = self.get(i).ok_or(Malformed)?;
        Ok(Postings::new(list, Some(positions), batch))
    }

    /// Lexeme `i`'s list and positions.
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let slice = |bytes: &'_ [u8], ends: &[i32]| -> Option<std::ops::Range<usize>> {
            let end = usize::try_from(*ends.get(i)?).ok()?;
            let start = match i {
                0 => 0,
                _ => usize::try_from(*ends.get(i - 1)?).ok()?,
            };
            (start <= end && end <= bytes.len()).then_some(start..end)
        };
        let list = slice(&self.lists, &self.list_ends)?;
        let positions = slice(&self.positions, &self.position_ends)?;
        Some((&self.lists[list], &self.positions[positions]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(block: &Block, i: usize, batch: i64) -> Vec<(i64, i64, Vec<u32>)> {
        let (list, positions) = block.get(i).unwrap();
        Postings::new(list, Some(positions), batch)
            .map(|p| {
                let p = p.unwrap();
                (p.chunk_id, p.batch, p.positions().unwrap())
            })
            .collect()
    }

    #[test]
    fn lists_read_back_what_was_added_in_chunk_order() {
        let mut words = BatchWords::default();
        words.add("b", 7, 0, &[0, 3, 300]);
        words.add("a", 2, 0, &[1]);
        words.add("b", 9, 2, &[5]);
        // Out of order (a file that grew after another): sorted at the end.
        words.add("b", 4, 0, &[2, 200_000]);
        let (blocks, total) = words.into_blocks();
        assert_eq!(blocks.len(), 1);
        let block = &blocks[0];
        assert_eq!(block.lexemes, ["a", "b"]);
        assert_eq!(block.first(), "a");
        assert_eq!(total, block.lists.len() + block.positions.len());
        assert_eq!(decoded(block, 0, 10), [(2, 10, vec![1])]);
        assert_eq!(
            decoded(block, 1, 10),
            [
                (4, 10, vec![2, 200_000]),
                (7, 10, vec![0, 3, 300]),
                (9, 8, vec![5])
            ]
        );
        // Without their positions, the lists still give counts.
        let (list, _) = block.get(1).unwrap();
        let counts: Vec<u32> = Postings::new(list, None, 10)
            .map(|p| p.unwrap().count)
            .collect();
        assert_eq!(counts, [2, 3, 1]);
        assert!(block.get(2).is_none());
    }

    #[test]
    fn blocks_are_sorted_bytewise_and_cut_by_size() {
        let mut words = BatchWords::default();
        let positions: Vec<u32> = (0..2_000).collect();
        for lexeme in ["z", "é", "a", "ab", "B"] {
            for chunk in 1..=10 {
                words.add(lexeme, chunk, 0, &positions);
            }
        }
        let (blocks, _) = words.into_blocks();
        let all: Vec<&str> = blocks
            .iter()
            .flat_map(|b| b.lexemes.iter().map(String::as_str))
            .collect();
        assert_eq!(all, ["B", "a", "ab", "z", "é"]);
        assert!(blocks.len() > 1, "each list is over 20 KB");
        assert!(blocks.iter().all(|b| !b.lexemes.is_empty()));
    }

    #[test]
    fn a_cut_list_is_an_error_not_a_panic() {
        let mut words = BatchWords::default();
        words.add("a", 1, 0, &[1, 2, 3]);
        words.add("a", 2, 0, &[4]);
        let (blocks, _) = words.into_blocks();
        let (list, positions) = blocks[0].get(0).unwrap();
        for cut in 0..list.len() {
            // What comes before the cut is read, then one error at most.
            let read: Vec<_> = Postings::new(&list[..cut], Some(positions), 1).collect();
            assert!(
                read.iter().rev().skip(1).all(Result::is_ok),
                "list cut at {cut}"
            );
        }
        assert!(Postings::new(&list[..1], None, 1).next().unwrap().is_err());
        for cut in 0..positions.len() {
            let read: Vec<_> = Postings::new(list, Some(&positions[..cut]), 1).collect();
            assert!(read.iter().any(Result::is_err), "positions cut at {cut}");
        }
        assert!(Postings::new(&[0xff; 12], None, 1).next().unwrap().is_err());
    }
}
