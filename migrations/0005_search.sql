-- piidx schema 2 (search): a trigram FTS5 index for text in scripts written
-- without spaces (CJK, kana, hangul, Thai, ...), which unicode61 keeps as one
-- token per run and so cannot find a word inside.
--
-- Only chunks containing such characters are indexed (the writer decides per
-- chunk with normalize-independent rules in src/query/search_query.rs;
-- docs/search.md has the measurements behind this choice). Membership is
-- read back from fts_trigram_docsize when a file's rows are deleted.

CREATE VIRTUAL TABLE fts_trigram USING fts5(
  body,
  content = 'fts_content',
  content_rowid = 'chunk_id',
  tokenize = 'trigram'
);

-- Databases indexed before this migration: index their qualifying chunks now
-- (same character ranges as search_query::is_unspaced_script).
INSERT INTO fts_trigram(rowid, body)
SELECT chunk_id, body FROM fts_content
WHERE body GLOB '*[฀-໿က-႟ក-៿぀-ヿ㄀-ㄯ㐀-䶿一-鿿가-힯豈-﫿ｦ-ﾟ𠀀-𿿿]*';
